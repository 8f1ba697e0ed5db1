"""Derivatives at kinks and ties: the functional side follows JAX's conventions, the facade
PyTorch's (docs/autodiff.md, "Kinks and ties"); each entry is also checked against float64
central differences at a smooth point beside its kink."""
from __future__ import annotations

import numpy as np
import pytest

import functrans as ft
import functrans.numpy as fnp
from conftest import fd_grad

pytestmark = pytest.mark.usefixtures("x64")  # float64 references: conftest.x64

F = ft.nn.functional
INF = np.inf


def _g(f, x):
    """ft.grad of sum(f(x)) in float64."""
    return np.asarray(ft.grad(lambda v: fnp.sum(f(v)))(np.asarray(x, np.float64)))


def _tg(f, x):
    """The facade's x.grad after f(x).sum().backward(), float64."""
    t = ft.tensor(np.asarray(x, np.float64), dtype=ft.float64, requires_grad=True)
    f(t).sum().backward()
    return t.grad.numpy()


# name: (function of a float64 array, kink or tie point, JAX's derivative there, smooth point)
JAX_TABLE = {
    "abs": (fnp.abs, [0.0], [1.0], [0.3]),
    "sign": (fnp.sign, [0.0], [0.0], [0.3]),
    "atan2 at the origin": (lambda v: fnp.arctan2(v[0], v[1]), [0.0, 0.0], [np.nan, np.nan],
                            [0.3, -0.4]),
    "floor": (fnp.floor, [1.0], [0.0], [1.3]),
    "ceil": (fnp.ceil, [1.0], [0.0], [1.3]),
    "round": (fnp.round, [0.5], [0.0], [0.3]),
    "relu": (ft.nn.relu, [0.0], [0.0], [0.3]),
    "relu6 at 0 and 6": (ft.nn.relu6, [0.0, 6.0], [0.0, 0.0], [0.3, 5.7]),
    "leaky_relu": (ft.nn.leaky_relu, [0.0], [1.0], [-0.3]),
    "elu": (ft.nn.elu, [0.0], [1.0], [-0.3]),
    "maximum tie": (lambda v: fnp.maximum(v[0], v[1]), [0.4, 0.4], [0.5, 0.5], [0.4, 0.1]),
    "minimum tie": (lambda v: fnp.minimum(v[0], v[1]), [0.4, 0.4], [0.5, 0.5], [0.4, 0.1]),
    "max reduction tie": (fnp.max, [1.0, 1.0, 0.0], [0.5, 0.5, 0.0], [1.0, 0.9, 0.0]),
    "min reduction tie": (fnp.min, [0.0, 0.0, 1.0], [0.5, 0.5, 0.0], [0.0, 0.1, 1.0]),
    "amax tie": (fnp.amax, [2.0, 2.0], [0.5, 0.5], [2.0, 1.0]),
    "amin tie": (fnp.amin, [2.0, 2.0], [0.5, 0.5], [2.0, 3.0]),
    "clip at bounds": (lambda v: fnp.clip(v, 0.0, 1.0), [0.0, 1.0], [0.5, 0.5], [0.2, 0.8]),
    "logaddexp tie": (lambda v: fnp.logaddexp(v[0], v[1]), [0.4, 0.4], [0.5, 0.5], [0.4, -1.0]),
    "logaddexp2 tie": (lambda v: fnp.logaddexp2(v[0], v[1]), [0.4, 0.4], [0.5, 0.5],
                       [0.4, -1.0]),
    "softplus": (ft.nn.softplus, [0.0], [0.5], [0.3]),
    "log_sigmoid": (ft.nn.log_sigmoid, [0.0], [0.5], [0.3]),
    "logsumexp tie": (fnp.logsumexp, [1.0, 1.0], [0.5, 0.5], [1.0, 0.2]),
    "log_softmax tie": (lambda v: ft.nn.log_softmax(v)[0], [1.0, 1.0], [0.5, -0.5], [1.0, 0.2]),
    # JAX's norm is sqrt(sum(x * x)): its derivative at 0 is NaN (0 * inf)
    "norm at 0": (fnp.linalg.norm, [0.0, 0.0], [np.nan, np.nan], [0.3, -0.4]),
}


