"""Contractions as GEMMs (issue 30): a matrix applied along leading axes is one contraction
(fnp.matmul, the recurrent layers' projections), its cotangent contracts every leading axis
at once (dot_general's impl, passes.contract_sums), and a scan's weight cotangents leave
the reverse loop as one contraction over the steps instead of a product per step
accumulated. Values and gradients against float64 finite differences and einsum."""
from __future__ import annotations

import numpy as np
import pytest

import functrans as ft
import functrans.numpy as fnp
from functrans import core, lax, passes
from functrans.facade import engine
from functrans.higher_order.scan_layout import _const_layout
from functrans.nn.functional._rnn import GATES, rnn_layer
from functrans.primitives import linalg as la
from functrans.primitives.linalg import _dot_impl

from conftest import assert_close

pytestmark = pytest.mark.usefixtures("x64")  # float64 references: conftest.x64


def _einsum_ref(x, y, lc, rc):
    """dot_general without batch axes, written with einsum's labels."""
    xl = list(range(x.ndim))
    yl = [xl[lc[rc.index(i)]] if i in rc else 20 + i for i in range(y.ndim)]
    out = [i for i in xl if i not in lc] + [20 + i for i in range(y.ndim) if i not in rc]
    return np.einsum(x, xl, y, yl, out)


def _fd_grad(f, args, i, eps=1e-6):
    """Central finite differences of a scalar f with respect to args[i] (float64)."""
    a = np.asarray(args[i], np.float64)
    g = np.zeros_like(a)
    for idx in np.ndindex(a.shape):
        hi, lo = a.copy(), a.copy()
        hi[idx] += eps
        lo[idx] -= eps
        g[idx] = (float(f(*args[:i], hi, *args[i + 1:]))
                  - float(f(*args[:i], lo, *args[i + 1:]))) / (2 * eps)
    return g


def _prims(closed):
    return [e.primitive.name for e in closed.jaxpr.eqns]


# ---------------------------------------------------------------------------
# dot_general's impl: contractions without batch axes


@pytest.mark.parametrize("xs,ys,lc,rc", [
    ((3, 4, 5), (3, 4, 6), (0, 1), (0, 1)),     # (T, B, H) against (T, B, G): one GEMM
    ((3, 4, 5), (3, 4, 6), (1, 0), (1, 0)),     # the same pairs in another order
    ((5, 3, 4), (6, 3, 4), (1, 2), (1, 2)),     # trailing axes
    ((3, 4, 5), (6, 3, 4), (0, 1), (1, 2)),     # leading against trailing
    ((3, 4, 5), (3, 6, 5), (0, 2), (0, 2)),     # a convolution's weight: batched, summed
    ((3, 4, 5), (3, 6, 5), (2, 0), (2, 0)),
    ((3, 4, 5), (4, 3, 6), (0, 1), (1, 0)),     # crossed pairs: tensordot
    ((3, 4, 5), (5, 6), (2,), (0,)),
])
def test_contraction_impl_matches_einsum(xs, ys, lc, rc):
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(xs), rng.standard_normal(ys)
    out = _dot_impl(np, x, y, ((lc, rc), ((), ())))
    assert_close(out, _einsum_ref(x, y, lc, rc))
    xi, yi = (rng.integers(-3, 4, s).astype(np.int32) for s in (xs, ys))
    got = _dot_impl(np, xi, yi, ((lc, rc), ((), ())))
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, _einsum_ref(xi, yi, lc, rc))


def test_contraction_over_leading_axes_reads_operands_in_place():
    """(T, B, G) against (T, B, H) over T and B is a matmul of reshaped views: the
    operands are not copied into another layout (tensordot would transpose one)."""
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal((7, 5, 4)), rng.standard_normal((7, 5, 3))
    calls = []
    real = np.tensordot
    try:
        np.tensordot = lambda *a, **k: calls.append(1) or real(*a, **k)
        out = _dot_impl(np, x, y, (((0, 1), (0, 1)), ((), ())))
    finally:
        np.tensordot = real
    assert not calls
    assert_close(out, np.einsum("tbg,tbh->gh", x, y))


