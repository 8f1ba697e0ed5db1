"""torch.jit's names for programs that import them: `ft.jit` is JAX's jit (a function), and
these are its attributes, so `torch.jit.script` / `torch.jit.trace` resolve after the import
rename. functrans has no TorchScript: script, trace, save, load and freeze raise
NotImplementedError naming what to use (ft.compile to compile a module or function; a
state_dict with ft.save / ft.load to store one); the marking decorators (ignore, unused,
export) return the function unchanged, and is_scripting() / is_tracing() are False."""
from __future__ import annotations

_COMPILE = ("functrans has no TorchScript; compile the module or function with "
            "ft.compile(fn_or_module) (traced and optimized on first call, for every later "
            "call), or ft.jit for pure array functions")
_STORE = ("functrans has no TorchScript archives; save model.state_dict() with ft.save(sd, "
          "path) and rebuild the model in Python before model.load_state_dict(ft.load(path))")


def _refuse(name, why):
    def f(*args, **kwargs):
        raise NotImplementedError(f"torch.jit.{name}: {why}")
    f.__name__ = name
    f.__doc__ = f"torch.jit.{name}: raises NotImplementedError ({why})."
    return f


def _mark(fn=None, *args, **kwargs):
    """A TorchScript marking decorator: nothing to mark without TorchScript, fn unchanged."""
    if fn is None or not callable(fn):
        return lambda f: f
    return fn


def _false():
    return False


class ScriptModule:
    """torch.jit.ScriptModule, for isinstance checks: nothing is ever one here."""

    def __init__(self, *args, **kwargs):
        raise NotImplementedError(f"torch.jit.ScriptModule: {_COMPILE}")


NAMES = {
    "script": _refuse("script", _COMPILE), "trace": _refuse("trace", _COMPILE),
    "trace_module": _refuse("trace_module", _COMPILE), "freeze": _refuse("freeze", _COMPILE),
    "optimize_for_inference": _refuse("optimize_for_inference", _COMPILE),
    "save": _refuse("save", _STORE), "load": _refuse("load", _STORE),
    "ignore": _mark, "unused": _mark, "export": _mark,
    "is_scripting": _false, "is_tracing": _false, "ScriptModule": ScriptModule,
    "ScriptFunction": ScriptModule,
}


def attach(jit):
    """Give the jit function torch.jit's names as attributes."""
    for name, obj in NAMES.items():
        setattr(jit, name, obj)
    return jit
