"""Direct 2-D convolutions of float32 arrays in native code (conv.cpp): what the
conv_general_dilated primitive runs on the CPU instead of im2col and a GEMM when a compiler
is there (installed as primitives.conv.NATIVE_CONV.run by backends/cpu.py); and, in the
same library, max pooling's window kernels (`pool`, primitives.pool.NATIVE_POOL.run) and the
row scatter-add of embedding gradients (`scatter_add_rows`, primitives.indexing.NATIVE_ROWS)
and the sums of rows of bias gradients (`sum_rows`, primitives.reductions.NATIVE_SUM_ROWS),
and Adam's update of all parameters in one call, one pass each (`adam_steps`,
optim/adam.py).

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

NAMES = ("ft_conv2d_direct", "ft_conv2d_wgrad", "ft_conv2d_pack", "ft_pool_argmax",
         "ft_pool_gather", "ft_pool_scatter", "ft_scatter_add_rows_f32",
         "ft_scatter_add_rows_f64", "ft_sum_rows_f32", "ft_sum_rows_f64", "ft_gemm_panels",
         "ft_gemm_pack", "ft_adam_steps_f32", "ft_adam_steps_f64")
CHANNELS = 16        # O must be a multiple of this (of every vector width conv.cpp has)
ADAM_CALL = (kernels.MAX_ARGS - 3) // 4     # parameters an adam_steps call takes at most
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


def _dims(lhs, out_sp, k_sp, strides, dilation, o, planar=False):
    return np.array((*lhs.shape, *k_sp, o, *out_sp, *strides, *dilation, planar), np.int64)


def pack(view, padding, dilation, threads, addrs):
    """A float32 4-D view (A, H, W, D) of any strides copied into a fresh C-contiguous
    (A, Hp, Wp, D), its middle axes dilated and padded with zeros (padding >= 0)."""
    a, h, w, k = view.shape
    (lh, hh), (lw, hw) = padding
    hp, wp = lh + (h - 1) * dilation[0] + 1 + hh, lw + (w - 1) * dilation[1] + 1 + hw
    out = np.empty((a, hp, wp, k), np.float32)
    if out.size == 0:
        return out
    st = [s // view.itemsize for s in view.strides]
    dims = np.array((a, h, w, k, hp, wp, lh, lw, *dilation, *st, view.ctypes.data), np.int64)
    kernels.caller()(addrs["ft_conv2d_pack"], out.size, threads, dims, out)
    return out


def gemm(m, k, n, held=None):
    """A function (x, y, out) -> bool computing out = x @ y for C-contiguous float32
    matrices x (m, k), y (k, n), out (m, n) by the direct kernel as a 1x1 convolution of one
    image row of m pixels (k features, n output channels), on one thread (a few-row product
    is one loop step: a parallel region per step waits for a second core each time, on a
    busy machine for the scheduler; one thread of this kernel is about as fast as OpenBLAS
    on two there), False when an array is not C-contiguous; None when there is none: no
    compiler, n not a multiple of CHANNELS, an empty product.

    held: {id(y): [y, panels or None]} of the weights a loop holds unchanged while it runs
    (primitives.linalg.NativeGemm.held): a product by one of them lays y out as 16-column
    panels on its first call (ft_gemm_pack, kept in the entry; from the rows of a y that is
    the transposed view of a C-contiguous weight) and reads those at every
    later step (ft_gemm_panels: the same bits, 1.5-2x faster in a recurrent layer's loop)."""
    addrs = entries()
    if addrs is None or n % CHANNELS or not (m and k):
        return None
    call, address = kernels.caller(), addrs["ft_conv2d_direct"]
    dims = np.array((1, 1, m, k, 1, 1, n, 1, m, 1, 1, 1, 1, 0), np.int64)
    size = m * n
    if held is None:
        def product(x, y, out):
            return call(address, size, 1, x, y, out, dims)
        return product
    on_panels, packer = addrs["ft_gemm_panels"], addrs["ft_gemm_pack"]
    gdims = np.array((m, k, n), np.int64)
    # ft_gemm_pack's dims: y row-major, or the transposed view of a row-major (n, k)
    row_major, transposed = np.array((k, n, n, 1), np.int64), np.array((k, n, 1, k), np.int64)

    def product(x, y, out):
        entry = held.get(id(y))
        if entry is None or entry[0] is not y:
            return call(address, size, 1, x, y, out, dims)
        if entry[1] is None:
            if y.flags.c_contiguous:
                src, pdims = y, row_major
            elif y.T.flags.c_contiguous:        # a transposed view: packed from its rows
                src, pdims = y.T, transposed
            else:
                return call(address, size, 1, x, y, out, dims)
            panels = np.empty(k * n, np.float32)
            call(packer, k * n, 1, src, panels, pdims)
            entry[1] = panels
        return call(on_panels, size, 1, x, entry[1], out, gdims)
    return product


def run(lhs, rhs, padding, lhs_dilation, out_sp, strides, dilation, direct, planar, threads):
    """The convolution out[b, y, x, o] = sum over f, i, j of
    L[b, y*sh + i*dh, x*sw + j*dw, f] * W[o, f, i, j], L the float32 view lhs (B, H, W, F)
    dilated by lhs_dilation and padded by padding (>= 0), as a (B, Y, X, O) float32 array;
    None when the kernels cannot run it (no compiler, O not a multiple of CHANNELS): then
    the caller runs im2col. lhs and rhs may be views of any strides (they are packed
    channels-last here, in one copy each).

    direct=True: rhs is W as (KH, KW, F, O) (a forward convolution's layout); planar=True
    gives the result as (B, O, Y, X), the layout of an NCHW result (then the operations that
    read it see a C-contiguous array, not a transposed view). direct=False,
    for few outputs over a long contraction (a kernel's gradient): lhs is given as
    (F, H, W, B) and rhs as (F, KH, KW, O), and the result comes as (Y, X, B, O)."""
    addrs = entries()
    o = rhs.shape[-1]
    if addrs is None or o % CHANNELS or 0 in lhs.shape or 0 in rhs.shape:
        return None
    lhs = pack(lhs, padding, lhs_dilation, threads, addrs)
    rhs = pack(rhs, ((0, 0), (0, 0)), (1, 1), threads, addrs)
    call = kernels.caller()
    if direct:
        out = np.empty((lhs.shape[0], o, *out_sp) if planar else (lhs.shape[0], *out_sp, o),
                       np.float32)
        dims = _dims(lhs, out_sp, rhs.shape[:2], strides, dilation, o, planar)
        call(addrs["ft_conv2d_direct"], out.size, threads, lhs, rhs, out, dims)
        return out
    # the kernel's names: x = lhs (N, Hp, Wp, C), ct = rhs (N, OH, OW, O), the "kernel" the
    # output's (Y, X); the window strides and the kernel dilation trade places
    out = np.empty((*out_sp, lhs.shape[-1], o), np.float32)
    dims = _dims(lhs, rhs.shape[1:3], out_sp, dilation, strides, o)
    call(addrs["ft_conv2d_wgrad"], out.size, threads, lhs, rhs, out, dims)
    return out


def pool(name, *arrays, window, strides, dilation, in_shape, threads):
    """primitives/pool.py's window_argmax ("argmax": x -> int32 offsets), window_gather
    ("gather": x, offsets -> values) or window_scatter ("scatter": values, offsets -> the
    operand's shape) of float32 arrays by the kernels; None without them. Operands of any
    strides are made C-contiguous first (one copy where they are not)."""
    addrs = entries()
    if addrs is None:
        return None
    arrays = [np.ascontiguousarray(a) for a in arrays]
    lead = arrays[0].shape[:-2]
    h, w = in_shape
    oh, ow = ((n - (k - 1) * d - 1) // s + 1 for n, k, s, d in zip(in_shape, window, strides,
                                                                  dilation))
    dims = np.array((int(np.prod(lead)), h, w, oh, ow, *window, *strides, *dilation), np.int64)
    if name == "argmax":
        out = np.empty(lead + (oh, ow), np.int32)
    elif name == "gather":
        out = np.empty(lead + (oh, ow), np.float32)
    else:
        out = np.empty(lead + (h, w), np.float32)
    if out.size:
        kernels.caller()(addrs["ft_pool_" + name], out.size, threads, *arrays, out, dims)
    return out


