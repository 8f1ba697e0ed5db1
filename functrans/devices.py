"""Devices: "cpu" (NumPy arrays) and "cuda" (CuPy arrays, optional).

CuPy is imported lazily, on the first request for "cuda"; without it, or without a
GPU, that request raises DeviceError naming what is missing, and nothing else changes.
"""
from __future__ import annotations

import numpy as np

from . import tree_util
from .core import FunctransError, canonicalize


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


def devices(platform=None):
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


def device_put(x, device=None):
    """Copy every array leaf of a pytree to a device ("cpu", "cuda", "cuda:1", Device)."""
    dev = _parse(device)
    if dev.platform == "cpu":
        def put(v):
            if type(v).__module__.startswith("cupy"):
                return v.get()
            return np.asarray(canonicalize(v)) if not isinstance(v, np.ndarray) else v
        return tree_util.tree_map(put, x)
    cp = cupy_module()
    n = cp.cuda.runtime.getDeviceCount()
    if dev.id >= n:
        raise DeviceError(f"device {dev} does not exist: CuPy sees {n} CUDA device(s)")

    def put_cuda(v):
        with cp.cuda.Device(dev.id):
            return cp.asarray(canonicalize(v))
    return tree_util.tree_map(put_cuda, x)


# ---------------------------------------------------------------------------
# the array module that primitive implementations receive on "cuda"


def _on_device(cp, x):
    """A NumPy operand made acceptable to CuPy: rank-0 arrays become NumPy scalars (CuPy
    takes those as it takes Python scalars), other arrays are copied to the device."""
    t = type(x)
    if t is np.ndarray:
        return x[()] if x.ndim == 0 else cp.asarray(x)
    if t is list or t is tuple:
        return t(_on_device(cp, v) for v in x)
    return x


class _CupyModule:
    """cupy as an `xp` for primitive implementations. Jaxpr literals and captured
    constants are NumPy arrays, which CuPy's functions refuse (it never copies to the
    device implicitly); this wrapper converts them on the way in."""

    def __init__(self, cp):
        self._cp = cp

    def __getattr__(self, name):
        attr = getattr(self._cp, name)
        if not callable(attr) or isinstance(attr, type):
            return attr
        cp = self._cp

        def call(*args, **kwargs):
            return attr(*[_on_device(cp, a) for a in args],
                        **{k: _on_device(cp, v) for k, v in kwargs.items()})
        call.__name__ = name
        self.__dict__[name] = call            # cached: later lookups skip __getattr__
        return call

    def __repr__(self):
        return "<cupy for functrans implementations>"


_cupy_xp = None


def cupy_array_module():
    global _cupy_xp
    if _cupy_xp is None:
        _cupy_xp = _CupyModule(cupy_module())
    return _cupy_xp
