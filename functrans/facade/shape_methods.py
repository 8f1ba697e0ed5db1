"""Shape and selection methods of Tensor (view, reshape, permute, ..., gather, sort) with
torch's signatures and grad_fn names. Views share storage and the version counter."""
from __future__ import annotations

import builtins
import math
from collections import namedtuple

import numpy as np

from .. import numpy as fnp
from ..core import Tracer
from .tensor import Tensor, apply_fn, static, wrap, _freeze

T = Tensor


# ---------------------------------------------------------------------------
# shape ops (views share storage and the version counter)


def _shape_arg(shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        return tuple(builtins.int(s) for s in shape[0])
    return tuple(builtins.int(s) for s in shape)


def _infer(shape, n):
    if shape.count(-1) > 1:
        raise RuntimeError("only one dimension can be inferred")
    if -1 in shape:
        known = math.prod([s for s in shape if s != -1])
        if known == 0 or n % known:
            raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {n}")
        shape = tuple(n // known if s == -1 else s for s in shape)
    if math.prod(shape) != n:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {n}")
    return shape


def _reshape_fn(x, shape):
    return fnp.reshape(x, shape)


def view(self, *shape):
    if len(shape) == 1 and isinstance(shape[0], (np.dtype, type, str)):
        raise NotImplementedError("view(dtype) is not supported by functrans; use .to(dtype)")
    shape = _infer(_shape_arg(shape), self.numel())
    try:
        if not isinstance(self._data, Tracer):      # traced data has no strides
            v = self._data.view()
            v.shape = shape
    except (AttributeError, ValueError):
        raise RuntimeError(
            "view size is not compatible with input tensor's size and stride (at least one "
            "dimension spans across two contiguous subspaces). Use .reshape(...) instead."
        ) from None
    return apply_fn("ViewBackward0", _reshape_fn, (self,), static(shape=shape), view=True)


def reshape(self, *shape):
    shape = _infer(_shape_arg(shape), self.numel())
    try:
        if not isinstance(self._data, Tracer):      # traced data has no strides
            v = self._data.view()
            v.shape = shape
        name = "ViewBackward0"
    except (AttributeError, ValueError):
        name = "UnsafeViewBackward0"
    return apply_fn(name, _reshape_fn, (self,), static(shape=shape), view=True)


def view_as(self, other):
    return view(self, tuple(other.shape))


def reshape_as(self, other):
    return reshape(self, tuple(other.shape))


def _wrap_dim(dim, nd):
    """dim in [-nd, nd) (a scalar counts as one dim) made non-negative, or torch's
    IndexError."""
    n = max(nd, 1)
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], "
                         f"but got {dim})")
    return dim % n


def flatten(self, start_dim=0, end_dim=-1):
    nd = self.ndim
    s, e = _wrap_dim(start_dim, nd), _wrap_dim(end_dim, nd)
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    if nd == 0:
        return reshape(self, (1,))
    shape = tuple(self.shape)
    new = shape[:s] + (math.prod(shape[s:e + 1]),) + shape[e + 1:]
    return reshape(self, new)


