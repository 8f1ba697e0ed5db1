"""The reverse-mode deriver: record once, derive once per program structure.

A recorded program is a tape: equations over value slots, the slots that are inputs, the
values still available. `derive` linearizes and transposes it with the core's own
machinery (`jvp_jaxpr`, `partial_eval_jaxpr`, `transpose_jaxpr`). The linearization's
known part is rewritten to read the available recorded values instead of recomputing
them, which leaves a *residual program* holding only the derivative-side work (cos(x) for
sin); the transposed linear part is the *backward program*. Taps (an identity primitive
whose transpose calls `capture_cotangent`: the facade's hooks and retain_grad) add the
cotangents they see to the backward program's outputs.

Both faces use it: `vjp(f)` runs `f` eagerly under the recording interpreter here (so
Python control flow on values and side effects behave exactly as without the
transformation); the facade lowers its node graph into a tape (facade/lower.py). When to
derive, what to cache and how to run the result is the executor's (executor.py). A
training loop pays for recording and for two straight-line evaluations, not for tracing at
every step.
"""
from __future__ import annotations

import weakref
from array import array

import numpy as np

from .ad import JVPTrace, JVPTracer, is_float, jvp_jaxpr, partial_eval_jaxpr, transpose_jaxpr
from .batching import AxisFrame, BatchTrace, BatchTracer, apply_batch_rule, batch_jaxpr
from .core import (ClosedJaxpr, Jaxpr, JaxprEqn, Literal, Trace, Tracer, Var, Zero, _thread_state,
                   array_module, bind_below, eval_jaxpr, get_aval, has_tracer, to_concrete)
from .backends.memory import DERIVED, approx_bytes
from .passes import dce_jaxpr
from .runtime import run as run_program



class RecordTracer(Tracer):
    # aval, shape, dtype and weak_type are plain slots (they shadow Tracer's properties):
    # functrans.numpy reads them several times per recorded op
    __slots__ = ("val", "idx", "aval", "shape", "dtype", "weak_type", "batched")

    def __init__(self, trace, val, idx, aval, batched=False):
        self._trace = trace
        self._origin = None
        self.val = val
        self.idx = idx
        self.aval = aval
        self.shape = aval.shape
        self.dtype = aval.dtype
        self.weak_type = aval.weak_type
        self.batched = batched          # val carries a stripped vmap's batch axis

    def to_concrete_value(self):
        return None if self.batched else to_concrete(self.val)


class _Tape:
    """Every value the recorded program touched, and its equations over their indices.

    Intermediate arrays the expected residual program will not read are held only weakly,
    so that, as in eager code, they are freed as soon as the user's code drops them."""

    def __init__(self, keep=None):
        self.values: list = []
        self.avals: list = []
        self.consts: list = []           # indices of captured constants
        self.const_ids: dict = {}
        self.const_tracers: dict = {}    # index of a constant -> its tracer (RecordTrace.pure)
        self.eqns: list = []             # (primitive, params, in_idx, out_idx)
        self.keep = keep                 # indices to hold strongly (None: all)
        self.strip = None                # an outer jvp main whose tracers are unwrapped
        self.const_tangents: list = []
        self.batch = None                # an outer vmap trace whose tracers are unwrapped
        self.dims: list = []             # then: each value's batch axis (or None)
        self.keepalive: list = []        # and the unwrapped tracers, whose ids are keys
        self.fun = None                  # the user's function, named in error messages
        self.live: list = []             # per value: depends on a differentiated input
        self.companions: list = []       # residual forms' equations (derive's companions)

    def add(self, val, strong=False, aval=None, dim=None, live=False):
        i = len(self.values)
        self.avals.append(get_aval(val) if aval is None else aval)
        self.live.append(live and self.avals[i].dtype.kind in "fc")     # (is_float, inline)
        if self.batch is not None:
            self.dims.append(dim)
        if not strong and self.keep is not None and i not in self.keep \
                and type(val) is np.ndarray:
            val = weakref.ref(val)
        self.values.append(val)
        return i

    def value(self, i):
        v = self.values[i]
        return v() if type(v) is weakref.ref else v


