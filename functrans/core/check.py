"""The type checker: every equation of a jaxpr against its primitive's shape rule."""
from __future__ import annotations

import numpy as np

from .avals import FunctransError, ShapedArray, TypeCheckError
from .ir import Literal
from .jaxpr import ClosedJaxpr, Jaxpr


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

