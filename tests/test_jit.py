"""ft.jit: equal to the function it compiles (across the primitive registry, under every
transformation, on the blocked multi-threaded path), cached with explained retraces,
donation, closures, pytrees, and no state left behind by errors."""
from __future__ import annotations

import contextlib
import gc
import threading
import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import functrans as ft
import functrans.lax as lax
import functrans.numpy as fnp
import importlib

from functrans import core
from functrans.backends import cpu
from functrans.higher_order.jit import RetraceWarning
from functrans.primitives import REGISTRY
from registry_cases import CASES

from conftest import assert_close

pytestmark = pytest.mark.usefixtures("x64")  # float64 references: conftest.x64

jit_mod = importlib.import_module("functrans.higher_order.jit")   # ft.jit is the function
F32 = np.float32
NAMES = sorted(n for n in REGISTRY if n in CASES)


def rand(*shape, seed=0, dtype=F32):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(dtype)


def assert_tree_close(a, b, rtol=1e-6, atol=1e-6):
    la, ta = ft.tree_flatten(a)
    lb, tb = ft.tree_flatten(b)
    assert ta == tb
    for x, y in zip(la, lb):
        assert np.asarray(x).dtype == np.asarray(y).dtype
        assert_close(x, y, rtol=rtol, atol=atol)


@contextlib.contextmanager
def blocked_config():
    """Every fusion group runs blocked, in tiny blocks, on several threads."""
    saved = vars(cpu.CONFIG).copy()
    cpu.CONFIG.block_min_size = 1
    cpu.CONFIG.block_min_work = 1
    cpu.CONFIG.block_bytes = 16
    cpu.CONFIG.parallel_min_size = 1
    cpu.CONFIG.threads = 3
    try:
        yield
    finally:
        vars(cpu.CONFIG).update(saved)


@pytest.fixture
def blocked(numpy_backend):
    with blocked_config():
        yield


# ---------------------------------------------------------------------------
# the registry: jit(p.bind)(*args) == p.bind(*args) for every primitive


def _check_prim(data, name):
    p, case = REGISTRY[name], CASES[name]
    dtype = data.draw(st.sampled_from(case.dtypes), label="dtype")
    params, gen = case.make(data, np.dtype(dtype), False)
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 32 - 1), label="seed"))
    args = gen(rng)
    want = p.bind(*args, **params)
    got = ft.jit(lambda *xs: p.bind(*xs, **params))(*args)
    if p.multiple_results:
        assert len(got) == len(want)
    else:
        got, want = [got], [want]
    for g, w in zip(got, want):
        assert np.shape(g) == np.shape(w) and np.asarray(g).dtype == np.asarray(w).dtype
        assert_close(g, w, rtol=1e-6, atol=1e-7)


@pytest.mark.filterwarnings("ignore::functrans.RetraceWarning")
@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=6)
@given(data=st.data())
def test_jit_equals_eager_for_every_primitive(name, data):
    _check_prim(data, name)


@pytest.mark.filterwarnings("ignore::functrans.RetraceWarning")
@pytest.mark.parametrize("name", [n for n in NAMES if REGISTRY[n].elementwise])
@settings(max_examples=4)
@given(data=st.data())
def test_blocked_threaded_path_equals_eager(name, data):
    """Elementwise primitives inside a fusion group evaluated block by block on threads."""
    p, case = REGISTRY[name], CASES[name]
    dtype = data.draw(st.sampled_from(case.dtypes), label="dtype")
    params, gen = case.make(data, np.dtype(dtype), False)
    args = gen(np.random.default_rng(data.draw(st.integers(0, 2 ** 32 - 1))))

    def f(*xs):             # the primitive inside a chain, so that a group forms
        out = p.bind(*xs, **params)
        if out.dtype == np.bool_:
            return fnp.logical_xor(out, True)
        return out * fnp.asarray(2, out.dtype)
    want = f(*args)
    with blocked_config():
        got = ft.jit(f)(*args)
    assert np.asarray(got).dtype == np.asarray(want).dtype
    assert_close(got, want, rtol=1e-6, atol=1e-7)


# ---------------------------------------------------------------------------
# programs: fused (blocked, threaded) == unfused


def mlp_loss(params, x):
    h = x
    for W, b in params:
        h = fnp.tanh(h @ W + b)
    return fnp.mean(h * h)


