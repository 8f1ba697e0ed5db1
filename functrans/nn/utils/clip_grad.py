"""torch.nn.utils.clip_grad: gradient clipping, and parameter/vector conversion."""
from __future__ import annotations

import math

import numpy as np

from ...facade import creation as C
from ...facade import ops
from ...facade.grad_mode import no_grad
from ...facade.tensor import Tensor


def _grads(parameters):
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return [p.grad for p in parameters if p.grad is not None]


def _host(g):
    d = g._data
    return d if type(d) is np.ndarray else d.get()


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False,
                    foreach=None):
    """Scale all gradients in place by max_norm / (total_norm + 1e-6) when that is below 1.

    total_norm is the norm of the vector of every gradient's norm (the norm of all gradients
    concatenated); it is returned as a tensor, before clipping."""
    grads = _grads(parameters)
    max_norm, norm_type = float(max_norm), float(norm_type)
    if not grads:
        return C.tensor(0.0)
    dtype = grads[0].dtype
    arrays = [_host(g) for g in grads]
    if math.isinf(norm_type):
        norms = [np.max(np.abs(a)) if a.size else np.zeros((), a.dtype) for a in arrays]
        total = np.max(np.stack([np.asarray(n, dtype) for n in norms]))
    else:
        norms = [np.asarray(_vector_norm(a, norm_type), dtype) for a in arrays]
        total = np.asarray(_vector_norm(np.stack(norms), norm_type), dtype)
    if error_if_nonfinite and not np.isfinite(total):
        raise RuntimeError(f"The total norm of order {norm_type} for gradients from `parameters` "
                           "is non-finite, so it cannot be clipped. To disable this error and "
                           "scale the gradients by the non-finite norm anyway, set "
                           "`error_if_nonfinite=False`")
    coef = np.asarray(max_norm / (total + 1e-6), dtype)
    coef = np.minimum(coef, np.asarray(1.0, dtype))
    with no_grad():
        for g in grads:
            g.mul_(Tensor._make(coef.astype(g.dtype)))
    return Tensor._make(np.asarray(total, dtype)).to(grads[0].device)


def _vector_norm(a, p):
    a = a.ravel()
    if p == 2.0:
        return np.sqrt(np.dot(a, a)) if a.dtype.kind == "f" else np.sqrt(np.sum(np.abs(a) ** 2))
    if p == 1.0:
        return np.sum(np.abs(a))
    if p == 0.0:
        return np.asarray(np.count_nonzero(a), a.dtype)
    return np.sum(np.abs(a) ** p) ** (1.0 / p)


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamp every gradient in place to [-clip_value, clip_value]."""
    clip_value = float(clip_value)
    with no_grad():
        for g in _grads(parameters):
            g.clamp_(min=-clip_value, max=clip_value)


def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """The norm of the norms of `tensors` (torch.nn.utils.get_total_norm)."""
    if isinstance(tensors, Tensor):
        tensors = [tensors]
    arrays = [_host(t.detach()) for t in tensors]
    if not arrays:
        return C.tensor(0.0)
    dtype = arrays[0].dtype
    p = float(norm_type)
    if math.isinf(p):
        total = np.max([np.max(np.abs(a)) for a in arrays])
    else:
        total = _vector_norm(np.stack([np.asarray(_vector_norm(a, p), dtype) for a in arrays]), p)
    if error_if_nonfinite and not np.isfinite(total):
        raise RuntimeError(f"The total norm of order {p} for gradients from `parameters` is "
                           "non-finite")
    return Tensor._make(np.asarray(total, dtype))


def parameters_to_vector(parameters):
    """All parameters flattened and concatenated into one 1-D tensor."""
    return ops.cat([p.reshape(-1) for p in parameters])


def vector_to_parameters(vec, parameters):
    """Copy consecutive slices of `vec` into the parameters (in place, without recording)."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected torch.Tensor, but got: {type(vec).__name__}")
    i = 0
    with no_grad():
        for p in parameters:
            n = p.numel()
            p.copy_(vec[i:i + n].view_as(p))
            i += n