@pytest.mark.parametrize("name", sorted(JAX_TABLE))
def test_functional_side_follows_jax_at_kinks(name):
    f, kink, want, smooth = JAX_TABLE[name]
    np.testing.assert_allclose(_g(f, kink), want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(_g(f, smooth), fd_grad(lambda v: np.sum(f(v)), smooth),
                               rtol=1e-6, atol=1e-8)


def _bce(t):
    return F.binary_cross_entropy_with_logits(t, ft.zeros(t.shape, dtype=ft.float64),
                                              reduction="sum")


# name: (function of a float64 Tensor, kink or tie point, PyTorch's derivative, smooth point)
TORCH_TABLE = {
    "abs": (ft.abs, [0.0], [0.0], [0.3]),
    "Tensor.abs": (lambda t: t.abs(), [0.0, -0.0], [0.0, 0.0], [-0.3, 0.3]),
    "sign": (ft.sign, [0.0], [0.0], [0.3]),
    "floor": (ft.floor, [1.0], [0.0], [1.3]),
    "round": (ft.round, [0.5], [0.0], [0.3]),
    "relu": (ft.relu, [0.0], [0.0], [0.3]),
    "F.relu": (F.relu, [0.0], [0.0], [0.3]),
    "relu6 at 0 and 6": (F.relu6, [0.0, 6.0], [0.0, 0.0], [0.3, 5.7]),
    "hardtanh at -1 and 1": (F.hardtanh, [-1.0, 1.0], [0.0, 0.0], [-0.7, 0.7]),
    "leaky_relu": (F.leaky_relu, [0.0], [0.01], [-0.3]),
    "elu": (F.elu, [0.0], [1.0], [-0.3]),
    "clamp at bounds": (lambda t: t.clamp(0.0, 1.0), [0.0, 1.0], [1.0, 1.0], [0.2, 0.8]),
    "clamp_min at bound": (lambda t: t.clamp_min(0.0), [0.0], [1.0], [0.2]),
    "maximum tie": (lambda t: t[0].maximum(t[1]), [0.4, 0.4], [0.5, 0.5], [0.4, 0.1]),
    "minimum tie": (lambda t: t[0].minimum(t[1]), [0.4, 0.4], [0.5, 0.5], [0.4, 0.1]),
    "max() tie": (lambda t: t.max(), [1.0, 1.0, 0.0], [0.5, 0.5, 0.0], [1.0, 0.9, 0.0]),
    "min() tie": (lambda t: t.min(), [0.0, 0.0, 1.0], [0.5, 0.5, 0.0], [0.0, 0.1, 1.0]),
    "max(dim) tie": (lambda t: t.max(0)[0], [1.0, 1.0, 0.0], [1.0, 0.0, 0.0], [1.0, 0.9, 0.0]),
    "amax tie": (lambda t: t.amax(), [2.0, 2.0], [0.5, 0.5], [2.0, 1.0]),
    "amin tie": (lambda t: t.amin(), [2.0, 2.0], [0.5, 0.5], [2.0, 3.0]),
    "softplus": (F.softplus, [0.0], [0.5], [0.3]),
    "logsigmoid": (F.logsigmoid, [0.0], [0.5], [0.3]),
    "bce with logits": (_bce, [0.0], [0.5], [0.3]),
    "logsumexp tie": (lambda t: t.logsumexp(0), [1.0, 1.0], [0.5, 0.5], [1.0, 0.2]),
    "norm at 0": (lambda t: t.norm(), [0.0, 0.0], [0.0, 0.0], [0.3, -0.4]),
    "norm(1) at 0": (lambda t: t.norm(1), [0.0, 0.0], [0.0, 0.0], [0.3, -0.4]),
    "norm(3) at 0": (lambda t: t.norm(3), [0.0, 0.0], [0.0, 0.0], [0.3, -0.4]),
    "norm(inf) tie": (lambda t: t.norm(INF), [1.0, -1.0], [0.5, -0.5], [1.0, -0.5]),
    "l1_loss at 0": (lambda t: F.l1_loss(t, ft.zeros(t.shape, dtype=ft.float64)), [0.0, 0.0],
                     [0.0, 0.0], [0.3, -0.4]),
    "normalize at 0": (lambda t: F.normalize(t.reshape(1, 2)) * ft.tensor([1.0, 2.0]),
                       [0.0, 0.0], [1e12, 2e12], [0.3, -0.4]),
    "atan2 at the origin": (lambda t: t[0].atan2(t[1]), [0.0, 0.0], [0.0, 0.0], [0.3, -0.4]),
    "sort tie": (lambda t: t.sort()[0] * ft.tensor([1.0, 2.0, 3.0], dtype=ft.float64),
                 [1.0, 1.0, 0.0], [2.0, 3.0, 1.0], [1.0, 1.1, 0.0]),
}


@pytest.mark.parametrize("name", sorted(TORCH_TABLE))
def test_facade_follows_pytorch_at_kinks(name):
    f, kink, want, smooth = TORCH_TABLE[name]
    np.testing.assert_allclose(_tg(f, kink), want, rtol=1e-12, atol=1e-12)

    def value(v):
        return float(f(ft.tensor(v, dtype=ft.float64)).sum().item())
    np.testing.assert_allclose(_tg(f, smooth), fd_grad(value, smooth), rtol=1e-6, atol=1e-6)


def test_the_issue_snippet():
    """Issue 18's wrong values, each as JAX or PyTorch gives it."""
    x = np.float64(0.4)
    assert ft.grad(fnp.logaddexp, argnums=(0, 1))(x, x) == (0.5, 0.5)
    assert ft.grad(lambda v: fnp.sum(ft.nn.softplus(v)))(np.zeros(1))[0] == 0.5
    for f, want in [(F.softplus, 0.5), (F.logsigmoid, 0.5), (_bce, 0.5), (ft.abs, 0.0)]:
        assert _tg(f, [0.0])[0] == want
    tangent = ft.jvp(lambda s: fnp.linspace(s, 3.4, 5), (x,), (np.float64(1.0),))[1]
    np.testing.assert_allclose(tangent, [1, 0.75, 0.5, 0.25, 0], atol=1e-15)
    assert fnp.linspace(np.float64(0), np.float64(1), 3).dtype == np.float64
    assert fnp.array([np.float64(1 / 3)]).dtype == np.float64


def test_logaddexp_second_derivative_at_a_tie_and_large_ties():
    """The weight logistic(x - y) is itself differentiable (Hessian 1/4 at a tie) and exact at
    ties of any magnitude."""
    h = ft.hessian(lambda v: fnp.logaddexp(v[0], v[1]))(np.array([0.4, 0.4]))
    np.testing.assert_allclose(h, [[0.25, -0.25], [-0.25, 0.25]], atol=1e-15)
    big = np.float32(1e8)
    assert ft.grad(fnp.logaddexp, argnums=(0, 1))(big, big) == (0.5, 0.5)
    assert ft.grad(fnp.logaddexp, argnums=(0, 1))(-INF, 2.0) == (0.0, 1.0)
    s = np.array([-1000.0, -3.0, 0.0, 3.0, 1000.0])
    np.testing.assert_allclose(ft.nn.softplus(s), np.logaddexp(s, 0), rtol=1e-15)
    np.testing.assert_allclose(ft.vmap(ft.grad(ft.nn.softplus))(s), 1 / (1 + np.exp(-s)),
                               rtol=1e-15)
    np.testing.assert_allclose(fnp.logaddexp2(np.float64(3.0), np.float64(-2.0)),
                               np.logaddexp2(3.0, -2.0), rtol=1e-15)


def test_hypot_is_smooth_at_ties_to_second_order():
    """hypot is smooth where |x| = |y| (found by autograd's suite): its Hessian there is
    sqrt(x² + y²)'s, [[y², -xy], [-xy, x²]] / r³, not the 0 of a max/min decomposition."""
    for x, y in ((2.0, 2.0), (2.0, -2.0), (-0.5, 0.5), (3.0, 1.0)):
        h = ft.hessian(lambda v: fnp.hypot(v[0], v[1]))(np.array([x, y]))
        r3 = np.hypot(x, y) ** 3
        np.testing.assert_allclose(h, [[y * y / r3, -x * y / r3], [-x * y / r3, x * x / r3]],
                                   rtol=1e-13)
    assert fnp.hypot(np.float64(1e300), np.float64(1e300)) == np.hypot(1e300, 1e300)
    assert fnp.hypot(np.float64(3e-300), np.float64(4e-300)) == np.hypot(3e-300, 4e-300)


def test_power_with_zero_exponent_has_zero_derivatives_of_every_order_at_zero():
    """x ** 0 is constant: JAX's 0 for d/dx and d²/dx² at x = 0, not 0 * inf = NaN (found by
    autograd's suite); d/dy of 0 ** y is 0 (JAX's log(x) -> log(1) convention)."""
    f = lambda x: fnp.power(x, 0.0)  # noqa: E731
    zero = np.float64(0.0)
    assert ft.grad(f)(zero) == 0.0
    assert ft.grad(ft.grad(f))(zero) == 0.0
    assert ft.grad(ft.grad(ft.grad(f)))(zero) == 0.0
    assert ft.jacfwd(ft.jacfwd(f))(zero) == 0.0
    np.testing.assert_allclose(ft.grad(ft.grad(lambda x: fnp.power(x, 2.5)))(np.float64(1.3)),
                               2.5 * 1.5 * 1.3 ** 0.5, rtol=1e-14)
    t = ft.tensor(0.0, dtype=ft.float64, requires_grad=True)
    (g,) = ft.autograd.grad(t ** 0.0, t, create_graph=True)
    (g2,) = ft.autograd.grad(g, t, allow_unused=True)
    assert float(g) == 0.0 and (g2 is None or float(g2) == 0.0)


def test_std_over_a_single_element_has_derivative_zero():
    """std over one element is identically 0: derivative 0, as autograd and PyTorch (JAX's
    sqrt(var) gives 0 * inf = NaN); elsewhere sqrt(var)'s, NaN where all entries tie."""
    assert ft.grad(fnp.std)(np.float64(3.5)) == 0.0
    g = ft.grad(lambda x: fnp.sum(fnp.std(x, axis=0, keepdims=True)))(np.ones((1, 3)))
    np.testing.assert_array_equal(g, np.zeros((1, 3)))
    x = np.array([0.5, 2.0, -1.0])
    np.testing.assert_allclose(ft.grad(fnp.std)(x), (x - x.mean()) / (3 * np.std(x)),
                               rtol=1e-14)


def test_jit_and_vmap_give_the_same_kink_derivatives():
    g = ft.grad(lambda v: fnp.logaddexp(v[0], v[1]))
    v = np.array([0.4, 0.4])
    np.testing.assert_array_equal(ft.jit(g)(v), [0.5, 0.5])
    np.testing.assert_array_equal(ft.vmap(g)(np.stack([v, v])), [[0.5, 0.5]] * 2)


# ---------------------------------------------------------------------------
# linspace and friends


@pytest.mark.usefixtures("x32")
def test_linspace_values_dtypes_and_derivatives():
    for args, kw in [((0, 1, 5), {}), ((1.2, 3.4, 7), {"endpoint": False}),
                     ((0, 10, 4), {"dtype": np.int32}), ((2.0, 3.0, 1), {}),
                     ((2.0, 3.0, 0), {}),
                     ((np.array([0.0, 1.0]), np.array([2.0, 5.0]), 4), {}),
                     ((np.array([0.0, 1.0]), 3.0, 4), {"axis": 1})]:
        got, want = fnp.linspace(*args, **kw), np.linspace(*args, **kw)
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-6)
    assert fnp.linspace(0, 1, 3).dtype == np.float32            # Python numbers: float32
    assert fnp.linspace(np.float64(0), 1, 3).dtype == np.float32        # x32: a NumPy float64 is narrowed
    y, step = fnp.linspace(0.0, 1.0, 5, retstep=True)
    assert float(step) == 0.25
    f = ft.jit(lambda a, b: fnp.linspace(a, b, 5))
    assert f(np.float64(1.2), np.float64(3.4)).dtype == np.float32      # x32 narrows
    np.testing.assert_array_equal(f(np.float64(1.2), np.float64(3.4)),
                                  fnp.linspace(np.float64(1.2), np.float64(3.4), 5))
    for i, dv in enumerate(([1, 0.75, 0.5, 0.25, 0], [0, 0.25, 0.5, 0.75, 1])):
        jac = ft.jacfwd(lambda a, b: fnp.linspace(a, b, 5), argnums=i)(1.2, 3.4)
        np.testing.assert_allclose(jac, dv, atol=1e-7)


