"""torch.backends.cudnn's switches, which programs set before training (`cudnn.benchmark =
True` in dcgan/main.py). functrans does not use cuDNN (convolutions are im2col and one
contraction on every device), so they are plain flags that change nothing."""
from __future__ import annotations

enabled = True
benchmark = False
deterministic = False
allow_tf32 = True


def is_available():
    """False: functrans runs no cuDNN kernels."""
    return False


def version():
    """None: no cuDNN is loaded."""
    return None
