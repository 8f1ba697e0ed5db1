"""ft.nn: jax.nn's activation functions (functional, traceable: ft.nn.relu, ft.nn.softmax, ...)
and torch.nn's modules (ft.nn.Module, ft.nn.Linear, ...). torch.nn.functional is
ft.nn.functional; parameter initializers are ft.nn.init; clipping is ft.nn.utils."""
from .functions import (elu, gelu, leaky_relu, log_sigmoid, log_softmax, logsumexp,  # noqa: F401
                        one_hot, relu, relu6, sigmoid, silu, softmax, softplus, standardize,
                        swish)


def __getattr__(name):
    # the torch-style part imports the facade, which imports this package: load it lazily
    import importlib
    if name in ("functional", "init", "utils", "modules", "parallel"):
        return importlib.import_module(f"{__name__}.{name}")
    modules = importlib.import_module(f"{__name__}.modules")
    if hasattr(modules, name):
        return getattr(modules, name)
    raise AttributeError(f"module 'functrans.nn' has no attribute {name!r}")


def __dir__():
    import importlib
    modules = importlib.import_module(f"{__name__}.modules")
    return sorted(set(globals()) | {"functional", "init", "utils", "modules", "parallel"}
                  | {n for n in dir(modules) if not n.startswith("_")})
