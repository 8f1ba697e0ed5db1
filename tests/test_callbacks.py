"""Host callbacks and user batching rules (issue 33): ft.pure_callback, ft.debug.callback,
ft.custom_batching.custom_vmap, ft.ensure_compile_time_eval; and the value-dependent
shapes of functrans.numpy (unique, bincount) and lax.reduce/reduce_window's computations
under tracing. The oracle tables compare the values with JAX; these check the behaviour
JAX's values cannot show (when a callback runs, what errors say)."""
from __future__ import annotations

import numpy as np
import pytest

import functrans as ft
import functrans.numpy as fnp

pytestmark = pytest.mark.usefixtures("x64")  # float64 references: conftest.x64

F32 = np.float32


def _sin_host(calls):
    def f(x):
        calls.append(np.shape(x))
        assert isinstance(x, np.ndarray)            # host values, never tracers
        return np.sin(x)
    return f


def test_pure_callback_runs_on_host_values_under_jit():
    calls = []
    x = np.arange(6, dtype=F32).reshape(2, 3)
    f = ft.jit(lambda x: ft.pure_callback(_sin_host(calls), ft.ShapeDtypeStruct((2, 3), F32),
                                          x) * 2)
    np.testing.assert_allclose(f(x), np.sin(x) * 2, rtol=1e-6)
    np.testing.assert_allclose(f(x + 1), np.sin(x + 1) * 2, rtol=1e-6)
    assert calls == [(2, 3), (2, 3)]
    jaxpr = ft.make_jaxpr(lambda x: ft.pure_callback(
        _sin_host([]), ft.ShapeDtypeStruct((2, 3), F32), x))(x)
    assert "pure_callback" in str(jaxpr)


@pytest.mark.parametrize("method,shapes", [("sequential", [(3,), (3,)]),
                                           ("expand_dims", [(2, 3)]),
                                           ("broadcast_all", [(2, 3)])])
def test_pure_callback_vmap_methods(method, shapes):
    seen = []

    def cb(a, b):
        seen.append(np.shape(a))
        return np.sin(a) + b
    x, y = np.arange(6, dtype=F32).reshape(2, 3), np.ones(3, F32)
    g = ft.vmap(lambda x, y: ft.pure_callback(cb, ft.ShapeDtypeStruct((3,), F32), x, y,
                                              vmap_method=method), in_axes=(0, None))
    np.testing.assert_allclose(g(x, y), np.sin(x) + 1, rtol=1e-6)
    assert seen == shapes


def test_pure_callback_errors():
    x = np.ones(3, F32)
    sds = ft.ShapeDtypeStruct((3,), F32)
    with pytest.raises(NotImplementedError, match="vmap_method"):
        ft.vmap(lambda x: ft.pure_callback(np.sin, ft.ShapeDtypeStruct((), F32), x))(x)
    with pytest.raises(ValueError, match="custom_jvp"):
        ft.grad(lambda x: ft.pure_callback(np.sin, ft.ShapeDtypeStruct((), F32), x))(F32(1))
    with pytest.raises(ValueError, match=r"shape \(2,\).*\(3,\)"):
        ft.pure_callback(lambda x: np.ones(2, F32), sds, x)
    with pytest.raises(ValueError, match="float64.*float32"):
        ft.pure_callback(lambda x: np.ones(3), sds, x)
    with pytest.raises(ValueError, match="vmap_method"):
        ft.pure_callback(np.sin, sds, x, vmap_method="vectorized")


def test_pure_callback_with_custom_jvp_is_differentiable():
    @ft.custom_jvp
    def host_sin(x):
        return ft.pure_callback(np.sin, ft.ShapeDtypeStruct((), F32), x)

    @host_sin.defjvp
    def _(primals, tangents):
        (x,), (t,) = primals, tangents
        return host_sin(x), fnp.cos(x) * t
    np.testing.assert_allclose(ft.grad(host_sin)(F32(0.5)), np.cos(0.5), rtol=1e-6)


def test_debug_callback_eager_jit_vmap_grad():
    seen = []

    def record(v):
        seen.append(np.asarray(v).tolist())
    assert ft.debug.callback(record, np.float32(1.0)) is None
    f = ft.jit(lambda x: (ft.debug.callback(record, x), x + 1)[1])
    f(F32(2.0))
    ft.vmap(lambda x: (ft.debug.callback(record, x), x)[1])(np.arange(2, dtype=F32))
    ft.grad(lambda x: (ft.debug.callback(record, x), x * x)[1])(F32(3.0))
    assert seen == [1.0, 2.0, 0.0, 1.0, 3.0]
    # effectful: kept in the program although nothing reads it
    jaxpr = ft.make_jaxpr(lambda x: (ft.debug.callback(record, x), x)[1])(F32(1))
    assert "debug_callback" in str(jaxpr)


