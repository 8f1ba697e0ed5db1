"""The engine's interpreter: a backward pass run node by node, each node by its op
signature's own backward program (lower.analyze), as PyTorch's engine does.

It runs a graph structure the first time it is seen (deriving, optimizing and compiling a
program for the whole graph pays off only when the structure repeats) and every backward
in anomaly mode, where the first NaN is attributed to its node.
"""
from __future__ import annotations

import numpy as np

from ..core import Var, run_eqns
from .anomaly import has_nan, nan_error
from .lower import make_spec
from .ops import apply_prim
from .plumbing import (FREED_MSG, RUN, RunContext, _check_version, hook_dicts,
                       run_cotangent_hooks)
from .tensor import wrap


def run_node_by_node(nodes, pos, targets, root_keys, root_cts, create_graph, structure,
                     check_nan=False, early=None):
    """Backward node by node: (outputs like the derived program's, capture keys, the nodes
    run). check_nan: raise at the first node whose gradient has a NaN (anomaly mode).
    early(i, g): called for the targets at early.indices as soon as the last node that
    contributes to them has run (their output is then None)."""
    parts, hooked, retained, fns = structure
    spec = make_spec(nodes, pos, targets, root_keys, hooked, retained, fns, create_graph)
    order = spec.nodes[::-1]
    due = _due(order, targets, spec, early)
    add = (lambda a, b: a + b)
    ct = {}
    for k, c in zip(root_keys, root_cts):
        if k is not None:
            ct[k] = add(ct[k], c) if k in ct else c
    captured = {}
    run = RunContext([[nodes[p].hooks[j]] for p, j in hooked], [nodes[p] for p in fns],
                     create_graph, wrap)
    RUN.stack.append(run)
    try:
        for step, rn in enumerate(order):
            if step in due:
                for k, i in due.pop(step):
                    early(i, _fresh(_final(ct.pop(k, None), k, spec, run, create_graph)))
            node = nodes[rn.pos]
            info = rn.info
            outs = []
            for j, s in enumerate(info.out_slots):
                k = rn.slot_keys[s]
                c = ct.pop(k, None)
                if c is not None and k in spec.taps:
                    c = _tap(c, spec.taps[k], run, create_graph)
                    captured[k] = c
                outs.append(c)
            if all(c is None for c in outs):
                continue
            if info.kind == "function":
                present = tuple(c is not None for c, m in zip(outs, info.out_float) if m)
                cts = [c for c, m in zip(outs, info.out_float) if m and c is not None]
                if node.ctx.materialize_grads:
                    cts = [c if c is not None else np.zeros(a.shape, a.dtype)
                           for c, a, m in zip(outs, info.slot_avals[info.n_in:], info.out_float)
                           if m]
                    present = (True,) * len(cts)
                in_avals = tuple(a for a, m in zip(info.slot_avals[:info.n_in], info.mask) if m)
                grads = info.extra["run_backward"](node, cts, present, in_avals, info.out_float,
                                     tensors=create_graph)
            else:
                grads = _run_node(node, rn, outs, create_graph, nodes)
            for i, g in enumerate(grads):
                if check_nan and has_nan(g):
                    raise nan_error(node, i)
            mask_keys = [k for k, m in zip(rn.in_keys, info.mask) if m]
            for k, g in zip(mask_keys, grads):
                if g is None:
                    continue
                ct[k] = add(ct[k], g) if k in ct else g
        for k, i in due.pop(len(order), ()):
            early(i, _fresh(_final(ct.pop(k, None), k, spec, run, create_graph)))
        res = []
        for i, k in enumerate(targets):
            if early is not None and i in early.done:
                res.append(None)
                continue
            if k in spec.args:
                res.append(_final(ct.get(k), k, spec, run, create_graph))
                continue
            c = captured.get(k)
            res.append(c if c is not None else _zeros(k, spec, create_graph))
        for k in spec.captures:
            c = captured.get(k, ct.get(k))
            res.append(c if c is not None else _zeros(k, spec, create_graph))
    finally:
        RUN.stack.pop()
    if not create_graph:
        res = [_fresh(r) for r in res]
    return res, list(spec.captures), [rn.pos for rn in spec.nodes]


