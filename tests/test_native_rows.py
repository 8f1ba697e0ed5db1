"""Row groups on the native CPU backend: reductions over trailing axes fused with the
elementwise work around them (softmax, layernorm, logsumexp, mean/var/std, max/min) run as
one C++ function each, and agree with the NumPy backend and with float64 central
differences, forward and jitted `ft.grad`, over dtypes, keepdims, one row, one column, odd
column counts and rows of -inf/NaN; `lower()` says which groups ran natively and why not."""
from __future__ import annotations

import math
import re
import subprocess
import warnings

import numpy as np
import pytest

import functrans as ft
import functrans.numpy as fnp
from functrans import fusion
from functrans.backends import cpu
from functrans.backends.native import kernels, rows, toolchain
from functrans.nn import functions as F

from conftest import fd_grad

pytestmark = pytest.mark.usefixtures("x64")  # float64 references: conftest.x64

EPS = 1e-5


def layernorm(x, g, b):
    mu = fnp.mean(x, axis=-1, keepdims=True)
    var = fnp.mean((x - mu) ** 2, axis=-1, keepdims=True)
    return (x - mu) / fnp.sqrt(var + EPS) * g + b


FUNCS = {   # name: (function of x (and the last axis's scale/shift), row-group outputs)
    "softmax": lambda x: F.softmax(x),
    "log_softmax": lambda x: F.log_softmax(x),
    "logsumexp": lambda x: fnp.logsumexp(x, axis=-1),
    "logsumexp_keepdims": lambda x: fnp.logsumexp(x, axis=-1, keepdims=True),
    "mean_var_std": lambda x: (fnp.mean(x, axis=-1), fnp.var(x, axis=-1, keepdims=True),
                               fnp.std(x, axis=-1)),
    "two_axes": lambda x: (x - fnp.mean(x, axis=(-2, -1), keepdims=True))
    / fnp.std(x, axis=(-2, -1), keepdims=True),
    "max_min": lambda x: (fnp.max(x, axis=-1) - fnp.min(x, axis=-1, keepdims=True).squeeze(-1)
                          + fnp.sum(x * x, axis=-1)),
    "centered_max": lambda x: x - fnp.max(x, axis=-1, keepdims=True) * 0.5,
}
SHAPES = {"rows": (6, 33), "one_row": (1, 17), "one_column": (5, 1), "short_rows": (3, 5),
          "exact_lanes": (4, 32), "long_rows": (2, 5000)}


def rand(shape, dtype, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _jit_under(backend, f, *args):
    """jit(f)(*args) built under cpu_backend=backend, with its lowering."""
    saved = ft.config.cpu_backend
    ft.config.update("cpu_backend", backend)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ft.RetraceWarning)
            jf = ft.jit(f)
            return jf(*args), jf.lower(*args)
    finally:
        ft.config.update("cpu_backend", saved)


def _leaves(t):
    return [np.asarray(a) for a in (t if isinstance(t, (tuple, list)) else (t,))]


def assert_native_rows(low):
    groups = low.info["groups"]
    assert any(b == "native" and " rows of " in why for _, b, why in groups), groups


def _check(f, args, rtol, atol, native=True):
    want, _ = _jit_under("numpy", f, *args)
    got, low = _jit_under("native", f, *args)
    if native:
        assert_native_rows(low)
    for g, w in zip(_leaves(got), _leaves(want), strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(FUNCS))
def test_forward_matches_the_numpy_backend(native_backend, name, dtype):
    tol = {np.float16: 2e-3, np.float32: 2e-6, np.float64: 1e-13}[dtype]
    shape = (3, 4, 7) if name == "two_axes" else SHAPES["rows"]
    _check(FUNCS[name], (rand(shape, dtype),), tol, tol)


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_row_and_column_counts(native_backend, shape):
    """One row, one column (no row group: nothing to reduce per row), rows shorter than the
    lanes, a multiple of them, longer than the row buffers."""
    x = rand(SHAPES[shape], np.float32)
    native = shape != "one_column"
    _check(FUNCS["softmax"], (x,), 2e-6, 2e-7, native)
    _check(FUNCS["mean_var_std"], (x,), 2e-5, 2e-6, native)


def test_layernorm_with_scale_and_shift(native_backend):
    for dtype, tol in ((np.float32, 2e-5), (np.float64, 1e-12)):
        x, g, b = rand((8, 37), dtype), rand(37, dtype, 1), rand(37, dtype, 2)
        _check(layernorm, (x, g, b), tol, tol)


