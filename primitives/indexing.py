"""Integer-array indexing: gather, scatter_add and scatter.

`indices` has shape batch + (k,) and indexes the first k axes of the operand; the result
has shape batch + operand.shape[k:]. Indices are clamped into bounds (as XLA's gather),
so gather and scatter_add are exact transposes of each other.
"""
from __future__ import annotations

import numpy as np

from functrans.core import DTypeError, ShapedArray, ShapeError, UndefinedPrimal, Zero
from .base import (aval_of, bdim_size, broadcast_batched, defprim, instantiate, moveaxis,
                   self_rule, zeros)


def _lin(x):
    return type(x) is UndefinedPrimal


def _index_tuple(xp, shape, idx):
    k = idx.shape[-1]
    bounds = np.asarray(shape[:k], dtype=np.int64) - 1
    idx = xp.clip(idx, 0, xp.asarray(bounds) if xp is not np else bounds)
    return tuple(idx[..., j] for j in range(k))


def _gather_impl(xp, x, idx):
    x = xp.asarray(x)
    if idx.shape[-1] == 1:
        return xp.take(x, idx[..., 0], axis=0, mode="clip")
    return x[_index_tuple(xp, x.shape, idx)]


def _check_idx(x, idx):
    if idx.dtype.kind not in "iu":
        raise DTypeError(f"indices must be integers, got {idx.str_short()}")
    if idx.ndim < 1 or idx.shape[-1] > x.ndim:
        raise ShapeError(f"indices {idx.str_short()} must have a last axis of at most "
                         f"{x.ndim} (the rank of the operand {x.str_short()})")
    return idx.shape[:-1] + x.shape[idx.shape[-1]:]


def _gather_shape(x, idx):
    return ShapedArray(_check_idx(x, idx), x.dtype, x.weak_type)


def _iota_index(size, idx_aval):
    """Index component selecting the batch element: shape idx.shape[:-1] + (1,)."""
    from .shape import broadcast_in_dim, iota
    shape = idx_aval.shape[:-1] + (1,)
    return broadcast_in_dim(iota(dtype=idx_aval.dtype, shape=(size,), dimension=0),
                            shape=shape, broadcast_dimensions=(0,))


def _with_batch_index(idx, size):
    from .shape import concatenate
    a = aval_of(idx)
    return concatenate(_iota_index(size, a), idx, dimension=a.ndim - 1)


def _gather_batch(vals, dims):
    (x, idx), (dx, di) = vals, dims
    if di is None:
        k = aval_of(idx).shape[-1]
        return gather(moveaxis(x, dx, k), idx), aval_of(idx).ndim - 1
    idx = moveaxis(idx, di, 0)
    if dx is None:
        return gather(x, idx), 0
    x = moveaxis(x, dx, 0)
    return gather(x, _with_batch_index(idx, aval_of(x).shape[0])), 0


gather_p = defprim("gather", _gather_impl, _gather_shape,
                   jvp=(lambda t, x, idx: gather(t, idx), None),
                   transpose=lambda ct, x, idx: [scatter_add(zeros(x.aval), idx, ct), None],
                   batch=_gather_batch, fresh=True)


def _scatter_shape(x, idx, upd):
    shape = _check_idx(x, idx)
    if upd.shape != shape or upd.dtype != x.dtype:
        raise ShapeError(f"updates {upd.str_short()} must have shape {shape} and the dtype of "
                         f"the operand {x.str_short()}")
    return ShapedArray(x.shape, x.dtype, x.weak_type)


def _scatter_add_impl(xp, x, idx, upd):
    out = xp.array(x, copy=True)
    index = _index_tuple(xp, out.shape, idx)
    if xp is np:
        np.add.at(out, index, upd)
    else:
        import cupyx
        cupyx.scatter_add(out, index, upd)
    return out


def _scatter_impl(xp, x, idx, upd):
    out = xp.array(x, copy=True)
    out[_index_tuple(xp, out.shape, idx)] = upd
    return out


def _scatter_jvp(prim):
    def rule(primals, tangents):
        x, idx, u = primals
        tx, _, tu = tangents
        ans = prim.bind(x, idx, u)
        if type(tx) is Zero and type(tu) is Zero:
            return ans, Zero(aval_of(ans).strip_weak())
        return ans, prim.bind(instantiate(tx), idx, instantiate(tu))
    return rule


def _scatter_batch(prim):
    def rule(vals, dims):
        size = bdim_size(vals, dims)
        x, idx, u = [broadcast_batched(v, size) if d is None else moveaxis(v, d, 0)
                     for v, d in zip(vals, dims)]
        return prim.bind(x, _with_batch_index(idx, size), u), 0
    return rule


scatter_add_p = defprim(
    "scatter_add", _scatter_add_impl, _scatter_shape,
    transpose=lambda ct, x, idx, u: [ct if _lin(x) else None, None,
                                     gather(ct, idx) if _lin(u) else None],
    jvp=self_rule(_scatter_jvp), batch=self_rule(_scatter_batch), fresh=True)

scatter_p = defprim(
    "scatter", _scatter_impl, _scatter_shape,
    transpose=lambda ct, x, idx, u: [
        scatter(ct, idx, zeros(aval_of(u))) if _lin(x) else None, None,
        gather(ct, idx) if _lin(u) else None],
    jvp=self_rule(_scatter_jvp), batch=self_rule(_scatter_batch), fresh=True)

gather = gather_p.bind
scatter_add = scatter_add_p.bind
scatter = scatter_p.bind


# ---------------------------------------------------------------------------
# dynamic_slice / dynamic_update_slice with batched start indices become gather / scatter

def _window_indices(starts, shape, sizes, size):
    """Index array (B,) + sizes + (1 + ndim,) of the windows at the (batched) starts."""
    from .elementwise import add, convert_element_type, max, min
    from .shape import broadcast_in_dim, concatenate, iota
    out_shape = (size,) + tuple(sizes)
    comps = [broadcast_in_dim(iota(dtype=np.dtype(np.int32), shape=(size,), dimension=0),
                              shape=out_shape + (1,), broadcast_dimensions=(0,))]
    for j, (s, n, w) in enumerate(zip(starts, shape, sizes)):
        s = convert_element_type(s, new_dtype=np.dtype(np.int32), weak_type=False)
        s = min(max(s, np.int32(0)), np.int32(n - w))
        sb = broadcast_in_dim(s, shape=out_shape + (1,), broadcast_dimensions=(0,))
        off = iota(dtype=np.dtype(np.int32), shape=out_shape + (1,), dimension=j + 1)
        comps.append(add(sb, off))
    return concatenate(*comps, dimension=len(out_shape))


def gather_from_starts(vals, dims, slice_sizes):
    size = bdim_size(vals, dims)
    x, *starts = [broadcast_batched(v, size) if d is None else moveaxis(v, d, 0)
                  for v, d in zip(vals, dims)]
    idx = _window_indices(starts, aval_of(x).shape[1:], slice_sizes, size)
    return gather(x, idx), 0


def scatter_from_starts(vals, dims):
    size = bdim_size(vals, dims)
    x, u, *starts = [broadcast_batched(v, size) if d is None else moveaxis(v, d, 0)
                     for v, d in zip(vals, dims)]
    idx = _window_indices(starts, aval_of(x).shape[1:], aval_of(u).shape[1:], size)
    return scatter(x, idx, u), 0
