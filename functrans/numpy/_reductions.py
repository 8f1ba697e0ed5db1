"""functrans.numpy's reductions: sum, mean, max, var, argmax, cumulative scans, logsumexp,
sort and argsort."""
from __future__ import annotations

import builtins
import math

import numpy as _np

from functrans.primitives import elementwise as ew
from functrans.primitives import reductions as red
from functrans.primitives import shape as sh
from functrans.primitives.misc import stop_gradient as _stop_gradient
from ._promotion import (
    _DEFAULT, _as_operand, _broadcast_to_shape, _inexact, _promote_float, _shape, _to_dtype,
    astype, ravel)
from ._shapes import _canon_axis
from ._elementwise import (
    _zero_like, add, exp, isclose, log, maximum, minimum, multiply, sqrt, subtract)
from ._elementwise import where as _where


# ---------------------------------------------------------------------------
# reductions

def _keep(out, x_shape, axes, keepdims):
    if not keepdims:
        return out
    shape = tuple(1 if i in axes else s for i, s in enumerate(x_shape))
    return sh.reshape(out, new_sizes=shape)


def _promote_integers(x):
    """x for sum/prod: bool and integers narrower than the default integer become it (int32,
    or int64 under jax_enable_x64; unsigned ones the default unsigned), as jax.numpy's
    promote_integers=True."""
    dt = _np.dtype(x.dtype)
    if dt.kind == "b" or (dt.kind in "iu" and dt.itemsize < _DEFAULT["i"].itemsize):
        return astype(x, _DEFAULT["u"] if dt.kind == "u" else _DEFAULT["i"])
    return x


def _masked(x, where, fill):
    """x with the elements where `where` is False replaced by fill (a reduction's where=)."""
    if where is None:
        return x
    w = _to_dtype(_as_operand(where), _np.dtype(bool))
    return _where(w, x, _np.asarray(fill, _np.dtype(x.dtype)))


def _reduction(prim_bind, identity):
    def f(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None,
          promote_integers=True):
        if out is not None:
            raise NotImplementedError("the out argument of reductions is not supported "
                                      "(arrays are immutable); use the returned value")
        x = _as_operand(a)
        if dtype is not None:
            x = astype(x, dtype)
        elif promote_integers:
            x = _promote_integers(x)
        axes = _canon_axis(axis, len(_shape(x)))
        out = prim_bind(_masked(x, where, identity), axes=axes)
        if initial is not None:                   # folded in: initial + sum, initial * prod
            out = (add if identity == 0 else multiply)(out, initial)
        return _keep(out, _shape(x), axes, keepdims)
    return f


sum = _reduction(red.reduce_sum, 0)
prod = _reduction(red.reduce_prod, 1)


def _minmax(prim_bind, name):
    def f(a, axis=None, out=None, keepdims=False, initial=None, where=None):
        if out is not None:
            raise NotImplementedError(f"the out argument of {name} is not supported (arrays "
                                      "are immutable); use the returned value")
        x = _as_operand(a)
        axes = _canon_axis(axis, len(_shape(x)))
        if where is not None:
            if initial is None:
                raise ValueError(f"reduction operation '{name}' does not have an identity, so "
                                 "to use a where mask one has to specify 'initial'")
            x = _masked(x, where, initial)
        elif initial is None:
            for ax in axes:
                if _shape(x)[ax] == 0:
                    raise ValueError("zero-size array to reduction operation "
                                     f"{name} which has no identity")
        out = prim_bind(x, axes=axes)
        if initial is not None:
            out = (maximum if name == "max" else minimum)(out, initial)
            out = _to_dtype(out, _np.dtype(x.dtype))
        return _keep(out, _shape(x), axes, keepdims)
    return f


max = amax = _minmax(red.reduce_max, "max")
min = amin = _minmax(red.reduce_min, "min")


def all(a, axis=None, out=None, keepdims=False, *, where=None):
    x = _masked(_to_dtype(_as_operand(a), _np.dtype(bool)), where, True)
    return _keep(red.reduce_min(x, axes=_canon_axis(axis, len(_shape(x)))), _shape(x),
                 _canon_axis(axis, len(_shape(x))), keepdims)


