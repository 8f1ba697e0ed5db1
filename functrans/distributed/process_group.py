"""torch.distributed's process-group calls on Tensors, over backends/mpi.py (NumPy
arrays, MPI) or backends/nccl.py (CuPy arrays, NCCL bootstrapped by MPI).

One default group spans every process of the job; rank and size come from the launcher
(`python -m functrans.distributed.run` or mpiexec). As in torch, the collectives work in
place on the tensors' storage and bump their version counters; they are not recorded for
autograd (the differentiable collectives are `ft.lax.psum` and friends).
"""
from __future__ import annotations

from ..backends import mpi
from ..backends import nccl
from ..core import array_module
from ..facade.tensor import Tensor

__all__ = ["ReduceOp", "init_process_group", "is_initialized", "is_available",
           "get_rank", "get_world_size", "get_backend", "barrier", "all_reduce",
           "broadcast", "all_gather", "reduce_scatter", "destroy_process_group", "Work"]

NOT_INITIALIZED = ("Default process group has not been initialized, please make sure to call "
                   "init_process_group: ft.distributed.init_process_group(backend=\"mpi\") "
                   "at the start of the script, launched with "
                   "`python -m functrans.distributed.run -n N script.py`")


class ReduceOp:
    """Reduction operations, torch.distributed.ReduceOp's names."""
    SUM = "sum"
    PRODUCT = "prod"
    MIN = "min"
    MAX = "max"
    AVG = "avg"


class _Group:
    __slots__ = ("backend", "comm")

    def __init__(self, backend, comm):
        self.backend, self.comm = backend, comm


_DEFAULT = None


def is_available():
    """Always true: the default backend (MPI) is checked when the group is created."""
    return True


def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1,
                       rank=-1, store=None, group_name="", pg_options=None):
    """Create the default process group over every process of the job: `backend="mpi"`
    (CPU tensors, mpi4py) or `"nccl"` (CUDA tensors, CuPy's NCCL, one GPU per process).

    Rank and size come from the launcher; world_size/rank, when given, must agree with it.
    init_method/store are accepted for torch compatibility and unused (MPI rendezvous)."""
    global _DEFAULT
    if _DEFAULT is not None:
        raise RuntimeError("trying to initialize the default process group twice!")
    backend = "mpi" if backend is None else str(backend).lower()
    if backend not in ("mpi", "nccl"):
        raise ValueError(f"Invalid backend: '{backend}'; functrans offers \"mpi\" (CPU) and "
                         "\"nccl\" (CUDA)")
    world = mpi.world()
    for name, given, actual in (("world_size", world_size, world.size),
                                ("rank", rank, world.rank)):
        if given not in (-1, None) and given != actual:
            raise ValueError(f"init_process_group: {name}={given} but the launcher started "
                             f"this process with {name} {actual}")
    comm = nccl.NcclCommunicator(world) if backend == "nccl" else world
    _DEFAULT = _Group(backend, comm)


def is_initialized():
    return _DEFAULT is not None


def _group(group=None):
    if group is not None and group is not _DEFAULT:
        raise NotImplementedError("functrans.distributed supports the default group only; "
                                  "pass group=None")
    if _DEFAULT is None:
        raise RuntimeError(NOT_INITIALIZED)
    return _DEFAULT


def default_communicator():
    """The default group's communicator (backends.mpi / nccl), for DistributedDataParallel."""
    return _group().comm


def get_rank(group=None):
    return _group(group).comm.rank


def get_world_size(group=None):
    return _group(group).comm.size


def get_backend(group=None):
    return _group(group).backend


def destroy_process_group(group=None):
    """Forget the default group (MPI itself stays initialised until the process exits)."""
    global _DEFAULT
    _group(group)
    _DEFAULT = None


class Work:
    """What an async_op=True call returns: `wait()` completes it (torch's Work)."""

    def __init__(self, finish=None):
        self._finish = finish

    def wait(self, timeout=None):
        if self._finish is not None:
            f, self._finish = self._finish, None
            f()
        return True

    def is_completed(self):
        return self._finish is None


def _check_tensor(name, t):
    if not isinstance(t, Tensor):
        raise TypeError(f"{name}: expected a Tensor, got {type(t).__name__}")
    return t


def _is_avg(name, op, t):
    """Whether op is AVG; a TypeError for AVG of integers or booleans (an average of them
    is not one: the division would truncate silently), in torch's words, on every rank."""
    if op != ReduceOp.AVG:
        return False
    kind = t._data.dtype.kind
    if kind in "biu":
        what = "boolean" if kind == "b" else "integer"
        raise TypeError(f"Cannot use ReduceOp.AVG with {what} inputs ({name} of a "
                        f"{t._data.dtype.name} tensor); convert it with .float(), or use "
                        "ReduceOp.SUM and divide")
    return True


def _write(t, value, op):
    """Store value into t's storage in place (as torch's collectives) and bump its version."""
    t._data[...] = value
    t._bump(op)


def barrier(group=None, async_op=False, device_ids=None):
    _group(group).comm.barrier()
    return Work() if async_op else None


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce the tensor across every rank, in place (every rank gets the result)."""
    _check_tensor("all_reduce", tensor)
    comm = _group(group).comm
    avg = _is_avg("all_reduce", op, tensor)
    data = tensor._data
    req = comm.iallreduce(data, "sum" if avg else op)

    def finish():
        res = req.wait()
        _write(tensor, res / comm.size if avg else res, "all_reduce")

    if async_op:
        return Work(finish)
    finish()
    return None


def broadcast(tensor, src, group=None, async_op=False):
    """Every rank's tensor gets rank `src`'s values, in place."""
    _check_tensor("broadcast", tensor)
    _write(tensor, _group(group).comm.broadcast(tensor._data, root=src), "broadcast")
    return Work() if async_op else None


def all_gather(tensor_list, tensor, group=None, async_op=False):
    """tensor_list[r] gets rank r's tensor, in place (one tensor per rank, same shape)."""
    _check_tensor("all_gather", tensor)
    comm = _group(group).comm
    if len(tensor_list) != comm.size:
        raise ValueError(f"all_gather: tensor_list has {len(tensor_list)} tensors; it needs "
                         f"one per rank ({comm.size})")
    gathered = comm.allgather(tensor._data)
    for out, g in zip(tensor_list, gathered):
        _write(_check_tensor("all_gather", out), g, "all_gather")
    return Work() if async_op else None


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
    """output (in place) = the reduction over ranks of every rank's input_list[rank]."""
    _check_tensor("reduce_scatter", output)
    comm = _group(group).comm
    if len(input_list) != comm.size:
        raise ValueError(f"reduce_scatter: input_list has {len(input_list)} tensors; it needs "
                         f"one per rank ({comm.size})")
    stacked = array_module(output._data).stack(
        [_check_tensor("reduce_scatter", t)._data for t in input_list])
    avg = _is_avg("reduce_scatter", op, output)
    res = comm.reduce_scatter(stacked, "sum" if avg else op)[0]
    _write(output, res / comm.size if avg else res, "reduce_scatter")
    return Work() if async_op else None
