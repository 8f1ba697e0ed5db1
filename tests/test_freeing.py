"""PyTorch's freeing semantics: a backward frees the values saved by the nodes it ran
(unless retain_graph), and each op saves only what its backward reads."""
from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import functrans as ft
from functrans.facade.plumbing import FREED_MSG
from conftest import fd_grad

F = ft.nn.functional
FREED = "Trying to backward through the graph a second time"


def _leaf(shape, seed=0):
    rng = np.random.default_rng(seed)
    return ft.tensor(rng.standard_normal(shape), requires_grad=True)


def test_freed_msg_is_torchs():
    assert FREED_MSG.startswith(FREED + " (or directly access saved tensors after they have "
                                "already been freed).")


def test_grad_frees_the_nodes_it_ran_even_when_a_producer_saved_the_value():
    x = _leaf((4, 3))
    h = x.exp()                       # ExpBackward0 saves h (its output)
    loss = (h * h).sum()              # MulBackward0 saves h twice
    g, = ft.autograd.grad(loss, h)
    np.testing.assert_allclose(g.numpy(), 2 * np.exp(x.detach().numpy()))
    with pytest.raises(RuntimeError, match=FREED):
        loss.backward()


def test_grad_keeps_the_values_of_paths_it_did_not_run():
    a, b, c, d = (_leaf((3,), s) for s in range(4))
    loss = (a * b).sum() + (c.exp() * d).sum()
    ga, = ft.autograd.grad(loss, a)          # runs a*b only
    np.testing.assert_allclose(ga.numpy(), b.detach().numpy())
    gc_, = ft.autograd.grad(loss, c)         # c.exp() * d was not run: still saved
    cv, dv = c.detach().numpy(), d.detach().numpy()
    np.testing.assert_allclose(gc_.numpy(), fd_grad(lambda v: np.sum(np.exp(v) * dv), cv),
                               rtol=1e-6, atol=1e-8)
    with pytest.raises(RuntimeError, match=FREED):
        ft.autograd.grad(loss, b)            # a*b ran (and was freed) in the first call
    with pytest.raises(RuntimeError, match=FREED):
        ft.autograd.grad(loss, d)


def test_backward_inputs_frees_only_the_paths_to_inputs():
    a, b, c = (_leaf((3,), s) for s in range(3))
    loss = (a * b).sum() + (c * c).sum()
    loss.backward(inputs=[a])
    assert b.grad is None and c.grad is None
    loss.backward(inputs=[c])
    np.testing.assert_allclose(c.grad.numpy(), 2 * c.detach().numpy())
    with pytest.raises(RuntimeError, match=FREED):
        loss.backward(inputs=[b])


def test_retain_graph_true_keeps_everything():
    x = _leaf((4,))
    h = x.exp()
    loss = (h * h).sum()
    ft.autograd.grad(loss, h, retain_graph=True)
    loss.backward()
    xv = x.detach().numpy()
    np.testing.assert_allclose(x.grad.numpy(), fd_grad(lambda v: np.sum(np.exp(v) ** 2), xv),
                               rtol=1e-6)


def test_create_graph_retains_by_default_and_frees_with_retain_graph_false():
    x = _leaf((4,))
    h = x.exp()
    loss = (h * h).sum()
    g, = ft.autograd.grad(loss, h, create_graph=True)     # retain_graph defaults to True
    loss.backward()
    xv = x.detach().numpy()
    np.testing.assert_allclose(x.grad.numpy(), fd_grad(lambda v: np.sum(np.exp(v) ** 2), xv),
                               rtol=1e-6)
    h2 = x.exp()
    loss2 = (h2 * h2).sum()
    ft.autograd.grad(loss2, h2, create_graph=True, retain_graph=False)
    with pytest.raises(RuntimeError, match=FREED):
        loss2.backward()


def test_relu_keeps_its_mask_not_the_preactivation():
    x = _leaf((16, 16))
    pre = x * 2.0
    data = weakref.ref(pre._data)
    r = F.relu(pre)
    report = ft.autograd.saved_tensors_report(r)
    assert [(e["node"], e["what"], e["dtype"]) for e in report] == [
        ("MulBackward0", "input 1", "float64"), ("ReluBackward0", "intermediate", "bool")]
    del pre
    gc.collect()
    assert data() is None                      # the pre-activation's memory is back
    loss = (r * r).sum()
    loss.backward()
    xv = x.detach().numpy()
    np.testing.assert_allclose(x.grad.numpy(),
                               fd_grad(lambda v: np.sum(np.maximum(2 * v, 0) ** 2), xv),
                               rtol=1e-6, atol=1e-8)


