"""The IR and the tracing machinery: abstract values, jaxprs, primitives, traces.

Everything else (primitives, transformations, the facade) is built on the few
classes here. The design follows JAX's Autodidax: a thread-local stack of
interpreters ("main traces"); `Primitive.bind` hands its arguments to the
innermost interpreter that owns one of them.
"""
from __future__ import annotations

import itertools
import math
import threading
from typing import Any, Callable, NamedTuple

import numpy as np

# ---------------------------------------------------------------------------
# errors


class FunctransError(Exception):
    """Base class of every error functrans raises on purpose."""


class ShapeError(FunctransError, ValueError):
    """Operands of a primitive have incompatible shapes."""


class DTypeError(FunctransError, TypeError):
    """Operands of a primitive have unsupported or mismatched dtypes."""


class ConcretizationTypeError(FunctransError, TypeError):
    """A traced (abstract) value was used where Python needs a concrete one."""


class UnexpectedTracerError(FunctransError):
    """A tracer escaped the transformation that created it."""


class TypeCheckError(FunctransError):
    """A jaxpr is not well typed (a bug in a transformation or a rule)."""


class RuleNotImplementedError(FunctransError, NotImplementedError):
    """A primitive lacks the rule a transformation needs."""


# ---------------------------------------------------------------------------
# dtypes and abstract values

_SHORT = {
    "float16": "f16", "float32": "f32", "float64": "f64", "bfloat16": "bf16",
    "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64",
    "bool": "bool", "complex64": "c64", "complex128": "c128",
}
SUPPORTED_DTYPES = frozenset(np.dtype(n) for n in _SHORT if n != "bfloat16")


def short_dtype(dtype) -> str:
    return _SHORT.get(np.dtype(dtype).name, np.dtype(dtype).name)


def check_dtype(dtype, what="value"):
    dtype = np.dtype(dtype)
    if dtype not in SUPPORTED_DTYPES:
        raise DTypeError(
            f"functrans does not support dtype {dtype} (for {what}); supported dtypes are "
            "bool, (u)int8/16/32/64, float16/32/64 and complex64/128.")
    return dtype


class ShapedArray:
    """Abstract value: what a tracer knows about an array (shape, dtype, weak type)."""
    __slots__ = ("shape", "dtype", "weak_type", "_hash")

    def __init__(self, shape, dtype, weak_type=False):
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.weak_type = bool(weak_type)
        self._hash = None

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return math.prod(self.shape)

    def update(self, shape=None, dtype=None, weak_type=None):
        return ShapedArray(self.shape if shape is None else shape,
                           self.dtype if dtype is None else dtype,
                           self.weak_type if weak_type is None else weak_type)

    def strip_weak(self):
        return ShapedArray(self.shape, self.dtype) if self.weak_type else self

    def str_short(self):
        return f"{short_dtype(self.dtype)}[{','.join(map(str, self.shape))}]"

    def __eq__(self, other):
        return (type(other) is ShapedArray and self.shape == other.shape
                and self.dtype == other.dtype and self.weak_type == other.weak_type)

    def __hash__(self):
        h = self._hash
        if h is None:
            h = self._hash = hash((self.shape, self.dtype, self.weak_type))
        return h

    def __repr__(self):
        return f"ShapedArray({self.str_short()}{', weak_type=True' if self.weak_type else ''})"


def is_python_scalar(x):
    return type(x) in (bool, int, float, complex)


_SCALAR_AVALS = {bool: ShapedArray((), np.bool_, False), int: ShapedArray((), np.int32, True),
                 float: ShapedArray((), np.float32, True),
                 complex: ShapedArray((), np.complex64, True)}
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
    if isinstance(x, Tracer):
        return x.aval
    a = _SCALAR_AVALS.get(t)
    if a is not None:
        return a
    dtype = getattr(x, "dtype", None)
    shape = getattr(x, "shape", None)
    if dtype is None or shape is None:
        raise TypeError(f"Value {x!r} of type {t.__name__} is not a valid functrans type; "
                        "pass arrays, Python scalars or pytrees of them.")
    return ShapedArray(shape, check_dtype(dtype, f"a value of type {t.__name__}"))


