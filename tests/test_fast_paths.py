"""The performance mechanisms must not change a number or leak state.

Covers: staged batching rules (staged_rules / batching.apply_batch_rule), memoized shape
rules (primitives/base.defprim), the vmap-stripping recording of vmap(grad) (reverse.py),
hot derived programs switched to the jit's CPU lowering (runtime.HOT_RUNS), the batched
outer-product layout of dot_general, interned pytree structures, and the functrans.numpy
promotion / broadcasting fast paths with the strided broadcast_in_dim implementation.
Exactness checks run in float64 and call every cached path several times.
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import functrans as ft
import functrans.numpy as fnp
from functrans import core, executor, runtime, staged_rules, tree_util
from functrans.backends.memory import BUDGET
from functrans.batching import apply_batch_rule
from functrans.core import ShapedArray
from functrans.primitives import REGISTRY

pytestmark = pytest.mark.usefixtures("x64")  # float64 references: conftest.x64

RNG = np.random.default_rng(1234)
F64 = np.float64


def _rand(*shape):
    return RNG.normal(size=shape).astype(F64)


def _close(got, want, tol=1e-12, err_msg=""):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{got.shape} != {want.shape} {err_msg}"
    assert got.dtype == want.dtype, f"{got.dtype} != {want.dtype} {err_msg}"
    if got.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want, err_msg=err_msg)
    else:
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=err_msg)


def _tree_close(got, want, tol=1e-12):
    gl, gt = tree_util.tree_flatten(got)
    wl, wt = tree_util.tree_flatten(want)
    assert gt == wt, f"{gt} != {wt}"
    for g, w in zip(gl, wl):
        _close(g, w, tol)


def _take(x, axis, i):
    return x if axis is None else np.take(x, i, axis=axis)


def _loop_vmap(f, args, in_axes, out_axes=0):
    """The reference of vmap: f per example in a Python loop, outputs stacked."""
    n = next(np.shape(a)[ax] for a, ax in zip(args, in_axes) if ax is not None)
    outs = [f(*[_take(a, ax, i) for a, ax in zip(args, in_axes)]) for i in range(n)]
    leaves = [tree_util.tree_flatten(o)[0] for o in outs]
    tree = tree_util.tree_flatten(outs[0])[1]
    stacked = [np.stack([np.asarray(lv[k]) for lv in leaves], axis=out_axes)
               for k in range(len(leaves[0]))]
    return tree_util.tree_unflatten(tree, stacked)


def _check_vmap(f, args, in_axes, out_axes=0, times=3, tol=1e-12):
    want = _loop_vmap(f, args, in_axes, out_axes)
    vf = ft.vmap(f, in_axes=in_axes, out_axes=out_axes)
    for _ in range(times):
        _tree_close(vf(*args), want, tol)


# ---------------------------------------------------------------------------
# 1. staged batching rules


def _scan_cumprod(x):
    def body(c, xi):
        c = c * 0.5 + xi
        return c, c * xi
    return ft.lax.scan(body, fnp.zeros((), x.dtype), x)


VMAP_CASES = [
    ("broadcast_unbatched", lambda x, y: fnp.sin(x) * y + x ** 2 - y / (1.0 + x * x),
     lambda: (_rand(5, 3, 1), _rand(4)), (0, None), 0),
    ("broadcast_both", lambda x, y: fnp.maximum(x, y) * fnp.exp(-y),
     lambda: (_rand(5, 3, 1), _rand(5, 4)), (0, 0), 0),
    ("axis1_out1", lambda x: fnp.tanh(x) + fnp.sum(x) * x,
     lambda: (_rand(3, 5, 2),), (1,), 1),
    ("keepdims", lambda x: (x - fnp.mean(x, axis=0, keepdims=True))
     / fnp.max(x, axis=1, keepdims=True) + fnp.sum(x, axis=-1, keepdims=True),
     lambda: (_rand(4, 3, 2) + 3.0,), (0,), 0),
    ("vec_at_mat", lambda v, m: v @ m, lambda: (_rand(6, 3), _rand(3, 4)), (0, None), 0),
    ("vec_at_mat_both", lambda v, m: v @ m, lambda: (_rand(6, 3), _rand(6, 3, 4)), (0, 0), 0),
    ("mat_at_vec_unbatched_mat", lambda m, v: m @ v,
     lambda: (_rand(4, 3), _rand(6, 3)), (None, 0), 0),
    ("dot_general", lambda a, b: ft.lax.dot_general(
        a, b, dimension_numbers=(((2,), (1,)), ((0,), (0,)))),
     lambda: (_rand(2, 5, 4, 3), _rand(5, 2, 3, 6)), (1, 0), 0),
    ("reshape_transpose", lambda x: fnp.transpose(fnp.reshape(x, (2, 6)), (1, 0))[::2] * 2.0,
     lambda: (_rand(4, 3, 4),), (0,), 0),
    ("where", lambda x, y: fnp.where(x > 0, x, y * 2.0),
     lambda: (_rand(5, 3), _rand(3)), (0, None), 0),
    ("cond_batched_pred", lambda x: ft.lax.cond(fnp.sum(x) > 0, lambda a: a * 2.0,
                                                lambda a: -fnp.sin(a), x),
     lambda: (_rand(6, 3),), (0,), 0),
    ("cond_unbatched_pred", lambda p, x: ft.lax.cond(p > 0, lambda a: a * 2.0,
                                                     lambda a: -fnp.sin(a), x),
     lambda: (np.float64(1.0), _rand(6, 3)), (None, 0), 0),
    ("scan", _scan_cumprod, lambda: (_rand(4, 7),), (0,), 0),
    ("int_ops", lambda k: (fnp.argmax(k), fnp.cumsum(k), k * 3 + 1),
     lambda: (RNG.integers(-5, 5, size=(4, 6)).astype(np.int32),), (0,), 0),
]


@pytest.mark.parametrize("name,f,make,in_axes,out_axes", VMAP_CASES,
                         ids=[c[0] for c in VMAP_CASES])
def test_staged_vmap_matches_loop(name, f, make, in_axes, out_axes):
    _check_vmap(f, make(), in_axes, out_axes)


def test_staged_key_distinguishes_batch_dims():
    """Square operands: the same avals batched along different axes must not share a
    staged rule."""
    x, y = _rand(4, 4), _rand(4, 4)
    fns = [lambda a, b: a - b * 2.0, lambda a, b: a @ b,
           lambda a, b: fnp.sum(a, axis=0, keepdims=True) / b]
    for f in fns:
        for in_axes in [(0, None), (None, 0), (0, 1), (1, 0), (0, 0), (1, 1), (1, None)]:
            for out_axes in ((0, 1) if f is fns[0] else (0,)):
                _check_vmap(f, (x, y), in_axes, out_axes, times=2)


def test_staged_rules_are_used_and_equal_the_rule():
    """apply_batch_rule on concrete arrays (staged from the 2nd call) gives exactly the
    batching rule's own values and batch dims."""
    cases = [
        ("sin", [_rand(4, 3)], [0], {}),
        ("add", [_rand(4, 3), _rand(3, 4)], [0, 1], {}),
        ("mul", [_rand(3, 4), np.float64(2.0)], [1, None], {}),
        ("reduce_sum", [_rand(3, 4, 2)], [1], {"axes": (1,)}),
        ("transpose", [_rand(2, 3, 4)], [2], {"permutation": (1, 0)}),
        ("dot_general", [_rand(5, 3), _rand(3, 4)], [0, None],
         {"dimension_numbers": (((0,), (0,)), ((), ()))}),
        ("select", [_rand(4, 3) > 0, _rand(4, 3), _rand(3)], [0, 0, None], {}),
    ]
    for name, vals, dims, params in cases:
        prim = REGISTRY[name]
        want, want_dim = prim.batch(vals, dims, **params)
        for _ in range(3):
            got, got_dim = apply_batch_rule(prim, vals, dims, params)
            assert got_dim == want_dim, name
            _close(got, want, 0, name)
        key = staged_rules.signature(prim, params, vals, tuple(dims))
        assert key is not None and staged_rules.staged(key), f"{name} was not staged"


