"""Primitives, bind, traces and tracers, and the thread-local interpreter stack.

The design follows JAX's Autodidax: a thread-local stack of interpreters ("main
traces"); `Primitive.bind` hands its arguments to the innermost interpreter that owns
one of them.
"""
from __future__ import annotations

import threading
from typing import Callable

import numpy as np

from .array import Array, install_operators, value_of, wrap_value
from .arrays import array_module
from .config import DEFAULT_DTYPES, NARROW, config
from .avals import (ConcretizationTypeError, ShapedArray, TracerArrayConversionError,
                    TracerBoolConversionError, TracerIntegerConversionError,
                    UnexpectedTracerError, check_dtype,
                    is_python_scalar)

# ---------------------------------------------------------------------------
# the abstract value of a concrete value or tracer

_SCALAR_AVALS: dict = {}


def _scalar_avals():
    """Python scalars' avals: weakly typed, of the default dtypes (ft.config's x64 flag)."""
    d = DEFAULT_DTYPES
    _SCALAR_AVALS.update({bool: ShapedArray((), np.bool_, False),
                          int: ShapedArray((), d["i"], True),
                          float: ShapedArray((), d["f"], True),
                          complex: ShapedArray((), d["c"], True)})


_scalar_avals()
config.on_update(_scalar_avals)
_aval_cache: dict = {}


def get_aval(x) -> ShapedArray:
    """Abstract value of a concrete value or tracer. Python scalars are weakly typed.
    Avals are immutable, so those of arrays are shared through a cache."""
    t = type(x)
    if t is np.ndarray or isinstance(x, np.generic):
        key = (x.shape, x.dtype)
        a = _aval_cache.get(key)
        if a is None:
            if len(_aval_cache) > 4096:
                _aval_cache.clear()
            a = _aval_cache[key] = ShapedArray(x.shape, check_dtype(x.dtype, "an array"))
        return a
    if t is Array or isinstance(x, Tracer):
        return x.aval
    a = _SCALAR_AVALS.get(t)
    if a is not None:
        return a
    if isinstance(x, np.ma.MaskedArray):     # its mask would be dropped silently
        raise ValueError("numpy masked arrays are not supported as direct inputs to "
                         "functrans functions. Use arr.filled() to convert the value to a "
                         "standard numpy array.")
    dtype = getattr(x, "dtype", None)
    shape = getattr(x, "shape", None)
    if dtype is None or shape is None:
        raise TypeError(f"Value {x!r} of type {t.__name__} is not a valid functrans type; "
                        "pass arrays, Python scalars or pytrees of them.")
    return ShapedArray(shape, check_dtype(dtype, f"a value of type {t.__name__}"))


def canonicalize(x):
    """Python scalars become rank-0 arrays of their default dtype (float32, int32, ...);
    NumPy values are narrowed as canonicalize_value does."""
    if is_python_scalar(x):
        return np.asarray(x, get_aval(x).dtype)
    return canonicalize_value(x)


_keep = threading.local()


def canonicalize_value(x):
    """x as a JAX-side entry point (jit, grad, vmap, control flow, functrans.numpy) takes it:
    with jax_enable_x64 off, a NumPy array or scalar of a 64-bit dtype (float64, int64,
    uint64, complex128) becomes its 32-bit counterpart, as JAX canonicalizes inputs; any
    other value is returned as it is. The facade's ft.func transformations keep float64
    (`keeping_dtypes`)."""
    if NARROW and (type(x) is np.ndarray or isinstance(x, np.generic)):
        to = NARROW.get(x.dtype)
        if to is not None and not getattr(_keep, "on", False):
            return x.astype(to)
    return x


def narrow_dtype(dt):
    """The dtype canonicalize_value gives a NumPy value of dtype dt."""
    to = NARROW.get(dt)
    return dt if to is None or getattr(_keep, "on", False) else to


class keeping_dtypes:
    """Within the block, canonicalize_value leaves 64-bit NumPy values as they are in this
    thread (torch.func's transformations, ft.func, keep float64 as torch does)."""

    def __enter__(self):
        self._old = getattr(_keep, "on", False)
        _keep.on = True

    def __exit__(self, *exc):
        _keep.on = self._old

