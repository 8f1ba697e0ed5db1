"""jit workloads (issue 6): compiled programs against un-jitted eager code and NumPy.

- a 30-op elementwise chain on 1,000,000 float32 (forward; forward + backward), jitted
  vs un-jitted eager; the issue's target is jit >= 1.5x faster than eager, so eager is
  this workload's floor (target 1/1.5 = 0.67) and the NumPy chain is a plain variant;
  the same with a transcendental-heavy chain (sin/cos/tanh/exp), where fusion saves less;
- the jitted 200-op chain on f32[8] vs the same ops in NumPy (target 1.5x);
- the jitted MLP 784-512-512-10 training step (value_and_grad + SGD), batch 128, vs its
  hand-written NumPy floor (target 1.05x; compile time, target < 0.5 s, in the notes);
- the jitted functional WGAN-GP critic step (double backward + SGD) vs its floor;
- on a GPU (CuPy present and a device seen): the chain and the MLP step against CuPy
  written by hand.

Compile time (trace + optimize + lower + the first run) is reported in each workload's
notes. Setting this module also switches on the jit variants of bench/workloads_vmap.py.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import time
import warnings

import numpy as np

import functrans as ft
import functrans.numpy as fnp

from . import workloads_vmap
from .harness import Case, Staged, library, workload
from .workloads_ad import (gp_inputs, mlp_inputs, mlp_loss, mlp_value_and_grad_floor,
                           wgan_gp_grad_floor, wgan_gp_loss)
from .workloads_core import chain, chain_block, chain_inputs

workloads_vmap.JIT_VARIANTS = True       # the hook left for issue 6

CHAIN_N = 1_000_000
LR = 0.01


def first_call_seconds(fn, *args):
    """Seconds of the first call of a freshly jitted function: trace, optimize, lower,
    generate code and run once."""
    t0 = time.perf_counter()
    fn(*args)
    return round(time.perf_counter() - t0, 4)


# ---------------------------------------------------------------------------
# 30-op elementwise chains on 1M floats


def arith_block(m, y, a, b):
    """Ten cheap elementwise ops (one tanh): bandwidth-bound in eager NumPy."""
    y = m.multiply(y, a)
    y = m.add(y, b)
    y = m.maximum(y, 0.0)
    y = m.subtract(y, a)
    y = m.multiply(y, 0.5)
    y = m.abs(y)
    y = m.add(y, b)
    y = m.tanh(y)
    y = m.multiply(y, y)
    y = m.subtract(y, b)
    return y


def chain30(m, x, a, b, block=arith_block):
    for _ in range(3):
        x = block(m, x, a, b)
    return x


def chain30_grad_floor(x, a, b):
    """Hand-written d/dx sum(chain30(x)) for the arithmetic chain."""
    saved = []
    y = x
    for _ in range(3):
        y2 = y * a + b
        y5 = (np.maximum(y2, 0) - a) * np.float32(0.5)
        y8 = np.tanh(np.abs(y5) + b)
        saved.append((y2, y5, y8))
        y = y8 * y8 - b
    g = np.ones_like(x)
    for y2, y5, y8 in reversed(saved):
        g = g * (2 * y8)
        g *= 1 - y8 * y8
        g *= np.where(y5 >= 0, np.float32(1), np.float32(-1))   # d|u|/du = 1 at 0 (JAX)
        g *= np.float32(0.5)
        g *= y2 > 0
        g *= a
    return g


def chain_data(n=CHAIN_N, seed=0):
    rng = np.random.default_rng(seed)
    return tuple(rng.uniform(-1, 1, n).astype(np.float32) for _ in range(3))


@workload("jit_chain30", issue=6, floor="eager", targets={"jit": 0.667}, rtol=1e-5,
          description="30-op elementwise chain on 1M float32, jitted vs un-jitted eager "
                      "(floor) vs NumPy")
def jit_chain30():
    x, a, b = chain_data()
    f = ft.jit(lambda x, a, b: chain30(fnp, x, a, b))
    compile_s = first_call_seconds(f, x, a, b)
    low = f.lower(x, a, b)
    return Case({"eager": lambda: chain30(fnp, x, a, b),
                 "jit": lambda: f(x, a, b),
                 "numpy": lambda: chain30(np, x, a, b)},
                notes={"compile_s": compile_s,
                       "lowering": " ".join(ln.strip("# ") for ln in low.source.splitlines()
                                            if ln.strip().startswith("# "))})


@workload("jit_chain30_fwd_bwd", issue=6, floor="eager", targets={"jit": 0.667}, rtol=1e-4,
          atol=1e-6,
          description="grad of sum(30-op chain) on 1M float32, jitted vs un-jitted ft.grad "
                      "(floor) vs hand-written NumPy")
def jit_chain30_fwd_bwd():
    x, a, b = chain_data()

    def loss(x, a, b):
        return fnp.sum(chain30(fnp, x, a, b))
    g = ft.grad(loss)
    jg = ft.jit(g)
    compile_s = first_call_seconds(jg, x, a, b)
    return Case({"eager": lambda: g(x, a, b),
                 "jit": lambda: jg(x, a, b),
                 "numpy": lambda: chain30_grad_floor(x, a, b)},
                notes={"compile_s": compile_s})


@workload("jit_chain30_transcendental", issue=6, floor="eager", rtol=1e-5,
          description="30-op sin/cos/tanh/exp chain on 1M float32: compute-bound, "
                      "jitted vs eager (floor) vs NumPy")
def jit_chain30_transcendental():
    x, a, b = chain_data()
    f = ft.jit(lambda x, a, b: chain30(fnp, x, a, b, block=chain_block))
    compile_s = first_call_seconds(f, x, a, b)
    return Case({"eager": lambda: chain30(fnp, x, a, b, block=chain_block),
                 "jit": lambda: f(x, a, b),
                 "numpy": lambda: chain30(np, x, a, b, block=chain_block)},
                notes={"compile_s": compile_s})


# ---------------------------------------------------------------------------
# 200-op chain on tiny arrays: per-call overhead


@workload("jit_chain200_tiny", issue=6, targets={"jit": 1.5},
          description="jitted 200-op elementwise chain on f32[8] vs the same ops in NumPy")
def jit_chain200_tiny():
    x, a, b = chain_inputs()
    f = ft.jit(lambda x, a, b: chain(fnp, x, a, b))
    compile_s = first_call_seconds(f, x, a, b)
    return Case({"numpy": lambda: chain(np, x, a, b),
                 "jit": lambda: f(x, a, b),
                 "eager": lambda: chain(fnp, x, a, b)},
                notes={"compile_s": compile_s})


# ---------------------------------------------------------------------------
# compile time of the native backend (issue 13): cold and warm disk cache


def _chain30_grad_compile(x, a, b, backend, cache):
    """Trace, optimize, lower and build jit(grad(sum(chain30))) afresh under `backend`, with
    the native libraries in directory `cache` (nothing runs: the values are the tests'
    business; the variants return the number of outputs)."""
    saved = ft.config.cpu_backend, os.environ.get("FUNCTRANS_CACHE_DIR")
    os.environ["FUNCTRANS_CACHE_DIR"] = cache
    ft.config.update("cpu_backend", backend)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ft.RetraceWarning)
            low = ft.jit(ft.grad(lambda x, a, b: fnp.sum(chain30(fnp, x, a, b)))).lower(x, a, b)
            low.compile()
            return np.float64(len(low.optimized.jaxpr.outvars))
    finally:
        ft.config.update("cpu_backend", saved[0])
        if saved[1] is None:
            del os.environ["FUNCTRANS_CACHE_DIR"]
        else:
            os.environ["FUNCTRANS_CACHE_DIR"] = saved[1]


@workload("jit_native_compile", issue=13, floor="numpy_backend",
          settings={"warmup": 1, "warmup_s": 0.0, "rounds": 5, "min_rounds": 3},
          rtol=1e-4, atol=1e-6,
          description="compile (trace, optimize, lower, build) of jit(grad(30-op chain)) on "
                      "1M float32: NumPy backend (floor) vs native with a cold disk cache "
                      "(target <= 1 s) and a warm one (<= 0.05 s)")
def jit_native_compile():
    x, a, b = chain_data()
    warm = tempfile.mkdtemp(prefix="ft_bench_native_")
    _chain30_grad_compile(x, a, b, "native", warm)         # the compiler probe, ftcall

    def cold_dir():
        """A new cache holding only what any program's first compile leaves behind."""
        d = tempfile.mkdtemp(prefix="ft_bench_native_cold_")
        for fn in os.listdir(warm):
            if fn.startswith(("probe-", "ftcall-")):
                shutil.copy(os.path.join(warm, fn), d)
        return d
    return Case({"numpy_backend": lambda: _chain30_grad_compile(x, a, b, "numpy", warm),
                 "native_cold": Staged(cold_dir, lambda d: _chain30_grad_compile(
                     x, a, b, "native", d)),
                 "native_warm": lambda: _chain30_grad_compile(x, a, b, "native", warm)},
                notes={"cache": warm})


