"""Complex differentiation (issue 12, item 3): JAX's convention on the functional side, where
grad of a real f(z) is df/dx - i df/dy and holomorphic=True gives f'(z); PyTorch's conjugate
Wirtinger convention in the facade, where .grad is df/dx + i df/dy. Every expected value is
a known answer or float64 central differences along the real and the imaginary axis."""
from __future__ import annotations

import numpy as np
import pytest

import functrans as ft
import functrans.numpy as fnp

from conftest import assert_close

pytestmark = pytest.mark.usefixtures("x64")  # float64 references: conftest.x64

Z = np.array([3 + 4j, -1.5 + 0.5j, 0.25 - 2j])

# real-valued functions of complex z, written for the functional side and for the facade
REAL_FUNCTIONS = {
    "abs": (fnp.abs, lambda z: z.abs()),
    "abs**2": (lambda z: fnp.abs(z) ** 2, lambda z: z.abs() ** 2),
    "real": (fnp.real, lambda z: z.real),
    "imag": (fnp.imag, lambda z: z.imag),
    "z*conj(z)": (lambda z: fnp.real(z * fnp.conj(z)), lambda z: (z * z.conj()).real),
    "sin(z).real": (lambda z: fnp.real(fnp.sin(z)), lambda z: z.sin().real),
    "angle": (fnp.angle, lambda z: z.angle()),
    "|exp(z^2)|": (lambda z: fnp.abs(fnp.exp(z * z)), lambda z: (z * z).exp().abs()),
    "log|z|": (lambda z: fnp.real(fnp.log(z)), lambda z: z.log().real),
    "Re(z^3 / (1 + z))": (lambda z: fnp.real(z ** 3 / (1 + z)),
                          lambda z: (z ** 3 / (1 + z)).real),
}


def _partials(f, z, eps=1e-6):
    """(df/dx, df/dy) of a real f at complex z by float64 central differences."""
    z = complex(z)
    dx = (float(f(np.complex128(z + eps))) - float(f(np.complex128(z - eps)))) / (2 * eps)
    dy = (float(f(np.complex128(z + 1j * eps))) - float(f(np.complex128(z - 1j * eps)))) / (2 * eps)
    return dx, dy


# ---------------------------------------------------------------------------
# the three values (each was wrong before: 1+0j, 10+0j, 1.0)

def test_grad_of_abs_is_jaxs():
    assert complex(ft.grad(fnp.abs)(3 + 4j)) == pytest.approx(0.6 - 0.8j, abs=1e-6)


def test_grad_of_abs_squared_is_jaxs():
    assert complex(ft.grad(lambda z: fnp.abs(z) ** 2)(3 + 4j)) == pytest.approx(6 - 8j,
                                                                                 abs=1e-5)


def test_facade_backward_of_abs_is_pytorchs():
    x = ft.tensor(3 + 4j, requires_grad=True)
    x.abs().sum().backward()
    assert complex(x.grad.item()) == pytest.approx(0.6 + 0.8j, abs=1e-6)


# ---------------------------------------------------------------------------
# JAX's convention: grad of real f = df/dx - i df/dy

@pytest.mark.parametrize("name", sorted(REAL_FUNCTIONS))
def test_grad_is_df_dx_minus_i_df_dy(name):
    f = REAL_FUNCTIONS[name][0]
    for z in Z:
        dx, dy = _partials(f, z)
        g = ft.grad(f)(np.complex128(z))
        assert np.asarray(g).dtype == np.complex128
        assert complex(g) == pytest.approx(dx - 1j * dy, abs=1e-6), (name, z)


@pytest.mark.filterwarnings("ignore::functrans.RetraceWarning")   # a jit(grad(f)) per case
@pytest.mark.parametrize("name", sorted(REAL_FUNCTIONS))
def test_grad_under_jit_and_vmap(name):
    f = REAL_FUNCTIONS[name][0]
    want = np.array([complex(ft.grad(f)(z)) for z in Z])
    assert_close(ft.jit(ft.grad(f))(Z[0]), want[0], rtol=1e-12, atol=1e-12)
    assert_close(ft.vmap(ft.grad(f))(Z), want, rtol=1e-12, atol=1e-12)
    total = ft.grad(lambda z: fnp.sum(f(z)))(Z)           # one array input, summed
    assert_close(total, want, rtol=1e-12, atol=1e-12)


