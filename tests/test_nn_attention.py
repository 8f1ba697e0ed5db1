"""scaled_dot_product_attention, MultiheadAttention and TransformerEncoder(Layer) against a
NumPy transcription of torch's documented formulas, gradients against float64 central
differences, torch's parameter names and masks' conventions (issue 15, item 1)."""
from __future__ import annotations

import numpy as np
import pytest

import functrans as ft
import functrans.nn.functional as F
from conftest import fd_grad

pytestmark = pytest.mark.usefixtures("x64")  # float64 references: conftest.x64

RNG = np.random.default_rng(0)


def _softmax(s):
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _np_sdpa(q, k, v, mask=None):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        s = s + mask
    return _softmax(s) @ v


def test_sdpa_values_masks_and_gradients():
    q, k, v = (RNG.standard_normal((2, 3, 4, 5)) for _ in range(3))
    np.testing.assert_allclose(F.scaled_dot_product_attention(ft.tensor(q), ft.tensor(k),
                                                              ft.tensor(v)).numpy(),
                               _np_sdpa(q, k, v), rtol=1e-12)
    causal = np.where(np.tril(np.ones((4, 4), bool)), 0.0, -np.inf)
    np.testing.assert_allclose(F.scaled_dot_product_attention(q, k, v, is_causal=True),
                               _np_sdpa(q, k, v, causal), rtol=1e-12)
    keep = RNG.random((4, 4)) < 0.7
    keep[:, 0] = True
    np.testing.assert_allclose(
        F.scaled_dot_product_attention(ft.tensor(q), ft.tensor(k), ft.tensor(v),
                                       attn_mask=ft.tensor(keep)).numpy(),
        _np_sdpa(q, k, v, np.where(keep, 0.0, -np.inf)), rtol=1e-12)
    qt = ft.tensor(q, requires_grad=True)
    w = RNG.standard_normal(q.shape)
    (F.scaled_dot_product_attention(qt, ft.tensor(k), ft.tensor(v)) * ft.tensor(w)).sum().backward()
    np.testing.assert_allclose(qt.grad.numpy(), fd_grad(lambda x: np.sum(_np_sdpa(x, k, v) * w), q),
                               rtol=1e-6, atol=1e-8)


