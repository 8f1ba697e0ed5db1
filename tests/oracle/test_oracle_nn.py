"""The oracle table of `functrans.nn` and `functrans.optim` against PyTorch.

Three parts, each case run through `oracle.case` under an id declared at import time:

* `functional:<name>[:<variant>]`: every `functrans.nn.functional` function that
  `torch.nn.functional` has under the same name, through `oracle.facade` (values, dtypes,
  grad_fn names, the inputs' gradients), with its keyword arguments, inputs on its kinks
  (relu at +-0, hardtanh at its bounds, ties in max_pool2d windows, NaN and infinities),
  float32 and float64, and the errors of wrong shapes and dtypes (type and message
  pattern); the `:hypothesis` variants draw small arrays with hypothesis.
* `module:<Class>[:<variant>]`: every `functrans.nn` module class that `torch.nn` has,
  trained a few steps with `oracle.train` from the torch model's weights (the loss, every
  parameter's `.grad` and the parameters after each step); modules with buffers also
  compare the state_dict after the steps; containers, Parameter and Buffer by behaviour,
  with the reprs and the Module API. A crash while training is a difference like any other.
* `optim:<name>[:<variant>]`: every optimizer of `functrans.optim` that `torch.optim` has,
  several steps on a small model, then the optimizer's state; `clip_grad_norm_` and
  `clip_grad_value_`; the lr schedulers common to both over a few epochs.

What still differs is a row of docs/oracle.md, under `functional:` and `module:`.
"""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import oracle
from oracle import Mismatch, compare, facade, ft, torch
from functrans.facade import engine

TF = torch.nn.functional
FF = ft.nn.functional

CASES = {}      # case id -> thunk


def add(case_id, thunk):
    assert case_id not in CASES, case_id
    CASES[case_id] = thunk


def F(lib):
    return lib.nn.functional


def rng(seed=0):
    return np.random.default_rng(seed)


def randn(*shape, dtype=np.float64, seed=0):
    return rng(seed).standard_normal(shape).astype(dtype)


DTYPES = {"f64": np.float64, "f32": np.float32}


def both(name, fn, make, **kw):
    """functional:<name>:f64 and :f32 cases of facade(fn, *make(dtype))."""
    for tag, dt in DTYPES.items():
        add(f"functional:{name}:{tag}", lambda dt=dt: facade(fn, *make(dt), **kw))


def one(name, fn, *inputs, **kw):
    add(f"functional:{name}", lambda: facade(fn, *inputs, **kw))


def kinks(dt, extra=()):
    """Values on the usual kinks: signed zeros, +-1, and a few ordinary ones."""
    return np.array([-2.0, -1.0, -0.5, -0.0, 0.0, 0.5, 1.0, 2.0, 3.5, *extra], dt)


def with_inf(dt):
    return np.array([-np.inf, -30.0, -1.0, -0.0, 0.0, 1.0, 30.0, np.inf], dt)


# ---------------------------------------------------------------------------------------
# functional: activations

both("relu", lambda L, x: F(L).relu(x), lambda dt: (kinks(dt),))
one("relu:inf", lambda L, x: F(L).relu(x), with_inf(np.float64))
both("relu:inplace", lambda L, x: F(L).relu(x * 1, inplace=True), lambda dt: (kinks(dt),))
both("relu_", lambda L, x: F(L).relu_(x * 1), lambda dt: (kinks(dt),))
one("relu_:leaf", lambda L, x: F(L).relu_(x), kinks(np.float64),
    error="a leaf Variable that requires grad")
both("relu6", lambda L, x: F(L).relu6(x), lambda dt: (kinks(dt, (6.0, 7.0, 5.5)),))
one("relu6:inplace", lambda L, x: F(L).relu6(x * 1, inplace=True),
    kinks(np.float64, (6.0, 7.0)))
both("leaky_relu", lambda L, x: F(L).leaky_relu(x), lambda dt: (kinks(dt),))
one("leaky_relu:slope", lambda L, x: F(L).leaky_relu(x, negative_slope=0.2),
    kinks(np.float64))
one("leaky_relu:inplace", lambda L, x: F(L).leaky_relu(x * 1, 0.3, inplace=True),
    kinks(np.float64))
both("elu", lambda L, x: F(L).elu(x), lambda dt: (kinks(dt),))
one("elu:alpha", lambda L, x: F(L).elu(x, alpha=0.5), kinks(np.float64))
one("elu:inplace", lambda L, x: F(L).elu(x * 1, alpha=2.0, inplace=True), kinks(np.float64))
both("gelu", lambda L, x: F(L).gelu(x), lambda dt: (kinks(dt, (-6.0, 6.0)),))
both("gelu:tanh", lambda L, x: F(L).gelu(x, approximate="tanh"),
     lambda dt: (kinks(dt, (-6.0, 6.0)),))
one("gelu:bad_approximate", lambda L, x: F(L).gelu(x, approximate="erf"), kinks(np.float64),
    error="approximate")
both("silu", lambda L, x: F(L).silu(x), lambda dt: (kinks(dt, (-40.0, 40.0)),))
one("silu:inplace", lambda L, x: F(L).silu(x * 1, inplace=True), kinks(np.float64))
both("mish", lambda L, x: F(L).mish(x), lambda dt: (kinks(dt, (-30.0, 30.0)),))
both("sigmoid", lambda L, x: F(L).sigmoid(x), lambda dt: (kinks(dt, (-50.0, 50.0)),))
one("sigmoid:inf", lambda L, x: F(L).sigmoid(x), with_inf(np.float64))
both("tanh", lambda L, x: F(L).tanh(x), lambda dt: (kinks(dt, (-30.0, 30.0)),))
both("logsigmoid", lambda L, x: F(L).logsigmoid(x), lambda dt: (kinks(dt, (-50.0, 50.0)),))
both("softplus", lambda L, x: F(L).softplus(x), lambda dt: (kinks(dt, (-30.0, 25.0)),))
# issue 32: both tails, where sigmoid underflows (log(sigmoid(-20)) was -inf, its gradient NaN)
for _name in ("logsigmoid", "softplus", "silu", "mish", "sigmoid"):
    both(f"{_name}:tails", lambda L, x, n=_name: getattr(F(L), n)(x),
         lambda dt: (np.array([-1e4, -745.0, -200.0, -80.0, -20.0, -1.0, 17.0, 20.0, 40.0,
                               1e4], dt),))
one("softplus:beta_threshold", lambda L, x: F(L).softplus(x, beta=2.0, threshold=1.0),
    kinks(np.float64, (0.25,)))       # 0.5 * 2 == threshold: the switch point itself
both("hardtanh", lambda L, x: F(L).hardtanh(x), lambda dt: (kinks(dt, (-1.0, 1.0)),))
one("hardtanh:bounds", lambda L, x: F(L).hardtanh(x, min_val=-0.5, max_val=0.5),
    kinks(np.float64))
one("hardtanh:inplace", lambda L, x: F(L).hardtanh(x * 1, -0.5, 2.0, inplace=True),
    kinks(np.float64))
both("threshold", lambda L, x: F(L).threshold(x, 0.5, -3.0), lambda dt: (kinks(dt),))
one("threshold:inplace", lambda L, x: F(L).threshold(x * 1, 0.0, 0.0, True), kinks(np.float64))
one("threshold_", lambda L, x: F(L).threshold_(x * 1, -0.5, 7.0), kinks(np.float64))


# NaN and the infinities through every elementwise activation (value and derivative)
_NAN_INF = np.array([np.nan, -np.inf, np.inf, -0.0, 0.0, 1.0, -1.0])
_ELEMENTWISE = {
    "relu": lambda L, x: F(L).relu(x), "relu6": lambda L, x: F(L).relu6(x),
    "leaky_relu": lambda L, x: F(L).leaky_relu(x, 0.1), "elu": lambda L, x: F(L).elu(x),
    "gelu": lambda L, x: F(L).gelu(x), "gelu:tanh": lambda L, x: F(L).gelu(x, approximate="tanh"),
    "silu": lambda L, x: F(L).silu(x), "mish": lambda L, x: F(L).mish(x),
    "sigmoid": lambda L, x: F(L).sigmoid(x), "tanh": lambda L, x: F(L).tanh(x),
    "softplus": lambda L, x: F(L).softplus(x), "logsigmoid": lambda L, x: F(L).logsigmoid(x),
    "hardtanh": lambda L, x: F(L).hardtanh(x),
}
for _name, _fn in _ELEMENTWISE.items():
    one(f"{_name}:nan_inf", _fn, _NAN_INF)
one("gelu:positional_approximate", lambda L, x: F(L).gelu(x, "tanh"), kinks(np.float64),
    error="takes 1 positional argument but 2 were given")
one("hardtanh:min_above_max", lambda L, x: F(L).hardtanh(x, 1.0, -1.0), kinks(np.float64),
    error="min_val cannot be greater than max_val")
one("softplus:negative_beta", lambda L, x: F(L).softplus(x, beta=-1.0), kinks(np.float64))
one("elu:negative_alpha", lambda L, x: F(L).elu(x, alpha=-0.5), kinks(np.float64))
one("leaky_relu:negative_slope", lambda L, x: F(L).leaky_relu(x, -0.5), kinks(np.float64))


# integer inputs: torch has no integer kernel for these (NotImplementedError); relu has one
one("relu:int64", lambda L, x: F(L).relu(x), np.array([3, -2, 0]))
one("softmax:int64", lambda L, x: F(L).softmax(x, dim=0), np.array([3, -2, 0]), error="Long")
one("gelu:int64", lambda L, x: F(L).gelu(x), np.array([3, -2, 0]), error="Long")
one("mse_loss:int64", lambda L, x: F(L).mse_loss(x, x * 2), np.array([3, -2, 0]), error="Long")


def _softmax_input(dt):
    x = randn(3, 4, dtype=dt)
    x[0, :2] = x[0, 2]                         # ties
    x[1, 1] = -np.inf                          # a masked entry
    return (x,)


for _fn in ("softmax", "log_softmax", "softmin"):
    both(f"{_fn}:dim1", lambda L, x, f=_fn: getattr(F(L), f)(x, dim=1), _softmax_input)
    one(f"{_fn}:dim0", lambda L, x, f=_fn: getattr(F(L), f)(x, 0), _softmax_input(np.float64)[0])
    one(f"{_fn}:dim-1:3d", lambda L, x, f=_fn: getattr(F(L), f)(x, dim=-1),
        randn(2, 3, 4))
    one(f"{_fn}:dtype", lambda L, x, f=_fn: getattr(F(L), f)(x, dim=1, dtype=L.float64),
        randn(3, 4, dtype=np.float32))
    one(f"{_fn}:implicit_dim", lambda L, x, f=_fn: getattr(F(L), f)(x), randn(2, 3, 4))
    one(f"{_fn}:scalar", lambda L, x, f=_fn: getattr(F(L), f)(x, dim=0), np.array(1.5))

# dropout: the random streams differ on purpose; p=0, p=1 and eval mode are deterministic
both("dropout:p0", lambda L, x: F(L).dropout(x, p=0.0), lambda dt: (randn(3, 4, dtype=dt),))
one("dropout:eval", lambda L, x: F(L).dropout(x, p=0.5, training=False), randn(3, 4))
one("dropout:p1", lambda L, x: F(L).dropout(x, p=1.0), randn(3, 4))
one("dropout:bad_p", lambda L, x: F(L).dropout(x, p=1.5), randn(3, 4),
    error="dropout probability has to be between 0 and 1, but got 1.5")


# hypothesis-driven: small float64 arrays mixing ordinary values with the awkward ones
_AWKWARD = st.sampled_from([0.0, -0.0, 1.0, -1.0, 6.0, 20.0, -20.0, 1e-300, -1e-300, 700.0,
                            -700.0, np.inf, -np.inf])
_VALUES = st.one_of(st.floats(-30, 30, width=64), _AWKWARD)


def _arrays(shape=hnp.array_shapes(min_dims=1, max_dims=2, min_side=1, max_side=4)):
    return hnp.arrays(np.float64, shape, elements=_VALUES)


def hypothesis_case(fn, strategy):
    """facade(fn, inputs) for the inputs hypothesis draws (at most 8 examples a case, fewer
    when the profile asks for fewer: the table has two dozen of them)."""
    @settings(deadline=None, suppress_health_check=list(HealthCheck),
              max_examples=min(8, settings.default.max_examples))
    @given(strategy)
    def run(inputs):
        facade(fn, *(inputs if isinstance(inputs, tuple) else (inputs,)))
    return run


_HYPOTHESIS = dict(_ELEMENTWISE, **{
    "softmax": lambda L, x: F(L).softmax(x, dim=-1),
    "log_softmax": lambda L, x: F(L).log_softmax(x, dim=-1),
    "softmin": lambda L, x: F(L).softmin(x, dim=0),
    "relu6": lambda L, x: F(L).relu6(x), "elu:alpha": lambda L, x: F(L).elu(x, 0.3),
    "softplus:beta": lambda L, x: F(L).softplus(x, beta=3.0, threshold=5.0),
    "hardtanh:bounds": lambda L, x: F(L).hardtanh(x, -6.0, 1.0),
})
for _name, _fn in _HYPOTHESIS.items():
    _fname, _, _variant = _name.partition(":")
    add(f"functional:{_fname}:hypothesis" + (f":{_variant}" if _variant else ""),
        lambda f=_fn: hypothesis_case(f, _arrays())())


@st.composite
def _pairs(draw):
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=2, min_side=1, max_side=4))
    finite = st.floats(-30, 30, width=64)
    return (draw(hnp.arrays(np.float64, shape, elements=finite)),
            draw(hnp.arrays(np.float64, shape, elements=finite)))


for _fn in ("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
            "binary_cross_entropy_with_logits"):
    add(f"functional:{_fn}:hypothesis", lambda f=_fn: hypothesis_case(
        lambda L, x, t: getattr(F(L), f)(x, t), _pairs())())


@st.composite
def _logits_targets(draw):
    n, c = draw(st.integers(1, 4)), draw(st.integers(1, 5))
    x = draw(hnp.arrays(np.float64, (n, c), elements=st.one_of(
        st.floats(-30, 30, width=64), st.sampled_from([0.0, 700.0, -700.0]))))
    t = draw(hnp.arrays(np.int64, (n,), elements=st.integers(0, c - 1)))
    return x, t


add("functional:cross_entropy:hypothesis", lambda: hypothesis_case(
    lambda L, x, t: F(L).cross_entropy(x, t, label_smoothing=0.1), _logits_targets())())


# ---------------------------------------------------------------------------------------
# functional: linear, bilinear, embedding, one_hot

both("linear", lambda L, x, w, b: F(L).linear(x, w, b),
     lambda dt: (randn(3, 4, dtype=dt), randn(5, 4, dtype=dt, seed=1), randn(5, dtype=dt, seed=2)))
one("linear:no_bias", lambda L, x, w: F(L).linear(x, w), randn(2, 3, 4), randn(5, 4, seed=1))
one("linear:1d", lambda L, x, w, b: F(L).linear(x, w, b), randn(4), randn(5, 4, seed=1),
    randn(5, seed=2))
one("linear:bad_shape", lambda L, x, w: F(L).linear(x, w), randn(3, 4), randn(5, 3, seed=1),
    error=r"cannot be multiplied \(3x4 and 3x5\)")
one("linear:dtypes", lambda L, x, w: F(L).linear(x, w), randn(3, 4, dtype=np.float32),
    randn(5, 4, seed=1), error="expected m1 and m2 to have the same dtype, but got: float != "
                               "double")
one("linear:dtypes_bias", lambda L, x, w, b: F(L).linear(x, w, b), randn(3, 4, dtype=np.float32),
    randn(5, 4, seed=1), randn(5), error="mat1 and mat2 must have the same dtype, but got Float "
                                         "and Double")
one("linear:bias_dtype", lambda L, x, w, b: F(L).linear(x, w, b), randn(3, 4), randn(5, 4, seed=1),
    randn(5, dtype=np.float32), error="self and mat2 must have the same dtype, but got Float and "
                                      "Double")
one("linear:not_tensor", lambda L, w: F(L).linear([1.0, 2.0], w), randn(5, 2),
    error="argument 'input' .* must be Tensor, not list")
both("bilinear", lambda L, a, b, w, bias: F(L).bilinear(a, b, w, bias),
     lambda dt: (randn(3, 2, dtype=dt), randn(3, 4, dtype=dt, seed=1),
                 randn(5, 2, 4, dtype=dt, seed=2), randn(5, dtype=dt, seed=3)))
one("bilinear:no_bias", lambda L, a, b, w: F(L).bilinear(a, b, w), randn(3, 2),
    randn(3, 4, seed=1), randn(5, 2, 4, seed=2))

_IDX = np.array([[0, 2, 4], [4, 4, 1]], np.int64)      # repeated rows: accumulated gradients
both("embedding", lambda L, i, w: F(L).embedding(i, w),
     lambda dt: (_IDX, randn(5, 3, dtype=dt)))
one("embedding:padding_idx", lambda L, i, w: F(L).embedding(i, w, padding_idx=4), _IDX,
    randn(5, 3))
one("embedding:negative_padding_idx", lambda L, i, w: F(L).embedding(i, w, padding_idx=-1),
    _IDX, randn(5, 3))
one("embedding:scale_grad_by_freq",
    lambda L, i, w: F(L).embedding(i, w, scale_grad_by_freq=True, padding_idx=1), _IDX, randn(5, 3))
one("embedding:max_norm", lambda L, i, w: (lambda c: (F(L).embedding(i, c, max_norm=1.5), c))(
    w.detach().clone()), _IDX, randn(5, 3) * 2, backward=False)
one("embedding:max_norm_l1", lambda L, i, w: (lambda c: (
    F(L).embedding(i, c, max_norm=1.0, norm_type=1.0), c))(w.detach().clone()), _IDX,
    randn(5, 3), backward=False)
one("embedding:out_of_range", lambda L, i, w: F(L).embedding(i, w), _IDX + 1, randn(5, 3),
    error="index out of range in self")
one("embedding:float_indices", lambda L, i, w: F(L).embedding(i, w), _IDX.astype(np.float64),
    randn(5, 3), requires_grad=False, error="Expected tensor for argument #1 'indices'")
one("one_hot", lambda L, i: F(L).one_hot(i), _IDX)
one("one_hot:num_classes", lambda L, i: F(L).one_hot(i, num_classes=7), _IDX)
one("one_hot:too_few_classes", lambda L, i: F(L).one_hot(i, 3), _IDX,
    error="Class values must be smaller than num_classes")


