"""ft.compile: captured facade programs give eager's values and gradients, guard what they
depend on, record recompiles and graph breaks with reasons, run hooks, and leave no state
behind when capture fails."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import functrans as ft
import functrans.numpy as fnp
import functrans.nn as nn
import functrans.nn.functional as F
from functrans import core
from functrans.compiler.compiled import CompileError, GraphBreakWarning, RecompileWarning
from functrans.facade.grad_mode import STATE as GS

pytestmark = pytest.mark.usefixtures("x64")  # float64 references: conftest.x64


@pytest.fixture(autouse=True)
def _quiet_breaks():
    """Graph breaks warn once per compiled function; the tests check them explicitly."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GraphBreakWarning)
        yield


def _rand(*shape, seed=0, dtype=np.float32):
    return ft.tensor(np.random.default_rng(seed).standard_normal(shape).astype(dtype))


def _mlp(seed=0, dtype=None):
    ft.manual_seed(seed)
    m = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 16), nn.ReLU(),
                      nn.Linear(16, 4))
    return m.double() if dtype == np.float64 else m


def _clone(m, make):
    m2 = make()
    m2.load_state_dict(m.state_dict())
    return m2


def _grads(params):
    return [p.grad.numpy().copy() for p in params]


def _close(a, b, tol=1e-6):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


# ---------------------------------------------------------------------------
# values and gradients


def test_mlp_values_and_grads_equal_eager():
    m = _mlp(dtype=np.float64)
    m2 = _clone(m, lambda: _mlp(1, np.float64))
    cm = ft.compile(m)
    x = _rand(5, 6, dtype=np.float64).requires_grad_()
    x2 = x.detach().clone().requires_grad_()
    y, y2 = cm(x), m2(x2)
    assert y.grad_fn.name() == "CompiledFunctionBackward"
    _close(y.detach(), y2.detach(), 1e-12)
    (y * y).sum().backward()
    (y2 * y2).sum().backward()
    _close(x.grad, x2.grad, 1e-12)
    for g, g2 in zip(_grads(m.parameters()), _grads(m2.parameters())):
        _close(g, g2, 1e-12)


def test_cnn_layer_values_and_grads_equal_eager():
    def make():
        ft.manual_seed(3)
        return nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Flatten(), nn.Linear(4 * 3 * 3, 5))
    m = make()
    m2 = _clone(m, make)
    x = _rand(3, 2, 6, 6, seed=1)
    y = ft.compile(m)(x)
    y2 = m2(x)
    _close(y.detach(), y2.detach(), 1e-5)
    F.cross_entropy(y, ft.tensor([0, 3, 4])).backward()
    F.cross_entropy(y2, ft.tensor([0, 3, 4])).backward()
    for g, g2 in zip(_grads(m.parameters()), _grads(m2.parameters())):
        _close(g, g2, 1e-5)


def test_backward_reads_residuals_and_recomputes_nothing():
    """The backward program of a compiled call holds no forward equation: it reads the
    residuals (tanh's output and its derivative) the forward computed."""
    m = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
    x = _rand(5, 4)
    loss = ft.compile(m)(x).sum()
    bwd = ft.autograd.backward_jaxpr(loss)
    names = [e.primitive.name for e in bwd.eqns]
    assert "tanh" not in names and "compiled" not in names, names
    before = ft.jit_stats()["compiles"]
    loss.backward()                     # the backward program is lowered by the jit pipeline
    assert ft.jit_stats()["compiles"] == before + 1


