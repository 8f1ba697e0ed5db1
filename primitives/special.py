"""Special functions NumPy lacks (torch.special, jax.scipy.special): one declaration each.

`lgamma` and `erfc` are the C library's: natively for eager calls on large float arrays
and in fused kernels (`cuda=` templates, `native_eager`), through Python's math module
element by element otherwise (correct everywhere, slow: about 150 ns an element).
`digamma` (reflection, recurrence, asymptotic series) and the exponentially scaled Bessel
functions `bessel_i0e`/`bessel_i1e` (Horner's rule over the coefficient tables of their
series and asymptotic expansions, BESSEL_TABLES) are computed in float64 and rounded once
to the operand's dtype, the same operations in NumPy and in their templates
(backends/cuda_special.py: `ft_digamma`, `ft_bessel_i0e/i1e`). `erf_inv` natively is ftmath.h's
`erfinv` (CUDA's own on the GPU), its NumPy implementation Halley steps from ndtri's
start; `zeta` (Hurwitz) and `ndtri` are computed here in float64 from their series and
Halley steps. Derivatives are written with primitives: lgamma' = digamma, digamma' =
zeta(2, x), ∂zeta/∂q = -x zeta(x + 1, q) (the derivative in x is not implemented, as in
torch and JAX: it raises), erf_inv' and ndtri' from the output, and the Bessel functions'
from each other. Those without a template (zeta, ndtri) are not `elementwise`; their
batching is the elementwise rule all the same."""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from .base import REAL, _elementwise_batch, ct_for, defprim, naryop, self_rule, unary
from .elementwise import _const, _one, add, div, eq, erf_p, exp, mul, neg, select, sign, sub

# ---------------------------------------------------------------------------
# implementations (float64 inside, one rounding at the end)


def _wide(xp, x):
    x = xp.asarray(x)
    return x, x.dtype, x.astype(np.float64)


def _math_ufunc(fn, at_pole):
    """An element-by-element ufunc of a math function; its ValueError (a pole) gives
    at_pole, its OverflowError +inf."""
    def safe(v):
        try:
            return fn(v)
        except ValueError:
            return at_pole
        except OverflowError:
            return math.inf
    u = np.frompyfunc(safe, 1, 1)

    def impl(xp, x):
        x, dt, v = _wide(xp, x)
        out = np.asarray(u(np.asarray(v.get() if hasattr(v, "get") else v)), np.float64)
        return xp.asarray(out).astype(dt)
    return impl


_lgamma_impl = _math_ufunc(math.lgamma, math.inf)
_erfc_impl = _math_ufunc(math.erfc, math.nan)

# the Bernoulli numbers B_2 .. B_24, for the asymptotic series of digamma and zeta
_B = [Fraction(1, 6), Fraction(-1, 30), Fraction(1, 42), Fraction(-1, 30), Fraction(5, 66),
      Fraction(-691, 2730), Fraction(7, 6), Fraction(-3617, 510), Fraction(43867, 798),
      Fraction(-174611, 330), Fraction(854513, 138), Fraction(-236364091, 2730)]


def _digamma_impl(xp, x):
    """ψ(x): reflection ψ(x) = ψ(1 - x) - π / tan(πx) below 1/2, the recurrence
    ψ(w) = ψ(w + 1) - 1/w up to w ≥ 10, then ln w - 1/(2w) - Σ B₂ₖ / (2k w²ᵏ) (error below
    1e-17 there). ψ(0) = -inf, NaN at the negative integers (torch's values)."""
    x, dt, v = _wide(xp, x)
    reflect = v < 0.5
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = v - xp.round(v)
        cot = np.pi / xp.tan(np.pi * frac)
    w = xp.where(reflect, 1.0 - v, v)
    acc = xp.zeros_like(w)
    for _ in range(10):
        small = w < 10.0
        acc -= xp.where(small, 1.0 / xp.where(small, w, 1.0), 0.0)
        w = xp.where(small, w + 1.0, w)
    z = 1.0 / (w * w)
    series = xp.zeros_like(w)
    for k in range(7, 0, -1):
        series = (series + float(_B[k - 1] / (2 * k))) * z
    psi = xp.log(w) - 0.5 / w - series + acc
    out = xp.where(reflect, psi - cot, psi)
    out = xp.where(v == 0, -np.inf, out)
    out = xp.where((v < 0) & (frac == 0), np.nan, out)
    return out.astype(dt)


