"""functrans.scipy.stats.logistic (jax.scipy.stats.logistic): the standard logistic
distribution shifted by loc and scaled by scale, differentiable in every argument."""
from __future__ import annotations

from ... import numpy as fnp
from ...nn.functions import log_sigmoid
from .. import special


def _standard(x, loc, scale):
    x, loc, scale = fnp._promote_float(x, loc, scale)
    return (x - loc) / scale, scale


def logpdf(x, loc=0, scale=1):
    """log density: -z - 2 log(1 + exp(-z)) - log scale, z = (x - loc)/scale (stable for
    large |z|: written with log_sigmoid)."""
    z, scale = _standard(x, loc, scale)
    return log_sigmoid(z) + log_sigmoid(-z) - fnp.log(scale)


def pdf(x, loc=0, scale=1):
    return fnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    """expit((x - loc)/scale)."""
    return special.expit(_standard(x, loc, scale)[0])


def sf(x, loc=0, scale=1):
    return special.expit(-_standard(x, loc, scale)[0])


def ppf(x, loc=0, scale=1):
    """logit(x) * scale + loc."""
    x, loc, scale = fnp._promote_float(x, loc, scale)
    return special.logit(x) * scale + loc


def isf(x, loc=0, scale=1):
    x, loc, scale = fnp._promote_float(x, loc, scale)
    return -special.logit(x) * scale + loc
