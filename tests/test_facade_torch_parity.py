"""Parity with PyTorch's test_autograd.py (issue 31): dtypes with torch's attributes, grad
modes on classes, inference-mode views, torch's errors and warnings, and the op names those
tests use. Values are compared with torch where the oracle extra is installed."""
import inspect
import pickle
import warnings

import numpy as np
import pytest

import functrans as ft
from functrans.facade import grad_mode

try:
    import torch
except ImportError:        # the oracle extra is optional
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="compares with torch (oracle extra)")


@pytest.fixture(autouse=True)
def _modes_restored():
    before = grad_mode.STATE.enabled
    yield
    assert grad_mode.STATE.enabled == before


NAMES = ["float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool",
         "complex64", "complex128"]


def test_dtype_is_a_numpy_dtype_to_numpy():
    d = ft.float32
    assert d == np.float32 and np.float32 == d and d == np.dtype("float32") and d == "float32"
    assert d != ft.float64 and not (d != np.float32)
    assert hash(d) == hash(np.dtype(np.float32)) and {np.dtype(np.float32): 1}[d] == 1
    assert np.dtype(d) == np.float32 and np.zeros(2, d).dtype == np.float32
    assert np.issubdtype(d, np.floating) and d.kind == "f" and d.name == "float32"
    x = ft.ones(2)
    assert x.dtype is ft.float32 and x.dtype == np.float32 and str(x.dtype) == "float32"
    assert repr(ft.int64) == "ft.int64" and pickle.loads(pickle.dumps(ft.int64)) is ft.int64
    assert ft.zeros(2, dtype=ft.int32).dtype is ft.int32
    assert ft.tensor([1, 2]).to(ft.float64).dtype is ft.float64
    assert ft.get_default_dtype() is ft.float32
    assert ft.promote_types(ft.int32, ft.float32) is ft.float32
    assert ft.result_type(x, 1) is ft.float32


@needs_torch
@pytest.mark.parametrize("name", NAMES)
def test_dtype_attributes_as_torch(name):
    ours, theirs = getattr(ft, name), getattr(torch, name)
    for attr in ("is_floating_point", "is_complex", "is_signed", "itemsize"):
        assert getattr(ours, attr) == getattr(theirs, attr), attr
    assert ours.to_real().name == str(theirs.to_real())[6:]
    if ours.kind in "fc" and name != "float16":
        assert ours.to_complex().name == str(theirs.to_complex())[6:]


def test_no_grad_on_a_class_warns_and_wraps_the_constructor():
    with pytest.warns(FutureWarning, match="Decorating classes is deprecated"):
        @ft.no_grad()
        class Foo:
            def __init__(self):
                self.inside = ft.is_grad_enabled()

            def foo(self):
                return ft.is_grad_enabled()
    foo = Foo()
    assert foo.inside is False and foo.foo() is True


def test_deleting_autograd_state_raises_as_torch():
    x = ft.randn(2, requires_grad=True)
    del x.grad
    assert x.grad is None
    # (del t._grad_fn is not refused: a __delattr__ would slow every attribute write)
    for name, msg in [("data", "Deleting tensor data"), ("requires_grad", "must be a bool")]:
        with pytest.raises(RuntimeError, match=msg):
            delattr(x, name)
    with pytest.raises(TypeError):
        x.data = None


def test_set_data_keeps_requires_grad_float():
    a = ft.tensor(1.0, requires_grad=True)
    a.data = ft.tensor(2.0)
    assert a.item() == 2.0
    with pytest.raises(RuntimeError, match="must be floating point or complex dtype"):
        a.data = ft.tensor(3)


def test_volatile_and_autograd_torch():
    v = ft.autograd.torch.randn(3)
    assert ft.autograd.torch is ft
    with pytest.warns(UserWarning, match="volatile was removed"):
        assert v.volatile is False


