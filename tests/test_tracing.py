"""Tracing: closures, hoisted constants, nesting, static arguments, pytrees, threads, and
the trace stack after errors."""
from __future__ import annotations

import threading
from collections import namedtuple

import numpy as np
import pytest

import functrans as ft
import functrans.numpy as fnp
from functrans import core, tree_util
from conftest import check_traced

F3 = np.arange(3, dtype=np.float32)
Point = namedtuple("Point", ["x", "y"])


# ---------------------------------------------------------------------------
# closures and constants

def test_closure_over_python_scalar_becomes_a_literal():
    scale = 3.0
    closed = check_traced(lambda x: x * scale, F3)
    assert closed.jaxpr.constvars == [] and "3.0:f32[]" in str(closed)


def test_captured_array_is_hoisted_into_a_constant():
    w = np.array([1.0, 2.0, 3.0], np.float32)
    closed = check_traced(lambda x: x * w + w, F3)
    assert len(closed.jaxpr.constvars) == 1 and closed.consts[0] is w   # hoisted once
    assert closed.jaxpr.constvars[0].aval.shape == (3,)
    np.testing.assert_allclose(closed(F3)[0], F3 * w + w)


def test_unused_captured_array_is_dropped():
    w = np.ones(5, np.float32)

    def f(x):
        _ = fnp.sin(w)          # computed on a constant: nothing traced depends on it
        return x + 1.0
    closed = check_traced(f, F3)
    assert closed.consts == [] and len(closed.eqns) == 1


def test_rank0_array_constants_are_inlined_as_literals():
    c = np.float32(2.0)
    closed = check_traced(lambda x: x * c, F3)
    assert closed.jaxpr.constvars == [] and "2.0:f32[]" in str(closed)


def test_jaxpr_is_reusable_with_new_inputs():
    closed = ft.make_jaxpr(lambda x, y: fnp.sin(x) * y)(F3, F3)
    a, b = np.float32([0.5, 1, 2]), np.float32([3, 4, 5])
    np.testing.assert_allclose(closed(a, b)[0], np.sin(a) * b, rtol=1e-6)


def test_nested_make_jaxpr():
    inner_store = {}

    def outer(x):
        inner = ft.make_jaxpr(lambda y: fnp.cos(y) * x)(x)   # closes over the outer tracer
        core.check_jaxpr(inner.jaxpr)
        inner_store["inner"] = str(inner)
        return ft.eval_jaxpr(inner.jaxpr, inner.consts, x)[0] + 1.0
    closed = check_traced(outer, F3)
    assert inner_store["inner"] == """\
{ lambda a:f32[3] ; b:f32[3]. let
    c:f32[3] = cos b
    d:f32[3] = mul c a
  in (d,) }"""
    assert [e.primitive.name for e in closed.eqns] == ["cos", "mul", "add"]


def test_make_jaxpr_of_make_jaxpr_evaluation_is_concrete_outside():
    closed = ft.make_jaxpr(lambda x: x * 2.0)(F3)
    assert closed.in_avals[0].shape == (3,)
    outer = check_traced(lambda x: closed(x)[0] - 1.0, F3)
    assert [e.primitive.name for e in outer.eqns] == ["mul", "sub"]


# ---------------------------------------------------------------------------
# static arguments

def test_static_argnums_controls_python_control_flow():
    def f(x, n, flag):
        for _ in range(n):
            x = fnp.sin(x)
        return x * 2.0 if flag else x
    closed = check_traced(f, F3, 3, True, static_argnums=(1, 2))
    assert [e.primitive.name for e in closed.eqns] == ["sin", "sin", "sin", "mul"]
    assert len(closed.in_avals) == 1
    closed = check_traced(f, F3, 1, False, static_argnums=(1, 2))
    assert [e.primitive.name for e in closed.eqns] == ["sin"]


