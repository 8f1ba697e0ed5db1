"""The libraries JAX programs import (functrans.scipy, nn.initializers, example_libraries,
flatten_util, the ft.random distributions) and JAX's x32 canonicalization of NumPy inputs.
Compared against JAX itself where the oracle extra is installed."""
import math
import warnings

import numpy as np
import pytest

import functrans as ft
import functrans.numpy as fnp
from functrans import lax, random
from functrans.example_libraries import optimizers, stax
from functrans.flatten_util import ravel_pytree
from functrans.nn import initializers
from functrans.scipy import linalg as fl
from functrans.scipy import special as fs
from functrans.scipy import stats as fst

F32, F64 = np.float32, np.float64
R = np.random.default_rng(33)
KEY = random.PRNGKey(0)


def _jax():
    return pytest.importorskip("jax", reason="needs the oracle extra: pip install -e '.[oracle]'")


# ---------------------------------------------------------------------------
# x32 canonicalization: NumPy's 64-bit values are 32-bit at every JAX-side entry point

X64 = R.normal(size=(3, 4))                    # float64, as NumPy makes it
I64 = np.arange(4)                             # int64


@pytest.mark.parametrize("name, f", [
    ("fnp eager", lambda: fnp.sin(X64)),
    ("fnp binary", lambda: fnp.add(X64, X64)),
    ("fnp matmul", lambda: fnp.matmul(X64, X64.T)),
    ("fnp sum", lambda: fnp.sum(X64, axis=0)),
    ("fnp int", lambda: fnp.cumsum(I64)),
    ("lax eager", lambda: lax.sin(X64)),
    ("lax binary", lambda: lax.mul(X64, X64)),
    ("asarray", lambda: fnp.asarray(X64)),
    ("array of int64", lambda: fnp.array(I64)),
    ("zeros_like", lambda: fnp.zeros_like(X64)),
    ("jit", lambda: ft.jit(lambda x: x * 2)(X64)),
    ("grad", lambda: ft.grad(lambda x: fnp.sum(x * x))(X64)),
    ("vjp", lambda: ft.vjp(fnp.sin, X64)[1](np.ones((3, 4)))[0]),
    ("jvp", lambda: ft.jvp(fnp.sin, (X64,), (np.ones((3, 4)),))[1]),
    ("vmap", lambda: ft.vmap(fnp.sum)(X64)),
    ("scan", lambda: lax.scan(lambda c, x: (c + x, x), np.zeros(4), X64)[0]),
    ("while_loop", lambda: lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * 2),
                                          (0, X64))[1]),
    ("fori_loop", lambda: lax.fori_loop(0, 2, lambda i, c: c * 2, X64)),
    ("cond", lambda: lax.cond(True, lambda x: x, lambda x: -x, X64)),
])
def test_numpy_64_bit_inputs_become_32_bit(name, f):
    out = f()
    assert np.asarray(out).dtype in (F32, np.int32), name
    with ft.enable_x64(True):                    # x64 on: as given
        assert np.asarray(f()).dtype in (F64, np.int64), name


def test_make_jaxpr_and_eval_shape_canonicalize():
    assert ft.make_jaxpr(fnp.sin)(X64).in_avals[0].dtype == F32
    assert ft.eval_shape(fnp.sin, X64).dtype == F32


def test_scan_carry_of_float32_with_float64_data_is_float32():
    # the GRU: a float32 carry, float64 NumPy weights and data
    w = R.normal(size=(4, 4))

    def step(h, x):
        h = fnp.tanh(h @ w + x)
        return h, h
    h, hs = lax.scan(step, np.zeros((2, 4), F32), R.normal(size=(5, 2, 4)))
    assert h.dtype == F32 and hs.dtype == F32


def test_explicit_float64_warns_as_jax_and_is_float32():
    for f, name in [(lambda: fnp.asarray(X64, dtype=F64), "asarray"),
                    (lambda: fnp.zeros(2, F64), "zeros"),
                    (lambda: fnp.astype(np.ones(2, F32), F64), "astype"),
                    (lambda: random.normal(KEY, (2,), F64), "normal")]:
        with pytest.warns(UserWarning, match=f"Explicitly requested dtype float64 requested in "
                          f"{name} is not available, and will be truncated to dtype float32"):
            assert f().dtype == F32
        with ft.enable_x64(True), warnings.catch_warnings():
            warnings.simplefilter("error")
            assert f().dtype == F64


