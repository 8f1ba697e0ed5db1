"""The autograd engine: the recorded graph becomes a jaxpr, the core's reverse mode makes it
the backward program, which is cached by graph structure and evaluated.

How a backward program is derived (once per graph structure):
  * `replay` re-runs the recorded primitive steps on the values the targets had (the
    leaves, or `inputs=`), under `linearize_flat` (JVP + online partial evaluation), and the
    linear map is transposed with `backward_pass` -- the core's reverse mode, unchanged.
  * Below the partial-evaluation trace sits a `MemoTrace`: when a replayed step asks for
    its primal result it returns the value the eager forward saved (an input of the
    program) instead of emitting the forward computation. Only the derivative side of
    each JVP rule (cos(x) for sin, ...) is emitted.
  * Everything is traced into one jaxpr of (saved values, output cotangents) ->
    gradients; DCE keeps what is used; the result is compiled to straight-line Python.
Tensor hooks and `retain_grad` are an identity primitive (`facade_tap`) whose transpose
calls the hooks (`hook_call`, a host callback in the program) and captures the cotangent;
an `autograd.Function` is a primitive whose transpose calls the user's backward.
"""
from __future__ import annotations

import threading

import numpy as np

from ..core import (ClosedJaxpr, FunctransError, Jaxpr, Primitive, ShapedArray, Trace,
                    Tracer, Var, Zero, _thread_state, array_module,
                    new_dynamic_main, new_main)
from ..tracing import JaxprBuilder, JaxprTrace
from .. import passes
from ..runtime import program as concrete_program
from .grad_mode import STATE as GRAD_STATE
from .node import OpInfo

# ---------------------------------------------------------------------------
# error texts (PyTorch's words, API.md)

FREED_MSG = (
    "Trying to backward through the graph a second time (or directly access saved tensors "
    "after they have already been freed). Saved intermediate values of the graph are freed "
    "when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to "
    "backward through the graph a second time or if you need to access saved tensors after "
    "calling backward.")


class InternalEngineError(FunctransError):
    """A bug in the facade's engine (never the user's fault)."""


def describe_value(aval):
    return f"[ft.{aval.dtype.name} [{', '.join(map(str, aval.shape))}]]"


# ---------------------------------------------------------------------------
# runtime context read by the callback primitives while a program runs

class _Run(threading.local):
    def __init__(self):
        self.stack = []


RUN = _Run()


class RunContext:
    __slots__ = ("hooks", "fn_nodes", "create_graph", "anomaly")

    def __init__(self, hooks, fn_nodes, create_graph):
        self.hooks = hooks            # hook slot -> list of hook dicts (called in order)
        self.fn_nodes = fn_nodes      # function slot -> Node of an autograd.Function
        self.create_graph = create_graph
        self.anomaly = False


def _current_run():
    if not RUN.stack:
        raise InternalEngineError("a facade callback ran outside a backward pass")
    return RUN.stack[-1]


# ---------------------------------------------------------------------------
# the facade's plumbing primitives (identity taps and callbacks; no derivative formulas)

def _same(x, **params):
    return x


def _tap_jvp(primals, tangents, **params):
    out = tap_p.bind(primals[0], **params)
    t = tangents[0]
    return out, t if type(t) is Zero else tap_p.bind(t, **params)


def _tap_transpose(ct, x, *, key, hook):
    if hook >= 0:
        ct = hook_call_p.bind(ct, slot=hook)
    build = _BUILD.stack[-1]
    build.captured[key] = ct
    return [ct]


tap_p = Primitive("facade_tap", impl=lambda xp, x, **p: x, abstract_eval=_same,
                  jvp=_tap_jvp, transpose=_tap_transpose)


def _hook_call_impl(xp, ct, *, slot):
    from .tensor import wrap
    run = _current_run()
    g = wrap(ct)
    for hooks in run.hooks[slot]:
        for fn in list(hooks.values()):
            r = fn(g)
            if r is not None:
                g = _check_hook_result(r, g)
    return g._data


def _check_hook_result(r, g):
    from .tensor import Tensor
    if not isinstance(r, Tensor):
        raise TypeError(f"a tensor hook must return None or a Tensor, got {type(r).__name__}")
    if tuple(r.shape) != tuple(g.shape):
        raise RuntimeError(f"hook 'hook' has changed the size of value: expected shape "
                           f"{tuple(g.shape)}, got {tuple(r.shape)}")
    return r


