"""Named axes in one process: vmap(axis_name=) binds a name for the collectives, nested
names, collectives inside jit/grad/control flow under a named vmap, pmap with one
process, and the errors (an unbound name, a pmap axis larger than the local devices)."""
from __future__ import annotations

import numpy as np
import pytest

import functrans as ft
from functrans import lax

X = np.arange(6.0).reshape(3, 2)


def named(f, name="i", **kw):
    return ft.vmap(f, axis_name=name, **kw)


def test_unbound_axis_name_raises_jax_error():
    with pytest.raises(NameError, match="unbound axis name: j"):
        named(lambda v: lax.psum(v, "j"))(X)
    with pytest.raises(NameError, match="unbound axis name: i"):
        lax.psum(X, "i")
    with pytest.raises(NameError, match="unbound axis name: i"):
        ft.jit(lambda v: lax.pmean(v, "i"))(X)


def test_values_not_mapped_along_the_axis_count_each_entry():
    assert (named(lambda v: lax.psum(1.0, "i"))(X) == 3).all()
    np.testing.assert_array_equal(named(lambda v: lax.all_gather(np.float64(2.0), "i"))(X),
                                  np.full((3, 3), 2.0))
    np.testing.assert_array_equal(named(lambda v: lax.axis_index("i"))(X), [0, 1, 2])


def test_nested_names_and_tuples():
    def f(v):
        return lax.psum(v, "i"), lax.psum(v, "j"), lax.psum(v, ("i", "j")), lax.pmax(v, "i")
    a, b, c, d = named(named(f, "j"), "i")(X)
    np.testing.assert_array_equal(a, np.broadcast_to(X.sum(0), X.shape))
    np.testing.assert_array_equal(b, np.broadcast_to(X.sum(1, keepdims=True), X.shape))
    np.testing.assert_array_equal(c, np.full(X.shape, X.sum()))
    np.testing.assert_array_equal(d, np.broadcast_to(X.max(0), X.shape))
    assert named(named(lambda v: lax.axis_index("i") * 10 + lax.axis_index("j"), "j"),
                 "i")(X).tolist() == [[0, 1], [10, 11], [20, 21]]


def test_collectives_inside_jit_grad_and_control_flow_under_vmap():
    want = np.broadcast_to(X.sum(0), X.shape)
    np.testing.assert_array_equal(named(ft.jit(lambda v: lax.psum(v, "i")))(X), want)
    np.testing.assert_array_equal(ft.jit(named(lambda v: lax.psum(v, "i")))(X), want)
    np.testing.assert_array_equal(
        named(lambda v: lax.cond(True, lambda u: lax.psum(u, "i"), lambda u: u, v))(X), want)

    def loss(x):          # sum over entries of mean(x)^2: d/dx = 2 * mean, per entry
        return named(lambda v: (lax.pmean(v, "i") ** 2).sum())(x).sum()
    np.testing.assert_allclose(ft.grad(loss)(X), np.broadcast_to(2 * X.mean(0), X.shape))
    inner = named(lambda v: ft.grad(lambda u: (lax.psum(u, "i") ** 2).sum())(v))(X)
    np.testing.assert_allclose(inner, np.broadcast_to(2 * 3 * X.sum(0), X.shape))


def test_pmap_in_one_process():
    x = X[:1]
    np.testing.assert_array_equal(ft.pmap(lambda v: lax.psum(v, "d"), "d")(x), x)
    np.testing.assert_array_equal(ft.pmap(lambda v: lax.all_gather(v, "d"), "d")(x), x[None])
    np.testing.assert_array_equal(
        ft.pmap(lambda w, v: w * lax.axis_index("d"), "d", in_axes=(None, 0))(2.0, x), [0.0])
    with pytest.raises(ValueError, match="1 local device"):
        ft.pmap(lambda v: v, "d")(X)


def test_shape_rules_name_the_problem():
    with pytest.raises(ft.ShapeError, match="must equal the axis size 3"):
        named(lambda v: lax.psum_scatter(np.ones(2), "i"))(X)
    with pytest.raises(ValueError, match="ppermute: perm"):
        named(lambda v: lax.ppermute(v, "i", [(0, 1), (2, 1)]))(X)


def test_jit_calls_with_no_mapped_argument():
    """Such a call runs as a program on concrete values: a reduction or gather over the
    axis sees an operand every entry holds; a result that varies by entry cannot be made
    there, and says so."""
    c = np.array([1.0, 2.0])
    sums = named(lambda v: ft.jit(lambda u: lax.psum(u, "i"))(c) + 0 * v)(X)
    np.testing.assert_array_equal(sums, np.broadcast_to(3 * c, X.shape))
    gathered = named(lambda v: ft.jit(lambda u: lax.all_gather(u, "i"))(c))(X)
    np.testing.assert_array_equal(gathered, np.broadcast_to(c, (3, 3, 2)))
    with pytest.raises(ft.FunctransError, match="ppermute over axis 'i'"):
        named(lambda v: ft.jit(lambda u: lax.ppermute(u, "i", [(0, 1)]))(c))(X)
