"""Shape primitives: broadcasting, reshapes, transposes, slicing, padding, concatenation."""
from __future__ import annotations

import math

import numpy as np

from functrans.core import (DTypeError, JaxprEqn, Literal, ShapedArray, ShapeError,
                            UndefinedPrimal, Var, Zero)
from .base import (aval_of, bdim_size, bind, broadcast_batched, defprim, instantiate,
                   keep_operand, moveaxis, zeros)
from .elementwise import select, sub


def _lin(x):
    return type(x) is UndefinedPrimal


def _int_tuple(xs):
    return tuple(int(x) for x in xs)

# ---------------------------------------------------------------------------
# broadcast_in_dim


def _bid_impl(xp, x, shape, broadcast_dimensions):
    x = xp.asarray(x)
    if xp is np and x.flags.c_contiguous:
        # a read-only view with stride 0 on the broadcast axes, built directly (what
        # np.broadcast_to returns, at a tenth of its Python cost)
        strides = [0] * len(shape)
        for i, d in enumerate(broadcast_dimensions):
            if x.shape[i] != 1:
                strides[d] = x.strides[i]
        out = np.ndarray(shape, x.dtype, x, 0, strides)
        out.flags.writeable = False
        return out
    expanded = [1] * len(shape)
    for i, d in enumerate(broadcast_dimensions):
        expanded[d] = x.shape[i]
    return xp.broadcast_to(x.reshape(expanded), shape)


def _bid_shape(x, shape, broadcast_dimensions):
    bd = broadcast_dimensions
    if len(bd) != x.ndim:
        raise ShapeError(f"operand {x.str_short()} needs one broadcast dimension per axis, "
                         f"got broadcast_dimensions={bd}")
    if any(b >= len(shape) for b in bd) or list(bd) != sorted(set(bd)):
        raise ShapeError(f"broadcast_dimensions={bd} must be strictly increasing and < "
                         f"{len(shape)} for target shape {shape}")
    for i, d in enumerate(bd):
        if x.shape[i] not in (1, shape[d]):
            raise ShapeError(f"operand {x.str_short()} axis {i} (size {x.shape[i]}) cannot be "
                             f"broadcast to size {shape[d]} of target shape {shape}")
    return ShapedArray(shape, x.dtype, x.weak_type)


def _bid_transpose(ct, x, shape, broadcast_dimensions):
    bd = broadcast_dimensions
    sum_axes = tuple(i for i in range(len(shape)) if i not in bd)
    sum_axes += tuple(d for i, d in enumerate(bd) if x.aval.shape[i] == 1 and shape[d] != 1)
    out = bind("reduce_sum", ct, axes=tuple(sorted(sum_axes))) if sum_axes else ct
    if aval_of(out).shape != x.aval.shape:
        out = reshape(out, new_sizes=x.aval.shape)
    return [out]


def _bid_batch(vals, dims, shape, broadcast_dimensions):
    (x,), (d,) = vals, dims
    x = moveaxis(x, d, 0)
    size = aval_of(x).shape[0]
    return broadcast_in_dim(x, shape=(size,) + tuple(shape),
                            broadcast_dimensions=(0,) + tuple(b + 1 for b in broadcast_dimensions)), 0


def _bid_simplify(eqn, ins, s):
    """An identity broadcast is its operand; a broadcast of a broadcast is one broadcast."""
    p = eqn.params
    if s.ok(ins[0]) and tuple(p["broadcast_dimensions"]) == tuple(range(s.out.ndim)):
        return ins[0]
    src = s.src(ins[0])
    if src is not None and src.primitive is broadcast_in_dim_p:
        outer = p["broadcast_dimensions"]
        dims = tuple(outer[d] for d in src.params["broadcast_dimensions"])
        return JaxprEqn(eqn.primitive, [src.invars[0]], {**p, "broadcast_dimensions": dims},
                        eqn.outvars)
    return None


broadcast_in_dim_p = defprim("broadcast_in_dim", _bid_impl, _bid_shape, linear=True,
                             transpose=_bid_transpose, batch=_bid_batch, simplify=_bid_simplify)

# ---------------------------------------------------------------------------
# reshape, transpose, squeeze, expand_dims, rev


def _reshape_shape(x, new_sizes, dimensions=None):
    if dimensions is not None:
        raise ShapeError("the dimensions argument is not supported; transpose first")
    if math.prod(new_sizes) != x.size:
        raise ShapeError(f"cannot reshape {x.str_short()} ({x.size} elements) to {new_sizes}")
    return ShapedArray(new_sizes, x.dtype, x.weak_type)


