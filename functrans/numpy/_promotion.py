"""functrans.numpy: the jax.numpy subset that models use, written as binds of primitives.

NumPy broadcasting and dtype promotion, with JAX's weak typing for Python scalars
(`x * 2` keeps x's float32); float32 is the default float and float64 is available.
"""
from __future__ import annotations

import builtins
import math

import numpy as _np

from .. import core
from ..core import Tracer, get_aval, is_python_scalar, to_concrete
from functrans.primitives import elementwise as ew
from functrans.primitives import indexing as ix
from functrans.primitives import linalg as la
from functrans.primitives import reductions as red
from functrans.primitives import shape as sh
from functrans.primitives.misc import stop_gradient as _stop_gradient

# dtypes, re-exported as jax.numpy does
float16, float32, float64 = _np.float16, _np.float32, _np.float64
int8, int16, int32, int64 = _np.int8, _np.int16, _np.int32, _np.int64
uint8, uint16, uint32, uint64 = _np.uint8, _np.uint16, _np.uint32, _np.uint64
bool_, complex64, complex128 = _np.bool_, _np.complex64, _np.complex128
dtype = _np.dtype
ndarray = _np.ndarray
pi, e, inf, nan, newaxis = _np.pi, _np.e, _np.inf, _np.nan, None
finfo, iinfo, issubdtype = _np.finfo, _np.iinfo, _np.issubdtype
floating, integer, inexact, number, complexfloating = (
    _np.floating, _np.integer, _np.inexact, _np.number, _np.complexfloating)

_DEFAULT = {"b": _np.dtype(_np.bool_), "i": _np.dtype(_np.int32), "u": _np.dtype(_np.uint32),
            "f": _np.dtype(_np.float32), "c": _np.dtype(_np.complex64)}
_KIND_RANK = {"b": 0, "u": 1, "i": 1, "f": 2, "c": 3}


def _is_array(x):
    return isinstance(x, (Tracer, _np.ndarray, _np.generic)) or hasattr(x, "__cuda_array_interface__")


# ---------------------------------------------------------------------------
# conversion and promotion

def _canonical_dtype(dt):
    return core.check_dtype(dt)


def asarray(x, dtype=None):
    """An array (or the tracer itself) with float32/int32 defaults for Python data."""
    if isinstance(x, Tracer):
        return x if dtype is None else astype(x, dtype)
    if hasattr(x, "__cuda_array_interface__"):
        return x if dtype is None else x.astype(dtype)
    if isinstance(x, (_np.ndarray, _np.generic)):
        out = _np.asarray(x)
        core.check_dtype(out.dtype)
        return out if dtype is None else out.astype(dtype)
    if isinstance(x, (list, tuple)) and builtins.any(isinstance(v, Tracer) for v in _flat(x)):
        return stack([asarray(v) for v in x]).astype(dtype) if dtype else stack([asarray(v) for v in x])
    if dtype is not None:
        return _np.asarray(x, dtype=dtype)
    arr = _np.asarray(x)
    if arr.dtype.kind in "fc" and not isinstance(x, _np.ndarray):
        arr = arr.astype(_DEFAULT[arr.dtype.kind] if arr.dtype.itemsize > _DEFAULT[arr.dtype.kind].itemsize
                         else arr.dtype)
    elif arr.dtype.kind == "i" and arr.dtype.itemsize > 4:
        arr = arr.astype(_np.int32)
    elif arr.dtype.kind not in "biufc":
        raise TypeError(f"cannot convert {type(x).__name__} to a functrans array "
                        f"(dtype {arr.dtype})")
    return arr


def _flat(xs):
    for v in xs:
        if isinstance(v, (list, tuple)):
            yield from _flat(v)
        else:
            yield v


array = asarray


def _dtype_weak(x):
    if is_python_scalar(x):
        a = get_aval(x)
        return a.dtype, True
    if isinstance(x, Tracer):
        return x.aval.dtype, x.aval.weak_type
    if isinstance(x, (list, tuple)):
        return asarray(x).dtype, False
    return _np.dtype(x.dtype), False


def result_type(*args):
    """(dtype, weak) of combining args: NumPy promotion among arrays; Python scalars are
    weak and only lift the result to their kind's default when the kind is higher."""
    dws = [_dtype_weak(a) for a in args]
    strong = [d for d, w in dws if not w]
    if strong:
        out = strong[0]
        for d in strong[1:]:
            out = _np.promote_types(out, d)
        for d, w in dws:
            if w and _KIND_RANK[d.kind] > _KIND_RANK[out.kind]:
                # the weak kind's default, as JAX: int32 + 1.5 -> float32, f64 + 1j -> c128
                wide = d.kind == "c" and out == _np.float64
                out = _np.dtype(_np.complex128) if wide else _DEFAULT[d.kind]
        return _np.dtype(out), False
    kind = builtins.max((d.kind for d, _ in dws), key=lambda k: _KIND_RANK[k])
    return _DEFAULT[kind], True


