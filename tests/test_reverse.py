"""vjp/grad record the function once per call and reuse derived programs by structure."""
import numpy as np

import functrans as ft
import functrans.numpy as fnp
from functrans import executor
from conftest import fd_grad
import pytest

pytestmark = pytest.mark.usefixtures("x64")  # float64 references: conftest.x64


def test_cache_hit_uses_this_calls_values():
    c = np.array([1.0, 2.0, 3.0])
    f = lambda x: fnp.sum(fnp.sin(x) * c)   # noqa: E731
    x = np.array([0.1, 0.2, 0.3])
    np.testing.assert_allclose(ft.grad(f)(x), np.cos(x) * c)
    c[:] = [4.0, 5.0, 6.0]                        # same structure, new constant values
    np.testing.assert_allclose(ft.grad(f)(x), np.cos(x) * c)
    x2 = np.array([1.0, -2.0, 0.5])
    np.testing.assert_allclose(ft.grad(f)(x2), np.cos(x2) * c)


def test_python_control_flow_and_side_effects_run_every_call():
    calls = []

    def f(x):
        calls.append(1)
        return x * x if x > 0 else fnp.sin(x)
    assert ft.grad(f)(3.0) == 6.0
    assert np.isclose(ft.grad(f)(-1.0), np.cos(-1.0))
    assert ft.grad(f)(2.0) == 4.0
    assert len(calls) == 3


def test_params_are_part_of_the_structure():
    f2 = lambda x: fnp.sum(x ** 2)   # noqa: E731
    f3 = lambda x: fnp.sum(x ** 3)   # noqa: E731
    x = np.array([1.0, 2.0])
    np.testing.assert_allclose(ft.grad(f2)(x), 2 * x)
    np.testing.assert_allclose(ft.grad(f3)(x), 3 * x ** 2)


def test_residual_program_does_not_recompute_the_forward():
    executor.clear_cache()
    w = np.array([1.0, 2.0, 3.0])
    f = lambda x: fnp.sum(fnp.sin(x) * fnp.exp(x) * w)      # noqa: E731
    ft.grad(f)(np.ones(3))            # a new structure: interpreted equation by equation
    assert not executor.cached("vjp")
    ft.grad(f)(np.ones(3))            # it repeats: its programs are derived
    (derived,) = executor.cached("vjp")
    names = [e.primitive.name for e in derived.residual.jaxpr.eqns]
    assert "sin" not in names and "exp" not in names and "cos" in names
    ft.check_jaxpr(derived.residual.jaxpr)
    ft.check_jaxpr(derived.backward.jaxpr)


def test_composes_with_outer_transformations():
    f = lambda x: fnp.sum(fnp.tanh(x) ** 3)   # noqa: E731
    x = np.linspace(-1, 1, 4)
    h = ft.hessian(f)(x)
    hv = ft.jvp(ft.grad(f), (x,), (np.ones(4),))[1]
    np.testing.assert_allclose(hv, h @ np.ones(4), rtol=1e-10)
    xs = x[:, None] * np.ones((4, 2))
    per = ft.vmap(ft.grad(lambda v: fnp.sum(fnp.tanh(v) ** 3)))(xs)
    t = np.tanh(xs)
    np.testing.assert_allclose(per, 3 * t ** 2 * (1 - t ** 2), rtol=1e-12)
    g3 = ft.grad(ft.grad(ft.grad(fnp.sin)))(np.float64(0.3))
    assert np.isclose(g3, -np.cos(0.3))


def test_integer_inputs_get_zero_cotangents_from_vjp():
    out, vjp = ft.vjp(lambda x, n: x * n, np.float64(2.0), np.int32(3))
    gx, gn = vjp(np.float64(1.0))
    assert gx == 3.0 and gn == 0


def test_structure_change_recomputes_values_that_were_not_kept():
    """The tape holds strongly only what the last derivation read; when the structure
    changes, values it no longer has are recomputed, never read stale or missing."""
    def f(x):
        y = fnp.sin(x)
        z = fnp.exp(y)
        return fnp.sum(z) if x[0] > 0 else fnp.sum(y * y * z)
    g = ft.grad(f)
    for sign in (1, -1, 1, -1, -1, 1):
        x = sign * np.array([0.5, 0.25, 1.0])
        s, c = np.sin(x), np.cos(x)
        want = np.exp(s) * c if sign > 0 else (2 * s + s * s) * np.exp(s) * c
        np.testing.assert_allclose(g(x), want, rtol=1e-12)


