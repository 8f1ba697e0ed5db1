"""functrans.numpy's linear algebra: matmul, dot, tensordot, einsum and the linalg namespace."""
from __future__ import annotations

import builtins
import functools
import operator
import string
from collections import namedtuple

import numpy as _np

import opt_einsum

from .. import core
from ..core import Tracer, canonicalize_value
from ..contraction import einsum as _einsum
from ..higher_order.custom import custom_jvp
from functrans.primitives import elementwise as ew
from functrans.primitives import linalg as la
from ._promotion import (
    _as_operand, _broadcast_to_shape, _promote_float, _promote_same_dtype, _shape,
    broadcast_shapes, expand_dims, ravel, reshape, stack)
from ._shapes import broadcast_arrays, moveaxis, ndim, swapaxes
from ._elementwise import (absolute, conj, divide, exp, greater, greater_equal, maximum,
                           multiply, power, real, sqrt, subtract, where)
from ._reductions import max, min, sum
from ._indexing import diagonal


# ---------------------------------------------------------------------------
# linear algebra

def _product_params(precision, preferred_element_type):
    """jax.numpy's keyword-only `precision` (checked; the CPU computes at the operands'
    precision) and `preferred_element_type` (the result's dtype, or None)."""
    la.canonicalize_precision(precision)
    return None if preferred_element_type is None else core.check_dtype(preferred_element_type)


def _preferred(out, dtype):
    return out if dtype is None or out.dtype == dtype else \
        ew.convert_element_type(out, new_dtype=dtype, weak_type=False)


def matmul(a, b, *, precision=None, preferred_element_type=None):
    if precision is not None or preferred_element_type is not None:
        return _preferred(matmul(a, b), _product_params(precision, preferred_element_type))
    if type(a) is _np.ndarray:          # x32: NumPy's 64-bit values narrowed, as every entry
        a = canonicalize_value(a)
    if type(b) is _np.ndarray:
        b = canonicalize_value(b)
    if (type(a) is _np.ndarray or isinstance(a, Tracer)) and \
            (type(b) is _np.ndarray or isinstance(b, Tracer)) and a.dtype == b.dtype and \
            len(a.shape) == 2 and len(b.shape) == 2 and a.shape[1] == b.shape[0]:
        # the common case, matrix @ matrix of one dtype: nothing to promote or broadcast
        return la.dot_general(a, b, dimension_numbers=(((1,), (0,)), ((), ())))
    x, y = _promote_same_dtype([a, b])
    x, y = _as_operand(x), _as_operand(y)
    xs, ys = _shape(x), _shape(y)
    if not xs or not ys:
        raise ValueError("matmul: inputs must have at least one dimension (use * for scalars)")
    if len(xs) == 1 or len(ys) == 1:
        # a vector operand contracts directly (no expand_dims/squeeze): under vmap this
        # stays one matrix product instead of a stack of (1, K) @ (K, N) products.
        yc = 0 if len(ys) == 1 else len(ys) - 2
        if xs[-1] != ys[yc]:
            raise core.ShapeError(f"matmul: contracting dimensions differ: {xs} @ {ys} "
                                  f"({xs[-1]} != {ys[yc]})")
        return la.dot_general(x, y, dimension_numbers=(((len(xs) - 1,), (yc,)), ((), ())))
    if xs[-1] != ys[-2]:
        raise core.ShapeError(f"matmul: contracting dimensions differ: {xs} @ {ys} "
                              f"({xs[-1]} != {ys[-2]})")
    if len(ys) == 2:
        # activations (..., M, K) @ a matrix (K, N): one contraction over the last axis, not
        # the matrix broadcast along the batch axes. The product is one GEMM of
        # (prod(...) * M, K) @ (K, N), and the matrix's cotangent one GEMM contracting every
        # leading axis, instead of a product per batch index summed afterwards.
        return la.dot_general(x, y, dimension_numbers=(((len(xs) - 1,), (0,)), ((), ())))
    batch = broadcast_shapes(xs[:-2], ys[:-2])
    nb = len(batch)
    if xs[:-2] != batch:
        x = _broadcast_to_shape(x, batch + xs[-2:])
    if ys[:-2] != batch:
        y = _broadcast_to_shape(y, batch + ys[-2:])
    bd = tuple(range(nb))
    return la.dot_general(x, y, dimension_numbers=(((nb + 1,), (nb,)), (bd, bd)))


