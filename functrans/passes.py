"""Jaxpr-to-jaxpr optimization passes, each a small function with its own tests.

The jit pipeline (runtime.lower_jaxpr) runs them in this order: `inline_calls` (jit of
jit), `simplify` (what AD leaves behind), `contract_sums` (sums over batched products
become contractions), `merge_pads` (sums of zero-padded pieces become concatenations),
`fold_constants`, `cse`, `dce`; a backend then calls fusion.fuse (fusion groups) and
`plan_buffers` (buffer reuse).
Every pass returns a new jaxpr and leaves its input untouched.
"""
from __future__ import annotations

import numpy as np

from .core import ClosedJaxpr, Jaxpr, JaxprEqn, Literal, ShapedArray, Var, array_module
from .primitives.elementwise import add_p
from .primitives.linalg import dot_general_p
from .primitives.reductions import reduce_sum_p
from .primitives.shape import broadcast_in_dim_p, concatenate_p, pad_p, transpose_p

# ---------------------------------------------------------------------------
# small helpers


def _read(env, a):
    """An atom after substitution (Literals are left alone)."""
    if type(a) is Var:
        return env.get(a, a)
    return a


def _uses(jaxpr):
    """How many times each var is read (by equations or as an output)."""
    n: dict = {}
    for e in jaxpr.eqns:
        for a in e.invars:
            if type(a) is Var:
                n[a] = n.get(a, 0) + 1
    for a in jaxpr.outvars:
        if type(a) is Var:
            n[a] = n.get(a, 0) + 1
    return n


def _scalar_of(atom, consts):
    """The value of a rank-0 known atom (Literal or constvar), else None."""
    if type(atom) is Literal:
        return np.asarray(atom.val)
    if type(atom) is Var and atom in consts and atom.aval.shape == ():
        return np.asarray(consts[atom])
    return None


def placed_after(eqns, after, skip=()):
    """eqns with the equations after[i] inserted just after eqns[i] (after[-1]: before the
    first), leaving out the positions in skip."""
    out = list(after.get(-1, ()))
    for i, e in enumerate(eqns):
        if i not in skip:
            out.append(e)
        out.extend(after.get(i, ()))
    return out


def _prune_consts(jaxpr, consts):
    used = {a for e in jaxpr.eqns for a in e.invars if type(a) is Var}
    used.update(a for a in jaxpr.outvars if type(a) is Var)
    keep = [i for i, v in enumerate(jaxpr.constvars) if v in used]
    return (Jaxpr([jaxpr.constvars[i] for i in keep], jaxpr.invars, jaxpr.eqns, jaxpr.outvars),
            [consts[i] for i in keep])


# ---------------------------------------------------------------------------
# dead-code elimination


def dce_jaxpr(jaxpr: Jaxpr, used_outputs=None) -> Jaxpr:
    """Dead-code elimination: drop equations whose outputs nobody reads (keeps effects)."""
    outvars = jaxpr.outvars if used_outputs is None else [
        v for v, u in zip(jaxpr.outvars, used_outputs, strict=True) if u]
    live = {v for v in outvars if type(v) is Var}
    kept = []
    for eqn in reversed(jaxpr.eqns):
        if eqn.primitive.effectful or any(v in live for v in eqn.outvars):
            kept.append(eqn)
            live.update(v for v in eqn.invars if type(v) is Var)
    kept.reverse()
    return Jaxpr(jaxpr.constvars, jaxpr.invars, kept, outvars)


def dce(closed: ClosedJaxpr) -> ClosedJaxpr:
    """dce_jaxpr on a closed jaxpr, also dropping constants nobody reads."""
    jaxpr, consts = _prune_consts(dce_jaxpr(closed.jaxpr), closed.consts)
    return ClosedJaxpr(jaxpr, consts)


# ---------------------------------------------------------------------------
# inlining of call primitives (jit of jit)

# call primitives the lowering inlines into the caller: primitive -> the name of its
# ClosedJaxpr param (higher_order/jit.py registers `jit`; higher_order/custom.py
# `custom_jvp_call`, whose rule no transformation asks for once a program is lowered)
INLINABLE: dict = {}


