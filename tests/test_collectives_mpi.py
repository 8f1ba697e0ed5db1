"""Collectives across processes: 2-process jobs (tests/mpi_jobs.py: mpiexec on the
loopback interface) running ft.pmap with psum/pmean/pmax/pmin/all_gather/psum_scatter/
ppermute/axis_index, inside ft.jit and under ft.grad, and the transport's failures
(mismatched shapes: the same error on every rank; a rank that skips a collective: a
timeout naming it)."""
from __future__ import annotations

import numpy as np
import pytest

from mpi_jobs import needs_mpi, run_job

pytestmark = needs_mpi

VALUES_JOB = """
import numpy as np
import functrans as ft
from functrans import lax
from functrans.backends import mpi
from mpi_jobs import report

ft.config.update("jax_enable_x64", True)        # float64 values, as the reference's
r = mpi.world().rank
x = (np.arange(4.0) + 10 * r)[None]              # this process's slice: leading axis 1
def pm(f, **kw):
    return ft.pmap(f, axis_name="d", **kw)
out = {"size": mpi.world().size}
out["psum"] = pm(lambda v: lax.psum(v, "d"))(x)
out["pmean"] = pm(lambda v: lax.pmean(v, "d"))(x)
out["pmax"] = pm(lambda v: lax.pmax(v, "d"))(x)
out["pmin"] = pm(lambda v: lax.pmin(v, "d"))(x)
out["all_gather"] = pm(lambda v: lax.all_gather(v, "d"))(x)
out["all_gather_tiled"] = pm(lambda v: lax.all_gather(v, "d", tiled=True))(x)
out["psum_scatter"] = pm(lambda v: lax.psum_scatter(v, "d", tiled=True))(x)
out["psum_scatter_rows"] = pm(lambda v: lax.psum_scatter(v.reshape(2, 2), "d"))(x)
out["ppermute"] = pm(lambda v: lax.ppermute(v, "d", [(0, 1), (1, 0)]))(x)
out["ppermute_one"] = pm(lambda v: lax.ppermute(v, "d", [(0, 1)]))(x)
out["axis_index"] = pm(lambda v: lax.axis_index("d"))(x)
out["jit_outside"] = ft.jit(pm(lambda v: lax.psum(v * 2.0, "d")))(x)
out["jit_inside"] = pm(ft.jit(lambda v: lax.psum(v * 2.0, "d")))(x)
out["vmap_inside"] = pm(lambda v: ft.vmap(lambda u: lax.psum(u, ("d", "i")),
                                          axis_name="i")(v.reshape(2, 2)))(x)

# the transport itself
w = mpi.world()
buf = np.arange(3.0) * (r + 1)
req = w.iallreduce(buf, "sum", out=buf)
out["t_same_buffer"] = req.wait() is buf
out["t_iallreduce"] = req.wait()
out["t_prod"] = w.allreduce(np.arange(3.0) + r, "prod")
out["t_broadcast"] = w.broadcast(np.arange(3.0) + r, root=1)
w.barrier()
out["t_scalar"] = w.allreduce(np.float32(r + 1))

# shared memory: uneven counts, two dtypes, a post step; each share written to every rank
win = w.shared_window(576)
mine = win.segment(r)
a, b, c = (mine[:148].view(np.float32), mine[192:232].view(np.float64),
           mine[256:576].view(np.float64))
a[:] = np.arange(37) * (r + 1)
b[:] = np.arange(5) + 0.5 * r
lo, hi = win.share(40, np.float64)         # c: this rank's terms in [lo + 2, hi - 1) are
c[:] = np.arange(40.0) + 100 * r           # read from `own`, not from the window
src = c[lo + 2:hi - 1].copy()
c[lo + 2:hi - 1] = np.nan
win.fence("test")
win.allreduce_share(0, np.float32, 37, lambda share: share.__imul__(2))
win.allreduce_share(192, np.float64, 5)
win.allreduce_share(256, np.float64, 40, own=[(lo + 2, src)])
win.fence("test")
out["t_shared_a"], out["t_shared_b"], out["t_shared_c"] = a, b, c
out["t_shared_shares"] = [lo, hi]
out["t_shared_own"] = [np.shares_memory(win.segment(k), mine) for k in range(2)]

# data parallelism: each process holds 3 rows of the batch; float64
rng = np.random.default_rng(0)
w0 = rng.standard_normal((4, 2))
X = rng.standard_normal((6, 4))
Y = rng.standard_normal((6, 2))
xb, yb = X[3 * r:3 * r + 3][None], Y[3 * r:3 * r + 3][None]
def loss(w, x, y):
    return ((ft.numpy.tanh(x @ w) - y) ** 2).mean()
step = pm(lambda w, x, y: lax.pmean(ft.grad(loss)(w, x, y), "d"), in_axes=(None, 0, 0))
out["grad_pmean"] = step(w0, xb, yb)
out["grad_pmean_jit"] = ft.jit(step)(w0, xb, yb)
out["loss_pmean"] = pm(lambda w, x, y: lax.pmean(loss(w, x, y), "d"),
                       in_axes=(None, 0, 0))(w0, xb, yb)
out["grad_of_pmean_loss"] = pm(ft.grad(lambda w, x, y: lax.pmean(loss(w, x, y), "d")),
                               in_axes=(None, 0, 0))(w0, xb, yb)
out["local_grad"] = ft.grad(loss)(w0, xb[0], yb[0])

# the facade: a process psum recorded in the autograd graph, differentiated twice
from functrans.facade.ops import apply_prim
from functrans.higher_order.collectives import ProcessAxis, psum_p
t = ft.tensor(np.array([1.0, 2.0]) * (r + 1), requires_grad=True)
y = apply_prim(psum_p, {"axes": (ProcessAxis("d"),)}, [t * t])
(g,) = ft.autograd.grad(y.sum(), t, create_graph=True)
(g2,) = ft.autograd.grad((g * g).sum(), t)
out["facade"] = [y.detach().numpy(), g.detach().numpy(), g2.numpy()]
out["facade_pmap"] = ft.pmap(lambda v: lax.psum(v * v, "d"), axis_name="d")(
    ft.tensor(x)).numpy()
report({k: np.asarray(v) for k, v in out.items()})
"""


