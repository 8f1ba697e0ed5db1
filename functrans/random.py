"""ft.random: explicit-key pseudo random numbers (Threefry-2x32, counter based, as JAX).

A key is a uint32[2] array. Functions never mutate a key: split it to get fresh ones.
"""
from __future__ import annotations

import math
import types as _types

import numpy as np

from .control_flow import while_loop
from .core import arrays_in_out as _arrays_in_out
from .core import ConcretizationTypeError, keeping_dtypes, to_concrete
from .numpy import raw as fnp
from .core.config import DEFAULT_DTYPES
from .higher_order.custom import custom_jvp
from .numpy._promotion import explicit_dtype
from functrans.primitives import elementwise as ew
from functrans.primitives import special as sp
from functrans.primitives import random as prand
from functrans.primitives import reductions as red
from functrans.primitives import shape as sh


def PRNGKey(seed) -> np.ndarray:  # noqa: N802  (JAX's name)
    """A key from an integer seed."""
    seed = int(seed)
    return np.array([(seed >> 32) & 0xFFFFFFFF, seed & 0xFFFFFFFF], dtype=np.uint32)


key = PRNGKey


def _check_key(key):
    if tuple(fnp.shape(key)) != (2,) or np.dtype(key.dtype) != np.uint32:
        raise TypeError(f"expected a PRNG key (uint32[2], from ft.random.PRNGKey), got "
                        f"{getattr(key, 'dtype', type(key))}{tuple(fnp.shape(key))}")


def _shape(shape):
    return (shape,) if isinstance(shape, int) else tuple(int(s) for s in shape)


def random_bits(key, shape=()):
    """uint32 bits of the given shape, a pure function of the key."""
    _check_key(key)
    shape = _shape(shape)
    n = math.prod(shape)
    half = (n + 1) // 2
    if n == 0:
        return np.zeros(shape, np.uint32)
    ctr = sh.iota(dtype=np.dtype(np.uint32), shape=(half,), dimension=0)
    k0, k1 = key[0], key[1]
    y0, y1 = prand.threefry2x32(k0, k1, ctr, ew.add(ctr, np.uint32(half)))
    bits = sh.concatenate(y0, y1, dimension=0)
    if 2 * half != n:
        bits = sh.slice(bits, start_indices=(0,), limit_indices=(n,), strides=None)
    return sh.reshape(bits, new_sizes=shape)


def split(key, num=2):
    """num new keys (shape (num, 2)) derived from key."""
    return random_bits(key, (int(num), 2))


def fold_in(key, data):
    """A new key mixing in an integer."""
    _check_key(key)
    d = fnp.asarray(data, np.uint32) if not hasattr(data, "aval") else fnp.astype(data, np.uint32)
    y0, y1 = prand.threefry2x32(key[0], key[1], np.uint32(0), d)
    return fnp.stack([y0, y1])


def _float_dtype(dtype, name=""):
    dt = np.dtype(DEFAULT_DTYPES["f"] if dtype is None else explicit_dtype(dtype, name))
    if dt.kind != "f":
        raise TypeError(f"dtype argument must be a float dtype, got {dt}")
    return dt


def uniform(key, shape=(), dtype=None, minval=0.0, maxval=1.0):
    """Uniform floats in [minval, maxval)."""
    dt = _float_dtype(dtype, "uniform")
    shape = _shape(shape)
    if dt == np.float64:
        bits = random_bits(key, (2,) + shape)
        hi = ew.convert_element_type(ew.shift_right_logical(bits[0], np.uint32(5)),
                                     new_dtype=dt, weak_type=False)
        lo = ew.convert_element_type(ew.shift_right_logical(bits[1], np.uint32(6)),
                                     new_dtype=dt, weak_type=False)
        u = fnp.multiply(fnp.add(fnp.multiply(hi, 2.0 ** 26), lo), 2.0 ** -53)
    else:
        bits = random_bits(key, shape)
        u24 = ew.convert_element_type(ew.shift_right_logical(bits, np.uint32(8)),
                                      new_dtype=np.dtype(np.float32), weak_type=False)
        u = fnp.astype(fnp.multiply(u24, np.float32(2.0 ** -24)), dt)
    u = fnp.asarray(u, dt)
    return fnp.add(fnp.multiply(u, fnp.subtract(maxval, minval)), minval).astype(dt) \
        if (minval, maxval) != (0.0, 1.0) else u