# ---------------------------------------------------------------------------------------
# functional: normalization


def _bn(training, momentum=0.1, affine=True, stats=True, shape=(4, 3, 2)):
    def fn(L, x, w, b):
        dt = x.dtype
        rm = L.zeros(shape[1], dtype=dt) + 0.5 if stats else None
        rv = L.ones(shape[1], dtype=dt) * 2.0 if stats else None
        out = F(L).batch_norm(x, rm, rv, w if affine else None, b if affine else None,
                              training=training, momentum=momentum, eps=1e-3)
        return (out, rm, rv) if stats else out
    return fn


def _bn_inputs(dt, shape=(4, 3, 2)):
    x = randn(*shape, dtype=dt)
    return x, randn(shape[1], dtype=dt, seed=1), randn(shape[1], dtype=dt, seed=2)


both("batch_norm:train", _bn(True), _bn_inputs)
both("batch_norm:eval", _bn(False), _bn_inputs)
one("batch_norm:2d_input", _bn(True, shape=(5, 3)), *_bn_inputs(np.float64, (5, 3)))
one("batch_norm:4d_input", _bn(True, shape=(2, 3, 2, 2)), *_bn_inputs(np.float64, (2, 3, 2, 2)))
one("batch_norm:momentum_none", _bn(True, momentum=None), *_bn_inputs(np.float64))
one("batch_norm:no_affine", _bn(True, affine=False), *_bn_inputs(np.float64))
one("batch_norm:no_stats", _bn(True, stats=False), *_bn_inputs(np.float64))
one("batch_norm:one_value_per_channel", _bn(True, shape=(1, 3)), *_bn_inputs(np.float64, (1, 3)),
    error="Expected more than 1 value per channel when training")
both("layer_norm", lambda L, x, w, b: F(L).layer_norm(x, (4,), w, b),
     lambda dt: (randn(2, 3, 4, dtype=dt), randn(4, dtype=dt, seed=1), randn(4, dtype=dt, seed=2)))
one("layer_norm:two_dims", lambda L, x, w: F(L).layer_norm(x, [3, 4], w, eps=1e-3),
    randn(2, 3, 4), randn(3, 4, seed=1))
one("layer_norm:no_affine", lambda L, x: F(L).layer_norm(x, (4,)), randn(2, 3, 4))
one("layer_norm:constant_row", lambda L, x: F(L).layer_norm(x, (4,)), np.ones((2, 4)))
one("layer_norm:int_shape", lambda L, x: F(L).layer_norm(x, 4), randn(2, 4),
    error="argument 'normalized_shape' .position 2. must be tuple of ints, not int")
one("layer_norm:weight_shape", lambda L, x, w: F(L).layer_norm(x, [4], w), randn(2, 4),
    randn(3), error=r"Expected weight to be of same shape as normalized_shape, but got weight of "
                    r"shape \[3\] and normalized_shape = \[4\]")
one("layer_norm:bad_shape", lambda L, x: F(L).layer_norm(x, (3,)), randn(2, 3, 4),
    error="normalized_shape")
both("group_norm", lambda L, x, w, b: F(L).group_norm(x, 2, w, b),
     lambda dt: (randn(2, 4, 3, dtype=dt), randn(4, dtype=dt, seed=1), randn(4, dtype=dt, seed=2)))
one("group_norm:no_affine:4d", lambda L, x: F(L).group_norm(x, 1, eps=1e-2), randn(2, 4, 2, 2))
one("group_norm:indivisible", lambda L, x: F(L).group_norm(x, 3), randn(2, 4, 3),
    error=r"Expected number of channels in input to be divisible by num_groups, but got input "
          r"of shape \[2, 4, 3\] and num_groups=3")
one("group_norm:weight_shape", lambda L, x, w: F(L).group_norm(x, 2, w), randn(2, 4, 3),
    randn(3), error=r"Expected weight to be a vector of size equal to the number of channels in "
                    r"input, but got weight of shape \[3\] and input of shape \[2, 4, 3\]")
for _i, _stat in enumerate(("running_mean", "running_var", "weight", "bias")):
    one(f"batch_norm:{_stat}_size", lambda L, x, i=_i: F(L).batch_norm(
        x, *[L.zeros(4 if j != i else 3, dtype=x.dtype) + 1 for j in range(4)]),
        randn(2, 4), error=f"{_stat} should contain 4 elements not 3")
both("normalize", lambda L, x: F(L).normalize(x),
     lambda dt: (np.vstack([randn(2, 4, dtype=dt), np.zeros((1, 4), dt)]).T.copy(),))
one("normalize:p1_dim0", lambda L, x: F(L).normalize(x, p=1.0, dim=0), randn(3, 4))
one("normalize:zero_row", lambda L, x: F(L).normalize(x, dim=-1), np.vstack(
    [randn(2, 4), np.zeros((1, 4))]))
both("cosine_similarity", lambda L, a, b: F(L).cosine_similarity(a, b),
     lambda dt: (randn(3, 4, dtype=dt), randn(3, 4, dtype=dt, seed=1)))
one("cosine_similarity:dim0_broadcast", lambda L, a, b: F(L).cosine_similarity(a, b, dim=0),
    randn(3, 4), randn(3, 1, seed=1))
one("cosine_similarity:zero", lambda L, a, b: F(L).cosine_similarity(a, b, dim=1),
    np.vstack([randn(2, 4), np.zeros((1, 4))]), randn(3, 4, seed=1))
one("cosine_similarity:both_zero", lambda L, a, b: F(L).cosine_similarity(a, b, dim=0),
    np.zeros(4), np.zeros(4))
one("cosine_similarity:tiny", lambda L, a, b: F(L).cosine_similarity(a, b, dim=0),
    np.array([1e-9, 0.0, 0.0]), np.array([0.0, 1e-9, 0.0]))


# ---------------------------------------------------------------------------------------
# functional: convolution, pooling, pad

both("conv2d", lambda L, x, w, b: F(L).conv2d(x, w, b),
     lambda dt: (randn(2, 3, 5, 5, dtype=dt), randn(4, 3, 3, 3, dtype=dt, seed=1),
                 randn(4, dtype=dt, seed=2)))
one("conv2d:stride_padding_dilation",
    lambda L, x, w: F(L).conv2d(x, w, stride=(2, 1), padding=(1, 2), dilation=(1, 2)),
    randn(2, 3, 6, 7), randn(4, 3, 3, 2, seed=1))
one("conv2d:groups", lambda L, x, w, b: F(L).conv2d(x, w, b, groups=2, padding=1),
    randn(1, 4, 4, 4), randn(6, 2, 3, 3, seed=1), randn(6, seed=2))
one("conv2d:same", lambda L, x, w: F(L).conv2d(x, w, padding="same", dilation=2),
    randn(1, 2, 6, 5), randn(3, 2, 2, 3, seed=1))
one("conv2d:valid", lambda L, x, w: F(L).conv2d(x, w, padding="valid"), randn(1, 2, 4, 4),
    randn(3, 2, 3, 3, seed=1))
one("conv2d:unbatched", lambda L, x, w: F(L).conv2d(x, w, padding=1), randn(2, 4, 4),
    randn(3, 2, 3, 3, seed=1))
one("conv2d:1x1", lambda L, x, w: F(L).conv2d(x, w), randn(2, 3, 4, 4), randn(5, 3, 1, 1, seed=1))
one("conv2d:wrong_channels", lambda L, x, w: F(L).conv2d(x, w), randn(1, 2, 5, 5),
    randn(4, 3, 3, 3, seed=1), error=r"expected input\[1, 2, 5, 5\] to have 3 channels, but got "
                                     "2 channels instead")
one("conv2d:wrong_ndim", lambda L, x, w: F(L).conv2d(x, w), randn(5, 5), randn(4, 3, 3, 3),
    error="Expected 3D .unbatched. or 4D .batched. input to conv2d")
one("conv2d:kernel_too_big", lambda L, x, w: F(L).conv2d(x, w), randn(1, 3, 2, 2),
    randn(4, 3, 3, 3, seed=1), error="Kernel size can't be greater than actual input size")
one("conv2d:same_strided", lambda L, x, w: F(L).conv2d(x, w, stride=2, padding="same"),
    randn(1, 3, 5, 5), randn(4, 3, 3, 3, seed=1),
    error="padding='same' is not supported for strided convolutions")
both("conv1d", lambda L, x, w, b: F(L).conv1d(x, w, b),
     lambda dt: (randn(2, 3, 7, dtype=dt), randn(4, 3, 3, dtype=dt, seed=1),
                 randn(4, dtype=dt, seed=2)))
one("conv1d:stride_padding_dilation_groups",
    lambda L, x, w: F(L).conv1d(x, w, stride=2, padding=2, dilation=2, groups=3),
    randn(2, 3, 9), randn(6, 1, 3, seed=1))
one("conv1d:same", lambda L, x, w: F(L).conv1d(x, w, padding="same"), randn(2, 3, 8),
    randn(4, 3, 4, seed=1))
one("conv1d:unbatched", lambda L, x, w: F(L).conv1d(x, w, padding=(1,)), randn(3, 6),
    randn(4, 3, 3, seed=1))
both("conv3d", lambda L, x, w, b: F(L).conv3d(x, w, b, stride=(1, 2, 1), padding=1, groups=2),
     lambda dt: (randn(2, 4, 5, 6, 4, dtype=dt), randn(6, 2, 3, 2, 2, dtype=dt, seed=1),
                 randn(6, dtype=dt, seed=2)))
one("conv3d:unbatched_same_dilation", lambda L, x, w: F(L).conv3d(x, w, padding="same",
                                                                   dilation=(1, 2, 1)),
    randn(2, 4, 5, 3), randn(3, 2, 2, 2, 3, seed=1))
one("conv3d:wrong_channels", lambda L, x, w: F(L).conv3d(x, w), randn(1, 2, 3, 3, 3),
    randn(4, 3, 2, 2, 2, seed=1), error=r"expected input\[1, 2, 3, 3, 3\] to have 3 channels")
one("conv3d:kernel_too_big", lambda L, x, w: F(L).conv3d(x, w), randn(1, 2, 2, 2, 2),
    randn(4, 2, 3, 3, 3, seed=1), error=r"padded input size per channel: \(2 x 2 x 2\)")
one("conv3d:wrong_ndim", lambda L, x, w: F(L).conv3d(x, w), randn(2, 3, 3),
    randn(4, 2, 2, 2, 2, seed=1), error=r"Expected 4D .unbatched. or 5D .batched. input")
# grad-of-grad (a gradient penalty, as WGAN-GP's critic): the convolution's transpose rules
# are convolutions, differentiated again
one("conv2d:grad_of_grad", lambda L, x, w: (L.autograd.grad(
    (F(L).conv2d(x, w, stride=2, padding=1, groups=2) ** 2).sum(), x, create_graph=True)[0]
    ** 2).sum(), randn(2, 4, 6, 5), randn(6, 2, 3, 3, seed=1))
one("conv1d:grad_of_grad", lambda L, x, w: (L.autograd.grad(
    F(L).conv1d(x, w, dilation=2).tanh().sum(), w, create_graph=True)[0] ** 2).sum(),
    randn(2, 3, 9), randn(4, 3, 3, seed=1))
one("conv1d:wrong_ndim", lambda L, x, w: F(L).conv1d(x, w), randn(1, 2, 3, 6),
    randn(4, 3, 3, seed=1), error="Expected 2D .unbatched. or 3D .batched. input to conv1d")


def _pool_input(dt):
    """(2, 2, 5, 6) with ties inside windows (a plateau, and repeated maxima)."""
    x = randn(2, 2, 5, 6, dtype=dt)
    x[0, 0, :2, :2] = 1.25                     # a whole 2x2 window tied
    x[0, 1, 1, :] = x[0, 1, 0, 0]              # ties across windows
    x[1, 0] = np.round(x[1, 0])                # many ties
    return (x,)


both("max_pool2d", lambda L, x: F(L).max_pool2d(x, 2), _pool_input)
one("max_pool2d:stride_padding", lambda L, x: F(L).max_pool2d(x, 3, stride=2, padding=1),
    *_pool_input(np.float64))
one("max_pool2d:dilation", lambda L, x: F(L).max_pool2d(x, (2, 2), stride=1, dilation=2),
    *_pool_input(np.float64))
one("max_pool2d:ceil_mode", lambda L, x: F(L).max_pool2d(x, 2, ceil_mode=True),
    *_pool_input(np.float64))
one("max_pool2d:return_indices", lambda L, x: F(L).max_pool2d(x, 2, 1, 1, return_indices=True),
    *_pool_input(np.float64))
one("max_pool2d:unbatched", lambda L, x: F(L).max_pool2d(x[0], (2, 3)), *_pool_input(np.float64))
one("max_pool2d:inf", lambda L, x: F(L).max_pool2d(x, 2), np.array(
    [[[[-np.inf, -np.inf, 1.0, np.inf], [-np.inf, -np.inf, np.inf, 2.0]]]]))
one("max_pool2d:bad_padding", lambda L, x: F(L).max_pool2d(x, 2, padding=2),
    *_pool_input(np.float64), error="pad should be at most half of effective kernel size")
one("max_pool2d:too_small", lambda L, x: F(L).max_pool2d(x, 7), *_pool_input(np.float64),
    error="Output size is too small")
both("avg_pool2d", lambda L, x: F(L).avg_pool2d(x, 2), _pool_input)
one("avg_pool2d:padding", lambda L, x: F(L).avg_pool2d(x, 3, stride=2, padding=1),
    *_pool_input(np.float64))
one("avg_pool2d:no_pad_count", lambda L, x: F(L).avg_pool2d(x, 3, 2, 1, count_include_pad=False),
    *_pool_input(np.float64))
one("avg_pool2d:ceil_mode", lambda L, x: F(L).avg_pool2d(x, 2, ceil_mode=True, padding=1),
    *_pool_input(np.float64))
one("avg_pool2d:divisor_override", lambda L, x: F(L).avg_pool2d(x, 2, divisor_override=3),
    *_pool_input(np.float64))
one("avg_pool2d:unbatched", lambda L, x: F(L).avg_pool2d(x[1], (2, 3), stride=(1, 2)),
    *_pool_input(np.float64))
one("avg_pool2d:bad_padding", lambda L, x: F(L).avg_pool2d(x, 2, padding=2),
    *_pool_input(np.float64), error="pad should be at most half of effective kernel size, but "
                                    "got pad=2, kernel_size=2 and dilation=1")
both("adaptive_avg_pool2d", lambda L, x: F(L).adaptive_avg_pool2d(x, (3, 4)), _pool_input)
one("adaptive_avg_pool2d:int", lambda L, x: F(L).adaptive_avg_pool2d(x, 1),
    *_pool_input(np.float64))
one("adaptive_avg_pool2d:none", lambda L, x: F(L).adaptive_avg_pool2d(x, (None, 4)),
    *_pool_input(np.float64))
one("adaptive_avg_pool2d:larger", lambda L, x: F(L).adaptive_avg_pool2d(x[0], (7, 8)),
    *_pool_input(np.float64))
both("pad", lambda L, x: F(L).pad(x, (1, 2)), lambda dt: (randn(2, 3, dtype=dt),))
one("pad:value_two_dims", lambda L, x: F(L).pad(x, (1, 0, 0, 2), value=-1.5), randn(2, 3, 4))
one("pad:odd", lambda L, x: F(L).pad(x, (1, 2, 3)), randn(2, 3),
    error="Padding length must be divisible by 2")
one("pad:too_long", lambda L, x: F(L).pad(x, (1, 1, 1, 1, 1, 1)), randn(2, 3),
    error="Padding length should be less than or equal to two times the input dimension")
one("pad:negative", lambda L, x: F(L).pad(x, (-1, 2)), randn(2, 4))
one("pad:reflect", lambda L, x: F(L).pad(x, (2, 1), mode="reflect"), randn(2, 3, 4))
one("pad:replicate", lambda L, x: F(L).pad(x, (2, 1, 1, 0), mode="replicate"), randn(1, 2, 3, 4))
one("pad:circular", lambda L, x: F(L).pad(x, (2, 1), mode="circular"), randn(2, 3, 4))
one("pad:negative_two_dims", lambda L, x: F(L).pad(x, (-1, -2, 2, -1), value=0.5), randn(2, 3, 4))
one("pad:reflect_2d", lambda L, x: F(L).pad(x, (1, 2, 2, 0), mode="reflect"), randn(2, 3, 4))
one("pad:reflect_negative", lambda L, x: F(L).pad(x, (-1, 2), mode="reflect"), randn(2, 3, 4))
one("pad:replicate_3d", lambda L, x: F(L).pad(x, (1, 0, 0, 2, 1, 1), mode="replicate"),
    randn(1, 2, 2, 3, 2))
one("pad:circular_2d_crop", lambda L, x: F(L).pad(x, (-1, 2, 3, 1), mode="circular"),
    randn(1, 2, 3, 4))
one("pad:reflect_too_wide", lambda L, x: F(L).pad(x, (4, 1), mode="reflect"), randn(2, 3, 4),
    error=r"Padding size should be less than the corresponding input dimension, but got: "
          r"padding \(4, 1\) at dimension 2 of input \[2, 3, 4\]")
one("pad:circular_twice", lambda L, x: F(L).pad(x, (5, 0), mode="circular"), randn(2, 3, 4),
    error="Padding value causes wrapping around more than once")
one("pad:replicate_size", lambda L, x: F(L).pad(x, (1, 1), mode="replicate"), randn(4),
    error="Padding size 2 is not supported for 1D input tensor")
one("pad:reflect_value", lambda L, x: F(L).pad(x, (1, 1), mode="reflect", value=1.0),
    randn(2, 3), error="Padding mode \"reflect\" doesn't take in value argument")
one("pad:bad_mode", lambda L, x: F(L).pad(x, (1, 1), mode="mirror"), randn(2, 3),
    error="Unrecognised padding mode mirror")


# ---------------------------------------------------------------------------------------
# functional: losses

REDUCTIONS = ("mean", "sum", "none")


def _pair_inputs(dt, shape=(3, 4)):
    x = randn(*shape, dtype=dt)
    t = x.copy()
    t.flat[::3] += randn(x.size, dtype=dt, seed=1)[::3]     # some exact matches: |d| = 0
    t.flat[1] = x.flat[1] + 1.0                             # |d| == beta == delta
    return x, t


