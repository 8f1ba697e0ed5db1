"""ft.config: JAX's flag object. `jax_enable_x64` sets the default dtypes of Python data
(scalars, lists, fnp.zeros/ones/eye, ft.random): 32-bit when off (JAX's default), 64-bit
when on. NumPy arrays keep their own dtype either way (docs/porting_jax.md).
`cpu_backend` ("auto", "native" or "numpy"; default $FUNCTRANS_CPU_BACKEND, else "auto")
selects how jit runs fusion groups on the CPU (docs/jit.md, "The native CPU backend").
"""
from __future__ import annotations

import contextlib
import math
import os
import threading

import numpy as np

# kind -> the default dtype of that kind; mutated in place, so readers holding the dict
# (functrans.numpy's promotion) see every update
DEFAULT_DTYPES = {"b": np.dtype(np.bool_), "i": np.dtype(np.int32), "u": np.dtype(np.uint32),
                  "f": np.dtype(np.float32), "c": np.dtype(np.complex64)}
_X32 = dict(DEFAULT_DTYPES)
_X64 = {"b": np.dtype(np.bool_), "i": np.dtype(np.int64), "u": np.dtype(np.uint64),
        "f": np.dtype(np.float64), "c": np.dtype(np.complex128)}

# JAX's x32 canonicalization: 64-bit dtype -> the 32-bit one values of it become at the
# JAX-side entry points while jax_enable_x64 is off (empty while it is on); mutated in place
_NARROWINGS = {np.dtype(np.float64): np.dtype(np.float32), np.dtype(np.int64): np.dtype(np.int32),
               np.dtype(np.uint64): np.dtype(np.uint32),
               np.dtype(np.complex128): np.dtype(np.complex64)}
NARROW = dict(_NARROWINGS)


CPU_BACKENDS = ("auto", "native", "numpy")


def env_positive(name: str, default: float, unit: str) -> float:
    """The finite number > 0 that environment variable `name` holds, else `default` (unset
    or empty). Anything else (text, nan, inf, zero, a negative) is a ValueError naming the
    variable: a nan deadline would never expire, a negative one always has."""
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"${name}={text!r} is not a number of {unit} > 0; set it to a "
                         f"positive number such as {default:g}, or unset it for {default:g}")
    return value


def _cpu_backend(value, source):
    if value not in CPU_BACKENDS:
        raise ValueError(f"{source} must be one of {', '.join(map(repr, CPU_BACKENDS))}, "
                         f"got {value!r}")
    return value


class Config:
    """`ft.config.update("jax_enable_x64", True)`, `ft.config.jax_enable_x64`, as JAX;
    `ft.config.update("cpu_backend", "numpy")`, `ft.config.cpu_backend`."""

    def __init__(self):
        self._x64 = False
        self._listeners = []
        self._backend_listeners = []
        self.cpu_backend = _cpu_backend(os.environ.get("FUNCTRANS_CPU_BACKEND", "auto"),
                                        "$FUNCTRANS_CPU_BACKEND")

    @property
    def jax_enable_x64(self) -> bool:
        return self._x64

    def on_update(self, fn):
        """fn() is called after every change of the flags (caches of defaults refresh)."""
        self._listeners.append(fn)

    def on_backend_change(self, fn):
        """fn() is called after every change of `cpu_backend` (compiled programs drop)."""
        self._backend_listeners.append(fn)

    def update(self, name, value):
        if name == "cpu_backend":
            value = _cpu_backend(value, "ft.config.update('cpu_backend', ...)")
            if value != self.cpu_backend:
                self.cpu_backend = value
                for fn in self._backend_listeners:
                    fn()
            return
        if name != "jax_enable_x64":
            raise AttributeError(f"Unrecognized config option: {name}")
        self._x64 = bool(value)
        DEFAULT_DTYPES.update(_X64 if self._x64 else _X32)
        NARROW.clear()
        if not self._x64:
            NARROW.update(_NARROWINGS)
        for fn in self._listeners:
            fn()

    def read(self, name):
        if name == "cpu_backend":
            return self.cpu_backend
        if name != "jax_enable_x64":
            raise AttributeError(f"Unrecognized config option: {name}")
        return self._x64


config = Config()


class _X64State:
    """jax.enable_x64: `with enable_x64(True):` sets `jax_enable_x64` inside the block and
    restores it after; `enable_x64.value` is the current setting."""

    @property
    def value(self) -> bool:
        return config.jax_enable_x64

    @contextlib.contextmanager
    def __call__(self, new_val: bool = True):
        old = config.jax_enable_x64
        config.update("jax_enable_x64", new_val)
        try:
            yield
        finally:
            config.update("jax_enable_x64", old)


enable_x64 = _X64State()


_leaks = threading.local()


def leak_checking() -> bool:
    """Whether ft.checking_leaks() is on in this thread."""
    return getattr(_leaks, "on", False)


class _LeakState:
    """jax.check_tracer_leaks: `with check_tracer_leaks():` (or `(True)`) turns the leak
    check on in this thread for the block; `.value` is the current setting."""

    @property
    def value(self) -> bool:
        return leak_checking()

    @contextlib.contextmanager
    def __call__(self, new_val: bool = True):
        old = leak_checking()
        _leaks.on = bool(new_val)
        try:
            yield
        finally:
            _leaks.on = old


check_tracer_leaks = _LeakState()


def checking_leaks():
    """jax.checking_leaks(): within the block, a trace that ends while something outside it
    still holds one of its tracers (appended to an outer list, stored on an object) raises
    UnexpectedTracerError naming the tracer, instead of leaving it to fail later."""
    return check_tracer_leaks(True)
