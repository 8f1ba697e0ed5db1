"""ft.nn.functional's normalize, cosine_similarity and flatten."""
from __future__ import annotations

from ...numpy import raw as fnp
from ...facade.reductions import vector_norm_fn
from ._dispatch import _call, _is_facade, _raw


# ---------------------------------------------------------------------------
# misc


def _normalize_fn(x, *, p, dim, eps):
    n = vector_norm_fn(x, dim, True, p)
    return x / fnp.maximum(n, eps)


def normalize(input, p=2.0, dim=1, eps=1e-12):
    """x / max(||x||_p, eps) along dim."""
    return _call("DivBackward0", _normalize_fn, (input,), p=float(p), dim=int(dim),
                 eps=float(eps))


def _clamped_norm(x, dim, eps):
    """||x|| along dim (kept), raised to eps in value only: torch clamps the norms in place
    under no_grad, so the derivative is the norm's own (0 at a zero vector)."""
    n = vector_norm_fn(x, dim, True, 2)
    return n + fnp.stop_gradient(fnp.maximum(n, eps) - n)


def _cosine_fn(a, b, *, dim, eps):
    """torch's formula: both broadcast, each divided by its clamped norm, then the sum of
    the products (x / ||x|| first, for precision, as scipy)."""
    a, b = fnp.broadcast_arrays(a, b)
    return fnp.sum((a / _clamped_norm(a, dim, eps)) * (b / _clamped_norm(b, dim, eps)),
                   axis=dim)


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """sum(x1 * x2) / (max(|x1|, eps) max(|x2|, eps)) along dim (torch's grad_fn: the
    final sum of its composite, SumBackward1)."""
    return _call("SumBackward1", _cosine_fn, (x1, x2), dim=int(dim), eps=float(eps))


def _flatten_fn(x, *, start, end):
    s = tuple(x.shape)
    if not s:
        return fnp.reshape(x, (1,))
    mid = 1
    for v in s[start:end + 1]:
        mid *= v
    return fnp.reshape(x, s[:start] + (mid,) + s[end + 1:])


def flatten(input, start_dim=0, end_dim=-1):
    """Merge dims start_dim..end_dim (Tensors: the Tensor's own flatten, a view)."""
    if _is_facade(input):
        return input.flatten(start_dim, end_dim)
    x = _raw(input)
    nd = max(fnp.ndim(x), 1)
    return _flatten_fn(x, start=start_dim % nd, end=end_dim % nd)