def canonicalize(x):
    """Python scalars become rank-0 arrays of their default dtype (float32, int32, ...)."""
    if is_python_scalar(x):
        return np.asarray(x, get_aval(x).dtype)
    return x


# ---------------------------------------------------------------------------
# array modules (NumPy on "cpu", CuPy on "cuda")

def array_module(*vals):
    """`numpy` unless one of the values is a CuPy array (then cupy, wrapped so that NumPy
    operands such as literals are accepted: see functrans.devices.cupy_array_module)."""
    for v in vals:
        t = type(v)
        if t is np.ndarray:
            continue
        if t.__module__.startswith("cupy"):
            from .devices import cupy_array_module
            return cupy_array_module()
    return np


# ---------------------------------------------------------------------------
# the IR

class Var:
    """A jaxpr variable; identity matters, the name is given by the printer."""
    __slots__ = ("aval", "count")
    _counter = itertools.count()

    def __init__(self, aval: ShapedArray):
        self.aval = aval
        self.count = next(Var._counter)

    def __repr__(self):
        return f"Var({self.aval.str_short()})"


class Literal:
    """A scalar constant inlined into an equation."""
    __slots__ = ("val", "aval")

    def __init__(self, val, aval=None):
        self.aval = get_aval(val) if aval is None else aval
        self.val = np.asarray(val, self.aval.dtype) if is_python_scalar(val) else val

    def __repr__(self):
        return f"Literal({self.val})"


Atom = Any  # Var | Literal


class JaxprEqn(NamedTuple):
    primitive: "Primitive"
    invars: list
    params: dict
    outvars: list


class Jaxpr:
    """A closed-over-nothing program: typed inputs, equations, outputs."""
    __slots__ = ("constvars", "invars", "eqns", "outvars", "_runs", "_compiled", "_skey")

    def __init__(self, constvars, invars, eqns, outvars):
        self._runs = 0
        self._compiled = None        # its _Program once it runs a second time
        self._skey = None            # its structure_key, once computed
        self.constvars = list(constvars)
        self.invars = list(invars)
        self.eqns = list(eqns)
        self.outvars = list(outvars)

    @property
    def in_avals(self):
        return [v.aval for v in self.invars]

    @property
    def out_avals(self):
        return [v.aval for v in self.outvars]

    def __str__(self):
        return pp_jaxpr(self)

    __repr__ = __str__


class ClosedJaxpr:
    """A jaxpr together with the values of its constvars.

    Equal (and equally hashed) when the jaxprs have the same structure and the consts are
    the same objects: a control-flow body traced again at every call is then the same
    parameter for every cache keyed by params (derived gradients, staged rules, programs)."""
    __slots__ = ("jaxpr", "consts", "_hash")

    def __init__(self, jaxpr: Jaxpr, consts):
        self.jaxpr = jaxpr
        self.consts = list(consts)
        self._hash = None

    def _key(self):
        """The hash of (structure, const ids), or False when a param is not hashable (the
        jaxpr then compares by identity)."""
        h = self._hash
        if h is None:
            try:
                h = hash((structure_key(self.jaxpr), tuple(map(id, self.consts))))
            except TypeError:
                h = False
            self._hash = h
        return h

    def __hash__(self):
        h = self._key()
        return h if h is not False else id(self)

    def __eq__(self, other):
        if self is other:
            return True
        if type(other) is not ClosedJaxpr:
            return NotImplemented
        h = self._key()
        return (h is not False and h == other._key() and len(self.consts) == len(other.consts)
                and all(a is b for a, b in zip(self.consts, other.consts))
                and structure_key(self.jaxpr) == structure_key(other.jaxpr))

    in_avals = property(lambda self: self.jaxpr.in_avals)
    out_avals = property(lambda self: self.jaxpr.out_avals)
    eqns = property(lambda self: self.jaxpr.eqns)

    def __call__(self, *args):
        return eval_jaxpr(self.jaxpr, self.consts, *args)

    def __str__(self):
        return pp_jaxpr(self.jaxpr)

    __repr__ = __str__


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
                if isinstance(a, Tracer):
                    return _bind_slow(self, args, params)
            # the shape rule runs first, so that bad input gets the primitive's own error
            # instead of NumPy silently broadcasting or promoting (skipped inside
            # transformations' own evaluation of programs that are already well typed)
            if not state.trusted:
                self.abstract_eval(*[get_aval(a) for a in args], **params)
            return self.impl(array_module(*args), *args, **params)
        return _bind_slow(self, args, params)