def _move0_then(f):
    """Batching rule for a unary shape op whose params are rewritten for a leading axis."""
    def rule(vals, dims, **params):
        x = moveaxis(vals[0], dims[0], 0)
        return f(x, aval_of(x).shape[0], **params), 0
    return rule


def _reshape_simplify(eqn, ins, s):
    """An identity reshape is its operand; a reshape of a reshape is one reshape."""
    if s.ok(ins[0]):
        return ins[0]
    src = s.src(ins[0])
    if src is not None and src.primitive is reshape_p:
        return JaxprEqn(eqn.primitive, [src.invars[0]], eqn.params, eqn.outvars)
    return None


reshape_p = defprim(
    "reshape", lambda xp, x, new_sizes, dimensions=None:
    x.reshape(new_sizes) if type(x) is np.ndarray else xp.reshape(x, new_sizes),
    _reshape_shape, linear=True,
    transpose=lambda ct, x, new_sizes, dimensions=None: [reshape(ct, new_sizes=x.aval.shape)],
    batch=_move0_then(lambda x, b, new_sizes, dimensions=None:
                      reshape(x, new_sizes=(b,) + tuple(new_sizes))),
    simplify=_reshape_simplify)


def _transpose_shape(x, permutation):
    if sorted(permutation) != list(range(x.ndim)):
        raise ShapeError(f"permutation {permutation} is not a permutation of the axes of "
                         f"{x.str_short()}")
    return ShapedArray(tuple(x.shape[p] for p in permutation), x.dtype, x.weak_type)


def _transpose_simplify(eqn, ins, s):
    """Identity permutations vanish, transposes of transposes compose, and the transpose
    of a matrix product read once is the product with its operands swapped."""
    perm = tuple(eqn.params["permutation"])
    if perm == tuple(range(len(perm))) and s.ok(ins[0]):
        return ins[0]
    src = s.src(ins[0])
    if src is not None and src.primitive is transpose_p:
        inner = tuple(src.params["permutation"])
        composed = tuple(inner[i] for i in perm)
        if composed == tuple(range(len(composed))) and s.ok(src.invars[0]):
            return src.invars[0]
        return JaxprEqn(eqn.primitive, [src.invars[0]], {"permutation": composed}, eqn.outvars)
    if (src is not None and src.primitive.name == "dot_general" and perm == (1, 0)
            and s.uses.get(ins[0], 0) == 1):
        (lc, rc), (lb, rb) = src.params["dimension_numbers"]
        x, y = src.invars
        if not lb and x.aval.ndim - len(lc) == 1 and y.aval.ndim - len(rc) == 1:
            return JaxprEqn(src.primitive, [y, x],
                            {**src.params, "dimension_numbers": ((rc, lc), (lb, rb))},
                            eqn.outvars)
    return None


transpose_p = defprim(
    "transpose", lambda xp, x, permutation: xp.transpose(x, permutation), _transpose_shape,
    linear=True,
    transpose=lambda ct, x, permutation: [
        transpose(ct, permutation=tuple(np.argsort(permutation).tolist()))],
    batch=_move0_then(lambda x, b, permutation:
                      transpose(x, permutation=(0,) + tuple(p + 1 for p in permutation))),
    simplify=_transpose_simplify)


def _squeeze_shape(x, dimensions):
    for d in dimensions:
        if not 0 <= d < x.ndim or x.shape[d] != 1:
            raise ShapeError(f"cannot squeeze axis {d} of {x.str_short()}: it must have size 1")
    return ShapedArray(tuple(s for i, s in enumerate(x.shape) if i not in dimensions),
                       x.dtype, x.weak_type)


squeeze_p = defprim(
    "squeeze", lambda xp, x, dimensions: xp.reshape(x, _squeeze_shape(aval_of(x), dimensions).shape),
    _squeeze_shape, linear=True,
    transpose=lambda ct, x, dimensions: [reshape(ct, new_sizes=x.aval.shape)],
    batch=_move0_then(lambda x, b, dimensions:
                      squeeze(x, dimensions=tuple(d + 1 for d in dimensions))),
    simplify=keep_operand)


def _expand_dims_shape(x, dimensions):
    n = x.ndim + len(dimensions)
    if any(not 0 <= d < n for d in dimensions) or len(set(dimensions)) != len(dimensions):
        raise ShapeError(f"bad dimensions {dimensions} for expand_dims of {x.str_short()}")
    it = iter(x.shape)
    return ShapedArray(tuple(1 if i in dimensions else next(it) for i in range(n)),
                       x.dtype, x.weak_type)


