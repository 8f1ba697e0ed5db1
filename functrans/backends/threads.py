"""`ft.set_num_threads(n)` / `ft.get_num_threads()` (PyTorch's names): the threads of the
BLAS behind NumPy's matrix products and of the CPU backend's blocked fusion groups.

BLAS is set at run time through threadpoolctl when it is installed, else through NumPy's
bundled OpenBLAS (its `openblas_set_num_threads`, the call threadpoolctl makes); failing
both, the `*_NUM_THREADS` variables are set, which only a BLAS loaded later (a child
process) reads, and a warning says so. The CPU backend reads its count when it lowers a
program, so programs lowered before the call keep theirs.
"""
from __future__ import annotations

import ctypes
import os
import warnings

import numpy as np

from . import blas
from .cpu import CONFIG

_numpy_openblas = blas.numpy_openblas
_threadpoolctl = blas.threadpoolctl
ENV_VARS = blas.ENV_VARS


def blas_info() -> list[dict]:
    """The BLAS libraries NumPy uses: threadpoolctl's report when it is installed, else
    NumPy's build configuration and the bundled OpenBLAS's thread count."""
    threadpoolctl = _threadpoolctl()
    if threadpoolctl is not None:
        return [{k: v for k, v in d.items() if k in ("internal_api", "version", "num_threads",
                                                    "filepath", "architecture")}
                for d in threadpoolctl.threadpool_info() if d.get("user_api") == "blas"]
    build = dict(np.__config__.CONFIG.get("Build Dependencies", {}).get("blas", {}))
    out = {"internal_api": build.get("name", "unknown"), "version": build.get("version")}
    lib = _numpy_openblas()
    count = None if lib is None else blas.openblas_threads(lib)
    if count is not None:
        out["num_threads"] = count
    return [out]


def set_num_threads(n: int) -> None:
    """Use `n` threads for BLAS and for the CPU backend's blocked fusion groups."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"set_num_threads expects a positive integer, got {n!r}")
    CONFIG.threads = n
    threadpoolctl = _threadpoolctl()
    if threadpoolctl is not None:
        threadpoolctl.threadpool_limits(limits=n, user_api="blas")
        return
    lib = _numpy_openblas()
    if lib is not None:
        getattr(lib, next(s for s in blas.OPENBLAS_SET if hasattr(lib, s)))(ctypes.c_int(n))
        return
    for var in ENV_VARS:
        os.environ[var] = str(n)
    warnings.warn(f"set_num_threads({n}): the BLAS NumPy loaded cannot be reached without "
                  "threadpoolctl (pip install threadpoolctl); its thread count is unchanged "
                  f"in this process. {', '.join(ENV_VARS)} are set to {n} for processes started "
                  "from now on; in a shell, OPENBLAS_NUM_THREADS=1 python ... sets it for one run.",
                  stacklevel=2)


def get_num_threads() -> int:
    """The number of threads the CPU backend gives a blocked fusion group (and BLAS, after
    set_num_threads)."""
    return CONFIG.threads
