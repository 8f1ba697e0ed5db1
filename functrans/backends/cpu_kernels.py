"""The native kernels primitives call outside generated programs: eager transcendental
calls, convolutions, max pooling's window kernels, few-row products, row scatter-adds,
row sums; and Adam's fused update (`adam_kernel`, asked by optim/adam.py). Each answers
None (or False) under cpu_backend="numpy" or without a working toolchain, and the
primitive's NumPy implementation runs. `install(cfg)` sets the
primitives' hooks (the CPU backend calls it with its CpuConfig: the thread counts)."""
from __future__ import annotations

from .native import conv as native_conv, eager as native_eager
from ..core.config import config
from ..primitives.base import EAGER_KERNELS
from ..primitives.conv import NATIVE_CONV
from ..primitives.indexing import NATIVE_ROWS
from ..primitives.linalg import NATIVE_GEMM
from ..primitives.pool import NATIVE_POOL
from ..primitives.reductions import NATIVE_SUM_ROWS

_CONFIG = [None]        # the CPU backend's CpuConfig (install)


def _threads(size):
    """The threads a native kernel over `size` elements may use (smaller: one)."""
    cfg = _CONFIG[0]
    return cfg.threads if size >= cfg.native_parallel_min_size else 1


def eager_kernel(prim, x):
    """prim(x) by its native kernel (backends/native/eager.py), for the eager calls of the
    primitives declared native_eager, or None (the NumPy implementation runs): under
    cpu_backend="numpy", or without a working toolchain. Installed as EAGER_KERNELS.run."""
    if config.cpu_backend == "numpy":
        return None
    return native_eager.run(prim, x, _threads(x.size))


def conv_kernel(lhs, rhs, padding, lhs_dilation, out_sp, strides, dilation, direct, planar):
    """A float32 2-D convolution by the native direct kernels (backends/native/conv.py), or
    None (the im2col path runs): under cpu_backend="numpy", or without a working toolchain.
    Installed as NATIVE_CONV.run."""
    if config.cpu_backend == "numpy":
        return None
    return native_conv.run(lhs, rhs, padding, lhs_dilation, out_sp, strides, dilation, direct,
                           planar, _threads(lhs.size))


def pool_kernel(name, *arrays, window, strides, dilation, in_shape):
    """Max pooling's window kernels (primitives/pool.py) on float32 arrays natively, or None
    (the NumPy implementation runs): under cpu_backend="numpy", or without a working
    toolchain. Installed as NATIVE_POOL.run."""
    if config.cpu_backend == "numpy":
        return None
    return native_conv.pool(name, *arrays, window=window, strides=strides, dilation=dilation,
                            in_shape=in_shape, threads=_threads(arrays[0].size))


def gemm_kernel(m, k, n):
    """The native few-row float32 product of these shapes (backends/native/conv.py's gemm),
    asked when a product is lowered; None (NumPy's matmul): under cpu_backend="numpy",
    without a working toolchain, or for shapes the kernel does not take. Installed as
    NATIVE_GEMM.kernel (programs are lowered again when cpu_backend changes)."""
    if config.cpu_backend == "numpy":
        return None
    return native_conv.gemm(m, k, n, NATIVE_GEMM.held)


def rows_kernel(out, rows, upd):
    """NATIVE_ROWS.run: a scatter-add of rows natively (False: NumPy adds them)."""
    return config.cpu_backend != "numpy" and native_conv.scatter_add_rows(out, rows, upd)


def sum_rows_kernel(m, n, dtype):
    """NATIVE_SUM_ROWS.kernel: the native sum of m rows of n values, or None (NumPy's)."""
    return None if config.cpu_backend == "numpy" else native_conv.sum_rows(m, n, dtype)


def adam_kernel():
    """Adam's update of a batch of parameters in one native call, one pass each
    (native/conv.py's adam_steps: a function of items (param, exp_avg, exp_avg_sq, grad,
    *args) returning which it made, as facade.inplace.native_updates passes them), or None
    (the optimizer's NumPy steps run): under cpu_backend="numpy" or without a working
    toolchain. Asked once per step."""
    return None if config.cpu_backend == "numpy" else native_conv.adam_steps()


def install(cfg):
    """Set the primitives' native hooks to this module's kernels, threaded per `cfg`."""
    _CONFIG[0] = cfg
    EAGER_KERNELS.run = eager_kernel
    NATIVE_CONV.run = conv_kernel
    NATIVE_POOL.run = pool_kernel
    NATIVE_GEMM.kernel = gemm_kernel
    NATIVE_ROWS.run, NATIVE_SUM_ROWS.kernel = rows_kernel, sum_rows_kernel