expand_dims_p = defprim(
    "expand_dims",
    lambda xp, x, dimensions: xp.reshape(x, _expand_dims_shape(aval_of(x), dimensions).shape),
    _expand_dims_shape, linear=True,
    transpose=lambda ct, x, dimensions: [reshape(ct, new_sizes=x.aval.shape)],
    batch=_move0_then(lambda x, b, dimensions:
                      expand_dims(x, dimensions=tuple(d + 1 for d in dimensions))),
    simplify=keep_operand)


def _rev_simplify(eqn, ins, s):
    """A rev over no dimensions is its operand."""
    return ins[0] if not eqn.params["dimensions"] and s.ok(ins[0]) else None


def _rev_shape(x, dimensions):
    if any(not 0 <= d < x.ndim for d in dimensions):
        raise ShapeError(f"bad dimensions {dimensions} for rev of {x.str_short()}")
    return x


rev_p = defprim(
    "rev", lambda xp, x, dimensions: xp.flip(x, dimensions) if dimensions else x, _rev_shape,
    linear=True, transpose=lambda ct, x, dimensions: [rev(ct, dimensions=dimensions)],
    batch=_move0_then(lambda x, b, dimensions: rev(x, dimensions=tuple(d + 1 for d in dimensions))),
    simplify=_rev_simplify)

# ---------------------------------------------------------------------------
# concatenate


def _concat_shape(*xs, dimension):
    if not xs:
        raise ShapeError("needs at least one operand")
    x0 = xs[0]
    if not 0 <= dimension < x0.ndim:
        raise ShapeError(f"dimension {dimension} out of range for {x0.str_short()}")
    for x in xs:
        if x.dtype != x0.dtype:
            raise DTypeError(f"operands must share a dtype, got "
                             f"{', '.join(a.str_short() for a in xs)}")
        if x.ndim != x0.ndim or any(a != b for i, (a, b) in enumerate(zip(x.shape, x0.shape))
                                    if i != dimension):
            raise ShapeError(f"operands must match except along dimension {dimension}, got "
                             f"{', '.join(a.str_short() for a in xs)}")
    shape = list(x0.shape)
    shape[dimension] = sum(x.shape[dimension] for x in xs)
    return ShapedArray(shape, x0.dtype, all(x.weak_type for x in xs))


def _concat_transpose(ct, *xs, dimension):
    outs, start = [], 0
    for x in xs:
        n = aval_of(x).shape[dimension]
        if _lin(x):
            lo = [0] * len(x.aval.shape)
            hi = list(aval_of(ct).shape)
            lo[dimension], hi[dimension] = start, start + n
            outs.append(slice(ct, start_indices=tuple(lo), limit_indices=tuple(hi), strides=None))
        else:
            outs.append(None)
        start += n
    return outs


def _concat_batch(vals, dims, dimension):
    size = bdim_size(vals, dims)
    xs = [broadcast_batched(v, size) if d is None else moveaxis(v, d, 0)
          for v, d in zip(vals, dims)]
    return concatenate(*xs, dimension=dimension + 1), 0


def _concat_simplify(eqn, ins, s):
    """A concatenation along the last axis of reshapes that each merge the operand's axes
    from that position on, (*lead, m_i, *rest) -> (*lead, m_i * prod(rest)) with the same
    lead and rest, read nowhere else, is the reshape (free) of the operands' concatenation
    along m: one copy per operand, where reshaping a transposed operand (the heads of an
    attention's q, k, v gradients) copies it once before the concatenation copies it again."""
    d = eqn.params["dimension"]
    if s.out is None or len(ins) < 2 or d != s.out.ndim - 1:
        return None
    xs, rest = [], None
    for a in ins:
        src = s.src(a)
        if src is None or src.primitive is not reshape_p or s.uses.get(a, 0) != 1:
            return None
        x, y = src.invars[0].aval.shape, src.outvars[0].aval.shape
        if len(x) <= d or x[:d] != y[:d] or (rest is not None and x[d + 1:] != rest):
            return None
        rest = x[d + 1:]
        xs.append(src.invars[0])
    if not rest:
        return None
    shape = xs[0].aval.shape[:d] + (sum(x.aval.shape[d] for x in xs),) + rest
    inner = Var(ShapedArray(shape, s.out.dtype, s.out.weak_type))
    return [JaxprEqn(concatenate_p, xs, {"dimension": d}, [inner]),
            JaxprEqn(reshape_p, [inner], {"new_sizes": tuple(s.out.shape)}, eqn.outvars)]


