"""torch.scatter_reduce and torch.index_reduce (sum, prod, mean, amax, amin; include_self),
with torch's gradients: amax/amin split the gradient evenly among the elements equal to
the result, prod's gradient handles zeros, and differentiating prod's src gradient again
where two zeros meet in one position raises, as torch.

Each is an autograd.Function: forward runs NumPy's ufunc.at; backward is written with
tensor ops (gather, scatter_add, where), so it is differentiable again."""
from __future__ import annotations

import numpy as np

from .function import Function
from .tensor import Tensor, wrap
from .tensor_info import wrap_dim

REDUCES = ("sum", "prod", "mean", "amax", "amin")
_UFUNC = {"sum": np.add, "mean": np.add, "prod": np.multiply, "amax": np.maximum,
          "amin": np.minimum}
PROD_GRADGRAD_MSG = ("scatter_reduce(): Double backward is unsupported for src when >1 zeros "
                     "in src are scattered to the same position in self")


def _targets(index, dim):
    """The (self position, src position) index tuples of every element of index."""
    grid = np.indices(index.shape, sparse=True)
    tgt = tuple(index if d == dim else g for d, g in enumerate(grid))
    return tgt, tuple(slice(0, n) for n in index.shape)


def _identity(reduce, dtype):
    if reduce in ("amax", "amin"):
        big = np.inf if dtype.kind == "f" else np.iinfo(dtype).max
        return -big if reduce == "amax" else big
    return 1 if reduce == "prod" else 0


def scatter_reduce_array(x, dim, index, src, reduce, include_self):
    """The forward on arrays: (result, number of values reduced into each position)."""
    tgt, part = _targets(index, dim)
    out = x.copy()
    count = np.zeros(x.shape, np.int64)
    np.add.at(count, tgt, 1)
    if not include_self:
        out[count > 0] = _identity(reduce, x.dtype)
    _UFUNC[reduce].at(out, tgt, src[part])
    n = count + (1 if include_self else 0)
    if reduce == "mean":
        nz = np.maximum(n, 1)
        out = out // nz if out.dtype.kind in "iu" else (out / nz).astype(out.dtype)
    return out, n


class ScatterReduce(Function):
    @staticmethod
    def forward(ctx, x, dim, index, src, reduce, include_self):
        out, n = scatter_reduce_array(x._data, dim, index._data, src._data, reduce,
                                      include_self)
        out = wrap(out)
        ctx.dim, ctx.reduce, ctx.include_self = dim, reduce, include_self
        ctx.n = n                       # counts (an array: no history to differentiate)
        ctx.save_for_backward(x, index, src, out)
        return out

    @staticmethod
    def backward(ctx, g):
        x, index, src, out = ctx.saved_tensors
        dim, reduce, include_self = ctx.dim, ctx.reduce, ctx.include_self
        count = wrap(ctx.n)
        hit = count > (1 if include_self else 0)          # positions something went into
        gx = gs = None
        if reduce == "sum":
            gx, gs = g, g.gather(dim, index)
        elif reduce == "mean":
            gm = g / count.clamp(min=1).to(g.dtype)
            gx, gs = gm, gm.gather(dim, index)
        elif reduce in ("amax", "amin"):
            x_is = x == out     # counted even when include_self=False (as torch), then
            #                     its gradient is masked below
            s_is = src[_part(index)] == out.gather(dim, index)
            n = x_is.to(g.dtype).scatter_add(dim, index, s_is.to(g.dtype))
            gd = g / n.clamp(min=1)
            gx = x_is.to(g.dtype) * gd
            gs = s_is.to(g.dtype) * gd.gather(dim, index)
        else:
            gx, gs = _prod_grads(g, x, index, src[_part(index)], out, dim, include_self)
        if not include_self:
            gx = gx.masked_fill(hit, 0)
        if tuple(gs.shape) != tuple(src.shape):      # index may cover a part of src
            gs = _pad_to(gs, src.shape)
        return gx, None, None, gs, None, None


def _part(index):
    return tuple(slice(0, n) for n in index.shape)


def _pad_to(g, shape):
    z = g.new_zeros(shape)
    z[_part(g)] = g
    return z


def _prod_grads(g, x, index, src, out, dim, include_self):
    """torch's prod gradients: the product of the other factors, zeros included."""
    mx = x.masked_fill(x == 0, 1)
    mx_out = ScatterReduce.apply(mx, dim, index, src, "prod", include_self)
    gx = g * mx_out / mx
    zero = src == 0
    nzero = zero.to(g.dtype).new_zeros(x.shape).scatter_add(dim, index, zero.to(g.dtype))
    nzero = nzero.gather(dim, index)
    single = zero & (nzero == 1)
    ms = src.masked_fill(single, 1)
    ms_out = ScatterReduce.apply(x, dim, index, ms, "prod", include_self)
    gs = ((g * ms_out).gather(dim, index)).where(single, (g * out).gather(dim, index) /
                                                  src.masked_fill(zero, 1))
    if bool((nzero > 1).any()):
        gs = _ProdGradGradError.apply(gs)
    return gx, gs


class _ProdGradGradError(Function):
    """Its input as is; differentiating it raises torch's prod double-backward error."""

    @staticmethod
    def forward(ctx, g):
        return g.clone()

    @staticmethod
    def backward(ctx, gg):
        raise RuntimeError(PROD_GRADGRAD_MSG)


def scatter_reduce(input, dim, index, src, reduce, *, include_self=True, out=None):  # noqa: A002
    """torch.scatter_reduce: reduce src's values into input's positions that index names
    along dim, with input's own value (include_self) or without it."""
    if reduce not in REDUCES:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got "
                           f"{reduce}")
    if not isinstance(index, Tensor) or index._data.dtype != np.int64:
        raise RuntimeError("scatter_reduce(): Expected dtype int64 for index")
    if src._data.dtype != input._data.dtype:
        raise RuntimeError("scatter_reduce(): Expected self.dtype to be equal to src.dtype")
    dim = wrap_dim(dim, input.ndim)
    return ScatterReduce.apply(input, dim, index, src, reduce, bool(include_self))


def index_reduce(input, dim, index, source, reduce, *, include_self=True):  # noqa: A002
    """torch.index_reduce: reduce the slices of source along dim into input's slices that the
    1-D index names (prod, mean, amax, amin)."""
    if reduce not in ("prod", "mean", "amax", "amin"):
        raise RuntimeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or "
                           f"amin but got {reduce}.")
    dim = wrap_dim(dim, input.ndim)
    shape = [1] * source.ndim
    shape[dim] = -1
    full = wrap(np.ascontiguousarray(np.broadcast_to(index._data.reshape(shape), source.shape)))
    return scatter_reduce(input, dim, full, source, reduce, include_self=include_self)


Tensor.scatter_reduce = scatter_reduce
Tensor.index_reduce = index_reduce
