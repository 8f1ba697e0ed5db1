"""Tests of the benchmark package: hand-written floors against finite differences, every
workload's variants against its floor, and one quick pass of the harness."""
import io
import json
import os
import sys
import time

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:          # bench/ is not installed; it runs from the repository root
    sys.path.insert(0, ROOT)

import functrans as ft  # noqa: E402
from bench import harness  # noqa: E402
from bench import workloads_ad as wad  # noqa: E402
from bench import workloads_core as wcore  # noqa: E402
from bench import workloads_rows as wr  # noqa: E402
from conftest import fd_grad  # noqa: E402

pytestmark = pytest.mark.usefixtures("x64")  # float64 references: conftest.x64

harness.discover(verbose=False)


def _flat(params):
    return [a for pair in params for a in pair]


def _fd_grad(loss, params, h=1e-6):
    """Central finite differences of a scalar loss w.r.t. every entry of a [(W, b), ...] pytree."""
    out = []
    for W, b in params:
        pair = []
        for a in (W, b):
            g = np.zeros_like(a)
            for idx in np.ndindex(a.shape):
                old = a[idx]
                a[idx] = old + h
                up = loss(params)
                a[idx] = old - h
                down = loss(params)
                a[idx] = old
                g[idx] = (up - down) / (2 * h)
            pair.append(g)
        out.append(tuple(pair))
    return out


def _axpy(alpha, v, params):
    return [(W + alpha * V, b + alpha * c) for (W, b), (V, c) in zip(params, v)]


def _assert_tree_close(a, b, rtol, atol):
    for x, y in zip(_flat(a), _flat(b), strict=True):
        np.testing.assert_allclose(x, y, rtol=rtol, atol=atol)


# ---------------------------------------------------------------------------
# the floors, in float64, against finite differences

def test_mlp_floor_matches_finite_differences():
    params, x, y1h = wad.mlp_inputs(sizes=(6, 5, 4, 3), batch=4, dtype=np.float64)

    def loss(p):
        h = x
        for W, b in p[:-1]:
            h = np.maximum(h @ W + b, 0)
        z = h @ p[-1][0] + p[-1][1]
        z = z - z.max(1, keepdims=True)
        return -np.sum((z - np.log(np.exp(z).sum(1, keepdims=True))) * y1h) / x.shape[0]

    value, grads = wad.mlp_value_and_grad_floor(params, x, y1h)
    assert value == pytest.approx(loss(params), rel=1e-12)
    _assert_tree_close(grads, _fd_grad(loss, params), rtol=1e-6, atol=1e-8)


def test_facade_chain_floor_matches_finite_differences():
    from bench import workloads_facade_nn as wfn
    x, a, b = wcore.chain_inputs(dtype=np.float64)
    total, g = wfn.chain_fwd_bwd_floor(x, a, b)
    np.testing.assert_allclose(total, wcore.chain(np, x, a, b).sum(), rtol=1e-12)
    h = 1e-6
    fd = np.array([(wcore.chain(np, x + h * e, a, b).sum() - wcore.chain(np, x - h * e, a, b).sum())
                   / (2 * h) for e in np.eye(x.size)])
    np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-7)


def test_hvp_floor_matches_finite_differences():
    params, v, x, y = wad.hvp_inputs(sizes=(3, 5, 4, 1), batch=6, dtype=np.float64)
    loss = lambda p: wad.tanh_mlp_loss_np(p, x, y)  # noqa: E731
    grad = wad.tanh_mlp_grad_floor(params, x, y)
    _assert_tree_close(grad, _fd_grad(loss, params), rtol=1e-6, atol=1e-9)
    g, hv = wad.tanh_mlp_hvp_floor(params, v, x, y)
    _assert_tree_close(g, grad, rtol=1e-12, atol=0)
    h = 1e-5
    up = wad.tanh_mlp_grad_floor(_axpy(h, v, params), x, y)
    down = wad.tanh_mlp_grad_floor(_axpy(-h, v, params), x, y)
    fd = [((a - c) / (2 * h), (b - d) / (2 * h)) for (a, b), (c, d) in zip(up, down)]
    _assert_tree_close(hv, fd, rtol=1e-6, atol=1e-9)


