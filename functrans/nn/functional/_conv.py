"""ft.nn.functional's convolution (the conv_general_dilated primitive), pooling (im2col by
strided slices) and pad."""
from __future__ import annotations

import numpy as np

from ... import lax
from ...numpy import raw as fnp
from ...primitives.pool import window_argmax, window_gather
from ...facade.inplace import _cname, _tname
from ._dispatch import _call, _ndim, _shape, _squeeze0, _unsqueeze0


# ---------------------------------------------------------------------------
# convolution (one primitive) and pooling (im2col by strided slices)


def _pair(v, name="kernel_size"):
    if isinstance(v, int):
        return (v, v)
    v = tuple(int(a) for a in v)
    if len(v) == 1:
        return (v[0], v[0])
    if len(v) != 2:
        raise ValueError(f"{name} must be an int or a pair of ints, got {v}")
    return v


def _windows(x, kh, kw, stride, dilation, oh, ow):
    """(N, C, kh*kw, oh, ow): every kernel offset's strided view of a padded (N, C, H, W)."""
    sh, sw = stride
    dh, dw = dilation
    cols = []
    for i in range(kh):
        for j in range(kw):
            cols.append(x[:, :, i * dh: i * dh + sh * (oh - 1) + 1: sh,
                          j * dw: j * dw + sw * (ow - 1) + 1: sw])
    return fnp.stack(cols, axis=2)


def _conv_fn(x, w, *b, stride, pads, dilation, groups):
    """conv1d/2d/3d as one op: the conv_general_dilated primitive (N, C, ...) * (O, C/groups,
    ...), then the bias."""
    out = lax.conv_general_dilated(x, w, stride, pads, rhs_dilation=dilation,
                                   feature_group_count=groups)
    if b:
        out = out + fnp.reshape(b[0], (1, -1) + (1,) * len(stride))
    return out


def _triple(v, name="kernel_size"):
    if isinstance(v, int):
        return (v, v, v)
    v = tuple(int(a) for a in v)
    if len(v) == 1:
        return v * 3
    if len(v) != 3:
        raise ValueError(f"{name} must be an int or a triple of ints, got {v}")
    return v


