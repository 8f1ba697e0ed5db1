"""JAX programs run after renaming the import (issue 15): jit's static_argnames, eval_shape,
ft.tree, lax.map / dynamic_slice / dynamic_update_slice with JAX's signatures, debug.print.
Each is checked against JAX's documented semantics (values, defaults, error texts)."""
from __future__ import annotations

import numpy as np
import pytest

import functrans as ft
import functrans.numpy as fnp


# ---------------------------------------------------------------------------
# jit(static_argnames=...)

def test_static_argnames_by_keyword_and_by_position():
    f = ft.jit(lambda x, n: x ** n, static_argnames="n")
    x = np.full(3, 2.0)
    np.testing.assert_allclose(f(x, n=3), x ** 3)
    np.testing.assert_allclose(f(x, 2), x ** 2)       # argnums inferred from the name
    assert f.static_argnums == (1,) and f.static_argnames == ("n",)


def test_static_argnums_infer_names_and_keyword_only_names():
    def g(x, n, *, mode="mul"):
        return x * n if mode == "mul" else x + n
    x = np.ones(2)
    gj = ft.jit(g, static_argnums=1)                  # names inferred: n passed by keyword
    assert gj.static_argnames == ("n",)
    np.testing.assert_allclose(gj(x, n=5), 5 * x)
    hj = ft.jit(g, static_argnames=("n", "mode"))
    np.testing.assert_allclose(hj(x, 3, mode="add"), x + 3)
    np.testing.assert_allclose(hj(x, n=4), 4 * x)
    hj(x, n=4)
    assert hj.cache_info().misses == 2
    hj(x, n=5)
    assert "static argument 'n' changed value: 4 -> 5" in hj.trace_reasons[2]


def test_static_argnames_errors_are_jaxs():
    def g(x, n, /, m):
        return x
    with pytest.raises(ValueError, match=r"Jitted function has invalid argnames \{'z'\} in "
                       r"static_argnames\. Function does not take these args\."):
        ft.jit(g, static_argnames="z")
    with pytest.raises(ValueError, match="These are positional-only"):
        ft.jit(g, static_argnames="n")
    with pytest.raises(ValueError, match=r"Jitted function has static_argnums=\(3,\), but only "
                       r"accepts 3 positional arguments\."):
        ft.jit(g, static_argnums=3)
    ft.jit(lambda *a: a[0], static_argnums=7)        # *args: any position is valid
    ft.jit(lambda x, **kw: x, static_argnames="anything")
    f = ft.jit(lambda x, n: x * len(n), static_argnames="n")
    with pytest.raises(ValueError, match=r"Non-hashable static arguments are not supported, "
                       r"as this can lead to unexpected cache-misses\. Static argument \(name "
                       r"'n'\) of type <class 'list'> for function <lambda> is non-hashable\."):
        f(np.ones(2), n=[1, 2])
    with pytest.raises(TypeError, match="not hashable"):
        ft.jit(lambda x, n: x, static_argnums=1)(np.ones(2), [1])


def test_static_argnames_under_transformations():
    f = ft.jit(lambda x, k, mode: fnp.sum(x ** k) if mode == "pow" else fnp.sum(x),
               static_argnames=("k", "mode"))
    x = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(ft.grad(lambda x: f(x, k=3, mode="pow"))(x), 3 * x ** 2)
    np.testing.assert_allclose(ft.vmap(lambda r: f(r, k=2, mode="pow"))(np.stack([x, x])),
                               [14.0, 14.0])


# ---------------------------------------------------------------------------
# eval_shape

def test_eval_shape_returns_shape_dtype_structs():
    def f(x, y=None):
        return {"mm": x @ y, "s": fnp.sum(x), "i": fnp.argmax(x, axis=1)}
    out = ft.eval_shape(f, ft.ShapeDtypeStruct((3, 4), np.float32), y=np.ones((4, 5), np.float32))
    assert out["mm"] == ft.ShapeDtypeStruct((3, 5), np.float32)
    assert out["s"].shape == () and out["s"].dtype == np.float32
    assert out["i"].shape == (3,) and out["i"].ndim == 1 and out["mm"].size == 15


# ---------------------------------------------------------------------------
# ft.tree

def test_tree_module_is_jax_tree():
    t = {"b": (3, 4), "a": [1, 2]}
    assert ft.tree.leaves(t) == [1, 2, 3, 4]                       # dicts by sorted key
    assert ft.tree.map(lambda v, w: v * w, t, t) == {"a": [1, 4], "b": (9, 16)}
    leaves, td = ft.tree.flatten(t)
    assert ft.tree.unflatten(td, [v + 1 for v in leaves]) == {"a": [2, 3], "b": (4, 5)}
    assert ft.tree.structure(t) == td
    assert ft.tree.reduce(lambda a, b: a + b, t) == 10
    assert ft.tree.reduce(lambda a, b: a + b, t, 5) == 15
    assert ft.tree.all(t) and not ft.tree.all([1, 0])
    assert ft.tree.map(lambda v: v, [None, 1]) == [None, 1]
    assert ft.tree.leaves([1, (2, 3)], is_leaf=lambda v: isinstance(v, tuple)) == [1, (2, 3)]


def test_tree_transpose():
    outer, inner = ft.tree.structure([0, 0, 0]), ft.tree.structure((0, 0))
    assert ft.tree.transpose(outer, inner, [(1, 2), (3, 4), (5, 6)]) == ([1, 3, 5], [2, 4, 6])
    with pytest.raises(TypeError, match="Mismatch"):
        ft.tree.transpose(outer, inner, [(1, 2), (3, 4)])


# ---------------------------------------------------------------------------
# lax.map, dynamic_slice, dynamic_update_slice

