"""ft.fft: torch.fft's transforms on Tensors, each one recorded facade op over
functrans.numpy.fft (one `fft` primitive, its transpose gives the gradient). torch's
conventions: `dim` instead of `axis`, integer input promoted to the default float dtype,
norm in (None, "backward", "ortho", "forward"), and torch's grad_fn names and errors."""
from __future__ import annotations

import numpy as np

from .numpy import raw as fnp
from .facade import dtypes as D
from .facade.creation import tensor as _tensor
from .facade.tensor import Tensor, apply_fn, static
from .facade.tensor_info import wrap_dim

_NORMS = (None, "backward", "ortho", "forward")
# torch's grad_fn per transform family: a complex-to-complex, real-to-complex or
# complex-to-real transform (the 1-D inverse of a real input is the conjugate of one)
_R2C, _C2C, _C2R = "FftR2CBackward0", "FftC2CBackward0", "FftC2RBackward0"


def _prepare(input, name, norm, real_input=False):
    """The input as a floating or complex Tensor (torch promotes integers to the default
    float dtype), after checking norm and, for rfft/ihfft, that the input is real."""
    if not isinstance(input, Tensor):
        raise TypeError(f"fft_{name}(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(input).__name__}")
    if norm not in _NORMS:
        raise RuntimeError(f'Invalid normalization mode: "{norm}"')
    if input.dtype.kind in "biu":
        input = input.to(D.get_default_dtype())
    if real_input and input.dtype.kind == "c":
        what = "a real-valued" if name.endswith("n") or name.endswith("2") else "a real"
        raise RuntimeError(f"{name} expects {what} input tensor, but got "
                           f"{D.scalar_name(input.dtype)}")
    return input


def _points(n):
    if n is not None and n < 1:
        raise RuntimeError(f"Invalid number of data points ({n}) specified")
    return n


def _one_dim(kind, np_name):
    """torch.fft.{kind}: a transform along one dim with n points."""
    real_input = kind in ("rfft", "ihfft")

    def f(input, n=None, dim=-1, norm=None):
        x = _prepare(input, kind, norm, real_input)
        axis = wrap_dim(dim, x.ndim)
        complex_in = x.dtype.kind == "c"
        if kind in ("irfft", "hfft"):
            grad_fn = _C2R
        elif kind in ("ihfft",) or (kind == "ifft" and not complex_in):
            grad_fn = "ConjBackward0"
        else:
            grad_fn = _C2C if complex_in else _R2C
        return apply_fn(grad_fn, getattr(fnp.fft, np_name), (x,),
                        static(n=_points(n), axis=axis, norm=norm))
    f.__name__ = f.__qualname__ = kind
    f.__doc__ = (f"torch.fft.{kind}: numpy.fft.{np_name} along `dim` with `n` points "
                 f"(cut or zero-padded), differentiable.")
    return f


def _n_dims(kind, default_dims):
    """torch.fft.{kind}: a transform over several dims with sizes s."""
    real_input = kind.startswith("rfft")

    def f(input, s=None, dim=default_dims, norm=None):
        x = _prepare(input, kind, norm, real_input)
        if dim is not None:
            dims = (dim,) if isinstance(dim, int) else tuple(dim)
            dims = tuple(wrap_dim(d, x.ndim) for d in dims)
            if len(set(dims)) != len(dims):
                raise RuntimeError(f"{kind} dims must be unique")
        else:
            dims = None if s is None else tuple(range(x.ndim - len(s), x.ndim))
        if s is not None:
            s = tuple(int(v) for v in s)
            if dims is not None and len(s) != len(dims):
                raise RuntimeError("When given, dim and shape arguments must have the same "
                                   "length")
            for v in s:
                if v != -1:
                    _points(v)
            if dims is not None:             # torch's -1: the input's size along that dim
                s = tuple(x.shape[d] if v == -1 else v for v, d in zip(s, dims, strict=True))
        if dims is None:
            dims = tuple(range(x.ndim))
        grad_fn = _C2R if kind.startswith("irfft") else _R2C if real_input else _C2C
        np_name = kind.replace("2", "n")
        return apply_fn(grad_fn, getattr(fnp.fft, np_name), (x,),
                        static(s=s, axes=dims, norm=norm))
    f.__name__ = f.__qualname__ = kind
    f.__doc__ = (f"torch.fft.{kind}: numpy.fft.{kind.replace('2', 'n')} over `dim` with sizes "
                 f"`s`, differentiable.")
    return f


fft, ifft, rfft, irfft, hfft, ihfft = (_one_dim(k, k) for k in
                                       ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft"))
fft2, ifft2, rfft2, irfft2 = (_n_dims(k + "2", (-2, -1)) for k in ("fft", "ifft", "rfft",
                                                                   "irfft"))
fftn, ifftn, rfftn, irfftn = (_n_dims(k + "n", None) for k in ("fft", "ifft", "rfft", "irfft"))


def _shift(sign):
    name = "fftshift" if sign > 0 else "ifftshift"

    def f(input, dim=None):
        dims = range(input.ndim) if dim is None else ((dim,) if isinstance(dim, int) else dim)
        dims = tuple(wrap_dim(d, input.ndim) for d in dims)
        if not dims:
            return input.clone()
        shifts = tuple(sign * (input.shape[d] // 2) for d in dims)
        return input.roll(shifts, dims)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = (f"torch.fft.{name}: a roll by {'' if sign > 0 else '-'}(n // 2) along each "
                 f"dim (all by default), moving the zero frequency "
                 f"{'to the centre' if sign > 0 else 'back to the front'}.")
    return f


fftshift, ifftshift = _shift(1), _shift(-1)


def _freq(name, table):
    def f(n, d=1.0, *, dtype=None, device=None, requires_grad=False, **_):
        dt = D.to_dtype(dtype) or D.get_default_dtype()
        return _tensor(table(n, d).astype(dt), device=device, requires_grad=requires_grad)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"torch.fft.{name}: the sample frequencies (a constant Tensor, default dtype)."
    return f


fftfreq = _freq("fftfreq", np.fft.fftfreq)
rfftfreq = _freq("rfftfreq", np.fft.rfftfreq)

__all__ = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2", "irfft2",
           "fftn", "ifftn", "rfftn", "irfftn", "fftshift", "ifftshift", "fftfreq", "rfftfreq"]
