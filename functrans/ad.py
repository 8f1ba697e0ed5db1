"""Automatic differentiation as transformations of the IR (the user-facing functions
that call these live in transforms.py).

jvp: an interpreter reading the primitives' JVP rules, with symbolic zero tangents.
linearize: jvp under online partial evaluation (known primals, unknown tangents), which
    yields a linear jaxpr and its residuals.
transpose: a backward pass over a linear jaxpr reading the transpose rules; tapped values
    (`capture_cotangent`) add their cotangents to `transpose_jaxpr`'s outputs.
jvp_jaxpr / partial_eval_jaxpr / transpose_jaxpr: the same three as jaxpr -> jaxpr
    functions. Reverse mode composes them in reverse.derive, which turns a recorded tape
    into a residual and a backward program (for `vjp`, `grad`, `jacrev` and the facade's
    `.backward()` alike). Higher order falls out of composition.
"""
from __future__ import annotations

import threading
import weakref
from typing import NamedTuple

from . import staged_rules
from .core import (Array, ClosedJaxpr, FunctransError, Jaxpr, JaxprEqn, Literal, RuleNotImplementedError,
                   ShapedArray, Trace, Tracer, UndefinedPrimal, Var, Zero, bind_below, eval_jaxpr,
                   full_lower, get_aval, new_main, to_concrete, value_of, with_origin)
from .primitives import elementwise as ew
from .primitives.base import instantiate, zeros
from .tracing import trace_to_jaxpr

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
    transformation = "forward mode (ft.jvp, ft.jacfwd, ft.hessian)"

    def pure(self, val):
        return JVPTracer(self, val, Zero(_tangent_aval(val)))

    lift = pure

    def process_primitive(self, prim, tracers, params):
        primals = [t.primal for t in tracers]
        tangents = [t.tangent for t in tracers]
        if all(type(t) is Zero for t in tangents):
            out = bind_below(prim, primals, params)
            if prim.multiple_results:
                return with_origin([JVPTracer(self, o, Zero(_tangent_aval(o))) for o in out],
                                   prim)
            return with_origin(JVPTracer(self, out, Zero(_tangent_aval(out))), prim)
        if prim.jvp is None:
            raise _rule_missing(prim, "jvp", "jvp=...")
        # the rule staged once per signature on concrete values (staged_rules)
        p_out, t_out = staged_rules.jvp_rule(prim)(primals, tangents, **params)
        if prim.multiple_results:
            return with_origin([JVPTracer(self, p, t) for p, t in zip(p_out, t_out,
                                                                      strict=True)], prim)
        return with_origin(JVPTracer(self, p_out, t_out), prim)


def _raw(x):
    """A strong Array's raw array (a weak one stays: its weak type is its aval's)."""
    return value_of(x) if type(x) is Array and not x.weak_type else x


def jvp_flat(f_flat, primals, tangents, instantiate_zeros=True):
    with new_main(JVPTrace) as main:
        trace = JVPTrace(main)
        tracers_in = [JVPTracer(trace, _raw(p), _raw(t) if is_float(get_aval(p))
                                else Zero(_tangent_aval(p)))
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
    transformation = "partial evaluation (ft.linearize)"

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
# the same transformations as jaxpr -> jaxpr functions (for primitives that carry
# sub-jaxprs: control flow, jit, checkpoint, custom rules)

def _jaxpr_fun(closed):
    return lambda *xs: eval_jaxpr(closed.jaxpr, closed.consts, *xs)


def jvp_jaxpr(closed: ClosedJaxpr, nonzeros, instantiate):
    """Jaxpr of (primals, nonzero tangents) -> (primal outs, nonzero tangent outs).

    Returns (closed_jvp, out_nonzeros); `instantiate` (bool or list) forces tangent outputs
    to be present even when symbolically zero."""
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


class _Captures(threading.local):
    def __init__(self):
        self.stack = []


_CAPTURES = _Captures()


def capture_cotangent(key, ct):
    """Called by a tap's transpose rule: ct is the cotangent of the tapped value `key`,
    an extra output of the transpose_jaxpr now running."""
    _CAPTURES.stack[-1][key] = ct


def transpose_jaxpr(closed: ClosedJaxpr, linear, captures=()):
    """Jaxpr of (non-linear inputs, output cotangents) -> cotangents of the linear inputs,
    then the cotangents captured for `captures` ((key, aval) pairs; zeros if none flowed)."""
    in_avals = closed.in_avals
    res_avals = [a for a, lin in zip(in_avals, linear, strict=True) if not lin]
    ct_avals = [a.strip_weak() for a in closed.out_avals]

    def f(*args):
        res, cts = args[:len(res_avals)], args[len(res_avals):]
        it = iter(res)
        prim_args = [UndefinedPrimal(a) if lin else next(it) for a, lin in zip(in_avals, linear)]
        sink = {}
        _CAPTURES.stack.append(sink)
        try:
            cts_in = backward_pass(closed.jaxpr, closed.consts, prim_args, list(cts))
        finally:
            _CAPTURES.stack.pop()
        return ([instantiate(c) for c, lin in zip(cts_in, linear) if lin]
                + [instantiate(sink.get(k, Zero(a))) for k, a in captures])
    jaxpr, consts = trace_to_jaxpr(f, res_avals + ct_avals)
    return ClosedJaxpr(jaxpr, consts)