def test_gradcheck_module_and_its_helpers():
    from functrans.autograd.gradcheck import (GradcheckError, get_analytical_jacobian,
                                              get_numerical_jacobian)
    assert inspect.isfunction(ft.autograd.gradcheck) and issubclass(GradcheckError, RuntimeError)
    a = ft.rand(2, 2, dtype=ft.float64, requires_grad=True)
    b = ft.rand(2, 2, dtype=ft.float64, requires_grad=True)

    def fn(ins):
        return 2 * ins[0] + ins[1], ins[0] + 2 * ins[1]
    with pytest.warns(FutureWarning, match="get_numerical_jacobian was part of"):
        j = get_numerical_jacobian(fn, (a, b), eps=1e-6)
    np.testing.assert_allclose(j[0].numpy(), 2 * np.eye(4), atol=1e-6)
    np.testing.assert_allclose(j[1].numpy(), np.eye(4), atol=1e-6)
    with pytest.raises(ValueError, match="Expected grad_out to be 1.0"), \
            pytest.warns(FutureWarning):
        get_numerical_jacobian(fn, (a, b), grad_out=2.0)
    with pytest.warns(UserWarning, match="get_analytical_jacobian was part of"):
        jac, reentrant, _, _ = get_analytical_jacobian((a, b), fn((a, b))[1])
    np.testing.assert_allclose(jac[1].numpy(), 2 * np.eye(4))
    assert reentrant


class _Jitter(ft.autograd.Function):
    @staticmethod
    def forward(ctx, x, jitter):
        ctx.jitter = jitter
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        return g * (1 + ft.rand_like(g) * ctx.jitter), None


def test_gradcheck_reentrancy_and_value_dependent_outputs():
    x = ft.randn(3, dtype=ft.float64, requires_grad=True)
    assert ft.autograd.gradcheck(lambda t: _Jitter.apply(t, 0.0), x)
    with pytest.raises(RuntimeError, match="Backward is not reentrant"):
        ft.autograd.gradcheck(lambda t: _Jitter.apply(t, 1e-7), x)
    assert ft.autograd.gradcheck(lambda t: _Jitter.apply(t, 1e-7), x, nondet_tol=1e-5)
    one = ft.ones(1, dtype=ft.float64, requires_grad=True)
    with pytest.raises(AssertionError, match="same shape when inputs are perturbed"):
        ft.autograd.gradcheck(lambda t: ft.cat([t, t]) if bool((t >= 1).all()) else t, one)
    with pytest.raises(AssertionError, match="same dtype when inputs are perturbed"):
        ft.autograd.gradcheck(lambda t: t.float() if bool((t >= 1).all()) else t, one)


def test_out_argument_as_torch():
    a = ft.randn(2, 2, requires_grad=True)
    b = ft.randn(2, 2, requires_grad=True)
    x = ft.zeros(2, 2)
    with pytest.raises(RuntimeError, match=r"mul\(\): functions with out=\.\.\. arguments don't "
                                           "support automatic differentiation"):
        ft.mul(a, b, out=x)
    with ft.no_grad():
        assert ft.mul(a, b, out=x) is x
    np.testing.assert_allclose(x.numpy(), (a * b).detach().numpy())
    assert x._version == 1
    with pytest.raises(RuntimeError, match="out="):
        ft.mul(ft.ones(2), ft.ones(2), out=ft.zeros(2, requires_grad=True))
    y = ft.zeros(0)
    ft.sin(ft.tensor([0.0, 1.0]), out=y)             # resized to the result's shape
    np.testing.assert_allclose(y.numpy(), np.sin([0.0, 1.0]), rtol=1e-6)


def test_resize_and_set_as_torch():
    x = ft.tensor([1.0])
    x.resize_((1, 2))
    assert tuple(x.shape) == (1, 2) and x._version == 1 and x[0, 0].item() == 1.0
    x.resize_as_(ft.zeros(3))
    assert tuple(x.shape) == (3,) and x._version == 2
    x.resize_(3)
    assert x._version == 2                           # same shape: no bump
    with pytest.raises(RuntimeError, match="cannot resize variables that require grad"):
        ft.ones(2, requires_grad=True).resize_(3)
    p = ft.nn.Parameter(ft.ones(16, dtype=ft.float64))
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        p.set_(p[1:])
    for n in (15, 14):
        with ft.no_grad():
            p.set_(p[1:])
            p.grad = None
        ft.cat((p, p)).sum().backward()
        assert tuple(p.shape) == (n,) and np.all(p.grad.numpy() == 2)


