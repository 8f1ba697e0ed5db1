"""A backward's first-sight schedule on the facade's graph: the GraphTape (lower.py) run
equation by equation by the executor (executor.reverse_pass), the schedule ft.vjp uses for
a new structure, with what only the facade has: values fetched from the nodes that saved
them (version counters checked as they are read), tensor hooks and retained gradients
at the taps, autograd.Function nodes, early delivery of final leaf gradients, and, in
anomaly mode, the first NaN attributed to its node.

It runs a graph structure the first time it is seen (deriving, optimizing and compiling a
program for the whole tape pays off only when the structure repeats) and every backward
in anomaly mode.
"""
from __future__ import annotations

import numpy as np

from ..executor import eqn_program, reverse_pass
from ..runtime import run as run_program
from .anomaly import has_nan, nan_error, warn_error_in
from .lower import key_aval, one_step, replayed_nodes, target_aval
from .record import ANOMALY, Packed, saved_value, unpack_saved
from .ops import apply_prim, run_recorded
from .plumbing import (FREED_MSG, RUN, InternalEngineError, RunContext, _check_version,
                       describe_value, fn_call_p, hook_dicts, node_hook_grads, node_hook_p,
                       run_cotangent_hooks, tap_p, torch_convention)
from .tensor import wrap


def run_first_sight(tape, nodes, hooked, fns, root_cts, create_graph, check_nan=False,
                    early=None):
    """The backward of one graph tape equation by equation: the targets' gradients, as the
    derived program returns them. check_nan: raise at the
    first node whose gradient has a NaN (anomaly mode). early(i, g): called for the
    targets at early.indices as soon as their gradient is final (their output is then
    None)."""
    values = _Values(tape, nodes, create_graph)
    ct = {}
    for s, c in zip(tape.out_idx, root_cts):
        ct[s] = ct[s] + c if s in ct else c
    captured = {}
    run = RunContext([[nodes[p].hooks[j]] for p, j in hooked], [nodes[p] for p in fns],
                     create_graph, wrap)

    def tap(i, present):
        _, params, _, oi = tape.eqns[i]
        c = _tap(ct.pop(oi[0]), params["hook"], create_graph)
        captured[params["key"]] = c
        return [c]

    def function(i, present):
        node = values.node = nodes[tape.eqn_node[i]]
        return _function_backward(node, [ct.pop(o, None) for o in tape.eqns[i][3]],
                                  create_graph)

    def node_hook(i, present):
        _, params, _, oi = tape.eqns[i]
        return _node_hook(run.fn_nodes[params["slot"]], params,
                          [ct.pop(o, None) for o in oi], create_graph)

    on_grad = _nan_check(tape, nodes, values) if check_nan else None
    due, deliver = None, None
    if early is not None:
        due, deliver = _due(tape, early)
    RUN.stack.append(run)
    try:
        with np.errstate(all="ignore"), _anomaly_report(values, ANOMALY.enabled):
            reverse_pass(tape.eqns, tape.avals, tape.live, ct, values.getter(), sigs=tape.sigs,
                         run=run_recorded if create_graph else None,
                         special={tap_p: tap, fn_call_p: function, node_hook_p: node_hook},
                         on_grad=on_grad,
                         due=due, deliver=deliver)
        res = []
        for i, k in enumerate(tape.targets):
            if early is not None and i in early.done:
                res.append(None)
                continue
            s = tape.arg_slot.get(k)
            c = ct.get(s) if s is not None else captured.get(k)
            res.append(c if c is not None else _zeros(tape, k, create_graph))
    finally:
        RUN.stack.pop()
    if not create_graph:
        res = [_fresh(r) for r in res]
    return res


_ONE = (True,)


