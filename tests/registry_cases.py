"""The table that drives tests/test_registry.py: how to draw operands for every primitive.

Each `Case.make(d, dtype, deriv)` draws the structure (shapes, params) with hypothesis's
`d.draw` and returns `(params, gen)`, where `gen(rng)` makes one set of operands of that
structure from a NumPy generator (so a batch of samples shares shapes). `deriv=True` asks
for float64 operands on domains where the derivative exists (no ties, no kinks, no
rounding boundaries). `ref(*args, **params)` is the NumPy reference.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
from hypothesis import strategies as st

F32, F64, I32, U32, BOOL = (np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int32),
                            np.dtype(np.uint32), np.dtype(np.bool_))
C128 = np.dtype(np.complex128)
FLOATS = (F32, F64)
CFLOATS = FLOATS + (C128,)       # complex-capable: derivatives checked in float64 and complex128


@dataclass
class Case:
    make: Callable
    ref: Callable | None
    dtypes: tuple = FLOATS            # dtypes of the main operand in value tests
    linear: tuple = ()               # groups of arg positions in which it is jointly linear
    smooth: bool = True              # second derivatives checked against differences
    batch: bool = True               # has array operands to batch over
    rtol32: float = 2e-6             # value tolerance in float32


# ---------------------------------------------------------------------------
# drawing helpers

def shape_st(min_rank=0, max_rank=3, min_side=1, max_side=4):
    return st.lists(st.integers(min_side, max_side), min_size=min_rank,
                    max_size=max_rank).map(tuple)


def values(rng, shape, dtype, lo=-2.0, hi=2.0, away=0.0):
    """Floats uniform in [lo, hi] (with |x| >= away when away > 0: then lo = -hi),
    integers in [lo, hi], random bools; complex: the real part so drawn, the imaginary part
    uniform in [-0.5, 0.5] (clear of the branch cuts of the cases' domains)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "c":
        re = values(rng, shape, np.float64, lo, hi, away)
        return np.asarray(re + 1j * rng.uniform(-0.5, 0.5, size=shape), dtype)
    if dtype == BOOL:
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        return np.asarray(rng.integers(int(lo), int(hi) + 1, size=shape)).astype(dtype)
    if away:
        sign = np.where(rng.random(shape) < 0.5, -1.0, 1.0)
        return np.asarray(sign * rng.uniform(away, hi, size=shape), dtype)
    return np.asarray(rng.uniform(lo, hi, size=shape), dtype)


def _ensure_one_full(shapes, shape):
    if shape and all(s == () for s in shapes):
        shapes[0] = shape
    return shapes


# ---------------------------------------------------------------------------
# elementwise

def unary(ref, lo=-2.0, hi=2.0, away=0.0, dtypes=FLOATS, smooth=True, gen=None, rtol32=2e-6):
    def make(d, dtype, deriv):
        shape = d.draw(shape_st())
        return {}, (gen(shape, dtype) if gen else
                    lambda rng: [values(rng, shape, dtype, lo, hi, away)])
    return Case(make, lambda x: ref(x), dtypes, smooth=smooth, rtol32=rtol32)


def binary(ref, gens=None, dtypes=FLOATS, linear=(), smooth=True, rtol32=2e-6, **params):
    """gens: two functions (rng, shape, dtype) -> operand; default uniform in [-2, 2]."""
    gens = gens or (lambda rng, s, dt: values(rng, s, dt),) * 2

    def make(d, dtype, deriv):
        full = d.draw(shape_st())
        shapes = _ensure_one_full([full if d.draw(st.booleans()) else () for _ in range(2)], full)
        return dict(params), lambda rng: [g(rng, s, dtype) for g, s in zip(gens, shapes)]
    return Case(make, lambda x, y, **p: ref(x, y), dtypes, linear=linear, smooth=smooth,
                rtol32=rtol32)


def _nonzero(lo, hi):
    return lambda rng, s, dt: values(rng, s, dt, lo, hi, away=0.5) if np.dtype(dt).kind in "fc" \
        else _nonzero_int(rng, s, dt)


def _nonzero_int(rng, s, dt):
    x = rng.integers(1, 6, size=s) * np.where(rng.random(s) < 0.5, -1, 1)
    return np.asarray(x, dt)


def _wide(x):
    """x in float64 (complex128 when complex), for references computed wider."""
    return x.astype(np.promote_types(x.dtype, np.float64))


def _erf_ref(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x).astype(x.dtype)


def _math_ref(fn):
    return lambda x: np.vectorize(fn, otypes=[np.float64])(x).astype(x.dtype)


def _scipy_ref(name):
    """scipy.special's function as a reference (the test skips where SciPy is missing)."""
    def ref(x):
        import pytest
        special = pytest.importorskip("scipy.special", reason="the reference is SciPy's")
        return getattr(special, name)(_wide(x)).astype(x.dtype)
    return ref


def _round_ref(x, rounding_method):
    if rounding_method == 1:
        return np.round(x)
    return (np.sign(x) * np.floor(np.abs(x) + 0.5)).astype(x.dtype)


def _int_div_ref(x, y):
    if x.dtype.kind in "iu":
        return (np.sign(x) * np.sign(y) * (np.abs(x) // np.abs(y))).astype(x.dtype)
    return x / y


def _away_from_integers(rng, s, dt, lo=-3, hi=3, halves=False):
    """k + f with f in (0.1, 0.4) or (0.6, 0.9) (exactly k + 0.5 when halves)."""
    k = rng.integers(lo, hi, size=s)
    f = rng.uniform(0.1, 0.4, size=s) + 0.5 * (rng.random(s) < 0.5)
    if halves:
        f = np.where(rng.random(s) < 0.5, 0.5, f)
    return np.asarray(k + f, dt)


def _round_case():
    def make(d, dtype, deriv):
        shape = d.draw(shape_st())
        method = d.draw(st.sampled_from([0, 1]))
        return ({"rounding_method": method},
                lambda rng: [_away_from_integers(rng, shape, dtype, halves=not deriv)])
    return Case(make, _round_ref, smooth=False)


def _integer_pow_case():
    def make(d, dtype, deriv):
        shape = d.draw(shape_st())
        y = d.draw(st.integers(-3, 4) if dtype.kind in "fc" else st.integers(0, 4))
        if dtype.kind in "fc":
            return {"y": y}, lambda rng: [values(rng, shape, dtype, -2, 2, away=0.5)]
        return {"y": y}, lambda rng: [values(rng, shape, dtype, -3, 3)]

    def ref(x, y):
        return (_wide(x) ** y).astype(x.dtype) if y < 0 else x ** y
    return Case(make, ref, CFLOATS + (I32,))


def _convert_case():
    """Complex to a real number keeps the real part (NumPy's astype, which warns)."""
    def make(d, dtype, deriv):
        shape = d.draw(shape_st())
        targets = [F64, F32, I32] if deriv else [F32, F64, I32, BOOL]
        new = d.draw(st.sampled_from(targets + [C128]))
        weak = False
        return ({"new_dtype": new, "weak_type": weak},
                lambda rng: [values(rng, shape, dtype, -3, 3) if dtype.kind not in "fc" else
                             _away_from_integers(rng, shape, dtype) + (
                                 0.25j if dtype.kind == "c" else 0)])

    def ref(x, new_dtype, weak_type):
        return (x.real if x.dtype.kind == "c" and new_dtype.kind in "iuf" else x).astype(new_dtype)
    return Case(make, ref, CFLOATS + (I32, BOOL), linear=((0,),))


def _select_case():
    def make(d, dtype, deriv):
        full = d.draw(shape_st())
        pshape, xshape, yshape = _ensure_one_full(
            [full if d.draw(st.booleans()) else () for _ in range(3)], full)
        return {}, lambda rng: [rng.random(pshape) < 0.5, values(rng, xshape, dtype),
                                values(rng, yshape, dtype)]
    return Case(make, lambda p, x, y: np.where(p, x, y), CFLOATS + (I32, BOOL),
                linear=((1, 2), (1,)))


def _shift_case(ref):
    def make(d, dtype, deriv):
        full = d.draw(shape_st())
        shapes = _ensure_one_full([full if d.draw(st.booleans()) else () for _ in range(2)], full)
        return {}, lambda rng: [values(rng, shapes[0], dtype, -1000, 1000) if dtype.kind == "i"
                                else values(rng, shapes[0], dtype, 0, 2 ** 32 - 1),
                                values(rng, shapes[1], dtype, 0, 31)]
    return Case(make, ref, (I32, U32), smooth=False)


def _logical_shift_right(x, y):
    """Zero-filling shift of the bits, for signed integers too."""
    u = np.dtype(f"u{x.dtype.itemsize}")
    return np.right_shift(x.view(u), y.astype(u)).view(x.dtype)


def _cmp(ref):
    return binary(ref, dtypes=FLOATS + (I32, BOOL), smooth=False)


# ---------------------------------------------------------------------------
# shape ops

def _bid_case():
    def make(d, dtype, deriv):
        target = d.draw(shape_st(0, 3))
        dims = tuple(sorted(d.draw(st.sets(st.sampled_from(range(len(target))), max_size=3)
                                   if target else st.just(set()))))
        in_shape = tuple(target[i] if d.draw(st.booleans()) else 1 for i in dims)
        return ({"shape": target, "broadcast_dimensions": dims},
                lambda rng: [values(rng, in_shape, dtype)])

    def ref(x, shape, broadcast_dimensions):
        expanded = [1] * len(shape)
        for i, dd in enumerate(broadcast_dimensions):
            expanded[dd] = x.shape[i]
        return np.broadcast_to(x.reshape(expanded), shape)
    return Case(make, ref, CFLOATS + (I32, BOOL), linear=((0,),))


def _reshape_case():
    def make(d, dtype, deriv):
        shape = d.draw(shape_st(0, 3))
        n = int(np.prod(shape))
        options = [(n,), tuple(reversed(shape)), (1,) + shape, shape + (1,)]
        if len(shape) >= 2:
            options.append((shape[0] * shape[1],) + shape[2:])
        new = d.draw(st.sampled_from(options))
        return {"new_sizes": new, "dimensions": None}, lambda rng: [values(rng, shape, dtype)]
    return Case(make, lambda x, new_sizes, dimensions: x.reshape(new_sizes),
                CFLOATS + (I32,), linear=((0,),))


def _transpose_case():
    def make(d, dtype, deriv):
        shape = d.draw(shape_st(0, 4))
        perm = tuple(d.draw(st.permutations(range(len(shape)))))
        return {"permutation": perm}, lambda rng: [values(rng, shape, dtype)]
    return Case(make, lambda x, permutation: np.transpose(x, permutation),
                CFLOATS + (I32, BOOL), linear=((0,),))


def _squeeze_case():
    def make(d, dtype, deriv):
        shape = list(d.draw(shape_st(0, 3)))
        for _ in range(d.draw(st.integers(0, 2))):
            shape.insert(d.draw(st.integers(0, len(shape))), 1)
        shape = tuple(shape)
        ones = [i for i, s in enumerate(shape) if s == 1]
        dims = tuple(sorted(d.draw(st.sets(st.sampled_from(ones)) if ones else st.just(set()))))
        return {"dimensions": dims}, lambda rng: [values(rng, shape, dtype)]
    return Case(make, lambda x, dimensions: np.squeeze(x, dimensions) if dimensions else x,
                CFLOATS + (I32,), linear=((0,),))


def _expand_dims_case():
    def make(d, dtype, deriv):
        shape = d.draw(shape_st(0, 3))
        k = d.draw(st.integers(0, 2))
        n = len(shape) + k
        dims = tuple(sorted(d.draw(st.sets(st.sampled_from(range(n)), min_size=k, max_size=k))
                            if k else ()))
        return {"dimensions": dims}, lambda rng: [values(rng, shape, dtype)]
    return Case(make, lambda x, dimensions: np.expand_dims(x, dimensions) if dimensions else x,
                CFLOATS + (I32,), linear=((0,),))


def _rev_case():
    def make(d, dtype, deriv):
        shape = d.draw(shape_st(0, 3))
        dims = tuple(sorted(d.draw(st.sets(st.sampled_from(range(len(shape))))
                                   if shape else st.just(set()))))
        return {"dimensions": dims}, lambda rng: [values(rng, shape, dtype)]
    return Case(make, lambda x, dimensions: np.flip(x, dimensions) if dimensions else x,
                CFLOATS + (I32,), linear=((0,),))


def _concatenate_case():
    def make(d, dtype, deriv):
        base = list(d.draw(shape_st(1, 3)))
        dim = d.draw(st.integers(0, len(base) - 1))
        n = d.draw(st.integers(1, 3))
        shapes = []
        for _ in range(n):
            s = list(base)
            s[dim] = d.draw(st.integers(0, 3))
            shapes.append(tuple(s))
        if all(s[dim] == 0 for s in shapes):
            shapes[0] = tuple(base)
        return {"dimension": dim}, lambda rng: [values(rng, s, dtype) for s in shapes]

    def ref(*xs, dimension):
        return np.concatenate(xs, axis=dimension)
    return Case(make, ref, CFLOATS + (I32,), linear=((0, 1, 2),))


def _pad_case():
    def make(d, dtype, deriv):
        shape = d.draw(shape_st(0, 3, min_side=0))
        config = tuple((d.draw(st.integers(0, 2)), d.draw(st.integers(0, 2)),
                        d.draw(st.integers(0, 2))) for _ in shape)
        return ({"padding_config": config},
                lambda rng: [values(rng, shape, dtype), values(rng, (), dtype)])

    def ref(x, pv, padding_config):
        out_shape = tuple(lo + hi + s + max(s - 1, 0) * it
                          for s, (lo, hi, it) in zip(x.shape, padding_config))
        out = np.full(out_shape, pv, x.dtype)
        out[tuple(slice(lo, lo + s + max(s - 1, 0) * it, it + 1)
                  for s, (lo, hi, it) in zip(x.shape, padding_config))] = x
        return out
    return Case(make, ref, CFLOATS + (I32,), linear=((0, 1), (0,)))


def _slice_case():
    def make(d, dtype, deriv):
        shape = d.draw(shape_st(0, 3, max_side=6))
        starts, limits, strides = [], [], []
        for n in shape:
            a = d.draw(st.integers(0, n))
            b = d.draw(st.integers(a, n))
            starts.append(a), limits.append(b), strides.append(d.draw(st.integers(1, 3)))
        strides = tuple(strides) if d.draw(st.booleans()) else None
        return ({"start_indices": tuple(starts), "limit_indices": tuple(limits),
                 "strides": strides}, lambda rng: [values(rng, shape, dtype)])

    def ref(x, start_indices, limit_indices, strides):
        strides = strides or (1,) * x.ndim
        return x[tuple(slice(a, b, s) for a, b, s in zip(start_indices, limit_indices, strides))]
    return Case(make, ref, CFLOATS + (I32,), linear=((0,),))


def _starts(rng, shape, sizes):
    """Start indices, sometimes out of range (the primitives clamp them)."""
    return [np.int32(rng.integers(-2, n - s + 3)) for n, s in zip(shape, sizes)]


def _clamp(idx, shape, sizes):
    return [int(np.clip(int(i), 0, n - s)) for i, n, s in zip(idx, shape, sizes)]


def _dynamic_slice_case():
    def make(d, dtype, deriv):
        shape = d.draw(shape_st(1, 3, max_side=5))
        sizes = tuple(d.draw(st.integers(0, n)) for n in shape)
        return ({"slice_sizes": sizes},
                lambda rng: [values(rng, shape, dtype)] + _starts(rng, shape, sizes))

    def ref(x, *idx, slice_sizes):
        st_ = _clamp(idx, x.shape, slice_sizes)
        return x[tuple(slice(a, a + s) for a, s in zip(st_, slice_sizes))]
    return Case(make, ref, CFLOATS + (I32,), linear=((0,),))


def _dynamic_update_slice_case():
    def make(d, dtype, deriv):
        shape = d.draw(shape_st(1, 3, max_side=5))
        sizes = tuple(d.draw(st.integers(0, n)) for n in shape)
        return ({}, lambda rng: [values(rng, shape, dtype), values(rng, sizes, dtype)]
                + _starts(rng, shape, sizes))

    def ref(x, u, *idx):
        st_ = _clamp(idx, x.shape, u.shape)
        out = x.copy()
        out[tuple(slice(a, a + s) for a, s in zip(st_, u.shape))] = u
        return out
    return Case(make, ref, CFLOATS + (I32,), linear=((0, 1), (1,)))


def _iota_case():
    def make(d, dtype, deriv):
        shape = d.draw(shape_st(1, 3))
        dim = d.draw(st.integers(0, len(shape) - 1))
        return {"dtype": dtype, "shape": shape, "dimension": dim}, lambda rng: []

    def ref(dtype, shape, dimension):
        r = np.arange(shape[dimension], dtype=dtype).reshape(
            [-1 if i == dimension else 1 for i in range(len(shape))])
        return np.broadcast_to(r, shape)
    return Case(make, ref, (I32, F32, U32), smooth=False, batch=False)


# ---------------------------------------------------------------------------
# reductions

def _axes_st(d, nd):
    return tuple(sorted(d.draw(st.sets(st.sampled_from(range(nd)))) if nd else ()))


def _reduce_case(ref, dtypes, lo=-2.0, hi=2.0, away=0.0, linear=(), smooth=True):
    def make(d, dtype, deriv):
        shape = d.draw(shape_st(0, 3))
        axes = _axes_st(d, len(shape))
        return {"axes": axes}, lambda rng: [values(rng, shape, dtype, lo, hi, away)]
    return Case(make, lambda x, axes: ref(x, axis=axes).astype(x.dtype), dtypes,
                linear=linear, smooth=smooth)


def _arg_case(ref):
    def make(d, dtype, deriv):
        shape = d.draw(shape_st(1, 3))
        ax = d.draw(st.integers(0, len(shape) - 1))
        return ({"axes": (ax,), "index_dtype": I32},
                lambda rng: [values(rng, shape, dtype, -3, 3)])
    return Case(make, lambda x, axes, index_dtype: ref(x, axis=axes[0]).astype(index_dtype),
                FLOATS + (I32, BOOL), smooth=False)


def _cumsum_case():
    def make(d, dtype, deriv):
        shape = d.draw(shape_st(1, 3))
        axis = d.draw(st.integers(0, len(shape) - 1))
        return ({"axis": axis, "reverse": d.draw(st.booleans())},
                lambda rng: [values(rng, shape, dtype)])

    def ref(x, axis, reverse):
        if reverse:
            return np.flip(np.cumsum(np.flip(x, axis), axis=axis, dtype=x.dtype), axis)
        return np.cumsum(x, axis=axis, dtype=x.dtype)
    return Case(make, ref, CFLOATS + (I32,), linear=((0,),))


def _sort_case():
    def make(d, dtype, deriv):
        shape = d.draw(shape_st(1, 3))
        dimension = d.draw(st.integers(0, len(shape) - 1))
        n = d.draw(st.integers(1, 3))
        num_keys = d.draw(st.integers(1, min(n, 2)))        # operand 2 is never a key
        return ({"dimension": dimension, "num_keys": num_keys},
                lambda rng: [values(rng, shape, dtype, -3, 3) for _ in range(n)])

    def ref(*ops, dimension, num_keys):
        keys = [np.moveaxis(k, dimension, -1) for k in reversed(ops[:num_keys])]
        perm = np.moveaxis(np.lexsort(keys), -1, dimension)
        return [np.take_along_axis(o, perm, axis=dimension) for o in ops]
    return Case(make, ref, CFLOATS + (I32, BOOL), linear=((2,),))


# ---------------------------------------------------------------------------
# indexing

def _gather_case():
    def make(d, dtype, deriv):
        shape = d.draw(shape_st(1, 3))
        k = d.draw(st.integers(1, len(shape)))
        bshape = d.draw(shape_st(0, 2))
        return {}, lambda rng: [values(rng, shape, dtype), _indices(rng, shape[:k], bshape)]

    def ref(x, idx):
        k = idx.shape[-1]
        idx = np.clip(idx, 0, np.asarray(x.shape[:k]) - 1)
        return x[tuple(idx[..., j] for j in range(k))]
    return Case(make, ref, CFLOATS + (I32,), linear=((0,),))


def _indices(rng, bounds, bshape, unique=False, oob=True):
    """Index rows of shape bshape + (len(bounds),); out-of-range entries get clamped."""
    k = len(bounds)
    if unique:
        n = int(np.prod(bshape))
        cells = np.array(np.unravel_index(rng.permutation(int(np.prod(bounds)))[:n], bounds)).T
        return cells.reshape(bshape + (k,)).astype(np.int32)
    lo = -1 if oob else 0
    cols = [rng.integers(lo, b + (1 if oob else 0), size=bshape) for b in bounds]
    return np.stack(cols, axis=-1).astype(np.int32) if cols else np.zeros(bshape + (0,), np.int32)


def _scatter_case(add):
    def make(d, dtype, deriv):
        shape = d.draw(shape_st(1, 3))
        k = d.draw(st.integers(1, len(shape)))
        cells = int(np.prod(shape[:k]))
        if add:
            bshape = d.draw(shape_st(0, 2))
        else:          # scatter: unique indices, else the winner is unspecified
            bshape = (d.draw(st.integers(0, cells)),)
        ushape = bshape + shape[k:]
        return {}, lambda rng: [values(rng, shape, dtype),
                                _indices(rng, shape[:k], bshape, unique=not add),
                                values(rng, ushape, dtype)]

    def ref(x, idx, u):
        k = idx.shape[-1]
        idx = np.clip(idx, 0, np.asarray(x.shape[:k]) - 1)
        out = x.copy()
        index = tuple(idx[..., j] for j in range(k))
        if add:
            np.add.at(out, index, u)
        else:
            out[index] = u
        return out
    return Case(make, ref, CFLOATS + (I32,), linear=((0, 2), (2,)))


# ---------------------------------------------------------------------------
# svd


def _svd_case():
    """Matrices (and stacks) with well separated, nonzero singular values: U, s and V are
    then smooth functions of the matrix, and finite differences see them."""
    def make(d, dtype, deriv):
        batch = d.draw(shape_st(0, 1, 1, 2))
        m, n = d.draw(st.integers(1, 4)), d.draw(st.integers(1, 4))
        k = min(m, n)

        def gen(rng):
            def draw(shape):
                z = rng.standard_normal(shape)
                return z + 1j * rng.standard_normal(shape) if dtype.kind == "c" else z
            q1 = np.linalg.qr(draw(batch + (m, m)))[0][..., :k]
            q2 = np.linalg.qr(draw(batch + (n, n)))[0][..., :k]
            sv = 1 + 0.8 * np.arange(k) + rng.uniform(0, 0.3, batch + (k,))
            return [np.einsum("...ik,...k,...jk->...ij", q1, sv, np.conj(q2)).astype(dtype)]
        return {}, gen
    return Case(make, _svd_ref, CFLOATS, rtol32=1e-4)


def _svd_ref(x):
    """NumPy's thin SVD; complex pairs turned so that v_i's largest entry is real positive."""
    u, s, vh = np.linalg.svd(x, full_matrices=False)
    if x.dtype.kind == "c":
        ph = _phases(np.conj(np.swapaxes(vh, -1, -2)))
        u, vh = u * ph, vh * np.conj(np.swapaxes(ph, -1, -2))
    return [u, s, vh]


# ---------------------------------------------------------------------------
# solve, slogdet, cholesky, qr, eigh: well-conditioned matrices (and stacks), so that each
# factorization is a smooth function of the matrix and finite differences see it


def _well_conditioned(rng, shape, dtype, sym=False):
    """Orthogonal x spread singular values (distinct eigenvalues when sym) x orthogonal."""
    *batch, m, n = shape
    batch, k = tuple(batch), min(m, n)
    q1 = np.linalg.qr(rng.standard_normal(batch + (m, m)))[0][..., :k]
    q2 = q1 if sym else np.linalg.qr(rng.standard_normal(batch + (n, n)))[0][..., :k]
    sv = 1 + 0.8 * np.arange(k) + rng.uniform(0, 0.3, batch + (k,))
    if sym:
        sv = sv * np.where(rng.random(batch + (k,)) < 0.3, -1, 1)
    return np.einsum("...ik,...k,...jk->...ij", q1, sv, q2).astype(dtype)


def _matrix_case(ref, square=True, sym=False, rhs=False, pd=False, dtypes=FLOATS, **kw):
    """dtypes with complex: a + 0.1i b, b well conditioned too (still far from singular)."""
    def make(d, dtype, deriv):
        batch = d.draw(shape_st(0, 1, 1, 2))
        m = d.draw(st.integers(1, 4))
        n = m if square else d.draw(st.integers(1, 4))
        k = d.draw(st.integers(1, 3))

        def gen(rng):
            a = _well_conditioned(rng, batch + (m, n), dtype, sym)
            if dtype.kind == "c":
                a = a + 0.1j * _well_conditioned(rng, batch + (m, n), np.float64, sym)
            if pd:        # positive definite (cholesky): the square of a symmetric matrix
                a = (a @ np.swapaxes(a, -1, -2)).astype(dtype)
            return [a, values(rng, batch + (m, k), dtype)] if rhs else [a]
        return {}, gen
    return Case(make, ref, dtypes, rtol32=1e-4, **kw)


def _phases(v):
    """Per column (shape (..., 1, k)): the unit factor making its largest entry real positive."""
    top = np.take_along_axis(v, np.argmax(np.abs(v), axis=-2)[..., None, :], axis=-2)
    return (np.conj(top) / np.abs(top)).astype(v.dtype)


def _unit_phase(v):
    """Eigenvectors turned so that each one's largest-magnitude entry is real and positive."""
    return v * _phases(v)


def _eigh_ref(x):
    w, v = np.linalg.eigh(x)
    return [w, _unit_phase(v)]


def _eigh_case():
    """Symmetric (Hermitian for complex) matrices with well separated eigenvalues."""
    def make(d, dtype, deriv):
        batch = d.draw(shape_st(0, 1, 1, 2))
        n = d.draw(st.integers(1, 4))

        def gen(rng):
            if dtype.kind != "c":
                return [_well_conditioned(rng, batch + (n, n), dtype, sym=True)]
            q = np.linalg.qr(rng.standard_normal(batch + (n, n)) +
                             1j * rng.standard_normal(batch + (n, n)))[0]
            lam = (1 + 0.8 * np.arange(n) + rng.uniform(0, 0.3, batch + (n,))) * \
                np.where(rng.random(batch + (n,)) < 0.3, -1, 1)
            return [((q * lam[..., None, :]) @ np.conj(np.swapaxes(q, -1, -2))).astype(dtype)]
        return {}, gen
    return Case(make, _eigh_ref, CFLOATS, rtol32=1e-4)


def _eig_ref(x):
    w, v = np.linalg.eig(x)
    cdt = np.result_type(x.dtype, np.complex64)
    return [w.astype(cdt), _unit_phase(v.astype(cdt))]


def _eig_case():
    """P diag(λ) P⁻¹ with P well conditioned and λ well separated (a conjugate pair
    λ_0 ± 0.7i from a rotation block in some real matrices; complex λ for complex ones):
    eigenvalues and the gauge-fixed eigenvectors are then smooth functions of the matrix."""
    def make(d, dtype, deriv):
        batch = d.draw(shape_st(0, 1, 1, 2))
        n = d.draw(st.integers(1, 4))
        pair = n >= 2 and d.draw(st.booleans())

        def gen(rng):
            p = _well_conditioned(rng, batch + (n, n), np.float64)
            lam = (1 + 0.8 * np.arange(n) + rng.uniform(0, 0.3, batch + (n,))) * \
                np.where(rng.random(batch + (n,)) < 0.3, -1, 1)
            dmat = lam[..., None] * np.eye(n)
            if pair:
                dmat[..., 1, 1] = dmat[..., 0, 0]           # eigenvalues λ_0 ± 0.7i
                dmat[..., 0, 1], dmat[..., 1, 0] = 0.7, -0.7
            if dtype.kind == "c":
                p = p + 0.3j * _well_conditioned(rng, batch + (n, n), np.float64)
                dmat = dmat + 0.5j * np.eye(n) * rng.uniform(-1, 1, batch + (1, n))
            return [(p @ dmat @ np.linalg.inv(p)).astype(dtype)]
        return {}, gen
    return Case(make, _eig_ref, CFLOATS, rtol32=1e-3)


# ---------------------------------------------------------------------------
# dot_general

def _dot_case():
    def make(d, dtype, deriv):
        nb, nc = d.draw(st.integers(0, 2)), d.draw(st.integers(0, 2))
        nlf, nrf = d.draw(st.integers(0, 2)), d.draw(st.integers(0, 2))
        sz = lambda: d.draw(st.integers(1, 3))  # noqa: E731
        b, c = [sz() for _ in range(nb)], [sz() for _ in range(nc)]
        lf, rf = [sz() for _ in range(nlf)], [sz() for _ in range(nrf)]
        lperm = d.draw(st.permutations(range(nb + nc + nlf)))
        rperm = d.draw(st.permutations(range(nb + nc + nrf)))
        # logical axes: batch, contract, free; lperm[i] = position of logical axis i
        lshape, rshape = [0] * len(lperm), [0] * len(rperm)
        for i, s in enumerate(b + c + lf):
            lshape[lperm[i]] = s
        for i, s in enumerate(b + c + rf):
            rshape[rperm[i]] = s
        dn = ((tuple(lperm[nb + j] for j in range(nc)), tuple(rperm[nb + j] for j in range(nc))),
              (tuple(lperm[j] for j in range(nb)), tuple(rperm[j] for j in range(nb))))
        return ({"dimension_numbers": dn},
                lambda rng: [values(rng, tuple(lshape), dtype), values(rng, tuple(rshape), dtype)])

    def ref(x, y, dimension_numbers):
        (lc, rc), (lb, rb) = dimension_numbers
        letters = iter("abcdefghijklmnop")
        lx, ly = [None] * x.ndim, [None] * y.ndim
        for a, bb in list(zip(lb, rb)) + list(zip(lc, rc)):
            lx[a] = ly[bb] = next(letters)
        for i in range(x.ndim):
            lx[i] = lx[i] or next(letters)
        for i in range(y.ndim):
            ly[i] = ly[i] or next(letters)
        out = ([lx[a] for a in lb] + [lx[i] for i in range(x.ndim) if i not in lb + lc]
               + [ly[i] for i in range(y.ndim) if i not in rb + rc])
        return np.einsum(f"{''.join(lx)},{''.join(ly)}->{''.join(out)}", x, y).astype(x.dtype)
    return Case(make, ref, CFLOATS + (I32,), linear=((0,), (1,)), rtol32=1e-5)


# ---------------------------------------------------------------------------
# max pooling's windows (primitives/pool.py)

def _window_case(kind):
    """window_argmax / window_gather / window_scatter on (lead..., H, W) operands whose
    windows (any size, stride and dilation; H and W past the last window by up to a stride)
    come from the draw; offsets uniform in the window, and some outside it (-1, k), which
    gather and scatter take as offset 0."""
    def make(d, dtype, deriv):
        lead = d.draw(shape_st(0, 2, max_side=3))
        window = tuple(d.draw(st.integers(1, 3)) for _ in range(2))
        strides = tuple(d.draw(st.integers(1, 3)) for _ in range(2))
        dilation = tuple(d.draw(st.integers(1, 2)) for _ in range(2))
        out = tuple(d.draw(st.integers(1, 3)) for _ in range(2))
        size = tuple((o - 1) * s + (k - 1) * dl + 1 + d.draw(st.integers(0, s - 1))
                     for o, s, k, dl in zip(out, strides, window, dilation))
        params = {"window": window, "strides": strides, "dilation": dilation}
        k = window[0] * window[1]

        def offsets(rng):
            return rng.integers(-1 if kind != "window_argmax" else 0, k + 1,
                                size=lead + out).astype(np.int32)
        if kind == "window_argmax":
            return params, lambda rng: [values(rng, lead + size, dtype, -3, 3)]
        if kind == "window_gather":
            return params, lambda rng: [values(rng, lead + size, dtype), offsets(rng)]
        params["in_shape"] = size
        return params, lambda rng: [values(rng, lead + out, dtype), offsets(rng)]

    def windows(x_shape, out, window, strides, dilation):
        """(i, j, offset, row, col) of every window element."""
        kh, kw = window
        for i in range(out[0]):
            for j in range(out[1]):
                for a in range(kh):
                    for b in range(kw):
                        yield (i, j, a * kw + b, i * strides[0] + a * dilation[0],
                               j * strides[1] + b * dilation[1])

    def out_size(shape, window, strides, dilation):
        return tuple((n - (k - 1) * dl - 1) // s + 1
                     for n, k, s, dl in zip(shape[-2:], window, strides, dilation))

    def ref_argmax(x, window, strides, dilation):
        out = out_size(x.shape, window, strides, dilation)
        best = np.full(x.shape[:-2] + out, -np.inf)
        idx = np.zeros(x.shape[:-2] + out, np.int32)
        for i, j, k, r, c in windows(x.shape, out, window, strides, dilation):
            v = x[..., r, c]
            take = v > best[..., i, j]
            best[..., i, j] = np.where(take, v, best[..., i, j])
            idx[..., i, j] = np.where(take, k, idx[..., i, j])
        return idx

    def ref_gather(x, idx, window, strides, dilation):
        out = np.zeros(idx.shape, x.dtype)
        idx = np.where((idx < 0) | (idx >= window[0] * window[1]), 0, idx)
        for i, j, k, r, c in windows(x.shape, idx.shape[-2:], window, strides, dilation):
            out[..., i, j] = np.where(idx[..., i, j] == k, x[..., r, c], out[..., i, j])
        return out

    def ref_scatter(g, idx, window, strides, dilation, in_shape):
        out = np.zeros(g.shape[:-2] + tuple(in_shape), g.dtype)
        idx = np.where((idx < 0) | (idx >= window[0] * window[1]), 0, idx)
        for i, j, k, r, c in windows(out.shape, g.shape[-2:], window, strides, dilation):
            out[..., r, c] += np.where(idx[..., i, j] == k, g[..., i, j], 0)
        return out

    if kind == "window_argmax":
        return Case(make, ref_argmax, FLOATS + (I32,), smooth=False)
    ref = ref_gather if kind == "window_gather" else ref_scatter
    return Case(make, ref, FLOATS + (I32,), linear=((0,),))


# ---------------------------------------------------------------------------
# conv_general_dilated

def _conv_case():
    def make(d, dtype, deriv):
        nsp = d.draw(st.integers(1, 2))
        groups = d.draw(st.sampled_from([(1, 1), (2, 1), (1, 2)]))   # (feature, batch)
        g, bg = groups
        n, i, og = bg * d.draw(st.integers(1, 2)), d.draw(st.integers(1, 2)), \
            d.draw(st.integers(1, 2))
        ks = [d.draw(st.integers(1, 3)) for _ in range(nsp)]
        strides = tuple(d.draw(st.integers(1, 2)) for _ in range(nsp))
        lhs_dil = tuple(d.draw(st.integers(1, 2)) for _ in range(nsp))
        rhs_dil = tuple(d.draw(st.integers(1, 2)) for _ in range(nsp))
        sp, pads = [], []
        for k, ld, rd in zip(ks, lhs_dil, rhs_dil):
            s = d.draw(st.integers(1, 4))
            lo, hi = d.draw(st.integers(-1, 2)), d.draw(st.integers(-1, 2))
            while 1 + ld * (s - 1) + lo + hi < 1 + rd * (k - 1):   # at least one window
                hi += 1
            sp.append(s)
            pads.append((lo, hi))
        specs = tuple(tuple(d.draw(st.permutations(range(nsp + 2)))) for _ in range(3))
        canon_l = (n, g * i) + tuple(sp)
        canon_r = (g * bg * og, i) + tuple(ks)
        lshape, rshape = [0] * (nsp + 2), [0] * (nsp + 2)
        for j, a in enumerate(specs[0]):
            lshape[a] = canon_l[j]
        for j, a in enumerate(specs[1]):
            rshape[a] = canon_r[j]
        params = {"window_strides": strides, "padding": tuple(pads), "lhs_dilation": lhs_dil,
                  "rhs_dilation": rhs_dil, "dimension_numbers": specs,
                  "feature_group_count": g, "batch_group_count": bg}
        return params, lambda rng: [values(rng, tuple(lshape), dtype),
                                    values(rng, tuple(rshape), dtype)]
    return Case(make, _conv_ref, FLOATS + (I32,), linear=((0,), (1,)), rtol32=1e-5)


def _conv_ref(x, w, window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers,
              feature_group_count, batch_group_count):
    """The convolution by its definition: a loop over output positions and kernel offsets
    of the dilated, padded input in (N, C, spatial) order."""
    lspec, rspec, ospec = dimension_numbers
    x, w = np.transpose(x, lspec), np.transpose(w, rspec)
    n, c = x.shape[:2]
    dil = np.zeros((n, c) + tuple((s - 1) * d + 1 for s, d in zip(x.shape[2:], lhs_dilation)),
                   x.dtype)
    dil[(slice(None), slice(None)) + tuple(slice(None, None, d) for d in lhs_dilation)] = x
    xp = np.pad(dil, [(0, 0), (0, 0)] + [(max(lo, 0), max(hi, 0)) for lo, hi in padding])
    xp = xp[(slice(None), slice(None)) + tuple(
        slice(max(-lo, 0), xp.shape[2 + j] - max(-hi, 0)) for j, (lo, hi) in enumerate(padding))]
    o, i = w.shape[:2]
    ks = w.shape[2:]
    g, bg = feature_group_count, batch_group_count
    out_sp = [max(0, (p - (k - 1) * rd - 1) // s + 1) for p, k, s, rd in
              zip(xp.shape[2:], ks, window_strides, rhs_dilation)]
    nb, per_group = n // bg, o // (g * bg)
    out = np.zeros((nb, o) + tuple(out_sp), x.dtype)
    for oc in range(o):
        grp = oc // per_group
        chans = slice(grp * i, (grp + 1) * i) if g > 1 else slice(0, i)
        for b in range(nb):
            src = b + (grp * nb if bg > 1 else 0)
            for pos in np.ndindex(*out_sp):
                acc = 0
                for k in np.ndindex(*ks):
                    at = tuple(p * s + kk * rd for p, s, kk, rd in
                               zip(pos, window_strides, k, rhs_dilation))
                    acc = acc + np.dot(xp[(src, chans) + at], w[(oc, slice(None)) + k])
                out[(b, oc) + pos] = acc
    return np.transpose(out, np.argsort(ospec))


# ---------------------------------------------------------------------------
# random bits: an independent pure-Python Threefry-2x32 (20 rounds) as the reference

_ROT = ((13, 15, 26, 6), (17, 29, 16, 24))


def threefry_scalar(k0, k1, x0, x1):
    m = 0xFFFFFFFF
    ks = (k0, k1, k0 ^ k1 ^ 0x1BD11BDA)
    x0, x1 = (x0 + k0) & m, (x1 + k1) & m
    for block in range(5):
        for r in _ROT[block % 2]:
            x0 = (x0 + x1) & m
            x1 = (((x1 << r) | (x1 >> (32 - r))) & m) ^ x0
        x0 = (x0 + ks[(block + 1) % 3]) & m
        x1 = (x1 + ks[(block + 2) % 3] + block + 1) & m
    return x0, x1


def _threefry_case():
    def make(d, dtype, deriv):
        full = d.draw(shape_st(0, 2))
        shapes = _ensure_one_full([full if d.draw(st.booleans()) else () for _ in range(4)], full)
        return {}, lambda rng: [rng.integers(0, 2 ** 32, size=s, dtype=np.uint64).astype(U32)
                                for s in shapes]

    def ref(k0, k1, x0, x1):
        b = np.broadcast_arrays(k0, k1, x0, x1)
        out = np.array([threefry_scalar(*map(int, t)) for t in zip(*(a.ravel() for a in b))],
                       dtype=np.uint32).reshape(-1, 2)
        return [out[:, 0].reshape(b[0].shape), out[:, 1].reshape(b[0].shape)]
    return Case(make, ref, (U32,), smooth=False)


def _fft_case():
    """Real operands draw RFFT, complex ones FFT, IFFT or IRFFT, over 1-2 trailing axes."""
    def make(d, dtype, deriv):
        shape = d.draw(shape_st(1, 3, 1, 5))
        k = d.draw(st.integers(1, min(2, len(shape))))
        lengths = shape[-k:]
        kind = "RFFT" if dtype.kind == "f" else d.draw(st.sampled_from(["FFT", "IFFT", "IRFFT"]))
        if kind == "IRFFT":
            shape = shape[:-1] + (lengths[-1] // 2 + 1,)
        return dict(fft_type=kind, fft_lengths=lengths), lambda rng: [values(rng, shape, dtype)]

    def ref(x, fft_type, fft_lengths):
        f = {"FFT": np.fft.fftn, "IFFT": np.fft.ifftn, "RFFT": np.fft.rfftn,
             "IRFFT": np.fft.irfftn}[fft_type]
        return f(x, s=fft_lengths, axes=tuple(range(-len(fft_lengths), 0)))
    return Case(make, ref, (F64, C128), linear=((0,),))


# ---------------------------------------------------------------------------
# the table

def _rem_case():
    """fmod with x = y * (k + f), f away from 0 and 1, so that fmod is smooth there."""
    def make(d, dtype, deriv):
        full = d.draw(shape_st())
        xshape, yshape = _ensure_one_full([full if d.draw(st.booleans()) else ()
                                           for _ in range(2)], full)

        def gen(rng):
            y = _nonzero(-2, 2)(rng, yshape, dtype)
            if dtype.kind in "iu":
                return [values(rng, xshape, dtype, -20, 20), y]
            if not xshape and yshape:         # one x, many y: y = x / q
                x = _nonzero(-2, 2)(rng, (), np.float64)
                q = _away_from_integers(rng, yshape, np.float64)
                return [np.asarray(x, dtype), np.asarray(x / q, dtype)]
            q = _away_from_integers(rng, xshape, np.float64)
            return [np.asarray(y * q, dtype), y]
        return {}, gen
    return Case(make, lambda x, y: np.fmod(x, y), FLOATS + (I32,))


def _max_min_case(ref):
    """Independent continuous draws: ties have probability zero for floats (complex:
    lexicographic order, as NumPy; the real parts decide)."""
    return binary(ref, dtypes=CFLOATS + (I32, BOOL))


CASES: dict[str, Case] = {
    "neg": Case(unary(np.negative).make, np.negative, CFLOATS + (I32,), linear=((0,),)),
    "sin": unary(np.sin, -3, 3, dtypes=CFLOATS),
    "cos": unary(np.cos, -3, 3, dtypes=CFLOATS),
    "tan": unary(np.tan, -1.2, 1.2, rtol32=1e-5, dtypes=CFLOATS),
    "asin": unary(np.arcsin, -0.9, 0.9, dtypes=CFLOATS),
    "acos": unary(np.arccos, -0.9, 0.9, dtypes=CFLOATS),
    "atan": unary(np.arctan, -3, 3, dtypes=CFLOATS),
    "asinh": unary(np.arcsinh, -3, 3, dtypes=CFLOATS),
    "acosh": unary(np.arccosh, 1.2, 4, dtypes=CFLOATS),
    "atanh": unary(np.arctanh, -0.8, 0.8, dtypes=CFLOATS),
    "sinh": unary(np.sinh, -3, 3, dtypes=CFLOATS),
    "cosh": unary(np.cosh, -3, 3, dtypes=CFLOATS),
    "tanh": unary(np.tanh, -3, 3, dtypes=CFLOATS),
    "exp": unary(np.exp, -3, 3, dtypes=CFLOATS),
    "log": unary(np.log, 0.2, 4, dtypes=CFLOATS),
    "log1p": unary(np.log1p, -0.8, 3, dtypes=CFLOATS),
    "expm1": unary(np.expm1, -3, 3, dtypes=CFLOATS),
    "sqrt": unary(np.sqrt, 0.2, 4, dtypes=CFLOATS),
    "rsqrt": unary(lambda x: (1 / np.sqrt(_wide(x))).astype(x.dtype), 0.2, 4, dtypes=CFLOATS),
    "logistic": unary(lambda x: (1 / (1 + np.exp(-_wide(x)))).astype(x.dtype), -5, 5,
                      dtypes=CFLOATS),
    "erf": unary(_erf_ref, -3, 3),
    # primitives/special.py
    "lgamma": unary(_math_ref(math.lgamma), 0.2, 5),
    "erfc": unary(_math_ref(math.erfc), -3, 3),
    "digamma": unary(_scipy_ref("digamma"), 0.3, 5),
    "ndtri": unary(_scipy_ref("ndtri"), 0.05, 0.95),
    "erf_inv": unary(_scipy_ref("erfinv"), -0.9, 0.9),
    "bessel_i0e": unary(_scipy_ref("i0e"), -5, 5, away=0.2),
    "bessel_i1e": unary(_scipy_ref("i1e"), -5, 5, away=0.2),
    "softplus": unary(lambda x: np.logaddexp(x, 0), -5, 5),
    "abs": unary(np.abs, -3, 3, away=0.2, dtypes=CFLOATS + (I32,)),
    "sign": unary(np.sign, -3, 3, away=0.2, dtypes=CFLOATS + (I32,), smooth=False),
    "real": Case(unary(np.real).make, np.real, (C128,), linear=((0,),)),
    "imag": Case(unary(np.imag).make, np.imag, (C128,), linear=((0,),)),
    "conj": Case(unary(np.conj).make, np.conj, (C128,), linear=((0,),)),
    "complex": binary(lambda x, y: x + 1j * y, linear=((0, 1), (0,), (1,))),
    "floor": unary(np.floor, dtypes=FLOATS, smooth=False,
                   gen=lambda s, dt: lambda rng: [_away_from_integers(rng, s, dt)]),
    "ceil": unary(np.ceil, dtypes=FLOATS, smooth=False,
                  gen=lambda s, dt: lambda rng: [_away_from_integers(rng, s, dt)]),
    "round": _round_case(),
    "not": unary(np.invert, dtypes=(BOOL, I32, U32), smooth=False,
                 gen=lambda s, dt: lambda rng: [values(rng, s, dt, 0, 1000)]),
    "is_finite": unary(np.isfinite, smooth=False, gen=lambda s, dt: lambda rng: [
        np.where(rng.random(s) < 0.3, rng.choice([np.inf, -np.inf, np.nan], size=s),
                 values(rng, s, dt)).astype(dt)]),
    "integer_pow": _integer_pow_case(),
    "convert_element_type": _convert_case(),
    "add": binary(np.add, dtypes=CFLOATS + (I32,), linear=((0, 1), (1,))),
    "sub": binary(np.subtract, dtypes=CFLOATS + (I32,), linear=((0, 1), (1,))),
    "mul": binary(np.multiply, dtypes=CFLOATS + (I32,), linear=((0,), (1,))),
    "div": binary(_int_div_ref, gens=(lambda rng, s, dt: values(rng, s, dt, -9, 9),
                                      _nonzero(-2, 2)),
                  dtypes=CFLOATS + (I32,), linear=((0,),)),
    "pow": binary(lambda x, y: np.power(x, y),
                  gens=(lambda rng, s, dt: values(rng, s, dt, 0.5, 2),
                        lambda rng, s, dt: values(rng, s, dt, -2, 2)), dtypes=CFLOATS,
                  rtol32=1e-5),
    "max": _max_min_case(np.maximum),
    "min": _max_min_case(np.minimum),
    "atan2": binary(np.arctan2, gens=(_nonzero(-2, 2),) * 2),
    "logaddexp": binary(np.logaddexp),
    "rem": _rem_case(),
    "eq": _cmp(np.equal),
    "ne": _cmp(np.not_equal),
    "lt": _cmp(np.less),
    "le": _cmp(np.less_equal),
    "gt": _cmp(np.greater),
    "ge": _cmp(np.greater_equal),
    "and": binary(np.bitwise_and, dtypes=(BOOL, I32, U32), smooth=False),
    "or": binary(np.bitwise_or, dtypes=(BOOL, I32, U32), smooth=False),
    "xor": binary(np.bitwise_xor, dtypes=(BOOL, I32, U32), smooth=False),
    "shift_right_logical": _shift_case(_logical_shift_right),
    "shift_left": _shift_case(lambda x, y: np.left_shift(x, y.astype(x.dtype))),
    "select": _select_case(),
    "broadcast_in_dim": _bid_case(),
    "reshape": _reshape_case(),
    "transpose": _transpose_case(),
    "squeeze": _squeeze_case(),
    "expand_dims": _expand_dims_case(),
    "rev": _rev_case(),
    "concatenate": _concatenate_case(),
    "pad": _pad_case(),
    "slice": _slice_case(),
    "dynamic_slice": _dynamic_slice_case(),
    "dynamic_update_slice": _dynamic_update_slice_case(),
    "iota": _iota_case(),
    "reduce_sum": _reduce_case(np.sum, CFLOATS + (I32,), linear=((0,),)),
    "reduce_max": _reduce_case(np.max, CFLOATS + (I32, BOOL)),
    "reduce_min": _reduce_case(np.min, CFLOATS + (I32, BOOL)),
    "reduce_prod": _reduce_case(np.prod, CFLOATS + (I32,), lo=-1.5, hi=1.5, away=0.5),
    "argmax": _arg_case(np.argmax),
    "argmin": _arg_case(np.argmin),
    "cumsum": _cumsum_case(),
    "sort": _sort_case(),
    "gather": _gather_case(),
    "scatter_add": _scatter_case(add=True),
    "scatter": _scatter_case(add=False),
    "dot_general": _dot_case(),
    "conv_general_dilated": _conv_case(),
    "window_argmax": _window_case("window_argmax"),
    "window_gather": _window_case("window_gather"),
    "window_scatter": _window_case("window_scatter"),
    "svd": _svd_case(),
    "solve": _matrix_case(np.linalg.solve, rhs=True, linear=((1,),), dtypes=CFLOATS),
    "slogdet": _matrix_case(lambda x: list(np.linalg.slogdet(x))),
    "cholesky": _matrix_case(np.linalg.cholesky, sym=True, pd=True),
    "qr": _matrix_case(lambda x: list(np.linalg.qr(x)), square=False),
    "eigh": _eigh_case(),
    "eig": _eig_case(),
    "fft": _fft_case(),
    "threefry2x32": _threefry_case(),
    "stop_gradient": unary(lambda x: x, dtypes=CFLOATS + (I32, BOOL), smooth=False),
}

# Primitives whose operand is a traced function (custom rules, rematerialization): their
# behaviour is specified through the public API, so they are tested in the named file.
EXTERNAL: dict[str, str] = {
    "custom_jvp_call": "test_custom.py",
    "custom_vjp_call": "test_custom.py",
    "custom_lin": "test_custom.py",
    "checkpoint": "test_custom.py",
    "name": "test_custom.py",
    "cond": "test_control_flow.py",
    "while": "test_control_flow.py",
    "scan": "test_control_flow.py",
    "jit": "test_jit.py",
    "fused": "test_passes.py",
    "zeta": "test_special.py",          # differentiable in q only: its own checks there
    "zeta_dx": "test_special.py",
    # the facade's plumbing: hooks, retain_grad and autograd.Function as primitives
    "facade_tap": "test_facade_autograd.py",
    "hook_call": "test_facade_autograd.py",
    "facade_node_hook": "test_facade_autograd.py",     # grad_fn hooks on op nodes
    "node_hook_call": "test_facade_autograd.py",
    "autograd_function": "test_facade_function.py",
    "autograd_function_linear": "test_facade_function.py",
    "autograd_function_backward": "test_facade_function.py",
    # ft.compile's captured calls and hooks
    "compiled": "test_compile.py",
    "tensor_hook": "test_compile.py",
    "tensor_hook_linear": "test_compile.py",
    "module_backward_hook": "test_compile.py",
    "module_backward_hook_linear": "test_compile.py",
    "module_backward_hook_call": "test_compile.py",
    "module_hook_call": "test_compile.py",
    # jax.debug.print's and jax.debug.callback's host callbacks, jax.pure_callback, and
    # custom_vmap's call (a user rule for batching)
    "debug_print": "test_jax_api.py",
    "debug_callback": "test_callbacks.py",
    "pure_callback": "test_callbacks.py",
    "custom_vmap_call": "test_callbacks.py",
    # the engine's early delivery of final leaf gradients
    "deliver_gradients": "test_early_delivery.py",
}

# ---------------------------------------------------------------------------
# collectives: exercised under ft.vmap(..., axis_name=AXIS) (tests/test_registry_collectives.py).
# make(d, dtype, n) -> (params, gen); gen(rng) gives the operands stacked along a leading
# axis of n entries; ref(x_stacked, **params) the stacked per-entry results.

AXIS = "i"


@dataclass
class CollectiveCase:
    make: Callable
    ref: Callable
    linear: bool = True
    dtypes: tuple = FLOATS


def _stacked(shape_strategy=None):
    def make(d, dtype, n, **params):
        shape = d.draw(shape_strategy or shape_st(0, 2))
        return params, lambda rng: [values(rng, (n,) + shape, dtype)]
    return make


def _replicate(y, n):
    return np.broadcast_to(y, (n,) + np.shape(y)).copy()


def _gather_make(d, dtype, n):
    shape = d.draw(shape_st(1, 2))
    tiled = d.draw(st.booleans())
    axis = d.draw(st.integers(0, len(shape) - tiled))
    return ({"axes": (AXIS,), "axis": axis, "tiled": tiled, "size": n},
            lambda rng: [values(rng, (n,) + shape, dtype)])


def _gather_ref(x, axes, axis, tiled, size):
    one = np.concatenate(list(x), axis=axis) if tiled else np.stack(list(x), axis=axis)
    return _replicate(one, len(x))


def _scatter_make(d, dtype, n):
    shape = list(d.draw(shape_st(1, 2)))
    tiled = d.draw(st.booleans())
    s = d.draw(st.integers(0, len(shape) - 1))
    shape[s] = n * shape[s] if tiled else n
    return ({"axes": (AXIS,), "scatter_dimension": s, "tiled": tiled, "size": n},
            lambda rng: [values(rng, (n,) + tuple(shape), dtype)])


def _scatter_ref(x, axes, scatter_dimension, tiled, size):
    total = x.sum(0)
    if tiled:
        return np.stack(np.split(total, len(x), axis=scatter_dimension))
    return np.stack([np.take(total, i, axis=scatter_dimension) for i in range(len(x))])


def _ppermute_make(d, dtype, n):
    shape = d.draw(shape_st(0, 2))
    dsts = d.draw(st.permutations(range(n)))
    keep = d.draw(st.lists(st.booleans(), min_size=n, max_size=n))
    perm = tuple((s, t) for s, (t, k) in enumerate(zip(dsts, keep)) if k)
    return {"axes": (AXIS,), "perm": perm}, lambda rng: [values(rng, (n,) + shape, dtype)]


def _ppermute_ref(x, axes, perm):
    out = np.zeros_like(x)
    for s, t in perm:
        out[t] = x[s]
    return out


def _axes_only(d, dtype, n):
    return _stacked()(d, dtype, n, axes=(AXIS,))


COLLECTIVES: dict[str, CollectiveCase] = {
    "psum": CollectiveCase(_axes_only, lambda x, axes: _replicate(x.sum(0), len(x))),
    "pmax": CollectiveCase(_axes_only, lambda x, axes: _replicate(x.max(0), len(x)),
                           linear=False),
    "pmin": CollectiveCase(_axes_only, lambda x, axes: _replicate(x.min(0), len(x)),
                           linear=False),
    "all_gather": CollectiveCase(_gather_make, _gather_ref),
    "psum_scatter": CollectiveCase(_scatter_make, _scatter_ref),
    "ppermute": CollectiveCase(_ppermute_make, _ppermute_ref),
    "axis_index": CollectiveCase(
        lambda d, dtype, n: ({"axes": (AXIS,)}, lambda rng: [np.zeros((n,), np.int32)]),
        lambda x, axes: np.arange(len(x), dtype=np.int32), linear=False, dtypes=(I32,)),
}