def dot(a, b, *, precision=None, preferred_element_type=None):
    if precision is not None or preferred_element_type is not None:
        return _preferred(dot(a, b), _product_params(precision, preferred_element_type))
    if ndim(a) == 0 or ndim(b) == 0:
        return multiply(a, b)
    if ndim(b) <= 2:
        return matmul(a, b)
    x, y = _promote_same_dtype([a, b])
    return la.dot_general(x, y, dimension_numbers=(((ndim(x) - 1,), (ndim(y) - 2,)), ((), ())))


def vdot(a, b, *, precision=None, preferred_element_type=None):
    """sum(conj(a) * b) over the flattened arrays (NumPy's vdot conjugates a)."""
    return dot(ravel(conj(a)), ravel(b), precision=precision,
               preferred_element_type=preferred_element_type)


def inner(a, b, *, precision=None, preferred_element_type=None):
    if precision is not None or preferred_element_type is not None:
        return _preferred(inner(a, b), _product_params(precision, preferred_element_type))
    if ndim(a) == 0 or ndim(b) == 0:
        return multiply(a, b)
    x, y = _promote_same_dtype([a, b])
    return la.dot_general(x, y, dimension_numbers=(((ndim(x) - 1,), (ndim(y) - 1,)), ((), ())))


def outer(a, b):
    return multiply(reshape(a, (-1, 1)), reshape(b, (1, -1)))


def tensordot(a, b, axes=2, *, precision=None, preferred_element_type=None):
    if precision is not None or preferred_element_type is not None:
        return _preferred(tensordot(a, b, axes),
                          _product_params(precision, preferred_element_type))
    x, y = _promote_same_dtype([a, b])
    if isinstance(axes, int):
        ax = (tuple(range(ndim(x) - axes, ndim(x))), tuple(range(axes)))
    else:
        ax = tuple((a_,) if isinstance(a_, int) else tuple(a_) for a_ in axes)
    ax = (tuple(i % ndim(x) for i in ax[0]), tuple(i % ndim(y) for i in ax[1]))
    return la.dot_general(x, y, dimension_numbers=(ax, ((), ())))


def _sublist_subscripts(args):
    """NumPy's sublist form einsum(op0, sublist0, op1, sublist1, ..., [sublistout]) as a
    subscripts string and the operands (each sublist holds ints below 52 or Ellipsis)."""
    def letters(sub):
        out = []
        for k in sub:
            if k is Ellipsis:
                out.append("...")
            elif isinstance(k, (int, _np.integer)) and 0 <= k < 52:
                out.append(string.ascii_letters[k])
            else:
                raise ValueError(f"einsum: sublist entries are ints in [0, 52) or Ellipsis, "
                                 f"got {k!r}")
        return "".join(out)
    ops, subs = list(args[0::2]), [letters(s) for s in args[1::2]]
    if len(args) % 2:
        return ",".join(subs) + "->" + letters(args[-1]), ops[:-1]
    return ",".join(subs), ops


def _take_diagonals(x, labels):
    """Replaces each index repeated within one operand ('ii') by its diagonal, as NumPy
    does, so that the contraction sees distinct labels."""
    pre, ell, post = labels.partition("...")
    while True:
        seen = pre + post
        rep = next((c for c in seen if seen.count(c) > 1), None)
        if rep is None:
            return x, pre + ell + post
        nd = ndim(x)
        axes = [i if i < len(pre) else nd - len(seen) + i for i, c in enumerate(seen) if c == rep]
        x = diagonal(x, axis1=axes[0], axis2=axes[1])   # the diagonal becomes the last axis
        pre, post = pre.replace(rep, ""), post.replace(rep, "") + rep


