"""Parameter initializers (torch.nn.init): in-place, under no_grad, drawing from the facade's
global generator (seeded by ft.manual_seed)."""
from __future__ import annotations

import math
import warnings

import numpy as np

from ..facade import creation as C
from ..facade.grad_mode import no_grad


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for a nonlinearity (torch.nn.init.calculate_gain)."""
    linear = ["linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
              "conv_transpose3d"]
    if nonlinearity in linear or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, (int, float)):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor):
    """(fan_in, fan_out): size(1) and size(0) times the receptive field (dims 2...)."""
    if tensor.dim() < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 "
                         "dimensions")
    receptive = 1
    for s in tuple(tensor.shape)[2:]:
        receptive *= s
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _calculate_correct_fan(tensor, mode):
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    """Fill with U(a, b)."""
    with no_grad():
        return tensor.uniform_(a, b, generator=generator) if generator is not None \
            else tensor.uniform_(a, b)


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    """Fill with N(mean, std^2)."""
    with no_grad():
        return tensor.normal_(mean, std, generator=generator) if generator is not None \
            else tensor.normal_(mean, std)


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Fill with N(mean, std^2) truncated to [a, b] (out-of-range draws are redrawn)."""
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. "
                      "The distribution of values may be incorrect.", stacklevel=2)
    with no_grad():
        tmp = tensor.detach().clone()
        normal_(tmp, mean, std, generator)
        vals = tmp.numpy().astype(np.float64)
        bad = (vals < a) | (vals > b)
        for _ in range(1000):
            if not bad.any():
                break
            normal_(tmp, mean, std, generator)
            fresh = tmp.numpy()
            vals[bad] = fresh[bad]
            bad = (vals < a) | (vals > b)
        vals = np.clip(vals, a, b)
        tensor.copy_(_as_tensor(vals, tensor))
    return tensor


def constant_(tensor, val):
    """Fill with `val`."""
    with no_grad():
        return tensor.fill_(val)


def ones_(tensor):
    return constant_(tensor, 1.0)


def zeros_(tensor):
    with no_grad():
        return tensor.zero_()


def eye_(tensor):
    """Fill a 2-D tensor with the identity matrix."""
    if tensor.dim() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    with no_grad():
        tensor.copy_(_as_tensor(np.eye(*tuple(tensor.shape)), tensor))
    return tensor


def dirac_(tensor, groups=1):
    """Fill a {3,4,5}-D conv weight with the Dirac delta (identity convolution) per group."""
    dims = tensor.dim()
    if dims not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    shape = tuple(tensor.shape)
    if shape[0] % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    out_per_group = shape[0] // groups
    min_dim = min(out_per_group, shape[1])
    w = np.zeros(shape)
    for g in range(groups):
        for d in range(min_dim):
            idx = (g * out_per_group + d, d) + tuple(s // 2 for s in shape[2:])
            w[idx] = 1
    with no_grad():
        tensor.copy_(_as_tensor(w, tensor))
    return tensor


def xavier_uniform_(tensor, gain=1.0, generator=None):
    """U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)) (Glorot)."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    a = gain * math.sqrt(6.0 / float(fan_in + fan_out))
    return uniform_(tensor, -a, a, generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    """N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out)) (Glorot)."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return normal_(tensor, 0.0, std, generator)


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """U(-bound, bound), bound = gain * sqrt(3 / fan) (He); Linear/Conv use a=sqrt(5)."""
    if 0 in tuple(tensor.shape):
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=2)
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    std = calculate_gain(nonlinearity, a) / math.sqrt(fan)
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """N(0, std^2), std = gain / sqrt(fan) (He)."""
    if 0 in tuple(tensor.shape):
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=2)
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    std = calculate_gain(nonlinearity, a) / math.sqrt(fan)
    return normal_(tensor, 0.0, std, generator)


def orthogonal_(tensor, gain=1.0, generator=None):
    """A (semi-)orthogonal matrix from the QR decomposition of a Gaussian draw, times gain."""
    if tensor.dim() < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    with no_grad():
        tmp = tensor.detach().new_empty((rows, cols)) if hasattr(tensor, "new_empty") \
            else tensor.detach().clone().reshape(rows, cols)
        normal_(tmp, 0.0, 1.0, generator)
        flat = tmp.numpy().astype(np.float64)
        if rows < cols:
            flat = flat.T
        q, r = np.linalg.qr(flat)
        q = q * np.sign(np.diag(r))
        if rows < cols:
            q = q.T
        tensor.copy_(_as_tensor((gain * q).reshape(tuple(tensor.shape)), tensor))
    return tensor


def sparse_(tensor, sparsity, std=0.01, generator=None):
    """A 2-D matrix whose columns each have a `sparsity` fraction of zeros, else N(0, std^2)."""
    if tensor.dim() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = tuple(tensor.shape)
    num_zeros = int(math.ceil(sparsity * rows))
    with no_grad():
        normal_(tensor, 0.0, std, generator)
        vals = tensor.numpy().copy()
        u = tensor.detach().clone()
        for c in range(cols):
            uniform_(u, 0.0, 1.0)
            order = np.argsort(u.numpy()[:, c], kind="stable")
            vals[order[:num_zeros], c] = 0
        tensor.copy_(_as_tensor(vals, tensor))
    return tensor


def _as_tensor(arr, like):
    return C.tensor(np.asarray(arr), dtype=like.dtype, device=like.device)


# the pre-0.4 names without the trailing underscore are deprecated in PyTorch; not provided
