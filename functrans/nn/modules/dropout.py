"""Dropout (torch.nn.Dropout) and the channel-wise Dropout1d/2d/3d: masks from the facade's
global generator (ft.manual_seed)."""
from __future__ import annotations

from .. import functional as F
from .module import Module


class Dropout(Module):
    """In training mode, zero each element with probability p and scale the rest by 1/(1-p);
    the identity in eval mode."""

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p, self.inplace = p, inplace

    def forward(self, input):
        return F.dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class Dropout1d(Dropout):
    """Zero whole channels of (N, C, L) (or (C, L)) in training mode (F.dropout1d)."""

    def forward(self, input):
        return F.dropout1d(input, self.p, self.training, self.inplace)


class Dropout2d(Dropout):
    """Zero whole channels of (N, C, H, W) (or (C, H, W)) in training mode (F.dropout2d)."""

    def forward(self, input):
        return F.dropout2d(input, self.p, self.training, self.inplace)


class Dropout3d(Dropout):
    """Zero whole channels of (N, C, D, H, W) in training mode (F.dropout3d)."""

    def forward(self, input):
        return F.dropout3d(input, self.p, self.training, self.inplace)
