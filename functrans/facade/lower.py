"""The facade's graph as a tape: indexing the recorded graph, the GraphTape of one
backward call (the nodes' primitive steps as equations over value slots: the one program
representation the executor runs equation by equation and the deriver derives whole), and
the per-signature analysis recording needs (`analyze`: which slots a node's backward
reads), so it sits below record.py.

Equal steps share one slot, so a value saved under either name is found; the targets not
produced by replayed nodes are the differentiated inputs, other values read are
constants; hooked, retained and produced-target values pass through a `facade_tap`
equation, whose cotangent the deriver adds to the backward program's outputs.
"""
from __future__ import annotations

import itertools
import operator
import threading

from ..core import ClosedJaxpr, Jaxpr, JaxprEqn, ShapedArray, Var
from ..executor import eqn_reads, eqn_signature
from ..reverse import derive, joined_program, literal_key
from .node import OpInfo
from .plumbing import InternalEngineError, fn_call_p, node_hook_p, tap_p


class GraphTape:
    """One backward call's tape: the replayed nodes' primitive steps as equations over value
    slots, the one program representation both schedules run (the executor's equation by
    equation on a first sight, the derived whole program when the structure repeats).

    Slots 0..n_in-1 are the differentiated inputs (targets no replayed node produces);
    consts: the other slots read before being produced (saved inputs of replayed nodes);
    eqns: (primitive, params, input slots or Literals, output slots); eqn_node: the position
    of the node each equation comes from (-1 for taps), eqn_refs its (input, output)
    slots local to that node (then both in one tuple, and whether the inputs are the
    node's in order: lower._tape_eqns) and sigs its signature (executor.eqn_signature);
    keys_of: per slot, the value keys naming it (several where equal steps share it, an
    available one first); available: per slot, whether a node saved it; holders: key ->
    ((node position, local slot), ...) of the replayed nodes holding it (these three for
    the derived program only, else None/empty); live: per slot, whether it depends on a
    differentiated input; out_idx: the roots' slots; targets: the keys whose cotangents
    the backward returns (retained values among them); arg_slot: target key -> its input
    slot; tapped: key -> the slot its tap reads; replayed: the positions of the nodes it
    runs; companions: the replayed nodes' companion equations (OpInfo.companions, for the
    derived program only), in the form of eqns, over slots of their residuals."""
    __slots__ = ("avals", "eqns", "eqn_node", "n_in", "consts", "keys_of", "available",
                 "holders", "live", "out_idx", "targets", "arg_slot", "replayed",
                 "eqn_refs", "sigs", "tapped", "companions")


