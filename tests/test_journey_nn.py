"""The module-level journey of a PyTorch user, in the order they meet things: a training loop
ported by renaming `torch` to `ft` (checked against float64 NumPy), gradient accumulation,
p.grad = None, a backward hook logging per-layer gradient norms, clipping, detaching one
branch of a shared module, and a WGAN-GP gradient penalty (create_graph=True)."""
import numpy as np
import pytest

import functrans as ft
import functrans.nn as nn
import functrans.nn.functional as F
import functrans.numpy as fnp

pytestmark = pytest.mark.usefixtures("x64")  # float64 references: conftest.x64

DIGITS = np.load(__file__.rsplit("/", 2)[0] + "/examples/data/digits.npz")


def num(t):
    return t.detach().numpy()


def _batches(n_steps, batch=32, seed=0):
    rng = np.random.default_rng(seed)
    x = DIGITS["images"].reshape(-1, 64).astype(np.float32) / 16.0
    y = DIGITS["labels"].astype(np.int64)
    for _ in range(n_steps):
        idx = rng.integers(0, len(x), batch)
        yield x[idx], y[idx]


# ---------------------------------------------------------------------------
# the training loop of "Done means"


def numpy_training(params, batches, lr, momentum, max_norm):
    """The same loop in float64 NumPy: relu MLP, softmax cross-entropy, clip_grad_norm_,
    SGD with momentum (PyTorch's formulas). params: [W1, b1, W2, b2] with W of shape (out, in)."""
    params = [p.astype(np.float64) for p in params]
    bufs = [None] * len(params)
    losses = []
    for xb, yb in batches:
        W1, b1, W2, b2 = params
        h_pre = xb @ W1.T + b1
        h = np.maximum(h_pre, 0)
        z = h @ W2.T + b2
        z = z - z.max(1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(1, keepdims=True))
        n = len(yb)
        losses.append(-logp[np.arange(n), yb].mean())
        dz = np.exp(logp)
        dz[np.arange(n), yb] -= 1
        dz /= n
        gW2, gb2 = dz.T @ h, dz.sum(0)
        dh = (dz @ W2) * (h_pre > 0)
        gW1, gb1 = dh.T @ xb, dh.sum(0)
        grads = [gW1, gb1, gW2, gb2]
        total = np.sqrt(sum(np.sum(g * g) for g in grads))
        coef = min(max_norm / (total + 1e-6), 1.0)
        grads = [g * coef for g in grads]
        for i, g in enumerate(grads):
            bufs[i] = g.copy() if bufs[i] is None else momentum * bufs[i] + g
            params[i] = params[i] - lr * bufs[i]
    return np.array(losses)


def test_ported_training_loop_matches_float64_numpy():
    ft.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    init = [num(p).copy() for p in model.parameters()]
    optimizer = ft.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    losses = []
    for xb, yb in _batches(40):
        xb, yb = ft.tensor(xb), ft.tensor(yb)
        optimizer.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        optimizer.step()
        losses.append(loss.item())
    want = numpy_training(init, _batches(40), lr=0.1, momentum=0.9, max_norm=1.0)
    np.testing.assert_allclose(losses, want, rtol=2e-5, atol=2e-6)
    assert want[-1] < 0.5 * want[0]                      # it does learn


# ---------------------------------------------------------------------------
# accumulation, p.grad = None


def test_gradient_accumulation_without_zero_grad():
    ft.manual_seed(1)
    model = nn.Linear(4, 2).double()
    x1, x2 = ft.randn(3, 4, dtype=ft.float64), ft.randn(5, 4, dtype=ft.float64)
    model(x1).pow(2).sum().backward()
    model(x2).pow(2).sum().backward()                   # no zero_grad: gradients add up
    acc = [num(p.grad).copy() for p in model.parameters()]
    model.zero_grad()
    (model(x1).pow(2).sum() + model(x2).pow(2).sum()).backward()
    for a, p in zip(acc, model.parameters()):
        np.testing.assert_allclose(a, num(p.grad), rtol=1e-12)


def test_setting_grad_to_none():
    ft.manual_seed(2)
    model = nn.Linear(3, 1)
    opt = ft.optim.SGD(model.parameters(), lr=1.0)
    model(ft.ones(1, 3)).sum().backward()
    model.bias.grad = None                               # this parameter sits the step out
    b = model.bias.item()
    w = num(model.weight).copy()
    opt.step()
    assert model.bias.item() == b
    np.testing.assert_allclose(num(model.weight), w - 1.0)
    model(ft.ones(1, 3)).sum().backward()                 # a fresh gradient, not accumulated
    assert model.bias.grad.tolist() == [1.0]
    assert model.weight.grad.tolist() == [[2.0, 2.0, 2.0]]


# ---------------------------------------------------------------------------
# hooks and clipping


def test_backward_hook_logs_per_layer_gradient_norms():
    ft.manual_seed(3)
    model = nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 3)).double()
    norms = {}

    def log_norm(name):
        def hook(module, grad_input, grad_output):
            norms[name] = grad_output[0].norm().item()
        return hook
    handles = [m.register_full_backward_hook(log_norm(name))
               for name, m in model.named_children()]
    x = ft.randn(4, 6, dtype=ft.float64)
    y = ft.tensor([0, 2, 1, 2])
    F.cross_entropy(model(x), y).backward()
    assert sorted(norms) == ["0", "1", "2"]
    W1, b1, W2, b2 = [num(p) for p in model.parameters()]
    h_pre = num(x) @ W1.T + b1
    z = np.maximum(h_pre, 0) @ W2.T + b2
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    dz = (p - np.eye(3)[num(y)]) / 4
    dh = dz @ W2
    assert norms["2"] == pytest.approx(np.linalg.norm(dz), rel=1e-10)
    assert norms["1"] == pytest.approx(np.linalg.norm(dh), rel=1e-10)
    assert norms["0"] == pytest.approx(np.linalg.norm(dh * (h_pre > 0)), rel=1e-10)
    for h in handles:
        h.remove()
    norms.clear()
    F.cross_entropy(model(x), y).backward()
    assert norms == {}


