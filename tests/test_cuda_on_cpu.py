"""The CUDA kernels executed without a GPU: each generated kernel's unchanged source is
compiled by the host C++ compiler through functrans/backends/native/cuda_host.h (CUDA's
execution model on the CPU), run on NumPy arrays through ctypes and compared with NumPy:
every elementwise primitive for every dtype it supports, sample fusion groups (broadcasts,
literals, casts, integer semantics, float16) and the row groups (reductions fused into
one kernel). All kernels of the module are compiled as one translation unit, by the
native backend's toolchain (functrans/backends/native/toolchain.py)."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

import functrans as ft
import functrans.numpy as fnp
from functrans import core, fusion, passes
from functrans.nn import functions as F
from functrans.backends import cuda
from functrans.backends.native import toolchain
from functrans.core import JaxprEqn, ShapedArray, Var
from functrans.primitives import REGISTRY
from functrans.primitives import elementwise as ew

from test_cuda_codegen import elementwise_eqns, needs_nvcc, nvcc_compile


def _no_compiler():
    try:
        toolchain.find_compiler()
    except toolchain.ToolchainError as e:
        return str(e)
    return None


pytestmark = pytest.mark.skipif(_no_compiler() is not None, reason=str(_no_compiler()))


# ---------------------------------------------------------------------------
# the harness: one translation unit, kernels launched through ctypes


class HostKernels:
    """Kernels compiled together for the host; `run` launches one on NumPy arrays."""

    def __init__(self, kernels, host_source=""):
        self.kernels = {k.name: k for k in kernels}
        bodies = [k.source.split(cuda.PRELUDE, 1)[-1].replace("#include <cuda_fp16.h>\n", "")
                  + f"FT_HOST_ENTRY({k.name})\n" for k in kernels]
        self.source = ('#include "cuda_host.h"\n' + cuda.PRELUDE + "\n".join(bodies)
                       + host_source)
        # the native backend's toolchain: its flags, its disk cache (a rerun compiles nothing)
        self.lib = toolchain.load(toolchain.build(self.source, "test_cuda_on_cpu"))

    def run(self, name, *arrays, block=1, grid=None):
        """Launch kernel `name` on these inputs; returns its outputs (new arrays)."""
        k = self.kernels[name]
        ins = [np.ascontiguousarray(np.asarray(a, v.aval.dtype)) for a, v in
               zip(arrays, k.inputs, strict=True)]
        outs = [np.empty(v.aval.shape, v.aval.dtype) for v in k.outputs]
        n = k.rows if k.rows is not None else k.size
        ptrs = [ctypes.c_void_p(a.ctypes.data) for a in ins + outs] + [ctypes.c_longlong(n)]
        args = (ctypes.c_void_p * len(ptrs))(*[ctypes.addressof(p) for p in ptrs])
        if grid is None:
            grid = max(1, min(n, 7))        # fewer blocks than work: the stride loops run
        getattr(self.lib, f"ft_run_{name}")(ctypes.c_uint(grid), ctypes.c_uint(block), args)
        return outs


# ---------------------------------------------------------------------------
# comparisons: NaN where NumPy has NaN, signed zeros, ulps for the transcendentals

EXACT = {"neg", "abs", "sign", "floor", "ceil", "round", "add", "sub", "mul", "div", "max",
         "min", "rem", "sqrt", "eq", "ne", "lt", "le", "gt", "ge", "select",
         "convert_element_type", "is_finite", "not", "and", "or", "xor", "shift_left",
         "shift_right_logical", "stop_gradient", "reduce_precision", "copy"}


def assert_same(got, want, ulps=0, label="", zeros=True):
    """Integers and bools equal; floats: same NaNs, infinities and (with `zeros`) signs of
    zero, and within `ulps` units in the last place elsewhere."""
    want = np.asarray(want)
    assert got.dtype == want.dtype, (label, got.dtype, want.dtype)
    if want.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want, err_msg=label)
        return
    gn, wn = np.isnan(got), np.isnan(want)
    np.testing.assert_array_equal(gn, wn, err_msg=f"{label}: NaN positions")
    g, w = got[~wn].astype(np.float64), want[~wn].astype(np.float64)
    zero = (g == 0) & (w == 0)
    if ulps == 0 and zeros:
        np.testing.assert_array_equal(np.signbit(g[zero]), np.signbit(w[zero]),
                                      err_msg=f"{label}: signed zeros")
    info = np.finfo(want.dtype)
    with np.errstate(all="ignore"):
        tol = ulps * (np.spacing(np.abs(w).astype(want.dtype)).astype(np.float64)
                      + float(info.smallest_normal))
        bad = ~((g == w) | (np.abs(g - w) <= tol))
    assert not bad.any(), (f"{label}: got {got[~wn][bad][:8]} want {want[~wn][bad][:8]} "
                           f"(inputs at {np.flatnonzero(~wn)[bad][:8]})")


# ---------------------------------------------------------------------------
# every elementwise primitive, every dtype, on special values


def special_values(dt):
    dt = np.dtype(dt)
    if dt.kind == "b":
        return np.array([False, True])
    if dt.kind in "iu":
        info = np.iinfo(dt)
        vals = [0, 1, 2, 3, 5, 7, 8, 31, 63, 64, 100, info.max, info.max - 1, -1, -2, -3, -7,
                -8, -100, info.min, info.min + 1]
        return np.array([v for v in vals if info.min <= v <= info.max], np.int64).astype(dt)
    info = np.finfo(dt)
    vals = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 3.0, -3.0, 0.1, -0.7,
            1e-3, 7.25, 20.0, -20.0, 100.0, -100.0, np.inf, -np.inf, np.nan,
            float(info.smallest_normal), float(info.max), -float(info.max), 1e-40]
    with np.errstate(over="ignore"):
        return np.array(vals).astype(dt)


def _inputs(name, avals, params):
    """Arrays for an equation's operands: the special values (pairs for binary ones)."""
    xs = [special_values(a.dtype) for a in avals]
    if len(xs) == 1:
        x = xs[0]
        if name == "convert_element_type":
            x = _in_range(x, params["new_dtype"])
        return [x]
    if name == "select":
        t, f = np.meshgrid(xs[1], xs[2][::-1], indexing="ij")
        p = (np.arange(t.size) * 7 % 3 == 0)
        return [p, t.ravel(), f.ravel()]
    a, b = np.meshgrid(xs[0], xs[1], indexing="ij")
    a, b = a.ravel(), b.ravel()
    if name == "pow" and a.dtype.kind in "iu":
        b = (np.abs(b.astype(np.int64)) % 9).astype(b.dtype)   # NumPy rejects negative powers
    return [a, b]


