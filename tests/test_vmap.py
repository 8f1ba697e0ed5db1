"""ft.vmap: in_axes/out_axes (ints, None, negative, pytrees), axis_size, nesting,
composition with grad/jvp (per-example gradients), errors, and vmap(f) == loop on a corpus."""
from __future__ import annotations

import numpy as np
import pytest

import functrans as ft
import functrans.numpy as fnp
from functrans import lax
from conftest import assert_close, check_traced

pytestmark = pytest.mark.usefixtures("x64")  # float64 references: conftest.x64

rng = np.random.default_rng(1)


def randn(*shape):
    return rng.standard_normal(shape)


def loop(f, args, in_axes, size):
    """Stack f over the batch the slow way (the reference for vmap)."""
    outs = []
    for b in range(size):
        outs.append(f(*[a if d is None else np.take(a, b, axis=d) for a, d in zip(args, in_axes)]))
    return ft.tree_map(lambda *xs: np.stack(xs), *outs)


# ---------------------------------------------------------------------------
# axes specifications

def test_in_axes_ints_none_and_negative():
    f = lambda a, b: fnp.sin(a) @ b  # noqa: E731
    a, b = randn(5, 3), randn(3, 4)
    for axes, args in [((0, None), (a, b)), ((1, None), (a.T, b)), ((-1, None), (a.T, b)),
                       ((None, 1), (a[0], randn(3, 6, 4))), ((None, -2), (a[0], randn(3, 6, 4)))]:
        size = args[0].shape[axes[0]] if axes[0] is not None else args[1].shape[axes[1]]
        assert_close(ft.vmap(f, in_axes=axes)(*args), loop(f, args, axes, size), rtol=1e-12)
        check_traced(ft.vmap(f, in_axes=axes), *args)


def test_in_axes_as_list_and_single_int_for_every_argument():
    f = lambda a, b: a * b + 1.0  # noqa: E731
    a, b = randn(4, 2), randn(2, 4)
    assert_close(ft.vmap(f, in_axes=[0, 1])(a, b), a * b.T + 1.0)
    assert_close(ft.vmap(f, in_axes=1)(a.T, b), (a * b.T + 1.0))


def test_in_axes_pytrees():
    def f(params, x):
        return {"y": params["w"] @ x + params["b"], "n": fnp.sum(x * x)}
    params = {"w": randn(3, 2), "b": randn(3)}
    xs = randn(6, 2)
    out = ft.vmap(f, in_axes=({"w": None, "b": None}, 0))(params, xs)
    assert_close(out["y"], xs @ params["w"].T + params["b"], rtol=1e-12)
    assert_close(out["n"], np.sum(xs * xs, axis=1), rtol=1e-12)
    # a prefix: None for the whole params dict; per-leaf axes inside a tuple
    out2 = ft.vmap(f, in_axes=(None, 0))(params, xs)
    assert_close(out2["y"], out["y"])
    bs = randn(6, 3)
    g = lambda p, x: f({"w": p[0], "b": p[1]}, x)["y"]  # noqa: E731
    got = ft.vmap(g, in_axes=((None, 0), 0))((params["w"], bs), xs)
    assert_close(got, xs @ params["w"].T + bs, rtol=1e-12)


def test_out_axes_ints_negative_none_and_pytrees():
    f = lambda x: (x * 2.0, fnp.sum(x))  # noqa: E731
    xs = randn(5, 3)
    a, s = ft.vmap(f, out_axes=1)(xs)
    assert a.shape == (3, 5) and s.shape == (5,)
    assert_close(a, (xs * 2.0).T)
    a, s = ft.vmap(f, out_axes=(-1, 0))(xs)
    assert_close(a, (xs * 2.0).T)
    g = lambda x, c: (x + c, c * 3.0)  # noqa: E731
    y, c3 = ft.vmap(g, in_axes=(0, None), out_axes=(0, None))(xs, np.float64(2.0))
    assert_close(y, xs + 2.0)
    assert np.shape(c3) == () and float(c3) == 6.0
    out = ft.vmap(lambda x: {"a": x, "b": (x, x)}, out_axes={"a": 0, "b": (1, 0)})(xs)
    assert out["a"].shape == (5, 3) and out["b"][0].shape == (3, 5) and out["b"][1].shape == (5, 3)


