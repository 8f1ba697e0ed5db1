"""Differential fuzzing: random programs over the registry's primitives run eagerly, under
`ft.jit`, under `ft.vmap` (against a loop) and through the facade's Tensor methods; the
values agree, and the gradients agree with one another and with float64 central
differences. The default run is small (the hypothesis profile bounds it, derandomized
with HYPOTHESIS_PROFILE=ci); `-m slow` runs a larger one."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import functrans as ft
import functrans.numpy as fnp
from functrans.backends.native import toolchain
from functrans.primitives import REGISTRY

pytestmark = pytest.mark.usefixtures("x64")  # float64 references: conftest.x64

# ---------------------------------------------------------------------------
# the vocabulary: (primitive, arity, domain, smooth, functrans.numpy form, Tensor form).
# Domains: operands go through a smooth map into the primitive's domain first:
# "any" as they are, "unit" 0.9 * tanh(x) (bounded; inside (-1, 1)), "pos" x * x + 0.5.
# For binary primitives the domain applies to the second operand ("unit": the first).


def _tanh_f(x):
    return fnp.tanh(x)


def _tanh_t(x):
    return x.tanh()


OPS = [
    ("sin", 1, "any", True, fnp.sin, lambda x: x.sin()),
    ("cos", 1, "any", True, fnp.cos, lambda x: x.cos()),
    ("tanh", 1, "any", True, fnp.tanh, lambda x: x.tanh()),
    ("atan", 1, "any", True, fnp.arctan, lambda x: x.atan()),
    ("logistic", 1, "any", True, ft.lax.logistic, lambda x: x.sigmoid()),
    ("erf", 1, "any", True, ft.lax.erf, lambda x: x.erf()),
    ("neg", 1, "any", True, fnp.negative, lambda x: -x),
    ("abs", 1, "any", False, fnp.abs, lambda x: x.abs()),
    ("exp", 1, "unit", True, fnp.exp, lambda x: x.exp()),
    ("expm1", 1, "unit", True, fnp.expm1, lambda x: x.expm1()),
    ("sinh", 1, "unit", True, fnp.sinh, lambda x: x.sinh()),
    ("cosh", 1, "unit", True, fnp.cosh, lambda x: x.cosh()),
    ("tan", 1, "unit", True, fnp.tan, lambda x: x.tan()),
    ("asin", 1, "unit", True, fnp.arcsin, lambda x: x.asin()),
    ("acos", 1, "unit", True, fnp.arccos, lambda x: x.acos()),
    ("integer_pow", 1, "unit", True, lambda x: x ** 3, lambda x: x ** 3),
    ("log", 1, "pos", True, fnp.log, lambda x: x.log()),
    ("log1p", 1, "pos", True, fnp.log1p, lambda x: x.log1p()),
    ("sqrt", 1, "pos", True, fnp.sqrt, lambda x: x.sqrt()),
    ("rsqrt", 1, "pos", True, ft.lax.rsqrt, lambda x: x.rsqrt()),
    ("add", 2, "any", True, fnp.add, lambda x, y: x + y),
    ("sub", 2, "any", True, fnp.subtract, lambda x, y: x - y),
    ("mul", 2, "unit", True, fnp.multiply, lambda x, y: x * y),
    ("div", 2, "pos", True, fnp.divide, lambda x, y: x / y),
    ("pow", 2, "powpos", True, fnp.power, lambda x, y: x.pow(y)),
    ("atan2", 2, "pos", True, fnp.arctan2, lambda x, y: x.atan2(y)),
    ("max", 2, "any", False, fnp.maximum, lambda x, y: x.maximum(y)),
    ("min", 2, "any", False, fnp.minimum, lambda x, y: x.minimum(y)),
    # shape-aware ones (the last axis; keepdims, so operands keep broadcasting)
    ("reduce_sum", 1, "any", True, lambda x: fnp.sum(x, axis=-1, keepdims=True),
     lambda x: x.sum(dim=-1, keepdim=True)),
    ("reduce_max", 1, "any", False, lambda x: fnp.max(x, axis=-1, keepdims=True),
     lambda x: x.amax(dim=-1, keepdim=True)),
    ("cumsum", 1, "any", True, lambda x: fnp.cumsum(x, axis=-1),
     lambda x: x.cumsum(dim=-1)),
    ("rev", 1, "any", True, lambda x: fnp.flip(x, axis=-1), lambda x: x.flip((-1,))),
    ("reduce_prod", 1, "unit", True, lambda x: fnp.prod(x, axis=-1, keepdims=True),
     lambda x: x.prod(dim=-1, keepdim=True)),
    ("reduce_min", 1, "any", False, lambda x: fnp.min(x, axis=-1, keepdims=True),
     lambda x: x.amin(dim=-1, keepdim=True)),
    ("select", 2, "any", False, lambda x, y: fnp.where(x > y, x, -y),
     lambda x, y: x.where(x > y, -y)),
    ("concatenate", 2, "any", True,
     lambda x, y: fnp.concatenate([x, y], -1)[..., 1:1 + x.shape[-1]],
     lambda x, y: ft.cat([x, y], dim=-1)[..., 1:1 + x.shape[-1]]),
    ("pad", 1, "any", True,
     lambda x: fnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(1, 2)])[..., 2:2 + x.shape[-1]],
     lambda x: ft.nn.functional.pad(x, (1, 2))[..., 2:2 + x.shape[-1]]),
    ("reshape", 1, "any", True, lambda x: fnp.reshape(fnp.reshape(x, (-1,)) * 1.5, x.shape),
     lambda x: (x.reshape(-1) * 1.5).reshape(x.shape)),
    ("dot_general", 2, "unit", True,
     lambda x, y: x * (fnp.reshape(y, -1) @ fnp.reshape(y, -1)),
     lambda x, y: x * (y.reshape(-1) @ y.reshape(-1))),
]
_OP_INDEX = {op[0]: k for k, op in enumerate(OPS)}


def _prepare(dom, args, tanh):
    """Map operands into a primitive's domain (smoothly, with the program's own ops)."""
    if dom == "unit":
        return [tanh(args[0]) * 0.9] + list(args[1:])
    if dom == "pos":
        return list(args[:-1]) + [args[-1] * args[-1] + 0.5]
    if dom == "powpos":                       # base > 0, bounded exponent
        return [args[0] * args[0] + 0.5, tanh(args[1])]
    return list(args)


def run_program(prog, xs, facade=False):
    """Evaluate a program (steps of (op index, operand positions)) on inputs xs with
    functrans.numpy, or with Tensor methods: a scalar, the sum of the last two values."""
    tanh = _tanh_t if facade else _tanh_f
    vals = list(xs)
    for k, operands in prog:
        _, _, dom, _, f, t = OPS[k]
        args = _prepare(dom, [vals[i] for i in operands], tanh)
        vals.append((t if facade else f)(*args))
    last = vals[-2:] if len(prog) > 1 else vals[-1:]
    total = 0.0
    for w, v in zip((1.0, 0.5), last):
        total = total + w * (v.sum() if facade else fnp.sum(v))
    return total


@st.composite
def programs(draw, max_steps=6, smooth_only=False):
    """(program, shape, number of inputs)."""
    pool = [k for k, op in enumerate(OPS) if op[3] or not smooth_only]
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=2)))
    n_in = draw(st.integers(1, 3))
    prog = []
    for i in range(draw(st.integers(1, max_steps))):
        k = draw(st.sampled_from(pool))
        avail = n_in + i
        prog.append((k, tuple(draw(st.integers(0, avail - 1)) for _ in range(OPS[k][1]))))
    return prog, shape, n_in


def _inputs(shape, n_in, seed, batch=()):
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1.5, 1.5, batch + shape) for _ in range(n_in)]


def _fd(fun, xs, eps=1e-6):
    """Central differences of a scalar function of several float64 arrays."""
    grads = []
    for i, x in enumerate(xs):
        g = np.zeros_like(x)
        for idx in np.ndindex(x.shape):
            plus, minus = [a.copy() for a in xs], [a.copy() for a in xs]
            plus[i][idx] += eps
            minus[i][idx] -= eps
            g[idx] = (float(fun(*plus)) - float(fun(*minus))) / (2 * eps)
        grads.append(g)
    return grads


def _close(got, want, rtol, what):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * (1 + np.abs(want).max()),
                               err_msg=what)


def check_program(prog, shape, n_in, seed):
    """Eager vs jit vs vmap vs facade values; grad vs jit(grad) vs grad(jit) vs the
    facade's backward vs central differences (when every primitive is smooth)."""
    def f(*xs):
        return run_program(prog, xs)
    xs = _inputs(shape, n_in, seed)
    argnums = tuple(range(n_in))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ft.RetraceWarning)
        want = float(f(*xs))
        _close(ft.jit(f)(*xs), want, 1e-10, f"jit of {prog}")
        bxs = _inputs(shape, n_in, seed + 1, batch=(3,))
        looped = [float(f(*[b[j] for b in bxs])) for j in range(3)]
        _close(ft.vmap(f)(*bxs), looped, 1e-10, f"vmap of {prog}")
        has_facade = all(OPS[k][5] is not None for k, _ in prog)
        if has_facade:
            ts = [ft.tensor(x, requires_grad=True) for x in xs]
            out = run_program(prog, ts, facade=True)
            _close(out.item(), want, 1e-10, f"facade forward of {prog}")
        if not all(OPS[k][3] for k, _ in prog):
            return
        grads = ft.grad(f, argnums=argnums)(*xs)
        for g, w in zip(grads, _fd(f, xs)):
            _close(g, w, 1e-5, f"grad of {prog} against central differences")
        for how, gs in (("jit(grad)", ft.jit(ft.grad(f, argnums=argnums))(*xs)),
                        ("grad(jit)", ft.grad(ft.jit(f), argnums=argnums)(*xs))):
            for g, w in zip(gs, grads):
                _close(g, w, 1e-10, f"{how} of {prog}")
        if has_facade:
            out.backward()
            for t, w in zip(ts, grads):           # an unused input: None, as in torch
                _close(0.0 * w if t.grad is None else t.grad.numpy(), w, 1e-10,
                       f"facade backward of {prog}")
        per_ex = ft.vmap(ft.grad(f, argnums=argnums))(*bxs)
        for j in range(3):
            loop = ft.grad(f, argnums=argnums)(*[b[j] for b in bxs])
            for g, w in zip(per_ex, loop):
                _close(g[j], w, 1e-10, f"vmap(grad) of {prog}")