def inline_calls(closed: ClosedJaxpr) -> ClosedJaxpr:
    """Replace call equations (a nested `jit`, a custom_jvp function) by the equations of
    their jaxprs (so that their operations fuse with the caller's)."""
    if not any(e.primitive in INLINABLE for e in closed.jaxpr.eqns):
        return closed
    constvars = list(closed.jaxpr.constvars)
    consts = list(closed.consts)
    eqns: list = []

    def emit(jaxpr, inner_consts, args):
        """Append jaxpr's equations with fresh vars; return its output atoms."""
        env = {}
        for v, c in zip(jaxpr.constvars, inner_consts, strict=True):
            nv = Var(v.aval)
            constvars.append(nv)
            consts.append(c)
            env[v] = nv
        for v, a in zip(jaxpr.invars, args, strict=True):
            env[v] = a
        for e in jaxpr.eqns:
            ins = [_read(env, a) for a in e.invars]
            if e.primitive in INLINABLE:
                inner = e.params[INLINABLE[e.primitive]]
                outs = emit(inner.jaxpr, inner.consts, ins)
                for v, o in zip(e.outvars, outs, strict=True):
                    env[v] = o
                continue
            outs = [Var(v.aval) for v in e.outvars]
            for v, o in zip(e.outvars, outs):
                env[v] = o
            eqns.append(JaxprEqn(e.primitive, ins, e.params, outs))
        return [_read(env, a) for a in jaxpr.outvars]

    top_env = {}
    for e in closed.jaxpr.eqns:
        ins = [_read(top_env, a) for a in e.invars]
        if e.primitive in INLINABLE:
            inner = e.params[INLINABLE[e.primitive]]
            for v, o in zip(e.outvars, emit(inner.jaxpr, inner.consts, ins), strict=True):
                top_env[v] = o
        else:
            eqns.append(JaxprEqn(e.primitive, ins, e.params, e.outvars))
    outvars = [_read(top_env, a) for a in closed.jaxpr.outvars]
    return ClosedJaxpr(Jaxpr(constvars, closed.jaxpr.invars, eqns, outvars), consts)


# ---------------------------------------------------------------------------
# common-subexpression elimination


def _param_key(params):
    """A hashable key for params, or None when some value is not hashable."""
    items = []
    for k in sorted(params):
        v = params[k]
        try:
            hash(v)
        except TypeError:
            return None
        items.append((k, v))
    return tuple(items)


def _atom_key(a):
    if type(a) is Var:
        return a
    val = np.asarray(a.val)
    return ("lit", val.dtype.str, val.shape, val.tobytes(), a.aval.weak_type)


def _order(key):
    """A total order on atom keys (vars by identity, literals by their bytes)."""
    return (0, id(key), ()) if type(key) is Var else (1, 0, key)


def cse(closed: ClosedJaxpr) -> ClosedJaxpr:
    """Common-subexpression elimination: one equation per (primitive, inputs, params)."""
    env: dict = {}
    seen: dict = {}
    eqns = []
    for e in closed.jaxpr.eqns:
        ins = [_read(env, a) for a in e.invars]
        key = None
        if not e.primitive.effectful:
            pk = _param_key(e.params)
            if pk is not None:
                ks = tuple(_atom_key(a) for a in ins)
                if e.primitive.commutative and _order(ks[1]) < _order(ks[0]):
                    ks = (ks[1], ks[0])         # x * y and y * x are one product
                key = (e.primitive, ks, pk)
        prev = seen.get(key) if key is not None else None
        if prev is not None and all(p.aval == v.aval for p, v in zip(prev, e.outvars)):
            for v, p in zip(e.outvars, prev, strict=True):
                env[v] = p
            continue
        if key is not None:
            seen[key] = e.outvars
        eqns.append(JaxprEqn(e.primitive, ins, e.params, e.outvars))
    j = closed.jaxpr
    outvars = [_read(env, a) for a in j.outvars]
    return ClosedJaxpr(Jaxpr(j.constvars, j.invars, eqns, outvars), closed.consts)


# ---------------------------------------------------------------------------
# constant folding

FOLD_MAX_EXPANSION = 1   # a folded result may be at most this many times its largest input