def test_vjp_pairs_without_conjugation():
    """vjp of z -> c z with cotangent u is c u (transposes are linear, as JAX)."""
    c = np.complex128(2 - 1j)
    _, pull = ft.vjp(lambda z: c * z, np.complex128(1 + 1j))
    u = np.complex128(0.5 + 3j)
    assert complex(pull(u)[0]) == pytest.approx(complex(c * u))


def test_real_to_complex_and_back():
    """x -> |x + 2ix| for real x has derivative sqrt(5) sign(x); the real -> complex
    conversion's transpose keeps the real part."""
    g = ft.grad(lambda x: fnp.abs(fnp.asarray(x, np.complex128) * (1 + 2j)))(-1.5)
    assert float(g) == pytest.approx(-np.sqrt(5))


# ---------------------------------------------------------------------------
# holomorphic=True: the complex derivative f'(z)

HOLOMORPHIC = {
    "sin": (fnp.sin, np.cos),
    "exp(z^2)": (lambda z: fnp.exp(z * z), lambda z: 2 * z * np.exp(z * z)),
    "log": (fnp.log, lambda z: 1 / z),
    "sqrt": (fnp.sqrt, lambda z: 0.5 / np.sqrt(z)),
    "z^3 / (1 + z)": (lambda z: z ** 3 / (1 + z),
                      lambda z: (3 * z ** 2 + 2 * z ** 3) / (1 + z) ** 2),
    "tanh": (fnp.tanh, lambda z: 1 - np.tanh(z) ** 2),
}


@pytest.mark.parametrize("name", sorted(HOLOMORPHIC))
def test_holomorphic_grad_jacfwd_jacrev(name):
    f, df = HOLOMORPHIC[name]
    want = df(Z)
    for z, w in zip(Z, want):
        assert complex(ft.grad(f, holomorphic=True)(z)) == pytest.approx(w, abs=1e-9)
        v, g = ft.value_and_grad(f, holomorphic=True)(z)
        assert complex(g) == pytest.approx(w, abs=1e-9)
        h = 1e-6                                     # f'(z) along both axes
        fd = complex((f(z + h) - f(z - h)) / (2 * h))
        fd_i = complex((f(z + 1j * h) - f(z - 1j * h)) / (2j * h))
        assert fd == pytest.approx(w, abs=1e-6) and fd_i == pytest.approx(w, abs=1e-6)
    for jac in (ft.jacfwd, ft.jacrev):
        J = jac(f, holomorphic=True)(Z)
        assert_close(J, np.diag(want), rtol=1e-9, atol=1e-9, err_msg=name)


def test_holomorphic_hessian():
    H = ft.hessian(lambda z: fnp.sum(fnp.sin(z)), holomorphic=True)(Z)
    assert_close(H, np.diag(-np.sin(Z)), rtol=1e-9, atol=1e-9)


# ---------------------------------------------------------------------------
# what raises (JAX's errors)

@pytest.mark.usefixtures("x32")
def test_complex_output_needs_holomorphic():
    with pytest.raises(TypeError, match=r"grad requires real-valued outputs \(output dtype "
                       r"that is a sub-dtype of np.floating\), but got complex64. For "
                       r"holomorphic differentiation, pass holomorphic=True."):
        ft.grad(fnp.sin)(3 + 4j)
    with pytest.raises(TypeError, match="jacrev requires real-valued outputs"):
        ft.jacrev(fnp.sin)(Z)
    with pytest.raises(TypeError, match="For holomorphic differentiation"):
        ft.value_and_grad(lambda z: z * z)(np.complex128(1j))


