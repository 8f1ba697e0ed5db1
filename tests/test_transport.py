"""The collectives' transport in one process (backends/mpi.py's one-process world, and
the NCCL module's import safety); the multi-process behaviour is in
test_collectives_mpi.py."""
from __future__ import annotations

import numpy as np
import pytest

from functrans.backends import mpi, nccl


def test_one_process_world_is_local():
    w = mpi.SingleProcess()
    x = np.arange(6.0).reshape(3, 2)
    assert (w.rank, w.size) == (0, 1)
    for op in mpi.OPS:
        np.testing.assert_array_equal(w.allreduce(x, op), x)
    y = x.copy()
    assert w.iallreduce(y, "sum", out=y).wait() is y
    assert w.allgather(x).shape == (1, 3, 2)
    np.testing.assert_array_equal(w.reduce_scatter(x, "sum"), x)
    np.testing.assert_array_equal(w.ppermute(x, [(0, 0)]), x)
    np.testing.assert_array_equal(w.ppermute(x, []), np.zeros_like(x))
    np.testing.assert_array_equal(w.broadcast(x, 0), x)
    w.barrier()
    with pytest.raises(ValueError, match="op must be one of"):
        w.allreduce(x, "mean")


def test_world_without_launcher_is_one_process(monkeypatch):
    for v in ("PMI_SIZE", "PMI_RANK", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK"):
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setattr(mpi, "_WORLD", None)
    assert isinstance(mpi.world(), mpi.SingleProcess)


def test_missing_mpi4py_names_the_extra(monkeypatch):
    def missing(name):
        raise ImportError(f"No module named {name!r}")
    monkeypatch.setattr(mpi.importlib, "import_module", missing)
    with pytest.raises(mpi.CollectiveError, match=r"pip install functrans\[mpi\]"):
        mpi.mpi_module()


def test_timeout_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("FUNCTRANS_COLLECTIVE_TIMEOUT", "2.5")
    assert mpi.collective_timeout() == 2.5
    monkeypatch.delenv("FUNCTRANS_COLLECTIVE_TIMEOUT")
    assert mpi.collective_timeout() == 300


@pytest.mark.parametrize("value", ["nan", "-5", "0", "inf", "five", "1e400"])
def test_a_malformed_timeout_is_refused_naming_the_variable(monkeypatch, value):
    """nan never expired (a collective waited forever); each is refused before any wait."""
    monkeypatch.setenv("FUNCTRANS_COLLECTIVE_TIMEOUT", value)
    msg = r"\$FUNCTRANS_COLLECTIVE_TIMEOUT=.* is not a number of seconds > 0"
    with pytest.raises(ValueError, match=msg):
        mpi.collective_timeout()
    monkeypatch.setattr(mpi, "_WORLD", None)         # the world is not made with it
    with pytest.raises(ValueError, match=msg):
        mpi.world()
    assert mpi._WORLD is None


def test_nccl_module_imports_without_cupy():
    assert nccl.NcclCommunicator.__doc__
