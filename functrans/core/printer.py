"""The printer: jaxprs in JAX's text layout."""
from __future__ import annotations

import itertools

import numpy as np

from .ir import Literal, Var


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


def _is_jaxpr(v):
    """A Jaxpr or ClosedJaxpr (told by its equations: the printer sits below those classes,
    which print themselves through it)."""
    return hasattr(v, "eqns")


def _is_jaxpr_param(v):
    return _is_jaxpr(v) or (isinstance(v, tuple) and v and all(_is_jaxpr(w) for w in v))


def _pp_param(v, namer, indent):
    """A param printed at column `indent` (nested jaxprs indented under it)."""
    if _is_jaxpr(v):
        return _pp(v.jaxpr if hasattr(v, "consts") else v, namer, indent)
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


def _pp(jaxpr, namer, indent=0, force_multiline=False):
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


def pp_jaxpr(jaxpr) -> str:
    return _pp(jaxpr, _Namer())

