"""`ops:`: every facade function and Tensor method that PyTorch has under the same name,
run under torch and functrans from the same NumPy inputs (tests/oracle/oracle.py): values,
dtypes, shapes, grad_fn names, gradients on float64 inputs with ties, signed zeros, kinks
and infinities, keyword arguments, integer/bool inputs and type promotion, broadcasting,
indexing, creation functions and errors.

Each case is `ops:<name>:<variant>`, declared at import time in SPECS. A case is
`fn(lib, *tensors)` with its NumPy inputs and `facade` keyword arguments. Random creation
functions are compared on shape and dtype only (their streams differ on purpose)."""
from __future__ import annotations

import copy

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import oracle
from oracle import facade, special_values

torch = oracle.torch

SPECS: dict = {}        # case id -> (fn, inputs, facade keyword arguments)


# torch builds these from other ops, so their grad_fn is the last op of its decomposition
# (ViewBackward0, MulBackward0, ...); ours names the op. Cases compare values, dtypes and
# gradients without the name; `ops:<name>:grad_fn` shows the difference.
DECOMPOSED = {"inner", "outer", "ger", "einsum", "repeat_interleave"}


def _spec(case_id, fn, *inputs, **kw):
    assert case_id.startswith("ops:") and case_id not in SPECS, case_id
    _, op, variant = (case_id + ":").split(":")[:3]
    if op in DECOMPOSED and variant != "grad_fn":
        kw.setdefault("grad_fn", False)
    SPECS[case_id] = (fn, inputs, kw)


spec = _spec


R = np.random.default_rng(0)
# float64 inputs: ties, signed zeros, kinks at 0 and +-1, infinities
X = special_values(R, (3, 4), kinds=("normal", "ties", "zeros", "inf"))
XF = special_values(R, (3, 4))                       # finite, with ties and zeros
Y = special_values(R, (3, 4))
Y[0, :2] = XF[0, :2]                                 # ties between the two operands
YB = special_values(R, (4,))                         # broadcasts against (3, 4)
X32 = R.standard_normal((3, 4)).astype(np.float32)
I64 = R.integers(-5, 6, (3, 4))
I32 = R.integers(-5, 6, (3, 4)).astype(np.int32)
I64NZ = np.where(I64 == 0, 3, I64)
B = R.random((3, 4)) < 0.5
S0 = np.array(1.5)                                   # a 0-dim float64 tensor
UNIT = np.array([-1.0, -0.5, -0.0, 0.0, 0.5, 1.0, 2.0, -2.0, np.inf, -np.inf, 0.3, 0.3])
POS = np.array([0.0, 0.5, 1.0, 2.0, np.inf, 0.25, 3.0, 1e-3, 4.0, 4.0, 0.7, 9.0])
TIES = np.array([[1.0, 3.0, 3.0, -2.0], [0.0, -0.0, 0.0, 0.0], [2.0, 1.0, 2.0, 2.0]])

# ---------------------------------------------------------------------------------------
# unary elementwise
UNARY = ["abs", "absolute", "acos", "arccos", "asin", "arcsin", "atan", "arctan", "ceil",
         "cos", "cosh", "erf", "exp", "exp2", "expm1", "floor", "frac", "log", "log10",
         "log1p", "log2", "neg", "negative", "reciprocal", "round", "rsqrt", "sigmoid", "sign",
         "sgn", "sin", "sinh", "sqrt", "square", "tan", "tanh", "trunc", "relu", "isnan",
         "isinf", "isfinite", "logical_not", "conj", "conj_physical", "resolve_conj"]
INPLACE = {"abs", "acos", "asin", "atan", "ceil", "cos", "cosh", "erf", "exp", "exp2", "expm1",
           "floor", "frac", "log", "log10", "log1p", "log2", "neg", "reciprocal", "round",
           "rsqrt", "sigmoid", "sign", "sin", "sinh", "sqrt", "square", "tan", "tanh",
           "trunc", "relu"}

for name in UNARY:
    spec(f"ops:{name}:f64", lambda lib, x, n=name: getattr(lib, n)(x), X)
    spec(f"ops:{name}:unit", lambda lib, x, n=name: getattr(lib, n)(x), UNIT)
    spec(f"ops:{name}:method", lambda lib, x, n=name: getattr(x, n)(), X32)
    spec(f"ops:{name}:int", lambda lib, x, n=name: getattr(lib, n)(x), I64)
    spec(f"ops:{name}:bool", lambda lib, x, n=name: getattr(lib, n)(x), B)
    if name in INPLACE:
        spec(f"ops:{name}_:inplace",
             lambda lib, x, n=name: getattr(x * 1.0, n + "_")(), XF)
spec("ops:fix:method", lambda lib, x: x.fix(), X)
spec("ops:bitwise_not:int", lambda lib, x: x.bitwise_not(), I64)
spec("ops:bitwise_not:bool", lambda lib, x: x.bitwise_not(), B)
spec("ops:__invert__:bool", lambda lib, x: ~x, B)
spec("ops:__neg__:f64", lambda lib, x: -x, X)
spec("ops:__pos__:f64", lambda lib, x: +x, X)
spec("ops:__abs__:f64", lambda lib, x: abs(x), X)
spec("ops:round:decimals", lambda lib, x: lib.round(x, decimals=1), XF * 3.14159)
spec("ops:round:half", lambda lib, x: lib.round(x), np.array([0.5, 1.5, 2.5, -0.5, -1.5]))
# half precision: values only (a float16 backward rounds differently per kernel)
spec("ops:sigmoid:f16", lambda lib, x: x.half().sigmoid(), X32, backward=False)

# complex parts
C = (R.standard_normal((2, 3)) + 1j * R.standard_normal((2, 3)))
for name in ("real", "imag", "angle", "conj", "conj_physical", "resolve_conj", "abs", "sgn"):
    spec(f"ops:{name}:complex", lambda lib, x, n=name: getattr(lib, n)(x), C)
spec("ops:angle:f64", lambda lib, x: lib.angle(x), X)
spec("ops:angle:int", lambda lib, x: lib.angle(x), I64)
spec("ops:real:f64", lambda lib, x: lib.real(x), X)
spec("ops:imag:f64", lambda lib, x: lib.imag(x), X)

# ---------------------------------------------------------------------------------------
# binary elementwise
ARITH = ["add", "sub", "subtract", "mul", "multiply", "div", "divide", "true_divide", "pow",
         "maximum", "minimum", "atan2", "arctan2", "fmod", "remainder", "floor_divide"]
COMPARE = ["eq", "ne", "lt", "le", "gt", "ge", "greater", "greater_equal", "less",
           "less_equal", "not_equal"]
LOGICAL = ["logical_and", "logical_or", "logical_xor"]
# torch has no derivative for floor_divide (grad_fn NotImplemented, backward raises); ours is
# 0 as floor's: values and dtypes here, the derivative in `ops:floor_divide:grad`
NO_GRAD = {"floor_divide": {"grad_fn": False, "backward": False}}
# torch takes only a Tensor as `other` of these; ours also a number: `ops:<name>:number_other`
TENSOR_ONLY = {"maximum", "minimum", "atan2", "arctan2", "logical_and", "logical_or",
               "logical_xor"}


def _binary_spec(name):
    extra = NO_GRAD.get(name, {})

    def spec(case_id, fn, *inputs, **kw):
        _spec(case_id, fn, *inputs, **{**kw, **extra})
    return spec


for name in ARITH + COMPARE + LOGICAL:
    spec = _binary_spec(name)  # noqa: F811  (the op's extra keywords on every case)
    f = lambda lib, x, y, n=name: getattr(lib, n)(x, y)  # noqa: E731
    spec(f"ops:{name}:f64", f, XF, Y)
    spec(f"ops:{name}:broadcast", f, XF, YB)
    spec(f"ops:{name}:special", f, X, np.flip(X, 0).copy())
    spec(f"ops:{name}:method", lambda lib, x, y, n=name: getattr(x, n)(y), X32, X32[::-1].copy())
    spec(f"ops:{name}:int", f, I64, I64NZ)
    spec(f"ops:{name}:int32_int64", f, I32, I64NZ)
    spec(f"ops:{name}:int_float", f, I64, X32)
    # torch's backward formulas square the float32 operand in float32 (atan2's x*x + y*y):
    # float32's tolerance for the float64 gradient
    spec(f"ops:{name}:f32_f64", f, X32, XF, rtol=2e-5, atol=1e-6)
    spec(f"ops:{name}:bool", f, B, B[::-1].copy())
    spec(f"ops:{name}:bool_int", f, B, I64NZ)
    # the result is float32 (a 0-dim operand does not promote): the 0-dim float64 input's
    # gradient is a float32 reduction, so float32's tolerance
    spec(f"ops:{name}:f32_0dim_f64", f, X32, S0, rtol=2e-5, atol=1e-6)
    spec(f"ops:{name}:int_0dim_f64", f, I64, S0)
    if name in TENSOR_ONLY:
        spec(f"ops:{name}:number_other", lambda lib, x, n=name: getattr(lib, n)(x, 2), X32)
    else:
        spec(f"ops:{name}:scalar", lambda lib, x, n=name: getattr(lib, n)(x, 2), X32)
        spec(f"ops:{name}:float_scalar", lambda lib, x, n=name: getattr(lib, n)(x, 0.5), I64)
    spec(f"ops:{name}:mismatch", f, XF, np.ones((3, 5)),
         error=r"size of tensor a \(4\) must match the size of tensor b \(5\)")
spec = _spec
spec("ops:floor_divide:grad", lambda lib, x, y: lib.floor_divide(x, y), XF, YB + 3)
spec("ops:remainder:number_first_grad", lambda lib, x: lib.remainder(5.0, x), YB + 3)