def bind_below(prim, args, params, avals=None):
    """bind from inside an interpreter: straight to the implementation when the values
    are concrete and no dynamic trace is recording (saves a trip through the stack).
    avals: the arguments' avals when the caller already knows them."""
    s = _thread_state
    if s.dynamic_trace.level == 0 and not has_tracer(args):
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
        top = find_top_trace(args)
    main = top.main
    tracers = [a if isinstance(a, Tracer) and a._trace.main is main else top.full_raise(a)
               for a in args]
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

    def __init__(self, main: MainTrace):
        self.main = main

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
        if vlevel > level:
            raise UnexpectedTracerError(
                f"Encountered an unexpected tracer {val} from a transformation that has "
                "already finished (it escaped through a side effect, e.g. a global or a "
                "closure list). Return values out of transformed functions instead.")
        raise UnexpectedTracerError(
            f"Different traces at the same level: {val._trace.main} vs {self.main}")

    def process_primitive(self, primitive, tracers, params):
        raise NotImplementedError


class EvalTrace(Trace):
    """The bottom interpreter: runs the implementation on concrete arrays."""

    def pure(self, val):
        return val

    lift = pure

    def process_primitive(self, primitive, vals, params):
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


def find_top_trace(xs) -> Trace:
    s = _thread_state
    top_main = s.trace_stack[0]
    for x in xs:
        if isinstance(x, Tracer):
            m = x._trace.main
            if m.level > top_main.level:
                top_main = m
    if s.dynamic_trace.level > top_main.level:
        top_main = s.dynamic_trace
    if top_main.level >= len(s.trace_stack) or s.trace_stack[top_main.level] is not top_main:
        raise UnexpectedTracerError(
            f"A tracer from a finished transformation ({top_main.trace_type.__name__}) was "
            "passed to a primitive: it escaped its transformation (through a global, an "
            "attribute or a closure list). Return values out of transformed functions instead.")
    return top_main.trace_type(top_main)


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


def _concretization_error(tracer, what):
    origin = getattr(tracer, "_origin", None) or "a traced computation"
    return ConcretizationTypeError(
        f"Abstract tracer value encountered where a concrete value is expected: {what} was "
        f"called on the traced value {tracer.aval.str_short()} ({origin}), whose value is "
        "not known while the function is being transformed. Python control flow on traced "
        "values cannot be traced: use ft.lax.cond / ft.lax.switch for `if`, "
        "ft.lax.while_loop / ft.lax.fori_loop for loops, or fnp.where for elementwise "
        "choices; or mark the argument static (static_argnums) if it is not an array.")


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

    def _concrete(self, what):
        val = self.to_concrete_value()
        if val is None:
            raise _concretization_error(self, what)
        return val

    # concretization
    def __bool__(self):
        return bool(self._concrete("bool()"))

    def __float__(self):
        return float(self._concrete("float()"))

    def __int__(self):
        return int(self._concrete("int()"))

    def __complex__(self):
        return complex(self._concrete("complex()"))

    def __index__(self):
        return int(self._concrete("__index__ (use as a Python index)"))

    def item(self):
        return np.asarray(self._concrete(".item()")).item()

    def tolist(self):
        return np.asarray(self._concrete(".tolist()")).tolist()

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self._concrete("numpy.asarray()"), dtype=dtype)

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


def _def_op(name, key, reflected=False):
    if reflected:
        def op(self, other):
            return tracer_ops[key](other, self)
    else:
        def op(self, *args):
            return tracer_ops[key](self, *args)
    op.__name__ = name
    setattr(Tracer, name, op)


