"""Data-parallel workload (issue 14): weak scaling of the facade MLP 784-512-512-10 SGD
training step, batch 128 per process, one BLAS/OpenMP thread per process, one process
vs two under DistributedDataParallel (and two under its message path, as on several
machines, for comparison), each job launched on loopback like
`python -m functrans.distributed.run` (bench/ddp_job.py is one process of it).

Notes (medians over ROUNDS rounds of the four jobs, each ratio within its round):
efficiency = t(1 process) / t(2 processes, DDP) (issue target >= 0.85), the ceiling
of two processes that do not communicate at all, and the time per step spent in DDP's
gradient reduction (on one machine the shared-memory reduction, copies in included; with
messages the launches and the final wait: in the step, where it includes waiting for the
other rank, and alone after a barrier) against a raw mpi4py Allreduce of the same bytes
after a barrier (target <= 1.2x, for the latter). The timed variants are the in-process
step (facade) against its hand-written NumPy floor, so the table shows the
single-process cost on this machine at the same moment.
"""
from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

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


ROUNDS = 5


@workload("ddp_weak_scaling", issue=14, rtol=2e-4, atol=1e-6, settings={"budget_s": 6.0},
          description="MLP 784-512-512-10 SGD step, batch 128 per process, 1 thread each: "
                      "1 process vs 2 under DistributedDataParallel (notes: efficiency, "
                      "gradient all-reduce vs raw mpi4py Allreduce)")
def ddp_weak_scaling():
    """ROUNDS rounds of four jobs back to back (one process, two that do not communicate,
    two under DDP, two under DDP's message path); each ratio is taken within a round, then
    the median over the rounds: the machine's load drifts between jobs more than the
    figures differ."""
    rounds = []
    for _ in range(ROUNDS):
        one, ceiling, ddp = _job(1, "alone"), _job(2, "alone"), _job(2, "ddp")
        messages = _job(2, "ddp-messages")
        t1, t2 = _slowest(one, "step_s"), _slowest(ddp, "step_s")
        synced, raw = _slowest(ddp, "synced_reduce_s"), _slowest(ddp, "raw_allreduce_s")
        rounds.append({"t1": t1, "t2": t2, "efficiency": t1 / t2,
                       "ceiling": t1 / _slowest(ceiling, "step_s"),
                       "messages": t1 / _slowest(messages, "step_s"),
                       "messages_ratio": _slowest(messages, "synced_reduce_s") / raw,
                       "in_step": _slowest(ddp, "reduce_s"), "synced": synced, "raw": raw,
                       "ratio": synced / raw})

    def med(key, scale=1.0, digits=3):
        return round(float(np.median([r[key] for r in rounds])) * scale, digits)
    notes = {"t1_ms": med("t1", 1e3, 2), "t2_ddp_ms": med("t2", 1e3, 2),
             "efficiency": med("efficiency"), "efficiency_target": 0.85,
             "efficiency_rounds": [round(r["efficiency"], 3) for r in rounds],
             "ceiling_no_communication": med("ceiling"),
             "efficiency_messages": med("messages"),
             "ddp_reduction_in_step_ms": med("in_step", 1e3),
             "ddp_reduction_ms": med("synced", 1e3),
             "raw_mpi4py_allreduce_ms": med("raw", 1e3),
             "allreduce_ratio": med("ratio", digits=2), "allreduce_ratio_target": 1.2,
             "allreduce_ratio_messages": med("messages_ratio", digits=2),
             "allreduce_floats": ddp[0]["allreduce_floats"], "buckets": ddp[0]["buckets"]}
    return Case(facade_mlp_train_step(), notes=notes)
