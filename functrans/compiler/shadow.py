"""Per-thread private state for the tensors an ft.compile capture takes as inputs.

A capture gives its input tensors (a module's parameters and buffers, the arguments)
traced data and updates them functionally. Those tensors are shared: another thread may
call the same module meanwhile. So while any capture runs, Tensor's four state slots
(`_data`, `_grad_fn`, `_requires_grad`, `_vc`) are replaced by descriptors that, on the
capturing thread only, read and write a private copy of a captured tensor's state; every
other thread, and every other tensor, sees the real slots. Outside captures the plain
slots are back, so eager code pays nothing.
"""
from __future__ import annotations

import threading

from ..facade.record import VersionCounter
from ..facade.tensor import Tensor

_SLOTS = ("_data", "_grad_fn", "_requires_grad", "_vc")
_REAL = {name: Tensor.__dict__[name] for name in _SLOTS}     # the slots' member descriptors


class _Private(threading.local):
    def __init__(self):
        self.state = {}      # id(tensor) -> [tensor, data, grad_fn, requires_grad, vc]


_tls = _Private()
_lock = threading.Lock()
_running = [0]               # captures running, all threads together


class _Shadowed:
    """A Tensor slot that consults the capturing thread's private copies first."""
    __slots__ = ("real", "i")

    def __init__(self, real, i):
        self.real, self.i = real, i

    def __get__(self, t, cls=None):
        if t is None:
            return self
        p = _tls.state.get(id(t))
        if p is not None and p[0] is t:
            return p[self.i]
        return self.real.__get__(t, cls)

    def __set__(self, t, value):
        p = _tls.state.get(id(t))
        if p is not None and p[0] is t:
            p[self.i] = value
        else:
            self.real.__set__(t, value)


_SHADOWED = {name: _Shadowed(_REAL[name], i + 1) for i, name in enumerate(_SLOTS)}


class Shadows:
    """The private copies one capture made (privatize each input, `close()` at the end)."""

    def __init__(self):
        self.ids = []
        self.prior = {}       # entries of an enclosing capture on this thread, restored
        self.counters = {}    # id(real version counter) -> its private copy
        with _lock:
            if _running[0] == 0:
                for name, d in _SHADOWED.items():
                    setattr(Tensor, name, d)
            _running[0] += 1

    def privatize(self, t):
        """From now on, on this thread, t's state slots are a private copy."""
        vc = t._vc
        if vc is not None:
            copy = self.counters.get(id(vc))
            if copy is None:
                copy = self.counters[id(vc)] = VersionCounter()
                copy.v, copy.op = vc.v, vc.op
            vc = copy
        state = _tls.state
        k = id(t)
        if k in state:
            self.prior.setdefault(k, state[k])
        state[k] = [t, t._data, t._grad_fn, t._requires_grad, vc]
        self.ids.append(k)

    def close(self):
        """Drop this capture's private copies; the real slots come back when no capture
        runs on any thread."""
        state = _tls.state
        for k in self.ids:
            state.pop(k, None)
        state.update(self.prior)
        self.ids = []
        with _lock:
            _running[0] -= 1
            if _running[0] == 0:
                for name, d in _REAL.items():
                    setattr(Tensor, name, d)
