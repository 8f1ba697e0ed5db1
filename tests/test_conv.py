"""The conv_general_dilated primitive and ft.lax's convolutions: values and gradients
against JAX (dimension numbers, groups, dilations, strides, padding), float64 finite
differences, the transpose identity for both operands, grad-of-grad, vmap of the
convolution and of its gradient (per-example gradients) against a loop, jit against eager,
and the facade's convolutions under ft.compile. (The registry suite checks the primitive's
rules on drawn shapes; tests/oracle compares the facade's convs with torch's.)"""
from __future__ import annotations

import numpy as np
import pytest

import functrans as ft
import functrans.numpy as fnp
from functrans import lax
from functrans.primitives import conv as conv_module

pytestmark = pytest.mark.usefixtures("x64")  # float64 references: conftest.x64

jax = pytest.importorskip("jax")
jlax = jax.lax

RNG = np.random.default_rng(0)


def randn(*shape):
    return RNG.standard_normal(shape)


# (lhs shape, rhs shape, keyword arguments): every parameter of the primitive exercised
CASES = {
    "same": ((2, 4, 7, 6), (6, 4, 3, 2), dict(window_strides=(1, 1), padding="SAME")),
    "groups_negative_pad": ((2, 4, 7, 6), (6, 2, 3, 2), dict(
        window_strides=(2, 1), padding=((1, 2), (0, -1)), feature_group_count=2)),
    "batch_groups": ((4, 3, 7, 6), (6, 3, 3, 2), dict(window_strides=(2, 3), padding="VALID",
                                                      batch_group_count=2)),
    "dilations": ((2, 4, 7, 6), (6, 4, 3, 2), dict(
        window_strides=(2, 1), padding=((1, 2), (2, 1)), lhs_dilation=(2, 3),
        rhs_dilation=(1, 2))),
    "nhwc": ((2, 7, 6, 4), (3, 2, 4, 6), dict(
        window_strides=(1, 2), padding="SAME", rhs_dilation=(2, 1),
        dimension_numbers=("NHWC", "HWIO", "NHWC"))),
    "1d_mixed_layouts": ((2, 7, 4), (3, 4, 6), dict(window_strides=(2,), padding="SAME_LOWER",
                                                    dimension_numbers=("NWC", "WIO", "NCW"))),
    "3d_groups": ((2, 4, 5, 4, 3), (6, 2, 2, 3, 2), dict(window_strides=(1, 2, 1),
                                                          padding="SAME", feature_group_count=2)),
    "depthwise": ((2, 6, 9), (6, 1, 3), dict(window_strides=(3,), padding=((1, 1),),
                                             feature_group_count=6, rhs_dilation=(2,))),
}


def _pair(name):
    ls, rs, kw = CASES[name]
    return randn(*ls), randn(*rs), kw


@pytest.fixture(autouse=True)
def _x64():
    with jax.enable_x64(True):
        yield


@pytest.mark.parametrize("name", CASES)
def test_values_and_grads_match_jax(name):
    x, w, kw = _pair(name)

    def value_and_grads(L, G):
        def f(x, w):
            y = L.conv_general_dilated(x, w, **kw)
            return y, G(lambda x, w: (L.conv_general_dilated(x, w, **kw) ** 2).sum(),
                        (0, 1))(x, w)
        return f
    ours = value_and_grads(lax, ft.grad)(x, w)
    theirs = jax.jit(value_and_grads(jlax, jax.grad))(x, w)     # one compilation
    for a, b in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs)):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10)


def test_transpose_identity_both_operands():
    """<u, J v> = <J^T u, v> for the lhs and for the rhs (the conv is bilinear: J is the conv
    with the other operand fixed)."""
    for name in ("groups_negative_pad", "batch_groups", "dilations", "nhwc"):
        x, w, kw = _pair(name)
        u = randn(*np.shape(lax.conv_general_dilated(x, w, **kw)))
        f = lambda x, w: lax.conv_general_dilated(x, w, **kw)  # noqa: E731
        _, vjp = ft.vjp(f, x, w)
        ct_x, ct_w = vjp(u)
        vx, vw = randn(*x.shape), randn(*w.shape)
        np.testing.assert_allclose(np.vdot(u, f(vx, w)), np.vdot(ct_x, vx), rtol=1e-10)
        np.testing.assert_allclose(np.vdot(u, f(x, vw)), np.vdot(ct_w, vw), rtol=1e-10)


