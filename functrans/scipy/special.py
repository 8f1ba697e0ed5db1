"""functrans.scipy.special (jax.scipy.special): special functions of arrays, written with
functrans.numpy and the special-function primitives, so each one has gradients, `vmap` and
`jit`. Integer and bool inputs compute in float32 (the default float), as JAX's.
"""
from __future__ import annotations

import math

import numpy as np

from .. import numpy as fnp
from ..higher_order.custom import custom_jvp
from ..primitives import elementwise as ew
from ..primitives import special as sp
from ..primitives.misc import stop_gradient

__all__ = ["digamma", "entr", "erf", "erfc", "erfinv", "expit", "gammaln", "i0e", "i1e",
           "log_ndtr", "logit", "logsumexp", "ndtr", "ndtri", "xlog1py", "xlogy", "zeta"]

_SQRT1_2 = 1 / math.sqrt(2)


def _float(x):
    return fnp._promote_float(x)[0]


def _c(x, v):
    """The Python number v as a rank-0 array of x's dtype."""
    return np.asarray(v, x.dtype)


def erf(x):
    """The error function, 2/√π ∫₀ˣ exp(-t²) dt."""
    return ew.erf(_float(x))


def erfc(x):
    """1 - erf(x), accurate where erf(x) is near 1."""
    return sp.erfc(_float(x))


def erfinv(x):
    """The inverse of erf on (-1, 1) (±inf at ±1, NaN outside)."""
    return sp.erf_inv(_float(x))


def expit(x):
    """The logistic sigmoid 1 / (1 + exp(-x))."""
    return ew.logistic(_float(x))


def logit(x):
    """log(x / (1 - x)), the inverse of expit."""
    x = _float(x)
    return fnp.log(x / (1 - x))


def gammaln(x):
    """log|Γ(x)|."""
    return sp.lgamma(_float(x))


def digamma(x):
    """ψ(x) = Γ'(x)/Γ(x)."""
    return sp.digamma(_float(x))


def zeta(x, q=None):
    """The Hurwitz zeta function Σₖ (k + q)^-x (JAX requires q; Riemann's zeta is q=1)."""
    if q is None:
        raise TypeError("zeta(x, q): functrans.scipy.special.zeta needs q, as JAX's; "
                        "Riemann's zeta function is zeta(x, 1.0)")
    x, q = fnp._promote_float(x, q)
    return sp.zeta(x, q)


def i0e(x):
    """exp(-|x|) I₀(x), the exponentially scaled modified Bessel function of order 0."""
    return sp.bessel_i0e(_float(x))


def i1e(x):
    """exp(-|x|) I₁(x), the exponentially scaled modified Bessel function of order 1."""
    return sp.bessel_i1e(_float(x))


def _ndtr(x):
    """Φ(x) of a float array: erfc(-x/√2)/2 (accurate in the lower tail). Also
    torch.special.ndtr's (functrans/special.py)."""
    return _c(x, 0.5) * sp.erfc(-x * _c(x, _SQRT1_2))


def ndtr(x):
    """Φ(x), the standard normal CDF: erfc(-x/√2)/2 (accurate in the lower tail)."""
    return _ndtr(_float(x))


def ndtri(p):
    """Φ⁻¹(p), the inverse of ndtr (±inf at 0 and 1, NaN outside [0, 1])."""
    return sp.ndtri(_float(p))


def _erfcx(x):
    """exp(x²) erfc(x) (also torch.special.erfcx's) for x >= 0 (no overflow): directly up to 25, the asymptotic series
    1/(x√π) Σ (-1)ᵏ (2k-1)!!/(2x²)ᵏ above (8 terms: below 1e-20 there)."""
    big = x > 25
    xs = fnp.where(big, _c(x, 1.0), x)
    direct = fnp.exp(xs * xs) * sp.erfc(xs)
    xb = fnp.where(big, x, _c(x, 30.0))
    z = 1 / (2 * xb * xb)
    term = fnp.ones_like(xb)
    total = term
    for k in range(1, 9):
        term = -term * (2 * k - 1) * z
        total = total + term
    return fnp.where(big, total / (xb * math.sqrt(math.pi)), direct)