@pytest.mark.parametrize("batch_size", [None, 1, 2, 5, 7])
def test_lax_map_matches_a_python_loop(batch_size):
    xs = {"a": np.arange(10.0).reshape(5, 2), "b": np.arange(5.0)}

    def f(d):
        return {"s": fnp.sum(d["a"]) * d["b"], "r": d["a"] * 2}
    ys = ft.lax.map(f, xs, batch_size=batch_size)
    np.testing.assert_allclose(ys["s"], [np.sum(r) * b for r, b in zip(xs["a"], xs["b"])])
    np.testing.assert_allclose(ys["r"], xs["a"] * 2)
    jitted = ft.jit(lambda xs: ft.lax.map(f, xs, batch_size=batch_size)["s"])(xs)
    np.testing.assert_allclose(jitted, ys["s"])
    g = ft.grad(lambda a: fnp.sum(ft.lax.map(lambda r: fnp.sin(r) ** 2, a,
                                             batch_size=batch_size)))(xs["a"])
    np.testing.assert_allclose(g, np.sin(2 * xs["a"]), rtol=1e-12)


def test_dynamic_slice_has_jaxs_signature():
    a = np.arange(20.0).reshape(4, 5)
    np.testing.assert_array_equal(ft.lax.dynamic_slice(a, (1, 2), (2, 3)), a[1:3, 2:5])
    np.testing.assert_array_equal(ft.lax.dynamic_slice(a, (1, -2), (2, 2)), a[1:3, 3:5])
    np.testing.assert_array_equal(ft.lax.dynamic_slice(a, np.array([3, 4]), (2, 2)),
                                  a[2:4, 3:5])                      # clamped to fit, as XLA
    traced = ft.jit(lambda a, i: ft.lax.dynamic_slice(a, (i, 0), (2, 5)))
    np.testing.assert_array_equal(traced(a, np.int32(-2)), a[2:4])  # negative: from the end
    with pytest.raises(ValueError, match=r"Length of slice indices must match number of "
                       r"operand dimensions \(1 vs \(4, 5\)\)"):
        ft.lax.dynamic_slice(a, (1,), (2,))
    g = ft.grad(lambda a: fnp.sum(ft.lax.dynamic_slice(a, (1, 1), (2, 2)) ** 2))(a)
    want = np.zeros_like(a)
    want[1:3, 1:3] = 2 * a[1:3, 1:3]
    np.testing.assert_allclose(g, want)


def test_dynamic_update_slice_has_jaxs_signature():
    a = np.arange(20.0).reshape(4, 5)
    out = ft.lax.dynamic_update_slice(a, np.zeros((2, 2)), (1, -1))
    want = a.copy()
    want[1:3, 3:5] = 0                                              # -1 -> 4, clamped to 3
    np.testing.assert_array_equal(out, want)
    f = ft.jit(lambda a, u, i: ft.lax.dynamic_update_slice(a, u, (i, np.int32(0))))
    want = a.copy()
    want[2] = 7
    np.testing.assert_array_equal(f(a, np.full((1, 5), 7.0), np.int32(2)), want)


def test_lax_functions_take_jaxs_positional_and_keyword_parameters():
    """Issue 33: every ft.lax function takes jax.lax's parameters, positionally or by
    name (the shape of reshape, the dtype of convert_element_type, ...)."""
    lax = ft.lax
    x = np.arange(6.0).reshape(2, 3)
    v = np.array([0.5, -1.5, 2.5])
    eq = np.testing.assert_array_equal
    eq(lax.reshape(v, (1, 3)), v[None])
    eq(lax.reshape(x, (3, 2), (1, 0)), x.T.reshape(3, 2))         # dimensions: read order
    eq(lax.reshape(operand=v, new_sizes=(3, 1)), v[:, None])
    out = lax.convert_element_type(v, np.int32)
    assert out.dtype == np.int32 and out.tolist() == [0, -1, 2]
    assert lax.convert_element_type(operand=v, new_dtype=np.float32).dtype == np.float32
    eq(lax.concatenate([v, v], 0), np.concatenate([v, v]))
    eq(lax.transpose(x, (1, 0)), x.T)
    eq(lax.squeeze(x[None], (0,)), x)
    eq(lax.expand_dims(v, (0,)), v[None])
    eq(lax.rev(v, (0,)), v[::-1])
    eq(lax.broadcast_in_dim(v, (2, 3), (1,)), np.stack([v, v]))
    eq(lax.pad(v, np.float64(0), [(1, 0, 1)]), [0.0, 0.5, 0.0, -1.5, 0.0, 2.5])
    eq(lax.slice(x, (0, 1), (2, 3)), x[:, 1:])
    eq(lax.slice(x, (0, 0), (2, 3), (1, 2)), x[:, ::2])
    out = lax.iota(np.int32, 4)
    assert out.dtype == np.int32 and out.tolist() == [0, 1, 2, 3]
    eq(lax.reduce_sum(x, (1,)), x.sum(1))
    eq(lax.reduce_max(x, (0, 1)), 5.0)
    assert lax.argmax(v, 0, np.int32) == 2 and lax.argmin(v, axis=0, index_dtype=np.int32) == 1
    eq(lax.cumsum(v), np.cumsum(v))
    eq(lax.cumsum(v, 0, True), np.cumsum(v[::-1])[::-1])
    eq(lax.round(v), [1.0, -2.0, 3.0])                     # halves away from zero
    eq(lax.round(v, 1), [0.0, -2.0, 2.0])                  # to nearest even
    eq(lax.integer_pow(v, 2), v * v)
    eq(lax.add(x=v, y=v), 2 * v)
    eq(lax.sin(v, accuracy=None), np.sin(v))
    eq(lax.select(v > 0, v, -v), np.abs(v))
    eq(lax.dot_general(x, v, (((1,), (0,)), ((), ()))), x @ v)
    i8 = np.full((2, 3), 100, np.int8)
    out = lax.dot_general(i8, i8, (((1,), (1,)), ((), ())), preferred_element_type=np.int32)
    assert out.dtype == np.int32 and out.tolist() == [[30000] * 2] * 2
    assert lax.stop_gradient({"a": v})["a"].tolist() == v.tolist()     # a pytree
    g = ft.grad(lambda t: lax.reduce_sum(lax.mul(lax.stop_gradient(t), t), (0,)))(v)
    eq(g, v)
    with pytest.raises(TypeError, match=r"sequence of operands"):
        lax.concatenate(v, 0)


