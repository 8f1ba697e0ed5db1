"""ft.lax.cond / switch / while_loop / fori_loop / scan: values against unrolled Python,
derivatives against finite differences (float64), batching against loops, and every
emitted jaxpr type-checked."""
from __future__ import annotations

import numpy as np
import pytest

import functrans as ft
import functrans.numpy as fnp
from functrans import core, lax
from conftest import assert_close, check_traced, fd_grad

pytestmark = pytest.mark.usefixtures("x64")  # float64 references: conftest.x64

F64 = np.float64
rng = np.random.default_rng(0)


def randn(*shape):
    return rng.standard_normal(shape)


def check_grad(f, x, rtol=1e-5, atol=1e-7):
    """ft.grad(f)(x) against finite differences; the grad jaxpr type-checks."""
    assert_close(ft.grad(f)(x), fd_grad(f, x), rtol=rtol, atol=atol)
    check_traced(ft.grad(f), x)


def check_jvp(f, x, rtol=1e-5, atol=1e-7):
    t = randn(*np.shape(x))
    _, tout = ft.jvp(f, (x,), (t,))
    eps = 1e-6
    want = (np.asarray(f(x + eps * t), F64) - np.asarray(f(x - eps * t), F64)) / (2 * eps)
    assert_close(tout, want, rtol=rtol, atol=atol)
    check_traced(lambda v: ft.jvp(f, (v,), (t,)), x)


def check_vmap(f, xs, rtol=1e-10, atol=1e-12):
    """vmap(f) equals the stacked loop; the batched jaxpr type-checks."""
    got = ft.vmap(f)(xs)
    want = [f(x) for x in xs]
    for g, w in zip(ft.tree_leaves(got), zip(*[ft.tree_leaves(w) for w in want])):
        assert_close(g, np.stack(w), rtol=rtol, atol=atol)
    check_traced(ft.vmap(f), xs)


def eqn_names(closed):
    """Names of every primitive in a jaxpr, nested ones included."""
    out = []

    def walk(j):
        for e in j.eqns:
            out.append(e.primitive.name)
            for sub in core._subjaxprs(e.params):
                walk(sub)
    walk(closed.jaxpr)
    return out


# ---------------------------------------------------------------------------
# cond and switch

def _piecewise(x):
    return lax.cond(fnp.sum(x) > 0, lambda v: fnp.sin(v) * v, lambda v: fnp.exp(v) - 2.0, x)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_cond_values_and_derivatives_in_both_branches(sign):
    x = sign * (np.abs(randn(3)) + 0.1)
    want = np.sin(x) * x if sign > 0 else np.exp(x) - 2.0
    assert_close(_piecewise(x), want, rtol=1e-12)
    check_grad(lambda v: fnp.sum(_piecewise(v) ** 2), x)
    check_jvp(_piecewise, x)


def test_cond_jaxpr_is_printed_nested_and_type_checks():
    closed = check_traced(_piecewise, randn(3))
    text = str(closed)
    assert "cond[\n" in text and "branches=(" in text
    assert text.count("{ lambda") == 3          # the program and its two branches
    assert eqn_names(closed).count("cond") == 1


def test_cond_pytrees_several_operands_and_closures():
    w = randn(2)

    def f(p, a, b):
        return lax.cond(p, lambda d, s: {"u": d["x"] * w + s, "v": (s, d["y"])},
                        lambda d, s: {"u": d["x"] - s, "v": (s * 2.0, d["y"] + 1.0)},
                        {"x": a, "y": b}, 3.0)
    a, b = randn(2), randn(4)
    out = f(True, a, b)
    assert_close(out["u"], a * w + 3.0)
    assert_close(out["v"][1], b)
    out = f(False, a, b)
    assert_close(out["u"], a - 3.0)
    assert_close(out["v"][0], 6.0)
    assert_close(out["v"][1], b + 1.0)
    check_grad(lambda v: fnp.sum(f(True, v, b)["u"] ** 2), a)


def test_cond_gradient_flows_to_closed_over_values():
    def f(w, x):
        return lax.cond(x[0] > 0, lambda v: fnp.sum(v * w ** 2), lambda v: fnp.sum(v), x)
    x = np.abs(randn(3))
    check_grad(lambda w: f(w, x), randn(3))
    assert_close(ft.grad(f)(randn(3), -x), np.zeros(3))


