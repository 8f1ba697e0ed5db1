"""Errors name what went wrong (primitive, shapes, dtypes, the traced value) and leave the
trace stack as it was."""
from __future__ import annotations

import re

import numpy as np
import pytest

import functrans as ft
import functrans.numpy as fnp
from functrans import core
from functrans.primitives import elementwise as ew

pytestmark = pytest.mark.usefixtures("x64")  # float64 references: conftest.x64

F32 = np.float32


@pytest.fixture
def stack_unchanged():
    """Checks, in the test body, that the stack right after each error is as before."""
    before = core.trace_stack_snapshot()

    def check():
        assert core.trace_stack_snapshot() == before
    return check


def _raises(exc, f, *patterns):
    """f() raises exc and its message contains every pattern (regexes)."""
    with pytest.raises(exc) as info:
        f()
    msg = str(info.value)
    for p in patterns:
        assert re.search(p, msg), f"{p!r} not in error message: {msg}"
    return msg


TRACE = {
    "eager": lambda f, *args: f(*args),
    "make_jaxpr": lambda f, *args: ft.make_jaxpr(f)(*args),
    "grad": lambda f, *args: ft.grad(lambda *a: fnp.sum(f(*a)))(*args),
    "vmap": lambda f, *args: ft.vmap(f)(*[np.stack([a, a]) for a in args]),
}


@pytest.mark.parametrize("mode", list(TRACE))
def test_lax_shape_mismatch_names_primitive_and_shapes(mode, stack_unchanged):
    a, b = np.ones(3, F32), np.ones(4, F32)
    # (under vmap the shapes named are the batched ones)
    _raises(ft.ShapeError, lambda: TRACE[mode](ew.add, a, b), r"\badd\b", r"f32\[(2,)?3\]",
            r"f32\[(2,)?4\]")
    stack_unchanged()


@pytest.mark.parametrize("mode", list(TRACE))
def test_fnp_broadcast_mismatch_names_primitive_and_shapes(mode, stack_unchanged):
    a, b = np.ones(3, F32), np.ones(4, F32)
    _raises(ft.ShapeError, lambda: TRACE[mode](fnp.add, a, b), r"\badd\b", r"\(3,\)",
            r"\(4,\)")
    stack_unchanged()


def test_shape_errors_are_value_errors(stack_unchanged):
    with pytest.raises(ValueError):
        fnp.multiply(np.ones((2, 3)), np.ones((3, 2)))
    stack_unchanged()


def test_shape_errors_are_also_type_errors_as_jaxs(stack_unchanged):
    """JAX raises TypeError for incompatible shapes (add, reshape, dot, concatenate);
    ShapeError is one too, so code catching either library's class catches it."""
    for f in (lambda: fnp.add(np.ones(3), np.ones(2)),
              lambda: fnp.reshape(np.ones(6), (4, 2)),
              lambda: fnp.dot(np.ones((2, 3)), np.ones((2, 3))),
              lambda: fnp.concatenate([np.ones((2, 3)), np.ones(3)])):
        with pytest.raises(TypeError):
            f()
        stack_unchanged()
    with pytest.raises(IndexError):            # an axis out of bounds: NumPy's AxisError
        fnp.sum(np.ones(3), axis=1)


@pytest.mark.parametrize("f, patterns", [
    (lambda: ft.lax.reshape(np.ones(6), new_sizes=(4,)), [r"reshape", r"f64\[6\]", r"\(4,\)"]),
    (lambda: ft.lax.dot_general(np.ones((2, 3)), np.ones((4, 2)),
                                dimension_numbers=(((1,), (0,)), ((), ()))),
     [r"dot_general", r"f64\[2,3\]", r"f64\[4,2\]"]),
    (lambda: ft.lax.concatenate([np.ones((2, 3)), np.ones((2, 4))], dimension=0),
     [r"concatenate", r"f64\[2,3\]", r"f64\[2,4\]"]),
    (lambda: ft.lax.broadcast_in_dim(np.ones(3), shape=(2, 4), broadcast_dimensions=(1,)),
     [r"broadcast_in_dim", r"f64\[3\]", r"\(2, 4\)"]),
    (lambda: ft.lax.transpose(np.ones((2, 3)), permutation=(0, 0)),
     [r"transpose", r"f64\[2,3\]"]),
    (lambda: ft.lax.select(np.ones(3, bool), np.ones(3), np.ones(4)),
     [r"select", r"f64\[3\]", r"f64\[4\]"]),
    (lambda: fnp.matmul(np.ones((2, 3)), np.ones((4, 5))), [r"matmul", r"\(2, 3\)",
                                                            r"\(4, 5\)"]),
    (lambda: fnp.reshape(np.ones(6), (4, -1)), [r"\(6,\)", r"\(4, -1\)"]),
])
def test_other_shape_errors_name_the_operation_and_shapes(f, patterns, stack_unchanged):
    _raises(ValueError, f, *patterns)
    _raises(ValueError, lambda: ft.make_jaxpr(lambda: f())(), *patterns)
    stack_unchanged()


