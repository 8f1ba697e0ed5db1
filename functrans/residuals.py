"""What the forward saves for the backward: passes over a partial evaluation's
(known, unknown, num_res), where known maps the inputs to its outputs and then `num_res`
residuals, and unknown maps the residuals and then the tangents to the tangent outputs,
linear in the tangents. ft.compile runs them on the split of its forward's JVP
(compiler/capture.py); each keeps the tangents' values, up to reassociation where it says
so, and returns a new triple.

Every residual is written by the forward and read back by the backward, usually from
memory rather than cache: the bench's GPT saved 42.6 MB a training step. These passes save
fewer and smaller values.
"""
from __future__ import annotations

import numpy as np

from .core import ClosedJaxpr, Jaxpr, JaxprEqn, Literal, Var
from .passes import dce, dce_jaxpr, placed_after
from .primitives.elementwise import add_p, mul_p, neg_p, sub_p
from .primitives.shape import (broadcast_in_dim_p, expand_dims_p, reshape_p, slice_p,
                               squeeze_p, transpose_p)


def unbroadcast_residuals(known: ClosedJaxpr, unknown: ClosedJaxpr, num_res: int):
    """A residual the known side makes as a broadcast of a smaller value is that value
    instead, broadcast again by the unknown side (a literal's broadcast is no residual at
    all): the known side writes no broadcast copy for the other to read back. ft.compile's
    GPT wrote 7.5 MB a step of them, of 42.6 MB of residuals (a LayerNorm's 1 / std per row
    over its 128 columns, the causal mask over the batch and heads); its one-thread step
    ran 2-9% faster without. Recomputing cheap elementwise residuals as well (a residual
    times such a broadcast, a product of two residuals: 26.3 MB left) made it 4-8% slower:
    the recomputed arrays did not fuse into the backward's groups. The values are the
    same."""
    kj, uj = known.jaxpr, unknown.jaxpr
    n_known = len(kj.outvars) - num_res
    defs = {v: e for e in kj.eqns for v in e.outvars}
    res, uin, pre = [], [], []
    for a, u in zip(kj.outvars[n_known:], uj.invars[:num_res], strict=True):
        e = defs.get(a) if type(a) is Var else None
        if e is None or e.primitive is not broadcast_in_dim_p or \
                e.invars[0].aval.size >= a.aval.size:
            res.append(a)
            uin.append(u)
            continue
        x = e.invars[0]
        if type(x) is not Literal:
            res.append(x)
            uin.append(Var(x.aval))
            x = uin[-1]
        pre.append(JaxprEqn(broadcast_in_dim_p, [x], e.params, [u]))
    if not pre:
        return known, unknown, num_res
    return _resaved(known, unknown, num_res, res, uin, pre)


def _resaved(known, unknown, num_res, res, uin, pre):
    """The triple with the known side's residuals `res` (after its other outputs), read by
    the unknown side as `uin`, which first runs the equations `pre` (what it makes again
    from them: the residuals it read before)."""
    kj, uj = known.jaxpr, unknown.jaxpr
    n_known = len(kj.outvars) - num_res
    known = ClosedJaxpr(Jaxpr(kj.constvars, kj.invars, kj.eqns, list(kj.outvars[:n_known]) + res),
                        known.consts)
    unknown = ClosedJaxpr(Jaxpr(uj.constvars, uin + list(uj.invars[num_res:]), pre + list(uj.eqns),
                                uj.outvars), unknown.consts)
    return known, unknown, len(res)


# the shape operations NumPy answers with a view of their operand
_VIEWS = (reshape_p, transpose_p, slice_p, squeeze_p, expand_dims_p)