# ---------------------------------------------------------------------------
# MLP training step


def sgd(params, grads, lr=LR):
    return [(W - lr * gW, b - lr * gb) for (W, b), (gW, gb) in zip(params, grads)]


def mlp_step(params, x, y1h):
    loss, grads = ft.value_and_grad(mlp_loss)(params, x, y1h)
    return loss, sgd(params, grads)


def mlp_step_floor(params, x, y1h, lr=LR):
    loss, grads = mlp_value_and_grad_floor(params, x, y1h)
    lr = x.dtype.type(lr)
    new = []
    for (W, b), (gW, gb) in zip(params, grads):
        gW *= lr
        gb *= lr
        new.append((W - gW, b - gb))
    return loss, new


@workload("jit_mlp_step", issue=6, targets={"jit": 1.05}, rtol=1e-4, atol=1e-6,
          description="jitted MLP 784-512-512-10 training step (value_and_grad + SGD), "
                      "batch 128, vs hand-written NumPy")
def jit_mlp_step():
    params, x, y1h = mlp_inputs()
    step = ft.jit(mlp_step)
    compile_s = first_call_seconds(step, params, x, y1h)
    low = step.lower(params, x, y1h)
    state = {"p": [(W.copy(), b.copy()) for W, b in params]}
    donating = ft.jit(mlp_step, donate_argnums=0)
    donating(state["p"], x, y1h)
    state["p"] = [(W.copy(), b.copy()) for W, b in params]

    def run_donating():            # its own parameters, updated in place step after step
        loss, state["p"] = donating(state["p"], x, y1h)
        return loss, state["p"]
    return Case({"numpy": lambda: mlp_step_floor(params, x, y1h),
                 "jit": lambda: step(params, x, y1h),
                 "jit_donate": run_donating,
                 "eager": lambda: mlp_step(params, x, y1h)},
                notes={"compile_s": compile_s, "compile_target_s": 0.5,
                       "optimize_s": round(low.timings["optimize_s"], 4),
                       "lower_s": round(low.timings["lower_s"], 4),
                       "eqns": f"{len(low.jaxpr.eqns)} traced -> "
                               f"{len(low.optimized.eqns)} after passes and fusion"})


