"""RMSprop, Adagrad, Adamax, NAdam and RAdam against float64 NumPy re-implementations of
torch.optim's documented algorithms (several steps), plus first-step closed forms."""
import math

import numpy as np
import pytest

import functrans as ft
from test_optim import _problem, _run


def _decayed(g, p, lr, weight_decay, maximize, decoupled=False):
    """(gradient, parameter) after torch's weight decay: an L2 term added to the gradient,
    or, decoupled, the parameter shrunk by 1 - lr * weight_decay."""
    g = -g if maximize else g
    if decoupled:
        return g, p * (1 - lr * weight_decay)
    return (g + weight_decay * p if weight_decay else g), p


def rmsprop_ref(params, grads, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0,
                centered=False, maximize=False):
    params = [p.copy() for p in params]
    v = [np.zeros_like(p) for p in params]
    m = [np.zeros_like(p) for p in params]
    buf = [np.zeros_like(p) for p in params]
    for gs in grads:
        for i, g in enumerate(gs):
            g, params[i] = _decayed(g, params[i], lr, weight_decay, maximize)
            v[i] = alpha * v[i] + (1 - alpha) * g * g
            if centered:
                m[i] = alpha * m[i] + (1 - alpha) * g
                avg = np.sqrt(v[i] - m[i] ** 2) + eps
            else:
                avg = np.sqrt(v[i]) + eps
            if momentum > 0:
                buf[i] = momentum * buf[i] + g / avg
                params[i] = params[i] - lr * buf[i]
            else:
                params[i] = params[i] - lr * g / avg
    return params


def adagrad_ref(params, grads, lr=1e-2, lr_decay=0.0, weight_decay=0.0,
                initial_accumulator_value=0.0, eps=1e-10, maximize=False):
    params = [p.copy() for p in params]
    s = [np.full_like(p, initial_accumulator_value) for p in params]
    for t, gs in enumerate(grads, start=1):
        for i, g in enumerate(gs):
            g, params[i] = _decayed(g, params[i], lr, weight_decay, maximize)
            clr = lr / (1 + (t - 1) * lr_decay)
            s[i] = s[i] + g * g
            params[i] = params[i] - clr * g / (np.sqrt(s[i]) + eps)
    return params


def adamax_ref(params, grads, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
               maximize=False):
    b1, b2 = betas
    params = [p.copy() for p in params]
    m = [np.zeros_like(p) for p in params]
    u = [np.zeros_like(p) for p in params]
    for t, gs in enumerate(grads, start=1):
        for i, g in enumerate(gs):
            g, params[i] = _decayed(g, params[i], lr, weight_decay, maximize)
            m[i] = b1 * m[i] + (1 - b1) * g
            u[i] = np.maximum(b2 * u[i], np.abs(g) + eps)
            params[i] = params[i] - lr / (1 - b1 ** t) * m[i] / u[i]
    return params


def nadam_ref(params, grads, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
              momentum_decay=4e-3, decoupled_weight_decay=False, maximize=False):
    b1, b2 = betas
    params = [p.copy() for p in params]
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    prod = [1.0] * len(params)
    for t, gs in enumerate(grads, start=1):
        for i, g in enumerate(gs):
            g, params[i] = _decayed(g, params[i], lr, weight_decay, maximize,
                                    decoupled_weight_decay)
            mu = b1 * (1 - 0.5 * 0.96 ** (t * momentum_decay))
            mu_next = b1 * (1 - 0.5 * 0.96 ** ((t + 1) * momentum_decay))
            # torch keeps the product in a default-dtype (float32) tensor
            prod[i] = float(np.float32(prod[i]) * np.float32(mu))
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * g * g
            denom = np.sqrt(v[i] / (1 - b2 ** t)) + eps
            params[i] = (params[i] - lr * (1 - mu) / (1 - prod[i]) * g / denom
                         - lr * mu_next / (1 - prod[i] * mu_next) * m[i] / denom)
    return params