def test_staged_multiple_results_rule():
    """threefry2x32 (a multiple-results primitive) staged: fresh, correct outputs."""
    prim = REGISTRY["threefry2x32"]
    vals = [np.arange(4, dtype=np.uint32), np.uint32(7),
            np.arange(12, dtype=np.uint32).reshape(4, 3), np.ones((3,), np.uint32)]
    dims = [0, None, 0, None]
    want, want_dims = prim.batch(vals, dims)
    for _ in range(3):
        got, got_dims = apply_batch_rule(prim, vals, dims, {})
        assert list(got_dims) == list(want_dims)
        for g, w in zip(got, want):
            _close(g, w)
    per = [prim.bind(np.uint32(i), np.uint32(7), np.arange(12, dtype=np.uint32).reshape(4, 3)[i],
                     np.ones((3,), np.uint32)) for i in range(4)]
    for k in range(2):
        _close(np.moveaxis(got[k], got_dims[k], 0), np.stack([p[k] for p in per]))


@pytest.mark.parametrize("f,msg", [
    (lambda a, b: a + b, "(3,), (4,)"),
    (lambda a, b: ft.lax.add(a, b), "add"),
    (lambda a, b: a @ b, "(3,) @ (4,)"),
])
def test_batching_rule_error_repeats_and_does_not_leak(f, msg):
    x, y = np.ones((5, 3)), np.ones((5, 4))
    before = core.trace_stack_snapshot()
    messages = []
    for _ in range(3):
        with pytest.raises(core.ShapeError) as e:
            ft.vmap(f)(x, y)
        messages.append(str(e.value))
        assert core.trace_stack_snapshot() == before
    assert msg in messages[0] and len(set(messages)) == 1, messages
    # the failed signature did not poison good calls
    _close(ft.vmap(lambda a, b: a + b)(x, x), 2 * x)


# ---------------------------------------------------------------------------
# 2. memoized shape rules


def test_shape_rule_error_raised_every_time():
    add = REGISTRY["add"]
    a, b = ShapedArray((3,), F64), ShapedArray((4,), F64)
    msgs = []
    for _ in range(3):
        with pytest.raises(core.ShapeError) as e:
            add.abstract_eval(a, b)
        msgs.append(str(e.value))
        assert add.abstract_eval(a, a) == a         # a good call in between
    assert len(set(msgs)) == 1 and msgs[0].startswith("add")
    for _ in range(2):
        with pytest.raises(core.ShapeError):
            ft.lax.add(np.ones(3), np.ones(4))
        with pytest.raises(core.DTypeError):
            ft.lax.dot_general(np.ones(3), np.ones(3, np.float32),
                               dimension_numbers=(((0,), (0,)), ((), ())))


def test_shape_rule_multiple_results_fresh_list():
    prim = REGISTRY["threefry2x32"]
    u = ShapedArray((3,), np.uint32)
    first = prim.abstract_eval(u, u, u, u)
    want = list(first)
    first.append("junk")
    first[0] = "junk"
    for _ in range(3):
        out = prim.abstract_eval(u, u, u, u)
        assert out == want and out is not first
        out.clear()
    # and through the eager path
    for _ in range(2):
        r = prim.bind(np.uint32(1), np.uint32(2), np.arange(3, dtype=np.uint32),
                      np.zeros(3, np.uint32))
        assert len(r) == 2 and all(x.shape == (3,) for x in r)


def test_shape_rule_cache_keys_weak_type():
    mul = REGISTRY["mul"]
    w, s = ShapedArray((), np.float32, True), ShapedArray((), np.float32, False)
    for _ in range(2):
        assert mul.abstract_eval(w, w).weak_type is True
        assert mul.abstract_eval(s, s).weak_type is False
        assert mul.abstract_eval(w, s).weak_type is False
        assert mul.abstract_eval(w, w).weak_type is True

    def out_weak(f, *args):
        return [v.aval.weak_type for v in ft.make_jaxpr(f)(*args).jaxpr.outvars]
    for _ in range(2):
        assert out_weak(lambda x, y: x * y, 1.0, 2.0) == [True]
        assert out_weak(lambda x, y: x * y, np.float32(1.0), np.float32(2.0)) == [False]
        assert out_weak(lambda x: x + x, 1.0) == [True]
        assert out_weak(lambda x: x + x, np.ones((), np.float32)) == [False]
        assert out_weak(lambda x: x * 2.0, np.ones(3, np.float32)) == [False]
        assert out_weak(lambda x: fnp.sin(x), 1.0) == [True]
        assert out_weak(lambda x: fnp.sin(x), np.float32(1.0)) == [False]
    # a weak operand adopts a strong one's dtype; a strong float32 one does not
    assert ft.jit(lambda x, h: x + h)(1.0, np.ones(2, np.float16)).dtype == np.float16
    assert ft.jit(lambda x, h: x + h)(np.float32(1.0), np.ones(2, np.float16)).dtype == np.float32


# ---------------------------------------------------------------------------
# 3. vmap(grad(f)): the recording interpreter strips the vmap


def _repeat_check(fn, want, times=3, tol=1e-12):
    for _ in range(times):
        _tree_close(fn(), want, tol)


def _f_smooth(x):
    m = np.array([[2.0, 0.5, 0.0], [0.5, 1.0, -0.3], [0.0, -0.3, 3.0]])
    return fnp.sum(fnp.sin(x) * x) + x @ m @ x + fnp.sum(fnp.exp(0.1 * x))


