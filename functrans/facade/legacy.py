"""torch's legacy tensor types (`torch.FloatTensor`, `LongTensor`, ...): constructors that
older programs call (`torch.LongTensor(3, 4)` uninitialized, `torch.LongTensor([1, 2])`
from data) and the types that `isinstance(t, torch.FloatTensor)` and
`t.type(torch.LongTensor)` test against. A Tensor "is" a legacy type when its dtype is the
type's; none of these is a subclass of Tensor (as in torch)."""
from __future__ import annotations

import builtins

import numpy as np

from . import dtypes as D
from .creation import empty, tensor
from .tensor import Size, Tensor


class _LegacyType(type):
    """The metaclass: calling the type makes a Tensor, isinstance compares dtypes."""

    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor) and obj.dtype == cls.dtype and obj.device.type == "cpu"

    def __call__(cls, *args, device=None):
        name = cls.__name__
        if not args:
            return empty(0, dtype=cls.dtype, device=device)
        if all(isinstance(a, (builtins.int, np.integer)) and not isinstance(a, builtins.bool)
               for a in args):
            return empty(*args, dtype=cls.dtype, device=device)       # a size
        if len(args) == 1:
            data = args[0]
            if isinstance(data, Size):
                return empty(*data, dtype=cls.dtype, device=device)
            if isinstance(data, Tensor):
                if data.dtype != cls.dtype:
                    raise TypeError(f"expected TensorOptions(dtype={D.meta_name(cls.dtype)}, "
                                    f"device=cpu) (got TensorOptions(dtype="
                                    f"{D.meta_name(data.dtype)}, device=cpu)): torch.{name}"
                                    f"(tensor) only wraps a tensor of its own dtype; use "
                                    f"tensor.to(torch.{cls.dtype.name})")
                return data.view_as(data)         # an alias, as torch's
            if isinstance(data, (list, tuple, np.ndarray)):
                return tensor(data, dtype=cls.dtype, device=device)
            if isinstance(data, (builtins.float, builtins.int, builtins.bool)):
                raise TypeError(f"new(): data must be a sequence (got {type(data).__name__})")
        raise TypeError(f"new(): invalid data type '{type(args[0]).__name__}'")

    def __repr__(cls):
        return f"<class 'torch.{cls.__name__}'>"


def _legacy(name, dtype):
    return _LegacyType(name, (), {"dtype": dtype, "is_cuda": False, "__module__": "torch",
                                  "__doc__": f"torch.{name}: the legacy type of CPU {dtype} "
                                             f"tensors (a constructor and an isinstance "
                                             f"target)."})


FloatTensor = _legacy("FloatTensor", D.float32)
DoubleTensor = _legacy("DoubleTensor", D.float64)
HalfTensor = _legacy("HalfTensor", D.float16)
LongTensor = _legacy("LongTensor", D.int64)
IntTensor = _legacy("IntTensor", D.int32)
ShortTensor = _legacy("ShortTensor", D.int16)
CharTensor = _legacy("CharTensor", D.int8)
ByteTensor = _legacy("ByteTensor", D.uint8)
BoolTensor = _legacy("BoolTensor", D.bool)

NAMES = ["FloatTensor", "DoubleTensor", "HalfTensor", "LongTensor", "IntTensor",
         "ShortTensor", "CharTensor", "ByteTensor", "BoolTensor"]

_BY_DTYPE = {np.dtype(globals()[n].dtype): globals()[n] for n in NAMES}


def new(self, *args, device=None):
    """Tensor.new (legacy): a tensor of self's dtype from data or of a size, as the legacy
    type of that dtype makes it (`x.new([1, 2])`, `x.new(2, 3)`)."""
    cls = _BY_DTYPE.get(np.dtype(self.dtype))
    if cls is None:
        raise TypeError(f"Tensor.new: no legacy type for dtype {self.dtype}; use "
                        "ft.tensor(data, dtype=...) or ft.empty(size, dtype=...)")
    return cls(*args, device=device)


Tensor.new = new
