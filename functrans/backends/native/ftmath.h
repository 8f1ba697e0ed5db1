// functrans native math: the functions named by the primitives' CUDA expression templates,
// for the host compiler, so that a generated kernel compiles unchanged on the CPU and its
// loop vectorizes (libm calls keep a loop scalar).
//
// Use: `using namespace ftm;` in a translation unit that does not include <cmath> or
// <math.h>; otherwise put FTM_USING at the top of the kernel's body (its using-declarations
// hide the C library's overloads). float16 is computed in float.
//
// How they are built: branch-free (every path computed, the answer picked by selects; bit
// manipulation through __builtin_bit_cast), range reduction + Taylor or Chebyshev
// polynomials. float exp, expm1, log, log1p, tanh, erf are evaluated in float arithmetic with
// polynomials sized for float (16 lanes with AVX-512, within 1 ulp of the correctly rounded
// result); the other float functions evaluate the double one and round once.
// Written for -fno-fast-math -ffp-contract=off (each operation rounds as written).
// Measured accuracy (max ulp from NumPy over dense sweeps): tests/test_native_math.py,
// docs/jit.md "Accuracy of the native math functions". fmod, and the double sin/cos/tan
// without AVX-512, forward to the C library (its values; their loops stay scalar).
#pragma once

#define FTM_INL inline __attribute__((always_inline))
extern "C" double lgamma_r(double, int*) noexcept;   // <math.h> (POSIX), not included

