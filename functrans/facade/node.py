"""Autograd graph records: one `Node` per recorded op, `AccumulateGrad` per leaf.

A node is data, not code: the op's primitive steps (an `OpInfo`, shared by every node of
the same signature), the edges to the nodes that produced its inputs, and the values it
keeps for backward. Derivatives are never written here: the engine turns nodes into a
jaxpr and runs the core's linearize + transpose on it.
"""
from __future__ import annotations

import itertools
import sys
import weakref
from collections import OrderedDict

from ..core import Literal

_seq = itertools.count()
_FACADE_DIR = __file__.rsplit("/", 2)[0]          # .../functrans


class Step:
    """One primitive application inside an op: slot indices in, slot indices out."""
    __slots__ = ("prim", "params", "refs", "outs")

    def __init__(self, prim, params, refs, outs):
        self.prim, self.params, self.refs, self.outs = prim, params, tuple(refs), tuple(outs)

    def __repr__(self):
        return f"Step({self.prim.name}, {self.params}, {self.refs} -> {self.outs})"


class OpInfo:
    """Everything about a recorded op that depends only on its signature (cached).

    slots: 0..n_in-1 are the op's inputs, then the outputs of each step in order.
    held: the slots the backward program reads (found by tracing it once, then DCE).
    """
    __slots__ = ("id", "name", "steps", "n_in", "out_slots", "slot_avals", "mask", "held",
                 "held_set", "out_float", "kind", "fn_cls", "bwd", "extra", "view")
    _ids = itertools.count()

    def __init__(self, name, steps, n_in, out_slots, slot_avals, mask, kind="prim"):
        self.id = next(OpInfo._ids)
        self.name = name
        self.steps = tuple(steps)
        self.n_in = n_in
        self.out_slots = tuple(out_slots)
        self.slot_avals = tuple(slot_avals)
        self.mask = tuple(mask)
        self.out_float = tuple(slot_avals[s].dtype.kind in "fc" for s in out_slots)
        self.held = ()
        self.held_set = frozenset()
        self.kind = kind
        self.fn_cls = None
        self.bwd = None          # per-node backward program (anomaly mode, debugging)
        self.extra = None
        self.view = False

    def __repr__(self):
        return f"OpInfo({self.name}, held={self.held})"


class Node:
    """A recorded op: what `grad_fn` returns (named like PyTorch: MulBackward0, ...)."""
    __slots__ = ("info", "edges", "vals", "vers", "seq", "src", "hooks", "retains", "ctx",
                 "stack", "freed", "__weakref__")

    def __init__(self, info, edges, vals, vers, src):
        self.info = info
        self.edges = edges       # per input: (producer node, output index) or None
        self.vals = vals         # per slot: the held value, or None
        self.vers = vers         # ((slot, version counter, version), ...) of held tensors
        self.seq = next(_seq)
        self.src = src           # (code, lineno) of the user line that created the node
        self.hooks = None        # {output index: OrderedDict(handle id -> hook)}
        self.retains = None      # {output index: weakref to the tensor that retains grad}
        self.ctx = None          # autograd.Function context
        self.stack = None        # forward traceback, recorded in anomaly mode
        self.freed = False

    def name(self):
        return self.info.name

    @property
    def next_functions(self):
        return tuple((None, 0) if e is None else e for e in self.edges)

    @property
    def metadata(self):
        return {}

    def register_hook(self, fn):
        raise NotImplementedError(
            "Node.register_hook is not supported by functrans; register the hook on the "
            "tensor instead (tensor.register_hook(fn)).")

    def __repr__(self):
        return f"<{self.info.name} object at {hex(id(self))}>"

    def __call__(self, *grads):
        from .engine import call_node
        return call_node(self, grads)


class AccumulateGrad:
    """The graph node of a leaf that requires grad: gradients accumulate into .grad."""
    __slots__ = ("variable", "seq", "__weakref__")
    edges = ()
    info = None

    def __init__(self, variable):
        self.variable = variable
        self.seq = next(_seq)

    def name(self):
        return "torch::autograd::AccumulateGrad"

    @property
    def next_functions(self):
        return ()

    def __repr__(self):
        return f"<AccumulateGrad object at {hex(id(self))}>"


def edge_of(t):
    """The graph edge of a tensor input: (grad_fn, output index), (AccumulateGrad, 0) or None."""
    if not t._requires_grad:
        return None
    fn = t._grad_fn
    if fn is not None:
        return (fn, t._out_nr)
    ref = t._accum
    acc = ref() if ref is not None else None
    if acc is None:
        acc = AccumulateGrad(t)
        t._accum = weakref.ref(acc)
    return (acc, 0)


def user_frame():
    """(code, lineno) of the innermost frame outside functrans: where the user called the op."""
    f = sys._getframe(2)
    while f is not None and f.f_code.co_filename.startswith(_FACADE_DIR):
        f = f.f_back
    return (f.f_code, f.f_lineno) if f is not None else None


def source_line(src):
    if src is None:
        return "<unknown>"
    code, lineno = src
    import linecache
    text = linecache.getline(code.co_filename, lineno).strip()
    return f"{code.co_filename}:{lineno} ({code.co_name}): {text}"


# ---------------------------------------------------------------------------
# hooks: an ordered dict keyed by handle id, a removable handle that is also a context manager

class RemovableHandle:
    """Returned by register_*hook: `.remove()` unregisters; usable as a context manager."""
    _ids = itertools.count()

    def __init__(self, hooks_dict):
        self.id = next(RemovableHandle._ids)
        self._dict_ref = weakref.ref(hooks_dict) if _weakrefable(hooks_dict) else (lambda: hooks_dict)

    def remove(self):
        d = self._dict_ref()
        if d is not None and self.id in d:
            del d[self.id]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
        return False

    def __repr__(self):
        return f"<RemovableHandle id={self.id}>"


class HookDict(OrderedDict):
    """OrderedDict subclass (weak-referenceable) holding hooks keyed by handle id."""


def _weakrefable(obj):
    try:
        weakref.ref(obj)
        return True
    except TypeError:
        return False


def add_hook(hooks: HookDict, fn):
    h = RemovableHandle(hooks)
    hooks[h.id] = fn
    return h


def literal_ref(val):
    return Literal(val)