def test_lax_shape_errors_are_type_errors_as_jaxs():
    """jax.lax's shape rules raise TypeError; ft.lax's are ShapeErrors (ValueErrors, as
    jax.numpy's) that are TypeErrors too, eagerly and under jit."""
    lax = ft.lax
    for call in (lambda: lax.add(np.ones(3), np.ones(4)),
                 lambda: lax.transpose(np.ones((2, 3)), (0, 0)),
                 lambda: lax.reshape(np.ones(6), (4,)),
                 lambda: ft.jit(lambda x: lax.broadcast_in_dim(x, (2, 4), (1,)))(np.ones(3))):
        with pytest.raises(TypeError) as info:
            call()
        assert isinstance(info.value, (ft.ShapeError, ValueError))
    with pytest.raises(ValueError):        # jax.numpy's stay ValueErrors
        fnp.add(np.ones(3), np.ones(4))


def test_lax_pad_negative_low_and_high_cut():
    """JAX's pad: a negative low/high removes elements from that end, after the interior
    padding; the gradient flows to the elements that stay."""
    x = np.arange(1.0, 5.0)                                   # [1, 2, 3, 4]
    out = ft.lax.pad(x, np.float64(0), [(-1, -2, 1)])         # [1,0,2,0,3,0,4] cut 1 and 2
    np.testing.assert_array_equal(out, [0.0, 2.0, 0.0, 3.0])
    g = ft.grad(lambda v: fnp.sum(ft.lax.pad(v, np.float64(0), [(-1, -2, 1)])))(x)
    np.testing.assert_array_equal(g, [0.0, 1.0, 1.0, 0.0])
    x2 = np.ones((2, 3))
    assert ft.lax.pad(x2, np.float64(5), [(1, -1, 0), (-3, 2, 0)]).shape == (2, 2)


@pytest.mark.parametrize("x64", [False, True])
def test_lax_on_python_scalars_gives_the_default_dtype(x64):
    """lax.mul(2.0, 3.0) is float32 with x64 off (NumPy alone would compute float64), eagerly
    and under jit; an array operand keeps its dtype."""
    saved = ft.config.read("jax_enable_x64")
    ft.config.update("jax_enable_x64", x64)
    try:
        f = np.dtype("float64" if x64 else "float32")
        lax = ft.lax
        for out in (lax.mul(2.0, 3.0), lax.sin(1.0), lax.integer_pow(2.0, 2), lax.round(2.5),
                    lax.select(True, 1.0, 2.0), ft.jit(lambda: lax.add(1.0, 2.0))()):
            assert np.asarray(out).dtype == f
        assert float(lax.mul(2.0, 3.0)) == 6.0 and float(lax.round(2.5)) == 3.0
        assert lax.add(np.ones(2, f), 1.0).dtype == f
    finally:
        ft.config.update("jax_enable_x64", saved)


@pytest.mark.parametrize("x64", [False, True])
def test_python_types_as_dtypes_mean_the_default_dtypes(x64):
    """lax.iota(int, n), convert_element_type(x, float), nn.one_hot's default: int32 and
    float32 with jax_enable_x64 off, 64-bit with it on, as JAX."""
    saved = ft.config.read("jax_enable_x64")
    ft.config.update("jax_enable_x64", x64)
    try:
        bits = 64 if x64 else 32
        assert ft.lax.iota(int, 3).dtype == np.dtype(f"int{bits}")
        assert ft.lax.convert_element_type(np.ones(2, np.int8), float).dtype == \
            np.dtype(f"float{bits}")
        assert ft.lax.argmax(np.ones(2), 0, int).dtype == np.dtype(f"int{bits}")
        assert ft.nn.one_hot(np.array([1, 0]), 3).dtype == np.dtype(f"float{bits}")
        assert ft.lax.convert_element_type(np.ones(2), np.float32).dtype == np.float32
    finally:
        ft.config.update("jax_enable_x64", saved)


# ---------------------------------------------------------------------------
# debug.print

def _f(x):
    ft.debug.print("x = {}", x)
    y = fnp.sin(x)
    ft.debug.print("s={s}", s=fnp.sum(y))
    return fnp.sum(y * 2)


def test_debug_print_eager_and_inside_jit(capsys):
    x = np.array([0.0, 1.0])
    _f(x)
    eager = capsys.readouterr().out
    assert eager == f"x = {x}\ns={np.sum(np.sin(x))}\n"
    jf = ft.jit(_f)
    jf(x)
    jf(x)                                        # at run time, each call, in program order
    assert capsys.readouterr().out == eager * 2
    closed = ft.make_jaxpr(_f)(x)
    assert sum(e.primitive.name == "debug_print" for e in closed.jaxpr.eqns) == 2


def test_debug_print_under_grad_jvp_vmap(capsys):
    x = np.array([0.0, 1.0])
    np.testing.assert_allclose(ft.grad(_f)(x), 2 * np.cos(x))
    assert capsys.readouterr().out == f"x = {x}\ns={np.sum(np.sin(x))}\n"
    ft.jvp(_f, (x,), (x,))
    assert capsys.readouterr().out.startswith("x = ")
    ft.vmap(lambda v: ft.debug.print("v={}", v))(np.arange(3.0))    # once per element, as JAX
    assert capsys.readouterr().out == "v=0.0\nv=1.0\nv=2.0\n"
    ft.vmap(ft.vmap(lambda v, c: ft.debug.print("{} {}", v, c), in_axes=(0, None)),
            in_axes=(0, None))(
        np.arange(4.0).reshape(2, 2), 9.0)
    assert capsys.readouterr().out == "0.0 9.0\n1.0 9.0\n2.0 9.0\n3.0 9.0\n"
    ft.lax.scan(lambda c, v: (ft.debug.print("c={}", c) or c + v, None), 0.0, np.ones(2))
    assert capsys.readouterr().out == "c=0.0\nc=1.0\n"


# ---------------------------------------------------------------------------
# ft.random: JAX's signatures and constructions on the library's Threefry bits

KEY = ft.random.PRNGKey(42)


def test_bernoulli_is_uniform_below_p():
    p = np.array([0.1, 0.5, 0.9], np.float32)
    b = np.asarray(ft.random.bernoulli(KEY, p, (4, 3)))
    u = np.asarray(ft.random.uniform(KEY, (4, 3), np.float32))
    np.testing.assert_array_equal(b, u < p)
    assert np.asarray(ft.random.bernoulli(KEY)).shape == ()