def test_vmap_grad_batched_primals():
    xs = _rand(7, 3)
    want = _loop_vmap(ft.grad(_f_smooth), (xs,), (0,))
    _repeat_check(lambda: ft.vmap(ft.grad(_f_smooth))(xs), want)
    xs1 = np.ascontiguousarray(xs.T)
    _repeat_check(lambda: ft.vmap(ft.grad(_f_smooth), in_axes=1)(xs1), want)


def _softmax_loss(p, x, y):
    logits = x @ p["W"] + p["b"]
    logp = logits - fnp.log(fnp.sum(fnp.exp(logits)))
    onehot = (fnp.arange(3) == y).astype(F64)
    return -fnp.sum(logp * onehot)


def test_vmap_grad_unbatched_params_batched_data():
    p = {"W": _rand(4, 3), "b": _rand(3)}
    xs, ys = _rand(6, 4), RNG.integers(0, 3, size=6).astype(np.int32)
    logits = xs @ p["W"] + p["b"]
    prob = np.exp(logits - logits.max(1, keepdims=True))
    prob /= prob.sum(1, keepdims=True)
    d = prob - np.eye(3)[ys]
    closed = {"W": xs[:, :, None] * d[:, None, :], "b": d}
    _tree_close(_loop_vmap(ft.grad(_softmax_loss), (p, xs, ys), (None, 0, 0)), closed, 1e-12)
    _repeat_check(lambda: ft.vmap(ft.grad(_softmax_loss), in_axes=(None, 0, 0))(p, xs, ys),
                  closed)


def test_vmap_grad_temporaries_of_batched_data():
    """Values computed from batched closed-over data alone, used once and dropped: each
    must be recorded as itself (not confused with an earlier, freed one)."""
    def loss(w, x):
        t = 0.0
        for k in range(1, 6):
            t = t + fnp.sum(w * (x * float(k)))
        return t
    w, xs = np.array([1.0, 2.0, 3.0]), np.arange(12.0).reshape(4, 3)
    _repeat_check(lambda: ft.vmap(ft.grad(loss), in_axes=(None, 0))(w, xs), 15.0 * xs, 4)


def _scaled(x, scale):
    if float(scale) > 0:
        return fnp.sum(x ** 2) * scale
    return fnp.sum(fnp.sin(x)) - scale


@pytest.mark.parametrize("scale", [1.5, -2.0])
def test_vmap_grad_python_control_flow_on_unbatched(scale):
    xs, s = _rand(5, 3), np.float64(scale)
    for argnums in (0, (0, 1)):
        g = ft.grad(_scaled, argnums=argnums)
        want = _loop_vmap(g, (xs, s), (0, None))
        _repeat_check(lambda: ft.vmap(g, in_axes=(0, None))(xs, s), want)
    want_x = 2 * xs * scale if scale > 0 else np.cos(xs)
    _close(ft.vmap(ft.grad(_scaled), in_axes=(0, None))(xs, s), want_x)


def test_vmap_grad_concretizing_batched_value_raises():
    def f(x, c):
        if float(fnp.sum(x * c)) > 0:
            return fnp.sum(x ** 2)
        return fnp.sum(x)
    xs = _rand(4, 3)
    before = core.trace_stack_snapshot()
    for _ in range(3):
        with pytest.raises(core.ConcretizationTypeError):
            ft.vmap(ft.grad(f), in_axes=(0, None))(xs, np.float64(2.0))
        # the batched value is closed over, the differentiated one is not batched
        with pytest.raises(core.ConcretizationTypeError):
            ft.vmap(ft.grad(f, argnums=1), in_axes=(0, None))(xs, np.float64(2.0))
        assert core.trace_stack_snapshot() == before


def test_vmap_grad_shape_error_names_per_example_shapes():
    xs, ys = np.ones((5, 3)), np.ones((5, 4))
    for f, frag in [(lambda a, b: fnp.sum(a * b), "(3,), (4,)"),
                    (lambda a, b: fnp.sum(ft.lax.add(a, b)), "f64[3], f64[4]")]:
        msgs = []
        for _ in range(3):
            with pytest.raises(core.ShapeError) as e:
                ft.vmap(ft.grad(f))(xs, ys)
            msgs.append(str(e.value))
        assert frag in msgs[0] and "5" not in msgs[0].split(":", 1)[1], msgs[0]
        assert len(set(msgs)) == 1


def test_vmap_grad_grad_scalar():
    def f(x):
        return fnp.sin(x) * x ** 3
    xs = np.linspace(-2.0, 2.0, 9)
    want = -xs ** 3 * np.sin(xs) + 6 * xs ** 2 * np.cos(xs) + 6 * xs * np.sin(xs)
    _repeat_check(lambda: ft.vmap(ft.grad(ft.grad(f)))(xs), want, tol=1e-11)


def _tanh_loss(w, x):
    return fnp.sum(fnp.tanh(w * x))


def test_grad_of_vmap_grad_inside_outer_grad():
    w, xs = _rand(3), _rand(5, 3)

    def outer(w):
        return fnp.sum(ft.vmap(ft.grad(_tanh_loss), in_axes=(None, 0))(w, xs))

    def outer_x(w):      # differentiate the batched argument, close over the outer tracer
        return fnp.sum(ft.vmap(ft.grad(_tanh_loss, argnums=1), in_axes=(None, 0))(w, xs) ** 2)
    t = np.tanh(w * xs)
    want = np.sum(xs * (-2 * t * (1 - t ** 2)) * xs, axis=0)
    _repeat_check(lambda: ft.grad(outer)(w), want)
    for fn in (outer, outer_x):
        g = ft.grad(fn)(w)
        eps, fd = 1e-6, np.zeros(3)
        for i in range(3):
            e = np.zeros(3)
            e[i] = eps
            fd[i] = (float(fn(w + e)) - float(fn(w - e))) / (2 * eps)
        np.testing.assert_allclose(g, fd, rtol=1e-7, atol=1e-8)
        _repeat_check(lambda: ft.grad(fn)(w), g)


def test_jvp_of_vmap_grad():
    xs, vs = _rand(5, 3), _rand(5, 3)
    per = [ft.jvp(ft.grad(_f_smooth), (x,), (v,)) for x, v in zip(xs, vs)]
    want = (np.stack([p[0] for p in per]), np.stack([p[1] for p in per]))
    _repeat_check(lambda: ft.jvp(ft.vmap(ft.grad(_f_smooth)), (xs,), (vs,)), want)
    # the Hessian of x @ m @ x is m + m.T: check the quadratic part separately
    m = np.array([[2.0, 0.5], [0.5, 1.0]])
    q = ft.jvp(ft.vmap(ft.grad(lambda x: x @ m @ x)), (xs[:, :2],), (vs[:, :2],))[1]
    _close(q, vs[:, :2] @ (m + m.T))


