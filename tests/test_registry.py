"""Registry-driven checks: every primitive in primitives.REGISTRY, on hypothesis-drawn
shapes and values, against NumPy, finite differences, the transpose identity and a loop.

Complex-capable primitives (complex128 in their case's dtypes) have their derivatives checked
in float64 and in complex128: a tangent v along any complex direction must give
(f(z + h v) - f(z - h v)) / 2h, and cotangents pair with tangents as Re(sum(ct * t)) (JAX's
convention: transposes are linear, no conjugation)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, strategies as st

import functrans as ft
import functrans.api  # noqa: F401  (declares every primitive: the facade's and ft.compile's too)
from functrans import core
from functrans.ad import backward_pass
from functrans.primitives import REGISTRY
from functrans.primitives.base import DECLARED
from registry_cases import C128, CASES, COLLECTIVES, EXTERNAL, F64
from conftest import assert_close, check_traced

pytestmark = pytest.mark.usefixtures("x64")  # float64 references: conftest.x64

NAMES = sorted(n for n in REGISTRY if n in CASES)
seeds = st.integers(0, 2 ** 32 - 1)


def _is_float(x):
    return np.asarray(x).dtype.kind in "fc"


def _outs(p, out):
    return list(out) if p.multiple_results else [out]


def _deriv_dtypes(name):
    """float64 (or the case's first dtype), and complex128 where the case lists it."""
    dts = CASES[name].dtypes
    first = F64 if F64 in dts else dts[0]
    return [first] + ([C128] if C128 in dts and first != C128 else [])


def _draw(data, name, deriv, dtype=None):
    """(primitive, case, params, args, rng) for one hypothesis example (deriv: in dtype,
    by default the first of _deriv_dtypes)."""
    p, case = REGISTRY[name], CASES[name]
    if deriv:
        dtype = dtype or _deriv_dtypes(name)[0]
    else:
        dtype = data.draw(st.sampled_from(case.dtypes), label="dtype")
    params, gen = case.make(data, np.dtype(dtype), deriv)
    rng = np.random.default_rng(data.draw(seeds, label="seed"))
    return p, case, params, gen(rng), rng, gen


def _fd(f, args, tangents, eps):
    """Central differences of f along tangents (float args only)."""
    plus = [a + eps * t if _is_float(a) else a for a, t in zip(args, tangents)]
    minus = [a - eps * t if _is_float(a) else a for a, t in zip(args, tangents)]
    fp, fm = f(*plus), f(*minus)
    if isinstance(fp, (list, tuple)):
        return [(_wide(a) - b) / (2 * eps) for a, b in zip(fp, fm)]
    return (_wide(fp) - fm) / (2 * eps)


def _wide(x):
    x = np.asarray(x)
    return x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)


def _randn(rng, like):
    """Standard normal values shaped and typed like `like` (complex: both parts)."""
    dt = np.asarray(like).dtype
    v = rng.standard_normal(np.shape(like))
    if dt.kind == "c":
        v = v + 1j * rng.standard_normal(np.shape(like))
    return v.astype(dt)


def _tangents(rng, args):
    return [_randn(rng, a) if _is_float(a) else np.zeros_like(a) for a in args]


def _vdot(a, b):
    """The pairing of a cotangent with a tangent: Re(sum(a * b)), no conjugation."""
    return float(np.real(np.sum(_wide(a) * _wide(b))))


# ---------------------------------------------------------------------------
# the table covers the registry, and the rules the table promises exist

def test_every_registered_primitive_is_in_the_table():
    missing = sorted(set(REGISTRY) - set(CASES) - set(EXTERNAL) - set(COLLECTIVES))
    assert not missing, f"primitives without a case in tests/registry_cases.py: {missing}"


def test_table_has_no_stale_entries():
    stale = sorted((set(CASES) | set(EXTERNAL) | set(COLLECTIVES)) - set(REGISTRY))
    assert not stale, f"test cases for unregistered primitives: {stale}"
    assert not set(CASES) & set(EXTERNAL)


@pytest.mark.parametrize("name", sorted(EXTERNAL))
def test_primitives_tested_elsewhere_name_an_existing_file(name):
    path = Path(__file__).parent / EXTERNAL[name]
    assert path.exists(), f"{name} is said to be tested in {path}, which does not exist"