for _name, _key in [("add", "add"), ("sub", "subtract"), ("mul", "multiply"),
                    ("truediv", "true_divide"), ("floordiv", "floor_divide"),
                    ("mod", "remainder"), ("pow", "power"), ("matmul", "matmul"),
                    ("and", "bitwise_and"), ("or", "bitwise_or"), ("xor", "bitwise_xor")]:
    _def_op(f"__{_name}__", _key)
    _def_op(f"__r{_name}__", _key, reflected=True)
for _name, _key in [("neg", "negative"), ("pos", "positive"), ("abs", "abs"),
                    ("invert", "invert"), ("lt", "less"), ("le", "less_equal"),
                    ("gt", "greater"), ("ge", "greater_equal"), ("eq", "equal"),
                    ("ne", "not_equal"), ("getitem", "getitem")]:
    _def_op(f"__{_name}__", _key)
Tracer.__hash__ = None  # tracers define __eq__ elementwise, so they are unhashable


# ---------------------------------------------------------------------------
# evaluating a jaxpr

def eval_jaxpr(jaxpr: Jaxpr, consts, *args):
    """Run a jaxpr by binding its equations (so it works under any transformation)."""
    vals = _inputs(jaxpr, consts, args)
    if _thread_state.depth == 0 and not has_tracer(vals):
        return _eval_jaxpr_concrete(jaxpr, vals)
    env = dict(zip(jaxpr.constvars + jaxpr.invars, vals))
    run_eqns(jaxpr.eqns, env, lambda prim, params, ins: prim.bind(*ins, **params))
    return [env[a] if type(a) is Var else a.val for a in jaxpr.outvars]


def run_eqns(eqns, env, apply):
    """Interpret equations: env maps Vars to values and is extended with their outputs;
    apply(primitive, params, inputs) computes one equation."""
    for eqn in eqns:
        out = apply(eqn.primitive, eqn.params,
                    [env[a] if type(a) is Var else a.val for a in eqn.invars])
        if eqn.primitive.multiple_results:
            for v, x in zip(eqn.outvars, out, strict=True):
                env[v] = x
        else:
            env[eqn.outvars[0]] = out


def _inputs(jaxpr, consts, args):
    if len(args) != len(jaxpr.invars):
        raise TypeError(f"jaxpr takes {len(jaxpr.invars)} arguments, got {len(args)}")
    if len(consts) != len(jaxpr.constvars):
        raise ValueError(f"jaxpr has {len(jaxpr.constvars)} constvars, got {len(consts)} "
                         "consts")
    return [*consts, *args]


def eval_jaxpr_concrete(jaxpr: Jaxpr, consts, *args):
    """eval_jaxpr for callers that know every input is a concrete array, even while
    transformations are active (the implementations run directly)."""
    return _eval_jaxpr_concrete(jaxpr, _inputs(jaxpr, consts, args))


def _eval_jaxpr_concrete(jaxpr: Jaxpr, vals: list):
    """eval_jaxpr on concrete arrays (vals: consts then args): the jaxpr is already well
    typed, so the implementations are called directly. A jaxpr evaluated more than once
    runs as compiled code (see _Program)."""
    xp = array_module(*vals)
    jaxpr._runs += 1
    if jaxpr._runs > 1:
        prog = jaxpr._compiled
        if prog is None:
            prog = jaxpr._compiled = _program_of(jaxpr)
        if xp is np:
            prog.runs += 1
            hot = prog.hot
            if hot is None and prog.runs >= HOT_RUNS:
                hot = prog.hot = optimized_program(jaxpr)
            if hot:
                return hot(*vals)
        return prog.straight(xp, *vals)
    env = dict(zip(jaxpr.constvars + jaxpr.invars, vals))
    run_eqns(jaxpr.eqns, env, lambda prim, params, ins: prim.impl(xp, *ins, **params))
    return [env[a] if type(a) is Var else a.val for a in jaxpr.outvars]