def unflatten(self, dim, sizes):
    shape = tuple(self.shape)
    dim = _wrap_dim(dim, len(shape))
    sizes = tuple(sizes)
    known = math.prod(s for s in sizes if s != -1)
    if sizes.count(-1) > 1 or (known * (shape[dim] // known if known and -1 in sizes else 1)
                               != shape[dim]):
        raise RuntimeError(f"unflatten: Provided sizes {list(sizes)} don't multiply up to the "
                           f"size of dim {dim} ({shape[dim]}) in the input tensor")
    sizes = _infer(sizes, shape[dim])
    return view(self, shape[:dim] + sizes + shape[dim + 1:])


def _transpose_fn(x, perm):
    return fnp.transpose(x, perm)


def permute(self, *dims):
    dims = _shape_arg(dims)
    nd = self.ndim
    if sorted(d % builtins.max(nd, 1) for d in dims) != list(range(nd)):
        raise RuntimeError(f"permute(sparse_coo): number of dimensions in the tensor input does "
                           f"not match the length of the desired ordering of dimensions i.e. "
                           f"input.dim() = {nd} is not equal to len(dims) = {len(dims)}")
    perm = tuple(d % nd for d in dims)
    return apply_fn("PermuteBackward0", _transpose_fn, (self,), static(perm=perm), view=True)


def transpose(self, dim0, dim1):
    nd = self.ndim
    if nd == 0:
        return apply_fn("TransposeBackward0", _transpose_fn, (self,), static(perm=()), view=True)
    perm = list(range(nd))
    a, b = dim0 % nd, dim1 % nd
    perm[a], perm[b] = perm[b], perm[a]
    return apply_fn("TransposeBackward0", _transpose_fn, (self,), static(perm=tuple(perm)),
                    view=True)


def t(self):
    if self.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {self.ndim}D")
    perm = tuple(reversed(range(self.ndim)))
    return apply_fn("TBackward0", _transpose_fn, (self,), static(perm=perm), view=True)


def _T(self):
    perm = tuple(reversed(range(self.ndim)))
    return apply_fn("PermuteBackward0", _transpose_fn, (self,), static(perm=perm), view=True)


def _H(self):
    """The conjugate transpose of a matrix (torch: transpose(0, 1), TransposeBackward0)."""
    if self.ndim != 2:
        raise RuntimeError(f"tensor.H is only supported on matrices (2-D tensors). Got "
                           f"{self.ndim}-D tensor.")
    return transpose(self, 0, 1).conj()


def _mT(self):
    return transpose(self, -2, -1)


def _mH(self):
    """The conjugate transpose of each matrix in a stack (torch's Tensor.mH)."""
    if self.ndim < 2:
        raise RuntimeError(f"tensor.mH is only supported on matrices or batches of matrices. "
                           f"Got {self.ndim}-D tensor.")
    return transpose(self, -2, -1).conj()


def movedim(self, source, destination):
    src = (source,) if isinstance(source, builtins.int) else tuple(source)
    dst = (destination,) if isinstance(destination, builtins.int) else tuple(destination)
    nd = self.ndim
    src = [s % nd for s in src]
    dst = [d % nd for d in dst]
    perm = [i for i in range(nd) if i not in src]
    for d, s in sorted(zip(dst, src)):
        perm.insert(d, s)
    return apply_fn("PermuteBackward0", _transpose_fn, (self,), static(perm=tuple(perm)),
                    view=True)


T.view, T.reshape, T.view_as, T.reshape_as = view, reshape, view_as, reshape_as
T.flatten, T.unflatten, T.permute, T.transpose = flatten, unflatten, permute, transpose
T.swapaxes = T.swapdims = transpose
T.t, T.movedim, T.moveaxis = t, movedim, movedim
T.T = property(_T)
T.mT = property(_mT)
T.mH = property(_mH)
T.H = property(_H)


def _expand_dims_fn(x, axis):
    return fnp.expand_dims(x, axis)


def unsqueeze(self, dim):
    nd = self.ndim + 1
    if not -nd <= dim < nd:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-nd}, {nd - 1}], "
                         f"but got {dim})")
    return apply_fn("UnsqueezeBackward0", _expand_dims_fn, (self,), static(axis=dim % nd),
                    view=True)


def _squeeze_fn(x, axis):
    return fnp.squeeze(x, axis)


def squeeze(self, dim=None):
    shape = tuple(self.shape)
    if dim is None:
        axes = tuple(i for i, s in enumerate(shape) if s == 1)
        name = "SqueezeBackward0"
    else:
        dims = dim if isinstance(dim, (tuple, list)) else (dim,)
        axes = tuple(d % builtins.max(len(shape), 1) for d in dims
                     if shape and shape[d % len(shape)] == 1)
        name = "SqueezeBackward1" if not isinstance(dim, (tuple, list)) else "SqueezeBackward2"
    if not axes:
        return apply_fn(name, _reshape_fn, (self,), static(shape=shape), view=True)
    return apply_fn(name, _squeeze_fn, (self,), static(axis=axes), view=True)


