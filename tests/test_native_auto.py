"""cpu_backend="auto" never keeps native code that makes a program slower: OpenMP and BLAS
threads are counted as one pool (cpu_auto.parallel_threads), and a program with native groups
is timed against its NumPy-code twin on its first calls, the faster kept
(cpu_auto.MeasuredChoice). The costs are injected here (a scripted clock, a BLAS thread count):
the policy is tested, not this machine's speed."""
from __future__ import annotations

import time

import numpy as np
import pytest

import functrans as ft
import functrans.numpy as fnp
from functrans.backends import blas, cpu, cpu_auto
from functrans.backends.native import toolchain


def _arith(x):
    """Ten elementwise arithmetic ops: a group "auto" sends native."""
    y = fnp.abs(x * 2.0 + 1.0) * x - x * x
    return fnp.sqrt(y * y + 0.5) - fnp.maximum(y, 0.0) * 3.0 + 1.0


def _with_product(x, w):
    return _arith(x) @ w


@pytest.fixture
def auto_backend():
    """cpu_backend="auto" with a working compiler (skipped without one)."""
    try:
        toolchain.find_compiler()
    except toolchain.ToolchainError as e:
        pytest.skip(str(e))
    saved = ft.config.cpu_backend
    ft.config.update("cpu_backend", "auto")
    yield
    ft.config.update("cpu_backend", saved)


