"""Counter-based random bits: the Threefry-2x32 block cipher (20 rounds), as in JAX."""
from __future__ import annotations

import numpy as np

from functrans.core import DTypeError, ShapedArray
from .base import aval_of, bdim_size, broadcast_batched, defprim, moveaxis, naryop
from .shape import broadcast_in_dim

_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))


def _threefry_impl(xp, *args):
    with np.errstate(over="ignore"):      # uint32 wraparound is part of the cipher
        return _threefry_rounds(xp, *args)


def _threefry_rounds(xp, k0, k1, x0, x1):
    u32 = np.uint32
    k0, k1 = xp.asarray(k0, u32), xp.asarray(k1, u32)
    x0, x1 = xp.asarray(x0, u32).copy(), xp.asarray(x1, u32).copy()
    k2 = k0 ^ k1 ^ u32(0x1BD11BDA)
    keys = (k0, k1, k2)

    def rotl(v, r):
        return (v << u32(r)) | (v >> u32(32 - r))
    x0 = x0 + k0
    x1 = x1 + k1
    for block in range(5):
        for r in _ROTATIONS[block % 2]:
            x0 = x0 + x1
            x1 = rotl(x1, r) ^ x0
        x0 = x0 + keys[(block + 1) % 3]
        x1 = x1 + keys[(block + 2) % 3] + u32(block + 1)
    return [x0, x1]


def _threefry_shape(k0, k1, x0, x1):
    for a in (k0, k1, x0, x1):
        if a.dtype != np.uint32:
            raise DTypeError(f"operands must be uint32, got {a.str_short()}")
    out = naryop("u", nargs=4)(k0, k1, x0, x1)
    return [ShapedArray(out.shape, np.uint32), ShapedArray(out.shape, np.uint32)]


def _threefry_batch(vals, dims):
    size = bdim_size(vals, dims)
    shape = max((aval_of(v).shape[:d] + aval_of(v).shape[d + 1:] if d is not None
                 else aval_of(v).shape for v, d in zip(vals, dims)), key=len)
    args = []
    for v, d in zip(vals, dims):
        v = broadcast_batched(v, size) if d is None else moveaxis(v, d, 0)
        if aval_of(v).shape != (size,) + tuple(shape):
            v = broadcast_in_dim(v, shape=(size,) + tuple(shape), broadcast_dimensions=(0,)
                                 if aval_of(v).ndim == 1 else tuple(range(aval_of(v).ndim)))
        args.append(v)
    return threefry2x32(*args), [0, 0]


threefry2x32_p = defprim("threefry2x32", _threefry_impl, _threefry_shape, multiple_results=True,
                         differentiable=False, batch=_threefry_batch, fresh=True)
threefry2x32 = threefry2x32_p.bind
