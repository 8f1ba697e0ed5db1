"""Stochastic gradient descent with momentum, dampening, Nesterov and weight decay (torch.optim.SGD)."""
from __future__ import annotations

from ..facade import grad_mode
from .optimizer import Optimizer, _check_lr


class SGD(Optimizer):
    """PyTorch's SGD. Per parameter, with g the gradient (negated when maximize):
    g += weight_decay * p; b = g on the first step, else momentum * b + (1 - dampening) * g;
    g = g + momentum * b (nesterov) or b; p -= lr * g."""

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0,
                 nesterov=False, *, maximize=False, foreach=None, differentiable=False,
                 fused=None):
        _check_lr(lr)
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        if differentiable:
            raise NotImplementedError("functrans SGD does not support differentiable=True")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov,
                                      maximize=maximize, foreach=foreach,
                                      differentiable=differentiable, fused=fused))

    def step(self, closure=None):
        """One update of every parameter that has a gradient; returns closure() if given."""
        loss = self._eval_closure(closure)
        with grad_mode.no_grad():
            for group in self.param_groups:
                lr, momentum, dampening = group["lr"], group["momentum"], group["dampening"]
                wd, nesterov, maximize = group["weight_decay"], group["nesterov"], group["maximize"]
                for p in group["params"]:
                    g = p.grad
                    if g is None:
                        continue
                    if maximize:
                        g = -g
                    if wd != 0:
                        g = g + p * wd
                    if momentum != 0:
                        state = self.state.setdefault(p, {})
                        buf = state.get("momentum_buffer")
                        if buf is None:
                            buf = g.detach().clone()
                            state["momentum_buffer"] = buf
                        else:
                            buf.mul_(momentum).add_(g, alpha=1 - dampening)
                        g = g + buf * momentum if nesterov else buf
                    p.add_(g, alpha=-lr)
        return loss
