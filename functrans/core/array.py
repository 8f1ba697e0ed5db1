"""`Array`: the type of functrans's eager array values, as jax.Array is JAX's.

A thin wrapper (two slots) around a device array (NumPy on "cpu", CuPy on "cuda"), not an
ndarray subclass (a subclass measured 3-4x per eager op). It carries what a plain array
cannot: the weak type of a value computed from Python scalars (so that eager promotion
equals traced promotion), `.at[...]` updates, `block_until_ready()`, devices, and deletion
after donation to a jitted function. Where the wrapping happens:

- `Primitive.bind` (core/trace.py) takes Arrays (it unwraps them once) and returns a weak
  result as a weak Array; a strong result stays the raw array, so the library's internal
  chains of eager binds keep their fast paths.
- the public functions of functrans.numpy, lax and random unwrap strong Array arguments on
  entry and wrap their array results on exit (`wrap_result`); jit wraps its outputs.

Operators and methods run functrans.numpy's functions, which functrans.numpy installs in
`array_ops` (the core does not import the layers above it). NumPy's own functions see an
Array through `__array__` and return NumPy arrays, as they do on jax.Array.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from .avals import ShapedArray

# Operators and methods of Arrays, supplied by functrans.numpy: name -> function, for the
# operators under their functrans.numpy names, methods as "method:<name>" and properties
# as "prop:<name>" (as core.tracer_ops does for tracers).
array_ops: dict[str, Callable] = {}

# the devices module installs `device_of(raw_array) -> Device` (it imports this module)
DEVICES: dict[str, Callable] = {}

_aval_cache: dict = {}


class _ArrayMeta(type):
    """isinstance(x, Array) is true for Arrays and tracers, as for jax.Array, and also for
    NumPy (and CuPy) arrays and scalars, unlike JAX: the results of grad, vjp and vmap are
    still raw arrays, and they are functrans values too. A masked array is not one."""

    def __instancecheck__(cls, x):
        t = type(x)
        if t is Array or t is np.ndarray:
            return True
        return (isinstance(x, (np.ndarray, np.generic)) or hasattr(t, "_trace")
                or hasattr(x, "__cuda_array_interface__")) and not isinstance(
                    x, np.ma.MaskedArray)

    def __subclasscheck__(cls, sub):
        return type.__subclasscheck__(cls, sub) or hasattr(sub, "_trace") or issubclass(
            sub, (np.ndarray, np.generic))


def _deleted_error(shape, dtype):
    """JAX's error for reading an Array after its buffer was donated or deleted."""
    return RuntimeError(f"Array has been deleted with shape={np.dtype(dtype).name}"
                        f"[{','.join(map(str, shape))}].")


