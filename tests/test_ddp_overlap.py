"""DistributedDataParallel's step in 2-process MPI jobs, on both of its paths. Messages
(several machines; here with SHARED_MEMORY off): the buckets' all-reduces start during
the backward (the engine hands out each leaf gradient as soon as it is final), gradients
live in the buckets' flat buffers (views) or solo arrays, the per-step all-reduces skip
the agreement round, and the failures that round used to catch still give errors. Shared
memory (one machine): the gradients live in the rank's MPI shared-memory window and the
same cases hold. References: one process on the whole batch, float64."""
from __future__ import annotations

import pytest
from mpi_jobs import needs_mpi, run_job

pytestmark = needs_mpi

COMMON = """
import numpy as np
import functrans as ft
import functrans.distributed as dist
from functrans.nn.parallel import DistributedDataParallel as DDP
from mpi_jobs import report

dist.init_process_group(backend="mpi")
r, rows = dist.get_rank(), 4 * dist.get_world_size()
rng = np.random.default_rng(0)
X, Y = ft.tensor(rng.standard_normal((rows, 6))), ft.tensor(rng.standard_normal((rows, 1)))
mine = slice(4 * r, 4 * r + 4)


def make():
    ft.manual_seed(0)
    return ft.nn.Sequential(ft.nn.Linear(6, 16), ft.nn.Tanh(), ft.nn.Linear(16, 1)).double()


def mse(m, x, y):
    return ((m(x) - y) ** 2).mean()


def first(m, x):                  # uses the first layer only
    return (m[0](x) ** 2).mean()
"""

VIEWS_JOB = COMMON + """
from functrans.nn.parallel import distributed as D
D.SOLO_BYTES = SOLO_THRESHOLD
D.SHARED_MEMORY = SHM
model, ref = make(), make()
held = []                         # the first layer's weight gradient as the engine made it
model[0].weight.register_post_accumulate_grad_hook(lambda p: held.append(p.grad._data))
ddp = DDP(model, bucket_cap_mb=0.0001)


def views():
    w = ddp._window
    return all(np.shares_memory(p.grad._data, b.buf) and (
        w is None or np.shares_memory(p.grad._data, w.segment(r)))
        for b in ddp._bucket_list for p in b.params)


def err(ps=None):
    pairs = list(zip(model.parameters(), ref.parameters()))
    return max(float(np.abs(p.grad.numpy() - q.grad.numpy()).max()) for p, q in pairs)


out = {"buckets": len(ddp._bucket_list)}
for how in ("first", "set_to_none=False", "set_to_none=True", "assigned", "accumulated",
            "assigned_view"):
    if how.startswith("set_to_none"):
        none = how.endswith("True")
        model.zero_grad(set_to_none=none)
        ref.zero_grad(set_to_none=none)
    elif how == "assigned":
        for p, q in zip(model.parameters(), ref.parameters()):
            p.grad, q.grad = ft.ones_like(p), ft.ones_like(q)
    elif how == "assigned_view":               # views of larger arrays: copied, not reduced
        for p, q in zip(model.parameters(), ref.parameters()):
            p.grad = ft.ones((2,) + tuple(p.shape), dtype=p.dtype)[1]
            q.grad = ft.ones_like(q)
    held.clear()
    mse(ddp, X[mine], Y[mine]).backward()
    mse(ref, X, Y).backward()
    out[how] = [views(), err()]
    out.setdefault("kept", []).append(held[0] is model[0].weight.grad._data)

# the last layer unused on rank 1 only: its gradient is rank 0's over the world size
model.zero_grad(set_to_none=False)
ref.zero_grad(set_to_none=False)
(mse(ddp, X[mine], Y[mine]) if r == 0 else first(ddp.module, X[mine])).backward()
(0.5 * (mse(ref, X[:4], Y[:4]) + first(ref, X[4:]))).backward()
out["unused_on_one_rank"] = [views(), err()]

# unused on every rank: the last layer's .grad (views) keeps its values
before = [p.grad.numpy().copy() for p in model[2].parameters()]
first(ddp.module, X[mine]).backward()
out["unused_kept"] = all(np.array_equal(b, p.grad.numpy())
                         for b, p in zip(before, model[2].parameters()))
out["first_layer_err"] = max(float(np.abs(p.grad.numpy() - q.grad.numpy() - g).max())
                             for p, q, g in zip(model[0].parameters(), ref[0].parameters(),
                                                ft.autograd.grad(first(ref, X),
                                                                 list(ref[0].parameters()))))

# once the backward program is hot, a fresh gradient is computed into its place (a window
# slot on the shared-memory path: the hook already sees the view)
for _ in range(12):
    model.zero_grad()
    ref.zero_grad()
    held.clear()
    mse(ddp, X[mine], Y[mine]).backward()
    mse(ref, X, Y).backward()
out["hot"] = [held[0] is model[0].weight.grad._data, views(), err()]
report(out)
"""


