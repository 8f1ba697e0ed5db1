"""RNN, LSTM, GRU and their cells against a NumPy transcription of torch's documented
equations (gate orders i, f, g, o and r, z, n; projections; multi-layer, bidirectional,
batch_first, unbatched), gradients against float64 central differences, jit and vmap through
functional_call, and torch's parameter names and errors (issue 15, item 1)."""
from __future__ import annotations

import numpy as np
import pytest

import functrans as ft
from conftest import fd_grad

pytestmark = pytest.mark.usefixtures("x64")  # float64 references: conftest.x64


def _sig(x):
    return 1 / (1 + np.exp(-x))


def _np_step(mode, x, h, c, p, sfx):
    w_ih, w_hh = p["weight_ih" + sfx], p["weight_hh" + sfx]
    b_ih, b_hh = p.get("bias_ih" + sfx, 0), p.get("bias_hh" + sfx, 0)
    gi, gh = x @ w_ih.T + b_ih, h @ w_hh.T + b_hh
    if mode in ("tanh", "relu"):
        return (np.tanh(gi + gh) if mode == "tanh" else np.maximum(gi + gh, 0)), None
    n = gh.shape[-1] // (3 if mode == "GRU" else 4)
    if mode == "GRU":
        r, z = _sig(gi[:, :n] + gh[:, :n]), _sig(gi[:, n:2 * n] + gh[:, n:2 * n])
        new = np.tanh(gi[:, 2 * n:] + r * gh[:, 2 * n:])
        return (1 - z) * new + z * h, None
    g = gi + gh
    i, f, gg, o = _sig(g[:, :n]), _sig(g[:, n:2 * n]), np.tanh(g[:, 2 * n:3 * n]), _sig(g[:, 3 * n:])
    c = f * c + i * gg
    h = o * np.tanh(c)
    if "weight_hr" + sfx in p:
        h = h @ p["weight_hr" + sfx].T
    return h, c


def _np_rnn(mode, x, p, layers, dirs, hsize, out):
    """x (T, B, I) -> (T, B, dirs*out), h_n, c_n with zero initial states."""
    h_n, c_n = [], []
    for layer in range(layers):
        ys = []
        for d in range(dirs):
            sfx = f"_l{layer}" + ("_reverse" if d else "")
            h, c = np.zeros((x.shape[1], out)), np.zeros((x.shape[1], hsize))
            seq = []
            for t in (reversed(range(x.shape[0])) if d else range(x.shape[0])):
                h, c = _np_step(mode, x[t], h, c, p, sfx)
                seq.append(h)
            ys.append(np.stack(seq[::-1] if d else seq))
            h_n.append(h)
            c_n.append(c)
        x = np.concatenate(ys, -1)
    return x, np.stack(h_n), (np.stack(c_n) if mode == "LSTM" else None)


CONFIGS = [
    ("tanh", dict(num_layers=1)),
    ("relu", dict(num_layers=2, nonlinearity="relu")),
    ("LSTM", dict(num_layers=2, bidirectional=True)),
    ("LSTM", dict(num_layers=1, proj_size=2)),
    ("GRU", dict(num_layers=2, bidirectional=True, batch_first=True)),
    ("GRU", dict(num_layers=1, bias=False)),
]


def _module(mode, kw):
    ft.manual_seed(0)
    cls = {"tanh": ft.nn.RNN, "relu": ft.nn.RNN, "LSTM": ft.nn.LSTM, "GRU": ft.nn.GRU}[mode]
    return cls(3, 4, **kw).double()


@pytest.mark.parametrize("mode,kw", CONFIGS)
def test_values_and_gradients_against_numpy(mode, kw):
    m = _module(mode, kw)
    p = {k: v.detach().numpy() for k, v in m.named_parameters()}
    dirs = 2 if kw.get("bidirectional") else 1
    layers, out = kw.get("num_layers", 1), kw.get("proj_size") or 4
    x = np.random.default_rng(1).standard_normal((5, 2, 3))
    xin = x.transpose(1, 0, 2) if kw.get("batch_first") else x
    y, hs = m(ft.tensor(xin))
    want_y, want_h, want_c = _np_rnn(mode, x, p, layers, dirs, 4, out)
    got_y = y.detach().numpy()
    np.testing.assert_allclose(got_y.transpose(1, 0, 2) if kw.get("batch_first") else got_y,
                               want_y, rtol=1e-10, atol=1e-12)
    h = hs[0] if mode == "LSTM" else hs
    np.testing.assert_allclose(h.detach().numpy(), want_h, rtol=1e-10, atol=1e-12)
    if mode == "LSTM":
        np.testing.assert_allclose(hs[1].detach().numpy(), want_c, rtol=1e-10, atol=1e-12)
    # gradients of a weighted sum w.r.t. the input and the first layer's hidden weights
    w = np.random.default_rng(2).standard_normal(want_y.shape)
    xt = ft.tensor(xin, requires_grad=True)
    y, _ = m(xt)
    yy = y.transpose(0, 1) if kw.get("batch_first") else y
    (yy * ft.tensor(w)).sum().backward()

    def loss_x(xv):
        return np.sum(_np_rnn(mode, xv, p, layers, dirs, 4, out)[0] * w)
    gx = fd_grad(loss_x, x)
    got = xt.grad.numpy()
    np.testing.assert_allclose(got.transpose(1, 0, 2) if kw.get("batch_first") else got, gx,
                               rtol=1e-6, atol=1e-7)

    def loss_w(wv):
        return np.sum(_np_rnn(mode, x, dict(p, weight_hh_l0=wv), layers, dirs, 4, out)[0] * w)
    np.testing.assert_allclose(m.weight_hh_l0.grad.numpy(), fd_grad(loss_w, p["weight_hh_l0"]),
                               rtol=1e-6, atol=1e-7)