# ---------------------------------------------------------------------------
# WGAN-GP critic step (double backward)


def gp_step(params, real, fake, eps):
    return sgd(params, ft.grad(wgan_gp_loss)(params, real, fake, eps))


def gp_step_floor(params, real, fake, eps, lr=LR):
    grads = wgan_gp_grad_floor(params, real, fake, eps)
    lr = real.dtype.type(lr)
    return [(W - lr * gW, b - lr * gb) for (W, b), (gW, gb) in zip(params, grads)]


@workload("jit_wgan_gp_step", issue=6, rtol=2e-4, atol=1e-6,
          description="jitted functional WGAN-GP critic step (double backward + SGD), "
                      "MLP 2-128-128-1 tanh, batch 256, vs hand-written NumPy")
def jit_wgan_gp_step():
    params, real, fake, eps = gp_inputs()
    step = ft.jit(gp_step)
    compile_s = first_call_seconds(step, params, real, fake, eps)
    variants = {"numpy": lambda: gp_step_floor(params, real, fake, eps),
                "jit": lambda: step(params, real, fake, eps),
                "eager": lambda: gp_step(params, real, fake, eps)}
    torch = library("torch")
    if torch is not None:
        variants["torch_eager"] = torch_gp_step(torch, params, real, fake, eps)
    return Case(variants, notes={"compile_s": compile_s,
                                 "cpu_backend": ft.config.cpu_backend})


