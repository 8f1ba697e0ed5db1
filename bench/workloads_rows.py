"""Row workloads (issue 13): softmax and layernorm, whose reductions over the last axis a
backend may fuse with the elementwise work around them (row groups), forward and forward +
backward, jitted vs hand-written NumPy floors (and un-jitted eager). Compile time (the
first call) is in the notes. `jit_numpy_backend` is the same jitted function built with
cpu_backend="numpy", so one run shows what the native row groups gain (`jit` runs them
natively where a compiler is found); the speedup is in the notes.
"""
from __future__ import annotations

import time

import numpy as np

import functrans as ft
import functrans.numpy as fnp
from functrans.nn import functions as F

from .harness import Case, workload
from .workloads_jit import first_call_seconds

ROWS, COLS = 2048, 512
EPS = 1e-5


def _numpy_backend(jitted, args):
    """The same jitted function built under cpu_backend="numpy" (an executable keeps the
    backend it was built with), called on args."""
    saved = ft.config.cpu_backend
    ft.config.update("cpu_backend", "numpy")
    try:
        exe = jitted.lower(*args).compile()
    finally:
        ft.config.update("cpu_backend", saved)
    return lambda: exe(*args)


def speedup(native, numpy_backend, calls=7):
    """How many times faster `native` runs than `numpy_backend` (best of alternate calls):
    the row groups' gain in one figure."""
    best = [float("inf"), float("inf")]
    for _ in range(calls):
        for k, fn in enumerate((native, numpy_backend)):
            t0 = time.perf_counter()
            fn()
            best[k] = min(best[k], time.perf_counter() - t0)
    return round(best[1] / best[0], 2)


def row_case(fn, args, floor):
    """fn(*args) against floor(*args): jitted (compile time in the notes), jitted under
    the NumPy backend (the speedup in the notes), and un-jitted."""
    f = ft.jit(fn)
    compile_s = first_call_seconds(f, *args)
    jit, nb = (lambda: f(*args)), _numpy_backend(f, args)
    return Case({"numpy": lambda: floor(*args), "jit": jit, "jit_numpy_backend": nb,
                 "eager": lambda: fn(*args)},
                notes={"compile_s": compile_s, "speedup_vs_numpy_backend": speedup(jit, nb)})


def row_data(seed=0, rows=ROWS, cols=COLS, dtype=np.float32):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, cols)).astype(dtype)
    w = rng.uniform(-1, 1, (rows, cols)).astype(dtype)       # the upstream gradient
    g = rng.uniform(0.5, 1.5, cols).astype(dtype)
    b = rng.uniform(-0.5, 0.5, cols).astype(dtype)
    return x, w, g, b


# ---------------------------------------------------------------------------
# softmax


def softmax_loss(x, w):
    return fnp.sum(F.softmax(x) * w)


def softmax_floor(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    e /= e.sum(axis=-1, keepdims=True)
    return e


def softmax_value_and_grad_floor(x, w):
    """sum(softmax(x) * w) and its gradient y * (w - sum(y * w)) along each row."""
    y = softmax_floor(x)
    yw = y * w
    dot = yw.sum(axis=-1, keepdims=True)
    g = w - dot
    g *= y
    return yw.sum(), g


@workload("jit_softmax_fwd", issue=13, rtol=1e-5,
          description=f"softmax over the last axis of f32[{ROWS},{COLS}], jitted vs NumPy")
def jit_softmax_fwd():
    return row_case(F.softmax, row_data()[:1], softmax_floor)


@workload("jit_softmax_fwd_bwd", issue=13, rtol=1e-4, atol=1e-6,
          description=f"value_and_grad of sum(softmax(x) * w), f32[{ROWS},{COLS}], jitted "
                      "vs hand-written NumPy")
def jit_softmax_fwd_bwd():
    x, w, _, _ = row_data()
    return row_case(ft.value_and_grad(softmax_loss), (x, w), softmax_value_and_grad_floor)


# ---------------------------------------------------------------------------
# layernorm


def layernorm(x, g, b):
    mu = fnp.mean(x, axis=-1, keepdims=True)
    var = fnp.mean((x - mu) ** 2, axis=-1, keepdims=True)
    return (x - mu) / fnp.sqrt(var + EPS) * g + b


def layernorm_loss(x, g, b, w):
    return fnp.sum(layernorm(x, g, b) * w)


def layernorm_floor(x, g, b):
    mu = x.mean(axis=-1, keepdims=True)
    xc = x - mu
    var = np.mean(xc * xc, axis=-1, keepdims=True)
    xc /= np.sqrt(var + x.dtype.type(EPS))
    xc *= g
    xc += b
    return xc


def layernorm_value_and_grad_floor(x, g, b, w):
    """sum(layernorm(x) * w) and its gradients: with xhat = (x - mu) * rstd and
    d = w * g, dx = rstd * (d - mean(d) - xhat * mean(d * xhat)) along each row,
    dg = sum over rows of w * xhat, db = sum over rows of w."""
    mu = x.mean(axis=-1, keepdims=True)
    xhat = x - mu
    rstd = 1 / np.sqrt(np.mean(xhat * xhat, axis=-1, keepdims=True) + x.dtype.type(EPS))
    xhat *= rstd
    loss = np.sum((xhat * g + b) * w)
    d = w * g
    dx = d - d.mean(axis=-1, keepdims=True)
    dx -= xhat * np.mean(d * xhat, axis=-1, keepdims=True)
    dx *= rstd
    return loss, (dx, (w * xhat).sum(axis=0), w.sum(axis=0))


@workload("jit_layernorm_fwd", issue=13, rtol=1e-4, atol=1e-5,
          description=f"layernorm over the last axis of f32[{ROWS},{COLS}] (scale and "
                      "shift), jitted vs NumPy")
def jit_layernorm_fwd():
    x, _, g, b = row_data()
    return row_case(layernorm, (x, g, b), layernorm_floor)


@workload("jit_layernorm_fwd_bwd", issue=13, rtol=1e-4, atol=1e-5,
          description=f"value_and_grad of sum(layernorm(x, g, b) * w) in x, g, b, "
                      f"f32[{ROWS},{COLS}], jitted vs hand-written NumPy")
def jit_layernorm_fwd_bwd():
    x, w, g, b = row_data()
    return row_case(ft.value_and_grad(layernorm_loss, argnums=(0, 1, 2)), (x, g, b, w),
                    layernorm_value_and_grad_floor)
