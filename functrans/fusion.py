"""Fusion groups: elementwise equations, and the reductions over trailing axes around them
(row groups), gathered into one `fused` equation each, which a backend runs as one kernel
(a blocked NumPy pass or native C++ on the CPU, a generated CUDA kernel on the GPU).

A backend calls `fuse` on an optimized jaxpr (passes.optimize) before `plan_buffers`.
Before it, the CPU backend with native code calls `split_at_slices`: elementwise work whose
result is only cut into slices (an LSTM step's gate blocks) is done slice by slice, so that
it joins the groups reading the slices. `unfuse` undoes a fusion. Like the passes, each
returns a new jaxpr and leaves its input untouched.
"""
from __future__ import annotations

import math

from .core import ClosedJaxpr, Jaxpr, JaxprEqn, Literal, Var, eval_jaxpr
from .passes import placed_after
from .primitives.base import defprim
from .primitives.reductions import reduce_max_p, reduce_min_p, reduce_sum_p
from .primitives.shape import (broadcast_in_dim_p, expand_dims_p, reshape_p, slice_p,
                               squeeze_p)


def _fused_abstract_eval(*avals, jaxpr, name):
    return [v.aval for v in jaxpr.outvars]


def _fused_impl(xp, *args, jaxpr, name):
    return eval_jaxpr(jaxpr, [], *args)


# A fusion group: the equations of its `jaxpr` param run as one kernel (one blocked
# NumPy pass on the CPU, one generated CUDA kernel on the GPU). It only appears in
# optimized jaxprs, after differentiation, so it has no derivative rules.
fused_p = defprim("fused", _fused_impl, _fused_abstract_eval, multiple_results=True,
                  differentiable=False, memo=False)


def fusible(eqn) -> bool:
    """Elementwise or broadcast equations producing one array of rank >= 1."""
    prim = eqn.primitive
    if prim.multiple_results or prim.effectful or len(eqn.outvars) != 1:
        return False
    out = eqn.outvars[0].aval
    if out.shape == () or 0 in out.shape:
        return False
    if prim is broadcast_in_dim_p:
        return True
    if not prim.elementwise:
        return False
    return all(a.aval.shape in ((), out.shape) for a in eqn.invars)


# ---------------------------------------------------------------------------
# row groups: reductions over trailing axes fused with the elementwise work around them.
# An equation's space is (F, k): the full shape F split into rows F[:k] and the reduced
# trailing axes F[k:]; k is None for a plain elementwise space (one shape, no rows).

ROW_REDUCTIONS = (reduce_sum_p, reduce_max_p, reduce_min_p)
ROW_ALIASES = (reshape_p, squeeze_p, expand_dims_p)   # size-1 axes in or out: same layout


def _strip1(shape):
    return tuple(d for d in shape if d != 1)


def _row_split(full, k):
    """The space (full, k) with k moved left over size-1 axes (the same rows); None unless
    there is a row axis and each row has more than one element."""
    if k < 1 or math.prod(full[k:]) <= 1:
        return None
    while k > 0 and full[k - 1] == 1:
        k -= 1
    return (tuple(full), k)


def rowlike(shape, space) -> bool:
    """A value of this shape holds one number per row of the space (same flat layout)."""
    full, k = space
    return k is not None and _strip1(shape) == _strip1(full[:k])


def row_space(eqn):
    """The space of an equation that a row group may hold, else None: a reduction over
    trailing axes (rows, k), a broadcast of per-row values along them (rows, k), a reshape
    between per-row shapes ("alias", rows), an elementwise equation (its shape, None)."""
    prim = eqn.primitive
    if prim in ROW_REDUCTIONS:
        full, axes = eqn.invars[0].aval.shape, tuple(eqn.params["axes"])
        n = len(full)
        if axes and axes == tuple(range(n - len(axes), n)):
            return _row_split(full, n - len(axes))
        return None
    if prim is broadcast_in_dim_p:
        full = tuple(eqn.outvars[0].aval.shape)
        exp = [1] * len(full)
        for i, d in enumerate(eqn.params["broadcast_dimensions"]):
            exp[d] = eqn.invars[0].aval.shape[i]
        k = len(full)
        while k > 0 and exp[k - 1] == 1:
            k -= 1
        if tuple(exp[:k]) == full[:k]:
            space = _row_split(full, k)
            if space is not None:
                return space
        return (full, None)
    if prim in ROW_ALIASES:
        src, dst = eqn.invars[0].aval.shape, eqn.outvars[0].aval.shape
        return ("alias", _strip1(dst)) if _strip1(src) == _strip1(dst) else None
    return (eqn.outvars[0].aval.shape, None) if fusible(eqn) else None


