"""Tensor operators and methods with torch's names, signatures and grad_fn names.

Elementwise ops use the hand-written hot paths and the op table of hot_ops.py; the rest
are composites of functrans.numpy functions (apply_fn), traced into primitive steps once
per signature.
"""
from __future__ import annotations

import builtins

import numpy as np

from ..numpy import raw as fnp
from ..core import Tracer
from ..nn import functions as nnf
from ..higher_order.custom import custom_jvp
from functrans.primitives.misc import stop_gradient
from functrans.primitives import elementwise as ew
from . import dtypes as D
from .tensor_info import result_type, wrap_dim
from .hot_ops import (ADD, AND, ATAN2, DIV, FMOD, FMOD1, MAXIMUM, MINIMUM, MUL, OR, POW,
                      POWS, SUB, XOR, _CMPS, _UOPS, EOp, binary, check_broadcast, unary)
from .tensor import Tensor, apply_fn, static, wrap

T = Tensor
_PY = (builtins.int, builtins.float, builtins.bool)

# ---------------------------------------------------------------------------
# elementwise ops (the table of hot_ops.py)


def _install_unary(name, op):
    def method(self):
        return unary(self, op)
    method.__name__ = name
    method.__doc__ = f"Elementwise {name} (grad_fn {op.name})."
    method.eop = op
    setattr(T, name, method)


for _n, _op in _UOPS.items():
    _install_unary(_n, _op)
UNARY_METHODS = frozenset(_UOPS)    # methods of self alone (ops.py: their ft.<name> functions)


def sign_fn(x):
    """torch.sign of a real array: -1, 0 or 1, and 0 for NaN (NumPy's and JAX's sign give
    NaN)."""
    s = fnp.sign(x)
    if np.dtype(s.dtype).kind != "f":
        return s
    return fnp.where(fnp.isnan(x), fnp.zeros((), s.dtype), s)


@custom_jvp
def _abs_torch(x):
    return fnp.abs(x)


@_abs_torch.defjvp
def _abs_torch_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return _abs_torch(x), fnp.multiply(t, sign_fn(x))


def abs_fn(x):
    """|x| with PyTorch's derivative sign(x): 0 at 0 (functrans.numpy's abs follows JAX: 1 at
    0) and 0 at NaN (torch's sign of NaN). Complex and integer input: plain abs."""
    x = fnp.asarray(x)
    if np.dtype(x.dtype).kind != "f":
        return fnp.abs(x)
    return _abs_torch(x)


def _abs(self):
    """abs; a float input that can carry a derivative goes through abs_fn (torch's sgn rule)."""
    if self._data.dtype.kind == "f" and (self._requires_grad or isinstance(self._data, Tracer)):
        return apply_fn("AbsBackward0", abs_fn, (self,))
    return unary(self, _UOPS["abs"])


T.abs = _abs
T.arcsin, T.arccos, T.arctan, T.negative, T.absolute = T.asin, T.acos, T.atan, T.neg, T.abs
T.arcsinh, T.arccosh, T.arctanh = T.asinh, T.acosh, T.atanh
T.__neg__ = T.neg
T.__abs__ = T.abs


def _pos(self):
    return self


T.__pos__ = _pos


def _binop(op, reverse=False):
    def f(self, other):
        return binary(self, other, op, reverse)

    def sub(self, other):           # `-` refuses bool operands (torch), checked inline: hot
        if self._data.dtype.kind == "b" or (isinstance(other, Tensor)
                                            and other._data.dtype.kind == "b"):
            raise _sub_error(self, other)
        return binary(self, other, op, reverse)
    return sub if op is SUB else f


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


@custom_jvp
def _atan2_fn(y, x):
    return fnp.arctan2(y, x)


