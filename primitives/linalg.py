"""dot_general: batched tensor contraction; svd: the thin singular value decomposition;
solve, slogdet, cholesky, qr, eigh, eig: the factorizations ft.linalg and fnp.linalg build on.

dimension_numbers = ((lhs_contract, rhs_contract), (lhs_batch, rhs_batch)); the result
axes are batch, then lhs free, then rhs free (XLA's convention).
"""
from __future__ import annotations

import contextlib
import enum
import math

import numpy as np

from functrans.core import DTypeError, ShapedArray, ShapeError, UndefinedPrimal, Zero
from .base import (NUMERIC, aval_of, bdim_size, broadcast_batched, complex_dtype, defprim,
                   moveaxis, real_dtype)
from .elementwise import abs as _abs, complex as _complex
from .elementwise import add, conj, convert_element_type, div, eq, imag, mul, neg, real, sub
from .reductions import reduce_max, reduce_sum
from .shape import broadcast_in_dim, concatenate, slice, transpose


class Precision(enum.Enum):
    """jax.lax.Precision: the precision asked of a matrix product. The CPU computes every
    product at the operands' own precision, which each level allows, so it is checked and
    otherwise changes nothing."""
    DEFAULT = 0
    HIGH = 1
    HIGHEST = 2

    @classmethod
    def _missing_(cls, value):
        names = {"default": cls.DEFAULT, "fastest": cls.DEFAULT, "bfloat16": cls.DEFAULT,
                 "high": cls.HIGH, "bfloat16_3x": cls.HIGH, "tensorfloat32": cls.HIGH,
                 "highest": cls.HIGHEST, "float32": cls.HIGHEST}
        if isinstance(value, str) and value.lower() in names:
            return names[value.lower()]
        return None

    def __str__(self):
        return self.name


def canonicalize_precision(precision):
    """JAX's accepted precision arguments (None, a Precision or its name, or a pair of them
    for the two operands), as Precisions; anything else raises JAX's ValueError."""
    if precision is None:
        return None
    if isinstance(precision, (Precision, str)):
        try:
            return Precision(precision)
        except ValueError:
            pass
    elif isinstance(precision, (list, tuple)) and len(precision) == 2:
        return tuple(canonicalize_precision(p) for p in precision)
    raise ValueError(f"Precision argument must be one of:\n- None,\n- a string "
                     f"({', '.join(repr(n) for n in ('default', 'high', 'highest'))}),\n"
                     f"- a lax.Precision value,\n- a tuple of two lax.Precision values or "
                     f"strings; got {precision!r}.")


def _free(ndim, contract, batch):
    return tuple(i for i in range(ndim) if i not in contract and i not in batch)


# OpenBLAS's kernel for small products runs a right operand stored transposed (B's rows
# along its columns: attention's scores q k^T, its backward's dout v^T) at about half the
# speed of the plain layout: on the Zen 4 machine, 64 products of 64x32 by 32x64, 0.276 ms
# against 0.154 (with the transposing copy 0.196); beyond about 2^19 multiply-adds a product
# the packing GEMM takes either layout alike, and the copy loses.
SMALL_NT_COPY = 1 << 19


def _plain_right(xm, ym):
    """The right operand of a NumPy batched matmul xm @ ym (stacks of (m, k) and (k, n)), as
    a C-contiguous copy where it is stored transposed (unit stride along k, not along n),
    the left one is not, and each product is at most SMALL_NT_COPY multiply-adds; else ym.
    The eager impl and the CPU backend's emitter (_batched_emitter) both ask it, so that
    both run the same BLAS calls, with the same bits."""
    if ym.ndim > 2 and type(ym) is np.ndarray and ym.dtype.kind in "fc":     # BLAS's dtypes
        m, k, n, it = xm.shape[-2], ym.shape[-2], ym.shape[-1], ym.itemsize
        if ym.strides[-2] == it and ym.strides[-1] != it and xm.strides[-1] == it \
                and n > 1 and m * k * n <= SMALL_NT_COPY:
            return np.ascontiguousarray(ym)
    return ym


def _dot_impl(xp, x, y, dimension_numbers):
    (lc, rc), (lb, rb) = dimension_numbers
    x, y = xp.asarray(x), xp.asarray(y)
    if not lb:
        if x.ndim == 2 and y.ndim == 2 and len(lc) == 1:   # BLAS handles transposed views
            return xp.matmul(x if lc == (1,) else x.T, y if rc == (0,) else y.T)
        if x.ndim == 2 and y.ndim == 1 and lc == (1,):
            return xp.matmul(x, y)
        if x.ndim == 1 and y.ndim == 2 and rc == (0,):
            return xp.matmul(x, y)
        return _contract(xp, x, y, lc, rc)
    lf, rf = _free(x.ndim, lc, lb), _free(y.ndim, rc, rb)
    if not lc and xp is np:   # batched outer product (per-example gradients of dense layers):
        nb, nl = len(lb), len(lf)   # einsum's loop is about twice as fast as matmul with k=1
        xl = [lb.index(i) if i in lb else nb + lf.index(i) for i in range(x.ndim)]
        yl = [rb.index(i) if i in rb else nb + nl + rf.index(i) for i in range(y.ndim)]
        nr = len(rf)
        if nl and nr and math.prod([y.shape[i] for i in rf]) < math.prod([x.shape[i] for i in lf]):
            # einsum's inner loop runs along the last output axis: make that the longer
            # free block and return a transposed view (the same values, 2-3x faster)
            order = list(range(nb)) + list(range(nb + nl, nb + nl + nr)) + list(range(nb, nb + nl))
            return np.einsum(x, xl, y, yl, order).transpose(
                [order.index(k) for k in range(len(order))])
        return np.einsum(x, xl, y, yl, list(range(nb + nl + nr)))
    bshape = tuple(x.shape[i] for i in lb)
    m = math.prod([x.shape[i] for i in lf])
    n = math.prod([y.shape[i] for i in rf])
    k = math.prod([x.shape[i] for i in lc])
    xm = xp.transpose(x, lb + lf + lc).reshape(bshape + (m, k))
    ym = xp.transpose(y, rb + rc + rf).reshape(bshape + (k, n))
    out = xp.matmul(xm, _plain_right(xm, ym))
    return out.reshape(bshape + tuple(x.shape[i] for i in lf) + tuple(y.shape[i] for i in rf))