def normal(key, shape=(), dtype=None):
    """Standard normal samples (Box-Muller)."""
    dt = _float_dtype(dtype, "normal")
    shape = _shape(shape)
    k1, k2 = split(key)
    u1 = fnp.subtract(1.0, uniform(k1, shape, dt))       # in (0, 1]
    u2 = uniform(k2, shape, dt)
    r = fnp.sqrt(fnp.multiply(-2.0, fnp.log(u1)))
    return fnp.multiply(r, fnp.cos(fnp.multiply(2 * math.pi, u2)))


def bernoulli(key, p=0.5, shape=None):
    """Booleans that are True with probability p: uniform(key, shape, p's dtype) < p, JAX's
    construction (a non-float p is taken as float32)."""
    p = fnp.asarray(p) if not hasattr(p, "aval") else p
    shape = fnp.shape(p) if shape is None else _shape(shape)
    return fnp.less(uniform(key, shape, np.float32 if np.dtype(p.dtype) != np.float64
                            else np.float64), p)


def gumbel(key, shape=(), dtype=None):
    """Standard Gumbel samples: -log(-log(u)), u uniform in [tiny, 1), as JAX's mode="low"."""
    dt = _float_dtype(dtype, "gumbel")
    u = uniform(key, _shape(shape), dt, minval=float(np.finfo(dt).tiny), maxval=1.0)
    return fnp.negative(fnp.log(fnp.negative(fnp.log(u))))


def categorical(key, logits, axis=-1, shape=None, replace=True):
    """Samples from the categorical distribution given by logits (Gumbel-max, JAX's
    construction; without replacement, the top-k of the perturbed logits)."""
    logits = fnp.asarray(logits) if not hasattr(logits, "aval") else logits
    nd = fnp.ndim(logits)
    ax = axis % nd
    n_cls = fnp.shape(logits)[ax]
    batch = tuple(s for i, s in enumerate(fnp.shape(logits)) if i != ax)
    shape = batch if shape is None else _shape(shape)
    if len(shape) < len(batch) or shape[len(shape) - len(batch):] != batch:
        raise ValueError(f"categorical parameter shapes ({batch},) cannot be broadcast to "
                         f"shape {shape}")
    prefix = shape[:len(shape) - len(batch)]
    dt = logits.dtype if np.dtype(logits.dtype).kind == "f" else None
    if replace:
        full = prefix + batch[:ax] + (n_cls,) + batch[ax:]
        return fnp.argmax(fnp.add(gumbel(key, full, dt), logits), axis=len(prefix) + ax)
    k = math.prod(prefix)
    if k > n_cls:
        raise ValueError(f"Number of samples without replacement ({k}) cannot exceed number "
                         f"of categories ({n_cls}).")
    g = fnp.moveaxis(fnp.add(logits, gumbel(key, fnp.shape(logits), dt)), ax, -1)
    top = fnp.argsort(g, axis=-1, descending=True)[..., :k]          # batch + (k,)
    return fnp.reshape(fnp.moveaxis(top, -1, 0), shape)


def _int_dtype(dtype):
    dt = np.dtype(DEFAULT_DTYPES["i"] if dtype is None else explicit_dtype(dtype, "randint"))
    if dt.kind not in "iu":
        raise TypeError(f"randint only accepts integer dtypes, got {dt}")
    return dt


def randint(key, shape, minval, maxval, dtype=None):
    """Integers in [minval, maxval), JAX's construction: two words of random bits per value,
    each reduced modulo the span and combined as hi * (2**32 mod span) + lo (mod span);
    an empty range gives minval. 32-bit words only: a span over 2**32 is refused."""
    dt = _int_dtype(dtype)
    with keeping_dtypes():      # the bounds are clipped in int64 also with x64 off
        return _randint(key, _shape(shape), minval, maxval, dt)


