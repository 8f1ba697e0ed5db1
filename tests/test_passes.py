"""Each optimization pass on its own: what it removes, what it keeps, and that the
program still computes the same values (and still type-checks)."""
from __future__ import annotations

import numpy as np
import pytest

import functrans as ft
import functrans.numpy as fnp
from functrans import core, fusion, passes
from functrans.core import ClosedJaxpr, Jaxpr, JaxprEqn, Literal, ShapedArray, Var
from functrans.primitives import REGISTRY

from conftest import assert_close

pytestmark = pytest.mark.usefixtures("x64")  # float64 references: conftest.x64

F32 = np.float32


def prims(closed):
    return [e.primitive.name for e in closed.jaxpr.eqns]


def run(closed, *args):
    return core.eval_jaxpr(closed.jaxpr, closed.consts, *args)


def same_values(a, b, *args):
    core.check_jaxpr(a.jaxpr)
    core.check_jaxpr(b.jaxpr)
    for x, y in zip(run(a, *args), run(b, *args), strict=True):
        assert_close(x, y)


def x3(seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, 3).astype(F32)


# ---------------------------------------------------------------------------
# dead-code elimination


def test_dce_drops_unused_equations_and_constants():
    c = np.arange(3, dtype=F32)

    def f(x):
        _ = fnp.sin(x) * c          # dead, and so is the constant it reads
        return fnp.cos(x)
    closed = ft.make_jaxpr(f)(x3())
    raw = ClosedJaxpr(Jaxpr([Var(ShapedArray((3,), F32))] + closed.jaxpr.constvars,
                            closed.jaxpr.invars,
                            [JaxprEqn(REGISTRY["sin"], closed.jaxpr.invars, {},
                                      [Var(ShapedArray((3,), F32))])] + closed.jaxpr.eqns,
                            closed.jaxpr.outvars), [c] + closed.consts)
    out = passes.dce(raw)
    assert prims(out) == ["cos"]
    assert out.consts == []
    same_values(raw, out, x3())


def test_dce_jaxpr_keeps_its_signature_and_used_outputs():
    closed = ft.make_jaxpr(lambda x: (fnp.sin(x), fnp.cos(x)))(x3())
    j = passes.dce_jaxpr(closed.jaxpr, used_outputs=[False, True])
    assert [e.primitive.name for e in j.eqns] == ["cos"] and len(j.outvars) == 1


# ---------------------------------------------------------------------------
# common-subexpression elimination


def test_cse_merges_identical_equations():
    closed = ft.make_jaxpr(lambda x: fnp.sin(x) * 2.0 + fnp.sin(x) * 2.0)(x3())
    assert prims(closed).count("sin") == 2
    out = passes.dce(passes.cse(closed))
    assert prims(out).count("sin") == 1 and prims(out).count("mul") == 1
    same_values(closed, out, x3())


def test_cse_respects_params_and_literals():
    def f(x):
        return (fnp.sum(x, axis=0), fnp.sum(x, axis=1), x * 2.0, x * 3.0)
    x = np.ones((2, 3), F32)
    closed = ft.make_jaxpr(f)(x)
    out = passes.cse(closed)
    assert prims(out) == prims(closed)          # nothing is equal here
    same_values(closed, out, x)


# ---------------------------------------------------------------------------
# constant folding


def test_fold_constants_evaluates_known_equations():
    c = np.arange(3, dtype=F32)
    closed = ft.make_jaxpr(lambda x: x + fnp.sin(c) * 2.0)(x3())
    assert "sin" in prims(closed)
    out = passes.dce(passes.fold_constants(closed))
    assert prims(out) == ["add"]
    assert_close(out.consts[0], np.sin(c) * 2)
    same_values(closed, out, x3())


def test_fold_constants_does_not_expand_broadcasts():
    x = np.ones((1000,), F32)
    closed = ft.make_jaxpr(lambda x: (x, fnp.broadcast_to(2.0, (1000,))))(x)
    assert prims(closed) == ["broadcast_in_dim"]
    out = passes.fold_constants(closed)
    assert prims(out) == ["broadcast_in_dim"] and out.consts == []