def test_torch_func_transformations_keep_float64():
    g = ft.func.grad(lambda x: fnp.sum(x * x))(X64)
    assert g.dtype == F64
    assert ft.func.vmap(lambda x: x * 2)(X64).dtype == F64
    assert ft.grad(lambda x: fnp.sum(x * x))(X64).dtype == F32      # the JAX side narrows


def test_jit_fast_path_does_not_reuse_a_float32_program_for_float64_arrays():
    f = ft.jit(lambda x: x + 1)
    a = f(np.ones(3, F32))
    b = f(np.ones(3, F64))           # narrowed, then the same program
    assert a.dtype == b.dtype == F32 and f(np.ones(3, F64)).dtype == F32


def test_integer_promotion_joins_at_int32_with_x64_off():
    assert fnp.add(np.zeros(2, np.int32), np.zeros(2, np.uint32)).dtype == np.int32
    with ft.enable_x64(True):
        assert fnp.add(np.zeros(2, np.int32), np.zeros(2, np.uint32)).dtype == np.int64


# ---------------------------------------------------------------------------
# functrans.scipy against jax.scipy: values, gradients, vmap and jit

X = R.normal(size=(3, 4)).astype(F32)
P = R.uniform(0.05, 0.95, size=(3, 4)).astype(F32)
POS = np.abs(X) + F32(0.5)
A = R.normal(size=(2, 4, 4)).astype(F32)
SPD = A @ A.transpose(0, 2, 1) + 4 * np.eye(4, dtype=F32)
B = R.normal(size=(2, 4, 3)).astype(F32)


def _check(f, g, *args, grad=True, rtol=2e-5, atol=2e-6):
    """f (functrans) and g (jax) agree: eagerly, under jit, under vmap (a stack of two),
    and, with grad, in the gradient of their sum in every argument."""
    jax = _jax()
    want = np.asarray(g(*args))
    got = f(*args)
    assert np.asarray(got).dtype == want.dtype
    np.testing.assert_allclose(np.asarray(got), want, rtol=rtol, atol=atol)
    np.testing.assert_allclose(np.asarray(ft.jit(f)(*args)), want, rtol=rtol, atol=atol)
    stacked = ft.vmap(f)(*[np.stack([a, a]) for a in args])
    np.testing.assert_allclose(np.asarray(stacked)[1], want, rtol=rtol, atol=atol)
    if grad:
        argnums = tuple(range(len(args)))
        gf = ft.grad(lambda *v: fnp.sum(f(*v)), argnums)(*args)
        gj = jax.grad(lambda *v: jax.numpy.sum(g(*v)), argnums)(*args)
        for a, b in zip(gf, gj):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-5)


UNARY = {"erf": X, "erfc": X, "erfinv": 2 * P - 1, "expit": X, "logit": P, "gammaln": POS,
         "digamma": POS, "ndtr": 3 * X, "ndtri": P, "log_ndtr": 4 * X, "i0e": X, "i1e": X,
         "entr": POS}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_special_unary_matches_jax(name):
    js = _jax().scipy.special
    _check(getattr(fs, name), getattr(js, name), UNARY[name])


@pytest.mark.slow          # jax's tracing and compiling dominate
def test_special_binary_and_logsumexp_match_jax():
    jax = _jax()
    js = jax.scipy.special
    _check(fs.xlogy, js.xlogy, X, POS)
    _check(fs.xlog1py, js.xlog1py, X, POS)
    _check(lambda q: fs.zeta(POS + 1.5, q), lambda q: js.zeta(POS + 1.5, q), POS)
    _check(lambda a: fs.logsumexp(a, axis=1), lambda a: js.logsumexp(a, axis=1), X)
    _check(lambda a, b: fs.logsumexp(a, axis=0, b=b, keepdims=True),
           lambda a, b: js.logsumexp(a, axis=0, b=b, keepdims=True), X, POS)
    for got, want in zip(fs.logsumexp(X, axis=1, b=X, return_sign=True),
                         js.logsumexp(X, axis=1, b=X, return_sign=True)):
        np.testing.assert_allclose(got, want, rtol=2e-5)
    np.testing.assert_array_equal(np.isnan(fs.logsumexp(X, axis=1, b=X)),
                                  np.isnan(js.logsumexp(X, axis=1, b=X)))
    assert fs.xlogy(0.0, 0.0) == 0 and float(ft.grad(fs.xlogy, 1)(0.0, 1.0)) == 0
    with pytest.raises(NotImplementedError, match="differentiable in q only"):
        ft.grad(lambda x: fs.zeta(x, 2.0))(3.0)


