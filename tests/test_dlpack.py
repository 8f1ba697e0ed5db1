"""DLPack: `Tensor.__dlpack__` / `__dlpack_device__`, `ft.from_dlpack`, `fnp.from_dlpack`.
Zero copy is checked with np.shares_memory after each round trip (and, on a GPU, CuPy's
pointers), and by a write through one side being seen by the other."""
import types

import numpy as np
import pytest

import functrans as ft
import functrans.numpy as fnp
from functrans.core.devices import cuda_available


def Producer(a):
    """Any producer with only the protocol (no __array__, no __array_function__)."""
    return types.SimpleNamespace(__dlpack__=a.__dlpack__, __dlpack_device__=a.__dlpack_device__)


def test_numpy_round_trips_share_memory():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = ft.from_dlpack(a)
    assert isinstance(t, ft.Tensor) and t.shape == (3, 4) and t.dtype == ft.float32
    assert np.shares_memory(t.numpy(), a)
    b = np.from_dlpack(t)                      # Tensor -> NumPy
    assert type(b) is np.ndarray and np.shares_memory(b, a)
    t2 = ft.from_dlpack(t)                     # Tensor -> Tensor
    assert np.shares_memory(t2.numpy(), a)
    t.add_(1)                                  # a write through the Tensor is seen by NumPy
    np.testing.assert_array_equal(a, np.arange(1, 13, dtype=np.float32).reshape(3, 4))
    a[0, 0] = -5                               # and the other way round
    assert t2[0, 0].item() == -5
    assert t.__dlpack_device__() == (1, 0)


def test_any_producer_views_and_dtypes():
    base = np.arange(20, dtype=np.float64).reshape(4, 5)
    view = base[1:, ::2]                       # a strided view: still no copy
    t = ft.from_dlpack(Producer(view))
    assert np.shares_memory(t.numpy(), base)
    np.testing.assert_array_equal(t.numpy(), view)
    for dt in (np.int64, np.int32, np.bool_, np.float16):
        x = np.ones(3, dt)
        assert ft.from_dlpack(x).dtype == getattr(ft, np.dtype(dt).name if dt is not np.bool_
                                                  else "bool")
        assert np.shares_memory(np.from_dlpack(ft.from_dlpack(x)), x)


def test_functrans_numpy_from_dlpack():
    a = np.linspace(0, 1, 5, dtype=np.float32)
    got = fnp.from_dlpack(ft.tensor(a))
    assert type(got) is ft.Array                     # (jax.numpy.from_dlpack: a jax.Array)
    np.testing.assert_array_equal(got, a)
    b = fnp.from_dlpack(a)
    assert np.shares_memory(b, a) and not np.shares_memory(fnp.from_dlpack(a, copy=True), a)
    assert np.shares_memory(fnp.from_dlpack(Producer(a)), a)
    # arrays from DLPack feed the transformations as any array
    np.testing.assert_allclose(ft.grad(lambda x: fnp.sum(x * x))(b), 2 * a)


def test_export_refuses_as_torch_does():
    t = ft.ones(3, requires_grad=True)
    with pytest.raises(BufferError, match=r"Can't export tensors that require gradient, "
                                          r"use tensor\.detach\(\)"):
        np.from_dlpack(t)
    d = np.from_dlpack(t.detach())             # detach shares the memory
    assert np.shares_memory(d, t.detach().numpy())
    with pytest.raises(BufferError, match="traced value"):
        ft.grad(lambda x: np.from_dlpack(x).sum())(ft.ones(2))
    with pytest.raises(TypeError, match="does not implement the DLPack protocol"):
        ft.from_dlpack([1.0, 2.0])


@pytest.mark.gpu
@pytest.mark.skipif(not cuda_available(), reason="needs CuPy and a CUDA device "
                                                  "(pip install 'functrans[cuda]')")
def test_cupy_round_trips_share_memory():
    import cupy as cp
    a = cp.arange(6, dtype=cp.float32).reshape(2, 3)
    t = ft.from_dlpack(a)
    assert t.device.type == "cuda" and t.__dlpack_device__()[0] == 2
    b = cp.from_dlpack(t)
    assert b.data.ptr == a.data.ptr
    assert ft.from_dlpack(t)._data.data.ptr == a.data.ptr
    t.mul_(2)
    cp.testing.assert_array_equal(a, cp.arange(6, dtype=cp.float32).reshape(2, 3) * 2)
    assert fnp.from_dlpack(Producer(a)).data.ptr == a.data.ptr
