"""functrans.numpy's dtypes, conversion (asarray, astype), JAX-style promotion and broadcasting.

reshape, expand_dims, concatenate and stack live here too: asarray stacks a list of traced
values with them.
"""
from __future__ import annotations

import builtins
import functools
import inspect
import math
import operator
import warnings

import numpy as _np

from .. import core
from ..core import (Array, Tracer, arrays_in_out, canonicalize_value, get_aval,
                    is_python_scalar, narrow_dtype, value_of, wrap_result, wrap_value)
from ..core.array import new_array
from ..core.config import DEFAULT_DTYPES, NARROW
from ..tree_util import tree_map
from functrans.primitives import elementwise as ew
from functrans.primitives import shape as sh


# dtypes, re-exported as jax.numpy does
float16, float32, float64 = _np.float16, _np.float32, _np.float64
int8, int16, int32, int64 = _np.int8, _np.int16, _np.int32, _np.int64
uint8, uint16, uint32, uint64 = _np.uint8, _np.uint16, _np.uint32, _np.uint64
bool_, complex64, complex128 = _np.bool_, _np.complex64, _np.complex128
dtype = _np.dtype
ndarray = _ndarray = _np.ndarray
pi, e, inf, nan, newaxis = _np.pi, _np.e, _np.inf, _np.nan, None
finfo, iinfo, issubdtype = _np.finfo, _np.iinfo, _np.issubdtype
floating, integer, inexact, number, complexfloating = (
    _np.floating, _np.integer, _np.inexact, _np.number, _np.complexfloating)

_DEFAULT = DEFAULT_DTYPES        # the kinds' defaults: 32-bit, or 64-bit under jax_enable_x64
_KIND_RANK = {"b": 0, "u": 1, "i": 1, "f": 2, "c": 3}


def _is_array(x):
    return isinstance(x, (Tracer, _np.ndarray, _np.generic, Array)) or hasattr(
        x, "__cuda_array_interface__")


# ---------------------------------------------------------------------------
# operands with JAX's __jax_array__ protocol (an ft.Tensor)


class ArrayLikeOperand(Exception):
    """Raised by the promotion's general path on an `__jax_array__` operand, so that the
    elementwise functions take such operands at no cost to their fast paths."""


def _plain(x, like):
    """x, or the array behind an object with __jax_array__ (in a list or tuple too); such
    objects are collected in `like`. A strong Array gives its raw array; a weak one stays
    (the promotion reads its weak type; bind unwraps it)."""
    t = type(x)
    if t is Array:
        return x if x.weak_type else value_of(x)
    if t is list or t is tuple:
        return t(_plain(v, like) for v in x)
    f = getattr(x, "__jax_array__", None)
    if f is None:
        return x
    like.append(x)
    return f()


def call_on_values(fn, args, kwargs):
    """fn on the arrays behind `__jax_array__` operands; its array results are wrapped by
    the first such operand's __array_wrap__ (as NumPy's ufuncs wrap theirs)."""
    like = []
    out = fn(*[_plain(v, like) for v in args], **{k: _plain(v, like) for k, v in kwargs.items()})
    if not like:
        return out
    wrap = like[0].__array_wrap__
    return tree_map(lambda o: wrap(o) if isinstance(o, (_np.ndarray, _np.generic, Tracer, Array))
                    else o, out)


_PLAIN = {float, int, bool, complex, str, type(None), _np.dtype}


def _takes_array_likes(fn):
    """fn taking `__jax_array__` operands (call_on_values) and NumPy arrays canonicalized
    (x32: float64 -> float32 with jax_enable_x64 off, canonicalize_value); a type check per
    positional argument when there are neither."""
    @functools.wraps(fn)
    def f(*args, **kwargs):
        for a in args:
            t = type(a)
            if t is _np.ndarray:
                if a.dtype in NARROW:
                    return fn(*[canonicalize_value(v) for v in args], **kwargs)
            elif t not in _PLAIN and not isinstance(a, Tracer):
                return call_on_values(fn, args, kwargs)
        return fn(*args, **kwargs)
    return f


