"""The runtime (functrans/runtime.py): its tiers agree with core.eval_jaxpr, its program
cache is keyed by structure, and the byte budget keeps programs beyond it straight-line."""
import numpy as np
import pytest

import functrans as ft
import functrans.numpy as fnp
from functrans import core, runtime
from functrans.backends.memory import BUDGET

pytestmark = pytest.mark.usefixtures("x64")  # float64 references: conftest.x64

RNG = np.random.default_rng(0)


def _rand(*shape):
    return RNG.standard_normal(shape)


def _mlp(w, b, x):
    return fnp.sum(fnp.tanh(x @ w + b) * fnp.exp(-(x @ w) ** 2))


def _loop(w, x):
    def body(i, h):
        return fnp.tanh(h @ w) + 0.5 * h
    h = ft.lax.fori_loop(0, 4, body, x)
    return ft.lax.cond(fnp.sum(h) > 0, lambda h: h * 2.0, lambda h: h - 1.0, h)


def _scan(w, xs):
    def cell(h, x):
        h = fnp.tanh(h @ w + x)
        return h, fnp.sum(h * h)
    return ft.lax.scan(cell, fnp.zeros(w.shape[0], dtype=w.dtype), xs)


PROGRAMS = {
    "mlp": (_mlp, lambda: (_rand(4, 3), _rand(3), _rand(5, 4))),
    "control_flow": (_loop, lambda: (_rand(3, 3) * 0.5, _rand(2, 3))),
    "scan": (_scan, lambda: (_rand(3, 3) * 0.5, _rand(6, 3))),
    "mlp_grad": (ft.grad(_mlp, argnums=(0, 1)), lambda: (_rand(4, 3), _rand(3), _rand(5, 4))),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_every_tier_equals_eval_jaxpr(name):
    """First run (interpreted), straight-line runs and hot (lowered) runs all give what
    core.eval_jaxpr gives; the program does reach the hot tier."""
    f, make_args = PROGRAMS[name]
    args = make_args()
    closed = ft.make_jaxpr(f)(*args)
    flat = ft.tree_leaves(args)
    want = core.eval_jaxpr(closed.jaxpr, closed.consts, *flat)
    for _ in range(runtime.HOT_RUNS + 2):
        got = runtime.run(closed, *flat)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)
    assert closed.jaxpr._compiled is not None and closed.jaxpr._compiled.hot
    run = runtime.program(closed)
    for g, w in zip(run(np, *flat), want):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)


def test_program_cache_is_keyed_by_structure():
    """The same function traced twice gives two jaxprs of one structure: one compiled
    program serves both (the second is neither compiled nor lowered again)."""
    c = np.full(3, 0.25)

    def f(x):                                   # a structure no other test uses
        return fnp.sin(x * 1.75) * c + fnp.cos(x) - 0.125
    x = _rand(7, 3)
    a, b = ft.make_jaxpr(f)(x), ft.make_jaxpr(f)(x)
    assert a.jaxpr is not b.jaxpr
    for _ in range(runtime.HOT_RUNS + 1):
        runtime.run(a, x)
    prog = a.jaxpr._compiled
    assert prog is not None and prog.hot
    n = runtime.DERIVED.stats()["kinds"]["program"]
    runtime.run(b, x)
    runtime.run(b, x)
    assert b.jaxpr._compiled is prog and runtime.DERIVED.stats()["kinds"]["program"] == n
    np.testing.assert_allclose(runtime.run(b, x)[0], runtime.run(a, x)[0])
    other = ft.make_jaxpr(f)(_rand(8, 3))       # another shape: another program
    runtime.run(other, _rand(8, 3))
    runtime.run(other, _rand(8, 3))
    assert other.jaxpr._compiled is not prog