PROGRAMS = {
    "chain": (lambda x, y: fnp.exp(fnp.sin(x) * y + 1.0) - fnp.cos(y) * 0.5,
              lambda: (rand(50, 7), rand(50, 7, seed=1))),
    "broadcast_rows": (lambda x, b: fnp.maximum(x * 2.0 + b, 0.0) - b,
                       lambda: (rand(33, 8), rand(8, seed=1))),
    "broadcast_cols": (lambda x, b: fnp.tanh(x - b[:, None]) * b[:, None],
                       lambda: (rand(9, 5), rand(9, seed=1))),
    "mixed_dtypes": (lambda x, n: fnp.where(x > 0.2, x * n.astype(np.float32), -x) + (x < 0),
                     lambda: (rand(40), np.arange(40, dtype=np.int32))),
    "grad_chain": (ft.grad(lambda x: fnp.sum(fnp.tanh(fnp.sin(x) * 3.0) ** 2)),
                   lambda: (rand(64, seed=3),)),
    "value_and_grad_mlp": (ft.value_and_grad(mlp_loss),
                           lambda: ([(rand(6, 5), rand(5, seed=1)), (rand(5, 3, seed=2),
                                                                     rand(3, seed=3))],
                                    rand(4, 6, seed=4))),
    "multi_output": (lambda x: (x * 2.0, fnp.sin(x), fnp.sum(x), x),
                     lambda: (rand(20),)),
    "float64": (lambda x: fnp.log1p(fnp.abs(x)) * x ** 3, lambda: (rand(30, dtype=np.float64),)),
    "float16": (lambda x: fnp.sqrt(fnp.abs(x)) + x * x, lambda: (rand(30, dtype=np.float16),)),
}


@pytest.mark.filterwarnings("ignore::functrans.RetraceWarning")
@pytest.mark.parametrize("name", sorted(PROGRAMS))
@pytest.mark.parametrize("mode", ["default", "blocked", "native"])
def test_programs_fused_equal_unfused(name, mode, request):
    if mode == "blocked":
        request.getfixturevalue("blocked")
    if mode == "native":
        request.getfixturevalue("native_backend")
    f, make = PROGRAMS[name]
    args = make()
    want = f(*args)
    jf = ft.jit(lambda *a: f(*a))         # a new function: compiled under this mode's config
    got = jf(*args)
    tol = 2e-3 if name == "float16" else 1e-5
    assert_tree_close(got, want, rtol=tol, atol=tol)
    got2 = jf(*args)                      # a cache hit runs the same program again
    assert_tree_close(got2, want, rtol=tol, atol=tol)
    low = jf.lower(*args)
    if mode == "blocked" and "fused" in str(low.optimized):
        assert "_run_blocked(" in low.source
    if mode == "native" and "fused" in str(low.optimized):
        assert "native C++" in low.source and low.native is not None


# ---------------------------------------------------------------------------
# composition with the transformations


def f_sin(x, y):
    return fnp.sum(fnp.sin(x) * y + fnp.tanh(x * y))


def test_jit_of_grad_equals_grad():
    x, y = rand(5), rand(5, seed=1)
    assert_tree_close(ft.jit(ft.grad(f_sin))(x, y), ft.grad(f_sin)(x, y))
    assert_tree_close(ft.jit(ft.grad(f_sin, argnums=(0, 1)))(x, y),
                      ft.grad(f_sin, argnums=(0, 1))(x, y))


def test_grad_of_jit_equals_grad():
    x, y = rand(5), rand(5, seed=1)
    assert_tree_close(ft.grad(ft.jit(f_sin))(x, y), ft.grad(f_sin)(x, y))
    assert_tree_close(ft.grad(ft.jit(f_sin), argnums=(0, 1))(x, y),
                      ft.grad(f_sin, argnums=(0, 1))(x, y))


def test_grad_of_jit_in_float64_against_finite_differences():
    x = rand(4, dtype=np.float64)
    y = rand(4, seed=1, dtype=np.float64)
    g = ft.grad(ft.jit(f_sin))(x, y)
    eps = 1e-6
    fd = [(f_sin(x + eps * e, y) - f_sin(x - eps * e, y)) / (2 * eps) for e in np.eye(4)]
    assert_close(g, np.array(fd), rtol=1e-7, atol=1e-8)


