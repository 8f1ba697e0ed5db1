"""conv_general_dilated: XLA's convolution (JAX's semantics), one primitive for every
convolution of the library: ft.lax's, the facade's conv1d/2d/3d and the transposed ones.

dimension_numbers is a ConvDimensionNumbers(lhs_spec, rhs_spec, out_spec): lhs_spec = (batch
axis, feature axis, spatial axes...), rhs_spec = (output-feature axis, input-feature axis,
spatial axes...), out_spec = (batch axis, feature axis, spatial axes...). The lhs is dilated
by lhs_dilation (a transposed convolution) and padded by `padding` ((lo, hi) per spatial
axis, negative crops); the kernel is dilated by rhs_dilation; windows step by
window_strides. feature_group_count G splits the features into G independent convolutions;
batch_group_count B splits the batch into B groups whose outputs are stacked as features
(what the kernel's gradient of a grouped convolution needs).

The derivative rules are convolutions again (the lhs cotangent: the cotangent convolved
with the flipped kernel, lhs-dilated by the strides; the rhs cotangent: the lhs convolved
with the cotangent, batch and feature roles swapped), so the rules are closed under
transposition and grad-of-grad works. vmap folds a batched operand into the batch axis or
into groups.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from functrans.core import DTypeError, ShapedArray, ShapeError, UndefinedPrimal
from .base import NONCOMPLEX, FLOAT, aval_of, defprim
from .shape import reshape, rev, transpose


class ConvDimensionNumbers(NamedTuple):
    """Which axis of the lhs, the rhs and the output holds the batch (output feature for
    the rhs), the feature (input feature) and each spatial dimension, in that order."""
    lhs_spec: tuple
    rhs_spec: tuple
    out_spec: tuple


def _dilate(n, d):
    return 0 if n == 0 else 1 + d * (n - 1)


def _out_spatial(in_sp, k_sp, window_strides, padding, lhs_dilation, rhs_dilation):
    """The output's spatial sizes (0 where the window does not fit)."""
    out = []
    for n, k, s, (lo, hi), ld, rd in zip(in_sp, k_sp, window_strides, padding, lhs_dilation,
                                         rhs_dilation):
        span = _dilate(n, ld) + lo + hi - _dilate(k, rd)
        out.append(0 if span < 0 or k == 0 else span // s + 1)
    return tuple(out)


# ---------------------------------------------------------------------------
# shape rule


def _conv_shape(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
                dimension_numbers, feature_group_count, batch_group_count):
    if lhs.dtype != rhs.dtype:
        raise DTypeError(f"requires arguments to have the same dtypes, got {lhs.dtype}, "
                         f"{rhs.dtype} (lhs {lhs.str_short()}, rhs {rhs.str_short()}); convert "
                         "one with convert_element_type")
    if lhs.dtype.kind not in NONCOMPLEX + FLOAT or lhs.dtype.kind == "b":
        raise DTypeError(f"needs numeric operands, got {lhs.str_short()}")
    if lhs.ndim != rhs.ndim:
        raise ShapeError(f"lhs and rhs must have the same number of dimensions, but got "
                         f"{lhs.shape} and {rhs.shape}")
    lspec, rspec, ospec = dimension_numbers
    nd = lhs.ndim
    for name, spec in (("lhs_spec", lspec), ("rhs_spec", rspec), ("out_spec", ospec)):
        if sorted(spec) != list(range(nd)):
            raise ShapeError(f"dimension_numbers.{name}={spec} is not a permutation of the "
                             f"{nd} axes of {lhs.str_short()} and {rhs.str_short()}")
    nsp = nd - 2
    for name, v in (("window_strides", window_strides), ("padding", padding),
                    ("lhs_dilation", lhs_dilation), ("rhs_dilation", rhs_dilation)):
        if len(v) != nsp:
            raise ShapeError(f"window and {name} must have the same number of dimensions, but "
                             f"got {nsp} and {len(v)}")
    for name, v in (("window_strides", window_strides), ("lhs_dilation", lhs_dilation),
                    ("rhs_dilation", rhs_dilation)):
        if any(s < 1 for s in v):
            raise ShapeError(f"{name} must be positive, got {v}")
    g, b = feature_group_count, batch_group_count
    if g < 1 or b < 1:
        raise ShapeError(f"feature_group_count and batch_group_count must be positive "
                         f"integers, got {g} and {b}")
    if g > 1 and b > 1:
        raise ShapeError(f"At most one of batch_group_count and feature_group_count may be > 1, "
                         f"got batch_group_count={b} and feature_group_count={g}")
    n, c = lhs.shape[lspec[0]], lhs.shape[lspec[1]]
    o, i = rhs.shape[rspec[0]], rhs.shape[rspec[1]]
    if c % g:
        raise ShapeError(f"feature_group_count must divide lhs feature dimension size, but "
                         f"{g} does not divide {c}.")
    if c // g != i:
        raise ShapeError(f"lhs feature dimension size divided by feature_group_count must equal "
                         f"the rhs input feature dimension size, but {c} // {g} != {i}.")
    if o % g:
        raise ShapeError(f"rhs output feature dimension size must be a multiple of "
                         f"feature_group_count, but {o} is not a multiple of {g}.")
    if n % b:
        raise ShapeError(f"batch_group_count must divide lhs batch dimension size, but {b} "
                         f"does not divide {n}.")
    if o % b:
        raise ShapeError(f"rhs output feature dimension size must be a multiple of "
                         f"batch_group_count, but {o} is not a multiple of {b}.")
    in_sp = [lhs.shape[a] for a in lspec[2:]]
    for sz, (lo, hi), ld in zip(in_sp, padding, lhs_dilation):
        if _dilate(sz, ld) + lo + hi < 0:
            raise ShapeError(f"Negative padding is larger than the size of the corresponding "
                             f"dimension: got padding={padding} for lhs spatial sizes {in_sp}")
    out_sp = _out_spatial(in_sp, [rhs.shape[a] for a in rspec[2:]], window_strides, padding,
                          lhs_dilation, rhs_dilation)
    canon = (n // b, o) + out_sp
    shape = [0] * nd
    for k, a in enumerate(ospec):
        shape[a] = canon[k]
    return ShapedArray(tuple(shape), lhs.dtype, lhs.weak_type and rhs.weak_type)


# ---------------------------------------------------------------------------
# implementation: im2col by a strided window view, then GEMMs in blocks


def _pad_dilate(xp, x, padding, lhs_dilation):
    """x (N, *spatial, C) with its spatial axes dilated and padded ((lo, hi), negative
    crops): x itself when there is nothing to do, else one fresh buffer."""
    if all(lo == 0 and hi == 0 for lo, hi in padding) and all(d == 1 for d in lhs_dilation):
        return x
    sizes, dst, src = [], [], []
    for n, (lo, hi), d in zip(x.shape[1:-1], padding, lhs_dilation):
        size = _dilate(n, d) + lo + hi
        first = max(0, -(lo // d) if lo < 0 else 0)        # first input index that lands inside
        last = (size - 1 - lo) // d if size > lo else -1    # last one (floor)
        last = min(last, n - 1)
        sizes.append(size)
        if last < first:
            src.append(slice(0, 0))
            dst.append(slice(0, 0))
        else:
            start = lo + first * d
            src.append(slice(first, last + 1))
            dst.append(slice(start, start + (last - first) * d + 1, d))
    out = xp.zeros((x.shape[0], *sizes, x.shape[-1]), x.dtype)
    out[(slice(None), *dst, slice(None))] = x[(slice(None), *src, slice(None))]
    return out


class NativeConv:
    """Direct convolution kernels for the CPU (backends/native/conv.py). The native backend
    installs `run(lhs, rhs, padding, lhs_dilation, out_sp, strides, dilation, direct,
    planar) -> array or None` (backends/cpu.py, on import); until then, and whenever it
    answers None (no compiler, a failed build, cpu_backend="numpy", a channel count the
    kernels do not take), the im2col path below runs. Asked for float32 2-D convolutions
    without groups."""

    run = None


NATIVE_CONV = NativeConv()


def _native_conv(lhs, rhs, out_sp, window_strides, padding, lhs_dilation, rhs_dilation,
                 dimension_numbers):
    """The convolution by NATIVE_CONV's kernels in out_spec's axis order, or None. Many
    output rows over a short contraction (a forward convolution, an input gradient) take
    the direct kernel, channels-last: the padded lhs (B, Hp, Wp, F) times the kernel
    (KH, KW, F, O). Few outputs over a long contraction (a kernel's gradient, whose "kernel"
    is a cotangent) take the other, which sums over the lhs's features: the lhs as
    (F, H, W, B), the rhs as (F, KH, KW, O), the result (Y, X, B, O). The operands go as
    transposed views: the kernels' library packs them (padded, channels-last) in one copy.
    An NCHW result of the direct kernel is written NCHW (C-contiguous for what reads it)."""
    lspec, rspec, ospec = dimension_numbers
    n, f = lhs.shape[lspec[0]], lhs.shape[lspec[1]]
    direct = n * math.prod(out_sp) >= f * math.prod(rhs.shape[a] for a in rspec[2:])
    first, last = (lspec[0], lspec[1]) if direct else (lspec[1], lspec[0])
    x = np.transpose(lhs, (first,) + lspec[2:] + (last,))
    if any(lo < 0 or hi < 0 for lo, hi in padding):     # crops: NumPy's copy, then no pads
        x, padding, lhs_dilation = _pad_dilate(np, x, padding, lhs_dilation), \
            ((0, 0),) * 2, (1, 1)
    planar = direct and tuple(ospec) == (0, 1, 2, 3)     # an NCHW result, written as such
    if direct:
        w = np.transpose(rhs, rspec[2:] + (rspec[1], rspec[0]))
        canon = (0, 1, 2, 3) if planar else (0, 3, 1, 2)  # (B, O, Y, X) in the result
    else:
        w = np.transpose(rhs, (rspec[1],) + rspec[2:] + (rspec[0],))
        canon = (2, 3, 0, 1)            # ... in the result (Y, X, B, O)
    out = NATIVE_CONV.run(x, w, padding, lhs_dilation, out_sp, window_strides, rhs_dilation,
                          direct, planar)
    if out is None:
        return None
    perm = [0] * 4
    for k, a in enumerate(ospec):
        perm[a] = canon[k]
    return np.transpose(out, perm)


# the column matrix is built and multiplied in blocks of batch entries of about this many
# bytes: a block comes from malloc's heap (below backends/memory.HEAP_MMAP_BYTES, so it is
# reused without page faults, where a whole 40 MB matrix is a fresh mapping each call) and
# is still in cache when the GEMM reads it
_COLS_BYTES = 4 << 20


def _conv_impl(xp, lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
               dimension_numbers, feature_group_count, batch_group_count):
    """Channels-last im2col: the lhs as (N, *spatial, C) (one copy while padding), its
    windows as a strided view (N, *out, *kernel, C), copied once into the (N*out, kernel*C)
    column matrix, times the kernel as (kernel*C, O): the layout whose GEMM runs fastest
    (a tall, thin product; the long axis is never the one BLAS streams the small operand
    along) and whose column copy moves contiguous runs of kernel_w*C. Groups are a batched
    matmul. The result is a view of the (N, *out, O) product in out_spec's axis order.
    A float32 2-D convolution without groups goes to NATIVE_CONV's direct kernels first."""
    lspec, rspec, ospec = dimension_numbers
    nsp = len(lspec) - 2
    g, bg = feature_group_count, batch_group_count
    gt = g * bg
    n = lhs.shape[lspec[0]]
    o, i = rhs.shape[rspec[0]], rhs.shape[rspec[1]]
    ksp = tuple(rhs.shape[a] for a in rspec[2:])
    out_sp = _out_spatial([lhs.shape[a] for a in lspec[2:]], ksp, window_strides, padding,
                          lhs_dilation, rhs_dilation)
    nb, og = n // bg, o // gt
    canon_shape = (nb, o) + out_sp
    out_perm = [0] * (nsp + 2)                # result axis -> axis of the (N, *out, O) product
    canon_axes = (0, nsp + 1) + tuple(range(1, nsp + 1))
    for k, a in enumerate(ospec):
        out_perm[a] = canon_axes[k]
    if 0 in canon_shape or i == 0 or 0 in ksp:
        prod_shape = (nb,) + out_sp + (o,)
        return xp.transpose(xp.zeros(prod_shape, np.result_type(lhs.dtype, rhs.dtype)),
                            out_perm)
    if xp is np and NATIVE_CONV.run is not None and gt == 1 and nsp == 2 and \
            lhs.dtype == np.float32 and rhs.dtype == np.float32:
        out = _native_conv(lhs, rhs, out_sp, window_strides, padding, lhs_dilation,
                           rhs_dilation, dimension_numbers)
        if out is not None:
            return out
    x = _pad_dilate(xp, xp.transpose(lhs, (lspec[0],) + lspec[2:] + (lspec[1],)), padding,
                    lhs_dilation)
    sp = x.shape[1:-1]
    x = x.reshape((bg, nb) + sp + (g, i))
    st = x.strides
    view_shape = (bg, nb) + out_sp + ksp + (g, i)
    view_strides = (st[0], st[1]) + tuple(st[2 + d] * window_strides[d] for d in range(nsp)) \
        + tuple(st[2 + d] * rhs_dilation[d] for d in range(nsp)) + (st[-2], st[-1])
    if xp is np:
        win = np.lib.stride_tricks.as_strided(x, view_shape, view_strides, writeable=False)
    else:
        win = xp.lib.stride_tricks.as_strided(x, view_shape, view_strides)
    rows, kk = math.prod(out_sp), math.prod(ksp) * i
    w = xp.transpose(rhs, (rspec[0],) + rspec[2:] + (rspec[1],)).reshape((gt, og) + ksp + (i,))
    prod = xp.empty((nb * rows, gt, og), np.result_type(lhs.dtype, rhs.dtype))
    gaxis = 2 + 2 * nsp
    order = (0, gaxis) + tuple(range(1, gaxis)) + (gaxis + 1,)   # group axis (bg, g) first

    def product(part, wpart, out=None):
        """The (rows, gt, og) product of a block of windows with a block of the kernel
        (written into out when given)."""
        m = math.prod(part.shape[1:2 + nsp])
        if gt == 1:
            cols = part.reshape(m, -1)
            return xp.matmul(cols, wpart.reshape(og, -1).T,
                             out=None if out is None else out.reshape(m, og))
        cols = xp.transpose(part, order).reshape(gt, m, -1)
        res = xp.moveaxis(xp.matmul(cols, xp.swapaxes(wpart.reshape(gt, og, -1), -1, -2)),
                          0, 1)
        if out is not None:
            out[...] = res
        return res

    per = x.itemsize * gt * nb * rows * kk      # bytes of the whole column matrix
    if xp is not np or per <= _COLS_BYTES:
        product(win, w, prod)
    elif nb * rows >= kk or not nsp:   # many output rows: blocks of batch entries
        step = max(1, nb * _COLS_BYTES // per)
        for n0 in range(0, nb, step):
            product(win[:, n0:n0 + step], w, prod[n0 * rows:(n0 + step) * rows])
    else:   # few rows and a long contraction (a kernel's gradient): blocks of the first
            # kernel axis, accumulated
        k0 = ksp[0]
        step = max(1, k0 * _COLS_BYTES // per)
        at = (slice(None),) * (2 + nsp)
        for a in range(0, k0, step):
            block = at + (slice(a, a + step),)
            res = product(win[block], w[(slice(None), slice(None), slice(a, a + step))],
                          prod if a == 0 else None)
            if a:
                prod += res.reshape(prod.shape)
    return xp.transpose(prod.reshape((nb,) + out_sp + (o,)), out_perm)


# ---------------------------------------------------------------------------
# transpose rules (each a convolution again)


def _split_axis(x, axis, size):
    """x with `axis` split into (size, rest)."""
    shape = list(aval_of(x).shape)
    shape[axis:axis + 1] = [size, shape[axis] // size]
    return reshape(x, new_sizes=tuple(shape))


def _merge_axis(x, src, dst):
    """x with axis `src` merged into axis `dst` (numbered without src) as its major part."""
    shape = aval_of(x).shape
    perm = [a for a in range(len(shape)) if a != src]
    perm.insert(dst, src)
    new = [shape[a] for a in range(len(shape)) if a != src]
    new[dst] *= shape[src]
    if perm != list(range(len(shape))):
        x = transpose(x, permutation=tuple(perm))
    return reshape(x, new_sizes=tuple(new))


def _swap01(spec):
    return (spec[1], spec[0]) + tuple(spec[2:])


def _conv_transpose_lhs(ct, rhs, lhs_aval, *, window_strides, padding, lhs_dilation,
                        rhs_dilation, dimension_numbers, feature_group_count,
                        batch_group_count):
    """d lhs: the cotangent convolved with the spatially flipped kernel (input and output
    features swapped), lhs-dilated by the strides, padded so the window covers each input
    position the forward read."""
    lspec, rspec, ospec = dimension_numbers
    groups = feature_group_count * batch_group_count
    if groups > 1:      # the group axis moves from the kernel's output into its input features
        rhs = _merge_axis(_split_axis(rhs, rspec[0], groups), rspec[0], rspec[1])
    ksp = [aval_of(rhs).shape[a] for a in rspec[2:]]
    in_sp = [lhs_aval.shape[a] for a in lspec[2:]]
    out_sp = [aval_of(ct).shape[a] for a in ospec[2:]]
    pads = []
    for n, k, s, (lo, _), ld, rd, m in zip(in_sp, ksp, window_strides, padding, lhs_dilation,
                                           rhs_dilation, out_sp):
        before = _dilate(k, rd) - lo - 1
        after = _dilate(n, ld) + _dilate(k, rd) - 1 - _dilate(m, s) - before
        pads.append((before, after))
    out = conv_general_dilated(
        ct, rev(rhs, dimensions=tuple(rspec[2:])), window_strides=tuple(lhs_dilation),
        padding=tuple(pads), lhs_dilation=tuple(window_strides),
        rhs_dilation=tuple(rhs_dilation),
        dimension_numbers=ConvDimensionNumbers(ospec, _swap01(rspec), lspec),
        feature_group_count=groups, batch_group_count=1)
    if batch_group_count > 1:   # the groups came from the batch: move them back there
        out = _merge_axis(_split_axis(out, lspec[1], batch_group_count), lspec[1], lspec[0])
    return out


def _conv_transpose_rhs(ct, lhs, rhs_aval, *, window_strides, padding, lhs_dilation,
                        rhs_dilation, dimension_numbers, feature_group_count,
                        batch_group_count):
    """d rhs: the lhs convolved with the cotangent, the batch axis contracted as features
    (feature groups become batch groups and back); strides and kernel dilation swap."""
    lspec, rspec, ospec = dimension_numbers
    lhs_aval = aval_of(lhs)
    in_sp = [lhs_aval.shape[a] for a in lspec[2:]]
    ksp = [rhs_aval.shape[a] for a in rspec[2:]]
    out_sp = [aval_of(ct).shape[a] for a in ospec[2:]]
    pads = []
    for n, k, s, (lo, _), ld, rd, m in zip(in_sp, ksp, window_strides, padding, lhs_dilation,
                                           rhs_dilation, out_sp):
        pads.append((lo, _dilate(m, s) - _dilate(n, ld) + _dilate(k, rd) - lo - 1))
    return conv_general_dilated(
        lhs, ct, window_strides=tuple(rhs_dilation), padding=tuple(pads),
        lhs_dilation=tuple(lhs_dilation), rhs_dilation=tuple(window_strides),
        dimension_numbers=ConvDimensionNumbers(_swap01(lspec), _swap01(ospec), _swap01(rspec)),
        feature_group_count=batch_group_count, batch_group_count=feature_group_count)


def _conv_transpose(ct, lhs, rhs, **params):
    ct_lhs = ct_rhs = None
    if type(lhs) is UndefinedPrimal:
        ct_lhs = _conv_transpose_lhs(ct, rhs, lhs.aval, **params)
    if type(rhs) is UndefinedPrimal:
        ct_rhs = _conv_transpose_rhs(ct, lhs, rhs.aval, **params)
    return [ct_lhs, ct_rhs]


# ---------------------------------------------------------------------------
# batching: the vmapped axis folded into the batch (lhs) or into groups (rhs, both)


def _conv_batch(vals, dims, **params):
    (lhs, rhs), (bl, br) = vals, dims
    lspec, rspec, ospec = params["dimension_numbers"]
    g, bg = params["feature_group_count"], params["batch_group_count"]
    if bl is not None and br is not None:
        size = aval_of(lhs).shape[bl]
        if bg > 1:      # lhs batch groups: the vmapped axis major in the batch axis
            lhs = _merge_axis(lhs, bl, lspec[0])
            params = dict(params, batch_group_count=bg * size)
        else:           # one feature group per vmapped entry (times the existing groups)
            lhs = _merge_axis(lhs, bl, lspec[1])
            params = dict(params, feature_group_count=g * size)
        rhs = _merge_axis(rhs, br, rspec[0])
        out = conv_general_dilated(lhs, rhs, **params)
        return _split_axis(out, ospec[1], size), ospec[1]
    if bl is not None:
        size = aval_of(lhs).shape[bl]
        if bg == 1:
            out = conv_general_dilated(_merge_axis(lhs, bl, lspec[0]), rhs, **params)
            return _split_axis(out, ospec[0], size), ospec[0]
        # batch groups stay outermost in the batch axis: (bg, size, n/bg) -> bg*size*n/bg
        at = lspec[0] + (bl <= lspec[0])
        x = _split_axis(lhs, at, bg)
        x = _merge_axis(x, bl + (bl > lspec[0]), lspec[0] + 1)
        x = _merge_axis(x, lspec[0], lspec[0])
        out = conv_general_dilated(x, rhs, **params)
        return _split_axis(out, ospec[0], size), ospec[0]
    size = aval_of(rhs).shape[br]
    groups = g * bg
    if groups == 1:
        out = conv_general_dilated(lhs, _merge_axis(rhs, br, rspec[0]), **params)
        return _split_axis(out, ospec[1], size), ospec[1]
    # groups stay outermost in the output features: (groups, size, o/groups)
    at = rspec[0] + (br <= rspec[0])
    w = _split_axis(rhs, at, groups)
    w = _merge_axis(w, br + (br > rspec[0]), rspec[0] + 1)
    w = _merge_axis(w, rspec[0], rspec[0])
    out = conv_general_dilated(lhs, w, **params)
    out = _split_axis(out, ospec[1], groups)          # (groups, size*og)
    out = _split_axis(out, ospec[1] + 1, size)        # (groups, size, og)
    out = _merge_axis(out, ospec[1], ospec[1] + 1)    # (size, groups*og)
    return out, ospec[1]


conv_general_dilated_p = defprim(
    "conv_general_dilated", _conv_impl, _conv_shape,
    jvp=(lambda t, x, y, **p: conv_general_dilated(t, y, **p),
         lambda t, x, y, **p: conv_general_dilated(x, t, **p)),
    transpose=_conv_transpose, batch=_conv_batch, fresh=True)

conv_general_dilated = conv_general_dilated_p.bind