def test_wgan_gp_floor_matches_finite_differences():
    params, real, fake, eps = wad.gp_inputs(sizes=(2, 5, 4, 1), batch=7, dtype=np.float64)
    x = eps * real + (1 - eps) * fake
    gx = wad.critic_input_grad_np(params, x)
    d = lambda z: wad._critic_fwd(params, z)[1] @ params[2][0] + params[2][1]  # noqa: E731
    h = 1e-6
    for j in range(x.shape[1]):
        e = np.zeros_like(x)
        e[:, j] = h
        np.testing.assert_allclose(gx[:, j], ((d(x + e) - d(x - e)) / (2 * h))[:, 0], rtol=1e-6, atol=1e-9)
    loss = lambda p: wad.wgan_gp_loss_np(p, real, fake, eps)  # noqa: E731
    grads = wad.wgan_gp_grad_floor(params, real, fake, eps)
    _assert_tree_close(grads, _fd_grad(loss, params), rtol=1e-5, atol=1e-8)



def test_row_floors_match_finite_differences():
    """The softmax and layernorm floors of bench/workloads_rows.py, in float64."""
    x, w, g, b = wr.row_data(rows=3, cols=5, dtype=np.float64)
    loss, gx = wr.softmax_value_and_grad_floor(x, w)
    assert loss == pytest.approx(np.sum(wr.softmax_floor(x) * w), rel=1e-12)
    np.testing.assert_allclose(gx, fd_grad(lambda z: np.sum(wr.softmax_floor(z) * w), x),
                               rtol=1e-6, atol=1e-9)
    loss, grads = wr.layernorm_value_and_grad_floor(x, g, b, w)
    ln = lambda x, g, b: np.sum(wr.layernorm_floor(x, g, b) * w)  # noqa: E731
    assert loss == pytest.approx(ln(x, g, b), rel=1e-12)
    want = (fd_grad(lambda z: ln(z, g, b), x), fd_grad(lambda z: ln(x, z, b), g),
            fd_grad(lambda z: ln(x, g, z), b))
    for got, w_ in zip(grads, want, strict=True):
        np.testing.assert_allclose(got, w_, rtol=1e-6, atol=1e-9)


# ---------------------------------------------------------------------------
# functrans against the floors in float64 (tight), and every workload at float32 tolerance

def test_functrans_matches_floors_in_float64():
    params, x, y1h = wad.mlp_inputs(sizes=(6, 5, 4, 3), batch=4, dtype=np.float64)
    val, g = ft.value_and_grad(wad.mlp_loss)(params, x, y1h)
    fval, fg = wad.mlp_value_and_grad_floor(params, x, y1h)
    assert float(val) == pytest.approx(float(fval), rel=1e-12)
    _assert_tree_close(g, fg, rtol=1e-10, atol=1e-12)

    params, v, x, y = wad.hvp_inputs(sizes=(3, 5, 4, 1), batch=6, dtype=np.float64)
    g, hv = ft.jvp(lambda p: ft.grad(wad.tanh_mlp_loss)(p, x, y), (params,), (v,))
    fg, fhv = wad.tanh_mlp_hvp_floor(params, v, x, y)
    _assert_tree_close(g, fg, rtol=1e-10, atol=1e-12)
    _assert_tree_close(hv, fhv, rtol=1e-10, atol=1e-12)

    params, real, fake, eps = wad.gp_inputs(sizes=(2, 5, 4, 1), batch=7, dtype=np.float64)
    g = ft.grad(wad.wgan_gp_loss)(params, real, fake, eps)
    _assert_tree_close(g, wad.wgan_gp_grad_floor(params, real, fake, eps), rtol=1e-10, atol=1e-12)
    assert float(wad.wgan_gp_loss(params, real, fake, eps)) == pytest.approx(
        wad.wgan_gp_loss_np(params, real, fake, eps), rel=1e-12)


def test_chain_has_200_equations_and_stays_finite():
    x, a, b = wcore.chain_inputs()
    closed = ft.make_jaxpr(lambda x, a, b: wcore.chain(ft.numpy, x, a, b))(x, a, b)
    assert len(closed.jaxpr.eqns) == 200
    ft.check_jaxpr(closed.jaxpr)
    assert np.all(np.isfinite(wcore.chain(np, x, a, b)))


