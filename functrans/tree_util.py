"""Pytrees: nested containers (tuple, list, dict, namedtuple, None, registered types)."""
from __future__ import annotations

from typing import Callable

import numpy as np

_registry: dict[type, tuple[Callable, Callable]] = {}


def register_pytree_node(nodetype: type, flatten_func: Callable, unflatten_func: Callable):
    """Register `nodetype`: flatten(x) -> (children, aux); unflatten(aux, children) -> x."""
    _registry[nodetype] = (flatten_func, unflatten_func)


def _is_namedtuple(x):
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


class PyTreeDef:
    """The structure of a pytree, without its leaves. Hashable and comparable."""
    __slots__ = ("node_type", "aux", "children", "num_leaves", "_hash")

    def __init__(self, node_type, aux, children):
        self.node_type = node_type
        self.aux = aux
        self.children = tuple(children)
        self.num_leaves = (1 if node_type is None else sum(c.num_leaves for c in self.children))
        self._hash = None           # computed once: treedefs key the transformation caches

    def _key(self):
        return (self.node_type, self.aux, self.children)

    def __eq__(self, other):
        if self is other:
            return True
        if not isinstance(other, PyTreeDef):
            return False
        try:
            if hash(self) != hash(other):
                return False
        except TypeError:               # unhashable aux data: compare structurally
            pass
        return self._key() == other._key()

    def __hash__(self):
        h = self._hash
        if h is None:
            h = self._hash = hash(self._key())
        return h

    def __repr__(self):
        if self.node_type is None:
            return "*"
        if self.node_type is type(None):
            return "None"
        inner = ", ".join(map(repr, self.children))
        if self.node_type is tuple:
            return f"({inner}{',' if len(self.children) == 1 else ''})"
        if self.node_type is list:
            return f"[{inner}]"
        if self.node_type is dict:
            return "{" + ", ".join(f"{k!r}: {c!r}" for k, c in zip(self.aux, self.children)) + "}"
        return f"{self.node_type.__name__}({inner})"

    def unflatten(self, leaves):
        return tree_unflatten(self, leaves)


LEAF = PyTreeDef(None, None, ())
_interned: dict = {}


def _node(node_type, aux, children):
    """The PyTreeDef of these parts, shared between equal structures (so that comparing
    and hashing the treedefs that key every transformation cache is cheap)."""
    children = tuple(children)
    if node_type in _registry:          # arbitrary aux data: equal is not the same
        return PyTreeDef(node_type, aux, children)
    # dict keys 1, 1.0 and True are equal but must unflatten as given, so their types
    # are part of the key, and children (interned themselves) are keyed by identity
    key = (node_type, aux, tuple(map(id, children)),
           tuple(map(type, aux)) if node_type is dict else None)
    try:
        d = _interned.get(key)
    except TypeError:                   # unhashable aux data: not interned
        return PyTreeDef(node_type, aux, children)
    if d is None:
        if len(_interned) > 10000:
            _interned.clear()
        d = _interned[key] = PyTreeDef(node_type, aux, children)
    return d
_LEAF_TYPES = {np.ndarray, float, int, bool, complex}      # never containers


def _flatten(x, leaves, is_leaf):
    t = type(x)
    if t in _LEAF_TYPES and is_leaf is None:
        leaves.append(x)
        return LEAF
    if is_leaf is not None and is_leaf(x):
        leaves.append(x)
        return LEAF
    if t is tuple or t is list:
        return _node(t, None, [_flatten(c, leaves, is_leaf) for c in x])
    if t is dict:
        keys = tuple(sorted(x))
        return _node(dict, keys, [_flatten(x[k], leaves, is_leaf) for k in keys])
    if x is None:
        return _node(type(None), None, ())
    if _is_namedtuple(x):
        return _node(t, None, [_flatten(c, leaves, is_leaf) for c in x])
    entry = _registry.get(t)
    if entry is not None:
        children, aux = entry[0](x)
        return _node(t, aux, [_flatten(c, leaves, is_leaf) for c in children])
    leaves.append(x)
    return LEAF


def tree_flatten(tree, is_leaf=None):
    """(leaves, treedef); dicts are flattened in sorted key order, as JAX does."""
    leaves: list = []
    treedef = _flatten(tree, leaves, is_leaf)
    return leaves, treedef


def _unflatten(treedef, it):
    t = treedef.node_type
    if t is None:
        return next(it)
    if t is type(None):
        return None
    children = [next(it) if c is LEAF else _unflatten(c, it) for c in treedef.children]
    if t is tuple or t is list:
        return t(children)
    if t is dict:
        return dict(zip(treedef.aux, children))
    if t in _registry:
        return _registry[t][1](treedef.aux, children)
    return t(*children)  # namedtuple


def tree_unflatten(treedef: PyTreeDef, leaves):
    leaves = list(leaves)
    if len(leaves) != treedef.num_leaves:
        raise ValueError(f"tree structure {treedef} expects {treedef.num_leaves} leaves, "
                         f"got {len(leaves)}")
    return _unflatten(treedef, iter(leaves))


def tree_leaves(tree, is_leaf=None):
    return tree_flatten(tree, is_leaf)[0]


def tree_structure(tree, is_leaf=None):
    return tree_flatten(tree, is_leaf)[1]


def tree_map(f: Callable, tree, *rest, is_leaf=None):
    leaves, treedef = tree_flatten(tree, is_leaf)
    others = []
    for r in rest:
        rl, rdef = tree_flatten(r, is_leaf)
        if rdef != treedef:
            raise ValueError(f"tree_map: structures differ: {treedef} vs {rdef}")
        others.append(rl)
    return tree_unflatten(treedef, [f(*xs) for xs in zip(leaves, *others)])


__all__ = ["register_pytree_node", "tree_flatten", "tree_unflatten", "tree_leaves",
           "tree_structure", "tree_map", "PyTreeDef"]