def graph_tape(nodes, pos, targets, root_keys, hooked, retained, fns, create_graph,
               program=True):
    """The GraphTape of one backward call (replaying only the nodes between the targets
    and the roots). Hooked, retained and produced-target values pass through a
    `facade_tap` equation, whose cotangent the deriver adds to the program's outputs.

    program: for the derived whole program, equal steps of different nodes share one slot
    (CSE: a value saved under either name is found and computed once) and each slot gets
    its keys, availability and holders. Without it (the first-sight schedule, which reads
    each equation's values from its own node) those are left out (None)."""
    target_set = set(targets)
    target_pos = {q for q, _ in targets}
    replay = replayed_nodes(nodes, target_set, target_pos)
    hook_slot = {pj: i for i, pj in enumerate(hooked)}
    fslot = {p: i for i, p in enumerate(fns)}
    retained_set = set(retained)
    tapped_pos = target_pos | {p for p, _ in hooked} | {p for p, _ in retained}
    tape = GraphTape()
    avals, eqns, eqn_node, eqn_refs, live, sigs = [], [], [], [], [], []
    keys_of = [] if program else None
    holders = {}
    avail_keys = set()   # keys of values a replayed node saved (and may be read)
    env = {}             # key -> the slot its readers see (after its tap), for the values
    #                      no replayed node produces (the replayed nodes' are in locals_of)
    locals_of = [None] * len(nodes)     # replayed node -> its slots, outputs after taps
    table = {}           # CSE: (primitive, input slots) -> [(params, output slots)]

    def new(aval, k, is_live):
        avals.append(aval)
        if program:
            keys_of.append([k])
        live.append(is_live)
        return len(avals) - 1

    def tap(s, k, h):
        t = len(avals)
        avals.append(avals[s])
        if program:
            keys_of.append(keys_of[s])      # one value: the same names
        live.append(live[s])
        eqns.append((tap_p, {"key": k, "hook": h}, (s,), (t,)))
        tapped[k] = s
        eqn_node.append(-1)
        eqn_refs.append(None)
        sigs.append(None)
        return t

    def node_hook(slots, params):
        """A node's grad_fn-hook boundary: fresh slots for `slots` (same values and keys)."""
        outs = []
        for s in slots:
            outs.append(len(avals))
            avals.append(avals[s])
            if program:
                keys_of.append(keys_of[s])
            live.append(live[s])
        eqns.append((node_hook_p, params, tuple(slots), tuple(outs)))
        eqn_node.append(-1)
        eqn_refs.append(None)
        sigs.append(None)
        return outs

    args, arg_slot, tapped = [], {}, {}
    for k in targets:
        p, s = k
        n = nodes[p]
        if replay[p] and s in n.info.out_slots:
            continue                        # produced: tapped where its node runs
        a = new(key_aval(nodes, k), k, True)
        args.append(a)
        arg_slot[k] = a
        h = hook_slot.get((p, n.info.out_slots.index(s)), -1) if n.info is not None else -1
        env[k] = tap(a, k, h) if h >= 0 else a
    n_in = len(args)
    consts = []

    lists = (avals, eqns, eqn_node, eqn_refs, live, sigs, keys_of)
    replayed = []
    companions = []
    for p, n in enumerate(nodes):
        if not replay[p]:
            continue
        replayed.append(p)
        info = n.info
        ni = info.n_in
        local = []
        in_keys = [] if program else None
        for i, e in enumerate(n.edges):
            if e is None:           # a constant input: read by this node only
                if program:
                    k = (p, i)
                    s = new(info.slot_avals[i], k, False)
                else:               # (new, inline)
                    s = len(avals)
                    avals.append(info.slot_avals[i])
                    live.append(False)
                consts.append(s)
            else:
                prod, j = e
                q = prod.pos
                if nodes[q] is not prod:
                    _pos(nodes, prod)           # raises: not in this walk
                if replay[q]:                   # a replayed node's output, after its tap
                    k = (q, prod.info.out_slots[j]) if program else None
                    s = locals_of[q][prod.info.out_slots[j]]
                else:
                    k = _edge_key(prod, q, j)
                    s = env.get(k)
                    if s is None:
                        s = env[k] = new(info.slot_avals[i], k, False)
                        consts.append(s)
            local.append(s)
            if program:
                in_keys.append(k)
        if program:
            for s in info.held_set:
                k = in_keys[s] if s < ni else (p, s)
                holders.setdefault(k, []).append((p, s))
                if not create_graph or s in info.cg_slots:
                    avail_keys.add(k)
        one = one_step(info)
        if one is not None and not program and p not in fslot:
            # one primitive over the inputs in order, one output after them (an elementwise
            # op): its equation emitted directly (what the general steps below do for it)
            prim, params, ro, sig = one
            is_live = ni > 0 and live[local[0]]     # (its inputs are slots: edges)
            if not is_live and ni > 1:
                for a in local:
                    if live[a]:
                        is_live = True
                        break
            t = len(avals)
            avals.append(info.slot_avals[ni])
            live.append(is_live)
            eqns.append((prim, params, tuple(local), (t,)))
            sigs.append(sig)
            eqn_node.append(p)
            eqn_refs.append(ro)
            local.append(t)
        else:
            hooks = p in fslot and info.kind != "function"      # grad_fn hooks on an op node
            if hooks and n.x.post:
                in_pos = tuple(i for i in range(ni) if live[local[i]] and info.mask[i]
                               and info.slot_avals[i].dtype.kind in "fc")
                if in_pos:
                    for i, t in zip(in_pos, node_hook([local[i] for i in in_pos], {
                            "slot": fslot[p], "side": "post", "pos": in_pos})):
                        local[i] = t
            local += [None] * (info.n_slots - ni)
            steps = info.tape_eqns
            if info.kind == "function":
                refs = tuple(range(ni))
                steps = [(fn_call_p, info.extra["params"](fslot.get(p, -1)),
                          (refs, info.out_slots, refs + info.out_slots, True), None)]
            for prim, params, ro, sig in steps:
                if not ro[3]:
                    ins = tuple([local[r] if type(r) is int else r for r in ro[0]])
                elif ni == 1:
                    ins = (local[0],)
                else:
                    ins = tuple(local[:ni])
                if not program:         # (_emit, inline: the first sight's hot loop)
                    is_live = False
                    for a in ins:
                        if type(a) is int and live[a]:
                            is_live = True
                            break
                    if len(ro[1]) == 1:
                        o = ro[1][0]
                        local[o] = t = len(avals)
                        avals.append(info.slot_avals[o])
                        live.append(is_live)
                        outs = (t,)
                    else:
                        outs = []
                        for o in ro[1]:
                            local[o] = t = len(avals)
                            outs.append(t)
                            avals.append(info.slot_avals[o])
                            live.append(is_live)
                        outs = tuple(outs)
                    eqns.append((prim, params, ins, outs))
                    sigs.append(sig)
                    eqn_node.append(p)
                    eqn_refs.append(ro)
                else:
                    cands = table.setdefault((prim, tuple([i if type(i) is int else literal_key(i)
                                                           for i in ins])), [])
                    for cparams, couts in cands:
                        if cparams == params:
                            for o, c in zip(ro[1], couts):
                                local[o] = c
                                keys_of[c].append((p, o))   # an output: not an input slot
                            break
                    else:
                        cands.append((params, _emit(prim, params, ins, ro, sig, p, info, local,
                                                    lists)))
            if program:
                for st in info.companion_steps:
                    ins = tuple([local[r] if type(r) is int else r for r in st.refs])
                    is_live = any(type(i) is int and live[i] for i in ins)
                    for o in st.outs:
                        if local[o] is None:                 # a residual
                            local[o] = new(info.slot_avals[o], (p, o), is_live)
                    companions.append((st.prim, st.params, ins,
                                       tuple([local[o] for o in st.outs])))
            if hooks:
                outs = info.out_slots
                for s, t in zip(outs, node_hook([local[s] for s in outs], {
                        "slot": fslot[p], "side": "pre", "pos": ()})):
                    local[s] = t
        if p in tapped_pos:
            for j, s in enumerate(info.out_slots):
                k = (p, s)
                h = hook_slot.get((p, j), -1)
                if h >= 0 or (p, j) in retained_set or k in target_set:
                    local[s] = tap(local[s], k, h)
        locals_of[p] = local
    tape.out_idx = []
    for k in root_keys:
        p, s = k
        if replay[p]:
            tape.out_idx.append(locals_of[p][s])
            continue
        s = env.get(k)
        if s is None:
            s = env[k] = new(key_aval(nodes, k), k, False)
            consts.append(s)
        tape.out_idx.append(s)
    available = None
    if program:
        for ks in {id(ks): ks for ks in keys_of}.values():     # an available name first
            if ks[0] not in avail_keys:
                for i, k in enumerate(ks):
                    if k in avail_keys:
                        ks.insert(0, ks.pop(i))
                        break
        available = [ks[0] in avail_keys for ks in keys_of]
    tape.avals, tape.eqns, tape.eqn_node, tape.eqn_refs = avals, eqns, eqn_node, eqn_refs
    tape.n_in, tape.consts, tape.keys_of, tape.available = n_in, consts, keys_of, available
    tape.holders = {k: tuple(v) for k, v in holders.items()}
    tape.live, tape.targets, tape.arg_slot = live, list(targets), arg_slot
    tape.tapped = tapped
    tape.companions = companions
    tape.replayed = tuple(replayed)
    tape.sigs = sigs
    return tape


