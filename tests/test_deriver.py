"""`ft.vjp` and `Tensor.backward()` derive their programs with one deriver (reverse.derive):
the facade lowers its recorded graph into the same tape form vjp records."""
import numpy as np

import functrans as ft
from functrans import executor, reverse
from functrans.facade import engine, lower

XV = np.array([0.1, 0.2, 0.3], np.float32)
WV = np.array([1.0, 2.0, 3.0], np.float32)
CT = np.array([1.0, 1.0, 2.0], np.float32)


def _spy(monkeypatch):
    """Every program derived from now on, whichever face asked for it."""
    got = []
    real = reverse.derive

    def spy(*args, **kwargs):
        d = real(*args, **kwargs)
        got.append(d)
        return d
    monkeypatch.setattr(reverse, "derive", spy)
    monkeypatch.setattr(executor, "derive", spy)
    monkeypatch.setattr(lower, "derive", spy)
    return got


def test_facade_lowers_into_the_core_deriver():
    assert lower.derive is reverse.derive


def test_derive_counter_moves_for_vjp_and_for_backward():
    executor.clear_cache()
    engine.clear_cache()
    f = lambda x: ft.numpy.tanh(x) * x      # noqa: E731
    ft.vjp(f, np.arange(5.0))               # a new structure: interpreted per equation,
    before = reverse.DERIVE_STATS["derived"]    # (which derives per-signature programs)
    ft.vjp(f, np.arange(5.0))               # it repeats: the whole program is derived
    assert reverse.DERIVE_STATS["derived"] == before + 1
    ft.vjp(f, np.arange(5.0))               # and cached
    assert reverse.DERIVE_STATS["derived"] == before + 1
    x = ft.tensor(np.arange(5.0), requires_grad=True)
    loss = (ft.tanh(x) * x).sum()
    mid = reverse.DERIVE_STATS["derived"]       # recording may derive per-op programs
    loss.backward()                             # a new structure: run node by node
    assert reverse.DERIVE_STATS["derived"] == mid
    x.grad = None
    (ft.tanh(x) * x).sum().backward()           # it repeats: derived once
    assert reverse.DERIVE_STATS["derived"] == mid + 1
    x.grad = None
    (ft.tanh(x) * x).sum().backward()           # and cached: nothing derived
    assert reverse.DERIVE_STATS["derived"] == mid + 1


def test_facade_graph_and_vjp_derive_identical_programs(monkeypatch):
    got = _spy(monkeypatch)
    executor.clear_cache()
    engine.clear_cache()
    f = lambda x, w: ft.numpy.sin(x) * w     # noqa: E731
    ft.vjp(f, XV, WV)                       # the first call is interpreted per equation
    _, vjp = ft.vjp(f, XV, WV)
    gx, gw = vjp(CT)
    from_vjp = got[-1]
    x = ft.tensor(XV, requires_grad=True)
    w = ft.tensor(WV, requires_grad=True)
    for _ in range(2):                        # a new structure runs node by node;
        (ft.sin(x) * w).backward(ft.tensor(CT))   # when it repeats, its program is derived
    x.grad = w.grad = None
    engine.clear_cache()
    (ft.sin(x) * w).backward(ft.tensor(CT))   # (the signatures' infos are settled now)
    x.grad = w.grad = None
    y = ft.sin(x) * w
    del got[:]
    y.backward(ft.tensor(CT))
    (from_facade,) = got
    assert str(from_facade.residual) == str(from_vjp.residual)
    assert str(from_facade.backward) == str(from_vjp.backward)
    assert from_facade.value_idx == from_vjp.value_idx
    np.testing.assert_allclose(x.grad.numpy(), gx)
    np.testing.assert_allclose(w.grad.numpy(), gw)