class RecordTrace(Trace):
    @property
    def transformation(self):
        """How errors name it, with the differentiated function where known."""
        fun = self.main.global_data.fun
        name = f" of `{getattr(fun, '__name__', type(fun).__name__)}`" if fun else ""
        return f"reverse mode (ft.grad, ft.vjp, ft.jacrev){name}"

    def origin_of(self, tracer):
        """Read off the tape: the equation that produced the tracer's value, if any."""
        tape = self.main.global_data
        for prim, _, _, out_idx in reversed(tape.eqns):
            if tracer.idx in out_idx:
                return f"the output of `{prim.name}`"
        return "a captured constant" if tracer.idx in tape.consts else \
            "an input of the differentiated function"

    def pure(self, val):
        tape = self.main.global_data
        idx = tape.const_ids.get(id(val))
        if idx is None:
            tangent = None
            if tape.strip is not None and isinstance(val, JVPTracer) \
                    and val._trace.main is tape.strip:
                val, tangent = val.primal, val.tangent      # see vjp_flat: jvp of vjp
            if tape.batch is not None:
                tape.keepalive.append(val)      # its id keys const_ids: keep it unique
                idx = tape.const_ids[id(val)] = _add_unbatched(tape, val, True)
            else:
                idx = tape.const_ids[id(val)] = tape.add(val, strong=True)
            tape.consts.append(idx)
            tape.const_tangents.append(tangent)
        if tape.batch is not None:
            return RecordTracer(self, tape.values[idx], idx, tape.avals[idx],
                                tape.dims[idx] is not None)
        t = tape.const_tracers.get(idx)
        if t is None:       # one tracer per constant, however often it is read
            t = tape.const_tracers[idx] = RecordTracer(self, tape.values[idx], idx,
                                                       tape.avals[idx])
        return t

    lift = pure

    def process_primitive(self, prim, tracers, params):
        tape = self.main.global_data
        if tape.batch is not None:
            return self._process_batched(tape, prim, tracers, params)
        avals = tape.avals                      # the input avals are known already
        live = tape.live
        # (loops, not comprehensions: each of those is a call of its own, per recorded op)
        in_idx, lv, vals, in_avals, concrete = [], [], [], [], True
        for t in tracers:
            i = t.idx
            in_idx.append(i)
            lv.append(live[i])
            in_avals.append(avals[i])
            v = t.val
            vals.append(v)
            if concrete and isinstance(v, Tracer):
                concrete = False
        in_idx = tuple(in_idx)
        is_live = True in lv
        if is_live and prim.extra.get("known_outputs_first") and tape.strip is None:
            form = residual_form(prim, params, in_avals, lv)
            if form is not None:
                return self._record_form(tape, prim, params, in_idx, form)
        s = _thread_state
        aval = None
        if s.dynamic_trace.level == 0 and concrete:    # bind_below, inline
            # (without params, calls without **{}: each built a dict, per recorded op)
            if not s.trusted:
                aval = prim.abstract_eval(*in_avals, **params) if params else \
                    prim.abstract_eval(*in_avals)
            xp = array_module(*vals)
            out = prim.impl(xp, *vals, **params) if params else prim.impl(xp, *vals)
        else:
            out = bind_below(prim, vals, params, in_avals)
        if not prim.multiple_results:
            # the shape rule's aval, where it ran and is strong (a weak one is the value's:
            # the recorded value is a plain array), saves get_aval on the result
            i = tape.add(out, live=is_live,
                         aval=aval if aval is not None and not aval.weak_type else None)
            tape.eqns.append((prim, params, in_idx, (i,)))
            return RecordTracer(self, out, i, avals[i])
        out_idx = tuple([tape.add(o, live=is_live) for o in out])
        tape.eqns.append((prim, params, in_idx, out_idx))
        return [RecordTracer(self, o, i, tape.avals[i]) for o, i in zip(out, out_idx)]

    def _record_form(self, tape, prim, params, in_idx, form):
        """Run the equation as its residual form (reverse.residual_form): its outputs and
        the residuals are recorded, the form's equations as the tape's companions, so the
        derived residual program reads them instead of running the loop again."""
        j = form.jaxpr
        idx = dict(zip(j.invars, in_idx))
        held = {i: tape.value(i) for i in in_idx}
        for e in j.eqns:
            ins = [idx[a] if type(a) is Var else a for a in e.invars]
            vals = [held[i] if type(i) is int else i.val for i in ins]
            out = bind_below(e.primitive, vals, e.params,
                             [tape.avals[i] if type(i) is int else i.aval for i in ins])
            out = out if e.primitive.multiple_results else [out]
            oi = tuple([tape.add(o, live=True) for o in out])
            held.update(zip(oi, out))
            idx.update(zip(e.outvars, oi))
            tape.companions.append((e.primitive, e.params, tuple(ins), oi))
        n_out = len(prim.abstract_eval(*[tape.avals[i] for i in in_idx], **params))
        out_idx = tuple([idx[v] for v in j.outvars[:n_out]])
        tape.eqns.append((prim, params, in_idx, out_idx))
        return [RecordTracer(self, held[i], i, tape.avals[i]) for i in out_idx]

    def _process_batched(self, tape, prim, tracers, params):
        """Under a stripped vmap: the shape rule on the unbatched avals (so errors name the
        shapes the user's function sees), the batching rule on the batched values."""
        in_idx = tuple([t.idx for t in tracers])
        out_aval = prim.abstract_eval(*[tape.avals[i] for i in in_idx], **params)
        dims = [tape.dims[i] for i in in_idx]
        out, out_dim = apply_batch_rule(prim, [t.val for t in tracers], dims, params)
        if not prim.multiple_results:
            i = tape.add(out, aval=out_aval, dim=out_dim)
            tape.eqns.append((prim, params, in_idx, (i,)))
            return RecordTracer(self, out, i, out_aval, out_dim is not None)
        out_idx = tuple([tape.add(o, aval=a, dim=d) for o, a, d in zip(out, out_aval, out_dim)])
        tape.eqns.append((prim, params, in_idx, out_idx))
        return [RecordTracer(self, o, i, a, d is not None)
                for o, i, a, d in zip(out, out_idx, out_aval, out_dim)]