def _concat_impl(xp, *xs, dimension):
    """xp.concatenate; on NumPy into a C-contiguous array whatever the operands' layouts
    (NumPy's own result follows theirs: of transposed operands, a transposed array that a
    reshape then copies)."""
    if xp is not np or all(type(x) is np.ndarray and x.flags.c_contiguous for x in xs):
        return xp.concatenate(xs, axis=dimension)
    xs = [np.asarray(x) for x in xs]
    shape = list(xs[0].shape)
    shape[dimension] = sum(x.shape[dimension] for x in xs)
    return np.concatenate(xs, axis=dimension, out=np.empty(shape, np.result_type(*xs)))


def _concat_cpu(eqn):
    """Concatenation into the planned buffer (out=): a lowered loop step's stacked output
    (an LSTM's four gate cotangents) is written straight into its row, a temporary into a
    scratch buffer. Literal operands go through the implementation."""
    if any(type(a) is Literal for a in eqn.invars):
        return None
    dimension = eqn.params["dimension"]

    def emit(ctx, ins, out):
        return [f"{ctx.g(np.concatenate, 'concatenate')}(({', '.join(ins)},), "
                f"axis={dimension}, out={out})"]
    return emit, _never


def _never(i):
    return False


concatenate_p = defprim(
    "concatenate", _concat_impl,
    _concat_shape, linear=True, transpose=_concat_transpose, batch=_concat_batch, fresh=True,
    cpu=_concat_cpu, simplify=_concat_simplify)

# ---------------------------------------------------------------------------
# pad and slice


def _pad_impl(xp, x, padding_value, padding_config):
    x = xp.asarray(x)
    shape = tuple(lo + hi + s + max(s - 1, 0) * it
                  for s, (lo, hi, it) in zip(x.shape, padding_config))
    out = xp.full(shape, padding_value, dtype=x.dtype)
    index = tuple(np.s_[lo: lo + s + max(s - 1, 0) * it: it + 1]
                  for s, (lo, hi, it) in zip(x.shape, padding_config))
    out[index] = x
    return out


def _pad_shape(x, padding_value, padding_config):
    if padding_value.ndim or padding_value.dtype != x.dtype:
        raise DTypeError(f"padding value must be a scalar of the operand's dtype, got "
                         f"{padding_value.str_short()} for {x.str_short()}")
    if len(padding_config) != x.ndim or any(len(c) != 3 or min(c) < 0 for c in padding_config):
        raise ShapeError(f"padding_config {padding_config} needs one non-negative "
                         f"(low, high, interior) per axis of {x.str_short()}")
    shape = tuple(lo + hi + s + max(s - 1, 0) * it
                  for s, (lo, hi, it) in zip(x.shape, padding_config))
    return ShapedArray(shape, x.dtype, x.weak_type)


def _pad_transpose(ct, x, padding_value, padding_config):
    shape = aval_of(ct).shape
    lo = tuple(c[0] for c in padding_config)
    hi = tuple(s - c[1] for s, c in zip(shape, padding_config))
    strides = tuple(c[2] + 1 for c in padding_config)
    t_x = slice(ct, start_indices=lo, limit_indices=hi, strides=strides)
    t_pv = None
    if _lin(padding_value):
        axes = tuple(range(len(shape)))
        t_pv = sub(bind("reduce_sum", ct, axes=axes), bind("reduce_sum", t_x, axes=axes))
    return [t_x if _lin(x) else None, t_pv]


def _pad_batch(vals, dims, padding_config):
    (x, pv), (dx, dpv) = vals, dims
    size = bdim_size(vals, dims)
    x = broadcast_batched(x, size) if dx is None else moveaxis(x, dx, 0)
    config = ((0, 0, 0),) + tuple(padding_config)
    if dpv is None:
        return pad(x, pv, padding_config=config), 0
    xdt = aval_of(x).dtype
    padded = pad(x, np.zeros((), xdt), padding_config=config)
    mask = pad(broadcast_in_dim(np.ones((), np.bool_), shape=aval_of(x).shape, broadcast_dimensions=()),
               np.zeros((), np.bool_), padding_config=config)
    pvb = broadcast_in_dim(moveaxis(pv, dpv, 0), shape=aval_of(padded).shape, broadcast_dimensions=(0,))
    return select(mask, padded, pvb), 0


pad_p = defprim("pad", _pad_impl, _pad_shape, linear=True, transpose=_pad_transpose,
                batch=_pad_batch, fresh=True)


def slice_index(start_indices, limit_indices, strides):
    """A slice's params as the NumPy basic index of the operand (a view)."""
    strides = strides or (1,) * len(start_indices)
    return tuple(np.s_[a:b:s] for a, b, s in zip(start_indices, limit_indices, strides))