def test_weight_gradient_gemm_is_handed_out_without_a_copy():
    """A contraction whose GEMM has the result's shape (a dense layer's weight gradient over
    (B, T) activations) returns the GEMM's own array, not a reshaped view of it: the facade
    copies a gradient that is a view before handing it out (engine._own)."""
    rng = np.random.default_rng(3)
    x, g = rng.standard_normal((4, 6, 5)), rng.standard_normal((4, 6, 3))
    out = _dot_impl(np, g, x, (((0, 1), (0, 1)), ((), ())))
    assert out.base is None and out.shape == (3, 5)
    assert_close(out, np.einsum("btg,bth->gh", g, x))
    lin = ft.nn.Linear(5, 3).double()
    copies = []

    def spy(o, seen):
        handed = own(o, seen)
        if handed is not o:
            copies.append(o.shape)
        return handed
    own, engine._own = engine._own, spy
    try:
        for _ in range(3):              # first sight, then the derived program
            lin.weight.grad = None
            lin(ft.tensor(x)).mul(ft.tensor(g)).sum().backward()
    finally:
        engine._own = own
    assert (3, 5) not in copies
    assert_close(lin.weight.grad.numpy(), np.einsum("btg,bth->gh", g, x))


# ---------------------------------------------------------------------------
# fnp.matmul of activations with a matrix


def test_matmul_with_a_matrix_is_one_contraction_and_its_gradient_too():
    rng = np.random.default_rng(2)
    x, w = rng.standard_normal((4, 3, 5)), rng.standard_normal((5, 2))
    closed = ft.make_jaxpr(fnp.matmul)(x, w)
    assert _prims(closed) == ["dot_general"]
    assert closed.jaxpr.eqns[0].params["dimension_numbers"] == (((2,), (0,)), ((), ()))
    assert_close(fnp.matmul(x, w), x @ w)

    def loss(x, w):
        return fnp.sum(fnp.sin(x @ w))
    gx, gw = ft.grad(loss, argnums=(0, 1))(x, w)
    assert_close(gw, _fd_grad(loss, [x, w], 1), rtol=1e-6, atol=1e-8)
    assert_close(gx, _fd_grad(loss, [x, w], 0), rtol=1e-6, atol=1e-8)
    # the weight's cotangent: no product per leading index summed afterwards
    back = ft.make_jaxpr(ft.grad(loss, argnums=1))(x, w)
    assert "reduce_sum" not in _prims(back)
    for e in back.jaxpr.eqns:
        if e.primitive.name == "dot_general":
            assert e.params["dimension_numbers"][1] == ((), ())


# ---------------------------------------------------------------------------
# passes.contract_sums


def _batched(x, y):
    return la.dot_general(x, y, dimension_numbers=(((2,), (1,)), ((0,), (0,))))


def test_contract_sums_turns_a_sum_over_batches_into_a_contraction():
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal((5, 3, 4)), rng.standard_normal((5, 4, 6))
    closed = ft.make_jaxpr(lambda x, y: fnp.sum(_batched(x, y), axis=0))(x, y)
    assert _prims(closed) == ["dot_general", "reduce_sum"]
    out = passes.contract_sums(closed)
    core.check_jaxpr(out.jaxpr)
    assert _prims(out) == ["dot_general"]
    assert out.jaxpr.eqns[0].params["dimension_numbers"] == (((0, 2), (0, 1)), ((), ()))
    assert_close(core.eval_jaxpr(out.jaxpr, out.consts, x, y)[0],
                 np.einsum("bij,bjk->ik", x, y))
    assert _prims(passes.optimize(closed)) == ["dot_general"]


