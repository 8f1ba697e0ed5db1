"""The CUDA backend without a GPU: every elementwise primitive's kernel and sample fusion
groups compile with nvcc, broadcast index arithmetic is right (checked on NumPy from the
same terms the C code is rendered from), literals are exact, and asking for "cuda"
without CuPy or a GPU names what is missing."""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

import numpy as np
import pytest

import functrans as ft
import functrans.numpy as fnp
from functrans import core, fusion, passes
from functrans.backends import cuda
from functrans.core import JaxprEqn, ShapedArray, Var
from functrans.core.devices import DeviceError, cuda_available
from functrans.primitives import REGISTRY
from functrans.primitives import elementwise as ew

from conftest import assert_close

pytestmark = pytest.mark.usefixtures("x64")  # int64/float64 samples: conftest.x64

NVCC = shutil.which("nvcc") or ("/usr/local/bin/nvcc" if os.path.exists("/usr/local/bin/nvcc")
                                else None)
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc not found (CUDA toolkit absent): "
                                "the generated kernels cannot be compiled here")

DTYPES = ["float32", "float64", "float16", "int8", "int32", "int64", "uint8", "uint32", "bool",
          "complex64"]     # complex: not fused (can_fuse), but real/imag/conj accept only it
BINARY = {"add", "sub", "mul", "div", "pow", "max", "min", "atan2", "logaddexp", "rem", "eq",
          "ne", "lt", "le", "gt", "ge", "and", "or", "xor", "shift_right_logical", "shift_left",
          "complex"}


def _param_variants(name, dt):
    if name == "integer_pow":
        ys = [0, 1, 2, 3, 4, 5, 7] + ([-1, -3] if np.dtype(dt).kind == "f" else [])
        return [{"y": y} for y in ys]
    if name == "round":
        return [{"rounding_method": 0}, {"rounding_method": 1}]
    if name == "convert_element_type":
        return [{"new_dtype": np.dtype(t), "weak_type": False} for t in DTYPES if t != dt]
    return [{}]


def elementwise_eqns():
    """(label, eqn) for every elementwise primitive, dtype and param variant it accepts."""
    out = []
    for name, p in sorted(REGISTRY.items()):
        if not p.elementwise:
            continue
        for dt in DTYPES:
            nargs = 3 if name == "select" else 2 if name in BINARY else 1
            avals = [ShapedArray((4, 3), dt)] * nargs
            if name == "select":
                avals = [ShapedArray((4, 3), np.bool_)] + [ShapedArray((4, 3), dt)] * 2
            for params in _param_variants(name, dt):
                try:
                    out_aval = p.abstract_eval(*avals, **params)
                except core.FunctransError:
                    continue
                eqn = JaxprEqn(p, [Var(a) for a in avals], params, [Var(out_aval)])
                label = f"{name}_{dt}" + "".join(f"_{k}{v}" for k, v in params.items()
                                                 if k != "weak_type")
                out.append((label, eqn))
    return out


def nvcc_compile(sources: dict):
    """Compile kernels (name -> source) as one translation unit; on failure compile each
    alone and return {name: error} for the ones that fail."""
    def run(src):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "k.cu")
            with open(path, "w") as f:
                f.write(src)
            r = subprocess.run([NVCC, "-c", "-o", os.devnull, *cuda.NVCC_OPTIONS, path],
                               capture_output=True, text=True, timeout=600)
            return r.returncode, r.stderr
    bodies = [s.split(cuda.PRELUDE, 1)[-1].replace("#include <cuda_fp16.h>\n", "")
              for s in sources.values()]
    rc, err = run(cuda.PRELUDE + "#include <cuda_fp16.h>\n" + "\n".join(bodies))
    if rc == 0:
        return {}
    return {name: e for name, src in sources.items() for rc1, e in [run(src)] if rc1 != 0} \
        or {"<all>": err}


def test_every_elementwise_primitive_has_a_template_that_renders():
    eqns = elementwise_eqns()
    names = {e.primitive.name for _, e in eqns}
    assert names == {n for n, p in REGISTRY.items() if p.elementwise}
    for label, e in eqns:
        if not cuda.can_fuse(e):
            continue
        k = cuda.render_kernel(cuda.single_eqn_jaxpr(e), f"k_{label}")
        assert f"__global__ void {k.name}(" in k.source and k.name.isidentifier()
        assert "{0}" not in k.source and "{1}" not in k.source