@_atan2_fn.defjvp
def _atan2_jvp(primals, tangents):
    """torch's derivative of atan2(y, x): (x dy - y dx) / (x² + y²), 0 at the origin where
    the quotient is 0/0 (torch masks the reciprocal there; JAX's primitive, which the
    functional side keeps, gives NaN)."""
    (y, x), (dy, dx) = primals, tangents
    den = fnp.add(fnp.multiply(x, x), fnp.multiply(y, y))
    zero = fnp.equal(den, 0)
    recip = fnp.where(zero, fnp.zeros_like(den), 1 / fnp.where(zero, fnp.ones_like(den), den))
    return _atan2_fn(y, x), fnp.multiply(fnp.subtract(fnp.multiply(x, dy), fnp.multiply(y, dx)),
                                         recip)


def atan2(self, other):
    """torch.atan2 (promoted to a floating dtype), with torch's derivative (_atan2_jvp)."""
    if not isinstance(other, Tensor) or not (self._requires_grad or other._requires_grad):
        return binary(self, other, ATAN2)          # no derivative to take: the plain op
    if other.shape != self.shape:
        check_broadcast(self.shape, other.shape)
    dt = result_type(self, other)
    if dt.kind not in "fc":
        dt = D.get_default_dtype()
    a = self if self.dtype == dt else self.to(dt)
    b = other if other.dtype == dt else other.to(dt)
    return apply_fn("Atan2Backward0", _atan2_fn, (a, b))


T.atan2 = T.arctan2 = atan2
def fmod(self, other):
    _check_divisor(result_type(self, other), other)
    return binary(self, other, FMOD1 if isinstance(other, Tensor) else FMOD)


T.fmod = fmod


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
    return wrap(np.asarray(np.logical_not(self._data)))     # an array for 0-d input too


def _logical(np_fn, fnp_fn):
    def f(self, o):
        if isinstance(o, Tensor) and o.shape != self.shape:
            check_broadcast(self.shape, o.shape)
        if isinstance(self._data, Tracer) or isinstance(getattr(o, "_data", None), Tracer):
            return _fnp_call(fnp_fn, self, o)
        return wrap(np.asarray(np_fn(self._data, _arr(o))))   # an array for 0-d input too
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


def _div_floor_fn(x, y):
    return fnp.floor_divide(x, y)


def _div_trunc_fn(x, y):
    if np.dtype(x.dtype).kind in "fc":
        return fnp.trunc(fnp.divide(x, y))
    q = fnp.floor_divide(x, y)                 # integers: toward zero, without floats
    inexact = fnp.not_equal(fnp.multiply(q, y), x)
    return fnp.where(inexact & fnp.not_equal(fnp.less(x, 0), fnp.less(y, 0)), q + 1, q)


def div(self, other, *, rounding_mode=None):
    """torch.div: true division (to a floating dtype), or with rounding_mode 'floor' or
    'trunc' the rounded quotient in the promoted dtype (integers stay integral), whose
    derivative is 0 (DivBackward2)."""
    if rounding_mode is None:
        return binary(self, other, DIV)
    if rounding_mode not in ("floor", "trunc"):
        raise RuntimeError("div expected rounding_mode to be one of None, 'trunc', or 'floor' "
                           f"but found '{rounding_mode}'")
    return _elementwise_fn("DivBackward2", _div_floor_fn if rounding_mode == "floor" else
                           _div_trunc_fn, self, other, divides=True)


T.div = T.divide = div
T.true_divide = _binop(DIV)


def pow(self, exponent):
    """torch.pow: an integer (or bool) tensor to an integer power stays integral (int64 for
    bool), as does an integer tensor to an integer tensor's powers."""
    if isinstance(exponent, builtins.int) and not isinstance(exponent, builtins.bool):
        if self.dtype == D.bool:
            self = self.to(D.int64)
        op = _IPOW.get(exponent)
        if op is None:
            op = _IPOW[exponent] = EOp("PowBackward0", ew.integer_pow_p, {"y": exponent},
                                       float_only=False)
        if self.dtype.kind in "iu" and exponent < 0:
            raise RuntimeError("Integers to negative integer powers are not allowed.")
        return unary(self, op)
    if isinstance(exponent, _PY):
        return binary(self, exponent, POWS)
    if isinstance(exponent, Tensor):
        dt = result_type(self, exponent)
        if dt.kind in "biu":
            return _integer_pow(self, exponent)
        if not (self._requires_grad or exponent._requires_grad):
            return binary(self, exponent, POW)      # no derivative to take: the plain op
        if exponent.shape != self.shape:
            check_broadcast(self.shape, exponent.shape)
        return apply_fn("PowBackward1", _pow_fn, (self if self.dtype == dt else self.to(dt),
                                                  exponent if exponent.dtype == dt else
                                                  exponent.to(dt)))
    return binary(self, exponent, POW)


