"""Automatic differentiation: known values, the API (argnums, has_aux, pytrees,
value_and_grad, linearize, vjp), JAX's conventions at the edges, the gradient penalty,
and clean gradient programs."""
from __future__ import annotations

import math
from collections import namedtuple

import numpy as np
import pytest

import functrans as ft
import functrans.numpy as fnp
from functrans import core
from conftest import assert_close, check_traced, fd_grad, unused_equations

pytestmark = pytest.mark.usefixtures("x64")  # float64 references: conftest.x64

F32, F64 = np.float32, np.float64


# ---------------------------------------------------------------------------
# known values

def test_third_derivative_of_sin():
    assert float(ft.grad(ft.grad(ft.grad(fnp.sin)))(1.0)) == pytest.approx(-math.cos(1.0),
                                                                         rel=1e-6)
    assert float(ft.grad(ft.grad(ft.grad(fnp.sin)))(np.float64(1.0))) == \
        pytest.approx(-math.cos(1.0), rel=1e-14)


@pytest.mark.parametrize("order, expected", [(1, 3 * 4.0), (2, 6 * 2.0), (3, 6.0), (4, 0.0)])
def test_derivatives_of_a_cubic(order, expected):
    f = lambda x: x ** 3       # noqa: E731
    for _ in range(order):
        f = ft.grad(f)
    assert float(f(2.0)) == pytest.approx(expected)


def test_higher_derivatives_of_exp_and_log():
    f = fnp.exp
    for _ in range(5):
        f = ft.grad(f)
    assert float(f(np.float64(0.7))) == pytest.approx(math.exp(0.7), rel=1e-14)
    g = ft.grad(ft.grad(fnp.log))
    assert float(g(np.float64(2.0))) == pytest.approx(-0.25, rel=1e-14)


def test_hessian_of_a_quadratic_form_is_the_symmetric_matrix():
    a = np.array([[2.0, 1.0, 0.0], [3.0, 4.0, -1.0], [0.5, 0.0, 1.0]])
    x = np.array([0.3, -0.2, 0.9])
    h = ft.hessian(lambda v: v @ a @ v)(x)
    assert_close(h, a + a.T, rtol=1e-14, atol=1e-14)
    s = (a + a.T) / 2
    h = ft.hessian(lambda v: 0.5 * fnp.dot(v, fnp.dot(s, v)))(x)
    assert_close(h, s, rtol=1e-14, atol=1e-14)
    assert np.asarray(h).dtype == F64


def test_gradient_dtype_follows_the_input():
    assert np.asarray(ft.grad(lambda x: fnp.sum(x * x))(np.ones(3, F32))).dtype == F32
    assert np.asarray(ft.grad(lambda x: fnp.sum(x * x))(np.ones(3, F64))).dtype == F64
    g = ft.grad(lambda x: fnp.sum(fnp.astype(x, F64) ** 2))(np.ones(3, F32))
    assert np.asarray(g).dtype == F32
    assert_close(g, [2, 2, 2])
    g = ft.grad(lambda x: fnp.sum(fnp.astype(x, F32) * 3.0))(np.ones(2, F64))
    assert np.asarray(g).dtype == F64
    assert_close(g, [3, 3])


def test_gradient_of_unused_input_is_zero_of_its_shape():
    g = ft.grad(lambda x, y: fnp.sum(x * 2.0), argnums=(0, 1))(np.ones(3, F32),
                                                             np.ones((2, 2), F32))
    assert_close(g[1], np.zeros((2, 2)))
    assert np.asarray(g[1]).dtype == F32
    assert_close(ft.grad(lambda x: 3.0)(np.ones(2)), [0.0, 0.0])


# ---------------------------------------------------------------------------
# grad's API

def f3(x, y, z):
    return fnp.sum(x * y) + fnp.sum(fnp.sin(z) * y)


X, Y, Z = (np.array([1.0, 2.0]), np.array([0.5, -1.0]), np.array([0.3, 0.7]))


