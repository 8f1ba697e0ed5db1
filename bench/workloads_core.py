"""Core workloads (issue 2): the interpreter's per-equation overhead on tiny arrays."""
from __future__ import annotations

import numpy as np

import functrans as ft
import functrans.numpy as fnp
from functrans.runtime import eval_jaxpr

from .harness import workload

CHAIN_REPEATS = 20          # 20 blocks of 10 ops = 200 equations
CHAIN_SHAPE = (8,)


def chain_block(m, y, a, b):
    """Ten elementwise ops, written once for ``m = numpy`` or ``m = functrans.numpy``.

    Every exp follows a bounded op, so values stay finite over any number of blocks.
    """
    y = m.sin(y)
    y = m.multiply(y, a)
    y = m.cos(y)
    y = m.add(y, b)
    y = m.tanh(y)
    y = m.exp(y)
    y = m.subtract(y, a)
    y = m.multiply(y, 0.5)
    y = m.sin(y)
    y = m.add(y, y)
    return y


def chain(m, x, a, b):
    """The 200-op chain: ``CHAIN_REPEATS`` blocks applied in sequence."""
    y = x
    for _ in range(CHAIN_REPEATS):
        y = chain_block(m, y, a, b)
    return y


def chain_inputs(shape=CHAIN_SHAPE, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    return tuple(rng.uniform(-1, 1, shape).astype(dtype) for _ in range(3))


@workload("chain200_eval", issue=2, targets={"eval_jaxpr": 2.0},
          description="eval_jaxpr of a traced 200-op elementwise chain on f32[8] vs calling NumPy directly")
def chain200_eval():
    x, a, b = chain_inputs()
    closed = ft.make_jaxpr(lambda x, a, b: chain(fnp, x, a, b))(x, a, b)
    n_eqns = len(closed.jaxpr.eqns)
    if n_eqns != 10 * CHAIN_REPEATS:
        raise AssertionError(f"traced chain has {n_eqns} equations, expected {10 * CHAIN_REPEATS}")
    jaxpr, consts = closed.jaxpr, closed.consts
    return {
        "numpy": lambda: chain(np, x, a, b),
        "eval_jaxpr": lambda: eval_jaxpr(jaxpr, consts, x, a, b)[0],
        "fnp_eager": lambda: chain(fnp, x, a, b),
    }


@workload("fnp_eager_op", issue=33,
          description="one eager functrans.numpy op on f32[8] (an ft.Array in and out since "
                      "issue 33): fnp.add, the + operator and fnp.multiply by a Python scalar, "
                      "vs NumPy's add")
def fnp_eager_op():
    x, a, _ = chain_inputs()
    xa, aa = fnp.asarray(x), fnp.asarray(a)       # the library's own eager values
    return {
        "numpy": lambda: np.add(x, a),
        "fnp_add": lambda: fnp.add(xa, aa),
        "operator": lambda: xa + aa,
        "fnp_scalar": lambda: fnp.multiply(fnp.add(xa, aa), 1.0),
    }
