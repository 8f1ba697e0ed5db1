"""Tensor operators and methods with torch's names, signatures and grad_fn names.

Elementwise ops use the hand-written hot paths of tensor.py; the rest are composites of
functrans.numpy functions (apply_fn), traced into primitive steps once per signature.
"""
from __future__ import annotations

import builtins
import math
from collections import namedtuple

import numpy as np

from .. import numpy as fnp
from ..nn import functions as nnf
from primitives import elementwise as ew
from primitives import indexing as ix
from primitives import reductions as red
from . import dtypes as D
from .record import INFERENCE, vc_of
from .tensor import (GS, LEAF_INPLACE_MSG, VIEW_LEAF_INPLACE_MSG, EOp, Tensor, apply_fn,
                     binary, static, unary, wrap, _convert, _freeze)

T = Tensor
_PY = (builtins.int, builtins.float, builtins.bool)

# ---------------------------------------------------------------------------
# elementwise ops

ADD = EOp("AddBackward0", ew.add_p, float_only=False)
SUB = EOp("SubBackward0", ew.sub_p, float_only=False, rname="RsubBackward1")
MUL = EOp("MulBackward0", ew.mul_p, float_only=False)
DIV = EOp("DivBackward0", ew.div_p, float_only=True, rname="MulBackward0")
POW = EOp("PowBackward1", ew.pow_p, float_only=True, rname="PowBackward2")
POWS = EOp("PowBackward0", ew.pow_p, float_only=True)
MAXIMUM = EOp("MaximumBackward0", ew.max_p, float_only=False)
MINIMUM = EOp("MinimumBackward0", ew.min_p, float_only=False)
ATAN2 = EOp("Atan2Backward0", ew.atan2_p)
FMOD = EOp("FmodBackward0", ew.rem_p, float_only=False)
_CMPS = {n: EOp(n, getattr(ew, n + "_p"), float_only=False) for n in
         ("eq", "ne", "lt", "le", "gt", "ge")}
AND = EOp("and", ew.and_p, float_only=False)
OR = EOp("or", ew.or_p, float_only=False)
XOR = EOp("xor", ew.xor_p, float_only=False)

_UNARY = {
    "exp": ("ExpBackward0", ew.exp_p), "log": ("LogBackward0", ew.log_p),
    "sin": ("SinBackward0", ew.sin_p), "cos": ("CosBackward0", ew.cos_p),
    "tan": ("TanBackward0", ew.tan_p), "tanh": ("TanhBackward0", ew.tanh_p),
    "sqrt": ("SqrtBackward0", ew.sqrt_p), "rsqrt": ("RsqrtBackward0", ew.rsqrt_p),
    "log1p": ("Log1pBackward0", ew.log1p_p), "expm1": ("Expm1Backward0", ew.expm1_p),
    "asin": ("AsinBackward0", ew.asin_p), "acos": ("AcosBackward0", ew.acos_p),
    "atan": ("AtanBackward0", ew.atan_p), "sinh": ("SinhBackward0", ew.sinh_p),
    "cosh": ("CoshBackward0", ew.cosh_p), "erf": ("ErfBackward0", ew.erf_p),
    "sigmoid": ("SigmoidBackward0", ew.logistic_p),
}
_UNARY_ANY = {"neg": ("NegBackward0", ew.neg_p), "abs": ("AbsBackward0", ew.abs_p)}
_UOPS = {}
for _n, (_name, _p) in _UNARY.items():
    _UOPS[_n] = EOp(_name, _p)
for _n, (_name, _p) in _UNARY_ANY.items():
    _UOPS[_n] = EOp(_name, _p, float_only=False)
# zero-derivative ops still record a node (torch's FloorBackward0 returns zeros)
for _n, _name, _p in [("sign", "SignBackward0", ew.sign_p), ("floor", "FloorBackward0", ew.floor_p),
                      ("ceil", "CeilBackward0", ew.ceil_p)]:
    _UOPS[_n] = EOp(_name, _p, float_only=False)
    _UOPS[_n].differentiable = True


def _install_unary(name, op):
    def method(self):
        return unary(self, op)
    method.__name__ = name
    method.__doc__ = f"Elementwise {name} (grad_fn {op.name})."
    setattr(T, name, method)


for _n, _op in _UOPS.items():
    _install_unary(_n, _op)
T.arcsin, T.arccos, T.arctan, T.negative, T.absolute = T.asin, T.acos, T.atan, T.neg, T.abs
T.__neg__ = T.neg
T.__abs__ = T.abs


def _pos(self):
    return self


T.__pos__ = _pos


def _binop(op, reverse=False):
    def f(self, other):
        return binary(self, other, op, reverse)
    return f


T.__add__ = T.__radd__ = _binop(ADD)
T.__sub__ = _binop(SUB)
T.__rsub__ = _binop(SUB, True)
T.__mul__ = T.__rmul__ = _binop(MUL)
T.__truediv__ = T.__div__ = _binop(DIV)
T.__rtruediv__ = _binop(DIV, True)
for _n, _op in _CMPS.items():
    setattr(T, f"__{_n}__", _binop(_op))
    setattr(T, _n, _binop(_op))
T.greater, T.greater_equal, T.less, T.less_equal = T.gt, T.ge, T.lt, T.le
T.not_equal = T.ne
T.__and__ = T.__rand__ = T.logical_and_ = _binop(AND)
T.__or__ = T.__ror__ = _binop(OR)
T.__xor__ = T.__rxor__ = _binop(XOR)
T.maximum = _binop(MAXIMUM)
T.minimum = _binop(MINIMUM)
T.atan2 = T.arctan2 = _binop(ATAN2)
T.fmod = _binop(FMOD)


def _invert(self):
    if self.dtype.kind not in "biu":
        raise TypeError("~ (bitwise_not) is only supported for integer and boolean tensors")
    return unary(self, _NOT)


_NOT = EOp("not", ew.not_p, float_only=False)
T.__invert__ = T.bitwise_not = T.logical_not = _invert


def logical_not(self):
    return wrap(np.logical_not(self._data))


T.logical_not = logical_not
T.logical_and = lambda self, o: wrap(np.logical_and(self._data, _arr(o)))
T.logical_or = lambda self, o: wrap(np.logical_or(self._data, _arr(o)))
T.logical_xor = lambda self, o: wrap(np.logical_xor(self._data, _arr(o)))


def _arr(o):
    return o._data if isinstance(o, Tensor) else np.asarray(o)


def add(self, other, *, alpha=1):
    if alpha == 1:
        return binary(self, other, ADD)
    return apply_fn("AddBackward0", _add_alpha, (self, other, alpha))


def sub(self, other, *, alpha=1):
    if alpha == 1:
        return binary(self, other, SUB)
    return apply_fn("SubBackward0", _add_alpha, (self, other, -alpha))


