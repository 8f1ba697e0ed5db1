"""Control flow primitives that carry sub-jaxprs: cond (covers switch), while, scan.

Operands are flat; every sub-jaxpr is a ClosedJaxpr whose constants are concrete (the
user-facing functions in functrans/control_flow.py hoist closed-over values, tracers
included, into explicit operands). Rules transform the sub-jaxprs with the jaxpr-level
transformations of functrans/ad.py and functrans/batching.py, and evaluate them with
eval_jaxpr, so the result works under any enclosing transformation; impls run their
bodies on concrete arrays through functrans.runtime.

  cond(index, *ops, branches)                      index clamped into range
  while(*cond_consts, *body_consts, *carry, cond_jaxpr, body_jaxpr, cond_nconsts,
        body_nconsts, max_iters)                   max_iters=None: unbounded
  scan(*consts, *carry, *xs, jaxpr, length, reverse, num_consts, num_carry)
        body: (consts, carry, x) -> (carry, y); outputs (carry, stacked ys)
"""
from __future__ import annotations

import collections
import contextlib
import functools

import numpy as np

from .. import ad, batching, runtime
from ..core import (ClosedJaxpr, FunctransError, Jaxpr, JaxprEqn, Literal, ShapedArray, Var,
                   Zero, eval_jaxpr, get_aval, is_undefined)
from ..passes import contract_sums, dce_jaxpr
from ..primitives.base import (aval_of, bdim_size, broadcast_batched, defprim, instantiate,
                               moveaxis, zeros)
from ..primitives.elementwise import (add, add_p, convert_element_type, eq, max as max_,
                                      min as min_, mul_p, neg_p, select, sub_p)
from ..primitives.linalg import NATIVE_GEMM, dot_general_p
from ..primitives.misc import stop_gradient
from ..primitives.reductions import reduce_max, reduce_sum, reduce_sum_p
from ..primitives.shape import broadcast_in_dim
from ..tracing import trace_to_jaxpr
from .scan_layout import _LAYOUT_STEPS, _const_layout, _transposed


class ControlFlowTypeError(FunctransError, TypeError):
    """Branches or loop bodies whose types do not fit together (shapes, dtypes, structure)."""


# ---------------------------------------------------------------------------
# helpers on closed jaxprs

def _eval(closed, *args):
    return eval_jaxpr(closed.jaxpr, closed.consts, *args)


def _trace(fun, avals):
    """Trace fun (flat list in, flat list out) on avals into a ClosedJaxpr with concrete consts."""
    jaxpr, consts = trace_to_jaxpr(fun, list(avals))
    return ClosedJaxpr(jaxpr, consts)


def _reorder(closed, in_order=None, out_order=None):
    """The same jaxpr with its inputs / outputs permuted (indices into the old lists)."""
    j = closed.jaxpr
    invars = j.invars if in_order is None else [j.invars[i] for i in in_order]
    outvars = j.outvars if out_order is None else [j.outvars[i] for i in out_order]
    return ClosedJaxpr(Jaxpr(j.constvars, invars, j.eqns, outvars), closed.consts)


def _add_unused_invars(closed, avals):
    """The same jaxpr taking extra (ignored) inputs of the given avals at the end."""
    j = closed.jaxpr
    return ClosedJaxpr(Jaxpr(j.constvars, j.invars + [Var(a) for a in avals], j.eqns,
                             j.outvars), closed.consts)


def _split(xs, *sizes):
    out, i = [], 0
    for n in sizes:
        out.append(list(xs[i:i + n]))
        i += n
    out.append(list(xs[i:]))
    return out


def _same_type(a, b):
    return a.shape == b.shape and a.dtype == b.dtype


def _types(avals):
    return "(" + ", ".join(a.str_short() for a in avals) + ")"


def _join_weak(a, b):
    return ShapedArray(a.shape, a.dtype, a.weak_type and b.weak_type)


def _check_inputs(what, expected, given, names):
    """given avals must match a sub-jaxpr's input avals, named e.g. 'carry[2]'."""
    if len(expected) != len(given):
        raise ControlFlowTypeError(f"{what} takes {len(expected)} operands, got {len(given)}")
    for i, (e, g) in enumerate(zip(expected, given)):
        if not _same_type(e, g):
            raise ControlFlowTypeError(
                f"{what}: {names(i)} has type {g.str_short()} but the traced function expects "
                f"{e.str_short()}")


def _fixpoint(flags, step):
    """Smallest superset of flags closed under `new = flags | step(flags)` (loop carries)."""
    flags = list(flags)
    while True:
        new = [a or b for a, b in zip(flags, step(flags), strict=True)]
        if new == flags:
            return flags
        flags = new


def _nonzero(t):
    return type(t) is not Zero


def _tangent_zero(aval):
    return Zero(aval.strip_weak())


def _int_like(x, value):
    return np.asarray(value, aval_of(x).dtype)


def _bcast_pred(pred, aval):
    """A batched scalar predicate (size,) broadcast to a batched value's shape."""
    if aval.shape == aval_of(pred).shape:
        return pred
    return broadcast_in_dim(pred, shape=aval.shape, broadcast_dimensions=(0,))


def _emit_unknown(trace, prim, tracers, params):
    """Record one equation whose outputs are all unknown (known inputs become residuals)."""
    outs = trace.default_process_primitive(prim, tracers, params)
    return outs if prim.multiple_results else [outs]


def _merge(flags, if_true, if_false):
    t, f = iter(if_true), iter(if_false)
    return [next(t) if fl else next(f) for fl in flags]


# ---------------------------------------------------------------------------
# cond

def _clamp_index(index, n):
    return int(np.clip(int(index), 0, n - 1))


def _cond_impl(xp, index, *ops, branches):
    return runtime.run(branches[_clamp_index(index, len(branches))], *ops)


