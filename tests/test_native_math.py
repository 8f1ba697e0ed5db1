"""The native backend's math functions (functrans/backends/native/ftmath.h): their error in
ulp from the correctly rounded float32/float64 results over dense sweeps (references from
Python's math module, the C library's scalar functions, rounded once: never one CPU's SIMD
path, which differs between machines), special values (nan, +-inf, +-0, subnormals,
overflow thresholds) right in class and sign, the same bits under every -march the
toolchain may meet (baseline, AVX2, AVX-512), and each loop `out[i] = f(in[i])` vectorized
by GCC. One compile of a driver holding every function in both dtypes, built by the native
backend's toolchain (its compiler and flags);
`python tests/test_native_math.py [extra flags]` prints ns/element against libm."""
from __future__ import annotations

import ctypes
import math
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
import pytest

from functrans.backends.native import toolchain
from functrans.primitives import REGISTRY

pytestmark = pytest.mark.usefixtures("x64")  # float64 references: conftest.x64

HEADER_DIR = toolchain.HERE
try:
    COMPILER = toolchain.find_compiler()
    WHY_NOT = ""
except toolchain.ToolchainError as e:
    COMPILER, WHY_NOT = None, str(e)
needs_cxx = pytest.mark.skipif(COMPILER is None, reason=WHY_NOT)


def compile_command(*args):
    """The toolchain's compiler and flags (those of the backend's kernels), plus args."""
    return [*COMPILER.argv, *COMPILER.flags, "-I", HEADER_DIR, *args]


_NP_NAMES = {"asin": "arcsin", "acos": "arccos", "atan": "arctan", "asinh": "arcsinh",
             "acosh": "arccosh", "atanh": "arctanh", "fabs": "abs", "atan2": "arctan2",
             "pow": "power"}
_MATH = ("exp", "expm1", "log", "log1p", "tanh", "sinh", "cosh", "erf", "atan", "asin", "acos",
         "asinh", "acosh", "atanh", "sin", "cos", "tan", "atan2", "pow")


def _ref(name):
    """The reference each function is measured against: for the transcendental ones, the
    correctly rounded value (but for rare near-ties): Python's math function (the C
    library's scalar code, below 1 ulp in double and the same on every x86-64 CPU) in
    double, rounded once to the input's dtype; where math raises (a pole, an overflow, a
    domain error) NumPy's double result, a nan or an inf, exact. NumPy's own float32 and
    float64 loops are not references: their SIMD paths differ between CPUs (NumPy's float32
    arctanh is 2 ulp off on some). The exact functions (sqrt, floor, fmod, ...) and rsqrt
    (1 / sqrt(x) in the input's dtype) are IEEE operations, the same everywhere."""
    if name == "round":          # rounding_method 0: ties away from zero
        return lambda x: REGISTRY["round"].impl(np, x, rounding_method=0)
    if name == "rsqrt":
        return lambda x: (1 / np.sqrt(x)).astype(x.dtype)
    npf = getattr(np, _NP_NAMES.get(name, name), None)
    if name not in _MATH:
        return npf
    fn = getattr(math, name)

    def ref(*xs):
        wide = np.broadcast_arrays(*[np.asarray(x, np.float64) for x in xs])
        with np.errstate(all="ignore"):
            out = np.array(npf(*wide) if npf is not None else np.full(wide[0].shape, np.nan),
                           np.float64)
        flat = out.reshape(-1)
        for i, args in enumerate(zip(*(w.ravel().tolist() for w in wide))):
            try:
                flat[i] = fn(*args)
            except (ValueError, OverflowError):
                pass                  # NumPy's nan or inf stands
        return out.astype(np.asarray(xs[0]).dtype)
    return ref


