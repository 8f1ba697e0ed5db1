"""ft.Array: the type of eager functrans.numpy / lax / random / jit results (issue 33).

A thin wrapper, as jax.Array: weak types carried (eager promotion equals traced promotion),
`.at[...]`, `block_until_ready`, devices, deletion after donation, NumPy interop through
`__array__`, JAX's repr, pickling, and unhashable. Comparisons with JAX itself are cases of
tests/oracle/test_oracle_lax.py (`lax:array:*`).
"""
from __future__ import annotations

import copy
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

import functrans as ft
import functrans.numpy as fnp
from functrans.numpy import raw as fnp_raw

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_eager_results_are_arrays():
    x = fnp.ones(3)
    assert type(x) is ft.Array and type(x * 2) is ft.Array and type(fnp.sin(x)) is ft.Array
    assert type(fnp.sin(np.ones(2, np.float32))) is ft.Array      # NumPy input, Array out
    assert type(ft.lax.add(x, x)) is ft.Array
    assert type(ft.random.normal(ft.random.PRNGKey(0), (2,))) is ft.Array
    assert type(ft.jit(lambda v: v * 2)(x)) is ft.Array
    a, b = fnp.split(fnp.arange(4.0), 2)                          # tuples of results
    assert type(a) is ft.Array and type(b) is ft.Array
    assert type(fnp.linalg.norm(x)) is ft.Array
    assert type(x.sum()) is ft.Array and type(x[0]) is ft.Array and type(x.T) is ft.Array
    assert type(fnp.shape(x)) is tuple and fnp.ndim(x) == 1       # not arrays: unchanged
    assert isinstance(x, ft.Array) and isinstance(x, fnp.ndarray)
    assert not isinstance(x, np.ndarray)                          # not a subclass (speed)
    assert isinstance(np.ones(2), ft.Array)     # unlike JAX: grad's results are NumPy arrays
    x2 = fnp.ones(2)
    x2.delete()
    with pytest.raises(RuntimeError, match="Array has been deleted"):
        repr(x2)
    assert fnp.ones(2).unsafe_buffer_pointer() != 0


def test_the_library_itself_passes_raw_arrays():
    x = np.ones(3, np.float32)
    assert type(fnp_raw.sin(x)) is np.ndarray
    t = ft.tensor(fnp.ones(3))                                    # Tensors hold raw arrays
    assert type(t._data) is np.ndarray
    assert type(ft.nn.functional.relu(ft.ones(3))._data) is np.ndarray
    with pytest.raises(TypeError, match="cannot be instantiated"):
        ft.Array()


def test_what_an_ndarray_user_reads():
    x = fnp.arange(6.0).reshape(2, 3)
    assert x.shape == (2, 3) and x.dtype == np.float32 and x.ndim == 2 and x.size == 6
    assert len(x) == 2 and x.nbytes == 24 and x.itemsize == 4
    assert [r.tolist() for r in x] == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert x.mT.shape == (3, 2) and x.T.shape == (3, 2)
    assert x.item(4) == 4.0 and x.tolist()[1][2] == 5.0
    assert float(x[0, 1]) == 1.0 and int(x[1, 2]) == 5 and bool(x[0, 1])
    assert [10, 11, 12][fnp.asarray(2)] == 12 and f"{x[0, 1]:.2f}" == "1.00"
    assert x.astype(np.int32).dtype == np.int32 and x.reshape(3, 2).shape == (3, 2)
    assert x.reshape((6,)).shape == (6,) and x.reshape(-1).shape == (6,)
    assert x.view(np.int32)[0, 1] == np.float32(1).view(np.int32) and x.view() is x
    np.testing.assert_array_equal(x.sum(axis=0), [3, 5, 7])
    assert float(x.mean()) == 2.5 and int(x.argmax()) == 5 and float(x.max()) == 5.0
    np.testing.assert_array_equal(x[:, fnp.asarray([0, 2])], [[0, 2], [3, 5]])
    np.testing.assert_array_equal((x > 2)[1], [True, True, True])
    np.testing.assert_array_equal(x @ x.T, [[5, 14], [14, 50]])
    np.testing.assert_array_equal(2 ** x[0], [1, 2, 4])
    np.testing.assert_array_equal(-abs(x)[0], [0, -1, -2])
    with pytest.raises(TypeError, match=r"x\.at\[idx\]\.set\(y\)"):
        x[0] = 1.0
    with pytest.raises(TypeError, match="unhashable type: 'Array'"):
        hash(x)
    with pytest.raises(TypeError, match="only integer scalar arrays"):
        [1, 2][fnp.asarray(1.0)]


def test_numpy_functions_on_arrays_return_numpy_results():
    x = fnp.asarray([1.0, 2.0])
    assert type(np.sin(x)) is np.ndarray and type(np.asarray(x)) is np.ndarray
    assert type(np.concatenate([x, x])) is np.ndarray
    np.testing.assert_allclose(x, [1.0, 2.0])
    assert np.asarray(x, np.float64).dtype == np.float64
    assert type(np.ones(2) + x) is ft.Array           # the Array's operator, as jax.Array