def test_jit_of_vmap_grad():
    xs = _rand(6, 3)
    want = ft.vmap(ft.grad(_f_smooth))(xs)
    _repeat_check(lambda: ft.jit(ft.vmap(ft.grad(_f_smooth)))(xs), want)
    jf = ft.jit(ft.vmap(ft.grad(_softmax_loss), in_axes=(None, 0, 0)))
    p = {"W": _rand(4, 3), "b": _rand(3)}
    xs4, ys = _rand(6, 4), RNG.integers(0, 3, size=6).astype(np.int32)
    want = _loop_vmap(ft.grad(_softmax_loss), (p, xs4, ys), (None, 0, 0))
    _repeat_check(lambda: jf(p, xs4, ys), want)


def test_vmap_vmap_grad():
    xs = _rand(3, 4, 2)
    c = _rand(3, 2)

    def f(x, c):
        return fnp.sum(fnp.tanh(x * c)) + fnp.sum(x ** 3)
    g = ft.grad(f)
    want = np.stack([np.stack([g(xs[i, j], c[i]) for j in range(4)]) for i in range(3)])
    _repeat_check(lambda: ft.vmap(ft.vmap(g))(xs, np.broadcast_to(c[:, None], (3, 4, 2))), want)
    # the data is batched only by the outer vmap
    _repeat_check(lambda: ft.vmap(ft.vmap(g, in_axes=(0, None)))(xs, c), want)
    want2 = np.stack([np.stack([g(xs[i, j], c[j % 3]) for j in range(4)]) for i in range(3)])
    c4 = c[np.arange(4) % 3]
    _repeat_check(lambda: ft.vmap(ft.vmap(g), in_axes=(0, None))(xs, c4), want2)


def test_vmap_vjp_batched_cotangent():
    def f(x):
        return fnp.stack([fnp.sum(x ** 2), fnp.prod(x), fnp.sin(x[0]) * x[1]])
    xs, cts = _rand(5, 3), _rand(5, 3)

    def one(x, ct):
        return ft.vjp(f, x)[1](ct)[0]
    want = _loop_vmap(one, (xs, cts), (0, 0))
    _repeat_check(lambda: ft.vmap(one)(xs, cts), want)
    ct1 = cts[0]
    want1 = _loop_vmap(one, (xs, ct1), (0, None))
    _repeat_check(lambda: ft.vmap(one, in_axes=(0, None))(xs, ct1), want1)


def test_value_and_grad_has_aux_returns_arrays():
    """aux values computed from the differentiated inputs come back as arrays, not as
    tracers of the finished recording."""
    def f(x):
        return fnp.sum(x ** 2), {"r": fnp.sin(x), "n": 3}
    x = _rand(3)
    for _ in range(3):
        (val, aux), g = ft.value_and_grad(f, has_aux=True)(x)
        assert isinstance(aux["r"], np.ndarray) and aux["n"] == 3
        _close(aux["r"], np.sin(x))
        g2, aux2 = ft.grad(f, has_aux=True)(x)
        assert isinstance(aux2["r"], np.ndarray)
        _close(g, 2 * x)


def test_vmap_value_and_grad_has_aux():
    def f(x, y):
        r = x * y
        return fnp.sum(r ** 2), {"norm": fnp.sqrt(fnp.sum(x * x)), "r": r}
    xs, y = _rand(4, 3), _rand(3)
    vg = ft.value_and_grad(f, has_aux=True)
    want = _loop_vmap(vg, (xs, y), (0, None))
    _repeat_check(lambda: ft.vmap(vg, in_axes=(0, None))(xs, y), want)
    (val, aux), g = ft.vmap(vg, in_axes=(0, None))(xs, y)
    _close(g, 2 * xs * y ** 2)
    _close(aux["norm"], np.linalg.norm(xs, axis=1))


# ---------------------------------------------------------------------------
# 4. hot derived programs (runtime.HOT_RUNS) lowered by the jit's CPU backend


def _mlp(p, x):
    h = fnp.tanh(x @ p["W1"] + p["b1"])
    return fnp.mean((h @ p["W2"] + p["b2"]) ** 2)


def _mlp_grad_np(p, x):
    h = np.tanh(x @ p["W1"] + p["b1"])
    out = h @ p["W2"] + p["b2"]
    d = 2 * out / out.size
    dz = (d @ p["W2"].T) * (1 - h ** 2)
    return {"W1": x.T @ dz, "b1": dz.sum(0), "W2": h.T @ d, "b2": d.sum(0)}


def _mlp_params(dtype):
    p = {"W1": _rand(4, 6), "b1": _rand(6), "W2": _rand(6, 2), "b2": _rand(2)}
    return {k: v.astype(dtype) for k, v in p.items()}


def _any_hot():
    def hot(j):
        return j._compiled is not None and bool(j._compiled.hot)
    return any(hot(d.backward.jaxpr) or hot(d.residual.jaxpr) for d in executor.cached("vjp"))


@pytest.mark.parametrize("dtype,tol", [(np.float32, 1e-6), (F64, 1e-12)])
def test_hot_program_same_inputs(dtype, tol):
    assert runtime.HOT_RUNS < 12
    p, x = _mlp_params(dtype), _rand(5, 4).astype(dtype)
    g = ft.grad(_mlp)
    res = [g(p, x) for _ in range(12)]
    assert _any_hot(), "the derived programs never switched to the CPU lowering"
    for r in res[1:]:
        for k in p:
            assert r[k].dtype == dtype
            np.testing.assert_allclose(r[k], res[0][k], rtol=tol, atol=tol)
    _tree_close(res[-1], {k: v.astype(dtype) for k, v in _mlp_grad_np(
        {k: v.astype(F64) for k, v in p.items()}, x.astype(F64)).items()},
        tol=1e-5 if dtype == np.float32 else 1e-12)
    if dtype == F64:        # finite differences on W1[1, 2] and b2[0]
        for k, idx in [("W1", (1, 2)), ("b2", (0,))]:
            eps = 1e-6
            pp = {kk: v.copy() for kk, v in p.items()}
            pm = {kk: v.copy() for kk, v in p.items()}
            pp[k][idx] += eps
            pm[k][idx] -= eps
            fd = (float(_mlp(pp, x)) - float(_mlp(pm, x))) / (2 * eps)
            np.testing.assert_allclose(res[-1][k][idx], fd, rtol=1e-7, atol=1e-9)