def public(fn):
    """fn as functrans.numpy hands it to users: its strong Array arguments unwrapped once
    on entry to their raw arrays (a weak one stays: the promotion reads its weak type, bind
    unwraps it), `__jax_array__` operands and Arrays in lists, tuples and keywords taken by
    call_on_values, and its array results wrapped as Arrays on exit (core.wrap_result).
    The library's own callers use the unwrapped functions (functrans.numpy.raw), so its
    internal eager chains pass raw arrays. A function of exactly (x) or (x, y) (the
    elementwise ones) gets a wrapper of that arity: the per-op cost of the eager path."""
    if getattr(fn, "reads_protocols", False):     # from_dlpack: Tensors are its input
        return arrays_in_out(fn)
    params = list(inspect.signature(fn).parameters.values())
    plain = all(p.kind is p.POSITIONAL_OR_KEYWORD and p.default is p.empty for p in params)
    if plain and [p.name for p in params] == ["x"]:
        def f(x):
            t = type(x)
            if t is Array:
                if not x.weak_type:
                    v = x._value
                    x = v if v is not None else value_of(x)   # (deleted: raises)
            elif t is not _ndarray and t not in _PLAIN and not isinstance(x, Tracer):
                return wrap_result(call_on_values(fn, (x,), {}))
            out = fn(x)
            if type(out) is _ndarray:
                a = _new(Array)
                a._value, a.weak_type = out, False
                return a
            if isinstance(out, Tracer):     # (traced: what wrap_result returns as is)
                return out
            return wrap_result(out)
    elif plain and [p.name for p in params] == ["x", "y"]:
        def f(x, y):
            t = type(x)
            if t is Array:
                if not x.weak_type:
                    v = x._value
                    x = v if v is not None else value_of(x)   # (deleted: raises)
            elif t is not _ndarray and t not in _PLAIN and not isinstance(x, Tracer):
                return wrap_result(call_on_values(fn, (x, y), {}))
            t = type(y)
            if t is Array:
                if not y.weak_type:
                    v = y._value
                    y = v if v is not None else value_of(y)   # (deleted: raises)
            elif t is not _ndarray and t not in _PLAIN and not isinstance(y, Tracer):
                return wrap_result(call_on_values(fn, (x, y), {}))
            out = fn(x, y)
            if type(out) is _ndarray:
                a = _new(Array)
                a._value, a.weak_type = out, False
                return a
            if isinstance(out, Tracer):
                return out
            return wrap_result(out)
    else:
        def f(*args, **kwargs):
            raw = None
            i = 0
            for a in args:
                t = type(a)
                if t is Array:
                    if not a.weak_type:
                        if raw is None:
                            raw = list(args)
                        raw[i] = value_of(a)
                elif t is not _ndarray and t not in _PLAIN and not isinstance(a, Tracer):
                    return wrap_result(call_on_values(fn, args, kwargs))
                i += 1
            if kwargs:
                for v in kwargs.values():
                    t = type(v)
                    if t is Array or t is list or t is tuple:
                        return wrap_result(call_on_values(fn, args, kwargs))
            if raw is None:
                out = fn(*args, **kwargs)
                return new_array(out) if type(out) is _ndarray else wrap_result(out)
            # (an argument returned as is comes back as its Array: fnp.asarray(x) is x)
            return wrap_result(fn(*raw, **kwargs),
                               {id(r): a for r, a in zip(raw, args) if r is not a})
    return functools.wraps(fn)(f)


_new = object.__new__


# ---------------------------------------------------------------------------
# conversion and promotion

def _canonical_dtype(dt):
    """A dtype argument: Python's bool, int, float and complex stand for the default dtype of
    their kind (int32/float32 with jax_enable_x64 off), as in JAX."""
    if dt is bool or dt is int or dt is float or dt is complex:   # (np.float64 == float)
        return _DEFAULT[_np.dtype(dt).kind]
    return core.check_dtype(dt)


