"""Devices: "cpu" (NumPy arrays) and "cuda" (CuPy arrays, optional).

CuPy is imported lazily, on the first request for "cuda"; without it, or without a
GPU, that request raises DeviceError naming what is missing, and nothing else changes.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import tree_util
from .array import DEVICES, Array, value_of, wrap_value
from .avals import FunctransError
from .trace import canonicalize


class DeviceError(FunctransError, RuntimeError):
    """A device was requested that this machine cannot provide."""


class Device:
    """A device: platform "cpu" or "cuda" and an index."""
    __slots__ = ("platform", "id")

    def __init__(self, platform, id=0):
        self.platform, self.id = platform, int(id)

    def __eq__(self, other):
        return isinstance(other, Device) and (self.platform, self.id) == (other.platform, other.id)

    def __hash__(self):
        return hash((self.platform, self.id))

    def __str__(self):
        return f"{self.platform}:{self.id}"

    def __repr__(self):
        return f"Device({self.platform!r}, {self.id})"


_cupy = None
_cupy_error = None


def cupy_module():
    """The cupy module; DeviceError naming what is missing when CUDA is unusable."""
    global _cupy, _cupy_error
    if _cupy is not None:
        return _cupy
    if _cupy_error is None:
        try:
            import cupy
        except ImportError as e:
            _cupy_error = (f"device 'cuda' needs CuPy, which is not installed ({e}). Install "
                           "the optional extra: pip install 'functrans[cuda]' (cupy-cuda12x), "
                           "or use device 'cpu'.")
        else:
            try:
                count = cupy.cuda.runtime.getDeviceCount()
            except Exception as e:          # CUDA driver missing or broken
                count, detail = 0, f" ({type(e).__name__}: {e})"
            else:
                detail = ""
            if count == 0:
                _cupy_error = ("device 'cuda' needs a CUDA GPU: CuPy is installed but sees no "
                               f"device{detail}. Check the driver (nvidia-smi) and "
                               "CUDA_VISIBLE_DEVICES, or use device 'cpu'.")
            else:
                _cupy = cupy
                return cupy
    raise DeviceError(_cupy_error)


def cuda_available() -> bool:
    try:
        cupy_module()
        return True
    except DeviceError:
        return False


def _parse(device) -> Device:
    if device is None:
        return Device("cpu", 0)
    if isinstance(device, Device):
        return device
    if isinstance(device, str):
        plat, _, idx = device.partition(":")
        plat = {"gpu": "cuda"}.get(plat.lower(), plat.lower())
        if plat in ("cpu", "cuda") and (not idx or idx.isdigit()):
            return Device(plat, int(idx or 0))
    raise ValueError(f"unknown device {device!r}; use 'cpu', 'cuda' or 'cuda:N'")


def devices(platform: str | None = None) -> list[Device]:
    """The available devices: cpu first, then every CUDA GPU CuPy sees.
    devices("cuda") raises DeviceError when there is none (saying why)."""
    out = [Device("cpu", 0)]
    if platform in (None, "cuda", "gpu"):
        if platform is None and not cuda_available():
            return out
        cp = cupy_module()
        out += [Device("cuda", i) for i in range(cp.cuda.runtime.getDeviceCount())]
    if platform is None:
        return out
    plat = _parse(platform).platform
    return [d for d in out if d.platform == plat]


def device_of(x) -> Device:
    """The device holding an array (a CuPy array is on its GPU, anything else on cpu)."""
    if type(x).__module__.startswith("cupy"):
        return Device("cuda", x.device.id)
    return Device("cpu", 0)


def device_put(x: Any, device: str | Device | None = None) -> Any:
    """Copy every array leaf of a pytree to a device ("cpu", "cuda", "cuda:1", Device)."""
    dev = _parse(device)
    if dev.platform == "cpu":
        def put(v):
            weak = False
            if type(v) is Array:
                v, weak = value_of(v), v.weak_type
            if type(v).__module__.startswith("cupy"):
                return wrap_value(v.get(), weak)
            return wrap_value(np.asarray(canonicalize(v)) if not isinstance(v, np.ndarray)
                              else v, weak)
        return tree_util.tree_map(put, x)
    cp = cupy_module()
    n = cp.cuda.runtime.getDeviceCount()
    if dev.id >= n:
        raise DeviceError(f"device {dev} does not exist: CuPy sees {n} CUDA device(s)")

    def put_cuda(v):
        weak = False
        if type(v) is Array:
            v, weak = value_of(v), v.weak_type
        with cp.cuda.Device(dev.id):
            return wrap_value(cp.asarray(canonicalize(v)), weak)
    return tree_util.tree_map(put_cuda, x)


def _synchronize(v):
    """Wait for the work queued on CuPy array v's device."""
    with v.device:
        cupy_module().cuda.get_current_stream().synchronize()


def block_until_ready(x):
    """x, once every array leaf of it is computed (jax.block_until_ready): NumPy results are
    ready when returned; a CuPy leaf waits for its device's work to finish."""
    for v in tree_util.tree_leaves(x):
        if type(v) is Array:
            v = value_of(v)
        if type(v).__module__.startswith("cupy"):
            _synchronize(v)
    return x


DEVICES["device_of"] = device_of
DEVICES["synchronize"] = _synchronize
