"""functrans.numpy's shape functions: axes, transposes, squeezes, broadcasting, joins, splits,
nonzero."""
from __future__ import annotations

import builtins
import math

import numpy as _np

from .. import core
from ..core import is_python_scalar, to_concrete
from functrans.primitives import elementwise as ew
from functrans.primitives import indexing as ix
from functrans.primitives import shape as sh
from ._promotion import (
    _DEFAULT, _as_operand, _axis, _broadcast_to_shape, _shape, _to_dtype, astype,
    broadcast_shapes, concatenate, expand_dims, reshape)


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
            raise core.AxisError(f"axis {a} is out of bounds for array of dimension {ndim}")
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
    perm = tuple(reversed(range(nd))) if axes is None else tuple(
        _axis(p, nd, "transpose") for p in axes)
    if len(perm) != nd or len(set(perm)) != nd:
        raise ValueError(f"transpose: axes {tuple(axes)} are not a permutation of the {nd} "
                         "axes")
    if perm == tuple(range(nd)):
        return x
    return sh.transpose(x, permutation=perm)


def swapaxes(a, axis1, axis2):
    nd = ndim(a)
    perm = list(range(nd))
    a1, a2 = _axis(axis1, nd, "swapaxes"), _axis(axis2, nd, "swapaxes")
    perm[a1], perm[a2] = perm[a2], perm[a1]
    return transpose(a, perm)


def moveaxis(a, source, destination):
    nd = ndim(a)
    src = [_axis(s, nd, "moveaxis") for s in ((source,) if isinstance(source, int) else source)]
    dst = [_axis(d, nd, "moveaxis")
           for d in ((destination,) if isinstance(destination, int) else destination)]
    if len(src) != len(dst):
        raise ValueError("moveaxis: source and destination must have the same number of "
                         "elements")
    perm = [i for i in range(nd) if i not in src]
    for d, s in sorted(zip(dst, src)):
        perm.insert(d, s)
    return transpose(a, perm)


def rollaxis(a, axis, start=0):
    """NumPy's rollaxis: axis moved to sit before position start (start counts the axes of
    the input, so rollaxis(a, 0, 2) puts axis 0 second)."""
    nd = ndim(a)
    if not -nd <= axis < nd:
        raise _np.exceptions.AxisError(axis, nd)
    if not -nd <= start <= nd:
        raise _np.exceptions.AxisError(f"'start' arg requires {-nd} <= start < {nd + 1}, but "
                                       f"{start} was passed in")
    axis, start = axis % nd, start + nd if start < 0 else start
    if axis < start:
        start -= 1
    return moveaxis(a, axis, start) if axis != start else _as_operand(a)


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


def _each(f):
    """f of one array, or a list of f of each when given several (NumPy's atleast_*d)."""
    def g(*arys):
        return f(arys[0]) if len(arys) == 1 else [f(a) for a in arys]
    g.__name__, g.__doc__ = f.__name__, f.__doc__
    return g


@_each
def atleast_1d(x):
    x = _as_operand(x)
    return reshape(x, (1,)) if ndim(x) == 0 else x


@_each
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
        bounds = [0] + [int(i) + n if int(i) < 0 else int(i) for i in indices_or_sections] + [n]
    return [_slice_axis(x, axis, lo, hi) for lo, hi in zip(bounds[:-1], bounds[1:])]


def array_split(a, sections, axis=0):
    """NumPy's array_split: an int gives that many near-equal parts (the first ones one
    longer), a list of indices splits there (as split)."""
    if not isinstance(sections, (int, _np.integer)):
        return split(a, sections, axis)
    n = _shape(a)[axis]
    q, r = divmod(n, sections)
    sizes = [q + 1] * r + [q] * (sections - r)
    return split(a, list(_np.cumsum(sizes)[:-1]), axis)


def _slice_axis(x, axis, lo, hi):
    s = _shape(x)
    axis = _axis(axis, len(s))
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


_PAD_MODES = ("constant", "edge", "reflect", "symmetric", "wrap")


def _pad_index(mode, n, lo, hi):
    """The source position along an axis of length n of each position of the padded axis
    (lo before, hi after) for an index-based pad mode (NumPy's definitions)."""
    i = _np.arange(-lo, n + hi)
    if mode == "edge":
        return _np.clip(i, 0, n - 1)
    if mode == "wrap":
        return i % n
    if mode == "reflect":                       # mirrored about the edge elements
        if n == 1:
            return _np.zeros_like(i)
        m = i % (2 * (n - 1))
        return _np.where(m < n, m, 2 * (n - 1) - m)
    m = i % (2 * n)                             # symmetric: mirrored with the edges repeated
    return _np.where(m < n, m, 2 * n - 1 - m)