def test_memory_formats():
    x = ft.randn(2, 3, 4, 5)
    assert x.is_contiguous() and x.is_contiguous(memory_format=ft.contiguous_format)
    assert not x.is_contiguous(memory_format=ft.channels_last)
    y = x.contiguous(memory_format=ft.channels_last)
    assert y.is_contiguous(memory_format=ft.channels_last) and not y.is_contiguous()
    np.testing.assert_array_equal(y.numpy(), x.numpy())
    if torch is not None:
        t = torch.randn(2, 3, 4, 5).contiguous(memory_format=torch.channels_last)
        assert y.stride() == t.stride()
    assert repr(ft.channels_last) == "torch.channels_last"
    assert not ft.randn(2, 3).is_contiguous(memory_format=ft.channels_last)
    with pytest.raises(RuntimeError, match="required rank 4 tensor"):
        ft.randn(2, 3).contiguous(memory_format=ft.channels_last)


def _inference_views(lib):
    """What torch reports about views taken in inference mode (of normal and of inference
    tensors), and its refusals; run under torch and functrans."""
    log = []
    for rg in (True, False):
        a = lib.ones(1, 2, 3, requires_grad=rg).clone()
        with lib.inference_mode():
            v = a.view(-1)
            log.append((lib.is_inference(v), v.requires_grad, v._is_view(), v.is_leaf))
            c = lib.ones(1, 2, 3, requires_grad=rg)
            w = c.view(-1)
            log.append((lib.is_inference(w), w.requires_grad))
        u = c.view(-1)
        log.append((lib.is_inference(u), u.requires_grad, u._is_view(), u.is_leaf))
        try:
            v.add_(2)
            log.append("ok")
        except RuntimeError as e:
            log.append(str(e)[:70])
        with lib.inference_mode():
            v2 = a.view(-1)
        a.mul_(2)
        try:
            v2.grad_fn
            log.append("ok")
        except RuntimeError as e:
            log.append(str(e)[:90])
    return log


@needs_torch
def test_inference_mode_views_as_torch():
    assert _inference_views(ft) == _inference_views(torch)


def _inplace_views(lib):
    x = lib.ones(2, 3, requires_grad=True)
    out = []
    try:
        x.transpose_(0, 1)
    except RuntimeError as e:
        out.append(str(e))
    y = x.clone()
    y.transpose_(0, 1)
    out.append((tuple(y.shape), y._version, y._is_view(), y.is_leaf))
    y.t_()
    y.unsqueeze_(0)
    y.squeeze_(0)
    out.append((tuple(y.shape), y._version))
    (y * lib.arange(3.0)).sum().backward()
    out.append(x.grad.tolist())
    return out


@needs_torch
def test_inplace_view_ops_as_torch():
    assert _inplace_views(ft) == _inplace_views(torch)


def _medians(lib):
    x = lib.tensor([[3., 1., 2., 5.], [float("nan"), 0., 1., 2.], [4., 4., 1., 4.]],
                   requires_grad=True)
    out = [lib.median(x).item(), lib.nanmedian(x).item()]
    for f in (lib.median, lib.nanmedian):
        for dim, keep in ((1, False), (0, True)):
            v, i = f(x, dim, keepdim=keep)
            (v * lib.arange(1.0, v.numel() + 1).reshape(v.shape)).sum().backward()
            out += [v.tolist(), i.tolist(), x.grad.tolist()]
            x.grad = None
    for f in (lib.min, lib.max, lib.median, lib.nanmedian):
        y = lib.tensor([1., 0., 1., 0., 1., 0.], requires_grad=True)
        f(y).backward()
        out.append(y.grad.tolist())
    return out


@needs_torch
def test_median_values_indices_and_gradients_as_torch():
    np.testing.assert_equal(_medians(ft), _medians(torch))


@needs_torch
def test_isin_and_signbit_as_torch():
    x = [[1, 2], [3, 4.0]]
    for lib in (ft, torch):
        a = lib.tensor(x, requires_grad=True)
        r = lib.isin(a, lib.tensor([2, 3]))
        assert not r.requires_grad and r.dtype == lib.bool
    assert ft.isin(ft.tensor(x), ft.tensor([2, 3]), invert=True).tolist() == \
        torch.isin(torch.tensor(x), torch.tensor([2, 3]), invert=True).tolist()
    z = [0.0, -0.0, -1.0, 2.0]
    assert ft.signbit(ft.tensor(z)).tolist() == torch.signbit(torch.tensor(z)).tolist()


