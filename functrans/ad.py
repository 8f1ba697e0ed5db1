"""Automatic differentiation as transformations of the IR.

jvp: an interpreter reading the primitives' JVP rules, with symbolic zero tangents.
linearize: jvp under online partial evaluation (known primals, unknown tangents), which
    yields a linear jaxpr and its residuals.
transpose: a backward pass over a linear jaxpr reading the transpose rules.
vjp / grad = linearize + transpose. Higher order falls out of composition.
"""
from __future__ import annotations

import functools
import weakref
from typing import NamedTuple

import numpy as np

from . import staged_rules, tree_util
from .core import (canonicalize, ClosedJaxpr, FunctransError, Jaxpr, JaxprEqn, Literal, RuleNotImplementedError,
                   ShapedArray, Trace, Tracer, UndefinedPrimal, Var, Zero, eval_jaxpr,
                   bind_below, full_lower, get_aval, new_main, to_concrete, trusted_eval)
from .runtime import eval_jaxpr as run_jaxpr
from .tracing import flatten_fun
from functrans.primitives.base import instantiate, zeros
from functrans.primitives import elementwise as ew

# ---------------------------------------------------------------------------
# forward mode


def _tangent_aval(x):
    return get_aval(x).strip_weak()


def is_float(aval):
    return aval.dtype.kind in "fc"


class JVPTracer(Tracer):
    __slots__ = ("primal", "tangent", "_aval")

    def __init__(self, trace, primal, tangent):
        self._trace = trace
        self._origin = None
        self.primal = primal
        self.tangent = tangent
        self._aval = None

    @property
    def aval(self):
        a = self._aval
        if a is None:
            a = self._aval = get_aval(self.primal)
        return a

    def to_concrete_value(self):
        return to_concrete(self.primal)


def _rule_missing(prim, what, how):
    return RuleNotImplementedError(
        f"Differentiation rule for '{prim.name}' not implemented ({what}). Add it to the "
        f"primitive's declaration ({how}) in primitives/, or wrap the computation in "
        "ft.custom_jvp / ft.custom_vjp.")


class JVPTrace(Trace):
    def pure(self, val):
        return JVPTracer(self, val, Zero(_tangent_aval(val)))

    lift = pure

    def process_primitive(self, prim, tracers, params):
        primals = [t.primal for t in tracers]
        tangents = [t.tangent for t in tracers]
        if all(type(t) is Zero for t in tangents):
            out = bind_below(prim, primals, params)
            if prim.multiple_results:
                return [JVPTracer(self, o, Zero(_tangent_aval(o))) for o in out]
            return JVPTracer(self, out, Zero(_tangent_aval(out)))
        if prim.jvp is None:
            raise _rule_missing(prim, "jvp", "jvp=...")
        # the rule staged once per signature on concrete values (staged_rules)
        p_out, t_out = staged_rules.jvp_rule(prim)(primals, tangents, **params)
        if prim.multiple_results:
            return [JVPTracer(self, p, t) for p, t in zip(p_out, t_out, strict=True)]
        return JVPTracer(self, p_out, t_out)


def jvp_flat(f_flat, primals, tangents, instantiate_zeros=True):
    with new_main(JVPTrace) as main:
        trace = JVPTrace(main)
        tracers_in = [JVPTracer(trace, p, t if is_float(get_aval(p)) else Zero(_tangent_aval(p)))
                      for p, t in zip(primals, tangents, strict=True)]
        outs = f_flat(*tracers_in)
        tracers_out = [trace.full_raise(o) for o in outs]
        primals_out = [full_lower(t.primal) for t in tracers_out]
        tangents_out = [t.tangent for t in tracers_out]
    if instantiate_zeros:
        tangents_out = [full_lower(instantiate(t)) for t in tangents_out]
    else:
        tangents_out = [t if type(t) is Zero else full_lower(t) for t in tangents_out]
    return primals_out, tangents_out


