"""The oracle table of what PyTorch's classic examples reach for beyond nn's layers, against
PyTorch: `torch.distributions` (reinforce/actor_critic's Categorical, VAEs' Normal, ...),
`nn.utils.rnn` packing with packed input to the recurrent layers (word_language_model-style
programs), weight and spectral normalization, `cdist`, `finfo`/`iinfo`, and small versions
of the dcgan and vae models trained a few steps from the same weights; and names the
examples import (diag, bitwise functions, PReLU, padding layers, EmbeddingBag).

Each case `examples:<topic>:<variant>` runs through `oracle.case`. Sampling draws from each
library's own generator, so samples are compared by shape, dtype and statistics; densities,
entropies, KL divergences and their gradients by value (oracle.facade).
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import oracle
from oracle import compare, facade, ft, torch

CASES = {}


def add(case_id, thunk):
    assert case_id not in CASES, case_id
    CASES[case_id] = thunk


def randn(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def D(L):
    return L.distributions


# ---------------------------------------------------------------------------------------
# torch.distributions: densities, entropies, moments and their gradients


def _normal(L, loc, scale, value):
    d = D(L).Normal(loc, scale.exp())
    return {"log_prob": d.log_prob(value), "entropy": d.entropy(), "cdf": d.cdf(value),
            "mean": d.mean, "stddev": d.stddev, "variance": d.variance,
            "shapes": (d.batch_shape, d.event_shape)}


def _categorical(L, param, value, use_logits):
    d = D(L).Categorical(logits=param) if use_logits else D(L).Categorical(probs=param.exp())
    return {"log_prob": d.log_prob(value), "entropy": d.entropy(), "probs": d.probs,
            "logits": d.logits, "mode": d.mode, "shapes": (d.batch_shape, d.event_shape),
            "support": d.enumerate_support(), "perplexity": d.perplexity()}


def _bernoulli(L, param, value, use_logits):
    d = D(L).Bernoulli(logits=param) if use_logits else D(L).Bernoulli(probs=param.sigmoid())
    return {"log_prob": d.log_prob(value), "entropy": d.entropy(), "probs": d.probs,
            "logits": d.logits, "mean": d.mean, "variance": d.variance,
            "shapes": (d.batch_shape, d.event_shape)}


def _tril(L, a):
    """A lower-triangular factor with a positive diagonal, from a free square matrix."""
    eye = L.eye(a.shape[-1], dtype=a.dtype)
    return a.tril(-1) + a.diagonal(dim1=-2, dim2=-1).exp().unsqueeze(-1) * eye


def _mvn(L, loc, a, value, how):
    tril = _tril(L, a)
    cov = tril @ tril.mT
    kw = {"scale_tril": tril, "covariance_matrix": cov,
          "precision_matrix": L.linalg.inv(cov)}
    d = D(L).MultivariateNormal(loc, **{how: kw[how]})
    return {"log_prob": d.log_prob(value), "entropy": d.entropy(), "variance": d.variance,
            "scale_tril": d.scale_tril, "covariance": d.covariance_matrix,
            "precision": d.precision_matrix, "shapes": (d.batch_shape, d.event_shape)}


def _independent(L, loc, scale, value):
    d = D(L).Independent(D(L).Normal(loc, scale.exp()), 1)
    return {"log_prob": d.log_prob(value), "entropy": d.entropy(),
            "shapes": (d.batch_shape, d.event_shape), "mean": d.mean}


def _kl(L, which, a, b):
    Dl = D(L)
    if which == "normal":
        p, q = Dl.Normal(a[0], a[1].exp()), Dl.Normal(b[0], b[1].exp())
    elif which == "bernoulli":
        p, q = Dl.Bernoulli(logits=a), Dl.Bernoulli(probs=b.sigmoid())
    elif which == "categorical":
        p, q = Dl.Categorical(logits=a), Dl.Categorical(probs=b.softmax(-1))
    elif which == "mvn":
        p = Dl.MultivariateNormal(a[0, :, 0], scale_tril=_tril(L, a[1:]))
        q = Dl.MultivariateNormal(b[0, :, 0], covariance_matrix=_tril(L, b[1:]) @ _tril(
            L, b[1:]).mT)
    else:
        p = Dl.Independent(Dl.Normal(a[0], a[1].exp()), 1)
        q = Dl.Independent(Dl.Normal(b[0], b[1].exp()), 1)
    return Dl.kl_divergence(p, q)


def dist(name, fn, *inputs, **kw):
    add(f"examples:distributions:{name}",
        lambda: facade(fn, *inputs, grad_fn=False, **kw))


dist("normal", _normal, randn(2, 3), randn(2, 3, seed=1), randn(4, 2, 3, seed=2))
dist("normal:numbers", lambda L: _normal(L, 0.5, L.tensor(0.3), L.tensor([0.1, 2.0])))
dist("categorical:logits", lambda L, p: _categorical(L, p, L.tensor([[0, 3], [2, 1], [1, 1]]),
                                                     True), randn(2, 4))
dist("categorical:probs", lambda L, p: _categorical(L, p, L.tensor([3, 0]), False), randn(2, 4))
dist("categorical:zero_probability", lambda L: _categorical(
    L, L.tensor([[0.0, 0.5, 0.5]]).log(), L.tensor([1]), False))
dist("bernoulli:logits", lambda L, p, v: _bernoulli(L, p, v, True), randn(3),
     np.array([1.0, 0.0, 1.0]))
dist("bernoulli:probs", lambda L, p, v: _bernoulli(L, p, v, False), randn(2, 3),
     np.array([1.0, 0.0, 0.0]))
for _how in ("scale_tril", "covariance_matrix", "precision_matrix"):
    dist(f"mvn:{_how}", lambda L, loc, a, v, how=_how: _mvn(L, loc, a, v, how), randn(2, 3),
         randn(2, 3, 3, seed=1), randn(5, 2, 3, seed=2))
dist("mvn:broadcast_batch", lambda L, loc, a, v: _mvn(L, loc, a, v, "scale_tril"), randn(4, 3),
     randn(3, 3, seed=1), randn(3, seed=2))
dist("independent", _independent, randn(2, 3), randn(2, 3, seed=1), randn(2, 3, seed=2))
for _which, _shape in (("normal", (2, 3)), ("bernoulli", (3,)), ("categorical", (2, 4)),
                       ("mvn", (4, 3, 3)), ("independent", (2, 2, 3))):
    dist(f"kl:{_which}", lambda L, a, b, w=_which: _kl(L, w, a, b), randn(*_shape),
         randn(*_shape, seed=1))
dist("kl:bernoulli_certain", lambda L: D(L).kl_divergence(
    D(L).Bernoulli(L.tensor([0.0, 1.0, 0.3])), D(L).Bernoulli(L.tensor([0.5, 0.0, 1.0]))))


# errors for invalid arguments and values: torch validates by default (validate_args=True)
def _err(name, fn, pattern):
    add(f"examples:distributions:error:{name}",
        lambda: facade(fn, error=pattern, backward=False))


_err("normal_scale", lambda L: D(L).Normal(0.0, -1.0),
     r"Expected parameter scale \(Tensor of shape \(\)\) of distribution Normal\(loc: 0\.0, "
     r"scale: -1\.0\) to satisfy the constraint GreaterThan\(lower_bound=0\.0\)")
_err("normal_value_shape", lambda L: D(L).Normal(L.zeros(2), L.ones(2)).log_prob(L.ones(3)),
     r"Value is not broadcastable with batch_shape\+event_shape")
_err("categorical_both", lambda L: D(L).Categorical(L.ones(2), L.ones(2)),
     r"Either `probs` or `logits` must be specified, but not both\.")
_err("categorical_scalar", lambda L: D(L).Categorical(probs=L.tensor(1.0)),
     r"`probs` parameter must be at least one-dimensional\.")
_err("categorical_negative", lambda L: D(L).Categorical(probs=L.tensor([0.5, -0.1])),
     r"to satisfy the constraint Simplex\(\)")
_err("categorical_support", lambda L: D(L).Categorical(probs=L.tensor([0.5, 0.5])).log_prob(
    L.tensor(2)), r"Expected value argument \(Tensor of shape \(\)\) to be within the support "
     r"\(IntegerInterval\(lower_bound=0, upper_bound=1\)\)")
_err("bernoulli_probs", lambda L: D(L).Bernoulli(probs=L.tensor(1.5)),
     r"constraint Interval\(lower_bound=0\.0, upper_bound=1\.0\)")
_err("bernoulli_support", lambda L: D(L).Bernoulli(probs=L.tensor(0.5)).log_prob(
    L.tensor(0.5)), r"within the support \(Boolean\(\)\)")
_err("mvn_none", lambda L: D(L).MultivariateNormal(L.zeros(2)),
     r"Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified\.")
_err("mvn_not_pd", lambda L: D(L).MultivariateNormal(L.zeros(2), L.tensor([[1.0, 2], [2, 1]])),
     r"covariance_matrix .* to satisfy the constraint PositiveDefinite\(\)")
_err("mvn_loc_scalar", lambda L: D(L).MultivariateNormal(L.tensor(0.0), L.eye(1)),
     r"loc must be at least one-dimensional\.")
_err("independent_ndims", lambda L: D(L).Independent(D(L).Normal(L.zeros(2), L.ones(2)), 2),
     r"Expected reinterpreted_batch_ndims <= len\(base_distribution\.batch_shape\), actual 2 "
     r"vs 1")
add("examples:distributions:validate_args_off", lambda: facade(
    lambda L: D(L).Normal(0.0, -1.0, validate_args=False).log_prob(L.tensor(1.0)),
    backward=False))


# samples: each library's own stream, so shape, dtype, gradient and statistics
def _sample_shapes(L):
    L.manual_seed(0)
    Dl = D(L)
    out = {}
    for name, d in (("normal", Dl.Normal(L.zeros(2, 3), L.ones(3))),
                    ("categorical", Dl.Categorical(logits=L.zeros(2, 5))),
                    ("bernoulli", Dl.Bernoulli(probs=L.full((3,), 0.5))),
                    ("mvn", Dl.MultivariateNormal(L.zeros(2, 3), L.eye(3))),
                    ("independent", Dl.Independent(Dl.Normal(L.zeros(2, 3), L.ones(2, 3)), 1))):
        for shape in ((), (4,), (2, 1)):
            s = d.sample(shape)
            out[name, shape] = (tuple(s.shape), str(s.dtype).split(".")[-1], s.requires_grad)
        if d.has_rsample:
            out[name, "rsample"] = tuple(d.rsample((4,)).shape)
    return out


def samples_case():
    compare(_sample_shapes(ft), _sample_shapes(torch), "samples")


def statistics_case():
    """Sample means, variances and frequencies near the law's (a fixed seed: not flaky)."""
    ft.manual_seed(0)
    Dl = ft.distributions
    n = 20000
    s = Dl.Normal(ft.tensor([1.0, -2.0]), ft.tensor([0.5, 3.0])).sample((n,))
    np.testing.assert_allclose(s.mean(0).numpy(), [1.0, -2.0], atol=0.06)
    np.testing.assert_allclose(s.std(0).numpy(), [0.5, 3.0], rtol=0.03)
    probs = np.array([0.1, 0.6, 0.3])
    c = Dl.Categorical(probs=ft.tensor(probs)).sample((n,)).numpy()
    np.testing.assert_allclose(np.bincount(c, minlength=3) / n, probs, atol=0.015)
    b = Dl.Bernoulli(logits=ft.tensor([-1.0, 2.0])).sample((n,)).numpy()
    np.testing.assert_allclose(b.mean(0), 1 / (1 + np.exp([1.0, -2.0])), atol=0.015)
    cov = np.array([[2.0, 0.6], [0.6, 1.0]])
    m = Dl.MultivariateNormal(ft.tensor([1.0, 0.0], dtype=ft.float64),
                              ft.tensor(cov)).rsample((n,)).numpy()
    np.testing.assert_allclose(np.cov(m.T), cov, atol=0.08)