def run_direct(nodes, targets, root_keys, root_cts):
    """The first-sight schedule on the recorded graph itself, when every node between the
    targets and the roots is one primitive with one output (OpInfo.one_step: elementwise
    ops, sums, ...) and the targets and roots are leaves or such nodes: the nodes in
    reverse creation order, each by its equation's cached program (executor.eqn_program,
    as reverse_pass runs a tape), reading the values the node saved (freed and version
    checks at each read, unpack hooks per read, as torch's SavedVariable). No tape is
    built: a graph that never repeats pays one walk forward (which nodes replay) and one
    backward. Without hooks, retained gradients, Functions, early delivery, anomaly mode or
    create_graph (the caller's conditions). Returns (the targets' gradients, fresh arrays;
    the positions of the nodes it ran), or None where the graph is not of that kind (the
    tape's schedule then runs it)."""
    for p, _ in (*targets, *root_keys):
        n = nodes[p]
        if n.info is not None and one_step(n.info) is None:
            return None
    target_pos = {k[0] for k in targets}
    live_out = replayed_nodes(nodes, set(targets), target_pos)
    replayed = [p for p, r in enumerate(live_out) if r]
    for p in replayed:
        info = nodes[p].info
        if info.one_step is None and one_step(info) is None:
            return None
    for p in target_pos:            # position -> a target is at or below its output
        live_out[p] = True
    ct = {}
    for (p, _), c in zip(root_keys, root_cts):
        ct[p] = ct[p] + c if p in ct else c
    memo = {}
    with np.errstate(all="ignore"):
        for p in reversed(replayed):
            g = ct.get(p) if p in target_pos else ct.pop(p, None)
            if g is None:
                continue
            n = nodes[p]
            info = n.info
            edges = n.edges
            if len(edges) == 1:
                lv = _ONE
            elif len(edges) == 2:       # (no comprehension: a call of its own per node)
                a, b = edges
                lv = (a is not None and live_out[a[0].pos],
                      b is not None and live_out[b[0].pos])
            else:
                lv = tuple([e is not None and live_out[e[0].pos] for e in edges])
            hit = memo.get((info, lv))
            if hit is None:
                prim, params, _, sig = info.one_step
                hit = memo[info, lv] = eqn_program(prim, params, None, lv, _ONE, sig)
            prog, reads, nonzero, live_pos, flows, small, one = hit
            if not reads:
                outs = small(np, g) if small is not None else run_program(prog, g)
            elif small is not None and len(reads) == 1:
                r = reads[0]
                nv, vs = n.vals, n.vers     # (_saved, inline for a value that passes)
                if nv is None or vs and (len(vs) > 3 or vs[1].v != vs[2]) or \
                        r not in info.held_set or type(nv[r]) is Packed:
                    v = _saved(n, info, r)
                else:
                    v = nv[r]
                outs = small(np, v, g)
            else:
                args = [_saved(n, info, r) for r in reads]
                args.append(g)
                outs = small(np, *args) if small is not None else run_program(prog, *args)
            if one >= 0:
                q = edges[one][0].pos
                gi = outs[0]
                ct[q] = ct[q] + gi if q in ct else gi
                continue
            it = iter(zip(outs, flows))
            for k, nz in zip(live_pos, nonzero):
                if nz:
                    gi, flow = next(it)
                    if flow:
                        q = edges[k][0].pos
                        ct[q] = ct[q] + gi if q in ct else gi
    res = []
    for k in targets:
        c = ct.get(k[0])
        if c is None:
            a = key_aval(nodes, k)
            res.append(np.zeros(a.shape, a.dtype))
        else:
            res.append(_fresh(c))
    return res, replayed


def _saved(n, info, s):
    """Node n's saved value at its slot s, as run_direct reads it: refused once freed,
    checked against its version counter, unpacked when a hook packed it."""
    if s not in info.held_set:
        raise InternalEngineError(f"the backward of {info.name} reads its slot {s} "
                                  f"({describe_value(info.slot_avals[s])}), which it did "
                                  "not save")
    v = _held(n, info, s)
    return unpack_saved(v) if type(v) is Packed else v


def _held(n, info, s):
    """The value node n saved at its slot s, as saved (maybe packed): refused once freed
    (torch's message), checked against its version counter."""
    nv = n.vals
    if nv is None:
        raise RuntimeError(FREED_MSG + f" (the values saved by {info.name} were freed by an "
                           "earlier backward)")
    vs = n.vers             # (a node holding one tensor: its counter checked inline)
    if vs and (len(vs) > 3 or vs[1].v != vs[2]):
        _check_version(n, s)
    return nv[s]


