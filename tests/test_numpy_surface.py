"""NumPy surface from issue 18: einsum diagonals and sublists, r_/c_, gradient, partition,
real_if_close, array_split/split with index lists, pad width forms -- values against
NumPy, gradients against float64 central differences, under jit and vmap."""
import numpy as np
import pytest

import functrans as ft
import functrans.numpy as fnp
from conftest import assert_close, fd_grad

RNG = np.random.default_rng(18)


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