def _randint(key, shape, minval, maxval, dt):
    info = np.iinfo(dt)
    lo_v = fnp.clip(fnp.asarray(minval, np.int64), info.min, info.max)
    hi_v = fnp.clip(fnp.asarray(maxval, np.int64), info.min,
                    min(int(info.max) + 1, int(np.iinfo(np.int64).max)))
    cmin, cmax = to_concrete(lo_v), to_concrete(hi_v)
    if cmin is not None and cmax is not None and np.max(np.asarray(cmax) - cmin) > 2 ** 32:
        raise ValueError(f"randint: the range [{minval}, {maxval}) spans more than 2**32 "
                         "values; sample two randint words and combine them")
    k1, k2 = split(key)
    u32 = np.uint32
    span = fnp.where(fnp.less_equal(hi_v, lo_v), np.int64(1), fnp.subtract(hi_v, lo_v))
    span = fnp.astype(fnp.broadcast_to(span, shape), u32)
    full = fnp.equal(span, u32(0))              # a span of 2**32 wrapped to 0: the low word
    span = fnp.where(full, u32(1), span)
    c16 = np.full(shape, 1 << 16, u32)
    mult = ew.rem(ew.mul(ew.rem(c16, span), ew.rem(c16, span)), span)  # 2**32 mod span
    low = random_bits(k2, shape)
    off = ew.rem(ew.add(ew.mul(ew.rem(random_bits(k1, shape), span), mult),
                        ew.rem(low, span)), span)
    off = fnp.where(full, low, off)
    return fnp.astype(fnp.add(lo_v, fnp.astype(off, np.int64)), dt)


def _shuffle(key, x, axis):
    """x sorted along axis by fresh random 32-bit keys, in as many rounds as JAX's static
    rule asks (ceil(3 ln(size) / ln(2**32 - 1)): collisions become improbable)."""
    size = math.prod(fnp.shape(x))
    rounds = int(np.ceil(3 * np.log(max(1, size)) / np.log(np.iinfo(np.uint32).max)))
    for _ in range(rounds):
        keys = split(key)
        key, sub = keys[0], keys[1]
        x = red.sort(random_bits(sub, fnp.shape(x)), x, dimension=axis, num_keys=1)[1]
    return x


def permutation(key, x, axis=0, independent=False):
    """A random permutation of arange(x) (x an int), or of x along axis: the same one for
    every slice, or with independent=True one per slice (JAX's sort by random keys)."""
    _check_key(key)
    if not fnp.ndim(x):
        if np.dtype(fnp.asarray(x).dtype if not hasattr(x, "aval") else x.dtype).kind not in "iu":
            raise TypeError("x must be an integer or at least 1-dimensional")
        r = to_concrete(x)
        if r is None:
            raise ConcretizationTypeError("permutation: argument x of "
                                          "ft.random.permutation() must be concrete")
        return _shuffle(key, fnp.arange(int(r)), 0)
    x = fnp.asarray(x) if not hasattr(x, "aval") else x
    ax = axis % fnp.ndim(x)
    if independent or fnp.ndim(x) == 1:
        return _shuffle(key, x, ax)
    ind = _shuffle(key, fnp.arange(fnp.shape(x)[ax]), 0)
    return fnp.take(x, ind, axis=ax)


def shuffle(key, x, axis=0):
    """Each slice along axis shuffled independently: permutation(key, x, axis,
    independent=True), the replacement JAX names for its removed shuffle."""
    return permutation(key, x, axis, independent=True)