def _as_matrix(x, axes, contract_last):
    """x as a (free, contracted) matrix (contract_last) or its transpose's view, without
    moving data, when `axes` are x's trailing (resp. leading) axes in order; else None."""
    k = len(axes)
    if axes != tuple(range(x.ndim - k, x.ndim) if contract_last else range(k)):
        return None
    free = math.prod(x.shape[:x.ndim - k] if contract_last else x.shape[k:])
    kk = math.prod(x.shape[x.ndim - k:] if contract_last else x.shape[:k])
    return x.reshape(free, kk) if contract_last else x.reshape(kk, free).T


def _contract(xp, x, y, lc, rc):
    """A contraction without batch axes as one GEMM where both operands are matrices
    already (their contracted axes leading or trailing, in the same order: (T, B, ...)
    activations against (T, B, ...) cotangents is one GEMM over T * B); a contraction
    that includes both leading axes as a batched product summed over that axis (no
    operand copied into another layout); else tensordot (which copies)."""
    lf = tuple(i for i in range(x.ndim) if i not in lc)
    rf = tuple(i for i in range(y.ndim) if i not in rc)
    shape = tuple(x.shape[i] for i in lf) + tuple(y.shape[i] for i in rf)
    lc, rc = (tuple(t) for t in zip(*sorted(zip(lc, rc)))) if lc else (lc, rc)
    if tuple(sorted(rc)) == rc and lc:
        for xl in (True, False):
            xm = _as_matrix(x, lc, xl)
            if xm is None:
                continue
            for yl in (False, True):
                ym = _as_matrix(y, rc, yl)
                if ym is not None:
                    out = xp.matmul(xm, ym.T)
                    # not a view when the GEMM has the result's shape (a weight gradient):
                    # a gradient that is a view is copied before it is handed out
                    return out if out.shape == shape else out.reshape(shape)
    lead = [i for i, (a, b) in enumerate(zip(lc, rc)) if a == 0 and b == 0]
    if lead and len(lc) > 1:
        rest = [i for i in range(len(lc)) if i != lead[0]]
        dn = ((tuple(lc[i] for i in rest), tuple(rc[i] for i in rest)), ((0,), (0,)))
        out = _dot_impl(xp, x, y, dn)
        return out.sum(axis=0, dtype=out.dtype)
    return xp.tensordot(x, y, axes=(lc, rc))


def _dot_shape(x, y, dimension_numbers):
    (lc, rc), (lb, rb) = dimension_numbers
    if x.dtype != y.dtype or x.dtype.kind not in NUMERIC:
        raise DTypeError(f"operands must share a numeric dtype, got {x.str_short()} and "
                         f"{y.str_short()}")
    if len(lc) != len(rc) or len(lb) != len(rb):
        raise ShapeError(f"dimension_numbers {dimension_numbers} pair unequal numbers of axes")
    for a, b in list(zip(lc, rc)) + list(zip(lb, rb)):
        if not (0 <= a < x.ndim and 0 <= b < y.ndim) or x.shape[a] != y.shape[b]:
            raise ShapeError(
                f"cannot contract/batch {x.str_short()} with {y.str_short()} under "
                f"dimension_numbers {dimension_numbers}: axis {a} and axis {b} differ")
    lf, rf = _free(x.ndim, lc, lb), _free(y.ndim, rc, rb)
    shape = (tuple(x.shape[i] for i in lb) + tuple(x.shape[i] for i in lf)
             + tuple(y.shape[i] for i in rf))
    return ShapedArray(shape, x.dtype, x.weak_type and y.weak_type)


def _transpose_lhs(ct, y, x_aval, dimension_numbers, swap):
    """Cotangent of the lhs: contract ct's rhs-free axes with y's free axes."""
    (lc, rc), (lb, rb) = dimension_numbers
    x_nd, y_nd = x_aval.ndim, aval_of(y).ndim
    lf, rf = _free(x_nd, lc, lb), _free(y_nd, rc, rb)
    nb = len(lb)
    if swap:       # ct axes are batch, rhs-free(=our x), lhs-free(=y's free)
        ct_x_free = tuple(range(nb + len(rf), nb + len(rf) + len(lf)))
        ct_y_free = tuple(range(nb, nb + len(rf)))
    else:
        ct_x_free = tuple(range(nb, nb + len(lf)))
        ct_y_free = tuple(range(nb + len(lf), nb + len(lf) + len(rf)))
    dims = ((ct_y_free, rf), (tuple(range(nb)), rb))
    out = dot_general(ct, y, dimension_numbers=dims)
    # out axes: batch, ct's remaining axes (the x-free ones, in ct order), y's contract axes
    # in increasing order of y position.
    rest = [i for i in range(aval_of(ct).ndim) if i not in ct_y_free and i >= nb]
    order_in_out = {ax: nb + j for j, ax in enumerate(rest)}
    rc_sorted = sorted(rc)
    perm = [0] * x_nd
    for j, b in enumerate(lb):
        perm[b] = j
    for j, f in enumerate(lf):
        perm[f] = order_in_out[ct_x_free[j]]
    for a, b in zip(lc, rc):
        perm[a] = nb + len(rest) + rc_sorted.index(b)
    if perm == list(range(x_nd)):
        return out
    return transpose(out, permutation=tuple(perm))


