"""ft.nn.functional's resampling and channel operations for image models: interpolate
(nearest, nearest-exact, linear/bilinear/trilinear, area), pixel_shuffle / pixel_unshuffle,
and channel-wise dropout (dropout1d/2d/3d).

Interpolation is separable: along each spatial dim, the source indices and weights are
computed on the host from the sizes (torch's formulas, in the precision torch uses), and
the op is a gather per dim (two gathers and a blend for the linear modes). Its gradient is
the gathers' transposes, a scatter-add, as torch's upsampling backward.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from ...numpy import raw as fnp
from ...facade.tensor import Tensor
from ._activations import _dropout_mask, _mul_fn, _refuse_random_under_trace
from ._conv import adaptive_avg_pool2d
from ._dispatch import _call, _is_raw, _ndim, _shape

_LINEAR = {1: "linear", 2: "bilinear", 3: "trilinear"}
_MODES = ("nearest", "linear", "bilinear", "bicubic", "trilinear", "area", "nearest-exact")
_NAMES = {"nearest": "UpsampleNearest{}DBackward0", "nearest-exact":
          "UpsampleNearestExact{}DBackward0", "linear": "UpsampleLinear1DBackward0",
          "bilinear": "UpsampleBilinear2DBackward0", "trilinear": "UpsampleTrilinear3DBackward0"}


def _source_scale(n_in, n_out, scale, align_corners):
    """torch's area_pixel_compute_scale: in/out, or 1/scale_factor when one was given."""
    if align_corners:
        return (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    return 1.0 / scale if scale is not None and scale > 0 else n_in / n_out


def _nearest_index(n_in, n_out, scale, exact):
    s = np.float32(1.0 / scale if scale is not None and scale > 0 else n_in / n_out)
    dst = np.arange(n_out, dtype=np.float32)
    src = np.floor((dst + np.float32(0.5)) * s if exact else dst * s).astype(np.int64)
    return np.minimum(src, n_in - 1)


def _linear_weights(n_in, n_out, scale, align_corners, dtype):
    """(i0, i1, w1): output j reads (1 - w1[j]) * x[i0[j]] + w1[j] * x[i1[j]]."""
    s = _source_scale(n_in, n_out, scale, align_corners)
    dst = np.arange(n_out, dtype=np.float64)
    src = dst * s if align_corners else np.maximum((dst + 0.5) * s - 0.5, 0.0)
    i0 = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    i1 = np.minimum(i0 + 1, n_in - 1)
    return i0, i1, (src - i0).astype(dtype)


def _interp_fn(x, *, plan):
    """x resampled along each spatial dim by its plan: ("nearest", index) or
    ("linear", i0, i1, w1)."""
    for k, step in enumerate(plan):
        axis = 2 + k
        if step is None:
            continue
        if step[0] == "nearest":
            x = fnp.take(x, np.asarray(step[1]), axis=axis)
            continue
        _, i0, i1, w1 = step
        shape = [1] * fnp.ndim(x)
        shape[axis] = len(w1)
        w = np.asarray(w1, dtype=x.dtype).reshape(shape)
        x = fnp.take(x, np.asarray(i0), axis=axis) * (1 - w) + \
            fnp.take(x, np.asarray(i1), axis=axis) * w
    return x


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """Resize (N, C, d1[, d2[, d3]]) to `size` or by `scale_factor` (output d = floor(d *
    scale)). mode: 'nearest' (index floor(j * in/out)), 'nearest-exact', 'linear' (3-D),
    'bilinear' (4-D), 'trilinear' (5-D), with align_corners (default False: half-pixel
    centres), or 'area' (adaptive average pooling, 4-D)."""
    nd = _ndim(input)
    spatial = nd - 2
    if mode not in _MODES:
        raise NotImplementedError(
            f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {nd}D) for the modes: "
            "nearest | linear | bilinear | bicubic | trilinear | lanczos | area | nearest-exact "
            f"(got {mode})")
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError("align_corners option can only be set with the interpolating "
                             "modes: linear | bilinear | bicubic | trilinear")
    elif align_corners is None:
        align_corners = False
    if antialias:
        raise NotImplementedError("interpolate: antialias=True is not supported by functrans; "
                                  "resize without it, or blur first (F.avg_pool2d)")
    shape = _shape(input)[2:]
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    if size is None and scale_factor is None:
        raise ValueError("either size or scale_factor should be defined")
    if size is not None:
        out = [int(size)] * spatial if isinstance(size, int) else [int(s) for s in size]
        if len(out) != spatial:
            raise ValueError(
                f"Input and output must have the same number of spatial dimensions, but got "
                f"input with spatial dimensions of {list(shape)} and output size of "
                f"{tuple(size)}. Please provide input tensor in (N, C, d1, d2, ...,dK) format "
                "and output size in (o1, o2, ...,oK) format.")
        scales = [None] * spatial
    else:
        scales = [float(scale_factor)] * spatial if not isinstance(
            scale_factor, (tuple, list)) else [float(s) for s in scale_factor]
        if len(scales) != spatial:
            raise ValueError(
                f"Input and scale_factor must have the same number of spatial dimensions, but "
                f"got input with spatial dimensions of {list(shape)} and scale_factor of shape "
                f"{tuple(scale_factor)}. Please provide input tensor in (N, C, d1, d2, ...,dK) "
                "format and scale_factor in (s1, s2, ...,sK) format.")
        out = [int(math.floor(n * s)) for n, s in zip(shape, scales)]
        if recompute_scale_factor:
            scales = [None] * spatial
    if mode == "area":
        if spatial != 2:
            raise NotImplementedError(f"interpolate: mode 'area' supports 4-D input in "
                                      f"functrans (got {nd}D)")
        return adaptive_avg_pool2d(input, tuple(out))
    if mode == "bicubic":
        raise NotImplementedError("interpolate: mode 'bicubic' is not supported by functrans; "
                                  "use 'bilinear'")
    if mode in ("linear", "bilinear", "trilinear") and _LINEAR.get(spatial) != mode:
        raise NotImplementedError(f"Got {nd}D input, but {mode} mode needs "
                                  f"{ {'linear': 3, 'bilinear': 4, 'trilinear': 5}[mode]}D input")
    if spatial not in (1, 2, 3):
        raise NotImplementedError(f"Input Error: Only 3D, 4D and 5D input Tensors supported (got "
                                  f"{nd}D) for the modes: nearest | linear | bilinear | bicubic "
                                  f"| trilinear | lanczos | area | nearest-exact (got {mode})")
    dtype = np.dtype(input.dtype)
    plan = []
    for n_in, n_out, s in zip(shape, out, scales):
        if mode.startswith("nearest"):
            idx = _nearest_index(n_in, n_out, s, mode == "nearest-exact")
            plan.append(None if n_in == n_out and np.array_equal(idx, np.arange(n_in))
                        else ("nearest", tuple(idx.tolist())))
        else:
            i0, i1, w1 = _linear_weights(n_in, n_out, s, align_corners, dtype)
            plan.append(("linear", tuple(i0.tolist()), tuple(i1.tolist()),
                         tuple(w1.tolist())))
    name = _NAMES[mode].format(spatial)
    return _call(name, _interp_fn, (input,), plan=tuple(plan))


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """Deprecated alias of interpolate (torch warns the same way)."""
    warnings.warn("nn.functional.upsample is deprecated. Use nn.functional.interpolate "
                  "instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode, align_corners)


# ---------------------------------------------------------------------------
# pixel shuffle


def _shuffle_fn(x, *, r, inverse):
    lead = tuple(x.shape[:-3])
    c, h, w = x.shape[-3:]
    k = len(lead)
    if not inverse:                    # (*, C r², H, W) -> (*, C, H r, W r)
        x = fnp.reshape(x, lead + (c // (r * r), r, r, h, w))
        x = fnp.transpose(x, tuple(range(k)) + (k, k + 3, k + 1, k + 4, k + 2))
        return fnp.reshape(x, lead + (c // (r * r), h * r, w * r))
    x = fnp.reshape(x, lead + (c, h // r, r, w // r, r))
    x = fnp.transpose(x, tuple(range(k)) + (k, k + 2, k + 4, k + 1, k + 3))
    return fnp.reshape(x, lead + (c * r * r, h // r, w // r))


def pixel_shuffle(input, upscale_factor):
    """(*, C·r², H, W) -> (*, C, H·r, W·r): each group of r² channels becomes an r x r
    block of pixels (sub-pixel convolution's upsampling)."""
    r = int(upscale_factor)
    shape = _shape(input)
    if len(shape) < 3:
        raise RuntimeError(f"pixel_shuffle expects input to have at least 3 dimensions, but got "
                           f"input with {len(shape)} dimension(s)")
    if r <= 0:
        raise RuntimeError(f"pixel_shuffle expects a positive upscale_factor, but got {r}")
    if shape[-3] % (r * r):
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be "
                           f"divisible by the square of upscale_factor, but input.size(-3)="
                           f"{shape[-3]} is not divisible by {r * r}")
    return _call("PixelShuffleBackward0", _shuffle_fn, (input,), r=r, inverse=False)


def pixel_unshuffle(input, downscale_factor):
    """(*, C, H·r, W·r) -> (*, C·r², H, W): the inverse of pixel_shuffle."""
    r = int(downscale_factor)
    shape = _shape(input)
    if len(shape) < 3:
        raise RuntimeError(f"pixel_unshuffle expects input to have at least 3 dimensions, but "
                           f"got input with {len(shape)} dimension(s)")
    if r <= 0:
        raise RuntimeError(f"pixel_unshuffle expects a positive downscale_factor, but got {r}")
    for what, n in (("height", shape[-2]), ("width", shape[-1])):
        if n % r:
            raise RuntimeError(f"pixel_unshuffle expects {what} to be divisible by "
                               f"downscale_factor, but input.size({-2 if what == 'height' else -1})"
                               f"={n} is not divisible by {r}")
    return _call("PixelUnshuffleBackward0", _shuffle_fn, (input,), r=r, inverse=True)


# ---------------------------------------------------------------------------
# channel-wise dropout


def _channel_dropout(input, p, training, inplace, spatial, name):
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    nd = _ndim(input)
    if nd not in (spatial + 1, spatial + 2):
        raise RuntimeError(f"{name}: Expected {spatial + 1}D or {spatial + 2}D input, but "
                           f"received a {nd}D input. Note that {name} exists to provide "
                           f"channel-wise dropout on inputs with {spatial} spatial dimension"
                           f"{'s' if spatial > 1 else ''}, a channel dimension, and an "
                           "optional batch dimension (i.e. "
                           f"{spatial + 1}D or {spatial + 2}D inputs).")
    if not training or p == 0.0:
        return input
    if _is_raw((input,)):
        _refuse_random_under_trace(input, name)
    shape = _shape(input)
    batched = nd == spatial + 2
    # one draw per (sample, channel), broadcast over the spatial dims
    mask_shape = tuple(shape[:2] if batched else shape[:1]) + (1,) * spatial
    mask = _dropout_mask(mask_shape, p, np.dtype(input.dtype))
    if inplace and isinstance(input, Tensor):
        return input.mul_(Tensor._make(mask))
    return _call("MulBackward0", _mul_fn, (input, mask))


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of (N, C, L) (or (C, L)) with probability p, scaling by 1/(1-p)."""
    return _channel_dropout(input, p, training, inplace, 1, "dropout1d")


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of (N, C, H, W) (or (C, H, W)) with probability p, scaling the
    rest by 1/(1-p). A 3-D input is taken as (N, C, L), with torch's warning."""
    if _ndim(input) == 3:
        warnings.warn(
            "dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D "
            "dropout behavior is desired - input is interpreted as shape (N, C, L), where C is "
            "the channel dim. This behavior will change in a future release to interpret the "
            "input as one without a batch dimension, i.e. shape (C, H, W). To maintain the 1D "
            "channel-wise dropout behavior, please switch to using dropout1d instead.",
            stacklevel=2)
        return _channel_dropout(input, p, training, inplace, 1, "dropout2d")
    return _channel_dropout(input, p, training, inplace, 2, "dropout2d")


def dropout3d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of (N, C, D, H, W) (or (C, D, H, W)) with probability p."""
    return _channel_dropout(input, p, training, inplace, 3, "dropout3d")