def jvp(fun, primals, tangents, has_aux=False):
    """(fun(*primals), directional derivative along tangents): forward mode."""
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError("jvp expects primals and tangents as tuples or lists of arguments, "
                        f"got {type(primals).__name__} and {type(tangents).__name__}")
    p_leaves, p_tree = tree_util.tree_flatten(tuple(primals))
    t_leaves, t_tree = tree_util.tree_flatten(tuple(tangents))
    p_leaves = [canonicalize(x) for x in p_leaves]
    t_leaves = [canonicalize(x) for x in t_leaves]
    if p_tree != t_tree:
        raise TypeError(f"primal and tangent arguments to jvp must have the same tree "
                        f"structure; got {p_tree} and {t_tree}")
    for i, (p, t) in enumerate(zip(p_leaves, t_leaves)):
        pa, ta = get_aval(p), get_aval(t)
        if pa.shape != ta.shape:
            raise ValueError(f"jvp called with different primal and tangent shapes at leaf "
                             f"{i}: primal {pa.str_short()}, tangent {ta.str_short()}")
        if is_float(pa) and pa.dtype != ta.dtype:
            raise TypeError(f"primal and tangent arguments to jvp do not match; dtypes must "
                            f"be equal at leaf {i}: primal {pa.str_short()}, tangent "
                            f"{ta.str_short()}")
    f = fun
    aux_store = {}
    if has_aux:
        def f(*args):
            out, aux = fun(*args)
            aux_store["aux"] = aux
            return out
    f_flat, store = flatten_fun(f, p_tree)
    outs, touts = jvp_flat(f_flat, p_leaves, t_leaves)
    out = tree_util.tree_unflatten(store["out_tree"], outs)
    tout = tree_util.tree_unflatten(store["out_tree"], touts)
    if has_aux:
        return out, tout, aux_store["aux"]
    return out, tout


# ---------------------------------------------------------------------------
# online partial evaluation (known values are computed, unknown ones recorded)

class PartialVal(NamedTuple):
    aval: ShapedArray
    const: object

    @classmethod
    def known(cls, val):
        return PartialVal(get_aval(val), val)

    @classmethod
    def unknown(cls, aval):
        return PartialVal(aval, None)

    @property
    def is_known(self):
        return self.const is not None


class _LambdaBinding(NamedTuple):
    pass


class _ConstRecipe(NamedTuple):
    val: object


class _EqnRecipe(NamedTuple):
    prim: object
    tracers_in: list
    params: dict
    avals_out: list
    tracer_refs_out: list


class PartialEvalTracer(Tracer):
    __slots__ = ("pval", "recipe", "__weakref__")

    def __init__(self, trace, pval, recipe):
        self._trace = trace
        self._origin = None
        self.pval = pval
        self.recipe = recipe

    @property
    def aval(self):
        return self.pval.aval

    def full_lower(self):
        if self.pval.is_known:
            return full_lower(self.pval.const)
        return self

    def to_concrete_value(self):
        return to_concrete(self.pval.const) if self.pval.is_known else None


class PartialEvalTrace(Trace):
    def new_arg(self, pval):
        return PartialEvalTracer(self, pval, _LambdaBinding())

    def pure(self, val):
        return PartialEvalTracer(self, PartialVal.known(val), None)

    lift = pure

    def instantiate_const(self, tracer):
        if tracer.pval.is_known:
            return PartialEvalTracer(self, PartialVal.unknown(get_aval(tracer.pval.const)),
                                     _ConstRecipe(tracer.pval.const))
        return tracer

    def process_primitive(self, prim, tracers, params):
        if all(t.pval.is_known for t in tracers):
            return bind_below(prim, [t.pval.const for t in tracers], params)
        rule = getattr(prim, "partial_eval", None)
        if rule is not None:
            return rule(self, tracers, **params)
        return self.default_process_primitive(prim, tracers, params)

    def default_process_primitive(self, prim, tracers, params):
        tracers_in = [self.instantiate_const(t) for t in tracers]
        avals_in = [t.aval for t in tracers_in]
        out = prim.abstract_eval(*avals_in, **params)
        avals_out = out if prim.multiple_results else [out]
        tracers_out = [PartialEvalTracer(self, PartialVal.unknown(a), None) for a in avals_out]
        recipe = _EqnRecipe(prim, tracers_in, params, avals_out,
                            [weakref.ref(t) for t in tracers_out])
        for t in tracers_out:
            t.recipe = recipe
        return tracers_out if prim.multiple_results else tracers_out[0]