def test_fold_constants_makes_rank0_results_literals():
    c = np.asarray([2.0], F32)
    closed = ft.make_jaxpr(lambda x: x * fnp.sum(c))(x3())
    out = passes.dce(passes.fold_constants(closed))
    assert prims(out) == ["mul"]
    assert any(type(a) is Literal for a in out.jaxpr.eqns[0].invars)
    same_values(closed, out, x3())


# ---------------------------------------------------------------------------
# simplification of AD leftovers


def test_simplify_removes_mul_by_one_and_scalar_broadcasts():
    # what a VJP seeded with ones leaves: broadcast(1.0) * cos x, built by hand (the
    # tracer may already skip some of it)
    a3 = ShapedArray((3,), F32)
    x, ones, c, d = Var(a3), Var(a3), Var(a3), Var(a3)
    closed = ClosedJaxpr(Jaxpr([], [x], [
        JaxprEqn(REGISTRY["broadcast_in_dim"], [Literal(np.float32(1.0))],
                 {"shape": (3,), "broadcast_dimensions": ()}, [ones]),
        JaxprEqn(REGISTRY["cos"], [x], {}, [c]),
        JaxprEqn(REGISTRY["mul"], [ones, c], {}, [d])], [d]), [])
    out = passes.optimize(closed)
    assert prims(out) == ["cos"]
    same_values(closed, out, x3())


@pytest.mark.parametrize("expr, left", [
    (lambda x: x * 1.0, []), (lambda x: 1.0 * x, []), (lambda x: x + 0.0, []),
    (lambda x: x - 0.0, []), (lambda x: x / 1.0, []), (lambda x: -(-x), []),
    (lambda x: x * 2.0, ["mul"]), (lambda x: x - 1.0, ["sub"]),
])
def test_simplify_identities(expr, left):
    closed = ft.make_jaxpr(expr)(x3())
    out = passes.dce(passes.simplify(closed))
    assert prims(out) == left
    same_values(closed, out, x3())


def test_simplify_transpose_of_transpose_and_identity_reshape():
    x = np.arange(24, dtype=F32).reshape(2, 3, 4)
    closed = ft.make_jaxpr(lambda x: fnp.transpose(fnp.transpose(x, (1, 2, 0)), (2, 0, 1)))(x)
    assert prims(passes.dce(passes.simplify(closed))) == []
    closed2 = ft.make_jaxpr(lambda x: fnp.transpose(fnp.transpose(x, (1, 2, 0)), (1, 0, 2)))(x)
    out2 = passes.dce(passes.simplify(closed2))
    assert prims(out2) == ["transpose"]
    same_values(closed2, out2, x)
    closed3 = ft.make_jaxpr(lambda x: fnp.reshape(fnp.reshape(x, (6, 4)), (4, 6)))(x)
    out3 = passes.dce(passes.simplify(closed3))
    assert prims(out3) == ["reshape"]
    same_values(closed3, out3, x)


def test_simplify_concatenation_of_merging_reshapes():
    """The heads of q, k, v gradients ((B, H, T, D) -> (B, T, H, D) -> (B, T, H*D),
    concatenated): one concatenation of the transposed operands along H into a C-contiguous
    array, then a reshape that is a view; not when a reshape is read elsewhere, merges other
    axes, or the concatenation is not along the last axis."""
    rng = np.random.default_rng(0)
    hs = [rng.standard_normal((2, 3, 5, 4)).astype(F32) for _ in range(3)]

    def heads(*xs):
        return fnp.concatenate([fnp.reshape(fnp.transpose(x, (0, 2, 1, 3)), (2, 5, 12))
                                for x in xs], axis=-1)
    closed = ft.make_jaxpr(heads)(*hs)
    out = passes.dce(passes.simplify(closed))
    assert prims(out) == ["transpose"] * 3 + ["concatenate", "reshape"]
    same_values(closed, out, *hs)
    (cat,) = (e for e in out.jaxpr.eqns if e.primitive.name == "concatenate")
    assert cat.outvars[0].aval.shape == (2, 5, 9, 4)
    got = core.eval_jaxpr(out.jaxpr, out.consts, *hs)[0]
    assert np.array_equal(got, heads(*hs))
    inner = REGISTRY["concatenate"].impl(np, *(h.transpose(0, 2, 1, 3) for h in hs), dimension=2)
    assert inner.flags.c_contiguous           # its reshape is a view

    def read_elsewhere(a, b):
        r = fnp.reshape(a, (2, 3, 20))
        return fnp.concatenate([r, fnp.reshape(b, (2, 3, 20))], axis=-1), r
    for f in (read_elsewhere,
              lambda a, b: fnp.concatenate([fnp.reshape(a, (6, 20)),
                                            fnp.reshape(b, (6, 20))], axis=-1),   # merges lead
              lambda a, b: fnp.concatenate([fnp.reshape(a, (2, 3, 20)),
                                            fnp.reshape(b, (2, 3, 20))], axis=1)):
        closed = ft.make_jaxpr(f)(hs[0], hs[1])
        kept = passes.dce(passes.simplify(closed))
        assert [e.outvars[0].aval for e in kept.jaxpr.eqns if e.primitive.name == "concatenate"] \
            == [closed.jaxpr.outvars[0].aval]


