"""Vector and matrix norms with every order NumPy/JAX (fnp.linalg.norm) and PyTorch
(ft.linalg, Tensor.norm) accept, against NumPy and float64 central differences; spectral and
nuclear norms through the svd primitive; an order not accepted raises (issue 12, item 7)."""
from __future__ import annotations

import numpy as np
import pytest

import functrans as ft
import functrans.numpy as fnp
from conftest import fd_grad

pytestmark = pytest.mark.usefixtures("x64")  # float64 references: conftest.x64

INF = np.inf
RNG = np.random.default_rng(7)
V = RNG.standard_normal(5)
A = RNG.standard_normal((3, 4))
B = RNG.standard_normal((2, 3, 4))
VECTOR_ORDS = [None, 0, 1, 2, INF, -INF, 3, 0.5, -1, -2]
MATRIX_ORDS = [None, "fro", "nuc", 1, -1, 2, -2, INF, -INF]
CASES = ([(V, o, None) for o in VECTOR_ORDS] + [(A, o, None) for o in MATRIX_ORDS]
         + [(A.T, o, None) for o in MATRIX_ORDS] + [(B, o, (2, 0)) for o in MATRIX_ORDS]
         + [(B, o, 1) for o in VECTOR_ORDS] + [(B, None, None)])


def _weights(x, ord, axis):
    n = np.linalg.norm(x, ord, axis=axis)
    return np.arange(1.0, 1.0 + np.size(n)).reshape(np.shape(n))


@pytest.mark.parametrize("i", range(len(CASES)))
def test_fnp_norm_matches_numpy_and_differences(i):
    x, ord, axis = CASES[i]
    for keepdims in (False, True):
        got = fnp.linalg.norm(x, ord, axis=axis, keepdims=keepdims)
        want = np.linalg.norm(x, ord, axis=axis, keepdims=keepdims)
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-12)
    if ord == 0:
        return                                  # a count: no derivative
    w = _weights(x, ord, axis)
    g = ft.grad(lambda y: fnp.sum(fnp.linalg.norm(y, ord, axis=axis) * w))(x)
    np.testing.assert_allclose(g, fd_grad(lambda y: np.sum(np.linalg.norm(y, ord, axis=axis) * w),
                                          x), rtol=1e-6, atol=1e-8)


def test_spectral_norm_is_not_the_frobenius_norm():
    """fnp.linalg.norm(A, 2) returned the Frobenius norm, and matrix ord=1/inf flattened."""
    m = np.array([[1.0, 2.0], [3.0, -1.0]])
    assert np.isclose(fnp.linalg.norm(m, 2), np.linalg.norm(m, 2), rtol=1e-14)
    assert not np.isclose(fnp.linalg.norm(m, 2), np.linalg.norm(m, "fro"))
    assert np.isclose(fnp.linalg.norm(m, 1), 4.0) and np.isclose(fnp.linalg.norm(m, INF), 4.0)
    assert np.isclose(fnp.linalg.norm(m, -2), np.linalg.norm(m, -2), rtol=1e-14)


def test_fnp_norm_under_jit_and_vmap():
    np.testing.assert_allclose(ft.jit(lambda a: fnp.linalg.norm(a, 2))(A),
                               np.linalg.norm(A, 2), rtol=1e-12)
    np.testing.assert_allclose(ft.vmap(lambda a: fnp.linalg.norm(a, "nuc"))(B),
                               np.linalg.norm(B, "nuc", axis=(1, 2)), rtol=1e-12)
    g = ft.vmap(ft.grad(lambda a: fnp.linalg.norm(a, 2)))(B)
    for k in range(2):
        np.testing.assert_allclose(g[k], fd_grad(lambda y: np.linalg.norm(y, 2), B[k]),
                                   rtol=1e-6)


def test_unsupported_orders_raise():
    with pytest.raises(ValueError, match="Invalid norm order 'nuc' for vectors"):
        fnp.linalg.norm(V, "nuc")
    with pytest.raises(ValueError, match="Invalid norm order 3 for matrices"):
        fnp.linalg.norm(A, 3)
    with pytest.raises(ValueError, match="improper number of dimensions"):
        fnp.linalg.norm(B, 2)
    with pytest.raises(ValueError, match="pair of distinct axes"):
        fnp.linalg.norm(B, 2, axis=(0, 1, 2))


def test_repeated_singular_values_give_finite_norm_gradients():
    np.testing.assert_allclose(ft.grad(lambda a: fnp.linalg.norm(a, "nuc"))(np.eye(3)),
                               np.eye(3), atol=1e-15)
    np.testing.assert_allclose(ft.grad(lambda a: fnp.linalg.norm(a, 2))(np.eye(2)),
                               np.eye(2) / 2, atol=1e-15)     # max of a tie: split evenly


