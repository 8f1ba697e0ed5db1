"""jax.dtypes: `float0` (the tangent dtype of integer and boolean values, as JAX's), and
the dtype helpers JAX programs import from here."""
from __future__ import annotations

import numpy as np

from .core import check_dtype
from .core.config import config
from .numpy import issubdtype, result_type  # noqa: F401  (jax.dtypes re-exports them)

# a zero-size structured dtype: an array of it holds no data (JAX's definition)
float0 = np.dtype([("float0", np.void, 0)])


def is_float0(x) -> bool:
    return getattr(x, "dtype", None) == float0


def canonicalize_dtype(dtype, allow_extended_dtype=False):
    """dtype as functrans computes with it: 64-bit kinds become 32-bit ones when
    jax_enable_x64 is off, as JAX's."""
    dt = np.dtype(dtype)
    if dt == float0:
        return dt
    if not config.jax_enable_x64 and dt.itemsize == 8 and dt.kind in "iuf":
        dt = np.dtype({"i": np.int32, "u": np.uint32, "f": np.float32}[dt.kind])
    if dt.kind == "c" and dt.itemsize == 16 and not config.jax_enable_x64:
        dt = np.dtype(np.complex64)
    return check_dtype(dt, "a dtype")
