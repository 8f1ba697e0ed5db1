"""ft.custom_batching.custom_vmap: a function with its own batching rule, as
jax.custom_batching.custom_vmap.

The call is a primitive carrying the traced function as a jaxpr and the user's rule in its
params: evaluated, it runs the function; under vmap, its batching rule calls the user's
`rule(axis_size, in_batched, *args)` (batched arguments with the batch axis first) and
takes the outputs and which of them are batched. Differentiation goes through the
function itself (the rule is for batching only).
"""
from __future__ import annotations

from .. import runtime, tree_util
from ..ad import jvp_jaxpr
from ..core import ClosedJaxpr, FunctransError, Jaxpr, Zero, eval_jaxpr, get_aval
from ..tracing import trace_to_jaxpr
from ..primitives.base import bdim_size, defprim, instantiate, moveaxis, zeros


class CustomVmapError(FunctransError, TypeError):
    """A custom_vmap rule is missing or returned values of the wrong structure."""


def _impl(xp, *args, call_jaxpr, rule, in_tree, out_tree, num_consts):
    return runtime.run(call_jaxpr, *args)


def _jvp(primals, tangents, call_jaxpr, rule, in_tree, out_tree, num_consts):
    ts = [instantiate(t) if type(t) is not Zero else zeros(t.aval) for t in tangents]
    jaxpr, _ = jvp_jaxpr(call_jaxpr, [True] * len(primals), instantiate=True)
    outs = eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *primals, *ts)
    n = len(call_jaxpr.out_avals)
    return outs[:n], outs[n:]


def _batch(vals, dims, call_jaxpr, rule, in_tree, out_tree, num_consts):
    if rule is None:
        raise CustomVmapError("custom_vmap: the function is being vmapped but has no rule; "
                              "define one with @f.def_vmap")
    if any(d is not None for d in dims[:num_consts]):
        raise CustomVmapError("custom_vmap: the function closes over a value that vmap "
                              "batches; pass it as an argument so that the rule sees it")
    size = bdim_size(vals, dims)
    vals, dims = vals[num_consts:], dims[num_consts:]
    vals = [v if d is None else moveaxis(v, d, 0) for v, d in zip(vals, dims)]
    args = tree_util.tree_unflatten(in_tree, vals)
    in_batched = tree_util.tree_unflatten(in_tree, [d is not None for d in dims])
    result = rule(size, list(in_batched), *args)
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        raise CustomVmapError("custom_vmap: the vmap rule must return a pair (outputs, "
                              f"out_batched), got {type(result).__name__}")
    out, out_batched = result
    leaves, tree = tree_util.tree_flatten(out)
    if tree != out_tree:
        raise CustomVmapError(f"custom_vmap: the vmap rule returned outputs of structure "
                              f"{tree}; the function returns {out_tree}")
    flags = tree_util.tree_leaves(out_batched) if not isinstance(out_batched, bool) else \
        [out_batched] * len(leaves)
    if len(flags) != len(leaves):
        raise CustomVmapError(f"custom_vmap: out_batched must match the outputs' structure "
                              f"{out_tree}, got {out_batched!r}")
    outs, out_dims = [], []
    for v, b, aval in zip(leaves, flags, call_jaxpr.out_avals):
        want = ((size,) if b else ()) + aval.shape
        if get_aval(v).shape != want:
            raise CustomVmapError(f"custom_vmap: the vmap rule returned an output of shape "
                                  f"{get_aval(v).shape}, expected {want} (batched={b})")
        outs.append(v)
        out_dims.append(0 if b else None)
    return outs, out_dims


custom_vmap_call_p = defprim(
    "custom_vmap_call", _impl,
    lambda *avals, call_jaxpr, rule, in_tree, out_tree, num_consts: list(call_jaxpr.out_avals),
    jvp=_jvp, batch=_batch, multiple_results=True, memo=False)


class custom_vmap:  # noqa: N801  (JAX's name)
    """Decorate fun; `@f.def_vmap` gives the rule `rule(axis_size, in_batched, *args) ->
    (out, out_batched)` that vmap uses instead of batching fun's operations."""

    def __init__(self, fun):
        self.fun = fun
        self.vmap_rule = None
        self.__wrapped__ = fun
        self.__name__ = getattr(fun, "__name__", "custom_vmap")
        self.__doc__ = getattr(fun, "__doc__", None)

    def def_vmap(self, rule):
        self.vmap_rule = rule
        return rule

    def __call__(self, *args):
        leaves, in_tree = tree_util.tree_flatten(args)
        store = {}

        def flat(*xs):
            out = self.fun(*tree_util.tree_unflatten(in_tree, list(xs)))
            out_leaves, store["tree"] = tree_util.tree_flatten(out)
            return out_leaves
        jaxpr, consts = trace_to_jaxpr(flat, [get_aval(x) for x in leaves])
        # values fun closes over become leading operands (they may be tracers)
        hoisted = ClosedJaxpr(Jaxpr([], jaxpr.constvars + jaxpr.invars, jaxpr.eqns,
                                    jaxpr.outvars), [])
        outs = custom_vmap_call_p.bind(*consts, *leaves, call_jaxpr=hoisted,
                                       rule=self.vmap_rule, in_tree=in_tree,
                                       out_tree=store["tree"], num_consts=len(consts))
        return tree_util.tree_unflatten(store["tree"], list(outs))

