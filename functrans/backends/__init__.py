"""Backends that lower an optimized jaxpr: `cpu` (generated NumPy code) and `cuda`
(generated CUDA kernels run through CuPy). Each exposes `lower(closed, donated, name)`
returning a `Lowered`."""
from __future__ import annotations


# the module name of every generated program (its functions' __module__, and where
# functrans/__init__.py's warnings filter finds NumPy's floating-point warnings from it)
JIT_MODULE = "functrans.jit"


def identifier(name: str) -> str:
    """name with each character a C or Python identifier cannot hold replaced by '_'."""
    return "".join(c if c.isalnum() or c == "_" else "_" for c in name)


class Lowered:
    """What `f.lower(*args)` returns: the traced jaxpr, the optimized jaxpr and the
    generated code; `str()` shows all three and `compile()` builds the executable."""

    def __init__(self, optimized, source, build, backend, name, plan=None, kernels=None,
                 info=None, native=None):
        self.jaxpr = None                   # the traced ClosedJaxpr (set by runtime.lower_jaxpr)
        self.optimized = optimized          # after passes and fusion
        self.source = source                # the generated Python (CPU) or driver (CUDA)
        self.kernels = kernels or {}        # CUDA kernel name -> source
        self.native = native                # CPU: {"source": C++, "library": .so path}
        self.backend = backend
        self.name = name
        self.plan = plan
        self.info = info or {}
        self.timings = {}
        self._build = build

    def compile(self):
        return self._build()

    def as_text(self):
        parts = [f"# {self.name} lowered for {self.backend}"]
        if self.jaxpr is not None:
            parts += ["## traced jaxpr", str(self.jaxpr)]
        parts += ["## optimized jaxpr", str(self.optimized)]
        groups = self.info.get("groups")
        if groups:
            parts += ["## fusion groups"] + [f"{g}: {b}: {why}" for g, b, why in groups]
        parts += ["## generated code", self.source]
        if self.native:
            parts += [f"## native C++ ({self.native['library']})", self.native["source"]]
        for k, src in self.kernels.items():
            parts += [f"## CUDA kernel {k}", src]
        return "\n".join(parts)

    __str__ = as_text

    def __repr__(self):
        return f"<Lowered {self.name} for {self.backend}>"