@pytest.mark.parametrize("solo, shm", [(1 << 18, False), (200, False), (0, False),
                                       (0, True)],
                         ids=["shared", "mixed", "all_solo", "shared_memory"])
def test_gradients_are_bucket_views_and_stay_correct(tmp_path, solo, shm):
    """Shared buffers, and parameters of SOLO_BYTES or more all-reduced in their own
    gradient arrays (200 bytes: the first layer's weight alone; 0: every parameter); on
    the shared-memory path, one region of the window per dtype (SOLO_BYTES plays no part)."""
    res = run_job(tmp_path, VIEWS_JOB.replace("SOLO_THRESHOLD", str(solo))
                  .replace("SHM", repr(shm)))
    for o in res:
        assert o["buckets"] == (1 if shm else {1 << 18: 3, 200: 3, 0: 4}[solo])
        # the gradient array the hooks saw is .grad's after the averaging: always for a
        # solo bucket (reduced in place, never copied); for a shared one only when .grad
        # was its view already (set_to_none=False, accumulated), else it was copied in
        shared = [False, True, False, False, True, False]
        solo_kept = [True] * 5 + [False]
        assert o["kept"] == (shared if shm or solo == 1 << 18 else solo_kept), o["kept"]
        for how in ("first", "set_to_none=False", "set_to_none=True", "assigned",
                    "accumulated", "assigned_view", "unused_on_one_rank"):
            is_view, e = o[how]
            assert is_view, how
            assert e < 1e-10, (how, e)
        assert o["unused_kept"]
        assert o["first_layer_err"] < 1e-10
        computed_in_place, is_view, e = o["hot"]
        assert is_view and e < 1e-10
        assert computed_in_place        # hooks saw .grad as it is after the averaging


FAILURES_JOB = COMMON + """
from functrans.nn.parallel import distributed as D
D.SHARED_MEMORY = SHM
out = {}
try:                                    # different buckets across ranks
    DDP(make(), bucket_cap_mb=(25, 0.0001)[r])
except RuntimeError as e:
    out["layout"] = str(e)

ddp = DDP(make())                       # no_sync on rank 0 only: out of step
if r == 0:
    with ddp.no_sync():
        mse(ddp, X[mine], Y[mine]).backward()
try:
    mse(ddp, X[mine], Y[mine]).backward()
except RuntimeError as e:
    out["out_of_step"] = str(e)
params = list(ddp.module.parameters())          # .grad: this rank's own sums (shared memory)
local = ft.autograd.grad(mse(ddp.module, X[mine], Y[mine]), params)
out["kept_local"] = max(float(np.abs(p.grad.numpy() - (2 - r) * g.numpy()).max())
                        for p, g in zip(params, local))

ddp = DDP(make())                       # rank 1 stalls: rank 0 times out
if r == 0:
    import time
    start = time.perf_counter()
    try:
        mse(ddp, X[mine], Y[mine]).backward()
    except RuntimeError as e:
        out["stalled"] = str(e)
        out["waited"] = time.perf_counter() - start
report(out)
"""


@pytest.mark.parametrize("shm", [False, pytest.param(True, marks=pytest.mark.slow)],
                         ids=["messages", "shared_memory"])     # (each job ~3-4 s)
def test_mismatches_without_the_agreement_round_still_raise(tmp_path, shm):
    res = run_job(tmp_path, FAILURES_JOB.replace("SHM", repr(shm)), timeout=60,
                  env={"FUNCTRANS_COLLECTIVE_TIMEOUT": "2"})
    for r, o in enumerate(res):
        assert "gradient buckets differ" in o["layout"]
        assert "rank 0: 1 buckets" in o["layout"] and "rank 1: 3 buckets" in o["layout"]
        assert "different number of backward calls" in o["out_of_step"]
        assert "no_sync()" in o["out_of_step"]
        if shm:         # (messages: the buffers were all-reduced already, in place)
            assert o["kept_local"] < 1e-12
    err = res[0]["stalled"]
    if shm:
        assert ("DistributedDataParallel's shared-memory gradient reduction: timed out "
                "after 2 s on rank 0 of 2") in err
        assert "the other ranks did not reach the shared-memory reduction" in err
    else:
        assert "iallreduce: timed out after 2 s on rank 0 of 2" in err
        assert "the other ranks did not take part" in err
    assert 2 <= res[0]["waited"] < 30


