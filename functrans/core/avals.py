"""Errors, dtypes and abstract values: what the rest of the core is typed with."""
from __future__ import annotations

import math

import numpy as np

# ---------------------------------------------------------------------------
# errors


class FunctransError(Exception):
    """Base class of every error functrans raises on purpose."""


class ShapeError(FunctransError, ValueError, TypeError):
    """Operands of a primitive have incompatible shapes. A ValueError, as NumPy's shape
    errors, and a TypeError, as JAX's (`jnp.add` of shapes (3,) and (2,), a reshape to the
    wrong size, a dot of misaligned operands raise TypeError there), so that code catching
    either library's type catches it."""


class AxisError(ShapeError, IndexError):
    """An axis out of bounds for an array's rank. Also an IndexError, as NumPy's
    `AxisError` (JAX raises ValueError or IndexError, depending on the function)."""


class DTypeError(FunctransError, TypeError):
    """Operands of a primitive have unsupported or mismatched dtypes."""


class ConcretizationTypeError(FunctransError, TypeError):
    """A traced (abstract) value was used where Python needs a concrete one."""


class TracerBoolConversionError(ConcretizationTypeError):
    """bool() of a traced value (a Python `if` or `while` on it), as JAX's class of the
    same name."""


class TracerIntegerConversionError(ConcretizationTypeError):
    """__index__ of a traced value (its use as a Python index, a shape, a range), as JAX's
    class of the same name (int() raises the plain ConcretizationTypeError there)."""


class TracerArrayConversionError(FunctransError, TypeError):
    """A traced value was converted to a NumPy array (np.asarray, a raw NumPy function):
    the result would be a constant, its derivative silently lost."""


class UnexpectedTracerError(FunctransError):
    """A tracer escaped the transformation that created it."""


class TypeCheckError(FunctransError):
    """A jaxpr is not well typed (a bug in a transformation or a rule)."""


class RuleNotImplementedError(FunctransError, NotImplementedError):
    """A primitive lacks the rule a transformation needs."""


# ---------------------------------------------------------------------------
# dtypes and abstract values

_SHORT = {
    "float16": "f16", "float32": "f32", "float64": "f64", "bfloat16": "bf16",
    "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64",
    "bool": "bool", "complex64": "c64", "complex128": "c128",
}
SUPPORTED_DTYPES = frozenset(np.dtype(n) for n in _SHORT if n != "bfloat16")


def short_dtype(dtype) -> str:
    return _SHORT.get(np.dtype(dtype).name, np.dtype(dtype).name)


def check_dtype(dtype, what="value"):
    dtype = np.dtype(dtype)
    if dtype not in SUPPORTED_DTYPES:
        raise DTypeError(
            f"functrans does not support dtype {dtype} (for {what}); supported dtypes are "
            "bool, (u)int8/16/32/64, float16/32/64 and complex64/128.")
    return dtype


class ShapedArray:
    """Abstract value: what a tracer knows about an array (shape, dtype, weak type)."""
    __slots__ = ("shape", "dtype", "weak_type", "_hash")

    def __init__(self, shape, dtype, weak_type=False):
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.weak_type = bool(weak_type)
        self._hash = None

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return math.prod(self.shape)

    def update(self, shape=None, dtype=None, weak_type=None):
        return ShapedArray(self.shape if shape is None else shape,
                           self.dtype if dtype is None else dtype,
                           self.weak_type if weak_type is None else weak_type)

    def strip_weak(self):
        return ShapedArray(self.shape, self.dtype) if self.weak_type else self

    def str_short(self):
        return f"{short_dtype(self.dtype)}[{','.join(map(str, self.shape))}]"

    def __eq__(self, other):
        return (type(other) is ShapedArray and self.shape == other.shape
                and self.dtype == other.dtype and self.weak_type == other.weak_type)

    def __hash__(self):
        h = self._hash
        if h is None:
            h = self._hash = hash((self.shape, self.dtype, self.weak_type))
        return h

    def __repr__(self):
        return f"ShapedArray({self.str_short()}{', weak_type=True' if self.weak_type else ''})"


def is_python_scalar(x):
    return type(x) in (bool, int, float, complex)