def _toposort(out_nodes, parents):
    """Nodes reachable from out_nodes, parents before children."""
    order, seen = [], set()
    stack = [(n, False) for n in out_nodes]
    while stack:
        node, done = stack.pop()
        if done:
            order.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        stack.extend((p, False) for p in parents(node) if id(p) not in seen)
    return order


def tracers_to_jaxpr(tracers_in, tracers_out):
    """The jaxpr of the unknown computation between tracers_in and tracers_out."""
    tracer_to_var = {id(t): Var(t.aval) for t in tracers_in}
    constvar_to_val = {}
    constid_to_var = {}
    processed = set()
    eqns = []
    for t in _toposort(tracers_out, lambda t: t.recipe.tracers_in
                       if type(t.recipe) is _EqnRecipe else []):
        r = t.recipe
        if type(r) is _LambdaBinding:
            if id(t) not in tracer_to_var:
                raise FunctransError("partial evaluation: an input tracer is not an argument")
        elif type(r) is _ConstRecipe:
            v = constid_to_var.get(id(r.val))
            if v is None:
                v = constid_to_var[id(r.val)] = Var(get_aval(r.val))
                constvar_to_val[v] = r.val
            tracer_to_var[id(t)] = v
        elif type(r) is _EqnRecipe:
            if id(r) not in processed:
                processed.add(id(r))
                ins = [tracer_to_var[id(x)] for x in r.tracers_in]
                outs = [Var(a) for a in r.avals_out]
                for ref, v in zip(r.tracer_refs_out, outs):
                    if ref() is not None:
                        tracer_to_var[id(ref())] = v
                eqns.append(JaxprEqn(r.prim, ins, r.params, outs))
        else:
            raise FunctransError(f"unknown recipe {r}")
    constvars, consts = list(constvar_to_val), list(constvar_to_val.values())
    invars = [tracer_to_var[id(t)] for t in tracers_in]
    outvars = [tracer_to_var[id(t)] for t in tracers_out]
    return Jaxpr(constvars, invars, eqns, outvars), consts


def partial_eval_flat(f_flat, pvals_in):
    """Run f on partially known inputs: (known outputs or None, jaxpr, residuals).

    Returns (pvals_out, jaxpr, consts): the jaxpr maps the unknown inputs to the
    unknown outputs, consts are its residuals.
    """
    with new_main(PartialEvalTrace) as main:
        trace = PartialEvalTrace(main)
        tracers_in = [trace.new_arg(pv) for pv in pvals_in]
        outs = f_flat(*tracers_in)
        tracers_out = [trace.full_raise(o) for o in outs]
        pvals_out = [t.pval for t in tracers_out]
        unk_in = [t for t in tracers_in if not t.pval.is_known]
        unk_out = [t for t in tracers_out if not t.pval.is_known]
        jaxpr, consts = tracers_to_jaxpr(unk_in, unk_out)
    return pvals_out, jaxpr, consts


# ---------------------------------------------------------------------------
# linearize

class LinearFunction:
    """The linear map of a linearization: a jaxpr over tangents plus its residuals."""

    def __init__(self, jaxpr, consts, out_pvals, in_avals):
        self.jaxpr, self.consts = jaxpr, consts
        self.out_pvals = out_pvals     # known (zero) tangent outputs or unknowns
        self.in_avals = in_avals

    def __call__(self, *tangents):
        outs = iter(run_jaxpr(self.jaxpr, self.consts, *tangents))
        return [next(outs) if not pv.is_known else pv.const for pv in self.out_pvals]

    def transpose(self, cts):
        """Cotangents of the inputs for output cotangents cts (Zero allowed)."""
        unk_cts = [ct for ct, pv in zip(cts, self.out_pvals, strict=True) if not pv.is_known]
        with trusted_eval():
            return backward_pass(self.jaxpr, self.consts,
                                 [UndefinedPrimal(a) for a in self.in_avals], unk_cts)


