"""Pytrees: nested containers (tuple, list, dict, namedtuple, None, registered types)."""
from __future__ import annotations

import collections
import dataclasses
from typing import Callable

import numpy as np

_registry: dict[type, tuple[Callable, Callable]] = {}


def register_pytree_node(nodetype: type, flatten_func: Callable, unflatten_func: Callable):
    """Register `nodetype`: flatten(x) -> (children, aux); unflatten(aux, children) -> x."""
    _registry[nodetype] = (flatten_func, unflatten_func)


def register_pytree_node_class(cls: type) -> type:
    """Class decorator: `cls.tree_flatten(self) -> (children, aux)` and the classmethod
    `cls.tree_unflatten(aux, children)` make cls a pytree node (jax.tree_util's)."""
    register_pytree_node(cls, lambda x: x.tree_flatten(), cls.tree_unflatten)
    return cls


def register_pytree_with_keys(nodetype: type, flatten_with_keys: Callable,
                              unflatten_func: Callable, flatten_func: Callable | None = None):
    """jax.tree_util's: flatten_with_keys(x) -> ([(key, child), ...], aux). The keys name the
    children for paths; functrans flattens by the children (flatten_func when given)."""
    if flatten_func is None:
        def flatten_func(x):
            pairs, aux = flatten_with_keys(x)
            return [c for _, c in pairs], aux
    register_pytree_node(nodetype, flatten_func, unflatten_func)


def register_dataclass(nodetype: type, data_fields=None, meta_fields=None, drop_fields=()):
    """A dataclass (or any class built from keyword fields) as a pytree node: data_fields
    are the children, meta_fields the static aux data. Without them, a dataclass's fields
    are data unless declared with `field(metadata=dict(static=True))` (as JAX)."""
    if data_fields is None and meta_fields is None:
        if not dataclasses.is_dataclass(nodetype):
            raise TypeError("register_dataclass: data_fields and meta_fields are required "
                            f"when {nodetype.__name__} is not a dataclass")
        fields = [f for f in dataclasses.fields(nodetype) if f.name not in drop_fields]
        meta_fields = [f.name for f in fields if f.metadata.get("static", False)]
        data_fields = [f.name for f in fields if not f.metadata.get("static", False)]
    elif data_fields is None or meta_fields is None:
        raise TypeError("register_dataclass: give both data_fields and meta_fields, or "
                        "neither (for a dataclass)")
    data_fields, meta_fields = tuple(data_fields), tuple(meta_fields)
    if dataclasses.is_dataclass(nodetype):
        init = {f.name for f in dataclasses.fields(nodetype) if f.init} - set(drop_fields)
        missing = init - set(data_fields) - set(meta_fields)
        if missing:
            raise ValueError(f"register_dataclass: the init fields {sorted(missing)} of "
                             f"{nodetype.__name__} are neither data_fields nor meta_fields")

    def flatten(x):
        return ([getattr(x, n) for n in data_fields],
                tuple(getattr(x, n) for n in meta_fields))

    def unflatten(aux, children):
        return nodetype(**dict(zip(data_fields, children)), **dict(zip(meta_fields, aux)))
    register_pytree_node(nodetype, flatten, unflatten)
    return nodetype


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
    if t is collections.OrderedDict:            # JAX's: insertion order, not sorted
        keys = tuple(x)
        return _node(t, keys, [_flatten(x[k], leaves, is_leaf) for k in keys])
    entry = _registry.get(t)        # a registered namedtuple flattens as registered (JAX)
    if entry is not None:
        children, aux = entry[0](x)
        return _node(t, aux, [_flatten(c, leaves, is_leaf) for c in children])
    if _is_namedtuple(x):
        return _node(t, None, [_flatten(c, leaves, is_leaf) for c in x])
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
    if t is dict or t is collections.OrderedDict:
        return t(zip(treedef.aux, children))
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


# ---------------------------------------------------------------------------------------
# key paths (jax.tree_util's): where each leaf sits, for messages and tree_map_with_path

@dataclasses.dataclass(frozen=True)
class SequenceKey:
    idx: int

    def __str__(self):
        return f"[{self.idx!r}]"


@dataclasses.dataclass(frozen=True)
class DictKey:
    key: object

    def __str__(self):
        return f"[{self.key!r}]"


@dataclasses.dataclass(frozen=True)
class GetAttrKey:
    name: str

    def __str__(self):
        return f".{self.name}"


@dataclasses.dataclass(frozen=True)
class FlattenedIndexKey:
    key: int

    def __str__(self):
        return f"[<flat index {self.key}>]"


def keystr(keys) -> str:
    """A key path as text: `[0]['a'].b`."""
    return "".join(map(str, keys))


def _paths(x, path, out, is_leaf):
    t = type(x)
    if (t in _LEAF_TYPES and is_leaf is None) or (is_leaf is not None and is_leaf(x)):
        out.append((path, x))
    elif x is None:
        pass
    elif _is_namedtuple(x) and t not in _registry:
        for f, c in zip(t._fields, x):
            _paths(c, path + (GetAttrKey(f),), out, is_leaf)
    elif t is tuple or t is list:
        for i, c in enumerate(x):
            _paths(c, path + (SequenceKey(i),), out, is_leaf)
    elif t is dict or t is collections.OrderedDict:
        for k in (sorted(x) if t is dict else x):
            _paths(x[k], path + (DictKey(k),), out, is_leaf)
    elif t in _registry:
        children, _ = _registry[t][0](x)
        for i, c in enumerate(children):
            _paths(c, path + (FlattenedIndexKey(i),), out, is_leaf)
    else:
        out.append((path, x))


def tree_flatten_with_path(tree, is_leaf=None):
    """([(key path, leaf), ...], treedef), the leaves in tree_flatten's order."""
    out: list = []
    _paths(tree, (), out, is_leaf)
    return out, tree_structure(tree, is_leaf)


def tree_leaves_with_path(tree, is_leaf=None):
    return tree_flatten_with_path(tree, is_leaf)[0]


def tree_map_with_path(f: Callable, tree, *rest, is_leaf=None):
    """tree_map where f also receives each leaf's key path first: f(path, x, *rest)."""
    pairs, treedef = tree_flatten_with_path(tree, is_leaf)
    others = []
    for r in rest:
        rl, rdef = tree_flatten(r, is_leaf)
        if rdef != treedef:
            raise ValueError(f"tree_map_with_path: structures differ: {treedef} vs {rdef}")
        others.append(rl)
    return tree_unflatten(treedef, [f(p, x, *xs) for (p, x), *xs in zip(pairs, *others)])


__all__ = ["register_pytree_node", "tree_flatten_with_path", "tree_leaves_with_path",
           "tree_map_with_path", "keystr", "SequenceKey", "DictKey", "GetAttrKey",
           "FlattenedIndexKey", "register_pytree_node_class", "register_pytree_with_keys",
           "register_dataclass", "tree_flatten", "tree_unflatten", "tree_leaves",
           "tree_structure", "tree_map", "PyTreeDef"]