def test_holomorphic_requires_complex_inputs_and_outputs():
    with pytest.raises(TypeError, match="grad with holomorphic=True requires inputs with "
                       "complex dtype, but got float64"):
        ft.grad(fnp.sin, holomorphic=True)(np.float64(1.0))
    with pytest.raises(TypeError, match="grad with holomorphic=True requires outputs with "
                       "complex dtype, but got float64"):
        ft.grad(fnp.abs, holomorphic=True)(np.complex128(1j))
    with pytest.raises(TypeError, match="jacfwd with holomorphic=True requires outputs"):
        ft.jacfwd(fnp.abs, holomorphic=True)(Z)
    with pytest.raises(TypeError, match="jacrev with holomorphic=True requires inputs"):
        ft.jacrev(fnp.sin, holomorphic=True)(np.ones(2))


def test_jacfwd_of_complex_input_needs_holomorphic():
    with pytest.raises(TypeError, match="jacfwd requires real-valued inputs"):
        ft.jacfwd(fnp.abs)(Z)


def test_jacrev_of_real_function_of_complex_input():
    """Non-holomorphic jacrev of a real function: rows are JAX gradients."""
    J = ft.jacrev(fnp.abs)(Z)
    assert_close(J, np.diag(np.conj(Z) / np.abs(Z)), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("fn", [lambda z: fnp.floor(z), lambda z: fnp.fmod(z, z),
                                lambda z: fnp.arctan2(z, z)])
def test_primitives_without_complex_meaning_raise(fn):
    with pytest.raises(ft.DTypeError, match="c128"):
        fn(Z)


# ---------------------------------------------------------------------------
# the facade: PyTorch's conjugate Wirtinger convention, .grad = df/dx + i df/dy

@pytest.mark.parametrize("name", sorted(REAL_FUNCTIONS))
def test_facade_grad_is_df_dx_plus_i_df_dy(name):
    f_fn, f_t = REAL_FUNCTIONS[name]
    want = np.array([complex(dx + 1j * dy) for dx, dy in (_partials(f_fn, z) for z in Z)])
    for _ in range(3):                  # first run node by node, then the compiled program
        x = ft.tensor(Z, requires_grad=True)
        f_t(x).sum().backward()
        assert x.grad.dtype == ft.complex128
        assert_close(x.grad.numpy(), want, rtol=1e-6, atol=1e-6, err_msg=name)
    x = ft.tensor(Z, requires_grad=True)
    (g,) = ft.autograd.grad(f_t(x).sum(), x)
    assert_close(g.numpy(), want, rtol=1e-6, atol=1e-6)


def test_facade_is_the_conjugate_of_the_functional_side():
    f_fn, f_t = REAL_FUNCTIONS["|exp(z^2)|"]
    x = ft.tensor(Z, requires_grad=True)
    f_t(x).sum().backward()
    assert_close(x.grad.numpy(), np.conj(ft.grad(lambda z: fnp.sum(f_fn(z)))(Z)),
                 rtol=1e-12, atol=1e-12)


def test_facade_gradient_argument_hooks_and_retain_grad():
    """A complex gradient passed to backward, a tensor hook and a retained gradient are all
    in PyTorch's convention: y = 2z, L = Re(conj(u) y) has dL/dz = 2u."""
    u = np.array([1 - 2j, 0.5j, 3.0 + 0j])
    x = ft.tensor(Z, requires_grad=True)
    y = x * 2
    y.retain_grad()
    seen = []
    y.register_hook(lambda g: seen.append(g.numpy().copy()))
    y.backward(ft.tensor(u))
    assert_close(x.grad.numpy(), 2 * u, rtol=1e-12, atol=1e-12)
    assert_close(y.grad.numpy(), u, rtol=1e-12, atol=1e-12)
    assert_close(seen[0], u, rtol=1e-12, atol=1e-12)


def test_facade_hook_replacing_the_gradient():
    x = ft.tensor(Z, requires_grad=True)
    y = x * 1
    y.register_hook(lambda g: g * 1j)              # torch: the new gradient of y is i g
    y.abs().sum().backward()
    assert_close(x.grad.numpy(), 1j * Z / np.abs(Z), rtol=1e-12, atol=1e-12)


def test_facade_autograd_function_sees_pytorchs_convention():
    class Abs(ft.autograd.Function):
        @staticmethod
        def forward(ctx, z):
            ctx.save_for_backward(z)
            return z.abs()

        @staticmethod
        def backward(ctx, g):                      # torch's abs backward: g z / |z|
            (z,) = ctx.saved_tensors
            return g * z / z.abs()
    for _ in range(2):
        x = ft.tensor(Z, requires_grad=True)
        (Abs.apply(x) * 2).sum().backward()
        assert_close(x.grad.numpy(), 2 * Z / np.abs(Z), rtol=1e-12, atol=1e-12)


def test_facade_create_graph_second_order():
    """|z|^2 = Re(z conj z) has torch gradient g = 2z, kept as a graph; sum Re(g) = 2 sum x
    then has torch gradient 2."""
    x = ft.tensor(Z, requires_grad=True)
    (g,) = ft.autograd.grad((x * x.conj()).real.sum(), x, create_graph=True)
    assert_close(g.detach().numpy(), 2 * Z, rtol=1e-12, atol=1e-12)
    (g2,) = ft.autograd.grad(g.real.sum(), x)
    assert_close(g2.numpy(), np.full(3, 2.0 + 0j), rtol=1e-12, atol=1e-12)


def test_facade_matmul_of_complex():
    """L = |A z|^2 summed has torch gradient 2 A^H A z (and JAX gradient its conjugate)."""
    rng = np.random.default_rng(0)
    A = rng.standard_normal((3, 3)) + 1j * rng.standard_normal((3, 3))
    x = ft.tensor(Z, requires_grad=True)
    (ft.tensor(A) @ x).abs().pow(2).sum().backward()
    want = 2 * A.conj().T @ (A @ Z)
    assert_close(x.grad.numpy(), want, rtol=1e-10, atol=1e-10)
    g = ft.grad(lambda z: fnp.sum(fnp.abs(A @ z) ** 2))(Z)
    assert_close(g, np.conj(want), rtol=1e-10, atol=1e-10)


def test_norms_and_vdot_of_complex_arrays():
    """Values as NumPy's (vdot conjugates its first argument; norms are real), gradients
    df/dx - i df/dy."""
    A = np.outer(Z, Z[::-1]) + 1
    assert complex(fnp.vdot(Z, Z[::-1])) == pytest.approx(complex(np.vdot(Z, Z[::-1])))
    for ord_ in (None, 1, 3, np.inf):
        assert float(fnp.linalg.norm(Z, ord_)) == pytest.approx(np.linalg.norm(Z, ord_))
    for ord_ in (None, "fro", 1, np.inf):
        assert float(fnp.linalg.norm(A, ord_)) == pytest.approx(np.linalg.norm(A, ord_))
    assert_close(ft.grad(fnp.linalg.norm)(Z), np.conj(Z) / np.linalg.norm(Z),
                 rtol=1e-12, atol=1e-12)
    assert_close(ft.grad(lambda z: fnp.real(fnp.vdot(z, z)))(Z), 2 * np.conj(Z),
                 rtol=1e-12, atol=1e-12)


def test_einsum_of_real_and_complex_operands():
    """einsum promotes a real and a complex operand to complex (NumPy's value); the real
    operand's gradient is real (df/dx), the complex one's df/dx - i df/dy (issue 18)."""
    rng = np.random.default_rng(7)
    r = rng.standard_normal((2, 3))
    c = rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4))
    for spec, a, b in (("ij,jk->ik", r, c), ("jk,ij->ik", c, r), ("ij,jk", r, c.real)):
        got = fnp.einsum(spec, a, b)
        assert got.dtype == np.result_type(a, b)
        assert_close(got, np.einsum(spec, a, b), rtol=1e-12, atol=1e-12)
    w = rng.standard_normal((2, 4))

    def loss(x, z, lib):
        return lib.sum(w * lib.abs(lib.einsum("ij,jk->ik", x, z)) ** 2)
    gr, gc = ft.grad(loss, argnums=(0, 1))(r, c, fnp)
    assert gr.dtype == np.float64 and gc.dtype == np.complex128
    eps = 1e-6
    for idx in np.ndindex(r.shape):
        e = np.zeros_like(r)
        e[idx] = eps
        fd = (loss(r + e, c, np) - loss(r - e, c, np)) / (2 * eps)
        assert gr[idx] == pytest.approx(fd, rel=1e-6, abs=1e-7)
    for idx in np.ndindex(c.shape):
        e = np.zeros(c.shape)
        e[idx] = eps
        dx = (loss(r, c + e, np) - loss(r, c - e, np)) / (2 * eps)
        dy = (loss(r, c + 1j * e, np) - loss(r, c - 1j * e, np)) / (2 * eps)
        assert complex(gc[idx]) == pytest.approx(dx - 1j * dy, rel=1e-6, abs=1e-7)
    _, tangent = ft.jvp(lambda x: fnp.einsum("ij,jk->ik", x, c), (r,), (w[:, :3],))
    assert_close(tangent, np.einsum("ij,jk->ik", w[:, :3], c), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", ["arcsinh", "arccosh", "arctanh"])
def test_inverse_hyperbolic_functions_of_complex_values(name):
    """NumPy's principal branches (issue 18); holomorphic derivatives against central
    differences on both sides of the imaginary axis (arccosh's is 1 / (sqrt(z-1) sqrt(z+1)),
    not 1 / sqrt(z² - 1))."""
    f, ref = getattr(fnp, name), getattr(np, name)
    z = np.array([0.3 + 0.4j, -2 + 1j, -0.5 - 0.7j, 2.0 - 0.1j, -1.5 + 0.2j])
    assert_close(f(z), ref(z), rtol=1e-12, atol=1e-12)
    h = 1e-6
    assert_close(ft.vmap(ft.grad(f, holomorphic=True))(z), (ref(z + h) - ref(z - h)) / (2 * h),
                 rtol=1e-7, atol=1e-8)


def test_var_and_std_of_complex_arrays_are_real():
    """var is mean(|x - mean|²), real, as NumPy's and JAX's (it was mean((x - mean)²), complex:
    found checking values beside autograd's suite); its gradient is 2 conj(x - mean) / N."""
    z = np.array([1j, -1j, 2 + 0.5j])
    for f, ref in ((fnp.var, np.var), (fnp.std, np.std)):
        got = f(z)
        assert got.dtype == np.float64
        assert float(got) == pytest.approx(float(ref(z)), rel=1e-14)
    assert_close(ft.grad(fnp.var)(z), 2 * np.conj(z - z.mean()) / 3, rtol=1e-12, atol=1e-12)
    m = np.stack([z, z[::-1] * 2])
    assert_close(fnp.std(m, axis=1, ddof=1), np.std(m, axis=1, ddof=1), rtol=1e-12, atol=1e-12)


def test_resolve_conj_is_identity_and_complex_backward_needs_a_gradient():
    """conj() materializes in the facade, so resolve_conj() returns its input (it conjugated
    again); conj_physical is ConjPhysicalBackward0; backward() of a complex scalar without a
    gradient raises as torch does (which real part would the implicit ones() seed?)."""
    z = ft.tensor([1 + 2j, -3j], requires_grad=True)
    assert z.resolve_conj() is z and z.conj().resolve_conj().tolist() == [1 - 2j, 3j]
    assert z.conj_physical().grad_fn.name() == "ConjPhysicalBackward0"
    with pytest.raises(RuntimeError, match="only for real scalar outputs but got "
                                           "torch.complex64"):
        (z * z).sum().backward()
    (z * z).sum().abs().backward()
    assert z.grad is not None
