"""ft.linalg: torch.linalg's norms, decompositions and solvers on Tensors, with PyTorch's
semantics (a norm's derivative is 0 at zero, abs's is sign(x)); an order torch rejects, a
singular or non-square input raises torch's error."""
from __future__ import annotations

import builtins
from collections import namedtuple

import numpy as np

from ..numpy import raw as fnp
from ..numpy._linalg import pinv_tol, solve_matrices
from . import dtypes as D
from .creation import empty
from .reductions import LinAlgError, check_svd_input, matrix_norm_fn, vector_norm_fn
from .tensor import Tensor, apply_fn, static, wrap

INF = float("inf")
_MATRIX_ORDS = ("fro", "nuc", INF, -INF, 1, -1, 2, -2)
SVD = namedtuple("torch_return_types_linalg_svd", ["U", "S", "Vh"])
SLOGDET = namedtuple("torch_return_types_linalg_slogdet", ["sign", "logabsdet"])
QR = namedtuple("torch_return_types_linalg_qr", ["Q", "R"])
EIGH = namedtuple("torch_return_types_linalg_eigh", ["eigenvalues", "eigenvectors"])


def _check_float(A, name):
    if not isinstance(A, Tensor):
        raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(A).__name__}")
    if A.dtype.kind not in "fc":
        raise RuntimeError(f"{name}: Expected a floating point or complex tensor as input. "
                           f"Got {D.type_name(A.dtype).removesuffix('Tensor')}")


def _axes(dim, ndim):
    return tuple(d % builtins.max(ndim, 1) for d in ((dim,) if isinstance(dim, int) else dim))


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    """torch.linalg.vector_norm: over all elements (dim=None) or the given dims."""
    _check_float(x, "linalg.vector_norm")
    if isinstance(ord, str):
        raise RuntimeError(f"linalg.vector_norm: Order {ord} not supported.")
    x = x if dtype is None else x.to(dtype)
    axis = None if dim is None else _axes(dim, x.ndim)
    return apply_fn("LinalgVectorNormBackward0", vector_norm_fn, (x,),
                    static(axis=axis, keepdims=keepdim, p=float(ord)))


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):
    """torch.linalg.matrix_norm: Frobenius, nuclear, spectral (2, -2: the largest and smallest
    singular value) and the max/min absolute column (1, -1) or row (inf, -inf) sum."""
    _check_float(A, "linalg.matrix_norm")
    if A.ndim < 2:
        raise RuntimeError("linalg.matrix_norm: The input tensor A must have at least 2 "
                           "dimensions.")
    if ord not in _MATRIX_ORDS:
        raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
    axes = _axes(dim, A.ndim)
    if len(axes) != 2 or axes[0] == axes[1]:
        raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple of distinct dimensions. "
                           f"Got {tuple(dim)}")
    A = A if dtype is None else A.to(dtype)
    if ord in ("nuc", 2, -2):
        check_svd_input(A, axes)
    return apply_fn("LinalgMatrixNormBackward0", matrix_norm_fn, (A,),
                    static(ord=ord, axes=axes, keepdims=keepdim))


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):
    """torch.linalg.norm: a vector norm for an int dim (or a 1-D input), a matrix norm for a
    2-tuple dim (or a 2-D input with an ord); the 2-norm of all elements when both are None."""
    _check_float(A, "linalg.norm")
    if dim is None:
        if ord is None:
            return vector_norm(A, 2, None, keepdim, dtype=dtype)
        if A.ndim not in (1, 2):
            raise RuntimeError("linalg.norm: If dim is not specified but ord is, the input "
                               f"must be 1D or 2D. Got {A.ndim}D.")
        dim = tuple(range(A.ndim))
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    if len(dims) == 1:
        return vector_norm(A, 2 if ord is None else ord, dims, keepdim, dtype=dtype)
    return matrix_norm(A, "fro" if ord is None else ord, dims, keepdim, dtype=dtype)


def _svdvals_fn(x):
    return fnp.linalg.svd(x, compute_uv=False)


