"""The reverse-mode deriver: record once, derive once per program structure.

A recorded program is a tape: equations over value slots, the slots that are inputs, the
values still available. `derive` linearizes and transposes it with the core's own
machinery (`jvp_jaxpr`, `partial_eval_jaxpr`, `transpose_jaxpr`). The linearization's
known part is rewritten to read the available recorded values instead of recomputing
them, which leaves a *residual program* holding only the derivative-side work (cos(x) for
sin); the transposed linear part is the *backward program*. Taps (an identity primitive
whose transpose calls `capture_cotangent`: the facade's hooks and retain_grad) add the
cotangents they see to the backward program's outputs.

Both faces use it: `vjp(f)` runs `f` eagerly under a recording interpreter (so Python
control flow on values and side effects behave exactly as without the transformation)
and caches the derived programs by structure here; the facade lowers its node graph into
a tape (facade/lower.py) and caches by graph structure. A training loop pays for
recording and for two straight-line evaluations, not for tracing at every step.
"""
from __future__ import annotations

import threading
import weakref
from collections import OrderedDict

import numpy as np

from .ad import JVPTrace, JVPTracer, is_float, jvp_jaxpr, partial_eval_jaxpr, transpose_jaxpr
from .batching import AxisFrame, BatchTrace, BatchTracer, apply_batch_rule, batch_jaxpr
from .core import (ClosedJaxpr, Jaxpr, JaxprEqn, Literal, Trace, Tracer, Var, Zero, _thread_state,
                   bind_below, eval_jaxpr, get_aval, has_tracer, new_main,
                   to_concrete, trusted_eval)
from .passes import dce_jaxpr
from .runtime import gc_paused, run as run_program