def test_hot_program_different_inputs_and_no_aliasing():
    p = _mlp_params(F64)
    g = ft.grad(_mlp, argnums=(0, 1))
    kept = []
    for i in range(12):
        x = _rand(5, 4)
        gp, gx = g(p, x)
        want = _mlp_grad_np(p, x)
        _tree_close(gp, want)
        h = np.tanh(x @ p["W1"] + p["b1"])
        out = h @ p["W2"] + p["b2"]
        _close(gx, ((2 * out / out.size) @ p["W2"].T * (1 - h ** 2)) @ p["W1"].T)
        kept.append((x, {k: v.copy() for k, v in gp.items()}, gp, gx.copy(), gx))
    assert _any_hot()
    # results of earlier calls (before and after the switch) did not change since
    for x, snap, gp, gx_snap, gx in kept:
        _tree_close(gp, snap, 0)
        _close(gx, gx_snap, 0)
    # writing into a returned gradient does not change later results
    x = kept[-1][0]
    ref = g(p, x)
    ref = ({k: v.copy() for k, v in ref[0].items()}, ref[1].copy())
    for _ in range(3):
        gp, gx = g(p, x)
        for arr in list(gp.values()) + [gx]:
            if arr.flags.writeable:
                arr += 1000.0
        got = g(p, x)
        _tree_close(got, ref, 0)


def test_hot_program_gradients_do_not_alias_inputs_or_each_other():
    c = np.array([5.0, 6.0, 7.0])
    cases = [lambda x, y: fnp.sum(x * y), lambda x, y: fnp.sum(x * c) + fnp.sum(y * y),
             lambda x, y: fnp.sum(fnp.exp(x) + y * 2.0)]
    for f in cases:
        x, y = _rand(3), _rand(3)
        x0, y0 = x.copy(), y.copy()
        g = ft.grad(f, argnums=(0, 1))
        want = [a.copy() for a in g(x, y)]
        for _ in range(12):
            gx, gy = g(x, y)
            _close(gx, want[0], 0)
            _close(gy, want[1], 0)
            for a in (gx, gy):
                if a.flags.writeable:
                    a *= -3.0
            _close(x, x0, 0)
            _close(y, y0, 0)
            _close(c, np.array([5.0, 6.0, 7.0]), 0)


def test_hot_hessian_vector_product():
    a = _rand(4, 3)

    def f(x):
        return fnp.sum(fnp.tanh(a @ x)) + 0.5 * fnp.sum(x ** 4)
    x, v = _rand(3), _rand(3)
    t = np.tanh(a @ x)
    hess = a.T @ np.diag(-2 * t * (1 - t ** 2)) @ a + np.diag(6 * x ** 2)
    eps = 1e-5
    gp, gm = ft.grad(f)(x + eps * v), ft.grad(f)(x - eps * v)
    fd = (gp - gm) / (2 * eps)
    np.testing.assert_allclose(hess @ v, fd, rtol=1e-7, atol=1e-8)
    for _ in range(12):
        g, hv = ft.jvp(ft.grad(f), (x,), (v,))
        _close(hv, hess @ v, 1e-12)
        _close(g, a.T @ (1 - t ** 2) + 2 * x ** 3, 1e-12)


# ---------------------------------------------------------------------------
# 5. dot_general: batched outer products


DOT_CASES = [   # (x shape, y shape, lhs batch, rhs batch)
    ((4, 5), (4, 3), (0,), (0,)),          # right block smaller: transposed view
    ((4, 3), (4, 5), (0,), (0,)),          # right block larger
    ((4, 3), (4, 3), (0,), (0,)),          # equal
    ((4, 2, 3), (4, 5), (0,), (0,)),       # 2-D left free block
    ((4, 7), (4, 2, 3), (0,), (0,)),       # 2-D right free block, smaller
    ((6, 4), (2, 4), (1,), (1,)),          # batch axis not leading
    ((2, 3, 5), (2, 3, 4), (0, 1), (0, 1)),  # two batch axes
    ((3, 1), (3, 1), (0,), (0,)),
]


def _einsum_ref(x, y, lb, rb):
    letters = "abcdefgh"
    xs = [letters[lb.index(i)] if i in lb else None for i in range(x.ndim)]
    ys = [letters[rb.index(i)] if i in rb else None for i in range(y.ndim)]
    free = iter("pqrstuvw")
    xs = [c or next(free) for c in xs]
    ys = [c or next(free) for c in ys]
    batch = letters[:len(lb)]
    out = batch + "".join(c for c in xs + ys if c not in batch)
    return np.einsum(f"{''.join(xs)},{''.join(ys)}->{out}", x, y)


@pytest.mark.parametrize("xs,ys,lb,rb", DOT_CASES)
@pytest.mark.parametrize("dtype", [F64, np.int32])
def test_batched_outer_product(xs, ys, lb, rb, dtype):
    with ft.enable_x64(dtype == F64):   # float64 kept (x64); int32 sums stay int32 (x32)
        x = (RNG.normal(size=xs) * 10).astype(dtype)
        y = (RNG.normal(size=ys) * 10).astype(dtype)
        want = _einsum_ref(x, y, lb, rb)
        for _ in range(2):
            out = ft.lax.dot_general(x, y, dimension_numbers=(((), ()), (lb, rb)))
            assert out.shape == want.shape and out.dtype == np.dtype(dtype)
            _close(out, want, 1e-12)
            _close(np.reshape(out, (out.shape[0], -1)), want.reshape(want.shape[0], -1), 1e-12)
            _close(fnp.sum(out, axis=-1), want.sum(-1).astype(dtype), 1e-12)
            _close(fnp.reshape(out * 2, (-1,)), (want * 2).reshape(-1), 1e-12)
            acc = np.ones_like(want)
            acc += out
            _close(acc, want + 1, 1e-12)
            cp = np.array(out)
            cp += 1
            _close(cp, want + 1, 1e-12)
            _close(out, want, 1e-12)           # the copy was written, not the result


def test_per_example_grads_of_linear_layer():
    def loss(w, b, x):
        return fnp.sum(fnp.tanh(w @ x + b))
    for out_dim, in_dim in [(5, 3), (2, 7), (4, 4)]:
        w, b, xs = _rand(out_dim, in_dim), _rand(out_dim), _rand(6, in_dim)
        d = 1 - np.tanh(xs @ w.T + b) ** 2
        want = (d[:, :, None] * xs[:, None, :], d)
        g = ft.vmap(ft.grad(loss, argnums=(0, 1)), in_axes=(None, None, 0))
        _repeat_check(lambda: g(w, b, xs), want)


# ---------------------------------------------------------------------------
# 6. interned pytree structures


def _roundtrip(tree):
    leaves, td = tree_util.tree_flatten(tree)
    return tree_util.tree_unflatten(td, leaves), td


def _key_types(d):
    out = []
    for k in sorted(d):
        out.append(type(k))
        if isinstance(d[k], dict):
            out.append(_key_types(d[k]))
    return out


def test_dict_keys_keep_their_type():
    for _ in range(2):
        for key in (1, True, 1.0):
            back, _ = _roundtrip({key: 3.0})
            assert [type(k) for k in back] == [type(key)] and back[key] == 3.0


def test_nested_dict_keys_keep_their_type():
    for _ in range(2):
        for tree in ({"a": {True: 1.0}}, {"a": {1: 1.0}}, {"a": {1.0: 1.0}},
                     {1: {True: 2.0}}, {1: {1: 2.0}}, [{1: 0.5}, {True: 0.5}]):
            back, _ = _roundtrip(tree)
            assert back == tree
            flat = back if isinstance(back, list) else [back]
            assert [_key_types(d) for d in flat] == [_key_types(d) for d in
                                                     (tree if isinstance(tree, list) else [tree])]