def svdvals(A):
    """The singular values of a real matrix (or a stack), in descending order."""
    _check_float(A, "linalg.svdvals")
    check_svd_input(A)
    return apply_fn("LinalgSvdBackward0", _svdvals_fn, (A,))


def _svd_fn(x, full_matrices):
    return fnp.linalg.svd(x, full_matrices=full_matrices)


def svd(A, full_matrices=True):
    """torch.linalg.svd of a real matrix (or a stack): (U, S, Vh); full_matrices=True of a
    non-square matrix is not supported (pass False)."""
    _check_float(A, "linalg.svd")
    check_svd_input(A)
    return SVD(*apply_fn("LinalgSvdBackward0", _svd_fn, (A,),
                         static(full_matrices=full_matrices)))


def _check_square(A, name):
    _check_float(A, name)
    if A.ndim < 2:
        raise RuntimeError(f"{name}: The input tensor A must have at least 2 dimensions.")
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"{name}: A must be batches of square matrices, but they are "
                           f"{A.shape[-2]} by {A.shape[-1]} matrices")


def _first_failure(mats, bad):
    """(batch prefix, detail) of the first matrix in the stack for which bad(m) is not None,
    in torch's words ('(Batch element i): ' for a stack)."""
    flat = mats.reshape((-1,) + mats.shape[-2:])
    for i, m in enumerate(flat):
        detail = bad(m)
        if detail is not None:
            return (f"(Batch element {i}): " if mats.ndim > 2 else ""), detail
    return "", None


def _zero_pivot(m):
    """The 1-based index of LU's first zero pivot (partial pivoting), as LAPACK's info."""
    u = np.array(m, np.float64)
    for k in range(u.shape[0]):
        p = k + int(np.argmax(np.abs(u[k:, k])))
        if u[p, k] == 0:
            return k + 1
        u[[k, p]] = u[[p, k]]
        u[k + 1:] -= np.outer(u[k + 1:, k] / u[k, k], u[k])
    return None


def _non_pd_minor(m):
    """The order of the first leading minor that is not positive-definite."""
    for k in range(1, m.shape[0] + 1):
        try:
            np.linalg.cholesky(np.tril(m[:k, :k]) + np.tril(m[:k, :k], -1).T)
        except np.linalg.LinAlgError:
            return k
    return None


def _run(A, name, thunk):
    """thunk() with NumPy's LinAlgError turned into torch's text for the failing matrix."""
    try:
        return thunk()
    except np.linalg.LinAlgError:
        mats = np.asarray(A.detach().numpy())
        if name == "linalg.cholesky":
            where, k = _first_failure(mats, _non_pd_minor)
            raise LinAlgError(f"{name}: {where}The factorization could not be completed because "
                              f"the input is not positive-definite (the leading minor of order "
                              f"{k} is not positive-definite).") from None
        where, k = _first_failure(mats, _zero_pivot)
        if name == "linalg.inv":
            raise LinAlgError(f"{name}: {where}The diagonal element {k} is zero, the inversion "
                              "could not be completed because the input matrix is singular.") \
                from None
        raise LinAlgError(f"{name}: {where}The solver failed because the input matrix is "
                          "singular.") from None


def _solve_fn(a, b, vector, left):
    if not left:                                  # X A = B  <=>  Aᵀ Xᵀ = Bᵀ
        a, b = fnp.swapaxes(a, -1, -2), fnp.swapaxes(b, -1, -2)
    if vector:
        return solve_matrices(a, fnp.expand_dims(b, -1))[..., 0]
    x = solve_matrices(a, b)
    return x if left else fnp.swapaxes(x, -1, -2)


