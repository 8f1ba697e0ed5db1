"""`ft.autograd`: torch.autograd's API on the facade, plus what functrans adds
(`backward_jaxpr`, `saved_tensors_report`)."""
import sys

# torch.autograd.gradcheck is a module (imported first, while the name is free) and the
# package's attribute of that name the function (bound below)
from . import gradcheck as _gradcheck_module  # noqa: F401
from ..facade.anomaly import (AnomalyError, detect_anomaly,  # noqa: F401
                              is_anomaly_check_nan_enabled, is_anomaly_enabled,
                              set_detect_anomaly)
from ..facade.api import backward, grad  # noqa: F401
from ..facade.function import (CtxTensorError, Function, FunctionCtx,  # noqa: F401
                               InplaceFunction, once_differentiable)
from ..facade.gradcheck import GradcheckError, gradcheck, gradgradcheck  # noqa: F401
from ..facade.grad_mode import (enable_grad, inference_mode, no_grad,  # noqa: F401
                                set_grad_enabled)
from ..facade.report import BackwardJaxpr, backward_jaxpr, saved_tensors_report  # noqa: F401
from ..facade.record import SavedTensor  # noqa: F401
from . import functional, graph  # noqa: F401
from ..facade import grad_mode  # noqa: F401  (torch.autograd.grad_mode)
from ..facade.tensor import Tensor as _Tensor

__all__ = ["backward", "grad", "Function", "FunctionCtx", "once_differentiable", "gradcheck",
           "gradgradcheck", "GradcheckError", "set_detect_anomaly", "detect_anomaly",
           "backward_jaxpr", "saved_tensors_report", "CtxTensorError", "BackwardJaxpr",
           "AnomalyError", "set_multithreading_enabled", "is_multithreading_enabled"]


class function:  # noqa: N801  (torch.autograd.function namespace)
    Function = Function
    InplaceFunction = InplaceFunction
    FunctionCtx = FunctionCtx
    once_differentiable = once_differentiable


_MULTITHREADING = [True]


def is_multithreading_enabled():
    """torch.autograd.is_multithreading_enabled: the setting of set_multithreading_enabled."""
    return _MULTITHREADING[0]


class set_multithreading_enabled:  # noqa: N801  (torch's name)
    """torch.autograd.set_multithreading_enabled(mode), a function and a context manager
    (restoring the previous setting on exit). In torch it lets the backward of device
    graphs run on per-device worker threads; functrans's backward always runs on the
    calling thread (as torch's on the CPU), so the setting changes no result."""

    def __init__(self, mode: bool):
        self.prev = _MULTITHREADING[0]
        _MULTITHREADING[0] = bool(mode)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _MULTITHREADING[0] = self.prev
        return False


class _VariableMeta(type):
    def __instancecheck__(cls, x):
        return isinstance(x, _Tensor)

    def __subclasscheck__(cls, sub):
        return issubclass(sub, _Tensor)

    def __call__(cls, data, requires_grad=False, volatile=False):
        if not isinstance(data, _Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        return data.detach().requires_grad_(requires_grad)


class Variable(metaclass=_VariableMeta):
    """torch.autograd.Variable, the legacy wrapper: `Variable(t, requires_grad=False)` is a
    leaf sharing t's data (t.detach(), of its dtype) with that requires_grad; every Tensor is
    an instance; `Variable._execution_engine.queue_callback` is the engine's."""
    _execution_engine = _Tensor._execution_engine


def __getattr__(name):
    """`torch.autograd.torch` is torch itself (torch.autograd imports it): here the
    functrans package, looked up (not imported: it is this package's parent)."""
    if name == "torch":
        return sys.modules[__name__.rsplit(".", 1)[0]]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
