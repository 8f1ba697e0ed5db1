"""functrans.numpy's elementwise functions: arithmetic, comparisons, transcendental and logical
functions, where, clip."""
from __future__ import annotations

import math

import numpy as _np

from ..core import is_python_scalar
from functrans.primitives import elementwise as ew
from ._promotion import (
    _as_operand, _binary, _broadcast_to_shape, _promote_args, _promote_float, _shape,
    _to_dtype, _unary_float, broadcast_shapes, result_type)
from ._shapes import nonzero
from ._creation import full


# ---------------------------------------------------------------------------
# elementwise

add = _binary(ew.add)
subtract = _binary(ew.sub)
multiply = _binary(ew.mul)
true_divide = divide = _binary(ew.div, floats=True)
_float_power = _binary(ew.pow, floats=True)


def power(x, y):
    """x ** y; a Python int exponent becomes integer_pow (exact, cheap derivative)."""
    if type(y) is int and not is_python_scalar(x):
        x = _as_operand(x)
        if y >= 0 or _np.dtype(x.dtype).kind in "fc":
            return ew.integer_pow(x, y=y)
    if result_type(x, y)[0].kind in "iu":            # integer ** integer stays integer
        x, y = _promote_args("pow", x, y)
        return ew.pow(x, y)
    return _float_power(x, y)
arctan2 = _binary(ew.atan2, floats=True)
maximum = _binary(ew.max)
minimum = _binary(ew.min)
fmax, fmin = maximum, minimum
equal = _binary(ew.eq)
not_equal = _binary(ew.ne)
less = _binary(ew.lt)
less_equal = _binary(ew.le)
greater = _binary(ew.gt)
greater_equal = _binary(ew.ge)
bitwise_and = _binary(ew.and_)
bitwise_or = _binary(ew.or_)
bitwise_xor = _binary(ew.xor)

sin, cos, tan = _unary_float(ew.sin), _unary_float(ew.cos), _unary_float(ew.tan)
arcsin, arccos, arctan = _unary_float(ew.asin), _unary_float(ew.acos), _unary_float(ew.atan)
sinh, cosh, tanh = _unary_float(ew.sinh), _unary_float(ew.cosh), _unary_float(ew.tanh)
exp, log, log1p, expm1 = (_unary_float(ew.exp), _unary_float(ew.log), _unary_float(ew.log1p),
                          _unary_float(ew.expm1))
sqrt = _unary_float(ew.sqrt)
floor, ceil = _unary_float(ew.floor), _unary_float(ew.ceil)
isfinite = _unary_float(ew.is_finite)


def negative(x):
    return ew.neg(_as_operand(x))


def positive(x):
    return _as_operand(x)


def absolute(x):
    x = _as_operand(x)
    return x if _np.dtype(x.dtype).kind in "bu" else ew.abs(x)


abs = absolute


def sign(x):
    return ew.sign(_as_operand(x))


def square(x):
    return ew.integer_pow(_as_operand(x), y=2)


def reciprocal(x):
    return divide(1, x)


def rsqrt(x):
    (x,) = _promote_float(x)
    return ew.rsqrt(x)


def cbrt(x):
    x = _promote_float(x)[0]
    return ew.mul(ew.sign(x), ew.pow(ew.abs(x), _np.asarray(1 / 3, x.dtype)))


def exp2(x):
    x = _promote_float(x)[0]
    return ew.exp(ew.mul(x, _np.asarray(math.log(2), x.dtype)))


def log2(x):
    x = _promote_float(x)[0]
    return ew.div(ew.log(x), _np.asarray(math.log(2), x.dtype))


def log10(x):
    x = _promote_float(x)[0]
    return ew.div(ew.log(x), _np.asarray(math.log(10), x.dtype))


def logaddexp(x, y):
    x, y = _promote_float(x, y)
    amax = ew.max(x, y)
    delta = ew.sub(x, y)
    both_inf = ew.is_finite(delta)
    out = ew.add(amax, ew.log1p(ew.exp(ew.neg(ew.abs(ew.select(both_inf, delta, _zero_like(delta)))))))
    return ew.select(both_inf, out, amax)


def _zero_like(x):
    return _np.zeros((), _np.dtype(x.dtype))