Pair = namedtuple("Pair", "a b")
Point = namedtuple("Point", "x y")


def test_namedtuples_and_none():
    tree = Point(x=Pair(1.0, np.ones(2)), y=[None, Pair(None, 3)])
    for _ in range(2):
        back, td = _roundtrip(tree)
        assert type(back) is Point and type(back.x) is Pair and back.y[0] is None
        assert back.y[1].a is None and back.y[1].b == 3
        np.testing.assert_array_equal(back.x.b, np.ones(2))
        assert td == tree_util.tree_structure(Point(Pair(0, 0), [None, Pair(None, 0)]))
        assert hash(td) == hash(tree_util.tree_structure(Point(Pair(0, 0), [None, Pair(None, 0)])))
        assert td != tree_util.tree_structure((Pair(0, 0), [None, Pair(None, 0)]))
        assert td.num_leaves == 3
    leaves, td = tree_util.tree_flatten(None)
    assert leaves == [] and tree_util.tree_unflatten(td, []) is None


class _Box:
    """A custom node whose aux data is a list (unhashable)."""

    def __init__(self, value, meta):
        self.value, self.meta = value, meta


tree_util.register_pytree_node(_Box, lambda b: ((b.value,), b.meta),
                               lambda aux, ch: _Box(ch[0], aux))


def test_custom_node_with_unhashable_aux_round_trips():
    for _ in range(2):
        back, td = _roundtrip(_Box({"w": 2.0}, ["meta", 1]))
        assert type(back) is _Box and back.meta == ["meta", 1] and back.value == {"w": 2.0}
        assert td.num_leaves == 1


def test_custom_node_with_unhashable_aux_equality():
    a = tree_util.tree_structure(_Box(1.0, ["m"]))
    b = tree_util.tree_structure(_Box(2.0, ["m"]))
    c = tree_util.tree_structure(_Box(2.0, ["n"]))
    assert a == b
    assert a != c
    out = tree_util.tree_map(lambda u, v: u + v, _Box(1.0, ["m"]), _Box(2.0, ["m"]))
    assert out.value == 3.0 and out.meta == ["m"]


def test_custom_node_aux_equal_but_distinct_values_round_trip():
    """Interning must not hand back an earlier, equal-but-different aux (1 vs True)."""
    for aux in ((True,), (1,), (1.0,)):
        back, _ = _roundtrip(_Box(0.0, aux))
        assert [type(a) for a in back.meta] == [type(a) for a in aux]


# ---------------------------------------------------------------------------
# 7. functrans.numpy promotion / broadcasting fast paths, broadcast_in_dim


def test_promote_same_dtype_different_shapes():
    a, b = _rand(2, 1), _rand(3)
    for _ in range(2):
        _close(fnp.add(a, b), a + b, 0)
        _close(fnp.subtract(b, a), b - a, 0)
        _close(fnp.multiply(a, np.float64(2.0)), a * 2.0, 0)
        _close(fnp.subtract(np.array(2.0), a), 2.0 - a, 0)
    with pytest.raises(core.ShapeError):
        fnp.add(_rand(2, 3), _rand(4))
    i = np.arange(6, dtype=np.int32).reshape(3, 2)
    _close(fnp.add(i, np.arange(2, dtype=np.int32)), i + np.arange(2, dtype=np.int32))


@pytest.mark.usefixtures("x32")
def test_promote_array_with_python_scalar_either_order():
    for dtype in (np.float16, np.float32):       # (float64: narrowed by x32, test_numpy's)
        x = np.linspace(0.5, 2.0, 4).astype(dtype)
        for got, want in [(fnp.add(x, 2), x + dtype(2)), (fnp.add(2, x), dtype(2) + x),
                          (fnp.subtract(1.5, x), dtype(1.5) - x),
                          (fnp.subtract(x, 1.5), x - dtype(1.5)),
                          (fnp.true_divide(3, x), dtype(3) / x),
                          (fnp.true_divide(x, 3), x / dtype(3)),
                          (x * 2.5, x * dtype(2.5)), (2.5 * x, dtype(2.5) * x)]:
            _close(got, want, 0)
    i = np.arange(4, dtype=np.int32)
    assert fnp.add(i, 1).dtype == np.int32 and fnp.add(1, i).dtype == np.int32
    _close(fnp.add(i, 1.5), i.astype(np.float32) + np.float32(1.5), 0)
    _close(fnp.subtract(1.5, i), np.float32(1.5) - i.astype(np.float32), 0)
    c = np.ones(2, np.complex64)
    assert fnp.add(c, 1.5).dtype == np.complex64 and fnp.add(2, c).dtype == np.complex64


@pytest.mark.usefixtures("x32")
def test_promote_weak_tracer_operands():
    """A weakly typed tracer (a Python float argument under make_jaxpr/jit) takes the other
    operand's dtype; only strong operands decide it."""
    h = np.ones(3, np.float16)

    def out_aval(f, *args):
        return ft.make_jaxpr(f)(*args).jaxpr.outvars[0].aval
    for _ in range(2):
        for f in (lambda s, a: s * a, lambda s, a: a - s):
            a = out_aval(f, 2.0, h)
            assert (a.dtype, a.shape, a.weak_type) == (np.float16, (3,), False)
            _close(ft.jit(f)(2.0, h), f(np.float16(2.0), h), 0)
            a = out_aval(f, 0.5, _rand(2, 3))
            assert (a.dtype, a.shape) == (np.float32, (2, 3))     # x32 narrows the float64
            a = out_aval(f, 0.5, 1.5)
            assert (a.dtype, a.weak_type) == (np.float32, True)
        # a weak tracer with a strong float32 array of another shape
        a = out_aval(lambda s: s + fnp.sum(s * fnp.ones(3)), 1.0)
        assert a.dtype == np.float32 and a.shape == ()
        # a strong tracer and a weak one of different shapes
        a = out_aval(lambda s, x: x * s, 1.0, np.ones((2, 1), np.float16))
        assert (a.dtype, a.shape) == (np.float16, (2, 1))
        _close(ft.jit(lambda s, x: s + x)(1.0, np.ones((2, 1), np.float16)),
               np.full((2, 1), 2.0, np.float16), 0)


@pytest.mark.usefixtures("x32")
def test_unary_float():
    for dtype in (np.float16, np.float32):       # (float64: narrowed by x32, test_numpy's)
        x = np.linspace(-1, 1, 5).astype(dtype)
        out = fnp.sin(x)
        assert out.dtype == dtype
        _close(out, np.sin(x), 0)
    for x in (np.arange(5, dtype=np.int32), np.array([True, False]), 2):
        out = fnp.sin(x)
        assert np.asarray(out).dtype == np.float32
        _close(out, np.sin(np.asarray(x, np.float32)), 0)
    assert ft.make_jaxpr(lambda x: fnp.exp(x))(np.ones(2, np.int32)).jaxpr.outvars[0].aval.dtype \
        == np.float32


