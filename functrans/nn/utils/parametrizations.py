"""torch.nn.utils.parametrizations: weight normalization, spectral normalization and
orthogonal matrices as parametrizations (nn.utils.parametrize), torch's current API: the
state_dict keys are `parametrizations.weight.original` (`original0`/`original1` for
weight_norm's g and v), and assigning `module.weight = W` sets the originals from W."""
from __future__ import annotations

import numpy as np

from ...facade import dtypes as D
from ...facade import linalg
from ...facade.creation import eye, randn, zeros
from ...facade.grad_mode import no_grad
from ...facade.ops import cat
from ...facade.tensor import Tensor
from ..functional import normalize
from ..modules.module import Module
from . import parametrize
from .weight_norm import _norm_except_dim

__all__ = ["orthogonal", "spectral_norm", "weight_norm"]


# ---------------------------------------------------------------------------------------
# weight_norm


class _WeightNorm(Module):
    """weight = g * v / ‖v‖, the norm over every dim but `dim` (all dims for None / -1)."""

    def __init__(self, dim=0):
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g, weight_v):
        dim = None if self.dim == -1 else self.dim
        return weight_v * (weight_g / _norm_except_dim(weight_v, dim))

    def right_inverse(self, weight):
        return _norm_except_dim(weight, None if self.dim == -1 else self.dim), weight


def weight_norm(module, name="weight", dim=0):
    """Parametrize module.<name> as g * v / ‖v‖ (parametrizations.<name>.original0 = g,
    original1 = v). A state dict of the hook-based API (`<name>_g`, `<name>_v`) still
    loads."""
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)

    def _compat(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                error_msgs):
        g_key, v_key = f"{prefix}{name}_g", f"{prefix}{name}_v"
        if g_key in state_dict and v_key in state_dict:
            state_dict[f"{prefix}parametrizations.{name}.original0"] = state_dict.pop(g_key)
            state_dict[f"{prefix}parametrizations.{name}.original1"] = state_dict.pop(v_key)
    module._register_load_state_dict_pre_hook(_compat)
    return module


# ---------------------------------------------------------------------------------------
# spectral_norm


