"""LayerNorm, GroupNorm, BatchNorm1d, BatchNorm2d (torch.nn): weights ones, biases zeros;
BatchNorm keeps running statistics (momentum, unbiased running variance) in buffers."""
from __future__ import annotations

import numpy as np

from .. import functional as F
from .. import init
from ...facade.tensor import traced_hooks
from ...facade.grad_mode import no_grad
from ...facade.tensor import Tensor
from ._factory import empty, full
from .module import Module, Parameter


class LayerNorm(Module):
    """Normalize over the trailing `normalized_shape` dims, then weight * x + bias."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True,
                 device=None, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(empty(*self.normalized_shape, device=device, dtype=dtype))
            if bias:
                self.bias = Parameter(empty(*self.normalized_shape, device=device, dtype=dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        if self.elementwise_affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}")


class GroupNorm(Module):
    """Normalize over groups of channels, then a per-channel affine (bias=False: no shift)."""

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None, dtype=None,
                 *, bias=True):
        super().__init__()
        if num_channels % num_groups != 0:
            raise ValueError(f"num_channels ({num_channels}) must be divisible by num_groups "
                             f"({num_groups})")
        self.num_groups, self.num_channels = num_groups, num_channels
        self.eps, self.affine = eps, affine
        if affine:
            self.weight = Parameter(empty(num_channels, device=device, dtype=dtype))
            if bias:
                self.bias = Parameter(empty(num_channels, device=device, dtype=dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def forward(self, input):
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
                f"bias={self.bias is not None}")


class _BatchNorm(Module):
    """Shared body of BatchNorm1d/2d (bias=False: an affine scale without the shift)."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, device=None, dtype=None, *, bias=True):
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = Parameter(empty(num_features, device=device, dtype=dtype))
            if bias:
                self.bias = Parameter(empty(num_features, device=device, dtype=dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", full((num_features,), 0.0, device, dtype))
            self.register_buffer("running_var", full((num_features,), 1.0, device, dtype))
            self.register_buffer("num_batches_tracked", Tensor._make(np.zeros((), np.int64)))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self):
        if self.track_running_stats:
            with no_grad():
                self.running_mean.zero_()
                self.running_var.fill_(1)
                self.num_batches_tracked.zero_()

    def reset_parameters(self):
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def _check_input_dim(self, input):
        raise NotImplementedError

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs, assign=False):
        """A state_dict without num_batches_tracked (one saved before the counter existed, as
        torch reads a state_dict without version metadata) keeps the current count, and the
        key is not reported missing."""
        key = prefix + "num_batches_tracked"
        if self.track_running_stats and key not in state_dict:
            state_dict[key] = self.num_batches_tracked
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs, assign)

    def forward(self, input):
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        count = None
        nbt = F._raw(self.num_batches_tracked)
        if (self.training and self.track_running_stats and nbt is not None
                and isinstance(nbt, F.Tracer) and isinstance(self.num_batches_tracked, Tensor)):
            # ft.compile capture: the counter is a traced buffer, updated functionally
            if self.momentum is None:
                traced_hooks().refuse(
                    "BatchNorm with momentum=None (its factor 1/count reads "
                    "num_batches_tracked as a Python number)", "give BatchNorm a momentum")
            count = nbt
        elif (self.training and self.track_running_stats and nbt is not None
                and not isinstance(nbt, F.Tracer)):      # traced: batch_norm raises below
            count = int(np.asarray(nbt)) + 1
            if self.momentum is None:
                factor = 1.0 / count
        bn_training = self.training or (self.running_mean is None and self.running_var is None)
        use_stats = not self.training or self.track_running_stats
        out = F.batch_norm(input, self.running_mean if use_stats else None,
                           self.running_var if use_stats else None, self.weight, self.bias,
                           bn_training, factor, self.eps)
        if count is not None:
            nbt = self.num_batches_tracked
            if isinstance(nbt, Tensor):
                with no_grad():
                    nbt.add_(1)
            else:
                nbt[...] = count
        return out

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, bias={self.bias is not None}, "
                f"track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """Batch normalization of (N, C) or (N, C, L) input."""

    def _check_input_dim(self, input):
        if len(input.shape) not in (2, 3):
            raise ValueError(f"expected 2D or 3D input (got {len(input.shape)}D input)")


class BatchNorm2d(_BatchNorm):
    """Batch normalization of (N, C, H, W) input."""

    def _check_input_dim(self, input):
        if len(input.shape) != 4:
            raise ValueError(f"expected 4D input (got {len(input.shape)}D input)")
