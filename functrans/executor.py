"""The executor of reverse mode: when to run what the deriver derives, and the one cache.

`reverse.py` records tapes (RecordTrace) and derives programs from them (`derive`); this
module owns the policy of running them, for `ft.vjp`/`ft.grad` and for the facade's
`.backward()` alike:

- first sight vs repeat: the first time a structure is seen, its reverse pass runs
  equation by equation, each equation by its signature's cached program (`eqn_program`,
  derived from the one-equation tape by the same deriver), so a structure that never
  repeats pays no whole-program derivation; when it repeats, the whole tape is derived,
  optimized and cached (`cached_derive`);
- one cache for all of it, `backends.memory.DERIVED`: byte-counted, least recently used
  first out, keyed by kind ("vjp", "vjp seen", "equation", and the facade's "backward",
  "backward seen", "early", "op" entries);
- what a caller gets back: fresh, writable gradients (`unaliased`).
"""
from __future__ import annotations

import contextlib
import threading
import weakref

import numpy as np

from .ad import JVPTracer, is_float
from .backends.memory import DERIVED, approx_bytes
from .core import (ClosedJaxpr, Jaxpr, JaxprEqn, ShapedArray, Var, Zero, _thread_state,
                   array_module, get_aval, has_tracer, new_main, trusted_eval)
from .primitives.base import defprim
from .reverse import (RecordTrace, _Tape, _input, _params_key, _rewrap, _same_key,
                      _strippable_jvp, _strippable_vmap, _structure_key, derive,
                      joined_program)
from .runtime import gc_paused, program as concrete_program, run as run_program, small_program


# ---------------------------------------------------------------------------
# the policy: which schedule runs a reverse pass

SCHEDULES = ("auto", "first-sight", "program")


class _Policy:
    schedule = "auto"


POLICY = _Policy()


def first_sight(key, cached, charge=None):
    """Whether a reverse pass of this structure (key, in DERIVED's "... seen" kinds) runs
    by the first-sight schedule (reverse_pass) rather than its derived whole program
    (cached: that program is at hand). "auto": the first time the structure is seen and
    never once its program is cached; `schedule()` forces either for a block (tests run
    models under both and compare). charge(key): the mark's bytes, where the caller counts
    them faster than approx_bytes."""
    s = POLICY.schedule
    if s == "auto":
        return not cached and DERIVED.first_sight(key, charge)
    return s == "first-sight"


@contextlib.contextmanager
def schedule(which):
    """Run every reverse pass in the block by one schedule: "first-sight" (equation by
    equation, where it can: concrete NumPy values, not create_graph), "program" (the
    derived whole program) or "auto"."""
    if which not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES}, got {which!r}")
    prev, POLICY.schedule = POLICY.schedule, which
    try:
        yield
    finally:
        POLICY.schedule = prev


# user function -> (signature, the _Derived it used last); weak, so closures are not kept
_HINTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def _hint_get(hint):
    if hint is None:
        return None
    fun, sig = hint
    try:
        last = _HINTS.get(fun)
    except TypeError:               # not weak-referenceable
        return None
    return last[1] if last is not None and last[0] == sig else None


def _hint_set(hint, derived):
    if hint is None:
        return
    fun, sig = hint
    try:
        with _LOCK:
            _HINTS[fun] = (sig, derived)
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
    # the constants' tracers refer to the trace, whose main refers to the tape: a cycle
    # that left the whole tape to the collector (a collection over every recorded object
    # when ft.grad's pause ended, about 5% of an un-jitted grad of a 1,300-op chain)
    tape.const_tracers.clear()
    del ins, outs, trace
    n_in = len(primals)
    values = [v() if type(v) is weakref.ref else v for v in tape.values]    # (tape.value)
    if vouter is not None:
        values = [_rewrap(vouter, tape, i, v) for i, v in enumerate(values)]
    available = [v is not None for v in values]
    key = _structure_key(tape, n_in, out_idx)
    if expected is not None and _same_key(expected.key, key):
        derived = expected              # the usual case: comparing is cheaper than hashing
    else:
        try:
            derived = DERIVED.get(("vjp", key))
        except TypeError:               # an unhashable param: derive without caching
            derived = key = None
    if derived is not None and not all([available[i] for i in derived.value_idx]):
        derived = None             # the structure changed and a value it reads is gone
        key = None
    if key is not None and outer is None and vouter is None and all(available) \
            and not _thread_state.dynamic_trace.level and not has_tracer(values) \
            and first_sight(("vjp seen", key), derived is not None):
        return outputs, _interpreted_vjp(tape, values, n_in, out_idx, key)
    if derived is None:
        derived = cached_derive(tape.avals, tape.eqns, n_in, tape.consts, out_idx, available,
                                 key, tape.companions)
    if derived is not expected:
        _hint_set(hint, derived)
    with trusted_eval():
        residuals = derived.run("residual", [values[i] for i in derived.value_idx])
        if outer is not None:
            outputs, residuals = _with_tangents(outer, derived, tape, values, in_tangents,
                                                outputs, residuals)
    del tape, values
    return outputs, _backward_fn(derived, residuals)


