"""functrans.numpy.fft: values against numpy.fft for every function and norm, gradients of
real losses against float64 central differences, jit and vmap, and the primitive's errors."""
import numpy as np
import pytest

import functrans as ft
import functrans.numpy as fnp
from functrans.core import DTypeError, ShapeError
from functrans.primitives.fft import fft as fft_prim

from conftest import fd_grad

pytestmark = pytest.mark.usefixtures("x64")  # float64 references: conftest.x64

NORMS = [None, "backward", "ortho", "forward"]
rng = np.random.default_rng(0)
X = rng.standard_normal((4, 6))
Z = X + 1j * rng.standard_normal((4, 6))
X3 = rng.standard_normal((3, 4, 5))


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("name", ["fft", "ifft"])
@pytest.mark.parametrize("n,axis", [(None, -1), (None, 0), (4, -1), (9, 0)])
def test_complex_1d_values(name, norm, n, axis):
    for a in (Z, X):
        got = getattr(fnp.fft, name)(a, n=n, axis=axis, norm=norm)
        want = getattr(np.fft, name)(a, n=n, axis=axis, norm=norm)
        assert got.shape == want.shape and got.dtype == np.complex128
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("n,axis", [(None, -1), (None, 0), (5, -1), (9, 0)])
def test_real_1d_values(norm, n, axis):
    got = fnp.fft.rfft(X, n=n, axis=axis, norm=norm)
    np.testing.assert_allclose(got, np.fft.rfft(X, n=n, axis=axis, norm=norm), atol=1e-12)
    h = np.fft.rfft(X, axis=axis)
    for m in (None, 5, 6, 11):
        got = fnp.fft.irfft(h, n=m, axis=axis, norm=norm)
        want = np.fft.irfft(h, n=m, axis=axis, norm=norm)
        assert got.shape == want.shape and got.dtype == np.float64
        np.testing.assert_allclose(got, want, atol=1e-12)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("name", ["fft2", "ifft2", "fftn", "ifftn", "rfft2", "rfftn"])
@pytest.mark.parametrize("s,axes", [(None, None), ((3, 7), (0, 2)), (None, (2, 0)), ((2, 6), None)])
def test_nd_values(name, norm, s, axes):
    a = X3 if name.startswith("r") else X3 + 1j * X3[::-1]
    kw = {} if axes is None else {"axes": axes}
    got = getattr(fnp.fft, name)(a, s=s, norm=norm, **kw)
    want = getattr(np.fft, name)(a, s=s, norm=norm, **_last_axes(kw, s, name))
    np.testing.assert_allclose(got, want, atol=1e-12)


def _last_axes(kw, s, name):
    """NumPy 2 deprecates s without axes (meaning the last len(s) axes): spell them out."""
    return {"axes": (1, 2)} if s is not None and not kw and name.endswith("n") else kw


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("name", ["irfft2", "irfftn"])
@pytest.mark.parametrize("s,axes", [(None, None), ((3, 7), (0, 2)), ((2, 6), None)])
def test_inverse_real_nd_values(name, norm, s, axes):
    kw = {} if axes is None else {"axes": axes}
    h = np.fft.rfftn(X3, axes=axes if axes is not None else None)
    got = getattr(fnp.fft, name)(h, s=s, norm=norm, **kw)
    want = getattr(np.fft, name)(h, s=s, norm=norm, **_last_axes(kw, s, name))
    np.testing.assert_allclose(got, want, atol=1e-12)


def test_float32_stays_single_precision():
    x = X.astype(np.float32)
    assert fnp.fft.fft(x).dtype == np.complex64
    assert fnp.fft.rfft(x).dtype == np.complex64
    assert fnp.fft.irfft(fnp.fft.rfft(x)).dtype == np.float32
    np.testing.assert_allclose(fnp.fft.rfft(x), np.fft.rfft(X), rtol=1e-5, atol=1e-5)


def test_shifts_and_frequencies():
    for a in (np.arange(5.0), np.arange(12.0).reshape(3, 4)):
        np.testing.assert_array_equal(fnp.fft.fftshift(a), np.fft.fftshift(a))
        np.testing.assert_array_equal(fnp.fft.ifftshift(a), np.fft.ifftshift(a))
        np.testing.assert_array_equal(fnp.fft.fftshift(a, axes=0), np.fft.fftshift(a, axes=0))
    for n in (1, 4, 5):
        np.testing.assert_allclose(fnp.fft.fftfreq(n, 0.1), np.fft.fftfreq(n, 0.1), rtol=1e-6)
        np.testing.assert_allclose(fnp.fft.rfftfreq(n, 0.1), np.fft.rfftfreq(n, 0.1), rtol=1e-6)
    assert fnp.fft.fftfreq(4, dtype=np.float64).dtype == np.float64