def _log_ndtr(x):
    """log Φ(x) of a float array: log1p(-Φ(-x)) above 0 (Φ near 1), log(erfcx(-x/√2)/2)
    - x²/2 below (no underflow however negative x is). Also torch.special.log_ndtr's."""
    pos = x > 0
    xp = fnp.where(pos, x, _c(x, 1.0))
    upper = fnp.log1p(-_ndtr(-xp))
    xn = fnp.where(pos, _c(x, -1.0), x)
    lower = fnp.log(_erfcx(-xn * _c(x, _SQRT1_2)) / 2) - xn * xn / 2
    return fnp.where(pos, upper, lower)


def log_ndtr(x, series_order=3):
    """log Φ(x) without underflow, finite however negative x is. (series_order is accepted
    for JAX's signature; the result is accurate to the dtype without a series.)"""
    return _log_ndtr(_float(x))


def _xlog(shift):
    """x log(y + shift), 0 where x = 0; JAX's derivatives: log(y + shift) in x and
    x / (y + shift) in y (so 0 in y at x = 0)."""
    @custom_jvp
    def fn(x, y):
        z = y + _c(y, shift) if shift else y
        zero = x == 0
        return fnp.where(zero, _c(x, 0.0), x * fnp.log(fnp.where(zero, _c(z, 1.0), z)))

    @fn.defjvp
    def fn_jvp(primals, tangents):
        (x, y), (tx, ty) = primals, tangents
        z = y + _c(y, shift) if shift else y
        return fn(x, y), tx * fnp.log(z) + ty * (x / z)
    return fn


_XLOGY, _XLOG1PY = _xlog(0.0), _xlog(1.0)


def xlogy(x, y):
    """x * log(y), 0 where x = 0 (also at y = 0)."""
    return _XLOGY(*fnp._promote_float(x, y))


def xlog1py(x, y):
    """x * log1p(y), 0 where x = 0 (also at y = -1)."""
    return _XLOG1PY(*fnp._promote_float(x, y))


@custom_jvp
def _entr(x):
    pos = x > 0
    safe = fnp.where(pos, x, _c(x, 1.0))
    return fnp.where(pos, -safe * fnp.log(safe),
                     fnp.where(x == 0, _c(x, 0.0), fnp.where(x < 0, _c(x, -np.inf), x)))


@_entr.defjvp
def _entr_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return _entr(x), t * -(1 + fnp.log(x))   # +inf at 0, NaN below: JAX's and torch's


def entr(x):
    """-x log x for x > 0, 0 at 0, -inf below 0."""
    return _entr(_float(x))


def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False, where=None):
    """log Σ b·exp(a) over `axis`, stable for large a (the finite max is taken out first).
    With b, the sum may be negative: then the result is NaN unless return_sign=True, which
    returns (log|Σ|, sign(Σ)) instead. `where` masks out entries (they count as b = 0)."""
    if b is None and not return_sign and where is None:
        return fnp.logsumexp(a, axis=axis, keepdims=keepdims)
    if b is not None:
        a, b = fnp._promote_float(a, b)
    else:
        a = _float(a)
    if where is not None:
        a = fnp.where(where, a, _c(a, -np.inf))
    nd = fnp.ndim(a)
    axes = tuple(range(nd)) if axis is None else fnp._canon_axis(axis, nd)
    amax = fnp.max(a, axis=axes, keepdims=True)
    amax = stop_gradient(fnp.where(fnp.isfinite(amax), amax, fnp.zeros_like(amax)))
    e = fnp.exp(a - amax)
    if b is not None:
        e = e * b
    s = fnp.sum(e, axis=axes, keepdims=True)
    sign = fnp.sign(s)
    out = fnp.log(fnp.abs(s)) + amax
    if not keepdims:
        out, sign = fnp.squeeze(out, axis=axes), fnp.squeeze(sign, axis=axes)
    if return_sign:
        return out, sign
    return fnp.where(sign < 0, _c(out, np.nan), out)
