"""Adamax, NAdam and RAdam (torch.optim), with PyTorch's update formulas."""
from __future__ import annotations

import math

from ..facade import creation as C
from ..facade import dtypes as D
from ..facade import grad_mode
from .adam import _check_adam_args
from .optimizer import Optimizer


class _AdamFamily(Optimizer):
    """Argument checks, state creation and the per-parameter loop the three share; a
    subclass's `_update(p, g, state, t, group)` does its own update (g already includes
    the L2 weight-decay term, or p was already shrunk when the decay is decoupled)."""

    _state_names = ("exp_avg", "exp_avg_sq")

    def __init__(self, params, defaults):
        _check_adam_args(defaults["lr"], defaults["betas"], defaults["eps"],
                         defaults["weight_decay"])
        if defaults.get("differentiable"):
            raise NotImplementedError(f"functrans {type(self).__name__} does not support "
                                      "differentiable=True")
        super().__init__(params, defaults)

    def step(self, closure=None):
        """One update of every parameter that has a gradient; returns closure() if given."""
        loss = self._eval_closure(closure)
        with grad_mode.no_grad():
            for group in self.param_groups:
                lr, wd = group["lr"], group["weight_decay"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    g = -p.grad if group["maximize"] else p.grad
                    state = self.state.setdefault(p, {})
                    if not state:
                        state["step"] = C.tensor(0.0)
                        state.update(self._extra_state())
                        for name in self._state_names:
                            state[name] = C.zeros_like(p)
                    if wd != 0:
                        if group.get("decoupled_weight_decay"):
                            p.mul_(1 - lr * wd)
                        else:
                            g = g + p * wd
                    state["step"] += 1
                    self._update(p, g, state, state["step"].item(), group)
        return loss

    def _extra_state(self):
        return {}


class Adamax(_AdamFamily):
    """PyTorch's Adamax (Adam in the infinity norm). With g the gradient (+ weight_decay * p):
    m = b1 m + (1-b1) g; u = max(b2 u, |g| + eps); p -= lr / (1 - b1^t) * m / u."""

    _state_names = ("exp_avg", "exp_inf")

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 foreach=None, *, maximize=False, differentiable=False, capturable=False):
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable,
                                      capturable=capturable))

    def _update(self, p, g, state, t, group):
        (b1, b2), eps = group["betas"], group["eps"]
        m, u = state["exp_avg"], state["exp_inf"]
        m.mul_(b1).add_(g, alpha=1 - b1)
        u.copy_((u * b2).maximum(g.abs().add_(eps)))
        p.add_(m / u, alpha=-group["lr"] / (1 - b1 ** t))


class NAdam(_AdamFamily):
    """PyTorch's NAdam (Adam with Nesterov momentum and momentum decay psi):
    mu_t = b1 (1 - 0.96^(t psi) / 2), P = prod mu_1..t; m, v as Adam; d = sqrt(v / (1-b2^t)) + eps;
    p -= lr (1-mu_t) / (1-P) g / d + lr mu_(t+1) / (1 - P mu_(t+1)) m / d."""

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 momentum_decay=4e-3, decoupled_weight_decay=False, *, foreach=None,
                 maximize=False, capturable=False, differentiable=False):
        if not 0.0 <= momentum_decay:
            raise ValueError(f"Invalid momentum_decay value: {momentum_decay}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, momentum_decay=momentum_decay,
                                      decoupled_weight_decay=decoupled_weight_decay,
                                      foreach=foreach, maximize=maximize,
                                      capturable=capturable, differentiable=differentiable))

    def _extra_state(self):
        # in the default dtype, as torch's (float32 unless set otherwise): the product is
        # rounded to it at every step, and the update reads it back as a Python float
        return {"mu_product": C.tensor(1.0, dtype=D.get_default_dtype())}

    def _update(self, p, g, state, t, group):
        (b1, b2), eps, lr, psi = group["betas"], group["eps"], group["lr"], group["momentum_decay"]
        m, v = state["exp_avg"], state["exp_avg_sq"]
        mu = b1 * (1.0 - 0.5 * 0.96 ** (t * psi))
        mu_next = b1 * (1.0 - 0.5 * 0.96 ** ((t + 1) * psi))
        state["mu_product"] *= mu
        prod = state["mu_product"].item()
        m.mul_(b1).add_(g, alpha=1 - b1)
        v.mul_(b2).add_(g * g, alpha=1 - b2)
        denom = (v / (1 - b2 ** t)).sqrt().add_(eps)
        p.add_(g / denom, alpha=-lr * (1 - mu) / (1 - prod))
        p.add_(m / denom, alpha=-lr * mu_next / (1 - prod * mu_next))


class RAdam(_AdamFamily):
    """PyTorch's RAdam (rectified Adam): rho_inf = 2/(1-b2) - 1, rho_t = rho_inf - 2 t b2^t / (1-b2^t);
    when rho_t > 5, p -= lr m/(1-b1^t) * r_t sqrt(1-b2^t) / (sqrt(v) + eps) with the variance
    rectification r_t; else p -= lr m/(1-b1^t) (plain momentum)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False,
                 capturable=False, differentiable=False):
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay,
                                      decoupled_weight_decay=decoupled_weight_decay,
                                      foreach=foreach, maximize=maximize,
                                      capturable=capturable, differentiable=differentiable))

    def _update(self, p, g, state, t, group):
        (b1, b2), eps, lr = group["betas"], group["eps"], group["lr"]
        m, v = state["exp_avg"], state["exp_avg_sq"]
        m.mul_(b1).add_(g, alpha=1 - b1)
        v.mul_(b2).add_(g * g, alpha=1 - b2)
        bc1, bc2 = 1 - b1 ** t, 1 - b2 ** t
        rho_inf = 2 / (1 - b2) - 1
        rho_t = rho_inf - 2 * t * b2 ** t / bc2
        if rho_t > 5.0:
            rect = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf
                             / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
            p.add_(m / v.sqrt().add_(eps), alpha=-lr / bc1 * rect * math.sqrt(bc2))
        else:
            p.add_(m, alpha=-lr / bc1)
