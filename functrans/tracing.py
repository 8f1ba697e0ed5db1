"""Tracing Python functions into jaxprs (`make_jaxpr`) and the jaxpr utilities around it."""
from __future__ import annotations

import functools
import gc
import inspect
import math
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import tree_util
from .core import (Array, ClosedJaxpr, Jaxpr, JaxprEqn, Literal, Trace, Tracer,
                   UnexpectedTracerError, Var, canonicalize_value, get_aval, is_python_scalar,
                   new_dynamic_main, value_of, wrap_value)
from .core.config import leak_checking
from .passes import dce_jaxpr
from .primitives.elementwise import mul_p
from .primitives.shape import broadcast_in_dim_p


class JaxprTracer(Tracer):
    __slots__ = ("aval", "_const", "_fill")

    def __init__(self, trace, aval, origin=None, const=None):
        self._trace = trace
        self.aval = aval
        self._origin = origin
        self._const = const
        self._fill = None          # the scalar a broadcast_in_dim of a literal repeats


def _is_literal_value(val):
    if is_python_scalar(val):
        return True
    return type(val) is not np.ndarray and isinstance(val, np.generic) or (
        type(val) is np.ndarray and val.ndim == 0)


class JaxprBuilder:
    """Collects the equations traced by one JaxprTrace."""

    def __init__(self):
        self.eqns: list[JaxprEqn] = []
        self.tracer_to_var: dict[int, Var] = {}
        self.const_tracers: dict[int, JaxprTracer] = {}
        self.constvar_vals: dict[Var, object] = {}
        self.tracers: list[JaxprTracer] = []
        self.label = None                  # the transformation, named in error messages

    def new_tracer(self, trace, aval, origin=None, const=None):
        t = JaxprTracer(trace, aval, origin, const)
        self.tracers.append(t)
        return t

    def add_var(self, tracer):
        v = self.tracer_to_var[id(tracer)] = Var(tracer.aval)
        return v

    def atom(self, tracer):
        v = self.tracer_to_var.get(id(tracer))
        if v is not None:
            return v
        if tracer._const is not None:
            val = tracer._const
            if _is_literal_value(val):
                return Literal(val, tracer.aval)
            v = self.add_var(tracer)
            self.constvar_vals[v] = val
            return v
        raise UnexpectedTracerError(f"tracer {tracer} is not known to this trace")

    def build(self, in_tracers, out_tracers):
        invars = [self.tracer_to_var[id(t)] for t in in_tracers]
        outvars = [self.atom(t) for t in out_tracers]
        constvars = list(self.constvar_vals)
        consts = [self.constvar_vals[v] for v in constvars]
        return Jaxpr(constvars, invars, self.eqns, outvars), consts


