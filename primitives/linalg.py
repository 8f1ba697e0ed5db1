"""dot_general: batched tensor contraction; svd: the thin singular value decomposition.

dimension_numbers = ((lhs_contract, rhs_contract), (lhs_batch, rhs_batch)); the result
axes are batch, then lhs free, then rhs free (XLA's convention).
"""
from __future__ import annotations

import math

import numpy as np

from functrans.core import DTypeError, ShapedArray, ShapeError, UndefinedPrimal, Zero
from .base import NUMERIC, aval_of, defprim, moveaxis
from .elementwise import add, div, mul, sub
from .reductions import reduce_sum
from .shape import broadcast_in_dim, transpose


def _free(ndim, contract, batch):
    return tuple(i for i in range(ndim) if i not in contract and i not in batch)


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
        return xp.tensordot(x, y, axes=(lc, rc))
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
    out = xp.matmul(xm, ym)
    return out.reshape(bshape + tuple(x.shape[i] for i in lf) + tuple(y.shape[i] for i in rf))


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
    form = _MATMUL.get((tuple(lc), tuple(rc)))
    if (form is None or lb or rb or x.aval.ndim != 2 or y.aval.ndim != 2
            or dt.kind not in "fc"):
        return None

    def emit(ctx, ins, out):
        return [f"{ctx.g(np.matmul, 'matmul')}({ins[0]}{form[0]}, {ins[1]}{form[1]}, "
                f"out={out})"]
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
    transpose=_dot_transpose, batch=_dot_batch, cpu=_dot_cpu, fresh=True)

dot_general = dot_general_p.bind


# ---------------------------------------------------------------------------
# svd: the thin singular value decomposition of real matrices (and stacks of them)

def _svd_impl(xp, x):
    u, s, vh = xp.linalg.svd(xp.asarray(x), full_matrices=False)
    return [u, s, vh]


def _svd_shape(x):
    if x.ndim < 2:
        raise ShapeError(f"svd needs a matrix or a stack of matrices, got {x.str_short()}")
    if x.dtype.kind != "f":
        raise DTypeError(f"svd supports real floating matrices, got {x.str_short()}; convert "
                         "integers with astype (complex matrices are not supported)")
    *b, m, n = x.shape
    k = min(m, n)
    b = tuple(b)
    return [ShapedArray(b + (m, k), x.dtype), ShapedArray(b + (k,), x.dtype),
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


def _svd_batch(vals, dims):
    (x,), (d,) = vals, dims
    return svd(moveaxis(x, d, 0)), (0, 0, 0)


svd_p = defprim("svd", _svd_impl, _svd_shape, jvp=_svd_jvp, batch=_svd_batch,
                multiple_results=True, fresh=True)
svd = svd_p.bind