def solve(A, B, *, left=True):
    """torch.linalg.solve: X with A X = B (X A = B for left=False); B is a (batch of)
    vector(s) when it is 1-D or has A's shape without its last axis."""
    _check_square(A, "linalg.solve")
    if not isinstance(B, Tensor):
        raise TypeError(f"linalg.solve(): argument 'B' (position 2) must be Tensor, not "
                        f"{type(B).__name__}")
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))
    if vector and not left:
        raise RuntimeError("linalg.solve: Vector broadcasting of the left hand side is not "
                           "supported for left=False. In this case linalg.solve is equivalent "
                           "to B / A.squeeze(-1)")
    n = A.shape[-1]
    rows = B.shape[-1] if vector else (B.shape[-2] if left else B.shape[-1])
    if rows != n:
        raise RuntimeError(f"linalg.solve: Incompatible shapes of A and B for the equation "
                           f"{'AX = B' if left else 'XA = B'} ({'x'.join(map(str, A.shape[-2:]))} "
                           f"and {'x'.join(map(str, B.shape[-2:] if B.ndim > 1 else B.shape))})")
    if B.dtype != A.dtype:
        raise RuntimeError(f"linalg.solve: Expected A and B to have the same dtype, but found "
                           f"A of type {D.type_name(A.dtype).removesuffix('Tensor')} and B of "
                           f"type {D.type_name(B.dtype).removesuffix('Tensor')} instead")
    return _run(A, "linalg.solve", lambda: apply_fn(
        "LinalgSolveExBackward0", _solve_fn, (A, B), static(vector=vector, left=left)))


def _inv_fn(a):
    return fnp.linalg.inv(a)


def inv(A):
    """torch.linalg.inv of a square matrix (or a stack)."""
    _check_square(A, "linalg.inv")
    return _run(A, "linalg.inv", lambda: apply_fn("LinalgInvExBackward0", _inv_fn, (A,)))


def _slogdet_fn(a):
    return tuple(fnp.linalg.slogdet(a))


def slogdet(A):
    """torch.linalg.slogdet: (sign, log|det A|); a singular A gives (0, -inf)."""
    _check_square(A, "linalg.slogdet")
    return SLOGDET(*apply_fn("LinalgSlogdetBackward0", _slogdet_fn, (A,)))


def _det_fn(a):
    return fnp.linalg.det(a)


def det(A):
    """torch.linalg.det, as sign * exp(log|det|): its gradient det * A⁻ᵀ needs an invertible
    A (at a singular one, backward raises the solver's error)."""
    _check_square(A, "linalg.det")
    return apply_fn("LinalgDetBackward0", _det_fn, (A,))


def _cholesky_fn(a, upper):
    return fnp.linalg.cholesky(a, upper=upper)


def cholesky(A, *, upper=False):
    """torch.linalg.cholesky, read from A's lower triangle (gradients go to it alone)."""
    _check_square(A, "linalg.cholesky")
    return _run(A, "linalg.cholesky", lambda: apply_fn(
        "LinalgCholeskyExBackward0", _cholesky_fn, (A,), static(upper=upper)))


def _qr_fn(a, mode):
    out = fnp.linalg.qr(a, mode="reduced")
    return (out[0], out[1]) if mode == "reduced" else out[1]


def qr(A, mode="reduced"):
    """torch.linalg.qr: mode 'reduced' or 'r' (Q empty); 'complete' where it equals 'reduced'
    (m <= n)."""
    _check_float(A, "linalg.qr")
    if A.ndim < 2:
        raise RuntimeError("linalg.qr: The input tensor A must have at least 2 dimensions.")
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of "
                           "'reduced' (default), 'r', or 'complete'")
    if mode == "complete" and A.shape[-2] > A.shape[-1]:
        raise NotImplementedError(f"linalg.qr: mode='complete' of a tall {A.shape[-2]} x "
                                  f"{A.shape[-1]} matrix is not supported (its extra columns "
                                  "have no derivative); use mode='reduced'")
    if mode == "r":
        return QR(empty(0, dtype=A.dtype),
                  apply_fn("LinalgQrBackward0", _qr_fn, (A,), static(mode="r")))
    return QR(*apply_fn("LinalgQrBackward0", _qr_fn, (A,), static(mode="reduced")))


def _eigh_fn(a, uplo):
    return tuple(fnp.linalg.eigh(a, UPLO=uplo))


