"""ft.lax: jax.lax's functions over the primitives, with JAX's signatures (positional and
keyword parameters as JAX documents them), for users and rules alike.

The primitives' own `bind` takes operands positionally and parameters by keyword only
(`reshape_p.bind(x, new_sizes=(2, 3))`); the functions here are the public face, so
`lax.reshape(x, (2, 3))` and `lax.convert_element_type(x, np.int32)` work as in JAX.
"""
from __future__ import annotations

import builtins as _builtins
import types as _types

import numpy as np

from .core import arrays_in_out as _arrays_in_out
from functrans.primitives import conv as _cv
from functrans.primitives import elementwise as _ew
from functrans.primitives import indexing as _ix
from functrans.primitives import linalg as _la
from functrans.primitives import reductions as _red
from functrans.primitives import shape as _sh
from functrans.primitives import special as _sp
from functrans.primitives.indexing import gather, scatter, scatter_add  # noqa: F401
from functrans.primitives.linalg import Precision  # noqa: F401
from functrans.primitives.misc import stop_gradient as _stop_gradient
from . import numpy as _fnp  # noqa: F401  (installs the operators of Arrays and tracers)
from . import tree_util as _tu
from .batching import vmap as _vmap
from .control_flow import cond, fori_loop, scan, switch, while_loop  # noqa: F401
from .core import canonicalize as _canonicalize
from .core import canonicalize_value as _canonicalize_value
from .core import canonicalize as _canonical_array
from .core import wrap_value as _wrap_value
from .core import check_dtype as _check_dtype
from .core import get_aval as _aval
from .core.config import DEFAULT_DTYPES as _DEFAULTS
from .lax_reduce import padtype_to_pads, reduce, reduce_window  # noqa: F401
from .higher_order.collectives import (all_gather, axis_index, axis_size, pmax,  # noqa: F401
                                       pmean, pmin, ppermute, psum, psum_scatter)

# ---------------------------------------------------------------------------------------
# elementwise: jax.lax's parameter names (x, y), so that keywords work too. `accuracy`
# (JAX's hint for the transcendental functions) is accepted where JAX has it; the result
# is always computed to full accuracy, which every hint allows.
_ACCURACY = {"cos", "exp", "expm1", "log", "log1p", "logistic", "rsqrt", "sin", "sqrt",
             "tan", "tanh"}


_PY_SCALARS = (bool, int, float, complex)


def _canonicalize(x):
    """A Python scalar as a rank-0 array of its default dtype, weakly typed as the scalar
    is (a weak ft.Array; bool is strong), so that lax.mul(2.0, 3.0) promotes as in JAX."""
    a = _canonical_array(x)
    return _wrap_value(a, True) if _aval(x).weak_type else a


def _scalars(*xs):
    """Operands that are all Python scalars become arrays of the default dtypes first:
    NumPy would compute 2.0 * 3.0 in float64, JAX's result is a float32 with x64 off.
    (With an array or a tracer among them, the primitive's rule types them already.)"""
    if all(type(x) in _PY_SCALARS for x in xs):
        return [_canonicalize(x) for x in xs]
    return xs


def _elementwise(name, nargs):
    # written out per arity (the eager path: no *args packing, no extra call)
    bind = getattr(_ew, name, None) or getattr(_sp, name)
    # NumPy operands are canonicalized (x32: float64 -> float32 with jax_enable_x64 off)
    if nargs == 1 and name in _ACCURACY:
        def f(x, *, accuracy=None):
            if type(x) in _PY_SCALARS:
                x = _canonicalize(x)
            elif type(x) is np.ndarray:
                x = _canonicalize_value(x)
            return bind(x)
    elif nargs == 1:
        def f(x):
            if type(x) in _PY_SCALARS:
                x = _canonicalize(x)
            elif type(x) is np.ndarray:
                x = _canonicalize_value(x)
            return bind(x)
    else:
        def f(x, y):
            if type(x) in _PY_SCALARS and type(y) in _PY_SCALARS:
                x, y = _canonicalize(x), _canonicalize(y)
            else:
                x, y = _canonicalize_value(x), _canonicalize_value(y)
            return bind(x, y)
    f.__name__ = f.__qualname__ = name
    f.__module__ = __name__
    f.__doc__ = (f"jax.lax.{name}: the `{name}` primitive, elementwise on operands of equal "
                 "shapes and dtypes (rank-0 operands broadcast).")
    return f


for _name in ("abs", "acos", "acosh", "asin", "asinh", "atan", "atanh", "ceil",
              "cos", "cosh", "erf", "exp", "expm1", "floor", "imag", "is_finite", "log", "log1p",
              "logistic", "neg", "real", "rsqrt", "sign", "sin", "sinh", "sqrt", "tan", "tanh"):
    globals()[_name] = _elementwise(_name, 1)
for _name in ("erf_inv", "erfc", "lgamma", "digamma", "bessel_i0e", "bessel_i1e"):
    globals()[_name] = _elementwise(_name, 1)
