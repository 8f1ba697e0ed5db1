"""Tensor.sort / ft.sort / argsort / topk, and fnp.sort / fnp.argsort, against a stable
reference over every dtype.

Descending order must not negate (uint8 wraps, int64's minimum stays minimal, bool has no
negation): torch sorts descending with NaN largest and, with stable=True, equal elements in
their original order. The reference is Python's stable `sorted` on exact Python numbers.
"""
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import functrans as ft
import functrans.numpy as fnp

pytestmark = pytest.mark.usefixtures("x64")  # float64 references: conftest.x64

DTYPES = ["bool", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64",
          "float16", "float32", "float64"]


def _values(dtype):
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return st.booleans()
    if dt.kind in "iu":
        info = np.iinfo(dt)
        edges = [info.min, info.max, 0, 1, info.min + 1, info.max - 1]
        return st.one_of(st.sampled_from(edges), st.integers(-3, 3).filter(
            lambda v: info.min <= v <= info.max), st.integers(int(info.min), int(info.max)))
    return st.one_of(st.sampled_from([math.nan, math.inf, -math.inf, 0.0, -0.0, 1.0, -1.0]),
                     st.floats(-100, 100, width=8 * dt.itemsize))


@st.composite
def _arrays(draw):
    dtype = draw(st.sampled_from(DTYPES))
    shape = draw(st.sampled_from([(7,), (3, 5), (2, 1, 6), (4, 0), (1,)]))
    flat = draw(st.lists(_values(dtype), min_size=math.prod(shape), max_size=math.prod(shape)))
    return np.array(flat, dtype=dtype).reshape(shape)


def _key(v):
    """Total order of torch's sort: NaN above everything, then by value."""
    v = v.item()
    return (1, 0) if isinstance(v, float) and math.isnan(v) else (0, v)


def _reference(a, dim, descending):
    """Stable indices along dim: equal keys keep their original order, either direction."""
    moved = np.moveaxis(a, dim, -1)
    out = np.empty(moved.shape, np.int64)
    for i in np.ndindex(moved.shape[:-1]):
        row = moved[i]
        keys = [_key(v) for v in row]
        if descending:
            order = sorted(range(len(row)), key=lambda j: keys[j], reverse=True)
            # reverse=True keeps the original order of equal keys (Python's sort is stable)
        else:
            order = sorted(range(len(row)), key=lambda j: keys[j])
        out[i] = order
    return np.moveaxis(out, -1, dim)


def _check(values, indices, a, idx, dim):
    np.testing.assert_array_equal(indices.numpy(), idx)
    want = np.take_along_axis(a, idx, dim)
    assert values.dtype == ft.tensor(a).dtype
    np.testing.assert_array_equal(values.numpy(), want)


@given(_arrays(), st.booleans(), st.data())
def test_sort_argsort_topk_match_a_stable_reference(a, descending, data):
    dim = data.draw(st.integers(-a.ndim, a.ndim - 1))
    x = ft.tensor(a)
    idx = _reference(a, dim, descending)
    _check(*x.sort(dim=dim, descending=descending, stable=True), a, idx, dim)
    _check(*ft.sort(x, dim, descending, stable=True), a, idx, dim)
    np.testing.assert_array_equal(x.argsort(dim, descending, stable=True).numpy(), idx)
    np.testing.assert_array_equal(ft.argsort(x, dim=dim, descending=descending).numpy(), idx)
    np.testing.assert_array_equal(np.asarray(fnp.argsort(a, axis=dim, descending=descending)),
                                  idx)
    np.testing.assert_array_equal(np.asarray(fnp.sort(a, axis=dim, descending=descending)),
                                  np.take_along_axis(a, idx, dim))
    n = a.shape[dim]
    k = data.draw(st.integers(0, n))
    top = np.take(idx, np.arange(k), axis=dim)
    _check(*x.topk(k, dim=dim, largest=descending), a, top, dim)
    _check(*ft.topk(x, k, dim, descending), a, top, dim)


def test_the_issues_examples():
    v, i = ft.tensor(np.array([0, 1, 2, 200], np.uint8)).sort(descending=True)
    assert v.tolist() == [200, 2, 1, 0] and i.tolist() == [3, 2, 1, 0]
    lo = np.iinfo(np.int64).min
    assert ft.tensor(np.array([5, lo, 7])).sort(descending=True).values.tolist() == [7, 5, lo]
    v, i = ft.tensor([True, False, True]).sort(descending=True, stable=True)
    assert v.tolist() == [True, True, False] and i.tolist() == [0, 2, 1]
    v, i = ft.tensor(np.array([3, 200, 200, 1], np.uint8)).topk(2)
    assert v.tolist() == [200, 200] and i.tolist() == [1, 2]
    v, i = ft.tensor([1.0, math.nan, 3.0]).sort(descending=True)
    assert math.isnan(v.tolist()[0]) and i.tolist() == [1, 2, 0]


def test_zero_dim_and_out_of_range_k():
    v, i = ft.tensor(2.5).sort(descending=True)
    assert v.item() == 2.5 and i.item() == 0 and i.ndim == 0
    with pytest.raises(RuntimeError, match="selected index k out of range"):
        ft.tensor([1, 2]).topk(3)


def test_descending_sort_still_differentiates():
    x = ft.tensor([2.0, 3.0, 1.0], requires_grad=True)
    v, _ = x.sort(descending=True)
    (v * ft.tensor([1.0, 10.0, 100.0])).sum().backward()
    assert x.grad.tolist() == [10.0, 1.0, 100.0]
