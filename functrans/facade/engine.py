"""The autograd engine: PyTorch's semantics around the executor's reverse mode.

The walked graph (lower.index_graph) names a backward by its structure, and
lower.graph_tape lowers the replayed nodes into one tape (their primitive steps as
equations over value slots). Which schedule runs it is the executor's policy
(executor.first_sight): the first time a structure is seen, the tape runs equation by
equation (interpret.py on executor.reverse_pass, as ft.vjp runs a new structure), so a
graph that never repeats pays no whole-graph derivation; when it repeats, the tape is
derived whole (lower.derive_graph, the core's deriver), optimized, compiled and kept in
the one cache (backends.memory.DERIVED). This module keeps what is PyTorch's: the graph
walk, the version counters of the saved values a program reads, early delivery of final
leaf gradients to post-accumulate hooks (and destinations for them), `.grad`
accumulation, retained gradients, and freeing the saved values unless retain_graph.
"""
from __future__ import annotations

import itertools

import numpy as np

from ..backends.memory import DERIVED, approx_bytes
from ..core import ShapedArray, Tracer, _thread_state, array_module, keeping_dtypes
from .. import passes
from ..executor import (delivering, early_program, first_sight, memory_owner,
                        usable_destinations)
from ..runtime import gc_paused, program as concrete_program
from .grad_mode import STATE as GRAD_STATE
from .record import ANOMALY, Packed, unpack_saved
from .interpret import run_direct, run_first_sight
from .lower import derive_graph, graph_tape, index_graph, prune_inputs, value_key
from .node import edge_of
from .ops import eval_jaxpr_facade
from .plumbing import (FREED_MSG, RUN, InternalEngineError, RunContext, _check_version,
                       describe_value, torch_convention)
from .tensor import Tensor, traced_hooks, wrap

# ---------------------------------------------------------------------------
# programs, cached by graph structure

class Program:
    """A cached backward program: the compiled function, the keys of its value inputs,
    where to fetch them and the nodes it replays."""
    __slots__ = ("closed", "fn", "fused", "fetch", "keys", "replayed", "early",
                 "saved_by", "token")
    _tokens = itertools.count()

    def approx_bytes(self):
        """Its charge in DERIVED: the program's equations, constants and fetch table."""
        return approx_bytes(self.closed) + 64 * sum(len(h) for h in self.fetch)


CACHE_STATS = {"hits": 0, "misses": 0}


def _program_key(structure, targets, root_keys, create_graph):
    parts, hooked, retained, fns = structure       # (fns: op nodes with grad_fn hooks too)
    return ("backward", parts, hooked, retained, fns, tuple(targets), tuple(root_keys),
            bool(create_graph))


def _seen_bytes(seen):
    """approx_bytes of a first-sight mark ("backward seen", key) without walking the
    structure's ints one by one (0.2 us per node of a first-sight backward): the rest of
    the key walked, the ints charged by their count."""
    key = seen[1]
    return approx_bytes((seen[0], key[:1] + ((),) + key[2:])) + 8 * len(key[1])


def get_program(nodes, pos, targets, root_keys, create_graph, structure=None, key=None):
    if structure is None:
        structure = index_graph([n for n in nodes if n.info is not None])[2]
    parts, hooked, retained, fns = structure
    if key is None:
        key = _program_key(structure, targets, root_keys, create_graph)
    prog = DERIVED.get(key)
    if prog is not None:
        CACHE_STATS["hits"] += 1
        return prog, hooked, fns
    CACHE_STATS["misses"] += 1
    with gc_paused():
        tape = graph_tape(nodes, pos, targets, root_keys, hooked, retained, fns, create_graph)
        closed, keys = derive_graph(tape)
        closed = passes.optimize(closed) if not create_graph else passes.dce(closed)
        closed, keys = prune_inputs(closed, keys, len(tape.out_idx))
    prog = Program()
    prog.closed = closed
    prog.keys = [ks[0] for ks in keys]
    prog.fn = prog.early = None
    prog.fused = False
    if not create_graph:
        prog.fn, prog.fused = _program_fn(closed, tape)
        # whether variants that hand out leaf gradients early (by their saved inputs) run
        # (_early_program; not across an ft.compile node, whose program is fused)
        prog.early = None if prog.fused else True
    prog.saved_by = None
    prog.replayed = tape.replayed           # the nodes this backward executes
    prog.fetch = [_holders(tape.holders, ks, nodes) for ks in keys]
    prog.token = next(Program._tokens)
    DERIVED.put(key, prog)
    return prog, hooked, fns


