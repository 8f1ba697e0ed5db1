"""fft: the discrete Fourier transform over an array's trailing axes (as JAX's fft_p).

fft_type is "FFT" or "IFFT" (complex -> complex), "RFFT" (real -> the n//2 + 1
non-negative frequencies of the last axis) or "IRFFT" (that half spectrum -> real);
fft_lengths are the transform's lengths over the trailing axes. IFFT and IRFFT carry
NumPy's 1/N; functrans.numpy.fft builds every other axis choice and norm on it.
"""
from __future__ import annotations

import math

import numpy as np

from functrans.core import DTypeError, ShapedArray, ShapeError, Zero
from .base import aval_of, complex_dtype, defprim, moveaxis, real_dtype
from .elementwise import conj, mul, real
from .shape import broadcast_in_dim, pad

FFT_TYPES = ("FFT", "IFFT", "RFFT", "IRFFT")


def _fft_impl(xp, x, fft_type, fft_lengths):
    axes = tuple(range(-len(fft_lengths), 0))
    f = {"FFT": xp.fft.fftn, "IFFT": xp.fft.ifftn, "RFFT": xp.fft.rfftn,
         "IRFFT": xp.fft.irfftn}[fft_type]
    out = f(xp.asarray(x), s=fft_lengths, axes=axes)
    dt = real_dtype(x.dtype) if fft_type == "IRFFT" else complex_dtype(x.dtype)
    return out.astype(dt, copy=False)


def _fft_shape(x, fft_type, fft_lengths):
    if fft_type not in FFT_TYPES:
        raise ValueError(f"fft_type must be one of {FFT_TYPES}, got {fft_type!r}")
    k = len(fft_lengths)
    if not 1 <= k <= x.ndim or any(int(n) < 1 for n in fft_lengths):
        raise ShapeError(f"fft_lengths {fft_lengths} must be 1 to {x.ndim} positive lengths "
                         f"for an operand {x.str_short()}")
    lengths = tuple(fft_lengths)
    if fft_type == "RFFT":
        if x.dtype.kind != "f":
            raise DTypeError(f"RFFT takes a real floating operand, got {x.str_short()}; use "
                             "FFT for complex input")
        want, out_dt = lengths, complex_dtype(x.dtype)
        out = x.shape[:-k] + lengths[:-1] + (lengths[-1] // 2 + 1,)
    else:
        if x.dtype.kind != "c":
            raise DTypeError(f"{fft_type} takes a complex operand, got {x.str_short()}; "
                             "convert it to complex (RFFT takes real input)")
        if fft_type == "IRFFT":
            want, out_dt = lengths[:-1] + (lengths[-1] // 2 + 1,), real_dtype(x.dtype)
            out = x.shape[:-k] + lengths
        else:
            want, out_dt, out = lengths, x.dtype, x.shape
    if x.shape[-k:] != want:
        raise ShapeError(f"{fft_type} with fft_lengths {lengths} needs trailing axes {want}, "
                         f"got an operand {x.str_short()}")
    return ShapedArray(out, out_dt)


def _fft_transpose(ct, x, fft_type, fft_lengths):
    """Transposes under the pairing Re(sum(ct * t)) (no conjugation, as JAX): the DFT
    matrices are symmetric, so FFT and IFFT are their own transposes; RFFT = slice o FFT
    transposes to Re(FFT(zero-padded ct)); IRFFT = Re(W c x) / N with c = (1, 2, ..., 2,
    1 at Nyquist when N is even) transposes to conj(c * RFFT(ct)) / N."""
    if type(ct) is Zero:
        return [Zero(x.aval)]
    if fft_type in ("FFT", "IFFT"):
        return [fft(ct, fft_type=fft_type, fft_lengths=fft_lengths)]
    shape = aval_of(ct).shape
    n = fft_lengths[-1]
    if fft_type == "RFFT":
        config = ((0, 0, 0),) * (len(shape) - 1) + ((0, n - shape[-1], 0),)
        full = pad(ct, np.zeros((), aval_of(ct).dtype), padding_config=config)
        return [real(fft(full, fft_type="FFT", fft_lengths=fft_lengths))]
    half = fft(ct, fft_type="RFFT", fft_lengths=fft_lengths)
    hshape, hdt = aval_of(half).shape, aval_of(half).dtype
    c = np.full(hshape[-1], 2.0)
    c[0] = 1.0
    if n % 2 == 0:
        c[-1] = 1.0
    c = np.asarray(c / math.prod(fft_lengths), hdt)
    scale = broadcast_in_dim(c, shape=hshape, broadcast_dimensions=(len(hshape) - 1,))
    return [conj(mul(half, scale))]


def _fft_batch(vals, dims, fft_type, fft_lengths):
    (x,), (d,) = vals, dims
    return fft(moveaxis(x, d, 0), fft_type=fft_type, fft_lengths=fft_lengths), 0


fft_p = defprim("fft", _fft_impl, _fft_shape, linear=True, transpose=_fft_transpose,
                batch=_fft_batch, fresh=True)
fft = fft_p.bind