@pytest.mark.parametrize("fn", ["pdf", "logpdf", "cdf", "logcdf", "sf", "logsf", "ppf"])
def test_stats_norm_matches_jax(fn):
    jst = _jax().scipy.stats
    x = P if fn == "ppf" else X
    _check(lambda a, l, s: getattr(fst.norm, fn)(a, l, s),
           lambda a, l, s: getattr(jst.norm, fn)(a, l, s), x, P, POS)


@pytest.mark.parametrize("fn", ["pdf", "logpdf", "cdf", "sf", "ppf"])
def test_stats_logistic_matches_jax(fn):
    jst = _jax().scipy.stats
    x = P if fn == "ppf" else X
    _check(lambda a, l, s: getattr(fst.logistic, fn)(a, l, s),
           lambda a, l, s: getattr(jst.logistic, fn)(a, l, s), x, P, POS)


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("trans", [0, 1])
def test_solve_triangular_matches_jax(lower, trans):
    jl = _jax().scipy.linalg
    _check(lambda a, b: fl.solve_triangular(a, b, lower=lower, trans=trans),
           lambda a, b: jl.solve_triangular(a, b, lower=lower, trans=trans), SPD, B,
           rtol=1e-4, atol=1e-5)


@pytest.mark.slow          # jax's tracing and compiling dominate
def test_cholesky_solves_and_expm_match_jax():
    jl = _jax().scipy.linalg
    for lower in (True, False):
        _check(lambda a, b: fl.cho_solve(fl.cho_factor(a, lower=lower), b),
               lambda a, b: jl.cho_solve(jl.cho_factor(a, lower=lower), b), SPD, B,
               rtol=1e-4, atol=1e-5)
    _check(fl.expm, jl.expm, A, rtol=1e-4, atol=1e-5)
    _check(fl.expm, jl.expm, 2 * A, rtol=1e-4, atol=1e-4)    # needs squarings
    assert np.isnan(fl.expm(np.full((2, 2), 1e30, F32), max_squarings=4)).all()


# ---------------------------------------------------------------------------
# nn.initializers

def test_initializers_shapes_dtypes_and_variances():
    shape = (200, 300)
    for init, var in [(initializers.glorot_normal(), 2 / 500), (initializers.glorot_uniform(),
                      2 / 500), (initializers.he_normal(), 2 / 200),
                      (initializers.lecun_uniform(), 1 / 200), (initializers.normal(0.5), 0.25),
                      (initializers.variance_scaling(3.0, "fan_out", "normal"), 3 / 300)]:
        w = np.asarray(init(KEY, shape))
        assert w.shape == shape and w.dtype == F32
        assert abs(w.var() / var - 1) < 0.05, (init, w.var(), var)
    u = np.asarray(initializers.uniform(2.0)(KEY, (1000,)))
    assert 0 <= u.min() and u.max() < 2
    t = np.asarray(initializers.truncated_normal(1.0)(KEY, (1000,)))
    assert np.abs(t).max() <= 2
    assert np.all(initializers.zeros(KEY, (2, 3)) == 0)
    assert np.all(initializers.ones(KEY, (2,), F32) == 1)
    assert np.all(initializers.constant(7)(KEY, (2,)) == 7)
    with ft.enable_x64(True):
        assert initializers.glorot_normal(dtype=F64)(KEY, (3, 3)).dtype == F64
    with pytest.raises(ValueError, match="invalid mode"):
        initializers.variance_scaling(1.0, "fan_x", "normal")


def test_orthogonal_and_delta_orthogonal():
    q = np.asarray(initializers.orthogonal(2.0)(KEY, (5, 3)))
    np.testing.assert_allclose(q.T @ q, 4 * np.eye(3), atol=1e-5)
    q = np.asarray(initializers.orthogonal(column_axis=0)(KEY, (3, 2, 4)))
    m = np.moveaxis(q, 0, -1).reshape(-1, 3)
    np.testing.assert_allclose(m.T @ m, np.eye(3), atol=1e-5)
    k = np.asarray(initializers.delta_orthogonal()(KEY, (3, 3, 4, 4)))
    np.testing.assert_allclose(k[1, 1].T @ k[1, 1], np.eye(4), atol=1e-5)
    assert np.all(k[0] == 0) and np.all(k[:, 0] == 0)