class JaxprTrace(Trace):
    """Records every primitive applied to its tracers as a jaxpr equation."""

    @property
    def transformation(self):
        """How errors name it: the caller's label ("ft.jit of `step`"), else generically."""
        return getattr(self.main.global_data, "label", None) or \
            "tracing to a jaxpr (ft.jit, ft.make_jaxpr, ft.compile or a control-flow body)"

    @property
    def builder(self) -> JaxprBuilder:
        return self.main.global_data

    def new_arg(self, aval, origin=None):
        t = self.builder.new_tracer(self, aval, origin)
        self.builder.add_var(t)
        return t

    def pure(self, val):
        b = self.builder
        if type(val) is Array:          # the raw array is the constant; its weak type stays
            aval, val = val.aval, value_of(val)
            t = b.const_tracers.get(id(val))
            if t is None or t.aval != aval:
                t = b.new_tracer(self, aval, "a constant captured by the traced function", val)
                b.const_tracers[id(val)] = t
            return t
        t = b.const_tracers.get(id(val))
        if t is None:
            aval = get_aval(val)
            if isinstance(val, Tracer):
                aval = aval.strip_weak() if not aval.weak_type else aval
            t = b.new_tracer(self, aval, "a constant captured by the traced function", val)
            b.const_tracers[id(val)] = t
        return t

    lift = pure

    def process_primitive(self, prim, tracers, params):
        if (tracers and not prim.multiple_results and not prim.effectful
                and all(t._const is not None and _is_literal_value(t._const) for t in tracers)):
            val = prim.impl(np, *[t._const for t in tracers], **params)   # fold scalar constants
            if np.ndim(val) == 0:
                if prim.abstract_eval(*[t.aval for t in tracers], **params).weak_type:
                    return self.pure(wrap_value(np.asarray(val), True))   # stays weak
                return self.pure(np.asarray(val))
        if (prim.elementwise and tracers and not prim.effectful and not prim.multiple_results
                and any(t._fill is not None for t in tracers)
                and all(t._fill is not None or (t._const is not None and
                                                _is_literal_value(t._const)) for t in tracers)):
            # elementwise op on broadcast constants: fold into one broadcast constant
            val = prim.impl(np, *[np.asarray(t._fill if t._fill is not None else t._const)
                                  for t in tracers], **params)
            shape = next(t.aval.shape for t in tracers if t._fill is not None)
            return self.process_primitive(broadcast_in_dim_p, [self.pure(np.asarray(val))],
                                          {"shape": shape, "broadcast_dimensions": ()})
        if (prim.elementwise and any(t._fill is not None for t in tracers)
                and any(t._fill is None and t.aval.ndim for t in tracers)):
            # a broadcast constant next to a full-shape operand: use the scalar literal
            tracers = [self.pure(np.asarray(t._fill)) if t._fill is not None else t
                       for t in tracers]
        if prim is mul_p and len(tracers) == 2:         # x * 1 is x: no identity ops
            for one, other in (tracers, tracers[::-1]):
                fill = one._fill if one._const is None else (
                    one._const if _is_literal_value(one._const) else None)
                if (fill is not None and np.asarray(fill) == 1
                        and other.aval.dtype == one.aval.dtype
                        and other.aval.shape == np.broadcast_shapes(other.aval.shape,
                                                                    one.aval.shape)):
                    return other
        out = prim.abstract_eval(*[t.aval for t in tracers], **params)
        b = self.builder
        invars = [b.atom(t) for t in tracers]
        origin = f"the output of `{prim.name}`"
        if prim.multiple_results:
            outs = [b.new_tracer(self, a, origin) for a in out]
            b.eqns.append(JaxprEqn(prim, invars, params, [b.add_var(t) for t in outs]))
            return outs
        t = b.new_tracer(self, out, origin)
        b.eqns.append(JaxprEqn(prim, invars, params, [b.add_var(t)]))
        if prim is broadcast_in_dim_p and type(invars[0]) is Literal:
            t._fill = invars[0].val
        return t


def _check_leaks(builder):
    """ft.checking_leaks(): the trace has ended, so nothing but the builder should hold its
    tracers; one that something else still references has leaked out of the trace."""
    tracers, builder.tracers = builder.tracers, []
    builder.const_tracers.clear()
    gc.collect()
    # references: the list, the loop variable and getrefcount's argument
    leaked = [t for t in tracers if sys.getrefcount(t) > 3]
    if leaked:
        what = "\n".join(f"{t} ({t._origin or 'a traced value'})" for t in leaked[:5])
        raise UnexpectedTracerError(
            f"Leaked trace JaxprTrace ({builder.label or 'tracing to a jaxpr'}): "
            f"{len(leaked)} of its tracers outlived it, referenced from outside the traced "
            f"function. Leaked tracer(s):\n\n{what}\n\nReturn traced values from the "
            "function instead of storing them (in a list, a global, an object's attribute).")


def trace_to_jaxpr(f_flat, in_avals, arg_names=None, dce=True, label=None):
    """Trace a function of flat arrays to (Jaxpr, consts). f_flat returns a flat list.
    label: how error messages name this trace (e.g. "ft.jit of `step`")."""
    builder = JaxprBuilder()
    builder.label = label
    with new_dynamic_main(JaxprTrace, builder) as main:
        trace = JaxprTrace(main)
        names = arg_names or [None] * len(in_avals)
        in_tracers = [trace.new_arg(a, f"the argument {n}" if n else "an argument")
                      for a, n in zip(in_avals, names)]
        outs = f_flat(*in_tracers)
        out_tracers = [trace.full_raise(o) for o in outs]
        jaxpr, consts = builder.build(in_tracers, out_tracers)
    if leak_checking():
        del in_tracers, out_tracers, outs, trace
        _check_leaks(builder)
    if dce:
        jaxpr = dce_jaxpr(jaxpr)
        used = {v for e in jaxpr.eqns for v in e.invars if type(v) is Var}
        used.update(v for v in jaxpr.outvars if type(v) is Var)
        keep = [i for i, v in enumerate(jaxpr.constvars) if v in used]
        jaxpr = Jaxpr([jaxpr.constvars[i] for i in keep], jaxpr.invars, jaxpr.eqns, jaxpr.outvars)
        consts = [consts[i] for i in keep]
    return jaxpr, consts