def _input(trace, tape, p):
    """The recording's tracer of a primal (each primal its own index, even if repeated);
    under a stripped vmap, its batched value (see vjp_flat)."""
    if tape.batch is None:
        i = tape.add(p, strong=True, live=True)
        return RecordTracer(trace, p, i, tape.avals[i])
    i = _add_unbatched(tape, p, True)
    return RecordTracer(trace, tape.values[i], i, tape.avals[i], tape.dims[i] is not None)


def _add_unbatched(tape, val, strong):
    """Add a value entering the recording under a stripped vmap: that vmap's tracers
    are unwrapped into their batched value and axis."""
    if isinstance(val, BatchTracer) and val._trace.main is tape.batch.main:
        return tape.add(val.val, strong, val.aval, val.batch_dim)
    return tape.add(val, strong)


def _params_key(params):
    return tuple(sorted(params.items()))


def _same_key(a, b):
    try:
        return a == b
    except (TypeError, ValueError):     # params holding arrays compare elementwise
        return False


def _structure_key(tape, n_in, out_idx):
    """The recorded program's structure (params in call order: the same call site gives the
    same order, another order only derives again).

    The equations are one bytes string of int64s, each equation its primitive's index in
    the key's own tuple of primitives, its input and output counts and indices, with the
    params of those that have any beside it (by their position in the string); the
    constants, their indices and avals' indices, likewise. Bytes are not tracked by the
    cyclic collector and cache their hash: a tuple per equation, as first written, left ~3
    new tracked objects per equation (4,000 for a 1,300-op chain) for a collection to scan
    when ft.grad's pause ended, about 4% of its call, and was hashed again at each lookup
    of the key. A residual form's companions may read literals: those stay a tuple."""
    prims, avals = {}, {}

    def eqns(es):
        flat, params = [], []
        put = flat.extend
        for p, pa, ii, oi in es:
            if pa:
                params.append((len(flat), tuple(pa.items())))
            put((prims.setdefault(p, len(prims)), len(ii), len(oi)))
            put(ii)
            put(oi)
        try:
            return array("q", flat).tobytes(), tuple(params)
        except TypeError:       # a literal operand (a residual form's companions): a tuple
            return tuple(flat), tuple(params)
    body = eqns(tape.eqns)
    companions = eqns(tape.companions)
    consts = array("q", [v for i in tape.consts
                         for v in (i, avals.setdefault(tape.avals[i], len(avals)))]).tobytes()
    return (tuple(tape.avals[:n_in]), consts, body, tuple(out_idx), companions,
            tuple(prims), tuple(avals))


