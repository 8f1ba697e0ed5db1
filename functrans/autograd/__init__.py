"""`ft.autograd`: torch.autograd's API on the facade, plus what functrans adds
(`backward_jaxpr`, `saved_tensors_report`)."""
from ..facade.anomaly import (AnomalyError, detect_anomaly,  # noqa: F401
                              is_anomaly_check_nan_enabled, is_anomaly_enabled,
                              set_detect_anomaly)
from ..facade.api import backward, grad  # noqa: F401
from ..facade.function import (CtxTensorError, Function, FunctionCtx,  # noqa: F401
                               once_differentiable)
from ..facade.gradcheck import GradcheckError, gradcheck, gradgradcheck  # noqa: F401
from ..facade.grad_mode import (enable_grad, inference_mode, no_grad,  # noqa: F401
                                set_grad_enabled)
from ..facade.report import BackwardJaxpr, backward_jaxpr, saved_tensors_report  # noqa: F401
from . import functional, graph  # noqa: F401
from ..facade.tensor import Tensor as Variable  # noqa: F401

__all__ = ["backward", "grad", "Function", "FunctionCtx", "once_differentiable", "gradcheck",
           "gradgradcheck", "GradcheckError", "set_detect_anomaly", "detect_anomaly",
           "backward_jaxpr", "saved_tensors_report", "CtxTensorError", "BackwardJaxpr",
           "AnomalyError"]


class function:  # noqa: N801  (torch.autograd.function namespace)
    Function = Function
    FunctionCtx = FunctionCtx
    once_differentiable = once_differentiable
