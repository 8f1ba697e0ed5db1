"""functrans: JAX-style function transformations and a PyTorch-style facade on one core.

The public names (`ft.grad`, `ft.Tensor`, `ft.nn`, ...) are gathered in `functrans/api.py`
and load on first use (PEP 562), so that importing a lower layer such as
`functrans.primitives` loads only that layer and the ones below it (docs/architecture.md).
"""
import importlib
import importlib.util
import warnings

__version__ = "0.1.0"

# NaN, inf and -0 are values here, as in torch and JAX, which print nothing when an op
# makes them (log(0), sqrt(-1), inf - inf): NumPy's floating-point RuntimeWarnings are
# ignored where functrans's own code (its modules and its generated programs, whose module
# is "functrans.jit") runs the ufunc. Found only when NumPy warns, so free on every other
# call; the user's own NumPy calls still warn as they did.
warnings.filterwarnings("ignore", r"(invalid value|divide by zero|overflow|underflow) "
                        r"encountered", RuntimeWarning, r"functrans(\.|$)")


def _public() -> dict:
    # the package's one deferred import: the public namespace sits on top of every layer
    names = importlib.import_module(f"{__name__}.api").namespace()
    for k, v in names.items():      # a name the user rebound (a monkeypatch) keeps its value
        globals().setdefault(k, v)
    return names


def __getattr__(name):
    if name == "__all__":
        return sorted(_public())
    if name.startswith("__"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if importlib.util.find_spec(f"{__name__}.{name}") is not None:
        return importlib.import_module(f"{__name__}.{name}")     # a submodule: ft.core
    try:
        return _public()[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None


def __dir__():
    return sorted(set(globals()) | set(_public()))
