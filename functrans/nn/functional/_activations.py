"""ft.nn.functional's activations (relu, gelu, softmax, ...) and dropout."""
from __future__ import annotations

import warnings

import numpy as np

from ... import numpy as fnp
from ...core import Tracer
from ...facade import creation as C
from ...facade.inplace import inplace as _inplace
from ...facade.methods import relu_fn
from ...facade.tensor import Tensor
from .. import functions as _jnn
from ._dispatch import _call, _is_facade, _is_raw, _ndim, _shape


# ---------------------------------------------------------------------------
# activations


def _method_or(name, grad_name, fn, input, inplace=False, **static):
    """Use the Tensor's own method (torch's op and grad_fn) when it has one."""
    if _is_facade(input):
        if inplace:
            return getattr(input, name + "_")(**static)
        m = getattr(input, name, None)
        if m is not None:
            return m(**static)
    return _call(grad_name, fn, (input,), **static)


def _op(name, fn, input, inplace, inplace_name=None, **static):
    """fn(input) as the op `name`; with inplace=True on a Tensor, written into input as
    torch's in-place variant (its grad_fn, e.g. EluBackward1 for elu_, its leaf check)."""
    if inplace and isinstance(input, Tensor):
        return _inplace(input, name, lambda: _call(inplace_name or name, fn, (input,), **static))
    return _call(name, fn, (input,), **static)


def _relu_fn(x):
    return relu_fn(x)


def relu(input, inplace=False):
    """max(input, 0); inplace=True modifies a Tensor input in place."""
    return _method_or("relu", "ReluBackward0", _relu_fn, input, inplace)


def relu_(input):
    return relu(input, inplace=True)


def _relu6_fn(x):
    return _hardtanh_fn(x, lo=0.0, hi=6.0)


def relu6(input, inplace=False):
    return _op("HardtanhBackward0", _relu6_fn, input, inplace)


def _prelu_fn(x, w):
    if w.size > 1 and x.ndim >= 2:              # one slope per channel (dim 1)
        w = w.reshape((w.size,) + (1,) * (x.ndim - 2))
    elif w.size == 1:
        w = w.reshape(())
    return fnp.where(x > 0, x, x * w)


def prelu(input, weight):  # noqa: A002
    """max(0, x) + weight * min(0, x): one slope, or one per channel (dim 1 of the input;
    an input of fewer than 2 dims has one channel)."""
    xs, n = _shape(input), int(np.prod(_shape(weight)))
    channels = xs[1] if len(xs) >= 2 else 1
    if n != 1 and n != channels:
        raise RuntimeError(f"Mismatch of parameter numbers and input channel size. Found "
                           f"parameter numbers = {n} and channel size = {channels}.")
    return _call("PreluKernelBackward0", _prelu_fn, (input, weight))


def _leaky_relu_fn(x, *, negative_slope):
    return fnp.where(x > 0, x, x * negative_slope)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    return _op("LeakyReluBackward0", _leaky_relu_fn, input, inplace, "LeakyReluBackward1",
               negative_slope=float(negative_slope))


def _elu_fn(x, *, alpha):
    """alpha (exp(x) - 1) where x <= 0, else x: NaN takes the linear branch (derivative 1),
    as in torch's elu_backward."""
    neg = fnp.less_equal(x, 0)
    safe = fnp.where(neg, x, fnp.zeros((), x.dtype))
    return fnp.where(neg, alpha * fnp.expm1(safe), x)


def elu(input, alpha=1.0, inplace=False):
    return _op("EluBackward0", _elu_fn, input, inplace, "EluBackward1", alpha=float(alpha))


def _gelu_fn(x, *, approximate):
    return _jnn.gelu(x, approximate=(approximate == "tanh"))


def gelu(input, *, approximate="none"):
    """GELU; approximate='none' is the exact erf form (PyTorch's default), 'tanh' the tanh form
    (keyword-only, as torch's)."""
    if approximate not in ("none", "tanh"):
        raise RuntimeError("approximate argument must be either none or tanh.")
    return _call("GeluBackward0", _gelu_fn, (input,), approximate=approximate)


def _silu_fn(x):
    return _jnn.silu(x)


def silu(input, inplace=False):
    return _op("SiluBackward0", _silu_fn, input, inplace)


def _mish_fn(x):
    return x * fnp.tanh(_jnn.softplus(x))


def mish(input, inplace=False):
    """x * tanh(softplus(x)) (Misra, 2019)."""
    return _op("MishBackward0", _mish_fn, input, inplace)


def _sigmoid_fn(x):
    return _jnn.sigmoid(x)


def sigmoid(input):
    return _method_or("sigmoid", "SigmoidBackward0", _sigmoid_fn, input)


def _tanh_fn(x):
    return fnp.tanh(x)


def tanh(input):
    return _method_or("tanh", "TanhBackward0", _tanh_fn, input)


