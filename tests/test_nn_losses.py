"""Losses (functional and modules) against float64 NumPy: every reduction, class weights,
ignore_index, label smoothing, probability targets, logits' stability, gradients, errors."""
import numpy as np
import pytest

import functrans as ft
import functrans.nn as nn
import functrans.nn.functional as F

RNG = np.random.default_rng(1)


def t64(a, requires_grad=False):
    return ft.tensor(np.asarray(a, np.float64), dtype=ft.float64, requires_grad=requires_grad)


def num(t):
    return t.detach().numpy()


def red(loss, reduction):
    return {"mean": loss.mean(), "sum": loss.sum(), "none": loss}[reduction]


def log_softmax(x, axis=1):
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


def ce_ref(x, t, w=None, ignore_index=-100, reduction="mean", ls=0.0):
    """torch's cross_entropy with class indices, written out in NumPy (N, C, d...)."""
    logp = log_softmax(x)
    c = x.shape[1]
    valid = t != ignore_index
    tc = np.where(valid, t, 0)
    picked = np.take_along_axis(logp, tc[:, None], axis=1)[:, 0]
    wv = np.ones(c) if w is None else w
    wi = np.where(valid, wv[tc], 0.0)
    nll = -picked * wi
    out = nll.sum() / wi.sum() if reduction == "mean" else red(nll, reduction)
    if ls:
        shape = (1, c) + (1,) * (x.ndim - 2)
        smooth = -(logp * (wv.reshape(shape) if w is not None else 1)).sum(1)
        smooth = np.where(valid, smooth, 0)
        if reduction == "mean":
            sm = smooth.sum() / (wi.sum() if w is not None else valid.sum())
        else:
            sm = red(smooth, reduction)
        out = (1 - ls) * out + sm * (ls / c)
    return out


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_and_l1(reduction):
    x, y = RNG.standard_normal((3, 4)), RNG.standard_normal((3, 4))
    tx = t64(x, True)
    out = F.mse_loss(tx, t64(y), reduction=reduction)
    np.testing.assert_allclose(num(out), red((x - y) ** 2, reduction), rtol=1e-12)
    np.testing.assert_allclose(num(nn.MSELoss(reduction=reduction)(tx, t64(y))), num(out))
    np.testing.assert_allclose(num(F.l1_loss(tx, t64(y), reduction=reduction)),
                               red(np.abs(x - y), reduction), rtol=1e-12)
    np.testing.assert_allclose(num(nn.L1Loss(reduction=reduction)(tx, t64(y))),
                               red(np.abs(x - y), reduction), rtol=1e-12)
    if reduction == "mean":
        assert out.grad_fn.name() == "MseLossBackward0"
        out.backward()
        np.testing.assert_allclose(num(tx.grad), 2 * (x - y) / x.size, rtol=1e-12)


def test_mse_warns_on_broadcasting_and_checks_reduction():
    with pytest.warns(UserWarning, match="Using a target size"):
        F.mse_loss(ft.zeros(3, 1), ft.zeros(3))
    with pytest.raises(ValueError, match="foo is not a valid value for reduction"):
        F.mse_loss(ft.zeros(3), ft.zeros(3), reduction="foo")
    with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated"):
        out = F.mse_loss(ft.ones(2), ft.zeros(2), size_average=False)
    assert out.item() == 2.0


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("ignore", [False, True])
@pytest.mark.parametrize("ls", [0.0, 0.1])
def test_cross_entropy_class_indices(reduction, weighted, ignore, ls):
    x = RNG.standard_normal((6, 5)) * 2
    t = RNG.integers(0, 5, 6)
    if ignore:
        t[[1, 4]] = 3
    w = RNG.uniform(0.5, 2.0, 5) if weighted else None
    kw = dict(reduction=reduction, label_smoothing=ls)
    if ignore:
        kw["ignore_index"] = 3
    tx = t64(x, True)
    out = F.cross_entropy(tx, ft.tensor(t), weight=None if w is None else t64(w), **kw)
    want = ce_ref(x, t, w, kw.get("ignore_index", -100), reduction, ls)
    np.testing.assert_allclose(num(out), want, rtol=1e-10, atol=1e-12)
    mod = nn.CrossEntropyLoss(weight=None if w is None else t64(w), **kw)
    np.testing.assert_allclose(num(mod(tx, ft.tensor(t))), want, rtol=1e-10, atol=1e-12)
    if reduction != "none":
        out.backward()
        h = 1e-6
        fd = np.zeros_like(x)
        for idx in np.ndindex(x.shape):
            xp, xm = x.copy(), x.copy()
            xp[idx] += h
            xm[idx] -= h
            fd[idx] = (ce_ref(xp, t, w, kw.get("ignore_index", -100), reduction, ls)
                       - ce_ref(xm, t, w, kw.get("ignore_index", -100), reduction, ls)) / (2 * h)
        np.testing.assert_allclose(num(tx.grad), fd, rtol=1e-6, atol=1e-8)


