"""Saved values by torch's names (grad_fn._saved_self, _raw_saved_result, SavedTensor hooks),
pack hooks' rules, and unpack hooks under create_graph: each case compared with torch."""
import numpy as np
import pytest

import functrans as ft

torch = pytest.importorskip("torch")


def _same(a, b):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-6)


@pytest.mark.parametrize("lib", [ft, torch], ids=["ft", "torch"])
def test_saved_names(lib):
    a = lib.randn(5, requires_grad=True)
    b = a * a
    c = a * b
    d = lib.exp(a)
    assert b.grad_fn._saved_self is a and b.grad_fn._saved_other is a
    assert c.grad_fn._saved_other.grad_fn is b.grad_fn        # not a, a node output
    r = d.grad_fn._saved_result
    assert r is not d and r.grad_fn is d.grad_fn
    assert r._version == d._version
    with lib.no_grad():
        d += 1
    assert r._version == d._version                             # one version counter
    _same(r, d)
    with pytest.raises(AttributeError):
        d.grad_fn._saved_other
    c.sum().backward()
    with pytest.raises(RuntimeError, match="after they have already been freed"):
        c.grad_fn._saved_self


@pytest.mark.parametrize("lib", [ft, torch], ids=["ft", "torch"])
def test_raw_saved_hooks(lib):
    grads = []
    for _ in range(3):          # the same structure again: the program schedule too
        a = lib.tensor([1., 2., 3.], requires_grad=True)
        y = a * a
        y.grad_fn._raw_saved_self.register_hooks(lambda x: 2 * x, lambda x: x)
        _same(y.grad_fn._saved_self, 2 * a)
        y.sum().backward()
        grads.append(a.grad.detach().numpy())
    np.testing.assert_allclose(grads, [[3., 6., 9.]] * 3)
    y = lib.exp(a)
    y.grad_fn._raw_saved_result.register_hooks(lambda x: x, lambda x: 1)
    with pytest.raises(TypeError, match="Output of saved tensor unpack_hook expected to be "
                                        "a Tensor"):
        y.grad_fn._saved_result
    with pytest.raises(RuntimeError, match="Trying to create a SavedTensor object from "
                                           "Python is forbidden"):
        lib.autograd.SavedTensor()


@pytest.mark.parametrize("lib", [ft, torch], ids=["ft", "torch"])
def test_pack_hook_modifying_input_fails(lib):
    a = lib.randn(5, requires_grad=True)

    def inc(x):
        x += 1
        return x
    with lib.autograd.graph.saved_tensors_hooks(inc, lambda x: x):
        with pytest.raises(RuntimeError, match="A saved tensor pack hook is modifying its "
                                               "input in place"):
            lib.exp(a)
    y = lib.exp(a)
    with pytest.raises(RuntimeError, match="pack hook is modifying its input in place"):
        y.grad_fn._raw_saved_result.register_hooks(inc, lambda x: x)


def test_unpacked_value_under_create_graph():
    """An unpack hook's value is what the double backward differentiates (it was silently
    the leaf's own value): a.grad = 6 * (2a), as torch's."""
    out = []
    for lib in (ft, torch):
        a = lib.tensor([1., -2., 3.], requires_grad=True)
        with lib.autograd.graph.saved_tensors_hooks(lambda x: 2 * x, lambda x: x):
            s = (a ** 3).sum()
        g, = lib.autograd.grad(s, (a,), create_graph=True)
        g.sum().backward()
        out.append(a.grad.detach().numpy())
    np.testing.assert_allclose(out[0], out[1])
    np.testing.assert_allclose(out[0], [12., -24., 36.])


@pytest.mark.parametrize("lib", [ft, torch], ids=["ft", "torch"])
def test_hooks_entered_inside_backward_do_not_outlive_it(lib):
    """A saved_tensors_hooks entered by an unpack hook during a backward is gone after it,
    as torch restores its thread's state."""
    graph = lib.autograd.graph
    seen = []
    inner = graph.saved_tensors_hooks(lambda t: seen.append("inner") or t, lambda t: t)

    def unpack(x):
        inner.__enter__()
        return x
    x = lib.randn(3, requires_grad=True)
    with graph.saved_tensors_hooks(lambda x: x, unpack):
        y = x.sin().sum()
    y.backward()
    x.exp()
    assert seen == []


@pytest.mark.parametrize("lib", [ft, torch], ids=["ft", "torch"])
def test_post_accumulate_hook_returning_a_value_raises(lib):
    t = lib.rand(2, 3, requires_grad=True)
    t.register_post_accumulate_grad_hook(lambda t: t.grad)
    with pytest.raises(RuntimeError, match="hooks should return None"):
        t.sum().backward()


@pytest.mark.parametrize("lib", [ft, torch], ids=["ft", "torch"])
def test_saved_variables_is_deprecated(lib):
    class F(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a * 2

        @staticmethod
        def backward(ctx, g):
            a, = ctx.saved_variables
            return g * 2
    x = lib.ones(2, requires_grad=True)
    with pytest.warns(DeprecationWarning, match="saved_variables"):
        F.apply(x).sum().backward()


@pytest.mark.parametrize("loss", [
    lambda x: (x.tanh().sin() * x.tanh()).sum(),                 # one-step ops only
    lambda x: (lambda t: (t.sin() * t).mean())(x.tanh()),        # a two-step op (mean)
], ids=["elementwise", "with_mean"])
def test_unpack_hooks_run_once_per_saved_value_read(loss):
    """A first backward unpacks each value a node saved when that node's backward reads it,
    as torch's SavedVariable: a value saved by two nodes (tanh's result and sin's input) is
    unpacked twice, once for each (the slot-shared tape used to unpack it once)."""
    from functrans import executor

    def run(lib):
        x = lib.tensor(np.linspace(-1, 1, 4).astype(np.float32), requires_grad=True)
        calls = {"pack": 0, "unpack": 0}

        def pack(t):
            calls["pack"] += 1
            return t

        def unpack(t):
            calls["unpack"] += 1
            return t
        with lib.autograd.graph.saved_tensors_hooks(pack, unpack):
            y = loss(x)
        y.backward()
        return calls, x.grad.detach().numpy()
    want, g_torch = run(torch)
    with executor.schedule("first-sight"):
        got, g_ft = run(ft)
    assert got == want
    np.testing.assert_allclose(g_ft, g_torch, rtol=1e-6)
