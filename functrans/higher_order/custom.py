"""Custom differentiation rules and rematerialization: custom_jvp, custom_vjp, checkpoint.

Each is a primitive carrying the traced function as a jaxpr (so make_jaxpr shows it and
every transformation sees it); the user's rules are Python callables in its params.
Values a custom function closes over are passed as explicit leading operands.
"""
from __future__ import annotations

import functools
import inspect

from .. import runtime, tree_util
from ..ad import jvp_jaxpr, partial_eval_jaxpr, backward_pass
from ..batching import batch_jaxpr, vmap_flat
from ..core import (ClosedJaxpr, FunctransError, Jaxpr, Tracer, UndefinedPrimal, Var, Zero,
                    canonicalize, eval_jaxpr, get_aval, _state)
from ..passes import INLINABLE, dce_jaxpr
from ..tracing import flatten_fun, trace_to_jaxpr
from ..primitives import elementwise as ew
from ..primitives.base import bdim_size, defprim, instantiate, moveaxis, zeros


class CustomRuleError(FunctransError, TypeError):
    """A custom_jvp / custom_vjp rule returned values of the wrong structure or type."""


def _trace_with_consts_as_args(f_flat, avals):
    """Closed jaxpr whose captured values became leading inputs; returns (jaxpr, consts)."""
    jaxpr, consts = trace_to_jaxpr(f_flat, avals)
    return ClosedJaxpr(Jaxpr([], jaxpr.constvars + jaxpr.invars, jaxpr.eqns, jaxpr.outvars), []), consts


def _resolve_args(fun, args, kwargs):
    if not kwargs:
        return args
    sig = inspect.signature(fun)
    return tuple(sig.bind(*args, **kwargs).args)


def _split_nondiff(args, nondiff_argnums):
    nondiff = {i: args[i] for i in nondiff_argnums}
    diff = tuple(a for i, a in enumerate(args) if i not in nondiff)

    def merge(d):
        it = iter(d)
        return tuple(nondiff[i] if i in nondiff else next(it) for i in range(len(args)))
    return [nondiff[i] for i in sorted(nondiff)], diff, merge


def _trace_diff_args(call, diff):
    """Trace call(*diff) on abstract versions of diff's leaves, captured values becoming
    leading inputs: (leaves, in_tree, jaxpr, consts, out_tree); None when nothing is being
    traced (the caller then simply runs the function)."""
    leaves, in_tree = tree_util.tree_flatten(diff)
    if not _is_tracing(leaves):
        return None
    leaves = [canonicalize(x) for x in leaves]
    f_flat, store = flatten_fun(call, in_tree)
    jaxpr, consts = _trace_with_consts_as_args(f_flat, [get_aval(x) for x in leaves])
    return leaves, in_tree, jaxpr, consts, store["out_tree"]


def _is_tracing(leaves):
    return _state().depth > 0 or any(isinstance(x, Tracer) for x in leaves)


def _check_consts_nondiff(tangents, num_consts, kind):
    if any(type(t) is not Zero for t in tangents[:num_consts]):
        raise CustomRuleError(
            f"a {kind} function closes over a value that is being differentiated; pass that "
            "value as an explicit argument instead, so its rule can see it.")


def _check_out(name, got, want_tree, want_avals):
    leaves, tree = tree_util.tree_flatten(got)
    if tree != want_tree:
        raise CustomRuleError(f"{name} must return a structure matching the primal output "
                              f"{want_tree}, got {tree}")
    for i, (x, a) in enumerate(zip(leaves, want_avals)):
        xa = get_aval(x)
        if xa.shape != a.shape:
            raise CustomRuleError(f"{name} output leaf {i} has shape {xa.str_short()}, "
                                  f"expected {a.str_short()}")
    return leaves


# ---------------------------------------------------------------------------
# custom_jvp

def _cjvp_impl(xp, *args, call_jaxpr, jvp_fn, num_consts):
    return runtime.run(call_jaxpr, *args)


