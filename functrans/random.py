"""ft.random: explicit-key pseudo random numbers (Threefry-2x32, counter based, as JAX).

A key is a uint32[2] array. Functions never mutate a key: split it to get fresh ones.
"""
from __future__ import annotations

import math

import numpy as np

from . import numpy as fnp
from .core import to_concrete
from functrans.primitives import elementwise as ew
from functrans.primitives import random as prand
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
    dt = np.dtype(dtype or np.float32)
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
    """Booleans that are True with probability p."""
    p = fnp.asarray(p) if not hasattr(p, "aval") else p
    shape = fnp.shape(p) if shape is None else _shape(shape)
    return fnp.less(uniform(key, shape, np.float32 if np.dtype(p.dtype) != np.float64
                            else np.float64), p)


def categorical(key, logits, axis=-1, shape=None):
    """Samples from the categorical distribution given by logits (Gumbel-max)."""
    logits = fnp.asarray(logits)
    if shape is None:
        shape = tuple(s for i, s in enumerate(fnp.shape(logits)) if i != axis % fnp.ndim(logits))
    gshape = _shape(shape)
    ax = axis % fnp.ndim(logits)
    # shape = extra leading sample axes + the logits' batch shape; the class axis of the
    # noise sits where it sits in logits, so that logits broadcast against it
    nbatch = fnp.ndim(logits) - 1
    prefix, batch = gshape[:len(gshape) - nbatch], gshape[len(gshape) - nbatch:]
    full_shape = prefix + batch[:ax] + (fnp.shape(logits)[ax],) + batch[ax:]
    u = uniform(key, full_shape, logits.dtype if np.dtype(logits.dtype).kind == "f" else None)
    gumbel = fnp.negative(fnp.log(fnp.negative(fnp.log(fnp.maximum(u, 1e-20)))))
    return fnp.argmax(fnp.add(logits, gumbel), axis=len(prefix) + ax)


def randint(key, shape, minval, maxval, dtype=np.int32):
    """Integers in [minval, maxval)."""
    shape = _shape(shape)
    span = int(to_concrete(maxval)) - int(to_concrete(minval))
    u = uniform(key, shape, np.float64)
    v = fnp.floor(fnp.multiply(u, float(span)))
    return fnp.astype(fnp.add(fnp.astype(v, np.int64), int(to_concrete(minval))), dtype)


def permutation(key, x):
    """A random permutation of range(x) or of the rows of x (concrete keys only)."""
    n = int(x) if isinstance(x, int) else fnp.shape(x)[0]
    u = to_concrete(uniform(key, (n,), np.float64))
    if u is None:
        raise NotImplementedError("permutation needs a concrete key (sorting is not traced)")
    order = np.argsort(np.asarray(u), kind="stable").astype(np.int32)
    return order if isinstance(x, int) else fnp.take(x, order, axis=0)