MODEL_WORKLOADS = sorted(n for n, wl in harness.REGISTRY.items()
                         if wl.module == "bench.workloads_models")
SLOW_MODELS = {"gpt_train_step", "lstm_lm_train_step"}     # 10 s or more each, compiles


@pytest.fixture(autouse=True)
def _no_libraries_against():
    """Every test starts and ends without --against libraries (module state of the harness)."""
    harness.set_against([])
    yield
    harness.set_against([])


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n == "ddp_weak_scaling"
                                  else n   # (three multi-process jobs, ~6 s)
                                  for n in sorted(set(harness.REGISTRY) - set(MODEL_WORKLOADS))])
def test_workload_variants_agree_with_floor(name, monkeypatch):
    if name == "jit_compile_time":     # compiling 10,000 equations takes seconds: smaller here
        monkeypatch.setattr(_dyn(), "COMPILE_SIZES", (250, 1000, 2500))
    if name == "dyn_rnn_varlen_step":  # the twin's warm-up runs every length ten times
        monkeypatch.setattr(_dyn(), "RNN_LENGTHS", (20, 23))
    if name == "ddp_weak_scaling":     # three multi-process jobs: a few timed steps each
        monkeypatch.setattr(sys.modules["bench.workloads_distributed"], "STEPS", 3)
        monkeypatch.setattr(sys.modules["bench.workloads_distributed"], "ROUNDS", 1)
    errors = harness.check(harness.REGISTRY[name])
    assert errors, f"workload {name} has no variant besides its floor"
    assert all(e is None for e in errors.values()), errors


# ---------------------------------------------------------------------------
# the harness itself

def test_compare_rejects_wrong_values_and_shapes():
    ref = [np.ones(3, np.float32), (np.zeros((2, 2)),)]
    harness.compare([np.ones(3) + 1e-7, (np.zeros((2, 2)),)], ref, 1e-4, 1e-5)
    with pytest.raises(AssertionError, match="differs"):
        harness.compare([np.ones(3) * 1.01, (np.zeros((2, 2)),)], ref, 1e-4, 1e-5)
    with pytest.raises(AssertionError, match="shape"):
        harness.compare([np.ones(4), (np.zeros((2, 2)),)], ref, 1e-4, 1e-5)
    with pytest.raises(AssertionError, match="differs"):
        harness.compare([np.array([1, np.nan, 1]), (np.zeros((2, 2)),)], ref, 1e-4, 1e-5)


def test_wrong_variant_is_reported_and_not_timed():
    name = "_test_wrong_variant"
    harness.workload(name, targets={"bad": 2.0})(
        lambda: {"numpy": lambda: np.arange(3.0), "bad": lambda: np.arange(3.0) + 1,
                 "good": lambda: np.arange(3.0)})
    try:
        rec = harness.run_workload(harness.REGISTRY[name], harness.Settings(
            rounds=2, min_rounds=1, warmup=0, sample_s=1e-4, budget_s=0.1))
    finally:
        del harness.REGISTRY[name]
    by = {v["name"]: v for v in rec["variants"]}
    assert not by["bad"]["correct"] and "median_s" not in by["bad"]
    assert by["good"]["correct"] and by["good"]["samples"] == 2 and by["numpy"]["ratio"] == 1.0


def test_discover_skips_a_module_that_fails_to_import(tmp_path, capsys):
    pkg = tmp_path / "benchpkg_broken"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "workloads_missing.py").write_text(
        "from bench.harness import workload\n"
        "workload('_half_registered')(lambda: {'numpy': lambda: 0})\n"
        "import functrans.no_such_feature\n")
    (pkg / "other.py").write_text("raise RuntimeError('must not be imported')\n")
    sys.path.insert(0, str(tmp_path))
    try:
        harness.discover(path=[str(pkg)], package="benchpkg_broken")
    finally:
        sys.path.remove(str(tmp_path))
    assert "benchpkg_broken.workloads_missing" in harness.SKIPPED_MODULES
    assert "_half_registered" not in harness.REGISTRY
    assert "skipping benchpkg_broken.workloads_missing" in capsys.readouterr().err