def _to_dtype(x, dt):
    """x as an operand of dtype dt (Python scalars become rank-0 literals)."""
    if is_python_scalar(x):
        return _np.asarray(x, dt)
    if isinstance(x, (list, tuple)):
        x = asarray(x)
    if _np.dtype(x.dtype) != dt:
        return ew.convert_element_type(x, new_dtype=dt, weak_type=False)
    return x


def _shape(x):
    s = getattr(x, "shape", None)
    if s is None:
        return () if is_python_scalar(x) else _np.shape(x)
    return s if type(s) is tuple else tuple(s)


def broadcast_shapes(*shapes, name=None):
    first = shapes[0]
    if builtins.all(s == first for s in shapes):
        return tuple(first)
    nd = builtins.max(len(s) for s in shapes)
    out = [1] * nd
    try:
        for s in shapes:
            for i, d in enumerate(s, nd - len(s)):
                if d != 1:
                    if out[i] != 1 and out[i] != d:
                        raise ValueError
                    out[i] = d
        return tuple(out)
    except ValueError:
        raise core.ShapeError(
            (f"{name}: " if name else "") +
            f"shapes {', '.join(str(tuple(s)) for s in shapes)} cannot be broadcast together "
            "(NumPy broadcasting: trailing axes must be equal or 1)") from None


def _broadcast_to_shape(x, shape):
    xs = _shape(x)
    if xs == tuple(shape) or (xs == () and not is_python_scalar(x) and False):
        return x
    if xs == ():
        return sh.broadcast_in_dim(x, shape=tuple(shape), broadcast_dimensions=())
    nd = len(shape)
    dims = tuple(range(nd - len(xs), nd))
    return sh.broadcast_in_dim(x, shape=tuple(shape), broadcast_dimensions=dims)


def _promote_args(name, *args, dtype_kinds=None):
    """Promote dtypes and broadcast shapes, keeping rank-0 operands unbroadcast."""
    if len(args) == 2:
        a, b = args
        ta, tb = type(a), type(b)
        a_arr = ta is _np.ndarray or isinstance(a, Tracer)
        b_arr = tb is _np.ndarray or isinstance(b, Tracer)
        if a_arr and b_arr:
            if a.dtype == b.dtype and not getattr(a, "weak_type", False) \
                    and not getattr(b, "weak_type", False):
                sa, sb = a.shape, b.shape
                if sa == sb or not sa or not sb:   # same dtype, same shape or a rank-0 one
                    return [a, b]
                shape = broadcast_shapes(sa, sb, name=name)
                return [a if sa == shape else _broadcast_to_shape(a, shape),
                        b if sb == shape else _broadcast_to_shape(b, shape)]
        elif (tb is float or tb is int) and a_arr:
            if a.dtype.kind in "fc" and not getattr(a, "weak_type", False):
                return [a, _np.asarray(b, a.dtype)]   # the Python number takes a's dtype
        elif (ta is float or ta is int) and b_arr:
            if b.dtype.kind in "fc" and not getattr(b, "weak_type", False):
                return [_np.asarray(a, b.dtype), b]
    args = [asarray(a) if isinstance(a, (list, tuple)) else a for a in args]
    dt, _ = result_type(*args)
    shape = broadcast_shapes(*[_shape(a) for a in args], name=name) if len(args) > 1 \
        else _shape(args[0])
    out = []
    for a in args:
        a = _to_dtype(a, dt)
        if _shape(a) != shape and _shape(a) != ():
            a = _broadcast_to_shape(a, shape)
        out.append(a)
    return out


def _promote_float(*args, name=""):
    dt, _ = result_type(*args)
    if dt.kind not in "fc":
        args = [_to_dtype(a, _DEFAULT["f"]) for a in args]
    return _promote_args(name, *args)


def _unary_float(prim_bind):
    def f(x):
        if (type(x) is _np.ndarray or isinstance(x, Tracer)) and x.dtype.kind in "fc":
            return prim_bind(x)         # already floating: nothing to promote
        (x,) = _promote_float(x)
        return prim_bind(x)
    return f


def _binary(prim_bind, floats=False):
    name = getattr(getattr(prim_bind, "__self__", None), "name", "")   # for error messages

    def f(x, y):
        x, y = _promote_float(x, y, name=name) if floats else _promote_args(name, x, y)
        return prim_bind(x, y)
    return f


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


def _as_operand(x):
    return asarray(x) if not isinstance(x, Tracer) and not is_python_scalar(x) else (
        _np.asarray(x, get_aval(x).dtype) if is_python_scalar(x) else x)


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


