"""The engine hands a leaf's gradient out as soon as it is final when the leaf has
post-accumulate hooks (torch runs a leaf's AccumulateGrad node, its hooks included, when
its gradient is ready): tensor hooks, accumulation and post-accumulate hooks run during
the backward, node by node and in the compiled program alike, with the same numbers."""
from __future__ import annotations

import numpy as np
import pytest

import functrans as ft
from functrans import runtime

hot_program = runtime.hot_program


def _model():
    ft.manual_seed(0)
    return ft.nn.Sequential(ft.nn.Linear(4, 8), ft.nn.Tanh(), ft.nn.Linear(8, 1)).double()


def test_post_accumulate_hooks_run_as_soon_as_the_gradient_is_final():
    m, ref = _model(), _model()
    x = ft.tensor(np.random.default_rng(0).standard_normal((5, 4)))
    first, last = m[0].weight, m[2].weight
    seen, log = [], []
    last.register_post_accumulate_grad_hook(lambda p: seen.append(first.grad is None))
    first.register_hook(lambda g: log.append("tensor hook") or g * 2)
    first.register_post_accumulate_grad_hook(lambda p: log.append("post"))
    last.register_post_accumulate_grad_hook(lambda p: ft.autograd.Variable._execution_engine
                                            .queue_callback(lambda: log.append(
                                                ("callback", first.grad is not None))))
    want = ft.autograd.grad((ref(x) ** 2).sum(), list(ref.parameters()))
    for step in range(4):                   # node by node, then the compiled program
        m.zero_grad()
        log.clear()
        (m(x) ** 2).sum().backward()
        assert seen[-1] is True             # the last layer's hook ran before the first's
        assert log == ["tensor hook", "post", ("callback", True)]
        for p, w, k in zip(m.parameters(), want, (2, 1, 1, 1)):
            np.testing.assert_allclose(p.grad.numpy(), k * w.numpy(), rtol=1e-13)
    m.zero_grad(set_to_none=False)          # accumulation into an existing .grad
    (m(x) ** 2).sum().backward()
    np.testing.assert_allclose(m[2].bias.grad.numpy(), want[3].numpy(), rtol=1e-13)
    (m(x) ** 2).sum().backward()
    np.testing.assert_allclose(m[2].bias.grad.numpy(), 2 * want[3].numpy(), rtol=1e-13)


def test_hooks_that_need_no_early_delivery_run_after_the_backward():
    """A hook function with `deliver_early = False` (DistributedDataParallel's on one
    machine) is run after the whole backward, like torch's ordering of the hooks among
    themselves; its gradient is the same."""
    m, ref = _model(), _model()
    x = ft.tensor(np.random.default_rng(0).standard_normal((5, 4)))
    first, last = m[0].weight, m[2].weight
    seen = []

    def late(p):
        seen.append(first.grad is not None)
    late.deliver_early = False
    last.register_post_accumulate_grad_hook(late)
    want = ft.autograd.grad((ref(x) ** 2).sum(), list(ref.parameters()))
    for step in range(4):                   # node by node, then the compiled program
        m.zero_grad()
        (m(x) ** 2).sum().backward()
        assert seen[-1] is True             # the first layer's gradient was there already
        for p, w in zip(m.parameters(), want):
            np.testing.assert_allclose(p.grad.numpy(), w.numpy(), rtol=1e-13)
    assert len(seen) == 4


def test_a_leaf_used_twice_and_inputs_given():
    w = ft.tensor([1.5, -2.0], requires_grad=True)
    b = ft.tensor([0.5, 0.25], requires_grad=True)
    calls = []
    w.register_post_accumulate_grad_hook(lambda p: calls.append(p.grad.numpy().copy()))
    for step in range(3):
        w.grad = b.grad = None
        ((w * w).sum() + (w * b).sum()).backward(inputs=[w])
        np.testing.assert_allclose(calls[-1], 2 * w.detach().numpy() + b.detach().numpy())
        assert b.grad is None
    assert len(calls) == 3


