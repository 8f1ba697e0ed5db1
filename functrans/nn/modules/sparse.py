"""Embedding and EmbeddingBag (torch.nn's, in PyTorch's module nn.modules.sparse): weight ~
N(0, 1), the padding_idx row zero (gradient-free in Embedding, left out of bags)."""
from __future__ import annotations

from .. import functional as F
from .. import init
from ...facade.grad_mode import no_grad
from ._factory import empty
from .module import Module, Parameter


class Embedding(Module):
    """A lookup table of num_embeddings vectors of size embedding_dim."""

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None,
                 norm_type=2.0, scale_grad_by_freq=False, sparse=False, _weight=None,
                 _freeze=False, device=None, dtype=None):
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        if padding_idx is not None:
            if padding_idx > 0:
                if padding_idx >= num_embeddings:
                    raise AssertionError("Padding_idx must be within num_embeddings")
            elif padding_idx < 0:
                if padding_idx < -num_embeddings:
                    raise AssertionError("Padding_idx must be within num_embeddings")
                padding_idx = num_embeddings + padding_idx
        self.padding_idx = padding_idx
        self.max_norm, self.norm_type = max_norm, norm_type
        self.scale_grad_by_freq, self.sparse = scale_grad_by_freq, sparse
        if _weight is None:
            self.weight = Parameter(empty(num_embeddings, embedding_dim, device=device,
                                          dtype=dtype), requires_grad=not _freeze)
            self.reset_parameters()
        else:
            if tuple(_weight.shape) != (num_embeddings, embedding_dim):
                raise AssertionError("Shape of weight does not match num_embeddings and "
                                     "embedding_dim")
            self.weight = Parameter(_weight, requires_grad=not _freeze)

    def reset_parameters(self):
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with no_grad():
                self.weight[self.padding_idx].fill_(0)

    def forward(self, input):
        return F.embedding(input, self.weight, self.padding_idx, self.max_norm, self.norm_type,
                           self.scale_grad_by_freq, self.sparse)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm}"
        if self.norm_type != 2:
            s += f", norm_type={self.norm_type}"
        if self.scale_grad_by_freq is not False:
            s += f", scale_grad_by_freq={self.scale_grad_by_freq}"
        if self.sparse is not False:
            s += ", sparse=True"
        return s

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, padding_idx=None, max_norm=None,
                        norm_type=2.0, scale_grad_by_freq=False, sparse=False):
        """An Embedding whose weight is `embeddings` (frozen unless freeze=False)."""
        if embeddings.dim() != 2:
            raise AssertionError("Embeddings parameter is expected to be 2-dimensional")
        rows, cols = tuple(embeddings.shape)
        return cls(rows, cols, _weight=embeddings, _freeze=freeze, padding_idx=padding_idx,
                   max_norm=max_norm, norm_type=norm_type, scale_grad_by_freq=scale_grad_by_freq,
                   sparse=sparse)


class EmbeddingBag(Embedding):
    """Sums, means or maxima of bags of embeddings (F.embedding_bag) without building the
    per-index embeddings first in the user's code: weight ~ N(0, 1), padding_idx row zero."""

    def __init__(self, num_embeddings, embedding_dim, max_norm=None, norm_type=2.0,
                 scale_grad_by_freq=False, mode="mean", sparse=False, _weight=None,
                 include_last_offset=False, padding_idx=None, device=None, dtype=None):
        super().__init__(num_embeddings, embedding_dim, padding_idx, max_norm, norm_type,
                         scale_grad_by_freq, sparse, _weight, device=device, dtype=dtype)
        self.mode, self.include_last_offset = mode, include_last_offset

    def forward(self, input, offsets=None, per_sample_weights=None):
        return F.embedding_bag(input, self.weight, offsets, self.max_norm, self.norm_type,
                               self.scale_grad_by_freq, self.mode, self.sparse,
                               per_sample_weights, self.include_last_offset, self.padding_idx)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm!r}"
        if self.norm_type != 2:
            s += f", norm_type={self.norm_type!r}"
        if self.scale_grad_by_freq is not False:
            s += f", scale_grad_by_freq={self.scale_grad_by_freq!r}"
        s += f", mode={self.mode!r}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx!r}"
        return s

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, max_norm=None, norm_type=2.0,
                        scale_grad_by_freq=False, mode="mean", sparse=False,
                        include_last_offset=False, padding_idx=None):
        """An EmbeddingBag whose weight is `embeddings` (frozen unless freeze=False)."""
        if embeddings.dim() != 2:
            raise AssertionError("Embeddings parameter is expected to be 2-dimensional")
        rows, cols = embeddings.shape
        bag = cls(rows, cols, max_norm, norm_type, scale_grad_by_freq, mode, sparse,
                  embeddings, include_last_offset, padding_idx)
        bag.weight.requires_grad = not freeze
        return bag