def clip(a, a_min=None, a_max=None):
    out = _as_operand(a)
    if a_min is not None:
        out = maximum(out, a_min)
    if a_max is not None:
        out = minimum(out, a_max)
    return out


def astype(x, dtype):
    dt = _canonical_dtype(dtype)
    x = _as_operand(x)
    if _np.dtype(x.dtype) == dt:
        return x
    return ew.convert_element_type(x, new_dtype=dt, weak_type=False)


def real(x):
    x = _as_operand(x)
    if _np.dtype(x.dtype).kind == "c":
        raise NotImplementedError("real/imag of complex arrays are not supported yet")
    return x


def conj(x):
    return real(x)


conjugate = conj


# ---------------------------------------------------------------------------
# reductions

def _canon_axis(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, int) or (not isinstance(axis, (tuple, list))) else axis
    out = []
    for a in axes:
        a = int(a)
        if not -ndim <= a < builtins.max(ndim, 1):
            raise core.ShapeError(f"axis {a} is out of bounds for array of dimension {ndim}")
        out.append(a % ndim if ndim else 0)
    return tuple(sorted(set(out)))


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


# ---------------------------------------------------------------------------
# shapes

def shape(a):
    return _shape(a)


def ndim(a):
    return len(_shape(a))


def size(a, axis=None):
    s = _shape(a)
    return math.prod(s) if axis is None else s[axis]


