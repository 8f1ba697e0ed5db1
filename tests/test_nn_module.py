"""nn.Module machinery with PyTorch's semantics: registration by attribute assignment,
traversal, train/eval, state dicts, apply/to/zero_grad, forward hooks, containers, repr."""
from collections import OrderedDict

import numpy as np
import pytest

import functrans as ft
import functrans.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 3)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(3, 2)
        self.scale = nn.Parameter(ft.ones(2))
        self.register_buffer("count", ft.zeros(1))
        self.register_buffer("scratch", ft.zeros(2), persistent=False)
        self.not_registered = 5

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x))) * self.scale


def test_parameter_is_a_leaf_tensor_sharing_storage():
    data = ft.tensor([1.0, 2.0])
    p = nn.Parameter(data)
    assert isinstance(p, ft.Tensor) and isinstance(p, nn.Parameter)
    assert p.is_leaf and p.requires_grad and p.grad_fn is None
    data[0] = 5.0
    assert p[0].item() == 5.0                          # shares storage, as torch
    assert not nn.Parameter(ft.zeros(2), requires_grad=False).requires_grad
    assert repr(p).startswith("Parameter containing:\ntensor([5., 2.], requires_grad=True)")
    assert nn.Parameter().shape == (0,)


def test_registration_by_attribute_assignment():
    m = Net()
    names = [n for n, _ in m.named_parameters()]
    assert names == ["scale", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    assert [n for n, _ in m.named_buffers()] == ["count", "scratch"]
    assert [n for n, _ in m.named_children()] == ["fc1", "act", "fc2"]
    assert [n for n, _ in m.named_modules()] == ["", "fc1", "act", "fc2"]
    assert len(list(m.parameters())) == 5 and len(list(m.parameters(recurse=False))) == 1
    assert m.not_registered == 5 and "not_registered" not in dict(m.named_parameters())
    assert m.fc1.weight is m._modules["fc1"]._parameters["weight"]


def test_reassignment_moves_between_kinds():
    m = nn.Module()
    m.a = nn.Parameter(ft.zeros(1))
    with pytest.raises(TypeError, match=r"as parameter 'a' \(torch.nn.Parameter or None"):
        m.a = nn.Linear(1, 1)                          # torch refuses this too
    del m.a
    m.a = nn.Linear(1, 1)                              # now a submodule
    assert "a" not in m._parameters and "a" in m._modules
    m.register_buffer("b", ft.zeros(1))
    m.b = ft.ones(1)                                   # buffer assignment stays a buffer
    assert m._buffers["b"].item() == 1.0
    m.b = None
    assert m.b is None and list(m.buffers()) == list(m.a.buffers())


def test_assignment_errors_use_torchs_words():
    m = nn.Linear(2, 2)
    with pytest.raises(TypeError, match=r"cannot assign 'torch.FloatTensor' as parameter "
                                        r"'weight' \(torch.nn.Parameter or None expected\)"):
        m.weight = ft.zeros(2, 2)
    m.bias = None                                      # None is allowed
    assert m.bias is None and len(list(m.parameters())) == 1
    with pytest.raises(AttributeError, match="'Linear' object has no attribute 'nope'"):
        m.nope
    with pytest.raises(KeyError, match="attribute 'in_features' already exists"):
        m.register_parameter("in_features", nn.Parameter(ft.zeros(1)))
    with pytest.raises(TypeError, match="is not a Module subclass"):
        m.add_module("x", 3)
    with pytest.raises(TypeError, match="cannot assign 'torch.FloatTensor' object to parameter"):
        m.register_parameter("w", ft.zeros(1))

    class Early(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(ft.zeros(1))
    with pytest.raises(AttributeError, match="before Module.__init__"):
        Early()


def test_buffer_marker_registers_a_buffer():
    m = nn.Module()
    m.stats = nn.Buffer(ft.ones(2))
    m.scratch = nn.Buffer(ft.zeros(1), persistent=False)
    assert [n for n, _ in m.named_buffers()] == ["stats", "scratch"]
    assert list(m.state_dict()) == ["stats"]
    assert not hasattr(m.stats, "_ft_buffer_persistent")


def test_shared_parameters_are_listed_once():
    lin = nn.Linear(2, 2)
    seq = nn.Sequential(lin, nn.ReLU(), lin)
    assert len(list(seq.parameters())) == 2
    assert len(list(seq.named_parameters(remove_duplicate=False))) == 4
    assert [n for n, _ in seq.named_modules()] == ["", "0", "1"]
    assert len(list(seq.modules())) == 3


def test_train_eval_propagate():
    m = Net()
    assert m.training and m.fc1.training
    assert m.eval() is m
    assert not m.training and not m.fc1.training and not m.act.training
    m.train()
    assert m.fc2.training
    with pytest.raises(ValueError, match="training mode is expected to be boolean"):
        m.train("yes")


def test_state_dict_keys_values_and_sharing():
    m = Net()
    sd = m.state_dict()
    assert list(sd) == ["scale", "count", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    assert all(not v.requires_grad and v.grad_fn is None for v in sd.values())
    assert not isinstance(sd["scale"], nn.Parameter)
    sd["fc1.bias"][0] = 42.0                          # detached, but the same storage
    assert m.fc1.bias[0].item() == 42.0
    assert m.state_dict(keep_vars=True)["scale"] is m.scale
    assert isinstance(sd, OrderedDict)


def test_load_state_dict_copies_in_place():
    a, b = Net(), Net()
    w = b.fc1.weight
    res = b.load_state_dict(a.state_dict())
    assert res.missing_keys == [] and res.unexpected_keys == []
    assert repr(res) == "<All keys matched successfully>"
    assert b.fc1.weight is w                           # same Parameter object
    np.testing.assert_array_equal(b.fc1.weight.detach().numpy(), a.fc1.weight.detach().numpy())


def test_load_state_dict_strict_reports_keys_like_torch():
    m = Net()
    sd = m.state_dict()
    del sd["fc2.bias"]
    sd["extra"] = ft.zeros(1)
    with pytest.raises(RuntimeError) as e:
        m.load_state_dict(sd)
    msg = str(e.value)
    assert msg.startswith("Error(s) in loading state_dict for Net:\n\t")
    assert 'Missing key(s) in state_dict: "fc2.bias". ' in msg
    assert 'Unexpected key(s) in state_dict: "extra". ' in msg
    res = m.load_state_dict(sd, strict=False)         # reported, not raised
    assert res.missing_keys == ["fc2.bias"] and res.unexpected_keys == ["extra"]
    assert "missing_keys=['fc2.bias']" in repr(res)
    sd = m.state_dict()
    sd["fc1.weight"] = ft.zeros(2, 2)
    with pytest.raises(RuntimeError, match=r"size mismatch for fc1.weight: copying a param with "
                                           r"shape ft.Size\(\[2, 2\]\) from checkpoint, the shape "
                                           r"in current model is ft.Size\(\[3, 4\]\)"):
        m.load_state_dict(sd)


def test_non_persistent_buffers_stay_out_of_state_dict():
    m = Net()
    assert "scratch" not in m.state_dict()
    assert "scratch" in dict(m.named_buffers())
    m.load_state_dict(m.state_dict())                  # and are not missing


def test_apply_visits_children_first():
    m = Net()
    seen = []
    assert m.apply(lambda mod: seen.append(type(mod).__name__)) is m
    assert seen == ["Linear", "ReLU", "Linear", "Net"]


def test_apply_reinitializes():
    m = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 1))

    def init(mod):
        if isinstance(mod, nn.Linear):
            nn.init.constant_(mod.weight, 0.5)
            nn.init.zeros_(mod.bias)
    m.apply(init)
    assert np.all(m[0].weight.detach().numpy() == 0.5) and np.all(m[1].bias.detach().numpy() == 0)


def test_to_dtype_keeps_parameter_objects():
    m = Net()
    w = m.fc1.weight
    m(ft.randn(2, 4)).sum().backward()
    assert m.to(ft.float64) is m
    assert m.fc1.weight is w and w.dtype == ft.float64 and w.requires_grad
    assert w.grad.dtype == ft.float64
    assert m.count.dtype == ft.float64
    out = m(ft.randn(2, 4, dtype=ft.float64))
    assert out.dtype == ft.float64
    m.float()
    assert w.dtype == ft.float32
    m.to("cpu")
    m.double()
    assert m.scale.dtype == ft.float64


def test_zero_grad():
    m = Net()
    m(ft.randn(3, 4)).sum().backward()
    assert all(p.grad is not None for p in m.parameters())
    g = m.fc1.weight.grad
    m.zero_grad(set_to_none=False)
    assert m.fc1.weight.grad is g and float(g.abs().sum()) == 0.0
    m.zero_grad()
    assert all(p.grad is None for p in m.parameters())


def test_requires_grad_():
    m = Net().requires_grad_(False)
    assert not any(p.requires_grad for p in m.parameters())


def test_get_submodule_and_parameter():
    m = nn.Sequential(OrderedDict(block=Net()))
    assert m.get_submodule("block.fc1") is m.block.fc1
    assert m.get_parameter("block.fc2.bias") is m.block.fc2.bias
    assert m.get_buffer("block.count") is m.block.count
    with pytest.raises(AttributeError):
        m.get_submodule("block.nope")


# ---------------------------------------------------------------------------
# forward hooks


def test_forward_pre_hook_and_forward_hook_can_replace():
    lin = nn.Linear(2, 2)
    calls = []
    h1 = lin.register_forward_pre_hook(lambda mod, args: (args[0] * 0,))
    h2 = lin.register_forward_hook(lambda mod, args, out: calls.append(out.shape) or out + 1)
    x = ft.ones(3, 2)
    y = lin(x)
    np.testing.assert_allclose(y.detach().numpy(), np.broadcast_to(
        lin.bias.detach().numpy() + 1, (3, 2)), rtol=1e-6)
    assert calls == [(3, 2)]
    h1.remove()
    h2.remove()
    h2.remove()                                        # removing twice is harmless
    np.testing.assert_allclose(lin(x).detach().numpy(),
                               x.numpy() @ lin.weight.detach().numpy().T
                               + lin.bias.detach().numpy(), rtol=1e-6)
    assert not lin._forward_hooks and not lin._forward_pre_hooks


def test_hook_order_prepend_and_kwargs():
    lin = nn.Linear(2, 2)
    order = []
    lin.register_forward_hook(lambda m, a, o: order.append("a"))
    lin.register_forward_hook(lambda m, a, o: order.append("b"), prepend=True)
    lin.register_forward_pre_hook(lambda m, a, k: order.append(("pre", sorted(k))) or None,
                                  with_kwargs=True)
    lin.register_forward_hook(lambda m, a, k, o: order.append("kw"), with_kwargs=True)
    lin(ft.ones(1, 2))
    assert order == [("pre", []), "b", "a", "kw"]


def test_hook_handle_is_a_context_manager():
    lin = nn.Linear(2, 2)
    seen = []
    with lin.register_forward_hook(lambda m, a, o: seen.append(1)):
        lin(ft.ones(1, 2))
    lin(ft.ones(1, 2))
    assert seen == [1]


def test_global_forward_hook():
    seen = []
    h = nn.modules.module.register_module_forward_hook(lambda m, a, o: seen.append(type(m)))
    try:
        nn.Sequential(nn.Linear(2, 2), nn.Tanh())(ft.ones(1, 2))
    finally:
        h.remove()
    assert seen == [nn.Linear, nn.Tanh, nn.Sequential]
    nn.Linear(2, 2)(ft.ones(1, 2))
    assert len(seen) == 3


def test_no_hooks_means_plain_forward():
    """The zero-cost path: without hooks a call is forward() itself (no wrapper node)."""
    lin = nn.Linear(2, 2)
    y = lin(ft.ones(3, 2))
    assert y.grad_fn.name() == "AddmmBackward0"


def test_always_call_forward_hook_runs_on_error():
    class Boom(nn.Module):
        def forward(self, x):
            raise ValueError("boom")
    m = Boom()
    seen = []
    m.register_forward_hook(lambda mod, a, o: seen.append(o), always_call=True)
    with pytest.raises(ValueError, match="boom"):
        m(1)
    assert seen == [None]


# ---------------------------------------------------------------------------
# containers and repr


def test_sequential():
    s = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    assert len(s) == 3 and isinstance(s[0], nn.Linear) and isinstance(s[-1], nn.Linear)
    sub = s[1:]
    assert isinstance(sub, nn.Sequential) and len(sub) == 2 and sub[1] is s[2]
    s.append(nn.Tanh())
    assert [n for n, _ in s.named_children()] == ["0", "1", "2", "3"]
    del s[1]
    assert [type(m).__name__ for m in s] == ["Linear", "Linear", "Tanh"]
    assert [n for n, _ in s.named_children()] == ["0", "1", "2"]
    named = nn.Sequential(OrderedDict(conv=nn.Linear(2, 2), act=nn.ReLU()))
    assert named.conv is named[0]
    x = ft.randn(5, 4)
    s2 = nn.Sequential(nn.Linear(4, 3), nn.ReLU())
    np.testing.assert_allclose(s2(x).detach().numpy(), s2[1](s2[0](x)).detach().numpy())
    with pytest.raises(IndexError):
        s2[5]


def test_module_list_and_dict():
    ml = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
    assert len(ml) == 3 and len(list(ml.parameters())) == 6
    ml.append(nn.ReLU())
    ml.extend([nn.Tanh()])
    ml.insert(0, nn.Sigmoid())
    assert [type(m).__name__ for m in ml] == ["Sigmoid", "Linear", "Linear", "Linear", "ReLU",
                                             "Tanh"]
    assert isinstance(ml[1:3], nn.ModuleList) and len(ml[1:3]) == 2
    md = nn.ModuleDict({"a": nn.Linear(2, 2), "b": nn.ReLU()})
    md["c"] = nn.Tanh()
    assert list(md.keys()) == ["a", "b", "c"] and "a" in md and len(md) == 3
    assert [n for n, _ in md.named_parameters()] == ["a.weight", "a.bias"]
    assert md.pop("b").__class__ is nn.ReLU and list(md) == ["a", "c"]


def test_parameter_list_and_dict():
    pl = nn.ParameterList([nn.Parameter(ft.zeros(2)), ft.ones(3)])
    assert len(pl) == 2 and isinstance(pl[1], nn.Parameter)
    assert [n for n, _ in pl.named_parameters()] == ["0", "1"]
    pd = nn.ParameterDict({"w": ft.ones(2)})
    assert isinstance(pd["w"], nn.Parameter) and list(pd.keys()) == ["w"]
    assert [n for n, _ in pd.named_parameters()] == ["w"]


def test_parameter_dict_orders_a_plain_dict_by_key():
    """As torch's: a plain mapping's entries are added sorted by key; an OrderedDict's, a
    ParameterDict's and a list of pairs' in their own order."""
    from collections import OrderedDict
    z, y = ft.zeros(1), ft.ones(1)
    assert list(nn.ParameterDict({"z": z, "y": y})) == ["y", "z"]
    assert list(nn.ParameterDict(OrderedDict([("z", z), ("y", y)]))) == ["z", "y"]
    assert list(nn.ParameterDict([("z", z), ("y", y)])) == ["z", "y"]
    pd = nn.ParameterDict([("z", z)])
    pd.update({"b": y, "a": y})
    assert list(pd) == ["z", "a", "b"]
    assert [n for n, _ in pd.named_parameters()] == ["z", "a", "b"]


def test_repr_like_torch():
    s = nn.Sequential(nn.Linear(4, 3), nn.ReLU(inplace=True), nn.Dropout(0.1),
                      nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False))
    assert repr(s) == (
        "Sequential(\n"
        "  (0): Linear(in_features=4, out_features=3, bias=True)\n"
        "  (1): ReLU(inplace=True)\n"
        "  (2): Dropout(p=0.1, inplace=False)\n"
        "  (3): Conv2d(3, 8, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), bias=False)\n"
        ")")
    assert repr(nn.BatchNorm2d(4)) == ("BatchNorm2d(4, eps=1e-05, momentum=0.1, affine=True, "
                                       "bias=True, track_running_stats=True)")
    assert repr(nn.LayerNorm(5)) == ("LayerNorm((5,), eps=1e-05, elementwise_affine=True, "
                                     "bias=True)")
    assert repr(nn.GroupNorm(2, 4, bias=False)) == ("GroupNorm(2, 4, eps=1e-05, affine=True, "
                                                    "bias=False)")
    assert repr(nn.Conv1d(2, 4, 3, padding="same", padding_mode="reflect")) == (
        "Conv1d(2, 4, kernel_size=(3,), stride=(1,), padding=same, padding_mode=reflect)")
    assert repr(nn.Embedding(10, 3, padding_idx=0)) == "Embedding(10, 3, padding_idx=0)"
    assert repr(nn.GELU()) == "GELU(approximate='none')"
    assert repr(nn.Flatten()) == "Flatten(start_dim=1, end_dim=-1)"


