"""eval_jaxpr: the interpreter that binds a jaxpr's equations (so it works under any
transformation). Compiled evaluation on concrete arrays is functrans.runtime's."""
from __future__ import annotations

from .ir import Var
from .trace import _thread_state, array_module, has_tracer


def eval_jaxpr(jaxpr, consts, *args):
    """Run a jaxpr by binding its equations (so it works under any transformation); on
    concrete values outside transformations the implementations are called directly."""
    vals = _inputs(jaxpr, consts, args)
    if _thread_state.depth == 0 and not has_tracer(vals):
        return eval_impls(jaxpr, vals)
    env = dict(zip(jaxpr.constvars + jaxpr.invars, vals))
    run_eqns(jaxpr.eqns, env, lambda prim, params, ins: prim.bind(*ins, **params))
    return [env[a] if type(a) is Var else a.val for a in jaxpr.outvars]


def eval_impls(jaxpr, vals):
    """Interpret a well-typed jaxpr on concrete values (its consts, then its arguments):
    the implementations are called directly, without shape checks."""
    xp = array_module(*vals)
    env = dict(zip(jaxpr.constvars + jaxpr.invars, vals))
    run_eqns(jaxpr.eqns, env, lambda prim, params, ins: prim.impl(xp, *ins, **params))
    return [env[a] if type(a) is Var else a.val for a in jaxpr.outvars]


def run_eqns(eqns, env, apply):
    """Interpret equations: env maps Vars to values and is extended with their outputs;
    apply(primitive, params, inputs) computes one equation."""
    for eqn in eqns:
        out = apply(eqn.primitive, eqn.params,
                    [env[a] if type(a) is Var else a.val for a in eqn.invars])
        if eqn.primitive.multiple_results:
            for v, x in zip(eqn.outvars, out, strict=True):
                env[v] = x
        else:
            env[eqn.outvars[0]] = out


def _inputs(jaxpr, consts, args):
    if len(args) != len(jaxpr.invars):
        raise TypeError(f"jaxpr takes {len(jaxpr.invars)} arguments, got {len(args)}")
    if len(consts) != len(jaxpr.constvars):
        raise ValueError(f"jaxpr has {len(jaxpr.constvars)} constvars, got {len(consts)} "
                         "consts")
    return [*consts, *args]