def _pos(nodes, n):
    """n's position in the walked graph nodes (index_graph stored it on n)."""
    p = n.pos
    if not 0 <= p < len(nodes) or nodes[p] is not n:
        raise InternalEngineError(f"node {type(n).__name__} is not in the walked graph")
    return p


def replayed_nodes(nodes, target_set, target_pos):
    """Per position of the walked nodes, whether a backward runs the node: one of its
    inputs is a target's value (a key of target_set; target_pos: their positions) or the
    output of a node it runs (creation order; an edge from a node outside the walk
    raises)."""
    replay = [False] * len(nodes)
    for p, n in enumerate(nodes):
        if n.info is None:
            continue
        for e in n.edges:
            if e is not None:
                prod = e[0]
                q = prod.pos
                if nodes[q] is not prod:
                    _pos(nodes, prod)           # raises: not in this walk
                if replay[q] or q in target_pos and _edge_key(prod, q, e[1]) in target_set:
                    replay[p] = True
                    break
    return replay


def _edge_key(prod, q, j):
    """The value key of output j of the node prod at position q."""
    return (q, 0) if prod.info is None else (q, prod.info.out_slots[j])


def _emit(prim, params, ins, ro, sig, p, info, local, lists):
    """Append one step of node p to the tape lists: its output slots (a tuple). ro: the
    step's (input, output) slots local to p."""
    avals, eqns, eqn_node, eqn_refs, live, sigs, keys_of = lists
    is_live = False
    for i in ins:
        if type(i) is int and live[i]:
            is_live = True
            break
    out_slots = []
    for o in ro[1]:
        local[o] = len(avals)
        out_slots.append(local[o])
        avals.append(info.slot_avals[o])
        live.append(is_live)
        if keys_of is not None:
            keys_of.append([(p, o)])
    out_slots = tuple(out_slots)
    eqns.append((prim, params, ins, out_slots))
    sigs.append(sig)
    eqn_node.append(p)
    eqn_refs.append(ro)
    return out_slots