class _Derived:
    """The residual and backward programs of one recorded program structure, and their
    jvp/vmap-transformed versions (they are pure, so those can be cached too)."""
    __slots__ = ("residual", "backward", "value_idx", "keep", "nonzero", "n_out",
                 "transformed", "forward", "all_idx", "key")

    def __init__(self, residual, backward, value_idx, nonzero, n_out):
        self.residual, self.backward = residual, backward
        self.value_idx, self.nonzero, self.n_out = value_idx, nonzero, n_out
        self.keep = frozenset(value_idx)
        self.transformed: dict = {}
        self.key = None                  # the structure key it is cached under

    def approx_bytes(self):
        """Its charge in the executor's cache: both programs (the jvp/vmap variants it
        derives later live with it, a few per entry)."""
        return approx_bytes(self.residual) + approx_bytes(self.backward) + 8 * len(
            self.value_idx)

    def tangents(self, nonzero, values, residuals, tangents):
        """Tangents of the outputs and of the residuals along input tangents (a cached
        jvp of forward + residual programs whose primal side reads the recorded values)."""
        key = ("tangent", nonzero)
        entry = self.transformed.get(key)
        if entry is None:
            entry = self.transformed[key] = self._tangent_program(nonzero)
        prog, r_pos, zeros_out = entry
        args = list(values) + [residuals[k] for k in r_pos] + list(tangents)
        if has_tracer(args) or _thread_state.dynamic_trace.level:
            outs = iter(eval_jaxpr(prog.jaxpr, prog.consts, *args))
        else:
            outs = iter(run_program(prog, *args))
        # symbolic zeros stay symbolic, so the jvp'd backward program skips their work
        return [z if z is not None else next(outs) for z in zeros_out]

    def _tangent_program(self, nonzero):
        fwd, res = self.forward, self.residual.jaxpr
        q = Jaxpr(res.constvars, fwd.invars, fwd.eqns + res.eqns, fwd.outvars + res.outvars)
        jvp_c, out_nz = jvp_jaxpr(ClosedJaxpr(q, self.residual.consts), list(nonzero), False)
        n_q_in, n_q_out = len(fwd.invars), len(q.outvars)
        produced = {v for e in res.eqns for v in e.outvars}
        r_pos = [k for k, v in enumerate(res.outvars) if type(v) is Var and v in produced
                 and v not in res.outvars[:k]]
        table = {}
        for e in fwd.eqns:
            table[_eqn_key(e.primitive, e.params, e.invars)] = (e.outvars, None)
        res_avail = {res.outvars[k] for k in r_pos}
        for e in res.eqns:
            if all(v in res_avail for v in e.outvars):
                table[_eqn_key(e.primitive, e.params, e.invars)] = (e.outvars, None)
        j = jvp_c.jaxpr
        env = dict(zip(j.invars[:n_q_in], fwd.invars))
        kept = _reuse(j.eqns, table, env)
        t_out = [env.get(a, a) if type(a) is Var else a for a in j.outvars[n_q_out:]]
        eqn_outs = [v for e in fwd.eqns for v in e.outvars]
        invars = (list(fwd.invars) + eqn_outs + [res.outvars[k] for k in r_pos]
                  + list(j.invars[n_q_in:]))
        prog = dce_jaxpr(Jaxpr(j.constvars, invars, kept, t_out))
        zeros_out = [None if nz else Zero(v.aval.strip_weak())
                     for v, nz in zip(q.outvars, out_nz, strict=True)]
        return ClosedJaxpr(prog, jvp_c.consts), r_pos, zeros_out

    def run(self, which, args):
        """Evaluate the residual or backward program. Under one jvp or vmap level whose
        values are concrete underneath, evaluate its cached transformed program on them
        instead of interpreting every equation through that transformation."""
        closed = self.residual if which == "residual" else self.backward
        tracers = [a for a in args if isinstance(a, Tracer)]
        if tracers and _thread_state.dynamic_trace.level == 0:
            trace = tracers[0]._trace
            if all(t._trace.main is trace.main for t in tracers):
                if type(trace) is JVPTrace:
                    out = self._run_jvp(which, closed, trace, args)
                    if out is not None:
                        return out
                elif type(trace) is BatchTrace:
                    out = self._run_batched(which, closed, trace, args)
                    if out is not None:
                        return out
        if not tracers and _thread_state.dynamic_trace.level == 0:
            return run_program(closed, *args)
        return eval_jaxpr(closed.jaxpr, closed.consts, *args)

    def _run_jvp(self, which, closed, trace, args):
        primals = [a.primal if isinstance(a, Tracer) else a for a in args]
        if has_tracer(primals):
            return None
        tangents = [a.tangent if isinstance(a, Tracer) else None for a in args]
        if has_tracer(tangents):
            return None
        nonzero = tuple(t is not None and type(t) is not Zero for t in tangents)
        key = (which, "jvp", nonzero)
        entry = self.transformed.get(key)
        if entry is None:
            entry = self.transformed[key] = jvp_jaxpr(closed, list(nonzero), False)
        prog, out_nz = entry
        outs = run_program(prog, *primals, *[t for t, nz in zip(tangents, nonzero) if nz])
        n = len(closed.out_avals)
        t_out = iter(outs[n:])
        return [JVPTracer(trace, p, next(t_out) if nz else Zero(a.strip_weak()))
                for p, nz, a in zip(outs[:n], out_nz, closed.out_avals)]

    def _run_batched(self, which, closed, trace, args):
        if type(trace.main.global_data) is AxisFrame:
            return None                 # a named axis: the generic path sees the name
        vals, batched = [], []
        for a in args:
            if isinstance(a, Tracer):
                v = a.val
                if isinstance(v, Tracer):
                    return None
                if a.batch_dim:
                    v = np.moveaxis(v, a.batch_dim, 0)
                vals.append(v)
                batched.append(a.batch_dim is not None)
            else:
                vals.append(a)
                batched.append(False)
        size = trace.axis_size
        key = (which, "vmap", tuple(batched), size)
        entry = self.transformed.get(key)
        if entry is None:
            entry = self.transformed[key] = batch_jaxpr(closed, size, batched, False)
        prog, out_b = entry
        outs = run_program(prog, *vals)
        return [BatchTracer(trace, o, 0 if b else None) for o, b in zip(outs, out_b)]


