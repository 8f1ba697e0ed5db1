"""functrans.numpy's 1-D signals and polynomials: convolve, correlate, polyval, polyfit,
with jax.numpy's signatures, written on the convolution primitive, Horner's rule and lstsq."""
from __future__ import annotations

import operator

import numpy as _np

from functrans.primitives import conv as cv
from ._promotion import (
    _as_operand, _inexact, _result_type, _shape, _to_dtype, concatenate, expand_dims, reshape)
from ._shapes import flip, ndim
from ._elementwise import add, conj, divide, multiply, sqrt
from ._reductions import sum
from ._linalg import _lstsq, _product_params, _preferred

_MODES = {"full", "same", "valid"}


def _conv1d(a, v, mode, name, precision, preferred_element_type):
    """The 1-D convolution or correlation of a and v (the longer one slides over the other),
    on conv_general_dilated with one batch and one feature."""
    x, y = _as_operand(a), _as_operand(v)
    if ndim(x) != 1 or ndim(y) != 1:
        raise ValueError(f"{name}() only support 1-dimensional inputs, got shapes "
                         f"{_shape(x)} and {_shape(y)}")
    if not _shape(x)[0] or not _shape(y)[0]:
        raise ValueError(f"{name}: inputs cannot be empty, got shapes {_shape(x)} and "
                         f"{_shape(y)}")
    if mode not in _MODES:
        raise ValueError(f"{name}: mode must be one of {sorted(_MODES)}, got {mode!r}")
    dt = _inexact(_result_type(x, y)[0])
    x, y = _to_dtype(x, dt), _to_dtype(y, dt)
    reverse = False
    if name == "correlate":
        y = conj(y)
        if _shape(x)[0] < _shape(y)[0]:       # slid the other way: the output reversed
            x, y, reverse = y, x, True
    else:
        if _shape(x)[0] < _shape(y)[0]:
            x, y = y, x
        y = flip(y)
    m = _shape(y)[0]
    pad = {"valid": (0, 0), "same": (m // 2, m - 1 - m // 2), "full": (m - 1, m - 1)}[mode]
    out = cv.conv_general_dilated(
        reshape(x, (1, 1, -1)), reshape(y, (1, 1, m)), window_strides=(1,), padding=(pad,),
        lhs_dilation=(1,), rhs_dilation=(1,),
        dimension_numbers=cv.ConvDimensionNumbers((0, 1, 2), (0, 1, 2), (0, 1, 2)),
        feature_group_count=1, batch_group_count=1)
    out = reshape(out, (-1,))
    out = flip(out) if reverse else out
    if precision is not None or preferred_element_type is not None:
        out = _preferred(out, _product_params(precision, preferred_element_type))
    return out


def convolve(a, v, mode="full", *, precision=None, preferred_element_type=None):
    """The discrete linear convolution of the 1-D arrays a and v: mode 'full' (every
    overlap), 'same' (len(a) centred; the longer input's length) or 'valid' (full overlaps)."""
    return _conv1d(a, v, mode, "convolve", precision, preferred_element_type)


def correlate(a, v, mode="valid", *, precision=None, preferred_element_type=None):
    """The cross-correlation of the 1-D arrays a and v (v conjugated), modes as convolve."""
    return _conv1d(a, v, mode, "correlate", precision, preferred_element_type)


def polyval(p, x, *, unroll=16):
    """The polynomial with coefficients p (highest power first) at x, by Horner's rule."""
    pv, xv = _as_operand(p), _as_operand(x)
    if ndim(pv) != 1:
        raise ValueError(f"polyval: p must be 1-dimensional, got shape {_shape(pv)}")
    dt = _result_type(pv, xv)[0]
    pv, xv = _to_dtype(pv, dt), _to_dtype(xv, dt)
    y = add(_np.zeros(_shape(xv), dt), reshape(pv[:1], ())) if _shape(pv)[0] else \
        _np.zeros(_shape(xv), dt)
    for i in range(1, _shape(pv)[0]):
        y = add(multiply(y, xv), reshape(pv[i:i + 1], ()))
    return y


def polyfit(x, y, deg, rcond=None, full=False, w=None, cov=False):
    """The least-squares polynomial of degree deg through (x, y) (y 1-D or one column per
    fit; w weights the residuals): its coefficients, highest power first; full=True adds
    (residuals, rank, singular values, rcond). The Vandermonde columns are scaled to unit
    norm before lstsq, as NumPy does. cov= is not supported."""
    if cov:
        raise NotImplementedError("polyfit: cov= is not supported")
    deg = operator.index(deg)
    if deg < 0:
        raise ValueError(f"polyfit: expected deg >= 0, got {deg}")
    xv, yv = _as_operand(x), _as_operand(y)
    if ndim(xv) != 1:
        raise TypeError(f"polyfit: expected 1D vector for x, got shape {_shape(xv)}")
    if ndim(yv) not in (1, 2):
        raise TypeError(f"polyfit: expected 1D or 2D array for y, got shape {_shape(yv)}")
    if _shape(xv)[0] != _shape(yv)[0]:
        raise TypeError(f"polyfit: expected x and y to have same length, got {_shape(xv)} "
                        f"and {_shape(yv)}")
    dt = _inexact(_result_type(xv, yv)[0])
    xv, yv = _to_dtype(xv, dt), _to_dtype(yv, dt)
    n = _shape(xv)[0]
    if rcond is None:
        rcond = n * _np.finfo(dt).eps
    cols = [_to_dtype(_np.ones(n), dt)]
    for _ in range(deg):
        cols.append(multiply(cols[-1], xv))
    lhs = concatenate([expand_dims(c, 1) for c in reversed(cols)], axis=1)
    rhs = yv
    if w is not None:
        wv = _to_dtype(_as_operand(w), dt)
        if ndim(wv) != 1 or _shape(wv)[0] != n:
            raise TypeError(f"polyfit: expected a 1-D weight of length {n}, got shape "
                            f"{_shape(wv)}")
        lhs = multiply(lhs, expand_dims(wv, 1))
        rhs = multiply(rhs, wv if ndim(rhs) == 1 else expand_dims(wv, 1))
    scale = sqrt(sum(multiply(lhs, lhs), axis=0))
    c, resids, rank, s = _lstsq(divide(lhs, scale), rhs, rcond)
    c = divide(c, scale if ndim(c) == 1 else expand_dims(scale, 1))
    if full:
        return c, resids, rank, s, _np.asarray(rcond, dt)
    return c