def test_nn_keeps_torch_modules_next_to_initializers():
    assert ft.nn.Linear(2, 3).weight.shape == (3, 2)
    assert ft.nn.initializers.lecun_normal()(KEY, (2, 3)).shape == (2, 3)


# ---------------------------------------------------------------------------
# example_libraries.optimizers and stax against JAX's

PARAMS = {"w": R.normal(size=(3, 4)).astype(F32), "b": [R.normal(size=4).astype(F32)]}
DATA = R.normal(size=(5, 3)).astype(F32)


def _loss(np_mod, p):
    return np_mod.sum(np_mod.tanh(DATA @ p["w"] + p["b"][0]) ** 2)


@pytest.mark.filterwarnings("ignore::functrans.RetraceWarning")   # one jit per case
@pytest.mark.parametrize("name, args", [
    ("sgd", (0.1,)), ("momentum", (0.1, 0.9)), ("nesterov", (0.1, 0.9)), ("adagrad", (0.1,)),
    ("rmsprop", (0.05,)), ("rmsprop_momentum", (0.05,)), ("adam", (0.05,)),
    ("adamax", (0.05,)), ("adam", ("exponential_decay", 0.1, 2, 0.5)),
    ("sgd", ("polynomial_decay", 0.1, 3, 0.01)), ("sgd", ("inverse_time_decay", 0.1, 2, 0.5, True)),
    ("sgd", ("piecewise_constant", [1, 3], [0.1, 0.05, 0.01]))])
def test_optimizers_match_jax(name, args):
    jax = _jax()
    from jax.example_libraries import optimizers as jo
    if isinstance(args[0], str):
        fargs, jargs = (getattr(optimizers, args[0])(*args[1:]),), (getattr(jo, args[0])(*args[1:]),)
    else:
        fargs = jargs = args
    fi, fu, fg = getattr(optimizers, name)(*fargs)
    ji, ju, jg = getattr(jo, name)(*jargs)
    fstep = ft.jit(lambda i, s: fu(i, ft.grad(lambda p: _loss(fnp, p))(fg(s)), s))
    jstep = jax.jit(lambda i, s: ju(i, jax.grad(lambda p: _loss(jax.numpy, p))(jg(s)), s))
    fs_, js_ = fi(PARAMS), ji(PARAMS)
    for i in range(4):
        fs_, js_ = fstep(i, fs_), jstep(i, js_)
    for a, b in zip(ft.tree_leaves(fg(fs_)), jax.tree_util.tree_leaves(jg(js_))):
        assert np.asarray(a).dtype == F32
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-5, atol=2e-6)


def test_optimizer_state_packs_and_utilities():
    init, update, get_params = optimizers.momentum(0.1, 0.9)
    state = init(PARAMS)
    marked = optimizers.unpack_optimizer_state(state)
    assert isinstance(marked["w"], optimizers.JoinPoint)
    again = optimizers.pack_optimizer_state(marked)
    assert all(np.array_equal(a, b) for a, b in zip(ft.tree_leaves(again), ft.tree_leaves(state)))
    norm = math.sqrt(sum(float(np.sum(np.square(x))) for x in ft.tree_leaves(PARAMS)))
    assert float(optimizers.l2_norm(PARAMS)) == pytest.approx(norm, rel=1e-6)
    clipped = optimizers.clip_grads(PARAMS, 1.0)
    assert float(optimizers.l2_norm(clipped)) == pytest.approx(1.0, rel=1e-5)
    assert optimizers.make_schedule(0.5)(10) == 0.5
    with pytest.raises(TypeError, match="make_schedule"):
        optimizers.make_schedule(np.ones(2))
    with pytest.raises(TypeError, match="tree structure"):
        update(0, {"w": PARAMS["w"]}, state)


def _stax_layers(lib, mode):
    return [lib.Conv(4, (3, 3), padding="SAME"), lib.Relu, lib.MaxPool((2, 2), (2, 2)),
            lib.BatchNorm(), lib.ConvTranspose(3, (3, 3), (2, 2), padding="SAME"),
            lib.AvgPool((3, 3), (1, 1), "SAME"), lib.SumPool((2, 2)), lib.Flatten,
            lib.FanOut(2), lib.parallel(lib.Dense(5), lib.Dense(5)), lib.FanInSum,
            lib.Dropout(0.9, mode=mode), lib.Gelu, lib.Dense(3), lib.LogSoftmax]