# ---------------------------------------------------------------------------
# primitives

class Primitive:
    """An operation of the IR. Its rules live in fields, filled by one declaration.

    impl(xp, *vals, **params) runs it on an array module; abstract_eval(*avals,
    **params) is the shape/dtype rule; jvp, transpose and batch are the rules
    read by the transformations; cuda is the expression template of an
    elementwise primitive.
    """
    cpu = fresh = simplify = simplify_late = commutative = None  # set by primitives.defprim
    blas = False        # impl calls BLAS or LAPACK (set by primitives.defprim)

    def __init__(self, name, *, impl=None, abstract_eval=None, multiple_results=False,
                 jvp=None, transpose=None, batch=None, cuda=None, differentiable=True,
                 partial_eval=None, effectful=False, elementwise=False, **extra):
        self.name = name
        self.impl = impl
        self.abstract_eval = abstract_eval
        self.multiple_results = multiple_results
        self.jvp = jvp
        self.transpose = transpose
        self.batch = batch
        self.cuda = cuda
        self.differentiable = differentiable
        self.partial_eval = partial_eval
        self.effectful = effectful
        self.elementwise = elementwise
        self.extra = extra

    def __repr__(self):
        return self.name

    def bind(self, *args, **params):
        state = _thread_state
        if state.dynamic_trace.level == 0:  # eager unless a tracer or a dynamic trace
            for a in args:
                if type(a) is Array:
                    return _bind_arrays(self, args, params)
                if isinstance(a, Tracer):
                    return _bind_slow(self, args, params)
            # the shape rule runs first, so that bad input gets the primitive's own error
            # instead of NumPy silently broadcasting or promoting (skipped inside
            # transformations' own evaluation of programs that are already well typed)
            if not state.trusted:
                out = self.abstract_eval(*[get_aval(a) for a in args], **params)
                if self.multiple_results or out.weak_type:   # of Python scalars only
                    return _weak_results(out, self.impl(array_module(*args), *args, **params))
            return self.impl(array_module(*args), *args, **params)
        return _bind_slow(self, args, params)


def _weak_results(avals, out):
    """The eager result `out` of a bind whose output aval(s) are `avals`: a weakly typed
    output becomes a weak Array (so that it promotes as the traced value would); a strong
    one stays the raw array (functrans.numpy's functions wrap it on their way out)."""
    if type(avals) is list:
        return [wrap_value(o, True) if a.weak_type and type(o) is not Array else o
                for a, o in zip(avals, out)]
    return wrap_value(out, True) if avals.weak_type else out


def _bind_arrays(prim, args, params):
    """bind on concrete values some of which are Arrays: their raw arrays go to the
    implementation (a deleted Array raises here); the shape rule sees their weak types."""
    if has_tracer(args) or _thread_state.dynamic_trace.level:
        return _bind_slow(prim, args, params)
    out_avals = prim.abstract_eval(*[get_aval(a) for a in args], **params)
    raw = [value_of(a) if type(a) is Array else a for a in args]
    return _weak_results(out_avals, prim.impl(array_module(*raw), *raw, **params))


def bind_below(prim, args, params, avals=None):
    """bind from inside an interpreter: straight to the implementation when the values
    are concrete and no dynamic trace is recording (saves a trip through the stack).
    avals: the arguments' avals when the caller already knows them."""
    s = _thread_state
    if s.dynamic_trace.level == 0 and not has_tracer(args):
        for a in args:
            if type(a) is Array:
                return _bind_arrays(prim, args, params)
        if not s.trusted:
            prim.abstract_eval(*(avals or [get_aval(a) for a in args]), **params)
        return prim.impl(array_module(*args), *args, **params)
    return _bind_slow(prim, args, params)


def has_tracer(xs):
    """Whether any of xs is a tracer (a loop: cheaper than any() over a generator)."""
    for x in xs:
        if isinstance(x, Tracer):
            return True
    return False