@pytest.mark.parametrize("argnums, expected", [
    (0, Y), (1, X + np.sin(Z)), (2, np.cos(Z) * Y), (-1, np.cos(Z) * Y),
    ((0, 2), (Y, np.cos(Z) * Y)), ((2, 0), (np.cos(Z) * Y, Y)), ((1,), (X + np.sin(Z),)),
])
def test_grad_argnums(argnums, expected):
    g = ft.grad(f3, argnums=argnums)(X, Y, Z)
    if isinstance(argnums, tuple):
        assert isinstance(g, tuple) and len(g) == len(argnums)
        for a, b in zip(g, expected):
            assert_close(a, b, rtol=1e-14, atol=1e-14)
    else:
        assert_close(g, expected, rtol=1e-14, atol=1e-14)


def test_value_and_grad_and_has_aux():
    v, g = ft.value_and_grad(f3, argnums=(0, 1))(X, Y, Z)
    assert_close(v, f3(X, Y, Z))
    assert_close(g[0], Y) and assert_close(g[1], X + np.sin(Z))

    def with_aux(x):
        y = fnp.sin(x)
        return fnp.sum(y), {"y": y, "n": 3}
    g, aux = ft.grad(with_aux, has_aux=True)(X)
    assert_close(g, np.cos(X))
    assert_close(aux["y"], np.sin(X)) and aux["n"] == 3
    (v, aux), g = ft.value_and_grad(with_aux, has_aux=True)(X)
    assert_close(v, np.sum(np.sin(X))) and assert_close(g, np.cos(X))
    assert_close(aux["y"], np.sin(X))


def test_has_aux_without_a_pair_is_jaxs_type_error():
    """A has_aux function must return (output, aux): anything else is JAX's TypeError,
    from grad, value_and_grad, vjp, jvp, jacfwd and jacrev alike."""
    pattern = r"expected function with aux output to return a two-element tuple"
    scalar = lambda x: fnp.sum(x)  # noqa: E731
    for call in (lambda: ft.grad(scalar, has_aux=True)(X),
                 lambda: ft.value_and_grad(scalar, has_aux=True)(X),
                 lambda: ft.vjp(scalar, X, has_aux=True),
                 lambda: ft.jvp(scalar, (X,), (X,), has_aux=True),
                 lambda: ft.jacfwd(lambda x: (x, x, x), has_aux=True)(X),
                 lambda: ft.jacrev(lambda x: [x], has_aux=True)(X)):
        with pytest.raises(TypeError, match=pattern):
            call()


def test_grad_of_pytree_arguments():
    Params = namedtuple("Params", ["w", "b"])

    def loss(p, batch):
        x, y = batch["x"], batch["y"]
        pred = fnp.tanh(x @ p.w + p.b[0])
        return fnp.mean((pred - y) ** 2) + 0.1 * fnp.sum(p.b[1] ** 2)
    rng = np.random.default_rng(0)
    p = Params(w=rng.normal(size=(3, 2)), b=[rng.normal(size=2), rng.normal(size=())])
    batch = {"x": rng.normal(size=(4, 3)), "y": rng.normal(size=(4, 2))}
    g = ft.grad(loss)(p, batch)
    assert isinstance(g, Params) and isinstance(g.b, list)
    assert g.w.shape == (3, 2) and np.shape(g.b[1]) == ()
    assert_close(g.w, fd_grad(lambda w: loss(Params(w, p.b), batch), p.w), rtol=1e-6,
                 atol=1e-8)
    assert_close(g.b[0], fd_grad(lambda b0: loss(Params(p.w, [b0, p.b[1]]), batch), p.b[0]),
                 rtol=1e-6, atol=1e-8)
    gb = ft.grad(loss, argnums=1)(p, batch)
    assert set(gb) == {"x", "y"}


def test_grad_with_integer_side_arguments():
    def f(x, n, idx):
        return fnp.sum(x[idx] ** n)
    g = ft.grad(f)(np.array([1.0, 2.0, 3.0]), 2, np.array([0, 2, 2]))
    assert_close(g, [2.0, 0.0, 12.0])


def test_grad_with_python_control_flow_on_concrete_primals():
    def f(x):
        if x > 0:
            return x ** 2
        return -x
    assert float(ft.grad(f)(3.0)) == 6.0 and float(ft.grad(f)(-3.0)) == -1.0


# ---------------------------------------------------------------------------
# jvp, vjp, linearize