def test_cond_predicate_conversion_and_errors():
    assert float(lax.cond(np.int32(3), lambda: 1.0, lambda: 2.0)) == 1.0
    assert float(lax.cond(0.0, lambda: 1.0, lambda: 2.0)) == 2.0
    with pytest.raises(TypeError, match=r"Pred must be a scalar, got f32\[2\]"):
        lax.cond(np.ones(2, np.float32), lambda: 1.0, lambda: 2.0)
    # JAX's sentence, then the types
    with pytest.raises(TypeError, match=r"^cond branches must have equal output types but "
                                        r"they differ: .*identical types.*\(f64\[2\]\) from "
                                        r"false_fun and \(f64\[3\]\) from true_fun"):
        lax.cond(True, lambda: np.zeros(3), lambda: np.zeros(2))
    with pytest.raises(TypeError, match=r"identical types.*\(i32\[\]\) from false_fun.*"
                                        r"\(f32\[\]\) from true_fun"):
        lax.cond(True, lambda: np.float32(1), lambda: np.int32(1))
    with pytest.raises(TypeError, match="identical tree structure"):
        lax.cond(True, lambda: (1.0, 2.0), lambda: [1.0, 2.0])


def test_cond_weak_python_scalars_take_the_other_branch_dtype():
    out = lax.cond(False, lambda v: v * 2, lambda v: 0.0, np.float64(1.5))
    assert out.dtype == np.float64 and float(out) == 0.0


def test_switch_selects_clamps_and_differentiates():
    branches = [lambda v: v * 2.0, lambda v: fnp.sin(v), lambda v: v ** 3]
    x = randn(3)
    for i, want in [(0, x * 2), (1, np.sin(x)), (2, x ** 3), (-4, x * 2), (9, x ** 3)]:
        assert_close(lax.switch(i, branches, x), want, rtol=1e-12)
    check_grad(lambda v: fnp.sum(lax.switch(1, branches, v)), x)
    check_grad(lambda v: fnp.sum(lax.switch(2, branches, v)), x)


def test_vmap_cond_with_batched_predicate_becomes_select():
    xs = randn(6, 3)
    check_vmap(_piecewise, xs)
    closed = ft.make_jaxpr(ft.vmap(_piecewise))(xs)
    assert "cond" not in eqn_names(closed) and "select" in eqn_names(closed)


def test_vmap_cond_with_unbatched_predicate_stays_a_cond():
    f = lambda p, x: lax.cond(p, lambda v: v + 1.0, lambda v: v * v, x)  # noqa: E731
    xs = randn(4, 2)
    out = ft.vmap(f, in_axes=(None, 0))(True, xs)
    assert_close(out, xs + 1.0)
    closed = ft.make_jaxpr(ft.vmap(f, in_axes=(None, 0)))(True, xs)
    core.check_jaxpr(closed.jaxpr)
    assert "cond" in eqn_names(closed)


def test_vmap_switch_with_batched_index():
    branches = [lambda v: v - 1.0, lambda v: v * 10.0, lambda v: -v]
    idx = np.array([0, 1, 2, 5, -1], np.int32)
    xs = randn(5, 2)
    got = ft.vmap(lambda i, x: lax.switch(i, branches, x))(idx, xs)
    want = np.stack([lax.switch(i, branches, x) for i, x in zip(idx, xs)])
    assert_close(got, want)


# ---------------------------------------------------------------------------
# while_loop

def _collatz_like(x):
    """Doubles x until its sum exceeds 50 (a data-dependent iteration count)."""
    return lax.while_loop(lambda c: fnp.sum(c[1]) < 50.0,
                          lambda c: (c[0] + 1, c[1] * 2.0 + 0.5), (0, x))


def _python_collatz_like(x):
    n = 0
    while np.sum(x) < 50.0:
        n, x = n + 1, x * 2.0 + 0.5
    return n, x


def test_while_loop_matches_python_loop():
    for x in [np.array([1.0, 2.0]), np.array([30.0, 30.0]), np.array([0.01, 0.02])]:
        n, v = _collatz_like(x)
        wn, wv = _python_collatz_like(x)
        assert int(n) == wn
        assert_close(v, wv)
    check_traced(_collatz_like, np.array([1.0, 2.0]))


def test_while_loop_forward_mode_jvp_jacfwd_linearize():
    f = lambda x: _collatz_like(x)[1]  # noqa: E731
    x = np.array([1.0, 2.0])
    check_jvp(f, x)
    # the iteration count is locally constant, so the Jacobian is 2**n * I
    n = _python_collatz_like(x)[0]
    assert_close(ft.jacfwd(f)(x), 2.0 ** n * np.eye(2))
    y, f_jvp = ft.linearize(f, x)
    assert_close(f_jvp(np.array([1.0, -1.0])), 2.0 ** n * np.array([1.0, -1.0]))