def test_simplify_drops_same_dtype_conversions_and_stop_gradient():
    closed = ft.make_jaxpr(lambda x: ft.stop_gradient(x.astype(np.float32)) * 2.0)(x3())
    out = passes.dce(passes.simplify(closed))
    assert prims(out) == ["mul"]
    same_values(closed, out, x3())


def test_simplify_transpose_of_matmul_swaps_operands():
    a = np.arange(6, dtype=F32).reshape(2, 3)
    b = np.arange(12, dtype=F32).reshape(3, 4)
    closed = ft.make_jaxpr(lambda a, b: fnp.transpose(a @ b))(a, b)
    out = passes.dce(passes.simplify(closed))
    assert prims(out) == ["dot_general"]
    same_values(closed, out, a, b)


def test_simplify_keeps_mul_by_one_that_broadcasts():
    # 1.0 * x with x rank 0 broadcast against a vector: the mul is a broadcast, keep it
    closed = ft.make_jaxpr(lambda x, v: (x * 1.0) + v)(np.float32(2.0), x3())
    out = passes.optimize(closed)
    same_values(closed, out, np.float32(2.0), x3())


# ---------------------------------------------------------------------------
# sums of zero-padded pieces (the cotangent of a split)


def _split_grad(x):
    def f(x):
        q, k, v = fnp.split(x, 3, axis=2)
        return fnp.sum(q * 2.0) + fnp.sum(k * k) + fnp.sum(fnp.sin(v))
    return ft.make_jaxpr(ft.grad(f))(x)


def test_merge_pads_makes_the_cotangent_of_a_split_one_concatenate():
    x = np.random.default_rng(0).uniform(-1, 1, (4, 5, 12)).astype(F32)
    closed = _split_grad(x)
    assert prims(closed).count("pad") == 3
    out = passes.dce(passes.merge_pads(closed))
    assert "pad" not in prims(out) and "add" in prims(closed)
    assert prims(out).count("concatenate") == 1
    cat = next(e for e in out.jaxpr.eqns if e.primitive.name == "concatenate")
    assert len(cat.invars) == 3                 # the pieces, not a concatenate of one
    same_values(closed, out, x)
    assert prims(passes.optimize(closed)).count("concatenate") == 1


def test_merge_pads_fills_with_zeros_what_the_pieces_leave_uncovered():
    def f(x):
        a, b, c, d = fnp.split(x, 4, axis=1)
        return fnp.sum(b * b) + fnp.sum(fnp.sin(c))       # a, d get no cotangent
    x = np.random.default_rng(1).uniform(-1, 1, (3, 8)).astype(F32)
    closed = ft.make_jaxpr(ft.grad(f))(x)
    out = passes.dce(passes.merge_pads(closed))
    assert "pad" not in prims(out) and prims(out).count("concatenate") == 1
    cat = next(e for e in out.jaxpr.eqns if e.primitive.name == "concatenate")
    assert [v.aval.shape[1] for v in cat.invars] == [2, 2, 2, 2]   # zeros, b, c, zeros
    same_values(closed, out, x)