def test_clipping_by_norm_and_by_value():
    ft.manual_seed(4)
    model = nn.Linear(10, 10)
    (model(ft.randn(8, 10)) * 100).sum().backward()
    before = np.sqrt(sum(np.sum(num(p.grad).astype(np.float64) ** 2)
                         for p in model.parameters()))
    total = nn.utils.clip_grad_norm_(model.parameters(), max_norm=2.0)
    assert total.item() == pytest.approx(before, rel=1e-5)
    after = np.sqrt(sum(np.sum(num(p.grad).astype(np.float64) ** 2)
                        for p in model.parameters()))
    assert after == pytest.approx(2.0, rel=1e-5)
    nn.utils.clip_grad_value_(model.parameters(), 0.01)
    assert max(np.abs(num(p.grad)).max() for p in model.parameters()) <= 0.01


# ---------------------------------------------------------------------------
# a shared module with one branch detached


def test_detaching_one_branch_of_a_shared_module():
    ft.manual_seed(5)
    trunk = nn.Linear(3, 4).double()
    head_a, head_b = nn.Linear(4, 1).double(), nn.Linear(4, 1).double()
    x = ft.randn(6, 3, dtype=ft.float64)
    feats = trunk(x)
    loss = head_a(feats).sum() + (head_b(feats.detach()) ** 2).sum()
    loss.backward()
    # the trunk only hears from head_a; head_b still learns
    Wa = num(head_a.weight)
    np.testing.assert_allclose(num(trunk.weight.grad), (np.ones((6, 1)) @ Wa).T @ num(x),
                               rtol=1e-12)
    np.testing.assert_allclose(num(trunk.bias.grad), 6 * Wa[0], rtol=1e-12)
    f = num(feats)
    out_b = f @ num(head_b.weight).T + num(head_b.bias)
    np.testing.assert_allclose(num(head_b.weight.grad), (2 * out_b).T @ f, rtol=1e-12)
    assert feats.detach().grad_fn is None and not feats.detach().requires_grad


# ---------------------------------------------------------------------------
# WGAN-GP


def _critic(seed):
    ft.manual_seed(seed)
    return nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(),
                         nn.Linear(16, 1)).double()


def _gp_loss_functional(critic, params, real, fake, eps, lam=10.0):
    """The same critic loss written as a pure function of the parameters (ft.grad's side)."""
    xi = eps * real + (1 - eps) * fake

    def d_sum(x):
        return fnp.sum(ft.func.functional_call(critic, params, (x,)))
    g = ft.grad(d_sum)(xi)
    gp = fnp.mean((fnp.sqrt(fnp.sum(g * g, axis=1)) - 1) ** 2)
    d_real = ft.func.functional_call(critic, params, (real,))
    d_fake = ft.func.functional_call(critic, params, (fake,))
    return fnp.mean(d_fake) - fnp.mean(d_real) + lam * gp


def test_wgan_gp_gradient_penalty_with_create_graph():
    critic = _critic(6)
    rng = np.random.default_rng(6)
    real, fake = rng.standard_normal((8, 2)), rng.standard_normal((8, 2)) + 2
    eps = rng.uniform(size=(8, 1))
    # the facade, as a PyTorch user writes it
    real_t, fake_t = ft.tensor(real), ft.tensor(fake)
    xi = (ft.tensor(eps) * real_t + (1 - ft.tensor(eps)) * fake_t).requires_grad_(True)
    d_xi = critic(xi)
    (g,) = ft.autograd.grad(d_xi, xi, grad_outputs=ft.ones_like(d_xi), create_graph=True)
    assert g.requires_grad and g.grad_fn is not None
    gp = ((g.norm(2, dim=1) - 1) ** 2).mean()
    loss = critic(fake_t).mean() - critic(real_t).mean() + 10.0 * gp
    critic.zero_grad()
    loss.backward()
    # the functional side: ft.grad of a pure function (the core's AD, no facade engine)
    params = {k: num(v).copy() for k, v in critic.named_parameters()}
    want_loss = _gp_loss_functional(critic, params, real, fake, eps)
    want = ft.grad(lambda p: _gp_loss_functional(critic, p, real, fake, eps))(params)
    assert loss.item() == pytest.approx(float(want_loss), rel=1e-12)
    for k, p in critic.named_parameters():
        np.testing.assert_allclose(num(p.grad), want[k], rtol=1e-9, atol=1e-12)
    # and finite differences on one weight, through the facade alone
    k = "2.weight"
    base = params[k].copy()
    h = 1e-6

    def loss_at(w):
        q = dict(params)
        q[k] = w
        return float(_gp_loss_functional(critic, q, real, fake, eps))
    idx = (3, 5)
    up, down = base.copy(), base.copy()
    up[idx] += h
    down[idx] -= h
    fd = (loss_at(up) - loss_at(down)) / (2 * h)
    assert num(critic[2].weight.grad)[idx] == pytest.approx(fd, rel=1e-5, abs=1e-8)
