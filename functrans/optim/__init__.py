"""ft.optim: PyTorch's optimizers (SGD, Adam, AdamW) over facade parameters."""
from .adam import Adam, AdamW  # noqa: F401
from .optimizer import Optimizer  # noqa: F401
from .sgd import SGD  # noqa: F401