@pytest.mark.usefixtures("x32")
def test_randint_is_jaxs_two_word_modulus():
    r = np.asarray(ft.random.randint(KEY, (6,), -5, 12))
    k1, k2 = ft.random.split(KEY)
    hi = np.asarray(ft.random.random_bits(k1, (6,))).astype(np.uint64)
    lo = np.asarray(ft.random.random_bits(k2, (6,))).astype(np.uint64)
    span = 17
    np.testing.assert_array_equal(r, -5 + (((hi % span) * (2 ** 32 % span) + lo % span) % span)
                                  .astype(np.int64))
    assert r.dtype == np.int32
    assert np.all(np.asarray(ft.random.randint(KEY, (5,), 3, 3)) == 3)      # empty: minval
    full = np.asarray(ft.random.randint(KEY, (4,), -2 ** 31, 2 ** 31))
    np.testing.assert_array_equal(full.view(np.uint32) + np.uint32(2 ** 31),
                                  np.asarray(ft.random.random_bits(k2, (4,))))
    with pytest.warns(UserWarning, match="Explicitly requested dtype int64 requested in "
                      "randint is not available, and will be truncated to dtype int32"):
        s = np.asarray(ft.random.randint(KEY, (20000,), 0, 4, dtype=np.int64))
    assert s.dtype == np.int32          # x64 off: int64 is canonicalized, as JAX's
    np.testing.assert_allclose(np.bincount(s) / 20000, 0.25, atol=0.015)
    with pytest.raises(TypeError, match="randint only accepts integer dtypes, got float32"):
        ft.random.randint(KEY, (2,), 0, 3, dtype=np.float32)


def test_permutation_sorts_by_random_keys():
    perm = np.asarray(ft.random.permutation(KEY, 10))
    sub = ft.random.split(KEY)[1]
    np.testing.assert_array_equal(perm, np.argsort(np.asarray(ft.random.random_bits(sub, (10,))),
                                                   kind="stable"))
    x = np.arange(12).reshape(3, 4)
    same = np.asarray(ft.random.permutation(KEY, x, axis=1))
    np.testing.assert_array_equal(same, x[:, np.asarray(ft.random.permutation(KEY, 4))])
    ind = np.asarray(ft.random.permutation(KEY, x, axis=1, independent=True))
    assert all(sorted(row) == list(r) for row, r in zip(ind, x))
    np.testing.assert_array_equal(ft.random.shuffle(KEY, x, 1), ind)
    np.testing.assert_array_equal(ft.jit(lambda k: ft.random.permutation(k, 10))(KEY), perm)
    with pytest.raises(TypeError, match="x must be an integer or at least 1-dimensional"):
        ft.random.permutation(KEY, 3.0)


def test_choice_semantics_and_errors():
    a = np.arange(10.0) * 10
    c = np.asarray(ft.random.choice(KEY, a, (2, 3)))
    assert c.shape == (2, 3) and set(c.ravel()) <= set(a)
    np.testing.assert_array_equal(ft.random.choice(KEY, 10, (4,)),
                                  ft.random.randint(KEY, (4,), 0, 10))
    no_rep = np.asarray(ft.random.choice(KEY, a, (6,), replace=False))
    assert len(set(no_rep)) == 6
    np.testing.assert_array_equal(no_rep, a[np.asarray(ft.random.permutation(KEY, 10))[:6]])
    m = np.arange(12.0).reshape(3, 4)
    cols = np.asarray(ft.random.choice(KEY, m, (2,), axis=1))
    assert cols.shape == (3, 2) and all(col in m.T.tolist() for col in cols.T.tolist())
    p = np.array([0.2, 0.3, 0.5])
    freq = np.bincount(np.asarray(ft.random.choice(KEY, 3, (20000,), p=p)), minlength=3) / 20000
    np.testing.assert_allclose(freq, p, atol=0.015)
    pick = np.asarray(ft.random.choice(KEY, 4, (3,), replace=False, p=np.array([.1, .2, .3, .4])))
    assert len(set(pick)) == 3
    assert np.asarray(ft.random.choice(KEY, a, (0,))).shape == (0,)
    with pytest.raises(TypeError, match="shape argument of jax.random.choice must be a sequence"):
        ft.random.choice(KEY, 5, 3)
    with pytest.raises(ValueError, match=r"Cannot take a larger sample \(size 6\) than "
                       r"population \(size 5\) when 'replace=False'"):
        ft.random.choice(KEY, 5, (6,), replace=False)
    with pytest.raises(ValueError, match="p must be None or a 1D vector with the same size"):
        ft.random.choice(KEY, 5, (2,), p=np.ones(4) / 4)


def test_categorical_shapes_axis_and_without_replacement():
    probs = np.array([[0.1, 0.9], [0.5, 0.5], [0.8, 0.2]])
    c = np.asarray(ft.random.categorical(KEY, np.log(probs), shape=(20000, 3)))
    np.testing.assert_allclose(c.mean(0), probs[:, 1], atol=0.015)
    c0 = np.asarray(ft.random.categorical(KEY, np.log(probs).T, axis=0, shape=(20000, 3)))
    np.testing.assert_allclose(c0.mean(0), probs[:, 1], atol=0.015)
    nr = np.asarray(ft.random.categorical(KEY, np.zeros((2, 5)), shape=(5, 2), replace=False))
    assert nr.shape == (5, 2) and all(sorted(col) == list(range(5)) for col in nr.T)
    with pytest.raises(ValueError, match=r"Number of samples without replacement \(6\) "
                       r"cannot exceed number of categories \(5\)"):
        ft.random.categorical(KEY, np.zeros((2, 5)), shape=(6, 2), replace=False)


# ---------------------------------------------------------------------------
# type promotion: JAX's published table (docs/type_promotion.rst, generated with x64 on),
# bfloat16 left out (NumPy has no such dtype)

