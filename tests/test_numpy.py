"""functrans.numpy against NumPy, eagerly and through make_jaxpr + eval_jaxpr; dtype
promotion with weak Python scalars; ft.random; ft.nn activations at extreme inputs."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, strategies as st
from hypothesis.extra.numpy import mutually_broadcastable_shapes

import functrans as ft
import functrans.numpy as fnp
from conftest import assert_close, check_traced, fd_grad

pytestmark = pytest.mark.usefixtures("x64")  # float64 references: conftest.x64

F32, F64, I32 = np.float32, np.float64, np.int32
seeds = st.integers(0, 2 ** 32 - 1)


def _tol(dtype):
    return 2e-5 if np.dtype(dtype) == np.float32 else 1e-12


def both_ways(f, *args, rtol=None, atol=None):
    """f eagerly and f through its jaxpr; returns the eager result."""
    out = f(*args)
    dts = [np.asarray(a).dtype for a in args if hasattr(a, "dtype")]
    tol = rtol if rtol is not None else (_tol(F32) if F32 in dts else 1e-12)
    check_traced(f, *args, rtol=tol, atol=atol if atol is not None else tol)
    return out


def compare(got, want, dtype=None, rtol=None, atol=None):
    got = np.asarray(got)
    if dtype is not None:
        assert got.dtype == np.dtype(dtype), f"dtype {got.dtype}, expected {np.dtype(dtype)}"
    tol = _tol(got.dtype) if got.dtype.kind == "f" else 0
    assert_close(got, want, rtol=rtol if rtol is not None else tol,
                 atol=atol if atol is not None else tol)


# ---------------------------------------------------------------------------
# elementwise

UNARY = {
    "sin": (-3, 3), "cos": (-3, 3), "tan": (-1.2, 1.2), "arcsin": (-0.9, 0.9),
    "arccos": (-0.9, 0.9), "arctan": (-3, 3), "sinh": (-3, 3), "cosh": (-3, 3),
    "tanh": (-3, 3), "exp": (-3, 3), "log": (0.1, 4), "log1p": (-0.9, 3),
    "expm1": (-3, 3), "sqrt": (0, 4), "abs": (-3, 3), "sign": (-3, 3), "floor": (-3, 3),
    "ceil": (-3, 3), "square": (-3, 3), "reciprocal": (0.5, 3), "cbrt": (-3, 3),
    "exp2": (-3, 3), "log2": (0.1, 4), "log10": (0.1, 4), "negative": (-3, 3),
    "positive": (-3, 3), "trunc": (-3, 3), "isfinite": (-3, 3), "isnan": (-3, 3),
    "isinf": (-3, 3), "logical_not": (-1, 1), "round": (-3, 3), "rint": (-3, 3),
}


@pytest.mark.parametrize("name", sorted(UNARY))
@given(shape=st.lists(st.integers(1, 4), max_size=3).map(tuple), seed=seeds,
       dtype=st.sampled_from([F32, F64]))
def test_unary(name, shape, seed, dtype):
    lo, hi = UNARY[name]
    x = np.random.default_rng(seed).uniform(lo, hi, shape).astype(dtype)
    if name in ("isfinite", "isnan", "isinf") and x.size:
        x.flat[0] = [np.inf, np.nan, -np.inf][seed % 3]
    got = both_ways(getattr(fnp, name), x)
    want = getattr(np, name)(x)
    compare(got, want, want.dtype)


@pytest.mark.parametrize("name", ["sin", "exp", "sqrt", "tanh", "log1p"])
def test_unary_on_integers_gives_float32(name):
    x = np.arange(1, 5, dtype=np.int32)
    got = both_ways(getattr(fnp, name), x)
    compare(got, getattr(np, name)(x.astype(F32)), F32)


BINARY = {
    "add": None, "subtract": None, "multiply": None, "divide": "nonzero",
    "true_divide": "nonzero", "power": "positive", "maximum": None, "minimum": None,
    "arctan2": None, "equal": None, "not_equal": None, "less": None, "less_equal": None,
    "greater": None, "greater_equal": None, "floor_divide": "nonzero",
    "remainder": "nonzero", "mod": "nonzero", "fmod": "nonzero", "logaddexp": None,
}


def _operand(rng, shape, dtype, kind):
    if np.dtype(dtype).kind in "iu":
        x = rng.integers(-9, 10, shape)
        if kind in ("nonzero", "positive"):
            x = np.where(x == 0, 3, np.abs(x) if kind == "positive" else x)
        return x.astype(dtype)
    x = rng.uniform(-3, 3, shape)
    if kind == "nonzero":
        x = np.where(np.abs(x) < 0.5, 1.5, x)
    if kind == "positive":
        x = np.abs(x) + 0.1
    return x.astype(dtype)


@pytest.mark.parametrize("name", sorted(BINARY))
@given(shapes=mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=3),
       seed=seeds, dtype=st.sampled_from([F32, F64, I32]))
def test_binary_broadcasting(name, shapes, seed, dtype):
    if dtype == I32 and name in ("power", "arctan2", "logaddexp"):
        dtype = F32
    rng = np.random.default_rng(seed)
    kind = BINARY[name]
    x = _operand(rng, shapes.input_shapes[0], dtype, None if name != "power" else kind)
    y = _operand(rng, shapes.input_shapes[1], dtype, kind)
    got = both_ways(getattr(fnp, name), x, y)
    want = getattr(np, name)(x, y)
    if dtype == I32 and name in ("divide", "true_divide"):
        want = want.astype(F32)         # JAX: int / int is the default float
    compare(got, want, want.dtype)


@pytest.mark.parametrize("name", ["add", "multiply", "subtract", "maximum", "minimum",
                                  "greater", "equal", "power", "divide"])
@pytest.mark.parametrize("scalar", [2, 0.5, True])
def test_binary_with_python_scalars(name, scalar):
    x = np.linspace(0.5, 2.0, 6, dtype=F32).reshape(2, 3)
    for args in ((x, scalar), (scalar, x)):
        got = both_ways(lambda a: getattr(fnp, name)(*[a if v is x else v for v in args]), x)
        want = getattr(np, name)(*args)
        compare(got, want, F32 if want.dtype.kind == "f" else want.dtype)


def test_where_clip_and_select_like_functions():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 4)).astype(F32)
    y = rng.normal(size=(4,)).astype(F32)
    compare(both_ways(lambda a, b: fnp.where(a > 0, a, b), x, y), np.where(x > 0, x, y), F32)
    compare(both_ways(lambda a: fnp.where(a > 0, a, 0.0), x), np.where(x > 0, x, 0), F32)
    compare(both_ways(lambda a: fnp.clip(a, -0.5, 0.5), x), np.clip(x, -0.5, 0.5), F32)
    compare(both_ways(lambda a: fnp.clip(a, a_max=0.1), x), np.minimum(x, 0.1), F32)
    compare(both_ways(lambda a, b: fnp.logical_and(a > 0, b > 0), x, y),
            np.logical_and(x > 0, y > 0), np.bool_)
    compare(both_ways(lambda a: fnp.astype(a, I32), x), x.astype(I32), I32)


# ---------------------------------------------------------------------------
# dtype promotion with weak Python scalars

PROMOTION = [          # (f, x, dtype): f written with fnp, so it runs eagerly too
    (lambda x: fnp.multiply(x, 2), np.ones(3, F32), F32),
    (lambda x: fnp.multiply(x, 2.0), np.ones(3, F32), F32),
    (lambda x: fnp.power(2, x), np.ones(3, F32), F32),
    (lambda x: fnp.add(x, 1.5), np.ones(3, I32), F32),
    (lambda x: fnp.add(1.5, x), np.ones(3, I32), F32),
    (lambda x: fnp.multiply(x, 2), np.ones(3, I32), I32),
    (lambda x: fnp.divide(x, 2), np.ones(3, I32), F32),
    # NumPy float64 is float32 with x64 off (JAX's x32 canonicalization)
    (lambda x: fnp.multiply(x, 2.0), np.ones(3, F64), F32),
    (lambda x: fnp.add(x, 1), np.ones(3, F64), F32),
    (lambda x: fnp.add(x, np.ones(3, F64)), np.ones(3, F32), F32),
    (lambda x: fnp.add(x, np.ones(3, np.float16)), np.ones(3, F32), F32),
    (lambda x: fnp.add(x, 1.5), np.ones(3, np.uint8), F32),
    (lambda x: fnp.add(x, 1), np.ones(3, np.uint8), np.uint8),
    (lambda x: fnp.add(x, 1), np.array([True, False]), I32),
    (lambda x: fnp.multiply(x, 2.0), np.ones(3, np.float16), np.float16),
    (lambda x: fnp.multiply(fnp.sum(x), 2.0), np.ones(3, F32), F32),
    (lambda x: fnp.mean(x), np.ones(3, I32), F32),
    (lambda x: fnp.sum(fnp.greater(x, 0)), np.ones(3, F32), I32),
    (lambda x: fnp.where(fnp.greater(x, 0), x, 0.0), np.ones(3, F32), F32),
    (lambda x: fnp.maximum(x, 0.0), np.ones(3, I32), F32),
]


@pytest.mark.usefixtures("x32")
@pytest.mark.parametrize("i", range(len(PROMOTION)))
def test_promotion(i):
    f, x, dtype = PROMOTION[i]
    out = f(x)
    assert np.asarray(out).dtype == np.dtype(dtype)
    closed = check_traced(f, x)
    assert closed.out_avals[0].dtype == np.dtype(dtype)
    # weakly typed where JAX's result is (an integer array with a Python float, a bool
    # with a Python int: the Python kind wins, so its weak type stays), eager as traced
    assert closed.out_avals[0].weak_type == (i in WEAK_PROMOTION)
    assert out.weak_type == (i in WEAK_PROMOTION)


WEAK_PROMOTION = {3, 4, 11, 13, 19}     # (jax 0.10.2's weak_type of these results)


@pytest.mark.parametrize("f, x, dtype", [
    (lambda x: x * 2, np.ones(3, F32), F32),
    (lambda x: 2.0 * x, np.ones(3, F32), F32),
    (lambda x: 2 ** x, np.ones(3, F32), F32),
    (lambda x: x + 1.5, np.ones(3, I32), F32),
    (lambda x: x / 2, np.ones(3, I32), F32),
    (lambda x: x // 2, np.ones(3, I32), I32),
    (lambda x: x * 2.0, np.ones(3, F64), F32),      # x32: a float64 NumPy input is narrowed
    (lambda x: -x + 1, np.ones(3, np.uint8), np.uint8),
])
@pytest.mark.usefixtures("x32")
def test_operators_on_traced_values_promote_like_jax(f, x, dtype):
    closed = check_traced(f, x)
    assert closed.out_avals[0].dtype == np.dtype(dtype)


def test_weak_type_of_traced_python_scalar_results():
    closed = ft.make_jaxpr(lambda x: x * 2)(np.ones(3, F32))
    assert [a.dtype for a in closed.in_avals] == [np.dtype(F32)]
    assert "f64" not in str(closed)


def test_float64_inputs_stay_float64_through_a_program():
    x = np.linspace(0, 1, 5)
    out = fnp.sum(fnp.exp(x) * 0.5 + fnp.sin(x) / 3)
    assert out.dtype == np.float64
    compare(out, np.sum(np.exp(x) * 0.5 + np.sin(x) / 3), F64)


def test_power_of_integer_arrays_stays_integer():
    x = np.arange(4, dtype=I32)
    assert fnp.power(x, x).dtype == np.dtype(I32)


# ---------------------------------------------------------------------------
# reductions

REDUCTIONS = ["sum", "mean", "max", "min", "prod", "var", "std", "all", "any"]


@pytest.mark.parametrize("name", REDUCTIONS)
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple), seed=seeds,
       data=st.data(), keepdims=st.booleans(), dtype=st.sampled_from([F32, F64]))
def test_reductions(name, shape, seed, data, keepdims, dtype):
    nd = len(shape)
    axis = data.draw(st.one_of(st.none(), st.integers(-nd, nd - 1),
                               st.sets(st.integers(0, nd - 1), min_size=1).map(tuple)))
    x = np.random.default_rng(seed).uniform(-1.5, 1.5, shape).astype(dtype)
    if name in ("all", "any"):
        x = x > 0.5
    got = both_ways(lambda a: getattr(fnp, name)(a, axis=axis, keepdims=keepdims), x)
    want = getattr(np, name)(x, axis=axis, keepdims=keepdims)
    compare(got, want, want.dtype, rtol=1e-5 if dtype == F32 else 1e-12,
            atol=1e-5 if dtype == F32 else 1e-12)


@pytest.mark.usefixtures("x32")
@pytest.mark.parametrize("name", ["argmax", "argmin"])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("keepdims", [False, True])
def test_argmax_argmin(name, axis, keepdims):
    x = np.random.default_rng(1).permutation(24).reshape(2, 3, 4).astype(F32)
    if axis is None and keepdims:
        return
    got = both_ways(lambda a: getattr(fnp, name)(a, axis=axis, keepdims=keepdims), x)
    want = getattr(np, name)(x, axis=axis, keepdims=keepdims)
    compare(got, want)
    assert np.asarray(got).dtype == np.int32


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_cumsum_cumprod_logsumexp(axis):
    x = np.random.default_rng(2).uniform(0.5, 1.5, (3, 4))
    compare(both_ways(lambda a: fnp.cumsum(a, axis=axis), x), np.cumsum(x, axis=axis), F64)
    compare(both_ways(lambda a: fnp.cumprod(a, axis=axis), x), np.cumprod(x, axis=axis), F64)
    want = np.log(np.sum(np.exp(x), axis=axis))
    compare(both_ways(lambda a: fnp.logsumexp(a, axis=axis), x), want, F64)


@pytest.mark.usefixtures("x32")
def test_reduction_of_integers_and_bools():
    x = np.arange(12, dtype=I32).reshape(3, 4)
    compare(both_ways(lambda a: fnp.sum(a, axis=1), x), x.sum(axis=1), I32)
    compare(both_ways(lambda a: fnp.max(a, axis=0), x), x.max(axis=0), I32)
    compare(both_ways(lambda a: fnp.sum(a > 5), x), 6, I32)


# ---------------------------------------------------------------------------
# shape ops

A = np.arange(24, dtype=F32).reshape(2, 3, 4)
SHAPE_OPS = {          # name -> f(m, x) with m = numpy or functrans.numpy
    "reshape -1": lambda m, x: m.reshape(x, (4, -1)),
    "reshape int": lambda m, x: m.reshape(x, 24),
    "ravel": lambda m, x: m.ravel(x),
    "transpose": lambda m, x: m.transpose(x),
    "transpose axes": lambda m, x: m.transpose(x, (1, 0, 2)),
    "swapaxes": lambda m, x: m.swapaxes(x, 0, -1),
    "moveaxis": lambda m, x: m.moveaxis(x, 0, -1),
    "expand_dims": lambda m, x: m.expand_dims(x, (0, 4)),
    "expand_dims neg": lambda m, x: m.expand_dims(x, -1),
    "squeeze": lambda m, x: m.squeeze(m.expand_dims(x, 1), 1),
    "squeeze all": lambda m, x: m.squeeze(m.reshape(x, (1, 2, 1, 12))),
    "broadcast_to": lambda m, x: m.broadcast_to(x[:, :1], (5, 2, 3, 4)),
    "concatenate": lambda m, x: m.concatenate([x, x[:, :1]], axis=1),
    "concatenate neg axis": lambda m, x: m.concatenate([x, x], axis=-1),
    "stack": lambda m, x: m.stack([x, x + 1, x * 2], axis=1),
    "stack last": lambda m, x: m.stack([x, x], axis=-1),
    "hstack": lambda m, x: m.hstack([x, x]),
    "vstack": lambda m, x: m.vstack([x[0], x[1]]),
    "split": lambda m, x: m.split(x, [1, 3], axis=2),
    "split sections": lambda m, x: m.split(x, 3, axis=1),
    "pad": lambda m, x: m.pad(x, ((1, 0), (0, 2), (1, 1))),
    "pad value": lambda m, x: m.pad(x, 1, constant_values=-1.0),
    "flip": lambda m, x: m.flip(x, 1),
    "flip all": lambda m, x: m.flip(x),
    "tile": lambda m, x: m.tile(x[0], (2, 1, 3)),
    "repeat": lambda m, x: m.repeat(x, 2, axis=1),
    "take": lambda m, x: m.take(x, np.array([0, -1, 1]), axis=2),
    "take flat": lambda m, x: m.take(x, np.array([[0, 5], [23, 7]])),
    "take_along_axis": lambda m, x: m.take_along_axis(x, np.array([[[0], [3], [1]]]), 2),
    "tril": lambda m, x: m.tril(x[0]),
    "triu k": lambda m, x: m.triu(x[0], 1),
    "diagonal": lambda m, x: m.diagonal(x[0]),
    "trace": lambda m, x: m.trace(x[0]),
    "outer": lambda m, x: m.outer(x[0, 0], x[1, 1]),
    "atleast_2d": lambda m, x: m.atleast_2d(x[0, 0]),
    "where": lambda m, x: m.where(x > 10, x, -x),
}


@pytest.mark.parametrize("name", sorted(SHAPE_OPS))
def test_shape_ops(name):
    f = SHAPE_OPS[name]
    want, got = f(np, A), f(fnp, A)
    want_leaves, got_leaves = ft.tree_util.tree_leaves(want), ft.tree_util.tree_leaves(got)
    assert len(want_leaves) == len(got_leaves)
    for g, w in zip(got_leaves, want_leaves):
        compare(g, w, np.asarray(w).dtype)
    check_traced(lambda x: f(fnp, x), A, rtol=0, atol=0)


# ---------------------------------------------------------------------------
# indexing

X = np.arange(120, dtype=F32).reshape(4, 5, 6)
INDICES = [
    ("int", (1,)),
    ("negative int", (-1,)),
    ("two ints", (2, -3)),
    ("slice", (slice(1, 3),)),
    ("negative step", (slice(None, None, -1),)),
    ("negative step with bounds", (slice(3, 0, -2), slice(None), slice(-1, -6, -2))),
    ("step", (slice(None), slice(0, 5, 2))),
    ("None", (None,)),
    ("None mid", (slice(None), None, 1)),
    ("Ellipsis", (Ellipsis, 2)),
    ("Ellipsis None", (Ellipsis, None, slice(-2, None))),
    ("int array", (np.array([0, -1, 2]),)),
    ("int array last", (Ellipsis, np.array([0, -1, 2]))),
    ("two int arrays", (np.array([0, 1]), slice(None), np.array([1, 2]))),
    ("adjacent int arrays", (slice(None), np.array([[0, 1], [2, 3]]), np.array([5, 0]))),
    ("int array and int", (slice(None), np.array([[0, 1], [2, 3]]), 0)),
    ("list", ([0, 2],)),
    ("bool mask", (X[:, 0, 0] > 30,)),
    ("bool mask 2d", (X[:, :, 0] > 40,)),
    ("empty slice", (slice(3, 1),)),
]


@pytest.mark.parametrize("name, idx", INDICES, ids=[c[0] for c in INDICES])
def test_getitem(name, idx):
    want = X[idx]
    got = fnp.getitem(X, idx)
    compare(got, want, F32)
    if not any(isinstance(i, np.ndarray) and i.dtype == bool for i in idx):
        got_traced = check_traced(lambda x: x[idx], X)
        assert got_traced.out_avals[0].shape == want.shape


@pytest.mark.parametrize("name, idx", [c for c in INDICES if "mask" not in c[0]],
                         ids=[c[0] for c in INDICES if "mask" not in c[0]])
def test_index_update_and_add(name, idx):
    vals = np.float32(7.0)
    want = X.copy()
    want[idx] = vals
    got = both_ways(lambda x: fnp.at(x)[idx].set(vals), X)
    compare(got, want, F32)
    want = X.copy()
    np.add.at(want, idx, 2.0)
    got = both_ways(lambda x: fnp.at(x)[idx].add(2.0), X)
    compare(got, want, F32)


def test_index_add_accumulates_duplicates():
    x = np.zeros(4, F32)
    got = both_ways(lambda a: fnp.at(a)[np.array([0, 0, 3, 0])].add(1.0), x)
    compare(got, [3, 0, 0, 1], F32)


def test_traced_integer_index():
    def f(x, i):
        return x[i], x[:, i]
    check_traced(f, X, np.int32(2))
    got = f(X, np.int32(-1))
    compare(got[0], X[-1])


# ---------------------------------------------------------------------------
# linear algebra

R = np.random.default_rng(3)
EINSUMS = [
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("ij,ij->", [(3, 4), (3, 4)]),
    ("ij->ji", [(3, 4)]),
    ("ijk->k", [(2, 3, 4)]),
    ("i,j->ij", [(3,), (4,)]),
    ("abc,cd,bd->a", [(2, 3, 4), (4, 5), (3, 5)]),
    ("...ij,...jk->...ik", [(2, 2, 3), (2, 3, 4)]),
    ("ij,kj", [(2, 3), (4, 3)]),
    ("bhqd,bhkd->bhqk", [(2, 2, 3, 4), (2, 2, 5, 4)]),
]


@pytest.mark.parametrize("spec, shapes", EINSUMS, ids=[e[0] for e in EINSUMS])
def test_einsum(spec, shapes):
    ops = [R.normal(size=s) for s in shapes]
    got = both_ways(lambda *xs: fnp.einsum(spec, *xs), *ops)
    compare(got, np.einsum(spec, *ops), F64)


@pytest.mark.parametrize("sa, sb", [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)),
                                    ((2, 3), (3, 4)), ((5, 2, 3), (3, 4)),
                                    ((2, 1, 3, 4), (5, 4, 2)), ((1, 3, 4), (6, 4, 2))])
def test_matmul_with_batch_broadcasting(sa, sb):
    a, b = R.normal(size=sa).astype(F32), R.normal(size=sb).astype(F32)
    got = both_ways(lambda x, y: x @ y, a, b)
    compare(got, a @ b, F32, rtol=1e-5, atol=1e-5)
    compare(fnp.matmul(a, b), a @ b, F32, rtol=1e-5, atol=1e-5)


def test_dot_tensordot_inner_outer_vdot():
    a, b = R.normal(size=(2, 3, 4)), R.normal(size=(4, 5))
    compare(both_ways(fnp.dot, a, b), np.dot(a, b), F64)
    c = R.normal(size=(3, 4, 2))
    compare(both_ways(lambda x, y: fnp.tensordot(x, y, axes=([1, 2], [0, 1])), a, c),
            np.tensordot(a, c, axes=([1, 2], [0, 1])), F64)
    compare(both_ways(lambda x, y: fnp.tensordot(x, y, 1), a, b), np.tensordot(a, b, 1), F64)
    v, w = R.normal(size=4), R.normal(size=4)
    compare(both_ways(fnp.inner, a, v), np.inner(a, v), F64)
    compare(both_ways(fnp.outer, v, w), np.outer(v, w), F64)
    compare(both_ways(fnp.vdot, v, w), np.vdot(v, w), F64)
    compare(both_ways(fnp.dot, v, w), np.dot(v, w), F64)
    compare(both_ways(lambda x: fnp.linalg.norm(x), a), np.linalg.norm(a.ravel()), F64)
    compare(both_ways(lambda x: fnp.linalg.norm(x, axis=-1), a), np.linalg.norm(a, axis=-1),
            F64)


def test_matmul_shape_error_names_the_shapes():
    with pytest.raises(ValueError, match=r"\(2, 3\).*\(4, 5\)"):
        fnp.matmul(np.ones((2, 3)), np.ones((4, 5)))


# ---------------------------------------------------------------------------
# creation

@pytest.mark.parametrize("got, want", [
    (lambda: fnp.zeros((2, 3)), np.zeros((2, 3), F32)),
    (lambda: fnp.ones(4, dtype=F64), np.ones(4, F32)),     # x64 off: F64 asked, F32 made
    (lambda: fnp.full((2,), 3), np.full((2,), 3, I32)),
    (lambda: fnp.full((2,), 3.0), np.full((2,), 3.0, F32)),
    (lambda: fnp.arange(5), np.arange(5, dtype=I32)),
    (lambda: fnp.arange(1, 7, 2), np.arange(1, 7, 2, dtype=I32)),
    (lambda: fnp.arange(0.0, 1.0, 0.25), np.arange(0, 1, 0.25, dtype=F32)),
    (lambda: fnp.linspace(0, 1, 5), np.linspace(0, 1, 5, dtype=F32)),
    (lambda: fnp.linspace(0, 1, 4, endpoint=False), np.linspace(0, 1, 4, False, dtype=F32)),
    (lambda: fnp.eye(3), np.eye(3, dtype=F32)),
    (lambda: fnp.eye(2, 3, k=1), np.eye(2, 3, 1, dtype=F32)),
    (lambda: fnp.zeros_like(np.ones((2,), I32)), np.zeros(2, I32)),
    (lambda: fnp.ones_like(np.ones((2,), F32), dtype=F64), np.ones(2, F32)),
    (lambda: fnp.full_like(np.ones(3, F32), 7), np.full(3, 7, F32)),
])
@pytest.mark.usefixtures("x32")
@pytest.mark.filterwarnings("ignore:Explicitly requested dtype float64")
def test_creation(got, want):
    compare(got(), want, want.dtype)


@pytest.mark.usefixtures("x32")
def test_creation_under_tracing_with_traced_fill():
    def f(x):
        return fnp.full((2, 3), x[0]) + fnp.zeros_like(x)[0] + fnp.ones((2, 3))
    out = both_ways(f, np.array([2.0, 5.0], F32))
    compare(out, np.full((2, 3), 3.0, F32), F32)


# ---------------------------------------------------------------------------
# ft.random

def test_random_is_a_pure_function_of_the_key():
    key = ft.random.PRNGKey(0)
    a = ft.random.normal(key, (100,))
    b = ft.random.normal(key, (100,))
    np.testing.assert_array_equal(a, b)
    k1, k2 = ft.random.split(key)
    assert not np.array_equal(ft.random.normal(k1, (100,)), a)
    assert not np.array_equal(ft.random.normal(k1, (100,)), ft.random.normal(k2, (100,)))
    assert not np.array_equal(ft.random.uniform(ft.random.PRNGKey(1), (10,)),
                              ft.random.uniform(ft.random.PRNGKey(2), (10,)))
    np.testing.assert_array_equal(key, ft.random.PRNGKey(0))   # keys are never mutated


def test_random_keys_split_to_distinct_keys():
    keys = ft.random.split(ft.random.PRNGKey(42), 8)
    assert keys.shape == (8, 2) and keys.dtype == np.uint32
    assert len({tuple(k) for k in np.asarray(keys)}) == 8


def test_random_traced_equals_eager():
    def f(key):
        k1, k2 = ft.random.split(key)
        return ft.random.uniform(k1, (3, 5)), ft.random.normal(k2, (7,))
    check_traced(f, ft.random.PRNGKey(3), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [F32, F64])
def test_random_distributions_roughly(dtype):
    n = 20000
    key = ft.random.PRNGKey(7)
    k = ft.random.split(key, 5)
    u = np.asarray(ft.random.uniform(k[0], (n,), dtype))
    assert u.dtype == dtype and u.min() >= 0 and u.max() < 1
    assert abs(u.mean() - 0.5) < 0.01 and abs(u.var() - 1 / 12) < 0.005
    u2 = np.asarray(ft.random.uniform(k[1], (n,), dtype, minval=-2.0, maxval=3.0))
    assert u2.min() >= -2 and u2.max() < 3 and abs(u2.mean() - 0.5) < 0.05
    z = np.asarray(ft.random.normal(k[2], (n,), dtype))
    assert z.dtype == dtype and abs(z.mean()) < 0.03 and abs(z.std() - 1) < 0.03
    assert abs(np.mean(np.abs(z) < 1) - 0.6827) < 0.015
    b = np.asarray(ft.random.bernoulli(k[3], 0.3, (n,)))
    assert b.dtype == np.bool_ and abs(b.mean() - 0.3) < 0.015
    logits = np.log(np.array([0.1, 0.2, 0.7], dtype))
    c = np.asarray(ft.random.categorical(k[4], logits, shape=(n,)))
    freq = np.bincount(c, minlength=3) / n
    np.testing.assert_allclose(freq, [0.1, 0.2, 0.7], atol=0.015)


@pytest.mark.usefixtures("x32")
def test_randint_range():
    r = np.asarray(ft.random.randint(ft.random.PRNGKey(0), (5000,), 3, 9))
    assert r.dtype == np.int32 and r.min() == 3 and r.max() == 8


# ---------------------------------------------------------------------------
# ft.nn activations

EXTREME = np.array([-1000.0, -30.0, -1.0, 0.0, 1.0, 30.0, 1000.0], F32)


@pytest.mark.parametrize("name", ["softmax", "log_softmax", "logsumexp", "softplus",
                                  "sigmoid", "relu", "gelu", "log_sigmoid", "silu", "elu"])
@pytest.mark.parametrize("dtype", [F32, F64])
def test_activations_are_finite_with_finite_gradients_at_extremes(name, dtype):
    x = EXTREME.astype(dtype)
    f = getattr(ft.nn, name)
    out = np.asarray(both_ways(f, x))
    assert np.all(np.isfinite(out)), f"{name}({x}) = {out}"
    g = np.asarray(ft.grad(lambda v: fnp.sum(f(v) * np.arange(1, 8, dtype=dtype)))(x))
    assert np.all(np.isfinite(g)), f"grad {name} = {g}"
    assert g.dtype == dtype


def _np_softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")    # log(0) = -inf on purpose
def test_activation_values():
    x = np.random.default_rng(5).normal(size=(3, 4)) * 3
    compare(ft.nn.softmax(x), _np_softmax(x), F64)
    compare(ft.nn.softmax(x, axis=0), _np_softmax(x, 0), F64)
    compare(ft.nn.log_softmax(x), np.log(_np_softmax(x)), F64)
    compare(ft.nn.logsumexp(x, axis=1), np.log(np.exp(x).sum(1)), F64)
    compare(ft.nn.logsumexp(x, axis=1, keepdims=True), np.log(np.exp(x).sum(1, keepdims=True)),
            F64)
    compare(ft.nn.softplus(x), np.log1p(np.exp(x)), F64)
    compare(ft.nn.sigmoid(x), 1 / (1 + np.exp(-x)), F64)
    compare(ft.nn.relu(x), np.maximum(x, 0), F64)
    erf = np.vectorize(math.erf)
    compare(ft.nn.gelu(x, approximate=False), 0.5 * x * (1 + erf(x / math.sqrt(2))), F64)
    tanh_form = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    compare(ft.nn.gelu(x), tanh_form, F64)
    # large inputs, against the exact limits
    big = np.array([1000.0, -1000.0, 0.0])
    compare(ft.nn.softmax(big), [1.0, 0.0, 0.0], F64)
    compare(ft.nn.log_softmax(big), [0.0, -2000.0, -1000.0], F64)
    compare(ft.nn.logsumexp(big), 1000.0, F64)
    compare(ft.nn.softplus(big), [1000.0, 0.0, math.log(2)], F64)
    compare(ft.nn.logsumexp(np.array([-np.inf, -np.inf])), -np.inf, F64)


def test_softmax_gradients_at_large_inputs_match_moderate_ones():
    """Shift invariance: the gradient of log_softmax at x + 1000 equals that at x."""
    x = np.array([0.3, -1.2, 2.0])
    w = np.array([1.0, 2.0, -0.5])

    def f(v):
        return fnp.sum(ft.nn.log_softmax(v) * w)
    compare(ft.grad(f)(x + 1000.0), ft.grad(f)(x), F64, rtol=1e-9, atol=1e-9)
    g = ft.grad(lambda v: ft.nn.logsumexp(v))(x + 1000.0)
    compare(g, _np_softmax(x), F64, rtol=1e-9, atol=1e-9)


# ---------------------------------------------------------------------------
# sort, argsort, lexsort, isclose, allclose

_SORT_DTYPES = [np.float64, np.float32, np.int64, np.int8, np.uint8, np.bool_]


@pytest.mark.parametrize("dtype", _SORT_DTYPES)
@given(data=st.data())
def test_sort_and_argsort_match_numpy_stable(dtype, data):
    shape = data.draw(st.lists(st.integers(1, 5), min_size=1, max_size=3), label="shape")
    axis = data.draw(st.integers(-len(shape), len(shape) - 1), label="axis")
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 16), label="seed"))
    if np.dtype(dtype).kind == "f":
        x = rng.integers(-3, 4, shape).astype(dtype)         # ties on purpose
        x[rng.random(shape) < 0.1] = np.nan
    elif dtype is np.bool_:
        x = rng.random(shape) < 0.5
    else:
        info = np.iinfo(dtype)
        x = rng.choice(np.array([info.min, info.max, 0, 1, 2], dtype), shape)
    np.testing.assert_array_equal(fnp.sort(x, axis), np.sort(x, axis, kind="stable"))
    np.testing.assert_array_equal(fnp.argsort(x, axis), np.argsort(x, axis, kind="stable"))
    # descending: the reverse order, equal elements still in their original order (NaN first)
    idx = fnp.argsort(x, axis, descending=True)
    n = x.shape[axis]
    want = n - 1 - np.flip(np.argsort(np.flip(x, axis), axis, kind="stable"), axis)
    np.testing.assert_array_equal(idx, want)
    np.testing.assert_array_equal(fnp.sort(x, axis, descending=True),
                                  np.take_along_axis(x, want, axis))
    check_traced(lambda a: fnp.argsort(a, axis, descending=True), x)


def test_sort_gradients_and_transformations():
    x = np.array([[0.3, -1.2, 2.0, 0.7], [1.5, 0.1, -0.4, 0.9]])
    w = np.arange(4.0)

    def f(a):
        return fnp.sum(fnp.sort(a, axis=1) * w) + fnp.sum(fnp.sort(a, axis=0, descending=True) ** 2)
    g = ft.grad(f)(x)
    np.testing.assert_allclose(g, fd_grad(f, x), rtol=1e-7, atol=1e-8)
    np.testing.assert_allclose(ft.jit(ft.grad(f))(x), g, rtol=1e-12)
    np.testing.assert_allclose(ft.vmap(ft.grad(f))(np.stack([x, 2 * x])),
                               np.stack([g, ft.grad(f)(2 * x)]), rtol=1e-12)
    v = np.random.default_rng(1).standard_normal(x.shape)
    u = np.random.default_rng(2).standard_normal(x.shape)
    s = lambda a: fnp.sort(a, axis=1)                      # noqa: E731
    jv = ft.jvp(s, (x,), (v,))[1]
    np.testing.assert_allclose(np.vdot(u, jv), np.vdot(ft.vjp(s, x)[1](u)[0], v), rtol=1e-12)
    assert "sort[" in str(ft.make_jaxpr(ft.grad(f))(x))


def test_lexsort_matches_numpy():
    rng = np.random.default_rng(0)
    keys = [rng.integers(0, 3, 12), rng.integers(0, 2, 12), rng.standard_normal(12).round(0)]
    np.testing.assert_array_equal(fnp.lexsort(keys), np.lexsort(keys))
    np.testing.assert_array_equal(ft.jit(lambda *k: fnp.lexsort(k))(*keys), np.lexsort(keys))


def test_sort_rejects_what_it_does_not_support():
    with pytest.raises(NotImplementedError, match="order="):
        fnp.sort(np.ones(3), order="a")
    with pytest.raises(ValueError, match="dimension 0"):
        fnp.sort(np.float64(1.0))


def test_isclose_and_allclose_match_numpy_traced_too():
    a = np.array([1.0, np.inf, np.nan, -np.inf, 1e-9, 3.0])
    b = np.array([1 + 1e-6, np.inf, np.nan, np.inf, 0.0, 3.1])
    with np.errstate(invalid="ignore"):
        for equal_nan in (False, True):
            want = np.isclose(a, b, equal_nan=equal_nan)
            np.testing.assert_array_equal(fnp.isclose(a, b, equal_nan=equal_nan), want)
            np.testing.assert_array_equal(
                ft.jit(lambda x, y: fnp.isclose(x, y, equal_nan=equal_nan))(a, b), want)
        assert bool(fnp.allclose(a[:2], b[:2])) and not bool(ft.jit(fnp.allclose)(a, b))
    np.testing.assert_array_equal(fnp.isclose(np.arange(3), np.array([0, 1, 3])),
                                  [True, True, False])


def test_power_of_bools_and_concrete_integer_exponents_as_jax():
    """Bool operands of power count as int32 (JAX's numeric promotion, x64 or not: its
    jnp.power(True, 2) is 1, an int32; integer_pow of a bool used to raise); a concrete 0-d
    integer exponent is an int exponent (integer_pow, the base's dtype kept: int8 ** int64(2)
    is int8); an integer base to a negative one raises JAX's TypeError."""
    a = np.array([True, False])
    for got, want in ((fnp.power(a, 2), [1, 0]), (fnp.power(a, a), [1, 1]),
                      (fnp.power(a, True), [1, 0]), (fnp.power(a, np.array(3, np.int64)), [1, 0])):
        assert np.asarray(got).dtype == np.int32
        np.testing.assert_array_equal(got, want)
    assert np.asarray(fnp.power(np.array([1, 2], np.int8), np.int64(2))).dtype == np.int8
    for x, y in ((np.array([1, 2], np.int8), a), (a, np.array([1, 2], np.int8)),
                 (np.array(3, np.int8), np.array(True))):
        assert np.asarray(fnp.power(x, y)).dtype == np.int8     # promoted first: no int32
    assert np.asarray(fnp.power(np.array([1.5], np.float16), np.array(2))).dtype == np.float16
    assert np.asarray(fnp.power(a, 2.5)).dtype.kind == "f"
    for base in (np.array([2, 3], np.int32), 2, True):
        with pytest.raises(TypeError, match="Integers cannot be raised to negative powers"):
            fnp.power(base, -1)
    assert float(fnp.power(2.0, -1)) == 0.5