# promotion across the dtype lattice
U8 = np.array([0, 1, 200, 255], np.uint8)
I8 = np.array([-128, -1, 0, 127], np.int8)
F16 = np.array([0.5, -1.5, 1000.0, 3e-3], np.float16)
spec("ops:add:uint8_int8", lambda lib, x, y: x + y, U8, I8)
spec("ops:add:uint8_overflow", lambda lib, x: x + 100, U8)
spec("ops:mul:uint8_bool", lambda lib, x, y: x * y, U8, np.array([True, False, True, True]))
spec("ops:add:f16_f32", lambda lib, x, y: x + y, F16, X32[0], backward=False)
spec("ops:add:f16_int", lambda lib, x, y: x + y, F16, I8, backward=False)
spec("ops:add:f16_float_scalar", lambda lib, x: x + 1.5, F16, backward=False)
spec("ops:add:int8_int_scalar", lambda lib, x: x + 1000, I8)
spec("ops:mul:bool_float_scalar", lambda lib, x: x * 2.5, B)
spec("ops:add:complex_f64", lambda lib, x, y: x + y, C[0, :2].copy(), XF[0, :2].copy())
spec("ops:mul:f32_complex_scalar", lambda lib, x: x * 1j, X32)
spec("ops:add:0dim_int_0dim_f32", lambda lib, x, y: x + y, np.array(3), np.array(2.5, np.float32))
spec("ops:add:int_0dim_f64_tensor", lambda lib, x, y: x + y, I32, S0)
spec("ops:div:int_int", lambda lib, x, y: x / y, I64, I64NZ)
spec("ops:div:bool_bool", lambda lib, x, y: x / y, B, np.ones_like(B))

# kinks of binary ops at their interesting points
Z2 = np.array([0.0, -0.0, 0.0, 1.0, -1.0, 0.0, 2.0, np.inf, -np.inf, 0.0, 3.0])
W2 = np.array([0.0, 0.0, -0.0, 0.0, 0.0, -1.0, 2.0, 1.0, 1.0, np.inf, 3.0])
for name in ("atan2", "maximum", "minimum", "pow", "div", "fmod", "remainder", "mul"):
    spec(f"ops:{name}:kinks", lambda lib, x, y, n=name: getattr(lib, n)(x, y), Z2, W2)
spec("ops:pow:zero_base", lambda lib, x: lib.pow(x, 2.0), np.array([0.0, -0.0, 1.0, -2.0]))
spec("ops:pow:zero_base_half", lambda lib, x: lib.pow(x, 0.5), np.array([0.0, 1.0, 4.0]))
spec("ops:pow:zero_exp", lambda lib, x: lib.pow(x, 0), np.array([0.0, 1.0, -2.0]))
spec("ops:pow:neg_base_int_exp", lambda lib, x: lib.pow(x, 3), np.array([-2.0, -0.0, 1.5]))
spec("ops:pow:scalar_base", lambda lib, x: lib.pow(2.0, x), X)
spec("ops:pow:int_neg_exp", lambda lib, x: lib.pow(x, -1), I64NZ,
     error="Integers to negative integer powers are not allowed")
spec("ops:pow:int_tensor", lambda lib, x: lib.pow(x, x.abs()), I64)
spec("ops:add:alpha", lambda lib, x, y: lib.add(x, y, alpha=2), XF, Y)
spec("ops:sub:alpha", lambda lib, x, y: lib.sub(x, y, alpha=0.5), XF, Y)
spec("ops:sub:bool_error", lambda lib, x, y: lib.sub(x, y), B, B,
     error="Subtraction, the `-` operator, with two bool tensors is not supported")
spec("ops:div:rounding_mode_floor", lambda lib, x, y: lib.div(x, y, rounding_mode="floor"),
     XF, Y)
spec("ops:div:rounding_mode_trunc", lambda lib, x, y: lib.div(x, y, rounding_mode="trunc"),
     XF, Y)
spec("ops:div:int_floor", lambda lib, x, y: lib.div(x, y, rounding_mode="floor"), I64, I64NZ)
spec("ops:div:int_by_zero", lambda lib, x: x / 0, I64)
spec("ops:remainder:scalar_first", lambda lib, x: lib.remainder(5.0, x), YB, grad_fn=False,
     backward=False)             # torch: no derivative w.r.t. the divisor of a number
spec("ops:atan2:zeros", lambda lib, y, x: lib.atan2(y, x), np.zeros(3), np.zeros(3))

# operators, reflected and in place
OPS = {"__add__": "+", "__sub__": "-", "__mul__": "*", "__truediv__": "/", "__pow__": "**",
       "__floordiv__": "//", "__mod__": "%", "__eq__": "==", "__ne__": "!=", "__lt__": "<",
       "__le__": "<=", "__gt__": ">", "__ge__": ">="}
NO_GRAD_OPS = {"__floordiv__", "__rfloordiv__", "__rmod__"}       # as floor_divide above
for dname, sym in OPS.items():
    kw = NO_GRAD["floor_divide"] if dname in NO_GRAD_OPS else {}
    spec(f"ops:{dname}:f64", eval(f"lambda lib, x, y: x {sym} y"), XF, YB, **kw)
    spec(f"ops:{dname}:int_float", eval(f"lambda lib, x, y: x {sym} y"), I64NZ, X32, **kw)
    spec(f"ops:{dname}:scalar", eval(f"lambda lib, x: x {sym} 3"), I64NZ, **kw)
    spec(f"ops:{dname}:float_scalar", eval(f"lambda lib, x: x {sym} 1.5"), X32, **kw)
    if not dname.startswith(("__e", "__n", "__l", "__g")):
        r = "__r" + dname[2:]
        kw = NO_GRAD["floor_divide"] if r in NO_GRAD_OPS else {}
        spec(f"ops:{r}:scalar", eval(f"lambda lib, x: 2 {sym} x"), X32, **kw)
        spec(f"ops:{r}:int", eval(f"lambda lib, x: 2 {sym} x"), I64NZ, **kw)
        spec(f"ops:{r}:float_int", eval(f"lambda lib, x: 1.5 {sym} x"), I64NZ, **kw)
for dname, sym in (("__and__", "&"), ("__or__", "|"), ("__xor__", "^")):
    spec(f"ops:{dname}:bool", eval(f"lambda lib, x, y: x {sym} y"), B, B[::-1].copy())
    spec(f"ops:{dname}:int", eval(f"lambda lib, x, y: x {sym} y"), I64, I64NZ)
    r = "__r" + dname[2:]
    spec(f"ops:{r}:bool", eval(f"lambda lib, x: True {sym} x"), B)
    spec(f"ops:{dname}:float", eval(f"lambda lib, x, y: x {sym} y"), XF, Y,
         error="not implemented for 'Double'")
spec("ops:__matmul__:f64", lambda lib, x, y: x @ y, XF, Y.T.copy())
spec("ops:__rmatmul__:f64", lambda lib, x, y: y.T.__rmatmul__(x), XF, Y)


def _inplace(n, *, scalar=False):
    def f(lib, x, y):
        z = x * 1.0
        r = getattr(z, n)(2.0 if scalar else y)
        return r, z
    return f


for n in ("add_", "sub_", "mul_", "div_", "subtract_", "multiply_", "divide_", "true_divide_",
          "pow_", "atan2_", "fmod_", "remainder_"):
    spec(f"ops:{n}:inplace", _inplace(n), XF, YB)
    spec(f"ops:{n}:{'number_other' if n[:-1] in TENSOR_ONLY else 'scalar'}",
         _inplace(n, scalar=True), XF, YB)
for dname, sym in (("__iadd__", "+="), ("__isub__", "-="), ("__imul__", "*="),
                   ("__itruediv__", "/="), ("__ipow__", "**=")):
    src = f"def f(lib, x, y):\n    z = x * 1.0\n    z {sym} y\n    return z"
    ns: dict = {}
    exec(src, ns)
    spec(f"ops:{dname}:f64", ns["f"], XF, YB)
spec("ops:add_:int_into_float", lambda lib, x, y: (x * 1.0).add_(y), XF, I64)
spec("ops:add_:float_into_int", lambda lib, x, y: x.clone().add_(y), I64, XF,
     error="result type Double can't be cast to the desired output type Long")
spec("ops:add_:broadcast_self", lambda lib, x, y: (y * 1.0).add_(x), XF, YB,
     error="doesn't match the broadcast shape")
spec("ops:mul_:leaf", lambda lib, x: x.mul_(2.0), XF,
     error="a leaf Variable that requires grad is being used in an in-place operation")
spec("ops:logical_and_:inplace", lambda lib, x, y: x.clone().logical_and_(y), B, B[::-1].copy())

# ternary
spec("ops:lerp:f64", lambda lib, x, y, w: lib.lerp(x, y, w), XF, Y, np.abs(YB))
spec("ops:lerp:scalar_weight", lambda lib, x, y: x.lerp(y, 0.25), XF, Y)
spec("ops:lerp:weight_gt_half", lambda lib, x, y: x.lerp(y, 0.75), XF, Y)
spec("ops:lerp_:inplace", lambda lib, x, y: (x * 1.0).lerp_(y, 0.3), XF, Y)
spec("ops:addcmul:f64", lambda lib, x, a, b: lib.addcmul(x, a, b, value=0.5), XF, Y, YB)
spec("ops:addcdiv:f64", lambda lib, x, a, b: lib.addcdiv(x, a, b, value=2), XF, Y, YB + 3)
spec("ops:addcmul_:inplace", lambda lib, x, a, b: (x * 1.0).addcmul_(a, b), XF, Y, YB)
spec("ops:addcdiv_:inplace", lambda lib, x, a, b: (x * 1.0).addcdiv_(a, b), XF, Y, YB + 3)
spec("ops:addcmul:int", lambda lib, x, a, b: x.addcmul(a, b), I64, I64, I64)
spec("ops:isclose:f64", lambda lib, x, y: lib.isclose(x, y), X, X + 1e-9)
spec("ops:isclose:equal_nan", lambda lib, x: lib.isclose(x, x * 0.0 + x, equal_nan=True), X)
spec("ops:isclose:int", lambda lib, x, y: x.isclose(y), I64, I64NZ)
spec("ops:allclose:f64", lambda lib, x, y: lib.allclose(x, y, rtol=1e-3), XF, XF * 1.0001)
spec("ops:allclose:method", lambda lib, x, y: x.allclose(y), XF, Y)
spec("ops:equal:f64", lambda lib, x, y: (lib.equal(x, y), lib.equal(x, x)), XF, Y)
spec("ops:equal:shapes", lambda lib, x, y: lib.equal(x, y), XF, YB)
spec("ops:equal:dtypes", lambda lib, x, y: x.equal(y), I64, I64.astype(np.float64))