def rsample_gradient_case():
    """rsample is loc + scale * eps: d/dloc is the count, d/dscale is the sum of eps."""
    ft.manual_seed(0)
    loc = ft.tensor([0.5, -1.0], requires_grad=True)
    scale = ft.tensor([2.0, 0.5], requires_grad=True)
    s = ft.distributions.Normal(loc, scale).rsample((7,))
    s.sum().backward()
    eps = ((s - loc) / scale).detach()
    np.testing.assert_allclose(loc.grad.numpy(), [7.0, 7.0])
    np.testing.assert_allclose(scale.grad.numpy(), eps.sum(0).numpy(), rtol=1e-6)
    tril = ft.tensor([[1.0, 0.0], [0.5, 2.0]], requires_grad=True)
    mu = ft.zeros(2, requires_grad=True)
    x = ft.distributions.MultivariateNormal(mu, scale_tril=tril).rsample((5,))
    (x ** 2).sum().backward()
    assert tril.grad is not None and mu.grad is not None
    np.testing.assert_allclose(mu.grad.numpy(), (2 * x).sum(0).detach().numpy(), rtol=1e-6)


def reinforce_case():
    """reinforce.py's update: -log_prob(action) * return, through a policy network, with
    the actions the torch side sampled (the gradients then agree)."""
    def run(L, actions):
        L.manual_seed(0)
        policy = L.nn.Sequential(L.nn.Linear(4, 16), L.nn.ReLU(), L.nn.Linear(16, 2),
                                 L.nn.Softmax(dim=-1)).double()
        return policy

    tp, fp = run(torch, None), run(ft, None)
    oracle.copy_weights(tp, fp)
    states = randn(6, 4)
    returns = randn(6, seed=1)
    out = {}
    for L, policy in ((torch, tp), (ft, fp)):
        probs = policy(L.tensor(states))
        m = L.distributions.Categorical(probs)
        actions = L.tensor([0, 1, 1, 0, 1, 0])
        loss = (-m.log_prob(actions) * L.tensor(returns)).sum()
        loss.backward()
        out[L.__name__] = {"loss": loss, "entropy": m.entropy(),
                           "grads": {n: p.grad for n, p in policy.named_parameters()}}
    compare(out["functrans"], out["torch"], "reinforce", grad_fn=False)


