"""The native few-row float32 matrix product (primitives.linalg.NATIVE_GEMM, run by
backends/native/conv.py's direct kernel as a 1x1 convolution) that lowered programs call for
products of 2 to SMALL_ROWS rows by a weight of MIN_WEIGHT elements or more (a recurrent
layer's step): values against float64 within the rounding bound of a float32 sum, the
lowered programs (a jitted product, an LSTM's scan steps) taking it, and NumPy's matmul wherever
it does not apply (a column count not a multiple of 16, a non-contiguous operand, one row,
more than SMALL_ROWS rows, a smaller weight, cpu_backend="numpy")."""
from __future__ import annotations

import contextlib

import numpy as np
import pytest

import functrans as ft
from functrans.backends.native import conv as native_conv, toolchain
from functrans.primitives import linalg

RNG = np.random.default_rng(30)
EPS32 = float(np.finfo(np.float32).eps)


@pytest.fixture
def gemm_calls():
    """The kernel built (skipped without a compiler, and under cpu_backend="numpy"), and a
    record of the products that lowered programs sent to it: (x shape, y shape, True when
    the kernel wrote it)."""
    try:
        toolchain.find_compiler()
    except toolchain.ToolchainError as e:
        pytest.skip(str(e))
    if native_conv.gemm(2, 2, 16) is None:
        pytest.skip("the native kernels did not build")
    if ft.config.cpu_backend == "numpy":
        pytest.skip('cpu_backend="numpy" sends no product to the kernel')
    calls = []
    kernel = linalg.NATIVE_GEMM.kernel

    def spy(m, k, n):
        fn = kernel(m, k, n)
        if fn is None:
            return None

        def product(x, y, out):
            done = fn(x, y, out)
            calls.append((x.shape, y.shape, done))
            return done
        return product
    linalg.NATIVE_GEMM.kernel = spy
    yield calls
    linalg.NATIVE_GEMM.kernel = kernel


def _bound(x, y):
    """The rounding bound of float32 sums of K products, relative to the sum of their
    magnitudes (tests/test_native_conv.py's bound, which NumPy's GEMM meets too)."""
    terms = np.abs(x.astype(np.float64)) @ np.abs(y.astype(np.float64))
    return 4 * (np.sqrt(x.shape[1]) + 2) * EPS32 * terms + 1e-30


@pytest.mark.parametrize("m,k,n", [(2, 3, 16), (7, 33, 48), (20, 256, 1024), (32, 5, 32)])
def test_products_within_float32_rounding(gemm_calls, m, k, n):
    x = RNG.standard_normal((m, k)).astype(np.float32)
    y = RNG.standard_normal((k, n)).astype(np.float32)
    want = x.astype(np.float64) @ y.astype(np.float64)
    out = np.full((m, n), np.nan, np.float32)
    assert native_conv.gemm(m, k, n)(x, y, out)
    assert np.all(np.abs(out - want) <= _bound(x, y))
    assert np.all(np.abs(x @ y - want) <= _bound(x, y))       # NumPy meets the same bound


def test_jitted_few_row_product_takes_the_kernel(gemm_calls):
    x = RNG.standard_normal((20, 64)).astype(np.float32)
    w = RNG.standard_normal((64, 2048)).astype(np.float32)
    f = ft.jit(lambda x, w: x @ w)
    got = np.asarray(f(x, w))
    assert gemm_calls == [((20, 64), (64, 2048), True)]
    assert np.all(np.abs(got - x.astype(np.float64) @ w) <= _bound(x, w))


def test_numpy_where_the_kernel_does_not_apply(gemm_calls):
    """A transposed operand: the kernel declines and NumPy computes it; 2056 columns (not a
    multiple of 16), one row, more than SMALL_ROWS rows and a weight of fewer than
    MIN_WEIGHT elements are not sent to it, nor is any product under cpu_backend="numpy".
    The values are right in every case."""
    def check(x, w):
        got = np.asarray(ft.jit(lambda x, w: x @ w)(x, w))
        assert np.all(np.abs(got - x.astype(np.float64) @ w) <= _bound(x, w))
    x = RNG.standard_normal((20, 64)).astype(np.float32)
    check(x, np.asarray(RNG.standard_normal((2048, 64)), np.float32).T)
    assert gemm_calls == [((20, 64), (64, 2048), False)]
    gemm_calls.clear()
    for m, n in ((20, 2056), (1, 2048), (linalg.SMALL_ROWS + 1, 2048), (20, 1008)):
        check(RNG.standard_normal((m, 64)).astype(np.float32),
              RNG.standard_normal((64, n)).astype(np.float32))
    assert not gemm_calls
    saved = ft.config.cpu_backend
    ft.config.update("cpu_backend", "numpy")
    try:
        check(x, RNG.standard_normal((64, 2048)).astype(np.float32))
    finally:
        ft.config.update("cpu_backend", saved)
    assert not gemm_calls


