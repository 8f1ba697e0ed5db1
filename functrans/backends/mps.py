"""torch.backends.mps's queries, which programs ask before choosing a device
(`args.mps and torch.backends.mps.is_available()` in mnist_hogwild and legacy): functrans
has no Apple Metal backend (its devices are the CPU and CUDA through CuPy), so both are False."""
from __future__ import annotations


def is_available():
    """False: functrans has no MPS (Metal) device."""
    return False


def is_built():
    """False: functrans is not built with MPS."""
    return False
