"""Compiled-program memory stays under one byte budget (backends/memory.py), measured by
tracemalloc (NumPy reports its buffers to it), not by the library's own accounting: many
input shapes, many batch sizes, a jitted lambda rebuilt in a loop, many hot programs;
clearing or dropping a jitted function frees its programs."""
from __future__ import annotations

import gc
import threading
import tracemalloc

import numpy as np
import pytest

import functrans as ft
import functrans.numpy as fnp
from functrans import runtime
from functrans.backends import cpu
from functrans.backends.memory import BUDGET

pytestmark = pytest.mark.usefixtures("x64")  # float64 references: conftest.x64

LIMIT = 4 << 20
SLACK = 6 << 20         # traced jaxprs, generated code, cache entries: not buffers


@pytest.fixture
def traced(monkeypatch):
    """A small budget, everything held before freed, tracemalloc on: yields live()."""
    BUDGET.release_all()
    monkeypatch.setattr(BUDGET, "limit", LIMIT)
    gc.collect()
    tracemalloc.start()

    def live():
        gc.collect()
        return tracemalloc.get_traced_memory()[0]
    try:
        yield live
    finally:
        tracemalloc.stop()


def _step(x, w):
    h = fnp.tanh(x @ w) * 2.0
    return fnp.sum(h * h - x)


def test_one_hundred_batch_sizes(traced):
    w = np.full((32, 32), 0.01)
    f = ft.jit(_step)
    base = traced()
    for b in range(1, 101):
        x = np.ones((32 * b, 32))
        np.testing.assert_allclose(f(x, w), _step(x, w), rtol=1e-10)
    del x
    grown = traced() - base                     # was 84 MB
    assert grown < LIMIT + SLACK, grown / 1e6
    assert BUDGET.held <= LIMIT and BUDGET.stats()["evictions"] > 0
    f.clear_cache()
    assert traced() - base < 1 << 20            # cleared: its programs are gone


@pytest.mark.slow   # (one_hundred_batch_sizes runs the same growth check in the default run)
def test_three_hundred_shapes(traced):
    f = ft.jit(lambda x: fnp.sum(fnp.tanh(x) * 2.0 + x * x))
    base = traced()
    for k in range(300):
        x = np.ones((1000 + 7 * k, 16))
        np.testing.assert_allclose(f(x), np.sum(np.tanh(x) * 2.0 + x * x), rtol=1e-10)
    del x
    grown = traced() - base                     # was 127 MB
    assert grown < LIMIT + 3 * SLACK, grown / 1e6
    assert BUDGET.held <= LIMIT
    del f
    assert traced() - base < 1 << 20            # collected: its programs are gone


@pytest.mark.slow
def test_jitted_lambda_rebuilt_in_a_loop(traced):
    x = np.ones((2000, 64))
    base = traced()
    with pytest.warns(ft.RetraceWarning):
        for _ in range(300):
            g = ft.jit(lambda x: fnp.sum(fnp.tanh(x) * 2.0 + x * x))
            g(x)
    del g
    assert traced() - base < 1 << 20            # was 307 MB: each one's programs held


@pytest.mark.slow   # (~9 s; test_runtime's budget tests cover hot programs' buffers)
def test_hot_programs_and_their_block_temporaries(traced, monkeypatch):
    """80 hot programs with blocked (threaded) groups: the bytes the budget reports are
    the bytes it frees, and they stay under the limit."""
    monkeypatch.setattr(cpu.CONFIG, "block_min_size", 1)
    monkeypatch.setattr(cpu.CONFIG, "block_min_work", 1)
    monkeypatch.setattr(cpu.CONFIG, "threads", 4)
    base = traced()
    for k in range(80):
        x = np.linspace(0.0, 1.0, 4000 + k)
        g = ft.grad(lambda x: fnp.sum(fnp.tanh(x * 1.5) * x + fnp.sin(x) * x))
        for _ in range(runtime.HOT_RUNS + 2):
            got = g(x)
        np.testing.assert_allclose(got, np.tanh(1.5 * x) + 1.5 * x / np.cosh(1.5 * x) ** 2
                                   + np.sin(x) + x * np.cos(x), rtol=1e-10)
    del x, got
    assert traced() - base < LIMIT + 2 * SLACK
    held, before = BUDGET.held, traced()
    assert 0 < held <= LIMIT and BUDGET.stats()["evictions"] > 0
    BUDGET.release_all()
    freed = before - traced()
    assert BUDGET.held == 0 and abs(freed - held) < 64 << 10, (freed, held)


def test_evicted_programs_run_again_with_the_same_values(monkeypatch):
    """An evicted executable allocates its buffers again at its next call; one larger than
    the whole budget allocates them per call; concurrent callers evict one another."""
    limit = 3 << 19
    monkeypatch.setattr(BUDGET, "limit", limit)

    def g(x, c):                                # two temporaries live at once: scratch
        a, b = fnp.tanh(x * c), fnp.sin(x)
        return a * fnp.sum(b) + b * fnp.sum(a)

    def g_np(x, c):
        a, b = np.tanh(x * c), np.sin(x)
        return a * np.sum(b) + b * np.sum(a)
    fs = [ft.jit(lambda x, c=c: g(x, c)) for c in (0.5, 1.5, 2.5)]
    # 640 kB of scratch each: two fit, not three; not symmetric about 0, where the sums
    # of the odd tanh and sin would cancel to rounding noise (the native backend sums in
    # another order than NumPy: the noise differs)
    x = np.linspace(-1.0, 2.0, 40000)
    want = [g_np(x, c) for c in (0.5, 1.5, 2.5)]
    for _ in range(3):
        for f, w in zip(fs, want):
            np.testing.assert_allclose(f(x), w, rtol=1e-12)
    exes = [next(iter(f._state.entries.values())).exes["cpu"] for f in fs]
    assert [e.holds_buffers for e in exes] == [False, True, True]     # the LRU one freed
    big = np.linspace(-1.0, 2.0, 300000)        # 4.8 MB: over the budget
    for _ in range(2):
        np.testing.assert_allclose(fs[0](big), g_np(big, 0.5), rtol=1e-12)
    assert BUDGET.held <= limit
    errors = []

    def worker(k):
        try:
            for _ in range(20):
                np.testing.assert_allclose(fs[k % 3](x), want[k % 3], rtol=1e-12)
        except BaseException as e:              # noqa: BLE001 (reported below)
            errors.append(e)
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and BUDGET.held <= limit