def _transpose_rhs(ct, x, y_aval, dimension_numbers):
    """Cotangent of the rhs as dot_general(x, ct), so that the common layouts (x @ W)
    come out in y's own axis order without a transpose."""
    (lc, rc), (lb, rb) = dimension_numbers
    x_nd, y_nd = aval_of(x).ndim, y_aval.ndim
    lf, rf = _free(x_nd, lc, lb), _free(y_nd, rc, rb)
    nb = len(lb)
    ct_x_free = tuple(range(nb, nb + len(lf)))
    out = dot_general(x, ct, dimension_numbers=((lf, ct_x_free), (lb, tuple(range(nb)))))
    # out axes: batch, x's contracting axes in increasing x order, then y's free axes
    lc_sorted = sorted(lc)
    perm = [0] * y_nd
    for j, b in enumerate(rb):
        perm[b] = j
    for a, b in zip(lc, rc):
        perm[b] = nb + lc_sorted.index(a)
    for j, f in enumerate(rf):
        perm[f] = nb + len(lc) + j
    if perm == list(range(y_nd)):
        return out
    return transpose(out, permutation=tuple(perm))


def _dot_transpose(ct, x, y, dimension_numbers):
    ct_x = ct_y = None
    if type(x) is UndefinedPrimal:
        ct_x = _transpose_lhs(ct, y, x.aval, dimension_numbers, swap=False)
    if type(y) is UndefinedPrimal:
        ct_y = _transpose_rhs(ct, x, y.aval, dimension_numbers)
    return [ct_x, ct_y]


def _dot_batch(vals, dims, dimension_numbers):
    (x, y), (dx, dy) = vals, dims
    (lc, rc), (lb, rb) = dimension_numbers
    inc = lambda t: tuple(i + 1 for i in t)  # noqa: E731
    if dx is not None and dy is not None:
        x, y = moveaxis(x, dx, 0), moveaxis(y, dy, 0)
        dn = ((inc(lc), inc(rc)), ((0,) + inc(lb), (0,) + inc(rb)))
        return dot_general(x, y, dimension_numbers=dn), 0
    if dx is not None:    # batch axis becomes the first free axis of the lhs
        x = moveaxis(x, dx, 0)
        out = dot_general(x, y, dimension_numbers=((inc(lc), rc), (inc(lb), rb)))
        return out, len(lb)
    y = moveaxis(y, dy, 0)         # the first free axis of the rhs
    out = dot_general(x, y, dimension_numbers=((lc, inc(rc)), (lb, inc(rb))))
    return out, len(lb) + aval_of(x).ndim - len(lc) - len(lb)


# ---------------------------------------------------------------------------
# CPU emitter (the protocol is in base.py)

_MATMUL = {((1,), (0,)): ("", ""), ((0,), (0,)): (".T", ""), ((1,), (1,)): ("", ".T"),
           ((0,), (1,)): (".T", ".T")}


def _no_input(i):
    return False


class NativeGemm:
    """A native matrix product for the CPU's few-row float32 products (a recurrent layer's
    step: a batch of rows times a weight matrix, once per time step), where OpenBLAS spends
    most of its time packing the weight (measured, one thread, 20x256 @ 256x1024: 127 us
    against 77 us for backends/native/conv.py's register-tiled kernel; from about 64 rows on
    OpenBLAS is as fast or faster). The native backend installs `kernel(m, k, n)` (backends/
    cpu.py, on import), asked when a product is lowered: a function (x, y, out) -> bool
    writing out = x @ y for C-contiguous float32 matrices of those shapes and answering
    False (nothing written) for an operand that is not C-contiguous, or None when there is
    none (no compiler, cpu_backend="numpy", a column count the kernel does not take); the
    lowered line falls back to NumPy's matmul. Asked only for weights of MIN_WEIGHT
    elements or more, where the packing is what costs: on smaller ones (a 32x64 @ 64x64
    step, 3 us) the two run at the same speed.

    `held` maps id(y) to [y, the kernel's layout of y or None] for the weights a loop holds
    unchanged while it runs (`holding`: a scan's consts): the kernel may lay such a weight
    out once for the loop (the native backend: contiguous panels) instead of reading its
    row-major rows at every step."""

    kernel = None
    held: dict = {}

    @contextlib.contextmanager
    def holding(self, arrays):
        """Declare the float32 2-D `arrays` unchanged until the block ends (a scan's consts
        over its steps); those not already held are released at its end."""
        mine = [a for a in arrays if type(a) is np.ndarray and a.dtype == np.float32
                and a.ndim == 2 and a.size >= MIN_WEIGHT and id(a) not in self.held]
        for a in mine:
            self.held[id(a)] = [a, None]
        try:
            yield
        finally:
            for a in mine:
                self.held.pop(id(a), None)


NATIVE_GEMM = NativeGemm()
SMALL_ROWS = 32         # products of 2..SMALL_ROWS rows ask NATIVE_GEMM (one row: BLAS's gemv)
MIN_WEIGHT = 1 << 17    # ... by a (K, N) matrix of at least so many elements


