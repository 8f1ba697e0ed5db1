"""The direct native convolution kernels (backends/native/conv.cpp, conv.py) that
conv_general_dilated runs for float32 2-D convolutions without groups: values and both
gradients against float64 references within the rounding bound of a float32 sum
(strides, padding, negative padding, kernel and input dilation, 1x1, odd sizes, batch 1,
1 or 3 input channels, 16 to 64 output channels), results independent of the thread
count, and the im2col path where the kernels do not apply (channels not a multiple of 16,
groups, float64, cpu_backend="numpy")."""
from __future__ import annotations

import numpy as np
import pytest

import functrans as ft
import functrans.numpy as fnp
from functrans import lax
from functrans.backends.native import conv as native_conv, toolchain
from functrans.primitives import conv as conv_module

RNG = np.random.default_rng(30)
EPS32 = float(np.finfo(np.float32).eps)

# (lhs NCHW, rhs OIHW, keyword arguments of lax.conv_general_dilated)
CASES = {
    "3x3_same": ((2, 5, 9, 7), (16, 5, 3, 3), dict(padding=((1, 1), (1, 1)))),
    "stride_negative_pad": ((3, 4, 11, 10), (32, 4, 3, 2), dict(
        window_strides=(2, 3), padding=((2, 0), (1, -1)))),
    "dilations": ((2, 3, 10, 13), (48, 3, 3, 3), dict(
        window_strides=(1, 2), padding=((1, 2), (0, 1)), lhs_dilation=(2, 1),
        rhs_dilation=(2, 3))),
    "1x1_batch1": ((1, 7, 5, 6), (64, 7, 1, 1), dict()),
    "one_channel_odd": ((3, 1, 13, 17), (32, 1, 5, 3), dict(padding=((2, 2), (1, 1)))),
    "wide_rows": ((2, 16, 6, 30), (16, 16, 3, 3), dict(padding=((1, 1), (1, 1)))),
}


@pytest.fixture
def kernels():
    """The kernels built (skipped without a compiler), and a record of the calls that they
    answered: (direct, out shape)."""
    try:
        toolchain.find_compiler()
    except toolchain.ToolchainError as e:
        pytest.skip(str(e))
    if native_conv.entries() is None:
        pytest.skip("the native convolution kernels did not build")
    calls = []
    run = conv_module.NATIVE_CONV.run

    def spy(*args):
        out = run(*args)
        direct = args[7]
        if out is not None:
            calls.append((direct, out.shape))
        return out
    conv_module.NATIVE_CONV.run = spy
    yield calls
    conv_module.NATIVE_CONV.run = run


def _conv(x, w, kw):
    return lax.conv_general_dilated(x, w, kw.pop("window_strides", (1, 1)),
                                    kw.pop("padding", ((0, 0), (0, 0))), **kw)


def _check(got, want, bound, what):
    """got within bound (elementwise) of the float64 reference want."""
    got = np.asarray(got, np.float64)
    err = np.abs(got - want) - bound
    k = np.unravel_index(int(np.argmax(err)), err.shape)
    assert err[k] <= 0, (f"{what}: |{got[k]} - {want[k]}| above the bound {bound[k]} at {k}")


def _bound(terms, n):
    """The rounding bound of float32 sums of n products (inputs rounded to float32 too):
    sqrt(n)-growth times a margin, relative to the sum of the terms' magnitudes. NumPy's
    float32 GEMM is held to the same bound in test_bound_holds_for_numpy."""
    return 4 * (np.sqrt(n) + 2) * EPS32 * terms + 1e-30


def _loss_grads(x, w, kw, ct):
    def f(x, w):
        return fnp.sum(_conv(x, w, dict(kw)) * ct)
    return ft.grad(f, argnums=(0, 1))(x, w)