# ---------------------------------------------------------------------------------------
# clamp
for name in ("clamp", "clip"):
    spec(f"ops:{name}:bounds", lambda lib, x, n=name: getattr(lib, n)(x, -0.5, 1.0), UNIT)
    spec(f"ops:{name}:min_only", lambda lib, x, n=name: getattr(lib, n)(x, min=0.0), X)
    spec(f"ops:{name}:max_only", lambda lib, x, n=name: getattr(x, n)(max=0.5), X)
    spec(f"ops:{name}:tensor_bounds",
         lambda lib, x, lo, hi, n=name: getattr(lib, n)(x, lo, hi), UNIT, np.full(12, -0.5),
         np.full(12, 0.5))
    spec(f"ops:{name}:int", lambda lib, x, n=name: getattr(lib, n)(x, -2, 3), I64)
    spec(f"ops:{name}:int_float_bounds", lambda lib, x, n=name: getattr(lib, n)(x, -2.5, 3),
         I64)
    spec(f"ops:{name}:inverted", lambda lib, x, n=name: getattr(lib, n)(x, 1.0, -1.0), UNIT)
    spec(f"ops:{name}_:inplace", lambda lib, x, n=name: getattr(x * 1.0, n + "_")(-0.5, 0.5),
         UNIT)
    spec(f"ops:{name}:none", lambda lib, x, n=name: getattr(lib, n)(x), X,
         error="At least one of 'min' or 'max' must not be None")
NANS = np.array([np.nan, 1.0, -2.0, np.nan, 0.0, np.inf])
spec("ops:clamp:nan", lambda lib, x: lib.clamp(x, -1.0, 1.0), NANS)
spec("ops:maximum:nan", lambda lib, x, y: lib.maximum(x, y), NANS, NANS[::-1].copy())
spec("ops:minimum:nan", lambda lib, x, y: lib.minimum(x, y), NANS, NANS[::-1].copy())
spec("ops:where:nan_branch", lambda lib, x: lib.where(x > 0, x, 0.0), NANS)
spec("ops:relu:nan", lambda lib, x: lib.relu(x), NANS)
spec("ops:abs:nan", lambda lib, x: lib.abs(x), NANS)
INFS = np.array([np.nan, 1.0, -np.inf, -2.0, np.inf, 0.5])
spec("ops:nan_to_num", lambda lib, x: lib.nan_to_num(x), INFS)
spec("ops:nan_to_num:values", lambda lib, x: x.nan_to_num(nan=1.5, posinf=9.0, neginf=-7.0),
     INFS)
spec("ops:nan_to_num:f32", lambda lib, x: lib.nan_to_num(x.float(), posinf=2.0), INFS)
spec("ops:nan_to_num_:inplace", lambda lib, x: (x * 1.0).nan_to_num_(nan=0.25), INFS)
spec("ops:clamp_min:f64", lambda lib, x: lib.clamp_min(x, 0.5), UNIT)
spec("ops:clamp_max:f64", lambda lib, x: lib.clamp_max(x, 0.5), UNIT)
spec("ops:clamp_min:tensor", lambda lib, x, y: lib.clamp_min(x, y), XF, Y)
spec("ops:clamp_max:tensor", lambda lib, x, y: x.clamp_max(y), XF, Y)
spec("ops:clamp_min_:inplace", lambda lib, x: (x * 1.0).clamp_min_(0.0), UNIT)
spec("ops:clamp_max_:inplace", lambda lib, x: (x * 1.0).clamp_max_(0.0), UNIT)

# ---------------------------------------------------------------------------------------
# reductions
RED = ["sum", "mean", "prod", "amax", "amin", "max", "min", "logsumexp", "std", "var",
       "norm", "argmax", "argmin", "all", "any", "count_nonzero"]
for name in RED:
    f = lambda lib, x, n=name: getattr(lib, n)(x)  # noqa: E731
    if name != "logsumexp":
        spec(f"ops:{name}:all", f, XF)
        spec(f"ops:{name}:ties", f, TIES)
        spec(f"ops:{name}:inf", f, X)
    spec(f"ops:{name}:dim", lambda lib, x, n=name: getattr(lib, n)(x, 1), TIES)
    spec(f"ops:{name}:dim0", lambda lib, x, n=name: getattr(x, n)(0), TIES)
    if name != "count_nonzero":
        spec(f"ops:{name}:keepdim", lambda lib, x, n=name: getattr(lib, n)(x, 1, keepdim=True),
             TIES)
        spec(f"ops:{name}:neg_dim", lambda lib, x, n=name: getattr(lib, n)(x, dim=-1), XF)
    spec(f"ops:{name}:int", lambda lib, x, n=name: getattr(lib, n)(x, 0), I64)
    spec(f"ops:{name}:bool", lambda lib, x, n=name: getattr(lib, n)(x, 0), B)
    spec(f"ops:{name}:0dim", lambda lib, x, n=name: getattr(lib, n)(x), S0)
    spec(f"ops:{name}:empty", lambda lib, x, n=name: getattr(lib, n)(x, 0), np.zeros((0, 3)))
    spec(f"ops:{name}:bad_dim", lambda lib, x, n=name: getattr(lib, n)(x, dim=2), XF,
         error=r"Dimension out of range \(expected to be in range of \[-2, 1\], but got 2\)")
for name in ("sum", "mean", "amax", "amin", "std", "var", "norm", "logsumexp",
             "count_nonzero"):
    spec(f"ops:{name}:dims", lambda lib, x, n=name: getattr(lib, n)(x, (0, 1)), TIES)
spec("ops:sum:dtype", lambda lib, x: lib.sum(x, dtype=lib.float64), X32)
spec("ops:sum:int_dtype", lambda lib, x: x.sum(dtype=lib.float32), I64)
spec("ops:sum:bool_all", lambda lib, x: x.sum(), B)
spec("ops:sum:int32", lambda lib, x: x.sum(), I32)
spec("ops:sum:empty_dims", lambda lib, x: lib.sum(x, dim=()), XF)
spec("ops:mean:dtype", lambda lib, x: lib.mean(x, 0, dtype=lib.float64), X32)
spec("ops:mean:int_error", lambda lib, x: lib.mean(x), I64,
     error="mean.*could not infer output dtype")
spec("ops:prod:zeros", lambda lib, x: lib.prod(x, 1),
     np.array([[0.0, 2.0, 3.0], [0.0, 0.0, 2.0], [1.0, -0.0, 4.0], [1.5, 2.0, -1.0]]))
spec("ops:prod:zeros_all", lambda lib, x: lib.prod(x), np.array([0.0, 2.0, 3.0]))
spec("ops:prod:two_zeros_all", lambda lib, x: lib.prod(x), np.array([0.0, 2.0, 0.0]))
spec("ops:prod:dtype", lambda lib, x: lib.prod(x, dtype=lib.float64), X32)
spec("ops:prod:int32", lambda lib, x: x.prod(1), I32)
spec("ops:max:binary", lambda lib, x, y: lib.max(x, y), XF, Y)
spec("ops:min:binary", lambda lib, x, y: lib.min(x, y), XF, Y)
spec("ops:max:dim_named", lambda lib, x: tuple(lib.max(x, dim=1)), TIES)
spec("ops:max:fields", lambda lib, x: (x.max(1).values, x.max(1).indices), TIES)
spec("ops:min:fields", lambda lib, x: (x.min(0).values, x.min(0).indices), TIES)
spec("ops:max:nan", lambda lib, x: (lib.max(x), lib.max(x, 0)),
     np.array([[1.0, np.nan], [2.0, 0.0]]))
spec("ops:amax:nan", lambda lib, x: lib.amax(x, 0), np.array([[1.0, np.nan], [2.0, 0.0]]))
spec("ops:argmax:nan", lambda lib, x: lib.argmax(x), np.array([1.0, np.nan, 2.0]))
spec("ops:std:correction", lambda lib, x: lib.std(x, 1, correction=0), XF)
spec("ops:var:unbiased", lambda lib, x: lib.var(x, 0, unbiased=False), XF)
spec("ops:var:single", lambda lib, x: lib.var(x, 0), np.ones((1, 3)))
spec("ops:std:constant", lambda lib, x: lib.std(x, 1), np.ones((2, 3)))
spec("ops:std:constant_all", lambda lib, x: x.std(), np.ones(3))      # issue 32: gradient 0
spec("ops:std:int_error", lambda lib, x: lib.std(x), I64,
     error="std and var only support floating point and complex dtypes")
for p in (1, 2, 3, float("inf"), -float("inf"), 0, 0.5, "fro"):
    spec(f"ops:norm:p={p}", lambda lib, x, p=p: lib.norm(x, p), TIES)
    if p != "fro":
        spec(f"ops:norm:p={p}_dim", lambda lib, x, p=p: x.norm(p, dim=1, keepdim=True), TIES)
spec("ops:norm:zero", lambda lib, x: lib.norm(x), np.zeros(3))
spec("ops:norm:nuc", lambda lib, x: lib.norm(x, "nuc"), XF, grad_fn=False)
spec("ops:norm:nuc_grad_fn", lambda lib, x: lib.norm(x, "nuc"), XF)
spec("ops:norm:int_error", lambda lib, x: lib.norm(x), I64,
     error="Expected a floating point or complex tensor as input. Got Long")
spec("ops:norm:dtype", lambda lib, x: lib.norm(x, dtype=lib.float64), X32)
spec("ops:logsumexp:inf", lambda lib, x: lib.logsumexp(x, 1),
     np.array([[np.inf, 1.0], [-np.inf, -np.inf], [0.0, 0.0]]))
spec("ops:logsumexp:int_dim1", lambda lib, x: lib.logsumexp(x, 1), I64)
spec("ops:all:float", lambda lib, x: (lib.all(x), x.any(1)), XF)
spec("ops:count_nonzero:dims_f64", lambda lib, x: lib.count_nonzero(x, dim=(0, 1)), XF)
spec("ops:argmax:keepdim_none", lambda lib, x: lib.argmax(x, keepdim=True), TIES)
spec("ops:all:dim_keepdim", lambda lib, x: (lib.all(x, 1, keepdim=True), x.any(dim=0)), B)
spec("ops:any:mask_neg_dim", lambda lib, x: lib.any(x > 0.5, -1), XF)
spec("ops:flatten:start_and_end", lambda lib, x: lib.flatten(x, 0, 1), XF.reshape(2, 2, 3))
spec("ops:topk:unsorted_values", lambda lib, x: lib.sort(lib.topk(x, 2, sorted=False).values)
     .values, R.standard_normal((3, 5)))             # distinct values: see ops:topk:ties_values