def cached_derive(avals, eqns, n_in, consts, out_idx, available, key, companions=()):
    """reverse.derive, with the collector paused; kept in DERIVED under ("vjp", key) when
    every value was recorded."""
    with gc_paused():
        derived = derive(avals, eqns, n_in, consts, out_idx, available, (), companions)
    if key is not None and all(available):
        derived.key = key
        DERIVED.put(("vjp", key), derived)
    return derived


def _backward_fn(derived, residuals):
    """vjp(cts): the derived backward program on the residuals and the cotangents, one
    fresh array per float input (None for the others)."""
    def vjp(cts):
        args = list(residuals) + list(cts)
        with trusted_eval():
            g = unaliased(derived.run("backward", args), args)
        it = iter(g)
        return [next(it) if nz else None for nz in derived.nonzero]
    return vjp


# ---------------------------------------------------------------------------
# the first sight of a structure: equation by equation

def eqn_program(prim, params, avals, live, present, sig=None):
    """The joined residual + backward program of one equation whose inputs have these
    avals (live: the inputs that depend on the differentiated ones; present: the outputs
    that receive a cotangent, the others being symbolic zeros; sig: its eqn_signature when
    known, avals then None), derived once per signature: (program, the values it reads:
    input positions k or len(avals) + output j, which live inputs it returns a cotangent
    for (the float ones), their positions, and per returned cotangent whether any
    cotangent flows into it (_flows), the program as runtime.small_program calls it
    (None: through the runtime's tiers), and the position of its one live input when it
    returns exactly one cotangent, which flows (else -1))."""
    if sig is None:
        sig = (prim, _params_key(params), avals)
    avals = sig[2]
    key = ("equation", sig, live, present)
    try:
        hit = DERIVED.get(key)
    except TypeError:               # params that are not hashable: derived, not kept
        hit, key = None, None
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
        prog = joined_program(d)
        live_pos, flows = [k for k in order[:n_live]], _flows(prog, len(reads))
        one = live_pos[0] if len(live_pos) == 1 and d.nonzero[0] and flows[0] else -1
        hit = (prog, reads, d.nonzero, live_pos, flows, small_program(prog), one)
        if key is not None:
            DERIVED.put(key, hit, approx_bytes(key) + approx_bytes(prog))
    return hit


def _flows(closed, n_vals):
    """Per output of an equation's joined program: whether it depends on a cotangent input
    (the inputs after the n_vals values); False where the derivative is structurally zero
    (a stop_gradient), which the schedule then does not hand on, as the whole program's
    symbolic zeros are not."""
    j = closed.jaxpr
    dep = set(j.invars[n_vals:])
    for e in j.eqns:
        if any(type(a) is Var and a in dep for a in e.invars):
            dep.update(e.outvars)
    return tuple(type(v) is Var and v in dep for v in j.outvars)


def eqn_reads(prim, params, avals, live, present):
    """(what the backward of one equation reads: input positions k < len(avals) and
    len(avals) + j for output j; the live input positions a cotangent flows into), from
    its eqn_program."""
    _, reads, nonzero, live_pos, flows, _, _ = eqn_program(prim, params, avals, live, present)
    it = iter(flows)
    return reads, [k for k, nz in zip(live_pos, nonzero) if nz and next(it)]


