"""ft.random: explicit-key pseudo random numbers (Threefry-2x32, counter based, as JAX).

A key is a uint32[2] array. Functions never mutate a key: split it to get fresh ones.
"""
from __future__ import annotations

import math
import types as _types

import numpy as np

from .core import arrays_in_out as _arrays_in_out
from .numpy import raw as fnp
from .core import ConcretizationTypeError, to_concrete
from .core.config import DEFAULT_DTYPES
from functrans.primitives import elementwise as ew
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


def _float_dtype(dtype):
    dt = np.dtype(dtype or DEFAULT_DTYPES["f"])
    if dt.kind != "f":
        raise TypeError(f"dtype argument must be a float dtype, got {dt}")
    return dt


def uniform(key, shape=(), dtype=None, minval=0.0, maxval=1.0):
    """Uniform floats in [minval, maxval)."""
    dt = _float_dtype(dtype)
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
    dt = _float_dtype(dtype)
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
    dt = _float_dtype(dtype)
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
    dt = np.dtype(dtype or DEFAULT_DTYPES["i"])
    if dt.kind not in "iu":
        raise TypeError(f"randint only accepts integer dtypes, got {dt}")
    return dt


def randint(key, shape, minval, maxval, dtype=None):
    """Integers in [minval, maxval), JAX's construction: two words of random bits per value,
    each reduced modulo the span and combined as hi * (2**32 mod span) + lo (mod span);
    an empty range gives minval. 32-bit words only: a span over 2**32 is refused."""
    dt = _int_dtype(dtype)
    shape = _shape(shape)
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


__all__ = ["PRNGKey", "key", "split", "fold_in", "random_bits", "uniform", "normal",
           "bernoulli", "gumbel", "categorical", "randint", "permutation", "shuffle", "choice"]


def __dir__():
    """The public names only, as jax.random's dir() (not the modules this one imports)."""
    return sorted(__all__)


# the users' functions: Array arguments unwrapped once, array results wrapped as ft.Array
for _name, _fn in list(globals().items()):
    if isinstance(_fn, _types.FunctionType) and not _name.startswith("_") and \
            _fn.__module__ == __name__:
        globals()[_name] = _arrays_in_out(_fn)