add("examples:distributions:sample_shapes", samples_case)
add("examples:distributions:sample_statistics", statistics_case)
add("examples:distributions:rsample_gradient", rsample_gradient_case)
add("examples:distributions:reinforce", reinforce_case)
add("examples:distributions:kl_missing", lambda: facade(
    lambda L: D(L).kl_divergence(D(L).Normal(0.0, 1.0), D(L).Categorical(L.ones(2))),
    error=r"KL", backward=False))


# ---------------------------------------------------------------------------------------
# nn.utils.rnn: padding, packing, and packed input to the recurrent layers

_SEQS = [randn(n, 3, seed=n) for n in (4, 2, 5, 1)]


def _pad_pack(L, *seqs):
    R = L.nn.utils.rnn
    srt = sorted(seqs, key=lambda s: -s.shape[0])
    packed = R.pack_sequence(list(seqs), enforce_sorted=False)
    out = {"pad": R.pad_sequence(list(seqs)),
           "pad_bf_left": R.pad_sequence(list(seqs), batch_first=True, padding_value=-1.5,
                                         padding_side="left"),
           "packed": tuple(packed),
           "packed_sorted": tuple(R.pack_sequence(srt)),
           "unpacked": R.pad_packed_sequence(packed, batch_first=True, padding_value=2.0),
           "unpacked_total": R.pad_packed_sequence(packed, total_length=7),
           "unpad": R.unpad_sequence(R.pad_sequence(list(seqs)), L.tensor([4, 2, 5, 1])),
           "unpack": R.unpack_sequence(packed)}
    padded = R.pad_sequence(srt, batch_first=True)
    out["from_padded"] = tuple(R.pack_padded_sequence(padded, [5, 4, 2, 1], batch_first=True))
    return out