def _eqn_key(prim, params, ins):
    return (prim, None if params is None else _params_key(params),
            tuple([a if type(a) is Var else literal_key(a) for a in ins]))


def literal_key(a):
    """A Literal's identity for matching equal equations: a single value by its bits (so
    0.0 and -0.0 differ, and the facade's tape merges exactly the steps this matches), a
    larger array by the object."""
    v = a.val
    return (np.asarray(v).tobytes() if np.size(v) == 1 else ("array", id(v)), a.aval)


def _reuse(eqns, table, env, alias=None, extended=None):
    """Equations whose primitive, params and (renamed) inputs match a table entry
    (outputs, their availability or None for all) are dropped and their outputs renamed
    to the entry's; the rest are kept (and entered). An output that is not available is
    still computed, but named by the entry's output in later keys, so the equations that
    read it find their entries (`alias`: such names given from the start).

    `extended`: (primitive, inputs) -> table entry, for primitives whose partial
    evaluation keeps the equation's outputs first and appends residuals (a scan's known
    part, a jit's: other params, more outputs). Such an equation is kept (it computes the
    residuals) and its leading outputs are named by the entry's, as unavailable ones are:
    the equations downstream then find their entries and read the recorded values rather
    than recomputing everything after the scan from inputs no node saved, while what
    reads the outputs themselves reads the kept equation's (so a traced forward's own
    scan is not kept alive beside it)."""
    kept = []
    alias = {} if alias is None else alias
    for e in eqns:
        ins = [env.get(a, a) if type(a) is Var else a for a in e.invars]
        named = [alias.get(a, a) if type(a) is Var else a for a in ins] if alias else ins
        key = _eqn_key(e.primitive, e.params, named)
        hit = table.get(key)
        if hit is not None and [v.aval for v in hit[0]] == [v.aval for v in e.outvars]:
            outs, avail = hit
            if avail is None:
                env.update(zip(e.outvars, outs))
                continue
            _rename(e.outvars, outs, avail, env, alias)
        else:
            table[key] = (e.outvars, None)
            hit = extended.get(_eqn_key(e.primitive, None, named)) if extended else None
            if hit is not None and [v.aval for v in hit[0]] == [
                    v.aval for v in e.outvars[:len(hit[0])]]:
                alias.update(zip(e.outvars, hit[0]))
        kept.append(JaxprEqn(e.primitive, ins, e.params, e.outvars))
    return kept


