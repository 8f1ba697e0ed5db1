"""torch.nn.utils.rnn: PackedSequence, packing and padding, and RNN/LSTM/GRU over a packed batch.

A PackedSequence holds a batch of sequences of different lengths, sorted longest first, time
step after time step: `data` (sum of lengths, *), `batch_sizes[t]` = how many sequences are
still running at step t. Packing and unpacking are one gather each (an index computed on the
host from the lengths), so their gradients are the core's. A recurrent layer runs over the
padded batch with a mask: past its own length a sequence's state is carried unchanged and
its outputs are zero, so each sequence's final state is the one at its last element, and the
reverse direction starts at each sequence's own last element — torch's packed semantics.
(Lives here, not in nn.utils, so that nn.modules.rnn can import it: nn.utils imports the
Module classes for its parametrizations.)
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np

from ..numpy import raw as fnp
from ..control_flow import scan
from ..facade import ops
from ..facade.creation import tensor as _tensor
from ..facade.creation import full_like, zeros
from ..facade.tensor import Tensor, apply_fn
from .functional import dropout
from .functional._rnn import _lin, _step, _unpack


def _int64(values):
    return Tensor._make(np.asarray(values, np.int64))


def invert_permutation(permutation):
    """The permutation that undoes `permutation` (None stays None)."""
    if permutation is None:
        return None
    p = np.asarray(permutation._data if isinstance(permutation, Tensor) else permutation)
    inv = np.empty_like(p)
    inv[p] = np.arange(p.size, dtype=p.dtype)
    return _int64(inv)


class PackedSequence(namedtuple("PackedSequence_", ["data", "batch_sizes", "sorted_indices",
                                                    "unsorted_indices"])):
    """torch.nn.utils.rnn.PackedSequence: (data, batch_sizes, sorted_indices,
    unsorted_indices). Made by pack_padded_sequence / pack_sequence, not by hand; given
    sorted_indices alone, unsorted_indices is its inverse."""

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        if batch_sizes is None:
            raise RuntimeError("PackedSequence needs batch_sizes: build it with "
                               "pack_padded_sequence or pack_sequence")
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def _with_data(self, data):
        return type(self)(data, self.batch_sizes, self.sorted_indices, self.unsorted_indices)

    def to(self, *args, **kwargs):
        """The data moved/cast by Tensor.to (batch_sizes stay on the CPU, as torch's)."""
        data = self.data.to(*args, **kwargs)
        return self if data is self.data else self._with_data(data)

    def cpu(self):
        return self._with_data(self.data.cpu())

    def double(self):
        return self.to(dtype=np.float64)

    def float(self):
        return self.to(dtype=np.float32)

    def half(self):
        return self.to(dtype=np.float16)

    @property
    def is_cuda(self):
        return self.data.is_cuda

    def is_pinned(self):
        return False


# ---------------------------------------------------------------------------
# the host-side index arithmetic of packing


def _lengths_array(lengths):
    if isinstance(lengths, Tensor):
        return np.asarray(lengths.detach().cpu()._data).astype(np.int64).reshape(-1)
    return np.asarray(lengths, dtype=np.int64).reshape(-1)


def _batch_sizes(lengths):
    """batch_sizes[t] = how many of the (decreasing) lengths exceed t."""
    return np.array([(lengths > t).sum() for t in range(int(lengths[0]))], np.int64)


def _packed_rows(batch_sizes, batch):
    """For each row of the packed data, its row in the flattened (T, B) time-major padding."""
    return np.concatenate([t * batch + np.arange(n) for t, n in enumerate(batch_sizes)])


def _take_rows(x, rows):
    return fnp.take(x, rows, axis=0)


def _pad_rows(data, rows, value):
    """data's rows scattered into the (T*B) grid: a gather from data with one extra row of
    the padding value, which every empty position reads."""
    fill = fnp.full((1,) + data.shape[1:], value, data.dtype)
    return fnp.take(fnp.concatenate([data, fill], axis=0), rows, axis=0)


def _grid_rows(batch_sizes, batch, total):
    """For each position of the (total, batch) grid, the packed row there (or the padding
    row, index len(data))."""
    n = int(batch_sizes.sum())
    grid = np.full((total, batch), n, np.int64)
    grid.reshape(-1)[_packed_rows(batch_sizes, batch)] = np.arange(n)
    return grid.reshape(-1)


# ---------------------------------------------------------------------------
# torch.nn.utils.rnn's functions


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """Pack a padded (T, B, *) batch (B, T, * with batch_first) of sequences of the given
    lengths. enforce_sorted=True expects lengths in decreasing order; otherwise the batch is
    sorted here and the order remembered (sorted_indices, unsorted_indices)."""
    lengths = _lengths_array(lengths)
    sorted_indices = None
    if enforce_sorted:
        if np.any(np.diff(lengths) > 0):
            raise RuntimeError(
                "`lengths` array must be sorted in decreasing order when `enforce_sorted` is "
                "True. You can pass `enforce_sorted=False` to pack_padded_sequence and/or "
                "pack_sequence to sidestep this requirement if you do not need ONNX "
                "exportability.")
    else:
        order = np.argsort(-lengths, kind="stable")
        lengths = lengths[order]
        sorted_indices = _int64(order)
        input = input.index_select(0 if batch_first else 1, sorted_indices)
    if batch_first:
        input = input.transpose(0, 1)
    t, b = input.shape[0], input.shape[1]
    if lengths.size != b:
        raise RuntimeError(f"Expected `len(lengths)` to be equal to batch_size, but got "
                           f"{lengths.size} (batch_size={b})")
    if lengths.size and lengths.min() <= 0:
        raise RuntimeError("Length of all samples has to be greater than 0, but found an element "
                           "in 'lengths' that is <= 0")
    if lengths.size and lengths[0] > t:
        raise RuntimeError(f"pack_padded_sequence: a length of {int(lengths[0])} is longer than "
                           f"the padded input's {t} time steps")
    batch_sizes = _batch_sizes(lengths)
    flat = input.reshape(t * b, *input.shape[2:])
    data = apply_fn("PackPaddedSequenceBackward0", _take_rows,
                    (flat, _packed_rows(batch_sizes, b)))
    return PackedSequence(data, _int64(batch_sizes), sorted_indices, None)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """(padded, lengths): the inverse of pack_padded_sequence, padded with padding_value to
    the longest sequence (or total_length), in the batch's original order; lengths is an
    int64 tensor."""
    batch_sizes = np.asarray(sequence.batch_sizes._data).astype(np.int64)
    steps = batch_sizes.size
    if total_length is not None:
        if total_length < steps:
            raise ValueError(f"Expected total_length to be at least the length of the longest "
                             f"sequence in input, but got total_length={total_length} and max "
                             f"sequence length being {steps}")
        steps = int(total_length)
    b = int(batch_sizes[0])
    data = sequence.data
    rows = _grid_rows(batch_sizes, b, steps)
    flat = apply_fn("PadPackedSequenceBackward0", _pad_rows, (data, rows, float(padding_value)))
    padded = flat.reshape(steps, b, *data.shape[1:])
    if batch_first:
        padded = padded.transpose(0, 1)
    lengths = np.array([(batch_sizes > i).sum() for i in range(b)], np.int64)
    if sequence.unsorted_indices is not None:
        unsorted = sequence.unsorted_indices
        return (padded.index_select(0 if batch_first else 1, unsorted),
                _int64(lengths[np.asarray(unsorted._data)]))
    return padded, _int64(lengths)


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Stack sequences of shape (L_i, *) into (L_max, B, *) (B, L_max, * with batch_first),
    padded with padding_value after each (padding_side='right') or before it ('left')."""
    if padding_side not in ("left", "right"):
        raise RuntimeError(f"Expected padding_side to be one of left or right, but got "
                           f"{padding_side}.")
    if isinstance(sequences, Tensor):
        sequences = list(sequences.unbind(0))
    sequences = list(sequences)
    longest = max(int(s.shape[0]) for s in sequences)
    padded = []
    for s in sequences:
        gap = longest - int(s.shape[0])
        if gap:
            fill = full_like(s[:1], padding_value).expand(gap, *s.shape[1:])
            s = ops.cat([s, fill] if padding_side == "right" else [fill, s], 0)
        padded.append(s)
    return ops.stack(padded, 0 if batch_first else 1)


def pack_sequence(sequences, enforce_sorted=True):
    """Pack a list of sequences (L_i, *): pad_sequence then pack_padded_sequence."""
    lengths = [int(s.shape[0]) for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), _tensor(lengths),
                                enforce_sorted=enforce_sorted)


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """The list of sequences (L_i, *) of a padded batch."""
    if not batch_first:
        padded_sequences = padded_sequences.transpose(0, 1)
    return [padded_sequences[i, :int(n)] for i, n in enumerate(_lengths_array(lengths))]


def unpack_sequence(packed_sequences):
    """The list of sequences of a PackedSequence, in the batch's original order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)


# ---------------------------------------------------------------------------
# recurrent layers over a packed batch


def _masked_layer_fn(x, mask, h0, *rest, mode, has_bias, has_proj, reverse):
    """One direction of one layer over the padded x (T, B, I): where mask[t, b] is False
    (past sequence b's length) the state is carried unchanged and the output is zero."""
    lstm = mode == "LSTM"
    c0 = rest[0] if lstm else None
    w_ih, w_hh, b_ih, b_hh, w_hr = _unpack(mode, rest[1:] if lstm else rest, has_bias, has_proj)
    xg = _lin(x, w_ih, b_ih)

    def body(carry, inputs):
        (h, c), (xt, mt) = carry, inputs
        h_new, c_new = _step(mode, xt, h, c, w_hh, b_hh, w_hr)
        h = fnp.where(mt, h_new, h)
        c = fnp.where(mt, c_new, c) if lstm else h
        return (h, c), fnp.where(mt, h_new, fnp.zeros((), h_new.dtype))
    (h, c), ys = scan(body, (h0, c0 if lstm else h0), (xg, mask), reverse=reverse)
    return (ys, h, c) if lstm else (ys, h)


def packed_rnn_forward(rnn, input, hx):
    """RNNBase.forward of a PackedSequence: (PackedSequence output, h_n) or (output,
    (h_n, c_n)); hx and the final states in the batch's original order, as torch's."""
    batch_sizes = np.asarray(input.batch_sizes._data).astype(np.int64)
    steps, batch = batch_sizes.size, int(batch_sizes[0])
    lengths = np.array([(batch_sizes > i).sum() for i in range(batch)], np.int64)
    mask = (np.arange(steps)[:, None] < lengths[None, :])[:, :, None]      # (T, B, 1)
    grid = _grid_rows(batch_sizes, batch, steps)
    packed_rows = _packed_rows(batch_sizes, batch)
    data = input.data
    if data.dim() != 2 or data.shape[-1] != rnn.input_size:
        raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected "
                           f"{rnn.input_size}, got {data.shape[-1]}")
    x = apply_fn("PadPackedSequenceBackward0", _pad_rows, (data, grid, 0.0)).reshape(
        steps, batch, data.shape[-1])
    lstm = rnn.mode == "LSTM"
    dirs = 2 if rnn.bidirectional else 1
    hshape = (rnn.num_layers * dirs, batch, rnn.proj_size or rnn.hidden_size)
    cshape = (rnn.num_layers * dirs, batch, rnn.hidden_size)
    if hx is None:
        h0 = zeros(*hshape, dtype=data.dtype)
        c0 = zeros(*cshape, dtype=data.dtype) if lstm else None
    else:
        h0, c0 = hx if lstm else (hx, None)
        if input.sorted_indices is not None:          # hx is in the caller's order
            h0 = h0.index_select(1, input.sorted_indices)
            c0 = c0.index_select(1, input.sorted_indices) if lstm else None
        rnn._check_hidden(h0, hshape)
        if lstm:
            rnn._check_hidden(c0, cshape, "cell")
    h_n, c_n = [], []
    for layer in range(rnn.num_layers):
        ys = []
        for d in range(dirs):
            k = layer * dirs + d
            args = (x, mask, h0[k]) + ((c0[k],) if lstm else ()) + tuple(rnn._weights(layer, d))
            res = apply_fn("StackBackward0", _masked_layer_fn, args,
                           (("has_bias", rnn.bias), ("has_proj", bool(rnn.proj_size)),
                            ("mode", rnn.mode), ("reverse", bool(d))))
            ys.append(res[0])
            h_n.append(res[1])
            if lstm:
                c_n.append(res[2])
        x = ys[0] if dirs == 1 else ops.cat(ys, 2)
        if rnn.dropout and layer < rnn.num_layers - 1:
            x = dropout(x, rnn.dropout, rnn.training)
    out = apply_fn("CatBackward0", _take_rows, (x.reshape(steps * batch, x.shape[-1]),
                                                packed_rows))
    h_n = ops.stack(h_n, 0)
    c_n = ops.stack(c_n, 0) if lstm else None
    if input.unsorted_indices is not None:
        h_n = h_n.index_select(1, input.unsorted_indices)
        c_n = c_n.index_select(1, input.unsorted_indices) if lstm else None
    out = input._with_data(out)
    return (out, (h_n, c_n)) if lstm else (out, h_n)
