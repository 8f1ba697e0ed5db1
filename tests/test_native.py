"""The native CPU backend: fusion groups compiled from the primitives' expression templates
agree with the NumPy backend for every fusible elementwise primitive and dtype (special
values: NaN, infinities, signed zeros, integer extremes) and on sample programs; the
switch, the fallbacks (no compiler, a failed compile) and what `lower()` says."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import functrans as ft
import functrans.numpy as fnp
from functrans.backends import cpu, cuda
from functrans.backends.native import kernels, toolchain

from test_cuda_on_cpu import CASES, GROUPS, assert_matches_numpy, assert_same

pytestmark = pytest.mark.usefixtures("x64")  # float64 references: conftest.x64

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def library():
    """Every single-primitive group of CASES as one native library: name -> call(*ins)."""
    try:
        toolchain.find_compiler()
    except toolchain.ToolchainError as e:
        pytest.skip(str(e))
    groups = [kernels.render_group(cuda.single_eqn_jaxpr(e), f"n_{label}")
              for label, e, _ in CASES]
    path = toolchain.build(kernels.render_program(groups), "test_native")
    addrs = kernels.entry_points(path, [g.name for g in groups])
    call = kernels.caller()

    def run(label, eqn, xs):
        ins = [np.ascontiguousarray(np.asarray(x, v.aval.dtype))
               for x, v in zip(xs, eqn.invars, strict=True)]
        out = np.empty(eqn.outvars[0].aval.shape, eqn.outvars[0].aval.dtype)
        assert call(addrs[f"n_{label}"], out.size, 2, *ins, out)
        return out
    return run


@pytest.mark.parametrize("label", [c[0] for c in CASES])
def test_every_elementwise_primitive_and_dtype_matches_numpy(library, label):
    _, e, xs = next(c for c in CASES if c[0] == label)
    if kernels.unsupported(cuda.single_eqn_jaxpr(e)):
        pytest.skip(kernels.unsupported(cuda.single_eqn_jaxpr(e)))
    assert_matches_numpy(library(label, e, xs), e, xs, label)


def test_what_stays_on_numpy():
    unsupported = {label: kernels.unsupported(cuda.single_eqn_jaxpr(e)) for label, e, _ in CASES}
    assert {k for k, v in unsupported.items() if v} == {
        k for k in unsupported if k.startswith("pow_") and k.split("_")[1][0] in "iu"}
    x = np.ones(3, np.complex64)
    closed = ft.make_jaxpr(lambda x: fnp.sin(x) * 2 + x)(x)
    assert "complex dtype complex64" in kernels.unsupported(closed.jaxpr)


# ---------------------------------------------------------------------------
# programs: the native backend against the NumPy backend


def _both(f, args):
    """f jitted under the NumPy backend and under the native one: (numpy, native, lowered)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ft.RetraceWarning)
        ft.config.update("cpu_backend", "numpy")
        want = ft.jit(f)(*args)
        ft.config.update("cpu_backend", "native")
        jf = ft.jit(f)
        got = jf(*args)
        return want, got, jf.lower(*args)


@pytest.mark.parametrize("name", sorted(GROUPS))
def test_sample_programs_match_the_numpy_backend(native_backend, name):
    f, args = GROUPS[name]
    want, got, low = _both(f, args)
    assert "native C++" in low.source, low.info["groups"]
    ulps = 4 if name in ("rows", "float64") else 0
    assert_same(np.asarray(got), np.asarray(want), ulps, name, zeros=name != "literals")


def test_broadcasts_scalars_noncontiguous_and_donated_inputs(native_backend):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 10)).astype(np.float32)
    b = rng.standard_normal(10).astype(np.float32)

    def f(x, b, s):
        return fnp.tanh(x * s + b) * x - b[None, :] * 0.5
    want = f(x, b, np.float32(1.5))
    jf = ft.jit(f)
    np.testing.assert_allclose(jf(x, b, np.float32(1.5)), want, rtol=1e-6, atol=1e-6)
    xt = np.asfortranarray(x)                       # not C-contiguous: copied, then run
    np.testing.assert_allclose(jf(xt, b, 1.5), want, rtol=1e-6, atol=1e-6)
    jd = ft.jit(f, donate_argnums=0)
    np.testing.assert_allclose(jd(x.copy(), b, 1.5), want, rtol=1e-6, atol=1e-6)
    assert "native C++" in jf.lower(x, b, 1.5).source