def test_relu_double_backward_from_the_mask():
    x = _leaf((5,))
    g, = ft.autograd.grad((F.relu(x) ** 3).sum(), x, create_graph=True)
    gg, = ft.autograd.grad(g.sum(), x)
    xv = x.detach().numpy()
    np.testing.assert_allclose(g.detach().numpy(),
                               fd_grad(lambda v: np.sum(np.maximum(v, 0) ** 3), xv), rtol=1e-6)
    np.testing.assert_allclose(gg.numpy(),
                               fd_grad(lambda v: np.sum(3 * np.maximum(v, 0) ** 2), xv),
                               rtol=1e-6, atol=1e-8)


_T = np.random.default_rng(7).random((6, 5)) * 0.8 + 0.1       # targets/probabilities
_IDX = np.array([0, 1, 2, 3, 4, 0])
# every ft.nn.functional op that records a node: (call, shapes of its float inputs)
OPS = {
    "relu": (lambda x: F.relu(x), [(6, 5)]),
    "relu6": (lambda x: F.relu6(3 * x), [(6, 5)]),
    "leaky_relu": (lambda x: F.leaky_relu(x, 0.1), [(6, 5)]),
    "elu": (lambda x: F.elu(x), [(6, 5)]),
    "gelu": (lambda x: F.gelu(x), [(6, 5)]),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), [(6, 5)]),
    "silu": (lambda x: F.silu(x), [(6, 5)]),
    "sigmoid": (lambda x: F.sigmoid(x), [(6, 5)]),
    "tanh": (lambda x: F.tanh(x), [(6, 5)]),
    "softplus": (lambda x: F.softplus(x), [(6, 5)]),
    "logsigmoid": (lambda x: F.logsigmoid(x), [(6, 5)]),
    "hardtanh": (lambda x: F.hardtanh(x), [(6, 5)]),
    "softmax": (lambda x: F.softmax(x, -1), [(6, 5)]),
    "log_softmax": (lambda x: F.log_softmax(x, -1), [(6, 5)]),
    "softmin": (lambda x: F.softmin(x, -1), [(6, 5)]),
    "conv2d": (lambda x, w, b: F.conv2d(x, w, b, padding=1), [(2, 3, 5, 5), (4, 3, 3, 3), (4,)]),
    "max_pool2d": (lambda x: F.max_pool2d(x, 2), [(2, 3, 4, 4)]),
    "avg_pool2d": (lambda x: F.avg_pool2d(x, 2), [(2, 3, 4, 4)]),
    "adaptive_avg_pool2d": (lambda x: F.adaptive_avg_pool2d(x, 2), [(2, 3, 4, 4)]),
    "pad": (lambda x: F.pad(x, (1, 2)), [(2, 3, 4)]),
    "linear": (lambda x, w, b: F.linear(x, w, b), [(6, 5), (3, 5), (3,)]),
    "bilinear": (lambda a, b, w: F.bilinear(a, b, w), [(6, 3), (6, 4), (2, 3, 4)]),
    "embedding": (lambda w: F.embedding(ft.tensor(_IDX), w), [(5, 3)]),
    "mse_loss": (lambda x: F.mse_loss(x, ft.tensor(_T)), [(6, 5)]),
    "l1_loss": (lambda x: F.l1_loss(x, ft.tensor(_T)), [(6, 5)]),
    "smooth_l1_loss": (lambda x: F.smooth_l1_loss(x, ft.tensor(_T)), [(6, 5)]),
    "huber_loss": (lambda x: F.huber_loss(x, ft.tensor(_T), delta=0.5), [(6, 5)]),
    "nll_loss": (lambda x: F.nll_loss(x, ft.tensor(_IDX)), [(6, 5)]),
    "cross_entropy": (lambda x: F.cross_entropy(x, ft.tensor(_IDX)), [(6, 5)]),
    "binary_cross_entropy": (lambda x: F.binary_cross_entropy(x.sigmoid(), ft.tensor(_T)),
                             [(6, 5)]),
    "binary_cross_entropy_with_logits": (
        lambda x: F.binary_cross_entropy_with_logits(x, ft.tensor(_T)), [(6, 5)]),
    "kl_div": (lambda x: F.kl_div(x, ft.tensor(_T)), [(6, 5)]),
    "normalize": (lambda x: F.normalize(x), [(6, 5)]),
    "cosine_similarity": (lambda a, b: F.cosine_similarity(a, b), [(6, 5), (6, 5)]),
    "layer_norm": (lambda x, w, b: F.layer_norm(x, (5,), w, b), [(6, 5), (5,), (5,)]),
    "batch_norm": (lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
                   [(6, 5), (5,), (5,)]),
    "group_norm": (lambda x, w, b: F.group_norm(x, 2, w, b), [(3, 4, 5), (4,), (4,)]),
}


