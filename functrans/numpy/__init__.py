"""functrans.numpy: the jax.numpy subset that models use, written as binds of primitives.

NumPy broadcasting and dtype promotion, with JAX's weak typing for Python scalars
(`x * 2` keeps x's float32); float32 is the default float and float64 is available.
Operands may be objects with JAX's `__jax_array__()` protocol (an ft.Tensor): the
functions take their values and return arrays (or traced values).
"""
import types as _types

from .. import core
from functrans.primitives.misc import stop_gradient as _stop_gradient
from ._promotion import (  # noqa: F401
    _promote_float, _takes_array_likes, array, asarray, astype, bool_, broadcast_shapes, complex128, complex64,
    complexfloating, concat, concatenate, dtype, e, expand_dims, finfo, float16, float32,
    float64, floating, iinfo, inexact, inf, int16, int32, int64, int8, integer, issubdtype,
    nan, ndarray, newaxis, number, pi, ravel, reshape, result_type, stack, uint16, uint32,
    uint64, uint8)
from ._shapes import (  # noqa: F401
    _canon_axis, argwhere, array_split, atleast_1d, atleast_2d, broadcast_arrays, broadcast_to,
    flip, fliplr, flipud, hstack, moveaxis, ndim, nonzero, pad, shape, size, split, squeeze,
    swapaxes, tile, transpose, vstack)
from ._creation import (  # noqa: F401
    arange, copy, empty, empty_like, eye, full, full_like, identity, linspace, ones, ones_like,
    tri, zeros, zeros_like)
from ._elementwise import (  # noqa: F401
    abs, absolute, add, arccos, arcsin, arctan, arctan2, around, bitwise_and, bitwise_not,
    bitwise_or, bitwise_xor, cbrt, ceil, clip, conj, conjugate, cos, cosh, divide, equal, exp,
    exp2, expm1, floor, floor_divide, fmax, fmin, fmod, greater, greater_equal, invert,
    isclose, isfinite, isinf, isnan, less, less_equal, log, log10, log1p, log2, logaddexp,
    logical_and, logical_not, logical_or, logical_xor, maximum, minimum, mod, multiply, negative, not_equal,
    positive, power, real, reciprocal, remainder, rint, round, rsqrt, sign, sin, sinh, sqrt,
    square, subtract, tan, tanh, true_divide, trunc, where)
from ._reductions import (  # noqa: F401
    all, allclose, amax, amin, any, argmax, argmin, argsort, cumprod, cumsum, lexsort,
    logsumexp, max, mean, min, prod, sort, std, sum, var)
from ._indexing import (  # noqa: F401
    at, diag, diagonal, getitem, index_add, index_update, repeat, take, take_along_axis, trace,
    tril, triu)
from ._linalg import dot, einsum, inner, linalg, matmul, outer, tensordot, vdot  # noqa: F401


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


_install_tracer_ops()
stop_gradient = _stop_gradient


for _name, _fn in list(globals().items()):       # (the elementwise ones take them already)
    if isinstance(_fn, _types.FunctionType) and not _name.startswith("_") and not getattr(
            _fn, "takes_array_likes", False):
        globals()[_name] = _takes_array_likes(_fn)
linalg.norm = staticmethod(_takes_array_likes(linalg.norm))
