"""Automatic differentiation workloads (issue 3), each against hand-derived NumPy.

The ``*_floor`` functions are the hand-written NumPy baselines; they work in
any float dtype so that tests can check them against finite differences in
float64.
"""
from __future__ import annotations

import numpy as np

import functrans as ft
import functrans.numpy as fnp

from .harness import workload


def init_mlp(sizes, dtype=np.float32, seed=0):
    """A list of (W, b) with W of shape (fan_in, fan_out), scaled by 1/sqrt(fan_in)."""
    rng = np.random.default_rng(seed)
    return [((rng.standard_normal((m, n)) / np.sqrt(m)).astype(dtype),
             (0.1 * rng.standard_normal(n)).astype(dtype))
            for m, n in zip(sizes[:-1], sizes[1:])]


# ---------------------------------------------------------------------------
# MLP 784-512-512-10, relu, softmax cross-entropy: value_and_grad

MLP_SIZES = (784, 512, 512, 10)
MLP_BATCH = 128


def mlp_loss(params, x, y1h):
    """Mean softmax cross-entropy of a relu MLP, written with functrans.numpy."""
    h = x
    for W, b in params[:-1]:
        h = ft.nn.relu(h @ W + b)
    W, b = params[-1]
    logp = ft.nn.log_softmax(h @ W + b)
    return -fnp.sum(logp * y1h) / x.shape[0]


def mlp_value_and_grad_floor(params, x, y1h):
    """Hand-written forward and backward of ``mlp_loss``: matmuls, relu masks, softmax-xent."""
    hs = [x]
    for W, b in params[:-1]:
        h = hs[-1] @ W
        h += b
        np.maximum(h, 0, out=h)
        hs.append(h)
    W, b = params[-1]
    logits = hs[-1] @ W
    logits += b
    logits -= logits.max(axis=1, keepdims=True)
    e = np.exp(logits)
    s = e.sum(axis=1, keepdims=True)
    n = x.shape[0]
    loss = (np.log(s).sum() - (logits * y1h).sum()) / n
    g = e / s
    g -= y1h
    g /= n                                       # d loss / d logits
    grads = []
    for i in range(len(params) - 1, -1, -1):
        W = params[i][0]
        grads.append((hs[i].T @ g, g.sum(axis=0)))
        if i:
            g = g @ W.T
            g *= hs[i] > 0                      # relu mask
    return loss.astype(x.dtype), grads[::-1]


def mlp_inputs(sizes=MLP_SIZES, batch=MLP_BATCH, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed + 1)
    x = rng.standard_normal((batch, sizes[0])).astype(dtype)
    y1h = np.eye(sizes[-1], dtype=dtype)[rng.integers(0, sizes[-1], batch)]
    return init_mlp(sizes, dtype, seed), x, y1h


@workload("mlp_value_and_grad", issue=3, targets={"value_and_grad": 1.2}, rtol=1e-4, atol=1e-6,
          description="un-jitted ft.value_and_grad of a relu MLP 784-512-512-10, batch 128, softmax xent")
def mlp_value_and_grad():
    params, x, y1h = mlp_inputs()
    vg = ft.value_and_grad(mlp_loss)
    return {"numpy": lambda: mlp_value_and_grad_floor(params, x, y1h),
            "value_and_grad": lambda: vg(params, x, y1h)}


# ---------------------------------------------------------------------------
# Hessian-vector product of a tanh MLP (forward-over-reverse)

HVP_SIZES = (64, 128, 128, 1)
HVP_BATCH = 64


def tanh_mlp_loss(params, x, y):
    """Half mean squared error of an MLP with tanh hidden layers (functrans.numpy)."""
    h = x
    for W, b in params[:-1]:
        h = fnp.tanh(h @ W + b)
    W, b = params[-1]
    r = h @ W + b - y
    return 0.5 * fnp.mean(r * r)


def tanh_mlp_loss_np(params, x, y):
    """The same loss in plain NumPy (for finite differences)."""
    (W1, b1), (W2, b2), (W3, b3) = params
    r = np.tanh(np.tanh(x @ W1 + b1) @ W2 + b2) @ W3 + b3 - y
    return 0.5 * np.mean(r * r)


def tanh_mlp_grad_floor(params, x, y):
    """Hand-written reverse mode of ``tanh_mlp_loss`` (two tanh hidden layers)."""
    (W1, b1), (W2, b2), (W3, b3) = params
    h1 = np.tanh(x @ W1 + b1)
    h2 = np.tanh(h1 @ W2 + b2)
    g = (h2 @ W3 + b3 - y) / r_size(y)
    s2 = 1 - h2 * h2
    gz2 = (g @ W3.T) * s2
    s1 = 1 - h1 * h1
    gz1 = (gz2 @ W2.T) * s1
    return [(x.T @ gz1, gz1.sum(0)), (h1.T @ gz2, gz2.sum(0)), (h2.T @ g, g.sum(0))]


