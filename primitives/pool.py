"""Max pooling's primitives: where each window's first maximum is (window_argmax), and the
linear pair that reads one element per window there (window_gather) or adds one value per
window back there (window_scatter), each the other's transpose.

The windows are over the last two axes of x (..., H, W): window (i, j) holds the elements
x[..., i*sh + a*dh, j*sw + b*dw] for a < kh, b < kw, at offset a*kw + b (an int32), for
(OH, OW) = ((H - (kh-1)*dh - 1) // sh + 1, (W - (kw-1)*dw - 1) // sw + 1) windows; the
caller pads x (with -inf for a maximum) so that every window it wants lies inside. Leading
axes are independent planes. An offset outside the window (not one window_argmax gives)
stands for offset 0 in both gather and scatter, which keeps them each other's transpose.

max_pool2d is window_gather(x, window_argmax(x)): a pass over the windows and a pass over
the outputs, and a backward that writes each cotangent to its element, where the
formulation by comparisons (the windows copied out, compared with their maximum, the least
matching offset, a one-hot select and sum, and the transposes of all of it) makes about ten
passes over the windows each way. NaN is the maximum of a window holding one (the first
NaN), as in torch; ties go to the first offset.

The implementations below are a few passes over strided slices (one per window offset), for
any array module; float32 arrays on the CPU run NATIVE_POOL's kernels instead when the
native backend has installed them (backends/native/conv.cpp: one pass, threads over
planes, each output written by one thread in a fixed order: the same bits for any thread
count)."""
from __future__ import annotations

import numpy as np

from functrans.core import DTypeError, ShapedArray, ShapeError, UndefinedPrimal
from .base import FLOAT, NONCOMPLEX, aval_of, broadcast_batched, defprim, moveaxis


class NativePool:
    """The native kernels of the three primitives (installed by backends/cpu.py):
    run(name, *arrays, window, strides, dilation, in_shape) -> array or None (None: the
    NumPy implementation runs: no compiler, cpu_backend="numpy", a dtype it lacks)."""

    run = None


NATIVE_POOL = NativePool()


def _out_size(n, k, s, d):
    return (n - (k - 1) * d - 1) // s + 1


def _check_window(window, strides, dilation):
    for name, v in (("window", window), ("strides", strides), ("dilation", dilation)):
        if len(v) != 2 or any(int(e) < 1 for e in v):
            raise ShapeError(f"{name} must be two positive integers, got {v}")


def _argmax_shape(x, *, window, strides, dilation):
    _check_window(window, strides, dilation)
    if x.ndim < 2:
        raise ShapeError(f"needs an operand of rank 2 or more (..., H, W), got {x.str_short()}")
    if x.dtype.kind not in NONCOMPLEX + FLOAT or x.dtype.kind == "b":
        raise DTypeError(f"needs a real numeric operand, got {x.str_short()}")
    oh, ow = (_out_size(n, k, s, d) for n, k, s, d in zip(x.shape[-2:], window, strides,
                                                          dilation))
    if oh < 1 or ow < 1:
        raise ShapeError(f"window {window} (dilation {dilation}) does not fit in the last two "
                         f"axes of {x.str_short()}: pad the operand first")
    return ShapedArray(x.shape[:-2] + (oh, ow), np.dtype(np.int32))


def _check_offsets(idx, lead, window, what):
    if idx.dtype != np.int32:
        raise DTypeError(f"offsets must be int32 (window_argmax's), got {idx.str_short()}")
    if idx.shape[:-2] != lead:
        raise ShapeError(f"offsets {idx.str_short()} and {what} differ in their leading axes")


def _gather_shape(x, idx, *, window, strides, dilation):
    want = _argmax_shape(x, window=window, strides=strides, dilation=dilation)
    _check_offsets(idx, x.shape[:-2], window, f"operand {x.str_short()}")
    if idx.shape != want.shape:
        raise ShapeError(f"offsets {idx.str_short()} do not match the {want.shape[-2:]} "
                         f"windows of {x.str_short()}")
    return ShapedArray(idx.shape, x.dtype, x.weak_type)


def _scatter_shape(g, idx, *, window, strides, dilation, in_shape):
    _check_window(window, strides, dilation)
    if g.shape != idx.shape:
        raise ShapeError(f"values {g.str_short()} and offsets {idx.str_short()} differ in shape")
    _check_offsets(idx, g.shape[:-2], window, f"values {g.str_short()}")
    out = ShapedArray(g.shape[:-2] + tuple(in_shape), g.dtype, g.weak_type)
    if _argmax_shape(out, window=window, strides=strides, dilation=dilation).shape != g.shape:
        raise ShapeError(f"{g.shape[-2:]} windows do not tile an operand of {tuple(in_shape)}")
    return out


# ---------------------------------------------------------------------------
# implementations: one strided slice per window offset (any array module), or the kernels


