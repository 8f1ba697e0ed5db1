"""Direct 2-D convolutions of float32 arrays in native code (conv.cpp): what the
conv_general_dilated primitive runs on the CPU instead of im2col and a GEMM when a compiler
is there (installed as primitives.conv.NATIVE_CONV.run by backends/cpu.py).

An im2col GEMM copies every input value kernel-size times into a column matrix and then
multiplies a tall matrix by a narrow one (32 or 64 output channels), which OpenBLAS runs at
about half the speed of its wide products; the direct kernels read the padded channels-last
input in place and keep a tile of outputs in vector registers (measured on a 3x3
convolution of 32x32x32x32 floats, one thread: 3.8 ms against 13 ms for the im2col path,
the weight gradient 5 ms against 15 ms).

One library, compiled the first time a convolution needs it (about 3 s; a second process
finds it in the toolchain's disk cache) and loaded once per process; any toolchain failure
follows the toolchain's policy (one warning, remembered), and the im2col path runs."""
from __future__ import annotations

import os
import threading

import numpy as np

from . import kernels, toolchain

NAMES = ("ft_conv2d_direct", "ft_conv2d_wgrad")
CHANNELS = 16        # O must be a multiple of this (of every vector width conv.cpp has)
_loaded: dict = {}      # toolchain setting -> {entry name: address}, or None (failed)
_lock = threading.Lock()


def entries():
    """{name: address} of the kernels, built and loaded on first use; None when native code
    is unavailable (the toolchain said why, once)."""
    key = toolchain.setting()
    if key in _loaded:
        return _loaded[key]
    if toolchain.unavailable():
        return None
    with _lock:
        if key not in _loaded:
            with open(os.path.join(toolchain.HERE, "conv.cpp")) as f:
                src = f.read()
            try:
                addrs = kernels.entry_points(toolchain.build(src, "ft_conv2d"), NAMES)
            except toolchain.ToolchainError:
                return None                 # reported by the toolchain; tried again later
            _loaded[key] = addrs
    return _loaded[key]


def _dims(lhs, out_sp, k_sp, strides, dilation, o):
    return np.array((*lhs.shape, *k_sp, o, *out_sp, *strides, *dilation), np.int64)


def run(lhs, rhs, out_sp, strides, dilation, direct, threads):
    """The convolution out[b, y, x, o] = sum over f, i, j of
    lhs[b, y*sh + i*dh, x*sw + j*dw, f] * W[o, f, i, j], lhs (B, Hp, Wp, F) padded, as a
    (B, Y, X, O) float32 array; None when the kernels cannot run it (no compiler, O not a
    multiple of CHANNELS): then the caller runs im2col.

    direct=True: rhs is W as (KH, KW, F, O) (a forward convolution's layout). direct=False,
    for few outputs over a long contraction (a kernel's gradient): lhs is given as
    (F, Hp, Wp, B) and rhs as (F, KH, KW, O), and the result comes as (Y, X, B, O)."""
    addrs = entries()
    o = rhs.shape[-1]
    if addrs is None or o % CHANNELS:
        return None
    lhs, rhs = np.ascontiguousarray(lhs), np.ascontiguousarray(rhs)
    call = kernels.caller()
    if direct:
        out = np.empty((lhs.shape[0], *out_sp, o), np.float32)
        dims = _dims(lhs, out_sp, rhs.shape[:2], strides, dilation, o)
        call(addrs["ft_conv2d_direct"], out.size, threads, lhs, rhs, out, dims)
        return out
    # the kernel's names: x = lhs (N, Hp, Wp, C), ct = rhs (N, OH, OW, O), the "kernel" the
    # output's (Y, X); the window strides and the kernel dilation trade places
    out = np.empty((*out_sp, lhs.shape[-1], o), np.float32)
    dims = _dims(lhs, rhs.shape[1:3], out_sp, dilation, strides, o)
    call(addrs["ft_conv2d_wgrad"], out.size, threads, lhs, rhs, out, dims)
    return out
