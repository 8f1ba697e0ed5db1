"""The device functions of the special functions' kernel templates (primitives/special.py:
digamma, the scaled Bessel functions), C++ for CUDA and for the host's native kernels alike,
inserted into backends/cuda.py's PRELUDE: each the primitive's NumPy implementation
operation for operation, in double (the Bessel functions' Horner polynomials written out
from the same coefficient tables)."""
from __future__ import annotations

from ..primitives.special import BESSEL_TABLES

DIGAMMA = r"""// digamma(x) in double, rounded once (primitives/special.py's impl, operation for
// operation): below 1/2 the reflection psi(1 - x) - pi / tan(pi frac), frac = x - rint(x);
// the recurrence psi(w) = psi(w + 1) - 1/w, ten fixed steps that stop adding from w >= 10
// on (selects: the loop vectorizes); then ln w - 1/(2w) - sum B_2k / (2k w^2k), k <= 7.
// 0 -> -inf, NaN at the negative integers (torch's values)
__device__ __forceinline__ double ft_digamma_d(double v) {
  const double frac = v - rint(v);
  const double cot = 3.141592653589793 / tan(3.141592653589793 * frac);
  double w = v < 0.5 ? 1.0 - v : v;
  double acc = 0.0;
  for (int k = 0; k < 10; ++k) {
    const double inv = 1.0 / w;
    acc = acc - (w < 10.0 ? inv : 0.0);
    w = w < 10.0 ? w + 1.0 : w;
  }
  const double z = 1.0 / (w * w);
  double series = (0.0 + 0.08333333333333333) * z;        // B_14 / 14, ..., B_2 / 2
  series = (series + -0.021092796092796094) * z;
  series = (series + 0.007575757575757576) * z;
  series = (series + -0.004166666666666667) * z;
  series = (series + 0.003968253968253968) * z;
  series = (series + -0.008333333333333333) * z;
  series = (series + 0.08333333333333333) * z;
  const double psi = log(w) - 0.5 / w - series + acc;
  double out = v < 0.5 ? psi - cot : psi;
  out = v == 0.0 ? __longlong_as_double(0xfff0000000000000LL) : out;
  out = (v < 0.0 && frac == 0.0) ? __longlong_as_double(0x7ff8000000000000LL) : out;
  return out;
}
template <typename T> __device__ __forceinline__ T ft_digamma(T x) {
  return (T)ft_digamma_d((double)x);
}
"""


def _horner_c(coeffs, x):
    """The C expression of Σ coeffs[k] xᵏ by Horner's rule, unrolled (no loop: one in the
    element loop, or two in a row, keeps GCC's loop scalar)."""
    expr = repr(coeffs[-1])
    for c in coeffs[-2::-1]:
        expr = f"({expr}) * {x} + {c!r}"
    return expr


def _bessel_c():
    """ft_bessel_i0e/ft_bessel_i1e: primitives/special.py's implementation of e^-a I_nu(a),
    in double from its coefficient tables (BESSEL_TABLES), operation for operation."""
    out = ["// e^-a I_nu(a), a = |x| (primitives/special.py's impl, its tables): up to 20 the\n"
           "// series in z = a^2/4 (times a/2 for nu = 1) times e^-a, above the asymptotic\n"
           "// series in 1/a over sqrt(2 pi a); in double, rounded once; i1e odd (NumPy's sign)\n"]
    for nu in (0, 1):
        series, asym = BESSEL_TABLES[nu]
        scale = " * (s / 2.0)" if nu else ""
        sign = (" * (v > 0.0 ? 1.0 : (v < 0.0 ? -1.0 : 0.0))" if nu else "")
        out.append(
            f"FT_SPECIAL double ft_bessel_i{nu}e_d(double v) {{\n"
            f"  const double a = fabs(v);\n"
            f"  const bool near = a <= 20.0;\n"
            f"  const double s = near ? a : 0.0, l = near ? 21.0 : a, z = s * s / 4.0;\n"
            f"  const double small = ({_horner_c(series, 'z')}){scale} * exp(-a);\n"
            f"  const double u = 1.0 / l;\n"
            f"  const double large = ({_horner_c(asym, 'u')}) / sqrt(6.283185307179586 * l);\n"
            f"  const double out = (near ? small : large){sign};\n"
            f"  return v != v ? v : out;\n}}\n"
            f"template <typename T> __device__ __forceinline__ T ft_bessel_i{nu}e(T x) {{\n"
            f"  return (T)ft_bessel_i{nu}e_d((double)x);\n}}\n")
    return "".join(out)


# the Bessel functions in double: device functions on the GPU; on the host out-of-line vector
# clones (ftmath.h's FTM_CLONE, as its float transcendentals), so that a loop of streams
# calls one copy instead of inlining one per stream (i0e's float32 eager kernel compiled in
# 1.9 s inlined into 8 streams, 0.6 s so, and runs as fast); plain functions where ftmath.h
# is not included (tests/test_cuda_on_cpu.py). digamma stays inlined: as a clone (its double
# tan a gather) it built in 0.3 s instead of 2.3 (8 streams; 1.1 in 4) but ran 3.7x slower
SPECIAL_DECL = r"""#if defined(__CUDACC__)
#define FT_SPECIAL __device__ __forceinline__
#elif defined(FTM_CLONE)
#define FT_SPECIAL FTM_CLONE
#else
#define FT_SPECIAL static inline
#endif
"""

SPECIAL_TEMPLATES = SPECIAL_DECL + DIGAMMA + _bessel_c()