def _add_alpha(x, y, alpha):
    return fnp.add(x, fnp.multiply(alpha, y))


T.add, T.sub, T.subtract = add, sub, sub
T.mul = T.multiply = _binop(MUL)
T.div = T.divide = T.true_divide = _binop(DIV)


def pow(self, exponent):
    if isinstance(exponent, builtins.int) and not isinstance(exponent, builtins.bool):
        op = _IPOW.get(exponent)
        if op is None:
            op = _IPOW[exponent] = EOp("PowBackward0", ew.integer_pow_p, {"y": exponent},
                                       float_only=False)
        if self.dtype.kind in "iu" and exponent < 0:
            raise RuntimeError("Integers to negative integer powers are not allowed.")
        return unary(self, op)
    if isinstance(exponent, _PY):
        return binary(self, exponent, POWS)
    return binary(self, exponent, POW)


_IPOW: dict = {}
T.pow = T.__pow__ = pow
T.__rpow__ = _binop(POW, True)


def _floordiv(self, other):
    return _elementwise_fn("FloorDivideBackward0", fnp.floor_divide, self, other)


def _rfloordiv(self, other):
    return _elementwise_fn("FloorDivideBackward0", fnp.floor_divide, other, self)


def _remainder(self, other):
    return _elementwise_fn("RemainderBackward0", fnp.remainder, self, other)


def _rremainder(self, other):
    return _elementwise_fn("RemainderBackward0", fnp.remainder, other, self)


def _elementwise_fn(name, fn, a, b):
    if not isinstance(a, Tensor):
        a = wrap(np.asarray(a, D.result_type(a, b)))
    dt = D.result_type(a, b)
    if isinstance(b, Tensor):
        args = (a if a.dtype == dt else a.to(dt), b if b.dtype == dt else b.to(dt))
    else:
        args = (a if a.dtype == dt else a.to(dt), wrap(np.asarray(b, dt)))
    return apply_fn(name, fn, args)


T.__floordiv__ = T.floor_divide = _floordiv
T.__rfloordiv__ = _rfloordiv
T.__mod__ = T.remainder = _remainder
T.__rmod__ = _rremainder


def _matmul_name(a, b):
    na, nb = a.ndim, b.ndim
    if na == 2 and nb == 2:
        return "MmBackward0"
    if na == 1 and nb == 1:
        return "DotBackward0"
    if na == 2 and nb == 1:
        return "MvBackward0"
    if na == 3 and nb == 3:
        return "BmmBackward0"
    return "UnsafeViewBackward0"


def matmul(self, other):
    if not isinstance(other, Tensor):
        other = wrap(np.asarray(other))
    dt = D.result_type(self, other)
    a = self if self.dtype == dt else self.to(dt)
    b = other if other.dtype == dt else other.to(dt)
    if a.ndim == 0 or b.ndim == 0:
        raise RuntimeError("both arguments to matmul need to be at least 1D, but they are "
                           f"{a.ndim}D and {b.ndim}D")
    return apply_fn(_matmul_name(a, b), fnp.matmul, (a, b))


def _rmatmul(self, other):
    return matmul(wrap(np.asarray(other)) if not isinstance(other, Tensor) else other, self)


def mm(self, mat2):
    if self.ndim != 2 or mat2.ndim != 2:
        raise RuntimeError(f"self must be a matrix" if self.ndim != 2 else "mat2 must be a matrix")
    return matmul(self, mat2)


def bmm(self, mat2):
    if self.ndim != 3 or mat2.ndim != 3:
        raise RuntimeError("batch1 must be a 3D tensor" if self.ndim != 3 else
                           "batch2 must be a 3D tensor")
    return matmul(self, mat2)


def mv(self, vec):
    return matmul(self, vec)


def dot(self, other):
    if self.ndim != 1 or other.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {self.ndim}D and {other.ndim}D tensors")
    return matmul(self, other)


def outer(self, vec2):
    return apply_fn("OuterBackward0", fnp.outer, (self, vec2))


T.matmul, T.__matmul__, T.__rmatmul__ = matmul, matmul, _rmatmul
T.mm, T.bmm, T.mv, T.dot, T.outer, T.ger = mm, bmm, mv, dot, outer, outer
T.inner = lambda self, other: apply_fn("InnerBackward0", fnp.inner, (self, other))

# ---------------------------------------------------------------------------
# activations and friends (composites of functrans.numpy / ft.nn functions)


def relu(self):
    return apply_fn("ReluBackward0", nnf.relu, (self,))


def _softmax_fn(x, axis):
    return nnf.softmax(x, axis=axis)


def _log_softmax_fn(x, axis):
    return nnf.log_softmax(x, axis=axis)


def softmax(self, dim, dtype=None):
    x = self if dtype is None else self.to(dtype)
    return apply_fn("SoftmaxBackward0", _softmax_fn, (x,), static(axis=dim))


def log_softmax(self, dim, dtype=None):
    x = self if dtype is None else self.to(dtype)
    return apply_fn("LogSoftmaxBackward0", _log_softmax_fn, (x,), static(axis=dim))


def _clamp_fn(x, lo, hi, has_lo, has_hi):
    out = x
    if has_lo:
        out = fnp.where(fnp.less(x, lo), fnp.astype(lo, x.dtype) if hasattr(lo, "dtype")
                        else lo, out)
    if has_hi:
        out = fnp.where(fnp.greater(x, hi), fnp.astype(hi, x.dtype) if hasattr(hi, "dtype")
                        else hi, out)
    return out


def clamp(self, min=None, max=None):
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    name = ("ClampBackward1" if min is not None and max is not None else
            "ClampMinBackward0" if min is not None else "ClampMaxBackward0")
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        name = "ClampBackward0"
    lo = 0 if min is None else min
    hi = 0 if max is None else max
    return apply_fn(name, _clamp_fn, (self, lo, hi),
                    static(has_lo=min is not None, has_hi=max is not None))


def clamp_min(self, min):
    return clamp(self, min=min)


def clamp_max(self, max):
    return clamp(self, max=max)


T.relu, T.softmax, T.log_softmax = relu, softmax, log_softmax
T.clamp = T.clip = clamp
T.clamp_min, T.clamp_max = clamp_min, clamp_max


def _square(self):
    return pow(self, 2)


def _reciprocal(self):
    return binary(self, 1.0, DIV, reverse=True) if self.dtype.kind in "fc" else \
        binary(self.to(D.get_default_dtype()), 1.0, DIV, reverse=True)


T.square = _square
T.reciprocal = _reciprocal


def _fnp_unary(name, fn):
    def method(self):
        return apply_fn(name, fn, (self if self.dtype.kind in "fc" else
                                   self.to(D.get_default_dtype()),))
    return method