def _bind_slow(prim, args, params):
    # the highest-level trace among the arguments' (a tracer's own trace object is
    # reused: traces are stateless beyond their main), or the dynamic trace if higher
    top = None
    level = -1
    for a in args:
        if isinstance(a, Tracer):
            t = a._trace
            if t.main.level > level:
                top, level = t, t.main.level
    s = _thread_state
    if top is None or s.dynamic_trace.level > level or \
            level >= len(s.trace_stack) or s.trace_stack[level] is not top.main:
        top = find_top_trace(args, prim)
    main = top.main
    tracers = []                # (a loop: a list comprehension is a call of its own)
    for a in args:
        tracers.append(a if isinstance(a, Tracer) and a._trace.main is main
                       else top.full_raise(a))
    outs = top.process_primitive(prim, tracers, params)
    if prim.multiple_results:
        return [o.full_lower() if isinstance(o, Tracer) else o for o in outs]
    return outs.full_lower() if isinstance(outs, Tracer) else outs


# ---------------------------------------------------------------------------
# traces and tracers

class MainTrace:
    __slots__ = ("level", "trace_type", "global_data")

    def __init__(self, level, trace_type, global_data=None):
        self.level = level
        self.trace_type = trace_type
        self.global_data = global_data

    def __repr__(self):
        return f"MainTrace({self.level}, {self.trace_type.__name__})"


class Trace:
    """An interpreter: turns primitive applications on its tracers into something."""
    transformation = "a transformation"     # how error messages name it to users

    def __init__(self, main: MainTrace):
        self.main = main

    def origin_of(self, tracer):
        """Where `tracer` was created (e.g. "the output of `mul`"), for error messages."""
        origin = tracer._origin
        if isinstance(origin, Primitive):
            return f"the output of `{origin.name}`"
        return origin

    def pure(self, val):
        raise NotImplementedError

    lift = pure

    def full_raise(self, val):
        if not isinstance(val, Tracer):
            return self.pure(val)
        level = self.main.level
        if val._trace.main is self.main:
            return val
        vlevel = val._trace.main.level
        if vlevel < level:
            return self.lift(val)
        # a tracer of the same or a higher level that is not this trace's: its own
        # transformation has finished (the live ones are this trace and those below it)
        raise escaped_tracer_error(val, f"inside {self.transformation}, which is running now")

    def process_primitive(self, primitive, tracers, params):
        raise NotImplementedError


class EvalTrace(Trace):
    """The bottom interpreter: runs the implementation on concrete arrays."""

    def pure(self, val):
        return val

    lift = pure

    def process_primitive(self, primitive, vals, params):
        for v in vals:
            if type(v) is Array:
                return _bind_arrays(primitive, vals, params)
        if not _thread_state.trusted:    # as the eager path: the primitive's own error first
            primitive.abstract_eval(*[get_aval(v) for v in vals], **params)
        return primitive.impl(array_module(*vals), *vals, **params)


class _State(threading.local):
    def __init__(self):
        self.trace_stack = [MainTrace(0, EvalTrace, None)]
        self.dynamic_trace = self.trace_stack[0]
        self.depth = 0
        self.trusted = False


class trusted_eval:
    """Within a transformation's evaluation of rules on well-typed programs, eager binds
    skip their shape rule. (Context managers here are classes: a generator-based one
    costs a few microseconds per use, paid on every transformed call.)"""
    __slots__ = ("prev",)

    def __enter__(self):
        s = _thread_state
        self.prev, s.trusted = s.trusted, True

    def __exit__(self, *exc):
        _thread_state.trusted = self.prev


_thread_state = _State()


class ensure_compile_time_eval:  # noqa: N801  (JAX's name)
    """jax.ensure_compile_time_eval: within the block, an operation whose operands are all
    concrete is computed now, even while jit records a program (whose staged operations on
    constants would otherwise be tracers); operations on tracers still trace."""
    __slots__ = ("prev",)

    def __enter__(self):
        s = _thread_state
        self.prev, s.dynamic_trace = s.dynamic_trace, s.trace_stack[0]
        return self

    def __exit__(self, *exc):
        _thread_state.dynamic_trace = self.prev


def _state():
    return _thread_state