def one_step(info):
    """info.one_step (_tape_eqns, made on first use)."""
    if info.tape_eqns is None:
        _tape_eqns(info)
    return info.one_step


def _tape_eqns(info):
    """info's steps as tape equations over its local slots, with their signatures:
    ((primitive, params, (refs, outs, refs + outs, whether refs are the op's inputs in
    order), eqn_signature), ...), computed once per OpInfo; and info.one_step, the one
    equation of an op that is one primitive over its inputs in order with one output
    after them (else None): graph_tape emits it directly."""
    direct = tuple(range(info.n_in))
    info.tape_eqns = tuple([(st.prim, st.params,
                             (st.refs, st.outs, st.refs + st.outs, st.refs == direct),
                             eqn_signature(st.prim, st.params, st.refs, info.slot_avals))
                            for st in info.steps])
    one = info.tape_eqns[0] if len(info.steps) == 1 else None
    info.one_step = one if (one is not None and info.kind == "prim" and one[2][3]
                            and one[2][1] == (info.n_in,) and info.n_slots == info.n_in + 1) \
        else None
    return info.tape_eqns


def derive_graph(tape: GraphTape):
    """The backward program of a graph tape, from the core's deriver: (ClosedJaxpr of
    (values..., root cotangents) -> target cotangents + captured cotangents, and per value
    input the keys naming it)."""
    avals = tape.avals
    # the deriver returns the float inputs' cotangents; any other target is captured
    # (a produced value through its tap; an integer one is never tapped: zeros)
    arg_out = {k: j for j, k in enumerate([k for k, s in tape.arg_slot.items()
                                           if avals[s].dtype.kind in "fc"])}
    cap_keys = list(dict.fromkeys([k for k in tape.targets if k not in arg_out]))
    cap_avals = {}
    for k in cap_keys:
        cap_avals[k] = target_aval(tape, k)
    d = derive(avals, tape.eqns, tape.n_in, tape.consts, tape.out_idx, tape.available,
               [(k, cap_avals[k].strip_weak()) for k in cap_keys], tape.companions)
    closed = joined_program(d)
    j = closed.jaxpr
    outs = j.outvars
    cap_out = {k: len(arg_out) + i for i, k in enumerate(cap_keys)}
    outvars = [outs[arg_out[k]] if k in arg_out else outs[cap_out[k]] for k in tape.targets]
    invars, keys, sub = [], [], {}
    first = {}
    for v, s in zip(j.invars, d.value_idx):
        ks = tape.keys_of[s]
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


def target_aval(tape, k):
    """The aval of a target or retained key: its slot's (an argument's, or the slot a tap
    of it reads)."""
    s = tape.arg_slot.get(k)
    if s is None:
        s = tape.tapped.get(k)
    if s is not None:
        return tape.avals[s]
    raise InternalEngineError(f"a gradient was asked for value {k}, which is neither an input "
                              "of the backward nor tapped")


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


_seq_of = operator.attrgetter("seq")       # a node's creation order (C-level sort key)


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


_WALK_LOCK = threading.Lock()
_UNIQUE = itertools.count()


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
                if info.kind == "function" or x.pre or x.post:
                    fns.append(p)       # a Function, or an op node with grad_fn hooks
                if x.own_packs:         # values packed by hooks of their own differ from
                    app(-3)             # the equal values of other slots: never one program
                    app(next(_UNIQUE))  # slot for both (a structure of its own, first sight)
    return nodes, Positions(nodes), (tuple(flat), tuple(hooked), tuple(retained), tuple(fns))


def key_aval(nodes, k):
    p, s = k
    n = nodes[p]
    if n.info is None:
        v = n.variable
        if v is None:                   # a leaf that is gone (engine.run_backward)
            return ShapedArray(*n.shape_dtype)
        return ShapedArray(v._data.shape, v._data.dtype)
    return n.info.slot_avals[s]