def _in_range(x, dtype):
    """Float values a float -> integer cast defines (elsewhere C, CUDA and NumPy differ)."""
    dt = np.dtype(dtype)
    if x.dtype.kind != "f" or dt.kind not in "iu":
        return x
    info = np.iinfo(dt)
    with np.errstate(all="ignore"):
        ok = np.isfinite(x) & (x > float(info.min) - 1) & (x < min(float(info.max), 2.0 ** 62))
    if dt.kind == "u":
        ok &= x > -1
    return x[ok]


def elementwise_cases():
    """(label, eqn, inputs) for every elementwise primitive, dtype and param variant that
    the CUDA backend fuses (test_cuda_codegen's equations, on the special values)."""
    out = []
    for label, e in elementwise_eqns():
        xs = _inputs(e.primitive.name, [v.aval for v in e.invars], e.params)
        avals = [ShapedArray(x.shape, x.dtype) for x in xs]
        eqn = JaxprEqn(e.primitive, [Var(a) for a in avals], e.params,
                       [Var(e.primitive.abstract_eval(*avals, **e.params))])
        if cuda.can_fuse(eqn):
            out.append((label.replace("-", "m"), eqn, xs))
    return out


CASES = elementwise_cases()


@pytest.fixture(scope="module")
def host():
    """Every kernel of this module, compiled once."""
    kernels = [cuda.render_kernel(cuda.single_eqn_jaxpr(e), f"k_{label}")
               for label, e, _ in CASES]
    for name in sorted(GROUPS):                 # traced with x64 off, as their test runs
        kernels += [k for _, k in group_kernels(name)]
    host_loops = ["#undef __shared__\n#define __shared__\n"]     # the host form's stack arrays
    with ft.enable_x64(True):                   # the rows' tests run with x64 (float64 rows)
        for name in sorted(ROWS):
            kernels += [k for _, k in group_kernels(name)]
        for name in HOST_LOOPS:
            for _, k in group_kernels(name):
                host_loops.append(host_row_function(k, f"host_{k.name}"))
    return HostKernels(kernels, "\n".join(host_loops))


