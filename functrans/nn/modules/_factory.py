"""Uninitialized parameter storage for layer constructors (device= and dtype= as torch)."""
from __future__ import annotations

import numpy as np

from ...facade import dtypes as D
from ...facade.tensor import Tensor


def empty(*shape, device=None, dtype=None):
    """An uninitialized (zero-filled) float tensor of `shape` on `device`."""
    dtype = D.to_dtype(dtype) or D.get_default_dtype()
    t = Tensor._make(np.zeros(shape, dtype))
    if device is not None and str(device) != "cpu":
        t = t.to(device)
    return t


def full(shape, value, device=None, dtype=None):
    t = empty(*shape, device=device, dtype=dtype)
    t._data[...] = value
    return t
