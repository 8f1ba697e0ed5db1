"""ft.tree: jax.tree's short names over tree_util (map, leaves, structure, flatten,
unflatten, reduce, all, transpose), so `jax.tree.map` ports by renaming the import."""
from __future__ import annotations

import builtins
import functools

from .tree_util import PyTreeDef, tree_flatten, tree_leaves, tree_map, tree_structure, tree_unflatten

_MISSING = object()


def map(f, tree, *rest, is_leaf=None):  # noqa: A001  (jax.tree's name)
    """f applied leaf by leaf to `tree` and the trees in `rest` (same structure)."""
    return tree_map(f, tree, *rest, is_leaf=is_leaf)


def leaves(tree, is_leaf=None):
    """The leaves of a tree, in flattening order (dicts by sorted key)."""
    return tree_leaves(tree, is_leaf)


def structure(tree, is_leaf=None) -> PyTreeDef:
    """The treedef of a tree."""
    return tree_structure(tree, is_leaf)


def flatten(tree, is_leaf=None):
    """(leaves, treedef)."""
    return tree_flatten(tree, is_leaf)


def unflatten(treedef: PyTreeDef, leaves):
    """The tree of structure `treedef` holding `leaves`."""
    return tree_unflatten(treedef, leaves)


def reduce(function, tree, initializer=_MISSING, is_leaf=None):
    """functools.reduce over the leaves (with `initializer` when given)."""
    if initializer is _MISSING:
        return functools.reduce(function, tree_leaves(tree, is_leaf))
    return functools.reduce(function, tree_leaves(tree, is_leaf), initializer)


def all(tree, *, is_leaf=None) -> bool:  # noqa: A001
    """True when every leaf is truthy."""
    return builtins.all(tree_leaves(tree, is_leaf))


def transpose(outer_treedef: PyTreeDef, inner_treedef: PyTreeDef, pytree_to_transpose):
    """A tree of structure outer-of-inner turned into inner-of-outer."""
    flat, treedef = tree_flatten(pytree_to_transpose)
    n_in, n_out = inner_treedef.num_leaves, outer_treedef.num_leaves
    if treedef.num_leaves != n_in * n_out:
        raise TypeError(f"Mismatch\n{treedef}\n != \n{outer_treedef} of {inner_treedef}")
    rows = [flat[i * n_in:(i + 1) * n_in] for i in range(n_out)]
    return tree_unflatten(inner_treedef, [tree_unflatten(outer_treedef, col)
                                          for col in zip(*rows)])
