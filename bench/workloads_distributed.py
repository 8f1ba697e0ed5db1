"""Data-parallel workload (issue 14): weak scaling of the facade MLP 784-512-512-10 SGD
training step, batch 128 per process, one BLAS/OpenMP thread per process, one process
vs two under DistributedDataParallel, each job launched on loopback like
`python -m functrans.distributed.run` (bench/ddp_job.py is one process of it).

Notes: efficiency = t(1 process) / t(2 processes, DDP) (issue target >= 0.85), the ceiling
of two processes that do not communicate at all, and the time per step spent in DDP's
gradient all-reduce (launches and the final wait, copies included: in the step, where it
includes waiting for the other rank, and alone after a barrier) against a raw mpi4py
Allreduce of the same bytes after a barrier (target <= 1.2x, for the latter). The timed variants are the
in-process step (facade) against its hand-written NumPy floor, so the table shows the
single-process cost on this machine at the same moment.
"""
from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import tempfile

from functrans.distributed.run import command, find_mpiexec

from .harness import Case, workload
from .workloads_facade_nn import facade_mlp_train_step

importlib.import_module("mpi4py")     # without MPI the harness skips this module, saying so
find_mpiexec()
JOB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ddp_job.py")
STEPS = 60
ONE_THREAD = {k: "1" for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}


def _job(n, mode):
    """Per-rank results of an n-process job of bench/ddp_job.py."""
    with tempfile.TemporaryDirectory() as out:
        cmd, env = command(n, [sys.executable, JOB, mode, str(STEPS), out])
        subprocess.run(cmd, env={**os.environ, **env, **ONE_THREAD}, check=True,
                       timeout=600, stdout=subprocess.DEVNULL)
        res = []
        for r in range(n):
            with open(os.path.join(out, f"rank{r}.json")) as f:
                res.append(json.load(f))
        return res


def _slowest(res, key):
    return max(r[key] for r in res)


@workload("ddp_weak_scaling", issue=14, rtol=2e-4, atol=1e-6, settings={"budget_s": 6.0},
          description="MLP 784-512-512-10 SGD step, batch 128 per process, 1 thread each: "
                      "1 process vs 2 under DistributedDataParallel (notes: efficiency, "
                      "gradient all-reduce vs raw mpi4py Allreduce)")
def ddp_weak_scaling():
    one = _job(1, "alone")
    ceiling = _job(2, "alone")
    ddp = _job(2, "ddp")
    t1, t2 = _slowest(one, "step_s"), _slowest(ddp, "step_s")
    reduce_s, raw_s = _slowest(ddp, "reduce_s"), _slowest(ddp, "raw_allreduce_s")
    synced_s = _slowest(ddp, "synced_reduce_s")
    notes = {"t1_ms": round(t1 * 1e3, 2), "t2_ddp_ms": round(t2 * 1e3, 2),
             "efficiency": round(t1 / t2, 3), "efficiency_target": 0.85,
             "ceiling_no_communication": round(t1 / _slowest(ceiling, "step_s"), 3),
             "ddp_reduction_in_step_ms": round(reduce_s * 1e3, 3),
             "ddp_reduction_ms": round(synced_s * 1e3, 3),
             "raw_mpi4py_allreduce_ms": round(raw_s * 1e3, 3),
             "allreduce_ratio": round(synced_s / raw_s, 2), "allreduce_ratio_target": 1.2,
             "allreduce_floats": ddp[0]["allreduce_floats"], "buckets": ddp[0]["buckets"]}
    return Case(facade_mlp_train_step(), notes=notes)
