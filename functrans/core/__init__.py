"""The IR and the tracing machinery: abstract values, jaxprs, primitives, traces.

Everything else (primitives, transformations, the facade) is built on the few classes
here, split by concern: avals (errors, dtypes, abstract values), arrays (NumPy/CuPy
array modules), trace (Primitive, bind, traces, tracers, the interpreter stack), ir
(atoms, equations, symbolic zeros), evaluate (eval_jaxpr), jaxpr (Jaxpr, ClosedJaxpr),
check (the type checker) and printer (JAX's text layout); devices (device_put, the
"cpu"/"cuda" devices) is imported by name, not from here.
"""
from .arrays import array_module, cupy_array_module
from .avals import (SUPPORTED_DTYPES, AxisError, ConcretizationTypeError, DTypeError,
                    FunctransError, RuleNotImplementedError, ShapedArray, ShapeError,
                    TracerArrayConversionError, TracerBoolConversionError,
                    TracerIntegerConversionError,
                    TypeCheckError, UnexpectedTracerError, check_dtype, is_python_scalar, short_dtype)
from .check import _subjaxprs, check_jaxpr
from .evaluate import eval_impls, eval_jaxpr, run_eqns
from .ir import (Atom, JaxprEqn, Literal, UndefinedPrimal, Var, Zero, is_undefined,
                 structure_key)
from .jaxpr import ClosedJaxpr, Jaxpr
from .printer import pp_jaxpr
from .trace import (EvalTrace, MainTrace, Primitive, Trace, Tracer, _state, _thread_state,
                    bind_below, canonicalize, ensure_compile_time_eval, escaped_tracer_error,
                    find_top_trace, full_lower,
                    get_aval, has_tracer, is_live, with_origin,
                    new_dynamic_main, new_main, to_concrete, trace_stack_snapshot, tracer_ops,
                    trusted_eval)

__all__ = ['array_module', 'cupy_array_module', 'SUPPORTED_DTYPES',
           'AxisError', 'ConcretizationTypeError', 'DTypeError', 'FunctransError',
           'TracerBoolConversionError', 'TracerIntegerConversionError',
           'RuleNotImplementedError', 'ShapedArray', 'ShapeError', 'TracerArrayConversionError',
           'TypeCheckError',
           'UnexpectedTracerError', 'check_dtype', 'is_python_scalar', 'short_dtype',
           '_subjaxprs', 'check_jaxpr', 'eval_impls', 'eval_jaxpr', 'run_eqns', 'Atom',
           'JaxprEqn', 'Literal', 'UndefinedPrimal', 'Var', 'Zero', 'is_undefined',
           'structure_key', 'ClosedJaxpr', 'Jaxpr', 'pp_jaxpr', 'EvalTrace', 'MainTrace',
           'Primitive', 'Trace', 'Tracer', '_state', '_thread_state', 'bind_below',
           'canonicalize', 'escaped_tracer_error', 'find_top_trace', 'is_live', 'full_lower', 'get_aval', 'has_tracer',
           'new_dynamic_main', 'new_main', 'to_concrete', 'trace_stack_snapshot',
           'tracer_ops', 'trusted_eval', 'with_origin', 'ensure_compile_time_eval']
