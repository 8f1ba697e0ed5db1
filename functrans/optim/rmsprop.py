"""RMSprop and Adagrad (torch.optim.RMSprop / Adagrad), with PyTorch's update formulas."""
from __future__ import annotations

from ..facade import creation as C
from ..facade import grad_mode
from .optimizer import Optimizer, _check_lr


def _check_nonneg(**values):
    """torch's checks, in its order: 'Invalid <name> value: <value>' for a negative one."""
    for name, value in values.items():
        if not 0.0 <= value:
            raise ValueError(f"Invalid {name} value: {value}")


def _grad(p, group):
    """The gradient an update uses: negated when maximize, plus weight_decay * p (L2)."""
    g = -p.grad if group["maximize"] else p.grad
    return g + p * group["weight_decay"] if group["weight_decay"] != 0 else g


class RMSprop(Optimizer):
    """PyTorch's RMSprop. With g the gradient (+ weight_decay * p):
    v = alpha v + (1-alpha) g^2; centered: m = alpha m + (1-alpha) g, d = sqrt(v - m^2) + eps,
    else d = sqrt(v) + eps; momentum > 0: b = momentum b + g / d, p -= lr b; else p -= lr g / d."""

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
                 centered=False, capturable=False, foreach=None, maximize=False,
                 differentiable=False):
        _check_lr(lr)
        _check_nonneg(epsilon=eps, momentum=momentum, weight_decay=weight_decay, alpha=alpha)
        if differentiable:
            raise NotImplementedError("functrans RMSprop does not support differentiable=True")
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay,
                                      momentum=momentum, centered=centered,
                                      capturable=capturable, foreach=foreach, maximize=maximize,
                                      differentiable=differentiable))

    def step(self, closure=None):
        """One update of every parameter that has a gradient; returns closure() if given."""
        loss = self._eval_closure(closure)
        with grad_mode.no_grad():
            for group in self.param_groups:
                lr, alpha, eps = group["lr"], group["alpha"], group["eps"]
                momentum, centered = group["momentum"], group["centered"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    g = _grad(p, group)
                    state = self.state.setdefault(p, {})
                    if not state:
                        state["step"] = C.tensor(0.0)
                        state["square_avg"] = C.zeros_like(p)
                        if momentum > 0:
                            state["momentum_buffer"] = C.zeros_like(p)
                        if centered:
                            state["grad_avg"] = C.zeros_like(p)
                    state["step"] += 1
                    v = state["square_avg"]
                    v.mul_(alpha).add_(g * g, alpha=1 - alpha)
                    if centered:
                        m = state["grad_avg"]
                        m.mul_(alpha).add_(g, alpha=1 - alpha)
                        denom = (v - m * m).sqrt().add_(eps)
                    else:
                        denom = v.sqrt().add_(eps)
                    if momentum > 0:
                        buf = state["momentum_buffer"]
                        buf.mul_(momentum).add_(g / denom)
                        p.add_(buf, alpha=-lr)
                    else:
                        p.add_(g / denom, alpha=-lr)
        return loss


class Adagrad(Optimizer):
    """PyTorch's Adagrad. With t the step count and g the gradient (+ weight_decay * p):
    s += g^2; p -= lr / (1 + (t-1) lr_decay) * g / (sqrt(s) + eps); s starts at
    initial_accumulator_value."""

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0,
                 eps=1e-10, foreach=None, *, maximize=False, differentiable=False, fused=None):
        _check_lr(lr)
        _check_nonneg(lr_decay=lr_decay, weight_decay=weight_decay,
                      initial_accumulator_value=initial_accumulator_value, epsilon=eps)
        if differentiable:
            raise NotImplementedError("functrans Adagrad does not support differentiable=True")
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, eps=eps,
                                      weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value,
                                      foreach=foreach, maximize=maximize,
                                      differentiable=differentiable, fused=fused))
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p] = {"step": C.tensor(0.0),
                                 "sum": C.full_like(p, group["initial_accumulator_value"])}

    def step(self, closure=None):
        """One update of every parameter that has a gradient; returns closure() if given."""
        loss = self._eval_closure(closure)
        with grad_mode.no_grad():
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    g = _grad(p, group)
                    state = self.state[p]
                    state["step"] += 1
                    t = state["step"].item()
                    clr = group["lr"] / (1 + (t - 1) * group["lr_decay"])
                    s = state["sum"]
                    s.add_(g * g)
                    p.add_(g / s.sqrt().add_(group["eps"]), alpha=-clr)
        return loss