class _SpectralNorm(Module):
    """weight / σ, σ ≈ the largest singular value of the weight as a matrix (`dim` first)
    by power iteration on the buffers _u, _v: 15 steps at registration, then
    n_power_iterations per read in training mode (in place, without gradient); σ = uᵀ W v
    is differentiated through W alone. A 1-D weight is normalized instead."""

    def __init__(self, weight, n_power_iterations=1, dim=0, eps=1e-12):
        super().__init__()
        ndim = weight.ndim
        if dim >= ndim or dim < -ndim:
            raise IndexError(f"Dimension out of range (expected to be in range of [-{ndim}, "
                             f"{ndim - 1}] but got {dim})")
        if n_power_iterations <= 0:
            raise ValueError("Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            mat = self._reshape_weight_to_matrix(weight)
            h, w = mat.shape
            with no_grad():
                u = normalize(randn(h, dtype=weight.dtype), dim=0, eps=eps)
                v = normalize(randn(w, dtype=weight.dtype), dim=0, eps=eps)
            self.register_buffer("_u", u)
            self.register_buffer("_v", v)
            self._power_method(mat, 15)

    def _reshape_weight_to_matrix(self, weight):
        if self.dim != 0:
            weight = weight.permute(self.dim, *(d for d in range(weight.dim()) if d != self.dim))
        return weight.flatten(1)

    def _power_method(self, mat, n_power_iterations):
        with no_grad():
            for _ in range(n_power_iterations):
                self._u.copy_(normalize(mat @ self._v, dim=0, eps=self.eps))
                self._v.copy_(normalize(mat.t() @ self._u, dim=0, eps=self.eps))

    def forward(self, weight):
        if weight.ndim == 1:
            return normalize(weight, dim=0, eps=self.eps)
        mat = self._reshape_weight_to_matrix(weight)
        if self.training:
            self._power_method(mat, self.n_power_iterations)
        u, v = self._u.clone(), self._v.clone()
        sigma = u.dot(mat @ v)
        return weight / sigma

    def right_inverse(self, value):
        return value


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """Parametrize module.<name> as weight / σ (see _SpectralNorm). dim defaults to 0, or 1
    for the ConvTranspose layers, as torch's."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        base = parametrize.type_before_parametrizations(module)
        dim = 1 if base.__name__.startswith("ConvTranspose") else 0
    parametrize.register_parametrization(
        module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module


# ---------------------------------------------------------------------------------------
# orthogonal

_MAPS = ("matrix_exp", "cayley", "householder")


def _make_orthogonal(A):
    """The Q of A's QR with R's diagonal made positive (unique: the same Q as torch's)."""
    X, tau = linalg.geqrf(A)
    Q = linalg.householder_product(X, tau)
    return Q * X.diagonal(dim1=-2, dim2=-1).sgn().unsqueeze(-2)


def _diagonal_mask(A):
    """True on the main diagonal of each matrix of A's shape."""
    n, k = A.shape[-2], A.shape[-1]
    return eye(n, k, dtype=D.bool).expand(A.shape)


def _is_orthogonal(Q):
    n, k = Q.shape[-2], Q.shape[-1]
    eps = 10.0 * n * float(np.finfo(Q.dtype).eps)
    return bool((Q.mH @ Q).allclose(eye(k, dtype=Q.dtype), atol=eps))    # torch's test


class _Orthogonal(Module):
    """An orthogonal (unitary) matrix, or a stack, from an unconstrained one: exp or the
    Cayley transform of a skew-symmetric matrix built from its lower triangle, or a product
    of Householder reflectors read below its diagonal; with use_trivialization, times the
    buffer `base` (the orthogonal matrix that assignment stores)."""

    def __init__(self, weight, orthogonal_map, *, use_trivialization=True):
        super().__init__()
        if weight.is_complex() and orthogonal_map == "householder":
            raise ValueError("The householder parametrization does not support complex "
                             "tensors.")
        self.shape = weight.shape
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, X):
        n, k = X.shape[-2], X.shape[-1]
        transposed = n < k
        if transposed:
            X = X.mT
            n, k = k, n
        if self.orthogonal_map in ("matrix_exp", "cayley"):
            X = X.tril()
            if n != k:
                X = cat([X, zeros(*X.shape[:-2], n, n - k, dtype=X.dtype)], dim=-1)
            A = X - X.mH
            if self.orthogonal_map == "matrix_exp":
                Q = linalg.matrix_exp(A)
            else:
                ident = eye(n, dtype=A.dtype)
                Q = linalg.solve(ident - A * 0.5, ident + A * 0.5)
            if n != k:
                Q = Q[..., :k]
        else:
            A = X.tril(diagonal=-1)
            tau = 2.0 / (1.0 + (A * A).sum(dim=-2))
            Q = linalg.householder_product(A, tau)
            Q = Q * X.diagonal(dim1=-2, dim2=-1).int().unsqueeze(-2)
        if hasattr(self, "base"):
            Q = self.base @ Q
        if transposed:
            Q = Q.mT
        return Q

    def right_inverse(self, Q):
        if Q.shape != self.shape:
            raise ValueError(f"Expected a matrix or batch of matrices of shape {self.shape}. "
                             f"Got a tensor of shape {Q.shape}.")
        with no_grad():
            Q_init = Q
            n, k = Q.shape[-2], Q.shape[-1]
            transpose = n < k
            if transpose:
                Q = Q.mT
                n, k = k, n
            if not hasattr(self, "base"):
                if self.orthogonal_map in ("cayley", "matrix_exp"):
                    raise NotImplementedError(
                        "It is not possible to assign to the matrix exponential or the "
                        "Cayley parametrizations when use_trivialization=False.")
                A, tau = linalg.geqrf(Q)
                # R's diagonal becomes its signs (negated where tau = 0: no reflection)
                d = A.diagonal(dim1=-2, dim2=-1).sign()
                d = d.where(tau != 0.0, -d)
                A = d.unsqueeze(-2).expand(A.shape).where(_diagonal_mask(A), A)
                return A.mT if transpose else A
            if n == k:
                Q = Q.clone() if _is_orthogonal(Q) else _make_orthogonal(Q)
            else:           # completed to an n x n orthogonal matrix with random columns
                N = randn(*Q.shape[:-2], n, n - k, dtype=Q.dtype)
                Q = _make_orthogonal(cat([Q, N], dim=-1))
            self.base = Q
            # -I: the householder map sends it to I, and so do exp and Cayley (tril(-I) minus
            # its transpose is 0), so the parametrized weight starts as base
            neg_id = -(_diagonal_mask(Q_init).to(Q_init.dtype))
            return neg_id


def orthogonal(module, name="weight", orthogonal_map=None, *, use_trivialization=True):
    """Parametrize module.<name> (a matrix or a stack) as orthogonal: `orthogonal_map` is
    "matrix_exp" (default for square or complex), "cayley" or "householder" (default
    otherwise). With use_trivialization (default) the current weight, made orthogonal, is
    kept in a buffer `base` and the original starts at -I."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.ndim < 2:
        raise ValueError("Expected a matrix or batch of matrices. Got a tensor of "
                         f"{weight.ndim} dimensions.")
    if orthogonal_map is None:
        orthogonal_map = "matrix_exp" if weight.shape[-2] == weight.shape[-1] or \
            weight.is_complex() else "householder"
    if orthogonal_map not in _MAPS:
        raise ValueError('orthogonal_map has to be one of "matrix_exp", "cayley", '
                         f'"householder". Got: {orthogonal_map}')
    orth = _Orthogonal(weight, orthogonal_map, use_trivialization=use_trivialization)
    parametrize.register_parametrization(module, name, orth, unsafe=True)
    return module
