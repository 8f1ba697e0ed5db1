"""Transformations checked against each other on a corpus of small functions (float64):
jvp vs vjp vs finite differences, jacfwd == jacrev, hessians by every nesting, vmap of
grad vs a loop; every emitted jaxpr is type-checked."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st

import functrans as ft
import functrans.numpy as fnp
from conftest import assert_close, check_traced

pytestmark = pytest.mark.usefixtures("x64")  # float64 references: conftest.x64

_R = np.random.default_rng(11)
M = _R.normal(size=(3, 4))
V = _R.normal(size=4)

# name -> (f, input shape); every f maps a float64 array to a float64 array
CORPUS = {
    "elementwise": (lambda x: fnp.sin(x) * x + fnp.cos(x) ** 2, (4,)),
    "matvec tanh": (lambda x: fnp.tanh(M @ x + 1.0), (4,)),
    "softmax": (lambda x: ft.nn.softmax(x), (4,)),
    "log_softmax 2d": (lambda x: ft.nn.log_softmax(x, axis=0), (3, 2)),
    "logsumexp": (lambda x: ft.nn.logsumexp(x), (4,)),
    "rational": (lambda x: x / (1.0 + x ** 2) * fnp.linalg.norm(x), (3,)),
    "prod cumprod": (lambda x: fnp.cumprod(x) + fnp.prod(x), (4,)),
    "indexing": (lambda x: x[::-1] * x[np.array([0, 2, 1, 1])] + x[1] * x[-1], (4,)),
    "2d indexing": (lambda x: x[1:, ::-2] * x[0, None, 0], (3, 4)),
    "where": (lambda x: fnp.where(x > 0, x ** 2, -x), (4,)),
    "outer sum": (lambda x: fnp.sum(fnp.outer(x, x), axis=0) * x, (3,)),
    "einsum 3": (lambda x: fnp.einsum("ij,jk,k->i", M, fnp.outer(x, x), x), (4,)),
    "shape ops": (lambda x: fnp.concatenate([fnp.pad(x, (1, 2)), fnp.stack([x, x ** 2]).ravel()]),
                  (3,)),
    "reshape transpose": (lambda x: fnp.reshape(fnp.transpose(x) @ x, (-1,)), (3, 2)),
    "max mean": (lambda x: fnp.max(x) * fnp.mean(x) + fnp.min(x * x), (4,)),
    "var std": (lambda x: fnp.var(x, axis=1) + fnp.std(x), (2, 3)),
    "pow arrays": (lambda x: fnp.power(1.5 + x ** 2, fnp.sin(x)), (4,)),
    "arctan2 log1p": (lambda x: fnp.arctan2(x, 1.0 + x ** 2) + fnp.log1p(x ** 2), (4,)),
    "softplus gelu": (lambda x: ft.nn.softplus(x) * ft.nn.gelu(x, approximate=False), (4,)),
    "matrix": (lambda x: fnp.sum(fnp.tanh(x @ x.T), axis=1), (2, 3)),
    "take and add_at": (lambda x: fnp.at(x)[np.array([0, 0, 2])].add(x[:3] ** 2) * x[1], (4,)),
    "scalar out": (lambda x: fnp.sum(fnp.exp(-x ** 2)), (3,)),
}
NAMES = sorted(CORPUS)


def _x(name, seed=0):
    shape = CORPUS[name][1]
    x = np.random.default_rng(seed).uniform(-1.5, 1.5, shape)
    if name in ("where", "max mean"):            # away from the kink and from ties
        x = np.where(np.abs(x) < 0.2, 0.5, x) + np.arange(x.size).reshape(shape) * 1e-2
    return x


def fd_jacobian(f, x, eps=1e-6):
    """(out_shape + in_shape) Jacobian by central differences."""
    out = np.asarray(f(x))
    jac = np.zeros(out.shape + x.shape)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        jac[(...,) + i] = (np.asarray(f(x + e)) - np.asarray(f(x - e))) / (2 * eps)
    return jac


@pytest.mark.parametrize("name", NAMES)
@given(seed=st.integers(0, 2 ** 32 - 1))
def test_jvp_vjp_and_finite_differences_agree(name, seed):
    f = CORPUS[name][0]
    x = _x(name, seed)
    rng = np.random.default_rng(seed)
    t = rng.normal(size=x.shape)
    out, jt = ft.jvp(f, (x,), (t,))
    u = rng.normal(size=np.shape(out))
    _, f_vjp = ft.vjp(f, x)
    (ju,) = f_vjp(u)
    fd = (np.asarray(f(x + 1e-6 * t)) - np.asarray(f(x - 1e-6 * t))) / 2e-6
    assert_close(out, f(x), rtol=1e-14, atol=1e-14)
    assert_close(jt, fd, rtol=1e-6, atol=1e-6, err_msg="jvp vs differences")
    lhs, rhs = float(np.sum(u * jt)), float(np.sum(ju * t))
    assert np.isclose(lhs, rhs, rtol=1e-10, atol=1e-10), f"<u, Jt>={lhs} <J^T u, t>={rhs}"
    out2, f_lin = ft.linearize(f, x)
    assert_close(f_lin(t), jt, rtol=1e-12, atol=1e-12, err_msg="linearize vs jvp")


@pytest.mark.parametrize("name", NAMES)
def test_emitted_jaxprs_type_check(name):
    f = CORPUS[name][0]
    x = _x(name)
    t = np.ones_like(x)
    check_traced(f, x, rtol=1e-12, atol=1e-12)
    check_traced(lambda v: ft.jvp(f, (v,), (t,)), x, rtol=1e-12, atol=1e-12)
    u = np.ones(np.shape(f(x)))
    check_traced(lambda v: ft.vjp(f, v)[1](u), x, rtol=1e-12, atol=1e-12)
    check_traced(ft.jacfwd(f), x, rtol=1e-12, atol=1e-12)
    check_traced(ft.jacrev(f), x, rtol=1e-12, atol=1e-12)
    check_traced(ft.vmap(f), np.stack([x, x + 0.1]), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", NAMES)
def test_jacfwd_equals_jacrev_equals_differences(name):
    f = CORPUS[name][0]
    x = _x(name)
    jf, jr = ft.jacfwd(f)(x), ft.jacrev(f)(x)
    assert np.shape(jf) == np.shape(f(x)) + x.shape
    assert_close(jf, jr, rtol=1e-12, atol=1e-12)
    assert_close(jf, fd_jacobian(f, x), rtol=1e-6, atol=1e-6)


def _scalar(name):
    f = CORPUS[name][0]
    w = np.random.default_rng(5).normal(size=np.shape(f(_x(name))))
    return lambda x: fnp.sum(f(x) * w)


HESSIAN_NAMES = [n for n in NAMES if n not in ("where", "max mean", "indexing")]


@pytest.mark.parametrize("name", HESSIAN_NAMES)
def test_hessian_by_every_nesting(name):
    """Seven ways to a Hessian (Autodidax's check) agree, and it is symmetric."""
    s = _scalar(name)
    x = _x(name)
    n = x.size
    eye = np.eye(n).reshape((n,) + x.shape)

    def flat(h):
        return np.asarray(h).reshape(n, n)
    h = flat(ft.hessian(s)(x))
    assert_close(h, h.T, rtol=1e-10, atol=1e-10, err_msg="hessian not symmetric")
    ways = {
        "jacfwd(jacfwd)": ft.jacfwd(ft.jacfwd(s))(x),
        "jacrev(jacrev)": ft.jacrev(ft.jacrev(s))(x),
        "jacrev(jacfwd)": ft.jacrev(ft.jacfwd(s))(x),
        "jacfwd(grad)": ft.jacfwd(ft.grad(s))(x),
        "vmap(jvp(grad))": ft.vmap(lambda t: ft.jvp(ft.grad(s), (x,), (t,))[1])(eye),
        "vmap(grad(jvp))": ft.vmap(lambda t: ft.grad(lambda v: ft.jvp(s, (v,), (t,))[1])(x))(eye),
        "vmap(vjp(grad))": ft.vmap(lambda t: ft.vjp(ft.grad(s), x)[1](t)[0])(eye),
        "loop(grad(grad-dot))": np.stack([ft.grad(lambda v: fnp.sum(ft.grad(s)(v) * e))(x)
                                          for e in eye]),
    }
    for way, hw in ways.items():
        assert_close(flat(hw), h, rtol=1e-9, atol=1e-9, err_msg=way)
    g = ft.grad(s)
    fd = fd_jacobian(lambda v: np.asarray(g(v)), x).reshape(n, n)
    assert_close(h, fd, rtol=1e-5, atol=1e-6, err_msg="hessian vs differences of grad")


def test_third_order_mixed_modes_agree():
    s = _scalar("elementwise")
    x = _x("elementwise")
    t = np.array([0.3, -0.2, 1.0, 0.5])
    # d^3 s [t, t, t] computed four ways
    a = ft.jvp(lambda v: ft.jvp(lambda w: ft.jvp(s, (w,), (t,))[1], (v,), (t,))[1],
               (x,), (t,))[1]
    b = fnp.sum(ft.grad(lambda v: ft.jvp(lambda w: ft.jvp(s, (w,), (t,))[1], (v,), (t,))[1])(x)
                * t)
    c = fnp.sum(ft.jvp(ft.grad(lambda v: fnp.sum(ft.grad(s)(v) * t)), (x,), (t,))[1] * t)
    d = np.einsum("ijk,i,j,k->", np.asarray(ft.jacfwd(ft.hessian(s))(x)), t, t, t)
    for other in (b, c, d):
        assert_close(other, a, rtol=1e-9, atol=1e-9)


def test_jacobians_with_pytrees_and_argnums():
    def f(x, y):
        return {"p": x * y[0], "q": fnp.sum(fnp.sin(x)) * y}
    x, y = np.array([0.1, 0.2, 0.3]), np.array([1.5, -0.5])
    jf = ft.jacfwd(f, argnums=(0, 1))(x, y)
    jr = ft.jacrev(f, argnums=(0, 1))(x, y)
    for k in ("p", "q"):
        for i in range(2):
            assert_close(jf[k][i], jr[k][i], rtol=1e-12, atol=1e-12)
    assert np.shape(jf["p"][0]) == (3, 3) and np.shape(jf["q"][1]) == (2, 2)
    assert_close(jf["p"][1], np.stack([x, np.zeros(3)], axis=1))
    hx = ft.hessian(lambda a, b: fnp.sum(a ** 2 * b[0]), argnums=0)(x, y)
    assert_close(hx, 2 * y[0] * np.eye(3))


def test_vmap_of_grad_gives_per_example_gradients():
    rng = np.random.default_rng(3)
    w = rng.normal(size=(3,))
    xs, ys = rng.normal(size=(5, 3)), rng.normal(size=5)

    def loss(w, x, y):
        return (fnp.tanh(fnp.dot(x, w)) - y) ** 2
    per_example = ft.vmap(ft.grad(loss), in_axes=(None, 0, 0))(w, xs, ys)
    loop = np.stack([ft.grad(loss)(w, x, y) for x, y in zip(xs, ys)])
    assert_close(per_example, loop, rtol=1e-12, atol=1e-12)
    check_traced(ft.vmap(ft.grad(loss), in_axes=(None, 0, 0)), w, xs, ys)
    # and the gradient of the mean is the mean of the per-example gradients
    mean_grad = ft.grad(lambda w: fnp.mean(ft.vmap(loss, in_axes=(None, 0, 0))(w, xs, ys)))(w)
    assert_close(mean_grad, loop.mean(axis=0), rtol=1e-12, atol=1e-12)


def test_grad_of_vjp_and_vjp_of_grad():
    f = CORPUS["matvec tanh"][0]
    x = _x("matvec tanh")
    u = np.array([0.5, -1.0, 2.0])

    def pullback_dot(v):
        return fnp.sum(ft.vjp(f, v)[1](u)[0] * V)
    g = ft.grad(pullback_dot)(x)
    # <u, J(x) V> differentiated in x: the same as the Hessian of <u, f> applied to V
    h = ft.hessian(lambda v: fnp.sum(f(v) * u))(x)
    assert_close(g, h @ V, rtol=1e-10, atol=1e-10)
    _, f_vjp = ft.vjp(ft.grad(lambda v: fnp.sum(f(v) * u)), x)
    assert_close(f_vjp(V)[0], h @ V, rtol=1e-10, atol=1e-10)
    check_traced(ft.grad(pullback_dot), x, rtol=1e-12, atol=1e-12)


def test_jvp_of_vmap_and_vmap_of_jvp():
    f = CORPUS["softmax"][0]
    xs = np.random.default_rng(4).normal(size=(3, 4))
    ts = np.ones_like(xs)
    a = ft.jvp(ft.vmap(f), (xs,), (ts,))[1]
    b = ft.vmap(lambda x, t: ft.jvp(f, (x,), (t,))[1])(xs, ts)
    assert_close(a, b, rtol=1e-12, atol=1e-12)
    c = ft.vmap(lambda x: ft.jacrev(f)(x))(xs)
    d = ft.jacfwd(ft.vmap(f))(xs)                  # (3,4,3,4), block diagonal
    for i in range(3):
        assert_close(c[i], d[i, :, i, :], rtol=1e-12, atol=1e-12)