def test_jvp_with_pytrees_and_has_aux():
    def f(p):
        return {"a": fnp.sin(p["x"]) * p["y"], "b": p["y"] ** 2}, p["x"] + 1.0
    primals = ({"x": X, "y": Y},)
    tangents = ({"x": np.ones(2), "y": np.zeros(2)},)
    out, t, aux = ft.jvp(f, primals, tangents, has_aux=True)
    assert_close(out["a"], np.sin(X) * Y)
    assert_close(t["a"], np.cos(X) * Y) and assert_close(t["b"], np.zeros(2))
    assert_close(aux, X + 1)


def test_jvp_of_integer_inputs_gives_zero_tangents():
    out, t = ft.jvp(lambda x, n: x * n, (np.array([1.0, 2.0]), np.int32(3)),
                    (np.ones(2), np.int32(0)))
    assert_close(t, [3.0, 3.0])
    out, t = ft.jvp(lambda n: n * 2, (np.array([1, 2], np.int32),),
                    (np.zeros(2, np.int32),))
    assert not np.any(t)


def test_vjp_structure_and_values():
    def f(x, y):
        return {"s": fnp.sin(x) * y, "t": (x * 2.0, y)}
    out, f_vjp = ft.vjp(f, X, Y)
    ct = {"s": np.ones(2), "t": (np.array([1.0, 0.0]), np.array([0.0, 2.0]))}
    gx, gy = f_vjp(ct)
    assert_close(gx, np.cos(X) * Y + [2.0, 0.0])
    assert_close(gy, np.sin(X) + [0.0, 2.0])
    with pytest.raises(TypeError):
        f_vjp(np.ones(2))                 # wrong structure
    out, f_vjp, aux = ft.vjp(lambda x: (fnp.sum(x ** 2), "aux"), X, has_aux=True)
    assert aux == "aux" and len(f_vjp(1.0)) == 1


def test_linearize_matches_jvp_and_is_linear():
    def f(x):
        return fnp.sin(x) * fnp.exp(x) + x ** 3
    x = np.array([0.1, -0.4, 1.3])
    out, f_jvp = ft.linearize(f, x)
    assert_close(out, f(x))
    t1, t2 = np.array([1.0, 0.5, -2.0]), np.array([0.3, 0.0, 1.0])
    assert_close(f_jvp(t1), ft.jvp(f, (x,), (t1,))[1], rtol=1e-14, atol=1e-14)
    assert_close(f_jvp(2.0 * t1 - 3.0 * t2), 2.0 * f_jvp(t1) - 3.0 * f_jvp(t2), rtol=1e-12,
                 atol=1e-12)
    # the linear program has its residuals precomputed: no sin/exp/cos left in it
    core.check_jaxpr(f_jvp.jaxpr)
    names = {e.primitive.name for e in f_jvp.jaxpr.eqns}
    assert names <= {"mul", "add", "neg", "sub"}, names
    assert not unused_equations(f_jvp.jaxpr)


def test_linearize_with_several_inputs_and_outputs():
    def f(x, y):
        return x * y, fnp.sum(fnp.sin(x))
    (a, b), f_jvp = ft.linearize(f, X, Y)
    ta, tb = f_jvp(np.ones(2), np.zeros(2))
    assert_close(ta, Y) and assert_close(tb, np.sum(np.cos(X)))


def test_vjp_of_a_linearized_function_is_its_transpose():
    m = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    out, f_vjp = ft.vjp(lambda v: m @ v, X)
    assert_close(f_vjp(np.array([1.0, 0.0, -1.0]))[0], m.T @ [1.0, 0.0, -1.0])


# ---------------------------------------------------------------------------
# conventions at the edges (JAX's)

@pytest.mark.filterwarnings("ignore::RuntimeWarning")    # inf and nan on purpose
def test_sqrt_at_zero_is_inf():
    assert float(ft.grad(fnp.sqrt)(0.0)) == np.inf
    assert float(ft.grad(lambda x: fnp.power(x, 0.5))(0.0)) == np.inf


def test_abs_at_zero_takes_the_positive_branch_as_jax():
    # JAX differentiates abs by select(x >= 0, t, -t): derivative 1 at 0
    assert float(ft.grad(fnp.abs)(0.0)) == 1.0
    assert float(ft.grad(fnp.abs)(-2.0)) == -1.0
    assert float(ft.grad(ft.grad(fnp.abs))(0.0)) == 0.0