# name -> (max ulp from the correctly rounded value in float32, in float64, linear range
# of the sweep): the measured maxima of the sweeps below, also the table of docs/jit.md
UNARY = {
    "exp": (1, 1, 800.0), "expm1": (1, 2, 800.0), "log": (1, 1, 1e6), "log1p": (1, 1, 1e6),
    "tanh": (1, 3, 30.0), "sinh": (0, 3, 800.0), "cosh": (0, 3, 800.0), "erf": (1, 2, 8.0),
    "atan": (0, 1, 100.0), "asin": (0, 2, 1.0), "acos": (0, 2, 1.0), "asinh": (0, 1, 1e6),
    "acosh": (0, 1, 1e6), "atanh": (0, 3, 1.0), "sin": (1, 1, 100.0), "cos": (1, 1, 100.0),
    "tan": (1, 3, 100.0), "sqrt": (0, 0, 1e6), "rsqrt": (0, 0, 1e6), "fabs": (0, 0, 1e6),
    "floor": (0, 0, 1e6), "ceil": (0, 0, 1e6), "round": (0, 0, 1e6), "rint": (0, 0, 1e6),
}
BINARY = {"atan2": (0, 1, 100.0), "pow": (0, 1, 100.0), "fmod": (0, 0, 1e6)}
# loops that stay scalar with the baseline ISA: fmod forwards to libm, and so do the double
# sin/cos/tan (ftm's read 2/pi's digits by index: a gather, vectorized with AVX-512; the
# accuracy tests force them with FTM_VECTOR_TRIG_DOUBLE)
SCALAR = {("fmod", "float32"), ("fmod", "float64"), ("sin", "float64"), ("cos", "float64"),
          ("tan", "float64")}
CTYPE = {"float32": "float", "float64": "double"}
# float functions evaluated in float arithmetic (the others: the double function rounded
# once); each within 1 ulp of the correctly rounded result
FLOAT_ARITHMETIC = ("exp", "expm1", "log", "log1p", "tanh", "erf")


def _driver_source():
    lines = ["#define FTM_VECTOR_TRIG_DOUBLE 1", '#include "ftmath.h"', 'extern "C" {']
    for dt, t in CTYPE.items():
        for name in UNARY:
            lines.append(f"void {dt}_{name}(const {t}* x, const {t}* y, {t}* o, long n) "
                         f"{{ for (long i = 0; i < n; i++) o[i] = ftm::{name}(x[i]); }}")
        for name in BINARY:
            lines.append(f"void {dt}_{name}(const {t}* x, const {t}* y, {t}* o, long n) "
                         f"{{ for (long i = 0; i < n; i++) o[i] = ftm::{name}(x[i], y[i]); }}")
    # float32 sweep over a range of bit patterns: max ulp from the double function of
    # the C library rounded to float (correctly rounded but for rare near-ties)
    lines.append("double sweep_float32(int fn, unsigned lo, unsigned hi, unsigned* worst) {")
    lines.append("  double m = 0; for (unsigned long long b = lo; b < hi; b++) {")
    lines.append("    float x; unsigned u = (unsigned)b; __builtin_memcpy(&x, &u, 4);")
    lines.append("    float got, want; switch (fn) {")
    for k, name in enumerate(UNARY):
        lib = {"rsqrt": "1.0 / __builtin_sqrt", "round": "__builtin_round"}.get(
            name, f"__builtin_{name}")
        lines.append(f"      case {k}: got = ftm::{name}(x); want = (float)({lib}((double)x)); "
                     "break;")
    lines.append("      default: return -1; }")
    lines.append("    int gi, wi; __builtin_memcpy(&gi, &got, 4); __builtin_memcpy(&wi, &want, 4);")
    lines.append("    long long go = gi < 0 ? -(long long)(gi & 0x7fffffff) : gi;")
    lines.append("    long long wo = wi < 0 ? -(long long)(wi & 0x7fffffff) : wi;")
    lines.append("    double d = (got != got && want != want) ? 0 : (got != got || want != want)"
                 " ? 1e30 : (double)(go > wo ? go - wo : wo - go);")
    lines.append("    if (d > m) { m = d; *worst = u; } }")
    lines.append("  return m; }")
    lines.append("}")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def lib():
    return toolchain.load(toolchain.build(_driver_source(), "ftmath_driver"))


def _call(lib, name, x, y=None):
    x = np.ascontiguousarray(x)
    y = x if y is None else np.ascontiguousarray(y, x.dtype)
    out = np.empty_like(x)
    getattr(lib, f"{x.dtype.name}_{name}")(
        ctypes.c_void_p(x.ctypes.data), ctypes.c_void_p(y.ctypes.data),
        ctypes.c_void_p(out.ctypes.data), ctypes.c_long(x.size))
    return out


def _ordinal(a):
    i = a.view(np.int32 if a.dtype == np.float32 else np.int64).astype(np.int64)
    mask = np.int64(0x7FFFFFFF if a.dtype == np.float32 else 0x7FFFFFFFFFFFFFFF)
    return np.where(i < 0, -(i & mask), i)


