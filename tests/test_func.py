"""ft.func.functional_call: modules as pure functions of their parameters, so that ft.grad,
ft.hessian, ft.vmap and ft.jit apply to them; and the Tensor-in/Tensor-out ft.func wrappers."""
import numpy as np
import pytest

import functrans as ft
import functrans.nn as nn
import functrans.nn.functional as F
import functrans.numpy as fnp
from functrans.func import functional_call

pytestmark = pytest.mark.usefixtures("x64")  # float64 references: conftest.x64


def num(t):
    return t.detach().numpy()


def _mlp(seed=0, dtype=None):
    ft.manual_seed(seed)
    m = nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 4))
    return m.double() if dtype == "f64" else m


def _arrays(module):
    return {k: num(v).copy() for k, v in module.named_parameters()}


def test_functional_call_with_tensors_records_like_a_normal_call():
    m = _mlp()
    x = ft.randn(2, 3)
    params = {k: v.detach().clone().requires_grad_() for k, v in m.named_parameters()}
    out = functional_call(m, params, (x,))
    out.sum().backward()
    assert all(p.grad is None for p in m.parameters())     # the module's own are untouched
    m(x).sum().backward()
    for k, p in m.named_parameters():
        np.testing.assert_allclose(num(params[k].grad), num(p.grad), rtol=1e-6)


def test_module_is_restored_even_after_an_error():
    m = _mlp()
    w = m[0].weight
    with pytest.raises(RuntimeError):
        functional_call(m, {"0.weight": ft.zeros(5, 7)}, (ft.randn(2, 3),))
    assert m[0].weight is w and m[0]._parameters["weight"] is w


def test_grad_of_functional_call_matches_backward():
    m = _mlp(dtype="f64")
    x = np.random.default_rng(0).standard_normal((6, 3))
    y = np.array([0, 1, 2, 3, 0, 1])

    def loss(params):
        return F.cross_entropy(functional_call(m, params, (x,)), y)
    g = ft.grad(loss)(_arrays(m))
    F.cross_entropy(m(ft.tensor(x)), ft.tensor(y)).backward()
    for k, p in m.named_parameters():
        np.testing.assert_allclose(g[k], num(p.grad), rtol=1e-10, atol=1e-12)


def test_hessian_of_a_module_matches_finite_differences():
    m = _mlp(dtype="f64")
    x = np.random.default_rng(1).standard_normal((4, 3))
    params = _arrays(m)

    def f(b):
        out = functional_call(m, {**params, "2.bias": b}, (x,))
        return fnp.sum(fnp.tanh(out) ** 2)
    b0 = params["2.bias"]
    h = ft.hessian(f)(b0)
    g = ft.grad(f)
    eps = 1e-5
    fd = np.stack([(g(b0 + eps * e) - g(b0 - eps * e)) / (2 * eps) for e in np.eye(4)])
    np.testing.assert_allclose(h, fd, rtol=1e-6, atol=1e-8)


def test_vmap_per_example_gradients_match_a_loop():
    m = _mlp(dtype="f64")
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal((5, 3)), rng.integers(0, 4, 5)
    params = _arrays(m)

    def loss_one(p, xi, yi):
        out = functional_call(m, p, (xi[None],))
        return F.cross_entropy(out, yi[None])
    per_ex = ft.vmap(ft.grad(loss_one), in_axes=(None, 0, 0))(params, x, y)
    for i in range(5):
        gi = ft.grad(loss_one)(params, x[i], y[i])
        for k in params:
            np.testing.assert_allclose(per_ex[k][i], gi[k], rtol=1e-10, atol=1e-12)


def test_inplace_layers_compute_out_of_place_on_traced_values():
    ft.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.ReLU(inplace=True), nn.Dropout(0.5, inplace=True),
                      nn.Linear(4, 1)).eval()
    x = np.random.default_rng(6).standard_normal((5, 3)).astype(np.float32)
    g = ft.grad(lambda p: fnp.sum(functional_call(m, p, (x,))))(_arrays(m))
    m(ft.tensor(x)).sum().backward()
    for k, p in m.named_parameters():
        np.testing.assert_allclose(g[k], num(p.grad), rtol=1e-5, atol=1e-6)


def test_jit_of_functional_call():
    m = _mlp()
    x = np.random.default_rng(3).standard_normal((2, 3)).astype(np.float32)
    f = ft.jit(lambda p, x: functional_call(m, p, (x,)))
    np.testing.assert_allclose(f(_arrays(m), x), num(m(ft.tensor(x))), rtol=1e-5, atol=1e-6)


def test_conv_net_under_grad_and_vmap():
    ft.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                        nn.Linear(8, 3), nn.LayerNorm(3)).double()
    x = np.random.default_rng(4).standard_normal((2, 1, 4, 4))
    params = _arrays(net)
    g = ft.grad(lambda p: fnp.sum(functional_call(net, p, (x,)) ** 2))(params)
    (net(ft.tensor(x)) ** 2).sum().backward()
    for k, p in net.named_parameters():
        np.testing.assert_allclose(g[k], num(p.grad), rtol=1e-9, atol=1e-12)