def test_quick_run_writes_json(tmp_path, capsys):
    path = tmp_path / "out.json"
    assert harness.main(["--quick", "--only", "chain200_eval", "--json", str(path)]) == 0
    table = capsys.readouterr().out
    assert "chain200_eval" in table and "eval_jaxpr" in table and "target" in table
    data = json.loads(path.read_text())
    (rec,) = data["workloads"]
    by = {v["name"]: v for v in rec["variants"]}
    assert by["numpy"]["ratio"] == 1.0 and by["eval_jaxpr"]["target"] == 2.0
    assert by["eval_jaxpr"]["median_s"] > 0 and by["eval_jaxpr"]["samples"] >= 3
    assert data["meta"]["quick"] is True


def test_unknown_workload_is_an_error():
    with pytest.raises(SystemExit):
        harness.main(["--only", "no_such_workload"])


# ---------------------------------------------------------------------------
# dynamic graphs (issue 17): floors against finite differences, functrans against floors

def _dyn():
    from bench import workloads_dynamic as wdyn
    return wdyn


def test_dynamic_chain_floor_matches_finite_differences():
    wdyn = _dyn()
    x, a, b = wdyn.chain_inputs(dtype=np.float64)
    b = b * 1e3                        # an offset that shows in the derivative check
    ops = wdyn.chain_ops(60, seed=1)
    y, _ = wdyn.chain_forward_floor(x, ops, a, b)
    np.testing.assert_allclose(y, wdyn.dyn_chain(np, x, ops, a, b), rtol=1e-15)
    h = 1e-6
    fd = np.array([(wdyn.dyn_chain(np, x + h * e, ops, a, b).sum()
                    - wdyn.dyn_chain(np, x - h * e, ops, a, b).sum()) / (2 * h)
                   for e in np.eye(x.size)])
    np.testing.assert_allclose(wdyn.chain_grad_floor(x, ops, a, b), fd, rtol=1e-6, atol=1e-9)


def test_dynamic_chain_functrans_matches_floor_in_float64():
    wdyn = _dyn()
    x, a, b = wdyn.chain_inputs(dtype=np.float64)
    for seed in range(3):              # new structures: the first-call tiers
        ops = wdyn.chain_ops(300, seed=(99, seed))
        want = wdyn.chain_grad_floor(x, ops, a, b)
        tx, loss = wdyn.facade_chain(x, ops, ft.tensor(a), ft.tensor(b))
        np.testing.assert_allclose(wdyn.facade_backward((tx, loss)), want, rtol=1e-10, atol=0)
        g = ft.grad(lambda x: wdyn.chain_loss(x, ops, a, b))(x)
        np.testing.assert_allclose(g, want, rtol=1e-10, atol=0)


def test_dynamic_chains_are_new_structures_and_keep_a_gradient():
    wdyn = _dyn()
    chains = wdyn.changing_chains()
    lengths = [len(c) for c in chains]
    assert len(set(lengths)) == len(chains) == wdyn.CHAIN_POOL
    assert min(lengths) >= 800 and max(lengths) <= 1820
    x, a, b = wdyn.chain_inputs()
    g = wdyn.chain_grad_floor(x, next(wdyn.fresh_chains(40_000)), a, b)
    assert np.all(np.isfinite(g)) and np.abs(g).max() > 1e-6


def test_compile_chain_has_the_stated_number_of_equations():
    wdyn = _dyn()
    x, a, b = wdyn.chain_inputs()
    ops = wdyn.chain_ops(249, seed=0)
    assert len(ft.make_jaxpr(lambda x: wdyn.chain_loss(x, ops, a, b))(x).jaxpr.eqns) == 250


