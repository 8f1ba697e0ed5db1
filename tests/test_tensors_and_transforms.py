"""Every transformation takes Tensors (a Tensor is a pytree node around its array): the
function sees Tensors, ops on their traced values bind primitives, results come back as
Tensors; ft.func's names are the same functions; functrans.numpy and NumPy take Tensors."""
import threading

import numpy as np
import pytest

import functrans as ft
import functrans.nn as nn
import functrans.numpy as fnp
from functrans.core import FunctransError
from conftest import fd_grad

pytestmark = pytest.mark.usefixtures("x64")  # float64 references: conftest.x64


def num(t):
    return t.detach().numpy() if isinstance(t, ft.Tensor) else np.asarray(t)


def fd_jac(f, x, eps=1e-6):
    x = np.array(x, dtype=np.float64)
    cols = []
    for i in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[i] = eps
        cols.append((np.asarray(f(x + d)) - np.asarray(f(x - d))) / (2 * eps))
    return np.stack(cols, -1).reshape(np.shape(f(x)) + x.shape)


X = np.array([0.3, -1.2, 2.0])
X2 = np.array([[0.5, -0.2], [1.5, 0.7], [-0.4, 0.9]])


def T(a):
    return ft.tensor(a, dtype=ft.float64)


# ---------------------------------------------------------------------------
# the snippet, line by line


def test_grad_of_a_tensor_function_is_a_tensor():
    g = ft.grad(lambda t: (t * t).sum())(ft.ones(3))
    assert type(g) is ft.Tensor and not g.requires_grad and g.grad_fn is None
    np.testing.assert_allclose(num(g), [2.0, 2.0, 2.0])

    def f(t):
        return (t.sin() * t.exp()).sum() + (t ** 3).mean()
    g = ft.grad(f)(T(X))
    assert type(g) is ft.Tensor and g.dtype == ft.float64
    want = fd_grad(lambda a: float((np.sin(a) * np.exp(a)).sum() + (a ** 3).mean()), X)
    np.testing.assert_allclose(num(g), want, rtol=1e-6)


def test_vmap_of_tensor_functions_returns_tensors():
    y = ft.vmap(lambda t: t * 2)(ft.ones(3, 2))
    assert type(y) is ft.Tensor and tuple(y.shape) == (3, 2)
    np.testing.assert_allclose(num(y), np.full((3, 2), 2.0))
    s = ft.vmap(lambda t: t.sum())(T(X2))
    assert type(s) is ft.Tensor
    np.testing.assert_allclose(num(s), X2.sum(1))


def test_jit_of_a_tensor_function():
    f = ft.jit(lambda t: t * 2 + t.tanh())
    for _ in range(2):                                   # traced, then cached
        y = f(T(X))
        assert type(y) is ft.Tensor
        np.testing.assert_allclose(num(y), X * 2 + np.tanh(X))


def test_numpy_functions_on_tensors():
    t = T(X2)
    s = np.sin(t)
    assert type(s) is ft.Tensor
    np.testing.assert_allclose(num(s), np.sin(X2))
    m = np.mean(ft.ones(3))
    assert type(m) is ft.Tensor and float(m) == 1.0
    np.testing.assert_allclose(num(np.mean(t, axis=0)), X2.mean(0))
    np.testing.assert_allclose(num(np.mean(t, axis=1, keepdims=True)), X2.mean(1, keepdims=True))
    np.testing.assert_allclose(num(np.sum(t, axis=0)), X2.sum(0))
    np.testing.assert_allclose(num(np.std(t)), X2.std())          # NumPy's ddof=0
    np.testing.assert_allclose(num(np.var(t, axis=0, ddof=1)), X2.var(0, ddof=1))
    np.testing.assert_allclose(num(np.max(t)), X2.max())
    assert int(np.argmax(t)) == int(X2.argmax())
    c = np.concatenate([t, t])                 # NumPy's own functions: NumPy arrays, as torch
    assert type(c) is np.ndarray
    np.testing.assert_allclose(c, np.concatenate([X2, X2]))
    a = np.asarray(t)
    assert type(a) is np.ndarray
    np.testing.assert_allclose(a, X2)
    np.testing.assert_allclose(num(np.add(t, 1)), X2 + 1)
    r = np.ones(2) - t                          # ndarray operator: the Tensor's reflected op
    assert type(r) is ft.Tensor
    np.testing.assert_allclose(num(r), 1 - X2)
    np.testing.assert_allclose(num(np.maximum(np.zeros(2), t)), np.maximum(0, X2))
    q = np.gcd(t.long(), 4)                     # no Tensor op: NumPy on the values, a Tensor
    assert type(q) is ft.Tensor
    np.testing.assert_array_equal(num(q), np.gcd(X2.astype(np.int64), 4))


