"""functrans in one minute: trace a function to a jaxpr, evaluate it, differentiate it;
then the same core through the PyTorch-style API (Tensor, nn, optim, .backward())."""
import numpy as np

import functrans as ft
import functrans.numpy as fnp


def f(x, y):
    return fnp.sum(fnp.tanh(x @ y) * 2.0)


rng = np.random.default_rng(0)
a = rng.standard_normal((3, 4)).astype(np.float32)
b = rng.standard_normal((4, 5)).astype(np.float32)

# 1. Tracing: the function becomes a program in the IR (a jaxpr).
jaxpr = ft.make_jaxpr(f)(a, b)
print("jaxpr of f:")
print(jaxpr)

# 2. Evaluating the jaxpr gives the same number as NumPy.
(value,) = ft.eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, a, b)
print("eval_jaxpr:", value, " numpy:", np.sum(np.tanh(a @ b) * 2.0))

# 3. grad is a transformation of that program; the gradient program prints too.
g = ft.grad(f, argnums=(0, 1))(a, b)
print("grad shapes:", [x.shape for x in g])
print("jaxpr of grad(f):")
print(ft.make_jaxpr(ft.grad(f))(a, b))

# 4. Transformations compose: third derivative of sin, per-example gradients.
print("grad(grad(grad(sin)))(1.0) =", ft.grad(ft.grad(ft.grad(fnp.sin)))(1.0),
      " -cos(1) =", -np.cos(1.0))
per_example = ft.vmap(ft.grad(lambda w, x: fnp.sum(fnp.tanh(x @ w))), in_axes=(None, 0))(b, a)
print("per-example gradient shape:", per_example.shape)

# 5. The same core behind a PyTorch-style API: a Tensor records its graph, .backward() runs
#    the derived backward program, an optimizer steps the parameters.
ft.manual_seed(0)
x, y = ft.tensor(a), ft.tensor(rng.integers(0, 5, 3))
model = ft.nn.Sequential(ft.nn.Linear(4, 8), ft.nn.Tanh(), ft.nn.Linear(8, 5))
opt = ft.optim.SGD(model.parameters(), lr=0.5)
for step in range(20):
    opt.zero_grad()
    loss = ft.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    if step in (0, 19):
        print(f"PyTorch-style step {step}: loss {loss.item():.4f}, grad_fn {loss.grad_fn.name()}")