def test_lstm_steps_take_the_kernel(gemm_calls):
    """A facade LSTM (hidden 256: a 256x1024 hidden weight) over 12 steps: its scan bodies
    are lowered after a few steps, and then the hidden state's product of each step
    (forward, and the backward's) runs natively, with the gradients of the float64 model
    within float32 rounding."""
    ft.manual_seed(0)
    lstm = ft.nn.LSTM(8, 256)
    x = ft.randn(12, 20, 8)
    out, _ = lstm(x)
    out.square().sum().backward()
    shapes = {(xs, ys) for xs, ys, done in gemm_calls if done}
    assert ((20, 256), (256, 1024)) in shapes       # h @ W_hhᵀ, W_hh laid out once per loop
    assert ((20, 1024), (1024, 256)) in shapes      # the gates' cotangent @ W_hh
    lstm64 = ft.nn.LSTM(8, 256).double()
    lstm64.load_state_dict({k: v.double() for k, v in lstm.state_dict().items()})
    out64, _ = lstm64(x.double())
    out64.square().sum().backward()
    for p, p64 in zip(lstm.parameters(), lstm64.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), p64.grad.numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("m", [2, 5, 7, 13, 20, 32])
@pytest.mark.parametrize("k,n", [(1, 16), (33, 48), (256, 1024), (1024, 256)])
def test_held_weight_panels_give_the_direct_kernels_bits(gemm_calls, m, k, n):
    """A weight a loop holds (NativeGemm.held) is laid out once as 16-column panels and read
    from them at every call: the same chain of fused multiply-adds per output as the direct
    kernel, so the same bits, for any row count (tiles of equal height) and contraction."""
    x = RNG.standard_normal((m, k)).astype(np.float32)
    y = RNG.standard_normal((k, n)).astype(np.float32)
    direct, held = np.full((m, n), np.nan, np.float32), np.full((m, n), np.nan, np.float32)
    entries = {id(y): [y, None]}
    on_panels = native_conv.gemm(m, k, n, entries)
    assert native_conv.gemm(m, k, n)(x, y, direct)
    assert on_panels(x, y, held)
    assert entries[id(y)][1] is not None                  # laid out on the first call
    np.testing.assert_array_equal(held, direct)
    assert np.all(np.abs(held - x.astype(np.float64) @ y) <= _bound(x, y))
    x2 = RNG.standard_normal((m, k)).astype(np.float32)   # later calls reuse the panels
    assert on_panels(x2, y, held) and native_conv.gemm(m, k, n)(x2, y, direct)
    np.testing.assert_array_equal(held, direct)
    other = y.copy()                                      # a weight not held: the direct kernel
    assert on_panels(x, other, held)
    assert native_conv.gemm(m, k, n)(x, other, direct)
    np.testing.assert_array_equal(held, direct)


@pytest.fixture
def laid_out():
    """The held weights' shapes, and whether a product laid each out, at each loop's end."""
    seen = []
    holding = linalg.NativeGemm.holding

    @contextlib.contextmanager
    def spy(self, arrays):
        with holding(self, arrays):
            yield
            seen.extend((e[0].shape, e[1] is not None) for e in self.held.values())
    linalg.NativeGemm.holding = spy
    yield seen
    linalg.NativeGemm.holding = holding


