"""functrans.numpy's array creation: zeros, ones, full, arange, eye, ... (NumPy arrays; full of a
traced value broadcasts it)."""
from __future__ import annotations

import builtins
import operator

import numpy as _np

from .. import core
from ..core import Tracer, is_python_scalar, to_concrete
from ..core.devices import cupy_module
from functrans.primitives import elementwise as ew
from functrans.primitives import shape as sh
from ._promotion import _DEFAULT, _as_operand, _shape, _to_dtype, astype, _result_type, dtype_arg
from ._shapes import broadcast_to


# ---------------------------------------------------------------------------
# creation

_DL_CPU, _DL_CUDA, _DL_CUDA_MANAGED = 1, 2, 13     # DLPack's device types


class _Producer:
    """Only the DLPack protocol of a producer: NumPy's from_dlpack dispatches on
    `__array_function__`, which a Tensor (or another library's array) would answer itself."""
    __slots__ = ("x",)

    def __init__(self, x):
        self.x = x

    def __dlpack__(self, **kwargs):
        return self.x.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.x.__dlpack_device__()


def from_dlpack(x, *, copy=None):
    """An array sharing memory with `x`, any object with the DLPack protocol (`__dlpack__`
    and `__dlpack_device__`: NumPy, CuPy, PyTorch, JAX arrays, ft.Tensor): a NumPy array for
    CPU memory, a CuPy array for CUDA memory. copy=True copies, copy=False refuses to."""
    if not (hasattr(x, "__dlpack__") and hasattr(x, "__dlpack_device__")):
        raise TypeError(f"from_dlpack: {type(x).__name__} does not implement the DLPack "
                        "protocol (__dlpack__ and __dlpack_device__); pass the producer's "
                        "array itself (a bare DLPack capsule is not accepted)")
    kind, _ = x.__dlpack_device__()
    x = _Producer(x)
    if kind == _DL_CPU:
        return _np.from_dlpack(x) if copy is None else _np.from_dlpack(x, copy=copy)
    if kind in (_DL_CUDA, _DL_CUDA_MANAGED):
        out = cupy_module().from_dlpack(x)
        return out.copy() if copy else out
    raise BufferError(f"from_dlpack: {type(x).__name__} lives on DLPack device type {int(kind)}; "
                      "functrans reads CPU memory (NumPy) and CUDA memory (CuPy): copy it to "
                      "one of those first")


from_dlpack.takes_array_likes = True    # reads the protocol itself, Tensors included

def _shape_arg(shape):
    """shape (an int or a sequence of them) as a tuple of Python ints: a traced dimension
    raises TracerIntegerConversionError (the shape must be known while tracing)."""
    if isinstance(shape, Tracer) or not hasattr(shape, "__iter__"):
        return (operator.index(shape),)
    return tuple(operator.index(d) for d in shape)


def zeros(shape, dtype=None):
    return _np.zeros(_shape_arg(shape), dtype_arg(dtype) or _DEFAULT["f"])


def ones(shape, dtype=None):
    return _np.ones(_shape_arg(shape), dtype_arg(dtype) or _DEFAULT["f"])


def empty(shape, dtype=None):
    return zeros(shape, dtype)


def full(shape, fill_value, dtype=None):
    shape = _shape_arg(shape)
    dtype = dtype_arg(dtype)
    if isinstance(fill_value, Tracer):
        v = astype(fill_value, dtype) if dtype else fill_value
        return broadcast_to(v, shape)
    if dtype is None:
        dtype = _result_type(fill_value)[0]
    return _np.full(shape, fill_value, dtype)


def _like(x, dtype, shape):
    dtype = dtype_arg(dtype)
    s = _shape(x) if shape is None else shape
    return s, (dtype or _np.dtype(x.dtype) if not is_python_scalar(x) else _result_type(x)[0])


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
    """NumPy's arange. Its length needs concrete bounds; start and step may be traced values
    with known contents (under grad), and then the result is differentiable in them."""
    for v in (start, stop, step):
        if isinstance(v, Tracer) and to_concrete(v) is None:
            raise core.ConcretizationTypeError(
                f"arange needs concrete bounds, got the traced value {v.aval.str_short()}; "
                "the length of the result must be known while tracing")
    dtype = dtype_arg(dtype)
    if dtype is None:
        dtype = _result_type(*[v for v in (start, stop, step) if v is not None])[0]
    cs, ce, cp = (to_concrete(v) if isinstance(v, Tracer) else v for v in (start, stop, step))
    out = _np.arange(cs, dtype=dtype) if ce is None else \
        _np.arange(cs, ce, cp if cp is not None else 1, dtype=dtype)
    if _np.dtype(dtype).kind not in "fc" or not (isinstance(start, Tracer) or
                                                  isinstance(step, Tracer)):
        return out
    if ce is None:                      # arange(n): 0, 1, ..., n - 1
        return out
    # start + i * step on the traced values: its derivative in start is 1, in step i
    first = _to_dtype(start, _np.dtype(dtype))
    i = sh.iota(dtype=_np.dtype(dtype), shape=out.shape, dimension=0)
    return ew.add(first, ew.mul(i, _to_dtype(1 if step is None else step, _np.dtype(dtype))))