spec("ops:sort:descending_nan", lambda lib, x: lib.sort(x, descending=True).values,
     np.array([1.0, np.nan, -1.0, np.inf]))
spec("ops:narrow:tensor_start", lambda lib, x: x.narrow(1, lib.tensor(1), 2), XF)

# cumulative
CZ = np.array([[1.0, 0.0, 2.0, 3.0], [0.0, 0.0, 2.0, -1.0], [2.0, 3.0, -0.0, 0.5]])
for name in ("cumsum", "cumprod"):
    spec(f"ops:{name}:f64", lambda lib, x, n=name: getattr(lib, n)(x, 1), XF)
    spec(f"ops:{name}:zeros", lambda lib, x, n=name: getattr(lib, n)(x, 1), CZ)
    spec(f"ops:{name}:zeros_dim0", lambda lib, x, n=name: getattr(x, n)(0), CZ)
    spec(f"ops:{name}:inf", lambda lib, x, n=name: getattr(lib, n)(x, -1), X)
    spec(f"ops:{name}:int", lambda lib, x, n=name: getattr(lib, n)(x, 0), I32)
    spec(f"ops:{name}:bool", lambda lib, x, n=name: getattr(lib, n)(x, 0), B)
    spec(f"ops:{name}:dtype", lambda lib, x, n=name: getattr(lib, n)(x, 0, dtype=lib.float64),
         X32)
    spec(f"ops:{name}:0dim", lambda lib, x, n=name: getattr(lib, n)(x, 0), S0)

# softmax
for name in ("softmax", "log_softmax"):
    spec(f"ops:{name}:f64", lambda lib, x, n=name: getattr(lib, n)(x, 1), XF)
    spec(f"ops:{name}:dim0", lambda lib, x, n=name: getattr(x, n)(0), TIES)
    spec(f"ops:{name}:inf", lambda lib, x, n=name: getattr(lib, n)(x, -1),
         np.array([[np.inf, 1.0], [-np.inf, 0.0], [-np.inf, -np.inf]]))
    spec(f"ops:{name}:dtype", lambda lib, x, n=name: getattr(lib, n)(x, 1, dtype=lib.float64),
         X32)
    spec(f"ops:{name}:int", lambda lib, x, n=name: getattr(lib, n)(x, 1), I64)

# sorting
SORTIN = np.array([[3.0, 1.0, 3.0, -0.0, 0.0, 1.0], [2.0, 2.0, 2.0, np.inf, -np.inf, 0.5]])
spec("ops:sort:ties", lambda lib, x: tuple(lib.sort(x, stable=True)), SORTIN)
spec("ops:sort:descending", lambda lib, x: tuple(x.sort(descending=True, stable=True)), SORTIN)
spec("ops:sort:dim0", lambda lib, x: tuple(lib.sort(x, dim=0, stable=True)), SORTIN)
spec("ops:sort:values", lambda lib, x: lib.sort(x).values, SORTIN)
spec("ops:sort:int", lambda lib, x: tuple(lib.sort(x, stable=True)), I64)
spec("ops:sort:bool", lambda lib, x: tuple(lib.sort(x, stable=True)), B)
spec("ops:sort:nan", lambda lib, x: lib.sort(x).values, np.array([1.0, np.nan, -1.0]))
spec("ops:argsort:ties", lambda lib, x: lib.argsort(x, stable=True), SORTIN)
spec("ops:argsort:descending", lambda lib, x: x.argsort(dim=1, descending=True, stable=True),
     SORTIN)
spec("ops:argsort:int", lambda lib, x: lib.argsort(x, dim=0, stable=True), I64)
spec("ops:topk:distinct", lambda lib, x: tuple(lib.topk(x, 2)), XF * np.arange(1, 13).reshape(
    3, 4))
spec("ops:topk:ties_values", lambda lib, x: lib.topk(x, 3).values, SORTIN)
spec("ops:topk:smallest", lambda lib, x: x.topk(2, dim=0, largest=False).values, XF)
spec("ops:topk:int", lambda lib, x: lib.topk(x, 2).values, I64)
spec("ops:topk:too_many", lambda lib, x: lib.topk(x, 7), SORTIN,
     error="selected index k out of range")
spec("ops:topk:fields", lambda lib, x: lib.topk(x, 1).indices, np.array([[1.0, 2.0, 0.5]]))

# ---------------------------------------------------------------------------------------
# shapes and views
A = R.standard_normal((2, 3, 4))
SH = [
    ("reshape", lambda lib, x: lib.reshape(x, (4, -1)), XF),
    ("reshape:method_args", lambda lib, x: x.reshape(6, 2), XF),
    ("reshape:bad", lambda lib, x: x.reshape(5, -1), XF),
    ("flatten", lambda lib, x: lib.flatten(x), A),
    ("flatten:dims", lambda lib, x: x.flatten(1), A),
    ("flatten:0dim", lambda lib, x: lib.flatten(x), S0),
    ("unflatten", lambda lib, x: lib.unflatten(x, 1, (2, 2)), XF),
    ("unflatten:neg", lambda lib, x: x.unflatten(-1, (-1, 2)), XF),
    ("squeeze", lambda lib, x: lib.squeeze(x), A[:1, :, None]),
    ("squeeze:dim", lambda lib, x: x.squeeze(0), A[:1]),
    ("squeeze:noop", lambda lib, x: x.squeeze(1), A),
    ("squeeze:dims", lambda lib, x: lib.squeeze(x, (0, 2)), A[:1, :, :1]),
    ("unsqueeze", lambda lib, x: lib.unsqueeze(x, -1), XF),
    ("unsqueeze:method", lambda lib, x: x.unsqueeze(0), XF),
    ("permute", lambda lib, x: lib.permute(x, (2, 0, 1)), A),
    ("permute:method", lambda lib, x: x.permute(1, 2, 0), A),
    ("permute:bad", lambda lib, x: x.permute(0, 1), A),
    ("transpose", lambda lib, x: lib.transpose(x, 0, 2), A),
    ("transpose:method", lambda lib, x: x.transpose(-1, -2), A),
    ("swapaxes", lambda lib, x: lib.swapaxes(x, 0, 1), A),
    ("swapdims", lambda lib, x: x.swapdims(1, 2), A),
    ("moveaxis", lambda lib, x: lib.moveaxis(x, 0, -1), A),
    ("movedim", lambda lib, x: x.movedim((0, 1), (2, 0)), A),
    ("t", lambda lib, x: lib.t(x), XF),
    ("t:1d", lambda lib, x: x.t(), YB),
    ("t:3d", lambda lib, x: x.t(), A),
    ("T", lambda lib, x: x.T, XF),
    ("mT", lambda lib, x: x.mT, A),
    ("H", lambda lib, x: x.H, XF),
    ("flip", lambda lib, x: lib.flip(x, (0, 2)), A),
    ("flip:method", lambda lib, x: x.flip(1), A),
    ("fliplr", lambda lib, x: lib.fliplr(x), XF),
    ("flipud", lambda lib, x: x.flipud(), XF),
    ("roll", lambda lib, x: lib.roll(x, 1, 1), XF),
    ("roll:flat", lambda lib, x: x.roll(5), XF),
    ("roll:dims", lambda lib, x: lib.roll(x, (1, -1), (0, 1)), XF),
    ("narrow", lambda lib, x: lib.narrow(x, 1, 1, 2), XF),
    ("narrow:method", lambda lib, x: x.narrow(0, 0, 1), XF),
    ("select", lambda lib, x: lib.select(x, 1, -1), XF),
    ("select:method", lambda lib, x: x.select(0, 2), XF),
    ("chunk", lambda lib, x: lib.chunk(x, 3, 1), XF),
    ("chunk:uneven", lambda lib, x: x.chunk(2, 0), XF),
    ("split", lambda lib, x: lib.split(x, 3, 1), XF),
    ("split:sizes", lambda lib, x: x.split([1, 3], 1), XF),
    ("split:bad_sizes", lambda lib, x: x.split([1, 2], 1), XF),
    ("tensor_split", lambda lib, x: lib.tensor_split(x, 3, 1), XF),
    ("tensor_split:indices", lambda lib, x: x.tensor_split([1, 3], dim=1), XF),
    ("unbind", lambda lib, x: lib.unbind(x, 1), XF),
    ("unbind:method", lambda lib, x: x.unbind(), XF),
    ("diagonal", lambda lib, x: lib.diagonal(x), XF),
    ("diagonal:offset", lambda lib, x: x.diagonal(1), XF),
    ("diagonal:dims", lambda lib, x: lib.diagonal(x, -1, 1, 2), A),
    ("tril", lambda lib, x: lib.tril(x), XF),
    ("tril:offset", lambda lib, x: x.tril(-1), XF),
    ("triu", lambda lib, x: lib.triu(x, 1), XF),
    ("triu:batch", lambda lib, x: x.triu(), A),
    ("trace", lambda lib, x: lib.trace(x), XF),
    ("trace:int", lambda lib, x: lib.trace(x), I32),
    ("repeat_interleave", lambda lib, x: lib.repeat_interleave(x, 2), XF),
    ("repeat_interleave:dim", lambda lib, x: x.repeat_interleave(2, dim=1), XF),
    ("repeat_interleave:tensor",
     lambda lib, x: x.repeat_interleave(lib.tensor([1, 0, 2]), dim=0), XF),
    ("expand", lambda lib, x: x.expand(2, 3, 4), YB),
    ("expand:minus1", lambda lib, x: x.expand(2, -1, -1), XF),
    ("expand_as", lambda lib, x, y: x.expand_as(y), YB, XF),
    ("repeat", lambda lib, x: x.repeat(2, 1), XF),
    ("repeat:more_dims", lambda lib, x: x.repeat(2, 1, 2), XF),
    ("view", lambda lib, x: x.view(2, 6), XF),
    ("view:minus1", lambda lib, x: x.view(-1), XF),
    ("view_as", lambda lib, x, y: x.view_as(y), XF, XF.reshape(6, 2)),
    ("reshape_as", lambda lib, x, y: x.reshape_as(y), XF, XF.reshape(2, 6)),
    ("contiguous", lambda lib, x: x.t().contiguous(), XF),
    ("clone", lambda lib, x: lib.clone(x), XF),
    ("clone:method", lambda lib, x: x.clone(), I64),
    ("detach", lambda lib, x: x.detach(), XF),
    ("type_as", lambda lib, x, y: x.type_as(y), XF, I32),
    ("broadcast_tensors", lambda lib, x, y: lib.broadcast_tensors(x, y), XF[:, :1], YB),
    ("meshgrid", lambda lib, x, y: lib.meshgrid(x, y, indexing="ij"), YB, YB[:3]),
    ("meshgrid:xy", lambda lib, x, y: lib.meshgrid(x, y, indexing="xy"), YB, YB[:3]),
    ("cat", lambda lib, x, y: lib.cat([x, y], 0), XF, Y),
    ("cat:dim", lambda lib, x, y: lib.cat((x, y), dim=-1), XF, Y),
    ("cat:promote", lambda lib, x, y: lib.cat([x, y]), X32, I64),
    ("cat:int_bool", lambda lib, x, y: lib.cat([x, y]), I32, B),
    ("cat:empty_1d", lambda lib, x, y: lib.cat([x, y]), XF, np.zeros(0)),
    ("cat:mismatch", lambda lib, x, y: lib.cat([x, y], 0), XF, np.ones((3, 5))),
    ("concat", lambda lib, x, y: lib.concat([x, y], 1), XF, Y),
    ("stack", lambda lib, x, y: lib.stack([x, y]), XF, Y),
    ("stack:dim", lambda lib, x, y: lib.stack([x, y], dim=2), XF, Y),
    ("stack:promote", lambda lib, x, y: lib.stack([x, y], -1), I32, X32),
    ("stack:mismatch", lambda lib, x, y: lib.stack([x, y]), XF, YB),
    ("hstack", lambda lib, x, y: lib.hstack([x, y]), XF, Y),
    ("hstack:1d", lambda lib, x, y: lib.hstack([x, y]), YB, YB),
    ("vstack", lambda lib, x, y: lib.vstack([x, y]), XF, Y),
    ("vstack:1d", lambda lib, x, y: lib.vstack([x, y]), YB, YB),
]
for entry in SH:
    label, fn, *ins = entry
    name, _, variant = label.partition(":")
    spec(f"ops:{name}:{variant or 'f64'}", fn, *ins)     # "bad": both raise the same type