# (2k)! / B_2k: the Euler-Maclaurin coefficients of the Hurwitz zeta function
_ZETA_A = [float(math.factorial(2 * k + 2) / b) for k, b in enumerate(_B)]


def _zeta_impl(xp, s, q):
    """ζ(s, q) = Σₖ (q + k)⁻ˢ: the first terms summed until q + k > 9 (at least 10), then
    the Euler-Maclaurin tail with 12 Bernoulli terms. s = 1: inf; s < 1: NaN; q ≤ 0 an
    integer: inf; q < 0 with s not an integer: NaN (the domain of torch's and Cephes')."""
    s_in, dt, x = _wide(xp, s)
    q = xp.asarray(q).astype(np.float64)
    x, q = xp.broadcast_arrays(x, q)
    with np.errstate(all="ignore"):
        total = q ** -x
        a = q.copy()
        i = 0                               # one count of terms for all elements
        while i < 9 or (i < 100000 and bool(xp.any((a <= 9) & xp.isfinite(a)))):
            i += 1
            a = a + 1.0
            total = total + a ** -x
        b = a ** -x
        total = total + b * a / (x - 1.0) - 0.5 * b
        fac = xp.ones_like(x)
        k = 0.0
        for coef in _ZETA_A:
            fac = fac * (x + k)
            b = b / a
            total = total + fac * b / coef
            k += 1.0
            fac = fac * (x + k)
            b = b / a
            k += 1.0
        out = total
        out = xp.where(x == 1.0, np.inf, out)
        out = xp.where(x < 1.0, np.nan, out)
        q_int = q == xp.floor(q)
        out = xp.where((q <= 0) & q_int & (x >= 1.0), np.inf, out)
        out = xp.where((q < 0) & ~q_int & (x != xp.floor(x)), np.nan, out)
    return out.astype(dt)


_SQRT2 = math.sqrt(2.0)
_SQRT2PI = math.sqrt(2.0 * math.pi)


def _ndtr64(xp, x):
    return 0.5 * erfc_p.impl(xp, -x / _SQRT2)     # the native kernel where one is installed


def _ndtri_impl(xp, p):
    """Φ⁻¹(p): the Abramowitz-Stegun 26.2.23 start (error < 5e-4) on the lower half
    (1 - p, exact there, for the upper), then three Halley steps on Φ(x) - p, with Φ from
    erfc (accurate in the tail). 0 -> -inf, 1 -> inf, NaN outside [0, 1]."""
    p, dt, v = _wide(xp, p)
    upper = v > 0.5
    lo = xp.where(upper, 1.0 - v, v)
    with np.errstate(all="ignore"):
        safe = xp.where((lo > 0) & (lo <= 0.5), lo, 0.25)
        t = xp.sqrt(-2.0 * xp.log(safe))
        x = -(t - (2.515517 + t * (0.802853 + t * 0.010328))
              / (1.0 + t * (1.432788 + t * (0.189269 + t * 0.001308))))
        for _ in range(3):
            e = _ndtr64(xp, x) - safe
            u = e * _SQRT2PI * xp.exp(x * x / 2.0)
            x = x - u / (1.0 + x * u / 2.0)
        x = xp.where(upper, -x, x)
        x = xp.where(v == 0.5, 0.0, x)
        x = xp.where(v == 0, -np.inf, xp.where(v == 1, np.inf, x))
        x = xp.where((v < 0) | (v > 1) | xp.isnan(v), np.nan, x)
    return x.astype(dt)