for _name in ("add", "atan2", "div", "eq", "ge", "gt", "le", "lt", "max", "min", "mul", "ne",
              "pow", "rem", "sub"):
    globals()[_name] = _elementwise(_name, 2)
del _name


def _bitwise(name, bind):
    def f(x, y):
        return bind(*_scalars(x, y))
    f.__name__ = f.__qualname__ = name
    f.__doc__ = (f"jax.lax.{name}: elementwise on boolean or integer operands of equal shapes "
                 "and dtypes (logical for booleans).")
    return f


bitwise_and = _bitwise("bitwise_and", _ew.and_)
bitwise_or = _bitwise("bitwise_or", _ew.or_)
bitwise_xor = _bitwise("bitwise_xor", _ew.xor)
shift_left = _bitwise("shift_left", _ew.shift_left)
shift_right_logical = _bitwise("shift_right_logical", _ew.shift_right_logical)


def bitwise_not(x):
    """jax.lax.bitwise_not: elementwise NOT of a boolean or integer operand."""
    return _ew.not_(*_scalars(x))


def square(x):
    """x * x, elementwise."""
    x, = _scalars(x)
    return _ew.mul(x, x)


def clamp(min, x, max):  # noqa: A002  (jax.lax's names)
    """x limited to [min, max] elementwise (min and max scalars or of x's shape). As JAX's,
    the derivative goes to x strictly inside the interval, to a bound strictly beyond it,
    and nowhere at a tie."""
    lo, x, hi = _scalars(min, x, max)
    below, above = _ew.gt(lo, x), _ew.lt(hi, x)
    inside = _ew.and_(_ew.gt(x, lo), _ew.lt(x, hi))
    tie = _stop_gradient(x)
    return _ew.select(inside, x, _ew.select(below, _broadcast_like(lo, x),
                                            _ew.select(above, _broadcast_like(hi, x), tie)))


def _broadcast_like(v, x):
    """v (rank 0 or x's shape) at x's shape, for select."""
    shape = _aval(x).shape
    return v if _aval(v).shape == shape else broadcast_in_dim(v, shape, ())


def full(shape, fill_value, dtype=None, *, sharding=None):
    """An array of `shape` filled with fill_value, of dtype (fill_value's dtype by default,
    weak Python scalars becoming the default dtypes)."""
    shape = (int(shape),) if np.ndim(shape) == 0 else tuple(int(d) for d in shape)
    v = _canonicalize(fill_value) if type(fill_value) in _PY_SCALARS else fill_value
    if dtype is not None:
        v = convert_element_type(v, dtype)
    return broadcast_in_dim(v, shape, ())


def full_like(x, fill_value, dtype=None, shape=None, sharding=None):
    """full(shape or x's shape, fill_value, dtype or x's dtype)."""
    a = _aval(x)
    return full(a.shape if shape is None else shape, fill_value,
                a.dtype if dtype is None else dtype)


def empty(shape, dtype, *, out_sharding=None):
    """jax.lax.empty: an array of shape and dtype whose values are unspecified (zeros here)."""
    return full(shape, 0, _dtype(dtype))


def dot(lhs, rhs, *, dimension_numbers=None, precision=None, preferred_element_type=None,
        out_sharding=None):
    """jax.lax.dot: the last axis of lhs contracted with the first of rhs (vector.vector,
    matrix.vector, matrix.matrix), or dot_general's dimension_numbers when given."""
    dn = dimension_numbers or (((_aval(lhs).ndim - 1,), (0,)), ((), ()))
    return dot_general(lhs, rhs, dn, precision, preferred_element_type)


def conj(x):
    """jax.lax.conj: the complex conjugate; a real operand becomes complex first (its
    conjugate is itself, in the complex dtype of its precision), as JAX's."""
    if type(x) in _PY_SCALARS:
        x = _canonicalize(x)
    a = _aval(x)
    if a.dtype.kind != "c":
        x = _ew.complex(x, np.zeros((), a.dtype))
    return _ew.conj(x)


def integer_pow(x, y):
    """x ** y for a static Python integer y."""
    return _ew.integer_pow(*_scalars(x), y=int(y))


def round(x, rounding_method=0):  # noqa: A001  (jax.lax's name)
    """x rounded to an integral value: halves away from zero (rounding_method 0, JAX's
    default RoundingMethod.AWAY_FROM_ZERO) or to even (1, TO_NEAREST_EVEN)."""
    return _ew.round(*_scalars(x), rounding_method=int(rounding_method))


def select(pred, on_true, on_false):
    """on_true where pred, else on_false (elementwise; pred boolean)."""
    return _ew.select(*_scalars(pred, on_true, on_false))


def _dtype(dtype):
    """A dtype parameter: Python's bool, int, float and complex stand for the default dtype
    of their kind (int32/float32 with jax_enable_x64 off, 64-bit with it on), as in JAX."""
    if dtype in (bool, int, float, complex):
        return _DEFAULTS[np.dtype(dtype).kind]
    return _check_dtype(dtype)


