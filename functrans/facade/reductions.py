"""Tensor reductions with torch's names, signatures, grad_fn names and dtype rules: sum,
mean, prod, var/std, max/min/amax/amin, argmax/argmin, cumulative ops, logsumexp, norms,
all/any, equal/allclose/isclose. Composites of functrans.numpy functions (apply_fn), as
methods.py's."""
from __future__ import annotations

import builtins
import functools
from collections import namedtuple

import numpy as np

from .. import numpy as fnp
from ..numpy._linalg import matrix_norm
from ..core import ConcretizationTypeError, Tracer
from ..higher_order.custom import custom_jvp
from . import dtypes as D
from .methods import _arr, abs_fn
from .tensor import Tensor, apply_fn, static, wrap
from .tensor_info import wrap_dim

T = Tensor


def _dims(dim, ndim):
    """A reduction's dim argument as axes: None, and an empty tuple or list (torch's
    dim=()), reduce every dimension."""
    if dim is None:
        return None
    if isinstance(dim, (tuple, list)):
        return tuple(wrap_dim(d, ndim) for d in dim) if len(dim) else None
    return wrap_dim(dim, ndim)


def _sum_fn(x, axis, keepdims, dtype):
    return fnp.sum(x, axis=axis, keepdims=keepdims, dtype=dtype)


def sum(self, dim=None, keepdim=False, *, dtype=None):
    x = self
    if dtype is None and self.dtype.kind in "biu":
        dtype = D.int64
    name = "SumBackward0" if dim is None else "SumBackward1"
    return apply_fn(name, _sum_fn, (x,), static(axis=_dims(dim, x.ndim), keepdims=keepdim,
                                               dtype=D.to_dtype(dtype)))


def _mean_fn(x, axis, keepdims):
    return fnp.mean(x, axis=axis, keepdims=keepdims)


def mean(self, dim=None, keepdim=False, *, dtype=None):
    x = self if dtype is None else self.to(dtype)
    if x.dtype.kind not in "fc":
        raise RuntimeError(
            "mean(): could not infer output dtype. Input dtype must be either a floating point "
            f"or complex dtype. Got: {D.type_name(x.dtype).replace('Tensor', '')}")
    name = "MeanBackward0" if dim is None else "MeanBackward1"
    return apply_fn(name, _mean_fn, (x,), static(axis=_dims(dim, x.ndim), keepdims=keepdim))


def _prod_fn(x, axis, keepdims):
    return fnp.prod(x, axis=axis, keepdims=keepdims)


def _accumulate_as(x, dtype):
    """The input of sum-like reductions (prod, cumsum, cumprod): cast to dtype when given;
    bool and integer tensors accumulate in int64, as in torch."""
    if dtype is not None:
        return x.to(dtype)
    return x.to(D.int64) if x.dtype.kind in "biu" and x.dtype != D.int64 else x


def _float_only(name, x):
    if x.dtype.kind not in "fc":
        raise RuntimeError(name)


def prod(self, dim=None, keepdim=False, *, dtype=None):
    x = _accumulate_as(self, dtype)
    return apply_fn("ProdBackward0" if dim is None else "ProdBackward1", _prod_fn, (x,),
                    static(axis=_dims(dim, x.ndim), keepdims=keepdim))


def _correction(unbiased, correction):
    if correction is not None:
        return correction
    return 1 if unbiased in (None, True) else 0


def _var_fn(x, axis, keepdims, ddof):
    return fnp.var(x, axis=axis, keepdims=keepdims, ddof=ddof)


def _std_fn(x, axis, keepdims, ddof):
    """sqrt(var) with torch's derivative 0 (not 1/(2*0) * 0) where the variance is 0."""
    v = fnp.var(x, axis=axis, keepdims=keepdims, ddof=ddof)
    zero = fnp.equal(v, 0)
    return fnp.where(zero, fnp.zeros((), v.dtype), fnp.sqrt(fnp.where(zero, fnp.ones(
        (), v.dtype), v)))


def _spread(name, fn, self, dim, unbiased, keepdim, correction):
    """var or std (fn) with torch's arguments: floating tensors only; a bool in dim's place
    is `unbiased` (x.var(False))."""
    _float_only("std and var only support floating point and complex dtypes", self)
    if isinstance(dim, builtins.bool):
        dim, unbiased = None, dim
    return apply_fn(name, fn, (self,), static(
        axis=_dims(dim, self.ndim), keepdims=keepdim, ddof=_correction(unbiased, correction)))


