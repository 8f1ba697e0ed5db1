"""ft.optim against float64 NumPy re-implementations of PyTorch's documented algorithms
(SGD, Adam, AdamW), plus the Optimizer machinery: groups, zero_grad, state dicts."""
import math

import numpy as np
import pytest

import functrans as ft

STEPS = 6


def _problem(seed=0, shapes=((3, 4), (4,))):
    """Parameters (float64) and a fixed sequence of gradients per step."""
    rng = np.random.default_rng(seed)
    params = [rng.standard_normal(s) for s in shapes]
    grads = [[rng.standard_normal(s) for s in shapes] for _ in range(STEPS)]
    return params, grads


def _run(opt_cls, params0, grads, **kw):
    params = [ft.tensor(p, dtype=ft.float64, requires_grad=True) for p in params0]
    opt = opt_cls(params, **kw)
    for gs in grads:
        opt.zero_grad()
        for p, g in zip(params, gs):
            p.grad = ft.tensor(g, dtype=ft.float64)
        opt.step()
    return [p.detach().numpy().copy() for p in params], opt


# ---------------------------------------------------------------------------
# reference algorithms (torch.optim's documentation and its single-tensor code paths)


def sgd_ref(params, grads, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False,
            maximize=False):
    params = [p.copy() for p in params]
    bufs = [None] * len(params)
    for gs in grads:
        for i, (p, g) in enumerate(zip(params, gs)):
            g = -g if maximize else g.copy()
            if weight_decay:
                g = g + weight_decay * p
            if momentum:
                if bufs[i] is None:
                    bufs[i] = g.copy()
                else:
                    bufs[i] = momentum * bufs[i] + (1 - dampening) * g
                g = g + momentum * bufs[i] if nesterov else bufs[i]
            params[i] = p - lr * g
    return params


def adam_ref(params, grads, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
             amsgrad=False, maximize=False, decoupled=False):
    b1, b2 = betas
    params = [p.copy() for p in params]
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    vmax = [np.zeros_like(p) for p in params]
    for t, gs in enumerate(grads, start=1):
        for i, g in enumerate(gs):
            g = -g if maximize else g.copy()
            if decoupled:
                params[i] = params[i] * (1 - lr * weight_decay)
            elif weight_decay:
                g = g + weight_decay * params[i]
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * g * g
            mhat = m[i] / (1 - b1 ** t)
            if amsgrad:
                vmax[i] = np.maximum(vmax[i], v[i])
                vhat = vmax[i] / (1 - b2 ** t)
            else:
                vhat = v[i] / (1 - b2 ** t)
            params[i] = params[i] - lr * mhat / (np.sqrt(vhat) + eps)
    return params


def _close(got, want, rtol=1e-12, atol=1e-12):
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


@pytest.mark.parametrize("kw", [
    dict(lr=0.1),
    dict(lr=0.05, momentum=0.9),
    dict(lr=0.05, momentum=0.9, dampening=0.3),
    dict(lr=0.05, momentum=0.8, nesterov=True),
    dict(lr=0.05, momentum=0.9, weight_decay=0.01),
    dict(lr=0.05, momentum=0.9, weight_decay=0.1, maximize=True),
])
def test_sgd_matches_reference(kw):
    params, grads = _problem()
    got, _ = _run(ft.optim.SGD, params, grads, **kw)
    _close(got, sgd_ref(params, grads, **kw))


@pytest.mark.parametrize("kw", [
    dict(),
    dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6),
    dict(lr=0.01, weight_decay=0.1),
    dict(lr=0.01, amsgrad=True),
    dict(lr=0.01, maximize=True, weight_decay=0.05),
])
def test_adam_matches_reference(kw):
    params, grads = _problem(1)
    got, opt = _run(ft.optim.Adam, params, grads, **kw)
    _close(got, adam_ref(params, grads, **kw), rtol=1e-11, atol=1e-13)
    st = opt.state[opt.param_groups[0]["params"][0]]
    assert float(st["step"]) == STEPS
    assert set(st) == {"step", "exp_avg", "exp_avg_sq"} | ({"max_exp_avg_sq"} if
                                                          kw.get("amsgrad") else set())


@pytest.mark.parametrize("kw", [dict(), dict(lr=0.01, weight_decay=0.1),
                                dict(lr=0.02, weight_decay=0.3, amsgrad=True)])
