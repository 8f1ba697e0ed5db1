"""Parity with PyTorch's test_autograd.py (issue 31): dtypes with torch's attributes, grad
modes on classes, inference-mode views, torch's errors and warnings, and the op names those
tests use. Values are compared with torch where the oracle extra is installed."""
import pickle
import warnings

import numpy as np
import pytest

import functrans as ft
from functrans.facade import grad_mode

try:
    import torch
except ImportError:        # the oracle extra is optional
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="compares with torch (oracle extra)")


@pytest.fixture(autouse=True)
def _modes_restored():
    before = grad_mode.STATE.enabled
    yield
    assert grad_mode.STATE.enabled == before


NAMES = ["float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool",
         "complex64", "complex128"]


def test_dtype_is_a_numpy_dtype_to_numpy():
    d = ft.float32
    assert d == np.float32 and np.float32 == d and d == np.dtype("float32") and d == "float32"
    assert d != ft.float64 and not (d != np.float32)
    assert hash(d) == hash(np.dtype(np.float32)) and {np.dtype(np.float32): 1}[d] == 1
    assert np.dtype(d) == np.float32 and np.zeros(2, d).dtype == np.float32
    assert np.issubdtype(d, np.floating) and d.kind == "f" and d.name == "float32"
    x = ft.ones(2)
    assert x.dtype is ft.float32 and x.dtype == np.float32 and str(x.dtype) == "float32"
    assert repr(ft.int64) == "ft.int64" and pickle.loads(pickle.dumps(ft.int64)) is ft.int64
    assert ft.zeros(2, dtype=ft.int32).dtype is ft.int32
    assert ft.tensor([1, 2]).to(ft.float64).dtype is ft.float64
    assert ft.get_default_dtype() is ft.float32
    assert ft.promote_types(ft.int32, ft.float32) is ft.float32
    assert ft.result_type(x, 1) is ft.float32


@needs_torch
@pytest.mark.parametrize("name", NAMES)
def test_dtype_attributes_as_torch(name):
    ours, theirs = getattr(ft, name), getattr(torch, name)
    for attr in ("is_floating_point", "is_complex", "is_signed", "itemsize"):
        assert getattr(ours, attr) == getattr(theirs, attr), attr
    assert ours.to_real().name == str(theirs.to_real())[6:]
    if ours.kind in "fc" and name != "float16":
        assert ours.to_complex().name == str(theirs.to_complex())[6:]


def test_no_grad_on_a_class_warns_and_wraps_the_constructor():
    with pytest.warns(FutureWarning, match="Decorating classes is deprecated"):
        @ft.no_grad()
        class Foo:
            def __init__(self):
                self.inside = ft.is_grad_enabled()

            def foo(self):
                return ft.is_grad_enabled()
    foo = Foo()
    assert foo.inside is False and foo.foo() is True