_NODES = "b1 u1 u2 u4 u8 i1 i2 i4 i8 f2 f4 f8 c8 c16 i* f* c*".split()
_TABLE = """
b1  b1 u1 u2 u4 u8 i1 i2 i4 i8 f2 f4 f8 c8 c16 i* f* c*
u1  u1 u1 u2 u4 u8 i2 i2 i4 i8 f2 f4 f8 c8 c16 u1 f* c*
u2  u2 u2 u2 u4 u8 i4 i4 i4 i8 f2 f4 f8 c8 c16 u2 f* c*
u4  u4 u4 u4 u4 u8 i8 i8 i8 i8 f2 f4 f8 c8 c16 u4 f* c*
u8  u8 u8 u8 u8 u8 f* f* f* f* f2 f4 f8 c8 c16 u8 f* c*
i1  i1 i2 i4 i8 f* i1 i2 i4 i8 f2 f4 f8 c8 c16 i1 f* c*
i2  i2 i2 i4 i8 f* i2 i2 i4 i8 f2 f4 f8 c8 c16 i2 f* c*
i4  i4 i4 i4 i8 f* i4 i4 i4 i8 f2 f4 f8 c8 c16 i4 f* c*
i8  i8 i8 i8 i8 f* i8 i8 i8 i8 f2 f4 f8 c8 c16 i8 f* c*
f2  f2 f2 f2 f2 f2 f2 f2 f2 f2 f2 f4 f8 c8 c16 f2 f2 c8
f4  f4 f4 f4 f4 f4 f4 f4 f4 f4 f4 f4 f8 c8 c16 f4 f4 c8
f8  f8 f8 f8 f8 f8 f8 f8 f8 f8 f8 f8 f8 c16 c16 f8 f8 c16
c8  c8 c8 c8 c8 c8 c8 c8 c8 c8 c8 c8 c16 c8 c16 c8 c8 c8
c16 c16 c16 c16 c16 c16 c16 c16 c16 c16 c16 c16 c16 c16 c16 c16 c16 c16
i*  i* u1 u2 u4 u8 i1 i2 i4 i8 f2 f4 f8 c8 c16 i* f* c*
f*  f* f* f* f* f* f* f* f* f* f2 f4 f8 c8 c16 f* f* c*
c*  c* c* c* c* c* c* c* c* c* c8 c8 c16 c8 c16 c* c* c*
"""
_WEAK = {"i*": 1, "f*": 1.0, "c*": 1j}


from functrans.numpy._promotion import _result_type as _lattice  # noqa: E402

pytestmark = pytest.mark.usefixtures("x64")  # float64 references: conftest.x64


_WIDE = {"u8", "i8", "f8", "c16"}


def _operand(node):
    return _WEAK.get(node) if node in _WEAK else np.zeros(2, "bool" if node == "b1" else node)


def _expected(node, x64):
    if node in _WEAK:
        bits = 64 if x64 else 32
        return np.dtype({"i*": f"int{bits}", "f*": f"float{bits}",
                         "c*": f"complex{2 * bits}"}[node]), True
    return np.dtype("bool" if node == "b1" else node), False


@pytest.mark.usefixtures("x32")
@pytest.mark.parametrize("x64", [True, False])
def test_promotion_follows_jaxs_published_table(x64):
    ft.config.update("jax_enable_x64", x64)
    try:
        for line in _TABLE.strip().splitlines():
            row, *cells = line.split()
            for col, want in zip(_NODES, cells):
                a, b = _operand(row), _operand(col)
                if row not in _WEAK and col not in _WEAK:
                    assert fnp.promote_types(a.dtype, b.dtype) == _expected(want, x64)[0]
                if not x64 and (row in _WIDE or col in _WIDE):
                    continue    # 64-bit values are 32-bit before they join (x32, as JAX)
                got = _lattice(a, b)            # (dtype, weak): the lattice on values, whose
                dt, weak = _expected(want, x64)  # 64-bit results are 32-bit with x64 off
                if not x64 and (dt.itemsize == 8 and dt.kind in "iuf" or dt == np.complex128):
                    dt = np.dtype(f"{dt.kind}4") if dt.kind in "iuf" else np.dtype("complex64")
                assert got == (dt, weak), (row, col, got, want)
                if row not in _WEAK and col not in _WEAK:
                    assert fnp.add(a, b).dtype == dt, (row, col)
    finally:
        ft.config.update("jax_enable_x64", False)


def test_promotion_in_operations_traced_and_eager():
    i32 = np.int32(1) * np.ones(3, np.int32)
    assert fnp.add(i32, np.ones(3, np.float32)).dtype == np.float32   # not NumPy's float64
    assert ft.jit(fnp.add)(i32, np.ones(3, np.float32)).dtype == np.float32
    assert fnp.multiply(np.ones(2, np.uint8), np.ones(2, np.int8)).dtype == np.int16
    assert fnp.add(np.ones(2, np.float16), 2.5).dtype == np.float16    # weak scalar
    assert fnp.add(np.ones(2, np.int8), 3).dtype == np.int8
    assert fnp.add(np.ones(2, bool), np.ones(2, np.uint8)).dtype == np.uint8


@pytest.mark.usefixtures("x32")
def test_config_x64_switches_the_default_dtypes_both_ways():
    assert ft.config.jax_enable_x64 is False
    assert fnp.asarray([1.0]).dtype == np.float32 and fnp.zeros(2).dtype == np.float32
    assert fnp.asarray(np.ones(2)).dtype == np.float32     # NumPy float64 is canonicalized
    ft.config.update("jax_enable_x64", True)
    try:
        assert ft.config.jax_enable_x64 and ft.config.read("jax_enable_x64")
        assert fnp.asarray([1.0]).dtype == np.float64 and fnp.asarray(3).dtype == np.int64
        assert fnp.zeros(2).dtype == np.float64 and fnp.arange(3).dtype == np.int64
        assert fnp.linspace(0, 1, 3).dtype == np.float64
        assert ft.jit(lambda x: x * 2.5)(np.ones(2, np.int32)).dtype == np.float64
        assert ft.random.uniform(KEY, (2,)).dtype == np.float64
        assert ft.random.randint(KEY, (2,), 0, 5).dtype == np.int64
    finally:
        ft.config.update("jax_enable_x64", False)
    assert fnp.asarray([1.0]).dtype == np.float32 and fnp.arange(3).dtype == np.int32
    assert ft.jit(lambda x: x * 2.5)(np.ones(2, np.int32)).dtype == np.float32
    with pytest.raises(AttributeError, match="Unrecognized config option: jax_foo"):
        ft.config.update("jax_foo", True)