def fold_constants(closed: ClosedJaxpr) -> ClosedJaxpr:
    """Evaluate, at compile time, equations whose inputs are all known.

    Rank-0 results become literals, others new constants. Equations that would expand
    data (a broadcast of a scalar, iota) are left alone: a big constant costs memory
    bandwidth on every call, while the broadcast is free inside a fusion group."""
    j = closed.jaxpr
    known = dict(zip(j.constvars, closed.consts))
    constvars, consts = list(j.constvars), list(closed.consts)
    env: dict = {}
    eqns = []

    def value(a):
        return np.asarray(a.val) if type(a) is Literal else known.get(a)

    for e in j.eqns:
        ins = [_read(env, a) for a in e.invars]
        vals = [value(a) for a in ins]
        prim = e.primitive
        in_size = max([int(np.size(v)) for v in vals if v is not None] + [1])
        out_size = max(v.aval.size for v in e.outvars) if e.outvars else 0
        if (prim.effectful or prim.impl is None or any(v is None for v in vals)
                or out_size > FOLD_MAX_EXPANSION * in_size):
            eqns.append(JaxprEqn(prim, ins, e.params, e.outvars))
            continue
        try:
            out = prim.impl(array_module(*vals), *vals, **e.params)
        except Exception:            # leave it to run time, where the error is reported
            eqns.append(JaxprEqn(prim, ins, e.params, e.outvars))
            continue
        outs = out if prim.multiple_results else [out]
        for v, o in zip(e.outvars, outs, strict=True):
            xp = array_module(o)
            o = xp.asarray(o).astype(v.aval.dtype, copy=False)
            if o.ndim == 0 and xp is np:
                env[v] = Literal(o, v.aval)
            else:
                nv = Var(v.aval)
                constvars.append(nv)
                consts.append(o)
                known[nv] = o
                env[v] = nv
    outvars = [_read(env, a) for a in j.outvars]
    jaxpr, consts = _prune_consts(Jaxpr(constvars, j.invars, eqns, outvars), consts)
    return ClosedJaxpr(jaxpr, consts)


# ---------------------------------------------------------------------------
# simplification of what AD leaves behind


def _same_aval(a, b):
    return a.shape == b.shape and a.dtype == b.dtype


class _Simplifying:
    """What a primitive's simplify rules see (primitives/base.py): the known constants,
    the (new) equation defining each var, read counts, and the current output aval."""

    __slots__ = ("consts", "defs", "uses", "out")

    def __init__(self, consts, defs, uses):
        self.consts, self.defs, self.uses, self.out = consts, defs, uses, None

    def ok(self, a):
        """May the atom replace the (single) output?"""
        return self.out is not None and _same_aval(a.aval, self.out)

    def src(self, a):
        """The equation defining a var, or None."""
        return self.defs.get(a) if type(a) is Var else None

    def scalar(self, a):
        """The value of a rank-0 known atom, else None."""
        return _scalar_of(a, self.consts)

    def scalar_source(self, a):
        """The rank-0 atom that `a` is a broadcast of, if any."""
        e = self.defs.get(a) if type(a) is Var else None
        if e is not None and e.primitive is broadcast_in_dim_p and \
                e.invars[0].aval.shape == ():
            return e.invars[0]
        return None


def simplify(closed: ClosedJaxpr) -> ClosedJaxpr:
    """Algebraic clean-up: each primitive's declared identities (x*1, x+0, x-0, x/1,
    neg(neg x), identity reshapes, transposes, broadcasts and conversions, transpose of
    transpose, stop_gradient, the transpose of a matrix product, ...), and broadcasts of
    scalars feeding elementwise ops (the scalar is used directly).

    x + 0 -> x turns -0.0 + 0.0 (= +0.0) into -0.0; nothing else changes a value."""
    j = closed.jaxpr
    env: dict = {}
    defs: dict = {}                 # var -> the (new) equation defining it
    s = _Simplifying(dict(zip(j.constvars, closed.consts)), defs, _uses(j))
    eqns: list = []
    for e in j.eqns:
        ins = [_read(env, a) for a in e.invars]
        res = _simplify_eqn(e, ins, s)
        if res is None:
            new = [JaxprEqn(e.primitive, ins, e.params, e.outvars)]
        elif isinstance(res, JaxprEqn):
            new = [res]
        elif isinstance(res, list):
            new = res
        else:                                   # an atom replacing the single output
            env[e.outvars[0]] = res
            continue
        for n in new:
            eqns.append(n)
            for v in n.outvars:
                defs[v] = n
    outvars = [_read(env, a) for a in j.outvars]
    return ClosedJaxpr(Jaxpr(j.constvars, j.invars, eqns, outvars), closed.consts)


