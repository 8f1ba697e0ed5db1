"""functrans.numpy's indexing: getitem, functional updates (index_update, .at), and the element
selections built on them (take, diagonal, tril, repeat, ...)."""
from __future__ import annotations

import builtins
import math

import numpy as _np

from ..core import Tracer, is_python_scalar
from functrans.primitives import elementwise as ew
from functrans.primitives import indexing as ix
from functrans.primitives import shape as sh
from ._promotion import (
    _DEFAULT, _axis, _as_operand, _broadcast_to_shape, _flat, _shape, _to_dtype, asarray, astype,
    broadcast_shapes, concatenate, expand_dims, ravel, reshape, stack)
from ._shapes import broadcast_to, moveaxis, ndim, size, transpose
from ._shapes import nonzero as _nonzero_concrete
from ._creation import zeros
from ._elementwise import (
    _zero_like, clip, greater_equal, less, logical_and, multiply, remainder)
from ._elementwise import where as _where
from ._reductions import argsort, sum


# ---------------------------------------------------------------------------
# shape functions that select or place elements (take, diagonal, tril, repeat, ...)

def repeat(a, repeats, axis=None):
    x = _as_operand(a)
    if axis is None:
        x, axis = ravel(x), 0
    if not isinstance(repeats, int):
        idx = _np.repeat(_np.arange(_shape(x)[axis]), _np.asarray(repeats))
        return take(x, idx, axis=axis)
    axis %= ndim(x)
    s = _shape(x)
    y = expand_dims(x, axis + 1)
    y = broadcast_to(y, s[:axis + 1] + (repeats,) + s[axis + 1:])
    return reshape(y, s[:axis] + (s[axis] * repeats,) + s[axis + 1:])


def tril(m, k=0):
    x = _as_operand(m)
    r, c = _shape(x)[-2:]
    mask = _np.tri(r, c, k, dtype=bool)
    return _where(mask, x, _zero_like(x))


def triu(m, k=0):
    x = _as_operand(m)
    r, c = _shape(x)[-2:]
    mask = ~_np.tri(r, c, k - 1, dtype=bool)
    return _where(mask, x, _zero_like(x))


def diagonal(a, offset=0, axis1=0, axis2=1):
    x = moveaxis(_as_operand(a), (axis1, axis2), (-2, -1))
    n, m = _shape(x)[-2:]
    i = _np.arange(builtins.max(0, builtins.min(n, m - offset) if offset >= 0 else
                                builtins.min(n + offset, m)))
    rows, cols = (i, i + offset) if offset >= 0 else (i - offset, i)
    return x[..., rows, cols]


def diag(v, k=0):
    x = _as_operand(v)
    if ndim(x) == 2:
        return diagonal(x, k)
    n = _shape(x)[0] + builtins.abs(k)
    out = zeros((n, n), x.dtype)
    rows = _np.arange(_shape(x)[0]) + builtins.max(-k, 0)
    cols = _np.arange(_shape(x)[0]) + builtins.max(k, 0)
    return index_update(out, (rows, cols), x)


def trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    """The sum along the diagonal of the axis1/axis2 planes (sum's dtype rules)."""
    if out is not None:
        raise NotImplementedError("trace: the out argument is not supported (arrays are "
                                  "immutable); use the returned value")
    return sum(diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)


def _fill_value(dt):
    """take's default fill for out-of-bounds indices: NaN for inexact dtypes, the most
    negative value for signed integers, the largest for unsigned ones, True for bool."""
    dt = _np.dtype(dt)
    if dt.kind in "fc":
        return _np.asarray(_np.nan, dt)
    if dt.kind == "b":
        return _np.asarray(True)
    return _np.asarray(_np.iinfo(dt).min if dt.kind == "i" else _np.iinfo(dt).max, dt)