def test_while_loop_reverse_mode_raises_the_clear_error():
    f = lambda x: fnp.sum(_collatz_like(x)[1])  # noqa: E731
    with pytest.raises(ft.FunctransError,
                       match=r"Reverse-mode differentiation does not work for "
                             r"lax\.while_loop.*ft\.lax\.scan.*max_iters=N"):
        ft.grad(f)(np.array([1.0, 2.0]))
    with pytest.raises(ft.FunctransError, match="Reverse-mode"):
        ft.jacrev(lambda x: _collatz_like(x)[1])(np.array([1.0, 2.0]))
    with pytest.raises(ValueError, match="Reverse-mode"):       # JAX's type
        ft.grad(f)(np.array([1.0, 2.0]))


@pytest.mark.usefixtures("x32")
def test_while_loop_errors_name_the_types():
    with pytest.raises(TypeError, match=r"cond_fun must return a boolean scalar, but got "
                                        r"output type\(s\) \[ShapedArray\(float32\[2\]\)\]\.$"):
        lax.while_loop(lambda c: c, lambda c: c, np.ones(2, np.float32))
    with pytest.raises(TypeError, match=r"cond_fun must return a boolean scalar, but got "
                                        r"pytree \(\*, \*\)\.$"):
        lax.while_loop(lambda c: (True, True), lambda c: c, 1.0)
    with pytest.raises(TypeError, match=r"The input carry c has type float32\[2\] but the "
                                        r"corresponding output carry component has type "
                                        r"float32\[3\], so the shapes do not match"):
        lax.while_loop(lambda c: False, lambda c: fnp.ones(3), np.ones(2, np.float32))
    with pytest.raises(TypeError, match="tree structure"):
        lax.while_loop(lambda c: False, lambda c: [c[0]], (1.0,))
    with pytest.raises(TypeError, match="max_iters"):
        lax.while_loop(lambda c: False, lambda c: c, 1.0, max_iters=2.5)


def test_while_loop_weak_init_takes_the_body_dtype():
    out = lax.while_loop(lambda c: c < 5.0, lambda c: c + np.float64(1.0), 0.0)
    assert out.dtype == np.float64 and float(out) == 5.0


def test_vmap_while_loop_with_batched_predicate_runs_each_example_to_its_end():
    xs = np.array([[1.0, 2.0], [30.0, 30.0], [0.01, 0.02], [100.0, 0.0]])
    check_vmap(_collatz_like, xs)


def test_vmap_while_loop_with_unbatched_predicate():
    f = lambda x: lax.fori_loop(0, 4, lambda i, c: c * x + 1.0, x * 0.0)  # noqa: E731
    g = lambda x, n: lax.while_loop(  # noqa: E731
        lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] * x + 1.0), (0, x * 0.0))[1]
    xs = randn(3, 2)
    assert_close(ft.vmap(g, in_axes=(0, None))(xs, 4), ft.vmap(f)(xs))
    closed = ft.make_jaxpr(ft.vmap(g, in_axes=(0, None)))(xs, 4)
    core.check_jaxpr(closed.jaxpr)
    assert "select" not in eqn_names(closed)


# while_loop with max_iters: the functrans extension


def _bounded(x, max_iters=50):
    return lax.while_loop(lambda c: fnp.sum(c) < 10.0, lambda c: c * 1.5 + fnp.sin(c),
                          x, max_iters=max_iters)


def _python_bounded(x, max_iters=50):
    for _ in range(max_iters):
        if np.sum(x) >= 10.0:
            break
        x = x * 1.5 + np.sin(x)
    return x


def test_bounded_while_values_and_truncation():
    x = np.array([0.5, 1.0])
    assert_close(_bounded(x), _python_bounded(x))
    assert_close(_bounded(x, 2), _python_bounded(x, 2))
    assert_close(_bounded(x, 0), x)