# A program that keeps being evaluated on NumPy arrays (the derived backward programs of
# a training loop) is handed to the jit's CPU lowering (in-place ufuncs, fused elementwise
# groups) after HOT_RUNS runs; functrans.jit registers the lowering here, so that the core
# does not import it.
HOT_RUNS = 8
_optimizing_compiler = None


class _Program:
    """The compiled forms of one jaxpr structure, shared by equal jaxprs (a loop body traced
    again at every call of an un-jitted scan compiles once, not at every call)."""
    __slots__ = ("straight", "hot", "runs")

    def __init__(self, straight):
        self.straight, self.hot, self.runs = straight, None, 0


_PROGRAMS: dict = {}
_PROGRAMS_SIZE = 1024


def _program_of(jaxpr: Jaxpr) -> _Program:
    key = structure_key(jaxpr)
    try:
        prog = _PROGRAMS.get(key)
    except TypeError:                   # an unhashable param: not shared
        return _Program(_compile_straight_line(jaxpr))
    if prog is None:
        if len(_PROGRAMS) >= _PROGRAMS_SIZE:
            _PROGRAMS.clear()
        prog = _PROGRAMS[key] = _Program(_compile_straight_line(jaxpr))
    return prog


def structure_key(jaxpr: Jaxpr):
    """Everything a compiled jaxpr depends on: avals, primitives, params, literal values
    and the dataflow (variables numbered in order of definition). Computed once per jaxpr
    (jaxprs are not modified after construction)."""
    k = jaxpr._skey
    if k is None:
        k = jaxpr._skey = _compute_structure_key(jaxpr)
    return k


def _compute_structure_key(jaxpr: Jaxpr):
    num: dict = {}

    def atom(a):
        if type(a) is Var:
            return num[a]
        v = np.asarray(a.val)
        return ("lit", v.dtype.str, v.shape, v.tobytes(), a.aval.weak_type)
    for v in jaxpr.constvars + jaxpr.invars:
        num[v] = len(num)
    eqns = []
    for e in jaxpr.eqns:
        ins = tuple([atom(a) for a in e.invars])
        for v in e.outvars:
            num[v] = len(num)
        eqns.append((e.primitive, tuple(e.params.items()), ins,
                     tuple([v.aval for v in e.outvars])))
    return (tuple([v.aval for v in jaxpr.constvars]), tuple([v.aval for v in jaxpr.invars]),
            tuple(eqns), tuple([atom(a) for a in jaxpr.outvars]))


def set_optimizing_compiler(fn):
    """fn(jaxpr) -> callable(*consts, *args) -> outputs, or None when it cannot lower it."""
    global _optimizing_compiler
    _optimizing_compiler = fn


def optimized_program(jaxpr: Jaxpr):
    """The optimizing compiler's executable for a hot jaxpr, or False (keep the
    straight-line code) when none is registered or it declines."""
    if _optimizing_compiler is None or not jaxpr.eqns or \
            any(e.primitive.effectful for e in jaxpr.eqns):   # callbacks run as written
        return False
    return _optimizing_compiler(jaxpr) or False


def concrete_program(closed: ClosedJaxpr):
    """closed as a function (xp, *args) -> outputs on concrete arrays, evaluated like
    eval_jaxpr_concrete (straight-line code, the optimizing compiler's once hot)."""
    jaxpr, consts = closed.jaxpr, list(closed.consts)

    def run(xp, *args):
        return eval_jaxpr_concrete(jaxpr, consts, *args)
    run.closed = closed
    return run