def test_contract_sums_sees_through_transposes_and_sums_of_sums():
    rng = np.random.default_rng(4)
    x, y = rng.standard_normal((5, 3, 4)), rng.standard_normal((5, 4, 6))

    def f(x, y):
        t = fnp.transpose(_batched(x, y), (2, 0, 1))          # (6, 5, 3)
        return fnp.sum(fnp.sum(t, axis=1), axis=0)           # over b, then over k
    closed = ft.make_jaxpr(f)(x, y)
    out = passes.contract_sums(closed)
    core.check_jaxpr(out.jaxpr)
    assert "transpose" not in _prims(out)
    assert _prims(out).count("dot_general") == 1
    (lc, _), (lb, _) = next(e for e in out.jaxpr.eqns
                            if e.primitive.name == "dot_general").params["dimension_numbers"]
    assert 0 in lc and lb == ()
    assert_close(core.eval_jaxpr(out.jaxpr, out.consts, x, y)[0],
                 np.einsum("bij,bjk->i", x, y))

    def g(x, y):                                              # a summed transposed product
        return fnp.sum(fnp.swapaxes(_batched(x, y), 1, 2), axis=0)
    closed = ft.make_jaxpr(g)(x, y)
    out = passes.contract_sums(closed)
    core.check_jaxpr(out.jaxpr)
    assert _prims(out) == ["dot_general", "transpose"]
    assert_close(core.eval_jaxpr(out.jaxpr, out.consts, x, y)[0],
                 np.einsum("bij,bjk->ki", x, y))


def test_contract_sums_keeps_a_product_read_elsewhere_and_free_axis_sums():
    rng = np.random.default_rng(5)
    x, y = rng.standard_normal((5, 3, 4)), rng.standard_normal((5, 4, 6))

    def f(x, y):
        p = _batched(x, y)
        return fnp.sum(p, axis=0), p                         # the product is an output too
    closed = ft.make_jaxpr(f)(x, y)
    assert passes.contract_sums(closed) is closed
    closed = ft.make_jaxpr(lambda x, y: fnp.sum(_batched(x, y), axis=1))(x, y)
    assert passes.contract_sums(closed) is closed             # a free axis: nothing to move


# ---------------------------------------------------------------------------
# the scan's reverse loop


def _rnn_loss(w, u, b, h0, xs):
    def body(h, x):
        h = fnp.tanh(h @ w + x @ u + b) * (1 + 0.1 * fnp.sum(w))   # w read twice
        return h, h
    h, ys = lax.scan(body, h0, xs)
    return fnp.sum(ys ** 2) + fnp.sum(fnp.cos(h))


def _rnn_args(seed=6, t=6):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s) * 0.5 for s in ((4, 4), (5, 4), (4,), (3, 4), (t, 3, 5))]


def _reverse_scans(closed):
    return [e for e in closed.jaxpr.eqns
            if e.primitive.name == "scan" and e.params["reverse"]]


def test_scan_weight_cotangents_leave_the_reverse_loop():
    """The reverse loop carries only the state's cotangent: the cotangents of w, u and b
    are contractions over every step after it (no (4, 4) accumulator per step)."""
    args = _rnn_args()
    closed = ft.make_jaxpr(ft.grad(_rnn_loss, argnums=(0, 1, 2)))(*args)
    (scan,) = _reverse_scans(closed)
    assert scan.params["num_carry"] == 1
    dots = [e for e in closed.jaxpr.eqns if e.primitive.name == "dot_general"
            and 0 in e.params["dimension_numbers"][0][0]]
    assert len(dots) >= 2              # w's and u's: the step axis contracted


@pytest.mark.parametrize("length", [1, 2, 6])
def test_scan_weight_gradients_match_finite_differences(length):
    args = _rnn_args(t=length)
    grads = ft.grad(_rnn_loss, argnums=(0, 1, 2, 3, 4))(*args)
    for i, g in enumerate(grads):
        assert_close(g, _fd_grad(_rnn_loss, args, i), rtol=1e-6, atol=1e-8)
    jitted = ft.jit(ft.grad(_rnn_loss, argnums=(0, 1, 2)))(*args)
    for g, h in zip(jitted, grads[:3]):
        assert_close(g, h, rtol=1e-12, atol=1e-12)