def test_cross_entropy_gradient_is_softmax_minus_onehot():
    x = RNG.standard_normal((4, 3))
    t = np.array([0, 2, 1, 2])
    tx = t64(x, True)
    loss = F.cross_entropy(tx, ft.tensor(t))
    assert loss.grad_fn.name() == "NllLossBackward0"
    loss.backward()
    p = np.exp(log_softmax(x))
    np.testing.assert_allclose(num(tx.grad), (p - np.eye(3)[t]) / 4, rtol=1e-12)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("shape", [(6, 5), (3, 5, 4, 2)])
def test_nll_loss_gathers_the_targets_entries(reduction, shape):
    """nll_loss of log-probabilities (N, C, d...) reads the targets' entries (a gather: no
    one-hot mask over every class), and its gradient puts -1 (over N for the mean) at them:
    values and gradients against NumPy, for flat and spatial targets."""
    x = log_softmax(RNG.standard_normal(shape))
    t = RNG.integers(0, shape[1], (shape[0],) + shape[2:])
    tx = t64(x, True)
    loss = F.nll_loss(tx, ft.tensor(t), reduction=reduction)
    prims = {st.prim.name for st in loss.grad_fn.info.steps}
    assert "gather" in prims and "eq" not in prims and "select_n" not in prims
    picked = np.take_along_axis(x, t[:, None], axis=1)[:, 0]
    np.testing.assert_allclose(num(loss), red(-picked, reduction), rtol=1e-12)
    g = RNG.standard_normal(np.shape(num(loss)))
    loss.backward(ft.tensor(g))
    want = np.zeros(shape)
    np.put_along_axis(want, t[:, None], -np.broadcast_to(g, t.shape)[:, None] /
                      (t.size if reduction == "mean" else 1), axis=1)
    np.testing.assert_allclose(num(tx.grad), want, rtol=1e-12)


def test_cross_entropy_spatial_and_unbatched():
    x = RNG.standard_normal((2, 4, 3, 3))
    t = RNG.integers(0, 4, (2, 3, 3))
    np.testing.assert_allclose(num(F.cross_entropy(t64(x), ft.tensor(t))), ce_ref(x, t),
                               rtol=1e-10)
    out = num(F.cross_entropy(t64(x), ft.tensor(t), reduction="none"))
    assert out.shape == (2, 3, 3)
    x1 = RNG.standard_normal(5)
    np.testing.assert_allclose(num(F.cross_entropy(t64(x1), ft.tensor(2))),
                               -log_softmax(x1[None])[0, 2], rtol=1e-12)


def test_cross_entropy_with_probability_targets():
    x = RNG.standard_normal((4, 3))
    p = RNG.dirichlet(np.ones(3), 4)
    got = F.cross_entropy(t64(x), t64(p), label_smoothing=0.2)
    ps = p * 0.8 + 0.2 / 3
    np.testing.assert_allclose(num(got), -(log_softmax(x) * ps).sum(1).mean(), rtol=1e-12)
    w = np.array([1.0, 2.0, 0.5])
    got = F.cross_entropy(t64(x), t64(p), weight=t64(w), reduction="sum")
    np.testing.assert_allclose(num(got), -(log_softmax(x) * p * w).sum(), rtol=1e-12)


def test_cross_entropy_errors():
    x = ft.randn(3, 4)
    with pytest.raises(IndexError, match="Target 4 is out of bounds."):
        F.cross_entropy(x, ft.tensor([0, 4, 1]))
    with pytest.raises(ValueError, match=r"Expected input batch_size \(3\) to match target "
                                         r"batch_size \(2\)."):
        F.cross_entropy(x, ft.tensor([0, 1]))
    with pytest.raises(RuntimeError, match="expected target dtype to be Long or Byte, but got "
                                           "Float"):
        F.nll_loss(x, ft.tensor([0.0, 1.0, 2.0]).reshape(3))
    with pytest.raises(RuntimeError, match="expected target dtype to be Long or Byte, but got "
                                           "Int"):
        F.cross_entropy(x, ft.tensor([0, 1, 2], dtype=ft.int32))
    assert F.cross_entropy(x, ft.tensor([0, 1, 2], dtype=ft.uint8)).item() == \
        F.cross_entropy(x, ft.tensor([0, 1, 2])).item()
    assert np.isnan(F.cross_entropy(x, ft.tensor([1, 1, 1]), ignore_index=1).item())