def linearize_flat(f_flat, primals):
    n = len(primals)
    t_avals = [_tangent_aval(p) for p in primals]

    def jvp_fun(*args):
        outs, touts = jvp_flat(f_flat, args[:n], args[n:], instantiate_zeros=False)
        return outs + [instantiate(t) for t in touts]
    pvals_in = [PartialVal.known(p) for p in primals] + [PartialVal.unknown(a) for a in t_avals]
    pvals_out, jaxpr, consts = partial_eval_flat(jvp_fun, pvals_in)
    m = len(pvals_out) // 2
    primals_out = [pv.const for pv in pvals_out[:m]]
    if any(not pv.is_known for pv in pvals_out[:m]):
        raise FunctransError("linearize: a primal output depends on the tangents")
    return primals_out, LinearFunction(jaxpr, consts, pvals_out[m:], t_avals)


def linearize(fun, *primals):
    """(fun(*primals), f_jvp) where f_jvp evaluates the stored linear jaxpr."""
    leaves, in_tree = tree_util.tree_flatten(primals)
    leaves = [canonicalize(x) for x in leaves]
    f_flat, store = flatten_fun(fun, in_tree)
    outs, lin = linearize_flat(f_flat, leaves)
    out_tree = store["out_tree"]

    def f_jvp(*tangents):
        t_leaves, t_tree = tree_util.tree_flatten(tangents)
        if t_tree != in_tree:
            raise TypeError(f"linearized function expects tangents with structure {in_tree}, "
                            f"got {t_tree}")
        return tree_util.tree_unflatten(out_tree, lin(*t_leaves))
    f_jvp.jaxpr = lin.jaxpr
    return tree_util.tree_unflatten(out_tree, outs), f_jvp


# ---------------------------------------------------------------------------
# transposition

def _add_ct(a, b):
    if type(a) is Zero:
        return b
    if type(b) is Zero:
        return a
    return ew.add(a, b)


def backward_pass(jaxpr: Jaxpr, consts, args, cts_out):
    """Transpose: args are values or UndefinedPrimal (linear inputs); returns one
    cotangent per linear input (Zero where nothing flowed)."""
    primal_env: dict = {}
    linear: set = set()
    for v, c in zip(jaxpr.constvars, consts, strict=True):
        primal_env[v] = c
    for v, a in zip(jaxpr.invars, args, strict=True):
        if type(a) is UndefinedPrimal:
            linear.add(v)
        else:
            primal_env[v] = a

    def read_primal(a):
        if type(a) is Literal:
            return a.val
        if a in linear:
            return UndefinedPrimal(a.aval)
        return primal_env[a]

    lin_eqns = []
    for eqn in jaxpr.eqns:            # forward: evaluate the non-linear equations
        if any(type(a) is Var and a in linear for a in eqn.invars):
            linear.update(eqn.outvars)
            lin_eqns.append(eqn)
        else:
            out = eqn.primitive.bind(*[read_primal(a) for a in eqn.invars], **eqn.params)
            outs = out if eqn.primitive.multiple_results else [out]
            for v, o in zip(eqn.outvars, outs, strict=True):
                primal_env[v] = o

    ct_env: dict = {}

    def write_ct(v, ct):
        if type(v) is Var and v in linear and ct is not None and type(ct) is not Zero:
            ct_env[v] = _add_ct(ct_env[v], ct) if v in ct_env else ct

    for v, ct in zip(jaxpr.outvars, cts_out, strict=True):
        write_ct(v, ct)
    for eqn in reversed(lin_eqns):
        prim = eqn.primitive
        if prim.multiple_results:
            cts = [ct_env.pop(v, Zero(v.aval)) for v in eqn.outvars]
            if all(type(c) is Zero for c in cts):
                continue
        else:
            cts = ct_env.pop(eqn.outvars[0], None)
            if cts is None:
                continue
        if prim.transpose is None:
            raise _rule_missing(prim, "transpose", "transpose=..., or linear=True")
        cts_in = prim.transpose(cts, *[read_primal(a) for a in eqn.invars], **eqn.params)
        for a, ct in zip(eqn.invars, cts_in, strict=True):
            write_ct(a, ct)
    return [ct_env.pop(v, Zero(v.aval)) if type(a) is UndefinedPrimal else None
            for v, a in zip(jaxpr.invars, args)]