def test_static_argnums_int_and_negative():
    closed = check_traced(lambda x, s: fnp.reshape(x, s), np.ones(6, np.float32), (2, 3),
                          static_argnums=1)
    assert closed.out_avals[0].shape == (2, 3)
    closed = ft.make_jaxpr(lambda s, x: fnp.reshape(x, s), static_argnums=-2)((3, 2),
                                                                           np.ones(6))
    assert closed.out_avals[0].shape == (3, 2)


def test_static_argument_may_be_unhashable_data_when_only_read():
    closed = ft.make_jaxpr(lambda x, cfg: x * cfg["scale"], static_argnums=1)(
        F3, {"scale": 4.0})
    assert "4.0:f32[]" in str(closed)


# ---------------------------------------------------------------------------
# pytrees

class Pair:
    """A user container registered as a pytree node."""
    def __init__(self, a, b):
        self.a, self.b = a, b


tree_util.register_pytree_node(Pair, lambda p: ((p.a, p.b), None),
                               lambda aux, ch: Pair(*ch))


def test_tree_flatten_unflatten_roundtrip():
    tree = {"w": [F3, (1.0, None)], "p": Point(2, F3), "pair": Pair(F3, {"k": 5})}
    leaves, treedef = tree_util.tree_flatten(tree)
    assert len(leaves) == 6 and treedef.num_leaves == 6
    back = tree_util.tree_unflatten(treedef, leaves)
    assert isinstance(back["p"], Point) and isinstance(back["pair"], Pair)
    assert back["w"][1][1] is None and back["pair"].b["k"] == 5
    assert tree_util.tree_structure(back) == treedef
    # dicts flatten in sorted key order, whatever the insertion order
    assert tree_util.tree_leaves({"b": 1, "a": 2}) == [2, 1]


def test_tree_map_over_several_trees_and_structure_mismatch():
    out = tree_util.tree_map(lambda a, b: a + b, {"x": 1, "y": [2, 3]}, {"x": 10, "y": [20, 30]})
    assert out == {"x": 11, "y": [22, 33]}
    with pytest.raises(ValueError, match="structure"):
        tree_util.tree_map(lambda a, b: a, [1, 2], (1, 2))


def test_pytrees_in_and_out_of_make_jaxpr():
    def f(params, batch):
        w, b = params["w"], params["b"]
        p = batch[0]
        out = Point(x=p.x * w + b, y=None)
        return {"out": out, "list": [p.y, batch[1].a * 2.0], "pair": Pair(w, b)}
    params = {"w": np.float32(2.0) * F3, "b": np.float32(1.0)}
    batch = (Point(F3, F3 + 1), Pair(F3, None))
    closed = check_traced(f, params, batch)
    assert len(closed.in_avals) == 5         # b, w, p.x, p.y, pair.a (None is no leaf)
    assert len(closed.out_avals) == 5


def test_pytree_inputs_to_transformations():
    def loss(p):
        return fnp.sum(p["w"] * p["w"]) + p["pt"].x * p["pt"].y + fnp.sum(p["pair"].a)
    p = {"w": np.float32([1, 2]), "pt": Point(np.float32(3), np.float32(4)),
         "pair": Pair(np.float32([1, 1]), None)}
    g = ft.grad(loss)(p)
    assert isinstance(g["pt"], Point) and isinstance(g["pair"], Pair) and g["pair"].b is None
    np.testing.assert_allclose(g["w"], [2, 4])
    np.testing.assert_allclose([g["pt"].x, g["pt"].y], [4, 3])
    np.testing.assert_allclose(g["pair"].a, [1, 1])


def test_output_may_be_a_bare_python_scalar_or_none():
    closed = ft.make_jaxpr(lambda x: (None, 2.0, x))(F3)
    assert [a.shape for a in closed.out_avals] == [(), (3,)]


# ---------------------------------------------------------------------------
# threads

