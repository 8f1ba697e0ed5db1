"""Attention as functions: scaled_dot_product_attention and the multi-head attention forward
of torch.nn.MultiheadAttention, each written once with functrans.numpy (one facade op on
Tensors). Masks arrive as additive float arrays (0 or -inf), built from torch's bool or
float masks by the callers."""
from __future__ import annotations

import math

import numpy as np

from ...numpy import raw as fnp
from ...facade.inplace import _cname
from .. import functions as _jnn
from ._activations import _dropout_mask, _refuse_random_under_trace
from ._dispatch import _call, _concrete, _is_raw, _shape


def _attend(q, k, v, mask, drop, scale, safe=False):
    """softmax(q kᵀ scale + mask) (times a dropout mask) @ v; also the weights. safe: a query
    whose keys are all masked out gets weights 0 (torch's _safe_softmax, which
    scaled_dot_product_attention uses) rather than 0/0 = NaN, and no gradient."""
    s = fnp.matmul(q, fnp.swapaxes(k, -1, -2)) * scale
    if mask is not None:
        s = s + mask
    if safe and mask is not None:
        empty = fnp.all(s == -np.inf, axis=-1, keepdims=True)
        zero = fnp.zeros((), s.dtype)
        w = fnp.where(empty, zero, _jnn.softmax(fnp.where(empty, zero, s), axis=-1))
    else:
        w = _jnn.softmax(s, axis=-1)
    if drop is not None:
        w = w * drop
    return fnp.matmul(w, v), w


def _sdpa_fn(q, k, v, *rest, scale, has_mask, has_drop, safe=True):
    mask = rest[0] if has_mask else None
    drop = rest[-1] if has_drop else None
    return _attend(q, k, v, mask, drop, scale, safe=safe)[0]


def additive_mask(mask, dtype, allowed_when_true, same_dtype=False):
    """torch's mask as an additive float array: a bool mask gives 0 / -inf (True means
    'may attend' for scaled_dot_product_attention, 'masked out' for MultiheadAttention);
    a float mask is added as is (same_dtype: it must have the query's dtype, as
    scaled_dot_product_attention requires)."""
    m = _concrete(mask)
    if m is None:
        raise NotImplementedError("attention masks must be concrete (not traced) values; build "
                                  "them outside ft.jit/ft.vmap and pass them in")
    if m.dtype == np.bool_:
        keep = m if allowed_when_true else ~m
        return np.where(keep, 0.0, -np.inf).astype(dtype)
    if m.dtype.kind != "f" or (same_dtype and m.dtype != np.dtype(dtype)):
        raise RuntimeError(f"Expected attn_mask dtype to be bool or float or to match query "
                           f"dtype, but got attn_mask.dtype: {_cname(m.dtype)} and  query.dtype: "
                           f"{_cname(np.dtype(dtype))} instead.")
    return m.astype(dtype)


def _drop(shape, p, dtype, args):
    """A dropout mask for attention weights (None when p is 0)."""
    if not p:
        return None
    if _is_raw(args):
        for a in args:
            _refuse_random_under_trace(a, "attention dropout")
    return _dropout_mask(shape, p, dtype)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    """softmax(Q Kᵀ / sqrt(E) + mask) V over the last two axes (any leading batch axes); a bool
    mask's True entries take part; is_causal masks the upper triangle; dropout_p drops weights."""
    if enable_gqa:
        raise NotImplementedError("scaled_dot_product_attention: enable_gqa=True is not "
                                  "supported; repeat the key/value heads yourself")
    if is_causal and attn_mask is not None:
        raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be set "
                           "when is_causal=True")
    dtype = np.dtype(query.dtype)
    L, S = _shape(query)[-2], _shape(key)[-2]
    scale = 1.0 / math.sqrt(_shape(query)[-1]) if scale is None else float(scale)
    mask = None
    if is_causal:
        mask = np.where(np.tril(np.ones((L, S), bool)), 0.0, -np.inf).astype(dtype)
    elif attn_mask is not None:
        mask = additive_mask(attn_mask, dtype, allowed_when_true=True, same_dtype=True)
    batch = np.broadcast_shapes(_shape(query)[:-2], _shape(key)[:-2])
    drop = _drop(batch + (L, S), dropout_p, dtype, (query, key, value))
    args = (query, key, value) + ((mask,) if mask is not None else ()) + \
        ((drop,) if drop is not None else ())
    # a causal mask leaves every query key 0 when there is a key: no all-masked row, so
    # the safe softmax's test (a pass over the scores and a select each way) is skipped.
    # The node saves the softmax's values when they are no more than q, k and v hold (per
    # batch element), so that its backward does not compute q kᵀ and the softmax again;
    # longer sequences recompute them, as flash attention does (memory linear in length)
    save = L * S <= L * _shape(query)[-1] + S * (_shape(key)[-1] + _shape(value)[-1])
    return _call("ScaledDotProductAttentionBackward0", _sdpa_fn, args, save=save, scale=scale,
                 has_mask=mask is not None, has_drop=drop is not None,
                 safe=not (is_causal and S > 0))