def _program_fn(closed, tape):
    """The compiled backward program and whether it is fused: one that crosses an
    ft.compile node is lowered by the jit pipeline (optimized and fused) instead of
    straight-line impl calls."""
    fn = concrete_program(closed)
    for prim, params, _, _ in tape.eqns:
        if prim.name == "compiled":          # its `prog` param is compiler.capture's
            return params["prog"].fused_program(closed, fn), True
    return fn, False


def _holders(holders, keys, nodes):
    """(node position, slot) pairs holding the value named by keys, in node order."""
    res = tuple(sorted(h for k in set(keys) for h in holders.get(k, ())))
    if not res:
        p, s = keys[0]
        n = nodes[p]
        what = (f"a leaf {describe_value(_leaf_aval(n))}" if n.info is None else
                f"slot {s} ({describe_value(n.info.slot_avals[s])}) of {n.info.name}")
        raise InternalEngineError(f"the derived backward program reads {what}, which no node "
                                  "saved", workaround="first-sight")
    return res


def _leaf_aval(n):
    d = n.variable._data
    return ShapedArray(d.shape, d.dtype)


def clear_cache():
    """Forget the backward programs and first sights (the op signatures stay)."""
    for kind in ("backward", "backward seen", "early"):
        DERIVED.clear(kind)


# ---------------------------------------------------------------------------
# running a backward call

def _fetch_inputs(prog, nodes):
    """The saved values the program reads. Every node holding one must still hold it: as in
    torch, a node whose saved values an earlier backward freed cannot run again, even when
    another node (its producer, say) also saved the same value."""
    vals = []
    for holders in prog.fetch:
        v = None
        for p, s in holders:
            n = nodes[p]
            nv = n.vals
            if nv is None:
                raise RuntimeError(FREED_MSG + f" (the values saved by {n.info.name} were "
                                   "freed by an earlier backward)")
            if v is None:
                v = nv[s]
                if v is not None and n.vers:
                    _check_version(n, s)
                if type(v) is Packed:
                    v = unpack_saved(v)
        if v is None:
            n = nodes[holders[0][0]]
            raise RuntimeError(FREED_MSG + f" (the values saved by {n.info.name} were freed by "
                               "an earlier backward)")
        vals.append(v)
    return vals


def run_backward(roots, root_cts, targets, retain_graph, create_graph, anomaly=False,
                 deliver=None):
    """_run_backward with the cyclic collector paused: a backward allocates O(graph)
    objects (the walk, the tape, the cotangents) that live until it ends, and the
    collections they would trigger rescan the recorded graph (a third of a first-sight
    backward of a 1,000-op chain); what is garbage meanwhile is collected at the end.
    It runs with torch's dtypes (keeping_dtypes): the x32 narrowing of JAX-side entry points
    never touches a Tensor's float64 gradient."""
    with gc_paused(), keeping_dtypes():
        return _run_backward(roots, root_cts, targets, retain_graph, create_graph, anomaly,
                             deliver)