def test_buffers_and_eval_mode_batch_norm():
    bn = nn.BatchNorm1d(3).double()
    bn.running_mean.fill_(0.5)
    bn.eval()
    x = np.random.default_rng(5).standard_normal((4, 3))
    out = ft.grad(lambda p: fnp.sum(functional_call(bn, p, (x,))))(_arrays(bn))
    assert set(out) == {"weight", "bias"}
    got = functional_call(bn, {"running_mean": np.zeros(3)}, (ft.tensor(x),))
    assert isinstance(got, ft.Tensor)      # the module's own weight and bias are Tensors
    np.testing.assert_allclose(num(got), x / np.sqrt(1 + 1e-5), rtol=1e-12)
    assert num(bn.running_mean)[0] == 0.5


def test_training_mode_batch_norm_and_dropout_refuse_traced_values():
    bn = nn.BatchNorm1d(3)
    x = np.ones((4, 3), np.float32)
    with pytest.raises(RuntimeError, match="updates its running statistics in place"):
        ft.grad(lambda p: fnp.sum(functional_call(bn, p, (x,))))(_arrays(bn))
    drop = nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.5))
    with pytest.raises(RuntimeError, match="draws a random mask"):
        ft.grad(lambda p: fnp.sum(functional_call(drop, p, (x,))))(_arrays(drop))
    drop.eval()
    ft.grad(lambda p: fnp.sum(functional_call(drop, p, (x,))))(_arrays(drop))


def test_tied_weights_and_strict():
    lin = nn.Linear(2, 2, bias=False)
    tied = nn.Sequential(lin, lin)
    w = np.eye(2, dtype=np.float32) * 2
    out = functional_call(tied, {"0.weight": w}, (np.ones((1, 2), np.float32),))
    np.testing.assert_allclose(out, [[4.0, 4.0]])                 # both uses see the new w
    with pytest.raises(ValueError, match="which are tied"):
        functional_call(tied, {"0.weight": w, "1.weight": w * 3}, (np.ones((1, 2)),))
    with pytest.raises(RuntimeError, match="Missing key\\(s\\): '0.weight'"):
        functional_call(_mlp(), {"0.bias": np.zeros(5, np.float32)}, (np.ones((1, 3)),),
                        strict=True)
    with pytest.raises(AttributeError, match="does not name a parameter or buffer"):
        functional_call(_mlp(), {"nope": np.zeros(1)}, (np.ones((1, 3)),))


def test_tuple_of_dicts_and_single_arg():
    m = _mlp()
    p = _arrays(m)
    first = {k: v for k, v in p.items() if k.startswith("0")}
    second = {k: v for k, v in p.items() if k.startswith("2")}
    x = np.ones((1, 3), np.float32)
    np.testing.assert_allclose(functional_call(m, (first, second), x),
                               functional_call(m, p, (x,)))
    with pytest.raises(ValueError, match="appeared in multiple dictionaries"):
        functional_call(m, (first, first), x)


def test_func_wrappers_take_and_return_tensors():
    m = _mlp(dtype="f64")
    params = {k: v.detach() for k, v in m.named_parameters()}
    x = ft.randn(3, 3, dtype=ft.float64)

    def loss(p, x):
        return fnp.sum(functional_call(m, p, (x,)) ** 2)
    g = ft.func.grad(loss)(params, x)
    assert all(isinstance(v, ft.Tensor) for v in g.values())
    (m(x) ** 2).sum().backward()
    for k, p in m.named_parameters():
        np.testing.assert_allclose(num(g[k]), num(p.grad), rtol=1e-10)
    gv, val = ft.func.grad_and_value(loss)(params, x)         # torch's order: (grad, value)
    assert isinstance(val, ft.Tensor) and val.shape == ()
    np.testing.assert_allclose(num(gv["0.bias"]), num(g["0.bias"]))
    jac = ft.func.jacrev(lambda xx: functional_call(m, params, (xx,)))(x)
    assert isinstance(jac, ft.Tensor) and jac.shape == (3, 4, 3, 3)
    out, fn = ft.func.vjp(lambda xx: functional_call(m, params, (xx,)), x)
    (ct,) = fn(ft.ones(3, 4, dtype=ft.float64))
    np.testing.assert_allclose(num(ct), num(jac).sum(axis=(0, 1)), rtol=1e-10)
    per = ft.func.vmap(lambda xi: functional_call(m, params, (xi,)))(x)
    np.testing.assert_allclose(num(per), num(m(x)), rtol=1e-12)


def test_stack_module_state_for_ensembles():
    models = [_mlp(s) for s in range(3)]
    params, buffers = ft.func.stack_module_state(models)
    assert params["0.weight"].shape == (3, 5, 3) and buffers == {}
    x = np.ones((2, 3), np.float32)
    base = _mlp(9)
    raw = {k: v.detach().numpy() for k, v in params.items()}
    outs = ft.vmap(lambda p: functional_call(base, p, (x,)))(raw)
    for i, m in enumerate(models):
        np.testing.assert_allclose(outs[i], num(m(ft.tensor(x))), rtol=1e-5, atol=1e-6)