def test_threads_split_a_group(native_backend, monkeypatch):
    monkeypatch.setattr(cpu.CONFIG, "native_parallel_min_size", 1)
    monkeypatch.setattr(cpu.CONFIG, "threads", 3)
    x = np.linspace(-3, 3, 10_001)

    def f(x):
        return fnp.exp(fnp.sin(x) * 0.5) - x * x + 1.0
    low = ft.jit(f).lower(x)
    assert "3 thread(s)" in low.source
    np.testing.assert_allclose(ft.jit(f)(x), f(x), rtol=1e-14, atol=1e-14)


def test_grad_of_a_chain(native_backend):
    x = np.linspace(-1, 1, 257, dtype=np.float32)

    def loss(x):
        y = x
        for _ in range(3):
            y = fnp.tanh(fnp.maximum(y * 1.5 + 0.1, 0.0) - 0.2) * y
        return fnp.sum(y)
    got = ft.jit(ft.grad(loss))(x)
    ft.config.update("cpu_backend", "numpy")
    want = ft.jit(ft.grad(loss))(x)
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-7)


# ---------------------------------------------------------------------------
# the switch, the fallbacks, lower()


def _chain(x):
    return fnp.exp(fnp.sin(x) * 2.0 + 1.0) - fnp.cos(x) * 0.5


def test_config_switch():
    saved = ft.config.cpu_backend
    try:
        for mode in ("numpy", "auto", "native"):
            ft.config.update("cpu_backend", mode)
            assert ft.config.cpu_backend == ft.config.read("cpu_backend") == mode
        with pytest.raises(ValueError, match="must be one of 'auto', 'native', 'numpy'"):
            ft.config.update("cpu_backend", "fast")
        with pytest.raises(AttributeError, match="Unrecognized config option: nope"):
            ft.config.update("nope", 1)
    finally:
        ft.config.update("cpu_backend", saved)
    x = np.linspace(0, 1, 16, dtype=np.float32)
    ft.config.update("cpu_backend", "numpy")
    try:
        low = ft.jit(_chain).lower(x)
        assert low.native is None and "numpy: cpu_backend='numpy'" in str(low)
    finally:
        ft.config.update("cpu_backend", saved)


def test_a_backend_switch_recompiles_ft_compile(native_backend):
    """ft.compile's forward and backward executables follow ft.config.cpu_backend (they
    were kept from the first backend)."""
    @ft.compile
    def f(x):
        return (ft.tanh(x * 1.5 + 0.25) * x - x * x + 1.0).exp().sum()
    data = np.linspace(-1, 1, 64, dtype=np.float32)
    grads = []
    compiles = []
    for mode in ("native", "numpy", "native"):
        ft.config.update("cpu_backend", mode)
        before = ft.jit_stats()["compiles"]
        for _ in range(3):                  # the first call records, later ones compile
            x = ft.tensor(data, requires_grad=True)
            f(x).backward()
        compiles.append(ft.jit_stats()["compiles"] - before)
        grads.append(x.grad.numpy())
    assert all(c >= 2 for c in compiles[:2]), compiles      # forward and backward, anew
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(grads[2], grads[0])

def test_environment_variable_selects_the_backend():
    code = "import functrans as ft; print(ft.config.cpu_backend)"
    for mode in ("numpy", "native"):
        out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                             text=True, env=dict(os.environ, FUNCTRANS_CPU_BACKEND=mode))
        assert out.stdout.strip() == mode, out.stderr


def _long(x):
    """Ten elementwise ops, two of them transcendental."""
    y = fnp.tanh(x * 2.0 + 1.0) * x - x * x
    return fnp.exp(y * 0.5) - fnp.maximum(y, 0.0) * 3.0 + 1.0


def _arith(x):
    """Ten elementwise arithmetic ops."""
    y = fnp.abs(x * 2.0 + 1.0) * x - x * x
    return fnp.sqrt(y * y + 0.5) - fnp.maximum(y, 0.0) * 3.0 + 1.0


