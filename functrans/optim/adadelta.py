"""Adadelta and Adafactor (torch.optim), with PyTorch's update formulas: adaptive methods
whose step size needs little tuning (Adadelta's default lr is 1; Adafactor's relative step
follows the parameter's scale)."""
from __future__ import annotations

import math

import numpy as np

from ..facade import creation as C
from ..facade import grad_mode
from .optimizer import Optimizer, _check_lr
from .rmsprop import _grad


class Adadelta(Optimizer):
    """PyTorch's Adadelta. With g the gradient (+ weight_decay * p):
    v = rho v + (1-rho) g^2; delta = sqrt(u + eps) / sqrt(v + eps) * g;
    u = rho u + (1-rho) delta^2; p -= lr * delta."""

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *,
                 capturable=False, maximize=False, differentiable=False):
        _check_lr(lr)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if differentiable:
            raise NotImplementedError("functrans Adadelta does not support differentiable=True")
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay,
                                      maximize=maximize, capturable=capturable, foreach=foreach,
                                      differentiable=differentiable))

    def step(self, closure=None):
        """One update of every parameter that has a gradient; returns closure() if given."""
        loss = self._eval_closure(closure)
        with grad_mode.no_grad():
            for group in self.param_groups:
                lr, rho, eps = group["lr"], group["rho"], group["eps"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    g = _grad(p, group)
                    state = self.state[p]
                    if not state:
                        state["step"] = C.tensor(0.0)
                        state["square_avg"] = C.zeros_like(p)
                        state["acc_delta"] = C.zeros_like(p)
                    state["step"] += 1
                    v, u = state["square_avg"], state["acc_delta"]
                    v.mul_(rho).addcmul_(g, g, value=1 - rho)
                    delta = (u + eps).sqrt_().div_((v + eps).sqrt_()).mul_(g)
                    u.mul_(rho).addcmul_(delta, delta, value=1 - rho)
                    p.add_(delta, alpha=-lr)
        return loss


class Adafactor(Optimizer):
    """PyTorch's Adafactor (Shazeer & Stern, 2018, without first moments). At step t, with g
    the gradient and b = t^beta2_decay: a matrix (or batch of matrices) keeps only row and
    column means of g^2, r = lerp(r, mean_cols(g^2), b) and c = lerp(c, mean_rows(g^2), b),
    and estimates v = r c / mean(r); a vector keeps v = lerp(v, g^2, b) itself.
    u = g / sqrt(max(v, eps1^2)); p -= max(eps2, rms(p)) * min(lr, 1/sqrt(t)) * u / max(1,
    rms(u) / d). weight_decay shrinks p by 1 - lr * weight_decay first (decoupled);
    eps1=None is the dtype's machine epsilon."""

    def __init__(self, params, lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0,
                 weight_decay=0.0, *, foreach=None, maximize=False):
        if not 0.0 <= lr:
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 >= beta2_decay:
            raise ValueError(f"beta2_decay should be <= 0 but is: {beta2_decay}")
        if eps[0] is not None and not 0.0 <= eps[0]:
            raise ValueError(f"epsilon1 should be >= 0 but is: {eps[0]}")
        if not 0.0 <= eps[1]:
            raise ValueError(f"epsilon2 should be >= 0 but is: {eps[1]}")
        if not 1.0 <= d:
            raise ValueError(f"Clipping threshold d should be >= 1 but is: {d}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight_decay should be >= 0 but is: {weight_decay}")
        super().__init__(params, dict(lr=lr, beta2_decay=beta2_decay, eps=eps, d=d,
                                      weight_decay=weight_decay, foreach=foreach,
                                      maximize=maximize))

    def step(self, closure=None):
        """One update of every parameter that has a gradient; returns closure() if given."""
        loss = self._eval_closure(closure)
        with grad_mode.no_grad():
            for group in self.param_groups:
                lr, wd, (eps1, eps2) = group["lr"], group["weight_decay"], group["eps"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    if p.is_complex():
                        raise RuntimeError("Adafactor does not support complex parameters")
                    g = -p.grad if group["maximize"] else p.grad
                    state = self.state[p]
                    if not state:
                        state["step"] = C.tensor(0.0)
                        if g.dim() > 1:
                            state["row_var"] = g.new_zeros(*g.shape[:-1], 1)
                            state["col_var"] = g.new_zeros(*g.shape[:-2], 1, g.shape[-1])
                        else:
                            state["variance"] = C.zeros_like(g)
                    state["step"] += 1
                    self._update(p, g, state, group, lr, wd, eps1, eps2)
        return loss

    @staticmethod
    def _update(p, g, state, group, lr, wd, eps1, eps2):
        t = state["step"].item()
        b = t ** group["beta2_decay"]
        if eps1 is None:
            eps1 = float(np.finfo(p.dtype).eps)
        rho = min(lr, 1 / math.sqrt(t))
        alpha = max(eps2, p.norm(2).item() / math.sqrt(p.numel())) * rho
        if wd != 0:
            p.mul_(1 - lr * wd)
        if g.dim() > 1:
            r, c = state["row_var"], state["col_var"]
            r.lerp_(g.norm(dim=-1, keepdim=True).square_().div_(g.shape[-1]), b)
            c.lerp_(g.norm(dim=-2, keepdim=True).square_().div_(g.shape[-2]), b)
            v = (r @ c).div_(r.mean(dim=-2, keepdim=True).clamp_(min=eps1))
        else:
            v = state["variance"]
            v.lerp_(g * g, b)
            v = v.clone()
        u = v.clamp_(min=eps1 * eps1).rsqrt_().mul_(g)
        denom = max(1.0, u.norm(2).item() / (math.sqrt(u.numel()) * group["d"]))
        p.add_(u, alpha=-alpha / denom)