def _conv_pads(padding, kernel, dilation, stride, tuple_of):
    """(lo, hi) per spatial dim from an int, a tuple (read by tuple_of), 'valid' or 'same'."""
    if isinstance(padding, str):
        if padding == "valid":
            return ((0, 0),) * len(kernel)
        if padding == "same":
            if any(s != 1 for s in stride):  # (the layers' constructors raise ValueError)
                raise RuntimeError("padding='same' is not supported for strided convolutions")
            pads = []
            for k, d in zip(kernel, dilation):
                total = d * (k - 1)
                pads.append((total // 2, total - total // 2))
            return tuple(pads)
        raise ValueError(f"Invalid padding string '{padding}', should be one of "
                         "{'valid', 'same'}")
    return tuple((p, p) for p in tuple_of(padding, "padding"))


def _check_conv_dtypes(input, weight, bias):
    """torch's errors for a weight or a bias of another dtype than the input's."""
    di, dw = np.dtype(input.dtype), np.dtype(weight.dtype)
    if di != dw:
        raise RuntimeError(f"expected scalar type {_tname(di)} but found {_tname(dw)}")
    if bias is not None and np.dtype(bias.dtype) != di:
        raise RuntimeError(f"Input type ({_cname(di)}) and bias type "
                           f"({_cname(np.dtype(bias.dtype))}) should be the same")


def _check_conv(si, sw, stride, padding, dilation, groups, tuple_of):
    """torch's checks of a batched convolution's shapes; returns the padding pairs."""
    o, cg, ks = sw[0], sw[1], sw[2:]
    c = si[1]
    if c != cg * groups:
        raise RuntimeError(f"Given groups={groups}, weight of size {list(sw)}, "
                           f"expected input{list(si)} to have {cg * groups} channels, "
                           f"but got {c} channels instead")
    if o % groups:
        raise RuntimeError("out_channels must be divisible by groups")
    pads = _conv_pads(padding, ks, dilation, stride, tuple_of)
    padded = [n + lo + hi for n, (lo, hi) in zip(si[2:], pads)]
    spans = [d * (k - 1) + 1 for k, d in zip(ks, dilation)]
    if any(p < k for p, k in zip(padded, spans)):
        raise RuntimeError(f"Calculated padded input size per channel: "
                           f"({' x '.join(map(str, padded))}). Kernel size: "
                           f"({' x '.join(map(str, spans))}). Kernel size can't be greater "
                           "than actual input size")
    return pads


def _single(v, name):
    """An int from an int or a 1-tuple (conv1d's arguments)."""
    if isinstance(v, (tuple, list)):
        if len(v) != 1:
            raise RuntimeError(f"expected {name} to be a single integer value or a list of 1 "
                               f"values to match the convolution dimensions, but got {name}={v}")
        return int(v[0])
    return int(v)


def _one(v, name):
    return (_single(v, name),)


def _conv(name, nsp, tuple_of, input, weight, bias, stride, padding, dilation, groups):
    """conv1d/2d/3d: torch's checks, then one ConvolutionBackward0 op over the
    conv_general_dilated primitive (an unbatched input gets a batch of one around it)."""
    nd = _ndim(input)
    if nd not in (nsp + 1, nsp + 2):
        raise RuntimeError(f"Expected {nsp + 1}D (unbatched) or {nsp + 2}D (batched) input to "
                           f"{name}, but got input of size: {list(_shape(input))}")
    if nsp == 1 and _ndim(weight) != 3:
        raise RuntimeError(f"conv1d: weight must be 3-D (out_channels, in_channels/groups, "
                           f"kernel), got size {list(_shape(weight))}")
    unbatched = nd == nsp + 1
    if unbatched:
        input = _unsqueeze0(input)
    stride, dilation = tuple_of(stride, "stride"), tuple_of(dilation, "dilation")
    _check_conv_dtypes(input, weight, bias)
    pads = _check_conv(_shape(input), _shape(weight), stride, padding, dilation, groups,
                       tuple_of)
    args = (input, weight) if bias is None else (input, weight, bias)
    out = _call("ConvolutionBackward0", _conv_fn, args, stride=stride, pads=pads,
                dilation=dilation, groups=int(groups))
    return _squeeze0(out) if unbatched else out


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-D cross-correlation of (N, C, L) (or (C, L)) with weight (O, C/groups, k)."""
    return _conv("conv1d", 1, _one, input, weight, bias, stride, padding, dilation, groups)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D cross-correlation of (N, C, H, W) (or (C, H, W)) with weight (O, C/groups, kh, kw)."""
    return _conv("conv2d", 2, _pair, input, weight, bias, stride, padding, dilation, groups)


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """3-D cross-correlation of (N, C, D, H, W) (or unbatched) with weight
    (O, C/groups, kd, kh, kw)."""
    return _conv("conv3d", 3, _triple, input, weight, bias, stride, padding, dilation, groups)


def _pool_geometry(h, k, s, p, d, ceil_mode):
    """Output size and extra right padding of one pooled dimension (torch's rule)."""
    span = h + 2 * p - d * (k - 1) - 1
    if ceil_mode:
        out = -(-span // s) + 1
        if (out - 1) * s >= h + p:
            out -= 1
    else:
        out = span // s + 1
    extra = max(0, (out - 1) * s + d * (k - 1) + 1 - (h + 2 * p))
    return out, extra


def _unbatched(fn):
    """fn of a batched (N, C, H, W) x also taking an unbatched (C, H, W) one (unbatched=True)
    inside the same op, as torch's pooling kernels do (one grad_fn, no SqueezeBackward)."""
    def run(x, *args, unbatched, **static):
        if not unbatched:
            return fn(x, *args, **static)
        out = fn(fnp.expand_dims(x, 0), *args, **static)
        return tuple(fnp.squeeze(o, 0) for o in out) if isinstance(out, tuple) else \
            fnp.squeeze(out, 0)
    run.__name__ = fn.__name__
    return run


def _pool_windows(x, kernel, stride, dilation, oh, ow):
    """(N, C, kh*kw, oh, ow) windows of a padded (N, C, H, W): for non-overlapping windows
    (stride == kernel, no dilation) one reshape and transpose, whose transpose in a backward
    pass is one copy; else the strided slices of _windows."""
    kh, kw = kernel
    if tuple(stride) != tuple(kernel) or tuple(dilation) != (1, 1):
        return _windows(x, kh, kw, stride, dilation, oh, ow)
    n, c = x.shape[0], x.shape[1]
    if x.shape[2] != oh * kh or x.shape[3] != ow * kw:
        x = x[:, :, :oh * kh, :ow * kw]
    x = fnp.transpose(fnp.reshape(x, (n, c, oh, kh, ow, kw)), (0, 1, 3, 5, 2, 4))
    return fnp.reshape(x, (n, c, kh * kw, oh, ow))


def _max_pool2d_fn(x, *, kernel, stride, padding, dilation, geometry, with_indices):
    kw = kernel[1]
    (oh, eh), (ow, ew_) = geometry
    ph, pw = padding
    w = x.shape[3]
    if ph or pw or eh or ew_:
        x = fnp.pad(x, ((0, 0), (0, 0), (ph, ph + eh), (pw, pw + ew_)),
                    constant_values=-np.inf)
    # the first maximum of each window, as torch (a NaN is the maximum), by its offset in
    # the window: one pass over the windows, one read per output, and a backward that
    # writes each cotangent to its element (primitives/pool.py)
    geo = dict(window=tuple(kernel), strides=tuple(stride), dilation=tuple(dilation))
    idx = window_argmax(x, **geo)       # (n, c, oh, ow): the geometry's padding fits them
    out = window_gather(x, idx, **geo)
    if not with_indices:
        return out
    ki, kj = idx // kw, idx % kw
    rows = fnp.reshape(fnp.arange(oh) * stride[0], (1, 1, oh, 1)) - ph + ki * dilation[0]
    cols = fnp.reshape(fnp.arange(ow) * stride[1], (1, 1, 1, ow)) - pw + kj * dilation[1]
    return out, fnp.astype(rows * w + cols, np.int64)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """Max over kh x kw windows of (N, C, H, W) (or (C, H, W)); ties go to the first element."""
    unbatched = _ndim(input) == 3
    kernel = _pair(kernel_size)
    stride = kernel if stride is None or (not isinstance(stride, int) and len(stride) == 0) \
        else _pair(stride, "stride")
    padding, dilation = _pair(padding, "padding"), _pair(dilation, "dilation")
    if padding[0] > kernel[0] // 2 or padding[1] > kernel[1] // 2:
        raise RuntimeError("pad should be at most half of effective kernel size, but got "
                           f"pad={padding[0]}, kernel_size={kernel[0]} and dilation={dilation[0]}")
    c, h, w = _shape(input)[-3:]
    geometry = (_pool_geometry(h, kernel[0], stride[0], padding[0], dilation[0], ceil_mode),
                _pool_geometry(w, kernel[1], stride[1], padding[1], dilation[1], ceil_mode))
    if geometry[0][0] <= 0 or geometry[1][0] <= 0:
        raise RuntimeError(f"Given input size: ({c}x{h}x{w}). Calculated output "
                           f"size: ({c}x{geometry[0][0]}x{geometry[1][0]}). "
                           "Output size is too small")
    return _call("MaxPool2DWithIndicesBackward0", _MAX_POOL, (input,), kernel=kernel,
                 stride=stride, padding=padding, dilation=dilation, geometry=geometry,
                 with_indices=bool(return_indices), unbatched=unbatched)


def _avg_pool2d_fn(x, *, kernel, stride, padding, geometry, count_include_pad, divisor):
    kh, kw = kernel
    (oh, eh), (ow, ew_) = geometry
    ph, pw = padding
    h, w = x.shape[2], x.shape[3]
    if ph or pw or eh or ew_:
        x = fnp.pad(x, ((0, 0), (0, 0), (ph, ph + eh), (pw, pw + ew_)))
    total = fnp.sum(_pool_windows(x, kernel, stride, (1, 1), oh, ow), axis=2)
    if divisor:
        return _divide(total, divisor)
    # the divisor counts the window's elements inside the input (and, with count_include_pad,
    # inside the zero padding), never the extra right padding of ceil_mode
    if count_include_pad:
        inside = np.pad(np.ones((1, 1, h + 2 * ph, w + 2 * pw), x.dtype),
                        ((0, 0), (0, 0), (0, eh), (0, ew_)))
    else:
        inside = np.pad(np.ones((1, 1, h, w), x.dtype),
                        ((0, 0), (0, 0), (ph, ph + eh), (pw, pw + ew_)))
    count = np.add.reduce(np.stack(
        [inside[:, :, i: i + stride[0] * (oh - 1) + 1: stride[0],
                j: j + stride[1] * (ow - 1) + 1: stride[1]]
         for i in range(kh) for j in range(kw)], axis=2), axis=2)
    return _divide(total, count)


def _divide(total, count):
    """total / count; for an integer input torch's integer average, truncated toward zero."""
    if np.dtype(total.dtype).kind not in "iu":
        return total / count
    count = np.asarray(count).astype(total.dtype)
    q = fnp.abs(total) // count
    return fnp.where(total < 0, -q, q)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """Mean over kh x kw windows (padding counted unless count_include_pad=False)."""
    unbatched = _ndim(input) == 3
    kernel = _pair(kernel_size)
    stride = kernel if stride is None or (not isinstance(stride, int) and len(stride) == 0) \
        else _pair(stride, "stride")
    padding = _pair(padding, "padding")
    if padding[0] > kernel[0] // 2 or padding[1] > kernel[1] // 2:
        raise RuntimeError("pad should be at most half of effective kernel size, but got "
                           f"pad={padding[0]}, kernel_size={kernel[0]} and dilation=1")
    h, w = _shape(input)[-2:]
    geometry = (_pool_geometry(h, kernel[0], stride[0], padding[0], 1, ceil_mode),
                _pool_geometry(w, kernel[1], stride[1], padding[1], 1, ceil_mode))
    return _call("AvgPool2DBackward0", _AVG_POOL, (input,), kernel=kernel, stride=stride,
                 padding=padding, geometry=geometry, count_include_pad=bool(count_include_pad),
                 divisor=divisor_override, unbatched=unbatched)


def _adaptive_avg_fn(x, *, out_size):
    h, w = x.shape[2], x.shape[3]
    oh, ow = out_size
    rows = []
    for i in range(oh):
        h0, h1 = (i * h) // oh, -((-(i + 1) * h) // oh)
        cols = []
        for j in range(ow):
            w0, w1 = (j * w) // ow, -((-(j + 1) * w) // ow)
            cols.append(fnp.mean(x[:, :, h0:h1, w0:w1], axis=(2, 3)))
        rows.append(fnp.stack(cols, axis=-1))
    return fnp.stack(rows, axis=-2)


def adaptive_avg_pool2d(input, output_size):
    """Mean over the adaptive windows [floor(i H / oh), ceil((i+1) H / oh)) of each output cell.
    (An output of 1 x 1 is torch's mean over the last two dims: MeanBackward1.)"""
    unbatched = _ndim(input) == 3
    h, w = _shape(input)[-2:]
    if not isinstance(output_size, int) and len(output_size) != 2:
        raise RuntimeError("adaptive_avg_pool2d: output_size must be 2")
    oh, ow = (output_size, output_size) if isinstance(output_size, int) else tuple(output_size)
    oh, ow = (h if oh is None else oh), (w if ow is None else ow)
    name = "MeanBackward1" if (oh, ow) == (1, 1) else "AdaptiveAvgPool2DBackward0"
    dt = np.dtype(input.dtype)
    if dt.kind not in "fc":
        if (oh, ow) == (1, 1):
            raise RuntimeError("mean(): could not infer output dtype. Input dtype must be either "
                               f"a floating point or complex dtype. Got: {_tname(dt)}")
        raise NotImplementedError(f'"adaptive_avg_pool2d" not implemented for \'{_tname(dt)}\'')
    return _call(name, _ADAPTIVE_AVG, (input,), out_size=(oh, ow), unbatched=unbatched)


_MAX_POOL = _unbatched(_max_pool2d_fn)
_AVG_POOL = _unbatched(_avg_pool2d_fn)
_ADAPTIVE_AVG = _unbatched(_adaptive_avg_fn)


def _pad_fn(x, *, widths, value, mode):
    """x padded by widths ((lo, hi) per dim; a negative width crops): a constant, or the
    indices of the reflected, replicated or wrapped-around elements taken along each dim."""
    if mode == "constant":
        crop = tuple(slice(-lo if lo < 0 else 0, n + hi if hi < 0 else n)
                     for (lo, hi), n in zip(widths, x.shape))
        if any(lo < 0 or hi < 0 for lo, hi in widths):
            x = x[crop]
        grow = tuple((max(lo, 0), max(hi, 0)) for lo, hi in widths)
        return fnp.pad(x, grow, constant_values=value) if any(map(any, grow)) else x
    for d, ((lo, hi), n) in enumerate(zip(widths, x.shape)):
        if lo or hi:
            x = fnp.take(x, _pad_indices(n, lo, hi, mode), axis=d)
    return x


def _pad_indices(n, lo, hi, mode):
    """Which input element each position of a dim of n padded by (lo, hi) reads."""
    if mode == "circular":          # a negative width crops first; the rest wraps the crop
        start, m = max(-lo, 0), n + min(lo, 0) + min(hi, 0)
        return start + np.arange(-max(lo, 0), m + max(hi, 0)) % m
    i = np.arange(-lo, n + hi)
    if mode == "replicate":
        return np.clip(i, 0, n - 1)
    i = np.abs(i)                                        # reflect: mirrored at 0 and n - 1
    return np.where(i > n - 1, 2 * (n - 1) - i, i)


# torch's grad_fn of each padding mode; the number is the count of padded dims
_PAD_NAMES = {"reflect": "ReflectionPad{}DBackward0", "replicate": "ReplicationPad{}DBackward0",
              "circular": "torch::autograd::CopySlices"}


def pad(input, pad, mode="constant", value=None):
    """Pad the last len(pad)//2 dims: pad = (last_lo, last_hi, prev_lo, prev_hi, ...); a
    negative width crops. mode: 'constant' (with value, default 0), 'reflect' (mirrored
    without repeating the edge), 'replicate' (the edge repeated) or 'circular' (wrapped
    around); the last three pad 1 to 3 trailing dims of a batched or unbatched input, as
    torch's."""
    if mode not in ("constant", "reflect", "replicate", "circular"):
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    if len(pad) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    nd, shape = _ndim(input), _shape(input)
    if len(pad) // 2 > nd:
        raise RuntimeError("Padding length should be less than or equal to two times the input "
                           "dimension")
    k = len(pad) // 2
    if mode != "constant":
        if value is not None and value != 0:
            raise RuntimeError(f'Padding mode "{mode}" doesn\'t take in value argument')
        if not 1 <= k <= 3 or nd not in (k + 1, k + 2):
            raise NotImplementedError(
                f"Padding size {len(pad)} is not supported for {nd}D input tensor.\n"
                "Supported combinations for non-constant padding:\n"
                "  - 2D or 3D input: padding size = 2 (pads last dimension)\n"
                "  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n"
                "  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)")
    widths = [(0, 0)] * nd
    for i in range(k):
        lo, hi = int(pad[2 * i]), int(pad[2 * i + 1])
        d, n = nd - 1 - i, shape[nd - 1 - i]
        if n + lo + hi < 0 or (mode == "constant" and (-lo > n or -hi > n)):
            raise RuntimeError("narrow(): length must be non-negative.")
        if mode == "reflect" and (lo >= n or hi >= n):
            raise RuntimeError(f"Argument #4: Padding size should be less than the corresponding "
                               f"input dimension, but got: padding ({pad[2 * i]}, "
                               f"{pad[2 * i + 1]}) at dimension {d} of input {list(shape)}")
        if mode == "circular" and (lo > n or hi > n):
            raise RuntimeError("Padding value causes wrapping around more than once.")
        widths[d] = (lo, hi)
    name = "ConstantPadNdBackward0" if mode == "constant" else _PAD_NAMES[mode].format(k)
    return _call(name, _pad_fn, (input,), widths=tuple(widths),
                 value=0.0 if value is None else float(value), mode=mode)
