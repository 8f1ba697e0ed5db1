"""F.embedding_bag: the sums, means or maxima of bags of embedding rows, as torch's. Bags are
the rows of a 2-D input, or the slices of a 1-D input that `offsets` starts. The op is one
composition: the picked rows, each scaled (by 1, its per-sample weight, or 1/bag size; 0
for padding_idx) and added into its bag (index_add, so the cost is that of the indices),
or for 'max' a masked maximum over each bag's rows padded to the longest bag; an empty bag
gives zeros."""
from __future__ import annotations

import numpy as np

from ... import numpy as fnp
from ._dispatch import _call, _concrete, _shape
from ._linear import embedding


def _bag_fn(rows, bag, scale, pos, valid, *psw, nbags, mode):
    """rows (L, D): the picked rows; bag (L,): each index's bag, scale (L,): its factor (0 for
    an index in no bag or at padding_idx, 1/size for 'mean'); for 'max', pos (B, M) and valid
    (B, M): each bag's indices padded to the longest bag."""
    if mode == "max":
        picked = fnp.take(rows, pos, axis=0)                       # (B, M, D)
        big = fnp.where(valid[:, :, None], picked, -fnp.inf)
        return fnp.where(valid.any(axis=1)[:, None], big.max(axis=1), fnp.zeros((), rows.dtype))
    w = scale * psw[0] if psw else scale
    return fnp.index_add(fnp.zeros((nbags, rows.shape[1]), rows.dtype), bag,
                         rows * w[:, None])


def _empty_fn(weight, *, nbags):
    return fnp.zeros((nbags, weight.shape[1]), weight.dtype)


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2,  # noqa: A002
                  scale_grad_by_freq=False, mode="mean", sparse=False, per_sample_weights=None,
                  include_last_offset=False, padding_idx=None):
    """Each bag's rows of weight reduced by mode ('sum', 'mean' or 'max'); per_sample_weights
    (mode='sum' only) scale each index's row; indices equal to padding_idx are left out
    (and not counted by 'mean'); include_last_offset: offsets has one more entry, the end."""
    if mode not in ("sum", "mean", "max"):
        raise ValueError("mode has to be one of sum, mean or max")
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(
            "embedding_bag: per_sample_weights was not None. per_sample_weights is only "
            f"supported for mode='sum' (got mode='{mode}'). Please open a feature request on "
            "GitHub.")
    if scale_grad_by_freq:
        raise NotImplementedError("embedding_bag: scale_grad_by_freq=True is not supported by "
                                  "functrans; divide the gradient yourself or use F.embedding")
    idx = _concrete(input)
    if idx is None:
        raise NotImplementedError("embedding_bag: the bags are laid out from the indices' values,"
                                  " which a traced input (inside ft.grad / ft.vmap / ft.jit) does "
                                  "not have; call it on concrete indices")
    if idx.ndim == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None, as input is treated is "
                             "a mini-batch of fixed length sequences. However, found offsets of "
                             f"type {type(offsets)}")
        nbags, width = idx.shape
        starts = np.arange(nbags) * width
        ends = starts + width
    elif idx.ndim == 1:
        off = None if offsets is None else _concrete(offsets)
        if off is None or off.ndim != 1:
            raise ValueError(f"offsets has to be a 1D Tensor but got "
                             f"{None if offsets is None else _shape(offsets)}")
        off = off.astype(np.int64)
        if off.size and off[0] != 0:
            raise RuntimeError(f"offsets[0] has to be 0, i.e., the first sequence in the "
                               f"mini-batch has to start from position 0. However, got {off[0]}")
        bounds = off if include_last_offset else np.append(off, idx.size)
        starts, ends = bounds[:-1], np.minimum(bounds[1:], idx.size)
        nbags = len(starts)
    else:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension "
                         f"{idx.ndim}")
    flat = idx.reshape(-1)
    if per_sample_weights is not None and tuple(_shape(per_sample_weights)) != idx.shape:
        raise ValueError(f"embedding_bag: per_sample_weights {tuple(_shape(per_sample_weights))}"
                         f" must have the input's shape {idx.shape}")
    if flat.size == 0:                                         # only empty bags: zeros
        return _call("EmbeddingBagBackward0", _empty_fn, (weight,), nbags=nbags)
    sizes = np.maximum(ends - starts, 0)
    bag = np.repeat(np.arange(nbags), sizes)                   # the bag of each index in one
    where = np.concatenate([np.arange(a, a + n) for a, n in zip(starts, sizes)] or [[]])
    where = where.astype(np.int64)
    keep = np.ones(where.size, bool) if padding_idx is None else \
        flat[where] != padding_idx % _shape(weight)[0]
    dt = np.dtype(weight.dtype)
    bag_of = np.zeros(flat.size, np.int64)
    bag_of[where] = bag
    scale = np.zeros(flat.size, dt)
    scale[where] = keep
    if mode == "mean":
        counts = np.bincount(bag[keep], minlength=nbags)
        scale[where] /= np.maximum(counts[bag], 1)
    width = max(int(sizes.max()) if nbags else 0, 1)
    slot = np.arange(width)
    valid = (slot[None, :] < sizes[:, None])
    pos = np.where(valid, starts[:, None] + slot[None, :], 0)
    valid &= scale[pos] > 0
    rows = embedding(input.reshape(-1), weight, None, max_norm, norm_type, False, sparse)
    extra = () if per_sample_weights is None else (per_sample_weights.reshape(-1),)
    return _call("EmbeddingBagBackward0", _bag_fn, (rows, bag_of, scale, pos, valid) + extra,
                 nbags=nbags, mode=mode)