def radam_ref(params, grads, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
              decoupled_weight_decay=False, maximize=False):
    b1, b2 = betas
    params = [p.copy() for p in params]
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    rho_inf = 2 / (1 - b2) - 1
    for t, gs in enumerate(grads, start=1):
        for i, g in enumerate(gs):
            g, params[i] = _decayed(g, params[i], lr, weight_decay, maximize,
                                    decoupled_weight_decay)
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * g * g
            mhat = m[i] / (1 - b1 ** t)
            rho_t = rho_inf - 2 * t * b2 ** t / (1 - b2 ** t)
            if rho_t > 5:
                r = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf
                              / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
                adaptive = math.sqrt(1 - b2 ** t) / (np.sqrt(v[i]) + eps)
                params[i] = params[i] - lr * mhat * r * adaptive
            else:
                params[i] = params[i] - lr * mhat
    return params


CASES = [
    (ft.optim.RMSprop, rmsprop_ref, dict()),
    (ft.optim.RMSprop, rmsprop_ref, dict(lr=0.05, alpha=0.9, momentum=0.8)),
    (ft.optim.RMSprop, rmsprop_ref, dict(lr=0.05, centered=True, weight_decay=0.1)),
    (ft.optim.RMSprop, rmsprop_ref, dict(centered=True, momentum=0.5, maximize=True)),
    (ft.optim.Adagrad, adagrad_ref, dict()),
    (ft.optim.Adagrad, adagrad_ref, dict(lr=0.1, lr_decay=0.05, initial_accumulator_value=0.3,
                                         weight_decay=0.01)),
    (ft.optim.Adagrad, adagrad_ref, dict(maximize=True)),
    (ft.optim.Adamax, adamax_ref, dict()),
    (ft.optim.Adamax, adamax_ref, dict(lr=0.01, betas=(0.8, 0.9), weight_decay=0.1)),
    (ft.optim.NAdam, nadam_ref, dict()),
    (ft.optim.NAdam, nadam_ref, dict(lr=0.01, momentum_decay=0.1, weight_decay=0.05)),
    (ft.optim.NAdam, nadam_ref, dict(weight_decay=0.05, decoupled_weight_decay=True,
                                     maximize=True)),
    (ft.optim.RAdam, radam_ref, dict()),
    (ft.optim.RAdam, radam_ref, dict(lr=0.01, betas=(0.5, 0.6), weight_decay=0.1)),
    (ft.optim.RAdam, radam_ref, dict(betas=(0.5, 0.6), weight_decay=0.1,
                                     decoupled_weight_decay=True)),
]


@pytest.mark.parametrize("cls,ref,kw", CASES, ids=lambda c: getattr(c, "__name__", str(c)))
def test_matches_reference(cls, ref, kw):
    params, grads = _problem(7)
    got, _ = _run(cls, params, grads, **kw)
    for g, w in zip(got, ref(params, grads, **kw)):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)


def test_first_steps_closed_forms():
    """Step 1 of RMSprop moves by lr/sqrt(1-alpha) sign(g); Adagrad and Adamax by lr sign(g);
    RAdam's first steps (rho_t <= 5) are plain momentum: p - lr g."""
    p0, g = np.array([0.5, -2.0, 3.0]), np.array([0.3, -4.0, 0.05])
    sign = np.sign(g)
    for cls, kw, want in [
            (ft.optim.RMSprop, dict(lr=0.1, alpha=0.75), p0 - 0.1 * sign / math.sqrt(0.25)),
            (ft.optim.Adagrad, dict(lr=0.1), p0 - 0.1 * sign),
            (ft.optim.Adamax, dict(lr=0.1), p0 - 0.1 * sign),
            (ft.optim.RAdam, dict(lr=0.1), p0 - 0.1 * g)]:
        got, _ = _run(cls, [p0], [[g]], **kw)
        np.testing.assert_allclose(got[0], want, rtol=1e-6)