def take(a, indices, axis=None, mode=None, unique_indices=False, indices_are_sorted=False,
         fill_value=None):
    """Elements of a at indices along axis (of the flattened a when None), as
    jax.numpy.take: mode "fill" (the default) gives fill_value (NaN, or the dtype's extreme
    integer) for an index outside [-n, n), "clip" clamps into [0, n), "wrap" takes it
    modulo n; negative indices in range count from the end."""
    x = _as_operand(a)
    if axis is None:
        x, axis = ravel(x), 0
    axis = _axis(axis, ndim(x), "take")
    n = _shape(x)[axis]
    mode = "fill" if mode is None else mode
    if mode not in ("fill", "clip", "wrap"):
        raise ValueError(f"take: invalid mode {mode!r}: use 'fill', 'clip' or 'wrap' (JAX "
                         "has no 'raise': it cannot raise on traced indices)")
    idx = _as_operand(indices) if not is_python_scalar(indices) else _np.asarray(indices)
    if _np.dtype(idx.dtype).kind not in "iu":
        raise IndexError(f"take: indices must be integers, got dtype {idx.dtype}")
    if mode == "wrap":
        idx = remainder(idx, n) if n else idx
    elif mode == "clip":
        idx = clip(idx, 0, builtins.max(n - 1, 0))
    out = getitem(x, (slice(None),) * axis + (idx,))
    if mode != "fill":
        return out
    valid = logical_and(greater_equal(idx, -n), less(idx, n))
    if isinstance(valid, _np.ndarray) and valid.all():
        return out
    valid = reshape(valid, (1,) * axis + _shape(idx) + (1,) * (ndim(x) - axis - 1))
    fill = _fill_value(x.dtype) if fill_value is None else _np.asarray(fill_value, x.dtype)
    return _where(valid, out, fill)


def take_along_axis(arr, indices, axis, mode=None, fill_value=None):
    x = _as_operand(arr)
    idx = _as_operand(indices)
    if axis is None:
        x, idx, axis = ravel(x), ravel(idx), 0
    nd = ndim(x)
    if ndim(idx) != nd:
        raise ValueError(f"indices and arr must have the same number of dimensions; "
                         f"{ndim(idx)} vs. {nd}")
    axis = _axis(axis, nd, "take_along_axis")
    shape = broadcast_shapes(tuple(1 if i == axis else s for i, s in enumerate(_shape(x))),
                             tuple(1 if i == axis else s for i, s in enumerate(_shape(idx))))
    out_shape = tuple(s if i != axis else _shape(idx)[axis] for i, s in enumerate(shape))
    comps = []
    for d in range(nd):
        if d == axis:
            comps.append(_broadcast_to_shape(_normalize_index(idx, _shape(x)[axis]), out_shape))
        else:
            ar = _np.arange(out_shape[d], dtype=_np.int32).reshape(
                tuple(-1 if i == d else 1 for i in range(nd)))
            comps.append(_np.broadcast_to(ar, out_shape))
    out = ix.gather(x, stack([astype(c, _np.int32) for c in comps], axis=-1))
    if mode not in (None, "fill"):
        raise NotImplementedError(f"take_along_axis: mode {mode!r} is not supported (only "
                                  "'fill', the default)")
    # out-of-bounds indices give fill_value (NaN, or the dtype's extreme integer), as JAX
    n = _shape(x)[axis]
    valid = logical_and(greater_equal(idx, -n), less(idx, n))
    if isinstance(valid, _np.ndarray) and valid.all():
        return out
    fill = _fill_value(x.dtype) if fill_value is None else _np.asarray(fill_value, x.dtype)
    return _where(_broadcast_to_shape(valid, out_shape) if _shape(valid) != out_shape else valid,
                 out, fill)


# ---------------------------------------------------------------------------
# nonzero with a static size (traceable)

def nonzero(a, *, size=None, fill_value=None):
    """The indices of the nonzero elements, one array per axis. The number of them depends
    on the values, so a traced `a` needs `size`: the first `size` indices, padded with
    fill_value (0 by default; a tuple gives one per axis), as jax.numpy.nonzero."""
    if size is None:
        return _nonzero_concrete(a)
    x = _as_operand(a)
    shp = _shape(x)
    if not shp:
        raise ValueError("nonzero requires an array of at least one dimension")
    size = int(size)
    fills = fill_value if isinstance(fill_value, (tuple, list)) else \
        (0 if fill_value is None else fill_value,) * len(shp)
    if len(fills) != len(shp):
        raise ValueError(f"nonzero: fill_value must be a scalar or a tuple of length "
                         f"{len(shp)}, got {fill_value!r}")
    n = math.prod(shp)
    mask = ew.ne(_to_dtype(reshape(x, (-1,)), _np.dtype(bool)), _np.zeros((), bool)) \
        if _np.dtype(x.dtype) != _np.bool_ else reshape(x, (-1,))
    idt = _DEFAULT["i"]
    # the positions of the true elements first, in order (a stable sort of not-mask)
    pos = argsort(ew.not_(mask), stable=True) if n else _np.zeros(0, idt)
    pos = astype(pos, idt)
    if size > n:
        pos = concatenate([pos, _np.zeros(size - n, idt)])
    elif size < n:
        pos = sh.slice(pos, start_indices=(0,), limit_indices=(size,), strides=None)
    valid = ew.lt(sh.iota(dtype=idt, shape=(size,), dimension=0),
                  _broadcast_to_shape(_to_dtype(sum(mask), idt), (size,)))
    out, rest = [], pos
    for d in reversed(range(len(shp))):
        k = _np.asarray(shp[d], idt)
        coord = ew.rem(rest, _broadcast_to_shape(k, (size,))) if size else rest
        rest = ew.div(rest, _broadcast_to_shape(k, (size,))) if size else rest
        fill = _broadcast_to_shape(_np.asarray(fills[d], idt), (size,))
        out.append(ew.select(valid, coord, fill) if size else coord)
    return tuple(reversed(out))


