"""Shared test setup: hypothesis profiles, the trace-stack leak check, jaxpr checking helpers."""
from __future__ import annotations

import os

# JAX, the oracle, compiles thousands of small reference programs in the suite; XLA's CPU
# fusion emitters take about 4x longer to compile them than its older loop emitters, which
# compute the same operations (the oracle tables pass either way). Set before JAX loads,
# unless XLA_FLAGS already names the setting.
if "xla_cpu_use_fusion_emitters" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                               + " --xla_cpu_use_fusion_emitters=false").strip()

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

import functrans as ft
from functrans import core
from functrans.backends.native import toolchain

# "ci": derandomized and bounded, so CI runs are reproducible and fast; "dev": more search.
settings.register_profile(
    "ci", derandomize=True, deadline=None, max_examples=15, print_blob=True, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile(
    "dev", deadline=None, max_examples=25, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


@pytest.fixture(scope="session", autouse=True)
def _cpu_backend_for_the_suite(tmp_path_factory):
    """The suite runs the CPU backend users get: "auto" (the default), unless
    $FUNCTRANS_CPU_BACKEND says otherwise; the tests of the native backend ask for it
    (`native_backend`), and those about the NumPy backend's generated code for that
    (`numpy_backend`). Compiled libraries go to a cache directory of this session (unless
    $FUNCTRANS_CACHE_DIR names one): a fresh run compiles every native kernel cold."""
    mp = pytest.MonkeyPatch()
    if not os.environ.get("FUNCTRANS_CACHE_DIR"):
        mp.setenv("FUNCTRANS_CACHE_DIR", str(tmp_path_factory.mktemp("native_cache")))
    yield from _cpu_backend(os.environ.get("FUNCTRANS_CPU_BACKEND", "auto"))
    mp.undo()


def _cpu_backend(mode):
    """ft.config's cpu_backend set to mode while the caller's fixture is active, then
    restored."""
    saved = ft.config.cpu_backend
    ft.config.update("cpu_backend", mode)
    yield
    ft.config.update("cpu_backend", saved)


@pytest.fixture
def native_backend():
    """Fusion groups compile to native code in this test (skipped without a compiler)."""
    try:
        toolchain.find_compiler()
    except toolchain.ToolchainError as e:
        pytest.skip(str(e))
    yield from _cpu_backend("native")


@pytest.fixture
def numpy_backend():
    """Fusion groups run the NumPy backend's generated code in this test (one about that
    code itself: its blocks, its buffer reuse, its source), whatever
    $FUNCTRANS_CPU_BACKEND says."""
    yield from _cpu_backend("numpy")


@pytest.fixture
def x64():
    """jax_enable_x64 on for the test, then restored. Float64 NumPy inputs become float32
    at functrans's JAX-side entry points with it off (the default, as JAX); tests that check
    derivatives against float64 finite differences or float64 references ask for it
    (module-wide: `pytestmark = pytest.mark.usefixtures("x64")`), as JAX's own suite runs
    them under x64."""
    with ft.enable_x64(True):
        yield


@pytest.fixture
def x32(x64):
    """jax_enable_x64 off for the test (the default) in a module that asks for x64: for the
    tests there about the x32 defaults themselves. (Depends on x64, so it runs after it.)"""
    with ft.enable_x64(False):
        yield


@pytest.fixture(autouse=True)
def _trace_stack_unchanged():
    """A test that leaves the interpreter stack changed has found a state leak."""
    before = core.trace_stack_snapshot()
    yield
    after = core.trace_stack_snapshot()
    assert after == before, f"trace stack leaked: {before} -> {after}"


def check_traced(f, *args, static_argnums=(), compare=True, rtol=1e-6, atol=1e-6):
    """make_jaxpr(f)(*args), type-check the jaxpr (and any nested ones), and check that
    evaluating it gives what calling f eagerly gives. Returns the ClosedJaxpr."""
    closed = ft.make_jaxpr(f, static_argnums=static_argnums)(*args)
    core.check_jaxpr(closed.jaxpr)
    if compare:
        static = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
        dyn = [a for i, a in enumerate(args) if i not in static]
        leaves = ft.tree_util.tree_leaves(tuple(dyn))
        got = core.eval_jaxpr(closed.jaxpr, closed.consts, *leaves)
        want = ft.tree_util.tree_leaves(f(*args))
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert_close(g, w, rtol=rtol, atol=atol)
    return closed


def fd_grad(f, x, eps=1e-6):
    """Central-difference gradient of a scalar function of one float64 array."""
    x = np.asarray(x, np.float64)
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        g[i] = (float(f(x + e)) - float(f(x - e))) / (2 * eps)
    return g


def assert_close(got, want, rtol=1e-6, atol=1e-6, err_msg=""):
    """Values and shapes equal within tolerance; dtypes checked by the callers that care."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape} {err_msg}"
    if got.dtype.kind in "biu" and want.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want, err_msg=err_msg)
    else:
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True,
                                   err_msg=err_msg)


def unused_equations(jaxpr):
    """Equations whose outputs no later equation and no output reads."""
    used = {v for v in jaxpr.outvars if type(v) is core.Var}
    dead = []
    for eqn in reversed(jaxpr.eqns):
        if not eqn.primitive.effectful and not any(v in used for v in eqn.outvars):
            dead.append(eqn)
        used.update(v for v in eqn.invars if type(v) is core.Var)
    return dead