def test_geomspace_logspace_arange_derivatives_against_differences():
    checks = [
        (lambda a: fnp.sum(fnp.geomspace(a, 8.0, 4) ** 2),
         lambda a: np.sum(np.geomspace(a, 8.0, 4) ** 2), 1.5),
        (lambda a: fnp.sum(fnp.geomspace(-a, -8.0, 5, endpoint=False)),
         lambda a: np.sum(np.geomspace(-a, -8.0, 5, endpoint=False)), 1.5),
        (lambda a: fnp.sum(fnp.logspace(a, 2.0, 4, base=3.0)),
         lambda a: np.sum(np.logspace(a, 2.0, 4, base=3.0)), 0.5),
        (lambda a: fnp.sum(fnp.arange(a, 5.0) ** 2), lambda a: np.sum(np.arange(a, 5.0) ** 2),
         0.5),
        (lambda s: fnp.sum(fnp.arange(0.0, 2.0, s) ** 2),
         lambda s: np.sum(np.arange(0.0, 2.0, s) ** 2), 0.45),
    ]
    for f, ref, x in checks:
        np.testing.assert_allclose(f(np.float64(x)), ref(x), rtol=1e-13)
        np.testing.assert_allclose(ft.grad(f)(np.float64(x)), fd_grad(ref, x), rtol=1e-6)
    np.testing.assert_allclose(fnp.geomspace(1.0, 1000.0, 4), [1, 10, 100, 1000], rtol=1e-6)
    np.testing.assert_allclose(fnp.logspace(0.0, 3.0, 4), [1, 10, 100, 1000], rtol=1e-7)
    with pytest.raises(ValueError, match="cannot include zero"):
        fnp.geomspace(0.0, 1.0, 3)
    with pytest.raises(NotImplementedError, match="opposite signs"):
        fnp.geomspace(-1.0, 1.0, 3)