def test_every_fusible_elementwise_primitive_and_dtype_is_covered():
    covered = {e.primitive.name for _, e, _ in CASES}
    fusible = {n for n, p in REGISTRY.items() if p.elementwise and p.cuda is not None}
    assert fusible - {"real", "imag", "conj", "complex"} <= covered
    assert len(CASES) > 300


@pytest.mark.parametrize("label", [c[0] for c in CASES])
def test_elementwise_kernel_matches_numpy(host, label):
    _, e, xs = next(c for c in CASES if c[0] == label)
    got, = host.run(f"k_{label}", *xs, block=1 if hash(label) % 2 else 4)
    assert_matches_numpy(got, e, xs, label)


def assert_matches_numpy(got, e, xs, label):
    """A kernel's values of equation e on xs against its NumPy impl: exact, except the
    transcendentals (4 ulp; float16 1)."""
    name = e.primitive.name
    with np.errstate(all="ignore"):
        if name == "logistic":      # the impl's 0.5 tanh(x/2) + 0.5 has no relative accuracy
            want = 1 / (1 + np.exp(-xs[0].astype(np.longdouble)))      # for x << 0
        else:
            want = e.primitive.impl(np, *xs, **e.params)
        want = np.asarray(want).astype(e.outvars[0].aval.dtype)
    exact = name in EXACT or (name == "integer_pow" and e.params["y"] in (0, 1, 2)) \
        or want.dtype.kind != "f"
    ulps = 0 if exact else (1 if want.dtype == np.float16 else 4)
    if name == "lgamma":        # the impl is CPython's math.lgamma: ~80 ulps off near -2.5
        ulps = 128
    # the sign of max(+0, -0) is unspecified (IEEE 754); NumPy's own loops differ by dtype
    assert_same(got, want, ulps, label, zeros=name not in ("max", "min"))


# ---------------------------------------------------------------------------
# sample fusion groups


def rand(*shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).uniform(-2, 2, shape).astype(dtype)


