"""The two schedules of one reverse pass give the same numbers: every model here trains
under the first-sight schedule (the tape equation by equation, executor.reverse_pass) and
under the derived whole program (executor.schedule forces either), from the same weights
and batches, alternating two batch sizes; losses, every .grad and every parameter agree
after each step. The same for ft.grad / ft.vjp functions, hooks, retained gradients,
autograd.Functions, early delivery to post-accumulate hooks and a gradient penalty under
anomaly mode (which always runs the first-sight schedule)."""
import numpy as np
import pytest

import functrans as ft
from functrans import executor
from functrans.backends import memory
from functrans.facade import engine

nn = ft.nn
F = ft.nn.functional
RTOL = 1e-10


class Outputs(nn.Module):
    def __init__(self, rnn):
        super().__init__()
        self.rnn = rnn

    def forward(self, x):
        return self.rnn(x)[0]


class SelfAttention(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.attn = nn.MultiheadAttention(d, 2)

    def forward(self, x):
        return self.attn(x, x, x, need_weights=False)[0]


class Square(ft.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g


class Hooked(nn.Module):
    """A layer whose output has a tensor hook and a retained gradient, then a Function."""
    def __init__(self, d):
        super().__init__()
        self.lin = nn.Linear(d, d)

    def forward(self, x):
        h = self.lin(x)
        if h.requires_grad:
            h.register_hook(lambda g: g * 0.5)
            h.retain_grad()
        return Square.apply(ft.tanh(h))


def _seq(rng, b):
    return rng.standard_normal((5, b, 8)), rng.integers(0, 7, 5 * b)


MODELS = {
    "mlp": (lambda: nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 16), nn.Tanh(),
                                  nn.Linear(16, 7)),
            lambda rng, b: (rng.standard_normal((b, 8)), rng.integers(0, 7, b)), None),
    "cnn": (lambda: nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                                  nn.MaxPool2d(2), nn.Conv2d(4, 4, 3), nn.AvgPool2d(2),
                                  nn.Flatten(), nn.Linear(4, 7)),
            lambda rng, b: (rng.standard_normal((b, 2, 8, 8)), rng.integers(0, 7, b)), None),
    "lstm_lm": (lambda: nn.Sequential(nn.Embedding(11, 8), Outputs(nn.LSTM(8, 8, 2)),
                                      nn.Linear(8, 7)),
                lambda rng, b: (rng.integers(0, 11, (5, b)), rng.integers(0, 7, 5 * b)), 1.0),
    "gru_attention": (lambda: nn.Sequential(Outputs(nn.GRU(8, 8)), SelfAttention(8),
                                            nn.LayerNorm(8), nn.Linear(8, 7)), _seq, None),
    "transformer": (lambda: nn.Sequential(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0),
                                          Outputs(nn.LSTM(8, 4, bidirectional=True)),
                                          nn.Linear(8, 7)), _seq, 0.5),
    "hooks_and_function": (lambda: nn.Sequential(nn.Linear(8, 8), Hooked(8), nn.Linear(8, 7)),
                           lambda rng, b: (rng.standard_normal((b, 8)),
                                           rng.integers(0, 7, b)), None),
}


def _train(name, which, steps=4):
    build, data, clip = MODELS[name]
    ft.manual_seed(0)
    model = build().double()
    opt = ft.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    rng = np.random.default_rng(1)
    batches = [data(rng, b) for b in (3, 2)]
    post = []
    first = next(iter(model.parameters()))
    first.register_post_accumulate_grad_hook(lambda p: post.append(p.grad.numpy().copy()))
    log = []
    with executor.schedule(which):
        for step in range(steps):
            x, y = batches[step % 2]
            x = ft.tensor(x) if x.dtype.kind == "i" else ft.tensor(x, dtype=ft.float64)
            opt.zero_grad()
            out = model(x)
            loss = F.cross_entropy(out.reshape(-1, 7), ft.tensor(y))
            loss.backward()
            if clip is not None:
                nn.utils.clip_grad_norm_(model.parameters(), clip)
            log.append(("loss", loss.item()))
            log += [("grad " + n, p.grad.numpy().copy()) for n, p in model.named_parameters()]
            opt.step()
            log += [(n, p.detach().numpy().copy()) for n, p in model.named_parameters()]
    log.append(("post-accumulate hook", post))
    return log