OVERLAP_JOB = COMMON + """
from functrans.nn.parallel import distributed as D
D.SHARED_MEMORY = False                         # the message path overlaps
model, ref = make(), make()
ddp = DDP(model, bucket_cap_mb=0.0001)          # several buckets, the last layer's first
last = model[0].weight                          # the last gradient the backward computes
seen = []
last.register_hook(lambda g: seen.append([b.req is not None for b in ddp._bucket_list]))
out = {"buckets": [[tuple(p.shape) for p in b.params] for b in ddp._bucket_list],
       "launched": [], "err": []}
for step in range(3):                           # node by node, then the compiled program
    model.zero_grad()
    ref.zero_grad()
    mse(ddp, X[mine], Y[mine]).backward()
    mse(ref, X, Y).backward()
    out["err"].append(max(float(np.abs(p.grad.numpy() - q.grad.numpy()).max())
                          for p, q in zip(model.parameters(), ref.parameters())))
out["launched"] = seen
report(out)
"""


def test_buckets_start_during_the_backward(tmp_path):
    res = run_job(tmp_path, OVERLAP_JOB)
    for o in res:
        assert o["buckets"][0] == [[1], [1, 16]] and [16, 6] in o["buckets"][-1]
        assert len(o["launched"]) == 3
        for launched in o["launched"]:
            # when the first layer's weight gradient arrives, the last layer's bucket is
            # already on its way, the weight's own not yet
            assert launched[0] is True and launched[-1] is False, launched
        assert max(o["err"]) < 1e-10


FALLBACK_JOB = COMMON + """
import os
real = os.statvfs


class NoRoom:
    f_bavail, f_frsize = 0, 4096


os.statvfs = lambda path: NoRoom() if path == "/dev/shm" else real(path)
model, ref = make(), make()
ddp = DDP(model)
mse(ddp, X[mine], Y[mine]).backward()
mse(ref, X, Y).backward()
report({"window": ddp._window is not None, "buckets": len(ddp._bucket_list),
        "err": max(float(np.abs(p.grad.numpy() - q.grad.numpy()).max())
                   for p, q in zip(model.parameters(), ref.parameters()))})
"""


def test_without_room_in_shared_memory_messages_carry_the_gradients(tmp_path):
    """/dev/shm too small for the window (a container's 64 MB, say): every rank takes the
    message path, with the same result."""
    for o in run_job(tmp_path, FALLBACK_JOB):
        assert o["window"] is False and o["buckets"] == 1
        assert o["err"] < 1e-10


RANKS_JOB = COMMON + """
model, ref = make(), make()
ddp = DDP(model)
w = ddp._window
out = {"window": w is not None, "machines": w and w.machines, "local": w and w.size,
       "err": []}
for step in range(3):
    model.zero_grad(set_to_none=step != 1)
    ref.zero_grad(set_to_none=step != 1)
    mse(ddp, X[mine], Y[mine]).backward()
    mse(ref, X, Y).backward()
    out["err"].append(max(float(np.abs(p.grad.numpy() - q.grad.numpy()).max())
                          for p, q in zip(model.parameters(), ref.parameters())))
report(out)
"""


@pytest.mark.parametrize("n, per_node", [(3, None), (4, 2), (2, 1)],
                         ids=["three ranks", "two machines of two", "two machines of one"])
def test_any_number_of_ranks_and_machines(tmp_path, n, per_node):
    """Three ranks (a world size that is not a power of two); several machines, simulated
    by FUNCTRANS_RANKS_PER_NODE (each rank's share summed in its machine's shared memory,
    then by MPI across the machines): the same gradients as one process on the whole
    batch."""
    env = {"FUNCTRANS_RANKS_PER_NODE": str(per_node)} if per_node else None
    res = run_job(tmp_path, RANKS_JOB, n=n, timeout=120, env=env)
    for o in res:
        assert o["window"] is True
        assert (o["machines"], o["local"]) == ((1, 3) if n == 3 else (n // per_node, per_node))
        assert max(o["err"]) < 1e-10, o["err"]