GROUPS = {
    "rows": (lambda x, b: fnp.tanh(x * 2.0 + b), (rand(5, 4, 3), rand(3))),
    "cols": (lambda x, b: x - b[:, None, None] * x, (rand(5, 4, 3), rand(5))),
    "middle": (lambda x, b: x * b[None, :, None] + 1.0, (rand(5, 4, 3), rand(4))),
    "outer": (lambda a, b: a[:, None] * 3.0 - b[None, :], (rand(6), rand(7))),
    "literals": (lambda x: fnp.where(fnp.isfinite(x), x, np.inf) + (-0.0) * x
                 - fnp.minimum(x, np.nan) + fnp.maximum(x, -np.inf),
                 (np.array([1.0, -0.0, np.inf, -np.inf, np.nan, 0.0], np.float32),)),
    "casts": (lambda x, n: (x * n.astype(np.float32)).astype(np.int32) + (x > 0.5)
              - n.astype(np.uint8).astype(np.int32), (rand(40) * 50, np.arange(-20, 20))),
    "float16": (lambda x: fnp.sqrt(fnp.abs(x)) * x + 0.1, (rand(30, dtype=np.float16),)),
    "f64_to_f16": (lambda x: (x * 2.0).astype(np.float16),
                   (0.5 * np.array([1 + 2.0 ** -11 + 2.0 ** -40, 1 + 2.0 ** -11, 65519.0,
                                    65520.0, -2.0 ** -25, 5.9604644775390625e-08 * 1.5]),)),
    "float64": (lambda x: fnp.log1p(fnp.abs(x)) * x ** 5, (rand(30, dtype=np.float64),)),
    "int_division": (lambda i, j: (i // (j - 3)) * 2 + ew.div(i, j) + ew.rem(i, j - 1),
                     (np.array([7, -7, 0, 5, -2 ** 31, 2 ** 31 - 1, -9, 9], np.int32),
                      np.array([2, 2, 0, -1, -1, 0, 3, -3], np.int32))),
    "shifts": (lambda i, j: ew.shift_left(i, j) + ew.shift_right_logical(i, j) * 3,
               (np.array([1, -1, 5, -8, 2 ** 40, 7, -2 ** 63, 3], np.int64),
                np.array([0, 1, 63, 64, 70, -1, 1, 2], np.int64))),
    "wrap": (lambda i: (i + i) * 3 - i, (np.array([2 ** 62, -2 ** 63, 5, -1], np.int64),)),
}


def _fused_program(name):
    f, args = GROUPS[name] if name in GROUPS else ROWS[name][:2]
    return ft.jit(f).lower(*args, backend="cuda")._build.__self__.fusedj


def kernel_runs(host, name, args, block):
    """[(kernel, its outputs, NumPy's)]: the program of sample `name` evaluated by the impls,
    each of its kernels run on the host on the values its group reads."""
    fusedj = _fused_program(name)
    kernels = dict(group_kernels(name))
    env, runs = {}, []
    for v, a in zip(fusedj.jaxpr.invars, ft.tree_leaves(args), strict=True):
        env[v] = np.asarray(a, v.aval.dtype)
    for i, e in enumerate(fusedj.jaxpr.eqns):
        ins = [env[a] if type(a) is Var else np.asarray(a.val, a.aval.dtype) for a in e.invars]
        with np.errstate(all="ignore"):
            want = e.primitive.impl(np, *ins, **e.params)
        want = [np.asarray(w) for w in (want if e.primitive.multiple_results else [want])]
        if i in kernels:
            k = kernels[i]
            runs.append((k, host.run(k.name, *[env[a] for a in k.inputs], block=block), want))
        env.update(zip(e.outvars, want, strict=True))
    return runs


def group_kernels(name):
    """[(equation index, Kernel)] for the kernels of sample `name`'s CUDA program."""
    out = []
    for i, e in enumerate(_fused_program(name).jaxpr.eqns):
        if e.primitive is fusion.fused_p:
            out.append((i, cuda.render_group_kernel(e.params["jaxpr"], f"g_{name}_{i}")))
        elif cuda.can_fuse(e):
            out.append((i, cuda.render_kernel(cuda.single_eqn_jaxpr(e), f"g_{name}_{i}")))
    return out

GROUP_ULPS = {"rows": 4, "float64": 4}          # groups with transcendentals


@pytest.mark.parametrize("name", sorted(GROUPS))
def test_fusion_group_kernels_match_numpy(host, name):
    """Each kernel of the program, run on the values its group reads, equals the group
    evaluated by NumPy (the impls)."""
    runs = kernel_runs(host, name, GROUPS[name][1], block=3)
    assert any(k.jaxpr.eqns[1:] for k, _, _ in runs), name     # a real group
    for k, got, want in runs:
        for g, w in zip(got, want, strict=True):
            assert_same(g, w, GROUP_ULPS.get(name, 0), k.name)


# ---------------------------------------------------------------------------
# row groups: reductions over trailing axes fused with the work around them


def _layernorm(x, g, b):
    mu = fnp.mean(x, axis=-1, keepdims=True)
    var = fnp.mean((x - mu) ** 2, axis=-1, keepdims=True)
    return (x - mu) / fnp.sqrt(var + 1e-5) * g + b


def _softmax_loss(x, w):
    return fnp.sum(F.softmax(x) * w)


def _layernorm_loss(x, g, b):
    return fnp.sum(_layernorm(x, g, b) ** 2)


W16 = rand(16, seed=3)
SPECIAL_ROWS = np.array([[1.0, np.nan, 2.0, 3.0], [-np.inf, -np.inf, -np.inf, -np.inf],
                         [np.inf, 1.0, 2.0, 0.0], [-0.0, 0.0, -0.0, 5.0],
                         [1e30, 1e30, -1e30, 2.0]], np.float32)
ROWS = {   # name: (function, arguments, relative tolerance)
    "softmax": (F.softmax, (rand(9, 16),), 1e-6),
    "log_softmax": (F.log_softmax, (rand(9, 16),), 1e-6),
    "logsumexp": (lambda x: fnp.logsumexp(x, axis=-1), (rand(9, 16),), 1e-6),
    "layernorm": (_layernorm, (rand(9, 16), rand(16, seed=1), rand(16, seed=2)), 1e-5),
    "mean_var": (lambda x: (fnp.mean(x, axis=-1), fnp.var(x, axis=-1)), (rand(7, 33),), 1e-5),
    "expand_dims": (lambda x: x / fnp.expand_dims(fnp.sum(x * x, axis=-1), -1),
                    (rand(5, 8),), 1e-6),
    "two_axes": (lambda x: x - fnp.mean(x, axis=(-2, -1), keepdims=True),
                 (rand(3, 4, 5),), 1e-5),
    "softmax_grad": (ft.value_and_grad(_softmax_loss), (rand(9, 16), W16), 1e-5),
    "layernorm_grad": (ft.value_and_grad(_layernorm_loss, argnums=(0, 1, 2)),
                       (rand(9, 16), rand(16, seed=1), rand(16, seed=2)), 1e-4),
    "square_rows": (lambda x, c: fnp.max(x, axis=-1, keepdims=True) * c[None, :] + x,
                    (rand(6, 6), rand(6, seed=1)), 1e-6),
    "special_rows": (lambda x: (fnp.max(x, axis=-1), fnp.logsumexp(x, axis=-1),
                                fnp.sum(x, axis=-1), fnp.min(x, axis=-1)), (SPECIAL_ROWS,), 1e-6),
    "softmax_f16": (F.softmax, (rand(5, 40, dtype=np.float16),), 2e-3),
    "layernorm_f64": (_layernorm, (rand(4, 100, dtype=np.float64), rand(100, dtype=np.float64),
                             rand(100, dtype=np.float64)), 1e-12),
    "int_rows": (lambda i: fnp.sum(i * 3, axis=-1) - fnp.max(i, axis=-1),
                 (np.arange(-30, 30, dtype=np.int32).reshape(5, 12) * 100_000_000,), 0),
}


def test_row_groups_fuse_the_reductions():
    """Each sample's rows become kernels; softmax and layernorm, forward and backward, are
    each one kernel (the final sum over all rows of the loss stays outside)."""
    for name in ROWS:
        kernels = [k for _, k in group_kernels(name)]
        assert any(k.rows is not None for k in kernels), name
    for name in ("softmax", "log_softmax", "layernorm", "softmax_grad", "layernorm_grad"):
        fusedj = _fused_program(name).jaxpr
        assert sum(e.primitive is fusion.fused_p for e in fusedj.eqns) == 1, name
        assert not any(e.primitive in fusion.ROW_REDUCTIONS and fusion.row_space(e)
                       for e in fusedj.eqns), name         # over rows (axis 0): outside


@pytest.mark.parametrize("name", sorted(ROWS))
def test_row_group_values_on_numpy(name):
    """The grouping keeps the program's values (groups evaluated by NumPy)."""
    f, args, rtol = ROWS[name]
    closed = ft.make_jaxpr(f)(*args)
    fused = fusion.fuse(passes.optimize(closed), can_fuse=cuda.can_fuse_rows, rows=True)
    core.check_jaxpr(fused.jaxpr)
    leaves = ft.tree_leaves(args)
    with np.errstate(all="ignore"):
        want = core.eval_jaxpr(closed.jaxpr, closed.consts, *leaves)
        got = core.eval_jaxpr(fused.jaxpr, fused.consts, *leaves)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=max(rtol, 1e-6), atol=1e-6)