def convert_element_type(operand, new_dtype):
    """operand converted to new_dtype (a strongly typed result, as JAX's)."""
    return _ew.convert_element_type(operand, new_dtype=_dtype(new_dtype),
                                    weak_type=False)


def stop_gradient(x):
    """x (a pytree of arrays) with zero derivatives: the transformations see constants."""
    return _tu.tree_map(_stop_gradient, x)


# ---------------------------------------------------------------------------------------
# shapes, reductions, contractions


_max = _builtins.max     # this module's max is lax.max


def _ints(xs):
    return tuple(int(v) for v in xs)


def reshape(operand, new_sizes, dimensions=None):
    """operand with shape new_sizes; dimensions, when given, is the order in which the
    operand's axes are read (a transpose first, as JAX)."""
    if dimensions is not None and tuple(dimensions) != tuple(range(_aval(operand).ndim)):
        operand = _sh.transpose(operand, permutation=_ints(dimensions))
    return _sh.reshape(operand, new_sizes=_ints(new_sizes))


def transpose(operand, permutation):
    """operand's axes permuted: output axis i is operand axis permutation[i]."""
    return _sh.transpose(operand, permutation=_ints(permutation))


def squeeze(array, dimensions):
    """array without the given axes, each of size 1."""
    return _sh.squeeze(array, dimensions=_ints(dimensions))


def expand_dims(array, dimensions):
    """array with new axes of size 1 at the given output positions."""
    return _sh.expand_dims(array, dimensions=_ints(dimensions))


def rev(operand, dimensions):
    """operand reversed along the given axes."""
    return _sh.rev(operand, dimensions=_ints(dimensions))


def broadcast_in_dim(operand, shape, broadcast_dimensions):
    """operand broadcast to shape, its axis i becoming output axis broadcast_dimensions[i]."""
    return _sh.broadcast_in_dim(operand, shape=_ints(shape),
                                broadcast_dimensions=_ints(broadcast_dimensions))


def concatenate(operands, dimension):
    """The operands (a sequence) joined along axis dimension."""
    if not isinstance(operands, (list, tuple)):
        raise TypeError("lax.concatenate takes a sequence of operands and the dimension: "
                        "concatenate([x, y], dimension), got "
                        f"{type(operands).__name__} first")
    return _sh.concatenate(*operands, dimension=int(dimension))


def pad(operand, padding_value, padding_config):
    """operand padded with padding_value: (low, high, interior) per axis. A negative low or
    high cuts that many elements off that end (of the interior-padded operand), as JAX."""
    cfg = tuple(_ints(c) for c in padding_config)
    if all(lo >= 0 and hi >= 0 for lo, hi, _ in cfg):
        return _sh.pad(operand, padding_value, padding_config=cfg)
    out = _sh.pad(operand, padding_value,
                  padding_config=tuple((_max(lo, 0), _max(hi, 0), it) for lo, hi, it in cfg))
    shape = _aval(out).shape
    return _sh.slice(out, start_indices=tuple(_max(-lo, 0) for lo, _, _ in cfg),
                     limit_indices=tuple(d - _max(-hi, 0) for d, (_, hi, _) in zip(shape, cfg)),
                     strides=None)


def slice(operand, start_indices, limit_indices, strides=None):  # noqa: A001
    """operand[start:limit:stride] on every axis (static bounds)."""
    return _sh.slice(operand, start_indices=_ints(start_indices),
                     limit_indices=_ints(limit_indices),
                     strides=None if strides is None else _ints(strides))


def iota(dtype, size):
    """[0, 1, ..., size - 1] of dtype."""
    return _sh.iota(dtype=_dtype(dtype), shape=(int(size),), dimension=0)


def reduce_sum(operand, axes):
    """The sum over the given axes."""
    return _red.reduce_sum(operand, axes=_ints(axes))


def reduce_prod(operand, axes):
    """The product over the given axes."""
    return _red.reduce_prod(operand, axes=_ints(axes))


def reduce_max(operand, axes):
    """The maximum over the given axes."""
    return _red.reduce_max(operand, axes=_ints(axes))


def reduce_min(operand, axes):
    """The minimum over the given axes."""
    return _red.reduce_min(operand, axes=_ints(axes))


def argmax(operand, axis, index_dtype):
    """The index of the first maximum along axis, as index_dtype."""
    return _red.argmax(operand, axes=(int(axis),), index_dtype=_dtype(index_dtype))


def argmin(operand, axis, index_dtype):
    """The index of the first minimum along axis, as index_dtype."""
    return _red.argmin(operand, axes=(int(axis),), index_dtype=_dtype(index_dtype))


def cumsum(operand, axis=0, reverse=False):
    """The running sum along axis (from the end when reverse)."""
    return _red.cumsum(operand, axis=int(axis), reverse=bool(reverse))