def test_finite_differences_float64():
    x, w, kw = _pair("dilations")
    d_x, d_w = randn(*x.shape), randn(*w.shape)

    def f(x, w):
        return fnp.sum(fnp.tanh(lax.conv_general_dilated(x, w, **kw)))
    eps = 1e-6
    fd = (f(x + eps * d_x, w + eps * d_w) - f(x - eps * d_x, w - eps * d_w)) / (2 * eps)
    gx, gw = ft.grad(f, (0, 1))(x, w)
    np.testing.assert_allclose(np.vdot(gx, d_x) + np.vdot(gw, d_w), fd, rtol=1e-7)
    _, t = ft.jvp(f, (x, w), (d_x, d_w))
    np.testing.assert_allclose(t, fd, rtol=1e-7)


@pytest.mark.parametrize("name", ["groups_negative_pad", "batch_groups", "dilations"])
def test_grad_of_grad_matches_jax(name):
    """A gradient penalty (WGAN-GP): the norm of the input gradient, differentiated with
    respect to the kernel: transposes of transposes."""
    x, w, kw = _pair(name)

    def penalty(L, G):
        def critic(x, w):
            return (L.tanh(L.conv_general_dilated(x, w, **kw))).sum()
        return lambda x, w: (G(critic)(x, w) ** 2).sum()
    ours = ft.grad(penalty(lax, ft.grad), (0, 1))(x, w)
    theirs = jax.jit(jax.grad(penalty(jlax, jax.grad), (0, 1)))(x, w)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("name", ["same", "groups_negative_pad", "batch_groups", "depthwise"])
def test_vmap_against_a_loop(name):
    x, w, kw = _pair(name)
    xs, ws = np.stack([x, 0.5 * x + 1]), np.stack([w, -w + 0.25])
    f = lambda x, w: lax.conv_general_dilated(x, w, **kw)  # noqa: E731
    for axes in ((0, None), (None, 0), (0, 0)):
        got = ft.vmap(f, axes)(xs if axes[0] == 0 else x, ws if axes[1] == 0 else w)
        want = np.stack([f(xs[i] if axes[0] == 0 else x, ws[i] if axes[1] == 0 else w)
                         for i in range(2)])
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


