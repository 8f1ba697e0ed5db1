"""functrans/residuals.py: what ft.compile's forward saves for its backward."""
from __future__ import annotations

import numpy as np
import pytest

import functrans as ft
import functrans.numpy as fnp
import functrans.nn as nn
from functrans import core, residuals
from functrans.ad import jvp_jaxpr, partial_eval_jaxpr

F32 = np.float32
pytestmark = pytest.mark.usefixtures("x64")  # float64 references: conftest.x64


def run(closed, *args):
    return core.eval_jaxpr(closed.jaxpr, closed.consts, *args)


def split(f, *args):
    """(known, unknown, num_res) of f's JVP, every argument's tangent unknown."""
    jclosed, _ = jvp_jaxpr(ft.make_jaxpr(f)(*args), [True] * len(args), instantiate=False)
    known, unknown, _, num_res = partial_eval_jaxpr(
        jclosed, [False] * len(args) + [True] * len(args))
    return known, unknown, num_res


def saved_bytes(known, num_res):
    return sum(a.aval.size * a.aval.dtype.itemsize
               for a in known.jaxpr.outvars[len(known.jaxpr.outvars) - num_res:])


def tangents(triple, args, ts):
    known, unknown, num_res = triple
    outs = run(known, *args)
    return run(unknown, *outs[len(outs) - num_res:], *ts)


def test_unbroadcast_residuals_saves_the_small_value():
    """ft.compile's split of a LayerNorm's JVP: the residual 1 / std broadcast over the
    row (and a literal's broadcast) become the per-row value (or nothing), broadcast again
    on the tangent side; fewer bytes are saved, and the tangents are the same."""
    def norm(x, w):
        mu = fnp.mean(x, axis=-1, keepdims=True)
        xc = x - mu
        r = 1.0 / fnp.sqrt(fnp.mean(xc * xc, axis=-1, keepdims=True) + 1e-5)
        return xc * r * w + fnp.ones_like(x) * 2.0
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((6, 8)).astype(F32), rng.standard_normal(8).astype(F32)
    tx, tw = rng.standard_normal((6, 8)).astype(F32), rng.standard_normal(8).astype(F32)
    before = split(norm, x, w)

    def residual_producers(known, num_res):
        defs = {v: e.primitive.name for e in known.jaxpr.eqns for v in e.outvars}
        return [defs.get(a) for a in known.jaxpr.outvars[len(known.jaxpr.outvars) - num_res:]]
    assert "broadcast_in_dim" in residual_producers(*before[::2])
    after = residuals.unbroadcast_residuals(*before)
    assert "broadcast_in_dim" not in residual_producers(*after[::2])
    assert saved_bytes(*after[::2]) < saved_bytes(*before[::2])
    core.check_jaxpr(after[0].jaxpr)
    core.check_jaxpr(after[1].jaxpr)
    for a, b in zip(tangents(before, (x, w), (tx, tw)), tangents(after, (x, w), (tx, tw)),
                    strict=True):
        np.testing.assert_array_equal(a, b)