T.log2 = _fnp_unary("Log2Backward0", fnp.log2)
T.log10 = _fnp_unary("Log10Backward0", fnp.log10)
T.exp2 = _fnp_unary("Exp2Backward0", fnp.exp2)
T.trunc = T.fix = _fnp_unary("TruncBackward0", fnp.trunc)
T.round = lambda self, decimals=0: apply_fn("RoundBackward0", fnp.round, (self,),
                                            static(decimals=decimals))


def _frac(self):
    return self - self.trunc()


T.frac = _frac
T.isnan = lambda self: wrap(np.isnan(self._data))
T.isinf = lambda self: wrap(np.isinf(self._data))
T.isfinite = lambda self: wrap(np.isfinite(self._data))
T.sgn = T.sign


def lerp(self, end, weight):
    return apply_fn("LerpBackward0" if isinstance(weight, _PY) else "LerpBackward1",
                    _lerp_fn, (self, end, weight))


def _lerp_fn(x, end, w):
    return fnp.add(x, fnp.multiply(w, fnp.subtract(end, x)))


def addcmul(self, tensor1, tensor2, *, value=1):
    return apply_fn("AddcmulBackward0", _addcmul_fn, (self, tensor1, tensor2, value))


def _addcmul_fn(x, a, b, v):
    return fnp.add(x, fnp.multiply(v, fnp.multiply(a, b)))


def addcdiv(self, tensor1, tensor2, *, value=1):
    return apply_fn("AddcdivBackward0", _addcdiv_fn, (self, tensor1, tensor2, value))


def _addcdiv_fn(x, a, b, v):
    return fnp.add(x, fnp.multiply(v, fnp.divide(a, b)))


T.lerp, T.addcmul, T.addcdiv = lerp, addcmul, addcdiv


def _where_fn(c, x, y):
    return fnp.where(c, x, y)


def where(self, condition, other):
    return where_(condition, self, other)


def where_(condition, x, y):
    """torch.where(condition, x, y) with torch's promotion."""
    if not isinstance(condition, Tensor):
        condition = wrap(np.asarray(condition, bool))
    if not isinstance(x, Tensor) and not isinstance(y, Tensor):
        x = wrap(np.asarray(x, D.result_type(x, y)))
    dt = D.result_type(*(v for v in (x, y)))
    x = x.to(dt) if isinstance(x, Tensor) else wrap(np.asarray(x, dt))
    y = y.to(dt) if isinstance(y, Tensor) else wrap(np.asarray(y, dt))
    return apply_fn("WhereBackward0", _where_fn, (condition.bool(), x, y))


def _masked_fill_fn(x, mask, v):
    return fnp.where(mask, fnp.astype(v, x.dtype), x)


def masked_fill(self, mask, value):
    if isinstance(value, Tensor) and value.ndim:
        raise RuntimeError("masked_fill_ only supports a 0-dimensional value tensor, but got "
                           f"tensor with {value.ndim} dimension(s).")
    v = value if isinstance(value, Tensor) else wrap(np.asarray(value, self.dtype))
    return apply_fn("MaskedFillBackward0", _masked_fill_fn, (self, _as_bool(mask), v))


def _as_bool(mask):
    if not isinstance(mask, Tensor):
        mask = wrap(np.asarray(mask))
    if mask.dtype != np.bool_:
        raise RuntimeError(f"masked_fill_ only supports boolean masks, but got mask with dtype "
                           f"{mask.dtype}")
    return mask


T.where, T.masked_fill = where, masked_fill

# ---------------------------------------------------------------------------
# reductions


def _dims(dim, ndim):
    if dim is None:
        return None
    if isinstance(dim, (tuple, list)):
        return tuple(d % builtins.max(ndim, 1) for d in dim)
    return dim % builtins.max(ndim, 1)


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


def prod(self, dim=None, keepdim=False, *, dtype=None):
    x = self if dtype is None else self.to(dtype)
    return apply_fn("ProdBackward0" if dim is None else "ProdBackward1", _prod_fn, (x,),
                    static(axis=_dims(dim, x.ndim), keepdims=keepdim))


def _correction(unbiased, correction):
    if correction is not None:
        return correction
    return 1 if unbiased in (None, True) else 0


def _var_fn(x, axis, keepdims, ddof):
    return fnp.var(x, axis=axis, keepdims=keepdims, ddof=ddof)


def _std_fn(x, axis, keepdims, ddof):
    return fnp.std(x, axis=axis, keepdims=keepdims, ddof=ddof)


def var(self, dim=None, unbiased=None, keepdim=False, *, correction=None):
    if isinstance(dim, builtins.bool):
        dim, unbiased = None, dim
    return apply_fn("VarBackward0", _var_fn, (self,), static(
        axis=_dims(dim, self.ndim), keepdims=keepdim, ddof=_correction(unbiased, correction)))


def std(self, dim=None, unbiased=None, keepdim=False, *, correction=None):
    if isinstance(dim, builtins.bool):
        dim, unbiased = None, dim
    return apply_fn("StdBackward0", _std_fn, (self,), static(
        axis=_dims(dim, self.ndim), keepdims=keepdim, ddof=_correction(unbiased, correction)))


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


def _extreme(self, which, dim=None, keepdim=False):
    if isinstance(dim, Tensor):
        return self.maximum(dim) if which == "max" else self.minimum(dim)
    if self.numel() == 0:
        raise RuntimeError(f"{which}(): Expected reduction dim to be specified for input.numel() "
                           "== 0. Specify the reduction dim with the 'dim' argument.")
    if dim is None:
        return apply_fn("MaxBackward1" if which == "max" else "MinBackward1", _extreme_fn,
                        (self,), static(axis=None, keepdims=False, which=which))
    name = "MaxBackward0" if which == "max" else "MinBackward0"
    v, i = apply_fn(name, _argreduce_fn, (self,), static(axis=_dims(dim, self.ndim),
                                                       keepdims=keepdim, which=which))
    return MinMax(v, i)


T.sum, T.mean, T.prod, T.var, T.std = sum, mean, prod, var, std
T.max = lambda self, dim=None, keepdim=False: _extreme(self, "max", dim, keepdim)
T.min = lambda self, dim=None, keepdim=False: _extreme(self, "min", dim, keepdim)


def amax(self, dim=(), keepdim=False):
    axis = None if dim in ((), None) else _dims(dim, self.ndim)
    return apply_fn("AmaxBackward0", _extreme_fn, (self,),
                    static(axis=axis, keepdims=keepdim, which="max"))


def amin(self, dim=(), keepdim=False):
    axis = None if dim in ((), None) else _dims(dim, self.ndim)
    return apply_fn("AminBackward0", _extreme_fn, (self,),
                    static(axis=axis, keepdims=keepdim, which="min"))