def choice(key, a, shape=(), replace=True, p=None, axis=0):
    """A random sample of a's entries along axis (or of arange(a)): uniform, or with
    probabilities p; with or without replacement. JAX's construction: randint / a
    permutation without p; inverse CDF / Gumbel top-k with p."""
    _check_key(key)
    if not isinstance(shape, (tuple, list)):
        raise TypeError(f"shape argument of jax.random.choice must be a sequence, got {shape}")
    shape = tuple(shape)
    arr = fnp.asarray(a) if not hasattr(a, "aval") else a
    if fnp.ndim(arr) == 0:
        n = to_concrete(arr)
        if n is None:
            raise ConcretizationTypeError("choice: an integer `a` must be concrete")
        n = int(n)
    else:
        axis = axis % fnp.ndim(arr)
        n = fnp.shape(arr)[axis]
    draws = math.prod(shape)
    if draws == 0:
        return fnp.zeros(shape, arr.dtype)
    if n <= 0:
        raise ValueError("a must be greater than 0 unless no samples are taken")
    if not replace and draws > n:
        raise ValueError(f"Cannot take a larger sample (size {draws}) than population "
                         f"(size {n}) when 'replace=False'")
    if p is None:
        if replace:
            ind = randint(key, shape, 0, n)
        else:
            ind = permutation(key, n)[:draws]
    else:
        p = fnp.asarray(p) if not hasattr(p, "aval") else p
        if np.dtype(p.dtype).kind != "f":
            p = fnp.astype(p, np.float32)
        if tuple(fnp.shape(p)) != (n,):
            raise ValueError("p must be None or a 1D vector with the same size as "
                             f"a.shape[axis]. p has shape {tuple(fnp.shape(p))} and "
                             f"a.shape[axis] is {n}.")
        if replace:
            cdf = fnp.cumsum(p)
            r = fnp.multiply(cdf[-1], fnp.subtract(1, uniform(key, shape, p.dtype)))
            # searchsorted(cdf, r, side="left"): how many cdf entries lie below r
            ind = fnp.sum(fnp.less(cdf, fnp.expand_dims(r, -1)), axis=-1).astype(np.int32)
        else:
            g = fnp.add(gumbel(key, (n,), p.dtype), fnp.log(p))
            ind = fnp.argsort(g, descending=True)[:draws]
    if fnp.ndim(arr) == 0:
        return fnp.reshape(ind, shape)
    out = fnp.take(arr, fnp.reshape(ind, (-1,)), axis=axis)
    return fnp.reshape(out, fnp.shape(arr)[:axis] + shape + fnp.shape(arr)[axis + 1:])


# ---------------------------------------------------------------------------
# further distributions, with JAX's signatures. The samples are not JAX's bit for bit
# (ft.random's bits are its own); their distributions are the same.

def _param(x):
    return x if hasattr(x, "aval") else fnp.asarray(x)


def _float_param(x, dt):
    return fnp.astype(_param(x), dt)


def _open_uniform(key, shape, dt):
    """Uniform samples in the open interval (0, 1)."""
    return uniform(key, shape, dt, minval=float(np.finfo(dt).tiny), maxval=1.0)


def key_data(keys):
    """The uint32 data of a key (or an array of keys): ft.random's keys are that data."""
    return _param(keys)


def wrap_key_data(key_bits_array, *, impl=None):
    """A key from its uint32 data (trailing axis 2), as key_data returns it."""
    k = _param(key_bits_array)
    if np.dtype(k.dtype) != np.uint32 or fnp.shape(k)[-1:] != (2,):
        raise TypeError("wrap_key_data: expected uint32 data with a trailing axis of 2 "
                        f"(threefry2x32), got {k.dtype}{tuple(fnp.shape(k))}")
    return k


def exponential(key, shape=(), dtype=None):
    """Exponential(1) samples: -log(1 - u)."""
    dt = _float_dtype(dtype, "exponential")
    return fnp.negative(fnp.log1p(fnp.negative(uniform(key, _shape(shape), dt))))


def laplace(key, shape=(), dtype=None):
    """Laplace(0, 1) samples: -sign(u) log(1 - |u|), u uniform in (-1, 1)."""
    dt = _float_dtype(dtype, "laplace")
    u = uniform(key, _shape(shape), dt, minval=float(-1 + np.finfo(dt).epsneg), maxval=1.0)
    return fnp.negative(fnp.sign(u) * fnp.log1p(fnp.negative(fnp.abs(u))))


def logistic(key, shape=(), dtype=None):
    """Standard logistic samples: log(u / (1 - u))."""
    dt = _float_dtype(dtype, "logistic")
    u = _open_uniform(key, _shape(shape), dt)
    return fnp.log(u) - fnp.log1p(fnp.negative(u))


