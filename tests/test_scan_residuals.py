"""A scan recorded by the facade keeps its residuals: the forward runs as the scan's residual
form (reverse.residual_form: the known part of its linearization, which also returns each
step's residuals stacked), the node holds them, and the derived backward reads them instead
of running the forward loop again (issue 30). Checked by counting loop runs, by values
against the node-by-node path and a partial backward, and by double backward (which
recomputes: saved floats would be constants there) against central differences."""
from __future__ import annotations

import numpy as np
import pytest

import functrans as ft
from conftest import fd_grad
from functrans.core import ClosedJaxpr, ShapedArray, eval_jaxpr
from functrans.higher_order import control_flow as cf
from functrans.nn.functional._rnn import _layer_fn
from functrans.primitives import elementwise as ew
from functrans.reverse import residual_form
from functrans.tracing import trace_to_jaxpr

pytestmark = pytest.mark.usefixtures("x64")  # float64 references: conftest.x64


@pytest.fixture
def scan_runs(monkeypatch):
    """How many loops run (scan_p.impl calls; programs generated after this point)."""
    runs = []
    impl = cf.scan_p.impl

    def counted(*args, **params):
        runs.append(params["reverse"])
        return impl(*args, **params)
    monkeypatch.setattr(cf.scan_p, "impl", counted)
    return runs


def _lstm_step(m, x, opt):
    opt.zero_grad()
    y, _ = m(x)
    loss = (y * y).sum()
    loss.backward()
    opt.step()
    return loss.item()


def test_each_layer_scans_once_forward_and_once_backward(scan_runs):
    """Two layers: two forward loops and two transposed ones per training step, from the
    step the backward runs the derived program on (before: the residual program ran each
    layer's forward loop again, six loops per step)."""
    ft.manual_seed(0)
    m = ft.nn.LSTM(7, 6, num_layers=2).double()      # shapes no other test uses
    opt = ft.optim.SGD(m.parameters(), lr=0.01)
    x = ft.randn(9, 2, 7, dtype=ft.float64)
    for step in range(4):
        del scan_runs[:]
        _lstm_step(m, x, opt)
    assert scan_runs == [False, False, True, True]