def test_class_target_shape_errors_are_torchs():
    """A target of the wrong shape gets torch's message for the input's rank; a floating
    target not shaped like the input is taken for class indices, as torch does."""
    cases = [((4, 5), np.zeros((4, 4)), "0D or 1D target tensor expected, multi-target not "
                                        "supported"),
             ((4, 5), np.zeros((4, 4), np.int64), "0D or 1D target tensor expected"),
             ((4, 5), np.zeros(4), "expected target dtype to be Long or Byte, but got Double"),
             ((2, 3, 4, 4), np.zeros((2, 4), np.int64), r"only batches of spatial targets "
              r"supported \(3D tensors\) but got targets of dimension: 2"),
             ((2, 3, 4, 4), np.zeros((2, 4, 5), np.int64),
              r"size mismatch \(got input: \[2, 3, 4, 4\] , target: \[2, 4, 5\]"),
             ((2, 3, 4), np.zeros((2, 5), np.int64), r"Expected target size \[2, 4\], got "
                                                     r"\[2, 5\]")]
    for shape, target, msg in cases:
        for fn in (F.nll_loss, F.cross_entropy):
            with pytest.raises(RuntimeError, match=msg):
                fn(ft.zeros(*shape), ft.tensor(target))


@pytest.mark.parametrize("kw", [dict(), dict(label_smoothing=0.2), dict(weight=True),
                                dict(weight=True, label_smoothing=0.2)])
def test_every_target_ignored_gives_nan_and_zero_gradient(kw):
    """'mean' over no target is 0/0 = NaN, but the gradient is 0 (the ignored targets
    contribute nothing), not NaN."""
    kw = dict(kw)
    if kw.get("weight"):
        kw["weight"] = t64(RNG.uniform(0.5, 2.0, 4))
    x = t64(RNG.standard_normal((3, 4)), True)
    loss = F.cross_entropy(x, ft.tensor([1, 1, 1]), ignore_index=1, **kw)
    assert np.isnan(loss.item())
    loss.backward()
    np.testing.assert_array_equal(num(x.grad), np.zeros((3, 4)))


def test_nll_loss():
    x = log_softmax(RNG.standard_normal((5, 4)))
    t = np.array([0, 3, 3, 1, 2])
    w = np.array([1.0, 0.5, 2.0, 1.5])
    np.testing.assert_allclose(num(F.nll_loss(t64(x), ft.tensor(t), weight=t64(w))),
                               -(x[np.arange(5), t] * w[t]).sum() / w[t].sum(), rtol=1e-12)
    np.testing.assert_allclose(num(nn.NLLLoss(reduction="none")(t64(x), ft.tensor(t))),
                               -x[np.arange(5), t], rtol=1e-12)


def bce_logits_ref(x, t, w=None, pw=None):
    logsig = -np.logaddexp(0, -x)
    log1msig = -np.logaddexp(0, x)
    pw = 1.0 if pw is None else pw
    loss = -(pw * t * logsig + (1 - t) * log1msig)
    return loss * (1.0 if w is None else w)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_bce_with_logits(reduction):
    x = RNG.standard_normal((4, 3)) * 3
    t = RNG.uniform(0, 1, (4, 3))
    w = RNG.uniform(0.5, 1.5, (4, 3))
    pw = np.array([1.0, 2.0, 0.5])
    tx = t64(x, True)
    out = F.binary_cross_entropy_with_logits(tx, t64(t), weight=t64(w), pos_weight=t64(pw),
                                             reduction=reduction)
    want = red(bce_logits_ref(x, t, w, pw), reduction)
    np.testing.assert_allclose(num(out), want, rtol=1e-10)
    mod = nn.BCEWithLogitsLoss(weight=t64(w), pos_weight=t64(pw), reduction=reduction)
    np.testing.assert_allclose(num(mod(tx, t64(t))), want, rtol=1e-10)
    if reduction == "sum":
        assert out.grad_fn.name() == "BinaryCrossEntropyWithLogitsBackward0"
        out.backward()
        sig = 1 / (1 + np.exp(-x))
        # d/dx of the loss: w * ((1 - t) * sig - pw * t * (1 - sig))
        np.testing.assert_allclose(num(tx.grad), w * ((1 - t) * sig - pw * t * (1 - sig)),
                                   rtol=1e-10)


def test_bce_with_logits_is_stable_for_large_logits():
    x = ft.tensor([1000.0, -1000.0], requires_grad=True)
    out = F.binary_cross_entropy_with_logits(x, ft.tensor([0.0, 1.0]), reduction="none")
    np.testing.assert_allclose(num(out), [1000.0, 1000.0])
    out.sum().backward()
    np.testing.assert_allclose(num(x.grad), [1.0, -1.0])
    with pytest.raises(ValueError, match="must be the same as input size"):
        F.binary_cross_entropy_with_logits(ft.zeros(3), ft.zeros(2))