@needs_nvcc
@pytest.mark.slow   # (~8 s; test_sample_fusion_groups_compile_with_nvcc stays)
def test_every_elementwise_kernel_compiles_with_nvcc():
    sources = {}
    for label, e in elementwise_eqns():
        if e.outvars[0].aval.dtype.kind == "c" or not cuda.can_fuse(e):
            continue
        k = cuda.render_kernel(cuda.single_eqn_jaxpr(e), f"k_{label}")
        sources[k.name] = k.source
    assert len(sources) > 200
    failures = nvcc_compile(sources)
    assert not failures, "kernels that do not compile:\n" + "\n".join(
        f"{n}:\n{e[:2000]}" for n, e in failures.items())


# ---------------------------------------------------------------------------
# sample fusion groups


def rand(*shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(dtype)


def _mlp_step(W, b, x):
    def loss(W, b):
        h = fnp.maximum(x @ W + b, 0.0)
        return fnp.mean(fnp.tanh(h) ** 2)
    l, (gW, gb) = ft.value_and_grad(loss, argnums=(0, 1))(W, b)
    return l, W - 0.1 * gW, b - 0.1 * gb


SAMPLES = {
    "chain": (lambda x, y: fnp.exp(fnp.sin(x) * y + 1.0) - fnp.cos(y) * 0.5,
              (rand(50, 7), rand(50, 7, seed=1))),
    "rows": (lambda x, b: fnp.tanh(x * 2.0 + b), (rand(5, 4, 3), rand(3))),
    "cols": (lambda x, b: x - b[:, None, None] * x, (rand(5, 4, 3), rand(5))),
    "middle": (lambda x, b: x * b[None, :, None] + 1.0, (rand(5, 4, 3), rand(4))),
    "mixed": (lambda x, n: fnp.where(x > 0.2, x * n.astype(np.float32), -x) + (x < 0),
              (rand(40), np.arange(40, dtype=np.int32))),
    "specials": (lambda x: fnp.where(fnp.isfinite(x), x, np.inf) + (-0.0) * x
                 - fnp.minimum(x, np.nan), (rand(8),)),
    "float16": (lambda x: fnp.sqrt(fnp.abs(x)) * x + 0.1, (rand(30, dtype=np.float16),)),
    "float64": (lambda x: fnp.log1p(fnp.abs(x)) * x ** 5, (rand(30, dtype=np.float64),)),
    "ints": (lambda i, j: (i * 3 + j) // 2 - ew.shift_left(i, np.int64(2))
             + ew.shift_right_logical(j, np.int64(1)), (
        np.arange(-10, 10, dtype=np.int64), np.arange(20, dtype=np.int64))),
    "mlp_step": (_mlp_step, (rand(6, 5), rand(5, seed=1), rand(4, 6, seed=2))),
}


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_cuda_fusion_grouping_preserves_values_on_numpy(name):
    """The groups the CUDA backend forms, evaluated on NumPy, equal the unfused program."""
    f, args = SAMPLES[name]
    closed = ft.make_jaxpr(f)(*args)
    opt = passes.optimize(closed)
    fused = fusion.fuse(opt, can_fuse=cuda.can_fuse)
    core.check_jaxpr(fused.jaxpr)
    want = core.eval_jaxpr(closed.jaxpr, closed.consts, *ft.tree_leaves(args))
    got = core.eval_jaxpr(fused.jaxpr, fused.consts, *ft.tree_leaves(args))
    for g, w in zip(got, want, strict=True):
        assert_close(g, w, rtol=2e-3 if name == "float16" else 1e-6, atol=1e-6)


@needs_nvcc
def test_sample_fusion_groups_compile_with_nvcc():
    sources = {}
    for name, (f, args) in sorted(SAMPLES.items()):
        low = ft.jit(f).lower(*args, backend="cuda")
        assert low.kernels, name
        for kname, src in low.kernels.items():
            sources[f"{name}_{kname}"] = src.replace(f"void {kname}(", f"void {name}_{kname}(")
    failures = nvcc_compile(sources)
    assert not failures, "\n".join(f"{n}:\n{e[:2000]}" for n, e in failures.items())


def test_kernel_names_are_readable_and_cached_by_structure():
    f = ft.jit(lambda x, y: fnp.sin(x * y) + y)
    low = f.lower(rand(8), rand(8), backend="cuda")
    assert list(low.kernels) == ["fused_mul_sin_add"]
    again = ft.jit(lambda x, y: fnp.sin(x * y) + y).lower(rand(8), rand(8), backend="cuda")
    assert again.kernels == low.kernels         # same structure and dtypes: same source
    other = ft.jit(lambda x, y: fnp.sin(x * y) + y).lower(rand(8, dtype=np.float64),
                                                         rand(8, dtype=np.float64),
                                                         backend="cuda")
    assert other.kernels["fused_mul_sin_add"] != low.kernels["fused_mul_sin_add"]
    assert "double" in other.kernels["fused_mul_sin_add"]


def test_reductions_and_contractions_go_to_cupy():
    f = ft.jit(lambda x, W: fnp.sum(fnp.tanh(x @ W), axis=0))
    low = f.lower(rand(4, 3), rand(3, 5), backend="cuda")
    assert "_p_dot_general" in low.source and "_p_reduce_sum" in low.source
    assert list(low.kernels) == ["ew_tanh"]


# ---------------------------------------------------------------------------
# index arithmetic and literals


@pytest.mark.parametrize("out_shape, in_shape, dims", [
    ((5, 4, 3), (3,), (2,)), ((5, 4, 3), (5,), (0,)), ((5, 4, 3), (4,), (1,)),
    ((5, 4, 3), (5, 3), (0, 2)), ((5, 4, 3), (1, 4, 1), (0, 1, 2)), ((7,), (1,), (0,)),
    ((2, 1, 6), (2, 6), (0, 2)), ((3, 4), (), ()),
])
def test_broadcast_index_arithmetic(out_shape, in_shape, dims):
    x = np.arange(int(np.prod(in_shape)) or 1).reshape(in_shape)
    exp = cuda.expanded_shape(in_shape, dims, len(out_shape))
    terms = cuda.bcast_index_terms(out_shape, exp)
    i = np.arange(int(np.prod(out_shape)), dtype=np.int64)
    got = x.ravel()[cuda.bcast_index_numpy(terms, i)]
    want = np.broadcast_to(x.reshape(exp), out_shape).ravel()
    np.testing.assert_array_equal(got, want)
    c = cuda.bcast_index_c(terms)
    assert "i" in c or c == "0"


@pytest.mark.parametrize("value, dtype", [
    (0.1, np.float32), (1 / 3, np.float64), (np.inf, np.float32), (-np.inf, np.float64),
    (np.nan, np.float32), (-0.0, np.float32), (3.0e38, np.float32), (1e-45, np.float32),
    (65504.0, np.float16), (2 ** 31 - 1, np.int32), (-2 ** 31, np.int32),
    (-2 ** 63, np.int64), (2 ** 64 - 1, np.uint64), (200, np.uint8), (-3, np.int8),
])
def test_literals_are_exact(value, dtype):
    text = cuda.literal_c(value, dtype)
    want = np.asarray(value).astype(dtype)
    if "__int_as_float" in text or "__longlong_as_double" in text:
        bits = int(text.split("0x")[1].rstrip("L)"), 16)
        view = np.float32 if "__int_as_float" in text else np.float64
        got = np.asarray(bits, np.uint32 if view is np.float32 else np.uint64).view(view)
        assert (np.isnan(got) and np.isnan(want)) or got == want
    elif np.dtype(dtype).kind == "f":
        got = np.asarray(float(text.rstrip("f")), np.float32 if text.endswith("f") else
                         np.float64).astype(dtype)
        assert got == want and np.signbit(got) == np.signbit(want)
    else:
        assert str(int(want)) in text.replace("(-9223372036854775807LL - 1)",
                                              str(-2 ** 63)).replace(
            "(-2147483647 - 1)", str(-2 ** 31))


def test_no_fast_math():
    assert "-fmad=false" in cuda.NVCC_OPTIONS and "--fmad=false" in cuda.NVRTC_OPTIONS
    assert not any("fast" in o for o in cuda.NVCC_OPTIONS + cuda.NVRTC_OPTIONS)


# ---------------------------------------------------------------------------
# devices without CuPy or a GPU

needs_no_cuda = pytest.mark.skipif(cuda_available(), reason="a CUDA device is present")


@pytest.mark.usefixtures("x32")
def test_devices_lists_the_cpu():
    ds = ft.devices()
    assert str(ds[0]) == "cpu:0"
    assert ft.devices("cpu") == [ds[0]]
    x = np.ones(3, np.float32)
    assert type(ft.device_put(x, "cpu")) is ft.Array              # as jax.device_put
    assert np.asarray(ft.device_put(x, "cpu")) is x                # around x, no copy
    assert ft.device_put(2.0).dtype == np.float32          # Python scalars: default dtypes


@needs_no_cuda
def test_cuda_request_names_what_is_missing():
    with pytest.raises(DeviceError, match="CuPy|CUDA|GPU|device"):
        ft.device_put(np.ones(3), "cuda")
    with pytest.raises(DeviceError, match="functrans\\[cuda\\]|no device|driver"):
        ft.devices("cuda")
    low = ft.jit(lambda x: x * 2.0).lower(np.ones(3, np.float32), backend="cuda")
    with pytest.raises(DeviceError):
        low.compile()
    with pytest.raises(ValueError, match="unknown device"):
        ft.device_put(np.ones(3), "tpu")


def test_cupy_array_module_converts_numpy_operands():
    """What implementations receive as xp on "cuda": NumPy literals become scalars and
    NumPy arrays are copied to the device (checked with a stand-in for CuPy)."""
    from functrans.core.arrays import _CupyModule

    class FakeDeviceArray:
        def __init__(self, a):
            self.a = np.asarray(a)

    class FakeCupy:
        float32 = np.float32

        @staticmethod
        def asarray(x, dtype=None):
            assert type(x) is not FakeDeviceArray
            return FakeDeviceArray(np.asarray(x, dtype))

        @staticmethod
        def add(x, y):
            for v in (x, y):
                if type(v) is np.ndarray:
                    raise TypeError("Unsupported type <class 'numpy.ndarray'>")
            return FakeDeviceArray(np.add(getattr(x, "a", x), getattr(y, "a", y)))

        @staticmethod
        def concatenate(xs, axis=0):
            assert all(type(v) is FakeDeviceArray for v in xs)
            return FakeDeviceArray(np.concatenate([v.a for v in xs], axis))

    xp = _CupyModule(FakeCupy())
    dev = FakeDeviceArray(np.ones(3, np.float32))
    out = xp.add(dev, np.asarray(2.0, np.float32))         # a jaxpr literal
    assert_close(out.a, np.full(3, 3.0, np.float32))
    out = xp.concatenate((dev, np.zeros(2, np.float32)))   # a captured constant
    assert out.a.shape == (5,)
    assert xp.float32 is np.float32 and xp is not np


@pytest.mark.filterwarnings("ignore::functrans.RetraceWarning")
def test_cuda_driver_runs_on_an_emulated_device(monkeypatch):
    """The generated CuPy driver (allocation, argument order, CuPy calls for the rest)
    run against a NumPy stand-in for CuPy whose kernels evaluate the group they were
    rendered from: checks the plumbing that a machine without a GPU can check. (Groups
    with the same source share one kernel: the size is an argument.)"""
    import importlib
    import types
    devices_mod = importlib.import_module("functrans.core.devices")
    fake = types.ModuleType("cupy_emulated")
    for name in dir(np):
        if not name.startswith("_"):
            setattr(fake, name, getattr(np, name))
    launched = []

    class Emulated:
        def __init__(self, kern):
            self.kern = kern

        def __call__(self, grid, block, args):
            k = self.kern
            n_in = len(k.inputs)
            assert len(args) == n_in + len(k.outputs) + 1
            assert all(int(args[-1]) == (buf.size if k.rows is None else k.rows)
                       for buf in args[n_in:-1])    # a row kernel is told its rows
            outs = core.eval_jaxpr(k.jaxpr, [], *args[:n_in])
            for buf, val in zip(args[n_in:-1], outs, strict=True):
                assert buf.shape == np.shape(val) and buf.dtype == np.asarray(val).dtype
                buf[...] = val
            launched.append(k.name)

    kernels = {}
    monkeypatch.setattr(devices_mod, "_cupy", fake)
    monkeypatch.setattr(core.arrays, "_cupy_xp", None)
    monkeypatch.setattr(cuda, "get_kernel", lambda src, name: kernels[name])
    monkeypatch.setattr(cuda._CUPY, "mod", None)
    for name, (f, args) in sorted(SAMPLES.items()):
        low = ft.jit(lambda *a: f(*a)).lower(*args, backend="cuda")
        kernels.clear()
        prog_kernels = {k: Emulated(v) for k, v in low._build.__self__.kernels.items()}
        kernels.update(prog_kernels)
        exe = low.compile()
        got = exe(*ft.tree_leaves(args))
        want = ft.tree_leaves(f(*args))
        for g, w in zip(got, want, strict=True):
            assert np.asarray(g).dtype == np.asarray(w).dtype, name
            assert_close(g, w, rtol=2e-3 if name == "float16" else 1e-6, atol=1e-6)
    assert launched
