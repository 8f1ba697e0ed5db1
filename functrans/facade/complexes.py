"""torch.complex and torch.polar: complex tensors made from two real ones."""
from __future__ import annotations

import numpy as np

from .. import numpy as fnp
from . import dtypes as D
from .tensor import Tensor, apply_fn
from .tensor import _mark_views as mark_views

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


_REAL_OF = {"complex64": np.float32, "complex128": np.float64}


def _view_as_real_fn(x):
    return fnp.stack([fnp.real(x), fnp.imag(x)], axis=-1)


def _view_as_complex_fn(x):
    return _complex_fn(x[..., 0], x[..., 1])


def view_as_real(input):  # noqa: A002
    """torch.view_as_real: a complex tensor as a real one with a last dimension of 2 (real,
    imaginary), sharing its storage."""
    d = input._data
    if d.dtype.kind != "c":
        raise RuntimeError("view_as_real is only supported for complex tensors")
    out = apply_fn("ViewAsRealBackward0", _view_as_real_fn, (input,))
    return _shared(input, out, lambda a: a.view(_REAL_OF[a.dtype.name]).reshape(
        a.shape + (2,)) if a.ndim else a.reshape(1).view(_REAL_OF[a.dtype.name]))


def view_as_complex(input):  # noqa: A002
    """torch.view_as_complex: a float tensor whose last dimension is 2 (real, imaginary) as a
    complex one, sharing its storage."""
    d = input._data
    if d.dtype.name not in _COMPLEX_OF:
        raise RuntimeError("view_as_complex is only supported for float and double tensors, "
                           f"but got a tensor of scalar type: {D.scalar_name(d.dtype)}")
    if d.ndim == 0 or d.shape[-1] != 2:
        raise RuntimeError("Tensor must have a last dimension of size 2")
    if d.strides[-1] != d.itemsize:
        raise RuntimeError("Tensor must have a last dimension with stride 1")
    out = apply_fn("ViewAsComplexBackward0", _view_as_complex_fn, (input,))
    return _shared(input, out, lambda a: a.view(_COMPLEX_OF[a.dtype.name])[..., 0])


def _shared(x, out, view):
    """out (computed, with its history) takes the storage of x seen through `view`, and is
    a view of x, as torch's: writes to one show in the other."""
    d = x._data
    if type(d) is np.ndarray:
        try:
            v = view(d)
        except ValueError:          # strides NumPy cannot reinterpret: keep the copy
            return out
        out._data = v
        mark_views((x,), [out])
        if out._base is not None:
            # its history cannot be rewritten through a change of dtype: an in-place op on
            # it while recording, or a use after its base changed in place, is refused
            out.__dict__["_dtype_view"] = out._grad_fn.name() if out._grad_fn else "view"
    return out