hook_call_p = Primitive("hook_call", impl=_hook_call_impl, abstract_eval=_same, effectful=True)


def _fn_call_abstract(*avals, fslot, out_avals, **p):
    return list(out_avals)


def _fn_call_impl(xp, *args, **params):
    raise InternalEngineError("the forward of an autograd.Function was about to be recomputed "
                              "by a backward program")


def _fn_call_jvp(primals, tangents, *, fslot, out_avals, in_mask, out_mask, materialize):
    outs = fn_call_p.bind(*primals, fslot=fslot, out_avals=out_avals, in_mask=in_mask,
                          out_mask=out_mask, materialize=materialize)
    ts = [t for t, m in zip(tangents, in_mask) if m]
    zero_outs = [Zero(a.strip_weak()) for a in out_avals]
    if all(type(t) is Zero for t in ts):
        return outs, zero_outs
    from functrans.primitives.base import instantiate
    ts = [instantiate(t) for t in ts]
    diff_avals = tuple(a for a, m in zip(out_avals, out_mask) if m)
    in_avals = tuple(a for a, m in zip([_aval(p) for p in primals], in_mask) if m)
    t_outs = iter(fn_lin_p.bind(*ts, fslot=fslot, out_avals=diff_avals, in_avals=in_avals,
                                materialize=materialize, out_mask=out_mask))
    return outs, [next(t_outs) if m else z for m, z in zip(out_mask, zero_outs)]


def _aval(x):
    from functrans.primitives.base import aval_of
    return aval_of(x)


fn_call_p = Primitive("autograd_function", impl=_fn_call_impl, abstract_eval=_fn_call_abstract,
                      multiple_results=True, jvp=_fn_call_jvp)


def _fn_lin_abstract(*avals, out_avals, **p):
    return list(out_avals)


def _fn_lin_transpose(cts, *args, fslot, out_avals, in_avals, materialize, out_mask):
    present = tuple(type(c) is not Zero for c in cts)
    if materialize:
        from functrans.primitives.base import instantiate
        cts = [instantiate(c) for c in cts]
        present = (True,) * len(cts)
    outs = fn_bwd_p.bind(*[c for c, p in zip(cts, present) if p], fslot=fslot, present=present,
                         in_avals=in_avals, out_mask=out_mask)
    return list(outs)


fn_lin_p = Primitive("autograd_function_linear", impl=_fn_call_impl,
                     abstract_eval=_fn_lin_abstract, multiple_results=True,
                     transpose=_fn_lin_transpose)


def _fn_bwd_abstract(*avals, in_avals, **p):
    return list(in_avals)


def _fn_bwd_impl(xp, *cts, fslot, present, in_avals, out_mask):
    from .function import run_backward
    run = _current_run()
    return run_backward(run.fn_nodes[fslot], cts, present, in_avals, out_mask, tensors=False)


fn_bwd_p = Primitive("autograd_function_backward", impl=_fn_bwd_impl,
                     abstract_eval=_fn_bwd_abstract, multiple_results=True, effectful=True)

CALLBACK_PRIMS = (hook_call_p, fn_bwd_p)

# ---------------------------------------------------------------------------
# the memo trace: primal results of replayed steps are read from the saved values


class MemoTracer(Tracer):
    __slots__ = ("val", "key")

    def __init__(self, trace, val, key):
        self._trace = trace
        self._origin = None
        self.val = val
        self.key = key

    @property
    def aval(self):
        from functrans.primitives.base import aval_of
        return aval_of(self.val)

    def full_lower(self):
        return self


class _MemoState:
    def __init__(self, table, available, invars):
        self.table = table            # (prim, input keys) -> (params, output keys)
        self.available = available    # keys whose saved value the program may read
        self.invars = invars          # key -> outer tracer (a program input)