def _cumulative(name, combine):
    def f(operand, axis=0, reverse=False):
        if type(operand) in _PY_SCALARS:
            operand = _canonicalize(operand)
        nd = _aval(operand).ndim
        if not -nd <= int(axis) < nd:
            raise ValueError(f"lax.{name}: axis {axis} is out of bounds for an array of rank "
                             f"{nd}")
        return associative_scan(combine, operand, reverse=bool(reverse), axis=int(axis) % nd)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = (f"jax.lax.{name}: the running {name[3:]} along axis (from the end when "
                 "reverse), an associative scan of the pairwise primitive, so it "
                 "differentiates and batches like it.")
    return f


cumprod = _cumulative("cumprod", _ew.mul)
cummax = _cumulative("cummax", _ew.max)
cummin = _cumulative("cummin", _ew.min)
cumlogsumexp = _cumulative("cumlogsumexp", _ew.logaddexp)


def sort(operand, dimension=-1, is_stable=True, num_keys=1):
    """operand sorted along dimension (NaN last), or a sequence of operands of one shape
    sorted together by the first num_keys of them (lexicographically): the same structure
    back. Always stable (is_stable=False allows any order, so stable is one)."""
    ops = list(operand) if isinstance(operand, (list, tuple)) else [operand]
    if not ops:
        raise ValueError("lax.sort: at least one operand is needed")
    num_keys = int(num_keys)
    if not 1 <= num_keys <= len(ops):
        raise ValueError(f"lax.sort: num_keys={num_keys} must be between 1 and the number of "
                         f"operands ({len(ops)})")
    nd = _aval(ops[0]).ndim
    if not -nd <= int(dimension) < _max(nd, 1):
        raise ValueError(f"lax.sort: dimension {dimension} is out of bounds for an array of "
                         f"rank {nd}")
    out = _red.sort(*ops, dimension=int(dimension) % _max(nd, 1), num_keys=num_keys)
    if isinstance(operand, (list, tuple)):
        return tuple(out)
    return out[0]


def sort_key_val(keys, values, dimension=-1, is_stable=True):
    """(keys sorted along dimension, values permuted the same way)."""
    return tuple(sort((keys, values), dimension=dimension, is_stable=is_stable, num_keys=1))


def top_k(operand, k, *, axis=-1):
    """(the k largest elements along axis, largest first, and their int32 indices); among
    equal elements the lower index comes first, and NaN counts as the largest."""
    shape = _aval(operand).shape
    if not shape:
        raise ValueError("lax.top_k: the operand must have at least one dimension")
    axis = int(axis) % len(shape)
    k = int(k)
    if not 0 <= k <= shape[axis]:
        raise ValueError(f"lax.top_k: k={k} must be between 0 and the size of axis {axis} "
                         f"({shape[axis]})")
    # a stable ascending sort of the reversed operand, reversed back: descending, equal
    # elements in ascending index order
    idx = _sh.iota(dtype=np.dtype(np.int32), shape=shape, dimension=axis)
    vals, order = _red.sort(rev(operand, (axis,)), rev(idx, (axis,)), dimension=axis,
                            num_keys=1)
    vals, order = rev(vals, (axis,)), rev(order, (axis,))
    return slice_in_dim(vals, 0, k, 1, axis), slice_in_dim(order, 0, k, 1, axis)


def batch_matmul(lhs, rhs, precision=None):
    """The matrix product of stacks of matrices, (..., m, k) @ (..., k, n), batch axes equal."""
    ls, rs = _aval(lhs).shape, _aval(rhs).shape
    if len(ls) < 2 or len(ls) != len(rs) or ls[:-2] != rs[:-2]:
        raise ValueError(f"lax.batch_matmul: lhs and rhs must be stacks of matrices with the "
                         f"same batch shape, got {ls} and {rs}")
    batch = tuple(range(len(ls) - 2))
    return dot_general(lhs, rhs, (((len(ls) - 1,), (len(rs) - 2,)), (batch, batch)),
                       precision=precision)


def dot_general(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None):
    """The contraction of lhs and rhs: dimension_numbers = ((lhs_contracting,
    rhs_contracting), (lhs_batch, rhs_batch)). precision is accepted for JAX's signature
    (the CPU computes at full precision); preferred_element_type, when given, is the
    result's dtype (the operands are converted to it first)."""
    _la.canonicalize_precision(precision)
    (lc, rc), (lb, rb) = dimension_numbers
    dn = ((_ints(lc), _ints(rc)), (_ints(lb), _ints(rb)))
    if preferred_element_type is not None:
        dt = _dtype(preferred_element_type)
        lhs, rhs = (v if _aval(v).dtype == dt else convert_element_type(v, dt)
                    for v in (lhs, rhs))
    return _la.dot_general(lhs, rhs, dimension_numbers=dn)