spec("ops:cat:mismatch_msg", lambda lib, x, y: lib.cat([x, y], 0), XF, np.ones((3, 5)),
     error=r"Sizes of tensors must match except in dimension 0. Expected size 4 but got "
           r"size 5 for tensor number 1 in the list")
spec("ops:stack:mismatch_msg", lambda lib, x, y: lib.stack([x, y]), XF, YB,
     error=r"stack expects each tensor to be equal size, but got \[3, 4\] at entry 0 and "
           r"\[4\] at entry 1")
spec("ops:reshape:bad_msg", lambda lib, x: x.reshape(5, -1), XF,
     error=r"shape '\[5, -1\]' is invalid for input of size 12")
spec("ops:view:bad_msg", lambda lib, x: x.view(5, 3), XF,
     error=r"shape '\[5, 3\]' is invalid for input of size 12")
spec("ops:expand:bad", lambda lib, x: x.expand(3, 5), XF,
     error=r"The expanded size of the tensor \(5\) must match the existing size \(4\) at "
           r"non-singleton dimension 1")
spec("ops:split:bad_sizes_msg", lambda lib, x: x.split([1, 2], 1), XF,
     error=r"split_with_sizes expects split_sizes to sum exactly to 4")

# ---------------------------------------------------------------------------------------
# indexing
IDX = {
    "int": lambda x: x[1],
    "neg_int": lambda x: x[-1, -2],
    "slice": lambda x: x[1:, ::2],
    "slice_neg": lambda x: x[:-1, -3:],
    "none": lambda x: x[None, :, None],
    "ellipsis": lambda x: x[..., 1],
    "ellipsis_none": lambda x: x[..., None],
    "int_slice": lambda x: x[0, 1:3],
    "empty_slice": lambda x: x[2:1],
}
for label, g in IDX.items():
    spec(f"ops:__getitem__:{label}", lambda lib, x, g=g: g(x), A)
spec("ops:__getitem__:bool_mask", lambda lib, x, m: x[m], XF, B)
spec("ops:__getitem__:bool_mask_rows", lambda lib, x, m: x[m], XF, np.array([True, False, True]))
spec("ops:__getitem__:bool_scalar", lambda lib, x: x[True], XF)
spec("ops:__getitem__:int_tensor", lambda lib, x, i: x[i], XF, np.array([2, 0, 2]))
spec("ops:__getitem__:int_tensor_neg", lambda lib, x, i: x[:, i], XF, np.array([-1, 0, -1]))
spec("ops:__getitem__:two_int_tensors", lambda lib, x, i, j: x[i, j], XF, np.array([0, 2, 2]),
     np.array([1, 1, 3]))
spec("ops:__getitem__:int_tensor_2d", lambda lib, x, i: x[i], XF, np.array([[0, 1], [2, 2]]))
spec("ops:__getitem__:list", lambda lib, x: x[[0, 2, 0]], XF)
spec("ops:__getitem__:mixed_adv", lambda lib, x, i: x[:, 1, i], A, np.array([3, 0]))
spec("ops:__getitem__:adv_split", lambda lib, x, i: x[i, :, i], A, np.array([1, 0]))
spec("ops:__getitem__:out_of_range", lambda lib, x: x[3], XF,
     error="index 3 is out of bounds for dimension 0 with size 3")
spec("ops:__getitem__:too_many", lambda lib, x: x[0, 0, 0], XF,
     error=r"too many indices for tensor of dimension 2")
spec("ops:__getitem__:int_of_int", lambda lib, x: x[1:, 2], I64)
spec("ops:__getitem__:0dim", lambda lib, x: x[...], S0)
spec("ops:__getitem__:negative_step", lambda lib, x: x[::-1], XF,
     error="step must be greater than zero")
spec("ops:__getitem__:mask_and_slice", lambda lib, x, m: x[m, 1:], XF,
     np.array([True, False, True]))
spec("ops:__getitem__:broadcast_indices", lambda lib, x, i, j: x[i, j], XF,
     np.array([[0], [2]]), np.array([1, 3, 3]))
spec("ops:__getitem__:int_tensor_0dim", lambda lib, x, i: x[i], XF, np.array(1))
spec("ops:__getitem__:bool_0dim", lambda lib, x, m: x[m], XF, np.array(True))
spec("ops:__getitem__:ellipsis_middle", lambda lib, x: x[0, ..., 1], A)
spec("ops:__getitem__:mask_all_false", lambda lib, x, m: x[m], XF, np.zeros((3, 4), bool))


def _setitem(index):
    def f(lib, x, v):
        z = x * 1.0
        z[index] = v
        return z
    return f


spec("ops:__setitem__:slice", _setitem((slice(None), 1)), XF, np.array([1.0, 2.0, 3.0]))
spec("ops:__setitem__:scalar", lambda lib, x: _setitem(0)(lib, x, 5.0), XF)
spec("ops:__setitem__:mask", lambda lib, x, m: _setitem(lib.tensor(B))(lib, x, 0.0), XF, B)
spec("ops:__setitem__:broadcast", _setitem(slice(0, 2)), XF, YB)
spec("ops:__setitem__:int_into_float", lambda lib, x, v: _setitem(1)(lib, x, v), XF, I64[0])
spec("ops:__setitem__:index_tensor", _setitem(([0, 2, 0],)), XF, np.ones(4))
spec("ops:__setitem__:mask_tensor_value", lambda lib, x, m, v: _setitem(m)(lib, x, v), XF, B,
     S0)

GI = np.array([[0, 1, 1, 0], [2, 2, 0, 1]])
spec("ops:gather:f64", lambda lib, x, i: lib.gather(x, 0, i), XF, GI)
spec("ops:gather:dim1", lambda lib, x, i: x.gather(1, i), XF, np.array([[3, 3], [0, 1], [2, 2]]))
spec("ops:gather:int", lambda lib, x, i: lib.gather(x, 0, i), I64, GI)
spec("ops:gather:bad_index", lambda lib, x, i: lib.gather(x, 0, i), XF, GI + 5,
     error="index 5 is out of bounds for dimension 0 with size 3")
spec("ops:gather:int32_index", lambda lib, x, i: lib.gather(x, 0, i), XF, GI.astype(np.int32))
spec("ops:take_along_dim:f64", lambda lib, x, i: lib.take_along_dim(x, i, 1), XF,
     np.array([[3, 3], [0, 1], [2, 2]]))
spec("ops:take_along_dim:flat", lambda lib, x, i: x.take_along_dim(i), XF, np.array([11, 0, 0]))
spec("ops:take_along_dim:argsort",
     lambda lib, x: lib.take_along_dim(x, x.argsort(dim=1, stable=True), 1), TIES)
SI = np.array([[0, 1, 2, 0], [1, 0, 0, 2]])
spec("ops:scatter:f64", lambda lib, x, s, i: lib.scatter(x, 0, i, s), XF, Y[:2] * 1.0, SI)
spec("ops:scatter:value", lambda lib, x, i: x.scatter(0, i, 2.5), XF, SI)
spec("ops:scatter:reduce_add", lambda lib, x, s, i: x.scatter(0, i, s, reduce="add"), XF,
     Y[:2] * 1.0, SI, grad_fn=False, backward=False)   # torch: no derivative with reduce=
spec("ops:scatter:reduce_add_grad", lambda lib, x, s, i: x.scatter(0, i, s, reduce="add"), XF,
     Y[:2] * 1.0, SI)
spec("ops:scatter_add:f64", lambda lib, x, s, i: lib.scatter_add(x, 0, i, s), XF, Y[:2] * 1.0,
     SI)
spec("ops:scatter_add:dup", lambda lib, x, s, i: x.scatter_add(1, i, s), XF, Y[:, :2] * 1.0,
     np.array([[0, 0], [1, 1], [3, 3]]))
