"""RNN, LSTM, GRU and their cells (torch.nn), with torch's arguments, parameter names, shapes
and initialization (every weight and bias ~ U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))).
Each layer and direction runs as one `lax.scan` (nn.functional._rnn), so the modules jit,
vmap and differentiate; dropout between layers is F.dropout."""
from __future__ import annotations

import math
import numbers
import warnings

from ...facade import ops
from ...facade.creation import zeros
from .. import functional as F
from .. import init
from .._packed import PackedSequence, packed_rnn_forward
from ..functional._rnn import GATES, rnn_cell, rnn_layer
from ._factory import empty
from .module import Module, Parameter


class RNNBase(Module):
    """The shared constructor and forward of RNN, LSTM and GRU."""

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__()
        if not isinstance(dropout, numbers.Number) or not 0 <= dropout <= 1 or \
                isinstance(dropout, bool):
            raise ValueError("dropout should be a number in range [0, 1] representing the "
                             "probability of an element being zeroed")
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so "
                          "non-zero dropout expects num_layers greater than 1, but got "
                          f"dropout={dropout} and num_layers={num_layers}")
        if not isinstance(hidden_size, int) or isinstance(hidden_size, bool):
            raise TypeError(f"hidden_size should be of type int, got: {type(hidden_size).__name__}")
        if hidden_size <= 0:
            raise ValueError("hidden_size must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable "
                             "projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if proj_size and mode != "LSTM":
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        self.mode, self.input_size, self.hidden_size = mode, input_size, hidden_size
        self.num_layers, self.bias, self.batch_first = num_layers, bias, batch_first
        self.dropout, self.bidirectional, self.proj_size = float(dropout), bidirectional, proj_size
        gate = GATES[mode] * hidden_size
        out = proj_size or hidden_size
        dirs = 2 if bidirectional else 1
        self._flat_weights_names = []
        for layer in range(num_layers):
            for d in range(dirs):
                sfx = f"_l{layer}" + ("_reverse" if d else "")
                shapes = [("weight_ih", (gate, input_size if layer == 0 else out * dirs)),
                          ("weight_hh", (gate, out))]
                if bias:
                    shapes += [("bias_ih", (gate,)), ("bias_hh", (gate,))]
                if proj_size:
                    shapes.append(("weight_hr", (proj_size, hidden_size)))
                for name, shape in shapes:
                    setattr(self, name + sfx, Parameter(empty(*shape, device=device, dtype=dtype)))
                    self._flat_weights_names.append(name + sfx)
        self.reset_parameters()

    def flatten_parameters(self):
        """Nothing to do: PyTorch packs the weights into one buffer for cuDNN here; functrans
        reads each weight where it is. Returns None, as torch's."""

    def reset_parameters(self):
        bound = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for w in self.parameters():
            init.uniform_(w, -bound, bound)

    def _weights(self, layer, d):
        sfx = f"_l{layer}" + ("_reverse" if d else "")
        names = ["weight_ih", "weight_hh"] + (["bias_ih", "bias_hh"] if self.bias else []) + \
            (["weight_hr"] if self.proj_size else [])
        return [getattr(self, n + sfx) for n in names]

    def _check_hidden(self, h, expected, what="hidden"):
        if tuple(h.shape) != expected:
            raise RuntimeError(f"Expected {what} size {expected}, got {list(h.shape)}")

    def forward(self, input, hx=None):
        if isinstance(input, PackedSequence):     # (nn.utils.rnn: each sequence to its length)
            return packed_rnn_forward(self, input, hx)
        name = type(self).__name__
        if input.dim() not in (2, 3):
            # (torch's RNN says "4D tensor instead", its GRU and LSTM "4D instead")
            what = "D tensor" if self.mode.startswith("RNN") else "D"
            raise ValueError(f"{name}: Expected input to be 2D or 3D, got {input.dim()}{what} "
                             "instead")
        if input.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected "
                               f"{self.input_size}, got {input.shape[-1]}")
        batched = input.dim() == 3
        x = input if batched else input.unsqueeze(1)
        if batched and self.batch_first:
            x = x.transpose(0, 1)
        lstm = self.mode == "LSTM"
        dirs = 2 if self.bidirectional else 1
        batch = x.shape[1]
        out = self.proj_size or self.hidden_size
        hshape = (self.num_layers * dirs, batch, out)
        cshape = (self.num_layers * dirs, batch, self.hidden_size)
        if hx is None:
            h0 = zeros(*hshape, dtype=x.dtype)
            c0 = zeros(*cshape, dtype=x.dtype) if lstm else None
        else:
            h0, c0 = hx if lstm else (hx, None)
            want = 3 if batched else 2
            for t in (h0, c0) if lstm else (h0,):
                if t.dim() != want:
                    raise RuntimeError(f"For {'batched' if batched else 'unbatched'} "
                                       f"{want + 1}-D input, hx{' and cx' if lstm else ''} should "
                                       f"also be {want}-D but got {t.dim()}-D tensor")
            if not batched:
                h0 = h0.unsqueeze(1)
                c0 = c0.unsqueeze(1) if lstm else None
            self._check_hidden(h0, hshape)
            if lstm:
                self._check_hidden(c0, cshape, "cell")
        h_n, c_n = [], []
        for layer in range(self.num_layers):
            ys = []
            for d in range(dirs):
                k = layer * dirs + d
                res = rnn_layer(self.mode, x, h0[k], c0[k] if lstm else None,
                                self._weights(layer, d), self.bias, bool(self.proj_size),
                                reverse=bool(d))
                ys.append(res[0])
                h_n.append(res[1])
                if lstm:
                    c_n.append(res[2])
            x = ys[0] if dirs == 1 else ops.cat(ys, 2)
            if self.dropout and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, self.training)
        h_n = ops.stack(h_n, 0)
        c_n = ops.stack(c_n, 0) if lstm else None
        if not batched:
            x, h_n = x.squeeze(1), h_n.squeeze(1)
            c_n = c_n.squeeze(1) if lstm else None
        elif self.batch_first:
            x = x.transpose(0, 1)
        return (x, (h_n, c_n)) if lstm else (x, h_n)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if not self.bias:
            s += ", bias=False"
        if self.batch_first:
            s += ", batch_first=True"
        if self.dropout:
            s += f", dropout={self.dropout}"
        if self.bidirectional:
            s += ", bidirectional=True"
        return s


