"""ft.pure_callback: a Python function of host (NumPy) values called from inside traced and
jitted programs, as jax.pure_callback.

`pure_callback` is a primitive whose parameters hold the callback and the result's shapes
and dtypes (what tracing needs); its implementation calls the function on the concrete
values when the program runs, and checks what comes back. Being pure, it may be removed
when its result is unused, or evaluated early when its inputs are constants. It is not
differentiable (JAX's error; wrap it in ft.custom_jvp to give it a derivative), and under
vmap `vmap_method` says how a batch reaches the callback.
"""
from __future__ import annotations

import numpy as np

from . import tree_util
from .core import ShapedArray, get_aval
from .core.devices import device_put
from .primitives import shape as sh
from .primitives.base import bdim_size, broadcast_batched, defprim, moveaxis

_VMAP_METHODS = ("sequential", "sequential_unrolled", "expand_dims", "broadcast_all")


class _Callback:
    """The user's function with the structure of its arguments (a hashable parameter:
    equal when it is the same function on the same structure)."""
    __slots__ = ("fn", "in_tree", "out_tree")

    def __init__(self, fn, in_tree, out_tree):
        self.fn, self.in_tree, self.out_tree = fn, in_tree, out_tree

    def __eq__(self, other):
        return isinstance(other, _Callback) and (self.fn, self.in_tree, self.out_tree) == \
            (other.fn, other.in_tree, other.out_tree)

    def __hash__(self):
        return hash((self.fn, self.in_tree))

    def __repr__(self):
        return getattr(self.fn, "__name__", repr(self.fn))


def _callback_impl(xp, *vals, callback, result_avals, vmap_method):
    host = [np.asarray(h) for h in device_put(list(vals), "cpu")]   # NumPy arrays, not Arrays
    args, kwargs = tree_util.tree_unflatten(callback.in_tree, host)
    out = callback.fn(*args, **kwargs)
    leaves, tree = tree_util.tree_flatten(out)
    if tree != callback.out_tree:
        raise TypeError(f"pure_callback: the callback {callback!r} returned a value of "
                        f"structure {tree}, but result_shape_dtypes has {callback.out_tree}")
    outs = []
    for i, (v, aval) in enumerate(zip(leaves, result_avals)):
        v = np.asarray(v)
        if v.shape != aval.shape:
            raise ValueError(f"pure_callback: the callback {callback!r} returned a value of "
                             f"shape {v.shape} for result {i}, but result_shape_dtypes says "
                             f"{aval.shape}")
        if v.dtype != aval.dtype:
            raise ValueError(f"pure_callback: the callback {callback!r} returned dtype "
                             f"{v.dtype} for result {i}, but result_shape_dtypes says "
                             f"{aval.dtype}; return arrays of the declared dtypes")
        outs.append(v)
    return device_put(outs, "cuda") if xp is not np else outs


def _callback_jvp(primals, tangents, **params):
    raise ValueError("Pure callbacks do not support JVP. Please use `ft.custom_jvp` to use "
                     "callbacks while taking gradients.")


def _row(v, i):
    """v[i] along the leading axis."""
    shape = get_aval(v).shape
    part = sh.slice(v, start_indices=(i,) + (0,) * (len(shape) - 1),
                    limit_indices=(i + 1,) + shape[1:], strides=None)
    return sh.reshape(part, new_sizes=shape[1:])


def _callback_batch(vals, dims, *, callback, result_avals, vmap_method):
    size = bdim_size(vals, dims)
    if vmap_method is None:
        raise NotImplementedError(
            "vmap of ft.pure_callback needs vmap_method=: 'sequential' (the callback once "
            "per batch element), 'expand_dims' (once, unbatched arguments with a new "
            "leading axis of size 1) or 'broadcast_all' (once, every argument with the "
            "batch axis)")
    vals = [v if d is None else moveaxis(v, d, 0) for v, d in zip(vals, dims)]
    if vmap_method in ("sequential", "sequential_unrolled"):
        per = [pure_callback_p.bind(*[v if d is None else _row(v, i)
                                      for v, d in zip(vals, dims)],
                                    callback=callback, result_avals=result_avals,
                                    vmap_method=vmap_method) for i in range(size)]
        outs = [sh.concatenate(*[sh.reshape(p[k], new_sizes=(1,) + a.shape) for p in per],
                               dimension=0) for k, a in enumerate(result_avals)]
        return outs, [0] * len(result_avals)
    lead = size if vmap_method == "broadcast_all" else 1
    args = [v if d is not None else broadcast_batched(v, lead) for v, d in zip(vals, dims)]
    batched = tuple(ShapedArray((size,) + a.shape, a.dtype) for a in result_avals)
    outs = pure_callback_p.bind(*args, callback=callback, result_avals=batched,
                                vmap_method=vmap_method)
    return outs, [0] * len(result_avals)


pure_callback_p = defprim(
    "pure_callback", _callback_impl,
    lambda *avals, callback, result_avals, vmap_method: list(result_avals),
    jvp=_callback_jvp, batch=_callback_batch, multiple_results=True, memo=False)


def pure_callback(callback, result_shape_dtypes, *args, sharding=None, vmap_method=None,
                  **kwargs):
    """callback(*args, **kwargs) on the arguments' host values (NumPy arrays), also inside
    jit and other transformations, returning arrays of result_shape_dtypes (a pytree of
    objects with .shape and .dtype: ShapeDtypeStruct, arrays). The callback must be pure:
    it may be skipped when its result is unused. vmap_method ('sequential',
    'sequential_unrolled', 'expand_dims', 'broadcast_all') says how vmap calls it."""
    if vmap_method is not None and vmap_method not in _VMAP_METHODS:
        raise ValueError(f"pure_callback: vmap_method must be one of {list(_VMAP_METHODS)}, "
                         f"got {vmap_method!r}")
    leaves, in_tree = tree_util.tree_flatten((args, kwargs))
    shapes, out_tree = tree_util.tree_flatten(result_shape_dtypes)
    avals = tuple(ShapedArray(tuple(r.shape), np.dtype(r.dtype)) for r in shapes)
    outs = pure_callback_p.bind(*leaves, callback=_Callback(callback, in_tree, out_tree),
                                result_avals=avals, vmap_method=vmap_method)
    return tree_util.tree_unflatten(out_tree, list(outs))