def test_bounded_while_is_reverse_differentiable():
    x = np.array([0.5, 1.0])
    for m in (50, 2):
        check_grad(lambda v: fnp.sum(_bounded(v, m) ** 2), x)
    # the gradient is that of the unrolled loop with the same (locally constant) count
    grad_bounded = ft.grad(lambda v: fnp.sum(_bounded(v)))(x)
    k, v = 0, x
    while np.sum(v) < 10.0:
        k, v = k + 1, v * 1.5 + np.sin(v)
    unrolled = ft.grad(lambda v: fnp.sum(lax.fori_loop(0, k, lambda i, c: c * 1.5 + fnp.sin(c),
                                                        v)))(x)
    assert_close(grad_bounded, unrolled, rtol=1e-12)
    assert "scan" in eqn_names(ft.make_jaxpr(ft.grad(lambda v: fnp.sum(_bounded(v))))(x))


def test_bounded_while_under_vmap_of_grad():
    xs = np.array([[0.5, 1.0], [3.0, 4.0], [0.1, 0.1]])
    g = ft.grad(lambda v: fnp.sum(_bounded(v) ** 2))
    check_vmap(g, xs, rtol=1e-9, atol=1e-10)


# ---------------------------------------------------------------------------
# fori_loop

def _power_series(x):
    return lax.fori_loop(1, 6, lambda i, c: c * x + fnp.sin(x * i), x)


def _python_power_series(x):
    c = x
    for i in range(1, 6):
        c = c * x + np.sin(x * i)
    return c


def test_fori_loop_static_bounds_is_a_scan_and_reverse_differentiable():
    x = randn(3)
    assert_close(_power_series(x), _python_power_series(x), rtol=1e-12)
    closed = check_traced(_power_series, x)
    assert "scan" in eqn_names(closed) and "while" not in eqn_names(closed)
    check_grad(lambda v: fnp.sum(_power_series(v)), x)
    check_jvp(_power_series, x)


def test_fori_loop_traced_bounds_is_a_while_loop():
    f = lambda x, n: lax.fori_loop(0, n, lambda i, c: c * x + i, x)  # noqa: E731
    closed = ft.make_jaxpr(f)(np.float64(1.5), 4)
    core.check_jaxpr(closed.jaxpr)
    assert "while" in eqn_names(closed)
    assert_close(closed(np.float64(1.5), np.int32(4))[0], f(np.float64(1.5), 4))
    # forward mode through the while loop works when the bounds are traced inside a jit-like
    # trace; grad raises
    jv = ft.make_jaxpr(lambda x, n: ft.jvp(lambda v: f(v, n), (x,), (np.float64(1.0),)))
    closed = jv(np.float64(1.5), 4)
    core.check_jaxpr(closed.jaxpr)
    primal, tangent = closed(np.float64(1.5), np.int32(4))
    assert_close(tangent, fd_grad(lambda v: f(v, 4), np.float64(1.5)), rtol=1e-6)
    with pytest.raises(ft.FunctransError, match="Reverse-mode"):
        ft.make_jaxpr(ft.grad(f))(np.float64(1.5), 4)


def test_fori_loop_empty_range_and_pytree_carry():
    assert float(lax.fori_loop(5, 2, lambda i, c: c + 1.0, 0.0)) == 0.0
    out = lax.fori_loop(0, 3, lambda i, c: (c[0] + i, c[1] * 2.0), (0, np.float64(1.0)))
    assert int(out[0]) == 3 and float(out[1]) == 8.0


# ---------------------------------------------------------------------------
# scan

def _rnn(params, xs, h0):
    w, u = params

    def cell(h, x):
        h = fnp.tanh(h @ w + x @ u)
        return h, fnp.sum(h * h)
    return lax.scan(cell, h0, xs)


def _python_rnn(params, xs, h0):
    w, u = params
    h, ys = h0, []
    for x in xs:
        h = np.tanh(h @ w + x @ u)
        ys.append(np.sum(h * h))
    return h, np.stack(ys)


def test_scan_matches_python_loop():
    params = (randn(4, 4) * 0.5, randn(3, 4))
    xs, h0 = randn(6, 3), randn(4)
    h, ys = _rnn(params, xs, h0)
    wh, wys = _python_rnn(params, xs, h0)
    assert_close(h, wh, rtol=1e-12)
    assert_close(ys, wys, rtol=1e-12)
    text = str(check_traced(lambda p, x, h: _rnn(p, x, h), params, xs, h0))
    assert "scan[\n" in text and "length=6" in text