@pytest.mark.parametrize("opt_name", ["SGD", "Adam"])
def test_training_loop_same_losses_as_eager(opt_name):
    """Several optimizer steps (dropout included): compiled and eager give the same losses
    and parameters; optimizer updates are seen because parameters are inputs."""
    rng = np.random.default_rng(0)
    x = ft.tensor(rng.standard_normal((8, 6)).astype(np.float32))
    y = ft.tensor(rng.integers(0, 4, 8))

    def run(compiled):
        ft.manual_seed(0)
        m = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 4))
        f = ft.compile(m) if compiled else m
        kw = {"momentum": 0.9} if opt_name == "SGD" else {}
        opt = getattr(ft.optim, opt_name)(m.parameters(), lr=0.05, **kw)
        ft.manual_seed(1)
        losses = []
        for _ in range(5):
            opt.zero_grad()
            loss = F.cross_entropy(f(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses, [p.detach().numpy().copy() for p in m.parameters()], f
    le, pe, _ = run(False)
    lc, pc, f = run(True)
    _close(lc, le, 1e-6)
    for a, b in zip(pc, pe):
        _close(a, b, 1e-6)
    st = f.compile_stats()
    assert st["compiles"] == 1 and st["cache_hits"] == 4 and st["recompiles"] == 0


def test_batchnorm_running_stats_written_back():
    def make():
        ft.manual_seed(2)
        return nn.Sequential(nn.Linear(3, 5), nn.BatchNorm1d(5), nn.ReLU())
    m = make()
    m2 = _clone(m, make)
    cm = ft.compile(m)
    bn, bn2 = m[1], m2[1]
    v0, v20 = bn.running_mean._version, bn2.running_mean._version
    for seed in range(3):
        x = _rand(6, 3, seed=seed)
        _close(cm(x).detach(), m2(x).detach(), 1e-6)
    _close(bn.running_mean, bn2.running_mean, 1e-6)
    _close(bn.running_var, bn2.running_var, 1e-6)
    assert bn.num_batches_tracked.item() == 3
    assert bn.running_mean._version - v0 == bn2.running_mean._version - v20 == 6


def test_detach_and_no_grad_inside_cut_the_gradient_as_eager():
    w = ft.tensor([0.5, -1.0, 2.0], requires_grad=True)

    def f(x):
        with ft.no_grad():
            scale = (x * w).norm()
        d = (x * w).detach()
        return ((x * w) / scale + d * w).sum()
    x = _rand(3)
    ft.compile(f)(x).backward()
    gc = w.grad.clone()
    w.grad = None
    f(x).backward()
    _close(gc, w.grad, 1e-6)


def test_nested_functional_grad_inside():
    """ft.func.grad inside a compiled function gives a Tensor without history, as eager."""
    lin = nn.Linear(3, 3)

    def inner(w, x):
        return fnp.sum(fnp.tanh(x @ w) ** 2)

    def f(w, x):
        g = ft.func.grad(inner)(w, x)
        h = ft.func.grad(lambda v: fnp.sum(ft.func.grad(inner)(v, x) ** 2))(w)
        return (lin(x) * (g.sum() + h.sum())).sum()
    w, x = _rand(3, 3, seed=4), _rand(2, 3, seed=5)
    cf = ft.compile(f)
    out = cf(w, x)
    assert not cf.graph_breaks
    out.backward()
    gc = lin.weight.grad.clone()
    lin.weight.grad = None
    out2 = f(w, x)
    out2.backward()
    _close(out.detach(), out2.detach(), 1e-5)
    _close(gc, lin.weight.grad, 1e-5)


# ---------------------------------------------------------------------------
# gradient penalties: a backward inside the compiled function


def _critic():
    ft.manual_seed(0)
    return nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 1)).double()