@pytest.mark.slow          # jax's tracing and compiling dominate
def test_stax_network_matches_jax():
    jax = _jax()
    from jax.example_libraries import stax as js
    init, apply = stax.serial(*_stax_layers(stax, "test"))
    jinit, japply = js.serial(*_stax_layers(js, "test"))
    shape, params = init(KEY, (2, 8, 8, 3))
    jshape, jparams = jinit(jax.random.PRNGKey(0), (2, 8, 8, 3))
    assert tuple(shape) == tuple(int(d) for d in jshape) == (2, 3)
    assert [np.shape(p) for p in ft.tree_leaves(params)] == \
        [np.shape(p) for p in jax.tree_util.tree_leaves(jparams)]
    x = R.normal(size=(2, 8, 8, 3)).astype(F32)
    np.testing.assert_allclose(apply(jparams, x, rng=KEY),
                               japply(jparams, x, rng=jax.random.PRNGKey(0)), atol=2e-6)
    gf = ft.grad(lambda p: fnp.sum(apply(p, x, rng=KEY)[:, 0]))(jparams)
    gj = jax.grad(lambda p: jax.numpy.sum(japply(p, x, rng=jax.random.PRNGKey(0))[:, 0]))(jparams)
    for a, b in zip(ft.tree_leaves(gf), jax.tree_util.tree_leaves(gj)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=2e-5)


def test_stax_dropout_and_shape_dependent():
    init, apply = stax.Dropout(0.5)
    _, params = init(KEY, (1000,))
    out = np.asarray(apply(params, np.ones(1000, F32), rng=KEY))
    assert set(np.unique(out)) <= {0.0, 2.0} and 400 < (out > 0).sum() < 600
    with pytest.raises(ValueError, match="requires apply_fun to be called with a PRNG key"):
        apply(params, np.ones(3, F32))
    init, apply = stax.shape_dependent(lambda s: stax.Dense(s[-1] * 2))
    shape, params = init(KEY, (4, 3))
    assert shape == (4, 6) and apply(params, np.ones((4, 3), F32)).shape == (4, 6)
    init, apply = stax.serial(stax.FanOut(2), stax.parallel(stax.Identity, stax.Tanh),
                              stax.FanInConcat())
    assert init(KEY, (2, 3))[0] == (2, 6)


# ---------------------------------------------------------------------------
# flatten_util.ravel_pytree

def test_ravel_pytree_round_trip_dtypes_and_gradient():
    tree = {"a": np.ones((2, 3), F32), "b": (np.arange(3, dtype=np.int32), np.zeros((), F32))}
    flat, unravel = ravel_pytree(tree)
    assert flat.shape == (10,) and flat.dtype == F32
    back = unravel(flat)
    assert back["b"][0].dtype == np.int32 and back["a"].shape == (2, 3)
    g = ft.grad(lambda v: fnp.sum(unravel(v)["a"] ** 2))(flat)
    np.testing.assert_allclose(g[:6], 2.0)
    np.testing.assert_allclose(g[6:], 0.0)
    with pytest.raises(ValueError, match=r"expected an array of shape \(10,\)"):
        unravel(np.ones(3, F32))
    empty, unravel_empty = ravel_pytree({})
    assert empty.shape == (0,) and unravel_empty(empty) == {}


# ---------------------------------------------------------------------------
# ft.random distributions: moments and Kolmogorov-Smirnov distances, fixed seeds

N = 20000


def _ks(samples, cdf):
    """The Kolmogorov-Smirnov distance of the samples' empirical CDF from cdf."""
    x = np.sort(np.asarray(samples, F64).ravel())
    c = cdf(x)
    n = len(x)
    return max(np.max(np.arange(1, n + 1) / n - c), np.max(c - np.arange(n) / n))


KS_LIMIT = 1.63 / math.sqrt(N)            # the 1% critical value


def _phi(x):
    return 0.5 * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