def ulp_error(got, want):
    """|got - want| in units in the last place (float ordinals); inf where the class
    differs (nan vs number, inf vs finite) or a zero's sign does."""
    og, ow = _ordinal(got), _ordinal(want)
    same = (og >= 0) == (ow >= 0)
    d = np.where(same, np.abs(np.where(same, og - ow, 0)).astype(np.float64),
                 np.abs(og.astype(np.float64)) + np.abs(ow.astype(np.float64)))
    bad = (np.isnan(got) != np.isnan(want)) | (np.isinf(got) != np.isinf(want))
    bad |= (want == 0) & (got == 0) & (np.signbit(got) != np.signbit(want))
    d = np.where(bad, np.inf, d)
    return np.where(np.isnan(got) & np.isnan(want), 0.0, d)


def special_values(dtype):
    fi = np.finfo(dtype)
    tiny_sub = fi.smallest_subnormal
    vals = [np.nan, np.inf, -np.inf, 0.0, -0.0, tiny_sub, -tiny_sub, fi.smallest_normal,
            -fi.smallest_normal, fi.smallest_normal - tiny_sub, fi.max, -fi.max, fi.eps,
            1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 2.0, 3.0, -3.0, 1e-30, -1e-30]
    # exp/sinh/cosh overflow and underflow ends, +-1 ulp
    for t in (np.log(fi.max), np.log(fi.max) + np.log(2), np.log(tiny_sub), np.log(fi.smallest_normal),
              20.0, 22.0, 709.0, 710.0, 6.0, 5.9, 1.0, 0.4375, 2.4375, 2.0**28, 2.0**52, 2.0**23):
        t = dtype(t)
        for v in (np.nextafter(t, dtype(-np.inf)), t, np.nextafter(t, dtype(np.inf))):
            vals += [v, -v]
    return np.array(vals, dtype)


def sweep_points(dtype, span, n, seed=0):
    """Random bit patterns over the whole line (log-spaced in effect), log-spaced
    magnitudes up to `span`, uniform points in [-span, span], and the special values."""
    rng = np.random.default_rng(seed)
    it = np.uint32 if dtype == np.float32 else np.uint64
    b = rng.integers(0, np.iinfo(it).max, n, dtype=it, endpoint=True).view(dtype)
    b[np.isnan(b)] = np.nan         # quiet NaNs: libm and NumPy differ on signaling ones
    lg = np.exp(rng.uniform(math.log(1e-30), math.log(span), n)) * rng.choice([-1.0, 1.0], n)
    return np.concatenate([b, lg.astype(dtype), rng.uniform(-span, span, n).astype(dtype),
                           special_values(dtype)])


def _check(got, want, x, bound, label, y=None):
    err = ulp_error(got, want)
    k = int(np.argmax(err))
    where = f"x={x[k]!r}" + ("" if y is None else f", y={y[k]!r}")
    assert err[k] <= bound, (f"{label}: {err[k]} ulp from the reference at {where}: got "
                             f"{got[k]!r}, want {want[k]!r}")
    return err[k]


def _bound(name, dt):
    return (UNARY.get(name) or BINARY[name])[0 if dt == "float32" else 1]


def _unary_case(lib, name, dt, n, seed=0):
    dtype = np.dtype(dt).type
    x = sweep_points(dtype, UNARY[name][2], n, seed)
    with np.errstate(all="ignore"):
        want = _ref(name)(x)
    _check(_call(lib, name, x), want, x, _bound(name, dt), f"{name}[{dt}]")