def test_relu_at_zero_is_zero():
    assert float(ft.grad(ft.nn.relu)(0.0)) == 0.0
    assert float(ft.grad(ft.nn.relu)(1.0)) == 1.0


def test_max_min_ties_split_evenly():
    for op in (fnp.maximum, fnp.minimum):
        gx, gy = ft.grad(lambda x, y: op(x, y), argnums=(0, 1))(1.0, 1.0)
        assert (float(gx), float(gy)) == (0.5, 0.5)
        gx, gy = ft.grad(lambda x, y: op(x, y), argnums=(0, 1))(1.0, 2.0)
        assert {float(gx), float(gy)} == {0.0, 1.0}
    assert_close(ft.grad(fnp.max)(np.array([1.0, 3.0, 3.0])), [0.0, 0.5, 0.5])
    assert_close(ft.grad(fnp.min)(np.array([2.0, 2.0, 2.0, 5.0])), [1 / 3, 1 / 3, 1 / 3, 0])
    assert_close(ft.grad(lambda x: fnp.sum(fnp.clip(x, 0.0, 1.0)))(np.array([0.0, 0.5, 1.0])),
                 [0.5, 1.0, 0.5])


@pytest.mark.filterwarnings("ignore::RuntimeWarning")    # inf and nan on purpose
def test_power_with_zero_base():
    dx = ft.grad(lambda x, y: fnp.power(x, y), argnums=0)
    dy = ft.grad(lambda x, y: fnp.power(x, y), argnums=1)
    assert float(dx(0.0, 2.0)) == 0.0
    assert float(dx(0.0, 1.0)) == 1.0
    assert float(dx(0.0, 0.0)) == 0.0          # y == 0: constant 1
    assert float(dy(0.0, 2.0)) == 0.0          # log(0) * 0 taken as 0
    assert float(dy(0.0, 0.0)) == 0.0
    assert float(ft.grad(lambda x: x ** 2)(0.0)) == 0.0
    assert float(ft.grad(lambda x: x ** 0)(0.0)) == 0.0
    assert float(dy(2.0, 3.0)) == pytest.approx(8 * math.log(2))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")    # inf and nan on purpose
def test_where_with_nan_in_the_unselected_branch_and_the_double_where_idiom():
    naive = ft.grad(lambda x: fnp.where(x > 0, fnp.log(x), 0.0))
    assert np.isnan(float(naive(0.0)))          # as JAX: 0 * inf in the unselected branch
    assert float(naive(2.0)) == 0.5

    def safe_log(x):                            # the "double where" idiom
        safe = fnp.where(x > 0, x, 1.0)
        return fnp.where(x > 0, fnp.log(safe), 0.0)
    assert float(ft.grad(safe_log)(0.0)) == 0.0
    assert float(ft.grad(safe_log)(2.0)) == 0.5
    g = ft.grad(lambda x: fnp.sum(safe_log(x)))(np.array([-1.0, 0.0, 4.0]))
    assert_close(g, [0.0, 0.0, 0.25])
    assert np.all(np.isfinite(ft.grad(ft.grad(safe_log))(0.0)))

    def safe_sqrt(x):
        return fnp.where(x > 0, fnp.sqrt(fnp.where(x > 0, x, 1.0)), 0.0)
    assert float(ft.grad(safe_sqrt)(-1.0)) == 0.0
    assert float(ft.grad(safe_sqrt)(4.0)) == 0.25


@pytest.mark.usefixtures("x32")
@pytest.mark.filterwarnings("ignore::RuntimeWarning")    # inf and nan on purpose
def test_where_with_inf_in_the_unselected_branch():
    naive = ft.grad(lambda x: fnp.where(x < 10, x, fnp.exp(x * 100)))
    assert np.isnan(float(naive(1.0)))       # as JAX: exp(100) = inf in f32, times 0

    def guarded(x):                          # double where: the branch never overflows
        return fnp.where(x < 10, x, fnp.exp(fnp.where(x < 10, 0.0, x) * 100))
    assert float(ft.grad(guarded)(1.0)) == 1.0


