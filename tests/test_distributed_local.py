"""The single-process parts of data parallelism: DistributedSampler's sharding (torch's
semantics, worked by hand), the engine's end-of-backward callbacks, the errors before
init_process_group, and the launcher's command line."""
from __future__ import annotations

import os
import sys
import time

import numpy as np
import pytest

import functrans as ft
import functrans.distributed as dist
from functrans.distributed import run
from functrans.utils.data.distributed import DistributedSampler
from mpi_jobs import needs_mpi


def _shards(n, replicas, **kw):
    return [list(DistributedSampler(range(n), num_replicas=replicas, rank=r, **kw))
            for r in range(replicas)]


def test_sampler_pads_by_repeating_the_start_and_strides():
    assert _shards(10, 3, shuffle=False) == [[0, 3, 6, 9], [1, 4, 7, 0], [2, 5, 8, 1]]
    assert _shards(10, 3, shuffle=False, drop_last=True) == [[0, 3, 6], [1, 4, 7], [2, 5, 8]]
    assert _shards(2, 5, shuffle=False) == [[0], [1], [0], [1], [0]]   # padding > len
    assert len(DistributedSampler(range(10), 3, 0)) == 4
    assert len(DistributedSampler(range(10), 3, 0, drop_last=True)) == 3


def test_sampler_shuffles_by_seed_and_epoch():
    s = _shards(11, 2, seed=3)
    flat = sorted(s[0] + s[1])
    assert flat == sorted(list(range(11)) + [s[0][0]])      # one permutation, padded
    assert s == _shards(11, 2, seed=3)                        # every rank agrees
    a = DistributedSampler(range(50), 2, 0, seed=3)
    first = list(a)
    a.set_epoch(1)
    assert list(a) != first and sorted(list(a)) != first
    a.set_epoch(0)
    assert list(a) == first


def test_sampler_checks_rank_and_needs_a_group_without_explicit_arguments():
    with pytest.raises(ValueError, match=r"Invalid rank 2, rank should be in the interval "
                                         r"\[0, 1\]"):
        DistributedSampler(range(4), num_replicas=2, rank=2)
    with pytest.raises(RuntimeError, match="init_process_group"):
        DistributedSampler(range(4))


def test_sampler_feeds_a_dataloader():
    ds = ft.utils.data.TensorDataset(ft.arange(10.0))
    dl = ft.utils.data.DataLoader(ds, batch_size=2,
                                  sampler=DistributedSampler(ds, 2, 1, shuffle=False))
    assert [b[0].tolist() for b in dl] == [[1.0, 3.0], [5.0, 7.0], [9.0]]


def test_queue_callback_runs_at_the_end_of_backward():
    w = ft.tensor([1.0, 2.0], requires_grad=True)
    seen = []

    def hook(p):
        seen.append(("hook", p.grad.tolist()))
        ft.autograd.Variable._execution_engine.queue_callback(
            lambda: seen.append(("callback", p.grad.tolist())))

    w.register_post_accumulate_grad_hook(hook)
    (w * w).sum().backward()
    assert seen == [("hook", [2.0, 4.0]), ("callback", [2.0, 4.0])]
    with pytest.raises(RuntimeError, match="Final callbacks can only be installed during "
                                           "backward pass."):
        ft.autograd.Variable._execution_engine.queue_callback(lambda: None)


def test_queue_callback_is_dropped_when_backward_raises():
    w = ft.tensor([1.0], requires_grad=True)
    ran = []

    def hook(p):
        ft.autograd.Variable._execution_engine.queue_callback(lambda: ran.append(1))
        raise ValueError("hook failed")

    w.register_post_accumulate_grad_hook(hook)
    with pytest.raises(ValueError, match="hook failed"):
        (w * 2).sum().backward()
    assert ran == []
    ft.autograd.grad((w * 3).sum(), w)     # the queue is not left behind


