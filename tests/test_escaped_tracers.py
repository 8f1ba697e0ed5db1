"""A tracer that escapes its transformation raises UnexpectedTracerError wherever it is used.

Each pattern stores an intermediate value of a transformed function in a list (a side
effect) and uses it after that transformation has finished: eagerly, inside another
transformation at the same level (which used to say "Different traces at the same level:
MainTrace(1, JaxprTrace) vs MainTrace(1, JaxprTrace)"), in np.asarray (which used to blame
"the function being transformed"), and so on. The error names the primitive that made the
tracer and the transformation it belonged to.
"""
import threading

import numpy as np
import pytest

import functrans as ft
import functrans.numpy as fnp

X = np.float32([1.0, 2.0])

TRANSFORMATION = {"jit": "ft.jit", "make_jaxpr": "ft.make_jaxpr", "grad": "ft.grad",
                  "vmap": "ft.vmap", "jvp": "ft.jvp"}


def _leak(transform):
    """An intermediate (the output of `mul`) of a function transformed by `transform`."""
    box = []

    def f(x):
        y = fnp.sin(x) * 2.0
        box.append(y)
        return y.sum()
    if transform == "vmap":
        ft.vmap(f)(X)
    elif transform == "jvp":
        ft.jvp(f, (X,), (X,))
    else:
        getattr(ft, transform)(f)(X)
    return box[0]


PATTERNS = {
    "jit, then eager arithmetic with a concrete value": ("jit", lambda t: t * 2.0),
    "jit, then a functrans.numpy function": ("jit", lambda t: fnp.sin(t)),
    "jit, then inside another jit": ("jit", lambda t: ft.jit(lambda y: y + t)(X)),
    "make_jaxpr, then inside another make_jaxpr": (
        "make_jaxpr", lambda t: ft.make_jaxpr(lambda y: y + t)(X)),
    "jit, then inside grad": ("jit", lambda t: ft.grad(lambda y: (y * t).sum())(X)),
    "jit, then under vmap": ("jit", lambda t: ft.vmap(lambda y: y + t)(X)),
    "jit, then np.asarray": ("jit", lambda t: np.asarray(t)),
    "jit, then float()": ("jit", lambda t: float(t.sum())),
    "grad, then eager arithmetic": ("grad", lambda t: t + 1.0),
    "grad, then np.asarray": ("grad", lambda t: np.asarray(t)),
    "grad, then inside jit": ("grad", lambda t: ft.jit(lambda y: y + t)(X)),
    "vmap, then eager arithmetic": ("vmap", lambda t: t + 1.0),
    "jvp, then eager arithmetic": ("jvp", lambda t: t + 1.0),
    "jit, then in a jit nested in grad": (
        "jit", lambda t: ft.grad(lambda y: ft.jit(lambda z: (z + t).sum())(y))(X)),
    "jit, then in a cond branch under jit": (
        "jit", lambda t: ft.jit(lambda y: ft.lax.cond(True, lambda z: z + t, lambda z: z,
                                                       y))(X)),
    "jit, then as an argument of a jitted function": ("jit", lambda t: ft.jit(
        lambda y: y * 2)(t)),
}


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_escaped_tracer_raises_unexpected_tracer_error(name):
    transform, use = PATTERNS[name]
    leaked = _leak(transform)
    with pytest.raises(ft.UnexpectedTracerError) as info:
        use(leaked)
    msg = str(info.value)
    assert "the output of `mul`" in msg, msg                  # where it was created
    assert TRANSFORMATION[transform] in msg, msg              # under which transformation
    if transform in ("jit", "make_jaxpr", "grad"):
        assert "of `f`" in msg, msg                            # of which function
    assert "escaped" in msg and "Different traces" not in msg
    assert "while the function is being transformed" not in msg


def test_escaped_argument_is_named_by_its_name():
    box = []
    ft.make_jaxpr(lambda weights: box.append(weights) or weights)(X)
    with pytest.raises(ft.UnexpectedTracerError, match="the argument 'weights'"):
        box[0] + 1.0


def test_escape_from_an_inner_transformation_into_an_outer_one():
    """Level 2 (make_jaxpr inside jit) leaks into level 1 of the same outer jit."""
    box = []

    def f(y):
        ft.make_jaxpr(lambda z: box.append(z * 3.0) or z)(y)
        return y + box[0]
    with pytest.raises(ft.UnexpectedTracerError, match="the output of `mul`.*at level 2"):
        ft.jit(f)(X)


def test_a_tracer_used_in_another_thread_is_reported():
    seen = {}

    def f(x):
        y = x * 2.0

        def other():
            try:
                np.asarray(y + 1.0)
            except ft.UnexpectedTracerError as e:
                seen["error"] = e
        t = threading.Thread(target=other)
        t.start()
        t.join()
        return y
    ft.jit(f)(X)
    assert "another thread" in str(seen["error"])


def test_live_closures_still_work():
    """Not an escape: a tracer of a running outer transformation used by an inner one."""
    g = ft.grad(lambda x: ft.jit(lambda y: (y * x).sum())(x))(X)
    np.testing.assert_allclose(g, 2 * X)
    h = ft.jit(lambda x: ft.vmap(lambda y: y + x[0])(x))(X)
    np.testing.assert_allclose(h, X + X[0])
    assert float(ft.grad(lambda x: x * x if float(x) > 0 else -x)(3.0)) == 6.0


def test_concretization_inside_a_live_trace_is_still_a_concretization_error():
    with pytest.raises(ft.ConcretizationTypeError, match="the output of `gt`"):
        ft.jit(lambda x: x if x.sum() > 0 else -x)(X)


@pytest.mark.parametrize("transform", ["jvp", "jacfwd", "jacrev", "grad", "vjp", "hessian"])
def test_has_aux_returns_values_not_escaped_tracers(transform):
    """jvp and jacfwd used to hand back the aux as a finished trace's tracer."""
    def f(x):
        return fnp.sin(x).sum(), {"double": x * 2.0, "n": 3}

    def g(x):
        return fnp.sin(x), {"double": x * 2.0, "n": 3}
    aux = {"jvp": lambda: ft.jvp(f, (X,), (X,), has_aux=True)[2],
           "jacfwd": lambda: ft.jacfwd(g, has_aux=True)(X)[1],
           "jacrev": lambda: ft.jacrev(g, has_aux=True)(X)[1],
           "grad": lambda: ft.grad(f, has_aux=True)(X)[1],
           "vjp": lambda: ft.vjp(f, X, has_aux=True)[2],
           "hessian": lambda: ft.hessian(f, has_aux=True)(X)[1]}[transform]()
    assert aux["n"] == 3 and type(aux["double"]) is np.ndarray
    np.testing.assert_allclose(aux["double"], 2 * X)