def test_adamw_matches_reference(kw):
    params, grads = _problem(2)
    got, opt = _run(ft.optim.AdamW, params, grads, **kw)
    kw = dict(kw)
    kw.setdefault("weight_decay", 1e-2)           # AdamW's default
    _close(got, adam_ref(params, grads, decoupled=True, **kw), rtol=1e-11, atol=1e-13)


def test_adam_and_adamw_differ_with_weight_decay():
    params, grads = _problem(3)
    a, _ = _run(ft.optim.Adam, params, grads, lr=0.01, weight_decay=0.1)
    w, _ = _run(ft.optim.AdamW, params, grads, lr=0.01, weight_decay=0.1)
    assert not np.allclose(a[0], w[0])


def test_adam_decoupled_weight_decay_is_adamw():
    """Adam(decoupled_weight_decay=True) is AdamW's update; the flag is a group
    hyperparameter (False for Adam, True for AdamW), as torch's."""
    params, grads = _problem(3)
    a, opt = _run(ft.optim.Adam, params, grads, lr=0.01, weight_decay=0.1,
                  decoupled_weight_decay=True)
    _close(a, adam_ref(params, grads, decoupled=True, lr=0.01, weight_decay=0.1), rtol=1e-11,
           atol=1e-13)
    assert opt.param_groups[0]["decoupled_weight_decay"] is True
    p = ft.zeros(1, requires_grad=True)
    assert ft.optim.Adam([p]).param_groups[0]["decoupled_weight_decay"] is False
    assert ft.optim.AdamW([p]).param_groups[0]["decoupled_weight_decay"] is True


def test_float32_parameters_update_in_float32():
    p = ft.tensor([1.0, -2.0], requires_grad=True)
    opt = ft.optim.Adam([p], lr=0.1)
    p.grad = ft.tensor([0.5, 0.5])
    opt.step()
    assert p.dtype == ft.float32
    np.testing.assert_allclose(p.detach().numpy(), [0.9, -2.1], rtol=1e-6)


def test_step_updates_in_place_and_bumps_the_version():
    p = ft.tensor([1.0, 2.0], requires_grad=True)
    data_before = p.detach().numpy()
    v0 = p._version
    opt = ft.optim.SGD([p], lr=0.5, momentum=0.9)
    p.grad = ft.tensor([1.0, 1.0])
    opt.step()
    assert p._version > v0
    assert p.is_leaf and p.requires_grad and p.grad_fn is None
    np.testing.assert_allclose(data_before, [0.5, 1.5])       # same storage, updated
    np.testing.assert_allclose(opt.state[p]["momentum_buffer"].numpy(), [1.0, 1.0])


def test_parameters_without_grad_are_skipped():
    a = ft.tensor([1.0], requires_grad=True)
    b = ft.tensor([2.0], requires_grad=True)
    opt = ft.optim.Adam([a, b], lr=0.1)
    a.grad = ft.tensor([1.0])
    opt.step()
    assert b.item() == 2.0 and b not in opt.state
    assert a.item() != 1.0


def test_param_groups_with_their_own_hyperparameters():
    a = ft.tensor([1.0], requires_grad=True)
    b = ft.tensor([1.0], requires_grad=True)
    opt = ft.optim.SGD([{"params": [a]}, {"params": [b], "lr": 0.5}], lr=0.1, momentum=0.0)
    assert opt.param_groups[0]["lr"] == 0.1 and opt.param_groups[1]["lr"] == 0.5
    assert opt.param_groups[1]["momentum"] == 0.0
    a.grad, b.grad = ft.tensor([1.0]), ft.tensor([1.0])
    opt.step()
    assert a.item() == pytest.approx(0.9) and b.item() == pytest.approx(0.5)
    c = ft.tensor([3.0], requires_grad=True)
    opt.add_param_group({"params": c, "lr": 1.0})
    c.grad = ft.tensor([1.0])
    opt.step()
    assert c.item() == pytest.approx(2.0)
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [a]})


def test_zero_grad_set_to_none_and_in_place():
    p = ft.tensor([1.0, 2.0], requires_grad=True)
    opt = ft.optim.SGD([p], lr=0.1)
    (p * p).sum().backward()
    g = p.grad
    opt.zero_grad(set_to_none=False)
    assert p.grad is g and np.all(g.numpy() == 0)
    opt.zero_grad()
    assert p.grad is None