def cauchy(key, shape=(), dtype=None):
    """Standard Cauchy samples: tan(π (u - 1/2))."""
    dt = _float_dtype(dtype, "cauchy")
    u = _open_uniform(key, _shape(shape), dt)
    return fnp.tan(np.asarray(math.pi, dt) * (u - np.asarray(0.5, dt)))


def truncated_normal(key, lower, upper, shape=None, dtype=None):
    """Standard normal samples truncated to [lower, upper] (inverse CDF of a uniform
    between Φ(lower) and Φ(upper)); shape defaults to lower's and upper's broadcast."""
    dt = _float_dtype(dtype, "truncated_normal")
    lo, hi = _float_param(lower, dt), _float_param(upper, dt)
    shape = fnp.broadcast_shapes(fnp.shape(lo), fnp.shape(hi)) if shape is None \
        else _shape(shape)
    r2 = np.asarray(math.sqrt(2), dt)
    a, b = ew.erf(lo / r2), ew.erf(hi / r2)
    u = uniform(key, shape, dt, minval=float(np.finfo(dt).tiny) - 1.0, maxval=1.0)
    out = r2 * sp.erf_inv(a + (u + np.asarray(1, dt)) / np.asarray(2, dt) * (b - a))
    return fnp.clip(out, lo, hi)       # rounding can land a hair outside [lower, upper]


def _gamma_one(key, alpha):
    """log of Gamma(alpha, 1) samples, alpha an array (Marsaglia and Tsang 2000: accepted
    proposals d·v with d = a - 1/3, v = (1 + c x)³, x normal; alpha < 1 is boosted: a =
    alpha + 1, times u^(1/alpha)). The rejection loop runs until every entry accepted."""
    dt = alpha.dtype
    shape = fnp.shape(alpha)
    boost = alpha < 1
    a = fnp.where(boost, alpha + np.asarray(1, dt), alpha)
    d = a - np.asarray(1 / 3, dt)
    c = np.asarray(1, dt) / fnp.sqrt(np.asarray(9, dt) * d)
    kb, key = split(key)

    def cond(state):
        return fnp.logical_not(fnp.all(state[1]))

    def body(state):
        k, done, logv = state
        k, kx, ku = split(k, 3)
        x = normal(kx, shape, dt)
        v = np.asarray(1, dt) + c * x
        ok = v > 0
        v = fnp.where(ok, v, np.asarray(1, dt))
        v3 = v * v * v
        u = _open_uniform(ku, shape, dt)
        accept = ok & (fnp.log(u) < x * x / np.asarray(2, dt) + d
                       - d * v3 + d * fnp.log(v3))
        new = ~done & accept
        return k, done | new, fnp.where(new, fnp.log(d) + fnp.log(v3), logv)

    _, _, logv = while_loop(cond, body, (key, fnp.zeros(shape, bool), fnp.zeros(shape, dt)))
    u = _open_uniform(kb, shape, dt)
    return fnp.where(boost, logv + fnp.log(u) / alpha, logv)


@custom_jvp
def _log_gamma_sample(key, alpha):
    return _gamma_one(key, alpha)


@_log_gamma_sample.defjvp
def _log_gamma_sample_jvp(primals, tangents):
    raise NotImplementedError(
        "ft.random.gamma/loggamma/beta/dirichlet/t: the derivative of a sample with respect "
        "to its shape parameter (JAX's implicit reparameterization gradient) is not "
        "implemented; pass the shape parameter through ft.lax.stop_gradient, or use a "
        "score-function estimator")


def _alpha(key, a, shape, dtype, name):
    dt = _float_dtype(dtype, name)
    a = _float_param(a, dt)
    shape = fnp.shape(a) if shape is None else _shape(shape)
    return fnp.broadcast_to(a, shape), dt


def loggamma(key, a, shape=None, dtype=None):
    """log of Gamma(a, 1) samples, accurate also for small a (where the samples underflow)."""
    a, _ = _alpha(key, a, shape, dtype, "loggamma")
    return _log_gamma_sample(key, a)


def gamma(key, a, shape=None, dtype=None):
    """Gamma(a, 1) samples (shape a, scale 1). Not differentiable in a (a clear error)."""
    return fnp.exp(loggamma(key, a, shape, dtype))


