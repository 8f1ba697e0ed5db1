"""fnp.linalg.eig and eigvals (issue 18, item 1): values against NumPy, the eigenvector gauge
(unit norm, largest-modulus entry real and positive), and gradients of eigenvalues and of
gauge-invariant eigenvector losses against float64 central differences, for real and complex
matrices, stacks, jit and vmap; JAX's convention for complex gradients (df/dx - i df/dy)."""
from __future__ import annotations

import numpy as np
import pytest

import functrans as ft
import functrans.numpy as fnp
from conftest import fd_grad

pytestmark = pytest.mark.usefixtures("x64")  # float64 references: conftest.x64

RNG = np.random.default_rng(5)
REAL = RNG.standard_normal((4, 4))               # two real eigenvalues and a conjugate pair
CPLX = RNG.standard_normal((3, 3)) + 1j * RNG.standard_normal((3, 3))
STACK = RNG.standard_normal((2, 3, 3))
W = RNG.standard_normal(4) + 1j * RNG.standard_normal(4)


def _gauge(v):
    top = np.take_along_axis(v, np.argmax(np.abs(v), axis=-2)[..., None, :], axis=-2)
    return v * np.conj(top) / np.abs(top)


def _complex_grad(f, z):
    """JAX's gradient of a real f of a complex array: df/dx - i df/dy, central differences."""
    dx = fd_grad(lambda x: f(x + 1j * z.imag), z.real)
    dy = fd_grad(lambda y: f(z.real + 1j * y), z.imag)
    return dx - 1j * dy


def test_values_match_numpy_with_our_gauge():
    for a in (REAL, CPLX, STACK, REAL.astype(np.float32)):
        w, v = fnp.linalg.eig(a)
        nw, nv = np.linalg.eig(a)
        assert w.dtype == v.dtype == np.result_type(a.dtype, np.complex64)
        tol = 1e-5 if a.dtype == np.float32 else 1e-12
        np.testing.assert_allclose(w, nw, rtol=tol, atol=tol)
        np.testing.assert_allclose(v, _gauge(nv.astype(v.dtype)), rtol=tol, atol=tol)
        np.testing.assert_allclose(np.linalg.norm(v, axis=-2), 1.0, rtol=tol)
        np.testing.assert_allclose(a @ v, v * w[..., None, :], atol=10 * tol)
        np.testing.assert_allclose(fnp.linalg.eigvals(a), w, rtol=tol)
    with ft.enable_x64(False):          # integers: the default complex, as JAX
        assert fnp.linalg.eig(np.array([[2, 1], [0, 3]])).eigenvalues.dtype == np.complex64


# (name, real loss of the decomposition, invariant under each eigenvector's phase)
LOSSES = [
    ("|w|", lambda w, v: np.sum(np.abs(w)), lambda w, v: fnp.sum(fnp.abs(w))),
    ("Re(w W)", lambda w, v: np.real(np.sum(w * W[:len(w)])),
     lambda w, v: fnp.real(fnp.sum(w * W[:w.shape[0]]))),
    ("|v|", lambda w, v: np.sum(np.abs(v) * np.arange(v.size).reshape(v.shape)),
     lambda w, v: fnp.sum(fnp.abs(v) * np.arange(v.size).reshape(v.shape))),
    ("|v_i . W|^2", lambda w, v: np.sum(np.abs(W[:len(w)] @ v) ** 2),
     lambda w, v: fnp.sum(fnp.abs(W[:w.shape[0]] @ v) ** 2)),
]


@pytest.mark.parametrize("name,ref,f", LOSSES, ids=[c[0] for c in LOSSES])
@pytest.mark.parametrize("a", [REAL, CPLX], ids=["real", "complex"])
def test_gradients_against_central_differences(name, ref, f, a):
    got = ft.grad(lambda x: f(*fnp.linalg.eig(x)))(a)
    loss = lambda x: ref(*np.linalg.eig(x))  # noqa: E731
    want = fd_grad(loss, a) if a.dtype.kind == "f" else _complex_grad(loss, a)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(ft.jit(ft.grad(lambda x: f(*fnp.linalg.eig(x))))(a), got,
                               rtol=1e-12, atol=1e-13)


def test_eigenvector_derivative_is_that_of_the_returned_gauge():
    """Even a loss that reads the phase (Re v) gets the derivative of what eig returns."""
    da = RNG.standard_normal(REAL.shape)
    _, (dw, dv) = ft.jvp(fnp.linalg.eig, (REAL,), (da,))
    eps = 1e-6
    plus, minus = fnp.linalg.eig(REAL + eps * da), fnp.linalg.eig(REAL - eps * da)
    np.testing.assert_allclose(dw, (plus[0] - minus[0]) / (2 * eps), atol=1e-8)
    np.testing.assert_allclose(dv, (plus[1] - minus[1]) / (2 * eps), atol=1e-8)