def scatter_add_rows(out, rows, upd):
    """out[rows[i]] += upd[i] along out's first axis, i in order (np.add.at's sums, the same
    bits), for a C-contiguous float32 or float64 `out` and rows in range; False (nothing
    done) without the kernels or for another dtype."""
    addrs = entries()
    if addrs is None or out.dtype not in (np.float32, np.float64) or not \
            out.flags.c_contiguous:
        return False
    rows = np.ascontiguousarray(rows.reshape(-1), np.int64)
    if rows.size and out.size:
        upd = np.ascontiguousarray(upd, out.dtype).reshape(rows.size, -1)
        dims = np.array((rows.size, upd.shape[1]), np.int64)
        name = "ft_scatter_add_rows_f32" if out.dtype == np.float32 else \
            "ft_scatter_add_rows_f64"
        kernels.caller()(addrs[name], rows.size, 1, upd, rows, out, dims)
    return True


def sum_rows(m, n, dtype):
    """A function (x, out) -> bool writing into out (n,) the sum of the m rows of the
    C-contiguous x (m, n) (float32 or float64), added in order on one thread (NumPy's sum
    over the leading axis: the same bits), False when an array is not C-contiguous; None
    without the kernels or for another dtype."""
    addrs = entries()
    if addrs is None or dtype not in (np.float32, np.float64) or not (m and n):
        return None
    call = kernels.caller()
    address = addrs["ft_sum_rows_f32" if dtype == np.float32 else "ft_sum_rows_f64"]
    dims = np.array((m,), np.int64)

    def total(x, out):
        return call(address, n, 1, x, out, dims)
    return total


