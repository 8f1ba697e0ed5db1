"""NumPy's gradient (finite differences of sampled values), the r_/c_ index expressions,
partition and real_if_close, written on the other functrans.numpy functions."""
from __future__ import annotations

import operator

import numpy as _np

from ..core import Tracer, is_python_scalar
from ._promotion import (
    _DEFAULT, _as_operand, _shape, asarray, astype, concatenate, reshape, _result_type)
from ._shapes import _canon_axis, _slice_axis, atleast_1d, ndim
from ._creation import arange, linspace
from ._reductions import sort


def _edge_diff(f, axis, dx, edge_order):
    """One axis of gradient: central differences inside, one-sided ones of edge_order at
    the ends; dx is a scalar spacing or the differences of the coordinates."""
    n = _shape(f)[axis]
    if n < edge_order + 1:
        raise ValueError(f"gradient: shape {_shape(f)} has {n} samples along axis {axis}; "
                         f"edge_order={edge_order} needs at least {edge_order + 1}")

    def s(lo, hi):
        return _slice_axis(f, axis, lo % n if lo < 0 else lo, n + hi if hi <= 0 else hi)

    def along(v):                           # coordinate differences broadcast along axis
        return v if ndim(v) == 0 else reshape(v, (-1,) + (1,) * (ndim(f) - axis - 1))

    uniform = ndim(dx) == 0
    if uniform:
        inner = (s(2, 0) - s(0, -2)) / (2 * dx)
    else:
        hs, hd = along(dx[:-1]), along(dx[1:])
        inner = (-hd / (hs * (hd + hs)) * s(0, -2) + (hd - hs) / (hd * hs) * s(1, -1)
                 + hs / (hd * (hd + hs)) * s(2, 0))
    if edge_order == 1:
        d0, d1 = (dx, dx) if uniform else (dx[0], dx[-1])
        first, last = (s(1, 2) - s(0, 1)) / d0, (s(-1, 0) - s(-2, -1)) / d1
    else:
        a1, a2 = (dx, dx) if uniform else (dx[0], dx[1])
        first = (-(2 * a1 + a2) / (a1 * (a1 + a2)) * s(0, 1) + (a1 + a2) / (a1 * a2) * s(1, 2)
                 - a1 / (a2 * (a1 + a2)) * s(2, 3))
        b1, b2 = (dx, dx) if uniform else (dx[-2], dx[-1])
        last = (b2 / (b1 * (b1 + b2)) * s(-3, -2) - (b1 + b2) / (b1 * b2) * s(-2, -1)
                + (2 * b2 + b1) / (b2 * (b1 + b2)) * s(-1, 0))
    return concatenate([first, inner, last], axis=axis)


def gradient(f, *varargs, axis=None, edge_order=1):
    """NumPy's gradient: second-order central differences inside and edge_order (1 or 2)
    one-sided ones at the ends, per axis; varargs are one scalar spacing, or one spacing
    (scalar or coordinates) per axis. One axis gives an array, several a list."""
    f = _as_operand(f)
    if edge_order not in (1, 2):
        raise ValueError(f"gradient: edge_order must be 1 or 2, got {edge_order!r}")
    nd = ndim(f)
    axes = tuple(range(nd)) if axis is None else tuple(      # in the order given, as NumPy
        _canon_axis(a, nd)[0] for a in ((axis,) if _np.ndim(axis) == 0 else axis))
    if len(varargs) == 0:
        spacing = [1.0] * len(axes)
    elif len(varargs) == 1 and ndim(varargs[0]) == 0:
        spacing = list(varargs) * len(axes)
    elif len(varargs) == len(axes):
        spacing = list(varargs)
    else:
        raise TypeError(f"gradient: {len(varargs)} spacings for {len(axes)} axes; give none, "
                        "one scalar, or one per axis")
    out = []
    for ax, h in zip(axes, spacing):
        if not is_python_scalar(h) and ndim(h) == 1:
            if _shape(h)[0] != _shape(f)[ax]:
                raise ValueError(f"gradient: coordinates of length {_shape(h)[0]} for axis {ax} "
                                 f"of length {_shape(f)[ax]}")
            x = asarray(h)
            h = x[1:] - x[:-1]
        elif not is_python_scalar(h) and ndim(h) != 0:
            raise ValueError(f"gradient: a spacing is a scalar or 1-D coordinates, got shape "
                             f"{_shape(h)}")
        dt = _result_type(f, h)[0]
        dt = dt if dt.kind in "fc" else _DEFAULT["f"]
        out.append(_edge_diff(astype(f, dt), ax, h if is_python_scalar(h) else astype(h, dt),
                              edge_order))
    return out[0] if len(out) == 1 else out


class _Concatenator:
    """NumPy's r_/c_: slices become arange (or linspace for a complex step), scalars and
    arrays (traced too) are concatenated along the first axis (r_) or as columns (c_)."""

    def __init__(self, columns):
        self._columns = columns

    def __getitem__(self, key):
        items = key if isinstance(key, tuple) else (key,)
        if items and isinstance(items[0], str):
            raise NotImplementedError(f"{'c_' if self._columns else 'r_'}[{items[0]!r}, ...]: "
                                      "string directives are not supported; reshape and call "
                                      "fnp.concatenate")
        parts = [atleast_1d(self._item(k)) for k in items]
        if self._columns:
            parts = [reshape(p, (-1, 1)) if ndim(p) == 1 else p for p in parts]
            return concatenate(parts, axis=-1)
        return concatenate(parts, axis=0)

    @staticmethod
    def _item(k):
        if not isinstance(k, slice):
            return k if isinstance(k, Tracer) or is_python_scalar(k) else asarray(k)
        start = 0 if k.start is None else k.start
        step = 1 if k.step is None else k.step
        if isinstance(step, complex):
            return linspace(start, k.stop, operator.index(int(abs(step))))
        return arange(start, k.stop, step)


r_ = _Concatenator(columns=False)
c_ = _Concatenator(columns=True)


def partition(a, kth, axis=-1):
    """NumPy's partition. The element at each kth position is the one a sort would put
    there, smaller ones before and larger ones after; a fully sorted array satisfies this,
    and is what is returned (so it is differentiable through sort)."""
    x = _as_operand(a)
    n = int(_np.prod(_shape(x))) if axis is None else _shape(x)[_canon_axis(axis, ndim(x))[0]]
    for k in _np.atleast_1d(kth):
        if not -n <= int(k) < n:
            raise ValueError(f"partition: kth {int(k)} out of bounds for length {n}")
    return sort(x, axis=axis)


def real_if_close(a, tol=100):
    """NumPy's real_if_close: the real part when every imaginary part is within tol machine
    epsilons (tol > 1) or tol itself of zero. The result's dtype depends on the values, so
    it needs concrete ones."""
    if isinstance(a, Tracer):
        raise TypeError("real_if_close: the result's dtype depends on the values, which a "
                        f"traced {a.aval.str_short()} "
                        "does not have; use fnp.real(x) inside jit/grad/vmap")
    return asarray(_np.real_if_close(_np.asarray(a), tol=tol))