class ScriptedClock:
    """CONFIG.clock for MeasuredChoice: call k (which runs candidate k % len(costs)) lasts
    costs[k % len(costs)] seconds. MeasuredChoice reads the clock twice per call."""

    def __init__(self, *costs):
        self.costs, self.reads, self.now = costs, 0, 0.0

    def __call__(self):
        if self.reads % 2:
            self.now += self.costs[(self.reads // 2) % len(self.costs)]
        self.reads += 1
        return self.now


def _calls_until_chosen(exe, args, candidates=2):
    outs = []
    while exe.choice is None:
        outs.append(exe(*args))
        assert len(outs) <= candidates * (cpu.CONFIG.native_trials + 1)
    return outs


@pytest.mark.parametrize("native_s, numpy_s, kept", [(2e-3, 1e-3, "numpy"),
                                                     (1e-3, 2e-3, "native")])
def test_auto_keeps_the_faster_of_native_and_numpy_code(auto_backend, monkeypatch, native_s,
                                                        numpy_s, kept):
    monkeypatch.setattr(cpu.CONFIG, "clock", ScriptedClock(native_s, numpy_s))
    x = np.linspace(-2, 2, 4096, dtype=np.float32)
    low = ft.jit(_arith).lower(x)
    assert low.native is not None
    exe = low.compile()
    assert isinstance(exe, cpu_auto.MeasuredChoice) and exe.choice is None
    outs = _calls_until_chosen(exe, (x,))
    assert len(outs) == 2 * (cpu.CONFIG.native_trials + 1)      # one untimed call each
    assert exe.choice == kept and f"chose {kept}" in repr(exe)
    assert exe.times == {"native": pytest.approx([native_s] * cpu.CONFIG.native_trials),
                         "numpy": pytest.approx([numpy_s] * cpu.CONFIG.native_trials)}
    want = np.asarray(_arith(x))
    for got in outs + [exe(x)]:
        # native and NumPy code round each operation alike; sqrt is correctly rounded
        # in both, so the ten-op chain agrees to a few ulp of its largest values
        np.testing.assert_allclose(got[0], want, rtol=0, atol=4 * np.spacing(np.float32(30)))
    assert ("native C++" in exe.source) == (kept == "native")


class NoisyClock(ScriptedClock):
    """ScriptedClock whose candidates' calls last costs[c] times factor, the factors taken
    in turn from `noise` (call k: noise[k % len(noise)])."""

    def __init__(self, costs, noise):
        super().__init__(*costs)
        self.noise, self.calls = noise, 0

    def __call__(self):
        if self.reads % 2:
            c = self.costs[(self.reads // 2) % len(self.costs)]
            self.now += c * self.noise[self.calls % len(self.noise)]
            self.calls += 1
        self.reads += 1
        return self.now


def test_auto_times_on_while_no_candidate_is_clearly_fastest(auto_backend, monkeypatch):
    """Native 15% faster, some calls slowed by up to 60%: after 3 timed calls
    each the NumPy code's fastest looks faster (the first native calls were slowed), so
    the calls go on, up to native_trials_most each, and the native program is kept."""
    noise = [1.0, 1.0, 1.6, 1.0, 1.5, 1.0, 1.4, 1.0] + [1.0, 1.3] * 20    # call k: native if even
    monkeypatch.setattr(cpu.CONFIG, "clock", NoisyClock((1.0e-3, 1.15e-3), noise))
    x = np.linspace(-2, 2, 4096, dtype=np.float32)
    exe = ft.jit(_arith).lower(x).compile()
    trials, most = cpu.CONFIG.native_trials, cpu.CONFIG.native_trials_most
    outs = []
    while exe.choice is None:
        outs.append(exe(x))
        assert len(outs) <= cpu_auto.calls_to_choose(most)
        if len(outs) == 2 * (trials + 1):
            assert min(exe.times["numpy"]) < min(exe.times["native"])   # misled so far
    assert exe.choice == "native" and len(outs) == 2 * (most + 1)
    assert len(exe.times["native"]) == len(exe.times["numpy"]) == most


def test_the_jitted_function_keeps_running_the_chosen_code(auto_backend, monkeypatch):
    clock = ScriptedClock(5e-3, 1e-3)
    monkeypatch.setattr(cpu.CONFIG, "clock", clock)
    ran = []
    call = cpu.CpuExecutable.__call__
    monkeypatch.setattr(cpu.CpuExecutable, "__call__", lambda self, *a, **k: (
        ran.append("native C++" in self.source), call(self, *a, **k))[1])
    x = np.linspace(-2, 2, 4096, dtype=np.float32)
    jf = ft.jit(_arith)
    trials = 2 * (cpu.CONFIG.native_trials + 1)
    for _ in range(trials + 5):
        jf(x)
    assert ran == [True, False] * (trials // 2) + [False] * 5
    assert clock.reads == 2 * trials            # no timing once chosen


def test_auto_also_times_the_native_program_on_one_thread(auto_backend, monkeypatch):
    """A native group on several OpenMP threads: the same library on one thread is a third
    candidate (a busy machine's cores make a parallel region wait)."""
    monkeypatch.setattr(cpu.CONFIG, "threads", 2)
    monkeypatch.setattr(cpu.CONFIG, "clock", ScriptedClock(3e-3, 2e-3, 1e-3))
    x = np.linspace(-2, 2, 1 << 16, dtype=np.float32)
    low = ft.jit(_arith).lower(x)
    assert "2 thread(s)" in low.source
    exe = low.compile()
    outs = _calls_until_chosen(exe, (x,), candidates=3)
    assert len(outs) == 3 * (cpu.CONFIG.native_trials + 1)      # clearly fastest
    assert exe.choice == "native, 1 thread" and list(exe.times) == [
        "native", "numpy", "native, 1 thread"]
    for k, got in enumerate(outs):      # the same library on 1 or 2 threads: the same bits
        if k % 3 != 1:                  # (calls 1, 4, ... ran the NumPy code)
            np.testing.assert_array_equal(got[0], outs[0][0])


def test_a_program_calling_blas_gives_its_loops_the_cores_blas_leaves(monkeypatch):
    x = np.ones((128, 128), np.float32)
    prod = ft.make_jaxpr(_with_product)(x, x).jaxpr
    plain = ft.make_jaxpr(_arith)(x).jaxpr
    assert cpu_auto.calls_blas(prod) and not cpu_auto.calls_blas(plain)
    for b, want in [(1, 4), (2, 3), (4, 1), (16, 1)]:
        monkeypatch.setattr(blas, "threads", lambda cores, b=b: b)
        n, why = cpu_auto.parallel_threads(prod, 4)
        assert n == want
        assert why == (None if want == 4 else f"the program calls BLAS, which runs {b} threads")
        assert cpu_auto.parallel_threads(plain, 4) == (4, None)     # no BLAS call: every core
    nested = ft.make_jaxpr(lambda x: ft.lax.cond(True, lambda v: v @ v, lambda v: v, x))(x)
    assert cpu_auto.calls_blas(nested.jaxpr)


def test_products_blas_runs_on_one_thread_leave_the_cores_to_the_loops():
    # OpenBLAS threads a GEMM only above m*n*k = 2^18 (per matrix of a batch) and a
    # matrix-vector product above m*n = 9216: smaller ones do not count against the pool
    def prod(a, b):
        return ft.make_jaxpr(lambda a, b: _arith(a) @ b)(np.ones(a, np.float32),
                                                         np.ones(b, np.float32)).jaxpr
    assert not cpu_auto.calls_blas(prod((32, 32), (32, 10)))        # a CNN's classifier head
    assert not cpu_auto.calls_blas(prod((64, 64), (64, 64)))        # 2^18: still one thread
    assert cpu_auto.calls_blas(prod((64, 64), (64, 65)))
    assert not cpu_auto.calls_blas(prod((16, 64, 64), (16, 64, 64)))   # 16 one-thread GEMMs
    assert cpu_auto.calls_blas(prod((2, 128, 128), (2, 128, 128)))
    assert not cpu_auto.calls_blas(prod((96, 96), (96,)))           # gemv, m*n = 9216
    assert cpu_auto.calls_blas(prod((97, 96), (96,)))
    x = np.ones((8, 8), np.float32)
    factor = ft.make_jaxpr(lambda a: fnp.linalg.cholesky(a @ a.T + 8 * fnp.eye(8)))(x)
    assert cpu_auto.calls_blas(factor.jaxpr)                        # LAPACK: always counted


def test_native_groups_beside_a_multithreaded_blas_run_one_thread(monkeypatch):
    try:
        toolchain.find_compiler()
    except toolchain.ToolchainError as e:
        pytest.skip(str(e))
    monkeypatch.setattr(cpu.CONFIG, "threads", 2)
    monkeypatch.setattr(blas, "threads", lambda cores: 2)
    saved = ft.config.cpu_backend
    ft.config.update("cpu_backend", "native")
    try:
        x = np.linspace(-1, 1, 1 << 16, dtype=np.float32).reshape(256, 256)
        text = str(ft.jit(_with_product).lower(x, x))
        assert "1 thread(s) (the program calls BLAS, which runs 2 threads)" in text
        assert "2 thread(s)" in str(ft.jit(_arith).lower(x))
    finally:
        ft.config.update("cpu_backend", saved)


def test_blas_threads_reads_the_library_else_the_environment(monkeypatch):
    monkeypatch.setattr(cpu.CONFIG, "threads", cpu.CONFIG.threads)   # set_num_threads sets it
    if blas.numpy_openblas() is not None:       # NumPy's bundled OpenBLAS: its own count
        before = blas.openblas_threads(blas.numpy_openblas())
        try:
            ft.set_num_threads(1)
            assert blas.threads(8) == 1
        finally:
            ft.set_num_threads(before)
    monkeypatch.setattr(blas, "numpy_openblas", lambda: None)
    monkeypatch.setattr(blas, "threadpoolctl", lambda: None)
    for var in blas.ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    assert blas.threads(8) == 8                 # unreachable and unset: every core
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert blas.threads(8) == 3
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "2")
    assert blas.threads(8) == 2


def test_one_thread_choices_are_timed_in_cpu_time(auto_backend, monkeypatch):
    """With one thread for everything, every candidate runs on the calling thread alone:
    the choice is timed with its CPU time, which a busy machine's other processes do not
    inflate; with several threads (a parallel candidate) with the wall clock; a clock set
    in CONFIG.clock is used as given."""
    x = np.linspace(-2, 2, 1 << 16, dtype=np.float32)
    monkeypatch.setattr(cpu.CONFIG, "clock", None)
    for threads, clock in ((1, time.thread_time), (2, time.perf_counter)):
        monkeypatch.setattr(cpu.CONFIG, "threads", threads)
        exe = ft.jit(_arith).lower(x).compile()
        assert isinstance(exe, cpu_auto.MeasuredChoice) and exe._clock is clock
    scripted = ScriptedClock(1e-3)
    monkeypatch.setattr(cpu.CONFIG, "clock", scripted)
    assert ft.jit(_arith).lower(x).compile()._clock is scripted
    # a program whose NumPy twin calls a BLAS running several threads: the wall clock
    monkeypatch.setattr(cpu.CONFIG, "threads", 1)
    monkeypatch.setattr(blas, "threads", lambda cores: 2)
    w = np.ones((256, 256), np.float32)
    xs = np.linspace(-2, 2, 256 * 256, dtype=np.float32).reshape(256, 256)
    assert cpu_auto.trial_clock(ft.make_jaxpr(_with_product)(xs, w).jaxpr, 1) \
        is time.perf_counter