def test_second_order_through_jit():
    f = lambda x: fnp.sum(fnp.sin(x) ** 3)          # noqa: E731
    x = rand(3, dtype=np.float64)
    assert_tree_close(ft.hessian(ft.jit(f))(x), ft.hessian(f)(x), rtol=1e-10, atol=1e-10)
    g2 = ft.grad(lambda x: fnp.sum(ft.jit(ft.grad(lambda z: fnp.sum(fnp.sin(z) ** 2)))(x)))
    g2_ref = ft.grad(lambda x: fnp.sum(ft.grad(lambda z: fnp.sum(fnp.sin(z) ** 2))(x)))
    assert_tree_close(g2(x), g2_ref(x), rtol=1e-10, atol=1e-10)


def test_jvp_and_vmap_of_jit():
    x, y = rand(5), rand(5, seed=1)
    t = rand(5, seed=2)
    assert_tree_close(ft.jvp(ft.jit(f_sin), (x, y), (t, t)), ft.jvp(f_sin, (x, y), (t, t)))
    xs, ys = rand(3, 5), rand(3, 5, seed=1)
    assert_tree_close(ft.vmap(ft.jit(f_sin))(xs, ys), ft.vmap(f_sin)(xs, ys))
    assert_tree_close(ft.vmap(ft.jit(f_sin), in_axes=(0, None))(xs, y),
                      ft.vmap(f_sin, in_axes=(0, None))(xs, y))
    per_ex = ft.jit(ft.vmap(ft.grad(f_sin), in_axes=(0, None)))
    assert_tree_close(per_ex(xs, y), ft.vmap(ft.grad(f_sin), in_axes=(0, None))(xs, y))


def test_jit_of_jit_and_make_jaxpr_of_jit():
    inner = ft.jit(lambda x: fnp.sin(x) * 2.0)
    outer = ft.jit(lambda x: inner(x) + inner(x * 3.0))
    x = rand(4)
    assert_tree_close(outer(x), np.sin(x) * 2 + np.sin(x * 3) * 2)
    closed = ft.make_jaxpr(lambda x: inner(x) + 1.0)(x)
    core.check_jaxpr(closed.jaxpr)
    assert [e.primitive.name for e in closed.jaxpr.eqns] == ["jit", "add"]
    assert "sin" in str(closed)
    lowered = outer.lower(x)
    assert "jit" not in [e.primitive.name for e in lowered.optimized.jaxpr.eqns]


def test_make_jaxpr_of_grad_of_jit_type_checks():
    closed = ft.make_jaxpr(ft.grad(ft.jit(f_sin)))(rand(3), rand(3, seed=1))
    core.check_jaxpr(closed.jaxpr)
    assert [e.primitive.name for e in closed.jaxpr.eqns].count("jit") == 2  # known + linear


def test_jit_inside_grad_closing_over_a_traced_value():
    def f(x):
        g = ft.jit(lambda y: fnp.sum(fnp.sin(x * y)))     # closes over the traced x
        return g(2.0 * fnp.ones_like(x))
    x = rand(4)
    assert_tree_close(ft.grad(f)(x), 2 * np.cos(2 * x))


# ---------------------------------------------------------------------------
# the cache and retrace reasons


def test_cache_hits_and_retrace_reasons():
    f = ft.jit(lambda x, y: x * y)
    x = rand(3)
    f(x, 2.0)
    f(x, 3.0)                                             # same signature: a hit
    info = f.cache_info()
    assert (info.misses, info.hits, info.retraces) == (1, 1, 0)
    assert f.trace_reasons[0].startswith("first trace of")
    f(rand(4), 2.0)
    f(rand(4).astype(np.float64), 2.0)
    f(rand(4).astype(np.float64), np.float64(2.0))
    r = f.retraces
    assert len(r) == 3
    assert "argument 'x' changed shape: (3,) -> (4,)" in r[0]
    assert "argument 'x' changed dtype: f32 -> f64" in r[1]
    assert "argument 'y' changed weak type" in r[2]


def test_static_argnums_and_their_reasons():
    f = ft.jit(lambda x, n, mode: x ** n if mode == "pow" else x * n, static_argnums=(1, 2))
    x = rand(3)
    assert_close(f(x, 2, "pow"), x ** 2)
    assert_close(f(x, 3, "pow"), x ** 3)
    assert_close(f(x, 3, "mul"), x * 3)
    assert_close(f(x, 2, "pow"), x ** 2)
    assert f.cache_info().misses == 3 and f.cache_info().hits == 1
    assert "static argument 'n' changed value: 2 -> 3" in f.retraces[0]
    assert "static argument 'mode' changed value: 'pow' -> 'mul'" in f.retraces[1]
    with pytest.raises(TypeError, match="not hashable"):
        f(x, [2], "pow")