def round(x, decimals=0):
    x = _as_operand(x)
    if _np.dtype(x.dtype).kind not in "fc":
        return x
    if decimals:
        f = _np.asarray(10.0 ** decimals, x.dtype)
        return ew.div(ew.round(ew.mul(x, f), rounding_method=1), f)
    return ew.round(x, rounding_method=1)


around = rint = round


def trunc(x):
    x = _as_operand(x)
    return ew.mul(ew.sign(x), ew.floor(ew.abs(x)))


def floor_divide(x, y):
    x, y = _promote_args("", x, y)
    if _np.dtype(x.dtype).kind in "iu":
        q = ew.div(x, y)
        fix = ew.and_(ew.ne(ew.rem(x, y), _zero_like(x)), ew.ne(ew.lt(x, _zero_like(x)),
                                                                ew.lt(y, _zero_like(y))))
        return ew.sub(q, ew.convert_element_type(fix, new_dtype=_np.dtype(x.dtype), weak_type=False))
    return ew.floor(ew.div(x, y))


def remainder(x, y):
    x, y = _promote_args("", x, y)
    r = ew.rem(x, y)
    z = _zero_like(r)
    fix = ew.and_(ew.ne(r, z), ew.ne(ew.lt(r, z), ew.lt(y, z)))
    return ew.select(fix, ew.add(r, y), r) if _shape(r) == _shape(y) or _shape(y) == () else \
        ew.select(fix, ew.add(r, _broadcast_to_shape(y, _shape(r))), r)


mod = remainder


def fmod(x, y):
    x, y = _promote_args("", x, y)
    return ew.rem(x, y)


def isnan(x):
    x = _as_operand(x)
    return ew.ne(x, x)


def isinf(x):
    x = _as_operand(x)
    if _np.dtype(x.dtype).kind not in "fc":
        return full(_shape(x), False)
    return ew.and_(ew.not_(ew.is_finite(x)), ew.eq(x, x))


def logical_not(x):
    return ew.not_(_to_dtype(_as_operand(x), _np.dtype(_np.bool_)))


def _logical(b):
    def f(x, y):
        x, y = _promote_args("", _to_dtype(_as_operand(x), _np.dtype(bool)),
                             _to_dtype(_as_operand(y), _np.dtype(bool)))
        return b(x, y)
    return f


logical_and, logical_or, logical_xor = _logical(ew.and_), _logical(ew.or_), _logical(ew.xor)


def invert(x):
    return ew.not_(_as_operand(x))


bitwise_not = invert


def where(condition, x=None, y=None):
    """Elementwise choice; the one-argument form needs a concrete condition (nonzero)."""
    if x is None and y is None:
        return nonzero(condition)
    if x is None or y is None:
        raise ValueError("Either both or neither of x and y should be given to where")
    c = _to_dtype(_as_operand(condition), _np.dtype(bool)) if not is_python_scalar(condition) \
        else _np.asarray(bool(condition))
    dt, _ = result_type(x, y)
    shape = broadcast_shapes(_shape(c), _shape(x), _shape(y))
    ops = []
    for a in (c, _to_dtype(x, dt), _to_dtype(y, dt)):     # rank-0 operands stay scalars
        ops.append(a if _shape(a) in (shape, ()) else _broadcast_to_shape(a, shape))
    return ew.select(*ops)


def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """|a - b| <= atol + rtol * |b| elementwise (numpy.isclose): infinities are close only
    to themselves, NaN only to NaN and only with equal_nan."""
    dt, _ = result_type(a, b)
    if _np.dtype(dt).kind not in "fc":
        dt = _np.result_type(dt, _np.float32)
    a, b = _to_dtype(_as_operand(a), dt), _to_dtype(_as_operand(b), dt)
    tol = add(atol, multiply(rtol, absolute(b)))
    close = less_equal(absolute(subtract(a, b)), tol)
    out = where(logical_or(isinf(a), isinf(b)), equal(a, b), close)
    if equal_nan:
        out = logical_or(out, logical_and(isnan(a), isnan(b)))
    return out


def clip(a, a_min=None, a_max=None):
    out = _as_operand(a)
    if a_min is not None:
        out = maximum(out, a_min)
    if a_max is not None:
        out = minimum(out, a_max)
    return out


def real(x):
    x = _as_operand(x)
    if _np.dtype(x.dtype).kind == "c":
        raise NotImplementedError("real/imag of complex arrays are not supported yet")
    return x


def conj(x):
    return real(x)


conjugate = conj