class MemoTrace(Trace):
    def pure(self, val):
        return MemoTracer(self, val, None)

    lift = pure

    def process_primitive(self, prim, tracers, params):
        if prim is tap_p:
            return tracers[0]
        st = self.main.global_data
        keys = tuple(t.key for t in tracers)
        hit = None
        if None not in keys:     # several steps may read the same inputs (x[0:2], x[1:3])
            for cand in st.table.get((prim, keys), ()):
                if cand[0] == params:
                    hit = cand
                    break
        if hit is not None:
            out_keys = hit[1]
            if all(k in st.available for k in out_keys):
                outs = [MemoTracer(self, st.invars[k], k) for k in out_keys]
                return outs if prim.multiple_results else outs[0]
        vals = prim.bind(*[t.val for t in tracers], **params)
        vals = vals if prim.multiple_results else [vals]
        if hit is None:
            outs = [MemoTracer(self, v, None) for v in vals]
        else:
            outs = [MemoTracer(self, st.invars[k] if k in st.available else v, k)
                    for v, k in zip(vals, hit[1])]
        return outs if prim.multiple_results else outs[0]


class _Build(threading.local):
    def __init__(self):
        self.stack = []


_BUILD = _Build()


class _BuildState:
    def __init__(self):
        self.captured = {}


# ---------------------------------------------------------------------------
# the graph handed to the program builder

class RNode:
    """A node as the builder sees it: its info, the keys of its inputs and of its slots."""
    __slots__ = ("info", "in_keys", "slot_keys", "fslot", "pos")

    def __init__(self, info, in_keys, slot_keys, fslot=-1, pos=-1):
        self.info, self.in_keys, self.slot_keys = info, in_keys, slot_keys
        self.fslot, self.pos = fslot, pos


class Spec:
    """What one backward program computes, independent of the values.

    avals: key -> aval of every value the replay may read (all slots of replayed nodes and
    the values entering them); available: keys the memo trace may return (saved);
    args: target keys that enter the replay as primal inputs; targets: keys whose
    cotangents are outputs; taps: key -> hook slot (-1 for none), for replayed values
    whose cotangent is captured or hooked; roots: keys of the differentiated outputs."""

    def __init__(self):
        self.avals = {}
        self.available = set()
        self.nodes = []
        self.args = []
        self.targets = []
        self.taps = {}
        self.roots = []
        self.captures = []


def trace_program(spec: Spec):
    """Derive the backward jaxpr of spec: (available values..., root cotangents) -> target
    cotangents + captured cotangents. Returns (ClosedJaxpr, input keys)."""
    from ..ad import linearize_flat
    from functrans.primitives.base import zeros
    keys = list(spec.avals)
    table, canon = _memo_table(spec)
    builder = JaxprBuilder()
    build = _BuildState()
    _BUILD.stack.append(build)
    try:
        with new_dynamic_main(JaxprTrace, builder) as outer_main:
            outer = JaxprTrace(outer_main)
            in_tracers = [outer.new_arg(spec.avals[k]) for k in keys]
            ct_tracers = [outer.new_arg(spec.avals[k].strip_weak()) for k in spec.roots]
            invars = dict(zip(keys, in_tracers))
            saved = {}          # canonical key -> a program input holding that value
            for k in spec.available:
                saved.setdefault(canon.get(k, k), invars[k])
            state = _MemoState(table, saved, saved)
            with new_main(MemoTrace, state) as memo_main:
                memo = MemoTrace(memo_main)

                def value(k):
                    return MemoTracer(memo, invars[k], canon.get(k, k))

                def replay(*args):
                    env = {}
                    for k, a in zip(spec.args, args):
                        env[k] = _tap(a, k, spec)
                    for rn in spec.nodes:
                        slots = [env[k] if k in env else value(k) for k in rn.in_keys]
                        if rn.info.kind == "function":
                            outs = fn_call_p.bind(*slots, **rn.info.extra["params"](rn.fslot))
                            slots.extend(outs)
                        else:
                            for step in rn.info.steps:
                                if not step.refs:   # a constant (iota): keyed by its slot
                                    slots.extend(_constant_step(memo, step, rn.slot_keys,
                                                                canon, saved))
                                    continue
                                ins = [slots[r] if type(r) is int else
                                       MemoTracer(memo, r.val, ("lit", id(r)))
                                       for r in step.refs]
                                out = step.prim.bind(*ins, **step.params)
                                if step.prim.multiple_results:
                                    slots.extend(out)
                                else:
                                    slots.append(out)
                        for s in rn.info.out_slots:
                            k = rn.slot_keys[s]
                            env[k] = _tap(slots[s], k, spec)
                    return [env[k] if k in env else value(k) for k in spec.roots]

                primals = [value(k) for k in spec.args]
                _, lin = linearize_flat(replay, primals)
                cts = lin.transpose([memo.full_raise(c) for c in ct_tracers])
                arg_ct = dict(zip(spec.args, cts))
                outs = []
                for k in list(spec.targets) + list(spec.captures):
                    c = arg_ct.get(k) if k in arg_ct else build.captured.get(k)
                    if c is None or type(c) is Zero:
                        c = zeros(spec.avals[k].strip_weak())
                    outs.append(c)
                outs = [o.val if isinstance(o, MemoTracer) else o for o in outs]
            out_tracers = [outer.full_raise(o) for o in outs]
            jaxpr, consts = builder.build(in_tracers + ct_tracers, out_tracers)
    finally:
        _BUILD.stack.pop()
    closed = passes.dce(ClosedJaxpr(jaxpr, consts))
    return closed, keys