def _compile_straight_line(jaxpr: Jaxpr):
    """Python source with one line per equation, each calling impl(xp, ...) bound to its
    params; literals and the bound implementations live in the function's globals."""
    import functools
    names: dict = {}
    glob: dict = {}

    def name(a):
        if type(a) is Literal:
            key = f"k{len(glob)}"
            glob[key] = a.val
            return key
        return names.setdefault(a, f"v{len(names)}")
    args = [name(v) for v in jaxpr.constvars + jaxpr.invars]
    lines = [f"def run(xp, {', '.join(args)}):" if args else "def run(xp):"]
    for i, eqn in enumerate(jaxpr.eqns):
        fn = f"f{i}"
        glob[fn] = functools.partial(eqn.primitive.impl, **eqn.params) if eqn.params \
            else eqn.primitive.impl
        ins = ", ".join(["xp"] + [name(a) for a in eqn.invars])
        outs = ", ".join(name(v) for v in eqn.outvars)
        if eqn.primitive.multiple_results and not eqn.outvars:
            lines.append(f"    {fn}({ins})")
            continue
        if eqn.primitive.multiple_results:
            outs += ","
        lines.append(f"    {outs} = {fn}({ins})")
    lines.append(f"    return [{', '.join(name(a) for a in jaxpr.outvars)}]")
    exec(compile("\n".join(lines), f"<jaxpr {id(jaxpr):x}>", "exec"), glob)
    return glob["run"]


# ---------------------------------------------------------------------------
# the type checker

def _aval_matches(declared: ShapedArray, computed: ShapedArray):
    return declared.shape == computed.shape and declared.dtype == computed.dtype


def check_jaxpr(jaxpr: Jaxpr) -> None:
    """Verify every equation against its primitive's shape rule; raise TypeCheckError."""
    defined: set = set()

    def read(atom, where):
        if type(atom) is Literal:
            if atom.aval.shape != np.shape(atom.val):
                raise TypeCheckError(f"literal {atom.val} has aval {atom.aval} ({where})")
            return atom.aval
        if atom not in defined:
            raise TypeCheckError(f"variable {atom} used before it is defined ({where})")
        return atom.aval

    def define(v, where):
        if v in defined:
            raise TypeCheckError(f"variable {v} defined twice ({where})")
        defined.add(v)

    for v in jaxpr.constvars:
        define(v, "constvars")
    for v in jaxpr.invars:
        define(v, "invars")
    for i, eqn in enumerate(jaxpr.eqns):
        where = f"equation {i}: {eqn.primitive.name}"
        in_avals = [read(a, where) for a in eqn.invars]
        for sub in _subjaxprs(eqn.params):
            check_jaxpr(sub)
        try:
            out = eqn.primitive.abstract_eval(*in_avals, **eqn.params)
        except FunctransError as e:
            raise TypeCheckError(f"{where} failed its shape rule: {e}") from e
        outs = out if eqn.primitive.multiple_results else [out]
        if len(outs) != len(eqn.outvars):
            raise TypeCheckError(f"{where} declares {len(eqn.outvars)} outputs, rule gives {len(outs)}")
        for v, a in zip(eqn.outvars, outs):
            if not _aval_matches(v.aval, a):
                raise TypeCheckError(
                    f"{where} declares output {v.aval.str_short()} but its shape rule gives "
                    f"{a.str_short()}")
            define(v, where)
    for a in jaxpr.outvars:
        read(a, "outvars")


def _subjaxprs(params):
    for v in params.values():
        if isinstance(v, ClosedJaxpr):
            yield v.jaxpr
        elif isinstance(v, Jaxpr):
            yield v
        elif isinstance(v, tuple):
            for w in v:
                if isinstance(w, ClosedJaxpr):
                    yield w.jaxpr
                elif isinstance(w, Jaxpr):
                    yield w


# ---------------------------------------------------------------------------
# the printer (JAX's layout)

def _var_names():
    letters = "abcdefghijklmnopqrstuvwxyz"
    for n in itertools.count(1):
        for combo in itertools.product(letters, repeat=n):
            if n > 1 and combo[0] == "a":
                continue
            yield "".join(combo)


class _Namer:
    def __init__(self):
        self.names: dict = {}
        self.gen = _var_names()

    def __call__(self, v):
        name = self.names.get(v)
        if name is None:
            name = self.names[v] = next(self.gen)
        return name