def test_scan_holds_its_weights_for_the_loop(gemm_calls, laid_out):
    """An eager scan whose body multiplies its carry by a const weight: the weight is held
    for the loop (laid out once) and the steps the lowered body runs take the panels; the
    values are the bits of the same lowered scan with nothing held, and the weight is
    released at the loop's end."""
    w = (RNG.standard_normal((256, 1024)) / 16).astype(np.float32)
    h0 = RNG.standard_normal((20, 256)).astype(np.float32)
    xs = RNG.standard_normal((12, 20, 1024)).astype(np.float32)

    def run():
        def body(h, x):
            g = h @ w + x
            h = np.float32(0.5) * ft.numpy.tanh(g[:, :256]) * ft.nn.functional.sigmoid(
                g[:, 256:512])
            return h, g
        return [np.asarray(a) for a in ft.lax.scan(body, h0, xs)]
    run()                     # the body's first steps run before it is lowered (NumPy's matmul)
    laid_out.clear()
    got = run()
    assert ((256, 1024), True) in laid_out
    assert any(done for _, ys, done in gemm_calls if ys == (256, 1024))
    assert not linalg.NATIVE_GEMM.held
    with monkeypatched(linalg.NativeGemm, "holding",
                       lambda self, arrays: contextlib.nullcontext()):
        want = run()
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)


def test_scan_lays_out_a_transposed_weight_from_its_rows(gemm_calls, laid_out):
    """A recurrent layer's x @ W_hhᵀ in a scan: the loop is passed W_hh's transposed view,
    not a transposed copy, and the native product lays its panels out from W_hh's rows
    (ft_gemm_pack, by its strides); the values are the bits of the copy's."""
    from functrans.higher_order import control_flow
    w = (RNG.standard_normal((1024, 256)) / 16).astype(np.float32)
    h0 = RNG.standard_normal((20, 256)).astype(np.float32)
    xs = RNG.standard_normal((12, 20, 1024)).astype(np.float32)
    passed = []
    transposed = control_flow._transposed

    def spy(c, rows, views):
        out = transposed(c, rows, views)
        passed.append(np.shares_memory(out, c))
        return out

    def run():
        def body(h, x):
            g = ft.lax.dot_general(h, w, (((1,), (1,)), ((), ()))) + x
            h = np.float32(0.5) * ft.numpy.tanh(g[:, :256]) * ft.nn.functional.sigmoid(
                g[:, 256:512])
            return h, g
        return [np.asarray(a) for a in ft.lax.scan(body, h0, xs)]
    run()
    laid_out.clear()
    with monkeypatched(control_flow, "_transposed", spy):
        got = run()
    assert passed == [True] and ((256, 1024), True) in laid_out
    with monkeypatched(control_flow, "_transposed",
                       lambda c, rows, views: np.ascontiguousarray(c.T)):
        want = run()
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)


@contextlib.contextmanager
def monkeypatched(obj, name, value):
    saved = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, saved)


@pytest.mark.parametrize("mode,hidden", [("LSTM", 256), ("GRU", 256), ("RNN_TANH", 512)])
@pytest.mark.parametrize("batch,steps", [(3, 9), (20, 12)])
def test_recurrent_layers_train_on_held_weights(gemm_calls, laid_out, mode, hidden, batch,
                                                steps):
    """LSTM, GRU and tanh RNN layers (hidden weights of 2^17 elements or more) with the
    hidden weight held over each loop, forward and backward: three SGD steps give the
    losses and parameters of the float64 model within float32 rounding."""
    ft.manual_seed(1)
    layer = {"LSTM": ft.nn.LSTM, "GRU": ft.nn.GRU, "RNN_TANH": ft.nn.RNN}[mode](8, hidden)
    layer64 = type(layer)(8, hidden).double()
    layer64.load_state_dict({k: v.double() for k, v in layer.state_dict().items()})
    x = ft.randn(steps, batch, 8)
    for net, xin in ((layer, x), (layer64, x.double())):
        opt = ft.optim.SGD(net.parameters(), lr=0.1)
        net.losses = []
        for _ in range(3):
            opt.zero_grad()
            loss = net(xin)[0].square().mean()
            loss.backward()
            opt.step()
            net.losses.append(float(loss))
    np.testing.assert_allclose(layer.losses, layer64.losses, rtol=1e-5)
    for p, p64 in zip(layer.parameters(), layer64.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), p64.detach().numpy(), rtol=1e-4,
                                   atol=1e-5)
    assert any(laid for _, laid in laid_out)
    assert not linalg.NATIVE_GEMM.held
