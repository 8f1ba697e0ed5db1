"""ft.debug: jax.debug.print and jax.debug.callback, host callbacks that see concrete values
both eagerly and while a jitted or transformed program runs.

`debug_print` and `debug_callback` are effectful primitives (never removed as dead code, never hoisted or
fused, run in program order) returning a token nobody reads. Under vmap they run once per
batch element, as JAX does: its `levels` leading axes are batch axes, outermost first.
"""
from __future__ import annotations

import builtins

import numpy as np

from . import tree_util
from .core import ShapedArray, Zero
from .core.devices import device_put
from .primitives.base import bdim_size, broadcast_batched, defprim, moveaxis

_TOKEN = ShapedArray((), np.bool_)


def _print_impl(xp, *vals, fmt, tree, levels):
    vals = device_put(list(vals), "cpu")        # CuPy values are printed from the host
    lead = vals[0].shape[:levels] if levels else ()
    for idx in np.ndindex(*lead):
        args, kwargs = tree_util.tree_unflatten(tree, [v[idx] for v in vals])
        builtins.print(fmt.format(*args, **kwargs))
    return np.zeros((), np.bool_)


def _print_jvp(primals, tangents, **params):
    return debug_print_p.bind(*primals, **params), Zero(_TOKEN)


def _print_batch(vals, dims, *, fmt, tree, levels):
    size = bdim_size(vals, dims)
    vals = [broadcast_batched(v, size) if d is None else moveaxis(v, d, 0)
            for v, d in zip(vals, dims)]
    return debug_print_p.bind(*vals, fmt=fmt, tree=tree, levels=levels + 1), None


debug_print_p = defprim("debug_print", _print_impl, lambda *a, **p: _TOKEN, jvp=_print_jvp,
                        batch=_print_batch, effectful=True, memo=False)


def print(fmt: str, *args, ordered: bool = False, **kwargs) -> None:  # noqa: A001
    """Print fmt.format(*args, **kwargs) with the arrays' values: now for concrete
    values, when the program runs inside jit (once per element under vmap). Effects keep
    program order, so `ordered` is accepted and always holds."""
    leaves, tree = tree_util.tree_flatten((args, kwargs))
    debug_print_p.bind(*leaves, fmt=fmt, tree=tree, levels=0)


def _callback_impl(xp, *vals, callback, tree, levels):
    vals = device_put(list(vals), "cpu")        # the callback sees host (NumPy) values
    lead = vals[0].shape[:levels] if levels else ()
    for idx in np.ndindex(*lead):
        args, kwargs = tree_util.tree_unflatten(tree, [v[idx] for v in vals])
        callback(*args, **kwargs)
    return np.zeros((), np.bool_)


def _callback_jvp(primals, tangents, **params):
    return debug_callback_p.bind(*primals, **params), Zero(_TOKEN)


def _callback_batch(vals, dims, *, callback, tree, levels):
    size = bdim_size(vals, dims)
    vals = [broadcast_batched(v, size) if d is None else moveaxis(v, d, 0)
            for v, d in zip(vals, dims)]
    return debug_callback_p.bind(*vals, callback=callback, tree=tree, levels=levels + 1), None


debug_callback_p = defprim("debug_callback", _callback_impl, lambda *a, **p: _TOKEN,
                           jvp=_callback_jvp, batch=_callback_batch, effectful=True,
                           memo=False)


def callback(callback, *args, ordered: bool = False, partitioned: bool = False, **kwargs):
    """Call callback(*args, **kwargs) for its side effects with the arguments' concrete
    (NumPy) values: now for concrete values, when the program runs inside jit, once per
    element under vmap; never removed as dead code. Returns None. Effects keep program
    order, so `ordered` is accepted and always holds."""
    if not callable(callback):
        raise TypeError(f"debug.callback: callback must be callable, got "
                        f"{type(callback).__name__}")
    leaves, tree = tree_util.tree_flatten((args, kwargs))
    if not leaves:                  # nothing traced to wait for: call it now
        callback(*args, **kwargs)
        return None
    debug_callback_p.bind(*leaves, callback=callback, tree=tree, levels=0)
    return None