def _softplus_fn(x, *, beta, threshold):
    bx = x * beta
    soft = _jnn.softplus(bx) / beta
    return fnp.where(bx > threshold, x, soft)


def softplus(input, beta=1.0, threshold=20.0):
    """log(1 + exp(beta x)) / beta, linear above `threshold` (as torch)."""
    return _call("SoftplusBackward0", _softplus_fn, (input,), beta=float(beta),
                 threshold=float(threshold))


def _logsigmoid_fn(x):
    return _jnn.log_sigmoid(x)


def logsigmoid(input):
    return _call("LogSigmoidBackward0", _logsigmoid_fn, (input,))


def _hardtanh_fn(x, *, lo, hi):
    """clip(x, lo, hi) with torch's derivative (0 where x <= lo or x >= hi, else 1: also 1 at
    NaN, which passes through), so its backward reads only that bool mask."""
    return fnp.where((x <= lo) | (x >= hi), fnp.stop_gradient(fnp.clip(x, lo, hi)), x)


def _threshold_fn(x, *, threshold, value):
    return fnp.where(x > threshold, x, fnp.asarray(value, x.dtype))


def threshold(input, threshold, value, inplace=False):  # noqa: A002
    """input where input > threshold, else value (torch.nn.functional.threshold); the
    gradient passes where input > threshold."""
    return _op("ThresholdBackward0", _threshold_fn, input, inplace, "ThresholdBackward1",
               threshold=float(threshold), value=float(value))


def threshold_(input, threshold, value):  # noqa: A002
    return globals()["threshold"](input, threshold, value, inplace=True)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    return _op("HardtanhBackward0", _hardtanh_fn, input, inplace, lo=float(min_val),
               hi=float(max_val))


def _softmax_dim(ndim, dim, what):
    if dim is None:
        warnings.warn(f"Implicit dimension choice for {what} has been deprecated. Change the call "
                      "to include dim=X as an argument.", stacklevel=3)
        dim = 0 if ndim in (0, 1, 3) else 1
    return dim % max(ndim, 1) if ndim else 0


def _softmax_fn(x, *, dim):
    return _jnn.softmax(x, axis=dim) if fnp.ndim(x) else fnp.ones_like(x)


def _log_softmax_fn(x, *, dim):
    return _jnn.log_softmax(x, axis=dim) if fnp.ndim(x) else fnp.zeros_like(x)


def _cast_input(input, dtype):
    if dtype is None:
        return input
    if isinstance(input, Tensor):
        return input.to(dtype)
    return fnp.astype(input, dtype)


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    """exp(x) / sum(exp(x)) along dim (shifted by the max, so it never overflows)."""
    input = _cast_input(input, dtype)
    dim = _softmax_dim(_ndim(input), dim, "softmax")
    return _call("SoftmaxBackward0", _softmax_fn, (input,), dim=dim)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    """x - logsumexp(x) along dim."""
    input = _cast_input(input, dtype)
    dim = _softmax_dim(_ndim(input), dim, "log_softmax")
    return _call("LogSoftmaxBackward0", _log_softmax_fn, (input,), dim=dim)


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    return softmax(-input, dim, _stacklevel, dtype)


# ---------------------------------------------------------------------------
# dropout


def _dropout_mask(shape, p, dtype):
    """keep / (1 - p) as an array drawn from the facade's global generator."""
    if p >= 1.0:
        return np.zeros(shape, dtype)
    u = C.rand(*shape, dtype=np.float32)._data
    mask = np.greater_equal(u, p).astype(dtype)
    if isinstance(mask, np.ndarray):       # (no float64 temporary: the scale is weak)
        mask *= 1.0 / (1.0 - p)
        return mask
    return mask * (1.0 / (1.0 - p))


def _mul_fn(x, m):
    return x * m


def dropout(input, p=0.5, training=True, inplace=False):
    """Zero each element with probability p and scale the rest by 1/(1-p) (training only)."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    if _is_raw((input,)):
        _refuse_random_under_trace(input, "dropout")
    mask = _dropout_mask(_shape(input), p, np.dtype(input.dtype))
    if inplace and isinstance(input, Tensor):
        return input.mul_(Tensor._make(mask))
    if isinstance(mask, Tracer) and isinstance(input, Tensor):
        mask = Tensor._make(mask)          # ft.compile capture: the draw is a program input
    # p = 1 multiplies by zeros in torch (no native dropout kernel): MulBackward0
    name = "MulBackward0" if p == 1.0 else "NativeDropoutBackward0"
    return _call(name, _mul_fn, (input, mask))


def _refuse_random_under_trace(x, what):
    if isinstance(x, Tracer):
        raise RuntimeError(
            f"{what} in training mode draws a random mask from the global generator, which a "
            "functional transformation would freeze into a constant (and share across a "
            "vmapped batch). Call module.eval() (or pass training=False), or apply dropout "
            "yourself with explicit keys: ft.random.bernoulli(key, 1 - p, shape).")