def _dot_cpu(eqn):
    """Matrix products as matmul into the output buffer (transposed operands as views),
    contractions over size-1 axes as one einsum; other contractions call the impl."""
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    x, y = eqn.invars
    dt = eqn.outvars[0].aval.dtype
    if all(x.aval.shape[d] == 1 for d in lc) and dt.kind in "fiu":
        if not lc and lb and _outer_prefers_transposed(x.aval, y.aval, lb, rb):
            return None     # the impl computes it in the faster layout, as a view
        return _outer_emitter(x.aval, y.aval, lc, rc, lb, rb)
    if (x.aval.ndim > 2 and y.aval.ndim == 2 and tuple(lc) == (x.aval.ndim - 1,)
            and tuple(rc) in ((0,), (1,)) and not lb and dt.kind in "fc"):
        return _dense_emitter(x.aval, eqn.outvars[0].aval.shape[-1], rc)
    if lb and dt.kind in "fc":
        return _batched_emitter(x.aval, y.aval, lc, rc, lb, rb)
    form = _MATMUL.get((tuple(lc), tuple(rc)))
    if (form is None or lb or rb or x.aval.ndim != 2 or y.aval.ndim != 2
            or dt.kind not in "fc"):
        return None
    m, (k, n) = x.aval.shape[0], y.aval.shape
    gemm = NATIVE_GEMM.kernel(m, k, n) if (
        form == ("", "") and dt == np.float32 and 2 <= m <= SMALL_ROWS and k * n >= MIN_WEIGHT
        and NATIVE_GEMM.kernel is not None) else None
    if gemm is not None:
        def emit_native(ctx, ins, out):
            return [f"{ctx.g(gemm, 'gemm')}({ins[0]}, {ins[1]}, {out}) or "
                    f"{ctx.g(np.matmul, 'matmul')}({ins[0]}, {ins[1]}, out={out})"]
        return emit_native, _no_input

    def emit(ctx, ins, out):
        return [f"{ctx.g(np.matmul, 'matmul')}({ins[0]}{form[0]}, {ins[1]}{form[1]}, "
                f"out={out})"]
    return emit, _no_input


def _batched_emitter(xa, ya, lc, rc, lb, rb):
    """A batched matrix product (one free and one contracted axis a side: attention's
    scores and its weighted values) as matmul of the transposed views the impl computes
    (the right one laid out plainly where _plain_right copies it), into the output buffer:
    the same BLAS calls and bits, into the planned buffer, which may be a view of the array
    its result is copied into next (cpu_destinations.py).
    None for other batched contractions (the impl's reshapes)."""
    lf, rf = _free(xa.ndim, lc, lb), _free(ya.ndim, rc, rb)
    if len(lf) != 1 or len(rf) != 1 or len(lc) != 1:
        return None
    px, py = tuple(lb) + lf + tuple(lc), tuple(rb) + tuple(rc) + rf

    def view(name, perm):
        return name if perm == tuple(range(len(perm))) else f"{name}.transpose({perm})"

    def emit(ctx, ins, out):         # (the layout is the run's: y may be a transposed view)
        xm = view(ins[0], px)
        return [f"{ctx.g(np.matmul, 'matmul')}({xm}, "
                f"{ctx.g(_plain_right, 'plain_right')}({xm}, {view(ins[1], py)}), out={out})"]
    return emit, _no_input


def _dense_emitter(xa, n, rc):
    """A dense layer's product, x (..., K) against a matrix W (K, N) or (N, K) (rc), as one
    matmul of x's rows into the output buffer seen as (rows, N): the GEMM the impl runs
    (the same operand views, so the same bits), but into the planned buffer, where the
    bias added next can run in place, instead of a fresh array per call."""
    rows, k = math.prod(xa.shape[:-1]), xa.shape[-1]
    t = "" if rc == (0,) else ".T"

    def emit(ctx, ins, out):
        return [f"{ctx.g(np.matmul, 'matmul')}({ins[0]}.reshape({rows}, {k}), {ins[1]}{t}, "
                f"out={out}.reshape({rows}, {n}))"]
    return emit, _no_input


def _outer_prefers_transposed(xa, ya, lb, rb):
    """Whether _dot_impl computes this batched outer product as a transposed view (its
    right free block is the shorter one)."""
    lf = [xa.shape[i] for i in range(xa.ndim) if i not in lb]
    rf = [ya.shape[i] for i in range(ya.ndim) if i not in rb]
    return bool(lf and rf) and math.prod(rf) < math.prod(lf)


def _outer_emitter(xa, ya, lc, rc, lb, rb):
    """A contraction over size-1 axes (an outer product, per batch element) as one einsum
    into the output buffer: a batched matmul with K = 1 is the slowest way to compute it."""
    lf = [i for i in range(xa.ndim) if i not in lc and i not in lb]
    rf = [i for i in range(ya.ndim) if i not in rc and i not in rb]
    px, py = tuple(lb) + tuple(lf) + tuple(lc), tuple(rb) + tuple(rf) + tuple(rc)
    bs = [xa.shape[i] for i in lb]
    sx = tuple(bs + [xa.shape[i] for i in lf])
    sy = tuple(bs + [ya.shape[i] for i in rf])
    letters = iter("abcdefghijklmnopqrstuvwxyz")
    B = "".join(next(letters) for _ in lb)
    L = "".join(next(letters) for _ in lf)
    R = "".join(next(letters) for _ in rf)
    spec = f"{B}{L},{B}{R}->{B}{L}{R}"

    def emit(ctx, ins, out):
        es = ctx.g(np.einsum, "einsum")
        return [f"{es}('{spec}', {ins[0]}.transpose({px}).reshape({sx}), "
                f"{ins[1]}.transpose({py}).reshape({sy}), out={out})"]
    return emit, _no_input


dot_general_p = defprim(
    "dot_general", _dot_impl, _dot_shape,
    jvp=(lambda t, x, y, dimension_numbers: dot_general(t, y, dimension_numbers=dimension_numbers),
         lambda t, x, y, dimension_numbers: dot_general(x, t, dimension_numbers=dimension_numbers)),
    transpose=_dot_transpose, batch=_dot_batch, cpu=_dot_cpu, fresh=True, blas=True)

dot_general = dot_general_p.bind