def _memo_table(spec):
    """(prim, canonical input keys) -> [(params, canonical output keys)], and the map from
    each key to its canonical key: two steps computing the same primitive on the same
    values with the same params (a view and an op both reshaping x, two iotas) produce one
    value, so later steps reading either find it."""
    canon = {}
    table = {}
    for rn in spec.nodes:
        sk = rn.slot_keys
        if rn.info.kind == "function":
            steps = [(fn_call_p, rn.info.extra["params"](rn.fslot), range(rn.info.n_in),
                      rn.info.out_slots)]
        else:
            steps = [(st.prim, st.params, st.refs, st.outs) for st in rn.info.steps]
        for prim, params, refs, outs in steps:
            in_keys = tuple(canon.get(sk[r], sk[r]) if type(r) is int else ("lit", id(r))
                            for r in refs)
            out_keys = tuple(canon.get(sk[o], sk[o]) for o in outs)
            cands = table.setdefault((prim, in_keys), [])
            for cparams, cout in cands:
                if cparams == params:
                    for a, b in zip(out_keys, cout):
                        if a != b:
                            canon[a] = b
                    break
            else:
                cands.append((params, out_keys))
    return table, canon


def _constant_step(memo, step, slot_keys, canon, saved):
    """Outputs of a step without inputs: the saved value if available, else recomputed
    (it binds no tracer, so it would bypass the memo trace and lose its key)."""
    vals = None
    outs = []
    for i, o in enumerate(step.outs):
        k = canon.get(slot_keys[o], slot_keys[o])
        if k in saved:
            outs.append(MemoTracer(memo, saved[k], k))
            continue
        if vals is None:
            vals = step.prim.bind(**step.params)
            vals = vals if step.prim.multiple_results else [vals]
        outs.append(MemoTracer(memo, vals[i], k))
    return outs


def _tap(v, k, spec):
    hook = spec.taps.get(k)
    if hook is None:
        return v
    return tap_p.bind(v, key=k, hook=hook)


def prune_inputs(closed: ClosedJaxpr, keys, n_cts):
    """Drop unused value inputs: (ClosedJaxpr, kept keys)."""
    j = closed.jaxpr
    used = {a for e in j.eqns for a in e.invars if type(a) is Var}
    used.update(a for a in j.outvars if type(a) is Var)
    nv = len(keys)
    keep = [i for i in range(nv) if j.invars[i] in used]
    invars = [j.invars[i] for i in keep] + j.invars[nv:]
    return (ClosedJaxpr(Jaxpr(j.constvars, invars, j.eqns, j.outvars), closed.consts),
            [keys[i] for i in keep])


# ---------------------------------------------------------------------------
# per-signature analysis: which slots does an op's backward read?

def analyze(info: OpInfo):
    """Trace the backward of one node of this signature; set info.held (slots it reads,
    also those the create_graph variant needs) and info.bwd (its own program)."""
    if info.kind != "prim":
        info.held, info.held_set = (), frozenset()
        return
    if not any(info.mask) or not any(info.out_float):
        info.held, info.held_set = (), frozenset()
        info.bwd = None
        return
    spec, cg_spec = _node_spec(info, False), _node_spec(info, True)
    closed, keys = trace_program(spec)
    closed = passes.optimize(closed)
    closed, keys = prune_inputs(closed, keys, len(spec.roots))
    cg_closed, cg_keys = trace_program(cg_spec)
    cg_closed = passes.dce(cg_closed)
    _, cg_keys = prune_inputs(cg_closed, cg_keys, len(cg_spec.roots))
    held = sorted({k[1] for k in keys} | {k[1] for k in cg_keys})
    info.held = tuple(held)
    info.held_set = frozenset(held)
    info.bwd = NodeProgram(closed, [k[1] for k in keys], spec)