def test_the_vocabulary_is_the_registry():
    """Every primitive named above is registered (a renamed one fails here), and each
    one the fuzzer draws reaches the traced program under that name."""
    names = {op[0] for op in OPS}
    assert names <= set(REGISTRY), names - set(REGISTRY)
    for name, arity, dom, _, f, _ in OPS:
        xs = _inputs((2, 3), arity, 0)
        jaxpr = ft.make_jaxpr(lambda *a: f(*_prepare(dom, list(a), _tanh_f)))(*xs)
        assert name in {e.primitive.name for e in jaxpr.jaxpr.eqns}, name


@given(programs(), st.integers(0, 2 ** 16))
def test_random_programs_agree(case, seed):
    prog, shape, n_in = case
    check_program(prog, shape, n_in, seed)


@given(programs(max_steps=5, smooth_only=True), st.integers(0, 2 ** 16))
def test_random_smooth_programs_have_matching_gradients(case, seed):
    prog, shape, n_in = case
    check_program(prog, shape, n_in, seed)


@pytest.mark.slow
@settings(max_examples=400)
@given(programs(max_steps=10), st.integers(0, 2 ** 16))
def test_random_programs_agree_many(case, seed):
    prog, shape, n_in = case
    check_program(prog, shape, n_in, seed)