@pytest.mark.usefixtures("x64")     # float64 rows stay float64 (host traced them with x64)
@pytest.mark.parametrize("block", [1, 3, 8])
@pytest.mark.parametrize("name", sorted(ROWS))
def test_row_kernels_match_numpy(host, name, block):
    """Each kernel of the program (a block per row; 1, 3 and 8 threads a block, the last two
    one host thread per CUDA thread with __syncthreads a barrier) equals its group
    evaluated by NumPy."""
    rtol = ROWS[name][2]
    for k, got, want in kernel_runs(host, name, ROWS[name][1], block):
        for g, w in zip(got, want, strict=True):
            assert g.dtype == w.dtype, k.name
            np.testing.assert_array_equal(np.isnan(g), np.isnan(w), err_msg=k.name)
            if rtol == 0:
                np.testing.assert_array_equal(g, w, err_msg=k.name)
            else:
                np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64),
                                           rtol=rtol, atol=rtol, err_msg=k.name)


def test_row_kernels_are_deterministic(host):
    """The same block size gives the same bits, run after run (a fixed reduction tree)."""
    x = rand(9, 16, seed=5)
    (_, k), = group_kernels("softmax")
    first = host.run(k.name, x, block=8)[0]
    for _ in range(3):
        np.testing.assert_array_equal(host.run(k.name, x, block=8)[0], first)