def _binary_points(name, dtype, n, seed=1):
    rng = np.random.default_rng(seed)
    sp = special_values(dtype)
    gx, gy = (a.ravel() for a in np.meshgrid(sp, sp))
    span = BINARY[name][2]
    x = sweep_points(dtype, span, n, seed)
    y = sweep_points(dtype, span, n, seed + 1)
    if name == "pow":           # exponents where the result neither overflows nor underflows
        y = rng.uniform(-30, 30, len(y))
        y[: len(y) // 2] = np.round(y[: len(y) // 2])
        x = np.copysign(x, rng.choice([-1.0, 1.0], len(x))).astype(dtype)
    return (np.concatenate([gx, x]).astype(dtype), np.concatenate([gy, y]).astype(dtype))


def _binary_case(lib, name, dt, n, seed=1):
    x, y = _binary_points(name, np.dtype(dt).type, n, seed)
    with np.errstate(all="ignore"):
        want = _ref(name)(x, y)
    _check(_call(lib, name, x, y), want, x, _bound(name, dt), f"{name}[{dt}]", y)


@needs_cxx
@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_within_bound_of_correctly_rounded(lib, name, dt):
    _unary_case(lib, name, dt, 20_000)


@needs_cxx
@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_within_bound_of_correctly_rounded(lib, name, dt):
    _binary_case(lib, name, dt, 20_000)


def _march_variants():
    """The -march levels a user's machine may compile the kernels for: x86-64-v2 (SSE4.2),
    v3 (AVX2, FMA) and, where this CPU runs it, v4 (AVX-512)."""
    if COMPILER is None or not COMPILER.flags or toolchain.MARCH_FLAG not in COMPILER.flags:
        return []
    with open("/proc/cpuinfo") as f:
        info = f.read()
    out = ["x86-64-v2"]
    if " avx2" in info and " fma" in info:
        out.append("x86-64-v3")
    if " avx512f" in info and " avx512bw" in info and " avx512vl" in info:
        out.append("x86-64-v4")
    return out


@needs_cxx
@pytest.mark.skipif(not _march_variants(), reason="needs an x86-64 compiler taking -march")
@pytest.mark.parametrize("march", ["x86-64-v2", "x86-64-v3", "x86-64-v4"])
def test_bounds_hold_under_every_march(march):
    """The kernels compiled for each vector ISA a user's CPU may have are within the same
    bounds of the correctly rounded values: not only this machine's code path (without FMA,
    ftmath.h's float exp, tanh and erf round differently at a few points, within 1 ulp)."""
    if march not in _march_variants():
        pytest.skip(f"this CPU cannot run -march={march}")
    base = toolchain.find_compiler()
    cc = toolchain.Compiler(base.argv, base.path, base.version, base.openmp,
                            (toolchain.MARCH_FLAG, toolchain.WIDE_FLAG))
    cc.flags = tuple(f"-march={march}" if f == toolchain.MARCH_FLAG else f for f in cc.flags)
    other = toolchain.load(toolchain.build(_driver_source(), f"ftmath_driver_{march}", cc))
    for dt in ("float32", "float64"):
        for name in UNARY:
            _unary_case(other, name, dt, 4_000)
        for name in BINARY:
            _binary_case(other, name, dt, 4_000)


@needs_cxx
@pytest.mark.parametrize("name", FLOAT_ARITHMETIC)
def test_float_arithmetic_within_one_ulp_of_correctly_rounded(lib, name):
    """The float functions evaluated in float: at most 1 ulp from the double function
    (NumPy's, < 1 ulp in double) rounded to float, on the dense default sweep (most of
    their distance from NumPy's float32 results is NumPy's own error, up to 3 ulp)."""
    x = sweep_points(np.float32, UNARY[name][2], 100_000, seed=3)
    with np.errstate(all="ignore"):
        want = _ref(name)(x.astype(np.float64)).astype(np.float32)
    _check(_call(lib, name, x), want, x, 1, f"{name}[float32] vs correctly rounded")


def template_math_names():
    """The functions the elementwise primitives' CUDA templates call, but for the
    prelude's own ft_* helpers."""
    texts = []
    for prim in REGISTRY.values():
        t = prim.cuda
        if callable(t) and not isinstance(t, (str, dict)):
            variants = []
            for params in ({"rounding_method": 0}, {"rounding_method": 1}, {"y": 5}):
                try:
                    variants.append(t(params))
                except KeyError:
                    pass
        else:
            variants = [t]
        for v in variants:
            texts += list(v.values()) if isinstance(v, dict) else [v] if v else []
    names = set()
    for text in texts:
        names |= set(re.findall(r"\b([A-Za-z_]\w*)\s*\(", text))
    return {n for n in names if not n.startswith("ft_")}


@needs_cxx
def test_hardest_trig_reduction(lib):
    """x = 6381956970095103 * 2^797 lies 2^-61 from a multiple of pi/2 (the worst double):
    cos and tan correctly rounded (mpmath at 400 digits), where NumPy's cos is 8 ulp off."""
    x = np.array([6381956970095103.0 * 2.0**797, -6381956970095103.0 * 2.0**797])
    assert list(_call(lib, "sin", x)) == [1.0, -1.0]
    assert list(_call(lib, "cos", x)) == [-4.687165924254628e-19] * 2
    assert list(_call(lib, "tan", x)) == [-2.133485385753704e+18, 2.133485385753704e+18]


@needs_cxx
def test_every_template_function_is_provided(tmp_path):
    """Each name the templates call resolves, unqualified under `using namespace ftm;`,
    for float and double (abs: the integer templates' abs)."""
    names = template_math_names()
    assert {"exp", "log1p", "tanh", "erf", "pow", "rsqrt", "isfinite"} <= names
    lines = ['#include "ftmath.h"', "using namespace ftm;"]
    for k, name in enumerate(sorted(names)):
        if name == "abs":
            lines.append(f"long long f{k}(int i, long long j) {{ return abs(i) + abs(j); }}")
            continue
        args = ", ".join(["x"] * (2 if name in BINARY else 1))
        for t in CTYPE.values():
            lines.append(f"double f{k}({t} x) {{ return (double){name}({args}); }}")
    src = tmp_path / "names.cc"
    src.write_text("\n".join(lines) + "\n")
    r = subprocess.run(compile_command("-c", "-o", str(tmp_path / "n.o"), str(src)),
                       capture_output=True, text=True)
    assert r.returncode == 0, f"ftmath.h lacks a function the CUDA templates call:\n{r.stderr}"


@needs_cxx
def test_cuda_intrinsics(tmp_path):
    """The CUDA bit casts literal_c writes for non-finite literals compile on the host."""
    src = tmp_path / "t.cc"
    src.write_text('#include "ftmath.h"\nusing namespace ftm;\n'
                   'extern "C" bool f(float* o, double* p) {\n'
                   '  o[0] = __int_as_float(0x7f800000); p[0] = __longlong_as_double('
                   '0xfff0000000000000LL);\n  return isfinite(o[0]) || isfinite(p[0]); }\n')
    subprocess.run(compile_command("-c", "-o", str(tmp_path / "t.o"), str(src)), check=True,
                   capture_output=True)


@needs_cxx
@pytest.mark.slow
@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(UNARY) + sorted(BINARY))
def test_dense_sweep_within_bound(lib, name, dt):
    """>= 3e7 points per function and dtype (1e7 of each kind of sweep_points)."""
    for seed in range(10 if name != "erf" else 1):      # math.erf is a Python loop
        if name in BINARY:
            _binary_case(lib, name, dt, 1_000_000, seed)
        else:
            _unary_case(lib, name, dt, 1_000_000, seed)


