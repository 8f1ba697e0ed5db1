"""MultiheadAttention, TransformerEncoderLayer and TransformerEncoder (torch.nn), with torch's
arguments, parameter names (in_proj_weight, in_proj_bias, out_proj.*) and initialization
(xavier_uniform_ projections, zero biases)."""
from __future__ import annotations

import copy

import numpy as np

from .. import functional as F
from .. import init
from ..functional._attention import additive_mask, multi_head_attention
from ._factory import empty
from .container import ModuleList
from .dropout import Dropout
from .linear import Linear, NonDynamicallyQuantizableLinear
from .module import Module, Parameter
from .normalization import LayerNorm


class MultiheadAttention(Module):
    """Attention over num_heads heads of embed_dim / num_heads features each; kdim/vdim give
    separate q_proj_weight / k_proj_weight / v_proj_weight."""

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
                 add_zero_attn=False, kdim=None, vdim=None, batch_first=False, device=None,
                 dtype=None):
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be greater than 0, got embed_dim="
                             f"{embed_dim} and num_heads={num_heads} instead")
        super().__init__()
        self.embed_dim, self.num_heads, self.dropout = embed_dim, num_heads, dropout
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise AssertionError("embed_dim must be divisible by num_heads")
        kw = dict(device=device, dtype=dtype)
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(empty(3 * embed_dim, embed_dim, **kw))
            for n in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(n, None)
        else:
            self.q_proj_weight = Parameter(empty(embed_dim, embed_dim, **kw))
            self.k_proj_weight = Parameter(empty(embed_dim, self.kdim, **kw))
            self.v_proj_weight = Parameter(empty(embed_dim, self.vdim, **kw))
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(empty(3 * embed_dim, **kw))
        else:
            self.register_parameter("in_proj_bias", None)
        if add_bias_kv:         # one more key and value step, learned (torch's bias_k, bias_v)
            self.bias_k = Parameter(empty(1, 1, embed_dim, **kw))
            self.bias_v = Parameter(empty(1, 1, embed_dim, **kw))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn      # one more key and value step of zeros
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias, **kw)
        self._reset_parameters()

    def _reset_parameters(self):
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            for w in (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
                init.xavier_uniform_(w)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
            init.xavier_normal_(self.bias_v)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True,
                attn_mask=None, average_attn_weights=True, is_causal=False):
        batched = query.dim() == 3
        if query.dim() not in (2, 3):
            raise AssertionError(f"query should be unbatched 2D or batched 3D tensor but "
                                 f"received {query.dim()}-D query tensor")
        if query.shape[-1] != self.embed_dim:
            raise AssertionError(f"was expecting embedding dimension of {self.embed_dim}, but "
                                 f"got {query.shape[-1]}")
        if is_causal and attn_mask is None:
            raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use "
                               "the Transformer module method `generate_square_subsequent_mask` "
                               "to create this mask.")
        if not batched:
            query, key, value = query.unsqueeze(0), key.unsqueeze(0), value.unsqueeze(0)
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        elif not self.batch_first:
            query, key, value = query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1)
        n, L, S = query.shape[0], query.shape[1], key.shape[1]
        dtype = np.dtype(query.dtype)
        mask = None
        if attn_mask is not None:
            m = additive_mask(attn_mask, dtype, allowed_when_true=False)
            if m.ndim == 3:
                m = m.reshape(n, self.num_heads, L, S)
            elif m.shape != (L, S):
                raise RuntimeError(f"The shape of the 2D attn_mask is {tuple(m.shape)}, but "
                                   f"should be {(L, S)}.")
            mask = m
        if key_padding_mask is not None:
            kp = additive_mask(key_padding_mask, dtype, allowed_when_true=False)
            kp = kp.reshape(n, 1, 1, S)
            mask = kp if mask is None else mask + kp
        extra = (self.bias_k is not None) + bool(self.add_zero_attn)
        if mask is not None and extra:      # the appended steps may always be attended to
            mask = np.pad(mask, [(0, 0)] * (mask.ndim - 1) + [(0, extra)])
        weights = ([self.in_proj_weight] if self._qkv_same_embed_dim else
                   [self.q_proj_weight, self.k_proj_weight, self.v_proj_weight])
        if self.in_proj_bias is not None:
            weights += [self.in_proj_bias, self.out_proj.weight, self.out_proj.bias]
        else:
            weights += [self.out_proj.weight]
        if self.bias_k is not None:
            weights += [self.bias_k, self.bias_v]
        res = multi_head_attention(
            query, key, value, weights, num_heads=self.num_heads,
            packed=self._qkv_same_embed_dim, has_bias=self.in_proj_bias is not None, mask=mask,
            dropout_p=self.dropout if self.training else 0.0, need_weights=need_weights,
            average=average_attn_weights, bias_kv=self.bias_k is not None,
            zero_attn=self.add_zero_attn)
        out, w = res if need_weights else (res, None)
        if not batched:
            out = out.squeeze(0)
            w = None if w is None else w.squeeze(0)
        elif not self.batch_first:
            out = out.transpose(0, 1)
        return out, w


_ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu}


class TransformerEncoderLayer(Module):
    """Self-attention and a feed-forward block, each with a residual connection and LayerNorm
    (after each block, or before with norm_first=True)."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation=F.relu,
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True,
                 device=None, dtype=None):
        super().__init__()
        kw = dict(device=device, dtype=dtype)
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first, **kw)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **kw)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        if isinstance(activation, str):
            if activation not in _ACTIVATIONS:
                raise RuntimeError(f"activation should be relu/gelu, not {activation}")
            activation = _ACTIVATIONS[activation]
        self.activation = activation

    def _sa_block(self, x, attn_mask, key_padding_mask):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           need_weights=False)[0]
        return self.dropout1(x)

    def _ff_block(self, x):
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask)
            return x + self._ff_block(self.norm2(x))
        x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask))
        return self.norm2(x + self._ff_block(x))


class TransformerEncoder(Module):
    """num_layers deep copies of encoder_layer (layers.0, layers.1, ...), then norm if given."""

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True,
                 mask_check=True):
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(encoder_layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        x = src
        for layer in self.layers:
            x = layer(x, src_mask=mask, src_key_padding_mask=src_key_padding_mask)
        return x if self.norm is None else self.norm(x)