def test_repr_is_jaxs():
    assert repr(fnp.asarray([1.0, 2.0])) == "Array([1., 2.], dtype=float32)"
    assert repr(fnp.arange(3)) == "Array([0, 1, 2], dtype=int32)"
    assert repr(fnp.asarray(True)) == "Array(True, dtype=bool)"
    assert repr(fnp.zeros((2, 0))) == "Array([], shape=(2, 0), dtype=float32)"
    assert repr(fnp.ones((2, 2))) == "Array([[1., 1.],\n       [1., 1.]], dtype=float32)"
    assert repr(fnp.multiply(fnp.arange(2), 2.5)) == \
        "Array([0. , 2.5], dtype=float32, weak_type=True)"
    assert str(fnp.asarray([1.0, 2.0])) == "[1. 2.]"


def test_pickle_and_copy_keep_value_and_weak_type():
    w = fnp.multiply(fnp.arange(3), 2.5)
    for y in (pickle.loads(pickle.dumps(w)), copy.deepcopy(w), copy.copy(w)):
        assert type(y) is ft.Array and y.weak_type and y.dtype == np.float32
        np.testing.assert_array_equal(y, [0, 2.5, 5])


# JAX's results (jax 0.10.2, x64 off): (function, dtype, weak_type)
I32 = np.arange(3, dtype=np.int32)
F16 = np.ones(3, np.float16)
PROMOTION = [
    (lambda: fnp.multiply(I32, 2.5), np.float32, True),
    (lambda: fnp.multiply(I32, 2.5) + F16, np.float16, False),
    (lambda: fnp.multiply(I32, 2) + 1.5, np.float32, True),
    (lambda: fnp.add(2.0, 3), np.float32, True),
    (lambda: fnp.sqrt(2), np.float32, True),
    (lambda: fnp.add(np.array([True]), 1), np.int32, True),
    (lambda: fnp.add(F16, 1.0), np.float16, False),
    (lambda: fnp.divide(I32, 2), np.float32, False),
    (lambda: ft.lax.mul(2.0, 3.0), np.float32, True),
    (lambda: fnp.add(F16, ft.lax.mul(2.0, 3.0)), np.float16, False),
    (lambda: fnp.sin(fnp.multiply(I32, 2.5)), np.float32, True),
    (lambda: fnp.sin(I32), np.float32, False),
]


@pytest.mark.parametrize("i", range(len(PROMOTION)))
def test_weak_types_promote_eagerly_as_traced(i):
    f, dtype, weak = PROMOTION[i]
    out = f()
    assert (out.dtype, out.weak_type) == (np.dtype(dtype), weak)
    traced = ft.make_jaxpr(f)().out_avals[0]
    assert (traced.dtype, traced.weak_type) == (np.dtype(dtype), weak)
    jitted = ft.jit(f)()
    assert (jitted.dtype, jitted.weak_type) == (np.dtype(dtype), weak)


def test_weak_arrays_enter_jit_grad_and_vmap_weak():
    w = fnp.multiply(I32, 2.5)
    assert ft.jit(lambda a, h: a + h)(w, F16).dtype == np.float16
    assert ft.vmap(lambda a, h: a + h, in_axes=(None, 0))(w, F16).dtype == np.float16
    unmapped = fnp.asarray(3.0)
    assert ft.vmap(lambda a, b: (a, b), in_axes=(0, None), out_axes=(0, None))(
        fnp.ones(2), unmapped)[1] is unmapped            # forwarded as is
    assert ft.jit(lambda a: a)(w).weak_type
    np.testing.assert_allclose(ft.grad(lambda a: (a * a).sum())(w), 2 * np.asarray(w))


def test_at_updates():
    x = fnp.zeros(5)
    np.testing.assert_array_equal(x.at[2].set(7.0), [0, 0, 7, 0, 0])
    np.testing.assert_array_equal(x.at[1:3].add(1.0), [0, 1, 1, 0, 0])
    np.testing.assert_array_equal(x.at[fnp.asarray([0, 0])].add(1.0), [2, 0, 0, 0, 0])
    np.testing.assert_array_equal(x.at[-1].set(3.0, indices_are_sorted=True,
                                               unique_indices=True), [0, 0, 0, 0, 3])
    y = fnp.arange(4.0)
    np.testing.assert_array_equal(y.at[1].multiply(3.0), [0, 3, 2, 3])
    np.testing.assert_array_equal(y.at[1].mul(3.0), [0, 3, 2, 3])
    np.testing.assert_array_equal(y.at[1:].get(), [1, 2, 3])
    assert type(y.at[1].set(0.0)) is ft.Array and np.all(x == 0)     # functional
    np.testing.assert_array_equal(ft.jit(lambda v: v.at[0].set(9.0))(y), [9, 1, 2, 3])
    with pytest.raises(NotImplementedError, match="mode='clip'"):
        y.at[7].set(1.0, mode="clip")
    rep = np.array([1, 1, 3])                 # repeated indices combine once per repetition
    np.testing.assert_array_equal(y.at[rep].multiply(3.0), [0, 9, 2, 9])
    np.testing.assert_array_equal(y.at[rep].min(fnp.asarray([0.5, -2.0, 9.0])), [0, -2, 2, 3])
    np.testing.assert_array_equal(y.at[rep].max(fnp.asarray([0.5, 7.0, 9.0])), [0, 7, 2, 9])
    np.testing.assert_array_equal(ft.jit(lambda v, i: v.at[i].multiply(3.0))(y, rep),
                                  [0, 9, 2, 9])                    # traced indices
    assert float(ft.grad(lambda v: y.at[rep].multiply(v).sum())(2.0)) == 2 * 1 * 2.0 + 3
    with pytest.raises(NotImplementedError, match="unique_indices=True"):
        ft.jit(lambda v, i: v.at[i].max(1.0))(fnp.zeros(100), np.zeros(65, np.int32))


