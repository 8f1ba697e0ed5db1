"""Array modules: NumPy on "cpu", CuPy on "cuda" (imported lazily: it is optional)."""
from __future__ import annotations

import numpy as np


def array_module(*vals):
    """`numpy` unless one of the values is a CuPy array (then cupy, wrapped so that NumPy
    operands such as literals are accepted: see cupy_array_module)."""
    for v in vals:
        t = type(v)
        if t is np.ndarray:
            continue
        if t.__module__.startswith("cupy"):
            return cupy_array_module()
    return np


def _on_device(cp, x):
    """A NumPy operand made acceptable to CuPy: rank-0 arrays become NumPy scalars (CuPy
    takes those as it takes Python scalars), other arrays are copied to the device."""
    t = type(x)
    if t is np.ndarray:
        return x[()] if x.ndim == 0 else cp.asarray(x)
    if t is list or t is tuple:
        return t(_on_device(cp, v) for v in x)
    return x


class _CupyModule:
    """cupy as an `xp` for primitive implementations. Jaxpr literals and captured
    constants are NumPy arrays, which CuPy's functions refuse (it never copies to the
    device implicitly); this wrapper converts them on the way in."""

    def __init__(self, cp):
        self._cp = cp

    def __getattr__(self, name):
        attr = getattr(self._cp, name)
        if not callable(attr) or isinstance(attr, type):
            return attr
        cp = self._cp

        def call(*args, **kwargs):
            return attr(*[_on_device(cp, a) for a in args],
                        **{k: _on_device(cp, v) for k, v in kwargs.items()})
        call.__name__ = name
        self.__dict__[name] = call            # cached: later lookups skip __getattr__
        return call

    def __repr__(self):
        return "<cupy for functrans implementations>"


_cupy_xp = None


def cupy_array_module(cp=None):
    """cp (by default the installed cupy: reached only once a CuPy array exists) wrapped
    as an `xp` for primitive implementations; the wrapper is kept for the next call."""
    global _cupy_xp
    if cp is None:
        import cupy as cp
    if _cupy_xp is None or _cupy_xp._cp is not cp:
        _cupy_xp = _CupyModule(cp)
    return _cupy_xp
