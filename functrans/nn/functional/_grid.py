"""Spatial transformers: F.affine_grid (sampling grids from affine matrices) and
F.grid_sample (bilinear or nearest sampling of a 4-D input at grid points), with torch's
coordinate conventions (align_corners), padding modes (zeros, border, reflection) and
gradients in the input and in the grid: the sample is written as gathers of the corner
values times weights linear in the grid coordinates, so the core differentiates it."""
from __future__ import annotations

import warnings

import numpy as np

from ...numpy import raw as fnp
from ._dispatch import _call, _shape

_ALIGN_WARNING = ("Default grid_sample and affine_grid behavior has changed to "
                  "align_corners=False since 1.3.0. Please specify align_corners=True if the "
                  "old behavior is desired. See the documentation of grid_sample for details.")


def _align(align_corners):
    if align_corners is None:
        warnings.warn(_ALIGN_WARNING, UserWarning, stacklevel=3)
        return False
    return bool(align_corners)


def _base(n, align_corners, dtype):
    """The normalized coordinates of n pixel centres (or corners) in [-1, 1]."""
    if n <= 1:
        return np.zeros(max(n, 0), dtype)
    v = np.linspace(-1.0, 1.0, n)
    return (v if align_corners else v * (n - 1) / n).astype(dtype)


def _affine_grid_fn(theta, *, size, align_corners):
    spatial = size[2:]
    dtype = np.dtype(theta.dtype)
    axes = [_base(n, align_corners, dtype) for n in reversed(spatial)]     # x, y (, z)
    mesh = np.meshgrid(*axes[::-1], indexing="ij")[::-1]                    # x varies last
    base = np.stack(list(mesh) + [np.ones(spatial, dtype)], axis=-1)         # (..., d + 1)
    flat = base.reshape(-1, len(spatial) + 1)
    out = fnp.einsum("pk,nik->npi", flat, theta)
    return fnp.reshape(out, (size[0],) + tuple(spatial) + (len(spatial),))


def affine_grid(theta, size, align_corners=None):
    """A sampling grid (N, H, W, 2) (or (N, D, H, W, 3)) of the points that affine matrices
    theta (N, 2, 3) (or (N, 3, 4)) map the output pixels to, in [-1, 1] coordinates."""
    align_corners = _align(align_corners)
    size = tuple(int(s) for s in size)
    shape = tuple(_shape(theta))
    if np.dtype(getattr(theta, "dtype", np.float32)).kind != "f":
        raise ValueError(f"Expected theta to have floating point type, but got "
                         f"{theta.dtype}")
    if len(size) == 4:
        if len(shape) != 3 or shape[1:] != (2, 3):
            raise ValueError(f"Expected a batch of 2D affine matrices of shape Nx2x3 for size "
                             f"{size}. Got {_torch_size(shape)}.")
    elif len(size) == 5:
        if len(shape) != 3 or shape[1:] != (3, 4):
            raise ValueError(f"Expected a batch of 3D affine matrices of shape Nx3x4 for size "
                             f"{size}. Got {_torch_size(shape)}.")
    else:
        raise NotImplementedError(f"affine_grid only supports 4D and 5D sizes, for 2D and 3D "
                                  f"affine transforms, respectively. Got size {size}.")
    if min(size) <= 0:
        raise ValueError(f"Expected non-zero, positive output size. Got {size}")
    if shape[0] != size[0]:
        raise ValueError(f"Expected theta batch size {shape[0]} to match size[0] {size[0]}")
    return _call("AffineGridGeneratorBackward0", _affine_grid_fn, (theta,), size=size,
                 align_corners=align_corners)


def _torch_size(shape):
    return f"torch.Size([{', '.join(map(str, shape))}])"


def _reflect(x, twice_low, twice_high):
    """x reflected into [twice_low/2, twice_high/2] (torch's reflect_coordinates)."""
    if twice_low == twice_high:
        return fnp.zeros_like(x)
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    d = fnp.abs(x - low)
    extra = fnp.fmod(d, span)
    flips = fnp.floor(d / span)
    even = fnp.fmod(flips, 2) == 0
    return fnp.where(even, extra + low, span - extra + low)