def _broadcast_fn(x, shape):
    return fnp.broadcast_to(x, shape)


def expand(self, *sizes):
    sizes = _shape_arg(sizes)
    shape = tuple(self.shape)
    if len(sizes) < len(shape):
        raise RuntimeError(f"expand(torch.FloatTensor{{{list(shape)}}}, size={list(sizes)}): the "
                           "number of sizes provided must be greater or equal to the number of "
                           "dimensions in the tensor")
    lead = len(sizes) - len(shape)
    new = []
    for i, s in enumerate(sizes):
        if i < lead:
            if s == -1:
                raise RuntimeError("expand: -1 is not allowed in a leading, non-existing "
                                   "dimension")
            new.append(s)
        else:
            old = shape[i - lead]
            if s == -1:
                s = old
            if old != s and old != 1:
                raise RuntimeError(
                    f"The expanded size of the tensor ({s}) must match the existing size ({old}) "
                    f"at non-singleton dimension {i}.  Target sizes: {list(sizes)}.  Tensor "
                    f"sizes: {list(shape)}")
            new.append(s)
    return apply_fn("ExpandBackward0", _broadcast_fn, (self,), static(shape=tuple(new)),
                    view=True)


def expand_as(self, other):
    return expand(self, tuple(other.shape))


def _tile_fn(x, reps):
    return fnp.tile(x, reps)


def repeat(self, *sizes):
    sizes = _shape_arg(sizes)
    if len(sizes) < self.ndim:
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number "
                           "of dimensions of tensor")
    return apply_fn("RepeatBackward0", _tile_fn, (self,), static(reps=sizes))


def _repeat_interleave_fn(x, repeats, axis):
    return fnp.repeat(x, repeats, axis=axis)


def repeat_interleave(self, repeats, dim=None):
    if isinstance(repeats, Tensor):
        repeats = tuple(repeats.tolist()) if repeats.ndim else repeats.item()
    return apply_fn("RepeatInterleaveBackward0", _repeat_interleave_fn, (self,),
                    static(repeats=_freeze(repeats), axis=dim))


def _flip_fn(x, axis):
    return fnp.flip(x, axis)


def flip(self, *dims):
    dims = _shape_arg(dims)
    return apply_fn("FlipBackward0", _flip_fn, (self,),
                    static(axis=tuple(d % self.ndim for d in dims)))


def _roll_fn(x, shifts, axes):
    for s, ax in zip(shifts, axes):
        n = x.shape[ax]
        s %= n
        if s:
            parts = fnp.split(x, [n - s], axis=ax)
            x = fnp.concatenate([parts[1], parts[0]], axis=ax)
    return x


def _roll_flat_fn(x, shift):
    return fnp.reshape(fnp.roll(fnp.ravel(x), shift), x.shape)


def roll(self, shifts, dims=None):
    if dims is None:           # over the flattened tensor, one op (torch's RollBackward0)
        shift = shifts if isinstance(shifts, builtins.int) else builtins.sum(shifts)
        return apply_fn("RollBackward0", _roll_flat_fn, (self,), static(shift=shift))
    shifts = (shifts,) if isinstance(shifts, builtins.int) else tuple(shifts)
    dims = (dims,) if isinstance(dims, builtins.int) else tuple(dims)
    return apply_fn("RollBackward0", _roll_fn, (self,),
                    static(shifts=shifts, axes=tuple(d % self.ndim for d in dims)))


T.unsqueeze, T.squeeze, T.expand, T.expand_as = unsqueeze, squeeze, expand, expand_as
T.repeat, T.repeat_interleave, T.flip, T.roll = repeat, repeat_interleave, flip, roll
T.fliplr = lambda self: flip(self, 1)
T.flipud = lambda self: flip(self, 0)