def einsum(subscripts, *operands, optimize="optimal", precision=None,
           preferred_element_type=None):
    """NumPy's einsum: the subscripts string or the sublist form; an index repeated within
    one operand takes its diagonal ('ii->i'; 'ii' is the trace); operands of different
    dtypes are promoted to one (JAX's promotion). precision and preferred_element_type are
    jax.numpy's (see dot)."""
    if precision is not None or preferred_element_type is not None:
        dt = _product_params(precision, preferred_element_type)
        return _preferred(einsum(subscripts, *operands, optimize=optimize), dt)
    if not isinstance(subscripts, str):
        subscripts, operands = _sublist_subscripts((subscripts,) + operands)
    operands = _promote_same_dtype(operands)      # mixed real/complex: all complex, as NumPy
    subscripts = subscripts.replace(" ", "")
    ins, arrow, out = subscripts.partition("->")
    ins = ins.split(",")
    if builtins.any(len(set(t.replace("...", ""))) != len(t.replace("...", "")) for t in ins):
        if not arrow:                       # NumPy's implicit output, from the subscripts as given
            joined = "".join(t.replace("...", "") for t in ins)
            out = ("..." if "..." in subscripts else "") + "".join(
                sorted(c for c in set(joined) if joined.count(c) == 1))
        if len(ins) == len(operands):
            pairs = [_take_diagonals(x, t) for x, t in zip(operands, ins)]
            operands, ins = [p[0] for p in pairs], [p[1] for p in pairs]
        subscripts = ",".join(ins) + "->" + out
    return _einsum(subscripts, *operands, optimize=optimize)


def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """The cross product of 3-vectors (a 2-vector has z = 0; two 2-vectors give the z
    component alone), as NumPy."""
    if axis is not None:
        axisa = axisb = axisc = axis
    x, y = _promote_same_dtype([a, b])
    x, y = moveaxis(_as_operand(x), axisa, -1), moveaxis(_as_operand(y), axisb, -1)
    na, nb = _shape(x)[-1], _shape(y)[-1]
    if na not in (2, 3) or nb not in (2, 3):
        raise ValueError("incompatible dimensions for cross product\n(dimension must be 2 or 3)")

    def part(v, i):
        return v[..., i] if i < _shape(v)[-1] else _np.zeros((), v.dtype)
    x0, x1, x2 = (part(x, i) for i in range(3))
    y0, y1, y2 = (part(y, i) for i in range(3))
    cz = subtract(multiply(x0, y1), multiply(x1, y0))
    if na == 2 and nb == 2:
        return cz
    cx = subtract(multiply(x1, y2), multiply(x2, y1))
    cy = subtract(multiply(x2, y0), multiply(x0, y2))
    return moveaxis(stack(broadcast_arrays(cx, cy, cz), axis=-1), -1, axisc)


def kron(a, b):
    """The Kronecker product: blocks a[i, j] * b, for any ranks (the lower one padded)."""
    x, y = _promote_same_dtype([a, b])
    x, y = _as_operand(x), _as_operand(y)
    nd = builtins.max(ndim(x), ndim(y))
    xs = (1,) * (nd - ndim(x)) + _shape(x)
    ys = (1,) * (nd - ndim(y)) + _shape(y)
    xe = reshape(x, tuple(d for s in xs for d in (s, 1)))
    ye = reshape(y, tuple(d for s in ys for d in (1, s)))
    return reshape(multiply(xe, ye), tuple(p * q for p, q in zip(xs, ys)))


def _abs2(x):
    """|x|^2 elementwise, real: x * x, or Re(x conj(x)) for complex x."""
    return real(ew.mul(x, conj(x)))


