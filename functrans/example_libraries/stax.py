"""functrans.example_libraries.stax (jax.example_libraries.stax): neural networks as
(init_fun, apply_fun) pairs. `init_fun(rng, input_shape) -> (output_shape, params)` makes
a layer's parameters for inputs of that shape; `apply_fun(params, inputs, **kwargs)` runs
it (`rng=` for Dropout, passed down by serial/parallel). Combinators (serial, parallel,
FanOut, FanInSum, FanInConcat, shape_dependent) build networks from layers.

Layers whose output shape needs arithmetic (convolutions, pooling) find it by tracing
their apply_fun on a ShapeDtypeStruct (ft.eval_shape), so the two always agree.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from .. import lax
from .. import numpy as fnp
from .. import random
from ..nn import functions as _nn
from ..nn.initializers import glorot_normal, normal, ones, zeros
from ..tracing import ShapeDtypeStruct, eval_shape

__all__ = ["AvgPool", "BatchNorm", "Conv", "Conv1DTranspose", "ConvTranspose", "Dense",
           "Dropout", "Elu", "Exp", "FanInConcat", "FanInSum", "FanOut", "Flatten",
           "GeneralConv", "GeneralConvTranspose", "Gelu", "Identity", "LeakyRelu",
           "LogSoftmax", "MaxPool", "Relu", "Selu", "Sigmoid", "Softmax", "Softplus",
           "SumPool", "Tanh", "elementwise", "parallel", "serial", "shape_dependent"]


def _out_shape(apply_fun, params, input_shape, **kwargs):
    """apply_fun's output shape on float32 inputs of input_shape (traced, not run)."""
    return tuple(eval_shape(lambda x: apply_fun(params, x, **kwargs),
                            ShapeDtypeStruct(tuple(input_shape), np.float32)).shape)


# ---------------------------------------------------------------------------
# layers

def Dense(out_dim, W_init=glorot_normal(), b_init=normal()):  # noqa: N802,N803
    """A fully connected layer: inputs @ W + b, W (in, out_dim), b (out_dim,)."""
    def init_fun(rng, input_shape):
        k1, k2 = random.split(rng)
        W, b = W_init(k1, (input_shape[-1], out_dim)), b_init(k2, (out_dim,))  # noqa: N806
        return tuple(input_shape[:-1]) + (out_dim,), (W, b)

    def apply_fun(params, inputs, **kwargs):
        W, b = params  # noqa: N806
        return fnp.dot(inputs, W) + b
    return init_fun, apply_fun


def elementwise(fun, **fun_kwargs):
    """A parameterless layer applying fun(inputs, **fun_kwargs)."""
    def init_fun(rng, input_shape):
        return input_shape, ()

    def apply_fun(params, inputs, **kwargs):
        return fun(inputs, **fun_kwargs)
    return init_fun, apply_fun


Tanh = elementwise(fnp.tanh)
Relu = elementwise(_nn.relu)
Exp = elementwise(fnp.exp)
LogSoftmax = elementwise(_nn.log_softmax, axis=-1)
Softmax = elementwise(_nn.softmax, axis=-1)
Softplus = elementwise(_nn.softplus)
Sigmoid = elementwise(_nn.sigmoid)
Elu = elementwise(_nn.elu)
LeakyRelu = elementwise(_nn.leaky_relu)
Gelu = elementwise(_nn.gelu)


def _selu(x):
    alpha, scale = 1.6732632423543772, 1.0507009873554805
    return scale * _nn.elu(x, alpha)


Selu = elementwise(_selu)