# ---------------------------------------------------------------------------
# svd: the thin singular value decomposition of real matrices (and stacks of them)

def _nonfinite_matrices(xp, x):
    """The mask of the matrices of the stack x holding an inf or a NaN (None: all finite)."""
    finite = xp.isfinite(x).all(axis=(-2, -1))
    return None if bool(finite.all()) else ~finite


def _nan_where(xp, mask, outs):
    """Each output (shaped like the stack's batch plus trailing axes) NaN where mask."""
    for o in outs:
        o[mask] = complex(np.nan, np.nan) if o.dtype.kind == "c" else np.nan
    return outs


def _svd_impl(xp, x):
    """LAPACK's thin SVD; for complex matrices each pair (u_i, v_i) is turned by one phase so
    that v_i's largest-modulus entry is real and positive (a continuous gauge, which the JVP
    follows; real matrices keep LAPACK's signs). A matrix holding inf or NaN is never given
    to LAPACK (its gesdd loops forever on some matrices with an inf): its U, S and Vh are
    NaN, JAX's answer for NaN input."""
    x = xp.asarray(x)
    bad = _nonfinite_matrices(xp, x)
    if bad is not None:
        return _nan_where(xp, bad, _svd_impl(xp, xp.where(bad[..., None, None], 0, x)))
    u, s, vh = xp.linalg.svd(x, full_matrices=False)
    if u.dtype.kind == "c":
        ph = _eigvec_phases(xp, xp.conj(xp.swapaxes(vh, -1, -2)))
        u, vh = u * ph, vh * xp.conj(xp.swapaxes(ph, -1, -2))
    return [u, s, vh]


def _real_matrix(x, name, complex_ok=False):
    """The shape rules' common check: a real (complex_ok: or complex) floating matrix or a
    stack of them."""
    if x.ndim < 2:
        raise ShapeError(f"{name} needs a matrix or a stack of matrices, got {x.str_short()}")
    if x.dtype.kind == "c" and complex_ok:
        return
    if x.dtype.kind != "f":
        raise DTypeError(f"{name} supports real floating matrices, got {x.str_short()}; convert "
                         "integers with astype (complex matrices are not supported)")


def _svd_shape(x):
    _real_matrix(x, "svd", complex_ok=True)
    *b, m, n = x.shape
    k = min(m, n)
    b = tuple(b)
    return [ShapedArray(b + (m, k), x.dtype), ShapedArray(b + (k,), real_dtype(x.dtype)),
            ShapedArray(b + (k, n), x.dtype)]


def _mm(a, b):
    """a @ b over the last two axes, the leading ones batch axes."""
    nd = aval_of(a).ndim
    batch = tuple(range(nd - 2))
    return dot_general(a, b, dimension_numbers=(((nd - 1,), (nd - 2,)), (batch, batch)))


def _mT(a):
    nd = aval_of(a).ndim
    return transpose(a, permutation=tuple(range(nd - 2)) + (nd - 1, nd - 2))


def _spread(s, shape, axis):
    """A vector of the last axis of s laid along `axis` (-1: columns, -2: rows) of shape."""
    nb = len(shape) - 2
    return broadcast_in_dim(s, shape=shape, broadcast_dimensions=tuple(range(nb)) +
                            (len(shape) + axis,))


def _svd_jvp(primals, tangents):
    """d(U, s, Vh) for dA: ds = diag(Uᵀ dA V); dU = U (F ∘ (dP S + S dPᵀ)) plus, for a tall
    matrix, (I - U Uᵀ) dA V S⁻¹; dV likewise, F_ij = 1 / (s_j² - s_i²) (i != j). Repeated
    singular values make dU and dV infinite, as in JAX."""
    (x,), (t,) = primals, tangents
    u, s, vh = svd(x)
    if type(t) is Zero:
        return [u, s, vh], [Zero(aval_of(o).strip_weak()) for o in (u, s, vh)]
    if aval_of(x).dtype.kind == "c":
        return [u, s, vh], _svd_complex_tangents(u, s, vh, t)
    shape = aval_of(x).shape
    m, n = shape[-2:]
    k = min(m, n)
    kk = shape[:-2] + (k, k)
    v = _mT(vh)
    dp = _mm(_mm(_mT(u), t), v)                       # Uᵀ dA V, k x k
    eye = broadcast_in_dim(np.eye(k, dtype=x.dtype), shape=kk,
                           broadcast_dimensions=(len(kk) - 2, len(kk) - 1))
    ds = reduce_sum(mul(dp, eye), axes=(len(kk) - 1,))
    s_row, s_col = _spread(s, kk, -1), _spread(s, kk, -2)   # s_j and s_i
    diff = mul(add(s_row, s_col), sub(s_row, s_col))        # s_j² - s_i²
    f = sub(div(np.ones((), x.dtype), add(diff, eye)), eye)  # 1/diff off the diagonal, else 0
    dps = mul(dp, s_row)                                     # dP S
    sdp = mul(s_col, dp)                                     # S dP
    du = _mm(u, mul(f, add(dps, _mT(dps))))
    dv = _mm(v, mul(f, add(sdp, _mT(sdp))))
    if m > k:
        dav = _mm(t, v)
        du = add(du, div(sub(dav, _mm(u, _mm(_mT(u), dav))),
                         _spread(s, shape[:-2] + (m, k), -1)))
    if n > k:
        dau = _mm(_mT(t), u)
        dv = add(dv, div(sub(dau, _mm(v, _mm(vh, dau))),
                         _spread(s, shape[:-2] + (n, k), -1)))
    return [u, s, vh], [du, ds, _mT(dv)]


