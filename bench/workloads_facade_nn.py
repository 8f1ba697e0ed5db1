"""Facade workloads (issue 4): the per-op overhead of recorded ops on tiny tensors, a full
training step and a WGAN-GP critic step, each against hand-written NumPy doing the same
arithmetic.

Every variant owns its parameters and advances them by one step per call; the harness's
first (checking) call of each variant starts from the same initial state, so the returned
losses and updated parameters are compared one to one.
"""
from __future__ import annotations

import numpy as np

import functrans as ft
import functrans.nn as nn
import functrans.nn.functional as F

from .harness import workload
from .workloads_core import CHAIN_REPEATS, chain, chain_inputs

# ---------------------------------------------------------------------------
# recorded 200-op elementwise chain on f32[8]: forward, sum, backward


def chain_fwd_bwd_floor(x, a, b):
    """sum(chain(x)) and its gradient w.r.t. x by hand: each block's forward keeps what
    its derivative reads, the backward multiplies the local derivatives in reverse."""
    saved = []
    y = x
    for _ in range(CHAIN_REPEATS):
        s1 = y
        y = np.sin(y) * a
        s3 = y
        t = np.tanh(np.cos(y) + b)
        e = np.exp(t)
        s9 = (e - a) * 0.5
        y = np.sin(s9)
        y = y + y
        saved.append((s1, s3, t, e, s9))
    g = np.ones_like(y)
    for s1, s3, t, e, s9 in reversed(saved):
        g = 2 * g * np.cos(s9) * 0.5 * e * (1 - t * t)
        g = -g * np.sin(s3) * a * np.cos(s1)
    return [y.sum(), g]


@workload("facade_chain200_tiny", issue=4, targets={"facade": 6.0},
          description="recorded 200-op elementwise chain on f32[8] (facade Tensors), sum, "
                      "backward vs the same forward and hand-written backward in NumPy")
def facade_chain200_tiny():
    x, a, b = chain_inputs()
    tx = ft.tensor(x, requires_grad=True)
    ta, tb = ft.tensor(a), ft.tensor(b)

    def facade():
        tx.grad = None
        loss = chain(ft, tx, ta, tb).sum()
        loss.backward()
        return [loss.detach().numpy(), tx.grad.numpy()]
    return {"numpy": lambda: chain_fwd_bwd_floor(x, a, b), "facade": facade}


# ---------------------------------------------------------------------------
# MLP 784-512-512-10, batch 128: forward, cross-entropy, backward, SGD(momentum) step

MLP_SIZES = (784, 512, 512, 10)
BATCH = 128
LR, MOMENTUM = 0.01, 0.9


def _mlp_model(sizes=MLP_SIZES, seed=0):
    ft.manual_seed(seed)
    layers = []
    for i, (m, n) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(nn.Linear(m, n))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def _mlp_data(sizes=MLP_SIZES, batch=BATCH, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, sizes[0])).astype(np.float32)
    y = rng.integers(0, sizes[-1], batch).astype(np.int64)
    return x, y


class MlpStepFloor:
    """Hand-written NumPy: the same step with weights stored (in, out) for x @ W."""

    def __init__(self, weights, biases):
        self.W = [w.T.copy() for w in weights]
        self.b = [b.copy() for b in biases]
        self.bufs = None

    def __call__(self, x, y):
        hs = [x]
        for W, b in zip(self.W[:-1], self.b[:-1]):
            h = hs[-1] @ W
            h += b
            np.maximum(h, 0, out=h)
            hs.append(h)
        z = hs[-1] @ self.W[-1]
        z += self.b[-1]
        z -= z.max(axis=1, keepdims=True)
        e = np.exp(z)
        s = e.sum(axis=1, keepdims=True)
        n = x.shape[0]
        rows = np.arange(n)
        loss = (np.log(s)[:, 0] - z[rows, y]).mean()
        g = e / s
        g[rows, y] -= 1
        g /= n
        grads = []
        for i in range(len(self.W) - 1, -1, -1):
            grads.append((hs[i].T @ g, g.sum(axis=0)))
            if i:
                g = g @ self.W[i].T
                g *= hs[i] > 0
        grads = grads[::-1]
        flat = [a for pair in grads for a in pair]
        params = [a for pair in zip(self.W, self.b) for a in pair]
        if self.bufs is None:
            self.bufs = [f.copy() for f in flat]
        else:
            for buf, f in zip(self.bufs, flat):
                buf *= MOMENTUM
                buf += f
        for p, buf in zip(params, self.bufs):
            p -= LR * buf
        return [np.float32(loss)] + [a for W, b in zip(self.W, self.b) for a in (W.T, b)]