@pytest.mark.parametrize("mode", ["eager", "make_jaxpr"])
def test_dtype_mismatch_names_primitive_and_dtypes(mode, stack_unchanged):
    a, b = np.ones(3, F32), np.ones(3, np.float64)
    msg = _raises(ft.DTypeError, lambda: TRACE[mode](ew.mul, a, b), r"\bmul\b", r"f32\[3\]",
                  r"f64\[3\]")
    assert "convert_element_type" in msg          # says what to do next
    _raises(ft.DTypeError, lambda: TRACE[mode](ew.sin, np.ones(3, np.int32)), r"\bsin\b",
            r"i32\[3\]")
    _raises(TypeError, lambda: TRACE[mode](ew.sin, np.ones(3, np.int32)))   # a TypeError too
    stack_unchanged()


# ---------------------------------------------------------------------------
# Python control flow on traced values

def _if_positive(x):
    if x > 0:
        return x
    return -x


CONCRETIZE = {         # name -> (function, what the message names, the traced value)
    "if": (_if_positive, r"bool\(\)", r"bool\[\]"),
    "float": (lambda x: float(x), r"float\(\)", r"f32\[\]"),
    "int": (lambda x: int(x), r"int\(\)", r"f32\[\]"),
    "item": (lambda x: x.item(), r"\.item\(\)", r"f32\[\]"),
    "while": (lambda x: [x := x * 0.5 for _ in range(3)] and (x if x < 1 else x), r"bool",
              r"bool\[\]"),
}


@pytest.mark.parametrize("name", list(CONCRETIZE))
@pytest.mark.parametrize("transform", ["make_jaxpr", "vmap", "jvp+make_jaxpr"])
def test_python_control_flow_on_traced_value(name, transform, stack_unchanged):
    f, what, value = CONCRETIZE[name]
    x = np.float32(2.0)
    run = {
        "make_jaxpr": lambda: ft.make_jaxpr(f)(x),
        "vmap": lambda: ft.vmap(f)(np.float32([1.0, 2.0])),
        "jvp+make_jaxpr": lambda: ft.make_jaxpr(lambda v: ft.jvp(f, (v,), (v,)))(x),
    }[transform]
    msg = _raises(ft.ConcretizationTypeError, run, what, r"ft\.lax\.cond", value)
    assert "traced value" in msg
    stack_unchanged()


@pytest.mark.parametrize("transform", ["make_jaxpr", "vmap", "grad", "jvp"])
def test_numpy_conversion_of_traced_value_raises(transform, stack_unchanged):
    """np.asarray(tracer) raises under every transformation, as JAX's
    TracerArrayConversionError: under grad the array would be a constant and the
    derivative silently wrong (d/dx sum(asarray(x) * x) came out as x, not 2x)."""
    def f(x):
        return fnp.sum(np.asarray(x) * x)
    x = np.float64(2.0)
    run = {"make_jaxpr": lambda: ft.make_jaxpr(f)(x),
           "vmap": lambda: ft.vmap(f)(np.ones(2)),
           "grad": lambda: ft.grad(f)(x),
           "jvp": lambda: ft.jvp(f, (x,), (x,))}[transform]
    msg = _raises(ft.TracerArrayConversionError, run, r"__array__\(\)", r"f64\[")
    assert "functrans.numpy" in msg
    stack_unchanged()


def test_concretization_error_names_the_argument():
    msg = _raises(ft.ConcretizationTypeError,
                  lambda: ft.make_jaxpr(lambda alpha, beta: float(beta))(F32(1), F32(2)),
                  r"'beta'")
    assert "'alpha'" not in msg


def test_control_flow_on_primal_works_under_grad_and_jvp():
    """Under grad/jvp (not under tracing), primal values are concrete, as in JAX."""
    assert float(ft.grad(_if_positive)(-3.0)) == -1.0
    assert float(ft.grad(_if_positive)(3.0)) == 1.0
    _, t = ft.jvp(lambda v: float(v) * v, (2.0,), (1.0,))
    assert float(t) == 2.0


def test_concretization_errors_are_type_errors():
    with pytest.raises(TypeError):
        ft.make_jaxpr(lambda x: bool(x))(F32(1))


