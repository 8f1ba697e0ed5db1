"""The public namespace of `functrans`: every layer's user-facing names, gathered.

`functrans/__init__.py` loads this module on the first attribute access (PEP 562), so
importing a lower layer (`functrans.primitives`, `functrans.core`) does not load the rest.
JAX-side names win over the facade's where both exist (`ft.random` is jax.random's).
Every import here is a re-export (flake8: F401 is expected).
"""
from __future__ import annotations

from typing import Any as _Any     # (not a public name)

import numpy as _np

from . import (ad_checkpoint, autograd, debug, dtypes, errors, func, lax, nn, numpy, optim,
               random, tree, tree_util)
from . import facade as _facade
from .backends.threads import get_num_threads, set_num_threads
from .compiler.compiled import compile, compile_stats
from .core import (AxisError, ClosedJaxpr, ConcretizationTypeError, DTypeError,
                   FunctransError, Jaxpr, ShapedArray, ShapeError, TracerArrayConversionError,
                   TracerBoolConversionError, TracerIntegerConversionError, TypeCheckError,
                   UnexpectedTracerError, check_jaxpr)
from .core import Tracer as _Tracer
from .core.config import check_tracer_leaks, checking_leaks, config, enable_x64
from .core import ensure_compile_time_eval
from .callbacks import pure_callback
from .higher_order import custom_batching
from .dtypes import float0
from .core.devices import block_until_ready, device_put, devices
from .higher_order.collectives import pmap
from .ad_checkpoint import checkpoint_policies
from .higher_order.custom import checkpoint, custom_jvp, custom_vjp, remat
from .higher_order.jit import RetraceWarning, disable_jit, jit, jit_stats
from .torchscript import attach as _attach_torchscript
from .batching import vmap
from .primitives.misc import stop_gradient as _stop_gradient
from .runtime import eval_jaxpr
from .serialization import CheckpointError, load, save
from .special import i0, logit, polygamma, sinc, xlogy
from .amp import autocast, get_autocast_dtype, is_autocast_available, is_autocast_enabled
from .special import multigammaln as mvlgamma
from .tracing import ShapeDtypeStruct, eval_shape, make_jaxpr
from .transforms import (default_matmul_precision, grad, hessian, jacfwd, jacrev, jvp,
                         linear_transpose, linearize, named_call, named_scope, value_and_grad,
                         vjp)
from .tree_util import tree_flatten, tree_leaves, tree_map, tree_unflatten


class _ArrayMeta(type):
    def __instancecheck__(cls, x):
        return (isinstance(x, (_np.ndarray, _np.generic, _Tracer))
                or hasattr(x, "__cuda_array_interface__")) and not isinstance(
                    x, _np.ma.MaskedArray)

    def __subclasscheck__(cls, sub):
        return issubclass(sub, (_np.ndarray, _np.generic, _Tracer))


class Array(metaclass=_ArrayMeta):
    """jax.Array: the type of functrans's array values, for isinstance checks and
    annotations. Eager values are NumPy arrays (CuPy arrays on a GPU), traced ones
    tracers: `isinstance(x, ft.Array)` is true for all of them."""

    def __init__(self, *args, **kwargs):
        raise TypeError("ft.Array is the type of functrans arrays and cannot be "
                        "instantiated; use ft.numpy.asarray(...) to make one")


def stop_gradient(x: _Any) -> _Any:
    """Identity on values, zero derivative; applies to every leaf of a pytree."""
    return tree_map(lambda v: _stop_gradient(numpy.asarray(v)), x)


_attach_torchscript(jit)   # torch.jit.script / trace / ignore, ...: attributes of ft.jit


def namespace() -> dict[str, _Any]:
    """Name -> object for every public name of `functrans`."""
    names = {k: v for k, v in globals().items()
             if not k.startswith("_") and k not in ("annotations", "namespace")}
    for n in _facade.FACADE_NAMES:
        names.setdefault(n, getattr(_facade, n))
    return names
