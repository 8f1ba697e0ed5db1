"""DLPack, zero-copy exchange with PyTorch, JAX, CuPy and NumPy: `Tensor.__dlpack__` /
`__dlpack_device__` (installed on the class here) and `ft.from_dlpack`, as torch's.

A Tensor that requires grad refuses to export, with torch's error: the consumer would
see the values without the autograd history (export `t.detach()`).
"""
from __future__ import annotations

from typing import Any

from ..numpy import raw as fnp
from ..core import Tracer, check_dtype
from .tensor import Tensor, wrap


def __dlpack__(self, *, stream: Any = None, max_version: tuple[int, int] | None = None,
               dl_device: Any = None, copy: bool | None = None) -> Any:
    """A DLPack capsule of the tensor's memory (the array API's protocol, as torch's)."""
    if self._requires_grad:
        raise BufferError("Can't export tensors that require gradient, use tensor.detach()")
    if isinstance(self._data, Tracer):
        raise BufferError("a Tensor holding a traced value (inside ft.grad, ft.vmap, ft.jit "
                          "or ft.compile) has no memory to export through DLPack; export it "
                          "outside the transformation")
    kwargs = {k: v for k, v in (("stream", stream), ("max_version", max_version),
                                ("dl_device", dl_device), ("copy", copy)) if v is not None}
    return self._data.__dlpack__(**kwargs)


def __dlpack_device__(self) -> tuple[int, int]:
    """(DLPack device type, device id): (1, 0) on the CPU, (2, n) on CUDA device n."""
    if isinstance(self._data, Tracer):
        raise BufferError("a Tensor holding a traced value has no DLPack device")
    return self._data.__dlpack_device__()


Tensor.__dlpack__ = __dlpack__
Tensor.__dlpack_device__ = __dlpack_device__


def from_dlpack(ext_tensor: Any) -> Tensor:
    """A Tensor sharing memory with `ext_tensor`, any object with the DLPack protocol
    (a NumPy, CuPy, PyTorch or JAX array, another Tensor): writes through either are seen
    by both (torch.from_dlpack)."""
    data = fnp.from_dlpack(ext_tensor)
    check_dtype(data.dtype, "from_dlpack")
    return wrap(data)