class Array(metaclass=_ArrayMeta):
    """jax.Array: an eager functrans array. `isinstance(x, ft.Array)` is also true for
    tracers and NumPy arrays (_ArrayMeta). Not constructed directly:
    functrans.numpy.asarray(x) makes one.
    """
    __slots__ = ("_value", "weak_type", "_deleted", "__weakref__")
    __array_priority__ = 100       # ndarray <op> Array gives way to the Array's operator

    def __new__(cls, *args, **kwargs):
        raise TypeError("ft.Array is the type of functrans arrays and cannot be "
                        "instantiated; use ft.numpy.asarray(...) to make one")

    # -- the raw value ------------------------------------------------------------------
    @property
    def _v(self):
        v = self._value
        if v is None:
            raise _deleted_error(*self._deleted)
        return v

    @property
    def aval(self) -> ShapedArray:
        v = self._v
        key = (v.shape, v.dtype, self.weak_type)
        a = _aval_cache.get(key)
        if a is None:
            if len(_aval_cache) > 4096:
                _aval_cache.clear()
            a = _aval_cache[key] = ShapedArray(v.shape, v.dtype, self.weak_type)
        return a

    # -- what an ndarray user reads -----------------------------------------------------
    @property
    def shape(self):
        v = self._value
        return v.shape if v is not None else self._deleted[0]

    @property
    def dtype(self):
        v = self._value
        return v.dtype if v is not None else self._deleted[1]

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self):
        return self.size * self.dtype.itemsize

    @property
    def itemsize(self):
        return self.dtype.itemsize

    @property
    def T(self):
        return array_ops["method:transpose"](self)

    @property
    def mT(self):
        return array_ops["prop:mT"](self)

    @property
    def real(self):
        return array_ops["prop:real"](self)

    @property
    def imag(self):
        return array_ops["prop:imag"](self)

    @property
    def at(self):
        """x.at[idx].set(v) / add / multiply / divide / power / min / max / get, as JAX's."""
        return array_ops["prop:at"](self)

    def __getattr__(self, name):
        op = array_ops.get("method:" + name)
        if op is not None:
            return lambda *a, **k: op(self, *a, **k)
        raise AttributeError(f"'Array' object has no attribute {name!r}")

    def view(self, dtype=None):
        """The same bits as another dtype of the same size (jax.Array.view, a bitcast)."""
        v = self._v
        if dtype is None or np.dtype(dtype) == v.dtype:
            return self
        if np.dtype(dtype).itemsize != v.dtype.itemsize:
            raise ValueError(f"view: {v.dtype.name} -> {np.dtype(dtype).name} changes the "
                             "item size; only same-size dtypes can be viewed")
        return wrap_value(v.view(dtype))

    def item(self, *args):
        return self._v.item(*args)

    def tolist(self):
        return self._v.tolist()

    def __len__(self):
        shape = self.shape
        if not shape:
            raise TypeError("len() of unsized object")
        return shape[0]

    def __iter__(self):
        v = self._v
        if v.ndim == 0:
            raise TypeError("iteration over a 0-d array")
        return (wrap_value(row) for row in v)

    def __bool__(self):
        return bool(self._v)

    def __float__(self):
        return float(self._v)

    def __int__(self):
        return int(self._v)

    def __complex__(self):
        return complex(self._v)

    def __index__(self):
        v = self._v
        if v.dtype.kind not in "iub" or v.ndim:
            raise TypeError("only integer scalar arrays can be converted to a scalar index")
        return int(v)

    def __format__(self, spec):
        v = self._v
        return format(v.item() if v.ndim == 0 else v, spec)

    def __contains__(self, item):
        return bool((self._v == np.asarray(item)).any())

    def __setitem__(self, idx, value):
        raise TypeError("functrans arrays are immutable and do not support in-place item "
                        "assignment (as JAX's). Instead of x[idx] = y, use "
                        "x = x.at[idx].set(y) or another .at[] method (.add, .multiply, .get)")

    __hash__ = None        # as jax.Array: __eq__ is elementwise, so Arrays are unhashable

    # -- NumPy interop: NumPy's functions see the raw array and return NumPy results --------
    def __array__(self, dtype=None, copy=None):
        v = self._v
        if type(v) is not np.ndarray:
            v = v.get()           # a CuPy array: a host copy
        if dtype is not None and np.dtype(dtype) != v.dtype:
            return v.astype(dtype)
        return v.copy() if copy else v

    def __array_namespace__(self, *, api_version=None):
        """The array API namespace of an Array: functrans.numpy (as jax.numpy is JAX's)."""
        return array_ops["namespace"]

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """Zero-copy export through DLPack (the underlying NumPy or CuPy array's); a deleted
        Array raises."""
        kw = {} if stream is None else {"stream": stream}
        return self._v.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self._v.__dlpack_device__()

    # -- printing and pickling ----------------------------------------------------------
    def __repr__(self):
        v = np.asarray(self)              # (a deleted Array raises, as JAX's)
        extra = f"dtype={v.dtype.name}" + (", weak_type=True" if self.weak_type else "")
        if v.size == 0 and v.shape != (0,):
            return f"Array([], shape={v.shape}, {extra})"
        body = np.array2string(v, separator=", ", prefix="Array(", suffix=f", {extra})")
        return f"Array({body}, {extra})"

    def __str__(self):
        return str(np.asarray(self))

    def __reduce__(self):
        return _unpickle, (np.asarray(self), self.weak_type)

    def __copy__(self):
        return self           # immutable, as jax.Array

    def __deepcopy__(self, memo):
        return wrap_value(self._v.copy(), self.weak_type)

    # -- JAX's runtime methods ----------------------------------------------------------
    def block_until_ready(self):
        """self, once computed: a NumPy value is ready when returned; a CuPy one waits for
        its device's stream."""
        v = self._v
        if type(v) is not np.ndarray:
            DEVICES["synchronize"](v)
        return self

    def unsafe_buffer_pointer(self) -> int:
        """The address of the array's first byte (jax.Array's)."""
        v = self._v
        return (v.__array_interface__ if type(v) is np.ndarray
                else v.__cuda_array_interface__)["data"][0]

    def copy_to_host_async(self):
        """Starts the copy to the host (a no-op for a NumPy value); returns None."""
        self._v
        return None

    def devices(self):
        """The set of devices holding this array."""
        return {self.device}

    @property
    def device(self):
        return DEVICES["device_of"](self._v)

    def is_deleted(self) -> bool:
        return self._value is None

    def delete(self):
        """Frees the buffer: reading the array afterwards raises RuntimeError, as JAX."""
        v = self._value
        if v is not None:
            self._deleted = (v.shape, v.dtype)
            self._value = None