def _float_dtype(dtype, *endpoints):
    """The dtype linspace and friends compute in: the endpoints' (float32 from Python numbers,
    float64 from float64 arrays) lifted to a float, or a float of dtype's size."""
    dt = _result_type(*endpoints, 1.0)[0]
    if dtype is not None and _np.dtype(dtype).kind in "fc":
        return _np.dtype(dtype)
    return dt


def _endpoints(dtype, start, stop):
    """(dt, a, b): the dtype linspace and friends compute in (the endpoints' dtype lifted to a
    float: float32 from Python numbers, float64 from float64 arrays; or dtype when it is a
    float) and the endpoints in it, broadcast against each other."""
    dt = _result_type(start, stop, 1.0)[0]
    if dtype is not None and _np.dtype(dtype).kind in "fc":
        dt = _np.dtype(dtype)
    a, b = _to_dtype(_as_operand(start), dt), _to_dtype(_as_operand(stop), dt)
    s = tuple(_np.broadcast_shapes(_shape(a), _shape(b)))
    return dt, _lead(a, s), _lead(b, s)


def _lead(v, shape):
    """v broadcast to `shape`, its dimensions the trailing ones."""
    if _shape(v) == shape:
        return v
    return sh.broadcast_in_dim(v, shape=shape, broadcast_dimensions=tuple(
        range(len(shape) - len(_shape(v)), len(shape))))


def _at(i, k, dt, value, y):
    """y with sample k (along axis 0) replaced by value."""
    return ew.select(ew.eq(i, _np.asarray(k, dt)), _lead(value, _shape(y)), y)


def _finish(y, axis, dtype, dt):
    """Move the sample axis to `axis` and convert to dtype (integers floored, as NumPy)."""
    if axis % builtins.max(len(_shape(y)), 1) != 0:
        nd = len(_shape(y))
        rest = list(range(1, nd))
        k = axis % nd
        y = sh.transpose(y, permutation=tuple(rest[:k] + [0] + rest[k:]))
    if dtype is not None and _np.dtype(dtype) != dt:
        if _np.dtype(dtype).kind in "iu":
            y = ew.floor(y)
        y = ew.convert_element_type(y, new_dtype=_np.dtype(dtype), weak_type=False)
    return y


def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0):
    """NumPy's linspace, differentiable in start and stop (start + i * (stop - start) / div,
    the last sample exactly stop), with one dtype rule eagerly and traced."""
    num = operator.index(num)
    if num < 0:
        raise ValueError(f"Number of samples, {num}, must be non-negative.")
    dt, a, b = _endpoints(dtype, start, stop)
    div = num - 1 if endpoint else num
    step = ew.div(ew.sub(b, a), _np.asarray(div if div else _np.nan, dt))
    shape = (num,) + _shape(a)
    i = sh.iota(dtype=dt, shape=shape, dimension=0)
    y = ew.add(_lead(a, shape), ew.mul(i, _lead(step, shape))) if div else _lead(a, shape)
    if endpoint and num > 1:
        y = _at(i, num - 1, dt, b, y)
    y = _finish(y, axis, dtype, dt)
    return (y, step) if retstep else y


def logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0):
    """base ** linspace(start, stop): differentiable in start, stop and base."""
    y = linspace(start, stop, num, endpoint=endpoint)
    dt = _np.dtype(y.dtype)
    y = ew.pow(_lead(_to_dtype(_as_operand(base), dt), _shape(y)), y)
    return _finish(y, axis, dtype, dt)


def geomspace(start, stop, num=50, endpoint=True, dtype=None, axis=0):
    """NumPy's geomspace for real endpoints of one sign: sign * exp(linspace(log|start|,
    log|stop|)), the first and last samples exactly start and stop; differentiable in both."""
    dt, a, b = _endpoints(dtype, start, stop)
    ca, cb = to_concrete(a), to_concrete(b)
    if ca is not None and cb is not None:
        ca, cb = _np.asarray(ca), _np.asarray(cb)
        if (ca == 0).any() or (cb == 0).any():
            raise ValueError("Geometric sequence cannot include zero")
        if ((ca < 0) != (cb < 0)).any():
            raise NotImplementedError(
                "geomspace: endpoints of opposite signs make a complex sequence, which is not "
                "supported; pass endpoints of one sign")
    y = linspace(ew.log(ew.abs(a)), ew.log(ew.abs(b)), num, endpoint=endpoint)
    y = ew.mul(_lead(ew.sign(a), _shape(y)), ew.exp(y))
    if num:
        i = sh.iota(dtype=dt, shape=_shape(y), dimension=0)
        y = _at(i, 0, dt, a, y)
        if endpoint and num > 1:
            y = _at(i, num - 1, dt, b, y)
    return _finish(y, axis, dtype, dt)