def beta(key, a, b, shape=None, dtype=None):
    """Beta(a, b) samples: X / (X + Y), X ~ Gamma(a), Y ~ Gamma(b), in log space."""
    dt = _float_dtype(dtype, "beta")
    a, b = _float_param(a, dt), _float_param(b, dt)
    shape = fnp.broadcast_shapes(fnp.shape(a), fnp.shape(b)) if shape is None \
        else _shape(shape)
    ka, kb = split(key)
    lx, ly = loggamma(ka, a, shape, dt), loggamma(kb, b, shape, dt)
    m = fnp.maximum(lx, ly)
    return fnp.exp(lx - m - fnp.log(fnp.exp(lx - m) + fnp.exp(ly - m)))


def dirichlet(key, alpha, shape=None, dtype=None):
    """Dirichlet(alpha) samples over alpha's last axis: normalized Gamma(alpha_i) samples
    (in log space); shape is the batch shape, alpha's last axis is appended."""
    dt = _float_dtype(dtype, "dirichlet")
    alpha = _float_param(alpha, dt)
    if fnp.ndim(alpha) < 1:
        raise ValueError(f"dirichlet: alpha must have at least one dimension, got shape "
                         f"{tuple(fnp.shape(alpha))}")
    batch = fnp.shape(alpha)[:-1] if shape is None else _shape(shape)
    lg = loggamma(key, alpha, batch + fnp.shape(alpha)[-1:], dt)
    return fnp.exp(lg - fnp.max(lg, axis=-1, keepdims=True)) / fnp.sum(
        fnp.exp(lg - fnp.max(lg, axis=-1, keepdims=True)), axis=-1, keepdims=True)


def t(key, df, shape=(), dtype=None):
    """Student's t samples with df degrees of freedom: z · sqrt(df / (2 g)), z normal,
    g ~ Gamma(df/2)."""
    dt = _float_dtype(dtype, "t")
    df = _float_param(df, dt)
    shape = fnp.shape(df) if shape is None else _shape(shape)
    kn, kg = split(key)
    z = normal(kn, shape, dt)
    half = df / np.asarray(2, dt)
    g = gamma(kg, half, shape, dt)
    return z * fnp.sqrt(half / g)


def _poisson_small(key, lam, shape):
    """Knuth: the number of uniform factors before their product drops below exp(-lam)."""
    dt = lam.dtype
    limit = fnp.exp(fnp.negative(lam))

    def cond(state):
        return fnp.any(state[2])

    def body(state):
        k, count, live, prod = state
        k, sub = split(k)
        prod = prod * uniform(sub, shape, dt)
        live = live & (prod > limit)
        return k, count + fnp.astype(live, np.int32), live, prod

    init = (key, fnp.zeros(shape, np.int32), fnp.ones(shape, bool), fnp.ones(shape, dt))
    return while_loop(cond, body, init)[1]


def _poisson_large(key, lam, shape):
    """Hörmann's transformed rejection with squeeze (PTRS, 1993), for lam >= 10."""
    dt = lam.dtype
    one = np.asarray(1, dt)
    slam, loglam = fnp.sqrt(lam), fnp.log(lam)
    b = np.asarray(0.931, dt) + np.asarray(2.53, dt) * slam
    a = np.asarray(-0.059, dt) + np.asarray(0.02483, dt) * b
    inv_alpha = np.asarray(1.1239, dt) + np.asarray(1.1328, dt) / (b - np.asarray(3.4, dt))
    vr = np.asarray(0.9277, dt) - np.asarray(3.6224, dt) / (b - np.asarray(2, dt))

    def cond(state):
        return fnp.logical_not(fnp.all(state[1]))

    def body(state):
        k, done, out = state
        k, ku, kv = split(k, 3)
        u = uniform(ku, shape, dt) - np.asarray(0.5, dt)
        v = uniform(kv, shape, dt)
        us = np.asarray(0.5, dt) - fnp.abs(u)
        n = fnp.floor((np.asarray(2, dt) * a / us + b) * u + lam + np.asarray(0.43, dt))
        quick = (us >= np.asarray(0.07, dt)) & (v <= vr)
        reject = (n < 0) | ((us < np.asarray(0.013, dt)) & (v > us))
        s = fnp.log(v * inv_alpha / (a / (us * us) + b))
        full = s <= -lam + n * loglam - sp.lgamma(fnp.maximum(n, 0) + one)
        accept = quick | (~reject & full)
        new = ~done & accept
        return k, done | new, fnp.where(new, n, out)

    init = (key, fnp.zeros(shape, bool), fnp.zeros(shape, dt))
    return fnp.astype(while_loop(cond, body, init)[2], np.int32)


