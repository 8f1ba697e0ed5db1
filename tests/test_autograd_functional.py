"""ft.autograd.functional (torch's signatures and return structures) against float64 central
differences; ft.cuda's answers on a machine without CUDA."""
import subprocess
import sys

import numpy as np
import pytest

import functrans as ft
from functrans.autograd import functional as AF

H = 1e-6


def _t(a):
    return ft.tensor(np.asarray(a, np.float64))


def _fd_jac(f, xs, i):
    """Central-difference Jacobian of f (NumPy in, NumPy out) in its i-th argument."""
    xs = [np.asarray(x, np.float64) for x in xs]
    cols = []
    for k in range(xs[i].size):
        e = np.zeros(xs[i].size)
        e[k] = H
        up = [x.copy() for x in xs]
        dn = [x.copy() for x in xs]
        up[i] = up[i] + e.reshape(xs[i].shape)
        dn[i] = dn[i] - e.reshape(xs[i].shape)
        cols.append((np.asarray(f(*up)) - np.asarray(f(*dn))) / (2 * H))
    out_shape = np.shape(f(*xs))
    return np.stack(cols, -1).reshape(out_shape + xs[i].shape)


def f_np(x, y):
    return np.sin(x) * y.sum() + x ** 2


def f_ft(x, y):
    return x.sin() * y.sum() + x ** 2


X, Y = [0.3, -1.2, 2.0], [[0.5, 1.5], [-0.7, 0.1]]


def test_jacobian_single_and_tuple():
    x, y = _t(X), _t(Y)
    j = AF.jacobian(lambda a: f_ft(a, y), x)
    assert isinstance(j, ft.Tensor) and tuple(j.shape) == (3, 3)
    np.testing.assert_allclose(j.numpy(), _fd_jac(f_np, [X, Y], 0), rtol=1e-7, atol=1e-8)
    jx, jy = AF.jacobian(f_ft, (x, y))
    assert tuple(jy.shape) == (3, 2, 2)
    np.testing.assert_allclose(jy.numpy(), _fd_jac(f_np, [X, Y], 1), rtol=1e-7, atol=1e-8)
    # tuple outputs: outer tuple over outputs, inner over inputs
    both = AF.jacobian(lambda a, b: (f_ft(a, b), (a * a).sum()), (x, y))
    assert len(both) == 2 and len(both[1]) == 2 and tuple(both[1][0].shape) == (3,)
    np.testing.assert_allclose(both[1][0].numpy(), 2 * np.asarray(X))
    fwd = AF.jacobian(f_ft, (x, y), vectorize=True, strategy="forward-mode")
    np.testing.assert_allclose(fwd[1].numpy(), jy.numpy(), rtol=1e-12)


def test_hessian():
    def grad_np(x):      # the gradient by hand; its central differences give the Hessian
        return np.cos(x) * x[::-1] + np.sin(x[::-1]) + np.prod(x) / x

    def g_ft(x):
        return (x.sin() * x.flip(0)).sum() + x.prod()

    x = _t(X)
    h = AF.hessian(g_ft, x)
    np.testing.assert_allclose(h.numpy(), _fd_jac(grad_np, [X], 0), rtol=1e-7, atol=1e-8)
    hb = AF.hessian(lambda a, b: (a.sin() * b.sum()).sum(), (x, _t(Y)))
    assert len(hb) == 2 and tuple(hb[0][1].shape) == (3, 2, 2)
    np.testing.assert_allclose(hb[0][1].numpy(), np.broadcast_to(np.cos(X)[:, None, None],
                                                                  (3, 2, 2)))
    with pytest.raises(RuntimeError, match="should contain a single element"):
        AF.hessian(lambda a: a * 2, x)


def test_vjp_jvp():
    x, y = _t(X), _t(Y)
    v = _t([1.0, -2.0, 0.5])
    out, (gx, gy) = AF.vjp(f_ft, (x, y), v)
    np.testing.assert_allclose(out.numpy(), f_np(np.asarray(X), np.asarray(Y)))
    np.testing.assert_allclose(gx.numpy(), np.asarray(v.numpy()) @ _fd_jac(f_np, [X, Y], 0),
                               rtol=1e-7)
    np.testing.assert_allclose(gy.numpy(), np.tensordot(v.numpy(), _fd_jac(f_np, [X, Y], 1), 1),
                               rtol=1e-7)
    out, g = AF.vjp(lambda a: (a ** 3).sum(), x)                 # v may be None: scalar output
    np.testing.assert_allclose(g.numpy(), 3 * np.asarray(X) ** 2)
    with pytest.raises(RuntimeError, match="The vector v can only be None if the user-provided "
                                           "function returns a single Tensor with a single "
                                           "element."):
        AF.vjp(lambda a: a * 2, x)
    tx, ty = _t([0.1, 0.2, -0.3]), _t([[1.0, 0.0], [0.0, -1.0]])
    out, jv = AF.jvp(f_ft, (x, y), (tx, ty))
    want = _fd_jac(f_np, [X, Y], 0) @ tx.numpy() + np.tensordot(_fd_jac(f_np, [X, Y], 1),
                                                                 ty.numpy(), 2)
    np.testing.assert_allclose(jv.numpy(), want, rtol=1e-7, atol=1e-9)
    with pytest.raises(RuntimeError, match=r"Mismatch in shape: v\[0\] has a shape of \(2,\)"):
        AF.jvp(lambda a: a, x, _t([1.0, 2.0]))
    with pytest.raises(TypeError, match="The inputs given to jvp must be either a Tensor or a "
                                        "tuple of Tensors"):
        AF.jvp(lambda a: a, [x], [x])


