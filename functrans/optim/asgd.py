"""ASGD and Rprop (torch.optim), with PyTorch's update formulas."""
from __future__ import annotations

from ..facade import creation as C
from ..facade import grad_mode
from .optimizer import Optimizer, _check_lr
from .rmsprop import _grad


class ASGD(Optimizer):
    """PyTorch's averaged SGD. With t the step count and g the gradient (+ weight_decay * p):
    p = p (1 - lambd eta) - eta g; the average ax follows p (ax += mu (p - ax), ax = p while
    mu is 1); then eta = lr / (1 + lambd lr t)^alpha and mu = 1 / max(1, t - t0). eta and mu
    are kept as tensors of the default dtype, as PyTorch keeps them."""

    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0,
                 foreach=None, maximize=False, differentiable=False, capturable=False):
        _check_lr(lr)
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if differentiable:
            raise NotImplementedError("functrans ASGD does not support differentiable=True")
        super().__init__(params, dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0,
                                      weight_decay=weight_decay, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable,
                                      capturable=capturable))

    def step(self, closure=None):
        """One update of every parameter that has a gradient; returns closure() if given."""
        loss = self._eval_closure(closure)
        with grad_mode.no_grad():
            for group in self.param_groups:
                lr, lambd, alpha, t0 = group["lr"], group["lambd"], group["alpha"], group["t0"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    g = _grad(p, group)
                    state = self.state[p]
                    if not state:
                        state["step"] = C.tensor(0.0)
                        state["eta"] = C.tensor(float(lr))
                        state["mu"] = C.tensor(1.0)
                        state["ax"] = C.zeros_like(p)
                    state["step"] += 1
                    eta, mu, ax = state["eta"].item(), state["mu"].item(), state["ax"]
                    p.mul_(1 - lambd * eta).add_(g, alpha=-eta)
                    if mu != 1:
                        ax.add_((p - ax).mul_(mu))
                    else:
                        ax.copy_(p)
                    t = state["step"].item()
                    state["eta"].fill_(lr / (1 + lambd * lr * t) ** alpha)
                    state["mu"].fill_(1 / max(1, t - t0))
        return loss


class Rprop(Optimizer):
    """PyTorch's resilient backpropagation: only the sign of the gradient is used. Each
    element's step size (starting at lr) is multiplied by etas[1] when the gradient keeps
    its sign, by etas[0] when it flips (and that step is skipped: the gradient counts as
    zero), then clipped to step_sizes; p -= sign(g) * step_size."""

    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *,
                 capturable=False, foreach=None, maximize=False, differentiable=False):
        _check_lr(lr)
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        if differentiable:
            raise NotImplementedError("functrans Rprop does not support differentiable=True")
        super().__init__(params, dict(lr=lr, etas=etas, step_sizes=step_sizes, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable,
                                      capturable=capturable))

    def step(self, closure=None):
        """One update of every parameter that has a gradient; returns closure() if given."""
        loss = self._eval_closure(closure)
        with grad_mode.no_grad():
            for group in self.param_groups:
                (eta_minus, eta_plus), (lo, hi) = group["etas"], group["step_sizes"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    g = -p.grad if group["maximize"] else p.grad
                    state = self.state[p]
                    if not state:
                        state["step"] = C.tensor(0.0)
                        state["prev"] = C.zeros_like(p)
                        state["step_size"] = C.full_like(g, group["lr"])
                    state["step"] += 1
                    agree = (g * state["prev"]).sign()     # NaN stays NaN, as in torch
                    flips = agree < 0
                    factor = agree.where(~(agree > 0), eta_plus).where(~flips, eta_minus)
                    step_size = state["step_size"]
                    step_size.mul_(factor.where(agree != 0, 1.0)).clamp_(lo, hi)
                    g = g.where(~flips, 0.0)
                    p.addcmul_(g.sign(), step_size, value=-1)
                    state["prev"].copy_(g)
        return loss