def flatnonzero(a, *, size=None, fill_value=None):
    """The indices of the nonzero elements of the flattened a; `size` and fill_value as in
    nonzero."""
    return nonzero(ravel(_as_operand(a)), size=size, fill_value=fill_value)[0]


def where(condition, x=None, y=None, /, *, size=None, fill_value=None):
    """Elementwise choice where(condition, x, y); the one-argument form is nonzero
    (condition), which takes `size`/fill_value under tracing."""
    if x is None and y is None:
        return nonzero(condition, size=size, fill_value=fill_value)
    if size is not None or fill_value is not None:
        raise ValueError("where: size= and fill_value= go with the one-argument form "
                         "where(condition) only")
    return _where(condition, x, y)


def argwhere(a, *, size=None, fill_value=None):
    """The indices of the nonzero elements as rows of an (N, ndim) array; `size` and
    fill_value as in nonzero."""
    idx = nonzero(a, size=size, fill_value=fill_value)
    if size is None:
        return _np.stack(idx, axis=-1)
    return stack(idx, axis=-1)


# ---------------------------------------------------------------------------
# indexing

def _normalize_index(i, n):
    """Non-negative integer index array (negative entries count from the end)."""
    if is_python_scalar(i) or isinstance(i, (_np.ndarray, _np.generic)):
        a = _np.asarray(i)
        if a.dtype.kind not in "iu":
            raise IndexError(f"indices must be integers, got dtype {a.dtype}")
        return _np.where(a < 0, a + n, a).astype(_np.int32)
    if _np.dtype(i.dtype).kind not in "iu":
        raise IndexError(f"indices must be integers, got {i.aval.str_short()}")
    i = astype(i, _np.int32)
    return ew.select(ew.lt(i, _np.int32(0)) if not _shape(i) else
                     ew.lt(i, _broadcast_to_shape(_np.int32(0), _shape(i))),
                     ew.add(i, _np.int32(n)), i)


def _expand_index(idx, nd):
    """Index tuple with bool masks turned into integer arrays and Ellipsis expanded."""
    if not isinstance(idx, tuple):
        idx = (idx,)
    items = []
    for it in idx:
        if isinstance(it, (list, tuple)):       # a sequence inside the index: an index array
            it = _np.asarray(it) if not builtins.any(isinstance(v, Tracer) for v in _flat(it)) \
                else asarray(it)
        if (isinstance(it, (_np.ndarray, Tracer)) and _np.dtype(it.dtype) == _np.bool_) \
                or type(it) is bool:
            if type(it) is bool:
                raise IndexError("indexing with a Python bool is not supported")
            items.extend(nonzero(it))
        else:
            items.append(it)
    n_ell = builtins.sum(1 for it in items if it is Ellipsis)
    if n_ell > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = builtins.sum(1 for it in items if it is not None and it is not Ellipsis)
    if used > nd:
        raise IndexError(f"too many indices for array: array is {nd}-dimensional, but {used} "
                         "were indexed")
    out = []
    for it in items:
        if it is Ellipsis:
            out.extend([slice(None)] * (nd - used))
        else:
            out.append(it)
    if n_ell == 0:
        out.extend([slice(None)] * (nd - used))
    return out


def _is_int_scalar(it):
    return (type(it) is int or isinstance(it, _np.integer)) and not isinstance(it, bool)