for _red in REDUCTIONS:
    both(f"mse_loss:{_red}", lambda L, x, t, r=_red: F(L).mse_loss(x, t, reduction=r),
         _pair_inputs)
    one(f"l1_loss:{_red}", lambda L, x, t, r=_red: F(L).l1_loss(x, t, reduction=r),
        *_pair_inputs(np.float64))
    one(f"smooth_l1_loss:{_red}", lambda L, x, t, r=_red: F(L).smooth_l1_loss(x, t, reduction=r),
        *_pair_inputs(np.float64))
    one(f"huber_loss:{_red}", lambda L, x, t, r=_red: F(L).huber_loss(x, t, reduction=r),
        *_pair_inputs(np.float64))
both("l1_loss", lambda L, x, t: F(L).l1_loss(x, t), _pair_inputs)
both("smooth_l1_loss", lambda L, x, t: F(L).smooth_l1_loss(x, t), _pair_inputs)
both("huber_loss", lambda L, x, t: F(L).huber_loss(x, t), _pair_inputs)
for _red in REDUCTIONS:
    for _fn in ("mse_loss", "l1_loss", "huber_loss"):
        one(f"{_fn}:weight:{_red}", lambda L, x, t, w, f=_fn, r=_red: getattr(F(L), f)(
            x, t, weight=w, reduction=r), *_pair_inputs(np.float64), np.abs(randn(3, 4, seed=3)))
one("mse_loss:weight_shape", lambda L, x, t, w: F(L).mse_loss(x, t, weight=w),
    *_pair_inputs(np.float64), randn(4, seed=3), error="Weights and input must have the same size")
one("mse_loss:broadcast", lambda L, x, t: F(L).mse_loss(x, t), randn(3, 4), randn(4, seed=1))
one("mse_loss:legacy_size_average", lambda L, x, t: F(L).mse_loss(x, t, size_average=False),
    *_pair_inputs(np.float64))
one("mse_loss:bad_reduction", lambda L, x, t: F(L).mse_loss(x, t, reduction="avg"),
    *_pair_inputs(np.float64), error="avg is not a valid value for reduction")
one("smooth_l1_loss:beta", lambda L, x, t: F(L).smooth_l1_loss(x, t, beta=0.5),
    *_pair_inputs(np.float64))
one("smooth_l1_loss:beta0", lambda L, x, t: F(L).smooth_l1_loss(x, t, beta=0.0),
    *_pair_inputs(np.float64))
one("huber_loss:delta", lambda L, x, t: F(L).huber_loss(x, t, delta=2.5),
    *_pair_inputs(np.float64))


def _logp(dt, shape=(4, 5)):
    return (np.log(np.abs(randn(*shape, dtype=np.float64)) + 0.1).astype(dt),)


_T = np.array([1, 0, 4, 1], np.int64)
_T_IGN = np.array([1, -100, 4, 3], np.int64)
for _red in REDUCTIONS:
    one(f"nll_loss:{_red}", lambda L, x, t, r=_red: F(L).nll_loss(x, t, reduction=r),
        *_logp(np.float64), _T)
    one(f"cross_entropy:{_red}", lambda L, x, t, r=_red: F(L).cross_entropy(x, t, reduction=r),
        randn(4, 5), _T)
    one(f"nll_loss:weight_ignore:{_red}",
        lambda L, x, t, w, r=_red: F(L).nll_loss(x, t, weight=w.detach(), reduction=r),
        *_logp(np.float64), _T_IGN, np.abs(randn(5, seed=2)))
    one(f"cross_entropy:smoothing_weight_ignore:{_red}",
        lambda L, x, t, w, r=_red: F(L).cross_entropy(x, t, w.detach(), ignore_index=3,
                                                      reduction=r,
                                                      label_smoothing=0.2),
        randn(4, 5), _T_IGN.clip(0), np.abs(randn(5, seed=2)))
    one(f"cross_entropy:probabilities:{_red}",
        lambda L, x, p, r=_red: F(L).cross_entropy(x, p, reduction=r, label_smoothing=0.1),
        randn(4, 5), np.abs(randn(4, 5, seed=1)) / 3)
both("nll_loss", lambda L, x, t: F(L).nll_loss(x, t), lambda dt: _logp(dt) + (_T,))
both("cross_entropy", lambda L, x, t: F(L).cross_entropy(x, t),
     lambda dt: (randn(4, 5, dtype=dt), _T))
# torch refuses a class weight that requires grad; functrans differentiates it
one("nll_loss:weight_requires_grad", lambda L, x, t, w: F(L).nll_loss(x, t, weight=w),
    *_logp(np.float64), _T, np.abs(randn(5, seed=2)))
one("nll_loss:ignore_index", lambda L, x, t: F(L).nll_loss(x, t, ignore_index=1),
    *_logp(np.float64), _T)
one("nll_loss:all_ignored", lambda L, x, t: F(L).nll_loss(x, t, ignore_index=1),
    *_logp(np.float64), np.ones(4, np.int64))
one("nll_loss:spatial", lambda L, x, t: F(L).nll_loss(x, t), *_logp(np.float64, (2, 3, 2, 2)),
    np.array([[[0, 2], [1, 1]], [[2, 2], [0, 1]]], np.int64))
one("nll_loss:unbatched", lambda L, x, t: F(L).nll_loss(x, t), randn(5), np.array(2))
one("nll_loss:out_of_bounds", lambda L, x, t: F(L).nll_loss(x, t), *_logp(np.float64),
    np.array([1, 0, 5, 1]), error="Target 5 is out of bounds")
one("nll_loss:batch_mismatch", lambda L, x, t: F(L).nll_loss(x, t), *_logp(np.float64),
    np.array([1, 0, 2]), error=r"Expected input batch_size \(4\) to match target batch_size \(3\)")
one("nll_loss:float_target", lambda L, x, t: F(L).nll_loss(x, t), *_logp(np.float64),
    np.array([1.0, 0.0, 2.0, 1.0]), requires_grad=False,
    error="expected target dtype to be Long or Byte, but got Double")
one("cross_entropy:int32_target", lambda L, x, t: F(L).cross_entropy(x, t), randn(4, 5),
    _T.astype(np.int32), error="expected target dtype to be Long or Byte, but got Int")
one("cross_entropy:uint8_target", lambda L, x, t: F(L).cross_entropy(x, t), randn(4, 5),
    _T.astype(np.uint8))
one("cross_entropy:label_smoothing", lambda L, x, t: F(L).cross_entropy(x, t, label_smoothing=0.3),
    randn(4, 5), _T)
one("cross_entropy:spatial_weight",
    lambda L, x, t, w: F(L).cross_entropy(x, t, w.detach(), label_smoothing=0.1),
    randn(2, 3, 2, 2), np.array([[[0, 2], [1, 1]], [[2, 2], [0, 1]]], np.int64),
    np.abs(randn(3, seed=2)))
one("cross_entropy:unbatched", lambda L, x, t: F(L).cross_entropy(x, t), randn(5), np.array(3))
one("cross_entropy:unbatched_probabilities", lambda L, x, p: F(L).cross_entropy(x, p),
    randn(5), np.full(5, 0.2))
one("cross_entropy:probabilities_weight", lambda L, x, p, w: F(L).cross_entropy(x, p, w),
    randn(4, 5), np.abs(randn(4, 5, seed=1)) / 3, np.abs(randn(5, seed=2)))
one("cross_entropy:inf_logit", lambda L, x, t: F(L).cross_entropy(x, t),
    np.array([[0.0, -np.inf, 1.0], [2.0, 2.0, 2.0]]), np.array([0, 1]))
one("cross_entropy:bad_smoothing", lambda L, x, t: F(L).cross_entropy(x, t, label_smoothing=1.5),
    randn(4, 5), _T, error="label_smoothing must be between 0.0 and 1.0")
one("cross_entropy:batch_mismatch", lambda L, x, t: F(L).cross_entropy(x, t), randn(4, 5),
    np.array([1, 2]), error=r"Expected input batch_size \(4\) to match target batch_size \(2\)")
one("cross_entropy:probability_shape", lambda L, x, p: F(L).cross_entropy(x, p), randn(4, 5),
    np.full((4, 4), 0.25), error="0D or 1D target tensor expected, multi-target not supported")
one("cross_entropy:spatial_target_ndim", lambda L, x, t: F(L).cross_entropy(x, t),
    randn(2, 3, 4, 4), np.zeros((2, 4), np.int64),
    error=r"only batches of spatial targets supported \(3D tensors\) but got targets of "
          "dimension: 2")
one("cross_entropy:spatial_target_size", lambda L, x, t: F(L).cross_entropy(x, t),
    randn(2, 3, 4, 4), np.zeros((2, 4, 5), np.int64),
    error=r"size mismatch \(got input: \[2, 3, 4, 4\] , target: \[2, 4, 5\]")
one("nll_loss:3d_target_size", lambda L, x, t: F(L).nll_loss(x, t), randn(2, 3, 4),
    np.zeros((2, 5), np.int64), error=r"Expected target size \[2, 4\], got \[2, 5\]")


def _probs(dt):
    p = 1 / (1 + np.exp(-randn(3, 4)))
    p[0, 0], p[0, 1], p[1, 2] = 0.0, 1.0, 0.5       # log clamped at -100 at 0 and 1
    t = (randn(3, 4, seed=1) > 0).astype(np.float64)
    t[2] = 0.3                                          # soft targets
    return p.astype(dt), t.astype(dt)


for _red in REDUCTIONS:
    both(f"binary_cross_entropy:{_red}",
         lambda L, p, t, r=_red: F(L).binary_cross_entropy(p, t, reduction=r), _probs)
    one(f"binary_cross_entropy_with_logits:{_red}",
        lambda L, x, t, r=_red: F(L).binary_cross_entropy_with_logits(x, t, reduction=r),
        randn(3, 4) * 30, _probs(np.float64)[1])
    one(f"kl_div:{_red}", lambda L, x, t, r=_red: F(L).kl_div(x, t, reduction=r),
        np.log(_probs(np.float64)[0] + 0.1), _probs(np.float64)[1])
one("binary_cross_entropy:weight",
    lambda L, p, t, w: F(L).binary_cross_entropy(p, t, w.detach()),
    *_probs(np.float64), randn(4, seed=5))
one("binary_cross_entropy:at_the_target",                 # issue 32: 0 and 1, both targets
    lambda L, p, t: F(L).binary_cross_entropy(p, t, reduction="none"),
    np.array([0.0, 1.0, 0.0, 1.0]), np.array([0.0, 1.0, 1.0, 0.0]))
one("binary_cross_entropy:out_of_range", lambda L, p, t: F(L).binary_cross_entropy(p * 3, t),
    *_probs(np.float64), error="all elements of input should be between 0 and 1")
one("binary_cross_entropy:shape", lambda L, p, t: F(L).binary_cross_entropy(p, t[:2]),
    *_probs(np.float64), error="Using a target size")
both("binary_cross_entropy_with_logits",
     lambda L, x, t: F(L).binary_cross_entropy_with_logits(x, t),
     lambda dt: (randn(3, 4, dtype=dt) * 5, _probs(dt)[1]))
one("binary_cross_entropy_with_logits:weight_pos_weight",
    lambda L, x, t, w, pw: F(L).binary_cross_entropy_with_logits(x, t, w.detach(),
                                                                   pos_weight=pw.detach()),
    randn(3, 4) * 5, _probs(np.float64)[1], randn(3, 1, seed=4), np.abs(randn(4, seed=5)))
one("binary_cross_entropy_with_logits:shape",
    lambda L, x, t: F(L).binary_cross_entropy_with_logits(x, t[:, :2]),
    randn(3, 4), _probs(np.float64)[1], error=r"Target size .* must be the same as input size")
both("kl_div", lambda L, x, t: F(L).kl_div(x, t, reduction="batchmean"),
     lambda dt: (np.log(_probs(dt)[0] + 0.1).astype(dt), _probs(dt)[1]))
one("kl_div:log_target", lambda L, x, t: F(L).kl_div(x, t, reduction="sum", log_target=True),
    randn(3, 4), randn(3, 4, seed=1))
one("kl_div:bad_reduction", lambda L, x, t: F(L).kl_div(x, t, reduction="avg"),
    randn(3, 4), randn(3, 4, seed=1), error="avg is not a valid value for reduction")


# ---------------------------------------------------------------------------------------
# functional: attention


def _qkv(dt, L=3, S=4, E=2, lead=(2,)):
    return (randn(*lead, L, E, dtype=dt), randn(*lead, S, E, dtype=dt, seed=1),
            randn(*lead, S, E + 1, dtype=dt, seed=2))


_BOOL_MASK = np.array([[True, False, True, True], [False, False, True, False],
                       [True, True, True, True]])
both("scaled_dot_product_attention",
     lambda L, q, k, v: F(L).scaled_dot_product_attention(q, k, v), _qkv, grad_fn=False)
one("scaled_dot_product_attention:bool_mask",
    lambda L, q, k, v, m: F(L).scaled_dot_product_attention(q, k, v, attn_mask=m),
    *_qkv(np.float64), _BOOL_MASK, grad_fn=False)
one("scaled_dot_product_attention:float_mask",
    lambda L, q, k, v, m: F(L).scaled_dot_product_attention(q, k, v, m.detach()),
    *_qkv(np.float64), np.where(_BOOL_MASK, 0.5, -np.inf), grad_fn=False)
one("scaled_dot_product_attention:causal_scale",
    lambda L, q, k, v: F(L).scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3),
    *_qkv(np.float64, L=4, lead=(2, 3)), grad_fn=False)
one("scaled_dot_product_attention:fully_masked_row",
    lambda L, q, k, v, m: F(L).scaled_dot_product_attention(q, k, v, attn_mask=m),
    *_qkv(np.float64), np.array([[True] * 4, [False] * 4, [True, False, False, True]]),
    grad_fn=False)
one("scaled_dot_product_attention:fully_masked_row_float",
    lambda L, q, k, v, m: F(L).scaled_dot_product_attention(q, k, v, attn_mask=m.detach()),
    *_qkv(np.float64), np.array([[0.0] * 4, [-np.inf] * 4, [0.0, -np.inf, 1.0, 0.0]]),
    grad_fn=False)
one("scaled_dot_product_attention:causal_and_mask",
    lambda L, q, k, v, m: F(L).scaled_dot_product_attention(q, k, v, m, is_causal=True),
    *_qkv(np.float64), _BOOL_MASK, error="Explicit attn_mask should not be set when "
                                         "is_causal=True")


# torch names the node after the CPU kernel it picks (flash attention or the math fallback)
one("scaled_dot_product_attention:grad_fn",
    lambda L, q, k, v: F(L).scaled_dot_product_attention(q, k, v), *_qkv(np.float64))


# dtypes: mixed operands, integer inputs, float32 through the losses and norms
_P = 1 / (1 + np.exp(-randn(3, 4)))
_T01 = (randn(3, 4, seed=1) > 0).astype(np.float64)
one("conv2d:weight_dtype", lambda L, x, w: F(L).conv2d(x, w), randn(1, 2, 4, 4, dtype=np.float32),
    randn(3, 2, 2, 2), error="expected scalar type Float but found Double")
one("conv1d:bias_dtype", lambda L, x, w, b: F(L).conv1d(x, w, b), randn(1, 2, 4, dtype=np.float32),
    randn(3, 2, 2, dtype=np.float32), randn(3),
    error=r"Input type \(float\) and bias type \(double\) should be the same")
one("one_hot:int32", lambda L, i: F(L).one_hot(i, 3), np.array([0, 2], np.int32),
    error="one_hot is only applicable to index tensor of type LongTensor")
one("avg_pool2d:int64", lambda L, x: F(L).avg_pool2d(x, 2, ceil_mode=True),
    np.array([[[[1, 2, 3], [4, -9, 3], [5, 5, -1]]]]))
one("adaptive_avg_pool2d:int64", lambda L, x: F(L).adaptive_avg_pool2d(x, (1, 2)),
    np.arange(16).reshape(1, 1, 4, 4), error="not implemented for 'Long'")
one("adaptive_avg_pool2d:int64_to_1x1", lambda L, x: F(L).adaptive_avg_pool2d(x, 1),
    np.arange(16).reshape(1, 1, 4, 4), error="mean\\(\\): could not infer output dtype")
one("max_pool2d:int64", lambda L, x: F(L).max_pool2d(x, 2), np.arange(16).reshape(1, 1, 4, 4))
one("pad:reflect_int64", lambda L, x: F(L).pad(x, (1, 1), mode="reflect"),
    np.arange(6).reshape(2, 3))
one("embedding:int32_indices", lambda L, i, w: F(L).embedding(i, w), np.array([0, 2], np.int32),
    randn(3, 2))
one("scaled_dot_product_attention:mask_dtype",
    lambda L, q, m: F(L).scaled_dot_product_attention(q, q, q, attn_mask=m.detach()),
    randn(1, 2, 3, dtype=np.float32), randn(2, 2),
    error="Expected attn_mask dtype to be bool or float or to match query dtype, but got "
          "attn_mask.dtype: double and  query.dtype: float instead")
one("binary_cross_entropy:weight_broadcast",
    lambda L, p, t, w: F(L).binary_cross_entropy(p, t, w.detach()), _P, _T01, randn(4, seed=2))
one("binary_cross_entropy_with_logits:pos_weight_only",
    lambda L, x, t, pw: F(L).binary_cross_entropy_with_logits(x, t, pos_weight=pw.detach()),
    randn(3, 4), _T01, np.abs(randn(4)))
one("cross_entropy:spatial_ignore_none", lambda L, x, t: F(L).cross_entropy(
    x, t, ignore_index=1, reduction="none"), randn(2, 3, 2, 2),
    np.array([[[0, 1], [2, 1]], [[1, 1], [0, 2]]]))
one("cross_entropy:probabilities_smoothing_weight_none", lambda L, x, p, w: F(L).cross_entropy(
    x, p, w.detach(), label_smoothing=0.3, reduction="none"), randn(3, 4),
    np.abs(randn(3, 4, seed=1)), np.abs(randn(4, seed=2)))
one("cross_entropy:f32_smoothing", lambda L, x, t: F(L).cross_entropy(x, t, label_smoothing=0.2),
    randn(3, 4, dtype=np.float32), np.array([0, 3, 1]))
one("nll_loss:f32_weight", lambda L, x, t, w: F(L).nll_loss(x, t, w.detach()),
    randn(3, 4, dtype=np.float32), np.array([0, 3, 1]), np.abs(randn(4)).astype(np.float32))
one("kl_div:log_target_batchmean", lambda L, x, t: F(L).kl_div(
    x, t, reduction="batchmean", log_target=True), randn(3, 4), randn(3, 4, seed=1))