@pytest.mark.usefixtures("x32")
def test_array_of_numpy_scalars_has_one_dtype_eagerly_and_traced():
    for v in ([np.float64(1 / 3)], [np.float32(1), 2.0], [np.int64(3), 2.5], [1.0, 2.0],
              [1, 2], [[np.float64(1)], [2.0]]):
        traced = ft.jit(lambda *xs: fnp.array(list(xs)))(*v) if not isinstance(v[0], list) \
            else None
        eager = fnp.array(v)
        if traced is not None:
            assert eager.dtype == traced.dtype, v
    assert fnp.array([1.0, 2.0]).dtype == np.float32
    assert fnp.array([np.float64(1.0), 2.0]).dtype == np.float32   # x32 narrows


def test_facade_std_and_fractional_norm_have_torchs_zero_derivative_at_zero():
    """torch masks std's 1/(2*std) where std is 0 and |x|^(p-1) where x is 0 for p < 1:
    derivative 0, not NaN (the functional side keeps JAX's sqrt)."""
    x = ft.tensor([[2.0, 2.0, 2.0], [1.0, 0.0, -1.0]], dtype=ft.float64, requires_grad=True)
    x.std(1).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [[0, 0, 0], [0.5, 0, -0.5]], atol=1e-15)
    y = ft.tensor([0.0, 4.0, 0.0], dtype=ft.float64, requires_grad=True)
    y.norm(0.5).backward()
    np.testing.assert_allclose(y.grad.numpy(), [0.0, 1.0, 0.0], atol=1e-15)



