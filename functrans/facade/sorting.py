"""torch.searchsorted, bucketize, unique and unique_consecutive: eager NumPy computations.
Their index results carry no gradient; unique's values require grad as the input does, and
differentiating them raises (torch has no derivative for unique either)."""
from __future__ import annotations

import numpy as np

from .function import Function
from .tensor import Tensor, wrap


def _arr(x):
    return x._data if isinstance(x, Tensor) else np.asarray(x)


def searchsorted(sorted_sequence, values, *, out_int32=False, right=False, side=None,
                 sorter=None, out=None):
    """torch.searchsorted: for each value the index where it would be inserted to keep the
    innermost dimension of sorted_sequence sorted (a 1-D sequence serves every value; an N-D
    one pairs its rows with the rows of values)."""
    seq, vals = _arr(sorted_sequence), _arr(values)
    if side is not None:
        if side not in ("left", "right") or (right and side == "left"):
            raise RuntimeError("torch.searchsorted(): side and right can't be set to opposites, "
                               "got side of left while right was True")
        right = side == "right"
    how = "right" if right else "left"
    if sorter is not None:
        seq = np.take_along_axis(seq, _arr(sorter), axis=-1)
    if seq.ndim <= 1:
        res = np.searchsorted(seq, vals, side=how)
    else:
        if seq.shape[:-1] != vals.shape[:-1]:
            raise RuntimeError("torch.searchsorted(): boundaries tensor should be 1 dimension or "
                               "the first N-1 dimensions of boundaries tensor and input value "
                               "tensor must match")
        s2, v2 = seq.reshape(-1, seq.shape[-1]), vals.reshape(-1, vals.shape[-1])
        res = np.stack([np.searchsorted(a, b, side=how) for a, b in zip(s2, v2)]).reshape(
            vals.shape)
    return wrap(np.asarray(res, np.int32 if out_int32 else np.int64))


def bucketize(input, boundaries, *, out_int32=False, right=False, out=None):  # noqa: A002
    """torch.bucketize: the bucket of each element of input among the 1-D boundaries."""
    if _arr(boundaries).ndim != 1:
        raise RuntimeError("boundaries tensor must be 1 dimension, but got dim("
                           f"{_arr(boundaries).ndim})")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


class _UniqueValues(Function):
    """unique's values: the input's elements chosen by index (no derivative, as torch)."""

    @staticmethod
    def forward(ctx, x, values):
        return wrap(values)

    @staticmethod
    def backward(ctx, g):
        raise NotImplementedError("the derivative for 'unique' is not implemented.")


def _finish(input, values, inverse, counts, return_inverse, return_counts):  # noqa: A002
    v = _UniqueValues.apply(input, values) if input.requires_grad else wrap(values)
    out = (v,)
    if return_inverse:
        out += (wrap(np.asarray(inverse, np.int64)),)
    if return_counts:
        out += (wrap(np.asarray(counts, np.int64)),)
    return out[0] if len(out) == 1 else out


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):  # noqa: A002
    """torch.unique: the distinct elements (sorted), or distinct slices along dim; with the
    inverse indices (input's shape, or dim's length) and the counts."""
    x = input._data
    if dim is None:
        v, inv, cnt = np.unique(x.reshape(-1), return_inverse=True, return_counts=True)
        inv = inv.reshape(x.shape)
    else:
        dim %= x.ndim
        v, inv, cnt = np.unique(x, return_inverse=True, return_counts=True, axis=dim)
        inv = inv.reshape(-1)
    return _finish(input, v, inv, cnt, return_inverse, return_counts)


def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):  # noqa: A002
    """torch.unique_consecutive: each run of equal consecutive elements (or slices along dim)
    kept once; with the inverse indices and the run lengths."""
    x = input._data
    if dim is None:
        flat = x.reshape(-1)
        change = np.concatenate([[True], flat[1:] != flat[:-1]]) if flat.size else \
            np.zeros(0, bool)
        v, shape = flat[change], x.shape
    else:
        dim %= x.ndim
        m = np.moveaxis(x, dim, 0).reshape(x.shape[dim], -1)
        change = np.concatenate([[True], np.any(m[1:] != m[:-1], axis=1)]) if len(m) else \
            np.zeros(0, bool)
        v, shape = np.compress(change, x, axis=dim), (x.shape[dim],)
    inv = (np.cumsum(change) - 1).reshape(shape)
    starts = np.flatnonzero(change)
    cnt = np.diff(np.append(starts, change.size))
    return _finish(input, v, inv, cnt, return_inverse, return_counts)


Tensor.unique = unique
Tensor.unique_consecutive = unique_consecutive
