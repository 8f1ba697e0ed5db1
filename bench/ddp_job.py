"""One process of the ddp_weak_scaling workload (run by workloads_distributed.py through
`functrans.distributed.run.command`): times the facade MLP 784-512-512-10 SGD training
step, batch 128 per process, under DistributedDataParallel ("ddp"; "ddp-messages" with
its shared-memory path off, as on several machines) or without any communication
("alone"); with "ddp" also the time spent in DDP's gradient all-reduce per
step (as the step sees it: waiting for the other rank included) and alone with the ranks
in step, and a raw mpi4py Allreduce of the same bytes. Writes rank<r>.json into the folder
given as the last argument.

    python bench/ddp_job.py MODE STEPS OUT_DIR
"""
import json
import os
import sys
import time

import numpy as np

import functrans as ft
import functrans.distributed as dist
from functrans.nn.parallel import DistributedDataParallel as DDP
from functrans.nn.parallel import distributed as D

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench.workloads_facade_nn import (LR, MOMENTUM, _mlp_data, _mlp_model,  # noqa: E402
                                       mlp_step_facade)


def _timed(obj, name, acc):
    """Wrap obj.name to add its duration to acc[0]."""
    fn = getattr(obj, name)

    def wrapper(*a, **k):
        t0 = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            acc[0] += time.perf_counter() - t0
    setattr(obj, name, wrapper)


def _reduce_all(net):
    """What DDP does in a backward once every gradient is there: every bucket complete,
    then the end-of-backward reduction (launches, flags and call counts, waits, averages;
    or the shared-memory reduction)."""
    for b in net._bucket_list:
        b.reset()
        b.ready = [True] * len(b.params)
        b.pending = 0
    net._launched = 0
    net._finish()


def main(mode, steps, out):
    D.SHARED_MEMORY = mode != "ddp-messages"
    dist.init_process_group(backend="mpi")
    rank = dist.get_rank()
    x, y = _mlp_data(seed=rank)
    tx, ty = ft.tensor(x), ft.tensor(y)
    model = _mlp_model()
    net = DDP(model) if mode.startswith("ddp") else model
    opt = ft.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    reduce_s = [0.0]
    if mode.startswith("ddp"):
        _timed(net, "_launch", reduce_s)
        _timed(net, "_finish", reduce_s)
    for _ in range(10):
        mlp_step_facade(net, opt, tx, ty)
    dist.barrier()
    times, reduce = [], []
    for _ in range(steps):
        reduce_s[0] = 0.0
        t0 = time.perf_counter()
        mlp_step_facade(net, opt, tx, ty)
        times.append(time.perf_counter() - t0)
        reduce.append(reduce_s[0])
    res = {"step_s": float(np.median(times)), "reduce_s": float(np.median(reduce))}
    if mode.startswith("ddp"):
        from mpi4py import MPI
        n = sum(b.size for b in net._bucket_list)
        buf = np.ones(n, np.float32)
        raw, synced = [], []
        for _ in range(steps):
            MPI.COMM_WORLD.Barrier()
            t0 = time.perf_counter()
            MPI.COMM_WORLD.Allreduce(MPI.IN_PLACE, buf)
            raw.append(time.perf_counter() - t0)
            MPI.COMM_WORLD.Barrier()        # DDP's reduction alone, the ranks in step
            t0 = time.perf_counter()
            _reduce_all(net)
            synced.append(time.perf_counter() - t0)
        res.update(raw_allreduce_s=float(np.median(raw)),
                   synced_reduce_s=float(np.median(synced)), allreduce_floats=n,
                   buckets=len(net._bucket_list))
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump(res, f)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