def _starts(operand, start_indices):
    """JAX's start indices: one integer scalar per axis (a sequence, or a 1-D array), a
    negative one counting from the end of its axis."""
    shape = _aval(operand).shape
    if len(start_indices) != len(shape):
        raise ValueError("Length of slice indices must match number of operand dimensions "
                         f"({len(start_indices)} vs {shape})")
    if not isinstance(start_indices, (list, tuple)):
        if _aval(start_indices).ndim != 1:
            raise ValueError(f"Slice indices must be a 1D sequence, got "
                             f"{_aval(start_indices).shape}")
        start_indices = [start_indices[k] for k in range(len(shape))]
    out = []
    for i, d in zip(start_indices, shape):
        if isinstance(i, (int, np.integer)):
            out.append(np.asarray(i + d if i < 0 else i, np.int32 if isinstance(i, int)
                                  else np.asarray(i).dtype))
        elif _aval(i).dtype.kind == "u":
            out.append(i)
        else:
            dt = _aval(i).dtype
            out.append(_ew.select(_ew.lt(i, np.zeros((), dt)), _ew.add(i, np.asarray(d, dt)), i))
    return out


def dynamic_slice(operand, start_indices, slice_sizes):
    """operand[start:start + size] on every axis, the starts traced values (clamped so the
    slice fits, as XLA)."""
    return _ix.dynamic_slice(operand, *_starts(operand, start_indices),
                             slice_sizes=tuple(int(s) for s in slice_sizes))


def dynamic_update_slice(operand, update, start_indices):
    """operand with `update` written at start_indices (clamped so it fits, as XLA)."""
    return _ix.dynamic_update_slice(operand, update, *_starts(operand, start_indices))


def slice_in_dim(operand, start_index, limit_index, stride=1, axis=0):
    """operand[start:limit:stride] along one axis (None: the axis' ends; negative indices
    count from its end), as jax.lax.slice_in_dim."""
    shape = _aval(operand).shape
    axis = int(axis) % len(shape)
    n = shape[axis]
    start = 0 if start_index is None else int(start_index)
    limit = n if limit_index is None else int(limit_index)
    starts, limits, strides = [0] * len(shape), list(shape), [1] * len(shape)
    starts[axis] = start + n if start < 0 else start
    limits[axis] = limit + n if limit < 0 else limit
    strides[axis] = int(stride)
    return slice(operand, starts, limits, strides)


def index_in_dim(operand, index, axis=0, keepdims=True):
    """The slice at a static index along one axis (negative counts from the end), kept as
    an axis of size 1 unless keepdims=False, as jax.lax.index_in_dim."""
    shape = _aval(operand).shape
    axis, index = int(axis) % len(shape), int(index)
    wrapped = index + shape[axis] if index < 0 else index
    if not 0 <= wrapped < shape[axis]:
        raise IndexError(f"index {index} is out of bounds for axis {axis} with size "
                         f"{shape[axis]}")
    out = slice_in_dim(operand, wrapped, wrapped + 1, 1, axis)
    return out if keepdims else squeeze(out, (axis,))


def dynamic_slice_in_dim(operand, start_index, slice_size, axis=0):
    """dynamic_slice along one axis: slice_size elements from a traced start (clamped so
    the slice fits), the other axes whole, as jax.lax.dynamic_slice_in_dim."""
    shape = _aval(operand).shape
    axis = int(axis) % len(shape)
    starts, sizes = [0] * len(shape), list(shape)
    starts[axis], sizes[axis] = start_index, int(slice_size)
    return dynamic_slice(operand, starts, sizes)


def dynamic_index_in_dim(operand, index, axis=0, keepdims=True):
    """The slice at a traced index along one axis (clamped), kept as an axis of size 1
    unless keepdims=False, as jax.lax.dynamic_index_in_dim."""
    axis = int(axis) % _aval(operand).ndim
    out = dynamic_slice_in_dim(operand, index, 1, axis)
    return out if keepdims else squeeze(out, (axis,))


def dynamic_update_slice_in_dim(operand, update, start_index, axis):
    """dynamic_update_slice with a traced start along one axis (0 on the others), as
    jax.lax.dynamic_update_slice_in_dim."""
    ndim = _aval(operand).ndim
    starts = [0] * ndim
    starts[int(axis) % ndim] = start_index
    return dynamic_update_slice(operand, update, starts)


def dynamic_update_index_in_dim(operand, update, index, axis):
    """operand with update written at a traced index along one axis (update may lack that
    axis), as jax.lax.dynamic_update_index_in_dim."""
    ndim = _aval(operand).ndim
    axis = int(axis) % ndim
    if _aval(update).ndim == ndim - 1:
        update = expand_dims(update, (axis,))
    return dynamic_update_slice_in_dim(operand, update, index, axis)