def test_merge_pads_keeps_what_it_cannot_merge():
    x = np.random.default_rng(2).uniform(-1, 1, (3, 8)).astype(F32)
    # overlapping slices, a pad that another equation reads too, a pad of ones
    closed = ft.make_jaxpr(ft.grad(lambda x: fnp.sum(x[:, :5] ** 2)
                                   + fnp.sum(fnp.sin(x[:, 3:]))))(x)
    assert prims(passes.merge_pads(closed)).count("pad") == 2
    pad = lambda v, lo, hi: ft.lax.pad(v, F32(0), ((0, 0, 0), (lo, hi, 0)))   # noqa: E731
    closed = passes.cse(ft.make_jaxpr(lambda a, b: (pad(a, 0, 4) + pad(b, 4, 0),
                                                    pad(a, 0, 4)))(x[:, :4], x[:, 4:]))
    assert "concatenate" not in prims(passes.merge_pads(closed))
    nonzero = ft.make_jaxpr(lambda a, b: ft.lax.pad(a, F32(1), ((0, 0, 0), (0, 4, 0)))
                            + pad(b, 4, 0))(x[:, :4], x[:, 4:])
    assert "concatenate" not in prims(passes.merge_pads(nonzero))


# ---------------------------------------------------------------------------
# inlining (jit of jit)


def test_inline_calls_flattens_nested_jit():
    inner = ft.jit(lambda x: fnp.sin(x) + 1.0)
    closed = ft.make_jaxpr(lambda x: inner(x) * inner(x + 1.0))(x3())
    assert prims(closed).count("jit") == 2
    out = passes.inline_calls(closed)
    assert "jit" not in prims(out) and prims(out).count("sin") == 2
    same_values(closed, out, x3())


# ---------------------------------------------------------------------------
# fusion grouping


def chain(x, y):
    a = fnp.sin(x) * y
    b = fnp.exp(a) + 1.0
    return b * fnp.cos(y)


def test_fuse_groups_a_chain_into_one_equation():
    closed = ft.make_jaxpr(chain)(x3(0), x3(1))
    out = fusion.fuse(closed)
    assert prims(out) == ["fused"]
    eqn = out.jaxpr.eqns[0]
    assert eqn.params["name"] == "fused_sin_mul_exp_add_cos"
    same_values(closed, out, x3(0), x3(1))
    assert prims(fusion.unfuse(out)) == prims(closed)


def test_fuse_stops_at_reductions_and_keeps_order():
    def f(x):
        y = fnp.sin(x) * 2.0
        s = fnp.sum(y)                    # a reduction reads the group: it closes
        return fnp.cos(y) + s
    closed = ft.make_jaxpr(f)(x3())
    out = fusion.fuse(closed)
    assert prims(out)[0] == "fused" and "reduce_sum" in prims(out)
    same_values(closed, out, x3())


def test_fuse_includes_broadcasts_and_materializes_shared_values():
    def f(x, b):
        h = x * 2.0 + b                   # b: f32[4] broadcast to f32[3, 4]
        return fnp.tanh(h), fnp.sum(h, axis=0)
    x = np.ones((3, 4), F32)
    b = np.arange(4, dtype=F32)
    closed = ft.make_jaxpr(f)(x, b)
    out = fusion.fuse(closed)
    fused = [e for e in out.jaxpr.eqns if e.primitive is fusion.fused_p]
    # the reduction sinks below tanh, so one group computes both; h, read by the
    # reduction, is one of its outputs (materialized), the rest stays inside
    assert len(fused) == 1 and len(fused[0].outvars) == 2
    inner = fused[0].params["jaxpr"]
    assert "broadcast_in_dim" in [e.primitive.name for e in inner.eqns]
    same_values(closed, out, x, b)


def test_fuse_sinks_reductions_so_the_backward_joins_the_forward():
    g = ft.value_and_grad(lambda x: fnp.sum(fnp.tanh(fnp.sin(x) * 3.0)))
    closed = passes.optimize(ft.make_jaxpr(g)(x3()))
    out = fusion.fuse(closed)
    assert prims(out).count("fused") == 1
    same_values(closed, out, x3())