def test_numpy_ufunc_on_a_tensor_is_the_recorded_tensor_op():
    x = T(X).requires_grad_()
    y = np.exp(x) * np.sin(x)
    assert y.grad_fn is not None
    y.sum().backward()
    want = fd_grad(lambda a: float((np.exp(a) * np.sin(a)).sum()), X)
    np.testing.assert_allclose(num(x.grad), want, rtol=1e-6)


def test_numpy_conversion_of_a_tensor_that_requires_grad_follows_torch():
    x = ft.ones(2, requires_grad=True)
    msg = "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead."
    with pytest.raises(RuntimeError) as e:
        np.asarray(x)
    assert str(e.value) == msg
    with pytest.raises(RuntimeError, match="requires grad"):
        np.concatenate([x, x])
    with pytest.raises(RuntimeError, match="requires grad"):
        np.gcd(x, 2)                            # a ufunc without a Tensor op converts
    with ft.no_grad():                          # allowed with grad mode off, as in torch
        assert np.asarray(x).tolist() == [1.0, 1.0] and x.numpy().tolist() == [1.0, 1.0]
    with pytest.raises(TypeError, match="cannot write into a Tensor"):
        np.add(ft.ones(2), 1, out=ft.ones(2))
    with pytest.raises(TypeError, match="out= is not supported"):
        ft.ones(2).sum(out=np.zeros(()))


# ---------------------------------------------------------------------------
# every transformation


def test_value_and_grad_vjp_jvp_linearize_on_tensors():
    def f(t):
        return (t * t.cos()).sum()
    want = fd_grad(lambda a: float((a * np.cos(a)).sum()), X)
    v, g = ft.value_and_grad(f)(T(X))
    assert type(v) is ft.Tensor and type(g) is ft.Tensor
    np.testing.assert_allclose(float(v), (X * np.cos(X)).sum())
    np.testing.assert_allclose(num(g), want, rtol=1e-6)
    out, vjp_fn = ft.vjp(lambda t: t * t.cos(), T(X))
    (ct,) = vjp_fn(ft.ones(3, dtype=ft.float64))
    assert type(out) is ft.Tensor and type(ct) is ft.Tensor
    np.testing.assert_allclose(num(ct), want, rtol=1e-6)
    tv = np.array([1.0, -2.0, 0.5])
    y, dy = ft.jvp(lambda t: t * t.cos(), (T(X),), (T(tv),))
    assert type(y) is ft.Tensor and type(dy) is ft.Tensor
    np.testing.assert_allclose(num(dy), np.diag(fd_jac(lambda a: a * np.cos(a), X)) * tv,
                               rtol=1e-6)
    y, lin = ft.linearize(lambda t: t * t.cos(), T(X))
    np.testing.assert_allclose(num(lin(T(tv))), num(dy), rtol=1e-12)


def test_jacobians_and_hessian_of_tensor_functions_are_tensors():
    def f(t):
        return t.tanh() * t.sum()

    def fa(a):
        return np.tanh(a) * a.sum()
    for jac in (ft.jacrev, ft.jacfwd, ft.func.jacrev, ft.func.jacfwd):
        j = jac(f)(T(X))
        assert type(j) is ft.Tensor and tuple(j.shape) == (3, 3)
        np.testing.assert_allclose(num(j), fd_jac(fa, X), rtol=1e-6, atol=1e-8)
    h = ft.hessian(lambda t: (t.sin() * t).sum())(T(X))
    assert type(h) is ft.Tensor and tuple(h.shape) == (3, 3)
    want = fd_jac(lambda a: np.cos(a) * a + np.sin(a), X)
    np.testing.assert_allclose(num(h), want, rtol=1e-6, atol=1e-8)
    ja, jb = ft.jacrev(lambda a, b: a * b.exp(), argnums=(0, 1))(T(X), T(X[::-1].copy()))
    assert type(ja) is ft.Tensor and type(jb) is ft.Tensor
    np.testing.assert_allclose(num(ja), np.diag(np.exp(X[::-1])), rtol=1e-12)