def _node_spec(info, create_graph):
    spec = Spec()
    n = len(info.slot_avals)
    for s in range(n):
        spec.avals[("s", s)] = info.slot_avals[s]
    io = set(range(info.n_in)) | set(info.out_slots)
    spec.available = {("s", s) for s in range(n) if not create_graph or s in io}
    spec.nodes = [RNode(info, [("s", i) for i in range(info.n_in)],
                        [("s", s) for s in range(n)])]
    spec.args = [("s", i) for i in range(info.n_in) if info.mask[i]]
    spec.targets = list(spec.args)
    spec.roots = [("s", s) for s, f in zip(info.out_slots, info.out_float) if f]
    return spec


class NodeProgram:
    """The backward of one node: (held slot values, output cotangents) -> input cotangents."""

    def __init__(self, closed, slots, spec):
        self.closed = closed
        self.slots = slots
        self.fn = concrete_program(closed)
        self.n_roots = len(spec.roots)


# ---------------------------------------------------------------------------
# walking the live graph

class Graph:
    """The part of the recorded graph a backward call touches, with its structure key."""
    __slots__ = ("nodes", "pos", "key", "spec_args", "targets", "target_keys", "roots",
                 "root_keys", "hook_slots", "retain_slots", "fn_slots", "replay", "nodes_key")


def walk(root_fns):
    """Nodes reachable from root_fns, producers first (sorted by creation order)."""
    seen = {}
    stack = [n for n in root_fns if n is not None]
    for n in stack:
        seen[id(n)] = n
    while stack:
        n = stack.pop()
        for e in n.edges:
            if e is not None:
                p = e[0]
                if id(p) not in seen:
                    seen[id(p)] = p
                    stack.append(p)
    return sorted(seen.values(), key=_seq_of)


def _seq_of(n):
    return n.seq


def value_key(t, pos):
    """The key of a tensor's value inside a walked graph (None if not in it)."""
    fn = t._grad_fn
    if fn is not None:
        p = pos.of(fn)
        return None if p is None else (p, fn.info.out_slots[t._out_nr])
    acc = t._accum
    if acc is None:
        return None
    p = pos.of(acc)
    return None if p is None else (p, 0)


class Positions:
    """Positions of the nodes of one walked graph (stored on the nodes themselves)."""
    __slots__ = ("nodes",)

    def __init__(self, nodes):
        self.nodes = nodes

    def of(self, n):
        p = n.pos
        return p if 0 <= p < len(self.nodes) and self.nodes[p] is n else None

    def __getitem__(self, n):
        p = self.of(n)
        if p is None:
            raise KeyError(n)
        return p


def _in_keys(n, p, pos):
    keys = []
    for i, e in enumerate(n.edges):
        if e is None:
            keys.append((p, i))
        else:
            prod, j = e
            q = pos[prod]
            keys.append((q, 0) if prod.info is None else (q, prod.info.out_slots[j]))
    return keys


# ---------------------------------------------------------------------------
# programs, cached by graph structure

class Program:
    __slots__ = ("closed", "fn", "fetch", "n_targets", "captures", "spec", "keys", "cg",
                 "replayed")


_CACHE: dict = {}
CACHE_STATS = {"hits": 0, "misses": 0}


_WALK_LOCK = threading.Lock()


def index_graph(root_fns):
    """(nodes producers-first, Positions, structure) of the graph above root_fns.

    The structure is hashable: op signatures and edges as one flat tuple of ints, plus the
    positions of hooked and retained outputs and of Function nodes. Positions and visit
    marks live on the nodes (faster than dicts keyed by id), hence the lock."""
    with _WALK_LOCK:
        token = object()
        nodes = []
        stack = []
        for n in root_fns:
            if n is not None and n.mark is not token:
                n.mark = token
                stack.append(n)
        nodes.extend(stack)
        while stack:
            for e in stack.pop().edges:
                if e is not None:
                    p = e[0]
                    if p.mark is not token:
                        p.mark = token
                        stack.append(p)
                        nodes.append(p)
        nodes.sort(key=_seq_of)
        flat = []
        app = flat.append
        hooked = []
        retained = []
        fns = []
        for p, n in enumerate(nodes):
            n.pos = p
            info = n.info
            if info is None:
                app(-2)
                continue
            app(info.id)
            for e in n.edges:
                if e is None:
                    app(-1)
                else:
                    app(e[0].pos)             # producers come first: already placed
                    app(e[1])
            x = n.x
            if x is not None:
                if x.hooks:
                    for j, h in x.hooks.items():
                        if h:
                            hooked.append((p, j))
                if x.retains:
                    for j, r in x.retains.items():
                        if r() is not None:
                            retained.append((p, j))
                if info.kind == "function":
                    fns.append(p)
    return nodes, Positions(nodes), (tuple(flat), tuple(hooked), tuple(retained), tuple(fns))