def _np_mha(q, k, v, p, h, mask=None):
    """batch-first (N, L, E) q; returns the output and the head-averaged weights."""
    e = q.shape[-1]
    w_in, b_in = p["in_proj_weight"], p.get("in_proj_bias", np.zeros(3 * e))
    parts = [x @ w_in[i * e:(i + 1) * e].T + b_in[i * e:(i + 1) * e] for i, x in enumerate((q, k, v))]
    n, L = q.shape[0], q.shape[1]
    qh, kh, vh = (x.reshape(n, -1, h, e // h).transpose(0, 2, 1, 3) for x in parts)
    s = qh @ np.swapaxes(kh, -1, -2) / np.sqrt(e // h)
    if mask is not None:
        s = s + mask
    wts = _softmax(s)
    out = (wts @ vh).transpose(0, 2, 1, 3).reshape(n, L, e)
    out = out @ p["out_proj.weight"].T + p.get("out_proj.bias", 0)
    return out, wts.mean(1)


@pytest.mark.parametrize("batch_first", [False, True])
def test_mha_against_numpy_and_gradients(batch_first):
    ft.manual_seed(0)
    m = ft.nn.MultiheadAttention(8, 2, batch_first=batch_first).double()
    p = {k: v.detach().numpy() for k, v in m.state_dict().items()}
    assert {k: v.shape for k, v in p.items()} == {
        "in_proj_weight": (24, 8), "in_proj_bias": (24,), "out_proj.weight": (8, 8),
        "out_proj.bias": (8,)}
    assert not p["in_proj_bias"].any() and not p["out_proj.bias"].any()
    q, k = RNG.standard_normal((2, 3, 8)), RNG.standard_normal((2, 4, 8))
    pad = np.array([[False, False, False, True], [False, True, False, False]])
    lay = (lambda x: x) if batch_first else (lambda x: np.swapaxes(x, 0, 1))
    out, wts = m(ft.tensor(lay(q)), ft.tensor(lay(k)), ft.tensor(lay(k)),
                 key_padding_mask=ft.tensor(pad))
    want, want_w = _np_mha(q, k, k, p, 2, np.where(pad, -np.inf, 0.0)[:, None, None, :])
    np.testing.assert_allclose(lay(out.detach().numpy()), want, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(wts.detach().numpy(), want_w, rtol=1e-10, atol=1e-12)
    qt = ft.tensor(lay(q), requires_grad=True)
    g = RNG.standard_normal(want.shape)
    (m(qt, ft.tensor(lay(k)), ft.tensor(lay(k)))[0] * ft.tensor(lay(g))).sum().backward()
    np.testing.assert_allclose(lay(qt.grad.numpy()),
                               fd_grad(lambda x: np.sum(_np_mha(x, k, k, p, 2)[0] * g), q),
                               rtol=1e-6, atol=1e-8)
    w_grad = fd_grad(lambda w: np.sum(_np_mha(q, k, k, dict(p, in_proj_weight=w), 2)[0] * g),
                     p["in_proj_weight"])
    np.testing.assert_allclose(m.in_proj_weight.grad.numpy(), w_grad, rtol=1e-6, atol=1e-8)


def test_mha_options():
    m = ft.nn.MultiheadAttention(8, 4, kdim=3, vdim=5, bias=False)
    assert sorted(m.state_dict()) == ["k_proj_weight", "out_proj.weight", "q_proj_weight",
                                      "v_proj_weight"]
    out, w = m(ft.randn(6, 2, 8), ft.randn(7, 2, 3), ft.randn(7, 2, 5),
               average_attn_weights=False)
    assert tuple(out.shape) == (6, 2, 8) and tuple(w.shape) == (2, 4, 6, 7)
    m2 = ft.nn.MultiheadAttention(8, 2)
    out, w = m2(ft.randn(6, 8), ft.randn(7, 8), ft.randn(7, 8), need_weights=False)
    assert tuple(out.shape) == (6, 8) and w is None
    causal = ft.tensor(np.triu(np.ones((6, 6), bool), 1))     # True: masked out (torch's MHA)
    _, w = m2(ft.randn(6, 1, 8), ft.randn(6, 1, 8), ft.randn(6, 1, 8), attn_mask=causal)
    assert np.all(np.triu(w.detach().numpy()[0], 1) == 0)
    with pytest.raises(AssertionError, match="embed_dim must be divisible by num_heads"):
        ft.nn.MultiheadAttention(8, 3)


def test_transformer_encoder():
    ft.manual_seed(0)
    layer = ft.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0,
                                          batch_first=True).double()
    enc = ft.nn.TransformerEncoder(layer, num_layers=2).double()
    keys = list(enc.state_dict())
    assert keys[:4] == ["layers.0.self_attn.in_proj_weight", "layers.0.self_attn.in_proj_bias",
                        "layers.0.self_attn.out_proj.weight", "layers.0.self_attn.out_proj.bias"]
    assert "layers.1.norm2.bias" in keys and "layers.0.linear1.weight" in keys
    x = RNG.standard_normal((2, 3, 8))
    p = {k: v.detach().numpy() for k, v in layer.state_dict().items()}

    def ln(y, w, b):
        mu, var = y.mean(-1, keepdims=True), y.var(-1, keepdims=True)
        return (y - mu) / np.sqrt(var + 1e-5) * w + b

    def np_layer(y, norm_first):
        sa = {k[len("self_attn."):]: v for k, v in p.items() if k.startswith("self_attn.")}
        ff = lambda z: np.maximum(z @ p["linear1.weight"].T + p["linear1.bias"], 0) \
            @ p["linear2.weight"].T + p["linear2.bias"]  # noqa: E731
        n1 = lambda z: ln(z, p["norm1.weight"], p["norm1.bias"])  # noqa: E731
        n2 = lambda z: ln(z, p["norm2.weight"], p["norm2.bias"])  # noqa: E731
        if norm_first:
            y = y + _np_mha(n1(y), n1(y), n1(y), sa, 2)[0]
            return y + ff(n2(y))
        y = n1(y + _np_mha(y, y, y, sa, 2)[0])
        return n2(y + ff(y))
    np.testing.assert_allclose(layer(ft.tensor(x)).detach().numpy(), np_layer(x, False),
                               rtol=1e-10, atol=1e-12)
    layer.norm_first = True
    np.testing.assert_allclose(layer(ft.tensor(x)).detach().numpy(), np_layer(x, True),
                               rtol=1e-10, atol=1e-12)
    xt = ft.tensor(x, requires_grad=True)
    enc(xt).sum().backward()
    assert xt.grad.shape == xt.shape
    gelu = ft.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, activation="gelu")
    assert tuple(gelu(ft.randn(3, 2, 8)).shape) == (3, 2, 8)


def test_a_query_with_every_key_masked_gets_zeros():
    """scaled_dot_product_attention gives a query whose keys are all masked out zero weights
    (torch's safe softmax) and no gradient, instead of NaN; MultiheadAttention does so
    without the weights (it runs that function) and keeps the plain softmax's NaN with them."""
    rng = np.random.default_rng(3)
    q = ft.tensor(rng.standard_normal((1, 2, 3)), dtype=ft.float64, requires_grad=True)
    mask = ft.tensor([[True, False], [False, False]])
    out = F.scaled_dot_product_attention(q, q, q, attn_mask=mask)
    np.testing.assert_array_equal(out.detach().numpy()[0, 1], np.zeros(3))
    np.testing.assert_allclose(out.detach().numpy()[0, 0], q.detach().numpy()[0, 0], rtol=1e-12)
    out.sum().backward()
    assert np.isfinite(q.grad.numpy()).all()
    mha = ft.nn.MultiheadAttention(4, 2, batch_first=True)
    x = ft.randn(1, 2, 4)
    pad = ft.tensor([[True, True]])
    assert np.isnan(mha(x, x, x, key_padding_mask=pad)[0].detach().numpy()).all()
    y, w = mha(x, x, x, key_padding_mask=pad, need_weights=False)
    assert w is None and np.isfinite(y.detach().numpy()).all()


def test_mha_bias_kv_and_zero_attn():
    """add_bias_kv appends a learned step (bias_k, bias_v) to every key and value sequence,
    add_zero_attn a step of zeros after the head split; masks take both as attendable."""
    ft.manual_seed(1)
    m = ft.nn.MultiheadAttention(4, 2, batch_first=True, add_bias_kv=True,
                                 add_zero_attn=True).double()
    assert [n for n, _ in m.named_parameters()] == [
        "in_proj_weight", "in_proj_bias", "bias_k", "bias_v", "out_proj.weight",
        "out_proj.bias"]
    p = {k: v.detach().numpy() for k, v in m.state_dict().items()}
    q, k = RNG.standard_normal((2, 3, 4)), RNG.standard_normal((2, 5, 4))
    pad = np.array([[False, True, False, False, False], [False] * 5])
    out, wts = m(ft.tensor(q), ft.tensor(k), ft.tensor(k), key_padding_mask=ft.tensor(pad))
    # the same attention by hand: the bias step appended to the projected keys and values,
    # then a zero step per head
    e, h = 4, 2
    w_in, b_in = p["in_proj_weight"], p["in_proj_bias"]
    qp, kp, vp = (x @ w_in[i * e:(i + 1) * e].T + b_in[i * e:(i + 1) * e]
                  for i, x in enumerate((q, k, k)))
    kp = np.concatenate([kp, np.broadcast_to(p["bias_k"], (2, 1, e))], 1)
    vp = np.concatenate([vp, np.broadcast_to(p["bias_v"], (2, 1, e))], 1)
    qh, kh, vh = (x.reshape(2, -1, h, e // h).transpose(0, 2, 1, 3) for x in (qp, kp, vp))
    kh, vh = (np.concatenate([x, np.zeros((2, h, 1, e // h))], 2) for x in (kh, vh))
    mask = np.where(np.pad(pad, ((0, 0), (0, 2))), -np.inf, 0.0)[:, None, None, :]
    w = _softmax(qh @ np.swapaxes(kh, -1, -2) / np.sqrt(e // h) + mask)
    want = (w @ vh).transpose(0, 2, 1, 3).reshape(2, 3, e) @ p["out_proj.weight"].T
    np.testing.assert_allclose(out.detach().numpy(), want + p["out_proj.bias"], rtol=1e-10)
    np.testing.assert_allclose(wts.detach().numpy(), w.mean(1), rtol=1e-10)


def test_sdpa_float_mask_must_have_the_query_dtype():
    q = ft.zeros(1, 2, 3)
    with pytest.raises(RuntimeError, match="attn_mask.dtype: double and  query.dtype: float"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=ft.zeros(2, 2, dtype=ft.float64))


def test_causal_sdpa_saves_its_weights_and_skips_the_empty_row_test():
    """A causal mask leaves no query without keys, so is_causal runs the plain softmax (no
    test for all-masked rows); the node saves the softmax's values (not their broadcasts)
    so that the backward does not compute q kᵀ again, unless they outnumber q, k and v
    (a long sequence recomputes them). Gradients, first and second order, against float64
    central differences, for a square and a wide mask."""
    rng = np.random.default_rng(7)
    long = F.scaled_dot_product_attention(*(ft.tensor(rng.standard_normal((1, 12, 1)),
                                                      requires_grad=True) for _ in range(3)))
    info = long.grad_fn.info
    assert all(info.slot_avals[s].shape[-2:] != (12, 12) for s in info.held)
    for L, S in ((5, 5), (3, 5)):
        q = rng.standard_normal((2, 3, L, 4))
        k, v = rng.standard_normal((2, 3, S, 4)), rng.standard_normal((2, 3, S, 4))
        r = rng.standard_normal((2, 3, L, 4))
        mask = np.where(np.tril(np.ones((L, S), bool)), 0.0, -np.inf)
        ts = [ft.tensor(a, requires_grad=True) for a in (q, k, v)]
        out = F.scaled_dot_product_attention(*ts, is_causal=True)
        info = out.grad_fn.info
        assert not any(info.slot_avals[o].dtype == np.bool_ for st in info.steps
                       for o in st.outs)
        saved = [info.slot_avals[s].shape for s in info.held if s >= info.n_in]
        # the scores and the weights: softmax's rule reads the weights alone (no exp, no
        # sums), the scores are kept for a backward that builds a graph
        assert saved.count((2, 3, L, S)) == 2
        assert (2, 3, L) not in saved and len(saved) == 3     # and kᵀ, a view of k
        (out * ft.tensor(r)).sum().backward()
        for i, t in enumerate(ts):
            def f(a, i=i):
                args = [q, k, v]
                args[i] = a
                return np.sum(_np_sdpa(*args, mask) * r)
            np.testing.assert_allclose(t.grad.numpy(), fd_grad(f, (q, k, v)[i]),
                                       rtol=1e-6, atol=1e-8)
    # second order: the gradient's gradient (create_graph recomputes instead of saving)
    qt = ft.tensor(q, requires_grad=True)

    def grad_q(a, create_graph=False):
        x = a if isinstance(a, ft.Tensor) else ft.tensor(a, requires_grad=True)
        y = (F.scaled_dot_product_attention(x, ft.tensor(k), ft.tensor(v), is_causal=True)
             * ft.tensor(r)).sum()
        return ft.autograd.grad(y, x, create_graph=create_graph)[0]
    (grad_q(qt, True) * ft.tensor(r)).sum().backward()
    np.testing.assert_allclose(qt.grad.numpy(),
                               fd_grad(lambda a: np.sum(grad_q(a).numpy() * r), q),
                               rtol=1e-5, atol=1e-7)
