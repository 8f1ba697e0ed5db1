"""functrans.numpy's order statistics and NaN-ignoring reductions: quantile, percentile,
median (and their nan* forms), nansum, nanprod, nanmax, nanmin, nanmean, nanvar, nanstd,
nanargmax, nanargmin, with jax.numpy's signatures.

Quantiles sort along the reduced axes and interpolate between the two neighbouring order
statistics, so their gradient flows to those elements (and to q); the nan* reductions
replace NaN by the operation's identity and count what is left.
"""
from __future__ import annotations

import math

import numpy as _np

from functrans.primitives import elementwise as ew
from ._promotion import (
    _as_operand, _broadcast_to_shape, _inexact, _promote_float, _result_type, _shape,
    _to_dtype, astype, reshape)
from ._shapes import _canon_axis, transpose
from ._elementwise import (
    add, ceil, divide, floor, isnan, less_equal, logical_not, multiply, sqrt, subtract,
    where)
from ._reductions import (
    all, any, argmax, argmin, max, mean, min, prod, sort, sum)
from ._indexing import take_along_axis

_METHODS = ("linear", "lower", "higher", "midpoint", "nearest", "inverted_cdf",
            "averaged_inverted_cdf", "closest_observation", "interpolated_inverted_cdf",
            "hazen", "weibull", "median_unbiased", "normal_unbiased")
_SUPPORTED = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(a, q, axis, method, keepdims, ignore_nan, name, weights=None):
    """q-th quantiles of a over axis: result shape q.shape + the kept axes of a (1s for the
    reduced ones with keepdims). NaN in a slice gives NaN, unless ignore_nan, where the
    quantile is that of the other elements (NaN for an all-NaN slice)."""
    if weights is not None:
        raise NotImplementedError(f"{name}: weights= is not supported")
    if method not in _SUPPORTED:
        raise ValueError(f"{name}: method {method!r} is not supported; use one of "
                         f"{list(_SUPPORTED)}" if method in _METHODS else
                         f"{name}: unknown method {method!r}; use one of {list(_SUPPORTED)}")
    x, qv = _as_operand(a), _as_operand(q)
    dt = _inexact(_result_type(x, qv)[0])
    x, qv = _to_dtype(x, dt), _to_dtype(qv, dt)
    shape = _shape(x)
    if len(_shape(qv)) > 1:
        raise ValueError(f"{name}: q must be a scalar or 1-dimensional, got shape {_shape(qv)}")
    axes = _canon_axis(axis, len(shape))
    kept = [i for i in range(len(shape)) if i not in axes]
    n = math.prod(shape[i] for i in axes)
    # the reduced axes last, as one: (*kept, n), sorted (NaN last)
    x = reshape(transpose(x, tuple(kept) + axes), tuple(shape[i] for i in kept) + (n,))
    x = sort(x, axis=-1)
    qs, ks = _shape(qv), tuple(shape[i] for i in kept)
    grid = qs + ks + (1,)
    qb = _broadcast_to_shape(reshape(qv, qs + (1,) * (len(ks) + 1)), grid)
    if ignore_nan:
        count = sum(logical_not(isnan(x)), axis=-1, keepdims=True, dtype=dt)
        last = _broadcast_to_shape(reshape(subtract(count, 1), (1,) * len(qs) + ks + (1,)),
                                   grid)
    else:
        last = _broadcast_to_shape(_np.asarray(n - 1, dt), grid)
    pos = multiply(qb, last)
    lo = floor(pos)
    hi = ceil(pos)
    top = _np.asarray(n - 1, dt)
    xs = _broadcast_to_shape(reshape(x, (1,) * len(qs) + ks + (n,)), qs + ks + (n,))

    def at(p):
        """The order statistics at positions p (clamped into [0, n - 1])."""
        p = where(less_equal(p, 0), _np.zeros((), dt), where(less_equal(top, p), top, p))
        return reshape(take_along_axis(xs, astype(p, _np.int32), axis=-1), qs + ks)

    if method == "lower":
        out = at(lo)
    elif method == "higher":
        out = at(hi)
    elif method == "nearest":     # halfway goes to the lower one, as JAX (NumPy: the even)
        out = at(where(less_equal(subtract(pos, lo), 0.5), lo, hi))
    else:
        vlo, vhi = at(lo), at(hi)
        if method == "midpoint":
            out = multiply(add(vlo, vhi), _np.asarray(0.5, dt))
        else:
            w = reshape(subtract(pos, lo), qs + ks)
            out = add(multiply(vlo, subtract(_np.ones((), dt), w)), multiply(vhi, w))
    nan_slice = all(isnan(x), axis=-1) if ignore_nan else any(isnan(x), axis=-1)
    if ks or qs:
        nan_slice = _broadcast_to_shape(reshape(nan_slice, (1,) * len(qs) + ks), qs + ks)
    out = where(nan_slice, _np.asarray(_np.nan, dt), out)
    if keepdims:
        out = reshape(out, qs + tuple(1 if i in axes else s for i, s in enumerate(shape)))
    return out


def quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
             keepdims=False, *, weights=None):
    """The q-th quantiles (q in [0, 1]) of a over axis (all axes by default; an int or a
    tuple); method 'linear' (default), 'lower', 'higher', 'midpoint' or 'nearest'."""
    _no_out(out, "quantile")
    return _quantile(a, q, axis, method, keepdims, False, "quantile", weights)


def percentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
               keepdims=False, *, weights=None):
    """quantile with q in percent (0 to 100)."""
    _no_out(out, "percentile")
    return _quantile(a, divide(_promote_float(q)[0], 100), axis, method, keepdims, False,
                     "percentile", weights)