def test_intermediates_not_needed_by_the_backward_are_freed():
    import gc
    import weakref
    seen = []

    def f(x):
        y = fnp.sin(x)             # not read by the residual program (only cos(x) is)
        seen.append(weakref.ref(y.val))   # the array behind the recorded value
        return fnp.sum(y)
    g = ft.grad(f)
    x = np.ones(1000)
    g(x)
    g(x)                           # the second call knows what the first one read
    gc.collect()
    assert seen[-1]() is None


def test_jvp_of_grad_with_a_closure_over_the_differentiated_value():
    """Forward over reverse lifts the outer jvp out of the recording: tangents of values
    the function closes over must still flow (checked against central differences)."""
    p0 = np.array([0.3, -0.7, 1.1])

    def g_of(s):
        return ft.grad(lambda p: fnp.sum(fnp.sin(p * s) * p))(p0)
    for _ in range(3):                       # first call derives, later calls reuse
        _, t = ft.jvp(g_of, (np.float64(0.8),), (np.float64(1.0),))
        eps = 1e-6
        fd = (g_of(0.8 + eps) - g_of(0.8 - eps)) / (2 * eps)
        np.testing.assert_allclose(t, fd, rtol=1e-6, atol=1e-9)


def test_jvp_of_grad_mixed_traced_and_plain_arguments():
    f = lambda a, b: fnp.sum(fnp.tanh(a * b) * a)   # noqa: E731
    a, b = np.array([0.2, 0.5]), np.array([1.5, -0.4])
    ga = lambda a: ft.grad(f, argnums=(0, 1))(a, b)  # noqa: E731
    (_, _), (ta, tb) = ft.jvp(ga, (a,), (np.ones(2),))
    eps = 1e-6
    fa, fb = [(u - w) / (2 * eps) for u, w in zip(ga(a + eps), ga(a - eps))]
    np.testing.assert_allclose(ta, fa, rtol=1e-6)
    np.testing.assert_allclose(tb, fb, rtol=1e-6)


def test_first_call_interpreted_and_repeated_call_derived_agree():
    """A structure seen once is interpreted equation by equation; when it repeats its
    programs are derived. Both give the same gradients (float64 differences too), for
    repeated operands, constants, integer operands and several outputs."""
    w = np.array([0.5, -1.0, 2.0])

    def f(x, y, k):
        a = fnp.sin(x) * x + fnp.tanh(y * w)
        b = fnp.sort(a * 2.0)[::-1] + fnp.exp(-x) * k
        return fnp.sum(b ** 2) + fnp.max(a * y)
    x, y, k = np.array([0.3, -0.7, 1.1]), np.array([1.5, 0.2, -0.4]), np.int64(3)
    executor.clear_cache()
    first = ft.grad(f, argnums=(0, 1))(x, y, k)
    assert not executor.cached("vjp")
    second = ft.grad(f, argnums=(0, 1))(x, y, k)
    assert len(executor.cached("vjp")) == 1
    for a, b, arg in zip(first, second, (x, y)):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(first[0], fd_grad(lambda v: f(v, y, k), x), rtol=1e-7)
    np.testing.assert_allclose(first[1], fd_grad(lambda v: f(x, v, k), y), rtol=1e-7)
    outs, vjp = ft.vjp(lambda x: (fnp.sin(x), x * x), np.array([1.0, 2.0]))   # new again
    g, = vjp((np.ones(2), np.array([1.0, 0.0])))
    np.testing.assert_allclose(g, np.cos([1.0, 2.0]) + [2.0, 0.0])


def test_a_first_call_vjp_takes_traced_cotangents():
    """jacrev vmaps the vjp over cotangents: the first call then derives its programs."""
    executor.clear_cache()
    J = ft.jacrev(lambda x: fnp.sin(x) * x[::-1])(np.array([0.2, 0.5, 0.9]))
    x = np.array([0.2, 0.5, 0.9])
    want = np.diag(np.cos(x) * x[::-1]) + np.sin(x)[:, None] * np.eye(3)[::-1]
    np.testing.assert_allclose(J, want, rtol=1e-12)