@pytest.mark.parametrize("name", sorted(CASES))
def test_values_and_gradients_within_float32_rounding(kernels, name):
    """The convolution, its input gradient and its kernel gradient in float32 by the native
    kernels, against float64 (each within the rounding bound of its sums, computed from the
    same sums over magnitudes)."""
    ls, rs, kw = CASES[name]
    x = RNG.standard_normal(ls).astype(np.float32)
    w = RNG.standard_normal(rs).astype(np.float32)
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    y = _conv(x, w, dict(kw))
    assert y.dtype == np.float32
    want = np.asarray(_conv(x64, w64, dict(kw)))
    n = rs[1] * rs[2] * rs[3]
    _check(y, want, _bound(np.asarray(_conv(abs(x64), abs(w64), dict(kw))), n), "conv")
    assert any(direct for direct, _ in kernels), "the forward did not run the direct kernel"

    ct = RNG.standard_normal(want.shape).astype(np.float32)
    kernels.clear()
    gx, gw = _loss_grads(x, w, kw, ct)
    gx64, gw64 = _loss_grads(x64, w64, kw, ct.astype(np.float64))
    ax, aw = _loss_grads(abs(x64), abs(w64), kw, abs(ct.astype(np.float64)))
    _check(gx, np.asarray(gx64), _bound(np.asarray(ax), rs[0] * rs[2] * rs[3]),
           "input gradient")
    _check(gw, np.asarray(gw64), _bound(np.asarray(aw), want.size // rs[0]), "kernel gradient")
    assert any(not direct for direct, _ in kernels), "the kernel gradient ran im2col"
    if rs[1] % native_conv.CHANNELS == 0:     # the input gradient has C output channels
        assert sum(direct for direct, _ in kernels) >= 1


def test_bound_holds_for_numpy(numpy_backend):
    """The bound the native kernels are held to also holds for the im2col path (NumPy's
    float32 GEMM, cpu_backend="numpy"): it is the rounding of a float32 sum, not a
    tolerance fitted to the kernels."""
    assert conv_module.NATIVE_CONV.run(*(None,) * 9) is None
    ls, rs, kw = CASES["dilations"]
    x = RNG.standard_normal(ls).astype(np.float32)
    w = RNG.standard_normal(rs).astype(np.float32)
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    got = conv_module._conv_impl(
        np, x, w, window_strides=kw["window_strides"], padding=kw["padding"],
        lhs_dilation=kw["lhs_dilation"], rhs_dilation=kw["rhs_dilation"],
        dimension_numbers=conv_module.ConvDimensionNumbers((0, 1, 2, 3), (0, 1, 2, 3),
                                                           (0, 1, 2, 3)),
        feature_group_count=1, batch_group_count=1)
    want = np.asarray(_conv(x64, w64, dict(kw)))
    _check(got, want, _bound(np.asarray(_conv(abs(x64), abs(w64), dict(kw))),
                             rs[1] * rs[2] * rs[3]), "im2col conv")


@pytest.mark.parametrize("direct", [True, False])
def test_results_do_not_depend_on_threads(kernels, direct):
    """Every output is summed by one thread in a fixed order: 1, 2 and 3 threads give the
    same bits (and the direct kernel's two output layouts the same values)."""
    if direct:
        lhs = RNG.standard_normal((3, 5, 10, 12)).transpose(0, 2, 3, 1).astype(np.float32)
        rhs = RNG.standard_normal((3, 3, 5, 32)).astype(np.float32)
        out_sp = (10, 12)
    else:       # lhs (F, H, W, B), rhs (F, KH, KW, O): a kernel gradient's layouts
        lhs = RNG.standard_normal((4, 10, 12, 7)).astype(np.float32)
        rhs = RNG.standard_normal((48, 4, 10, 12)).transpose(1, 2, 3, 0).astype(np.float32)
        out_sp = (3, 3)
    outs = [native_conv.run(lhs, rhs, ((1, 1), (1, 1)), (1, 1), out_sp, (1, 1), (1, 1), direct,
                            planar, t) for t in (1, 2, 3) for planar in (False, True)]
    for k, o in enumerate(outs):
        if k % 2 and direct:       # planar: (B, O, Y, X)
            o = o.transpose(0, 2, 3, 1)
        assert np.array_equal(o, outs[0])


def test_im2col_where_the_kernels_do_not_apply(kernels):
    """24 output channels (not a multiple of 16), feature groups, float64, and
    cpu_backend="numpy" run im2col, with the same values."""
    x = RNG.standard_normal((2, 4, 8, 9)).astype(np.float32)
    for w, kw in ((RNG.standard_normal((24, 4, 3, 3)), {}),
                  (RNG.standard_normal((32, 2, 3, 3)), dict(feature_group_count=2))):
        w = w.astype(np.float32)
        y = _conv(x, w, dict(kw))
        want = np.asarray(_conv(x.astype(np.float64), w.astype(np.float64), dict(kw)))
        np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)
    _conv(x.astype(np.float64), RNG.standard_normal((32, 4, 3, 3)), {})
    assert not kernels
    w = RNG.standard_normal((32, 4, 3, 3)).astype(np.float32)
    native = np.asarray(_conv(x, w, {}))
    assert kernels
    kernels.clear()
    saved = ft.config.cpu_backend
    ft.config.update("cpu_backend", "numpy")
    try:
        y = np.asarray(_conv(x, w, {}))
    finally:
        ft.config.update("cpu_backend", saved)
    assert not kernels
    np.testing.assert_allclose(y, native, rtol=1e-5, atol=1e-5)


def test_facade_conv_layers_train_natively(kernels):
    """The facade's Conv2d forward and backward run the kernels (a float32 model), with
    torch's gradients' layout: weight (O, C, KH, KW), input NCHW."""
    ft.manual_seed(0)
    conv = ft.nn.Conv2d(3, 32, 3, padding=1, bias=False)
    x = ft.randn(2, 3, 8, 8, requires_grad=True)
    conv(x).square().sum().backward()
    assert {d for d, _ in kernels} == {True, False}
    w64 = conv.weight.detach().numpy().astype(np.float64)
    x64 = x.detach().numpy().astype(np.float64)

    def f(x, w):
        return fnp.sum(_conv(x, w, dict(padding=((1, 1), (1, 1)))) ** 2)
    gx, gw = ft.grad(f, argnums=(0, 1))(x64, w64)
    np.testing.assert_allclose(x.grad.numpy(), gx, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(conv.weight.grad.numpy(), gw, rtol=1e-4, atol=1e-3)


# ---------------------------------------------------------------------------
# the row scatter-add (an embedding's gradient): np.add.at's bits


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_row_scatter_add_has_add_at_bits(kernels, native_backend, dtype):
    """scatter_add over the first axis runs the native kernel (float32 and float64) and adds
    each row's updates in index order onto the operand, as np.add.at: the same bits, with
    rows repeated more often than the NumPy rows path takes, clipped out-of-range indices,
    non-contiguous updates; the embedding gradient of a facade model goes through it."""
    from functrans.primitives import REGISTRY, indexing
    impl = REGISTRY["scatter_add"].impl
    answered = []
    run = indexing.NATIVE_ROWS.run

    def spy(out, rows, upd):
        done = run(out, rows, upd)
        answered.append(done)
        return done
    indexing.NATIVE_ROWS.run = spy
    try:
        x = (RNG.standard_normal((50, 3, 4)) * 100).astype(dtype)
        for n, hi in ((1000, 50), (300, 2), (1, 50), (0, 50)):
            idx = RNG.integers(0, hi, (n, 1))
            upd = (RNG.standard_normal((n, 4, 3)) * 100).astype(dtype).transpose(0, 2, 1)
            want = x.copy()
            np.add.at(want, (idx[:, 0],), upd)
            got = impl(np, x, idx, upd)
            assert got.dtype == want.dtype and np.array_equal(got, want)
        idx = np.array([[-3], [60], [49]])                      # clipped to 0, 49, 49
        upd = np.ones((3, 3, 4), dtype)
        got = impl(np, x, idx, upd)
        assert np.array_equal(got[0], x[0] + 1) and np.array_equal(got[49], x[49] + 1 + 1)
        assert answered == [True] * 5
        emb = ft.nn.Embedding(50, 8)
        ids = ft.tensor(RNG.integers(0, 50, (6, 7)))
        emb(ids).pow(2).sum().backward()
        want = np.zeros((50, 8), np.float32)
        np.add.at(want, ids.numpy().ravel(), 2 * emb.weight.detach().numpy()[ids.numpy().ravel()])
        assert np.array_equal(emb.weight.grad.numpy(), want) and answered[-1] is True
    finally:
        indexing.NATIVE_ROWS.run = run


@pytest.mark.parametrize("shape", [(3, 5, 40, 32), (2, 7, 26, 64), (2, 4, 16, 48),
                                   (2, 3, 9, 40), (1, 2, 33, 3)])
@pytest.mark.parametrize("padding, dilation", [(((0, 0), (0, 0)), (1, 1)),
                                               (((2, 1), (1, 2)), (1, 1)),
                                               (((1, 0), (0, 1)), (2, 2))])
def test_the_pack_of_an_nchw_view_is_an_exact_copy(kernels, shape, padding, dilation):
    """conv.pack of a channels-apart view (an NCHW array seen as (B, H, W, C)): the register
    transposes (16x16 on AVX-512, 8x8 on AVX2), their masked row ends (widths not a
    multiple of the block), the channels past a multiple of it, padding and dilation: the
    same floats as NumPy's copy into the zero-padded, dilated buffer."""
    b, h, w, c = shape
    x = np.random.default_rng(0).standard_normal((b, c, h, w)).astype(np.float32)
    view = x.transpose(0, 2, 3, 1)
    (lh, hh), (lw, hw) = padding
    want = np.zeros((b, lh + (h - 1) * dilation[0] + 1 + hh,
                     lw + (w - 1) * dilation[1] + 1 + hw, c), np.float32)
    want[:, lh:lh + (h - 1) * dilation[0] + 1:dilation[0],
         lw:lw + (w - 1) * dilation[1] + 1:dilation[1]] = view
    for threads in (1, 2):
        got = native_conv.pack(view, padding, dilation, threads, native_conv.entries())
        np.testing.assert_array_equal(got, want)
