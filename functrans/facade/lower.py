"""The facade's graph as the deriver sees it: indexing the recorded graph, the Spec of
one backward call, lowering a Spec into a tape for the core's reverse-mode deriver, and
the per-signature analysis (`analyze`: which slots a node's backward reads) that recording
needs, so it sits below record.py.

A node's primitive steps become equations over value slots (equal steps share one slot,
so a value saved under either name is found); the targets not produced by replayed
nodes are the differentiated inputs, other values read are constants; hooked, retained
and produced-target values pass through a `facade_tap` equation, whose cotangent the
deriver adds to the backward program's outputs.
"""
from __future__ import annotations

import threading

from .. import passes
from ..core import ClosedJaxpr, Jaxpr, JaxprEqn, ShapedArray, Var
from ..reverse import derive, joined_program, literal_key
from ..runtime import program as concrete_program
from .node import OpInfo
from .plumbing import fn_call_p, tap_p


class RNode:
    """A node as the lowering sees it: its info, the keys of its inputs and of its slots."""
    __slots__ = ("info", "in_keys", "slot_keys", "fslot", "pos")

    def __init__(self, info, in_keys, slot_keys, fslot=-1, pos=-1):
        self.info, self.in_keys, self.slot_keys = info, in_keys, slot_keys
        self.fslot, self.pos = fslot, pos


class Spec:
    """What one backward program computes, independent of the values.

    avals: key -> aval of every value the program may read (all slots of replayed nodes
    and the values entering them); available: keys whose saved value it may read;
    args: target keys that enter it as differentiated inputs; targets: keys whose
    cotangents are outputs; taps: key -> hook slot (-1 for none), for replayed values
    whose cotangent is captured or hooked; roots: keys of the differentiated outputs;
    captures: retained keys whose cotangents follow the targets'."""

    def __init__(self):
        self.avals = {}
        self.available = set()
        self.nodes = []
        self.args = []
        self.targets = []
        self.taps = {}
        self.roots = []
        self.captures = []


