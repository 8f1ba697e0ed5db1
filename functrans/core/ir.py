"""The IR's atoms and equations (Var, Literal, JaxprEqn), the structure key of a
program, and the symbolic values of the differentiation rules (Zero, UndefinedPrimal)."""
from __future__ import annotations

import itertools
from typing import Any, NamedTuple

import numpy as np

from .avals import ShapedArray, is_python_scalar
from .trace import get_aval


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
    primitive: Any             # a Primitive
    invars: list
    params: dict
    outvars: list


def structure_key(jaxpr):
    """Everything a compiled jaxpr depends on: avals, primitives, params, literal values
    and the dataflow (variables numbered in order of definition). Computed once per jaxpr
    (jaxprs are not modified after construction)."""
    k = jaxpr._skey
    if k is None:
        k = jaxpr._skey = _compute_structure_key(jaxpr)
    return k


def _compute_structure_key(jaxpr):
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