def _simplify_eqn(e, ins, s):
    """None (keep), an atom (replaces the output) or new equation(s): the primitive's
    simplify rule, then broadcasts of scalars folded into elementwise operands, then its
    simplify_late rule on those operands."""
    prim = e.primitive
    out = s.out = e.outvars[0].aval if len(e.outvars) == 1 else None
    p = e.params
    if prim.simplify is not None:
        res = prim.simplify(e, ins, s)
        if res is not None:
            return res
    operands = ins
    if prim.elementwise and out is not None and out.shape != ():
        # every operand a scalar or a broadcast of one: compute on scalars, then broadcast
        srcs = [a if a.aval.shape == () else s.scalar_source(a) for a in ins]
        if all(a is not None for a in srcs) and any(a.aval.shape != () for a in ins):
            try:
                sc = prim.abstract_eval(*[a.aval for a in srcs], **p)
            except Exception:
                sc = None
            if sc is not None and sc.shape == () and sc.dtype == out.dtype:
                tmp = Var(sc)
                bcast = next(s.defs[a].primitive for a in ins if a.aval.shape != ())
                return [JaxprEqn(prim, srcs, p, [tmp]),
                        JaxprEqn(bcast, [tmp], {"shape": out.shape, "broadcast_dimensions": ()},
                                 e.outvars)]
        # a broadcast of a scalar feeding an elementwise op: use the scalar itself
        new_ins = list(ins)
        for i, a in enumerate(ins):
            src = s.scalar_source(a)
            if src is None:
                continue
            trial = new_ins[:i] + [src] + new_ins[i + 1:]
            if any(b.aval.shape == out.shape for b in trial):
                new_ins = trial
        if any(a is not b for a, b in zip(new_ins, ins)):
            try:
                got = prim.abstract_eval(*[a.aval for a in new_ins], **p)
            except Exception:
                got = None
            if got is not None and _same_aval(got, out):
                ins = new_ins
    if prim.simplify_late is not None:
        res = prim.simplify_late(e, ins, s)
        if res is not None:
            return res
    if ins is not operands:
        return JaxprEqn(prim, ins, p, e.outvars)
    return None


# ---------------------------------------------------------------------------
# sums of batched products as contractions


def contract_sums(closed: ClosedJaxpr) -> ClosedJaxpr:
    """A reduce_sum over batch axes of a dot_general that only it reads becomes that
    dot_general with those axes contracted: sum_t x[t] @ y[t] is one product over t and
    the inner axis together (one GEMM when the operands are laid out for it), not a
    product per t written out and summed. This is what the cotangent of a matrix applied
    at every step or batch index looks like (a weight broadcast along the batch axes, the
    per-step products of a scan's hoisted accumulation). The rule sees through what a
    cotangent leaves between the product and the sum: a transpose that only the sum
    reads (summed first, the smaller result transposed), a sum (one sum), and an add
    of such a term and others (each summed, then added)."""
    j = closed.jaxpr
    uses = _uses(j)
    defs: dict = {}
    eqns: list = []
    changed = False
    for e in j.eqns:
        new = None
        if e.primitive is reduce_sum_p and type(e.invars[0]) is Var:
            new = _sum_of(e.invars[0], tuple(e.params["axes"]), e.outvars[0], defs, uses)
        if new is None:
            new = [e]
        else:
            changed = True
        for n in new:
            eqns.append(n)
            for v in n.outvars:
                defs[v] = n
    if not changed:
        return closed
    return dce(ClosedJaxpr(Jaxpr(j.constvars, j.invars, eqns, j.outvars), closed.consts))


_SUM_DEPTH = 64      # how far _sum_of looks through transposes, sums and adds


