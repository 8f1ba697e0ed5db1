"""Eager calls of the primitives NumPy computes slowly (erf, logistic: declared
native_eager) run native kernels (backends/native/eager.py) when a compiler is present:
within the same ulp bounds of the correctly rounded value as the NumPy implementation, the
same values as a jitted program's, and the NumPy implementation after a toolchain failure
(one warning) or under cpu_backend="numpy"."""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import functrans as ft
from functrans import runtime
from functrans.backends.memory import DERIVED
from functrans.backends.native import eager, toolchain
from functrans.primitives import REGISTRY
from functrans.primitives.base import EAGER_KERNELS

from test_native_cache import FAKE_CXX
from test_native_math import (_bound, _logistic_reference, _ref, special_values, sweep_points,
                              ulp_error)

_erf = _ref("erf")       # math.erf in double, rounded once: the correctly rounded value

pytestmark = pytest.mark.usefixtures("x64")  # float64 references: conftest.x64

DTYPES = ["float32", "float64"]


def _reference(name, x):
    return _erf(x) if name == "erf" else _logistic_reference(x)


def _points(name, dt, n):
    x = sweep_points(np.dtype(dt).type, 8.0 if name == "erf" else 800.0, n, seed=11)
    return np.concatenate([x, special_values(np.dtype(dt).type)])


def _loaded(name, dt):
    return any(k[1] is REGISTRY[name] and k[2] == np.dtype(dt) for k in eager._loaded)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("name", ["erf", "logistic"])
def test_eager_kernel_within_the_bounds_of_correctly_rounded(native_backend, name, dt):
    """The native kernel and the NumPy implementation, each within the bound of the
    accuracy tests (erf: test_native_math's UNARY; logistic: 2 ulp) of the correctly
    rounded value, on the sweep (every kind of float, both tails, special values)."""
    x = _points(name, dt, 20_000 if name == "logistic" else 200_000)
    want = _reference(name, x)
    bound = _bound("erf", dt) if name == "erf" else 2
    prim = REGISTRY[name]
    got = prim.bind(x)
    assert _loaded(name, dt), "the eager call did not run the native kernel"
    for label, y in (("native", got), ("numpy", prim.impl.numpy(np, x))):
        assert y.dtype == x.dtype
        err = ulp_error(y, want)
        k = int(np.argmax(err))
        assert err[k] <= bound, f"{label} {name}[{dt}]: {err[k]} ulp at x={x[k]!r}"


def test_erf_float32_dense(native_backend):
    """Every 64th float32 of [2^-12, 4] (about 190,000 points: erf's two branches and the
    clamp), and their negatives: within 1 ulp of math.erf rounded to float32."""
    lo, hi = (np.array([v], np.float32).view(np.uint32)[0] for v in (2.0 ** -12, 4.0))
    x = np.arange(lo, hi, 64, dtype=np.uint32).view(np.float32)
    x = np.concatenate([x, -x])
    err = ulp_error(ft.lax.erf(x), _erf(x))
    assert _loaded("erf", "float32")
    assert err.max() <= 1, x[np.argmax(err)]


@pytest.mark.parametrize("name", ["erf", "logistic"])
def test_eager_equals_jitted(native_backend, name):
    """The eager kernel and a jitted program's fused group render the same template: the
    same bits (shapes off the vector width, a strided view)."""
    f = REGISTRY[name].bind
    x = np.random.default_rng(0).standard_normal((37, 129)).astype(np.float32) * 3
    for v in (x, x[:, ::2]):
        eager_out = f(v) * np.float32(2)
        jitted = np.asarray(ft.jit(lambda a: f(a) * 2)(v))
        np.testing.assert_array_equal(eager_out, jitted)


def test_small_arrays_and_other_dtypes_run_numpy(native_backend):
    x = np.linspace(-3, 3, EAGER_KERNELS.min_size - 1, dtype=np.float32)
    y = np.linspace(-3, 3, 4096).astype(np.float16)
    np.testing.assert_array_equal(ft.lax.erf(x), REGISTRY["erf"].impl.numpy(np, x))
    np.testing.assert_array_equal(ft.lax.erf(y), REGISTRY["erf"].impl.numpy(np, y))


def test_numpy_backend_runs_the_numpy_implementation(numpy_backend):
    x = np.linspace(-3, 3, 8192, dtype=np.float32)
    assert EAGER_KERNELS.run(REGISTRY["erf"], x) is None
    np.testing.assert_array_equal(ft.lax.erf(x), REGISTRY["erf"].impl.numpy(np, x))


