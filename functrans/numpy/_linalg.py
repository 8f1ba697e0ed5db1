"""functrans.numpy's linear algebra: matmul, dot, tensordot, einsum and the linalg namespace."""
from __future__ import annotations

import numpy as _np

from .. import core
from ..core import Tracer
from ..contraction import einsum as _einsum
from functrans.primitives import elementwise as ew
from functrans.primitives import linalg as la
from ._promotion import (
    _as_operand, _broadcast_to_shape, _promote_float, _promote_same_dtype, _shape,
    broadcast_shapes, ravel, reshape)
from ._shapes import ndim
from ._elementwise import absolute, multiply, sqrt
from ._reductions import max, sum


# ---------------------------------------------------------------------------
# linear algebra

def matmul(a, b):
    if (type(a) is _np.ndarray or isinstance(a, Tracer)) and \
            (type(b) is _np.ndarray or isinstance(b, Tracer)) and a.dtype == b.dtype and \
            len(a.shape) == 2 and len(b.shape) == 2 and a.shape[1] == b.shape[0]:
        # the common case, matrix @ matrix of one dtype: nothing to promote or broadcast
        return la.dot_general(a, b, dimension_numbers=(((1,), (0,)), ((), ())))
    x, y = _promote_same_dtype([a, b])
    x, y = _as_operand(x), _as_operand(y)
    xs, ys = _shape(x), _shape(y)
    if not xs or not ys:
        raise ValueError("matmul: inputs must have at least one dimension (use * for scalars)")
    if len(xs) == 1 or len(ys) == 1:
        # a vector operand contracts directly (no expand_dims/squeeze): under vmap this
        # stays one matrix product instead of a stack of (1, K) @ (K, N) products.
        yc = 0 if len(ys) == 1 else len(ys) - 2
        if xs[-1] != ys[yc]:
            raise core.ShapeError(f"matmul: contracting dimensions differ: {xs} @ {ys} "
                                  f"({xs[-1]} != {ys[yc]})")
        return la.dot_general(x, y, dimension_numbers=(((len(xs) - 1,), (yc,)), ((), ())))
    if xs[-1] != ys[-2]:
        raise core.ShapeError(f"matmul: contracting dimensions differ: {xs} @ {ys} "
                              f"({xs[-1]} != {ys[-2]})")
    batch = broadcast_shapes(xs[:-2], ys[:-2])
    nb = len(batch)
    if nb == 0:
        return la.dot_general(x, y, dimension_numbers=(((1,), (0,)), ((), ())))
    if xs[:-2] != batch:
        x = _broadcast_to_shape(x, batch + xs[-2:])
    if ys[:-2] != batch:
        y = _broadcast_to_shape(y, batch + ys[-2:])
    bd = tuple(range(nb))
    return la.dot_general(x, y, dimension_numbers=(((nb + 1,), (nb,)), (bd, bd)))


def dot(a, b):
    if ndim(a) == 0 or ndim(b) == 0:
        return multiply(a, b)
    if ndim(b) <= 2:
        return matmul(a, b)
    x, y = _promote_same_dtype([a, b])
    return la.dot_general(x, y, dimension_numbers=(((ndim(x) - 1,), (ndim(y) - 2,)), ((), ())))


def vdot(a, b):
    return dot(ravel(a), ravel(b))


def inner(a, b):
    if ndim(a) == 0 or ndim(b) == 0:
        return multiply(a, b)
    x, y = _promote_same_dtype([a, b])
    return la.dot_general(x, y, dimension_numbers=(((ndim(x) - 1,), (ndim(y) - 1,)), ((), ())))


def outer(a, b):
    return multiply(reshape(a, (-1, 1)), reshape(b, (1, -1)))


def tensordot(a, b, axes=2):
    x, y = _promote_same_dtype([a, b])
    if isinstance(axes, int):
        ax = (tuple(range(ndim(x) - axes, ndim(x))), tuple(range(axes)))
    else:
        ax = tuple((a_,) if isinstance(a_, int) else tuple(a_) for a_ in axes)
    ax = (tuple(i % ndim(x) for i in ax[0]), tuple(i % ndim(y) for i in ax[1]))
    return la.dot_general(x, y, dimension_numbers=(ax, ((), ())))


def einsum(subscripts, *operands, optimize="optimal"):
    return _einsum(subscripts, *[_as_operand(o) for o in operands], optimize=optimize)


class linalg:  # noqa: N801  (a namespace, as jax.numpy.linalg)
    @staticmethod
    def norm(x, ord=None, axis=None, keepdims=False):
        x = _promote_float(x)[0]
        if ord not in (None, 2, "fro") and not (ord == 2 and axis is not None):
            if ord == 1:
                return sum(absolute(x), axis=axis, keepdims=keepdims)
            if ord == _np.inf:
                return max(absolute(x), axis=axis, keepdims=keepdims)
            raise NotImplementedError(f"norm with ord={ord!r} is not supported")
        return sqrt(sum(ew.mul(x, x), axis=axis, keepdims=keepdims))
