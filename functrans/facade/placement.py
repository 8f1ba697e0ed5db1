"""Devices: `ft.device`, the device of an array and moving arrays between devices. Below
the Tensor class, so that every facade module can use them."""
from __future__ import annotations

import builtins

import numpy as np

from ..core.devices import cupy_module


class device:  # noqa: N801  (torch.device)
    """A device: "cpu" (NumPy) or "cuda" (CuPy)."""

    def __init__(self, type, index=None):  # noqa: A002
        if isinstance(type, device):
            type, index = type.type, type.index
        if ":" in str(type):
            type, idx = str(type).split(":")
            index = builtins.int(idx)
        if type not in ("cpu", "cuda"):
            raise RuntimeError(f"Expected one of cpu, cuda device type at start of device "
                               f"string: {type}")
        self.type = type
        self.index = index

    def __eq__(self, other):
        if isinstance(other, str):
            other = device(other)
        return isinstance(other, device) and self.type == other.type and (
            self.index == other.index or None in (self.index, other.index))

    def __hash__(self):
        return hash(self.type)

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self):
        return f"device(type='{self.type}'" + (f", index={self.index})" if self.index is not None
                                               else ")")


_CPU = device("cpu")


def device_of(a):
    if type(a) is np.ndarray:
        return _CPU
    return device("cuda", 0)


def _cupy():
    return cupy_module()


def put(a, dev):
    """The array a on device dev (a copy when it moves)."""
    dev = device(dev)
    if dev.type == "cpu":
        return a if type(a) is np.ndarray else a.get()
    cp = _cupy()
    return a if isinstance(a, cp.ndarray) else cp.asarray(a)


def _check_device(dev):
    if dev is not None and device(dev).type == "cuda":
        _cupy()


def _on(t, dev):
    """t moved to dev when a creation function was given device="cuda"."""
    if dev is not None and device(dev).type == "cuda":
        t._data = put(t._data, "cuda")
    return t
