"""On a GPU (CuPy and a CUDA device): every primitive's implementation on CuPy, the
generated kernels, and jitted programs agree with NumPy. Marked `gpu`; skipped with a
reason elsewhere. Run with `pytest -m gpu tests/test_gpu.py` (bench/gpu_check.sh)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import functrans as ft
import functrans.numpy as fnp
from functrans.core.devices import cuda_available
from functrans.primitives import REGISTRY
from registry_cases import CASES

from conftest import assert_close

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not cuda_available(),
                                 reason="needs CuPy and a CUDA device (pip install "
                                        "'functrans[cuda]' on a machine with a GPU)")]

NAMES = sorted(n for n in REGISTRY if n in CASES)


def host(x):
    return x.get() if hasattr(x, "get") and not isinstance(x, np.ndarray) else np.asarray(x)


def to_gpu(tree):
    return ft.device_put(tree, "cuda")


def tol(dtype):
    return {"float16": 2e-3, "float32": 2e-5}.get(np.dtype(dtype).name, 1e-9)


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=3, deadline=None)
@given(data=st.data())
def test_every_impl_runs_on_cupy(name, data):
    """impl(cupy, ...) == impl(numpy, ...), operands drawn from the registry table."""
    import cupy
    p, case = REGISTRY[name], CASES[name]
    dtype = data.draw(st.sampled_from(case.dtypes), label="dtype")
    params, gen = case.make(data, np.dtype(dtype), False)
    args = gen(np.random.default_rng(data.draw(st.integers(0, 2 ** 32 - 1))))
    want = p.bind(*args, **params)
    got = p.bind(*[cupy.asarray(a) for a in args], **params)
    if not p.multiple_results:
        got, want = [got], [want]
    for g, w in zip(got, want):
        assert type(g).__module__.startswith("cupy")
        assert host(g).dtype == np.asarray(w).dtype
        assert_close(host(g), w, rtol=tol(dtype), atol=tol(dtype))


@pytest.mark.parametrize("name", [n for n in NAMES if REGISTRY[n].elementwise])
@settings(max_examples=3, deadline=None)
@given(data=st.data())
def test_each_elementwise_kernel_matches_numpy(name, data):
    """The generated kernel of one primitive, run on the GPU, against the NumPy impl."""
    p, case = REGISTRY[name], CASES[name]
    dtype = data.draw(st.sampled_from(case.dtypes), label="dtype")
    params, gen = case.make(data, np.dtype(dtype), False)
    args = gen(np.random.default_rng(data.draw(st.integers(0, 2 ** 32 - 1))))
    f = ft.jit(lambda *xs: p.bind(*xs, **params))
    want = f(*args)
    got = f(*to_gpu(list(args)))
    for g, w in zip(ft.tree_leaves(got), ft.tree_leaves(want)):
        assert host(g).dtype == np.asarray(w).dtype
        assert_close(host(g), w, rtol=tol(dtype), atol=tol(dtype))


def rand(*shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(dtype)


def mlp_loss(params, x):
    h = x
    for W, b in params:
        h = fnp.tanh(h @ W + b)
    return fnp.mean(h * h)


PROGRAMS = {
    "chain": (lambda x, y: fnp.exp(fnp.sin(x) * y + 1.0) - fnp.cos(y) * 0.5,
              (rand(500, 70), rand(500, 70, seed=1))),
    "broadcast": (lambda x, b: fnp.maximum(x * 2.0 + b, 0.0) - b[None, :] * x,
                  (rand(33, 8), rand(8, seed=1))),
    "mixed": (lambda x, n: fnp.where(x > 0.2, x * n.astype(np.float32), -x) + (x < 0),
              (rand(40), np.arange(40, dtype=np.int32))),
    "specials": (lambda x: fnp.maximum(fnp.log(x), -1.0) + fnp.minimum(x, np.nan),
                 (rand(64),)),
    "float16": (lambda x: fnp.sqrt(fnp.abs(x)) * x + 0.1, (rand(300, dtype=np.float16),)),
    "grad_mlp": (ft.value_and_grad(mlp_loss),
                 ([(rand(6, 5), rand(5, seed=1)), (rand(5, 3, seed=2), rand(3, seed=3))],
                  rand(4, 6, seed=4))),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_jitted_programs_on_gpu_match_cpu(name):
    f, args = PROGRAMS[name]
    want = ft.jit(f)(*args)
    got = ft.jit(f)(*to_gpu(args))
    lw, lg = ft.tree_leaves(want), ft.tree_leaves(got)
    assert len(lw) == len(lg)
    for g, w in zip(lg, lw):
        assert type(g).__module__.startswith("cupy")
        t = 2e-3 if name == "float16" else 2e-5
        assert_close(host(g), w, rtol=t, atol=t)


def test_grad_of_jit_on_gpu():
    f = lambda x: fnp.sum(fnp.sin(x) * fnp.tanh(x))       # noqa: E731
    x = rand(100)
    want = ft.grad(f)(x)
    got = ft.grad(ft.jit(f))(to_gpu(x))
    assert_close(host(got), want, rtol=2e-5, atol=2e-6)


def test_eager_functrans_numpy_on_gpu():
    x = to_gpu(rand(10))
    y = fnp.exp(x) * 2.0 + 1.0                              # Python scalars with CuPy
    assert type(y).__module__.startswith("cupy")
    assert_close(host(y), np.exp(rand(10)) * 2 + 1, rtol=1e-6)
    assert_close(host(ft.grad(lambda v: fnp.sum(v ** 3))(x)), 3 * rand(10) ** 2, rtol=1e-5)


def test_kernels_are_compiled_once():
    from functrans.backends import cuda
    f = ft.jit(lambda x: fnp.sin(x) * 3.0 + x)
    x = to_gpu(rand(1000))
    f(x)
    n = len(cuda._kernel_cache)
    ft.jit(lambda x: fnp.sin(x) * 3.0 + x)(x)              # same structure: same kernel
    assert len(cuda._kernel_cache) == n


def test_devices_and_device_put():
    ds = ft.devices()
    assert any(d.platform == "cuda" for d in ds)
    x = rand(4)
    g = ft.device_put(x, "cuda")
    assert type(g).__module__.startswith("cupy")
    back = ft.device_put(g, "cpu")
    assert isinstance(back, np.ndarray) and np.array_equal(back, x)