def _cjvp_jvp(primals, tangents, call_jaxpr, jvp_fn, num_consts):
    _check_consts_nondiff(tangents, num_consts, "custom_jvp")
    ps = list(primals[num_consts:])
    ts = [instantiate(t) if type(t) is not Zero else zeros(t.aval) for t in tangents[num_consts:]]
    outs = jvp_fn(ps, ts)
    n = len(call_jaxpr.out_avals)
    return outs[:n], outs[n:]


def _cjvp_batch(vals, dims, call_jaxpr, jvp_fn, num_consts):
    size = bdim_size(vals, dims)
    vals = [v if d is None else moveaxis(v, d, 0) for v, d in zip(vals, dims)]
    batched = [d is not None for d in dims]
    new_jaxpr, _ = batch_jaxpr(call_jaxpr, size, batched, True)
    n_out = len(call_jaxpr.out_avals)
    p_dims = [0 if b else None for b in batched[num_consts:]]

    def batched_jvp(ps, ts):
        def f(*xs):
            k = len(ps)
            return jvp_fn(list(xs[:k]), list(xs[k:]))
        return vmap_flat(f, p_dims + p_dims, lambda: [0] * (2 * n_out), size, list(ps) + list(ts))
    outs = custom_jvp_call_p.bind(*vals, call_jaxpr=new_jaxpr, jvp_fn=batched_jvp,
                                  num_consts=num_consts)
    return outs, [0] * n_out


custom_jvp_call_p = defprim(
    "custom_jvp_call", _cjvp_impl,
    lambda *avals, call_jaxpr, jvp_fn, num_consts: list(call_jaxpr.out_avals),
    jvp=_cjvp_jvp, batch=_cjvp_batch, multiple_results=True,
    # reverse mode runs the rule's known part as the forward (reverse.residual_form): the
    # outputs, then the residuals; run as the function instead, its outputs were computed
    # twice (the function, then the rule again for the residuals), and so was all that
    # reads them (the derived residual program cannot tell the two equal). The facade
    # records it so too (a node keeps the rule's residuals; recomputed, a backward through
    # x.abs() and a LayerNorm raised InternalEngineError)
    known_outputs_first=True)
INLINABLE[custom_jvp_call_p] = "call_jaxpr"


