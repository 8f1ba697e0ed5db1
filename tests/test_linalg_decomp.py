"""solve, inv, det, slogdet, cholesky, qr, eigh in fnp.linalg (NumPy's names) and ft.linalg
(torch's): values against NumPy, gradients of the facade and of ft.grad against float64
central differences, jit and vmap, and torch's errors for singular and non-square inputs
(issue 15, item 2)."""
from __future__ import annotations

import numpy as np
import pytest

import functrans as ft
import functrans.numpy as fnp
from conftest import fd_grad

pytestmark = pytest.mark.usefixtures("x64")  # float64 references: conftest.x64

RNG = np.random.default_rng(3)
A = RNG.standard_normal((4, 4)) + 4 * np.eye(4)
SPD = A @ A.T
TALL = RNG.standard_normal((5, 3))
WIDE = RNG.standard_normal((3, 5))
STACK = RNG.standard_normal((2, 3, 3)) + 3 * np.eye(3)
BVEC = RNG.standard_normal(4)
BMAT = RNG.standard_normal((4, 2))


def _signed(v):
    """Eigenvectors with each one's largest-magnitude entry positive (our convention)."""
    top = np.take_along_axis(v, np.argmax(np.abs(v), axis=-2)[..., None, :], axis=-2)
    return v * np.where(top < 0, -1, 1)


# (name, fnp function of one matrix returning a scalar-able array, NumPy reference, input)
CASES = [
    ("solve_vec", lambda a: fnp.linalg.solve(a, BVEC), lambda a: np.linalg.solve(a, BVEC), A),
    ("solve_mat", lambda a: fnp.linalg.solve(a, BMAT), lambda a: np.linalg.solve(a, BMAT), A),
    ("inv", fnp.linalg.inv, np.linalg.inv, A),
    ("inv_stack", fnp.linalg.inv, np.linalg.inv, STACK),
    ("det", fnp.linalg.det, np.linalg.det, A),
    ("det_stack", fnp.linalg.det, np.linalg.det, STACK),
    ("logabsdet", lambda a: fnp.linalg.slogdet(a)[1], lambda a: np.linalg.slogdet(a)[1], A),
    ("cholesky", fnp.linalg.cholesky, np.linalg.cholesky, SPD),
    ("cholesky_upper", lambda a: fnp.linalg.cholesky(a, upper=True),
     lambda a: np.linalg.cholesky(a).T, SPD),
    ("qr_q_tall", lambda a: fnp.linalg.qr(a)[0], lambda a: np.linalg.qr(a)[0], TALL),
    ("qr_r_tall", lambda a: fnp.linalg.qr(a)[1], lambda a: np.linalg.qr(a)[1], TALL),
    ("qr_q_wide", lambda a: fnp.linalg.qr(a)[0], lambda a: np.linalg.qr(a)[0], WIDE),
    ("qr_r_wide", lambda a: fnp.linalg.qr(a, mode="r"), lambda a: np.linalg.qr(a)[1], WIDE),
    ("eigvalsh", fnp.linalg.eigvalsh, np.linalg.eigvalsh, SPD),
    ("eigh_vectors", lambda a: fnp.linalg.eigh(a)[1], lambda a: _signed(np.linalg.eigh(a)[1]),
     SPD),
    ("eigh_upper", lambda a: fnp.linalg.eigh(a, UPLO="U")[0],
     lambda a: np.linalg.eigh(a, UPLO="U")[0], A),
]


@pytest.mark.parametrize("name,f,ref,x", CASES, ids=[c[0] for c in CASES])
def test_fnp_values_gradients_jit_vmap(name, f, ref, x):
    np.testing.assert_allclose(f(x), ref(x), rtol=1e-10, atol=1e-12)
    w = np.arange(1.0, 1.0 + np.size(ref(x))).reshape(np.shape(ref(x)))
    g = ft.grad(lambda a: fnp.sum(f(a) * w))(x)
    # the symmetric routines read one triangle: differences along a general direction see it
    np.testing.assert_allclose(g, fd_grad(lambda a: np.sum(ref(a) * w), x), rtol=1e-6,
                               atol=1e-6)
    np.testing.assert_allclose(ft.jit(f)(x), ref(x), rtol=1e-10, atol=1e-12)
    xs = np.stack([x, x * 1.5])
    np.testing.assert_allclose(ft.vmap(f)(xs), np.stack([ref(x), ref(x * 1.5)]), rtol=1e-10,
                               atol=1e-12)