def reverse_pass(eqns, avals, live, ct, value, *, sigs=None, run=None, special=None,
                 on_grad=None, due=None, deliver=None):
    """The first-sight schedule of a tape, shared by ft.vjp and `.backward()`: its reverse
    pass equation by equation, each by its signature's cached program (eqn_program).

    eqns: (primitive, params, input slots or Literals, output slots); live[slot]: whether
    it depends on a differentiated input; ct: {slot: cotangent}, the outputs' on entry,
    updated in place (the inputs' are left there); value(slot, i, r): the slot's primal
    value as equation i reads it (r: its position among the equation's inputs, then
    outputs), or the list of every slot's value; sigs: per equation its signature
    (eqn_signature), when the caller has them at hand; run(prog, args): the outputs of
    an equation's program (default: the runtime; the facade's create_graph records them
    as ops); special:
    {primitive: f(i, present)} for the equations the caller runs itself (taps,
    autograd.Functions: f pops their output cotangents from ct and returns the input
    cotangents); on_grad(i, k, g): each input cotangent produced (anomaly checks); due:
    {step: [slots]} whose cotangent is final before reverse step `step` runs, popped and
    handed to deliver(slot, ct) (None if nothing reached it)."""
    n = len(eqns)
    memo = {}
    listed = type(value) is list
    xp = array_module(*ct.values()) if run is None else None
    for step in range(n):
        if due and step in due:
            for s in due.pop(step):
                deliver(s, ct.pop(s, None))
        i = n - 1 - step
        prim, params, ii, oi = eqns[i]
        if len(oi) == 1:
            if oi[0] not in ct:
                continue
            present = _ONE
        else:
            present = tuple([o in ct for o in oi])
            if True not in present:
                continue
        if special and prim in special:
            for k, (a, g) in enumerate(zip(ii, special[prim](i, present))):
                if g is not None and type(a) is int:
                    if on_grad is not None:
                        on_grad(i, k, g)
                    ct[a] = ct[a] + g if a in ct else g
            continue
        k_in = len(ii)
        if k_in == 1:
            a = ii[0]
            lv = _ONE if type(a) is int and live[a] else _NONE
        elif k_in == 2:             # (no comprehension: a call of its own per equation)
            a, b = ii
            lv = (type(a) is int and live[a], type(b) is int and live[b])
        else:
            lv = tuple([type(a) is int and live[a] for a in ii])
        if True not in lv:
            for o in oi:
                ct.pop(o, None)
            continue
        if sigs is not None:        # the caller's signatures live through the pass
            sig = sigs[i]
            mkey = (id(sig), lv, present)
            hit = memo.get(mkey)
            if hit is None:
                hit = memo[mkey] = eqn_program(prim, params, None, lv, present, sig)
        else:                       # the pass's own memo, keyed by the signature with the
            #                             avals by identity (the tape's are shared per shape
            #                             and dtype: get_aval), hashed as ints
            pkey = _params_key(params) if params else ()
            if k_in == 1:
                a = ii[0]
                mkey = (prim, pkey, lv, present, id(avals[a] if type(a) is int else a.aval))
            elif k_in == 2:
                a, b = ii
                mkey = (prim, pkey, lv, present, id(avals[a] if type(a) is int else a.aval),
                        id(avals[b] if type(b) is int else b.aval))
            else:
                mkey = (prim, pkey, lv, present,
                        *[id(avals[a] if type(a) is int else a.aval) for a in ii])
            hit = memo.get(mkey)
            if hit is None:
                in_avals = tuple([avals[a] if type(a) is int else a.aval for a in ii])
                hit = memo[mkey] = eqn_program(prim, params, None, lv, present,
                                               (prim, pkey, in_avals))
        prog, reads, nonzero, live_pos, flows, small, one = hit
        if small is not None and present is _ONE and len(reads) < 2 and run is None:
            # the usual equation of small arrays: one cotangent and at most one value read
            # (sin's input, tanh's output), called without an argument list
            if not reads:
                outs = small(xp, ct.pop(oi[0]))
            else:
                r = reads[0]
                a = ii[r] if r < k_in else oi[r - k_in]
                v = a.val if type(a) is not int else value[a] if listed else value(a, i, r)
                outs = small(xp, v, ct.pop(oi[0]))
        else:
            args = []
            for r in reads:
                a = ii[r] if r < k_in else oi[r - k_in]
                if type(a) is not int:
                    args.append(a.val)
                elif listed:
                    args.append(value[a])
                else:
                    args.append(value(a, i, r))
            if present is _ONE:
                args.append(ct.pop(oi[0]))
            else:
                args += [ct.pop(o) for o, p in zip(oi, present) if p]
            if run is not None:
                outs = run(prog, args)
            elif small is not None:
                outs = small(xp, *args)
            else:
                outs = run_program(prog, *args)
        if one >= 0:
            a = ii[one]
            gi = outs[0]
            if on_grad is not None:
                on_grad(i, one, gi)
            ct[a] = ct[a] + gi if a in ct else gi
            continue
        g = iter(zip(outs, flows))
        for k, nz in zip(live_pos, nonzero):
            if nz:
                gi, flow = next(g)
                if not flow:
                    continue
                a = ii[k]
                if on_grad is not None:
                    on_grad(i, k, gi)
                ct[a] = ct[a] + gi if a in ct else gi
    if due:
        for s in due.pop(n, ()):
            deliver(s, ct.pop(s, None))
    return ct