def test_two_threads_tracing_at_once_do_not_interfere():
    barrier = threading.Barrier(2, timeout=30)
    results, errors = {}, []

    def make_fn(op, n):
        def f(x):
            for i in range(n):
                x = op(x)
                if i == 1:
                    barrier.wait()        # both threads are mid-trace here
            return x
        return f

    def work(name, op, n):
        try:
            before = core.trace_stack_snapshot()
            closed = ft.make_jaxpr(make_fn(op, n))(F3)
            assert core.trace_stack_snapshot() == before
            results[name] = closed
        except Exception as e:  # noqa: BLE001  (reported below)
            errors.append(e)
    threads = [threading.Thread(target=work, args=("sin", fnp.sin, 4)),
               threading.Thread(target=work, args=("exp", fnp.exp, 3))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert [e.primitive.name for e in results["sin"].eqns] == ["sin"] * 4
    assert [e.primitive.name for e in results["exp"].eqns] == ["exp"] * 3


def test_eager_thread_is_not_captured_by_a_tracing_thread():
    barrier = threading.Barrier(2, timeout=30)
    out, errors = {}, []

    def tracer_thread():
        def f(x):
            y = fnp.sin(x)
            barrier.wait()     # the other thread computes eagerly now
            barrier.wait()
            return y
        try:
            out["jaxpr"] = ft.make_jaxpr(f)(F3)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    def eager_thread():
        try:
            barrier.wait()
            out["value"] = fnp.cos(F3) + 1.0
            out["grad"] = ft.grad(lambda x: fnp.sum(fnp.sin(x)))(F3)
            barrier.wait()
        except Exception as e:  # noqa: BLE001
            errors.append(e)
    threads = [threading.Thread(target=tracer_thread), threading.Thread(target=eager_thread)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert type(out["value"]) is ft.Array
    np.testing.assert_allclose(out["value"], np.cos(F3) + 1, rtol=1e-6)
    np.testing.assert_allclose(out["grad"], np.cos(F3), rtol=1e-6)
    assert [e.primitive.name for e in out["jaxpr"].eqns] == ["sin"]


# ---------------------------------------------------------------------------
# the trace stack after a user function raises

class Boom(Exception):
    pass


@pytest.mark.parametrize("transform", [
    lambda f: ft.make_jaxpr(f),
    lambda f: ft.grad(f),
    lambda f: (lambda x: ft.jvp(f, (x,), (x,))),
    lambda f: (lambda x: ft.vjp(f, x)),
    lambda f: (lambda x: ft.vmap(f)(fnp.stack([x, x]))),
    lambda f: ft.jacfwd(f),
    lambda f: ft.jacrev(f),
    lambda f: ft.make_jaxpr(ft.grad(f)),
    lambda f: ft.grad(ft.grad(f)),
    lambda f: (lambda x: ft.vmap(ft.grad(f))(fnp.stack([x, x]))),
], ids=["make_jaxpr", "grad", "jvp", "vjp", "vmap", "jacfwd", "jacrev",
        "make_jaxpr(grad)", "grad(grad)", "vmap(grad)"])
def test_trace_stack_restored_after_user_function_raises(transform):
    def f(x):
        y = fnp.sin(x) * 2.0
        if np.ndim(x) >= 0:
            raise Boom("user error")
        return fnp.sum(y)
    before = core.trace_stack_snapshot()
    with pytest.raises(Boom):
        transform(f)(np.float32(1.0))
    assert core.trace_stack_snapshot() == before
    # and the machinery still works afterwards
    assert float(ft.grad(lambda x: x * x)(3.0)) == 6.0


def test_trace_stack_restored_after_error_deep_inside_nesting():
    def f(x):
        def g(y):
            def h(z):
                raise Boom("deep")
            return ft.grad(h)(y)
        return ft.make_jaxpr(g)(x)
    before = core.trace_stack_snapshot()
    with pytest.raises(Boom):
        ft.vmap(f)(np.float32([1.0, 2.0]))
    assert core.trace_stack_snapshot() == before


def test_escaped_tracer_is_reported():
    leaked = []

    def f(x):
        leaked.append(x)
        return x * 2.0
    ft.make_jaxpr(f)(F3)
    with pytest.raises(ft.UnexpectedTracerError):
        ft.make_jaxpr(lambda y: y + leaked[0])(F3)
    with pytest.raises(ft.UnexpectedTracerError):
        fnp.sin(leaked[0])
