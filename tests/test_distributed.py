"""ft.distributed, the launcher and DistributedDataParallel in 2-process MPI jobs
(tests/mpi_jobs.py launches them on loopback and shared memory only)."""
from __future__ import annotations

from mpi_jobs import needs_mpi, run_job

pytestmark = needs_mpi


def test_fixture_collects_each_rank(tmp_path):
    res = run_job(tmp_path, """
        from mpi4py import MPI
        from mpi_jobs import report
        c = MPI.COMM_WORLD
        report({"rank": c.Get_rank(), "size": c.Get_size(), "sum": c.allreduce(c.Get_rank())})
    """)
    assert res == [{"rank": r, "size": 2, "sum": 1} for r in range(2)]
