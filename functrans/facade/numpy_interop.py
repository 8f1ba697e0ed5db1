"""NumPy on Tensors, as on PyTorch tensors: NumPy's functions convert a Tensor with
`__array__` (torch's error for one that requires grad), its reductions call the Tensor's
methods with NumPy's keywords (`axis`, `keepdims`, `dtype`, `out=None`, `ddof`), and a ufunc
on a Tensor is the Tensor op of the same meaning (`np.sin(t)` is `t.sin()`, `arr + t` is
`t.__radd__(arr)`): recorded by autograd, traced inside transformations, a Tensor. Ufuncs
without a Tensor op run on the values and return Tensors without history (torch's
`__array_wrap__`). Installs `Tensor.__array_ufunc__` and the reduction methods' keywords.
"""
from __future__ import annotations

import functools

import numpy as np

from .tensor import Tensor, wrap

# ufunc -> (method when the Tensor is the first operand, method when it is the second;
# None: the other operand becomes a Tensor first)
_BINARY = {
    np.add: ("__add__", "__radd__"), np.subtract: ("__sub__", "__rsub__"),
    np.multiply: ("__mul__", "__rmul__"), np.true_divide: ("__truediv__", "__rtruediv__"),
    np.power: ("__pow__", "__rpow__"), np.floor_divide: ("__floordiv__", "__rfloordiv__"),
    np.remainder: ("__mod__", "__rmod__"), np.matmul: ("__matmul__", "__rmatmul__"),
    np.equal: ("__eq__", "__eq__"), np.not_equal: ("__ne__", "__ne__"),
    np.less: ("__lt__", "__gt__"), np.less_equal: ("__le__", "__ge__"),
    np.greater: ("__gt__", "__lt__"), np.greater_equal: ("__ge__", "__le__"),
    np.bitwise_and: ("__and__", "__rand__"), np.bitwise_or: ("__or__", "__ror__"),
    np.bitwise_xor: ("__xor__", "__rxor__"), np.logical_and: ("logical_and", "logical_and"),
    np.logical_or: ("logical_or", "logical_or"), np.logical_xor: ("logical_xor", "logical_xor"),
    np.maximum: ("maximum", "maximum"), np.minimum: ("minimum", "minimum"),
    np.arctan2: ("atan2", None), np.fmod: ("fmod", None),
}
_UNARY = {
    np.negative: "__neg__", np.positive: "__pos__", np.absolute: "__abs__", np.fabs: "__abs__",
    np.invert: "__invert__", np.logical_not: "logical_not", np.exp: "exp", np.exp2: "exp2",
    np.expm1: "expm1", np.log: "log", np.log2: "log2", np.log10: "log10", np.log1p: "log1p",
    np.sqrt: "sqrt", np.square: "square", np.reciprocal: "reciprocal", np.sin: "sin",
    np.cos: "cos", np.tan: "tan", np.arcsin: "asin", np.arccos: "acos", np.arctan: "atan",
    np.sinh: "sinh", np.cosh: "cosh", np.tanh: "tanh", np.sign: "sign", np.floor: "floor",
    np.ceil: "ceil", np.trunc: "trunc", np.isnan: "isnan", np.isinf: "isinf",
    np.isfinite: "isfinite",
}
OUT_MSG = ("NumPy cannot write into a Tensor (out=...): a ufunc's out must be a NumPy array; "
           "use the Tensor's in-place methods (t.add_(...), t.copy_(...)) instead")


def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
    """A ufunc with a Tensor operand: the Tensor op of the same meaning where there is one,
    else NumPy on the values (a Tensor that requires grad or holds a traced value refuses,
    as __array__ does) with Tensor results."""
    out = kwargs.pop("out", None)
    if out is not None and any(isinstance(o, Tensor) for o in out):
        raise TypeError(OUT_MSG)
    if method == "__call__" and not kwargs and out is None:
        if len(inputs) == 1:
            name = _UNARY.get(ufunc)
            if name is not None:
                return getattr(Tensor, name)(inputs[0])
        elif len(inputs) == 2:
            names = _BINARY.get(ufunc)
            if names is not None:
                a, b = inputs
                if isinstance(a, Tensor):
                    return getattr(Tensor, names[0])(a, b)
                if names[1] is not None:
                    return getattr(Tensor, names[1])(b, a)
                return getattr(Tensor, names[0])(wrap(np.asarray(a)), b)
    if out is not None:
        kwargs["out"] = out
    arrays = [np.asarray(x) if isinstance(x, Tensor) else x for x in inputs]
    res = getattr(ufunc, method)(*arrays, **kwargs)
    if isinstance(res, tuple):
        return tuple(wrap(np.asarray(r)) for r in res)
    return res if out is not None or res is None else wrap(np.asarray(res))


Tensor.__array_ufunc__ = __array_ufunc__

_NO = object()


def _numpy_keywords(meth):
    """meth (a reduction taking dim/keepdim) also taking NumPy's axis/keepdims/dtype/out/ddof,
    which np.sum(t), np.mean(t, axis=0), np.std(t) ... pass to the Tensor's method."""
    @functools.wraps(meth)
    def f(self, *args, axis=_NO, keepdims=_NO, out=None, ddof=_NO, **kwargs):
        if out is not None:
            raise TypeError(f"{meth.__name__}(): out= is not supported on a Tensor")
        if axis is not _NO:
            kwargs["dim"] = axis
        if keepdims is not _NO:
            kwargs["keepdim"] = keepdims
        if ddof is not _NO:
            kwargs["correction"] = ddof
        if meth.__name__ not in ("sum", "mean", "prod") and "dtype" in kwargs:
            dtype = kwargs.pop("dtype")           # NumPy passes dtype=None to std and var
            if dtype is not None:
                self = self.to(dtype)
        return meth(self, *args, **kwargs)
    return f


for _name in ["sum", "mean", "prod", "var", "std", "max", "min", "amax", "amin", "argmax",
              "argmin", "all", "any"]:
    _m = getattr(Tensor, _name)
    _m.__name__ = _name
    setattr(Tensor, _name, _numpy_keywords(_m))