def _complex_polar(lib):
    r = lib.tensor([1.0, 2.0], dtype=lib.float64, requires_grad=True)
    i = lib.tensor([3.0, -1.0], dtype=lib.float64, requires_grad=True)
    out = []
    for f in (lib.complex, lib.polar):
        z = f(r, i)
        (z * lib.tensor([0.5 + 2j, -1 + 1j], dtype=lib.complex128)).real.sum().backward()
        out += [str(z.dtype)[-10:], z.tolist(), r.grad.tolist(), i.grad.tolist()]
        r.grad = i.grad = None
    out.append(str(lib.complex(r.float(), i.float()).dtype)[-9:])
    return out


@needs_torch
def test_complex_and_polar_as_torch():
    np.testing.assert_allclose(np.array(_complex_polar(ft)[1]), np.array(_complex_polar(torch)[1]))
    ours, theirs = _complex_polar(ft), _complex_polar(torch)
    assert [o for k, o in enumerate(ours) if k % 4 == 0] == \
        [t for k, t in enumerate(theirs) if k % 4 == 0]
    for a, b in zip(ours, theirs):
        if isinstance(a, list):
            np.testing.assert_allclose(np.array(a), np.array(b), rtol=1e-12)


def test_gradcheck_complex_inputs_and_outputs():
    a = ft.ones(2, 2, dtype=ft.float64, requires_grad=True)
    b = ft.ones(2, 2, dtype=ft.float64, requires_grad=True)
    assert ft.autograd.gradcheck(lambda x, y: (ft.complex(x, y), x + 1), (a, b))
    c = ft.ones(2, 2, dtype=ft.complex128, requires_grad=True)
    assert ft.autograd.gradcheck(lambda z: (z * z.conj() + 2j * z, z.real), (c,))

    def hooked(x):
        y = x.clone()
        y.register_hook(lambda g: g + 1e-2)
        return y
    with pytest.raises(RuntimeError, match="While considering the imaginary part of complex "
                                           "outputs only, Jacobian mismatch for output 0"):
        ft.autograd.gradcheck(hooked, (c,))
    with pytest.raises(RuntimeError, match="^Jacobian mismatch for output 0 with respect to "):
        ft.autograd.gradcheck(lambda z: hooked(z).real * 1.0, (c,))


@needs_torch
def test_grads_batched_as_torch():
    xs = np.random.default_rng(0).standard_normal((2, 2))
    res = []
    for lib in (ft, torch):
        x = lib.tensor(xs, requires_grad=True)
        w = lib.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=lib.float64)
        bg = lib.arange(3.0, dtype=lib.float64).reshape(3, 1, 1) * lib.ones(3, 2, 2,
                                                                              dtype=lib.float64)
        (g,) = lib.autograd.grad(x * w * x, (x,), (bg,), is_grads_batched=True)
        (s,) = lib.autograd.grad((x * w).sum(), (x,), (lib.arange(3.0, dtype=lib.float64),),
                                 is_grads_batched=True)
        res.append((g.detach().numpy(), s.detach().numpy()))
        with pytest.raises(RuntimeError, match="If `is_grads_batched=True`, we interpret the "
                                               "first"):
            lib.autograd.grad(x * 2, (x,), (lib.ones(2, 2),), is_grads_batched=True)
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b)


def _scatter_reduce_case(lib, fn, reduce, include_self, x, s, w):
    X, S = lib.tensor(x, requires_grad=True), lib.tensor(s, requires_grad=True)
    if fn == "scatter_reduce":
        o = lib.scatter_reduce(X, 0, lib.tensor(np.array([[0, 1, 0], [1, 0, 0]])), S, reduce,
                               include_self=include_self)
    else:
        o = lib.index_reduce(X, 0, lib.tensor(np.array([0, 0])), S, reduce,
                             include_self=include_self)
    (o * lib.tensor(w)).sum().backward()
    return o.detach().numpy(), X.grad.numpy(), S.grad.numpy()