def test_fnp_svd():
    u, s, vh = fnp.linalg.svd(A, full_matrices=False)
    np.testing.assert_allclose((u * s) @ vh, A, atol=1e-12)
    np.testing.assert_allclose(fnp.linalg.svd(B, compute_uv=False),
                               np.linalg.svd(B, compute_uv=False), rtol=1e-12)
    sq = A[:, :3]
    np.testing.assert_allclose(fnp.linalg.svd(sq)[1], np.linalg.svd(sq)[1], rtol=1e-12)
    with pytest.raises(NotImplementedError, match="full_matrices=False"):
        fnp.linalg.svd(A)
    ac = A + 1j * A[::-1]                        # complex matrices: supported (issue 18)
    u, s, vh = fnp.linalg.svd(ac, full_matrices=False)
    assert s.dtype == np.float64 and u.dtype == vh.dtype == np.complex128
    np.testing.assert_allclose((u * s) @ vh, ac, atol=1e-12)
    np.testing.assert_allclose(s, np.linalg.svd(ac, compute_uv=False), rtol=1e-12)


# ---------------------------------------------------------------------------
# the facade: torch.linalg's semantics


def _t(x):
    return ft.tensor(np.asarray(x, np.float64), dtype=ft.float64, requires_grad=True)


@pytest.mark.parametrize("ord", ["fro", "nuc", 1, -1, 2, -2, INF, -INF])
def test_torch_matrix_norm(ord):
    t = _t(A)
    n = ft.linalg.matrix_norm(t, ord)
    n.backward()
    np.testing.assert_allclose(float(n), np.linalg.norm(A, ord), rtol=1e-12)
    np.testing.assert_allclose(t.grad.numpy(), fd_grad(lambda y: np.linalg.norm(y, ord), A),
                               rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(float(ft.linalg.norm(ft.tensor(A), ord)), np.linalg.norm(A, ord),
                               rtol=1e-6)
    got = ft.linalg.matrix_norm(ft.tensor(B), ord, dim=(2, 0), keepdim=True)
    np.testing.assert_allclose(got.numpy(), np.linalg.norm(B, ord, axis=(2, 0), keepdims=True),
                               rtol=1e-5)


@pytest.mark.parametrize("ord", [2, 1, 0, INF, -INF, 3, 0.5])
def test_torch_vector_norm(ord):
    t = _t(V)
    n = ft.linalg.vector_norm(t, ord)
    n.backward()
    np.testing.assert_allclose(float(n), np.linalg.norm(V, ord), rtol=1e-12)
    want = 0 * V if ord == 0 else fd_grad(lambda y: np.linalg.norm(y, ord), V)
    np.testing.assert_allclose(t.grad.numpy(), want, rtol=1e-6, atol=1e-8)
    assert ft.linalg.norm(ft.tensor(np.ones((2, 3, 4))), dim=(0, 2), keepdim=True).shape == \
        (1, 3, 1)


def test_torch_norms_at_zero_and_at_ties_follow_pytorch():
    z = _t(np.zeros((2, 2)))
    ft.linalg.matrix_norm(z).backward()
    np.testing.assert_array_equal(z.grad.numpy(), np.zeros((2, 2)))
    z = _t(np.zeros(3))
    ft.linalg.vector_norm(z, 1).backward()
    np.testing.assert_array_equal(z.grad.numpy(), np.zeros(3))
    eye = _t(np.eye(3))
    eye.norm(p="nuc").backward()
    np.testing.assert_allclose(eye.grad.numpy(), np.eye(3), atol=1e-15)


def test_torch_norm_errors():
    with pytest.raises(RuntimeError, match="Order 3 not supported"):
        ft.linalg.matrix_norm(ft.tensor(A), 3)
    with pytest.raises(RuntimeError, match="Expected a floating point or complex tensor as input. Got Long"):
        ft.linalg.vector_norm(ft.tensor([1, 2]))
    with pytest.raises(RuntimeError, match="must be 1D or 2D. Got 3D"):
        ft.linalg.norm(ft.zeros(2, 2, 2), 2)
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        ft.linalg.matrix_norm(ft.zeros(3))


def test_torch_svd_and_svdvals():
    np.testing.assert_allclose(ft.linalg.svdvals(ft.tensor(A, dtype=ft.float64)).numpy(),
                               np.linalg.svd(A, compute_uv=False), rtol=1e-12)
    U, S, Vh = ft.linalg.svd(ft.tensor(A, dtype=ft.float64), full_matrices=False)
    np.testing.assert_allclose(((U * S) @ Vh).numpy(), A, atol=1e-12)
    t = _t(A)
    ft.linalg.svdvals(t).sum().backward()
    np.testing.assert_allclose(t.grad.numpy(), fd_grad(lambda y: np.linalg.norm(y, "nuc"), A),
                               rtol=1e-6)