def test_rnn_step_floor_matches_finite_differences_and_the_facade():
    wdyn = _dyn()
    hidden, n_in = 5, 4
    xs, y = wdyn.rnn_batches(pool=2, lengths=(6, 7), batch=3, hidden=hidden, n_in=n_in,
                             dtype=np.float64)
    init = wdyn.rnn_params(hidden=hidden, n_in=n_in, dtype=np.float64)

    def loss(p):
        wx, wh, b = p
        h = np.zeros((xs[0].shape[1], hidden))
        for x in xs[0]:
            h = np.tanh(x @ wx + h @ wh + b)
        return np.mean((h - y) ** 2)
    params = [p.copy() for p in init]
    out = wdyn.rnn_step_floor(params, xs[0], y, lr=1.0)
    assert out[0] == pytest.approx(loss(init), rel=1e-12)
    grads = [p0 - p1 for p0, p1 in zip(init, params)]        # lr = 1
    h = 1e-6
    for i, p in enumerate(init):
        fd = np.zeros_like(p)
        for idx in np.ndindex(p.shape):
            up = [q.copy() for q in init]
            down = [q.copy() for q in init]
            up[i][idx] += h
            down[i][idx] -= h
            fd[idx] = (loss(up) - loss(down)) / (2 * h)
        np.testing.assert_allclose(grads[i], fd, rtol=1e-6, atol=1e-9)
    tparams = [ft.tensor(p, requires_grad=True) for p in init]
    opt = ft.optim.SGD(tparams, lr=1.0)
    tloss = wdyn.rnn_step_facade(tparams, opt, ft.tensor(xs[0]), ft.tensor(y))
    assert float(tloss.detach().numpy()) == pytest.approx(out[0], rel=1e-12)
    for tp, p in zip(tparams, params):
        np.testing.assert_allclose(tp.detach().numpy(), p, rtol=1e-10, atol=1e-12)


def test_rnn_batches_change_length_every_batch():
    xs, _ = _dyn().rnn_batches()
    steps = [x.shape[0] for x in xs]
    assert min(steps) >= 20 and max(steps) <= 60
    assert all(s != t for s, t in zip(steps, steps[1:]))


# ---------------------------------------------------------------------------
# the harness: staged variants, floors per variant, settings caps

def test_staged_preparation_is_not_timed_and_floors_pair_by_variant():
    name = "_test_staged"

    def setup():
        return harness.Case(
            {"numpy": lambda: np.arange(3.0),
             "staged": harness.Staged(lambda: time.sleep(0.01) or 2.0,
                                      lambda s: np.arange(3.0) * s / 2),
             "numpy_big": lambda: np.arange(30.0),
             "big": lambda: np.arange(30.0)},
            floors={"big": "numpy_big"})
    harness.workload(name, settings={"warmup": 1, "rounds": 2})(setup)
    try:
        wl = harness.REGISTRY[name]
        assert harness.check(wl) == {"staged": None, "big": None}
        rec = harness.run_workload(wl, harness.Settings(
            rounds=5, min_rounds=1, warmup=3, warmup_s=0.0, sample_s=1e-4, budget_s=1.0))
    finally:
        del harness.REGISTRY[name]
    by = {v["name"]: v for v in rec["variants"]}
    assert by["staged"]["median_s"] < 0.005           # the 10 ms preparation is not timed
    assert by["big"]["floor"] == "numpy_big" and by["numpy_big"]["ratio"] == 1.0
    assert by["staged"]["floor"] == "numpy" and by["numpy"]["samples"] == 2   # rounds capped
    out = io.StringIO()
    harness.print_table([rec], out=out)
    assert out.getvalue().count("(floor)") == 2


def test_settings_caps_only_lower():
    s = harness.Settings.quick().capped({"warmup": 2, "budget_s": 10.0})
    assert s.warmup == 1 and s.budget_s == 1.5
    assert harness.Settings().capped({"warmup": 2}).warmup == 2


def test_steady_calls_raise_the_warmup_except_in_quick_runs():
    caps = {"warmup": 3, "steady_calls": 65}
    assert harness.Settings().capped(caps).warmup == 65
    assert harness.Settings.quick().capped(caps).warmup == 1
    from bench import workloads_models
    from functrans import runtime
    from functrans.backends import cpu, cpu_auto
    # the model steps are timed once the facade's backward program runs natively and
    # cpu_backend="auto" has chosen its code (the trial calls run the slower candidates)
    assert harness.Settings().capped(workloads_models.MODEL_SETTINGS).warmup > \
        runtime.NATIVE_RUNS + cpu_auto.calls_to_choose(cpu.CONFIG.native_trials_most)