def unview_residuals(known: ClosedJaxpr, unknown: ClosedJaxpr, num_res: int):
    """Residuals the known side makes as views of one value (slices, reshapes, transposes
    of it: attention's q, k and v, split out of one product and cut into heads) are saved
    as that value, once, when the views cover it, and the unknown side takes the views
    again: the known side returns one array instead of several that share its memory
    (outputs that share memory are copied before they are returned, two of the three per
    attention block). The values are the same."""
    kj, uj = known.jaxpr, unknown.jaxpr
    n_known = len(kj.outvars) - num_res
    defs = {v: e for e in kj.eqns for v in e.outvars}
    chains, by_base = {}, {}
    for i, a in enumerate(kj.outvars[n_known:]):
        chain, b = [], a
        while type(b) is Var and b in defs and defs[b].primitive in _VIEWS:
            chain.append(defs[b])
            b = defs[b].invars[0]
        if chain and type(b) is Var:
            chains[i] = (b, chain[::-1])
            by_base.setdefault(b, []).append(i)
    saved = set(kj.outvars)
    take = {i for base, idx in by_base.items() for i in idx
            if base in saved or sum(kj.outvars[n_known + j].aval.size for j in idx)
            >= base.aval.size}
    if not take:
        return known, unknown, num_res
    res, uin, pre, base_in = [], [], [], {}
    for i, (a, u) in enumerate(zip(kj.outvars[n_known:], uj.invars[:num_res], strict=True)):
        if i not in take:
            res.append(a)
            uin.append(u)
            continue
        base, chain = chains[i]
        if base not in base_in:
            base_in[base] = Var(base.aval)
            res.append(base)
            uin.append(base_in[base])
        x = base_in[base]
        for k, e in enumerate(chain):
            y = u if k == len(chain) - 1 else Var(e.outvars[0].aval)
            pre.append(JaxprEqn(e.primitive, [x], e.params, [y]))
            x = y
    return _resaved(known, unknown, num_res, res, uin, pre)


# ---------------------------------------------------------------------------
# tangent scales

_MOST_TERMS = 16        # a longer sum is left as it is (x + x repeated doubles its terms)