@needs_torch
@pytest.mark.parametrize("fn", ["scatter_reduce", "index_reduce"])
@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
def test_scatter_and_index_reduce_as_torch(fn, reduce):
    if fn == "index_reduce" and reduce == "sum":
        pytest.skip("index_reduce has no sum (index_add)")
    rng = np.random.default_rng(1)
    for include_self in (True, False):
        for ties in (False, True):
            x, s, w = (rng.standard_normal((2, 3)) for _ in range(3))
            if reduce == "prod":
                s[0, 1] = 0.0
            if ties:                        # amax/amin split the gradient among ties
                x[0, 0] = 5.0
                s[:, 0] = 5.0
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")     # torch: index_reduce is in beta
                theirs = _scatter_reduce_case(torch, fn, reduce, include_self, x, s, w)
            ours = _scatter_reduce_case(ft, fn, reduce, include_self, x, s, w)
            for a, b in zip(ours, theirs):
                np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_scatter_reduce_double_backward():
    x = ft.tensor([1.0], dtype=ft.float64, requires_grad=True)
    s = ft.tensor([0.0, 0.0], dtype=ft.float64, requires_grad=True)
    idx = ft.tensor([0, 0])
    assert ft.autograd.gradcheck(ft.scatter_reduce, (x, 0, idx, s, "prod"))
    with pytest.raises(RuntimeError, match="Double backward is unsupported for src when >1 "
                                           "zeros"):
        ft.autograd.gradgradcheck(ft.scatter_reduce, (x, 0, idx, s, "prod"))
    s2 = ft.tensor([2.0, 3.0], dtype=ft.float64, requires_grad=True)
    for reduce in ("sum", "mean", "prod"):
        assert ft.autograd.gradgradcheck(ft.scatter_reduce, (x, 0, idx, s2, reduce))


def _unsafe_splits(lib):
    a = lib.tensor([[1.0, 2, 3], [4, 5, 6], [7, 8, 9]], requires_grad=True)
    b = a + a
    for f in (lambda t: t.unsafe_split(1), lambda t: t.unsafe_split_with_sizes((1, 1, 1)),
              lambda t: t.unsafe_chunk(3)):
        s1, s2, _ = f(b)
        s1.mul_(s2)
        s1.sum().backward()
    out = [a.grad.tolist()]
    s1, s2 = lib.split_with_sizes(a * 1, [1, 2])
    out.append((list(s2.shape), s1._is_view()))
    try:
        s1.mul_(2)
    except RuntimeError as e:
        out.append(str(e)[:60])
    return out


@needs_torch
def test_split_with_sizes_and_unsafe_splits_as_torch():
    assert _unsafe_splits(ft) == _unsafe_splits(torch)


def _views_as_real(lib):
    z0 = lib.tensor([1 + 2j, 3 - 1j, 0.5j], dtype=lib.complex128, requires_grad=True)
    r = lib.view_as_real(z0 * 1)
    w = lib.tensor([[1.0, 2], [3, 4], [5, 6]], dtype=lib.float64)
    (r * w).sum().backward()
    x = lib.tensor([[1.0, 2], [3, 4]], dtype=lib.float64)
    c = lib.view_as_complex(x)
    c.mul_(1j)                                   # shares x's storage
    return [r.tolist(), r._is_view(), r.grad_fn.name(), z0.grad.tolist(), c.tolist(),
            c._is_view(), x.tolist()]


@needs_torch
def test_view_as_real_and_complex_as_torch():
    assert _views_as_real(ft) == _views_as_real(torch)
    z = ft.tensor([1 + 2j], requires_grad=True) * 1
    with pytest.raises(RuntimeError, match="a view with another dtype"):
        ft.view_as_real(z).mul_(2)
    with pytest.raises(RuntimeError, match="last dimension of size 2"):
        ft.view_as_complex(ft.zeros(3, dtype=ft.float64))


def _sorting(lib):
    inp = lib.tensor([0.3, 0.1, 0.3, 0.9, 0.1, 0.1], requires_grad=True)
    out = []
    for right in (False, True):
        out.append(lib.searchsorted(lib.tensor([0.1, 0.3, 0.5]), inp, right=right).tolist())
        out.append(lib.bucketize(inp, lib.tensor([0.1, 0.3, 0.5]), right=right).tolist())
    seq = lib.tensor([[1.0, 3, 5], [2, 4, 6]])
    out.append(lib.searchsorted(seq, lib.tensor([[3.0, 6], [1, 5]])).tolist())
    r = lib.searchsorted(inp.detach(), lib.tensor(0.5))
    out.append((r.dtype == lib.int64, r.requires_grad, tuple(r.shape)))
    for f in (lib.unique, lib.unique_consecutive):
        for dim in (None, 0):
            res = f(inp, return_inverse=True, return_counts=True, dim=dim)
            out.append([t.tolist() for t in res] + [t.requires_grad for t in res])
    m = lib.tensor([[1, 2], [1, 2], [0, 5], [1, 2]])
    out.append([t.tolist() for t in lib.unique(m, dim=0, return_inverse=True)])
    out.append([t.tolist() for t in lib.unique_consecutive(m, dim=0, return_counts=True)])
    return out