_ONE = (True,)
_NONE = (False,)


def eqn_signature(prim, params, ins, avals):
    """What an equation's program depends on besides liveness: (primitive, params, input
    avals); ins are slots of avals or Literals."""
    return (prim, _params_key(params),
            tuple([avals[a] if type(a) is int else a.aval for a in ins]))


def _interpreted_vjp(tape, values, n_in, out_idx, key):
    """vjp of a recorded program by the first-sight schedule (reverse_pass). Called with
    traced cotangents (jacrev's vmap, an outer jit), it derives the whole programs then."""
    eqns, avals = tape.eqns, tape.avals
    live = tape.live        # per value: float and depending on an input (recorded as it ran)

    def derived_vjp(cts):
        derived = cached_derive(avals, eqns, n_in, tape.consts, out_idx,
                                [True] * len(values), key, tape.companions)
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
        with gc_paused(), trusted_eval():
            reverse_pass(eqns, avals, live, ct, values)
        res = []
        for i in range(n_in):
            if not is_float(avals[i]):
                res.append(None)
                continue
            c = ct.get(i)
            if c is None:
                c = np.zeros(avals[i].shape, avals[i].dtype)
            res.append(c)
        return unaliased(res, [values[i] for i in range(n_in)])
    return vjp


def unaliased(outs, args):
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


# ---------------------------------------------------------------------------
# early delivery: final gradients handed out while the backward program runs

class _Delivery(threading.local):
    def __init__(self):
        self.stack = []


DELIVERY = _Delivery()


@contextlib.contextmanager
def delivering(early):
    """Run an early_program's `deliver_gradients` equations against early: early(i, g)
    takes final output i, early.verify(positions) checks that the saved values at those
    program inputs (read by later equations) were left unmodified by what early ran."""
    DELIVERY.stack.append(early)
    try:
        yield
    finally:
        DELIVERY.stack.pop()


def _deliver_impl(xp, *vals, outputs, check):
    if not DELIVERY.stack:
        raise RuntimeError("a deliver_gradients equation ran outside executor.delivering")
    early = DELIVERY.stack[-1]
    for i, g in zip(outputs, vals):
        early(i, g)
    if check:
        early.verify(check)
    return np.zeros((), np.bool_)


# the program's outputs `outputs` are final, handed to the delivery in effect (the facade's
# runs their post-accumulate hooks), which then checks that the hooks left the saved values
# at the program inputs `check` (read by later equations) unmodified. Operands past
# len(outputs) are values of the equations that must run first (those reading the leaves'
# saved values), so that no schedule of the lowered program moves them after the hooks,
# which may update the leaves in place (the fusion pass places a group at its last member;
# a group read by the delivery closes there). What it hands out are program outputs, never
# a lowered program's scratch buffers, and it keeps nothing else: safe in hot code.
_TOKEN = ShapedArray((), np.dtype(np.bool_))
deliver_p = defprim("deliver_gradients", _deliver_impl, lambda *a, **p: _TOKEN,
                    effectful=True, memo=False, hot_safe=True)


def early_program(closed, token, aliases):
    """A backward program (closed; token: a small unique id of it, for the key) with
    `deliver_gradients` equations that hand output i to the delivery in effect
    (`delivering`) as soon as it is final and no later equation reads a saved value of its
    leaf, run through the runtime's tiers like the program (lowered once hot), kept in
    DERIVED as "early"; aliases: (i, input positions of those saved values) per early
    output."""
    key = ("early", token, aliases)
    fn = DERIVED.get(key)
    if fn is None:
        jaxpr = _eager_order(closed.jaxpr, aliases)
        fn = concrete_program(ClosedJaxpr(jaxpr, closed.consts))
        DERIVED.put(key, fn, approx_bytes(key) + approx_bytes(fn.closed))
    return fn