def any(a, axis=None, out=None, keepdims=False, *, where=None):
    x = _masked(_to_dtype(_as_operand(a), _np.dtype(bool)), where, False)
    return _keep(red.reduce_max(x, axes=_canon_axis(axis, len(_shape(x)))), _shape(x),
                 _canon_axis(axis, len(_shape(x))), keepdims)


def _count(x, axes, where):
    """The number of elements each reduction over axes sees (a constant, or an array of
    x's dtype under where=)."""
    if where is None:
        return _np.asarray(math.prod([_shape(x)[i] for i in axes]), _np.dtype(x.dtype))
    w = _to_dtype(_as_operand(where), _np.dtype(bool))
    ones = _broadcast_to_shape(_np.ones((), _np.dtype(x.dtype)), _shape(x))
    return red.reduce_sum(_masked(ones, w, 0), axes=axes)


def mean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=None):
    """The mean over axis (of the elements where `where` is True); integer and bool input
    gives float32 (float64 for 64-bit integers under jax_enable_x64), as jax.numpy."""
    x = _as_operand(a)
    x = astype(x, dtype) if dtype is not None else _to_dtype(x, _inexact(x.dtype))
    axes = _canon_axis(axis, len(_shape(x)))
    s = red.reduce_sum(_masked(x, where, 0), axes=axes)
    n = _count(x, axes, where)
    out = ew.div(s, n if _shape(n) == _shape(s) else _broadcast_to_shape(n, _shape(s)))
    return _keep(out, _shape(x), axes, keepdims)


def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None):
    x = _as_operand(a)
    x = astype(x, dtype) if dtype is not None else _to_dtype(x, _inexact(x.dtype))
    axes = _canon_axis(axis, len(_shape(x)))
    centered = subtract(x, mean(x, axis=axes, keepdims=True, where=where))
    if _np.dtype(x.dtype).kind == "c":          # |x - mean|², real, as NumPy and JAX
        sq = ew.real(ew.mul(centered, ew.conj(centered)))
    else:
        sq = ew.mul(centered, centered)
    ss = red.reduce_sum(_masked(sq, where, 0), axes=axes)
    n = _count(sq, axes, where)
    if where is None:
        n = _np.asarray(builtins.max(int(n) - ddof, 0), ss.dtype)
    else:
        n = maximum(ew.sub(n, _np.asarray(ddof, ss.dtype)), _np.zeros((), ss.dtype))
    out = ew.div(ss, n if _shape(n) == _shape(ss) else _broadcast_to_shape(n, _shape(ss)))
    return _keep(out, _shape(x), axes, keepdims)


def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None):
    """sqrt(var); over a single element (ddof 0) it is var itself, identically 0, so that its
    derivative is 0 there rather than sqrt's 0 * inf (JAX gives NaN; autograd and torch 0)."""
    v = var(a, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims, where=where)
    shape = _shape(_as_operand(a))
    if where is None and ddof == 0 and \
            math.prod([shape[i] for i in _canon_axis(axis, len(shape))]) == 1:
        return v
    return sqrt(v)


def _argreduce(prim_bind):
    def f(a, axis=None, keepdims=False):
        x = _as_operand(a)
        if axis is None:
            x = ravel(x)
            axis = 0
        ax = _canon_axis(axis, len(_shape(x)))
        out = prim_bind(x, axes=ax, index_dtype=_DEFAULT["i"])
        return _keep(out, _shape(x), ax, keepdims)
    return f


argmax = _argreduce(red.argmax)
argmin = _argreduce(red.argmin)


def _sort_operands(a, axis, kind, order, name):
    if order is not None:
        raise NotImplementedError(f"{name}: order= (structured arrays) is not supported")
    if kind not in (None, "quicksort", "mergesort", "heapsort", "stable"):
        raise ValueError(f"{name}: unknown kind {kind!r}")
    x = _as_operand(a)
    if axis is None:
        x, axis = ravel(x), 0
    if len(_shape(x)) == 0:
        raise ValueError(f"{name}: axis {axis} is out of bounds for an array of dimension 0")
    return x, _canon_axis(axis, len(_shape(x)))[0]