def _unify(a, b):
    """The space holding equations of spaces a and b, or None."""
    if a == b:
        return a
    if a[0] == "alias":
        a, b = b, a
    if a[0] == "alias" or a[1] is None and b[1] is None:
        return None
    if b[0] == "alias":                 # per-row values only
        return a if a[1] is not None and _strip1(a[0][:a[1]]) == b[1] else None
    if a[1] is None:
        a, b = b, a
    if b[1] is None:        # a row space and a plain one: the plain shape is full or per-row
        return a if b[0] == a[0] or rowlike(b[0], a) else None
    return None


def row_group_space(jaxpr):
    """The space (full, k) of a row group's jaxpr (one with a reduction or a broadcast of
    per-row values), None for a plain elementwise group."""
    for e in jaxpr.eqns:
        if e.primitive in ROW_REDUCTIONS or e.primitive is broadcast_in_dim_p:
            space = row_space(e)
            if space is not None and space[1] is not None:
                return space
    return None


def _sink(eqns, can_fuse):
    """Reorder: non-fusible equations move down to just before their first consumer,
    so that they do not split the fusion groups around them (effects keep their order).
    One that only makes program outputs (a weight's gradient, a bias's sum) moves down to
    just before the next non-fusible equation emitted after its inputs are made, where
    the groups split anyway, rather than to the end: it reads its inputs while they are
    still in cache (a GPT backward's weight-gradient products read the layer's cotangent
    right after it is computed, not after every other layer's)."""
    read = {a for e in eqns for a in e.invars if type(a) is Var}
    eqns = _hoist_unread(eqns, can_fuse, read)
    producer = {}
    for i, e in enumerate(eqns):
        for v in e.outvars:
            producer[v] = i
    pending: dict = {}              # index -> eqn, not yet emitted
    unread: dict = {}               # the pending ones whose outputs no equation reads
    out: list = []
    done: set = set()

    def ready(e):
        return all(producer.get(a) is None or producer[a] in done
                   for a in e.invars if type(a) is Var)

    def flush(i):
        """Emit pending equation i after its pending producers, depth first (a loop, not
        recursion: a chain of thousands of pending equations is one path)."""
        if i in done:
            return
        stack = [(i, pending.pop(i), 0)]
        while stack:
            k, e, p = stack[-1]
            while p < len(e.invars):
                a = e.invars[p]
                p += 1
                j = producer.get(a) if type(a) is Var else None
                if j is not None and j in pending:
                    stack[-1] = (k, e, p)
                    stack.append((j, pending.pop(j), 0))
                    break
            else:
                stack.pop()
                for j in [j for j, o in unread.items() if j != k and ready(o)]:
                    done.add(j)
                    out.append(pending.pop(j))
                    del unread[j]
                unread.pop(k, None)
                done.add(k)
                out.append(e)

    def emit(i, e):
        for a in e.invars:
            j = producer.get(a) if type(a) is Var else None
            if j is not None and j in pending:
                flush(j)
        done.add(i)
        out.append(e)

    for i, e in enumerate(eqns):
        if e.primitive.effectful:
            for j in sorted(pending):
                flush(j)
            emit(i, e)
        elif can_fuse(e):
            emit(i, e)
        else:
            pending[i] = e
            if not any(v in read for v in e.outvars):
                unread[i] = e
    for j in sorted(pending):
        flush(j)
    return out


def _hoist_unread(eqns, can_fuse, read):
    """eqns with each non-fusible equation whose outputs no equation reads moved up to
    just after the last producer of its inputs (transposition leaves a weight's gradient
    product at the end of the backward, long after the cotangent it reads was made)."""
    producer = {}
    after: dict = {}
    moved = set()
    for i, e in enumerate(eqns):
        if not e.primitive.effectful and not can_fuse(e) and \
                not any(v in read for v in e.outvars):
            last = max((producer.get(a, -1) for a in e.invars if type(a) is Var), default=-1)
            if last < i - 1:
                after.setdefault(last, []).append(e)
                moved.add(i)
        for v in e.outvars:
            producer[v] = i
    if not moved:
        return eqns
    return placed_after(eqns, after, moved)