def test_stacks_vmap_and_second_derivatives():
    loss = lambda x: fnp.sum(fnp.abs(fnp.linalg.eigvals(x)) ** 2)  # noqa: E731
    g = ft.grad(loss)(STACK)
    np.testing.assert_allclose(g, fd_grad(lambda x: np.sum(np.abs(np.linalg.eigvals(x)) ** 2),
                                          STACK), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(ft.vmap(ft.grad(loss))(STACK), g, rtol=1e-12, atol=1e-13)
    x0 = STACK[0]
    h = ft.hessian(loss)(x0)
    fd_h = np.stack([fd_grad(lambda x: np.asarray(ft.grad(loss)(x))[i], x0)
                     for i in np.ndindex(x0.shape)]).reshape(x0.shape * 2)
    np.testing.assert_allclose(h, fd_h, rtol=1e-5, atol=1e-6)


def test_errors_and_repeated_eigenvalues():
    with pytest.raises(np.linalg.LinAlgError, match="square"):
        fnp.linalg.eig(np.ones((2, 3)))
    with pytest.raises(np.linalg.LinAlgError, match="two-dimensional"):
        fnp.linalg.eigvals(np.ones(3))
    # repeated eigenvalues: the eigenvector derivative is infinite (as in torch), the
    # eigenvalues' sum (the trace) still has its derivative
    g = ft.grad(lambda x: fnp.real(fnp.sum(fnp.linalg.eigvals(x))))(np.eye(3))
    np.testing.assert_allclose(g, np.eye(3))
    with np.errstate(all="ignore"):
        gv = ft.grad(lambda x: fnp.sum(fnp.abs(fnp.linalg.eig(x)[1])))(np.eye(3))
    assert not np.all(np.isfinite(gv))


@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh_of_complex_hermitian_matrices(uplo):
    """eigh reads one triangle of a complex matrix as a Hermitian one (the imaginary part of
    its diagonal ignored, as LAPACK); eigenvalues real, eigenvectors in our gauge; gradients
    df/dx - i df/dy of phase-invariant losses against central differences (issue 18)."""
    a = CPLX + 0.5 * np.eye(3)
    w, v = fnp.linalg.eigh(a, uplo)
    nw, nv = np.linalg.eigh(a, uplo)
    assert w.dtype == np.float64 and v.dtype == np.complex128
    np.testing.assert_allclose(w, nw, rtol=1e-12)
    np.testing.assert_allclose(v, _gauge(nv), atol=1e-12)
    for ref, f in [(lambda w, v: np.sum(w * np.arange(3.0)),
                    lambda w, v: fnp.sum(w * np.arange(3.0))),
                   (lambda w, v: np.sum(np.abs(v) ** 3), lambda w, v: fnp.sum(fnp.abs(v) ** 3))]:
        got = ft.grad(lambda x: f(*fnp.linalg.eigh(x, uplo)))(a)
        want = _complex_grad(lambda x: ref(*np.linalg.eigh(x, uplo)), a)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    stack = np.stack([a, a.T])
    g = ft.vmap(ft.grad(lambda x: fnp.sum(fnp.linalg.eigvalsh(x) ** 3)))(stack)
    np.testing.assert_allclose(g[1], ft.grad(lambda x: fnp.sum(fnp.linalg.eigvalsh(x) ** 3))(a.T),
                               rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5), (2, 3, 4)])
def test_svd_of_complex_matrices(shape):
    """A = U diag(s) Vh with real s; each v_i's largest entry real and positive (u_i turned by
    the same phase); gradients of phase-invariant losses and of the nuclear norm against
    central differences, df/dx - i df/dy (issue 18)."""
    a = RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)
    u, s, vh = fnp.linalg.svd(a, full_matrices=False)
    np.testing.assert_allclose((u * s[..., None, :]) @ vh, a, atol=1e-12)
    np.testing.assert_allclose(s, np.linalg.svd(a, compute_uv=False), rtol=1e-12)
    v = np.swapaxes(vh, -1, -2).conj()
    np.testing.assert_allclose(v, _gauge(v), atol=1e-12)
    w = RNG.standard_normal(u.shape)
    for ref, f in [(lambda x: np.sum(np.abs(np.linalg.svd(x, full_matrices=False)[0]) * w),
                    lambda x: fnp.sum(fnp.abs(fnp.linalg.svd(x, full_matrices=False)[0]) * w)),
                   (lambda x: np.sum(np.abs(np.linalg.svd(x, full_matrices=False)[2]) ** 3),
                    lambda x: fnp.sum(fnp.abs(fnp.linalg.svd(x, full_matrices=False)[2]) ** 3)),
                   (lambda x: np.sum(np.linalg.norm(x, "nuc", axis=(-2, -1))),
                    lambda x: fnp.sum(fnp.linalg.norm(x, "nuc", axis=(-2, -1))))]:
        np.testing.assert_allclose(ft.grad(f)(a), _complex_grad(ref, a), rtol=1e-6, atol=1e-7)