def _fresh(r):
    return np.array(r, copy=True) if isinstance(r, (np.ndarray, np.generic)) else r


def _due(order, targets, spec, early):
    """Step (in `order`) -> [(key, target index)] of the early targets: delivered before that
    step runs, once every node that adds to their cotangent has run."""
    if early is None:
        return {}
    last = {}
    for i in early.indices:
        last[targets[i]] = (0, i)
    for step, rn in enumerate(order):
        for k, m in zip(rn.in_keys, rn.info.mask):
            if m and k in last:
                last[k] = (step + 1, last[k][1])
    due = {}
    for k, (step, i) in last.items():
        due.setdefault(step, []).append((k, i))
    return due


def _final(c, k, spec, run, create_graph):
    """A leaf target's gradient once complete: its tensor hooks run, zeros if none came."""
    if c is not None and k in spec.taps:
        c = _tap(c, spec.taps[k], run, create_graph)
    return c if c is not None else _zeros(k, spec, create_graph)


def _zeros(k, spec, create_graph):
    """The gradient of value k when nothing reached it (a Tensor under create_graph)."""
    a = spec.avals[k]
    c = np.zeros(a.shape, a.dtype)
    return wrap(c) if create_graph else c


def _tap(c, hook, run, create_graph):
    if hook < 0:
        return c
    if create_graph:
        return run_cotangent_hooks(c, *hook_dicts(hook))
    return run_cotangent_hooks(wrap(np.asarray(c)), *hook_dicts(hook))._data


def _run_node(node, rn, outs, create_graph, nodes):
    """One node's backward program on its saved values and output cotangents."""
    info = node.info
    prog = info.bwd
    if prog is None:
        return [np.zeros(a.shape, a.dtype) for a, m in zip(info.slot_avals, info.mask) if m]
    vals = []
    for s in prog.slots:
        if node.vals is None:
            raise RuntimeError(FREED_MSG + f" (the values saved by {info.name} were "
                               "freed by an earlier backward)")
        v = node.vals[s]
        if node.vers:
            _check_version(node, s)
        vals.append(v)
    cts = []
    for c, s, f in zip(outs, info.out_slots, info.out_float):
        if not f:
            continue
        if c is None:
            a = info.slot_avals[s]
            c = np.zeros(a.shape, a.dtype)
            c = wrap(c) if create_graph else c
        cts.append(c)
    if create_graph:
        return _eval_node_facade(node, rn, prog, vals, cts, nodes)
    with np.errstate(all="ignore"):
        return prog.fn(np, *vals, *cts)


def _eval_node_facade(node, rn, prog, vals, cts, nodes):
    """create_graph node by node: the node's program run as recorded facade ops. Saved
    inputs and outputs become tensors connected to the graph."""
    j = prog.closed.jaxpr
    env = {}
    for v, c in zip(j.constvars, prog.closed.consts):
        env[v] = wrap(np.asarray(c))
    info = node.info
    for v, s, val in zip(j.invars, prog.slots, vals):
        if s < info.n_in:
            e = node.edges[s]
            if e is None:
                env[v] = wrap(val)
            else:
                prod, out_nr = e
                if prod.info is None:
                    env[v] = prod.variable
                else:
                    t = wrap(val)
                    t._grad_fn, t._out_nr, t._requires_grad = prod, out_nr, True
                    env[v] = t
        elif s in info.out_slots:
            t = wrap(val)
            t._grad_fn, t._out_nr, t._requires_grad = node, info.out_slots.index(s), True
            env[v] = t
        else:
            raise NotImplementedError(
                "create_graph=True with anomaly detection through an op whose backward reads "
                f"an intermediate value ({info.name}) is not supported; turn anomaly detection "
                "off for the double backward")
    for v, c in zip(j.invars[len(vals):], cts):
        env[v] = c
    run_eqns(j.eqns, env, apply_prim)
    return [env[a] if type(a) is Var else wrap(np.asarray(a.val)) for a in j.outvars]
