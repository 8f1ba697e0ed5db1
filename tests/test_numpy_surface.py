"""NumPy surface from issue 18: einsum diagonals and sublists, r_/c_, gradient, partition,
real_if_close, array_split/split with index lists, pad width forms -- values against
NumPy, gradients against float64 central differences, under jit and vmap."""
import numpy as np
import pytest

import functrans as ft
import functrans.numpy as fnp
from conftest import assert_close, fd_grad

RNG = np.random.default_rng(18)
pytestmark = [pytest.mark.filterwarnings("ignore::functrans.RetraceWarning"),  # a jit per case
              pytest.mark.usefixtures("x64")]        # float64 references: conftest.x64


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


F = RNG.normal(size=(5, 4))
X = np.cumsum(RNG.uniform(0.5, 1.5, size=5))


@pytest.mark.parametrize("args,kw", [
    ((), {}), ((2.0,), {}), ((X, 1.5), {}), ((X,), {"axis": 0}), ((), {"edge_order": 2}),
    ((X, 0.7), {"edge_order": 2}), ((), {"axis": -1}), ((0.5,), {"axis": (1, 0)})])
def test_gradient_values_and_grads(args, kw):
    want = np.gradient(F, *args, **kw)
    got = fnp.gradient(F, *args, **kw)
    assert isinstance(got, list) == isinstance(want, (list, tuple))
    for g, w in zip(got if isinstance(got, list) else [got],
                    want if isinstance(want, (list, tuple)) else [want]):
        assert_close(g, w)
    jitted = ft.jit(lambda f: fnp.gradient(f, *args, **kw))(F)
    assert_close(np.stack(jitted) if isinstance(jitted, list) else jitted, np.stack(want)
                 if isinstance(want, (list, tuple)) else want)
    w = RNG.normal(size=np.shape(np.asarray(want)))

    def loss(xp, gradient):
        return lambda f: xp.sum(xp.stack(gradient(f, *args, **kw)) * w) if isinstance(
            want, (list, tuple)) else xp.sum(gradient(f, *args, **kw) * w)
    assert_close(ft.grad(loss(fnp, fnp.gradient))(F), fd_grad(loss(np, np.gradient), F))


@pytest.mark.usefixtures("x32")
def test_gradient_1d_vmap_and_spacing_gradient():
    f = RNG.normal(size=(3, 6))
    assert_close(ft.vmap(fnp.gradient)(f), np.gradient(f, axis=1))
    x = np.cumsum(RNG.uniform(0.5, 1.5, size=6))
    assert_close(ft.grad(lambda c: fnp.sum(fnp.gradient(f[0], c) ** 2))(x),
                 fd_grad(lambda c: np.sum(np.gradient(f[0], c) ** 2), x), rtol=1e-5, atol=1e-5)
    assert fnp.gradient(np.arange(5) ** 2).dtype == np.float32      # JAX's float default


def test_gradient_errors():
    with pytest.raises(ValueError, match="edge_order=2 needs at least 3"):
        fnp.gradient(np.ones(2), edge_order=2)
    with pytest.raises(TypeError, match="spacings"):
        fnp.gradient(np.ones((3, 3)), 1.0, 2.0, 3.0)
    with pytest.raises(ValueError, match="coordinates of length 2"):
        fnp.gradient(np.ones(3), np.arange(2.0))


@pytest.mark.parametrize("make", [
    lambda v: (slice(1, 4), v, 5, slice(0, 1, 3j)), lambda v: (v,), lambda v: (2.5, v, v),
    lambda v: (slice(None, 3), [1.0, 2.0], v), lambda v: (slice(6, 0, -2), v)])
def test_r_(make):
    v = RNG.normal(size=3)
    assert_close(fnp.r_[make(v)], np.r_[make(v)])
    assert_close(ft.jit(lambda u: fnp.r_[make(u)])(v), np.r_[make(v)])
    assert_close(ft.grad(lambda u: fnp.sum(fnp.r_[make(u)] ** 2))(v),
                 fd_grad(lambda u: np.sum(np.r_[make(u)] ** 2), v))


def test_c_():
    a, b = RNG.normal(size=3), RNG.normal(size=(3, 2))
    for items in [(a, a), (a, b), (b, a, 1.0 + a)]:
        assert_close(fnp.c_[items], np.c_[items])
    assert_close(ft.jit(lambda u: fnp.c_[u, b])(a), np.c_[a, b])
    assert_close(ft.vmap(lambda u: fnp.c_[u, u])(b), np.stack([np.c_[r, r] for r in b]))
    assert_close(ft.grad(lambda u: fnp.sum(fnp.c_[u, b, u] ** 3))(a),
                 fd_grad(lambda u: np.sum(np.c_[u, b, u] ** 3), a))
    with pytest.raises(NotImplementedError, match="string directives"):
        fnp.r_["0,2", a, a]


@pytest.mark.parametrize("shape,kth,axis", [
    ((7,), 3, -1), ((7,), [0, 6], -1), ((4, 5), 2, 0), ((4, 5), -1, 1), ((3, 4), 5, None)])
def test_partition(shape, kth, axis):
    a = RNG.normal(size=shape)
    got, want = np.asarray(fnp.partition(a, kth, axis)), np.partition(a, kth, axis)
    assert_close(np.sort(got, axis), np.sort(want, axis))         # same multiset
    for k in np.atleast_1d(kth):                                   # NumPy's partition property
        assert_close(np.take(got, k, axis), np.take(want, k, axis))
    w = RNG.normal(size=got.shape)
    assert_close(ft.grad(lambda x: fnp.sum(fnp.partition(x, kth, axis) * w))(a),
                 fd_grad(lambda x: np.sum(np.sort(x, axis) * w), a))
    assert_close(ft.jit(lambda x: fnp.partition(x, kth, axis))(a), got)
    with pytest.raises(ValueError, match="out of bounds"):
        fnp.partition(a, 100, axis)