def test_unbatched_output_is_broadcast_and_axis_size():
    xs = randn(4, 2)
    out = ft.vmap(lambda x: np.float64(7.0))(xs)
    assert out.shape == (4,) and np.all(out == 7.0)
    out = ft.vmap(lambda c: c * 2.0, in_axes=None, axis_size=3)(np.float64(1.5))
    assert out.shape == (3,) and np.all(out == 3.0)
    out = ft.vmap(lambda x, c: x + c, in_axes=(0, None), axis_size=4)(xs, 1.0)
    assert_close(out, xs + 1.0)


def test_nested_vmap():
    a, b = randn(3), randn(4)
    outer = ft.vmap(ft.vmap(lambda x, y: x * y, in_axes=(None, 0)), in_axes=(0, None))(a, b)
    assert_close(outer, np.outer(a, b), rtol=1e-12)
    m = randn(2, 3, 4)
    got = ft.vmap(ft.vmap(lambda v: fnp.sum(v ** 2), in_axes=1), in_axes=0)(m)
    assert_close(got, np.sum(m ** 2, axis=1), rtol=1e-12)
    batched_matmul = ft.vmap(ft.vmap(lambda x, y: x @ y, in_axes=(0, None)), in_axes=(None, 1))
    x, y = randn(5, 3), randn(3, 2)
    assert_close(batched_matmul(x, y), (x @ y).T, rtol=1e-12)
    check_traced(batched_matmul, x, y)


# ---------------------------------------------------------------------------
# errors

def test_inconsistent_sizes_error_names_the_shapes():
    # JAX's message: each size, how many axes had it, and which argument (by name and path)
    with pytest.raises(ValueError, match=r"^vmap got inconsistent sizes for array axes to be "
                                         r"mapped:\n  \* one axis had size 3: axis 0 of "
                                         r"argument a of type float64\[3,2\];\n  \* one axis "
                                         r"had size 4: axis 0 of argument b of type float64\[4\]$"):
        ft.vmap(lambda a, b: a[0] + b)(np.ones((3, 2)), np.ones(4))
    with pytest.raises(ValueError, match=r"most axes \(2 of them\) had size 2, e\.g\. axis 1 of "
                                         r"argument b\[0\] of type float32\[10,2\];\n  \* one "
                                         r"axis had size 10: axis 0 of argument a"):
        ft.vmap(lambda a, b: a, in_axes=(0, 1))(np.ones((10, 4), np.float32),
                                                [np.ones((10, 2), np.float32)] * 2)
    with pytest.raises(ValueError, match=r"  \* the `axis_size` argument was 5;\n  \* one axis "
                                         r"had size 3: axis 0 of argument a of type float64\[3\]"):
        ft.vmap(lambda a: a, axis_size=5)(np.ones(3))
    with pytest.raises(ValueError, match=r"axis 0 of kwargs\['y'\] of type float64\[2\]"):
        ft.vmap(lambda x, y: x + y)(np.ones(1), y=np.ones(2))


def test_keyword_arguments_are_mapped_along_axis_0():
    """JAX's rule: in_axes names the positional arguments; keyword arguments are mapped
    along their leading axis."""
    f = ft.vmap(lambda x, y, *, z: x * y + z, in_axes=(0, None))
    out = f(np.arange(3.0), 2.0, z=np.ones(3) * 10)
    np.testing.assert_allclose(out, np.arange(3.0) * 2 + 10)
    with pytest.raises(ValueError, match=r"len\(in_axes\)=3, len\(args\)=0\. Note that the "
                                         r"function was called with keyword arguments "
                                         r"\['a', 'b', 'c'\]"):
        ft.vmap(lambda a, b, c: a, in_axes=(0, 0, None))(a=np.ones(2), b=np.ones(2), c=0.5)


def test_in_axes_must_be_ints_none_or_a_tuple():
    for bad in ({"a": 0}, False, (np.array([1.0, 2.0]),)):
        with pytest.raises(TypeError, match=r"^vmap in_axes must be an int, None, or"):
            ft.vmap(lambda x: x, in_axes=bad)(np.ones(2))
    with pytest.raises(ValueError, match=r"^vmap wrapped function must be passed at least one "
                                         r"argument containing an array or axis_size must be "
                                         r"specified, got empty \*args=\(\{\},\) and "
                                         r"\*\*kwargs=\{\}$"):
        ft.vmap(lambda x: x)({})