LOSSES = {
    "parseval": lambda x: fnp.sum(fnp.abs(fnp.fft.fft(x)) ** 2),
    "rfft-irfft": lambda x: fnp.sum(fnp.fft.irfft(fnp.fft.rfft(x) * W) ** 2),
    "irfft odd n": lambda x: fnp.sum(fnp.sin(fnp.fft.irfft(fnp.fft.fft(x), n=5, axis=0))),
    "ifft ortho": lambda x: fnp.sum(fnp.real(fnp.fft.ifft(x * (1 + 2j), n=8, norm="ortho")) ** 3),
    "fft2 forward": lambda x: fnp.sum(fnp.imag(fnp.fft.fft2(fnp.sin(x), norm="forward")) ** 2),
    "rfftn": lambda x: fnp.sum(fnp.abs(fnp.fft.rfftn(x, s=(3, 7)))),
    "irfftn": lambda x: fnp.sum(fnp.fft.irfftn(fnp.fft.fftn(x)[:, :4], s=(4, 6)) ** 2),
    "shift": lambda x: fnp.sum(fnp.fft.fftshift(x) * np.arange(24.0).reshape(4, 6)),
    "hfft": lambda x: fnp.sum(fnp.fft.hfft(x * (1 - 0.5j), n=7, axis=0) ** 2),
    "ihfft ortho": lambda x: fnp.sum(fnp.imag(fnp.fft.ihfft(fnp.sin(x), norm="ortho")) ** 2),
    "fftn repeated axis": lambda x: fnp.sum(fnp.abs(fnp.fft.fftn(x, axes=(1, 0, 1))) ** 3),
    "rfftn repeated axis": lambda x: fnp.sum(fnp.abs(fnp.fft.rfftn(x, s=(5, 3, 4),
                                                                   axes=(1, 0, 1)))),
}
W = np.linspace(0.5, 1.5, 4)


@pytest.mark.parametrize("norm", NORMS)
def test_hermitian_values(norm):
    """hfft and ihfft (issue 18): NumPy's values for complex and real input, n and axis."""
    for n, axis in [(None, -1), (None, 0), (5, -1), (8, 0)]:
        for a in (Z, X):
            got = fnp.fft.hfft(a, n=n, axis=axis, norm=norm)
            want = np.fft.hfft(a, n=n, axis=axis, norm=norm)
            assert got.shape == want.shape and got.dtype == np.float64
            np.testing.assert_allclose(got, want, atol=1e-12)
        got = fnp.fft.ihfft(X, n=n, axis=axis, norm=norm)
        want = np.fft.ihfft(X, n=n, axis=axis, norm=norm)
        assert got.shape == want.shape and got.dtype == np.complex128
        np.testing.assert_allclose(got, want, atol=1e-12)
    half = fnp.fft.ihfft(X[0], norm=norm)                 # a real signal and back
    np.testing.assert_allclose(fnp.fft.hfft(half, n=6, norm=norm), X[0], atol=1e-12)


@pytest.mark.parametrize("name", ["fftn", "ifftn", "rfftn", "irfftn"])
@pytest.mark.parametrize("s,axes", [(None, (0, 0)), (None, (2, 0, 2)), ((3, 6), (1, 1)),
                                    ((2, 5, 4), (0, 2, 0))])
def test_repeated_axes_transform_again(name, s, axes):
    """NumPy's meaning of a repeated axis in axes: the 1-D transform applied once per entry."""
    a = X3 if name == "rfftn" else X3 + 1j * X3[::-1]
    for norm in NORMS:
        got = getattr(fnp.fft, name)(a, s=s, axes=axes, norm=norm)
        want = getattr(np.fft, name)(a, s=s, axes=axes, norm=norm)
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, atol=1e-12)