def flatten_fun(f, in_tree):
    """Wrap f so that it takes flat leaves and returns flat leaves; out_tree in the store."""
    store = {}

    def f_flat(*leaves):
        out = f(*tree_util.tree_unflatten(in_tree, leaves))
        out_leaves, store["out_tree"] = tree_util.tree_flatten(out)
        return out_leaves
    return f_flat, store


def _arg_names(f, n):
    try:
        params = list(inspect.signature(f).parameters)
    except (TypeError, ValueError):
        return [None] * n
    return [f"'{params[i]}'" if i < len(params) else None for i in range(n)]


def split_static(args, static_argnums):
    static_argnums = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
    static_argnums = tuple(i % len(args) if args else i for i in static_argnums)
    dyn = [a for i, a in enumerate(args) if i not in static_argnums]
    static = {i: args[i] for i in static_argnums}

    def merge(dyn_args):
        it = iter(dyn_args)
        return [static[i] if i in static else next(it) for i in range(len(args))]
    return dyn, static, merge


def make_jaxpr(fun: Callable[..., Any], static_argnums: int | Sequence[int] = (),
               return_shape: bool = False) -> Callable[..., Any]:
    """Trace `fun` on abstract versions of its arguments and return a ClosedJaxpr."""
    @functools.wraps(fun)
    def make(*args, **kwargs):
        dyn, _, merge = split_static(args, static_argnums)
        closed, out_tree = _make_closed(lambda *d: fun(*merge(d), **kwargs), dyn,
                                        names_from=fun)
        if return_shape:
            shapes = tree_util.tree_unflatten(
                out_tree, [ShapeDtypeStruct(a.shape, a.dtype) for a in closed.out_avals])
            return closed, shapes
        return closed
    return make


def eval_shape(fun, *args, **kwargs):
    """The output of fun(*args, **kwargs) as a pytree of ShapeDtypeStruct, found by tracing
    (no array operation runs); arguments may be arrays or ShapeDtypeStructs, as JAX."""
    closed, out_tree = _make_closed(lambda a, k: fun(*a, **k), (args, kwargs))
    return tree_util.tree_unflatten(
        out_tree, [ShapeDtypeStruct(a.shape, a.dtype) for a in closed.out_avals])


def _make_closed(f, args, names_from=None):
    leaves, in_tree = tree_util.tree_flatten(tuple(args))
    flat, store = flatten_fun(f, in_tree)
    in_avals = [get_aval(canonicalize_value(x)) for x in leaves]     # x32, as JAX
    names = None
    if names_from is not None and len(leaves) == len(args):
        names = _arg_names(names_from, len(args))
    label = None
    if names_from is not None:
        label = f"ft.make_jaxpr of `{getattr(names_from, '__name__', type(names_from).__name__)}`"
    jaxpr, consts = trace_to_jaxpr(flat, in_avals, names, label=label)
    return ClosedJaxpr(jaxpr, consts), store["out_tree"]


class ShapeDtypeStruct:
    __slots__ = ("shape", "dtype")

    def __init__(self, shape, dtype):
        if dtype is None:
            raise ValueError("ShapeDtypeStruct: dtype must be specified.")
        if any(d is None for d in shape):
            raise ValueError(f"ShapeDtypeStruct: `shape` {tuple(shape)} cannot have None.")
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)

    def __repr__(self):
        return f"ShapeDtypeStruct(shape={self.shape}, dtype={self.dtype.name})"

    def __len__(self):
        """The leading axis's size, as an array's (a scalar has no len)."""
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __eq__(self, other):
        return (isinstance(other, ShapeDtypeStruct) and self.shape == other.shape
                and self.dtype == other.dtype)

    def __hash__(self):
        return hash((self.shape, self.dtype))

    ndim = property(lambda self: len(self.shape), doc="the number of axes")
    size = property(lambda self: math.prod(self.shape), doc="the number of elements")