def test_axes_specification_errors():
    with pytest.raises(ValueError, match="rank should be at least 3"):
        ft.vmap(lambda a: a, in_axes=2)(np.ones((2, 2)))
    with pytest.raises(ValueError, match=r"len\(in_axes\)=3, len\(args\)=2"):
        ft.vmap(lambda a, b: a, in_axes=(0, 0, 0))(np.ones(2), np.ones(2))
    with pytest.raises(ValueError, match="at least one non-None"):
        ft.vmap(lambda a: a, in_axes=None)(np.ones(2))
    with pytest.raises(ValueError, match="out_axes is None"):
        ft.vmap(lambda a: a, out_axes=None)(np.ones(2))


# ---------------------------------------------------------------------------
# composition with differentiation

def _mse(params, x, y):
    return (fnp.dot(params["w"], x) + params["b"] - y) ** 2


def _softmax_xent(w, x, label):
    logits = x @ w
    return -ft.nn.log_softmax(logits)[label]


def _mlp(params, x, y):
    h = fnp.tanh(x @ params[0][0] + params[0][1])
    out = h @ params[1][0] + params[1][1]
    return fnp.sum((out - y) ** 2)


def _rnn_loss(w, xs, y):
    h, _ = lax.scan(lambda h, x: (fnp.tanh(h @ w + x), None), fnp.zeros(3, np.float64), xs)
    return fnp.sum((h - y) ** 2)


PER_EXAMPLE = {
    "mse": (_mse, lambda: {"w": randn(4), "b": np.float64(0.3)},
            lambda n: (randn(n, 4), randn(n))),
    "softmax_xent": (_softmax_xent, lambda: randn(5, 3),
                     lambda n: (randn(n, 5), rng.integers(0, 3, n).astype(np.int32))),
    "mlp": (_mlp, lambda: [(randn(4, 6), randn(6)), (randn(6, 2), randn(2))],
            lambda n: (randn(n, 4), randn(n, 2))),
    "rnn_scan": (_rnn_loss, lambda: randn(3, 3) * 0.5, lambda n: (randn(n, 4, 3), randn(n, 3))),
}


@pytest.mark.parametrize("name", sorted(PER_EXAMPLE))
def test_per_example_gradients_equal_stacked_grads(name):
    loss, make_params, make_data = PER_EXAMPLE[name]
    params = make_params()
    x, y = make_data(7)
    got = ft.vmap(ft.grad(loss), in_axes=(None, 0, 0))(params, x, y)
    want = ft.tree_map(lambda *g: np.stack(g), *[ft.grad(loss)(params, x[i], y[i])
                                                 for i in range(7)])
    for g, w in zip(ft.tree_leaves(got), ft.tree_leaves(want)):
        assert_close(g, w, rtol=1e-10, atol=1e-12)
    check_traced(ft.vmap(ft.grad(loss), in_axes=(None, 0, 0)), params, x, y)


def test_vmap_of_jvp_and_grad_of_vmap():
    f = lambda x: fnp.sin(x) * fnp.sum(x ** 2)  # noqa: E731
    x, ts = randn(3), randn(5, 3)
    got = ft.vmap(lambda t: ft.jvp(f, (x,), (t,))[1])(ts)
    assert_close(got, ts @ ft.jacfwd(f)(x).T, rtol=1e-10)
    xs = randn(4, 3)
    g = ft.grad(lambda xs: fnp.sum(ft.vmap(f)(xs)))(xs)
    assert_close(g, np.stack([ft.grad(lambda v: fnp.sum(f(v)))(v) for v in xs]), rtol=1e-10)
    jac = ft.vmap(ft.jacrev(f))(xs)
    assert_close(jac, np.stack([ft.jacfwd(f)(v) for v in xs]), rtol=1e-10)


def test_vmap_of_hessian_vector_product():
    f = lambda x: fnp.sum(fnp.tanh(x) ** 3)  # noqa: E731
    x, vs = randn(4), randn(3, 4)
    hvp = lambda v: ft.jvp(ft.grad(f), (x,), (v,))[1]  # noqa: E731
    assert_close(ft.vmap(hvp)(vs), vs @ ft.hessian(f)(x), rtol=1e-10)