def pad(array, pad_width, mode="constant", constant_values=0):
    """array padded by pad_width ((before, after) per axis, NumPy's broadcasting): with
    constant_values ("constant"), or copies of its own elements ("edge", "reflect",
    "symmetric", "wrap": a gather, so differentiable)."""
    x = _as_operand(array)
    if mode not in _PAD_MODES:
        raise NotImplementedError(f"pad mode {mode!r} is not supported (supported: "
                                  f"{', '.join(_PAD_MODES)})")
    nd = len(_shape(x))
    try:                                    # NumPy's rule: pad_width broadcasts to (ndim, 2)
        pw = _np.broadcast_to(_np.asarray(pad_width, dtype=_np.int64), (nd, 2))
    except ValueError:
        raise ValueError(f"pad: pad_width {pad_width!r} does not broadcast to ({nd}, 2) for an "
                         f"array of shape {_shape(x)}: give an int, (before, after), "
                         "((before, after),) or one (before, after) per axis") from None
    if (pw < 0).any():
        raise ValueError(f"pad: negative pad_width {pad_width!r}; use slicing to crop")
    if mode != "constant":
        for d, (lo, hi) in enumerate(pw):
            if lo or hi:
                if _shape(x)[d] == 0:
                    raise ValueError(f"pad: can't extend empty axis {d} using modes other "
                                     "than 'constant'")
                idx = _pad_index(mode, _shape(x)[d], int(lo), int(hi))
                perm = (d,) + tuple(i for i in range(nd) if i != d)    # a gather on axis d
                g = ix.gather(transpose(x, perm), idx.astype(_np.int32).reshape(-1, 1))
                x = transpose(g, tuple(int(i) for i in _np.argsort(perm)))
        return x
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
    """The indices of the nonzero elements of a concrete array, one array per axis (the
    number of them depends on the values; fnp.nonzero takes size= for traced ones)."""
    c = to_concrete(a)
    if c is None:
        raise core.ConcretizationTypeError(
            f"nonzero/argwhere/boolean masks need a concrete array, but got the traced "
            f"value {a.aval.str_short()}: the size of the result depends on the values. "
            "Pass size= to fnp.nonzero/argwhere (the result padded or cut to that length), "
            "or use fnp.where(mask, x, y) to choose elementwise instead.")
    return tuple(i.astype(_DEFAULT["i"]) for i in _np.nonzero(_np.asarray(c)))


# ---------------------------------------------------------------------------
# more of NumPy's shape functions, as slices, concatenations and reshapes

@_each
def atleast_3d(x):
    """(1, 1, 1) for a scalar, (1, N, 1) for a vector, (M, N, 1) for a matrix."""
    x = _as_operand(x)
    nd = ndim(x)
    if nd == 0:
        return reshape(x, (1, 1, 1))
    if nd == 1:
        return reshape(x, (1, _shape(x)[0], 1))
    return expand_dims(x, 2) if nd == 2 else x


def roll(a, shift, axis=None):
    """Elements shifted along axis (around the flattened array when None), wrapping around."""
    x = _as_operand(a)
    if axis is None:
        return reshape(roll(reshape(x, (-1,)), shift, 0), _shape(x))
    shifts = (shift,) if isinstance(shift, int) else tuple(shift)
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    if len(shifts) == 1:
        shifts = shifts * len(axes)
    if len(axes) == 1:
        axes = axes * len(shifts)
    if len(shifts) != len(axes):
        raise ValueError("'shift' and 'axis' should be scalars or 1D sequences")
    for s, ax in zip(shifts, axes):
        ax = _axis(ax, len(_shape(x)), "roll")
        n = _shape(x)[ax]
        k = s % n if n else 0
        if k:
            x = concatenate([_slice_axis(x, ax, n - k, n), _slice_axis(x, ax, 0, n - k)], ax)
    return x


def rot90(m, k=1, axes=(0, 1)):
    """m rotated by 90 degrees k times in the plane of axes (from the first toward the second)."""
    x = _as_operand(m)
    nd = ndim(x)
    if len(axes) != 2:
        raise ValueError("rot90: len(axes) must be 2")
    a0, a1 = _axis(axes[0], nd, "rot90"), _axis(axes[1], nd, "rot90")
    if a0 == a1:
        raise ValueError("Axes must be different.")
    k %= 4
    if k == 0:
        return x
    if k == 2:
        return flip(flip(x, a0), a1)
    perm = list(range(nd))
    perm[a0], perm[a1] = perm[a1], perm[a0]
    return transpose(flip(x, a1), perm) if k == 1 else flip(transpose(x, perm), a1)


def column_stack(tup):
    """1-D arrays as columns, side by side with 2-D ones."""
    cols = [expand_dims(_as_operand(a), 1) if ndim(a) < 2 else _as_operand(a)
            for a in (atleast_1d(a) for a in tup)]
    return concatenate(cols, axis=1)


row_stack = vstack


def vsplit(ary, indices_or_sections):
    if ndim(ary) < 2:
        raise ValueError("vsplit only works on arrays of 2 or more dimensions")
    return split(ary, indices_or_sections, 0)


def hsplit(ary, indices_or_sections):
    if ndim(ary) == 0:
        raise ValueError("hsplit only works on arrays of 1 or more dimensions")
    return split(ary, indices_or_sections, 1 if ndim(ary) > 1 else 0)


def dsplit(ary, indices_or_sections):
    if ndim(ary) < 3:
        raise ValueError("dsplit only works on arrays of 3 or more dimensions")
    return split(ary, indices_or_sections, 2)


def append(arr, values, axis=None):
    """arr and values joined (both flattened when axis is None)."""
    if axis is None:
        return concatenate([reshape(_as_operand(arr), (-1,)), reshape(_as_operand(values), (-1,))],
                           axis=0)
    return concatenate([arr, values], axis=axis)


def diff(a, n=1, axis=-1, prepend=None, append=None):
    """The n-th discrete difference along axis (not_equal for booleans, as NumPy)."""
    x = _as_operand(a)
    if ndim(x) == 0:
        raise ValueError("diff requires input that is at least one dimensional")
    axis = _axis(axis, ndim(x), "diff")
    parts = []
    for v in (prepend, x, append):
        if v is None:
            continue
        v = _as_operand(v)
        if ndim(v) == 0:
            shp = list(_shape(x))
            shp[axis] = 1
            v = _broadcast_to_shape(v, tuple(shp))
        parts.append(v)
    x = concatenate(parts, axis) if len(parts) > 1 else x
    for _ in range(n):
        m = _shape(x)[axis]
        hi, lo = _slice_axis(x, axis, 1, m), _slice_axis(x, axis, 0, m - 1)
        x = ew.ne(hi, lo) if _np.dtype(x.dtype) == _np.bool_ else ew.sub(hi, lo)
    return x
