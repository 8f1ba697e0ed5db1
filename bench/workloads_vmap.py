"""vmap and control-flow workloads (issue 5), each against hand-written NumPy.

- per-example gradients of a 128->10 softmax regression, batch 256: ft.vmap(ft.grad(loss))
  vs a Python loop of ft.grad vs the closed form in NumPy;
- an RNN-style ft.lax.scan of 100 tanh steps (hidden 64, batch 32), forward and
  forward+backward (ft.value_and_grad), vs the same loop unrolled in Python vs NumPy BPTT.

The ``*_floor`` functions work in any float dtype, so tests check them in float64.
"""
from __future__ import annotations

import numpy as np

import functrans as ft
import functrans.numpy as fnp

from .harness import workload

# Hook for issue 6 (jit): when True, each workload also times its functrans variant under
# ft.jit ("jit_..." variants, e.g. "jit_vmap_grad" with the issue's target of 1.0x the
# floor). Off until ft.jit compiles these programs; the jit helper switches it on.
JIT_VARIANTS = False


def _with_jit(variants, name, fn, *args):
    """Add variant `name` = ft.jit(fn)(*args) when the jit hook is on."""
    if JIT_VARIANTS:
        jitted = ft.jit(fn)
        variants[name] = lambda: jitted(*args)
    return variants


# ---------------------------------------------------------------------------
# per-example gradients: softmax regression 128 -> 10, batch 256

PEG_IN, PEG_OUT, PEG_BATCH = 128, 10, 256


def softmax_xent(params, x, y1h):
    """Cross-entropy of one example (x: (128,), one-hot y1h: (10,)) under softmax(x W + b)."""
    return -fnp.sum(y1h * ft.nn.log_softmax(x @ params["w"] + params["b"]))


