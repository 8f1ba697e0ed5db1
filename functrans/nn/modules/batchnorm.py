"""PyTorch's module path nn.modules.batchnorm for the batch normalizations, which functrans
defines with the other normalizations (normalization.py)."""
from .normalization import BatchNorm1d, BatchNorm2d, _BatchNorm  # noqa: F401