def test_stop_gradient():
    g = ft.grad(lambda x: fnp.sum(x * ft.stop_gradient(x)))(np.array([1.0, 2.0]))
    assert_close(g, [1.0, 2.0])
    g = ft.grad(lambda x: ft.stop_gradient(x) ** 2 + x)(3.0)
    assert float(g) == 1.0
    tree = ft.stop_gradient({"a": np.ones(2), "b": [1.0]})
    assert set(tree) == {"a", "b"}
    assert float(ft.grad(ft.grad(lambda x: x * ft.stop_gradient(x * x)))(2.0)) == 0.0


def test_large_inputs_keep_gradients_finite():
    x = np.array([-1000.0, 0.0, 1000.0])
    for f in (ft.nn.softplus, ft.nn.sigmoid, ft.nn.log_sigmoid):
        g = ft.grad(lambda v: fnp.sum(f(v)))(x)
        assert np.all(np.isfinite(g)), f
    g = ft.grad(ft.grad(lambda v: ft.nn.softplus(v)))(1000.0)
    assert np.isfinite(float(g))
    h = ft.hessian(ft.nn.logsumexp)(x)
    assert np.all(np.isfinite(h))


# ---------------------------------------------------------------------------
# the gradient penalty (WGAN-GP): grad of a function of a grad

def critic(p, x):
    h = fnp.tanh(x @ p["w1"] + p["b1"])
    return fnp.sum(h @ p["w2"])


def penalized_loss(p, x, lam=10.0):
    loss = fnp.mean(fnp.tanh(x @ p["w1"]) ** 2)
    g = ft.grad(critic, argnums=1)(p, x)          # gradient w.r.t. the input
    return loss + lam * (fnp.linalg.norm(g) - 1.0) ** 2


def _gp_params(rng):
    return {"w1": rng.normal(size=(2, 4)), "b1": rng.normal(size=4),
            "w2": rng.normal(size=(4, 1))}


def test_gradient_penalty_matches_finite_differences():
    rng = np.random.default_rng(0)
    p, x = _gp_params(rng), rng.normal(size=(3, 2))
    g = ft.grad(penalized_loss)(p, x)
    for k in p:
        def along(v, k=k):
            q = dict(p)
            q[k] = v
            return penalized_loss(q, x)
        assert_close(g[k], fd_grad(along, p[k]), rtol=1e-6, atol=1e-7, err_msg=k)


def test_gradient_penalty_program_type_checks_and_evaluates():
    rng = np.random.default_rng(1)
    p, x = _gp_params(rng), rng.normal(size=(3, 2))
    check_traced(ft.grad(penalized_loss), p, x, rtol=1e-10, atol=1e-12)
    check_traced(ft.value_and_grad(penalized_loss, argnums=(0, 1)), p, x, rtol=1e-10,
                 atol=1e-12)


# ---------------------------------------------------------------------------
# clean gradient programs

def _identity_ops(jaxpr):
    bad = []
    for e in jaxpr.eqns:
        n, ins, outs = e.primitive.name, e.invars, e.outvars
        if n == "convert_element_type" and ins[0].aval.dtype == e.params["new_dtype"]:
            bad.append(e)
        elif n in ("reshape", "squeeze", "expand_dims", "broadcast_in_dim") and \
                ins[0].aval.shape == outs[0].aval.shape:
            bad.append(e)
        elif n == "transpose" and tuple(e.params["permutation"]) == tuple(
                range(len(e.params["permutation"]))):
            bad.append(e)
        elif n == "rev" and not e.params["dimensions"]:
            bad.append(e)
    return bad


def _is_zero_literal(a):
    return type(a) is core.Literal and not np.any(np.asarray(a.val))


def _materialized_zeros(jaxpr):
    """Equations that build a zero array that then feeds an add/sub/mul, or that add zero."""
    zeros = {e.outvars[0] for e in jaxpr.eqns
             if e.primitive.name == "broadcast_in_dim" and _is_zero_literal(e.invars[0])}
    bad = []
    for e in jaxpr.eqns:
        if e.primitive.name in ("add", "sub", "mul") and any(
                a in zeros or _is_zero_literal(a) for a in e.invars):
            bad.append(e)
    return bad


