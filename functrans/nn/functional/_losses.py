"""torch.nn.functional: layers and losses as functions (ft.nn.functional).

Every function is written once, with functrans.numpy, and runs two ways:
  * on facade Tensors it is ONE recorded op (`apply_fn`): traced once per signature, run
    eagerly by the primitives' implementations, named like PyTorch's grad_fn
    (`NllLossBackward0`, `ConvolutionBackward0`, ...); its backward comes from the core;
  * on arrays or traced values (inside ft.grad / ft.vmap / ft.jit, e.g. through
    ft.func.functional_call) it is plain functrans.numpy code, so it composes with every
    transformation. Tensors met on this path enter as constants.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from ... import numpy as fnp
from ...core import Tracer
from ...facade.tensor import Tensor, apply_fn
from .. import functions as _jnn
from functrans.primitives.misc import stop_gradient as _stop_gradient

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
    from ...compile_capture import capture_hooks
    return capture_hooks.active()


def _raw(a):
    """The array behind a Tensor (a constant on the functional path); other values as is."""
    return a._data if isinstance(a, Tensor) else a


def _call(name, fn, args, **static):
    """fn(*args, **static) as one facade op named `name`, or directly on raw values."""
    if _is_raw(args):
        return fn(*[_raw(a) for a in args], **static)
    return apply_fn(name, fn, tuple(args), tuple(sorted(static.items())))


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
# linear layers


def _linear_fn(x, w):
    nd = fnp.ndim(x)
    from functrans.primitives import linalg as la
    return la.dot_general(x, w, dimension_numbers=(((nd - 1,), (1,)), ((), ())))


def _linear_bias_fn(x, w, b):
    return _linear_fn(x, w) + b


def linear(input, weight, bias=None):
    """input @ weight.T + bias, weight of shape (out_features, in_features)."""
    if _shape(input)[-1:] != _shape(weight)[-1:] or _ndim(weight) != 2:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied "
                           f"({_mat_desc(input)} and {_shape(weight)[-1] if _ndim(weight) else 1}"
                           f"x{_shape(weight)[0] if _ndim(weight) else 1})")
    two_d = _ndim(input) == 2
    if bias is None:
        return _call("MmBackward0" if two_d else "UnsafeViewBackward0", _linear_fn,
                     (input, weight))
    return _call("AddmmBackward0" if two_d else "ViewBackward0", _linear_bias_fn,
                 (input, weight, bias))


def _mat_desc(x):
    s = _shape(x)
    rows = math.prod(s[:-1]) if len(s) > 1 else 1
    return f"{rows}x{s[-1] if s else 1}"


def _bilinear_fn(x1, x2, w):
    return fnp.einsum("...i,oij,...j->...o", x1, w, x2)


def bilinear(input1, input2, weight, bias=None):
    """y = x1^T A x2 + b with weight of shape (out, in1, in2)."""
    if bias is None:
        return _call("BilinearBackward0", _bilinear_fn, (input1, input2, weight))
    return _call("BilinearBackward0", _bilinear_bias_fn, (input1, input2, weight, bias))


def _bilinear_bias_fn(x1, x2, w, b):
    return fnp.einsum("...i,oij,...j->...o", x1, w, x2) + b


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


def _relu_fn(x):
    return _jnn.relu(x)


def relu(input, inplace=False):
    """max(input, 0); inplace=True modifies a Tensor input in place."""
    return _method_or("relu", "ReluBackward0", _relu_fn, input, inplace)


def relu_(input):
    return relu(input, inplace=True)


def _relu6_fn(x):
    return fnp.clip(x, 0.0, 6.0)


def relu6(input, inplace=False):
    if inplace and isinstance(input, Tensor):
        return input.clamp_(0.0, 6.0)
    return _call("HardtanhBackward0", _relu6_fn, (input,))


def _leaky_relu_fn(x, *, negative_slope):
    return fnp.where(x > 0, x, x * negative_slope)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    out = _call("LeakyReluBackward0", _leaky_relu_fn, (input,),
                negative_slope=float(negative_slope))
    if inplace and isinstance(input, Tensor):
        return input.copy_(out)
    return out


def _elu_fn(x, *, alpha):
    return _jnn.elu(x, alpha)


def elu(input, alpha=1.0, inplace=False):
    out = _call("EluBackward0", _elu_fn, (input,), alpha=float(alpha))
    if inplace and isinstance(input, Tensor):
        return input.copy_(out)
    return out


def _gelu_fn(x, *, approximate):
    return _jnn.gelu(x, approximate=(approximate == "tanh"))


def gelu(input, approximate="none"):
    """GELU; approximate='none' is the exact erf form (PyTorch's default), 'tanh' the tanh form."""
    if approximate not in ("none", "tanh"):
        raise RuntimeError("approximate argument must be either none or tanh.")
    return _call("GeluBackward0", _gelu_fn, (input,), approximate=approximate)


def _silu_fn(x):
    return _jnn.silu(x)


def silu(input, inplace=False):
    out = _call("SiluBackward0", _silu_fn, (input,))
    if inplace and isinstance(input, Tensor):
        return input.copy_(out)
    return out


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
    return fnp.clip(x, lo, hi)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    out = _call("HardtanhBackward0", _hardtanh_fn, (input,), lo=float(min_val), hi=float(max_val))
    if inplace and isinstance(input, Tensor):
        return input.copy_(out)
    return out


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
    from ...facade import creation as C
    if p >= 1.0:
        return np.zeros(shape, dtype)
    u = C.rand(*shape, dtype=np.float32)._data
    return ((u >= p) * (1.0 / (1.0 - p))).astype(dtype)


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
    return _call("NativeDropoutBackward0", _mul_fn, (input, mask))


def _refuse_random_under_trace(x, what):
    if isinstance(x, Tracer):
        raise RuntimeError(
            f"{what} in training mode draws a random mask from the global generator, which a "
            "functional transformation would freeze into a constant (and share across a "
            "vmapped batch). Call module.eval() (or pass training=False), or apply dropout "
            "yourself with explicit keys: ft.random.bernoulli(key, 1 - p, shape).")


# ---------------------------------------------------------------------------
# normalization


def _affine(y, args, has_w, has_b, shape=None):
    """y * weight + bias for the normalization layers; args holds the weight (if has_w)
    then the bias (if has_b), reshaped to `shape` to broadcast over the channels."""
    i = 0
    if has_w:
        y = y * (args[i] if shape is None else fnp.reshape(args[i], shape))
        i += 1
    if has_b:
        y = y + (args[i] if shape is None else fnp.reshape(args[i], shape))
    return y


def _layer_norm_fn(x, *args, axes, eps, has_w, has_b):
    mean = fnp.mean(x, axis=axes, keepdims=True)
    xc = x - mean
    var = fnp.mean(xc * xc, axis=axes, keepdims=True)
    y = xc * fnp.rsqrt(var + eps)
    return _affine(y, args, has_w, has_b)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalize over the last len(normalized_shape) dims (biased variance), then affine."""
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    normalized_shape = tuple(normalized_shape)
    k = len(normalized_shape)
    if _shape(input)[-k:] != normalized_shape:
        raise RuntimeError(f"Given normalized_shape={list(normalized_shape)}, expected input with "
                           f"shape [*, {', '.join(map(str, normalized_shape))}], but got input "
                           f"of size{list(_shape(input))}")
    nd = _ndim(input)
    axes = tuple(range(nd - k, nd))
    args = (input,) + tuple(a for a in (weight, bias) if a is not None)
    return _call("NativeLayerNormBackward0", _layer_norm_fn, args, axes=axes, eps=float(eps),
                 has_w=weight is not None, has_b=bias is not None)


def _bn_train_fn(x, *args, eps, has_w, has_b):
    axes = (0,) + tuple(range(2, fnp.ndim(x)))
    shape = (1, x.shape[1]) + (1,) * (fnp.ndim(x) - 2)
    mean = fnp.mean(x, axis=axes, keepdims=True)
    xc = x - mean
    var = fnp.mean(xc * xc, axis=axes, keepdims=True)
    y = xc * fnp.rsqrt(var + eps)
    y = _affine(y, args, has_w, has_b, shape)
    return y, fnp.reshape(mean, (x.shape[1],)), fnp.reshape(var, (x.shape[1],))


def _bn_eval_fn(x, rm, rv, *args, eps, has_w, has_b):
    shape = (1, x.shape[1]) + (1,) * (fnp.ndim(x) - 2)
    y = (x - fnp.reshape(rm, shape)) * fnp.reshape(fnp.rsqrt(rv + eps), shape)
    return _affine(y, args, has_w, has_b, shape)


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    """Normalize per channel (dim 1). training: batch statistics (biased variance), and the
    running statistics, when given, are updated in place with momentum and the unbiased
    variance; otherwise the running statistics are used."""
    shape = _shape(input)
    if len(shape) < 2:
        raise ValueError(f"expected 2D or 3D input (got {len(shape)}D input)")
    affine = tuple(a for a in (weight, bias) if a is not None)
    flags = dict(eps=float(eps), has_w=weight is not None, has_b=bias is not None)
    if not training:
        if running_mean is None or running_var is None:
            raise RuntimeError("running_mean and running_var must be defined in evaluation mode")
        return _call("NativeBatchNormBackward0", _bn_eval_fn,
                     (input, running_mean, running_var) + affine, **flags)
    n = math.prod(shape) // shape[1]
    if n <= 1:
        raise ValueError(f"Expected more than 1 value per channel when training, got input "
                         f"size {_size(shape)}")
    raw = _is_raw((input,) + affine)
    if raw and running_mean is not None and any(
            isinstance(v, Tracer) for v in (input,) + affine):
        raise RuntimeError(
            "batch_norm in training mode updates its running statistics in place, which cannot "
            "happen on traced values (inside ft.grad / ft.vmap / ft.jit). Call module.eval(), or "
            "build the layer with track_running_stats=False.")
    out = _call("NativeBatchNormBackward0", _bn_train_fn, (input,) + affine, **flags)
    y, mean, var = out
    if running_mean is not None:
        _update_running(running_mean, running_var, mean, var, n, momentum)
    return y


def _update_running(running_mean, running_var, mean, var, n, momentum):
    from ...facade.grad_mode import no_grad
    mean = mean.detach() if isinstance(mean, Tensor) else mean
    var = var.detach() if isinstance(var, Tensor) else var
    unbiased = var * (n / (n - 1))
    with no_grad():
        if isinstance(running_mean, Tensor):
            running_mean.mul_(1 - momentum).add_(_as_tensor(mean), alpha=momentum)
            running_var.mul_(1 - momentum).add_(_as_tensor(unbiased), alpha=momentum)
        else:
            running_mean *= 1 - momentum
            running_mean += momentum * np.asarray(mean)
            running_var *= 1 - momentum
            running_var += momentum * np.asarray(unbiased)


def _as_tensor(v):
    return v if isinstance(v, Tensor) else Tensor._make(v)


def _size(shape):
    return f"ft.Size([{', '.join(map(str, shape))}])"


def _group_norm_fn(x, *args, groups, eps, has_w, has_b):
    n, c = x.shape[0], x.shape[1]
    rest = tuple(x.shape[2:])
    g = fnp.reshape(x, (n, groups, -1))
    mean = fnp.mean(g, axis=2, keepdims=True)
    gc = g - mean
    var = fnp.mean(gc * gc, axis=2, keepdims=True)
    y = fnp.reshape(gc * fnp.rsqrt(var + eps), (n, c) + rest)
    shape = (1, c) + (1,) * len(rest)
    return _affine(y, args, has_w, has_b, shape)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Normalize over groups of channels (and all spatial positions), then affine per channel."""
    if _shape(input)[1] % num_groups:
        raise RuntimeError(f"Expected number of channels in input to be divisible by num_groups, "
                           f"but got input of shape {_size(_shape(input))} and num_groups="
                           f"{num_groups}")
    affine = tuple(a for a in (weight, bias) if a is not None)
    return _call("NativeGroupNormBackward0", _group_norm_fn, (input,) + affine,
                 groups=int(num_groups), eps=float(eps), has_w=weight is not None,
                 has_b=bias is not None)


# ---------------------------------------------------------------------------
# embedding


def _embedding_fn(idx, w, *, padding_idx):
    out = fnp.take(w, idx, axis=0)
    if padding_idx is not None:
        pad = fnp.expand_dims(idx == padding_idx, -1)
        out = fnp.where(pad, _stop_gradient(out), out)
    return out


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False):
    """Rows of `weight` picked by the integer `input`; the row at padding_idx gets no gradient."""
    if max_norm is not None or scale_grad_by_freq or sparse:
        raise NotImplementedError("embedding: max_norm, scale_grad_by_freq and sparse are not "
                                  "supported by functrans")
    if np.dtype(input.dtype).kind not in "iu":
        raise RuntimeError("Expected tensor for argument #1 'indices' to have one of the following "
                           f"scalar types: Long, Int; but got {input.dtype} instead (while "
                           "checking arguments for embedding)")
    num = _shape(weight)[0]
    if padding_idx is not None:
        if padding_idx < 0:
            padding_idx += num
    idx = _concrete(input)
    if idx is not None and idx.size and (idx.min() < 0 or idx.max() >= num):
        raise IndexError("index out of range in self")
    return _call("EmbeddingBackward0", _embedding_fn, (input, weight), padding_idx=padding_idx)