def test_bce_gradient_is_finite_at_zero_and_one():
    """The derivative is torch's formula, (x - t) / max(x (1 - x), eps) (eps: 1e-12 in
    float32), not the clamped logs' (0 * inf = NaN at x = 0 and 1); the target's is
    -logit(x)."""
    p = t64([0.0, 1.0, 0.25, 1.0], True)
    t = t64([1.0, 0.0, 0.5, 1.0], True)
    F.binary_cross_entropy(p, t, reduction="sum").backward()
    eps = float(np.float32(1e-12))
    np.testing.assert_allclose(num(p.grad), [-1 / eps, 1 / eps, -0.25 / 0.1875, 0.0],
                               rtol=1e-12)
    np.testing.assert_allclose(num(t.grad), [np.inf, -np.inf, np.log(3.0), -np.inf])


def test_bce_on_probabilities_clamps_log():
    p = np.array([0.0, 0.3, 1.0])
    t = np.array([1.0, 0.0, 1.0])
    out = num(F.binary_cross_entropy(t64(p), t64(t), reduction="none"))
    np.testing.assert_allclose(out, [100.0, -np.log(0.7), 0.0], rtol=1e-12)
    np.testing.assert_allclose(num(nn.BCELoss()(t64(p), t64(t))), out.mean(), rtol=1e-12)
    with pytest.raises(RuntimeError, match="all elements of input should be between 0 and 1"):
        F.binary_cross_entropy(ft.tensor([1.5]), ft.tensor([1.0]))


def test_smooth_l1_huber_kl():
    x, y = np.array([0.2, -3.0, 1.0]), np.array([0.0, 0.0, 0.5])
    d = np.abs(x - y)
    np.testing.assert_allclose(num(F.smooth_l1_loss(t64(x), t64(y), reduction="none")),
                               np.where(d < 1, 0.5 * d * d, d - 0.5), rtol=1e-12)
    np.testing.assert_allclose(num(F.huber_loss(t64(x), t64(y), reduction="none", delta=2.0)),
                               np.where(d < 2, 0.5 * d * d, 2 * (d - 1)), rtol=1e-12)
    logq = log_softmax(RNG.standard_normal((2, 3)))
    p = RNG.dirichlet(np.ones(3), 2)
    np.testing.assert_allclose(num(F.kl_div(t64(logq), t64(p), reduction="batchmean")),
                               (p * (np.log(p) - logq)).sum() / 2, rtol=1e-12)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_weighted_regression_losses(reduction):
    """mse_loss, l1_loss and huber_loss with a weight of the input's shape: the elementwise
    loss times the weight; 'mean' divides by the sum of the weights for mse and l1 and by the
    element count for huber (torch's rules), and the grad_fn is the last op torch runs."""
    x, y = RNG.standard_normal((3, 4)), RNG.standard_normal((3, 4))
    w = RNG.uniform(0.5, 2.0, (3, 4))
    d = np.abs(x - y)
    losses = {"mse_loss": d * d, "l1_loss": d, "huber_loss": np.where(d < 1, 0.5 * d * d, d - 0.5)}
    names = {"none": "MulBackward0", "sum": "SumBackward0", "mean": "DivBackward0"}
    for fn, loss in losses.items():
        tx = t64(x, True)
        out = getattr(F, fn)(tx, t64(y), weight=t64(w), reduction=reduction)
        want = {"none": loss * w, "sum": (loss * w).sum(),
                "mean": (loss * w).sum() / (w.sum() if fn != "huber_loss" else w.size)}
        np.testing.assert_allclose(num(out), want[reduction], rtol=1e-12)
        name = "MeanBackward0" if fn == "huber_loss" and reduction == "mean" else names[reduction]
        assert out.grad_fn.name() == name
    with pytest.raises(ValueError, match="Weights and input must have the same size."):
        F.mse_loss(t64(x), t64(y), weight=t64(w[0]))


def test_l1_loss_grad_fn_and_smooth_l1_with_beta_zero():
    """torch's l1_loss is composite (abs, then the reduction), and smooth_l1_loss with
    beta=0 is l1_loss; the grad_fn names say so."""
    x, y = t64([0.5, -1.0, 2.0], True), t64([0.0, 0.0, 2.5])
    assert F.l1_loss(x, y, reduction="none").grad_fn.name() == "AbsBackward0"
    assert F.l1_loss(x, y, reduction="sum").grad_fn.name() == "SumBackward0"
    out = F.smooth_l1_loss(x, y, beta=0.0)
    assert out.grad_fn.name() == "MeanBackward0"
    np.testing.assert_allclose(out.item(), 2.0 / 3, rtol=1e-12)
