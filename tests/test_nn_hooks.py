"""Module backward hooks with PyTorch's grad_input / grad_output semantics, including the
in-place case (ReLU(inplace=True)) that PyTorch's view-based implementation rejected."""
import numpy as np
import pytest

import functrans as ft
import functrans.nn as nn


def num(t):
    return t.detach().numpy()


def _linear(seed=0):
    ft.manual_seed(seed)
    return nn.Linear(3, 2).double()


def test_linear_grad_input_and_grad_output():
    lin = _linear()
    seen = []
    lin.register_full_backward_hook(lambda m, gi, go: seen.append((m, gi, go)))
    x = ft.randn(4, 3, dtype=ft.float64, requires_grad=True)
    r = ft.randn(4, 2, dtype=ft.float64)
    (lin(x) * r).sum().backward()
    assert len(seen) == 1
    assert x.grad_fn is None and lin(x).grad_fn.name() == "BackwardHookFunctionBackward"
    m, gi, go = seen[0]
    assert m is lin and isinstance(gi, tuple) and isinstance(go, tuple)
    assert len(gi) == 1 and len(go) == 1
    np.testing.assert_allclose(num(go[0]), num(r))
    np.testing.assert_allclose(num(gi[0]), num(r) @ num(lin.weight))
    np.testing.assert_allclose(num(x.grad), num(gi[0]))


def test_hook_can_replace_grad_input():
    lin = _linear()
    lin.register_full_backward_hook(lambda m, gi, go: (gi[0] * 10,))
    x = ft.randn(4, 3, dtype=ft.float64, requires_grad=True)
    lin(x).sum().backward()
    np.testing.assert_allclose(num(x.grad), 10 * np.ones((4, 2)) @ num(lin.weight))
    # the parameters' gradients are not affected by a grad_input replacement
    np.testing.assert_allclose(num(lin.weight.grad), np.ones((2, 4)) @ num(x))


def test_hooks_chain_and_wrong_length_is_an_error():
    lin = _linear()
    lin.register_full_backward_hook(lambda m, gi, go: (gi[0] * 2,))
    lin.register_full_backward_hook(lambda m, gi, go: (gi[0] + 1,))
    x = ft.randn(2, 3, dtype=ft.float64, requires_grad=True)
    lin(x).sum().backward()
    np.testing.assert_allclose(num(x.grad), 2 * np.ones((2, 2)) @ num(lin.weight) + 1)
    bad = _linear()
    bad.register_full_backward_hook(lambda m, gi, go: (gi[0], gi[0]))
    with pytest.raises(RuntimeError, match="Backward hook returned an invalid number of "
                                           "grad_input, got 2, but expected 1"):
        bad(x).sum().backward()


def test_input_without_grad_gives_none_grad_input():
    lin = _linear()
    seen = []
    lin.register_full_backward_hook(lambda m, gi, go: seen.append((gi, go)))
    x = ft.randn(2, 3, dtype=ft.float64)                 # data: no grad
    with pytest.warns(UserWarning, match="Full backward hook is firing when gradients are "
                                         "computed with respect to module outputs"):
        lin(x).sum().backward()
    gi, go = seen[0]
    assert gi == (None,)
    np.testing.assert_allclose(num(go[0]), np.ones((2, 2)))
    assert lin.weight.grad is not None
    lin2 = _linear()
    lin2.register_full_backward_hook(lambda m, gi, go: (ft.ones(2, 3),))
    with pytest.raises(RuntimeError, match="no input requires gradient should always return "
                                           "None"), pytest.warns(UserWarning):
        lin2(x).sum().backward()


def test_relu_inplace_under_a_backward_hook():
    """PyTorch's first module backward hooks made ReLU(inplace=True) an error ('Output 0 of
    BackwardHookFunctionBackward is a view and is being modified inplace'); here it works
    and the gradients are the ones without hooks."""
    def run(hooked):
        ft.manual_seed(0)
        net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(inplace=True), nn.Linear(4, 1)).double()
        logs = []
        if hooked:
            for m in net:
                m.register_full_backward_hook(
                    lambda m, gi, go: logs.append((type(m).__name__, gi, go)))
        x = ft.randn(5, 3, dtype=ft.float64, requires_grad=True)
        net(x).sum().backward()
        return net, x, logs
    net0, x0, _ = run(False)
    net1, x1, logs = run(True)
    np.testing.assert_allclose(num(x1.grad), num(x0.grad))
    for p0, p1 in zip(net0.parameters(), net1.parameters()):
        np.testing.assert_allclose(num(p1.grad), num(p0.grad))
    assert [name for name, _, _ in logs] == ["Linear", "ReLU", "Linear"]
    _, gi, go = logs[1]
    h = num(net1[0](x1))
    np.testing.assert_allclose(num(gi[0]), num(go[0]) * (h > 0))