def per_example_grads_floor(params, x, y1h):
    """Closed form: d/dz = softmax(z) - y, so dW_i = x_i (p_i - y_i)^T and db_i = p_i - y_i."""
    z = x @ params["w"]
    z += params["b"]
    z -= z.max(axis=1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(axis=1, keepdims=True)
    p -= y1h
    return {"b": p, "w": np.einsum("bi,bj->bij", x, p)}


def per_example_inputs(n_in=PEG_IN, n_out=PEG_OUT, batch=PEG_BATCH, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    params = {"w": (rng.standard_normal((n_in, n_out)) / np.sqrt(n_in)).astype(dtype),
              "b": (0.1 * rng.standard_normal(n_out)).astype(dtype)}
    x = rng.standard_normal((batch, n_in)).astype(dtype)
    y1h = np.eye(n_out, dtype=dtype)[rng.integers(0, n_out, batch)]
    return params, x, y1h


@workload("per_example_grads", issue=5,
          targets={"vmap_grad": 2.0, "jit_vmap_grad": 1.0},
          description="per-example gradients of softmax regression 128->10, batch 256: "
                      "vmap(grad) vs a Python loop of grad vs closed-form NumPy")
def per_example_grads():
    params, x, y1h = per_example_inputs()
    pg = ft.vmap(ft.grad(softmax_xent), in_axes=(None, 0, 0))
    g = ft.grad(softmax_xent)

    def python_loop():
        grads = [g(params, x[i], y1h[i]) for i in range(x.shape[0])]
        return {"b": np.stack([d["b"] for d in grads]), "w": np.stack([d["w"] for d in grads])}
    variants = {"numpy": lambda: per_example_grads_floor(params, x, y1h),
                "vmap_grad": lambda: pg(params, x, y1h),
                "python_loop": python_loop}
    return _with_jit(variants, "jit_vmap_grad", pg, params, x, y1h)


# ---------------------------------------------------------------------------
# RNN: 100 steps of h = tanh(h W + x_t U + b), hidden 64, batch 32

RNN_STEPS, RNN_HIDDEN, RNN_BATCH, RNN_IN = 100, 64, 32, 64


def rnn_loss_scan(params, xs):
    """0.5 * mean of the squared hidden states over all steps, the loop as one ft.lax.scan."""
    w, u, b = params

    def cell(h, x):
        h = fnp.tanh(h @ w + x @ u + b)
        return h, h
    h0 = fnp.zeros((xs.shape[1], w.shape[0]), dtype=xs.dtype)
    _, hs = ft.lax.scan(cell, h0, xs)
    return 0.5 * fnp.mean(hs * hs)


def rnn_loss_unrolled(params, xs):
    """The same loss with the loop unrolled in Python (one traced step per iteration)."""
    w, u, b = params
    h = fnp.zeros((xs.shape[1], w.shape[0]), dtype=xs.dtype)
    total = 0.0
    for t in range(xs.shape[0]):
        h = fnp.tanh(h @ w + xs[t] @ u + b)
        total = total + fnp.sum(h * h)
    return 0.5 * total / (xs.shape[0] * h.shape[0] * h.shape[1])


def rnn_forward_floor(params, xs):
    w, u, b = params
    h = np.zeros((xs.shape[1], w.shape[0]), xs.dtype)
    total = 0.0
    for x in xs:
        h = np.tanh(h @ w + x @ u + b)
        total += np.vdot(h, h)
    return np.asarray(0.5 * total / (xs.shape[0] * h.size), xs.dtype)


def rnn_value_and_grad_floor(params, xs):
    """Forward, storing every state, then backpropagation through time."""
    w, u, b = params
    steps = xs.shape[0]
    hs = np.empty((steps + 1, xs.shape[1], w.shape[0]), xs.dtype)
    hs[0] = 0
    xu = (xs.reshape(-1, xs.shape[2]) @ u).reshape(steps, xs.shape[1], -1)
    for t in range(steps):
        hs[t + 1] = np.tanh(hs[t] @ w + xu[t] + b)
    scale = 1.0 / (steps * hs[0].size)
    loss = 0.5 * scale * np.vdot(hs[1:], hs[1:])
    dz = np.empty_like(hs[1:])            # d loss / d pre-activation, every step
    dh = np.zeros_like(hs[0])
    for t in range(steps - 1, -1, -1):
        dh += scale * hs[t + 1]
        dz[t] = dh * (1 - hs[t + 1] * hs[t + 1])
        dh = dz[t] @ w.T
    dz2 = dz.reshape(-1, dz.shape[2])
    dw = hs[:-1].reshape(-1, hs.shape[2]).T @ dz2
    du = xs.reshape(-1, xs.shape[2]).T @ dz2
    return np.asarray(loss, xs.dtype), (dw, du, dz2.sum(axis=0))


def rnn_inputs(steps=RNN_STEPS, hidden=RNN_HIDDEN, batch=RNN_BATCH, n_in=RNN_IN,
               dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    params = ((rng.standard_normal((hidden, hidden)) / np.sqrt(hidden)).astype(dtype),
              (rng.standard_normal((n_in, hidden)) / np.sqrt(n_in)).astype(dtype),
              (0.1 * rng.standard_normal(hidden)).astype(dtype))
    return params, rng.standard_normal((steps, batch, n_in)).astype(dtype)


@workload("rnn_scan_forward", issue=5, rtol=1e-4, atol=1e-6,
          description="100-step tanh RNN (hidden 64, batch 32) forward: ft.lax.scan vs the "
                      "loop unrolled in Python vs NumPy")
def rnn_scan_forward():
    params, xs = rnn_inputs()
    variants = {"numpy": lambda: rnn_forward_floor(params, xs),
                "scan": lambda: rnn_loss_scan(params, xs),
                "unrolled": lambda: rnn_loss_unrolled(params, xs)}
    return _with_jit(variants, "jit_scan", rnn_loss_scan, params, xs)


@workload("rnn_scan_grad", issue=5, rtol=1e-4, atol=1e-6,
          description="100-step tanh RNN (hidden 64, batch 32) value_and_grad: scan (reverse "
                      "scan backward) vs the loop unrolled in Python vs NumPy BPTT")
def rnn_scan_grad():
    params, xs = rnn_inputs()
    vg_scan = ft.value_and_grad(rnn_loss_scan)
    vg_unrolled = ft.value_and_grad(rnn_loss_unrolled)
    variants = {"numpy": lambda: rnn_value_and_grad_floor(params, xs),
                "scan": lambda: vg_scan(params, xs),
                "unrolled": lambda: vg_unrolled(params, xs)}
    return _with_jit(variants, "jit_scan", vg_scan, params, xs)