def eigh(A, UPLO="L"):  # noqa: N803  (torch's name)
    """torch.linalg.eigh: ascending eigenvalues and orthonormal eigenvectors of a symmetric
    matrix read from its UPLO triangle; each eigenvector's largest-magnitude entry is
    positive (torch leaves the sign to LAPACK)."""
    _check_square(A, "linalg.eigh")
    if UPLO not in ("L", "U"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")
    return EIGH(*apply_fn("LinalgEighBackward0", _eigh_fn, (A,), static(uplo=UPLO)))


def eigvalsh(A, UPLO="L"):  # noqa: N803
    """torch.linalg.eigvalsh: the eigenvalues of eigh, ascending."""
    return eigh(A, UPLO)[0]


EIG = namedtuple("torch_return_types_linalg_eig", ["eigenvalues", "eigenvectors"])


def _eig_fn(a):
    return tuple(fnp.linalg.eig(a))


def eig(A):
    """torch.linalg.eig: eigenvalues and unit eigenvectors of a general square matrix, both
    complex; each eigenvector's largest-modulus entry is real and positive (torch leaves
    the phase to LAPACK: losses that do not depend on it get torch's gradients)."""
    _check_square(A, "linalg.eig")
    data = A._data
    if type(data) is np.ndarray and not np.isfinite(data).all():
        raise RuntimeError("torch.linalg.eig: input tensor should not contain infs or NaNs.")
    return EIG(*apply_fn("LinalgEigBackward0", _eig_fn, (A,)))


def eigvals(A):
    """torch.linalg.eigvals: the eigenvalues of eig (complex); NaN for a matrix holding inf
    or NaN (eig raises there, as torch's)."""
    _check_square(A, "linalg.eigvals")
    return apply_fn("LinalgEigBackward0", _eig_fn, (A,))[0]


def pinv(A, *, atol=None, rtol=None, hermitian=False):
    """torch.linalg.pinv: singular values at or below max(atol, rtol * the largest) count as
    zero; rtol defaults to max(m, n) * eps, or to 0 when only atol > 0 is given (torch's
    rule). hermitian=True gives the same values through the SVD (torch uses eigh)."""
    _check_float(A, "linalg.pinv")
    if A.ndim < 2:
        kind = D.type_name(A.dtype).removesuffix("Tensor")
        raise RuntimeError(f"linalg.pinv({kind}{{{list(A.shape)}}}): expected a tensor with 2 "
                           "or more dimensions of float, double, cfloat or cdouble types")
    a = 0.0 if atol is None else float(atol)
    if rtol is None:
        rtol = 0.0 if a > 0 else builtins.max(A.shape[-2:]) * float(np.finfo(A.dtype).eps)
    check_svd_input(A)
    return apply_fn("LinalgPinvBackward0", pinv_tol, (A,),
                    static(rtol=float(rtol), atol=a))


# ---------------------------------------------------------------------------------------
# the matrix exponential and Householder products (nn.utils.parametrizations.orthogonal)

# Higham (2005): the degree-13 Padé approximant of exp is accurate to double precision for
# ‖A‖₁ ≤ θ₁₃; larger matrices are scaled by 2⁻ˢ first and the result squared s times
_PADE13 = (64764752532480000., 32382376266240000., 7771770303897600., 1187353796428800.,
           129060195264000., 10559470521600., 670442572800., 33522128640., 1323241920.,
           40840800., 960960., 16380., 182., 1.)
_THETA13 = 5.371920351148152


def _expm_fn(a, squarings):
    """exp(a) of a (batch of) square matrices by the scaled Padé-13 approximant, written in
    functrans.numpy (its derivative is that of the approximant: exp's to the same
    precision). `squarings` is static: the program is the same for every value it fits."""
    b = _PADE13
    n = a.shape[-1]
    a = a * (0.5 ** squarings)
    ident = fnp.broadcast_to(fnp.eye(n, dtype=a.dtype), a.shape)
    a2 = fnp.matmul(a, a)
    a4 = fnp.matmul(a2, a2)
    a6 = fnp.matmul(a4, a2)
    u = fnp.matmul(a, fnp.matmul(a6, b[13] * a6 + b[11] * a4 + b[9] * a2)
                   + b[7] * a6 + b[5] * a4 + b[3] * a2 + b[1] * ident)
    v = fnp.matmul(a6, b[12] * a6 + b[10] * a4 + b[8] * a2) + b[6] * a6 + b[4] * a4 \
        + b[2] * a2 + b[0] * ident
    r = fnp.linalg.solve(v - u, v + u)
    for _ in range(squarings):
        r = fnp.matmul(r, r)
    return r


def matrix_exp(A):
    """torch.linalg.matrix_exp (torch.matrix_exp): exp of a square matrix or a stack of
    them, with gradients; the number of squarings is read from the largest 1-norm."""
    _check_float(A, "linalg.matrix_exp")
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise RuntimeError("linalg.matrix_exp: A must be batches of square matrices, but they "
                           f"are {A.shape[-2] if A.ndim > 1 else 1} by {A.shape[-1]} matrices")
    data = A._data
    if isinstance(data, np.ndarray) and data.size:
        norm = float(np.abs(data).sum(axis=-2).max())
        squarings = builtins.max(0, int(np.ceil(np.log2(norm / _THETA13)))) \
            if np.isfinite(norm) and norm > _THETA13 else 0
    else:
        squarings = 0
    return apply_fn("LinalgMatrixExpBackward0", _expm_fn, (A,), static(squarings=squarings))


def _householder_fn(a, tau):
    """H₁ H₂ … H_k applied to the first k columns of the identity, Hᵢ = I - τᵢ vᵢ vᵢᴴ with
    vᵢ = eᵢ + (a's column i below the diagonal): LAPACK's orgqr, in functrans.numpy."""
    m, n = a.shape[-2], a.shape[-1]
    rows = np.arange(m)
    q = fnp.broadcast_to(fnp.eye(m, n, dtype=a.dtype), a.shape)
    for i in reversed(range(tau.shape[-1])):
        v = fnp.where(rows > i, a[..., :, i], 0) + (rows == i).astype(a.dtype)
        vq = fnp.einsum("...n,...nk->...k", fnp.conj(v), q)
        q = q - tau[..., i, None, None] * v[..., :, None] * vq[..., None, :]
    return q


def householder_product(A, tau):
    """torch.linalg.householder_product: the first n columns of the product of the
    Householder reflectors stored below A's diagonal (A: m x n, tau: n' <= n)."""
    _check_float(A, "linalg.householder_product")
    if A.ndim < 2:
        raise RuntimeError("torch.linalg.householder_product: input must have at least 2 "
                           "dimensions.")
    m, n = A.shape[-2], A.shape[-1]
    if m < n:
        raise RuntimeError("torch.linalg.householder_product: input.shape[-2] must be greater "
                           "than or equal to input.shape[-1]")
    if tau.shape[-1] > n:
        raise RuntimeError("torch.linalg.householder_product: input.shape[-1] must be greater "
                           "than or equal to tau.shape[-1]")
    if tau.dtype != A.dtype:
        raise RuntimeError(f"torch.linalg.householder_product: tau dtype "
                           f"{D.scalar_name(tau.dtype)} does not match input dtype "
                           f"{D.scalar_name(A.dtype)}")
    return apply_fn("LinalgHouseholderProductBackward0", _householder_fn, (A, tau))


GEQRF = namedtuple("torch_return_types_geqrf", ["a", "tau"])


def geqrf(A):
    """torch.geqrf: LAPACK's QR in compact form, (R above and on the diagonal with the
    Householder vectors below it, tau). Not differentiable, as torch's."""
    _check_float(A, "geqrf")
    if A.ndim < 2:
        raise RuntimeError("torch.geqrf: input must have at least 2 dimensions.")
    h, tau = np.linalg.qr(np.asarray(A._data), mode="raw")
    return GEQRF(wrap(np.ascontiguousarray(np.swapaxes(h, -1, -2))), wrap(tau))
