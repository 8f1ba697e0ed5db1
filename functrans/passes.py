"""Jaxpr-to-jaxpr optimization passes, each a small function with its own tests."""
from __future__ import annotations

from .core import Jaxpr, Var


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