# ops computed through a custom_jvp function (|x| with torch's derivative sign(x)): its
# node records the rule's forward, which computes the output with the rule's residual
# (reverse.residual_form), and keeps that residual (one float array: sign(x)) instead of
# running the function, then the rule again, in the backward
CUSTOM_RULE_RESIDUALS = {"l1_loss": 1, "smooth_l1_loss": 1, "huber_loss": 1}


@pytest.mark.parametrize("name", list(OPS))
def test_functional_ops_save_no_float_intermediate(name):
    """Each op keeps alive only inputs, outputs and integer/bool intermediates (and the
    residuals of a custom rule: CUSTOM_RULE_RESIDUALS); the gradient (recomputing the
    float intermediates) matches finite differences."""
    f, shapes = OPS[name]
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal(s) for s in shapes]
    ts = [ft.tensor(x, requires_grad=True) for x in xs]
    out = f(*ts)
    w = rng.standard_normal(out.shape)
    node = out.grad_fn
    kept = [e for e in ft.autograd.saved_tensors_report(out) if e["node"] == node.name()]
    floats = [e for e in kept if e["what"] == "intermediate" and e["dtype"].startswith("float")]
    assert len(floats) == CUSTOM_RULE_RESIDUALS.get(name, 0), floats
    (out * ft.tensor(w)).sum().backward()
    for i, x in enumerate(xs):
        def scalar(v, i=i):
            args = [ft.tensor(v if j == i else xs[j]) for j in range(len(xs))]
            return float((f(*args) * ft.tensor(w)).sum())
        np.testing.assert_allclose(ts[i].grad.numpy(), fd_grad(scalar, x), rtol=1e-5, atol=1e-7,
                                   err_msg=f"{name}: input {i}")


@pytest.mark.parametrize("f, lo, hi", [(F.hardtanh, -1.0, 1.0), (F.relu6, 0.0, 6.0)])
def test_hardtanh_keeps_a_mask_and_has_torchs_derivative_at_the_bounds(f, lo, hi):
    x = ft.tensor([lo - 1, lo, (lo + hi) / 2, hi, hi + 1, float("nan")], requires_grad=True)
    pre = x * 1.0
    y = f(pre)
    kept = [(e["what"], e["dtype"]) for e in ft.autograd.saved_tensors_report(y)
            if e["node"] == "HardtanhBackward0"]
    assert kept == [("intermediate", "bool")]
    np.testing.assert_array_equal(y.detach().numpy(), [lo, lo, (lo + hi) / 2, hi, hi, np.nan])
    y.sum().backward()
    # 0 at the bounds; NaN passes through with derivative 1, as torch's hardtanh_backward
    np.testing.assert_array_equal(x.grad.numpy(), [0, 0, 1, 0, 0, 1])


def test_a_dropped_4mb_preactivation_is_freed():
    lin = ft.nn.Linear(1024, 1024)
    x = ft.randn(1, 1024)
    pre = lin(x.expand(1024, 1024))
    data = weakref.ref(pre._data)
    assert pre._data.nbytes == 4 * 1024 * 1024
    mask = pre.detach().numpy() > 0                    # a copy, for the expected gradient
    out = ft.nn.ReLU()(pre).sum()
    del pre
    gc.collect()
    assert data() is None
    out.backward()
    xs = np.broadcast_to(x.numpy(), (1024, 1024))
    np.testing.assert_allclose(lin.weight.grad.numpy(), mask.T.astype(np.float32) @ xs,
                               rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(lin.bias.grad.numpy(), mask.sum(0), rtol=1e-6)