def median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """The middle value over axis (the mean of the two middle ones for an even count)."""
    _no_out(out, "median")
    return _quantile(a, 0.5, axis, "midpoint", keepdims, False, "median")


def nanquantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                keepdims=False, *, weights=None):
    """quantile ignoring NaN (NaN for a slice that has nothing else)."""
    _no_out(out, "nanquantile")
    return _quantile(a, q, axis, method, keepdims, True, "nanquantile", weights)


def nanpercentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                  keepdims=False, *, weights=None):
    _no_out(out, "nanpercentile")
    return _quantile(a, divide(_promote_float(q)[0], 100), axis, method, keepdims, True,
                     "nanpercentile", weights)


def nanmedian(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    _no_out(out, "nanmedian")
    return _quantile(a, 0.5, axis, "midpoint", keepdims, True, "nanmedian")


def _no_out(out, name):
    if out is not None:
        raise NotImplementedError(f"{name}: the out argument is not supported (arrays are "
                                  "immutable); use the returned value")


# ---------------------------------------------------------------------------
# reductions that skip NaN

def _inexact_operand(a):
    x = _as_operand(a)
    return x, _np.dtype(x.dtype).kind in "fc"


def _nan_to(x, value):
    """x with NaN replaced by value (of x's dtype)."""
    return where(isnan(x), _np.asarray(value, _np.dtype(x.dtype)), x)


def nansum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """sum treating NaN as 0."""
    x, inexact = _inexact_operand(a)
    return sum(_nan_to(x, 0) if inexact else x, axis=axis, dtype=dtype, out=out,
               keepdims=keepdims, initial=initial, where=where)


def nanprod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """prod treating NaN as 1."""
    x, inexact = _inexact_operand(a)
    return prod(_nan_to(x, 1) if inexact else x, axis=axis, dtype=dtype, out=out,
                keepdims=keepdims, initial=initial, where=where)


def _nan_extremum(reduce, fill, name):
    def f(a, axis=None, out=None, keepdims=False, initial=None, where=None):
        x, inexact = _inexact_operand(a)
        if not inexact:
            return reduce(x, axis=axis, out=out, keepdims=keepdims, initial=initial,
                          where=where)
        r = reduce(_nan_to(x, fill), axis=axis, out=out, keepdims=keepdims, initial=initial,
                   where=where)
        return _where(all(isnan(x), axis=axis, keepdims=keepdims), _np.nan, r)
    f.__name__ = name
    f.__doc__ = (f"{name[3:]} ignoring NaN; NaN where a slice holds nothing else (before "
                 "where=, as JAX).")
    return f


_where = where
nanmax = _nan_extremum(max, -_np.inf, "nanmax")
nanmin = _nan_extremum(min, _np.inf, "nanmin")


def _valid_count(x, axis, keepdims, where, dtype):
    """The number of non-NaN elements (where `where` is True) over axis."""
    return sum(logical_not(isnan(x)), axis=axis, keepdims=keepdims, where=where, dtype=dtype)


def nanmean(a, axis=None, dtype=None, out=None, keepdims=False, where=None):
    """mean of the non-NaN elements (NaN for a slice without any)."""
    _no_out(out, "nanmean")
    x, inexact = _inexact_operand(a)
    if not inexact:
        return mean(x, axis=axis, dtype=dtype, keepdims=keepdims, where=where)
    dt = _np.dtype(dtype) if dtype is not None else _np.dtype(x.dtype)
    x = _to_dtype(x, dt)
    return divide(nansum(x, axis=axis, keepdims=keepdims, where=where),
                  _valid_count(x, axis, keepdims, where, dt))


def nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, where=None,
           mean=None):
    """var of the non-NaN elements (NaN where fewer than ddof + 1 remain)."""
    _no_out(out, "nanvar")
    if mean is not None:
        raise NotImplementedError("nanvar: mean= is not supported")
    x = _as_operand(a)
    dt = _np.dtype(dtype) if dtype is not None else _inexact(x.dtype)
    x = _to_dtype(x, dt)
    m = nanmean(x, axis=axis, keepdims=True, where=where)
    c = _nan_to(subtract(x, m), 0)
    sq = ew.real(ew.mul(c, ew.conj(c))) if dt.kind == "c" else multiply(c, c)
    rdt = _np.dtype(sq.dtype)
    n = subtract(_valid_count(x, axis, keepdims, where, rdt), _np.asarray(ddof, rdt))
    empty = less_equal(n, 0)
    total = sum(sq, axis=axis, keepdims=keepdims, where=where)
    return _where(empty, _np.nan, divide(total, _where(empty, _np.ones((), rdt), n)))


def nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, where=None,
           mean=None):
    """sqrt of nanvar."""
    return sqrt(nanvar(a, axis=axis, dtype=dtype, out=out, ddof=ddof, keepdims=keepdims,
                       where=where, mean=mean))


def _nan_arg(reduce, fill, name):
    def f(a, axis=None, out=None, keepdims=None):
        _no_out(out, name)
        x, inexact = _inexact_operand(a)
        if not inexact:
            return reduce(x, axis=axis, keepdims=bool(keepdims))
        nan = isnan(x)
        r = reduce(_nan_to(x, fill), axis=axis, keepdims=bool(keepdims))
        return _where(all(nan, axis=axis, keepdims=bool(keepdims)),
                      _np.asarray(-1, _np.dtype(r.dtype)), r)
    f.__name__ = name
    f.__doc__ = f"{name[3:]} ignoring NaN; -1 where a slice holds nothing else."
    return f


nanargmax = _nan_arg(argmax, -_np.inf, "nanargmax")
nanargmin = _nan_arg(argmin, _np.inf, "nanargmin")
