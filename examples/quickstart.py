"""functrans in one minute: trace a function to a jaxpr, evaluate it, differentiate it."""
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
