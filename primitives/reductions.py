"""Reductions (sum, max, min, prod, argmax, argmin), the cumulative sum and sort."""
from __future__ import annotations

import math

import numpy as np

from functrans.core import DTypeError, ShapedArray, ShapeError, UndefinedPrimal, Zero
from .base import (ANY, NUMERIC, _zero_of, aval_of, defprim, full_like_aval,
                   instantiate, moveaxis, self_rule, tangent_aval)
from .elementwise import convert_element_type, div, eq, mul
from .shape import broadcast_in_dim, iota, pad, reshape, slice as slice_, transpose


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


class NativeSumRows:
    """The native sum of the rows of a matrix (a bias's gradient: backends/native/conv.py's
    sum_rows, installed by backends/cpu.py): `kernel(m, n, dtype)` asked when a program is
    lowered, a function (x, out) -> bool (False: x not C-contiguous, NumPy's reduction
    runs), or None (no compiler, cpu_backend="numpy", another dtype). NumPy adds the rows
    of such a sum one at a time, a call of its inner loop per row; the kernel adds them in
    the same order (the same bits) in one loop: 1024 rows of 128 floats about 4x faster."""

    kernel = None


NATIVE_SUM_ROWS = NativeSumRows()
SUM_ROWS_MIN = 1 << 14          # _sum_cpu: sums of at least so many elements


def _sum_cpu(eqn):
    """A float sum over the leading axes of at least SUM_ROWS_MIN elements (a bias's or a
    layer norm's weight gradient) by NATIVE_SUM_ROWS into the output buffer; NumPy's
    reduction where the kernel is missing or the operand not C-contiguous."""
    x = eqn.invars[0].aval
    axes = tuple(sorted(eqn.params["axes"]))
    k = len(axes)
    if NATIVE_SUM_ROWS.kernel is None or not 0 < k < x.ndim or axes != tuple(range(k)) or \
            x.size < SUM_ROWS_MIN:
        return None
    m, n = math.prod(x.shape[:k]), math.prod(x.shape[k:])
    kernel = NATIVE_SUM_ROWS.kernel(m, n, x.dtype)
    if kernel is None:
        return None

    def emit(ctx, ins, out):
        return [f"{ctx.g(kernel, 'sum_rows')}({ins[0]}, {out}) or "
                f"{ctx.g(np.add, 'add')}.reduce({ins[0]}, axis={axes}, out={out})"]
    return emit, lambda i: False


reduce_sum_p = defprim("reduce_sum", _ufunc_reduce("sum", np.add, keep_dtype=True),
                       _reduce_shape(NUMERIC), linear=True, transpose=_sum_transpose,
                       batch=self_rule(_reduce_batch), fresh=True, simplify=_sum_simplify,
                       cpu=_sum_cpu)


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

# ---------------------------------------------------------------------------
# sort: every operand permuted by the stable ascending order of the first num_keys
# (lexicographic; NaN sorts last, as in NumPy, JAX and PyTorch). Its derivative permutes
# the tangents the same way (they ride along as extra operands), and the transpose undoes
# a permutation by sorting with the permutation itself as the key.

def _sort_perm(xp, keys, dimension):
    if len(keys) == 1:
        return xp.argsort(keys[0], axis=dimension, kind="stable")
    moved = [xp.moveaxis(k, dimension, -1) for k in reversed(keys)]   # lexsort: last key
    return xp.moveaxis(xp.lexsort(moved), -1, dimension)               # is the primary one


def _sort_impl(xp, *operands, dimension, num_keys):
    perm = _sort_perm(xp, operands[:num_keys], dimension)
    return [xp.take_along_axis(o, perm, axis=dimension) for o in operands]


def _sort_shape(*operands, dimension, num_keys):
    first = operands[0]
    if not 1 <= num_keys <= len(operands):
        raise ShapeError(f"num_keys={num_keys} needs between 1 and {len(operands)} operands")
    if any(o.shape != first.shape for o in operands):
        raise ShapeError("operands must have one shape, got "
                         + ", ".join(o.str_short() for o in operands))
    if not 0 <= dimension < first.ndim:
        raise ShapeError(f"dimension {dimension} out of range for {first.str_short()}")
    return [ShapedArray(o.shape, o.dtype, o.weak_type) for o in operands]


def _sort_jvp(primals, tangents, *, dimension, num_keys):
    outs = sort_p.bind(*primals, dimension=dimension, num_keys=num_keys)
    live = [i for i, t in enumerate(tangents) if type(t) is not Zero]
    touts = [Zero(tangent_aval(aval_of(o))) for o in outs]
    if live:
        moved = sort_p.bind(*primals[:num_keys], *[tangents[i] for i in live],
                            dimension=dimension, num_keys=num_keys)[num_keys:]
        for i, t in zip(live, moved):
            touts[i] = t
    return outs, touts


def _sort_transpose(cts, *args, dimension, num_keys):
    keys = args[:num_keys]
    if any(type(k) is UndefinedPrimal for k in keys):
        raise NotImplementedError("sort: the transpose is linear in the operands after the "
                                  "keys only; the keys must be known")
    shape = aval_of(keys[0]).shape
    index = iota(dtype=np.dtype(np.int64), shape=shape, dimension=dimension)
    perm = sort_p.bind(*keys, index, dimension=dimension, num_keys=num_keys)[-1]
    out = [None] * len(args)
    lin = [i for i in range(num_keys, len(args)) if type(cts[i]) is not Zero]
    if lin:
        back = sort_p.bind(perm, *[instantiate(cts[i]) for i in lin], dimension=dimension,
                           num_keys=1)[1:]
        for i, b in zip(lin, back):
            out[i] = b
    for i in range(num_keys, len(args)):
        if out[i] is None:
            out[i] = Zero(aval_of(args[i]))
    return out


def _sort_batch(vals, dims, *, dimension, num_keys):
    n = next(v.shape[d] for v, d in zip(vals, dims) if d is not None)
    moved = []
    for v, d in zip(vals, dims):
        if d is None:
            nd = np.ndim(v)
            v = broadcast_in_dim(v, shape=(n,) + tuple(np.shape(v)),
                                 broadcast_dimensions=tuple(range(1, nd + 1)))
        else:
            v = moveaxis(v, d, 0)
        moved.append(v)
    return sort_p.bind(*moved, dimension=dimension + 1, num_keys=num_keys), [0] * len(vals)


sort_p = defprim("sort", _sort_impl, _sort_shape, jvp=_sort_jvp, transpose=_sort_transpose,
                 batch=_sort_batch, multiple_results=True, fresh=True)

reduce_sum = reduce_sum_p.bind
reduce_max = reduce_max_p.bind
reduce_min = reduce_min_p.bind
reduce_prod = reduce_prod_p.bind
argmax = argmax_p.bind
sort = sort_p.bind
argmin = argmin_p.bind
cumsum = cumsum_p.bind
