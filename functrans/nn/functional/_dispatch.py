"""How every ft.nn.functional function runs: one recorded facade op on Tensors, plain
functrans.numpy on arrays and traced values; and the small helpers the sections share."""
from __future__ import annotations

import functools
import inspect
import warnings

import numpy as np

from ...numpy import raw as fnp
from ...core import Tracer
from ...facade.tensor import Tensor, apply_fn, traced_hooks


# ---------------------------------------------------------------------------
# dispatch between the facade (Tensors) and the functional world (arrays, tracers)


def _is_raw(args):
    """True when the call runs as plain functrans.numpy: a traced value is among the
    arguments, or no argument is a Tensor."""
    any_tensor = False
    for a in args:
        if isinstance(a, Tracer):
            return True
        if isinstance(a, Tensor):
            any_tensor = True
    return not any_tensor


def _is_facade(x):
    """A Tensor that runs facade ops: concrete data, or traced data inside ft.compile."""
    if not isinstance(x, Tensor):
        return False
    if not isinstance(x._data, Tracer):
        return True
    return traced_hooks().records


# parameters that torch types as Tensor (Optional[Tensor] where the default is None, and
# batch_norm's running statistics); checked for every public function (tensor_arguments)
_TENSOR_PARAMS = frozenset({"input", "input1", "input2", "x1", "x2", "target", "weight", "bias",
                            "running_mean", "running_var", "pos_weight", "tensor", "query",
                            "key", "theta", "grid", "log_probs"})
# (not "value": F.pad's is a number)
_ARRAYS = (Tensor, Tracer, np.ndarray, np.generic)


def tensor_arguments(fn):
    """fn raising torch's TypeError ("linear(): argument 'input' (position 1) must be Tensor,
    not list") when a Tensor parameter gets something that is not an array. Applied once to
    every public function in nn/functional/__init__.py, so layers get it through F."""
    sig = inspect.signature(fn).parameters.values()
    checks = tuple((i, p.name, p.default is None or p.name.startswith("running_"))
                   for i, p in enumerate(sig) if p.name in _TENSOR_PARAMS)
    name = fn.__name__

    @functools.wraps(fn)
    def checked(*args, **kwargs):
        for i, param, optional in checks:
            v = args[i] if i < len(args) else kwargs.get(param)
            if not isinstance(v, _ARRAYS) and not (v is None and optional) and not (
                    hasattr(v, "shape") and hasattr(v, "dtype")):
                raise TypeError(f"{name}(): argument '{param}' (position {i + 1}) must be "
                                f"Tensor, not {type(v).__name__}")
        return fn(*args, **kwargs)
    return checked


def _raw(a):
    """The array behind a Tensor (a constant on the functional path); other values as is."""
    return a._data if isinstance(a, Tensor) else a


def _call(name, fn, args, *, save=False, **static):
    """fn(*args, **static) as one facade op named `name`, or directly on raw values. save:
    the op's backward reads its saved intermediates (apply_fn)."""
    if _is_raw(args):
        return fn(*[_raw(a) for a in args], **static)
    return apply_fn(name, fn, tuple(args), tuple(sorted(static.items())), save=save)


def _concrete(x):
    """A NumPy array of x when its value is known now (not a tracer), else None."""
    if isinstance(x, Tensor):
        return np.asarray(x._data) if type(x._data) is np.ndarray else None
    if isinstance(x, Tracer):
        return None
    return np.asarray(x)


def _shape(x):
    """The shape as a plain tuple (without building a Size for a Tensor)."""
    return (x._data if isinstance(x, Tensor) else x).shape


def _ndim(x):
    return len((x._data if isinstance(x, Tensor) else x).shape)


def _reduce(loss, reduction, *, mean_div=None):
    """'mean' | 'sum' | 'none' of an elementwise loss (functrans.numpy)."""
    if reduction == "none":
        return loss
    if reduction == "sum":
        return fnp.sum(loss)
    if reduction == "mean":
        return fnp.mean(loss) if mean_div is None else fnp.sum(loss) / mean_div
    raise ValueError(f"{reduction} is not a valid value for reduction")


def _legacy_reduction(size_average, reduce, reduction):
    """torch's deprecated size_average/reduce arguments mapped to `reduction`."""
    if size_average is None and reduce is None:
        return reduction
    warnings.warn("size_average and reduce args will be deprecated, please use reduction="
                  "'sum' or 'mean' instead.", stacklevel=3)
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    if not reduce:
        return "none"
    return "mean" if size_average else "sum"


def _check_reduction(reduction):
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{reduction} is not a valid value for reduction")


# ---------------------------------------------------------------------------
# small helpers shared by several sections


def _size(shape):
    return f"ft.Size([{', '.join(map(str, shape))}])"


def _unsqueeze0(x):
    return x.unsqueeze(0) if isinstance(x, Tensor) else fnp.expand_dims(x, 0)


def _squeeze0(x):
    return x.squeeze(0) if isinstance(x, Tensor) else fnp.squeeze(x, 0)
