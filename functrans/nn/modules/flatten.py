"""PyTorch's module path nn.modules.flatten for Flatten and Unflatten, which functrans defines
with the containers (container.py)."""
from .container import Flatten, Unflatten  # noqa: F401