def test_wgan_gp_step_with_create_graph_matches_eager():
    rng = np.random.default_rng(0)
    real = ft.tensor(rng.standard_normal((6, 2)))
    fake = ft.tensor(rng.standard_normal((6, 2)))
    alpha = ft.tensor(rng.random((6, 1)))

    def run(compiled):
        D = _critic()

        def critic_loss(real, fake, alpha):
            interp = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
            g, = ft.autograd.grad(D(interp).sum(), interp, create_graph=True)
            gp = ((g.norm(2, dim=1) - 1) ** 2).mean()
            return D(fake).mean() - D(real).mean() + 10 * gp
        f = ft.compile(critic_loss) if compiled else critic_loss
        opt = ft.optim.Adam(D.parameters(), lr=1e-2)
        losses = []
        for _ in range(3):
            opt.zero_grad()
            loss = f(real, fake, alpha)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses, [p.detach().numpy().copy() for p in D.parameters()], f
    le, pe, _ = run(False)
    lc, pc, f = run(True)
    assert not f.graph_breaks and f.compile_stats()["compiles"] == 1
    _close(lc, le, 1e-12)
    for a, b in zip(pc, pe):
        _close(a, b, 1e-12)


def test_double_backward_through_compiled_call():
    """create_graph=True on the backward of a compiled call: the second derivative is the
    same as eager's (the residuals are recomputed differentiably, not frozen)."""
    lin = nn.Linear(3, 1).double()
    f = ft.compile(lambda x: lin(x).tanh().sum())
    x = _rand(4, 3, dtype=np.float64).requires_grad_()
    g, = ft.autograd.grad(f(x), x, create_graph=True)
    (g * g).sum().backward()
    gc = lin.weight.grad.clone()
    x2 = x.detach().clone().requires_grad_()
    lin.weight.grad = None
    g2, = ft.autograd.grad(lin(x2).tanh().sum(), x2, create_graph=True)
    (g2 * g2).sum().backward()
    _close(g.detach(), g2.detach(), 1e-12)
    _close(gc, lin.weight.grad, 1e-12)


@pytest.mark.parametrize("act", [nn.Tanh, nn.GELU, nn.ReLU])
def test_gradient_penalty_on_a_compiled_model_over_steps(act):
    """A gradient penalty ((g - 1)^2, the scalar a node input no backward reads) on the
    input gradient of a compiled model, several steps: the third backward runs the
    whole-graph program, which recomputed g - 1 from g and the 1 nobody kept
    (InternalEngineError) where the recording had saved g - 1; the gradients are eager's at
    every step."""
    def run(compiled):
        ft.manual_seed(0)
        m = nn.Sequential(nn.Linear(6, 16), act(), nn.Linear(16, 1)).double()
        f = ft.compile(m) if compiled else m
        grads = []
        for _ in range(4):
            x = ft.randn(5, 6, dtype=ft.float64, requires_grad=True)
            y = f(x).sum()
            g, = ft.autograd.grad(y, x, create_graph=True)
            for p in m.parameters():
                p.grad = None
            (y + ((g - 1) ** 2).sum()).backward()
            grads.append([p.grad.numpy().copy() for p in m.parameters()])
        return grads
    for a, b in zip(run(False), run(True), strict=True):
        for u, v in zip(a, b, strict=True):
            _close(v, u, 1e-12)


# ---------------------------------------------------------------------------
# guards and recompiles


def test_recompile_on_new_batch_shape_with_reason():
    m = _mlp()
    cm = ft.compile(m)
    before = ft.compile_stats()["recompiles"]
    cm(_rand(8, 6))
    cm(_rand(8, 6, seed=1))
    cm(_rand(3, 6))                         # the last short batch
    cm(_rand(8, 6, seed=2))                 # back to a cached shape: no compile
    st = cm.compile_stats()
    assert st["compiles"] == 2 and st["recompiles"] == 1 and st["cache_hits"] == 2
    assert cm.recompile_reasons == [
        "Sequential: argument 'input' changed shape: (8, 6) -> (3, 6)"]
    assert ft.compile_stats()["recompiles"] == before + 1


def test_train_eval_switch_guard():
    m = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
    cm = ft.compile(m)
    x = _rand(2, 4)
    cm(x)
    m.eval()
    y = cm(x)
    _close(y.detach(), m(x).detach())          # no dropout in eval mode
    assert "switched to eval mode" in cm.recompile_reasons[-1]
    m.train()
    cm(x)
    assert cm.compile_stats()["compiles"] == 2         # train program reused