def _cond_shape(index, *ops, branches):
    if index.ndim != 0 or index.dtype.kind not in "iu":
        raise ControlFlowTypeError(f"the branch index must be an integer scalar, got "
                                   f"{index.str_short()}")
    if not branches:
        raise ControlFlowTypeError("needs at least one branch")
    for i, br in enumerate(branches):
        _check_inputs(f"branch {i}", br.in_avals, ops, lambda k: f"operand {k}")
    outs = list(branches[0].out_avals)
    for i, br in enumerate(branches[1:], 1):
        if len(br.out_avals) != len(outs) or not all(
                _same_type(a, b) for a, b in zip(br.out_avals, outs)):
            raise ControlFlowTypeError(
                f"branches must return the same types (shapes and dtypes): branch 0 returns "
                f"{_types(outs)} but branch {i} returns {_types(br.out_avals)}")
        outs = [_join_weak(a, b) for a, b in zip(outs, br.out_avals)]
    return outs


def _cond_jvp(primals, tangents, branches):
    index, *ops = primals
    nz = [_nonzero(t) for t in tangents[1:]]
    out_nz = [any(f) for f in zip(*[ad.jvp_jaxpr(br, nz, False)[1] for br in branches])]
    jvp_brs = tuple(ad.jvp_jaxpr(br, nz, out_nz)[0] for br in branches)
    outs = cond_p.bind(index, *ops, *[t for t in tangents[1:] if _nonzero(t)],
                       branches=jvp_brs)
    n = len(branches[0].out_avals)
    t_out = _merge(out_nz, outs[n:], [_tangent_zero(a) for a in branches[0].out_avals])
    return outs[:n], t_out


def _cond_partial_eval(trace, tracers, branches):
    """Known index: each branch splits into a known part (which also returns the residuals
    of every branch, zeros for the branches not taken) and an unknown part."""
    index_t, *op_ts = tracers
    if not index_t.pval.is_known:
        return _emit_unknown(trace, cond_p, tracers, dict(branches=branches))
    uk = [not t.pval.is_known for t in op_ts]
    out_uk = [any(f) for f in zip(*[ad.partial_eval_jaxpr(br, uk, False)[2] for br in branches])]
    splits = [ad.partial_eval_jaxpr(br, uk, out_uk) for br in branches]
    nk = out_uk.count(False)
    res_avals = [s[0].out_avals[nk:] for s in splits]
    all_res = [a for r in res_avals for a in r]
    offsets = np.cumsum([0] + [len(r) for r in res_avals]).tolist()

    def known_branch(i):
        def f(*kops):
            outs = _eval(splits[i][0], *kops)
            return (outs[:nk] + [zeros(a) for a in all_res[:offsets[i]]] + outs[nk:]
                    + [zeros(a) for a in all_res[offsets[i + 1]:]])
        return f

    def unknown_branch(i):
        def f(*args):
            return _eval(splits[i][1], *args[offsets[i]:offsets[i + 1]], *args[len(all_res):])
        return f
    known_avals = [t.aval for t, u in zip(op_ts, uk) if not u]
    outs = []
    if nk or all_res:
        known_brs = tuple(_trace(known_branch(i), known_avals) for i in range(len(branches)))
        outs = cond_p.bind(index_t.pval.const,
                           *[t.pval.const for t, u in zip(op_ts, uk) if not u],
                           branches=known_brs)
    known_outs, res = outs[:nk], outs[nk:]
    unk_outs = []
    if any(out_uk):
        unk_avals = all_res + [t.aval for t, u in zip(op_ts, uk) if u]
        unk_brs = tuple(_trace(unknown_branch(i), unk_avals) for i in range(len(branches)))
        unk_outs = _emit_unknown(trace, cond_p, [index_t] + [trace.pure(r) for r in res]
                                 + [t for t, u in zip(op_ts, uk) if u], dict(branches=unk_brs))
    return _merge(out_uk, unk_outs, [trace.pure(v) for v in known_outs])


def _cond_transpose(cts, index, *ops, branches):
    if is_undefined(index):
        raise FunctransError("cond: cannot transpose with respect to the branch index")
    linear = [is_undefined(x) for x in ops]
    t_brs = tuple(ad.transpose_jaxpr(br, linear) for br in branches)
    outs = cond_p.bind(index, *[x for x, lin in zip(ops, linear) if not lin],
                       *[instantiate(c) for c in cts], branches=t_brs)
    return [None] + _merge(linear, outs, [None] * len(ops))


def _forwarded(jaxpr, offset=0):
    """For each output of jaxpr: the position (less offset) of the input it returns
    unchanged, or None."""
    pos = {id(v): i - offset for i, v in enumerate(jaxpr.invars) if i >= offset}
    return [pos.get(id(v)) if type(v) is Var else None for v in jaxpr.outvars]


def _cond_batch(vals, dims, branches):
    """Unbatched index: batch each branch. Batched index: run every branch on the whole
    batch and pick each example's result with select; an output that every branch forwards
    from the same unbatched operand stays that operand, unbatched (as JAX)."""
    size = bdim_size(vals, dims)
    (index, *ops), (d_index, *d_ops) = vals, dims
    ops_b = [d is not None for d in d_ops]
    ops = [x if d is None else moveaxis(x, d, 0) for x, d in zip(ops, d_ops)]
    if d_index is None:
        out_b = [any(f) for f in zip(*[batching.batch_jaxpr(br, size, ops_b, False)[1]
                                       for br in branches])]
        b_brs = tuple(batching.batch_jaxpr(br, size, ops_b, out_b)[0] for br in branches)
        return cond_p.bind(index, *ops, branches=b_brs), [0 if b else None for b in out_b]
    n = len(branches)
    fwd = [ks[0] if len(set(ks)) == 1 and ks[0] is not None and not ops_b[ks[0]] else None
           for ks in zip(*[_forwarded(br.jaxpr) for br in branches])]
    unbatched = list(ops)
    index = min_(max_(moveaxis(index, d_index, 0), _int_like(index, 0)), _int_like(index, n - 1))
    # each branch sees its float operands only where it is taken (elsewhere under
    # stop_gradient, as JAX): a branch not taken adds no cotangent, not 0 * inf = NaN
    masked = [aval_of(x).dtype.kind in "fc" for x in ops]
    ops = [broadcast_batched(x, size) if m and not b else x
           for x, m, b in zip(ops, masked, ops_b)]
    ops_b = [b or m for b, m in zip(ops_b, masked)]
    results = []
    for i, br in enumerate(branches):
        pred = eq(index, _int_like(index, i))
        own = [select(_bcast_pred(pred, aval_of(x)), x, stop_gradient(x)) if m else x
               for x, m in zip(ops, masked)]
        results.append(_eval(batching.batch_jaxpr(br, size, ops_b, True)[0], *own))
    out = results[-1]
    for i in range(n - 2, -1, -1):
        pred = eq(index, _int_like(index, i))
        out = [select(_bcast_pred(pred, aval_of(a)), a, b) for a, b in zip(results[i], out)]
    out = [o if k is None else unbatched[k] for o, k in zip(out, fwd)]
    return out, [0 if k is None else None for k in fwd]