def test_pytree_structure_change_is_a_reason():
    f = ft.jit(lambda d: sum(d.values()))
    f({"a": rand(2)})
    f({"a": rand(2), "b": rand(2)})
    assert "argument structure changed" in f.retraces[0]


def test_jit_stats_and_repeated_retrace_warning():
    jit_mod.jit_stats(reset=True)
    f = ft.jit(lambda x: x + 1.0)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for n in range(1, jit_mod.RETRACE_WARN_LIMIT + 3):
            f(np.ones(n, F32))
    msgs = [str(m.message) for m in w if issubclass(m.category, RetraceWarning)]
    assert len(msgs) == 1 and "traced" in msgs[0] and "changed shape" in msgs[0]
    stats = ft.jit_stats()
    assert stats["traces"] == jit_mod.RETRACE_WARN_LIMIT + 2
    assert stats["retraces"] == jit_mod.RETRACE_WARN_LIMIT + 1
    assert all("changed shape" in r for r in stats["reasons"])


def test_new_callable_is_a_reason():
    jit_mod.jit_stats(reset=True)
    x = rand(3)
    for _ in range(3):
        ft.jit(lambda x: x * 2.0)(x)                   # a new lambda each time
    assert ft.jit_stats()["new_callables"] >= 2
    assert any(r.startswith("new callable") for r in ft.jit_stats()["reasons"])


def test_same_function_jitted_twice_shares_its_cache():
    def g(x):
        return x - 1.0
    ft.jit(g)(rand(3))
    again = ft.jit(g)
    again(rand(3))
    assert again.cache_info().misses == 1 and again.cache_info().hits == 1


# ---------------------------------------------------------------------------
# closures, pytrees, outputs


def test_closed_over_arrays_become_constants():
    c = np.arange(4, dtype=F32)
    f = ft.jit(lambda x: x * c + fnp.sum(c))
    assert_close(f(rand(4)), rand(4) * c + 6)
    low = f.lower(rand(4))
    assert len(low.optimized.consts) == 1 and low.optimized.consts[0] is c


def test_pytrees_kwargs_and_none():
    @ft.jit
    def f(p, x, scale=None, *, shift):
        out = {"y": fnp.tanh(x @ p["w"] + p["b"]) * shift, "n": None, "t": (x[0], fnp.sum(x))}
        return out
    p = {"w": rand(4, 3), "b": rand(3, seed=1)}
    x = rand(2, 4, seed=2)
    got = f(p, x, shift=np.float32(2.0))
    want = f.__wrapped__(p, x, shift=np.float32(2.0))
    assert_tree_close(got, want)


def test_outputs_are_fresh_arrays():
    f = ft.jit(lambda x: (x, x * 2.0, x.reshape(2, 2), 3.0))
    x = rand(4)
    a, b, c, d = f(x)
    assert not np.shares_memory(a, x) and not np.shares_memory(c, x)
    np.asarray(b)[:] = 0          # (the raw buffer: Arrays are immutable)
    a2, b2, _, d2 = f(x)
    assert_close(b2, x * 2)
    assert_close(d, 3.0) and np.asarray(d).dtype == F32


def test_intermediate_buffers_do_not_leak_into_outputs():
    f = ft.jit(lambda x: fnp.sin(fnp.cos(x) * 2.0))
    a = f(rand(8))
    b = f(rand(8, seed=1))
    assert_close(a, np.sin(np.cos(rand(8)) * 2))
    assert_close(b, np.sin(np.cos(rand(8, seed=1)) * 2))


def test_concurrent_calls_from_threads(blocked):
    f = ft.jit(lambda x: fnp.exp(fnp.sin(x) * 2.0) - fnp.cos(x))
    xs = [rand(257, seed=s) for s in range(8)]
    f(xs[0])
    results = {}

    def work(i):
        for _ in range(20):
            results[i] = f(xs[i])
    ts = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for i, x in enumerate(xs):
        assert_close(results[i], np.exp(np.sin(x) * 2) - np.cos(x), rtol=1e-5)


