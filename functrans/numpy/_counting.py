"""functrans.numpy's searching and counting: searchsorted, unique, bincount, histogram,
histogram_bin_edges and interp, with jax.numpy's signatures.

Each is a composition of comparisons, sorts and sums, so it traces, batches and (where the
result is a function of floating values: unique's values, histogram's weights, interp)
differentiates like its parts. A result whose length depends on the values (unique,
bincount) takes a static length under tracing (`size=`, `length=`), as in JAX, and says so
when it is missing.
"""
from __future__ import annotations

import builtins
import operator

import numpy as _np

from .. import core
from ..core import to_concrete
from functrans.primitives import elementwise as ew
from functrans.primitives import reductions as red
from functrans.primitives import shape as sh
from ._promotion import (
    _DEFAULT, _as_operand, _axis, _broadcast_to_shape, _inexact, _result_type, _shape,
    _to_dtype, astype, concatenate, expand_dims, ravel, reshape)
from ._shapes import diff, moveaxis, ndim
from ._creation import linspace
from ._elementwise import (
    add, divide, equal, isnan, less, logical_and, logical_not, logical_or, multiply, not_equal,
    subtract, where)
from ._reductions import any as _any
from ._reductions import max as _max
from ._reductions import min as _min
from ._reductions import sum as _sum
from ._indexing import nonzero, take

_SEARCH_METHODS = ("scan", "scan_unrolled", "sort", "compare_all")


def _nan_last_less(a, b):
    """a < b in NumPy's sort order, where NaN comes after every number (and equals NaN)."""
    lt = less(a, b)
    if _np.dtype(a.dtype).kind not in "fc":
        return lt
    return logical_or(lt, logical_and(isnan(b), logical_not(isnan(a))))


def searchsorted(a, v, side="left", sorter=None, *, method="scan"):
    """Where v's elements would go in the sorted 1-D array a to keep it sorted: the number
    of a's elements before each v (< v for side 'left', <= v for 'right'; NaN sorts last).
    Every pair is compared once (a sum over len(a) booleans per element of v), which is
    what `method='compare_all'` means in JAX; the other method names are accepted and give
    the same int32 indices."""
    if side not in ("left", "right"):
        raise ValueError(f"{side!r} is an invalid value for keyword 'side'; use 'left' or "
                         "'right'")
    if method not in _SEARCH_METHODS:
        raise ValueError(f"{method!r} is an invalid value for keyword 'method'; use one of "
                         f"{list(_SEARCH_METHODS)}")
    a, v = _as_operand(a), _as_operand(v)
    if ndim(a) != 1:
        raise ValueError(f"searchsorted: a should be 1-dimensional, got shape {_shape(a)}")
    if sorter is not None:
        a = take(a, sorter)
    dt, _ = _result_type(a, v)
    a, v = _to_dtype(a, dt), _to_dtype(v, dt)
    n = _shape(a)[0]
    grid = _shape(v) + (n,)
    av = _broadcast_to_shape(reshape(a, (1,) * ndim(v) + (n,)), grid)
    vv = _broadcast_to_shape(expand_dims(v, -1), grid)
    before = _nan_last_less(av, vv) if side == "left" else \
        logical_not(_nan_last_less(vv, av))
    return _sum(astype(before, _np.int32), axis=-1, dtype=_np.int32)


# ---------------------------------------------------------------------------
# unique

def _concrete(value, name, arg, what):
    """value's concrete array; a traced value without one raises JAX's
    ConcretizationTypeError naming the static argument that replaces it."""
    c = to_concrete(value)
    if c is None:
        raise core.ConcretizationTypeError(
            f"{name}: {what} depends on the values of the traced array "
            f"{value.aval.str_short()}, so it is not known while tracing; pass {arg} (a "
            f"static int) to fix it, as jax.numpy.{name} under jit or vmap")
    return c


def unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None, *,
           equal_nan=True, size=None, fill_value=None, sorted=True):
    """The sorted unique elements of ar (its unique slices along axis), and optionally the
    index of each one's first occurrence, the inverse indices that rebuild ar and the counts.
    The number of them depends on the values: traced input needs `size=` (results cut or
    padded to size; the values with fill_value, by default the smallest value; indices with
    the first one's; counts with 0). NaNs count as one value when equal_nan."""
    if not sorted:
        raise NotImplementedError("unique: sorted=False is not supported (as in jax.numpy); "
                                  "the unique values come sorted")
    x = _as_operand(ar)
    if size is None:      # computed on the concrete values, constant in them (as in JAX)
        x = _concrete(x, "unique", "size=", "the number of unique values")
    shape = _shape(x)
    if axis is None:
        rows, axis_ = reshape(x, (-1, 1)), None
    else:
        axis_ = _axis(axis, len(shape), "unique")
        moved = moveaxis(x, axis_, 0)
        rest = _shape(moved)[1:]
        rows = reshape(moved, (_shape(moved)[0], int(_np.prod(rest, dtype=int))))
    n, k = _shape(rows)
    idt = _DEFAULT["i"]
    if n == 0:                      # nothing unique: empty results (a size= has no fill)
        if size:
            raise ValueError(f"unique: size={size} needs a value to fill with, but the array "
                             f"of shape {shape} has no elements along the unique axis")
        empty = _np.zeros((0,), _np.dtype(x.dtype)) if axis_ is None else x
        ints = _np.zeros((0,), idt)
        out = [empty] + [ints] * (return_index + return_inverse + return_counts)
        return out[0] if len(out) == 1 else tuple(out)
    # rows sorted lexicographically (column 0 first, NaN last), stably: first occurrences
    # lead their runs of equal rows
    index = sh.iota(dtype=idt, shape=(n,), dimension=0)
    cols = [reshape(sh.slice(rows, start_indices=(0, j), limit_indices=(n, j + 1),
                             strides=None), (n,)) for j in range(k)]
    perm = red.sort(*cols, index, dimension=0, num_keys=k)[-1]
    srt = take(rows, perm, axis=0)
    head = sh.slice(srt, start_indices=(0, 0), limit_indices=(n - 1, k), strides=None)
    tail = sh.slice(srt, start_indices=(1, 0), limit_indices=(n, k), strides=None)
    differs = not_equal(head, tail)
    if equal_nan and _np.dtype(x.dtype).kind in "fc":
        differs = logical_and(differs, logical_not(logical_and(isnan(head), isnan(tail))))
    starts_mask = concatenate([_np.ones(1, bool), _any(differs, axis=1)])
    size = operator.index(int(to_concrete(_sum(starts_mask))) if size is None else size)
    count = _sum(starts_mask, dtype=idt)
    valid = less(sh.iota(dtype=idt, shape=(size,), dimension=0), count)
    (starts,) = nonzero(starts_mask, size=size, fill_value=0)
    values = take(srt, starts, axis=0)
    if fill_value is not None:
        values = where(expand_dims(valid, 1), values, _np.asarray(fill_value, x.dtype))
    if axis_ is None:
        values = reshape(values, (size,))
    else:
        values = moveaxis(reshape(values, (size,) + rest), 0, axis_)
    out = [values]
    if return_index:
        out.append(take(perm, starts))
    if return_inverse:
        group = subtract(astype(red.cumsum(astype(starts_mask, idt), axis=0, reverse=False),
                                idt), _np.asarray(1, idt))
        inv = take(group, red.sort(perm, index, dimension=0, num_keys=1)[1])
        out.append(reshape(inv, shape) if axis_ is None else inv)
    if return_counts:
        (bounds,) = nonzero(starts_mask, size=size + 1, fill_value=n)
        out.append(astype(diff(bounds), idt))
    return out[0] if len(out) == 1 else tuple(out)


# ---------------------------------------------------------------------------
# counting into bins

def _one_hot_sum(idx, weights, length):
    """out[j] = sum of weights[i] where idx[i] == j, for j < length (other indices drop):
    every index compared with every bin, one pass of len(idx) * length booleans."""
    hit = equal(expand_dims(idx, -1), _np.arange(length, dtype=_np.dtype(idx.dtype)))
    w = _broadcast_to_shape(expand_dims(weights, -1), _shape(hit))
    return _sum(where(hit, w, _np.zeros((), _np.dtype(weights.dtype))), axis=0)


def bincount(x, weights=None, minlength=0, *, length=None):
    """The number of occurrences of each value 0..length-1 in the non-negative integer
    array x (the sum of `weights` at them); negative values count as 0 and values past
    length are dropped, as in JAX. length defaults to max(minlength, max(x) + 1), which a
    traced x cannot give: pass `length=` then."""
    x = _as_operand(x)
    if _np.dtype(x.dtype).kind not in "iub":
        raise TypeError(f"bincount: x argument must be an integer type, got {x.dtype}")
    if ndim(x) != 1:
        raise ValueError(f"bincount: only 1-dimensional input supported, got shape "
                         f"{_shape(x)}")
    if length is None:
        top = 0 if not _shape(x)[0] else int(_max(_concrete(
            x, "bincount", "length=", "the length of the result, max(x) + 1,"))) + 1
        length = builtins.max(operator.index(minlength), top)
    length = operator.index(length)
    w = _np.ones((), _DEFAULT["i"]) if weights is None else _as_operand(weights)
    w = _broadcast_to_shape(w, _shape(x)) if _shape(w) != _shape(x) else w
    idx = astype(x, _DEFAULT["i"])
    idx = where(less(idx, 0), _np.zeros((), _DEFAULT["i"]), idx)
    return _one_hot_sum(idx, w, length)


def histogram_bin_edges(a, bins=10, range=None, weights=None):
    """The bins+1 equally spaced edges from range (default: a's min to max, widened by 0.5
    each side when they are equal), or the given 1-D bins themselves."""
    if ndim(_as_operand(bins)) == 1:
        return _as_operand(bins)
    bins = operator.index(bins)
    x = ravel(_as_operand(a))
    dt = _inexact(x.dtype)
    if range is None:
        lo, hi = _to_dtype(_min(x), dt), _to_dtype(_max(x), dt)
    else:
        lo, hi = (_to_dtype(_as_operand(r), dt) for r in range)
    same = equal(lo, hi)
    lo = where(same, subtract(lo, _np.asarray(0.5, dt)), lo)
    hi = where(same, add(hi, _np.asarray(0.5, dt)), hi)
    return linspace(lo, hi, bins + 1, dtype=dt)