def test_split_at_slices_moves_sliced_work_into_the_readers():
    """An LSTM step: h @ W^T + b + x cut into four gate blocks, each read by elementwise
    work. The adds (and the bias's broadcast, cut at the bias) move to the slices, so one
    group computes each step's gates from slices of the product; the product itself stays
    whole. Work whose result is also read whole, an output, or cut into overlapping slices
    stays whole too (pieces would repeat work)."""
    H = 4
    rng = np.random.default_rng(0)
    h, w, b, x, c = (rng.standard_normal(s).astype(F32)
                     for s in [(3, H), (4 * H, H), (4 * H,), (3, 4 * H), (3, H)])

    def cell(h, w, b, x, c):
        g = h @ w.T + b + x
        i, f, z, o = g[:, :H], g[:, H:2 * H], g[:, 2 * H:3 * H], g[:, 3 * H:]
        c = ft.lax.logistic(f) * c + ft.lax.logistic(i) * fnp.tanh(z)
        return ft.lax.logistic(o) * fnp.tanh(c), c
    closed = ft.make_jaxpr(cell)(h, w, b, x, c)
    out = fusion.split_at_slices(closed)
    same_values(closed, out, h, w, b, x, c)
    assert prims(out).count("add") == prims(closed).count("add") - 2 + 8
    for e in out.jaxpr.eqns:
        if e.primitive.name in ("add", "broadcast_in_dim"):
            assert e.outvars[0].aval.shape[-1] == H       # every piece one gate wide
        if e.primitive.name == "slice" and e.invars[0].aval.ndim == 1:
            assert e.outvars[0].aval.shape == (H,)        # the bias cut before its broadcast
    fused = fusion.fuse(out)
    assert prims(fused).count("fused") == 1 and "dot_general" in prims(fused)

    def overlapping(x):
        y = fnp.exp(x)
        return fnp.sin(y[:, :3]), fnp.cos(y[:, 1:])

    def read_whole(x):
        y = fnp.exp(x)
        return fnp.sin(y[:, :2]) + fnp.sum(y), fnp.cos(y[:, 2:])

    def output(x):
        y = fnp.exp(x)
        return fnp.sin(y[:, :2]), y
    for f in (overlapping, read_whole, output):
        closed = ft.make_jaxpr(f)(x)
        assert fusion.split_at_slices(closed) is closed


def test_split_at_slices_through_an_unrolled_recurrence_and_its_gradient():
    """Five unrolled LSTM steps and their gradient (the cotangents cut the same way): one
    walk from the last equation splits every step's pre-activations, the values stay the
    same. (Rescanning after each split took 0.9 s on 60 steps' gradient, 2,754 equations;
    the walk 12 ms.)"""
    H, T = 4, 5
    rng = np.random.default_rng(1)
    w, b, xs = (rng.standard_normal(s).astype(F32) for s in [(4 * H, H), (4 * H,), (T, 3, 4 * H)])

    def rnn(w, b, xs):
        h = c = fnp.zeros((3, H), F32)
        for t in range(T):
            g = h @ w.T + b + xs[t]
            i, f, z, o = g[:, :H], g[:, H:2 * H], g[:, 2 * H:3 * H], g[:, 3 * H:]
            c = ft.lax.logistic(f) * c + ft.lax.logistic(i) * fnp.tanh(z)
            h = ft.lax.logistic(o) * fnp.tanh(c)
        return fnp.sum(h * h)
    closed = passes.optimize(ft.make_jaxpr(ft.value_and_grad(rnn, argnums=(0, 1)))(w, b, xs))
    out = fusion.split_at_slices(closed)
    same_values(closed, out, w, b, xs)
    whole = [e for e in out.jaxpr.eqns if e.primitive.name == "add"
             and e.outvars[0].aval.shape == (3, 4 * H)]
    assert len(whole) < len([e for e in closed.jaxpr.eqns if e.primitive.name == "add"
                             and e.outvars[0].aval.shape == (3, 4 * H)])
    assert not any(e.primitive.name == "add" and e.outvars[0].aval.shape == (3, 4 * H)
                   and all(r.primitive.name == "slice" for r in out.jaxpr.eqns
                           if e.outvars[0] in r.invars) for e in whole)