add("examples:rnn_utils:pad_pack", lambda: facade(_pad_pack, *_SEQS, grad_fn=False))
for _name, _fn, _pattern in (
        ("unsorted", lambda L: L.nn.utils.rnn.pack_padded_sequence(L.zeros(3, 2, 1), [1, 3]),
         r"`lengths` array must be sorted in decreasing order when `enforce_sorted` is True"),
        ("zero_length", lambda L: L.nn.utils.rnn.pack_padded_sequence(L.zeros(3, 2, 1), [3, 0]),
         r"Length of all samples has to be greater than 0"),
        ("batch_size", lambda L: L.nn.utils.rnn.pack_padded_sequence(L.zeros(3, 2, 1), [3]),
         r"Expected `len\(lengths\)` to be equal to batch_size, but got 1 \(batch_size=2\)"),
        ("total_length", lambda L: L.nn.utils.rnn.pad_packed_sequence(
            L.nn.utils.rnn.pack_padded_sequence(L.zeros(3, 2, 1), [3, 1]), total_length=2),
         r"Expected total_length to be at least the length of the longest sequence"),
        ("padding_side", lambda L: L.nn.utils.rnn.pad_sequence([L.zeros(2)],
                                                               padding_side="middle"),
         r"Expected padding_side to be one of left or right, but got middle\.")):
    add(f"examples:rnn_utils:error:{_name}",
        lambda f=_fn, p=_pattern: facade(f, error=p, backward=False))