def _vector_norm(x, ord, axis, keepdims):
    """NumPy's vector norms along `axis` (an int or None: all of x)."""
    if isinstance(ord, str):
        raise ValueError(f"Invalid norm order '{ord}' for vectors")
    if ord is None or ord == 2:
        return sqrt(sum(_abs2(x), axis=axis, keepdims=keepdims))
    if ord == 0:
        nz = ew.convert_element_type(ew.ne(x, _np.zeros((), x.dtype)), new_dtype=x.dtype,
                                     weak_type=False)
        return sum(nz, axis=axis, keepdims=keepdims)
    a = absolute(x)
    if ord == _np.inf:
        return max(a, axis=axis, keepdims=keepdims)
    if ord == -_np.inf:
        return min(a, axis=axis, keepdims=keepdims)
    if ord == 1:
        return sum(a, axis=axis, keepdims=keepdims)
    p = float(ord)
    return power(sum(power(a, p), axis=axis, keepdims=keepdims), 1.0 / p)


def matrix_norm(x, ord, axes, keepdims, absval=absolute, frobenius=None):
    """NumPy's matrix norms over the two `axes`: Frobenius, nuclear and spectral (through the
    singular values), and the largest/smallest absolute column (1) or row (inf) sum. absval,
    frobenius(y, axes): the facade passes PyTorch's (derivative 0 at 0)."""
    r, c = axes
    y = moveaxis(x, (r, c), (-2, -1))
    if ord in (None, "fro"):
        out = sqrt(sum(_abs2(y), axis=(-2, -1))) if frobenius is None else \
            frobenius(y, (-2, -1))
    elif ord in ("nuc", 2, -2):
        sv = la.svd(y)[1]
        out = sum(sv, axis=-1) if ord == "nuc" else (max if ord == 2 else min)(sv, axis=-1)
    elif ord in (1, -1, _np.inf, -_np.inf):
        sums = sum(absval(y), axis=-2 if ord in (1, -1) else -1)
        out = (max if ord in (1, _np.inf) else min)(sums, axis=-1)
    else:
        raise ValueError(f"Invalid norm order {ord!r} for matrices; use None, 'fro', 'nuc', "
                         "1, -1, 2, -2, inf or -inf")
    return expand_dims(out, tuple(sorted((r, c)))) if keepdims else out


SlogdetResult = namedtuple("SlogdetResult", ["sign", "logabsdet"])
QRResult = namedtuple("QRResult", ["Q", "R"])
EighResult = namedtuple("EighResult", ["eigenvalues", "eigenvectors"])
EigResult = namedtuple("EigResult", ["eigenvalues", "eigenvectors"])


def _float_matrix(a, name, square=True):
    """a as a floating operand of at least two dimensions (square ones when asked)."""
    x = _promote_float(a)[0]
    shape = _shape(x)
    if len(shape) < 2:
        raise _np.linalg.LinAlgError(f"{len(shape)}-dimensional array given. Array must be at "
                                     f"least two-dimensional ({name})")
    if square and shape[-1] != shape[-2]:
        raise _np.linalg.LinAlgError(f"Last 2 dimensions of the array must be square ({name}, "
                                     f"got shape {shape})")
    return x


def solve_matrices(a, b):
    """a⁻¹ b for a (..., n, n) and b (..., n, k), their batch axes broadcast together."""
    batch = broadcast_shapes(_shape(a)[:-2], _shape(b)[:-2])
    if _shape(b)[-2] != _shape(a)[-1]:
        raise ValueError(f"solve: b's rows ({_shape(b)[-2]}) do not match the {_shape(a)[-1]} x "
                         f"{_shape(a)[-1]} matrix a")
    a = _broadcast_to_shape(a, batch + _shape(a)[-2:])
    b = _broadcast_to_shape(b, batch + _shape(b)[-2:])
    return la.solve(a, b)


def _solve(a, b):
    """NumPy 2's solve: b is a vector when it is 1-D, else a stack of matrices."""
    x = _float_matrix(a, "solve")
    y = _promote_float(b)[0]
    if y.dtype != x.dtype:
        x, y = _promote_same_dtype([x, y])
    if ndim(y) == 1:
        return solve_matrices(x, expand_dims(y, -1))[..., 0]
    return solve_matrices(x, y)