def explicit_dtype(dtype, name=""):
    """A dtype the caller asked for by name (dtype=, astype): _canonical_dtype's, and with
    jax_enable_x64 off a 64-bit one becomes 32-bit with JAX's warning (`name` is the
    function asked, as in JAX's text)."""
    dt = _canonical_dtype(dtype)
    to = narrow_dtype(dt)
    if to is not dt:
        where = f" requested in {name}" if name else ""
        warnings.warn(f"Explicitly requested dtype {dt}{where} is not available, and will be "
                      f"truncated to dtype {to}. To enable more dtypes, set the jax_enable_x64 "
                      "configuration option or the JAX_ENABLE_X64 shell environment variable. "
                      "See https://github.com/jax-ml/jax#current-gotchas for more.",
                      UserWarning, stacklevel=3)
    return to


def dtype_arg(dtype, name=""):
    """A creation function's dtype= (None stays None), as explicit_dtype reads it."""
    return None if dtype is None else explicit_dtype(dtype, name)


def asarray(x, dtype=None):
    """An array (or the tracer itself) with float32/int32 defaults for Python data; with
    jax_enable_x64 off, NumPy's 64-bit values become 32-bit (canonicalize_value), and an
    explicit 64-bit dtype too, with JAX's warning."""
    if dtype is not None:
        dtype = explicit_dtype(dtype, "asarray")
    if isinstance(x, Tracer):
        return x if dtype is None else astype(x, dtype)
    if type(x) is Array:                       # (a weak one: public() unwraps strong ones)
        return x if dtype is None else astype(x, dtype)
    if hasattr(x, "__cuda_array_interface__"):
        return x if dtype is None else x.astype(dtype)
    if isinstance(x, (_np.ndarray, _np.generic)):
        out = _np.asarray(x)
        core.check_dtype(out.dtype)
        return canonicalize_value(out) if dtype is None else out.astype(dtype)
    if isinstance(x, (list, tuple)):
        flat = list(_flat(x))
        if builtins.any(isinstance(v, Tracer) for v in flat):
            out = stack([asarray(v) for v in x])
            return out.astype(dtype) if dtype else out
        if dtype is None and builtins.any(isinstance(v, (_np.ndarray, _np.generic)) for v in flat):
            # NumPy scalars or arrays in the list set its dtype as stacking them does when
            # traced, so eager and traced calls agree (np.float64 stays float64)
            dtype = _result_type(*flat)[0]
    if dtype is not None:
        return _np.asarray(x, dtype=dtype)
    arr = _np.asarray(x)
    if arr.dtype.kind in "fc" and not isinstance(x, _np.ndarray):
        arr = arr.astype(_DEFAULT[arr.dtype.kind] if arr.dtype.itemsize > _DEFAULT[arr.dtype.kind].itemsize
                         else arr.dtype)
    elif arr.dtype.kind == "i" and arr.dtype.itemsize > _DEFAULT["i"].itemsize:
        arr = arr.astype(_DEFAULT["i"])
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
    if isinstance(x, Tracer) or type(x) is Array:
        return x.aval.dtype, x.aval.weak_type
    if isinstance(x, (list, tuple)):
        return asarray(x).dtype, False
    return narrow_dtype(_np.dtype(x.dtype)), False     # NumPy values: x32, as JAX


# JAX's type-promotion lattice (jax.numpy.promote_types): bool below everything, the weak
# Python kinds i*/f*/c* below every integer/float/complex, an integer and a float join at
# the float, unsigned and signed join at the next wider signed type, u64 and i64 at f*.
_LATTICE = {"b1": ("i*",), "i*": ("u1", "i1"), "u1": ("i2", "u2"), "u2": ("i4", "u4"),
            "u4": ("i8", "u8"), "u8": ("f*",), "i1": ("i2",), "i2": ("i4",), "i4": ("i8",),
            "i8": ("f*",), "f*": ("c*", "f2"), "f2": ("f4",), "f4": ("f8", "c8"),
            "f8": ("c16",), "c*": ("c8",), "c8": ("c16",), "c16": ()}
_WEAK_NODE = {"i": "i*", "u": "i*", "f": "f*", "c": "c*"}


