"""ft.nn.functional's normalization layers: layer_norm, batch_norm (updating running statistics),
group_norm."""
from __future__ import annotations

import math

import numpy as np

from ...numpy import raw as fnp
from ...core import Tracer
from ...facade.grad_mode import no_grad
from ...facade.tensor import Tensor
from ._dispatch import _call, _is_raw, _ndim, _shape, _size


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
    """Normalize over the last len(normalized_shape) dims (biased variance), then affine.
    normalized_shape is a tuple or list of ints (an int is refused, as torch does; the
    LayerNorm layer takes one)."""
    if not isinstance(normalized_shape, (tuple, list)):
        raise TypeError(f"layer_norm(): argument 'normalized_shape' (position 2) must be tuple "
                        f"of ints, not {type(normalized_shape).__name__}")
    normalized_shape = tuple(normalized_shape)
    for name, a in (("weight", weight), ("bias", bias)):
        if a is not None and tuple(_shape(a)) != normalized_shape:
            raise RuntimeError(f"Expected {name} to be of same shape as normalized_shape, but got "
                               f"{name} of shape {list(_shape(a))} and normalized_shape = "
                               f"{list(normalized_shape)}")
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
    """The per-channel statistics are computed as the op's (C,) outputs and reshaped for the
    broadcasts: a facade node keeps its inputs and outputs, so the backward reads them
    (as torch's keeps its saved mean and invstd) instead of summing x twice again."""
    axes = (0,) + tuple(range(2, fnp.ndim(x)))
    shape = (1, x.shape[1]) + (1,) * (fnp.ndim(x) - 2)
    mean = fnp.mean(x, axis=axes)
    xc = x - fnp.reshape(mean, shape)
    var = fnp.mean(xc * xc, axis=axes)
    y = xc * fnp.rsqrt(fnp.reshape(var, shape) + eps)
    y = _affine(y, args, has_w, has_b, shape)
    return y, mean, var


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
    for name, a in (("running_mean", running_mean), ("running_var", running_var),
                    ("weight", weight), ("bias", bias)):
        if a is not None and math.prod(_shape(a)) != shape[1]:
            raise RuntimeError(f"{name} should contain {shape[1]} elements not "
                               f"{math.prod(_shape(a))}")
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
                           f"but got input of shape {list(_shape(input))} and num_groups="
                           f"{num_groups}")
    for name, a in (("weight", weight), ("bias", bias)):
        if a is not None and tuple(_shape(a)) != (_shape(input)[1],):
            raise RuntimeError(f"Expected {name} to be a vector of size equal to the number of "
                               f"channels in input, but got {name} of shape {list(_shape(a))} "
                               f"and input of shape {list(_shape(input))}")
    affine = tuple(a for a in (weight, bias) if a is not None)
    return _call("NativeGroupNormBackward0", _group_norm_fn, (input,) + affine,
                 groups=int(num_groups), eps=float(eps), has_w=weight is not None,
                 has_b=bias is not None)


def _instance_norm_fn(x, *args, eps, has_w, has_b):
    axes = tuple(range(2, fnp.ndim(x)))
    shape = (1, x.shape[1]) + (1,) * (fnp.ndim(x) - 2)
    mean = fnp.mean(x, axis=axes, keepdims=True)
    xc = x - mean
    var = fnp.mean(xc * xc, axis=axes, keepdims=True)
    y = _affine(xc * fnp.rsqrt(var + eps), args, has_w, has_b, shape)
    return y, fnp.reshape(mean, x.shape[:2]), fnp.reshape(var, x.shape[:2])


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats=True, momentum=0.1, eps=1e-5):
    """Normalize each (sample, channel) over its spatial positions (biased variance), then
    affine per channel. use_input_stats=False normalizes by the running statistics instead;
    with them given and use_input_stats, they are updated with the batch's average of the
    per-instance means and unbiased variances (torch's rule)."""
    shape = _shape(input)
    if len(shape) < 3:
        raise ValueError(f"expected 3D or more input (got {len(shape)}D input)")
    affine = tuple(a for a in (weight, bias) if a is not None)
    flags = dict(eps=float(eps), has_w=weight is not None, has_b=bias is not None)
    if not use_input_stats:
        if running_mean is None or running_var is None:
            raise RuntimeError("Expected running_mean and running_var to be defined when "
                               "use_input_stats is false")
        return _call("ViewBackward0", _bn_eval_fn, (input, running_mean, running_var) + affine,
                     **flags)
    n = math.prod(shape[2:])
    if n <= 1:
        raise ValueError(f"Expected more than 1 spatial element when training, got input size "
                         f"{_size(shape)}")
    y, mean, var = _call("ViewBackward0", _instance_norm_fn, (input,) + affine, **flags)
    if running_mean is not None:
        mean = (mean.detach() if isinstance(mean, Tensor) else mean).mean(0)
        var = (var.detach() if isinstance(var, Tensor) else var).mean(0)
        _update_running(running_mean, running_var, mean, var, n, momentum)
    return y