def test_facade_max_of_all_elements_gives_a_nan_result_to_the_nans():
    """max()/min() over every element split the derivative among the elements equal to the
    result, and a NaN result among the NaNs (torch's evenly_distribute_backward); amax keeps
    the equality rule (NaN); logsumexp over nothing is -inf."""
    x = ft.tensor([[1.0, np.nan], [np.nan, 0.0]], dtype=ft.float64, requires_grad=True)
    x.max().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[0.0, 0.5], [0.5, 0.0]])
    y = ft.tensor([3.0, 1.0, 3.0], dtype=ft.float64, requires_grad=True)
    y.min().backward()
    np.testing.assert_array_equal(y.grad.numpy(), [0.0, 1.0, 0.0])
    assert ft.zeros(0, 3).logsumexp(0).tolist() == [-np.inf] * 3


def test_facade_pow_with_a_tensor_exponent_has_torchs_derivatives_at_zero():
    """d(x**y)/dy at x = 0 is 0 for y >= 0 and x**y * log(x) = -inf for y < 0 (torch's
    masked formula; JAX's primitive gives NaN there); d/dx is 0 where y == 0."""
    x = ft.tensor([0.0, 0.0, 0.0, 2.0], dtype=ft.float64, requires_grad=True)
    y = ft.tensor([-1.0, 0.0, 2.0, 3.0], dtype=ft.float64, requires_grad=True)
    (x ** y).sum().backward()
    np.testing.assert_array_equal(y.grad.numpy(), [-np.inf, 0.0, 0.0, 8 * np.log(2.0)])
    np.testing.assert_array_equal(x.grad.numpy(), [-np.inf, 0.0, 0.0, 12.0])
    assert (x ** y).grad_fn.name() == "PowBackward1"