def test_fuse_never_merges_different_shapes_or_creates_cycles():
    def f(x, m):
        a = fnp.sin(x)                                   # f32[3]
        s = fnp.sum(a)                                   # closes the group of a
        c = fnp.cos(a) * s                               # a new group after the reduction
        d = fnp.exp(m) + 1.0                             # f32[2, 2]: a group of its own
        return c, d
    closed = ft.make_jaxpr(f)(x3(), np.ones((2, 2), F32))
    out = fusion.fuse(closed, min_eqns=1)
    core.check_jaxpr(out.jaxpr)
    for e in out.jaxpr.eqns:
        if e.primitive is fusion.fused_p:
            shapes = {v.aval.shape for m in e.params["jaxpr"].eqns for v in m.outvars}
            assert len(shapes) == 1
    same_values(closed, out, x3(), np.ones((2, 2), F32))


def test_fuse_moves_an_output_only_product_up_to_its_inputs():
    """A product only the program returns (a weight's gradient) is placed at the first
    split of groups after its operands are made, not left at the end where transposition
    put it (its operand out of cache by then); the groups around it stay whole."""
    def f(x, w):
        a = fnp.tanh(x) * 2.0                   # a group
        b = a @ w                               # read below
        c = fnp.exp(b) + 1.0                    # a group
        d = c @ w                               # read below
        e = fnp.sin(d) * 3.0                    # a group
        g = ft.lax.dot_general(a, a, (((0,), (0,)), ((), ())))     # aᵀ a, written last
        return e, g
    x, w = np.ones((4, 4), F32) * 0.1, np.eye(4, dtype=F32)
    closed = ft.make_jaxpr(f)(x, w)
    out = fusion.fuse(closed)
    core.check_jaxpr(out.jaxpr)
    kinds = [("fused" if e.primitive is fusion.fused_p else e.primitive.name)
             for e in out.jaxpr.eqns]
    assert kinds == ["fused", "dot_general", "dot_general", "fused", "dot_general", "fused"]
    same_values(closed, out, x, w)


# ---------------------------------------------------------------------------
# buffer reuse


def _kind(e):
    return "out" if e.primitive.elementwise else "fresh"


def test_plan_buffers_reuses_dead_buffers():
    def f(x):
        for _ in range(10):
            x = fnp.sin(x) * 2.0
        return x
    closed = ft.make_jaxpr(f)(x3())
    plan = passes.plan_buffers(closed.jaxpr, _kind)
    assert len(plan.slots) <= 2            # 20 values, two buffers alternate
    inplace = passes.plan_buffers(closed.jaxpr, _kind, inplace=lambda e, i, o: True)
    assert len(inplace.slots) == 1 and len(inplace.inplace) == 19


def test_plan_buffers_never_reuses_a_live_value_or_an_output():
    def f(x):
        a = fnp.sin(x)
        b = fnp.cos(x)
        c = a * b
        return c, a
    closed = ft.make_jaxpr(f)(x3())
    j = closed.jaxpr
    plan = passes.plan_buffers(j, _kind, inplace=lambda e, i, o: True)
    a, c = j.outvars[1], j.outvars[0]
    assert plan.slot_of[a] != plan.slot_of[c]          # a is live until the end
    assert plan.escapes[plan.slot_of[a]] and plan.escapes[plan.slot_of[c]]


def test_plan_buffers_donation_and_copied_outputs():
    closed = ft.make_jaxpr(lambda x, y: (x * 2.0, y))(x3(), x3(1))
    j = closed.jaxpr
    plan = passes.plan_buffers(j, _kind, inplace=lambda e, i, o: True, donated=(True, False))
    s = plan.slot_of[j.outvars[0]]
    assert plan.donor[s] == 0                           # written into x's own buffer
    assert plan.copy_out == [False, True]               # y is an input: copied


def test_plan_buffers_views_keep_their_base_alive():
    def f(x):
        a = fnp.sin(x)                     # buffer A
        r = fnp.reshape(a, (3, 1))         # a view of A
        b = fnp.cos(x)                     # must not take A: r still reads it
        return fnp.reshape(r, (3,)) + b
    closed = ft.make_jaxpr(f)(x3())
    j = closed.jaxpr
    plan = passes.plan_buffers(j, lambda e: "view" if e.primitive.name == "reshape"
                               else _kind(e), inplace=lambda e, i, o: True)
    a = j.eqns[0].outvars[0]
    b = next(e.outvars[0] for e in j.eqns if e.primitive.name == "cos")
    assert plan.slot_of[a] != plan.slot_of[b]