class _anomaly_report:  # noqa: N801
    """In anomaly mode, an error raised while a node's backward runs is preceded by torch's
    warning naming the node and its forward traceback (anomaly.warn_error_in)."""

    def __init__(self, values, on):
        self.values, self.on = values, on

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        node = self.values.node
        if self.on and exc_type is not None and issubclass(exc_type, Exception) \
                and node is not None:
            warn_error_in(node)
        return False


def _nan_check(tape, nodes, values):
    """on_grad for anomaly mode: raise at the first input cotangent holding a NaN, naming
    the node (and which of its gradient outputs, counting the inputs requiring grad)."""
    def on_grad(i, k, g):
        if tape.eqn_node[i] >= 0 and has_nan(g):
            node = values.node = nodes[tape.eqn_node[i]]
            j = tape.eqn_refs[i][0][k]
            raise nan_error(node, sum(node.info.mask[:j]) if j < node.info.n_in else 0)
    return on_grad


class _Values:
    """Slot values as the equations read them, each from the node the equation belongs to:
    its saved copy (checked, freed or modified in place, at every read, as torch checks a
    node's saved tensors when the node runs), or recomputed from the node's earlier steps
    (a float intermediate no node saves). Under create_graph they are Tensors connected to
    the graph (a node's input or output; an intermediate recomputed by recorded ops), so
    the result is differentiable again."""

    def __init__(self, tape, nodes, create_graph):
        self.tape, self.nodes, self.cg = tape, nodes, create_graph
        self.vals = [None] * len(tape.avals)
        self.producer = None
        self.node = None        # the node whose equation last read a value (anomaly mode)

    def getter(self):
        """get(s, i, r): slot s as equation i reads it (r: its position among the
        equation's inputs, then outputs), the tape's lists bound once (the pass calls it
        for every value an equation's backward reads)."""
        nodes, eqn_node, eqn_refs, vals = self.nodes, self.tape.eqn_node, self.tape.eqn_refs, \
            self.vals
        cg = self.cg

        def get(s, i, r):
            n = self.node = nodes[eqn_node[i]]
            ls = eqn_refs[i][2][r]
            info = n.info
            v = vals[s]
            if ls in info.held_set:
                raw = _held(n, info, ls)
                x = n.x
                own = x is not None and x.own_packs
                packed = type(raw) is Packed
                # a packed value is unpacked at every read, by each node that saved it (as
                # torch's SavedVariable); so are the values of a node with hooks of its own
                if v is None or own or packed:
                    v = unpack_saved(raw) if packed else raw
                    if cg:
                        v = _connect(n, ls, v)
                    if not (own or packed):
                        vals[s] = v
            if v is None:
                if ls < info.n_in:
                    if not cg or n.edges[ls] is not None:
                        raise InternalEngineError(
                            f"the backward of {info.name} reads its input {ls} "
                            f"({describe_value(info.slot_avals[ls])}), which it did not save")
                    v = vals[s] = wrap(saved_value(n, ls))
                else:
                    v = self._recompute(s)
            return v
        return get

    def _recompute(self, s):
        """A value no node saved, from the step computing it (its node's own slots)."""
        if self.producer is None:
            self.producer = {o: i for i, e in enumerate(self.tape.eqns) for o in e[3]}
        i = self.producer[s]
        prim, params, ii, oi = self.tape.eqns[i]
        get = self.getter()     # (a closure over self, kept by no attribute: no cycle)
        ins = [get(a, i, k) if type(a) is int else a.val for k, a in enumerate(ii)]
        out = apply_prim(prim, params, ins) if self.cg else prim.impl(np, *ins, **params)
        for o, v in zip(oi, out if prim.multiple_results else [out]):
            if self.vals[o] is None:
                self.vals[o] = v
        return self.vals[s]