def test_collectives_and_ddp_before_init_say_what_to_call():
    assert not dist.is_initialized()
    msg = 'ft.distributed.init_process_group\\(backend="mpi"\\)'
    for call in (lambda: dist.all_reduce(ft.zeros(2)), dist.get_rank, dist.barrier,
                 lambda: ft.nn.parallel.DistributedDataParallel(ft.nn.Linear(2, 2))):
        with pytest.raises(RuntimeError, match=msg):
            call()
    with pytest.raises(ValueError, match="Invalid backend: 'gloo'"):
        dist.init_process_group(backend="gloo")


def test_one_process_group_without_a_launcher():
    """Outside mpiexec the group is a world of one: every collective is the identity."""
    dist.init_process_group(backend="mpi")
    try:
        with pytest.raises(RuntimeError, match="twice"):
            dist.init_process_group(backend="mpi")
        assert (dist.get_rank(), dist.get_world_size()) == (0, 1)
        t = ft.tensor([1.0, 2.0])
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        assert t.tolist() == [1.0, 2.0]
        for x in (ft.tensor([1, 3]), ft.tensor([True, False])):    # torch refuses them
            what = "boolean" if x.dtype == ft.bool else "integer"
            with pytest.raises(TypeError, match=f"Cannot use ReduceOp.AVG with {what} inputs "
                               r"\(all_reduce of a (int64|bool) tensor\)"):
                dist.all_reduce(x, op=dist.ReduceOp.AVG)
            with pytest.raises(TypeError, match=f"Cannot use ReduceOp.AVG with {what} inputs "
                               r"\(reduce_scatter"):
                dist.reduce_scatter(x[:1].clone(), [x[:1]], op=dist.ReduceOp.AVG)
        assert x.tolist() == [True, False]
        m = ft.nn.Linear(3, 1).double()
        ddp = ft.nn.parallel.DistributedDataParallel(m)
        x = ft.tensor(np.arange(6.0).reshape(2, 3))
        ddp(x).sum().backward()
        np.testing.assert_allclose(m.weight.grad.numpy(), [[3.0, 5.0, 7.0]])
        assert list(ddp.state_dict()) == ["module.weight", "module.bias"]
    finally:
        dist.destroy_process_group()


@needs_mpi
def test_launcher_command_binds_local_jobs_to_loopback():
    cmd, env = run.command(2, [sys.executable, "x.py"])
    assert cmd[-3:] == ["2", sys.executable, "x.py"] and cmd[-4] == "-n"
    assert cmd[0].endswith("mpiexec.gforker") or cmd[1:5] == ["-launcher", "fork", "-iface",
                                                               "lo"]
    assert env["UCX_TLS"] == "self,sm" and env["FI_TCP_IFACE"] == "lo"
    cmd, env = run.command(4, ["prog"], hosts="a,b")
    assert cmd[1:3] == ["-hosts", "a,b"] and "UCX_TLS" not in env
    with pytest.raises(SystemExit):
        run.main(["-n", "0", "x.py"])


@pytest.mark.skipif(not os.path.isdir(run.SHM), reason="no /dev/shm")
def test_a_failed_jobs_segment_still_mapped_for_a_moment_is_removed(monkeypatch):
    """The launcher removes a failed job's abandoned MPICH segment even when a rank being
    torn down still has it open as the job's exit code comes; a segment held longer than
    the wait (another job's, in use) is left alone."""
    import subprocess
    name = f"mpich_shm_fttest{os.getpid()}"
    path = os.path.join(run.SHM, name)
    hold = "import sys, time; f = open(sys.argv[1]); time.sleep(float(sys.argv[2]))"
    try:
        with open(path, "wb") as f:
            f.write(b"\0" * 64)
        briefly = subprocess.Popen([sys.executable, "-c", hold, path, "0.5"])
        time.sleep(0.2)                          # (open by now)
        assert path in run._in_use({path})
        run._remove_abandoned_segments({name})
        briefly.wait()
        assert not os.path.exists(path)
        with open(path, "wb") as f:
            f.write(b"\0" * 64)
        held = subprocess.Popen([sys.executable, "-c", hold, path, "5"])
        time.sleep(0.2)
        run._remove_abandoned_segments({name}, wait_s=0.3)
        assert os.path.exists(path)             # in use past the wait: not touched
        held.kill()
        held.wait()
    finally:
        if os.path.exists(path):
            os.unlink(path)