def _argfn(self, which, dim=None, keepdim=False):
    x = self._data
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
    return fnp.logsumexp(x, axis=axis, keepdims=keepdims)


def logsumexp(self, dim, keepdim=False):
    return apply_fn("LogsumexpBackward0", _lse_fn, (self,),
                    static(axis=_dims(dim, self.ndim), keepdims=keepdim))


def _norm_fn(x, axis, keepdims, p):
    if p == 2:
        return fnp.sqrt(fnp.sum(fnp.multiply(x, x), axis=axis, keepdims=keepdims))
    if p == 1:
        return fnp.sum(fnp.abs(x), axis=axis, keepdims=keepdims)
    if p == float("inf"):
        return fnp.max(fnp.abs(x), axis=axis, keepdims=keepdims)
    return fnp.power(fnp.sum(fnp.power(fnp.abs(x), float(p)), axis=axis, keepdims=keepdims),
                     1.0 / p)


def norm(self, p="fro", dim=None, keepdim=False, dtype=None):
    p = 2 if p in ("fro", None) else p
    return apply_fn("NormBackward1" if dim is not None else "NormBackward0", _norm_fn, (self,),
                    static(axis=_dims(dim, self.ndim), keepdims=keepdim, p=p))


def _cumsum_fn(x, axis):
    return fnp.cumsum(x, axis=axis)


def _cumprod_fn(x, axis):
    return fnp.cumprod(x, axis=axis)


T.logsumexp, T.norm = logsumexp, norm
T.cumsum = lambda self, dim, *, dtype=None: apply_fn(
    "CumsumBackward0", _cumsum_fn, (self if dtype is None else self.to(dtype),),
    static(axis=dim % builtins.max(self.ndim, 1)))
T.cumprod = lambda self, dim, *, dtype=None: apply_fn(
    "CumprodBackward0", _cumprod_fn, (self if dtype is None else self.to(dtype),),
    static(axis=dim % builtins.max(self.ndim, 1)))
T.all = lambda self, dim=None, keepdim=False: wrap(np.asarray(np.all(self._data, axis=dim,
                                                                     keepdims=keepdim)))
T.any = lambda self, dim=None, keepdim=False: wrap(np.asarray(np.any(self._data, axis=dim,
                                                                     keepdims=keepdim)))
T.count_nonzero = lambda self, dim=None: wrap(np.asarray(np.count_nonzero(self._data, axis=dim),
                                                         np.int64))


def equal(self, other):
    return tuple(self.shape) == tuple(other.shape) and builtins.bool(
        np.all(self._data == other._data))


def allclose(self, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    return builtins.bool(np.allclose(self._data, _arr(other), rtol=rtol, atol=atol,
                                     equal_nan=equal_nan))


def isclose(self, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    return wrap(np.isclose(self._data, _arr(other), rtol=rtol, atol=atol, equal_nan=equal_nan))


T.equal, T.allclose, T.isclose = equal, allclose, isclose

# ---------------------------------------------------------------------------
# shape ops (views share storage and the version counter)


def _shape_arg(shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        return tuple(builtins.int(s) for s in shape[0])
    return tuple(builtins.int(s) for s in shape)


def _infer(shape, n):
    if shape.count(-1) > 1:
        raise RuntimeError("only one dimension can be inferred")
    if -1 in shape:
        known = builtins.int(np.prod([s for s in shape if s != -1], dtype=np.int64))
        if known == 0 or n % known:
            raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {n}")
        shape = tuple(n // known if s == -1 else s for s in shape)
    if builtins.int(np.prod(shape, dtype=np.int64)) != n:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {n}")
    return shape


def _reshape_fn(x, shape):
    return fnp.reshape(x, shape)


def view(self, *shape):
    if len(shape) == 1 and isinstance(shape[0], (np.dtype, type, str)):
        raise NotImplementedError("view(dtype) is not supported by functrans; use .to(dtype)")
    shape = _infer(_shape_arg(shape), self.numel())
    try:
        v = self._data.view()
        v.shape = shape
    except (AttributeError, ValueError):
        raise RuntimeError(
            "view size is not compatible with input tensor's size and stride (at least one "
            "dimension spans across two contiguous subspaces). Use .reshape(...) instead."
        ) from None
    return apply_fn("ViewBackward0", _reshape_fn, (self,), static(shape=shape), view=True)


def reshape(self, *shape):
    shape = _infer(_shape_arg(shape), self.numel())
    try:
        v = self._data.view()
        v.shape = shape
        name = "ViewBackward0"
    except (AttributeError, ValueError):
        name = "UnsafeViewBackward0"
    return apply_fn(name, _reshape_fn, (self,), static(shape=shape), view=True)


def view_as(self, other):
    return view(self, tuple(other.shape))


def reshape_as(self, other):
    return reshape(self, tuple(other.shape))


def flatten(self, start_dim=0, end_dim=-1):
    nd = self.ndim
    if nd == 0:
        return reshape(self, (1,))
    s, e = start_dim % nd, end_dim % nd
    shape = tuple(self.shape)
    new = shape[:s] + (builtins.int(np.prod(shape[s:e + 1], dtype=np.int64)),) + shape[e + 1:]
    return reshape(self, new)


def unflatten(self, dim, sizes):
    shape = tuple(self.shape)
    dim %= len(shape)
    sizes = _infer(tuple(sizes), shape[dim])
    return view(self, shape[:dim] + sizes + shape[dim + 1:])


def _transpose_fn(x, perm):
    return fnp.transpose(x, perm)


def permute(self, *dims):
    dims = _shape_arg(dims)
    nd = self.ndim
    if sorted(d % builtins.max(nd, 1) for d in dims) != list(range(nd)):
        raise RuntimeError(f"permute(sparse_coo): number of dimensions in the tensor input does "
                           f"not match the length of the desired ordering of dimensions i.e. "
                           f"input.dim() = {nd} is not equal to len(dims) = {len(dims)}")
    perm = tuple(d % nd for d in dims)
    return apply_fn("PermuteBackward0", _transpose_fn, (self,), static(perm=perm), view=True)


def transpose(self, dim0, dim1):
    nd = self.ndim
    if nd == 0:
        return apply_fn("TransposeBackward0", _transpose_fn, (self,), static(perm=()), view=True)
    perm = list(range(nd))
    a, b = dim0 % nd, dim1 % nd
    perm[a], perm[b] = perm[b], perm[a]
    return apply_fn("TransposeBackward0", _transpose_fn, (self,), static(perm=tuple(perm)),
                    view=True)


def t(self):
    if self.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {self.ndim}D")
    perm = tuple(reversed(range(self.ndim)))
    return apply_fn("TBackward0", _transpose_fn, (self,), static(perm=perm), view=True)


def _T(self):
    perm = tuple(reversed(range(self.ndim)))
    return apply_fn("PermuteBackward0", _transpose_fn, (self,), static(perm=perm), view=True)


def _mT(self):
    return transpose(self, -2, -1)


def movedim(self, source, destination):
    src = (source,) if isinstance(source, builtins.int) else tuple(source)
    dst = (destination,) if isinstance(destination, builtins.int) else tuple(destination)
    nd = self.ndim
    src = [s % nd for s in src]
    dst = [d % nd for d in dst]
    perm = [i for i in range(nd) if i not in src]
    for d, s in sorted(zip(dst, src)):
        perm.insert(d, s)
    return apply_fn("PermuteBackward0", _transpose_fn, (self,), static(perm=tuple(perm)),
                    view=True)


T.view, T.reshape, T.view_as, T.reshape_as = view, reshape, view_as, reshape_as
T.flatten, T.unflatten, T.permute, T.transpose = flatten, unflatten, permute, transpose
T.swapaxes = T.swapdims = transpose
T.t, T.movedim, T.moveaxis = t, movedim, movedim
T.T = property(_T)
T.mT = property(_mT)
T.H = property(_T)


def _expand_dims_fn(x, axis):
    return fnp.expand_dims(x, axis)


def unsqueeze(self, dim):
    nd = self.ndim + 1
    if not -nd <= dim < nd:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-nd}, {nd - 1}], "
                         f"but got {dim})")
    return apply_fn("UnsqueezeBackward0", _expand_dims_fn, (self,), static(axis=dim % nd),
                    view=True)


def _squeeze_fn(x, axis):
    return fnp.squeeze(x, axis)


def squeeze(self, dim=None):
    shape = tuple(self.shape)
    if dim is None:
        axes = tuple(i for i, s in enumerate(shape) if s == 1)
        name = "SqueezeBackward0"
    else:
        dims = dim if isinstance(dim, (tuple, list)) else (dim,)
        axes = tuple(d % builtins.max(len(shape), 1) for d in dims
                     if shape and shape[d % len(shape)] == 1)
        name = "SqueezeBackward1" if not isinstance(dim, (tuple, list)) else "SqueezeBackward2"
    if not axes:
        return apply_fn(name, _reshape_fn, (self,), static(shape=shape), view=True)
    return apply_fn(name, _squeeze_fn, (self,), static(axis=axes), view=True)


def _broadcast_fn(x, shape):
    return fnp.broadcast_to(x, shape)


def expand(self, *sizes):
    sizes = _shape_arg(sizes)
    shape = tuple(self.shape)
    if len(sizes) < len(shape):
        raise RuntimeError(f"expand(torch.FloatTensor{{{list(shape)}}}, size={list(sizes)}): the "
                           "number of sizes provided must be greater or equal to the number of "
                           "dimensions in the tensor")
    lead = len(sizes) - len(shape)
    new = []
    for i, s in enumerate(sizes):
        if i < lead:
            if s == -1:
                raise RuntimeError("expand: -1 is not allowed in a leading, non-existing "
                                   "dimension")
            new.append(s)
        else:
            old = shape[i - lead]
            if s == -1:
                s = old
            if old != s and old != 1:
                raise RuntimeError(
                    f"The expanded size of the tensor ({s}) must match the existing size ({old}) "
                    f"at non-singleton dimension {i}.  Target sizes: {list(sizes)}.  Tensor "
                    f"sizes: {list(shape)}")
            new.append(s)
    return apply_fn("ExpandBackward0", _broadcast_fn, (self,), static(shape=tuple(new)),
                    view=True)


def expand_as(self, other):
    return expand(self, tuple(other.shape))


def _tile_fn(x, reps):
    return fnp.tile(x, reps)


def repeat(self, *sizes):
    sizes = _shape_arg(sizes)
    if len(sizes) < self.ndim:
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number "
                           "of dimensions of tensor")
    return apply_fn("RepeatBackward0", _tile_fn, (self,), static(reps=sizes))


