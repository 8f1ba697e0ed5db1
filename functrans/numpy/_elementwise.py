"""functrans.numpy's elementwise functions: arithmetic, comparisons, transcendental and logical
functions, where, clip."""
from __future__ import annotations

import math

import numpy as _np

from ..core import DTypeError, is_python_scalar, short_dtype
from functrans.primitives import elementwise as ew
from functrans.primitives.misc import stop_gradient
from ._promotion import (
    _DEFAULT, _as_operand, _binary, _broadcast_to_shape, _promote_args, _promote_float, _shape,
    _to_dtype, _unary_float, broadcast_shapes, _result_type)
from ._shapes import nonzero
from ._creation import full


# ---------------------------------------------------------------------------
# elementwise

add = _binary(ew.add, bools=ew.or_)               # bool + bool is `or`, as JAX
subtract = _binary(ew.sub)
multiply = _binary(ew.mul, bools=ew.and_)         # bool * bool is `and`
true_divide = divide = _binary(ew.div, floats=True)
_float_power = _binary(ew.pow, floats=True)


def _bool_as_int(x):
    """A bool array as int32 (JAX's numeric promotion for power, x64 or not); else x."""
    if not is_python_scalar(x):
        op = _as_operand(x)
        if _np.dtype(op.dtype).kind == "b":
            return ew.convert_element_type(op, new_dtype=_np.dtype(_np.int32), weak_type=False)
    return x


def power(x, y):
    """x ** y; a Python int exponent becomes integer_pow (exact, cheap derivative). Bool
    operands count as int32, as JAX's (True ** 2 is 1, an int32)."""
    if isinstance(y, _np.integer) or (type(y) is _np.ndarray and y.ndim == 0
                                      and y.dtype.kind in "iu"):
        y = int(y)          # a concrete integer, as JAX's (operator.index): integer_pow
    if type(y) is int and (not is_python_scalar(x) or (y < 0 and type(x) in (int, bool))):
        x = _bool_as_int(_as_operand(x))
        if y >= 0 or _np.dtype(x.dtype).kind in "fc":
            return ew.integer_pow(x, y=y)
        raise DTypeError(f"Integers cannot be raised to negative powers, got "
                         f"integer_pow({short_dtype(x.dtype)}{list(_np.shape(x))}, {y}) (use "
                         f"a float base, e.g. x.astype(float) ** {y})")
    if _result_type(x, y)[0].kind in "biu":           # integer ** integer stays integer
        x, y = _promote_args("pow", x, y)      # then bool ** bool as int32 (JAX's order)
        return ew.pow(_bool_as_int(x), _bool_as_int(y))
    return _float_power(x, y)
arctan2 = _binary(ew.atan2, floats=True)
maximum = _binary(ew.max)
minimum = _binary(ew.min)
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
_floor, _ceil = _unary_float(ew.floor), _unary_float(ew.ceil)


def floor(x):
    """The largest integer <= x; integer and bool arrays are returned as they are (their
    dtype kept, as JAX)."""
    x = _as_operand(x) if not is_python_scalar(x) else x
    return x if not is_python_scalar(x) and _np.dtype(x.dtype).kind in "biu" else _floor(x)


def ceil(x):
    """The smallest integer >= x; integer and bool arrays are returned as they are."""
    x = _as_operand(x) if not is_python_scalar(x) else x
    return x if not is_python_scalar(x) and _np.dtype(x.dtype).kind in "biu" else _ceil(x)


def fmax(x1, x2):
    """The larger of x1 and x2, ignoring NaN (NaN only where both are): x1 where
    x1 > x2 or x2 is NaN, else x2, as JAX (so at a tie the derivative goes to x2)."""
    x1, x2 = _promote_args("fmax", x1, x2)
    return ew.select(ew.or_(ew.gt(x1, x2), ew.ne(x2, x2)), x1, x2)


def fmin(x1, x2):
    """The smaller of x1 and x2, ignoring NaN (as fmax)."""
    x1, x2 = _promote_args("fmin", x1, x2)
    return ew.select(ew.or_(ew.lt(x1, x2), ew.ne(x2, x2)), x1, x2)
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
    """The real cube root: x^(1/3) for x >= 0, -(-x)^(1/3) below, each branch fed a safe
    operand on the other side, so that the derivative is (1/3) |x|^(-2/3) everywhere (inf
    at 0, as JAX) with no 0 * inf from the branch not taken."""
    x = _promote_float(x)[0]
    neg = ew.lt(x, _zero_like(x))
    one, third = _np.ones((), x.dtype), _np.asarray(1 / 3, x.dtype)
    pos_part = ew.pow(where(neg, one, x), third)
    neg_part = ew.neg(ew.pow(where(neg, ew.neg(x), one), third))
    return where(neg, neg_part, pos_part)


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
    """log(exp(x) + exp(y)); derivative logistic(x - y), so 1/2 each at a tie (as JAX)."""
    x, y = _promote_float(x, y)
    return ew.logaddexp(x, y)