def histogram(a, bins=10, range=None, weights=None, density=None):
    """(counts, bin_edges): the number of a's elements in each half-open bin [e_i, e_i+1)
    (the last one closed), or the sum of their weights; density=True divides by the total
    and the bin widths. Values outside the edges are not counted."""
    edges = histogram_bin_edges(a, bins, range, weights)
    x = ravel(_as_operand(a))
    w = _np.ones((), _np.dtype(x.dtype)) if weights is None else ravel(_as_operand(weights))
    w = _broadcast_to_shape(w, _shape(x)) if _shape(w) != _shape(x) else w
    m = _shape(edges)[0]
    last = reshape(sh.slice(edges, start_indices=(m - 1,), limit_indices=(m,), strides=None),
                   ())
    slot = searchsorted(edges, x, side="right")          # 1..m-1 inside, 0 or m outside
    slot = where(equal(x, last), _np.asarray(m - 1, _np.int32), slot)
    counts = _one_hot_sum(slot, w, m)
    counts = sh.slice(counts, start_indices=(1,), limit_indices=(m,), strides=None)
    if density:
        dt = _inexact(counts.dtype)
        counts = divide(divide(_to_dtype(counts, dt), diff(edges)), _sum(counts))
    return counts, edges


def interp(x, xp, fp, left=None, right=None, period=None):
    """The piecewise linear interpolant through (xp, fp) at x (xp increasing); left/right
    (default fp[0], fp[-1]) outside the range, or with `period` the interpolant of the
    periodic extension. Differentiable in x and fp (and in xp)."""
    if isinstance(left, str) or isinstance(right, str):
        raise NotImplementedError("interp: left= and right= as strings ('extrapolate') "
                                  "are not supported; pass values")
    xv, xpv, fpv = _as_operand(x), _as_operand(xp), _as_operand(fp)
    if ndim(xpv) != 1 or ndim(fpv) != 1:
        raise ValueError(f"interp: xp and fp must be one-dimensional, got shapes "
                         f"{_shape(xpv)} and {_shape(fpv)}")
    if _shape(xpv) != _shape(fpv):
        raise ValueError(f"interp: xp and fp must have the same length, got shapes "
                         f"{_shape(xpv)} and {_shape(fpv)}")
    dt = _inexact(_result_type(xv, xpv)[0])
    fdt = _inexact(_result_type(fpv, _np.zeros((), dt))[0])
    xv, xpv, fpv = _to_dtype(xv, dt), _to_dtype(xpv, dt), _to_dtype(fpv, fdt)
    if period is not None:
        if left is not None or right is not None:
            raise ValueError("interp: left and right cannot be given with period")
        p = _to_dtype(_as_operand(period), dt)
        xv, xpv = ew.rem(ew.add(ew.rem(xv, _b(p, xv)), _b(p, xv)), _b(p, xv)), \
            ew.rem(ew.add(ew.rem(xpv, _b(p, xpv)), _b(p, xpv)), _b(p, xpv))
        order = red.sort(xpv, sh.iota(dtype=_np.int32, shape=_shape(xpv), dimension=0),
                         dimension=0, num_keys=1)[1]
        xpv, fpv = take(xpv, order), take(fpv, order)
        n = _shape(xpv)[0]
        xpv = concatenate([subtract(xpv[n - 1:], p), xpv, add(xpv[:1], p)])
        fpv = concatenate([fpv[n - 1:], fpv, fpv[:1]])
    n = _shape(xpv)[0]
    i = searchsorted(xpv, xv, side="right")
    i = where(less(i, 1), _np.int32(1), where(less(i, n - 1), i, _np.int32(n - 1)))
    x0, x1 = take(xpv, subtract(i, _np.int32(1))), take(xpv, i)
    f0, f1 = take(fpv, subtract(i, _np.int32(1))), take(fpv, i)
    dx = subtract(x1, x0)
    flat = ew.le(ew.abs(dx), _b(_np.asarray(_np.finfo(dt).eps, dt), dx))
    safe_dx = where(flat, _np.ones((), dt), dx)
    f = where(flat, f0, add(f0, multiply(divide(subtract(xv, x0), safe_dx), subtract(f1, f0))))
    if period is None:
        first = reshape(xpv[:1], ())
        last = reshape(xpv[n - 1:], ())
        f = where(less(xv, first), fpv[0] if left is None else left, f)
        f = where(less(last, xv), fpv[n - 1] if right is None else right, f)
    return f


def _b(v, like):
    """v broadcast to like's shape (elementwise primitives take equal shapes or scalars)."""
    return v if _shape(v) == _shape(like) or not _shape(v) and not _shape(like) else \
        _broadcast_to_shape(v, _shape(like))