def test_requires_grad_and_grad_mode_guards():
    m = _mlp()
    cm = ft.compile(m)
    x = _rand(4, 6)
    assert cm(x).requires_grad
    xr = x.clone().requires_grad_()
    cm(xr).sum().backward()
    assert xr.grad is not None
    assert "changed requires_grad: False -> True" in cm.recompile_reasons[-1]
    for p in m.parameters():
        p.requires_grad_(False)
    y = cm(x)
    assert not y.requires_grad and y.grad_fn is None
    assert "0.weight changed requires_grad: True -> False" in cm.recompile_reasons[-1]
    with ft.no_grad():
        cm(xr)
    assert "grad mode changed" in cm.recompile_reasons[-1]


def test_python_scalars_are_specialized():
    f = ft.compile(lambda x, s: x * s)
    x = _rand(3)
    _close(f(x, 2.0), x * 2.0)
    _close(f(x, 3.0), x * 3.0)
    assert "changed value: 2.0 -> 3.0" in f.recompile_reasons[-1]


def test_replaced_parameter_and_module_attribute():
    m = nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.0))
    cm = ft.compile(m)
    x = _rand(2, 3)
    cm(x)
    m[0].weight = nn.Parameter(ft.ones(3, 3))       # same layout: read at each call
    _close(cm(x).detach(), m(x).detach())
    assert cm.compile_stats()["recompiles"] == 0
    m[1].p = 1.0                                     # a plain attribute is guarded
    _close(cm(x).detach(), np.zeros((2, 3)))
    assert "attribute 'p' changed: 0.0 -> 1.0" in cm.recompile_reasons[-1]


def test_recompile_limit_warns_and_runs_eagerly():
    f = ft.compile(lambda x: x.sin() * 2, recompile_limit=2)
    for n in range(1, 4):
        f(_rand(n))
    with pytest.warns(RecompileWarning, match="drop_last"):
        y = f(_rand(7))
    _close(y, _rand(7).sin() * 2)
    st = f.compile_stats()
    assert st["compiles"] == 3 and st["recompiles"] == 2 and st["eager_calls"] == 1
    assert "recompile limit" in f.graph_breaks[-1]


def test_dynamic_shapes_do_not_count_toward_the_limit():
    f = ft.compile(lambda x: x.exp(), dynamic=True, recompile_limit=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RecompileWarning)
        for n in range(1, 5):
            f(_rand(n))
    assert f.compile_stats()["compiles"] == 4


# ---------------------------------------------------------------------------
# hooks


def test_tensor_hook_inside_fires_at_every_backward():
    lin = nn.Linear(3, 3)
    seen = []

    def f(x):
        h = lin(x)
        h.register_hook(lambda g: seen.append(g.numpy().copy()))
        h.register_hook(lambda g: g * 2)          # a replacement gradient
        return (h * h).sum()
    cf = ft.compile(f)
    x = _rand(2, 3).requires_grad_()
    for _ in range(2):
        cf(x).backward()
    assert len(seen) == 2
    gx = x.grad.clone() / 2
    x.grad = None
    seen.clear()
    f(x).backward()
    _close(gx, x.grad)
    assert len(seen) == 1


def test_tensor_hook_inside_must_keep_dtype():
    def f(x):
        h = x * 3
        h.register_hook(lambda g: g.double())
        return (h * h).sum()
    x = ft.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=r"hook '<lambda>' has changed the type of value "
                                           r"\(was float32 got float64\)"):
        ft.compile(f)(x).backward()


def test_hooks_on_inputs_and_parameters_fire():
    m = nn.Linear(3, 2)
    seen = []
    m.weight.register_hook(lambda g: seen.append("w"))
    m.weight.register_post_accumulate_grad_hook(lambda p: seen.append("acc"))
    x = _rand(2, 3).requires_grad_()
    x.register_hook(lambda g: seen.append("x"))
    ft.compile(m)(x).sum().backward()
    assert sorted(seen) == ["acc", "w", "x"]