def _upper(node, memo={}):
    """node and every node above it."""
    up = memo.get(node)
    if up is None:
        up = memo[node] = frozenset((node,)).union(*(_upper(n) for n in _LATTICE[node]))
    return up


def _join(nodes, memo={}):
    key = frozenset(nodes)
    out = memo.get(key)
    if out is None:
        common = frozenset.intersection(*(_upper(n) for n in key))
        out = memo[key] = next(n for n in common if _upper(n) >= common)
    return out


def _node(dt, weak):
    if dt.kind == "b":
        return "b1"
    return _WEAK_NODE[dt.kind] if weak else f"{dt.kind}{dt.itemsize}"


def _node_dtype(node):
    if node.endswith("*"):
        return _DEFAULT[node[0]]
    return _np.dtype("bool" if node == "b1" else node)


def promote_types(a, b):
    """The dtype JAX promotes two dtypes to (its lattice, not NumPy's table):
    int32 + float16 -> float16, uint32 + int32 -> int64, int64 + uint64 -> float64."""
    return _node_dtype(_join((_node(_np.dtype(a), False), _node(_np.dtype(b), False))))


def _result_type(*args):
    """(dtype, weak) of combining args on JAX's lattice; Python scalars are weak: they take
    the other operands' dtype unless their kind is higher (then their kind's default)."""
    dws = [_dtype_weak(a) for a in args]
    if len(dws) == 1:
        return dws[0]
    node = _join([_node(d, w) for d, w in dws])
    # int32 + uint32 joins at int64, which is int32 again with x64 off (JAX canonicalizes
    # result_type's result too)
    return narrow_dtype(_node_dtype(node)), node.endswith("*")


def result_type(*args):
    """The dtype of combining args (arrays, Python scalars, dtypes or scalar types) on JAX's
    lattice, as jax.numpy.result_type: Python scalars are weak; the defaults follow
    jax_enable_x64."""
    if not args:
        raise ValueError("at least one array or dtype is required")
    ops = [a if is_python_scalar(a) else _np.zeros((), _canonical_x32(
        a if isinstance(a, (type, _np.dtype, str)) else _dtype_weak(a)[0])) for a in args]
    return _canonical_x32(_result_type(*ops)[0])


def _canonical_x32(dt):
    """dt with 64-bit kinds as their 32-bit ones while jax_enable_x64 is off (JAX's dtype
    canonicalization, which result_type applies to its operands and its result)."""
    dt = _canonical_dtype(dt)
    if dt.itemsize == 8 and dt.kind in "iuf" and _DEFAULT["f"].itemsize == 4:
        return _np.dtype(f"{dt.kind}4")
    if dt == _np.complex128 and _DEFAULT["c"] == _np.complex64:
        return _np.dtype(_np.complex64)
    return dt


def _inexact(dt):
    """The floating dtype jax.numpy computes a floating function of an operand of dtype dt
    in: dt itself if inexact, float32 for bool and integers up to 32 bits, the default
    float (float64 under jax_enable_x64) for 64-bit integers."""
    dt = _np.dtype(dt)
    if dt.kind in "fc":
        return dt
    if dt.kind == "b" or dt.itemsize < 8:
        return _np.dtype(_np.float32)
    return _DEFAULT["f"]


def _to_dtype(x, dt, weak=False):
    """x as an operand of dtype dt (Python scalars become rank-0 literals); weak: the
    promoted dtype is weak (every operand was weakly typed or of a lower kind, as
    int32 * 2.5), so the operand becomes weakly typed too, as in JAX."""
    if is_python_scalar(x):
        return wrap_value(_np.asarray(x, dt), True) if weak else _np.asarray(x, dt)
    if isinstance(x, (list, tuple)):
        x = asarray(x)
    if _np.dtype(x.dtype) != dt or weak and not getattr(x, "weak_type", False):
        return ew.convert_element_type(x, new_dtype=dt, weak_type=weak)
    return x


