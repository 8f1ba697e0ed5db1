"""A PyTorch user's journey through the facade, in the order they meet things (issue 4,
item 10), with plain tensors where the nn/optim parts would go. Every expected value is
computed independently in float64 NumPy."""
import warnings

import numpy as np
import pytest

import functrans as ft

rng = np.random.default_rng(42)
X = rng.standard_normal((16, 5))
Y = rng.integers(0, 3, 16)
W1_0 = rng.standard_normal((5, 8)) * 0.5
W2_0 = rng.standard_normal((8, 3)) * 0.5


def np_forward(W1, W2, X=X, Y=Y):
    """float64 reference: tanh MLP, softmax cross-entropy; returns loss and gradients."""
    h = np.tanh(X @ W1)
    z = h @ W2
    z = z - z.max(1, keepdims=True)
    p = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    n = len(Y)
    loss = -np.log(p[np.arange(n), Y]).mean()
    gz = p.copy()
    gz[np.arange(n), Y] -= 1
    gz /= n
    gW2 = h.T @ gz
    gW1 = X.T @ ((gz @ W2.T) * (1 - h * h))
    return loss, gW1, gW2


def ft_loss(W1, W2, x, y):
    h = (x @ W1).tanh()
    logits = h @ W2
    return -logits.log_softmax(1).gather(1, y.unsqueeze(1)).mean()