def _svd_complex_tangents(u, s, vh, t):
    """The complex JVP: dP = Uᴴ dA V, ds = Re diag(dP), dU = U (F ∘ (dP S + S dPᴴ)), dV =
    V (F ∘ (S dP + dPᴴ S)) plus the tall/wide parts, then one phase per pair: V's keeps its
    largest entry real (c), U's is c + i Im(dP_ii) / s_i."""
    shape, cdt = aval_of(t).shape, aval_of(t).dtype
    m, n = shape[-2:]
    k = min(m, n)
    kk = shape[:-2] + (k, k)
    v, uh = _mH(vh), _mH(u)
    dp = _mm(_mm(uh, t), v)
    eye = broadcast_in_dim(np.eye(k, dtype=cdt), shape=kk,
                           broadcast_dimensions=(len(kk) - 2, len(kk) - 1))
    sc = convert_element_type(s, new_dtype=cdt, weak_type=False)
    s_row, s_col = _spread(sc, kk, -1), _spread(sc, kk, -2)        # s_j and s_i
    f = sub(div(np.ones((), cdt), add(mul(add(s_row, s_col), sub(s_row, s_col)), eye)), eye)
    du = _mm(u, mul(f, add(mul(dp, s_row), mul(s_col, _mH(dp)))))
    dv = _mm(v, mul(f, add(mul(s_col, dp), mul(_mH(dp), s_row))))
    if m > k:
        dav = _mm(t, v)
        du = add(du, div(sub(dav, _mm(u, _mm(uh, dav))), _spread(sc, shape[:-2] + (m, k), -1)))
    if n > k:
        dau = _mm(_mH(t), u)
        dv = add(dv, div(sub(dau, _mm(v, _mm(vh, dau))), _spread(sc, shape[:-2] + (n, k), -1)))
    c = _gauge_coeffs(v, dv)
    dpd = _diag(dp)
    cu = add(c, _complex(np.zeros((), real_dtype(cdt)), div(imag(dpd), s)))
    return [add(du, mul(u, _spread(cu, shape[:-2] + (m, k), -1))), real(dpd),
            _mH(add(dv, mul(v, _spread(c, shape[:-2] + (n, k), -1))))]


def _mH(a):
    """The conjugate transpose of the last two axes."""
    return conj(_mT(a))


def _svd_batch(vals, dims):
    (x,), (d,) = vals, dims
    return svd(moveaxis(x, d, 0)), (0, 0, 0)


svd_p = defprim("svd", _svd_impl, _svd_shape, jvp=_svd_jvp, batch=_svd_batch,
                multiple_results=True, fresh=True, blas=True)
svd = svd_p.bind


# ---------------------------------------------------------------------------
# solve, slogdet, cholesky, qr, eigh: real square (qr: any) matrices and stacks of them.
# The symmetric factorizations read the lower triangle only (LAPACK's and torch's 'L'), so
# their derivatives are taken along tril(dA) + tril(dA, -1)ᵀ.

def _square(x, name, complex_ok=False):
    _real_matrix(x, name, complex_ok)
    if x.shape[-1] != x.shape[-2]:
        raise ShapeError(f"{name} needs square matrices (a stack of them), got {x.str_short()}")


def _eye_like(x):
    """The identity broadcast to x's (square) shape."""
    shape = aval_of(x).shape
    n = shape[-1]
    return broadcast_in_dim(np.eye(n, dtype=aval_of(x).dtype), shape=shape,
                            broadcast_dimensions=(len(shape) - 2, len(shape) - 1))


def _mask(x, k):
    """np.tril(ones, k) broadcast to x's shape (k=0: the lower triangle with the diagonal)."""
    shape = aval_of(x).shape
    m = np.tril(np.ones(shape[-2:], aval_of(x).dtype), k)
    return broadcast_in_dim(m, shape=shape, broadcast_dimensions=(len(shape) - 2, len(shape) - 1))


def _sym_lower(t):
    """The symmetric (Hermitian) matrix whose lower triangle is t's: what a lower-reading
    routine sees (it ignores the imaginary part of a complex diagonal)."""
    low = mul(t, _mask(t, -1))
    if aval_of(t).dtype.kind == "c":
        diag = convert_element_type(real(mul(t, _eye_like(t))), new_dtype=aval_of(t).dtype,
                                    weak_type=False)
        return add(add(low, conj(_mT(low))), diag)
    return add(add(low, _mT(low)), mul(t, _eye_like(t)))


def _diag(a):
    """The diagonal of the last two (square) axes."""
    return reduce_sum(mul(a, _eye_like(a)), axes=(aval_of(a).ndim - 1,))


def _solve_impl(xp, a, b):
    return xp.linalg.solve(xp.asarray(a), xp.asarray(b))


def _solve_shape(a, b):
    _square(a, "solve", complex_ok=True)
    if b.dtype != a.dtype or b.ndim != a.ndim or b.shape[:-2] != a.shape[:-2] or \
            b.shape[-2] != a.shape[-1]:
        raise ShapeError(f"solve needs b of shape {a.shape[:-1]} + (k,) and a's dtype, got "
                         f"{a.str_short()} and {b.str_short()}")
    return ShapedArray(b.shape, b.dtype)


def _solve_transpose(ct, a, b):
    return [None, solve(_mT(a), ct)]


def _solve_batch(vals, dims):
    size = bdim_size(vals, dims)
    a, b = (moveaxis(v, d, 0) if d is not None else broadcast_batched(v, size)
            for v, d in zip(vals, dims))
    return solve(a, b), 0


solve_p = defprim(
    "solve", _solve_impl, _solve_shape,
    jvp_out=(lambda t, x, a, b: neg(solve(a, _mm(t, x))), lambda t, x, a, b: solve(a, t)),
    transpose=_solve_transpose, batch=_solve_batch, fresh=True, blas=True)
solve = solve_p.bind