def test_hvp_vhp():
    def g(a, b):
        return (a.sin() * (b * b).sum() + a ** 3).sum()

    x, y = _t(X), _t(Y)
    vx, vy = _t([1.0, 0.5, -1.0]), _t([[0.2, 0.0], [1.0, -1.0]])
    out, (hx, hy) = AF.hvp(g, (x, y), (vx, vy))
    H_blocks = AF.hessian(g, (x, y))
    want_x = (H_blocks[0][0].numpy() @ vx.numpy()
              + np.tensordot(H_blocks[0][1].numpy(), vy.numpy(), 2))
    np.testing.assert_allclose(hx.numpy(), want_x, rtol=1e-12)
    _, (wx, wy) = AF.vhp(g, (x, y), (vx, vy))
    np.testing.assert_allclose(wx.numpy(), hx.numpy(), rtol=1e-12)   # H symmetric
    np.testing.assert_allclose(wy.numpy(), hy.numpy(), rtol=1e-12)
    assert out.item() == pytest.approx(g(x, y).item())


def test_create_graph_results_are_differentiable():
    """create_graph=True runs on the tape: same values as the transformations, and the
    results have history back to inputs that require grad (d/dx of sum(J) for x**3 is 6x)."""
    x = ft.tensor(np.asarray(X), requires_grad=True)
    y = _t(Y)
    j = AF.jacobian(f_ft, (x, y), create_graph=True)
    ref = AF.jacobian(f_ft, (x.detach(), y))
    for a, b in zip(j, ref):
        np.testing.assert_allclose(a.detach().numpy(), b.numpy(), rtol=1e-12)
    assert j[0].requires_grad and j[1].requires_grad
    AF.jacobian(lambda t: t ** 3, x, create_graph=True).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 6 * np.asarray(X))
    x.grad = None
    h = AF.hessian(lambda t: (t ** 3).sum(), x, create_graph=True)
    np.testing.assert_allclose(h.detach().numpy(), np.diag(6 * np.asarray(X)))
    h.trace().backward()
    np.testing.assert_allclose(x.grad.numpy(), [6.0, 6.0, 6.0])
    v = _t([1.0, -2.0, 0.5])
    for fn in (AF.vjp, AF.jvp):
        out, r = fn(lambda t: t.sin() * t, x, v, create_graph=True)
        _, want = fn(lambda t: t.sin() * t, x.detach(), v)
        np.testing.assert_allclose(r.detach().numpy(), want.numpy(), rtol=1e-12)
        assert r.requires_grad
    for fn in (AF.hvp, AF.vhp):
        _, r = fn(lambda t: (t.sin() * t).sum(), x, v, create_graph=True)
        _, want = fn(lambda t: (t.sin() * t).sum(), x.detach(), v)
        np.testing.assert_allclose(r.detach().numpy(), want.numpy(), rtol=1e-12)
    hb = AF.hessian(lambda a, b: (a * a * b).sum(), (x, y.reshape(-1)[:3].clone()),
                    create_graph=True)
    np.testing.assert_allclose(hb[0][1].detach().numpy(), np.diag(2 * np.asarray(X)))


def test_strict_fails_loudly():
    with pytest.raises(NotImplementedError, match=r"vjp\(strict=True\)"):
        AF.vjp(lambda a: a.sum(), _t(X), strict=True)


def test_cuda_queries_without_cuda_and_no_cupy_import():
    code = ("import sys, functrans as ft; ft.cuda.manual_seed_all(0); ft.cuda.empty_cache(); "
            "print(ft.cuda.is_available(), ft.cuda.device_count(), 'cupy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", "import functrans as ft; ft.tensor(1.0); "
                          "import sys; print('cupy' in sys.modules)"],
                         capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False"]                                   # import functrans never loads CuPy
    if ft.cuda.is_available():
        assert ft.cuda.device_count() >= 1 and ft.cuda.current_device() >= 0
        ft.cuda.synchronize()
        return
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert got[:2] == ["False", "0"]
    with pytest.raises(ft.core.devices.DeviceError, match="device 'cuda' needs"):
        ft.cuda.current_device()


def test_cuda_manual_seed_seeds_the_generator():
    ft.cuda.manual_seed(5)
    a = ft.rand(3)
    ft.manual_seed(5)
    assert ft.rand(3).tolist() == a.tolist()