def _repeat_interleave_fn(x, repeats, axis):
    return fnp.repeat(x, repeats, axis=axis)


def repeat_interleave(self, repeats, dim=None):
    if isinstance(repeats, Tensor):
        repeats = tuple(repeats.tolist()) if repeats.ndim else repeats.item()
    return apply_fn("RepeatInterleaveBackward0", _repeat_interleave_fn, (self,),
                    static(repeats=_freeze(repeats), axis=dim))


def _flip_fn(x, axis):
    return fnp.flip(x, axis)


def flip(self, *dims):
    dims = _shape_arg(dims)
    return apply_fn("FlipBackward0", _flip_fn, (self,),
                    static(axis=tuple(d % self.ndim for d in dims)))


def _roll_fn(x, shifts, axes):
    for s, ax in zip(shifts, axes):
        n = x.shape[ax]
        s %= n
        if s:
            parts = fnp.split(x, [n - s], axis=ax)
            x = fnp.concatenate([parts[1], parts[0]], axis=ax)
    return x


def roll(self, shifts, dims=None):
    if dims is None:
        return roll(self.flatten(), shifts, 0).view(tuple(self.shape))
    shifts = (shifts,) if isinstance(shifts, builtins.int) else tuple(shifts)
    dims = (dims,) if isinstance(dims, builtins.int) else tuple(dims)
    return apply_fn("RollBackward0", _roll_fn, (self,),
                    static(shifts=shifts, axes=tuple(d % self.ndim for d in dims)))


T.unsqueeze, T.squeeze, T.expand, T.expand_as = unsqueeze, squeeze, expand, expand_as
T.repeat, T.repeat_interleave, T.flip, T.roll = repeat, repeat_interleave, flip, roll
T.fliplr = lambda self: flip(self, 1)
T.flipud = lambda self: flip(self, 0)


def _slice_fn(x, axis, start, stop):
    idx = [slice(None)] * x.ndim
    idx[axis] = slice(start, stop)
    return x[tuple(idx)]


def narrow(self, dim, start, length):
    dim %= self.ndim
    if isinstance(start, Tensor):
        start = start.item()
    n = self.shape[dim]
    start = start % n if start < 0 else start
    if start + length > n:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({n}).")
    return apply_fn("SliceBackward0", _slice_fn, (self,),
                    static(axis=dim, start=start, stop=start + length), view=True)


def _select_fn(x, axis, index):
    idx = [slice(None)] * x.ndim
    idx[axis] = index
    return x[tuple(idx)]


def select(self, dim, index):
    dim %= self.ndim
    n = self.shape[dim]
    if not -n <= index < n:
        raise IndexError(f"select(): index {index} out of range for tensor of size "
                         f"{list(self.shape)} at dimension {dim}")
    return apply_fn("SelectBackward0", _select_fn, (self,),
                    static(axis=dim, index=index % n), view=True)