def _first_batch(bind):
    """The batching rule of a one-operand factorization whose impl takes stacks."""
    def rule(vals, dims):
        (x,), (d,) = vals, dims
        out = bind(moveaxis(x, d, 0))
        return out, (0,) * len(out)
    return rule


def _slogdet_impl(xp, x):
    sign, logabs = xp.linalg.slogdet(xp.asarray(x))
    return [xp.asarray(sign), xp.asarray(logabs)]


def _slogdet_shape(x):
    _square(x, "slogdet")
    return [ShapedArray(x.shape[:-2], x.dtype)] * 2


def _slogdet_jvp(primals, tangents):
    """d log|det A| = tr(A⁻¹ dA); the sign is locally constant."""
    (x,), (t,) = primals, tangents
    sign, logabs = slogdet(x)
    zero = Zero(aval_of(sign).strip_weak())
    if type(t) is Zero:
        return [sign, logabs], [zero, zero]
    return [sign, logabs], [zero, reduce_sum(_diag(solve(x, t)), axes=(aval_of(x).ndim - 2,))]


slogdet_p = defprim("slogdet", _slogdet_impl, _slogdet_shape, jvp=_slogdet_jvp,
                    batch=_first_batch(lambda x: slogdet(x)), multiple_results=True,
                    fresh=True, blas=True)
slogdet = slogdet_p.bind


def _cholesky_shape(x):
    _square(x, "cholesky")
    return ShapedArray(x.shape, x.dtype)


def _cholesky_jvp(primals, tangents):
    """dL = L Φ(L⁻¹ S L⁻ᵀ), S the symmetric tangent, Φ the lower triangle with the diagonal
    halved (from dA = dL Lᵀ + L dLᵀ)."""
    (x,), (t,) = primals, tangents
    low = cholesky(x)
    if type(t) is Zero:
        return low, Zero(aval_of(low).strip_weak())
    s = _sym_lower(t)
    inner = solve(low, _mT(solve(low, s)))                  # L⁻¹ S L⁻ᵀ
    phi = mul(inner, sub(_mask(inner, 0), mul(_eye_like(inner), np.asarray(0.5, aval_of(x).dtype))))
    return low, _mm(low, phi)


cholesky_p = defprim("cholesky", lambda xp, x: xp.linalg.cholesky(xp.asarray(x)),
                     _cholesky_shape, jvp=_cholesky_jvp,
                     batch=lambda vals, dims: (cholesky(moveaxis(vals[0], dims[0], 0)), 0),
                     fresh=True, blas=True)
cholesky = cholesky_p.bind


def _qr_impl(xp, x):
    q, r = xp.linalg.qr(xp.asarray(x), mode="reduced")
    return [q, r]


def _qr_shape(x):
    _real_matrix(x, "qr")
    *b, m, n = x.shape
    k = min(m, n)
    return [ShapedArray(tuple(b) + (m, k), x.dtype), ShapedArray(tuple(b) + (k, n), x.dtype)]


def _qr_square_jvp(q, r, t):
    """(dQ, dR) of A = QR with R square and invertible: M = Qᵀ dA R⁻¹, Ω = tril(M, -1) minus
    its transpose (Qᵀ dQ is skew), dQ = Q Ω + (I - Q Qᵀ) dA R⁻¹, dR = Qᵀ dA - Ω R."""
    dar = _mT(solve(_mT(r), _mT(t)))                         # dA R⁻¹
    low = mul(_mm(_mT(q), dar), _mask(r, -1))
    omega = sub(low, _mT(low))
    qt_dar = _mm(_mT(q), dar)
    dq = add(_mm(q, omega), sub(dar, _mm(q, qt_dar)))
    dr = sub(_mm(_mT(q), t), _mm(omega, r))
    return dq, dr


def _qr_jvp(primals, tangents):
    """A wide A = Q [R1 R2] differentiates its square left block, then R2 = Qᵀ A2."""
    (x,), (t,) = primals, tangents
    q, r = qr(x)
    if type(t) is Zero:
        return [q, r], [Zero(aval_of(q).strip_weak()), Zero(aval_of(r).strip_weak())]
    shape = aval_of(x).shape
    m, n = shape[-2:]
    if m >= n:
        return [q, r], list(_qr_square_jvp(q, r, t))
    dq, dr1 = _qr_square_jvp(q, _cols(r, 0, m), _cols(t, 0, m))
    dr2 = add(_mm(_mT(dq), _cols(x, m, n)), _mm(_mT(q), _cols(t, m, n)))
    return [q, r], [dq, concatenate(dr1, dr2, dimension=len(shape) - 1)]


def _cols(a, lo, hi):
    """Columns lo:hi of the last axis."""
    shape = aval_of(a).shape
    return slice(a, start_indices=(0,) * (len(shape) - 1) + (lo,),
                 limit_indices=shape[:-1] + (hi,), strides=None)


qr_p = defprim("qr", _qr_impl, _qr_shape, jvp=_qr_jvp, batch=_first_batch(lambda x: qr(x)),
               multiple_results=True, fresh=True, blas=True)
qr = qr_p.bind


def _eigh_impl(xp, x):
    """LAPACK's eigenvectors, each turned so that its largest-magnitude entry is real and
    positive: LAPACK's own signs (phases) jump under tiny perturbations, which breaks finite
    differences."""
    w, v = xp.linalg.eigh(xp.asarray(x), UPLO="L")
    return [w, v * _eigvec_phases(xp, v)]


def _eigvec_phases(xp, v):
    """Per column of v, the unit factor making its largest-magnitude entry real and positive
    (+-1 for real v; +1 for a zero column)."""
    top = xp.take_along_axis(v, xp.argmax(xp.abs(v), axis=-2)[..., None, :], axis=-2)
    if v.dtype.kind != "c":
        return xp.where(top < 0, -1, 1).astype(v.dtype)
    mag = xp.abs(top)
    return xp.where(mag > 0, xp.conj(top) / xp.where(mag > 0, mag, 1), 1).astype(v.dtype)


