"""The BLAS behind NumPy's matrix products: which one, and how many threads it uses.

Reached through threadpoolctl when it is installed, else through NumPy's bundled
OpenBLAS (its `openblas_get_num_threads`/`openblas_set_num_threads`, the calls threadpoolctl
makes). `threads()` is what the CPU backend counts when it gives a program's own parallel
loops their threads (cpu.parallel_threads): a BLAS running several threads keeps its
workers spinning between calls, and OpenMP threads on the same cores wait for them.
"""
from __future__ import annotations

import ctypes
import functools
import glob
import os

import numpy as np

ENV_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS",
            "VECLIB_MAXIMUM_THREADS")
OPENBLAS_SET = ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads",
                "openblas_set_num_threads64_", "openblas_set_num_threads")
OPENBLAS_GET = ("scipy_openblas_get_num_threads64_", "scipy_openblas_get_num_threads",
                "openblas_get_num_threads64_", "openblas_get_num_threads")


@functools.lru_cache(maxsize=None)
def numpy_openblas():
    """NumPy's bundled OpenBLAS (wheels ship it in numpy.libs or numpy/.dylibs), or None."""
    base = os.path.dirname(np.__file__)
    found = glob.glob(base + ".libs/*openblas*") + glob.glob(base + "/.dylibs/*openblas*")
    for path in sorted(found):
        try:
            lib = ctypes.CDLL(path)      # already loaded by NumPy: the same library
        except OSError:
            continue
        if any(hasattr(lib, s) for s in OPENBLAS_SET):
            return lib
    return None


def threadpoolctl():
    """The optional threadpoolctl module, or None."""
    try:
        import threadpoolctl as tpc
    except ImportError:
        return None
    return tpc


def openblas_threads(lib) -> int | None:
    """The thread count of an OpenBLAS library (None: it has no getter)."""
    get = next((getattr(lib, s) for s in OPENBLAS_GET if hasattr(lib, s)), None)
    return None if get is None else int(get())


def threads(cores: int) -> int:
    """How many threads NumPy's BLAS runs a large product on now: the bundled OpenBLAS's
    count, else threadpoolctl's largest, else $OPENBLAS_NUM_THREADS (or the other
    variables), else `cores` (OpenBLAS's and MKL's default: every core)."""
    lib = numpy_openblas()
    n = None if lib is None else openblas_threads(lib)
    if n is None:
        tpc = threadpoolctl()
        if tpc is not None:
            counts = [d.get("num_threads") or 1 for d in tpc.threadpool_info()
                      if d.get("user_api") == "blas"]
            n = max(counts) if counts else None
    if n is None:
        for var in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS",
                    "OMP_NUM_THREADS"):
            try:
                n = int(os.environ[var].split(",")[0])
                break
            except (KeyError, ValueError):
                continue
    return max(1, n if n is not None else cores)
