"""Layers, nn.functional and nn.init against float64 NumPy (values, gradients, PyTorch's default
initializations, running statistics, grad_fn names)."""
import math

import numpy as np
import pytest

import functrans as ft
import functrans.nn as nn
import functrans.nn.functional as F

RNG = np.random.default_rng(0)


def t64(a, requires_grad=False):
    return ft.tensor(np.asarray(a, np.float64), dtype=ft.float64, requires_grad=requires_grad)


def num(t):
    return t.detach().numpy()


def fd_grad(f, x, h=1e-6):
    """Central differences of a scalar NumPy function."""
    g = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        old = x[idx]
        x[idx] = old + h
        up = f(x)
        x[idx] = old - h
        down = f(x)
        x[idx] = old
        g[idx] = (up - down) / (2 * h)
    return g


# ---------------------------------------------------------------------------
# NumPy references


def conv2d_ref(x, w, b, stride, pad, dil, groups):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    oh = (h + 2 * pad[0] - dil[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd + 2 * pad[1] - dil[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, o, oh, ow))
    og = o // groups
    for oc in range(o):
        g = oc // og
        for i in range(oh):
            for j in range(ow):
                patch = xp[:, g * cg:(g + 1) * cg,
                           i * stride[0]: i * stride[0] + dil[0] * (kh - 1) + 1: dil[0],
                           j * stride[1]: j * stride[1] + dil[1] * (kw - 1) + 1: dil[1]]
                out[:, oc, i, j] = np.sum(patch * w[oc], axis=(1, 2, 3))
    if b is not None:
        out += b[None, :, None, None]
    return out


def pool_ref(x, k, s, p, d, ceil, kind, count_include_pad=True):
    n, c, h, w = x.shape

    def size(L, k, s, p, d):
        span = L + 2 * p - d * (k - 1) - 1
        o = (-(-span // s) + 1) if ceil else span // s + 1
        if ceil and (o - 1) * s >= L + p:
            o -= 1
        return o
    oh, ow = size(h, k[0], s[0], p[0], d[0]), size(w, k[1], s[1], p[1], d[1])
    out = np.zeros((n, c, oh, ow))
    idx = np.zeros((n, c, oh, ow), np.int64)
    for i in range(oh):
        for j in range(ow):
            rows = [i * s[0] - p[0] + a * d[0] for a in range(k[0])]
            cols = [j * s[1] - p[1] + b * d[1] for b in range(k[1])]
            if kind == "max":
                best = np.full((n, c), -np.inf)
                bidx = np.zeros((n, c), np.int64)
                for r in rows:
                    for q in cols:
                        if 0 <= r < h and 0 <= q < w:
                            v = x[:, :, r, q]
                            better = v > best
                            best = np.where(better, v, best)
                            bidx = np.where(better, r * w + q, bidx)
                out[:, :, i, j], idx[:, :, i, j] = best, bidx
            else:
                tot = np.zeros((n, c))
                cnt = 0
                for r in rows:
                    for q in cols:
                        inside = 0 <= r < h and 0 <= q < w
                        in_pad = -p[0] <= r < h + p[0] and -p[1] <= q < w + p[1]
                        if inside:
                            tot += x[:, :, r, q]
                        if inside or (count_include_pad and in_pad):
                            cnt += 1
                out[:, :, i, j] = tot / cnt
    return out, idx


# ---------------------------------------------------------------------------
# initialization


def test_linear_and_conv_default_initialization():
    ft.manual_seed(0)
    lin = nn.Linear(400, 300)
    b = 1 / math.sqrt(400)           # kaiming_uniform_(a=sqrt(5)) gives bound 1/sqrt(fan_in)
    w = num(lin.weight)
    assert w.shape == (300, 400) and w.dtype == np.float32
    assert w.min() >= -b and w.max() <= b
    assert abs(w.std() - b / math.sqrt(3)) < 0.01 * b and abs(w.mean()) < 0.01 * b
    assert np.abs(num(lin.bias)).max() <= b and num(lin.bias).std() > 0.4 * b
    conv = nn.Conv2d(16, 32, (3, 5))
    fan_in = 16 * 3 * 5
    bc = 1 / math.sqrt(fan_in)
    cw = num(conv.weight)
    assert cw.shape == (32, 16, 3, 5) and cw.max() <= bc and cw.min() >= -bc
    assert abs(cw.std() - bc / math.sqrt(3)) < 0.03 * bc
    assert np.abs(num(conv.bias)).max() <= bc


def test_manual_seed_makes_layers_reproducible():
    ft.manual_seed(123)
    a = num(nn.Linear(5, 5).weight).copy()
    ft.manual_seed(123)
    b = num(nn.Linear(5, 5).weight)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, num(nn.Linear(5, 5).weight))


def test_embedding_and_norm_initialization():
    ft.manual_seed(0)
    emb = nn.Embedding(1000, 64, padding_idx=3)
    w = num(emb.weight)
    assert abs(w.mean()) < 0.01 and abs(w.std() - 1.0) < 0.01
    assert np.all(w[3] == 0)
    ln = nn.LayerNorm((4, 5))
    assert np.all(num(ln.weight) == 1) and np.all(num(ln.bias) == 0) and ln.weight.shape == (4, 5)
    bn = nn.BatchNorm1d(3)
    assert np.all(num(bn.weight) == 1) and np.all(num(bn.bias) == 0)
    assert np.all(num(bn.running_mean) == 0) and np.all(num(bn.running_var) == 1)
    assert bn.num_batches_tracked.dtype == ft.int64 and bn.num_batches_tracked.item() == 0
    assert [n for n, _ in bn.named_buffers()] == ["running_mean", "running_var",
                                                 "num_batches_tracked"]


def test_init_functions():
    init = nn.init
    assert init.calculate_gain("relu") == math.sqrt(2)
    assert init.calculate_gain("tanh") == 5 / 3
    assert init.calculate_gain("leaky_relu", 0.2) == math.sqrt(2 / (1 + 0.04))
    assert init.calculate_gain("conv2d") == 1 and init.calculate_gain("selu") == 0.75
    with pytest.raises(ValueError, match="Unsupported nonlinearity foo"):
        init.calculate_gain("foo")
    w = ft.empty(200, 300)
    assert init._calculate_fan_in_and_fan_out(ft.empty(8, 4, 3, 3)) == (36, 72)
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init.xavier_uniform_(ft.empty(5))
    ft.manual_seed(1)
    init.xavier_uniform_(w, gain=2.0)
    a = 2.0 * math.sqrt(6 / 500)
    assert num(w).max() <= a and num(w).min() >= -a and num(w).max() > 0.95 * a
    init.kaiming_normal_(w, mode="fan_out", nonlinearity="relu")
    assert abs(num(w).std() - math.sqrt(2) / math.sqrt(200)) < 0.003
    init.xavier_normal_(w)
    assert abs(num(w).std() - math.sqrt(2 / 500)) < 0.002
    init.trunc_normal_(w, std=1.0, a=-0.5, b=0.5)
    assert num(w).min() >= -0.5 and num(w).max() <= 0.5 and num(w).std() > 0.2
    init.orthogonal_(w)
    np.testing.assert_allclose(num(w) @ num(w).T, np.eye(200), atol=1e-5)
    init.eye_(w)
    assert np.array_equal(num(w), np.eye(200, 300, dtype=np.float32))
    init.constant_(w, 0.3)
    assert np.all(num(w) == np.float32(0.3))
    c = ft.empty(4, 2, 3, 3)
    init.dirac_(c, groups=2)
    out = F.conv2d(ft.randn(1, 4, 5, 5), c, padding=1, groups=2)
    assert out.shape == (1, 4, 5, 5)
    p = nn.Parameter(ft.empty(3, 3))
    init.uniform_(p, -1, 1)                        # works on leaves that require grad
    assert p.is_leaf and p.requires_grad and p.grad_fn is None


# ---------------------------------------------------------------------------
# linear, activations


def test_linear_values_and_gradients():
    x, w, b = RNG.standard_normal((5, 4)), RNG.standard_normal((3, 4)), RNG.standard_normal(3)
    tx, tw, tb = t64(x, True), t64(w, True), t64(b, True)
    y = F.linear(tx, tw, tb)
    assert y.grad_fn.name() == "AddmmBackward0"
    np.testing.assert_allclose(num(y), x @ w.T + b, rtol=1e-12)
    r = RNG.standard_normal((5, 3))
    (y * t64(r)).sum().backward()
    np.testing.assert_allclose(num(tw.grad), r.T @ x, rtol=1e-12)
    np.testing.assert_allclose(num(tx.grad), r @ w, rtol=1e-12)
    np.testing.assert_allclose(num(tb.grad), r.sum(0), rtol=1e-12)
    y3 = F.linear(t64(RNG.standard_normal((2, 5, 4))), tw)
    assert y3.shape == (2, 5, 3)
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied "
                                           r"\(5x4 and 3x3\)"):
        F.linear(tx, t64(np.ones((3, 3))))


@pytest.mark.parametrize("name, fn, ref, grad_fn", [
    ("relu", F.relu, lambda x: np.maximum(x, 0), "ReluBackward0"),
    ("gelu", F.gelu, lambda x: 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2))),
     "GeluBackward0"),
    ("gelu_tanh", lambda x: F.gelu(x, approximate="tanh"),
     lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))),
     "GeluBackward0"),
    ("sigmoid", F.sigmoid, lambda x: 1 / (1 + np.exp(-x)), "SigmoidBackward0"),
    ("tanh", F.tanh, np.tanh, "TanhBackward0"),
    ("leaky_relu", lambda x: F.leaky_relu(x, 0.2), lambda x: np.where(x > 0, x, 0.2 * x),
     "LeakyReluBackward0"),
    ("silu", F.silu, lambda x: x / (1 + np.exp(-x)), "SiluBackward0"),
    ("softplus", lambda x: F.softplus(x, beta=2.0), lambda x: np.log1p(np.exp(2 * x)) / 2,
     "SoftplusBackward0"),
    ("elu", F.elu, lambda x: np.where(x > 0, x, np.expm1(x)), "EluBackward0"),
    ("softmax", lambda x: F.softmax(x, dim=1),
     lambda x: np.exp(x) / np.exp(x).sum(1, keepdims=True), "SoftmaxBackward0"),
    ("log_softmax", lambda x: F.log_softmax(x, dim=-1),
     lambda x: x - np.log(np.exp(x).sum(-1, keepdims=True)), "LogSoftmaxBackward0"),
])
def test_activation_values_and_gradients(name, fn, ref, grad_fn):
    x = RNG.standard_normal((3, 4)) * 2
    tx = t64(x, True)
    y = fn(tx)
    assert y.grad_fn.name() == grad_fn
    np.testing.assert_allclose(num(y), ref(x), rtol=1e-10, atol=1e-12)
    r = RNG.standard_normal((3, 4))
    (y * t64(r)).sum().backward()
    np.testing.assert_allclose(num(tx.grad), fd_grad(lambda v: np.sum(ref(v) * r), x.copy()),
                               rtol=1e-6, atol=1e-8)