def test_broadcasts_along_rows_and_columns(native_backend):
    """Inputs broadcast into a row group over the column axes (a weight of the last axis,
    of the last two) and over the row axes (a per-batch scale): each read at the right
    index (the column part from `i - base`, the row part from the row number)."""
    x = rand((3, 4, 5, 6), np.float32)
    w1, w2 = rand(6, np.float32, 1), rand((5, 6), np.float32, 2)
    s, t = rand((3, 1, 1, 1), np.float32, 3), rand((1, 4, 1, 1), np.float32, 4)

    def f(x, w1, w2, s, t):
        y = (x - fnp.mean(x, axis=(-2, -1), keepdims=True)) * w2 * s + t
        return F.softmax(y * w1, axis=-1) * w1 + s * t
    _check(f, (x, w1, w2, s, t), 2e-6, 2e-6)
    _, low = _jit_under("native", f, x, w1, w2, s, t)
    assert "(i %" not in low.native["source"]     # no modulo of the flat index: vectorizes


def test_rows_of_inf_and_nan_follow_numpy(native_backend):
    """softmax of a row of -inf is NaN (-inf - -inf), as NumPy's; a NaN propagates through
    max, min and sums; +inf rows too."""
    x = rand((6, 19), np.float32)
    x[1] = -np.inf
    x[2, 5] = np.nan
    x[3, 0] = np.inf
    x[4, 18] = -np.inf
    want = np.exp(x - x.max(-1, keepdims=True))
    want /= want.sum(-1, keepdims=True)
    got, low = _jit_under("native", FUNCS["softmax"], x)
    assert_native_rows(low)
    assert np.isnan(got[1]).all() and np.isnan(got[2]).all()
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-7)
    for name in ("logsumexp", "max_min", "mean_var_std"):
        _check(FUNCS[name], (x,), 2e-6, 1e-6)


LOSSES = {
    "softmax": lambda x, w: fnp.sum(F.softmax(x) * w),
    "log_softmax": lambda x, w: fnp.sum(F.log_softmax(x) * w),
    "logsumexp": lambda x, w: fnp.sum(fnp.logsumexp(x * w, axis=-1)),
    "layernorm": lambda x, w: fnp.sum(layernorm(x, w[0], w[1]) * w),
    "mean_var_std": lambda x, w: fnp.sum(fnp.var(x * w, axis=-1) + fnp.std(x, axis=-1)
                                         * fnp.mean(w, axis=-1)),
    "two_axes": lambda x, w: fnp.sum(FUNCS["two_axes"](x) * w),
    "max_min": lambda x, w: fnp.sum(FUNCS["max_min"](x * w)),
}


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_jitted_grad_matches_numpy_backend_and_finite_differences(native_backend, name):
    shape = (3, 4, 7) if name == "two_axes" else (5, 19)
    x, w = rand(shape, np.float64), rand(shape, np.float64, 1)
    loss = LOSSES[name]
    grad = ft.grad(loss)
    got, low = _jit_under("native", grad, x, w)
    assert_native_rows(low)
    want, _ = _jit_under("numpy", grad, x, w)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    fd = fd_grad(lambda v: loss(v, w), x)
    np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-6)
    x32, w32 = x.astype(np.float32), w.astype(np.float32)
    got32, _ = _jit_under("native", grad, x32, w32)
    assert got32.dtype == np.float32
    np.testing.assert_allclose(got32, want, rtol=5e-4, atol=5e-5)


def test_an_unrenderable_row_group_falls_back_and_lower_says_why(native_backend):
    """Integer pow stays on NumPy: the row group holding it runs as it would without row
    groups (its elementwise part fused on its own), and lower() names the reason."""
    i = np.arange(-12, 12, dtype=np.int32).reshape(4, 6)
    p = np.arange(24, dtype=np.int32).reshape(4, 6) % 4

    def f(i, p):
        return fnp.sum(fnp.power(i, p) + i * 2, axis=-1) - fnp.max(i, axis=-1)
    got, low = _jit_under("native", f, i, p)
    np.testing.assert_array_equal(got, (i ** p + i * 2).sum(-1) - i.max(-1))
    reasons = [why for _, b, why in low.info["groups"] if b == "numpy"]
    assert any("integer pow stays on NumPy" in r for r in reasons), low.info["groups"]
    assert not any(" rows of " in why for _, b, why in low.info["groups"] if b == "native")