_CACHE: OrderedDict = OrderedDict()      # structure key -> _Derived (oldest evicted first)
_CACHE_SIZE = 256
_LOCK = threading.Lock()


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
        self.eqns: list = []             # (primitive, params, in_idx, out_idx)
        self.keep = keep                 # indices to hold strongly (None: all)
        self.strip = None                # an outer jvp main whose tracers are unwrapped
        self.const_tangents: list = []
        self.batch = None                # an outer vmap trace whose tracers are unwrapped
        self.dims: list = []             # then: each value's batch axis (or None)
        self.keepalive: list = []        # and the unwrapped tracers, whose ids are keys
        self.fun = None                  # the user's function, named in error messages

    def add(self, val, strong=False, aval=None, dim=None):
        i = len(self.values)
        self.avals.append(get_aval(val) if aval is None else aval)
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
        return RecordTracer(self, tape.values[idx], idx, tape.avals[idx])

    lift = pure

    def process_primitive(self, prim, tracers, params):
        tape = self.main.global_data
        if tape.batch is not None:
            return self._process_batched(tape, prim, tracers, params)
        in_idx = tuple([t.idx for t in tracers])
        avals = tape.avals                      # the input avals are known already
        out = bind_below(prim, [t.val for t in tracers], params, [avals[i] for i in in_idx])
        if not prim.multiple_results:
            i = tape.add(out)
            tape.eqns.append((prim, params, in_idx, (i,)))
            return RecordTracer(self, out, i, tape.avals[i])
        out_idx = tuple([tape.add(o) for o in out])
        tape.eqns.append((prim, params, in_idx, out_idx))
        return [RecordTracer(self, o, i, tape.avals[i]) for o, i in zip(out, out_idx)]

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
        i = tape.add(p, strong=True)
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
    """The recorded program's structure (hashed once, by the cache lookup; params in call
    order: the same call site gives the same order, another order only derives again)."""
    return (tuple(tape.avals[:n_in]), tuple([(i, tape.avals[i]) for i in tape.consts]),
            tuple([(p, tuple(pa.items()), ii, oi) for p, pa, ii, oi in tape.eqns]),
            tuple(out_idx))


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
    part: other params, more outputs). Such an equation is kept (it computes the
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


def derive(avals, eqns, n_in, consts, out_idx, available, captures=()):
    """Residual and backward programs of a tape: equations (primitive, params, input slots
    or Literals, output slots) over value slots of these avals; slots 0..n_in-1 are the
    differentiated inputs, `consts` the other inputs. The residual program reads the
    values that are `available` and recomputes the others; the backward program returns
    the float inputs' cotangents, then the cotangents captured by taps for `captures`
    ((key, aval) pairs)."""
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
        if e.primitive.extra.get("known_outputs_first"):
            extended[_eqn_key(e.primitive, None, e.invars)] = entry
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
    value_idx = [i for i in in_idx + eqn_out_idx if var[i] in read]
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


# user function -> {signature: the _Derived it used last}; weak, so closures are not kept
_HINTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _hint_get(hint):
    if hint is None:
        return None
    fun, sig = hint
    try:
        return _HINTS.get(fun, {}).get(sig)
    except TypeError:               # not weak-referenceable
        return None


def _hint_set(hint, derived):
    if hint is None:
        return
    fun, sig = hint
    try:
        with _LOCK:
            per_fun = _HINTS.setdefault(fun, {})
            if len(per_fun) > 16:
                per_fun.clear()
            per_fun[sig] = derived
    except TypeError:
        pass


def vjp_flat(f_flat, primals, hint=None, has_aux=False):
    """(outputs, vjp) with vjp(cts) -> one cotangent per primal (zeros for integer ones).

    `hint` = (user function, hashable signature) names the derived programs used last
    time, so that recording holds only the values they read. has_aux: f_flat returns
    values on the side (read them with `recorded_value`), so an outer jvp is not lifted
    out (their tangents would be lost)."""
    outer = None if has_aux else _strippable_jvp(primals)
    vouter = _strippable_vmap(primals) if outer is None else None
    expected = _hint_get(hint)
    tape = _Tape(None if expected is None or outer is not None else expected.keep)
    tape.batch = vouter
    tape.fun = hint[0] if hint is not None else None
    if outer is not None:        # jvp of vjp: record on the primals, add tangents after
        tape.strip = outer.main
        in_tangents = [p.tangent if isinstance(p, JVPTracer) else Zero(get_aval(p).strip_weak())
                       for p in primals]
        primals = [p.primal if isinstance(p, JVPTracer) else p for p in primals]
    with new_main(RecordTrace, tape) as main:
        trace = RecordTrace(main)
        ins = [_input(trace, tape, p) for p in primals]
        outs = [trace.full_raise(o) for o in f_flat(*ins)]
        out_idx = [o.idx for o in outs]
        outputs = [o.val for o in outs]
        if vouter is not None:
            outputs = [_rewrap(vouter, tape, i, v) for i, v in zip(out_idx, outputs)]
    del ins, outs, trace
    n_in = len(primals)
    values = [tape.value(i) for i in range(len(tape.values))]
    if vouter is not None:
        values = [_rewrap(vouter, tape, i, v) for i, v in enumerate(values)]
    available = [v is not None for v in values]
    key = _structure_key(tape, n_in, out_idx)
    if expected is not None and _same_key(expected.key, key):
        derived = expected              # the usual case: comparing is cheaper than hashing
    else:
        try:
            derived = _CACHE.get(key)
        except TypeError:               # an unhashable param: derive without caching
            derived = key = None
    if derived is not None and not all([available[i] for i in derived.value_idx]):
        derived = None             # the structure changed and a value it reads is gone
        key = None
    if derived is None and key is not None and outer is None and vouter is None and all(
            available) and _first_seen(key) and not _thread_state.dynamic_trace.level \
            and not has_tracer(values):
        return outputs, _interpreted_vjp(tape, values, n_in, out_idx, key)
    if derived is None:
        derived = _derive_cached(tape.avals, tape.eqns, n_in, tape.consts, out_idx, available,
                                 key)
    if derived is not expected:
        _hint_set(hint, derived)
    with trusted_eval():
        residuals = derived.run("residual", [values[i] for i in derived.value_idx])
        if outer is not None:
            outputs, residuals = _with_tangents(outer, derived, tape, values, in_tangents,
                                                outputs, residuals)
    del tape, values
    return outputs, _backward_fn(derived, residuals)


def _derive_cached(avals, eqns, n_in, consts, out_idx, available, key):
    """derive, with the collector paused; cached under the structure key when every value
    was recorded (the oldest entry evicted past _CACHE_SIZE)."""
    with gc_paused():
        derived = derive(avals, eqns, n_in, consts, out_idx, available)
    if key is not None and all(available):
        derived.key = key
        with _LOCK:
            _CACHE[key] = derived
            if len(_CACHE) > _CACHE_SIZE:
                _CACHE.popitem(last=False)
    return derived


def _backward_fn(derived, residuals):
    """vjp(cts): the derived backward program on the residuals and the cotangents, one
    fresh array per float input (None for the others)."""
    def vjp(cts):
        args = list(residuals) + list(cts)
        with trusted_eval():
            g = _unaliased(derived.run("backward", args), args)
        it = iter(g)
        return [next(it) if nz else None for nz in derived.nonzero]
    return vjp


# ---------------------------------------------------------------------------
# the first call of a structure: equation by equation

_SEEN: OrderedDict = OrderedDict()    # structure keys recorded once (and interpreted)
_EQN_CACHE: dict = {}                 # (primitive, params, avals, live inputs) -> program


def _first_seen(key):
    """True the first time a structure is recorded: its vjp is then interpreted equation
    by equation; when it repeats, its whole programs are derived and cached."""
    with _LOCK:
        if key in _SEEN:
            return False
        _SEEN[key] = True
        if len(_SEEN) > 4 * _CACHE_SIZE:
            _SEEN.popitem(last=False)
    return True


def _eqn_program(prim, params, avals, live, present):
    """The joined residual + backward program of one equation whose inputs have these
    avals (live: the inputs that depend on the differentiated ones; present: the outputs
    that receive a cotangent, the others being symbolic zeros), derived once per
    signature: (program, local value indices it reads, which live inputs get a cotangent)."""
    key = (prim, _params_key(params), avals, live, present)
    hit = _EQN_CACHE.get(key)
    if hit is None:
        order = [k for k in range(len(avals)) if live[k]] + \
                [k for k in range(len(avals)) if not live[k]]
        local = {k: j for j, k in enumerate(order)}
        n_live = sum(live)
        out_avals = prim.abstract_eval(*avals, **params)
        out_avals = out_avals if prim.multiple_results else [out_avals]
        n = len(avals)
        slot_avals = [avals[k] for k in order] + list(out_avals)
        outs = tuple(range(n, n + len(out_avals)))
        d = derive(slot_avals, [(prim, params, tuple(local[k] for k in range(n)), outs)],
                   n_live, list(range(n_live, n)), [o for o, p in zip(outs, present) if p],
                   [True] * len(slot_avals))
        back = {j: k for k, j in local.items()}
        reads = [back[i] if i < n else i for i in d.value_idx]   # eqn input k or output
        hit = _EQN_CACHE[key] = (joined_program(d), reads, d.nonzero,
                                 [k for k in order[:n_live]])
        if len(_EQN_CACHE) > 4096:
            _EQN_CACHE.clear()
    return hit


def _interpreted_vjp(tape, values, n_in, out_idx, key):
    """vjp of a recorded program run equation by equation in reverse, each equation by
    its signature's cached program (as the facade's engine runs a new graph). Called with
    traced cotangents (jacrev's vmap, an outer jit), it derives the whole programs then."""
    eqns, avals = tape.eqns, tape.avals
    live = [False] * len(values)
    for i in range(n_in):
        live[i] = True
    for _, _, ii, oi in eqns:
        if any(live[i] for i in ii):
            for o in oi:
                live[o] = True

    def derived_vjp(cts):
        derived = _derive_cached(avals, eqns, n_in, tape.consts, out_idx,
                                 [True] * len(values), key)
        with trusted_eval():
            residuals = derived.run("residual", [values[i] for i in derived.value_idx])
        return _backward_fn(derived, residuals)(cts)

    def vjp(cts):
        if has_tracer(cts) or _thread_state.dynamic_trace.level:
            return derived_vjp(cts)
        ct = {}
        for i, c in zip(out_idx, cts):
            if type(c) is not Zero:
                ct[i] = ct[i] + c if i in ct else c
        with trusted_eval():
            for prim, params, ii, oi in reversed(eqns):
                if not any(o in ct for o in oi):
                    continue
                lv = tuple(live[i] for i in ii)
                present = tuple(o in ct for o in oi)
                prog, reads, nonzero, live_pos = _eqn_program(
                    prim, params, tuple(avals[i] for i in ii), lv, present)
                n = len(ii)
                args = [values[ii[r]] if r < n else values[oi[r - n]] for r in reads]
                args += [ct.pop(o) for o, p in zip(oi, present) if p]
                g = iter(run_program(prog, *args))
                for k, nz in zip(live_pos, nonzero):
                    if nz:
                        gi = next(g)
                        i = ii[k]
                        ct[i] = ct[i] + gi if i in ct else gi
        res = []
        for i in range(n_in):
            if not is_float(avals[i]):
                res.append(None)
                continue
            c = ct.get(i)
            if c is None:
                c = np.zeros(avals[i].shape, avals[i].dtype)
            res.append(c)
        return _unaliased(res, [values[i] for i in range(n_in)])
    return vjp


def _unaliased(outs, args):
    """outs with copies of the NumPy arrays that are (views of) a program input or an
    earlier output, or read-only (broadcast views): a gradient the caller writes into must
    not change the caller's data or another gradient, and must be writable."""
    seen = {id(a) for a in args if type(a) is np.ndarray}
    for i, o in enumerate(outs):
        if type(o) is np.ndarray:
            if id(o) in seen or (o.base is not None and id(o.base) in seen) \
                    or not o.flags.writeable:
                o = outs[i] = o.copy()
            seen.add(id(o))
    return outs


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


def _with_tangents(trace, derived, tape, values, in_tangents, outputs, residuals):
    """Outputs and residuals as jvp tracers of `trace`, their tangents from the cached
    tangent program of this structure."""
    tangents = list(in_tangents) + [Zero(tape.avals[i].strip_weak()) if t is None else t
                                    for i, t in zip(tape.consts, tape.const_tangents)]
    nonzero = tuple(type(t) is not Zero for t in tangents)
    t_out = derived.tangents(nonzero, [values[i] for i in derived.all_idx], residuals,
                             [t for t in tangents if type(t) is not Zero])
    n = len(outputs)
    wrap = [JVPTracer(trace, v, t) for v, t in zip(list(outputs) + list(residuals), t_out)]
    return wrap[:n], wrap[n:]


def clear_cache():
    _CACHE.clear()
    _HINTS.clear()
    _SEEN.clear()
    _EQN_CACHE.clear()


__all__ = ["vjp_flat", "recorded_value", "clear_cache", "derive", "joined_program"]