@pytest.mark.parametrize("name", list(LOSSES))
def test_gradients_against_central_differences(name):
    f = LOSSES[name]
    g = ft.grad(f)(X)
    np.testing.assert_allclose(g, fd_grad(lambda x: float(f(x)), X), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(ft.jit(ft.grad(f))(X), g, rtol=1e-12, atol=1e-12)


def test_jvp_of_complex_input_matches_differences():
    """Forward mode along a complex direction: fft is complex-linear."""
    t = rng.standard_normal(Z.shape) + 1j * rng.standard_normal(Z.shape)
    for name in ("fft", "ifft", "irfft"):
        f = getattr(fnp.fft, name)
        _, tan = ft.jvp(f, (Z,), (t,))
        np.testing.assert_allclose(tan, (f(Z + 1e-6 * t) - f(Z - 1e-6 * t)) / 2e-6, atol=1e-6)


def test_jit_and_vmap():
    f = ft.jit(lambda x: fnp.fft.rfft2(x, norm="ortho"))
    np.testing.assert_allclose(f(X3), np.fft.rfft2(X3, norm="ortho"), atol=1e-12)
    for axis in (0, 1, 2):
        got = ft.vmap(lambda x: fnp.fft.fft(x, n=7), in_axes=axis)(X3)
        want = np.stack([np.fft.fft(np.take(X3, i, axis), n=7) for i in range(X3.shape[axis])])
        np.testing.assert_allclose(got, want, atol=1e-12)
    per_example = ft.vmap(ft.grad(LOSSES["rfft-irfft"]))(np.stack([X, 2 * X]))
    np.testing.assert_allclose(per_example[1], ft.grad(LOSSES["rfft-irfft"])(2 * X), atol=1e-12)


def test_errors():
    with pytest.raises(DTypeError, match="RFFT takes a real floating operand"):
        fft_prim(Z, fft_type="RFFT", fft_lengths=(6,))
    with pytest.raises(DTypeError, match="FFT takes a complex operand"):
        fft_prim(X, fft_type="FFT", fft_lengths=(6,))
    with pytest.raises(ShapeError, match=r"needs trailing axes \(4,\)"):
        fft_prim(Z, fft_type="IRFFT", fft_lengths=(6,))
    with pytest.raises(TypeError, match="rfft: takes real input"):
        fnp.fft.rfft(Z)
    with pytest.raises(ValueError, match="invalid norm"):
        fnp.fft.fft(X, norm="none")
    with pytest.raises(ValueError, match="invalid number of FFT data points"):
        fnp.fft.fft(X, n=0)
    with pytest.raises(ValueError, match="must be axes of an array of rank 2"):
        fnp.fft.fftn(X, axes=(0, 2))
    with pytest.raises(TypeError, match="ihfft: takes real input"):
        fnp.fft.ihfft(Z)


def test_array_likes_and_numpy_dispatch():
    """Tensors go in (and come back as Tensors); np.fft.* on a traced value runs fnp.fft."""
    out = fnp.fft.fft(ft.tensor([1.0, 2.0, 3.0]))
    np.testing.assert_allclose(np.asarray(out), np.fft.fft([1.0, 2.0, 3.0]), rtol=1e-6)
    g = ft.grad(lambda x: fnp.sum(np.fft.irfft(np.fft.rfft(x), n=6) ** 2))(X[0])
    np.testing.assert_allclose(g, 2 * X[0], rtol=1e-12)


@pytest.mark.parametrize("fft_type", ["FFT", "IFFT", "RFFT", "IRFFT"])
@pytest.mark.parametrize("lengths", [(5,), (6,), (3, 4), (4, 5)])
def test_transpose_identity_every_type(fft_type, lengths):
    """<u, J v> = <J^T u, v> under Re(sum(ct * t)), odd and even last lengths (the IRFFT
    weights differ at Nyquist); the complex input's ignored parts (Im of DC) included."""
    r = np.random.default_rng(len(lengths) * 10 + lengths[-1])
    shape = (2,) + lengths
    if fft_type == "IRFFT":
        shape = shape[:-1] + (lengths[-1] // 2 + 1,)
    v = r.standard_normal(shape)
    if fft_type != "RFFT":
        v = v + 1j * r.standard_normal(shape)

    def f(x):
        return fft_prim(x, fft_type=fft_type, fft_lengths=lengths)
    out = f(v)
    u = r.standard_normal(out.shape) + (1j * r.standard_normal(out.shape) if out.dtype.kind == "c" else 0)
    (ct,) = ft.vjp(f, v)[1](u)
    assert ct.shape == v.shape and ct.dtype == v.dtype
    np.testing.assert_allclose(np.sum(u * out).real, np.sum(ct * v).real, rtol=1e-10)


def test_gradient_of_complex_input_follows_jax():
    """grad of a real loss of z is df/dx - i df/dy: sum|fft(z)|^2 = N sum|z|^2 gives 2N conj(z)."""
    g = ft.grad(lambda z: fnp.sum(fnp.abs(fnp.fft.fft(z)) ** 2))(Z)
    np.testing.assert_allclose(g, 2 * 6 * np.conj(Z), rtol=1e-12)