def test_fold_tangent_scales_saves_gelus_derivative_once():
    """Exact GELU's JVP reads three hidden-size residuals (0.5 * h, 1 + erf, the scaled
    exp) through `t * a * 0.5 + b * (t * c)`: folded, the known side saves the one scale
    gelu'(h) and the tangent side multiplies by it. The tangents agree with the unfolded
    split to float64 rounding and with finite differences."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 8))
    w = rng.standard_normal((8, 16))
    t = rng.standard_normal((6, 8))
    tw = rng.standard_normal((8, 16))

    def mlp(x, w):
        return fnp.sum(ft.nn.gelu(x @ w, approximate=False) ** 2, axis=1)
    before = split(mlp, x, w)
    after = residuals.fold_tangent_scales(*before)
    core.check_jaxpr(after[0].jaxpr)
    core.check_jaxpr(after[1].jaxpr)
    big = [a for a in after[0].jaxpr.outvars[-after[2]:] if a.aval.shape == (6, 16)]
    assert saved_bytes(*after[::2]) < saved_bytes(*before[::2])
    assert len(big) == 1        # 2 * gelu(h) * gelu'(h): the square's scale folds in too
    a, = tangents(before, (x, w), (t, tw))
    b, = tangents(after, (x, w), (t, tw))
    np.testing.assert_allclose(b, a, rtol=1e-13, atol=1e-13)
    eps = 1e-6
    fd = (mlp(x + eps * t, w + eps * tw) - mlp(x - eps * t, w - eps * tw)) / (2 * eps)
    np.testing.assert_allclose(b, np.asarray(fd), rtol=1e-7, atol=1e-8)


def test_fold_tangent_scales_leaves_what_would_not_save():
    """Terms in two tangents and a scale of one residual (no residual saved by folding
    it) are left alone: the same triple comes back."""
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    t, u = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))

    def f(x, y):
        a, b = fnp.sin(x), fnp.cos(x)
        return a * y, x * y, fnp.exp(x) * 2.0
    before = split(f, x, y)
    after = residuals.fold_tangent_scales(*before)
    assert after[0] is before[0] and after[1] is before[1] and after[2] == before[2]
    for p, q in zip(tangents(before, (x, y), (t, u)), tangents(after, (x, y), (t, u)),
                    strict=True):
        np.testing.assert_allclose(q, p, rtol=1e-13, atol=1e-13)


def test_compiled_models_train_the_same_with_folded_scales():
    """ft.compile of MLPs with each elementwise activation: three steps of SGD give the
    eager facade's gradients (float64, to rounding), so the folded scales are right in
    the backward the compiled call runs."""
    for act in (nn.GELU(), nn.GELU(approximate="tanh"), nn.SiLU(), nn.Mish(), nn.ELU(),
                nn.Softplus(), nn.Tanh()):
        grads = []
        for compiled in (False, True):
            ft.manual_seed(0)
            m = nn.Sequential(nn.Linear(8, 16), act, nn.Linear(16, 8), act).double()
            f = ft.compile(m) if compiled else m
            opt = ft.optim.SGD(m.parameters(), lr=0.1)
            x = ft.randn(4, 8, dtype=ft.float64)
            for _ in range(3):
                opt.zero_grad()
                (f(x) ** 2).sum().backward()
                opt.step()
            grads.append([p.grad.numpy().copy() for p in m.parameters()])
        for a, b in zip(*grads, strict=True):
            np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-14)


def test_unview_residuals_saves_the_value_the_views_share():
    """Attention's q, k and v, cut out of one product and into heads, are residuals that
    are views of that product: it is saved once instead (no copies of memory-sharing
    outputs), the tangent side cuts them again, and the tangents are the same bits."""
    rng = np.random.default_rng(2)
    x, w = rng.standard_normal((2, 5, 12)), rng.standard_normal((12, 36))
    tx, tw = rng.standard_normal((2, 5, 12)), rng.standard_normal((12, 36))

    def attend(x, w):
        qkv = x @ w
        q, k, v = (fnp.swapaxes(fnp.reshape(qkv[..., i * 12:(i + 1) * 12], (2, 5, 3, 4)), 1, 2)
                   for i in range(3))
        s = q @ fnp.swapaxes(k, -1, -2)
        return fnp.tanh(s) @ v
    before = split(attend, x, w)
    after = residuals.unview_residuals(*before)
    core.check_jaxpr(after[0].jaxpr)
    core.check_jaxpr(after[1].jaxpr)
    res = after[0].jaxpr.outvars[-after[2]:]
    assert any(a.aval.shape == (2, 5, 36) for a in res)          # the product, once
    assert not any(a.aval.shape == (2, 3, 5, 4) for a in res)    # no head of it
    assert after[2] == before[2] - 2 and saved_bytes(*after[::2]) == saved_bytes(*before[::2])
    for a, b in zip(tangents(before, (x, w), (tx, tw)), tangents(after, (x, w), (tx, tw)),
                    strict=True):
        np.testing.assert_array_equal(a, b)