# ---------------------------------------------------------------------------
# --against, reference ratios, thread settings (issue 30)

def test_reference_ratios_checked_variants_and_failures_while_timed():
    """A variant named torch_eager is the "torch" reference of its workload: every timed
    variant gets its median divided by it; a Checked variant is compared by check() and
    timed by run(); a variant that raises while timed is reported, the others still timed."""
    name = "_test_refs"
    calls = {"check": 0, "run": 0}

    def run():
        calls["run"] += 1
        return np.arange(3.0)

    def check():
        calls["check"] += 1
        return np.arange(3.0)

    def flaky():
        if calls["run"] > 2:
            raise RuntimeError("broke in round 2")
        return np.arange(3.0)
    harness.workload(name)(lambda: {"numpy": lambda: np.arange(3.0),
                                    "torch_eager": lambda: np.arange(3.0),
                                    "checked": harness.Checked(check, run),
                                    "flaky": flaky})
    try:
        rec = harness.run_workload(harness.REGISTRY[name], harness.Settings(
            rounds=3, min_rounds=1, warmup=1, warmup_s=0.0, sample_s=1e-4, budget_s=0.5))
    finally:
        del harness.REGISTRY[name]
    by = {v["name"]: v for v in rec["variants"]}
    assert calls["check"] == 1 and calls["run"] > 1
    assert by["torch_eager"]["vs"] == {"torch": 1.0}
    assert by["checked"]["vs"]["torch"] == pytest.approx(
        by["checked"]["median_s"] / by["torch_eager"]["median_s"])
    assert by["flaky"]["correct"] and "median_s" not in by["flaky"]
    assert "broke in round 2" in by["flaky"]["error"]
    out = io.StringIO()
    harness.print_table([rec], out=out, against={"torch": None})
    assert "vs torch" in out.getvalue() and "FAILED: while timed: RuntimeError" in out.getvalue()


def test_against_without_torch_or_jax_runs_the_rest(tmp_path, monkeypatch, capsys):
    """--against torch,jax where neither imports: says what is missing and how to get it,
    runs the workloads without their variants, exit status 0."""
    monkeypatch.setitem(sys.modules, "torch", None)      # import torch -> ImportError
    monkeypatch.setitem(sys.modules, "jax", None)
    path = tmp_path / "out.json"
    assert harness.main(["--quick", "--only", "dyn_chain_changing_length", "--against",
                         "torch,jax", "--threads", "default", "--json", str(path)]) == 0
    captured = capsys.readouterr()
    assert "--against torch: not available" in captured.err and "oracle" in captured.err
    assert "--against jax: not available" in captured.err
    data = json.loads(path.read_text())
    assert set(data["meta"]["missing"]) == {"torch", "jax"} and data["meta"]["against"] == []
    (rec,) = data["workloads"]
    assert {v["name"] for v in rec["variants"]} == {"numpy", "facade", "grad"}
    assert rec["threads"] == "default"


def test_against_rejects_an_unknown_library():
    with pytest.raises(SystemExit):
        harness.main(["--only", "chain200_eval", "--against", "tensorflow"])


def test_dynamic_chain_pytorch_variant_agrees_with_the_floor():
    pytest.importorskip("torch", reason="--against torch needs the oracle extra")
    harness.set_against(["torch"])
    wl = harness.REGISTRY["dyn_chain_changing_length"]
    case = harness.build(wl)
    assert "torch_eager" in case.variants
    assert harness.check(wl, case) == {"facade": None, "grad": None, "torch_eager": None}
    assert case.refs_of("facade") == {"torch": "torch_eager"}


def test_thread_settings_parse_and_child_environment():
    assert harness.parse_threads("default,1") == ("default", 1)
    assert harness.parse_threads("1, default, 1") == (1, "default")
    with pytest.raises(ValueError, match="neither"):
        harness.parse_threads("0")
    env = harness.thread_env(1)
    assert env["OMP_NUM_THREADS"] == env["OPENBLAS_NUM_THREADS"] == env["MKL_NUM_THREADS"] == "1"
    assert "intra_op_parallelism_threads=1" in env["XLA_FLAGS"]
    assert "--xla_cpu_multi_thread_eigen=false" in env["XLA_FLAGS"]


