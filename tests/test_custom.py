"""custom_jvp, custom_vjp, checkpoint and stop_gradient."""
import numpy as np
import pytest

import functrans as ft
import functrans.numpy as fnp
from functrans.higher_order.custom import CustomRuleError

pytestmark = pytest.mark.usefixtures("x64")  # float64 references: conftest.x64


def fd(f, x, eps=1e-6):
    return (f(x + eps) - f(x - eps)) / (2 * eps)


# --------------------------------------------------------------------------- custom_jvp

@ft.custom_jvp
def log1pexp(x):
    return fnp.log(1.0 + fnp.exp(x))


@log1pexp.defjvp
def _log1pexp_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return log1pexp(x), t * (1.0 - 1.0 / (1.0 + fnp.exp(x)))


def test_custom_jvp_rule_is_used_and_stable():
    assert np.isclose(ft.grad(log1pexp)(3.0), 1 / (1 + np.exp(-3.0)))
    # the naive derivative is nan at large x; the custom rule is not
    assert np.isfinite(ft.grad(log1pexp)(np.float64(1000.0)))
    assert ft.grad(log1pexp)(np.float64(1000.0)) == 1.0


def test_custom_jvp_higher_order_and_jvp():
    g2 = ft.grad(ft.grad(log1pexp))(np.float64(0.5))
    s = 1 / (1 + np.exp(-0.5))
    assert np.isclose(g2, s * (1 - s))
    out, t = ft.jvp(log1pexp, (np.float64(0.5),), (np.float64(2.0),))
    assert np.isclose(t, 2 * s)