# ---------------------------------------------------------------------------
# .at and block_until_ready on eager values (eager results are plain NumPy arrays)

def test_at_on_eager_values_is_spelled_fnp_at():
    x = fnp.zeros(5)
    np.testing.assert_array_equal(fnp.at(x)[2].set(7.0), [0, 0, 7, 0, 0])
    np.testing.assert_array_equal(fnp.at(x)[1:3].add(1.0), [0, 1, 1, 0, 0])
    assert np.all(x == 0)                                     # functional: x unchanged
    traced = ft.jit(lambda v: v.at[2].set(7.0))(x)            # traced values have .at
    np.testing.assert_array_equal(traced, fnp.at(x)[2].set(7.0))
    np.testing.assert_array_equal(x.at[2].set(7.0), [0, 0, 7, 0, 0])   # eager Arrays too
    assert type(x.at[2].set(7.0)) is ft.Array


def test_block_until_ready_returns_its_argument():
    tree = {"a": fnp.ones(3), "b": (np.zeros(2),)}
    assert ft.block_until_ready(tree) is tree


def test_disable_jit_runs_the_python_eagerly_and_leaves_the_cache_alone():
    seen = []

    @ft.jit
    def f(x):
        seen.append(type(x).__name__)
        return x * 2

    f(np.ones(2))
    with ft.disable_jit():
        np.testing.assert_array_equal(f(np.ones(2)), [2.0, 2.0])
        with ft.disable_jit(False):
            f(np.ones(3))                      # jit again: traced for the new shape
    f(np.ones(2))                              # cached: not traced again
    assert seen[0] != "ndarray" and seen[1] == "ndarray" and seen[2] != "ndarray"
    assert len(seen) == 3


def test_one_axis_slicing_helpers_match_numpy_indexing():
    x = np.arange(24.0).reshape(2, 3, 4)
    lax = ft.lax
    np.testing.assert_array_equal(lax.slice_in_dim(x, 1, None, 2, -1), x[..., 1::2])
    np.testing.assert_array_equal(lax.index_in_dim(x, -1, 1, False), x[:, -1])
    np.testing.assert_array_equal(lax.index_in_dim(x, 0, 2), x[:, :, :1])
    with pytest.raises(IndexError, match="index 3 is out of bounds for axis 1 with size 3"):
        lax.index_in_dim(x, 3, 1)
    at = ft.jit(lambda i: lax.dynamic_slice_in_dim(x, i, 2, 2))
    np.testing.assert_array_equal(at(np.int32(1)), x[:, :, 1:3])
    np.testing.assert_array_equal(at(np.int32(3)), x[:, :, 2:4])      # clamped to fit
    np.testing.assert_array_equal(lax.dynamic_index_in_dim(x, np.int32(-1), 0, False), x[-1])
    want = x.copy()
    want[:, 1] = 7.0
    np.testing.assert_array_equal(
        lax.dynamic_update_index_in_dim(x, np.full((2, 4), 7.0), np.int32(1), 1), want)
    want = x.copy()
    want[:, :, 2:] = 7.0
    np.testing.assert_array_equal(
        lax.dynamic_update_slice_in_dim(x, np.full((2, 3, 2), 7.0), 2, 2), want)
    g = ft.grad(lambda v: fnp.sum(lax.dynamic_index_in_dim(v, 1, 0, False) ** 2))(x)
    want = np.zeros_like(x)
    want[1] = 2 * x[1]
    np.testing.assert_array_equal(g, want)


# ---------------------------------------------------------------------------
# names JAX programs use (issue 33)

def test_linear_transpose_of_a_linear_function_and_refusal_of_a_nonlinear_one():
    f = lambda x, y: (2 * x + y.sum(), x @ np.arange(9.0).reshape(3, 3))     # noqa: E731
    t = ft.linear_transpose(f, np.ones(3), np.ones(2))
    ct = (np.array([1.0, -2.0, 0.5]), np.array([0.25, 1.0, 3.0]))
    gx, gy = t(ct)
    _, vjp = ft.vjp(f, np.ones(3), np.ones(2))
    wx, wy = vjp(ct)
    np.testing.assert_allclose(gx, wx, rtol=1e-12)
    np.testing.assert_allclose(gy, wy, rtol=1e-12)
    with pytest.raises(NotImplementedError, match="not linear in its inputs"):
        ft.linear_transpose(lambda x: ft.numpy.sin(x), np.ones(3))(np.ones(3))
    with pytest.raises(TypeError, match="does not match"):
        t((np.ones(2), np.ones(3)))


def test_grad_allow_int_gives_float0_and_jvp_takes_float0_tangents():
    g = ft.grad(lambda x, n: (x * n).sum(), argnums=(0, 1), allow_int=True)(
        np.ones(3), np.int32(2))
    np.testing.assert_allclose(g[0], [2.0, 2.0, 2.0])
    assert g[1].dtype == ft.dtypes.float0 and g[1].shape == ()
    out, t = ft.jvp(lambda x, n: x * n, (np.float32(2), np.int32(3)),
                    (np.float32(1), np.zeros((), ft.dtypes.float0)))
    assert (out, t) == (6.0, 3.0)
    with pytest.raises(TypeError, match="float0 is the tangent dtype of integer"):
        ft.jvp(lambda x: x, (np.float32(2),), (np.zeros((), ft.dtypes.float0),))
    with pytest.raises(TypeError, match="grad requires real- or complex-valued inputs"):
        ft.grad(lambda n: n * 2.0)(np.int32(2))


def test_jit_donate_argnames_and_jax_only_options():
    f = ft.jit(lambda x, y: x * 2 + y, donate_argnames="x", keep_unused=True, inline=True)
    assert f.donate_argnums == (0,)
    np.testing.assert_allclose(f(np.ones(3), np.ones(3)), 3.0)
    assert ft.jit(donate_argnames=("y",))(lambda x, y: x + y).donate_argnums == (1,)