def test_programs_beyond_the_byte_budget_stay_straight_line(monkeypatch):
    """With the budget spent, a hot program stays straight-line code (same values); with
    room, the same structure is lowered and its bytes are counted while it lives."""
    def f(x):                                   # a structure no other test uses
        return fnp.tanh(fnp.exp(x * 0.5) - x * x + 2.5) * 1.25
    x = _rand(64, 33)
    want = core.eval_jaxpr(ft.make_jaxpr(f)(x).jaxpr, [], x)[0]
    monkeypatch.setattr(BUDGET, "limit", 0)
    closed = ft.make_jaxpr(f)(x)
    for _ in range(runtime.HOT_RUNS + 3):
        np.testing.assert_allclose(runtime.run(closed, x)[0], want, rtol=1e-12)
    prog = closed.jaxpr._compiled
    assert prog.runs >= runtime.HOT_RUNS and prog.hot is False
    exe = runtime.hot_program(closed.jaxpr)
    monkeypatch.setattr(BUDGET, "limit", 1 << 40)
    assert exe is False or exe.nbytes == 0
    before = BUDGET.held
    exe = runtime.hot_program(closed.jaxpr)
    assert exe and BUDGET.held == before + exe.nbytes
    np.testing.assert_allclose(exe(x)[0], want, rtol=1e-12)


def test_block_temporaries_count_against_the_budget(monkeypatch):
    """A large fusion group runs in blocks with per-thread temporaries: the executable
    reports their bytes, and a budget below them keeps the program straight-line."""
    from functrans.backends import cpu
    monkeypatch.setattr(cpu.CONFIG, "block_min_size", 1)
    monkeypatch.setattr(cpu.CONFIG, "block_min_work", 1)

    def f(x):
        return fnp.tanh(fnp.sin(x) * fnp.cos(x) + x * 0.5) * 3.0 - fnp.exp(-x)
    x = _rand(256, 64)
    closed = ft.make_jaxpr(f)(x)
    exe = runtime.hot_program(closed.jaxpr)
    assert exe and exe.nbytes > 0
    scratch = sum(int(np.prod(s)) * np.dtype(d).itemsize for s, d in exe.scratch)
    assert exe.nbytes > scratch                 # the block temporaries are counted
    monkeypatch.setattr(BUDGET, "limit", scratch)
    assert runtime.hot_program(closed.jaxpr) is False
    np.testing.assert_allclose(exe(x)[0], core.eval_jaxpr(closed.jaxpr, [], x)[0],
                               rtol=1e-12)


def test_hot_programs_write_outputs_into_given_destinations():
    """A hot program writes an output computed into a buffer of its own (a matmul, a fused
    group) into the array given for it in `dests`, and returns that array; other outputs,
    and every output without dests, come back as usual with the same values."""
    def f(x, w):
        h = x @ w
        return h, fnp.tanh(h) * 2.0 + x @ w, fnp.sum(h, axis=0)
    x, w = _rand(4, 6), _rand(6, 5)
    closed = ft.make_jaxpr(f)(x, w)
    exe = runtime.hot_program(closed.jaxpr)
    assert exe
    want = exe(x, w)
    dests = [np.full((4, 5), np.nan), np.full((4, 5), np.nan), np.full(5, np.nan)]
    got = exe(x, w, dests=dests)
    for g, wnt in zip(got, want):
        np.testing.assert_allclose(g, wnt, rtol=1e-14)
    written = [g is d for g, d in zip(got, dests)]
    assert written[0] and written[1]            # the matmul and the fused group
    assert np.isnan(dests[2]).all() or written[2]     # untouched unless written whole
    partial = [None, np.zeros((4, 5)), None]
    got = exe(x, w, dests=partial)
    assert got[0] is not partial[0] and got[1] is partial[1]
    np.testing.assert_allclose(got[0], want[0], rtol=1e-14)


def test_destinations_are_a_hint_below_the_hot_tier():
    """runtime.program(closed)(xp, *args, dests=...) is valid in every tier: before the
    program is hot the outputs are fresh arrays (the caller checks `out is dest`)."""
    def f(x):
        return fnp.exp(x) @ x.T
    x = _rand(3, 3)
    closed = ft.make_jaxpr(f)(x)
    call = runtime.program(closed)
    want = np.exp(x) @ x.T
    hits = []
    for _ in range(runtime.HOT_RUNS + 2):
        d = np.empty((3, 3))
        out = call(np, x, dests=[d])[0]
        np.testing.assert_allclose(out, want, rtol=1e-14)
        hits.append(out is d)
    assert not hits[0] and hits[-1]
