"""torch.nn.parallel: `DistributedDataParallel` over ft.distributed's process group."""
from .distributed import DistributedDataParallel

__all__ = ["DistributedDataParallel"]