def map(f, xs, *, batch_size=None):  # noqa: A001  (jax.lax's name)
    """f over the leading axis of xs, one element at a time (a scan); with batch_size,
    vmap(f) over chunks of that size, the remainder in one last vmap, as JAX."""
    if batch_size is None:
        return scan(lambda c, x: (c, f(x)), (), xs)[1]
    leaves, tree = _tu.tree_flatten(xs)
    n = _aval(leaves[0]).shape[0]
    k, r = divmod(n, int(batch_size))
    m = k * int(batch_size)

    def rows(x, lo, hi):
        a = _aval(x)
        return _sh.slice(x, start_indices=(lo,) + (0,) * (a.ndim - 1),
                         limit_indices=(hi,) + a.shape[1:], strides=None)
    pieces = []
    if k:
        chunks = _tu.tree_unflatten(tree, [
            _sh.reshape(rows(x, 0, m), new_sizes=(k, int(batch_size)) + _aval(x).shape[1:])
            for x in leaves])
        ys = scan(lambda c, x: (c, _vmap(f)(x)), (), chunks)[1]
        pieces.append(_tu.tree_map(
            lambda y: _sh.reshape(y, new_sizes=(m,) + _aval(y).shape[2:]), ys))
    if r:
        pieces.append(_vmap(f)(_tu.tree_unflatten(tree, [rows(x, m, n) for x in leaves])))
    if len(pieces) == 1:
        return pieces[0]
    return _tu.tree_map(lambda a, b: _sh.concatenate(a, b, dimension=0), *pieces)


def associative_scan(fn, elems, reverse=False, axis=0):
    """Inclusive scan of an associative binary fn (pytrees of arrays in, elementwise along
    the scanned axis) over elems along axis, as jax.lax.associative_scan: log2(n) levels
    of fn on strided slices (combine the pairs, scan the half, fill in the rest), so it
    traces, vmaps and differentiates like any function of slices, concatenations and
    reshapes."""
    if not callable(fn):
        raise TypeError("lax.associative_scan: fn argument should be callable.")
    leaves, tree = _tu.tree_flatten(elems)
    if not leaves:
        raise ValueError("associative_scan: elems has no arrays")
    leaves = [_canonicalize_value(x) for x in leaves]   # x32: its slices meet fn's results
    axis = int(axis)
    sizes = []
    for x in leaves:
        a = _aval(x)
        if not -a.ndim <= axis < a.ndim:
            raise ValueError(f"associative_scan: axis {axis} is out of bounds for an array "
                             f"of rank {a.ndim}")
        sizes.append(a.shape[axis])
    if len(set(sizes)) > 1:
        raise ValueError("Array inputs to associative_scan must have the same first dimension. "
                         f"(saw: {[_aval(x).shape for x in leaves]})")
    axis = axis % _aval(leaves[0]).ndim

    def combine(a, b):
        out, out_tree = _tu.tree_flatten(fn(_tu.tree_unflatten(tree, a),
                                            _tu.tree_unflatten(tree, b)))
        if out_tree != tree:
            raise TypeError("associative_scan: fn must return a value of the same pytree "
                            f"structure as elems ({tree}), got {out_tree}")
        return out

    def part(xs, start, stop=None, stride=1):
        return [slice_in_dim(x, start, stop, stride, axis) for x in xs]

    def level(xs):
        n = _aval(xs[0]).shape[axis]
        if n < 2:
            return xs
        odd = level(combine(part(xs, 0, -1, 2), part(xs, 1, None, 2)))   # at 1, 3, 5, ...
        if n % 2 == 0:
            even = combine(part(odd, 0, -1), part(xs, 2, None, 2))
        else:
            even = combine(odd, part(xs, 2, None, 2))
        even = [concatenate([slice_in_dim(x, 0, 1, 1, axis), e], axis)
                for x, e in zip(xs, even)]                                # at 0, 2, 4, ...
        return [_interleave(e, o, axis) for e, o in zip(even, odd)]

    if reverse:
        leaves = [rev(x, (axis,)) for x in leaves]
    out = level(leaves)
    if reverse:
        out = [rev(x, (axis,)) for x in out]
    return _tu.tree_unflatten(tree, out)


def _interleave(a, b, axis):
    """a's elements at the even positions along axis, b's at the odd ones (a has as many
    as b or one more)."""
    na, nb = _aval(a).shape[axis], _aval(b).shape[axis]
    if na == nb + 1:
        b = concatenate([b, slice_in_dim(a, 0, 1, 1, axis)], axis)   # a filler, cut below
    pair = concatenate([expand_dims(a, (axis + 1,)), expand_dims(b, (axis + 1,))], axis + 1)
    shape = list(_aval(a).shape)
    shape[axis] = 2 * shape[axis]
    out = reshape(pair, tuple(shape))
    return slice_in_dim(out, 0, na + nb, 1, axis) if na == nb + 1 else out