def _connect(n, ls, v):
    """Node n's saved value at local slot ls as a Tensor connected to the graph: the
    variable of a leaf input, the output of the producing node, or a constant."""
    info = n.info
    if ls < info.n_in:
        e = n.edges[ls]
        if e is None:
            return wrap(v)
        prod, out_nr = e
        if prod.info is None:
            return prod.variable
        t = wrap(v)
        t._grad_fn, t._out_nr, t._requires_grad = prod, out_nr, True
        return t
    if ls in info.out_slots:
        t = wrap(v)
        t._grad_fn, t._out_nr, t._requires_grad = n, info.out_slots.index(ls), True
        return t
    return wrap(v)          # an integer intermediate (a mask): constant


def _node_hook(node, params, cts, create_graph):
    """An op node's grad_fn hooks (plumbing.node_hook_p) on its cotangents (None: none
    came): the cotangents they return."""
    grads = [None if c is None else torch_convention(c if create_graph else wrap(np.asarray(c)))
             for c in cts]
    new = node_hook_grads(node, params["side"], params["pos"], grads)
    return [c if g is None else g if create_graph else torch_convention(g)._data
            for c, g in zip(cts, new)]


def _function_backward(node, outs, create_graph):
    """An autograd.Function node's backward on its output cotangents (None: none came):
    its input cotangents (None for inputs that do not require grad)."""
    info = node.info
    present = tuple(c is not None for c, m in zip(outs, info.out_float) if m)
    cts = [c for c, m in zip(outs, info.out_float) if m and c is not None]
    if node.ctx.materialize_grads:
        cts = [c if c is not None else _zero_like(a, create_graph)
               for c, a, m in zip(outs, info.slot_avals[info.n_in:], info.out_float) if m]
        present = (True,) * len(cts)
    in_avals = tuple(a for a, m in zip(info.slot_avals[:info.n_in], info.mask) if m)
    grads = iter(info.extra["run_backward"](node, cts, present, in_avals, info.out_float,
                                            tensors=create_graph))
    return [next(grads) if m else None for m in info.mask]


def _zero_like(a, create_graph):
    z = np.zeros(a.shape, a.dtype)
    return wrap(z) if create_graph else z


def _due(tape, early):
    """({reverse step: [slots]}, deliver) for the early targets: a leaf's gradient is final,
    and handed out, once every node reading it (directly or through its tap) has run all
    its equations (torch runs a leaf's AccumulateGrad node, and so its hooks, after the
    nodes it feeds: a hook may update what those nodes saved, as an optimizer step does)."""
    slot_of = {}
    for i in early.indices:
        s = tape.arg_slot.get(tape.targets[i])
        if s is not None:
            slot_of[s] = i
    n = len(tape.eqns)
    first = {}                  # node position -> its first equation
    for i, p in enumerate(tape.eqn_node):
        if p >= 0 and p not in first:
            first[p] = i
    readers = {}
    for i, (prim, _, ins, outs) in enumerate(tape.eqns):
        for a in ins:
            if type(a) is int:
                readers.setdefault(a, []).append(i)
    due = {}
    for s in slot_of:
        step, stack = 0, [s]
        while stack:
            for i in readers.get(stack.pop(), ()):
                p = tape.eqn_node[i]
                if p < 0:                       # its tap: the tap's readers too
                    step = max(step, n - i)
                    stack.extend(tape.eqns[i][3])
                else:
                    step = max(step, n - first[p])
        due.setdefault(step, []).append(s)

    def deliver(s, c):
        i = slot_of[s]
        early(i, _fresh(c if c is not None else _zeros(tape, tape.targets[i], False)))
    return due, deliver


def _fresh(r):
    return np.array(r, copy=True) if isinstance(r, (np.ndarray, np.generic)) else r


def _zeros(tape, k, create_graph):
    """The gradient of value k when nothing reached it (a Tensor under create_graph)."""
    return _zero_like(target_aval(tape, k), create_graph)


def _tap(c, hook, create_graph):
    if hook < 0:
        return c
    if create_graph:
        return run_cotangent_hooks(c, *hook_dicts(hook))
    return run_cotangent_hooks(wrap(np.asarray(c)), *hook_dicts(hook))._data