def _rename(outvars, outs, avail, env, alias):
    """Name outvars by the entry's outputs: read where available, else an alias for keys."""
    for v, h, a in zip(outvars, outs, avail):
        if a:
            env[v] = h
        else:
            alias[v] = h


DERIVE_STATS = {"derived": 0}     # how many programs were derived (vjp and backward())


def residual_form(prim, params, in_avals, nonzero):
    """How to run one equation of `prim` so that it also produces the residuals its
    backward reads, for a primitive whose partial evaluation keeps a known copy of the
    equation with residual outputs appended (`known_outputs_first`: a scan's known part
    returns its outputs, then each step's residuals stacked). Reverse mode records the
    forward before deriving it; evaluated as is, such an equation's residuals are lost
    and the derived residual program runs the loop again. Run as its residual form, the
    recording holds them, and `derive` (given the form's equations as `companions`) reads
    them where its known part would recompute them: the loop runs once, as JAX's
    linearize does.

    nonzero: per input, whether its tangent is nonzero (it depends on a differentiated
    input), which decides the split. Returns the known part of the equation's
    linearization, the same one `derive` builds (so its equations compare equal there):
    a ClosedJaxpr from the equation's inputs to its outputs then the residuals, or None
    when the primitive has no such form or no input is differentiated. Derived once per
    signature (kept in the executor's cache)."""
    if not prim.extra.get("known_outputs_first") or not any(nonzero):
        return None
    key = ("residual form", prim, _params_key(params), tuple(in_avals), tuple(nonzero))
    try:
        hit = DERIVED.get(key)
    except TypeError:                   # params that are not hashable: no form
        return None
    if hit is None:
        hit = _residual_form(prim, params, list(in_avals), list(nonzero))
        DERIVED.put(key, (hit,), approx_bytes(key) + (0 if hit is None else
                                                      approx_bytes(hit)))
        return hit
    return hit[0]