def var(self, dim=None, unbiased=None, keepdim=False, *, correction=None):
    return _spread("VarBackward0", _var_fn, self, dim, unbiased, keepdim, correction)


def std(self, dim=None, unbiased=None, keepdim=False, *, correction=None):
    return _spread("StdBackward0", _std_fn, self, dim, unbiased, keepdim, correction)


def _var_mean_fn(x, axis, keepdims, ddof):
    return (fnp.var(x, axis=axis, keepdims=keepdims, ddof=ddof),
            fnp.mean(x, axis=axis, keepdims=keepdims))


def _std_mean_fn(x, axis, keepdims, ddof):
    return (_std_fn(x, axis, keepdims, ddof), fnp.mean(x, axis=axis, keepdims=keepdims))


def var_mean(self, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """torch.var_mean (a function only, as torch's): (var, mean) in one VarMeanBackward0."""
    return _spread("VarMeanBackward0", _var_mean_fn, self, dim, unbiased, keepdim, correction)


def std_mean(self, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """torch.std_mean (a function only): (std, mean) in one StdMeanBackward0."""
    return _spread("StdMeanBackward0", _std_mean_fn, self, dim, unbiased, keepdim, correction)


MinMax = namedtuple("return_types", ["values", "indices"])


def _argreduce_fn(x, axis, keepdims, which):
    idx = (fnp.argmax if which == "max" else fnp.argmin)(x, axis=axis, keepdims=True)
    vals = fnp.take_along_axis(x, idx, axis=axis)
    idx = fnp.astype(idx, np.int64)
    if not keepdims:
        vals, idx = fnp.squeeze(vals, axis), fnp.squeeze(idx, axis)
    return vals, idx


def _extreme_fn(x, axis, keepdims, which):
    return (fnp.max if which == "max" else fnp.min)(x, axis=axis, keepdims=keepdims)


@functools.partial(custom_jvp, nondiff_argnums=(1,))
def _extreme_all_fn(x, which):
    """max() / min() over every element (torch's MaxBackward1): the derivative is split
    evenly among the elements equal to the result, and a NaN result is the NaNs' (torch's
    evenly_distribute_backward; amax keeps the equality rule, so NaN there)."""
    return (fnp.max if which == "max" else fnp.min)(x)


@_extreme_all_fn.defjvp
def _extreme_all_jvp(which, primals, tangents):
    (x,), (t,) = primals, tangents
    v = _extreme_all_fn(x, which)
    w = fnp.astype(fnp.equal(x, v) | (fnp.isnan(x) & fnp.isnan(v)), x.dtype)
    return v, fnp.sum(fnp.where(w > 0, t, fnp.zeros_like(t))) / fnp.sum(w)


def _check_nonempty(name, self, axis):
    """torch's errors for max/min/amax/amin/argmax/argmin over nothing: a reduction over
    every dimension of an empty tensor, or over a dimension of size 0 (reducing other
    dimensions of an empty tensor is fine)."""
    if self.numel() != 0:
        return
    if axis is None:
        if name.startswith("arg"):
            raise IndexError(f"{name}(): Expected reduction dim to be specified for "
                             "input.numel() == 0.")
        raise RuntimeError(f"{name}(): Expected reduction dim to be specified for input.numel() "
                           "== 0. Specify the reduction dim with the 'dim' argument.")
    for a in axis if isinstance(axis, tuple) else (axis,):
        if self.shape[a] == 0:
            raise IndexError(f"{name}(): Expected reduction dim {a} to have non-zero size.")


def _extreme(self, which, dim=None, keepdim=False):
    if isinstance(dim, Tensor):
        return self.maximum(dim) if which == "max" else self.minimum(dim)
    _check_nonempty(which, self, _dims(dim, self.ndim))
    if dim is None:
        return apply_fn("MaxBackward1" if which == "max" else "MinBackward1", _extreme_all_fn,
                        (self,), static(which=which))
    name = "MaxBackward0" if which == "max" else "MinBackward0"
    v, i = apply_fn(name, _argreduce_fn, (self,), static(axis=_dims(dim, self.ndim),
                                                       keepdims=keepdim, which=which))
    return MinMax(v, i)


T.sum, T.mean, T.prod, T.var, T.std = sum, mean, prod, var, std
T.max = lambda self, dim=None, keepdim=False: _extreme(self, "max", dim, keepdim)
T.min = lambda self, dim=None, keepdim=False: _extreme(self, "min", dim, keepdim)


def amax(self, dim=(), keepdim=False):
    axis = _dims(dim, self.ndim)
    _check_nonempty("amax", self, axis)
    return apply_fn("AmaxBackward0", _extreme_fn, (self,),
                    static(axis=axis, keepdims=keepdim, which="max"))


def amin(self, dim=(), keepdim=False):
    axis = _dims(dim, self.ndim)
    _check_nonempty("amin", self, axis)
    return apply_fn("AminBackward0", _extreme_fn, (self,),
                    static(axis=axis, keepdims=keepdim, which="min"))


def _argidx_fn(x, axis, keepdims, which):
    f = fnp.argmax if which == "max" else fnp.argmin
    if axis is None:
        i = f(fnp.reshape(x, (-1,)))
        return fnp.astype(fnp.reshape(i, (1,) * x.ndim) if keepdims else i, np.int64)
    return fnp.astype(f(x, axis=axis, keepdims=keepdims), np.int64)


def _all_any_fn(x, axis, keepdims, which):
    return (fnp.all if which == "all" else fnp.any)(x, axis=axis, keepdims=keepdims)


def _all_any(self, which, dim=None, keepdim=False):
    dim = _dims(dim, self.ndim)
    if isinstance(self._data, Tracer):
        return apply_fn(which, _all_any_fn, (self,), static(axis=dim, keepdims=keepdim,
                                                           which=which))
    f = np.all if which == "all" else np.any
    return wrap(np.asarray(f(self._data, axis=dim, keepdims=keepdim)))


def _argfn(self, which, dim=None, keepdim=False):
    x = self._data
    if x.dtype == np.bool_:
        raise RuntimeError(f"arg{which}(): does not support bool input")
    dim = None if dim is None else wrap_dim(dim, x.ndim)
    _check_nonempty("arg" + which, self, dim)
    if isinstance(x, Tracer):
        return apply_fn("arg" + which, _argidx_fn, (self,), static(
            axis=dim, keepdims=keepdim, which=which))
    f = np.argmax if which == "max" else np.argmin
    if dim is None:
        r = f(x.reshape(-1))
        out = np.asarray(r, np.int64)
        if keepdim:
            out = out.reshape((1,) * x.ndim)
    else:
        out = np.asarray(f(x, axis=dim, keepdims=keepdim), np.int64)
    return wrap(out)


T.amax, T.amin = amax, amin
T.argmax = lambda self, dim=None, keepdim=False: _argfn(self, "max", dim, keepdim)
T.argmin = lambda self, dim=None, keepdim=False: _argfn(self, "min", dim, keepdim)


def _lse_fn(x, axis, keepdims):
    shape = tuple(x.shape)
    axes = range(len(shape)) if axis is None else (axis,) if isinstance(axis, int) else axis
    if any(shape[a] == 0 for a in axes):        # the log of an empty sum: -inf, as torch
        out = fnp.sum(x, axis=axis, keepdims=keepdims)
        return out + fnp.asarray(-np.inf, out.dtype)
    return fnp.logsumexp(x, axis=axis, keepdims=keepdims)


def logsumexp(self, dim, keepdim=False):
    return apply_fn("LogsumexpBackward0", _lse_fn, (self,),
                    static(axis=_dims(dim, self.ndim), keepdims=keepdim))


def vector_norm_fn(x, axis, keepdims, p):
    """torch.linalg.vector_norm: sum(|x|^p)^(1/p); max/min |x| for +-inf, the count of nonzeros
    for 0. PyTorch's derivatives: sign(x) rules at x = 0, and 0 (not NaN) at a zero norm."""
    inf = float("inf")
    if p == 0:
        return fnp.sum(fnp.astype(fnp.not_equal(x, 0), x.dtype), axis=axis, keepdims=keepdims)
    a = abs_fn(x)
    if p in (inf, -inf):
        return (fnp.max if p == inf else fnp.min)(a, axis=axis, keepdims=keepdims)
    if p == 1:
        return fnp.sum(a, axis=axis, keepdims=keepdims)
    if 0 < p < 1:                # |x|^p: torch's derivative is 0 (not sign(0) * inf) at 0
        nz = fnp.not_equal(a, 0)
        ap = fnp.where(nz, fnp.power(fnp.where(nz, a, fnp.ones((), a.dtype)), float(p)),
                       fnp.zeros((), a.dtype))
    else:
        ap = fnp.multiply(x, x) if p == 2 else fnp.power(a, float(p))
    s = fnp.sum(ap, axis=axis, keepdims=keepdims)
    zero = fnp.equal(s, 0)
    safe = fnp.where(zero, fnp.ones((), s.dtype), s)       # no inf * 0 in the derivative
    root = fnp.sqrt(safe) if p == 2 else fnp.power(safe, 1.0 / p)
    return fnp.where(zero, fnp.zeros((), s.dtype), root)


def _frobenius(y, axes):
    return vector_norm_fn(y, axes, False, 2)


class LinAlgError(RuntimeError):
    """torch.linalg.LinAlgError: a singular or not positive-definite input, or a NaN given to
    an SVD (ft.linalg.LinAlgError)."""


def check_svd_input(A, axes=(-2, -1)):
    """torch's error for an SVD (svd, svdvals, pinv, the nuclear and spectral norms) of a
    matrix holding a NaN, naming the first such matrix of a stack; inf alone gives NaN
    values (the svd primitive's answer), as in torch. Traced values are not checked."""
    data = A._data if isinstance(A, Tensor) else A
    if type(data) is not np.ndarray or A.ndim < 2:
        return
    nan = np.isnan(np.moveaxis(data, axes, (-2, -1))).any(axis=(-2, -1))
    if nan.any():
        where = f"(Batch element {int(np.argmax(nan.ravel()))}): " if nan.ndim else ""
        raise LinAlgError(f"linalg.svd: {where}The algorithm failed to converge because the "
                          "input matrix contained non-finite values.")


def matrix_norm_fn(x, ord, axes, keepdims):
    """torch.linalg.matrix_norm over two axes, with PyTorch's derivatives at kinks."""
    return matrix_norm(x, ord, axes, keepdims, absval=abs_fn, frobenius=_frobenius)


def norm(self, p="fro", dim=None, keepdim=False, dtype=None):
    """torch.norm: 'nuc' is the nuclear norm of a matrix (or over two dims); any other p the
    vector norm over dim (all elements when None), computed in dtype when given."""
    self = self if dtype is None else self.to(dtype)
    if p == "nuc":
        axes = (0, 1) if dim is None else _dims(dim, self.ndim)
        if self.ndim < 2 or len(axes) != 2:
            raise RuntimeError("linalg.matrix_norm: The input tensor A must have at least 2 "
                               "dimensions.")
        check_svd_input(self, axes)
        return apply_fn("NormBackward1", matrix_norm_fn, (self,),
                        static(ord="nuc", axes=axes, keepdims=keepdim))
    _float_only("linalg.vector_norm: Expected a floating point or complex tensor as input. "
                f"Got {D.scalar_name(self.dtype)}", self)
    p = 2 if p in ("fro", None) else p
    return apply_fn("LinalgVectorNormBackward0", vector_norm_fn,
                    (self,), static(axis=_dims(dim, self.ndim), keepdims=keepdim, p=p))


def _cumsum_fn(x, axis):
    return fnp.cumsum(x, axis=axis)


def _cumprod_fn(x, axis):
    return fnp.cumprod(x, axis=axis)


T.logsumexp, T.norm = logsumexp, norm


def _cumulative(name, fn):
    def f(self, dim, *, dtype=None):
        x = _accumulate_as(self, dtype)
        axis = wrap_dim(dim, x.ndim)
        if x.ndim == 0:                # torch: a 0-d tensor is its own running sum/product
            return apply_fn(name, _identity_fn, (x,))
        return apply_fn(name, fn, (x,), static(axis=axis))
    f.__name__ = name
    return f


def _identity_fn(x):
    return fnp.asarray(x) + 0


T.cumsum = _cumulative("CumsumBackward0", _cumsum_fn)
T.cumprod = _cumulative("CumprodBackward0", _cumprod_fn)
T.all = lambda self, dim=None, keepdim=False: _all_any(self, "all", dim, keepdim)
T.any = lambda self, dim=None, keepdim=False: _all_any(self, "any", dim, keepdim)
T.count_nonzero = lambda self, dim=None: wrap(np.asarray(np.count_nonzero(
    self._data, axis=_dims(dim, self.ndim)), np.int64))


def _python_bool(name, *arrays):
    """torch.equal/allclose answer a Python bool: they need concrete values."""
    if any(isinstance(a, Tracer) for a in arrays):
        raise ConcretizationTypeError(
            f"Tensor.{name} returns a Python bool, which needs concrete values, but a Tensor "
            "holds a traced value here (inside ft.grad, ft.vmap, ft.jit or ft.compile). Use "
            f"{'(a == b).all()' if name == 'equal' else 'ft.isclose(a, b).all()'}, a "
            "Tensor, instead.")


def equal(self, other):
    _python_bool("equal", self._data, _arr(other))
    return tuple(self.shape) == tuple(other.shape) and builtins.bool(
        np.all(self._data == other._data))


def allclose(self, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    _python_bool("allclose", self._data, _arr(other))
    return builtins.bool(np.allclose(self._data, _arr(other), rtol=rtol, atol=atol,
                                     equal_nan=equal_nan))


def isclose(self, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    return wrap(fnp.isclose(self._data, _arr(other), rtol=rtol, atol=atol,
                            equal_nan=equal_nan))


T.equal, T.allclose, T.isclose = equal, allclose, isclose


# ---------------------------------------------------------------------------
# median / nanmedian: the lower median (torch's), NaN-propagating or NaN-ignoring

def _median_all_value(x, ignore_nan):
    flat = fnp.sort(fnp.reshape(x, (-1,)))          # NaNs sort last
    n = flat.shape[0]
    nan = fnp.isnan(flat)
    if ignore_nan:
        count = fnp.sum(~nan)
        k = fnp.maximum((count - 1) // 2, 0)
        return fnp.take(flat, k)                    # all NaN: the NaN at 0
    return fnp.where(fnp.any(nan), flat[n - 1], flat[(n - 1) // 2])


@functools.partial(custom_jvp, nondiff_argnums=(1,))
def _median_all_fn(x, ignore_nan):
    """median() / nanmedian() of every element: the derivative is split evenly among the
    elements equal to the result (NaN ones for a NaN result), as torch's
    evenly_distribute_backward."""
    return _median_all_value(x, ignore_nan)


@_median_all_fn.defjvp
def _median_all_jvp(ignore_nan, primals, tangents):
    (x,), (t,) = primals, tangents
    v = _median_all_fn(x, ignore_nan)
    w = fnp.astype(fnp.equal(x, v) | (fnp.isnan(x) & fnp.isnan(v)), x.dtype)
    return v, fnp.sum(fnp.where(w > 0, t, fnp.zeros_like(t))) / fnp.sum(w)


def _median_dim_fn(x, axis, keepdims, ignore_nan):
    """(values, indices) of the lower median along axis; the value is read at its index, so
    the derivative goes to that element (torch's value_selecting_reduction_backward)."""
    n = x.shape[axis]
    order = fnp.argsort(x, axis=axis, stable=True)      # NaNs last
    nan = fnp.isnan(x)
    if ignore_nan:
        k = fnp.maximum((fnp.sum(~nan, axis=axis, keepdims=True) - 1) // 2, 0)
        idx = fnp.take_along_axis(order, fnp.astype(k, order.dtype), axis=axis)
    else:
        idx = fnp.take_along_axis(order, fnp.full(
            tuple(1 if a == axis else s for a, s in enumerate(x.shape)), (n - 1) // 2,
            order.dtype), axis=axis)
        first_nan = fnp.argmax(nan, axis=axis, keepdims=True)
        idx = fnp.where(fnp.any(nan, axis=axis, keepdims=True),
                        fnp.astype(first_nan, idx.dtype), idx)
    vals = fnp.take_along_axis(x, idx, axis=axis)
    idx = fnp.astype(idx, np.int64)
    if not keepdims:
        vals, idx = fnp.squeeze(vals, axis), fnp.squeeze(idx, axis)
    return vals, idx


def _median(self, ignore_nan, dim=None, keepdim=False):
    name = "nanmedian" if ignore_nan else "median"
    if dim is None:
        if self.numel() == 0:
            return wrap(np.asarray(np.nan, self._data.dtype))
        return apply_fn(("NanmedianBackward0" if ignore_nan else "MedianBackward0"),
                        _median_all_fn, (self,), static(ignore_nan=ignore_nan))
    axis = wrap_dim(dim, max(self.ndim, 1))
    _check_nonempty(name, self, axis)
    x = self if self.ndim else self.reshape(1)
    v, i = apply_fn("NanmedianBackward1" if ignore_nan else "MedianBackward1",
                    _median_dim_fn, (x,), static(axis=axis, keepdims=keepdim or not self.ndim,
                                                 ignore_nan=ignore_nan))
    if not self.ndim:
        v, i = v.reshape(()), i.reshape(())
    return MinMax(v, i)


T.median = lambda self, dim=None, keepdim=False: _median(self, False, dim, keepdim)
T.nanmedian = lambda self, dim=None, keepdim=False: _median(self, True, dim, keepdim)