@custom_jvp
def _pow_fn(x, y):
    return fnp.power(x, y)


@_pow_fn.defjvp
def _pow_jvp(primals, tangents):
    """torch's derivatives of x ** y (tensor exponent): y * x**(y-1), 0 where y == 0; and
    x**y * log(x), 0 where x == 0 and y >= 0 (so -inf at x == 0, y < 0, where JAX's
    primitive, kept by the functional side, gives NaN)."""
    (x, y), (dx, dy) = primals, tangents
    ans = _pow_fn(x, y)
    zero = fnp.zeros((), ans.dtype)
    ddx = fnp.where(fnp.equal(y, 0), zero, y * _pow_fn(x, y - 1))
    ddy = fnp.where(fnp.equal(x, 0) & fnp.greater_equal(y, 0), zero, ans * fnp.log(x))
    return ans, ddx * dx + ddy * dy


def _integer_pow(base, exponent):
    dt = result_type(base, exponent)
    if dt == D.bool:
        raise NotImplementedError("\"pow\" not implemented for 'Bool'")
    return _elementwise_fn("PowBackward1", _integer_pow_fn, base, exponent)


def _integer_pow_fn(b, e):
    """Integer b ** e as torch computes it: a negative exponent gives 1/b^|e| truncated,
    so 1 for b = 1, +-1 for b = -1 and 0 otherwise (0 ** -1 too)."""
    neg = fnp.less(e, 0)
    r = fnp.power(b, fnp.where(neg, fnp.zeros_like(e), e))
    odd = fnp.not_equal(fnp.remainder(e, 2), 0)
    one = fnp.ones_like(r)
    small = fnp.where(fnp.equal(b, 1), one, fnp.where(fnp.equal(b, -1), fnp.where(
        odd, -one, one), fnp.zeros_like(r)))
    return fnp.where(neg, small, r)


def _rpow(self, base):
    """base ** self for a number base: integral when both are (torch's PowBackward2)."""
    if isinstance(base, builtins.int) and not isinstance(base, builtins.bool) and \
            self.dtype.kind in "biu":
        return _integer_pow(base, self)
    if self._requires_grad and self.dtype.kind == "f" and isinstance(base, _PY):
        # torch's derivative (-inf at 0 ** negative, where the primitive's JVP gives NaN)
        return apply_fn("PowBackward2", _pow_fn, (base, self))
    return binary(self, base, POW, True)


_IPOW: dict = {}
T.pow = T.__pow__ = pow
T.__rpow__ = _rpow


def _floordiv(self, other):
    return _elementwise_fn("FloorDivideBackward0", fnp.floor_divide, self, other, divides=True)


def _rfloordiv(self, other):
    return _elementwise_fn("FloorDivideBackward0", fnp.floor_divide, other, self, divides=True)


def _remainder(self, other):
    return _elementwise_fn("RemainderBackward1" if isinstance(other, Tensor) else
                           "RemainderBackward0", fnp.remainder, self, other, divides=True)


def _rremainder(self, other):
    return _elementwise_fn("RemainderBackward0", fnp.remainder, other, self, divides=True)


def _check_divisor(dt, b):
    """torch's RuntimeError for an integer division by zero (remainder, fmod, floor_divide,
    div with a rounding mode); NumPy gives 0 with a warning. Traced divisors are not
    checked."""
    if dt.kind in "biu":
        d = b._data if isinstance(b, Tensor) else b
        if not isinstance(d, Tracer) and np.any(np.asarray(d) == 0):
            raise RuntimeError("ZeroDivisionError")