@needs_cxx
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(UNARY))
def test_float32_exhaustive(lib, name):
    """Every float32 bit pattern: at most 1 ulp from the C library's double function
    rounded to float (the correctly rounded value but for rare near-ties); the exact
    functions (bound 0: fabs, floor, rint, ...) equal to it."""
    worst = ctypes.c_uint(0)
    fn = getattr(lib, "sweep_float32")
    fn.restype = ctypes.c_double
    m = fn(list(UNARY).index(name), 0, 0xFFFFFFFF, ctypes.byref(worst))
    x = np.array([worst.value], np.uint32).view(np.float32)[0]
    assert m <= min(1, _bound(name, "float32")), f"{name}[float32]: {m} ulp at x={x!r}"


EXACT_FLOAT = ("fabs", "floor", "ceil", "rint", "round")


@needs_cxx
def test_exact_float_functions_stay_in_float(tmp_path):
    """fabs, floor, ceil, rint and round of a float are computed in float: through double,
    as first written, each loop converted every vector twice each way (the 30-op chain's
    loop with one abs per block ran 2.3x slower)."""
    src = tmp_path / "t.cc"
    src.write_text('#include "ftmath.h"\n' + "".join(
        f'extern "C" void v_{f}(const float* __restrict x, float* __restrict o, long n) {{\n'
        f"  for (long i = 0; i < n; i++) o[i] = ftm::{f}(x[i]); }}\n" for f in EXACT_FLOAT))
    asm = tmp_path / "t.s"
    subprocess.run(compile_command("-S", "-o", str(asm), str(src)), check=True)
    text = asm.read_text()
    for f in EXACT_FLOAT:
        body = text[text.index(f"v_{f}:"):]
        body = body[:body.index(".cfi_endproc")]
        assert not re.search(r"cvt(ps2pd|pd2ps|ss2sd|sd2ss)", body), f"{f} converts to double"


