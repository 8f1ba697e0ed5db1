"""Running small multi-process MPI jobs from pytest: a script is written to a temporary
folder, launched on this machine as `python -m functrans.distributed.run` launches
single-machine jobs (MPICH's fork-only process manager, loopback and shared memory only:
`functrans.distributed.run.command`), under a subprocess timeout, and each rank's results
come back as JSON.

In the job, `from mpi_jobs import report` and call `report(obj)` (any JSON-able object;
NumPy arrays become lists) once per rank; `run_job` returns the list of reported objects,
indexed by rank. Tests that use it take the `mpi` marker's skip: `needs_mpi`.
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from functrans.distributed.run import command, find_mpiexec

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)



def _missing():
    if importlib.util.find_spec("mpi4py") is None:
        return "mpi4py is not installed (pip install -e '.[mpi]')"
    try:
        find_mpiexec()
    except RuntimeError:
        return "no mpiexec found (pip install -e '.[mpi]' installs MPICH's)"
    return None


MISSING = _missing()
needs_mpi = pytest.mark.skipif(MISSING is not None, reason=MISSING or "")


def report(obj):
    """Called once in each rank of a job: store this rank's results for run_job."""
    from mpi4py import MPI
    rank = MPI.COMM_WORLD.Get_rank()
    path = os.path.join(os.environ["FT_MPI_JOB_OUT"], f"rank{rank}.json")
    with open(path + ".tmp", "w") as f:
        json.dump(obj, f, default=_jsonable)
    os.replace(path + ".tmp", path)


def _jsonable(o):
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, np.generic):
        return o.item()
    if hasattr(o, "numpy"):
        return o.detach().numpy().tolist()
    raise TypeError(f"cannot report a {type(o).__name__}")


class JobFailed(AssertionError):
    """The job exited with an error or timed out; carries its output."""


def launch(tmp_path, source, n=2, env=None, launcher=None, args=()):
    """Start the job (returns the Popen, the output folder and the command); for tests that
    watch a running job. `launcher`: the command before the script (default: the one
    `python -m functrans.distributed.run` uses on one machine)."""
    script = os.path.join(str(tmp_path), "job.py")
    with open(script, "w") as f:
        f.write(textwrap.dedent(source))
    out = os.path.join(str(tmp_path), "out")
    os.makedirs(out, exist_ok=True)
    cmd, e = command(n, [sys.executable, script, *args])
    if launcher is not None:
        cmd = [*launcher, script, *args]
    e = {**os.environ, **e}
    e.update({"FT_MPI_JOB_OUT": out, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
              "MKL_NUM_THREADS": "1",
              "PYTHONPATH": os.pathsep.join([ROOT, HERE, e.get("PYTHONPATH", "")])})
    e.update(env or {})
    proc = subprocess.Popen(cmd, cwd=ROOT, env=e, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    return proc, out, cmd


def run_job(tmp_path, source, n=2, timeout=90, env=None, expect_fail=False, launcher=None,
            args=()):
    """Run `source` as an n-process job; the ranks' reported results, by rank.

    With expect_fail=True the job must exit non-zero; returns (results so far, output)."""
    proc, out, cmd = launch(tmp_path, source, n, env, launcher, args)
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        output, _ = proc.communicate()
        raise JobFailed(f"{' '.join(cmd)} did not finish in {timeout} s:\n{output}")
    results = []
    for r in range(n):
        p = os.path.join(out, f"rank{r}.json")
        if os.path.exists(p):
            with open(p) as f:
                results.append(json.load(f))
        else:
            results.append(None)
    if expect_fail:
        if proc.returncode == 0:
            raise JobFailed(f"the job was expected to fail but exited 0:\n{output}")
        return results, output
    if proc.returncode != 0:
        raise JobFailed(f"{' '.join(cmd)} exited {proc.returncode}:\n{output}")
    missing = [r for r, x in enumerate(results) if x is None]
    if missing:
        raise JobFailed(f"ranks {missing} reported nothing:\n{output}")
    return results