def test_closure_is_evaluated_with_grad_enabled():
    p = ft.tensor([3.0], requires_grad=True)
    opt = ft.optim.SGD([p], lr=0.1)

    def closure():
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss
    with ft.no_grad():
        loss = opt.step(closure)
    assert loss.item() == 9.0
    assert p.item() == pytest.approx(3.0 - 0.1 * 6.0)


@pytest.mark.parametrize("make, msg", [
    (lambda p: ft.optim.SGD(p, lr=-1.0), "Invalid learning rate: -1.0"),
    (lambda p: ft.optim.SGD(p, lr=0.1, momentum=-0.5), "Invalid momentum value: -0.5"),
    (lambda p: ft.optim.SGD(p, lr=0.1, weight_decay=-1), "Invalid weight_decay value: -1"),
    (lambda p: ft.optim.SGD(p, lr=0.1, nesterov=True),
     "Nesterov momentum requires a momentum and zero dampening"),
    (lambda p: ft.optim.Adam(p, betas=(1.0, 0.9)), "Invalid beta parameter at index 0: 1.0"),
    (lambda p: ft.optim.Adam(p, betas=(0.9, -0.1)), "Invalid beta parameter at index 1: -0.1"),
    (lambda p: ft.optim.Adam(p, eps=-1e-8), "Invalid epsilon value: -1e-08"),
    (lambda p: ft.optim.AdamW(p, weight_decay=-0.1), "Invalid weight_decay value: -0.1"),
    (lambda p: ft.optim.SGD([], lr=0.1), "optimizer got an empty parameter list"),
])
def test_invalid_arguments(make, msg):
    p = [ft.tensor([1.0], requires_grad=True)]
    with pytest.raises(ValueError, match=msg.replace("(", r"\(").replace(")", r"\)")):
        make(p)


def test_non_leaf_and_tensor_params_are_refused():
    p = ft.tensor([1.0], requires_grad=True)
    with pytest.raises(ValueError, match="can't optimize a non-leaf Tensor"):
        ft.optim.SGD([p * 2], lr=0.1)
    with pytest.raises(TypeError, match="iterable of Tensors or dicts"):
        ft.optim.SGD(p, lr=0.1)


@pytest.mark.parametrize("cls, kw", [(ft.optim.SGD, dict(lr=0.1, momentum=0.9)),
                                     (ft.optim.Adam, dict(lr=0.05, amsgrad=True)),
                                     (ft.optim.AdamW, dict(lr=0.05))])
def test_state_dict_round_trip_continues_identically(cls, kw):
    params, grads = _problem(4)
    full, _ = _run(cls, params, grads, **kw)
    # run half, save, rebuild a fresh optimizer on copies, load, run the rest
    ps = [ft.tensor(p, dtype=ft.float64, requires_grad=True) for p in params]
    opt = cls(ps, **kw)
    for gs in grads[:3]:
        for p, g in zip(ps, gs):
            p.grad = ft.tensor(g, dtype=ft.float64)
        opt.step()
    sd = opt.state_dict()
    assert sorted(sd) == ["param_groups", "state"]
    assert sd["param_groups"][0]["params"] == [0, 1]
    assert set(sd["state"]) == {0, 1}
    ps2 = [ft.tensor(p.detach().numpy().copy(), dtype=ft.float64, requires_grad=True)
           for p in ps]
    opt2 = cls(ps2, lr=123.0)
    opt2.load_state_dict(sd)
    assert opt2.param_groups[0]["lr"] == kw["lr"]
    # the loaded state is a copy: the first optimizer's later steps do not leak into it
    for gs in grads[3:]:
        for p, g in zip(ps2, gs):
            p.grad = ft.tensor(g, dtype=ft.float64)
        opt2.step()
    _close([p.detach().numpy() for p in ps2], full)


def test_load_state_dict_checks_the_groups():
    a = ft.tensor([1.0], requires_grad=True)
    b = ft.tensor([1.0], requires_grad=True)
    sd = ft.optim.SGD([a, b], lr=0.1).state_dict()
    with pytest.raises(ValueError, match="doesn't match the size of optimizer's group"):
        ft.optim.SGD([a], lr=0.1).load_state_dict(sd)
    with pytest.raises(ValueError, match="different number of parameter groups"):
        ft.optim.SGD([{"params": [a]}, {"params": [b]}], lr=0.1).load_state_dict(sd)