@pytest.fixture(scope="module")
def values(tmp_path_factory):
    return run_job(tmp_path_factory.mktemp("collectives"), VALUES_JOB, timeout=120)


def _both(values, key):
    return [np.asarray(values[r][key]) for r in range(2)]


def test_pmap_reductions_span_both_processes(values):
    x = [np.arange(4.0)[None], (np.arange(4.0) + 10)[None]]
    for r in range(2):
        v = values[r]
        assert v["size"] == 2
        np.testing.assert_array_equal(v["psum"], x[0] + x[1])
        np.testing.assert_array_equal(v["pmean"], (x[0] + x[1]) / 2)
        np.testing.assert_array_equal(v["pmax"], x[1])
        np.testing.assert_array_equal(v["pmin"], x[0])
        np.testing.assert_array_equal(v["all_gather"], np.stack([x[0][0], x[1][0]])[None])
        np.testing.assert_array_equal(v["all_gather_tiled"],
                                      np.concatenate([x[0][0], x[1][0]])[None])
        total = x[0][0] + x[1][0]
        np.testing.assert_array_equal(v["psum_scatter"], total[2 * r:2 * r + 2][None])
        np.testing.assert_array_equal(v["psum_scatter_rows"], total.reshape(2, 2)[r][None])
        np.testing.assert_array_equal(v["ppermute"], x[1 - r])
        np.testing.assert_array_equal(v["ppermute_one"], x[0] if r == 1 else 0 * x[0])
        np.testing.assert_array_equal(v["axis_index"], [r])
        np.testing.assert_array_equal(v["jit_outside"], 2 * (x[0] + x[1]))
        np.testing.assert_array_equal(v["jit_inside"], 2 * (x[0] + x[1]))
        np.testing.assert_array_equal(v["vmap_inside"],
                                      np.broadcast_to((x[0] + x[1]).reshape(2, 2).sum(0),
                                                      (1, 2, 2)))


def test_tensors_through_the_facade(values):
    """psum on Tensors records a node whose backward (psum again) is differentiable: the
    global loss is the sum over ranks of sum(psum(t * t))."""
    ts = [np.array([1.0, 2.0]), np.array([2.0, 4.0])]
    for r in range(2):
        y, g, g2 = (np.asarray(a) for a in values[r]["facade"])
        np.testing.assert_array_equal(y, ts[0] ** 2 + ts[1] ** 2)
        np.testing.assert_array_equal(g, 2 * ts[r] * 2)        # psum of the ones cotangent
        np.testing.assert_array_equal(g2, 32 * ts[r])
        np.testing.assert_array_equal(values[r]["facade_pmap"],
                                      (np.arange(4.0) ** 2 + (np.arange(4.0) + 10) ** 2)[None])


