"""ft.nn.functional's linear layers (linear, bilinear) and lookups (embedding, one_hot)."""
from __future__ import annotations

import math

import numpy as np

from ...numpy import raw as fnp
from ...facade.inplace import _cname, _tname
from ...facade.grad_mode import no_grad
from ...facade.tensor import Tensor
from functrans.primitives import linalg as la
from functrans.primitives.indexing import gather as _gather
from functrans.primitives.misc import stop_gradient as _stop_gradient
from ._dispatch import _call, _concrete, _is_raw, _ndim, _raw, _shape


# ---------------------------------------------------------------------------
# linear layers


def _linear_fn(x, w):
    nd = fnp.ndim(x)
    return la.dot_general(x, w, dimension_numbers=(((nd - 1,), (1,)), ((), ())))


def _linear_bias_fn(x, w, b):
    return _linear_fn(x, w) + b


def linear(input, weight, bias=None):
    """input @ weight.T + bias, weight of shape (out_features, in_features)."""
    if _shape(input)[-1:] != _shape(weight)[-1:] or _ndim(weight) != 2:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied "
                           f"({_mat_desc(input)} and {_shape(weight)[-1] if _ndim(weight) else 1}"
                           f"x{_shape(weight)[0] if _ndim(weight) else 1})")
    _check_dtypes(input, weight, bias)
    two_d = _ndim(input) == 2
    if bias is None:
        return _call("MmBackward0" if two_d else "UnsafeViewBackward0", _linear_fn,
                     (input, weight))
    return _call("AddmmBackward0" if two_d else "ViewBackward0", _linear_bias_fn,
                 (input, weight, bias))


def _check_dtypes(input, weight, bias):
    """torch's errors for operands of different dtypes (those of the matmul without a bias,
    of addmm with one)."""
    di, dw = np.dtype(input.dtype), np.dtype(weight.dtype)
    if di != dw:
        if bias is None:
            raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: "
                               f"{_cname(di)} != {_cname(dw)}")
        raise RuntimeError(f"mat1 and mat2 must have the same dtype, but got {_tname(di)} and "
                           f"{_tname(dw)}")
    if bias is not None and np.dtype(bias.dtype) != di:
        raise RuntimeError(f"self and mat2 must have the same dtype, but got "
                           f"{_tname(np.dtype(bias.dtype))} and {_tname(di)}")


def _mat_desc(x):
    s = _shape(x)
    rows = math.prod(s[:-1]) if len(s) > 1 else 1
    return f"{rows}x{s[-1] if s else 1}"


def _bilinear_fn(x1, x2, w):
    return fnp.einsum("...i,oij,...j->...o", x1, w, x2)


def bilinear(input1, input2, weight, bias=None):
    """y = x1^T A x2 + b with weight of shape (out, in1, in2). (torch computes it with a
    contraction, a view and the bias added: its grad_fn is AddBackward0, ViewBackward0
    without a bias.)"""
    if bias is None:
        return _call("ViewBackward0", _bilinear_fn, (input1, input2, weight))
    return _call("AddBackward0", _bilinear_bias_fn, (input1, input2, weight, bias))


def _bilinear_bias_fn(x1, x2, w, b):
    return fnp.einsum("...i,oij,...j->...o", x1, w, x2) + b


# ---------------------------------------------------------------------------
# embedding


def _embedding_fn(idx, w, *, padding_idx, scale_grad_by_freq=False, checked=False):
    # checked (embedding saw the concrete indices in range): one gather of rows, its
    # gradient one scatter-add of rows. Traced indices go through take, whose out-of-range
    # rows are NaN (jnp.take's default): torch raises there, and a clamped row would be a
    # wrong number no one sees
    out = _gather(w, fnp.expand_dims(idx, -1)) if checked else fnp.take(w, idx, axis=0)
    if scale_grad_by_freq:
        # each row's gradient divided by how often its index occurs in the batch: the value
        # is out, the derivative 1 / count
        flat = fnp.reshape(idx, (-1,))
        count = fnp.sum(fnp.expand_dims(idx, -1) == flat, axis=-1, keepdims=True)
        frozen = _stop_gradient(out)
        out = frozen + (out - frozen) / fnp.astype(count, out.dtype)
    if padding_idx is not None:
        pad = fnp.expand_dims(idx == padding_idx, -1)
        out = fnp.where(pad, _stop_gradient(out), out)
    return out


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False):
    """Rows of `weight` picked by the integer `input`; the row at padding_idx gets no gradient.
    max_norm: first, the rows input picks whose norm_type-norm exceeds max_norm are scaled
    in place (under no_grad) to max_norm / (norm + 1e-7) times themselves, as torch's;
    scale_grad_by_freq: each row's gradient is divided by how often its index occurs."""
    if sparse:
        raise NotImplementedError("embedding: sparse=True is not supported by functrans (it has "
                                  "no sparse gradients); use the dense default")
    if np.dtype(input.dtype).kind not in "iu":
        raise RuntimeError("Expected tensor for argument #1 'indices' to have one of the following "
                           f"scalar types: Long, Int; but got {input.dtype} instead (while "
                           "checking arguments for embedding)")
    num = _shape(weight)[0]
    if padding_idx is not None:
        if padding_idx < 0:
            padding_idx += num
    idx = _concrete(input)
    if idx is not None and idx.size and (idx.min() < 0 or idx.max() >= num):
        raise IndexError("index out of range in self")
    if max_norm is not None:
        _renorm_rows(weight, idx, float(max_norm), float(norm_type))
    return _call("EmbeddingBackward0", _embedding_fn, (input, weight), padding_idx=padding_idx,
                 scale_grad_by_freq=bool(scale_grad_by_freq), checked=idx is not None)


def _renorm_rows(weight, idx, max_norm, norm_type):
    """embedding's max_norm: the picked rows longer than max_norm shrunk in place."""
    w = _concrete(weight)
    if idx is None or w is None:
        raise NotImplementedError("embedding: max_norm rescales rows of the weight in place, "
                                  "which cannot happen on traced values (inside ft.grad / "
                                  "ft.vmap / ft.jit); renormalize the weight beforehand")
    rows = np.unique(idx)
    norms = np.linalg.norm(w[rows].astype(np.float64), ord=norm_type, axis=1)
    big = norms > max_norm
    if not big.any():
        return
    rows = rows[big]
    scaled = w[rows] * (max_norm / (norms[big] + 1e-7)).astype(w.dtype)[:, None]
    if isinstance(weight, Tensor):
        with no_grad():
            weight[Tensor._make(rows)] = Tensor._make(scaled)
    else:
        weight[rows] = scaled


def one_hot(tensor, num_classes=-1):
    """int64 one-hot encoding along a new last dim."""
    if np.dtype(tensor.dtype) != np.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    arr = _concrete(tensor)
    if num_classes == -1:
        if arr is None:
            raise RuntimeError("one_hot of a traced value needs num_classes")
        num_classes = int(arr.max()) + 1 if arr.size else 0
    if arr is not None and arr.size and (arr.min() < 0 or arr.max() >= num_classes):
        raise RuntimeError("Class values must be smaller than num_classes.")
    if _is_raw((tensor,)):
        return fnp.astype(fnp.expand_dims(_raw(tensor), -1) == fnp.arange(num_classes), np.int64)
    return Tensor._make((arr[..., None] == np.arange(num_classes)).astype(np.int64))