def test_auto_sends_only_worthwhile_groups_native(native_backend):
    ft.config.update("cpu_backend", "auto")
    x = np.ones(8, np.float32)
    low = ft.jit(lambda x: x * 2.0 + 1.0).lower(x)
    assert "below the native threshold" in str(low) and low.native is None
    assert "native C++" in ft.jit(_long).lower(x).source
    big = np.ones(100_000, np.float32)
    assert "native C++" in ft.jit(_arith).lower(big).source
    assert "native C++" in ft.jit(_long).lower(big).source      # float exp, tanh: fast
    low = ft.jit(_long).lower(big.astype(np.float64))
    assert "numpy: tanh: NumPy's loop is faster than the native one on 100000" in str(low)
    low = ft.jit(lambda x: fnp.sin(_arith(x))).lower(big)
    assert "numpy: sin: NumPy's loop is faster than the native one on 100000" in str(low)
    for dt in (np.float32, np.float64):     # the NumPy backend's erf is a long series
        assert "native C++" in ft.jit(lambda x: ft.nn.gelu(_arith(x), approximate=False)).lower(
            big.astype(dt)).source
    # a small group on many elements runs native (one pass, not one per op) ...
    six = ft.jit(lambda g, a: 0.5 * (g * a) + (a * g) * g * 0.7071)
    assert "below the native thresholds" in str(six.lower(x, x))
    assert "native C++" in six.lower(big, big).source
    bias = np.ones(100, np.float32)         # one op (a broadcast is none): NumPy's one pass
    assert "native C++" not in ft.jit(lambda m, b: m + b).lower(
        big.reshape(1000, 100), bias).source
    # ... and so does a group calling a function NumPy lacks (erf), whatever its size: exact GELU
    # alone is five ops, below native_min_ops, and ran pass by pass
    gelu = ft.jit(lambda x: ft.nn.gelu(x, approximate=False))
    for dt in (np.float32, np.float64):
        lowered = gelu.lower(big.astype(dt))
        assert "native C++" in lowered.source and "_p_erf" not in lowered.source, str(lowered)
        np.testing.assert_allclose(gelu(big.astype(dt) * 0.5), ft.nn.gelu(
            big.astype(dt) * 0.5, approximate=False), rtol=1e-6)


def test_interleaved_streams_give_the_same_values(native_backend, monkeypatch):
    """A large group with a transcendental (here double's: the float ones split the loop,
    below) loops over four parts of its elements at once (overlapping for sizes not
    divisible by 4): the same bits as one stream."""
    x = np.linspace(-4, 4, 10_003, dtype=np.float64)
    got = ft.jit(_long)(x)
    assert "const long long i3 = i + o3;" in ft.jit(_long).lower(x).native["source"]
    monkeypatch.setattr(kernels, "STREAMS", 1)
    jf = ft.jit(_long)
    assert "i3" not in jf.lower(x).native["source"]
    np.testing.assert_array_equal(got, jf(x))


def _staged(x, k):
    """Float tanh a large loop is split at: of an input (x, read in place), of a previous
    split's result (tanh of tanh), of a computed value; values crossing several parts, a
    bool among them, exp and log1p inlined in the parts, and two outputs."""
    t = fnp.tanh(x)
    u = x * k + 1.0
    pos = u > 0.0
    e = fnp.exp(fnp.tanh(fnp.tanh(u)) * 0.5)
    y = fnp.where(pos, e * t, u - t) + fnp.log1p(fnp.abs(u))
    return y * k, fnp.tanh(y) - u


def test_staged_loops_give_the_same_values(native_backend, monkeypatch):
    """A large group applying float tanh to a local runs as one loop per part between
    those calls, each call a loop of its own (ftm::tanh_block) over blocks of STAGE_BLOCK
    elements (kernels.staged_loop): the same bits as the single loop, on sizes that leave
    a partial block, and as NumPy within tanh's ulp; a row group the same over rows."""
    src = ft.jit(_staged).lower(np.ones(10_003, np.float32), np.ones(10_003, np.float32))
    src = src.native["source"]
    assert src.count("ftm::tanh_block(") == 4 and "tanh_block(in0 + i0, " in src, src
    assert "ftm::exp_inline(" in src and "ftm::log1p_inline(" in src, src
    assert "const long long i1 = i + o1;" not in src
    assert "const int v" in src and "alignas(64) int ft_bv" in src, src   # a bool crosses
    r = np.random.default_rng(0)
    for n in (kernels.STREAMS_MIN_SIZE, 10_003, 3 * kernels.STAGE_BLOCK + 17):
        x = (r.standard_normal(n) * 3).astype(np.float32)
        k = r.uniform(-2, 2, n).astype(np.float32)
        got = ft.jit(_staged)(x, k)
        with pytest.MonkeyPatch.context() as m:
            m.setattr(kernels, "staged_loop", lambda *a: None)
            low = ft.jit(_staged).lower(x, k)
            assert "ft_bv" not in low.native["source"]
            want = low.compile()(x, k)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
        with np.errstate(all="ignore"):
            t = np.tanh(x)
            u = x * k + np.float32(1)
            y = (np.where(u > 0, np.exp(np.tanh(np.tanh(u)) * np.float32(0.5)) * t, u - t)
                 + np.log1p(np.abs(u)))
        np.testing.assert_allclose(got[0], y * k, rtol=2e-6, atol=1e-6)
    rows = ft.jit(lambda m, b: _staged(m + b, b))       # a bias: a row group, rows of 256
    m = (r.standard_normal((10, 256)) * 3).astype(np.float32)
    b = r.uniform(-2, 2, 256).astype(np.float32)
    low = rows.lower(m, b)
    assert "for (long long j = 0; j < 256LL; ++j)" in low.native["source"]
    assert "ftm::tanh_block(ft_bv" in low.native["source"]
    got = rows(m, b)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(kernels, "STAGE_ROWS", range(0))
        want = ft.jit(lambda m, b: _staged(m + b, b))(m, b)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    # where a row loop's tanh reads an input in place: the index at the row's first column
    assert kernels._row_start(256, "i") == "r * 256LL" and kernels._row_start(256, "j") == "0"
    assert kernels._row_start(256, "ft_r * 1024LL + 512LL + j") == "ft_r * 1024LL + 512LL"
    assert kernels._row_start(256, "(i / 256LL) % 4") is None


