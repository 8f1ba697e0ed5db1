"""functrans.numpy's reductions: sum, mean, max, var, argmax, cumulative scans, logsumexp."""
from __future__ import annotations

import builtins
import math

import numpy as _np

from functrans.primitives import elementwise as ew
from functrans.primitives import reductions as red
from functrans.primitives import shape as sh
from functrans.primitives.misc import stop_gradient as _stop_gradient
from ._promotion import (
    _as_operand, _broadcast_to_shape, _promote_float, _shape, _to_dtype, astype, ravel)
from ._shapes import _canon_axis
from ._elementwise import _zero_like, add, exp, isclose, log, sqrt, subtract


# ---------------------------------------------------------------------------
# reductions

def _keep(out, x_shape, axes, keepdims):
    if not keepdims:
        return out
    shape = tuple(1 if i in axes else s for i, s in enumerate(x_shape))
    return sh.reshape(out, new_sizes=shape)


def _reduction(prim_bind, upcast_bool=True):
    def f(a, axis=None, dtype=None, keepdims=False, where=None):
        x = _as_operand(a)
        if where is not None:
            raise NotImplementedError("the where= argument of reductions is not supported")
        if dtype is not None:
            x = astype(x, dtype)
        elif upcast_bool and _np.dtype(x.dtype).kind == "b":
            x = astype(x, _np.int32)
        axes = _canon_axis(axis, len(_shape(x)))
        out = prim_bind(x, axes=axes)
        return _keep(out, _shape(x), axes, keepdims)
    return f


sum = _reduction(red.reduce_sum)
prod = _reduction(red.reduce_prod)


def _minmax(prim_bind):
    def f(a, axis=None, keepdims=False, initial=None, where=None):
        x = _as_operand(a)
        axes = _canon_axis(axis, len(_shape(x)))
        for ax in axes:
            if _shape(x)[ax] == 0:
                raise ValueError("zero-size array to reduction operation which has no identity")
        out = _keep(prim_bind(x, axes=axes), _shape(x), axes, keepdims)
        return out
    return f


max = amax = _minmax(red.reduce_max)
min = amin = _minmax(red.reduce_min)


def all(a, axis=None, keepdims=False):
    x = _to_dtype(_as_operand(a), _np.dtype(bool))
    return _keep(red.reduce_min(x, axes=_canon_axis(axis, len(_shape(x)))), _shape(x),
                 _canon_axis(axis, len(_shape(x))), keepdims)


def any(a, axis=None, keepdims=False):
    x = _to_dtype(_as_operand(a), _np.dtype(bool))
    return _keep(red.reduce_max(x, axes=_canon_axis(axis, len(_shape(x)))), _shape(x),
                 _canon_axis(axis, len(_shape(x))), keepdims)


def mean(a, axis=None, dtype=None, keepdims=False):
    x = _as_operand(a)
    if dtype is not None:
        x = astype(x, dtype)
    elif _np.dtype(x.dtype).kind not in "fc":
        x = astype(x, _np.float32)
    axes = _canon_axis(axis, len(_shape(x)))
    n = math.prod([_shape(x)[i] for i in axes])
    s = red.reduce_sum(x, axes=axes)
    out = ew.div(s, _np.asarray(n, _np.dtype(x.dtype)))
    return _keep(out, _shape(x), axes, keepdims)


def var(a, axis=None, dtype=None, ddof=0, keepdims=False):
    x = _as_operand(a)
    if _np.dtype(x.dtype).kind not in "fc":
        x = astype(x, _np.float32)
    axes = _canon_axis(axis, len(_shape(x)))
    n = math.prod([_shape(x)[i] for i in axes])
    centered = subtract(x, mean(x, axis=axes, keepdims=True))
    ss = red.reduce_sum(ew.mul(centered, centered), axes=axes)
    out = ew.div(ss, _np.asarray(builtins.max(n - ddof, 0), _np.dtype(x.dtype)))
    return _keep(out, _shape(x), axes, keepdims)


def std(a, axis=None, dtype=None, ddof=0, keepdims=False):
    return sqrt(var(a, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims))


def _argreduce(prim_bind):
    def f(a, axis=None, keepdims=False):
        x = _as_operand(a)
        if axis is None:
            x = ravel(x)
            axis = 0
        ax = _canon_axis(axis, len(_shape(x)))
        out = prim_bind(x, axes=ax, index_dtype=_np.dtype(_np.int32))
        return _keep(out, _shape(x), ax, keepdims)
    return f


argmax = _argreduce(red.argmax)
argmin = _argreduce(red.argmin)


def cumsum(a, axis=None, dtype=None):
    x = _as_operand(a)
    if axis is None:
        x, axis = ravel(x), 0
    if dtype is not None:
        x = astype(x, dtype)
    elif _np.dtype(x.dtype).kind == "b":
        x = astype(x, _np.int32)
    return red.cumsum(x, axis=_canon_axis(axis, len(_shape(x)))[0], reverse=False)


def cumprod(a, axis=None, dtype=None):
    """Inclusive product scan, written with mul/pad/slice so it is differentiable."""
    x = _as_operand(a)
    if axis is None:
        x, axis = ravel(x), 0
    if dtype is not None:
        x = astype(x, dtype)
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