def _make_spec(nodes, pos, targets, root_keys, hooked, retained, fns, create_graph):
    """Build the Spec of one backward call (replay only nodes between targets and roots)."""
    spec = Spec()
    target_set = set(targets)
    replay = [False] * len(nodes)
    in_keys_all = [None] * len(nodes)
    for p, n in enumerate(nodes):
        if n.info is None:
            continue
        ik = _in_keys(n, p, pos)
        in_keys_all[p] = ik
        for k, e in zip(ik, n.edges):
            if e is not None and (k in target_set or replay[k[0]]):
                replay[p] = True
                break
    hook_slot = {}
    for i, pj in enumerate(hooked):
        hook_slot[pj] = i
    fslot = {p: i for i, p in enumerate(fns)}
    avals = spec.avals
    for p, n in enumerate(nodes):
        if not replay[p]:
            continue
        info = n.info
        sk = list(in_keys_all[p]) + [(p, s) for s in range(info.n_in, len(info.slot_avals))]
        for s, k in enumerate(sk):
            avals.setdefault(k, info.slot_avals[s])
            if s in info.held_set and (not create_graph or s < info.n_in
                                       or s in info.out_slots):
                spec.available.add(k)
        spec.nodes.append(RNode(info, in_keys_all[p], sk, fslot.get(p, -1), p))
        for j, s in enumerate(info.out_slots):
            k = (p, s)
            h = hook_slot.get((p, j), -1)
            if h >= 0 or (p, j) in retained or k in target_set:
                spec.taps[k] = h
    produced = {(p, s) for p, n in enumerate(nodes) if replay[p] for s in n.info.out_slots}
    for k in targets:
        if k not in produced:
            spec.args.append(k)
            avals.setdefault(k, _key_aval(nodes, k))
            p, s = k
            n = nodes[p]
            if n.info is not None:
                h = hook_slot.get((p, n.info.out_slots.index(s)), -1)
                if h >= 0:
                    spec.taps[k] = h
    args = set(spec.args)
    for p, j in retained:
        k = (p, nodes[p].info.out_slots[j])
        if k in produced or k in args:
            spec.captures.append(k)
    spec.targets = list(targets)
    for k in root_keys:
        avals.setdefault(k, _key_aval(nodes, k))
    spec.roots = list(root_keys)
    return spec


def _key_aval(nodes, k):
    p, s = k
    n = nodes[p]
    if n.info is None:
        v = n.variable
        return ShapedArray(v._data.shape, v._data.dtype)
    return n.info.slot_avals[s]


def get_program(nodes, pos, targets, root_keys, create_graph, structure=None):
    if structure is None:
        structure = index_graph([n for n in nodes if n.info is not None])[2]
    parts, hooked, retained, fns = structure
    key = (parts, hooked, retained, tuple(targets), tuple(root_keys), bool(create_graph))
    prog = _CACHE.get(key)
    if prog is not None:
        CACHE_STATS["hits"] += 1
        return prog, hooked, fns
    CACHE_STATS["misses"] += 1
    spec = _make_spec(nodes, pos, targets, root_keys, hooked, retained, fns, create_graph)
    closed, keys = trace_program(spec)
    closed = passes.optimize(closed) if not create_graph else passes.dce(closed)
    closed, keys = prune_inputs(closed, keys, len(spec.roots))
    prog = Program()
    prog.closed = closed
    prog.keys = keys
    prog.spec = spec
    prog.cg = create_graph
    prog.fn = _program_fn(closed, spec) if not create_graph else None
    prog.n_targets = len(spec.targets)
    prog.captures = list(spec.captures)
    prog.replayed = tuple(rn.pos for rn in spec.nodes)    # the nodes this backward executes
    prog.fetch = [_holders(nodes, spec, k) for k in keys]
    if len(_CACHE) > 512:
        _CACHE.clear()
    _CACHE[key] = prog
    return prog, hooked, fns