def slice_is_contiguous(shape, start_indices, limit_indices, strides):
    """Whether the slice of a C-contiguous array of `shape` is C-contiguous: stride 1 on its
    first axis of more than one element, and every later such axis taken whole."""
    strides = strides or (1,) * len(shape)
    axes = [k for k, (a, b) in enumerate(zip(start_indices, limit_indices)) if b - a > 1]
    return all(limit_indices[k] - start_indices[k] == shape[k] and strides[k] == 1
               for k in axes[1:]) and (not axes or strides[axes[0]] == 1)


def slice_column_block(shape, start_indices, limit_indices, strides):
    """(W, lo) when the slice of an array of `shape` takes every leading axis whole and the
    columns [lo, hi) of its last axis W, stride 1 (an LSTM step's gate block of the
    pre-activations): element (row r, column j) of the slice sits at r * W + lo + j of the
    C-contiguous operand. None otherwise (also for rank < 2, and a block of whole rows,
    which is C-contiguous)."""
    strides = strides or (1,) * len(shape)
    if len(shape) < 2 or any(s != 1 for s in strides):
        return None
    if any(a != 0 or b != d for a, b, d in zip(start_indices[:-1], limit_indices[:-1],
                                               shape[:-1])):
        return None
    lo, hi, w = start_indices[-1], limit_indices[-1], shape[-1]
    if hi - lo == w or hi <= lo:
        return None
    return w, lo


def _slice_impl(xp, x, start_indices, limit_indices, strides):
    return xp.asarray(x)[slice_index(start_indices, limit_indices, strides)]


def _slice_shape(x, start_indices, limit_indices, strides):
    strides = strides or (1,) * x.ndim
    if not (len(start_indices) == len(limit_indices) == len(strides) == x.ndim):
        raise ShapeError(f"needs one start, limit and stride per axis of {x.str_short()}")
    for a, b, s, n in zip(start_indices, limit_indices, strides, x.shape):
        if not (0 <= a <= b <= n) or s < 1:
            raise ShapeError(f"slice {start_indices}:{limit_indices}:{strides} is out of "
                             f"bounds for {x.str_short()}")
    shape = tuple(-(-(b - a) // s) for a, b, s in zip(start_indices, limit_indices, strides))
    return ShapedArray(shape, x.dtype, x.weak_type)


def _slice_transpose(ct, x, start_indices, limit_indices, strides):
    strides = strides or (1,) * len(start_indices)
    out_shape = aval_of(ct).shape
    config = []
    for n, a, s, m in zip(x.aval.shape, start_indices, strides, out_shape):
        used = a + (m - 1) * s + 1 if m else a
        config.append((a, n - used, s - 1 if m > 1 else 0) if m else (a, n - a, 0))
    zero = np.zeros((), x.aval.dtype)
    return [pad(ct, zero, padding_config=tuple(config))]


slice_p = defprim(
    "slice", _slice_impl, _slice_shape, linear=True, transpose=_slice_transpose,
    batch=_move0_then(lambda x, b, start_indices, limit_indices, strides: slice(
        x, start_indices=(0,) + tuple(start_indices), limit_indices=(b,) + tuple(limit_indices),
        strides=None if strides is None else (1,) + tuple(strides))))

# ---------------------------------------------------------------------------
# iota


def _iota_impl(xp, dtype, shape, dimension):
    r = xp.arange(shape[dimension], dtype=dtype)
    expanded = [1] * len(shape)
    expanded[dimension] = shape[dimension]
    return xp.broadcast_to(r.reshape(expanded), shape)


def _iota_shape(dtype, shape, dimension):
    if not 0 <= dimension < len(shape):
        raise ShapeError(f"dimension {dimension} out of range for shape {shape}")
    return ShapedArray(shape, dtype)


iota_p = defprim("iota", lambda xp, *, dtype, shape, dimension: _iota_impl(xp, dtype, shape, dimension),
                 lambda *, dtype, shape, dimension: _iota_shape(dtype, shape, dimension),
                 differentiable=False, fresh=True)

# ---------------------------------------------------------------------------
# bind wrappers

broadcast_in_dim = broadcast_in_dim_p.bind
reshape = reshape_p.bind
transpose = transpose_p.bind
squeeze = squeeze_p.bind
expand_dims = expand_dims_p.bind
rev = rev_p.bind
concatenate = concatenate_p.bind
pad = pad_p.bind
slice = slice_p.bind
iota = iota_p.bind
