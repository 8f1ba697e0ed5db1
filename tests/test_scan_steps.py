"""How a scan's steps run on the CPU (issue 30, the LSTM step): each lowered step writes its
stacked outputs straight into their rows (the step's `dests`), the loop's results are new
arrays (scan is declared `fresh`, so a program may write into them), and a slice that a
native group reads is handed to it C-contiguous (an LSTM step's gates are column blocks of
one product), so that the native call never fails over to copying every argument. Values
against a NumPy loop, across the tiers a step goes through."""
from __future__ import annotations

import numpy as np
import pytest

import functrans as ft
from functrans import lax, runtime
from functrans.backends.native import kernels as native_kernels
from functrans.higher_order import control_flow as cf

RNG = np.random.default_rng(30)


def _reference(c, xs, w):
    """The scan of _step, by a NumPy loop."""
    ys, zs = [], []
    for x in xs:
        h = np.tanh(c @ w + x)
        c = c * 0.5 + h
        ys.append(h)
        zs.append(c.sum(axis=1))
    return c, np.stack(ys), np.stack(zs)


def _step(w):
    def step(c, x):
        h = ft.numpy.tanh(c @ w + x)
        c = c * 0.5 + h
        return c, (h, c.sum(axis=1))
    return step


@pytest.fixture
def step_outputs(monkeypatch):
    """For each step run through a lowered program with destinations: how many of its
    stacked outputs came back in them."""
    written = []
    program = runtime.program

    def spied(closed):
        call = program(closed)

        def run(xp, *args, dests=None):
            out = call(xp, *args, dests=dests)
            if dests is not None:
                written.append(sum(d is not None and o is d for o, d in zip(out, dests)))
            return out
        return run
    monkeypatch.setattr(cf.runtime, "program", spied)
    return written


def test_steps_write_their_stacked_outputs_in_place(step_outputs):
    """40 steps (the step program goes hot after runtime.HOT_RUNS): the rows of the (8, 16)
    outputs are written by the steps themselves once lowered, a 1-D row (a scalar per
    step) is copied in, and the values are the NumPy loop's."""
    c0 = RNG.standard_normal((8, 16)).astype(np.float32)
    xs = RNG.standard_normal((40, 8, 16)).astype(np.float32)
    w = (RNG.standard_normal((16, 16)) / 4).astype(np.float32)
    c, (ys, zs) = lax.scan(_step(w), c0, xs)
    rc, rys, rzs = _reference(c0, xs, w)
    for got, ref in ((c, rc), (ys, rys), (zs, rzs)):
        np.testing.assert_allclose(np.asarray(got), ref, rtol=1e-5, atol=1e-5)
    assert len(step_outputs) == 40
    assert max(step_outputs) == 1          # h's row; the row of c's sums is a copy
    assert step_outputs[-1] == 1


def test_a_settled_step_is_called_directly(step_outputs):
    """Once the step's program has reached its last tier (past runtime.NATIVE_RUNS runs)
    the loop calls it directly (runtime.settled), not through the tiers' bookkeeping of
    every call; the values are the NumPy loop's before and after, and so are those of a
    second scan, which calls it directly from its first step."""
    c0 = RNG.standard_normal((6, 12)).astype(np.float32)
    xs = RNG.standard_normal((100, 6, 12)).astype(np.float32)
    w = (RNG.standard_normal((12, 12)) / 4).astype(np.float32)
    for k in range(2):
        c, (ys, zs) = lax.scan(_step(w), c0, xs)
        rc, rys, rzs = _reference(c0, xs, w)
        for got, ref in ((c, rc), (ys, rys), (zs, rzs)):
            np.testing.assert_allclose(np.asarray(got), ref, rtol=1e-5, atol=1e-5)
        if k == 0:
            assert runtime.NATIVE_RUNS <= len(step_outputs) < 80, len(step_outputs)
            seen = len(step_outputs)
    assert len(step_outputs) == seen        # the second scan: no call through the tiers


def test_results_are_new_arrays():
    """The carry never shares memory with the operands (no steps: it is the initial carry)
    or with a stacked output (here each step's carry is a view of its stacked output, which
    the lowered step writes into its row)."""
    def body(c, x):
        y = ft.numpy.tanh(c.reshape(4, 16) + x)
        return [y.reshape(64), y]
    closed = cf._trace(body, [ft.core.ShapedArray((64,), np.float32),
                              ft.core.ShapedArray((4, 16), np.float32)])
    c0 = RNG.standard_normal(64).astype(np.float32)
    for length in (0, 30):
        xs = RNG.standard_normal((length, 4, 16)).astype(np.float32)
        carry, ys = cf.scan_p.impl(np, c0, xs, jaxpr=closed, length=length, reverse=False,
                                   num_consts=0, num_carry=1)
        assert not np.may_share_memory(carry, c0) and not np.may_share_memory(carry, ys)
        ref = c0
        for x in xs:
            ref = np.tanh(ref.reshape(4, 16) + x).reshape(64)
        np.testing.assert_allclose(carry, ref, rtol=1e-6, atol=1e-6)


def test_a_native_group_reads_column_slices_without_retrying(native_backend, monkeypatch):
    """An LSTM-like step: the gates are column blocks of one (20, 1024) array, read by one
    native group; the lowered program copies each block once, contiguous, and never has
    the native call fail and retry with every argument copied."""
    def retry(fn, *arrays):
        raise AssertionError("a native group was called with a non-contiguous argument")
    monkeypatch.setattr(native_kernels, "retry", retry)

    def gates(z, c):
        i, f = lax.logistic(z[:, :256]), lax.logistic(z[:, 256:512])
        g, o = lax.tanh(z[:, 512:768]), lax.logistic(z[:, 768:])
        c = f * c + i * g
        return o * lax.tanh(c), c
    z = RNG.standard_normal((20, 1024)).astype(np.float32)
    c = RNG.standard_normal((20, 256)).astype(np.float32)
    h, c2 = ft.jit(gates)(z, c)
    s = 1 / (1 + np.exp(-z.astype(np.float64)))
    rc = s[:, 256:512] * c + s[:, :256] * np.tanh(z[:, 512:768])
    np.testing.assert_allclose(np.asarray(c2), rc, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(h), s[:, 768:] * np.tanh(rc), rtol=1e-5, atol=1e-6)


def test_a_concatenated_stacked_output_is_written_in_its_row(step_outputs):
    """A step whose stacked output is a concatenation (an LSTM backward step's four gate
    cotangents): once lowered, the concatenation is written straight into its row."""
    c0 = RNG.standard_normal((4, 16)).astype(np.float32)
    xs = RNG.standard_normal((30, 4, 16)).astype(np.float32)

    def step(c, x):
        a, b = ft.numpy.tanh(c + x), c * x
        return a, ft.numpy.concatenate([a, b, -a], axis=1)
    c, ys = lax.scan(step, c0, xs)
    ref = []
    for x in xs:
        a, b = np.tanh(c0 + x), c0 * x
        ref.append(np.concatenate([a, b, -a], axis=1))
        c0 = a
    np.testing.assert_allclose(np.asarray(ys), np.stack(ref), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.asarray(c), c0, rtol=1e-6, atol=1e-6)
    assert step_outputs[-1] == 1