def _group_name(members):
    names = []
    for e in members:
        n = e.primitive.name
        if n in ("broadcast_in_dim", "convert_element_type"):
            n = {"broadcast_in_dim": "bcast", "convert_element_type": "convert"}[n]
        if n not in names:
            names.append(n)
    if len(names) > 6:
        names = names[:6] + [f"etc{len(members)}"]
    return "fused_" + "_".join(names)


def _plain_slice(e) -> bool:
    return e.primitive is slice_p and all(k == 1 for k in e.params.get("strides") or ())


def _sliced_operand(a, start, limit, out_shape, new):
    """Operand a of an elementwise equation, cut as its slice [start, limit) of the result
    (a scalar stays whole); a slice equation is appended to `new` when a cut is needed."""
    if type(a) is Literal or a.aval.shape == ():
        return a
    v = Var(a.aval.update(shape=tuple(out_shape)))
    new.append(JaxprEqn(slice_p, [a], {"start_indices": tuple(start),
                                        "limit_indices": tuple(limit), "strides": None}, [v]))
    return v


def split_at_slices(closed: ClosedJaxpr, can_fuse=fusible) -> ClosedJaxpr:
    """Elementwise work whose result is only sliced, each slice read by fusible equations
    (an LSTM step: the pre-activations h @ W^T + b + x, then cut into its four gate
    blocks), done slice by slice on the slices of its operands instead, so that it fuses
    into the groups that read the slices: one kernel per step reading the product's column
    blocks in place (backends/cpu.py), not two whole-array passes and four copies before
    it. A broadcast is cut at its operand. Pushed up while the producer is such work (one
    walk from the last equation to the first); the slices must not overlap in size (the
    same work, in pieces, never more), and outputs of the program are left whole. The
    values are the same."""
    j = closed.jaxpr
    if not any(e.primitive is slice_p for e in j.eqns):
        return closed
    eqns = list(j.eqns)
    outs = {a for a in j.outvars if type(a) is Var}
    readers: dict = {}                 # var -> the equations reading it now
    for e in eqns:
        for a in e.invars:
            if type(a) is Var:
                readers.setdefault(a, []).append(e)
    repl: dict = {}                    # index -> the equations replacing eqns[index]
    dead: set = set()                  # ids of the slices replaced

    def fusible_readers(v):
        rs = readers.get(v, ())
        return bool(rs) and v not in outs and all(can_fuse(r) for r in rs)

    for k in range(len(eqns) - 1, -1, -1):
        e = eqns[k]
        if len(e.outvars) != 1 or (e.primitive is not broadcast_in_dim_p and not fusible(e)):
            continue
        v = e.outvars[0]
        cuts = readers.get(v, ())
        if (v in outs or not cuts or not all(_plain_slice(c) for c in cuts)
                or sum(c.outvars[0].aval.size for c in cuts) > v.aval.size
                or not all(fusible_readers(c.outvars[0]) for c in cuts)):
            continue
        new = []
        for c in cuts:
            start, limit = c.params["start_indices"], c.params["limit_indices"]
            piece = c.outvars[0]
            if e.primitive is broadcast_in_dim_p:
                x, dims = e.invars[0], e.params["broadcast_dimensions"]
                xs, xl = [], []
                for d, od in enumerate(dims):
                    whole = x.aval.shape[d] == 1 and v.aval.shape[od] != 1
                    xs.append(0 if whole else start[od])
                    xl.append(1 if whole else limit[od])
                cut = x if type(x) is Literal or (tuple(xs) == (0,) * len(xs) and tuple(xl) ==
                                                  tuple(x.aval.shape)) else \
                    _sliced_operand(x, xs, xl, [b - a for a, b in zip(xs, xl)], new)
                new.append(JaxprEqn(e.primitive, [cut], {**e.params,
                                                         "shape": tuple(piece.aval.shape)},
                                    [piece]))
            else:
                ins = [_sliced_operand(a, start, limit, piece.aval.shape, new)
                       for a in e.invars]
                new.append(JaxprEqn(e.primitive, ins, e.params, [piece]))
            dead.add(id(c))
        for a in e.invars:
            if type(a) is Var:
                readers[a] = [r for r in readers[a] if r is not e]
        for ne in new:
            for a in ne.invars:
                if type(a) is Var:
                    readers.setdefault(a, []).append(ne)
        repl[k] = new
    if not repl:
        return closed
    out = []
    for k, e in enumerate(eqns):
        out += [x for x in repl[k] if id(x) not in dead] if k in repl else \
            ([] if id(e) in dead else [e])
    return ClosedJaxpr(Jaxpr(j.constvars, j.invars, out, j.outvars), closed.consts)