_new = object.__new__


def new_array(v, weak_type=False):
    """An Array around the raw device array v (the hot path: v is known to be one)."""
    a = _new(Array)
    a._value = v
    a.weak_type = weak_type
    return a


def wrap_value(v, weak_type=False):
    """An Array around the raw device array v (a NumPy scalar becomes rank 0)."""
    if type(v) is not np.ndarray and isinstance(v, np.generic):
        v = np.asarray(v)
    a = _new(Array)
    a._value = v
    a.weak_type = weak_type
    return a


def _unpickle(v, weak_type):
    return wrap_value(v, weak_type)


def value_of(a):
    """The raw array behind Array a; RuntimeError when a was deleted (donated)."""
    v = a._value
    if v is None:
        raise _deleted_error(*a._deleted)
    return v


def unwrap(x):
    """x's raw array when x is an Array, else x."""
    return value_of(x) if type(x) is Array else x


def arrays_in_out(fn):
    """fn as functrans.lax and functrans.random hand it to users: strong Array arguments
    (positional or keyword, at the top level) unwrapped once on entry, array results
    wrapped as Arrays on exit. Other arguments pass as they are (pytrees, Tensors,
    functions: a weak Array inside a pytree reaches bind, which takes it)."""
    def f(*args, **kwargs):
        given = None
        for a in args:
            if type(a) is Array:
                given = {}
                args = [_unwrap_noting(x, given) for x in args]
                break
        if kwargs:
            for k, v in kwargs.items():
                if type(v) is Array:
                    if given is None:
                        given = {}
                    kwargs[k] = _unwrap_noting(v, given)
        return wrap_result(fn(*args, **kwargs), given)
    f.__name__, f.__qualname__, f.__doc__ = fn.__name__, fn.__qualname__, fn.__doc__
    f.__module__, f.__wrapped__ = fn.__module__, fn
    return f


def _unwrap_noting(x, given):
    """x's raw array when x is a strong Array (noted in given: id(raw) -> x), else x."""
    if type(x) is Array and not x.weak_type:
        v = value_of(x)
        given[id(v)] = x
        return v
    return x


def wrap_result(out, given=None):
    """A public function's result with its raw arrays as (strong) Arrays: an array, or
    the arrays of a tuple, list or dict (named tuples keep their type); anything else as
    is. given: id(raw) -> the Array it was unwrapped from, returned for that raw array
    (a function that forwards its argument returns the argument itself, as in JAX)."""
    t = type(out)
    if t is np.ndarray:
        if given:
            a = given.get(id(out))
            if a is not None:
                return a
        return wrap_value(out)
    if t is tuple or t is list:
        return t([wrap_result(o, given) for o in out])
    if t is dict:
        return {k: wrap_result(v, given) for k, v in out.items()}
    if isinstance(out, tuple) and hasattr(out, "_fields"):
        return t(*[wrap_result(o, given) for o in out])
    if isinstance(out, np.generic):
        return wrap_value(np.asarray(out))
    if t.__module__.startswith("cupy") and hasattr(out, "__cuda_array_interface__"):
        return wrap_value(out)
    return out


_BINARY_OPS = [("add", "add"), ("sub", "subtract"), ("mul", "multiply"),
               ("truediv", "true_divide"), ("floordiv", "floor_divide"), ("mod", "remainder"),
               ("pow", "power"), ("matmul", "matmul"), ("and", "bitwise_and"),
               ("or", "bitwise_or"), ("xor", "bitwise_xor")]
_UNARY_OPS = [("neg", "negative"), ("pos", "positive"), ("abs", "abs"), ("invert", "invert"),
              ("lt", "less"), ("le", "less_equal"), ("gt", "greater"),
              ("ge", "greater_equal"), ("eq", "equal"), ("ne", "not_equal"),
              ("getitem", "getitem")]


def install_operators(cls, table):
    """Python's operators on cls (Array, and the tracers in trace.py), each calling the
    function that functrans.numpy puts in `table` under the NumPy name; an element-wise
    __eq__ makes cls unhashable."""
    def define(name, key, reflected=False):
        if reflected:
            def op(self, other):
                return table[key](other, self)
        else:
            def op(self, *args):
                return table[key](self, *args)
        op.__name__ = name
        setattr(cls, name, op)
    for name, key in _BINARY_OPS:
        define(f"__{name}__", key)
        define(f"__r{name}__", key, reflected=True)
    for name, key in _UNARY_OPS:
        define(f"__{name}__", key)
    cls.__hash__ = None


install_operators(Array, array_ops)