# ---------------------------------------------------------------------------
# donation


def test_donated_buffers_are_reused_for_outputs(numpy_backend):
    f = ft.jit(lambda w, g: w - 0.1 * g, donate_argnums=0)
    w, g = rand(1000), rand(1000, seed=1)
    want = w - F32(0.1) * g
    w_in = w.copy()
    out = f(w_in, g)
    assert_close(out, want)
    assert np.shares_memory(out, w_in)           # written in place of the donated w
    low = f.lower(w, g)
    assert "out=a0" in low.source


def test_donation_in_a_blocked_group(blocked):
    f = ft.jit(lambda w, g: fnp.tanh(w) - 0.1 * g * w, donate_argnums=0)
    w, g = rand(100), rand(100, seed=1)
    want = np.tanh(w) - F32(0.1) * g * w
    w_in = w.copy()
    out = f(w_in, g)
    assert_close(out, want, rtol=1e-6)
    assert np.shares_memory(out, w_in)


def test_donating_a_non_contiguous_or_readonly_array_is_safe():
    f = ft.jit(lambda w: w * 2.0, donate_argnums=0)
    base = rand(4, 6)
    view = base.T                                # not C-contiguous
    out = f(view)
    assert_close(out, base.T * 2)
    assert_close(base, rand(4, 6))               # the base was not written
    ro = np.broadcast_to(rand(3), (2, 3))        # read-only
    assert_close(f(ro), np.broadcast_to(rand(3), (2, 3)) * 2)


def test_donated_argument_aliasing_another_is_not_clobbered():
    """A donated buffer that another argument (or a captured constant) also reads is
    copied first: the result is computed from the inputs as they were."""
    f = ft.jit(lambda a, b: fnp.tanh(a * 2.0) + b, donate_argnums=0)
    x = np.ones(4)
    assert_close(f(x, x), np.full(4, np.tanh(2.0) + 1.0), rtol=1e-12)  # was 1.928
    assert_close(x, np.ones(4))
    base = np.arange(8.0)
    want = np.tanh(base[:6] * 2.0) + base[2:]
    assert_close(f(base[:6].copy(), base[2:]), want, rtol=1e-12)    # no overlap: donated
    assert_close(f(base[:6], base[2:]), want, rtol=1e-12)           # overlapping views
    assert_close(base, np.arange(8.0))
    tree = ft.jit(lambda p, g: [w - 0.5 * gw for w, gw in zip(p, g)], donate_argnums=0)
    w = np.ones(3)
    assert_close(tree([w, w], [w, 2 * w])[1], np.zeros(3))          # donated twice, read twice
    k = np.ones(3)
    c = ft.jit(lambda a: a * 2.0 + k, donate_argnums=0)
    assert_close(c(k), 3 * np.ones(3))
    assert_close(c(k), 3 * np.ones(3))                                # the constant is intact
    both = ft.jit(lambda a, b: a * 2.0 + b * 3.0, donate_argnums=(0, 1))
    y = np.arange(3.0)
    assert_close(both(y, y), 5 * np.arange(3.0))


def test_no_donation_leaves_inputs_alone():
    f = ft.jit(lambda w, g: w - 0.1 * g)
    w, g = rand(1000), rand(1000, seed=1)
    w0 = w.copy()
    f(w, g)
    assert_close(w, w0)


# ---------------------------------------------------------------------------
# errors leave no state behind


def test_trace_error_leaves_no_cache_entry():
    f = ft.jit(lambda x, n: fnp.reshape(x, (n,)), static_argnums=1)
    with pytest.raises(ValueError, match="reshape"):
        f(rand(4), 7)
    assert f.cache_info().size == 0 and f.cache_info().misses == 0
    assert_close(f(rand(4), 4), rand(4))
    assert f.cache_info().size == 1
    g = ft.jit(lambda x, n: fnp.reshape(x, (n,)))
    with pytest.raises(core.ConcretizationTypeError, match="static_argnums"):
        g(rand(4), 4)                            # n traced: reshape needs a concrete size
    assert g.cache_info().size == 0


def test_non_array_arguments_are_rejected_with_a_hint():
    f = ft.jit(lambda x, s: x)
    with pytest.raises(TypeError, match="static_argnums"):
        f(rand(2), "text")


