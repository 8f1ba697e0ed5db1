"""functrans.numpy: the jax.numpy subset that models use, written as binds of primitives.

NumPy broadcasting and dtype promotion, with JAX's weak typing for Python scalars
(`x * 2` keeps x's float32); float32 is the default float and float64 is available.
Operands may be objects with JAX's `__jax_array__()` protocol (an ft.Tensor): the
functions take their values and return arrays (or traced values).
"""
import sys
import functools as _functools
import types as _types

import numpy as _np

from .. import core
from . import raw
from ._promotion import public as _public
from functrans.primitives.misc import stop_gradient as _stop_gradient
from ._promotion import (  # noqa: F401
    _promote_float, _takes_array_likes, array, asarray, astype, bool_, broadcast_shapes,
    complex128, complex64,
    complexfloating, concat, concatenate, dtype, e, expand_dims, finfo, float16, float32,
    float64, floating, iinfo, inexact, inf, int16, int32, int64, int8, integer, issubdtype,
    nan, ndarray, newaxis, number, pi, promote_types, ravel, reshape, result_type, stack, uint16, uint32,
    uint64, uint8)
from ._shapes import (  # noqa: F401
    _canon_axis, array_split, atleast_1d, atleast_2d, broadcast_arrays, broadcast_to,
    flip, fliplr, flipud, hstack, moveaxis, ndim, pad, shape, size, split, squeeze,
    swapaxes, tile, transpose, vstack)
from ._creation import (  # noqa: F401
    arange, copy, empty, empty_like, eye, from_dlpack, full, full_like, identity, linspace,
    ones, ones_like, tri, zeros, zeros_like)
from ._creation import geomspace, logspace  # noqa: F401
from ._creation import (  # noqa: F401
    diag_indices, diag_indices_from, meshgrid, tril_indices, tril_indices_from, triu_indices,
    triu_indices_from)
from ._shapes import (  # noqa: F401
    append, atleast_3d, column_stack, diff, dsplit, hsplit, roll, rollaxis, rot90, row_stack,
    vsplit)
from ._elementwise import (  # noqa: F401
    abs, absolute, add, arccos, arcsin, arctan, arctan2, around, bitwise_and, bitwise_not,
    bitwise_or, bitwise_xor, cbrt, ceil, clip, conj, conjugate, cos, cosh, divide, equal, exp,
    exp2, expm1, floor, floor_divide, fmax, fmin, fmod, greater, greater_equal, invert,
    isfinite, isinf, isnan, less, less_equal, log, log10, log1p, log2, logaddexp, logical_and,
    logical_not, logical_or, logical_xor, maximum, minimum, mod, multiply, negative, not_equal,
    positive, power, real, reciprocal, remainder, rint, round, rsqrt, sign, sin, sinh, sqrt,
    square, subtract, tan, tanh, true_divide, trunc, where)
from ._elementwise import (  # noqa: F401
    angle, arccosh, arcsinh, arctanh, deg2rad, degrees, fabs, hypot, imag, iscomplex,
    iscomplexobj, isclose,
    isreal, isrealobj, logaddexp2, nan_to_num, rad2deg, radians, select, sinc)
from ._reductions import (  # noqa: F401
    all, allclose, amax, amin, any, argmax, argmin, argsort, cumprod, cumsum, lexsort,
    logsumexp, max, mean, min, prod, sort, std, sum, var)
from ._indexing import (  # noqa: F401
    argwhere, flatnonzero, nonzero, where, at, diag, diagonal, getitem, index_add, index_update, repeat, take, take_along_axis, trace,
    tril, triu)
from ._linalg import dot, einsum, inner, linalg, matmul, outer, tensordot, vdot  # noqa: F401
from ._linalg import cross, einsum_path, kron  # noqa: F401
from ._fft import fft  # noqa: F401
from ._calculus import c_, gradient, partition, r_, real_if_close  # noqa: F401
from ._counting import (  # noqa: F401
    bincount, histogram, histogram_bin_edges, interp, searchsorted, unique)
from ._polynomial import convolve, correlate, polyfit, polyval  # noqa: F401
from ._statistics import (  # noqa: F401
    median, nanargmax, nanargmin, nanmax, nanmean, nanmedian, nanmin, nanpercentile, nanprod,
    nanquantile, nanstd, nansum, nanvar, percentile, quantile)


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
                 "swapaxes", "flatten", "round", "all", "any", "dot", "conj", "copy", "argsort"]:
        f = globals().get(name) or (ravel if name == "flatten" else None)
        ops["method:" + name] = f
    ops["method:reshape"] = lambda x, *shape, **kw: reshape(
        x, shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape, **kw)
    ops["method:transpose"] = lambda x, *axes: transpose(
        x, None if not axes else (axes[0] if len(axes) == 1 and not isinstance(axes[0], int) else axes))
    ops["prop:at"] = at
    ops["prop:mT"] = lambda x: swapaxes(x, -1, -2)
    ops["prop:real"], ops["prop:imag"], ops["method:conjugate"] = real, imag, conj


# NumPy's own functions and ufuncs on traced values (NEP 13 and 18) run this module's: np.exp(x)
# or np.sum(x) inside a transformation is traced and differentiated, never turned into a
# constant through __array__; one this module lacks raises.
_UFUNC_METHODS = {"reduce": {"add": "sum", "multiply": "prod", "maximum": "max",
                             "minimum": "min", "logical_and": "all", "logical_or": "any"},
                  "accumulate": {"add": "cumsum", "multiply": "cumprod"}}
_DTYPE_ONLY = {"result_type", "can_cast", "min_scalar_type", "iscomplexobj", "isrealobj",
               "common_type"}