def _erf_inv_impl(xp, x):
    """erf⁻¹(x): -Φ⁻¹((1 - |x|)/2)/√2 with the sign of x in the tails (|x| > 1/2, where
    1 - |x| is exact); near 0, Φ⁻¹((1 + x)/2)/√2 refined by two Halley steps on erf (so that
    tiny x keep their precision). ±1 -> ±inf, NaN outside [-1, 1]."""
    x, dt, v = _wide(xp, x)
    a = xp.abs(v)
    with np.errstate(all="ignore"):
        tail = -_ndtri_impl(xp, (1.0 - a) / 2.0) / _SQRT2 * xp.sign(v)
        y = _ndtri_impl(xp, (1.0 + xp.where(a <= 0.5, v, 0.0)) / 2.0) / _SQRT2
        for _ in range(2):
            e = _erf64(xp, y) - xp.where(a <= 0.5, v, 0.0)
            d = 2.0 / math.sqrt(math.pi) * xp.exp(-y * y)
            u = e / d
            y = y - u / (1.0 + y * u)
        out = xp.where(a <= 0.5, y, tail)
        out = xp.where(xp.isnan(v) | (a > 1), np.nan, out)
    return out.astype(dt)


def _erf64(xp, y):
    return erf_p.impl(xp, y)


def _bessel_tables(nu):
    """(series, asymptotic) coefficients, lowest degree first, of e^{-a} I_ν(a), ν = 0, 1:
    I_ν(a) = (a/2)^ν Σₖ zᵏ / (k! (k + ν)!), z = a²/4, to k = 59 (|a| ≤ 20: the terms reach
    1e-17 of the sum), and e^{-a} I_ν(a) ~ (2πa)^{-1/2} Σₖ dₖ a⁻ᵏ to k = 29,
    dₖ = (-1)ᵏ Πⱼ (4ν² - (2j-1)²) / (k! 8ᵏ) (a > 20: the smallest term below 1e-17); exact
    rationals rounded once. Shared by the NumPy implementation and the kernels' template
    (backends/cuda_special.py), both evaluating them by Horner's rule."""
    series = [float(Fraction(1, math.factorial(k) * math.factorial(k + nu))) for k in range(60)]
    asym, d = [], Fraction(1)
    for k in range(30):
        if k:
            d = d * -(4 * nu * nu - (2 * k - 1) ** 2) / (k * 8)
        asym.append(float(d))
    return series, asym


BESSEL_TABLES = {nu: _bessel_tables(nu) for nu in (0, 1)}


def _horner(coeffs, x):
    """Σ coeffs[k] xᵏ by Horner's rule (each step p x + c rounded twice, as the C template)."""
    p = coeffs[-1] + 0.0 * x
    for c in coeffs[-2::-1]:
        p = p * x + c
    return p


def _bessel_impl(nu):
    series, asym = BESSEL_TABLES[nu]

    def impl(xp, x):
        x, dt, v = _wide(xp, x)
        a = xp.abs(v)
        near = a <= 20.0
        with np.errstate(all="ignore"):
            s, far = xp.where(near, a, 0.0), xp.where(near, 21.0, a)
            small = _horner(series, s * s / 4.0)
            if nu == 1:
                small = small * (s / 2.0)
            small = small * xp.exp(-a)
            large = _horner(asym, 1.0 / far) / xp.sqrt(2.0 * np.pi * far)
            out = xp.where(near, small, large)
            if nu == 1:
                out = out * xp.sign(v)
            out = xp.where(xp.isnan(v), np.nan, out)
        return out.astype(dt)
    impl.__name__ = f"_bessel_i{nu}e_impl"
    return impl


# ---------------------------------------------------------------------------
# declarations

def _zeta_dx_impl(xp, t, x, q):
    raise NotImplementedError(
        "the derivative for 'zeta' is not implemented. (functrans: ζ(x, q) is differentiable "
        "in q only, as in PyTorch and JAX; pass x as a constant)")