def test_values_equal_the_node_by_node_path():
    """Losses and parameters after training steps equal a twin trained under anomaly mode
    (each node's backward run alone, recomputing the loop), and a backward asked for one
    input only (another split of the scan: it recomputes) gives the same gradient."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 3, 4))
    runs = []
    for anomaly in (False, True):
        ft.manual_seed(0)
        m = ft.nn.LSTM(4, 5, num_layers=2, dropout=0.0).double()
        opt = ft.optim.SGD(m.parameters(), lr=0.1)
        with ft.autograd.set_detect_anomaly(anomaly):
            losses = [_lstm_step(m, ft.tensor(x), opt) for _ in range(4)]
        runs.append((losses, [p.detach().numpy().copy() for p in m.parameters()]))
    np.testing.assert_allclose(runs[0][0], runs[1][0], rtol=1e-12)
    for a, b in zip(runs[0][1], runs[1][1]):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    xt = ft.tensor(x, requires_grad=True)
    for _ in range(3):
        y, _ = m(xt)
        (gx,) = ft.autograd.grad((y * y).sum(), [xt])
        xt.grad = None
        y, _ = m(xt)
        (y * y).sum().backward()
        np.testing.assert_allclose(gx.numpy(), xt.grad.numpy(), rtol=1e-12, atol=1e-14)


def test_double_backward_through_the_layer_against_finite_differences():
    """d/dW_hh of <v, dL/dx>: create_graph recomputes the residuals (a saved float would
    be a constant), and the result matches central differences of the first derivative."""
    ft.manual_seed(1)
    m = ft.nn.LSTM(3, 3).double()
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 2, 3))
    v = rng.standard_normal(x.shape)
    w0 = m.weight_hh_l0.detach().numpy().copy()

    def first(w):
        with ft.no_grad():
            m.weight_hh_l0.copy_(ft.tensor(w))
        xt = ft.tensor(x, requires_grad=True)
        y, (h, c) = m(xt)
        (g,) = ft.autograd.grad((y * y).sum() + (c * c).sum(), [xt], create_graph=True)
        return g

    for _ in range(2):                       # the second time through the derived program
        m.zero_grad()
        (first(w0) * ft.tensor(v)).sum().backward()
        got = m.weight_hh_l0.grad.numpy().copy()
        want = fd_grad(lambda w: float((first(w).detach().numpy() * v).sum()), w0)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)


def test_residual_form_of_a_scan_and_of_other_primitives():
    """The form computes the scan's outputs then its residuals; a primitive without a
    known-outputs-first split, or nothing differentiated, has none."""
    f64 = np.dtype(np.float64)
    carry, xs = ShapedArray((3,), f64), ShapedArray((5, 3), f64)
    j, _ = trace_to_jaxpr(lambda c, x: list(ft.lax.scan(
        lambda c, x: (ft.numpy.sin(c * x), ft.numpy.cos(c)), c, x)), [carry, xs])
    (eqn,) = j.eqns
    avals = [a.aval for a in eqn.invars]
    form = residual_form(eqn.primitive, eqn.params, avals, [True, True])
    assert [a.shape for a in form.out_avals[:2]] == [(3,), (5, 3)]
    assert len(form.out_avals) > 2                       # the residuals, stacked
    assert residual_form(eqn.primitive, eqn.params, avals, [False, False]) is None
    assert residual_form(ew.sin_p, {}, [carry], [True]) is None


def _scan_loss(w, xs):
    def body(c, x):
        c = ft.numpy.tanh(c @ w + x)
        return c, ft.numpy.sin(c)
    c, ys = ft.lax.scan(body, ft.numpy.zeros(3, dtype=xs.dtype), xs)
    return ft.numpy.sum(ys * ys) + ft.numpy.sum(c)


def test_grad_records_the_scan_with_its_residuals(scan_runs):
    """ft.grad (recorded eagerly, like the facade): from the second call on, the derived
    program reads the recorded residuals, one loop forward and one transposed; the
    gradient matches central differences."""
    rng = np.random.default_rng(0)
    w, xs = rng.standard_normal((3, 3)) * 0.5, rng.standard_normal((11, 3))
    g = ft.grad(_scan_loss)
    for _ in range(3):
        del scan_runs[:]
        got = np.asarray(g(w, xs))
    assert scan_runs == [False, True]
    np.testing.assert_allclose(got, fd_grad(lambda v: float(_scan_loss(v, xs)), w),
                               rtol=1e-6, atol=1e-8)


def test_second_derivative_through_scan_against_finite_differences():
    """grad of a function of grad: the inner recording keeps residuals that depend on w,
    which the outer differentiation must see through (float64 central differences)."""
    rng = np.random.default_rng(1)
    w, xs = rng.standard_normal((3, 3)) * 0.5, rng.standard_normal((6, 3))
    v = rng.standard_normal((3, 3))

    def inner(w):
        return ft.numpy.sum(ft.grad(_scan_loss)(w, xs) * v)
    for _ in range(3):
        got = np.asarray(ft.grad(inner)(w))
    np.testing.assert_allclose(got, fd_grad(lambda u: float(inner(u)), w), rtol=1e-6,
                               atol=1e-8)


def test_derivative_residuals_are_recomputed_not_stored():
    """An LSTM step's σ(1 - σ) and 1 - tanh² are recomputed by the transposed loop from the
    σ and tanh residuals it keeps anyway: 7 stacked residuals per layer instead of 12 (and
    the loop-invariant weight), with the layer's gradients against central differences."""
    f64 = np.dtype(np.float64)
    shapes = [(5, 2, 3), (2, 4), (2, 4), (16, 3), (16, 4), (16,), (16,)]
    j, _ = trace_to_jaxpr(lambda *a: list(_layer_fn(*a, mode="LSTM", has_bias=True,
                                                    has_proj=False, reverse=False)),
                          [ShapedArray(s, f64) for s in shapes])
    (eqn,) = [e for e in j.eqns if e.primitive is cf.scan_p]
    avals = [a.aval for a in eqn.invars]
    form = residual_form(eqn.primitive, eqn.params, avals, [True] * len(avals))
    res = form.out_avals[len(eqn.outvars):]
    assert [a.shape for a in res] == [(5, 2, 4)] * 7 + [(16, 4)]

    rng = np.random.default_rng(4)
    args = [rng.standard_normal(s) * 0.5 for s in shapes]

    def loss(*a):
        ys, h, c = _layer_fn(*a, mode="LSTM", has_bias=True, has_proj=False, reverse=False)
        return ft.numpy.sum(ys * ys) + ft.numpy.sum(c * h)
    grads = ft.grad(loss, argnums=tuple(range(len(args))))(*args)
    for k, g in enumerate(grads):
        def f(v, k=k):
            return float(loss(*args[:k], v, *args[k + 1:]))
        np.testing.assert_allclose(np.asarray(g), fd_grad(f, args[k]), rtol=1e-6, atol=1e-8)


def test_recomputed_residuals_run_in_dependency_order():
    """A residual recomputed from another recomputed one (a = 1 - b, b = s * s, s kept)
    comes after it in the unknown body, whatever the residuals' order; the unknown body
    gives the same values as with every residual stored."""
    aval = ShapedArray((3,), np.dtype(np.float64))
    # known: x -> residuals (a, b, s), no known outputs; unknown: (a, b, s, t) -> a t + b + s
    jk, _ = trace_to_jaxpr(lambda x: (lambda s: (lambda b: [1.0 - b, b, s])(s * s))(
        ft.numpy.sin(x)), [aval])
    ju, _ = trace_to_jaxpr(lambda a, b, s, t: [a * t + b + s], [aval] * 4)
    known, unknown = ClosedJaxpr(jk, []), ClosedJaxpr(ju, [])
    new_known, new_unknown, num_res = cf._recompute_cheap_residuals(known, unknown, 3)
    assert num_res == 1 and len(new_unknown.jaxpr.invars) == 2
    x, t = np.array([0.3, -1.2, 2.0]), np.array([1.5, 0.5, -2.0])
    (want,) = eval_jaxpr(ju, [], *eval_jaxpr(jk, [], x), t)
    (got,) = eval_jaxpr(new_unknown.jaxpr, [], *eval_jaxpr(new_known.jaxpr, [], x), t)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-14)