# ---------------------------------------------------------------------------
# vjp, grad and friends

def vjp(fun, *primals, has_aux=False):
    """(fun(*primals), vjp_fn) with vjp_fn(cotangent) -> tuple of input cotangents."""
    return _vjp(fun, primals, has_aux, fun)


def _vjp(fun, primals, has_aux, hint_fun, hint_extra=(), grad_argnums=None):
    """vjp's work; grad_argnums: primals are grad's arguments at these positions, whose
    leaves must be inexact (checked here, on the one flattening)."""
    leaves, in_tree = tree_util.tree_flatten(primals)
    if grad_argnums is not None:
        k = 0
        for a, sub in zip(grad_argnums, in_tree.children):
            for leaf in leaves[k:k + sub.num_leaves]:
                _check_grad_input(leaf, a)
            k += sub.num_leaves
    leaves = [canonicalize(x) for x in leaves]
    f = fun
    aux_store = {}
    if has_aux:
        def f(*args):
            out, aux = fun(*args)
            aux_store["aux"] = aux
            return out
    f_flat, store = flatten_fun(f, in_tree)
    from .reverse import recorded_value, vjp_flat
    hint = (hint_fun, (hint_extra, in_tree, tuple([get_aval(x) for x in leaves])))
    outs, back = vjp_flat(f_flat, leaves, hint, has_aux)
    out_tree = store["out_tree"]
    out_avals = [get_aval(o) for o in outs]

    def vjp_fn(ct):
        ct_leaves, ct_tree = tree_util.tree_flatten(ct)
        if ct_tree != out_tree:
            raise TypeError(f"vjp function expects a cotangent with the structure of the "
                            f"output {out_tree}, got {ct_tree}")
        for i, (c, a) in enumerate(zip(ct_leaves, out_avals)):
            ca = get_aval(c)
            if ca.shape != a.shape:
                raise ValueError(f"vjp cotangent leaf {i} has shape {ca.str_short()} but the "
                                 f"primal output has shape {a.str_short()}")
        ct_leaves = [_match_dtype(canonicalize(c), a) for c, a in zip(ct_leaves, out_avals)]
        cts = back(ct_leaves)
        cts = [zeros(get_aval(p).strip_weak()) if c is None else c for c, p in zip(cts, leaves)]
        cts = [full_lower(_match_dtype(c, get_aval(p))) for c, p in zip(cts, leaves)]
        return tree_util.tree_unflatten(in_tree, cts)
    out = tree_util.tree_unflatten(out_tree, outs)
    if has_aux:
        return out, vjp_fn, tree_util.tree_map(recorded_value, aux_store["aux"])
    return out, vjp_fn


def _match_dtype(ct, aval):
    if get_aval(ct).dtype != aval.dtype and aval.dtype.kind in "fc":
        return ew.convert_element_type(ct, new_dtype=aval.dtype, weak_type=False)
    return ct


def _check_grad_input(x, argnum):
    aval = get_aval(x)
    if not is_float(aval):
        raise TypeError(
            f"grad requires real- or complex-valued inputs (input dtype that is a sub-dtype "
            f"of np.inexact), but got {aval.dtype.name} for argument {argnum}. If you want "
            "to use Boolean- or integer-valued inputs, use vjp, or convert the input to float.")


