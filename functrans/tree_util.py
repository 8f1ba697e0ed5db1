"""Pytrees: nested containers (tuple, list, dict, namedtuple, None, registered types)."""
from __future__ import annotations

from typing import Callable

_registry: dict[type, tuple[Callable, Callable]] = {}


def register_pytree_node(nodetype: type, flatten_func: Callable, unflatten_func: Callable):
    """Register `nodetype`: flatten(x) -> (children, aux); unflatten(aux, children) -> x."""
    _registry[nodetype] = (flatten_func, unflatten_func)


def _is_namedtuple(x):
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


class PyTreeDef:
    """The structure of a pytree, without its leaves. Hashable and comparable."""
    __slots__ = ("node_type", "aux", "children", "num_leaves")

    def __init__(self, node_type, aux, children):
        self.node_type = node_type
        self.aux = aux
        self.children = tuple(children)
        self.num_leaves = (1 if node_type is None else sum(c.num_leaves for c in self.children))

    def _key(self):
        return (self.node_type, self.aux, self.children)

    def __eq__(self, other):
        return isinstance(other, PyTreeDef) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

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


def _flatten(x, leaves, is_leaf):
    if is_leaf is not None and is_leaf(x):
        leaves.append(x)
        return LEAF
    t = type(x)
    if t is tuple or t is list:
        return PyTreeDef(t, None, [_flatten(c, leaves, is_leaf) for c in x])
    if t is dict:
        keys = tuple(sorted(x))
        return PyTreeDef(dict, keys, [_flatten(x[k], leaves, is_leaf) for k in keys])
    if x is None:
        return PyTreeDef(type(None), None, ())
    if _is_namedtuple(x):
        return PyTreeDef(t, None, [_flatten(c, leaves, is_leaf) for c in x])
    entry = _registry.get(t)
    if entry is not None:
        children, aux = entry[0](x)
        return PyTreeDef(t, aux, [_flatten(c, leaves, is_leaf) for c in children])
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
    children = [_unflatten(c, it) for c in treedef.children]
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