def test_an_optimizer_step_in_the_post_accumulate_hook(monkeypatch):
    """torch's "optimizer step in backward": the hook updates the parameter in place; the
    gradients computed after it must not read the updated value (the program hands a leaf
    out only once no later equation reads its saved value), in every tier of the program:
    node by node, straight-line code and, once hot, the lowered program (where the
    delivery equation reads the results of the equations that must run before it)."""
    lowered = []

    def spy(jaxpr):
        exe = hot_program(jaxpr)
        if any(e.primitive.name == "deliver_gradients" for e in jaxpr.eqns):
            lowered.append(exe)
        return exe
    monkeypatch.setattr(runtime, "hot_program", spy)
    m, ref = _model(), _model()
    lr = 0.1

    def step(p):
        with ft.no_grad():
            p.add_(p.grad, alpha=-lr)
        p.grad = None
    for p in m.parameters():
        p.register_post_accumulate_grad_hook(step)
    opt = ft.optim.SGD(ref.parameters(), lr=lr)
    x = ft.tensor(np.random.default_rng(0).standard_normal((5, 4)))
    for _ in range(runtime.HOT_RUNS + 4):
        (m(x) ** 2).sum().backward()
        opt.zero_grad()
        (ref(x) ** 2).sum().backward()
        opt.step()
        for p, q in zip(m.parameters(), ref.parameters()):
            np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-13)
    assert lowered and lowered[0] and "deliver_gradients" in lowered[0].source


class _Scaled(ft.nn.Module):
    """tanh(x W) * s: the backward reads the leaf s elementwise (g * s), in one fusible
    chain with the tanh derivative that follows it."""

    def __init__(self):
        super().__init__()
        self.lin = ft.nn.Linear(4, 8).double()
        self.s = ft.nn.Parameter(ft.linspace(0.5, 1.5, 8, dtype=ft.float64))
        self.out = ft.nn.Linear(8, 1).double()

    def forward(self, x):
        return self.out(ft.tanh(self.lin(x)) * self.s)


def test_an_optimizer_step_in_the_hook_of_a_leaf_read_elementwise(monkeypatch):
    """The lowered program fuses elementwise chains and places a group at its last member:
    the equation reading the leaf s (g * s) must still run before s's hook updates it."""
    ft.manual_seed(0)
    m = _Scaled()
    ft.manual_seed(0)
    ref = _Scaled()
    lr = 0.1

    def step(p):
        with ft.no_grad():
            p.add_(p.grad, alpha=-lr)
        p.grad = None
    m.s.register_post_accumulate_grad_hook(step)
    opt = ft.optim.SGD(ref.parameters(), lr=lr)
    x = ft.tensor(np.random.default_rng(1).standard_normal((5, 4)))
    for _ in range(runtime.HOT_RUNS + 4):
        for p in m.parameters():
            p.grad = None
        (m(x) ** 2).sum().backward()
        with ft.no_grad():
            for p in (m.lin.weight, m.lin.bias, m.out.weight, m.out.bias):
                p.add_(p.grad, alpha=-lr)
        opt.zero_grad()
        (ref(x) ** 2).sum().backward()
        opt.step()
        for p, q in zip(m.parameters(), ref.parameters()):
            np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-12)


def test_a_hook_may_update_the_parameters_its_ops_saved():
    """torch runs a leaf's hooks once the ops it went into have run their backward: a hook
    on the last bias may update the last weight in place (the linear op already read it)."""
    ft.manual_seed(0)
    m = ft.nn.Sequential(ft.nn.Linear(4, 8), ft.nn.Tanh(), ft.nn.Linear(8, 3)).double()
    x = ft.tensor(np.random.default_rng(0).standard_normal((5, 4)))
    w2, b2 = m[2].weight, m[2].bias

    def hook(p):
        with ft.no_grad():
            w2.add_(0.5)
    b2.register_post_accumulate_grad_hook(hook)
    for _ in range(runtime.HOT_RUNS + 4):
        before = [p.detach().clone() for p in m.parameters()]
        ref = ft.nn.Sequential(ft.nn.Linear(4, 8), ft.nn.Tanh(), ft.nn.Linear(8, 3)).double()
        with ft.no_grad():
            for q, b in zip(ref.parameters(), before):
                q.copy_(b)
        want = ft.autograd.grad((ref(x) ** 2).sum(), list(ref.parameters()))
        m.zero_grad()
        (m(x) ** 2).sum().backward()
        for p, w in zip(m.parameters(), want):
            np.testing.assert_allclose(p.grad.numpy(), w.numpy(), rtol=1e-13)


