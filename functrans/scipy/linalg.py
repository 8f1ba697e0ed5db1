"""functrans.scipy.linalg (jax.scipy.linalg): triangular and Cholesky solves and the matrix
exponential, written with functrans.numpy's linalg, so each one differentiates, vmaps and
jits. Matrices may be stacks (..., n, n), as JAX's.

solve_triangular solves with the given triangle only (the other one is masked out, so its
entries get no gradient, as in JAX) through the general solver.
"""
from __future__ import annotations

import math

import numpy as np

from .. import numpy as fnp
from ..core import to_concrete
from ..higher_order.custom import custom_jvp

__all__ = ["cho_factor", "cho_solve", "cholesky", "det", "expm", "inv", "solve",
           "solve_triangular"]

solve, inv, det = fnp.linalg.solve, fnp.linalg.inv, fnp.linalg.det


def _mT(a):
    return fnp.swapaxes(a, -1, -2)


def _square(a, name):
    a = fnp._promote_float(a)[0]
    s = fnp.shape(a)
    if len(s) < 2 or s[-1] != s[-2]:
        raise ValueError(f"{name}: expected a square matrix or a stack of them (..., n, n), "
                         f"got shape {s}")
    return a


_TRANS = {0: 0, "N": 0, 1: 1, "T": 1, 2: 2, "C": 2}


def solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False,
                     debug=None, check_finite=True):
    """x with op(a) x = b, a triangular (its `lower` or upper triangle read, the diagonal
    taken as ones with unit_diagonal); op is a (trans=0/'N'), aᵀ (1/'T') or aᴴ (2/'C');
    b is (..., n) or (..., n, k)."""
    if trans not in _TRANS:
        raise ValueError(f"solve_triangular: trans must be 0, 1, 2, 'N', 'T' or 'C', got "
                         f"{trans!r}")
    a = _square(a, "solve_triangular")
    dt = fnp.result_type(a, b)
    a, b = fnp.astype(a, dt), fnp.astype(b, dt)
    a = fnp.tril(a) if lower else fnp.triu(a)
    if unit_diagonal:
        eye = np.eye(fnp.shape(a)[-1], dtype=bool)
        a = fnp.where(eye, np.asarray(1, a.dtype), a)
    t = _TRANS[trans]
    if t:
        a = _mT(a)
        if t == 2:
            a = fnp.conj(a)
    n = fnp.shape(a)[-1]
    if fnp.ndim(b) == 1 or fnp.shape(b)[-1:] == (n,) and fnp.ndim(b) < fnp.ndim(a):
        return fnp.linalg.solve(a, b[..., None])[..., 0]
    return fnp.linalg.solve(a, b)


@custom_jvp
def _cholesky(a):
    return fnp.linalg.cholesky(a)


@_cholesky.defjvp
def _cholesky_jvp(primals, tangents):
    """dL = L Φ(L⁻¹ dA L⁻ᴴ), Φ the lower triangle with half the diagonal, dA the whole
    tangent (JAX's rule: its gradient is neither symmetric nor triangular)."""
    (a,), (t,) = primals, tangents
    low = _cholesky(a)
    x = fnp.linalg.solve(low, t)                                 # L⁻¹ dA
    y = fnp.conj(_mT(fnp.linalg.solve(low, fnp.conj(_mT(x)))))   # L⁻¹ dA L⁻ᴴ
    phi = fnp.tril(y) - fnp.tril(fnp.triu(y)) / 2
    return low, low @ phi


def cholesky(a, lower=False, overwrite_a=False, check_finite=True):
    """The Cholesky factor of a Hermitian positive-definite a: lower L (a = L Lᴴ) with
    lower=True, else upper U = Lᴴ (scipy's default); the other triangle is zero. The
    value reads a's lower triangle; the derivative takes the whole tangent, as JAX's."""
    a = _square(a, "cholesky")
    if lower:
        return _cholesky(a)
    return fnp.conj(_mT(_cholesky(fnp.conj(_mT(a)))))     # Uᴴ U = a, from aᴴ (JAX's)


def cho_factor(a, lower=False, overwrite_a=False, check_finite=True):
    """(c, lower): the Cholesky factor of a for cho_solve (c's other triangle is zero)."""
    return cholesky(a, lower=lower), lower


def cho_solve(c_and_lower, b, overwrite_b=False, check_finite=True):
    """x with a x = b, given cho_factor(a) = (c, lower): two triangular solves."""
    c, lower = c_and_lower
    if lower:
        y = solve_triangular(c, b, lower=True)
        return solve_triangular(c, y, trans=2, lower=True)
    y = solve_triangular(c, b, trans=2, lower=False)
    return solve_triangular(c, y, lower=False)


# Padé approximant of degree 13 (Higham 2005, "The scaling and squaring method for the
# matrix exponential revisited"): its coefficients and the 1-norm up to which it is exact
# to double precision without scaling
_PADE13 = (64764752532480000., 32382376266240000., 7771770303897600., 1187353796428800.,
           129060195264000., 10559470521600., 670442572800., 33522128640., 1323241920.,
           40840800., 960960., 16380., 182., 1.)
_THETA13 = 5.371920351148152


def expm(A, *, upper_triangular=False, max_squarings=16):
    """exp(A) by scaling and squaring with the degree-13 Padé approximant: A is scaled by
    2⁻ˢ so its 1-norm is at most 5.37, then the approximant is squared s times. s is found
    from the values when they are known; under jit or vmap the squarings are masked steps,
    max_squarings of them. A matrix that would need more squarings than max_squarings
    gives NaN, as JAX's."""
    A = _square(A, "expm")
    n = fnp.shape(A)[-1]
    norm = fnp.max(fnp.sum(fnp.abs(A), axis=-2), axis=-1)           # the 1-norm, per matrix
    s = fnp.maximum(0, fnp.ceil(fnp.log2(norm / _THETA13)))
    s = fnp.where(fnp.isfinite(s), s, 0)
    known = to_concrete(s)
    steps = max_squarings if known is None else int(min(np.max(np.asarray(known), initial=0),
                                                        max_squarings))
    A = A / fnp.expand_dims(fnp.expand_dims(2.0 ** s, -1), -1).astype(A.dtype)
    b = [np.asarray(c, A.dtype) for c in _PADE13]
    eye = np.eye(n, dtype=A.dtype)
    A2 = A @ A
    A4 = A2 @ A2
    A6 = A4 @ A2
    U = A @ (A6 @ (b[13] * A6 + b[11] * A4 + b[9] * A2) + b[7] * A6 + b[5] * A4 + b[3] * A2
             + b[1] * eye)
    V = A6 @ (b[12] * A6 + b[10] * A4 + b[8] * A2) + b[6] * A6 + b[4] * A4 + b[2] * A2 \
        + b[0] * eye
    R = fnp.linalg.solve(V - U, V + U)
    sb = fnp.expand_dims(fnp.expand_dims(s, -1), -1)
    for i in range(steps):
        R = fnp.where(sb > i, R @ R, R)
    return fnp.where(sb > max_squarings, np.asarray(math.nan, A.dtype), R)
