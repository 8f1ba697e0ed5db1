"""`ft.distributed`: torch.distributed's process groups on Tensors (over MPI or NCCL), and
the launcher `python -m functrans.distributed.run -n N script.py` (docs/distributed.md)."""
from .process_group import (NOT_INITIALIZED, ReduceOp, Work, all_gather, all_reduce,
                            barrier, broadcast, default_communicator, destroy_process_group,
                            get_backend, get_rank, get_world_size, init_process_group,
                            is_available, is_initialized, reduce_scatter)

__all__ = ["NOT_INITIALIZED", "ReduceOp", "Work", "all_gather", "all_reduce", "barrier",
           "broadcast", "default_communicator", "destroy_process_group", "get_backend",
           "get_rank", "get_world_size", "init_process_group", "is_available",
           "is_initialized", "reduce_scatter"]
