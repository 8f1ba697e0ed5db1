"""SparseAdam (torch.optim.SparseAdam) exists so that programs naming it import, and refuses
to be constructed: it only accepts sparse gradients, and functrans has none."""
from __future__ import annotations

from .optimizer import Optimizer


class SparseAdam(Optimizer):
    """Not supported: PyTorch's SparseAdam updates only the rows present in a sparse
    gradient (from `Embedding(sparse=True)`), and rejects dense gradients. functrans's
    gradients are always dense, so constructing one raises NotImplementedError at once,
    before any training, naming the replacement (Adam)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, maximize=False):
        raise NotImplementedError(
            "SparseAdam: functrans has no sparse gradients (nn.Embedding(sparse=True) is not "
            "supported), and SparseAdam only updates from sparse ones. Use "
            f"optim.Adam(params, lr={lr}, betas={tuple(betas)}, eps={eps}) with dense "
            "gradients; unlike SparseAdam, Adam also decays the moments of the rows a batch "
            "does not touch.")
