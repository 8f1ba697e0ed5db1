"""NumPy's own functions and ufuncs on traced values dispatch to functrans.numpy (issue 18,
deliverable 3): traced and differentiated, never a constant through __array__."""
from __future__ import annotations

import numpy as np
import pytest

import functrans as ft
from conftest import fd_grad

X = np.array([0.5, -1.0, 2.0])
W = np.array([1.0, 2.0, 3.0])

CASES = {
    "np.sum": lambda x: np.sum(x * W),
    "np.max": lambda x: np.max(x),
    "np.min": lambda x: np.min(x),
    "np.mean": lambda x: np.mean(x ** 2),
    "np.prod": lambda x: np.prod(x),
    "np.exp": lambda x: np.sum(np.exp(x) * W),
    "np.sin": lambda x: np.sum(np.sin(x)),
    "np.tanh": lambda x: np.sum(np.tanh(x)),
    "np.abs": lambda x: np.sum(np.abs(x)),
    "np.maximum": lambda x: np.sum(np.maximum(x, 0.3)),
    "np.dot": lambda x: np.dot(x, x),
    "np.matmul": lambda x: W @ x,
    "np.where": lambda x: np.sum(np.where(x > 0, x, 0.1 * x)),
    "np.cumsum": lambda x: np.sum(np.cumsum(x) * W),
    "np.add.reduce": lambda x: np.add.reduce(x * W),
    "np.multiply.accumulate": lambda x: np.sum(np.multiply.accumulate(x)),
    "np.linalg.norm": lambda x: np.linalg.norm(x),
    "np.logaddexp": lambda x: np.sum(np.logaddexp(x, 0.3)),
    "np.reshape": lambda x: np.sum(np.reshape(x, (3, 1)) * W),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_numpy_functions_on_traced_values_are_differentiated(name):
    f = CASES[name]
    np.testing.assert_allclose(ft.grad(f)(X), fd_grad(f, X), rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(ft.jit(f)(X), f(X), rtol=1e-12)


def test_vmap_and_jvp_of_numpy_functions():
    batch = np.stack([X, 2 * X])
    np.testing.assert_allclose(ft.vmap(lambda x: np.sum(np.exp(x)))(batch),
                               np.exp(batch).sum(1), rtol=1e-12)
    _, t = ft.jvp(lambda x: np.sin(x), (X,), (np.ones(3),))
    np.testing.assert_allclose(t, np.cos(X), rtol=1e-12)


def test_dtype_queries_and_shapes_read_the_traced_aval():
    def f(x):
        assert np.result_type(x, 1.0) == np.float64
        assert not np.iscomplexobj(x)
        assert np.shape(x) == (3,) and np.ndim(x) == 1
        return x
    ft.jit(f)(X)


def test_what_functrans_numpy_lacks_raises_instead_of_a_constant():
    with pytest.raises(TypeError, match="numpy.unwrap was called on a traced value"):
        ft.grad(lambda x: np.sum(np.unwrap(x)))(X)
    with pytest.raises(TypeError, match="numpy.spacing was called on a traced value"):
        ft.grad(lambda x: np.sum(np.spacing(x)))(X)
    with pytest.raises(TypeError, match="numpy.linalg.matrix_rank was called on a traced"):
        ft.jit(lambda x: np.linalg.matrix_rank(x))(np.outer(X, X))   # (a submodule's)
    np.testing.assert_allclose(ft.jit(lambda x: np.linalg.matrix_power(x, 2))(  # it has that
        np.outer(X, X)), np.linalg.matrix_power(np.outer(X, X), 2), rtol=1e-12)
    np.testing.assert_allclose(ft.jit(lambda x: np.fft.hfft(x))(X), np.fft.hfft(X))  # it has hfft
    with pytest.raises(TypeError, match="out="):
        ft.grad(lambda x: np.sum(x, out=np.zeros(())))(X)
    with pytest.raises(TypeError, match=r"numpy.exp\(..., out=...\)"):
        ft.jit(lambda x: np.exp(x, out=np.zeros(3)))(X)