def _same(a, b):
    assert len(a) == len(b)
    for (na, va), (nb, vb) in zip(a, b):
        assert na == nb
        np.testing.assert_allclose(np.asarray(va, dtype=float), np.asarray(vb, dtype=float),
                                   rtol=RTOL, atol=1e-12, err_msg=na)


@pytest.mark.parametrize("name", list(MODELS))
def test_models_train_the_same_under_both_schedules(name, monkeypatch):
    runs = []
    real = engine.run_first_sight
    monkeypatch.setattr(engine, "run_first_sight", lambda *a, **k: runs.append(1) or real(*a, **k))
    first = _train(name, "first-sight")
    assert len(runs) == 4                   # every step ran equation by equation
    _same(first, _train(name, "program"))
    assert len(runs) == 4                   # and none here


def test_auto_runs_first_sight_then_the_program_and_agrees():
    """Under "auto" the first step of a structure runs by the first-sight schedule and the
    later ones by its derived program: the same numbers as either forced schedule."""
    executor.clear_cache()
    _same(_train("lstm_lm", "auto"), _train("lstm_lm", "program"))


def test_functions_under_both_schedules():
    def f(w, x):
        h = ft.numpy.tanh(x @ w[0]) * ft.numpy.exp(-x.sum())
        carry, ys = ft.lax.scan(lambda c, r: (c * 0.9 + r, ft.numpy.sin(c)), h[0], h)
        return (ys ** 2).sum() + ft.numpy.logaddexp(carry, 1.0).sum()

    rng = np.random.default_rng(0)
    w = rng.standard_normal((2, 3, 3))
    x = rng.standard_normal((4, 3))
    got = {}
    for which in ("first-sight", "program"):
        with executor.schedule(which):
            got[which] = [ft.grad(f, argnums=(0, 1))(w, x) for _ in range(3)]
            _, vjp = ft.vjp(f, w, x)
            got[which].append(vjp(np.float64(1.5)))
    for a, b in zip(got["first-sight"], got["program"]):
        for u, v in zip(a, b):
            np.testing.assert_allclose(u, v, rtol=RTOL)


def test_gradient_penalty_under_anomaly_mode_matches_the_program():
    """create_graph under anomaly mode runs the first-sight schedule with recorded ops (the
    values read are tensors connected to the graph): the double backward agrees with the
    derived program's."""
    def penalty():
        ft.manual_seed(0)
        critic = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 1)).double()
        x = ft.tensor(np.random.default_rng(3).standard_normal((6, 2)), requires_grad=True)
        (g,) = ft.autograd.grad(critic(x).sum(), x, create_graph=True)
        ((g.norm(dim=1) - 1) ** 2).mean().backward()
        return [None if p.grad is None else p.grad.numpy() for p in critic.parameters()]
    want = penalty()
    with ft.autograd.set_detect_anomaly(True):
        got = penalty()
    assert [a is None for a in got] == [b is None for b in want] == [False] * 3 + [True]
    for a, b in zip(got[:3], want[:3]):
        np.testing.assert_allclose(a, b, rtol=RTOL)


def test_the_schedule_name_is_checked():
    with pytest.raises(ValueError, match="schedule must be one of"):
        with executor.schedule("eager"):
            pass


def test_evicted_programs_are_derived_again_with_the_same_numbers():
    """Past the byte budget the least recently used programs go; a structure whose program
    was evicted runs and derives it again, with the same gradients."""
    limit = memory.DERIVED.limit
    try:
        memory.DERIVED.limit = 1 << 20
        evictions = memory.DERIVED.evictions
        first = _train("gru_attention", "auto", steps=6)
        assert memory.DERIVED.evictions > evictions
        assert memory.DERIVED.held <= memory.DERIVED.limit
    finally:
        memory.DERIVED.limit = limit
    _same(first, _train("gru_attention", "program", steps=6))
