"""WGAN-GP on 2-D data (eight Gaussians on a ring) with the PyTorch-style facade.

The gradient penalty (Gulrajani et al., 2017) differentiates the critic's input gradient:
ft.autograd.grad(..., create_graph=True) returns a gradient that is itself recorded, so
the penalty's backward runs through the critic's backward program a second time.
"""
import math
import time

import numpy as np

import functrans as ft
import functrans.nn as nn

MODES = np.array([(math.cos(2 * math.pi * k / 8), math.sin(2 * math.pi * k / 8))
                  for k in range(8)], np.float32) * 2.0


def sample_real(n, rng):
    """n points from eight Gaussians (std 0.05) on a circle of radius 2."""
    centers = MODES[rng.integers(0, 8, n)]
    return ft.tensor(centers + 0.05 * rng.standard_normal((n, 2)).astype(np.float32))


def mlp(n_in, n_out, hidden=64):
    return nn.Sequential(nn.Linear(n_in, hidden), nn.ReLU(), nn.Linear(hidden, hidden),
                         nn.ReLU(), nn.Linear(hidden, n_out))


def gradient_penalty(critic, real, fake):
    """E[(||grad_x D(x)||_2 - 1)^2] at random interpolates of real and fake samples."""
    eps = ft.rand(real.shape[0], 1)
    x = (eps * real + (1 - eps) * fake).requires_grad_(True)
    d = critic(x)
    (g,) = ft.autograd.grad(d, x, grad_outputs=ft.ones_like(d), create_graph=True)
    return ((g.norm(2, dim=1) - 1) ** 2).mean()


def main(steps=300, n_critic=5, batch=128, lam=10.0):
    ft.manual_seed(0)
    rng = np.random.default_rng(0)
    generator, critic = mlp(2, 2), mlp(2, 1)
    opt_g = ft.optim.Adam(generator.parameters(), lr=1e-3, betas=(0.5, 0.9))
    opt_d = ft.optim.Adam(critic.parameters(), lr=1e-3, betas=(0.5, 0.9))
    start = time.perf_counter()
    for step in range(1, steps + 1):
        for _ in range(n_critic):
            real = sample_real(batch, rng)
            with ft.no_grad():
                fake = generator(ft.randn(batch, 2))
            d_real, d_fake = critic(real).mean(), critic(fake).mean()
            gp = gradient_penalty(critic, real, fake)
            loss_d = d_fake - d_real + lam * gp
            opt_d.zero_grad()
            loss_d.backward()
            opt_d.step()
        loss_g = -critic(generator(ft.randn(batch, 2))).mean()
        opt_g.zero_grad()
        loss_g.backward()
        opt_g.step()
        if step % 50 == 0 or step == 1:
            with ft.no_grad():
                pts = generator(ft.randn(1000, 2)).numpy()
            dist = np.min(np.linalg.norm(pts[:, None] - MODES[None], axis=2), axis=1)
            print(f"step {step:4d}  critic loss {loss_d.item():+.4f}  "
                  f"W-estimate {(d_real - d_fake).item():.4f}  gp {gp.item():.4f}  "
                  f"generator loss {loss_g.item():+.4f}  "
                  f"mean distance to nearest mode {dist.mean():.3f}  "
                  f"({time.perf_counter() - start:.1f} s)")
    return dist.mean()


if __name__ == "__main__":
    main()