def mlp_step_facade(model, optimizer, x, y):
    """The PyTorch training step, renamed: zero_grad, forward, loss, backward, step."""
    optimizer.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    return loss


@workload("facade_mlp_train_step", issue=4, targets={"facade": 1.15}, rtol=2e-4, atol=1e-6,
          description="facade MLP 784-512-512-10, batch 128: forward, cross-entropy, backward, "
                      "SGD(momentum) step vs the same step in hand-written NumPy")
def facade_mlp_train_step():
    x, y = _mlp_data()
    model = _mlp_model()
    params = list(model.parameters())
    floor = MlpStepFloor([p.detach().numpy() for p in params[0::2]],
                         [p.detach().numpy() for p in params[1::2]])
    optimizer = ft.optim.SGD(params, lr=LR, momentum=MOMENTUM)
    tx, ty = ft.tensor(x), ft.tensor(y)

    def facade():
        loss = mlp_step_facade(model, optimizer, tx, ty)
        return [loss.detach().numpy()] + [p.detach().numpy() for p in params]
    return {"numpy": lambda: floor(x, y), "facade": facade}


# ---------------------------------------------------------------------------
# WGAN-GP critic step: D(real), D(fake), gradient penalty with create_graph, backward, Adam

CRITIC_SIZES = (2, 128, 128, 1)
GP_BATCH = 256
LAM = 10.0
ADAM = dict(lr=1e-4, betas=(0.5, 0.9), eps=1e-8)


def _critic(seed=0):
    ft.manual_seed(seed)
    a, b, c, d = CRITIC_SIZES
    return nn.Sequential(nn.Linear(a, b), nn.Tanh(), nn.Linear(b, c), nn.Tanh(), nn.Linear(c, d))


def _gp_data(seed=0):
    rng = np.random.default_rng(seed)
    real = rng.standard_normal((GP_BATCH, 2)).astype(np.float32)
    fake = (rng.standard_normal((GP_BATCH, 2)) + 1.5).astype(np.float32)
    eps = rng.uniform(size=(GP_BATCH, 1)).astype(np.float32)
    return real, fake, eps