# ---------------------------------------------------------------------------
# vmap(f) == loop over a corpus

CORPUS = {
    "elementwise": (lambda x, y: fnp.exp(-x) * y + fnp.maximum(x, y), (0, 0)),
    "broadcast_scalar": (lambda x, s: x * s + fnp.log1p(x * x), (0, 0)),
    "matmul": (lambda x, w: fnp.tanh(x @ w), (0, None)),
    "matmul_batched_weights": (lambda x, w: x @ w, (None, 0)),
    "einsum": (lambda a, b: fnp.einsum("ij,j,j->i", a, b, b), (0, 0)),
    "reductions": (lambda x, y: (fnp.sum(x, axis=0), fnp.max(x, axis=1), fnp.mean(y)), (1, 0)),
    "softmax": (lambda x, y: ft.nn.softmax(x * y), (0, None)),
    "logsumexp": (lambda x, y: fnp.logsumexp(x + y, axis=-1), (0, 0)),
    "slicing": (lambda x, y: x[1:, ::2] + y[0], (0, 0)),
    "int_indexing": (lambda x, y: x[np.array([2, 0, 1])] * y[:3, None], (0, None)),
    "concat_stack": (lambda x, y: fnp.concatenate([x, fnp.stack([y, y * 2.0])], axis=0), (0, 0)),
    "reshape_transpose": (lambda x, y: fnp.reshape(x.T, (-1,)) + fnp.sum(y), (0, -1)),
    "where": (lambda x, y: fnp.where(x > 0, x, y[:x.shape[0], None]), (0, 0)),
    "cumsum_argmax": (lambda x, y: (fnp.cumsum(x, axis=1), fnp.argmax(y)), (0, 0)),
    "norm_outer": (lambda x, y: fnp.outer(x[0], y) / fnp.linalg.norm(y), (0, 0)),
    "cond": (lambda x, y: lax.cond(fnp.sum(y) > 0, lambda a: a * 2.0, lambda a: -a, x), (0, 0)),
    "scan": (lambda x, y: lax.scan(lambda c, r: (c * r + y[0], fnp.sum(c)), y, x), (0, 0)),
    "while": (lambda x, y: lax.while_loop(lambda c: fnp.sum(c) < 20.0, lambda c: c * 1.5 + 0.2,
                                          fnp.abs(y)), (None, 0)),
}


def _corpus_args(axes):
    x, y = randn(3, 4), randn(4)
    args = []
    for a, d in zip((x, y), axes):
        if d is None:
            args.append(a)
        else:
            batched = np.stack([a * (1 + 0.1 * i) + 0.05 * i for i in range(5)])
            args.append(np.moveaxis(batched, 0, d))
    return args


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_vmap_equals_loop_on_corpus(name):
    f, axes = CORPUS[name]
    args = _corpus_args(axes)
    got = ft.vmap(f, in_axes=axes)(*args)
    want = loop(f, args, axes, 5)
    for g, w in zip(ft.tree_leaves(got), ft.tree_leaves(want)):
        assert_close(g, w, rtol=1e-10, atol=1e-12)
    check_traced(ft.vmap(f, in_axes=axes), *args)


def test_out_axes_errors_are_jaxs():
    x = np.array([1.0, 2.0])
    with pytest.raises(ValueError, match=r"vmap has mapped output \(axis_name=foo\) but "
                                         r"out_axes is None"):
        ft.vmap(lambda v: v, out_axes=None, axis_name="foo")(x)
    with pytest.raises(ValueError, match=r"but out_axes is None at vmap out_axes"):
        ft.vmap(lambda v: v, out_axes=None)(x)
    with pytest.raises(ValueError, match=r"^vmap out_axes specification must be a tree prefix "
                                         r"of the corresponding value;.*(?s:.*)Mismatch details"):
        ft.vmap(lambda v: v, out_axes=(2, 3))(x)
    with pytest.raises(TypeError, match=r"^vmap out_axes must be an int, None, or"):
        ft.vmap(lambda v: v, out_axes=(x,))(x)