def _unbind_fn(x, axis):
    return tuple(_select_fn(x, axis, i) for i in range(x.shape[axis]))


def unbind(self, dim=0):
    dim %= self.ndim
    return apply_fn("UnbindBackward0", _unbind_fn, (self,), static(axis=dim), view=True) \
        if self.shape[dim] != 1 else (select(self, dim, 0),)


def _split_fn(x, bounds, axis):
    return tuple(_slice_fn(x, axis, lo, hi) for lo, hi in bounds)


def split(self, split_size_or_sections, dim=0):
    dim %= self.ndim
    n = self.shape[dim]
    if isinstance(split_size_or_sections, builtins.int):
        s = split_size_or_sections
        bounds = tuple((i, builtins.min(i + s, n)) for i in range(0, n, s)) or ((0, 0),)
        name = "SplitBackward0"
    else:
        sizes = list(split_size_or_sections)
        if builtins.sum(sizes) != n:
            raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {n} (input "
                               f"tensor's size at dimension {dim}), but got split_sizes={sizes}")
        starts = np.cumsum([0] + sizes)
        bounds = tuple((builtins.int(a), builtins.int(b)) for a, b in zip(starts[:-1], starts[1:]))
        name = "SplitWithSizesBackward0"
    out = apply_fn(name, _split_fn, (self,), static(bounds=bounds, axis=dim), view=True)
    return out if isinstance(out, tuple) else (out,)