def _residual_form(prim, params, in_avals, nonzero):
    out = prim.abstract_eval(*in_avals, **params)
    out_avals = out if prim.multiple_results else [out]
    ins, outs = [Var(a) for a in in_avals], [Var(a) for a in out_avals]
    one = Jaxpr([], ins, [JaxprEqn(prim, ins, params, outs)], outs)
    jvp_c, _ = jvp_jaxpr(ClosedJaxpr(one, []), nonzero, True)
    n_t, n_out = sum(nonzero), len(outs)
    known, _, _, _ = partial_eval_jaxpr(jvp_c, [False] * len(ins) + [True] * n_t,
                                        [False] * n_out + [True] * n_out)
    j = known.jaxpr
    made = {v for e in j.eqns for v in e.outvars}
    if known.consts or not all(type(v) is Var and v in made for v in j.outvars[:n_out]):
        return None          # its outputs are not all computed by its equations
    return known


def derive(avals, eqns, n_in, consts, out_idx, available, captures=(), companions=()):
    """Residual and backward programs of a tape: equations (primitive, params, input slots
    or Literals, output slots) over value slots of these avals; slots 0..n_in-1 are the
    differentiated inputs, `consts` the other inputs. The residual program reads the
    values that are `available` and recomputes the others; the backward program returns
    the float inputs' cotangents, then the cotangents captured by taps for `captures`
    ((key, aval) pairs). companions: equations in the same form that the recording
    evaluated besides the forward (residual_form's: a loop's residuals), over slots of
    their own except for the outputs they share with a forward equation; where the
    known part would compute the same thing, it reads their available values."""
    DERIVE_STATS["derived"] += 1
    var = [Var(a) for a in avals]
    in_idx = list(range(n_in)) + list(consts)
    jeqns = [JaxprEqn(p, [var[i] if type(i) is int else i for i in ii], pa,
                      [var[i] for i in oi]) for p, pa, ii, oi in eqns]
    forward = Jaxpr([], [var[i] for i in in_idx], jeqns, [var[i] for i in out_idx])
    nonzero = [is_float(avals[i]) for i in range(n_in)]
    n_out, n_t = len(out_idx), sum(nonzero)
    jvp_closed, _ = jvp_jaxpr(ClosedJaxpr(forward, []), nonzero + [False] * len(consts),
                              True)
    known, unknown, _, num_res = partial_eval_jaxpr(
        jvp_closed, [False] * len(in_idx) + [True] * n_t, [False] * n_out + [True] * n_out)
    n_known_out = len(known.jaxpr.outvars) - num_res
    # the known part recomputes the forward: point it at the recorded values instead
    eqn_out_idx = [i for _, _, _, oi in eqns for i in oi]
    table, extended = {}, {}
    for e, (_, _, _, oi) in zip(jeqns, eqns):
        avail = [available[i] for i in oi]
        entry = (e.outvars, None if all(avail) else avail)
        table[_eqn_key(e.primitive, e.params, e.invars)] = entry
        if e.primitive.extra.get("known_outputs_first") or \
                e.primitive.extra.get("known_part_leads"):
            extended[_eqn_key(e.primitive, None, e.invars)] = entry
    companion_idx = []
    for p, pa, ii, oi in companions:
        avail = [available[i] for i in oi]
        table[_eqn_key(p, pa, [var[i] if type(i) is int else i for i in ii])] = (
            [var[i] for i in oi], None if all(avail) else avail)
        companion_idx.extend(i for i in oi if i not in companion_idx)
    env = dict(zip(known.jaxpr.invars, forward.invars))
    # array literals of the tape became constants of the known part: key them alike
    lits = {id(a.val): a for e in jeqns for a in e.invars if type(a) is Literal}
    alias = {v: lits[id(c)] for v, c in zip(known.jaxpr.constvars, known.consts)
             if id(c) in lits}
    kept = _reuse(known.jaxpr.eqns, table, env, alias, extended)
    res_out = [env.get(a, a) if type(a) is Var else a
               for a in known.jaxpr.outvars[n_known_out:]]
    residual = dce_jaxpr(Jaxpr(known.jaxpr.constvars, [], kept, res_out))
    read = {a for e in residual.eqns for a in e.invars if type(a) is Var}
    read.update(a for a in residual.outvars if type(a) is Var)
    produced = set(eqn_out_idx)
    value_idx = [i for i in in_idx + eqn_out_idx + [i for i in companion_idx
                                                     if i not in produced] if var[i] in read]
    residual = Jaxpr(residual.constvars, [var[i] for i in value_idx], residual.eqns,
                     residual.outvars)
    backward = transpose_jaxpr(unknown, [False] * num_res + [True] * n_t, captures)
    d = _Derived(ClosedJaxpr(residual, known.consts), backward, value_idx, nonzero, n_out)
    d.forward, d.all_idx = forward, in_idx + eqn_out_idx
    return d


