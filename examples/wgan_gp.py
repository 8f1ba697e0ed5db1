"""WGAN-GP on 2-D data (a correlated Gaussian) with the PyTorch-style facade.

The gradient penalty (Gulrajani et al., 2017) differentiates the critic's input gradient:
ft.autograd.grad(..., create_graph=True) returns a gradient that is itself recorded, so
the penalty's backward runs through the critic's backward program a second time. The
generator starts from N(0, I) noise and learns the target's mean and covariance.
With the `examples` extra: a progress bar, and figures/wgan_gp.png (the generated points
over the real distribution, and the training curves).
"""
import time

import numpy as np

import functrans as ft
import functrans.nn as nn
from _extras import figure, log, progress

MEAN = np.array([2.0, -1.0], np.float32)
SCALE = np.array([[0.5, 0.0], [0.4, 0.3]], np.float32)      # covariance SCALE @ SCALE.T


def sample_real(n, rng):
    """n points from N(MEAN, SCALE SCALE^T)."""
    return ft.tensor(MEAN + rng.standard_normal((n, 2)).astype(np.float32) @ SCALE.T)


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


def main(steps=400, n_critic=5, batch=128, lam=10.0):
    ft.manual_seed(0)
    rng = np.random.default_rng(0)
    generator, critic = mlp(2, 2), mlp(2, 1)
    eval_noise = ft.tensor(rng.standard_normal((4000, 2)).astype(np.float32))
    opt_g = ft.optim.Adam(generator.parameters(), lr=2e-4, betas=(0.5, 0.9))
    opt_d = ft.optim.Adam(critic.parameters(), lr=1e-3, betas=(0.5, 0.9))
    start = time.perf_counter()
    history = {"step": [], "w": [], "mean_err": [], "cov_err": []}
    for step in progress(range(1, steps + 1), total=steps, desc="wgan-gp"):
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
                pts = generator(eval_noise).numpy()
            mean_err = np.linalg.norm(pts.mean(0) - MEAN)
            cov_err = np.abs(np.cov(pts.T) - SCALE @ SCALE.T).max()
            for k, v in zip(history, (step, (d_real - d_fake).item(), mean_err, cov_err)):
                history[k].append(v)
            log(f"step {step:4d}  critic loss {loss_d.item():+.4f}  "
                  f"W-estimate {(d_real - d_fake).item():+.4f}  gp {gp.item():.4f}  "
                  f"generator loss {loss_g.item():+.4f}  |mean error| {mean_err:.3f}  "
                  f"max |cov error| {cov_err:.3f}  ({time.perf_counter() - start:.1f} s)")
    figure("wgan_gp", lambda plt: draw(plt, pts, sample_real(len(pts), rng).numpy(), history),
           "generated points over the real distribution; training curves")
    return mean_err, cov_err


def draw(plt, fake, real, history):
    """Left: real and generated samples; right: the critic's Wasserstein estimate and the
    generated distribution's mean and covariance errors over training."""
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4.2))
    ax1.scatter(*real.T, s=3, alpha=0.3, color="tab:blue", label="real N(mean, cov)")
    ax1.scatter(*fake.T, s=3, alpha=0.3, color="tab:orange", label="generated")
    ax1.set_title("samples after training")
    ax1.legend(markerscale=4, loc="upper right")
    ax1.set_aspect("equal", adjustable="datalim")
    ax2.plot(history["step"], history["w"], marker="o", label="W-estimate (critic)")
    ax2.plot(history["step"], history["mean_err"], marker="o", label="|mean error|")
    ax2.plot(history["step"], history["cov_err"], marker="o", label="max |cov error|")
    ax2.set_xlabel("generator step")
    ax2.set_title("training")
    ax2.legend()
    return fig


if __name__ == "__main__":
    main()
