"""jax.ad_checkpoint's surface: `checkpoint` (remat) with its policies, `checkpoint_name`,
and the residuals a function's backward keeps (`saved_residuals`,
`print_saved_residuals`).

A policy is JAX's: `policy(primitive, *avals, **params) -> bool`, true when the outputs of
an equation may be kept for the backward pass instead of recomputed (the checkpoint's
partial evaluation asks it for each equation its residuals are computed from). The CPU
has one memory, so the offloading policies save what they would offload.
"""
from __future__ import annotations

import inspect
from types import SimpleNamespace

from . import tree_util
from .ad import is_float, jvp_jaxpr, partial_eval_jaxpr
from .core import Var
from .higher_order.custom import checkpoint, checkpoint_name, name_p, remat, remat_p
from .primitives.linalg import dot_general_p
from .tracing import make_jaxpr

__all__ = ["checkpoint", "checkpoint_name", "checkpoint_policies", "print_saved_residuals",
           "remat", "saved_residuals"]


def everything_saveable(*_, **__):
    return True


def nothing_saveable(*_, **__):
    return False


def dots_saveable(prim, *_, **__):
    return prim is dot_general_p


def dots_with_no_batch_dims_saveable(prim, *_, **params):
    return prim is dot_general_p and not params["dimension_numbers"][1][0]


def save_only_these_names(*names):
    names = frozenset(names)

    def policy(prim, *_, **params):
        return prim is name_p and params["name"] in names
    return policy


def save_any_names_but_these(*names):
    names = frozenset(names)

    def policy(prim, *_, **params):
        return prim is name_p and params["name"] not in names
    return policy


def save_anything_except_these_names(*names):
    names = frozenset(names)

    def policy(prim, *_, **params):
        return not (prim is name_p and params["name"] in names)
    return policy


def save_from_both_policies(policy_1, policy_2):
    def policy(prim, *avals, **params):
        return bool(policy_1(prim, *avals, **params) or policy_2(prim, *avals, **params))
    return policy


def save_and_offload_only_these_names(*, names_which_can_be_saved,
                                      names_which_can_be_offloaded, offload_src="device",
                                      offload_dst="pinned_host"):
    """Saves both lists' names: on the CPU there is no device memory to offload from."""
    return save_only_these_names(*names_which_can_be_saved, *names_which_can_be_offloaded)


def offload_dot_with_no_batch_dims(offload_src="device", offload_dst="pinned_host"):
    """Saves the dots without batch dimensions (the CPU has one memory)."""
    return dots_with_no_batch_dims_saveable


checkpoint_policies = SimpleNamespace(
    everything_saveable=everything_saveable,
    nothing_saveable=nothing_saveable,
    dots_saveable=dots_saveable,
    checkpoint_dots=dots_saveable,
    dots_with_no_batch_dims_saveable=dots_with_no_batch_dims_saveable,
    checkpoint_dots_with_no_batch_dims=dots_with_no_batch_dims_saveable,
    save_only_these_names=save_only_these_names,
    save_any_names_but_these=save_any_names_but_these,
    save_anything_except_these_names=save_anything_except_these_names,
    save_from_both_policies=save_from_both_policies,
    save_and_offload_only_these_names=save_and_offload_only_these_names,
    offload_dot_with_no_batch_dims=offload_dot_with_no_batch_dims,
)


def saved_residuals(f, *args, **kwargs):
    """[(aval, where it comes from)] for each value the backward pass of f at args keeps:
    its linearization's residuals (an argument, or the output of an equation; inside a
    checkpoint, what its policy saves)."""
    closed = make_jaxpr(lambda *a: f(*a, **kwargs))(*args)
    names = _arg_names(f, args)
    nonzero = [is_float(a) for a in closed.in_avals]
    jvp_closed, _ = jvp_jaxpr(closed, nonzero, False)
    n_in = len(closed.in_avals)
    known, _, out_unknowns, num_res = partial_eval_jaxpr(
        jvp_closed, [False] * n_in + [True] * sum(nonzero), False)
    kj = known.jaxpr
    n_known_out = len(kj.outvars) - num_res
    producer = {v: e for e in kj.eqns for v in e.outvars}
    args, rest = [], []
    for v in dict.fromkeys(v for v in kj.outvars[n_known_out:] if type(v) is Var):
        if v in kj.invars:
            args.append((kj.invars.index(v), (v.aval, f"from the argument "
                                                     f"{names[kj.invars.index(v)]}")))
        elif v in kj.constvars:
            rest.append((v.aval, "from a constant"))
        else:
            rest.append((v.aval, _describe(producer[v], v)))
    return [r for _, r in sorted(args, key=lambda a: a[0])] + rest


def print_saved_residuals(f, *args, **kwargs):
    for aval, what in saved_residuals(f, *args, **kwargs):
        print(f"{aval.str_short()} {what}")


def _describe(eqn, v):
    """Where value v (an output of eqn) comes from: a named value, or the primitive that
    computed it (looking inside a checkpoint at what its policy saved)."""
    if eqn.primitive is remat_p:
        inner = eqn.params["jaxpr"].jaxpr
        w = inner.outvars[eqn.outvars.index(v)]
        for e in inner.eqns:
            if w in e.outvars:
                return _describe(e, w)
        return "from the argument of a checkpoint"
    if eqn.primitive is name_p:
        return f"named '{eqn.params['name']}'"
    return f"output of {eqn.primitive.name}"


def _arg_names(f, args):
    """The name of each flattened argument: the parameter's, with the leaf's path."""
    try:
        params = list(inspect.signature(f).parameters)
    except (TypeError, ValueError):
        params = []
    names = []
    for i, a in enumerate(args):
        base = params[i] if i < len(params) else f"args[{i}]"
        n = len(tree_util.tree_leaves(a))
        names += [base] if n == 1 else [f"{base}[{j}]" for j in range(n)]
    return names

