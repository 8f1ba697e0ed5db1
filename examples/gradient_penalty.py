"""Functional WGAN-GP: train a critic with a gradient penalty (double backward) on 2-D data.

The penalty lam * (||grad_x D(x_hat)|| - 1)^2 needs the gradient of a gradient: with
functrans it is just grad applied to a function that calls grad.
"""
import numpy as np

import functrans as ft
import functrans.numpy as fnp


def init_mlp(key, sizes):
    params = []
    for k, (m, n) in zip(ft.random.split(key, len(sizes) - 1), zip(sizes[:-1], sizes[1:])):
        params.append((ft.random.normal(k, (m, n)) * np.float32(np.sqrt(2.0 / m)),
                       np.zeros(n, np.float32)))
    return params


def critic(params, x):
    for w, b in params[:-1]:
        x = ft.nn.leaky_relu(x @ w + b, 0.2)
    w, b = params[-1]
    return (x @ w + b)[:, 0]


def critic_loss(params, real, fake, eps, lam=10.0):
    x_hat = eps * real + (1 - eps) * fake
    # gradient of the critic's output w.r.t. its input, per example
    grad_x = ft.grad(lambda x: fnp.sum(critic(params, x)))(x_hat)
    norms = fnp.sqrt(fnp.sum(grad_x ** 2, axis=1) + 1e-12)
    penalty = fnp.mean((norms - 1.0) ** 2)
    wdist = fnp.mean(critic(params, real)) - fnp.mean(critic(params, fake))
    return -wdist + lam * penalty, (wdist, penalty)


def adam(params, grads, state, lr=1e-3, b1=0.5, b2=0.9):
    m, v, t = state
    t += 1
    m = ft.tree_map(lambda m_, g: b1 * m_ + (1 - b1) * g, m, grads)
    v = ft.tree_map(lambda v_, g: b2 * v_ + (1 - b2) * g * g, v, grads)
    params = ft.tree_map(lambda p, m_, v_: p - lr * (m_ / (1 - b1 ** t)) /
                         (fnp.sqrt(v_ / (1 - b2 ** t)) + 1e-8), params, m, v)
    return params, (m, v, t)


def sample_real(key, n):
    k1, k2 = ft.random.split(key)
    centers = np.array([[2.0, 0.0], [-2.0, 0.0], [0.0, 2.0], [0.0, -2.0]], np.float32)
    idx = np.asarray(ft.random.randint(k1, (n,), 0, 4))
    return centers[idx] + 0.1 * np.asarray(ft.random.normal(k2, (n, 2)))


def main(steps=300, batch=128):
    key = ft.random.PRNGKey(0)
    params = init_mlp(key, [2, 64, 64, 1])
    state = (ft.tree_map(np.zeros_like, params), ft.tree_map(np.zeros_like, params), 0)
    step_fn = ft.value_and_grad(critic_loss, has_aux=True)
    for step in range(steps + 1):
        key, kr, kf, ke = ft.random.split(key, 4)
        real = sample_real(kr, batch)
        fake = np.asarray(ft.random.normal(kf, (batch, 2))) * 0.5 + 0.5   # a fixed "generator"
        eps = np.asarray(ft.random.uniform(ke, (batch, 1)))
        (loss, (wdist, penalty)), grads = step_fn(params, real, fake, eps)
        params, state = adam(params, grads, state)
        if step % 50 == 0:
            print(f"step {step:4d}  critic loss {float(loss):8.4f}  "
                  f"W-distance estimate {float(wdist):7.4f}  penalty {float(penalty):.4f}")
    return float(loss)


if __name__ == "__main__":
    main()