def _elementwise_fn(name, fn, a, b, divides=False):
    if not isinstance(a, Tensor):
        a = wrap(np.asarray(a, result_type(a, b)))
    dt = result_type(a, b)
    if divides:
        _check_divisor(dt, b)
    if isinstance(b, Tensor):
        if a.shape != b.shape:
            check_broadcast(a.shape, b.shape)
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
    if na == 1 and nb == 2:
        return "SqueezeBackward4"          # torch: unsqueeze, mm, squeeze
    if na == 2:
        return "CloneBackward0"            # torch: the transposed product, made contiguous
    return "UnsafeViewBackward0"           # torch: folded into bmm or mm, then viewed


def _matmul_check(sa, sb, da, db):
    """torch.matmul's RuntimeErrors, with the message of the kernel torch dispatches to
    (dot, mv, mm or bmm, after folding batch dimensions into rows): operands of different
    dtypes (torch does not promote in products) and contracting sizes that differ."""
    na, nb = len(sa), len(sb)
    if na == 0 or nb == 0:
        raise RuntimeError("both arguments to matmul need to be at least 1D, but they are "
                           f"{na}D and {nb}D")
    rows = int(np.prod(sa[:-1])) if na >= 2 else 1
    if da != db:
        if na == 1 and nb == 1:
            msg = (f"dot : expected both vectors to have same dtype, but found "
                   f"{D.scalar_name(da)} and {D.scalar_name(db)}")
        elif nb == 1:
            msg = (f"addmv input tensors must have the same dtype, but got "
                   f"{D.scalar_name(db)}, {D.scalar_name(da)}, and {D.scalar_name(db)}")
        elif nb == 2:
            msg = (f"expected m1 and m2 to have the same dtype, but got: {D.cpp_name(da)} != "
                   f"{D.cpp_name(db)}")
        else:
            msg = f"expected scalar type {D.scalar_name(da)} but found {D.scalar_name(db)}"
        raise RuntimeError(msg)
    k = sa[-1]
    kb = sb[0] if nb == 1 else sb[-2]
    if nb >= 3:
        batch_a = tuple(sa[:-2]) if na >= 2 else ()
        check_broadcast(batch_a, tuple(sb[:-2]))
        bsz = int(np.prod(np.broadcast_shapes(batch_a, tuple(sb[:-2]))))
        if k != kb:
            raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                               f"[{bsz}, {k}] but got: [{bsz}, {kb}].")
    elif k != kb:
        if na == 1 and nb == 1:
            raise RuntimeError(f"inconsistent tensor size, expected tensor [{k}] and src "
                               f"[{kb}] to have the same number of elements, but got {k} and "
                               f"{kb} elements respectively")
        if nb == 1:
            raise RuntimeError(f"size mismatch, got input ({rows}), mat ({rows}x{k}), "
                               f"vec ({kb})")
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({rows}x{k} and "
                           f"{sb[0]}x{sb[1]})")


def _product(a, b, name=None):
    """a @ b as one facade op named name (grad_fn), after torch.matmul's checks."""
    if not isinstance(b, Tensor):
        b = wrap(np.asarray(b))
    _matmul_check(a.shape, b.shape, a.dtype, b.dtype)
    return apply_fn(name or _matmul_name(a, b), fnp.matmul, (a, b))


def matmul(self, other):
    """torch.matmul: no type promotion (operands must share a dtype) and torch's errors."""
    return _product(self, other)


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
    return _product(self, mat2, "BmmBackward0")


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
    1, as torch's threshold_backward); the derivative at 0 is 0: the functional relu."""
    return nnf.relu(x)


def relu(self):
    return apply_fn("ReluBackward0", relu_fn, (self,))


def _softmax_fn(x, axis):
    return nnf.softmax(x, axis=axis)


def _log_softmax_fn(x, axis):
    return nnf.log_softmax(x, axis=axis)


def _softmax_input(kernel, self, dim, dtype):
    """self in dtype; torch's kernels refuse integer and bool input (no implicit float)."""
    x = self if dtype is None else self.to(dtype)
    if x.dtype.kind not in "fc":
        last = wrap_dim(dim, x.ndim) == builtins.max(x.ndim, 1) - 1
        raise NotImplementedError(f"\"{kernel}_{'lastdim_' if last else ''}kernel_impl\" not "
                                  f"implemented for '{D.scalar_name(x.dtype)}'")
    return x


