"""PyTorch's module path torch.nn.parameter (`from torch.nn.parameter import Parameter`)."""
from .modules.module import Buffer, Parameter  # noqa: F401