def _source(coord, n, align_corners, padding):
    """Pixel coordinates of normalized ones along an axis of n pixels, after padding."""
    if align_corners:
        x = (coord + 1) / 2 * (n - 1)
    else:
        x = ((coord + 1) * n - 1) / 2
    if padding == "border":
        x = fnp.clip(x, 0, n - 1)
    elif padding == "reflection":
        x = _reflect(x, 0, 2 * (n - 1)) if align_corners else _reflect(x, -1, 2 * n - 1)
        x = fnp.clip(x, 0, n - 1)
    return x


def _gather(flat, iy, ix, h, w):
    """flat (N, C, H*W) at integer pixels (iy, ix) (N, P), and where they lie inside."""
    inside = (ix >= 0) & (ix <= w - 1) & (iy >= 0) & (iy <= h - 1)
    idx = fnp.clip(iy, 0, h - 1) * w + fnp.clip(ix, 0, w - 1)
    vals = fnp.take_along_axis(flat, fnp.expand_dims(idx.astype(np.int64), 1), axis=2)
    return vals, fnp.expand_dims(inside, 1)


def _grid_sample_fn(x, grid, *, mode, padding, align_corners):
    n, c, h, w = x.shape
    ho, wo = grid.shape[1], grid.shape[2]
    flat = fnp.reshape(x, (n, c, h * w))
    gx = fnp.reshape(grid[..., 0], (n, ho * wo))
    gy = fnp.reshape(grid[..., 1], (n, ho * wo))
    ix = _source(gx, w, align_corners, padding)
    iy = _source(gy, h, align_corners, padding)
    zero = fnp.zeros((), x.dtype)
    if mode == "nearest":
        vals, inside = _gather(flat, fnp.round(iy), fnp.round(ix), h, w)   # halves to even
        out = fnp.where(inside, vals, zero)
    else:
        x0, y0 = fnp.floor(ix), fnp.floor(iy)
        wx1, wy1 = ix - x0, iy - y0
        wx0, wy0 = 1 - wx1, 1 - wy1
        out = 0
        for dy, wy in ((0, wy0), (1, wy1)):
            for dx, wx in ((0, wx0), (1, wx1)):
                vals, inside = _gather(flat, y0 + dy, x0 + dx, h, w)
                out = out + fnp.where(inside, vals, zero) * fnp.expand_dims(wy * wx, 1)
    return fnp.reshape(out, (n, c, ho, wo))


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """input (N, C, H, W) sampled at grid (N, Ho, Wo, 2) ([-1, 1] coordinates, x first):
    (N, C, Ho, Wo). mode 'bilinear' or 'nearest'; padding_mode 'zeros', 'border' or
    'reflection'. Differentiable in input and grid (the grid's gradient is 0 for nearest)."""
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(f"nn.functional.grid_sample(): expected mode to be 'bilinear', "
                         f"'nearest' or 'bicubic', but got: '{mode}'")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"nn.functional.grid_sample(): expected padding_mode to be 'zeros', "
                         f"'border', or 'reflection', but got: '{padding_mode}'")
    align_corners = _align(align_corners)
    xs, gs = tuple(_shape(input)), tuple(_shape(grid))
    if len(xs) != len(gs) or len(xs) not in (4, 5):
        raise RuntimeError(f"grid_sampler(): expected 4D or 5D input and grid with same number "
                           f"of dimensions, but got input with sizes {list(xs)} and grid with "
                           f"sizes {list(gs)}")
    if gs[-1] != len(xs) - 2:
        raise RuntimeError(f"grid_sampler(): expected grid to have size {len(xs) - 2} in last "
                           f"dimension, but got grid with sizes {list(gs)}")
    if xs[0] != gs[0]:
        raise RuntimeError(f"grid_sampler(): expected grid and input to have same batch size, "
                           f"but got input with sizes {list(xs)} and grid with sizes "
                           f"{list(gs)}")
    if len(xs) == 5 or mode == "bicubic":
        raise NotImplementedError(
            f"grid_sample: {'5-D (volumetric) input' if len(xs) == 5 else 'bicubic mode'} is "
            f"not supported by functrans; use 4-D input with mode 'bilinear' or 'nearest'")
    if input.dtype != grid.dtype:
        raise RuntimeError(f"grid_sampler(): expected input and grid to have same dtype, but "
                           f"input has {input.dtype} and grid has {grid.dtype}")
    return _call("GridSampler2DBackward0", _grid_sample_fn, (input, grid), mode=mode,
                 padding=padding_mode, align_corners=align_corners)