@st.composite
def _compatible_shapes(draw):
    target = draw(st.lists(st.integers(0, 4), min_size=0, max_size=4))
    n = draw(st.integers(1, 3))
    shapes = []
    for _ in range(n):
        k = draw(st.integers(0, len(target)))
        s = list(target[len(target) - k:])
        for i in range(len(s)):
            if draw(st.booleans()):
                s[i] = 1
        shapes.append(tuple(s))
    return shapes


@given(_compatible_shapes())
@example([(3, 1, 2), (0, 3, 1, 2), (3, 1, 1)])
@example([(2, 1, 4, 1), (4, 1), (1, 1, 1, 3)])
@example([(1,), (0,)])
@example([(4, 3), (4, 3)])
def test_broadcast_shapes_matches_numpy(shapes):
    assert fnp.broadcast_shapes(*shapes) == np.broadcast_shapes(*shapes)


@given(_compatible_shapes(), st.data())
def test_broadcast_shapes_incompatible(shapes, data):
    target = np.broadcast_shapes(*shapes)
    axes = [i for i, d in enumerate(target) if d != 1]
    if not axes:
        target, axes = (2,) + tuple(target), [0]
    i = data.draw(st.sampled_from(axes))
    bad = list(target)
    bad[i] = target[i] + 1 if target[i] else 2
    with pytest.raises(core.ShapeError, match="cannot be broadcast"):
        fnp.broadcast_shapes(*shapes, tuple(target), tuple(bad))


def test_broadcast_shapes_edge_cases():
    assert fnp.broadcast_shapes((0,), (1,)) == (0,)
    assert fnp.broadcast_shapes((), (2, 3)) == (2, 3)
    assert fnp.broadcast_shapes((3, 1), (3, 1)) == (3, 1)
    for bad in [((0,), (2,)), ((2,), (0,)), ((3,), (4,)), ((2, 1), (3, 1))]:
        with pytest.raises(core.ShapeError, match="mul: "):
            fnp.broadcast_shapes(*bad, name="mul")


def _bid_ref(x, shape, dims):
    expanded = [1] * len(shape)
    for i, d in enumerate(dims):
        expanded[d] = np.shape(x)[i]
    return np.broadcast_to(np.reshape(x, expanded), shape)


BID_CASES = [
    (lambda: _rand(3), (2, 3), (1,)),
    (lambda: _rand(3, 1), (3, 4), (0, 1)),
    (lambda: _rand(3, 1), (2, 3, 4), (1, 2)),
    (lambda: _rand(4, 6)[:, ::2], (2, 4, 3), (1, 2)),           # non-contiguous
    (lambda: _rand(3, 4).T, (5, 4, 3), (1, 2)),                  # transposed view
    (lambda: _rand(6)[1:4], (3, 2), (0,)),                       # offset view
    (lambda: np.zeros((0,)), (3, 0), (1,)),                      # size 0
    (lambda: np.ones((1,)), (0,), (0,)),
    (lambda: np.zeros((2, 0)), (2, 5, 0), (0, 2)),
    (lambda: np.array(2.5), (2, 3), ()),                         # rank 0
    (lambda: np.float64(1.5), (), ()),
    (lambda: np.arange(6, dtype=np.int32).reshape(2, 3), (4, 2, 3), (1, 2)),
]


@pytest.mark.parametrize("make,shape,dims", BID_CASES)
def test_broadcast_in_dim_impl(make, shape, dims):
    x = make()
    snapshot = np.array(x, copy=True)
    want = _bid_ref(x, shape, dims)
    for _ in range(2):
        out = ft.lax.broadcast_in_dim(x, shape=shape, broadcast_dimensions=dims)
        assert out.shape == tuple(shape) and out.dtype == np.asarray(x).dtype
        np.testing.assert_array_equal(out, want)
        assert not np.asarray(out).flags.writeable      # (the Array's raw buffer)
        if out.size:
            with pytest.raises(ValueError):
                np.asarray(out)[(0,) * out.ndim] = 7
        np.testing.assert_array_equal(x, snapshot)
    # usable downstream: reductions, arithmetic and a writeable copy
    np.testing.assert_array_equal(fnp.sum(out), want.sum())
    cp = np.array(out)
    cp += 1
    np.testing.assert_array_equal(cp, want + 1)


# ---------------------------------------------------------------------------
# 8. hot facade composites (facade/record.Composite.evaluate)