def _slice_fn(x, axis, start, stop):
    idx = [slice(None)] * x.ndim
    idx[axis] = slice(start, stop)
    return x[tuple(idx)]


def narrow(self, dim, start, length):
    dim %= self.ndim
    if isinstance(start, Tensor):
        start = start.item()
    n = self.shape[dim]
    start = start % n if start < 0 else start
    if start + length > n:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({n}).")
    return apply_fn("SliceBackward0", _slice_fn, (self,),
                    static(axis=dim, start=start, stop=start + length), view=True)


def _select_fn(x, axis, index):
    idx = [slice(None)] * x.ndim
    idx[axis] = index
    return x[tuple(idx)]


def select(self, dim, index):
    dim %= self.ndim
    n = self.shape[dim]
    if not -n <= index < n:
        raise IndexError(f"select(): index {index} out of range for tensor of size "
                         f"{list(self.shape)} at dimension {dim}")
    return apply_fn("SelectBackward0", _select_fn, (self,),
                    static(axis=dim, index=index % n), view=True)


def _unbind_fn(x, axis):
    return tuple(_select_fn(x, axis, i) for i in range(x.shape[axis]))


def unbind(self, dim=0):
    dim %= self.ndim
    if self.shape[dim] != 1:
        return apply_fn("UnbindBackward0", _unbind_fn, (self,), static(axis=dim), view=True)
    out = select(self, dim, 0)
    if out._base is not None:       # still one output of a multi-view op (torch's rule)
        out.__dict__["_multi_view"] = ("UnbindBackward0", 0)
    return (out,)


def _split_fn(x, bounds, axis):
    return tuple(_slice_fn(x, axis, lo, hi) for lo, hi in bounds)


def split(self, split_size_or_sections, dim=0):
    dim %= self.ndim
    n = self.shape[dim]
    if isinstance(split_size_or_sections, builtins.int):
        s = split_size_or_sections
        bounds = tuple((i, builtins.min(i + s, n)) for i in range(0, n, s)) or ((0, 0),)
        name = "SplitBackward0"
    else:
        sizes = list(split_size_or_sections)
        if builtins.sum(sizes) != n:
            raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {n} (input "
                               f"tensor's size at dimension {dim}), but got split_sizes={sizes}")
        starts = np.cumsum([0] + sizes)
        bounds = tuple((builtins.int(a), builtins.int(b)) for a, b in zip(starts[:-1], starts[1:]))
        name = "SplitWithSizesBackward0"
    out = apply_fn(name, _split_fn, (self,), static(bounds=bounds, axis=dim), view=True)
    return out if isinstance(out, tuple) else (out,)