def softmax(self, dim, dtype=None):
    x = _softmax_input("softmax", self, dim, dtype)
    return apply_fn("SoftmaxBackward0", _softmax_fn, (x,), static(axis=dim))


def log_softmax(self, dim, dtype=None):
    x = _softmax_input("log_softmax", self, dim, dtype)
    return apply_fn("LogSoftmaxBackward0", _log_softmax_fn, (x,), static(axis=dim))


def _clamp_fn(x, lo, hi, has_lo, has_hi):
    out = x
    if has_lo:
        out = fnp.where(fnp.less(x, lo), fnp.astype(lo, x.dtype) if hasattr(lo, "dtype")
                        else lo, out)
    if has_hi:                   # min(max(x, lo), hi): hi wins where lo > hi, as in torch
        out = fnp.where(fnp.greater(out, hi), fnp.astype(hi, x.dtype) if hasattr(hi, "dtype")
                        else hi, out)
    if np.dtype(x.dtype).kind == "f":    # NaN stays NaN, with derivative 0 as torch's mask
        out = fnp.where(fnp.isnan(x), stop_gradient(x), out)
    return out


def _nan_to_num_fn(x, nan, posinf, neginf):
    """x with NaN, +inf and -inf replaced; the derivative is 1 where x is finite and 0 at
    the replaced elements (torch's grad * isfinite(x))."""
    finite = fnp.isfinite(x)
    big = fnp.where(fnp.greater(x, 0), np.asarray(posinf, x.dtype), np.asarray(neginf, x.dtype))
    return fnp.where(finite, x, fnp.where(fnp.isnan(x), np.asarray(nan, x.dtype), big))


def nan_to_num(self, nan=0.0, posinf=None, neginf=None):
    """torch.nan_to_num: NaN -> nan, +inf -> posinf (default the dtype's largest value),
    -inf -> neginf (default its lowest); integer and bool tensors come back as copies.
    grad_fn NanToNumBackward0."""
    for arg, v in (("nan", nan), ("posinf", posinf), ("neginf", neginf)):
        if v is not None and (isinstance(v, (bool, str)) or not isinstance(v, (int, float))):
            raise TypeError(f"nan_to_num(): argument '{arg}' must be float, not "
                            f"{type(v).__name__}")
    dt = np.dtype(self.dtype)
    if dt.kind not in "fc":
        return self.clone()
    info = np.finfo(dt)
    return apply_fn("NanToNumBackward0", _nan_to_num_fn, (self,), static(
        nan=float(nan), posinf=float(info.max if posinf is None else posinf),
        neginf=float(info.min if neginf is None else neginf)))


def clamp(self, min=None, max=None, *, _which="Clamp"):
    """torch.clamp: min(max(self, min), max), promoted with the bounds (an integer tensor
    clamped to a float bound is a float tensor); grad_fn ClampBackward1 (ClampMinBackward0,
    ...) for number bounds, ClampBackward0 (ClampMinBackward1, ...) for tensor bounds."""
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    bounds = [b for b in (min, max) if b is not None]
    tensors = any(isinstance(b, Tensor) for b in bounds)
    name = f"{_which}Backward" + ("0" if tensors == (_which == "Clamp") else "1")
    dt = result_type(self, *bounds)
    x = self if dt == self.dtype else self.to(dt)
    lo = 0 if min is None else min
    hi = 0 if max is None else max
    return apply_fn(name, _clamp_fn, (x, lo, hi),
                    static(has_lo=min is not None, has_hi=max is not None))


def clamp_min(self, min):
    return clamp(self, min=min, _which="ClampMin")


def clamp_max(self, max):
    return clamp(self, max=max, _which="ClampMax")


T.relu, T.softmax, T.log_softmax = relu, softmax, log_softmax
T.nan_to_num = nan_to_num
T.clamp = T.clip = clamp
T.clamp_min, T.clamp_max = clamp_min, clamp_max


def _square(self):
    return pow(self, 2)