@needs_nvcc
def test_row_kernels_compile_with_nvcc():
    sources = {k.name: k.source for name in sorted(ROWS) for _, k in group_kernels(name)}
    failures = nvcc_compile(sources)
    assert not failures, "\n".join(f"{n}:\n{e[:2000]}" for n, e in failures.items())


# ---------------------------------------------------------------------------
# the row body as a host loop (the CPU backend's form of a row group)

HOST_LOOPS = ("softmax_grad", "layernorm_grad", "special_rows")


def host_row_function(kernel, name):
    """A row kernel's body as a C function: one iteration per row, OpenMP over rows, one
    thread a row (tid = 0, nthr = 1); __shared__ arrays are then per-iteration locals."""
    b = cuda.row_body(kernel.jaxpr)
    return "\n".join([f'extern "C" void {name}({", ".join(b.params)}) {{']
                     + ["  " + h for h in b.hoisted]
                     + ["  const unsigned tid = 0, nthr = 1;", "  #pragma omp parallel for",
                        "  for (long long r = 0; r < rows; ++r) {"]
                     + ["    " + x for x in b.lines] + ["  }", "}", ""])


@pytest.mark.parametrize("name", HOST_LOOPS)
def test_row_body_runs_as_a_host_loop(host, name):
    """The same body, wrapped as a host loop over rows, equals the kernel run with one
    thread a block (the same order of operations: the same bits)."""
    for _, k in group_kernels(name):
        if k.rows is None:
            continue
        ins = [np.ascontiguousarray(rand(*v.aval.shape, seed=7).astype(v.aval.dtype))
               for v in k.inputs]
        want = host.run(k.name, *ins, block=1)
        outs = [np.empty(v.aval.shape, v.aval.dtype) for v in k.outputs]
        fn = getattr(host.lib, f"host_{k.name}")
        fn(*[ctypes.c_void_p(a.ctypes.data) for a in ins + outs], ctypes.c_longlong(k.rows))
        for g, w in zip(outs, want, strict=True):
            np.testing.assert_array_equal(g, w)