# ---------------------------------------------------------------------------
# per-signature analysis: which slots does an op's backward read?

def analyze(info: OpInfo):
    """Set info.held: the slots a backward through a node of this signature may read,
    whether it runs alone (create_graph: info.cg_slots may be saved) or not
    (info.bwd_slots). Each step's equation says what its backward reads (the executor's
    per-equation program, derived once per primitive signature and shared with the
    first-sight schedule); a float intermediate that may not be saved is recomputed from
    its step's inputs, which are then read instead. No whole-op derivation."""
    if info.kind != "prim" or not any(info.mask) or not any(info.out_float):
        info.held, info.held_set = (), frozenset()
        return
    reads = _step_reads(info)
    held = _closure(info, reads, info.bwd_slots) | _closure(info, reads, info.cg_slots)
    if info.companions:     # the derived program reads the residuals they computed instead
        held |= _closure(info, _step_reads(info, True), info.bwd_slots)
    info.held = tuple(sorted(held))
    info.held_set = frozenset(held)


def _step_reads(info, with_companions=False):
    """The slots the backward equations of info's steps read, the steps taken in reverse
    from the op's float outputs and each reached by a cotangent (not past a stop_gradient);
    with_companions: for a step whose outputs info's companions compute, what its backward
    reads given their residuals (_form_reads)."""
    live = [False] * info.n_slots
    for i in range(info.n_in):
        live[i] = info.mask[i]
    for st in info.steps:
        if any(type(r) is int and live[r] for r in st.refs):
            for o in st.outs:
                live[o] = True
    avals = info.slot_avals
    reach = {s for s, f in zip(info.out_slots, info.out_float) if f}
    reads = set()
    for st in reversed(info.steps):
        present = tuple(o in reach for o in st.outs)
        lv = tuple(type(r) is int and live[r] for r in st.refs)
        if True not in present or True not in lv:
            continue
        in_avals = tuple(avals[r] if type(r) is int else r.aval for r in st.refs)
        n = len(st.refs)
        got, flows_to = eqn_reads(st.prim, st.params, in_avals, lv, present)
        form = info.forms.get(st) if with_companions else None
        if form is not None:
            form_reads = _form_reads(info, st, form, lv, present)
            if form_reads is not None:
                reads.update(form_reads)
                got = ()
        for r in got:
            slot = st.refs[r] if r < n else st.outs[r - n]
            if type(slot) is int:
                reads.add(slot)
        reach.update(st.refs[k] for k in flows_to)
    return reads


def _form_reads(info, st, form, lv, present):
    """The slots of info that step st's derived backward reads when the residuals of its
    residual form (companion steps `form`) are available: a one-equation derive (None
    when an input slot repeats: then the plain reads)."""
    n = len(st.refs)
    refs = [r for r in st.refs if type(r) is int]
    if len(set(refs)) != len(refs):
        return None
    order = [k for k in range(n) if lv[k]] + [k for k in range(n) if not lv[k]]
    local, avals, back = {}, [], []

    def slot(s, aval):
        if s not in local:
            local[s] = len(avals)
            avals.append(aval)
            back.append(s)
        return local[s]
    ins = {}
    for k in order:
        r = st.refs[k]
        ins[k] = slot(r, info.slot_avals[r]) if type(r) is int else r
    outs = tuple(slot(o, info.slot_avals[o]) for o in st.outs)
    comps = []
    for c in form:
        ci = tuple(slot(r, info.slot_avals[r]) if type(r) is int else r for r in c.refs)
        comps.append((c.prim, c.params, ci, tuple(slot(o, info.slot_avals[o])
                                                  for o in c.outs)))
    n_live = sum(lv)
    consts = [local[st.refs[k]] for k in order[n_live:] if type(st.refs[k]) is int]
    d = derive(avals, [(st.prim, st.params, tuple(ins[k] for k in range(n)), outs)], n_live,
               consts, [o for o, p in zip(outs, present) if p], [True] * len(avals),
               companions=comps)
    return {back[i] for i in d.value_idx}


def _closure(info, reads, saveable):
    """reads, each slot that may not be saved replaced by the inputs of the step that
    computes it (recursively)."""
    producer = {o: st for st in info.steps for o in st.outs}
    held, stack, seen = set(), list(reads), set()
    while stack:
        s = stack.pop()
        if s in seen:
            continue
        seen.add(s)
        if s < info.n_in or s in saveable:
            held.add(s)
        else:
            stack.extend(r for r in producer[s].refs if type(r) is int)
    return held