def test_scan_gradients_match_finite_differences():
    w, u = randn(4, 4) * 0.5, randn(3, 4)
    xs, h0 = randn(5, 3), randn(4)

    def loss(w, u, xs, h0):
        h, ys = _rnn((w, u), xs, h0)
        return fnp.sum(h) + fnp.sum(ys)
    check_grad(lambda v: loss(v, u, xs, h0), w)
    check_grad(lambda v: loss(w, v, xs, h0), u)
    check_grad(lambda v: loss(w, u, v, h0), xs)
    check_grad(lambda v: loss(w, u, xs, v), h0)
    check_jvp(lambda v: _rnn((v, u), xs, h0)[1], w)


def test_scan_gradient_equals_unrolled_python_gradient():
    w, u = randn(4, 4) * 0.5, randn(3, 4)
    xs, h0 = randn(5, 3), randn(4)

    def unrolled(w):
        h, total = h0, 0.0
        for x in xs:
            h = fnp.tanh(h @ w + x @ u)
            total = total + fnp.sum(h * h)
        return fnp.sum(h) + total

    def scanned(w):
        h, ys = _rnn((w, u), xs, h0)
        return fnp.sum(h) + fnp.sum(ys)
    assert_close(ft.grad(scanned)(w), ft.grad(unrolled)(w), rtol=1e-12, atol=1e-14)


def test_scan_reverse_pytrees_length_and_none():
    xs = {"a": randn(4, 2), "b": randn(4)}

    def f(c, x):
        c = (c[0] + x["a"] * x["b"], c[1] * 2.0)
        return c, {"s": fnp.sum(c[0]), "t": None}
    (c0, c1), ys = lax.scan(f, (np.zeros(2), np.float64(1.0)), xs, reverse=True)
    acc, want = np.zeros(2), []
    for i in reversed(range(4)):
        acc = acc + xs["a"][i] * xs["b"][i]
        want.append(np.sum(acc))
    assert_close(c0, acc)
    assert float(c1) == 16.0
    assert_close(ys["s"], np.array(want[::-1]))
    assert ys["t"] is None
    c, ys = lax.scan(lambda c, _: (c + 1, c), 0, None, length=3)
    assert int(c) == 3 and ys.tolist() == [0, 1, 2]
    check_grad(lambda v: fnp.sum(lax.scan(lambda c, x: (fnp.sin(c * x), c), 1.0, v,
                                          reverse=True)[1]), randn(5))


def test_scan_errors_name_the_types():
    with pytest.raises(TypeError, match=r"The input carry c has type float32\[2\] but the "
                                        r"corresponding output carry component has type "
                                        r"float32\[\], so the shapes do not match"):
        lax.scan(lambda c, x: (fnp.sum(c), x), np.ones(2, np.float32), np.ones(3, np.float32))
    with pytest.raises(TypeError, match=r"  \* the input carry component c\[0\] has type "
                                        r"float32\[\] but the corresponding output carry "
                                        r"component has type float64\[\], so the dtypes do "
                                        r"not match;\n  \* the input carry component c\[1\]"):
        lax.scan(lambda c, x: ((c[0] + x, c[1] + x), x), (np.float32(0), np.float32(0)),
                 np.ones(3, np.float64))
    with pytest.raises(TypeError, match=r"^scan body output must be a pair, got float32\[\]\.$"):
        lax.scan(lambda c, x: np.float32(0.0), 0, np.ones(3))
    with pytest.raises(ValueError, match=r"^`unroll` must be a `bool` or a non-negative `int`"):
        lax.scan(lambda c, x: (c, x), 0.0, np.ones(3), unroll=-1)
    for call in (lambda: lax.scan(42, 0, np.ones(2)), lambda: lax.cond(True, 1, 2),
                 lambda: lax.fori_loop(0, 1, 42, 0), lambda: lax.while_loop(1, 2, 0),
                 lambda: lax.switch(0, [42]), lambda: lax.associative_scan(42, np.ones(2))):
        with pytest.raises(TypeError, match=r"^lax\.\w+: .* should be .*callable"):
            call()
    with pytest.raises(TypeError, match=r"The input carry x is a <class 'dict'> with 1 child but "
                                        r"the corresponding component of the carry output is a "
                                        r"<class 'dict'> with 2 children"):
        lax.scan(lambda x, _: ({"a": x["a"], "b": x["a"]}, None), {"a": np.int32(0)}, None,
                 length=1)
    with pytest.raises(TypeError, match=r"with pytree metadata \('t',\) but .* with pytree "
                                        r"metadata \('T',\)"):
        lax.while_loop(lambda c: False, lambda c: {"T": c["t"]}, {"t": np.ones(1)})
    with pytest.raises(TypeError, match="^cond predicate is None$"):
        lax.cond(None, lambda x: x, lambda x: x, 1.0)
    with pytest.raises(ValueError, match=r"^scan got values with different leading axis "
                                         r"sizes: 3, 4 "):
        lax.scan(lambda c, x: (c, x), 0.0, (np.ones(3), np.ones(4)))
    with pytest.raises(ValueError, match=r"^scan got `length` argument of 5 which disagrees "
                                         r"with leading axis sizes \[3\]\.$"):
        lax.scan(lambda c, x: (c, x), 0.0, np.ones(3), length=5)
    with pytest.raises(TypeError, match=r"^scan body function carry input and carry output "
                                        r"must have equal types, but they differ:\n\n"):
        lax.scan(lambda c, x: (c + 1.0, x), np.int32(0), np.ones(3, np.float32))
    with pytest.raises(TypeError, match=r"^while_loop body function carry input and carry "
                                        r"output must have equal types, but they differ:\n\n"):
        lax.while_loop(lambda c: c < 3, lambda c: c + 1.0, np.int32(0))
    with pytest.raises(TypeError, match=r"^switch branches must have equal output types"):
        lax.switch(0, [lambda: np.float32(1), lambda: np.int32(1)])
    with pytest.raises(ValueError, match="no leading axis"):
        lax.scan(lambda c, x: (c, x), 0.0, np.float32(1))
    with pytest.raises(TypeError, match="pair"):
        lax.scan(lambda c, x: c, 0.0, np.ones(3))