def test_hot_facade_composites_match_numpy_and_keep_views():
    """F.linear / relu / cross_entropy keep their values and gradients once their composite
    runs as a lowered program (after runtime.HOT_RUNS calls); view ops still share storage."""
    import sys
    import functrans.nn.functional as F
    rng = np.random.default_rng(7)
    w = rng.standard_normal((5, 4))
    b = rng.standard_normal(5)
    for it in range(runtime.HOT_RUNS + 4):
        x = rng.standard_normal((6, 4))
        y = rng.integers(0, 5, 6)
        tw = ft.tensor(w, requires_grad=True)
        tb = ft.tensor(b, requires_grad=True)
        loss = F.cross_entropy(F.relu(F.linear(ft.tensor(x), tw, tb)), ft.tensor(y))
        loss.backward()
        h = x @ w.T + b
        r = np.maximum(h, 0)
        z = r - r.max(axis=1, keepdims=True)
        p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
        np.testing.assert_allclose(loss.item(), -np.log(p[np.arange(6), y]).mean(), rtol=1e-12)
        g = p.copy()
        g[np.arange(6), y] -= 1
        g = g / 6 * (h > 0)
        np.testing.assert_allclose(tw.grad.numpy(), g.T @ x, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(tb.grad.numpy(), g.sum(0), rtol=1e-10, atol=1e-12)
    assert any(c.prog is not None and c.prog.jaxpr._compiled and c.prog.jaxpr._compiled.hot
               for c in executor.cached("composite")), "no composite was lowered"
    t = ft.tensor(np.arange(6.0))
    for _ in range(runtime.HOT_RUNS + 4):
        v = t.view(2, 3)
        v[0, 0] = 7.0
        assert t[0].item() == 7.0
        t[0] = 0.0


# ---------------------------------------------------------------------------
# 9. staged JVP rules (ad.JVPTrace.process_primitive + staged_rules)

@pytest.mark.parametrize("name", ["tanh_matmul", "zero_tangent_out", "partial_zero_in",
                                  "broadcast_and_reduce", "select"])
def test_staged_jvp_rules_match_finite_differences(name):
    """Each JVP rule staged per signature gives the same tangents on every call (the first
    call runs the rule and stages it, later calls run the staged code), equal to central
    differences in float64; symbolically zero tangents stay exact zeros."""
    rng = np.random.default_rng(3)
    w = rng.standard_normal((4, 3))
    fns = {
        "tanh_matmul": lambda x: fnp.tanh(x @ w) * 2.0,
        "zero_tangent_out": lambda x: fnp.floor(x) + (x > 0) * 1.0,
        "partial_zero_in": lambda x: fnp.sin(x) * fnp.asarray(w[0]) + 1.0,
        "broadcast_and_reduce": lambda x: fnp.sum(fnp.exp(x[:, None] * w[:3]), axis=0),
        "select": lambda x: fnp.where(x > 0.1, fnp.cos(x), x * x),
    }
    f = fns[name]
    x = rng.standard_normal(4 if name == "tanh_matmul" else 3)
    t = rng.standard_normal(x.shape)
    h = 1e-6
    fd = (np.asarray(f(x + h * t)) - np.asarray(f(x - h * t))) / (2 * h)
    for _ in range(3):
        y, ty = ft.jvp(f, (x,), (t,))
        np.testing.assert_allclose(y, f(x), rtol=1e-12)
        np.testing.assert_allclose(ty, fd, rtol=1e-6, atol=1e-8)
    if name == "zero_tangent_out":
        assert np.all(np.asarray(ty) == 0)


def test_gradients_are_fresh_writable_arrays():
    """Gradients never alias each other, an input or a cotangent, and are writable, on the
    first call and once the backward program is hot."""
    x, y = np.ones(3), np.arange(3.0)
    for _ in range(runtime.HOT_RUNS + 2):
        gx, gy = ft.grad(lambda a, b: fnp.sum((a + b) * 3.0), argnums=(0, 1))(x, y)
        assert not np.shares_memory(gx, gy) and gx.flags.writeable and gy.flags.writeable
        g = ft.grad(lambda a: fnp.sum(a))(x)
        assert g.flags.writeable and not np.shares_memory(g, x)
        ct = np.ones(3)
        (gv,) = ft.vjp(lambda a: a * 1.0, x)[1](ct)
        assert not np.shares_memory(gv, ct) and not np.shares_memory(gv, x)
        gx *= 2.0                          # writing into one gradient changes nothing else
        np.testing.assert_array_equal(gy, 3.0)
        np.testing.assert_array_equal(x, 1.0)


# ---------------------------------------------------------------------------
# 10. programs shared by structure (core.structure_key, ClosedJaxpr equality)

def test_closed_jaxprs_equal_by_structure_and_const_identity():
    f = lambda x: fnp.tanh(x) * 2.0 + 1.0
    a = ft.make_jaxpr(f)(np.ones(3))
    b = ft.make_jaxpr(f)(np.ones(3))
    assert a is not b and a == b and hash(a) == hash(b)
    assert a != ft.make_jaxpr(lambda x: fnp.tanh(x) * 3.0 + 1.0)(np.ones(3))   # literal differs
    assert a != ft.make_jaxpr(f)(np.ones(4))                                   # shape differs
    c1, c2 = np.ones(3), np.ones(3)
    g1 = ft.make_jaxpr(lambda x: x * c1)(np.ones(3))
    g2 = ft.make_jaxpr(lambda x: x * c2)(np.ones(3))
    assert g1.consts and g1 != g2                 # equal values, other objects: not shared


def test_grad_through_scan_derives_once_and_stays_correct():
    """The scan body is traced again at every call; its gradient programs are derived once
    (the structure key sees equal bodies) and stay right when the data changes."""
    def loss(w, xs):
        def cell(h, x):
            h = fnp.tanh(h * w + x)
            return h, h
        _, hs = ft.lax.scan(cell, fnp.zeros(3, dtype=xs.dtype), xs)
        return fnp.sum(hs * hs)

    def loss_np(w, xs):
        h, tot = np.zeros(3), 0.0
        for x in xs:
            h = np.tanh(h * w + x)
            tot += np.sum(h * h)
        return tot
    rng = np.random.default_rng(5)
    g = ft.grad(loss)
    sizes = []
    for it in range(runtime.HOT_RUNS + 3):
        w, xs = rng.standard_normal(3), rng.standard_normal((6, 3))
        got = g(w, xs)
        h = 1e-6
        fd = np.array([(loss_np(w + h * e, xs) - loss_np(w - h * e, xs)) / (2 * h)
                       for e in np.eye(3)])
        np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-8)
        sizes.append(len(executor.cached("vjp")))
    assert sizes[-1] == sizes[1], "the gradient of the scan was derived again on later calls"


def test_hot_programs_respect_the_scratch_budget(monkeypatch):
    """Past the scratch budget a hot program stays straight-line code, with the same values."""
    monkeypatch.setattr(BUDGET, "limit", 0)
    w = _rand(7, 3)

    def f(x):                                   # a structure no other test uses
        return fnp.sum(fnp.tanh(x @ w) * fnp.cos(x @ w) + 3.25)
    x = _rand(5, 7)
    first = ft.grad(f)(x)
    for _ in range(runtime.HOT_RUNS + 3):
        np.testing.assert_allclose(ft.grad(f)(x), first, rtol=1e-12)
    prog = executor.cached("vjp")[-1].backward.jaxpr._compiled  # f's
    assert prog.runs >= runtime.HOT_RUNS and not prog.hot


# ---------------------------------------------------------------------------
# scatter_add of rows (the embedding gradient): sorted by row, one add per rank


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_scatter_add_of_rows_has_add_at_bits(dtype, monkeypatch):
    """The rows path adds each row's updates in index order onto the operand, as np.add.at
    does (the same bits, a nonzero operand and repeated rows included); a row updated more
    than SEGMENT_ROUNDS times goes to np.add.at."""
    from functrans.primitives import indexing
    impl = REGISTRY["scatter_add"].impl
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((50, 3, 4)) * 100).astype(dtype)
    for n, hi in ((200, 50), (37, 5), (1, 50)):
        idx = rng.integers(0, hi, (n, 1))
        upd = (rng.standard_normal((n, 3, 4)) * 100).astype(dtype)
        want = x.copy()
        np.add.at(want, (idx[:, 0],), upd)
        got = impl(np, x, idx, upd)
        assert got.dtype == want.dtype and np.array_equal(got, want)
    monkeypatch.setattr(indexing, "SEGMENT_ROUNDS", 2)
    idx = np.zeros((5, 1), np.int64)            # one row updated 5 times: add.at
    upd = np.ones((5, 3, 4), dtype)
    got = impl(np, x, idx, upd)
    assert np.array_equal(got[0], x[0] + 5) and np.array_equal(got[1:], x[1:])
    assert not indexing._add_rows_at(x.copy(), idx[:, 0], upd)
    assert indexing._add_rows_at(x.copy(), np.arange(5), upd)
