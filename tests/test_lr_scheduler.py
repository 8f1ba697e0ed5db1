"""ft.optim.lr_scheduler against value sequences derived from the closed forms documented
for torch.optim.lr_scheduler, plus its warning, state dicts and argument errors."""
import math
import warnings

import pytest

import functrans as ft
from functrans.optim import lr_scheduler as S


def _opt(lr=1.0, cls=None, **kw):
    return (cls or ft.optim.SGD)([ft.zeros(2, requires_grad=True)], lr=lr, **kw)


def _lrs(opt, sched, n, metric=None):
    """The lr in use at epochs 0..n-1 (step() after each epoch's optimizer.step())."""
    out = []
    for _ in range(n):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return out


def _close(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert math.isclose(g, w, rel_tol=1e-12, abs_tol=1e-15), (got, want)


def test_step_multistep_exponential():
    opt = _opt(0.05)
    _close(_lrs(opt, S.StepLR(opt, step_size=3, gamma=0.1), 8),
           [0.05 * 0.1 ** (e // 3) for e in range(8)])
    opt = _opt(1.0)
    _close(_lrs(opt, S.MultiStepLR(opt, milestones=[2, 5, 5], gamma=0.5), 7),
           [1, 1, .5, .5, .5, .125, .125])
    opt = _opt(2.0)
    _close(_lrs(opt, S.ExponentialLR(opt, gamma=0.9), 6), [2.0 * 0.9 ** e for e in range(6)])


def test_cosine_annealing_follows_the_cosine_beyond_t_max():
    """The recursive form reproduces eta_min + (base - eta_min)(1 + cos(pi e / T)) / 2 for
    every epoch, also after T_max (where it rises again, as torch's does)."""
    opt = _opt(0.5)
    T, lo = 5, 0.01
    want = [lo + (0.5 - lo) * (1 + math.cos(math.pi * e / T)) / 2 for e in range(3 * T + 2)]
    got = _lrs(opt, S.CosineAnnealingLR(opt, T_max=T, eta_min=lo), 3 * T + 2)
    for g, w in zip(got, want):
        assert math.isclose(g, w, rel_tol=1e-9, abs_tol=1e-12)


def test_lambda_multiplicative_linear_constant():
    opt = _opt(0.1)
    _close(_lrs(opt, S.LambdaLR(opt, lambda e: 1 / (e + 1)), 5), [0.1 / (e + 1) for e in range(5)])
    opt = _opt(1.0)
    _close(_lrs(opt, S.MultiplicativeLR(opt, lambda e: 0.95), 5), [0.95 ** e for e in range(5)])
    opt = _opt(1.0)
    _close(_lrs(opt, S.LinearLR(opt, start_factor=0.25, total_iters=4), 7),
           [0.25 + 0.75 * min(e, 4) / 4 for e in range(7)])
    opt = _opt(0.05)      # torch's documented example: 0.025 until epoch 40, then 0.05
    got = _lrs(opt, S.ConstantLR(opt, factor=0.5, total_iters=40), 45)
    _close(got, [0.025] * 40 + [0.05] * 5)


def test_sequential_lr_documented_example():
    """torch's example: ConstantLR(0.1, 20) then ExponentialLR(0.9) from milestone 20:
    0.005 until epoch 19, then 0.05, 0.045, 0.0405."""
    opt = _opt(0.05)
    s1 = S.ConstantLR(opt, factor=0.1, total_iters=20)
    s2 = S.ExponentialLR(opt, gamma=0.9)
    sched = S.SequentialLR(opt, schedulers=[s1, s2], milestones=[20])
    got = _lrs(opt, sched, 23)
    _close(got, [0.005] * 20 + [0.05, 0.045, 0.0405])
    assert sched.get_last_lr() == [opt.param_groups[0]["lr"]]


def test_closed_form_when_an_epoch_is_given():
    opt = _opt(1.0)
    sched = S.StepLR(opt, step_size=2, gamma=0.5)
    opt.step()
    with pytest.warns(UserWarning, match="The epoch parameter in `scheduler.step\\(\\)`"):
        sched.step(5)
    assert opt.param_groups[0]["lr"] == 0.25 and sched.last_epoch == 5


def test_one_cycle_lr():
    """Phase 1 (30% of the steps): initial_lr = max_lr/25 up to max_lr by cosine; phase 2 down
    to initial_lr/1e4; momentum cycles 0.95 -> 0.85 -> 0.95. Linear annealing checked too."""
    total, max_lr = 10, 1.0
    for strategy in ("cos", "linear"):
        opt = _opt(0.1, momentum=0.9)
        sched = S.OneCycleLR(opt, max_lr=max_lr, total_steps=total, anneal_strategy=strategy)
        ann = ((lambda a, b, p: b + (a - b) / 2 * (math.cos(math.pi * p) + 1))
               if strategy == "cos" else (lambda a, b, p: a + (b - a) * p))
        lo, end1 = max_lr / 25, 0.3 * total - 1
        want_lr, want_m = [], []
        for t in range(total):
            if t <= end1:
                p = t / end1
                want_lr.append(ann(lo, max_lr, p))
                want_m.append(ann(0.95, 0.85, p))
            else:
                p = (t - end1) / (total - 1 - end1)
                want_lr.append(ann(max_lr, lo / 1e4, p))
                want_m.append(ann(0.85, 0.95, p))
        got_lr, got_m = [], []
        for t in range(total):
            got_lr.append(opt.param_groups[0]["lr"])
            got_m.append(opt.param_groups[0]["momentum"])
            opt.step()
            if t < total - 1:
                sched.step()
        _close(got_lr, want_lr)
        _close(got_m, want_m)
        sched.step()
        with pytest.raises(ValueError, match="Tried to step 11 times. The specified number of "
                                             "total steps is 10"):
            sched.step()
    opt = _opt(0.1, cls=ft.optim.Adam)
    S.OneCycleLR(opt, max_lr=0.1, epochs=2, steps_per_epoch=5)
    assert opt.param_groups[0]["betas"] == (0.95, 0.999)
    with pytest.raises(ValueError, match="You must define either total_steps OR"):
        S.OneCycleLR(_opt(), max_lr=0.1)


def test_reduce_lr_on_plateau():
    opt = _opt(1.0)
    sched = S.ReduceLROnPlateau(opt, mode="min", factor=0.5, patience=2, cooldown=1)
    lrs = []
    for loss in [1.0, 0.9, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95, 0.5]:
        opt.step()
        sched.step(loss)
        lrs.append(sched.get_last_lr()[0])
    # bad epochs after the best 0.9: 1, 2, 3 > patience -> halve (epoch 5), cooldown 1 epoch,
    # then 1, 2, 3 -> halve again (epoch 9)
    assert lrs == [1.0, 1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.5, 0.25, 0.25]
    opt = _opt(1.0)
    sched = S.ReduceLROnPlateau(opt, mode="max", patience=0, threshold=0.1,
                                threshold_mode="abs", min_lr=0.05)
    for acc in [0.5, 0.55, 0.55, 0.7]:
        sched.step(acc)
    assert opt.param_groups[0]["lr"] == 0.05     # 0.1 twice, floored at min_lr
    with pytest.raises(ValueError, match="Factor should be < 1.0."):
        S.ReduceLROnPlateau(_opt(), factor=1.0)
    with pytest.raises(ValueError, match="mode avg is unknown!"):
        S.ReduceLROnPlateau(_opt(), mode="avg")


def test_warning_when_scheduler_steps_before_optimizer():
    opt = _opt()
    sched = S.StepLR(opt, step_size=1)
    with pytest.warns(UserWarning, match=r"Detected call of `lr_scheduler.step\(\)` before "
                                         r"`optimizer.step\(\)`. In PyTorch 1.1.0 and later"):
        sched.step()
    opt = _opt()
    sched = S.StepLR(opt, step_size=1)
    opt.step()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sched.step()
    opt = _opt()
    sched = S.StepLR(opt, step_size=1)
    opt.step = lambda closure=None: None       # replaced after the scheduler wrapped it
    with pytest.warns(UserWarning, match=r"Seems like `optimizer.step\(\)` has been overridden "
                                         r"after learning rate scheduler initialization"):
        sched.step()


def test_state_dict_round_trip_and_resume():
    opt = _opt(1.0)
    sched = S.CosineAnnealingLR(opt, T_max=10)
    _lrs(opt, sched, 4)
    state = sched.state_dict()
    assert "optimizer" not in state and state["last_epoch"] == 4
    opt2 = _opt(1.0)
    sched2 = S.CosineAnnealingLR(opt2, T_max=10)
    sched2.load_state_dict(state)
    opt2.param_groups[0]["lr"] = opt.param_groups[0]["lr"]
    _close(_lrs(opt2, sched2, 3), _lrs(opt, sched, 3))
    # resuming with last_epoch needs 'initial_lr' in the groups
    with pytest.raises(KeyError, match="param 'initial_lr' is not specified in param_groups\\[0\\] "
                                       "when resuming scheduler with last_epoch >= 0"):
        S.StepLR(_opt(), step_size=2, last_epoch=3)
    # a LambdaLR saves a callable object's state, not a function's
    opt = _opt()

    class Warmup:
        def __init__(self):
            self.n = 3

        def __call__(self, e):
            return min(1.0, (e + 1) / self.n)

    w = Warmup()
    sched = S.LambdaLR(opt, [w])
    w.n = 7
    sd = sched.state_dict()
    assert sd["lr_lambdas"] == [{"n": 7}]
    w.n = 1
    sched.load_state_dict(sd)
    assert w.n == 7


def test_argument_errors():
    with pytest.raises(TypeError, match="int is not an Optimizer"):
        S.StepLR(3, step_size=1)
    with pytest.raises(ValueError, match="Constant multiplicative factor expected to be between "
                                         "0 and 1."):
        S.ConstantLR(_opt(), factor=2)
    with pytest.raises(ValueError, match="Starting multiplicative factor expected to be greater "
                                         "than 0 and less or equal to 1."):
        S.LinearLR(_opt(), start_factor=0)
    opt = _opt()
    with pytest.raises(ValueError, match="Sequential Schedulers expects number of schedulers "
                                         "provided to be one more than the number of milestone"):
        S.SequentialLR(opt, [S.StepLR(opt, 1)], milestones=[3])
    with pytest.raises(ValueError, match="Expected 1 lr_lambdas, but got 2"):
        S.LambdaLR(_opt(), [lambda e: 1, lambda e: 1])


def test_custom_scheduler_subclass_and_tensor_metric():
    """A user's scheduler written against torch's base class (its old name too): get_lr from
    base_lrs and last_epoch. ReduceLROnPlateau takes a 0-d Tensor as its metric."""
    class Warmup(S._LRScheduler):
        def __init__(self, optimizer, steps, last_epoch=-1):
            self.steps = steps
            super().__init__(optimizer, last_epoch)

        def get_lr(self):
            return [base * min(1.0, (self.last_epoch + 1) / self.steps) for base in self.base_lrs]

    opt = _opt(0.4)
    _close(_lrs(opt, Warmup(opt, 4), 6), [0.1, 0.2, 0.3, 0.4, 0.4, 0.4])
    opt = _opt(1.0)
    sched = S.ReduceLROnPlateau(opt, patience=0)
    sched.step(ft.tensor(1.0))
    sched.step(ft.tensor(2.0))
    assert sched.get_last_lr() == [0.1]
