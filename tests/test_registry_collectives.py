"""Registry-driven checks of the collective primitives (registry_cases.COLLECTIVES), each
run under ft.vmap(..., axis_name="i") on hypothesis-drawn shapes: values against NumPy,
the JVP against central differences, the transpose identity <u, J v> = <J^T u, v> with
J^T from the primitive's transpose rule (vjp inside the named vmap), and batching over a
second, unnamed axis against a loop."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st

import functrans as ft
import functrans.api  # noqa: F401  (declares every primitive)
from functrans.primitives import REGISTRY
from registry_cases import AXIS, COLLECTIVES, F64
from conftest import assert_close, check_traced

pytestmark = pytest.mark.usefixtures("x64")  # float64 references: conftest.x64

NAMES = sorted(COLLECTIVES)
DIFF = [n for n in NAMES if REGISTRY[n].differentiable]
seeds = st.integers(0, 2 ** 32 - 1)


def _draw(data, name, dtype):
    case = COLLECTIVES[name]
    n = data.draw(st.integers(1, 4), label="axis size")
    params, gen = case.make(data, np.dtype(dtype), n)
    rng = np.random.default_rng(data.draw(seeds, label="seed"))
    return REGISTRY[name], case, params, gen, rng


def _named(p, params):
    return ft.vmap(lambda x: p.bind(x, **params), axis_name=AXIS)


def _vdot(a, b):
    return float(np.sum(np.asarray(a, np.float64) * np.asarray(b, np.float64)))


def test_every_collective_has_rules():
    for name in NAMES:
        p = REGISTRY[name]
        assert p.batch is not None and p.extra.get("named_batch") is not None, name
        assert (p.transpose is not None) == COLLECTIVES[name].linear, name


@pytest.mark.filterwarnings("ignore:jit. new callable")     # one jitted function per example
@pytest.mark.parametrize("name", NAMES)
@given(data=st.data())
def test_values_and_shape_rule(name, data):
    for dtype in COLLECTIVES[name].dtypes:
        p, case, params, gen, rng = _draw(data, name, dtype)
        (x,) = gen(rng)
        got = _named(p, params)(x)
        want = case.ref(x, **params)
        aval = p.abstract_eval(ft.ShapedArray(x.shape[1:], x.dtype), **params)
        assert np.shape(got) == (len(x),) + aval.shape and np.asarray(got).dtype == aval.dtype
        assert_close(got, want, rtol=1e-6, atol=1e-6, err_msg=name)
        check_traced(_named(p, params), x)
        assert_close(ft.jit(_named(p, params))(x), want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", DIFF)
@given(data=st.data())
def test_jvp_against_finite_differences(name, data):
    p, case, params, gen, rng = _draw(data, name, F64)
    (x,) = gen(rng)
    t = rng.standard_normal(x.shape)
    f = _named(p, params)
    inner = ft.vmap(lambda x, t: ft.jvp(lambda v: p.bind(v, **params), (x,), (t,))[1],
                    axis_name=AXIS)
    eps = 1e-6
    fd = (f(x + eps * t) - f(x - eps * t)) / (2 * eps)
    assert_close(inner(x, t), fd, rtol=1e-6, atol=1e-6, err_msg=f"{name} jvp inside vmap")
    assert_close(ft.jvp(f, (x,), (t,))[1], fd, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", DIFF)
@given(data=st.data())
def test_transpose_identity(name, data):
    """<u, J v> = <J^T u, v>: J v by forward mode, J^T u by the collective's transpose
    rule (vjp inside the named vmap) and by reverse mode around it."""
    p, case, params, gen, rng = _draw(data, name, F64)
    (x,) = gen(rng)
    v = rng.standard_normal(x.shape)
    f = _named(p, params)
    jv = ft.jvp(f, (x,), (v,))[1]
    u = rng.standard_normal(np.shape(jv))
    inner = ft.vmap(lambda x, u: ft.vjp(lambda w: p.bind(w, **params), x)[1](u)[0],
                    axis_name=AXIS)
    for jtu in (inner(x, u), ft.vjp(f, x)[1](u)[0]):
        assert np.shape(jtu) == x.shape
        lhs, rhs = _vdot(u, jv), _vdot(jtu, v)
        assert np.isclose(lhs, rhs, rtol=1e-9, atol=1e-9), f"{name}: {lhs} vs {rhs}"
    check_traced(inner, x, u)


@pytest.mark.parametrize("name", NAMES)
@given(data=st.data())
def test_batching_over_another_axis(name, data):
    """An unnamed vmap inside the named one (the collective's per-entry rule) and one
    outside it agree with a loop."""
    p, case, params, gen, rng = _draw(data, name, COLLECTIVES[name].dtypes[-1])
    size = data.draw(st.integers(1, 3), label="batch size")
    xs = [gen(rng)[0] for _ in range(size)]
    axis = data.draw(st.integers(0, xs[0].ndim - 1), label="inner axis")
    want = np.stack([case.ref(x, **params) for x in xs], axis=1)
    stacked = np.stack(xs, axis=1)            # (n, size, ...)
    inner = ft.vmap(ft.vmap(lambda x: p.bind(x, **params), in_axes=axis), axis_name=AXIS)
    moved = np.moveaxis(stacked, 1, axis + 1)
    assert_close(inner(moved), want, rtol=1e-6, atol=1e-6, err_msg=f"{name} inner vmap")
    outer = ft.vmap(_named(p, params), in_axes=1, out_axes=1)
    assert_close(outer(stacked), want, rtol=1e-6, atol=1e-6, err_msg=f"{name} outer vmap")
