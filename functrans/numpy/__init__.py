"""functrans.numpy: the jax.numpy subset that models use, written as binds of primitives.

NumPy broadcasting and dtype promotion, with JAX's weak typing for Python scalars
(`x * 2` keeps x's float32); float32 is the default float and float64 is available.
Operands may be objects with JAX's `__jax_array__()` protocol (an ft.Tensor): the
functions take their values and return arrays (or traced values).
"""
import functools as _functools
import types as _types

import numpy as _np

from .. import core
from ..tree_util import tree_map as _tree_map
from functrans.primitives.misc import stop_gradient as _stop_gradient
from ._promotion import (  # noqa: F401
    _promote_float, array, asarray, astype, bool_, broadcast_shapes, complex128, complex64,
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
    isfinite, isinf, isnan, less, less_equal, log, log10, log1p, log2, logaddexp, logical_and,
    logical_not, logical_or, logical_xor, maximum, minimum, mod, multiply, negative, not_equal,
    positive, power, real, reciprocal, remainder, rint, round, rsqrt, sign, sin, sinh, sqrt,
    square, subtract, tan, tanh, true_divide, trunc, where)
from ._reductions import (  # noqa: F401
    all, amax, amin, any, argmax, argmin, cumprod, cumsum, logsumexp, max, mean, min, prod,
    std, sum, var)
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


def _plain(x, like):
    """x, or the array behind an object with __jax_array__ (in a list or tuple too); such
    objects are collected in `like`."""
    if type(x) in (list, tuple):
        return type(x)(_plain(v, like) for v in x)
    f = getattr(x, "__jax_array__", None)
    if f is None:
        return x
    like.append(x)
    return f()


def _takes_array_likes(fn):
    """fn on `__jax_array__` operands: it runs on their arrays, and its array results are
    wrapped by the first such operand's __array_wrap__ (as NumPy's ufuncs wrap theirs).
    Costs a type check per positional argument when there are none."""
    @_functools.wraps(fn)
    def f(*args, **kwargs):
        for a in args:
            t = type(a)
            if t is not _np.ndarray and t not in _PLAIN and not isinstance(a, core.Tracer):
                like = []
                out = fn(*[_plain(v, like) for v in args],
                         **{k: _plain(v, like) for k, v in kwargs.items()})
                return _wrap_like(like[0], out) if like else out
        return fn(*args, **kwargs)
    return f


def _wrap_like(obj, out):
    wrap = obj.__array_wrap__
    return _tree_map(lambda o: wrap(o) if isinstance(o, (_np.ndarray, _np.generic, core.Tracer))
                     else o, out)


_PLAIN = {float, int, bool, complex, str, type(None), _np.dtype}
for _name, _fn in list(globals().items()):
    if isinstance(_fn, _types.FunctionType) and not _name.startswith("_"):
        globals()[_name] = _takes_array_likes(_fn)
linalg.norm = staticmethod(_takes_array_likes(linalg.norm))