def test_named_call_scope_precision_and_platform_dependent():
    with ft.named_scope("block"), ft.default_matmul_precision("float32"):
        inc = ft.named_call(lambda x: x + 1, name="inc")
        assert inc.__name__ == "inc" and ft.jit(inc)(1.0) == 2.0
    with pytest.raises(ValueError, match="unknown value 'double'"):
        with ft.default_matmul_precision("double"):
            pass
    f = lambda x: ft.lax.platform_dependent(x, cpu=lambda v: v * 3, cuda=lambda v: v)  # noqa
    np.testing.assert_allclose(ft.jit(f)(np.ones(2)), 3.0)
    with pytest.raises(NotImplementedError, match="no branch for platform 'cpu'"):
        ft.lax.platform_dependent(1.0, cuda=lambda v: v)
    assert ft.dtypes.canonicalize_dtype(np.float64) in (np.float32, np.float64)


def test_dir_of_random_lists_its_api_only():
    names = dir(ft.random)
    assert "np" not in names and "ew" not in names and "sh" not in names
    assert {"PRNGKey", "split", "uniform", "normal", "categorical"} <= set(names)
    assert all(callable(getattr(ft.random, n)) for n in ft.random.__all__)


def test_array_is_the_type_of_eager_and_traced_values():
    assert isinstance(ft.numpy.ones(3), ft.Array) and isinstance(np.float32(1), ft.Array)
    assert not isinstance(3.0, ft.Array) and not isinstance([1.0], ft.Array)
    seen = []
    ft.grad(lambda x: (seen.append(isinstance(x, ft.Array)) or x).sum())(np.ones(2))
    ft.jit(lambda x: seen.append(isinstance(x, ft.Array)) or x)(np.ones(2))
    assert seen == [True, True]
    with pytest.raises(TypeError, match="cannot be instantiated"):
        ft.Array()


# ---------------------------------------------------------------------------
# names JAX's own api_test.py and lax_control_flow_test.py use (issue 33)

def test_precision_is_accepted_and_checked_by_the_products():
    a, b = np.arange(6.0).reshape(2, 3), np.arange(6.0).reshape(3, 2)
    P = ft.lax.Precision
    assert P("highest") is P.HIGHEST and str(P.HIGH) == "HIGH"
    for out in (fnp.dot(a, b, precision=P.HIGHEST), fnp.matmul(a, b, precision="high"),
                fnp.einsum("ij,jk->ik", a, b, precision=(P.DEFAULT, P.HIGHEST)),
                fnp.tensordot(a, b, 1, precision=P.HIGH), ft.lax.dot(a, b, precision=P.HIGH)):
        np.testing.assert_allclose(out, a @ b)
    assert fnp.dot(a.astype(np.float32), b.astype(np.float32),
                   preferred_element_type=np.float64).dtype == np.float64
    with pytest.raises(ValueError, match="Precision argument must be one of"):
        fnp.dot(a, b, precision="double")
    g = ft.grad(lambda x: fnp.sum(fnp.dot(x, x, precision=P.HIGHEST)))(np.eye(2))
    np.testing.assert_allclose(g, 2 * np.ones((2, 2)))


def test_shape_dtype_struct_len_and_missing_dtype():
    assert len(ft.ShapeDtypeStruct((4, 2), np.float32)) == 4
    with pytest.raises(TypeError, match=r"len\(\) of unsized object"):
        len(ft.ShapeDtypeStruct((), np.float32))
    with pytest.raises(ValueError, match="dtype must be specified"):
        ft.ShapeDtypeStruct((), None)


def test_tree_util_registration_forms_and_key_paths():
    import collections
    import dataclasses
    tu = ft.tree_util

    @tu.register_pytree_node_class
    class Box:
        def __init__(self, v):
            self.v = v

        def tree_flatten(self):
            return [self.v], None

        @classmethod
        def tree_unflatten(cls, aux, children):
            return cls(*children)

    @dataclasses.dataclass
    class Layer:
        w: object
        name: str = dataclasses.field(default="l", metadata=dict(static=True))
    tu.register_dataclass(Layer)

    class Pair:
        def __init__(self, a, b):
            self.a, self.b = a, b
    tu.register_pytree_with_keys(Pair, lambda p: (((tu.GetAttrKey("a"), p.a),
                                                   (tu.GetAttrKey("b"), p.b)), None),
                                 lambda aux, ch: Pair(*ch))
    assert ft.grad(lambda b: b.v * 3.0)(Box(2.0)).v == 3.0
    out = ft.jit(lambda layer: Layer(layer.w * 2, layer.name))(Layer(np.ones(2), "x"))
    assert out.name == "x" and out.w.tolist() == [2.0, 2.0]
    assert tu.tree_leaves(Pair(1.0, 2.0)) == [1.0, 2.0]
    od = collections.OrderedDict([("b", 1.0), ("a", 2.0)])
    assert tu.tree_leaves(od) == [1.0, 2.0]                 # insertion order, as JAX
    assert type(tu.tree_map(lambda v: v, od)) is collections.OrderedDict
    paths = tu.tree_map_with_path(lambda p, v: tu.keystr(p), {"x": [1.0, (2.0, None)]})
    assert paths == {"x": ["['x'][0]", ("['x'][1][0]", None)]}


@pytest.mark.usefixtures("x32")
def test_enable_x64_and_the_errors_module():
    assert ft.enable_x64.value is False
    with ft.enable_x64(True):
        assert ft.enable_x64.value and fnp.ones(1).dtype == np.float64
    assert fnp.ones(1).dtype == np.float32
    assert ft.errors.UnexpectedTracerError is ft.UnexpectedTracerError
    assert ft.errors.TracerBoolConversionError is ft.TracerBoolConversionError
    assert ft.float0 is ft.dtypes.float0