class RNN(RNNBase):
    """Elman RNN: h_t = act(x_t W_ihᵀ + b_ih + h_{t-1} W_hhᵀ + b_hh), act tanh or relu."""

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, device=None, dtype=None,
                 proj_size=0):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or "
                             "'relu'.")
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size,
                         hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         proj_size, device=device, dtype=dtype)
        self.nonlinearity = nonlinearity

    # (torch's repr of an RNN does not show its nonlinearity; RNNCell's does)


class LSTM(RNNBase):
    """LSTM with torch's gate order (i, f, g, o) and optional projection (proj_size)."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, proj_size, device=device, dtype=dtype)


class GRU(RNNBase):
    """GRU with torch's gate order (r, z, n): n = tanh(W_in x + b_in + r ∘ (W_hn h + b_hn))."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, device=None, dtype=None, proj_size=0):
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, proj_size, device=device, dtype=dtype)


class RNNCellBase(Module):
    """One step: weight_ih (gates * hidden, input), weight_hh (gates * hidden, hidden),
    bias_ih, bias_hh, all ~ U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""

    def __init__(self, mode, input_size, hidden_size, bias, device=None, dtype=None):
        super().__init__()
        self.mode, self.input_size, self.hidden_size, self.bias = mode, input_size, hidden_size, bias
        gate = GATES[mode] * hidden_size
        self.weight_ih = Parameter(empty(gate, input_size, device=device, dtype=dtype))
        self.weight_hh = Parameter(empty(gate, hidden_size, device=device, dtype=dtype))
        if bias:
            self.bias_ih = Parameter(empty(gate, device=device, dtype=dtype))
            self.bias_hh = Parameter(empty(gate, device=device, dtype=dtype))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        RNNBase.reset_parameters(self)

    def forward(self, input, hx=None):
        name = type(self).__name__
        if input.dim() not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.dim()}D instead")
        if input.shape[-1] != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {input.shape[-1]} "
                               f"expected {self.input_size}")
        batched = input.dim() == 2
        x = input if batched else input.unsqueeze(0)
        lstm = self.mode == "LSTM"
        if hx is None:
            h = zeros(x.shape[0], self.hidden_size, dtype=x.dtype)
            c = zeros(x.shape[0], self.hidden_size, dtype=x.dtype) if lstm else None
        else:
            h, c = hx if lstm else (hx, None)
            if not batched:
                h = h.unsqueeze(0)
                c = c.unsqueeze(0) if lstm else None
        weights = [self.weight_ih, self.weight_hh] + \
            ([self.bias_ih, self.bias_hh] if self.bias else [])
        out = rnn_cell(self.mode, x, h, c, weights, self.bias)
        if batched:
            return out
        return tuple(o.squeeze(0) for o in out) if lstm else out.squeeze(0)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if not self.bias:
            s += ", bias=False"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        return s


class RNNCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None,
                 dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise RuntimeError(f"Unknown nonlinearity: {nonlinearity}")
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size,
                         hidden_size, bias, device=device, dtype=dtype)
        self.nonlinearity = nonlinearity


class LSTMCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, bias, device=device, dtype=dtype)


class GRUCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__("GRU", input_size, hidden_size, bias, device=device, dtype=dtype)