def test_checkpoint_and_lax_control_flow_take_tensors():
    def f(t):
        return ft.checkpoint(lambda u: (u.sin() * u).sum())(t)
    g = ft.grad(f)(T(X))
    assert type(g) is ft.Tensor
    np.testing.assert_allclose(num(g), np.cos(X) * X + np.sin(X), rtol=1e-10)

    def scan_loss(t):
        def body(c, x):
            c = c * x.cos() + x
            return c, c.sum()
        c, ys = ft.lax.scan(body, t[0], t)
        assert isinstance(c, ft.Tensor) and isinstance(ys, ft.Tensor)
        return (c * c).sum() + ys.sum()

    def scan_np(a):
        c, ys = a[0], []
        for x in a:
            c = c * np.cos(x) + x
            ys.append(c.sum())
        return float((c * c).sum() + sum(ys))
    g = ft.grad(scan_loss)(T(X2))
    np.testing.assert_allclose(num(g), fd_grad(scan_np, X2), rtol=1e-6, atol=1e-8)

    def cond_f(t):
        return ft.lax.cond(t.sum() > 0, lambda u: (u * u).sum(), lambda u: u.sin().sum(), t)
    for a, want in ((X, 2 * X), (-np.abs(X), np.cos(-np.abs(X)))):
        g = ft.grad(cond_f)(T(a))
        assert type(g) is ft.Tensor
        np.testing.assert_allclose(num(g), want, rtol=1e-10)


def test_pytrees_of_tensors_and_functional_call():
    ft.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1)).double()
    params = {k: v.detach() for k, v in model.named_parameters()}
    x = ft.randn(5, 3, dtype=ft.float64)
    g = ft.grad(lambda p, x: ft.func.functional_call(model, p, (x,)).sum())(params, x)
    assert set(g) == set(params) and all(type(v) is ft.Tensor for v in g.values())
    model(x).sum().backward()
    for k, p in model.named_parameters():
        np.testing.assert_allclose(num(g[k]), num(p.grad), rtol=1e-10)
    w = num(params["0.weight"]).copy()

    def loss_of_w(a):
        p = dict(params, **{"0.weight": ft.tensor(a)})
        return float(ft.func.functional_call(model, p, (x,)).sum())
    np.testing.assert_allclose(num(g["0.weight"]), fd_grad(loss_of_w, w), rtol=1e-6)
    # the same through ft.func.grad, vmap over a batch of inputs, and jit
    g2 = ft.func.grad(lambda p, x: ft.func.functional_call(model, p, (x,)).sum())(params, x)
    np.testing.assert_allclose(num(g2["2.bias"]), num(g["2.bias"]), rtol=1e-12)
    per = ft.func.vmap(lambda x: ft.func.functional_call(model, params, (x,)), in_dims=0)(x)
    assert type(per) is ft.Tensor
    np.testing.assert_allclose(num(per), num(model(x)), rtol=1e-12)
    jf = ft.jit(lambda p, x: ft.func.functional_call(model, p, (x,)))
    np.testing.assert_allclose(num(jf(params, x)), num(model(x)), rtol=1e-12)


def test_class_targets_under_jit_with_x64_off(x32):
    """With x64 off (JAX's default), ft.jit canonicalizes int64 targets to int32, as JAX does;
    the facade's losses take them there, and the jitted step gives the eager gradient. Eager
    facade calls keep torch's rule (an int32 target is refused)."""
    ft.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 5))
    params = {k: v.detach() for k, v in model.named_parameters()}
    x, y = ft.randn(6, 3), ft.tensor([0, 4, 2, 1, 3, 0])
    loss = lambda p, x, y: nn.functional.cross_entropy(ft.func.functional_call(model, p, (x,)), y)
    val, g = ft.jit(ft.value_and_grad(loss))(params, x, y)
    nn.functional.cross_entropy(model(x), y).backward()
    for k, p in model.named_parameters():
        np.testing.assert_allclose(num(g[k]), num(p.grad), rtol=1e-5, atol=1e-7)
    nll = ft.jit(lambda z, y: nn.functional.nll_loss(z.log_softmax(1), y))
    np.testing.assert_allclose(float(nll(model(x), y)), float(val), rtol=1e-6)
    with pytest.raises(RuntimeError, match="expected target dtype to be Long or Byte, but got Int"):
        nn.functional.cross_entropy(model(x), y.int())


def test_parameters_requiring_grad_inside_a_transformation_are_constants():
    ft.manual_seed(1)
    lin = nn.Linear(3, 2).double()
    x = T(X)
    g = ft.grad(lambda t: lin(t).sum())(x)            # no autograd node is recorded
    assert type(g) is ft.Tensor and lin.weight.grad is None
    np.testing.assert_allclose(num(g), num(lin.weight).sum(0), rtol=1e-12)


def test_detach_inside_a_transformation_stops_the_derivative():
    g = ft.grad(lambda t: (t.detach() * t).sum())(T(X))
    np.testing.assert_allclose(num(g), X)