@pytest.mark.parametrize("name", NAMES)
def test_rules_are_declared(name):
    p, case = REGISTRY[name], CASES[name]
    assert p.jvp is not None, f"{name}: no JVP rule (declare differentiable=False if none)"
    if case.batch:
        assert p.batch is not None, f"{name}: no batching rule"
    if p.transpose is not None:
        assert case.linear, f"{name} has a transpose rule but no linear group in the table"
    if case.linear:
        assert p.transpose is not None, f"{name} is listed as linear but has no transpose rule"


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_nothing_is_added_after_the_declaration(name):
    """Every rule is passed to defprim: the primitive's attributes are still the ones its
    declaration left (none added, none replaced)."""
    now, declared = vars(REGISTRY[name]), DECLARED[name]
    added = sorted(set(now) - set(declared))
    replaced = sorted(k for k in declared if k in now and now[k] is not declared[k])
    assert not added and not replaced, (
        f"{name}: attributes set after defprim returned: added {added}, replaced {replaced}; "
        "pass them in its declaration")


@pytest.mark.parametrize("name", sorted(n for n, p in REGISTRY.items() if type(p.cpu) is str))
def test_declared_cpu_ufuncs_exist(name):
    uf = getattr(np, REGISTRY[name].cpu, None)
    assert isinstance(uf, np.ufunc), f"{name}: cpu={REGISTRY[name].cpu!r} is not a NumPy ufunc"


@pytest.mark.parametrize("name", [n for n in NAMES if REGISTRY[n].commutative])
@given(data=st.data())
def test_declared_commutative(name, data):
    """commutative=True (CSE merges x op y with y op x) holds on the case's operands."""
    p, case, params, args, rng, gen = _draw(data, name, deriv=False)
    assert len(args) == 2
    out = np.asarray(p.bind(*args, **params))
    swapped = np.asarray(p.bind(args[1], args[0], **params))
    if name == "mul" and np.iscomplexobj(out):
        # NumPy 2's complex product rounds a*b's imaginary part with one fused multiply-add,
        # so b*a may differ in the last bit (a third of random complex128 pairs): commutative
        # up to that rounding, as a merged CSE product is; relative to |a| |b| (cancellation)
        bound = 4 * np.finfo(out.dtype).eps * np.abs(np.asarray(args[0])) * np.abs(
            np.asarray(args[1]))
        assert np.all(np.abs(out - swapped) <= bound), (out, swapped)
    else:
        np.testing.assert_array_equal(out, swapped)


# ---------------------------------------------------------------------------
# shape rule vs implementation, values vs NumPy

@pytest.mark.parametrize("name", NAMES)
@given(data=st.data())
def test_shape_rule_and_values(name, data):
    """In every dtype the case lists (float32 and float64 where accepted)."""
    for dtype in CASES[name].dtypes:
        _check_shape_rule_and_values(name, data, dtype)


def _check_shape_rule_and_values(name, data, dtype):
    p, case = REGISTRY[name], CASES[name]
    params, gen = case.make(data, np.dtype(dtype), False)
    args = gen(np.random.default_rng(data.draw(seeds, label="seed")))
    avals = [core.get_aval(a) for a in args]
    expected = _outs(p, p.abstract_eval(*avals, **params))
    got = _outs(p, p.bind(*args, **params))
    want = _outs(p, case.ref(*args, **params))
    assert len(got) == len(expected) == len(want)
    for g, e, w in zip(got, expected, want):
        g = np.asarray(g)
        assert g.shape == e.shape, f"{name}: impl shape {g.shape}, shape rule {e.shape}"
        assert g.dtype == e.dtype, f"{name}: impl dtype {g.dtype}, shape rule {e.dtype}"
        assert not e.weak_type, f"{name}: strong operands gave a weak result"
        w = np.asarray(w)
        assert w.dtype == g.dtype, f"{name}: reference dtype {w.dtype}, got {g.dtype}"
        tol = case.rtol32 if g.dtype == np.float32 else 1e-12
        assert_close(g, w, rtol=tol, atol=tol, err_msg=name)
    # the same result through make_jaxpr + eval_jaxpr, with the jaxpr type-checked
    check_traced(lambda *xs: p.bind(*xs, **params), *args, rtol=0, atol=0)


# ---------------------------------------------------------------------------
# derivatives

@pytest.mark.parametrize("name", NAMES)
@given(data=st.data())
def test_jvp_against_finite_differences(name, data):
    for dtype in _deriv_dtypes(name):
        _check_jvp(name, data, dtype)