# ---------------------------------------------------------------------------
# vectorization


def _is_gcc():
    if COMPILER is None:
        return False
    out = subprocess.run([*COMPILER.argv, "--version"], capture_output=True, text=True).stdout
    return "Free Software Foundation" in out and "clang" not in out.lower()


def _vector_loops_source(dt):
    t = CTYPE[dt]
    lines = ['#include "ftmath.h"', "using namespace ftm;"]
    where = {}
    for name in list(UNARY) + list(BINARY):
        args = "x[i]" if name in UNARY else "x[i], y[i]"
        lines.append(f"void v_{dt}_{name}(const {t}* __restrict x, const {t}* __restrict y, "
                     f"{t}* __restrict o, long n) {{")
        lines.append(f"  for (long i = 0; i < n; i++) o[i] = {name}({args}); }}")
        where[len(lines)] = (name, dt)
    return "\n".join(lines) + "\n", where


@needs_cxx
@pytest.mark.skipif(not _is_gcc(), reason="-fopt-info-vec-optimized is GCC's")
def test_loops_vectorize(tmp_path):
    """Each `out[i] = f(in[i])` loop is vectorized with the toolchain's flags and the
    baseline ISA (SSE2), but those of SCALAR. One compile per dtype, both at once."""
    procs, wheres, vectorized = [], {}, set()
    for dt in CTYPE:
        source, wheres[dt] = _vector_loops_source(dt)
        src = tmp_path / f"{dt}.cc"
        src.write_text(source)
        procs.append((dt, subprocess.Popen(
            [a for a in compile_command("-fopt-info-vec-optimized", "-c", "-o",
                                        str(tmp_path / f"{dt}.o"), str(src))
             if a != toolchain.MARCH_FLAG],          # the baseline ISA
            stderr=subprocess.PIPE, text=True)))
    for dt, proc in procs:
        _, err = proc.communicate()
        assert proc.returncode == 0, err
        for m in re.finditer(rf"{dt}\.cc:(\d+):\d+: optimized: loop vectorized", err):
            if int(m.group(1)) in wheres[dt]:
                vectorized.add(wheres[dt][int(m.group(1))])
    expected = {nd for w in wheres.values() for nd in w.values()}
    missing = sorted(expected - vectorized - SCALAR)
    assert not missing, f"loops not vectorized: {missing}"
    assert not (vectorized & SCALAR), f"now vectorized, take out of SCALAR: {vectorized & SCALAR}"


def _has_avx512f():
    try:
        with open("/proc/cpuinfo") as f:
            return " avx512f" in f.read()
    except OSError:
        return False


@needs_cxx
@pytest.mark.skipif(not (_is_gcc() and _has_avx512f()), reason="needs GCC and an AVX-512 CPU")
def test_double_trig_vectorizes_with_avx512(tmp_path):
    """With -march=native on an AVX-512 CPU the double sin/cos/tan are ftm's and vectorize."""
    src = tmp_path / "t.cc"
    src.write_text('#include "ftmath.h"\nusing namespace ftm;\n' + "".join(
        f"void v_{f}(const double* __restrict x, double* __restrict o, long n) {{\n"
        f"  for (long i = 0; i < n; i++) o[i] = {f}(x[i]); }}\n" for f in ("sin", "cos", "tan")))
    r = subprocess.run(compile_command("-march=native", "-fopt-info-vec-optimized", "-c", "-o",
                                       str(tmp_path / "t.o"), str(src)),
                       capture_output=True, text=True, check=True)
    lines = {int(m.group(1)) for m in re.finditer(r"t\.cc:(\d+):\d+: optimized: loop vectorized",
                                                   r.stderr)}
    assert {4, 6, 8} <= lines, r.stderr