def _pp_literal(lit: Literal):
    val = np.asarray(lit.val)
    if val.dtype == np.bool_:
        s = "True" if bool(val) else "False"
    elif val.dtype.kind == "f":
        s = repr(float(val))
    elif val.dtype.kind in "iu":
        s = str(int(val))
    else:
        s = str(val.item() if val.ndim == 0 else val)
    return f"{s}:{lit.aval.str_short()}"


def _is_jaxpr_param(v):
    return isinstance(v, (ClosedJaxpr, Jaxpr)) or (
        isinstance(v, tuple) and v and all(isinstance(w, (ClosedJaxpr, Jaxpr)) for w in v))


def _pp_param(v, namer, indent):
    """A param printed at column `indent` (nested jaxprs indented under it)."""
    if isinstance(v, (ClosedJaxpr, Jaxpr)):
        return _pp(v.jaxpr if isinstance(v, ClosedJaxpr) else v, namer, indent)
    if _is_jaxpr_param(v):
        return "(\n" + "".join(" " * (indent + 2) + _pp_param(w, namer, indent + 2) + "\n"
                               for w in v) + " " * indent + ")"
    if isinstance(v, np.dtype):
        return v.name
    if isinstance(v, type) and issubclass(v, np.generic):
        return np.dtype(v).name
    if callable(v) and hasattr(v, "__name__"):
        return v.__name__
    return repr(v) if isinstance(v, str) else str(v)


def _pp_eqn(eqn, namer, indent):
    outs = " ".join(f"{namer(v)}:{v.aval.str_short()}" for v in eqn.outvars)
    params = ""
    if any(_is_jaxpr_param(v) for v in eqn.params.values()):   # one param a line, as JAX
        params = "[\n" + "".join(f"{' ' * (indent + 2)}{k}={_pp_param(v, namer, indent + 2)}\n"
                                 for k, v in sorted(eqn.params.items())) + " " * indent + "]"
    elif eqn.params:
        params = "[" + " ".join(f"{k}={_pp_param(v, namer, indent)}"
                                for k, v in sorted(eqn.params.items())) + "]"
    args = " ".join(namer(a) if type(a) is Var else _pp_literal(a) for a in eqn.invars)
    return f"{outs} = {eqn.primitive.name}{params} {args}".rstrip()


def _pp(jaxpr: Jaxpr, namer, indent=0, force_multiline=False):
    consts = " ".join(f"{namer(v)}:{v.aval.str_short()}" for v in jaxpr.constvars)
    ins = " ".join(f"{namer(v)}:{v.aval.str_short()}" for v in jaxpr.invars)
    head = f"{{ lambda {consts}{' ' if consts else ''}; {ins}. let"
    eqns = [_pp_eqn(e, namer, indent + 4) for e in jaxpr.eqns]
    outs = "(" + ", ".join(namer(a) if type(a) is Var else _pp_literal(a)
                           for a in jaxpr.outvars) + ("," if len(jaxpr.outvars) == 1 else "") + ")"
    one_line = f"{head} {' '.join(eqns)}{' ' if eqns else ''}in {outs} }}"
    if (not force_multiline and len(eqns) <= 1 and "\n" not in one_line
            and len(one_line) + indent <= 80):
        return one_line
    pad = " " * (indent + 4)
    body = "".join(f"\n{pad}{e}" for e in eqns)
    return f"{head}{body}\n{' ' * (indent + 2)}in {outs} }}"


def pp_jaxpr(jaxpr: Jaxpr) -> str:
    return _pp(jaxpr, _Namer())


# ---------------------------------------------------------------------------
# symbolic values used by the differentiation rules

class Zero:
    """A symbolic zero tangent or cotangent: costs nothing until instantiated."""
    __slots__ = ("aval",)

    def __init__(self, aval: ShapedArray):
        self.aval = aval

    def __repr__(self):
        return f"Zero({self.aval.str_short()})"


class UndefinedPrimal:
    """Marks a linear input of an equation during transposition."""
    __slots__ = ("aval",)

    def __init__(self, aval: ShapedArray):
        self.aval = aval

    def __repr__(self):
        return f"UndefinedPrimal({self.aval.str_short()})"


def is_undefined(x):
    return type(x) is UndefinedPrimal