@needs_torch
def test_searchsorted_bucketize_unique_as_torch():
    assert _sorting(ft) == _sorting(torch)
    x = ft.tensor([1.0, 1.0], requires_grad=True)
    with pytest.raises(NotImplementedError, match="derivative for 'unique' is not implemented"):
        ft.unique(x).sum().backward()


def _strided(lib):
    x = lib.arange(12.0).reshape(3, 4).requires_grad_()
    v = (x * 1).as_strided((2, 2), (4, 1), 1)
    (v * lib.tensor([[1.0, 2], [3, 4]])).sum().backward()
    z = lib.arange(6.0)
    z.as_strided((2,), (2,)).mul_(10)
    q = lib.ones(4).clone()
    q.as_strided_((2, 2), (2, 1))
    return [v.tolist(), v._is_view(), v.grad_fn.name(), x.grad.tolist(), z.tolist(),
            list(q.shape), q._version]


@needs_torch
def test_as_strided_as_torch():
    assert _strided(ft) == _strided(torch)


def _views_receiving_grad(lib):
    class Same(lib.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            return t.view_as(t)

        @staticmethod
        def backward(ctx, g):
            return g

    out = []
    b = lib.rand(1, requires_grad=True)
    for write in (lambda v: v.add_(b), lambda v: v.copy_(b)):
        try:
            write(Same.apply(lib.rand(1, 2)))
            out.append("ok")
        except RuntimeError as e:
            out.append(str(e)[:60])
    for t in (lib.rand(1, 2), lib.rand(3, 2)):
        try:
            t.unbind()[0].copy_(b)
            out.append("ok")
        except RuntimeError as e:
            out.append(str(e)[:90])
    a = lib.rand(1, 2)
    a.select(1, 0).copy_(b)                     # a single view: recorded
    out.append(a.requires_grad)
    Same.apply(lib.rand(2)).add_(1)             # nothing requires grad: allowed
    return out


@needs_torch
def test_views_without_grad_refuse_a_value_requiring_grad_as_torch():
    """Refused where torch refuses. The texts are those of torch's test_autograd.py
    (test_inplace_not_requires_grad); torch 2.13 words both as a no_grad-mode view."""
    ours, theirs = _views_receiving_grad(ft), _views_receiving_grad(torch)
    assert [o == "ok" for o in ours] == [t == "ok" for t in theirs]
    assert ours[:2] == ["Output 0 of Same is a view and is being modified inplace. Th"] * 2
    assert ours[2] == ours[3] and ours[2].startswith("Output 0 of Unbind is a view")


@needs_torch
def test_inverse_hyperbolics_and_inplace_functions_as_torch():
    res = []
    for lib in (ft, torch):
        x = lib.tensor([1.5, 2.0], dtype=lib.float64, requires_grad=True)
        y = lib.acosh(x) + lib.asinh(x) + lib.atanh(x / 3) + x.arccosh()
        y.sum().backward()
        z = lib.tensor([1.5, 3.0], dtype=lib.float64)
        lib.acosh_(z)
        lib.relu_(lib.neg_(z))
        res.append((y.tolist(), x.grad.tolist(), z.tolist(), z._version))
    np.testing.assert_allclose(np.array(res[0][0]), np.array(res[1][0]), rtol=1e-12)
    np.testing.assert_allclose(np.array(res[0][1]), np.array(res[1][1]), rtol=1e-12)
    assert res[0][2:] == res[1][2:]


@needs_torch
def test_leaf_grad_layout_and_empty_strided_as_torch():
    for lib in (ft, torch):
        a = lib.rand(2, 3, 4, 5).contiguous(memory_format=lib.channels_last).requires_grad_()
        (a * 2).sum().backward()
        assert a.grad.stride() == a.stride() == (60, 1, 15, 3)
        c = lib.empty_strided((2, 2), (4, 2)).copy_(lib.ones(2, 2)).requires_grad_()
        (c * 3).sum().backward()
        assert c.stride() == (4, 2) and c.grad.stride() == (2, 1)
        assert c.grad.tolist() == [[3.0, 3.0], [3.0, 3.0]]
