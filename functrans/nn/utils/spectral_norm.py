"""torch.nn.utils.spectral_norm / remove_spectral_norm: weight = weight_orig / σ, σ the
largest singular value of weight_orig (reshaped to a matrix with `dim` first) estimated by
power iteration: in training mode each forward runs n_power_iterations steps on the buffers
weight_u and weight_v (in place, without gradient), in eval mode the stored vectors are used.
σ = uᵀ W v is differentiated through W, not through u and v (torch's semantics)."""
from __future__ import annotations

from ...facade.creation import randn
from ...facade.grad_mode import no_grad
from ..functional import normalize
from ..modules.module import Parameter


class SpectralNorm:
    """The forward pre-hook that sets module.<name> = <name>_orig / σ."""

    def __init__(self, name, n_power_iterations, dim, eps):
        if n_power_iterations <= 0:
            raise ValueError(f"Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.name, self.dim, self.eps = name, dim, eps
        self.n_power_iterations = n_power_iterations

    def reshape_weight_to_matrix(self, weight):
        if self.dim != 0:
            weight = weight.permute(self.dim, *[d for d in range(weight.dim()) if d != self.dim])
        return weight.reshape(weight.shape[0], -1)

    def compute_weight(self, module, do_power_iteration):
        weight = getattr(module, self.name + "_orig")
        u, v = getattr(module, self.name + "_u"), getattr(module, self.name + "_v")
        mat = self.reshape_weight_to_matrix(weight)
        if do_power_iteration:
            with no_grad():
                for _ in range(self.n_power_iterations):
                    v.copy_(normalize(mat.t() @ u, dim=0, eps=self.eps))
                    u.copy_(normalize(mat @ v, dim=0, eps=self.eps))
            u, v = u.clone(), v.clone()
        sigma = u.dot(mat @ v)
        return weight / sigma

    def __call__(self, module, inputs):
        setattr(module, self.name, self.compute_weight(module, module.training))


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """Divide module.<name> by its spectral norm before each forward (see the module
    docstring). dim defaults to 0, or 1 for the ConvTranspose layers, as torch's."""
    for hook in module._forward_pre_hooks.values():
        if isinstance(hook, SpectralNorm) and hook.name == name:
            raise RuntimeError(f"Cannot register two spectral_norm hooks on the same parameter "
                               f"{name}")
    if dim is None:
        dim = 1 if type(module).__name__.startswith("ConvTranspose") else 0
    fn = SpectralNorm(name, n_power_iterations, dim, eps)
    weight = module._parameters[name]
    with no_grad():
        mat = fn.reshape_weight_to_matrix(weight)
        h, w = mat.shape
        u = normalize(randn(h, dtype=weight.dtype), dim=0, eps=eps)
        v = normalize(randn(w, dtype=weight.dtype), dim=0, eps=eps)
    del module._parameters[name]
    module.register_parameter(name + "_orig", weight)
    setattr(module, name, weight.detach())
    module.register_buffer(name + "_u", u)
    module.register_buffer(name + "_v", v)
    module.register_forward_pre_hook(fn)
    return module


def remove_spectral_norm(module, name="weight"):
    """Undo spectral_norm: module.<name> becomes a Parameter holding the normalized weight."""
    for k, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, SpectralNorm) and hook.name == name:
            with no_grad():
                weight = hook.compute_weight(module, do_power_iteration=False)
            delattr(module, name)
            del module._parameters[name + "_orig"]
            del module._buffers[name + "_u"]
            del module._buffers[name + "_v"]
            module.register_parameter(name, Parameter(weight.detach()))
            del module._forward_pre_hooks[k]
            return module
    raise ValueError(f"spectral_norm of '{name}' not found in {module}")