def test_a_failed_build_warns_once_and_numpy_runs(tmp_path, monkeypatch):
    """No working compiler (a fake one that fails every build): one RuntimeWarning, the
    NumPy implementation's values, and no build tried again."""
    script = tmp_path / "fakecc"
    script.write_text(FAKE_CXX)
    script.chmod(0o755)
    log = tmp_path / "builds.log"
    monkeypatch.setenv("FUNCTRANS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CXX", str(script))
    monkeypatch.setenv("FAKE_CXX_MODE", "fail")
    monkeypatch.setenv("FAKE_CXX_LOG", str(log))
    saved = ft.config.cpu_backend
    ft.config.update("cpu_backend", "auto")
    x = np.linspace(-3, 3, 8192, dtype=np.float32)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(3):
                np.testing.assert_array_equal(ft.lax.erf(x), REGISTRY["erf"].impl.numpy(np, x))
                np.testing.assert_array_equal(ft.lax.logistic(x),
                                              REGISTRY["logistic"].impl.numpy(np, x))
    finally:
        ft.config.update("cpu_backend", saved)
        toolchain.reset()
    ours = [w for w in caught if "functrans" in str(w.message)]
    assert len(ours) == 1 and "boom" in str(ours[0].message), [str(w.message) for w in ours]
    assert len(log.read_text().splitlines()) == 1


def test_gelu_eager_uses_the_kernel(native_backend):
    """The facade's exact GELU (its composite, first run and hot) gives the float64
    formula's values within float32 rounding."""
    x = np.random.default_rng(1).standard_normal((8, 300)).astype(np.float32)
    want = 0.5 * x.astype(np.float64) * (1 + _erf(x.astype(np.float64) / math.sqrt(2)))
    t = ft.tensor(x)
    for _ in range(10):
        got = ft.nn.functional.gelu(t).numpy()
        np.testing.assert_allclose(got, want, rtol=3e-7, atol=1e-7)


# ---------------------------------------------------------------------------
# hot un-jitted programs: native groups after runtime.NATIVE_RUNS runs


def _softmax_like(x, w):
    m = ft.numpy.max(x, axis=-1, keepdims=True)
    e = ft.numpy.exp(x - m) * w
    return e / ft.numpy.sum(e, axis=-1, keepdims=True)


def _run_hot(mode, n):
    x = np.random.default_rng(2).standard_normal((64, 300)).astype(np.float32)
    w = np.random.default_rng(3).uniform(0.5, 1, 300).astype(np.float32)
    closed = ft.make_jaxpr(_softmax_like)(x, w)
    DERIVED.clear("program")            # its runs counted from 0 (shared by structure)
    saved = ft.config.cpu_backend
    ft.config.update("cpu_backend", mode)
    try:
        for _ in range(n):
            out, = runtime.run(closed, x, w)
    finally:
        ft.config.update("cpu_backend", saved)
    return out, closed.jaxpr._compiled.hot


def test_hot_programs_go_native_after_native_runs(native_backend):
    """A program run NATIVE_RUNS times is lowered again with native groups (the row group
    of this softmax): the same values as its NumPy code, within a sum's rounding; before,
    and under cpu_backend='numpy', it runs NumPy code."""
    before, hot = _run_hot("native", runtime.NATIVE_RUNS - 1)
    assert hot and "native C++" not in hot.source
    out, hot = _run_hot("native", runtime.NATIVE_RUNS + 1)
    assert "native C++" in hot.source
    np.testing.assert_allclose(out, before, rtol=3e-6, atol=1e-8)
    _, hot = _run_hot("numpy", runtime.NATIVE_RUNS + 1)
    assert "native C++" not in hot.source


