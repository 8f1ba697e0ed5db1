"""functrans.numpy's array creation: zeros, ones, full, arange, eye, ... (NumPy arrays; full of a
traced value broadcasts it)."""
from __future__ import annotations

import numpy as _np

from .. import core
from ..core import Tracer, is_python_scalar, to_concrete
from ..core.devices import cupy_module
from ._promotion import _as_operand, _shape, astype, float32, result_type
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