def test_module_hooks_fire_inside_compiled_code():
    def make():
        ft.manual_seed(5)
        return nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))

    def hooked(m, log):
        m[0].register_forward_pre_hook(lambda mod, a: log.append(("pre", tuple(a[0].shape))))
        m[0].register_forward_hook(lambda mod, a, out: log.append(("fwd", round(float(
            out.sum()), 5))))
        m[2].register_full_backward_hook(
            lambda mod, gi, go: log.append(("bwd", tuple(gi[0].shape), tuple(go[0].shape))))
        m[2].register_full_backward_hook(lambda mod, gi, go: (gi[0] * 0.5,))
        return m
    log_c, log_e = [], []
    m = hooked(make(), log_c)
    m2 = hooked(make(), log_e)
    cm = ft.compile(m)
    x = _rand(5, 3).requires_grad_()
    x2 = x.detach().clone().requires_grad_()
    for _ in range(2):
        cm(x).sum().backward()
        m2(x2).sum().backward()
    assert log_c == log_e and len(log_c) == 6
    _close(x.grad, x2.grad)
    for g, g2 in zip(_grads(m.parameters()), _grads(m2.parameters())):
        _close(g, g2)
    assert not cm.graph_breaks


def test_forward_hook_returning_a_value_is_refused_clearly():
    m = nn.Linear(2, 2)
    m.register_forward_hook(lambda mod, a, out: out * 2)
    with pytest.raises(CompileError, match="returned a value inside ft.compile"):
        ft.compile(m)(_rand(1, 2))


# ---------------------------------------------------------------------------
# graph breaks and refusals


def _break_reason(f, *args):
    cf = ft.compile(f)
    with pytest.warns(GraphBreakWarning):
        warnings.simplefilter("always", GraphBreakWarning)
        got = cf(*args)
    want = f(*args)
    if isinstance(want, ft.Tensor):
        _close(got.detach(), want.detach())
    st = cf.compile_stats()
    assert st["graph_breaks"] == 1 and st["eager_calls"] == 1 and st["compiles"] == 0
    cf(*args)                                   # the decision is cached: no new capture
    assert cf.compile_stats()["graph_breaks"] == 1
    return cf.graph_breaks[0]


def test_item_in_python_control_flow_breaks_with_the_line():
    def f(x):
        if x.sum().item() > 0:
            return x * 2
        return x * 3
    why = _break_reason(f, _rand(4))
    assert "`item`" in why and "if x.sum().item() > 0" in why


def test_bool_of_tensor_and_data_dependent_shapes_break():
    assert "`__bool__`" in _break_reason(lambda x: x * 2 if x.sum() > 0 else x, _rand(3))
    why = _break_reason(lambda x: x[x > 0].sum(), _rand(5))
    assert "boolean mask" in why and "data-dependent shape" in why
    assert "`nonzero`" in _break_reason(lambda x: x.nonzero(), _rand(5))


