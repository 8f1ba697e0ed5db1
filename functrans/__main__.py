"""`python -m functrans`: the environment a bug report needs (as PyTorch's
`python -m torch.utils.collect_env`): versions, devices, BLAS and its threads, the C
compiler, MPI, the thread settings and where caches live."""
from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys

import numpy as np

import functrans
from functrans.backends import memory, threads
from functrans.backends.native import toolchain
from functrans.core import devices as _devices


def _version(module: str) -> str:
    """The installed version of an optional module, or 'not installed'."""
    try:
        mod = __import__(module)
    except Exception as e:          # an installed but broken module: say why
        return "not installed" if isinstance(e, ImportError) else f"broken ({e})"
    return str(getattr(mod, "__version__", "installed"))


def _compiler() -> str:
    """The C compiler's first line of `--version` (CC, else cc, gcc, clang), or 'not found'."""
    for name in [os.environ.get("CC")] + ["cc", "gcc", "clang"]:
        path = shutil.which(name) if name else None
        if path:
            try:
                out = subprocess.run([path, "--version"], capture_output=True, text=True,
                                     timeout=10).stdout
            except (OSError, subprocess.SubprocessError):
                continue
            return f"{path}: {out.splitlines()[0] if out else '?'}"
    return "not found"


def _native() -> str:
    """ft.config.cpu_backend and the C++ compiler the native backend uses (or why none: no
    compiler, or a refused cache)."""
    try:
        cc = toolchain.find_compiler()
    except toolchain.ToolchainError as e:
        return f"{functrans.config.cpu_backend}; {e}"
    return f"{functrans.config.cpu_backend}; {cc.path}: {cc.version} ({' '.join(cc.flags)})"


def _mpi() -> str:
    """mpi4py's version and the MPI library it runs on, or 'mpi4py not installed'."""
    try:
        from mpi4py import MPI
    except ImportError:
        return "mpi4py not installed"
    except Exception as e:
        return f"mpi4py broken ({e})"
    import mpi4py
    return f"mpi4py {mpi4py.__version__}, {MPI.Get_library_version().splitlines()[0].strip()}"


def report() -> str:
    """The report `python -m functrans` prints."""
    try:
        devs = ", ".join(str(d) for d in _devices.devices())
    except Exception as e:
        devs = f"cpu (listing GPUs failed: {e})"
    cupy = _version("cupy")
    rows = [
        ("functrans", f"{functrans.__version__} ({os.path.dirname(functrans.__file__)})"),
        ("python", f"{sys.version.split()[0]} ({platform.python_implementation()}, "
                   f"{platform.platform()})"),
        ("numpy", np.__version__),
        ("opt_einsum", _version("opt_einsum")),
        ("cupy", cupy),
        ("devices", devs),
        ("cpu cores", str(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                          else os.cpu_count())),
        ("threads", f"{threads.get_num_threads()} (ft.get_num_threads(): CPU backend)"),
    ]
    for lib in threads.blas_info():
        rows.append(("BLAS", ", ".join(f"{k}={v}" for k, v in lib.items())))
    env = {k: os.environ[k] for k in threads.ENV_VARS if k in os.environ}
    rows.append(("thread env", ", ".join(f"{k}={v}" for k, v in env.items()) or "(none set)"))
    rows.append(("malloc", memory.MALLOC))
    rows.append(("threadpoolctl", _version("threadpoolctl")))
    rows.append(("C compiler", _compiler()))
    rows.append(("MPI", _mpi()))
    for opt in ("graphviz", "matplotlib", "tqdm"):
        rows.append((opt, _version(opt)))
    rows.append(("dot (Graphviz)", shutil.which("dot") or "not found"))
    rows.append(("native CPU backend", _native()))
    rows.append(("native kernel cache", toolchain.cache_report()))
    d = memory.DERIVED.stats()
    rows.append(("derived programs", f"in memory, one cache: {d['entries']} entries, "
                 f"{d['held'] / 2**20:.1f} of {d['limit'] / 2**20:.0f} MB "
                 "(backends.memory.DERIVED.limit); native libraries on disk (above)"))
    if cupy != "not installed":
        rows.append(("CuPy kernel cache", os.environ.get(
            "CUPY_CACHE_DIR", os.path.join(os.path.expanduser("~"), ".cupy", "kernel_cache"))))
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


if __name__ == "__main__":
    print(report())