def test_scan_shape_rule_rejects_bad_operands():
    closed = ft.make_jaxpr(lambda c, xs: lax.scan(lambda c, x: (c + x, c), c, xs))(
        np.float32(0), np.ones(3, np.float32))
    eqn = closed.jaxpr.eqns[0]
    with pytest.raises(TypeError, match=r"xs\[0\] of type f32\[4\].*scan length 3"):
        eqn.primitive.abstract_eval(core.ShapedArray((), np.float32),
                                    core.ShapedArray((4,), np.float32), **eqn.params)


@pytest.mark.parametrize("axes", [(0, 0, None), (None, 0, None), (None, None, 0), (0, 1, 0)])
def test_vmap_scan_against_loop(axes):
    w, u = randn(4, 4) * 0.5, randn(3, 4)
    ws, xs, h0s = randn(3, 4, 4) * 0.5, randn(3, 5, 3), randn(3, 4)
    args = [ws if axes[0] == 0 else w, xs if axes[1] == 0 else np.moveaxis(xs, 0, 1),
            h0s if axes[2] == 0 else h0s[0]]
    if axes[1] is None:
        args[1] = xs[0]
    f = lambda w, x, h: _rnn((w, u), x, h)  # noqa: E731
    got = ft.vmap(f, in_axes=axes)(*args)
    for b in range(3):
        pick = [a if d is None else np.take(a, b, axis=d) for a, d in zip(args, axes)]
        want = f(*pick)
        assert_close(got[0][b], want[0], rtol=1e-12)
        assert_close(got[1][b], want[1], rtol=1e-12)
    core.check_jaxpr(ft.make_jaxpr(ft.vmap(f, in_axes=axes))(*args).jaxpr)


def test_scan_transpose_identity():
    """<u, J v> = <J^T u, v> for a scan that is linear in its carry and xs."""
    a = randn(3, 3)
    f = lambda c, xs: lax.scan(lambda c, x: (c @ a + x, c * 2.0), c, xs)  # noqa: E731
    c, xs = randn(3), randn(4, 3)
    vc, vx = randn(3), randn(4, 3)
    uc, uy = randn(3), randn(4, 3)
    _, (jc, jy) = ft.jvp(f, (c, xs), (vc, vx))
    _, pullback = ft.vjp(f, c, xs)
    tc, tx = pullback((uc, uy))
    lhs = np.sum(uc * jc) + np.sum(uy * jy)
    rhs = np.sum(tc * vc) + np.sum(tx * vx)
    assert abs(lhs - rhs) < 1e-10 * max(1.0, abs(lhs))


# ---------------------------------------------------------------------------
# nested combinations

def test_grad_of_scan_of_cond():
    def f(x):
        def step(c, xi):
            c = lax.cond(xi > 0, lambda c: c * fnp.sin(xi), lambda c: c + xi ** 2, c)
            return c, c * xi
        c, ys = lax.scan(step, x[0], x)
        return c + fnp.sum(ys)
    check_grad(f, randn(6))


