"""Reductions (sum, max, min, prod, argmax, argmin) and the cumulative sum."""
from __future__ import annotations

import math

import numpy as np

from functrans.core import DTypeError, ShapedArray, ShapeError, Zero
from .base import (ANY, NUMERIC, _zero_of, aval_of, defprim, full_like_aval, moveaxis,
                   self_rule)
from .elementwise import convert_element_type, div, eq, mul
from .shape import broadcast_in_dim, pad, reshape, slice as slice_, transpose


def _reduce_shape(kinds, out_dtype=None):
    def rule(x, axes):
        if x.dtype.kind not in kinds:
            raise DTypeError(f"operand must be numeric, got {x.str_short()}")
        if any(not 0 <= a < x.ndim for a in axes) or len(set(axes)) != len(axes):
            raise ShapeError(f"axes {axes} out of range for {x.str_short()}")
        shape = tuple(s for i, s in enumerate(x.shape) if i not in axes)
        return ShapedArray(shape, out_dtype or x.dtype, x.weak_type and out_dtype is None)
    return rule


def _reduce_batch(prim):
    def rule(vals, dims, axes, **params):
        x = moveaxis(vals[0], dims[0], 0)
        return prim.bind(x, axes=tuple(a + 1 for a in axes), **params), 0
    return rule


def _kept_dims(ndim, axes):
    return tuple(i for i in range(ndim) if i not in axes)


def _ufunc_reduce(name, ufunc, keep_dtype=False):
    """Reduction over axes: the ufunc's own method on NumPy (np.sum and friends add ~1 us
    of Python wrapper), xp.<name> elsewhere; keep_dtype: accumulate in the input dtype
    (a sum of int32 stays int32)."""
    def impl(xp, x, axes):
        x = xp.asarray(x)
        kw = {"dtype": x.dtype} if keep_dtype else {}
        if xp is np:
            return ufunc.reduce(x, axis=axes, **kw)
        return getattr(xp, name)(x, axis=axes, **kw)
    return impl


def _sum_transpose(ct, x, axes):
    shape = x.aval.shape
    return [broadcast_in_dim(ct, shape=shape, broadcast_dimensions=_kept_dims(len(shape), axes))]


def _sum_simplify(eqn, ins, s):
    """A sum over no axes is its operand."""
    return ins[0] if not eqn.params["axes"] and s.ok(ins[0]) else None


reduce_sum_p = defprim("reduce_sum", _ufunc_reduce("sum", np.add, keep_dtype=True),
                       _reduce_shape(NUMERIC), linear=True, transpose=_sum_transpose,
                       batch=self_rule(_reduce_batch), fresh=True, simplify=_sum_simplify)


def _extremum_jvp(prim):
    """Tangent of max/min: the mean of the tangents at the positions that attain it."""
    def rule(primals, tangents, axes):
        (x,), (t,) = primals, tangents
        ans = prim.bind(x, axes=axes)
        if type(t) is Zero or aval_of(x).dtype.kind not in "fc":
            return ans, _zero_of(prim, ans)
        shape = aval_of(x).shape
        kept = _kept_dims(len(shape), axes)
        dt = aval_of(x).dtype
        loc = convert_element_type(eq(x, broadcast_in_dim(ans, shape=shape, broadcast_dimensions=kept)),
                                   new_dtype=dt, weak_type=False)
        counts = reduce_sum(loc, axes=axes)
        return ans, div(reduce_sum(mul(t, loc), axes=axes), counts)
    return rule


reduce_max_p = defprim("reduce_max", _ufunc_reduce("max", np.maximum), _reduce_shape(ANY),
                       jvp=self_rule(_extremum_jvp), batch=self_rule(_reduce_batch),
                       fresh=True)
reduce_min_p = defprim("reduce_min", _ufunc_reduce("min", np.minimum), _reduce_shape(ANY),
                       jvp=self_rule(_extremum_jvp), batch=self_rule(_reduce_batch),
                       fresh=True)


