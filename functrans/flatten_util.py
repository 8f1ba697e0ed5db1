"""functrans.flatten_util (jax.flatten_util): ravel_pytree, a pytree of arrays as one flat
vector and back."""
from __future__ import annotations

import math

import numpy as np

from . import numpy as fnp
from .tree_util import tree_flatten, tree_unflatten

__all__ = ["ravel_pytree"]


def ravel_pytree(pytree):
    """(flat, unravel): the leaves raveled and concatenated in tree_flatten's order, in the
    dtype they promote to (float32 for none), and unravel(flat) -> the pytree again, each
    leaf with its shape and dtype. Differentiable both ways, so a function of a pytree can
    be written as one of a vector (optimizers, jacobians, Hessians)."""
    leaves, treedef = tree_flatten(pytree)
    leaves = [fnp.asarray(x) for x in leaves]
    shapes = [tuple(fnp.shape(x)) for x in leaves]
    dtypes = [np.dtype(x.dtype) for x in leaves]
    sizes = [math.prod(s) for s in shapes]
    dt = fnp.result_type(*dtypes) if dtypes else np.dtype(np.float32)
    flat = fnp.concatenate([fnp.ravel(fnp.astype(x, dt)) for x in leaves]) if leaves \
        else fnp.zeros((0,), dt)
    total = sum(sizes)

    def unravel(arr):
        if tuple(fnp.shape(arr)) != (total,):
            raise ValueError(f"The unravel function expected an array of shape {(total,)}, "
                             f"got shape {tuple(fnp.shape(arr))}.")
        if np.dtype(arr.dtype) != dt:
            raise TypeError(f"The unravel function expected an array of dtype {dt}, got "
                            f"dtype {arr.dtype}.")
        out, start = [], 0
        for shape, size, d in zip(shapes, sizes, dtypes):
            piece = fnp.reshape(arr[start:start + size], shape)
            out.append(fnp.astype(piece, d) if d != dt else piece)
            start += size
        return tree_unflatten(treedef, out)
    return flat, unravel