def one_hot(tensor, num_classes=-1):
    """int64 one-hot encoding along a new last dim."""
    arr = _concrete(tensor)
    if num_classes == -1:
        if arr is None:
            raise RuntimeError("one_hot of a traced value needs num_classes")
        num_classes = int(arr.max()) + 1 if arr.size else 0
    if arr is not None and arr.size and (arr.min() < 0 or arr.max() >= num_classes):
        raise RuntimeError("Class values must be smaller than num_classes.")
    if _is_raw((tensor,)):
        return fnp.astype(fnp.expand_dims(_raw(tensor), -1) == fnp.arange(num_classes), np.int64)
    return Tensor._make((arr[..., None] == np.arange(num_classes)).astype(np.int64))


# ---------------------------------------------------------------------------
# convolution and pooling (im2col by strided slices, then one contraction)


def _pair(v, name="kernel_size"):
    if isinstance(v, int):
        return (v, v)
    v = tuple(int(a) for a in v)
    if len(v) == 1:
        return (v[0], v[0])
    if len(v) != 2:
        raise ValueError(f"{name} must be an int or a pair of ints, got {v}")
    return v


def _windows(x, kh, kw, stride, dilation, oh, ow):
    """(N, C, kh*kw, oh, ow): every kernel offset's strided view of a padded (N, C, H, W)."""
    sh, sw = stride
    dh, dw = dilation
    cols = []
    for i in range(kh):
        for j in range(kw):
            cols.append(x[:, :, i * dh: i * dh + sh * (oh - 1) + 1: sh,
                          j * dw: j * dw + sw * (ow - 1) + 1: sw])
    return fnp.stack(cols, axis=2)