def test_fori_loop_bounds_as_jax_takes_them():
    # floats count by 1 (JAX's trip count int(upper) - int(lower)), even under grad
    assert float(ft.lax.fori_loop(0.0, 3.0, lambda i, c: c + i, 0.0)) == 3.0
    f = lambda x: ft.lax.fori_loop(x, x + 2.0, lambda i, c: c * i, x)  # noqa: E731
    # the bounds are concrete, so the counter is too (as JAX): x * 1 * 2, derivative 2
    np.testing.assert_allclose(ft.grad(f)(np.float32(1.0)), 2.0)
    with pytest.raises(TypeError, match="arguments to fori_loop must have equal types"):
        ft.lax.fori_loop(np.int16(0), np.int32(10), lambda i, c: c, np.float32(7))
    with pytest.raises(ValueError, match="Can only use `unroll` in `fori_loop` if the loop "
                                         "bounds are statically known"):
        ft.jit(lambda n: ft.lax.fori_loop(0, n, lambda i, c: c + 1, 0.0, unroll=3))(5)


@pytest.mark.slow   # walks the whole heap (~14 s in a full run)
def test_checking_leaks_names_a_tracer_that_outlives_its_trace():
    lst = []
    with ft.checking_leaks():
        assert ft.check_tracer_leaks.value
        ft.vmap(lambda x: x)(np.arange(3.0))                       # no false positives
        f = ft.jit(lambda x: x)
        f(3), ft.vmap(f)(np.arange(3)), ft.grad(f)(3.0)
        ft.lax.scan(lambda c, x: (fnp.sin(c), None), 1.0, np.arange(3.0))
        with pytest.raises(ft.UnexpectedTracerError, match=r"^Leaked trace .*ft\.jit of `g`"):
            ft.jit(_leaky(lst))(3)
        with pytest.raises(ft.UnexpectedTracerError, match="Leaked trace"):
            ft.lax.scan(lambda c, x: (lst.append(c) or fnp.sin(c), None), 1.0, np.arange(3.0))
    assert not ft.check_tracer_leaks.value
    ft.jit(_leaky(lst))(4)                                         # off: no check


def _leaky(lst):
    def g(x):
        lst.append(x)
        return x
    return g


@pytest.mark.usefixtures("x32")
def test_concretization_errors_carry_jaxs_sentences():
    cases = [(float, 1.0, r"try using `x\.astype\(float\)`"),
             (int, 1.0, r"(?s)where concrete value is expected.*`x\.astype\(int\)`"),
             (bool, 1.0, r"^Attempted boolean conversion of traced array with shape "
                         r"float32\[\]\.\nAbstract tracer value"),
             (hex, 1, r"The __index__\(\) method was called on traced array with shape int32\[\]")]
    for fn, arg, pattern in cases:
        with pytest.raises(TypeError, match=pattern):
            ft.jit(lambda x: fn(x))(arg)


def test_transformation_errors_use_jaxs_words():
    with pytest.raises(TypeError, match=r"must be tuples or lists; found float and tuple\."):
        ft.jvp(lambda x: x, 1.0, (1.0,))
    with pytest.raises(TypeError, match=r"to jax\.jvp must have the same tree structure"):
        ft.jvp(lambda x: x, (1.0,), ((1.0, 2.0),))
    with pytest.raises(TypeError, match=r"argnums=0 requires at least 1 positional arguments "
                                        r"to be passed by the caller, but got only 0"):
        ft.grad(lambda x, y: x + y)(x=0.0, y=1.0)
    with pytest.raises(TypeError, match=r"Output had shape: \(1,\)\. If the output has a single "
                                        r"element, use output\.reshape\(\(\)\) or output\[0\]"):
        ft.grad(lambda x: fnp.array([x ** 2]))(1.0)
    with pytest.raises(TypeError, match=r"applied to foo was called with 2 arguments"):
        def foo(x):
            return x
        ft.vjp(foo, 1.0)[1](1.0, 2.0)
    with pytest.raises(TypeError, match=r"^Expected a callable value, got 3$"):
        ft.jit(3)

    def gen(x):
        yield x
    with pytest.raises(TypeError, match=r"^Expected a function, got a generator function"):
        ft.jit(gen)
    with pytest.raises(TypeError, match="linear_transpose only supports"):
        ft.linear_transpose(lambda x: 2.0 * x, 1)
    with pytest.raises(TypeError, match="cotangent tree does not match"):
        ft.linear_transpose(lambda x: [x, x], 1.0)(1.0)
    with pytest.raises(TypeError, match="cotangent type does not match"):
        ft.linear_transpose(lambda x: x, 1.0)(1j)
    with pytest.raises(ValueError, match=r"`shape`.*cannot have None\."):
        ft.ShapeDtypeStruct((None, 2), np.int32)


def test_linearize_has_aux_and_vmap_docstring():
    out, lin, aux = ft.linearize(lambda x: (x * 2 - 3, x > 0), 3.5, has_aux=True)
    assert float(out) == 4.0 and float(lin(5.0)) == 10.0 and bool(aux) is True

    def superfun(a):
        """Does things with stuff."""
    assert ft.vmap(superfun).__doc__ == (
        "Vectorized version of superfun. Takes similar arguments as superfun but with "
        "additional array axes over which superfun is mapped.\n\nOriginal documentation:\n\n"
        "Does things with stuff.")


@pytest.mark.usefixtures("x32")
def test_python_types_as_dtype_arguments_are_the_default_dtypes():
    # JAX: dtype=int is the default integer (int32 with x64 off), not NumPy's int64
    for make in (lambda d: fnp.array(0, dtype=d), lambda d: fnp.asarray([1], dtype=d),
                 lambda d: fnp.zeros(2, dtype=d), lambda d: fnp.full(2, 1, dtype=d),
                 lambda d: fnp.arange(2, dtype=d), lambda d: fnp.ones_like(np.ones(2), dtype=d),
                 lambda d: fnp.astype(np.ones(2), d)):
        assert [make(d).dtype for d in (bool, int, float)] == [np.bool_, np.int32, np.float32]
        with ft.enable_x64(True):
            assert make(int).dtype == np.int64 and make(float).dtype == np.float64
    with pytest.warns(UserWarning, match="Explicitly requested dtype float64 requested in "
                      "zeros is not available, and will be truncated to dtype float32"):
        assert fnp.zeros(2, dtype=np.float64).dtype == np.float32     # x64 off, as JAX
    with ft.enable_x64(True):
        assert fnp.zeros(2, dtype=np.float64).dtype == np.float64