def _run_backward(roots, root_cts, targets, retain_graph, create_graph, anomaly=False,
                  deliver=None):
    """Differentiate roots (tensors) w.r.t. targets (tensors; None: every leaf of the graph).

    Returns (gradients, targets): one array (a Tensor under create_graph) per target, None
    for a target the roots do not depend on. root_cts are arrays (Tensors under
    create_graph). Saved values are freed unless retain_graph. deliver(t, g): called
    while the backward runs, as soon as g is final, for the leaf targets t that have
    post-accumulate hooks (their result is then None); not under create_graph, anomaly
    mode or an ft.compile capture."""
    root_fns = []
    for t in roots:
        root_fns.append(t._grad_fn if t._grad_fn is not None else edge_of(t)[0])
    if targets is not None:
        for t in targets:
            if t._grad_fn is None and t._requires_grad:
                edge_of(t)          # a leaf target needs its AccumulateGrad to be found
    nodes, pos, structure = index_graph(root_fns)
    targets_all = targets is None
    if targets_all:
        targets = [v for v in (n.variable for n in nodes if n.info is None) if v is not None]
    root_keys = [value_key(t, pos) for t in roots]
    tkeys = [value_key(t, pos) for t in targets]
    uniq = list(dict.fromkeys(k for k in tkeys if k is not None))
    if targets_all and (structure[1] or structure[2] or any(
            nodes[p].pre or nodes[p].post for p in structure[3])):
        # hooks fire whether or not a leaf below them is still alive (torch's AccumulateGrad
        # keeps its leaf; functrans's refers to it weakly): the gone leaves are targets too,
        # their gradients dropped
        uniq += [(p, 0) for p, n in enumerate(nodes) if n.info is None and n.variable is None]
    n_targets = len(uniq)
    uniq, retained_keys = with_retained(uniq, nodes, structure)
    if not uniq:            # nothing to deliver (every leaf gone): the graph is used up all
        for n in nodes:         # the same, as torch's backward runs it to its dead leaves
            if n.info is not None and n.vals is None and n.info.held:
                raise RuntimeError(FREED_MSG + f" (the values saved by {n.info.name} were "
                                   "freed by an earlier backward)")
        if not retain_graph:
            free_graph(nodes)
        return [None] * len(targets), targets
    root_cts = [torch_convention(c) for c in root_cts]
    early = dests = None
    if deliver is not None and not (create_graph or anomaly or _thread_state.depth):
        early = _Early.of(targets, tkeys, uniq, deliver)
        dests = _destinations(targets, tkeys, uniq)
    key = _program_key(structure, uniq, root_keys, create_graph)
    prog = None if anomaly else DERIVED.get(key)
    if anomaly or (not create_graph and not _thread_state.depth and _on_cpu(root_cts)
                   and first_sight(("backward seen", key), prog is not None, _seen_bytes)):
        parts, hooked, retained, fns = structure
        direct = None
        if not (anomaly or create_graph or early is not None or hooked or retained or fns):
            direct = run_direct(nodes, uniq, root_keys, root_cts)
        if direct is not None:
            outs, replayed = direct
        else:
            with gc_paused():       # the tape of a large graph: many long-lived objects
                tape = graph_tape(nodes, pos, uniq, root_keys, hooked, retained, fns,
                                  create_graph, program=False)
            outs = run_first_sight(tape, nodes, hooked, fns, root_cts, create_graph,
                                   check_nan=anomaly and ANOMALY.check_nan, early=early)
            replayed = tape.replayed
    else:
        if prog is not None:
            CACHE_STATS["hits"] += 1
            hooked, fns = structure[1], structure[3]
        else:
            prog, hooked, fns = get_program(nodes, pos, uniq, root_keys, create_graph,
                                            structure, key)
        outs = _execute(prog, nodes, hooked, fns, root_cts, create_graph, early, dests)
        replayed = prog.replayed
    outs = [torch_convention(o) for o in outs]
    res = dict(zip(uniq, outs[:len(uniq)]))        # None where delivered early
    if structure[3]:
        for k in undefined_targets(root_fns, [nodes[p] for p in structure[3]], uniq, nodes):
            res[k] = None
    _deliver_retained(retained_keys, nodes, [res[k] for k in retained_keys], create_graph)
    uniq = uniq[:n_targets]
    if not retain_graph:
        free_graph([nodes[p] for p in replayed])
    return [res.get(k) if k is not None else None for k in tkeys], targets


def undefined_targets(root_fns, fn_nodes, keys, nodes):
    """The target keys whose gradient is undefined (None), as torch's: every path from the
    roots to them passes an autograd.Function input whose backward returned None. The
    program computed zeros there; a graph without such a None costs one loop over its
    Function nodes."""
    cut = {(id(n), k) for n in fn_nodes if n.undefined for k in n.undefined}
    if not cut:
        return ()
    seen = set()
    stack = [n for n in root_fns if n is not None]
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        for k, e in enumerate(getattr(n, "edges", ()) or ()):
            if e is not None and (id(n), k) not in cut:
                stack.append(e[0])
    return [key for key in keys if id(nodes[key[0]]) not in seen]


def _on_cpu(arrays):
    return all(type(a) is np.ndarray for a in arrays)