def value_and_grad(fun, argnums=0, has_aux=False):
    """A function returning (fun(*args), gradient of fun w.r.t. args[argnums])."""
    int_argnums = isinstance(argnums, int)
    argnums_t = (argnums,) if int_argnums else tuple(argnums)

    @functools.wraps(fun)
    def vg(*args, **kwargs):
        nargs = len(args)
        for a in argnums_t:
            if not -nargs <= a < nargs:
                raise ValueError(f"argnums {argnums} out of range for {nargs} positional "
                                 "arguments")
        diff = tuple([args[a] for a in argnums_t])

        def f_partial(*dargs):
            full = list(args)
            for a, d in zip(argnums_t, dargs):
                full[a] = d
            return fun(*full, **kwargs)
        extra = (argnums_t, len(args))
        if has_aux:
            ans, vjp_fn, aux = _vjp(f_partial, diff, True, fun, extra, argnums_t)
        else:
            ans, vjp_fn = _vjp(f_partial, diff, False, fun, extra, argnums_t)
        out_aval = get_aval(ans) if not isinstance(ans, (tuple, list, dict)) else None
        if out_aval is None or out_aval.shape != ():
            shape = out_aval.shape if out_aval is not None else type(ans).__name__
            raise TypeError(f"Gradient only defined for scalar-output functions. Output had "
                            f"shape: {shape}.")
        if not is_float(out_aval):
            raise TypeError(f"grad requires real-valued outputs (output dtype that is a "
                            f"sub-dtype of np.floating), but got {out_aval.dtype.name}")
        g = vjp_fn(np.ones((), out_aval.dtype))
        g = g[0] if int_argnums else g
        return ((ans, aux), g) if has_aux else (ans, g)
    return vg


def grad(fun, argnums=0, has_aux=False):
    """The gradient of a scalar-valued fun with respect to args[argnums]."""
    vg = value_and_grad(fun, argnums, has_aux)

    @functools.wraps(fun)
    def g(*args, **kwargs):
        if has_aux:
            (_, aux), gr = vg(*args, **kwargs)
            return gr, aux
        return vg(*args, **kwargs)[1]
    return g


# ---------------------------------------------------------------------------
# Jacobians and Hessians, batched with vmap

def _std_basis(avals):
    """Rows of the identity over the concatenated flattened leaves, one array per leaf."""
    sizes = [a.size for a in avals]
    n = sum(sizes)
    dtype = np.result_type(*[a.dtype for a in avals]) if avals else np.float32
    eye = np.eye(n, dtype=dtype)
    out, off = [], 0
    for a, s in zip(avals, sizes):
        out.append(eye[:, off:off + s].reshape((n,) + a.shape).astype(a.dtype))
        off += s
    return out


def _split_jac(batched, batch_avals, other_avals, batch_is_input):
    """Per (output, input) pair, reshape a batched block to out_shape + in_shape."""
    from . import numpy as fnp
    blocks, off = [], 0
    for a in batch_avals:
        rows = []
        for x, oa in zip(batched, other_avals):
            part = x[off:off + a.size]                       # (size_a,) + oa.shape
            if batch_is_input:   # jacfwd: part is (in_size,) + out_shape
                part = fnp.moveaxis(fnp.reshape(part, (a.size,) + oa.shape), 0, -1)
                rows.append(fnp.reshape(part, oa.shape + a.shape))
            else:                # jacrev: part is (out_size,) + in_shape
                rows.append(fnp.reshape(part, a.shape + oa.shape))
        blocks.append(rows)
        off += a.size
    return blocks


