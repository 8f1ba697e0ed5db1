"""Independent (torch.distributions.Independent): some of a distribution's batch dims
reinterpreted as event dims (log_prob and entropy summed over them)."""
from __future__ import annotations

from ..facade.tensor import Size
from . import constraints
from .distribution import Distribution, _sum_rightmost


class Independent(Distribution):
    """base_distribution with its rightmost reinterpreted_batch_ndims batch dims made event
    dims: a diagonal Normal over vectors is Independent(Normal(loc, scale), 1)."""

    arg_constraints: dict = {}

    def __init__(self, base_distribution, reinterpreted_batch_ndims, validate_args=None):
        n, shape = int(reinterpreted_batch_ndims), tuple(base_distribution.batch_shape) + tuple(
            base_distribution.event_shape)
        if n > len(base_distribution.batch_shape):
            raise ValueError(f"Expected reinterpreted_batch_ndims <= len(base_distribution."
                             f"batch_shape), actual {n} vs {len(base_distribution.batch_shape)}")
        self.base_dist, self.reinterpreted_batch_ndims = base_distribution, n
        event_dim = n + len(base_distribution.event_shape)
        super().__init__(Size(shape[:len(shape) - event_dim]), Size(shape[len(shape) - event_dim:]),
                         validate_args=validate_args)

    @property
    def has_rsample(self):
        return self.base_dist.has_rsample

    @property
    def has_enumerate_support(self):
        return False if self.reinterpreted_batch_ndims else self.base_dist.has_enumerate_support

    @property
    def support(self):
        s = self.base_dist.support
        return constraints.independent(s, self.reinterpreted_batch_ndims) if \
            self.reinterpreted_batch_ndims else s

    @property
    def mean(self):
        return self.base_dist.mean

    @property
    def mode(self):
        return self.base_dist.mode

    @property
    def variance(self):
        return self.base_dist.variance

    def sample(self, sample_shape=Size()):
        return self.base_dist.sample(sample_shape)

    def rsample(self, sample_shape=Size()):
        return self.base_dist.rsample(sample_shape)

    def log_prob(self, value):
        return _sum_rightmost(self.base_dist.log_prob(value), self.reinterpreted_batch_ndims)

    def entropy(self):
        return _sum_rightmost(self.base_dist.entropy(), self.reinterpreted_batch_ndims)

    def __repr__(self):
        return f"Independent({self.base_dist!r}, {self.reinterpreted_batch_ndims})"
