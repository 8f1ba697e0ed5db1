"""ft.nn: jax.nn's activation functions (functional, traceable: ft.nn.relu, ft.nn.softmax, ...)
and torch.nn's modules (ft.nn.Module, ft.nn.Linear, ...). torch.nn.functional is
ft.nn.functional; parameter initializers are ft.nn.init; clipping is ft.nn.utils."""
import types as _types

from .functions import (elu, gelu, leaky_relu, log_sigmoid, log_softmax, logsumexp,  # noqa: F401
                        one_hot, relu, relu6, sigmoid, silu, softmax, softplus, standardize,
                        swish)
from .functions import (celu, dot_product_attention, glu, hard_sigmoid, hard_silu,  # noqa: F401
                        hard_swish, hard_tanh, mish, selu, soft_sign, sparse_plus,
                        sparse_sigmoid, squareplus)

_SUBPACKAGES = ("functional", "init", "utils", "modules", "parallel", "parameter")


def __getattr__(name):
    # the torch-style part imports the facade, which imports this package: load it lazily
    import importlib
    if name in _SUBPACKAGES:
        return importlib.import_module(f"{__name__}.{name}")
    if name == "DataParallel":                  # torch.nn.DataParallel lives in nn.parallel
        return importlib.import_module(f"{__name__}.parallel").DataParallel
    modules = importlib.import_module(f"{__name__}.modules")
    if name in _layer_names(modules):
        return getattr(modules, name)
    raise AttributeError(f"module 'functrans.nn' has no attribute {name!r}")


def _layer_names(modules):
    """The public names of nn.modules that torch.nn has too: its classes and functions, not
    its submodules (nn.modules.transformer is not nn.transformer, and listing it would make
    Python suggest the module 'transformer' to someone asking for the class)."""
    return {n for n, v in vars(modules).items()
            if not n.startswith("_") and not isinstance(v, _types.ModuleType)}


def __dir__():
    import importlib
    modules = importlib.import_module(f"{__name__}.modules")
    return sorted(set(globals()) | set(_SUBPACKAGES) | _layer_names(modules) | {"DataParallel"})