def test_inplace_on_a_traced_tensor_is_functional():
    def f(t):
        u = t * 1
        u.mul_(t)
        u += 1
        return u.sum()
    np.testing.assert_allclose(num(ft.grad(f)(T(X))), 2 * X)


def test_errors_name_tensor():
    buf = T(np.zeros(3))
    with pytest.raises(FunctransError, match="Tensor holding a traced value"):
        ft.grad(lambda t: buf.add_(t).sum())(T(X))
    with pytest.raises(TypeError, match="Tensor holding a traced value"):
        ft.grad(lambda t: np.asarray(t).sum())(T(X))
    with pytest.raises(RuntimeError, match="functrans.numpy functions take a Tensor's value"):
        fnp.sin(ft.ones(2, requires_grad=True))


def test_func_aliases_take_torch_argument_names():
    y = ft.func.vmap(lambda a, b: a * b, in_dims=(0, None), out_dims=1)(T(X2), T([2.0, 3.0]))
    assert type(y) is ft.Tensor
    np.testing.assert_allclose(num(y), (X2 * [2.0, 3.0]).T)
    with pytest.raises(NotImplementedError, match="randomness='different'"):
        ft.func.vmap(lambda a: a, randomness="different")
    with pytest.raises(NotImplementedError, match="chunk_size=2"):
        ft.func.jacrev(lambda a: a, chunk_size=2)
    g, v = ft.func.grad_and_value(lambda t: (t * t).sum())(T(X))
    np.testing.assert_allclose(num(g), 2 * X)
    np.testing.assert_allclose(float(v), (X * X).sum())
    out, fn = ft.func.vjp(lambda t: t.exp(), T(X))
    np.testing.assert_allclose(num(fn(ft.ones(3, dtype=ft.float64))[0]), np.exp(X))


def test_functrans_numpy_takes_tensors_and_returns_tensors():
    t = T(X2)
    y = fnp.tanh(t)
    assert type(y) is ft.Tensor
    np.testing.assert_allclose(num(y), np.tanh(X2))
    s = fnp.concatenate([t, t], axis=1)
    assert type(s) is ft.Tensor and tuple(s.shape) == (3, 4)
    a, b = fnp.split(t, 2, axis=1)
    assert type(a) is ft.Tensor
    g = ft.grad(lambda u: fnp.sum(fnp.sin(u) * u))(T(X))    # inside a transformation too
    assert type(g) is ft.Tensor
    np.testing.assert_allclose(num(g), np.cos(X) * X + np.sin(X), rtol=1e-12)
    assert type(fnp.sin(np.ones(2))) is ft.Array            # arrays give ft.Arrays


def test_tree_map_over_tensors_maps_their_arrays():
    tree = {"a": T(X), "b": [T(X2)]}
    out = ft.tree_map(lambda a: a * 2, tree)
    assert type(out["a"]) is ft.Tensor and type(out["b"][0]) is ft.Tensor
    np.testing.assert_allclose(num(out["b"][0]), 2 * X2)
    assert ft.tree_leaves(tree, is_leaf=ft.is_tensor)[0] is tree["a"]   # Tensors as leaves