def test_fnp_solve_broadcasts_and_slogdet_names():
    b = RNG.standard_normal((2, 3, 1))
    np.testing.assert_allclose(fnp.linalg.solve(STACK, b), np.linalg.solve(STACK, b))
    sign, logabs = fnp.linalg.slogdet(np.diag([-2.0, 3.0]))
    assert (float(sign), float(logabs)) == (-1.0, pytest.approx(np.log(6.0)))
    assert fnp.linalg.slogdet(A).logabsdet == pytest.approx(np.linalg.slogdet(A)[1])
    with pytest.raises(np.linalg.LinAlgError, match="square"):
        fnp.linalg.inv(TALL)
    with pytest.raises(NotImplementedError, match="mode='complete'"):
        fnp.linalg.qr(TALL, mode="complete")


TORCH_CASES = [
    ("solve", lambda a: ft.linalg.solve(a, ft.tensor(BVEC)), lambda a: np.linalg.solve(a, BVEC)),
    ("solve_right", lambda a: ft.linalg.solve(a, ft.tensor(BMAT.T), left=False),
     lambda a: np.linalg.solve(a.T, BMAT).T),
    ("inv", ft.linalg.inv, np.linalg.inv),
    ("det", ft.linalg.det, np.linalg.det),
    ("slogdet", lambda a: ft.linalg.slogdet(a).logabsdet, lambda a: np.linalg.slogdet(a)[1]),
    ("cholesky", lambda a: ft.linalg.cholesky(a @ a.mT), lambda a: np.linalg.cholesky(a @ a.T)),
    ("qr", lambda a: ft.linalg.qr(a).Q, lambda a: np.linalg.qr(a)[0]),
    ("eigh", lambda a: ft.linalg.eigh(a @ a.mT).eigenvalues, lambda a: np.linalg.eigvalsh(a @ a.T)),
]


@pytest.mark.parametrize("name,f,ref", TORCH_CASES, ids=[c[0] for c in TORCH_CASES])
def test_torch_values_and_backward(name, f, ref):
    a = ft.tensor(A, requires_grad=True)
    out = f(a)
    np.testing.assert_allclose(out.detach().numpy(), ref(A), rtol=1e-10, atol=1e-12)
    w = np.arange(1.0, 1.0 + out.numel()).reshape(tuple(out.shape))
    (out * ft.tensor(w)).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), fd_grad(lambda x: np.sum(ref(x) * w), A),
                               rtol=1e-6, atol=1e-6)


def test_torch_return_types():
    q, r = ft.linalg.qr(ft.tensor(TALL))
    assert tuple(q.shape) == (5, 3) and tuple(r.shape) == (3, 3)
    assert ft.linalg.qr(ft.tensor(TALL), mode="r").Q.numel() == 0
    w, v = ft.linalg.eigh(ft.tensor(SPD))
    np.testing.assert_allclose(((v * w) @ v.mT).numpy(), SPD, rtol=1e-10)
    assert ft.linalg.slogdet(ft.tensor(np.diag([-2.0, 3.0]))).sign.item() == -1.0
    assert ft.linalg.slogdet(ft.zeros(2, 2)).logabsdet.item() == -np.inf
    assert ft.linalg.det(ft.zeros(2, 2)).item() == 0.0
    assert ft.linalg.cholesky(ft.tensor(SPD), upper=True).numpy() == pytest.approx(
        np.linalg.cholesky(SPD).T)


