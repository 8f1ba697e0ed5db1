"""Autograd graph records: one `Node` per recorded op, `AccumulateGrad` per leaf.

A node is data, not code: the op's primitive steps (an `OpInfo`, shared by every node of
the same signature), the edges to the nodes that produced its inputs, and the values it
keeps for backward. Derivatives are never written here: the engine lowers the nodes into
a tape for the core's reverse-mode deriver (reverse.derive), the one `ft.vjp` uses.
"""
from __future__ import annotations

import itertools
import sys
import weakref
from collections import OrderedDict, namedtuple

from ..backends.memory import EQN_BYTES
from ..core import Literal
from functrans.primitives.shape import broadcast_in_dim_p

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

    slots: 0..n_in-1 are the op's inputs, then the outputs of each step in order, then
    the residual slots of its companions.
    held: the slots a backward may read (lower.analyze: what its steps' backward equations read).
    companions: ((step, its residual form's steps), ...): steps the forward evaluated in
    place of some of `steps` (a scan's residual form, Composite.companions), which compute
    the step's outputs and the residuals its backward reads, in slots after the others;
    those are saved (never under create_graph: a saved float would be a constant there,
    so that backward recomputes them).
    """
    __slots__ = ("id", "name", "steps", "n_in", "out_slots", "slot_avals", "mask", "held",
                 "held_set", "out_float", "kind", "fn_cls", "extra", "view", "plan",
                 "n_slots", "cg_slots", "bwd_slots", "tape_eqns", "node_cls", "companions",
                 "res_slots", "forms", "companion_steps", "one_step")
    _ids = itertools.count()

    def __init__(self, name, steps, n_in, out_slots, slot_avals, mask, kind="prim",
                 save_intermediates=False, companions=()):
        self.id = next(OpInfo._ids)
        self.name = name
        self.steps = tuple(steps)
        self.n_in = n_in
        self.out_slots = tuple(out_slots)
        self.slot_avals = tuple(slot_avals)
        self.n_slots = len(self.slot_avals)
        self.mask = tuple(mask)
        self.out_float = tuple(slot_avals[s].dtype.kind in "fc" for s in out_slots)
        # what a backward may read as saved: inputs, outputs (both connected to the graph)
        # and integer/bool intermediates such as relu's mask (their derivative is zero, so
        # a constant is exact); float intermediates are recomputed from them, as torch's
        # formulas do (so an op keeps alive no more than its inputs and outputs), except
        # where the op's own residuals are meant to be saved (save_intermediates: ft.compile)
        # and then never under create_graph (a saved float would be a constant there); a
        # broadcast is not saved but made again from its operand (a view of fewer values)
        self.cg_slots = frozenset(s for s, a in enumerate(self.slot_avals)
                                  if s < n_in or s in self.out_slots or a.dtype.kind not in "fc")
        self.bwd_slots = self.cg_slots
        if save_intermediates:
            views = {o for st in self.steps if st.prim is broadcast_in_dim_p for o in st.outs}
            self.bwd_slots = frozenset(s for s in range(self.n_slots) if s not in views)
        self.companions = tuple(companions)
        self.forms = dict(self.companions)               # step -> its form's steps
        self.companion_steps = tuple(c for _, form in self.companions for c in form)
        made = {o for st in self.steps for o in st.outs}
        self.res_slots = frozenset(o for st in self.companion_steps for o in st.outs
                                   if o not in made)
        self.bwd_slots |= self.res_slots
        self.held = ()
        self.held_set = frozenset()
        self.kind = kind
        self.fn_cls = None
        self.extra = None
        self.view = False
        self.plan = None
        self.node_cls = None     # the Node subclass named after the op (node_class)
        self.tape_eqns = None    # its steps as tape equations (lower.graph_tape)
        self.one_step = None     # the one of them, for a one-step op (lower._tape_eqns)

    def approx_bytes(self):
        """Its charge in DERIVED: its steps (the per-equation programs are charged apart)."""
        return EQN_BYTES * (len(self.steps) + 1) + 64 * self.n_slots

    def __repr__(self):
        return f"OpInfo({self.name}, held={self.held})"


class _Extra:
    """Rarely used node fields, kept off the hot path."""
    __slots__ = ("hooks", "retains", "ctx", "stack", "meta", "pre", "post", "own_packs",
                 "gout", "undefined")

    def __init__(self):
        self.hooks = self.retains = self.ctx = self.stack = self.meta = None
        self.pre = self.post = self.own_packs = self.gout = self.undefined = None


def _extra_field(name):
    def get(self):
        x = self.x
        return None if x is None else getattr(x, name)

    def put(self, value):
        x = self.x
        if x is None:
            x = self.x = _Extra()
        setattr(x, name, value)
    return property(get, put)


class _SavedAccess:
    """How a node's saved values are read by torch's names (grad_fn._saved_self,
    grad_fn._raw_saved_result): record.py, which sits above this module and knows how a
    value is packed, sets `get(node, name)` (raising AttributeError for a name the node
    does not save); and how a node is called on gradients (`grad_fn(*grads)`): api.py,
    which holds the engine's entry points, sets `call(node, grads)`."""
    get = None
    call = None


SAVED_ACCESS = _SavedAccess()


class Node:
    """A recorded op: what `grad_fn` returns (named like PyTorch: MulBackward0, ...)."""
    __slots__ = ("info", "edges", "vals", "vers", "seq", "src", "x", "pos", "mark",
                 "__weakref__")

    def __init__(self, info, edges, vals, vers, src):
        self.info = info
        self.edges = edges       # per input: (producer node, output index) or None
        self.vals = vals         # per slot: the held value, or None; None once freed (a
        #                          tuple: the collector stops tracking one holding only
        #                          arrays; with_value replaces a value)
        self.vers = vers         # (slot, version counter, version, slot, ...) of held
        #                          tensors, flat (held_versions): one object per node
        self.seq = next(_seq)
        self.src = src           # where the user created the node (user_frame)
        self.x = None
        self.pos = -1            # position in the last walked graph (lower.index_graph)
        self.mark = None         # visit mark of the last walk

    hooks = _extra_field("hooks")        # {output index: HookDict}
    retains = _extra_field("retains")    # {output index: weakref to the retaining tensor}
    ctx = _extra_field("ctx")            # autograd.Function context
    stack = _extra_field("stack")        # forward traceback (anomaly mode)
    meta = _extra_field("meta")          # the `metadata` dict, made on first use
    pre = _extra_field("pre")            # a Function node's pre-hooks (HookDict)
    post = _extra_field("post")          # a Function node's post-hooks (HookDict)
    own_packs = _extra_field("own_packs")  # True once a saved value got hooks of its own
    #                                        (SavedTensor.register_hooks)
    undefined = _extra_field("undefined")  # a Function node's inputs whose gradient its last
    #                                        backward returned as None (engine.undefined_targets)

    @property
    def freed(self):
        return self.vals is None

    def name(self):
        return self.info.name

    @property
    def next_functions(self):
        return tuple((None, 0) if e is None else e for e in self.edges)

    @property
    def metadata(self):
        """A dict the user may store anything in, kept with the node (torch's Node.metadata)."""
        m = self.meta
        if m is None:
            m = self.meta = {}
        return m

    def __getattr__(self, name):
        """A custom Function's node is its ctx in torch (grad_fn.saved_tensors,
        grad_fn.needs_input_grad, attributes set on ctx): read them from the ctx."""
        if name[:2] != "__":
            try:
                x = object.__getattribute__(self, "x")
            except AttributeError:
                x = None
            ctx = None if x is None else x.ctx
            if ctx is not None:
                return getattr(ctx, name)
            if name.startswith(("_saved_", "_raw_saved_")) and SAVED_ACCESS.get is not None:
                return SAVED_ACCESS.get(self, name)
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def register_hook(self, fn):
        """fn(grad_inputs, grad_outputs) after the node's backward ran (one gradient per
        input, None for those it gives none; per output); a returned tuple replaces
        grad_inputs. The backward then materializes this node's gradients (a boundary in
        its program: lower.graph_tape)."""
        if self.post is None:
            self.post = HookDict()
        return add_hook(self.post, fn)

    def register_prehook(self, fn):
        """fn(grad_outputs) before the node's backward runs (None for an output no gradient
        reached), after the tensor hooks of its outputs; a returned tuple replaces them."""
        if self.pre is None:
            self.pre = HookDict()
        return add_hook(self.pre, fn)

    def __repr__(self):
        return f"<{self.info.name} object at {hex(id(self))}>"

    def __call__(self, *grads):
        """The node's backward on gradients of its outputs (one per output): the gradients
        of its inputs, None for an input that takes none (torch's Node.__call__)."""
        return SAVED_ACCESS.call(self, grads)


_NODE_CLASSES: dict = {}      # op name -> its Node subclass (a registry: one per name)


def node_class(name):
    """The Node subclass whose instances are the graph nodes of op `name`, so that
    `type(t.grad_fn).__name__` is PyTorch's (MulBackward0, CopySlices, a custom Function's
    MyFunctionBackward), as code that dispatches on node types expects."""
    cls = _NODE_CLASSES.get(name)
    if cls is None:
        short = name.rsplit("::", 1)[-1]
        cls = _NODE_CLASSES[name] = type(short, (Node,), {"__slots__": (),
                                                          "__module__": "functrans.autograd"})
    return cls


class AccumulateGrad:
    """The graph node of a leaf that requires grad: gradients accumulate into .grad.

    The leaf holds its AccumulateGrad; the AccumulateGrad refers to the leaf weakly (no
    reference cycle, so temporary leaves are freed at once). Its hooks run where torch runs
    the node: when a backward accumulates into the leaf (api._accumulate), not in
    autograd.grad or for a leaf outside backward(inputs=...): pre-hooks after the leaf's
    tensor hooks, `pre((grad,)) -> (grad,) or None`; post-hooks after the accumulation and
    the post-accumulate-grad hooks, `post((), (grad,))`."""
    __slots__ = ("_var", "seq", "pos", "mark", "pre", "post", "meta", "shape_dtype",
                 "__weakref__")
    edges = ()
    info = None
    vals = None

    def __init__(self, variable):
        self._var = weakref.ref(variable)
        d = variable._data          # (the gradient's shape once the leaf is gone)
        self.shape_dtype = (d.shape, d.dtype)
        self.seq = next(_seq)
        self.pos = -1
        self.mark = None
        self.pre = self.post = self.meta = None

    @property
    def edge(self):
        """(self, 0), made per use: kept as a field it would be a reference cycle, and the
        node would outlive its leaf until the garbage collector ran."""
        return (self, 0)

    def register_prehook(self, fn):
        """fn(grad_outputs) -> a tuple replacing them, or None; before the accumulation."""
        if self.pre is None:
            self.pre = HookDict()
        return add_hook(self.pre, fn)

    def register_hook(self, fn):
        """fn(grad_inputs, grad_outputs), i.e. fn((), (grad,)), after the accumulation."""
        if self.post is None:
            self.post = HookDict()
        return add_hook(self.post, fn)

    @property
    def metadata(self):
        if self.meta is None:
            self.meta = {}
        return self.meta

    @property
    def variable(self):
        return self._var()

    def name(self):
        return "torch::autograd::AccumulateGrad"

    @property
    def next_functions(self):
        return ()

    def __repr__(self):
        return f"<AccumulateGrad object at {hex(id(self))}>"


GradientEdge = namedtuple("GradientEdge", "node output_nr")
GradientEdge.__doc__ = "A node of the graph and which of its outputs (torch's GradientEdge)."


class EdgeTarget:
    """A GradientEdge given to autograd.grad or backward as an input or an output: the value
    output `output_nr` of its node carries, differentiated as a tensor holding it would be
    (the engine reads a target's `_grad_fn` and `_out_nr`)."""
    __slots__ = ("_grad_fn", "_out_nr")
    _requires_grad = True
    _accum = None

    def __init__(self, node, nr):
        self._grad_fn, self._out_nr = node, nr


def edge_target(e):
    """The autograd.grad input a GradientEdge stands for: the leaf of an AccumulateGrad
    edge, else an EdgeTarget."""
    node, nr = e
    if isinstance(node, AccumulateGrad):
        t = node.variable
        if t is None:
            raise RuntimeError("autograd.grad: the leaf tensor of this GradientEdge's "
                               "AccumulateGrad node no longer exists")
        return t
    if not isinstance(node, Node) or node.info is None:
        raise TypeError(f"autograd.grad: a GradientEdge's node must be a graph node, got "
                        f"{type(node).__name__}")
    return EdgeTarget(node, nr)


def edge_of(t):
    """The graph edge of a tensor input: (grad_fn, output index), (AccumulateGrad, 0) or None."""
    if not t._requires_grad:
        return None
    fn = t._grad_fn
    if fn is not None:
        return (fn, t._out_nr)
    acc = t._accum
    if acc is None:
        acc = t._accum = AccumulateGrad(t)
    return acc.edge


def with_value(vals, s, v):
    """A node's `vals` with slot s holding v."""
    return vals[:s] + (v,) + vals[s + 1:]


def held_versions(vers):
    """A node's `vers` (flat: slot, version counter, version, slot, ...) as triples."""
    return zip(vers[::3], vers[1::3], vers[2::3])


def held_counter(vers, s):
    """The version counter a node's `vers` holds for slot s, or None."""
    for k in range(0, len(vers), 3):
        if vers[k] == s:
            return vers[k + 1]
    return None


def without_slot(vers, s):
    """A node's `vers` less the entry of slot s."""
    return tuple(x for k in range(0, len(vers), 3) if vers[k] != s for x in vers[k:k + 3])


# id(code) -> (code, whether it is functrans's facade code, {instruction offset: call
# site}): ids hash cheaply, code objects hash their whole contents; a call site, the
# (code, offset) pair that nodes keep as `src`, is made once per place in the user's code,
# not once per node (a tuple fewer for the cyclic collector per recorded op)
_INTERNAL_CODES: dict = {}


def user_frame(depth=2):
    """(code, offset of its current instruction) of the innermost frame outside
    functrans: where the user called the op (depth: frames known to be internal, counted
    from the caller). The line number is found from the offset when it is shown
    (source_line): reading f_lineno costs a third of this function."""
    f = sys._getframe(depth)
    internal = _INTERNAL_CODES
    while f is not None:
        code = f.f_code
        hit = internal.get(id(code))
        if hit is None or hit[0] is not code:
            hit = internal[id(code)] = (code, code.co_filename.startswith(_FACADE_DIR), {})
        if not hit[1]:
            return call_site(hit, f.f_lasti)
        f = f.f_back
    return None


def call_site(hit, lasti):
    """The call site (code, lasti) of an _INTERNAL_CODES entry, made on first use."""
    site = hit[2].get(lasti)
    if site is None:
        site = hit[2][lasti] = (hit[0], lasti)
    return site


def source_line(src):
    """'file:line (function): text' of a user_frame result."""
    if src is None:
        return "<unknown>"
    code, lasti = src
    lineno = next((line for start, end, line in code.co_lines() if start <= lasti < end),
                  None) or code.co_firstlineno
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