def trace_stack_snapshot():
    """What tests compare before and after a call to check nothing leaked."""
    s = _state()
    return (tuple(s.trace_stack), s.dynamic_trace, s.depth, s.trusted)


class new_main:
    """Push a MainTrace for `trace_type` for the duration of a with-block."""
    __slots__ = ("trace_type", "global_data", "dynamic", "prev")

    def __init__(self, trace_type, global_data=None, dynamic=False):
        self.trace_type, self.global_data, self.dynamic = trace_type, global_data, dynamic

    def __enter__(self):
        s = _thread_state
        main = MainTrace(len(s.trace_stack), self.trace_type, self.global_data)
        s.trace_stack.append(main)
        if self.dynamic:
            self.prev, s.dynamic_trace = s.dynamic_trace, main
        s.depth += 1
        return main

    def __exit__(self, *exc):
        s = _thread_state
        if self.dynamic:
            s.dynamic_trace = self.prev
        s.trace_stack.pop()
        s.depth -= 1


def new_dynamic_main(trace_type, global_data=None):
    """new_main whose trace also becomes the dynamic trace (every bind goes to it)."""
    return new_main(trace_type, global_data, dynamic=True)


def find_top_trace(xs, prim=None) -> Trace:
    s = _thread_state
    top_main = s.trace_stack[0]
    for x in xs:
        if isinstance(x, Tracer):
            m = x._trace.main
            if m.level > top_main.level:
                top_main = m
    if s.dynamic_trace.level > top_main.level:
        top_main = s.dynamic_trace
    if not is_live(top_main):
        dead = next(x for x in xs if isinstance(x, Tracer) and x._trace.main is top_main)
        raise escaped_tracer_error(dead, f"as an operand of `{prim}`" if prim else
                                   "as an operand of a primitive")
    return top_main.trace_type(top_main)


def with_origin(out, prim):
    """Mark the output tracer (or list of tracers) of `prim` as made by it, so that an
    error about the tracer can name it; returns `out`."""
    if type(out) is list:
        for t in out:
            t._origin = prim
    else:
        out._origin = prim
    return out


def is_live(main) -> bool:
    """Whether `main` is on this thread's interpreter stack (its transformation is running)."""
    stack = _thread_state.trace_stack
    return main.level < len(stack) and stack[main.level] is main


def escaped_tracer_error(tracer, use):
    """The UnexpectedTracerError for a tracer whose transformation has finished (or runs
    in another thread): what it is, which primitive or argument made it, under which
    transformation, and how it was used now."""
    trace = tracer._trace
    origin = trace.origin_of(tracer) or "a traced value"
    return UnexpectedTracerError(
        f"Encountered an unexpected tracer: the traced value {tracer.aval.str_short()} "
        f"({origin}, created under {trace.transformation} at level {trace.main.level}) was "
        f"used {use}, after the transformation that created it had finished. It escaped "
        "through a side effect: stored in a global, a list, a closure or an object attribute "
        "(or handed to another thread). A transformed function must return the values it "
        "produces (use has_aux=True for extra outputs), or take them as arguments.")


def full_lower(val):
    return val.full_lower() if isinstance(val, Tracer) else val


def to_concrete(val):
    """A concrete value for val (an array, or a tracer that knows its value), else None."""
    if isinstance(val, Tracer):
        return val.to_concrete_value()
    return val


# Operator overloads of tracers are supplied by functrans.numpy (layer 4) through
# this table, so that the core does not import the numpy layer.
tracer_ops: dict[str, Callable] = {}


def _jax_sentence(aval, what):
    """JAX's own sentence for this concretization (so the message carries the words JAX
    users search for): boolean conversion, __index__, or the conversion function used."""
    ty = f"{aval.dtype.name}[{','.join(map(str, aval.shape))}]"
    if what == "bool()":
        return f"Attempted boolean conversion of traced array with shape {ty}."
    if what.startswith("__index__"):
        return f"The __index__() method was called on traced array with shape {ty}."
    if what in ("float()", "int()", "complex()"):
        fn = what[:-2]
        return (f"The problem arose with the `{fn}` function. If trying to convert the data "
                f"type of a value, try using `x.astype({fn})` or `jnp.array(x, {fn})` "
                "instead.")
    return ""


