"""Recurrent layers as functions: one step of torch's RNN (tanh/relu), LSTM (gates i, f, g, o,
optional projection) and GRU (gates r, z, n) cells, and a whole layer (one direction) as one
`lax.scan` over time, so it jits, vmaps and differentiates like any other program."""
from __future__ import annotations

from ...numpy import raw as fnp
from ...control_flow import scan
from ._dispatch import _call
from functrans.primitives import linalg as la
from .. import functions as _jnn

GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}
# the grad_fn names of torch's CPU implementations: a layer's outputs are the time steps
# stacked; a cell's output is its last op (the tanh or relu, o * tanh(c), the GRU's sum)
_LAYER_NAME = "StackBackward0"
_CELL_NAMES = {"RNN_TANH": "TanhBackward0", "RNN_RELU": "ReluBackward0", "LSTM": "MulBackward0",
               "GRU": "AddBackward0"}


def _lin(x, w, b=None):
    """x @ wᵀ (+ b) as one contraction of x's last axis with w's second: over (T, B, I)
    inputs one GEMM, and so is w's cotangent (time and batch contracted together)."""
    nd = fnp.ndim(x)
    y = la.dot_general(x, w, dimension_numbers=(((nd - 1,), (1,)), ((), ())))
    return y if b is None else y + b


def _step(mode, xg, h, c, w_hh, b_hh, w_hr):
    """(h', c') from the input's gate pre-activations xg = x W_ihᵀ + b_ih."""
    hg = _lin(h, w_hh, b_hh)
    if mode == "RNN_TANH":
        return fnp.tanh(xg + hg), None
    if mode == "RNN_RELU":
        return fnp.maximum(xg + hg, 0), None
    n = fnp.shape(hg)[-1] // GATES[mode]
    if mode == "GRU":
        r = _jnn.sigmoid(xg[..., :n] + hg[..., :n])
        z = _jnn.sigmoid(xg[..., n:2 * n] + hg[..., n:2 * n])
        new = fnp.tanh(xg[..., 2 * n:] + r * hg[..., 2 * n:])
        return (1 - z) * new + z * h, None
    g = xg + hg
    i, f = _jnn.sigmoid(g[..., :n]), _jnn.sigmoid(g[..., n:2 * n])
    c = f * c + i * fnp.tanh(g[..., 2 * n:3 * n])
    h = _jnn.sigmoid(g[..., 3 * n:]) * fnp.tanh(c)
    return (h if w_hr is None else _lin(h, w_hr)), c


def _unpack(mode, weights, has_bias, has_proj):
    """(w_ih, w_hh, b_ih, b_hh, w_hr) from torch's parameter order."""
    w = list(weights)
    w_ih, w_hh = w[0], w[1]
    b_ih, b_hh = (w[2], w[3]) if has_bias else (None, None)
    return w_ih, w_hh, b_ih, b_hh, (w[-1] if has_proj else None)


def _cell_fn(x, h, *rest, mode, has_bias, lstm):
    c = rest[0] if lstm else None
    w_ih, w_hh, b_ih, b_hh, _ = _unpack(mode, rest[1:] if lstm else rest, has_bias, False)
    h, c = _step(mode, _lin(x, w_ih, b_ih), h, c, w_hh, b_hh, None)
    return (h, c) if lstm else h


def rnn_cell(mode, x, h, c, weights, has_bias):
    """One step of RNNCell/LSTMCell/GRUCell on (batch, features) inputs (Tensors or arrays)."""
    lstm = mode == "LSTM"
    args = (x, h) + ((c,) if lstm else ()) + tuple(weights)
    return _call(_CELL_NAMES[mode], _cell_fn, args,
                 mode=mode, has_bias=has_bias, lstm=lstm)


def _layer_fn(x, h0, *rest, mode, has_bias, has_proj, reverse):
    """ys (T, B, H_out), h_T (and c_T) of one direction of one layer over x (T, B, I)."""
    lstm = mode == "LSTM"
    c0 = rest[0] if lstm else None
    w_ih, w_hh, b_ih, b_hh, w_hr = _unpack(mode, rest[1:] if lstm else rest, has_bias, has_proj)
    xg = _lin(x, w_ih)                           # every time step's input projection at once

    def body(carry, xt):
        # the input bias is added at its step, in the step's fused gates (the same sum,
        # x W_ihᵀ + b_ih, as one pass over every step's projection would make)
        h, c = carry
        h, c = _step(mode, xt if b_ih is None else xt + b_ih, h, c, w_hh, b_hh, w_hr)
        return (h, c if lstm else h), h
    (h, c), ys = scan(body, (h0, c0 if lstm else h0), xg, reverse=reverse)
    return (ys, h, c) if lstm else (ys, h)


def rnn_layer(mode, x, h0, c0, weights, has_bias, has_proj, reverse):
    """One direction of one recurrent layer as one op: (ys, h_T) or (ys, h_T, c_T)."""
    args = (x, h0) + ((c0,) if mode == "LSTM" else ()) + tuple(weights)
    return _call(_LAYER_NAME, _layer_fn, args, mode=mode, has_bias=has_bias,
                 has_proj=has_proj, reverse=reverse)
