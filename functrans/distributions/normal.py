"""Normal and MultivariateNormal (torch.distributions): reparameterized samples (rsample:
loc + scale * eps, gradients through loc and scale), log densities, entropies."""
from __future__ import annotations

import math
import numbers

import numpy as np

from ..facade import linalg
from ..facade import ops
from ..facade.creation import normal
from ..facade.grad_mode import no_grad
from ..facade.tensor import Size
from . import constraints
from .distribution import Distribution, _standard_normal, broadcast_all, lazy_property

_LOG_SQRT_2PI = math.log(math.sqrt(2 * math.pi))


class Normal(Distribution):
    """The normal law N(loc, scale²), elementwise over the broadcast shape of loc and scale."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        both_numbers = isinstance(loc, numbers.Number) and isinstance(scale, numbers.Number)
        super().__init__(Size() if both_numbers else self.loc.size(),
                         validate_args=validate_args)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def stddev(self):
        return self.scale

    @property
    def variance(self):
        return self.stddev.pow(2)

    def sample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        with no_grad():
            return normal(self.loc.expand(*shape), self.scale.expand(*shape))

    def rsample(self, sample_shape=Size()):
        eps = _standard_normal(self._extended_shape(sample_shape), self.loc.dtype)
        return self.loc + eps * self.scale

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        var = self.scale ** 2
        log_scale = math.log(self.scale) if isinstance(self.scale, numbers.Real) else \
            self.scale.log()
        return -((value - self.loc) ** 2) / (2 * var) - log_scale - _LOG_SQRT_2PI

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 * (1 + ((value - self.loc) * self.scale.reciprocal() / math.sqrt(2)).erf())

    def entropy(self):
        return 0.5 + 0.5 * math.log(2 * math.pi) + self.scale.log()


def _batch_mv(bmat, bvec):
    """bmat (..., n, n) @ bvec (..., n), batch dims broadcast."""
    return (bmat @ bvec.unsqueeze(-1)).squeeze(-1)


def _batch_mahalanobis(bL, bx):
    """‖L⁻¹ x‖² over the last dim: the squared Mahalanobis distance of x for covariance
    L Lᵀ (L⁻¹ once per matrix, batch dims broadcast)."""
    return _batch_mv(linalg.inv(bL), bx).pow(2).sum(-1)


def _np_broadcast(*shapes):
    return tuple(np.broadcast_shapes(*[tuple(s) for s in shapes]))


class MultivariateNormal(Distribution):
    """N(loc, Σ) over the last dim, Σ given as covariance_matrix, precision_matrix or its
    lower Cholesky factor scale_tril (exactly one)."""

    arg_constraints = {"loc": constraints.real_vector,
                       "covariance_matrix": constraints.positive_definite,
                       "precision_matrix": constraints.positive_definite,
                       "scale_tril": constraints.lower_cholesky}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None,
                 validate_args=None):
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        if (covariance_matrix is not None) + (scale_tril is not None) + \
                (precision_matrix is not None) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or "
                             "scale_tril may be specified.")
        for name, m in (("scale_tril", scale_tril), ("covariance_matrix", covariance_matrix),
                        ("precision_matrix", precision_matrix)):
            if m is None:
                continue
            if m.dim() < 2:
                raise ValueError(f"{name} matrix must be at least two-dimensional, with "
                                 "optional leading batch dimensions")
            batch = _np_broadcast(m.shape[:-2], loc.shape[:-1])
            setattr(self, name, m.expand(*batch, -1, -1))
        self.loc = loc.expand(*batch, -1)
        super().__init__(batch, loc.shape[-1:], validate_args=validate_args)
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = linalg.cholesky(covariance_matrix)
        else:
            self._unbroadcasted_scale_tril = linalg.cholesky(linalg.inv(precision_matrix))

    def _expanded(self, m):
        return m.expand(*self._batch_shape, *self._event_shape, *self._event_shape)

    @lazy_property
    def scale_tril(self):
        return self._expanded(self._unbroadcasted_scale_tril)

    @lazy_property
    def covariance_matrix(self):
        L = self._unbroadcasted_scale_tril
        return self._expanded(L @ L.mT)

    @lazy_property
    def precision_matrix(self):
        return self._expanded(linalg.inv(self.covariance_matrix))

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return self._unbroadcasted_scale_tril.pow(2).sum(-1).expand(
            *self._batch_shape, *self._event_shape)

    def rsample(self, sample_shape=Size()):
        eps = _standard_normal(self._extended_shape(sample_shape), self.loc.dtype)
        return self.loc + _batch_mv(self._unbroadcasted_scale_tril, eps)

    def _half_log_det(self):
        return self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        m = _batch_mahalanobis(self._unbroadcasted_scale_tril, diff)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + m) - self._half_log_det()

    def entropy(self):
        h = 0.5 * self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + self._half_log_det()
        return h if len(self._batch_shape) == 0 else h.expand(*self._batch_shape)
