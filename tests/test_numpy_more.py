"""More of NumPy's surface (issue 18, deliverable 2): each function against NumPy, its
gradient against float64 central differences, and the same values under jit."""
from __future__ import annotations

import numpy as np
import pytest

import functrans as ft
import functrans.numpy as fnp
from conftest import fd_grad

pytestmark = pytest.mark.usefixtures("x64")  # float64 references: conftest.x64

RNG = np.random.default_rng(3)
X = RNG.uniform(-2, 2, (3, 4))
Y = RNG.uniform(-2, 2, (3, 4))
V3 = RNG.uniform(-2, 2, (4, 3))
W3 = RNG.uniform(-2, 2, (4, 3))
C = RNG.uniform(-2, 2, (2, 3, 4))

# name: (fnp function of float64 arrays, NumPy's, arguments; the first is differentiated)
CASES = {
    "roll": (lambda x: fnp.roll(x, 2), lambda x: np.roll(x, 2), (X,)),
    "roll axis": (lambda x: fnp.roll(x, -1, axis=1), lambda x: np.roll(x, -1, axis=1), (X,)),
    "roll axes": (lambda x: fnp.roll(x, (1, 3), axis=(0, 1)),
                  lambda x: np.roll(x, (1, 3), axis=(0, 1)), (X,)),
    "diff": (fnp.diff, np.diff, (X,)),
    "diff n=2 axis 0": (lambda x: fnp.diff(x, 2, axis=0), lambda x: np.diff(x, 2, axis=0), (X,)),
    "diff prepend": (lambda x: fnp.diff(x, prepend=0.5, append=x[:, :1]),
                     lambda x: np.diff(x, prepend=0.5, append=x[:, :1]), (X,)),
    "cross": (fnp.cross, np.cross, (V3, W3)),
    "cross 2d": (lambda a, b: fnp.cross(a[:, :2], b[:, :2]),
                 lambda a, b: np.cross(a[:, :2], b[:, :2]), (V3, W3)),
    "cross mixed": (lambda a, b: fnp.cross(a[:, :2], b), lambda a, b: np.cross(a[:, :2], b),
                    (V3, W3)),
    "cross axis": (lambda a, b: fnp.cross(a, b, axis=0), lambda a, b: np.cross(a, b, axis=0),
                   (V3.T, W3.T)),
    "kron": (fnp.kron, np.kron, (X[:2, :3], Y[:3, :2])),
    "kron ranks": (fnp.kron, np.kron, (X[0], C)),
    "hypot": (fnp.hypot, np.hypot, (X, Y)),
    "fabs": (fnp.fabs, np.fabs, (X,)),
    "sinc": (fnp.sinc, np.sinc, (X,)),
    "radians": (fnp.radians, np.radians, (X,)),
    "degrees": (fnp.degrees, np.degrees, (X,)),
    "deg2rad": (fnp.deg2rad, np.deg2rad, (X,)),
    "rad2deg": (fnp.rad2deg, np.rad2deg, (X,)),
    "arcsinh": (fnp.arcsinh, np.arcsinh, (X,)),
    "arccosh": (fnp.arccosh, np.arccosh, (np.abs(X) + 1.1,)),
    "arctanh": (fnp.arctanh, np.arctanh, (X / 2.5,)),
    "logaddexp2": (fnp.logaddexp2, np.logaddexp2, (X, Y)),
    "atleast_3d": (fnp.atleast_3d, np.atleast_3d, (X,)),
    "atleast_3d vector": (fnp.atleast_3d, np.atleast_3d, (X[0],)),
    "rot90": (fnp.rot90, np.rot90, (X,)),
    "rot90 k=2": (lambda x: fnp.rot90(x, 2), lambda x: np.rot90(x, 2), (X,)),
    "rot90 k=3 axes": (lambda x: fnp.rot90(x, 3, axes=(2, 0)),
                       lambda x: np.rot90(x, 3, axes=(2, 0)), (C,)),
    "rot90 k=-1": (lambda x: fnp.rot90(x, -1), lambda x: np.rot90(x, -1), (X,)),
    "nan_to_num": (fnp.nan_to_num, np.nan_to_num, (X,)),
    "column_stack": (lambda x, y: fnp.column_stack([x[:, 0], y[:, 1], x[:, :2]]),
                     lambda x, y: np.column_stack([x[:, 0], y[:, 1], x[:, :2]]), (X, Y)),
    "row_stack": (lambda x, y: fnp.row_stack([x, y[0]]), lambda x, y: np.vstack([x, y[0]]),
                  (X, Y)),
    "vsplit": (lambda x: fnp.vsplit(x, [1])[1], lambda x: np.vsplit(x, [1])[1], (X,)),
    "hsplit": (lambda x: fnp.hsplit(x, 2)[0], lambda x: np.hsplit(x, 2)[0], (X,)),
    "dsplit": (lambda x: fnp.dsplit(x, [1, 3])[1], lambda x: np.dsplit(x, [1, 3])[1], (C,)),
    "append": (fnp.append, np.append, (X, Y)),
    "append axis": (lambda x, y: fnp.append(x, y, axis=1),
                    lambda x, y: np.append(x, y, axis=1), (X, Y)),
    "select": (lambda x: fnp.select([x < -1, x < 0.5], [x * x, -x], 2.0),
               lambda x: np.select([x < -1, x < 0.5], [x * x, -x], 2.0), (X,)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_values_gradients_and_jit(name):
    f, ref, args = CASES[name]
    np.testing.assert_allclose(f(*args), ref(*args), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ft.jit(f)(*args), ref(*args), rtol=1e-12, atol=1e-12)
    w = RNG.standard_normal(np.shape(ref(*args)))
    rest = args[1:]
    g = ft.grad(lambda a: fnp.sum(f(a, *rest) * w))(args[0])
    np.testing.assert_allclose(g, fd_grad(lambda a: np.sum(ref(a, *rest) * w), args[0]),
                               rtol=1e-6, atol=1e-7)


def test_edge_values():
    np.testing.assert_array_equal(fnp.nan_to_num(np.array([np.nan, np.inf, -np.inf, 1.0])),
                                  np.nan_to_num(np.array([np.nan, np.inf, -np.inf, 1.0])))
    assert fnp.nan_to_num(np.array([np.nan]), nan=7.0)[0] == 7.0
    big = np.float64(1e200)
    assert fnp.hypot(big, big) == np.hypot(big, big)
    assert fnp.hypot(np.inf, np.nan) == np.inf and fnp.hypot(0.0, 0.0) == 0.0
    assert ft.grad(fnp.hypot, argnums=(0, 1))(np.float64(0), np.float64(0)) == (0.0, 0.0)
    assert fnp.sinc(np.float64(0)) == 1.0 and ft.grad(fnp.sinc)(np.float64(0)) == 0.0
    np.testing.assert_allclose(ft.grad(ft.grad(fnp.sinc))(np.float64(0)), -np.pi ** 2 / 3,
                               rtol=1e-12)
    xs = np.array([-0.04, -1e-3, 1e-7, 0.049, 0.051])
    np.testing.assert_allclose(fnp.sinc(xs), np.sinc(xs), rtol=1e-15)
    np.testing.assert_array_equal(fnp.diff(np.array([True, False, False, True])),
                                  np.diff(np.array([True, False, False, True])))
    np.testing.assert_array_equal(fnp.atleast_3d(np.float64(2.0)).shape, (1, 1, 1))
    with pytest.raises(ValueError, match="dimension must be 2 or 3"):
        fnp.cross(np.ones(4), np.ones(4))
    with pytest.raises(ValueError, match="same length"):
        fnp.select([X > 0], [X, Y])


def test_predicates():
    a, b = np.array([1.0, np.inf, np.nan, 1.0]), np.array([1.0 + 1e-9, np.inf, np.nan, 2.0])
    for equal_nan in (False, True):
        np.testing.assert_array_equal(fnp.isclose(a, b, equal_nan=equal_nan),
                                      np.isclose(a, b, equal_nan=equal_nan))
    assert bool(fnp.allclose(X, X + 1e-10)) and not bool(fnp.allclose(X, Y))
    assert bool(ft.jit(lambda x: fnp.allclose(x, x * (1 + 1e-9)))(X))
    assert fnp.isrealobj(X) and not fnp.iscomplexobj(X)
    np.testing.assert_array_equal(fnp.iscomplex(X), np.iscomplex(X))
    np.testing.assert_array_equal(fnp.isreal(X), np.isreal(X))


def test_float_floor_divide_is_pythons():
    """floor_divide of floats is Python's (CPython's float_divmod, as NumPy, JAX and torch):
    it differs from floor(x / y) where the quotient rounds up to an integer or is infinite."""
    a = np.array([-np.inf, np.inf, -0.5, 0.5, 1.0, 7.0, -7.0, 3.0])
    b = np.array([2.0, -3.0, np.inf, -np.inf, np.inf, 0.1, 2.0, 0.0])
    with np.errstate(divide="ignore", invalid="ignore"):
        want = np.floor_divide(a, b)
    np.testing.assert_array_equal(np.asarray(fnp.floor_divide(a, b)), want)
    np.testing.assert_array_equal(np.asarray(ft.grad(lambda x: fnp.sum(fnp.floor_divide(
        x, 2.0)))(np.array([3.0, -1.5]))), [0.0, 0.0])
# ---------------------------------------------------------------------------------------
# JAX's rules where the oracle table (tests/oracle/test_oracle_numpy.py) found them missing;
# expected values from the definitions, so these run without jax installed

@pytest.fixture
def x64():
    ft.config.update("jax_enable_x64", True)
    yield
    ft.config.update("jax_enable_x64", False)


@pytest.mark.usefixtures("x32")
def test_result_type_is_a_dtype_and_takes_dtypes():
    assert fnp.result_type(np.float32, np.int32) == np.float32
    assert fnp.result_type(np.uint32, np.int32) == np.int32          # int64, canonical x32
    assert fnp.result_type(np.ones(2, np.float32), 2) == np.float32  # the scalar is weak
    assert fnp.result_type(1, 2.0) == np.float32
    assert fnp.result_type(np.int8, 1) == np.int8


def test_result_type_x64(x64):
    assert fnp.result_type(np.uint32, np.int32) == np.int64
    assert fnp.result_type(1, 2.0) == np.float64


@pytest.mark.usefixtures("x32")
def test_rounding_integers():
    i = np.array([-2, 0, 3], np.int32)
    for f in (fnp.floor, fnp.ceil, fnp.trunc):
        assert f(i).dtype == np.int32 and np.array_equal(f(i), i)
    assert fnp.rint(i).dtype == np.float32 and fnp.round(i).dtype == np.int32
    assert fnp.floor(np.array([True])).dtype == np.bool_


def test_cbrt_derivative_at_zero_is_infinite():
    g = ft.grad(lambda x: fnp.sum(fnp.cbrt(x)))(np.array([-8.0, 0.0, 27.0]))
    np.testing.assert_allclose(g, [1 / 12, np.inf, 1 / 27])
    np.testing.assert_allclose(fnp.cbrt(np.array([-8.0, 27.0])), [-2.0, 3.0])


def test_fmax_fmin_ignore_nan_and_send_ties_to_the_second():
    a, b = np.array([np.nan, 1.0, 2.0, np.nan]), np.array([1.0, np.nan, 2.0, np.nan])
    np.testing.assert_array_equal(fnp.fmax(a, b), [1.0, 1.0, 2.0, np.nan])
    np.testing.assert_array_equal(fnp.fmin(a, b), [1.0, 1.0, 2.0, np.nan])
    ga, gb = ft.grad(lambda x, y: fnp.sum(fnp.fmax(x, y)), argnums=(0, 1))(
        np.array([1.0, 3.0]), np.array([1.0, 2.0]))
    np.testing.assert_array_equal(ga, [0.0, 1.0])
    np.testing.assert_array_equal(gb, [1.0, 0.0])


def test_clip_takes_min_and_max():
    x = np.array([-2.0, 0.5, 3.0])
    np.testing.assert_array_equal(fnp.clip(x, min=0.0), [0.0, 0.5, 3.0])
    np.testing.assert_array_equal(fnp.clip(x, max=1.0), [-2.0, 0.5, 1.0])
    np.testing.assert_array_equal(fnp.clip(x, -1, 1), [-1.0, 0.5, 1.0])
    np.testing.assert_array_equal(fnp.clip(x, a_min=-1, a_max=1), [-1.0, 0.5, 1.0])


def test_floating_functions_of_integers_compute_in_float32(x64):
    """jax.numpy: integers up to 32 bits give float32 also under x64; int64 the default."""
    i32, i64 = np.arange(3, dtype=np.int32), np.arange(3, dtype=np.int64)
    assert fnp.sin(i32).dtype == np.float32 and fnp.sin(i64).dtype == np.float64
    assert fnp.true_divide(i32, 2).dtype == np.float32
    assert fnp.mean(i32).dtype == np.float32 and fnp.mean(i64).dtype == np.float64
    assert fnp.exp(1).dtype == np.float64                  # a Python int: the default float


def test_sum_and_prod_promote_integers(x64):
    assert fnp.sum(np.arange(3, dtype=np.int32)).dtype == np.int64
    assert fnp.sum(np.arange(3, dtype=np.uint8)).dtype == np.uint64
    assert fnp.prod(np.array([True, False])).dtype == np.int64
    assert fnp.sum(np.arange(3, dtype=np.int8), promote_integers=False).dtype == np.int8
    assert fnp.argmax(np.arange(3.0)).dtype == np.int64    # the default integer
    assert fnp.argsort(np.arange(3.0)).dtype == np.int64


def test_reductions_where_and_initial():
    x = np.array([[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]])
    w = x > 0
    assert fnp.sum(x, where=w) == 13.0
    assert fnp.prod(x, where=w) == 60.0
    np.testing.assert_allclose(fnp.mean(x, axis=1, where=w), [2.0, 4.5])
    np.testing.assert_allclose(fnp.var(x, axis=1, where=w), [1.0, 0.25])
    np.testing.assert_allclose(fnp.std(x, axis=1, where=w), [1.0, 0.5])
    assert fnp.max(x, where=~w, initial=-10.0) == -2.0
    assert fnp.min(x, initial=-7.0) == -7.0 and fnp.max(x, initial=9.0) == 9.0
    assert fnp.sum(x, initial=1.0) == 6.0 and fnp.prod(x, where=w, initial=0.5) == 30.0
    assert not bool(fnp.all(w)) and bool(fnp.all(w, where=w))
    assert not bool(fnp.any(w, where=~w))
    with pytest.raises(ValueError, match="initial"):
        fnp.max(x, where=w)
    g = ft.grad(lambda x: fnp.sum(x, where=w))(x)
    np.testing.assert_array_equal(g, w.astype(float))


@pytest.mark.usefixtures("x32")
def test_bool_arithmetic_is_logical():
    a, b = np.array([True, True, False]), np.array([True, False, False])
    np.testing.assert_array_equal(fnp.add(a, b), [True, True, False])
    np.testing.assert_array_equal(fnp.multiply(a, b), [True, False, False])
    np.testing.assert_array_equal(ft.jit(lambda a, b: a * b + a)(a, b), [True, True, False])
    assert fnp.add(a, 1).dtype == np.int32                 # a weak int lifts bool to int32
    np.testing.assert_array_equal(fnp.cumprod(a), [1, 1, 0])


def test_axes_out_of_bounds_raise():
    x = np.zeros((2, 3))
    for f in (lambda: fnp.swapaxes(x, 0, 2), lambda: fnp.moveaxis(x, 2, 0),
              lambda: fnp.roll(x, 1, axis=2), lambda: fnp.rot90(x, axes=(0, 2)),
              lambda: fnp.concatenate([x, x], axis=2), lambda: fnp.expand_dims(x, 3),
              lambda: fnp.take(x, np.array([0]), axis=-3), lambda: fnp.sum(x, axis=2),
              lambda: fnp.diagonal(x, axis1=0, axis2=2)):
        with pytest.raises(ft.AxisError, match="out of bounds"):
            f()
    assert issubclass(ft.AxisError, IndexError) and issubclass(ft.AxisError, ValueError)
    with pytest.raises(ValueError, match="same number of dimensions"):
        fnp.take_along_axis(x, np.zeros(2, np.int32), axis=0)


def test_take_modes():
    x = np.array([1.0, 2.0, 3.0, 4.0])
    i = np.array([5, -1, -9, 2])
    np.testing.assert_array_equal(fnp.take(x, i), [np.nan, 4.0, np.nan, 3.0])
    np.testing.assert_array_equal(fnp.take(x, i, mode="clip"), [4.0, 1.0, 1.0, 3.0])
    np.testing.assert_array_equal(fnp.take(x, i, mode="wrap"), [2.0, 4.0, 4.0, 3.0])
    np.testing.assert_array_equal(fnp.take(x, i, fill_value=0.0), [0.0, 4.0, 0.0, 3.0])
    assert fnp.take(np.arange(3, dtype=np.int32), np.array([7]))[0] == np.iinfo(np.int32).min
    np.testing.assert_array_equal(fnp.take_along_axis(x, np.array([0, 5]), axis=None),
                                  [1.0, np.nan])
    np.testing.assert_array_equal(ft.grad(lambda x: fnp.sum(fnp.take(x, i, mode="clip")))(x),
                                  [2.0, 0.0, 1.0, 1.0])


def test_nonzero_and_argwhere_with_size():
    m = np.array([[0.0, 1.0, 2.0], [3.0, 0.0, 0.0]])
    r, c = fnp.nonzero(m, size=5, fill_value=-1)
    np.testing.assert_array_equal(r, [0, 0, 1, -1, -1])
    np.testing.assert_array_equal(c, [1, 2, 0, -1, -1])
    r, c = ft.jit(lambda m: fnp.nonzero(m, size=2))(m)
    np.testing.assert_array_equal(r, [0, 0])
    np.testing.assert_array_equal(c, [1, 2])
    np.testing.assert_array_equal(fnp.argwhere(m, size=4), [[0, 1], [0, 2], [1, 0], [0, 0]])
    np.testing.assert_array_equal(ft.vmap(lambda v: fnp.nonzero(v, size=2)[0])(m),
                                  [[1, 2], [0, 0]])


def test_pad_modes():
    m = np.arange(12.0).reshape(3, 4)
    for mode in ("edge", "reflect", "symmetric", "wrap"):
        np.testing.assert_array_equal(fnp.pad(m, ((2, 5), (3, 1)), mode=mode),
                                      np.pad(m, ((2, 5), (3, 1)), mode=mode))
    g = ft.grad(lambda x: fnp.sum(fnp.pad(x, 1, mode="edge")))(np.array([1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(g, [2.0, 1.0, 2.0])


def test_small_signatures():
    a = np.arange(24.0).reshape(2, 3, 4)
    np.testing.assert_array_equal(fnp.trace(a, axis1=1, axis2=2), np.trace(a, axis1=1, axis2=2))
    one, two = fnp.atleast_1d(1.0, np.ones(2))
    assert one.shape == (1,) and two.shape == (2,)
    assert [v.shape for v in fnp.atleast_2d(1.0, np.ones(2))] == [(1, 1), (1, 2)]
    assert fnp.tri(2).dtype == np.float32
    with pytest.raises(ft.TracerIntegerConversionError):
        ft.jit(lambda n: fnp.zeros(n))(np.int32(3))