def _check_jvp(name, data, dtype):
    p, case, params, args, rng, _ = _draw(data, name, True, dtype)

    def f(*xs):
        return p.bind(*xs, **params)
    tangents = _tangents(rng, args)
    out, t_out = ft.jvp(f, tuple(args), tuple(tangents))
    outs, t_outs = _outs(p, out), _outs(p, t_out)
    for o, t in zip(outs, t_outs):
        assert np.shape(t) == np.shape(o)
    check_traced(lambda *xs: ft.jvp(f, xs, tuple(tangents)), *args)
    float_in = any(_is_float(a) for a in args)
    if not p.differentiable or not float_in:
        for t in t_outs:
            assert not np.any(np.asarray(t)), f"{name}: non-differentiable, nonzero tangent"
        return
    fd = _outs(p, _fd(f, args, tangents, 1e-6))
    for o, t, d in zip(outs, t_outs, fd):
        if not _is_float(o):
            assert not np.any(np.asarray(t))
            continue
        wide = np.asarray(o).dtype in (np.float64, np.complex128)
        tol = 1e-6 if wide else 1e-3
        assert np.asarray(t).dtype == np.asarray(o).dtype, f"{name}: tangent dtype"
        if not wide:
            d = _outs(p, _fd(f, args, tangents, 1e-2))[0]
        assert_close(t, d, rtol=tol, atol=tol, err_msg=f"{name} jvp vs differences")
    # reverse mode agrees with forward mode: <u, J t> = <J^T u, t>
    if all(_is_float(o) for o in outs):
        us = [_randn(rng, o) for o in outs]
        _, vjp_fn = ft.vjp(f, *args)
        cts = vjp_fn(us if p.multiple_results else us[0])
        lhs = sum(_vdot(u, t) for u, t in zip(us, t_outs))
        rhs = sum(_vdot(c, t) for c, t, a in zip(cts, tangents, args) if _is_float(a))
        assert np.isclose(lhs, rhs, rtol=1e-6, atol=1e-6), f"{name}: vjp vs jvp {lhs} {rhs}"
        ct_u = us if p.multiple_results else us[0]
        check_traced(lambda *xs: ft.vjp(f, *xs)[1](ct_u), *args)


@pytest.mark.parametrize("name", [n for n in NAMES
                                  if REGISTRY[n].differentiable and CASES[n].smooth])
@given(data=st.data())
def test_second_order_against_finite_differences(name, data):
    for dtype in _deriv_dtypes(name):
        _check_second_order(name, data, dtype)


def _check_second_order(name, data, dtype):
    p, case, params, args, rng, _ = _draw(data, name, True, dtype)
    fidx = tuple(i for i, a in enumerate(args) if _is_float(a))
    out = p.bind(*args, **params)
    if not fidx or not all(_is_float(o) for o in _outs(p, out)):
        return

    def f(*xs):
        return p.bind(*xs, **params)
    tangents = _tangents(rng, args)

    def first(*xs):                       # directional derivative along tangents
        return ft.jvp(f, xs, tuple(tangents))[1]
    second = ft.jvp(first, tuple(args), tuple(tangents))[1]
    for s, d in zip(_outs(p, second), _outs(p, _fd(first, args, tangents, 1e-5))):
        assert_close(s, d, rtol=1e-5, atol=1e-5, err_msg=f"{name} jvp of jvp")

    # reverse mode twice, and forward over reverse, on a real scalarized version
    w = [rng.standard_normal(np.shape(o)) for o in _outs(p, out)]
    fnp = ft.numpy

    def scalar(*xs):
        return sum(fnp.sum(fnp.real(fnp.multiply(wi, o))) for wi, o in zip(w, _outs(p, f(*xs))))
    g = ft.grad(scalar, argnums=fidx)
    hvp_fwd = ft.jvp(g, tuple(args), tuple(tangents))[1]
    hvp_fd = _fd(lambda *xs: list(g(*xs)), args, tangents, 1e-5)

    def g_dot_t(*xs):                     # the pairing Re(sum(g * t)), as _vdot
        return sum(fnp.sum(fnp.real(fnp.multiply(gi, tangents[i])))
                   for gi, i in zip(g(*xs), fidx))
    hvp_rev = ft.grad(g_dot_t, argnums=fidx)(*args)
    for a, b, c in zip(hvp_fwd, hvp_fd, hvp_rev):
        assert_close(a, b, rtol=1e-5, atol=1e-5, err_msg=f"{name} jvp of grad")
        assert_close(c, a, rtol=1e-6, atol=1e-6, err_msg=f"{name} grad of grad")
    check_traced(lambda *xs: ft.jvp(first, xs, tuple(tangents)), *args)
    check_traced(lambda *xs: ft.grad(g_dot_t, argnums=fidx)(*xs), *args)


LINEAR = [n for n in NAMES if CASES[n].linear]


@pytest.mark.parametrize("name", LINEAR)
@given(data=st.data())
def test_transpose_identity(name, data):
    """<u, J v> = <J^T u, v> for each group of linear arguments, with J^T from the
    transpose rule (backward_pass on the primitive's one-equation jaxpr) and from vjp."""
    for dtype in _deriv_dtypes(name):
        _check_transpose(name, data, dtype)