def _conv2d_fn(x, w, *b, stride, pads, dilation, groups):
    n, c = x.shape[0], x.shape[1]
    o, cg, kh, kw = w.shape
    (pt, pb), (pl, pr) = pads
    if pt or pb or pl or pr:
        x = fnp.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    hp, wp = x.shape[2], x.shape[3]
    oh = (hp - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wp - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    if kh == 1 and kw == 1 and stride == (1, 1):
        cols = fnp.reshape(x, (n, c, oh * ow))
    else:
        cols = fnp.reshape(_windows(x, kh, kw, stride, dilation, oh, ow), (n, c * kh * kw, oh * ow))
    # one batched contraction; its output is already (n, o, L): no transposes to copy
    if groups == 1:
        out = fnp.matmul(fnp.reshape(w, (o, cg * kh * kw)), cols)
    else:
        cols = fnp.reshape(cols, (n, groups, cg * kh * kw, oh * ow))
        out = fnp.matmul(fnp.reshape(w, (groups, o // groups, cg * kh * kw)), cols)
    out = fnp.reshape(out, (n, o, oh, ow))
    if b:
        out = out + fnp.reshape(b[0], (1, o, 1, 1))
    return out


def _conv_pads(padding, kernel, dilation, stride, what="conv2d"):
    """((top, bottom), (left, right)) from an int, a pair, 'valid' or 'same'."""
    if isinstance(padding, str):
        if padding == "valid":
            return ((0, 0), (0, 0))
        if padding == "same":
            if stride != (1, 1):
                raise ValueError("padding='same' is not supported for strided convolutions")
            pads = []
            for k, d in zip(kernel, dilation):
                total = d * (k - 1)
                pads.append((total // 2, total - total // 2))
            return tuple(pads)
        raise ValueError(f"Invalid padding string '{padding}', should be one of "
                         "{'valid', 'same'}")
    ph, pw = _pair(padding, "padding")
    return ((ph, ph), (pw, pw))


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D cross-correlation of (N, C, H, W) (or (C, H, W)) with weight (O, C/groups, kh, kw)."""
    unbatched = _ndim(input) == 3
    if unbatched:
        input = _unsqueeze0(input)
    if _ndim(input) != 4:
        raise RuntimeError(f"Expected 3D (unbatched) or 4D (batched) input to conv2d, but got "
                           f"input of size: {list(_shape(input))}")
    stride, dilation = _pair(stride, "stride"), _pair(dilation, "dilation")
    o, cg, kh, kw = _shape(weight)
    c = _shape(input)[1]
    if c != cg * groups:
        raise RuntimeError(f"Given groups={groups}, weight of size {list(_shape(weight))}, "
                           f"expected input{list(_shape(input))} to have {cg * groups} channels, "
                           f"but got {c} channels instead")
    if o % groups:
        raise RuntimeError("out_channels must be divisible by groups")
    pads = _conv_pads(padding, (kh, kw), dilation, stride)
    hp = _shape(input)[2] + pads[0][0] + pads[0][1]
    wp = _shape(input)[3] + pads[1][0] + pads[1][1]
    if hp < dilation[0] * (kh - 1) + 1 or wp < dilation[1] * (kw - 1) + 1:
        raise RuntimeError(f"Calculated padded input size per channel: ({hp} x {wp}). Kernel "
                           f"size: ({dilation[0] * (kh - 1) + 1} x {dilation[1] * (kw - 1) + 1}). "
                           "Kernel size can't be greater than actual input size")
    args = (input, weight) if bias is None else (input, weight, bias)
    out = _call("ConvolutionBackward0", _conv2d_fn, args, stride=stride, pads=pads,
                dilation=dilation, groups=int(groups))
    return _squeeze0(out) if unbatched else out


def _unsqueeze0(x):
    return x.unsqueeze(0) if isinstance(x, Tensor) else fnp.expand_dims(x, 0)


def _squeeze0(x):
    return x.squeeze(0) if isinstance(x, Tensor) else fnp.squeeze(x, 0)


def _pool_geometry(h, k, s, p, d, ceil_mode):
    """Output size and extra right padding of one pooled dimension (torch's rule)."""
    span = h + 2 * p - d * (k - 1) - 1
    if ceil_mode:
        out = -(-span // s) + 1
        if (out - 1) * s >= h + p:
            out -= 1
    else:
        out = span // s + 1
    extra = max(0, (out - 1) * s + d * (k - 1) + 1 - (h + 2 * p))
    return out, extra


def _max_pool2d_fn(x, *, kernel, stride, padding, dilation, geometry, with_indices):
    kh, kw = kernel
    (oh, eh), (ow, ew_) = geometry
    ph, pw = padding
    w = x.shape[3]
    if ph or pw or eh or ew_:
        x = fnp.pad(x, ((0, 0), (0, 0), (ph, ph + eh), (pw, pw + ew_)),
                    constant_values=-np.inf)
    win = _windows(x, kh, kw, stride, dilation, oh, ow)         # (n, c, k, oh, ow)
    idx = fnp.argmax(win, axis=2)                               # first maximum, as torch
    pick = fnp.expand_dims(idx, 2) == fnp.reshape(fnp.arange(kh * kw), (1, 1, -1, 1, 1))
    out = fnp.sum(fnp.where(pick, win, fnp.zeros((), x.dtype)), axis=2)
    if not with_indices:
        return out
    ki, kj = idx // kw, idx % kw
    rows = fnp.reshape(fnp.arange(oh) * stride[0], (1, 1, oh, 1)) - ph + ki * dilation[0]
    cols = fnp.reshape(fnp.arange(ow) * stride[1], (1, 1, 1, ow)) - pw + kj * dilation[1]
    return out, fnp.astype(rows * w + cols, np.int64)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """Max over kh x kw windows of (N, C, H, W) (or (C, H, W)); ties go to the first element."""
    unbatched = _ndim(input) == 3
    if unbatched:
        input = _unsqueeze0(input)
    kernel = _pair(kernel_size)
    stride = kernel if stride is None or (not isinstance(stride, int) and len(stride) == 0) \
        else _pair(stride, "stride")
    padding, dilation = _pair(padding, "padding"), _pair(dilation, "dilation")
    if padding[0] > kernel[0] // 2 or padding[1] > kernel[1] // 2:
        raise RuntimeError("pad should be at most half of effective kernel size, but got "
                           f"pad={padding[0]}, kernel_size={kernel[0]} and dilation={dilation[0]}")
    h, w = _shape(input)[2:]
    geometry = (_pool_geometry(h, kernel[0], stride[0], padding[0], dilation[0], ceil_mode),
                _pool_geometry(w, kernel[1], stride[1], padding[1], dilation[1], ceil_mode))
    if geometry[0][0] <= 0 or geometry[1][0] <= 0:
        raise RuntimeError(f"Given input size: ({_shape(input)[1]}x{h}x{w}). Calculated output "
                           f"size: ({_shape(input)[1]}x{geometry[0][0]}x{geometry[1][0]}). "
                           "Output size is too small")
    out = _call("MaxPool2DWithIndicesBackward0", _max_pool2d_fn, (input,), kernel=kernel,
                stride=stride, padding=padding, dilation=dilation, geometry=geometry,
                with_indices=bool(return_indices))
    if return_indices:
        o, i = out
        return (_squeeze0(o), _squeeze0(i)) if unbatched else (o, i)
    return _squeeze0(out) if unbatched else out


def _avg_pool2d_fn(x, *, kernel, stride, padding, geometry, count_include_pad, divisor):
    kh, kw = kernel
    (oh, eh), (ow, ew_) = geometry
    ph, pw = padding
    h, w = x.shape[2], x.shape[3]
    if ph or pw or eh or ew_:
        x = fnp.pad(x, ((0, 0), (0, 0), (ph, ph + eh), (pw, pw + ew_)))
    total = fnp.sum(_windows(x, kh, kw, stride, (1, 1), oh, ow), axis=2)
    if divisor:
        return total / divisor
    # the divisor counts the window's elements inside the input (and, with count_include_pad,
    # inside the zero padding), never the extra right padding of ceil_mode
    if count_include_pad:
        inside = np.pad(np.ones((1, 1, h + 2 * ph, w + 2 * pw), x.dtype),
                        ((0, 0), (0, 0), (0, eh), (0, ew_)))
    else:
        inside = np.pad(np.ones((1, 1, h, w), x.dtype),
                        ((0, 0), (0, 0), (ph, ph + eh), (pw, pw + ew_)))
    count = np.add.reduce(np.stack(
        [inside[:, :, i: i + stride[0] * (oh - 1) + 1: stride[0],
                j: j + stride[1] * (ow - 1) + 1: stride[1]]
         for i in range(kh) for j in range(kw)], axis=2), axis=2)
    return total / count


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """Mean over kh x kw windows (padding counted unless count_include_pad=False)."""
    unbatched = _ndim(input) == 3
    if unbatched:
        input = _unsqueeze0(input)
    kernel = _pair(kernel_size)
    stride = kernel if stride is None or (not isinstance(stride, int) and len(stride) == 0) \
        else _pair(stride, "stride")
    padding = _pair(padding, "padding")
    if padding[0] > kernel[0] // 2 or padding[1] > kernel[1] // 2:
        raise RuntimeError("pad should be smaller than or equal to half of kernel size")
    h, w = _shape(input)[2:]
    geometry = (_pool_geometry(h, kernel[0], stride[0], padding[0], 1, ceil_mode),
                _pool_geometry(w, kernel[1], stride[1], padding[1], 1, ceil_mode))
    out = _call("AvgPool2DBackward0", _avg_pool2d_fn, (input,), kernel=kernel, stride=stride,
                padding=padding, geometry=geometry, count_include_pad=bool(count_include_pad),
                divisor=divisor_override)
    return _squeeze0(out) if unbatched else out


def _adaptive_avg_fn(x, *, out_size):
    h, w = x.shape[2], x.shape[3]
    oh, ow = out_size
    rows = []
    for i in range(oh):
        h0, h1 = (i * h) // oh, -((-(i + 1) * h) // oh)
        cols = []
        for j in range(ow):
            w0, w1 = (j * w) // ow, -((-(j + 1) * w) // ow)
            cols.append(fnp.mean(x[:, :, h0:h1, w0:w1], axis=(2, 3)))
        rows.append(fnp.stack(cols, axis=-1))
    return fnp.stack(rows, axis=-2)


def adaptive_avg_pool2d(input, output_size):
    """Mean over the adaptive windows [floor(i H / oh), ceil((i+1) H / oh)) of each output cell."""
    unbatched = _ndim(input) == 3
    if unbatched:
        input = _unsqueeze0(input)
    h, w = _shape(input)[2:]
    oh, ow = (output_size, output_size) if isinstance(output_size, int) else tuple(output_size)
    oh, ow = (h if oh is None else oh), (w if ow is None else ow)
    out = _call("AdaptiveAvgPool2DBackward0", _adaptive_avg_fn, (input,), out_size=(oh, ow))
    return _squeeze0(out) if unbatched else out


def _pad_fn(x, *, widths, value):
    return fnp.pad(x, widths, constant_values=value)


def pad(input, pad, mode="constant", value=None):
    """Pad the last len(pad)//2 dims: pad = (last_lo, last_hi, prev_lo, prev_hi, ...)."""
    if mode != "constant":
        raise NotImplementedError(f"pad: mode {mode!r} is not supported by functrans (only "
                                  "'constant')")
    if len(pad) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    nd = _ndim(input)
    if len(pad) // 2 > nd:
        raise RuntimeError("Padding length should be less than or equal to two times the input "
                           "dimension")
    widths = [(0, 0)] * nd
    for i in range(len(pad) // 2):
        lo, hi = int(pad[2 * i]), int(pad[2 * i + 1])
        if lo < 0 or hi < 0:
            raise NotImplementedError("pad: negative padding (cropping) is not supported")
        widths[nd - 1 - i] = (lo, hi)
    return _call("ConstantPadNdBackward0", _pad_fn, (input,), widths=tuple(widths),
                 value=0.0 if value is None else float(value))


# ---------------------------------------------------------------------------
# losses


def _mse_fn(x, t, *, reduction):
    d = x - t
    return _reduce(d * d, reduction)


def _broadcast_warning(input, target, what):
    if _shape(input) != _shape(target):
        warnings.warn(f"Using a target size ({_size(_shape(target))}) that is different to the "
                      f"input size ({_size(_shape(input))}). This will likely lead to incorrect "
                      "results due to broadcasting. Please ensure they have the same size.",
                      stacklevel=3)


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """(input - target)^2, reduced ('mean' | 'sum' | 'none')."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    _broadcast_warning(input, target, "mse_loss")
    if weight is not None:
        return _call("MseLossBackward0", _weighted_fn, (input, target, weight),
                     kind="mse", reduction=reduction)
    return _call("MseLossBackward0", _mse_fn, (input, target), reduction=reduction)


def _weighted_fn(x, t, w, *, kind, reduction):
    d = x - t
    loss = d * d if kind == "mse" else fnp.abs(d)
    return _reduce(loss * w, reduction)


def _l1_fn(x, t, *, reduction):
    return _reduce(fnp.abs(x - t), reduction)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """|input - target|, reduced."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    _broadcast_warning(input, target, "l1_loss")
    return _call("L1LossBackward0", _l1_fn, (input, target), reduction=reduction)


def _smooth_l1_fn(x, t, *, beta, reduction, huber):
    d = fnp.abs(x - t)
    if beta == 0:
        loss = d
    else:
        quad = 0.5 * d * d / beta if not huber else 0.5 * d * d
        lin = d - 0.5 * beta if not huber else beta * (d - 0.5 * beta)
        loss = fnp.where(d < beta, quad, lin)
    return _reduce(loss, reduction)


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """0.5 d^2 / beta where |d| < beta, else |d| - beta / 2."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    return _call("SmoothL1LossBackward0", _smooth_l1_fn, (input, target), beta=float(beta),
                 reduction=reduction, huber=False)


def huber_loss(input, target, reduction="mean", delta=1.0):
    """0.5 d^2 where |d| < delta, else delta (|d| - delta / 2)."""
    _check_reduction(reduction)
    return _call("HuberLossBackward0", _smooth_l1_fn, (input, target), beta=float(delta),
                 reduction=reduction, huber=True)


def _class_shape(ndim):
    """Shape of a per-class vector broadcast against (N, C, d1, ...)."""
    return (1, -1) + (1,) * (ndim - 2)


def _onehot(t, c, ndim):
    classes = fnp.reshape(fnp.arange(c, dtype=np.int64), _class_shape(ndim))
    return fnp.expand_dims(t, 1) == classes


def _nll_fn(logp, t, *w, ignore_index, reduction, smoothing, from_logits):
    """Negative log-likelihood of class indices t under log-probabilities (or logits)."""
    if from_logits:
        logp = _jnn.log_softmax(logp, axis=1)
    nd = fnp.ndim(logp)
    c = logp.shape[1]
    valid = t != ignore_index
    tc = fnp.where(valid, t, fnp.zeros((), t.dtype))
    hot = _onehot(tc, c, nd)
    zero = fnp.zeros((), logp.dtype)
    picked = fnp.sum(fnp.where(hot, logp, zero), axis=1)
    if w:
        wc = fnp.reshape(w[0], _class_shape(nd))
        wi = fnp.sum(fnp.where(hot, wc, zero), axis=1)
    else:
        wi = fnp.ones(t.shape, logp.dtype)
    wi = fnp.where(valid, wi, zero)
    loss = -(picked * wi)
    denom = fnp.sum(wi)
    out = _reduce(loss, reduction, mean_div=denom)
    if smoothing:
        smooth = -fnp.sum(logp * wc if w else logp, axis=1)
        smooth = fnp.where(valid, smooth, zero)
        if reduction == "mean":
            sm = fnp.sum(smooth) / denom if w else fnp.sum(smooth) / fnp.sum(
                fnp.astype(valid, logp.dtype))
        else:
            sm = _reduce(smooth, reduction)
        out = (1 - smoothing) * out + sm * (smoothing / c)
    return out


def _nll_plain_fn(logp, t, *, reduction, from_logits):
    """_nll_fn without class weights, smoothing or ignored targets (the common case)."""
    if from_logits:
        logp = _jnn.log_softmax(logp, axis=1)
    hot = _onehot(t, logp.shape[1], fnp.ndim(logp))
    loss = -fnp.sum(fnp.where(hot, logp, fnp.zeros((), logp.dtype)), axis=1)
    return _reduce(loss, reduction)


def _soft_ce_fn(x, p, *w, reduction, smoothing):
    """Cross-entropy against class probabilities p (same shape as the logits x)."""
    logp = _jnn.log_softmax(x, axis=1)
    c = x.shape[1]
    if smoothing:
        p = p * (1 - smoothing) + smoothing / c
    term = logp * p
    if w:
        term = term * fnp.reshape(w[0], _class_shape(fnp.ndim(x)))
    loss = -fnp.sum(term, axis=1)
    if reduction == "mean":
        n = 1
        for s in loss.shape:
            n *= s
        return fnp.sum(loss) / n
    return _reduce(loss, reduction)


def _check_targets(target, n_classes, ignore_index):
    """Raise on out-of-range targets; return whether some target may be ignore_index."""
    arr = _concrete(target)
    if arr is None:
        return True
    ignored = arr == ignore_index
    bad = ~ignored & ((arr < 0) | (arr >= n_classes))
    if bad.any():
        raise IndexError(f"Target {int(arr[bad].flat[0])} is out of bounds.")
    return bool(ignored.any())


def _as_batched(input, target):
    """(input, target, squeeze) with an unbatched (C,) input made (1, C)."""
    if _ndim(input) == 1:
        t = target
        if _ndim(target) == 0:
            t = target.unsqueeze(0) if isinstance(target, Tensor) else fnp.expand_dims(target, 0)
        else:
            t = _unsqueeze0(target)
        return _unsqueeze0(input), t, True
    return input, target, False


def _squeeze_loss(out, squeeze, reduction):
    if squeeze and reduction == "none":
        return _squeeze0(out)
    return out


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
             reduction="mean"):
    """-input[i, target[i]] * weight[target[i]], reduced; 'mean' divides by the total weight
    of the non-ignored targets."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    input, target, squeeze = _as_batched(input, target)
    _check_class_target(input, target, "nll_loss")
    ignored = _check_targets(target, _shape(input)[1], ignore_index)
    if weight is None and not ignored:
        out = _call("NllLossBackward0", _nll_plain_fn, (input, target), reduction=reduction,
                    from_logits=False)
        return _squeeze_loss(out, squeeze, reduction)
    args = (input, target) if weight is None else (input, target, weight)
    out = _call("NllLossBackward0", _nll_fn, args, ignore_index=int(ignore_index),
                reduction=reduction, smoothing=0.0, from_logits=False)
    return _squeeze_loss(out, squeeze, reduction)


def _check_class_target(input, target, what):
    if np.dtype(target.dtype).kind not in "iu":
        raise RuntimeError(f"expected scalar type Long but found {target.dtype}")
    si, st = _shape(input), _shape(target)
    if st != si[:1] + si[2:]:
        if len(si) == 2 and len(st) == 1:
            raise ValueError(f"Expected input batch_size ({si[0]}) to match target batch_size "
                             f"({st[0]}).")
        raise RuntimeError(f"{what}: expected target of shape {_size(si[:1] + si[2:])}, got "
                           f"{_size(st)}")


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                  reduction="mean", label_smoothing=0.0):
    """log_softmax over dim 1, then the negative log-likelihood of class indices (integer
    target of shape (N, d1, ...)) or of class probabilities (float target shaped like input)."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    input, target, squeeze = _as_batched(input, target)
    wargs = () if weight is None else (weight,)
    if np.dtype(target.dtype).kind == "f":
        if _shape(target) != _shape(input):
            raise RuntimeError(f"Expected floating point target to have the same shape as input "
                               f"{_size(_shape(input))}, got {_size(_shape(target))}")
        out = _call("DivBackward1" if reduction == "mean" else "NegBackward0", _soft_ce_fn,
                    (input, target) + wargs, reduction=reduction,
                    smoothing=float(label_smoothing))
        return _squeeze_loss(out, squeeze, reduction)
    _check_class_target(input, target, "cross_entropy")
    ignored = _check_targets(target, _shape(input)[1], ignore_index)
    if weight is None and not label_smoothing and not ignored:
        out = _call("NllLossBackward0", _nll_plain_fn, (input, target), reduction=reduction,
                    from_logits=True)
        return _squeeze_loss(out, squeeze, reduction)
    name = "AddBackward0" if label_smoothing else "NllLossBackward0"
    out = _call(name, _nll_fn, (input, target) + wargs, ignore_index=int(ignore_index),
                reduction=reduction, smoothing=float(label_smoothing), from_logits=True)
    return _squeeze_loss(out, squeeze, reduction)


def _bce_fn(x, t, *w, reduction):
    logx = fnp.maximum(fnp.log(x), -100.0)
    log1mx = fnp.maximum(fnp.log1p(-x), -100.0)
    loss = -(t * logx + (1 - t) * log1mx)
    if w:
        loss = loss * w[0]
    return _reduce(loss, reduction)


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None,
                         reduction="mean"):
    """-(t log x + (1 - t) log(1 - x)) on probabilities x, each log clamped at -100 (as torch)."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if _shape(input) != _shape(target):
        raise ValueError(f"Using a target size ({_size(_shape(target))}) that is different to the "
                         f"input size ({_size(_shape(input))}) is deprecated. Please ensure they "
                         "have the same size.")
    arr = _concrete(input)
    if arr is not None and arr.size and ((arr < 0).any() or (arr > 1).any()):
        raise RuntimeError("all elements of input should be between 0 and 1")
    args = (input, target) if weight is None else (input, target, weight)
    return _call("BinaryCrossEntropyBackward0", _bce_fn, args, reduction=reduction)


def _bce_logits_fn(x, t, *extra, reduction, has_w, has_pw):
    i = 0
    w = pw = None
    if has_w:
        w = extra[i]
        i += 1
    if has_pw:
        pw = extra[i]
    sp = _jnn.softplus(-x)                       # log(1 + exp(-x)), stable
    if pw is None:
        loss = (1 - t) * x + sp
    else:
        loss = (1 - t) * x + (1 + (pw - 1) * t) * sp
    if w is not None:
        loss = loss * w
    return _reduce(loss, reduction)


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None,
                                     reduction="mean", pos_weight=None):
    """BCE on logits, computed stably: (1 - t) x + (1 + (pos_weight - 1) t) log(1 + exp(-x))."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if _shape(input) != _shape(target):
        raise ValueError(f"Target size ({_size(_shape(target))}) must be the same as input size "
                         f"({_size(_shape(input))})")
    extra = tuple(a for a in (weight, pos_weight) if a is not None)
    return _call("BinaryCrossEntropyWithLogitsBackward0", _bce_logits_fn,
                 (input, target) + extra, reduction=reduction, has_w=weight is not None,
                 has_pw=pos_weight is not None)


def _kl_fn(x, t, *, reduction, log_target):
    if log_target:
        loss = fnp.exp(t) * (t - x)
    else:
        safe = fnp.where(t > 0, t, fnp.ones((), t.dtype))
        loss = fnp.where(t > 0, t * (fnp.log(safe) - x), fnp.zeros((), x.dtype))
    if reduction == "batchmean":
        return fnp.sum(loss) / x.shape[0]
    return _reduce(loss, reduction)


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """KL(target || exp(input)) pointwise: target (log target - input), reduced."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if reduction not in ("mean", "sum", "none", "batchmean"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return _call("KlDivBackward0", _kl_fn, (input, target), reduction=reduction,
                 log_target=bool(log_target))


# ---------------------------------------------------------------------------
# misc


def _normalize_fn(x, *, p, dim, eps):
    if p == 2:
        n = fnp.sqrt(fnp.sum(x * x, axis=dim, keepdims=True))
    else:
        n = fnp.power(fnp.sum(fnp.power(fnp.abs(x), p), axis=dim, keepdims=True), 1.0 / p)
    return x / fnp.maximum(n, eps)


def normalize(input, p=2.0, dim=1, eps=1e-12):
    """x / max(||x||_p, eps) along dim."""
    return _call("DivBackward0", _normalize_fn, (input,), p=float(p), dim=int(dim),
                 eps=float(eps))


def _cosine_fn(a, b, *, dim, eps):
    num = fnp.sum(a * b, axis=dim)
    na = fnp.sqrt(fnp.sum(a * a, axis=dim))
    nb = fnp.sqrt(fnp.sum(b * b, axis=dim))
    return num / (fnp.maximum(na, eps) * fnp.maximum(nb, eps))


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    return _call("DivBackward0", _cosine_fn, (x1, x2), dim=int(dim), eps=float(eps))


def _flatten_fn(x, *, start, end):
    s = tuple(x.shape)
    if not s:
        return fnp.reshape(x, (1,))
    mid = 1
    for v in s[start:end + 1]:
        mid *= v
    return fnp.reshape(x, s[:start] + (mid,) + s[end + 1:])


def flatten(input, start_dim=0, end_dim=-1):
    """Merge dims start_dim..end_dim (Tensors: the Tensor's own flatten, a view)."""
    if _is_facade(input):
        return input.flatten(start_dim, end_dim)
    x = _raw(input)
    nd = max(fnp.ndim(x), 1)
    return _flatten_fn(x, start=start_dim % nd, end=end_dim % nd)