def _sum_of(v, axes, out, defs, uses, depth=0):
    """Equations computing out = reduce_sum(v, axes) with the sum moved into v's
    producer (a single-use transpose, reduce_sum, dot_general, or an add with such a
    term), or None when there is nothing to move. It looks _SUM_DEPTH producers deep at
    most (a chain of thousands of adds, the cotangents of as many uses, stays as it is)."""
    d = defs.get(v)
    if d is None or uses.get(v, 0) != 1 or not axes or depth > _SUM_DEPTH:
        return None
    depth += 1
    if d.primitive is transpose_p:
        perm = d.params["permutation"]
        u = d.invars[0]
        kept = [i for i in range(len(perm)) if i not in axes]
        u_axes = tuple(sorted(perm[a] for a in axes))
        u_kept = sorted(perm[i] for i in kept)
        perm2 = tuple(u_kept.index(perm[i]) for i in kept)
        if perm2 == tuple(range(len(perm2))):
            summed = _sum_of(u, u_axes, out, defs, uses, depth)
            return summed if summed is not None else [
                JaxprEqn(reduce_sum_p, [u], {"axes": u_axes}, [out])]
        mid = Var(ShapedArray(tuple(u.aval.shape[i] for i in u_kept), out.aval.dtype,
                              out.aval.weak_type))
        summed = _sum_of(u, u_axes, mid, defs, uses, depth)
        if summed is None:
            summed = [JaxprEqn(reduce_sum_p, [u], {"axes": u_axes}, [mid])]
        return summed + [JaxprEqn(transpose_p, [mid], {"permutation": perm2}, [out])]
    if d.primitive is add_p and all(type(a) is Var and a.aval.shape == v.aval.shape
                                    for a in d.invars):
        # a sum of a sum of terms, where a term gains from it: the sum of each term
        parts = [Var(out.aval) for _ in d.invars]
        moved = [_sum_of(a, axes, p, defs, uses, depth) for a, p in zip(d.invars, parts)]
        if all(m is None for m in moved):
            return None
        eqns = [n for a, p, m in zip(d.invars, parts, moved)
                for n in (m or [JaxprEqn(reduce_sum_p, [a], {"axes": axes}, [p])])]
        return eqns + [JaxprEqn(add_p, parts, {}, [out])]
    if d.primitive is reduce_sum_p:             # a sum of a sum: one sum
        inner = d.params["axes"]
        kept = [i for i in range(d.invars[0].aval.ndim) if i not in inner]
        both = tuple(sorted(tuple(inner) + tuple(kept[a] for a in axes)))
        return _sum_of(d.invars[0], both, out, defs, uses, depth) or [
            JaxprEqn(reduce_sum_p, [d.invars[0]], {"axes": both}, [out])]
    if d.primitive is not dot_general_p:
        return None
    (lc, rc), (lb, rb) = d.params["dimension_numbers"]
    moved = [i for i in axes if i < len(lb)]
    if not moved:
        return None
    x, y = d.invars
    pairs = sorted(list(zip(lc, rc)) + [(lb[i], rb[i]) for i in moved])   # lhs axis order
    dn = ((tuple(a for a, _ in pairs), tuple(b for _, b in pairs)),
          (tuple(b for i, b in enumerate(lb) if i not in moved),
           tuple(b for i, b in enumerate(rb) if i not in moved)))
    rest = tuple(a - sum(1 for m in moved if m < a) for a in axes if a not in moved)
    if not rest:
        return [JaxprEqn(dot_general_p, [x, y], {"dimension_numbers": dn}, [out])]
    mid = Var(dot_general_p.abstract_eval(x.aval, y.aval, dimension_numbers=dn))
    return [JaxprEqn(dot_general_p, [x, y], {"dimension_numbers": dn}, [mid]),
            JaxprEqn(reduce_sum_p, [mid], {"axes": rest}, [out])]



# ---------------------------------------------------------------------------
# buffer reuse (liveness)


class BufferPlan:
    """Where each value lives at run time.

    slot_of[var] = k for the values a backend writes into a buffer it owns (`out=`);
    slots[k] = (shape, dtype); escapes[k]: the slot holds a program output, so it is
    allocated per call (never a persistent scratch buffer); donor[k] = i when slot k is
    the donated argument i's own buffer. copy_out[i]: output i aliases an input, a
    constant or an earlier output and must be copied before it is returned."""

    def __init__(self):
        self.slot_of: dict = {}
        self.slots: list = []
        self.escapes: list = []
        self.donor: list = []
        self.copy_out: list = []
        self.inplace: list = []     # (eqn index, output var, input var) written in place

    @property
    def num_scratch(self):
        return sum(1 for e, d in zip(self.escapes, self.donor) if not e and d is None)

    def __repr__(self):
        return (f"BufferPlan({len(self.slots)} slots, {self.num_scratch} scratch, "
                f"{len(self.inplace)} in place, {sum(self.copy_out)} copied outputs)")