def test_transport_methods(values):
    for r in range(2):
        v = values[r]
        assert v["t_same_buffer"] is True
        np.testing.assert_array_equal(v["t_iallreduce"], [0.0, 3.0, 6.0])
        np.testing.assert_array_equal(v["t_prod"], [0.0, 2.0, 6.0])
        np.testing.assert_array_equal(v["t_broadcast"], [1.0, 2.0, 3.0])
        assert v["t_scalar"] == 3.0
        np.testing.assert_array_equal(v["t_shared_a"], np.arange(37) * 3 * 2)
        np.testing.assert_array_equal(v["t_shared_b"], 2 * np.arange(5) + 0.5)
        np.testing.assert_array_equal(v["t_shared_c"], 2 * np.arange(40.0) + 100)
        assert list(v["t_shared_shares"]) == [[0, 16], [16, 40]][r]   # on 8-float lines
        assert list(v["t_shared_own"]) == [k == r for k in range(2)]


def _reference():
    """One process, the whole batch: the loss is the mean over the 6 rows' mean halves."""
    rng = np.random.default_rng(0)
    w0, X, Y = rng.standard_normal((4, 2)), rng.standard_normal((6, 4)), \
        rng.standard_normal((6, 2))
    t = np.tanh(X @ w0)
    loss = ((t - Y) ** 2).mean()
    grad = X.T @ (2 * (t - Y) * (1 - t ** 2)) / Y.size
    return loss, grad


def test_gradient_of_the_mean_loss_matches_one_process(values):
    loss, grad = _reference()
    for r in range(2):
        v = values[r]
        np.testing.assert_allclose(v["loss_pmean"], [loss], rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(v["grad_pmean"][0], grad, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(v["grad_pmean_jit"][0], grad, rtol=1e-10, atol=1e-12)
        # JAX's pmap convention: psum transposes to psum, so the gradient of the pmean'd
        # loss inside pmap is this process's own gradient (average it with pmean)
        np.testing.assert_allclose(v["grad_of_pmean_loss"][0], v["local_grad"],
                                   rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose((np.asarray(values[0]["local_grad"]) +
                                np.asarray(values[1]["local_grad"])) / 2, grad, rtol=1e-10)


MISMATCH_JOB = """
import numpy as np
import functrans as ft
from functrans import lax
from functrans.backends import mpi
from mpi_jobs import report

r = mpi.world().rank
try:
    ft.pmap(lambda v: lax.psum(v, "d"), axis_name="d")(np.ones((1, 3 + r)))
    report({"error": None})
except mpi.CollectiveError as e:
    report({"error": str(e)})
"""


def test_mismatched_shapes_raise_the_same_error_on_every_rank(tmp_path):
    res = run_job(tmp_path, MISMATCH_JOB, timeout=60)
    errors = [res[r]["error"] for r in range(2)]
    assert errors[0] is not None and errors[0] == errors[1]
    assert "allreduce" in errors[0]
    assert "rank 0: allreduce of shape (3,)" in errors[0]
    assert "rank 1: allreduce of shape (4,)" in errors[0]


TIMEOUT_JOB = """
import time
import numpy as np
from functrans.backends import mpi
from mpi_jobs import report

w = mpi.world()
if w.rank == 0:
    start = time.perf_counter()
    try:
        w.allreduce(np.ones(3))
        report({"error": None})
    except mpi.CollectiveError as e:
        report({"error": str(e), "waited": time.perf_counter() - start})
else:
    report({"skipped": True})
"""


def test_a_rank_that_skips_a_collective_times_out_with_its_name(tmp_path):
    res = run_job(tmp_path, TIMEOUT_JOB, timeout=60,
                  env={"FUNCTRANS_COLLECTIVE_TIMEOUT": "1"})
    err = res[0]["error"]
    assert err is not None and "allreduce: timed out after 1 s" in err
    assert "rank(s) [1] did not arrive" in err
    assert 1 <= res[0]["waited"] < 30