def test_journey():
    # 1. leaves, grad_fn names, next_functions
    W1 = ft.tensor(W1_0, dtype=ft.float32, requires_grad=True)
    W2 = ft.tensor(W2_0, dtype=ft.float32, requires_grad=True)
    x, y = ft.tensor(X, dtype=ft.float32), ft.tensor(Y)
    h = (x @ W1).tanh()
    assert W1.is_leaf and not h.is_leaf and h.grad_fn.name() == "TanhBackward0"
    assert h.grad_fn.next_functions[0][0].name() == "MmBackward0"
    loss = ft_loss(W1, W2, x, y)
    assert loss.grad_fn.name() == "NegBackward0" and loss.requires_grad

    # 2. .grad of a non-leaf warns and is None
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert h.grad is None
    assert "not a leaf Tensor" in str(w[0].message)

    # 3. backward twice needs retain_graph
    ref_loss, g1, g2 = np_forward(W1_0, W2_0)
    np.testing.assert_allclose(loss.item(), ref_loss, rtol=1e-5)
    loss.backward(retain_graph=True)
    np.testing.assert_allclose(W1.grad.numpy(), g1, rtol=1e-4, atol=1e-6)
    loss.backward()
    np.testing.assert_allclose(W2.grad.numpy(), 2 * g2, rtol=1e-4, atol=1e-6)
    with pytest.raises(RuntimeError, match="Specify retain_graph=True"):
        loss.backward()

    # 4. two losses on a shared trunk: gradients add
    W1.grad = W2.grad = None
    trunk = (x @ W1).tanh()
    l1 = -(trunk @ W2).log_softmax(1).gather(1, y.unsqueeze(1)).mean()
    l2 = (trunk ** 2).mean()
    (l1 + l2).backward()
    hh = np.tanh(X @ W1_0)
    g_l2 = X.T @ (2 * hh / hh.size * (1 - hh * hh))
    np.testing.assert_allclose(W1.grad.numpy(), g1 + g_l2, rtol=1e-4, atol=1e-6)

    # 5. a custom Function checked by gradcheck, and a wrong one caught
    class Softsign(ft.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            ctx.save_for_backward(t)
            return t / (1 + t.abs())

        @staticmethod
        def backward(ctx, g):
            (t,) = ctx.saved_tensors
            return g / (1 + t.abs()) ** 2

    class WrongSoftsign(Softsign):
        @staticmethod
        def backward(ctx, g):
            (t,) = ctx.saved_tensors
            return g / (1 + t.abs())
    probe = ft.tensor([-1.3, 0.2, 2.0], dtype=ft.float64, requires_grad=True)
    assert ft.autograd.gradcheck(Softsign.apply, (probe,))
    with pytest.raises(ft.autograd.GradcheckError, match="with respect to input 0"):
        ft.autograd.gradcheck(WrongSoftsign.apply, (probe,))

    # 6. requires_grad_ on a tensor built without it
    b = ft.zeros(3)
    assert not b.requires_grad
    b.requires_grad_()
    assert b.is_leaf and b.requires_grad

    # 7. detach shares storage
    d = W1.detach()
    d[0, 0] = 123.0
    assert W1[0, 0].item() == 123.0
    with ft.no_grad():
        W1[0, 0] = float(W1_0[0, 0])

    # 8. .numpy() on a grad tensor
    with pytest.raises(RuntimeError, match="Use tensor.detach\\(\\).numpy\\(\\) instead."):
        W1.numpy()

    # 9. in-place errors
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used"):
        W1.mul_(2)
    t = (x @ W1).sigmoid()
    s = (t * 2).sum()
    t.add_(1)
    with pytest.raises(RuntimeError, match="is at version 1; expected version 0 instead"):
        s.backward()

    # 10. no_grad and inference_mode
    with ft.no_grad():
        assert not ft_loss(W1, W2, x, y).requires_grad
    with ft.inference_mode():
        frozen = (x @ W1).tanh()
    with pytest.raises(RuntimeError, match="Inference tensors cannot be saved for backward"):
        (frozen * W2.sum()).sum()

    # 11. gradient accumulation without zero_grad, then p.grad = None
    W1.grad = W2.grad = None
    for _ in range(3):
        ft_loss(W1, W2, x, y).backward()
    np.testing.assert_allclose(W2.grad.numpy(), 3 * g2, rtol=1e-4, atol=1e-6)
    W2.grad = None
    assert W2.grad is None

    # 12. backward hooks logging per-layer gradient norms
    W1.grad = None
    norms = {}
    a1 = x @ W1
    a1.register_hook(lambda g: norms.__setitem__("layer1", g.norm().item()))
    h1 = a1.tanh()
    a2 = h1 @ W2
    a2.register_hook(lambda g: norms.__setitem__("layer2", g.norm().item()))
    (-a2.log_softmax(1).gather(1, y.unsqueeze(1)).mean()).backward()
    hz = np.tanh(X @ W1_0) @ W2_0
    p = np.exp(hz - hz.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    gz = p.copy()
    gz[np.arange(16), Y] -= 1
    gz /= 16
    ga1 = (gz @ W2_0.T) * (1 - np.tanh(X @ W1_0) ** 2)
    np.testing.assert_allclose(norms["layer2"], np.linalg.norm(gz), rtol=1e-4)
    np.testing.assert_allclose(norms["layer1"], np.linalg.norm(ga1), rtol=1e-4)

    # 13. clipping by total norm (what clip_grad_norm_ does)
    params = [W1, W2]
    total = ft.stack([p.grad.norm() for p in params]).norm()
    want_total = np.sqrt(np.sum(g1 ** 2) + np.sum(g2 ** 2))
    np.testing.assert_allclose(total.item(), want_total, rtol=1e-4)
    with ft.no_grad():
        for p in params:
            p.grad.mul_(0.5 / (total + 1e-6))
    np.testing.assert_allclose(np.sqrt(sum((p.grad.numpy().astype(np.float64) ** 2).sum()
                                           for p in params)), 0.5, rtol=1e-4)

    # 14. detaching one branch of a shared layer
    W1.grad = None
    shared = x @ W1
    out = (shared.tanh() * 2).sum() + (shared.detach() ** 2).sum()
    out.backward()
    np.testing.assert_allclose(W1.grad.numpy(), X.T @ (2 * (1 - np.tanh(X @ W1_0) ** 2)),
                               rtol=1e-4, atol=1e-5)

    # 15. non-scalar backward with gradient=
    W1.grad = None
    v = ft.tensor(rng.standard_normal((16, 8)), dtype=ft.float32)
    (x @ W1).backward(gradient=v)
    np.testing.assert_allclose(W1.grad.numpy(), X.T @ v.numpy(), rtol=1e-4, atol=1e-5)

    # 16. second derivative via create_graph: d2/dx2 of sum(tanh(x)) = -2 tanh (1 - tanh^2)
    z = ft.tensor([0.3, -1.2], dtype=ft.float64, requires_grad=True)
    (gz1,) = ft.autograd.grad(z.tanh().sum(), z, create_graph=True)
    (gz2,) = ft.autograd.grad(gz1.sum(), z)
    th = np.tanh([0.3, -1.2])
    np.testing.assert_allclose(gz2.numpy(), -2 * th * (1 - th ** 2), rtol=1e-10)


def test_wgan_gp_gradient_penalty_matches_numpy():
    """Critic D(x) = sum(tanh(x @ W) @ v); penalty (||dD/dx|| - 1)^2 mean; its gradient with
    respect to W needs the double backward."""
    r = np.random.default_rng(1)
    real, fake = r.standard_normal((6, 4)), r.standard_normal((6, 4))
    eps = r.random((6, 1))
    W0, v0 = r.standard_normal((4, 5)), r.standard_normal(5)
    W = ft.tensor(W0, requires_grad=True)
    v = ft.tensor(v0, requires_grad=True)
    xi = (ft.tensor(eps) * ft.tensor(real) + (1 - ft.tensor(eps)) * ft.tensor(fake))
    xi.requires_grad_()
    d = ((xi @ W).tanh() @ v)
    (g,) = ft.autograd.grad(d.sum(), xi, create_graph=True)
    gp = ((g.norm(2, dim=1) - 1) ** 2).mean()
    critic = d.mean() + 10 * gp
    critic.backward()

    X0 = eps * real + (1 - eps) * fake

    def np_critic(Wn, vn):
        h = np.tanh(X0 @ Wn)
        gx = ((1 - h ** 2) * vn) @ Wn.T
        return (h @ vn).mean() + 10 * ((np.linalg.norm(gx, axis=1) - 1) ** 2).mean()
    np.testing.assert_allclose(critic.item(), np_critic(W0, v0), rtol=1e-12)
    e = 1e-6
    num_W = np.zeros_like(W0)
    for idx in np.ndindex(W0.shape):
        Wp, Wm = W0.copy(), W0.copy()
        Wp[idx] += e
        Wm[idx] -= e
        num_W[idx] = (np_critic(Wp, v0) - np_critic(Wm, v0)) / (2 * e)
    num_v = np.array([(np_critic(W0, v0 + e * np.eye(5)[i]) - np_critic(W0, v0 - e * np.eye(5)[i]))
                      / (2 * e) for i in range(5)])
    np.testing.assert_allclose(W.grad.numpy(), num_W, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(v.grad.numpy(), num_v, rtol=1e-6, atol=1e-7)


def test_training_loop_with_momentum_matches_float64_numpy():
    """A plain-tensor training loop (SGD with momentum, clipping by total norm) gives the
    same losses as float64 NumPy to float32 tolerance."""
    lr, mom, max_norm = 0.5, 0.9, 1.0
    W1 = ft.tensor(W1_0, dtype=ft.float32, requires_grad=True)
    W2 = ft.tensor(W2_0, dtype=ft.float32, requires_grad=True)
    x, y = ft.tensor(X, dtype=ft.float32), ft.tensor(Y)
    bufs = [ft.zeros_like(W1), ft.zeros_like(W2)]
    nW1, nW2 = W1_0.copy(), W2_0.copy()
    nb = [np.zeros_like(nW1), np.zeros_like(nW2)]
    for step in range(15):
        loss = ft_loss(W1, W2, x, y)
        W1.grad = W2.grad = None
        loss.backward()
        ref, g1, g2 = np_forward(nW1, nW2)
        np.testing.assert_allclose(loss.item(), ref, rtol=2e-5, atol=1e-6)
        total = ft.stack([W1.grad.norm(), W2.grad.norm()]).norm().item()
        ntotal = np.sqrt((g1 ** 2).sum() + (g2 ** 2).sum())
        coef, ncoef = min(1.0, max_norm / (total + 1e-6)), min(1.0, max_norm / (ntotal + 1e-6))
        with ft.no_grad():
            for p, b in zip((W1, W2), bufs):
                b.mul_(mom).add_(p.grad, alpha=coef)
                p.add_(b, alpha=-lr)
        for i, (p, g) in enumerate(zip((nW1, nW2), (g1, g2))):
            nb[i] = mom * nb[i] + ncoef * g
            p -= lr * nb[i]
    assert loss.item() < np_forward(W1_0, W2_0)[0]