spec("ops:scatter_add:int", lambda lib, x, s, i: lib.scatter_add(x, 0, i, s), I64, I64[:2], SI)
spec("ops:index_select:f64", lambda lib, x, i: lib.index_select(x, 1, i), XF,
     np.array([3, 0, 3]))
spec("ops:index_select:dim0", lambda lib, x, i: x.index_select(0, i), XF, np.array([2, 2]))
spec("ops:index_select:int32", lambda lib, x, i: x.index_select(0, i), I64,
     np.array([2, 0], np.int32))
spec("ops:index_select:2d_index", lambda lib, x, i: x.index_select(0, i), XF,
     np.array([[0, 1]]), error="index_select\\(\\): Index is supposed to be a vector")
spec("ops:masked_fill:f64", lambda lib, x, m: lib.masked_fill(x, m, -1.5), XF, B)
spec("ops:masked_fill:broadcast", lambda lib, x, m: x.masked_fill(m, 0.0), XF, B[0])
spec("ops:masked_fill:inf", lambda lib, x, m: x.masked_fill(m, float("-inf")), XF, B)
spec("ops:masked_fill:tensor_value", lambda lib, x, m, v: x.masked_fill(m, v), XF, B, S0)
spec("ops:masked_fill:int", lambda lib, x, m: x.masked_fill(m, 7), I64, B)
spec("ops:masked_fill:int_float_value", lambda lib, x, m: x.masked_fill(m, 2.5), I64, B)
spec("ops:masked_fill:non_bool", lambda lib, x, m: x.masked_fill(m, 0.0), XF, I64,
     error="masked_fill_ only supports boolean masks, but got mask with dtype long")
spec("ops:masked_fill_:inplace", lambda lib, x, m: (x * 1.0).masked_fill_(m, 3.0), XF, B)
spec("ops:where:f64", lambda lib, c, x, y: lib.where(c, x, y), B, XF, Y)
spec("ops:where:broadcast", lambda lib, c, x, y: lib.where(c, x, y), B[:, :1], XF, YB)
spec("ops:where:scalar", lambda lib, c, x: lib.where(c, x, 0.0), B, XF)
spec("ops:where:scalars", lambda lib, c: lib.where(c, 1.0, 0), B)
spec("ops:where:promote", lambda lib, c, x, y: lib.where(c, x, y), B, I64, X32)
spec("ops:where:method", lambda lib, c, x, y: x.where(c, y), B, XF, Y)
spec("ops:where:inf_grad", lambda lib, x: lib.where(x > 0, lib.sqrt(x), 0.0), UNIT)
spec("ops:where:one_arg", lambda lib, c: lib.where(c), B)
spec("ops:where:non_bool", lambda lib, c, x, y: lib.where(c, x, y), I64, XF, Y,
     error="where expected condition to be a boolean tensor, but got a tensor with dtype Long")
spec("ops:nonzero:f64", lambda lib, x: lib.nonzero(x), XF)
spec("ops:nonzero:as_tuple", lambda lib, x: x.nonzero(as_tuple=True), B)
spec("ops:nonzero:0dim", lambda lib, x: lib.nonzero(x), S0)

# ---------------------------------------------------------------------------------------
# products
M34, M43 = XF, Y.T.copy()
spec("ops:matmul:2d", lambda lib, a, b: lib.matmul(a, b), M34, M43)
spec("ops:matmul:1d_1d", lambda lib, a, b: lib.matmul(a, b), YB, YB[::-1].copy())
spec("ops:matmul:2d_1d", lambda lib, a, b: lib.matmul(a, b), M34, YB)
spec("ops:matmul:1d_2d", lambda lib, a, b: a.matmul(b), YB, M43)
spec("ops:matmul:batch", lambda lib, a, b: lib.matmul(a, b), A, M43)
spec("ops:matmul:batch_broadcast", lambda lib, a, b: lib.matmul(a, b), A[:, None],
     np.stack([M43] * 3))
spec("ops:matmul:1d_3d", lambda lib, a, b: lib.matmul(a, b), YB[:3], A)
spec("ops:matmul:int", lambda lib, a, b: lib.matmul(a, b), I64, I64.T.copy())
spec("ops:matmul:inf", lambda lib, a, b: lib.matmul(a, b), X, M43)
spec("ops:matmul:dtype_mismatch", lambda lib, a, b: lib.matmul(a, b), X32, M43,
     error="expected m1 and m2 to have the same dtype, but got: float != double")
spec("ops:matmul:mismatch", lambda lib, a, b: lib.matmul(a, b), M34, M34,
     error=r"mat1 and mat2 shapes cannot be multiplied \(3x4 and 3x4\)")
spec("ops:matmul:mismatch_1d", lambda lib, a, b: lib.matmul(a, b), YB, YB[:3],
     error=r"inconsistent tensor size, expected tensor \[4\] and src \[3\] to have the same "
           r"number of elements, but got 4 and 3 elements respectively")
spec("ops:matmul:mismatch_2d_1d", lambda lib, a, b: lib.matmul(a, b), M34, YB[:3],
     error=r"size mismatch, got input \(3\), mat \(3x4\), vec \(3\)")
spec("ops:matmul:mismatch_batch", lambda lib, a, b: lib.matmul(a, b), A, A,
     error=r"Expected size for first two dimensions of batch2 tensor to be: \[2, 4\] but got: "
           r"\[2, 3\].")
spec("ops:matmul:0dim", lambda lib, a, b: lib.matmul(a, b), S0, YB,
     error="both arguments to matmul need to be at least 1D, but they are 0D and 1D")
spec("ops:__matmul__:mismatch", lambda lib, a, b: a @ b, M34, M34,
     error=r"mat1 and mat2 shapes cannot be multiplied \(3x4 and 3x4\)")
spec("ops:mm:f64", lambda lib, a, b: lib.mm(a, b), M34, M43)
spec("ops:mm:method", lambda lib, a, b: a.mm(b), M34, M43)
spec("ops:mm:mismatch", lambda lib, a, b: lib.mm(a, b), M34, M34,
     error=r"mat1 and mat2 shapes cannot be multiplied \(3x4 and 3x4\)")
spec("ops:mm:1d", lambda lib, a, b: lib.mm(a, b), YB, M43, error="self must be a matrix")
spec("ops:bmm:f64", lambda lib, a, b: lib.bmm(a, b), A, np.stack([M43, M43]))
spec("ops:bmm:method", lambda lib, a, b: a.bmm(b), A, np.stack([M43, M43]))
spec("ops:bmm:mismatch", lambda lib, a, b: lib.bmm(a, b), A, A,
     error=r"Expected size for first two dimensions of batch2 tensor to be: \[2, 4\] but got: "
           r"\[2, 3\].")
spec("ops:bmm:2d", lambda lib, a, b: lib.bmm(a, b), M34, M43,
     error="batch1 must be a 3D tensor")
spec("ops:mv:f64", lambda lib, a, b: lib.mv(a, b), M34, YB)
spec("ops:mv:method", lambda lib, a, b: a.mv(b), M34, YB)
spec("ops:mv:mismatch", lambda lib, a, b: lib.mv(a, b), M34, YB[:3],
     error=r"size mismatch, got input \(3\), mat \(3x4\), vec \(3\)")
spec("ops:dot:f64", lambda lib, a, b: lib.dot(a, b), YB, YB[::-1].copy())
spec("ops:dot:method", lambda lib, a, b: a.dot(b), YB, YB)
spec("ops:dot:int", lambda lib, a, b: lib.dot(a, b), I64[0], I64[1])
spec("ops:dot:mismatch", lambda lib, a, b: lib.dot(a, b), YB, YB[:3],
     error=r"inconsistent tensor size, expected tensor \[4\] and src \[3\] to have the same "
           r"number of elements, but got 4 and 3 elements respectively")
spec("ops:dot:dtypes", lambda lib, a, b: lib.dot(a, b), YB, YB.astype(np.float32),
     error="dot : expected both vectors to have same dtype, but found Double and Float")
spec("ops:dot:2d", lambda lib, a, b: lib.dot(a, b), M34, M34,
     error="1D tensors expected, but got 2D and 2D tensors")
spec("ops:inner:f64", lambda lib, a, b: lib.inner(a, b), M34, XF[:2])
spec("ops:inner:1d", lambda lib, a, b: a.inner(b), YB, YB)
spec("ops:inner:scalar", lambda lib, a, b: lib.inner(a, b), S0, M34)
spec("ops:outer:f64", lambda lib, a, b: lib.outer(a, b), YB, YB[:3])
spec("ops:outer:promote", lambda lib, a, b: a.outer(b), I64[0], YB.astype(np.float32))
spec("ops:ger:f64", lambda lib, a, b: lib.ger(a, b), YB, YB[:3])
spec("ops:einsum:matmul", lambda lib, a, b: lib.einsum("ij,jk->ik", a, b), M34, M43)
spec("ops:einsum:list", lambda lib, a, b: lib.einsum("ij,jk", [a, b]), M34, M43)
spec("ops:einsum:trace", lambda lib, a: lib.einsum("ii", a), XF[:, :3])
spec("ops:einsum:diag", lambda lib, a: lib.einsum("ii->i", a), XF[:, :3])
spec("ops:einsum:batch", lambda lib, a, b: lib.einsum("bij,bjk->bik", a, b), A,
     np.stack([M43, M43]))
spec("ops:einsum:ellipsis", lambda lib, a: lib.einsum("...ij->...ji", a), A)
spec("ops:einsum:outer", lambda lib, a, b: lib.einsum("i,j->ij", a, b), YB, YB[:3])
spec("ops:einsum:sum", lambda lib, a: lib.einsum("ijk->", a), A)
spec("ops:einsum:broadcast_one", lambda lib, a, b: lib.einsum("ij,jk->ik", a, b), M34,
     XF[:1, :2])
spec("ops:einsum:repeated_broadcast", lambda lib, a, b: lib.einsum("ii,ij->j", a, b),
     XF[:, :3], XF[:1])
