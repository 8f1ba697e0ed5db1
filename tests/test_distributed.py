"""ft.distributed, the launcher and DistributedDataParallel in 2-process MPI jobs
(tests/mpi_jobs.py launches them on loopback and shared memory only). Each job batches
several checks; the references are single-process computations on the whole batch, in
float64, done inside the job by every rank."""
from __future__ import annotations

import os
import signal
import sys
import time

import pytest

from mpi_jobs import launch, needs_mpi, run_job

from functrans.distributed import run
from functrans.distributed.run import find_mpiexec

pytestmark = needs_mpi

LAUNCHER = [sys.executable, "-m", "functrans.distributed.run", "-n", "2"]


def test_fixture_collects_each_rank(tmp_path):
    res = run_job(tmp_path, """
        from mpi4py import MPI
        from mpi_jobs import report
        c = MPI.COMM_WORLD
        report({"rank": c.Get_rank(), "size": c.Get_size(), "sum": c.allreduce(c.Get_rank())})
    """)
    assert res == [{"rank": r, "size": 2, "sum": 1} for r in range(2)]


def test_process_group_calls(tmp_path):
    res = run_job(tmp_path, """
        import functrans as ft
        import functrans.distributed as dist
        from mpi_jobs import report
        out = {"before": dist.is_initialized()}
        dist.init_process_group(backend="mpi")
        r, n = dist.get_rank(), dist.get_world_size()
        out.update(rank=r, size=n, init=dist.is_initialized(), backend=dist.get_backend())
        for op in ("SUM", "MAX", "MIN", "PRODUCT", "AVG"):
            t = ft.tensor([1.0, -2.0, 3.0]) * (r + 2)
            v = t._version
            assert dist.all_reduce(t, op=getattr(dist.ReduceOp, op)) is None
            out[op] = t.tolist()
            out[op + "_bumped"] = t._version > v
        t = ft.tensor([float(r)])
        w = dist.all_reduce(t, async_op=True)
        w.wait()
        out["async"] = t.tolist()
        t = ft.arange(3.0) + 10 * r
        dist.broadcast(t, src=1)
        out["broadcast"] = t.tolist()
        lst = [ft.zeros(2) for _ in range(n)]
        dist.all_gather(lst, ft.tensor([r, r + 0.5]))
        out["all_gather"] = [x.tolist() for x in lst]
        o = ft.zeros(2)
        dist.reduce_scatter(o, [ft.tensor([1.0, 2.0]) * (r + 1), ft.tensor([3.0, 4.0]) * (r + 1)])
        out["reduce_scatter"] = o.tolist()
        dist.barrier()
        try:                    # refused on every rank before any message: nothing waits
            dist.all_reduce(ft.tensor([1, 3]) + r, op=dist.ReduceOp.AVG)
        except TypeError as e:
            out["int_avg"] = str(e)
        try:
            dist.all_reduce(ft.zeros(2 + r))
        except RuntimeError as e:
            out["mismatch"] = str(e)
        dist.destroy_process_group()
        out["after"] = dist.is_initialized()
        report(out)
    """, env={"FUNCTRANS_COLLECTIVE_TIMEOUT": "30"})
    for r, o in enumerate(res):
        assert (o["rank"], o["size"], o["before"], o["init"], o["after"]) == (r, 2, False,
                                                                            True, False)
        assert o["backend"] == "mpi"
        assert o["SUM"] == [5.0, -10.0, 15.0] and o["SUM_bumped"]
        assert o["MAX"] == [3.0, -4.0, 9.0] and o["MIN"] == [2.0, -6.0, 6.0]
        assert o["PRODUCT"] == [6.0, 24.0, 54.0] and o["AVG"] == [2.5, -5.0, 7.5]
        assert o["int_avg"].startswith("Cannot use ReduceOp.AVG with integer inputs")
        assert o["async"] == [1.0]
        assert o["broadcast"] == [10.0, 11.0, 12.0]
        assert o["all_gather"] == [[0.0, 0.5], [1.0, 1.5]]
        assert o["reduce_scatter"] == [[3.0, 6.0], [9.0, 12.0]][r]
        # the same clear error on every rank, naming both ranks' shapes
        assert "rank 0" in o["mismatch"] and "(2,)" in o["mismatch"] and "(3,)" in o["mismatch"]