def test_facade_layer_norm_hot_native_matches_jit(native_backend):
    """The facade's layer_norm forward and backward, run as a training loop runs it (past
    NATIVE_RUNS), agrees with the same under ft.jit of the functional form."""
    rng = np.random.default_rng(4)
    x0, w0 = rng.standard_normal((32, 200)).astype(np.float32), rng.standard_normal(200)
    x, w = ft.tensor(x0, requires_grad=True), ft.tensor(w0.astype(np.float32),
                                                         requires_grad=True)
    for _ in range(runtime.NATIVE_RUNS + 2):
        x.grad = w.grad = None
        y = ft.nn.functional.layer_norm(x, (200,), w)
        (y * y).sum().backward()

    def loss(x, w):
        mu = ft.numpy.mean(x, axis=-1, keepdims=True)
        var = ft.numpy.mean((x - mu) ** 2, axis=-1, keepdims=True)
        y = (x - mu) / ft.numpy.sqrt(var + 1e-5) * w
        return ft.numpy.sum(y * y)
    gx, gw = ft.jit(ft.grad(loss, argnums=(0, 1)))(x0, w0.astype(np.float32))
    np.testing.assert_allclose(x.grad.numpy(), gx, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(w.grad.numpy(), gw, rtol=1e-4, atol=1e-4)


SPECIAL = {"lgamma": np.concatenate([np.linspace(-30.3, 0.0, 3000), np.linspace(1e-3, 180, 6000)]),
           "erfc": np.linspace(-6, 27, 9000),
           "digamma": np.concatenate([np.linspace(-40.3, 0.5, 4000), np.linspace(0.5, 1e4, 5000)]),
           "bessel_i0e": np.linspace(-60, 60, 9001), "bessel_i1e": np.linspace(-60, 60, 9001)}


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("name", sorted(SPECIAL))
def test_special_functions_run_native_with_the_numpy_values(native_backend, name, dt):
    """lgamma, erfc (the C library's, element by element in a native loop, not Python's
    math through np.frompyfunc: 150 -> 18 ms on 1M floats), digamma and the scaled Bessel
    functions (their NumPy impls operation for operation, vectorized: 92 -> 18 ms, 130 ->
    8-18 ms) run their native kernels, with the
    NumPy implementation's values (within 2 ulp of float32; 1e-13 relative in float64,
    absolute near their zeros, where CPython's lgamma and the C library's part), the poles'
    and the special values' exactly; a jitted program's fused group gives the same bits."""
    prim = REGISTRY[name]
    x = np.concatenate([SPECIAL[name], [0.0, -1.0, -2.0, np.inf, -np.inf, np.nan, 1.0, 2.0]])
    x = x.astype(dt)
    got = prim.bind(x)
    assert _loaded(name, dt), "the eager call did not run the native kernel"
    want = prim.impl.numpy(np, x)
    assert got.dtype == x.dtype
    fin = np.isfinite(want)
    np.testing.assert_array_equal(got[~fin], want[~fin])
    g, w = got[fin].astype(np.float64), want[fin].astype(np.float64)
    if dt == "float32":
        assert ulp_error(got[fin], want[fin]).max() <= 2
    else:
        assert np.max(np.abs(g - w) / np.maximum(np.abs(w), 1.0)) < 1e-13
    np.testing.assert_array_equal(np.asarray(ft.jit(prim.bind)(x)), got)


def _erfinv_points(dt, n=2000, seed=5):
    r = np.random.default_rng(seed)
    x = np.concatenate([r.uniform(-1, 1, n), 1 - 10.0 ** -r.uniform(0, 16, n // 2),
                        10.0 ** -r.uniform(0, 300, n // 4), r.uniform(0.45, 0.55, n // 4)])
    return x.astype(dt)


@pytest.mark.parametrize("dt", DTYPES)
def test_erf_inv_runs_native_within_its_bounds(native_backend, tmp_path, dt):
    """erf_inv's eager calls run its native kernel (ftmath.h's erfinv, vectorized: 1M floats
    in 12-14 ms on one thread, against 0.9-1 s for the NumPy implementation): within 4 ulp
    of the correctly rounded value (mpmath's, rounded once) up to |x| = 1 - 1e-12 and 16
    beyond (erfc_fit's relative accuracy near 6) in float64, 1 ulp in float32 (the double
    rounded once); +-1 -> +-inf, NaN beyond and for NaN, -0 kept."""
    mpmath = pytest.importorskip("mpmath")
    prim = REGISTRY["erf_inv"]
    x = _erfinv_points(dt)
    got = prim.bind(x)
    assert _loaded("erf_inv", dt), "the eager call did not run the native kernel"
    with mpmath.workprec(120):
        want = np.array([float(mpmath.erfinv(mpmath.mpf(float(v)))) for v in x]).astype(dt)
    err = ulp_error(got, want)
    far = np.abs(x.astype(np.float64)) > 1 - 1e-12
    bound = 4 if dt == "float64" else 1
    k = int(np.argmax(np.where(far, 0, err)))
    assert err[~far].max() <= bound, f"{err[k]} ulp at x={x[k]!r}"
    assert err[far].max(initial=0) <= (16 if dt == "float64" else 1)
    special = np.array([1.0, -1.0, 1.5, -2.0, np.nan, -0.0, 0.0] + [0.5] * 2000, dt)
    s = prim.bind(special)[:7]
    np.testing.assert_array_equal(s[:5], [np.inf, -np.inf, np.nan, np.nan, np.nan])
    assert s[5] == 0 and np.signbit(s[5]) and s[6] == 0 and not np.signbit(s[6])
    if "clang" not in toolchain.find_compiler().version.lower():
        from test_native_rows import _unvectorized_simd_loops
        assert _unvectorized_simd_loops(eager.source(prim, dt), tmp_path) == []
