"""Max pooling's native window kernels (backends/native/conv.cpp, primitives/pool.py): the
same bits as the NumPy implementation (first maximum, first NaN, ties to the first offset,
overlapping and dilated windows, offsets outside the window), the same bits for any thread
count, and the facade's max_pool2d running them. The primitives' values, derivatives,
transposes and batching against loops are checked by tests/test_registry.py."""
from __future__ import annotations

import numpy as np
import pytest

import functrans as ft
from functrans.backends.native import conv as native_conv, toolchain
from functrans.primitives import pool

RNG = np.random.default_rng(31)

# (operand shape, window, strides, dilation)
GEOMETRIES = [
    ((2, 3, 8, 10), (2, 2), (2, 2), (1, 1)),       # non-overlapping, as a CNN's 2x2 pool
    ((5, 7, 9), (3, 3), (1, 2), (1, 1)),            # overlapping rows
    ((1, 11, 12), (3, 2), (2, 3), (2, 1)),          # dilated
    ((3, 4), (1, 1), (1, 1), (1, 1)),               # 1x1, no leading axes
]


@pytest.fixture
def native_pool():
    """The kernels built (skipped without a compiler), and a record of the calls they ran."""
    try:
        toolchain.find_compiler()
    except toolchain.ToolchainError as e:
        pytest.skip(str(e))
    if native_conv.entries() is None:
        pytest.skip("the native kernels did not build")
    calls = []
    run = pool.NATIVE_POOL.run

    def spy(name, *args, **kw):
        out = run(name, *args, **kw)
        if out is not None:
            calls.append(name)
        return out
    pool.NATIVE_POOL.run = spy
    yield calls
    pool.NATIVE_POOL.run = run


def _operand(shape):
    """float32 values with ties (few distinct values), NaNs and -inf (a padded border)."""
    x = RNG.integers(-3, 4, shape).astype(np.float32)
    x[RNG.random(shape) < 0.05] = np.nan
    x[..., 0, :] = -np.inf
    return x


def _numpy(fn, *args, **kw):
    saved = pool.NATIVE_POOL.run
    pool.NATIVE_POOL.run = None
    try:
        return fn(np, *args, **kw)
    finally:
        pool.NATIVE_POOL.run = saved


@pytest.mark.parametrize("geometry", range(len(GEOMETRIES)))
def test_kernels_give_the_numpy_implementations_bits(native_pool, geometry):
    shape, window, strides, dilation = GEOMETRIES[geometry]
    geo = dict(window=window, strides=strides, dilation=dilation)
    x = _operand(shape)
    idx = pool._argmax_impl(np, x, **geo)
    assert idx.dtype == np.int32
    np.testing.assert_array_equal(idx, _numpy(pool._argmax_impl, x, **geo))
    out = pool._gather_impl(np, x, idx, **geo)
    np.testing.assert_array_equal(out, _numpy(pool._gather_impl, x, idx, **geo))
    # a window holding a NaN has it as maximum, the first one
    k = window[0] * window[1]
    bad = idx.copy()
    bad.flat[::3] = np.int32(k)          # outside the window: offset 0, both ways
    g = RNG.standard_normal(idx.shape).astype(np.float32)
    for offsets in (idx, bad):
        np.testing.assert_array_equal(pool._gather_impl(np, x, offsets, **geo),
                                      _numpy(pool._gather_impl, x, offsets, **geo))
        got = pool._scatter_impl(np, g, offsets, in_shape=shape[-2:], **geo)
        want = _numpy(pool._scatter_impl, g, offsets, in_shape=shape[-2:], **geo)
        if strides[0] >= window[0] * dilation[0] and strides[1] >= window[1] * dilation[1]:
            np.testing.assert_array_equal(got, want)
        else:           # overlapping windows: the same sums, added in another order
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    assert native_pool.count("argmax") == 1 and native_pool.count("scatter") == 2


def test_first_nan_and_first_tie_win():
    x = np.array([[[1, 5, 5, 2], [np.nan, 0, 7, np.nan]]], np.float32)     # (1, 2, 4)
    geo = dict(window=(1, 4), strides=(1, 1), dilation=(1, 1))
    for impl in (pool._argmax_impl, lambda xp, x, **kw: _numpy(pool._argmax_impl, x, **kw)):
        np.testing.assert_array_equal(impl(np, x, **geo), [[[1], [0]]])


def test_kernels_do_not_depend_on_threads(native_pool):
    x = _operand((4, 6, 20, 18))
    geo = dict(window=(3, 3), strides=(2, 2), dilation=(1, 1), in_shape=(20, 18))
    outs = []
    for t in (1, 2, 3):
        idx = native_conv.pool("argmax", x, threads=t, **geo)
        g = np.linspace(-1, 1, idx.size, dtype=np.float32).reshape(idx.shape)
        outs.append((idx, native_conv.pool("gather", x, idx, threads=t, **geo),
                     native_conv.pool("scatter", g, idx, threads=t, **geo)))
    for got in outs[1:]:
        for a, b in zip(got, outs[0]):
            np.testing.assert_array_equal(a, b)


def test_facade_max_pool_runs_the_kernels_both_ways(native_pool):
    x = ft.tensor(_operand((2, 3, 6, 6)), requires_grad=True)
    y = ft.nn.functional.max_pool2d(x, 2)
    y.sum().backward()                  # (a NaN loss: the gradient is still one per window)
    assert {"argmax", "gather", "scatter"} <= set(native_pool)
    g = x.grad.numpy()
    assert g.shape == (2, 3, 6, 6) and set(np.unique(g)) <= {0.0, 1.0}
    assert g.reshape(2, 3, 3, 2, 3, 2).sum(axis=(3, 5)).min() == 1.0   # one per window