@pytest.mark.parametrize("call,err,msg", [
    (lambda: ft.linalg.inv(ft.tensor([[1.0, 2.0], [2.0, 4.0]])), ft.linalg.LinAlgError,
     "linalg.inv: The diagonal element 2 is zero, the inversion could not be completed because "
     "the input matrix is singular."),
    (lambda: ft.linalg.inv(ft.tensor([[[1.0, 0.0], [0.0, 1.0]], [[0.0, 0.0], [0.0, 1.0]]])),
     ft.linalg.LinAlgError, "linalg.inv: (Batch element 1): The diagonal element 1 is zero"),
    (lambda: ft.linalg.solve(ft.zeros(2, 2), ft.ones(2)), ft.linalg.LinAlgError,
     "linalg.solve: The solver failed because the input matrix is singular."),
    (lambda: ft.linalg.cholesky(ft.tensor([[1.0, 2.0], [2.0, 1.0]])), ft.linalg.LinAlgError,
     "linalg.cholesky: The factorization could not be completed because the input is not "
     "positive-definite (the leading minor of order 2 is not positive-definite)."),
    (lambda: ft.linalg.det(ft.ones(2, 3)), RuntimeError,
     "linalg.det: A must be batches of square matrices, but they are 2 by 3 matrices"),
    (lambda: ft.linalg.inv(ft.ones(3)), RuntimeError,
     "linalg.inv: The input tensor A must have at least 2 dimensions."),
    (lambda: ft.linalg.inv(ft.ones(2, 2, dtype=ft.int64)), RuntimeError,
     "linalg.inv: Expected a floating point or complex tensor as input. Got Long"),
    (lambda: ft.linalg.solve(ft.eye(2), ft.ones(3)), RuntimeError,
     "linalg.solve: Incompatible shapes of A and B for the equation AX = B (2x2 and 3)"),
    (lambda: ft.linalg.eigh(ft.eye(2), UPLO="X"), RuntimeError,
     "Expected UPLO argument to be 'L' or 'U', but got X"),
])
def test_torch_errors(call, err, msg):
    with pytest.raises(err) as info:
        call()
    assert str(info.value).startswith(msg)
    assert issubclass(ft.linalg.LinAlgError, RuntimeError)


# ---------------------------------------------------------------------------
# ft.linalg.eig / eigvals / pinv (torch's names on Tensors)

def test_facade_eig_values_and_phase_free_gradients():
    rng = np.random.default_rng(3)
    a0 = rng.standard_normal((4, 4))
    a = ft.tensor(a0, requires_grad=True)
    w, v = ft.linalg.eig(a)
    assert w.dtype == ft.complex128 and v.dtype == ft.complex128
    np.testing.assert_allclose(np.sort_complex(w.detach().numpy()),
                               np.sort_complex(np.linalg.eigvals(a0)), atol=1e-12)
    np.testing.assert_allclose(a0 @ v.detach().numpy(),
                               v.detach().numpy() * w.detach().numpy(), atol=1e-12)
    # sum |lambda|^2 and sum |v_ij|^4 do not depend on the eigenvectors' phases
    loss = (ft.linalg.eigvals(a).abs() ** 2).sum() + (v.abs() ** 4).sum()
    loss.backward()

    def ref(m):
        lam, vec = np.linalg.eig(m)
        vec = vec / np.linalg.norm(vec, axis=0)
        return np.sum(np.abs(lam) ** 2) + np.sum(np.abs(vec) ** 4)
    np.testing.assert_allclose(a.grad.numpy(), fd_grad(ref, a0), rtol=1e-6, atol=1e-7)
    with pytest.raises(RuntimeError, match="linalg.eig: A must be batches of square"):
        ft.linalg.eig(ft.ones(2, 3))


def test_facade_pinv_tolerances_and_gradient():
    rng = np.random.default_rng(4)
    b0 = rng.standard_normal((5, 3))
    b = ft.tensor(b0, requires_grad=True)
    p = ft.linalg.pinv(b)
    np.testing.assert_allclose(p.detach().numpy(), np.linalg.pinv(b0), atol=1e-12)
    (p ** 2).sum().backward()
    np.testing.assert_allclose(b.grad.numpy(), fd_grad(lambda m: np.sum(np.linalg.pinv(m) ** 2),
                                                        b0), rtol=1e-6, atol=1e-7)
    c = ft.tensor([[2.0, 0.0], [0.0, 1e-4]], dtype=ft.float64)
    np.testing.assert_allclose(ft.linalg.pinv(c, atol=1e-3).numpy(), [[0.5, 0.0], [0.0, 0.0]])
    np.testing.assert_allclose(ft.linalg.pinv(c, rtol=1e-3).numpy(), [[0.5, 0.0], [0.0, 0.0]])
    np.testing.assert_allclose(ft.linalg.pinv(c).numpy(), [[0.5, 0.0], [0.0, 1e4]])
    np.testing.assert_allclose(ft.linalg.pinv(c, atol=1e-5, rtol=1e-3).numpy(),  # the larger
                               [[0.5, 0.0], [0.0, 0.0]])
    with pytest.raises(RuntimeError, match=r"linalg.pinv\(Float\{\[2\]\}\): expected a tensor "
                                           "with 2 or more dimensions"):
        ft.linalg.pinv(ft.tensor([1.0, 2.0]))