def test_repr_lists_hyperparameters():
    r = repr(ft.optim.SGD([ft.tensor([1.0], requires_grad=True)], lr=0.1, momentum=0.9))
    assert r.startswith("SGD (") and "Parameter Group 0" in r and "momentum: 0.9" in r


def test_default_learning_rates_are_torchs():
    p = [ft.tensor([1.0], requires_grad=True)]
    assert ft.optim.SGD(p).defaults["lr"] == 1e-3
    assert ft.optim.Adam(p).defaults["betas"] == (0.9, 0.999)
    assert ft.optim.AdamW(p).defaults["weight_decay"] == 1e-2
    assert math.isclose(ft.optim.Adam(p).defaults["eps"], 1e-8)


def test_state_is_a_defaultdict_and_its_key_errors_name_the_parameter():
    """A PyTorch-style optimizer reads `self.state[p]` before writing it; removing a
    parameter the state lacks says its shape and dtype, not its (summarized) values."""
    import collections
    w = ft.nn.Parameter(ft.randn(40, 50))
    opt = ft.optim.SGD([w], lr=0.1)
    assert isinstance(opt.state, collections.defaultdict) and opt.state[w] == {}
    assert repr(opt.state).startswith("defaultdict(<class 'dict'>, {")
    del opt.state[w]
    for remove in (lambda: opt.state.pop(w), lambda: opt.state.__delitem__(w)):
        with pytest.raises(KeyError) as e:
            remove()
        assert str(e.value) == ("'optimizer state has no entry for the Parameter of shape "
                                "(40, 50) and dtype float32'")
    assert opt.state.pop(w, None) is None
    opt.load_state_dict(opt.state_dict())
    assert isinstance(opt.state, collections.defaultdict) and opt.state[w] == {}


def test_sparse_adam_refuses_at_construction_naming_adam():
    w = ft.nn.Parameter(ft.ones(3))
    with pytest.raises(NotImplementedError, match=r"no sparse gradients.*optim\.Adam\(params, "
                                                  r"lr=0\.01, betas=\(0\.9, 0\.999\)"):
        ft.optim.SparseAdam([w], lr=0.01)


def test_adamw_step_is_torchs_single_tensor_arithmetic():
    """AdamW's step runs torch's single-tensor operations in its order (decay, lerp of the
    first moment, mul and addcmul of the second, sqrt / bias correction + eps, addcdiv):
    float32 results bit for bit equal to that arithmetic written out in NumPy, over steps."""
    rng = np.random.default_rng(11)
    p0 = rng.standard_normal(1000).astype(np.float32)
    p = ft.tensor(p0.copy(), requires_grad=True)
    opt = ft.optim.AdamW([p], lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)
    want, m, v = p0.copy(), np.zeros_like(p0), np.zeros_like(p0)
    f32 = np.float32
    for t in range(1, 4):
        g = rng.standard_normal(1000).astype(np.float32)
        p.grad = ft.tensor(g)
        opt.step()
        want *= f32(1 - 1e-3 * 0.1)
        m += f32(1 - 0.9) * (g - m)
        v *= f32(0.95)
        v += g * g * f32(1 - 0.95)
        denom = np.sqrt(v) / f32(math.sqrt(1 - 0.95 ** t))
        denom += f32(1e-8)
        want += m / denom * f32(-(1e-3 / (1 - 0.9 ** t)))
        np.testing.assert_array_equal(p.detach().numpy(), want)


@pytest.mark.parametrize("name", ["Adam", "AdamW", "NAdam", "RMSprop", "Adagrad", "Adadelta",
                                  "ASGD"])
def test_step_counts_are_float_tensors_bumped_once_a_step(name):
    """The step count in an optimizer's state is a float32 0-d tensor (torch's) that each
    step adds 1 to in place, its version bumped once (torch: step 3, _version 3); a count
    that is a read-only view (an expand's) fails with add_'s error, as torch's in-place add
    does."""
    p = ft.nn.Parameter(ft.tensor(np.arange(3, dtype=np.float32)))
    opt = getattr(ft.optim, name)([p], lr=0.1)
    for k in range(3):
        p.grad = ft.tensor(np.full(3, k + 1.0, np.float32))
        opt.step()
    step = opt.state[p]["step"]
    assert step.dtype == ft.float32 and step.shape == () and step.item() == 3.0
    assert step._version == 3
    with pytest.raises(RuntimeError, match="single memory location"):
        opt.state[p]["step"] = ft.tensor(np.float32(1.0)).expand(2)[0]
        opt.step()