spec("ops:einsum:grad_fn", lambda lib, a, b: lib.einsum("ij,jk->ik", a, b), M34, M43)
spec("ops:inner:grad_fn", lambda lib, a, b: lib.inner(a, b), YB, YB)
spec("ops:outer:grad_fn", lambda lib, a, b: lib.outer(a, b), YB, YB[:3])
spec("ops:ger:grad_fn", lambda lib, a, b: lib.ger(a, b), YB, YB[:3])
spec("ops:repeat_interleave:grad_fn", lambda lib, x: lib.repeat_interleave(x, 2), XF)
spec("ops:einsum:mismatch", lambda lib, a, b: lib.einsum("ij,jk->ik", a, b), M34, M34,
     error="einsum\\(\\): subscript j has size 3 for operand 1 which does not broadcast "
           "with previously seen size 4")

# ---------------------------------------------------------------------------------------
# creation functions, dtype inference, promotion helpers


CREATE = {
    "tensor:int": lambda lib: lib.tensor([1, 2, 3]),
    "tensor:float": lambda lib: lib.tensor([1.0, 2.0]),
    "tensor:mixed": lambda lib: lib.tensor([1, 2.5]),
    "tensor:bool": lambda lib: lib.tensor([True, False]),
    "tensor:bool_int": lambda lib: lib.tensor([True, 2]),
    "tensor:scalar_int": lambda lib: lib.tensor(3),
    "tensor:scalar_float": lambda lib: lib.tensor(3.0),
    "tensor:scalar_bool": lambda lib: lib.tensor(False),
    "tensor:nested": lambda lib: lib.tensor([[1, 2], [3, 4]]),
    "tensor:empty": lambda lib: lib.tensor([]),
    "tensor:dtype": lambda lib: lib.tensor([1, 2], dtype=lib.float64),
    "tensor:dtype_float_to_int": lambda lib: lib.tensor([1.7, -1.7], dtype=lib.int64),
    "tensor:complex": lambda lib: lib.tensor([1 + 2j]),
    "tensor:np_f64": lambda lib: lib.tensor(np.array([1.0, 2.0])),
    "tensor:np_i32": lambda lib: lib.tensor(np.array([1, 2], np.int32)),
    "tensor:np_scalar": lambda lib: lib.tensor(np.float64(2.5)),
    "tensor:list_of_tensors": lambda lib: lib.tensor([lib.tensor(1.0), lib.tensor(2.0)]),
    "tensor:ragged": lambda lib: lib.tensor([[1, 2], [3]]),
    "tensor:requires_grad": lambda lib: lib.tensor([1.0], requires_grad=True).requires_grad,
    "tensor:requires_grad_int": lambda lib: lib.tensor([1], requires_grad=True),
    "as_tensor": lambda lib: lib.as_tensor([1, 2]),
    "as_tensor:dtype": lambda lib: lib.as_tensor(np.arange(3), dtype=lib.float32),
    "from_numpy": lambda lib: lib.from_numpy(np.arange(3.0)),
    "from_numpy:f32": lambda lib: lib.from_numpy(np.ones(2, np.float32)),
    "zeros": lambda lib: lib.zeros(2, 3),
    "zeros:tuple": lambda lib: lib.zeros((2, 3), dtype=lib.int32),
    "zeros:empty_shape": lambda lib: lib.zeros(()),
    "ones": lambda lib: lib.ones([2]),
    "ones:dtype": lambda lib: lib.ones(2, dtype=lib.bool),
    "full": lambda lib: lib.full((2, 2), 1.5),
    "full:int": lambda lib: lib.full((2,), 7),
    "full:bool": lambda lib: lib.full((2,), True),
    "full:dtype": lambda lib: lib.full((2,), 7, dtype=lib.float64),
    "empty": lambda lib: (lib.empty(2, 3).shape, lib.empty(2, 3).dtype),
    "empty:dtype": lambda lib: lib.empty((2,), dtype=lib.int64).dtype,
    "arange": lambda lib: lib.arange(5),
    "arange:float": lambda lib: lib.arange(0.0, 1.0, 0.25),
    "arange:start_end": lambda lib: lib.arange(2, 7, 2),
    "arange:int_float_step": lambda lib: lib.arange(0, 2, 0.5),
    "arange:dtype": lambda lib: lib.arange(3, dtype=lib.float64),
    "arange:negative": lambda lib: lib.arange(5, 0, -2),
    "arange:bad": lambda lib: lib.arange(0, 5, -1),
    "linspace": lambda lib: lib.linspace(0, 1, 5),
    "linspace:one": lambda lib: lib.linspace(2, 3, 1),
    "linspace:dtype": lambda lib: lib.linspace(0, 10, 4, dtype=lib.float64),
    "linspace:int_dtype": lambda lib: lib.linspace(0, 10, 4, dtype=lib.int64),
    "logspace": lambda lib: lib.logspace(0, 2, 3),
    "logspace:base": lambda lib: lib.logspace(0, 3, 4, base=2),
    "eye": lambda lib: lib.eye(3),
    "eye:rect": lambda lib: lib.eye(2, 3, dtype=lib.int64),
    "zeros_like": lambda lib: lib.zeros_like(lib.tensor([1, 2])),
    "zeros_like:dtype": lambda lib: lib.zeros_like(lib.tensor([1, 2]), dtype=lib.float32),
    "ones_like": lambda lib: lib.ones_like(lib.tensor([[1.0, 2.0]], dtype=lib.float64)),
    "full_like": lambda lib: lib.full_like(lib.tensor([1, 2]), 2.7),
    "full_like:float": lambda lib: lib.full_like(lib.tensor([1.0, 2.0]), 3),
    "empty_like": lambda lib: (lambda t: (t.shape, t.dtype))(lib.empty_like(lib.ones(2, 3))),
    "new_zeros": lambda lib: lib.tensor([1.0], dtype=lib.float64).new_zeros(2, 2),
    "new_ones": lambda lib: lib.tensor([1]).new_ones((3,)),
    "new_full": lambda lib: lib.tensor([1.0]).new_full((2,), 4),
    "new_empty": lambda lib: lib.tensor([1], dtype=lib.int16).new_empty((2,)).dtype,
    "new_tensor": lambda lib: lib.tensor([1.0], dtype=lib.float64).new_tensor([1, 2]),
    "new_tensor:float": lambda lib: lib.tensor([1], dtype=lib.int32).new_tensor([1.5]),
    "get_default_dtype": lambda lib: lib.get_default_dtype(),
    "set_default_dtype": lambda lib: _with_default(lib, lambda: (
        lib.tensor([1.0]), lib.tensor(2.5), lib.tensor([1, 2]), lib.zeros(2), lib.arange(0.0, 1),
        lib.get_default_dtype(), lib.tensor([1.0], dtype=lib.float32) + 1.5,
        lib.tensor([1]) * 1.5, lib.linspace(0, 1, 3), lib.full((1,), 2.0),
        lib.tensor([1 + 1j]))),
    "set_default_dtype:bad": lambda lib: lib.set_default_dtype(lib.int64),
    "result_type": lambda lib: (
        lib.result_type(lib.tensor([1]), 1.0), lib.result_type(lib.tensor([1.0]), 1),
        lib.result_type(lib.tensor([1], dtype=lib.int8), lib.tensor(1)),
        lib.result_type(lib.tensor([1], dtype=lib.int8), lib.tensor([1])),
        lib.result_type(lib.tensor(1.0, dtype=lib.float64), lib.tensor([1])),
        lib.result_type(lib.tensor([True]), 2), lib.result_type(2, 3.0),
        lib.result_type(lib.tensor([1], dtype=lib.uint8), lib.tensor([1], dtype=lib.int8)),
        lib.result_type(lib.tensor([1.0], dtype=lib.float16), 1.5),
        lib.result_type(lib.tensor([1.0], dtype=lib.float32), lib.tensor(1j))),
    "promote_types": lambda lib: (
        lib.promote_types(lib.int32, lib.float32), lib.promote_types(lib.uint8, lib.int8),
        lib.promote_types(lib.bool, lib.int16), lib.promote_types(lib.float16, lib.int64),
        lib.promote_types(lib.int64, lib.float64), lib.promote_types(lib.float32,
                                                                     lib.complex64)),
    "is_floating_point": lambda lib: (lib.is_floating_point(lib.tensor([1.0])),
                                      lib.is_floating_point(lib.tensor([1])),
                                      lib.tensor([1.0]).is_floating_point()),
    "is_tensor": lambda lib: (lib.is_tensor(lib.tensor(1)), lib.is_tensor(1.0),
                              lib.is_tensor(np.ones(1))),
    "numel": lambda lib: (lib.numel(lib.ones(2, 3)), lib.ones(2, 3).numel(),
                          lib.ones(()).nelement()),
    "is_grad_enabled": lambda lib: lib.is_grad_enabled(),
    "is_inference_mode_enabled": lambda lib: lib.is_inference_mode_enabled(),
    "get_num_threads": lambda lib: type(lib.get_num_threads()),
    "Size": lambda lib: (lib.Size([2, 3]), lib.ones(2, 3).size(), lib.ones(2, 3).size(1),
                         lib.ones(2, 3).shape[-1], lib.Size([2, 3]).numel()),
    "size:bad_dim": lambda lib: lib.ones(2, 3).size(2),
    "device": lambda lib: (str(lib.ones(1).device), lib.ones(1).device.type,
                           str(lib.device("cpu")), lib.ones(1).is_cuda),
}


def _with_default(lib, f):
    saved = lib.get_default_dtype()
    lib.set_default_dtype(lib.float64)
    try:
        return f()
    finally:
        lib.set_default_dtype(saved)


for label, fn in CREATE.items():
    name, _, variant = label.partition(":")
    spec(f"ops:{name}:{variant or 'default'}", fn)

# random creation: shape and dtype only


def _sd(make):
    def f(lib):
        lib.manual_seed(0)
        t = make(lib)
        return tuple(t.shape), t.dtype, t.requires_grad
    return f


