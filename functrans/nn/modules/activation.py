"""Activation modules (torch.nn): thin wrappers over nn.functional; and MultiheadAttention,
which PyTorch files here too (programs name it `nn.modules.activation.MultiheadAttention`),
with torch's arguments, parameter names (in_proj_weight, in_proj_bias, out_proj.*) and
initialization (xavier_uniform_ projections, zero biases)."""
from __future__ import annotations

import warnings

import numpy as np

from .. import functional as F
from .. import init
from ..functional._attention import additive_mask, multi_head_attention
from ._factory import empty
from .linear import NonDynamicallyQuantizableLinear
from .module import Module, Parameter


class ReLU(Module):
    """max(x, 0); inplace=True overwrites the input (works under backward hooks too)."""

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.relu(input, inplace=self.inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class ReLU6(Module):
    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.relu6(input, inplace=self.inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class Threshold(Module):
    def __init__(self, threshold, value, inplace=False):
        super().__init__()
        self.threshold, self.value, self.inplace = threshold, value, inplace

    def forward(self, input):
        return F.threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self):
        return f"threshold={self.threshold}, value={self.value}" + (
            ", inplace=True" if self.inplace else "")


class LeakyReLU(Module):
    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__()
        self.negative_slope, self.inplace = negative_slope, inplace

    def forward(self, input):
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class PReLU(Module):
    """F.prelu with a learnable slope: num_parameters = 1 (shared) or the channel count
    (dim 1 of the input), each initialized to init."""

    def __init__(self, num_parameters=1, init=0.25, device=None, dtype=None):
        super().__init__()
        self.num_parameters, self.init = num_parameters, init
        self.weight = Parameter(empty(num_parameters, device=device, dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self):
        init.constant_(self.weight, self.init)

    def forward(self, input):
        return F.prelu(input, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"


class ELU(Module):
    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, input):
        return F.elu(input, self.alpha, self.inplace)

    def extra_repr(self):
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class GELU(Module):
    """GELU; approximate='none' (exact erf form, the default) or 'tanh'."""

    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class SiLU(Module):
    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.silu(input, inplace=self.inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class Mish(Module):
    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.mish(input, inplace=self.inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class Tanh(Module):
    def forward(self, input):
        return F.tanh(input)


class Sigmoid(Module):
    def forward(self, input):
        return F.sigmoid(input)


class Softplus(Module):
    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, input):
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self):
        return f"beta={self.beta}, threshold={self.threshold}"


class Hardtanh(Module):
    """clip(x, min_val, max_val); min_value / max_value are torch's deprecated spellings."""

    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False, min_value=None,
                 max_value=None):
        super().__init__()
        if min_value is not None:
            warnings.warn("keyword argument `min_value` is deprecated and renamed to `min_val`",
                          FutureWarning, stacklevel=2)
            min_val = min_value
        if max_value is not None:
            warnings.warn("keyword argument `max_value` is deprecated and renamed to `max_val`",
                          FutureWarning, stacklevel=2)
            max_val = max_value
        self.min_val, self.max_val, self.inplace = min_val, max_val, inplace
        if max_val <= min_val:
            raise AssertionError(f"max_val ({max_val}) must be greater than min_val ({min_val})")

    def forward(self, input):
        return F.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self):
        return f"min_val={self.min_val}, max_val={self.max_val}" + (
            ", inplace=True" if self.inplace else "")


class LogSigmoid(Module):
    def forward(self, input):
        return F.logsigmoid(input)


class Softmax(Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.softmax(input, self.dim, _stacklevel=5)

    def extra_repr(self):
        return f"dim={self.dim}"


class LogSoftmax(Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.log_softmax(input, self.dim, _stacklevel=5)

    def extra_repr(self):
        return f"dim={self.dim}"


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
