"""functrans.scipy.stats.norm (jax.scipy.stats.norm): the normal distribution's density,
distribution function and quantiles, with loc and scale, differentiable in every argument."""
from __future__ import annotations

import math

import numpy as np

from ... import numpy as fnp
from .. import special

_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def _standard(x, loc, scale):
    x, loc, scale = fnp._promote_float(x, loc, scale)
    return (x - loc) / scale, scale


def logpdf(x, loc=0, scale=1):
    """log of the density N(loc, scale²) at x."""
    z, scale = _standard(x, loc, scale)
    return -z * z / 2 - fnp.log(scale) - np.asarray(_LOG_SQRT_2PI, z.dtype)


def pdf(x, loc=0, scale=1):
    """The density of N(loc, scale²) at x."""
    return fnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    """P(X <= x) for X ~ N(loc, scale²)."""
    return special.ndtr(_standard(x, loc, scale)[0])


def logcdf(x, loc=0, scale=1):
    """log P(X <= x), finite far into the lower tail (log_ndtr)."""
    return special.log_ndtr(_standard(x, loc, scale)[0])


def sf(x, loc=0, scale=1):
    """P(X > x) = cdf(-x) about loc."""
    return special.ndtr(-_standard(x, loc, scale)[0])


def logsf(x, loc=0, scale=1):
    """log P(X > x)."""
    return special.log_ndtr(-_standard(x, loc, scale)[0])


def ppf(q, loc=0, scale=1):
    """The quantile function: x with cdf(x) = q."""
    q, loc, scale = fnp._promote_float(q, loc, scale)
    return special.ndtri(q) * scale + loc


def isf(q, loc=0, scale=1):
    """The inverse survival function: x with sf(x) = q."""
    q, loc, scale = fnp._promote_float(q, loc, scale)
    return -special.ndtri(q) * scale + loc