def _no_out(name, kwargs):
    if kwargs.pop("out", None) is not None:
        raise TypeError(f"numpy.{name}(..., out=...) on a traced value: NumPy cannot write a "
                        "traced result into an array; drop out= and use the returned value")


def _array_ufunc(ufunc, method, inputs, kwargs):
    name = ufunc.__name__
    _no_out(name, kwargs)
    if method == "__call__":
        fn = globals().get({"absolute": "abs", "fabs": "abs"}.get(name, name))
    else:
        fn = globals().get(_UFUNC_METHODS.get(method, {}).get(name, ""))
        kwargs.setdefault("axis", 0)             # a ufunc method's default axis
    if fn is None or not callable(fn):
        what = name if method == "__call__" else f"{name}.{method}"
        raise TypeError(f"numpy.{what} was called on a traced value, and functrans.numpy has "
                        f"no equivalent: a NumPy result would be a constant (no derivative, "
                        "not traced). Write it with functrans.numpy functions.")
    return fn(*inputs, **kwargs)


def _array_function(func, types, args, kwargs):
    name, module = func.__name__, func.__module__ or "numpy"
    if name in _DTYPE_ONLY:                      # only the dtypes matter
        def stand_in(a):
            return _np.empty((0,), a.dtype) if isinstance(a, core.Tracer) else a
        return func(*[stand_in(a) for a in args], **{k: stand_in(v) for k, v in kwargs.items()})
    ns = globals() if module == "numpy" else vars(globals().get(module[6:], object)) \
        if module.startswith("numpy.") else {}
    fn = ns.get(name)
    _no_out(name, kwargs)
    if fn is None:
        raise TypeError(f"{module}.{name} was called on a traced value, and functrans.numpy "
                        f"has no {name}: a NumPy result would be a constant (no derivative, not "
                        "traced). Write it with functrans.numpy functions.")
    if isinstance(fn, staticmethod):            # fnp.linalg's functions
        fn = fn.__func__
    return fn(*args, **kwargs)


_install_tracer_ops()
core.tracer_ops["array_ufunc"] = _array_ufunc
core.tracer_ops["array_function"] = _array_function
stop_gradient = _stop_gradient


# the library's own namespace (functrans.numpy.raw): raw arrays out, `__jax_array__`
# operands taken (the elementwise functions take them already)
for _name, _fn in list(globals().items()):
    if isinstance(_fn, _types.FunctionType) and not _name.startswith("_"):
        setattr(raw, _name, _fn if getattr(_fn, "takes_array_likes", False)
                else _takes_array_likes(_fn))
    elif not _name.startswith("__") and _name != "raw":
        setattr(raw, _name, _fn)


def _namespace(ns, wrap):
    """A copy of the namespace class `ns` (linalg, fft) with its functions wrapped."""
    return type(ns.__name__, (), {k: staticmethod(wrap(v.__func__)) if isinstance(
        v, staticmethod) else v for k, v in vars(ns).items() if not k.startswith("__")})


raw.linalg, raw.fft = _namespace(linalg, _takes_array_likes), _namespace(fft, _takes_array_likes)
linalg, fft = _namespace(linalg, _public), _namespace(fft, _public)
# the users' namespace: Arrays in and out (public: unwrap once on entry, wrap on exit)
for _name, _fn in list(globals().items()):
    if isinstance(_fn, _types.FunctionType) and not _name.startswith("_"):
        globals()[_name] = _public(_fn)


def _python_scalars_weak(public_fn):
    """jnp.asarray / jnp.array of a Python scalar without a dtype: a weakly typed Array, as
    JAX's (so that jnp.asarray(1.0) * float16_array stays float16)."""
    @_functools.wraps(public_fn)
    def f(x, dtype=None):
        if dtype is None and type(x) in (int, float, complex):
            return core.wrap_value(raw.asarray(x), True)
        return public_fn(x, dtype)
    return f


asarray = array = _python_scalars_weak(asarray)


def _install_array_ops():
    """The operators and methods of ft.Array: the tracers' table with public functions.
    The binary operators are set on the class itself (one call less per operator)."""
    for key, fn in core.tracer_ops.items():
        if not key.startswith("array_"):
            core.array_ops[key] = _public(fn)
    core.array_ops["prop:at"] = at          # (its methods wrap their results)
    core.array_ops["namespace"] = sys.modules[__name__]     # Array.__array_namespace__
    ops = core.array_ops
    for name, key in [("add", "add"), ("sub", "subtract"), ("mul", "multiply"),
                      ("truediv", "true_divide"), ("floordiv", "floor_divide"),
                      ("mod", "remainder"), ("pow", "power"), ("matmul", "matmul"),
                      ("and", "bitwise_and"), ("or", "bitwise_or"), ("xor", "bitwise_xor")]:
        setattr(core.Array, f"__{name}__", _binary_operator(ops[key]))
        setattr(core.Array, f"__r{name}__", _binary_operator(ops[key], reflected=True))
    for name, key in [("lt", "less"), ("le", "less_equal"), ("gt", "greater"),
                      ("ge", "greater_equal"), ("eq", "equal"), ("ne", "not_equal")]:
        setattr(core.Array, f"__{name}__", _binary_operator(ops[key]))


_OPERANDS = (core.Array, _np.ndarray, float, int, bool, complex)


def _binary_operator(fn, reflected=False):
    """An Array operator running fn; an operand of another type (pytest.approx, a
    Python list) gets NotImplemented, so that Python asks it, as jax.Array does."""
    def op(self, other):
        if type(other) in _OPERANDS or isinstance(other, (core.Tracer, _np.generic)) or \
                hasattr(other, "__jax_array__"):
            return fn(other, self) if reflected else fn(self, other)
        return NotImplemented
    return op


_install_array_ops()
ndarray = core.Array       # jax.numpy.ndarray is jax.Array