def test_a_group_of_many_arrays_runs_fewer_streams(native_backend):
    """Streams times the group's full-size arrays stay within kernels.MEMORY_STREAMS: an
    LSTM cell's gates on 20 x 256 as its training step has them (the 4 gates' input and
    hidden projections, c in; h, c and the 4 activations out: 15 arrays) run one stream;
    with its 3 arrays a tanh loop runs 4, with 11 arrays 2. The same bits as other counts.
    In double: float tanh splits the loop instead (test_staged_loops_give_the_same_values)."""
    r = np.random.default_rng(0)
    xs = [r.standard_normal((20, 256)) for _ in range(9)]

    def gates(xi, xf, xz, xo, hi, hf, hz, ho, c):
        si, sf, tz, so = (ft.lax.logistic(xi + hi), ft.lax.logistic(xf + hf),
                          fnp.tanh(xz + hz), ft.lax.logistic(xo + ho))
        c2 = sf * c + si * tz
        return so * fnp.tanh(c2), c2, si, sf, tz, so

    def few(a, b):
        return (fnp.tanh(a * b),)

    def eleven(a, b, c, d, e):                  # one group: every output reads s
        s = a * b + c * d + e
        return (s,) + tuple(fnp.tanh(s * x) for x in (a, b, c, d, e))

    for fn, args, k in [(gates, xs, 1), (few, xs[:2], kernels.STREAMS), (eleven, xs[:5], 2)]:
        src = ft.jit(fn).lower(*args).native["source"]
        assert (f"const long long i{k - 1} = i + o{k - 1};" in src if k > 1
                else "const long long i1" not in src), fn.__name__
        assert f"const long long i{k} = " not in src, fn.__name__
    got = ft.jit(gates)(*xs)
    for k in (2, 4):
        with pytest.MonkeyPatch.context() as m:
            m.setattr(kernels, "MEMORY_STREAMS", 15 * k)
            jf = ft.jit(gates)
            assert f"const long long i{k - 1} = i + o{k - 1};" in jf.lower(*xs).native["source"]
            for a, b in zip(got, jf(*xs)):
                np.testing.assert_array_equal(a, b)


def test_a_loop_inlines_a_few_tanh_and_calls_the_clone_for_many(native_backend):
    """A loop body with at most kernels.INLINE_CALLS_MAX calls of the float transcendentals
    inlines them (the clone's division waited at its return: the 30-op chain 15-20%
    slower), one with more calls the out-of-line clones (32 tanh inlined into 4 streams
    compiled in 4 s, against 1.3); the same values either way. In double, whose calls do
    not split the loop (test_staged_loops_give_the_same_values)."""
    x = np.linspace(-4, 4, 10_003, dtype=np.float64)

    def tanhs(n):
        def f(v):
            for _ in range(n):
                v = fnp.tanh(v * 1.5 + 0.25)
            return v
        return f
    few, many = tanhs(kernels.INLINE_CALLS_MAX), tanhs(kernels.INLINE_CALLS_MAX + 1)
    src_few = ft.jit(few).lower(x).native["source"]
    src_many = ft.jit(many).lower(x).native["source"]
    assert "ftm::tanh_inline(" in src_few and not re.search(r"[^:_]tanh\(", src_few)
    assert "tanh_inline" not in src_many and "(tanh(" in src_many
    np.testing.assert_array_equal(ft.jit(many)(x), ft.jit(few)(ft.jit(tanhs(1))(x)))
    src = ft.jit(lambda v: fnp.exp(v) * fnp.log1p(v * v) + ft.lax.logistic(v)).lower(x)
    assert all(f + "_inline(" in src.native["source"]
               for f in ("ftm::exp", "ftm::log1p", "(ft_logistic"))