def test_backward_and_custom_function_inside_break():
    w = ft.tensor([1.0, 2.0], requires_grad=True)

    def f(x):
        (x * w).sum().backward()
        return w.grad * 1
    cf = ft.compile(f)
    x = _rand(2)
    _close(cf(x), x)                            # ran eagerly once: w.grad == x
    assert ".backward()" in cf.graph_breaks[0]

    class Square(ft.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return 2 * x * g
    why = _break_reason(lambda x: Square.apply(x * w).sum(), _rand(2))
    assert "autograd.Function Square" in why


def test_inplace_on_input_that_requires_grad_breaks():
    p = nn.Parameter(ft.ones(3))

    def f(x):
        with ft.no_grad():
            p.mul_(2)
        return (p * x).sum()
    cf = ft.compile(f)
    cf(_rand(3))
    assert "in-place" in cf.graph_breaks[0] and "requires grad" in cf.graph_breaks[0]
    _close(p.detach(), [2.0, 2.0, 2.0])          # ran once, eagerly
    with pytest.raises(CompileError, match="requires grad"):
        ft.compile(f, fullgraph=True)(_rand(3))


def test_fullgraph_raises_compile_error():
    def f(x):
        return x * x.max().item()
    with pytest.raises(CompileError, match="fullgraph=True.*`item`"):
        ft.compile(f, fullgraph=True)(_rand(3))


def test_user_errors_propagate_and_state_is_restored():
    """A failing capture leaves no tracer behind: tensors, parameters, grad mode and the
    trace stack are as before, and the user's own error reaches the user."""
    m = nn.Linear(3, 2)
    w0 = m.weight._data
    x = _rand(4, 5)
    snap = core.trace_stack_snapshot()
    with pytest.raises(RuntimeError, match="mat1 and mat2 shapes cannot be multiplied"):
        ft.compile(m)(x)                       # the same error eager gives
    assert core.trace_stack_snapshot() == snap and GS.enabled
    assert m.weight._data is w0 and type(x._data) is np.ndarray

    def g(x):
        with ft.no_grad():
            x.item()                           # breaks inside a no_grad block
        return x
    cg = ft.compile(g)
    cg(_rand(1))
    assert GS.enabled and core.trace_stack_snapshot() == snap and cg.graph_breaks


def test_stored_tensor_on_module_breaks():
    class Cache(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 2)

        def forward(self, x):
            self.last = self.lin(x)
            return self.last.sum()
    m = Cache()
    cm = ft.compile(m)
    cm(_rand(3, 2))
    assert "module attribute Cache.last" in cm.graph_breaks[0]
    assert type(m.last._data) is np.ndarray


def test_parameters_found_through_globals_closures_and_arguments():
    ft.manual_seed(0)
    model = nn.Linear(2, 1)

    def helper(x):
        return model(x)

    def f(x):
        return helper(x).sum()

    def g(mod, x):
        return mod(x).sum()
    cf, cg = ft.compile(f), ft.compile(g)
    x = _rand(3, 2)
    cf(x), cg(model, x)
    with ft.no_grad():
        model.weight.add_(1.0)
    _close(cf(x).detach(), f(x).detach())
    _close(cg(model, x).detach(), g(model, x).detach())
    assert not cf.graph_breaks and not cg.graph_breaks


def test_lower_prints_the_programs():
    m = nn.Sequential(nn.Linear(3, 3), nn.ReLU())
    cm = ft.compile(m)
    x = _rand(2, 3)
    text = str(cm.lower(x))
    assert "dot_general" in text and "## generated code" in text
    known, unknown = cm.lower_backward(x)
    assert len(known.out_avals) > 1            # the output and the residuals
    assert "le" in [e.primitive.name for e in known.eqns]       # relu's test runs forward
    assert "le" not in [e.primitive.name for e in unknown.eqns]  # only; the mask is a residual


def test_reading_grad_or_changing_module_attributes_breaks():
    m = nn.Linear(2, 2)
    m(_rand(1, 2)).sum().backward()

    def norm_of_grads(x):
        return m(x).sum() + m.weight.grad.norm()
    cf = ft.compile(norm_of_grads)
    cf(_rand(1, 2))
    assert ".grad inside the compiled function" in cf.graph_breaks[0]

    class Counter(nn.Module):
        def __init__(self):
            super().__init__()
            self.calls = 0

        def forward(self, x):
            self.calls += 1
            return x * 2
    c = Counter()
    cc = ft.compile(c)
    cc(_rand(2))
    assert "attribute 'calls'" in cc.graph_breaks[0]
    assert c.calls == 1                        # the failed capture's change was undone


def test_argument_buffer_updated_in_place_is_written_back():
    def update(x, buf):
        buf.mul_(0.5).add_(x)
        return buf.sum()
    cf = ft.compile(update)
    x = _rand(3)
    buf, buf2 = ft.zeros(3), ft.zeros(3)
    v0 = buf._version
    for _ in range(3):
        _close(cf(x, buf), update(x, buf2))
    _close(buf, buf2)
    assert buf._version - v0 == 6 and not cf.graph_breaks


def test_constant_tensor_changed_in_place_recompiles():
    table = {"scale": ft.tensor([1.0, 2.0])}       # not reachable by the guards: a constant

    def f(x):
        return x * table["scale"]
    cf = ft.compile(f)
    x = _rand(2)
    _close(cf(x), f(x))
    table["scale"].mul_(3.0)
    _close(cf(x), f(x))
    assert "captured as a constant" in cf.recompile_reasons[-1]


def test_gradcheck_and_gradgradcheck_through_a_compiled_call():
    """Finite differences in float64 agree with the compiled node's first and second
    derivatives (the second goes through the exact tangents of its residuals)."""
    lin = nn.Linear(3, 2).double()
    f = ft.compile(lambda x, w: (lin(x).tanh() * w).sum(1).exp())
    x = _rand(4, 3, seed=0, dtype=np.float64).requires_grad_()
    w = _rand(4, 2, seed=1, dtype=np.float64).requires_grad_()
    assert ft.autograd.gradcheck(f, (x, w))
    assert ft.autograd.gradgradcheck(f, (x, w))
    with ft.autograd.detect_anomaly():
        f(x, w).sum().backward()
    assert not f.graph_breaks


def test_saved_input_modified_in_place_raises_at_backward():
    """A residual that is an input is read from the node's input slot: its version counter
    catches an in-place change before backward, with eager's error."""
    f = ft.compile(lambda x, w: (x * w).sum())
    x, w = _rand(3), _rand(3, seed=1).requires_grad_()
    y = f(x, w)
    x.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation.*"
                                           "CompiledFunctionBackward"):
        y.backward()