def _eye(n, dtype, batch):
    return _broadcast_to_shape(_np.eye(n, dtype=dtype), batch + (n, n))


def _inv(a):
    x = _float_matrix(a, "inv")
    n = _shape(x)[-1]
    return la.solve(x, _eye(n, x.dtype, _shape(x)[:-2]))


def _slogdet(a):
    return SlogdetResult(*la.slogdet(_float_matrix(a, "slogdet")))


def _det(a):
    """sign * exp(log|det|): its derivative det * tr(a⁻¹ da) needs an invertible a."""
    sign, logabs = la.slogdet(_float_matrix(a, "det"))
    return multiply(sign, exp(logabs))


def _cholesky(a, upper=False):
    low = la.cholesky(_float_matrix(a, "cholesky"))
    return swapaxes(low, -1, -2) if upper else low


def _qr(a, mode="reduced"):
    """The reduced QR decomposition ('reduced', 'r'; 'complete' where it equals it, m <= n)."""
    x = _float_matrix(a, "qr", square=False)
    m, n = _shape(x)[-2:]
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(f"Unrecognized mode '{mode}'")
    if mode == "complete" and m > n:
        raise NotImplementedError(f"qr: mode='complete' of a tall {m} x {n} matrix is not "
                                  "supported (its extra columns have no derivative); use "
                                  "mode='reduced'")
    q, r = la.qr(x)
    return r if mode == "r" else QRResult(q, r)


def _eigh(a, UPLO="L"):  # noqa: N803  (NumPy's name)
    """Eigenvalues (ascending, real) and eigenvectors of a symmetric (Hermitian) matrix read
    from its UPLO triangle; each eigenvector's largest-magnitude entry is real and positive."""
    if UPLO not in ("L", "U"):
        raise ValueError("UPLO argument must be 'L' or 'U'")
    x = _float_matrix(a, "eigh")
    return EighResult(*la.eigh(x if UPLO == "L" else conj(swapaxes(x, -1, -2))))


def _eigvalsh(a, UPLO="L"):  # noqa: N803
    return _eigh(a, UPLO)[0]


def _eig(a):
    """Eigenvalues and unit eigenvectors of a general (real or complex) square matrix, complex
    always (as JAX; NumPy returns real arrays when every eigenvalue is real). Each eigenvector's
    largest-modulus entry is real and positive; derivatives need distinct eigenvalues."""
    return EigResult(*la.eig(_float_matrix(a, "eig")))


def _eigvals(a):
    """The eigenvalues of a general square matrix (complex, as JAX)."""
    return _eig(a)[0]


@functools.partial(custom_jvp, nondiff_argnums=(1, 2))
def _pinv_core(x, rtol, atol):
    """V diag(1/s) Uᵀ over the singular values above max(atol, rtol times the largest)."""
    u, s, vh = la.svd(x)
    tol = maximum(_np.asarray(atol, x.dtype),
                  multiply(_np.asarray(rtol, x.dtype), max(s, axis=-1, keepdims=True)))
    keep = greater(s, tol)
    s_inv = where(keep, 1 / where(keep, s, _np.ones((), x.dtype)), _np.zeros((), x.dtype))
    return matmul(swapaxes(vh, -1, -2) * expand_dims(s_inv, -2), swapaxes(u, -1, -2))


