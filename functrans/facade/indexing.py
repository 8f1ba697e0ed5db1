"""Tensor indexing (`x[idx]`) and index assignment (`x[idx] = v`) with torch's semantics.

Basic indices (ints, slices, None, Ellipsis) give views; integer tensors, lists and
boolean masks give copies (IndexBackward0). The static part of an index is part of the
op's signature; integer index arrays are runtime inputs of the composite op.
"""
from __future__ import annotations

import warnings

import numpy as np

from ..numpy import raw as fnp
from ..core import Tracer
from .grad_mode import STATE as GS
from .inplace import COPY_SLICES, OVERLAP_MSG, _check_inplace, inplace
from .tensor import VIEW_LEAF_INPLACE_MSG, Tensor, apply_fn, static, traced_hooks, wrap


class _Arr:
    """Placeholder for the k-th index array in a static index template."""
    __slots__ = ("k",)

    def __init__(self, k):
        self.k = k

    def __eq__(self, other):
        return type(other) is _Arr and other.k == self.k

    def __hash__(self):
        return hash(("_Arr", self.k))


def _as_tuple(idx):
    """The index as a tuple of components. A list holding a slice, Ellipsis, None, a tensor
    or a sequence is read as a tuple, as torch (and NumPy before 1.23) does:
    `y[[slice(None), [1, 3]]]` is `y[:, [1, 3]]`; another list is one integer array."""
    if isinstance(idx, tuple):
        return idx
    if isinstance(idx, list) and len(idx) < 32 and any(
            isinstance(i, (Tensor, list, tuple, slice, np.ndarray)) or i is None
            or i is Ellipsis for i in idx):
        warnings.warn("Using a non-tuple sequence for multidimensional indexing is deprecated "
                      "and will be changed in pytorch 2.9; use x[tuple(seq)] instead of "
                      "x[seq]. In pytorch 2.9 this will be interpreted as tensor index, "
                      "x[torch.tensor(seq)], which will result either in an error or a "
                      "different result", UserWarning, stacklevel=4)
        return tuple(idx)
    return (idx,)


def _split_index(idx):
    """(template, arrays): a hashable index template and the integer index arrays."""
    idx = _as_tuple(idx)
    template, arrays = [], []
    for it in idx:
        if isinstance(it, Tensor):
            it = it._data
        if isinstance(it, Tracer):          # a traced index array (ft.compile capture)
            if it.dtype == np.bool_ or it.dtype.kind not in "iu":
                traced_hooks().refuse(
                    "indexing with a boolean mask computed inside the compiled (or transformed) "
                    "function (its result has a data-dependent shape)", "use ft.where(mask, x, 0) or "
                    "masked_fill")
            template.append(_Arr(len(arrays)))
            arrays.append(it.astype(np.int64) if it.dtype != np.int64 else it)
            continue
        if isinstance(it, list):
            it = np.asarray(it)
        if isinstance(it, (np.ndarray, np.generic)) and not isinstance(it, np.integer):
            it = np.asarray(it)
            if it.ndim == 0 and it.dtype == np.bool_:      # as a Python bool
                if not it:
                    raise IndexError("indexing with False is not supported")
                template.append(None)
                continue
            if it.ndim == 0 and it.dtype.kind in "iu":     # as a Python int (SelectBackward0)
                template.append(int(it))
                continue
            if it.dtype == np.bool_:
                for comp in np.nonzero(it):
                    template.append(_Arr(len(arrays)))
                    arrays.append(comp.astype(np.int64))
                continue
            if it.dtype.kind not in "iu":
                raise IndexError("tensors used as indices must be long, int, byte or bool "
                                 "tensors")
            template.append(_Arr(len(arrays)))
            arrays.append(it.astype(np.int64))
        elif isinstance(it, slice):
            if it.step is not None and _int_or_none(it.step) <= 0:
                raise ValueError("step must be greater than zero")
            template.append(("__slice__", _int_or_none(it.start), _int_or_none(it.stop),
                             _int_or_none(it.step)))
        elif it is None or it is Ellipsis:
            template.append(it)
        elif isinstance(it, (bool, np.bool_)) and it:
            template.append(None)           # x[True]: a new axis of size 1, as torch/NumPy
        elif isinstance(it, (bool, np.bool_)):
            raise IndexError("indexing with False is not supported")
        elif isinstance(it, (int, np.integer)):
            template.append(int(it))
        else:
            raise IndexError(f"only integers, slices (`:`), ellipsis (`...`), None and long or "
                             f"byte Variables are valid indices (got {type(it).__name__})")
    return tuple(template), arrays


