"""Transformation rules staged once per abstract signature.

A batching or JVP rule applied to concrete arrays is a pure function of the operands'
avals, the primitive's params and the rule's static inputs (batch axes; which tangents are
symbolically zero). The first application traces the rule into a jaxpr (type-checked by
the shape rules as it is traced) and compiles it to straight-line code; later applications
with the same signature call that code, skipping the rule's Python and the shape checks."""
from __future__ import annotations

from .core import array_module, get_aval, has_tracer
from .runtime import straight_line

_cache: dict = {}
_MAX_ENTRIES = 4096


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
    try:
        entry = _cache.get(key)
    except TypeError:                   # params that are not hashable
        return False
    if entry is None:
        if len(_cache) >= _MAX_ENTRIES:
            _cache.clear()
        entry = _cache[key] = _stage(rule, list(key[2]))
    return entry


def call(entry, vals):
    run, _ = entry
    return run(array_module(*vals), *vals)


def _stage(rule, avals):
    from .tracing import trace_to_jaxpr
    aux = []

    def flat(*xs):
        outs, a = rule(list(xs))
        aux.append(a)
        return outs
    try:
        jaxpr, consts = trace_to_jaxpr(flat, avals)
    except Exception:       # e.g. a rule that needs concrete values: keep running it as is
        return False
    if consts:
        return False
    return straight_line(jaxpr), aux[0]