def _heads(x, w, b, h, extra=None, zero=False):
    """(N, T, E_in) @ wᵀ + b split into heads: (N, h, T, E/h); extra (1, 1, E): one more
    step appended to every sequence before the split (add_bias_kv), zero: a step of zeros
    appended after it (add_zero_attn)."""
    y = fnp.matmul(x, fnp.swapaxes(w, -1, -2))
    if b is not None:
        y = y + b
    n, t, e = fnp.shape(y)
    if extra is not None:
        y = fnp.concatenate([y, fnp.broadcast_to(extra, (n, 1, e))], axis=1)
        t += 1
    y = fnp.swapaxes(fnp.reshape(y, (n, t, h, e // h)), 1, 2)
    if zero:
        y = fnp.concatenate([y, fnp.zeros((n, h, 1, e // h), y.dtype)], axis=2)
    return y


def _mha_fn(q, k, v, *w, num_heads, packed, has_bias, has_mask, has_drop, need_weights,
            average, bias_kv=False, zero_attn=False):
    """Multi-head attention of batch-first (N, L, E) q and (N, S, kdim/vdim) k, v (with
    bias_kv, the last two weights are bias_k and bias_v)."""
    w = list(w)
    drop = w.pop() if has_drop else None
    mask = w.pop() if has_mask else None
    bias_v = w.pop() if bias_kv else None
    bias_k = w.pop() if bias_kv else None
    e = fnp.shape(q)[-1]
    if packed:
        w_in, w = w[0], w[1:]
        wq, wk, wv = w_in[:e], w_in[e:2 * e], w_in[2 * e:]
    else:
        (wq, wk, wv), w = w[:3], w[3:]
    if has_bias:
        b_in, wo, bo = w
        bq, bk, bv = b_in[:e], b_in[e:2 * e], b_in[2 * e:]
    else:
        (wo,), bq, bk, bv, bo = w, None, None, None, None
    qh = _heads(q, wq, bq, num_heads)
    kh = _heads(k, wk, bk, num_heads, bias_k, zero_attn)
    vh = _heads(v, wv, bv, num_heads, bias_v, zero_attn)
    # without the weights torch runs scaled_dot_product_attention (the safe softmax); with
    # them, a plain softmax (NaN for a query whose keys are all masked)
    out, weights = _attend(qh, kh, vh, mask, drop, 1.0 / math.sqrt(e // num_heads),
                           safe=not need_weights)
    n, _, L, _ = fnp.shape(out)
    out = fnp.reshape(fnp.swapaxes(out, 1, 2), (n, L, e))
    out = fnp.matmul(out, fnp.swapaxes(wo, -1, -2))
    if bo is not None:
        out = out + bo
    if not need_weights:
        return out
    return out, (fnp.mean(weights, axis=1) if average else weights)


def multi_head_attention(q, k, v, weights, *, num_heads, packed, has_bias, mask, dropout_p,
                         need_weights, average, bias_kv=False, zero_attn=False):
    """torch.nn.MultiheadAttention's forward on batch-first (N, L, E) inputs; mask additive,
    broadcastable to (N, num_heads, L, S + bias_kv + zero_attn); with bias_kv, weights end
    with bias_k and bias_v."""
    n, L, _ = _shape(q)
    S = _shape(k)[1] + bool(bias_kv) + bool(zero_attn)
    drop = _drop((n, num_heads, L, S), dropout_p, np.dtype(q.dtype), (q, k, v))
    args = (q, k, v) + tuple(weights) + ((mask,) if mask is not None else ()) + \
        ((drop,) if drop is not None else ())
    return _call("MultiheadAttentionBackward0", _mha_fn, args, num_heads=num_heads,
                 packed=packed, has_bias=has_bias, has_mask=mask is not None,
                 has_drop=drop is not None, need_weights=need_weights, average=average,
                 bias_kv=bool(bias_kv), zero_attn=bool(zero_attn))
