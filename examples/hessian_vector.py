"""Hessian-vector products without forming the Hessian: forward-over-reverse (jvp of grad).

Checks the product against the explicit Hessian on a small problem, then uses it for a few
steps of Newton-CG on a logistic regression.
"""
import numpy as np

import functrans as ft
import functrans.numpy as fnp


def hvp(f, x, v):
    """H(x) @ v = directional derivative of grad f along v."""
    return ft.jvp(ft.grad(f), (x,), (v,))[1]


def main():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 5))
    w_true = rng.standard_normal(5)
    y = (X @ w_true + 0.3 * rng.standard_normal(200) > 0).astype(np.float64)

    def loss(w):
        logits = X @ w
        return fnp.mean(ft.nn.softplus(logits) - y * logits) + 0.01 * fnp.sum(w ** 2)

    w = np.zeros(5)
    v = rng.standard_normal(5)
    H = ft.hessian(loss)(w)
    print("max |hvp - H v| =", np.max(np.abs(hvp(loss, w, v) - H @ v)))

    for it in range(5):                      # Newton-CG: solve H d = -g with conjugate gradients
        g = ft.grad(loss)(w)
        d, r = np.zeros_like(w), -g
        p, rs = r.copy(), r @ r
        for _ in range(10):
            Hp = hvp(loss, w, p)
            alpha = rs / (p @ Hp)
            d, r = d + alpha * p, r - alpha * Hp
            rs_new = r @ r
            if rs_new < 1e-20:
                break
            p, rs = r + rs_new / rs * p, rs_new
        w = w + d
        print(f"newton step {it}: loss {float(loss(w)):.6f}  |grad| {np.linalg.norm(ft.grad(loss)(w)):.2e}")


if __name__ == "__main__":
    main()