def _eigh_shape(x):
    _square(x, "eigh", complex_ok=True)
    return [ShapedArray(x.shape[:-1], real_dtype(x.dtype)), ShapedArray(x.shape, x.dtype)]


def _gauge_coeffs(v, off):
    """c with off + V diag(c) the tangent of unit columns whose largest-modulus entry stays
    real, given the part `off` along the other columns: Re(c_i) = -Re(v_iᴴ off_i) keeps the
    norm, Im(c_i) = -Im(off_pi) / |v_pi| (p the largest entry) the phase."""
    shape = aval_of(v).shape
    rows = (len(shape) - 2,)
    re = real(reduce_sum(mul(conj(v), off), axes=rows))
    av = _abs(v)
    peak = broadcast_in_dim(reduce_max(av, axes=rows), shape=shape,
                            broadcast_dimensions=tuple(range(len(shape) - 2)) + (len(shape) - 1,))
    top = convert_element_type(eq(av, peak), new_dtype=aval_of(av).dtype, weak_type=False)
    im = div(reduce_sum(mul(top, imag(off)), axes=rows), reduce_sum(mul(top, av), axes=rows))
    return _complex(neg(re), neg(im))


def _unit_gauge(v, off):
    """off + V diag(c), c from _gauge_coeffs."""
    return add(off, mul(v, _spread(_gauge_coeffs(v, off), aval_of(v).shape, -1)))


def _eigh_jvp(primals, tangents):
    """P = Vᴴ S V: dw = Re diag(P), dV = V (F ∘ P), F_ij = 1 / (w_j - w_i) off the diagonal
    (then the phase kept for complex V); repeated eigenvalues make dV infinite, as in JAX and
    torch."""
    (x,), (t,) = primals, tangents
    w, v = eigh(x)
    if type(t) is Zero:
        return [w, v], [Zero(aval_of(w).strip_weak()), Zero(aval_of(v).strip_weak())]
    cplx = aval_of(x).dtype.kind == "c"
    vh = conj(_mT(v)) if cplx else _mT(v)
    p = _mm(vh, _mm(_sym_lower(t), v))
    shape = aval_of(x).shape
    eye = _eye_like(x)
    diff = sub(_spread(w, shape, -1), _spread(w, shape, -2))   # w_j - w_i
    if cplx:
        diff = convert_element_type(diff, new_dtype=aval_of(x).dtype, weak_type=False)
    f = sub(div(np.ones((), aval_of(x).dtype), add(diff, eye)), eye)
    off = _mm(v, mul(f, p))
    dw = _diag(p)
    return [w, v], [real(dw), _unit_gauge(v, off)] if cplx else [dw, off]


eigh_p = defprim("eigh", _eigh_impl, _eigh_shape, jvp=_eigh_jvp,
                 batch=_first_batch(lambda x: eigh(x)), multiple_results=True,
                 fresh=True, blas=True)
eigh = eigh_p.bind


def _eig_impl(xp, x):
    """LAPACK's eigenvalues and unit eigenvectors (complex always, as JAX), each eigenvector
    turned so that its largest-modulus entry is real and positive: a gauge that moves
    continuously with the matrix, so the JVP below is the derivative of what is returned."""
    if not hasattr(xp.linalg, "eig"):
        raise NotImplementedError(f"eig: {xp.__name__}.linalg has no eig (the non-symmetric "
                                  "eigendecomposition); move the matrix to the CPU")
    x = xp.asarray(x)
    bad = _nonfinite_matrices(xp, x)
    if bad is not None:     # LAPACK refuses them (NumPy raises): NaN for those, as JAX
        return _nan_where(xp, bad, _eig_impl(xp, xp.where(bad[..., None, None], 0, x)))
    w, v = xp.linalg.eig(x)
    cdt = complex_dtype(x.dtype)
    w, v = w.astype(cdt, copy=False), v.astype(cdt, copy=False)
    return [w, v * _eigvec_phases(xp, v)]


def _eig_shape(x):
    _square(x, "eig", complex_ok=True)
    cdt = complex_dtype(x.dtype)
    return [ShapedArray(x.shape[:-1], cdt), ShapedArray(x.shape, cdt)]


def _eig_jvp(primals, tangents):
    """A V = V Λ: with P = V⁻¹ dA V, dΛ = diag(P) and dV = V (F ∘ P + diag(c)), F_ij =
    1 / (λ_j - λ_i) off the diagonal (repeated eigenvalues make it infinite, as in torch);
    c keeps each column at unit norm (Re(vᴴ dv) = 0) and its largest entry real (Im = 0)."""
    (x,), (t,) = primals, tangents
    w, v = eig(x)
    if type(t) is Zero:
        return [w, v], [Zero(aval_of(w).strip_weak()), Zero(aval_of(v).strip_weak())]
    cdt, shape = aval_of(v).dtype, aval_of(v).shape
    if aval_of(t).dtype != cdt:
        t = convert_element_type(t, new_dtype=cdt, weak_type=False)
    p = solve(v, _mm(t, v))
    eye = _eye_like(v)
    diff = sub(_spread(w, shape, -1), _spread(w, shape, -2))       # λ_j - λ_i
    f = sub(div(np.ones((), cdt), add(diff, eye)), eye)
    off = _mm(v, mul(f, p))
    return [w, v], [_diag(p), _unit_gauge(v, off)]


eig_p = defprim("eig", _eig_impl, _eig_shape, jvp=_eig_jvp,
                batch=_first_batch(lambda x: eig(x)), multiple_results=True, fresh=True, blas=True)
eig = eig_p.bind