DDP_JOB = """
import numpy as np
import functrans as ft
import functrans.distributed as dist
from functrans.nn.parallel import DistributedDataParallel as DDP
from functrans.nn.parallel import distributed as D
from mpi_jobs import report

D.SHARED_MEMORY = SHM
dist.init_process_group(backend="mpi")
r, n = dist.get_rank(), dist.get_world_size()
out = {}


def make(seed):
    ft.manual_seed(seed)
    return ft.nn.Sequential(ft.nn.Linear(6, 16), ft.nn.Tanh(), ft.nn.Linear(16, 16),
                            ft.nn.Tanh(), ft.nn.Linear(16, 1)).double()


def grads(m):
    return [None if p.grad is None else p.grad.detach().numpy().copy() for p in m.parameters()]


def err(got, want):
    if any((g is None) != (w is None) for g, w in zip(got, want)):
        return float("inf")
    return max(float(np.max(np.abs(g - w))) if g is not None else 0.0 for g, w in zip(got, want))


rng = np.random.default_rng(0)                     # the same data on every rank
X, Y, X2 = (ft.tensor(rng.standard_normal((8, k))) for k in (6, 1, 6))
mine = slice(4 * r, 4 * r + 4)                     # this rank's half of the batch


def mse(m, x, y):
    return ((m(x) - y) ** 2).mean()


# construction broadcasts rank 0's parameters; the reference is rank 0's model
model = make(seed=100 + r)
ref = make(seed=100)
ddp = DDP(model, bucket_cap_mb=BUCKET_MB)
out["buckets"] = len(ddp._bucket_list)
out["shared"] = ddp._window is not None
out["params"] = [p.detach().numpy() for p in model.parameters()]
out["broadcast_err"] = err([p.detach().numpy() for p in model.parameters()],
                           [p.detach().numpy() for p in ref.parameters()])

# one step == one process on the concatenated batch (mean loss)
mse(ddp, X[mine], Y[mine]).backward()
mse(ref, X, Y).backward()
out["step_err"] = err(grads(model), grads(ref))

# no_sync: the first micro-batch accumulates locally, the second averages the sums
model.zero_grad(); ref.zero_grad()
with ddp.no_sync():
    mse(ddp, X[mine], Y[mine]).backward()
out["local_differs"] = err(grads(model), grads(ref)) > 1e-3 if n > 1 else True
mse(ddp, X2[mine], Y[mine]).backward()
mse(ref, X, Y).backward(); mse(ref, X2, Y).backward()
out["no_sync_err"] = err(grads(model), grads(ref))

# WGAN-GP critic step: the penalty's gradient w.r.t. the inputs is taken with
# create_graph=True inside the step; the truth is the gradient of the mean of the losses
eps = ft.tensor(np.random.default_rng(1).uniform(size=(8, 1)))


def critic_loss(D, real, fake, e, penalty_only=False):
    xh = (e * real + (1 - e) * fake).detach().requires_grad_(True)
    g, = ft.autograd.grad(D(xh).sum(), xh, create_graph=True)
    gp = ((g.pow(2).sum(1) + 1e-12).sqrt() - 1).pow(2).mean()
    return 10 * gp if penalty_only else D(fake).mean() - D(real).mean() + 10 * gp


for only in (False, True):
    model.zero_grad(); ref.zero_grad()
    critic_loss(ddp, X[mine], X2[mine], eps[mine], only).backward()
    critic_loss(ref, X, X2, eps, only).backward()
    out["gp_err" if not only else "penalty_only_err"] = err(grads(model), grads(ref))
    if only:
        out["unused_bias_grad"] = [p.grad is None for p in model.parameters()]

# backward(create_graph=True): the averaged gradients are differentiable, and the
# cross-rank sum runs in the second backward: d/dθ mean_r <ḡ, v_r> with ḡ the averaged
# gradient and v_r different on each rank
V = [ft.tensor(np.random.default_rng(2 + k).standard_normal(tuple(p.shape)))
     for k, p in enumerate(ref.parameters())]
model.zero_grad(); ref.zero_grad()
mse(ddp, X[mine], Y[mine]).backward(create_graph=True)
gbar = [p.grad for p in model.parameters()]
for p in model.parameters():
    p.grad = None
sum((g * v * (r + 1)).sum() for g, v in zip(gbar, V)).backward()
gref = ft.autograd.grad(mse(ref, X, Y), list(ref.parameters()), create_graph=True)
sum((g * v * 1.5).sum() for g, v in zip(gref, V)).backward()     # mean over ranks of (r + 1)
out["double_backward_err"] = err(grads(model), grads(ref))

# under ft.compile: the DDP module compiled, or DDP around a compiled module
ref.zero_grad()
mse(ref, X, Y).backward()
for name, wrap in (("compile(ddp)", lambda m: ft.compile(DDP(m))),
                   ("ddp(compile)", lambda m: DDP(ft.compile(m)))):
    m = make(seed=100 + r)
    f = wrap(m)
    for _ in range(3):                             # captured, then run compiled
        m.zero_grad()
        mse(f, X[mine], Y[mine]).backward()
    out[name + "_err"] = err(grads(m), grads(ref))
report(out)
"""