def _jac_setup(fun, argnums, args, has_aux):
    int_argnums = isinstance(argnums, int)
    argnums_t = (argnums,) if int_argnums else tuple(argnums)
    diff = tuple(args[a] for a in argnums_t)
    for a, d in zip(argnums_t, diff):
        for leaf in tree_util.tree_leaves(d):
            _check_grad_input(leaf, a)
    dtree_src = diff[0] if int_argnums else diff
    d_leaves, d_tree = tree_util.tree_flatten(dtree_src)
    d_leaves = [canonicalize(x) for x in d_leaves]
    aux_store = {}

    def f_flat(*leaves):
        dargs = tree_util.tree_unflatten(d_tree, leaves)
        dargs = (dargs,) if int_argnums else dargs
        full = list(args)
        for a, d in zip(argnums_t, dargs):
            full[a] = d
        out = fun(*full)
        if has_aux:
            out, aux_store["aux"] = out
        leaves_out, aux_store["tree"] = tree_util.tree_flatten(out)
        return leaves_out
    return d_leaves, d_tree, f_flat, aux_store


def _assemble(blocks_by_out, out_tree, in_tree):
    return tree_util.tree_unflatten(
        out_tree, [tree_util.tree_unflatten(in_tree, row) for row in blocks_by_out])


def jacfwd(fun, argnums=0, has_aux=False):
    """Jacobian by forward mode: one jvp per input direction, batched with vmap."""
    from .batching import vmap

    @functools.wraps(fun)
    def jacfun(*args):
        d_leaves, d_tree, f_flat, store = _jac_setup(fun, argnums, args, has_aux)
        in_avals = [get_aval(x) for x in d_leaves]
        outs = f_flat(*d_leaves)
        out_avals = [get_aval(o) for o in outs]

        def push(*tangents):
            return jvp_flat(f_flat, d_leaves, list(tangents))[1]
        jac_cols = vmap(push)(*_std_basis(in_avals))
        blocks = _split_jac(jac_cols, in_avals, out_avals, batch_is_input=True)
        by_out = [[blocks[i][o] for i in range(len(in_avals))] for o in range(len(out_avals))]
        jac = _assemble(by_out, store["tree"], d_tree)
        return (jac, store["aux"]) if has_aux else jac
    return jacfun


def jacrev(fun, argnums=0, has_aux=False):
    """Jacobian by reverse mode: one vjp per output direction, batched with vmap."""
    from .batching import vmap

    @functools.wraps(fun)
    def jacfun(*args):
        d_leaves, d_tree, f_flat, store = _jac_setup(fun, argnums, args, has_aux)
        in_avals = [get_aval(x) for x in d_leaves]
        outs, lin = linearize_flat(f_flat, d_leaves)
        out_avals = [get_aval(o) for o in outs]

        def pull(*cts):
            res = lin.transpose(list(cts))
            return [zeros(a) if type(c) is Zero else c for c, a in zip(res, in_avals)]
        jac_rows = vmap(pull)(*_std_basis(out_avals))
        blocks = _split_jac(jac_rows, out_avals, in_avals, batch_is_input=False)
        jac = _assemble(blocks, store["tree"], d_tree)
        return (jac, store["aux"]) if has_aux else jac
    return jacfun


def hessian(fun, argnums=0, has_aux=False):
    """Hessian = jacfwd(jacrev(fun))."""
    return jacfwd(jacrev(fun, argnums, has_aux), argnums, has_aux)


# ---------------------------------------------------------------------------
# the same transformations as jaxpr -> jaxpr functions (for primitives that carry
# sub-jaxprs: control flow, jit, checkpoint, custom rules)

def _jaxpr_fun(closed):
    return lambda *xs: eval_jaxpr(closed.jaxpr, closed.consts, *xs)