def _axis(axis, ndim, name=None):
    """axis (negative ones count from the end) as an index into range(ndim); AxisError when
    it is out of bounds (a silent modulo would pick another axis)."""
    a = operator.index(axis)
    if not -ndim <= a < ndim:
        raise core.AxisError((f"{name}: " if name else "") +
                             f"axis {a} is out of bounds for array of dimension {ndim}")
    return a % ndim


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
        # (a NumPy array of a 64-bit dtype takes the general path, which narrows it)
        a_arr = (ta is _np.ndarray and a.dtype not in NARROW) or isinstance(a, Tracer)
        b_arr = (tb is _np.ndarray and b.dtype not in NARROW) or isinstance(b, Tracer)
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
    for a in args:
        if hasattr(a, "__jax_array__"):
            raise ArrayLikeOperand
    args = [asarray(a) if isinstance(a, (list, tuple)) else a for a in args]
    dt, weak = _result_type(*args)
    shape = broadcast_shapes(*[_shape(a) for a in args], name=name) if len(args) > 1 \
        else _shape(args[0])
    out = []
    for a in args:
        a = _to_dtype(a, dt, weak)
        if _shape(a) != shape and _shape(a) != ():
            a = _broadcast_to_shape(a, shape)
        out.append(a)
    return out


def _promote_float(*args, name=""):
    """args promoted together and then to an inexact dtype (`_inexact`), as jax.numpy's
    floating functions of integer operands: int32 -> float32 also under jax_enable_x64."""
    dt, weak = _result_type(*args)
    if dt.kind not in "fc":
        dt = _inexact(dt)
        args = [_to_dtype(a, dt, weak) for a in args]
    return _promote_args(name, *args)


def _unary_float(prim_bind):
    def f(x):
        if ((type(x) is _np.ndarray and x.dtype not in NARROW) or isinstance(x, Tracer)) \
                and x.dtype.kind in "fc":
            return prim_bind(x)         # already floating: nothing to promote
        try:
            (x1,) = _promote_float(x)
        except ArrayLikeOperand:
            return call_on_values(f, (x,), {})
        return prim_bind(x1)
    f.takes_array_likes = True
    return f


def _binary(prim_bind, floats=False, bools=None):
    """The NumPy function of a binary primitive: JAX's promotion, then prim_bind; bools,
    where given, runs instead on bool operands (add is `or` there, multiply `and`)."""
    name = getattr(getattr(prim_bind, "__self__", None), "name", "")   # for error messages

    def f(x, y):
        try:
            x1, y1 = _promote_float(x, y, name=name) if floats else _promote_args(name, x, y)
        except ArrayLikeOperand:
            return call_on_values(f, (x, y), {})
        if bools is not None and x1.dtype == _np.bool_:
            return bools(x1, y1)
        return prim_bind(x1, y1)
    f.takes_array_likes = True
    return f


# ---------------------------------------------------------------------------
# operands, astype, and the shape ops asarray needs (a list of traced values is stacked)

def _as_operand(x):
    return asarray(x) if not isinstance(x, Tracer) and not is_python_scalar(x) else (
        _np.asarray(x, get_aval(x).dtype) if is_python_scalar(x) else x)


def astype(x, dtype):
    dt = explicit_dtype(dtype, "astype")
    x = _as_operand(x)
    if _np.dtype(x.dtype) == dt:
        return x
    return ew.convert_element_type(x, new_dtype=dt, weak_type=False)


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


def expand_dims(a, axis):
    x = _as_operand(a)
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    nd = len(_shape(x)) + len(axes)
    dims = sorted(_axis(ax, nd, "expand_dims") for ax in axes)
    if len(set(dims)) != len(dims):
        raise ValueError(f"expand_dims: repeated axis in {axis}")
    return sh.expand_dims(x, dimensions=tuple(dims))


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
    ax = _axis(axis, nd, "concatenate")
    if len(ops) == 1:
        return ops[0]
    return sh.concatenate(*ops, dimension=ax)


def _promote_same_dtype(arrays):
    dt, _ = _result_type(*arrays)
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
    ax = _axis(axis, nd, "stack")
    ops = [expand_dims(a, ax) for a in _promote_same_dtype(arrays)]
    return concatenate(ops, axis=ax)
