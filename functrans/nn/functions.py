"""ft.nn activation functions (jax.nn's), compositions of functrans.numpy.

Each is stable for large inputs, and so are their gradients.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from ..numpy import raw as fnp
from ..core.config import DEFAULT_DTYPES
from ..higher_order.custom import custom_jvp
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


def _masked_shift(x, axis, where):
    """(x - stop_gradient(max of x over axis where `where`), where as a boolean array of
    x's shape); the max of a slice with nothing selected is taken as 0, so that every value
    stays finite and gradients do not meet 0 * inf."""
    (x,) = fnp._promote_float(x)
    w = fnp.broadcast_to(fnp.asarray(where, bool), fnp.shape(x))
    m = fnp.max(x, axis=axis, where=w, initial=-np.inf, keepdims=True)
    m = stop_gradient(fnp.where(fnp.isfinite(m), m, fnp.zeros((), m.dtype)))
    return fnp.subtract(fnp.where(w, x, m), m), w


def log_softmax(x, axis=-1, where=None):
    """x - logsumexp(x) over axis; with where=, over the elements where it is True (the
    others are -inf)."""
    if where is not None:
        s, w = _masked_shift(x, axis, where)
        total = fnp.sum(fnp.exp(s), axis=axis, keepdims=True, where=w)
        return fnp.where(w, fnp.subtract(s, fnp.log(total)), -np.inf)
    s, axes = _shifted(x, axis)
    shape = fnp.shape(s)
    return ew.sub(s, _back(ew.log(red.reduce_sum(ew.exp(s), axes=axes)), shape, axes))


def softmax(x, axis=-1, where=None):
    """exp(x) / sum(exp(x)) over axis, the max taken out first; with where=, over the
    elements where it is True (the others are 0)."""
    if where is not None:         # a slice with nothing selected is 0, its gradient too
        s, w = _masked_shift(x, axis, where)
        e = fnp.where(w, fnp.exp(s), fnp.zeros((), s.dtype))
        total = fnp.sum(e, axis=axis, keepdims=True)
        total = fnp.where(fnp.equal(total, 0), fnp.ones((), total.dtype), total)
        return fnp.divide(e, total)
    (x,) = fnp._promote_float(x)
    return _softmax(x, fnp._canon_axis(axis, fnp.ndim(x)))


@functools.partial(custom_jvp, nondiff_argnums=(1,))
def _softmax(x, axes):
    s, _ = _shifted(x, axes)
    e = ew.exp(s)
    return ew.div(e, _back(red.reduce_sum(e, axes=axes), fnp.shape(e), axes))


@_softmax.defjvp
def _softmax_jvp(axes, primals, tangents):
    """y * (t - sum(y * t)) over the axes, as JAX's softmax: the output is all the
    backward reads (derived through exp and the division, it saved the exponentials and
    the squared sums as well, three arrays of the input's size)."""
    (x,), (t,) = primals, tangents
    y = _softmax(x, axes)
    yt = red.reduce_sum(ew.mul(y, t), axes=axes)
    return y, ew.mul(y, ew.sub(t, _back(yt, fnp.shape(y), axes)))


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


def celu(x, alpha=1.0):
    """max(x, 0) + alpha * expm1(min(x, 0) / alpha): continuously differentiable ELU."""
    (x,) = fnp._promote_float(x)
    return fnp.add(fnp.maximum(x, 0.0), fnp.multiply(alpha, fnp.expm1(
        fnp.divide(fnp.minimum(x, 0.0), alpha))))


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def selu(x):
    """scale * elu(x, alpha) with the self-normalizing constants."""
    return fnp.multiply(_SELU_SCALE, elu(x, _SELU_ALPHA))


def glu(x, axis=-1):
    """a * sigmoid(b), a and b the two halves of x along axis (its size must be even)."""
    x = fnp.asarray(x)
    size = fnp.shape(x)[axis]
    if size % 2:
        raise ValueError(f"glu: axis {axis} of x (shape {fnp.shape(x)}) must have an even "
                         f"size, got {size}")
    a, b = fnp.split(x, 2, axis=axis)
    return fnp.multiply(a, sigmoid(b))


def hard_tanh(x):
    """x clipped to [-1, 1], derivative 0 outside (-1, 1) (and at -1, 1: JAX's)."""
    x = fnp.asarray(x)
    return fnp.where(fnp.greater(x, 1), 1, fnp.where(fnp.less(x, -1), -1, x))


def hard_sigmoid(x):
    """relu6(x + 3) / 6, a piecewise linear sigmoid."""
    return fnp.divide(relu6(fnp.add(x, 3.0)), 6.0)


def hard_silu(x):
    """x * hard_sigmoid(x)."""
    return fnp.multiply(x, hard_sigmoid(x))


hard_swish = hard_silu


def soft_sign(x):
    """x / (|x| + 1)."""
    return fnp.divide(x, fnp.add(fnp.abs(x), 1))


def squareplus(x, b=4):
    """(x + sqrt(x² + b)) / 2, a smooth relu."""
    (x,) = fnp._promote_float(x)
    return fnp.divide(fnp.add(x, fnp.sqrt(fnp.add(fnp.square(x), b))), 2)


def mish(x):
    """x * tanh(softplus(x))."""
    return fnp.multiply(x, fnp.tanh(softplus(x)))


def sparse_plus(x):
    """0 for x <= -1, x for x >= 1, (x + 1)² / 4 between: softplus made sparse."""
    (x,) = fnp._promote_float(x)
    return fnp.where(fnp.less_equal(x, -1.0), 0.0, fnp.where(
        fnp.greater_equal(x, 1.0), x, fnp.divide(fnp.square(fnp.add(x, 1.0)), 4)))


def sparse_sigmoid(x):
    """clip(x + 1, 0, 2) / 2, the derivative of sparse_plus."""
    (x,) = fnp._promote_float(x)
    return fnp.multiply(0.5, fnp.clip(fnp.add(x, 1.0), 0.0, 2.0))


def _four_d(t, name):
    """t with a leading batch axis added when it has 3 (JAX accepts (T, N, H) inputs)."""
    if t is None:
        return None
    t = fnp.asarray(t)
    if fnp.ndim(t) == 3:
        return fnp.expand_dims(t, 0)
    if fnp.ndim(t) != 4:
        raise ValueError(f"dot_product_attention: {name} must be 3- or 4-dimensional, got "
                         f"shape {fnp.shape(t)}")
    return t


def _grouped(t, b, k, g, n, name):
    """A (B|1, N|1, T, S) bias or mask as (B|1, K|1, G|1, T, S), the heads split into K
    key/value heads of G query heads each."""
    tb, tn, tt, ts = fnp.shape(t)
    if tn == 1:
        return fnp.reshape(t, (tb, 1, 1, tt, ts))
    if tn != n:
        raise ValueError(f"dot_product_attention: {name} has {tn} heads, expected 1 or the "
                         f"query's {n}")
    return fnp.reshape(t, (tb, k, g, tt, ts))


def dot_product_attention(query, key, value, bias=None, mask=None, *, scale=None,
                          is_causal=False, query_seq_lengths=None, key_value_seq_lengths=None,
                          local_window_size=None, implementation=None,
                          return_residual=False):
    """softmax(q kᵀ scale + bias, masked) v per head, as jax.nn.dot_product_attention:
    query (B, T, N, H), key and value (B, S, K, H) with N a multiple of K (grouped heads;
    the batch axis optional), scale 1/sqrt(H) by default. mask (bool, True = attend),
    is_causal, the sequence lengths (positions past them padding) and local_window_size
    ((left, right) keys around each query) each restrict the keys; masked logits become a
    large negative number, so an all-masked row averages its values. The logits are
    computed in at least float32 and the softmax in float32 (as JAX, float64 inputs too)."""
    if implementation not in (None, "xla"):
        raise NotImplementedError(f"dot_product_attention: implementation={implementation!r} "
                                  "is not available (cuDNN's fused kernel); use None or 'xla'")
    if return_residual:
        raise NotImplementedError("dot_product_attention: return_residual=True is not "
                                  "supported")
    out_shape = fnp.shape(fnp.asarray(query))
    q, k, v = _four_d(query, "query"), _four_d(key, "key"), _four_d(value, "value")
    b, t, n, h = fnp.shape(q)
    _, s, kh, _ = fnp.shape(k)
    if fnp.shape(v) != fnp.shape(k):
        raise ValueError(f"dot_product_attention: key and value must have the same shape, got "
                         f"{fnp.shape(k)} and {fnp.shape(v)}")
    if fnp.shape(k)[0] != b or fnp.shape(k)[3] != h or n % kh:
        raise ValueError(f"dot_product_attention: query {fnp.shape(q)} and key {fnp.shape(k)} "
                         "must share batch and head size, and the query heads must be a "
                         "multiple of the key heads")
    g = n // kh
    scale = 1.0 / math.sqrt(h) if scale is None else scale
    ldt = fnp.promote_types(q.dtype, np.float32)
    qg = fnp.reshape(q, (b, t, kh, g, h))
    logits = fnp.einsum("btkgh,bskh->bkgts", fnp.astype(qg, ldt), fnp.astype(k, ldt))
    logits = fnp.multiply(logits, np.asarray(scale, ldt))
    if bias is not None:
        logits = fnp.astype(fnp.add(logits, _grouped(_four_d(bias, "bias"), b, kh, g, n,
                                                     "bias")), ldt)
    keep = None
    if mask is not None:
        keep = _grouped(fnp.astype(_four_d(mask, "mask"), bool), b, kh, g, n, "mask")
    qpos, kpos = np.arange(t)[:, None], np.arange(s)[None, :]
    static = np.ones((t, s), bool)
    if is_causal:
        static &= qpos >= kpos
    if local_window_size is not None:
        left, right = (local_window_size, local_window_size) \
            if isinstance(local_window_size, int) else local_window_size
        static &= (kpos >= qpos - left) & (kpos <= qpos + right)
    if is_causal or local_window_size is not None:
        keep = static if keep is None else fnp.logical_and(keep, static)
    for name, lengths in (("query_seq_lengths", query_seq_lengths),
                          ("key_value_seq_lengths", key_value_seq_lengths)):
        if lengths is not None and fnp.asarray(lengths).dtype != np.int32:
            raise ValueError(f"dot_product_attention: {name} dtype should be int32, but got "
                             f"{fnp.asarray(lengths).dtype}")
    if query_seq_lengths is not None or key_value_seq_lengths is not None:
        pad = np.ones((1, t, s), bool)
        if query_seq_lengths is not None:
            pad = fnp.logical_and(pad, fnp.less(np.arange(t)[None, :, None], fnp.reshape(
                fnp.asarray(query_seq_lengths), (-1, 1, 1))))
        if key_value_seq_lengths is not None:
            pad = fnp.logical_and(pad, fnp.less(np.arange(s)[None, None, :], fnp.reshape(
                fnp.asarray(key_value_seq_lengths), (-1, 1, 1))))
        pad = fnp.reshape(pad, (fnp.shape(pad)[0], 1, 1, t, s))
        keep = pad if keep is None else fnp.logical_and(keep, pad)
    if keep is not None:
        # finite in float32 too, where the softmax runs: an all-masked row is uniform
        big = -0.7 * float(np.finfo(np.float32).max)
        logits = fnp.where(keep, logits, np.asarray(big, ldt))
    probs = fnp.astype(softmax(fnp.astype(logits, np.float32), axis=-1), k.dtype)
    out = fnp.einsum("bkgts,bskh->btkgh", probs, v)
    if query_seq_lengths is not None:
        valid = fnp.less(np.arange(t)[None, :], fnp.reshape(fnp.asarray(query_seq_lengths),
                                                              (-1, 1)))
        out = fnp.multiply(out, fnp.astype(fnp.reshape(valid, (-1, t, 1, 1, 1)), out.dtype))
    return fnp.reshape(out, out_shape)