namespace ftm {

// CUDA's bit-cast intrinsics, used by literal_c for non-finite literals
FTM_INL float __int_as_float(int i) { return __builtin_bit_cast(float, i); }
FTM_INL double __longlong_as_double(long long i) { return __builtin_bit_cast(double, i); }

namespace detail {
typedef unsigned long long u64;
FTM_INL u64 bits(double x) { return __builtin_bit_cast(u64, x); }
FTM_INL double dbl(u64 b) { return __builtin_bit_cast(double, b); }
constexpr u64 SIGN = 0x8000000000000000ULL;
constexpr double INF = __builtin_inf();
constexpr double NaN = __builtin_nan("");
constexpr double MAGIC = 0x1.8p52;          // v + MAGIC - MAGIC rounds v to an integer (|v| < 2^51)
constexpr double LN2_HI = 0x1.62e42fee00000p-1;   // 32 bits: k * LN2_HI is exact for |k| < 2^21
constexpr double LN2_LO = 0x1.a39ef35793c76p-33;  // ln 2 - LN2_HI
constexpr double INV_LN2 = 0x1.71547652b82fep+0;

FTM_INL double absd(double x) { return dbl(bits(x) & ~SIGN); }
FTM_INL double copysignd(double m, double s) { return dbl((bits(m) & ~SIGN) | (bits(s) & SIGN)); }
// 2^k for an integer-valued k in [-1022, 1023]: k + MAGIC holds k in its low bits
FTM_INL double pow2i(double k) { return dbl((bits(k + MAGIC) - bits(MAGIC) + 1023) << 52); }

// Selects take masks (all ones = true) made by integer arithmetic on the bits: from a
// floating-point comparison GCC turns a select back into a branch around the arithmetic of
// its arm, and under -ftrapping-math (the default) that branch keeps the loop scalar.
// Clamps too: past a clamp `x > c ? c : x` GCC propagates the constant through the rest of
// the function and keeps a branch to the folded (overflowing, so trapping) result.
FTM_INL u64 top(u64 v) { return -(v >> 63); }                          // bit 63 set
FTM_INL u64 nonzero(u64 v) { return top(v | -v); }
FTM_INL u64 neg(double x) { return top(bits(x)); }                     // sign bit (-0 too)
FTM_INL u64 lt(double a, double b) { return top(bits(a) - bits(b)); }  // a < b, both >= +0 or a NaN (false)
FTM_INL u64 eq(double a, double b) { return ~nonzero(bits(a) ^ bits(b)); }  // same bits
FTM_INL u64 isnan(double x) { return lt(INF, absd(x)); }
FTM_INL u64 iszero(double x) { return ~nonzero(bits(x) << 1); }
FTM_INL double sel(u64 m, double a, double b) { return dbl((bits(a) & m) | (bits(b) & ~m)); }
// min(a, c) for a >= +0 or NaN (kept) and a constant c > 0
FTM_INL double minc(double a, double c) { return sel(lt(c, a) & ~isnan(a), c, a); }
// x clamped to [lo, hi], lo < 0 < hi; NaN kept
FTM_INL double clamp(double x, double lo, double hi) {
  const u64 num = ~isnan(x);
  x = sel(~neg(x) & lt(hi, x) & num, hi, x);
  return sel(neg(x) & lt(-lo, absd(x)) & num, lo, x);
}

// polynomial, highest coefficient first (expands at compile time: no loop in the caller's loop)
FTM_INL double horner(double, double c) { return c; }
template <typename... C> FTM_INL double horner(double x, double c0, double c1, C... cs) {
  return horner(x, c0 * x + c1, cs...);
}

// exp(x + xl), |xl| < 2^-40 (pow's low part; 0 for exp) as p * 2^k: k = round(x / ln 2),
// r = x - k ln 2 + xl in [-0.35, 0.35], p = exp(r) by its Taylor series to r^13 (truncation
// < 2^-57); 2^k applied in two steps so that a subnormal result rounds once. NaN and the
// overflow/underflow ends follow from the clamp.
FTM_INL double exp_dd(double x, double xl) {
  const double xc = clamp(x, -745.2, 709.8);
  const double k = (xc * INV_LN2 + MAGIC) - MAGIC;
  const double r = ((xc - k * LN2_HI) - k * LN2_LO) + xl;
  const double q = horner(r, 0x1.6124613a86d09p-33, 0x1.1eed8eff8d898p-29, 0x1.ae64567f544e4p-26,
                          0x1.27e4fb7789f5cp-22, 0x1.71de3a556c734p-19, 0x1.a01a01a01a01ap-16,
                          0x1.a01a01a01a01ap-13, 0x1.6c16c16c16c17p-10, 0x1.1111111111111p-7,
                          0x1.5555555555555p-5, 0x1.5555555555555p-3, 0x1.0p-1);
  const double p = 1.0 + (r + r * r * q);
  const double k1 = (k * 0.5 + MAGIC) - MAGIC;
  return p * pow2i(k1) * pow2i(k - k1);
}
// below -745.2 (-inf included) the answer 0 is selected, computed from x = 0: the product
// that would round to 0 underflows, a microcode assist per lane on x86 (see exp_f)
FTM_INL double exp(double x) {
  const u64 zero = neg(x) & lt(745.2, absd(x)) & ~isnan(x);
  return sel(zero, 0.0, exp_dd(sel(zero, 0.0, x), 0.0));
}

// expm1(x) = 2^k (expm1(r) + 1) - 1, r = x - k ln 2 carried with its rounding error c;
// expm1(r) by its Taylor series to r^14; computed as 2 (t em + (t - 1/2)), t = 2^(k-1), so
// that k = 1024 does not overflow t. Tiny x (subnormals, -0) is its own answer.
FTM_INL double expm1(double x) {
  const double xc = clamp(x, -40.0, 709.8);
  const double k = (xc * INV_LN2 + MAGIC) - MAGIC;
  const double hi = xc - k * LN2_HI, lo = k * LN2_LO;
  const double r = hi - lo;
  const double c = (hi - r) - lo;
  const double q = horner(r, 0x1.93974a8c07c9dp-37, 0x1.6124613a86d09p-33, 0x1.1eed8eff8d898p-29,
                          0x1.ae64567f544e4p-26, 0x1.27e4fb7789f5cp-22, 0x1.71de3a556c734p-19,
                          0x1.a01a01a01a01ap-16, 0x1.a01a01a01a01ap-13, 0x1.6c16c16c16c17p-10,
                          0x1.1111111111111p-7, 0x1.5555555555555p-5, 0x1.5555555555555p-3,
                          0x1.0p-1);
  const double em = r + (r * r * q + c);
  const double t = pow2i(k - 1.0);
  const double res = (t * em + (t - 0.5)) * 2.0;
  return sel(lt(absd(x), 0x1p-54), x, res);
}

// log(u) + corr for a positive normal u: u = 2^e m, m in [sqrt(1/2), sqrt 2), f = m - 1
// (exact), s = f / (2 + f), log(1 + f) = 2 atanh(s) = f - s (f - R), R = sum 2 s^2n / (2n+1)
// to n = 11 (truncation < 2^-60 relative)
FTM_INL double log_core(double u, double e_add, double corr) {
  const u64 iu = bits(u);
  const u64 ef = (iu + (0x10000000000000ULL - 0x6a09e667f3bcdULL)) >> 52;
  const double m = dbl(iu - (ef << 52) + (1023ULL << 52));
  const double e = (dbl(bits(MAGIC) + ef) - MAGIC) - 1023.0 + e_add;
  const double f = m - 1.0;
  const double s = f / (2.0 + f);
  const double z = s * s;
  const double R = z * horner(z, 0x1.642c8590b2164p-4, 0x1.8618618618618p-4, 0x1.af286bca1af28p-4,
                              0x1.e1e1e1e1e1e1ep-4, 0x1.1111111111111p-3, 0x1.3b13b13b13b14p-3,
                              0x1.745d1745d1746p-3, 0x1.c71c71c71c71cp-3, 0x1.2492492492492p-2,
                              0x1.999999999999ap-2, 0x1.5555555555555p-1);
  return e * LN2_HI + ((e * LN2_LO + corr) + (f - s * (f - R)));
}

FTM_INL double log(double x) {
  const u64 sub = lt(absd(x), 0x1p-1022);      // subnormals scaled into the normal range
  double r = log_core(sel(sub, x * 0x1p54, x), sel(sub, -54.0, 0.0), 0.0);
  r = sel(eq(x, INF), x, r);
  r = sel(neg(x) | isnan(x), NaN, r);
  return sel(iszero(x), -INF, r);
}

// log1p(x) = log(u) + err/u with u = 1 + x rounded and err its exact rounding error
FTM_INL double log1p(double x) {
  const double u = 1.0 + x;
  const double b = u - 1.0;
  const double err = (1.0 - (u - b)) + (x - b);
  double r = log_core(u, 0.0, err / u);
  r = sel(eq(x, INF), x, r);
  r = sel(eq(x, -1.0), -INF, r);
  r = sel(isnan(x) | (neg(x) & lt(1.0, absd(x))), NaN, r);
  return sel(lt(absd(x), 0x1p-54), x, r);
}

// tanh |x| = em / (em + 2), em = expm1(2|x|), |x| clamped to 20 (1 - tanh(20) < 2^-55:
// the quotient rounds to 1)
FTM_INL double tanh(double x) {
  const double a = absd(x);
  const double em = expm1(2.0 * minc(a, 20.0));
  return copysignd(em / (em + 2.0), x);
}

// exp(a) / 2 for sinh and cosh of a >= 22; past 709 as (exp(a/2) / 2) exp(a/2), so that
// the values up to the overflow threshold 710.47 stay finite
FTM_INL double half_exp(double a) {
  const u64 huge = lt(709.0, a);
  const double w = exp(sel(huge, 0.5 * a, a));
  return sel(huge, (0.5 * w) * w, 0.5 * w);
}

// sinh |x| = (em + em / (em + 1)) / 2, em = expm1(|x|), below 22; exp(|x|) / 2 above
FTM_INL double sinh(double x) {
  const double a = absd(x);
  const double em = expm1(minc(a, 22.0));
  const double r = sel(lt(a, 22.0), 0.5 * (em + em / (em + 1.0)), half_exp(a));
  return copysignd(r, x);
}

// cosh x = 1 + em^2 / (2 (1 + em)), em = expm1(|x|), below 22; exp(|x|) / 2 above
FTM_INL double cosh(double x) {
  const double a = absd(x);
  const double em = expm1(minc(a, 22.0));
  return sel(lt(a, 22.0), 1.0 + em * em / (2.0 * (1.0 + em)), half_exp(a));
}

// erf: below 1 its Taylor series in x^2 to x^37 (truncation < 2^-60); on [1, 6]
// 1 - exp(-x^2) g(x), g = erfc(x) exp(x^2) by a degree-27 Chebyshev fit in t = (2x - 7)/5
// (max error 0.14 ulp of erf), |x| clamped to 6 (erfc(6) < 2^-55: the difference rounds to 1).
// The arms, of a = |x|: erf_series(a) (meant below 1) and erfc_fit(a) = exp(-a^2) g(a) for
// a in [1, 6] (1 below, 6 above)
FTM_INL double erf_series(double a) {
  return a * horner(a * a, 0x1.5f7919bc67b8cp-58, -0x1.a2007af3447f6p-54,
      0x1.d70b3537f4765p-50, -0x1.f56f071a885cfp-46, 0x1.f683ae4a97007p-42,
      -0x1.d8453cb0c46eap-38, 0x1.9e6ad5e55a730p-34, -0x1.51d7181c5d36dp-30,
      0x1.fcc5720624c1cp-27, -0x1.5f742ec43e71ap-23, 0x1.b9e6c9dc651a3p-20,
      -0x1.f4d25c3e0c2ebp-17, 0x1.f9a326f9b89b7p-14, -0x1.c02db40040b86p-11,
      0x1.565bcd0e6a53fp-8, -0x1.b82ce31288b51p-6, 0x1.ce2f21a042be2p-4,
      -0x1.812746b0379e7p-2, 0x1.20dd750429b6dp+0);
}
FTM_INL double erfc_fit(double a) {
  const double ac = sel(lt(a, 1.0), 1.0, minc(a, 6.0));
  const double t = (ac - 3.5) * 0.4;
  const double g = horner(t, -0x1.0ffeb2025a844p-27, 0x1.4780e2b6ae9fcp-26, 0x1.552c0bb09da2bp-27,
      -0x1.bdbea062e7bcep-26, -0x1.c8fc66fc7bc0dp-24, 0x1.09fb2105f8c63p-22,
      -0x1.0fc457ffcf943p-22, 0x1.224ef177e028dp-21, -0x1.97bc0d3524cc9p-20,
      0x1.b60406b96cda5p-19, -0x1.bb86611d19f41p-18, 0x1.cd67bf2fdbdcfp-17,
      -0x1.dc4d3878b7d9bp-16, 0x1.e1ece2c18fa69p-15, -0x1.dffd8fc4d89c6p-14,
      0x1.d6db0dfb1669cp-13, -0x1.c669d83cfbc32p-12, 0x1.af197438ea57dp-11,
      -0x1.91bd61dd48183p-10, 0x1.6f7002cabba84p-9, -0x1.4984fb844f2d2p-8,
      0x1.2174217335a2cp-7, -0x1.f18023477afb8p-7, 0x1.a1b820b70ef9fp-6,
      -0x1.56274da105a47p-5, 0x1.10eccd7003927p-4, -0x1.a72747a5e6b50p-4,
      0x1.3e0a99a0ee913p-3);
  return exp(-(ac * ac)) * g;
}
FTM_INL double erf(double x) {
  const double a = absd(x);
  return copysignd(sel(lt(a, 1.0), erf_series(a), 1.0 - erfc_fit(a)), x);
}

// erfinv: Winitzki's closed form (relative error < 2e-3; 0.147 his constant) refined by two
// Halley steps y -= u / (1 + y u), u = f / f', on f(y) = erf(y) - a up to a = 1/2 and on
// f = (1 - a) - erfc(y) above (1 - a exact there; erfc = 1 - erf_series below 1, erfc_fit
// above, whose relative error, a few ulp from the rounding of y^2, weighs 1/(2 y^2) of it in
// y). +-1 -> +-inf, NaN beyond; -0 kept
FTM_INL double erfinv_step(double y, double a, double om, u64 tail) {
  const double es = erf_series(y);
  const double ec = sel(lt(y, 1.0), 1.0 - es, erfc_fit(y));
  const double f = sel(tail, om - ec, es - a);
  const double u = f / (1.1283791670955126 * exp(-(y * y)));
  return y - u / (1.0 + y * u);
}
FTM_INL double erfinv(double x) {
  const double a = absd(x);
  const double om = 1.0 - a;
  const double l = log(om * (1.0 + a));
  const double t = 4.330746750799873 + 0.5 * l;           // 2 / (pi 0.147) + l / 2
  double y = __builtin_sqrt(__builtin_sqrt(t * t - l * 6.802721088435374) - t);
  const u64 tail = lt(0.5, a);
  y = erfinv_step(erfinv_step(y, a, om, tail), a, om, tail);   // (a loop of two: GCC left
  y = sel(eq(a, 1.0), INF, y);                                 // the caller's loop scalar)
  return copysignd(sel(isnan(x) | lt(1.0, a), NaN, y), x);
}

// to nearest, ties to even (|x| < 2^52 through MAGIC-like addition; larger x is integral)
FTM_INL double rint(double x) {
  const double a = absd(x);
  const double r = (a + 0x1p52) - 0x1p52;
  return copysignd(sel(lt(a, 0x1p52), r, a), x);
}
// floor and ceil from rint: d = rint(x) - x is exact; step by one where d has the wrong sign
FTM_INL double floor(double x) {
  const double r = rint(x), d = r - x;
  return copysignd(sel(~neg(d) & ~iszero(d), r - 1.0, r), x);
}
FTM_INL double ceil(double x) {
  const double r = rint(x), d = r - x;
  return copysignd(sel(neg(d) & ~iszero(d), r + 1.0, r), x);
}
// to nearest, ties away from zero (C's round; the template for rounding_method 0)
FTM_INL double round(double x) {
  const double a = absd(x);
  const double r = rint(a);
  return copysignd(sel(eq(a - r, 0.5), r + 1.0, r), x);
}

// atan |x|: reduced to t = (a - c) / (1 + a c), |t| <= 7/16, around c = 0, 1/2, 1, 3/2 or
// infinity (t = -1/a); atan(t) = t + t z Q(z), z = t^2, Q a degree-12 Chebyshev fit on
// [0, (7/16)^2] (max error 1.7e-19); atan(c) added as hi + lo
FTM_INL double atan(double x) {
  const double a = absd(x);
  const u64 r1 = ~lt(a, 0.4375), r2 = ~lt(a, 0.6875), r3 = ~lt(a, 1.1875), r4 = ~lt(a, 2.4375);
  const double num = sel(r4, -1.0, sel(r3, a - 1.5, sel(r2, a - 1.0, sel(r1, 2.0 * a - 1.0, a))));
  const double den = sel(r4, a, sel(r3, 1.0 + 1.5 * a, sel(r2, a + 1.0, sel(r1, 2.0 + a, 1.0))));
  const double hi = sel(r4, 0x1.921fb54442d18p+0, sel(r3, 0x1.f730bd281f69bp-1,
                    sel(r2, 0x1.921fb54442d18p-1, sel(r1, 0x1.dac670561bb4fp-2, 0.0))));
  const double lo = sel(r4, 0x1.1a62633145c07p-54, sel(r3, 0x1.007887af0cbbdp-56,
                    sel(r2, 0x1.1a62633145c07p-55, sel(r1, 0x1.a2b7f222f65e2p-56, 0.0))));
  const double t = num / den;
  const double z = t * t;
  const double q = horner(z, 0x1.bda2d7a0e8d79p-7, -0x1.048fd8136181ep-5, 0x1.6aafd6758cb0ep-5,
      -0x1.a9da6c0c937c5p-5, 0x1.e12c53423a43dp-5, -0x1.1108a0292317fp-4, 0x1.3b13269767da0p-4,
      -0x1.745d1147c5569p-4, 0x1.c71c719c6309dp-4, -0x1.2492492437608p-3, 0x1.9999999998d02p-3,
      -0x1.5555555555550p-2);
  return copysignd(hi + (lo + (t + t * z * q)), x);
}

// asin x = atan(x / sqrt((1 - x)(1 + x))), acos x = 2 atan(sqrt((1 - x) / (1 + x))): +-1
// go through atan(inf), |x| > 1 through sqrt of a negative (NaN)
FTM_INL double asin(double x) { return atan(x / __builtin_sqrt((1.0 - x) * (1.0 + x))); }
FTM_INL double acos(double x) { return 2.0 * atan(__builtin_sqrt((1.0 - x) / (1.0 + x))); }

// atan2: atan(|y| / |x|), pi - that when x's sign bit is set, y's sign; 0/0 -> 0, inf/inf -> pi/4
FTM_INL double atan2(double y, double x) {
  const double ax = absd(x), ay = absd(y);
  double a = atan(ay / ax);
  a = sel(iszero(ax) & iszero(ay), 0.0, a);
  a = sel(eq(ax, INF) & eq(ay, INF), 0x1.921fb54442d18p-1, a);
  const double r = sel(neg(x), 0x1.921fb54442d18p+1 + (0x1.1a62633145c07p-53 - a), a);
  return sel(isnan(x) | isnan(y), x + y, copysignd(r, y));
}

// asinh |x| = log1p(a + a^2 / (1 + sqrt(1 + a^2))); log(a) + ln 2 from 2^28
FTM_INL double asinh(double x) {
  const double a = absd(x);
  const double r = sel(lt(a, 0x1p28), log1p(a + a * a / (1.0 + __builtin_sqrt(1.0 + a * a))),
                       log(a) + 0x1.62e42fefa39efp-1);
  return copysignd(r, x);
}

// acosh x = log1p(t + sqrt(2t + t^2)), t = x - 1; log(x) + ln 2 from 2^28; NaN below 1
FTM_INL double acosh(double x) {
  const double t = x - 1.0;
  const double r = sel(lt(x, 0x1p28), log1p(t + __builtin_sqrt(2.0 * t + t * t)),
                       log(x) + 0x1.62e42fefa39efp-1);
  return sel(neg(x) | lt(x, 1.0), NaN, r);
}

// atanh |x| = log1p(2a / (1 - a)) / 2
FTM_INL double atanh(double x) {
  const double a = absd(x);
  return copysignd(0.5 * log1p(2.0 * a / (1.0 - a)), x);
}

// Dekker's exact product without FMA: a b = p + e
FTM_INL void split(double a, double &h, double &l) {
  const double c = 134217729.0 * a;                  // 2^27 + 1
  h = c - (c - a);
  l = a - h;
}
FTM_INL double two_prod(double a, double b, double &e) {
  const double p = a * b;
  double ah, al, bh, bl;
  split(a, ah, al);
  split(b, bh, bl);
  e = ((ah * bh - p) + ah * bl + al * bh) + al * bl;
  return p;
}

// log x = hi + lo for x > 0 (relative error < 2^-64; what pow needs): the log_core
// reduction with s = f / (2 + f) carried as sh + sl, log(1 + f) = 2s + s^3 T(s^2) with the
// leading terms in double-double
FTM_INL double log_dd(double x, double &lo) {
  const u64 sub = lt(x, 0x1p-1022);
  const u64 iu = bits(sel(sub, x * 0x1p54, x));
  const u64 ef = (iu + (0x10000000000000ULL - 0x6a09e667f3bcdULL)) >> 52;
  const double m = dbl(iu - (ef << 52) + (1023ULL << 52));
  const double e = (dbl(bits(MAGIC) + ef) - MAGIC) - 1023.0 + sel(sub, -54.0, 0.0);
  const double f = m - 1.0;
  const double dh = 2.0 + f, dl = f - (dh - 2.0);
  const double sh = f / dh;
  double pe;
  const double p = two_prod(sh, dh, pe);
  const double sl = (((f - p) - pe) - sh * dl) / dh;
  double ze;
  const double zh = two_prod(sh, sh, ze);
  const double zl = ze + 2.0 * sh * sl;
  const double t2 = zh * horner(zh, 0x1.642c8590b2164p-4, 0x1.8618618618618p-4,
      0x1.af286bca1af28p-4, 0x1.e1e1e1e1e1e1ep-4, 0x1.1111111111111p-3, 0x1.3b13b13b13b14p-3,
      0x1.745d1745d1746p-3, 0x1.c71c71c71c71cp-3, 0x1.2492492492492p-2, 0x1.999999999999ap-2);
  const double th = 0x1.5555555555555p-1 + t2;     // T = 2/3 + z (2/5 + ...)
  const double tl = ((0x1.5555555555555p-1 - th) + t2) + 0x1.5555555555555p-55;
  double ue, ve;
  const double uh = two_prod(sh, zh, ue);          // s^3
  const double ul = ue + sh * zl + sl * zh;
  const double vh = two_prod(uh, th, ve);          // s^3 T
  const double vl = ve + uh * tl + ul * th;
  const double a0 = 2.0 * sh;
  const double h1 = a0 + vh;
  const double l1 = ((a0 - h1) + vh) + 2.0 * sl + vl;
  const double eh = e * LN2_HI;
  const double h2 = eh + h1;
  lo = ((eh - h2) + h1) + (l1 + e * LN2_LO);
  return h2;
}

// C99's (and NumPy's) special cases of x^y around r = |x|^y computed for finite x != 0
FTM_INL double pow_special(double x, double y, double r) {
  r = sel(iszero(x), sel(neg(y), INF, 0.0), r);
  r = sel(eq(absd(x), INF), sel(neg(y), 0.0, INF), r);
  r = sel(isnan(x) | isnan(y), x + y, r);
  const u64 yint = eq(rint(y), y);                        // inf counts as an even integer
  const u64 yodd = yint & ~eq(rint(0.5 * y), 0.5 * y);
  r = sel(neg(x) & yodd, -r, r);
  r = sel(neg(x) & ~iszero(x) & lt(absd(x), INF) & ~yint, NaN, r);
  r = sel(eq(absd(x), 1.0) & eq(absd(y), INF), 1.0, r);   // (-1)^inf = 1
  return sel(iszero(y) | eq(x, 1.0), 1.0, r);
}

// x^y for float arguments: exp(y log|x|) in double (|y log|x|| < 104 where the float result
// is neither 0 nor inf, so the double's error stays below 2^-44)
FTM_INL double powf_(double x, double y) { return pow_special(x, y, exp(y * log(absd(x)))); }

// x^y: exp of y log|x| carried in double-double (its error times |y log|x|| <= 746 stays
// below 2^-54); the low part dropped where the result over- or underflows anyway, and at
// |x| = 1, where y's split may overflow
FTM_INL double pow(double x, double y) {
  double ll, pe;
  const double lh = log_dd(absd(x), ll);
  const double wh = two_prod(y, lh, pe);
  const double wl0 = pe + y * ll;                    // NaN where y's split overflows: |x| = 1
  const double wl = sel(lt(absd(wh), 1000.0) & ~isnan(wl0), wl0, 0.0);
  return pow_special(x, y, exp_dd(wh, wl));
}

// sin r, cos r for |r| <= pi/4 (and a little more): Taylor series to r^17 and r^18
// (truncation < 2^-60)
FTM_INL double sin_poly(double r) {
  const double z = r * r;
  return r + r * z * horner(z, 0x1.952c77030ad4ap-49, -0x1.ae7f3e733b81fp-41,
      0x1.6124613a86d09p-33, -0x1.ae64567f544e4p-26, 0x1.71de3a556c734p-19,
      -0x1.a01a01a01a01ap-13, 0x1.1111111111111p-7, -0x1.5555555555555p-3);
}
FTM_INL double cos_poly(double r) {
  const double z = r * r;
  return 1.0 - (0.5 * z - z * z * horner(z, -0x1.6827863b97d97p-53, 0x1.ae7f3e733b81fp-45,
      -0x1.93974a8c07c9dp-37, 0x1.1eed8eff8d898p-29, -0x1.27e4fb7789f5cp-22,
      0x1.a01a01a01a01ap-16, -0x1.6c16c16c16c17p-10, 0x1.5555555555555p-5));
}

// a = |x| of a float (as a double), reduced to r = a - k pi/2, |r| <= pi/4, q = k mod 4.
// Payne-Hanek in double arithmetic: a 2/pi mod 4 from five 24-bit chunks of 2/pi, starting
// at the first whose product with a is not a multiple of 4; each product is exact (24 x 24
// bits), the two leading ones are reduced mod 4 exactly, the rest summed with the rounding
// error kept (absolute error < 2^-70 in units of pi/2: the float worst cases need 2^-60).
FTM_INL double reduce_float_arg(double a, u64 &q) {
  constexpr double C[9] = {0x1.45f3060000000p-1, 0x1.b939100000000p-26, 0x1.529fc00000000p-52,
      0x1.3abe880000000p-75, 0x1.ea69ba0000000p-97, 0x1.81b6c40000000p-121,
      0x1.2b32780000000p-145, 0x1.0e41040000000p-170, 0x1.fca2c60000000p-193};
  const u64 m1 = ~lt(a, 0x1p49), m2 = ~lt(a, 0x1p73), m3 = ~lt(a, 0x1p97), m4 = ~lt(a, 0x1p121);
  double p[5];
  for (int i = 0; i < 5; i++)
    p[i] = a * sel(m4, C[4 + i], sel(m3, C[3 + i], sel(m2, C[2 + i], sel(m1, C[1 + i], C[i]))));
  p[0] -= 4.0 * ((p[0] * 0.25 + MAGIC) - MAGIC);
  p[1] -= 4.0 * ((p[1] * 0.25 + MAGIC) - MAGIC);
  const double s = p[0] + p[1];                       // exact
  const double kt = (s + p[2]) + MAGIC;
  const double k = kt - MAGIC;
  q = bits(kt) & 3;
  const double d = s - k;                             // exact
  const double fh = d + p[2];
  const double bb = fh - d;
  const double fl = ((d - (fh - bb)) + (p[2] - bb)) + (p[3] + p[4]);
  return fh * 0x1.921fb54442d18p+0 + (fh * 0x1.1a62633145c07p-54 + fl * 0x1.921fb54442d18p+0);
}

// sin r, cos r for the float functions: the Taylor series to r^9 and r^10 (truncation
// < 2^-28 relative for |r| <= pi/4 and a little more)
FTM_INL double sin_poly_f(double r) {
  const double z = r * r;
  return r + r * z * horner(z, 0x1.71de3a556c734p-19, -0x1.a01a01a01a01ap-13,
                            0x1.1111111111111p-7, -0x1.5555555555555p-3);
}
FTM_INL double cos_poly_f(double r) {
  const double z = r * r;
  return 1.0 - (0.5 * z - z * z * horner(z, -0x1.27e4fb7789f5cp-22, 0x1.a01a01a01a01ap-16,
                                         -0x1.6c16c16c16c17p-10, 0x1.5555555555555p-5));
}

// sin, cos, tan of a float x from the reduced r and quadrant q (sin and tan odd, cos even)
FTM_INL double sin_q(double x, double r, u64 q) {
  const double s = sin_poly_f(r), c = cos_poly_f(r);
  const double v = sel(-(q & 1), c, s);
  return dbl((bits(v) ^ ((q >> 1) << 63)) ^ (bits(x) & SIGN));
}
FTM_INL double cos_q(double r, u64 q) {
  const double s = sin_poly_f(r), c = cos_poly_f(r);
  const double v = sel(-(q & 1), s, c);
  return dbl(bits(v) ^ ((((q + 1) >> 1) & 1) << 63));
}
FTM_INL double tan_q(double x, double r, u64 q) {
  const double s = sin_poly_f(r), c = cos_poly_f(r);
  const u64 odd = -(q & 1);
  return dbl(bits(sel(odd, -c, s) / sel(odd, s, c)) ^ (bits(x) & SIGN));
}

// 2/pi in 24-bit digits: 2/pi = sum U[j + 2] 2^(-24 (j + 1)); two zero digits in front
constexpr double TWO_OVER_PI_24[52] = {
    0.0, 0.0, 10680707.0, 7228996.0, 1387004.0, 2578385.0,
    16069853.0, 12639074.0, 9804092.0, 4427841.0, 16666979.0, 11263675.0,
    12935607.0, 2387514.0, 4345298.0, 14681673.0, 3074569.0, 13734428.0,
    16653803.0, 1880361.0, 10960616.0, 8533493.0, 3062596.0, 8710556.0,
    7349940.0, 6258241.0, 3772886.0, 3769171.0, 3798172.0, 8675211.0,
    12450088.0, 3874808.0, 9961438.0, 366607.0, 15675153.0, 9132554.0,
    7151469.0, 3571407.0, 2607881.0, 12013382.0, 4155038.0, 6285869.0,
    7677882.0, 13102053.0, 15825725.0, 473591.0, 9065106.0, 15363067.0,
    6271263.0, 9264392.0, 5636912.0, 4652155.0,
};

// a = |x| of a double, reduced to r = rh + rl = a - k pi/2 (|r| <= pi/4 + a little),
// q = k mod 4: Payne-Hanek with exact double arithmetic. a = b 2^(E-23), b in [2^23, 2^24)
// split into integers A1 + A2 2^-24 + A3 2^-48; with j0 the first digit of 2/pi whose
// product with a is not a multiple of 4, level l sums the exact products A_p U[j0 + l - p]
// (< 2^51), carries normalize the levels to 24-bit digits, the top level is reduced mod 4
// exactly and the rest is summed with its rounding errors kept; eight levels leave an
// error below 2^-140 (in units of pi/2; the worst double lies 2^-61 from a multiple).
// Valid for normal a; the digits are read by index (a gather).
FTM_INL double reduce_double_arg(double a, u64 &q, double &rl) {
  const u64 eb = bits(a) >> 52;                                    // biased exponent
  const double ed = (dbl(bits(MAGIC) + eb) - MAGIC) - 1023.0;
  double j0 = ((ed - 36.5) * (1.0 / 24.0) + MAGIC) - MAGIC;        // floor((E - 25) / 24)
  j0 = sel(neg(j0), 0.0, j0);
  const u64 j0u = bits(j0 + MAGIC) - bits(MAGIC);
  const int idx = (int)j0;
  const double b = dbl((bits(a) & 0xfffffffffffffULL) | ((1023ULL + 23) << 52));
  const double A1 = (b + MAGIC) - MAGIC;
  const double r1 = (b - A1) * 0x1p24;
  const double A2 = (r1 + MAGIC) - MAGIC;
  const double A3 = (r1 - A2) * 0x1p24;
  double U[10];
  for (int m = 0; m < 10; m++) U[m] = TWO_OVER_PI_24[idx + m];     // U[m] = digit j0 + m - 2
  double S[8];
  for (int l = 0; l < 8; l++) S[l] = A1 * U[l + 2] + A2 * U[l + 1] + A3 * U[l];
  double c = 0.0, D[8];
  for (int l = 7; l >= 1; l--) {
    const double t = S[l] + c;
    c = (t * 0x1p-24 + MAGIC) - MAGIC;
    D[l] = t - c * 0x1p24;
  }
  const double w0 = dbl((eb - 24 * j0u - 47) << 52);               // 2^(E - 24 j0 - 47)
  double v = (S[0] + c) * w0;
  v -= 4.0 * ((v * 0.25 + MAGIC) - MAGIC);
  const double kt = (v + D[1] * (w0 * 0x1p-24)) + MAGIC;
  const double k = kt - MAGIC;
  q = bits(kt) & 3;
  double h = v - k, l = 0.0, w = w0;
  for (int i = 1; i < 8; i++) {
    w *= 0x1p-24;
    const double t = D[i] * w;
    const double sum = h + t, bb = sum - h;
    l += (h - (sum - bb)) + (t - bb);
    h = sum;
  }
  const double fh = h + l, fl = l - (fh - h);
  double pe;
  const double rh = two_prod(fh, 0x1.921fb54442d18p+0, pe);
  const double rlo = pe + (fh * 0x1.1a62633145c07p-54 + fl * 0x1.921fb54442d18p+0);
  const double r = rh + rlo;
  rl = rlo - (r - rh);
  return r;
}

// sin and cos of the reduced argument of a double, its low part rl entered to first order
FTM_INL void sincos_reduced(double a, double &s, double &c, u64 &q) {
  double rl;
  const double r = reduce_double_arg(a, q, rl);
  const double s0 = sin_poly(r), c0 = cos_poly(r);
  s = s0 + rl * c0;
  c = c0 - rl * s0;
}
// the answer for tiny |x| (< 2^-27: x for sin and tan, 1 for cos), NaN for inf and NaN
FTM_INL double trig_ends(double x, double tiny, double res) {
  const double a = absd(x);
  return sel(lt(a, 0x1p-27), tiny, sel(isnan(x) | eq(a, INF), NaN, res));
}
FTM_INL double sin_d(double x) {
  double s, c;
  u64 q;
  sincos_reduced(absd(x), s, c, q);
  const double v = sel(-(q & 1), c, s);
  return trig_ends(x, x, dbl((bits(v) ^ ((q >> 1) << 63)) ^ (bits(x) & SIGN)));
}
FTM_INL double cos_d(double x) {
  double s, c;
  u64 q;
  sincos_reduced(absd(x), s, c, q);
  const double v = sel(-(q & 1), s, c);
  return trig_ends(x, 1.0, dbl(bits(v) ^ ((((q + 1) >> 1) & 1) << 63)));
}
FTM_INL double tan_d(double x) {
  double s, c;
  u64 q;
  sincos_reduced(absd(x), s, c, q);
  const u64 odd = -(q & 1);
  return trig_ends(x, x, dbl(bits(sel(odd, -c, s) / sel(odd, s, c)) ^ (bits(x) & SIGN)));
}

// ---- float arithmetic (16 lanes with AVX-512): the float functions below evaluate in
// float with polynomials sized for float; the masks are 32-bit, as for double above ----
typedef unsigned u32;
FTM_INL u32 fbits(float x) { return __builtin_bit_cast(u32, x); }
FTM_INL float flt(u32 b) { return __builtin_bit_cast(float, b); }
constexpr u32 SIGNF = 0x80000000u;
constexpr float INFF = __builtin_inff();
constexpr float NANF = __builtin_nanf("");
constexpr float MAGICF = 0x1.8p23f;         // v + MAGICF - MAGICF rounds v to an integer (|v| < 2^22)
FTM_INL u32 topf(u32 v) { return -(v >> 31); }
FTM_INL u32 nonzerof(u32 v) { return topf(v | -v); }
FTM_INL u32 negf(float x) { return topf(fbits(x)); }
FTM_INL u32 ltf(float a, float b) { return topf(fbits(a) - fbits(b)); }   // as lt
FTM_INL u32 eqf(float a, float b) { return ~nonzerof(fbits(a) ^ fbits(b)); }
FTM_INL float absf(float x) { return flt(fbits(x) & ~SIGNF); }
FTM_INL float copysignf(float m, float s) { return flt((fbits(m) & ~SIGNF) | (fbits(s) & SIGNF)); }
FTM_INL u32 isnanf(float x) { return ltf(INFF, absf(x)); }
FTM_INL u32 iszerof(float x) { return ~nonzerof(fbits(x) << 1); }
FTM_INL float self(u32 m, float a, float b) { return flt((fbits(a) & m) | (fbits(b) & ~m)); }
FTM_INL float mincf(float a, float c) { return self(ltf(c, a) & ~isnanf(a), c, a); }
FTM_INL u32 minu(u32 a, u32 b) { return a < b ? a : b; }   // of the bits of floats >= 0
FTM_INL float clampf(float x, float lo, float hi) {
  const u32 num = ~isnanf(x);
  x = self(~negf(x) & ltf(hi, x) & num, hi, x);
  return self(negf(x) & ltf(-lo, absf(x)) & num, lo, x);
}
// 2^k for an integer k in [-126, 127] (two's complement in a u32)
FTM_INL float pow2f(u32 k) { return flt((k + 127u) << 23); }
// The float polynomials' steps c0 x + c1 are fused multiply-adds where the CPU has them
// (one rounding instead of two: the accuracy bounds hold either way; the user's own
// operations are never contracted)
#ifdef __FMA__
#define FTM_MADDF(a, b, c) __builtin_fmaf(a, b, c)
#else
#define FTM_MADDF(a, b, c) ((a) * (b) + (c))
#endif
FTM_INL float hornerf(float, float c) { return c; }
template <typename... C> FTM_INL float hornerf(float x, float c0, float c1, C... cs) {
  return hornerf(x, FTM_MADDF(c0, x, c1), cs...);
}

// k = x / ln 2 rounded to an integer, as a float; and as a two's complement integer in ki
// (the bits of the rounded MAGICF + k hold it)
FTM_INL float exp_k_f(float x, u32 &ki) {
  const float kb = FTM_MADDF(x, 0x1.715476p+0f, MAGICF);
  ki = fbits(kb) - fbits(MAGICF);
  return kb - MAGICF;
}
// x = k ln 2 + r, |r| <= 0.35: ln 2 = C1 + C2 with C1 of 9 bits, so that k C1 and x - k C1
// are exact; returns r, and k in ki (exp_k_f)
FTM_INL float exp_reduce_f(float x, u32 &ki) {
  const float k = exp_k_f(x, ki);
  return FTM_MADDF(k, 0x1.bd0106p-13f, FTM_MADDF(k, -0x1.63p-1f, x));
}
// expm1(r) - r - r^2/2 over r^2 ... : (expm1(r) - r) / r^2 by its Taylor series to r^6
// (expm1's truncation < 2^-31 relative for |r| <= 0.35)
FTM_INL float expm1_tail_f(float r) {
  return hornerf(r, 0x1.a01a02p-16f, 0x1.a01a02p-13f, 0x1.6c16c2p-10f, 0x1.111112p-7f,
                 0x1.555556p-5f, 0x1.555556p-3f, 0x1.0p-1f);
}

// e^r = 1 + r + r^2 Q(r) for |r| <= 0.35, Q a degree-4 fit (its error in e^r < 0.07 ulp):
// enough where e^r is not cancelled against 1 (exp, tanh; expm1 keeps the longer series)
FTM_INL float exp_tail_f(float r) {
  return hornerf(r, 0x1.6a2438p-10f, 0x1.1239ep-7f, 0x1.5558f2p-5f, 0x1.555492p-3f,
                 0x1.fffffcp-2f);
}

// exp: 2^k e^r, 2^k applied in two steps (k1 = floor(k / 2) and k - k1, from the bits of
// the rounded k) so that a subnormal result rounds once; x clamped to [-104, 89] on the
// bits of |x| (a min by sign), so that the overflow end follows; NaN selected back at the
// end. Below -104 (-inf: masked attention scores, softmax of -inf) the answer 0 is
// selected, computed from x = 0: the product that would round to 0 underflows, and an
// underflowing multiply costs a microcode assist per lane on x86 (about 100 cycles: a
// masked softmax ran 3x slower). About 50 instructions per 16 floats.
FTM_INL float exp_f(float x) {
  const u32 zero = negf(x) & ltf(104.0f, absf(x));
  const float xs = self(zero, 0.0f, x);
  const u32 cap = fbits(89.0f) ^ (negf(xs) & (fbits(89.0f) ^ fbits(104.0f)));
  u32 ki;
  const float r = exp_reduce_f(flt(minu(fbits(xs) & ~SIGNF, cap) | (fbits(xs) & SIGNF)), ki);
  const u32 k1 = (u32)((int)ki >> 1);
  const float s1 = pow2f(k1);
  const float p = FTM_MADDF(FTM_MADDF(r * r, exp_tail_f(r), r), s1, s1);
  return self(isnanf(x), x, self(zero, 0.0f, p * pow2f(ki - k1)));
}

// expm1 of x in [-20, 89] (or NaN) = 2 (t em + (t - 1/2)), t = 2^(k-1), em = expm1(r) (no
// cancellation for k = 0: em itself)
FTM_INL float expm1_core_f(float x) {
  u32 ki;
  const float r = exp_reduce_f(x, ki);
  const float em = r + r * r * expm1_tail_f(r);
  const float t = pow2f(ki - 1u);
  return (t * em + (t - 0.5f)) * 2.0f;
}
// expm1: the core on x clamped; |x| < 2^-25 (subnormals, -0) is its own answer
FTM_INL float expm1_f(float x) {
  return self(ltf(absf(x), 0x1p-25f), x, expm1_core_f(clampf(x, -20.0f, 89.0f)));
}

// tanh |x|: below 0.5625 a + a^3 P(a^2), P a degree-5 Chebyshev fit (relative error of
// the sum < 2^-27); above 1 - 2 / (e + 1), e = e^(2|x|) = 2^k (1 + r + r^2 Q(r)), |x|
// clamped to 9.5 (the quotient is then below half an ulp of 1: tanh rounds to 1 from
// 9.01 on; the clamp is on the bits, NaN's included, which take the first arm). At most
// 1.42 ulp from the exact value. Written for few instructions (fused steps, 2^k from the
// bits of the rounded k, a min on the bits): about 40 per vector of 16 floats. r is 2|x|
// - k ln2 in one step, ln2 rounded to float: its error k 2^-28.5 weighs on tanh through
// 2 / (e + 1) < 2^(1-k) only; the arm is chosen by one comparison that NaN fails (the
// 30-op chain's kernel, 3 tanh an element: 661 -> 614 instructions a loop, 5% faster)
FTM_INL float tanh_f(float x) {
  const float a = absf(x);
  const float z = a * a;
  const float small = FTM_MADDF(a * z, hornerf(z, 0x1.460e8p-9f, -0x1.1680dcp-7f,
                                               0x1.655dcp-6f, -0x1.ba12d8p-5f,
                                               0x1.111102p-3f, -0x1.555556p-2f), a);
  u32 ki;
  const float u = 2.0f * flt(minu(fbits(a), fbits(9.5f)));
  const float r = FTM_MADDF(exp_k_f(u, ki), -0x1.62e43p-1f, u);
  const float s = pow2f(ki);
  const float e = FTM_MADDF(FTM_MADDF(r * r, exp_tail_f(r), r), s, s);
  return copysignf(!(a >= 0.5625f) ? small : 1.0f - 2.0f / (e + 1.0f), x);
}

// erf |x|: below 1 a + a P(a^2), P(z) = erf(a) / a - 1 = (2/sqrt(pi) - 1) + z Q(z), Q a
// degree-6 Chebyshev fit (error < 2^-32), all in float: the correction a P is at most 0.19
// of the result, so its roundings weigh a fifth of an ulp there (in double, as first
// written, the loop ran at half the vector width and 1.4x the time); on [1, 3.92)
// 1 - exp(-a^2) g(t), t = (a - 2.46) / 1.46, g a degree-11 fit of erfc(a) exp(a^2) (its
// error times exp(-a^2) < 2^-28); 1 above (erfc(3.92) < 2^-25); NaN through the first arm.
// exp(-a^2) is exp_f(-(x * x)), unclamped (the other arms do not read it): the very
// expression of a loop that also computes exp(-x * x), which the compiler then computes
// once for both (exact GELU's forward and its saved derivative, 512K floats: 0.93 -> 0.68 ms)
FTM_INL float erf_f(float x) {
  const float a = absf(x);
  const float z = a * a;
  const float p = FTM_MADDF(z, hornerf(z, -0x1.56d132p-17f, 0x1.e05216p-14f, -0x1.be17c2p-11f,
      0x1.5644ep-8f, -0x1.b82bf2p-6f, 0x1.ce2f1ep-4f, -0x1.812746p-2f), 0x1.06eba8p-3f);
  const float small = FTM_MADDF(a, p, a);
  const float ac = mincf(self(ltf(a, 1.0f), 1.0f, a), 3.92f);
  const float g = hornerf((ac - 2.46f) * 0x1.5eaf58p-1f, -0x1.ec1474p-16f, 0x1.52887cp-14f,
      -0x1.0f255ap-13f, 0x1.596f5p-12f, -0x1.df6ca6p-11f, 0x1.24139cp-9f, -0x1.55bd16p-8f,
      0x1.85cb24p-7f, -0x1.acbc3ep-6f, 0x1.c4a928p-5f, -0x1.c8c5fp-4f, 0x1.b5e79cp-3f);
  const float big = 1.0f - exp_f(-(x * x)) * g;
  return copysignf(self(ltf(a, 1.0f) | isnanf(a), small, self(ltf(a, 3.92f), big, 1.0f)), x);
}

// rint, floor, ceil, round of a float as their double versions above, in float (exact
// either way; through double the loop spent 4 conversions a vector on each: the 30-op chain's
// abs made its loop 2.3x slower)
FTM_INL float rint_f(float x) {
  const float a = absf(x);
  const float r = (a + 0x1p23f) - 0x1p23f;
  return copysignf(self(ltf(a, 0x1p23f), r, a), x);
}
FTM_INL float floor_f(float x) {
  const float r = rint_f(x), d = r - x;
  return copysignf(self(~negf(d) & ~iszerof(d), r - 1.0f, r), x);
}
FTM_INL float ceil_f(float x) {
  const float r = rint_f(x), d = r - x;
  return copysignf(self(negf(d) & ~iszerof(d), r + 1.0f, r), x);
}
FTM_INL float round_f(float x) {
  const float a = absf(x);
  const float r = rint_f(a);
  return copysignf(self(eqf(a - r, 0.5f), r + 1.0f, r), x);
}

// log(u) + corr for a positive normal u: u = 2^e m, m in [sqrt(1/2), sqrt 2), f = m - 1,
// s = f / (2 + f), log(1 + f) = f - s (f - R), R = sum 2 s^2n / (2n+1) to n = 4
// (truncation < 2^-30 relative); e ln 2 in two parts, the first of 13 bits (e ln2_hi exact)
FTM_INL float log_core_f(float u, float e_add, float corr) {
  const u32 iu = fbits(u);
  const u32 ef = (iu + (0x800000u - 0x3504f3u)) >> 23;
  const float m = flt(iu - (ef << 23) + (127u << 23));
  const float e = (flt(fbits(MAGICF) + ef) - MAGICF) - 127.0f + e_add;
  const float f = m - 1.0f;
  const float s = f / (2.0f + f);
  const float z = s * s;
  const float R = z * hornerf(z, 0x1.c71c72p-3f, 0x1.24924ap-2f, 0x1.99999ap-2f, 0x1.555556p-1f);
  return e * 0x1.62ep-1f + ((e * 0x1.0bfbe8p-15f + corr) + (f - s * (f - R)));
}
FTM_INL float log_f(float x) {
  const u32 sub = ltf(absf(x), 0x1p-126f);    // subnormals scaled into the normal range
  float r = log_core_f(self(sub, x * 0x1p23f, x), self(sub, -23.0f, 0.0f), 0.0f);
  r = self(eqf(x, INFF), x, r);
  r = self(negf(x) | isnanf(x), NANF, r);
  return self(iszerof(x), -INFF, r);
}
// log1p(x) = log(u) + err/u with u = 1 + x rounded and err its exact rounding error
FTM_INL float log1p_f(float x) {
  const float u = 1.0f + x;
  const float b = u - 1.0f;
  const float err = (1.0f - (u - b)) + (x - b);
  float r = log_core_f(u, 0.0f, err / u);
  r = self(eqf(x, INFF), x, r);
  r = self(eqf(x, -1.0f), -INFF, r);
  r = self(isnanf(x) | (negf(x) & ltf(1.0f, absf(x))), NANF, r);
  return self(ltf(absf(x), 0x1p-25f), x, r);
}
}  // namespace detail

// ---- double ----
#define FTM_D1(NAME) FTM_INL double NAME(double x) { return detail::NAME(x); }
FTM_D1(exp) FTM_D1(expm1) FTM_D1(log) FTM_D1(log1p) FTM_D1(tanh) FTM_D1(sinh) FTM_D1(cosh)
FTM_D1(erf) FTM_D1(rint) FTM_D1(floor) FTM_D1(ceil) FTM_D1(round) FTM_D1(atan) FTM_D1(asin)
FTM_D1(acos) FTM_D1(asinh) FTM_D1(acosh) FTM_D1(atanh)
#undef FTM_D1
FTM_INL double fabs(double x) { return detail::absd(x); }
FTM_INL double sqrt(double x) { return __builtin_sqrt(x); }            // one instruction
FTM_INL double rsqrt(double x) { return 1.0 / __builtin_sqrt(x); }     // NumPy: 1 / sqrt(x)
FTM_INL bool isfinite(double x) { return x - x == x - x; }              // false for inf, nan
FTM_INL double atan2(double y, double x) { return detail::atan2(y, x); }
// double sin/cos/tan: ftm's where the loop vectorizes (its reduction reads 2/pi's digits by
// index: a gather, which GCC vectorizes with AVX-512), else the C library's, faster as
// scalar code. -DFTM_VECTOR_TRIG_DOUBLE=0/1 overrides (the tests force 1: same values).
#ifndef FTM_VECTOR_TRIG_DOUBLE
#ifdef __AVX512F__
#define FTM_VECTOR_TRIG_DOUBLE 1
#else
#define FTM_VECTOR_TRIG_DOUBLE 0
#endif
#endif
#if FTM_VECTOR_TRIG_DOUBLE
FTM_INL double sin(double x) { return detail::sin_d(x); }
FTM_INL double cos(double x) { return detail::cos_d(x); }
FTM_INL double tan(double x) { return detail::tan_d(x); }
#else
FTM_INL double sin(double x) { return __builtin_sin(x); }
FTM_INL double cos(double x) { return __builtin_cos(x); }
FTM_INL double tan(double x) { return __builtin_tan(x); }
#endif
// libm (scalar)
FTM_INL double pow(double x, double y) { return detail::pow(x, y); }
// the C library's reentrant lgamma: lgamma itself writes the global `signgam`, a race
// between the threads of a parallel loop
FTM_INL double lgamma(double x) { int sign; return ::lgamma_r(x, &sign); }
FTM_INL double erfc(double x) { return __builtin_erfc(x); }
FTM_INL double fmod(double x, double y) { return __builtin_fmod(x, y); }

// ---- float: the float-arithmetic functions above, else the double function rounded once ----
#define FTM_F1(NAME) FTM_INL float NAME(float x) { return (float)NAME((double)x); }
FTM_F1(sinh) FTM_F1(cosh)
FTM_F1(asin) FTM_F1(acos) FTM_F1(atan) FTM_F1(asinh)
FTM_F1(acosh) FTM_F1(atanh) FTM_F1(lgamma) FTM_F1(erfc)
#undef FTM_F1
FTM_INL float rint(float x) { return detail::rint_f(x); }
FTM_INL float floor(float x) { return detail::floor_f(x); }
FTM_INL float ceil(float x) { return detail::ceil_f(x); }
FTM_INL float round(float x) { return detail::round_f(x); }
FTM_INL float fabs(float x) { return detail::absf(x); }
// float tanh and erf from tables, where GCC compiles for AVX-512 (FTM_TABLES; tanh_f and
// erf_f elsewhere). |x| clamped (tanh rounds to 1 from 9.01 on, erf from 3.92: clamped to
// 9.5 and 3.95; a NaN is kept), then on intervals [0, 2^-4) and the quarter binades above it
// (the interval is bits(|x|) >> 21, from the exponent's low bits to the mantissa's top
// two: 30 for tanh, 25 for erf), c0 + t (c1 + t (c2 + t (c3 + t (c4 + t c5)))) + e t,
// t = |x| - b. The fits: b near the interval's middle where f(b) lies within 0.003 ulp of a
// float, which is c0; c1..c5 a relative-error minimax fit (Lawson's iterations in double),
// rounded to float one at a time, the rest refitted each time; on the first interval the
// odd series about 0, for erf as t + t (c1 + ...) (e = 1, c1 = 2/sqrt(pi) - 1: a rounded
// 2/sqrt(pi) put tiny results 2 ulp off). Fit errors < 0.23 ulp (tanh) and 0.44 (erf);
// every float32 is within 1 ulp of the correctly rounded value (tests/test_native_math.py,
// exhaustive: 0.6% of them at 1 ulp for tanh, 2.9% for erf). A vector of 16 takes 6
// permutes of two table rows (vpermt2ps) and 5 fused multiply-adds (erf: 2 more for e t),
// about 20 instructions against tanh_f's 40 and erf_f's 55. GCC's vectorizer turns a table
// read into a gather (the 30-op chain's kernel ran at 9-12 ns an element so, 2.2 with
// tanh_f), so the vector code is written in GCC's vector extensions, and the vectorized
// loops call it as the clones of a declared function (`ftm_tanhf`, `ftm_erff`) whose
// clones (the vector ABI's names) and scalar symbol this file defines: one table and one
// sequence of operations, the same bits on every path; the loops split at these calls run
// it inline (NAME_block: kernels.staged_parts).
#if !defined(FTM_TABLES)
#if defined(__GNUC__) && !defined(__clang__) && defined(__AVX512F__) && defined(__FMA__)
#define FTM_TABLES 1
#else
#define FTM_TABLES 0
#endif
#endif
#if FTM_TABLES
namespace detail {
constexpr int TABLE_SHIFT = 21, TABLE_FIRST = 491;  // interval (bits(|x|) >> 21) - 491, >= 0
alignas(64) constexpr float TANH_TABLE[8][32] = {
  {  // b
    0.0f, 0x1.1fe48ep-4f, 0x1.601758p-4f, 0x1.a0134p-4f, 0x1.dff142p-4f, 0x1.20147ap-3f,
    0x1.601688p-3f, 0x1.a003bp-3f, 0x1.dfdep-3f, 0x1.1fa44p-2f, 0x1.600068p-2f,
    0x1.a0346ep-2f, 0x1.e0460ap-2f, 0x1.1fe21ap-1f, 0x1.5ffa44p-1f, 0x1.a03334p-1f,
    0x1.e013aap-1f, 0x1.2057a8p+0f, 0x1.5fbeep+0f, 0x1.9fc77ap+0f, 0x1.dfd2f2p+0f,
    0x1.1f4dd2p+1f, 0x1.600d84p+1f, 0x1.a003bp+1f, 0x1.e003bp+1f, 0x1.201aap+2f,
    0x1.60233ap+2f, 0x1.9fef34p+2f, 0x1.e0d35ap+2f, 0x1.154e56p+3f, 0.0f, 0.0f},
  {  // c0
    0.0f, 0x1.1f6b6ep-4f, 0x1.5f39fep-4f, 0x1.9ea664p-4f, 0x1.ddc208p-4f, 0x1.1e31e4p-3f,
    0x1.5ca8e8p-3f, 0x1.9a62a6p-3f, 0x1.d7462ap-3f, 0x1.184ebcp-2f, 0x1.52c322p-2f,
    0x1.8ab486p-2f, 0x1.bfe71p-2f, 0x1.04f24ep-1f, 0x1.31542ep-1f, 0x1.57a524p-1f,
    0x1.77e14ap-1f, 0x1.9e9922p-1f, 0x1.c25b32p-1f, 0x1.d9b6b8p-1f, 0x1.e87086p-1f,
    0x1.f4a0b2p-1f, 0x1.fbd5eap-1f, 0x1.fe769p-1f, 0x1.ff6f2p-1f, 0x1.ffdfc2p-1f,
    0x1.fffba4p-1f, 0x1.ffff68p-1f, 0x1.ffffecp-1f, 0x1.fffffep-1f, 0.0f, 0.0f},
  {  // c1
    0x1p+0f, 0x1.fd7a9cp-1f, 0x1.fc3c4p-1f, 0x1.fac0c2p-1f, 0x1.f908c6p-1f, 0x1.f60064p-1f,
    0x1.f12922p-1f, 0x1.eb70fep-1f, 0x1.e4e366p-1f, 0x1.d9a276p-1f, 0x1.c7f704p-1f,
    0x1.b3edfap-1f, 0x1.9e0ae8p-1f, 0x1.7b0176p-1f, 0x1.49eb28p-1f, 0x1.195a08p-1f,
    0x1.d81a32p-2f, 0x1.608c5ap-2f, 0x1.cf7688p-3f, 0x1.26d694p-3f, 0x1.704b3ep-4f,
    0x1.67df16p-5f, 0x1.09700cp-6f, 0x1.88d8ep-8f, 0x1.21970cp-9f, 0x1.01ea14p-11f,
    0x1.17018p-14f, 0x1.30018ep-17f, 0x1.401814p-20f, 0x1.fe7e9cp-24f, 0.0f, 0.0f},
  {  // c2
    0.0f, -0x1.1e03b6p-4f, -0x1.5ca588p-4f, -0x1.9a69cp-4f, -0x1.d745cep-4f,
    -0x1.189ba8p-3f, -0x1.528dbep-3f, -0x1.89e82ep-3f, -0x1.be51eap-3f, -0x1.034dd2p-2f,
    -0x1.2dafdap-2f, -0x1.500fcap-2f, -0x1.6a3582p-2f, -0x1.825414p-2f, -0x1.897da4p-2f,
    -0x1.79ad3p-2f, -0x1.5a96d8p-2f, -0x1.1d7b6ep-2f, -0x1.97aa4ep-3f, -0x1.10caa8p-3f,
    -0x1.5f58c6p-4f, -0x1.5fde4cp-5f, -0x1.074386p-6f, -0x1.87a40cp-8f, -0x1.213fe2p-9f,
    -0x1.018758p-11f, -0x1.16a766p-14f, -0x1.2f9b7cp-17f, -0x1.41154p-20f,
    -0x1.eff576p-24f, 0.0f, 0.0f},
  {  // c3
    -0x1.55553ep-2f, -0x1.4ed17p-2f, -0x1.4b9f8ap-2f, -0x1.46166ep-2f, -0x1.41c9b2p-2f,
    -0x1.3b1a86p-2f, -0x1.2e3992p-2f, -0x1.1fb30ap-2f, -0x1.0fedc6p-2f, -0x1.e9a41ap-3f,
    -0x1.982df8p-3f, -0x1.4208fep-3f, -0x1.d6176p-4f, -0x1.be2908p-5f, 0x1.d61e2p-7f,
    0x1.07a0dp-4f, 0x1.845b1ep-4f, 0x1.c6a236p-4f, 0x1.982fbap-4f, 0x1.343938p-4f,
    0x1.a8d5cap-5f, 0x1.c03d2ap-6f, 0x1.594c3ep-7f, 0x1.038654p-8f, 0x1.80cf26p-10f,
    0x1.571f9cp-12f, 0x1.736622p-15f, 0x1.94d38ep-18f, 0x1.a9f514p-21f, 0x1.520594p-24f,
    0.0f, 0.0f},
  {  // c4
    0.0f, 0x1.62ff1p-4f, 0x1.155efcp-4f, 0x1.f78d9ap-4f, 0x1.1dae5ep-3f, 0x1.7bfbc4p-4f,
    0x1.a7620ep-4f, 0x1.eefe72p-4f, 0x1.1655fap-3f, 0x1.33f01ep-3f, 0x1.5036c6p-3f,
    0x1.5bb46cp-3f, 0x1.59747ap-3f, 0x1.39d61p-3f, 0x1.e96126p-4f, 0x1.47003p-4f,
    0x1.61f3fcp-5f, 0x1.c4826cp-9f, -0x1.5935b8p-6f, -0x1.9bd8dep-6f, -0x1.55d26p-6f,
    -0x1.996558p-7f, -0x1.5113aep-8f, -0x1.0330cp-9f, -0x1.8370e6p-11f, -0x1.676d16p-13f,
    -0x1.856156p-16f, -0x1.a8b5aep-19f, -0x1.a967b4p-22f, -0x1.a59344p-25f, 0.0f, 0.0f},
  {  // c5
    0x1.107772p-3f, 0x1.1df15cp+1f, 0x1.a8a948p+1f, -0x1.df3b9ap+3f, -0x1.959ee4p+3f,
    0x1.e5d5cap-3f, -0x1.266d68p+0f, -0x1.5a9f4ep+0f, 0x1.1e01a6p-3f, 0x1.741738p-4f,
    -0x1.fb8768p-6f, -0x1.7d3fbap-5f, -0x1.190572p-4f, -0x1.6a8256p-5f, -0x1.da3934p-5f,
    -0x1.eb14cp-5f, -0x1.c1e874p-5f, -0x1.06db9cp-5f, -0x1.37e198p-7f, 0x1.748d58p-10f,
    0x1.2b155p-8f, 0x1.04a13p-8f, 0x1.f66436p-10f, 0x1.94649cp-11f, 0x1.333a94p-12f,
    0x1.1fb02ap-14f, 0x1.38a57ap-17f, 0x1.52ce7ap-20f, 0x1.7154ecp-23f, 0x1.3f893ap-26f,
    0.0f, 0.0f},
  {},  // e
};
alignas(64) constexpr float ERF_TABLE[8][32] = {
  {  // b
    0.0f, 0x1.204b5ep-4f, 0x1.5fd8aep-4f, 0x1.9fd1b8p-4f, 0x1.dfdfa4p-4f, 0x1.1fe354p-3f,
    0x1.6056d6p-3f, 0x1.a0212ep-3f, 0x1.e0119cp-3f, 0x1.200832p-2f, 0x1.5ff3b6p-2f,
    0x1.9feab4p-2f, 0x1.df4816p-2f, 0x1.20268p-1f, 0x1.5ff27cp-1f, 0x1.9fe7d6p-1f,
    0x1.e00c4ap-1f, 0x1.20354p+0f, 0x1.5ffa44p+0f, 0x1.a014e4p+0f, 0x1.e0013ap+0f,
    0x1.20126ep+1f, 0x1.5ff9dcp+1f, 0x1.a00cb2p+1f, 0x1.df3296p+1f, 0.0f, 0.0f, 0.0f, 0.0f,
    0.0f, 0.0f, 0.0f},
  {  // c0
    0.0f, 0x1.44c4dep-4f, 0x1.8c0ab4p-4f, 0x1.d39848p-4f, 0x1.0d818ep-3f, 0x1.42b844p-3f,
    0x1.89af32p-3f, 0x1.cf2b5ap-3f, 0x1.09f83ep-2f, 0x1.3ca334p-2f, 0x1.7e0942p-2f,
    0x1.bcbb8cp-2f, 0x1.f7c906p-2f, 0x1.25d85p-1f, 0x1.5688c2p-1f, 0x1.7faba8p-1f,
    0x1.a15adcp-1f, 0x1.c6fcbp-1f, 0x1.e57498p-1f, 0x1.f4f9fp-1f, 0x1.fbe634p-1f,
    0x1.ff40cep-1f, 0x1.fff2ccp-1f, 0x1.ffff7p-1f, 0x1.fffffcp-1f, 0.0f, 0.0f, 0.0f, 0.0f,
    0.0f, 0.0f, 0.0f},
  {  // c1
    0x1.06eba8p-3f, 0x1.1f7006p+0f, 0x1.1ebdcep+0f, 0x1.1de74p+0f, 0x1.1ced62p+0f,
    0x1.1b368ep+0f, 0x1.1870c6p+0f, 0x1.152e96p+0f, 0x1.116bbep+0f, 0x1.0ae41cp+0f,
    0x1.00adeep+0f, 0x1.e9ddfp-1f, 0x1.d0122cp-1f, 0x1.a4e3bp-1f, 0x1.682d04p-1f,
    0x1.2aa4b4p-1f, 0x1.dfb49p-2f, 0x1.455128p-2f, 0x1.5cfb14p-3f, 0x1.4945e4p-4f,
    0x1.12c9c2p-5f, 0x1.d2e4fcp-8f, 0x1.33b4cep-11f, 0x1.e8968p-16f, 0x1.f0287p-21f, 0.0f,
    0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f},
  {  // c2
    0.0f, -0x1.43b072p-4f, -0x1.8a1c5cp-4f, -0x1.d064dp-4f, -0x1.0b0952p-3f,
    -0x1.3e7e5ep-3f, -0x1.81fa04p-3f, -0x1.c28f7ap-3f, -0x1.005eacp-2f, -0x1.2c4954p-2f,
    -0x1.60e29ap-2f, -0x1.8df00ap-2f, -0x1.b26a26p-2f, -0x1.d9bf4ep-2f, -0x1.ef2afp-2f,
    -0x1.e52f5ap-2f, -0x1.c1c4c8p-2f, -0x1.6e3f5ep-2f, -0x1.dfd2a8p-3f, -0x1.0b9706p-3f,
    -0x1.019e42p-4f, -0x1.069e04p-6f, -0x1.a6513p-10f, -0x1.8b02a4p-14f, -0x1.cfc48ap-19f,
    0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f},
  {  // c3
    -0x1.8126b6p-2f, -0x1.7e495cp-2f, -0x1.774c5ep-2f, -0x1.75f32p-2f, -0x1.6fdc26p-2f,
    -0x1.6a171ap-2f, -0x1.5eedb8p-2f, -0x1.53c92cp-2f, -0x1.43b4e4p-2f, -0x1.2b89f2p-2f,
    -0x1.0585dep-2f, -0x1.b5b418p-3f, -0x1.5b947cp-3f, -0x1.9b75fcp-4f, -0x1.a60224p-7f,
    0x1.fd6372p-5f, 0x1.e4e586p-4f, 0x1.4ce42cp-3f, 0x1.437abep-3f, 0x1.d6235ap-4f,
    0x1.143b3p-4f, 0x1.63455p-6f, 0x1.69cb34p-9f, 0x1.981c7ap-13f, 0x1.12f85p-17f, 0.0f,
    0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f},
  {  // c4
    0.0f, -0x1.c584b6p-8f, 0x1.c00dbcp-4f, 0x1.1c0a1p-4f, -0x1.5639d4p-5f, 0x1.579eb6p-4f,
    0x1.75815ep-4f, 0x1.ae5b7ep-4f, 0x1.01fa68p-3f, 0x1.1da52cp-3f, 0x1.42caa6p-3f,
    0x1.62db04p-3f, 0x1.714b6p-3f, 0x1.7514c4p-3f, 0x1.530984p-3f, 0x1.0f6204p-3f,
    0x1.744936p-4f, 0x1.cb9caap-6f, -0x1.eb96f8p-6f, -0x1.94c24ap-5f, -0x1.5973fap-5f,
    -0x1.3c35dcp-6f, -0x1.be5d62p-9f, -0x1.446e86p-12f, -0x1.039786p-16f, 0.0f, 0.0f, 0.0f,
    0.0f, 0.0f, 0.0f, 0.0f},
  {  // c5
    0x1.cb800ap-4f, 0x1.0682ecp+5f, -0x1.eaa194p+3f, 0x1.d32e1ap+2f, -0x1.1ff86ep+4f,
    -0x1.a588dap+0f, -0x1.4916a2p+1f, 0x1.2817a4p+1f, -0x1.23c0f8p+1f, 0x1.1a3ed8p-4f,
    0x1.40c4a4p-3f, 0x1.c1ccp-5f, -0x1.22b16ep-7f, -0x1.bd991p-8f, -0x1.63df16p-5f,
    -0x1.0c334p-4f, -0x1.16a506p-4f, -0x1.f5197cp-5f, -0x1.f67e52p-6f, -0x1.339698p-9f,
    0x1.72b046p-7f, 0x1.5a7daap-7f, 0x1.7351eep-9f, 0x1.5ed5eep-12f, 0x1.84ec28p-16f, 0.0f,
    0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f},
  {  // e: t e added last (erf's first interval: t + t (c1 + ...))
    1.0f},
};
// E: the table has an e row (erf)
template <bool E> FTM_INL float table_f(const float (*T)[32], float clamp, float x) {
  const float a0 = absf(x);
  const float a = a0 > clamp ? clamp : a0;
  const int k0 = (int)(fbits(a) >> TABLE_SHIFT) - TABLE_FIRST;
  const int k = (k0 > 0 ? k0 : 0) & 31;
  const float t = a - T[0][k];
  float p = __builtin_fmaf(T[6][k], t, T[5][k]);
  for (int c = 4; c >= 1; --c) p = __builtin_fmaf(p, t, T[c][k]);
  if (E) p = __builtin_fmaf(T[7][k], t, p);
  return flt(fbits(p) | (fbits(x) & SIGNF));
}
}  // namespace detail
#pragma GCC push_options
#pragma GCC optimize("fp-contract=fast")     // p * t + c: one fused multiply-add, as above
namespace detail {
typedef float v16f __attribute__((vector_size(64)));
typedef int v16i __attribute__((vector_size(64)));
typedef float v8f __attribute__((vector_size(32)));
typedef float v4f __attribute__((vector_size(16)));
FTM_INL v16f load16(const float* p) { v16f v; __builtin_memcpy(&v, p, 64); return v; }
template <bool E> FTM_INL v16f table_v(const float (*T)[32], float clamp, v16f x) {
  v16f a = (v16f)((v16i)x & 0x7fffffff);
  a = a > clamp ? v16f{} + clamp : a;
  v16i k = ((v16i)a >> TABLE_SHIFT) - TABLE_FIRST;
  k = k > 0 ? k : 0;
#define FTM_ROW(R) __builtin_shuffle(load16(T[R]), load16(T[R] + 16), k)
  const v16f t = a - FTM_ROW(0);
  v16f p = FTM_ROW(6) * t + FTM_ROW(5);
  p = p * t + FTM_ROW(4);
  p = p * t + FTM_ROW(3);
  p = p * t + FTM_ROW(2);
  p = p * t + FTM_ROW(1);
  if (E) p = FTM_ROW(7) * t + p;
#undef FTM_ROW
  return (v16f)((v16i)p | ((v16i)x & (int)SIGNF));
}
// the shorter vectors computed in 16 lanes
template <bool E, typename V> FTM_INL V table_part(const float (*T)[32], float clamp, V x) {
  v16f w{};
  __builtin_memcpy(&w, &x, sizeof(V));
  w = table_v<E>(T, clamp, w);
  __builtin_memcpy(&x, &w, sizeof(V));
  return x;
}
}  // namespace detail
// For each function: the clones GCC may call for `omp declare simd notinbranch`, each ISA's
// vector length (SSE 4, AVX and AVX2 8, AVX-512 16 floats) in this file's ISA (the calls
// are this translation unit's), the scalar symbol, and NAME_block(x, y, m): y[j] =
// NAME(x[j]) for j < m (x == y allowed)
#define FTM_TABLE_CLONE(NAME, V, ABI, T, CLAMP, E)                                        \
  static __attribute__((noinline, used)) V NAME##_clone_##ABI(V x)                        \
      __asm__(#ABI "_ftm_" #NAME "f");                                                    \
  static V NAME##_clone_##ABI(V x) { return detail::table_part<E>(T, CLAMP, x); }
#define FTM_TABLE_FN(NAME, T, CLAMP, E)                                                      \
  FTM_TABLE_CLONE(NAME, detail::v4f, _ZGVbN4v, T, CLAMP, E)                                \
  FTM_TABLE_CLONE(NAME, detail::v8f, _ZGVcN8v, T, CLAMP, E)                                \
  FTM_TABLE_CLONE(NAME, detail::v8f, _ZGVdN8v, T, CLAMP, E)                                \
  FTM_TABLE_CLONE(NAME, detail::v16f, _ZGVeN16v, T, CLAMP, E)                              \
  static __attribute__((noinline, used)) float NAME##_scalar(float x)                     \
      __asm__("ftm_" #NAME "f_scalar");                                                   \
  static float NAME##_scalar(float x) { return detail::table_f<E>(T, CLAMP, x); }        \
  static inline __attribute__((noinline)) void NAME##_block(const float* x, float* y,      \
                                                           long long m) {                  \
    long long j = 0;                                                                       \
    for (; j + 16 <= m; j += 16) {                                                         \
      const detail::v16f r = detail::table_v<E>(T, CLAMP, detail::load16(x + j));          \
      __builtin_memcpy(y + j, &r, 64);                                                     \
    }                                                                                      \
    for (; j < m; ++j) y[j] = detail::table_f<E>(T, CLAMP, x[j]);                          \
  }
FTM_TABLE_FN(tanh, detail::TANH_TABLE, 9.5f, false)
FTM_TABLE_FN(erf, detail::ERF_TABLE, 3.95f, true)
#undef FTM_TABLE_FN
#undef FTM_TABLE_CLONE
#pragma GCC pop_options
asm(".set ftm_tanhf, ftm_tanhf_scalar\n.set ftm_erff, ftm_erff_scalar");
#pragma omp declare simd notinbranch
extern "C" __attribute__((const, nothrow, visibility("hidden"))) float ftm_tanhf(float);
#pragma omp declare simd notinbranch
extern "C" __attribute__((const, nothrow, visibility("hidden"))) float ftm_erff(float);
#endif

// The float transcendentals below are out-of-line vector clones, one per function, ISA and
// vector length of 16 (the main loop) or 8 lanes (the epilogue of an AVX-512 loop: f32[8])
// (`omp declare simd`; under the toolchain's -fopenmp-simd, without which they are scalar
// calls), which the vectorized loops call, instead of a copy inlined at each call site:
// the 200-op f32[8] chain with 60 sin/cos compiled in 11.8 s of CPU inlined, 0.6 s with
// clones; the 30-op chain's forward + backward, in 4 interleaved streams (kernels.py), in
// 1.3 s inlined, 0.3 s with clones (a loop with few calls inlines them: NAME_inline below)
#define FTM_CLONE                                                                         \
  _Pragma("omp declare simd notinbranch") _Pragma("omp declare simd notinbranch simdlen(8)") \
  static __attribute__((noinline))
#define FTM_FF(NAME) FTM_CLONE float NAME(float x) { return detail::NAME##_f(x); }
FTM_FF(exp) FTM_FF(expm1) FTM_FF(log) FTM_FF(log1p)
#if FTM_TABLES
FTM_INL float tanh(float x) { return ftm_tanhf(x); }
FTM_INL float erf(float x) { return ftm_erff(x); }
#else
FTM_FF(tanh) FTM_FF(erf)
#endif
#undef FTM_FF
// The same functions inlined, for the loops that call them a few times (kernels.inline_calls):
// a clone's call keeps no vector register across it and its last operation's latency sits
// at its return (one thread, CPU time: the 30-op chain, 3 tanh an element in 4 streams,
// 2.4-2.5 ms calling the clone, 2.0-2.3 inlined; an LSTM cell's gates 85 -> 66 us, exact
// GELU's gradient 1.06 -> 0.97 ms); a loop calling them often keeps the clones (a 320-op
// group with 32 tanh compiled in 4.0 s inlined into 4 streams, 1.3 s calling them, and ran
// as fast)
#define FTM_FI(NAME, FLOAT)                                                               \
  FTM_INL float NAME##_inline(float x) { return FLOAT(x); }                               \
  FTM_INL double NAME##_inline(double x) { return detail::NAME(x); }
FTM_FI(exp, detail::exp_f) FTM_FI(expm1, detail::expm1_f) FTM_FI(log, detail::log_f)
FTM_FI(log1p, detail::log1p_f)
#if FTM_TABLES
FTM_FI(tanh, ftm_tanhf) FTM_FI(erf, ftm_erff)
#else
FTM_FI(tanh, detail::tanh_f) FTM_FI(erf, detail::erf_f)
// tanh_block(x, y, m): y[j] = tanh(x[j]) for j < m (x == y allowed), the loop a large fused
// loop is split at (kernels.staged_parts)
static inline __attribute__((noinline)) void tanh_block(const float* x, float* y, long long m) {
  _Pragma("omp simd") for (long long j = 0; j < m; ++j) y[j] = tanh_inline(x[j]);
}
#endif
#undef FTM_FI
// erfinv, evaluated in double (about 200 operations): a clone too, for float and double (the
// 8 streams of a loop inlining it compiled in 6.6 s, float)
FTM_CLONE double erfinv(double x) { return detail::erfinv(x); }
FTM_CLONE float erfinv(float x) { return (float)detail::erfinv((double)x); }
FTM_CLONE float sin(float x) {
  detail::u64 q;
  const double r = detail::reduce_float_arg(detail::absd(x), q);
  return (float)detail::sin_q(x, r, q);
}
FTM_CLONE float cos(float x) {
  detail::u64 q;
  const double r = detail::reduce_float_arg(detail::absd(x), q);
  return (float)detail::cos_q(r, q);
}
FTM_CLONE float tan(float x) {
  detail::u64 q;
  const double r = detail::reduce_float_arg(detail::absd(x), q);
  return (float)detail::tan_q(x, r, q);
}
FTM_INL float sqrt(float x) { return __builtin_sqrtf(x); }
FTM_INL float rsqrt(float x) { return 1.0f / __builtin_sqrtf(x); }
FTM_INL bool isfinite(float x) { return x - x == x - x; }
FTM_INL float atan2(float y, float x) { return (float)atan2((double)y, (double)x); }
FTM_INL float pow(float x, float y) { return (float)detail::powf_((double)x, (double)y); }
FTM_INL float fmod(float x, float y) { return __builtin_fmodf(x, y); }

// integer abs({0}) of the "i" templates
FTM_INL int abs(int x) { return x < 0 ? -x : x; }
FTM_INL long abs(long x) { return x < 0 ? -x : x; }
FTM_INL long long abs(long long x) { return x < 0 ? -x : x; }

}  // namespace ftm

#define FTM_USING                                                                        \
  using ftm::exp; using ftm::expm1; using ftm::log; using ftm::log1p; using ftm::tanh;   \
  using ftm::sin; using ftm::cos; using ftm::tan; using ftm::sinh; using ftm::cosh;      \
  using ftm::asin; using ftm::acos; using ftm::atan; using ftm::asinh; using ftm::acosh; \
  using ftm::atanh; using ftm::erf; using ftm::sqrt; using ftm::fabs; using ftm::floor;  \
  using ftm::ceil; using ftm::round; using ftm::rint; using ftm::atan2; using ftm::pow;  \
  using ftm::fmod; using ftm::rsqrt; using ftm::isfinite; using ftm::abs;               \
  using ftm::lgamma; using ftm::erfc; using ftm::erfinv;                                 \
  using ftm::__int_as_float; using ftm::__longlong_as_double
