"""Adam's fused native update (optim/adam.py through backends/native/conv.py's adam_steps):
the same bits as the optimizer's NumPy steps (cpu_backend="numpy"), float32 and float64,
every variant it takes (weight decay decoupled or L2, maximize); the NumPy steps where it
does not apply (amsgrad, a non-contiguous parameter); within float32 rounding of torch's
AdamW."""
import numpy as np
import pytest

import functrans as ft
from functrans.backends.native import conv as native_conv, toolchain

pytestmark = pytest.mark.skipif(toolchain.unavailable(), reason="no native toolchain")

SHAPES = ((33, 17), (5,), (8, 4, 3))
STEPS = 5


def _run(cls, dtype, kw, backend=None, make=None, seed=0):
    rng = np.random.default_rng(seed)
    params = [ft.tensor(rng.standard_normal(s).astype(dtype), requires_grad=True)
              for s in SHAPES]
    if make is not None:
        params = [make(p) for p in params]
    grads = [[rng.standard_normal(s).astype(dtype) for s in SHAPES] for _ in range(STEPS)]
    opt = cls(params, **kw)
    saved = ft.config.cpu_backend
    if backend:
        ft.config.update("cpu_backend", backend)
    try:
        for gs in grads:
            for p, g in zip(params, gs):
                p.grad = ft.tensor(np.ascontiguousarray(g.reshape(p.shape)))
            opt.step()
    finally:
        ft.config.update("cpu_backend", saved)
    state = [opt.state[p] for p in params]
    return ([p.detach().numpy().copy() for p in params],
            [s["exp_avg"].numpy().copy() for s in state],
            [s["exp_avg_sq"].numpy().copy() for s in state])


@pytest.fixture
def native_calls(monkeypatch):
    """Per parameter the fused update was offered, whether it made it; and, per step, the
    parameters offered together (native_calls.batches)."""
    calls = _Calls()
    real = native_conv.adam_steps

    def spied():
        update = real()

        def spy(items):
            done = update(items)
            calls.extend(done)
            calls.batches.append(len(items))
            return done
        return spy
    monkeypatch.setattr(native_conv, "adam_steps", spied)
    return calls


class _Calls(list):
    def __init__(self):
        super().__init__()
        self.batches = []


VARIANTS = [(ft.optim.AdamW, dict(lr=3e-3, betas=(0.9, 0.95), weight_decay=0.1)),
            (ft.optim.AdamW, dict(lr=1e-2, weight_decay=0.0, maximize=True)),
            (ft.optim.Adam, dict(lr=1e-2)),
            (ft.optim.Adam, dict(lr=1e-2, weight_decay=0.05, eps=1e-6, maximize=True))]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("cls,kw", VARIANTS)
def test_native_adam_same_bits_as_numpy_steps(cls, kw, dtype, native_calls):
    want = _run(cls, dtype, kw, backend="numpy")
    assert not native_calls
    got = _run(cls, dtype, kw)
    assert native_calls and all(native_calls)
    for g, w in zip(got, want):
        for a, b in zip(g, w):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("make,kw", [
    (lambda p: p, dict(lr=1e-2, amsgrad=True)),
    (lambda p: ft.tensor(np.asfortranarray(p.detach().numpy()), requires_grad=True),
     dict(lr=1e-2))])
def test_adam_numpy_steps_where_native_does_not_apply(make, kw, native_calls):
    want = _run(ft.optim.AdamW, np.float32, kw, backend="numpy", make=make)
    got = _run(ft.optim.AdamW, np.float32, kw, make=make)
    if kw.get("amsgrad"):
        assert not native_calls
    else:
        assert native_calls.count(False) == 2 * STEPS   # the 2-D and 3-D: not C-contiguous
    for g, w in zip(got, want):
        for a, b in zip(g, w):
            np.testing.assert_array_equal(a, b)


def test_native_adam_updates_every_parameter_in_one_call(native_calls):
    """One kernel call a step for all parameters of all groups (the Adam/AdamW update over
    all parameters at once), more than one call takes (conv.ADAM_CALL) split in calls: the
    same bits as the NumPy steps, float32 and float64 parameters side by side."""
    rng = np.random.default_rng(1)
    n = 2 * native_conv.ADAM_CALL + 20        # float32 ones over ADAM_CALL, float64 ones not

    def run(backend=None):
        params = [ft.tensor(rng.standard_normal((k % 5 + 1, 3)).astype(
            np.float64 if k % 7 == 0 else np.float32), requires_grad=True) for k in range(n)]
        opt = ft.optim.AdamW([{"params": params[:10], "weight_decay": 0.0},
                              {"params": params[10:]}], lr=1e-2)
        saved = ft.config.cpu_backend
        if backend:
            ft.config.update("cpu_backend", backend)
        try:
            for _ in range(3):
                for p in params:
                    p.grad = ft.tensor(rng.standard_normal(p.shape).astype(p.dtype))
                opt.step()
        finally:
            ft.config.update("cpu_backend", saved)
        return [p.detach().numpy() for p in params]
    state = rng.bit_generator.state
    want = run("numpy")
    assert not native_calls
    rng.bit_generator.state = state
    got = run()
    assert native_calls.batches == [n] * 3 and all(native_calls)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)


def test_native_adamw_matches_torch():
    torch = pytest.importorskip("torch")
    kw = dict(lr=3e-3, betas=(0.9, 0.95), weight_decay=0.1)
    got = _run(ft.optim.AdamW, np.float32, kw)[0]
    rng = np.random.default_rng(0)
    params = [torch.tensor(rng.standard_normal(s).astype(np.float32), requires_grad=True)
              for s in SHAPES]
    grads = [[rng.standard_normal(s).astype(np.float32) for s in SHAPES] for _ in range(STEPS)]
    opt = torch.optim.AdamW(params, foreach=False, **kw)
    for gs in grads:
        for p, g in zip(params, gs):
            p.grad = torch.tensor(g)
        opt.step()
    for a, p in zip(got, params):
        # float32 rounding of values near 1 over STEPS updates: a few ulps
        np.testing.assert_allclose(a, p.detach().numpy(), rtol=0, atol=4 * 2.0 ** -23 * 4)


def test_native_adam_bumps_versions_once(native_calls):
    """Each tensor the fused step writes has its version bumped (once), so a graph that
    saved the parameter before the step refuses to run backward, naming the step."""
    p = ft.tensor(np.ones((4, 4), np.float32), requires_grad=True)
    opt = ft.optim.AdamW([p], lr=0.1)
    y = (p * p).sum()
    p.grad = ft.ones_like(p)
    v0 = p._version
    opt.step()
    assert native_calls == [True] and p._version == v0 + 1
    assert opt.state[p]["exp_avg"]._version == 1
    with pytest.raises(RuntimeError, match="AdamW.step"):
        y.backward()