def torch_gp_step(torch, params, real, fake, eps, lam=10.0, lr=LR):
    """The same step in PyTorch eager: the penalty's input gradient with create_graph=True,
    the loss's parameter gradients, SGD; returns the new parameters as NumPy pairs."""
    tp = [(torch.tensor(W, requires_grad=True), torch.tensor(b, requires_grad=True))
          for W, b in params]
    flat = [p for wb in tp for p in wb]
    tr, tf, te = (torch.tensor(a) for a in (real, fake, eps))

    def critic(x):
        h = x
        for W, b in tp[:-1]:
            h = torch.tanh(h @ W + b)
        W, b = tp[-1]
        return (h @ W + b)[:, 0]

    def step():
        x = (te * tr + (1 - te) * tf).requires_grad_(True)
        gx, = torch.autograd.grad(critic(x).sum(), x, create_graph=True)
        penalty = ((gx.pow(2).sum(1).sqrt() - 1) ** 2).mean()
        loss = critic(tf).mean() - critic(tr).mean() + lam * penalty
        grads = torch.autograd.grad(loss, flat)
        with torch.no_grad():
            new = [(p - lr * g).numpy() for p, g in zip(flat, grads)]
        return [(new[i], new[i + 1]) for i in range(0, len(new), 2)]
    return step


# ---------------------------------------------------------------------------
# on a GPU: the same against CuPy written by hand

def _gpu_ready():
    try:
        from functrans.core.devices import cuda_available
        return cuda_available()
    except Exception:
        return False


if _gpu_ready():
    import cupy as cp

    def _synced(fn):
        def run():
            out = fn()
            cp.cuda.Stream.null.synchronize()
            return out
        return run

    @workload("jit_chain30_gpu", issue=6, floor="cupy", rtol=1e-5,
              description="30-op elementwise chain on 1M float32 on the GPU: one fused "
                          "kernel vs CuPy by hand vs eager")
    def jit_chain30_gpu():
        x, a, b = ft.device_put(chain_data(), "cuda")
        f = ft.jit(lambda x, a, b: chain30(fnp, x, a, b))
        compile_s = first_call_seconds(_synced(lambda: f(x, a, b)))
        return Case({"cupy": _synced(lambda: chain30(cp, x, a, b)),
                     "jit": _synced(lambda: f(x, a, b)),
                     "eager": _synced(lambda: chain30(fnp, x, a, b))},
                    notes={"compile_s": compile_s,
                           "kernels": len(f.lower(x, a, b, backend="cuda").kernels)})

    @workload("jit_chain30_fwd_bwd_gpu", issue=6, floor="cupy", rtol=1e-4, atol=1e-6,
              description="grad of the 30-op chain on 1M float32 on the GPU vs CuPy by hand")
    def jit_chain30_fwd_bwd_gpu():
        x, a, b = ft.device_put(chain_data(), "cuda")
        jg = ft.jit(ft.grad(lambda x, a, b: fnp.sum(chain30(fnp, x, a, b))))
        compile_s = first_call_seconds(_synced(lambda: jg(x, a, b)))

        def floor():
            saved, y = [], x
            for _ in range(3):
                y2 = y * a + b
                y5 = (cp.maximum(y2, 0) - a) * np.float32(0.5)
                y8 = cp.tanh(cp.abs(y5) + b)
                saved.append((y2, y5, y8))
                y = y8 * y8 - b
            g = cp.ones_like(x)
            for y2, y5, y8 in reversed(saved):
                g = g * (2 * y8) * (1 - y8 * y8) * cp.where(y5 >= 0, 1, -1).astype(
                    cp.float32) * np.float32(0.5) * (y2 > 0) * a
            return g
        return Case({"cupy": _synced(floor), "jit": _synced(lambda: jg(x, a, b))},
                    notes={"compile_s": compile_s})

    @workload("jit_mlp_step_gpu", issue=6, floor="cupy", rtol=1e-3, atol=1e-5,
              description="jitted MLP 784-512-512-10 training step on the GPU vs CuPy by hand")
    def jit_mlp_step_gpu():
        params, x, y1h = ft.device_put(mlp_inputs(), "cuda")

        def floor():     # np.* on CuPy arrays dispatches to CuPy (__array_ufunc__)
            return mlp_step_floor(params, x, y1h)
        step = ft.jit(mlp_step)
        compile_s = first_call_seconds(_synced(lambda: step(params, x, y1h)))
        return Case({"cupy": _synced(floor), "jit": _synced(lambda: step(params, x, y1h))},
                    notes={"compile_s": compile_s})