def fuse(closed: ClosedJaxpr, can_fuse=fusible, min_eqns=2, rows=False) -> ClosedJaxpr:
    """Group elementwise and broadcast equations of equal output shape into `fused`
    equations, each with a sub-jaxpr, so a backend runs each group as one kernel.
    With `rows` (a backend that renders row groups), a group may also hold reductions over
    trailing axes, with the elementwise work before and after them on the same rows
    (`row_space`): softmax, layernorm, logsumexp and their backward programs.

    A group stays open while only its own members read its values; the first outside
    reader closes it. Open groups have no path out of them, so merging several open
    groups through a shared consumer never creates a cycle, and placing a group at
    its last member keeps the program in dependency order."""
    j = closed.jaxpr
    eqns = _sink(j.eqns, can_fuse)
    group_of: dict = {}                     # var -> group id
    groups: dict = {}                       # id -> list of eqn positions
    shape_of: dict = {}
    is_open: dict = {}
    member_of: dict = {}                    # eqn position -> group id
    parent: dict = {}

    def find(g):
        while parent[g] != g:
            parent[g] = parent[parent[g]]
            g = parent[g]
        return g

    for i, e in enumerate(eqns):
        producers = {find(group_of[a]) for a in e.invars if type(a) is Var and a in group_of}
        space = None
        if can_fuse(e):
            space = row_space(e) if rows else (e.outvars[0].aval.shape, None)
        if space is not None:
            cands = []
            if not (rows and e.primitive is broadcast_in_dim_p and space[1] is None):
                # (a broadcast along other axes reads its operand from outside the group)
                # row spaces first: a plain group may fit only once the space has rows
                for g in sorted(producers, key=lambda g: (shape_of[g][1] is None, g)):
                    u = _unify(space, shape_of[g]) if is_open[g] else None
                    if u is not None:
                        space = u
                        cands.append(g)
            if space[0] == "alias":                 # a reshape joins a row group only
                space, cands = None, []
        if space is not None:
            for g in producers.difference(cands):
                is_open[g] = False
            if cands:
                g = max(cands, key=lambda c: len(groups[c]))    # smaller groups join it
                for h in cands:
                    if h == g:
                        continue
                    parent[h] = g
                    groups[g].extend(groups.pop(h))
                    is_open.pop(h)
            else:
                g = len(parent)
                parent[g] = g
                groups[g] = []
                is_open[g] = True
            shape_of[g] = space
            groups[g].append(i)
            for v in e.outvars:
                group_of[v] = g
        else:
            for g in producers:
                is_open[g] = False
    for i_list in groups.values():
        i_list.sort()
    for g, members in groups.items():
        for i in members:
            member_of[i] = g

    readers: dict = {}                      # var -> set of eqn positions reading it
    for i, e in enumerate(eqns):
        for a in e.invars:
            if type(a) is Var:
                readers.setdefault(a, set()).add(i)
    final_out = {a for a in j.outvars if type(a) is Var}

    fused_groups = {g for g, members in groups.items() if len(members) >= min_eqns
                    and any(eqns[k].primitive is not broadcast_in_dim_p for k in members)}
    new_eqns = []
    for i, e in enumerate(eqns):
        g = member_of.get(i)
        if g not in fused_groups:
            new_eqns.append(e)
            continue
        members = groups[g]
        if i != members[-1]:
            continue
        mset = set(members)
        defined = {v for k in members for v in eqns[k].outvars}
        ins, seen = [], set()
        for k in members:
            for a in eqns[k].invars:
                if type(a) is Var and a not in defined and a not in seen:
                    seen.add(a)
                    ins.append(a)
        outs = [v for k in members for v in eqns[k].outvars
                if v in final_out or readers.get(v, set()) - mset]
        inner = Jaxpr([], ins, [eqns[k] for k in members], outs)
        new_eqns.append(JaxprEqn(fused_p, ins, {"jaxpr": inner, "name": _group_name(
            [eqns[k] for k in members])}, outs))
    return ClosedJaxpr(Jaxpr(j.constvars, j.invars, new_eqns, j.outvars), closed.consts)


def unfuse(closed: ClosedJaxpr) -> ClosedJaxpr:
    """The inverse of fuse: fusion groups replaced by their equations."""
    eqns = []
    for e in closed.jaxpr.eqns:
        eqns.extend(e.params["jaxpr"].eqns if e.primitive is fused_p else [e])
    j = closed.jaxpr
    return ClosedJaxpr(Jaxpr(j.constvars, j.invars, eqns, j.outvars), closed.consts)
