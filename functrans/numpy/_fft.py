"""functrans.numpy.fft: NumPy's FFT functions (n/s, axis/axes, norm), differentiable, all
built on the one `fft` primitive, which transforms trailing axes: others are moved there."""
from __future__ import annotations

import functools
import math

import numpy as _np

from functrans.primitives import elementwise as ew
from functrans.primitives import fft as pf
from functrans.primitives import shape as sh
from functrans.primitives.base import complex_dtype
from ._promotion import _DEFAULT, _promote_float, _shape, array, astype
from ._shapes import moveaxis, roll

_NORMS = (None, "backward", "ortho", "forward")


def _norm_factor(norm, n, inverse, name):
    """The factor turning the primitive's result (1/n on the inverse) into norm's."""
    if norm not in _NORMS:
        raise ValueError(f"{name}: invalid norm {norm!r}; use 'backward', 'ortho' or 'forward'")
    if norm in (None, "backward"):
        return 1.0
    if norm == "ortho":
        return math.sqrt(n) if inverse else 1 / math.sqrt(n)
    return float(n) if inverse else 1 / n


def _resize(x, axis, size):
    """x cut or zero-padded to size along axis (NumPy's n and s)."""
    shape = _shape(x)
    have = shape[axis]
    if have > size:
        return sh.slice(x, start_indices=(0,) * len(shape),
                        limit_indices=shape[:axis] + (size,) + shape[axis + 1:], strides=None)
    if have < size:
        config = tuple((0, size - have if i == axis else 0, 0) for i in range(len(shape)))
        return sh.pad(x, _np.zeros((), x.dtype), padding_config=config)
    return x


def _axes_and_lengths(x, s, axes, name, inverse_real):
    """NumPy's axes (possibly repeated) and lengths s, with s's defaults."""
    nd = len(_shape(x))
    if axes is None:
        axes = tuple(range(nd)) if s is None else tuple(range(nd - len(s), nd))
    if not axes or any(not -nd <= a < nd for a in axes):
        raise ValueError(f"{name}: axes {axes} must be axes of an array of rank {nd}")
    if s is None:
        s = [_shape(x)[a] for a in axes]
        if inverse_real:
            s[-1] = 2 * (s[-1] - 1)
    s = tuple(int(n) for n in s)
    if len(s) != len(axes):
        raise ValueError(f"{name}: s {s} and axes {axes} must have the same length")
    if any(n < 1 for n in s):
        raise ValueError(f"{name}: invalid number of FFT data points {s}")
    return tuple(a % nd for a in axes), s


def _promote_complex(a, name):
    """a as a complex operand (a real one converted)."""
    x = _promote_float(a, name=name)[0]
    return x if x.dtype.kind == "c" else astype(x, complex_dtype(x.dtype))


