"""functrans: JAX-style function transformations and a PyTorch-style facade on one core."""
from . import tree_util  # noqa: F401
from .core import (ClosedJaxpr, ConcretizationTypeError, DTypeError, FunctransError,  # noqa: F401
                   Jaxpr, ShapedArray, ShapeError, TypeCheckError, UnexpectedTracerError,
                   check_jaxpr)
from . import primitives as _primitives  # noqa: F401,E402  (registers every primitive)
from .runtime import eval_jaxpr  # noqa: F401
from .tracing import ShapeDtypeStruct, make_jaxpr  # noqa: F401
from . import numpy  # noqa: F401
from . import lax, random, nn  # noqa: F401
from .transforms import grad, hessian, jacfwd, jacrev, jvp, linearize, value_and_grad, vjp  # noqa: F401
from .batching import vmap  # noqa: F401
from .higher_order.jit import RetraceWarning, jit, jit_stats  # noqa: F401
from .core.devices import device_put, devices  # noqa: F401
from .higher_order.custom import checkpoint, custom_jvp, custom_vjp, remat  # noqa: F401
from .tree_util import tree_flatten, tree_leaves, tree_map, tree_unflatten  # noqa: F401
from . import facade as _facade  # noqa: E402  (the PyTorch-like facade; JAX-side names win)
globals().update({_n: getattr(_facade, _n) for _n in _facade.FACADE_NAMES if _n not in globals()})
from . import autograd  # noqa: F401,E402
from . import func, optim  # noqa: F401,E402  (torch.func, torch.optim)
from .serialization import load, save  # noqa: F401,E402
from .compile import compile, compile_stats  # noqa: F401,E402,A004  (ft.compile)


def stop_gradient(x):
    """Identity on values, zero derivative; applies to every leaf of a pytree."""
    return tree_map(lambda v: _primitives.misc.stop_gradient(numpy.asarray(v)), x)


__version__ = "0.1.0"