def fold_tangent_scales(known: ClosedJaxpr, unknown: ClosedJaxpr, num_res: int):
    """An elementwise expression on the unknown side that is one tangent `t` times a sum of
    products of residuals, `t * a * b + c * (t * d)`, becomes `t * k` with the scale
    `k = a * b + c * d` computed by the known side, when that saves residuals: the
    residuals read only by the expression are no longer saved, `k` is saved instead.

    Exact GELU's JVP is `t * 0.5 * (1 + erf(h / sqrt 2)) + 0.5 * h * (t / sqrt 2 * 2 /
    sqrt pi * exp(-h * h / 2))`: three arrays the size of the MLP's hidden layer saved
    (2 MB each in the bench's GPT, per block), read back by a backward that multiplies
    the cotangent by them; with this, the forward writes gelu'(h) once and the backward
    reads that. Only an expression over same-shape and scalar values of one dtype is
    folded (mul, add, sub and neg, and scalar literals); the scale adds its terms in the
    expression's order, so the tangents change in their last bits (reassociated
    products), as they would between two orders of the forward's own operations."""
    kj, uj = known.jaxpr, unknown.jaxpr
    n_known = len(kj.outvars) - num_res
    res_in = uj.invars[:num_res]
    is_res = set(res_in)
    readers: dict = {}
    for e in uj.eqns:
        for a in e.invars:
            if type(a) is Var:
                readers.setdefault(a, []).append(e)
    for a in uj.outvars:
        if type(a) is Var:
            readers.setdefault(a, []).append(None)

    # v -> (base, terms, members): v == base * sum(c * prod(atoms) for c, atoms in terms),
    # members: the equations that compute v from base and the atoms
    form: dict = {}

    def of(a, shape, dtype):
        """a as (base, terms, members) when it is a tangent-side var of this shape."""
        if type(a) is not Var or a in is_res or a.aval.shape != shape or \
                a.aval.dtype != dtype:
            return None
        return form.get(a) or (a, (((1.0, ()),)), ())

    def scale(a, shape, dtype):
        """a as (coefficient, atoms) when it is a known factor: a scalar literal (folded
        into the coefficient), or a residual of this shape or a scalar one."""
        if a.aval.dtype != dtype:
            return None
        if type(a) is Literal:
            return (float(a.val), ()) if np.ndim(a.val) == 0 else None
        if a in is_res and a.aval.shape in ((), shape):
            return (1.0, (a,))
        return None

    for e in uj.eqns:
        if e.primitive not in (mul_p, add_p, sub_p, neg_p) or len(e.outvars) != 1:
            continue
        out = e.outvars[0]
        shape, dtype = out.aval.shape, out.aval.dtype
        if not np.issubdtype(dtype, np.floating):
            continue
        if e.primitive is neg_p:
            x = of(e.invars[0], shape, dtype)
            if x is not None:
                form[out] = (x[0], tuple((-c, p) for c, p in x[1]), x[2] + (e,))
        elif e.primitive is mul_p:
            for i in (0, 1):
                x, k = of(e.invars[i], shape, dtype), scale(e.invars[1 - i], shape, dtype)
                if x is not None and k is not None:
                    form[out] = (x[0], tuple((c * k[0], p + k[1]) for c, p in x[1]),
                                 x[2] + (e,))
                    break
        else:
            x, y = of(e.invars[0], shape, dtype), of(e.invars[1], shape, dtype)
            if x is not None and y is not None and x[0] is y[0] and \
                    len(x[1]) + len(y[1]) <= _MOST_TERMS:
                sign = -1.0 if e.primitive is sub_p else 1.0
                members = {id(m): m for m in x[2] + y[2]}
                form[out] = (x[0], x[1] + tuple((sign * c, p) for c, p in y[1]),
                             tuple(members.values()) + (e,))

    # the largest expressions: a var whose reader does not extend it
    roots = [v for v, f in form.items()
             if any(r is None or r.outvars[0] not in form for r in readers.get(v, ()))]
    res_uses = {a: len(readers.get(a, ())) for a in res_in}
    replace, new_res = {}, []               # root -> its equation; the scales' residuals
    for v in roots:
        base, terms, members = form[v]
        ids = set(map(id, members))
        inner = [e.outvars[0] for e in members if e.outvars[0] is not v]
        if any(r is None or id(r) not in ids for w in inner for r in readers.get(w, ())):
            continue                        # a partial value is read elsewhere
        atoms = {a for _, p in terms for a in p}
        within = {a: sum(1 for e in members for b in e.invars if b is a) for a in atoms}
        freed = [a for a in atoms if within[a] == res_uses[a]]
        big = v.aval.shape != () and any(a.aval.shape != () for a in atoms)
        if not big or sum(a.aval.size for a in freed if a.aval.shape != ()) <= v.aval.size:
            continue                        # (a scalar residual costs nothing to save)
        k = Var(v.aval)
        replace[v] = JaxprEqn(mul_p, [base, k], {}, [v])
        new_res.append((k, terms))
    if not replace:
        return known, unknown, num_res

    # the known side computes each scale after the last of its residuals is made
    known_of = dict(zip(res_in, kj.outvars[n_known:]))
    where = {v: i for i, e in enumerate(kj.eqns) for v in e.outvars}
    after: dict = {}
    scales = []
    for k, terms in new_res:
        eqns, kv = _sum_of_products(terms, known_of, k.aval)
        last = max((where.get(known_of[a], -1) for _, p in terms for a in p), default=-1)
        after.setdefault(last, []).extend(eqns)
        scales.append(kv)
    keqns = placed_after(kj.eqns, after)
    ueqns = []
    for e in uj.eqns:
        if e.outvars and e.outvars[0] in replace:
            ueqns.append(replace[e.outvars[0]])
        else:
            ueqns.append(e)
    uj2 = dce_jaxpr(Jaxpr(uj.constvars, list(res_in) + [k for k, _ in new_res]
                          + list(uj.invars[num_res:]), ueqns, uj.outvars))
    # residuals nobody reads any more are no longer saved
    used = {a for e in uj2.eqns for a in e.invars if type(a) is Var}
    used.update(a for a in uj2.outvars if type(a) is Var)
    ins = list(res_in) + [k for k, _ in new_res]
    outs = list(kj.outvars[n_known:]) + scales
    keep = [i for i, a in enumerate(ins) if a in used]
    known = ClosedJaxpr(Jaxpr(kj.constvars, kj.invars, keqns, list(kj.outvars[:n_known])
                              + [outs[i] for i in keep]), known.consts)
    unknown = ClosedJaxpr(Jaxpr(uj2.constvars, [ins[i] for i in keep]
                                + list(uj.invars[num_res:]), uj2.eqns, uj2.outvars),
                          unknown.consts)
    return dce(known), unknown, len(keep)


def _sum_of_products(terms, known_of, aval):
    """Equations computing sum(c * prod(atoms)) on the known side (atoms mapped through
    known_of), in the terms' order, and the var holding it."""
    eqns = []

    def bind(prim, *args):
        v = Var(aval.update(shape=max((a.aval.shape for a in args), key=len)))
        eqns.append(JaxprEqn(prim, list(args), {}, [v]))
        return v

    total = None
    for c, atoms in terms:
        prod = None
        for a in atoms:
            prod = known_of[a] if prod is None else bind(mul_p, prod, known_of[a])
        if prod is None:
            prod = Literal(np.asarray(abs(c), aval.dtype))
        elif abs(c) != 1.0:
            prod = bind(mul_p, prod, Literal(np.asarray(abs(c), aval.dtype)))
        if total is None:
            total = prod if c > 0 else bind(neg_p, prod)
        else:
            total = bind(add_p if c > 0 else sub_p, total, prod)
    return eqns, total