@pytest.mark.parametrize("bucket_mb, shm", [(25, True), (25, False), (0.0001, False)],
                         ids=["shared memory", "messages, one bucket",
                              "messages, several buckets"])
def test_ddp_matches_one_process_on_the_whole_batch(tmp_path, bucket_mb, shm):
    """On one machine the gradients are averaged in MPI's shared memory (one region per
    dtype); with messages (several machines, or SHARED_MEMORY off) in buckets."""
    res = run_job(tmp_path, DDP_JOB.replace("BUCKET_MB", repr(bucket_mb))
                  .replace("SHM", repr(shm)))
    for o in res:
        assert o["shared"] == shm
        assert (o["buckets"] == 1) == (bucket_mb == 25) and o["buckets"] >= 1
        if bucket_mb != 25:
            assert o["buckets"] >= 3
        assert o["broadcast_err"] == 0.0
        assert o["local_differs"]
        for k in ("step_err", "no_sync_err", "gp_err", "penalty_only_err",
                  "double_backward_err", "compile(ddp)_err", "ddp(compile)_err"):
            assert o[k] < 1e-10, (k, o[k])
        assert o["unused_bias_grad"] == [False] * 5 + [True]
    assert res[0]["params"] == res[1]["params"]


def test_failures_give_clear_errors_on_every_rank(tmp_path):
    res = run_job(tmp_path, """
        import functrans as ft
        import functrans.distributed as dist
        from functrans.nn.parallel import DistributedDataParallel as DDP
        from mpi_jobs import report
        out = {}
        for what, call in (("ddp", lambda: DDP(ft.nn.Linear(2, 2))),
                           ("all_reduce", lambda: dist.all_reduce(ft.zeros(2)))):
            try:
                call()
            except RuntimeError as e:
                out[what + "_before_init"] = str(e)
        dist.init_process_group(backend="mpi")
        r = dist.get_rank()
        try:                                   # the models differ across ranks
            DDP(ft.nn.Linear(3, 2 + r))
        except RuntimeError as e:
            out["ddp_mismatch"] = str(e)
        try:                                   # dtypes differ across ranks
            dist.broadcast(ft.zeros(2, dtype=(ft.float32, ft.float64)[r]), src=0)
        except RuntimeError as e:
            out["dtype_mismatch"] = str(e)
        report(out)
    """, env={"FUNCTRANS_COLLECTIVE_TIMEOUT": "30"})
    for o in res:
        for what in ("ddp", "all_reduce"):
            assert 'ft.distributed.init_process_group(backend="mpi")' in o[what + "_before_init"]
        assert "'weight'" in o["ddp_mismatch"] and "(2, 3)" in o["ddp_mismatch"] \
            and "(3, 3)" in o["ddp_mismatch"]
        assert "float32" in o["dtype_mismatch"] or "<f4" in o["dtype_mismatch"]


DIE = """
import os, signal, sys
import functrans as ft
import functrans.distributed as dist
dist.init_process_group(backend="mpi")
if dist.get_rank() == 1:
    {how}
dist.all_reduce(ft.zeros(3))
"""


@pytest.mark.parametrize("how, says", [
    ("os._exit(3)", "rank 1 died without finishing"),
    ("raise ValueError('boom')", "rank 1: ValueError: boom"),
    ("sys.exit(0)", "rank(s) [1] did not arrive"),
    # the fork-only process manager reports these but exits 0: the launcher must not
    pytest.param("os.kill(os.getpid(), signal.SIGKILL)", "rank 1 was killed by a signal: Killed",
                 marks=pytest.mark.slow),       # (the signal path: test_..._as_a_shell_would)
    pytest.param("os.kill(os.getpid(), signal.SIGSEGV)",
                 "rank 1 was killed by a signal: Segmentation", marks=pytest.mark.slow),
], ids=["killed", "exception", "left early", "SIGKILL", "SIGSEGV"])
def test_a_rank_that_dies_ends_the_job_and_is_named(tmp_path, how, says):
    t0 = time.perf_counter()
    _, output = run_job(tmp_path, DIE.format(how=how), expect_fail=True, timeout=60,
                        launcher=LAUNCHER, env={"FUNCTRANS_COLLECTIVE_TIMEOUT": "3"})
    assert says in output, output
    assert time.perf_counter() - t0 < 30