def test_missing_forward():
    with pytest.raises(NotImplementedError, match='missing the required "forward" function'):
        nn.Module()(1)


def test_to_shares_tensor_parsing_and_rejects_integer_dtypes():
    m = ft.nn.Linear(2, 2)
    assert m.to("cpu", ft.float64).weight.dtype == ft.float64
    assert m.to(ft.ones(1, dtype=ft.float32)).weight.dtype == ft.float32
    with pytest.raises(TypeError, match="only accepts floating point or complex dtypes"):
        m.to(ft.int32)
    for target in (m, ft.ones(2)):
        with pytest.raises(TypeError, match="neither a device nor a dtype"):
            target.to("bogus")


def test_reprs_follow_torch():
    """ModuleList prints a run of equal modules once; MultiheadAttention's out_proj is a
    NonDynamicallyQuantizableLinear; Embedding shows its max_norm, RNN not its nonlinearity."""
    ml = nn.ModuleList([nn.ReLU(), nn.ReLU(), nn.Tanh(), nn.Linear(1, 1), nn.Linear(1, 1)])
    assert repr(ml) == ("ModuleList(\n  (0-1): 2 x ReLU()\n  (2): Tanh()\n"
                        "  (3-4): 2 x Linear(in_features=1, out_features=1, bias=True)\n)")
    assert repr(nn.ModuleList()) == "ModuleList()"
    mha = nn.MultiheadAttention(4, 2)
    assert isinstance(mha.out_proj, nn.Linear)
    assert "(out_proj): NonDynamicallyQuantizableLinear(in_features=4" in repr(mha)
    assert repr(nn.Embedding(5, 3, max_norm=2.0, scale_grad_by_freq=True)) == (
        "Embedding(5, 3, max_norm=2.0, scale_grad_by_freq=True)")
    assert repr(nn.RNN(3, 4, nonlinearity="relu")) == "RNN(3, 4)"