def _execute(prog, nodes, hooked, fns, root_cts, create_graph, early=None, dests=None):
    vals = _fetch_inputs(prog, nodes)
    if _thread_state.depth and _any_traced(vals, root_cts):    # inside ft.compile's capture
        return traced_hooks().run_program(prog, nodes, hooked, fns, vals, root_cts,
                                          create_graph)
    hooks = [[nodes[p].hooks[j]] for p, j in hooked]
    run = RunContext(hooks, [nodes[p] for p in fns], create_graph, wrap)
    RUN.stack.append(run)
    try:
        if create_graph:
            return eval_jaxpr_facade(prog, nodes, vals, root_cts)
        xp = array_module(*vals) if vals else np
        seen = _input_ids(vals, root_cts)
        with np.errstate(all="ignore"):     # torch's backward does not warn about inf/nan
            dests = (usable_destinations(dests, prog.closed.jaxpr.outvars, vals, root_cts)
                     if dests and not prog.fused and xp is np else None)
            kw = {"dests": dests} if dests else {}
            if early is not None and prog.early is not None:
                early.owned, early.nodes, early.fetch = seen, nodes, prog.fetch
                early.dests = dests
                fn = early_program(prog.closed, prog.token,
                                   early.aliases(vals, _saved_by(prog, nodes)))
                with delivering(early):
                    outs = fn(xp, *vals, *root_cts, **kw)
            else:
                outs = prog.fn(xp, *vals, *root_cts, **kw)
    finally:
        RUN.stack.pop()
    done = early.done if early is not None else ()
    return [None if i in done else _owned(o, i, dests, seen) for i, o in enumerate(outs)]


def _owned(o, i, dests, seen):
    """_own(o, seen), except for an output written into its destination (dests)."""
    return o if dests and o is dests[i] else _own(o, seen)


def _destinations(targets, tkeys, uniq):
    """{output index: array} for the leaf targets whose `.grad` is None and one of whose
    post-accumulate hooks names, by a `grad_buffer(tensor)` attribute, an array to hold
    the next fresh gradient (DistributedDataParallel: its slot in the shared-memory
    window, which then needs no copy); None without any."""
    res = None
    for t, k in zip(targets, tkeys):
        post = t.__dict__.get("_post_hooks") if k is not None and t._grad_fn is None \
            and t._grad is None else None
        if not post:
            continue
        for fn in post.values():
            buffer = getattr(fn, "grad_buffer", None)
            a = buffer(t) if buffer is not None else None
            if a is not None:
                if res is None:
                    res, where = {}, {key: i for i, key in enumerate(uniq)}
                res[where[k]] = a
                break
    return res


def _saved_by(prog, nodes):
    """Value key of a node input -> the program inputs holding leaves (parameters) saved by
    the nodes that take it (for a leaf with hooks: by the ops it went into), computed once
    per program."""
    if prog.saved_by is None:
        leaves = {}
        for j, holders in enumerate(prog.fetch):
            for p, s in holders:
                n = nodes[p]
                e = n.edges[s] if s < n.info.n_in else None
                if e is not None and e[0].info is None:
                    leaves.setdefault(p, set()).add(j)
        res = {}
        for p in prog.replayed:
            if p in leaves:
                for e in nodes[p].edges:
                    if e is not None:
                        res.setdefault((e[0].pos, e[1]), set()).update(leaves[p])
        prog.saved_by = res
    return prog.saved_by


class _Early:
    """The leaf targets with post-accumulate hooks, handed to `deliver` as soon as their
    gradient is final (torch runs a leaf's AccumulateGrad node, and so its hooks, when its
    gradient is ready): DistributedDataParallel starts its all-reduces during backward. A
    hook function with `deliver_early = False` runs after the whole backward instead, as
    every hook under an ft.compile capture (no reordered program for it)."""
    __slots__ = ("indices", "targets", "keys", "deliver", "done", "owned", "nodes", "fetch",
                 "dests")

    @staticmethod
    def of(targets, tkeys, uniq, deliver):
        """None when no target has post-accumulate hooks."""
        by_key = {}
        for t, k in zip(targets, tkeys):
            post = t.__dict__.get("_post_hooks") if k is not None and t._grad_fn is None \
                else None
            if post and any(getattr(fn, "deliver_early", True) for fn in post.values()):
                by_key.setdefault(k, []).append(t)
        if not by_key:
            return None
        self = _Early()
        self.targets = {i: by_key[k] for i, k in enumerate(uniq) if k in by_key}
        self.keys = {i: k for i, k in enumerate(uniq) if k in by_key}
        self.indices = frozenset(self.targets)
        self.deliver, self.done, self.owned = deliver, set(), set()
        self.dests = None
        return self

    def aliases(self, vals, saved_by):
        """(i, positions in vals to be read before output i is handed out) per early output:
        values that share the memory of its leaves (a hook may update a leaf in place) and
        the parameters saved by the ops its leaves went into (torch runs a leaf's hooks once
        those ops' backward nodes have run: a hook may update the other parameters they
        read, as an optimizer step does)."""
        by_owner = {}
        for j, v in enumerate(vals):
            by_owner.setdefault(memory_owner(v), []).append(j)
        res = []
        for i in sorted(self.indices):
            pos = set(saved_by.get(self.keys[i], ()))
            for t in self.targets[i]:
                pos.update(by_owner.get(memory_owner(t._data), ()))
            res.append((i, tuple(sorted(pos))))
        return tuple(res)

    def __call__(self, i, g):
        """Output i (a position in the targets without repeats) is final: deliver it."""
        g = torch_convention(_owned(g, i, self.dests, self.owned))
        self.done.add(i)
        for t in self.targets[i]:
            self.deliver(t, g)

    def verify(self, positions):
        """The saved values at these program inputs, still to be read, must not have been
        modified in place by the hooks that just ran (torch's version counter check; the
        node-by-node interpreter checks each node's values when it runs)."""
        for j in positions:
            for p, s in self.fetch[j] if j < len(self.fetch) else ():
                n = self.nodes[p]
                if n.vers:
                    try:
                        _check_version(n, s)
                    except RuntimeError as e:
                        raise RuntimeError(
                            f"{e} It was modified during this backward, by a "
                            "post-accumulate-grad hook: the engine runs a tensor's hooks as "
                            "soon as its gradient is final, possibly before backward has read "
                            "every value it saved; modify other tensors after backward "
                            "returns (or in a callback queued with "
                            "ft.autograd.Variable._execution_engine.queue_callback)") from None