def test_a_rank_killed_by_a_signal_fails_the_job_as_a_shell_would(tmp_path):
    """Exit code 128 + the signal's number where the process manager said 0 (gforker); the
    killed rank's shared-memory segment does not stay behind in /dev/shm."""
    before = _segments()
    proc, _, _ = launch(tmp_path, DIE.format(how="os.kill(os.getpid(), signal.SIGKILL)"), 2,
                        {"FUNCTRANS_COLLECTIVE_TIMEOUT": "3"}, LAUNCHER, ())
    output, _ = proc.communicate(timeout=60)
    assert proc.returncode != 0, output
    if "signaled with Killed" in output:                 # gforker's report
        assert proc.returncode == 128 + signal.SIGKILL, output
    # a new segment still mapped belongs to a job running beside this one (the suite's other
    # worker); an abandoned one is this job's
    left = {os.path.join("/dev/shm", f) for f in _segments() - before}
    assert not left - run._in_use(left)


def _segments():
    return {f for f in os.listdir("/dev/shm") if f.startswith("mpich_shm_")} \
        if os.path.isdir("/dev/shm") else set()


def _sockets_of(pids):
    """(local, remote, state) of every TCP socket that one of the processes holds."""
    inodes = set()
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:["):
                    inodes.add(link[8:-1])
        except OSError:
            continue
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6", "/proc/net/udp", "/proc/net/udp6"):
        try:
            with open(table) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            if cols[9] in inodes:
                found.append((table, cols[1], cols[2], cols[3]))
    return found


def _loopback(addr):
    """An address of /proc/net/tcp (hex, little-endian words) in 127.0.0.0/8 or ::1."""
    host = addr.split(":")[0]
    if len(host) == 8:
        return host.endswith("7F")
    return host == "00000000000000000000000001000000" or (
        host.startswith("0000000000000000FFFF0000") and host.endswith("7F"))


def _unconnected(addr):
    return addr.split(":")[0].strip("0") == ""


def _job_pids(root):
    """root and its descendants."""
    kids = {}
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open(f"/proc/{p}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                kids.setdefault(ppid, []).append(int(p))
            except (OSError, IndexError, ValueError):
                continue
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += kids.get(p, [])
    return out


@pytest.mark.skipif(not os.path.exists("/proc/net/tcp"), reason="needs Linux's /proc/net")
@pytest.mark.parametrize("pm", [None, pytest.param("hydra", marks=pytest.mark.slow),
                                pytest.param("gforker", marks=pytest.mark.slow)],
                         ids=["default", "hydra", "gforker"])      # (each launch ~4 s)
def test_a_local_job_uses_loopback_and_shared_memory_only(tmp_path, pm):
    """While a 2-process job of the launcher runs, none of its processes holds a socket
    bound to or connected to an address other than loopback. The one exception, with
    `--pm hydra`: Hydra's control port, which mpiexec opens on the wildcard address (its
    proxies connect to it over loopback); gforker, the default where MPICH installed it,
    opens no socket at all."""
    if pm is None:
        gforker = os.access(find_mpiexec() + ".gforker", os.X_OK)
        flags, pm = [], "gforker" if gforker else "hydra"
    else:
        flags = ["--pm", pm]
    proc, out, _ = launch(tmp_path, """
        import os, time
        import functrans as ft
        import functrans.distributed as dist
        dist.init_process_group(backend="mpi")
        dist.all_reduce(ft.ones(100000))
        open(os.path.join(os.environ["FT_MPI_JOB_OUT"], f"up{dist.get_rank()}"), "w").close()
        time.sleep(2)
        dist.barrier()
    """, launcher=LAUNCHER[:3] + flags + LAUNCHER[3:])
    try:
        deadline = time.time() + 30
        while len([f for f in os.listdir(out) if f.startswith("up")]) < 2:
            assert proc.poll() is None and time.time() < deadline, proc.communicate()[0]
            time.sleep(0.05)
        pids = _job_pids(proc.pid)
        assert len(pids) >= 3                              # launcher, mpiexec, ranks
        mpiexec = [p for p in pids if _comm(p).startswith("mpiexec")]
        control = {s for s in _sockets_of(mpiexec) if s[3] == "0A"} if pm == "hydra" else set()
        assert len(control) <= 1
        bad = [s for s in _sockets_of(pids) if s not in control and not (
            _loopback(s[1]) and (_unconnected(s[2]) or _loopback(s[2])))]
        assert not bad, bad
    finally:
        output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, output


def _comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""