def test_a_row_group_inlines_its_few_calls(native_backend):
    """A row group (softmax, cross-entropy: reductions along rows with exp and log between
    them) inlines its few transcendental calls as the elementwise loops do (the bench's
    cross-entropy forward 0.32 -> 0.27 ms, its backward 0.27 -> 0.22, one thread); the
    values are the NumPy backend's within a float's rounding."""
    x = np.random.default_rng(0).standard_normal((64, 256)).astype(np.float32)

    def xent(v):
        return fnp.sum(ft.nn.log_softmax(v, axis=-1)[:, 3]) + fnp.sum(ft.nn.softmax(v) ** 2)
    want, got, low = _both(xent, (x,))
    body = low.native["source"].split("FT_LOGISTIC(ft_logistic_inline, exp_inline)")[1]
    assert "ftm::exp_inline(" in body and "ftm::log_inline(" in body
    assert not re.search(r"[^:_]exp\(", body)
    np.testing.assert_allclose(got, want, rtol=2e-6)


def test_without_a_compiler_numpy_runs_and_lower_says_why(native_backend, monkeypatch):
    monkeypatch.setenv("CXX", "/nonexistent/c++")
    x = np.linspace(0, 1, 16, dtype=np.float32)
    jf = ft.jit(_chain)
    np.testing.assert_allclose(jf(x), _chain(x), rtol=1e-6)
    text = str(jf.lower(x))
    assert "numpy: no C++ compiler found (tried $CXX='/nonexistent/c++')" in text
    assert "native C++" not in text


def test_lower_shows_the_generated_cpp(native_backend):
    x = np.linspace(0, 1, 16, dtype=np.float32)
    low = ft.jit(_chain).lower(x)
    text = str(low)
    assert "## fusion groups" in text and ": native: C++ function" in text
    assert "## native C++ (" in text and 'extern "C" void' in text
    assert low.native["library"].startswith(toolchain.cache_dir())
    assert open(low.native["library"][:-3] + ".cpp").read() == low.native["source"]


def test_a_second_process_compiles_nothing(native_backend, tmp_path):
    script = textwrap.dedent("""
        import sys, numpy as np, functrans as ft, functrans.numpy as fnp
        from functrans.backends.native import toolchain
        if sys.argv[1] == "warm":      # every library comes from the disk cache
            def no_compiler(*a, **k):
                raise AssertionError("compiled in a warm process")
            toolchain._run = no_compiler
        x = np.linspace(0, 1, 1000)
        f = ft.jit(lambda x: fnp.exp(fnp.sin(x) * 2.0 + 1.0) - fnp.cos(x) * 0.5)
        assert "native C++" in f.lower(x).source
        print(float(f(x).sum()))
    """)
    env = dict(os.environ, FUNCTRANS_CACHE_DIR=str(tmp_path), FUNCTRANS_CPU_BACKEND="native")
    outs = [subprocess.run([sys.executable, "-c", script, kind], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=300) for kind in
            ("cold", "warm")]
    for p in outs:
        assert p.returncode == 0, p.stderr
    assert outs[0].stdout == outs[1].stdout


def test_a_forked_child_runs_kernels_on_one_thread(native_backend):
    """GNU OpenMP's thread pool does not survive fork: a child's kernel runs on its own
    thread (ftcall's pthread_atfork flag), so it finishes, with the parent's values."""
    script = textwrap.dedent("""
        import os, sys, numpy as np, functrans as ft, functrans.numpy as fnp
        ft.set_num_threads(2)
        x = np.linspace(0, 1, 1 << 20, dtype=np.float32)
        f = ft.jit(lambda x: fnp.tanh(x * 3.0) * fnp.exp(x))
        assert "native C++" in f.lower(x).source
        want = f(x)                           # the parent's pool runs it
        pid = os.fork()
        if pid == 0:
            os._exit(0 if np.array_equal(f(x), want) else 3)
        _, status = os.waitpid(pid, 0)
        sys.exit(os.waitstatus_to_exitcode(status))
    """)
    env = dict(os.environ, FUNCTRANS_CPU_BACKEND="native")
    p = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
