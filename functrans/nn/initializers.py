"""functrans.nn.initializers (jax.nn.initializers): functions that make initializers, each
`init(key, shape, dtype=...) -> array`, as JAX's. The random draws come from ft.random, so
the values are not JAX's bit for bit (their distributions are the same).

variance_scaling is the rule behind most of them: with fan_in/fan_out read from `shape`
(in_axis, out_axis; the other axes except batch_axis form the receptive field), the
variance is scale / fan ("fan_in", "fan_out" or "fan_avg"), drawn from a normal, a normal
truncated to ±2 standard deviations (rescaled so the variance is kept) or a uniform.
"""
from __future__ import annotations

import math

import numpy as np

from .. import numpy as fnp
from .. import random
from ..core.config import DEFAULT_DTYPES

__all__ = ["constant", "delta_orthogonal", "glorot_normal", "glorot_uniform", "he_normal",
           "he_uniform", "kaiming_normal", "kaiming_uniform", "lecun_normal", "lecun_uniform",
           "normal", "ones", "orthogonal", "truncated_normal", "uniform", "variance_scaling",
           "xavier_normal", "xavier_uniform", "zeros"]


def _dtype(dtype):
    return DEFAULT_DTYPES["f"] if dtype is None or dtype is float else dtype


def zeros(key, shape, dtype=None):
    """An array of zeros (key unused)."""
    return fnp.zeros(shape, _dtype(dtype))


def ones(key, shape, dtype=None):
    """An array of ones (key unused)."""
    return fnp.ones(shape, _dtype(dtype))


def constant(value, dtype=None):
    """init filling the shape with value."""
    def init(key, shape, dtype=dtype):
        return fnp.full(shape, value, _dtype(dtype))
    return init


def uniform(scale=1e-2, dtype=None):
    """init drawing from U[0, scale)."""
    def init(key, shape, dtype=dtype):
        return random.uniform(key, shape, _dtype(dtype)) * np.asarray(scale, _dtype(dtype))
    return init


def normal(stddev=1e-2, dtype=None):
    """init drawing from N(0, stddev²)."""
    def init(key, shape, dtype=dtype):
        return random.normal(key, shape, _dtype(dtype)) * np.asarray(stddev, _dtype(dtype))
    return init


def truncated_normal(stddev=1e-2, dtype=None, lower=-2.0, upper=2.0):
    """init drawing stddev · (a standard normal truncated to [lower, upper])."""
    def init(key, shape, dtype=dtype):
        dt = _dtype(dtype)
        return random.truncated_normal(key, lower, upper, shape, dt) * np.asarray(stddev, dt)
    return init


def _fans(shape, in_axis, out_axis, batch_axis):
    if len(shape) < 2:
        raise ValueError(f"variance_scaling: can't compute fans for a shape of rank "
                         f"{len(shape)} ({tuple(shape)}); it needs at least two axes (in, out)")
    nd = len(shape)
    ins = {a % nd for a in ((in_axis,) if isinstance(in_axis, int) else in_axis)}
    outs = {a % nd for a in ((out_axis,) if isinstance(out_axis, int) else out_axis)}
    batch = {a % nd for a in ((batch_axis,) if isinstance(batch_axis, int) else batch_axis)}
    receptive = math.prod(s for i, s in enumerate(shape) if i not in ins | outs | batch)
    fan_in = math.prod(shape[i] for i in ins) * receptive
    fan_out = math.prod(shape[i] for i in outs) * receptive
    return fan_in, fan_out


# the standard deviation of a standard normal truncated to [-2, 2]
_TRUNC_STD = 0.87962566103423978


def variance_scaling(scale, mode, distribution, in_axis=-2, out_axis=-1, batch_axis=(),
                     dtype=None):
    """init with variance scale / n, n the fan `mode` picks ("fan_in", "fan_out",
    "fan_avg" or "fan_geo_avg"); distribution "truncated_normal", "normal" or "uniform"."""
    if mode not in ("fan_in", "fan_out", "fan_avg", "fan_geo_avg"):
        raise ValueError(f"invalid mode for variance scaling initializer: {mode}")
    if distribution not in ("truncated_normal", "normal", "uniform"):
        raise ValueError(f"invalid distribution for variance scaling initializer: "
                         f"{distribution}")

    def init(key, shape, dtype=dtype):
        dt = _dtype(dtype)
        shape = tuple(shape)
        fan_in, fan_out = _fans(shape, in_axis, out_axis, batch_axis)
        n = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2,
             "fan_geo_avg": math.sqrt(fan_in * fan_out)}[mode]
        variance = scale / n
        if distribution == "truncated_normal":
            std = math.sqrt(variance) / _TRUNC_STD
            return random.truncated_normal(key, -2.0, 2.0, shape, dt) * np.asarray(std, dt)
        if distribution == "normal":
            return random.normal(key, shape, dt) * np.asarray(math.sqrt(variance), dt)
        lim = math.sqrt(3 * variance)
        return random.uniform(key, shape, dt, -lim, lim)
    return init


