"""NCCL transport (cupy.cuda.nccl): the methods of `backends.mpi.Communicator` on CuPy
arrays, one GPU per process.

    comm = nccl.NcclCommunicator(mpi.world())   # one NCCL rank per MPI rank, this GPU
    y = comm.allreduce(x_cupy, "sum")

MPI bootstraps it (rank 0's unique id is broadcast) and checks the arguments of every
collective (the same agreement record and error as MPI's); the data then goes through
NCCL on the current CuPy stream, and every wait polls a CUDA event with the
`FUNCTRANS_COLLECTIVE_TIMEOUT` deadline. Importing this module needs nothing; creating a
communicator needs CuPy with NCCL. It has not run on a GPU yet.
"""
from __future__ import annotations

import importlib
import time

from ..core.devices import cupy_module
from .mpi import OPS, CollectiveError, _check_op, collective_timeout

_DTYPES = {"float16": "NCCL_FLOAT16", "float32": "NCCL_FLOAT32", "float64": "NCCL_FLOAT64",
           "int8": "NCCL_INT8", "uint8": "NCCL_UINT8", "int32": "NCCL_INT32",
           "uint32": "NCCL_UINT32", "int64": "NCCL_INT64", "uint64": "NCCL_UINT64"}


def nccl_module():
    """cupy.cuda.nccl, or a CollectiveError saying what to install."""
    cupy_module()
    try:
        return importlib.import_module("cupy.cuda.nccl")
    except ImportError as e:
        raise CollectiveError(f"the NCCL backend needs CuPy built with NCCL ({e}); "
                              "install cupy-cuda12x and nvidia-nccl-cu12") from e


class NcclCommunicator:
    """Collectives over NCCL between the processes of an MPI communicator."""

    def __init__(self, mpi_comm):
        self.nccl = nccl_module()
        self.cp = cupy_module()
        self.mpi = mpi_comm
        self.rank, self.size = mpi_comm.rank, mpi_comm.size
        uid = self.nccl.get_unique_id() if self.rank == 0 else None
        uid = self.mpi.comm.bcast(uid, root=0)
        self.comm = self.nccl.NcclCommunicator(self.size, uid, self.rank)
        self._ops = {op: getattr(self.nccl, f"NCCL_{op.upper()}") for op in OPS}

    def _dtype(self, name, x):
        key = _DTYPES.get(x.dtype.name)
        if key is None:
            raise TypeError(f"{name}: NCCL has no type for dtype {x.dtype.name}")
        return getattr(self.nccl, key)

    def _agree(self, name, x, extra=""):
        self.mpi._agree(name, x, extra)

    def _wait(self, name):
        """Poll an event recorded after the enqueued NCCL calls, with the deadline."""
        event = self.cp.cuda.Event(disable_timing=True)
        event.record()
        deadline = time.perf_counter() + collective_timeout()
        while not event.done:
            if time.perf_counter() > deadline:
                raise CollectiveError(
                    f"{name}: timed out after {collective_timeout():g} s on rank {self.rank}"
                    f" of {self.size}: the NCCL data exchange did not complete")
            time.sleep(1e-5)

    def _stream(self):
        return self.cp.cuda.get_current_stream().ptr

    def _start_allreduce(self, name, x, op, out=None, agree=True):
        _check_op(name, op)
        x = self.cp.asarray(x, order="C")
        if agree:
            self._agree(name, x, op)
        if out is None:
            out = self.cp.empty_like(x)
        self.comm.allReduce(x.data.ptr, out.data.ptr, x.size, self._dtype(name, x),
                            self._ops[op], self._stream())
        return out

    def allreduce(self, x, op="sum"):
        out = self._start_allreduce("allreduce", x, op)
        self._wait("allreduce")
        return out

    def iallreduce(self, x, op="sum", out=None, agree=True):
        """out=x: in place; agree=False: no agreement round (as backends.mpi)."""
        return _NcclRequest(self, "iallreduce",
                            self._start_allreduce("iallreduce", x, op, out, agree))

    def allgather(self, x):
        x = self.cp.asarray(x, order="C")
        self._agree("allgather", x)
        out = self.cp.empty((self.size,) + x.shape, x.dtype)
        self.comm.allGather(x.data.ptr, out.data.ptr, x.size, self._dtype("allgather", x),
                            self._stream())
        self._wait("allgather")
        return out

    def reduce_scatter(self, x, op="sum"):
        _check_op("reduce_scatter", op)
        x = self.cp.asarray(x, order="C")
        if x.ndim == 0 or x.shape[0] % self.size:
            raise ValueError(f"reduce_scatter: the leading axis of shape {x.shape} must "
                             f"split evenly over {self.size} ranks")
        self._agree("reduce_scatter", x, op)
        out = self.cp.empty((x.shape[0] // self.size,) + x.shape[1:], x.dtype)
        self.comm.reduceScatter(x.data.ptr, out.data.ptr, out.size,
                                self._dtype("reduce_scatter", x), self._ops[op],
                                self._stream())
        self._wait("reduce_scatter")
        return out

    def ppermute(self, x, perm):
        perm = [(int(s), int(d)) for s, d in perm]
        x = self.cp.asarray(x, order="C")
        self._agree("ppermute", x, str(perm))
        out = self.cp.zeros_like(x)
        dtype, stream = self._dtype("ppermute", x), self._stream()
        self.nccl.groupStart()
        for s, d in perm:
            if s == self.rank:
                self.comm.send(x.data.ptr, x.size, dtype, d, stream)
            if d == self.rank:
                self.comm.recv(out.data.ptr, out.size, dtype, s, stream)
        self.nccl.groupEnd()
        self._wait("ppermute")
        return out

    def broadcast(self, x, root=0):
        out = self.cp.array(x, copy=True, order="C")
        self._agree("broadcast", out, f"root {root}")
        self.comm.broadcast(out.data.ptr, out.data.ptr, out.size,
                            self._dtype("broadcast", out), root, self._stream())
        self._wait("broadcast")
        return out

    def barrier(self):
        self.mpi.barrier()


class _NcclRequest:
    """`iallreduce`'s request: `wait()` waits for the stream's NCCL work, with the deadline."""

    def __init__(self, comm, name, result):
        self._comm, self._name, self._result, self._done = comm, name, result, False

    def wait(self):
        if not self._done:
            self._comm._wait(self._name)
            self._done = True
        return self._result
