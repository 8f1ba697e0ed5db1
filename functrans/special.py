"""ft.special: torch.special's functions on Tensors, with torch's promotion (integers and
bools to the default float dtype), grad_fn names, gradients and errors. Each is one
recorded facade op over functrans.numpy and the special-function primitives
(primitives/special.py: lgamma, digamma, Hurwitz zeta, erfc, erf_inv, ndtri, the scaled
Bessel functions); polygamma, multigammaln, i0, i1, ndtr, log_ndtr, xlogy and the rest are
compositions of those, written so that their derivatives are torch's (the unselected
branch of a `where` never sees an input that would make its derivative NaN)."""
from __future__ import annotations

import builtins
import math

import numpy as np

from .numpy import raw as fnp
from .facade import dtypes as D
from .facade.creation import tensor as _tensor
from .facade.methods import abs_fn
from .facade.tensor import Tensor, apply_fn, static
from .facade.tensor_info import result_type
from .higher_order.custom import custom_jvp
from .primitives import elementwise as ew
from .primitives import special as sp
from .scipy.special import _entr, _erfcx, _log_ndtr, _ndtr   # the same kernels as JAX's

__all__ = ["digamma", "entr", "erf", "erfc", "erfcx", "erfinv", "exp2", "expit", "expm1",
           "gammaln", "i0", "i0e", "i1", "i1e", "log1p", "log_ndtr", "log_softmax", "logit",
           "logsumexp", "multigammaln", "ndtr", "ndtri", "polygamma", "psi", "round",
           "sinc", "softmax", "xlog1py", "xlogy", "zeta"]



def _float(x, name):
    """x as a floating Tensor: integers and bools become the default float dtype."""
    if not isinstance(x, Tensor):
        raise TypeError(f"special_{name}(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(x).__name__}")
    return x.to(D.get_default_dtype()) if x.dtype.kind in "biu" else x


def _pair(x, y, name):
    """Two operands (a Tensor and a Tensor or number) promoted to one floating dtype as
    torch does; which one was a number picks the grad_fn's suffix (0, 1 or 2)."""
    if not isinstance(x, Tensor) and not isinstance(y, Tensor):
        raise TypeError(f"special_{name}(): expected at least one Tensor argument")
    dt = result_type(x, y)
    if dt.kind in "biu":
        dt = D.get_default_dtype()
    suffix = 1 if not isinstance(x, Tensor) else 2 if not isinstance(y, Tensor) else 0
    x = x.to(dt) if isinstance(x, Tensor) else _tensor(x, dtype=dt)
    y = y.to(dt) if isinstance(y, Tensor) else _tensor(y, dtype=dt)
    return x, y, suffix


def _c(x, v):
    """A rank-0 constant of x's dtype."""
    return np.asarray(v, x.dtype)


def _unary(grad_fn, fn, doc):
    name = doc.split(":")[0]

    def f(input):
        x = _float(input, name)
        return apply_fn(grad_fn, fn, (x,))
    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"torch.special.{doc}"
    return f


# ---------------------------------------------------------------------------------------
# error functions and the normal distribution


erf = _unary("ErfBackward0", ew.erf, "erf: the error function")
erfc = _unary("ErfcBackward0", sp.erfc, "erfc: 1 - erf(x), accurate where erf(x) is near 1")
erfcx = _unary("SpecialErfcxBackward0", _erfcx, "erfcx: exp(x²) erfc(x)")
erfinv = _unary("ErfinvBackward0", sp.erf_inv, "erfinv: the inverse of erf on (-1, 1)")
ndtr = _unary("MulBackward1", _ndtr, "ndtr: the standard normal CDF Φ(x)")
ndtri = _unary("SpecialNdtriBackward0", sp.ndtri, "ndtri: Φ⁻¹(p), the inverse of ndtr")
log_ndtr = _unary("SpecialLogNdtrBackward0", _log_ndtr,
                  "log_ndtr: log Φ(x), finite however negative x is")


# ---------------------------------------------------------------------------------------
# gamma functions


def _multigammaln_fn(a, p):
    out = sum(sp.lgamma(a - _c(a, i / 2)) for i in range(p))
    return out + _c(a, p * (p - 1) / 4 * math.log(math.pi))


gammaln = _unary("LgammaBackward0", sp.lgamma, "gammaln: log|Γ(x)|")
digamma = _unary("DigammaBackward0", sp.digamma, "digamma: ψ(x) = Γ'(x)/Γ(x)")
psi = digamma


def _polygamma_fn(x, n):
    if n == 0:
        return sp.digamma(x)
    return _c(x, (-1) ** (n + 1) * math.factorial(n)) * sp.zeta(_c(x, n + 1), x)


def polygamma(n, input):
    """torch.special.polygamma: ψ⁽ⁿ⁾(x), the n-th derivative of digamma (n ≥ 0)."""
    if not isinstance(n, (builtins.int, np.integer)) or isinstance(n, builtins.bool):
        raise TypeError(f"polygamma(): argument 'n' (position 1) must be int, not "
                        f"{type(n).__name__}")
    if n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")
    x = _float(input, "polygamma")
    return apply_fn("PolygammaBackward0", _polygamma_fn, (x,), static(n=builtins.int(n)))


def multigammaln(input, p):
    """torch.special.multigammaln: the log of the multivariate gamma function of dimension p,
    Σᵢ lgamma(a - i/2) + p(p-1)/4 log π (inf where a term sits on a pole, as torch's)."""
    a = _float(input, "multigammaln")
    if p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    return apply_fn("MvlgammaBackward0", _multigammaln_fn, (a,), static(p=builtins.int(p)))