def test_norm_layers_take_bias_false():
    """BatchNorm and GroupNorm (torch 2.13) take bias=False: a scale without a shift."""
    for m in (nn.BatchNorm1d(3, bias=False), nn.GroupNorm(1, 3, bias=False)):
        assert m.bias is None and m.weight.shape == (3,)
        assert [n for n, _ in m.named_parameters()] == ["weight"]
        x = ft.randn(4, 3)
        ref = nn.BatchNorm1d(3) if isinstance(m, nn.BatchNorm1d) else nn.GroupNorm(1, 3)
        np.testing.assert_allclose(m(x).detach().numpy(), ref(x).detach().numpy(), rtol=1e-6)


def test_batch_norm_state_dict_without_num_batches_tracked():
    """As torch reads a state_dict without version metadata: the counter keeps its value and
    is not a missing key."""
    bn = nn.BatchNorm1d(2)
    bn(ft.randn(3, 2))
    res = bn.load_state_dict({"weight": ft.ones(2), "bias": ft.zeros(2)}, strict=False)
    assert sorted(res.missing_keys) == ["running_mean", "running_var"]
    assert int(bn.num_batches_tracked) == 1
    bn.load_state_dict({"weight": ft.ones(2), "bias": ft.zeros(2), "running_mean": ft.zeros(2),
                        "running_var": ft.ones(2)})


def test_hardtanh_module_arguments():
    """torch's deprecated min_value/max_value spellings (a FutureWarning), the check that
    the range is not empty, and inplace in the repr."""
    with pytest.warns(FutureWarning, match="`min_value` is deprecated and renamed to `min_val`"):
        m = nn.Hardtanh(min_value=-0.5)
    assert m.min_val == -0.5
    with pytest.raises(AssertionError, match=r"max_val \(1.0\) must be greater than min_val"):
        nn.Hardtanh(1.0, 1.0)
    assert repr(nn.Hardtanh(-2, 2, True)) == "Hardtanh(min_val=-2, max_val=2, inplace=True)"