def _program_fn(closed, spec):
    """The compiled backward program; one that crosses an ft.compile node is lowered by the
    jit pipeline (optimized and fused) instead of straight-line impl calls."""
    fn = concrete_program(closed)
    if any(st.prim.name == "compiled" for rn in spec.nodes for st in rn.info.steps):
        from ..compile_capture import capture_hooks
        return capture_hooks.fused_program(closed, fn)
    return fn


def _holders(nodes, spec, k):
    """(node position, slot) pairs holding the value of key k."""
    res = tuple((rn.pos, s) for rn in spec.nodes for s, sk in enumerate(rn.slot_keys)
                if sk == k and s in rn.info.held_set)
    if not res:
        raise InternalEngineError(f"backward program reads {k}, which no node saved")
    return res


def clear_cache():
    _CACHE.clear()


# ---------------------------------------------------------------------------
# running a backward call

def _fetch_inputs(prog, nodes):
    vals = []
    for holders in prog.fetch:
        v = None
        for p, s in holders:
            n = nodes[p]
            nv = n.vals
            if nv is None:
                continue
            v = nv[s]
            if v is not None:
                if n.vers:
                    _check_version(n, s)
                break
        if v is None:
            n = nodes[holders[0][0]]
            raise RuntimeError(FREED_MSG + f" (the values saved by {n.info.name} were freed by "
                               "an earlier backward)")
        vals.append(v)
    return vals


def _check_version(n, s):
    for slot, vc, ver in n.vers:
        if slot == s and vc.v != ver:
            aval = n.info.slot_avals[s]
            if s < n.info.n_in:
                e = n.edges[s]
                if e is None or e[0].info is None:
                    what = describe_value(aval)
                else:
                    what = f"{describe_value(aval)}, which is output {e[1]} of {e[0].info.name},"
            else:
                what = (f"{describe_value(aval)}, which is output "
                        f"{n.info.out_slots.index(s)} of {n.info.name},")
            by = f" (last modified in place by {vc.op})" if getattr(vc, "op", None) else ""
            raise RuntimeError(
                "one of the variables needed for gradient computation has been modified by "
                f"an inplace operation: {what} is at version {vc.v}; expected version {ver} "
                f"instead.{by} The value was saved for backward by {n.info.name}. Hint: "
                "enable anomaly detection to find the operation that failed to compute its "
                "gradient, with ft.autograd.set_detect_anomaly(True).")


def check_versions(nodes):
    for n in nodes:
        if n.info is not None and n.vers and n.vals is not None:
            for slot, vc, ver in n.vers:
                _check_version(n, slot)


def run_backward(roots, root_cts, targets, retain_graph, create_graph, anomaly=False):
    """Differentiate roots (tensors) w.r.t. targets (tensors; None: every leaf of the graph).

    Returns (gradients, targets): one array (a Tensor under create_graph) per target, None
    for a target the roots do not depend on. root_cts are arrays (Tensors under
    create_graph). Saved values are freed unless retain_graph."""
    from .node import edge_of
    root_fns = []
    for t in roots:
        root_fns.append(t._grad_fn if t._grad_fn is not None else edge_of(t)[0])
    if targets is not None:
        for t in targets:
            if t._grad_fn is None and t._requires_grad:
                edge_of(t)          # a leaf target needs its AccumulateGrad to be found
    nodes, pos, structure = index_graph(root_fns)
    if targets is None:
        targets = [v for v in (n.variable for n in nodes if n.info is None) if v is not None]
    root_keys = [value_key(t, pos) for t in roots]
    tkeys = [value_key(t, pos) for t in targets]
    uniq = list(dict.fromkeys(k for k in tkeys if k is not None))
    if not uniq:
        return [None] * len(targets), targets
    if anomaly:
        from .anomaly import run_node_by_node
        outs, captures, replayed = run_node_by_node(nodes, pos, uniq, root_keys, root_cts,
                                                    create_graph, structure)
    else:
        prog, hooked, fns = get_program(nodes, pos, uniq, root_keys, create_graph, structure)
        outs = _execute(prog, nodes, hooked, fns, root_cts, create_graph)
        captures, replayed = prog.captures, prog.replayed
    res = dict(zip(uniq, outs[:len(uniq)]))
    _deliver_captures(captures, nodes, outs[len(uniq):], create_graph)
    if not retain_graph:
        free_graph([nodes[p] for p in replayed])
    return [res.get(k) if k is not None else None for k in tkeys], targets