def plan_buffers(jaxpr: Jaxpr, kind, inplace=None, donated=(), outputs_external=False):
    """Assign buffers by liveness: a buffer whose values are all dead is reused by a
    later value of the same shape and dtype.

    kind(eqn) -> "out" (the backend writes the outputs into buffers of this plan),
    "view" (the outputs may alias the inputs) or "fresh" (the outputs are new arrays);
    inplace(eqn, in_index, out_index) -> whether that output may overwrite that input
    when the input dies at this equation; donated[i]: argument i's buffer may be reused.
    outputs_external: the jaxpr's outputs are written into buffers given by the caller
    (a fusion group's block outputs), so they get no slot."""
    plan = BufferPlan()
    eqns = jaxpr.eqns
    n = len(eqns)
    last = {}
    for i, e in enumerate(eqns):
        for a in e.invars:
            if type(a) is Var:
                last[a] = i
    for a in jaxpr.outvars:
        if type(a) is Var:
            last[a] = n
    kinds = [kind(e) for e in eqns]
    # values that outputs may alias must not live in persistent scratch buffers
    escaping = {a for a in jaxpr.outvars if type(a) is Var}
    for e, k in zip(reversed(eqns), reversed(kinds)):
        if k == "view" and any(v in escaping for v in e.outvars):
            escaping.update(a for a in e.invars if type(a) is Var)
    external = set(escaping) if outputs_external else set()

    roots: dict = {}                # var -> tuple of roots ("slot", k) / ("in", i) / ...
    direct: set = set()             # vars that are exactly their slot's buffer (no view)
    refs: dict = {}                 # root -> number of live vars holding it
    free: dict = {}                 # (shape, dtype) -> list of free slot ids
    donated = list(donated) + [False] * (len(jaxpr.invars) - len(donated))

    def hold(v, rs):
        roots[v] = rs
        for r in rs:
            refs[r] = refs.get(r, 0) + 1

    def release(v):
        for r in roots.pop(v, ()):
            refs[r] -= 1
            if refs[r] == 0 and r[0] == "slot" and not plan.escapes[r[1]]:
                k = r[1]
                free.setdefault(plan.slots[k], []).append(k)

    def new_slot(aval, donor=None):
        plan.slots.append((aval.shape, aval.dtype))
        plan.escapes.append(False)
        plan.donor.append(donor)
        return len(plan.slots) - 1

    for i, v in enumerate(jaxpr.invars):
        if donated[i] and v.aval.shape != ():
            k = new_slot(v.aval, donor=i)
            hold(v, (("slot", k),))
            direct.add(v)
        else:
            hold(v, (("in", i),))
    for i, v in enumerate(jaxpr.constvars):
        hold(v, (("const", i),))
    for v in list(roots):
        if v not in last:
            release(v)

    for i, e in enumerate(eqns):
        k = kinds[i]
        dying = []
        for a in e.invars:
            if type(a) is Var and last.get(a) == i and a not in dying:
                dying.append(a)
        if k == "out":
            taken = set()
            for oi, o in enumerate(e.outvars):
                if o in external:
                    hold(o, ())
                    continue
                slot = None
                if inplace is not None:
                    for ii, a in enumerate(e.invars):
                        if (a in dying and a not in taken and a in direct
                                and plan.slots[roots[a][0][1]] == (o.aval.shape, o.aval.dtype)
                                and refs[roots[a][0]] == 1 and inplace(e, ii, oi)):
                            slot = roots[a][0][1]
                            if plan.escapes[slot] and o not in escaping:
                                slot = None
                                continue
                            taken.add(a)
                            plan.inplace.append((i, o, a))
                            break
                if slot is None:
                    pool = free.get((o.aval.shape, o.aval.dtype))
                    if pool:
                        # escaping values prefer donated buffers, temporaries plain ones
                        pick = next((s for s in reversed(pool)
                                     if (plan.donor[s] is not None) == (o in escaping)),
                                    pool[-1])
                        pool.remove(pick)
                        slot = pick
                    else:
                        slot = new_slot(o.aval)
                if o in escaping:
                    plan.escapes[slot] = True
                plan.slot_of[o] = slot
                hold(o, (("slot", slot),))
                direct.add(o)
            for a in taken:        # their slot passed to the output: drop without freeing
                for r in roots.pop(a):
                    refs[r] -= 1
        elif k == "view":
            rs = tuple(sorted({r for a in e.invars if type(a) is Var for r in roots.get(a, ())}))
            for o in e.outvars:
                hold(o, rs)
        else:
            for o in e.outvars:
                hold(o, (("fresh", id(o)),))
        for a in dying:
            if a in roots:
                release(a)
        for o in e.outvars:
            if o not in last:
                release(o)

    seen_roots: set = set()
    for a in jaxpr.outvars:
        if type(a) is not Var or outputs_external:
            plan.copy_out.append(False)
            continue
        rs = roots.get(a, ())
        bad = any(r[0] in ("in", "const") for r in rs) or bool(seen_roots.intersection(rs))
        plan.copy_out.append(bad)
        seen_roots.update(rs)
    return plan