def test_compiled_module_inside_a_compiled_loss():
    """A compiled module called inside another compiled function runs inline; its
    parameters are found through the compiled object and stay inputs."""
    m = _mlp()
    cm = ft.compile(m)
    loss_fn = ft.compile(lambda x, y: F.cross_entropy(cm(x), y))
    x, y = _rand(4, 6), ft.tensor([0, 1, 2, 3])
    loss = loss_fn(x, y)
    loss.backward()
    g = _grads(m.parameters())
    m.zero_grad()
    F.cross_entropy(m(x), y).backward()
    for a, b in zip(g, _grads(m.parameters())):
        _close(a, b)
    assert not loss_fn.graph_breaks


class _Methods(nn.Module):
    """Tensor methods a forward commonly uses: views, cat/chunk, masks, where, indexing."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        h = self.lin(x).view(x.size(0), 2, 2).permute(0, 2, 1).reshape(-1, 4)
        h = ft.cat([h, h.clamp(min=0)], dim=1).chunk(2, dim=1)[1]
        h = h.masked_fill(h > 0.5, 0.5).unsqueeze(1).squeeze(1)
        w = ft.where(h > 0, h, h * 0.1)
        idx = ft.tensor([0, 2])
        col = w.gather(1, ft.zeros(w.shape[0], 1, dtype=ft.int64)).squeeze(1)
        return w[:, idx].sum(1) + w.mean(0).max() + w.std() + col + w[0, 1]


@pytest.mark.parametrize("name,make,shape", [
    ("conv_bn_pool", lambda: nn.Sequential(nn.Conv2d(2, 3, 3, padding=1), nn.BatchNorm2d(3),
                                           nn.ReLU(), nn.MaxPool2d(2),
                                           nn.AdaptiveAvgPool2d(1)), (3, 2, 6, 6)),
    ("layernorm_gelu", lambda: nn.Sequential(nn.LayerNorm(6), nn.GELU(), nn.Linear(6, 3)),
     (4, 6)),
    ("activations", lambda: nn.Sequential(nn.ELU(), nn.LeakyReLU(0.1), nn.SiLU(), nn.Softplus(),
                                          nn.Hardtanh(), nn.Sigmoid(), nn.LogSoftmax(dim=1)),
     (3, 5)),
    ("tensor_methods", _Methods, (5, 4)),
])
def test_layers_and_tensor_methods_equal_eager(name, make, shape):
    def build():
        ft.manual_seed(0)
        return make()
    m = build()
    m2 = _clone(m, build)
    x = _rand(*shape, seed=2).requires_grad_()
    x2 = x.detach().clone().requires_grad_()
    cm = ft.compile(m)
    y, y2 = cm(x), m2(x2)
    _close(y.detach(), y2.detach(), 1e-6)
    (y * y).sum().backward()
    (y2 * y2).sum().backward()
    _close(x.grad, x2.grad, 1e-5)
    for g, g2 in zip(_grads(m.parameters()), _grads(m2.parameters())):
        _close(g, g2, 1e-5)
    assert not cm.graph_breaks


def test_embedding_and_losses_with_integer_inputs():
    emb = nn.Embedding(10, 4)
    ids, y = ft.tensor([[1, 2, 9], [0, 0, 3]]), ft.tensor([1, 3])

    def loss(ids, y):
        logits = emb(ids).sum(1)
        return (F.cross_entropy(logits, y, label_smoothing=0.1)
                + F.binary_cross_entropy_with_logits(logits, (logits > 0).float())
                + F.nll_loss(F.log_softmax(logits, 1), y) + F.smooth_l1_loss(logits, logits * 0))
    cf = ft.compile(loss)
    a = cf(ids, y)
    a.backward()
    g = emb.weight.grad.clone()
    emb.weight.grad = None
    b = loss(ids, y)
    b.backward()
    _close(a.detach(), b.detach())
    _close(g, emb.weight.grad)
    assert not cf.graph_breaks


@pytest.mark.parametrize("inplace", [False, True])
def test_dropout_masks_are_eager_random_stream(inplace):
    """Random draws are program inputs drawn at every call: fresh masks each call, the same
    ones eager draws from the same seed."""
    def build():
        ft.manual_seed(0)
        return nn.Sequential(nn.Linear(4, 64), nn.Dropout(0.5, inplace=inplace))
    m = build()
    m2 = _clone(m, build)
    cm = ft.compile(m)
    x = _rand(3, 4)
    ft.manual_seed(7)
    a1, a2 = cm(x), cm(x)
    ft.manual_seed(7)
    b1, b2 = m2(x), m2(x)
    _close(a1.detach(), b1.detach())
    _close(a2.detach(), b2.detach())
    assert not np.array_equal(a1.detach().numpy() == 0, a2.detach().numpy() == 0)
    assert cm.compile_stats()["compiles"] == 1


def test_inplace_on_tensors_outside_the_inputs_runs_once():
    """An in-place update of a tensor the guards do not reach would happen once, at compile
    time: it is a graph break, refused before anything is written (applied exactly once);
    tensors the function creates itself may be filled in place."""
    table = {"c": ft.ones(2)}

    def h(x):
        table["c"].mul_(2)
        return x * table["c"]
    ch = ft.compile(h)
    _close(ch(ft.ones(2)), [2.0, 2.0])
    _close(table["c"], [2.0, 2.0])
    assert "not an input of the compiled function" in ch.graph_breaks[0]

    def g(x):
        t = ft.zeros(3)
        t[0] = 5.0
        t.add_(1.0)
        return x * t
    cg = ft.compile(g)
    _close(cg(ft.ones(3)), [6.0, 1.0, 1.0])
    _close(cg(ft.ones(3)), [6.0, 1.0, 1.0])
    assert not cg.graph_breaks