def test_radam_rectified_regime_is_reached():
    """With beta2 = 0.6, rho_inf = 4 < 5: RAdam never rectifies; with 0.9, rho_t > 5 from t = 6."""
    params, grads = _problem(8)
    got, _ = _run(ft.optim.RAdam, params, grads, betas=(0.9, 0.9))
    for g, w in zip(got, radam_ref(params, grads, betas=(0.9, 0.9))):
        np.testing.assert_allclose(g, w, rtol=1e-12)


@pytest.mark.parametrize("cls,kw,msg", [
    (ft.optim.RMSprop, dict(alpha=-1), "Invalid alpha value: -1"),
    (ft.optim.RMSprop, dict(momentum=-0.1), "Invalid momentum value: -0.1"),
    (ft.optim.Adagrad, dict(lr_decay=-1), "Invalid lr_decay value: -1"),
    (ft.optim.Adagrad, dict(initial_accumulator_value=-1),
     "Invalid initial_accumulator_value value: -1"),
    (ft.optim.NAdam, dict(momentum_decay=-1), "Invalid momentum_decay value: -1"),
    (ft.optim.Adamax, dict(betas=(1.0, 0.9)), "Invalid beta parameter at index 0: 1.0"),
    (ft.optim.RAdam, dict(lr=-1), "Invalid learning rate: -1"),
])
def test_argument_errors(cls, kw, msg):
    with pytest.raises(ValueError, match=msg.replace("(", r"\(").replace(".", r"\.")):
        cls([ft.zeros(2, requires_grad=True)], **kw)


def test_nadam_mu_product_in_the_default_dtype():
    """NAdam's mu_product is a tensor of the default dtype, as torch's: float32, so the
    update reads the product rounded to float32 (1 - 0.9 (1 - 0.96^0.004 / 2) rounded)."""
    p = ft.tensor([1.0], dtype=ft.float64, requires_grad=True)
    opt = ft.optim.NAdam([p])
    p.grad = ft.tensor([0.5], dtype=ft.float64)
    opt.step()
    prod = opt.state[p]["mu_product"]
    assert prod.dtype == ft.float32
    mu = 0.9 * (1 - 0.5 * 0.96 ** 0.004)
    assert prod.item() == float(np.float32(mu))
    ft.set_default_dtype(ft.float64)
    try:
        q = ft.tensor([1.0], requires_grad=True)
        opt = ft.optim.NAdam([q])
        q.grad = ft.tensor([0.5])
        opt.step()
        assert opt.state[q]["mu_product"].dtype == ft.float64
    finally:
        ft.set_default_dtype(ft.float32)


def test_defaults_and_state_dict_round_trip():
    """torch's defaults; the state (step, accumulators) survives state_dict/load_state_dict."""
    assert ft.optim.RMSprop([ft.zeros(1, requires_grad=True)]).defaults["lr"] == 1e-2
    assert ft.optim.Adamax([ft.zeros(1, requires_grad=True)]).defaults["lr"] == 2e-3
    assert ft.optim.NAdam([ft.zeros(1, requires_grad=True)]).defaults["momentum_decay"] == 4e-3
    assert ft.optim.Adagrad([ft.zeros(1, requires_grad=True)]).defaults["eps"] == 1e-10
    params, grads = _problem(9)
    for cls in (ft.optim.RMSprop, ft.optim.Adagrad, ft.optim.Adamax, ft.optim.NAdam,
                ft.optim.RAdam):
        full, _ = _run(cls, params, grads)
        half, opt = _run(cls, params, grads[:3])
        ps = [ft.tensor(p, dtype=ft.float64, requires_grad=True) for p in half]
        opt2 = cls(ps)
        opt2.load_state_dict(opt.state_dict())
        for gs in grads[3:]:
            for p, g in zip(ps, gs):
                p.grad = ft.tensor(g, dtype=ft.float64)
            opt2.step()
        # NAdam's float32 mu_product comes back as float64, the parameters' dtype (torch's
        # load_state_dict casts every floating state tensor but 'step'), so the resumed run
        # reads an unrounded product from there on
        rtol = 1e-6 if cls is ft.optim.NAdam else 1e-12
        for a, b in zip(ps, full):
            np.testing.assert_allclose(a.detach().numpy(), b, rtol=rtol)
