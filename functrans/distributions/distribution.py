"""torch.distributions.Distribution: shapes (sample = sample_shape + batch_shape +
event_shape), argument and sample validation with torch's ValueError texts (on by default,
as torch's), and the helpers the distributions share. Sampling draws from the facade's
generator (ft.manual_seed): the values differ from torch's streams, their law does not."""
from __future__ import annotations

import numbers
import warnings

import numpy as np

from ..facade import dtypes as D
from ..facade import ops
from ..facade.creation import randn
from ..facade.grad_mode import no_grad
from ..facade.tensor import Size, Tensor
from . import constraints


class lazy_property:  # noqa: N801  (torch's name)
    """A property computed on first use and then stored in the instance's __dict__ (so a
    parameter given to the constructor is one the validation sees, a derived one is not)."""

    def __init__(self, fn):
        self.fn = fn
        self.__doc__ = fn.__doc__

    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        value = self.fn(instance)
        instance.__dict__[self.fn.__name__] = value
        return value


def broadcast_all(*values):
    """Tensors and numbers broadcast to one shape; numbers become tensors of the first
    tensor's dtype (the default dtype when there is none)."""
    if not all(isinstance(v, (Tensor, numbers.Number)) for v in values):
        raise ValueError("Input arguments must all be instances of numbers.Number, "
                         "torch.Tensor or objects implementing __torch_function__.")
    like = next((v for v in values if isinstance(v, Tensor)), None)
    dtype = like.dtype if like is not None else D.get_default_dtype()
    ts = [v if isinstance(v, Tensor) else Tensor._make(np.asarray(v, dtype)) for v in values]
    return tuple(ops.broadcast_tensors(*ts))


def _size(shape):
    if isinstance(shape, int):
        return Size((shape,))
    return Size(tuple(int(s) for s in shape))


def _sum_rightmost(value, dim):
    """value summed over its `dim` rightmost dims."""
    return value.reshape(*value.shape[:value.dim() - dim], -1).sum(-1) if dim else value


def _standard_normal(shape, dtype):
    return randn(*shape, dtype=dtype)


class Distribution:
    """torch.distributions.Distribution."""

    has_rsample = False
    has_enumerate_support = False
    _validate_args = True          # torch's default (__debug__)
    arg_constraints: dict = {}
    support = None

    @staticmethod
    def set_default_validate_args(value):
        if value not in (True, False):
            raise ValueError
        Distribution._validate_args = value

    def __init__(self, batch_shape=Size(), event_shape=Size(), validate_args=None):
        self._batch_shape, self._event_shape = _size(batch_shape), _size(event_shape)
        if validate_args is not None:
            self._validate_args = validate_args
        if self._validate_args:
            for param, constraint in self.arg_constraints.items():
                if param not in self.__dict__ and isinstance(
                        getattr(type(self), param, None), lazy_property):
                    continue                   # derived from another parameter: not checked
                value = getattr(self, param)
                if not bool(np.all(constraint.check(value)._data)):
                    raise ValueError(
                        f"Expected parameter {param} ({type(value).__name__} of shape "
                        f"{tuple(value.shape)}) of distribution {self!r} to satisfy the "
                        f"constraint {constraint!r}, but found invalid values:\n{value}")

    @property
    def batch_shape(self):
        return self._batch_shape

    @property
    def event_shape(self):
        return self._event_shape

    def _extended_shape(self, sample_shape=Size()):
        return Size(tuple(_size(sample_shape)) + tuple(self._batch_shape)
                    + tuple(self._event_shape))

    def sample(self, sample_shape=Size()):
        """A sample (no gradient) of shape sample_shape + batch_shape + event_shape."""
        with no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=Size()):
        raise NotImplementedError(f"{type(self).__name__} has no rsample: its samples are not "
                                  "reparameterizable (use .sample(), or log_prob for a "
                                  "score-function gradient)")

    def sample_n(self, n):
        warnings.warn("sample_n will be deprecated. Use .sample((n,)) instead", UserWarning)
        return self.sample(Size((n,)))

    def log_prob(self, value):
        raise NotImplementedError

    def cdf(self, value):
        raise NotImplementedError

    def icdf(self, value):
        raise NotImplementedError

    def entropy(self):
        raise NotImplementedError

    def enumerate_support(self, expand=True):
        raise NotImplementedError

    def perplexity(self):
        return self.entropy().exp()

    @property
    def mean(self):
        raise NotImplementedError

    @property
    def mode(self):
        raise NotImplementedError(f"{type(self)} does not implement mode")

    @property
    def variance(self):
        raise NotImplementedError

    @property
    def stddev(self):
        return self.variance.sqrt()

    def _validate_sample(self, value):
        """torch's checks of a value given to log_prob/cdf: a Tensor whose shape broadcasts
        with batch_shape + event_shape, inside the support."""
        if not isinstance(value, Tensor):
            raise ValueError("The value argument to log_prob must be a Tensor")
        event_dim = len(self._event_shape)
        shape = tuple(value.shape)
        if shape[len(shape) - event_dim:] != tuple(self._event_shape):
            raise ValueError(f"The right-most size of value must match event_shape: "
                             f"{value.size()} vs {self._event_shape}.")
        actual = shape
        expected = tuple(self._batch_shape) + tuple(self._event_shape)
        for i, j in zip(reversed(actual), reversed(expected)):
            if i != 1 and j != 1 and i != j:
                raise ValueError(f"Value is not broadcastable with batch_shape+event_shape: "
                                 f"{value.size()} vs {Size(expected)}.")
        support = self.support
        if support is None:
            return
        if not bool(np.all(support.check(value)._data)):
            raise ValueError(f"Expected value argument ({type(value).__name__} of shape "
                             f"{shape}) to be within the support ({support!r}) of the "
                             f"distribution {self!r}, but found invalid values:\n{value}")

    def __repr__(self):
        names = [p for p in self.arg_constraints if p in self.__dict__]
        args = ", ".join(f"{p}: {self.__dict__[p] if self.__dict__[p].numel() == 1 else self.__dict__[p].size()}"
                         for p in names)
        return f"{type(self).__name__}({args})"


def _binary_logits(probs):
    """log(p) - log1p(-p), with p clamped into (eps, 1 - eps) of its dtype."""
    eps = D.finfo(probs.dtype).eps
    p = probs.clamp(min=eps, max=1 - eps)
    return p.log() - (-p).log1p()


def _logits(probs):
    """log(p), with p clamped into (eps, 1 - eps) of its dtype."""
    eps = D.finfo(probs.dtype).eps
    return probs.clamp(min=eps, max=1 - eps).log()