def test_custom_jvp_rule_differs_from_function():
    @ft.custom_jvp
    def f(x):
        return fnp.sin(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return f(x), 2 * fnp.cos(x) * t     # deliberately not the true derivative

    assert np.isclose(ft.grad(f)(1.0), 2 * np.cos(1.0))
    assert np.isclose(f(1.0), np.sin(1.0))
    assert "custom_jvp_call" in str(ft.make_jaxpr(f)(1.0))
    xs = np.linspace(0, 1, 4)
    np.testing.assert_allclose(ft.vmap(ft.grad(f))(xs), 2 * np.cos(xs), rtol=1e-6)


def test_reverse_mode_computes_a_custom_jvp_function_once():
    """value_and_grad and vjp take the outputs from the rule's own forward (as JAX's
    linearize does): the function and what reads its output run once, not once for the
    value and again for the residuals; the values are unchanged."""
    @ft.custom_jvp
    def f(x):
        return fnp.sin(x) * 2

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return fnp.sin(x) * 2, 2 * fnp.cos(x) * t

    def loss(x):
        return fnp.sum(fnp.exp(f(x)))

    x = np.linspace(-1, 1, 5)
    eqns = ft.make_jaxpr(ft.value_and_grad(loss))(x).jaxpr.eqns
    names = [e.primitive.name for e in eqns]
    assert names.count("sin") == 1 and names.count("exp") == 1, names
    assert "custom_jvp_call" not in names
    v, g = ft.value_and_grad(loss)(x)
    np.testing.assert_allclose(v, np.sum(np.exp(2 * np.sin(x))), rtol=1e-14)
    np.testing.assert_allclose(g, 2 * np.cos(x) * np.exp(2 * np.sin(x)), rtol=1e-14)
    out, pull = ft.vjp(lambda x: fnp.exp(f(x)), x)
    np.testing.assert_allclose(pull(np.ones_like(x))[0], g, rtol=1e-14)


def test_custom_jvp_nondiff_argnums():
    scale = ft.custom_jvp(lambda n, x: x * n, nondiff_argnums=(0,))

    @scale.defjvp
    def _(n, primals, tangents):
        (x,), (t,) = primals, tangents
        return x * n, t * n * 10

    assert np.isclose(ft.grad(lambda x: scale(3.0, x))(2.0), 30.0)


def test_custom_jvp_missing_rule_and_bad_rule():
    f = ft.custom_jvp(lambda x: x)
    with pytest.raises(AttributeError, match="No JVP defined"):
        ft.grad(f)(1.0)

    g = ft.custom_jvp(lambda x: x * 2)
    g.defjvp(lambda p, t: (p[0] * 2,))
    with pytest.raises(CustomRuleError, match="pair"):
        ft.grad(g)(1.0)


def test_custom_jvp_closing_over_differentiated_value_fails_loudly():
    def outer(y):
        f = ft.custom_jvp(lambda x: x * y)
        f.defjvp(lambda p, t: (p[0] * y, t[0] * y))
        return f(2.0)
    with pytest.raises(CustomRuleError, match="closes over"):
        ft.grad(outer)(3.0)


# --------------------------------------------------------------------------- custom_vjp

@ft.custom_vjp
def clip_gradient(x):
    return x


def _clip_fwd(x):
    return x, None


def _clip_bwd(_, ct):
    return (fnp.clip(ct, -1.0, 1.0),)


clip_gradient.defvjp(_clip_fwd, _clip_bwd)


def test_custom_vjp_rule_is_used():
    assert ft.grad(lambda x: 5.0 * clip_gradient(x))(2.0) == 1.0
    assert ft.grad(lambda x: 0.5 * clip_gradient(x))(2.0) == 0.5
    np.testing.assert_allclose(
        ft.vmap(ft.grad(lambda x: 5.0 * clip_gradient(x)))(np.ones(3)), np.ones(3))


def test_custom_vjp_residuals_and_second_order():
    @ft.custom_vjp
    def f(x, y):
        return fnp.sin(x) * y

    def fwd(x, y):
        return fnp.sin(x) * y, (fnp.cos(x), fnp.sin(x), y)

    def bwd(res, ct):
        cos_x, sin_x, y = res
        return (cos_x * y * ct, sin_x * ct)

    f.defvjp(fwd, bwd)
    x, y = np.float64(0.7), np.float64(1.3)
    gx, gy = ft.grad(f, argnums=(0, 1))(x, y)
    assert np.isclose(gx, np.cos(x) * y) and np.isclose(gy, np.sin(x))
    # bwd is written with differentiable ops, so grad of grad works
    g2 = ft.grad(lambda x: ft.grad(f)(x, y))(x)
    assert np.isclose(g2, -np.sin(x) * y)


def test_custom_vjp_forward_mode_raises():
    with pytest.raises(CustomRuleError, match="forward-mode"):
        ft.jvp(clip_gradient, (1.0,), (1.0,))


def test_custom_vjp_bad_bwd():
    f = ft.custom_vjp(lambda x: x)
    f.defvjp(lambda x: (x, None), lambda r, ct: ct)
    with pytest.raises(CustomRuleError, match="tuple"):
        ft.grad(f)(1.0)


# --------------------------------------------------------------------------- checkpoint

def test_checkpoint_values_and_gradients():
    def f(x):
        return fnp.sum(fnp.sin(fnp.sin(x)) * x)
    x = np.linspace(-1, 1, 5)
    np.testing.assert_allclose(ft.grad(ft.checkpoint(f))(x), ft.grad(f)(x), rtol=1e-12)
    np.testing.assert_allclose(ft.hessian(ft.checkpoint(f))(x), ft.hessian(f)(x), rtol=1e-10)
    assert ft.remat is ft.checkpoint


def test_checkpoint_recomputes_in_backward():
    """The linearized program keeps only the input as residual and recomputes sin."""
    x = np.linspace(-1, 1, 5)
    g = lambda x: fnp.sum(fnp.sin(fnp.sin(x)))   # noqa: E731
    _, lin_plain = ft.linearize(g, x)
    _, lin_remat = ft.linearize(ft.checkpoint(g), x)
    assert len(lin_plain.jaxpr.constvars) == 2            # cos(x), cos(sin(x))
    assert len(lin_remat.jaxpr.constvars) == 1            # just x
    (eqn,) = lin_remat.jaxpr.eqns
    assert eqn.primitive.name == "checkpoint"
    inner = [e.primitive.name for e in eqn.params["jaxpr"].jaxpr.eqns]
    assert "sin" in inner and "cos" in inner
    ft.check_jaxpr(lin_remat.jaxpr)


def test_stop_gradient():
    f = lambda x: x * ft.stop_gradient(x)   # noqa: E731
    assert ft.grad(f)(3.0) == 3.0
    tree = ft.stop_gradient({"a": np.ones(2), "b": 1.0})
    assert set(tree) == {"a", "b"}


# ---------------------------------------------------------------------------
# checkpoint policies and named values (ft.ad_checkpoint)

def _named_mlp(x, w):
    h = ft.ad_checkpoint.checkpoint_name(ft.numpy.sin(x @ w), "h")
    return ft.numpy.sum(ft.numpy.cos(h @ w))


POLICIES = {
    None: ["from the argument x", "from the argument w"],
    "nothing_saveable": ["from the argument x", "from the argument w"],
    "dots_saveable": ["from the argument x", "from the argument w", "output of dot_general",
                      "output of dot_general"],
    "names": ["from the argument x", "from the argument w", "named 'h'"],
    "everything_saveable": ["from the argument x", "from the argument w", "output of sin",
                            "named 'h'", "output of cos"],
}


@pytest.mark.parametrize("which", list(POLICIES), ids=str)
def test_checkpoint_policy_saves_what_it_names_and_keeps_the_gradient(which):
    """Each policy changes what the backward keeps (JAX's print_saved_residuals shows the
    same sets for this function), never the gradient, under grad, vmap, jit and jvp."""
    P = ft.checkpoint_policies
    policy = {None: None, "names": P.save_only_these_names("h")}.get(which) or (
        getattr(P, which) if which else None)
    x = np.random.default_rng(0).standard_normal((3, 3))
    w = np.random.default_rng(1).standard_normal((3, 3)) * 0.5
    f = ft.checkpoint(_named_mlp, policy=policy)
    got = sorted(d for _, d in ft.ad_checkpoint.saved_residuals(f, x, w))
    assert got == sorted(POLICIES[which])
    want = ft.grad(_named_mlp, argnums=(0, 1))(x, w)
    for g, r in zip(ft.grad(f, argnums=(0, 1))(x, w), want):
        np.testing.assert_allclose(g, r, rtol=1e-12)
    np.testing.assert_allclose(ft.jit(ft.vmap(ft.grad(f), in_axes=(0, None)))(
        np.stack([x, -x]), w)[1], ft.grad(_named_mlp)(-x, w), rtol=1e-12)
    np.testing.assert_allclose(ft.jvp(ft.grad(f), (x, w), (x, np.zeros_like(w)))[1],
                               ft.jvp(ft.grad(_named_mlp), (x, w), (x, np.zeros_like(w)))[1],
                               rtol=1e-10)


def test_checkpoint_name_is_the_identity_in_every_transformation():
    name = ft.ad_checkpoint.checkpoint_name
    x = np.linspace(-1.0, 1.0, 5)
    f = lambda v: ft.numpy.sum(name(v * v, "sq") * v)      # noqa: E731
    np.testing.assert_allclose(ft.grad(f)(x), 3 * x * x, rtol=1e-12)
    np.testing.assert_allclose(ft.vmap(ft.grad(f))(x[:, None])[:, 0], 3 * x * x, rtol=1e-12)
    np.testing.assert_allclose(ft.jit(f)(x), np.sum(x ** 3), rtol=1e-12)
    assert name({"a": x, "b": (x,)}, "t")["b"][0] is not None


def test_the_policies_combine_and_a_bad_policy_is_refused():
    P = ft.checkpoint_policies
    both = P.save_from_both_policies(P.dots_saveable, P.save_only_these_names("h"))
    x = np.eye(3)
    got = sorted(d for _, d in ft.ad_checkpoint.saved_residuals(
        ft.checkpoint(_named_mlp, policy=both), x, x))
    assert got.count("output of dot_general") == 2 and "named 'h'" in got
    except_h = P.save_anything_except_these_names("h")
    got = [d for _, d in ft.ad_checkpoint.saved_residuals(
        ft.checkpoint(_named_mlp, policy=except_h), x, x)]
    assert "named 'h'" not in got and "output of cos" in got
    with pytest.raises(TypeError, match="policy must be a callable"):
        ft.checkpoint(_named_mlp, policy="dots")


def test_facade_backward_through_a_custom_jvp_op_and_layer_norm():
    """x.abs() (a custom_jvp function: torch's derivative) feeding a LayerNorm: the
    facade's backward raised InternalEngineError (its derived program read a leaf no node
    saved) before custom_jvp's rule was recorded as the forward; gradients as PyTorch's,
    three steps."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 8))
    w1, b1 = rng.standard_normal((16, 8)), rng.standard_normal(16)
    g, beta = rng.standard_normal(16), rng.standard_normal(16)

    def run(L, F):
        params = [L.tensor(a, requires_grad=True) for a in (w1, b1, g, beta)]
        for _ in range(3):
            h = F.layer_norm(F.linear(L.tensor(x), params[0], params[1]).abs(), (16,),
                             params[2], params[3])
            (h * h).sum().backward()
        return [p.grad.detach().numpy() for p in params]
    import functrans.nn.functional as ftF
    for got, want in zip(run(ft, ftF), run(torch, torch.nn.functional), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)
