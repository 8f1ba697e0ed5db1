"""Programs of the IR: Jaxpr (typed inputs, equations, outputs) and ClosedJaxpr (a jaxpr
with the values of its constants)."""
from __future__ import annotations

from .evaluate import eval_jaxpr
from .ir import structure_key
from .printer import pp_jaxpr


class Jaxpr:
    """A closed-over-nothing program: typed inputs, equations, outputs."""
    __slots__ = ("constvars", "invars", "eqns", "outvars", "_runs", "_compiled", "_skey")

    def __init__(self, constvars, invars, eqns, outvars):
        self._runs = 0               # the runtime's: how often it ran on concrete arrays,
        self._compiled = None        # and its compiled program once it runs a second time
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
    __slots__ = ("jaxpr", "consts", "_hash", "_exes")

    def __init__(self, jaxpr: Jaxpr, consts):
        self.jaxpr = jaxpr
        self.consts = list(consts)
        self._hash = None
        # what the runtime derives from this object and keeps as long as it lives: its
        # executables by (device, donated, backend), a scan's layout of its consts
        self._exes: dict | None = None

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