def test_concretization_error_classes_are_jaxs():
    """bool() raises TracerBoolConversionError, __index__ TracerIntegerConversionError,
    int() and float() the ConcretizationTypeError they both derive from (as JAX)."""
    with pytest.raises(ft.TracerBoolConversionError):
        ft.jit(lambda x: 1.0 if x > 0 else 0.0)(F32(1))
    with pytest.raises(ft.TracerIntegerConversionError):
        ft.jit(lambda x, n: fnp.ones(n) * x)(F32(1), np.int32(3))
    with pytest.raises(ft.ConcretizationTypeError) as e:
        ft.jit(lambda x: int(x))(F32(1))
    assert type(e.value) is ft.ConcretizationTypeError
    assert issubclass(ft.TracerBoolConversionError, ft.ConcretizationTypeError)


def test_traced_boolean_mask_and_arange():
    _raises(ft.ConcretizationTypeError, lambda: ft.make_jaxpr(lambda x: x[x > 0])(np.ones(3)),
            r"bool\[3\]", "where")
    _raises(ft.ConcretizationTypeError,
            lambda: ft.make_jaxpr(lambda n: fnp.arange(n))(np.int32(3)), r"i32\[\]")


# ---------------------------------------------------------------------------
# unsupported dtypes

@pytest.mark.parametrize("make", [
    lambda: fnp.asarray(np.array(["a", "b"])),
    lambda: ft.make_jaxpr(lambda x: x)(np.ones(2, np.longdouble)),
    lambda: fnp.asarray(np.ones(2, np.longdouble)),
    lambda: fnp.astype(np.ones(2), np.longdouble),
    lambda: fnp.sin(np.ones(2, np.longdouble)),
    lambda: ft.grad(lambda x: x)(np.longdouble(1)),
])
def test_unsupported_dtype_names_itself(make, stack_unchanged):
    with pytest.raises(TypeError) as info:
        make()
    msg = str(info.value)
    assert re.search(r"float128|longdouble|<U1|str", msg), msg
    stack_unchanged()


def test_non_array_argument_is_named():
    _raises(TypeError, lambda: ft.make_jaxpr(lambda x: x)("text"), "str")


# ---------------------------------------------------------------------------
# grad misuse

@pytest.mark.parametrize("x, dtype", [(np.int32(3), "int32"), (3, "int64"),     # (x64)
                                      (np.array([1, 2], np.int64), "int64"),
                                      (np.array([True]), "bool")])
def test_grad_of_integer_input_names_the_dtype(x, dtype, stack_unchanged):
    _raises(TypeError, lambda: ft.grad(lambda v: fnp.sum(v * 2))(x), dtype, "argument 0")
    stack_unchanged()


@pytest.mark.usefixtures("x32")
def test_grad_with_argnums_names_the_argument():
    _raises(TypeError, lambda: ft.grad(lambda a, b: a * b, argnums=1)(2.0, 3), "int32",
            "argument 1")
    _raises(TypeError, lambda: ft.grad(lambda a, b: a * b, argnums=(0, 1))(2.0, np.int32(3)),
            "int32", "argument 1")


@pytest.mark.parametrize("shape", [(3,), (2, 2), (1,)])
def test_grad_of_non_scalar_output_names_the_shape(shape, stack_unchanged):
    x = np.ones(shape, F32)
    _raises(TypeError, lambda: ft.grad(lambda v: v * 2)(x), re.escape(str(shape)), "scalar")
    stack_unchanged()


def test_grad_of_tuple_output_and_integer_output(stack_unchanged):
    _raises(TypeError, lambda: ft.grad(lambda v: (v, v))(1.0), "scalar")
    _raises(TypeError, lambda: ft.grad(lambda v: fnp.astype(v, np.int32))(1.0), "int32")
    stack_unchanged()


def test_grad_errors_inside_other_transformations(stack_unchanged):
    _raises(TypeError, lambda: ft.make_jaxpr(ft.grad(lambda v: v * 2))(np.ones(3, F32)),
            r"\(3,\)")
    _raises(TypeError, lambda: ft.vmap(ft.grad(lambda v: v))(np.ones((2, 3), F32)),
            r"\(3,\)")
    stack_unchanged()


def test_jvp_argument_mismatch_errors(stack_unchanged):
    _raises(ValueError, lambda: ft.jvp(fnp.sin, (np.ones(3),), (np.ones(4),)), r"f64\[3\]",
            r"f64\[4\]")
    _raises(TypeError, lambda: ft.jvp(fnp.sin, (np.ones(3),), (np.ones(3, F32),)), "f32",
            "f64")
    _raises(TypeError, lambda: ft.jvp(fnp.sin, np.ones(3), np.ones(3)), "tuple")
    stack_unchanged()


def test_vjp_cotangent_shape_error():
    _, f_vjp = ft.vjp(fnp.sin, np.ones(3))
    _raises(ValueError, lambda: f_vjp(np.ones(4)), r"\b4\b|f64\[4\]", r"3")


def test_vmap_inconsistent_sizes():
    _raises(ValueError, lambda: ft.vmap(fnp.add)(np.ones(3), np.ones(4)), "3", "4")