def getitem(x, idx):
    """NumPy indexing: ints, slices, None, Ellipsis, integer arrays, concrete bool masks."""
    x = _as_operand(x)
    items = _expand_index(idx, ndim(x))
    # None: insert size-1 axes first, then treat them as full slices
    new_axes, pos = [], 0
    for it in items:
        if it is None:
            new_axes.append(pos)
        pos += 1
    if new_axes:
        x = sh.expand_dims(x, dimensions=tuple(new_axes))
        items = [slice(None) if it is None else it for it in items]
    arrays = [i for i, it in enumerate(items) if not isinstance(it, slice) and not _is_int_scalar(it)]
    if arrays:   # with advanced indices present, ints are advanced indices too
        arrays = [i for i, it in enumerate(items) if not isinstance(it, slice)]
    shp = _shape(x)
    start, limit, strides, revs, squeezes = [], [], [], [], []
    for d, (it, n) in enumerate(zip(items, shp)):
        if isinstance(it, slice):
            a, b, s = it.indices(n)
            m = len(range(a, b, s))
            if s > 0:
                start.append(a), limit.append(a + (m - 1) * s + 1 if m else a), strides.append(s)
            else:
                last = a + (m - 1) * s
                start.append(last if m else 0), limit.append(a + 1 if m else 0)
                strides.append(-s)
                if m > 1:
                    revs.append(d)
        elif d not in arrays:          # a Python int on a basic index
            i = int(it)
            if not -n <= i < n:
                raise IndexError(f"index {i} is out of bounds for axis {d} with size {n}")
            i %= n
            start.append(i), limit.append(i + 1), strides.append(1)
            squeezes.append(d)
        else:
            start.append(0), limit.append(n), strides.append(1)
    if tuple(start) != (0,) * len(shp) or tuple(limit) != shp or builtins.any(s != 1 for s in strides):
        x = sh.slice(x, start_indices=tuple(start), limit_indices=tuple(limit),
                     strides=None if builtins.all(s == 1 for s in strides) else tuple(strides))
    if revs:
        x = sh.rev(x, dimensions=tuple(revs))
    if not arrays:
        return sh.squeeze(x, dimensions=tuple(squeezes)) if squeezes else x
    # advanced indexing: gather over the indexed axes moved to the front
    shp = _shape(x)
    idx_arrays = [_normalize_index(items[d], shp[d]) for d in arrays]
    bshape = broadcast_shapes(*[_shape(i) for i in idx_arrays])
    rest = [d for d in range(len(shp)) if d not in arrays]
    xt = transpose(x, arrays + rest)
    comps = [_broadcast_to_shape(i, bshape + (1,)) if False else
             reshape(_broadcast_to_shape(i, bshape) if _shape(i) != bshape else i, bshape + (1,))
             for i in idx_arrays]
    index = concatenate(comps, axis=len(bshape)) if len(comps) > 1 else comps[0]
    out = ix.gather(xt, index)
    contiguous = arrays == list(range(arrays[0], arrays[0] + len(arrays)))
    if contiguous and arrays[0] > 0:
        nb = len(bshape)
        k = arrays[0]
        perm = list(range(nb, nb + k)) + list(range(nb)) + list(range(nb + k, ndim(out)))
        out = transpose(out, perm)
    return out


def _index_positions(x, idx):
    """Flat positions of the elements x[idx] selects, with the shape of x[idx]."""
    n = size(x)
    pos = sh.iota(dtype=_np.dtype(_np.int32), shape=(n,), dimension=0) if n else _np.zeros(0, _np.int32)
    return getitem(reshape(pos, _shape(x)), idx)


def index_update(x, idx, values, mode="set"):
    """Functional x[idx] = values (mode "set") or x[idx] += values (mode "add")."""
    x = _as_operand(x)
    pos = _index_positions(x, idx)
    vals = _to_dtype(values, _np.dtype(x.dtype)) if is_python_scalar(values) else \
        astype(_as_operand(values), x.dtype)
    vals = broadcast_to(vals, _shape(pos))
    flat = reshape(x, (-1,))
    index = reshape(pos, _shape(pos) + (1,))
    bind = ix.scatter if mode == "set" else ix.scatter_add
    return reshape(bind(flat, index, vals), _shape(x))


def index_add(x, idx, values):
    return index_update(x, idx, values, mode="add")


class _IndexUpdateHelper:
    """x.at[idx].set(v) / .add(v) / .get(), as in JAX (on traced values)."""

    def __init__(self, x):
        self.x = x

    def __getitem__(self, idx):
        return _IndexUpdateRef(self.x, idx)


class _IndexUpdateRef:
    def __init__(self, x, idx):
        self.x, self.idx = x, idx

    def get(self):
        return getitem(self.x, self.idx)

    def set(self, v):
        return index_update(self.x, self.idx, v, "set")

    def add(self, v):
        return index_update(self.x, self.idx, v, "add")

    def multiply(self, v):
        return index_update(self.x, self.idx, multiply(getitem(self.x, self.idx), v), "set")


def at(x):
    return _IndexUpdateHelper(x)