def _zeta_dx(t, x, q):
    """The tangent of zeta along its exponent x: a step that raises when it runs (not when
    a program is derived), so a backward that does not need it never fails."""
    return zeta_dx(t, x, q)


def _i1e_over_x(x, i1e_x):
    """i1e(x) / x, 1/2 at x = 0 (its limit)."""
    zero = eq(x, _const(x, 0))
    safe = select(zero, _one(x), x)
    return select(zero, _const(x, 0.5), div(i1e_x, safe))


lgamma_p = defprim("lgamma", _lgamma_impl, unary(REAL), elementwise=True,
                   jvp=(lambda t, x: mul(t, digamma(x)),), cuda="lgamma({0})",
                   native_eager=True)
erfc_p = defprim("erfc", _erfc_impl, unary(REAL), elementwise=True,
                 jvp=(lambda t, x: mul(t, mul(_const(x, -2 / math.sqrt(math.pi)),
                                              exp(neg(mul(x, x))))),), cuda="erfc({0})",
                 native_eager=True)
digamma_p = defprim("digamma", _digamma_impl, unary(REAL), elementwise=True,
                    jvp=(lambda t, x: mul(t, zeta(_const(x, 2.0), x)),),
                    cuda="ft_digamma({0})", native_eager=True)
zeta_p = defprim("zeta", _zeta_impl, naryop(REAL),
                 jvp=(_zeta_dx, lambda t, x, q: mul(t, neg(mul(x, zeta(add(x, _one(x)), q))))),
                 batch=self_rule(_elementwise_batch))
# linear in its first operand t (a tangent along x); any program containing it raises when
# run, so its own derivatives and transpose are itself again
zeta_dx_p = defprim("zeta_dx", _zeta_dx_impl, naryop(REAL, nargs=3),
                    jvp=(lambda tt, t, x, q: zeta_dx(tt, x, q),
                         lambda tx, t, x, q: zeta_dx(mul(t, tx), x, q),
                         lambda tq, t, x, q: zeta_dx(mul(t, tq), x, q)),
                    transpose=lambda ct, t, x, q: [ct_for(t, zeta_dx(ct, x, q)), None, None],
                    batch=self_rule(_elementwise_batch))
ndtri_p = defprim("ndtri", _ndtri_impl, unary(REAL),
                  jvp_out=(lambda t, ans, p: mul(t, mul(_const(ans, _SQRT2PI),
                                                        exp(mul(_const(ans, 0.5),
                                                                mul(ans, ans))))),),
                  batch=self_rule(_elementwise_batch))
erf_inv_p = defprim("erf_inv", _erf_inv_impl, unary(REAL), elementwise=True,
                    jvp_out=(lambda t, ans, x: mul(t, mul(_const(ans, math.sqrt(math.pi) / 2),
                                                          exp(mul(ans, ans)))),),
                    cuda="erfinv({0})", native_eager=True)
bessel_i0e_p = defprim("bessel_i0e", _bessel_impl(0), unary(REAL), elementwise=True,
                       jvp=(lambda t, x: mul(t, sub(bessel_i1e(x),
                                                    mul(sign(x), bessel_i0e(x)))),),
                       cuda="ft_bessel_i0e({0})", native_eager=True)
bessel_i1e_p = defprim("bessel_i1e", _bessel_impl(1), unary(REAL), elementwise=True,
                       jvp=(lambda t, x: mul(t, sub(bessel_i0e(x), add(
                           mul(sign(x), bessel_i1e(x)), _i1e_over_x(x, bessel_i1e(x))))),),
                       cuda="ft_bessel_i1e({0})", native_eager=True)

lgamma, erfc, digamma, zeta = lgamma_p.bind, erfc_p.bind, digamma_p.bind, zeta_p.bind
zeta_dx = zeta_dx_p.bind
ndtri, erf_inv = ndtri_p.bind, erf_inv_p.bind
bessel_i0e, bessel_i1e = bessel_i0e_p.bind, bessel_i1e_p.bind
