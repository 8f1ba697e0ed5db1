"""ft.linalg: torch.linalg's norms and singular values on Tensors, with PyTorch's semantics
(a norm's derivative is 0 at zero, abs's is sign(x)); an order torch rejects raises its error."""
from __future__ import annotations

import builtins
from collections import namedtuple

from .. import numpy as fnp
from . import dtypes as D
from .methods import matrix_norm_fn, vector_norm_fn
from .tensor import Tensor, apply_fn, static

INF = float("inf")
_MATRIX_ORDS = ("fro", "nuc", INF, -INF, 1, -1, 2, -2)
SVD = namedtuple("torch_return_types_linalg_svd", ["U", "S", "Vh"])


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
    return apply_fn("LinalgSvdBackward0", _svdvals_fn, (A,))


def _svd_fn(x, full_matrices):
    return fnp.linalg.svd(x, full_matrices=full_matrices)


def svd(A, full_matrices=True):
    """torch.linalg.svd of a real matrix (or a stack): (U, S, Vh); full_matrices=True of a
    non-square matrix is not supported (pass False)."""
    _check_float(A, "linalg.svd")
    return SVD(*apply_fn("LinalgSvdBackward0", _svd_fn, (A,),
                         static(full_matrices=full_matrices)))