@needs_cxx
def test_exp_far_below_range_raises_no_underflow():
    """exp of x below its underflow end (-inf: the masked scores of a causal softmax) is 0
    without an underflowing multiply: each costs a microcode assist per lane on x86 (a
    masked softmax backward ran 3x slower). The values near the end still underflow as
    they must (subnormal results), and NaN stays NaN."""
    src = ('#include <cfenv>\n#include "ftmath.h"\nextern "C" {\n'
           'int exp_f32(const float* x, float* o, long n) { std::feclearexcept(FE_ALL_EXCEPT);\n'
           '  for (long i = 0; i < n; i++) o[i] = ftm::exp(x[i]);\n'
           '  return std::fetestexcept(FE_UNDERFLOW) != 0; }\n'
           'int exp_f64(const double* x, double* o, long n) { std::feclearexcept(FE_ALL_EXCEPT);\n'
           '  for (long i = 0; i < n; i++) o[i] = ftm::exp(x[i]);\n'
           '  return std::fetestexcept(FE_UNDERFLOW) != 0; }\n}\n')
    lib = toolchain.load(toolchain.build(src, "exp_underflow"))

    def run(x):
        out = np.empty_like(x)
        fn = lib.exp_f32 if x.dtype == np.float32 else lib.exp_f64
        flag = fn(ctypes.c_void_p(x.ctypes.data), ctypes.c_void_p(out.ctypes.data),
                  ctypes.c_long(x.size))
        return out, bool(flag)
    for dt, far, near in ((np.float32, -104.5, -100.0), (np.float64, -746.0, -740.0)):
        x = np.array([-np.inf, far, -1e30, np.finfo(dt).min], dt)
        out, underflow = run(x)
        assert not underflow, f"{dt.__name__}: exp of {x} underflowed"
        assert np.array_equal(out, np.zeros_like(x)) and not np.signbit(out).any()
        out, underflow = run(np.array([near], dt))
        assert underflow and out[0] == np.exp(np.array([near], dt))[0]
        out, _ = run(np.array([np.nan, -np.nan], dt))
        assert np.isnan(out).all()


# ---------------------------------------------------------------------------
# timing table (not a test): python tests/test_native_math.py


def timing_table(extra_flags=(), n=1 << 16, reps=50):
    """ns/element of ftm::f and the C library's f over n points, float32 and float64
    (best of reps), compiled with the toolchain's flags plus extra_flags (-march=native)."""
    lines = ['#include "ftmath.h"', 'extern "C" {']
    for dt, t in CTYPE.items():
        for name in UNARY:
            libm = {"rsqrt": "1 / __builtin_sqrt", "round": "__builtin_round"}.get(
                name, f"__builtin_{name}") + ("f" if dt == "float32" and name != "rsqrt" else "")
            lines.append(f"void l_{dt}_{name}(const {t}* __restrict x, {t}* __restrict o, long n)"
                         f" {{ for (long i = 0; i < n; i++) o[i] = {libm}(x[i]); }}")
            lines.append(f"void f_{dt}_{name}(const {t}* __restrict x, {t}* __restrict o, long n)"
                         f" {{ for (long i = 0; i < n; i++) o[i] = ftm::{name}(x[i]); }}")
    lines.append("}")
    with tempfile.TemporaryDirectory() as d:
        src, so = os.path.join(d, "t.cc"), os.path.join(d, "t.so")
        with open(src, "w") as f:
            f.write("\n".join(lines) + "\n")
        subprocess.run(compile_command(*extra_flags, "-o", so, src), check=True)
        lib = ctypes.CDLL(so)
        print(f"| function | float32 ftm | float32 libm | float64 ftm | float64 libm |  (ns/element, n={n})")
        print("|---|---|---|---|---|")
        rng = np.random.default_rng(0)
        for name in UNARY:
            row = []
            for dt in CTYPE:
                x = rng.uniform(-1, 1, n).astype(dt) * (UNARY[name][2] if UNARY[name][2] < 1e3 else 10)
                if name in ("log", "log1p", "sqrt", "rsqrt", "acosh"):
                    x = np.abs(x) + 1
                o = np.empty_like(x)
                for kind in "fl":
                    fn = getattr(lib, f"{kind}_{dt}_{name}")
                    best = math.inf
                    for _ in range(reps):
                        t0 = time.perf_counter()
                        fn(ctypes.c_void_p(x.ctypes.data), ctypes.c_void_p(o.ctypes.data),
                           ctypes.c_long(n))
                        best = min(best, time.perf_counter() - t0)
                    row.append(f"{best / n * 1e9:.2f}")
            print(f"| {name} | " + " | ".join(row) + " |")


if __name__ == "__main__":
    timing_table(sys.argv[1:])


