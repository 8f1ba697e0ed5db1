"""Adam and AdamW (torch.optim.Adam / AdamW), with PyTorch's update formulas."""
from __future__ import annotations

import math

from ..backends.cpu_kernels import adam_kernel
from ..facade import creation as C
from ..facade import grad_mode
from ..facade.inplace import native_updates
from .optimizer import Optimizer, _check_lr


def _check_adam_args(lr, betas, eps, weight_decay):
    _check_lr(lr)
    if not 0.0 <= eps:
        raise ValueError(f"Invalid epsilon value: {eps}")
    if not 0.0 <= betas[0] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
    if not 0.0 <= betas[1] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
    if not 0.0 <= weight_decay:
        raise ValueError(f"Invalid weight_decay value: {weight_decay}")


class Adam(Optimizer):
    """PyTorch's Adam. With t the step count, g the gradient (+ weight_decay * p, an L2 term):
    m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; (amsgrad: vmax = max(vmax, v), used for v);
    p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
    decoupled_weight_decay=True shrinks p by 1 - lr * weight_decay instead of the L2 term
    (AdamW's update; a hyperparameter of each group, as torch's)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False, fused=None, decoupled_weight_decay=False):
        _check_adam_args(lr, betas, eps, weight_decay)
        if differentiable:
            raise NotImplementedError(f"functrans {type(self).__name__} does not support "
                                      "differentiable=True")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, amsgrad=amsgrad,
                                      maximize=maximize, foreach=foreach, capturable=capturable,
                                      differentiable=differentiable, fused=fused,
                                      decoupled_weight_decay=bool(decoupled_weight_decay)))

    def step(self, closure=None):
        """One update of every parameter that has a gradient; returns closure() if given.
        With the native kernel, the parameters it takes are updated together in one call
        after the loop (facade.inplace.native_updates); the others, and any it declines,
        run the NumPy steps (_numpy_steps)."""
        loss = self._eval_closure(closure)
        kernel, name = adam_kernel(), type(self).__name__ + ".step"
        with grad_mode.no_grad():
            fused = []                  # (items for native_updates, the NumPy steps' args)
            for group in self.param_groups:
                lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
                wd, amsgrad, maximize = group["weight_decay"], group["amsgrad"], group["maximize"]
                decoupled = group["decoupled_weight_decay"]
                for p in group["params"]:
                    g = p.grad
                    if g is None:
                        continue
                    state = self.state.setdefault(p, {})
                    if not state:
                        state["step"] = C.tensor(0.0)
                        state["exp_avg"] = C.zeros_like(p)
                        state["exp_avg_sq"] = C.zeros_like(p)
                        if amsgrad:
                            state["max_exp_avg_sq"] = C.zeros_like(p)
                    state["step"] += 1
                    t = state["step"].item()
                    m, v = state["exp_avg"], state["exp_avg_sq"]
                    step_size = lr / (1 - beta1 ** t)
                    bc2_sqrt = math.sqrt(1 - beta2 ** t)
                    steps = (p, g, m, v, state, group, step_size, bc2_sqrt)
                    if kernel and not amsgrad and type(lr) in (int, float):
                        fused.append((([p, m, v], [g], (
                            (1 - lr * wd if decoupled else 1, wd, 1 - beta1, beta2, 1 - beta2,
                             bc2_sqrt, eps, -step_size), maximize, wd != 0 and not decoupled)),
                            steps))
                    else:
                        _numpy_steps(*steps)
            if fused:
                made = native_updates(name, kernel, [item for item, _ in fused])
                for ok, (_, steps) in zip(made, fused):
                    if not ok:
                        _numpy_steps(*steps)
        return loss


def _numpy_steps(p, g, m, v, state, group, step_size, bc2_sqrt):
    """PyTorch's single-tensor Adam steps on one parameter (its rounding; each in place, few
    passes): what the native kernel computes in one pass, where it does not apply."""
    lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
    wd = group["weight_decay"]
    if group["maximize"]:
        g = -g
    if group["decoupled_weight_decay"]:
        if wd != 0:
            p.mul_(1 - lr * wd)
    elif wd != 0:
        g = g + p * wd
    m.lerp_(g, 1 - beta1)
    v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
    if group["amsgrad"]:
        vmax = state["max_exp_avg_sq"]
        vmax.copy_(vmax.maximum(v))
        v = vmax
    denom = v.sqrt().div_(bc2_sqrt).add_(eps)
    p.addcdiv_(m, denom, value=-step_size)


class AdamW(Adam):
    """PyTorch's AdamW: Adam with decoupled weight decay, p *= 1 - lr * weight_decay before
    the Adam update (default weight_decay=1e-2): Adam with decoupled_weight_decay=True."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False, fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach,
                         maximize=maximize, capturable=capturable,
                         differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)