def eye(N, M=None, k=0, dtype=None):
    return _np.eye(N, M, k, dtype=dtype_arg(dtype) or _DEFAULT["f"])


def identity(n, dtype=None):
    return eye(n, dtype=dtype)


def tri(N, M=None, k=0, dtype=None):
    """Ones at and below the k-th diagonal; float32 by default (also under
    jax_enable_x64, as jax.numpy.tri)."""
    return _np.tri(N, M, k, dtype=dtype or _np.float32)


def copy(a):
    x = _as_operand(a)
    return _np.array(x, copy=True) if isinstance(x, _np.ndarray) else x


# ---------------------------------------------------------------------------
# coordinate grids and index sets

def meshgrid(*xi, copy=True, sparse=False, indexing="xy"):
    """Coordinate arrays from 1-D coordinate vectors: 'xy' (Cartesian: the first two axes
    swapped) or 'ij' (matrix) indexing; sparse=True keeps them broadcastable instead of full."""
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid: valid values for indexing are 'xy' and 'ij', got "
                         f"{indexing!r}")
    args = [_as_operand(x) for x in xi]
    for i, x in enumerate(args):
        if len(_shape(x)) != 1:
            raise ValueError(f"meshgrid: arguments must be 1-D, got argument {i} of shape "
                             f"{_shape(x)}")
    sizes = [_shape(x)[0] for x in args]
    if indexing == "xy" and len(args) >= 2:
        sizes[0], sizes[1] = sizes[1], sizes[0]
    out = []
    for i, x in enumerate(args):
        axis = (1 - i if i < 2 else i) if indexing == "xy" and len(args) >= 2 else i
        shape = tuple(sizes[axis] if d == axis else 1 for d in range(len(args)))
        x = sh.reshape(x, new_sizes=shape) if isinstance(x, Tracer) else x.reshape(shape)
        out.append(x if sparse else broadcast_to(x, tuple(sizes)))
    return out


def _index_array(v):
    """An index set as the default integer dtype (int32, int64 under jax_enable_x64)."""
    return _np.asarray(v, _DEFAULT["i"])


def tril_indices(n, k=0, m=None):
    """The (row, column) indices of the lower triangle of an n x m matrix (below the k-th
    diagonal, inclusive)."""
    return tuple(_index_array(i) for i in _np.tril_indices(operator.index(n), operator.index(k),
                                                           None if m is None else
                                                           operator.index(m)))


def triu_indices(n, k=0, m=None):
    """The (row, column) indices of the upper triangle of an n x m matrix (from the k-th
    diagonal up)."""
    return tuple(_index_array(i) for i in _np.triu_indices(operator.index(n), operator.index(k),
                                                           None if m is None else
                                                           operator.index(m)))


def _matrix_shape(arr, name):
    shape = tuple(arr.shape) if hasattr(arr, "shape") else _shape(_as_operand(arr))
    if len(shape) != 2:
        raise ValueError(f"{name}: input array must be 2-D, got shape {shape}")
    return shape


def tril_indices_from(arr, k=0):
    n, m = _matrix_shape(arr, "tril_indices_from")
    return tril_indices(n, k, m)


def triu_indices_from(arr, k=0):
    n, m = _matrix_shape(arr, "triu_indices_from")
    return triu_indices(n, k, m)


def diag_indices(n, ndim=2):
    """The indices of the main diagonal of an ndim-dimensional array of side n."""
    n, ndim = operator.index(n), operator.index(ndim)
    if n < 0:
        raise ValueError(f"diag_indices: n argument must be non-negative, got {n}")
    if ndim < 0:
        raise ValueError(f"diag_indices: ndim argument must be non-negative, got {ndim}")
    return (_index_array(_np.arange(n)),) * ndim


def diag_indices_from(arr):
    """diag_indices of a square array (all sides equal, at least 2-D)."""
    shape = tuple(arr.shape) if hasattr(arr, "shape") else _shape(_as_operand(arr))
    if len(shape) < 2:
        raise ValueError(f"diag_indices_from: input array must be at least 2-d, got shape "
                         f"{shape}")
    if len(set(shape)) != 1:
        raise ValueError(f"diag_indices_from: all dimensions of input must be of equal "
                         f"length, got shape {shape}")
    return diag_indices(shape[0], len(shape))