HEX = re.compile(r"-?0x1\.[0-9a-f]+p[-+]\d+")


def _header_function(signature):
    with open(os.path.join(HEADER_DIR, "ftmath.h")) as f:
        text = f.read()
    body = text[text.index(signature):]
    return body[:body.index("\n}\n")]


def test_numpy_erf_shares_the_native_polynomials():
    """The NumPy backend's erf (primitives/elementwise.py) evaluates the header's erf (its
    arms erf_series and erfc_fit) and erf_f polynomials: its coefficient tables equal the
    header's, in order."""
    from functrans.primitives import elementwise as el
    double = [float.fromhex(h) for name in ("double erf_series(double a)",
                                            "double erfc_fit(double a)")
              for h in HEX.findall(_header_function(name))]
    single = [float.fromhex(h) for h in HEX.findall(_header_function("float erf_f(float x)"))]
    assert double == [*el._ERF_SMALL, *el._ERF_BIG]
    assert single == [*el._ERF_F_SMALL, el._ERF_F_C0M1, el._ERF_F_SCALE, *el._ERF_F_BIG]


@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_numpy_erf_within_the_native_bounds(dt):
    """The NumPy backend's erf is within the native erf's bounds from libm's (UNARY) on the
    dense sweep and the special values (nan, infinities, signed zeros, subnormals); the
    Taylor series it replaced was 93 ulp off near 2.5 in float64."""
    x = np.concatenate([sweep_points(np.dtype(dt).type, UNARY["erf"][2], 200_000, seed=5),
                        special_values(np.dtype(dt).type)])
    got = REGISTRY["erf"].impl(np, x)
    assert got.dtype == x.dtype
    _check(got, _ref("erf")(x), x, _bound("erf", dt), f"numpy erf[{dt}]")


def _logistic_reference(x):
    """logistic(x) correctly rounded to x's dtype: decimal arithmetic at 50 digits, rounded
    to float64 (then once more for float32, where the float64 value's error is 2^-29 ulp)."""
    import decimal
    ctx = decimal.Context(prec=50)
    out = np.empty(x.shape, np.float64)
    for i, v in enumerate(x.astype(np.float64).tolist()):
        if math.isnan(v) or math.isinf(v):
            out[i] = math.nan if math.isnan(v) else float(v > 0)
        else:
            d = decimal.Decimal(v)
            out[i] = 0.0 if d < -800 else float(ctx.divide(1, 1 + ctx.exp(-d)))
    return out.astype(x.dtype)


@pytest.mark.parametrize("path", ["impl", "numpy", "native"])
@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_logistic_within_two_ulp_of_correctly_rounded(path, dt):
    """sigmoid in both tails, on the primitive's NumPy implementation, the NumPy backend's
    generated code and the native template (also the CUDA one): within 2 ulp of the
    correctly rounded value over the sweep, subnormal results included (the former
    0.5 tanh(x/2) + 0.5 gave 0 below -17 in float32 and was 13x off at -20)."""
    import functrans as ft
    x = sweep_points(np.dtype(dt).type, 800.0, 10_000, seed=7)
    if path == "impl":
        got = REGISTRY["logistic"].impl(np, x)
    else:
        if path == "native" and COMPILER is None:
            pytest.skip(WHY_NOT)
        saved = ft.config.cpu_backend
        ft.config.update("cpu_backend", path)
        try:
            got = np.asarray(ft.jit(lambda v: ft.lax.logistic(v) * 1.0)(x))
        finally:
            ft.config.update("cpu_backend", saved)
    assert got.dtype == x.dtype
    err = ulp_error(got, _logistic_reference(x))
    assert err.max() <= 2, (x[np.argmax(err)], err.max())


@pytest.mark.slow
def test_logistic_float32_exhaustive():
    """Every float32 through the NumPy implementation: within 2 ulp of the float64
    formula rounded once (the sweep test checks that formula against decimal arithmetic)."""
    impl = REGISTRY["logistic"].impl
    worst = 0.0
    for start in range(0, 2 ** 32, 2 ** 24):
        x = np.arange(start, start + 2 ** 24, dtype=np.uint64).astype(np.uint32).view(np.float32)
        want = impl(np, x.astype(np.float64)).astype(np.float32)
        worst = max(worst, float(ulp_error(impl(np, x), want).max()))
    assert worst <= 2, worst
