"""The special-function primitives that the registry suite cannot drive alone (zeta: a
derivative in q only, zeta_dx: the step that raises when the derivative in x is run), and
the accuracy of all of them against SciPy over wide domains, beyond the registry's draws."""
import math

import numpy as np
import pytest

import functrans as ft
from functrans.primitives import special as sp

pytestmark = pytest.mark.usefixtures("x64")  # float64 references: conftest.x64

special = pytest.importorskip("scipy.special", reason="the references are SciPy's")
R = np.random.default_rng(0)


def _rel(ours, ref, floor=1e-300):
    """The largest |ours - ref| / max(|ref|, floor) (floor 1: absolute error near zeros)."""
    ours, ref = np.asarray(ours, np.float64), np.asarray(ref, np.float64)
    assert np.array_equal(np.isnan(ours), np.isnan(ref))
    fin = np.isfinite(ref)
    assert np.array_equal(ours[~fin], ref[~fin], equal_nan=True)
    return float(np.max(np.abs(ours[fin] - ref[fin]) / np.maximum(np.abs(ref[fin]), floor),
                        initial=0.0))


X = np.concatenate([R.uniform(-30, 30, 400), R.uniform(-3, 3, 400), 10.0 ** R.uniform(-8, 3, 100),
                    [0.0, 1.0, 2.0, 0.5, 25.0, 1e5, np.nan, np.inf]])


@pytest.mark.parametrize("name, prim, ref, tol, domain", [
    ("lgamma", sp.lgamma, special.gammaln, 1e-12, X[X > 0]),
    ("digamma", sp.digamma, special.digamma, 1e-13, np.abs(X) + 0.01),
    ("digamma_negative", sp.digamma, special.digamma, 1e-10,
     -np.abs(X[np.isfinite(X)]) - 0.37),
    ("erfc", sp.erfc, special.erfc, 1e-13, X[np.abs(X) < 26]),
    ("bessel_i0e", sp.bessel_i0e, special.i0e, 1e-14, X),
    ("bessel_i1e", sp.bessel_i1e, special.i1e, 1e-14, X),
    ("ndtri", sp.ndtri, special.ndtri, 1e-13,
     np.concatenate([R.uniform(0.01, 0.49, 200), 10.0 ** -R.uniform(2, 300, 200),
                     1 - 10.0 ** -R.uniform(1, 15, 100), [0.0, 1.0, 2.0, -1.0, np.nan]])),
    ("erf_inv", sp.erf_inv, special.erfinv, 1e-14,
     np.concatenate([R.uniform(-0.99, 0.99, 300), 10.0 ** -R.uniform(1, 300, 100),
                     1 - 10.0 ** -R.uniform(1, 16, 100), [0.0, 1.0, -1.0, 1.5]])),
])
def test_accuracy_against_scipy(name, prim, ref, tol, domain):
    with np.errstate(all="ignore"):
        expect = ref(domain)
    floor = 1.0 if name.startswith("digamma") else 1e-300     # digamma has zeros
    assert _rel(prim(domain), expect, floor) < tol


def test_zeta_values_and_domain():
    x = np.concatenate([R.uniform(1.01, 30, 300), [2.0, 3.0, 1.0, 0.5, 2.0, 3.0, 2.5]])
    q = np.concatenate([R.uniform(0.01, 50, 300), [1.0, 2.0, 1.0, 1.0, -1.5, -2.5, -1.5]])
    with np.errstate(all="ignore"):
        assert _rel(sp.zeta(x, q), special.zeta(x, q)) < 1e-13
    assert sp.zeta(np.float32(2.0), np.float32(1.0)).dtype == np.float32
    assert abs(float(sp.zeta(2.0, 1.0)) - math.pi ** 2 / 6) < 1e-15


def test_zeta_derivative_in_q_and_batching():
    x, q = np.array([2.0, 3.5, 5.0]), np.array([0.7, 1.5, 4.0])
    grad = ft.grad(lambda q: ft.numpy.sum(sp.zeta(x, q)))(q)
    h = 1e-6
    fd = (np.asarray(sp.zeta(x, q + h)) - np.asarray(sp.zeta(x, q - h))) / (2 * h)
    np.testing.assert_allclose(grad, fd, rtol=1e-7)
    np.testing.assert_allclose(grad, -x * special.zeta(x + 1, q), rtol=1e-13)
    second = ft.grad(lambda q: ft.numpy.sum(ft.grad(lambda q: ft.numpy.sum(
        sp.zeta(x, q)))(q)))(q)
    np.testing.assert_allclose(second, x * (x + 1) * special.zeta(x + 2, q), rtol=1e-12)
    batched = ft.vmap(lambda a, b: sp.zeta(a, b))(np.stack([x, x + 1]), np.stack([q, q]))
    np.testing.assert_allclose(batched, [sp.zeta(x, q), sp.zeta(x + 1, q)], rtol=1e-15)
    np.testing.assert_allclose(ft.vmap(lambda b: sp.zeta(np.float64(2), b))(q),
                               sp.zeta(np.full(3, 2.0), q))


def test_the_derivative_in_x_raises_only_when_run():
    """Deriving a program that differentiates zeta in x succeeds (so a facade op records);
    running the step raises torch's NotImplementedError, forward and reverse."""
    q = np.array([1.0, 2.0])
    with pytest.raises(NotImplementedError, match="derivative for 'zeta' is not implemented"):
        ft.grad(lambda x: ft.numpy.sum(sp.zeta(x, q)))(np.array([2.0, 3.0]))
    with pytest.raises(NotImplementedError, match="derivative for 'zeta'"):
        ft.jvp(lambda x: sp.zeta(x, q), (np.array([2.0, 3.0]),), (np.ones(2),))
    jaxpr = ft.make_jaxpr(ft.grad(lambda x: ft.numpy.sum(sp.zeta(x, q))))(np.array([2.0, 3.0]))
    assert "zeta_dx" in str(jaxpr)
    x = ft.tensor([2.0, 3.0], requires_grad=True)
    y = ft.special.zeta(x, 2.0)                       # records; backward raises
    with pytest.raises(NotImplementedError, match="derivative for 'zeta'"):
        y.sum().backward()
