"""InstanceNorm1d/2d/3d (torch.nn): F.instance_norm per (sample, channel); affine=False and
track_running_stats=False by default, as torch's."""
from __future__ import annotations

import warnings

from .. import functional as F
from .normalization import _BatchNorm


class _InstanceNorm(_BatchNorm):
    """BatchNorm's parameters and buffers, instance statistics (the running ones in eval mode
    when tracked); the batch dim is optional."""

    _spatial = 2

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=False,
                 track_running_stats=False, device=None, dtype=None):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype)

    def forward(self, input):
        nd, want = input.dim(), self._spatial
        if nd not in (want + 1, want + 2):
            raise ValueError(f"expected {want + 1}D or {want + 2}D input (got {nd}D input)")
        feature_dim = nd - want - 1
        if input.shape[feature_dim] != self.num_features:
            if self.affine:
                raise ValueError(f"expected input's size at dim={feature_dim} to match "
                                 f"num_features ({self.num_features}), but got: "
                                 f"{input.shape[feature_dim]}.")
            warnings.warn(f"input's size at dim={feature_dim} does not match num_features. You "
                          "can silence this warning by not passing in num_features, which is "
                          "not used because affine=False")
        unbatched = nd == want + 1
        x = input.unsqueeze(0) if unbatched else input
        out = F.instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                              self.training or not self.track_running_stats,
                              0.0 if self.momentum is None else self.momentum, self.eps)
        return out.squeeze(0) if unbatched else out


class InstanceNorm1d(_InstanceNorm):
    """Instance normalization of (N, C, L) or (C, L)."""

    _spatial = 1


class InstanceNorm2d(_InstanceNorm):
    """Instance normalization of (N, C, H, W) or (C, H, W)."""

    _spatial = 2


class InstanceNorm3d(_InstanceNorm):
    """Instance normalization of (N, C, D, H, W) or (C, D, H, W)."""

    _spatial = 3