def sort(a, axis=-1, kind=None, order=None, *, stable=True, descending=False):
    """Sorted copy along axis (NaN last; stable, so equal elements keep their order, in
    descending order too); differentiable: the gradient flows back through the permutation."""
    x, ax = _sort_operands(a, axis, kind, order, "sort")
    if descending:
        return sh.rev(red.sort(sh.rev(x, dimensions=(ax,)), dimension=ax, num_keys=1)[0],
                      dimensions=(ax,))
    return red.sort(x, dimension=ax, num_keys=1)[0]


def argsort(a, axis=-1, kind=None, order=None, *, stable=True, descending=False):
    """Indices that sort a along axis (stable; descending keeps equal elements in order)."""
    x, ax = _sort_operands(a, axis, kind, order, "argsort")
    shape = _shape(x)
    index = sh.iota(dtype=_DEFAULT["i"], shape=shape, dimension=ax)
    if not descending:
        return red.sort(x, index, dimension=ax, num_keys=1)[1]
    rev = red.sort(sh.rev(x, dimensions=(ax,)), index, dimension=ax, num_keys=1)[1]
    return ew.sub(_np.asarray(shape[ax] - 1, _DEFAULT["i"]), sh.rev(rev, dimensions=(ax,)))


def lexsort(keys, axis=-1):
    """Indices that sort by several keys, the last one primary (numpy.lexsort)."""
    ks = [_as_operand(k) for k in keys]
    if not ks:
        raise TypeError("lexsort: need at least one key")
    shape = _shape(ks[0])
    ax = _canon_axis(axis, len(shape))[0]
    index = sh.iota(dtype=_DEFAULT["i"], shape=shape, dimension=ax)
    return red.sort(*reversed(ks), index, dimension=ax, num_keys=len(ks))[-1]


def cumsum(a, axis=None, dtype=None):
    x = _as_operand(a)
    if axis is None:
        x, axis = ravel(x), 0
    if dtype is not None:
        x = astype(x, dtype)
    elif _np.dtype(x.dtype).kind == "b":
        x = astype(x, _DEFAULT["i"])
    return red.cumsum(x, axis=_canon_axis(axis, len(_shape(x)))[0], reverse=False)


def cumprod(a, axis=None, dtype=None):
    """Inclusive product scan, written with mul/pad/slice so it is differentiable."""
    x = _as_operand(a)
    if axis is None:
        x, axis = ravel(x), 0
    if dtype is not None:
        x = astype(x, dtype)
    elif _np.dtype(x.dtype).kind == "b":
        x = astype(x, _DEFAULT["i"])
    ax = _canon_axis(axis, len(_shape(x)))[0]
    n = _shape(x)[ax]
    one = _np.ones((), _np.dtype(x.dtype))
    s = 1
    while s < n:
        lo = [0] * len(_shape(x))
        hi = list(_shape(x))
        hi[ax] = n - s
        part = sh.slice(x, start_indices=tuple(lo), limit_indices=tuple(hi), strides=None)
        cfg = [(0, 0, 0)] * len(_shape(x))
        cfg[ax] = (s, 0, 0)
        x = ew.mul(x, sh.pad(part, one, padding_config=tuple(cfg)))
        s *= 2
    return x


def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False):
    """log(sum(exp(a))), stable for large inputs (the max is taken out first)."""
    x = _promote_float(a)[0]
    if b is not None or return_sign:
        raise NotImplementedError("logsumexp's b= and return_sign= are not supported")
    axes = _canon_axis(axis, len(_shape(x)))
    amax = max(x, axis=axes, keepdims=True)
    amax = _stop_gradient(ew.select(ew.is_finite(amax), amax, _broadcast_to_shape(
        _zero_like(amax), _shape(amax)) if _shape(amax) else _zero_like(amax)))
    out = log(sum(exp(subtract(x, amax)), axis=axes, keepdims=True))
    out = add(out, amax)
    return out if keepdims else sh.reshape(out, new_sizes=tuple(
        s for i, s in enumerate(_shape(x)) if i not in axes))


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Whether every element of a is close to b's (isclose), as one boolean."""
    return all(isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan))
