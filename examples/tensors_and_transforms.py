"""Tensors go through every transformation: ft.grad, ft.vmap and ft.jit hand the function
Tensors and give Tensors back, so a PyTorch-style model is differentiated, batched and
compiled as a pure function of its parameters. Each result is checked as it is printed."""
import numpy as np

import functrans as ft

# gradient of a function written with Tensor methods
x = ft.tensor([0.5, -1.0, 2.0], dtype=ft.float64)
g = ft.grad(lambda t: (t.sin() * t).sum())(x)
xs = x.detach().numpy()
assert np.allclose(g.numpy(), np.cos(xs) * xs + np.sin(xs))
print("grad of sum(sin(t) * t):", g)

# per-example gradients of a module, through functional_call
ft.manual_seed(0)
model = ft.nn.Sequential(ft.nn.Linear(3, 4), ft.nn.Tanh(), ft.nn.Linear(4, 1))
params = {k: v.detach() for k, v in model.named_parameters()}
batch = ft.randn(5, 3)


def loss(p, xi):
    return ft.func.functional_call(model, p, (xi[None],)).sum()


per_example = ft.vmap(ft.grad(loss), in_axes=(None, 0))(params, batch)
summed = ft.grad(lambda p: ft.func.functional_call(model, p, (batch,)).sum())(params)
for k in params:
    assert np.allclose(per_example[k].numpy().sum(0), summed[k].numpy(), atol=1e-5)
print("per-example weight gradient of the first layer:", tuple(per_example["0.weight"].shape))

# jit compiles the same Tensor code; NumPy's functions take Tensors as they take torch's
def objective(p, xb):
    return ft.func.functional_call(model, p, (xb,)).tanh().mean()


step = ft.jit(objective)
assert np.isclose(float(step(params, batch)), float(objective(params, batch)), rtol=1e-6)
print("jitted loss:", float(step(params, batch)))
print("np.mean over a Tensor:", np.mean(ft.ones(2, 3), axis=0))