def _reciprocal_fn(x):
    return fnp.reciprocal(x)


def _reciprocal(self):
    x = self if self.dtype.kind in "fc" else self.to(D.get_default_dtype())
    return apply_fn("ReciprocalBackward0", _reciprocal_fn, (x,))


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
T.trunc = T.fix = lambda self: self.clone() if self.dtype.kind in "iu" else _trunc(self)
_trunc = _fnp_unary("TruncBackward0", fnp.trunc)
T.round = lambda self, decimals=0: apply_fn(
    "RoundBackward1" if decimals else "RoundBackward0", fnp.round, (self,),
    static(decimals=decimals))


def _frac_fn(x):
    return fnp.subtract(x, fnp.trunc(x))


def _frac(self):
    return apply_fn("FracBackward0", _frac_fn, (self,))


T.frac = _frac
T.isnan = lambda self: wrap(np.isnan(self._data))
T.isinf = lambda self: wrap(np.isinf(self._data))
T.isfinite = lambda self: wrap(np.isfinite(self._data))
T.signbit = lambda self: wrap(np.signbit(self._data))


def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """torch.isin: whether each element of `elements` is in `test_elements` (a bool tensor,
    no gradient); either may be a number."""
    if not isinstance(elements, Tensor) and not isinstance(test_elements, Tensor):
        raise TypeError("isin() expected at least one of elements or test_elements to be a "
                        "Tensor")
    return wrap(np.asarray(np.isin(_arr(elements), _arr(test_elements),
                                   assume_unique=assume_unique, invert=invert)))
T.sgn = lambda self: apply_fn("SgnBackward0", _sgn_fn, (self,)) if self.dtype.kind in "fc" \
    else self.sign()


def _sgn_fn(x):
    """x / |x| (0 at 0) for complex x, sign(x) for real x: torch.sgn."""
    if np.dtype(x.dtype).kind != "c":
        return fnp.sign(x)
    a = fnp.abs(x)
    zero = fnp.equal(a, 0)
    return fnp.where(zero, fnp.zeros_like(x), x / fnp.where(zero, fnp.ones_like(a), a))


def _real(self):
    """The real part (self for a real tensor, as torch)."""
    return apply_fn("SelectBackward0", fnp.real, (self,)) if self._data.dtype.kind == "c" \
        else self         # torch: select(view_as_real(x), -1, 0), SelectBackward0


def _imag(self):
    if self._data.dtype.kind != "c":
        raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")
    return apply_fn("SelectBackward0", fnp.imag, (self,))


def _conj(self):
    """The complex conjugate (self for a real tensor, as torch)."""
    return apply_fn("ConjBackward0", fnp.conj, (self,)) if self._data.dtype.kind == "c" else self


T.real, T.imag = property(_real), property(_imag)
def _conj_physical(self):
    return apply_fn("ConjPhysicalBackward0", fnp.conj, (self,)) if self._data.dtype.kind == "c" \
        else self


T.conj = _conj
T.conj_physical = _conj_physical
# conj() materializes here (there is no conjugate bit to resolve): resolve_conj is self
T.resolve_conj = lambda self: self
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
    elif condition.dtype != D.bool:
        raise RuntimeError("where expected condition to be a boolean tensor, but got a tensor "
                           f"with dtype {D.scalar_name(condition.dtype)}")
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
    return apply_fn("MaskedFillBackward1" if isinstance(value, Tensor) else
                    "MaskedFillBackward0", _masked_fill_fn, (self, _as_bool(mask), v))


def _as_bool(mask):
    if not isinstance(mask, Tensor):
        mask = wrap(np.asarray(mask))
    if mask.dtype != np.bool_:
        raise RuntimeError(f"masked_fill_ only supports boolean masks, but got mask with dtype "
                           f"{D.meta_name(mask.dtype)}")
    return mask


T.where, T.masked_fill = where, masked_fill

# ---------------------------------------------------------------------------
# dtypes torch's kernels refuse: the same exception and message as torch, rather than a
# NumPy TypeError or a quietly computed result