cond_p = defprim("cond", _cond_impl, _cond_shape, jvp=_cond_jvp, transpose=_cond_transpose,
                 batch=_cond_batch, multiple_results=True, partial_eval=_cond_partial_eval)


# ---------------------------------------------------------------------------
# while

class WhileReverseError(FunctransError, ValueError):
    """Reverse-mode differentiation of a loop with a dynamic trip count (a ValueError, as
    JAX's)."""


_WHILE_REVERSE_ERROR = (
    "Reverse-mode differentiation does not work for lax.while_loop or lax.fori_loop "
    "with dynamic start/stop values: the number of iterations is not known ahead of time, so "
    "the values of each iteration cannot be stored for the backward pass. Use ft.lax.scan, "
    "or ft.lax.fori_loop with static (Python int) start/stop, or bound the loop with "
    "ft.lax.while_loop(cond_fun, body_fun, init_val, max_iters=N), which makes it "
    "reverse-differentiable as a loop of at most N iterations. Forward mode (ft.jvp, "
    "ft.jacfwd) works on unbounded while loops.")


def _while_impl(xp, *args, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts, max_iters):
    cc, bc, carry = _split(args, cond_nconsts, body_nconsts)
    n = 0
    while (max_iters is None or n < max_iters) and bool(runtime.run(cond_jaxpr, *cc, *carry)[0]):
        carry = runtime.run(body_jaxpr, *bc, *carry)
        n += 1
    return list(carry)


def _while_shape(*avals, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts, max_iters):
    cc, bc, carry = _split(avals, cond_nconsts, body_nconsts)
    _check_inputs("cond_fun", cond_jaxpr.in_avals, cc + carry,
                  lambda k: f"const {k}" if k < len(cc) else f"carry[{k - len(cc)}]")
    _check_inputs("body_fun", body_jaxpr.in_avals, bc + carry,
                  lambda k: f"const {k}" if k < len(bc) else f"carry[{k - len(bc)}]")
    pred = cond_jaxpr.out_avals
    if len(pred) != 1 or pred[0].shape != () or pred[0].dtype != np.bool_:
        raise ControlFlowTypeError(f"cond_fun must return a boolean scalar, but got "
                                   f"{_types(pred)}")
    out = body_jaxpr.out_avals
    if len(out) != len(carry):
        raise ControlFlowTypeError(f"body_fun must return {len(carry)} carry values, got "
                                   f"{len(out)}")
    for i, (a, b) in enumerate(zip(carry, out)):
        if not _same_type(a, b):
            raise ControlFlowTypeError(
                f"body_fun output and input must have identical types: carry[{i}] is "
                f"{a.str_short()} on input but body_fun returns {b.str_short()}; the whole "
                f"carry is {_types(carry)} on input and {_types(out)} on output")
    if max_iters is not None and (not isinstance(max_iters, int) or max_iters < 0):
        raise ControlFlowTypeError(f"max_iters must be None or a non-negative Python int, "
                                   f"got {max_iters!r}")
    return [_join_weak(a, b) for a, b in zip(carry, out)]


def _while_jvp(primals, tangents, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts,
               max_iters):
    """The loop carries (primal, tangent) pairs; which tangents are nonzero is a fixpoint."""
    cc, bc, carry = _split(primals, cond_nconsts, body_nconsts)
    _, bc_t, carry_t = _split(tangents, cond_nconsts, body_nconsts)
    bc_nz = [_nonzero(t) for t in bc_t]
    carry_nz = _fixpoint([_nonzero(t) for t in carry_t],
                         lambda nz: ad.jvp_jaxpr(body_jaxpr, bc_nz + nz, False)[1])
    body_jvp, _ = ad.jvp_jaxpr(body_jaxpr, bc_nz + carry_nz, carry_nz)
    nb, nc, nbt = len(bc), len(carry), sum(bc_nz)
    # jvp order (bc, carry, bc_t, carry_t) -> while order (bc, bc_t, carry, carry_t)
    order = (list(range(nb)) + list(range(nb + nc, nb + nc + nbt)) + list(range(nb, nb + nc))
             + list(range(nb + nc + nbt, len(body_jvp.in_avals))))
    body_jvp = _reorder(body_jvp, order)
    ct_avals = [a.strip_weak() for a, z in zip(body_jaxpr.out_avals, carry_nz) if z]
    cond_jvp = _add_unused_invars(cond_jaxpr, ct_avals)
    ts = [instantiate(t) for t, z in zip(carry_t, carry_nz) if z]
    outs = while_p.bind(*cc, *bc, *[t for t in bc_t if _nonzero(t)], *carry, *ts,
                        cond_jaxpr=cond_jvp, body_jaxpr=body_jvp, cond_nconsts=cond_nconsts,
                        body_nconsts=nb + nbt, max_iters=max_iters)
    t_out = _merge(carry_nz, outs[nc:], [_tangent_zero(a) for a in body_jaxpr.out_avals])
    return outs[:nc], t_out


