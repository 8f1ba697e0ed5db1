"""Conv1d / F.conv1d against a direct NumPy sum over torch's cross-correlation formula, and
Mish / F.mish against x tanh(softplus(x)); gradients against float64 central differences
(issue 15, item 1)."""
from __future__ import annotations

import numpy as np
import pytest

import functrans as ft
import functrans.nn.functional as F
from conftest import fd_grad

pytestmark = pytest.mark.usefixtures("x64")  # float64 references: conftest.x64


def _np_conv1d(x, w, b, stride, pad, dil, groups):
    n, c, length = x.shape
    o, cg, k = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), pad))
    lo = (xp.shape[2] - dil * (k - 1) - 1) // stride + 1
    out = np.zeros((n, o, lo))
    per = o // groups
    for oc in range(o):
        g = oc // per
        for t in range(lo):
            win = xp[:, g * cg:(g + 1) * cg, t * stride:t * stride + dil * (k - 1) + 1:dil]
            out[:, oc, t] = np.einsum("nck,ck->n", win, w[oc])
    return out + (0 if b is None else b[None, :, None])


@pytest.mark.parametrize("stride,padding,dil,groups,bias", [
    (1, 0, 1, 1, True), (2, 1, 1, 1, False), (1, "same", 2, 2, True), (3, 2, 1, 2, True)])
def test_conv1d_values_and_gradients(stride, padding, dil, groups, bias):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4, 9))
    w = rng.standard_normal((6, 4 // groups, 3))
    b = rng.standard_normal(6) if bias else None
    pad = (dil, dil) if padding == "same" else (padding, padding)
    want = _np_conv1d(x, w, b, stride, pad, dil, groups)
    xt, wt = ft.tensor(x, requires_grad=True), ft.tensor(w, requires_grad=True)
    y = F.conv1d(xt, wt, None if b is None else ft.tensor(b), stride, padding, dil, groups)
    np.testing.assert_allclose(y.detach().numpy(), want, rtol=1e-12, atol=1e-12)
    wts = rng.standard_normal(want.shape)
    (y * ft.tensor(wts)).sum().backward()
    np.testing.assert_allclose(
        xt.grad.numpy(), fd_grad(lambda v: np.sum(_np_conv1d(v, w, b, stride, pad, dil, groups)
                                                  * wts), x), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(
        wt.grad.numpy(), fd_grad(lambda v: np.sum(_np_conv1d(x, v, b, stride, pad, dil, groups)
                                                  * wts), w), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(F.conv1d(x, w, b, stride, padding, dil, groups), want,
                               rtol=1e-12, atol=1e-12)       # arrays: functrans.numpy


def test_conv1d_module():
    ft.manual_seed(0)
    m = ft.nn.Conv1d(4, 6, 3, stride=2, padding=1)
    assert {k: tuple(v.shape) for k, v in m.state_dict().items()} == {"weight": (6, 4, 3),
                                                                       "bias": (6,)}
    assert repr(m) == "Conv1d(4, 6, kernel_size=(3,), stride=(2,), padding=(1,))"
    bound = 1 / np.sqrt(12)
    assert np.abs(m.weight.detach().numpy()).max() <= bound
    assert tuple(m(ft.randn(2, 4, 9)).shape) == (2, 6, 5)
    assert tuple(m(ft.randn(4, 9)).shape) == (6, 5)            # unbatched
    with pytest.raises(RuntimeError, match="Expected 2D \\(unbatched\\) or 3D \\(batched\\) "
                                           "input to conv1d, but got input of size: \\[1, 2, 4, 9\\]"):
        m(ft.randn(1, 2, 4, 9))


def test_mish():
    x = np.linspace(-4, 4, 9)
    want = x * np.tanh(np.log1p(np.exp(x)))
    xt = ft.tensor(x, requires_grad=True)
    y = ft.nn.Mish()(xt)
    np.testing.assert_allclose(y.detach().numpy(), want, rtol=1e-12)
    y.sum().backward()
    np.testing.assert_allclose(xt.grad.numpy(),
                               fd_grad(lambda v: np.sum(v * np.tanh(np.log1p(np.exp(v)))), x),
                               rtol=1e-7)
    assert y.grad_fn.name() == "MishBackward0"
    np.testing.assert_allclose(ft.grad(lambda v: F.mish(v).sum())(x), xt.grad.numpy(), rtol=1e-12)