def chunk(self, chunks, dim=0):
    n = self.shape[dim % self.ndim]
    size = -(-n // chunks)
    return split(self, size, dim)


def tensor_split(self, indices_or_sections, dim=0):
    """torch.tensor_split: n nearly equal sections (the first n % size one longer), or the
    pieces between indices (clipped to the size); each a slice (SliceBackward0)."""
    dim %= builtins.max(self.ndim, 1)
    n = self.shape[dim]
    if isinstance(indices_or_sections, Tensor):
        indices_or_sections = indices_or_sections.tolist()
    if isinstance(indices_or_sections, builtins.int):
        q, r = divmod(n, indices_or_sections)
        sizes = [q + 1] * r + [q] * (indices_or_sections - r)
        cuts = np.cumsum([0] + sizes).tolist()
    else:
        cuts = [0] + [builtins.min(builtins.max(i % n if i < 0 else i, 0), n)
                      for i in indices_or_sections] + [n]
    return tuple(apply_fn("SliceBackward0", _slice_fn, (self,),
                          static(axis=dim, start=a, stop=builtins.max(a, b)), view=True)
                 for a, b in zip(cuts[:-1], cuts[1:]))


def split_with_sizes(self, split_sizes, dim=0):
    """torch.split_with_sizes: split into pieces of the given sizes (SplitWithSizesBackward0)."""
    return split(self, list(split_sizes), dim)


def _unsafe(outs):
    """torch's unsafe_* splits: the pieces share self's storage but autograd does not treat
    them as views of it (no multiple-views refusal, no CopySlices: an in-place op on a piece
    is recorded on that piece alone, each piece with a version counter of its own, as
    torch's unsafe variants do)."""
    for o in outs:
        o._base = None
        o._vc = None
        o.__dict__.pop("_multi_view", None)
        o.__dict__.pop("_vfn", None)
        o.__dict__.pop("_nograd_view", None)
    return outs


def unsafe_split(self, split_size, dim=0):
    return _unsafe(split(self, split_size, dim))


def unsafe_split_with_sizes(self, split_sizes, dim=0):
    return _unsafe(split(self, list(split_sizes), dim))


def unsafe_chunk(self, chunks, dim=0):
    return _unsafe(chunk(self, chunks, dim))


T.narrow, T.select, T.unbind, T.split, T.chunk = narrow, select, unbind, split, chunk
T.tensor_split, T.split_with_sizes = tensor_split, split_with_sizes
T.unsafe_split, T.unsafe_split_with_sizes, T.unsafe_chunk = (unsafe_split,
                                                              unsafe_split_with_sizes, unsafe_chunk)


def _tril_fn(x, k):
    return fnp.tril(x, k)


def _triu_fn(x, k):
    return fnp.triu(x, k)


def _diagonal_fn(x, offset, axis1, axis2):
    return fnp.diagonal(x, offset, axis1, axis2)


T.tril = lambda self, diagonal=0: apply_fn("TrilBackward0", _tril_fn, (self,),
                                           static(k=diagonal))
T.triu = lambda self, diagonal=0: apply_fn("TriuBackward0", _triu_fn, (self,),
                                           static(k=diagonal))
T.diagonal = lambda self, offset=0, dim1=0, dim2=1: apply_fn(
    "DiagonalBackward0", _diagonal_fn, (self,), static(offset=offset, axis1=dim1, axis2=dim2))
T.trace = lambda self: apply_fn("TraceBackward0", fnp.trace, (self,)) if \
    self.dtype.kind in "fc" else self.diagonal().sum()


def _gather_fn(x, idx, axis):
    return fnp.take_along_axis(x, idx, axis)


def gather(self, dim, index):
    if index.ndim != self.ndim:
        raise RuntimeError("Index tensor must have the same number of dimensions as input tensor")
    if index.dtype not in (np.int64, np.int32):
        raise RuntimeError("gather(): Expected dtype int32/int64 for index")
    dim %= builtins.max(self.ndim, 1)
    _check_index_range(index, dim, self.shape[dim] if self.ndim else 1)
    return apply_fn("GatherBackward0", _gather_fn, (self, index), static(axis=dim % self.ndim))


def _check_index_range(index, dim, n):
    """torch's RuntimeError naming the first index outside [0, n) (gather takes no negative
    index; NumPy would wrap or clip); traced indices are not checked."""
    idx = index._data
    if isinstance(idx, np.ndarray) and idx.size:
        bad = (idx < 0) | (idx >= n)
        if bad.any():
            v = idx.reshape(-1)[np.flatnonzero(bad.reshape(-1))[0]]
            raise RuntimeError(f"index {v} is out of bounds for dimension {dim} with size {n}")


def _take_fn(x, idx, axis):
    return fnp.take(x, idx, axis=axis)


def index_select(self, dim, index):
    if index.ndim > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    return apply_fn("IndexSelectBackward0", _take_fn, (self, index),
                    static(axis=dim % builtins.max(self.ndim, 1)))


def _scatter_positions(x_shape, idx, axis):
    """Flat positions of x's elements addressed by torch's scatter index along axis."""
    grids = np.indices(idx.shape)
    grids[axis] = idx
    return np.ravel_multi_index(tuple(grids), x_shape)


def _scatter_fn(x, pos, src, mode):
    flat = fnp.reshape(x, (-1,))
    out = fnp.index_update(flat, pos, src, mode=mode)
    return fnp.reshape(out, x.shape)


def _scatter(self, dim, index, src, mode, name):
    dim %= self.ndim
    idx = index._data
    pos = wrap(_scatter_positions(self.shape, idx, dim).astype(np.int64))
    if not isinstance(src, Tensor):
        src = wrap(np.full(idx.shape, src, self.dtype))
    else:
        src = src[tuple(slice(0, s) for s in idx.shape)]
    return apply_fn(name, _scatter_fn, (self, pos, src), static(mode=mode))


def take_along_dim(self, indices, dim=None):
    """torch.take_along_dim: gather along dim, or from the flattened tensor when dim is None."""
    if dim is None:
        return gather(self.reshape(-1), 0, indices.reshape(-1))
    return gather(self, dim, indices)


T.gather, T.index_select, T.take_along_dim = gather, index_select, take_along_dim
def scatter(self, dim, index, src=None, value=None, *, reduce=None):
    """torch.scatter: src (a tensor or a number) written at index along dim; reduce='add'
    accumulates instead (as scatter_add; torch's 'multiply' is not supported here)."""
    src = src if src is not None else value
    if reduce is None:
        return _scatter(self, dim, index, src, "set",
                        "ScatterBackward0" if isinstance(src, Tensor) else "ScatterBackward1")
    if reduce != "add":
        raise RuntimeError(f"scatter: reduce={reduce!r} is not supported here; use 'add' (or "
                           "scatter_reduce's amax/amin/prod in torch)")
    return _scatter(self, dim, index, src, "add", "ScatterAddBackward0")


T.scatter = scatter
T.scatter_add = lambda self, dim, index, src: _scatter(self, dim, index, src, "add",
                                                       "ScatterAddBackward0")


def _sort_fn(x, idx, axis):
    return fnp.take_along_axis(x, idx, axis)


Sorted = namedtuple("return_types", ["values", "indices"])


def _order(x, axis, descending):
    """Indices sorting x along axis, equal elements in their original order (torch's
    stable=True) and NaN largest. Descending sorts the reversed array ascending and reverses
    the result: negating x would wrap unsigned and minimum integers and fails on bool."""
    if x.ndim == 0:
        return np.zeros((), np.int64)
    if not descending:
        return np.argsort(x, axis=axis, kind="stable").astype(np.int64)
    rev = np.flip(np.argsort(np.flip(x, axis), axis=axis, kind="stable"), axis)
    return (x.shape[axis] - 1) - rev.astype(np.int64)


def _sorted_by(self, idx, dim, name):
    if self.ndim == 0:
        return Sorted(self.clone(), wrap(idx))
    i = wrap(idx)
    return Sorted(apply_fn(name, _sort_fn, (self, i), static(axis=dim)), i)


def sort(self, dim=-1, descending=False, stable=None):
    """torch.sort (always stable here); grad_fn SortBackward1 when stable= is given (torch's
    sort.stable overload), SortBackward0 otherwise."""
    dim %= builtins.max(self.ndim, 1)
    return _sorted_by(self, _order(self._data, dim, descending), dim,
                      "SortBackward0" if stable is None else "SortBackward1")


def topk(self, k, dim=-1, largest=True, sorted=True):
    dim %= builtins.max(self.ndim, 1)
    n = self.shape[dim] if self.ndim else 1
    if not 0 <= k <= n:
        raise RuntimeError("selected index k out of range")
    idx = _order(self._data, dim, largest)
    if self.ndim:
        idx = np.take(idx, np.arange(k), axis=dim)
    return _sorted_by(self, idx, dim, "TopkBackward0")


T.sort, T.topk = sort, topk
T.argsort = lambda self, dim=-1, descending=False, stable=False: sort(self, dim,
                                                                       descending).indices
T.nonzero = lambda self, as_tuple=False: (tuple(wrap(i.astype(np.int64)) for i in
                                                np.nonzero(self._data)) if as_tuple else
                                          wrap(np.argwhere(self._data).astype(np.int64)))