def logaddexp2(x, y):
    """log2(2**x + 2**y), through logaddexp in base e."""
    x, y = _promote_float(x, y)
    ln2 = _np.asarray(math.log(2), x.dtype)
    return ew.div(ew.logaddexp(ew.mul(x, ln2), ew.mul(y, ln2)), ln2)


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


around = round


def rint(x):
    """x rounded to the nearest integer, half to even; integer operands become the default
    float, as JAX (round keeps their dtype)."""
    x = _as_operand(x)
    if _np.dtype(x.dtype).kind in "biu":
        x = _to_dtype(x, _DEFAULT["f"])
    return round(x)


def trunc(x):
    """x rounded toward zero; integer and bool arrays are returned as they are."""
    x = _as_operand(x)
    if _np.dtype(x.dtype).kind in "biu":
        return x
    return ew.mul(ew.sign(x), ew.floor(ew.abs(x)))


def floor_divide(x, y):
    x, y = _promote_args("", x, y)
    if _np.dtype(x.dtype).kind in "iu":
        q = ew.div(x, y)
        fix = ew.and_(ew.ne(ew.rem(x, y), _zero_like(x)), ew.ne(ew.lt(x, _zero_like(x)),
                                                                ew.lt(y, _zero_like(y))))
        return ew.sub(q, ew.convert_element_type(fix, new_dtype=_np.dtype(x.dtype), weak_type=False))
    return _float_floor_divide(x, y)


def _float_floor_divide(x, y):
    """Python's (and JAX's, NumPy's, torch's) float floor division, CPython's float_divmod:
    (x - fmod(x, y)) / y, one less where the remainder's sign differs from y's, rounded.
    floor(x / y) differs where x / y rounds up to an integer or is not finite: -0.5 // inf
    is -1, inf // 2 is NaN (floor gave -0 and inf)."""
    mod = ew.rem(x, y)
    z = _zero_like(x)
    div = ew.div(ew.select(ew.eq(y, z), x, ew.sub(x, mod)), y)
    fix = ew.and_(ew.ne(mod, z), ew.ne(ew.sign(y), ew.sign(mod)))
    div = ew.select(fix, ew.sub(div, _np.ones((), _np.dtype(x.dtype))), div)
    return ew.round(div, rounding_method=1)


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
    dt, _ = _result_type(x, y)
    shape = broadcast_shapes(_shape(c), _shape(x), _shape(y))
    ops = []
    for a in (c, _to_dtype(x, dt), _to_dtype(y, dt)):     # rank-0 operands stay scalars
        ops.append(a if _shape(a) in (shape, ()) else _broadcast_to_shape(a, shape))
    return ew.select(*ops)


def clip(arr=None, /, min=None, max=None, *, a=None, a_min=None, a_max=None):
    """arr limited to [min, max] (either may be None), as jax.numpy.clip:
    minimum(maximum(arr, min), max). NumPy's older names a, a_min and a_max are accepted
    too."""
    if arr is None:
        arr = a
    if arr is None:
        raise TypeError("clip() missing the array to clip (arr)")
    lo = min if min is not None else a_min
    hi = max if max is not None else a_max
    out = _as_operand(arr)
    if lo is not None:
        out = maximum(out, lo)
    if hi is not None:
        out = minimum(out, hi)
    return out


def real(x):
    """The real part (x itself for a real array)."""
    x = _as_operand(x)
    return ew.real(x) if _np.dtype(x.dtype).kind == "c" else x


def imag(x):
    """The imaginary part (zeros for a real array)."""
    x = _as_operand(x)
    if _np.dtype(x.dtype).kind == "c":
        return ew.imag(x)
    return full(_shape(x), 0, _np.dtype(x.dtype))


def conj(x):
    """The complex conjugate (x itself for a real array, as JAX)."""
    x = _as_operand(x)
    return ew.conj(x) if _np.dtype(x.dtype).kind == "c" else x


def angle(z, deg=False):
    """The argument of z, atan2(imag, real); real z gives 0 or pi."""
    z = _as_operand(z)
    if _np.dtype(z.dtype).kind != "c":
        z = _promote_float(z)[0]
    out = ew.atan2(*_promote_float(imag(z), real(z)))
    return degrees(out) if deg else out


conjugate = conj