def test_scan_reverse_loop_keeps_an_accumulator_whose_stacking_would_cost_more():
    """w's cotangent per step is an outer product of two long vectors: stacking them
    would take more memory than the (2, 2) accumulator, so it stays in the loop."""
    rng = np.random.default_rng(7)
    w, h0, xs = rng.standard_normal((2, 2)), rng.standard_normal(2), rng.standard_normal((5, 2))
    big = rng.standard_normal((2, 50))

    def loss(w, h0, xs):
        def body(h, x):
            v = fnp.tanh((h @ w) @ big)                        # (50,)
            return fnp.tanh(h @ w + x + 0.01 * (big @ v)), None
        h, _ = lax.scan(body, h0, xs)
        return fnp.sum(h)
    g = ft.grad(loss)(w, h0, xs)
    assert_close(g, _fd_grad(loss, [w, h0, xs], 0), rtol=1e-6, atol=1e-8)


def test_vmap_of_the_scan_gradient():
    args = _rnn_args()
    xs = np.stack([args[4], args[4] * 0.5])
    per = ft.vmap(lambda x: ft.grad(_rnn_loss)(*args[:4], x))(xs)
    for k in range(2):
        assert_close(per[k], ft.grad(_rnn_loss)(*args[:4], xs[k]), rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------------------
# recurrent layers (values and gradients: tests/test_nn_rnn.py, the oracle against torch)


@pytest.mark.parametrize("mode", ["LSTM", "GRU", "RNN_TANH"])
def test_recurrent_weight_gradients_are_contractions_over_time_and_batch(mode):
    """The input projection is one contraction of (T, B, I) with W_ih, and the reverse loop
    carries only the state's cotangents: W_ih's, W_hh's and the biases' gradients are
    each one contraction over time and batch after it."""
    rng = np.random.default_rng(8)
    t, b, i, h = 5, 3, 4, 2
    g = GATES[mode] * h
    ws = [rng.standard_normal(s) * 0.5 for s in ((g, i), (g, h), (g,), (g,))]
    x, h0 = rng.standard_normal((t, b, i)), rng.standard_normal((b, h))
    c0 = rng.standard_normal((b, h)) if mode == "LSTM" else None

    def loss(*ws):
        return fnp.sum(rnn_layer(mode, x, h0, c0, ws, True, False, False)[0] ** 2)
    closed = ft.make_jaxpr(ft.grad(loss, argnums=(0, 1, 2, 3)))(*ws)
    (scan,) = _reverse_scans(closed)
    assert scan.params["num_carry"] == 2          # (h, c), or h twice: no weight
    for e in closed.jaxpr.eqns:
        if e.primitive.name == "dot_general":
            assert e.params["dimension_numbers"][1] == ((), ()), e
    grads = ft.grad(loss, argnums=(0, 1, 2, 3))(*ws)
    for k in (0, 1, 2):
        assert_close(grads[k], _fd_grad(loss, ws, k), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
def test_input_bias_is_added_at_its_step(mode):
    """The scan reads the input projection as the product made it: b_ih is added in the
    step (with the gates, in their fused kernel) instead of by a pass over every step's
    projection before the loop; the layer's values against NumPy's, biased first."""
    rng = np.random.default_rng(10)
    t, b, i, h = 4, 3, 5, 2
    g = GATES[mode] * h
    ws = [rng.standard_normal(s).astype(np.float32) for s in ((g, i), (g, h), (g,), (g,))]
    x = rng.standard_normal((t, b, i)).astype(np.float32)
    h0 = rng.standard_normal((b, h)).astype(np.float32)
    c0 = rng.standard_normal((b, h)).astype(np.float32) if mode == "LSTM" else None

    def layer(*ws):
        return rnn_layer(mode, x, h0, c0, ws, True, False, False)[0]
    jaxpr = ft.make_jaxpr(layer)(*ws).jaxpr
    (scan,) = [e for e in jaxpr.eqns if e.primitive.name == "scan"]
    made = {v: e for e in jaxpr.eqns for v in e.outvars}
    assert made[scan.invars[-1]].primitive.name == "dot_general"
    xg = np.einsum("tbi,gi->tbg", x, ws[0]) + ws[2]     # the projection, biased first
    hs, hc, want = h0, c0, []
    for k in range(t):
        hg = hs @ ws[1].T + ws[3]
        if mode == "LSTM":
            gg = xg[k] + hg
            sg = [1 / (1 + np.exp(-gg[:, j * h:(j + 1) * h])) for j in range(4)]
            hc = sg[1] * hc + sg[0] * np.tanh(gg[:, 2 * h:3 * h])
            hs = sg[3] * np.tanh(hc)
        else:
            r = 1 / (1 + np.exp(-(xg[k][:, :h] + hg[:, :h])))
            z = 1 / (1 + np.exp(-(xg[k][:, h:2 * h] + hg[:, h:2 * h])))
            hs = (1 - z) * np.tanh(xg[k][:, 2 * h:] + r * hg[:, 2 * h:]) + z * hs
        want.append(hs)
    np.testing.assert_allclose(np.asarray(layer(*ws)), np.stack(want), rtol=1e-5, atol=1e-6)


def test_scan_reads_a_transposed_weight_in_row_major_order():
    """A const the body multiplies only as x @ Wᵀ is passed as Wᵀ (contiguous) and read by
    a plain product; a const read otherwise too is left alone. Same values either way."""
    rng = np.random.default_rng(9)
    w, v = rng.standard_normal((4, 4)), rng.standard_normal((4, 4))
    h0, xs = rng.standard_normal((2, 4)), rng.standard_normal((6, 2, 4))

    def f(w, v, h0, xs):
        def body(h, x):
            wt = la.dot_general(h, w, dimension_numbers=(((1,), (1,)), ((), ())))    # h @ wᵀ
            vt = la.dot_general(h, v, dimension_numbers=(((1,), (1,)), ((), ())))
            h = fnp.tanh(wt + vt @ v + x)                                           # v also as is
            return h, h
        return lax.scan(body, h0, xs)
    closed = ft.make_jaxpr(f)(w, v, h0, xs)
    scan = next(e for e in closed.jaxpr.eqns if e.primitive.name == "scan")
    body, flip, _ = _const_layout(scan.params["jaxpr"], scan.params["num_consts"])
    assert flip == ((2,), False)          # w flipped, read by products of 2 rows
    core.check_jaxpr(body.jaxpr)
    h, ys = f(w, v, h0, xs)
    ref, hh = [], h0
    for x in xs:
        hh = np.tanh(hh @ w.T + (hh @ v.T) @ v + x)
        ref.append(hh)
    assert_close(ys, np.stack(ref), rtol=1e-12, atol=1e-12)
    assert_close(h, hh, rtol=1e-12, atol=1e-12)


def test_scan_layout_is_kept_on_its_body(monkeypatch):
    """A training loop runs the same scan body every step: its const layout is derived once
    and kept on the body (the second call asks no cache keyed by the body's structure),
    and whether the native product takes a weight's view is asked once per shape."""
    from functrans.higher_order import scan_layout as sl
    rng = np.random.default_rng(11)
    w = rng.standard_normal((512, 512)).astype(np.float32)

    def f(h0, xs):
        def body(h, x):
            g = la.dot_general(h, w, dimension_numbers=(((1,), (1,)), ((), ())))    # h @ wᵀ
            return fnp.tanh(g + x), h
        return lax.scan(body, h0, xs)
    closed = ft.make_jaxpr(f)(np.zeros((2, 512), np.float32), np.zeros((5, 2, 512), np.float32))
    scan = next(e for e in closed.jaxpr.eqns if e.primitive.name == "scan")
    body, n = scan.params["jaxpr"], scan.params["num_consts"]
    first = _const_layout(body, n)
    assert first[1] == ((2,),)
    asked = []
    monkeypatch.setattr(sl.DERIVED, "get", lambda key: asked.append(key))
    assert _const_layout(body, n) is first and asked == []
    monkeypatch.setattr(la.NATIVE_GEMM, "kernel", lambda m, k, n: asked.append((m, k, n)) or 1)
    views = {}
    for _ in range(3):
        assert np.shares_memory(sl._transposed(w, (2,), views), w)
    assert asked == [(2, 512, 512)]


@pytest.mark.parametrize("rc", [(0,), (1,)])
def test_dense_product_writes_into_the_planned_buffer(rc):
    """x (..., K) against a matrix W (K, N) or (N, K): the jitted program's matmul writes
    into its planned buffer (no fresh array from the impl) and the bias is added in place
    there, with the bits of the eager product and add; an empty batch too."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 5, 3)).astype(np.float32)
    w = rng.standard_normal((3, 6) if rc == (0,) else (6, 3)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)

    def f(x, w, b):
        return lax.dot_general(x, w, (((2,), rc), ((), ()))) + b
    jf = ft.jit(f)
    src = jf.lower(x, w, b).as_text().split("## generated code")[1]
    assert "_p_dot_general" not in src and "_matmul(" in src, src
    assert "_add(s0, v1, out=s0)" in src, src          # the bias, in place
    want = np.asarray(f(x, w, b))                         # eager: the impl's GEMM, then add
    np.testing.assert_array_equal(np.asarray(jf(x, w, b)), want)
    np.testing.assert_allclose(want, _einsum_ref(x, w, (2,), rc) + b, rtol=1e-5, atol=1e-5)
    assert np.asarray(jf(x[:0], w, b)).shape == (0, 5, 6)


def _attention(x, w):
    """Causal-free multi-head attention as nanoGPT writes it: q, k, v cut from one product,
    the heads split by a reshape and a transpose, the weighted values put back by a
    transpose and a reshape (a copy), then a projection."""
    b, t, c = x.shape
    qkv = fnp.matmul(x, w)
    q, k, v = (fnp.transpose(fnp.reshape(qkv[:, :, i * c:(i + 1) * c], (b, t, 2, c // 2)),
                             (0, 2, 1, 3)) for i in range(3))
    att = ft.nn.softmax(fnp.matmul(q, fnp.swapaxes(k, -1, -2)), axis=-1)
    y = fnp.reshape(fnp.transpose(fnp.matmul(att, v), (0, 2, 1, 3)), (b, t, c))
    return fnp.matmul(y, w[:, :c])


def test_batched_products_write_where_their_transposed_result_goes():
    """Attention's batched products are matmuls of transposed views into planned buffers;
    the weighted values, transposed and reshaped, are written into the reshape's array (no
    reshape copies them), and in the gradient dq, dk and dv are written into their blocks
    of the concatenation that is their sum's cotangent (no concatenation runs). Values and
    gradients as eager's (the same GEMMs, other strides) and float64 finite differences;
    ft.compile's forward returns the product as that view (a residual) and trains as eager
    over three steps."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 5, 4)).astype(np.float32)
    w = (rng.standard_normal((4, 12)) / 2).astype(np.float32)
    jf = ft.jit(_attention)
    src = jf.lower(x, w).as_text().split("## generated code")[1]
    assert "_p_dot_general" not in src and "= _empty((3, 5, 4), " in src, src
    assert ".reshape((3, 5, 2, 2)).transpose((0, 2, 1, 3))" in src, src
    np.testing.assert_allclose(np.asarray(jf(x, w)), np.asarray(_attention(x, w)),
                               rtol=1e-6, atol=1e-6)

    def loss(x, w):
        return fnp.sum(fnp.sin(_attention(x, w)))
    jg = ft.jit(ft.grad(loss, argnums=(0, 1)))
    src = jg.lower(x, w).as_text().split("## generated code")[1]
    assert "_concatenate" not in src and "= _empty((3, 5, 6, 2), " in src, src
    for got, want in zip(jg(x, w), ft.grad(loss, argnums=(0, 1))(x, w)):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-6)
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    gx, gw = jg(x64, w64)
    d = rng.standard_normal(x.shape)
    e = 1e-6
    fd = (float(loss(x64 + e * d, w64)) - float(loss(x64 - e * d, w64))) / (2 * e)
    assert abs(fd - float(np.sum(np.asarray(gx) * d))) < 1e-7 * max(1.0, abs(fd))

    class Attn(ft.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = ft.nn.Parameter(ft.tensor(w))

        def forward(self, x):                   # _attention in Tensor methods
            b, t, c = x.shape
            q, k, v = (x @ self.w).split(c, dim=2)
            q, k, v = (a.view(b, t, 2, c // 2).transpose(1, 2) for a in (q, k, v))
            att = (q @ k.transpose(-2, -1)).softmax(dim=-1)
            y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
            return y @ self.w[:, :c]
    models = [Attn(), Attn()]
    steps = [models[0], ft.compile(models[1])]
    opts = [ft.optim.SGD(m.parameters(), lr=0.1) for m in models]
    for _ in range(3):
        for m, opt in zip(steps, opts):
            opt.zero_grad()
            (m(ft.tensor(x)).sin().sum()).backward()
            opt.step()
    np.testing.assert_allclose(models[1].w.detach().numpy(), models[0].w.detach().numpy(),
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sum_over_leading_axes_runs_the_native_row_sum(native_backend, dtype):
    """A jitted float sum over leading axes (a bias's gradient) runs the native kernel that
    adds the rows in order into the planned buffer: NumPy's bits; a sum over other axes, of
    integers or of few elements keeps NumPy's reduction, and so does an operand that is
    not C-contiguous (the kernel declines it)."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((16, 64, 24)).astype(dtype)
    jf = ft.jit(lambda x: fnp.sum(x, axis=(0, 1)))
    src = jf.lower(x).as_text().split("## generated code")[1]
    assert "_p_reduce_sum" not in src and "_sum_rows(" in src, src
    got = np.asarray(jf(x))
    assert got.dtype == dtype and np.array_equal(got, np.add.reduce(x, axis=(0, 1)))
    jt = ft.jit(lambda x: fnp.sum(fnp.transpose(x, (1, 0, 2)), axis=(0, 1)))
    assert np.array_equal(np.asarray(jt(x)), np.add.reduce(x.transpose(1, 0, 2), axis=(0, 1)))
    for f, a in ((lambda x: fnp.sum(x, axis=(1, 2)), x), (lambda x: fnp.sum(x, axis=(0, 2)), x),
                 (lambda x: fnp.sum(x, axis=(0, 1)), x[:2, :4]),
                 (lambda x: fnp.sum(x, axis=(0, 1)), x.astype(np.int32))):
        src = ft.jit(f).lower(a).as_text().split("## generated code")[1]
        assert "_sum_rows" not in src, src
        np.testing.assert_allclose(np.asarray(ft.jit(f)(a)), np.asarray(f(a)), rtol=1e-5)


def test_small_products_by_a_transposed_right_operand_copy_it():
    """A batched product whose right operand is stored transposed (q k^T, dout v^T) runs on
    a plain copy of it where each product is small (linalg.SMALL_NT_COPY: OpenBLAS's small
    kernel takes that layout at half speed), in eager code and in the jitted program alike:
    the same bits both ways; the plain layout, the left operand transposed, or large
    products are passed as they are."""
    rng = np.random.default_rng(0)
    x = np.ascontiguousarray(rng.standard_normal((6, 8, 12)).astype(np.float32))
    nt = np.ascontiguousarray(x[:, :, :4]), x[:, :, 4:8]     # k: a strided slice, as qkv's
    kt = nt[1].transpose(0, 2, 1)
    assert la._plain_right(nt[0], kt) is not kt and la._plain_right(nt[0], kt).flags.c_contiguous
    plain = np.ascontiguousarray(kt)
    assert la._plain_right(nt[0], plain) is plain                       # nn
    assert la._plain_right(nt[0].transpose(0, 2, 1).copy().transpose(0, 2, 1), kt) is kt  # tt
    big = rng.standard_normal((2, 128, 64)).astype(np.float32)
    bt = big.transpose(0, 2, 1)                         # 128 * 64 * 128 > SMALL_NT_COPY
    assert la._plain_right(big, bt) is bt
    small = big[:, :64]                                 # 64 * 64 * 64 = SMALL_NT_COPY / 2
    st = small.transpose(0, 2, 1)
    assert la._plain_right(small, st) is not st

    def scores(x):
        q, k = x[:, :, :4], x[:, :, 4:8]
        return fnp.matmul(q, fnp.swapaxes(k, -1, -2))
    jf = ft.jit(scores)
    assert "_plain_right(" in jf.lower(x).source
    np.testing.assert_array_equal(np.asarray(jf(x)), np.asarray(scores(x)))
    np.testing.assert_array_equal(np.asarray(scores(x)),
                                  np.matmul(nt[0], np.ascontiguousarray(kt)))