def _while_partial_eval(trace, tracers, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts,
                        max_iters):
    """Bounded (max_iters): rewritten as a scan, which splits into known and unknown parts.
    Unbounded: the known carries are computed by a known loop; the unknown outputs come from
    the whole loop run again (so linearize works; transposing it raises)."""
    params = dict(cond_jaxpr=cond_jaxpr, body_jaxpr=body_jaxpr, cond_nconsts=cond_nconsts,
                  body_nconsts=body_nconsts, max_iters=max_iters)
    if max_iters is not None:
        return _bounded_while_as_scan(*tracers, **params)
    cc, bc, carry = _split(tracers, cond_nconsts, body_nconsts)
    cc_uk, bc_uk = [not t.pval.is_known for t in cc], [not t.pval.is_known for t in bc]
    carry_uk = _fixpoint([not t.pval.is_known for t in carry],
                         lambda uk: ad.partial_eval_jaxpr(body_jaxpr, bc_uk + uk, False)[2])
    cond_known, _, cond_uk, _ = ad.partial_eval_jaxpr(cond_jaxpr, cc_uk + carry_uk, False)
    if cond_uk[0] or all(carry_uk):
        return _emit_unknown(trace, while_p, tracers, params)
    body_known, _, _, num_res = ad.partial_eval_jaxpr(body_jaxpr, bc_uk + carry_uk, carry_uk)
    jk = body_known.jaxpr
    body_known = ClosedJaxpr(Jaxpr(jk.constvars, jk.invars, jk.eqns,
                                   jk.outvars[:len(jk.outvars) - num_res]), body_known.consts)
    kc = [t.pval.const for t, u in zip(cc, cc_uk) if not u]
    kb = [t.pval.const for t, u in zip(bc, bc_uk) if not u]
    known_outs = iter(while_p.bind(
        *kc, *kb, *[t.pval.const for t, u in zip(carry, carry_uk) if not u],
        cond_jaxpr=cond_known, body_jaxpr=body_known, cond_nconsts=len(kc),
        body_nconsts=len(kb), max_iters=None))
    whole = _emit_unknown(trace, while_p, tracers, params)
    return [w if u else trace.pure(next(known_outs)) for w, u in zip(whole, carry_uk)]


def _while_transpose(cts, *args, max_iters, **params):
    raise WhileReverseError(_WHILE_REVERSE_ERROR)


def _bounded_while_as_scan(*args, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts,
                          max_iters):
    """A while loop of at most max_iters iterations as a scan of max_iters steps whose body
    applies body_fun under a cond on the predicate (a no-op once the predicate is false)."""
    cc, bc, carry = _split(args, cond_nconsts, body_nconsts)
    keep = _trace(lambda *a: list(a[len(bc):]), body_jaxpr.in_avals)
    branches = (keep, body_jaxpr)

    def step(*a):
        c_consts, b_consts, c = _split(a, len(cc), len(bc))
        pred = _eval(cond_jaxpr, *c_consts, *c)[0]
        index = convert_element_type(pred, new_dtype=np.dtype(np.int32), weak_type=False)
        return cond_p.bind(index, *b_consts, *c, branches=branches)
    step_jaxpr = _trace(step, cond_jaxpr.in_avals[:len(cc)] + body_jaxpr.in_avals)
    return scan_p.bind(*cc, *bc, *carry, jaxpr=step_jaxpr, length=max_iters, reverse=False,
                       num_consts=len(cc) + len(bc), num_carry=len(carry))


def _while_batch(vals, dims, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts, max_iters):
    """Batched predicate: loop while any example runs; finished examples keep their carry
    (select). Unbatched predicate: the body is batched and the loop runs as one."""
    size = bdim_size(vals, dims)
    vals = [v if d is None else moveaxis(v, d, 0) for v, d in zip(vals, dims)]
    cc, bc, carry = _split(vals, cond_nconsts, body_nconsts)
    cc_b, bc_b, carry_in_b = _split([d is not None for d in dims], cond_nconsts, body_nconsts)
    carry_b = _fixpoint(carry_in_b, lambda b: batching.batch_jaxpr(body_jaxpr, size, bc_b + b,
                                                                   False)[1])
    _, (pred_b,) = batching.batch_jaxpr(cond_jaxpr, size, cc_b + carry_b, False)
    if pred_b:
        # a carry the body returns unchanged stays as it is (unbatched if it came so, as
        # JAX's read-only carries); every other carry varies per example
        fwd = _forwarded(body_jaxpr.jaxpr, len(bc))
        carry_b = [b or fwd[j] != j for j, b in enumerate(carry_b)]
    carry = [broadcast_batched(c, size) if b and not b_in else c
             for c, b, b_in in zip(carry, carry_b, carry_in_b)]
    cond_bat, _ = batching.batch_jaxpr(cond_jaxpr, size, cc_b + carry_b, False)
    body_bat, _ = batching.batch_jaxpr(body_jaxpr, size, bc_b + carry_b, carry_b)
    params = dict(cond_nconsts=len(cc), max_iters=max_iters)
    if not pred_b:
        outs = while_p.bind(*cc, *bc, *carry, cond_jaxpr=cond_bat, body_jaxpr=body_bat,
                            body_nconsts=len(bc), **params)
        return outs, [0 if b else None for b in carry_b]
    c_avals = cond_bat.in_avals

    def any_running(*a):
        return [reduce_max(_eval(cond_bat, *a)[0], axes=(0,))]

    def masked_body(*a):
        c_consts, b_consts, c = _split(a, len(cc), len(bc))
        pred = _eval(cond_bat, *c_consts, *c)[0]
        new = _eval(body_bat, *b_consts, *c)
        return [select(_bcast_pred(pred, aval_of(n)), n, o) if b else n
                for n, o, b in zip(new, c, carry_b)]
    new_cond = _trace(any_running, c_avals)
    new_body = _trace(masked_body, list(c_avals[:len(cc)]) + list(body_bat.in_avals))
    outs = while_p.bind(*cc, *cc, *bc, *carry, cond_jaxpr=new_cond, body_jaxpr=new_body,
                        body_nconsts=len(cc) + len(bc), **params)
    return outs, [0 if b else None for b in carry_b]