def test_per_example_gradients():
    """vmap of the kernel's gradient over single examples (batch_group_count under vmap)."""
    x, w, kw = _pair("groups_negative_pad")

    def loss(w, xi):
        return fnp.sum(fnp.tanh(lax.conv_general_dilated(xi[None], w, **kw)))
    got = ft.vmap(ft.grad(loss), (None, 0))(w, x)
    want = np.stack([ft.grad(loss)(w, x[i]) for i in range(x.shape[0])])
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    theirs = jax.jit(jax.vmap(jax.grad(lambda w, xi: jax.numpy.tanh(jlax.conv_general_dilated(
        xi[None], w, **kw)).sum()), (None, 0)))(w, x)
    np.testing.assert_allclose(got, theirs, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", ["same", "batch_groups", "dilations", "1d_mixed_layouts"])
def test_jit_equals_eager(name):
    x, w, kw = _pair(name)

    def f(x, w):
        y = lax.conv_general_dilated(x, w, **kw)
        return fnp.sum(y * y), y
    eager = f(x, w)
    jitted = ft.jit(f)(x, w)
    for a, b in zip(jitted, eager):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    g_eager = ft.grad(lambda x, w: f(x, w)[0], (0, 1))(x, w)
    g_jit = ft.jit(ft.grad(lambda x, w: f(x, w)[0], (0, 1)))(x, w)
    for a, b in zip(g_jit, g_eager):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_jaxpr_holds_one_primitive():
    x, w, kw = _pair("same")
    text = str(ft.make_jaxpr(lambda x, w: lax.conv_general_dilated(x, w, **kw))(x, w))
    assert text.count("conv_general_dilated[") == 1
    grad_text = str(ft.make_jaxpr(ft.grad(
        lambda x, w: (lax.conv_general_dilated(x, w, **kw) ** 2).sum(), (0, 1)))(x, w))
    assert grad_text.count("conv_general_dilated[") == 3     # the forward, d lhs, d rhs


def test_conv_transpose_matches_jax():
    x, w = randn(2, 5, 6, 3), randn(3, 2, 3, 4)
    for kw in (dict(strides=(2, 1), padding="SAME"), dict(strides=(2, 3), padding="VALID"),
               dict(strides=(1, 2), padding=((1, 2), (0, 1)), rhs_dilation=(2, 1)),
               dict(strides=(2, 2), padding="SAME", transpose_kernel=True)):
        wk = w if not kw.get("transpose_kernel") else randn(3, 2, 4, 3)
        np.testing.assert_allclose(lax.conv_transpose(x, wk, **kw),
                                   jlax.conv_transpose(x, wk, **kw), rtol=1e-10, atol=1e-10)


def test_wrappers_and_keywords():
    x, w = randn(2, 3, 6, 5), randn(4, 3, 3, 2)
    np.testing.assert_allclose(lax.conv(x, w, (1, 2), "SAME"), jlax.conv(x, w, (1, 2), "SAME"))
    got = lax.conv_with_general_padding(lhs=x, rhs=w, window_strides=(2, 1),
                                        padding=((1, 1), (0, -1)), lhs_dilation=(1, 1),
                                        rhs_dilation=(2, 1))
    want = jlax.conv_with_general_padding(x, w, (2, 1), ((1, 1), (0, -1)), (1, 1), (2, 1))
    np.testing.assert_allclose(got, want, rtol=1e-12)
    y = lax.conv(x.astype(np.int32), w.astype(np.int32), (1, 1), "VALID",
                 preferred_element_type=np.float32)
    assert y.dtype == np.float32
    dn = lax.conv_dimension_numbers(x.shape, w.shape, ("NCHW", "OIHW", "NHWC"))
    assert dn == lax.ConvDimensionNumbers((0, 1, 2, 3), (0, 1, 2, 3), (0, 3, 1, 2))
    assert lax.conv_general_dilated(x, w, (1, 1), "VALID", dimension_numbers=dn).shape == \
        (2, 4, 4, 4)


def test_integer_and_empty_operands():
    x, w = np.arange(2 * 3 * 5).reshape(2, 3, 5).astype(np.int32), np.ones((4, 3, 2), np.int32)
    np.testing.assert_array_equal(lax.conv(x, w, (1,), "VALID"),
                                  jlax.conv(x, w, (1,), "VALID"))
    empty = lax.conv(np.ones((0, 3, 5)), np.ones((4, 3, 2)), (1,), "VALID")
    assert empty.shape == (0, 4, 4)


def test_errors_name_the_primitive_and_shapes():
    with pytest.raises(ValueError, match=r"conv_general_dilated: .*4 // 1 != 2"):
        lax.conv(np.ones((1, 4, 5, 5)), np.ones((3, 2, 3, 3)), (1, 1), "SAME")
    with pytest.raises(TypeError, match=r"same dtypes, got float64, float32"):
        lax.conv(np.ones((1, 2, 5, 5)), np.ones((3, 2, 3, 3), np.float32), (1, 1), "SAME")
    with pytest.raises(RuntimeError, match=r"Unrecognized padding type"):
        lax.conv(np.ones((1, 2, 5, 5)), np.ones((3, 2, 3, 3)), (1, 1), "FULL")


def test_facade_convs_are_one_node_and_compile():
    """The facade's conv2d is one ConvolutionBackward0 node over the primitive; ft.compile
    of a conv model gives the facade's values and gradients."""
    torch_like = ft.nn
    ft.manual_seed(0)
    model = torch_like.Sequential(torch_like.Conv2d(3, 4, 3, padding=1, groups=1),
                                  torch_like.ReLU(), torch_like.Conv2d(4, 4, 3, stride=2,
                                                                       groups=2),
                                  torch_like.ConvTranspose2d(4, 2, 3, stride=2,
                                                             output_padding=1))
    x = ft.tensor(randn(2, 3, 9, 8).astype(np.float32))
    out = model(x)
    assert out.grad_fn.name() == "ConvolutionBackward0"
    out.square().sum().backward()
    grads = [p.grad.numpy().copy() for p in model.parameters()]
    model.zero_grad()
    compiled = ft.compile(model)
    for _ in range(3):      # the first calls and the repeat tier
        model.zero_grad()
        y = compiled(x)
        y.square().sum().backward()
    np.testing.assert_allclose(y.detach().numpy(), out.detach().numpy(), rtol=1e-5, atol=1e-6)
    for p, g in zip(model.parameters(), grads):
        np.testing.assert_allclose(p.grad.numpy(), g, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["same", "groups_negative_pad", "batch_groups", "nhwc",
                                  "3d_groups"])
def test_blocked_products_equal_one_product(name, monkeypatch):
    """The NumPy implementation builds its column matrix in blocks (of batch entries, or of
    the first kernel axis, accumulated, for a kernel's gradient): forced to tiny blocks, the
    values and both gradients are those of one block."""
    x, w, kw = _pair(name)

    def run():
        return ft.value_and_grad(lambda x, w: fnp.sum(fnp.tanh(
            lax.conv_general_dilated(x, w, **kw))), (0, 1))(x, w)
    whole = run()
    monkeypatch.setattr(conv_module, "_COLS_BYTES", 64)
    blocked = run()
    for a, b in zip(jax.tree_util.tree_leaves(blocked), jax.tree_util.tree_leaves(whole)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-13)