def test_backward_pre_hook_replaces_grad_output():
    lin = _linear()
    lin.register_full_backward_pre_hook(lambda m, go: (go[0] * 3,))
    x = ft.randn(2, 3, dtype=ft.float64, requires_grad=True)
    lin(x).sum().backward()
    np.testing.assert_allclose(num(lin.bias.grad), [6.0, 6.0])
    np.testing.assert_allclose(num(x.grad), 3 * np.ones((2, 2)) @ num(lin.weight))


def test_module_called_twice_fires_twice_and_removal_stops_it():
    lin = _linear()
    count = []
    h = lin.register_full_backward_hook(lambda m, gi, go: count.append(1))
    x = ft.randn(2, 3, dtype=ft.float64, requires_grad=True)
    (lin(x) + lin(2 * x)).sum().backward()
    assert len(count) == 2
    h.remove()
    lin(x).sum().backward()
    assert len(count) == 2
    assert lin(x).grad_fn.name() == "AddmmBackward0"      # unwrapped again


def test_multiple_inputs_and_outputs():
    class Two(nn.Module):
        def forward(self, a, b):
            return a * b, a + b
    m = Two()
    seen = []
    m.register_full_backward_hook(lambda mod, gi, go: seen.append((gi, go)))
    a = ft.tensor([1.0, 2.0], dtype=ft.float64, requires_grad=True)
    b = ft.tensor([3.0, 4.0], dtype=ft.float64)
    p, s = m(a, b)
    (p * 2 + s * 5).sum().backward()
    gi, go = seen[0]
    assert gi[1] is None                                  # b does not require grad
    np.testing.assert_allclose(num(gi[0]), 2 * num(b) + 5)
    np.testing.assert_allclose(num(go[0]), [2, 2]) and np.testing.assert_allclose(
        num(go[1]), [5, 5])
    np.testing.assert_allclose(num(a.grad), 2 * num(b) + 5)


def test_output_not_used_gets_none_grad_output():
    """An output the loss does not use has no gradient: grad_output holds None for it (in
    the pre-hook and the hook alike), as torch's."""
    class Two(nn.Module):
        def forward(self, a):
            return a * 2, a * 3
    m = Two()
    seen = []
    m.register_full_backward_pre_hook(lambda mod, go: seen.append(go))
    m.register_full_backward_hook(lambda mod, gi, go: seen.append(go))
    a = ft.ones(2, requires_grad=True)
    out1, _ = m(a)
    out1.sum().backward()
    assert len(seen) == 2 and seen[0][1] is None and seen[1][1] is None
    np.testing.assert_allclose(num(seen[1][0]), [1, 1])
    np.testing.assert_allclose(num(a.grad), [2, 2])


def test_global_backward_hook():
    seen = []
    h = nn.modules.module.register_module_full_backward_hook(
        lambda m, gi, go: seen.append(type(m).__name__))
    try:
        net = nn.Sequential(nn.Linear(2, 2), nn.Tanh())
        net(ft.ones(1, 2, requires_grad=True)).sum().backward()
    finally:
        h.remove()
    assert sorted(seen) == ["Linear", "Sequential", "Tanh"]


def test_backward_hooks_refuse_traced_calls():
    lin = nn.Linear(2, 1)
    lin.register_full_backward_hook(lambda m, gi, go: None)
    params = {k: v.detach().numpy() for k, v in lin.named_parameters()}
    with pytest.raises(RuntimeError, match="full backward hooks, which cannot run"):
        ft.grad(lambda p: ft.func.functional_call(lin, p, (np.ones((1, 2), np.float32),)).sum())(
            params)