# ---------------------------------------------------------------------------
# more of NumPy's elementwise functions, as compositions

arcsinh, arccosh, arctanh = _unary_float(ew.asinh), _unary_float(ew.acosh), _unary_float(ew.atanh)


def fabs(x):
    """|x| as a float (NumPy's fabs)."""
    return absolute(_promote_float(x)[0])


def _scaled(x, factor):
    x = _promote_float(x)[0]
    return ew.mul(x, _np.asarray(factor, x.dtype))


def radians(x):
    return _scaled(x, math.pi / 180)


def degrees(x):
    return _scaled(x, 180 / math.pi)


deg2rad, rad2deg = radians, degrees


def hypot(x, y):
    """sqrt(x² + y²) without overflow or underflow: s sqrt((x/s)² + (y/s)²) with s the larger
    of |x|, |y| held constant (stop_gradient), so every derivative is sqrt(x² + y²)'s, ties
    |x| = |y| included; 0 at (0, 0) (derivative 0 there), inf if either is infinite."""
    x, y = _promote_float(x, y)
    a, b = ew.abs(x), ew.abs(y)
    m = maximum(a, b)
    zero = ew.eq(m, _zero_like(m))
    one = _np.ones((), m.dtype)
    s = stop_gradient(where(zero, one, m))
    q = ew.add(square(ew.div(x, s)), square(ew.div(y, s)))
    r = where(zero, _zero_like(m), ew.mul(s, ew.sqrt(where(zero, one, q))))
    return where(logical_or(isinf(a), isinf(b)), _np.asarray(_np.inf, m.dtype), r)


def sinc(x):
    """sin(pi x) / (pi x), 1 at 0; a Taylor polynomial near 0, so that every derivative is
    right there (sinc'(0) = 0, sinc''(0) = -pi²/3)."""
    x = _promote_float(x)[0]
    small = ew.lt(ew.abs(x), _np.asarray(0.05, x.dtype))
    z = square(ew.mul(x, _np.asarray(math.pi, x.dtype)))
    poly = _np.asarray(1 / math.factorial(9), x.dtype)
    for k in range(3, -1, -1):                          # Horner: sum (-z)^k / (2k + 1)!
        poly = ew.add(ew.mul(poly, ew.neg(z)), _np.asarray(1 / math.factorial(2 * k + 1),
                                                           x.dtype))
    safe = where(small, _np.ones((), x.dtype), x)
    px = ew.mul(safe, _np.asarray(math.pi, x.dtype))
    return where(small, poly, ew.div(ew.sin(px), px))


def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    """NaN -> nan, +-inf -> posinf / neginf (the dtype's largest finite values by default)."""
    x = _as_operand(x)
    dt = _np.dtype(x.dtype)
    if dt.kind not in "f":
        if dt.kind == "c":
            raise NotImplementedError("nan_to_num of complex arrays is not supported yet")
        return x
    info = _np.finfo(dt)
    hi = info.max if posinf is None else posinf
    lo = info.min if neginf is None else neginf
    out = where(isnan(x), _np.asarray(nan, dt), x)
    out = where(ew.eq(x, _np.asarray(_np.inf, dt)), _np.asarray(hi, dt), out)
    return where(ew.eq(x, _np.asarray(-_np.inf, dt)), _np.asarray(lo, dt), out)


def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """|a - b| <= atol + rtol |b| elementwise (equal infinities are close), as NumPy."""
    a, b = _promote_float(a, b)
    close = ew.le(ew.abs(ew.sub(a, b)), ew.add(_np.asarray(atol, a.dtype),
                                                ew.mul(_np.asarray(rtol, a.dtype), ew.abs(b))))
    close = logical_or(ew.and_(close, ew.is_finite(ew.sub(a, b))), ew.eq(a, b))
    return logical_or(close, ew.and_(isnan(a), isnan(b))) if equal_nan else close


def select(condlist, choicelist, default=0):
    """The choice of the first true condition, else default (NumPy's select)."""
    if len(condlist) != len(choicelist):
        raise ValueError("list of cases must be same length as list of conditions")
    out = default
    for c, v in reversed(list(zip(condlist, choicelist))):
        out = where(c, v, out)
    return _as_operand(out)


def iscomplexobj(x):
    return _np.dtype(_as_operand(x).dtype).kind == "c"


def isrealobj(x):
    return not iscomplexobj(x)


def iscomplex(x):
    x = _as_operand(x)
    if _np.dtype(x.dtype).kind == "c":
        return ew.ne(ew.imag(x), _zero_like(ew.imag(x)))
    return full(_shape(x), False)


def isreal(x):
    return logical_not(iscomplex(x))