def zeta(input, other):
    """torch.special.zeta: the Hurwitz zeta function ζ(x, q) = Σₖ (q + k)⁻ˣ (the Riemann
    zeta at q = 1). Differentiable in q; the derivative in x raises, as torch's."""
    x, q, suffix = _pair(input, other, "zeta")
    return apply_fn(f"SpecialZetaBackward{suffix}", sp.zeta, (x, q))


# ---------------------------------------------------------------------------------------
# Bessel functions


def _scaled_back(scaled):
    """I_ν(x) = e^{|x|} i_νe(x), as e^{|x|/2} (i_νe(x) e^{|x|/2}): finite wherever I_ν is."""
    def fn(x):
        h = fnp.exp(abs_fn(x) / 2)        # |x| with torch's derivative sign(x): 0 at 0
        return (scaled(x) * h) * h
    return fn


i0e = _unary("SpecialI0EBackward0", sp.bessel_i0e, "i0e: e^{-|x|} I₀(x)")
i1e = _unary("SpecialI1EBackward0", sp.bessel_i1e, "i1e: e^{-|x|} I₁(x)")
i0 = _unary("I0Backward0", _scaled_back(sp.bessel_i0e),
            "i0: the modified Bessel function of the first kind of order 0")
i1 = _unary("SpecialI1Backward0", _scaled_back(sp.bessel_i1e),
            "i1: the modified Bessel function of the first kind of order 1")


# ---------------------------------------------------------------------------------------
# logarithms, entropy and friends


def _xlog_fn(shift):
    """x log(y + shift), 0 where x = 0 unless y is NaN; torch's derivatives: log(y + shift)
    in x (0 where x = 0 and y + shift <= 0), x / (y + shift) in y (NaN at x = y + shift = 0)."""
    @custom_jvp
    def fn(x, y):
        z = y + _c(y, shift) if shift else y
        zero = (x == 0) & ~fnp.isnan(y)
        return fnp.where(zero, _c(x, 0.0), x * fnp.log(fnp.where(zero, _c(y, 1.0), z)))

    @fn.defjvp
    def fn_jvp(primals, tangents):
        (x, y), (tx, ty) = primals, tangents
        z = y + _c(y, shift) if shift else y
        flat = (x == 0) & (z <= 0)
        dx = fnp.where(flat, _c(x, 0.0), fnp.log(fnp.where(flat, _c(z, 1.0), z)))
        return fn(x, y), tx * dx + ty * (x / z)
    return fn


_XLOGY, _XLOG1PY = _xlog_fn(0.0), _xlog_fn(1.0)


def xlogy(input, other):
    """torch.special.xlogy: x * log(y), 0 where x = 0 (unless y is NaN)."""
    x, y, suffix = _pair(input, other, "xlogy")
    return apply_fn(f"XlogyBackward{suffix}", _XLOGY, (x, y))


def xlog1py(input, other):
    """torch.special.xlog1py: x * log1p(y), 0 where x = 0 (unless y is NaN)."""
    x, y, suffix = _pair(input, other, "xlog1py")
    return apply_fn(f"SpecialXlog1PyBackward{suffix}", _XLOG1PY, (x, y))


entr = _unary("SpecialEntrBackward0", _entr, "entr: -x log x (0 at 0, -inf below)")


def _logit_fn(x, eps):
    if eps is not None:
        x = fnp.clip(x, _c(x, eps), _c(x, 1 - eps))
    return fnp.log(x / (1 - x))


def logit(input, eps=None):
    """torch.special.logit: log(p / (1 - p)), p first clamped to [eps, 1 - eps] when eps is
    given (the gradient is then 0 outside)."""
    x = _float(input, "logit")
    return apply_fn("LogitBackward0", _logit_fn, (x,),
                    static(eps=None if eps is None else float(eps)))


def _sinc_fn(x):
    zero = x == 0
    px = fnp.where(zero, _c(x, 1.0), x) * _c(x, math.pi)
    return fnp.where(zero, _c(x, 1.0), fnp.sin(px) / px)


sinc = _unary("SincBackward0", _sinc_fn, "sinc: sin(πx)/(πx), 1 at 0")


# ---------------------------------------------------------------------------------------
# the functions torch.special re-exports under its own name


def expit(input):
    """torch.special.expit: the logistic sigmoid."""
    return _float(input, "expit").sigmoid()


def exp2(input):
    """torch.special.exp2: 2 ** x."""
    return _float(input, "exp2").exp2()


def expm1(input):
    """torch.special.expm1: exp(x) - 1, accurate near 0."""
    return _float(input, "expm1").expm1()


def log1p(input):
    """torch.special.log1p: log(1 + x), accurate near 0."""
    return _float(input, "log1p").log1p()


def round(input, *, decimals=0):  # noqa: A001  (torch's name)
    """torch.special.round: torch.round (halves to even)."""
    return apply_fn("RoundBackward1", fnp.round, (input,), static(decimals=decimals))


def softmax(input, dim, *, dtype=None):
    """torch.special.softmax: torch.softmax."""
    return input.softmax(dim, dtype=dtype)


def log_softmax(input, dim, *, dtype=None):
    """torch.special.log_softmax: torch.log_softmax."""
    return input.log_softmax(dim, dtype=dtype)


def logsumexp(input, dim, keepdim=False):
    """torch.special.logsumexp: torch.logsumexp."""
    return input.logsumexp(dim, keepdim)