def test_a_hook_updating_a_value_backward_still_needs_raises():
    """A hook on the last bias updating the first weight, which the first layer saved for
    the input's gradient and has not read yet: torch's in-place error, in every tier (node
    by node when its node runs, in the program once the hook has run), and nothing stays
    half done for the next backward."""
    ft.manual_seed(0)
    m = ft.nn.Sequential(ft.nn.Linear(4, 8), ft.nn.Tanh(), ft.nn.Linear(8, 3)).double()
    x = ft.tensor(np.random.default_rng(0).standard_normal((5, 4)), requires_grad=True)
    w1, b2 = m[0].weight, m[2].bias

    def hook(p):
        with ft.no_grad():
            w1.add_(0.5)
    handle = b2.register_post_accumulate_grad_hook(hook)
    for _ in range(runtime.HOT_RUNS + 4):
        m.zero_grad()
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            (m(x) ** 2).sum().backward()
    handle.remove()
    m.zero_grad()
    x.grad = None
    (m(x) ** 2).sum().backward()
    want = ft.autograd.grad((m(x) ** 2).sum(), [x] + list(m.parameters()))
    for g, w in zip([x.grad] + [p.grad for p in m.parameters()], want):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-13)


@pytest.mark.parametrize("early", [False, True], ids=["after", "early"])
def test_a_hook_may_name_the_array_that_holds_the_next_fresh_gradient(early):
    """A post-accumulate hook function with `grad_buffer(tensor) -> array` (DDP's on one
    machine: the slot in the shared-memory window) has a fresh gradient (`.grad` None)
    computed straight into that array once the program is hot: `.grad` is then a view of
    it, with the same values; an array that does not fit (shape, dtype, layout, memory
    the backward reads) is not used, and an existing `.grad` is accumulated into as
    usual. Both when the hooks run after the backward and during it."""
    m, ref = _model(), _model()
    x = ft.tensor(np.random.default_rng(0).standard_normal((5, 4)))
    want = ft.autograd.grad((ref(x) ** 2).sum(), list(ref.parameters()))
    w0, w2 = m[0].weight, m[2].weight
    slots = {"w0": np.empty(w0.shape), "w2": np.empty(w2.shape)}
    in_hook = []
    for name, p in (("w0", w0), ("w2", w2)):
        def hook(p, name=name):
            in_hook.append(p.grad._data is slots[name])
        hook.grad_buffer = lambda p, name=name: slots[name]
        hook.deliver_early = early
        p.register_post_accumulate_grad_hook(hook)
    for step in range(runtime.HOT_RUNS + 3):
        m.zero_grad()
        (m(x) ** 2).sum().backward()
        for p, w in zip(m.parameters(), want):
            np.testing.assert_allclose(p.grad.numpy(), w.numpy(), rtol=1e-13)
    # hot: computed in place (no copy), and so the hooks saw it
    assert w0.grad._data is slots["w0"] and w2.grad._data is slots["w2"]
    assert in_hook[-2:] == [True, True]
    (m(x) ** 2).sum().backward()                    # accumulates into the slots
    np.testing.assert_allclose(slots["w0"], 2 * want[0].numpy(), rtol=1e-13)
    readonly = np.empty(w2.shape)
    readonly.flags.writeable = False
    for bad in (np.empty(w2.shape, np.float32), np.empty((w2.shape[0], 2 * w2.shape[1]))[:, ::2],
                np.empty((w2.shape[0] + 1, w2.shape[1])), readonly,
                w2._data):                          # read by the backward (layer 1's grads)
        slots["w2"] = bad
        before = bad.copy()
        m.zero_grad()
        (m(x) ** 2).sum().backward()
        assert w2.grad._data is not bad
        np.testing.assert_array_equal(bad, before)
        np.testing.assert_allclose(w2.grad.numpy(), want[2].numpy(), rtol=1e-13)
        np.testing.assert_allclose(w0.grad.numpy(), want[0].numpy(), rtol=1e-13)


def test_one_array_named_for_two_leaves_holds_only_one_gradient():
    a = ft.tensor(np.arange(3.0), requires_grad=True)
    b = ft.tensor(np.arange(3.0) + 1, requires_grad=True)
    shared = np.empty(3)
    for t in (a, b):
        def hook(p):
            pass
        hook.grad_buffer = lambda p: shared
        hook.deliver_early = False
        t.register_post_accumulate_grad_hook(hook)
    for _ in range(runtime.HOT_RUNS + 3):
        a.grad = b.grad = None
        (ft.sin(a) * 2.0 + ft.exp(b) * 3.0).sum().backward()
        np.testing.assert_allclose(a.grad.numpy(), 2 * np.cos(np.arange(3.0)), rtol=1e-14)
        np.testing.assert_allclose(b.grad.numpy(), 3 * np.exp(np.arange(3.0) + 1), rtol=1e-14)
    assert (a.grad._data is shared) != (b.grad._data is shared)
