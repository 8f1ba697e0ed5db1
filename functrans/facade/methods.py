"""Tensor operators and methods with torch's names, signatures and grad_fn names.

Elementwise ops use the hand-written hot paths of tensor.py; the rest are composites of
functrans.numpy functions (apply_fn), traced into primitive steps once per signature.
"""
from __future__ import annotations

import builtins
from collections import namedtuple

import numpy as np

from .. import numpy as fnp
from ..numpy._linalg import matrix_norm
from ..core import ConcretizationTypeError, Tracer
from ..nn import functions as nnf
from functrans.primitives import elementwise as ew
from . import dtypes as D
from .tensor_info import result_type
from .tensor import EOp, Tensor, apply_fn, binary, static, unary, wrap

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


def abs_fn(x):
    """|x| with PyTorch's derivative sign(x), 0 at 0 (functrans.numpy's abs follows JAX: 1 at
    0): x * sign(x), whose backward reads sign(x). Complex and integer input: plain abs."""
    x = fnp.asarray(x)
    if np.dtype(x.dtype).kind != "f":
        return fnp.abs(x)
    return ew.mul(x, ew.sign(x))


def _abs(self):
    """abs; a float input that can carry a derivative goes through abs_fn (torch's sgn rule)."""
    if self._data.dtype.kind == "f" and (self._requires_grad or isinstance(self._data, Tracer)):
        return apply_fn("AbsBackward0", abs_fn, (self,))
    return unary(self, _UOPS["abs"])


T.abs = _abs
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


def _fnp_call(fn, *args):
    """fn(*args) of functrans.numpy as a facade op with no derivative (traced data)."""
    return apply_fn(fn.__name__, fn, args)


def logical_not(self):
    if isinstance(self._data, Tracer):
        return _fnp_call(fnp.logical_not, self)
    return wrap(np.logical_not(self._data))


def _logical(np_fn, fnp_fn):
    def f(self, o):
        if isinstance(self._data, Tracer) or isinstance(getattr(o, "_data", None), Tracer):
            return _fnp_call(fnp_fn, self, o)
        return wrap(np_fn(self._data, _arr(o)))
    return f


T.logical_not = logical_not
T.logical_and = _logical(np.logical_and, fnp.logical_and)
T.logical_or = _logical(np.logical_or, fnp.logical_or)
T.logical_xor = _logical(np.logical_xor, fnp.logical_xor)


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
        a = wrap(np.asarray(a, result_type(a, b)))
    dt = result_type(a, b)
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
    if na == 1:
        return "SqueezeBackward4"          # torch: unsqueeze, mm, squeeze
    return "UnsafeViewBackward0"


def matmul(self, other):
    if not isinstance(other, Tensor):
        other = wrap(np.asarray(other))
    dt = result_type(self, other)
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
        raise RuntimeError("self must be a matrix" if self.ndim != 2 else "mat2 must be a matrix")
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


def relu_fn(x):
    """torch's relu: 0 where x <= 0, else x, so NaN passes through (value NaN, derivative
    1, as torch's threshold_backward); the derivative at 0 is 0."""
    return fnp.where(fnp.less_equal(x, 0), fnp.zeros((), x.dtype), x)


def relu(self):
    return apply_fn("ReluBackward0", relu_fn, (self,))


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


def _real(self):
    """The real part (self for a real tensor, as torch)."""
    return apply_fn("RealBackward0", fnp.real, (self,)) if self._data.dtype.kind == "c" else self


def _imag(self):
    if self._data.dtype.kind != "c":
        raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")
    return apply_fn("ImagBackward0", fnp.imag, (self,))


def _conj(self):
    """The complex conjugate (self for a real tensor, as torch)."""
    return apply_fn("ConjBackward0", fnp.conj, (self,)) if self._data.dtype.kind == "c" else self


T.real, T.imag = property(_real), property(_imag)
T.conj = T.conj_physical = T.resolve_conj = _conj
T.angle = _fnp_unary("AngleBackward0", fnp.angle)


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
        x = wrap(np.asarray(x, result_type(x, y)))
    dt = result_type(*(v for v in (x, y)))
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


def _argidx_fn(x, axis, keepdims, which):
    f = fnp.argmax if which == "max" else fnp.argmin
    if axis is None:
        i = f(fnp.reshape(x, (-1,)))
        return fnp.astype(fnp.reshape(i, (1,) * x.ndim) if keepdims else i, np.int64)
    return fnp.astype(f(x, axis=axis, keepdims=keepdims), np.int64)


def _all_any_fn(x, axis, keepdims, which):
    return (fnp.all if which == "all" else fnp.any)(x, axis=axis, keepdims=keepdims)


def _all_any(self, which, dim=None, keepdim=False):
    if isinstance(self._data, Tracer):
        return apply_fn(which, _all_any_fn, (self,), static(axis=dim, keepdims=keepdim,
                                                           which=which))
    f = np.all if which == "all" else np.any
    return wrap(np.asarray(f(self._data, axis=dim, keepdims=keepdim)))


def _argfn(self, which, dim=None, keepdim=False):
    x = self._data
    if isinstance(x, Tracer):
        return apply_fn("arg" + which, _argidx_fn, (self,), static(
            axis=None if dim is None else dim % builtins.max(x.ndim, 1), keepdims=keepdim,
            which=which))
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
    s = fnp.sum(fnp.multiply(x, x) if p == 2 else fnp.power(a, float(p)), axis=axis,
                keepdims=keepdims)
    zero = fnp.equal(s, 0)
    safe = fnp.where(zero, fnp.ones((), s.dtype), s)       # no inf * 0 in the derivative
    root = fnp.sqrt(safe) if p == 2 else fnp.power(safe, 1.0 / p)
    return fnp.where(zero, fnp.zeros((), s.dtype), root)


def _frobenius(y, axes):
    return vector_norm_fn(y, axes, False, 2)


def matrix_norm_fn(x, ord, axes, keepdims):
    """torch.linalg.matrix_norm over two axes, with PyTorch's derivatives at kinks."""
    return matrix_norm(x, ord, axes, keepdims, absval=abs_fn, frobenius=_frobenius)


def norm(self, p="fro", dim=None, keepdim=False, dtype=None):
    """torch.norm: 'nuc' is the nuclear norm of a matrix (or over two dims); any other p the
    vector norm over dim (all elements when None)."""
    if p == "nuc":
        axes = (0, 1) if dim is None else _dims(dim, self.ndim)
        if self.ndim < 2 or len(axes) != 2:
            raise RuntimeError("linalg.matrix_norm: The input tensor A must have at least 2 "
                               "dimensions.")
        return apply_fn("NormBackward1", matrix_norm_fn, (self,),
                        static(ord="nuc", axes=axes, keepdims=keepdim))
    p = 2 if p in ("fro", None) else p
    return apply_fn("NormBackward1" if dim is not None else "NormBackward0", vector_norm_fn,
                    (self,), static(axis=_dims(dim, self.ndim), keepdims=keepdim, p=p))


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
T.all = lambda self, dim=None, keepdim=False: _all_any(self, "all", dim, keepdim)
T.any = lambda self, dim=None, keepdim=False: _all_any(self, "any", dim, keepdim)
T.count_nonzero = lambda self, dim=None: wrap(np.asarray(np.count_nonzero(self._data, axis=dim),
                                                         np.int64))


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