def test_state_dict_names_shapes_and_init_bounds():
    m = ft.nn.LSTM(3, 6, num_layers=2, bidirectional=True, proj_size=2)
    shapes = {k: tuple(v.shape) for k, v in m.state_dict().items()}
    assert list(shapes)[:5] == ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0",
                                "weight_hr_l0"]
    assert shapes["weight_ih_l0"] == (24, 3) and shapes["weight_hh_l0"] == (24, 2)
    assert shapes["weight_ih_l1_reverse"] == (24, 4) and shapes["weight_hr_l1_reverse"] == (2, 6)
    assert len(shapes) == 20
    bound = 1 / np.sqrt(6)
    assert all(np.abs(v.numpy()).max() <= bound for v in m.state_dict().values())
    assert "bias_ih_l0" not in ft.nn.GRU(3, 4, bias=False).state_dict()
    assert repr(ft.nn.GRU(3, 4, num_layers=2, batch_first=True)) == \
        "GRU(3, 4, num_layers=2, batch_first=True)"


def test_unbatched_and_initial_state():
    m = _module("LSTM", {})
    x = ft.randn(5, 3, dtype=ft.float64)
    h0, c0 = ft.randn(1, 4, dtype=ft.float64), ft.randn(1, 4, dtype=ft.float64)
    y, (h, c) = m(x, (h0, c0))
    yb, (hb, cb) = m(x.unsqueeze(1), (h0.unsqueeze(1), c0.unsqueeze(1)))
    assert tuple(y.shape) == (5, 4) and tuple(h.shape) == (1, 4)
    np.testing.assert_allclose(y.detach().numpy(), yb.detach().numpy()[:, 0])
    np.testing.assert_allclose(c.detach().numpy(), cb.detach().numpy()[:, 0])


def test_jit_and_vmap_through_functional_call():
    m = _module("GRU", dict(num_layers=2, batch_first=True))
    params = {k: v.detach() for k, v in m.named_parameters()}
    x = ft.randn(3, 5, 3, dtype=ft.float64)
    want = m(x)[0].detach().numpy()

    def f(p, xs):
        return ft.func.functional_call(m, p, (xs,))[0]
    np.testing.assert_allclose(ft.jit(f)(params, x).numpy(), want, rtol=1e-12)
    per = ft.vmap(lambda xs: f(params, xs.unsqueeze(0))[0])(x)
    np.testing.assert_allclose(per.numpy(), want, rtol=1e-12)
    g = ft.grad(lambda p: f(p, x).sum())(params)
    y = m(x)[0].sum()
    y.backward()
    np.testing.assert_allclose(g["weight_hh_l1"].numpy(), m.weight_hh_l1.grad.numpy(),
                               rtol=1e-10)


@pytest.mark.parametrize("cls,mode", [(ft.nn.RNNCell, "tanh"), (ft.nn.LSTMCell, "LSTM"),
                                      (ft.nn.GRUCell, "GRU")])
def test_cells(cls, mode):
    ft.manual_seed(0)
    cell = cls(3, 4).double()
    p = {k: v.detach().numpy() for k, v in cell.named_parameters()}
    x, h = np.random.default_rng(3).standard_normal((2, 3)), np.random.default_rng(4).random((2, 4))
    hx = (ft.tensor(h), ft.tensor(h)) if mode == "LSTM" else ft.tensor(h)
    out = cell(ft.tensor(x), hx)
    want = _np_step(mode, x, h, h, p, "")
    np.testing.assert_allclose((out[0] if mode == "LSTM" else out).detach().numpy(), want[0],
                               rtol=1e-12)
    if mode == "LSTM":
        np.testing.assert_allclose(out[1].detach().numpy(), want[1], rtol=1e-12)
    single = cell(ft.tensor(x[0]))
    assert tuple((single[0] if mode == "LSTM" else single).shape) == (4,)
    assert set(p) == {"weight_ih", "weight_hh", "bias_ih", "bias_hh"}