def joined_program(derived):
    """The residual program followed by the backward program, as one ClosedJaxpr of
    (values at derived.value_idx, output cotangents) -> what the backward returns."""
    res, bwd = derived.residual, derived.backward
    r, b = res.jaxpr, bwd.jaxpr
    n_res = len(r.outvars)
    env = dict(zip(b.invars[:n_res], r.outvars))

    def sub(a):
        return env.get(a, a) if type(a) is Var else a
    eqns = list(r.eqns) + [JaxprEqn(e.primitive, [sub(a) for a in e.invars], e.params,
                                    e.outvars) for e in b.eqns]
    return ClosedJaxpr(Jaxpr(list(r.constvars) + list(b.constvars), list(r.invars) +
                             list(b.invars[n_res:]), eqns, [sub(a) for a in b.outvars]),
                       list(res.consts) + list(bwd.consts))


def recorded_value(x):
    """What a tracer of a finished recording stands for (an aux output of the function
    vjp recorded): its array, batched again if the recording lifted out a vmap."""
    if type(x) is not RecordTracer:
        return x
    tape = x._trace.main.global_data
    return x.val if tape.batch is None else _rewrap(tape.batch, tape, x.idx, x.val)


def _rewrap(trace, tape, i, v):
    d = tape.dims[i]
    return v if d is None or v is None else BatchTracer(trace, v, d)


def _strippable_vmap(primals):
    """The vmap trace to lift out of the recording when it is the innermost
    transformation (the batched values may be primals or captured by the function): the
    recording then runs the batching rules itself, one interpreter per op instead of two."""
    s = _thread_state
    main = s.trace_stack[-1]
    if main.trace_type is not BatchTrace or s.dynamic_trace.level > main.level \
            or type(main.global_data) is AxisFrame:     # a named axis: its trace's rules
        return None
    for p in primals:
        if isinstance(p, Tracer) and p._trace.main is not main:
            return None
    return BatchTrace(main)


def _strippable_jvp(primals):
    """The jvp trace to lift out of the recording, when every traced primal belongs to
    one jvp level that is the innermost transformation (so nothing else sees the ops)."""
    tracers = [p for p in primals if isinstance(p, Tracer)]
    if not tracers or not all(type(t) is JVPTracer for t in tracers):
        return None
    trace = tracers[0]._trace
    s = _thread_state
    if any(t._trace.main is not trace.main for t in tracers) or \
            trace.main is not s.trace_stack[-1] or s.dynamic_trace.level > trace.main.level:
        return None
    return trace


__all__ = ["RecordTrace", "recorded_value", "derive", "joined_program", "residual_form"]