RANDOM = {
    "rand": lambda lib: lib.rand(2, 3),
    "rand:dtype": lambda lib: lib.rand((2,), dtype=lib.float64),
    "randn": lambda lib: lib.randn(3),
    "randn:dtype": lambda lib: lib.randn(2, 2, dtype=lib.float64),
    "randint": lambda lib: lib.randint(0, 5, (3,)),
    "randint:high_only": lambda lib: lib.randint(5, (2, 2)),
    "randint:dtype": lambda lib: lib.randint(0, 5, (3,), dtype=lib.int32),
    "randperm": lambda lib: lib.randperm(5),
    "rand_like": lambda lib: lib.rand_like(lib.ones(2, dtype=lib.float64)),
    "randn_like": lambda lib: lib.randn_like(lib.ones(2, 3)),
    "randint_like": lambda lib: lib.randint_like(lib.ones(2), 5),
    "normal": lambda lib: lib.normal(0.0, 1.0, (2, 3)),
    "normal:tensors": lambda lib: lib.normal(lib.zeros(3), lib.ones(3)),
    "bernoulli": lambda lib: lib.bernoulli(lib.full((3,), 0.5)),
    "multinomial": lambda lib: lib.multinomial(lib.tensor([0.2, 0.8]), 4, replacement=True),
    "multinomial:no_replacement": lambda lib: lib.multinomial(lib.ones(2, 5), 3),
    "normal_": lambda lib: lib.zeros(2, 2).normal_(),
    "uniform_": lambda lib: lib.zeros(3, dtype=lib.float64).uniform_(-1, 1),
    "bernoulli_": lambda lib: lib.zeros(3).bernoulli_(0.5),
    "random_": lambda lib: lib.zeros(3).random_(0, 10),
    "exponential_": lambda lib: lib.zeros(3).exponential_(),
}
for label, fn in RANDOM.items():
    name, _, variant = label.partition(":")
    spec(f"ops:{name}:{variant or 'shape_dtype'}", _sd(fn))
spec("ops:rand:values_in_range", lambda lib: bool(((lambda t: (t >= 0) & (t < 1))(
    lib.rand(100))).all()))
spec("ops:randperm:is_permutation",
     lambda lib: lib.sort(lib.randperm(6)).values)
spec("ops:randint:in_range", lambda lib: bool(((lambda t: (t >= 2) & (t < 5))(
    lib.randint(2, 5, (100,)))).all()))
spec("ops:manual_seed:repeatable", lambda lib: bool(lib.equal(*[
    (lib.manual_seed(3), lib.rand(4))[1] for _ in range(2)])))

# ---------------------------------------------------------------------------------------
# Tensor conversion and attribute methods
CONV = {
    "double": lambda lib, x: x.double(),
    "float": lambda lib, x: x.float(),
    "half": lambda lib, x: x.half(),
    "int": lambda lib, x: x.int(),
    "long": lambda lib, x: x.long(),
    "short": lambda lib, x: x.short(),
    "bool": lambda lib, x: x.bool(),
    "byte": lambda lib, x: x.byte(),
    "to": lambda lib, x: x.to(lib.float64),
    "to:dtype_kw": lambda lib, x: x.to(dtype=lib.float32),
    "to:tensor": lambda lib, x: x.to(lib.ones(1, dtype=lib.int32)),
    "to:device": lambda lib, x: x.to("cpu"),
    "type": lambda lib, x: x.type(lib.float64),
    "cpu": lambda lib, x: x.cpu(),
    "item": lambda lib, x: x.sum().item(),
    "tolist": lambda lib, x: x.tolist(),
    "numpy": lambda lib, x: x.detach().numpy(),
    "dim": lambda lib, x: (x.dim(), x.ndim, x.ndimension()),
    "shape": lambda lib, x: (x.shape, x.size(), x.size(-1)),
    "stride": lambda lib, x: (x.stride(), x.t().stride()),
    "is_contiguous": lambda lib, x: (x.is_contiguous(), x.t().is_contiguous()),
    "element_size": lambda lib, x: x.element_size(),
    "is_complex": lambda lib, x: x.is_complex(),
    "is_leaf": lambda lib, x: (x.is_leaf, (x * 2).is_leaf, x.detach().is_leaf),
    "requires_grad": lambda lib, x: (x.requires_grad, x.detach().requires_grad),
    "grad_fn": lambda lib, x: (x.grad_fn, (x * 2).grad_fn.name()),
    "dtype": lambda lib, x: x.dtype,
    "__len__": lambda lib, x: len(x),
    "__iter__": lambda lib, x: list(x),
    "__bool__": lambda lib, x: (bool(x[0, 0] > 0), bool(x[:1, :1] != 0)),
    "__float__": lambda lib, x: float(x[0, 0]),
    "__int__": lambda lib, x: int(x[0, 0]),
    "__index__": lambda lib, x: [10, 20, 30][x.long()[0, 0] % 3],
    "__complex__": lambda lib, x: complex(x[0, 0]),
    "__array__": lambda lib, x: np.asarray(x.detach()),
    "__bool__:many": lambda lib, x: bool(x),
    "fill_": lambda lib, x: (x * 1.0).fill_(2.5),
    "zero_": lambda lib, x: (x * 1.0).zero_(),
    "copy_": lambda lib, x: lib.zeros(3, 4, dtype=lib.float32).copy_(x),
    "requires_grad_": lambda lib, x: x.detach().requires_grad_().requires_grad,
    "detach_": lambda lib, x: (x * 2).detach_().requires_grad,
    "output_nr": lambda lib, x: (x.output_nr, lib.unbind(x)[1].output_nr),
    "data": lambda lib, x: x.data.requires_grad,
}
for label, fn in CONV.items():
    name, _, variant = label.partition(":")
    spec(f"ops:{name}:{variant or 'f64'}", fn, XF)
    if label in ("double", "float", "half", "int", "long", "short", "bool", "byte", "to",
                 "item", "tolist"):
        spec(f"ops:{name}:int", fn, I64)
spec("ops:item:many", lambda lib, x: x.item(), XF,
     error="a Tensor with 12 elements cannot be converted to Scalar")
spec("ops:tolist:0dim", lambda lib, x: x.tolist(), S0)
spec("ops:tolist:bool", lambda lib, x: x.tolist(), B)
spec("ops:float:inf_to_int", lambda lib, x: x.long().tolist(), np.array([1.9, -1.9, -0.5]))
spec("ops:__len__:0dim", lambda lib, x: len(x), S0, error="len\\(\\) of a 0-d tensor")


spec("ops:__deepcopy__:f64", lambda lib, x: copy.deepcopy(x * 1.0), XF)
spec("ops:__format__:0dim", lambda lib, x: (f"{x.sum():.3f}", f"{x[0, 0].item():+.2e}"), XF)
spec("ops:ndimension:f64", lambda lib, x: (x.ndimension(), x.nelement(), x.ndim), A)
spec("ops:is_inference:f64", lambda lib, x: x.is_inference(), XF)


@pytest.mark.parametrize("case_id", oracle.register(*SPECS))
def test_ops(case_id):
    fn, inputs, kw = SPECS[case_id]
    oracle.case(case_id, lambda: facade(fn, *inputs, **kw))


# ---------------------------------------------------------------------------------------
# hypothesis: broadcasting, type promotion and ties where the inputs matter
DTYPES = [np.float64, np.float32, np.int64, np.int32, np.bool_]
HYP_BINARY = ["add", "sub", "mul", "div", "maximum", "pow", "atan2", "remainder", "eq",
              "fmod", "logical_xor"]


def _values(rng, shape, dtype, nonzero=False):
    if np.dtype(dtype).kind == "f":
        return np.asarray(special_values(rng, shape, dtype, kinds=("normal", "ties", "zeros")))
    if dtype is np.bool_:
        return np.asarray(rng.random(shape) < 0.5)
    v = rng.integers(-4, 5, shape)
    return np.asarray(np.where(v == 0, 2, v) if nonzero else v).astype(dtype)


@st.composite
def _binary_inputs(draw, dtypes=DTYPES):
    (sa, sb), _ = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=3))
    da, db = draw(st.sampled_from(dtypes)), draw(st.sampled_from(dtypes))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    return _values(rng, sa, da), _values(rng, sb, db, nonzero=True)


def _tol(*arrays):
    """float32's tolerance when a float32 operand takes part: torch's backward formulas
    compute in its precision (see ops:<name>:f32_f64)."""
    return (2e-5, 1e-6) if any(a.dtype == np.float32 for a in arrays) else (None, None)


for name in HYP_BINARY:
    oracle.register(f"ops:{name}:hypothesis")


@pytest.mark.parametrize("name", HYP_BINARY)
def test_binary_broadcasting_and_promotion(name):
    # torch's atan2 and pow backward formulas compute on the bool operand itself
    # (-self * recip, exponent - 1) and raise for a bool tensor beside a float one: a torch
    # defect, not a semantics to follow
    @settings(max_examples=settings().max_examples)
    @given(_binary_inputs(DTYPES[:-1] if name in ("atan2", "pow") else DTYPES))
    def check(ab):
        a, b = ab
        rtol, atol = _tol(a, b)
        facade(lambda lib, x, y: getattr(lib, name)(x, y), a, b, rtol=rtol, atol=atol)
    oracle.case(f"ops:{name}:hypothesis", check)


HYP_REDUCE = ["sum", "mean", "amax", "amin", "max", "min", "logsumexp", "std", "prod",
              "cumsum", "cumprod", "softmax", "argmax", "sort"]
for name in HYP_REDUCE:
    oracle.register(f"ops:{name}:hypothesis")


@st.composite
def _tied(draw):
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=3, max_side=4))
    vals = draw(st.lists(st.sampled_from([-2.0, -0.0, 0.0, 0.5, 1.0, 3.0]), min_size=1,
                         max_size=3))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    x = rng.choice(np.array(vals), shape)
    dim = draw(st.integers(-len(shape), len(shape) - 1))
    return x, dim, draw(st.booleans())


@pytest.mark.parametrize("name", HYP_REDUCE)
def test_reductions_with_ties(name):
    def call(lib, x, dim, keepdim):
        f = getattr(lib, name)
        if name in ("cumsum", "cumprod", "softmax"):
            return f(x, dim)
        if name == "sort":
            return tuple(f(x, dim=dim, stable=True))
        if name in ("max", "min"):
            return tuple(f(x, dim, keepdim=keepdim)) if keepdim else f(x)
        return f(x, dim, keepdim=keepdim)

    @settings(max_examples=settings().max_examples)
    @given(_tied())
    def check(case):
        x, dim, keepdim = case
        facade(lambda lib, t: call(lib, t, dim, keepdim), x)
    oracle.case(f"ops:{name}:hypothesis", check)
