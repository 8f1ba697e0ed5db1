"""F.ctc_loss: the connectionist temporal classification loss (Graves et al. 2006), the
negative log-likelihood of each target over all its alignments with the input, by the
forward (alpha) recursion in log space over the extended labels (a blank between and
around the target's labels). Written in functrans.numpy, so its gradient in log_probs is
the core's derivative of the recursion (torch's closed form gives the same values).
Impossible alignments (an input too short for its target) give inf and NaN gradients, or
0 and zero gradients with zero_infinity=True, as torch's."""
from __future__ import annotations

import numpy as np

from ...numpy import raw as fnp
from ...facade.creation import tensor
from ...facade.tensor import Tensor
from ...higher_order.custom import custom_jvp
from ._dispatch import _call, _check_reduction, _raw, _shape

# the log of "no path": finite, so that the recursion's derivative stays 0 (not NaN) there
_NONE = -1e30


def _ctc_fn(log_probs, ext, repeat_ok, input_lengths, ext_lengths, *, zero_infinity):
    """Per-sample losses (N,). log_probs (T, N, C); ext (N, L) the extended labels; repeat_ok
    (N, L): the skip from s - 2 is allowed; input_lengths (N,); ext_lengths (N,) = 2 S + 1."""
    t_max, n, _ = log_probs.shape
    width = ext.shape[1]
    dtype = log_probs.dtype
    none = np.asarray(_NONE, dtype)
    pos = np.arange(width)
    emit = [fnp.take_along_axis(log_probs[t], ext, axis=1) for t in range(t_max)]   # (N, L)
    alpha = fnp.where(fnp.asarray(pos < 2)[None, :] & (pos[None, :] < ext_lengths[:, None]),
                      emit[0], none)
    pad = fnp.full((n, 1), _NONE, dtype)
    for t in range(1, t_max):
        prev1 = fnp.concatenate([pad, alpha[:, :-1]], axis=1)
        prev2 = fnp.where(repeat_ok, fnp.concatenate([pad, pad, alpha[:, :-2]], axis=1), none)
        new = fnp.logaddexp(fnp.logaddexp(alpha, prev1), prev2) + emit[t]
        alpha = fnp.where((t < input_lengths)[:, None], new, alpha)
    last = fnp.take_along_axis(alpha, (ext_lengths - 1)[:, None], axis=1)[:, 0]
    before = fnp.take_along_axis(alpha, fnp.maximum(ext_lengths - 2, 0)[:, None], axis=1)[:, 0]
    ll = fnp.where(ext_lengths > 1, fnp.logaddexp(last, before), last)
    loss = -ll
    impossible = loss > -_NONE / 2
    if zero_infinity:
        return fnp.where(impossible, np.asarray(0, dtype), loss)
    return _infinite(loss, impossible, log_probs)


@custom_jvp
def _infinite(loss, impossible, log_probs):
    """inf where no alignment exists, and there a NaN derivative in every log-probability
    of the sample (torch's closed-form gradient is NaN throughout such a sample)."""
    return fnp.where(impossible, np.asarray(np.inf, loss.dtype), loss)


@_infinite.defjvp
def _infinite_jvp(primals, tangents):
    loss, impossible, _ = primals
    t_loss, _, t_lp = tangents
    nan = fnp.where(impossible, np.asarray(np.nan, loss.dtype), np.asarray(0, loss.dtype))
    keep = fnp.where(impossible, np.asarray(0, loss.dtype), np.asarray(1, loss.dtype))
    return (_infinite(loss, impossible, primals[2]),
            t_loss * keep + fnp.sum(t_lp, axis=(0, 2)) * nan)


def _ints(x, name):
    if isinstance(x, Tensor):
        x = x.detach().cpu().numpy()
    a = np.asarray(x)
    if a.dtype.kind not in "iu":
        raise RuntimeError(f"ctc_loss: {name} must be integers, got {a.dtype}")
    return a.astype(np.int64)


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean",
             zero_infinity=False):
    """log_probs (T, N, C) (log-softmax outputs; (T, C) unbatched), targets (N, S) padded or
    1-D concatenated, lengths per sample (tensors or sequences). reduction 'mean' divides
    each loss by its target length before averaging over the batch."""
    _check_reduction(reduction)
    shape = tuple(_shape(log_probs))
    unbatched = len(shape) == 2
    if unbatched:
        log_probs = log_probs.unsqueeze(1) if isinstance(log_probs, Tensor) else \
            fnp.expand_dims(log_probs, 1)
        shape = tuple(_shape(log_probs))
    if len(shape) != 3:
        raise RuntimeError(f"ctc_loss: expected log_probs to be 2-D or 3-D, got {len(shape)}-D")
    t_max, n, c = shape
    if not 0 <= blank < c:
        raise RuntimeError("blank must be in label range")
    tg = _ints(targets, "targets")
    il = _ints(input_lengths, "input_lengths").reshape(-1)
    tl = _ints(target_lengths, "target_lengths").reshape(-1)
    if unbatched and tg.ndim == 1:
        tg = tg[None, :]                     # one padded row (S,)
    if il.size != n or tl.size != n:
        raise RuntimeError(f"Expected input_lengths and target_lengths to have {n} entries "
                           f"(the batch size), got {il.size} and {tl.size}")
    if (il > t_max).any():
        raise RuntimeError(f"Expected input_lengths to have value at most {t_max}, but got "
                           f"value {int(il.max())} (while checking arguments for "
                           f"ctc_loss_allocate_outputs)")
    if tg.ndim == 2:
        if (tl > tg.shape[1]).any():
            raise RuntimeError(f"Expected tensor to have size at least {int(tl.max())} at "
                               f"dimension 1, but got size {tg.shape[1]} for argument #2 "
                               f"'targets' (while checking arguments for "
                               f"ctc_loss_allocate_outputs)")
        rows = [tg[i, :tl[i]] for i in range(n)]
    else:
        if tg.size != tl.sum():
            raise RuntimeError(f"Expected tensor to have size at least {int(tl.sum())} at "
                               f"dimension 0, but got size {tg.size} for argument #2 "
                               f"'targets' (while checking arguments for "
                               f"ctc_loss_allocate_outputs)")
        starts = np.concatenate([[0], np.cumsum(tl)[:-1]])
        rows = [tg[s:s + k] for s, k in zip(starts, tl)]
    s_max = max([len(r) for r in rows] + [0])
    ext = np.full((n, 2 * s_max + 1), blank, np.int64)
    repeat_ok = np.zeros(ext.shape, bool)
    for i, r in enumerate(rows):
        ext[i, 1:2 * len(r):2] = r
        for s in range(3, 2 * len(r), 2):          # a label may follow the one before it
            repeat_ok[i, s] = ext[i, s] != ext[i, s - 2]   # directly unless they are equal
    name = "WhereBackward0" if zero_infinity else "CtcLossBackward0"
    losses = _call(name, _ctc_fn, (log_probs, ext, repeat_ok, il, 2 * tl + 1),
                   zero_infinity=bool(zero_infinity))
    if unbatched:
        losses = losses[0]
    if reduction == "none":
        return losses
    if reduction == "sum":
        return losses.sum() if isinstance(losses, Tensor) else fnp.sum(losses)
    div = np.maximum(tl, 1).astype(np.dtype(_raw(log_probs).dtype))
    per = losses / (tensor(div) if isinstance(losses, Tensor) else div)
    return per.mean() if isinstance(per, Tensor) else fnp.mean(per)
