"""torch.diag, diag_embed and diagflat as Tensor methods (ops.FUNCTION_NAMES makes them
functions too), as torch's: a vector put on a diagonal of new zero matrices, or (diag of a
matrix) its diagonal copied. One composition, `_embed_fn`, written in functrans.numpy, so
the derivative is the core's; and the bitwise_* methods, which are the operators."""
from __future__ import annotations

from .. import numpy as fnp
from .tensor import Tensor, apply_fn, static

T = Tensor


def _embed_fn(x, offset, dim1, dim2):
    """x's last axis on the offset-th diagonal of two new axes (dim1, dim2) of zeros: where,
    not a product with the identity, so an inf on the diagonal leaves zeros around it."""
    n = x.shape[-1] + abs(offset)
    pad = [(0, 0)] * (x.ndim - 1) + [(0, offset) if offset >= 0 else (-offset, 0)]
    rows = fnp.pad(x, pad)[..., :, None]
    on = fnp.eye(n, k=offset, dtype=bool)
    out = fnp.where(on, rows, fnp.zeros((), x.dtype))
    return fnp.moveaxis(out, (-2, -1), (dim1, dim2))


def _diagonal_fn(x, offset):
    return fnp.diagonal(x, offset, 0, 1)


def diag_embed(input, offset=0, dim1=-2, dim2=-1):  # noqa: A002
    """torch.diag_embed: the last dimension of input on the offset-th diagonal of the planes
    (dim1, dim2) of the result (dims counted in the result, which has one more)."""
    nd = input.ndim + 1
    d1, d2 = dim1 % nd if -nd <= dim1 < nd else None, dim2 % nd if -nd <= dim2 < nd else None
    if d1 is None or d2 is None:
        bad = dim1 if d1 is None else dim2
        raise IndexError(f"Dimension out of range (expected to be in range of [{-nd}, {nd - 1}]"
                         f", but got {bad})")
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    if input.ndim == 0:
        raise RuntimeError("diag_embed(): input must be at least 1-D (got a 0-D tensor); "
                           "use input.reshape(1)")
    return apply_fn("DiagEmbedBackward0", _embed_fn, (input,),
                    static(offset=int(offset), dim1=d1, dim2=d2))


def diag(input, diagonal=0):  # noqa: A002
    """torch.diag: a 1-D tensor becomes a square matrix with it on the given diagonal; a 2-D
    tensor gives a copy of that diagonal."""
    if input.ndim == 1:
        return diag_embed(input, diagonal, 0, 1)
    if input.ndim == 2:
        return apply_fn("DiagonalBackward0_copy", _diagonal_fn, (input,),
                        static(offset=int(diagonal)))
    raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {input.ndim}D")


def diagflat(input, offset=0):  # noqa: A002
    """torch.diagflat: input flattened, on the offset-th diagonal of a square matrix."""
    return diag_embed(input.reshape(-1), offset, 0, 1)


T.diag, T.diag_embed, T.diagflat = diag, diag_embed, diagflat
# torch's bitwise functions are the operators &, |, ^ (integers and bools; floats raise the
# operators' "bitwise_and_cpu" not implemented for 'Float')
T.bitwise_and, T.bitwise_or, T.bitwise_xor = T.__and__, T.__or__, T.__xor__
