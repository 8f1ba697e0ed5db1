"""functrans.numpy's shape functions: axes, transposes, squeezes, broadcasting, joins, splits,
nonzero."""
from __future__ import annotations

import builtins
import math

import numpy as _np

from .. import core
from ..core import is_python_scalar, to_concrete
from functrans.primitives import shape as sh
from ._promotion import (
    _as_operand, _broadcast_to_shape, _shape, _to_dtype, astype, broadcast_shapes, concatenate,
    expand_dims, reshape)


# ---------------------------------------------------------------------------
# shapes

def _canon_axis(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, int) or (not isinstance(axis, (tuple, list))) else axis
    out = []
    for a in axes:
        a = int(a)
        if not -ndim <= a < builtins.max(ndim, 1):
            raise core.ShapeError(f"axis {a} is out of bounds for array of dimension {ndim}")
        out.append(a % ndim if ndim else 0)
    return tuple(sorted(set(out)))


def shape(a):
    return _shape(a)


def ndim(a):
    return len(_shape(a))


def size(a, axis=None):
    s = _shape(a)
    return math.prod(s) if axis is None else s[axis]


def transpose(a, axes=None):
    x = _as_operand(a)
    nd = len(_shape(x))
    perm = tuple(reversed(range(nd))) if axes is None else tuple(int(p) % nd for p in axes)
    if perm == tuple(range(nd)):
        return x
    return sh.transpose(x, permutation=perm)


def swapaxes(a, axis1, axis2):
    nd = ndim(a)
    perm = list(range(nd))
    perm[axis1 % nd], perm[axis2 % nd] = perm[axis2 % nd], perm[axis1 % nd]
    return transpose(a, perm)


def moveaxis(a, source, destination):
    nd = ndim(a)
    src = [s % nd for s in ((source,) if isinstance(source, int) else source)]
    dst = [d % nd for d in ((destination,) if isinstance(destination, int) else destination)]
    perm = [i for i in range(nd) if i not in src]
    for d, s in sorted(zip(dst, src)):
        perm.insert(d, s)
    return transpose(a, perm)


def squeeze(a, axis=None):
    x = _as_operand(a)
    s = _shape(x)
    if axis is None:
        dims = tuple(i for i, d in enumerate(s) if d == 1)
    else:
        dims = _canon_axis(axis, len(s))
        for d in dims:
            if s[d] != 1:
                raise ValueError(f"cannot select an axis to squeeze out which has size not "
                                 f"equal to one (axis {d} of shape {s})")
    return sh.squeeze(x, dimensions=dims) if dims else x


def broadcast_to(a, shape):
    x = _as_operand(a)
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    if broadcast_shapes(_shape(x), shape) != shape:
        raise core.ShapeError(f"cannot broadcast array of shape {_shape(x)} to shape {shape}")
    return _broadcast_to_shape(x, shape)


def broadcast_arrays(*args):
    s = broadcast_shapes(*[_shape(a) for a in args])
    return [_broadcast_to_shape(_as_operand(a), s) for a in args]


def atleast_1d(x):
    x = _as_operand(x)
    return reshape(x, (1,)) if ndim(x) == 0 else x


def atleast_2d(x):
    x = atleast_1d(x)
    return expand_dims(x, 0) if ndim(x) == 1 else x


def hstack(arrays):
    arrays = [atleast_1d(a) for a in arrays]
    return concatenate(arrays, axis=0 if ndim(arrays[0]) == 1 else 1)


def vstack(arrays):
    return concatenate([atleast_2d(a) for a in arrays], axis=0)


def split(a, indices_or_sections, axis=0):
    x = _as_operand(a)
    n = _shape(x)[axis]
    if isinstance(indices_or_sections, int):
        if n % indices_or_sections:
            raise ValueError("array split does not result in an equal division")
        step = n // indices_or_sections
        bounds = [i * step for i in range(indices_or_sections + 1)]
    else:
        bounds = [0] + [int(i) for i in indices_or_sections] + [n]
    return [_slice_axis(x, axis, lo, hi) for lo, hi in zip(bounds[:-1], bounds[1:])]


def array_split(a, sections, axis=0):
    n = _shape(a)[axis]
    q, r = divmod(n, sections)
    sizes = [q + 1] * r + [q] * (sections - r)
    return split(a, list(_np.cumsum(sizes)[:-1]), axis)


def _slice_axis(x, axis, lo, hi):
    s = _shape(x)
    axis %= len(s)
    lo, hi = builtins.min(builtins.max(lo, 0), s[axis]), builtins.min(builtins.max(hi, 0), s[axis])
    hi = builtins.max(lo, hi)
    start = [0] * len(s)
    limit = list(s)
    start[axis], limit[axis] = lo, hi
    return sh.slice(x, start_indices=tuple(start), limit_indices=tuple(limit), strides=None)


def flip(a, axis=None):
    x = _as_operand(a)
    return sh.rev(x, dimensions=_canon_axis(axis, len(_shape(x))))


def fliplr(a):
    return flip(a, 1)


def flipud(a):
    return flip(a, 0)


def pad(array, pad_width, mode="constant", constant_values=0):
    x = _as_operand(array)
    if mode != "constant":
        raise NotImplementedError(f"pad mode {mode!r} is not supported (only 'constant')")
    nd = len(_shape(x))
    pw = _np.broadcast_to(_np.asarray(pad_width, dtype=_np.int64).reshape(-1, 2)
                          if _np.ndim(pad_width) else _np.full((1, 2), pad_width), (nd, 2))
    cv = _to_dtype(constant_values, _np.dtype(x.dtype)) if is_python_scalar(constant_values) \
        else astype(constant_values, x.dtype)
    return sh.pad(x, cv, padding_config=tuple((int(lo), int(hi), 0) for lo, hi in pw))


def tile(a, reps):
    x = _as_operand(a)
    reps = (reps,) if isinstance(reps, int) else tuple(reps)
    nd = builtins.max(len(reps), ndim(x))
    x = reshape(x, (1,) * (nd - ndim(x)) + _shape(x))
    reps = (1,) * (nd - len(reps)) + reps
    big = []
    for r, s in zip(reps, _shape(x)):
        big += [r, s]
    y = _broadcast_to_shape(reshape(x, tuple(v for s in _shape(x) for v in (1, s))), tuple(big))
    return reshape(y, tuple(r * s for r, s in zip(reps, _shape(x))))


def nonzero(a):
    c = to_concrete(a)
    if c is None:
        raise core.ConcretizationTypeError(
            f"nonzero/argwhere/boolean masks need a concrete array, but got the traced value "
            f"{a.aval.str_short()}: the size of the result depends on the values. Use "
            "fnp.where(mask, x, y) to choose elementwise instead.")
    return tuple(i.astype(_np.int32) for i in _np.nonzero(_np.asarray(c)))


def argwhere(a):
    return _np.stack(nonzero(a), axis=-1)
