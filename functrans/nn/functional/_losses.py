"""ft.nn.functional's losses: mse, l1, smooth l1 / huber, nll, cross entropy, binary cross
entropy, kl_div."""
from __future__ import annotations

import warnings

import numpy as np

from ...core import Tracer, narrow_dtype
from ...numpy import raw as fnp
from ...higher_order.custom import custom_vjp
from ...facade.inplace import _tname
from ...facade.methods import abs_fn
from ...facade.tensor import Tensor
from .. import functions as _jnn
from ._dispatch import (
    _call, _check_reduction, _concrete, _legacy_reduction, _ndim, _reduce, _shape, _size,
    _squeeze0, _unsqueeze0)


# ---------------------------------------------------------------------------
# losses


def _mse_fn(x, t, *, reduction):
    d = x - t
    return _reduce(d * d, reduction)


def _broadcast_warning(input, target, what):
    if _shape(input) != _shape(target):
        warnings.warn(f"Using a target size ({_size(_shape(target))}) that is different to the "
                      f"input size ({_size(_shape(input))}). This will likely lead to incorrect "
                      "results due to broadcasting. Please ensure they have the same size.",
                      stacklevel=3)


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """(input - target)^2, reduced ('mean' | 'sum' | 'none'); with a weight (input's shape),
    weight * (input - target)^2, whose 'mean' is divided by the sum of the weights."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    _broadcast_warning(input, target, "mse_loss")
    if weight is not None:
        return _weighted(input, target, weight, "mse", reduction)
    return _call("MseLossBackward0", _mse_fn, (input, target), reduction=reduction)


# torch computes a weighted regression loss in Python (the elementwise loss times the
# weight, then torch.sum / a division): the grad_fn of each reduction
_WEIGHTED_NAMES = {"none": "MulBackward0", "sum": "SumBackward0", "mean": "DivBackward0"}


def _weighted(input, target, weight, kind, reduction, delta=1.0):
    """torch's weighted mse_loss, l1_loss and huber_loss: weight must have the input's
    shape; 'mean' divides by the sum of the weights (mse, l1) or by the element count
    (huber: torch takes the plain mean of the weighted loss there)."""
    if _shape(weight) != _shape(input):
        raise ValueError("Weights and input must have the same size.")
    name = _WEIGHTED_NAMES[reduction]
    if kind == "huber" and reduction == "mean":
        name = "MeanBackward0"
    return _call(name, _weighted_fn, (input, target, weight), kind=kind, reduction=reduction,
                 delta=float(delta))


def _weighted_fn(x, t, w, *, kind, reduction, delta):
    d = x - t
    if kind == "mse":
        loss = d * d
    elif kind == "l1":
        loss = abs_fn(d)
    else:
        loss = _smooth_l1_fn(x, t, beta=delta, reduction="none", huber=True)
    loss = loss * w
    if reduction == "mean" and kind != "huber":
        return fnp.sum(loss) / fnp.sum(w)
    return _reduce(loss, reduction)


def _l1_fn(x, t, *, reduction):
    return _reduce(abs_fn(x - t), reduction)


# torch's l1_loss is composite: abs of the difference, then the reduction
_L1_NAMES = {"none": "AbsBackward0", "sum": "SumBackward0", "mean": "MeanBackward0"}


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """|input - target|, reduced; with a weight (input's shape), weight * |input - target|,
    whose 'mean' is divided by the sum of the weights."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    _broadcast_warning(input, target, "l1_loss")
    if weight is not None:
        return _weighted(input, target, weight, "l1", reduction)
    return _call(_L1_NAMES[reduction], _l1_fn, (input, target), reduction=reduction)


def _smooth_l1_fn(x, t, *, beta, reduction, huber):
    d = abs_fn(x - t)
    if beta == 0:
        loss = d
    else:
        quad = 0.5 * d * d / beta if not huber else 0.5 * d * d
        lin = d - 0.5 * beta if not huber else beta * (d - 0.5 * beta)
        loss = fnp.where(d < beta, quad, lin)
    return _reduce(loss, reduction)


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """0.5 d^2 / beta where |d| < beta, else |d| - beta / 2 (beta=0: l1_loss, as torch)."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if beta == 0.0:
        return l1_loss(input, target, reduction=reduction)
    return _call("SmoothL1LossBackward0", _smooth_l1_fn, (input, target), beta=float(beta),
                 reduction=reduction, huber=False)


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """0.5 d^2 where |d| < delta, else delta (|d| - delta / 2); with a weight (input's
    shape), that times the weight ('mean': the plain mean, as torch)."""
    _check_reduction(reduction)
    if weight is not None:
        return _weighted(input, target, weight, "huber", reduction, delta)
    return _call("HuberLossBackward0", _smooth_l1_fn, (input, target), beta=float(delta),
                 reduction=reduction, huber=True)


def _class_shape(ndim):
    """Shape of a per-class vector broadcast against (N, C, d1, ...)."""
    return (1, -1) + (1,) * (ndim - 2)


def _onehot(t, c, ndim):
    classes = fnp.reshape(fnp.arange(c, dtype=np.int64), _class_shape(ndim))
    return fnp.expand_dims(t, 1) == classes


def _masked_mean(loss, denom):
    """sum(loss) / denom, where denom (the total weight of the targets not ignored) may be 0:
    the value is then NaN (0/0) and the gradient 0, as torch's (its backward skips the
    ignored targets instead of multiplying 0 by 1/0)."""
    empty = denom == 0
    safe = fnp.where(empty, fnp.ones((), denom.dtype), denom)
    return fnp.sum(loss) / safe + fnp.where(empty, fnp.full((), np.nan, loss.dtype),
                                            fnp.zeros((), loss.dtype))


def _nll_fn(logp, t, *w, ignore_index, reduction, smoothing, from_logits):
    """Negative log-likelihood of class indices t under log-probabilities (or logits)."""
    if from_logits:
        logp = _jnn.log_softmax(logp, axis=1)
    nd = fnp.ndim(logp)
    c = logp.shape[1]
    valid = t != ignore_index
    tc = fnp.where(valid, t, fnp.zeros((), t.dtype))
    hot = _onehot(tc, c, nd)
    zero = fnp.zeros((), logp.dtype)
    picked = fnp.sum(fnp.where(hot, logp, zero), axis=1)
    if w:
        wc = fnp.reshape(w[0], _class_shape(nd))
        wi = fnp.sum(fnp.where(hot, wc, zero), axis=1)
    else:
        wi = fnp.ones(t.shape, logp.dtype)
    wi = fnp.where(valid, wi, zero)
    loss = -(picked * wi)
    denom = fnp.sum(wi)
    out = _masked_mean(loss, denom) if reduction == "mean" else _reduce(loss, reduction)
    if smoothing:
        smooth = -fnp.sum(logp * wc if w else logp, axis=1)
        smooth = fnp.where(valid, smooth, zero)
        if reduction == "mean":
            sm = _masked_mean(smooth, denom if w else fnp.sum(fnp.astype(valid, logp.dtype)))
        else:
            sm = _reduce(smooth, reduction)
        out = (1 - smoothing) * out + sm * (smoothing / c)
    return out


def _nll_plain_fn(logp, t, *, reduction, from_logits):
    """_nll_fn without class weights, smoothing or ignored targets (the common case). From
    logits, the log-softmax's row pass also selects the target's entry (a one-hot mask in
    the same kernel, and its backward one fused pass); from log-probabilities, the targets'
    entries are gathered (an LSTM LM's 700 of 700 x 1000: 0.07 ms against 0.98 for the
    mask over every entry), their gradient scattered back."""
    if from_logits:
        logp = _jnn.log_softmax(logp, axis=1)
        hot = _onehot(t, logp.shape[1], fnp.ndim(logp))
        loss = -fnp.sum(fnp.where(hot, logp, fnp.zeros((), logp.dtype)), axis=1)
    else:
        loss = -fnp.squeeze(fnp.take_along_axis(logp, fnp.expand_dims(t, 1), axis=1), 1)
    return _reduce(loss, reduction)


def _soft_ce_fn(x, p, *w, reduction, smoothing):
    """Cross-entropy against class probabilities p (same shape as the logits x)."""
    logp = _jnn.log_softmax(x, axis=1)
    c = x.shape[1]
    if smoothing:
        p = p * (1 - smoothing) + smoothing / c
    term = logp * p
    if w:
        term = term * fnp.reshape(w[0], _class_shape(fnp.ndim(x)))
    loss = -fnp.sum(term, axis=1)
    if reduction == "mean":
        n = 1
        for s in loss.shape:
            n *= s
        return fnp.sum(loss) / n
    return _reduce(loss, reduction)


def _check_targets(target, n_classes, ignore_index):
    """Raise on out-of-range targets; return whether some target may be ignore_index."""
    arr = _concrete(target)
    if arr is None:
        return True
    ignored = arr == ignore_index
    bad = ~ignored & ((arr < 0) | (arr >= n_classes))
    if bad.any():
        raise IndexError(f"Target {int(arr[bad].flat[0])} is out of bounds.")
    return bool(ignored.any())


def _as_batched(input, target):
    """(input, target, squeeze) with an unbatched (C,) input made (1, C)."""
    if _ndim(input) == 1:
        t = target
        if _ndim(target) == 0:
            t = target.unsqueeze(0) if isinstance(target, Tensor) else fnp.expand_dims(target, 0)
        else:
            t = _unsqueeze0(target)
        return _unsqueeze0(input), t, True
    return input, target, False


def _squeeze_loss(out, squeeze, reduction):
    if squeeze and reduction == "none":
        return _squeeze0(out)
    return out


def _nll_name(input, reduction):
    """torch's grad_fn of the negative log-likelihood: its 2-D kernel for spatial inputs
    (N, C, d1, ...), which it runs on a (N, C, d1, d2 * ...) view unless there are exactly
    two spatial dims, so an unreduced loss of other ranks comes back through a view."""
    nd = _ndim(input)
    if nd <= 2:
        return "NllLossBackward0"
    return "ViewBackward0" if reduction == "none" and nd != 4 else "NllLoss2DBackward0"


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
             reduction="mean"):
    """-input[i, target[i]] * weight[target[i]], reduced; 'mean' divides by the total weight
    of the non-ignored targets."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    input, target, squeeze = _as_batched(input, target)
    _check_class_target(input, target, "nll_loss")
    ignored = _check_targets(target, _shape(input)[1], ignore_index)
    if weight is None and not ignored:
        out = _call(_nll_name(input, reduction), _nll_plain_fn, (input, target),
                    reduction=reduction, from_logits=False)
        return _squeeze_loss(out, squeeze, reduction)
    args = (input, target) if weight is None else (input, target, weight)
    out = _call(_nll_name(input, reduction), _nll_fn, args, ignore_index=int(ignore_index),
                reduction=reduction, smoothing=0.0, from_logits=False)
    return _squeeze_loss(out, squeeze, reduction)