def derive_program(spec: Spec):
    """The backward program of spec, from the core's deriver: (ClosedJaxpr of (values...,
    root cotangents) -> target cotangents + captured cotangents, and per value input the
    keys naming it: several when equal steps share it, an available one first)."""
    avals, eqns, keys_of = [], [], []
    env = {}             # key -> the slot its readers see (after its tap)
    cse = {}             # (primitive, input slots) -> [(params, output slots)]
    available = spec.available

    def new(aval, keys):
        avals.append(aval)
        keys_of.append(keys)
        return len(avals) - 1

    def tap(s, k):
        h = spec.taps.get(k)
        if h is None:
            return s
        t = new(avals[s], keys_of[s])
        eqns.append((tap_p, {"key": k, "hook": h}, (s,), (t,)))
        return t

    for k in spec.args:
        env[k] = tap(new(spec.avals[k], [k]), k)
    n_in = len(spec.args)
    consts = []

    def read(k):
        s = env.get(k)
        if s is None:
            s = env[k] = new(spec.avals[k], [k])
            consts.append(s)
        return s

    for rn in spec.nodes:
        info = rn.info
        sk = rn.slot_keys
        local = [read(k) for k in rn.in_keys] + [None] * (info.n_slots - info.n_in)
        if info.kind == "function":
            steps = [(fn_call_p, info.extra["params"](rn.fslot), range(info.n_in),
                      info.out_slots)]
        else:
            steps = [(st.prim, st.params, st.refs, st.outs) for st in info.steps]
        for prim, params, refs, outs in steps:
            ins = tuple([local[r] if type(r) is int else r for r in refs])
            cands = cse.setdefault((prim, tuple([i if type(i) is int else literal_key(i)
                                                 for i in ins])), [])
            for cparams, couts in cands:
                if cparams == params:
                    for o, c in zip(outs, couts):
                        local[o] = c
                        _add_key(keys_of[c], sk[o], available)
                    break
            else:
                for o in outs:
                    local[o] = new(info.slot_avals[o], [sk[o]])
                cands.append((params, [local[o] for o in outs]))
                eqns.append((prim, params, ins, tuple([local[o] for o in outs])))
        for s in info.out_slots:
            env[sk[s]] = tap(local[s], sk[s])
    out_idx = [read(k) for k in spec.roots]
    # the deriver returns the float inputs' cotangents; any other target is captured
    # (a produced value through its tap; an integer one is never tapped: zeros)
    arg_out = {k: j for j, k in enumerate([k for k in spec.args
                                           if spec.avals[k].dtype.kind in "fc"])}
    cap_keys = [k for k in spec.targets if k not in arg_out] + list(spec.captures)
    d = derive(avals, eqns, n_in, consts, out_idx,
               [any([k in available for k in ks]) for ks in keys_of],
               [(k, spec.avals[k].strip_weak()) for k in dict.fromkeys(cap_keys)])
    closed = joined_program(d)
    j = closed.jaxpr
    outs = j.outvars
    cap_out = {k: len(arg_out) + i for i, k in enumerate(dict.fromkeys(cap_keys))}
    outvars = [outs[arg_out[k]] if k in arg_out else outs[cap_out[k]] for k in spec.targets]
    outvars += [outs[cap_out[k]] for k in spec.captures]
    invars, keys, sub = [], [], {}
    first = {}
    for v, s in zip(j.invars, d.value_idx):
        ks = keys_of[s]
        f = first.get(id(ks))
        if f is None:                     # a tapped value and its tap read the same input
            first[id(ks)] = v
            invars.append(v)
            keys.append(ks)
        else:
            sub[v] = f
    invars += j.invars[len(d.value_idx):]
    if sub:
        eqns_j = [JaxprEqn(e.primitive, [sub.get(a, a) if type(a) is Var else a
                                         for a in e.invars], e.params, e.outvars)
                  for e in j.eqns]
        outvars = [sub.get(a, a) if type(a) is Var else a for a in outvars]
    else:
        eqns_j = j.eqns
    return ClosedJaxpr(Jaxpr(j.constvars, invars, eqns_j, outvars), closed.consts), keys


def _add_key(keys, k, available):
    """Name one more key for a shared slot (first the available ones: they are read)."""
    if k in available and keys[0] not in available:
        keys.insert(0, k)
    else:
        keys.append(k)


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
# walking the live graph

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


def make_spec(nodes, pos, targets, root_keys, hooked, retained, fns, create_graph):
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
            if s in info.held_set and (not create_graph or s in info.cg_slots):
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


# ---------------------------------------------------------------------------
# per-signature analysis: which slots does an op's backward read?

def analyze(info: OpInfo):
    """Trace the backward of one node of this signature from the slots it may read
    (info.bwd_slots; info.cg_slots under create_graph); set info.held (the slots either
    variant reads) and info.bwd (its own program)."""
    if info.kind != "prim":
        info.held, info.held_set = (), frozenset()
        return
    if not any(info.mask) or not any(info.out_float):
        info.held, info.held_set = (), frozenset()
        info.bwd = None
        return
    spec, cg_spec = _node_spec(info, False), _node_spec(info, True)
    closed, keys = derive_program(spec)
    closed = passes.optimize(closed)
    closed, keys = prune_inputs(closed, keys, len(spec.roots))
    cg_closed, cg_keys = derive_program(cg_spec)
    cg_closed = passes.dce(cg_closed)
    _, cg_keys = prune_inputs(cg_closed, cg_keys, len(cg_spec.roots))
    held = sorted({ks[0][1] for ks in keys} | {ks[0][1] for ks in cg_keys})
    info.held = tuple(held)
    info.held_set = frozenset(held)
    info.bwd = NodeProgram(closed, [ks[0][1] for ks in keys], spec)


def _node_spec(info, create_graph):
    spec = Spec()
    n = len(info.slot_avals)
    for s in range(n):
        spec.avals[("s", s)] = info.slot_avals[s]
    readable = info.cg_slots if create_graph else info.bwd_slots
    spec.available = {("s", s) for s in range(n) if s in readable}
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
