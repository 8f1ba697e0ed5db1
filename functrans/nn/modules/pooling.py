"""PyTorch's module path nn.modules.pooling for the pooling layers, which functrans defines
beside the convolutions (conv.py)."""
from .conv import AdaptiveAvgPool2d, AvgPool2d, MaxPool2d  # noqa: F401