def test_activation_modules_match_functions():
    x = ft.randn(3, 5)
    for mod, fn in [(nn.ReLU(), F.relu), (nn.GELU(), F.gelu), (nn.Tanh(), F.tanh),
                    (nn.Sigmoid(), F.sigmoid), (nn.Softmax(dim=1), lambda v: F.softmax(v, 1)),
                    (nn.LogSoftmax(dim=1), lambda v: F.log_softmax(v, 1)),
                    (nn.GELU("tanh"), lambda v: F.gelu(v, approximate="tanh")),
                    (nn.LeakyReLU(0.1), lambda v: F.leaky_relu(v, 0.1)), (nn.SiLU(), F.silu),
                    (nn.Identity(), lambda v: v)]:
        np.testing.assert_array_equal(num(mod(x)), num(fn(x)))


def test_relu_inplace_overwrites_the_input():
    x = ft.tensor([-1.0, 2.0, -3.0])
    y = nn.ReLU(inplace=True)(x)
    assert y is x and x.tolist() == [0.0, 2.0, 0.0] and x._version == 1
    a = ft.tensor([-1.0, 2.0], requires_grad=True)
    h = a * 1.0
    out = nn.ReLU(inplace=True)(h)
    assert out is h and out.grad_fn.name() == "ReluBackward0"
    out.sum().backward()
    assert a.grad.tolist() == [0.0, 1.0]


