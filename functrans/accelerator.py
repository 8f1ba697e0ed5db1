"""ft.accelerator: torch.accelerator's device-agnostic queries, so that a program's device
selection (`device = torch.accelerator.current_accelerator() if
torch.accelerator.is_available() else torch.device("cpu")`) runs unchanged.

functrans has one accelerator, CUDA through CuPy (ft.cuda). It exists exactly when CuPy is
installed and sees a GPU; otherwise the answers are a CPU-only PyTorch's: `is_available()`
is False, `current_accelerator()` is None, `device_count()` is 0, and the calls that need a
device raise PyTorch's RuntimeError followed by what is missing.
"""
from __future__ import annotations

import contextlib

from . import cuda
from .core.devices import DeviceError, cupy_module
from .facade.placement import device as _device

__all__ = ["current_accelerator", "current_device_idx", "current_device_index",
           "device_count", "device_index", "empty_cache", "is_available", "set_device_idx",
           "set_device_index", "synchronize"]


def is_available() -> bool:
    """True when an accelerator (a CUDA GPU through CuPy) can be used."""
    return cuda.is_available()


def current_accelerator(check_available: bool = False):
    """`ft.device("cuda")` when a CUDA GPU is usable, else None. (PyTorch distinguishes the
    accelerator a build supports from one present at run time; functrans has no build-time
    accelerator, so both answers are the run-time one and check_available changes nothing.)"""
    return _device("cuda") if cuda.is_available() else None


def device_count() -> int:
    """The number of accelerator devices (0 without one)."""
    return cuda.device_count()


def _require():
    """The cupy module; PyTorch's RuntimeError, with the reason, when no accelerator is there."""
    try:
        return cupy_module()
    except DeviceError as e:
        raise RuntimeError(f"Cannot access accelerator device when none is available. "
                           f"(functrans's accelerator is CUDA through CuPy: {e})") from None


def _index(dev) -> int:
    """The device index of an int, a 'cuda:1' string or an ft.device (the current one when
    it has none)."""
    cp = _require()
    if isinstance(dev, int) and not isinstance(dev, bool):
        return dev
    dev = _device(dev)
    if dev.type != "cuda":
        raise ValueError(f"{dev} doesn't match the current accelerator cuda.")
    return cp.cuda.runtime.getDevice() if dev.index is None else dev.index


def current_device_index() -> int:
    """The index of the current accelerator device."""
    return _require().cuda.runtime.getDevice()


def set_device_index(device, /) -> None:
    """Make `device` (an index, 'cuda:i' or an ft.device) the current accelerator device;
    None changes nothing."""
    if device is not None:
        _require().cuda.runtime.setDevice(_index(device))


current_device_idx = current_device_index      # PyTorch's older names
set_device_idx = set_device_index


@contextlib.contextmanager
def device_index(device, /):
    """Within the block, `device` (an index; None: no change) is the current device."""
    if device is None:
        yield
        return
    previous = current_device_index()
    set_device_index(device)
    try:
        yield
    finally:
        set_device_index(previous)


def synchronize(device=None, /) -> None:
    """Wait for the work queued on an accelerator device (default: the current one)."""
    _require()
    cuda.synchronize(device)


def empty_cache() -> None:
    """Release the accelerator memory cached by CuPy's pools."""
    _require()
    cuda.empty_cache()