def _concretization_error(tracer, what, cls=ConcretizationTypeError):
    origin = tracer._trace.origin_of(tracer) or "a traced computation"
    jax_words = _jax_sentence(tracer.aval, what)
    # JAX's messages open with the boolean/__index__ sentence and end with the conversion one
    first = what == "bool()" or what.startswith("__index__")
    return cls(
        (f"{jax_words}\n" if first else "") +
        f"Abstract tracer value encountered where concrete value is expected: {what} was "
        f"called on the traced value {tracer.aval.str_short()} ({origin}), whose value is "
        "not known while the function is being transformed. Python control flow on traced "
        "values cannot be traced: use ft.lax.cond / ft.lax.switch for `if`, "
        "ft.lax.while_loop / ft.lax.fori_loop for loops, or fnp.where for elementwise "
        "choices; or mark the argument static (static_argnums) if it is not an array."
        + (f"\n{jax_words}" if jax_words and not first else ""))


class Tracer:
    """A value being traced by some interpreter; quacks like an array."""
    __array_priority__ = 1000
    __slots__ = ("_trace", "_origin")

    aval: ShapedArray

    @property
    def shape(self):
        return self.aval.shape

    @property
    def dtype(self):
        return self.aval.dtype

    @property
    def ndim(self):
        return self.aval.ndim

    @property
    def size(self):
        return self.aval.size

    @property
    def weak_type(self):
        return self.aval.weak_type

    def __len__(self):
        if not self.aval.shape:
            raise TypeError("len() of unsized object (a rank-0 traced value)")
        return self.aval.shape[0]

    def full_lower(self):
        return self

    def __repr__(self):
        return f"Traced<{self.aval.str_short()}>with<{type(self._trace).__name__}>"

    def to_concrete_value(self):
        """The concrete value behind this tracer when one is known (e.g. a primal under
        grad), so that Python control flow on it works as in JAX; None otherwise."""
        return None

    def _concrete(self, what, cls=ConcretizationTypeError):
        if not is_live(self._trace.main):
            raise escaped_tracer_error(self, f"by {what}")
        val = self.to_concrete_value()
        if val is None:
            raise _concretization_error(self, what, cls)
        return val

    # concretization
    def __bool__(self):
        return bool(self._concrete("bool()", TracerBoolConversionError))

    def __float__(self):
        return float(self._concrete("float()"))

    def __int__(self):
        return int(self._concrete("int()"))

    def __complex__(self):
        return complex(self._concrete("complex()"))

    def __index__(self):
        return int(self._concrete("__index__ (use as a Python index)",
                                  TracerIntegerConversionError))

    def item(self):
        return np.asarray(self._concrete(".item()")).item()

    def tolist(self):
        return np.asarray(self._concrete(".tolist()")).tolist()

    def __array__(self, dtype=None, copy=None):
        if not is_live(self._trace.main):
            raise escaped_tracer_error(self, "by numpy.asarray()")
        raise TracerArrayConversionError(
            f"The numpy.ndarray conversion method __array__() was called on the traced value "
            f"{self.aval.str_short()} ({self._trace.origin_of(self) or 'a traced computation'}"
            "). A traced value cannot become a NumPy array: the array would be a constant "
            "and the transformation would lose it (a derivative silently zero). Use "
            "functrans.numpy (fnp) instead of numpy functions that have no functrans "
            "counterpart, or pass the value as a static argument.")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return tracer_ops["array_ufunc"](ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        return tracer_ops["array_function"](func, types, args, kwargs)

    def __iter__(self):
        if not self.aval.shape:
            raise TypeError("iteration over a rank-0 traced value")
        return (self[i] for i in range(self.aval.shape[0]))

    def __getattr__(self, name):
        op = tracer_ops.get("method:" + name)
        if op is not None:
            return lambda *a, **k: op(self, *a, **k)
        prop = tracer_ops.get("prop:" + name)
        if prop is not None:
            return prop(self)
        if name == "T":
            return tracer_ops["method:transpose"](self)
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")


install_operators(Tracer, tracer_ops)