def _offsets(x_shape, out_hw, window, strides, dilation):
    """(offset, index tuple of its strided slice of x) for each window offset."""
    (oh, ow), (kh, kw), (sh, sw), (dh, dw) = out_hw, window, strides, dilation
    lead = (slice(None),) * (len(x_shape) - 2)
    return [(a * kw + b, lead + (slice(a * dh, a * dh + (oh - 1) * sh + 1, sh),
                                 slice(b * dw, b * dw + (ow - 1) * sw + 1, sw)))
            for a in range(kh) for b in range(kw)]


def _native(name, xp, dtype, *arrays, **params):
    if xp is np and NATIVE_POOL.run is not None and dtype == np.float32:
        return NATIVE_POOL.run(name, *arrays, **params)
    return None


def _argmax_impl(xp, x, *, window, strides, dilation):
    out_hw = tuple(_out_size(n, k, s, d) for n, k, s, d in zip(x.shape[-2:], window, strides,
                                                                dilation))
    got = _native("argmax", xp, x.dtype, x, window=window, strides=strides, dilation=dilation,
                  in_shape=x.shape[-2:])
    if got is not None:
        return got
    slices = _offsets(x.shape, out_hw, window, strides, dilation)
    best = x[slices[0][1]]
    idx = xp.zeros(best.shape, np.int32)
    nan = np.dtype(x.dtype).kind == "f"
    for k, s in slices[1:]:
        v = x[s]
        better = v > best
        if nan:     # the first NaN is the maximum
            better |= xp.isnan(v) & ~xp.isnan(best)
        best = xp.where(better, v, best)
        idx = xp.where(better, np.int32(k), idx)
    return idx


def _gather_impl(xp, x, idx, *, window, strides, dilation):
    got = _native("gather", xp, x.dtype, x, idx, window=window, strides=strides,
                  dilation=dilation, in_shape=x.shape[-2:])
    if got is not None:
        return got
    slices = _offsets(x.shape, idx.shape[-2:], window, strides, dilation)
    out = x[slices[0][1]]
    for k, s in slices[1:]:
        out = xp.where(idx == k, x[s], out)
    return xp.array(out, copy=True)


def _scatter_impl(xp, g, idx, *, window, strides, dilation, in_shape):
    got = _native("scatter", xp, g.dtype, g, idx, window=window, strides=strides,
                  dilation=dilation, in_shape=tuple(in_shape))
    if got is not None:
        return got
    out = xp.zeros(g.shape[:-2] + tuple(in_shape), g.dtype)
    zero = xp.zeros((), g.dtype)
    idx = xp.where((idx < 0) | (idx >= window[0] * window[1]), np.int32(0), idx)
    for k, s in _offsets(out.shape, g.shape[-2:], window, strides, dilation):
        out[s] += xp.where(idx == k, g, zero)     # windows that overlap add, in offset order
    return out


# ---------------------------------------------------------------------------
# batching: the vmapped axis becomes a leading plane axis of every operand


def _front(vals, dims):
    size = next(aval_of(v).shape[d] for v, d in zip(vals, dims) if d is not None)
    return [broadcast_batched(v, size) if d is None else moveaxis(v, d, 0)
            for v, d in zip(vals, dims)]


def _argmax_batch(vals, dims, **params):
    (x,) = _front(vals, dims)
    return window_argmax(x, **params), 0


def _gather_batch(vals, dims, **params):
    return window_gather(*_front(vals, dims), **params), 0


def _scatter_batch(vals, dims, **params):
    return window_scatter(*_front(vals, dims), **params), 0


def _gather_transpose(ct, x, idx, *, window, strides, dilation):
    if type(x) is not UndefinedPrimal:
        return [None, None]
    return [window_scatter(ct, idx, window=window, strides=strides, dilation=dilation,
                           in_shape=x.aval.shape[-2:]), None]


def _scatter_transpose(ct, g, idx, *, window, strides, dilation, in_shape):
    if type(g) is not UndefinedPrimal:
        return [None, None]
    return [window_gather(ct, idx, window=window, strides=strides, dilation=dilation), None]


window_argmax_p = defprim("window_argmax", _argmax_impl, _argmax_shape, differentiable=False,
                          batch=_argmax_batch, fresh=True)
window_gather_p = defprim(
    "window_gather", _gather_impl, _gather_shape,
    jvp=(lambda t, x, idx, **p: window_gather(t, idx, **p), None),
    transpose=_gather_transpose, batch=_gather_batch, fresh=True)
window_scatter_p = defprim(
    "window_scatter", _scatter_impl, _scatter_shape,
    jvp=(lambda t, g, idx, **p: window_scatter(t, idx, **p), None),
    transpose=_scatter_transpose, batch=_scatter_batch, fresh=True)

window_argmax = window_argmax_p.bind
window_gather = window_gather_p.bind
window_scatter = window_scatter_p.bind