def _packed_rnn(kind, layers, bidir, enforce, with_hx):
    """A packed batch through kind(3, 4): the outputs, final states and every gradient."""
    def fn(L, h0, *seqs):
        L.manual_seed(0)
        m = getattr(L.nn, kind)(3, 4, num_layers=layers, bidirectional=bidir).double()
        if L is ft:
            oracle.copy_weights(_TORCH_RNN[0], m)
        else:
            _TORCH_RNN[:] = [m]
        seqs = sorted(seqs, key=lambda s: -s.shape[0]) if enforce else list(seqs)
        packed = L.nn.utils.rnn.pack_sequence(seqs, enforce_sorted=enforce)
        hx = None
        if with_hx:
            hx = (h0, h0 * 0.5) if kind == "LSTM" else h0
        out, hn = m(packed, hx)
        pad, lengths = L.nn.utils.rnn.pad_packed_sequence(out, batch_first=True)
        return {"data": out.data, "batch_sizes": out.batch_sizes, "pad": pad,
                "lengths": lengths, "hn": hn,
                "weights": [p for _, p in m.named_parameters()]}
    dirs = 2 if bidir else 1
    return lambda: facade(fn, randn(layers * dirs, 4, 4, seed=9), *_SEQS, grad_fn=False)


_TORCH_RNN: list = []
for _kind, _layers, _bidir, _enforce, _hx in (
        ("LSTM", 2, True, False, True), ("LSTM", 1, False, True, False),
        ("GRU", 2, False, False, True), ("GRU", 1, True, True, False),
        ("RNN", 1, True, False, True), ("RNN", 2, False, True, False)):
    add(f"examples:rnn_utils:packed_{_kind}:layers{_layers}" + (":bidir" if _bidir else "")
        + (":sorted" if _enforce else ":unsorted") + (":hx" if _hx else ""),
        _packed_rnn(_kind, _layers, _bidir, _enforce, _hx))