while_p = defprim("while", _while_impl, _while_shape, jvp=_while_jvp, transpose=_while_transpose,
                  batch=_while_batch, multiple_results=True, partial_eval=_while_partial_eval)


# ---------------------------------------------------------------------------
# scan

def _scan_impl(xp, *args, jaxpr, length, reverse, num_consts, num_carry):
    consts, carry, xs = _split(args, num_consts, num_carry)
    if xp is np and length >= _LAYOUT_STEPS:
        body, flip, views = _const_layout(jaxpr, num_consts)
        if body is not None:
            jaxpr = body
            consts = [_transposed(c, f, views) if f else c for c, f in zip(consts, flip)]
    ys = [xp.empty((length,) + a.shape, a.dtype) for a in jaxpr.out_avals[num_carry:]]
    step = functools.partial(runtime.program(jaxpr), xp)
    # the step writes each stacked output of rank >= 1 into its row where its plan allows
    # (the others are copied in below)
    into = [y if y.ndim > 1 else None for y in ys] if xp is np and ys else None
    dests = None
    # the consts are unchanged over the steps: a few-row product by one may lay it out once
    held = (NATIVE_GEMM.holding(consts) if xp is np and length >= _LAYOUT_STEPS
            else contextlib.nullcontext())
    fast = None                 # the step's program once settled, called directly
    with held:
        for i in (range(length - 1, -1, -1) if reverse else range(length)):
            if into:
                dests = [None] * num_carry + [None if y is None else y[i] for y in into]
            if fast is None and xp is np:
                fast = runtime.settled(jaxpr)
            out = (fast or step)(*consts, *carry, *[x[i] for x in xs], dests=dests)
            carry = out[:num_carry]
            for k, (y, v) in enumerate(zip(ys, out[num_carry:]), num_carry):
                if dests is None or v is not dests[k]:
                    y[i] = v
    return _fresh_carry(xp, carry, ys, args) + ys


def _fresh_carry(xp, carry, ys, args):
    """The final carry as new arrays (scan is declared fresh): a carry that may share
    memory with an operand (no steps, or a body returning an input), a stacked output (a
    view of what the step wrote into it) or an earlier carry is copied. A NumPy carry that
    owns its memory, made by the last step, shares it only by being one of them."""
    out = []
    for c in carry:
        c = xp.asarray(c)
        if type(c) is np.ndarray and c.base is None:
            shared = any(a is c for a in (*args, *ys, *out))
        else:
            shared = any(type(a) is type(c) and xp.may_share_memory(c, a)
                         for a in (*args, *ys, *out))
        if shared:
            c = xp.array(c)
        out.append(c)
    return out


def _scan_shape(*avals, jaxpr, length, reverse, num_consts, num_carry):
    consts, carry, xs = _split(avals, num_consts, num_carry)
    if not isinstance(length, (int, np.integer)) or length < 0:
        raise ControlFlowTypeError(f"length must be a non-negative int, got {length!r}")
    for i, x in enumerate(xs):
        if x.ndim == 0 or x.shape[0] != length:
            raise ControlFlowTypeError(
                f"scanned input xs[{i}] of type {x.str_short()} must have a leading axis of "
                f"the scan length {length}")
    x_avals = [ShapedArray(x.shape[1:], x.dtype, x.weak_type) for x in xs]
    nc = len(consts)
    _check_inputs("the scanned function", jaxpr.in_avals, consts + carry + x_avals,
                  lambda k: f"const {k}" if k < nc else f"carry[{k - nc}]"
                  if k < nc + num_carry else f"xs[{k - nc - num_carry}] (one slice)")
    out = jaxpr.out_avals
    if len(out) < num_carry:
        raise ControlFlowTypeError(f"the scanned function returns {len(out)} values, fewer "
                                   f"than the {num_carry} carry values")
    for i, (a, b) in enumerate(zip(carry, out)):
        if not _same_type(a, b):
            raise ControlFlowTypeError(
                f"the scanned function's carry output must have the same type as its carry "
                f"input: carry[{i}] is {a.str_short()} on input but {b.str_short()} on output; "
                f"the whole carry is {_types(carry)} on input and "
                f"{_types(out[:num_carry])} on output")
    return ([_join_weak(a, b) for a, b in zip(carry, out)]
            + [ShapedArray((length,) + y.shape, y.dtype, y.weak_type) for y in out[num_carry:]])


def _scan_jvp(primals, tangents, jaxpr, length, reverse, num_consts, num_carry):
    """A scan over (primal, tangent) pairs; nonzero carry tangents found by fixpoint."""
    consts, carry, xs = _split(primals, num_consts, num_carry)
    c_t, carry_t, xs_t = _split(tangents, num_consts, num_carry)
    c_nz, x_nz = [_nonzero(t) for t in c_t], [_nonzero(t) for t in xs_t]
    ny = len(jaxpr.out_avals) - num_carry
    carry_nz = _fixpoint([_nonzero(t) for t in carry_t],
                         lambda nz: ad.jvp_jaxpr(jaxpr, c_nz + nz + x_nz, False)[1][:num_carry])
    body, out_nz = ad.jvp_jaxpr(jaxpr, c_nz + carry_nz + x_nz, carry_nz + [False] * ny)
    y_nz = out_nz[num_carry:]
    nc, ncar, nx = len(consts), num_carry, len(xs)
    nct, ncart, nxt = sum(c_nz), sum(carry_nz), sum(x_nz)
    p, t = 0, nc + ncar + nx       # jvp input order: (consts, carry, xs, their tangents)
    order = (list(range(p, p + nc)) + list(range(t, t + nct))
             + list(range(p + nc, p + nc + ncar)) + list(range(t + nct, t + nct + ncart))
             + list(range(p + nc + ncar, t)) + list(range(t + nct + ncart, t + nct + ncart + nxt)))
    n_out = ncar + ny              # jvp output order: (carry, ys, carry_t, ys_t)
    out_order = (list(range(ncar)) + list(range(n_out, n_out + ncart))
                 + list(range(ncar, n_out)) + list(range(n_out + ncart, len(body.out_avals))))
    body = _reorder(body, order, out_order)
    outs = scan_p.bind(*consts, *[x for x in c_t if _nonzero(x)], *carry,
                       *[instantiate(x) for x, z in zip(carry_t, carry_nz) if z],
                       *xs, *[x for x in xs_t if _nonzero(x)], jaxpr=body, length=length,
                       reverse=reverse, num_consts=nc + nct, num_carry=ncar + ncart)
    carry_out, carry_t_out, ys, ys_t = _split(outs, ncar, ncart, ny)
    out_avals = jaxpr.out_avals[:ncar] + [a.update(shape=(length,) + a.shape)
                                          for a in jaxpr.out_avals[ncar:]]
    t_out = _merge(carry_nz + y_nz, carry_t_out + ys_t, [_tangent_zero(a) for a in out_avals])
    return carry_out + ys, t_out