@pytest.mark.parametrize("name, sample, cdf", [
    ("exponential", lambda: random.exponential(KEY, (N,)), lambda x: 1 - np.exp(-x)),
    ("laplace", lambda: random.laplace(KEY, (N,)),
     lambda x: np.where(x < 0, 0.5 * np.exp(x), 1 - 0.5 * np.exp(-x))),
    ("logistic", lambda: random.logistic(KEY, (N,)), lambda x: 1 / (1 + np.exp(-x))),
    ("cauchy", lambda: random.cauchy(KEY, (N,)), lambda x: 0.5 + np.arctan(x) / np.pi),
    ("truncated_normal", lambda: random.truncated_normal(KEY, -1.0, 2.0, (N,)),
     lambda x: (_phi(x) - _phi(-1.0)) / (_phi(2.0) - _phi(-1.0))),
    ("gamma(1)", lambda: random.gamma(KEY, 1.0, (N,)), lambda x: 1 - np.exp(-x)),
    ("beta(1, 1)", lambda: random.beta(KEY, 1.0, 1.0, (N,)), lambda x: x),
])
def test_distributions_pass_a_ks_test(name, sample, cdf):
    s = sample()
    assert np.asarray(s).dtype == F32
    assert _ks(s, cdf) < KS_LIMIT, name


@pytest.mark.parametrize("name, sample, mean, var", [
    ("gamma(0.3)", lambda: random.gamma(KEY, 0.3, (N,)), 0.3, 0.3),
    ("gamma(4.5)", lambda: random.gamma(KEY, 4.5, (N,)), 4.5, 4.5),
    ("loggamma(2)", lambda: fnp.exp(random.loggamma(KEY, 2.0, (N,))), 2.0, 2.0),
    ("beta(2, 3)", lambda: random.beta(KEY, 2.0, 3.0, (N,)), 0.4, 0.04),
    ("t(5)", lambda: random.t(KEY, 5.0, (N,)), 0.0, 5 / 3),
    ("poisson(3)", lambda: random.poisson(KEY, 3.0, (N,)), 3.0, 3.0),
    ("poisson(40)", lambda: random.poisson(KEY, 40.0, (N,)), 40.0, 40.0),
])
def test_distributions_have_their_moments(name, sample, mean, var):
    s = np.asarray(sample(), F64)
    assert abs(s.mean() - mean) < 4 * math.sqrt(var / N) + 1e-3, (name, s.mean())
    assert abs(s.var() / var - 1) < 0.1, (name, s.var())


def test_dirichlet_multivariate_normal_and_keys():
    d = np.asarray(random.dirichlet(KEY, np.array([1.0, 2.0, 3.0]), (N,)))
    assert d.shape == (N, 3) and d.dtype == F32
    np.testing.assert_allclose(d.sum(1), 1, rtol=1e-5)
    np.testing.assert_allclose(d.mean(0), [1 / 6, 2 / 6, 3 / 6], atol=0.01)
    cov = np.array([[2.0, 0.5], [0.5, 1.0]])
    for method in ("cholesky", "eigh", "svd"):
        mv = np.asarray(random.multivariate_normal(KEY, np.ones(2), cov, (N,), method=method))
        assert mv.dtype == F32
        np.testing.assert_allclose(np.cov(mv.T), cov, atol=0.06)
        np.testing.assert_allclose(mv.mean(0), 1, atol=0.03)
    np.testing.assert_array_equal(random.wrap_key_data(random.key_data(KEY)), KEY)
    assert random.poisson(KEY, np.array([0.0, 2.0])).dtype == np.int32


def test_gamma_under_jit_vmap_and_its_derivative_error():
    g = ft.jit(lambda k, a: random.gamma(k, a, (4,)))(KEY, 2.0)
    assert g.shape == (4,) and np.all(np.asarray(g) > 0)
    assert ft.vmap(lambda a: random.gamma(KEY, a))(np.array([0.5, 1.0, 2.0], F32)).shape == (3,)
    with pytest.raises(NotImplementedError, match="implicit reparameterization"):
        ft.grad(lambda a: fnp.sum(random.gamma(KEY, a, (3,))))(2.0)
    # a constant shape parameter: the samples are constants, differentiating around them works
    assert float(ft.grad(lambda x: fnp.sum(x * random.gamma(KEY, 2.0, (3,))))(1.0)) > 0
    # truncated_normal is differentiable in its bounds (inverse CDF)
    assert np.isfinite(float(ft.grad(lambda lo: fnp.sum(
        random.truncated_normal(KEY, lo, 2.0, (3,))))(-1.0)))