def test_runtime_methods():
    x = fnp.ones(3)
    assert x.block_until_ready() is x and ft.block_until_ready({"a": x})["a"] is x
    assert x.devices() == {ft.devices()[0]} and str(x.device) == "cpu:0"
    assert x.copy_to_host_async() is None and not x.is_deleted()
    assert type(ft.device_put(np.ones(2))) is ft.Array


DELETED = r"^Array has been deleted with shape=float32\[3\]\.$"


def test_donated_arrays_are_deleted():
    x = fnp.ones(3)
    f = ft.jit(lambda v: v * 2, donate_argnums=0)
    y = f(x)
    np.testing.assert_array_equal(y, [2, 2, 2])
    assert x.is_deleted() and x.shape == (3,) and x.dtype == np.float32
    for read in (lambda: x + 1, lambda: np.asarray(x), lambda: fnp.sin(x), lambda: x[0],
                 lambda: f(x), lambda: ft.grad(lambda v: v.sum())(x), lambda: str(x),
                 lambda: x.block_until_ready(), lambda: pickle.dumps(x)):
        with pytest.raises(RuntimeError, match=DELETED):
            read()
    z = fnp.ones(3)
    f(z)                                  # the cached (fast) path deletes too
    assert z.is_deleted()
    g = ft.jit(lambda a, b: a + b, donate_argnames="b")
    a, b = fnp.ones(3), fnp.ones(3)
    g(a, b)
    assert b.is_deleted() and not a.is_deleted()
    a, b = fnp.ones(3), fnp.ones(3)
    g(a, b=b)                              # passed by keyword: deleted too, as in JAX
    assert b.is_deleted() and not a.is_deleted()
    n = np.ones(3, np.float32)            # a NumPy argument is not an Array: nothing to delete
    f(n)
    x2 = fnp.ones(3)
    x2.delete()
    with pytest.raises(RuntimeError, match=DELETED):
        x2 * 2


def test_arrays_enter_every_transformation_and_control_flow():
    x = fnp.arange(3.0)
    np.testing.assert_allclose(ft.grad(lambda v: (v * v).sum())(x), [0, 2, 4])
    np.testing.assert_allclose(ft.vmap(lambda v: v * 2)(x), [0, 2, 4])
    out, tan = ft.jvp(lambda v: v * v, (x,), (fnp.ones(3),))
    np.testing.assert_allclose(tan, [0, 2, 4])
    assert type(ft.lax.fori_loop(0, 3, lambda i, c: c + 1.0, x)) is ft.Array
    c, ys = ft.lax.scan(lambda c, v: (c + v, c), fnp.zeros(()), x)
    assert type(c) is ft.Array and float(c) == 3.0
    assert type(ft.lax.cond(True, lambda v: v + 1, lambda v: v - 1, x)) is ft.Array
    assert ft.tree_util.tree_leaves({"a": x})[0] is x
    k = fnp.asarray(2.0)
    np.testing.assert_allclose(ft.jit(lambda v: v * k)(x), [0, 2, 4])   # a captured Array


def test_operators_without_importing_functrans_numpy():
    """An Array from ft.lax works with Python's operators when the program imported only
    functrans (as `import jax` alone does): lax installs them (a KeyError 'add' before)."""
    code = ("import numpy as np, functrans as ft\n"
            "y = ft.lax.associative_scan(lambda a, b: a + b, np.arange(5))\n"
            "print((y - 1).tolist(), y.dtype)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, env={**os.environ, "PYTHONPATH": ROOT})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[0] == "[-1, 0, 2, 5, 9] int32"   # x32: int64 in, int32 out


def test_array_api_namespace_and_dlpack():
    """An Array names functrans.numpy as its array API namespace and exports through DLPack
    without a copy; a deleted one refuses."""
    a = fnp.arange(4.0)
    assert a.__array_namespace__() is fnp
    b = np.from_dlpack(a)
    np.testing.assert_array_equal(b, [0.0, 1.0, 2.0, 3.0])
    assert np.shares_memory(b, np.asarray(a))
    a.delete()
    with pytest.raises(RuntimeError, match="Array has been deleted"):
        np.from_dlpack(a)