def test_softmax_is_stable_and_warns_without_dim():
    x = ft.tensor([[1000.0, 0.0], [-1000.0, 0.0]])
    np.testing.assert_allclose(num(F.softmax(x, dim=1)), [[1, 0], [0, 1]])
    assert np.isfinite(num(F.log_softmax(x, dim=1))).all()
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmax"):
        F.softmax(x)


# ---------------------------------------------------------------------------
# convolution and pooling


@pytest.mark.parametrize("cfg", [
    dict(stride=1, padding=0, dilation=1, groups=1),
    dict(stride=2, padding=1, dilation=1, groups=1),
    dict(stride=(1, 2), padding=(2, 1), dilation=(2, 1), groups=1),
    dict(stride=1, padding=1, dilation=1, groups=2),
    dict(stride=2, padding=0, dilation=2, groups=4),
])
def test_conv2d_matches_reference_and_finite_differences(cfg):
    n, c, h, w, o, k = 2, 4, 7, 6, 4, 3
    x = RNG.standard_normal((n, c, h, w))
    wt = RNG.standard_normal((o, c // cfg["groups"], k, k))
    b = RNG.standard_normal(o)
    pair = lambda v: (v, v) if isinstance(v, int) else v  # noqa: E731
    ref = conv2d_ref(x, wt, b, pair(cfg["stride"]), pair(cfg["padding"]), pair(cfg["dilation"]),
                     cfg["groups"])
    tx, tw, tb = t64(x, True), t64(wt, True), t64(b, True)
    y = F.conv2d(tx, tw, tb, **cfg)
    assert y.grad_fn.name() == "ConvolutionBackward0"
    np.testing.assert_allclose(num(y), ref, rtol=1e-10, atol=1e-12)
    r = RNG.standard_normal(ref.shape)
    (y * t64(r)).sum().backward()
    args = (pair(cfg["stride"]), pair(cfg["padding"]), pair(cfg["dilation"]), cfg["groups"])
    np.testing.assert_allclose(
        num(tw.grad), fd_grad(lambda v: np.sum(conv2d_ref(x, v, b, *args) * r), wt.copy()),
        rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(
        num(tx.grad), fd_grad(lambda v: np.sum(conv2d_ref(v, wt, b, *args) * r), x.copy()),
        rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(num(tb.grad), r.sum(axis=(0, 2, 3)), rtol=1e-10)


def test_conv2d_module_padding_same_and_unbatched():
    ft.manual_seed(0)
    conv = nn.Conv2d(2, 3, 4, padding="same", bias=False)       # even kernel: asymmetric pad
    x = ft.randn(1, 2, 5, 5)
    y = conv(x)
    assert y.shape == (1, 3, 5, 5)
    xp = np.pad(num(x).astype(np.float64), ((0, 0), (0, 0), (1, 2), (1, 2)))
    ref = conv2d_ref(xp, num(conv.weight).astype(np.float64), None, (1, 1), (0, 0), (1, 1), 1)
    np.testing.assert_allclose(num(y), ref, rtol=1e-5, atol=1e-5)
    assert conv(x[0]).shape == (3, 5, 5)
    with pytest.raises(RuntimeError, match="expected input\\[1, 3, 5, 5\\] to have 2 channels"):
        conv(ft.randn(1, 3, 5, 5))
    with pytest.raises(ValueError, match="in_channels must be divisible by groups"):
        nn.Conv2d(3, 4, 3, groups=2)


@pytest.mark.parametrize("cfg", [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=(2, 3), stride=(1, 2), dilation=(2, 1)),
    dict(kernel_size=3, stride=2, ceil_mode=True),
    dict(kernel_size=2, stride=2, padding=1, ceil_mode=True),
])
def test_max_pool2d_values_indices_and_gradient(cfg):
    x = RNG.standard_normal((2, 3, 7, 8))
    pair = lambda v: (v, v) if isinstance(v, int) else v  # noqa: E731
    k = pair(cfg["kernel_size"])
    s = pair(cfg.get("stride", k))
    ref, ridx = pool_ref(x, k, s, pair(cfg.get("padding", 0)), pair(cfg.get("dilation", 1)),
                         cfg.get("ceil_mode", False), "max")
    tx = t64(x, True)
    y, idx = F.max_pool2d(tx, return_indices=True, **cfg)
    assert y.grad_fn.name() == "MaxPool2DWithIndicesBackward0"
    np.testing.assert_array_equal(num(y), ref)
    np.testing.assert_array_equal(idx.numpy(), ridx)
    assert idx.dtype == ft.int64
    r = RNG.standard_normal(ref.shape)
    (y * t64(r)).sum().backward()
    want = np.zeros_like(x)
    for nn_, cc, i, j in np.ndindex(ref.shape):
        want[nn_, cc].flat[ridx[nn_, cc, i, j]] += r[nn_, cc, i, j]
    np.testing.assert_allclose(num(tx.grad), want, rtol=1e-12)


def test_max_pool_ties_route_the_gradient_to_the_first_element():
    x = ft.zeros(1, 1, 2, 4, requires_grad=True)
    F.max_pool2d(x, 2).sum().backward()
    assert x.grad[0, 0].tolist() == [[1.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0]]


@pytest.mark.parametrize("cfg", [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=3, stride=2, padding=1, count_include_pad=False),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
    dict(kernel_size=2, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
])
def test_avg_pool2d(cfg):
    x = RNG.standard_normal((1, 2, 7, 8))
    pair = lambda v: (v, v) if isinstance(v, int) else v  # noqa: E731
    k = pair(cfg["kernel_size"])
    ref, _ = pool_ref(x, k, pair(cfg.get("stride", k)), pair(cfg.get("padding", 0)), (1, 1),
                      cfg.get("ceil_mode", False), "avg", cfg.get("count_include_pad", True))
    np.testing.assert_allclose(num(F.avg_pool2d(t64(x), **cfg)), ref, rtol=1e-12)


def test_adaptive_avg_pool2d():
    x = RNG.standard_normal((1, 2, 5, 7))
    y = num(F.adaptive_avg_pool2d(t64(x), (2, 3)))
    np.testing.assert_allclose(y[0, 1, 1, 2], x[0, 1, 2:5, 4:7].mean())
    np.testing.assert_allclose(y[0, 0, 0, 1], x[0, 0, 0:3, 2:5].mean())
    assert nn.AdaptiveAvgPool2d(1)(t64(x)).shape == (1, 2, 1, 1)


def test_conv_and_pool_argument_errors_are_torchs():
    """F.conv2d refuses padding='same' with a stride as a RuntimeError (the Conv2d layer's
    constructor as a ValueError); avg_pool2d's padding limit has max_pool2d's message."""
    with pytest.raises(RuntimeError, match="padding='same' is not supported for strided"):
        F.conv2d(ft.zeros(1, 3, 5, 5), ft.zeros(4, 3, 3, 3), stride=2, padding="same")
    with pytest.raises(ValueError, match="padding='same' is not supported for strided"):
        nn.Conv2d(3, 4, 3, stride=2, padding="same")
    with pytest.raises(RuntimeError, match="pad should be at most half of effective kernel "
                                           "size, but got pad=2, kernel_size=3 and dilation=1"):
        F.avg_pool2d(ft.zeros(1, 3, 5, 5), 3, padding=2)


def test_pool_modules():
    x = ft.randn(2, 3, 6, 6)
    np.testing.assert_array_equal(num(nn.MaxPool2d(2)(x)), num(F.max_pool2d(x, 2)))
    np.testing.assert_array_equal(num(nn.AvgPool2d(3, 1, 1)(x)), num(F.avg_pool2d(x, 3, 1, 1)))


# ---------------------------------------------------------------------------
# normalization


def test_layer_norm_values_and_gradients():
    x = RNG.standard_normal((3, 4, 5))
    g, b = RNG.standard_normal((4, 5)), RNG.standard_normal((4, 5))

    def ref(x, g=g, b=b):
        mu = x.mean(axis=(1, 2), keepdims=True)
        var = x.var(axis=(1, 2), keepdims=True)
        return (x - mu) / np.sqrt(var + 1e-5) * g + b
    tx, tg, tb = t64(x, True), t64(g, True), t64(b, True)
    y = F.layer_norm(tx, (4, 5), tg, tb)
    assert y.grad_fn.name() == "NativeLayerNormBackward0"
    np.testing.assert_allclose(num(y), ref(x), rtol=1e-10)
    r = RNG.standard_normal(x.shape)
    (y * t64(r)).sum().backward()
    np.testing.assert_allclose(num(tx.grad), fd_grad(lambda v: np.sum(ref(v) * r), x.copy()),
                               rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(num(tg.grad), fd_grad(lambda v: np.sum(ref(x, v) * r), g.copy()),
                               rtol=1e-6, atol=1e-8)
    with pytest.raises(RuntimeError, match="Given normalized_shape=\\[6\\]"):
        F.layer_norm(tx, (6,))


def test_batch_norm_training_updates_running_stats():
    bn = nn.BatchNorm2d(3, momentum=0.2).double()
    x = RNG.standard_normal((4, 3, 2, 5)) * 3 + 1
    out = bn(t64(x))
    mean = x.mean(axis=(0, 2, 3))
    var = x.var(axis=(0, 2, 3))
    n = 4 * 2 * 5
    np.testing.assert_allclose(num(out), (x - mean[None, :, None, None]) / np.sqrt(
        var[None, :, None, None] + 1e-5), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(num(bn.running_mean), 0.2 * mean, rtol=1e-12)
    np.testing.assert_allclose(num(bn.running_var), 0.8 + 0.2 * var * n / (n - 1), rtol=1e-12)
    assert bn.num_batches_tracked.item() == 1
    assert out.grad_fn.name() == "NativeBatchNormBackward0"
    bn.eval()
    y = num(bn(t64(x)))
    np.testing.assert_allclose(y, (x - num(bn.running_mean)[None, :, None, None]) / np.sqrt(
        num(bn.running_var)[None, :, None, None] + 1e-5), rtol=1e-10)
    assert bn.num_batches_tracked.item() == 1


def test_batch_norm_gradient_in_training_mode():
    x = RNG.standard_normal((5, 3))
    g, b = RNG.standard_normal(3), RNG.standard_normal(3)

    def ref(x):
        return (x - x.mean(0)) / np.sqrt(x.var(0) + 1e-5) * g + b
    tx = t64(x, True)
    y = F.batch_norm(tx, None, None, t64(g), t64(b), training=True)
    r = RNG.standard_normal(x.shape)
    (y * t64(r)).sum().backward()
    np.testing.assert_allclose(num(tx.grad), fd_grad(lambda v: np.sum(ref(v) * r), x.copy()),
                               rtol=1e-5, atol=1e-7)


def test_batch_norm_backward_reads_the_saved_statistics():
    """A training batch norm's node keeps its input, weight and the per-channel mean and
    variance it returns (as torch's saves mean and invstd): its backward reads them instead
    of summing the input again. Its gradients match central differences over NCHW."""
    x = RNG.standard_normal((2, 3, 4, 5))
    g, b = RNG.standard_normal(3), RNG.standard_normal(3)
    tx = t64(x, True)
    y = F.batch_norm(tx, None, None, t64(g, True), t64(b, True), training=True)
    info = y.grad_fn.info
    stats = [s for s in info.held if s >= info.n_in]
    assert stats and set(stats) <= set(info.out_slots[1:]), info
    assert all(info.slot_avals[s].shape == (3,) for s in stats)

    def ref(v):
        m, var = v.mean((0, 2, 3), keepdims=True), v.var((0, 2, 3), keepdims=True)
        return (v - m) / np.sqrt(var + 1e-5) * g[:, None, None] + b[:, None, None]
    r = RNG.standard_normal(x.shape)
    (y * t64(r)).sum().backward()
    np.testing.assert_allclose(num(tx.grad), fd_grad(lambda v: np.sum(ref(v) * r), x.copy()),
                               rtol=1e-5, atol=1e-7)


def test_batch_norm_cumulative_average_and_options():
    bn = nn.BatchNorm1d(2, momentum=None).double()
    xs = [RNG.standard_normal((6, 2)) for _ in range(3)]
    for x in xs:
        bn(t64(x))
    np.testing.assert_allclose(num(bn.running_mean), np.mean([x.mean(0) for x in xs], 0),
                               rtol=1e-12)
    np.testing.assert_allclose(num(bn.running_var), np.mean([x.var(0, ddof=1) for x in xs], 0),
                               rtol=1e-12)
    nostats = nn.BatchNorm1d(2, track_running_stats=False, affine=False)
    assert list(nostats.parameters()) == [] and nostats.running_mean is None
    nostats.eval()
    y = num(nostats(ft.tensor([[1.0, 2.0], [3.0, 6.0]])))     # batch statistics even in eval
    np.testing.assert_allclose(y, [[-1, -1], [1, 1]], atol=1e-4)
    assert nn.BatchNorm1d(2)(ft.randn(4, 2, 7)).shape == (4, 2, 7)
    with pytest.raises(ValueError, match="expected 4D input \\(got 3D input\\)"):
        nn.BatchNorm2d(2)(ft.randn(4, 2, 7))
    with pytest.raises(ValueError, match="Expected more than 1 value per channel when training"):
        nn.BatchNorm1d(2)(ft.randn(1, 2))


def test_group_norm():
    x = RNG.standard_normal((2, 4, 3))
    y = num(nn.GroupNorm(2, 4).double()(t64(x)))
    g = x.reshape(2, 2, 6)
    ref = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-5))
    np.testing.assert_allclose(y, ref.reshape(2, 4, 3), rtol=1e-10)


# ---------------------------------------------------------------------------
# dropout, embedding, flatten


def test_dropout():
    ft.manual_seed(0)
    x = ft.ones(100, 100, requires_grad=True)
    y = F.dropout(x, 0.3)
    v = num(y)
    kept = v != 0
    assert abs(kept.mean() - 0.7) < 0.02
    np.testing.assert_allclose(v[kept], 1 / 0.7, rtol=1e-6)
    y.sum().backward()
    np.testing.assert_allclose(num(x.grad), v)                # the gradient is the mask
    d = nn.Dropout(0.5)
    d.eval()
    z = ft.randn(3, 3)
    assert d(z) is z
    assert np.all(num(F.dropout(z, 1.0)) == 0)
    assert F.dropout(z, 0.0) is z and F.dropout(z, 0.5, training=False) is z
    ft.manual_seed(5)
    a = num(nn.Dropout()(ft.ones(10)))
    ft.manual_seed(5)
    assert np.array_equal(a, num(nn.Dropout()(ft.ones(10))))
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1"):
        nn.Dropout(1.5)


def test_embedding_lookup_and_padding_gradient():
    emb = nn.Embedding(5, 3, padding_idx=1)
    idx = ft.tensor([[0, 1, 4], [1, 1, 2]])
    out = emb(idx)
    assert out.shape == (2, 3, 3) and out.grad_fn.name() == "EmbeddingBackward0"
    w = num(emb.weight)
    np.testing.assert_array_equal(num(out), w[idx.numpy()])
    out.sum().backward()
    g = num(emb.weight.grad)
    np.testing.assert_array_equal(g[:, 0], [1, 0, 1, 0, 1])       # padding row gets nothing
    with pytest.raises(IndexError, match="index out of range in self"):
        emb(ft.tensor([5]))
    pre = nn.Embedding.from_pretrained(ft.eye(3))
    assert not pre.weight.requires_grad and pre(ft.tensor([2])).tolist() == [[0.0, 0.0, 1.0]]


def test_embedding_is_one_row_gather():
    """The lookup records one gather of rows (no pass for negative or out-of-range indices
    over the output: concrete indices were checked), its gradient one scatter-add of rows;
    under ft.jit a traced index out of range reads a NaN row (jnp.take's default; torch
    raises), never a clamped, plausible one."""
    emb = nn.Embedding(6, 4)
    idx = ft.tensor([[0, 5, 2], [5, 5, 1]])
    out = emb(idx)
    assert [st.prim.name for st in out.grad_fn.info.steps] == ["expand_dims", "gather"]
    out.pow(2).sum().backward()
    w = num(emb.weight)
    want = np.zeros_like(w)
    np.add.at(want, idx.numpy().ravel(), 2 * w[idx.numpy().ravel()])
    np.testing.assert_array_equal(num(emb.weight.grad), want)
    look = ft.jit(lambda i, w: F.embedding(i, w))
    got = np.asarray(look(np.array([7, 0]), w))
    assert np.isnan(got[0]).all()
    np.testing.assert_array_equal(got[1], w[0])


def test_flatten_and_unflatten():
    x = ft.randn(2, 3, 4, 5)
    assert nn.Flatten()(x).shape == (2, 60)
    assert nn.Flatten(0, 2)(x).shape == (24, 5)
    assert nn.Unflatten(1, (3, 20))(nn.Flatten()(x)).shape == (2, 3, 20)


def test_pad():
    x = ft.ones(1, 2, 3)
    y = F.pad(x, (1, 2, 0, 1), value=5.0)
    assert y.shape == (1, 3, 6)
    assert y[0, 0].tolist() == [5, 1, 1, 1, 5, 5] and y[0, 2].tolist() == [5.0] * 6


def test_pad_modes_and_cropping():
    """reflect mirrors without the edge, replicate repeats it, circular wraps around; a
    negative width crops (any mode); each mode's gradient sums the copies back."""
    x = t64([[1.0, 2.0, 3.0, 4.0]], True)
    assert F.pad(x, (2, 1), mode="reflect").tolist() == [[3, 2, 1, 2, 3, 4, 3]]
    assert F.pad(x, (2, 1), mode="replicate").tolist() == [[1, 1, 1, 2, 3, 4, 4]]
    assert F.pad(x, (2, 1), mode="circular").tolist() == [[3, 4, 1, 2, 3, 4, 1]]
    assert F.pad(x, (-1, 2), value=9.0).tolist() == [[2, 3, 4, 9, 9]]
    assert F.pad(x, (-1, 1), mode="circular").tolist() == [[2, 3, 4, 2]]
    F.pad(x, (2, 1), mode="reflect").sum().backward()
    assert x.grad.tolist() == [[1, 2, 3, 1]]
    assert F.pad(x, (1, 1), mode="reflect").grad_fn.name() == "ReflectionPad1DBackward0"
    y = F.pad(ft.ones(1, 2, 3, 4), (1, 1, 2, 0), mode="replicate")
    assert y.shape == (1, 2, 5, 6) and y.grad_fn is None
    with pytest.raises(RuntimeError, match="Padding size should be less than"):
        F.pad(x, (4, 0), mode="reflect")
    with pytest.raises(RuntimeError, match="wrapping around more than once"):
        F.pad(x, (5, 0), mode="circular")
    with pytest.raises(NotImplementedError, match="Padding size 2 is not supported for 1D"):
        F.pad(ft.ones(3), (1, 1), mode="replicate")
    with pytest.raises(NotImplementedError, match="Unrecognised padding mode mirror"):
        F.pad(x, (1, 1), mode="mirror")


def test_one_hot():
    assert F.one_hot(ft.tensor([0, 2]), 3).tolist() == [[1, 0, 0], [0, 0, 1]]
    assert F.one_hot(ft.tensor([1, 3])).shape == (2, 4)


def test_grad_fn_names_are_torchs():
    """The grad_fn of each function is the op torch records last: the kernel itself for
    unbatched pooling and conv1d, the last op of torch's composite functions, the in-place
    variant's node for inplace=True."""
    x = ft.randn(2, 3, 4, 4, requires_grad=True)
    w1 = ft.randn(5, 3, 2)
    a, b = ft.randn(3, 4, requires_grad=True), ft.randn(3, 4)
    t = ft.tensor([[[0, 1, 2, 0]], [[1, 1, 0, 2]]])
    cases = {
        "MaxPool2DWithIndicesBackward0": F.max_pool2d(x[0], 2),
        "AvgPool2DBackward0": F.avg_pool2d(x[0], 2),
        "AdaptiveAvgPool2DBackward0": F.adaptive_avg_pool2d(x[0], (2, 3)),
        "MeanBackward1": F.adaptive_avg_pool2d(x, 1),
        "ConvolutionBackward0": F.conv1d(x[:, :, 0], w1),
        "SqueezeBackward1": F.conv1d(x[0, :, 0], w1),          # unbatched: as torch
        "AddBackward0": F.bilinear(a, b, ft.randn(2, 4, 4), ft.randn(2)),
        "ViewBackward0": F.bilinear(a, b, ft.randn(2, 4, 4)),
        "SumBackward1": F.cosine_similarity(a, b),
        "NllLoss2DBackward0": F.nll_loss(x[:, :3, 0], t[:, 0]),
        "MulBackward0": F.dropout(a, p=1.0),
        "DivBackward0": F.kl_div(a, b.abs(), reduction="batchmean"),
        "SubBackward0": F.kl_div(a, b.abs(), reduction="none"),
        "EluBackward1": F.elu(a * 1, inplace=True),
        "LeakyReluBackward1": F.leaky_relu(a * 1, inplace=True),
        "HardtanhBackward0": F.relu6(a * 1, inplace=True),
        "SiluBackward0": F.silu(a * 1, inplace=True),
    }
    for name, out in cases.items():
        assert out.grad_fn.name() == name, (name, out.grad_fn.name())
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        F.elu(a, inplace=True)


def test_cosine_similarity_and_kl_div_gradients_at_zero():
    """cosine_similarity clamps the norms in value only (torch: in place under no_grad), so
    a zero vector's gradient is the other unit vector / eps, not NaN; kl_div's target
    gradient is log t + 1 - input (torch's xlogy derivative: NaN at t = 0)."""
    z = t64(np.zeros((1, 3)), True)
    y = np.array([[3.0, 0.0, 4.0]])
    F.cosine_similarity(z, t64(y)).sum().backward()
    np.testing.assert_allclose(num(z.grad), y / 5 / 1e-8, rtol=1e-12)
    x, p = t64([0.5, -1.0, 0.2], True), t64([0.25, 0.0, 0.5], True)
    out = F.kl_div(x, p, reduction="sum")
    np.testing.assert_allclose(out.item(), 0.25 * (np.log(0.25) - 0.5) + 0.5 * (np.log(0.5) - 0.2),
                               rtol=1e-12)
    out.backward()
    np.testing.assert_allclose(num(p.grad), [np.log(0.25) + 1 - 0.5, np.nan, np.log(0.5) + 0.8],
                               rtol=1e-12)
    np.testing.assert_allclose(num(x.grad), [-0.25, 0.0, -0.5], rtol=1e-12)


def test_activations_pass_nan_through_as_torch():
    """relu, relu6, hardtanh and elu send NaN down their identity branch, as torch's
    kernels (`x <= 0 ? ... : x`): the value is NaN and the derivative 1."""
    for fn in (F.relu, F.relu6, F.hardtanh, F.elu, lambda x: x.relu()):
        x = t64([np.nan, -2.0, 0.5], True)
        y = fn(x)
        assert np.isnan(num(y)[0])
        y.sum().backward()
        assert num(x.grad)[0] == 1.0
    assert F.relu(t64([0.0, -0.0])).tolist() == [0.0, 0.0]


def test_activation_argument_checks():
    with pytest.raises(ValueError, match="min_val cannot be greater than max_val"):
        F.hardtanh(ft.ones(2), 1.0, -1.0)
    with pytest.raises(TypeError, match="takes 1 positional argument but 2 were given"):
        F.gelu(ft.ones(2), "tanh")


def test_linear_and_normalization_argument_errors_are_torchs():
    x32, w64 = ft.zeros(2, 3), ft.zeros(4, 3, dtype=ft.float64)
    with pytest.raises(RuntimeError, match="expected m1 and m2 to have the same dtype, but "
                                           "got: float != double"):
        F.linear(x32, w64)
    with pytest.raises(RuntimeError, match="mat1 and mat2 must have the same dtype, but got "
                                           "Float and Double"):
        F.linear(x32, w64, ft.zeros(4, dtype=ft.float64))
    with pytest.raises(TypeError, match="must be tuple of ints, not int"):
        F.layer_norm(ft.zeros(2, 4), 4)
    with pytest.raises(RuntimeError, match=r"Expected bias to be of same shape as "
                                           r"normalized_shape, but got bias of shape \[3\]"):
        F.layer_norm(ft.zeros(2, 4), [4], None, ft.zeros(3))
    with pytest.raises(RuntimeError, match="running_var should contain 4 elements not 3"):
        F.batch_norm(ft.zeros(2, 4), ft.zeros(4), ft.ones(3))
    with pytest.raises(RuntimeError, match=r"Expected weight to be a vector of size equal to "
                                           r"the number of channels in input"):
        F.group_norm(ft.zeros(2, 4), 2, ft.ones(3))
    assert nn.LayerNorm(4)(ft.ones(2, 4)).shape == (2, 4)       # the layer takes an int


def test_embedding_max_norm_and_scale_grad_by_freq():
    """max_norm shrinks the picked rows longer than it, in place, to max_norm / (norm + 1e-7)
    times themselves; scale_grad_by_freq divides each row's gradient by its index's count."""
    w = t64([[3.0, 4.0], [0.3, 0.4], [6.0, 8.0]], True)
    out = F.embedding(ft.tensor([0, 1, 0]), w, max_norm=1.0)
    np.testing.assert_allclose(num(w), [[3 / (5 + 1e-7), 4 / (5 + 1e-7)], [0.3, 0.4], [6, 8]],
                               rtol=1e-12)
    np.testing.assert_allclose(num(out), num(w)[[0, 1, 0]], rtol=1e-12)
    w = t64(np.ones((3, 2)), True)
    F.embedding(ft.tensor([[0, 2, 0], [0, 1, 2]]), w, scale_grad_by_freq=True).sum().backward()
    np.testing.assert_allclose(num(w.grad), np.ones((3, 2)), rtol=1e-12)   # count / count
    with pytest.raises(NotImplementedError, match="sparse=True"):
        F.embedding(ft.tensor([0]), w, sparse=True)


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_conv_padding_modes(mode):
    """padding_mode pads with F.pad in that mode, then convolves without padding."""
    x = ft.randn(1, 2, 5, 6)
    conv = nn.Conv2d(2, 3, 3, padding=(1, 2), padding_mode=mode)
    want = F.conv2d(F.pad(x, (2, 2, 1, 1), mode=mode), conv.weight, conv.bias)
    np.testing.assert_allclose(num(conv(x)), num(want), rtol=1e-6)
    c1 = nn.Conv1d(2, 3, 4, padding="same", padding_mode=mode)
    y = ft.randn(2, 2, 6)
    want = F.conv1d(F.pad(y, (1, 2), mode=mode), c1.weight, c1.bias)
    np.testing.assert_allclose(num(c1(y)), num(want), rtol=1e-6)


def test_dtype_rules_of_conv_pool_and_one_hot():
    """torch's: conv refuses a weight or bias of another dtype; one_hot takes int64 only;
    avg_pool2d of integers is the integer average, truncated toward zero; adaptive pooling
    refuses integers."""
    x32 = ft.zeros(1, 2, 4, 4)
    with pytest.raises(RuntimeError, match="expected scalar type Float but found Double"):
        F.conv2d(x32, ft.zeros(3, 2, 2, 2, dtype=ft.float64))
    with pytest.raises(RuntimeError, match=r"Input type \(float\) and bias type \(double\)"):
        F.conv2d(x32, ft.zeros(3, 2, 2, 2), ft.zeros(3, dtype=ft.float64))
    with pytest.raises(RuntimeError, match="one_hot is only applicable to index tensor of "
                                           "type LongTensor"):
        F.one_hot(ft.tensor([0, 1], dtype=ft.int32), 2)
    y = F.avg_pool2d(ft.tensor([[[[1, 2], [4, -9]], [[1, 2], [4, 1]]]]), 2)
    assert y.dtype == ft.int64 and y.flatten().tolist() == [0, 2]     # -2/4 -> 0, 8/4
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        F.adaptive_avg_pool2d(ft.zeros(1, 1, 4, 4, dtype=ft.int64), (2, 1))