def r_size(y):
    return y.dtype.type(y.size)


def tanh_mlp_hvp_floor(params, v, x, y):
    """Hand-written forward-over-reverse: returns (gradient, Hessian @ v), both pytrees like params.

    Each reverse-mode quantity q of ``tanh_mlp_grad_floor`` gets a tangent q_t
    along v = [(V1, c1), (V2, c2), (V3, c3)] by the product rule.
    """
    (W1, b1), (W2, b2), (W3, b3) = params
    (V1, c1), (V2, c2), (V3, c3) = v
    n = r_size(y)
    # forward and its tangent
    h1 = np.tanh(x @ W1 + b1)
    s1 = 1 - h1 * h1
    h1_t = s1 * (x @ V1 + c1)
    h2 = np.tanh(h1 @ W2 + b2)
    s2 = 1 - h2 * h2
    h2_t = s2 * (h1_t @ W2 + h1 @ V2 + c2)
    g = (h2 @ W3 + b3 - y) / n
    g_t = (h2_t @ W3 + h2 @ V3 + c3) / n
    # reverse pass and its tangent
    gh2 = g @ W3.T
    gh2_t = g_t @ W3.T + g @ V3.T
    gz2 = gh2 * s2
    gz2_t = gh2_t * s2 - 2 * gh2 * h2 * h2_t          # d(1 - h2^2) = -2 h2 h2_t
    gh1 = gz2 @ W2.T
    gh1_t = gz2_t @ W2.T + gz2 @ V2.T
    gz1 = gh1 * s1
    gz1_t = gh1_t * s1 - 2 * gh1 * h1 * h1_t
    grad = [(x.T @ gz1, gz1.sum(0)), (h1.T @ gz2, gz2.sum(0)), (h2.T @ g, g.sum(0))]
    hvp = [(x.T @ gz1_t, gz1_t.sum(0)),
           (h1_t.T @ gz2 + h1.T @ gz2_t, gz2_t.sum(0)),
           (h2_t.T @ g + h2.T @ g_t, g_t.sum(0))]
    return grad, hvp


def hvp_inputs(sizes=HVP_SIZES, batch=HVP_BATCH, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed + 2)
    params = init_mlp(sizes, dtype, seed)
    v = init_mlp(sizes, dtype, seed + 3)
    x = rng.standard_normal((batch, sizes[0])).astype(dtype)
    y = rng.standard_normal((batch, sizes[-1])).astype(dtype)
    return params, v, x, y


@workload("hvp_tanh_mlp", issue=3, targets={"jvp_of_grad": 2.0}, rtol=2e-4, atol=1e-6,
          description="un-jitted Hessian-vector product ft.jvp(ft.grad(loss)) of a tanh MLP 64-128-128-1, batch 64")
def hvp_tanh_mlp():
    params, v, x, y = hvp_inputs()
    g = ft.grad(tanh_mlp_loss)

    def ft_hvp():
        return ft.jvp(lambda p: g(p, x, y), (params,), (v,))

    return {"numpy": lambda: tanh_mlp_hvp_floor(params, v, x, y),
            "jvp_of_grad": ft_hvp}


# ---------------------------------------------------------------------------
# functional WGAN-GP critic step (double backward)

GP_SIZES = (2, 128, 128, 1)
GP_BATCH = 256
GP_LAMBDA = 10.0


def critic(params, x):
    """Critic MLP with tanh hidden layers; returns one score per row, shape (batch,)."""
    h = x
    for W, b in params[:-1]:
        h = fnp.tanh(h @ W + b)
    W, b = params[-1]
    return (h @ W + b)[:, 0]


def wgan_gp_loss(params, real, fake, eps, lam=GP_LAMBDA):
    """mean D(fake) - mean D(real) + lam * mean((|grad_x D(x_hat)| - 1)^2)."""
    x_hat = eps * real + (1 - eps) * fake
    gx = ft.grad(lambda x: fnp.sum(critic(params, x)))(x_hat)
    norm = fnp.sqrt(fnp.sum(gx * gx, axis=1))
    penalty = fnp.mean((norm - 1) ** 2)
    return fnp.mean(critic(params, fake)) - fnp.mean(critic(params, real)) + lam * penalty


def _critic_fwd(params, x):
    (W1, b1), (W2, b2), _ = params
    h1 = np.tanh(x @ W1 + b1)
    h2 = np.tanh(h1 @ W2 + b2)
    return h1, h2