@_pinv_core.defjvp
def _pinv_jvp(rtol, atol, primals, tangents):
    """Golub and Pereyra's derivative of A⁺ at constant rank (the SVD's would need distinct
    singular values): -A⁺ dA A⁺ + A⁺ A⁺ᵀ dAᵀ (I - A A⁺) + (I - A⁺ A) dAᵀ A⁺ᵀ A⁺."""
    (a,), (da,) = primals, tangents
    p = _pinv_core(a, rtol, atol)
    pt, dat = swapaxes(p, -1, -2), swapaxes(da, -1, -2)
    left = subtract(dat, matmul(matmul(dat, a), p))           # dAᵀ (I - A A⁺)
    right = subtract(dat, matmul(p, matmul(a, dat)))          # (I - A⁺ A) dAᵀ
    return p, (-matmul(matmul(p, da), p) + matmul(matmul(p, pt), left)
               + matmul(right, matmul(pt, p)))


def _pinv(a, rcond=None, hermitian=False, *, rtol=None):
    """NumPy's pseudo-inverse of real matrices (stacks too): singular values at or below
    rtol (or rcond) times the largest count as zero (default max(M, N) * eps); the
    derivative holds where the rank is constant."""
    x = _float_matrix(a, "pinv", square=False)
    if rcond is not None and rtol is not None:
        raise ValueError("pinv: pass rcond or rtol, not both")
    tol = rcond if rcond is not None else rtol
    if tol is None:
        tol = builtins.max(_shape(x)[-2:]) * _np.finfo(x.dtype).eps
    return _pinv_core(x, float(tol), 0.0)


def pinv_tol(a, rtol, atol):
    """The pseudo-inverse with singular values at or below max(atol, rtol times the
    largest) counted as zero (torch.linalg.pinv's rule)."""
    return _pinv_core(_float_matrix(a, "pinv", square=False), float(rtol), float(atol))


def einsum_path(subscripts, /, *operands, optimize="auto"):
    """The contraction order einsum would follow, as opt_einsum plans it from the operands'
    shapes: (path, info), path a list of operand-index tuples, as jax.numpy.einsum_path."""
    if not isinstance(subscripts, str):
        subscripts, operands = _sublist_subscripts((subscripts,) + operands)
    shapes = [tuple(_shape(_as_operand(o))) for o in operands]
    return opt_einsum.contract_path(subscripts, *shapes, shapes=True,
                                    optimize="auto" if optimize is True else optimize)


def _lstsq(a, b, rcond=None, *, numpy_resid=False):
    """The least-squares solution x of a x = b (a 2-D, b 1-D or 2-D) through the thin SVD,
    singular values below rcond * max(s) counted as zero (default eps * max(m, n)):
    (x, residuals, rank, s). Residuals are |b - a x|² per column, always (as JAX, so that
    the shape is static); numpy_resid=True gives NumPy's empty array when rank < n or
    m <= n (concrete values only)."""
    x = _promote_float(a)[0]
    y = _promote_float(b)[0]
    x, y = _promote_same_dtype([x, y])
    if ndim(x) != 2:
        raise TypeError(f"lstsq: {ndim(x)}-dimensional array given. Array must be "
                        "two-dimensional")
    if ndim(y) not in (1, 2):
        raise TypeError(f"lstsq: {ndim(y)}-dimensional array given. Array must be one or "
                        "two-dimensional")
    m, n = _shape(x)
    if _shape(y)[0] != m:
        raise ValueError(f"lstsq: leading dimensions of input arrays must match, got shapes "
                         f"{_shape(x)} and {_shape(y)}")
    vector = ndim(y) == 1
    if vector:
        y = expand_dims(y, 1)
    rdt = _np.dtype(real(x).dtype)
    if rcond is None:
        rcond = _np.finfo(rdt).eps * builtins.max(m, n)
    u, s, vh = la.svd(x)
    keep = greater_equal(s, multiply(_np.asarray(rcond, rdt), max(s)))
    rank = sum(keep)
    s_inv = where(keep, divide(_np.ones((), rdt), where(keep, s, _np.ones((), rdt))),
                  _np.zeros((), rdt))
    uty = matmul(swapaxes(conj(u), 0, 1), y)
    sol = matmul(swapaxes(conj(vh), 0, 1), multiply(expand_dims(s_inv, 1), uty))
    resid = sum(_abs2(subtract(y, matmul(x, sol))), axis=0)
    if numpy_resid:
        r = core.to_concrete(rank)
        if r is None:
            raise core.ConcretizationTypeError(
                "lstsq: numpy_resid=True needs a concrete rank (the residuals' shape depends "
                "on it); leave numpy_resid=False under jit or vmap")
        if int(r) < n or m <= n:
            resid = _np.zeros((0,), rdt)
    return (ravel(sol) if vector else sol), resid, rank, s