def test_vmap_of_grad_of_scan_of_cond_with_a_per_example_predicate():
    def loss(w, xs):
        def step(c, x):
            c = lax.cond(fnp.sum(x) > 0, lambda v: fnp.tanh(v * w + x), lambda v: v * x, c)
            return c, fnp.sum(c)
        return fnp.sum(lax.scan(step, fnp.zeros(2, np.float64), xs)[1])
    w, xs = randn(2), randn(5, 4, 2)          # each example takes its own branches
    got = ft.vmap(ft.grad(loss), in_axes=(None, 0))(w, xs)
    assert_close(got, np.stack([ft.grad(loss)(w, x) for x in xs]), rtol=1e-10, atol=1e-12)
    check_grad(lambda v: loss(v, xs[0]), w)
    check_traced(ft.vmap(ft.grad(loss), in_axes=(None, 0)), w, xs)


def test_grad_of_vmap_of_bounded_while_with_batched_predicate():
    xs = np.array([[0.5, 1.0], [3.0, 4.0], [0.1, 0.1]])
    f = lambda x: fnp.sum(ft.vmap(_bounded)(x) ** 2)  # noqa: E731
    check_grad(f, xs)
    per = [ft.grad(lambda v: fnp.sum(_bounded(v) ** 2))(x) for x in xs]
    assert_close(ft.grad(f)(xs), np.stack(per), rtol=1e-10, atol=1e-12)


def test_vmap_of_while_loop_inside_scan_and_cond_inside_while():
    def f(x):
        def step(c, xi):
            n = lax.while_loop(lambda k: k[1] < xi, lambda k: (k[0] + 1, k[1] * 2.0 + 0.1),
                               (0, c))[0]
            return c + 1.0, n
        return lax.scan(step, x, np.array([1.0, 5.0, 100.0]))[1]
    check_vmap(f, np.array([0.1, 1.0, 3.0]))

    def g(x):
        return lax.while_loop(lambda c: c < 10.0,
                              lambda c: lax.cond(c > 1.0, lambda v: v * 2.0,
                                                 lambda v: v + 0.5, c), x)
    check_vmap(g, np.array([0.1, 2.0, 7.0, 11.0]))
    check_jvp(g, np.float64(0.3))


def test_jvp_of_fori_loop_and_of_scan_of_while():
    check_jvp(lambda x: lax.fori_loop(0, 4, lambda i, c: fnp.sin(c) * x, x), randn(3))

    def h(x):
        return lax.scan(lambda c, xi: (lax.while_loop(lambda v: v < 5.0, lambda v: v * 1.7 + xi,
                                                      c), c), x, np.array([0.1, 0.2]))[0]
    check_jvp(h, np.float64(0.4))


def test_vmap_of_grad_of_scan_and_hessian_through_scan():
    def f(x):
        c, _ = lax.scan(lambda c, xi: (c * fnp.sin(xi) + xi ** 2, None), 1.0, x)
        return c
    xs = randn(4, 5)
    check_vmap(ft.grad(f), xs, rtol=1e-10, atol=1e-12)
    x = randn(4)
    h = ft.hessian(f)(x)
    want = np.stack([fd_grad(lambda v: ft.grad(f)(v)[i], x) for i in range(4)])
    assert_close(h, want, rtol=1e-5, atol=1e-6)
    assert_close(h, h.T, rtol=1e-10, atol=1e-12)
    check_traced(ft.hessian(f), x)
    # reverse over reverse
    g2 = ft.grad(lambda v: ft.grad(f)(v)[1])(x)
    assert_close(g2, want[1], rtol=1e-5, atol=1e-6)


def test_grad_of_grad_through_cond_and_bounded_while():
    f = lambda x: lax.cond(x > 0, lambda v: v ** 3, lambda v: -v ** 2, x)  # noqa: E731
    assert_close(ft.grad(ft.grad(f))(np.float64(2.0)), 12.0)
    assert_close(ft.grad(ft.grad(f))(np.float64(-2.0)), -2.0)

    def g(x):
        return lax.while_loop(lambda c: c < 100.0, lambda c: c * x, x, max_iters=10)
    x = np.float64(3.0)      # 3 -> 9 -> 27 -> 81 -> 243: x**5 after 4 iterations
    assert_close(g(x), 243.0)
    assert_close(ft.grad(g)(x), 5 * 3.0 ** 4)
    assert_close(ft.grad(ft.grad(g))(x), 20 * 3.0 ** 3)


