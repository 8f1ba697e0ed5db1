"""torch.complex and torch.polar: complex tensors made from two real ones."""
from __future__ import annotations

import numpy as np

from .. import numpy as fnp
from . import dtypes as D
from .tensor import Tensor, apply_fn

_COMPLEX_OF = {"float32": np.complex64, "float64": np.complex128}


def _complex_fn(re, im):
    c = _COMPLEX_OF[np.dtype(re.dtype).name]
    return fnp.add(fnp.astype(re, c), fnp.multiply(fnp.astype(im, c), c(1j)))


def _polar_fn(r, theta):
    return _complex_fn(fnp.multiply(r, fnp.cos(theta)), fnp.multiply(r, fnp.sin(theta)))


def _complex_args(name, a, b, an, bn):
    for t in (a, b):
        if not isinstance(t, Tensor):
            raise TypeError(f"{name}(): argument '{an if t is a else bn}' must be Tensor, not "
                            f"{type(t).__name__}")
    if a._data.dtype != b._data.dtype or a._data.dtype.name not in _COMPLEX_OF:
        raise RuntimeError(f"Expected both inputs to be Half, Float or Double tensors but got "
                           f"{D.scalar_name(a.dtype)} and {D.scalar_name(b.dtype)}")


def complex(real, imag, *, out=None):  # noqa: A001  (torch.complex)
    """torch.complex: real + i imag of two float tensors of one dtype (float32 gives
    complex64, float64 complex128), broadcast."""
    _complex_args("complex", real, imag, "real", "imag")
    return apply_fn("ComplexBackward0", _complex_fn, (real, imag))


def polar(abs, angle, *, out=None):  # noqa: A002  (torch.polar)
    """torch.polar: abs * (cos(angle) + i sin(angle))."""
    _complex_args("polar", abs, angle, "abs", "angle")
    return apply_fn("PolarBackward0", _polar_fn, (abs, angle))