def _scan_partial_eval(trace, tracers, jaxpr, length, reverse, num_consts, num_carry):
    """Split the body: the known scan also returns the residuals of each step, stacked (or
    once, when a residual is loop-invariant); the unknown scan consumes them."""
    consts, carry, xs = _split(tracers, num_consts, num_carry)
    c_uk = [not t.pval.is_known for t in consts]
    x_uk = [not t.pval.is_known for t in xs]
    ny = len(jaxpr.out_avals) - num_carry
    carry_uk = _fixpoint([not t.pval.is_known for t in carry],
                         lambda uk: ad.partial_eval_jaxpr(jaxpr, c_uk + uk + x_uk,
                                                          False)[2][:num_carry])
    known, unknown, out_uk, num_res = ad.partial_eval_jaxpr(
        jaxpr, c_uk + carry_uk + x_uk, carry_uk + [False] * ny)
    known, unknown, num_res = _recompute_cheap_residuals(known, unknown, num_res)
    jk = known.jaxpr
    n_known_out = len(jk.outvars) - num_res
    k_consts = [t.pval.const for t, u in zip(consts, c_uk) if not u]
    k_carry = [t.pval.const for t, u in zip(carry, carry_uk) if not u]
    k_xs = [t.pval.const for t, u in zip(xs, x_uk) if not u]
    # A residual that does not depend on the carry or xs is the same at every step: it is
    # computed once, outside the loop. One that is a known xs slice is that xs, passed as is.
    varying = set(jk.invars[len(k_consts):])
    for eqn in jk.eqns:
        if any(type(v) is Var and v in varying for v in eqn.invars):
            varying.update(eqn.outvars)
    res_vars = jk.outvars[n_known_out:]
    invariant = [j for j, v in enumerate(res_vars) if not (type(v) is Var and v in varying)]
    stacked = [j for j, v in enumerate(res_vars) if type(v) is Var and v in varying]
    xs_val = dict(zip(jk.invars[len(k_consts) + len(k_carry):], k_xs))
    # a residual that is also a known y (already stacked by the known scan) is reused
    ys_pos = {v: i for i, v in enumerate(jk.outvars[:n_known_out]) if i >= len(k_carry)}
    stacked_from_body = list(dict.fromkeys(res_vars[j] for j in stacked   # each var once
                                           if res_vars[j] not in xs_val
                                           and res_vars[j] not in ys_pos))
    invariant_vals = []
    if invariant:
        once = dce_jaxpr(Jaxpr(jk.constvars, jk.invars[:len(k_consts)],
                               [e for e in jk.eqns if not any(v in varying for v in e.outvars)],
                               [res_vars[j] for j in invariant]))
        invariant_vals = eval_jaxpr(once, known.consts, *k_consts)
    known_body = ClosedJaxpr(dce_jaxpr(Jaxpr(jk.constvars, jk.invars, jk.eqns,
                                             jk.outvars[:n_known_out] + stacked_from_body)),
                             known.consts)
    outs = scan_p.bind(*k_consts, *k_carry, *k_xs, jaxpr=known_body, length=length,
                       reverse=reverse, num_consts=len(k_consts), num_carry=len(k_carry))
    known_outs = outs[:n_known_out]
    res_val = dict(zip(stacked_from_body, outs[n_known_out:]))
    res_val.update(xs_val)
    res_val.update((v, outs[i]) for v, i in ys_pos.items())
    res_vals = [res_val[res_vars[j]] for j in stacked]
    unk_outs = []
    if any(out_uk):
        n_uc, n_ucar, n_ux = c_uk.count(True), carry_uk.count(True), x_uk.count(True)
        order = invariant + list(range(num_res, num_res + n_uc + n_ucar + n_ux)) + stacked
        unk_in = ([trace.pure(v) for v in invariant_vals]
                  + [t for t, u in zip(consts, c_uk) if u]
                  + [t for t, u in zip(carry, carry_uk) if u]
                  + [t for t, u in zip(xs, x_uk) if u] + [trace.pure(r) for r in res_vals])
        unk_outs = _emit_unknown(trace, scan_p, unk_in, dict(
            jaxpr=_reorder(unknown, order), length=length, reverse=reverse,
            num_consts=len(invariant) + n_uc, num_carry=n_ucar))
    return _merge(out_uk, unk_outs, [trace.pure(v) for v in known_outs])


_CHEAP = (add_p, sub_p, mul_p, neg_p)
_CHEAP_OPS = 3          # at most so many such ops recompute one residual