def _have_compiler():
    try:
        toolchain.find_compiler()
    except toolchain.ToolchainError:
        return False
    return True


@pytest.mark.skipif(not _have_compiler(), reason="no C++ compiler for the native backend")
@settings(max_examples=8)
@given(programs(max_steps=8), st.integers(0, 2 ** 16))
def test_random_programs_native_backend_equals_numpy_backend(case, seed):
    """Random fused programs and their jitted gradients under the native CPU backend
    agree with the NumPy backend (float64: within a few ulp of NumPy's math)."""
    prog, shape, n_in = case

    def f(*xs):
        return run_program(prog, xs)
    xs = _inputs(shape, n_in, seed)
    smooth = all(OPS[k][3] for k, _ in prog)
    results = {}
    saved = ft.config.cpu_backend
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ft.RetraceWarning)
            for mode in ("numpy", "native"):
                ft.config.update("cpu_backend", mode)
                results[mode] = [ft.jit(f)(*xs)]
                if smooth:
                    results[mode] += list(ft.jit(ft.grad(f, argnums=tuple(range(n_in))))(*xs))
    finally:
        ft.config.update("cpu_backend", saved)
    for g, w in zip(results["native"], results["numpy"], strict=True):
        _close(g, w, 1e-12, f"native backend of {prog}")
