"""ft.lax: thin wrappers over primitives (jax.lax's names), for users and rules alike."""
from __future__ import annotations

import numpy as np

from functrans.primitives.elementwise import (abs, acos, add, asin, atan, atan2, ceil, convert_element_type,  # noqa: F401
                                    cos, cosh, div, eq, erf, exp, expm1, floor, ge, gt,
                                    integer_pow, is_finite, le, log, log1p, logistic, lt, max,
                                    min, mul, ne, neg, pow, rem, round, rsqrt, select, sign,
                                    sin, sinh, sqrt, sub, tan, tanh)
from functrans.primitives import indexing as _ix
from functrans.primitives.indexing import gather, scatter, scatter_add  # noqa: F401
from functrans.primitives.linalg import dot_general  # noqa: F401
from functrans.primitives.reductions import (argmax, argmin, cumsum, reduce_max, reduce_min,  # noqa: F401
                                   reduce_prod, reduce_sum)
from functrans.primitives.shape import (broadcast_in_dim, concatenate, expand_dims,  # noqa: F401
                                        iota, pad, reshape, rev, slice, squeeze, transpose)
from functrans.primitives.misc import stop_gradient  # noqa: F401
from . import tree_util as _tu
from .batching import vmap as _vmap
from .control_flow import cond, fori_loop, scan, switch, while_loop  # noqa: F401
from .core import get_aval as _aval
from .higher_order.collectives import (all_gather, axis_index, axis_size, pmax,  # noqa: F401
                                       pmean, pmin, ppermute, psum, psum_scatter)


def _starts(operand, start_indices):
    """JAX's start indices: one integer scalar per axis (a sequence, or a 1-D array), a
    negative one counting from the end of its axis."""
    shape = _aval(operand).shape
    if len(start_indices) != len(shape):
        raise ValueError("Length of slice indices must match number of operand dimensions "
                         f"({len(start_indices)} vs {shape})")
    if not isinstance(start_indices, (list, tuple)):
        if _aval(start_indices).ndim != 1:
            raise ValueError(f"Slice indices must be a 1D sequence, got "
                             f"{_aval(start_indices).shape}")
        start_indices = [start_indices[k] for k in range(len(shape))]
    out = []
    for i, d in zip(start_indices, shape):
        if isinstance(i, (int, np.integer)):
            out.append(np.asarray(i + d if i < 0 else i, np.int32 if isinstance(i, int)
                                  else np.asarray(i).dtype))
        elif _aval(i).dtype.kind == "u":
            out.append(i)
        else:
            dt = _aval(i).dtype
            out.append(select(lt(i, np.zeros((), dt)), add(i, np.asarray(d, dt)), i))
    return out


def dynamic_slice(operand, start_indices, slice_sizes):
    """operand[start:start + size] on every axis, the starts traced values (clamped so the
    slice fits, as XLA)."""
    return _ix.dynamic_slice(operand, *_starts(operand, start_indices),
                             slice_sizes=tuple(int(s) for s in slice_sizes))


def dynamic_update_slice(operand, update, start_indices):
    """operand with `update` written at start_indices (clamped so it fits, as XLA)."""
    return _ix.dynamic_update_slice(operand, update, *_starts(operand, start_indices))


def map(f, xs, *, batch_size=None):  # noqa: A001  (jax.lax's name)
    """f over the leading axis of xs, one element at a time (a scan); with batch_size,
    vmap(f) over chunks of that size, the remainder in one last vmap, as JAX."""
    if batch_size is None:
        return scan(lambda c, x: (c, f(x)), (), xs)[1]
    leaves, tree = _tu.tree_flatten(xs)
    n = _aval(leaves[0]).shape[0]
    k, r = divmod(n, int(batch_size))
    m = k * int(batch_size)

    def rows(x, lo, hi):
        a = _aval(x)
        return slice(x, start_indices=(lo,) + (0,) * (a.ndim - 1),
                     limit_indices=(hi,) + a.shape[1:], strides=None)
    pieces = []
    if k:
        chunks = _tu.tree_unflatten(tree, [
            reshape(rows(x, 0, m), new_sizes=(k, int(batch_size)) + _aval(x).shape[1:])
            for x in leaves])
        ys = scan(lambda c, x: (c, _vmap(f)(x)), (), chunks)[1]
        pieces.append(_tu.tree_map(
            lambda y: reshape(y, new_sizes=(m,) + _aval(y).shape[2:]), ys))
    if r:
        pieces.append(_vmap(f)(_tu.tree_unflatten(tree, [rows(x, m, n) for x in leaves])))
    if len(pieces) == 1:
        return pieces[0]
    return _tu.tree_map(lambda a, b: concatenate(a, b, dimension=0), *pieces)
