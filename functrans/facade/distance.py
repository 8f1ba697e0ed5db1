"""torch.cdist: the p-norm distance between every row of x1 and every row of x2."""
from __future__ import annotations

import numpy as np

from ..numpy import raw as fnp
from .tensor import Tensor, apply_fn


def _direct_fn(x1, x2, *, p):
    d = fnp.expand_dims(x1, -2) - fnp.expand_dims(x2, -3)                  # (..., P, R, M)
    diff = d * fnp.sign(d)          # |d| whose derivative at 0 is sign(0) = 0, as torch's
    if p == 0:
        return fnp.sum(fnp.astype(diff != 0, x1.dtype), axis=-1)
    if p == 1:
        return fnp.sum(diff, axis=-1)
    if p == np.inf:
        return fnp.max(diff, axis=-1)
    s = fnp.sum(diff ** p, axis=-1)
    # zero distances have a zero gradient (as torch's backward), not NaN
    pos = s > 0
    return fnp.where(pos, fnp.where(pos, s, 1) ** (1.0 / p), 0)


def _mm_fn(x1, x2):
    """‖a‖² + ‖b‖² - 2 a·b, clamped at 1e-30 before the root: torch's matmul path for
    p = 2 (faster on many rows, less exact for near rows)."""
    n1 = fnp.sum(x1 * x1, axis=-1, keepdims=True)
    n2 = fnp.sum(x2 * x2, axis=-1, keepdims=True)
    d2 = n1 - 2 * fnp.matmul(x1, fnp.swapaxes(x2, -1, -2)) + fnp.swapaxes(n2, -1, -2)
    return fnp.sqrt(fnp.maximum(d2, 1e-30))


def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """(B.., P, M) x (B.., R, M) -> (B.., P, R) distances ‖x1[i] - x2[j]‖_p. For p = 2 the
    matmul formula is used when P or R exceeds 25 (compute_mode's default), or always
    ('use_mm_for_euclid_dist'), or never ('donot_use_mm_for_euclid_dist'), as torch."""
    if not isinstance(x1, Tensor) or not isinstance(x2, Tensor):
        raise TypeError("cdist(): arguments 'x1' and 'x2' must be Tensors")
    if x1.dim() < 2 or x2.dim() < 2:
        raise RuntimeError(f"cdist only supports at least 2D tensors, X1 got: {x1.dim()}D")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: "
                           f"{x1.shape[-1]} X2: {x2.shape[-1]}")
    if x1.dtype.kind != "f" or x2.dtype.kind != "f":
        raise RuntimeError(f"cdist only supports floating-point dtypes, X1 got: "
                           f"{'Long' if x1.dtype.kind in 'iu' else x1.dtype}")
    p = float(p)
    if p < 0:
        raise RuntimeError("cdist only supports non-negative p values")
    modes = ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist",
             "donot_use_mm_for_euclid_dist")
    if compute_mode not in modes:
        raise ValueError(f"{compute_mode} is not a valid value for compute_mode")
    rows, cols = x1.shape[-2], x2.shape[-2]
    mm = p == 2.0 and (compute_mode == "use_mm_for_euclid_dist" or (
        compute_mode == modes[0] and (rows > 25 or cols > 25)))
    if mm:
        return apply_fn("ViewBackward0", _mm_fn, (x1, x2))
    return apply_fn("CdistBackward0", _direct_fn, (x1, x2), (("p", p),))