def jvp_jaxpr(closed: ClosedJaxpr, nonzeros, instantiate):
    """Jaxpr of (primals, nonzero tangents) -> (primal outs, nonzero tangent outs).

    Returns (closed_jvp, out_nonzeros); `instantiate` (bool or list) forces tangent outputs
    to be present even when symbolically zero."""
    from .tracing import trace_to_jaxpr
    in_avals = closed.in_avals
    n = len(in_avals)
    inst = instantiate if isinstance(instantiate, (list, tuple)) else [instantiate] * len(closed.out_avals)
    t_avals = [a.strip_weak() for a, nz in zip(in_avals, nonzeros, strict=True) if nz]
    store = {}

    def f(*args):
        nz_ts = iter(args[n:])
        tangents = [next(nz_ts) if nz else Zero(a.strip_weak()) for a, nz in zip(in_avals, nonzeros)]
        outs, touts = jvp_flat(_jaxpr_fun(closed), list(args[:n]), tangents, instantiate_zeros=False)
        touts = [zeros(t.aval) if i and type(t) is Zero else t   # (`instantiate` is shadowed)
                 for t, i in zip(touts, inst, strict=True)]
        store["nz"] = [type(t) is not Zero for t in touts]
        return outs + [t for t in touts if type(t) is not Zero]
    jaxpr, consts = trace_to_jaxpr(f, list(in_avals) + t_avals)
    return ClosedJaxpr(jaxpr, consts), store["nz"]


def partial_eval_jaxpr(closed: ClosedJaxpr, in_unknowns, instantiate=False):
    """Split a jaxpr into a known part and an unknown part.

    Returns (known, unknown, out_unknowns, num_res): known maps the known inputs to the
    known outputs followed by num_res residuals; unknown maps (residuals, unknown inputs)
    to the unknown outputs."""
    from .tracing import trace_to_jaxpr
    in_avals = closed.in_avals
    n_out = len(closed.out_avals)
    inst = instantiate if isinstance(instantiate, (list, tuple)) else [instantiate] * n_out
    known_avals = [a for a, uk in zip(in_avals, in_unknowns, strict=True) if not uk]
    store = {}

    def fun_known(*known_vals):
        kv = iter(known_vals)
        pvals = [PartialVal.unknown(a) if uk else PartialVal.known(next(kv))
                 for a, uk in zip(in_avals, in_unknowns)]

        def f_inst(*xs):          # outputs that must be unknown are instantiated inside
            outs = _jaxpr_fun(closed)(*xs)
            trace = xs[0]._trace if xs and isinstance(xs[0], PartialEvalTracer) else None
            res = []
            for o, i in zip(outs, inst):
                if i:
                    t = trace.full_raise(o) if trace is not None else o
                    res.append(trace.instantiate_const(t) if trace is not None else o)
                else:
                    res.append(o)
            return res
        pvals_out, jaxpr_unk, res = partial_eval_flat(f_inst, pvals)
        store["jaxpr_unk"], store["num_res"] = jaxpr_unk, len(res)
        store["out_unknowns"] = [not pv.is_known for pv in pvals_out]
        return [pv.const for pv in pvals_out if pv.is_known] + list(res)
    jaxpr_known, consts_known = trace_to_jaxpr(fun_known, known_avals, dce=False)
    ju = store["jaxpr_unk"]
    unknown = Jaxpr([], ju.constvars + ju.invars, ju.eqns, ju.outvars)
    return (ClosedJaxpr(jaxpr_known, consts_known), ClosedJaxpr(unknown, []),
            store["out_unknowns"], store["num_res"])


def transpose_jaxpr(closed: ClosedJaxpr, linear):
    """Jaxpr of (non-linear inputs, output cotangents) -> cotangents of the linear inputs."""
    from .tracing import trace_to_jaxpr
    in_avals = closed.in_avals
    res_avals = [a for a, lin in zip(in_avals, linear, strict=True) if not lin]
    ct_avals = [a.strip_weak() for a in closed.out_avals]

    def f(*args):
        res, cts = args[:len(res_avals)], args[len(res_avals):]
        it = iter(res)
        prim_args = [UndefinedPrimal(a) if lin else next(it) for a, lin in zip(in_avals, linear)]
        cts_in = backward_pass(closed.jaxpr, closed.consts, prim_args, list(cts))
        return [instantiate(c) for c, lin in zip(cts_in, linear) if lin]
    jaxpr, consts = trace_to_jaxpr(f, res_avals + ct_avals)
    return ClosedJaxpr(jaxpr, consts)