def _int_or_none(v):
    if v is None:
        return None
    if isinstance(v, Tensor):
        return int(v.item())
    return int(v)


def _rebuild(template, arrays):
    out = []
    for it in template:
        if type(it) is _Arr:
            out.append(arrays[it.k])
        elif type(it) is tuple and it and it[0] == "__slice__":
            out.append(slice(it[1], it[2], it[3]))
        else:
            out.append(it)
    return tuple(out)


def _getitem_fn(x, *arrays, template):
    return fnp.getitem(x, _rebuild(template, arrays))


def _kind(template):
    if any(type(it) is _Arr for it in template):
        return "IndexBackward0"
    nontrivial = [it for it in template if it is not Ellipsis and not (
        type(it) is tuple and it[1:] == (None, None, None))]
    if not nontrivial:
        return "AliasBackward0"
    last = nontrivial[-1]
    if type(last) is int:
        return "SelectBackward0"
    if last is None:
        return "UnsqueezeBackward0"
    return "SliceBackward0"


def getitem(t, idx):
    template, arrays = _split_index(idx)
    _check_bounds(t, template)
    advanced = bool(arrays)
    # a bare slice is always a slice op in torch, x[:] included (a tuple of full slices
    # or an Ellipsis alone is an alias)
    name = "SliceBackward0" if type(idx) is slice else _kind(template)
    return apply_fn(name, _getitem_fn, (t,) + tuple(wrap(a) for a in arrays),
                    static(template=template), view=not advanced)


def _check_bounds(t, template):
    shape = t._data.shape
    dim = 0
    for it in template:
        if it is Ellipsis:
            rest = sum(1 for j in template if j is not None and j is not Ellipsis)
            dim = len(shape) - rest + dim
            continue
        if it is None:
            continue
        if dim >= len(shape):
            raise IndexError(f"too many indices for tensor of dimension {len(shape)}")
        if type(it) is int:
            n = shape[dim]
            if not -n <= it < n:
                raise IndexError(f"index {it} is out of bounds for dimension {dim} with size {n}")
        dim += 1


def _index_update_fn(x, v, *arrays, template):
    return fnp.index_update(x, _rebuild(template, arrays), v)


def setitem(t, idx, value):
    recording = GS.enabled and (t._requires_grad or (isinstance(value, Tensor)
                                                     and value._requires_grad))
    if not recording and not isinstance(t._data, Tracer):
        _check_inplace(t, False)
        np_idx = _numpy_index(idx)
        v = value._data if isinstance(value, Tensor) else value
        if not t._data.flags.writeable:
            raise RuntimeError(OVERLAP_MSG)
        t._data[np_idx] = v
        t._bump("__setitem__")
        return
    template, arrays = _split_index(idx)
    _check_bounds(t, template)
    if (GS.enabled and t._requires_grad and t._grad_fn is None and not arrays
            and _kind(template) != "AliasBackward0"):
        # torch writes through the view x[idx] (unless idx is advanced or selects all)
        raise RuntimeError(VIEW_LEAF_INPLACE_MSG)
    if not isinstance(value, Tensor):
        value = wrap(np.asarray(value, t.dtype))
    elif value.dtype != t.dtype:
        value = value.to(t.dtype)
    name = "IndexPutBackward0" if arrays else COPY_SLICES
    inplace(t, "__setitem__", lambda: apply_fn(
        name, _index_update_fn, (t, value) + tuple(wrap(a) for a in arrays),
        static(template=template)))


def _numpy_index(idx):
    idx = _as_tuple(idx)
    out = []
    for it in idx:
        if isinstance(it, Tensor):
            it = it._data
        elif isinstance(it, list):
            it = np.asarray(it)
        out.append(it)
    return tuple(out)


Tensor.__getitem__, Tensor.__setitem__ = getitem, setitem
