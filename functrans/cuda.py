"""ft.cuda: torch.cuda's queries over CuPy. `import functrans` never imports CuPy; the first
call here that needs it does (and answers "no CUDA" when CuPy or a GPU is missing)."""
from __future__ import annotations

from .core.devices import cuda_available, cupy_module
from .facade import creation as _creation

__all__ = ["is_available", "device_count", "current_device", "synchronize", "manual_seed",
           "manual_seed_all", "empty_cache", "get_device_name", "is_initialized", "set_device",
           "memory_allocated", "memory_reserved", "is_bf16_supported"]


def is_available() -> bool:
    """True when CuPy is installed and sees a CUDA device."""
    return cuda_available()


def is_initialized() -> bool:
    return cuda_available()


def device_count() -> int:
    """The number of CUDA devices CuPy sees (0 without CuPy or a GPU)."""
    return cupy_module().cuda.runtime.getDeviceCount() if cuda_available() else 0


def current_device() -> int:
    """The index of the current CUDA device; DeviceError (naming what is missing) without one."""
    return cupy_module().cuda.runtime.getDevice()


def get_device_name(device=None) -> str:
    """The name of a CUDA device (default: the current one)."""
    cp = cupy_module()
    index = cp.cuda.runtime.getDevice() if device is None else _index(device)
    name = cp.cuda.runtime.getDeviceProperties(index)["name"]
    return name.decode() if isinstance(name, bytes) else name


def _index(device):
    if isinstance(device, int):
        return device
    index = getattr(device, "index", None)
    if index is None and isinstance(device, str):
        _, _, tail = device.partition(":")
        index = int(tail) if tail else None
    return cupy_module().cuda.runtime.getDevice() if index is None else index


def synchronize(device=None) -> None:
    """Wait for all work queued on a CUDA device (default: the current one)."""
    cp = cupy_module()
    with cp.cuda.Device(_index(device) if device is not None else cp.cuda.runtime.getDevice()):
        cp.cuda.runtime.deviceSynchronize()


def manual_seed(seed) -> None:
    """Seed the facade's generator: functrans draws random numbers for every device from it."""
    _creation.manual_seed(seed)


manual_seed_all = manual_seed


def empty_cache() -> None:
    """Free the cached blocks of CuPy's memory pools (nothing to do without CUDA)."""
    if cuda_available():
        cp = cupy_module()
        cp.get_default_memory_pool().free_all_blocks()
        cp.get_default_pinned_memory_pool().free_all_blocks()


def set_device(device) -> None:
    """Make a CUDA device current (an index, "cuda:i" or a device); DeviceError naming what
    is missing without CUDA. A negative index changes nothing, as in torch."""
    index = _index(device)
    if index >= 0:
        cupy_module().cuda.Device(index).use()


def _pool_bytes(device, which):
    if not cuda_available():
        return 0                    # torch answers 0 before CUDA is initialized
    cp = cupy_module()
    with cp.cuda.Device(_index(device) if device is not None else cp.cuda.runtime.getDevice()):
        pool = cp.get_default_memory_pool()
        return int(pool.used_bytes() if which == "used" else pool.total_bytes())


def memory_allocated(device=None) -> int:
    """Bytes held by live arrays in CuPy's memory pool on the device (0 without CUDA)."""
    return _pool_bytes(device, "used")


def memory_reserved(device=None) -> int:
    """Bytes CuPy's memory pool holds on the device, in use or cached (0 without CUDA)."""
    return _pool_bytes(device, "total")


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """False: functrans has no bfloat16 tensors on any device (ft.bfloat16 names the dtype;
    making a tensor of it raises TypeError)."""
    return False
