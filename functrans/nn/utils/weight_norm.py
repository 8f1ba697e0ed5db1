"""torch.nn.utils.weight_norm / remove_weight_norm: weight = g * v / ‖v‖ (the norm over every
dim but `dim`), recomputed by a forward pre-hook from the parameters `<name>_g` and
`<name>_v` (torch's deprecated hook-based API; the names and state_dict keys are its)."""
from __future__ import annotations

import warnings

from ...facade.grad_mode import no_grad
from ..modules.module import Parameter


def _norm_except_dim(v, dim):
    """‖v‖ over every dim but `dim` (keeping dims to broadcast); the whole norm for None."""
    if dim is None:
        return v.pow(2).sum().sqrt()
    dim = dim % v.dim()
    axes = tuple(d for d in range(v.dim()) if d != dim)
    return v.pow(2).sum(axes, keepdim=True).sqrt()


def _weight_norm(v, g, dim):
    return v * (g / _norm_except_dim(v, dim))


class WeightNorm:
    """The forward pre-hook that recomputes module.<name> from <name>_g and <name>_v."""

    def __init__(self, name, dim):
        self.name, self.dim = name, (None if dim == -1 else dim)

    def compute_weight(self, module):
        return _weight_norm(getattr(module, self.name + "_v"), getattr(module, self.name + "_g"),
                            self.dim)

    def __call__(self, module, inputs):
        setattr(module, self.name, self.compute_weight(module))


def weight_norm(module, name="weight", dim=0):
    """Reparameterize module.<name> as g * v / ‖v‖: parameters <name>_g (the norm, shaped to
    broadcast over `dim`) and <name>_v (the direction), recomputed before each forward."""
    warnings.warn("torch.nn.utils.weight_norm is deprecated in favor of "
                  "torch.nn.utils.parametrizations.weight_norm.", FutureWarning, stacklevel=2)
    for hook in module._forward_pre_hooks.values():
        if isinstance(hook, WeightNorm) and hook.name == name:
            raise RuntimeError(f"Cannot register two weight_norm hooks on the same parameter "
                               f"{name}")
    fn = WeightNorm(name, dim)
    weight = getattr(module, name)
    del module._parameters[name]
    with no_grad():
        g = _norm_except_dim(weight, fn.dim)
    module.register_parameter(name + "_g", Parameter(g.detach()))
    module.register_parameter(name + "_v", Parameter(weight.detach()))
    setattr(module, name, fn.compute_weight(module))
    module.register_forward_pre_hook(fn)
    return module


def remove_weight_norm(module, name="weight"):
    """Undo weight_norm: module.<name> becomes a Parameter holding g * v / ‖v‖ again."""
    for k, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, WeightNorm) and hook.name == name:
            with no_grad():
                weight = hook.compute_weight(module)
            delattr(module, name)
            del module._parameters[name + "_g"]
            del module._parameters[name + "_v"]
            module.register_parameter(name, Parameter(weight.detach()))
            del module._forward_pre_hooks[k]
            return module
    raise ValueError(f"weight_norm of '{name}' not found in {module}")