def chunk(self, chunks, dim=0):
    n = self.shape[dim % self.ndim]
    size = -(-n // chunks)
    return split(self, size, dim)


def tensor_split(self, sections, dim=0):
    n = self.shape[dim % self.ndim]
    q, r = divmod(n, sections)
    return split(self, [q + 1] * r + [q] * (sections - r), dim)


T.narrow, T.select, T.unbind, T.split, T.chunk = narrow, select, unbind, split, chunk
T.tensor_split = tensor_split


def _tril_fn(x, k):
    return fnp.tril(x, k)


def _triu_fn(x, k):
    return fnp.triu(x, k)


def _diagonal_fn(x, offset, axis1, axis2):
    return fnp.diagonal(x, offset, axis1, axis2)


T.tril = lambda self, diagonal=0: apply_fn("TrilBackward0", _tril_fn, (self,),
                                           static(k=diagonal))
T.triu = lambda self, diagonal=0: apply_fn("TriuBackward0", _triu_fn, (self,),
                                           static(k=diagonal))
T.diagonal = lambda self, offset=0, dim1=0, dim2=1: apply_fn(
    "DiagonalBackward0", _diagonal_fn, (self,), static(offset=offset, axis1=dim1, axis2=dim2))
T.trace = lambda self: self.diagonal().sum()


def _gather_fn(x, idx, axis):
    return fnp.take_along_axis(x, idx, axis)


def gather(self, dim, index):
    if index.ndim != self.ndim:
        raise RuntimeError("Index tensor must have the same number of dimensions as input tensor")
    if index.dtype != np.int64:
        raise RuntimeError("gather(): Expected dtype int64 for index")
    return apply_fn("GatherBackward0", _gather_fn, (self, index), static(axis=dim % self.ndim))


def _take_fn(x, idx, axis):
    return fnp.take(x, idx, axis=axis)


def index_select(self, dim, index):
    if index.ndim > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    return apply_fn("IndexSelectBackward0", _take_fn, (self, index),
                    static(axis=dim % builtins.max(self.ndim, 1)))


def _scatter_positions(x_shape, idx, axis):
    """Flat positions of x's elements addressed by torch's scatter index along axis."""
    grids = np.indices(idx.shape)
    grids[axis] = idx
    return np.ravel_multi_index(tuple(grids), x_shape)


def _scatter_fn(x, pos, src, mode):
    flat = fnp.reshape(x, (-1,))
    out = fnp.index_update(flat, pos, src, mode=mode)
    return fnp.reshape(out, x.shape)


def _scatter(self, dim, index, src, mode, name):
    dim %= self.ndim
    idx = index._data
    pos = wrap(_scatter_positions(self.shape, idx, dim).astype(np.int64))
    if not isinstance(src, Tensor):
        src = wrap(np.full(idx.shape, src, self.dtype))
    else:
        src = src[tuple(slice(0, s) for s in idx.shape)]
    return apply_fn(name, _scatter_fn, (self, pos, src), static(mode=mode))


T.gather, T.index_select, T.take_along_dim = gather, index_select, \
    lambda self, indices, dim: gather(self, dim, indices)
T.scatter = lambda self, dim, index, src=None, value=None: _scatter(
    self, dim, index, src if src is not None else value, "set", "ScatterBackward0")
T.scatter_add = lambda self, dim, index, src: _scatter(self, dim, index, src, "add",
                                                       "ScatterAddBackward0")


def _sort_fn(x, idx, axis):
    return fnp.take_along_axis(x, idx, axis)


Sorted = namedtuple("return_types", ["values", "indices"])


def sort(self, dim=-1, descending=False, stable=False):
    dim %= builtins.max(self.ndim, 1)
    x = self._data
    idx = np.argsort(-x if descending else x, axis=dim, kind="stable").astype(np.int64)
    i = wrap(idx)
    return Sorted(apply_fn("SortBackward0", _sort_fn, (self, i), static(axis=dim)), i)


def topk(self, k, dim=-1, largest=True, sorted=True):
    dim %= builtins.max(self.ndim, 1)
    x = self._data
    idx = np.argsort(-x if largest else x, axis=dim, kind="stable")
    idx = np.take(idx, np.arange(k), axis=dim).astype(np.int64)
    i = wrap(idx)
    return Sorted(apply_fn("TopkBackward0", _sort_fn, (self, i), static(axis=dim)), i)


T.sort, T.topk = sort, topk
T.argsort = lambda self, dim=-1, descending=False: sort(self, dim, descending).indices
T.nonzero = lambda self, as_tuple=False: (tuple(wrap(i.astype(np.int64)) for i in
                                                np.nonzero(self._data)) if as_tuple else
                                          wrap(np.argwhere(self._data).astype(np.int64)))

# ---------------------------------------------------------------------------
# in-place ops: compute out of place (recorded as usual), write into the storage,
# bump the version, and rebase the tensor's history onto the new node


def _check_inplace(self, recording):
    if recording and self._requires_grad and self._grad_fn is None and self._base is None:
        raise RuntimeError(LEAF_INPLACE_MSG)
    base = self._base
    if recording and base is not None and base._requires_grad and base._grad_fn is None:
        raise RuntimeError(VIEW_LEAF_INPLACE_MSG)
    if self._flags & INFERENCE and not GS.inference:
        raise RuntimeError("Inplace update to inference tensor outside InferenceMode is not "
                           "allowed. You can make a clone to get a normal tensor before doing "
                           "inplace update. See https://github.com/pytorch/rfcs/pull/17 for more "
                           "details.")


def inplace(self, name, compute):
    """Run compute() (an out-of-place op returning a Tensor) and make self hold the result."""
    recording = GS.enabled
    _check_inplace(self, recording)
    res = compute()
    node = res._grad_fn
    data = self._data
    if node is not None:
        if self._base is not None:
            return _inplace_on_view(self, name, res)
        # values the new node saved from self's storage must survive the write
        vals = node.vals
        if vals:
            for s, v in enumerate(vals):
                if v is not None and s < node.info.n_in and v is data:
                    vals[s] = data.copy()
                    node.vers = tuple(e for e in node.vers if e[0] != s)
    out = res._data
    if out.shape != data.shape:
        try:
            np.broadcast_to(out, data.shape)
        except ValueError:
            raise RuntimeError(f"output with shape {list(data.shape)} doesn't match the "
                               f"broadcast shape {list(out.shape)}") from None
        raise RuntimeError(f"output with shape {list(data.shape)} doesn't match the broadcast "
                           f"shape {list(out.shape)}")
    _write(data, out)
    self._bump(name)
    if node is not None:
        self._grad_fn = node
        self._out_nr = res._out_nr
        self._requires_grad = True
        vc = vc_of(self)
        s = node.info.out_slots[res._out_nr]
        if node.vals and node.vals[s] is not None:
            node.vals[s] = data
            node.vers = tuple(e for e in node.vers if e[0] != s) + ((s, vc, vc.v),)
    return self


def _protect_saved(node, data):
    """Copy values a new node saved from storage that is about to be overwritten."""
    vals = node.vals
    if vals:
        for s, v in enumerate(vals):
            if v is not None and s < node.info.n_in and isinstance(v, np.ndarray) and \
                    np.may_share_memory(v, data):
                vals[s] = v.copy()
                node.vers = tuple(e for e in node.vers if e[0] != s)


def _rebase(t, res):
    """t (whose storage now holds res's values) takes over res's history."""
    node = res._grad_fn
    t._grad_fn = node
    t._out_nr = res._out_nr
    t._requires_grad = True
    vc = vc_of(t)
    s = node.info.out_slots[res._out_nr]
    if node.vals and node.vals[s] is not None:
        node.vals[s] = t._data
        node.vers = tuple(e for e in node.vers if e[0] != s) + ((s, vc, vc.v),)


def _view_positions(view, base):
    """Flat positions in base's (C-contiguous) storage of each element of view."""
    bd, vd = base._data, view._data
    if not bd.flags.c_contiguous:
        raise NotImplementedError("functrans: in-place operation on a view of a non-contiguous "
                                  "tensor that requires grad; clone() the base first")
    item = bd.itemsize
    off = (vd.__array_interface__["data"][0] - bd.__array_interface__["data"][0]) // item
    idx = np.arange(bd.size, dtype=np.int64)
    return np.lib.stride_tricks.as_strided(
        idx[off:], vd.shape, tuple(st // item * idx.itemsize for st in vd.strides)).copy()


def _copy_slices_fn(base, value, pos):
    flat = fnp.reshape(base, (-1,))
    return fnp.reshape(fnp.index_update(flat, pos, value), base.shape)


def _as_strided_fn(base, pos):
    return fnp.take(fnp.reshape(base, (-1,)), pos)


def _inplace_on_view(self, name, res):
    """In-place op on a view under grad: the base's history becomes CopySlices(base, result)
    and the view's becomes a strided read of the new base (torch's semantics)."""
    base = self._base
    pos = wrap(_view_positions(self, base))
    if res._data.shape != self._data.shape:
        res = res.expand(tuple(self._data.shape))
    new_base = apply_fn("CopySlices", _copy_slices_fn, (base, res, pos))
    _protect_saved(res._grad_fn, base._data)
    _protect_saved(new_base._grad_fn, base._data)
    _write(self._data, res._data)
    self._bump(name)
    _rebase(base, new_base)
    new_view = apply_fn("AsStridedBackward0", _as_strided_fn, (base, pos))
    self._grad_fn = new_view._grad_fn
    self._out_nr = 0
    self._requires_grad = True
    self.__dict__["_vfn"] = base._grad_fn
    return self


def check_view(t):
    """A view whose base was rebased by an in-place op since it was taken has a stale
    history: refuse to record with it (torch regenerates it; functrans asks to re-take it)."""
    base = t._base
    if base._grad_fn is not t.__dict__.get("_vfn", base._grad_fn):
        op = base._vc.op if base._vc is not None else "an in-place operation"
        raise RuntimeError(
            f"functrans: this tensor is a view of a tensor that was modified in place (by {op}) "
            "after the view was taken, so its recorded history is stale (PyTorch would "
            "regenerate it). Take the view again after the in-place operation.")


def _write(dst, src):
    if not np.can_cast(src.dtype, dst.dtype, "same_kind"):
        raise RuntimeError(f"result type {_tname(src.dtype)} can't be cast to the desired output "
                           f"type {_tname(dst.dtype)}")
    if not dst.flags.writeable:
        raise RuntimeError("unsupported operation: more than one element of the written-to "
                           "tensor refers to a single memory location. Please clone() the tensor "
                           "before performing the operation.")
    np.copyto(dst, src, casting="same_kind")


def _tname(d):
    return {"float32": "Float", "float64": "Double", "int64": "Long", "int32": "Int",
            "bool": "Bool", "float16": "Half"}.get(d.name, d.name)


def _fast(self, *others):
    """True when an in-place op need not record: grad mode off or nothing requires grad."""
    if not GS.enabled:
        if self._flags & INFERENCE and not GS.inference:
            _check_inplace(self, False)
        return True
    if self._requires_grad:
        return False
    for o in others:
        if isinstance(o, Tensor) and o._requires_grad:
            return False
    if self._flags & INFERENCE and not GS.inference:
        _check_inplace(self, False)
    return True


def _ufunc_inplace(ufunc, name, method):
    def f(self, other, **kw):
        if not kw and _fast(self, other) and type(self._data) is np.ndarray:
            o = other._data if isinstance(other, Tensor) else other
            if not np.can_cast(np.result_type(self._data, o), self._data.dtype, "same_kind"):
                _write(self._data, np.asarray(ufunc(self._data, o)))
            ufunc(self._data, o, out=self._data, casting="same_kind")
            self._bump(name)
            return self
        return inplace(self, name, lambda: method(self, other, **kw))
    f.__name__ = name
    return f


T.add_ = _ufunc_inplace(np.add, "add_", add)
T.sub_ = T.subtract_ = _ufunc_inplace(np.subtract, "sub_", sub)
T.mul_ = T.multiply_ = _ufunc_inplace(np.multiply, "mul_", lambda s, o: binary(s, o, MUL))
T.div_ = T.divide_ = T.true_divide_ = _ufunc_inplace(np.true_divide, "div_",
                                                     lambda s, o: binary(s, o, DIV))
T.__iadd__ = T.add_
T.__isub__ = T.sub_
T.__imul__ = T.mul_
T.__itruediv__ = T.div_


def _add_alpha_(self, other, *, alpha=1):
    if _fast(self, other) and type(self._data) is np.ndarray:
        o = other._data if isinstance(other, Tensor) else other
        if alpha != 1:
            o = np.multiply(o, alpha)
        res = np.result_type(self._data, o)
        if not np.can_cast(res, self._data.dtype, "same_kind"):
            raise RuntimeError(f"result type {_tname(np.dtype(res))} can't be cast to the "
                               f"desired output type {_tname(self._data.dtype)}")
        np.add(self._data, o, out=self._data, casting="same_kind")
        self._bump("add_")
        return self
    return inplace(self, "add_", lambda: add(self, other, alpha=alpha))


def _sub_alpha_(self, other, *, alpha=1):
    return _add_alpha_(self, other, alpha=-alpha)


T.add_ = _add_alpha_
T.sub_ = T.subtract_ = _sub_alpha_
T.__iadd__ = _add_alpha_
T.__isub__ = _sub_alpha_


def _generic_inplace(name, method):
    def f(self, *args, **kwargs):
        return inplace(self, name + "_", lambda: method(self, *args, **kwargs))
    f.__name__ = name + "_"
    return f


for _n in ["pow", "neg", "abs", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tan", "tanh",
           "sigmoid", "relu", "clamp", "clamp_min", "clamp_max", "masked_fill", "addcmul",
           "addcdiv", "lerp", "floor", "ceil", "round", "trunc", "sign", "reciprocal", "square",
           "log1p", "expm1", "fmod", "remainder", "maximum", "minimum", "atan2", "erf",
           "asin", "acos", "atan", "sinh", "cosh", "frac", "log2", "log10", "exp2"]:
    setattr(T, _n + "_", _generic_inplace(_n, getattr(T, _n)))
T.clip_ = T.clamp_
T.__ipow__ = T.pow_


def _addcmul_(self, tensor1, tensor2, *, value=1):
    if _fast(self, tensor1, tensor2) and type(self._data) is np.ndarray:
        prod = np.multiply(tensor1._data, tensor2._data)
        if value != 1:
            prod *= value
        np.add(self._data, prod, out=self._data, casting="same_kind")
        self._bump("addcmul_")
        return self
    return inplace(self, "addcmul_", lambda: addcmul(self, tensor1, tensor2, value=value))


def _addcdiv_(self, tensor1, tensor2, *, value=1):
    if _fast(self, tensor1, tensor2) and type(self._data) is np.ndarray:
        q = np.divide(tensor1._data, tensor2._data)
        if value != 1:
            q *= value
        np.add(self._data, q, out=self._data, casting="same_kind")
        self._bump("addcdiv_")
        return self
    return inplace(self, "addcdiv_", lambda: addcdiv(self, tensor1, tensor2, value=value))


def _lerp_(self, end, weight):
    if _fast(self, end, weight) and type(self._data) is np.ndarray:
        w = weight._data if isinstance(weight, Tensor) else weight
        self._data += w * (end._data - self._data)
        self._bump("lerp_")
        return self
    return inplace(self, "lerp_", lambda: lerp(self, end, weight))


def _sqrt_(self):
    if _fast(self) and type(self._data) is np.ndarray and self.dtype.kind == "f":
        np.sqrt(self._data, out=self._data)
        self._bump("sqrt_")
        return self
    return inplace(self, "sqrt_", lambda: self.sqrt())


T.addcmul_, T.addcdiv_, T.lerp_, T.sqrt_ = _addcmul_, _addcdiv_, _lerp_, _sqrt_


def _fill_fn(x, v):
    return fnp.broadcast_to(fnp.astype(v, x.dtype), x.shape)


def fill_(self, value):
    if _fast(self, value):
        self._data[...] = value._data if isinstance(value, Tensor) else value
        self._bump("fill_")
        return self
    v = value if isinstance(value, Tensor) else wrap(np.asarray(value, self.dtype))
    return inplace(self, "fill_", lambda: apply_fn("FillBackward0", _fill_fn, (self, v)))


def _zero_fn(x):
    return fnp.zeros_like(x) * x if False else fnp.broadcast_to(np.zeros((), x.dtype), x.shape)


def zero_(self):
    if _fast(self):
        self._data[...] = 0
        self._bump("zero_")
        return self
    return inplace(self, "zero_", lambda: apply_fn("ZeroBackward0", _zero_fn, (self,)))


def _copy_fn(x, src):
    return fnp.broadcast_to(fnp.astype(src, x.dtype), x.shape)


def copy_(self, src, non_blocking=False):
    if not isinstance(src, Tensor):
        src = wrap(np.asarray(src))
    if _fast(self, src):
        _write(self._data, np.broadcast_to(src._data, self._data.shape).astype(self.dtype,
                                                                              copy=False))
        self._bump("copy_")
        return self
    return inplace(self, "copy_", lambda: apply_fn("CopyBackwards", _copy_fn, (self, src)))


T.fill_, T.zero_, T.copy_ = fill_, zero_, copy_


def _random_inplace(name, sample):
    def f(self, *args, generator=None, **kwargs):
        if GS.enabled and self._requires_grad and self._grad_fn is None:
            raise RuntimeError(LEAF_INPLACE_MSG)
        from .creation import _rng
        vals = sample(generator or _rng(), self._data.shape, *args, **kwargs)
        _check_inplace(self, False)
        if self._grad_fn is not None and GS.enabled:
            v = wrap(np.asarray(vals, self.dtype))
            return inplace(self, name, lambda: apply_fn("FillBackward0", _copy_fn, (self, v)))
        self._data[...] = vals
        self._bump(name)
        return self
    f.__name__ = name
    return f


T.uniform_ = _random_inplace("uniform_", lambda g, shape, a=0.0, b=1.0: g.uniform(a, b, shape))
T.normal_ = _random_inplace("normal_", lambda g, shape, mean=0.0, std=1.0:
                            g.normal(mean, std, shape))
T.bernoulli_ = _random_inplace("bernoulli_", lambda g, shape, p=0.5: g.random(shape) < p)
T.exponential_ = _random_inplace("exponential_", lambda g, shape, lambd=1.0:
                                 g.exponential(1.0 / lambd, shape))
T.random_ = _random_inplace("random_", lambda g, shape, low=0, high=2 ** 24:
                            g.integers(low, high, shape) if high is not None else
                            g.integers(0, low, shape))
