"""Categorical and Bernoulli (torch.distributions): parameterized by probs or logits, one
derived from the other on first use."""
from __future__ import annotations

import numbers

import numpy as np

from ..facade import dtypes as D
from ..facade import ops
from ..facade.creation import bernoulli, full, multinomial
from ..facade.grad_mode import no_grad
from ..facade.tensor import Size, Tensor
from ..nn import functional as F
from . import constraints
from .distribution import (Distribution, _binary_logits, _logits, _size, broadcast_all,
                           lazy_property)


def _one_of(probs, logits):
    if (probs is None) == (logits is None):
        raise ValueError("Either `probs` or `logits` must be specified, but not both.")


class Categorical(Distribution):
    """A category in [0, K) with probabilities probs (normalized over the last dim) or
    log-probabilities logits (normalized by logsumexp); the leading dims are the batch."""

    arg_constraints = {"probs": constraints.simplex,
                       "logits": constraints.independent(constraints.real, 1)}
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        _one_of(probs, logits)
        if probs is not None:
            if probs.dim() < 1:
                raise ValueError("`probs` parameter must be at least one-dimensional.")
            self.probs = probs / probs.sum(-1, keepdim=True)
        else:
            if logits.dim() < 1:
                raise ValueError("`logits` parameter must be at least one-dimensional.")
            self.logits = logits - logits.logsumexp(dim=-1, keepdim=True)
        self._param = self.probs if probs is not None else self.logits
        self._num_events = self._param.shape[-1]
        batch = self._param.shape[:-1] if self._param.dim() > 1 else Size()
        super().__init__(batch, validate_args=validate_args)

    @property
    def param_shape(self):
        return self._param.size()

    @property
    def support(self):
        return constraints.integer_interval(0, self._num_events - 1)

    @lazy_property
    def logits(self):
        return _logits(self.probs)

    @lazy_property
    def probs(self):
        return F.softmax(self.logits, dim=-1)

    @property
    def mean(self):
        return full(tuple(self._extended_shape()), float("nan"), dtype=self.probs.dtype)

    @property
    def mode(self):
        return self.probs.argmax(-1)

    @property
    def variance(self):
        return full(tuple(self._extended_shape()), float("nan"), dtype=self.probs.dtype)

    def sample(self, sample_shape=Size()):
        """int64 categories of shape sample_shape + batch_shape (multinomial draws)."""
        shape = self._extended_shape(sample_shape)
        n = int(np.prod(tuple(_size(sample_shape)), dtype=np.int64))
        with no_grad():
            probs_2d = self.probs.reshape(-1, self._num_events)
            samples = multinomial(probs_2d, n, True).T
        return samples.reshape(*shape)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value = value.long().unsqueeze(-1)
        value, log_pmf = ops.broadcast_tensors(value, self.logits)
        return log_pmf.gather(-1, value[..., :1]).squeeze(-1)

    def entropy(self):
        logits = self.logits.clamp(min=D.finfo(self.logits.dtype).min)
        return -(logits * self.probs).sum(-1)

    def enumerate_support(self, expand=True):
        values = Tensor._make(np.arange(self._num_events, dtype=np.int64))
        values = values.view(-1, *((1,) * len(self._batch_shape)))
        return values.expand(-1, *self._batch_shape) if expand else values


class Bernoulli(Distribution):
    """1 with probability probs (or sigmoid(logits)), else 0; samples in the parameter's
    dtype."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        _one_of(probs, logits)
        if probs is not None:
            is_scalar = isinstance(probs, numbers.Number)
            (self.probs,) = broadcast_all(probs)
        else:
            is_scalar = isinstance(logits, numbers.Number)
            (self.logits,) = broadcast_all(logits)
        self._param = self.probs if probs is not None else self.logits
        super().__init__(Size() if is_scalar else self._param.size(),
                         validate_args=validate_args)

    @property
    def param_shape(self):
        return self._param.size()

    @lazy_property
    def logits(self):
        return _binary_logits(self.probs)

    @lazy_property
    def probs(self):
        return self.logits.sigmoid()

    @property
    def mean(self):
        return self.probs

    @property
    def mode(self):
        p = self.probs
        return ops.where(p == 0.5, float("nan"), (p >= 0.5).to(p.dtype))

    @property
    def variance(self):
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        with no_grad():
            return bernoulli(self.probs.expand(*shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return -F.binary_cross_entropy_with_logits(logits, value, reduction="none")

    def entropy(self):
        return F.binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none")

    def enumerate_support(self, expand=True):
        values = Tensor._make(np.arange(2).astype(self._param.dtype))
        values = values.view(-1, *((1,) * len(self._batch_shape)))
        return values.expand(-1, *self._batch_shape) if expand else values