def test_auto_sends_large_row_groups_native_and_shows_the_cpp(native_backend):
    """cpu_backend="auto" runs a row group natively whatever its ops (a fused reduction
    saves whole passes over memory) once it is large enough; the C++ holds the lanes and
    the row loop."""
    small = rand((4, 40), np.float32)
    _, low = _jit_under("auto", FUNCS["softmax"], small)
    assert low.native is None and " rows of " not in str(low)  # fused as without row groups
    x = rand((64, cpu.CONFIG.native_rows_min_size // 64), np.float32)
    _, low = _jit_under("auto", FUNCS["softmax"], x)
    assert_native_rows(low)
    src = low.native["source"]
    assert f"[{rows.LANES}];" in src and "for (long long r = 0; r < rows; ++r)" in src
    assert "row buffer" in src          # exp(x - max) computed once, read by the last pass


def test_row_buffers_bounded(native_backend):
    """A row longer than the buffer budget recomputes its values instead."""
    x = rand((2, rows.ROW_CACHE_BYTES // 4 + 1), np.float32)
    _, low = _jit_under("native", FUNCS["softmax"], x)
    assert_native_rows(low)
    assert "row buffer" not in low.native["source"]


def test_the_cpp_does_not_follow_set_order(native_backend):
    """A row group's text is the same however its values hash (by address, so from process
    to process): the native cache is keyed by the text, and a program whose inputs were
    loaded in set order was compiled again in every new process."""
    args = [rand((8, 40), np.float32, seed=i) for i in range(6)]

    def f(a, b, c, d, e, g):
        s = (a + b) * c - d * e + g
        return fnp.sum(s * s, axis=-1), fnp.max(a * g - c, axis=-1)

    lows = [_jit_under("native", lambda *xs: f(*xs), *args)[1] for _ in range(8)]
    sources = {low.native["source"] for low in lows}
    assert len(sources) == 1 and all("rows of" in str(low) for low in lows)


def test_a_total_sum_is_split_into_the_row_group(native_backend):
    """sum(softmax(x) * w): the sum over every axis becomes per-row sums inside the row group
    then a sum of the rows, so the product is never written out (the only full-shape output
    left is the gradient)."""
    x, w = rand((64, 300), np.float32), rand((64, 300), np.float32, 1)
    vg = ft.value_and_grad(LOSSES["softmax"])
    (v, g), low = _jit_under("native", vg, x, w)
    assert_native_rows(low)
    full = [o for e in low.optimized.jaxpr.eqns if e.primitive is fusion.fused_p
            for o in e.outvars if o.aval.shape == x.shape]
    assert len(full) == 1, low.optimized
    (v0, g0), _ = _jit_under("numpy", vg, x, w)
    np.testing.assert_allclose(v, v0, rtol=1e-5)
    np.testing.assert_allclose(g, g0, rtol=1e-5, atol=1e-7)


def test_a_per_channel_sum_is_split_into_the_row_group(native_backend):
    """A batch norm's per-channel sums of NCHW values, sum(dy * x, axis=(0, 2, 3)): per-row
    sums over (H, W) inside the row group, then a sum over N of the (N, C) row values, so
    the product is never written out; a sum that leaves the last axis is not split."""
    x, y = rand((4, 8, 16, 16), np.float32), rand((4, 8, 16, 16), np.float32, 1)

    def f(x, y):
        return fnp.sum(x * y, axis=(0, 2, 3)), fnp.sum(x * y + 1.0, axis=(0, 2))
    got, low = _jit_under("native", f, x, y)
    assert_native_rows(low)
    eqns = low.optimized.jaxpr.eqns
    full = [o for e in eqns if e.primitive is fusion.fused_p for o in e.outvars
            if o.aval.shape == x.shape]
    assert len(full) == 1, low.optimized        # x * y + 1 alone, for the sum not split
    assert any(e.primitive.name == "reduce_sum" and e.params["axes"] == (0, 2) and
               e.invars[0].aval.shape == x.shape for e in eqns), low.optimized
    want, _ = _jit_under("numpy", f, x, y)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


@pytest.mark.usefixtures("x32")
def test_integer_and_boolean_rows(native_backend):
    """Integer sums wrap as NumPy's (int32 here), max/min of integers start from the dtype's
    extremes; a count of a comparison (bool locals held as int) sums exactly; a rank-3 value
    reduced over its last axis has rows over the first two."""
    i = (np.arange(-30, 30, dtype=np.int32).reshape(5, 12) * 100_000_000)

    def ints(i):
        return fnp.sum(i * 3, axis=-1) - fnp.max(i, axis=-1) + fnp.min(i * 2, axis=-1)
    got, low = _jit_under("native", ints, i)
    assert_native_rows(low)
    with np.errstate(over="ignore"):
        want = (i * 3).sum(-1, dtype=np.int32) - i.max(-1) + (i * 2).min(-1)
    np.testing.assert_array_equal(got, want)
    x = rand((3, 4, 21), np.float32)

    def counts(x):
        return fnp.sum(x > 0.1, axis=-1) + fnp.mean(fnp.abs(x), axis=-1)
    _check(counts, (x,), 2e-6, 1e-6)


def _unvectorized_simd_loops(source, tmp_path):
    """The line numbers of the `#pragma omp simd` loops of source that GCC (the backend's
    toolchain and flags) does not vectorize."""
    cc = toolchain.find_compiler()
    src = tmp_path / "rows.cc"
    src.write_text(source)
    r = subprocess.run([*cc.argv, *cc.flags, "-I", toolchain.HERE, "-fopt-info-vec-optimized",
                        "-c", "-o", str(tmp_path / "rows.o"), str(src)],
                       capture_output=True, text=True, check=True)
    done = {int(m.group(1)) for m in re.finditer(r"rows\.cc:(\d+):\d+: optimized: loop "
                                                 r"vectorized", r.stderr)}
    macros = subprocess.run([*cc.argv, *cc.flags, "-I", toolchain.HERE, "-dM", "-E",
                             str(src)], capture_output=True, text=True, check=True).stdout
    tables = "#define FTM_TABLES 1" in macros
    lines, skip, loops = source.splitlines(), False, []
    for k, ln in enumerate(lines):        # the loops of the branch FTM_TABLES compiles
        if ln == "#if FTM_TABLES":
            skip = not tables
        elif ln == "#else":
            skip = tables
        elif ln == "#endif":
            skip = False
        elif ln.strip() == "#pragma omp simd" and not skip:
            loops.append(k + 1)
    # GCC names a loop by its header or its first statements
    return [n for n in loops if not done & {n + 1, n + 2, n + 3}]


def _is_gcc():
    try:
        return "clang" not in toolchain.find_compiler().version.lower()
    except toolchain.ToolchainError:
        return False


@pytest.mark.skipif(not _is_gcc(), reason="-fopt-info-vec-optimized is GCC's")
def test_a_masked_softmax_vectorizes(native_backend, tmp_path):
    """A bool mask read by a row group (a causal softmax and its backward) is copied into an
    int row buffer: GCC vectorizes no loop that loads bytes and computes floats, nor one
    with ft_max's select beside another (ft_max is one select). Every simd loop of the
    row function vectorizes, and the values are the NumPy backend's."""
    x = rand((64, 64), np.float32)
    m = np.triu(np.ones((64, 64), bool), 1)

    def masked(x, m):
        return F.softmax(fnp.where(m, -np.inf, x * 0.5))
    got, low = _jit_under("native", masked, x, m)
    assert_native_rows(low)
    source = low.native["source"]
    assert "the row of a bool input" in source
    assert _unvectorized_simd_loops(source, tmp_path) == []
    want, _ = _jit_under("numpy", masked, x, m)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    vg = ft.grad(lambda x, m: fnp.sum(masked(x, m) * x))
    got, low = _jit_under("native", vg, x, m)
    want, _ = _jit_under("numpy", vg, x, m)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.skipif(not _is_gcc(), reason="-fopt-info-vec-optimized is GCC's")
def test_a_per_channel_scale_with_a_mask_vectorizes(native_backend, tmp_path):
    """A batch norm's backward over NCHW rows: a per-channel scale (1, C, 1, 1) broadcast
    into a row group with a select on a ReLU's mask. The scale is one value a row, loaded
    once a row: read inside the element loop, GCC left the pass with the select scalar
    under OpenMP. Every simd loop vectorizes, and the values are the NumPy backend's."""
    x, g = rand((4, 8, 16, 16), np.float32), rand((4, 8, 16, 16), np.float32, 1)
    s, m = rand((1, 8, 1, 1), np.float32, 2), rand((4, 8, 16, 16), np.float32, 3) > 0

    def f(x, g, s, m):
        y = fnp.where(m, g, 0.0) * s
        return fnp.sum(x * y, axis=(0, 2, 3)), y * s, x * s
    got, low = _jit_under("native", f, x, g, s, m)
    assert_native_rows(low)
    assert _unvectorized_simd_loops(low.native["source"], tmp_path) == []
    want, _ = _jit_under("numpy", f, x, g, s, m)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(not _is_gcc(), reason="-fopt-info-vec-optimized is GCC's")
@pytest.mark.parametrize("shape, block", [((4, 8, 16, 16), "256"), ((2, 3, 5, 40), "200"),
                                          ((3, 5, 7, 2), None), ((2, 4, 64, 128), "4096")])
def test_an_elementwise_group_loads_a_per_channel_scale_once_a_block(native_backend, tmp_path,
                                                                     shape, block):
    """An elementwise group (no reduction) with per-channel broadcasts over NCHW, a batch
    norm's forward x * a + b: the flat index runs in blocks of the H*W plane (the largest
    divisor of it up to kernels.BLOCK_MAX), each broadcast value loaded once a block, and
    every simd loop vectorizes; planes shorter than BLOCK_MIN keep the flat loop. Values
    are the NumPy backend's."""
    x = rand(shape, np.float32)
    a, b = rand((1, shape[1], 1, 1), np.float32, 1), rand((1, shape[1], 1, 1), np.float32, 2)

    def f(x, a, b):
        return fnp.maximum(x * a + b, 0.0) * a
    got, low = _jit_under("native", f, x, a, b)
    source = low.native["source"]
    if block is None:
        assert "i0 +=" not in source
    else:
        assert f"i0 += {block}LL" in source
        assert _unvectorized_simd_loops(source, tmp_path) == []
    want, _ = _jit_under("numpy", f, x, a, b)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.skipif(not _is_gcc(), reason="-fopt-info-vec-optimized is GCC's")
@pytest.mark.parametrize("shape, streams", [((4, 16, 256), True), ((3, 5, 64), False),
                                            ((2, 7, 96), True), ((5, 80), False),
                                            ((9, 32), False)])
def test_a_bias_along_the_last_axis_is_read_at_the_column(native_backend, tmp_path, shape,
                                                           streams):
    """An elementwise group adding a dense layer's bias (a vector along the last axis) runs
    in rows of that axis, the bias read at the inner loop's column j (a plain load; the
    flat loop's `i % cols` made GCC gather it lane by lane), with the transcendental
    groups' interleaved streams of rows too (exact GELU; row counts that do and do not
    divide into the streams); rows shorter than BLOCK_MIN keep the flat loop. Every simd
    loop vectorizes; the values are the NumPy backend's."""
    x, b = rand(shape, np.float32), rand(shape[-1:], np.float32, 1)

    def f(x, b):
        y = x + b
        if streams:
            return 0.5 * y * (1 + ft.lax.erf(y * np.float32(0.7071067811865476)))
        return fnp.maximum(y, 0.0) * b
    got, low = _jit_under("native", f, x, b)
    source = low.native["source"]
    if math.prod(shape) >= kernels.STREAMS_MIN_SIZE and streams:
        k = kernels.STREAMS - 1
        assert f"const long long i{k} = i + o{k};" in source
    if shape[-1] < kernels.BLOCK_MIN:
        assert "++j" not in source
    else:
        assert f"for (long long j = 0; j < {shape[-1]}LL; ++j)" in source
        assert f"% {shape[-1]}LL" not in source
    assert _unvectorized_simd_loops(source, tmp_path) == []
    want, _ = _jit_under("numpy", f, x, b)
    # erf within 1 ulp: near -1 its ulp, 6e-8, is an absolute error of 1 + erf, times y / 2
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-7)


@pytest.mark.skipif(not _is_gcc(), reason="-fopt-info-vec-optimized is GCC's")
@pytest.mark.parametrize("rows, hidden, gates", [(20, 256, True), (7, 64, True),
                                                 (3, 64, False), (9, 16, True)])
def test_column_blocks_of_a_product_are_read_in_place(native_backend, tmp_path, rows, hidden,
                                                      gates):
    """An LSTM step's gates: the group reads the column blocks [lo, lo + H) of one product's
    pre-activations at r * 4H + lo + j of the whole product, in its rows (in streams of
    rows when it has transcendentals and enough elements), instead of the program copying
    each block out C-contiguous first (no ascontiguousarray left). Every simd loop
    vectorizes; the values are the NumPy backend's, bit for bit without transcendentals;
    an operand that comes non-C-contiguous is copied by the call's retry."""
    H = hidden
    h, w, c = rand((rows, H), np.float32), rand((4 * H, H), np.float32, 1), \
        rand((rows, H), np.float32, 2)

    def split(g):
        return g[:, :H], g[:, H:2 * H], g[:, 2 * H:3 * H], g[:, 3 * H:]

    def step(g, c):
        i, f, z, o = split(g)
        if not gates:
            return (i * c + f * z - o,)
        c = ft.lax.logistic(f) * c + ft.lax.logistic(i) * fnp.tanh(z)
        return ft.lax.logistic(o) * fnp.tanh(c), c

    def cell(h, w, c):
        return step((h @ w.T) * np.float32(0.5), c)
    got, low = _jit_under("native", cell, h, w, c)
    source = low.native["source"]
    assert "read as column blocks" in low.source and "ascontiguousarray" not in low.source
    assert f"ft_r * {4 * H}LL + {2 * H}LL + j" in source
    if gates and H in kernels.STAGE_ROWS:                 # rows split at tanh
        assert "ftm::tanh_block(" in source and "ft_r1 =" not in source
    elif rows * H >= kernels.STREAMS_MIN_SIZE and gates:   # 4 blocks, c and 2 outputs
        k = 2 if 7 * kernels.STREAMS > kernels.MEMORY_STREAMS else kernels.STREAMS
        assert f"ft_r{k - 1} = r + o{k - 1}" in source and f"ft_r{k} =" not in source
    assert _unvectorized_simd_loops(source, tmp_path) == []
    want, _ = _jit_under("numpy", cell, h, w, c)
    for a, b in zip(got, want):
        if gates:
            np.testing.assert_allclose(a, b, rtol=2e-6, atol=1e-7)
        else:
            np.testing.assert_array_equal(a, b)
    g = rand((rows, 4 * H), np.float32, 3)
    fortran, _ = _jit_under("native", step, np.asfortranarray(g), c)
    for a, b in zip(fortran, _jit_under("numpy", step, g, c)[0]):
        np.testing.assert_allclose(a, b, rtol=2e-6, atol=1e-7)


@pytest.mark.parametrize("rows,hidden,gates", [(20, 64, False), (20, 64, True), (3, 5, True)])
def test_column_blocks_are_written_in_place_of_a_concatenation(native_backend, tmp_path, rows,
                                                               hidden, gates):
    """An LSTM step's backward: the gate gradients, each an output of one group, are
    concatenated into the (rows, 4H) array the next product reads; the group writes each
    into its block at r * 4H + lo + j and no concatenation runs (the program returns that
    array). Every simd loop vectorizes; the values are the NumPy backend's, bit for bit
    without transcendentals. A block read elsewhere too is still concatenated."""
    H = hidden
    s, c, d = (rand((rows, H), np.float32, k) for k in range(3))
    w = rand((4 * H, H), np.float32, 3)

    def back(s, c, d, w):
        i, f = s * (1.0 - s) * d, c * d + s
        z = (1.0 - fnp.tanh(c) ** 2) * d if gates else (c - d) * 0.5
        o = s * c * 2.0
        g = fnp.concatenate([i, f, z, o], axis=1)
        return g @ w, g
    got, low = _jit_under("native", back, s, c, d, w)
    assert "written as column blocks" in low.source and "concatenate" not in low.source
    assert f"ft_r * {4 * H}LL + {3 * H}LL + j" in low.native["source"]
    assert _unvectorized_simd_loops(low.native["source"], tmp_path) == []
    (prod, g), ((want_prod, want_g), _) = got, _jit_under("numpy", back, s, c, d, w)
    if gates:       # (1 - tanh^2 cancels: tanh's ulps are absolute errors of its size)
        np.testing.assert_allclose(g, want_g, rtol=2e-6, atol=1e-6)
    else:
        np.testing.assert_array_equal(g, want_g)
    # the product's sums of 4H terms (up to ~40 in size) round by the GEMM's order
    np.testing.assert_allclose(prod, want_prod, rtol=1e-5, atol=1e-4)

    def shared(s, c, d, w):
        i, f = s * (1.0 - s) * d, c * d + s
        return fnp.concatenate([i, f], axis=1) @ w[:2 * H], i
    got, low = _jit_under("native", shared, s, c, d, w)
    assert "written as column blocks" not in low.source
    for a, b in zip(got, _jit_under("numpy", shared, s, c, d, w)[0]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-4)