def _execute(prog, nodes, hooked, fns, root_cts, create_graph):
    vals = _fetch_inputs(prog, nodes)
    if _thread_state.depth and _any_traced(vals, root_cts):    # inside ft.compile's capture
        from ..compile_capture import capture_hooks
        return capture_hooks.run_program(prog, nodes, hooked, fns, vals, root_cts,
                                         create_graph)
    hooks = [[nodes[p].hooks[j]] for p, j in hooked]
    run = RunContext(hooks, [nodes[p] for p in fns], create_graph)
    RUN.stack.append(run)
    try:
        if create_graph:
            from .ops import eval_jaxpr_facade
            return eval_jaxpr_facade(prog, nodes, vals, root_cts)
        xp = array_module(*vals) if vals else np
        with np.errstate(all="ignore"):     # torch's backward does not warn about inf/nan
            outs = prog.fn(xp, *vals, *root_cts)
    finally:
        RUN.stack.pop()
    return _own_outputs(outs, vals, root_cts)


def _any_traced(vals, root_cts):
    for v in vals:
        if isinstance(v, Tracer):
            return True
    for c in root_cts:
        if isinstance(c, Tracer) or isinstance(getattr(c, "_data", None), Tracer):
            return True
    return False


def _own_outputs(outs, vals, root_cts):
    """Gradients handed to users must be fresh, writable, contiguous arrays."""
    seen = {id(v) for v in vals}
    seen.update(id(c) for c in root_cts)
    res = []
    for o in outs:
        if type(o) is not np.ndarray:
            o = np.asarray(o) if not hasattr(o, "__cuda_array_interface__") else o
            if type(o) is np.ndarray and o.base is None and id(o) not in seen:
                seen.add(id(o))
                res.append(o)
                continue
        if (id(o) in seen or not o.flags.writeable or not o.flags.c_contiguous
                or o.base is not None):
            o = o.copy()
        seen.add(id(o))
        res.append(o)
    return res


def _deliver_captures(captures, nodes, cap_vals, create_graph):
    from .tensor import wrap
    for k, g in zip(captures, cap_vals):
        p, s = k
        n = nodes[p]
        if n.retains is None:
            continue
        j = n.info.out_slots.index(s)
        ref = n.retains.get(j)
        t = ref() if ref is not None else None
        if t is None:
            continue
        accumulate_grad(t, g if create_graph else wrap(g), create_graph)


def accumulate_grad(t, g, create_graph):
    """t.grad = g, or t.grad += g (in place unless create_graph), as torch."""
    from .tensor import Tensor
    if _thread_state.depth:                # .backward() inside an ft.compile capture?
        from ..compile_capture import capture_hooks
        if capture_hooks.active():
            capture_hooks.refuse(".backward() (gradient accumulation into .grad) inside the "
                                 "compiled function", "return the loss and call .backward() "
                                 "on it outside, or use ft.autograd.grad(..., "
                                 "create_graph=True)")
    old = t._grad
    if old is None:
        if create_graph:
            t._grad = g
        else:
            t._grad = g if g._grad_fn is None else g.detach()
    elif create_graph or GRAD_STATE.enabled and g._requires_grad:
        t._grad = old + g
    else:
        data = old._data
        if data.shape == g._data.shape and data.flags.writeable:
            np.add(data, g._data, out=data) if type(data) is np.ndarray else data.__iadd__(g._data)
            old._bump("accumulate_grad")
        else:
            t._grad = Tensor._make(data + g._data)


def free_graph(nodes):
    """Release the values the nodes saved (and Function contexts' saved tensors)."""
    for n in nodes:
        if n.info is None:
            continue
        if n.vals is not None:
            n.vals = None
            n.vers = ()
        x = n.x
        if x is not None and x.ctx is not None:
            x.ctx._free()


def call_node(node, grads):
    raise NotImplementedError("calling a grad_fn directly is not supported by functrans; use "
                              "ft.autograd.grad(outputs, inputs, grad_outputs) instead.")