def GeneralConv(dimension_numbers, out_chan, filter_shape, strides=None,  # noqa: N802
                padding="VALID", W_init=None, b_init=normal(1e-6)):  # noqa: N803
    """A convolution layer (lax.conv_general_dilated) with layouts dimension_numbers =
    (lhs_spec, rhs_spec, out_spec), e.g. ('NHWC', 'HWIO', 'NHWC'), and a bias per output
    channel."""
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    one = (1,) * len(filter_shape)
    strides = strides or one
    W_init = W_init or glorot_normal(rhs_spec.index("I"), rhs_spec.index("O"))  # noqa: N806

    def apply_fun(params, inputs, **kwargs):
        W, b = params  # noqa: N806
        return lax.conv_general_dilated(inputs, W, strides, padding, one, one,
                                        dimension_numbers=dimension_numbers) + b

    def init_fun(rng, input_shape):
        spatial = iter(filter_shape)
        in_chan = input_shape[lhs_spec.index("C")]
        kernel_shape = tuple(out_chan if c == "O" else in_chan if c == "I" else next(spatial)
                             for c in rhs_spec)
        bias_shape = tuple(out_chan if c == "C" else 1 for c in out_spec)
        k1, k2 = random.split(rng)
        W, b = W_init(k1, kernel_shape), b_init(k2, bias_shape)  # noqa: N806
        return _out_shape(apply_fun, (W, b), input_shape), (W, b)
    return init_fun, apply_fun


Conv = functools.partial(GeneralConv, ("NHWC", "HWIO", "NHWC"))
Conv.__doc__ = "GeneralConv with NHWC inputs and outputs and an HWIO kernel."


def _transpose_pads(k, s, padding):
    """The (lo, hi) padding of the dilated input that makes a strided convolution's
    transpose: output size n·s ('SAME') or n·s + max(k - s, 0) ('VALID')."""
    if padding == "SAME":
        total = k + s - 2
        lo = k - 1 if s > k - 1 else math.ceil(total / 2)
    elif padding == "VALID":
        total = k + s - 2 + max(k - s, 0)
        lo = k - 1
    else:
        raise ValueError(f"ConvTranspose: padding must be 'SAME' or 'VALID', got {padding!r}")
    return lo, total - lo


def GeneralConvTranspose(dimension_numbers, out_chan, filter_shape, strides=None,  # noqa: N802
                         padding="VALID", W_init=None, b_init=normal(1e-6)):  # noqa: N803
    """The transposed convolution layer (the gradient of a strided convolution with respect
    to its input, as a layer): the input dilated by strides, then convolved."""
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    one = (1,) * len(filter_shape)
    strides = strides or one
    W_init = W_init or glorot_normal(rhs_spec.index("I"), rhs_spec.index("O"))  # noqa: N806
    pads = [_transpose_pads(k, s, padding) for k, s in zip(filter_shape, strides)]

    def apply_fun(params, inputs, **kwargs):
        W, b = params  # noqa: N806
        return lax.conv_general_dilated(inputs, W, one, pads, lhs_dilation=strides,
                                        rhs_dilation=one,
                                        dimension_numbers=dimension_numbers) + b

    def init_fun(rng, input_shape):
        spatial = iter(filter_shape)
        in_chan = input_shape[lhs_spec.index("C")]
        kernel_shape = tuple(out_chan if c == "O" else in_chan if c == "I" else next(spatial)
                             for c in rhs_spec)
        bias_shape = tuple(out_chan if c == "C" else 1 for c in out_spec)
        k1, k2 = random.split(rng)
        W, b = W_init(k1, kernel_shape), b_init(k2, bias_shape)  # noqa: N806
        return _out_shape(apply_fun, (W, b), input_shape), (W, b)
    return init_fun, apply_fun


Conv1DTranspose = functools.partial(GeneralConvTranspose, ("NHC", "HIO", "NHC"))
ConvTranspose = functools.partial(GeneralConvTranspose, ("NHWC", "HWIO", "NHWC"))


def BatchNorm(axis=(0, 1, 2), epsilon=1e-5, center=True, scale=True,  # noqa: N802
              beta_init=zeros, gamma_init=ones):
    """Batch normalization over `axis` with the batch's own statistics (stax keeps no
    running averages): (x - mean) / sqrt(var + epsilon) · gamma + beta, gamma and beta of
    the shape of the axes not normalized."""
    axis = (axis,) if np.isscalar(axis) else tuple(axis)

    def init_fun(rng, input_shape):
        nd = len(input_shape)
        axes = {a % nd for a in axis}
        shape = tuple(d for i, d in enumerate(input_shape) if i not in axes)
        k1, k2 = random.split(rng)
        beta = beta_init(k1, shape) if center else ()
        gamma = gamma_init(k2, shape) if scale else ()
        return input_shape, (beta, gamma)

    def apply_fun(params, x, **kwargs):
        beta, gamma = params
        nd = fnp.ndim(x)
        axes = tuple(sorted(a % nd for a in axis))
        mean = fnp.mean(x, axis=axes, keepdims=True)
        var = fnp.var(x, axis=axes, keepdims=True)
        z = (x - mean) / fnp.sqrt(var + epsilon)
        kept = [i for i in range(nd) if i not in axes]

        def shaped(p):
            return fnp.reshape(p, tuple(fnp.shape(x)[i] if i in kept else 1
                                        for i in range(nd)))
        if center and scale:
            return shaped(gamma) * z + shaped(beta)
        if center:
            return z + shaped(beta)
        if scale:
            return shaped(gamma) * z
        return z
    return init_fun, apply_fun


