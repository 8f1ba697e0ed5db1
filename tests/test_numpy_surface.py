"""NumPy surface from issue 18: einsum diagonals and sublists, r_/c_, gradient, partition,
real_if_close, array_split/split with index lists, pad width forms -- values against
NumPy, gradients against float64 central differences, under jit and vmap."""
import numpy as np
import pytest

import functrans as ft
import functrans.numpy as fnp
from conftest import assert_close, fd_grad

RNG = np.random.default_rng(18)
pytestmark = pytest.mark.filterwarnings("ignore::functrans.RetraceWarning")  # a jit per case


@pytest.mark.parametrize("spec,shapes", [
    ("ii->i", [(3, 3)]), ("ii", [(4, 4)]), ("ii->", [(3, 3)]), ("iji->j", [(3, 4, 3)]),
    ("iji", [(3, 2, 3)]), ("...ii->...i", [(2, 3, 3)]), ("ij,jj->i", [(2, 3), (3, 3)]),
    ("abba->a", [(2, 3, 3, 2)]), ("iij,jk->ik", [(2, 2, 3), (3, 4)])])
def test_einsum_repeated_index(spec, shapes):
    ops = [RNG.normal(size=s) for s in shapes]
    assert_close(fnp.einsum(spec, *ops), np.einsum(spec, *ops))
    assert_close(ft.jit(lambda *o: fnp.einsum(spec, *o))(*ops), np.einsum(spec, *ops))
    g = ft.grad(lambda x: fnp.sum(fnp.einsum(spec, x, *ops[1:]) ** 2))(ops[0])
    assert_close(g, fd_grad(lambda x: np.sum(np.einsum(spec, x, *ops[1:]) ** 2), ops[0]),
                 rtol=1e-5, atol=1e-5)


def test_einsum_trace_vmap():
    b = RNG.normal(size=(5, 3, 3))
    assert_close(ft.vmap(lambda x: fnp.einsum("ii", x))(b), np.einsum("bii->b", b))


@pytest.mark.parametrize("args", [
    lambda a, b: (a, [0, 1], b, [1, 2]), lambda a, b: (a, [0, 1], b, [1, 2], [2, 0]),
    lambda a, b: (a, [0, 0]), lambda a, b: (a, [0, 0], [0]),
    lambda a, b: (a, [Ellipsis, 1], b, [1, 2], [Ellipsis, 2])])
def test_einsum_sublist(args):
    a, b = RNG.normal(size=(3, 3)), RNG.normal(size=(3, 4))
    assert_close(fnp.einsum(*args(a, b)), np.einsum(*args(a, b)))
    g = ft.grad(lambda x: fnp.sum(fnp.einsum(*args(x, b)) ** 2))(a)
    assert_close(g, fd_grad(lambda x: np.sum(np.einsum(*args(x, b)) ** 2), a),
                 rtol=1e-5, atol=1e-5)


def test_einsum_sublist_bad_label():
    with pytest.raises(ValueError, match="sublist"):
        fnp.einsum(np.ones((2, 2)), [0, "a"])


@pytest.mark.parametrize("width", [1, (1,), (1, 2), ((1, 2),), ((1, 2), (0, 1)), [[1], [2]],
                                   np.int64(2), ((0, 0), (3, 1))])
def test_pad_width_forms(width):
    x = RNG.normal(size=(2, 3))
    assert_close(fnp.pad(x, width), np.pad(x, width))
    assert_close(ft.jit(lambda v: fnp.pad(v, width))(x), np.pad(x, width))
    w = RNG.normal(size=np.pad(x, width).shape)
    assert_close(ft.grad(lambda v: fnp.sum(fnp.pad(v, width) * w))(x),
                 fd_grad(lambda v: np.sum(np.pad(v, width) * w), x))


def test_pad_width_errors():
    with pytest.raises(ValueError, match="broadcast"):
        fnp.pad(np.ones((2, 3)), ((1, 2, 3),))
    with pytest.raises(ValueError, match="negative"):
        fnp.pad(np.ones(3), -1)


@pytest.mark.parametrize("fn", ["split", "array_split"])
@pytest.mark.parametrize("idx", [[2, 5], [0, 3, 3, 9], [2, 5, 20], [-3], [4, 2], (1,)])
def test_split_index_lists(fn, idx):
    x = RNG.normal(size=(10, 2))
    got, want = getattr(fnp, fn)(x, idx), getattr(np, fn)(x, idx)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert_close(g, w)
    jitted = ft.jit(lambda v: getattr(fnp, fn)(v, idx, axis=0))(x)
    for g, w in zip(jitted, want):
        assert_close(g, w)
    c = [RNG.normal(size=w.shape) for w in want]
    assert_close(ft.grad(lambda v: sum(fnp.sum(p * k) for p, k in zip(getattr(fnp, fn)(v, idx), c)))(x),
                 fd_grad(lambda v: sum(np.sum(p * k) for p, k in zip(getattr(np, fn)(v, idx), c)), x))


def test_array_split_sections_axis1():
    x = RNG.normal(size=(2, 7))
    for g, w in zip(fnp.array_split(x, 3, axis=1), np.array_split(x, 3, axis=1)):
        assert_close(g, w)
    for g, w in zip(fnp.array_split(x, [1, 4], axis=1), np.array_split(x, [1, 4], axis=1)):
        assert_close(g, w)