def test_real_if_close():
    for a in [np.array([1 + 1e-16j, 2 - 1e-15j]), np.array([1 + 1j]), np.array([1.5, 2.0]),
              np.array([1 + 1e-3j]), np.array([1 + 1e-10j], np.complex64)]:
        got, want = fnp.real_if_close(a), np.real_if_close(a)
        assert got.dtype == want.dtype and np.array_equal(got, want)
    assert fnp.real_if_close(np.array([1 + 1e-3j]), tol=1e-2).dtype == np.float64
    with pytest.raises(TypeError, match="real_if_close.*traced"):
        ft.jit(fnp.real_if_close)(np.ones(2))


def test_numpy_functions_on_traced_values_dispatch():
    f = np.arange(6.0) ** 2
    assert_close(ft.jit(lambda v: np.gradient(v))(f), np.gradient(f))
    m = np.array([[3.0, 1.0, 2.0], [0.0, 5.0, -1.0]])
    assert_close(ft.vmap(lambda v: np.partition(v, 1))(m), np.sort(m, axis=1))
    a = RNG.normal(size=(3, 3))
    assert_close(ft.jit(lambda v: np.einsum("ii->i", v))(a), np.diagonal(a))


def test_rollaxis():
    """NumPy's rollaxis (start counts the input's axes), found missing by autograd's suite."""
    a = RNG.normal(size=(2, 3, 4))
    for axis in range(-3, 3):
        for start in range(-3, 4):
            assert_close(fnp.rollaxis(a, axis, start), np.rollaxis(a, axis, start))
    w = RNG.normal(size=(3, 4, 2))
    g = ft.grad(lambda x: fnp.sum(fnp.rollaxis(x, 0, 3) * w))(a)
    assert_close(g, np.rollaxis(w, 2, 0))
    with pytest.raises(np.exceptions.AxisError):
        fnp.rollaxis(a, 3)
    with pytest.raises(np.exceptions.AxisError, match="'start' arg"):
        fnp.rollaxis(a, 0, 4)


def test_tuples_inside_an_index_are_index_arrays():
    """x[(0, 1, 0), (3, 3, 2)] is advanced indexing, as in NumPy (autograd's rfftn test)."""
    x = RNG.normal(size=(4, 4, 4))
    for idx in [((0, 1, 0), (3, 3, 2)), ((0, 1), [1, 2]), (slice(None), (2, 0))]:
        assert_close(fnp.asarray(x)[idx], x[idx])
        assert_close(ft.jit(lambda v: v[idx])(x), x[idx])
    w = RNG.normal(size=(3, 4))
    g = ft.grad(lambda v: fnp.sum(v[(0, 1, 0), (3, 3, 2)] * w))(x)
    want = np.zeros_like(x)
    np.add.at(want, ((0, 1, 0), (3, 3, 2)), w)
    assert_close(g, want)


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4)])
def test_pinv_values_and_gradients(shape):
    a = RNG.normal(size=shape)
    assert_close(fnp.linalg.pinv(a), np.linalg.pinv(a), rtol=1e-10, atol=1e-12)
    w = RNG.normal(size=np.linalg.pinv(a).shape)
    g = ft.grad(lambda x: fnp.sum(fnp.linalg.pinv(x) * w))(a)
    assert_close(g, fd_grad(lambda x: np.sum(np.linalg.pinv(x) * w), a), rtol=1e-6, atol=1e-7)
    assert_close(ft.vmap(fnp.linalg.pinv)(a[None]), np.linalg.pinv(a)[None], atol=1e-12)


def test_pinv_of_a_low_rank_matrix_and_rcond():
    """Rank 3 of 5: singular values below rcond count as zero; the derivative (Golub and
    Pereyra's, at constant rank) matches central differences, to second order."""
    b = RNG.normal(size=(5, 3))
    m = np.arange(25.0).reshape(5, 5)
    f = lambda x: fnp.sum(fnp.linalg.pinv(x @ x.T) * m)  # noqa: E731
    assert_close(fnp.linalg.pinv(b @ b.T), np.linalg.pinv(b @ b.T), atol=1e-12)
    g = ft.grad(f)(b)
    assert_close(g, fd_grad(lambda x: np.sum(np.linalg.pinv(x @ x.T) * m), b), rtol=1e-6,
                 atol=1e-6)
    h = ft.hessian(f)(b)
    fd_h = np.stack([fd_grad(lambda x: np.asarray(ft.grad(f)(x))[i], b)
                     for i in np.ndindex(b.shape)]).reshape(b.shape * 2)
    assert_close(h, fd_h, rtol=1e-5, atol=1e-5)
    a = np.diag([1.0, 1e-3, 1e-9])
    assert_close(fnp.linalg.pinv(a, rcond=1e-6), np.linalg.pinv(a, rcond=1e-6))
    assert_close(fnp.linalg.pinv(a, rtol=1e-2), np.diag([1.0, 0.0, 0.0]))
    with pytest.raises(ValueError, match="rcond or rtol"):
        fnp.linalg.pinv(a, rcond=1e-3, rtol=1e-3)