def _eager_order(jaxpr, aliases):
    """jaxpr with its equations reordered and `deliver_gradients` equations added: each
    early output i after the equations computing it and those reading its leaf's saved
    values (a post-accumulate hook may update the leaf in place, as an optimizer step in
    backward does; torch's engine too has finished with them by then; the delivery reads
    their results, so that no later schedule moves them past it), the one needing the
    fewest equations first (torch accumulates the last layer's gradients first);
    effectful equations (hooks) keep their relative order. The same equations on the same
    values: the same numbers."""
    producer, readers, deps, last_effect = {}, {}, [], None
    roots = _memory_roots(jaxpr.invars, jaxpr.eqns)
    for i, e in enumerate(jaxpr.eqns):
        d = set()
        for v in e.invars:
            if type(v) is Var:
                readers.setdefault(v, []).append(i)
                if v in producer:
                    d.add(producer[v])
        if e.primitive.effectful:
            if last_effect is not None:
                d.add(last_effect)
            last_effect = i
        deps.append(d)
        for v in e.outvars:
            producer[v] = i
    cones = []
    for i, saved in aliases:
        v = jaxpr.outvars[i]
        if type(v) is not Var or v not in producer:
            continue                    # not computed by the program: handed out after it
        saved = set(saved)
        first = sorted({r for a, js in roots.items() if js & saved for r in readers.get(a, ())})
        cone, stack = set(), [producer[v]] + first
        while stack:
            j = stack.pop()
            if j not in cone:
                cone.add(j)
                stack.extend(deps[j])
        cones.append((len(cone), i, cone, first))
    eqns, placed, pending = [], set(), ([], [])
    for _, i, cone, first in sorted(cones):
        new = sorted(cone - placed)
        if new and pending[0]:
            eqns.append(_delivery(jaxpr, *pending))
            pending = ([], [])
        eqns += [jaxpr.eqns[j] for j in new]
        placed.update(new)
        pending[0].append(i)
        pending[1].extend(jaxpr.eqns[j].outvars[0] for j in first if jaxpr.eqns[j].outvars)
    if pending[0]:
        eqns.append(_delivery(jaxpr, *pending))
    eqns += [e for j, e in enumerate(jaxpr.eqns) if j not in placed]
    return Jaxpr(jaxpr.constvars, jaxpr.invars, _with_checks(eqns, roots), jaxpr.outvars)


def _memory_roots(invars, eqns):
    """var -> the positions of the inputs whose memory it may share: the inputs themselves
    and the results of equations that may return views (not `fresh`: a reshape, a
    broadcast) of them."""
    roots = {v: frozenset((j,)) for j, v in enumerate(invars)}
    for e in eqns:
        if not e.primitive.fresh:
            r = frozenset().union(*[roots.get(v, ()) for v in e.invars if type(v) is Var])
            if r:
                for o in e.outvars:
                    roots[o] = r
    return roots


def _delivery(jaxpr, outputs, after):
    """The equation handing out jaxpr's outputs at positions `outputs` (their values
    computed by then), reading `after` (results of equations that must run first)."""
    return JaxprEqn(deliver_p, [jaxpr.outvars[i] for i in outputs] + after,
                    {"outputs": tuple(outputs), "check": ()}, [Var(ShapedArray((), np.bool_))])


def _with_checks(eqns, roots):
    """Each delivery equation given `check`: the positions of the inputs that equations
    after it read (directly or through views; `roots` as _memory_roots), whose version
    counters it checks once the hooks have run."""
    out, later = [], set()
    for e in reversed(eqns):
        if e.primitive is deliver_p:
            e = e._replace(params={**e.params, "check": tuple(sorted(later))})
        else:
            later.update(j for v in e.invars if type(v) is Var for j in roots.get(v, ()))
        out.append(e)
    return out[::-1]


def usable_destinations(dests, outvars, vals, root_cts):
    """The destinations as the program's `dests` list: those of the output's shape and
    dtype, C-contiguous, writable, not a view of memory the program reads, and each given
    once (different arrays must not overlap: the hooks' promise, as DDP's disjoint slots;
    checking every pair would cost more than the copies saved)."""
    read = {memory_owner(v) for v in vals}
    read.update(memory_owner(c) for c in root_cts)
    res, given = [None] * len(outvars), set()
    for i, a in dests.items():
        aval = outvars[i].aval
        if (type(a) is np.ndarray and a.shape == aval.shape and a.dtype == aval.dtype
                and a.flags.c_contiguous and a.flags.writeable and memory_owner(a) not in read
                and id(a) not in given):
            res[i] = a
            given.add(id(a))
    return res


def memory_owner(a):
    """The id of the array owning a's memory (a itself, or the base of a view)."""
    b = getattr(a, "base", None)
    return id(a if b is None else b)


def cached(kind="vjp"):
    """The values DERIVED keeps under one kind, least recently used first (tests, tools)."""
    return [v for k, (v, _, _) in list(DERIVED._lru.items()) if k[0] == kind]


def clear_cache():
    """Forget everything derived (every kind in DERIVED) and the functions' hints."""
    DERIVED.clear()
    _HINTS.clear()


__all__ = ["vjp_flat", "clear_cache", "cached_derive", "eqn_program", "eqn_reads",
           "eqn_signature", "reverse_pass", "first_sight", "schedule"]