def test_optimize_preserves_values_on_a_training_step():
    rng = np.random.default_rng(0)
    W = rng.normal(size=(4, 3)).astype(F32)
    b = np.zeros(3, F32)
    x = rng.normal(size=(5, 4)).astype(F32)

    def loss(W, b, x):
        h = fnp.tanh(x @ W + b)
        return fnp.mean(h * h)

    def step(W, b, x):
        l, (gW, gb) = ft.value_and_grad(loss, argnums=(0, 1))(W, b, x)
        return l, W - 0.1 * gW, b - 0.1 * gb
    closed = ft.make_jaxpr(step)(W, b, x)
    out = passes.optimize(closed)
    assert len(out.jaxpr.eqns) <= len(closed.jaxpr.eqns)    # tracing already leaves it lean
    same_values(closed, out, W, b, x)
    same_values(closed, fusion.fuse(out), W, b, x)


def test_simplify_composes_broadcasts_and_negates():
    a3 = ShapedArray((3,), F32)
    a23 = ShapedArray((2, 3), F32)
    x, q, t, r, s = Var(a23), Var(a3), Var(a23), Var(a23), Var(a23)
    closed = ClosedJaxpr(Jaxpr([], [x], [
        JaxprEqn(REGISTRY["broadcast_in_dim"], [Literal(np.float32(-1.0))],
                 {"shape": (3,), "broadcast_dimensions": ()}, [q]),
        JaxprEqn(REGISTRY["broadcast_in_dim"], [q],
                 {"shape": (2, 3), "broadcast_dimensions": (1,)}, [t]),
        JaxprEqn(REGISTRY["mul"], [x, t], {}, [r]),
        JaxprEqn(REGISTRY["neg"], [r], {}, [s])], [s]), [])
    out = passes.optimize(closed)
    assert prims(out) == []                      # -(x * -1) is x
    same_values(closed, out, np.arange(6, dtype=F32).reshape(2, 3) - 2.5)


def test_a_sum_of_zero_pads_becomes_one_concatenation():
    """The cotangent of an array read as slices (a recurrent layer's gates) is a sum of
    zero pads; merge_pads makes it one concatenation (zeros filling a gap), same values;
    pads that overlap stay a sum."""
    def f(x):
        return (fnp.sum(fnp.sin(x[:, :3])) + fnp.sum(fnp.cos(x[:, 5:7]))
                + fnp.sum(fnp.tanh(x[:, 7:])))
    x = np.random.default_rng(0).standard_normal((4, 9))
    closed = ft.make_jaxpr(ft.grad(f))(x)
    assert "pad" in str(closed)
    opt = passes.optimize(closed)
    assert "concatenate" in str(opt) and "pad" not in str(opt)
    np.testing.assert_array_equal(passes.merge_pads(closed)(x)[0], closed(x)[0])
    np.testing.assert_allclose(opt(x)[0], ft.grad(f)(x), rtol=1e-15)

    def g(x):                                   # overlapping slices: left as a sum
        return fnp.sum(fnp.sin(x[:, :5])) + fnp.sum(fnp.cos(x[:, 3:]))
    closed = ft.make_jaxpr(ft.grad(g))(x)
    assert "concatenate" not in str(passes.merge_pads(closed))


def test_contract_sums_on_a_long_chain_of_adds():
    """A sum over a chain of thousands of adds (the cotangent of a value used as many
    times) is optimized without recursing through the whole chain (it raised RecursionError)."""
    n = 3000

    def f(*xs):
        s = xs[0]
        for x in xs[1:]:
            s = s + x
        return fnp.sum(s, axis=0)
    args = [np.full((2, 3), i, F32) for i in range(n)]
    closed = ft.make_jaxpr(f)(*args)
    opt = passes.contract_sums(closed)
    assert_close(run(opt, *args)[0], np.full(3, 2 * sum(range(n)), F32))