def reshape(a, newshape=None, order="C", shape=None):
    x = _as_operand(a)
    newshape = shape if newshape is None else newshape
    if isinstance(newshape, int):
        newshape = (newshape,)
    newshape = tuple(int(d) for d in newshape)
    if order != "C":
        raise NotImplementedError("only C order reshapes are supported")
    size_ = math.prod(_shape(x))
    if newshape.count(-1) > 1:
        raise ValueError("can only specify one unknown dimension")
    if -1 in newshape:
        known = math.prod([d for d in newshape if d != -1])
        if known == 0 or size_ % known:
            raise core.ShapeError(f"cannot reshape array of shape {_shape(x)} into {newshape}")
        newshape = tuple(size_ // known if d == -1 else d for d in newshape)
    if newshape == _shape(x):
        return x
    return sh.reshape(x, new_sizes=newshape)


def ravel(a):
    return reshape(a, (-1,))


def transpose(a, axes=None):
    x = _as_operand(a)
    nd = len(_shape(x))
    perm = tuple(reversed(range(nd))) if axes is None else tuple(int(p) % nd for p in axes)
    if perm == tuple(range(nd)):
        return x
    return sh.transpose(x, permutation=perm)


def swapaxes(a, axis1, axis2):
    nd = ndim(a)
    perm = list(range(nd))
    perm[axis1 % nd], perm[axis2 % nd] = perm[axis2 % nd], perm[axis1 % nd]
    return transpose(a, perm)


def moveaxis(a, source, destination):
    nd = ndim(a)
    src = [s % nd for s in ((source,) if isinstance(source, int) else source)]
    dst = [d % nd for d in ((destination,) if isinstance(destination, int) else destination)]
    perm = [i for i in range(nd) if i not in src]
    for d, s in sorted(zip(dst, src)):
        perm.insert(d, s)
    return transpose(a, perm)


def expand_dims(a, axis):
    x = _as_operand(a)
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    nd = len(_shape(x)) + len(axes)
    return sh.expand_dims(x, dimensions=tuple(sorted(ax % nd for ax in axes)))


def squeeze(a, axis=None):
    x = _as_operand(a)
    s = _shape(x)
    if axis is None:
        dims = tuple(i for i, d in enumerate(s) if d == 1)
    else:
        dims = _canon_axis(axis, len(s))
        for d in dims:
            if s[d] != 1:
                raise ValueError(f"cannot select an axis to squeeze out which has size not "
                                 f"equal to one (axis {d} of shape {s})")
    return sh.squeeze(x, dimensions=dims) if dims else x


def broadcast_to(a, shape):
    x = _as_operand(a)
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    if broadcast_shapes(_shape(x), shape) != shape:
        raise core.ShapeError(f"cannot broadcast array of shape {_shape(x)} to shape {shape}")
    return _broadcast_to_shape(x, shape)


def broadcast_arrays(*args):
    s = broadcast_shapes(*[_shape(a) for a in args])
    return [_broadcast_to_shape(_as_operand(a), s) for a in args]


def atleast_1d(x):
    x = _as_operand(x)
    return reshape(x, (1,)) if ndim(x) == 0 else x


def atleast_2d(x):
    x = atleast_1d(x)
    return expand_dims(x, 0) if ndim(x) == 1 else x


def concatenate(arrays, axis=0, dtype=None):
    arrays = list(arrays)
    if not arrays:
        raise ValueError("need at least one array to concatenate")
    ops = _promote_same_dtype(arrays)
    if dtype is not None:
        ops = [astype(o, dtype) for o in ops]
    nd = len(_shape(ops[0]))
    if nd == 0:
        raise ValueError("zero-dimensional arrays cannot be concatenated")
    if axis is None:
        return concatenate([ravel(o) for o in ops])
    ax = axis % nd
    if len(ops) == 1:
        return ops[0]
    return sh.concatenate(*ops, dimension=ax)


def _promote_same_dtype(arrays):
    dt, _ = result_type(*arrays)
    return [_to_dtype(_as_operand(a) if not is_python_scalar(a) else a, dt) for a in arrays]


concat = concatenate


def stack(arrays, axis=0):
    arrays = list(arrays)
    if not arrays:
        raise ValueError("need at least one array to stack")
    shapes = {_shape(a) for a in arrays}
    if len(shapes) > 1:
        raise core.ShapeError(f"all input arrays must have the same shape, got {sorted(shapes)}")
    nd = len(_shape(arrays[0])) + 1
    ops = [expand_dims(a, axis % nd) for a in _promote_same_dtype(arrays)]
    return concatenate(ops, axis=axis % nd)


def hstack(arrays):
    arrays = [atleast_1d(a) for a in arrays]
    return concatenate(arrays, axis=0 if ndim(arrays[0]) == 1 else 1)


def vstack(arrays):
    return concatenate([atleast_2d(a) for a in arrays], axis=0)


def split(a, indices_or_sections, axis=0):
    x = _as_operand(a)
    n = _shape(x)[axis]
    if isinstance(indices_or_sections, int):
        if n % indices_or_sections:
            raise ValueError("array split does not result in an equal division")
        step = n // indices_or_sections
        bounds = [i * step for i in range(indices_or_sections + 1)]
    else:
        bounds = [0] + [int(i) for i in indices_or_sections] + [n]
    return [_slice_axis(x, axis, lo, hi) for lo, hi in zip(bounds[:-1], bounds[1:])]


def array_split(a, sections, axis=0):
    n = _shape(a)[axis]
    q, r = divmod(n, sections)
    sizes = [q + 1] * r + [q] * (sections - r)
    return split(a, list(_np.cumsum(sizes)[:-1]), axis)


def _slice_axis(x, axis, lo, hi):
    s = _shape(x)
    axis %= len(s)
    lo, hi = builtins.min(builtins.max(lo, 0), s[axis]), builtins.min(builtins.max(hi, 0), s[axis])
    hi = builtins.max(lo, hi)
    start = [0] * len(s)
    limit = list(s)
    start[axis], limit[axis] = lo, hi
    return sh.slice(x, start_indices=tuple(start), limit_indices=tuple(limit), strides=None)


def flip(a, axis=None):
    x = _as_operand(a)
    return sh.rev(x, dimensions=_canon_axis(axis, len(_shape(x))))


def fliplr(a):
    return flip(a, 1)


def flipud(a):
    return flip(a, 0)


def pad(array, pad_width, mode="constant", constant_values=0):
    x = _as_operand(array)
    if mode != "constant":
        raise NotImplementedError(f"pad mode {mode!r} is not supported (only 'constant')")
    nd = len(_shape(x))
    pw = _np.broadcast_to(_np.asarray(pad_width, dtype=_np.int64).reshape(-1, 2)
                          if _np.ndim(pad_width) else _np.full((1, 2), pad_width), (nd, 2))
    cv = _to_dtype(constant_values, _np.dtype(x.dtype)) if is_python_scalar(constant_values) \
        else astype(constant_values, x.dtype)
    return sh.pad(x, cv, padding_config=tuple((int(lo), int(hi), 0) for lo, hi in pw))


def tile(a, reps):
    x = _as_operand(a)
    reps = (reps,) if isinstance(reps, int) else tuple(reps)
    nd = builtins.max(len(reps), ndim(x))
    x = reshape(x, (1,) * (nd - ndim(x)) + _shape(x))
    reps = (1,) * (nd - len(reps)) + reps
    big = []
    for r, s in zip(reps, _shape(x)):
        big += [r, s]
    y = _broadcast_to_shape(reshape(x, tuple(v for s in _shape(x) for v in (1, s))), tuple(big))
    return reshape(y, tuple(r * s for r, s in zip(reps, _shape(x))))


def repeat(a, repeats, axis=None):
    x = _as_operand(a)
    if axis is None:
        x, axis = ravel(x), 0
    if not isinstance(repeats, int):
        idx = _np.repeat(_np.arange(_shape(x)[axis]), _np.asarray(repeats))
        return take(x, idx, axis=axis)
    axis %= ndim(x)
    s = _shape(x)
    y = expand_dims(x, axis + 1)
    y = broadcast_to(y, s[:axis + 1] + (repeats,) + s[axis + 1:])
    return reshape(y, s[:axis] + (s[axis] * repeats,) + s[axis + 1:])


def tril(m, k=0):
    x = _as_operand(m)
    r, c = _shape(x)[-2:]
    mask = _np.tri(r, c, k, dtype=bool)
    return where(mask, x, _zero_like(x))


def triu(m, k=0):
    x = _as_operand(m)
    r, c = _shape(x)[-2:]
    mask = ~_np.tri(r, c, k - 1, dtype=bool)
    return where(mask, x, _zero_like(x))


def diagonal(a, offset=0, axis1=0, axis2=1):
    x = moveaxis(_as_operand(a), (axis1, axis2), (-2, -1))
    n, m = _shape(x)[-2:]
    i = _np.arange(builtins.max(0, builtins.min(n, m - offset) if offset >= 0 else
                                builtins.min(n + offset, m)))
    rows, cols = (i, i + offset) if offset >= 0 else (i - offset, i)
    return x[..., rows, cols]


def diag(v, k=0):
    x = _as_operand(v)
    if ndim(x) == 2:
        return diagonal(x, k)
    n = _shape(x)[0] + builtins.abs(k)
    out = zeros((n, n), x.dtype)
    rows = _np.arange(_shape(x)[0]) + builtins.max(-k, 0)
    cols = _np.arange(_shape(x)[0]) + builtins.max(k, 0)
    return index_update(out, (rows, cols), x)


def trace(a, offset=0):
    return sum(diagonal(a, offset), axis=-1)


def nonzero(a):
    c = to_concrete(a)
    if c is None:
        raise core.ConcretizationTypeError(
            f"nonzero/argwhere/boolean masks need a concrete array, but got the traced value "
            f"{a.aval.str_short()}: the size of the result depends on the values. Use "
            "fnp.where(mask, x, y) to choose elementwise instead.")
    return tuple(i.astype(_np.int32) for i in _np.nonzero(_np.asarray(c)))


def argwhere(a):
    return _np.stack(nonzero(a), axis=-1)


def take(a, indices, axis=None):
    x = _as_operand(a)
    if axis is None:
        x, axis = ravel(x), 0
    axis %= ndim(x)
    idx = (slice(None),) * axis + (indices,)
    return x[idx] if isinstance(x, Tracer) else getitem(x, idx)


def take_along_axis(arr, indices, axis):
    x = _as_operand(arr)
    idx = _as_operand(indices)
    nd = ndim(x)
    axis %= nd
    shape = broadcast_shapes(tuple(1 if i == axis else s for i, s in enumerate(_shape(x))),
                             tuple(1 if i == axis else s for i, s in enumerate(_shape(idx))))
    out_shape = tuple(s if i != axis else _shape(idx)[axis] for i, s in enumerate(shape))
    comps = []
    for d in range(nd):
        if d == axis:
            comps.append(_broadcast_to_shape(_normalize_index(idx, _shape(x)[axis]), out_shape))
        else:
            ar = _np.arange(out_shape[d], dtype=_np.int32).reshape(
                tuple(-1 if i == d else 1 for i in range(nd)))
            comps.append(_np.broadcast_to(ar, out_shape))
    return ix.gather(x, stack([astype(c, _np.int32) for c in comps], axis=-1))


# ---------------------------------------------------------------------------
# creation

def zeros(shape, dtype=None):
    return _np.zeros(shape, dtype or float32)


def ones(shape, dtype=None):
    return _np.ones(shape, dtype or float32)


def empty(shape, dtype=None):
    return zeros(shape, dtype)


def full(shape, fill_value, dtype=None):
    if isinstance(fill_value, Tracer):
        v = astype(fill_value, dtype) if dtype else fill_value
        return broadcast_to(v, (shape,) if isinstance(shape, int) else tuple(shape))
    if dtype is None:
        dtype = result_type(fill_value)[0]
    return _np.full(shape, fill_value, dtype)


def _like(x, dtype, shape):
    s = _shape(x) if shape is None else shape
    return s, (dtype or _np.dtype(x.dtype) if not is_python_scalar(x) else result_type(x)[0])


def zeros_like(a, dtype=None, shape=None):
    s, dt = _like(a, dtype, shape)
    return _np.zeros(s, dt)


def ones_like(a, dtype=None, shape=None):
    s, dt = _like(a, dtype, shape)
    return _np.ones(s, dt)


def full_like(a, fill_value, dtype=None, shape=None):
    s, dt = _like(a, dtype, shape)
    return full(s, fill_value, dt)


empty_like = zeros_like


def arange(start, stop=None, step=None, dtype=None):
    for v in (start, stop, step):
        if isinstance(v, Tracer) and to_concrete(v) is None:
            raise core.ConcretizationTypeError(
                f"arange needs concrete bounds, got the traced value {v.aval.str_short()}; "
                "the length of the result must be known while tracing")
    start, stop, step = (to_concrete(v) if isinstance(v, Tracer) else v for v in (start, stop, step))
    if dtype is None:
        dtype = result_type(*[v for v in (start, stop, step) if v is not None])[0]
    if stop is None:
        return _np.arange(start, dtype=dtype)
    return _np.arange(start, stop, step if step is not None else 1, dtype=dtype)


def linspace(start, stop, num=50, endpoint=True, dtype=None):
    return _np.linspace(start, stop, num, endpoint=endpoint, dtype=dtype or float32)


def eye(N, M=None, k=0, dtype=None):
    return _np.eye(N, M, k, dtype=dtype or float32)


def identity(n, dtype=None):
    return eye(n, dtype=dtype)


def tri(N, M=None, k=0, dtype=None):
    return _np.tri(N, M, k, dtype=dtype or float32)


def copy(a):
    x = _as_operand(a)
    return _np.array(x, copy=True) if isinstance(x, _np.ndarray) else x


# ---------------------------------------------------------------------------
# linear algebra

def matmul(a, b):
    if (type(a) is _np.ndarray or isinstance(a, Tracer)) and \
            (type(b) is _np.ndarray or isinstance(b, Tracer)) and a.dtype == b.dtype and \
            len(a.shape) == 2 and len(b.shape) == 2 and a.shape[1] == b.shape[0]:
        # the common case, matrix @ matrix of one dtype: nothing to promote or broadcast
        return la.dot_general(a, b, dimension_numbers=(((1,), (0,)), ((), ())))
    x, y = _promote_same_dtype([a, b])
    x, y = _as_operand(x), _as_operand(y)
    xs, ys = _shape(x), _shape(y)
    if not xs or not ys:
        raise ValueError("matmul: inputs must have at least one dimension (use * for scalars)")
    if len(xs) == 1 or len(ys) == 1:
        # a vector operand contracts directly (no expand_dims/squeeze): under vmap this
        # stays one matrix product instead of a stack of (1, K) @ (K, N) products.
        yc = 0 if len(ys) == 1 else len(ys) - 2
        if xs[-1] != ys[yc]:
            raise core.ShapeError(f"matmul: contracting dimensions differ: {xs} @ {ys} "
                                  f"({xs[-1]} != {ys[yc]})")
        return la.dot_general(x, y, dimension_numbers=(((len(xs) - 1,), (yc,)), ((), ())))
    if xs[-1] != ys[-2]:
        raise core.ShapeError(f"matmul: contracting dimensions differ: {xs} @ {ys} "
                              f"({xs[-1]} != {ys[-2]})")
    batch = broadcast_shapes(xs[:-2], ys[:-2])
    nb = len(batch)
    if nb == 0:
        return la.dot_general(x, y, dimension_numbers=(((1,), (0,)), ((), ())))
    if xs[:-2] != batch:
        x = _broadcast_to_shape(x, batch + xs[-2:])
    if ys[:-2] != batch:
        y = _broadcast_to_shape(y, batch + ys[-2:])
    bd = tuple(range(nb))
    return la.dot_general(x, y, dimension_numbers=(((nb + 1,), (nb,)), (bd, bd)))


def dot(a, b):
    if ndim(a) == 0 or ndim(b) == 0:
        return multiply(a, b)
    if ndim(b) <= 2:
        return matmul(a, b)
    x, y = _promote_same_dtype([a, b])
    return la.dot_general(x, y, dimension_numbers=(((ndim(x) - 1,), (ndim(y) - 2,)), ((), ())))


def vdot(a, b):
    return dot(ravel(a), ravel(b))


def inner(a, b):
    if ndim(a) == 0 or ndim(b) == 0:
        return multiply(a, b)
    x, y = _promote_same_dtype([a, b])
    return la.dot_general(x, y, dimension_numbers=(((ndim(x) - 1,), (ndim(y) - 1,)), ((), ())))


def outer(a, b):
    return multiply(reshape(a, (-1, 1)), reshape(b, (1, -1)))


def tensordot(a, b, axes=2):
    x, y = _promote_same_dtype([a, b])
    if isinstance(axes, int):
        ax = (tuple(range(ndim(x) - axes, ndim(x))), tuple(range(axes)))
    else:
        ax = tuple((a_,) if isinstance(a_, int) else tuple(a_) for a_ in axes)
    ax = (tuple(i % ndim(x) for i in ax[0]), tuple(i % ndim(y) for i in ax[1]))
    return la.dot_general(x, y, dimension_numbers=(ax, ((), ())))


def einsum(subscripts, *operands, optimize="optimal"):
    from ..contraction import einsum as _einsum
    return _einsum(subscripts, *[_as_operand(o) for o in operands], optimize=optimize)


class linalg:  # noqa: N801  (a namespace, as jax.numpy.linalg)
    @staticmethod
    def norm(x, ord=None, axis=None, keepdims=False):
        x = _promote_float(x)[0]
        if ord not in (None, 2, "fro") and not (ord == 2 and axis is not None):
            if ord == 1:
                return sum(absolute(x), axis=axis, keepdims=keepdims)
            if ord == _np.inf:
                return max(absolute(x), axis=axis, keepdims=keepdims)
            raise NotImplementedError(f"norm with ord={ord!r} is not supported")
        return sqrt(sum(ew.mul(x, x), axis=axis, keepdims=keepdims))


# ---------------------------------------------------------------------------
# indexing

def _normalize_index(i, n):
    """Non-negative integer index array (negative entries count from the end)."""
    if is_python_scalar(i) or isinstance(i, (_np.ndarray, _np.generic)):
        a = _np.asarray(i)
        if a.dtype.kind not in "iu":
            raise IndexError(f"indices must be integers, got dtype {a.dtype}")
        return _np.where(a < 0, a + n, a).astype(_np.int32)
    if _np.dtype(i.dtype).kind not in "iu":
        raise IndexError(f"indices must be integers, got {i.aval.str_short()}")
    i = astype(i, _np.int32)
    return ew.select(ew.lt(i, _np.int32(0)) if not _shape(i) else
                     ew.lt(i, _broadcast_to_shape(_np.int32(0), _shape(i))),
                     ew.add(i, _np.int32(n)), i)


def _expand_index(idx, nd):
    """Index tuple with bool masks turned into integer arrays and Ellipsis expanded."""
    if not isinstance(idx, tuple):
        idx = (idx,)
    items = []
    for it in idx:
        if isinstance(it, list):
            it = _np.asarray(it) if not builtins.any(isinstance(v, Tracer) for v in _flat(it)) \
                else asarray(it)
        if (isinstance(it, (_np.ndarray, Tracer)) and _np.dtype(it.dtype) == _np.bool_) \
                or type(it) is bool:
            if type(it) is bool:
                raise IndexError("indexing with a Python bool is not supported")
            items.extend(nonzero(it))
        else:
            items.append(it)
    n_ell = builtins.sum(1 for it in items if it is Ellipsis)
    if n_ell > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = builtins.sum(1 for it in items if it is not None and it is not Ellipsis)
    if used > nd:
        raise IndexError(f"too many indices for array: array is {nd}-dimensional, but {used} "
                         "were indexed")
    out = []
    for it in items:
        if it is Ellipsis:
            out.extend([slice(None)] * (nd - used))
        else:
            out.append(it)
    if n_ell == 0:
        out.extend([slice(None)] * (nd - used))
    return out


def _is_int_scalar(it):
    return (type(it) is int or isinstance(it, _np.integer)) and not isinstance(it, bool)


def getitem(x, idx):
    """NumPy indexing: ints, slices, None, Ellipsis, integer arrays, concrete bool masks."""
    x = _as_operand(x)
    items = _expand_index(idx, ndim(x))
    # None: insert size-1 axes first, then treat them as full slices
    new_axes, pos = [], 0
    for it in items:
        if it is None:
            new_axes.append(pos)
        pos += 1
    if new_axes:
        x = sh.expand_dims(x, dimensions=tuple(new_axes))
        items = [slice(None) if it is None else it for it in items]
    arrays = [i for i, it in enumerate(items) if not isinstance(it, slice) and not _is_int_scalar(it)]
    if arrays:   # with advanced indices present, ints are advanced indices too
        arrays = [i for i, it in enumerate(items) if not isinstance(it, slice)]
    shp = _shape(x)
    start, limit, strides, revs, squeezes = [], [], [], [], []
    for d, (it, n) in enumerate(zip(items, shp)):
        if isinstance(it, slice):
            a, b, s = it.indices(n)
            m = len(range(a, b, s))
            if s > 0:
                start.append(a), limit.append(a + (m - 1) * s + 1 if m else a), strides.append(s)
            else:
                last = a + (m - 1) * s
                start.append(last if m else 0), limit.append(a + 1 if m else 0)
                strides.append(-s)
                if m > 1:
                    revs.append(d)
        elif d not in arrays:          # a Python int on a basic index
            i = int(it)
            if not -n <= i < n:
                raise IndexError(f"index {i} is out of bounds for axis {d} with size {n}")
            i %= n
            start.append(i), limit.append(i + 1), strides.append(1)
            squeezes.append(d)
        else:
            start.append(0), limit.append(n), strides.append(1)
    if tuple(start) != (0,) * len(shp) or tuple(limit) != shp or builtins.any(s != 1 for s in strides):
        x = sh.slice(x, start_indices=tuple(start), limit_indices=tuple(limit),
                     strides=None if builtins.all(s == 1 for s in strides) else tuple(strides))
    if revs:
        x = sh.rev(x, dimensions=tuple(revs))
    if not arrays:
        return sh.squeeze(x, dimensions=tuple(squeezes)) if squeezes else x
    # advanced indexing: gather over the indexed axes moved to the front
    shp = _shape(x)
    idx_arrays = [_normalize_index(items[d], shp[d]) for d in arrays]
    bshape = broadcast_shapes(*[_shape(i) for i in idx_arrays])
    rest = [d for d in range(len(shp)) if d not in arrays]
    xt = transpose(x, arrays + rest)
    comps = [_broadcast_to_shape(i, bshape + (1,)) if False else
             reshape(_broadcast_to_shape(i, bshape) if _shape(i) != bshape else i, bshape + (1,))
             for i in idx_arrays]
    index = concatenate(comps, axis=len(bshape)) if len(comps) > 1 else comps[0]
    out = ix.gather(xt, index)
    contiguous = arrays == list(range(arrays[0], arrays[0] + len(arrays)))
    if contiguous and arrays[0] > 0:
        nb = len(bshape)
        k = arrays[0]
        perm = list(range(nb, nb + k)) + list(range(nb)) + list(range(nb + k, ndim(out)))
        out = transpose(out, perm)
    return out


def _index_positions(x, idx):
    """Flat positions of the elements x[idx] selects, with the shape of x[idx]."""
    n = size(x)
    pos = sh.iota(dtype=_np.dtype(_np.int32), shape=(n,), dimension=0) if n else _np.zeros(0, _np.int32)
    return getitem(reshape(pos, _shape(x)), idx)


def index_update(x, idx, values, mode="set"):
    """Functional x[idx] = values (mode "set") or x[idx] += values (mode "add")."""
    x = _as_operand(x)
    pos = _index_positions(x, idx)
    vals = _to_dtype(values, _np.dtype(x.dtype)) if is_python_scalar(values) else \
        astype(_as_operand(values), x.dtype)
    vals = broadcast_to(vals, _shape(pos))
    flat = reshape(x, (-1,))
    index = reshape(pos, _shape(pos) + (1,))
    bind = ix.scatter if mode == "set" else ix.scatter_add
    return reshape(bind(flat, index, vals), _shape(x))


def index_add(x, idx, values):
    return index_update(x, idx, values, mode="add")


class _IndexUpdateHelper:
    """x.at[idx].set(v) / .add(v) / .get(), as in JAX (on traced values)."""

    def __init__(self, x):
        self.x = x

    def __getitem__(self, idx):
        return _IndexUpdateRef(self.x, idx)


class _IndexUpdateRef:
    def __init__(self, x, idx):
        self.x, self.idx = x, idx

    def get(self):
        return getitem(self.x, self.idx)

    def set(self, v):
        return index_update(self.x, self.idx, v, "set")

    def add(self, v):
        return index_update(self.x, self.idx, v, "add")

    def multiply(self, v):
        return index_update(self.x, self.idx, multiply(getitem(self.x, self.idx), v), "set")


def at(x):
    return _IndexUpdateHelper(x)


# ---------------------------------------------------------------------------
# operators of traced values

def _install_tracer_ops():
    ops = core.tracer_ops
    for name in ["add", "subtract", "multiply", "true_divide", "floor_divide", "remainder",
                 "power", "matmul", "bitwise_and", "bitwise_or", "bitwise_xor", "negative",
                 "positive", "invert", "less", "less_equal", "greater", "greater_equal",
                 "equal", "not_equal"]:
        ops[name] = globals()[name]
    ops["abs"] = absolute
    ops["getitem"] = getitem
    for name in ["sum", "mean", "max", "min", "prod", "var", "std", "argmax", "argmin",
                 "reshape", "transpose", "squeeze", "astype", "ravel", "cumsum", "clip",
                 "swapaxes", "flatten", "round", "all", "any", "dot", "conj", "copy"]:
        f = globals().get(name) or (ravel if name == "flatten" else None)
        ops["method:" + name] = f
    ops["method:reshape"] = lambda x, *shape, **kw: reshape(
        x, shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape, **kw)
    ops["method:transpose"] = lambda x, *axes: transpose(
        x, None if not axes else (axes[0] if len(axes) == 1 and not isinstance(axes[0], int) else axes))
    ops["prop:at"] = at
    ops["prop:mT"] = lambda x: swapaxes(x, -1, -2)


_install_tracer_ops()
stop_gradient = _stop_gradient
