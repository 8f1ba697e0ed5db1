"""Native kernels for eager calls of the primitives NumPy computes slowly (declared
`native_eager=True`: erf, logistic): `out[i] = f(x[i])` rendered from the primitive's
expression template, the same text as a jitted program's fused group.

One library per primitive and dtype (float32, float64), compiled the first time an eager
call needs it (about 0.5 s; a second process finds it in the toolchain's disk cache: a
check and a dlopen) and loaded once per process. Any toolchain failure follows the
toolchain's policy (one warning, remembered: native code off for the process), and every
call then runs the NumPy implementation.
"""
from __future__ import annotations

import threading

import numpy as np

from ...core import Jaxpr, JaxprEqn, ShapedArray, Var
from . import kernels, toolchain

DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
_SIZE = 1 << 20         # the size rendered: above kernels.STREAMS_MIN_SIZE, so a
                        # transcendental loop interleaves streams (any n works)


def kernel_name(prim, dtype) -> str:
    return f"ft_eager_{prim.name}_{np.dtype(dtype).name}"


def source(prim, dtype) -> str:
    """The C++ of prim's eager kernel for dtype."""
    x, y = Var(ShapedArray((_SIZE,), dtype)), Var(ShapedArray((_SIZE,), dtype))
    jaxpr = Jaxpr([], [x], [JaxprEqn(prim, [x], {}, [y])], [y])
    return kernels.render_program([kernels.render_group(jaxpr, kernel_name(prim, dtype))])


_loaded: dict = {}      # (toolchain setting, primitive, dtype) -> the kernel's address
_lock = threading.Lock()


def address(prim, dtype):
    """The entry point of prim's kernel for dtype, built and loaded on first use; None when
    native code is unavailable (the toolchain said why, once)."""
    key = (toolchain.setting(), prim, dtype)
    hit = _loaded.get(key)
    if hit is not None:
        return hit
    if toolchain.unavailable():
        return None
    with _lock:
        hit = _loaded.get(key)
        if hit is None:
            name = kernel_name(prim, dtype)
            try:
                path = toolchain.build(source(prim, dtype), name)
                hit = _loaded[key] = kernels.entry_points(path, [name])[name]
            except toolchain.ToolchainError:
                return None                 # remembered and reported by the toolchain
    return hit


def run(prim, x, threads):
    """prim(x) by its native kernel for a float32/float64 ndarray x, on `threads` threads;
    None when there is no kernel for it (then the caller runs NumPy)."""
    if x.dtype not in DTYPES:
        return None
    fn = address(prim, x.dtype)
    if fn is None:
        return None
    out = np.empty(x.shape, x.dtype)
    call = kernels.caller()
    if not call(fn, x.size, threads, x, out):
        call(fn, x.size, threads, np.ascontiguousarray(x), out)
    return out
