"""The facade's hot paths: elementwise unary and binary ops on one primitive, written out
by hand (tensor.py's apply_fn traces every other op as a composite). Each runs the
primitive's NumPy ufunc or implementation on the arrays and, while grad mode is on and an
input requires grad, records a node whose OpInfo is cached per signature on the op.
"""
from __future__ import annotations

import builtins
import functools

import numpy as np

from ..core import ShapedArray, Tracer, array_module
from ..runtime import direct_ufunc
from functrans.primitives import elementwise as ew
from functrans.primitives import special as sp
from . import dtypes as D
from . import grad_mode
from .record import INFERENCE, elementwise_info, info_for, make_node
from .tensor import Tensor, _as_array, tensor, traced_hooks, wrap
from .tensor_info import _ndarray, result_type

GS = grad_mode.STATE
EVER = grad_mode.EVER
_new = object.__new__
_PYSCALARS = (builtins.float, builtins.int, builtins.bool)


class EOp:
    """An elementwise facade op: a primitive and torch's grad_fn name."""
    __slots__ = ("name", "prim", "params", "impl", "float_only", "differentiable", "int_ok",
                 "rname", "cache", "ufunc")

    def __init__(self, name, prim, params=None, float_only=True, rname=None):
        self.name = name
        self.rname = rname or name
        self.prim = prim
        self.params = params or {}
        self.impl = functools.partial(prim.impl, **self.params) if params else prim.impl
        direct = None if params else direct_ufunc(prim)
        self.ufunc = None if direct is None else getattr(np, direct)   # impl(np, ...) on NumPy
        self.float_only = float_only
        self.differentiable = prim.differentiable
        self.cache = {}          # signature -> OpInfo (record.info_for's front table)


def unary(a, op):
    x = a._data
    if op.float_only and x.dtype.kind not in "fc":
        x = x.astype(D.get_default_dtype())
    traced = type(x) is not _ndarray and isinstance(x, Tracer)
    rec = GS.enabled
    if traced:                      # traced data: the op is bound, not run
        h = traced_hooks()
        out = h.bind(op.prim, op.params, (x,))
        rec = rec and h.records
    elif type(x) is _ndarray and op.ufunc is not None:
        out = op.ufunc(x)
    else:
        out = op.impl(np if type(x) is _ndarray else array_module(x), x)
    if type(out) is _ndarray:           # (wrap, inline: the hot path)
        t = _new(Tensor)
        t._data, t._grad_fn, t._requires_grad, t._vc = out, None, False, None
        if EVER.inference and GS.inference:
            t._flags = INFERENCE
    else:
        t = wrap(_as_array(out))
    if a._requires_grad and rec and op.differentiable:
        key = (x.shape, x.dtype)
        info = op.cache.get(key)
        if info is None:
            info = info_for((op, key), lambda: elementwise_info(
                op.name, op.prim, op.params, [ShapedArray(x.shape, x.dtype)], (True,), x.dtype),
                op.cache, key)
        make_node(info, (a,), [x, out], (t,))
    if traced:
        h.after_op((a,), (t,))
    return t


def check_broadcast(sa, sb):
    """Raise torch's RuntimeError when shapes sa and sb (of the left and right operands) do
    not broadcast: checked from the last dimension, as torch's infer_size does, so the
    message names the same dimension (an error that is not a RuntimeError would escape
    ported `except RuntimeError` blocks)."""
    n = builtins.max(len(sa), len(sb))
    for i in range(n - 1, -1, -1):
        k = n - 1 - i
        p = sa[len(sa) - 1 - k] if k < len(sa) else 1
        q = sb[len(sb) - 1 - k] if k < len(sb) else 1
        if p != q and p != 1 and q != 1:
            raise RuntimeError(f"The size of tensor a ({p}) must match the size of tensor b "
                               f"({q}) at non-singleton dimension {i}")