one("mse_loss:mixed_dtypes", lambda L, x, t: F(L).mse_loss(x, t), randn(3, 4, dtype=np.float32),
    randn(3, 4))
one("batch_norm:f32_eval", lambda L, x: F(L).batch_norm(x, L.zeros(3), L.ones(3)),
    randn(4, 3, dtype=np.float32))


def functional_names():
    return sorted(n for n in set(dir(FF)) & set(dir(TF))
                  if not n.startswith("_") and callable(getattr(FF, n)))


# ---------------------------------------------------------------------------------------
# module: nn modules trained a few steps


def train(build, batches, steps=4, **kw):
    """oracle.train, with an exception on either side reported as a Mismatch (a crash is a
    difference like any other). The backward programs cached by graph structure are
    dropped first, so a case starts cold whatever ran before it (the crash of issue 29
    comes when a structure is first lowered, at its third backward)."""
    engine.clear_cache()
    try:
        oracle.train(build, batches, steps, **kw)
    except Mismatch:
        raise
    except Exception as e:  # noqa: BLE001
        raise Mismatch(f"training raised {type(e).__name__}: {str(e)[:300]}") from e


def mse_build(make, lr=0.1, dtype="float64", opt=None):
    """build(lib) for train: make(lib) -> model, SGD, mean squared error to the target."""
    def build(lib):
        m = make(lib)
        m = m.double() if dtype == "float64" else m
        o = (opt or (lambda L, p: L.optim.SGD(p, lr=lr)))(lib, m.parameters())
        return m, o, lambda model, x, y: lib.nn.functional.mse_loss(model(x), y)
    return build


def batches(in_shape, out_shape, n=2, dtype=np.float64, seed=0):
    r = rng(seed)
    return [(r.standard_normal(in_shape).astype(dtype),
             r.standard_normal(out_shape).astype(dtype)) for _ in range(n)]


def mod(name, build, data, steps=3, **kw):
    """A module:<name> case: oracle.train for `steps` steps (3 by default: the crash of
    issue 29 shows at the third; the recurrent cases take the 4 the issue names)."""
    add(f"module:{name}", lambda: train(build, data, steps, **kw))


def mlp(act):
    """Linear(4, 5) -> act -> Linear(5, 3)."""
    return lambda L: L.nn.Sequential(L.nn.Linear(4, 5), act(L), L.nn.Linear(5, 3))


_ACTS = {
    "ReLU": lambda L: L.nn.ReLU(), "ReLU6": lambda L: L.nn.ReLU6(),
    "LeakyReLU": lambda L: L.nn.LeakyReLU(0.1), "ELU": lambda L: L.nn.ELU(alpha=0.7),
    "GELU": lambda L: L.nn.GELU(), "GELU:tanh": lambda L: L.nn.GELU(approximate="tanh"),
    "SiLU": lambda L: L.nn.SiLU(), "Mish": lambda L: L.nn.Mish(), "Tanh": lambda L: L.nn.Tanh(),
    "Sigmoid": lambda L: L.nn.Sigmoid(), "Softplus": lambda L: L.nn.Softplus(beta=2.0),
    "Hardtanh": lambda L: L.nn.Hardtanh(-0.3, 0.3), "LogSigmoid": lambda L: L.nn.LogSigmoid(),
    "Threshold": lambda L: L.nn.Threshold(0.1, -2.0),
    "Softmax": lambda L: L.nn.Softmax(dim=1), "LogSoftmax": lambda L: L.nn.LogSoftmax(dim=-1),
    "Identity": lambda L: L.nn.Identity(3, unused="ignored"),
    "Dropout:p0": lambda L: L.nn.Dropout(0.0),
    "ReLU:inplace": lambda L: L.nn.ReLU(inplace=True),
}
for _name, _act in _ACTS.items():
    mod(_name, mse_build(mlp(_act)), batches((6, 4), (6, 3)))
mod("Linear:f32", mse_build(lambda L: L.nn.Linear(4, 3), dtype="float32"),
    batches((6, 4), (6, 3), dtype=np.float32))
mod("Linear:no_bias", mse_build(lambda L: L.nn.Linear(4, 3, bias=False)), batches((6, 4), (6, 3)))
mod("Sequential:f32", mse_build(mlp(_ACTS["Tanh"]), dtype="float32"),
    batches((6, 4), (6, 3), dtype=np.float32))


def dropout_eval_build(lib):
    m = mlp(lambda L: L.nn.Dropout(0.5))(lib).double()
    m.eval()
    return m, lib.optim.SGD(m.parameters(), lr=0.1), \
        lambda model, x, y: lib.nn.functional.mse_loss(model(x), y)


mod("Dropout:eval", dropout_eval_build, batches((6, 4), (6, 3)))
mod("Bilinear", lambda L: (lambda m: (m, L.optim.SGD(m.parameters(), lr=0.1),
                                     lambda mm, a, b, y: L.nn.functional.mse_loss(mm(a, b), y)))(
    L.nn.Bilinear(3, 2, 4).double()),
    [(randn(5, 3), randn(5, 2, seed=1), randn(5, 4, seed=2))])
mod("Flatten_Unflatten", mse_build(lambda L: L.nn.Sequential(
    L.nn.Unflatten(1, (2, 3)), L.nn.Flatten(), L.nn.Linear(6, 3), L.nn.Unflatten(-1, (3, 1)),
    L.nn.Flatten(0))), batches((4, 6), (12,)))


def conv_net(L):
    return L.nn.Sequential(L.nn.Conv2d(2, 3, 3, padding=1), L.nn.ReLU(), L.nn.MaxPool2d(2),
                           L.nn.Conv2d(3, 4, (2, 3), stride=(1, 2), dilation=(1, 1), groups=1),
                           L.nn.AvgPool2d(2, ceil_mode=True), L.nn.AdaptiveAvgPool2d((1, 2)),
                           L.nn.Flatten(), L.nn.Linear(8, 2))


mod("Conv2d", mse_build(conv_net), batches((3, 2, 8, 8), (3, 2)))
# the steps before the crash of issue 29 (the four-step cases are rows of docs/oracle.md)
mod("Conv2d:two_steps", mse_build(conv_net), batches((3, 2, 8, 8), (3, 2)), steps=2)
mod("Conv2d:f32", mse_build(conv_net, dtype="float32"),
    batches((3, 2, 8, 8), (3, 2), dtype=np.float32))
mod("Conv3d", mse_build(lambda L: L.nn.Sequential(
    L.nn.Conv3d(2, 4, (2, 3, 2), stride=(1, 2, 1), padding=(1, 0, 1), groups=2), L.nn.ReLU(),
    L.nn.Conv3d(4, 3, 2, padding="same", padding_mode="circular", bias=False), L.nn.Flatten(),
    L.nn.Linear(3 * 5 * 2 * 5, 2))), batches((3, 2, 4, 6, 4), (3, 2)))
mod("Conv2d:groups_same_no_bias", mse_build(lambda L: L.nn.Sequential(
    L.nn.Conv2d(4, 6, 3, padding="same", groups=2, bias=False), L.nn.Flatten(),
    L.nn.Linear(6 * 16, 2))), batches((2, 4, 4, 4), (2, 2)))
mod("MaxPool2d:padding_dilation", mse_build(lambda L: L.nn.Sequential(
    L.nn.Conv2d(1, 2, 1), L.nn.MaxPool2d(3, stride=2, padding=1, dilation=1, ceil_mode=True),
    L.nn.Flatten(), L.nn.Linear(2 * 12, 1))), batches((2, 1, 5, 6), (2, 1)))
mod("AvgPool2d:count_include_pad", mse_build(lambda L: L.nn.Sequential(
    L.nn.Conv2d(1, 2, 1), L.nn.AvgPool2d(3, 2, 1, count_include_pad=False), L.nn.Flatten(),
    L.nn.Linear(2 * 9, 1))), batches((2, 1, 5, 6), (2, 1)))
mod("Conv1d", mse_build(lambda L: L.nn.Sequential(
    L.nn.Conv1d(3, 4, 3, stride=2, padding=1, dilation=1), L.nn.Tanh(),
    L.nn.Conv1d(4, 2, 2, groups=2, padding="same"), L.nn.Flatten(), L.nn.Linear(8, 2))),
    batches((3, 3, 8), (3, 2)))


for _pm in ("reflect", "replicate", "circular"):
    mod(f"Conv2d:padding_mode_{_pm}", mse_build(lambda L, pm=_pm: L.nn.Sequential(
        L.nn.Conv2d(2, 3, (3, 2), padding=(1, 2), padding_mode=pm), L.nn.Flatten(),
        L.nn.Linear(3 * 5 * 8, 2))), batches((2, 2, 5, 5), (2, 2)), steps=2)
    mod(f"Conv1d:padding_mode_{_pm}_same", mse_build(lambda L, pm=_pm: L.nn.Sequential(
        L.nn.Conv1d(2, 3, 4, padding="same", dilation=1, padding_mode=pm), L.nn.Flatten(),
        L.nn.Linear(3 * 6, 2))), batches((2, 2, 6), (2, 2)), steps=2)


def norm_build(make, mode="train"):
    """build for train: make(lib) in float64, in train or eval mode, SGD, squared error."""
    def build(lib):
        m = make(lib).double()
        m.train(mode == "train")
        return m, lib.optim.SGD(m.parameters(), lr=0.1), \
            lambda model, x, y: lib.nn.functional.mse_loss(model(x), y)
    return build


def train_with_state(build, data, steps=3):
    """train, then the state_dicts (buffers: running statistics, num_batches_tracked)."""
    models = {}

    def keep(lib):
        out = build(lib)
        models[lib.__name__] = out[0]
        return out
    train(keep, data, steps)
    ts = models["torch"].state_dict()
    fs = models["functrans"].state_dict()
    compare(list(fs), list(ts), "state_dict keys")
    compare(dict(fs), dict(ts), "state_dict after the steps", grad_fn=False)
    compare([n for n, _ in models["functrans"].named_buffers()],
            [n for n, _ in models["torch"].named_buffers()], "named_buffers")


def stateful(name, make, data, mode="train", steps=3):
    """A module:<name> case: train in `mode`, then compare the state_dicts."""
    add(f"module:{name}", lambda: train_with_state(norm_build(make, mode), data, steps))


for _mode in ("train", "eval"):
    stateful(f"BatchNorm1d:{_mode}", lambda L: L.nn.Sequential(
        L.nn.Linear(4, 5), L.nn.BatchNorm1d(5), L.nn.Linear(5, 3)), batches((6, 4), (6, 3)),
        _mode)
    stateful(f"BatchNorm2d:{_mode}", lambda L: L.nn.Sequential(
        L.nn.Conv2d(2, 3, 1), L.nn.BatchNorm2d(3, momentum=0.3), L.nn.Flatten(),
        L.nn.Linear(12, 2)), batches((3, 2, 2, 2), (3, 2)), _mode)
add("module:BatchNorm2d:f32", lambda: train_with_state(
    lambda L: (lambda m: (m, L.optim.SGD(m.parameters(), lr=0.1),
                          lambda model, x, y: L.nn.functional.mse_loss(model(x), y)))(
        L.nn.Sequential(L.nn.Conv2d(2, 3, 1), L.nn.BatchNorm2d(3), L.nn.Flatten(),
                        L.nn.Linear(12, 2))),
    batches((3, 2, 2, 2), (3, 2), dtype=np.float32)))
stateful("BatchNorm1d:3d_momentum_none", lambda L: L.nn.Sequential(
    L.nn.Conv1d(2, 3, 1), L.nn.BatchNorm1d(3, momentum=None, eps=1e-3), L.nn.Flatten(),
    L.nn.Linear(9, 2)), batches((4, 2, 3), (4, 2)))
stateful("BatchNorm1d:no_running_stats", lambda L: L.nn.Sequential(
    L.nn.Linear(4, 5), L.nn.BatchNorm1d(5, affine=False, track_running_stats=False),
    L.nn.Linear(5, 3)), batches((6, 4), (6, 3)))
stateful("BatchNorm1d:no_running_stats:eval", lambda L: L.nn.Sequential(
    L.nn.Linear(4, 5), L.nn.BatchNorm1d(5, track_running_stats=False), L.nn.Linear(5, 3)),
    batches((6, 4), (6, 3)), "eval")
stateful("LayerNorm", lambda L: L.nn.Sequential(
    L.nn.Linear(4, 6), L.nn.LayerNorm(6), L.nn.Linear(6, 3)), batches((5, 4), (5, 3)))
stateful("LayerNorm:2d_no_bias", lambda L: L.nn.Sequential(
    L.nn.Unflatten(1, (2, 2)), L.nn.LayerNorm((2, 2), eps=1e-3, bias=False), L.nn.Flatten(),
    L.nn.Linear(4, 3)), batches((5, 4), (5, 3)))
stateful("LayerNorm:no_affine", lambda L: L.nn.Sequential(
    L.nn.Linear(4, 6), L.nn.LayerNorm(6, elementwise_affine=False), L.nn.Linear(6, 3)),
    batches((5, 4), (5, 3)))
stateful("GroupNorm", lambda L: L.nn.Sequential(
    L.nn.Conv2d(2, 4, 1), L.nn.GroupNorm(2, 4), L.nn.Flatten(), L.nn.Linear(16, 2)),
    batches((3, 2, 2, 2), (3, 2)))
stateful("BatchNorm2d:no_bias", lambda L: L.nn.Sequential(
    L.nn.Conv2d(2, 3, 1), L.nn.BatchNorm2d(3, bias=False), L.nn.Flatten(),
    L.nn.Linear(12, 2)), batches((3, 2, 2, 2), (3, 2)))
stateful("GroupNorm:no_bias", lambda L: L.nn.Sequential(
    L.nn.Conv1d(2, 4, 1), L.nn.GroupNorm(2, 4, bias=False), L.nn.Flatten(),
    L.nn.Linear(12, 2)), batches((3, 2, 3), (3, 2)))
stateful("GroupNorm:no_affine", lambda L: L.nn.Sequential(
    L.nn.Conv1d(2, 4, 1), L.nn.GroupNorm(4, 4, affine=False), L.nn.Flatten(),
    L.nn.Linear(12, 2)), batches((3, 2, 3), (3, 2)))


def emb_build(**kw):
    def build(lib):
        m = lib.nn.Sequential(lib.nn.Embedding(6, 3, **kw), lib.nn.Flatten(),
                              lib.nn.Linear(6, 2)).double()
        return m, lib.optim.SGD(m.parameters(), lr=0.5), \
            lambda model, i, y: lib.nn.functional.mse_loss(model(i), y)
    return build


_EMB_DATA = [(np.array([[0, 5], [2, 2], [5, 1]]), randn(3, 2)),
             (np.array([[3, 3], [0, 4], [1, 0]]), randn(3, 2, seed=1))]
mod("Embedding", emb_build(), _EMB_DATA)
mod("Embedding:padding_idx", emb_build(padding_idx=0), _EMB_DATA)
mod("Embedding:max_norm_scale_grad_by_freq",
    emb_build(max_norm=0.9, scale_grad_by_freq=True), _EMB_DATA)


def loss_build(loss, head=lambda L: L.nn.Linear(4, 5), post=None):
    """A Linear head trained on loss(lib)(post(model(x)), target)."""
    def build(lib):
        m = head(lib).double()
        crit = loss(lib)
        f = post or (lambda L, y: y)
        return m, lib.optim.SGD(m.parameters(), lr=0.2), \
            lambda model, x, t: crit(f(lib, model(x)), t)
    return build


_X = [randn(6, 4), randn(6, 4, seed=1)]
_CLS = [np.array([0, 4, 2, 2, 1, 3]), np.array([4, 4, 0, 1, 3, 3])]
_REG = [randn(6, 5, seed=2), randn(6, 5, seed=3)]
_BIN = [(randn(6, 5, seed=4) > 0).astype(np.float64), (randn(6, 5, seed=5) > 0).astype(np.float64)]
_LOSSES = {
    "MSELoss": (lambda L: L.nn.MSELoss(reduction="sum"), _REG, None),
    "L1Loss": (lambda L: L.nn.L1Loss(), _REG, None),
    "SmoothL1Loss": (lambda L: L.nn.SmoothL1Loss(beta=0.5), _REG, None),
    "HuberLoss": (lambda L: L.nn.HuberLoss(delta=0.7), _REG, None),
    "CrossEntropyLoss": (lambda L: L.nn.CrossEntropyLoss(), _CLS, None),
    "CrossEntropyLoss:weight_smoothing_ignore": (
        lambda L: L.nn.CrossEntropyLoss(weight=L.tensor([1.0, 2.0, 0.5, 1.0, 3.0],
                                                        dtype=L.float64),
                                        ignore_index=3, label_smoothing=0.1), _CLS, None),
    "NLLLoss": (lambda L: L.nn.NLLLoss(reduction="sum"), _CLS,
                lambda L, y: L.nn.functional.log_softmax(y, dim=1)),
    "BCELoss": (lambda L: L.nn.BCELoss(), _BIN, lambda L, y: L.sigmoid(y)),
    "BCEWithLogitsLoss": (lambda L: L.nn.BCEWithLogitsLoss(
        pos_weight=L.tensor([1.0, 2.0, 0.5, 1.0, 3.0], dtype=L.float64)), _BIN, None),
    "KLDivLoss": (lambda L: L.nn.KLDivLoss(reduction="batchmean"),
                  [np.full((6, 5), 0.2), np.abs(_REG[0]) / np.abs(_REG[0]).sum(1, keepdims=True)],
                  lambda L, y: L.nn.functional.log_softmax(y, dim=1)),
}
for _name, (_loss, _targets, _post) in _LOSSES.items():
    mod(_name, loss_build(_loss, post=_post), list(zip(_X, _targets)))


# containers, Parameter and Buffer: by their behaviour (names, state_dict, training through)