def packed_training_case():
    """An LSTM language-model step on packed batches (embedding -> packed LSTM -> linear),
    trained 3 steps from the same weights with different lengths each step."""
    def build(L):
        class Model(L.nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = L.nn.Embedding(7, 3)
                self.rnn = L.nn.LSTM(3, 5, bidirectional=True)
                self.out = L.nn.Linear(10, 7)

            def forward(self, tokens, lengths):
                packed = L.nn.utils.rnn.pack_padded_sequence(self.emb(tokens), lengths,
                                                             enforce_sorted=False)
                out, _ = self.rnn(packed)
                pad, _ = L.nn.utils.rnn.pad_packed_sequence(out)
                return self.out(pad)
        m = Model().double()

        def loss(model, tokens, lengths, target):
            logits = model(tokens, lengths)
            return L.nn.functional.cross_entropy(logits.reshape(-1, 7), target.reshape(-1),
                                                 ignore_index=0)
        return m, L.optim.SGD(m.parameters(), lr=0.5), loss
    r = np.random.default_rng(3)
    batches = []
    for lengths in ([3, 5, 2], [4, 4, 1], [2, 5, 5]):
        t = max(lengths)
        tokens = r.integers(1, 7, size=(t, 3))
        target = r.integers(1, 7, size=(t, 3))
        for b, n in enumerate(lengths):
            tokens[n:, b] = 0
            target[n:, b] = 0
        batches.append((tokens, np.array(lengths), target))
    oracle.train(build, batches, steps=3)


add("examples:rnn_utils:packed_training", packed_training_case)


# ---------------------------------------------------------------------------------------
# small things programs print or compare

add("examples:finfo", lambda: compare(
    [(str(L_.finfo(d)), L_.finfo(d).eps, L_.finfo(d).tiny, L_.finfo(d).bits, L_.finfo(d).dtype)
     for L_ in (ft,) for d in (ft.float16, ft.float32, ft.float64)] +
    [(str(ft.iinfo(d)), ft.iinfo(d).min, ft.iinfo(d).max, ft.iinfo(d).bits)
     for d in (ft.uint8, ft.int32, ft.int64)] + [str(ft.finfo())],
    [(str(torch.finfo(d)), torch.finfo(d).eps, torch.finfo(d).tiny, torch.finfo(d).bits,
      torch.finfo(d).dtype) for d in (torch.float16, torch.float32, torch.float64)] +
    [(str(torch.iinfo(d)), torch.iinfo(d).min, torch.iinfo(d).max, torch.iinfo(d).bits)
     for d in (torch.uint8, torch.int32, torch.int64)] + [str(torch.finfo())], "finfo"))
add("examples:format_scalar_tensor", lambda: facade(
    lambda L, x: [f"{x.sum()}", f"{x.sum():.3f}", f"{L.tensor(3)}", f"{x[:1]}"[:6]],
    np.array([0.25, 0.5]), backward=False))


# torch.cdist: every p, zero distances (gradient zero there), the matmul path past 25 rows
_A, _B = randn(2, 4, 3, seed=1), randn(2, 5, 3, seed=2)
_B[0, 1] = _A[0, 2]
for _p in (2.0, 1.0, 0.0, 3.0, float("inf")):
    add(f"examples:cdist:p{_p}", lambda p=_p: facade(lambda L, a, b: L.cdist(a, b, p=p), _A, _B))
add("examples:cdist:mm", lambda: facade(lambda L, a, b: L.cdist(a, b), randn(30, 3),
                                        randn(7, 3, seed=1)))
add("examples:cdist:columns", lambda: facade(lambda L, a, b: L.cdist(a, b), randn(3, 2),
                                             randn(3, 3), error=r"X1 and X2 must have the same "
                                             r"number of columns\. X1: 2 X2: 3"))


def cudnn_case():
    """dcgan's `import torch.backends.cudnn as cudnn; cudnn.benchmark = True`."""
    import importlib
    cudnn = importlib.import_module("functrans.backends.cudnn")
    cudnn.benchmark = True
    assert cudnn.is_available() is False and cudnn.enabled is True


add("examples:backends_cudnn", cudnn_case)


# nn.utils.weight_norm / spectral_norm (the hook-based API): trained 3 steps from torch's
# weights and power-iteration vectors (copied with the state_dict), then eval mode
def _norm_build(make, conv):
    def build(L):
        m = make(L).double()
        run = (lambda model, x: model(x.unsqueeze(-1)).squeeze(-1)) if conv else \
            (lambda model, x: model(x))
        return m, L.optim.SGD(m.parameters(), lr=0.1), \
            lambda model, x, y: L.nn.functional.mse_loss(run(model, x), y)
    return build


def _weight_norm_net(L):
    return L.nn.Sequential(L.nn.utils.weight_norm(L.nn.Linear(4, 5)), L.nn.Tanh(),
                           L.nn.utils.weight_norm(L.nn.Linear(5, 3), dim=None))


def _spectral_norm_net(L):
    return L.nn.Sequential(L.nn.utils.spectral_norm(L.nn.Conv1d(4, 5, 1)), L.nn.Tanh(),
                           L.nn.utils.spectral_norm(L.nn.ConvTranspose1d(5, 3, 1),
                                                    n_power_iterations=2))


_NORM_DATA = [(randn(6, 4, seed=i), randn(6, 3, seed=i + 5)) for i in range(2)]


def _norm_case(make, conv):
    def case():
        build = _norm_build(make, conv)
        oracle.train(build, _NORM_DATA, 3)
        torch.manual_seed(0)
        tm, fm = build(torch)[0], build(ft)[0]
        oracle.copy_weights(tm, fm)
        x = _NORM_DATA[0][0][..., None] if conv else _NORM_DATA[0][0]
        outs = {}
        for L, m in ((torch, tm), (ft, fm)):
            m.eval()
            y1 = m(L.tensor(x))
            outs[L.__name__] = (y1, m(L.tensor(x)), list(m.state_dict()),
                                [n for n, _ in m.named_parameters()])
        compare(outs["functrans"], outs["torch"], "eval", grad_fn=False)
    return case


add("examples:weight_norm", _norm_case(_weight_norm_net, False))
add("examples:spectral_norm", _norm_case(_spectral_norm_net, True))


def _remove_norms(L):
    L.manual_seed(0)
    a = L.nn.utils.weight_norm(L.nn.Linear(3, 2).double())
    b = L.nn.utils.spectral_norm(L.nn.Linear(3, 2).double())
    b.eval()
    wa, wb = a.weight.detach().clone(), b.weight.detach().clone()
    L.nn.utils.remove_weight_norm(a)
    L.nn.utils.remove_spectral_norm(b)
    return [sorted(a.state_dict()), sorted(b.state_dict()), type(a.weight).__name__,
            bool((a.weight - wa).abs().max() < 1e-12)]


add("examples:remove_norms", lambda: compare(_remove_norms(ft), _remove_norms(torch), "remove"))


# ---------------------------------------------------------------------------------------
# names PyTorch's examples import: diag and its kin, bitwise functions, PReLU, the padding
# layers, EmbeddingBag (values, grad_fn names and gradients against torch)

for _v, _args in (("vector", (randn(4),)), ("vector:above", (randn(3), 2)),
                  ("vector:below", (randn(3), -1)), ("matrix", (randn(3, 4),)),
                  ("matrix:above", (randn(3, 4), 1)), ("matrix:below", (randn(4, 3), -2))):
    add(f"examples:diag:{_v}", lambda a=_args: facade(
        lambda L, x: L.diag(x, *a[1:]), a[0]))
for _v, _args in (("default", (0, -2, -1)), ("offset", (1, 0, 2)), ("swapped", (-1, 2, 0)),
                  ("middle", (2, 1, -1))):
    add(f"examples:diag_embed:{_v}", lambda a=_args: facade(
        lambda L, x: L.diag_embed(x, *a), randn(2, 3)))
add("examples:diagflat", lambda: facade(lambda L, x: (L.diagflat(x), x.diagflat(-1)),
                                        randn(2, 2)))
add("examples:diag:3d", lambda: facade(lambda L, x: L.diag(x), randn(2, 2, 2),
                                       error=r"diag\(\): Supports 1D or 2D tensors\. Got 3D"))
add("examples:diag:inf", lambda: facade(lambda L: L.diag(L.tensor([1.0, float("inf")]))))
add("examples:bitwise", lambda: facade(lambda L: [
    L.bitwise_and(L.tensor([12, 10]), L.tensor([10, 3])), L.bitwise_or(L.tensor([12]), 3),
    L.bitwise_xor(L.tensor([True, False]), L.tensor([True, True])),
    L.bitwise_not(L.tensor([5, -1])), L.tensor([6]).bitwise_and(3),
    L.tensor([6]).bitwise_xor(L.tensor([5]))]))
add("examples:bitwise:float", lambda: facade(lambda L: L.bitwise_and(L.ones(2), L.ones(2)),
                                             error=r"bitwise_and_cpu.*not implemented for "
                                             r"'Float'"))


def _prelu(L, x, n):
    L.manual_seed(0)
    m = L.nn.PReLU(n).double()
    with L.no_grad():
        m.weight.copy_(L.arange(n, dtype=L.float64) * 0.1 + 0.2)
    y = m(x)
    y.backward(L.ones_like(y))
    return y, m.weight.grad, repr(m), L.nn.functional.prelu(x, m.weight)


_X = randn(2, 3, 4)
_X[0, 0, 0] = 0.0                       # the kink: x > 0 takes the identity branch
add("examples:prelu:shared", lambda: facade(lambda L, x: _prelu(L, x, 1), _X))
add("examples:prelu:channels", lambda: facade(lambda L, x: _prelu(L, x, 3), _X))
add("examples:prelu:mismatch", lambda: facade(lambda L, x: _prelu(L, x, 2), _X,
                                              error=r"Mismatch of parameter numbers and input "
                                              r"channel size"))

_PADS = {"Reflection": (), "Replication": (), "Circular": (), "Constant": (1.5,), "Zero": ()}
for _kind, _extra in _PADS.items():
    for _n in (1, 2, 3):
        for _pad in (2, tuple(range(1, 2 * _n + 1))):
            _tag = "int" if isinstance(_pad, int) else "tuple"
            add(f"examples:pad:{_kind}{_n}d:{_tag}", lambda k=_kind, n=_n, p=_pad, e=_extra:
                facade(lambda L, x: (lambda m: (m(x), repr(m)))(
                    getattr(L.nn, f"{k}Pad{n}d")(p, *e)), randn(*(2, 3, 6, 7, 8)[:n + 2])))


def _bag(L, w, psw, mode, layout, pad):
    idx = L.tensor([1, 2, 4, 5, 4, 3, 2])
    kw = dict(mode=mode, padding_idx=pad)
    if layout == "2d":
        idx, kw["offsets"] = idx[:6].reshape(2, 3), None
        psw = psw[:6].reshape(2, 3)
    elif layout == "offsets":
        kw["offsets"] = L.tensor([0, 2, 2, 5])      # an empty bag gives zeros
    else:
        kw.update(offsets=L.tensor([0, 2, 2, 5, 7]), include_last_offset=True)
    return L.nn.functional.embedding_bag(idx, w, per_sample_weights=psw if mode == "sum"
                                         else None, **kw)


for _mode in ("sum", "mean", "max"):
    for _layout in ("2d", "offsets", "last_offset"):
        for _pad in (None, 4):
            add(f"examples:embedding_bag:{_mode}:{_layout}:{'pad' if _pad else 'nopad'}",
                lambda m=_mode, lay=_layout, p=_pad: facade(
                    lambda L, w, s: _bag(L, w, s, m, lay, p), randn(6, 3), randn(7, seed=3)))


def _bag_module(L):
    L.manual_seed(0)
    m = L.nn.EmbeddingBag(10, 3, mode="sum", padding_idx=2).double()
    with L.no_grad():
        m.weight.copy_(L.arange(30, dtype=L.float64).reshape(10, 3) / 7)
    y = m(L.tensor([1, 2, 3, 9]), L.tensor([0, 3]))
    y.sum().backward()
    return y, m.weight.grad, repr(m), repr(L.nn.EmbeddingBag(5, 2))


add("examples:embedding_bag:module", lambda: facade(_bag_module))
add("examples:embedding_bag:no_indices", lambda: facade(lambda L, w: [
    L.nn.functional.embedding_bag(L.tensor([], dtype=L.int64), w, L.tensor([0, 0]), mode=m)
    for m in ("sum", "mean", "max")], randn(4, 3)))
add("examples:embedding_bag:psw_mode", lambda: facade(
    lambda L, w, s: L.nn.functional.embedding_bag(L.tensor([[1, 2]]), w, mode="mean",
                                                  per_sample_weights=s), randn(4, 2),
    randn(1, 2), error=r"per_sample_weights is only supported for mode='sum'"))

# ---------------------------------------------------------------------------------------
# the tests

oracle.register(*CASES)


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_oracle_examples(case_id):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        oracle.case(case_id, CASES[case_id])