def _recompute_cheap_residuals(known, unknown, num_res):
    """(known, unknown, num_res) with the residuals that a few adds, subs, muls or negs
    make of other residuals (and literals) computed by the unknown body instead of stored:
    an LSTM step's σ'(a) = σ(a)(1 - σ(a)) and tanh' = 1 - tanh² of the σ(a) and tanh
    residuals it keeps anyway. The known loop then writes and stacks fewer arrays per step
    (12 -> 7 for an LSTM layer), and the unknown loop reads fewer; the recomputation is a
    few elementwise ops, fused with the unknown body's own. A residual that is also a known
    output, or appears twice, stays."""
    jk, ju = known.jaxpr, unknown.jaxpr
    n_out = len(jk.outvars) - num_res
    res = jk.outvars[n_out:]
    seen = collections.Counter(v for v in jk.outvars if type(v) is Var)
    slot = {v: ju.invars[i] for i, v in enumerate(res) if type(v) is Var and seen[v] == 1}
    producer = {v: e for e in jk.eqns for v in e.outvars}

    def cone(v, top):
        """The cheap equations computing v from residuals (v itself when top) and
        literals, in order; None when there are none or more than _CHEAP_OPS."""
        if type(v) is Literal or (v in slot and not top):
            return []
        e = producer.get(v)
        if e is None or e.primitive not in _CHEAP:
            return None
        out = []
        for a in e.invars:
            sub = cone(a, False)
            if sub is None:
                return None
            out += [x for x in sub if x not in out]
        out.append(e)
        return out if len(out) <= _CHEAP_OPS else None
    dropped, made = set(), {}
    for r in res:
        if r in slot and r not in dropped:
            c = cone(r, True)
            if c:
                dropped.add(r)
                made.update((id(e), e) for e in c)
    if not dropped:
        return known, unknown, num_res
    # in the known body's order: a cone may read a dropped residual another cone computes
    eqns = [JaxprEqn(e.primitive, [slot.get(a, a) if type(a) is Var else a for a in e.invars],
                     e.params, [slot.get(o, o) for o in e.outvars])
            for e in jk.eqns if id(e) in made]
    keep = [k for k, v in enumerate(res) if v not in dropped]
    known = ClosedJaxpr(Jaxpr(jk.constvars, jk.invars, jk.eqns,
                              jk.outvars[:n_out] + [res[k] for k in keep]), known.consts)
    unknown = ClosedJaxpr(Jaxpr(ju.constvars, [ju.invars[k] for k in keep] + ju.invars[num_res:],
                                eqns + ju.eqns, ju.outvars), unknown.consts)
    return known, unknown, len(keep)


def _scan_transpose(cts, *args, jaxpr, length, reverse, num_consts, num_carry):
    """A scan in the opposite direction over the transposed body: carries the cotangents of
    the carry and accumulates those of the linear consts; emits those of the linear xs.
    A const cotangent that is a contraction of per-step values (a weight's: the step's
    input against its output's cotangent) is not accumulated step by step: the loop
    stacks the per-step values and one contraction over every step follows (_hoist_sums)."""
    consts, carry, xs = _split(args, num_consts, num_carry)
    c_lin, x_lin = [is_undefined(c) for c in consts], [is_undefined(x) for x in xs]
    # carries are linear in a linear scan even when given as (zero) constants
    body_t = ad.transpose_jaxpr(jaxpr, c_lin + [True] * num_carry + x_lin)
    res_c = [c for c, lin in zip(consts, c_lin) if not lin]
    res_x = [x for x, lin in zip(xs, x_lin) if not lin]
    ct_carry, ct_ys = _split([instantiate(c) for c in cts], num_carry)
    acc_avals = [c.aval.strip_weak() for c, lin in zip(consts, c_lin) if lin]
    n_rc, n_rx = len(res_c), len(res_x)
    loop, hoisted, tail = _hoist_sums(body_t, n_rc, n_rx, num_carry, len(acc_avals), length)
    kept = [k for k in range(len(acc_avals)) if k not in hoisted]
    n_acc = len(kept)
    acc_avals_kept = [acc_avals[k] for k in kept]

    def step(*a):
        rc, acc, ctc, rx, cty = _split(a, n_rc, n_acc, num_carry, n_rx)
        ct_consts, rest = _split(_eval(loop, *rc, *rx, *ctc, *cty), n_acc)
        return [add(s, c) for s, c in zip(acc, ct_consts)] + rest
    y_avals = jaxpr.out_avals[num_carry:]
    step_avals = ([get_aval(c) for c in res_c] + acc_avals_kept
                  + [a.strip_weak() for a in jaxpr.out_avals[:num_carry]]
                  + [aval_of(x).update(shape=aval_of(x).shape[1:]) for x in res_x]
                  + [a.strip_weak() for a in y_avals])
    outs = scan_p.bind(*res_c, *[zeros(a) for a in acc_avals_kept], *ct_carry, *res_x, *ct_ys,
                       jaxpr=_trace(step, step_avals), length=length, reverse=not reverse,
                       num_consts=n_rc, num_carry=n_acc + num_carry)
    n_ctx = len(loop.out_avals) - n_acc - num_carry - (len(tail[2]) if tail else 0)
    ct_kept, ct_init, ct_xs, stacked = _split(outs, n_acc, num_carry, n_ctx)
    ct_consts = [None] * len(acc_avals)
    for k, c in zip(kept, ct_kept):
        ct_consts[k] = c
    if hoisted:
        summed, sources, _ = tail
        # the tail's inputs, read outside the loop: loop-invariant consts, stacked residuals
        # and cotangents, the loop's stacked cotangent outputs, and the values it stacked
        pools = {"rc": res_c, "rx": res_x, "cty": ct_ys, "ctx": ct_xs, "new": stacked}
        for k, c in zip(hoisted, _eval(summed, *[pools[g][i] for g, i in sources])):
            ct_consts[k] = c
    return (_merge(c_lin, ct_consts, [None] * len(consts))
            + [ct if is_undefined(c) else None for c, ct in zip(carry, ct_init)]
            + _merge(x_lin, ct_xs, [None] * len(xs)))


_CONTRACTIONS = (dot_general_p, reduce_sum_p)