def _check_transpose(name, data, dtype):
    p, case, params, args, rng, _ = _draw(data, name, True, dtype)
    out = p.bind(*args, **params)
    if not all(_is_float(o) for o in _outs(p, out)):
        return
    for group in case.linear:
        group = [i for i in group if i < len(args) and _is_float(args[i])]
        if not group:
            continue

        def f_lin(*vs):
            full = list(args)
            for i, v in zip(group, vs):
                full[i] = v
            return p.bind(*full, **params)
        v0 = [args[i] for i in group]
        v = [_randn(rng, a) for a in v0]
        jv = _outs(p, ft.jvp(f_lin, tuple(v0), tuple(v))[1])
        us = [_randn(rng, o) for o in jv]
        closed = ft.make_jaxpr(f_lin)(*v0)
        core.check_jaxpr(closed.jaxpr)
        cts = backward_pass(closed.jaxpr, closed.consts,
                            [core.UndefinedPrimal(core.get_aval(a)) for a in v0], us)
        cts = [np.zeros(np.shape(a), np.asarray(a).dtype) if type(c) is core.Zero else c
               for c, a in zip(cts, v0)]
        for c, a in zip(cts, v0):
            assert np.shape(c) == np.shape(a) and np.asarray(c).dtype == a.dtype, \
                f"{name}: cotangent {np.shape(c)} {np.asarray(c).dtype} for {a.shape} {a.dtype}"
        lhs = sum(_vdot(u, o) for u, o in zip(us, jv))
        rhs = sum(_vdot(c, vi) for c, vi in zip(cts, v))
        tol = 1e-9 if np.asarray(jv[0]).dtype in (np.float64, np.complex128) else 1e-5
        assert np.isclose(lhs, rhs, rtol=tol, atol=tol), \
            f"{name} group {group}: <u, Jv> = {lhs} but <J^T u, v> = {rhs}"
        u = us if p.multiple_results else us[0]
        via_vjp = ft.vjp(f_lin, *v0)[1](u)
        for a, b in zip(via_vjp, cts):
            assert_close(a, b, rtol=tol, atol=tol, err_msg=f"{name}: vjp vs transpose rule")
        check_traced(lambda *vs: ft.vjp(f_lin, *vs)[1](u), *v0)


# ---------------------------------------------------------------------------
# batching

@pytest.mark.parametrize("name", [n for n in NAMES if CASES[n].batch])
@given(data=st.data())
def test_batching_against_a_loop(name, data):
    p, case, params, args, rng, gen = _draw(data, name, deriv=False)
    size = data.draw(st.integers(1, 3), label="batch size")
    samples = [gen(rng) for _ in range(size)]
    axes = [data.draw(st.one_of(st.none(), st.integers(0, np.ndim(a))), label=f"axis {i}")
            for i, a in enumerate(args)]
    if all(a is None for a in axes):
        axes[0] = 0
    batched = [np.stack([s[i] for s in samples], axis=ax) if ax is not None else args[i]
               for i, ax in enumerate(axes)]

    def f(*xs):
        return p.bind(*xs, **params)
    per_example = []
    for b in range(size):
        xs = [samples[b][i] if ax is not None else args[i] for i, ax in enumerate(axes)]
        per_example.append(_outs(p, f(*xs)))
    out_rank = min(np.ndim(o) for o in per_example[0])    # one out axis for every output
    out_axis = data.draw(st.integers(0, out_rank), label="out axis")
    got = _outs(p, ft.vmap(f, in_axes=tuple(axes), out_axes=out_axis)(*batched))
    for k, g in enumerate(got):
        want = np.stack([np.asarray(e[k]) for e in per_example], axis=out_axis)
        assert np.asarray(g).dtype == want.dtype
        assert_close(g, want, rtol=1e-6, atol=1e-6, err_msg=f"{name} vmap in_axes={axes}")
    check_traced(ft.vmap(f, in_axes=tuple(axes), out_axes=out_axis), *batched)


# ---------------------------------------------------------------------------
# known answers

@pytest.mark.parametrize("key, ctr, expected", [
    ((0, 0), (0, 0), (0x6B200159, 0x99BA4EFE)),
    ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
    ((0x13198A2E, 0x03707344), (0x243F6A88, 0x85A308D3), (0xC4923A9C, 0x483DF7A0)),
])
def test_threefry_known_answers(key, ctr, expected):
    """Threefry-2x32 with 20 rounds: the published known-answer vectors."""
    u32 = [np.uint32(v) for v in key + ctr]
    out = REGISTRY["threefry2x32"].bind(*u32)
    assert tuple(int(o) for o in out) == expected
    vec = REGISTRY["threefry2x32"].bind(*[np.full(3, v, np.uint32) for v in key + ctr])
    assert all(tuple(int(o[i]) for o in vec) == expected for i in range(3))