def poisson(key, lam, shape=None, dtype=None):
    """Poisson(lam) samples (int32; JAX's default integer dtype): Knuth's product of
    uniforms below lam = 10, Hörmann's transformed rejection from there."""
    dt_out = _int_dtype(dtype)
    lam = _float_param(lam, DEFAULT_DTYPES["f"])
    shape = fnp.shape(lam) if shape is None else _shape(shape)
    lam = fnp.broadcast_to(lam, shape)
    small = lam < 10
    ks, kl = split(key)
    out = fnp.where(small, _poisson_small(ks, fnp.where(small, lam, 0), shape),
                    _poisson_large(kl, fnp.where(small, 10, lam), shape))
    return fnp.astype(fnp.where(lam == 0, 0, out), dt_out)


def multivariate_normal(key, mean, cov, shape=None, dtype=None, method="cholesky"):
    """Samples of N(mean, cov): mean + A z, z standard normal and A A^T = cov (A from
    method="cholesky", "eigh" or "svd"); shape is the batch shape (mean's and cov's batch
    axes broadcast by default), the event axis appended."""
    if method not in ("cholesky", "eigh", "svd"):
        raise ValueError(f"multivariate_normal: method must be 'cholesky', 'eigh' or 'svd', "
                         f"got {method!r}")
    dt = _float_dtype(dtype, "multivariate_normal")
    mean, cov = _float_param(mean, dt), _float_param(cov, dt)
    if fnp.ndim(mean) < 1 or fnp.ndim(cov) < 2:
        raise ValueError(f"multivariate_normal requires mean.ndim >= 1 and cov.ndim >= 2, "
                         f"got mean {tuple(fnp.shape(mean))} and cov {tuple(fnp.shape(cov))}")
    n = fnp.shape(mean)[-1]
    if fnp.shape(cov)[-2:] != (n, n):
        raise ValueError(f"multivariate_normal: cov must be (..., {n}, {n}) for a mean of "
                         f"{n} entries, got {tuple(fnp.shape(cov))}")
    if shape is None:
        shape = fnp.broadcast_shapes(fnp.shape(mean)[:-1], fnp.shape(cov)[:-2])
    shape = _shape(shape)
    if method == "cholesky":
        factor = fnp.linalg.cholesky(cov)
    elif method == "eigh":
        w, v = fnp.linalg.eigh(cov)
        factor = v * fnp.sqrt(fnp.maximum(w, 0))[..., None, :]
    else:
        u, s, _ = fnp.linalg.svd(cov)
        factor = u * fnp.sqrt(s)[..., None, :]
    z = normal(key, shape + (n,), dt)
    return mean + fnp.einsum("...ij,...j->...i", factor, z)


__all__ = ["PRNGKey", "key", "split", "fold_in", "random_bits", "uniform", "normal",
           "bernoulli", "gumbel", "categorical", "randint", "permutation", "shuffle", "choice",
           "key_data", "wrap_key_data", "exponential", "laplace", "logistic", "cauchy",
           "truncated_normal", "gamma", "loggamma", "beta", "dirichlet", "t", "poisson",
           "multivariate_normal"]


def __dir__():
    """The public names only, as jax.random's dir() (not the modules this one imports)."""
    return sorted(__all__)


# the users' functions: Array arguments unwrapped once, array results wrapped as ft.Array
for _name, _fn in list(globals().items()):
    if isinstance(_fn, _types.FunctionType) and not _name.startswith("_") and \
            _fn.__module__ == __name__:
        globals()[_name] = _arrays_in_out(_fn)