def test_linearize_through_scan_reuses_residuals():
    w = randn(3, 3) * 0.5
    f = lambda x: lax.scan(lambda c, xi: (fnp.tanh(c @ w + xi), c), x[0], x)[0]  # noqa: E731
    x, t = randn(4, 3), randn(4, 3)
    y, f_jvp = ft.linearize(f, x)
    assert_close(f_jvp(t), ft.jvp(f, (x,), (t,))[1], rtol=1e-12)
    assert "tanh" not in eqn_names(core.ClosedJaxpr(f_jvp.jaxpr, []))


# ---------------------------------------------------------------------------
# every transformation of a corpus of control-flow programs type-checks

CORPUS = {
    "cond": (lambda x: lax.cond(x[0] > 0, fnp.sin, fnp.cos, x), lambda: randn(3)),
    "switch": (lambda x: lax.switch(1, [fnp.sin, fnp.cos, fnp.tanh], x), lambda: randn(3)),
    "scan": (lambda x: lax.scan(lambda c, xi: (c * xi + 1.0, fnp.sin(c)), 1.0, x)[1],
             lambda: randn(4)),
    "fori": (lambda x: lax.fori_loop(0, 3, lambda i, c: c * fnp.cos(c), x), lambda: randn(3)),
    "bounded_while": (lambda x: lax.while_loop(lambda c: fnp.sum(c) < 5.0, lambda c: c * 1.3,
                                               x, max_iters=20), lambda: np.abs(randn(3)) + 0.1),
}


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_corpus_jaxprs_type_check_under_every_transformation(name):
    f, make = CORPUS[name]
    x = make()
    check_traced(f, x)
    t = np.ones_like(x)
    check_traced(lambda v: ft.jvp(f, (v,), (t,)), x)
    check_traced(ft.grad(lambda v: fnp.sum(f(v))), x)
    check_traced(ft.vmap(f), np.stack([x, x * 0.5, -x]))
    check_traced(ft.vmap(ft.grad(lambda v: fnp.sum(f(v)))), np.stack([x, x * 0.5]))
    check_traced(ft.jacfwd(f), x)
    check_traced(ft.jacrev(f), x)
    assert_close(ft.jacfwd(f)(x), ft.jacrev(f)(x), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_corpus_under_jit(name):
    jit = getattr(ft, "jit", None)
    if jit is None:
        pytest.skip("ft.jit is not available yet")
    f, make = CORPUS[name]
    x = make()
    assert_close(jit(f)(x), f(x), rtol=1e-12)
    g = ft.grad(lambda v: fnp.sum(f(v)))
    assert_close(jit(g)(x), g(x), rtol=1e-12)
    xs = np.stack([x, x * 0.5])
    assert_close(jit(ft.vmap(f))(xs), ft.vmap(f)(xs), rtol=1e-12)


def test_values_passed_through_unchanged_stay_unbatched_under_vmap():
    """JAX's forwarding: an operand every cond branch returns as it is, a while carry the
    body returns unchanged and a scan carry likewise leave the construct as they came in,
    so a batched predicate does not batch them (out_axes=None works)."""
    def f(x, y):
        return lax.cond(x < 3, lambda x, y: (x * 2, y), lambda x, y: (x * 3, y), x, y)
    x2, y2 = ft.vmap(f, in_axes=(0, None), out_axes=(0, None))(np.arange(5), np.float32(3))
    assert x2.tolist() == [0, 2, 4, 9, 12] and float(y2) == 3.0

    def loop(w, x, n):
        _, x, w = lax.while_loop(lambda v: v[0] < n, lambda v: (v[0] + 1, v[1] @ v[2], v[2]),
                                 (0, x, w))
        return w, x
    w, x = ft.vmap(loop, in_axes=(None, 0, 0), out_axes=(None, 0))(
        np.ones((2, 2), np.float32), np.ones((4, 2), np.float32), np.arange(4))
    assert w.shape == (2, 2) and x[:, 0].tolist() == [1.0, 2.0, 4.0, 8.0]

    def g(x, y):
        def h(_, y):
            return lax.scan(lambda c, _: (c, None), y, None, length=1)[0]
        return lax.cond(x < 0, h, h, x, y)
    assert float(ft.vmap(g, (0, None), None)(np.arange(3.0), 3.0)) == 3.0
    # derivatives through a forwarded carry are those of the identity
    carry_out = lambda y: lax.scan(lambda c, _: (c, None), y, None, length=2)[0]  # noqa: E731
    assert float(ft.grad(carry_out)(2.0)) == 1.0