def critic_input_grad_np(params, x):
    """d/dx of sum_b D(x_b), by hand: one row per sample."""
    (W1, _), (W2, _), (W3, _) = params
    h1, h2 = _critic_fwd(params, x)
    return (((1 - h2 * h2) * W3.T) @ W2.T * (1 - h1 * h1)) @ W1.T


def wgan_gp_loss_np(params, real, fake, eps, lam=GP_LAMBDA):
    """The WGAN-GP loss in plain NumPy (for finite differences)."""
    (W1, b1), (W2, b2), (W3, b3) = params

    def d(x):
        return (_critic_fwd(params, x)[1] @ W3 + b3)[:, 0]

    gx = critic_input_grad_np(params, eps * real + (1 - eps) * fake)
    norm = np.sqrt((gx * gx).sum(1))
    return d(fake).mean() - d(real).mean() + lam * ((norm - 1) ** 2).mean()


def wgan_gp_grad_floor(params, real, fake, eps, lam=GP_LAMBDA):
    """Hand-written gradient of ``wgan_gp_loss`` w.r.t. params, double backward included."""
    (W1, b1), (W2, b2), (W3, b3) = params
    n = real.dtype.type(real.shape[0])

    def mean_d_backward(x, sign):
        """Reverse mode of sign * mean(D(x)) -> [dW1, db1, dW2, db2, dW3, db3]."""
        h1, h2 = _critic_fwd(params, x)
        g = np.full((x.shape[0], 1), sign / n, x.dtype)
        gz2 = (g @ W3.T) * (1 - h2 * h2)
        gz1 = (gz2 @ W2.T) * (1 - h1 * h1)
        return [x.T @ gz1, gz1.sum(0), h1.T @ gz2, gz2.sum(0), h2.T @ g, g.sum(0)]

    # penalty: forward, input gradient gx = u1 @ W1.T, then its reverse mode
    x = eps * real + (1 - eps) * fake
    h1, h2 = _critic_fwd(params, x)
    a1, a2 = 1 - h1 * h1, 1 - h2 * h2
    u2 = a2 * W3.T                                   # d sum D / d z2
    gh1 = u2 @ W2.T
    u1 = gh1 * a1                                    # d sum D / d z1
    gx = u1 @ W1.T
    norm = np.sqrt((gx * gx).sum(1, keepdims=True))
    gx_bar = (2 * lam / n) * (norm - 1) / norm * gx
    dW1 = gx_bar.T @ u1                               # gx = u1 @ W1.T
    u1_bar = gx_bar @ W1
    gh1_bar = u1_bar * a1                            # u1 = gh1 * a1
    h1_bar = -2 * h1 * (u1_bar * gh1)                # a1 = 1 - h1^2
    dW2 = gh1_bar.T @ u2                              # gh1 = u2 @ W2.T
    u2_bar = gh1_bar @ W2
    dW3 = (u2_bar * a2).sum(0)[:, None]              # u2 = a2 * W3.T
    z2_bar = -2 * h2 * (u2_bar * W3.T) * a2           # a2 = 1 - h2^2, h2 = tanh(z2)
    dW2 += h1.T @ z2_bar
    db2 = z2_bar.sum(0)
    h1_bar += z2_bar @ W2.T
    z1_bar = h1_bar * a1
    dW1 += x.T @ z1_bar
    db1 = z1_bar.sum(0)
    grads = [dW1, db1, dW2, db2, dW3, np.zeros_like(b3)]
    for sign, data in ((1.0, fake), (-1.0, real)):
        for acc, g in zip(grads, mean_d_backward(data, sign)):
            acc += g
    return [(grads[0], grads[1]), (grads[2], grads[3]), (grads[4], grads[5])]


def gp_inputs(sizes=GP_SIZES, batch=GP_BATCH, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed + 4)
    params = init_mlp(sizes, dtype, seed)
    real = (rng.standard_normal((batch, sizes[0])) * 0.5 + 1.0).astype(dtype)
    fake = rng.standard_normal((batch, sizes[0])).astype(dtype)
    eps = rng.uniform(0, 1, (batch, 1)).astype(dtype)
    return params, real, fake, eps


@workload("wgan_gp_step_functional", issue=3, rtol=2e-4, atol=1e-6,
          description="un-jitted ft.grad of a WGAN-GP critic loss (double backward), MLP 2-128-128-1 tanh, batch 256")
def wgan_gp_step_functional():
    params, real, fake, eps = gp_inputs()
    g = ft.grad(wgan_gp_loss)
    return {"numpy": lambda: wgan_gp_grad_floor(params, real, fake, eps),
            "grad": lambda: g(params, real, fake, eps)}