def test_ensure_compile_time_eval_gives_concrete_values_under_jit():
    def f(x):
        with ft.ensure_compile_time_eval():
            y = fnp.arange(3) * 2
            k = int(fnp.sum(y))                  # concrete: Python can read it
            z = x * 2                            # a tracer still traces
        return z + k
    assert float(ft.jit(f)(F32(1.5))) == 9.0

    def g(x):
        return x + int(fnp.sum(fnp.sin(np.ones(2, F32)) > 0))
    with pytest.raises(ft.ConcretizationTypeError):
        ft.jit(g)(F32(1.0))                      # without it, the sin is staged


def test_custom_vmap_rule_used_under_vmap_only():
    calls = []

    @ft.custom_batching.custom_vmap
    def f(x, y):
        return fnp.sin(x) + y

    @f.def_vmap
    def rule(axis_size, in_batched, x, y):
        calls.append((axis_size, in_batched))
        return fnp.cos(x) + y, True
    assert np.isclose(f(F32(0.5), F32(1.0)), np.sin(0.5) + 1)
    xs = np.arange(3, dtype=F32)
    np.testing.assert_allclose(ft.vmap(f, in_axes=(0, None))(xs, F32(1.0)), np.cos(xs) + 1,
                               rtol=1e-6)
    np.testing.assert_allclose(ft.jit(ft.vmap(f, in_axes=(0, None)))(xs, F32(1.0)),
                               np.cos(xs) + 1, rtol=1e-6)
    assert calls[0] == (3, [True, False])
    # differentiation goes through the function itself
    assert np.isclose(ft.grad(lambda x: f(x, 1.0))(F32(0.5)), np.cos(0.5))


def test_custom_vmap_errors():
    @ft.custom_batching.custom_vmap
    def f(x):
        return x * 2
    with pytest.raises(TypeError, match="def_vmap"):
        ft.vmap(f)(np.ones(2, F32))

    @f.def_vmap
    def bad(axis_size, in_batched, x):
        return x[0], True                          # unbatched shape, said to be batched
    with pytest.raises(TypeError, match=r"shape"):
        ft.vmap(f)(np.ones((2, 3), F32))


def test_value_dependent_lengths_name_the_static_argument():
    x = np.array([3.0, 1.0, 3.0, 2.0], F32)
    with pytest.raises(ft.ConcretizationTypeError, match="size="):
        ft.jit(fnp.unique)(x)
    with pytest.raises(ft.ConcretizationTypeError, match="length="):
        ft.jit(fnp.bincount)(np.array([0, 2, 2], np.int32))
    np.testing.assert_array_equal(ft.jit(lambda v: fnp.unique(v, size=4, fill_value=0))(x),
                                  [1, 2, 3, 0])
    np.testing.assert_array_equal(ft.vmap(lambda v: fnp.bincount(v, length=3))(
        np.array([[0, 2, 2], [1, 1, 1]], np.int32)), [[1, 0, 2], [0, 3, 0]])
    # under grad (concrete primal values) no size= is needed; unique's values are then
    # constants (JAX's rule), with size= they carry the gradient
    assert np.all(ft.grad(lambda v: fnp.sum(fnp.unique(v)))(x) == 0)
    np.testing.assert_array_equal(ft.grad(lambda v: fnp.sum(fnp.unique(v, size=3)))(x),
                                  [1, 1, 0, 1])


def test_reduce_computations():
    lax = ft.lax
    x = np.arange(12, dtype=F32).reshape(3, 4)
    np.testing.assert_array_equal(lax.reduce(x, F32(0), lambda a, b: a + b, (0,)),
                                  x.sum(0))
    with pytest.raises(NotImplementedError, match="lax.add, lax.mul, lax.max"):
        lax.reduce(x, F32(0), lambda a, b: a - b, (0,))
    with pytest.raises(NotImplementedError, match="lax.add, lax.mul, lax.max"):
        lax.reduce_window(x, F32(0), lambda a, b: a * b + 1, (2, 2), (1, 1), "VALID")
    with pytest.raises(NotImplementedError, match="variadic"):
        lax.reduce((x, x), (F32(0), F32(0)),
                   lambda a, b: (a[0] + b[0], a[1] + b[1]), (0,))
    # max pooling: the gradient goes to the first maximum of each window only
    y = np.array([[1.0, 1.0, 0.0], [1.0, 1.0, 2.0]], F32)
    g = ft.grad(lambda v: fnp.sum(lax.reduce_window(v, -np.inf, lax.max, (2, 2), (1, 1),
                                                    "VALID")))(y)
    np.testing.assert_array_equal(g, [[1, 0, 0], [0, 0, 1]])