def binary(a, b, op, reverse=False):
    """a (a Tensor) op b, or b op a when reverse; torch's promotion and broadcasting."""
    x = a._data
    traced = type(x) is not _ndarray and isinstance(x, Tracer)
    tb = type(b)
    if tb is Tensor or isinstance(b, Tensor):
        y = b._data
        if type(y) is not _ndarray and isinstance(y, Tracer):
            traced = True
        rb = b._requires_grad
        dt = xd = x.dtype           # (dtypes compared by identity first, shapes read once:
        yd = y.dtype                # each NumPy attribute read builds or compares anew)
        if (yd is not dt and yd != dt) or (op.float_only and dt.kind not in "fc"):
            dt = result_type(a, b)
    elif tb in _PYSCALARS:
        rb = False
        dt = xd = x.dtype
        kind = dt.kind
        if (kind == "b" and tb is not builtins.bool) or (kind in "iu" and tb is builtins.float):
            dt = result_type(a, b)
        y = b
    elif isinstance(b, (np.ndarray, np.generic, list, tuple)) or hasattr(
            b, "__cuda_array_interface__"):
        return binary(a, tensor(b) if not isinstance(b, np.ndarray) else wrap(b), op, reverse)
    elif isinstance(b, complex):
        y, rb, dt, xd = b, False, result_type(a, b), x.dtype
    else:
        return NotImplemented
    if op.float_only and dt.kind not in "fc":
        dt = D.get_default_dtype()
    sx = x.shape
    if tb is not complex and tb not in _PYSCALARS:
        sy = y.shape
        if sx != sy:
            check_broadcast(*((sy, sx) if reverse else (sx, sy)))
    else:
        sy = ()                     # (a NumPy scalar below)
    x0 = x
    if xd is not dt and xd != dt:
        x = x.astype(dt)
    if tb in _PYSCALARS or tb is complex:
        try:
            y0 = y = dt.type(y)
        except OverflowError:       # NumPy 2 refuses int8 + 1000; torch wraps the integer
            if dt.kind not in "iu":
                raise
            y0 = y = np.array(y).astype(dt)[()]
        yd = y0.dtype
    else:
        y0 = y
        if yd is not dt and yd != dt:
            y = y.astype(dt)
    rec = GS.enabled
    if traced:                      # traced data: the op is bound, not run
        h = traced_hooks()
        out = h.bind(op.prim, op.params, (y, x) if reverse else (x, y))
        rec = rec and h.records
    elif type(x) is _ndarray and op.ufunc is not None:
        out = op.ufunc(y, x) if reverse else op.ufunc(x, y)
    else:
        xp = np if type(x) is _ndarray else array_module(x)
        out = op.impl(xp, y, x) if reverse else op.impl(xp, x, y)
    if type(out) is _ndarray:           # (wrap, inline: the hot path)
        t = _new(Tensor)
        t._data, t._grad_fn, t._requires_grad, t._vc = out, None, False, None
        if EVER.inference and GS.inference:
            t._flags = INFERENCE
    else:
        t = wrap(out if traced else _as_array(out))
    ra = a._requires_grad
    if (ra or rb) and rec and op.differentiable:
        key = (sx, sy, xd, yd, ra, rb, reverse)     # (x0's and y0's shapes and dtypes)
        p, q = (y0, x0) if reverse else (x0, y0)
        info = op.cache.get(key)
        if info is None:
            mask = (rb, ra) if reverse else (ra, rb)
            name = op.rname if reverse else op.name
            info = info_for((op, key), lambda: elementwise_info(
                name, op.prim, op.params, [ShapedArray(p.shape, p.dtype),
                                           ShapedArray(q.shape, q.dtype)], mask, dt),
                op.cache, key)
        n = info.n_slots
        if n == 3:
            vals = [p, q, out]
        else:
            vals = [None] * n
            vals[0], vals[1], vals[-1] = p, q, out
        make_node(info, (b, a) if reverse else (a, b), vals, (t,))
    if traced:
        h.after_op((a, b), (t,))
    return t


# ---------------------------------------------------------------------------
# the elementwise ops (methods.py installs them on Tensor)

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
FMOD1 = EOp("FmodBackward1", ew.rem_p, float_only=False)      # a tensor divisor
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
    "log1p": ("Log1PBackward0", ew.log1p_p), "expm1": ("Expm1Backward0", ew.expm1_p),
    "asin": ("AsinBackward0", ew.asin_p), "acos": ("AcosBackward0", ew.acos_p),
    "atan": ("AtanBackward0", ew.atan_p), "sinh": ("SinhBackward0", ew.sinh_p),
    "cosh": ("CoshBackward0", ew.cosh_p), "erf": ("ErfBackward0", ew.erf_p),
    "asinh": ("AsinhBackward0", ew.asinh_p), "acosh": ("AcoshBackward0", ew.acosh_p),
    "atanh": ("AtanhBackward0", ew.atanh_p),
    "sigmoid": ("SigmoidBackward0", ew.logistic_p),
    "erfc": ("ErfcBackward0", sp.erfc_p), "erfinv": ("ErfinvBackward0", sp.erf_inv_p),
    "lgamma": ("LgammaBackward0", sp.lgamma_p), "digamma": ("DigammaBackward0", sp.digamma_p),
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