W = np.random.default_rng(2).normal(size=(3, 2)).astype(F32)
CLEAN_CORPUS = {
    "sin*x": lambda x: fnp.sum(fnp.sin(x) * x),
    "poly": lambda x: fnp.sum(x ** 3 - 2 * x + 1),
    "mlp": lambda x: fnp.sum(fnp.tanh(x @ W)),
    "softmax": lambda x: fnp.sum(ft.nn.softmax(x) * x),
    "logsumexp": lambda x: ft.nn.logsumexp(x),
    "where": lambda x: fnp.sum(fnp.where(x > 1, x, 0.0)),
    "index": lambda x: x[0] * x[2],
    "fancy index": lambda x: fnp.sum(x[np.array([0, 0, 2])] ** 2),
    "max": lambda x: fnp.max(x),
    "mean var": lambda x: fnp.var(x) + fnp.mean(x),
    "norm": lambda x: fnp.linalg.norm(x),
    "stop_gradient": lambda x: fnp.sum(x * ft.stop_gradient(x)),
    "concatenate": lambda x: fnp.sum(fnp.concatenate([x, x * 2]) ** 2),
    "relu": lambda x: fnp.sum(ft.nn.relu(x)),
    "softplus": lambda x: fnp.sum(ft.nn.softplus(x)),
    "gelu": lambda x: fnp.sum(ft.nn.gelu(x)),
    "cumsum": lambda x: fnp.sum(fnp.cumsum(x) ** 2),
    "outer": lambda x: fnp.sum(x[:, None] * x[None, :]),
    "prod": lambda x: fnp.prod(x),
    "astype": lambda x: fnp.sum(fnp.astype(x, F64) ** 2),
    "einsum": lambda x: fnp.einsum("i,ij,j->", x, np.ones((3, 3), F32), x),
    "dead forward work": lambda x: fnp.sum(x) + fnp.sum(fnp.exp(ft.stop_gradient(x))),
}


@pytest.mark.parametrize("name", sorted(CLEAN_CORPUS))
def test_make_jaxpr_of_grad_is_clean(name):
    x = np.array([0.5, 1.5, 1.2], F32)
    closed = check_traced(ft.grad(CLEAN_CORPUS[name]), x)
    jaxpr = closed.jaxpr
    assert not unused_equations(jaxpr), f"dead equations in\n{closed}"
    assert not _materialized_zeros(jaxpr), f"materialized zeros in\n{closed}"
    assert not _identity_ops(jaxpr), f"identity ops in\n{closed}"
    second = check_traced(ft.grad(lambda v: fnp.sum(ft.grad(CLEAN_CORPUS[name])(v))), x)
    assert not unused_equations(second.jaxpr)


def test_grad_of_an_ignored_input_emits_no_equations():
    closed = check_traced(ft.grad(lambda x, y: fnp.sum(fnp.sin(y)), argnums=0),
                          np.ones(3, F32), np.ones(3, F32))
    names = [e.primitive.name for e in closed.eqns]
    assert "sin" not in names and "cos" not in names and len(names) <= 1


def test_grad_seed_is_not_multiplied_in():
    closed = ft.make_jaxpr(ft.grad(lambda x: x[0] * x[2]))(np.ones(3, F32))
    assert not any(e.primitive.name == "mul" and any(
        type(a) is core.Literal and np.all(np.asarray(a.val) == 1) for a in e.invars)
        for e in closed.eqns), str(closed)


@pytest.mark.parametrize("f", [
    lambda a, y: fnp.fmod(a, y),
    lambda a, y: fnp.where(True, a, y),
    lambda a, y: fnp.where(y > 0, a, y),
    lambda a, y: fnp.maximum(a, y),
    lambda a, y: a * y,
    lambda a, y: fnp.power(a, y),
], ids=["fmod", "where scalar pred", "where", "maximum", "mul", "power"])
def test_rank0_operand_against_an_array(f):
    """A rank-0 array meets an array without explicit broadcasting: the tangent and the
    cotangent still have the right shapes."""
    a, y = np.float64(2.5), np.array([0.7, -1.3, 1.9])
    out, t = ft.jvp(lambda v: f(v, y), (a,), (np.float64(1.0),))
    assert np.shape(t) == np.shape(out) == (3,)
    fd = (np.asarray(f(a + 1e-6, y)) - np.asarray(f(a - 1e-6, y))) / 2e-6
    assert_close(t, fd, rtol=1e-6, atol=1e-6)
    g = ft.grad(lambda v: fnp.sum(f(v, y)))(a)
    assert np.shape(g) == () and float(g) == pytest.approx(float(np.sum(fd)), rel=1e-6)