def _custom_module(L):
    class Net(L.nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = L.nn.Parameter(L.ones(3, dtype=L.float64) * 0.5)
            self.register_buffer("shift", L.arange(3, dtype=L.float64))
            self.register_buffer("tmp", L.zeros(3, dtype=L.float64), persistent=False)
            self.layers = L.nn.ModuleList([L.nn.Linear(4, 3), L.nn.Tanh()])
            self.layers.append(L.nn.Linear(3, 3))
            self.heads = L.nn.ModuleDict({"b": L.nn.Linear(3, 2), "a": L.nn.Linear(3, 2)})
            self.extra = L.nn.ParameterList([L.nn.Parameter(L.ones(2, dtype=L.float64))])
            self.extra.append(L.nn.Parameter(L.full((2,), 0.3, dtype=L.float64)))
            self.pd = L.nn.ParameterDict({"z": L.nn.Parameter(L.ones(3, dtype=L.float64)),
                                          "y": L.nn.Parameter(L.zeros(3, dtype=L.float64))})

        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            x = x * self.scale + self.shift + self.pd["z"] * self.pd["y"]
            return self.heads["a"](x) * self.extra[0] + self.heads["b"](x) * self.extra[1]
    return Net()


mod("Module:containers", mse_build(_custom_module), batches((5, 4), (5, 2)))


def _structure(L):
    m = _custom_module(L).double()
    p = L.nn.Parameter(L.ones(2))
    b = L.nn.Buffer(L.ones(2))

    class WithBuffer(L.nn.Module):
        def __init__(self):
            super().__init__()
            self.kept = L.nn.Buffer(L.ones(2))
            self.dropped = L.nn.Buffer(L.zeros(2), persistent=False)
    wb = WithBuffer()
    return {
        "parameters": [n for n, _ in m.named_parameters()],
        "buffers": [n for n, _ in m.named_buffers()],
        "state_dict": list(m.state_dict()),
        "modules": [n for n, _ in m.named_modules()],
        "children": [n for n, _ in m.named_children()],
        "module_dict_keys": list(m.heads.keys()),
        "parameter_dict_keys": list(m.pd.keys()),
        "len": (len(m.layers), len(m.heads), len(m.extra), len(m.pd)),
        "parameter": (isinstance(p, L.Tensor), p.requires_grad, p.is_leaf, p.grad_fn is None,
                      isinstance(p, L.nn.Parameter)),
        "parameter_no_grad": L.nn.Parameter(L.ones(2), requires_grad=False).requires_grad,
        "buffer": (isinstance(b, L.Tensor), b.requires_grad),
        "buffer_attr": ([n for n, _ in wb.named_buffers()], list(wb.state_dict())),
        "sequential_slice": [type(s).__name__ for s in L.nn.Sequential(
            L.nn.Linear(1, 1), L.nn.ReLU(), L.nn.Tanh())[1:]],
        "train_flags": (m.training, m.eval().training, m.layers[0].training),
    }


add("module:Module:structure", lambda: compare(_structure(ft), _structure(torch), "structure"))


def _reprs(L):
    """repr of one module of each class (torch's strings, the library's name aside)."""
    mods = [
        L.nn.Linear(3, 4, bias=False), L.nn.Bilinear(2, 3, 4), L.nn.Identity(),
        L.nn.Conv2d(2, 3, 3, stride=2, padding=1, dilation=2),
        L.nn.Conv2d(2, 3, 3, padding="same", padding_mode="circular", bias=False),
        L.nn.Conv1d(2, 4, 3, padding="same", groups=2), L.nn.MaxPool2d(2, 1, 1),
        L.nn.AvgPool2d(3), L.nn.AdaptiveAvgPool2d((2, None)),
        L.nn.BatchNorm1d(3, momentum=None), L.nn.BatchNorm2d(3, affine=False),
        L.nn.LayerNorm((2, 3), elementwise_affine=False), L.nn.LayerNorm(4, bias=False),
        L.nn.GroupNorm(2, 4), L.nn.Embedding(5, 3, padding_idx=1, max_norm=2.0),
        L.nn.LSTM(3, 4, num_layers=2, bidirectional=True, batch_first=True), L.nn.GRU(3, 4),
        L.nn.RNN(3, 4, nonlinearity="relu"), L.nn.LSTMCell(3, 4), L.nn.GRUCell(3, 4, bias=False),
        L.nn.RNNCell(3, 4), L.nn.MultiheadAttention(4, 2),
        L.nn.TransformerEncoderLayer(4, 2, 8),
        L.nn.TransformerEncoder(L.nn.TransformerEncoderLayer(4, 2, 8), 2,
                                enable_nested_tensor=False),
        L.nn.Dropout(0.2), L.nn.GELU("tanh"), L.nn.ELU(0.5), L.nn.LeakyReLU(0.2, True),
        L.nn.Hardtanh(-2, 2), L.nn.Hardtanh(-2, 2, True), L.nn.ReLU6(True),
        L.nn.Softplus(2, 10), L.nn.Softmax(1), L.nn.LogSoftmax(-1),
        L.nn.Flatten(), L.nn.Unflatten(1, (2, 3)), L.nn.ReLU(), L.nn.ReLU6(), L.nn.SiLU(),
        L.nn.Mish(), L.nn.Sigmoid(), L.nn.Tanh(), L.nn.LogSigmoid(),
        L.nn.CrossEntropyLoss(label_smoothing=0.1), L.nn.MSELoss(), L.nn.HuberLoss(),
        L.nn.SmoothL1Loss(), L.nn.KLDivLoss(), L.nn.BCEWithLogitsLoss(), L.nn.NLLLoss(),
        L.nn.L1Loss(), L.nn.BCELoss(),
        L.nn.Sequential(L.nn.Linear(1, 1), L.nn.ReLU()),
        L.nn.ModuleList([L.nn.ReLU()]), L.nn.ModuleDict({"a": L.nn.ReLU()}),
    ]
    return [repr(m) for m in mods]


add("module:repr", lambda: compare(_reprs(ft), _reprs(torch), "repr"))
add("module:Flatten:dim_out_of_range", lambda: facade(
    lambda L, x: L.nn.Flatten(3)(x), randn(2, 3), error="Dimension out of range"))
add("module:Unflatten:sizes", lambda: facade(
    lambda L, x: L.nn.Unflatten(1, (2, 2))(x), randn(2, 3),
    error=r"unflatten: Provided sizes \[2, 2\] don't multiply up to the size of dim 1"))
add("module:GroupNorm:indivisible", lambda: facade(
    lambda L, x: L.nn.GroupNorm(3, 4)(x), randn(2, 4),
    error=r"num_channels \(4\) must be divisible by num_groups \(3\)"))
add("module:AdaptiveAvgPool2d:output_size", lambda: facade(
    lambda L, x: L.nn.AdaptiveAvgPool2d((2, 2, 2))(x), randn(1, 1, 4, 4),
    error="adaptive_avg_pool2d: output_size must be 2"))
add("module:Hardtanh:deprecated_names", lambda: facade(
    lambda L, x: L.nn.Hardtanh(min_value=-0.5, max_value=0.5)(x), kinks(np.float64)))
add("module:Hardtanh:empty_range", lambda: facade(
    lambda L, x: L.nn.Hardtanh(1.0, 1.0)(x), kinks(np.float64),
    error=r"max_val \(1.0\) must be greater than min_val \(1.0\)"))


def _seq_ordered(L):
    from collections import OrderedDict
    return L.nn.Sequential(OrderedDict([("fc", L.nn.Linear(4, 3)), ("act", L.nn.ReLU())]))


mod("Sequential:ordered_dict", mse_build(_seq_ordered), batches((5, 4), (5, 3)))


# recurrent layers: alone (num_layers=2, bidirectional, batch_first) and composed


def rnn_build(kind, composed=False, batch_first=False, dtype="float64", **kw):
    def build(lib):
        class Net(lib.nn.Module):
            def __init__(self):
                super().__init__()
                if composed:
                    self.pre = lib.nn.Linear(3, 3)
                self.rnn = getattr(lib.nn, kind)(3, 4, batch_first=batch_first, **kw)
                d = 2 if kw.get("bidirectional") else 1
                self.post = lib.nn.Linear(4 * d, 2) if composed else None

            def forward(self, x):
                if composed:
                    x = self.pre(x)
                out, h = self.rnn(x)
                h = h[0] if isinstance(h, tuple) else h
                out = self.post(out) if composed else out
                return out.sum() * 0.1 + (out * out).mean() + (h * h).sum() * 0.5
        m = Net().double() if dtype == "float64" else Net()
        return m, lib.optim.SGD(m.parameters(), lr=0.1), lambda model, x: model(x)
    return build


def seqs(batch_first=False, n=2):
    shape = (2, 5, 3) if batch_first else (5, 2, 3)
    return [(randn(*shape, seed=s),) for s in range(n)]


for _kind in ("RNN", "LSTM", "GRU"):
    mod(f"{_kind}", rnn_build(_kind), seqs(), steps=4)
    mod(f"{_kind}:2layers_bidirectional_batch_first",
        rnn_build(_kind, batch_first=True, num_layers=2, bidirectional=True),
        seqs(batch_first=True), steps=4)
    mod(f"{_kind}:composed", rnn_build(_kind, composed=True), seqs(), steps=4)
    mod(f"{_kind}:composed:two_steps", rnn_build(_kind, composed=True), seqs(), steps=2)
    mod(f"{_kind}:composed_2layers_bidirectional",
        rnn_build(_kind, composed=True, num_layers=2, bidirectional=True), seqs(), steps=4)
mod("RNN:relu_no_bias", rnn_build("RNN", nonlinearity="relu", bias=False), seqs(), steps=4)
mod("LSTM:f32", rnn_build("LSTM", dtype="float32"),
    [tuple(a.astype(np.float32) for a in batch) for batch in seqs()])
mod("GRU:f32_2layers", rnn_build("GRU", dtype="float32", num_layers=2),
    [tuple(a.astype(np.float32) for a in batch) for batch in seqs()])


def fixed(L, m, seed=20):
    """m in float64 with weights drawn from seed (the same in both libraries)."""
    m = m.double()
    with L.no_grad():
        for i, p in enumerate(m.parameters()):
            p.copy_(L.tensor(randn(*p.shape, seed=seed + i) * 0.5))
    return m


def rnn_call(kind, x_shape, h=False, grad_fn=True, **kw):
    """facade of a recurrent layer with fixed weights (and an initial state with h)."""
    def fn(L, x, *hs):
        m = fixed(L, getattr(L.nn, kind)(3, 4, **kw))
        state = None
        if hs:
            state = (hs[0], hs[1]) if kind == "LSTM" else hs[0]
        return m(x) if state is None else m(x, state)
    d = kw.get("num_layers", 1) * (2 if kw.get("bidirectional") else 1)
    batched = len(x_shape) == 3
    b = x_shape[0 if kw.get("batch_first") else 1] if batched else None
    hshape = (d, b, kw.get("proj_size") or 4) if batched else (d, kw.get("proj_size") or 4)
    cshape = (d, b, 4) if batched else (d, 4)
    hs = () if not h else ((randn(*hshape, seed=7), randn(*cshape, seed=8)) if kind == "LSTM"
                           else (randn(*hshape, seed=7),))
    return lambda: facade(fn, randn(*x_shape), *hs, grad_fn=grad_fn)


add("module:LSTM:h0_2layers", rnn_call("LSTM", (5, 2, 3), h=True, num_layers=2))
add("module:LSTM:proj_bidirectional_unbatched",
    rnn_call("LSTM", (5, 3), h=True, proj_size=2, bidirectional=True))
add("module:GRU:h0", rnn_call("GRU", (5, 2, 3), h=True))
add("module:RNN:relu_unbatched", rnn_call("RNN", (5, 3), nonlinearity="relu"))
add("module:GRU:h0_batch_first_bidirectional",
    rnn_call("GRU", (2, 5, 3), h=True, grad_fn=False, batch_first=True, bidirectional=True))
# grad_fn names only (values and gradients agree above): rows of docs/oracle.md
add("module:GRU:batch_first:grad_fn", rnn_call("GRU", (2, 5, 3), batch_first=True))
add("module:LSTM:float32:grad_fn", lambda: facade(
    lambda L, x: L.nn.LSTM(3, 4)(x)[0].grad_fn.name(), randn(5, 2, 3, dtype=np.float32)))
add("module:RNN:wrong_hidden", lambda: facade(
    lambda L, x, h: fixed(L, L.nn.RNN(3, 4))(x, h), randn(5, 2, 3), randn(1, 3, 4),
    error=r"Expected hidden size \(1, 2, 4\), got \[1, 3, 4\]"))
add("module:LSTM:wrong_input_size", lambda: facade(
    lambda L, x: fixed(L, L.nn.LSTM(3, 4))(x), randn(5, 2, 4),
    error=r"input.size\(-1\) must be equal to input_size. Expected 3, got 4"))
add("module:LSTM:4d_input", lambda: facade(
    lambda L, x: fixed(L, L.nn.LSTM(3, 4))(x), randn(5, 2, 1, 3),
    error="LSTM: Expected input to be 2D or 3D, got 4D instead"))
add("module:RNN:4d_input", lambda: facade(
    lambda L, x: fixed(L, L.nn.RNN(3, 4))(x), randn(5, 2, 1, 3),
    error="RNN: Expected input to be 2D or 3D, got 4D tensor instead"))
for _kind in ("RNNCell", "LSTMCell", "GRUCell"):
    add(f"module:{_kind}:unbatched_state", lambda k=_kind: facade(
        lambda L, x, h: (lambda m: m(x, (h, h * 0.5)) if k == "LSTMCell" else m(x, h))(
            fixed(L, getattr(L.nn, k)(3, 4))), randn(3), randn(4, seed=1)))
    add(f"module:{_kind}:wrong_input_size", lambda k=_kind: facade(
        lambda L, x: fixed(L, getattr(L.nn, k)(3, 4))(x), randn(2, 4),
        error=r"input has inconsistent input_size: got 4 expected 3"))


def cell_build(kind, composed=False):
    def build(lib):
        class Net(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.cell = getattr(lib.nn, kind)(3, 4)
                self.post = lib.nn.Linear(4, 2) if composed else None
                self.pre = lib.nn.Linear(3, 3) if composed else None

            def forward(self, x):
                h = None
                outs = []
                for t in range(x.shape[0]):
                    xt = self.pre(x[t]) if composed else x[t]
                    h = self.cell(xt) if h is None else self.cell(xt, h)
                    outs.append(h[0] if isinstance(h, tuple) else h)
                y = lib.stack(outs)
                y = self.post(y) if composed else y
                return (y * y).mean() + y.sum() * 0.1
        m = Net().double()
        return m, lib.optim.SGD(m.parameters(), lr=0.1), lambda model, x: model(x)
    return build


for _kind in ("RNNCell", "LSTMCell", "GRUCell"):
    mod(_kind, cell_build(_kind), seqs(), steps=4)
    mod(f"{_kind}:composed", cell_build(_kind, composed=True), seqs(), steps=4)


def _rnn_base_classes(L):
    return (issubclass(L.nn.LSTM, L.nn.RNNBase), issubclass(L.nn.GRU, L.nn.RNNBase),
            issubclass(L.nn.RNN, L.nn.RNNBase), issubclass(L.nn.LSTMCell, L.nn.RNNCellBase),
            issubclass(L.nn.GRUCell, L.nn.RNNCellBase),
            [n for n, _ in L.nn.LSTM(2, 3, num_layers=2, bidirectional=True).named_parameters()],
            [n for n, _ in L.nn.GRUCell(2, 3).named_parameters()])


add("module:RNNBase:structure",
    lambda: compare(_rnn_base_classes(ft), _rnn_base_classes(torch), "classes"))


# attention and transformers (dropout=0)

def mha_build(batch_first=True, kdim=None, mask=False, need_weights=True, **kw):
    def build(lib):
        class Net(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.att = lib.nn.MultiheadAttention(4, 2, batch_first=batch_first, kdim=kdim,
                                                     vdim=kdim, **kw)

            def forward(self, q, k):
                kpm = attn = None
                if mask:
                    kpm = lib.tensor([[False, False, True], [False, False, False]])
                    attn = lib.tensor([[False, True, False]] * 2 + [[False] * 3])
                v = k
                out, w = self.att(q, k, v, key_padding_mask=kpm, attn_mask=attn,
                                  need_weights=need_weights)
                total = (out * out).mean() + out.sum() * 0.1
                return total + (w * w).sum() if w is not None else total
        m = Net().double()
        return m, lib.optim.SGD(m.parameters(), lr=0.1), lambda model, q, k: model(q, k)
    return build


def mha_data(batch_first=True, kdim=None):
    q, k = (2, 3, 4), (2, 3, kdim or 4)
    if not batch_first:
        q, k = (3, 2, 4), (3, 2, kdim or 4)
    return [(randn(*q, seed=s), randn(*k, seed=s + 10)) for s in range(2)]


mod("MultiheadAttention", mha_build(), mha_data())
mod("MultiheadAttention:seq_first_masks", mha_build(batch_first=False, mask=True),
    mha_data(batch_first=False))
mod("MultiheadAttention:kdim_no_bias", mha_build(kdim=5, bias=False), mha_data(kdim=5))
mod("MultiheadAttention:per_head_weights",
    mha_build(need_weights=True, add_bias_kv=False),
    mha_data())
mod("MultiheadAttention:no_weights", mha_build(need_weights=False), mha_data())
mod("MultiheadAttention:bias_kv_zero_attn_masks",
    mha_build(batch_first=False, mask=True, add_bias_kv=True, add_zero_attn=True),
    mha_data(batch_first=False))
mod("MultiheadAttention:bias_kv_kdim", mha_build(kdim=5, add_bias_kv=True), mha_data(kdim=5))
add("module:MultiheadAttention:per_head_3d_mask", lambda: facade(
    lambda L, x, m: fixed(L, L.nn.MultiheadAttention(4, 2, batch_first=True))(
        x, x, x, attn_mask=m.detach(), average_attn_weights=False),
    randn(2, 3, 4), randn(4, 3, 3), grad_fn=False))


def _mha_fixed(need_weights):
    """MultiheadAttention with fixed weights on a batch whose second sequence is all padding."""
    def fn(L, x):
        m = L.nn.MultiheadAttention(4, 2, batch_first=True).double()
        with L.no_grad():
            for i, p in enumerate(m.parameters()):
                p.copy_(L.tensor(randn(*p.shape, seed=20 + i)))
        kpm = L.tensor([[False, True, False], [True, True, True]])
        return m(x, x, x, key_padding_mask=kpm, need_weights=need_weights)
    return fn


for _nw in (True, False):
    add(f"module:MultiheadAttention:all_keys_padded:need_weights={_nw}",
        lambda nw=_nw: facade(_mha_fixed(nw), randn(2, 3, 4), grad_fn=False))


def tel(L, **kw):
    return L.nn.TransformerEncoderLayer(4, 2, dim_feedforward=6, dropout=0.0, **kw)


def tr_build(make):
    def build(lib):
        m = make(lib).double()
        return m, lib.optim.SGD(m.parameters(), lr=0.1), \
            lambda model, x, y: lib.nn.functional.mse_loss(model(x), y)
    return build


_TR = [(randn(3, 2, 4, seed=s), randn(3, 2, 4, seed=s + 5)) for s in range(2)]
_TRB = [(randn(2, 3, 4, seed=s), randn(2, 3, 4, seed=s + 5)) for s in range(2)]
mod("TransformerEncoderLayer", tr_build(tel), _TR)
mod("TransformerEncoderLayer:norm_first_gelu_batch_first",
    tr_build(lambda L: tel(L, norm_first=True, activation="gelu", batch_first=True)), _TRB)
mod("TransformerEncoderLayer:f32", lambda L: (lambda m: (
    m, L.optim.SGD(m.parameters(), lr=0.1),
    lambda model, x, y: L.nn.functional.mse_loss(model(x), y)))(tel(L)),
    [tuple(a.astype(np.float32) for a in batch) for batch in _TR])
mod("TransformerEncoder", tr_build(lambda L: L.nn.TransformerEncoder(
    tel(L), 2, norm=L.nn.LayerNorm(4), enable_nested_tensor=False)), _TR)



def tdl(L, **kw):
    return L.nn.TransformerDecoderLayer(4, 2, dim_feedforward=6, dropout=0.0, **kw)


def _causal(L, n):
    return L.nn.Transformer.generate_square_subsequent_mask(n, dtype=L.float64)


def seq2seq_build(make, batch_first=False, masks="padding", call="layer"):
    """build(lib) for train: make(lib) -> a decoder layer, decoder or Transformer run on
    (tgt, memory) or (src, tgt) with a causal tgt_mask and, with masks="padding", key
    padding masks (batch element 1 ignores its last source and target steps); mse to y."""
    def build(lib):
        m = make(lib).double()

        def loss(model, a, b, y):
            n = a.shape[0 if batch_first else 1]
            kw = dict(tgt_mask=_causal(lib, b.shape[1 if batch_first else 0]))
            if masks == "padding":
                pad = lambda t: lib.arange(t.shape[1 if batch_first else 0]).unsqueeze(0) \
                    .expand(n, -1) >= lib.tensor([[t.shape[1 if batch_first else 0]], [2]])
                kw.update(tgt_key_padding_mask=pad(b), memory_key_padding_mask=pad(a))
                if call == "transformer":
                    kw["src_key_padding_mask"] = pad(a)
            elif masks == "causal_hint":
                kw["tgt_is_causal"] = True
                s_len = a.shape[1 if batch_first else 0]
                kw["memory_mask"] = lib.zeros(b.shape[1 if batch_first else 0], s_len,
                                              dtype=lib.float64)
                kw["memory_mask"][0, -1] = float("-inf")
            out = model(a, b, **kw) if call == "transformer" else model(b, a, **kw)
            return lib.nn.functional.mse_loss(out, y)
        return m, lib.optim.SGD(m.parameters(), lr=0.1), loss
    return build


# (memory or src (S=5), tgt (T=3), y); batch 2, d_model 4
_S2S = [(randn(5, 2, 4, seed=s), randn(3, 2, 4, seed=s + 3), randn(3, 2, 4, seed=s + 6))
        for s in range(2)]
_S2SB = [tuple(a.transpose(1, 0, 2).copy() for a in batch) for batch in _S2S]
mod("TransformerDecoderLayer", seq2seq_build(tdl), _S2S)
mod("TransformerDecoderLayer:norm_first_gelu_batch_first_causal_hint", seq2seq_build(
    lambda L: tdl(L, norm_first=True, activation="gelu", batch_first=True), batch_first=True,
    masks="causal_hint"), _S2SB)
mod("TransformerDecoderLayer:callable_activation_no_bias", seq2seq_build(
    lambda L: tdl(L, activation=L.nn.functional.silu, bias=False, layer_norm_eps=1e-3)), _S2S)
mod("TransformerDecoder", seq2seq_build(lambda L: L.nn.TransformerDecoder(
    tdl(L), 2, norm=L.nn.LayerNorm(4))), _S2S)
mod("TransformerDecoder:causal_hint", seq2seq_build(lambda L: L.nn.TransformerDecoder(
    tdl(L), 2), masks="causal_hint"), _S2S)
mod("Transformer", seq2seq_build(lambda L: L.nn.Transformer(
    4, 2, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=6, dropout=0.0),
    call="transformer"), _S2S)
mod("Transformer:batch_first_norm_first_gelu_causal_hint", seq2seq_build(
    lambda L: L.nn.Transformer(4, 2, 1, 1, 6, 0.0, "gelu", batch_first=True, norm_first=True),
    batch_first=True, masks="causal_hint", call="transformer"), _S2SB)


def _word_language_model(L):
    """PyTorch's examples/word_language_model TransformerModel, as written there: a subclass
    of nn.Transformer that replaces `decoder` and runs `self.encoder` with a float causal
    mask (log of a lower triangle of ones)."""
    class PositionalEncoding(L.nn.Module):
        def __init__(self, d_model, dropout=0.1, max_len=50):
            super().__init__()
            self.dropout = L.nn.Dropout(p=dropout)
            pe = L.zeros(max_len, d_model)
            position = L.arange(0, max_len, dtype=L.float).unsqueeze(1)
            div_term = L.exp(L.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
            pe[:, 0::2] = L.sin(position * div_term)
            pe[:, 1::2] = L.cos(position * div_term)
            self.register_buffer("pe", pe.unsqueeze(0).transpose(0, 1))

        def forward(self, x):
            return self.dropout(x + self.pe[:x.size(0), :])

    class TransformerModel(L.nn.Transformer):
        def __init__(self, ntoken, ninp, nhead, nhid, nlayers, dropout=0.5):
            super(TransformerModel, self).__init__(d_model=ninp, nhead=nhead,
                                                   dim_feedforward=nhid,
                                                   num_encoder_layers=nlayers)
            self.model_type = "Transformer"
            self.src_mask = None
            self.pos_encoder = PositionalEncoding(ninp, dropout)
            self.input_emb = L.nn.Embedding(ntoken, ninp)
            self.ninp = ninp
            self.decoder = L.nn.Linear(ninp, ntoken)

        def _generate_square_subsequent_mask(self, sz):
            return L.log(L.tril(L.ones(sz, sz)))

        def forward(self, src, has_mask=True):
            if has_mask:
                if self.src_mask is None or self.src_mask.size(0) != len(src):
                    self.src_mask = self._generate_square_subsequent_mask(len(src)).to(
                        src.device)
            else:
                self.src_mask = None
            src = self.pos_encoder(self.input_emb(src) * math.sqrt(self.ninp))
            output = self.decoder(self.encoder(src, mask=self.src_mask))
            return L.nn.functional.log_softmax(output, dim=-1)

    return TransformerModel


def wlm_build(lib):
    m = _word_language_model(lib)(11, 4, 2, 6, 2).double()
    m.eval()        # dropout off (the layers' 0.1 and the example's 0.5) so both agree
    return m, lib.optim.SGD(m.parameters(), lr=0.5), lambda model, x, y: \
        lib.nn.functional.nll_loss(model(x).view(-1, 11), y.view(-1))


_WLM = [(rng(s).integers(0, 11, (5, 2)), rng(s + 1).integers(0, 11, (5, 2))) for s in range(2)]
mod("Transformer:word_language_model_subclass", wlm_build, _WLM)


def _transformer_api(L):
    nn = L.nn
    t = nn.Transformer(4, 2, 1, 1, 6, dropout=0.0)
    x, y = L.zeros(3, 2, 4), L.zeros(5, 2, 4)
    return {
        "mask": nn.Transformer.generate_square_subsequent_mask(3),
        "mask_f64": t.generate_square_subsequent_mask(2, dtype=L.float64),
        "children": [n for n, _ in t.named_children()],
        "decoder_children": [n for n, _ in t.decoder.layers[0].named_children()],
        "attributes": (t.d_model, t.nhead, t.batch_first, t.decoder.num_layers),
        "batch": _error(lambda: t(x, L.zeros(5, 3, 4))),
        "features": _error(lambda: t(x, L.zeros(5, 2, 3))),
        "activation": _error(lambda: nn.TransformerDecoderLayer(4, 2, activation="tanh")),
        "causal_without_mask": _error(lambda: t(x, y, tgt_is_causal=True)),
        "unbatched": t(x[:, 0], y[:, 0]).shape,
    }


add("module:Transformer:api", lambda: api_case(_transformer_api))

def module_names():
    return sorted(n for n in set(dir(ft.nn)) & set(dir(torch.nn))
                  if not n.startswith("_") and isinstance(getattr(ft.nn, n), type))


# ---------------------------------------------------------------------------------------
# optim: optimizers, gradient clipping, lr schedulers


def small_net(L):
    return L.nn.Sequential(L.nn.Linear(3, 4), L.nn.Tanh(), L.nn.Linear(4, 2)).double()


_OPT_DATA = batches((5, 3), (5, 2), n=3)


def opt_state(o):
    """The optimizer's state_dict with tensors as NumPy and the step counts as floats."""
    sd = o.state_dict()
    state = {}
    for k, v in sd["state"].items():
        state[k] = {n: (float(x) if n == "step" else x) for n, x in v.items()}
    return state, sd["param_groups"]


def opt_case(make, steps=5, data=_OPT_DATA, groups=False, dtype="float64"):
    """Train with the optimizer make(lib, params), then compare its state."""
    opts = {}

    def build(lib):
        m = small_net(lib) if dtype == "float64" else small_net(lib).float()
        params = m.parameters() if not groups else [
            {"params": m[0].parameters()},
            {"params": m[2].parameters(), "lr": 0.02}]
        o = make(lib, params)
        opts[lib.__name__] = o
        return m, o, lambda model, x, y: lib.nn.functional.mse_loss(model(x), y)
    train(build, data, steps)
    fstate, fgroups = opt_state(opts["functrans"])
    tstate, tgroups = opt_state(opts["torch"])
    compare(fstate, tstate, "state_dict['state']", grad_fn=False)
    for i, (fg, tg) in enumerate(zip(fgroups, tgroups)):
        common = set(fg) & set(tg)
        compare({k: fg[k] for k in common}, {k: tg[k] for k in common},
                f"state_dict['param_groups'][{i}]")
        missing = sorted(set(tg) - set(fg))
        if missing:
            raise Mismatch(f"param_groups[{i}] lacks the keys {missing}")


_OPTS = {
    "SGD": lambda L, p: L.optim.SGD(p, lr=0.1),
    "SGD:momentum": lambda L, p: L.optim.SGD(p, lr=0.1, momentum=0.9),
    "SGD:nesterov_weight_decay": lambda L, p: L.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True,
                                                          weight_decay=0.01),
    "SGD:dampening_maximize": lambda L, p: L.optim.SGD(p, lr=0.05, momentum=0.5, dampening=0.3,
                                                       maximize=True),
    "Adam": lambda L, p: L.optim.Adam(p, lr=0.01),
    "Adam:weight_decay_amsgrad": lambda L, p: L.optim.Adam(p, lr=0.01, betas=(0.8, 0.9),
                                                           weight_decay=0.1, amsgrad=True),
    "Adam:maximize": lambda L, p: L.optim.Adam(p, lr=0.01, maximize=True),
    "AdamW": lambda L, p: L.optim.AdamW(p, lr=0.01),
    "AdamW:amsgrad": lambda L, p: L.optim.AdamW(p, lr=0.01, weight_decay=0.1, amsgrad=True,
                                                eps=1e-6),
    "RMSprop": lambda L, p: L.optim.RMSprop(p, lr=0.01),
    "RMSprop:momentum_centered_wd": lambda L, p: L.optim.RMSprop(
        p, lr=0.01, alpha=0.9, momentum=0.5, centered=True, weight_decay=0.1),
    "Adagrad": lambda L, p: L.optim.Adagrad(p, lr=0.1),
    "Adagrad:decay": lambda L, p: L.optim.Adagrad(p, lr=0.1, lr_decay=0.1, weight_decay=0.1,
                                                  initial_accumulator_value=0.2),
    "NAdam": lambda L, p: L.optim.NAdam(p, lr=0.01),
    "NAdam:decoupled": lambda L, p: L.optim.NAdam(p, lr=0.01, weight_decay=0.1,
                                                  momentum_decay=0.01,
                                                  decoupled_weight_decay=True),
    "RAdam": lambda L, p: L.optim.RAdam(p, lr=0.01),
    "RAdam:decoupled": lambda L, p: L.optim.RAdam(p, lr=0.01, weight_decay=0.1,
                                                  decoupled_weight_decay=True),
    "Adamax": lambda L, p: L.optim.Adamax(p, lr=0.01),
    "Adamax:weight_decay": lambda L, p: L.optim.Adamax(p, lr=0.01, weight_decay=0.1),
    "Adadelta": lambda L, p: L.optim.Adadelta(p),
    "Adadelta:rho_eps_weight_decay_maximize": lambda L, p: L.optim.Adadelta(
        p, lr=0.5, rho=0.8, eps=1e-4, weight_decay=0.1, maximize=True),
    "ASGD": lambda L, p: L.optim.ASGD(p, lr=0.05),
    "ASGD:averaging_weight_decay": lambda L, p: L.optim.ASGD(   # mu < 1 from the third step
        p, lr=0.05, lambd=0.01, alpha=0.5, t0=2, weight_decay=0.1, maximize=True),
    "Rprop": lambda L, p: L.optim.Rprop(p, lr=0.01),
    "Rprop:etas_step_sizes_maximize": lambda L, p: L.optim.Rprop(
        p, lr=0.02, etas=(0.3, 1.5), step_sizes=(1e-3, 0.03), maximize=True),
    "Adafactor": lambda L, p: L.optim.Adafactor(p, lr=0.05),
    "Adafactor:eps_d_weight_decay": lambda L, p: L.optim.Adafactor(
        p, lr=0.6, beta2_decay=-0.5, eps=(1e-6, 1e-2), d=1.5, weight_decay=0.1),
}
for _name, _make in _OPTS.items():
    add(f"optim:{_name}", lambda m=_make, n=7 if "RAdam" in _name else 5: opt_case(m, steps=n))
add("optim:SGD:param_groups", lambda: opt_case(_OPTS["SGD:momentum"], groups=True))
_OPT_DATA32 = [tuple(a.astype(np.float32) for a in batch) for batch in _OPT_DATA]
for _name in ("SGD:nesterov_weight_decay", "Adam:weight_decay_amsgrad", "AdamW", "RMSprop",
              "Adagrad:decay", "NAdam", "RAdam", "Adamax"):
    add(f"optim:{_name}:f32", lambda m=_OPTS[_name], n=7 if "RAdam" in _name else 5: opt_case(
        m, steps=n, data=_OPT_DATA32, dtype="float32"))
add("optim:Adam:param_groups", lambda: opt_case(_OPTS["Adam"], groups=True))
for _name in ("Adadelta", "ASGD", "Rprop", "Adafactor"):
    add(f"optim:{_name}:param_groups", lambda m=_OPTS[_name]: opt_case(m, groups=True))


def _scalars(x):
    """A state value with its 0-d tensors and numbers as 0-d float64 arrays (PyTorch's LBFGS
    keeps its step t and curvature scalars as a float or a 0-d tensor depending on the path
    taken), compared with the tolerances of arrays."""
    if isinstance(x, (list, tuple)):
        return [_scalars(v) for v in x]
    if isinstance(x, (int, float)) and not isinstance(x, bool) or getattr(x, "ndim", 1) == 0:
        return np.asarray(float(x))
    return x


def _lbfgs_run(L, make, steps, data, reload=False):
    """steps calls of step(closure) of make(L, params) on small_net from fixed weights: the
    losses step returns, the parameters after each, and the final state. reload: each step
    runs on a fresh optimizer loaded from the previous one's state_dict."""
    m = small_net(L)
    with L.no_grad():
        for i, p in enumerate(m.parameters()):
            p.copy_(L.tensor(randn(*p.shape, seed=10 + i)))
    o = make(L, m.parameters())
    out = []
    for k in range(steps):
        if reload:
            previous, o = o, make(L, m.parameters())
            o.load_state_dict(previous.state_dict())
        x, y = (L.tensor(a) for a in data[k % len(data)])

        def closure():
            o.zero_grad()
            loss = L.nn.functional.mse_loss(m(x), y)
            loss.backward()
            return loss
        out.append((o.step(closure), [p.detach().clone() for p in m.parameters()]))
    state = {k: _scalars(v) for k, v in o.state_dict()["state"][0].items()}
    return out, state, o.state_dict()["param_groups"]


def lbfgs_case(make, steps=3, reload=False):
    """Up to 12 iterations a step, each taking or not a branch on the values: rounding
    (summation order) grows to about 1e-9 relative, hence rtol=1e-7."""
    ours, theirs = (_lbfgs_run(L, make, steps, _OPT_DATA, reload) for L in (ft, torch))
    compare(ours, theirs, "LBFGS", grad_fn=False, rtol=1e-7, atol=1e-10)


_LBFGS = {
    "LBFGS": lambda L, p: L.optim.LBFGS(p),
    "LBFGS:history_lr": lambda L, p: L.optim.LBFGS(p, lr=0.5, max_iter=7, history_size=3,
                                                   tolerance_change=1e-12),
    "LBFGS:strong_wolfe": lambda L, p: L.optim.LBFGS(p, max_iter=6, history_size=4,
                                                     line_search_fn="strong_wolfe"),
    "LBFGS:strong_wolfe_max_eval": lambda L, p: L.optim.LBFGS(
        p, lr=3.0, max_iter=10, max_eval=8, line_search_fn="strong_wolfe"),
    # steps too long: the zoom, with trial steps pushed away from the bracket's ends
    "LBFGS:strong_wolfe_zoom": lambda L, p: L.optim.LBFGS(p, lr=100.0, max_iter=12,
                                                          line_search_fn="strong_wolfe"),
    # steps too short: extrapolation, up to the line search's budget of evaluations
    "LBFGS:strong_wolfe_extrapolate": lambda L, p: L.optim.LBFGS(
        p, lr=0.01, max_iter=8, line_search_fn="strong_wolfe"),
}
for _name, _make in _LBFGS.items():     # the defaults' 20 iterations a step on this tanh net
    # amplify rounding (summation order) past 1e-9 relative from the second step: one step
    add(f"optim:{_name}", lambda m=_make, n=1 if _name == "LBFGS" else 3: lbfgs_case(m, n))
add("optim:LBFGS:load_state_dict", lambda: lbfgs_case(_LBFGS["LBFGS:strong_wolfe"], reload=True))


def _custom_optimizer(L):
    """A PyTorch-style optimizer written as users write them: `self.state[p]` starts as an
    empty dict (Optimizer.state is a defaultdict(dict))."""
    class HeavyBall(L.optim.Optimizer):
        def __init__(self, params, lr=0.1, momentum=0.5):
            super().__init__(params, dict(lr=lr, momentum=momentum))

        @L.no_grad()
        def step(self, closure=None):
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    state = self.state[p]
                    if "velocity" not in state:
                        state["velocity"] = L.zeros_like(p)
                    state["velocity"].mul_(group["momentum"]).add_(p.grad)
                    p.add_(state["velocity"], alpha=-group["lr"])
    return HeavyBall


def _custom_optimizer_state(L):
    """The custom optimizer's state: the defaultdict's type and default, and a state_dict
    that a fresh optimizer loads and continues from."""
    w = L.nn.Parameter(L.tensor([1.0, -2.0], dtype=L.float64))
    o = _custom_optimizer(L)([w])
    out = {"type": type(o.state).__mro__[-3].__name__, "unseen": dict(o.state[w])}
    for _ in range(2):
        o.zero_grad()
        (w * w * w).sum().backward()
        o.step()
    o2 = _custom_optimizer(L)([w], lr=0.5)
    o2.load_state_dict(o.state_dict())
    o2.zero_grad()
    (w * w).sum().backward()
    o2.step()
    out["loaded"] = (w.detach().clone(), o2.state_dict()["state"][0]["velocity"],
                     o2.param_groups[0]["lr"], type(o2.state).__mro__[-3].__name__)
    return out


add("optim:Optimizer:custom_subclass", lambda: opt_case(
    lambda L, p: _custom_optimizer(L)(p, lr=0.05, momentum=0.9)))
add("optim:Optimizer:custom_subclass_state", lambda: api_case(_custom_optimizer_state))


def _sparse_adam_dense(L):
    w = L.nn.Parameter(L.ones(3, dtype=L.float64))
    o = L.optim.SparseAdam([w], lr=0.1)
    (w * w).sum().backward()
    o.step()


add("optim:SparseAdam:dense_gradients", lambda: oracle.check_error(   # refused, with Adam named
    oracle._attempt(_sparse_adam_dense, ft), oracle._attempt(_sparse_adam_dense, torch),
    r"dense gradients.*Adam|Adam.*dense gradients"))


def _clip_run(L, clip, seed=0):
    m = small_net(L)
    with L.no_grad():
        for i, p in enumerate(m.parameters()):
            p.copy_(L.tensor(randn(*p.shape, seed=seed + i)))
    x, y = (L.tensor(a) for a in _OPT_DATA[0])
    L.nn.functional.mse_loss(m(x), y).backward()
    ret = clip(L, m.parameters())
    return ret, [p.grad for p in m.parameters()]


def clip_case(clip, error=None):
    t = oracle._attempt(_clip_run, torch, clip)
    f = oracle._attempt(_clip_run, ft, clip)
    if isinstance(t, BaseException) or error:
        oracle.check_error(f, t, error)
        return
    compare(f, t, "clip", grad_fn=False)


_CLIPS = {
    "clip_grad_norm_": lambda L, p: L.nn.utils.clip_grad_norm_(p, 0.5),
    "clip_grad_norm_:inf": lambda L, p: L.nn.utils.clip_grad_norm_(p, 0.1, norm_type="inf"),
    "clip_grad_norm_:l1": lambda L, p: L.nn.utils.clip_grad_norm_(p, 0.1, norm_type=1),
    "clip_grad_norm_:no_clip": lambda L, p: L.nn.utils.clip_grad_norm_(p, 1e6),
    "clip_grad_value_": lambda L, p: L.nn.utils.clip_grad_value_(p, 0.05),
}
for _name, _clip in _CLIPS.items():
    add(f"optim:{_name}", lambda c=_clip: clip_case(c))


def _clip_nonfinite(L, p):
    p = list(p)
    p[0].grad[0, 0] = float("inf")
    return L.nn.utils.clip_grad_norm_(p, 1.0, error_if_nonfinite=True)


def _clip_inf_quiet(L, p):
    p = list(p)
    p[0].grad[0, 0] = float("inf")
    return L.nn.utils.clip_grad_norm_(p, 1.0)


def _clip_single_and_none(L, p):
    p = list(p)
    p[1].grad = None
    return (L.nn.utils.clip_grad_norm_(p[0], 0.1, foreach=True),
            L.nn.utils.clip_grad_norm_(p, 0.2, norm_type=3.0))


add("optim:clip_grad_norm_:nonfinite_no_error", lambda: clip_case(_clip_inf_quiet))
add("optim:clip_grad_norm_:single_tensor_and_none_grad",
    lambda: clip_case(_clip_single_and_none))
add("optim:clip_grad_norm_:nonfinite",
    lambda: clip_case(_clip_nonfinite, error="is non-finite, so it cannot be clipped"))


def sched_case(make, epochs=12, opt=None, metrics=None):
    """The lr (and momentum where a scheduler sets it) of each group after each epoch."""
    def run(L):
        p = L.nn.Parameter(L.zeros(2))
        q = L.nn.Parameter(L.zeros(2))
        o = (opt or (lambda L, ps: L.optim.SGD(ps, lr=0.1, momentum=0.9)))(
            L, [{"params": [p]}, {"params": [q], "lr": 0.05}])
        s = make(L, o)
        seq = [[g["lr"] for g in o.param_groups]]
        for e in range(epochs):
            o.step()
            s.step(metrics[e]) if metrics else s.step()
            seq.append([g["lr"] for g in o.param_groups])
            seq.append(s.get_last_lr() if hasattr(s, "get_last_lr") else None)
            if "momentum" in o.defaults:
                seq.append([g.get("momentum", g.get("betas")) for g in o.param_groups])
        return seq, s.last_epoch if hasattr(s, "last_epoch") else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = oracle._attempt(run, torch)
        f = oracle._attempt(run, ft)
    if isinstance(t, BaseException):
        oracle.check_error(f, t, None)
        return
    compare(f, t, "lr sequence")


_SCHEDS = {
    "LambdaLR": lambda L, o: L.optim.lr_scheduler.LambdaLR(o, lambda e: 0.9 ** e),
    "LambdaLR:per_group": lambda L, o: L.optim.lr_scheduler.LambdaLR(
        o, [lambda e: 1 / (e + 1), lambda e: 0.5 ** e]),
    "MultiplicativeLR": lambda L, o: L.optim.lr_scheduler.MultiplicativeLR(o, lambda e: 0.95),
    "StepLR": lambda L, o: L.optim.lr_scheduler.StepLR(o, 3, gamma=0.5),
    "MultiStepLR": lambda L, o: L.optim.lr_scheduler.MultiStepLR(o, [2, 5, 5, 9], gamma=0.3),
    "ConstantLR": lambda L, o: L.optim.lr_scheduler.ConstantLR(o, factor=0.5, total_iters=4),
    "LinearLR": lambda L, o: L.optim.lr_scheduler.LinearLR(o, start_factor=0.2, end_factor=0.9,
                                                           total_iters=6),
    "ExponentialLR": lambda L, o: L.optim.lr_scheduler.ExponentialLR(o, gamma=0.8),
    "CosineAnnealingLR": lambda L, o: L.optim.lr_scheduler.CosineAnnealingLR(o, T_max=5,
                                                                             eta_min=0.01),
    "SequentialLR": lambda L, o: L.optim.lr_scheduler.SequentialLR(
        o, [L.optim.lr_scheduler.LinearLR(o, 0.1, total_iters=3),
            L.optim.lr_scheduler.ExponentialLR(o, 0.7)], milestones=[4]),
    "OneCycleLR": lambda L, o: L.optim.lr_scheduler.OneCycleLR(o, max_lr=[1.0, 0.5],
                                                               total_steps=13),
    "OneCycleLR:linear_three_phase": lambda L, o: L.optim.lr_scheduler.OneCycleLR(
        o, max_lr=0.3, epochs=3, steps_per_epoch=5, anneal_strategy="linear",
        three_phase=True, pct_start=0.4),
}
for _name, _make in _SCHEDS.items():
    add(f"optim:lr_scheduler:{_name}", lambda m=_make: sched_case(m))
add("optim:lr_scheduler:OneCycleLR:adam", lambda: sched_case(
    _SCHEDS["OneCycleLR"], opt=lambda L, ps: L.optim.Adam(ps, lr=0.1)))
_PLATEAU = [1.0, 0.9, 0.9, 0.9, 0.95, 0.8, 0.8, 0.8, 0.8, 0.8, 0.7, 0.7]
add("optim:lr_scheduler:ReduceLROnPlateau", lambda: sched_case(
    lambda L, o: L.optim.lr_scheduler.ReduceLROnPlateau(o, factor=0.5, patience=1,
                                                        threshold=0.01),
    metrics=_PLATEAU))
add("optim:lr_scheduler:ReduceLROnPlateau:max_cooldown", lambda: sched_case(
    lambda L, o: L.optim.lr_scheduler.ReduceLROnPlateau(o, mode="max", factor=0.1, patience=0,
                                                        cooldown=2, min_lr=[1e-3, 1e-4],
                                                        threshold_mode="abs"),
    metrics=[-v for v in _PLATEAU]))


# the Module, Optimizer and LRScheduler APIs by behaviour: containers' edits, shared
# parameters, load_state_dict's report, modes, zero_grad; optimizers' groups, state
# types, repr and argument errors; schedulers chained, past their period, state_dict keys
def _names(mods):
    return [type(m).__name__ for m in mods]


def _error(fn):
    """(type name, message head) of what fn() raises, or 'ok' (ft.Size printed as torch's)."""
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the error is the result being compared
        return type(e).__name__, str(e).replace("ft.Size", "torch.Size")[:120]
    return "ok"


def _module_api(L):
    nn, out = L.nn, {}
    s = nn.Sequential(nn.Linear(2, 3), nn.ReLU())
    s.append(nn.Tanh())
    s.insert(1, nn.Sigmoid())
    s.extend([nn.Identity()])
    out["seq"] = _names(s)
    del s[0]
    out["seq_del"] = _names(s), list(s._modules)
    out["seq_pop"] = type(s.pop(1)).__name__, list(s._modules)
    ml = nn.ModuleList([nn.ReLU(), nn.Tanh()])
    ml.insert(1, nn.Sigmoid())
    ml += [nn.Identity()]
    out["ml"] = _names(ml), list(ml._modules), _names(ml[-2:])
    md = nn.ModuleDict({"b": nn.ReLU()})
    md.update([("a", nn.Tanh())])
    md.update({"d": nn.ReLU(), "c": nn.ReLU()})
    out["md"] = list(md.keys()), type(md.pop("a")).__name__, list(md)
    pl = nn.ParameterList([L.ones(1)])
    pl.extend([L.zeros(2)])
    pl.append(L.ones(3))
    out["pl"] = [tuple(p.shape) for p in pl], _names(pl)
    lin = nn.Linear(2, 2)
    shared = nn.Sequential(lin, nn.ReLU(), lin)
    out["shared"] = ([n for n, _ in shared.named_parameters()],
                     [n for n, _ in shared.named_parameters(remove_duplicate=False)],
                     list(shared.state_dict()))
    out["named_modules"] = [n for n, _ in shared.named_modules()]
    out["prefix"] = [n for n, _ in shared.named_parameters(prefix="net")]
    out["get_submodule"] = type(shared.get_submodule("1")).__name__
    out["get_parameter"] = tuple(shared.get_parameter("0.weight").shape)
    bn = nn.BatchNorm1d(2)
    r = bn.load_state_dict({"weight": L.ones(2), "bias": L.zeros(2), "extra": L.ones(1)},
                           strict=False)
    out["load"] = sorted(r.missing_keys), sorted(r.unexpected_keys)
    out["load_shape"] = _error(lambda: bn.load_state_dict({"weight": L.ones(3)}, strict=False))
    out["load_strict"] = _error(lambda: bn.load_state_dict({"weight": L.ones(2)}))
    m = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.1))
    m.eval()
    out["eval"] = [x.training for x in m.modules()]
    m.train()
    out["train"] = [x.training for x in m.modules()]
    m.requires_grad_(False)
    out["requires_grad_"] = [p.requires_grad for p in m.parameters()]
    seen = []
    m.apply(lambda x: seen.append(type(x).__name__))
    out["apply"] = seen
    lin = nn.Linear(2, 1)
    lin(L.ones(1, 2)).sum().backward()
    lin.zero_grad(set_to_none=False)
    out["zero_grad"] = [p.grad.tolist() for p in lin.parameters()]
    lin.zero_grad()
    out["zero_grad_none"] = [p.grad for p in lin.parameters()]
    out["children"] = _names(nn.TransformerEncoderLayer(4, 2, 8).children())
    out["keys_tel"] = list(nn.TransformerEncoderLayer(4, 2, 8).state_dict())
    out["keys_mha_kdim"] = list(nn.MultiheadAttention(4, 2, kdim=3, vdim=5).state_dict())
    out["keys_lstm"] = list(nn.LSTM(2, 3, proj_size=2, bidirectional=True).state_dict())
    out["keys_embedding"] = list(nn.Embedding(3, 2).state_dict())
    out["buffers_bn"] = [(n, tuple(b.shape), oracle.dtype_name(b.dtype))
                         for n, b in nn.BatchNorm2d(2).named_buffers()]
    bn = nn.BatchNorm1d(2)
    bn(L.randn(3, 2))
    out["num_batches_tracked"] = int(bn.num_batches_tracked)
    out["parameter_repr"] = repr(nn.Parameter(L.tensor([1.0, 2.0]))).replace("ft.", "torch.")
    out["keep_vars"] = _names(nn.Linear(1, 1).state_dict(keep_vars=True).values())
    out["state_types"] = _names(nn.Linear(1, 1).state_dict().values())
    return out


def _optimizer_api(L):
    out = {}
    w = L.nn.Parameter(L.tensor([1.0, -2.0], dtype=L.float64))
    b = L.nn.Parameter(L.tensor([0.5], dtype=L.float64))
    o = L.optim.SGD([w], lr=0.1, momentum=0.9)
    for i in range(3):
        o.zero_grad()
        ((w * w).sum() + (b * 3).sum()).backward()
        o.step()
        if i == 0:
            o.add_param_group({"params": [b], "lr": 0.01})
    out["add_param_group"] = (w.tolist(), b.tolist(),
                              [sorted(k for k in g if k != "params") for g in o.param_groups])
    o = L.optim.Adam([w], lr=0.1)
    o.zero_grad()
    (w * w).sum().backward()
    o.step()
    state = o.state_dict()["state"][0]
    out["adam_state"] = {k: oracle.dtype_name(v.dtype) for k, v in state.items()}
    out["adam_step"] = type(state["step"]).__name__, tuple(state["step"].shape)
    o.zero_grad()
    out["zero_grad_default"] = w.grad
    o2 = L.optim.SGD([w], lr=0.1)
    out["repr"] = repr(o2)
    out["defaults"] = sorted(o2.defaults)
    out["negative_lr"] = _error(lambda: L.optim.SGD([w], lr=-1))
    out["nesterov"] = _error(lambda: L.optim.SGD([w], lr=0.1, nesterov=True))
    out["betas"] = _error(lambda: L.optim.Adam([w], betas=(1.0, 0.9)))
    return out


def _lrs(L, make, epochs, metrics=None):
    """The lr after each epoch of the scheduler(s) make(optimizer) on SGD(lr=1)."""
    o = L.optim.SGD([L.nn.Parameter(L.zeros(1))], lr=1.0)
    scheds = make(o)
    seq = []
    for e in range(epochs):
        o.step()
        for s in scheds:
            s.step(metrics[e]) if metrics else s.step()
        seq.append(o.param_groups[0]["lr"])
    return seq, [sorted(s.state_dict()) for s in scheds]


def _scheduler_api(L):
    S = L.optim.lr_scheduler
    return {
        "chained": _lrs(L, lambda o: [S.ExponentialLR(o, 0.9), S.StepLR(o, 2, 0.5)], 6),
        "cosine_past_T_max": _lrs(L, lambda o: [S.CosineAnnealingLR(o, 3)], 10),
        "linear_no_iters": _lrs(L, lambda o: [S.LinearLR(o, 0.5, total_iters=0)], 2),
        "multistep_repeated": _lrs(L, lambda o: [S.MultiStepLR(o, [1, 1, 3], 0.5)], 5),
        "plateau_eps_min_lr": _lrs(L, lambda o: [S.ReduceLROnPlateau(
            o, patience=0, eps=0.3, factor=0.5, min_lr=0.2)], 6, [1, 2, 3, 4, 5, 6]),
        "resume_without_initial_lr": _error(lambda: S.StepLR(
            L.optim.SGD([L.nn.Parameter(L.zeros(1))], lr=1.0), 2, last_epoch=3)),
    }


def api_case(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours, theirs = fn(ft), fn(torch)
    compare(ours, theirs, fn.__name__, grad_fn=False)


add("module:Module:api", lambda: api_case(_module_api))
add("optim:Optimizer:api", lambda: api_case(_optimizer_api))
add("optim:lr_scheduler:LRScheduler:api", lambda: api_case(_scheduler_api))


def optimizer_names():
    return sorted(n for n in set(dir(ft.optim)) & set(dir(torch.optim))
                  if not n.startswith("_") and isinstance(getattr(ft.optim, n), type))


def scheduler_names():
    L, T = ft.optim.lr_scheduler, torch.optim.lr_scheduler
    return sorted(n for n in set(dir(L)) & set(dir(T)) if not n.startswith("_")
                  and isinstance(getattr(L, n), type) and issubclass(getattr(L, n), L.LRScheduler)
                  and getattr(L, n) is not L.LRScheduler)


# ---------------------------------------------------------------------------------------
# what PyTorch's image examples add (dcgan, super-resolution, style transfer): transposed
# convolutions, fold/unfold, resampling, pixel shuffle, instance norm, channel dropout

both("conv_transpose2d", lambda L, x, w, b: F(L).conv_transpose2d(x, w, b, stride=2, padding=1),
     lambda dt: (randn(2, 4, 5, 6, dtype=dt), randn(4, 3, 4, 4, dtype=dt, seed=1),
                 randn(3, dtype=dt, seed=2)))
one("conv_transpose2d:output_padding_groups_dilation",
    lambda L, x, w: F(L).conv_transpose2d(x, w, None, (2, 3), (2, 1), (1, 2), 2, (2, 1)),
    randn(2, 4, 5, 6), randn(4, 1, 3, 2, seed=1))
one("conv_transpose2d:grad_of_grad", lambda L, x, w: (L.autograd.grad(
    (F(L).conv_transpose2d(x, w, stride=2, padding=1, output_padding=1) ** 2).sum(), x,
    create_graph=True)[0] ** 2).sum(), randn(2, 3, 4, 3), randn(3, 2, 3, 3, seed=1))
one("conv_transpose2d:unbatched", lambda L, x, w: F(L).conv_transpose2d(x, w), randn(4, 3, 3),
    randn(4, 2, 2, 2, seed=1))
one("conv_transpose2d:channels", lambda L, x, w: F(L).conv_transpose2d(x, w), randn(1, 5, 3, 3),
    randn(4, 2, 2, 2, seed=1), error=r"Given transposed=1, weight of size \[4, 2, 2, 2\], "
    r"expected input\[1, 5, 3, 3\] to have 4 channels, but got 5 channels instead")
one("conv_transpose2d:output_padding", lambda L, x, w: F(L).conv_transpose2d(
    x, w, output_padding=1), randn(1, 4, 3, 3), randn(4, 2, 2, 2, seed=1),
    error="output padding must be smaller than either stride or dilation")
both("conv_transpose1d", lambda L, x, w, b: F(L).conv_transpose1d(x, w, b, stride=3, padding=1,
                                                                  output_padding=2),
     lambda dt: (randn(2, 4, 7, dtype=dt), randn(4, 3, 3, dtype=dt, seed=1),
                 randn(3, dtype=dt, seed=2)))
one("conv_transpose1d:groups_dilation", lambda L, x, w: F(L).conv_transpose1d(
    x, w, groups=2, dilation=2), randn(4, 7), randn(4, 2, 5, seed=1))
both("unfold", lambda L, x: F(L).unfold(x, (2, 3), dilation=(1, 2), padding=1, stride=(2, 1)),
     lambda dt: (randn(2, 3, 5, 6, dtype=dt),))
one("unfold:unbatched", lambda L, x: F(L).unfold(x, 2), randn(3, 4, 4))
one("unfold:5d", lambda L, x: F(L).unfold(x, 2), randn(1, 1, 3, 4, 4),
    error=r"Expected 3D or 4D \(batch mode\) tensor .* but got: \[1, 1, 3, 4, 4\]")
one("unfold:too_small", lambda L, x: F(L).unfold(x, 4), randn(1, 2, 3, 3),
    error=r"calculated shape of the array of sliding blocks as \(0, 0\), but its components "
          "must be at least one")
one("fold:4d", lambda L, x: F(L).fold(x, 4, 2), randn(1, 1, 8, 4),
    error=r"Expected 2D or 3D \(batch mode\) tensor .* but got: \[1, 1, 8, 4\]")
one("fold:kernel", lambda L, x: F(L).fold(x, 4, 2), randn(1, 7, 4),
    error=r"divisible by the product of kernel_size, but got input.size\(1\)=7 and "
          r"kernel_size=\(2, 2\)")
both("fold", lambda L, x: F(L).fold(x, (5, 6), (2, 3), dilation=(1, 2), padding=1,
                                    stride=(2, 1)), lambda dt: (randn(2, 18, 12, dtype=dt),))
one("fold:unbatched", lambda L, x: F(L).fold(x, 4, 2, stride=2), randn(8, 4))
one("fold:blocks", lambda L, x: F(L).fold(x, 4, 2), randn(1, 8, 5),
    error="expected size of input's dimension 2 to match the calculated number of sliding "
          "blocks 3 \\* 3 = 9, but got input.size\\(2\\)=5")
for _tag, _kw in (("nearest:scale", dict(scale_factor=2)), ("nearest:size", dict(size=(7, 9))),
                  ("nearest:fractional", dict(scale_factor=(0.6, 2.3))),
                  ("nearest_exact", dict(scale_factor=(0.6, 2.3), mode="nearest-exact")),
                  ("bilinear", dict(scale_factor=1.7, mode="bilinear")),
                  ("bilinear:align_corners", dict(size=(4, 11), mode="bilinear",
                                                  align_corners=True)),
                  ("bilinear:size", dict(size=(4, 11), mode="bilinear")),
                  ("bilinear:recompute", dict(scale_factor=1.5, mode="bilinear",
                                              recompute_scale_factor=True)),
                  ("area", dict(size=(3, 3), mode="area"))):
    both(f"interpolate:{_tag}", lambda L, x, kw=_kw: F(L).interpolate(x, **kw),
         lambda dt: (randn(2, 3, 5, 6, dtype=dt),))
one("interpolate:linear", lambda L, x: F(L).interpolate(x, size=8, mode="linear"), randn(2, 3, 5))
one("interpolate:linear_align", lambda L, x: F(L).interpolate(x, 3, mode="linear",
                                                              align_corners=True), randn(1, 2, 5))
one("interpolate:trilinear", lambda L, x: F(L).interpolate(x, scale_factor=2, mode="trilinear"),
    randn(1, 2, 3, 2, 4))
one("interpolate:nearest_1d", lambda L, x: F(L).interpolate(x, scale_factor=2.5), randn(2, 3, 5))
for _tag, _kw, _pattern in (
        ("both", dict(size=3, scale_factor=2), "only one of size or scale_factor should be "
                                               "defined"),
        ("neither", {}, "either size or scale_factor should be defined"),
        ("align_nearest", dict(scale_factor=2, align_corners=True),
         "align_corners option can only be set with the interpolating modes"),
        ("linear_4d", dict(scale_factor=2, mode="linear"),
         "Got 4D input, but linear mode needs 3D input"),
        ("size_dims", dict(size=(3,)), "Input and output must have the same number of spatial "
                                       "dimensions")):
    one(f"interpolate:error:{_tag}", lambda L, x, kw=_kw: F(L).interpolate(x, **kw),
        randn(1, 2, 5, 6), error=_pattern)
one("upsample", lambda L, x: F(L).upsample(x, scale_factor=2, mode="bilinear",
                                           align_corners=False), randn(1, 2, 3, 4))
both("pixel_shuffle", lambda L, x: F(L).pixel_shuffle(x, 2),
     lambda dt: (randn(2, 8, 3, 4, dtype=dt),))
one("pixel_shuffle:channels", lambda L, x: F(L).pixel_shuffle(x, 2), randn(1, 5, 2, 2),
    error="pixel_shuffle expects its input's 'channel' dimension to be divisible by the square "
          "of upscale_factor, but input.size.-3.=5 is not divisible by 4")
both("pixel_unshuffle", lambda L, x: F(L).pixel_unshuffle(x, 2),
     lambda dt: (randn(3, 2, 4, 6, dtype=dt),))
# (the full tables of these are tests/oracle/test_oracle_grid_ctc.py's)
both("grid_sample", lambda L, x, g: F(L).grid_sample(x, g, align_corners=False),
     lambda dt: (randn(2, 3, 4, 5, dtype=dt), np.tanh(randn(2, 3, 2, 2, dtype=dt, seed=1))))
both("affine_grid", lambda L, t: F(L).affine_grid(t, (2, 3, 4, 5), align_corners=True),
     lambda dt: (randn(2, 2, 3, dtype=dt),))
both("ctc_loss", lambda L, x: F(L).ctc_loss(x.log_softmax(2), L.tensor([[1, 2], [3, 3]]),
                                            [6, 5], [2, 2]),
     lambda dt: (randn(6, 2, 4, dtype=dt),))
add("module:CTCLoss:sum", lambda: facade(
    lambda L, x: L.nn.CTCLoss(blank=3, reduction="sum")(x.log_softmax(2),
                                                        L.tensor([[1, 2], [0, 0]]), [6, 5],
                                                        [2, 1]), randn(6, 2, 4)))
add("module:DataParallel:forward", lambda: facade(
    lambda L, x: L.nn.DataParallel(L.nn.Softmax(dim=1))(x), randn(4, 3)))
both("instance_norm", lambda L, x, w, b: F(L).instance_norm(x, weight=w, bias=b),
     lambda dt: (randn(2, 3, 4, 5, dtype=dt), randn(3, dtype=dt, seed=1),
                 randn(3, dtype=dt, seed=2)))


def _instance_running(L, x):
    rm, rv = L.zeros(3, dtype=L.float64), L.ones(3, dtype=L.float64)
    y = F(L).instance_norm(x, rm, rv, momentum=0.3)
    return y, F(L).instance_norm(x, rm, rv, use_input_stats=False), rm, rv


one("instance_norm:running_stats", _instance_running, randn(2, 3, 4, 5))
one("instance_norm:1d", lambda L, x: F(L).instance_norm(x), randn(2, 3, 7))
for _name, _x in (("dropout1d", randn(2, 3, 4)), ("dropout2d", randn(2, 3, 4, 5)),
                  ("dropout3d", randn(2, 3, 2, 2, 2))):
    one(f"{_name}:p0", lambda L, x, n=_name: getattr(F(L), n)(x, p=0.0), _x)
    one(f"{_name}:eval", lambda L, x, n=_name: getattr(F(L), n)(x, 0.5, training=False), _x)
    one(f"{_name}:p1", lambda L, x, n=_name: getattr(F(L), n)(x, p=1.0), _x)
    one(f"{_name}:bad_p", lambda L, x, n=_name: getattr(F(L), n)(x, p=-0.1), _x,
        error="dropout probability has to be between 0 and 1, but got -0.1")


def dropout2d_channels_case():
    """Training-mode dropout2d zeroes whole channels and scales the kept ones by 1/(1-p);
    about p of the channels go (the stream is ours, so this checks the law, not values)."""
    ft.manual_seed(0)
    x = ft.ones(64, 32, 3, 3)
    y = FF.dropout2d(x, p=0.25).numpy()
    per_channel = y.reshape(64, 32, 9)
    assert np.all((per_channel == 0).all(-1) | np.isclose(per_channel, 1 / 0.75).all(-1))
    assert abs((per_channel[..., 0] == 0).mean() - 0.25) < 0.03


add("functional:dropout2d:channels", dropout2d_channels_case)


def dcgan_generator(L):
    """dcgan/main.py's generator at a small size: ConvTranspose2d -> BatchNorm -> ReLU,
    ending in Tanh (the layers and arguments of the example)."""
    return L.nn.Sequential(
        L.nn.ConvTranspose2d(6, 8, 4, 1, 0, bias=False), L.nn.BatchNorm2d(8), L.nn.ReLU(True),
        L.nn.ConvTranspose2d(8, 4, 4, 2, 1, bias=False), L.nn.BatchNorm2d(4), L.nn.ReLU(True),
        L.nn.ConvTranspose2d(4, 3, 4, 2, 1, bias=False), L.nn.Tanh())


mod("ConvTranspose2d", mse_build(dcgan_generator), batches((3, 6, 1, 1), (3, 3, 16, 16)))
mod("ConvTranspose2d:groups_output_padding", mse_build(lambda L: L.nn.Sequential(
    L.nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2,
                         dilation=1), L.nn.Tanh())), batches((2, 4, 3, 3), (2, 6, 6, 6)))
mod("ConvTranspose1d", mse_build(lambda L: L.nn.Sequential(
    L.nn.ConvTranspose1d(3, 4, 3, stride=2, padding=1, output_padding=1), L.nn.Tanh())),
    batches((2, 3, 5), (2, 4, 10)))
mod("Fold", mse_build(lambda L: L.nn.Sequential(L.nn.Linear(4, 4), L.nn.Fold((3, 3), 2))),
    batches((2, 8, 4), (2, 2, 3, 3)))
mod("Unfold", mse_build(lambda L: L.nn.Sequential(L.nn.Conv2d(2, 2, 1), L.nn.Unfold(2, padding=1,
                                                                                   stride=2))),
    batches((2, 2, 4, 4), (2, 8, 9)))
mod("Upsample", mse_build(lambda L: L.nn.Sequential(
    L.nn.Conv2d(2, 3, 3, padding=1), L.nn.Upsample(scale_factor=2, mode="bilinear",
                                                   align_corners=False),
    L.nn.Upsample(size=(11, 9)))), batches((2, 2, 4, 3), (2, 3, 11, 9)))
mod("UpsamplingNearest2d", mse_build(lambda L: L.nn.Sequential(
    L.nn.Conv2d(2, 3, 1), L.nn.UpsamplingNearest2d(scale_factor=2))),
    batches((2, 2, 3, 3), (2, 3, 6, 6)))
mod("UpsamplingBilinear2d", mse_build(lambda L: L.nn.Sequential(
    L.nn.Conv2d(2, 3, 1), L.nn.UpsamplingBilinear2d(size=(5, 7)))),
    batches((2, 2, 3, 3), (2, 3, 5, 7)))
mod("PixelUnshuffle", mse_build(lambda L: L.nn.Sequential(
    L.nn.Conv2d(2, 3, 3, padding=1), L.nn.PixelUnshuffle(2))), batches((2, 2, 4, 6),
                                                                      (2, 12, 2, 3)))
mod("PixelShuffle", mse_build(lambda L: L.nn.Sequential(
    L.nn.Conv2d(2, 12, 3, padding=1), L.nn.PixelShuffle(2), L.nn.PixelUnshuffle(2))),
    batches((2, 2, 3, 3), (2, 12, 3, 3)))


def _instance_norm_build(cls, **kw):
    def build(lib):
        m = lib.nn.Sequential(lib.nn.Conv2d(2, 3, 3, padding=1) if cls.endswith("2d") else
                              lib.nn.Conv1d(2, 3, 3, padding=1), getattr(lib.nn, cls)(3, **kw))
        return mse_build(lambda L: m)(lib)
    return build


def _instance_state(build, data):
    """InstanceNorm with tracked statistics: 3 training steps, then the state_dicts and an
    eval-mode forward (which reads the running statistics)."""
    def case():
        oracle.train(build, data, 3)
        torch.manual_seed(0)
        tm, _, _ = build(torch)
        fm, _, _ = build(ft)
        oracle.copy_weights(tm, fm)
        for m, L in ((tm, torch), (fm, ft)):
            m.train()
            m(L.tensor(data[0][0]))
            m.eval()
        compare({k: v for k, v in fm.state_dict().items()},
                {k: v for k, v in tm.state_dict().items()}, "state_dict", grad_fn=False)
        compare(fm(ft.tensor(data[1][0])), tm(torch.tensor(data[1][0])), "eval", grad_fn=False)
    return case


mod("InstanceNorm2d", _instance_norm_build("InstanceNorm2d"), batches((2, 2, 4, 4), (2, 3, 4, 4)))
mod("InstanceNorm1d", _instance_norm_build("InstanceNorm1d", affine=True),
    batches((2, 2, 5), (2, 3, 5)))
add("module:InstanceNorm2d:track_running_stats", _instance_state(
    _instance_norm_build("InstanceNorm2d", affine=True, track_running_stats=True),
    batches((2, 2, 4, 4), (2, 3, 4, 4))))
add("module:InstanceNorm3d:unbatched", lambda: facade(
    lambda L, x: L.nn.InstanceNorm3d(2)(x), randn(2, 3, 2, 4)))
for _cls, _shape in (("Dropout1d", (2, 3, 4)), ("Dropout2d", (2, 3, 4, 4)),
                     ("Dropout3d", (2, 3, 2, 2, 2))):
    add(f"module:{_cls}:eval", lambda c=_cls, s=_shape: facade(
        lambda L, x: getattr(L.nn, c)(0.5).eval()(x), randn(*s)))
add("module:image_reprs", lambda: compare(
    [repr(m(ft)) for m in _IMAGE_REPRS], [repr(m(torch)) for m in _IMAGE_REPRS], "repr"))
_IMAGE_REPRS = (
    lambda L: L.nn.ConvTranspose2d(4, 3, 3, stride=2, padding=1, output_padding=1, bias=False,
                                   dilation=2),
    lambda L: L.nn.ConvTranspose1d(2, 3, 3, groups=1), lambda L: L.nn.Fold(3, 2),
    lambda L: L.nn.Unfold((2, 3), stride=2), lambda L: L.nn.Upsample(scale_factor=2),
    lambda L: L.nn.Upsample(size=(3, 4), mode="bilinear", align_corners=True),
    lambda L: L.nn.UpsamplingBilinear2d(scale_factor=2), lambda L: L.nn.UpsamplingNearest2d(3),
    lambda L: L.nn.PixelShuffle(2), lambda L: L.nn.PixelUnshuffle(3),
    lambda L: L.nn.InstanceNorm2d(3), lambda L: L.nn.InstanceNorm1d(3, affine=True,
                                                                    track_running_stats=True),
    lambda L: L.nn.Dropout2d(), lambda L: L.nn.Dropout1d(0.2))


# ---------------------------------------------------------------------------------------
# the tests

oracle.register(*CASES)


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_oracle_nn(case_id):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        oracle.case(case_id, CASES[case_id])


def _covered(prefix):
    return {c.split(":")[1] for c in CASES if c.startswith(prefix + ":")}


def test_every_common_functional_has_a_case():
    in_examples = {"prelu", "embedding_bag"}    # test_oracle_examples.py's examples:* cases
    missing = sorted(set(functional_names()) - _covered("functional") - {"Tracer"} -
                     in_examples)
    assert not missing, f"nn.functional functions torch has too, without a case: {missing}"


def test_every_common_module_has_a_case():
    names = {c.split(":")[1].split("_")[0] for c in CASES if c.startswith("module:")}
    covered = names | {"Flatten", "Unflatten", "ModuleDict", "ModuleList", "Parameter",
                       "ParameterDict", "ParameterList", "Buffer", "RNNCellBase", "AvgPool2d",
                       "MaxPool2d", "AdaptiveAvgPool2d"}   # in the container/conv cases
    covered |= {"PReLU", "EmbeddingBag"} | {f"{k}Pad{n}d" for n in (1, 2, 3) for k in (
        "Reflection", "Replication", "Circular", "Constant", "Zero")}   # examples:pad:*, ...
    missing = sorted(set(module_names()) - covered)
    assert not missing, f"nn modules torch has too, without a case: {missing}"


def test_every_common_optimizer_and_scheduler_has_a_case():
    opts = {c.split(":")[1] for c in CASES if c.startswith("optim:")}
    missing = sorted(set(optimizer_names()) - opts - {"Optimizer"})
    assert not missing, f"optimizers torch has too, without a case: {missing}"
    scheds = {c.split(":")[2] for c in CASES if c.startswith("optim:lr_scheduler:")}
    missing = sorted(set(scheduler_names()) - scheds)
    assert not missing, f"lr schedulers torch has too, without a case: {missing}"