def _pool(reduce, init_value, window_shape, strides, padding, spec):
    """(x, n_windows...) -> the window reduction over x's spatial axes: x padded with
    init_value, then one strided slice per window offset, combined with reduce."""
    def pool(x):
        nd = fnp.ndim(x)
        if spec is None:
            sp_axes = list(range(1, 1 + len(window_shape)))
        else:
            sp_axes = [i for i, c in enumerate(spec) if c not in "NC"]
        if len(sp_axes) != len(window_shape) or nd < len(window_shape):
            raise ValueError(f"pooling: window {tuple(window_shape)} does not fit inputs of "
                             f"shape {tuple(fnp.shape(x))} (spec {spec!r})")
        st = strides or (1,) * len(window_shape)
        shape = fnp.shape(x)
        pads = lax.padtype_to_pads([shape[a] for a in sp_axes], window_shape, st, padding)
        width = [(0, 0)] * nd
        for a, p in zip(sp_axes, pads):
            width[a] = tuple(p)
        xp = fnp.pad(x, width, constant_values=init_value) if any(
            p != (0, 0) for p in pads) else x
        pshape = fnp.shape(xp)
        out_sp = [(pshape[a] - k) // s + 1 for a, k, s in zip(sp_axes, window_shape, st)]
        acc = None
        for offset in np.ndindex(*window_shape):
            start, limit, step = [0] * nd, list(pshape), [1] * nd
            for a, o, s, n in zip(sp_axes, offset, st, out_sp):
                start[a], limit[a], step[a] = o, o + (n - 1) * s + 1, s
            piece = lax.slice(xp, start, limit, step)
            acc = piece if acc is None else reduce(acc, piece)
        return acc, pads, sp_axes
    return pool


def _pooling_layer(reduce, init_value, normalize):
    def layer(window_shape, strides=None, padding="VALID", spec=None):
        window_shape = tuple(window_shape)
        pool = _pool(reduce, init_value, window_shape, strides, padding, spec)

        def apply_fun(params, inputs, **kwargs):
            out, pads, sp_axes = pool(inputs)
            if not normalize:
                return out
            if padding == "VALID" or all(p == (0, 0) for p in pads):
                return out / math.prod(window_shape)
            # 'SAME': each window's count of real (unpadded) entries
            shape = fnp.shape(inputs)
            ones_shape = tuple(shape[a] if a in sp_axes else 1 for a in range(len(shape)))
            counts = _pool(fnp.add, 0., window_shape, strides, padding, spec)(
                fnp.ones(ones_shape, inputs.dtype))[0]
            return out / counts

        def init_fun(rng, input_shape):
            return _out_shape(apply_fun, (), input_shape), ()
        return init_fun, apply_fun
    return layer


MaxPool = _pooling_layer(fnp.maximum, -np.inf, False)
SumPool = _pooling_layer(fnp.add, 0., False)
AvgPool = _pooling_layer(fnp.add, 0., True)
MaxPool.__doc__ = "Max pooling over window_shape (spatial axes after the batch axis)."
SumPool.__doc__ = "Sum pooling over window_shape."
AvgPool.__doc__ = ("Average pooling over window_shape ('SAME' padding: divided by the "
                   "number of real entries in each window).")


def _flatten_init(rng, input_shape):
    return (input_shape[0], math.prod(input_shape[1:])), ()


def _flatten_apply(params, inputs, **kwargs):
    return fnp.reshape(inputs, (fnp.shape(inputs)[0], -1))


Flatten = (_flatten_init, _flatten_apply)
Identity = (lambda rng, input_shape: (input_shape, ()),
            lambda params, inputs, **kwargs: inputs)


def FanOut(num):  # noqa: N802
    """num copies of the input (for parallel)."""
    def init_fun(rng, input_shape):
        return [input_shape] * num, ()

    def apply_fun(params, inputs, **kwargs):
        return [inputs] * num
    return init_fun, apply_fun


FanInSum = (lambda rng, input_shape: (input_shape[0], ()),
            lambda params, inputs, **kwargs: functools.reduce(fnp.add, inputs))


def FanInConcat(axis=-1):  # noqa: N802
    """The inputs (a list) concatenated along axis."""
    def init_fun(rng, input_shape):
        ax = axis % len(input_shape[0])
        size = sum(s[ax] for s in input_shape)
        return tuple(input_shape[0][:ax]) + (size,) + tuple(input_shape[0][ax + 1:]), ()

    def apply_fun(params, inputs, **kwargs):
        return fnp.concatenate(inputs, axis)
    return init_fun, apply_fun


def Dropout(rate, mode="train"):  # noqa: N802
    """Dropout; `rate` is the probability of KEEPING an entry (stax's convention): in
    mode "train", entries are kept with probability rate and scaled by 1/rate, the rest
    zeroed; apply_fun needs rng=. Any other mode passes inputs through."""
    def init_fun(rng, input_shape):
        return input_shape, ()

    def apply_fun(params, inputs, **kwargs):
        rng = kwargs.get("rng", None)
        if rng is None:
            raise ValueError("Dropout layer requires apply_fun to be called with a PRNG key "
                             "argument. That is, instead of `apply_fun(params, inputs)`, call "
                             "it like `apply_fun(params, inputs, rng)` where `rng` is a "
                             "PRNG key (e.g. from `functrans.random.PRNGKey`).")
        if mode != "train":
            return inputs
        keep = random.bernoulli(rng, rate, fnp.shape(inputs))
        return fnp.where(keep, inputs / rate, 0)
    return init_fun, apply_fun


# ---------------------------------------------------------------------------
# combinators

def serial(*layers):
    """The layers one after another; rng= is split among them."""
    init_funs, apply_funs = zip(*layers) if layers else ((), ())

    def init_fun(rng, input_shape):
        params = []
        for init in init_funs:
            rng, layer_rng = random.split(rng)
            input_shape, param = init(layer_rng, input_shape)
            params.append(param)
        return input_shape, params

    def apply_fun(params, inputs, **kwargs):
        rng = kwargs.pop("rng", None)
        rngs = random.split(rng, len(layers)) if rng is not None else (None,) * len(layers)
        for fun, param, r in zip(apply_funs, params, rngs):
            inputs = fun(param, inputs, rng=r, **kwargs)
        return inputs
    return init_fun, apply_fun


def parallel(*layers):
    """The layers side by side: input i goes to layer i (use FanOut to copy one input)."""
    init_funs, apply_funs = zip(*layers) if layers else ((), ())

    def init_fun(rng, input_shape):
        rngs = random.split(rng, len(init_funs))
        out = [init(r, shape) for init, r, shape in zip(init_funs, rngs, input_shape)]
        return [o[0] for o in out], [o[1] for o in out]

    def apply_fun(params, inputs, **kwargs):
        rng = kwargs.pop("rng", None)
        rngs = random.split(rng, len(layers)) if rng is not None else (None,) * len(layers)
        return [f(p, x, rng=r, **kwargs) for f, p, x, r in zip(apply_funs, params, inputs, rngs)]
    return init_fun, apply_fun


def shape_dependent(make_layer):
    """A layer built from the input shape: make_layer(input_shape) -> (init_fun,
    apply_fun), called at init and at each apply (with the inputs' shape)."""
    def init_fun(rng, input_shape):
        return make_layer(input_shape)[0](rng, input_shape)

    def apply_fun(params, inputs, **kwargs):
        return make_layer(fnp.shape(inputs))[1](params, inputs, **kwargs)
    return init_fun, apply_fun