# ---------------------------------------------------------------------------
# sums of zero pads: one concatenation


def _pad_piece(e, consts):
    """(axis, ((start, stop, x),)) when pad equation e places x into zeros along one axis
    (no interior padding), else None."""
    x, value = e.invars
    if _scalar_of(value, consts) != 0:
        return None
    cfg = e.params["padding_config"]
    axes = [k for k, (lo, hi, it) in enumerate(cfg) if (lo, hi) != (0, 0)]
    if any(it for _, _, it in cfg) or len(axes) != 1 or any(min(c) < 0 for c in cfg):
        return None
    k = axes[0]
    lo = cfg[k][0]
    return k, ((lo, lo + x.aval.shape[k], x),)


def merge_pads(closed: ClosedJaxpr) -> ClosedJaxpr:
    """A sum of zero pads of pieces that do not overlap along one axis (the cotangent of
    an array read as slices: an LSTM's four gates) becomes one concatenation of the
    pieces, zeros filling the gaps: one write of the result instead of a zero-filled
    array per piece and an addition per pair. Only sums whose terms are read once are
    merged; the pads left unread go at the next dce. Values are unchanged except that a
    -0.0 piece stays -0.0 (as x + 0 -> x does)."""
    j = closed.jaxpr
    if not any(e.primitive is pad_p for e in j.eqns):
        return closed
    consts = dict(zip(j.constvars, closed.consts))
    uses = _uses(j)
    pieces: dict = {}          # var -> (axis, pieces sorted by start)
    pending: dict = {}         # merged sums not written yet: var -> True
    eqns: list = []

    def write(v):
        k, ps = pieces[v]
        shape, dt = v.aval.shape, v.aval.dtype
        parts, at = [], 0
        for start, stop, x in ps + ((shape[k], shape[k], None),):
            if start > at:
                z = Var(ShapedArray(shape[:k] + (start - at,) + shape[k + 1:], dt))
                eqns.append(JaxprEqn(broadcast_in_dim_p, [Literal(np.zeros((), dt))],
                                     {"shape": z.aval.shape, "broadcast_dimensions": ()}, [z]))
                parts.append(z)
            if x is not None:
                parts.append(x)
            at = stop
        eqns.append(JaxprEqn(concatenate_p, parts, {"dimension": k}, [v]))
        del pending[v]

    for e in j.eqns:
        if e.primitive is pad_p:
            pc = _pad_piece(e, consts)
            if pc is not None:
                pieces[e.outvars[0]] = pc
        elif e.primitive is add_p and len(e.invars) == 2:
            a, b = e.invars
            pa, pb = pieces.get(a), pieces.get(b) if type(b) is Var else None
            out = e.outvars[0]
            if pa is not None and pb is not None and pa[0] == pb[0] and uses.get(a) == 1 \
                    and uses.get(b) == 1 and a.aval == b.aval == out.aval:
                merged = tuple(sorted(pa[1] + pb[1], key=lambda t: t[0]))
                if all(p[1] <= q[0] for p, q in zip(merged, merged[1:])):
                    pieces[out] = (pa[0], merged)
                    pending[out] = True
                    pending.pop(a, None)
                    pending.pop(b, None)
                    continue
        for a in e.invars:
            if type(a) is Var and a in pending:
                write(a)
        eqns.append(e)
    for a in j.outvars:
        if type(a) is Var and a in pending:
            write(a)
    return ClosedJaxpr(Jaxpr(j.constvars, j.invars, eqns, j.outvars), closed.consts)


# ---------------------------------------------------------------------------
# the pipeline


def optimize(closed: ClosedJaxpr, max_rounds=3) -> ClosedJaxpr:
    """inline_calls, then simplify / contract_sums / merge_pads / fold_constants / cse /
    dce until nothing changes."""
    closed = dce(inline_calls(closed))
    for _ in range(max_rounds):
        before = (len(closed.jaxpr.eqns), len(closed.consts))
        closed = dce(cse(fold_constants(merge_pads(contract_sums(simplify(closed))))))
        if (len(closed.jaxpr.eqns), len(closed.consts)) == before:
            break
    return closed