def glorot_uniform(in_axis=-2, out_axis=-1, batch_axis=(), dtype=None):
    return variance_scaling(1.0, "fan_avg", "uniform", in_axis, out_axis, batch_axis, dtype)


def glorot_normal(in_axis=-2, out_axis=-1, batch_axis=(), dtype=None):
    return variance_scaling(1.0, "fan_avg", "truncated_normal", in_axis, out_axis,
                            batch_axis, dtype)


def lecun_uniform(in_axis=-2, out_axis=-1, batch_axis=(), dtype=None):
    return variance_scaling(1.0, "fan_in", "uniform", in_axis, out_axis, batch_axis, dtype)


def lecun_normal(in_axis=-2, out_axis=-1, batch_axis=(), dtype=None):
    return variance_scaling(1.0, "fan_in", "truncated_normal", in_axis, out_axis,
                            batch_axis, dtype)


def he_uniform(in_axis=-2, out_axis=-1, batch_axis=(), dtype=None):
    return variance_scaling(2.0, "fan_in", "uniform", in_axis, out_axis, batch_axis, dtype)


def he_normal(in_axis=-2, out_axis=-1, batch_axis=(), dtype=None):
    return variance_scaling(2.0, "fan_in", "truncated_normal", in_axis, out_axis,
                            batch_axis, dtype)


xavier_uniform, xavier_normal = glorot_uniform, glorot_normal
kaiming_uniform, kaiming_normal = he_uniform, he_normal


def orthogonal(scale=1.0, column_axis=-1, dtype=None):
    """init of a matrix (or a stack, along the other axes) with orthonormal rows or columns
    (whichever are fewer), times scale: Q of a Gaussian matrix's QR, its signs fixed by
    R's diagonal so the distribution is uniform (Haar)."""
    def init(key, shape, dtype=dtype):
        dt = _dtype(dtype)
        shape = tuple(shape)
        if len(shape) < 2:
            raise ValueError("orthogonal initializer requires at least a 2D shape, got "
                             f"{shape}")
        n_rows = math.prod(shape) // shape[column_axis]
        n_cols = shape[column_axis]
        m = (n_cols, n_rows) if n_rows < n_cols else (n_rows, n_cols)
        q, r = fnp.linalg.qr(random.normal(key, m, dt))
        q = q * fnp.sign(fnp.diagonal(r))
        if n_rows < n_cols:
            q = q.T
        q = fnp.reshape(q, tuple(s for i, s in enumerate(shape)
                                 if i != column_axis % len(shape)) + (n_cols,))
        q = fnp.moveaxis(q, -1, column_axis)
        return q * np.asarray(scale, dt)
    return init


def delta_orthogonal(scale=1.0, column_axis=-1, dtype=None):
    """init of a convolution kernel (spatial..., in, out) that is zero except at the
    spatial center, where it is an orthogonal (in, out) matrix (Xiao et al. 2018)."""
    def init(key, shape, dtype=dtype):
        dt = _dtype(dtype)
        shape = tuple(shape)
        if len(shape) not in (3, 4, 5):
            raise ValueError("delta_orthogonal initializer requires a 3D, 4D or 5D shape, "
                             f"got {shape}")
        if shape[-2] > shape[-1]:
            raise ValueError("delta_orthogonal initializer requires in channels <= out "
                             f"channels, got shape {shape}")
        ortho = orthogonal(scale, column_axis, dt)(key, shape[-2:])
        center = tuple(s // 2 for s in shape[:-2])
        mask = np.zeros(shape[:-2], dt)
        mask[center] = 1
        return fnp.asarray(mask)[..., None, None] * ortho
    return init
