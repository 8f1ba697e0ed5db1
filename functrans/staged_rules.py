"""Transformation rules staged once per abstract signature: wrappers around a rule.

A batching or JVP rule applied to concrete arrays is a pure function of the operands'
avals, the primitive's params and the rule's static inputs (batch axes; which tangents are
symbolically zero). `jvp_rule(prim)` and `batch_rule(prim)` return the primitive's rule
wrapped so that its first application to a signature traces it into a jaxpr (type-checked
by the shape rules as it is traced) compiled to straight-line code; later applications
with the same signature call that code, skipping the rule's Python and the shape checks.
With tracer operands (or for effects) the wrapped rule is the rule itself."""
from __future__ import annotations

from .core import Zero, array_module, get_aval, has_tracer
from .backends.memory import DERIVED, EQN_BYTES
from .runtime import straight_line
from .tracing import trace_to_jaxpr

_wrapped: dict = {}     # (kind, primitive) -> (its rule, the wrapped rule)


def signature(prim, params, vals, static):
    """Cache key of applying prim's rule to `vals`, or None when it cannot be staged
    (tracer operands, effects); `lookup` declines keys that are not hashable."""
    if prim.effectful or has_tracer(vals):
        return None
    return (prim, tuple(params.items()), tuple([get_aval(v) for v in vals]), static)


def lookup(key, rule):
    """The staged form of `rule` (a function of a list of operands returning
    (flat outputs, aux)) for a `signature` key: (run, aux), or False if it cannot be
    staged."""
    key = ("staged rule", key)
    try:
        entry = DERIVED.get(key)
    except TypeError:                   # params that are not hashable
        return False
    if entry is None:
        entry, n_eqns = _stage(rule, list(key[1][2]))
        DERIVED.put(key, entry, EQN_BYTES * (n_eqns + 1))
    return entry


def staged(key):
    """The staged entry of a `signature` key, if one is cached (tests)."""
    return DERIVED.get(("staged rule", key))


def call(entry, vals):
    run, _ = entry
    return run(array_module(*vals), *vals)


def _stage(rule, avals):
    aux = []

    def flat(*xs):
        outs, a = rule(list(xs))
        aux.append(a)
        return outs
    try:
        jaxpr, consts = trace_to_jaxpr(flat, avals)
    except Exception:       # e.g. a rule that needs concrete values: keep running it as is
        return False, 0
    if consts:
        return False, 0
    return (straight_line(jaxpr), aux[0]), len(jaxpr.eqns)


def jvp_rule(prim):
    """prim.jvp, staged: (primals, tangents, **params) -> (primal out, tangent out), the
    tangents that are symbolic zeros staying Zero."""
    hit = _wrapped.get(("jvp", prim))
    if hit is None or hit[0] is not prim.jvp:
        hit = _wrapped[("jvp", prim)] = (prim.jvp, _staged_jvp(prim, prim.jvp))
    return hit[1]


def batch_rule(prim):
    """prim.batch, staged: (vals, dims, **params) -> (out, out_dim)."""
    hit = _wrapped.get(("batch", prim))
    if hit is None or hit[0] is not prim.batch:
        hit = _wrapped[("batch", prim)] = (prim.batch, _staged_batch(prim, prim.batch))
    return hit[1]


def _staged_jvp(prim, rule):
    multiple = prim.multiple_results

    def flat(xs, tangents, params):
        """The rule as a function of (primals, nonzero tangents) -> (primal outputs +
        nonzero tangent outputs, (number of primal outputs, the symbolic-zero tangents));
        the zero tangents are those of the call being staged (they hold only avals)."""
        it = iter(xs[len(tangents):])
        ts = [t if type(t) is Zero else next(it) for t in tangents]
        p_out, t_out = rule(list(xs[:len(tangents)]), ts, **params)
        p_out = list(p_out) if multiple else [p_out]
        t_out = list(t_out) if multiple else [t_out]
        zeros_out = tuple([t if type(t) is Zero else None for t in t_out])
        return p_out + [t for t in t_out if type(t) is not Zero], (len(p_out), zeros_out)

    def jvp(primals, tangents, **params):
        nonzero = tuple([type(t) is not Zero for t in tangents])
        vals = primals + [t for t, nz in zip(tangents, nonzero) if nz]
        key = signature(prim, params, vals, nonzero)
        entry = key is not None and lookup(key, lambda xs: flat(xs, tangents, params))
        if not entry:
            return rule(primals, tangents, **params)
        outs = call(entry, vals)
        n, zeros_out = entry[1]
        it = iter(outs[n:])
        t_out = [z if z is not None else next(it) for z in zeros_out]
        return (outs[:n], t_out) if multiple else (outs[0], t_out[0])
    return jvp


def _staged_batch(prim, rule):
    multiple = prim.multiple_results

    def flat(vals, dims, params):
        out, out_dim = rule(vals, dims, **params)
        return (list(out) if multiple else [out]), out_dim

    def batch(vals, dims, **params):
        key = signature(prim, params, vals, tuple(dims))
        entry = key is not None and lookup(key, lambda xs: flat(xs, dims, params))
        if not entry:
            return rule(vals, dims, **params)
        outs = call(entry, vals)
        return (outs if multiple else outs[0]), entry[1]
    return batch
