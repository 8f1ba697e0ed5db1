"""The native few-row float32 matrix product (primitives.linalg.NATIVE_GEMM, run by
backends/native/conv.py's direct kernel as a 1x1 convolution) that lowered programs call for
products of 2 to SMALL_ROWS rows by a weight of MIN_WEIGHT elements or more (a recurrent
layer's step): values against float64 within the rounding bound of a float32 sum, the
lowered programs (a jitted product, an LSTM's scan steps) taking it, and NumPy's matmul wherever
it does not apply (a column count not a multiple of 16, a non-contiguous operand, one row,
more than SMALL_ROWS rows, a smaller weight, cpu_backend="numpy")."""
from __future__ import annotations

import numpy as np
import pytest

import functrans as ft
from functrans.backends.native import conv as native_conv, toolchain
from functrans.primitives import linalg

RNG = np.random.default_rng(30)
EPS32 = float(np.finfo(np.float32).eps)


@pytest.fixture
def gemm_calls():
    """The kernel built (skipped without a compiler), and a record of the products that
    lowered programs sent to it: (x shape, y shape, True when the kernel wrote it)."""
    try:
        toolchain.find_compiler()
    except toolchain.ToolchainError as e:
        pytest.skip(str(e))
    if native_conv.gemm(2, 2, 16) is None:
        pytest.skip("the native kernels did not build")
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