class CriticStepFloor:
    """Hand-written NumPy WGAN-GP critic step for a tanh MLP: the penalty's gradient w.r.t.
    the parameters is derived by hand (reverse over the input-gradient computation)."""

    def __init__(self, weights, biases):
        self.W = [w.T.copy() for w in weights]     # (in, out)
        self.b = [b.copy() for b in biases]
        self.m = None
        self.v = None
        self.t = 0

    def _forward(self, x):
        W1, W2, W3 = self.W
        b1, b2, b3 = self.b
        h1 = np.tanh(x @ W1 + b1)
        h2 = np.tanh(h1 @ W2 + b2)
        return h1, h2, h2 @ W3 + b3

    def __call__(self, real, fake, eps):
        W1, W2, W3 = self.W
        n = real.shape[0]
        # Wasserstein terms: mean D(fake) - mean D(real)
        grads = [np.zeros_like(W) for W in self.W], [np.zeros_like(b) for b in self.b]
        d_out = []
        for x, sign in ((real, -1.0), (fake, 1.0)):
            h1, h2, out = self._forward(x)
            d_out.append(out.mean())
            g3 = np.full((n, 1), sign / n, np.float32)
            grads[0][2] += h2.T @ g3
            grads[1][2] += g3.sum(0)
            g2 = (g3 @ W3.T) * (1 - h2 * h2)
            grads[0][1] += h1.T @ g2
            grads[1][1] += g2.sum(0)
            g1 = (g2 @ W2.T) * (1 - h1 * h1)
            grads[0][0] += x.T @ g1
            grads[1][0] += g1.sum(0)
        # gradient penalty at the interpolates
        xi = eps * real + (1 - eps) * fake
        h1, h2, _ = self._forward(xi)
        s2 = 1 - h2 * h2
        s1 = 1 - h1 * h1
        a2 = W3.T * s2                      # d out / d z2, (n, 128)
        a1 = (a2 @ W2.T) * s1               # d out / d z1
        gx = a1 @ W1.T                      # d out / d x, (n, 2)
        norm = np.sqrt((gx * gx).sum(1, keepdims=True))
        gp = ((norm - 1) ** 2).mean()
        # reverse through gx = ((W3^T * s2) @ W2^T * s1) @ W1^T
        dgx = LAM * 2 * (norm - 1) / n * gx / norm            # d loss / d gx
        grads[0][0] += dgx.T @ a1
        da1 = dgx @ W1
        ds1 = da1 * (a2 @ W2.T)
        da2w = da1 * s1                      # d loss / d (a2 @ W2^T)
        grads[0][1] += da2w.T @ a2
        da2 = da2w @ W2
        ds2 = da2 * W3.T
        grads[0][2] += (da2 * s2).sum(0)[:, None]
        dz1 = ds1 * (-2 * h1) * s1
        dz2 = ds2 * (-2 * h2) * s2
        dh1 = dz2 @ W2.T
        dz1 += dh1 * s1
        grads[0][1] += h1.T @ dz2
        grads[1][1] += dz2.sum(0)
        grads[0][0] += xi.T @ dz1
        grads[1][0] += dz1.sum(0)
        loss = d_out[1] - d_out[0] + LAM * gp
        # Adam (PyTorch's formulas)
        flat = [g for pair in zip(*grads) for g in pair]
        params = [p for pair in zip(self.W, self.b) for p in pair]
        b1, b2 = ADAM["betas"]
        if self.m is None:
            self.m = [np.zeros_like(p) for p in params]
            self.v = [np.zeros_like(p) for p in params]
        self.t += 1
        bc1, bc2 = 1 - b1 ** self.t, np.sqrt(1 - b2 ** self.t)
        for p, g, m, v in zip(params, flat, self.m, self.v):
            m *= b1
            m += (1 - b1) * g
            v *= b2
            v += (1 - b2) * g * g
            p -= (ADAM["lr"] / bc1) * m / (np.sqrt(v) / bc2 + ADAM["eps"])
        return [np.float32(loss)] + [a for W, b in zip(self.W, self.b) for a in (W.T, b)]


def critic_step_facade(critic, optimizer, real, fake, eps):
    """The WGAN-GP critic update as a PyTorch user writes it."""
    x = (eps * real + (1 - eps) * fake).requires_grad_(True)
    d = critic(x)
    (g,) = ft.autograd.grad(d, x, grad_outputs=ft.ones_like(d), create_graph=True)
    gp = ((g.norm(2, dim=1) - 1) ** 2).mean()
    loss = critic(fake).mean() - critic(real).mean() + LAM * gp
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss


@workload("facade_wgan_gp_critic_step", issue=4, targets={"facade": 2.0}, rtol=2e-4, atol=1e-6,
          description="facade WGAN-GP critic step (tanh MLP 2-128-128-1, batch 256): gradient "
                      "penalty through autograd.grad(create_graph=True), backward, Adam")
def facade_wgan_gp_critic_step():
    real, fake, eps = _gp_data()
    critic = _critic()
    params = list(critic.parameters())
    floor = CriticStepFloor([p.detach().numpy() for p in params[0::2]],
                            [p.detach().numpy() for p in params[1::2]])
    optimizer = ft.optim.Adam(params, **ADAM)
    tr, tf, te = ft.tensor(real), ft.tensor(fake), ft.tensor(eps)

    def facade():
        loss = critic_step_facade(critic, optimizer, tr, tf, te)
        return [loss.detach().numpy()] + [p.detach().numpy() for p in params]
    return {"numpy": lambda: floor(real, fake, eps), "facade": facade}