def _matrix_power(a, n):
    """a multiplied by itself n times (an integer; 0 gives the identity, a negative n the
    inverse's power), by repeated squaring."""
    x = _as_operand(a)
    if ndim(x) < 2 or _shape(x)[-1] != _shape(x)[-2]:
        raise ValueError(f"matrix_power: the last 2 dimensions of the array must be square, "
                         f"got shape {_shape(x)}")
    try:
        n = operator.index(n)
    except TypeError as e:
        raise TypeError(f"matrix_power: exponent must be an integer, got {n!r}") from e
    if n == 0:
        return _eye(_shape(x)[-1], x.dtype, _shape(x)[:-2])
    if n < 0:
        x, n = _inv(x), -n
    result, power_ = None, x
    while n:
        if n & 1:
            result = power_ if result is None else matmul(result, power_)
        n >>= 1
        if n:
            power_ = matmul(power_, power_)
    return result


class linalg:  # noqa: N801  (a namespace, as jax.numpy.linalg)
    @staticmethod
    def norm(x, ord=None, axis=None, keepdims=False):
        """NumPy's norm: a vector norm for a vector or an int axis, a matrix norm for a matrix
        or two axes (every ord NumPy and JAX accept); an ord they reject raises."""
        x = _promote_float(x)[0]
        nd = ndim(x)
        if axis is None:
            if ord is None:             # the 2-norm of everything, whatever the rank
                return _vector_norm(x, None, None, keepdims)
            if nd not in (1, 2):
                raise ValueError(f"norm: improper number of dimensions to norm ({nd}) for "
                                 f"ord={ord!r}; pass axis=")
            axis = tuple(range(nd))
        axes = (axis,) if isinstance(axis, int) else tuple(axis)
        axes = tuple(a % builtins.max(nd, 1) for a in axes)
        if len(axes) == 1:
            return _vector_norm(x, ord, axes[0], keepdims)
        if len(axes) == 2 and axes[0] != axes[1]:
            return matrix_norm(x, ord, axes, keepdims)
        raise ValueError(f"norm: axis must be an int or a pair of distinct axes, got {axis!r}")

    @staticmethod
    def svd(a, full_matrices=True, compute_uv=True, hermitian=False):
        """The singular value decomposition of real or complex matrices (stacks too),
        differentiable: (U, s, Vh), or s with compute_uv=False."""
        x = _promote_float(a)[0]
        shape = _shape(x)
        if len(shape) < 2:
            raise ValueError(f"svd: expected a matrix (or a stack of them), got shape {shape}")
        if full_matrices and compute_uv and shape[-2] != shape[-1]:
            raise NotImplementedError(
                f"svd: full_matrices=True of a non-square matrix {shape} is not supported; "
                "pass full_matrices=False for the thin decomposition")
        u, s, vh = la.svd(x)
        return (u, s, vh) if compute_uv else s

    solve = staticmethod(_solve)
    inv = staticmethod(_inv)
    det = staticmethod(_det)
    slogdet = staticmethod(_slogdet)
    cholesky = staticmethod(_cholesky)
    qr = staticmethod(_qr)
    eigh = staticmethod(_eigh)
    eigvalsh = staticmethod(_eigvalsh)
    eig = staticmethod(_eig)
    pinv = staticmethod(_pinv)
    lstsq = staticmethod(_lstsq)
    matrix_power = staticmethod(_matrix_power)
    eigvals = staticmethod(_eigvals)
    LinAlgError = _np.linalg.LinAlgError
