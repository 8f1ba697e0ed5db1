"""ft.nn activation functions (jax.nn's), compositions of functrans.numpy.

Each is stable for large inputs, and so are their gradients.
"""
from __future__ import annotations

import math

import numpy as np

from ..numpy import raw as fnp
from ..core.config import DEFAULT_DTYPES
from functrans.primitives import elementwise as ew
from functrans.primitives import reductions as red
from functrans.primitives import shape as sh
from functrans.primitives.misc import stop_gradient


def relu(x):
    """max(x, 0), with derivative 0 at 0 (as JAX and PyTorch); NaN stays NaN (as both): x
    where not x <= 0, else 0. The zero stays the select's second operand, its one-pass form
    (x * mask; a zero first takes NumPy's where, 10x slower on a random mask). Its
    derivative at NaN is 1, PyTorch's; JAX's is 0, which would take two more passes."""
    x = fnp.asarray(x)
    return fnp.where(fnp.logical_not(fnp.less_equal(x, 0)), x, fnp.zeros((), x.dtype))


def relu6(x):
    """min(max(x, 0), 6), with derivative 0 at 0 and at 6 (JAX's convention)."""
    x = fnp.asarray(x)
    inside = fnp.logical_and(fnp.greater(x, 0), fnp.less(x, 6))
    return fnp.where(inside, x, stop_gradient(fnp.clip(x, 0, 6)))


def sigmoid(x):
    (x,) = fnp._promote_float(x)
    return ew.logistic(x)


def log_sigmoid(x):
    return fnp.negative(softplus(fnp.negative(x)))


def softplus(x):
    """log(1 + exp(x)) = logaddexp(x, 0): stable, derivative logistic(x) (1/2 at 0)."""
    (x,) = fnp._promote_float(x)
    return ew.softplus(x)


def silu(x):
    return fnp.multiply(x, sigmoid(x))


swish = silu


def elu(x, alpha=1.0):
    (x,) = fnp._promote_float(x)
    safe = fnp.where(fnp.greater(x, 0), fnp.zeros((), x.dtype), x)
    return fnp.where(fnp.greater(x, 0), x, fnp.multiply(alpha, fnp.expm1(safe)))


def leaky_relu(x, negative_slope=0.01):
    (x,) = fnp._promote_float(x)
    return fnp.where(fnp.greater_equal(x, 0), x, fnp.multiply(negative_slope, x))


def gelu(x, approximate=True):
    """GELU; approximate=True is the tanh form (JAX's default), False the exact erf form."""
    (x,) = fnp._promote_float(x)
    if approximate:
        c = math.sqrt(2 / math.pi)
        inner = fnp.multiply(c, fnp.add(x, fnp.multiply(0.044715, fnp.multiply(x, fnp.square(x)))))
        return fnp.multiply(fnp.multiply(0.5, x), fnp.add(1.0, fnp.tanh(inner)))
    return fnp.multiply(fnp.multiply(0.5, x),
                        fnp.add(1.0, ew.erf(fnp.multiply(x, np.asarray(1 / math.sqrt(2), x.dtype)))))


def logsumexp(x, axis=None, keepdims=False):
    return fnp.logsumexp(x, axis=axis, keepdims=keepdims)


def _back(r, shape, axes):
    """A reduction over `axes` broadcast back to `shape` in one broadcast_in_dim (not a
    keepdims reshape followed by a broadcast)."""
    kept = tuple(i for i in range(len(shape)) if i not in axes)
    if not kept:
        return r                # rank 0: elementwise primitives take it as it is
    return sh.broadcast_in_dim(r, shape=shape, broadcast_dimensions=kept)


def _shifted(x, axis):
    """(x - stop_gradient(max x along axis), axes), the max broadcast back."""
    (x,) = fnp._promote_float(x)
    shape = fnp.shape(x)
    axes = fnp._canon_axis(axis, len(shape))
    return ew.sub(x, _back(stop_gradient(red.reduce_max(x, axes=axes)), shape, axes)), axes


def log_softmax(x, axis=-1):
    s, axes = _shifted(x, axis)
    shape = fnp.shape(s)
    return ew.sub(s, _back(ew.log(red.reduce_sum(ew.exp(s), axes=axes)), shape, axes))


def softmax(x, axis=-1):
    s, axes = _shifted(x, axis)
    e = ew.exp(s)
    return ew.div(e, _back(red.reduce_sum(e, axes=axes), fnp.shape(e), axes))


def one_hot(x, num_classes, dtype=None, axis=-1):
    """x's integers as one-hot vectors along axis (all zeros out of range); dtype defaults
    to the default float (float32, float64 with jax_enable_x64), as JAX."""
    if dtype is None:
        dtype = DEFAULT_DTYPES["f"]
    x = fnp.asarray(x)
    classes = np.arange(num_classes, dtype=np.int32)
    out = fnp.equal(fnp.expand_dims(x, axis), classes if axis in (-1, fnp.ndim(x)) else
                    classes.reshape((-1,) + (1,) * (fnp.ndim(x) - (axis % (fnp.ndim(x) + 1)))))
    return fnp.astype(out, dtype)


def standardize(x, axis=-1, epsilon=1e-5):
    mean = fnp.mean(x, axis=axis, keepdims=True)
    var = fnp.var(x, axis=axis, keepdims=True)
    return fnp.multiply(fnp.subtract(x, mean), fnp.rsqrt(fnp.add(var, epsilon)))