def _any_traced(vals, root_cts):
    for v in vals:
        if isinstance(v, Tracer):
            return True
    for c in root_cts:
        if isinstance(c, Tracer) or isinstance(getattr(c, "_data", None), Tracer):
            return True
    return False


def _input_ids(vals, root_cts):
    seen = {id(v) for v in vals}
    seen.update(id(c) for c in root_cts)
    return seen


def _own(o, seen):
    """Gradients handed to users must be fresh, writable, contiguous arrays: o, or a copy
    when it is one of `seen` (ids of the inputs and of the outputs already handed out)."""
    if type(o) is not np.ndarray:
        o = np.asarray(o) if not hasattr(o, "__cuda_array_interface__") else o
        if type(o) is np.ndarray and o.base is None and id(o) not in seen:
            seen.add(id(o))
            return o
    if (id(o) in seen or not o.flags.writeable or not o.flags.c_contiguous
            or o.base is not None):
        o = o.copy()
    seen.add(id(o))
    return o


def with_retained(uniq, nodes, structure):
    """(the targets followed by the retained values not among them, the retained values'
    keys): retained values are differentiated like targets, so a retain_grad() whose
    tensor has no target below it (its leaf freed, or a constant) still gets its .grad,
    as torch's."""
    retained = list(dict.fromkeys((p, nodes[p].info.out_slots[j]) for p, j in structure[2]))
    have = set(uniq)
    return uniq + [k for k in retained if k not in have], retained


def _deliver_retained(keys, nodes, grads, create_graph):
    for k, g in zip(keys, grads):
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
    if _thread_state.depth:                # .backward() inside an ft.compile capture?
        traced_hooks().accumulate(t)
    old = t._grad
    if old is None:
        if create_graph:
            t._grad = g
        else:
            t._grad = g if g._grad_fn is None else g.detach()
            d = t._data
            if type(d) is np.ndarray and not d.flags.c_contiguous:
                _leaf_layout(t)
    elif create_graph or GRAD_STATE.enabled and g._requires_grad:
        t._grad = old + g
    else:
        data = old._data
        if data.shape == g._data.shape and data.flags.writeable:
            np.add(data, g._data, out=data) if type(data) is np.ndarray else data.__iadd__(g._data)
            old._bump("accumulate_grad")
        else:
            t._grad = Tensor._make(data + g._data)


def _leaf_layout(t):
    """A leaf stored densely in another order (channels_last, a transpose) gets its .grad in
    the same strides, as torch; one with gaps keeps a row-major gradient."""
    d, g = t._data, t._grad._data
    if type(g) is np.ndarray and g.shape == d.shape and _is_dense(d):
        laid = np.empty_like(d)                     # order 'K': the leaf's strides
        laid[...] = g
        t._grad = Tensor._make(laid)


def _is_dense(d):
    """Its elements fill its memory span without gaps (any order of the axes)."""
    span = sum((n - 1) * abs(s) for n, s in zip(d.shape, d.strides)) + d.itemsize
    return d.size * d.itemsize == span


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