def _refuse(method, refused, error):
    """method, raising error(self, other) first where refused(self, other) holds."""
    def f(self, *args, **kwargs):
        if refused(self, *args[:1]):
            raise error(self, *args[:1])
        return method(self, *args, **kwargs)

    def f1(self):                   # no argument tuple to slice on the hot paths (-x, x - y)
        if refused(self):
            raise error(self)
        return method(self)

    def f2(self, other):
        if refused(self, other):
            raise error(self, other)
        return method(self, other)
    code = method.__code__
    plain = not (code.co_flags & 0x0C or code.co_kwonlyargcount or method.__defaults__)
    g = f1 if plain and code.co_argcount == 1 else f2 if plain and code.co_argcount == 2 \
        else f
    g.__name__, g.__doc__ = method.__name__, method.__doc__
    return g


def _kernel_error(kernel):
    def error(self, other=None):
        dt = self.dtype if other is None else result_type(self, other)
        return NotImplementedError(f"\"{kernel}\" not implemented for '{D.scalar_name(dt)}'")
    return error


def _is_bool(self, other=None):
    return self._data.dtype.kind == "b"


def _result_bool(self, other=None):
    return result_type(self, other) == D.bool


def _result_not_integral(self, other=None):
    return result_type(self, other).kind not in "biu"


_NEG_BOOL = ("Negation, the `-` operator, on a bool tensor is not supported. If you are trying "
             "to invert a mask, use the `~` or `logical_not()` operator instead.")
_SUB_BOOLS = ("Subtraction, the `-` operator, with two bool tensors is not supported. Use the "
              "`^` or `logical_xor()` operator instead.")
_SUB_BOOL = ("Subtraction, the `-` operator, with a bool tensor is not supported. If you are "
             "trying to invert a mask, use the `~` or `logical_not()` operator instead.")


def _sub_refused(self, other=None):
    return self._data.dtype.kind == "b" or (isinstance(other, Tensor) and
                                            other._data.dtype.kind == "b")


def _sub_error(self, other=None):
    both = self.dtype == D.bool and isinstance(other, Tensor) and other.dtype == D.bool
    return RuntimeError(_SUB_BOOLS if both else _SUB_BOOL)


for _names, _refused, _error in [
        (("abs", "absolute", "__abs__"), _is_bool, _kernel_error("abs_cpu")),
        (("ceil",), _is_bool, _kernel_error("ceil_vml_cpu")),
        (("floor",), _is_bool, _kernel_error("floor_vml_cpu")),
        (("round",), _is_bool, _kernel_error("round_vml_cpu")),
        (("trunc", "fix"), _is_bool, _kernel_error("trunc_vml_cpu")),
        (("frac",), lambda s, o=None: s.dtype.kind in "biu", _kernel_error("frac_cpu")),
        (("fmod",), _result_bool, _kernel_error("fmod_cpu")),
        (("remainder", "__mod__"), _result_bool, _kernel_error("remainder_cpu")),
        (("floor_divide", "__floordiv__"), _result_bool, _kernel_error("div_floor_cpu")),
        (("__and__", "__rand__"), _result_not_integral, _kernel_error("bitwise_and_cpu")),
        (("__or__", "__ror__"), _result_not_integral, _kernel_error("bitwise_or_cpu")),
        (("__xor__", "__rxor__"), _result_not_integral, _kernel_error("bitwise_xor_cpu")),
        (("neg", "negative", "__neg__"), _is_bool, lambda s, o=None: RuntimeError(_NEG_BOOL)),
        (("relu",), _is_bool,
         lambda s, o=None: RuntimeError("Boolean inputs not supported for relu")),
        (("sub", "subtract"), _sub_refused, _sub_error)]:
    for _n in _names:
        setattr(T, _n, _refuse(getattr(T, _n), _refused, _error))

_sign, _sgn = T.sign, T.sgn
T.sign = lambda self: self.clone() if self.dtype == D.bool else apply_fn(
    "SignBackward0", sign_fn, (self,)) if self.dtype.kind == "f" else _sign(self)
T.sgn = lambda self: self.clone() if self.dtype == D.bool else _sgn(self)
