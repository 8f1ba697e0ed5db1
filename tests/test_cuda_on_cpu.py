"""The CUDA kernels executed without a GPU: each generated kernel's unchanged source is
compiled by the host C++ compiler through functrans/backends/native/cuda_host.h (CUDA's
execution model on the CPU), run on NumPy arrays through ctypes and compared with NumPy:
every elementwise primitive for every dtype it supports, sample fusion groups (broadcasts,
literals, casts, integer semantics, float16) and the row groups (reductions fused into
one kernel). All kernels of the module are compiled as one translation unit."""
from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import tempfile

import numpy as np
import pytest

import functrans as ft
import functrans.numpy as fnp
from functrans import passes
from functrans.backends import cuda
from functrans.core import JaxprEqn, FunctransError, ShapedArray, Var
from functrans.primitives import REGISTRY
from functrans.primitives import elementwise as ew

from test_cuda_codegen import BINARY, DTYPES, _param_variants

HEADER_DIR = os.path.join(os.path.dirname(cuda.__file__), "native")
CXX = next((shutil.which(c) for c in (os.environ.get("CXX", ""), "c++", "g++", "clang++")
            if c and shutil.which(c)), None)
# -fwrapv: signed overflow wraps, as on the GPU and in NumPy (without it the host compiler
# may assume it never happens)
FLAGS = ("-std=c++17", "-O1", "-fwrapv", "-ffp-contract=off", "-fno-fast-math", "-fPIC",
         "-shared", "-pthread")
pytestmark = pytest.mark.skipif(CXX is None, reason="no host C++ compiler (c++, g++, clang++)")


# ---------------------------------------------------------------------------
# the harness: one translation unit, kernels launched through ctypes


class HostKernels:
    """Kernels compiled together for the host; `run` launches one on NumPy arrays."""

    def __init__(self, kernels):
        self.kernels = {k.name: k for k in kernels}
        bodies = [k.source.split(cuda.PRELUDE, 1)[-1].replace("#include <cuda_fp16.h>\n", "")
                  + f"FT_HOST_ENTRY({k.name})\n" for k in kernels]
        self.source = '#include "cuda_host.h"\n' + cuda.PRELUDE + "\n".join(bodies)
        self.dir = tempfile.mkdtemp(prefix="ft_cuda_host_")
        src, lib = os.path.join(self.dir, "k.cpp"), os.path.join(self.dir, "k.so")
        with open(src, "w") as f:
            f.write(self.source)
        r = subprocess.run([CXX, *FLAGS, "-I", HEADER_DIR, src, "-o", lib],
                           capture_output=True, text=True, timeout=900)
        assert r.returncode == 0, f"host compile failed:\n{r.stderr[:6000]}"
        self.lib = ctypes.CDLL(lib)

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
    """(label, eqn, inputs) for every elementwise primitive, dtype and param variant."""
    out = []
    for name, p in sorted(REGISTRY.items()):
        if not p.elementwise:
            continue
        for dt in DTYPES:
            nargs = 3 if name == "select" else 2 if name in BINARY else 1
            dts = ([np.bool_] if name == "select" else []) + [dt] * (nargs - (name == "select"))
            for params in _param_variants(name, dt):
                probe = [ShapedArray((1,), d) for d in dts]
                try:
                    p.abstract_eval(*probe, **params)
                except FunctransError:
                    continue
                xs = _inputs(name, probe, params)
                avals = [ShapedArray(x.shape, x.dtype) for x in xs]
                eqn = JaxprEqn(p, [Var(a) for a in avals], params,
                               [Var(p.abstract_eval(*avals, **params))])
                if not cuda.can_fuse(eqn):
                    continue
                label = f"{name}_{dt}" + "".join(f"_{k}{v}" for k, v in params.items()
                                                 if k != "weak_type").replace("-", "m")
                out.append((label, eqn, xs))
    return out


CASES = elementwise_cases()


@pytest.fixture(scope="module")
def host():
    """Every kernel of this module, compiled once."""
    kernels = [cuda.render_kernel(cuda.single_eqn_jaxpr(e), f"k_{label}")
               for label, e, _ in CASES]
    for name in sorted(GROUPS):
        kernels += [k for _, k in group_kernels(name)]
    return HostKernels(kernels)


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
    f, args = GROUPS[name]
    return ft.jit(f).lower(*args, backend="cuda")._build.__self__.fusedj


def group_kernels(name):
    """[(equation index, Kernel)] for the kernels of sample `name`'s CUDA program."""
    out = []
    for i, e in enumerate(_fused_program(name).jaxpr.eqns):
        if e.primitive is passes.fused_p:
            out.append((i, cuda.render_kernel(e.params["jaxpr"], f"g_{name}_{i}")))
        elif cuda.can_fuse(e):
            out.append((i, cuda.render_kernel(cuda.single_eqn_jaxpr(e), f"g_{name}_{i}")))
    return out

GROUP_ULPS = {"rows": 4, "float64": 4}          # groups with transcendentals


@pytest.mark.parametrize("name", sorted(GROUPS))
def test_fusion_group_kernels_match_numpy(host, name):
    """Each kernel of the program, run on the values its group reads, equals the group
    evaluated by NumPy (the impls)."""
    fusedj = _fused_program(name)
    kernels = dict(group_kernels(name))
    assert any(k.jaxpr.eqns[1:] for k in kernels.values()), name     # a real group
    env = {}
    for v, a in zip(fusedj.jaxpr.invars, ft.tree_leaves(GROUPS[name][1]), strict=True):
        env[v] = np.asarray(a, v.aval.dtype)
    for i, e in enumerate(fusedj.jaxpr.eqns):
        ins = [env[a] if type(a) is Var else np.asarray(a.val, a.aval.dtype) for a in e.invars]
        with np.errstate(all="ignore"):
            want = e.primitive.impl(np, *ins, **e.params)
        want = list(want) if e.primitive.multiple_results else [want]
        if i in kernels:
            k = kernels[i]
            got = host.run(k.name, *[env[a] for a in k.inputs], block=3)
            for g, w in zip(got, want, strict=True):
                assert_same(g, np.asarray(w), GROUP_ULPS.get(name, 0), k.name)
        for o, w in zip(e.outvars, want, strict=True):
            env[o] = np.asarray(w)