def test_nan_inputs_follow_torch():
    """torch: sign(NaN) is 0, so abs's derivative at NaN is 0; clamp keeps NaN with
    derivative 0; relu keeps NaN and passes its gradient, in the facade and the functional
    relu (JAX's derivative there is 0: docs/autodiff.md says why we keep 1)."""
    x = ft.tensor([np.nan, -2.0, 0.5], dtype=ft.float64, requires_grad=True)
    assert x.sign().tolist()[0] == 0.0
    x.abs().sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, -1.0, 1.0])
    x.grad = None
    y = x.clamp(-1.0, 1.0)
    y.sum().backward()
    assert np.isnan(y.tolist()[0]) and x.grad.tolist() == [0.0, 0.0, 1.0]
    x.grad = None
    r = x.relu()
    r.sum().backward()
    assert np.isnan(r.tolist()[0]) and x.grad.tolist() == [1.0, 0.0, 1.0]
    v = np.array([np.nan, 0.0, 1.0])
    assert np.isnan(np.asarray(ft.nn.relu(v))[0])
    np.testing.assert_array_equal(np.asarray(ft.grad(lambda a: fnp.sum(ft.nn.relu(a)))(v)),
                                  [1.0, 0.0, 1.0])   # JAX: 0 at NaN (docs/oracle.md)