def test_runtime_error_then_success():
    f = ft.jit(lambda x, i: fnp.sum(x[i]))
    with pytest.raises(Exception):
        f(rand(3), np.array([0.5]))              # float indices are rejected while tracing
    assert_close(f(rand(3), np.array([0, 2])), rand(3)[0] + rand(3)[2])


# ---------------------------------------------------------------------------
# lower(): the optimized jaxpr and the generated code


def test_lower_shows_optimized_jaxpr_and_code(numpy_backend):
    f = ft.jit(lambda x: fnp.sin(x) * fnp.sin(x) + fnp.cos(x))
    low = f.lower(rand(5))
    text = str(low)
    assert "## optimized jaxpr" in text and "## generated code" in text
    assert "def " in low.source and "out=" in low.source
    assert str(low.jaxpr).count("= sin") == 2 and str(low.optimized).count("= sin") == 1
    exe = low.compile()
    assert_close(exe(rand(5))[0], np.sin(rand(5)) ** 2 + np.cos(rand(5)))


def test_lower_for_cuda_needs_no_gpu():
    f = ft.jit(lambda x, b: fnp.tanh(x * 2.0 + b))
    low = f.lower(rand(4, 3), rand(3), backend="cuda")
    assert len(low.kernels) == 1
    src = next(iter(low.kernels.values()))
    assert '__global__ void fused_mul_bcast_add_tanh(' in src


def test_generated_code_has_no_interpreter():
    f = ft.jit(lambda x: fnp.exp(fnp.sin(x)) + 1.0)
    src = f.lower(rand(3)).source
    assert "eval_jaxpr" not in src and "bind" not in src and "for " not in src


@pytest.mark.filterwarnings("ignore::functrans.RetraceWarning")
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_max_min_with_constants_are_bit_exact(dtype):
    """max/min against a literal take a faster path on the CPU; NaN and signed zeros
    must come out exactly as NumPy's maximum/minimum give them."""
    v = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, 2.0, -3.0], dtype)
    for c in [0.0, -0.0, 1.0, -1.0, 0.5, np.inf, -np.inf]:
        c = dtype(c)
        for op, ref in ((fnp.maximum, np.maximum), (fnp.minimum, np.minimum)):
            for got, want in ((ft.jit(lambda x: op(x, c))(v), ref(v, c)),
                              (ft.jit(lambda x: op(c, x))(v), ref(c, v))):
                assert got.dtype == want.dtype
                assert np.array_equal(np.isnan(got), np.isnan(want))
                keep = ~np.isnan(want)
                assert np.array_equal(np.signbit(got[keep]), np.signbit(want[keep])), (op, c)
                assert np.array_equal(got[keep], want[keep])


def test_compiling_pauses_the_cyclic_gc_and_restores_it():
    """Tracing and compiling run with the cyclic collector paused (its rescans of a growing
    program were superlinear); it is back on afterwards, after a failed trace too."""
    import gc
    seen = []

    def f(x):
        seen.append(gc.isenabled())
        return x * 2
    assert gc.isenabled()
    ft.jit(f)(np.ones(3))
    assert seen == [False] and gc.isenabled()

    def bad(x):
        raise ValueError("boom")
    with pytest.raises(ValueError, match="boom"):
        ft.jit(bad)(np.ones(3))
    assert gc.isenabled()


def test_broadcast_read_by_sum_and_concatenation_has_its_whole_shape():
    """A broadcast read only by out= calls is left as its small operand when those calls are
    ufuncs (they broadcast against out=); a sum over leading axes (the native row sum) and
    a concatenation into out= read the whole shape (jnp.diff's prepend raised here)."""
    def f(x, c):
        b = lax.broadcast_in_dim(c, (128, 256), (1,))
        return fnp.sum(b, axis=0) + x, fnp.concatenate([b, b], axis=1)
    x, c = np.ones(256, np.float32), np.arange(256, dtype=np.float32)
    s, cc = ft.jit(f)(x, c)
    np.testing.assert_array_equal(np.asarray(s), 128 * c + 1)
    np.testing.assert_array_equal(np.asarray(cc),
                                  np.broadcast_to(np.concatenate([c, c]), (128, 512)))
    m = np.random.default_rng(0).standard_normal((3, 4))
    d = ft.jit(lambda m: fnp.diff(m, prepend=0.0, append=np.ones((3, 1))))(m)
    np.testing.assert_allclose(np.asarray(d), np.diff(m, prepend=0.0, append=np.ones((3, 1))))