def _hoist_sums(body_t, n_rc, n_rx, num_carry, n_acc, length):
    """Split a transposed scan body (rc, rx, ct_carry, ct_ys) -> (acc, ct_carry, ct_x) so
    that the const cotangents computed by a contraction (dot_general, reduce_sum) of
    per-step values leave the loop: sum_t f(v_t) is f batched over the stacked v, summed
    over the steps, and contract_sums makes that sum part of the contraction (x_tᵀ ct_t
    summed over t is one GEMM over time and batch). Returns (loop body, hoisted acc
    indices, tail): the loop body outputs the kept accs, ct_carry, ct_x, then the
    per-step values it must stack; tail = (summed program, its inputs as (pool, index)
    pairs, the stacked vars) or None. Hoisted only when the values stacked for it take
    no more memory per step than the accumulators it replaces."""
    j = body_t.jaxpr
    nothing = (body_t, [], None)
    if length < 2 or not n_acc:
        return nothing
    producer = {v: i for i, e in enumerate(j.eqns) for v in e.outvars}

    def needed(outs):
        live, idx = {v for v in outs if type(v) is Var}, set()
        for i in range(len(j.eqns) - 1, -1, -1):
            e = j.eqns[i]
            if e.primitive.effectful or any(v in live for v in e.outvars):
                idx.add(i)
                live.update(v for v in e.invars if type(v) is Var)
        return idx
    acc_out, others = j.outvars[:n_acc], j.outvars[n_acc:]
    hoist = [k for k in range(n_acc) if type(acc_out[k]) is Var and acc_out[k] in producer]
    while True:
        loop_idx = needed(others + [acc_out[k] for k in range(n_acc) if k not in hoist])
        tail_idx = needed([acc_out[k] for k in hoist]) - loop_idx
        keep = [k for k in hoist if producer[acc_out[k]] in tail_idx
                and any(j.eqns[i].primitive in _CONTRACTIONS
                        for i in needed([acc_out[k]]) & tail_idx)]
        if keep == hoist:
            break
        hoist = keep
    if not hoist or any(j.eqns[i].primitive.effectful for i in tail_idx):
        return nothing
    tail_eqns = [j.eqns[i] for i in sorted(tail_idx)]
    made = {v for e in tail_eqns for v in e.outvars}
    frontier = list(dict.fromkeys(a for e in tail_eqns for a in e.invars
                                  if type(a) is Var and a not in made
                                  and a not in j.constvars))
    groups = {}
    for name, vs in (("rc", j.invars[:n_rc]), ("rx", j.invars[n_rc:n_rc + n_rx]),
                     ("cty", j.invars[n_rc + n_rx + num_carry:]),
                     ("ctx", others[num_carry:])):
        for i, v in enumerate(vs):
            if type(v) is Var:
                groups.setdefault(v, (name, i))
    new = [v for v in frontier if v not in groups]
    if sum(v.aval.size * v.aval.dtype.itemsize for v in new) > sum(
            acc_out[k].aval.size * acc_out[k].aval.dtype.itemsize for k in hoist):
        return nothing
    sources = [groups[v] if v in groups else ("new", new.index(v)) for v in frontier]
    loop = ClosedJaxpr(dce_jaxpr(Jaxpr(j.constvars, j.invars, j.eqns,
                                       [acc_out[k] for k in range(n_acc) if k not in hoist]
                                       + others + new)), body_t.consts)
    tail = ClosedJaxpr(Jaxpr(j.constvars, frontier, tail_eqns, [acc_out[k] for k in hoist]),
                       body_t.consts)
    batched = [g != "rc" for g, _ in sources]
    tail_b, _ = batching.batch_jaxpr(tail, length, batched, True)
    avals = [v.aval.update(shape=(length,) + v.aval.shape) if b else v.aval
             for v, b in zip(frontier, batched)]
    summed = _trace(lambda *a: [reduce_sum(o, axes=(0,)) for o in _eval(tail_b, *a)], avals)
    return loop, hoist, (contract_sums(summed), sources, new)


def _scan_batch(vals, dims, jaxpr, length, reverse, num_consts, num_carry):
    """Batch the body; batched xs/ys carry the batch axis second (after the scan axis)."""
    size = bdim_size(vals, dims)
    consts, carry, xs = _split(vals, num_consts, num_carry)
    dc, dcar, dx = _split(dims, num_consts, num_carry)
    c_b, x_b = [d is not None for d in dc], [d is not None for d in dx]
    ny = len(jaxpr.out_avals) - num_carry
    carry_b = _fixpoint([d is not None for d in dcar],
                        lambda b: batching.batch_jaxpr(jaxpr, size, c_b + b + x_b,
                                                       False)[1][:num_carry])
    body, out_b = batching.batch_jaxpr(jaxpr, size, c_b + carry_b + x_b, carry_b + [False] * ny)
    consts = [c if d is None else moveaxis(c, d, 0) for c, d in zip(consts, dc)]
    carry = [c if not b else broadcast_batched(c, size) if d is None else moveaxis(c, d, 0)
             for c, d, b in zip(carry, dcar, carry_b)]
    # the body sees one slice x[i] with its batch axis first, so xs carry it at axis 1
    xs = [x if d is None else moveaxis(x, d, 1) for x, d in zip(xs, dx)]
    outs = scan_p.bind(*consts, *carry, *xs, jaxpr=body, length=length, reverse=reverse,
                       num_consts=num_consts, num_carry=num_carry)
    return outs, ([0 if b else None for b in carry_b]
                  + [1 if b else None for b in out_b[num_carry:]])


scan_p = defprim("scan", _scan_impl, _scan_shape, jvp=_scan_jvp, transpose=_scan_transpose,
                 batch=_scan_batch, multiple_results=True, partial_eval=_scan_partial_eval,
                 known_outputs_first=True,   # its known part: the outputs, then residuals
                 fresh=True)                 # new arrays: _scan_impl, _fresh_carry
