"""torch.nn.parallel: `DistributedDataParallel` over ft.distributed's process group, and
`DataParallel` / `data_parallel` on functrans's one device."""
from .data_parallel import DataParallel, data_parallel
from .distributed import DistributedDataParallel

__all__ = ["DataParallel", "DistributedDataParallel", "data_parallel"]