def _check_class_target(input, target, what):
    """torch's checks of a class-index target against an (N, C, d1, ...) input: its shape
    first, then its dtype (int64 or uint8), with torch's messages."""
    si, st = _shape(input), _shape(target)
    if len(si) == 2 and len(st) > 1:
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    if len(si) == 4 and len(st) != 3:
        raise RuntimeError("only batches of spatial targets supported (3D tensors) but got "
                           f"targets of dimension: {len(st)}")
    dt = np.dtype(target.dtype)
    # torch takes int64 (Long) and uint8 (Byte) only; traced by a JAX-side transformation
    # (ft.jit, ft.grad) with x64 off, an int64 target arrives canonicalized to int32.
    if dt not in (np.int64, np.uint8) and not (
            dt == narrow_dtype(np.dtype(np.int64)) and isinstance(getattr(target, "_data", None),
                                                                  Tracer)):
        raise RuntimeError(f"expected target dtype to be Long or Byte, but got {_tname(dt)}")
    if st != si[:1] + si[2:]:
        if len(si) == 2:
            raise ValueError(f"Expected input batch_size ({si[0]}) to match target batch_size "
                             f"({st[0]}).")
        if len(si) == 4:
            raise RuntimeError(f"size mismatch (got input: {list(si)} , target: {list(st)}")
        raise RuntimeError(f"Expected target size {list(si[:1] + si[2:])}, got {list(st)}")


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                  reduction="mean", label_smoothing=0.0):
    """log_softmax over dim 1, then the negative log-likelihood of class indices (integer
    target of shape (N, d1, ...)) or of class probabilities (float target shaped like input)."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    input, target, squeeze = _as_batched(input, target)
    wargs = () if weight is None else (weight,)
    if np.dtype(target.dtype).kind == "f" and _shape(target) == _shape(input):
        # class probabilities; a floating target of another shape is taken for class
        # indices (and refused by their checks), as torch does
        out = _call("DivBackward1" if reduction == "mean" else "NegBackward0", _soft_ce_fn,
                    (input, target) + wargs, reduction=reduction,
                    smoothing=float(label_smoothing))
        return _squeeze_loss(out, squeeze, reduction)
    _check_class_target(input, target, "cross_entropy")
    ignored = _check_targets(target, _shape(input)[1], ignore_index)
    if weight is None and not label_smoothing and not ignored:
        out = _call(_nll_name(input, reduction), _nll_plain_fn, (input, target),
                    reduction=reduction, from_logits=True)
        return _squeeze_loss(out, squeeze, reduction)
    name = "AddBackward0" if label_smoothing else _nll_name(input, reduction)
    out = _call(name, _nll_fn, (input, target) + wargs, ignore_index=int(ignore_index),
                reduction=reduction, smoothing=float(label_smoothing), from_logits=True)
    return _squeeze_loss(out, squeeze, reduction)


# torch's EPSILON of the backward: 1e-12 rounded to float32 (a float constant there)
_BCE_EPS = float(np.float32(1e-12))


@custom_vjp
def _bce_elementwise(x, t):
    """-(t log x + (1 - t) log(1 - x)), each log clamped at -100 (as torch)."""
    return -(t * fnp.maximum(fnp.log(x), -100.0) + (1 - t) * fnp.maximum(fnp.log1p(-x), -100.0))


def _bce_fwd(x, t):
    return _bce_elementwise(x, t), (x, t)


def _bce_bwd(res, g):
    """torch's derivatives, not the clamped logs': (x - t) / max(x (1 - x), eps) for the
    input (finite at x = 0 and 1, where the clamp's derivative would be 0 * inf = NaN) and
    -logit(x) for the target."""
    x, t = res
    return (g * (x - t) / fnp.maximum((1 - x) * x, _BCE_EPS),
            g * (fnp.log1p(-x) - fnp.log(x)))


_bce_elementwise.defvjp(_bce_fwd, _bce_bwd)


def _bce_fn(x, t, *w, reduction):
    loss = _bce_elementwise(x, t)
    if w:
        loss = loss * w[0]
    return _reduce(loss, reduction)


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None,
                         reduction="mean"):
    """-(t log x + (1 - t) log(1 - x)) on probabilities x, each log clamped at -100 (as torch)."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if _shape(input) != _shape(target):
        raise ValueError(f"Using a target size ({_size(_shape(target))}) that is different to the "
                         f"input size ({_size(_shape(input))}) is deprecated. Please ensure they "
                         "have the same size.")
    arr = _concrete(input)
    if arr is not None and arr.size and ((arr < 0).any() or (arr > 1).any()):
        raise RuntimeError("all elements of input should be between 0 and 1")
    args = (input, target) if weight is None else (input, target, weight)
    return _call("BinaryCrossEntropyBackward0", _bce_fn, args, reduction=reduction)


def _bce_logits_fn(x, t, *extra, reduction, has_w, has_pw):
    i = 0
    w = pw = None
    if has_w:
        w = extra[i]
        i += 1
    if has_pw:
        pw = extra[i]
    sp = _jnn.softplus(-x)                       # log(1 + exp(-x)), stable
    if pw is None:
        loss = (1 - t) * x + sp
    else:
        loss = (1 - t) * x + (1 + (pw - 1) * t) * sp
    if w is not None:
        loss = loss * w
    return _reduce(loss, reduction)


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None,
                                     reduction="mean", pos_weight=None):
    """BCE on logits, computed stably: (1 - t) x + (1 + (pos_weight - 1) t) log(1 + exp(-x))."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if _shape(input) != _shape(target):
        raise ValueError(f"Target size ({_size(_shape(target))}) must be the same as input size "
                         f"({_size(_shape(input))})")
    extra = tuple(a for a in (weight, pos_weight) if a is not None)
    return _call("BinaryCrossEntropyWithLogitsBackward0", _bce_logits_fn,
                 (input, target) + extra, reduction=reduction, has_w=weight is not None,
                 has_pw=pos_weight is not None)


@custom_vjp
def _xlogy(x, y):
    """x log y, 0 where x == 0 (torch.xlogy)."""
    zero = x == 0
    return fnp.where(zero, fnp.zeros((), x.dtype),
                     x * fnp.log(fnp.where(zero, fnp.ones((), y.dtype), y)))


def _xlogy_fwd(x, y):
    return _xlogy(x, y), (x, y)


def _xlogy_bwd(res, g):
    """torch's derivatives of xlogy: log y where x != 0 (else 0), and x / y (0/0 = NaN at
    x = y = 0, as torch's)."""
    x, y = res
    dx = _xlogy(fnp.astype(x != 0, x.dtype), y)
    return g * dx, g * x / y


_xlogy.defvjp(_xlogy_fwd, _xlogy_bwd)


def _kl_fn(x, t, *, reduction, log_target):
    if log_target:
        loss = fnp.exp(t) * (t - x)
    else:
        loss = _xlogy(t, t) - t * x
    if reduction == "batchmean":
        return fnp.sum(loss) / x.shape[0]
    return _reduce(loss, reduction)


# torch's kl_div is composite: target * (log target - input) as xlogy(t, t) - t * input (a
# Sub; with log_target, exp(t) * (t - input), a Mul), then the reduction
_KL_NAMES = {"none": "SubBackward0", "sum": "SumBackward0", "mean": "MeanBackward0",
             "batchmean": "DivBackward0"}


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """KL(target || exp(input)) pointwise: target (log target - input), reduced."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if reduction not in ("mean", "sum", "none", "batchmean"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return _call(_KL_NAMES[reduction] if reduction != "none" or not log_target else
                 "MulBackward0", _kl_fn, (input, target), reduction=reduction,
                 log_target=bool(log_target))