def test_transformations_in_threads_with_tensors():
    errors, results = [], []

    def work():
        try:
            for _ in range(5):
                results.append(num(ft.grad(lambda t: (t * t).sum())(T(X))))
        except Exception as e:              # pragma: no cover - reported below
            errors.append(e)
    threads = [threading.Thread(target=work) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
    for r in results:
        np.testing.assert_allclose(r, 2 * X)


def test_repr_of_a_tensor_inside_a_transformation_shows_the_traced_value():
    seen = []
    ft.jit(lambda t: seen.append(repr(t)) or t * 2)(ft.ones(2))
    assert seen == ["Tensor(Traced<f32[2]>with<JaxprTrace>)"]


def test_loops_custom_vjp_and_stop_gradient_take_tensors():
    g = ft.grad(lambda x: ft.lax.fori_loop(0, 3, lambda i, c: c * x, x).sum())(T(X))
    assert type(g) is ft.Tensor
    np.testing.assert_allclose(num(g), 4 * X ** 3, rtol=1e-12)
    a = np.array([1.0, 2.0])
    g = ft.grad(lambda x: ft.lax.while_loop(lambda c: c.sum() < 10, lambda c: c * 2, x,
                                            max_iters=5).sum())(T(a))
    np.testing.assert_allclose(num(g), [4.0, 4.0])              # two doublings

    @ft.custom_vjp
    def f(x):
        return x * 2
    f.defvjp(lambda x: (x * 2, None), lambda r, ct: (ct * 3,))
    g = ft.grad(lambda x: f(x).sum())(T(a))
    assert type(g) is ft.Tensor
    np.testing.assert_allclose(num(g), [3.0, 3.0])
    s = ft.stop_gradient(T(a))
    assert type(s) is ft.Tensor
    np.testing.assert_allclose(num(ft.grad(lambda x: (ft.stop_gradient(x) * x).sum())(T(a))), a)


def test_index_and_boolean_methods_on_traced_tensors():
    t = T(X2)
    for f in (lambda x: x.argmax(), lambda x: x.argmax(1), lambda x: x.argmin(0, keepdim=True),
              lambda x: x.argmax(keepdim=True), lambda x: (x > 0).all(), lambda x: (x > 0).any(1),
              lambda x: (x > 0).logical_not(), lambda x: (x > 0).logical_and(x < 1),
              lambda x: (x > 0).logical_xor(x < 1)):
        want = f(t)
        got = ft.jit(f)(t)
        assert type(got) is ft.Tensor and got.dtype == want.dtype
        np.testing.assert_array_equal(num(got), num(want))
    per_row = ft.vmap(lambda r: r.argmax())(t)
    np.testing.assert_array_equal(num(per_row), X2.argmax(1))


def test_what_plain_tracing_refuses_names_the_tensor_and_the_fix():
    class Double(ft.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2
    with pytest.raises(FunctransError, match=r"Tensor holding a traced value .* Double\.apply "
                                             r".* ft\.custom_vjp"):
        ft.grad(lambda t: Double.apply(t).sum())(T(X))
    with pytest.raises(FunctransError, match="boolean mask .* ft.where"):
        ft.jit(lambda t: t[t > 0].sum())(T(X))
    x = T(X).requires_grad_()                   # eager, on concrete data: as before
    Double.apply(x).sum().backward()
    np.testing.assert_allclose(num(x.grad), [2.0, 2.0, 2.0])


def test_sort_argsort_isclose_on_traced_tensors():
    t = ft.tensor(np.array([[3.0, 1.0, 2.0], [0.0, 5.0, 4.0]]))
    w = ft.tensor(np.arange(3.0))
    g = ft.grad(lambda u: (u.sort(dim=1).values * w).sum())(t)
    np.testing.assert_allclose(num(g), [[2.0, 0.0, 1.0], [0.0, 2.0, 1.0]])
    idx = ft.jit(lambda u: u.argsort(dim=1))(t)
    np.testing.assert_array_equal(num(idx), [[1, 2, 0], [0, 2, 1]])
    close = ft.vmap(lambda u: ft.isclose(u, u + 1e-9))(t)
    assert type(close) is ft.Tensor and bool(num(close).all())


def test_python_bool_answers_of_traced_tensors_name_the_fix():
    with pytest.raises(ft.ConcretizationTypeError, match=r"ft.isclose\(a, b\).all\(\)"):
        ft.jit(lambda u: u * float(u.allclose(u)))(ft.ones(2))
    with pytest.raises(ft.ConcretizationTypeError, match=r"\(a == b\).all\(\)"):
        ft.grad(lambda u: u.sum() * float(ft.equal(u, u)))(ft.ones(2))


def test_random_draws_inside_jit_or_vmap_are_refused_not_frozen():
    """A draw from the global generator (dropout, randn) inside ft.jit would happen once at
    trace time and repeat at every call: refused with what to do; ft.compile draws at
    every call, and grad (which records eagerly) draws as eager code does."""
    drop = ft.nn.Dropout(0.5)
    with pytest.raises(RuntimeError, match="would be made once when the function is traced"):
        ft.jit(lambda x: ft.func.functional_call(drop, {}, (x,)))(ft.ones(8))
    with pytest.raises(RuntimeError, match="ft.compile"):
        ft.jit(lambda x: x + ft.randn(3))(np.ones(3))
    with pytest.raises(RuntimeError, match="vmapped batch"):
        ft.vmap(lambda t: drop(t))(ft.ones(2, 8))
    net = ft.compile(ft.nn.Dropout(0.5))
    masks = [(net(ft.ones(64)) == 0).numpy() for _ in range(3)]
    assert not (np.array_equal(masks[0], masks[1]) and np.array_equal(masks[1], masks[2]))
    lin = ft.nn.Linear(3, 2)
    g = ft.func.grad(lambda p, x: ft.func.functional_call(
        ft.nn.Sequential(lin, ft.nn.Dropout(0.3)), p, (x,)).sum())(
        dict(ft.nn.Sequential(lin).named_parameters()), ft.ones(2, 3))
    assert set(g) == {"0.weight", "0.bias"}