def platform_dependent(*args, default=None, **per_platform):
    """The branch for the platform the arguments live on, called with them, as
    jax.lax.platform_dependent: "cuda" for CuPy arrays, else "cpu"; `default` where the
    platform has none. The choice is made when the function runs (or is traced)."""
    for name, branch in per_platform.items():
        if not callable(branch):
            raise TypeError(f"platform_dependent: the branch for {name!r} must be callable")
    leaves = _tu.tree_leaves(args)
    platform = "cuda" if any(type(x).__module__.startswith("cupy") for x in leaves) else "cpu"
    branch = per_platform.get(platform, default)
    if branch is None:
        raise NotImplementedError(f"platform_dependent: no branch for platform '{platform}' "
                                  "and no default")
    return branch(*args)


# ---------------------------------------------------------------------------------------
# convolutions: one primitive (conv_general_dilated), JAX's wrappers and their errors

ConvDimensionNumbers = _cv.ConvDimensionNumbers


def _conv_perm(spec, pair, rhs_spec):
    """(index of pair[0], index of pair[1], spatial indices in the order of rhs_spec's
    spatial characters) of one layout string."""
    spatial = [i for i, ch in enumerate(spec) if ch not in pair]
    if spec is not rhs_spec:
        spatial.sort(key=lambda i: rhs_spec.index(spec[i]))
    return (spec.index(pair[0]), spec.index(pair[1])) + tuple(spatial)


def conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers):
    """A ConvDimensionNumbers from None (('NC...', 'OI...', 'NC...'), the axes in order), a
    triple of layout strings such as ('NHWC', 'HWIO', 'NHWC'), or a ConvDimensionNumbers."""
    if isinstance(dimension_numbers, ConvDimensionNumbers):
        return dimension_numbers
    if len(lhs_shape) != len(rhs_shape):
        raise TypeError(f"convolution requires lhs and rhs ndim to be equal, got "
                        f"{len(lhs_shape)} and {len(rhs_shape)}.")
    if dimension_numbers is None:
        iota = tuple(range(len(lhs_shape)))
        return ConvDimensionNumbers(iota, iota, iota)
    if not isinstance(dimension_numbers, (list, tuple)):
        raise TypeError(f"convolution dimension_numbers must be tuple/list or None, got "
                        f"{type(dimension_numbers)}.")
    if len(dimension_numbers) != 3:
        raise TypeError(f"convolution dimension_numbers list/tuple must be length 3, got "
                        f"{len(dimension_numbers)}.")
    if not all(isinstance(s, str) for s in dimension_numbers):
        raise TypeError(f"convolution dimension_numbers elements must be strings, got "
                        f"{tuple(map(type, dimension_numbers))}.")
    for i, s in enumerate(dimension_numbers):
        if len(s) != len(lhs_shape):
            raise TypeError(f"convolution dimension_numbers[{i}] must have len equal to the "
                            f"ndim of lhs and rhs, got {len(s)} for lhs and rhs shapes "
                            f"{tuple(lhs_shape)} and {tuple(rhs_shape)}.")
    pairs = (("N", "C"), ("O", "I"), ("N", "C"))
    for i, (s, (a, b)) in enumerate(zip(dimension_numbers, pairs)):
        if not s.count(a) == s.count(b) == 1:
            raise TypeError(f"convolution dimension_numbers[{i}] must contain the characters "
                            f"'{a}' and '{b}' exactly once, got {s}.")
        if len(set(s)) != len(s):
            raise TypeError(f"convolution dimension_numbers[{i}] cannot have duplicate "
                            f"characters, got {s}.")
    lhs, rhs, out = dimension_numbers
    if not set(lhs) - {"N", "C"} == set(rhs) - {"O", "I"} == set(out) - {"N", "C"}:
        raise TypeError(f"convolution dimension_numbers elements must each have the same set "
                        f"of spatial characters, got {tuple(dimension_numbers)}.")
    return ConvDimensionNumbers(*(_conv_perm(s, p, rhs) for s, p in
                                  zip(dimension_numbers, pairs)))


def conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=None,
                         rhs_dilation=None, dimension_numbers=None, feature_group_count=1,
                         batch_group_count=1, precision=None, preferred_element_type=None,
                         out_sharding=None):
    """XLA's general convolution (jax.lax.conv_general_dilated): padding is 'SAME', 'VALID',
    'SAME_LOWER' or (lo, hi) pairs; lhs_dilation > 1 is a transposed convolution,
    rhs_dilation > 1 an atrous one; dimension_numbers as conv_dimension_numbers takes them.
    precision is accepted for JAX's signature (the CPU computes at full precision);
    preferred_element_type, when given, is the result's dtype (operands converted first)."""
    ls, rs = _aval(lhs).shape, _aval(rhs).shape
    dn = conv_dimension_numbers(ls, rs, dimension_numbers)
    nsp = len(ls) - 2
    window_strides = _ints(window_strides)
    if lhs_dilation is None:
        lhs_dilation = (1,) * nsp
    elif isinstance(padding, str) and any(d != 1 for d in lhs_dilation):
        raise ValueError("String padding is not implemented for transposed convolution using "
                         "this op. Please either exactly specify the required padding or use "
                         "conv_transpose.")
    rhs_dilation = (1,) * nsp if rhs_dilation is None else _ints(rhs_dilation)
    if isinstance(padding, str):
        k = [(rs[a] - 1) * d + 1 for a, d in zip(dn.rhs_spec[2:], rhs_dilation)]
        padding = padtype_to_pads([ls[a] for a in dn.lhs_spec[2:]], k, window_strides,
                                  padding)
    try:
        padding = tuple((int(lo), int(hi)) for lo, hi in padding)
    except (ValueError, TypeError) as e:
        raise ValueError("padding argument to conv_general_dilated should be a string or a "
                         f"sequence of (low, high) pairs, got {padding}") from e
    if preferred_element_type is not None:
        dt = _dtype(preferred_element_type)
        lhs, rhs = (v if _aval(v).dtype == dt else convert_element_type(v, dt)
                    for v in (lhs, rhs))
    return _cv.conv_general_dilated(
        lhs, rhs, window_strides=window_strides, padding=padding,
        lhs_dilation=_ints(lhs_dilation), rhs_dilation=rhs_dilation,
        dimension_numbers=ConvDimensionNumbers(*(_ints(s) for s in dn)),
        feature_group_count=int(feature_group_count), batch_group_count=int(batch_group_count))


def conv(lhs, rhs, window_strides, padding, precision=None, preferred_element_type=None):
    """conv_general_dilated in the NC.../OI.../NC... layout, without dilation."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, precision=precision,
                                preferred_element_type=preferred_element_type)


def conv_with_general_padding(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
                              precision=None, preferred_element_type=None):
    """conv_general_dilated in the NC.../OI.../NC... layout, with dilations."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=lhs_dilation,
                                rhs_dilation=rhs_dilation, precision=precision,
                                preferred_element_type=preferred_element_type)


def _conv_transpose_pads(k, s, padding):
    """(lo, hi) of one spatial dim of conv_transpose for the forward conv's padding."""
    if padding == "SAME":
        total = k + s - 2
        lo = k - 1 if s > k - 1 else -(-total // 2)
    elif padding == "VALID":
        total = k + s - 2 + _max(k - s, 0)
        lo = k - 1
    elif isinstance(padding, tuple):
        lo, total = k - padding[0] - 1, 2 * k - 2 - padding[0] - padding[1]
    else:
        raise ValueError(f"Invalid padding mode: {padding}")
    return lo, total - lo


def conv_transpose(lhs, rhs, strides, padding, rhs_dilation=None, dimension_numbers=None,
                   transpose_kernel=False, precision=None, preferred_element_type=None,
                   use_consistent_padding=False):
    """The transposed convolution (jax.lax.conv_transpose): lhs dilated by the strides and
    convolved with rhs (flipped, input and output features swapped, when
    transpose_kernel=True: then it is the gradient of conv_general_dilated). The layout
    defaults to channels-last (('NHWC', 'HWIO', 'NHWC') in 2-D)."""
    ls, rs = _aval(lhs).shape, _aval(rhs).shape
    nd = len(ls)
    if dimension_numbers is None:
        if not 2 <= nd <= 5:
            raise ValueError("No 4+ dimensional dimension_number defaults.")
        sp = "HWD"[:nd - 2]
        dimension_numbers = ("N" + sp + "C", sp + "IO", "N" + sp + "C")
    dn = conv_dimension_numbers(ls, rs, dimension_numbers)
    nsp = nd - 2
    rhs_dilation = (1,) * nsp if rhs_dilation is None else _ints(rhs_dilation)
    if use_consistent_padding or (isinstance(padding, str) and padding in ("SAME", "VALID")):
        each = [padding] * len(strides) if isinstance(padding, str) else padding
        ks = [(rs[a] - 1) * d + 1 for a, d in zip(dn.rhs_spec[2:], rhs_dilation)]
        padding = tuple(_conv_transpose_pads(k, s, p) for k, s, p in zip(ks, strides, each))
    if transpose_kernel:
        rhs = rev(rhs, dn.rhs_spec[2:])
        perm = list(range(nd))
        perm[dn.rhs_spec[0]], perm[dn.rhs_spec[1]] = dn.rhs_spec[1], dn.rhs_spec[0]
        rhs = transpose(rhs, perm)
    return conv_general_dilated(lhs, rhs, (1,) * nsp, padding, _ints(strides), rhs_dilation,
                                dn, precision=precision,
                                preferred_element_type=preferred_element_type)


# the users' functions: Array arguments unwrapped once, array results wrapped as ft.Array
for _name, _fn in list(globals().items()):
    if isinstance(_fn, _types.FunctionType) and not _name.startswith("_") and \
            _fn.__module__ in (__name__, "functrans.control_flow"):
        globals()[_name] = _arrays_in_out(_fn)