def test_one_thread_pass_runs_in_a_child_process(tmp_path, capfd):
    path = tmp_path / "out.json"
    assert harness.main(["--quick", "--only", "chain200_eval", "--threads", "1",
                         "--json", str(path)]) == 0
    assert "== threads: 1 ==" in capfd.readouterr().out     # printed by the child
    data = json.loads(path.read_text())
    (rec,) = data["workloads"]
    assert rec["threads"] == 1 and all(v["correct"] for v in rec["variants"])
    child = data["meta"]["threads"]["1"]
    assert child["functrans"] == 1 and child["env"]["OPENBLAS_NUM_THREADS"] == "1"


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW_MODELS
                                  else n for n in MODEL_WORKLOADS])
def test_model_workload_checks_and_steps(name):
    """Without torch the facade is the floor: ft.compile (and ft.jit where the model has
    it) agree with its first two losses, then each variant runs a training step."""
    wl = harness.REGISTRY[name]
    case = harness.build(wl)
    assert case.floor == "facade" and "reference" in case.notes
    errors = harness.check(wl, case)
    assert "ft_compile" in errors and all(e is None for e in errors.values()), errors
    for variant in case.variants.values():
        loss = variant()
        assert np.isfinite(float(loss.detach()))
    assert set(case.notes["first_step_s"]()) == set(case.variants)


def test_model_quick_run_reports_the_functrans_variants(tmp_path):
    path = tmp_path / "out.json"
    assert harness.main(["--quick", "--only", "resnet_block_train_step", "--threads",
                         "default", "--json", str(path)]) == 0
    (rec,) = json.loads(path.read_text())["workloads"]
    by = {v["name"]: v for v in rec["variants"]}
    assert set(by) == {"facade", "ft_compile"} and rec["floor"] == "facade"
    assert by["ft_compile"]["median_s"] > 0 and by["ft_compile"]["vs"] == {}


def test_model_losses_match_pytorch_from_the_same_weights():
    """The facade's and a jitted functional_call step's first two losses against PyTorch
    eager's from the same weights (the check the bench makes with --against torch), on the
    mnist Net (in eval mode, as the check takes them)."""
    pytest.importorskip("torch", reason="--against torch needs the oracle extra")
    harness.set_against(["torch"])
    from bench import workloads_models as wm
    state = wm.initial_state("mnist_net")
    batch = wm.M.batch("mnist_net")
    torch = harness.library("torch")
    want = wm.trainer_variant(torch, "mnist_net", state, batch).check()
    for got in (wm.trainer_variant(ft, "mnist_net", state, batch).check(),
                wm.ft_jit_variant("mnist_net", state, batch).check()):
        harness.compare(got, want, 1e-4, 1e-5, where="mnist_net")


def test_exit_status_counts_functrans_and_floors_not_other_libraries():
    """A torch.compile variant that fails its check is reported, not counted; a functrans
    variant or a floor (PyTorch eager's, which every ratio divides by) that fails is."""
    def rec(*bad, error=None):
        names = ("torch_eager", "torch_compile", "jax_jit", "facade")
        return {"name": "w", "threads": 1, "error": error, "variants": [
            {"name": n, "floor": "torch_eager", "correct": n not in bad,
             **({} if n in bad else {"median_s": 1.0})} for n in names]}
    assert harness.failures([rec()]) == ([], [])
    assert harness.failures([rec("torch_compile", "jax_jit")]) == (
        [], ["w (threads: 1) torch_compile", "w (threads: 1) jax_jit"])
    assert harness.failures([rec("facade", "torch_compile")]) == (
        ["w (threads: 1)"], ["w (threads: 1) torch_compile"])
    assert harness.failures([rec("torch_eager")])[0] == ["w (threads: 1)"]
    assert harness.failures([rec(error="setup failed")])[0] == ["w (threads: 1)"]
