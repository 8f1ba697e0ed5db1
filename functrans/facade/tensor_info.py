"""The read-only side of `ft.Tensor`: shape/dtype/device properties, Python and NumPy
conversions and a repr like torch's (TensorInfo, the base class of Tensor), and torch.Size."""
from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from ..core import Tracer, check_dtype
from . import dtypes as D
from .grad_mode import STATE as GS
from .placement import device_of

_ndarray = np.ndarray
NUMPY_GRAD_MSG = ("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() "
                  "instead.")
TRACED_NUMPY_MSG = ("a Tensor holding a traced value (inside ft.grad, ft.vmap, ft.jit or another "
                    "transformation) cannot be converted to a NumPy array; use Tensor methods, "
                    "ft functions or functrans.numpy, which trace")
FNP_GRAD_MSG = ("functrans.numpy functions take a Tensor's value and record no autograd history, "
                "and this Tensor requires grad. Use Tensor methods (recorded), tensor.detach(), "
                "or differentiate with ft.grad / ft.func.functional_call.")


class TensorInfo:
    """Tensor's properties and conversions: everything here only reads `_data` (and, for
    the repr and numpy(), the autograd flags)."""
    __slots__ = ()
    _data: Any               # the slots Tensor defines (declared for type checkers)
    _requires_grad: bool
    _grad_fn: Any

    @property
    def shape(self) -> Size:
        return Size(self._data.shape)

    def size(self, dim: int | None = None) -> Size | int:
        if dim is None:
            return Size(self._data.shape)
        return self._data.shape[dim]

    @property
    def dtype(self) -> Any:
        return D.of(self._data.dtype)

    @property
    def device(self):
        return device_of(self._data)

    @property
    def is_cuda(self):
        return self.device.type == "cuda"

    @property
    def is_cpu(self):
        return self.device.type == "cpu"

    # devices and layouts a functrans tensor never has: PyTorch programs test them (dcgan's
    # `if (input.is_cuda or input.is_xpu) and self.ngpu > 1`), so they read False
    is_xpu = is_mps = is_meta = is_xla = is_ipu = is_mtia = is_maia = is_vulkan = False
    is_sparse = is_sparse_csr = is_quantized = is_nested = is_mkldnn = False

    @property
    def ndim(self) -> int:
        return self._data.ndim

    def dim(self) -> int:
        return self._data.ndim

    ndimension = dim

    def numel(self) -> int:
        return int(self._data.size)

    nelement = numel

    def element_size(self):
        return self._data.dtype.itemsize

    def is_floating_point(self) -> bool:
        return self._data.dtype.kind == "f"

    def is_complex(self):
        return self._data.dtype.kind == "c"

    def is_contiguous(self, memory_format=None):
        order = None if memory_format is None else memory_format.order
        if order is None:
            return bool(self._data.flags.c_contiguous)
        return len(order) == self._data.ndim and bool(
            np.transpose(self._data, order).flags.c_contiguous)

    def stride(self, dim=None):
        st = tuple(s // self._data.itemsize for s in self._data.strides)
        return st if dim is None else st[dim]

    def data_ptr(self):
        return self._data.__array_interface__["data"][0] if type(self._data) is _ndarray \
            else self._data.data.ptr

    def untyped_storage(self):
        return _Storage(self)

    def __len__(self):
        if not self._data.ndim:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    def __iter__(self):
        if not self._data.ndim:
            raise TypeError("iteration over a 0-d tensor")
        return iter(self.unbind(0))            # torch: UnbindBackward0

    def __hash__(self):
        return id(self)

    def __bool__(self):
        if self._data.size != 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
        return builtins.bool(self._data.reshape(()))

    def __float__(self):
        return builtins.float(self.item())

    def __int__(self):
        return builtins.int(self.item())

    def __index__(self):
        if self._data.dtype.kind not in "iub" or self._data.size != 1:
            raise TypeError("only integer tensors of a single element can be converted to an "
                            "index")
        return builtins.int(self.item())

    def __complex__(self):
        return builtins.complex(self.item())

    def item(self) -> Any:
        if self._data.size != 1:
            raise RuntimeError(f"a Tensor with {self._data.size} elements cannot be converted "
                               "to Scalar")
        return _host(self._data).item()

    def tolist(self) -> Any:
        return _host(self._data).tolist()

    def numpy(self, force: bool = False) -> np.ndarray:
        # refused while grad mode is on (the array would escape the graph), as torch
        if self._requires_grad and not force and GS.enabled:
            raise RuntimeError(NUMPY_GRAD_MSG)
        if type(self._data) is not _ndarray:
            raise TypeError("can't convert cuda tensor to numpy. Use Tensor.cpu() to copy the "
                            "tensor to host memory first.")
        return self._data

    def __array__(self, dtype=None, copy=None):
        if self._requires_grad and GS.enabled:
            raise RuntimeError(NUMPY_GRAD_MSG)
        if isinstance(self._data, Tracer):
            raise TypeError(TRACED_NUMPY_MSG)
        a = _host(self._data)
        return a if dtype is None else a.astype(dtype)

    def __jax_array__(self):
        """The array or traced value behind the tensor (functrans.numpy's operand protocol)."""
        if self._requires_grad:
            raise RuntimeError(FNP_GRAD_MSG)
        return self._data

    def __repr__(self):
        if isinstance(self._data, Tracer):      # inside a transformation: the traced value
            return f"Tensor({self._data!r})"
        return _format(self)

    __str__ = __repr__

    def __format__(self, spec):
        # torch: a 0-d tensor formats as its number (f"{loss}" prints 0.5, not tensor(0.5))
        if self._data.ndim == 0 and not isinstance(self._data, Tracer):
            return format(self.item(), spec)
        return repr(self)


class Size(tuple):
    """torch.Size: a tuple of ints."""

    def __repr__(self):
        return f"ft.Size([{', '.join(map(str, self))}])"

    def numel(self):
        return builtins.int(np.prod(self, dtype=np.int64))


class _Storage:
    def __init__(self, t):
        self.t = t

    def data_ptr(self):
        d = self.t._data
        while isinstance(d, np.ndarray) and d.base is not None and isinstance(d.base, np.ndarray):
            d = d.base
        return d.__array_interface__["data"][0]


def _host(a):
    return a if type(a) is _ndarray else (a.get() if hasattr(a, "get") else np.asarray(a))


# ---------------------------------------------------------------------------
# repr like torch's

def _format(t):
    a = _host(t._data)
    prefix = "tensor("
    if a.dtype.kind in "fc" and a.size:
        finite = a[np.isfinite(a)] if a.dtype.kind == "f" else a
        integral = finite.size == 0 or builtins.bool(np.all(finite == np.round(finite)))
        big = finite.size and builtins.float(np.max(np.abs(finite))) >= 1e8 if \
            a.dtype.kind == "f" else False
        small = finite.size and a.dtype.kind == "f" and builtins.float(
            np.min(np.abs(finite[finite != 0]))) < 1e-4 if (finite != 0).any() else False
        if integral and not big:
            body = np.array2string(a, separator=", ", prefix=prefix, threshold=1000)
        elif big or small:
            body = np.array2string(a, separator=", ", prefix=prefix, precision=4,
                                   floatmode="fixed", threshold=1000,
                                   formatter={"float_kind": lambda v: f"{v:.4e}"})
        else:
            body = np.array2string(a, separator=", ", prefix=prefix, precision=4,
                                   floatmode="fixed", threshold=1000)
    else:
        body = np.array2string(a, separator=", ", prefix=prefix, threshold=1000)
    extras = []
    dt = a.dtype
    if a.size == 0:
        body = "[]"
        if a.ndim > 1:
            extras.append(f"size={tuple(a.shape)}")
    if dt != D.get_default_dtype() and dt != D.int64 and dt != D.bool:
        extras.append(f"dtype=ft.{dt.name}")
    dev = t.device
    if dev.type != "cpu":
        extras.insert(0, f"device='{dev}'")
    if t._grad_fn is not None:
        extras.append(f"grad_fn=<{t._grad_fn.name()}>")
    elif t._requires_grad:
        extras.append("requires_grad=True")
    return prefix + body + "".join(", " + e for e in extras) + ")"


def public_result_type(*operands):
    """ft.result_type (torch.result_type): result_type as the facade's dtype."""
    return D.of(result_type(*operands))


def result_type(*operands):
    """torch.result_type over tensors and Python scalars: dimensioned tensors first, then
    zero-dim tensors, then scalars, each only lifting the category."""
    res = None
    zres = None
    scat = -1
    for o in operands:
        if isinstance(o, TensorInfo):
            d = o._data.dtype
            if o._data.ndim:
                res = d if res is None else D.promote_types(res, d)
            else:
                zres = d if zres is None else D.promote_types(zres, d)
        else:
            scat = max(scat, D._scalar_cat(o))
    if zres is not None:
        if res is None or D._CAT[zres.kind] > D._CAT[res.kind]:
            res = zres
    if scat >= 0:
        if res is None:
            res = D.default_for(scat)
        elif scat > D._CAT[res.kind]:
            res = D.default_for(scat, res)
    return res


def _unwrap(data):
    if isinstance(data, TensorInfo):
        return data._data if data._data.ndim else data._data.item()
    if isinstance(data, (list, tuple)):
        return [_unwrap(d) for d in data]
    return data


def _has_numpy_scalar(data):
    """data is a NumPy scalar or a (nested) list holding one: torch.tensor keeps its dtype
    (torch.tensor(np.float64(1)) is float64, [np.int32(1)] int32)."""
    if isinstance(data, np.generic):
        return True
    if isinstance(data, (list, tuple)):
        return any(_has_numpy_scalar(v) for v in data)
    return False


def to_array(data, dtype=None):
    """A fresh array for torch.tensor(data): float data -> default float dtype, ints -> int64
    (TensorInfo's one subclass is Tensor)."""
    if isinstance(data, TensorInfo):
        arr = np.array(data._data, copy=True)
    elif isinstance(data, np.ndarray):
        arr = np.array(data, copy=True)
    elif hasattr(data, "__cuda_array_interface__"):
        arr = data.copy()
    else:
        arr = np.array(_unwrap(data))
        if dtype is None and not _has_numpy_scalar(data):   # NumPy scalars keep their dtype
            if arr.dtype.kind == "f":
                arr = arr.astype(D.get_default_dtype())
            elif arr.dtype.kind in "iu":
                arr = arr.astype(np.int64)
            elif arr.dtype.kind == "c":
                arr = arr.astype(D.default_for(3))
            elif arr.dtype.kind not in "b":
                raise TypeError(f"can't convert {type(data).__name__} of {arr.dtype} to a "
                                "tensor: only numbers, lists of numbers and arrays are supported")
    if dtype is not None:
        arr = arr.astype(dtype, copy=False)
    check_dtype(arr.dtype, "a tensor")
    return arr


def wrap_dim(dim, ndim):
    """dim in [0, ndim) from torch's range [-ndim, ndim) (a 0-d tensor has dims -1 and 0),
    or torch's IndexError."""
    n = builtins.max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], "
                         f"but got {dim})")
    return dim % n