class custom_jvp:  # noqa: N801  (JAX's name)
    """A function with a user-defined JVP rule (`@f.defjvp`), as jax.custom_jvp."""

    def __init__(self, fun, nondiff_argnums=()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = tuple(nondiff_argnums)
        self.jvp = None

    def defjvp(self, jvp, symbolic_zeros=False):
        """jvp(*nondiff_args, primals, tangents) -> (primal_out, tangent_out)."""
        if symbolic_zeros:
            raise NotImplementedError("custom_jvp symbolic_zeros=True is not supported")
        self.jvp = jvp
        return jvp

    def defjvps(self, *jvps):
        """One function per argument: jvp_i(t_i, primal_out, *primals) -> tangent_out."""
        def rule(primals, tangents):
            ans = self.fun(*primals)
            out = None
            for f, t in zip(jvps, tangents):
                if f is None:
                    continue
                c = f(t, ans, *primals)
                out = c if out is None else tree_util.tree_map(lambda a, b: a + b, out, c)
            return ans, out if out is not None else tree_util.tree_map(lambda a: a * 0, ans)
        self.defjvp(rule)

    def __call__(self, *args, **kwargs):
        if self.jvp is None:
            raise AttributeError(f"No JVP defined for custom_jvp function {self.__name__} "
                                 "using defjvp.")
        args = _resolve_args(self.fun, args, kwargs)
        nondiff, diff, merge = _split_nondiff(args, self.nondiff_argnums)
        traced = _trace_diff_args(lambda *d: self.fun(*merge(d)), diff)
        if traced is None:
            return self.fun(*args)
        leaves, in_tree, call_jaxpr, consts, out_tree = traced
        out_avals = call_jaxpr.out_avals
        rule = self.jvp

        def jvp_fn(ps, ts):
            p_args = tree_util.tree_unflatten(in_tree, ps)
            t_args = tree_util.tree_unflatten(in_tree, ts)
            res = rule(*nondiff, tuple(p_args), tuple(t_args))
            if not (isinstance(res, (tuple, list)) and len(res) == 2):
                raise CustomRuleError("a custom_jvp rule must return a pair (primal_out, "
                                      "tangent_out)")
            po = _check_out("custom_jvp rule primal output", res[0], out_tree, out_avals)
            to = _check_out("custom_jvp rule tangent output", res[1], out_tree, out_avals)
            return po + [_like(t, a) for t, a in zip(to, out_avals)]
        outs = custom_jvp_call_p.bind(*consts, *leaves, call_jaxpr=call_jaxpr, jvp_fn=jvp_fn,
                                      num_consts=len(consts))
        return tree_util.tree_unflatten(out_tree, outs)


def _like(t, aval):
    """Tangent t with the dtype of the primal output aval (Python scalars converted)."""
    t = canonicalize(t)
    if get_aval(t).dtype != aval.dtype and aval.dtype.kind in "fc":
        return ew.convert_element_type(t, new_dtype=aval.dtype, weak_type=False)
    return t


# ---------------------------------------------------------------------------
# custom_vjp

def _cvjp_impl(xp, *args, call_jaxpr, fwd, bwd, num_consts, out_tree):
    return runtime.run(call_jaxpr, *args)


def _cvjp_jvp(primals, tangents, call_jaxpr, fwd, bwd, num_consts, out_tree):
    _check_consts_nondiff(tangents, num_consts, "custom_vjp")
    ps = list(primals[num_consts:])
    outs, res = fwd(ps)
    in_avals = [get_aval(p).strip_weak() for p in ps]
    ts = [instantiate(t) if type(t) is not Zero else zeros(t.aval) for t in tangents[num_consts:]]
    t_out = custom_lin_p.bind(*res, *ts, num_res=len(res), bwd=bwd,
                              out_avals=tuple(a.strip_weak() for a in call_jaxpr.out_avals),
                              in_avals=tuple(in_avals))
    return outs, t_out


def _cvjp_batch(vals, dims, call_jaxpr, fwd, bwd, num_consts, out_tree):
    size = bdim_size(vals, dims)
    vals = [v if d is None else moveaxis(v, d, 0) for v, d in zip(vals, dims)]
    batched = [d is not None for d in dims]
    new_jaxpr, _ = batch_jaxpr(call_jaxpr, size, batched, True)
    n_out = len(call_jaxpr.out_avals)
    p_dims = [0 if b else None for b in batched[num_consts:]]
    n_in = len(p_dims)
    store = {}

    def fwd_b(ps):
        def f(*xs):
            outs, res = fwd(list(xs))
            store["nres"] = len(res)
            return list(outs) + list(res)
        both = vmap_flat(f, p_dims, lambda: [0] * (n_out + store["nres"]), size, list(ps))
        return both[:n_out], both[n_out:]

    def bwd_b(res, cts):
        def f(*xs):
            return bwd(list(xs[:len(res)]), list(xs[len(res):]))
        return vmap_flat(f, [0] * (len(res) + n_out), lambda: [0] * n_in, size,
                         list(res) + list(cts))
    outs = custom_vjp_call_p.bind(*vals, call_jaxpr=new_jaxpr, fwd=fwd_b, bwd=bwd_b,
                                  num_consts=num_consts, out_tree=out_tree)
    return outs, [0] * n_out


custom_vjp_call_p = defprim(
    "custom_vjp_call", _cvjp_impl,
    lambda *avals, call_jaxpr, fwd, bwd, num_consts, out_tree: list(call_jaxpr.out_avals),
    jvp=_cvjp_jvp, batch=_cvjp_batch, multiple_results=True)


def _custom_lin_impl(xp, *args, num_res, bwd, out_avals, in_avals):
    raise CustomRuleError("can't apply forward-mode autodiff (jvp) to a custom_vjp function; "
                          "use vjp/grad, or define the rule with custom_jvp.")


def _custom_lin_transpose(cts, *args, num_res, bwd, out_avals, in_avals):
    res = list(args[:num_res])
    cts = [zeros(a) if type(c) is Zero else c for c, a in zip(cts, out_avals)]
    cts_in = bwd(res, cts)
    return [None] * num_res + [None if c is None else c for c in cts_in]


def _custom_lin_batch(vals, dims, num_res, bwd, out_avals, in_avals):
    raise CustomRuleError("vmap of a linearized custom_vjp function is not supported; "
                          "vmap the function before differentiating it (vmap(grad(f))).")


custom_lin_p = defprim(
    "custom_lin", _custom_lin_impl,
    lambda *avals, num_res, bwd, out_avals, in_avals: list(out_avals),
    transpose=_custom_lin_transpose, batch=_custom_lin_batch, multiple_results=True)


class custom_vjp:  # noqa: N801  (JAX's name)
    """A function with a user-defined VJP (`f.defvjp(fwd, bwd)`), as jax.custom_vjp."""

    def __init__(self, fun, nondiff_argnums=()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = tuple(nondiff_argnums)
        self.fwd = self.bwd = None

    def defvjp(self, fwd, bwd):
        """fwd(*args) -> (out, residuals); bwd(*nondiff_args, residuals, ct) -> input cts."""
        self.fwd, self.bwd = fwd, bwd

    def __call__(self, *args, **kwargs):
        if self.fwd is None:
            raise AttributeError(f"No VJP defined for custom_vjp function {self.__name__} "
                                 "using defvjp.")
        args = _resolve_args(self.fun, args, kwargs)
        nondiff, diff, merge = _split_nondiff(args, self.nondiff_argnums)
        traced = _trace_diff_args(lambda *d: self.fun(*merge(d)), diff)
        if traced is None:
            return self.fun(*args)
        leaves, in_tree, call_jaxpr, consts, out_tree = traced
        out_avals = call_jaxpr.out_avals
        user_fwd, user_bwd = self.fwd, self.bwd
        res_store = {}

        def fwd_flat(ps):
            res = user_fwd(*merge(tree_util.tree_unflatten(in_tree, ps)))
            if not (isinstance(res, (tuple, list)) and len(res) == 2):
                raise CustomRuleError("a custom_vjp fwd must return a pair (output, residuals)")
            outs = _check_out("custom_vjp fwd output", res[0], out_tree, out_avals)
            r_leaves, res_store["tree"] = tree_util.tree_flatten(res[1])
            return outs, [canonicalize(r) for r in r_leaves]

        def bwd_flat(res, cts):
            r = tree_util.tree_unflatten(res_store["tree"], res)
            ct = tree_util.tree_unflatten(out_tree, cts)
            got = user_bwd(*nondiff, r, ct)
            if not isinstance(got, tuple):
                raise CustomRuleError(f"custom_vjp bwd must return a tuple with one entry per "
                                      f"differentiable argument, got {type(got).__name__}")
            if len(got) != len(diff):
                raise CustomRuleError(f"custom_vjp bwd returned {len(got)} cotangents for "
                                      f"{len(diff)} differentiable arguments")
            out = []
            for g, d in zip(got, diff):
                d_leaves, d_tree = tree_util.tree_flatten(d)
                if g is None:
                    out.extend(zeros(get_aval(canonicalize(x)).strip_weak()) for x in d_leaves)
                    continue
                g_leaves, g_tree = tree_util.tree_flatten(g)
                if g_tree != d_tree:
                    raise CustomRuleError(f"custom_vjp bwd cotangent structure {g_tree} does "
                                          f"not match the argument's {d_tree}")
                out.extend(_like(c, get_aval(canonicalize(x))) for c, x in zip(g_leaves, d_leaves))
            return out
        outs = custom_vjp_call_p.bind(*consts, *leaves, call_jaxpr=call_jaxpr, fwd=fwd_flat,
                                      bwd=bwd_flat, num_consts=len(consts), out_tree=out_tree)
        return tree_util.tree_unflatten(out_tree, outs)


# ---------------------------------------------------------------------------
# checkpoint / remat

def _remat_impl(xp, *args, jaxpr, policy):
    return runtime.run(jaxpr, *args)


def _remat_jvp(primals, tangents, jaxpr, policy):
    nonzeros = [type(t) is not Zero for t in tangents]
    jvp_closed, out_nz = jvp_jaxpr(jaxpr, nonzeros, False)
    outs = remat_p.bind(*primals, *[t for t in tangents if type(t) is not Zero],
                        jaxpr=jvp_closed, policy=policy)
    n = len(jaxpr.out_avals)
    nz_iter = iter(outs[n:])
    t_out = [next(nz_iter) if nz else Zero(a.strip_weak()) for nz, a in zip(out_nz, jaxpr.out_avals)]
    return outs[:n], t_out


def _saved_by_policy(known, n_known_out, policy):
    """The values of the known part that the policy lets the backward keep, among those its
    residuals are computed from: walking back from each residual, a value an equation the
    policy accepts produced is kept (and the walk stops there); the rest is recomputed from
    the known inputs."""
    if policy is None:
        return []
    j = known.jaxpr
    producer = {}
    for e in j.eqns:
        for v in e.outvars:
            producer[v] = e
    keep, seen, saved = {}, set(), []
    stack = [v for v in j.outvars[n_known_out:] if type(v) is Var]
    while stack:
        v = stack.pop()
        if v in seen:
            continue
        seen.add(v)
        e = producer.get(v)
        if e is None:
            continue                    # a known input: the recomputation reads it anyway
        ok = keep.get(id(e))
        if ok is None:
            ok = keep[id(e)] = bool(policy(e.primitive, *[a.aval for a in e.invars],
                                           **e.params))
        if ok:
            saved.append(v)
        else:
            stack.extend(a for a in e.invars if type(a) is Var)
    return saved


def _remat_partial_eval(trace, tracers, jaxpr, policy):
    """Known outputs now; the unknown part recomputes from the known *inputs*, and from
    the known values the policy saves (none without a policy)."""
    in_unknowns = [not t.pval.is_known for t in tracers]
    known, unknown, out_unknowns, num_res = partial_eval_jaxpr(jaxpr, in_unknowns, False)
    n_known_out = sum(1 for u in out_unknowns if not u)
    saved = _saved_by_policy(known, n_known_out, policy)
    known_vals = [t.pval.const for t in tracers if t.pval.is_known]
    kj = known.jaxpr
    k_only = Jaxpr(kj.constvars, kj.invars, kj.eqns, kj.outvars[:n_known_out] + saved)
    known_only = ClosedJaxpr(dce_jaxpr(k_only, [True] * len(k_only.outvars)), known.consts)
    known_outs = remat_p.bind(*known_vals, jaxpr=known_only, policy=policy) \
        if known_only.jaxpr.outvars else []
    known_avals = [a for a, u in zip(jaxpr.in_avals, in_unknowns) if not u]
    unk_avals = [a for a, u in zip(jaxpr.in_avals, in_unknowns) if u]
    saved_avals = [v.aval for v in saved]
    nk, ns = len(known_avals), len(saved)

    def recompute(*xs):
        kx, sx, ux = xs[:nk], xs[nk:nk + ns], xs[nk + ns:]
        env = dict(zip(kj.constvars, known.consts))
        env.update(zip(kj.invars, kx))
        env.update(zip(saved, sx))
        for e in kj.eqns:
            if all(v in env for v in e.outvars):
                continue                    # saved: read, not recomputed
            outs = e.primitive.bind(*[env[a] if type(a) is Var else a.val for a in e.invars],
                                    **e.params)
            env.update(zip(e.outvars, outs if e.primitive.multiple_results else [outs]))
        res = [env[v] if type(v) is Var else v.val for v in kj.outvars[n_known_out:]]
        return eval_jaxpr(unknown.jaxpr, unknown.consts, *res, *ux)
    rj, rconsts = _trace_with_consts_as_args(recompute, known_avals + saved_avals + unk_avals)
    if rconsts:
        raise FunctransError("checkpoint: unexpected captured constants in the recomputation")
    rj = ClosedJaxpr(dce_jaxpr(rj.jaxpr, [True] * len(rj.jaxpr.outvars)), rj.consts)
    saved_outs = known_outs[n_known_out:]
    ins = [trace.instantiate_const(t) for t in tracers if t.pval.is_known] + \
          [trace.instantiate_const(trace.pure(v)) for v in saved_outs] + \
          [t for t in tracers if not t.pval.is_known]
    unk_outs = trace.default_process_primitive(remat_p, ins, {"jaxpr": rj, "policy": policy})
    k_it, u_it = iter(known_outs[:n_known_out]), iter(unk_outs)
    return [next(u_it) if u else trace.pure(next(k_it)) for u in out_unknowns]


def _remat_transpose(cts, *args, jaxpr, policy):
    cts = [c if type(c) is not Zero else zeros(c.aval) for c in cts]
    res = backward_pass(jaxpr.jaxpr, jaxpr.consts, list(args), cts)
    return [r if type(a) is UndefinedPrimal else None for r, a in zip(res, args)]


def _remat_batch(vals, dims, jaxpr, policy):
    size = bdim_size(vals, dims)
    vals = [v if d is None else moveaxis(v, d, 0) for v, d in zip(vals, dims)]
    new, out_b = batch_jaxpr(jaxpr, size, [d is not None for d in dims], False)
    return remat_p.bind(*vals, jaxpr=new, policy=policy), [0 if b else None for b in out_b]


remat_p = defprim("checkpoint", _remat_impl,
                  lambda *avals, jaxpr, policy: list(jaxpr.out_avals), jvp=_remat_jvp,
                  transpose=_remat_transpose, batch=_remat_batch, multiple_results=True,
                  partial_eval=_remat_partial_eval)


def checkpoint(fun, *, prevent_cse=True, policy=None, static_argnums=()):
    """fun whose residuals are recomputed in the backward pass instead of being stored,
    except the values `policy` saves (jax.checkpoint: `policy(prim, *avals, **params)` says
    whether an equation's outputs may be saved; see `checkpoint_policies`)."""
    if policy is not None and not callable(policy):
        raise TypeError(f"checkpoint: policy must be a callable (one of "
                        f"ft.checkpoint_policies), got {policy!r}")
    if isinstance(static_argnums, int):
        static_argnums = (static_argnums,)

    @functools.wraps(fun)
    def wrapped(*args, **kwargs):
        nondiff, diff, merge = _split_nondiff(args, tuple(static_argnums))
        traced = _trace_diff_args(lambda *d: fun(*merge(d), **kwargs), diff)
        if traced is None:
            return fun(*args, **kwargs)
        leaves, _, closed, consts, out_tree = traced
        outs = remat_p.bind(*consts, *leaves, jaxpr=closed, policy=policy)
        return tree_util.tree_unflatten(out_tree, outs)
    return wrapped


remat = checkpoint


# a value named for checkpoint policies (jax.ad_checkpoint.checkpoint_name): the identity,
# in every transformation, carrying the name the policies read
def _name_jvp(primals, tangents, *, name):
    return name_p.bind(primals[0], name=name), tangents[0]


def _name_batch(vals, dims, *, name):
    return name_p.bind(vals[0], name=name), dims[0]


name_p = defprim("name", lambda xp, x, *, name: x, lambda a, *, name: a, jvp=_name_jvp,
                 transpose=lambda ct, x, *, name: [ct], batch=_name_batch)


def checkpoint_name(x, name):
    """x, named for the checkpoint policies (save_only_these_names, ...) by `name`."""
    return tree_util.tree_map(lambda v: name_p.bind(v, name=name), x)