def _fftn(a, s, axes, norm, fft_type, name):
    if fft_type == "RFFT":
        x = _promote_float(a, name=name)[0]
        if x.dtype.kind == "c":
            raise TypeError(f"{name}: takes real input, got {x.dtype}; use fft for complex input")
    else:
        x = _promote_complex(a, name)
    axes, s = _axes_and_lengths(x, s, axes, name, fft_type == "IRFFT")
    if len(set(axes)) != len(axes):
        return _repeated(x, s, axes, norm, fft_type, name)
    k = len(axes)
    nd = len(_shape(x))
    last = tuple(range(nd - k, nd))
    x = moveaxis(x, axes, last)
    for ax, n in zip(last, s):
        x = _resize(x, ax, n // 2 + 1 if fft_type == "IRFFT" and ax == nd - 1 else n)
    out = pf.fft(x, fft_type=fft_type, fft_lengths=s)
    factor = _norm_factor(norm, math.prod(s), fft_type in ("IFFT", "IRFFT"), name)
    if factor != 1.0:
        out = ew.mul(out, _np.asarray(factor, out.dtype))
    return moveaxis(out, last, axes)


def _repeated(x, s, axes, norm, fft_type, name):
    """NumPy's meaning of a repeated axis: one 1-D transform per entry of axes, in NumPy's
    order (the real transform first for rfftn, last for irfftn)."""
    def one(y, i, kind):
        return _fftn(y, (s[i],), (axes[i],), norm, kind, name)
    k = len(axes)
    if fft_type == "RFFT":
        x = one(x, k - 1, "RFFT")
        return functools.reduce(lambda y, i: one(y, i, "FFT"), range(k - 2, -1, -1), x)
    if fft_type == "IRFFT":
        x = functools.reduce(lambda y, i: one(y, i, "IFFT"), range(k - 1), x)
        return one(x, k - 1, "IRFFT")
    return functools.reduce(lambda y, i: one(y, i, fft_type), range(k - 1, -1, -1), x)


_SWAP = {None: "forward", "backward": "forward", "forward": "backward", "ortho": "ortho"}


_KINDS = {"": "FFT", "i": "IFFT", "r": "RFFT", "ir": "IRFFT"}


def _along_axis(prefix):
    """numpy.fft.{prefix}fft: one axis, n points."""
    name = prefix + "fft"

    def f(a, n=None, axis=-1, norm=None):
        return _fftn(a, None if n is None else (n,), (axis,), norm, _KINDS[prefix], name)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"numpy.fft.{name} along one axis (n points), differentiable."
    return staticmethod(f)


def _along_axes(prefix, suffix):
    """numpy.fft.{prefix}fft{suffix}: several axes, s points (the last two for fft2)."""
    name = f"{prefix}fft{suffix}"
    default = (-2, -1) if suffix == "2" else None

    def f(a, s=None, axes=default, norm=None):
        return _fftn(a, s, axes, norm, _KINDS[prefix], name)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"numpy.fft.{name} over axes (s points), differentiable."
    return staticmethod(f)


class fft:  # noqa: N801  (a namespace, as jax.numpy.fft)
    """NumPy's FFT functions with gradients (JAX's convention for complex cotangents)."""

    fft, ifft, rfft, irfft = (_along_axis(p) for p in ("", "i", "r", "ir"))
    fft2, ifft2, rfft2, irfft2 = (_along_axes(p, "2") for p in ("", "i", "r", "ir"))
    fftn, ifftn, rfftn, irfftn = (_along_axes(p, "n") for p in ("", "i", "r", "ir"))

    @staticmethod
    def hfft(a, n=None, axis=-1, norm=None):
        """The FFT of a Hermitian-symmetric signal given by its first half: a real result of
        n = 2 (m - 1) points by default (NumPy's irfft of conj(a), the other normalization)."""
        return _fftn(ew.conj(_promote_complex(a, "hfft")), None if n is None else (n,), (axis,),
                     _SWAP.get(norm, norm), "IRFFT", "hfft")

    @staticmethod
    def ihfft(a, n=None, axis=-1, norm=None):
        """hfft's inverse: conj(rfft(a)) with the other normalization (1/n by default)."""
        return ew.conj(_fftn(a, None if n is None else (n,), (axis,), _SWAP.get(norm, norm),
                             "RFFT", "ihfft"))

    @staticmethod
    def fftshift(x, axes=None):
        """The zero frequency moved to the centre: a roll by n // 2 along each axis."""
        return _shift(x, axes, 1)

    @staticmethod
    def ifftshift(x, axes=None):
        """fftshift's inverse: a roll by -(n // 2) along each axis."""
        return _shift(x, axes, -1)

    @staticmethod
    def fftfreq(n, d=1.0, *, dtype=None):
        """The sample frequencies of an n-point FFT (constants, float32 by default)."""
        return array(_np.fft.fftfreq(n, d), dtype=dtype or _DEFAULT["f"])

    @staticmethod
    def rfftfreq(n, d=1.0, *, dtype=None):
        """The non-negative sample frequencies of an n-point rfft."""
        return array(_np.fft.rfftfreq(n, d), dtype=dtype or _DEFAULT["f"])


def _shift(x, axes, sign):
    shape = _shape(x)
    axes = tuple(range(len(shape))) if axes is None else \
        ((axes,) if isinstance(axes, int) else tuple(axes))
    return roll(x, tuple(sign * (shape[a] // 2) for a in axes), axes)