def adam_steps():
    """A function of items (param, exp_avg, exp_avg_sq, grad, scalars, maximize, l2) making
    the Adam/AdamW update of each in place (conv.cpp's adam_steps: the bits of the facade's
    eager steps), all in one native call (per dtype, up to ADAM_CALL items a call), and
    returning which it made: those of C-contiguous float32 or float64 arrays of one dtype
    and shape, none overlapping another; scalars = (decay, weight_decay, 1 - beta1, beta2,
    1 - beta2, sqrt(1 - beta2^t), eps, -step_size). None without the kernels."""
    addrs = entries()
    if addrs is None:
        return None
    call = kernels.caller()
    address = {np.dtype(np.float32): addrs["ft_adam_steps_f32"],
               np.dtype(np.float64): addrs["ft_adam_steps_f64"]}

    def overlap(a, b):      # arrays that allocated their memory overlap only when one
        return a is b if a.flags.owndata and b.flags.owndata else np.may_share_memory(a, b)

    def takes(param, exp_avg, exp_avg_sq, grad):
        dtype, shape = param.dtype, param.shape
        for a in (param, exp_avg, exp_avg_sq, grad):
            if type(a) is not np.ndarray or a.dtype != dtype or a.shape != shape \
                    or not a.flags.c_contiguous:
                return False
        return dtype in address and not (
            overlap(param, exp_avg) or overlap(param, exp_avg_sq) or overlap(param, grad)
            or overlap(exp_avg, exp_avg_sq) or overlap(exp_avg, grad)
            or overlap(exp_avg_sq, grad))

    def update(items):
        done = [takes(*it[:4]) for it in items]
        for dtype, entry in address.items():
            mine = [it for it, ok in zip(items, done) if ok and it[0].dtype == dtype]
            for c in range(0, len(mine), ADAM_CALL):
                part = mine[c:c + ADAM_CALL]
                sizes = np.array([it[0].size for it in part], np.int64)
                scalars = np.array([it[4] for it in part], dtype)
                flags = np.array([(it[5], it[6]) for it in part], np.int64)
                arrays = [a for it in part for a in it[:4]]
                if not call(entry, len(part), 1, sizes, scalars, flags, *arrays):
                    raise RuntimeError("adam_steps: the native call refused arrays that passed "
                                       "its checks (C-contiguous numpy.ndarray)")
        return done
    return update