@pytest.mark.parametrize("call,err,msg", [
    (lambda: ft.nn.RNN(3, 4, nonlinearity="gelu"), ValueError,
     "Unknown nonlinearity 'gelu'. Select from 'tanh' or 'relu'."),
    (lambda: ft.nn.GRU(3, 4, proj_size=2), ValueError,
     "proj_size argument is only supported for LSTM, not RNN or GRU"),
    (lambda: ft.nn.LSTM(3, 4, proj_size=4), ValueError,
     "proj_size has to be smaller than hidden_size"),
    (lambda: ft.nn.LSTM(3, 4)(ft.randn(2, 5, 2)), RuntimeError,
     "input.size(-1) must be equal to input_size. Expected 3, got 2"),
    (lambda: ft.nn.RNN(3, 4)(ft.randn(1, 2, 5, 3)), ValueError,
     "RNN: Expected input to be 2D or 3D, got 4D tensor instead"),
    (lambda: ft.nn.GRU(3, 4)(ft.randn(5, 2, 3), ft.zeros(1, 3, 4)), RuntimeError,
     "Expected hidden size (1, 2, 4), got [1, 3, 4]"),
])
def test_errors(call, err, msg):
    with pytest.raises(err) as info:
        call()
    assert str(info.value) == msg


def test_dropout_between_layers():
    with pytest.warns(UserWarning, match="non-zero dropout expects num_layers greater than 1"):
        ft.nn.RNN(3, 4, dropout=0.5)
    m = ft.nn.LSTM(3, 4, num_layers=2, dropout=0.5)
    x = ft.randn(5, 2, 3)
    a, b = m(x)[0], m(x)[0]
    assert not np.allclose(a.detach().numpy(), b.detach().numpy())   # training: random masks
    m.eval()    # no masks: equal up to the last bits in which a program's tiers may differ
    np.testing.assert_allclose(m(x)[0].detach().numpy(), m(x)[0].detach().numpy(), rtol=1e-6,
                               atol=1e-7)


class _Outputs(ft.nn.Module):
    """A recurrent layer's output sequence, so it composes in nn.Sequential."""

    def __init__(self, rnn):
        super().__init__()
        self.rnn = rnn

    def forward(self, x):
        return self.rnn(x)[0]


@pytest.mark.parametrize("kind, kw", [("RNN", {}), ("GRU", {}), ("LSTM", {}),
                                      ("LSTM", {"num_layers": 2, "bidirectional": True})])
def test_composed_recurrent_layers_train_past_the_cached_program(kind, kw):
    """Linear -> recurrent layer -> Linear, trained 6 steps with two alternating batch
    sizes: from the second sight of a structure backward runs one derived program, whose
    residual part must read what the nodes saved (it recomputed the scan and everything
    after it from the head's bias, which no node saves: step 3 raised). Losses and
    parameters equal a twin trained through the node-by-node path (anomaly mode)."""
    def model():
        ft.manual_seed(0)
        out = 16 if kw.get("bidirectional") else 8
        return ft.nn.Sequential(ft.nn.Linear(8, 8), _Outputs(getattr(ft.nn, kind)(8, 8, **kw)),
                                ft.nn.Linear(out, 7)).double()
    rng = np.random.default_rng(0)
    batches = [(rng.standard_normal((5, b, 8)), rng.integers(0, 7, 5 * b)) for b in (3, 2)]
    runs = []
    for anomaly in (False, True):
        m = model()
        opt = ft.optim.SGD(m.parameters(), lr=0.1)
        losses = []
        with ft.autograd.set_detect_anomaly(anomaly):
            for step in range(6):
                x, y = batches[step % 2]
                opt.zero_grad()
                loss = ft.nn.functional.cross_entropy(m(ft.tensor(x)).reshape(-1, 7),
                                                      ft.tensor(y))
                loss.backward()
                opt.step()
                losses.append(loss.item())
        runs.append((losses, [p.detach().numpy() for p in m.parameters()]))
    np.testing.assert_allclose(runs[0][0], runs[1][0], rtol=1e-12)
    for a, b in zip(runs[0][1], runs[1][1]):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
def test_grad_fn_names_are_torchs_cpu_ones():
    """A recurrent layer's output comes from the time steps stacked (StackBackward0, as
    torch's CPU layers); a cell's from its last op."""
    x = ft.randn(5, 2, 3, requires_grad=True)
    assert ft.nn.GRU(3, 4)(x)[0].grad_fn.name() == "StackBackward0"
    assert ft.nn.RNN(3, 4)(x)[1].grad_fn.name() == "StackBackward0"
    assert ft.nn.RNNCell(3, 4)(x[0]).grad_fn.name() == "TanhBackward0"
    assert ft.nn.GRUCell(3, 4)(x[0]).grad_fn.name() == "AddBackward0"
    assert ft.nn.LSTMCell(3, 4)(x[0])[0].grad_fn.name() == "MulBackward0"


def test_input_rank_errors_are_torchs():
    with pytest.raises(ValueError, match="RNN: Expected input to be 2D or 3D, got 4D tensor "
                                         "instead"):
        ft.nn.RNN(3, 4)(ft.zeros(5, 2, 1, 3))
    with pytest.raises(ValueError, match="LSTM: Expected input to be 2D or 3D, got 4D instead"):
        ft.nn.LSTM(3, 4)(ft.zeros(5, 2, 1, 3))