def _exclusive_products(x):
    """For x of shape (m, n): out[:, i] = prod_{j != i} x[:, j], written with mul/pad/slice
    (a log-depth prefix scan each way), so it has derivatives of every order and no division."""

    m, n = aval_of(x).shape
    one = np.ones((), aval_of(x).dtype)

    def shift(v, s, right):          # v shifted along axis 1 by s, filled with ones
        if s >= n:
            return full_like_aval(1, aval_of(v))
        if right:
            part = slice_(v, start_indices=(0, 0), limit_indices=(m, n - s), strides=None)
            return pad(part, one, padding_config=((0, 0, 0), (s, 0, 0)))
        part = slice_(v, start_indices=(0, s), limit_indices=(m, n), strides=None)
        return pad(part, one, padding_config=((0, 0, 0), (0, s, 0)))

    def scan(v, right):              # inclusive prefix (right=True) or suffix products
        s = 1
        while s < n:
            v = mul(v, shift(v, s, right))
            s *= 2
        return v
    left = shift(scan(x, True), 1, True)       # exclusive prefix products
    right = shift(scan(x, False), 1, False)    # exclusive suffix products
    return mul(left, right)


def _prod_jvp(primals, tangents, axes):
    (x,), (t,) = primals, tangents
    ans = reduce_prod(x, axes=axes)
    if type(t) is Zero:
        return ans, _zero_of(reduce_prod_p, ans)
    shape = aval_of(x).shape
    kept = _kept_dims(len(shape), axes)
    perm = kept + tuple(axes)
    m = math.prod([shape[i] for i in kept])
    n = math.prod([shape[i] for i in axes])

    def to2d(v):
        if perm != tuple(range(len(perm))):           # no identity transposes in the IR
            v = transpose(v, permutation=perm)
        return reshape(v, new_sizes=(m, n))
    others = _exclusive_products(to2d(x))
    out_t = reduce_sum(mul(others, to2d(t)), axes=(1,))
    return ans, reshape(out_t, new_sizes=aval_of(ans).shape)


reduce_prod_p = defprim("reduce_prod", lambda xp, x, axes: xp.prod(x, axis=axes,
                                                                  dtype=np.asarray(x).dtype
                                                                  if xp is np else x.dtype),
                        _reduce_shape(NUMERIC), jvp=_prod_jvp, batch=self_rule(_reduce_batch),
                        fresh=True)


def _arg_shape(x, axes, index_dtype):
    if len(axes) != 1 or not 0 <= axes[0] < x.ndim:
        raise ShapeError(f"needs exactly one axis within the rank of {x.str_short()}, got {axes}")
    if x.shape[axes[0]] == 0:
        raise ShapeError(f"attempt to get argmax/argmin of an empty axis of {x.str_short()}")
    return ShapedArray(tuple(s for i, s in enumerate(x.shape) if i != axes[0]), index_dtype)


argmax_p = defprim("argmax", lambda xp, x, axes, index_dtype:
                   xp.argmax(x, axis=axes[0]).astype(index_dtype), _arg_shape,
                   differentiable=False, batch=self_rule(_reduce_batch), fresh=True)
argmin_p = defprim("argmin", lambda xp, x, axes, index_dtype:
                   xp.argmin(x, axis=axes[0]).astype(index_dtype), _arg_shape,
                   differentiable=False, batch=self_rule(_reduce_batch), fresh=True)


def _cumsum_impl(xp, x, axis, reverse):
    x = xp.asarray(x)
    if reverse:
        return xp.flip(xp.cumsum(xp.flip(x, axis), axis=axis, dtype=x.dtype), axis)
    return xp.cumsum(x, axis=axis, dtype=x.dtype)


def _cumsum_shape(x, axis, reverse):
    if not 0 <= axis < x.ndim:
        raise ShapeError(f"axis {axis} out of range for {x.str_short()}")
    if x.dtype.kind not in NUMERIC:
        raise DTypeError(f"operand must be numeric, got {x.str_short()}")
    return x


def _cumsum_batch(vals, dims, axis, reverse):
    x = moveaxis(vals[0], dims[0], 0)
    return cumsum(x, axis=axis + 1, reverse=reverse), 0


cumsum_p = defprim("cumsum", _cumsum_impl, _cumsum_shape, linear=True,
                   transpose=lambda ct, x, axis, reverse: [
                       cumsum(ct, axis=axis, reverse=not reverse)],
                   batch=_cumsum_batch, fresh=True)

reduce_sum = reduce_sum_p.bind
reduce_max = reduce_max_p.bind
reduce_min = reduce_min_p.bind
reduce_prod = reduce_prod_p.bind
argmax = argmax_p.bind
argmin = argmin_p.bind
cumsum = cumsum_p.bind
