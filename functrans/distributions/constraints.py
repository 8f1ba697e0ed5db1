"""torch.distributions.constraints: the sets a parameter or a value must lie in. `check(value)`
returns a boolean Tensor over the batch (the event dims reduced), as torch's; the
distributions read it on the host to raise torch's ValueError."""
from __future__ import annotations

import numpy as np

from ..facade.tensor import Tensor


def _host(value):
    return np.asarray(value.detach()._data if isinstance(value, Tensor) else value)


def _result(mask):
    return Tensor._make(np.asarray(mask, np.bool_))


class Constraint:
    """A set of values; `event_dim` is how many rightmost dims one element spans."""

    is_discrete = False
    event_dim = 0

    def check(self, value):
        raise NotImplementedError(f"{type(self).__name__}.check")

    def __repr__(self):
        return type(self).__name__[1:] + "()"


class _Real(Constraint):
    def check(self, value):
        v = _host(value)
        return _result(v == v)                      # not NaN


class _GreaterThan(Constraint):
    def __init__(self, lower_bound):
        self.lower_bound = lower_bound

    def check(self, value):
        return _result(_host(value) > self.lower_bound)

    def __repr__(self):
        return f"GreaterThan(lower_bound={self.lower_bound})"


class _Interval(Constraint):
    def __init__(self, lower_bound, upper_bound):
        self.lower_bound, self.upper_bound = lower_bound, upper_bound

    def check(self, value):
        v = _host(value)
        return _result((v >= self.lower_bound) & (v <= self.upper_bound))

    def __repr__(self):
        return f"Interval(lower_bound={self.lower_bound}, upper_bound={self.upper_bound})"


class _Boolean(Constraint):
    is_discrete = True

    def check(self, value):
        v = _host(value)
        return _result((v == 0) | (v == 1))


class _IntegerInterval(Constraint):
    is_discrete = True

    def __init__(self, lower_bound, upper_bound):
        self.lower_bound, self.upper_bound = lower_bound, upper_bound

    def check(self, value):
        v = _host(value)
        return _result((v % 1 == 0) & (v >= self.lower_bound) & (v <= self.upper_bound))

    def __repr__(self):
        return (f"IntegerInterval(lower_bound={self.lower_bound}, "
                f"upper_bound={self.upper_bound})")


class _Simplex(Constraint):
    event_dim = 1

    def check(self, value):
        v = _host(value)
        return _result(np.all(v >= 0, axis=-1) & (np.abs(v.sum(-1) - 1) < 1e-6))


class _IndependentConstraint(Constraint):
    """base_constraint over reinterpreted_batch_ndims more event dims (all must hold)."""

    def __init__(self, base_constraint, reinterpreted_batch_ndims):
        self.base_constraint = base_constraint
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims

    @property
    def is_discrete(self):
        return self.base_constraint.is_discrete

    @property
    def event_dim(self):
        return self.base_constraint.event_dim + self.reinterpreted_batch_ndims

    def check(self, value):
        r = _host(self.base_constraint.check(value))
        n = self.reinterpreted_batch_ndims
        return _result(r.reshape(r.shape[:r.ndim - n] + (-1,)).all(-1) if n else r)

    def __repr__(self):
        return (f"IndependentConstraint({self.base_constraint!r}, "
                f"{self.reinterpreted_batch_ndims})")


class _LowerCholesky(Constraint):
    event_dim = 2

    def check(self, value):
        v = _host(value)
        lower = np.all(np.tril(v) == v, axis=(-2, -1))
        return _result(lower & np.all(np.diagonal(v, axis1=-2, axis2=-1) > 0, axis=-1))


class _PositiveDefinite(Constraint):
    event_dim = 2

    def check(self, value):
        v = _host(value).astype(np.float64)
        sym = np.all(np.isclose(v, np.swapaxes(v, -1, -2), atol=1e-6), axis=(-2, -1))
        flat = v.reshape((-1,) + v.shape[-2:])
        pd = np.array([np.all(np.linalg.eigvalsh(m) > 0) if np.all(np.isfinite(m)) else False
                       for m in flat]).reshape(v.shape[:-2])
        return _result(sym & pd)


real = _Real()
real_vector = _IndependentConstraint(real, 1)
positive = _GreaterThan(0.0)
unit_interval = _Interval(0.0, 1.0)
boolean = _Boolean()
simplex = _Simplex()
lower_cholesky = _LowerCholesky()
positive_definite = _PositiveDefinite()
independent = _IndependentConstraint
greater_than = _GreaterThan
interval = _Interval
integer_interval = _IntegerInterval
