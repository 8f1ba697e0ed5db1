"""The four models of the model workloads, each written once as a function of the library
module ``L`` (``torch`` or ``functrans``), so that the same code builds PyTorch's model and
the facade's; their training steps, also written once; and the functional pieces the
``ft.jit`` and JAX versions share (the optimizers' updates over a dict of arrays, written
for any NumPy-like module).

- ``gpt``: nanoGPT's model.py at a small size (2 blocks, 4 heads, embedding 128, context 64,
  vocabulary 256): token and position embeddings, pre-LayerNorm blocks with causal
  ``scaled_dot_product_attention`` and an exact-GELU MLP, a final LayerNorm, an untied
  ``lm_head``; cross-entropy; AdamW.
- ``lstm_lm``: PyTorch's word_language_model RNNModel (LSTM): embedding 128, 2-layer LSTM of
  256 with dropout 0.2, a linear decoder to the vocabulary of 1,000 and log-softmax; NLL
  loss, ``clip_grad_norm_(0.25)``, SGD with lr 20 (the example's defaults), the hidden state
  carried (detached) from step to step.
- ``mnist_net``: PyTorch's mnist/main.py ``Net`` (two 3x3 convolutions, max-pool, dropout
  0.25 and 0.5, two linear layers, log-softmax), NLL loss, Adadelta(lr=1.0).
- ``resnet_block``: a CIFAR-style stem (3x3 conv 3->32, BatchNorm2d, ReLU), one basic
  residual block (conv-BN-ReLU-conv-BN, identity added, ReLU), global average pooling and a
  linear head to 10 classes; cross-entropy; SGD with momentum 0.9.

A library module needs ``nn`` (``Module``, ``Linear``, ``Embedding``, ``LayerNorm``,
``LSTM``, ``Conv2d``, ``BatchNorm2d``, ``Dropout``, ``functional``), ``optim``,
``manual_seed``, ``tril``, ``ones``, ``zeros`` and ``flatten``: torch's names, which the
facade has.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

import numpy as np


@dataclass(frozen=True)
class GPTConfig:
    vocab: int = 256
    block: int = 64           # context length
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 128
    batch: int = 16
    lr: float = 1e-3
    betas: tuple = (0.9, 0.95)
    weight_decay: float = 0.1


@dataclass(frozen=True)
class LSTMConfig:
    vocab: int = 1000
    emsize: int = 128
    nhid: int = 256
    nlayers: int = 2
    dropout: float = 0.2
    bptt: int = 35
    batch: int = 20
    lr: float = 20.0
    clip: float = 0.25


@dataclass(frozen=True)
class MnistConfig:
    batch: int = 64
    lr: float = 1.0           # Adadelta, as mnist/main.py


@dataclass(frozen=True)
class ResNetConfig:
    batch: int = 32
    width: int = 32
    classes: int = 10
    lr: float = 0.1
    momentum: float = 0.9


GPT, LSTM, MNIST, RESNET = GPTConfig(), LSTMConfig(), MnistConfig(), ResNetConfig()


# ---------------------------------------------------------------------------
# the models, as functions of the library module


@cache
def _gpt_classes(L):
    nn, F = L.nn, L.nn.functional

    class CausalSelfAttention(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            self.n_head, self.n_embd = cfg.n_head, cfg.n_embd
            self.c_attn = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
            self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd)

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
            q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            y = y.transpose(1, 2).contiguous().view(B, T, C)
            return self.c_proj(y)

    class MLP(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            self.c_fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd)
            self.gelu = nn.GELU()                       # exact (erf) GELU, as nanoGPT
            self.c_proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd)

        def forward(self, x):
            return self.c_proj(self.gelu(self.c_fc(x)))

    class Block(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            self.ln_1 = nn.LayerNorm(cfg.n_embd)
            self.attn = CausalSelfAttention(cfg)
            self.ln_2 = nn.LayerNorm(cfg.n_embd)
            self.mlp = MLP(cfg)

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPTModel(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            self.wte = nn.Embedding(cfg.vocab, cfg.n_embd)
            self.wpe = nn.Embedding(cfg.block, cfg.n_embd)
            self.h = nn.ModuleList([Block(cfg) for _ in range(cfg.n_layer)])
            self.ln_f = nn.LayerNorm(cfg.n_embd)
            self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab, bias=False)

        def forward(self, idx):
            pos = L.arange(idx.size(1))
            x = self.wte(idx) + self.wpe(pos)
            for block in self.h:
                x = block(x)
            return self.lm_head(self.ln_f(x))
    return GPTModel


@cache
def _lstm_classes(L):
    nn, F = L.nn, L.nn.functional

    class RNNModel(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            self.ntoken = cfg.vocab
            self.drop = nn.Dropout(cfg.dropout)
            self.encoder = nn.Embedding(cfg.vocab, cfg.emsize)
            self.rnn = nn.LSTM(cfg.emsize, cfg.nhid, cfg.nlayers, dropout=cfg.dropout)
            self.decoder = nn.Linear(cfg.nhid, cfg.vocab)

        def forward(self, input, hidden):
            emb = self.drop(self.encoder(input))
            output, hidden = self.rnn(emb, hidden)
            output = self.drop(output)
            decoded = self.decoder(output).view(-1, self.ntoken)
            return F.log_softmax(decoded, dim=1), hidden
    return RNNModel


@cache
def _mnist_classes(L):
    nn, F = L.nn, L.nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 32, 3, 1)
            self.conv2 = nn.Conv2d(32, 64, 3, 1)
            self.dropout1 = nn.Dropout(0.25)
            self.dropout2 = nn.Dropout(0.5)
            self.fc1 = nn.Linear(9216, 128)
            self.fc2 = nn.Linear(128, 10)

        def forward(self, x):
            x = F.relu(self.conv1(x))
            x = F.relu(self.conv2(x))
            x = F.max_pool2d(x, 2)
            x = self.dropout1(x)
            x = L.flatten(x, 1)
            x = F.relu(self.fc1(x))
            x = self.dropout2(x)
            return F.log_softmax(self.fc2(x), dim=1)
    return Net


@cache
def _resnet_classes(L):
    nn, F = L.nn, L.nn.functional

    class BasicBlock(nn.Module):
        def __init__(self, width):
            super().__init__()
            self.conv1 = nn.Conv2d(width, width, 3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(width)
            self.conv2 = nn.Conv2d(width, width, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(width)

        def forward(self, x):
            out = F.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            return F.relu(out + x)

    class ResNetBlock(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            self.conv = nn.Conv2d(3, cfg.width, 3, padding=1, bias=False)
            self.bn = nn.BatchNorm2d(cfg.width)
            self.block = BasicBlock(cfg.width)
            self.fc = nn.Linear(cfg.width, cfg.classes)

        def forward(self, x):
            x = F.relu(self.bn(self.conv(x)))
            x = self.block(x)
            x = F.adaptive_avg_pool2d(x, 1)
            return self.fc(L.flatten(x, 1))
    return ResNetBlock


def build_model(L, name):
    """A freshly initialized model ``name`` of library ``L`` (its own random init)."""
    if name == "gpt":
        return _gpt_classes(L)(GPT)
    if name == "lstm_lm":
        return _lstm_classes(L)(LSTM)
    if name == "mnist_net":
        return _mnist_classes(L)()
    if name == "resnet_block":
        return _resnet_classes(L)(RESNET)
    raise ValueError(f"no model {name!r}; known: gpt, lstm_lm, mnist_net, resnet_block")


def build_optimizer(L, name, params):
    """The model's optimizer, with the same hyperparameters in every library."""
    if name == "gpt":
        return L.optim.AdamW(params, lr=GPT.lr, betas=GPT.betas, weight_decay=GPT.weight_decay)
    if name == "lstm_lm":
        return L.optim.SGD(params, lr=LSTM.lr)
    if name == "mnist_net":
        return L.optim.Adadelta(params, lr=MNIST.lr)
    return L.optim.SGD(params, lr=RESNET.lr, momentum=RESNET.momentum)


HAS_DROPOUT = {"gpt": False, "lstm_lm": True, "mnist_net": True, "resnet_block": False}


def batch(name, seed=0):
    """The model's (input, target) as NumPy arrays, seeded: token ids as int64."""
    rng = np.random.default_rng(seed)
    if name == "gpt":
        ids = rng.integers(0, GPT.vocab, (GPT.batch, GPT.block + 1))
        return ids[:, :-1].copy(), ids[:, 1:].copy()
    if name == "lstm_lm":
        ids = rng.integers(0, LSTM.vocab, (LSTM.bptt + 1, LSTM.batch))
        return ids[:-1].copy(), ids[1:].copy()
    if name == "mnist_net":
        x = rng.standard_normal((MNIST.batch, 1, 28, 28)).astype(np.float32)
        return x, rng.integers(0, 10, MNIST.batch)
    x = rng.standard_normal((RESNET.batch, 3, 32, 32)).astype(np.float32)
    return x, rng.integers(0, RESNET.classes, RESNET.batch)


# ---------------------------------------------------------------------------
# the training steps, as functions of the library module


def loss_of(L, name, out, y):
    """The model's loss from its output: cross-entropy (GPT, ResNet) or NLL of the
    log-softmax the model ends with (LSTM, mnist)."""
    F = L.nn.functional
    if name == "gpt":
        return F.cross_entropy(out.view(-1, out.size(-1)), y.view(-1))
    if name == "resnet_block":
        return F.cross_entropy(out, y)
    return F.nll_loss(out, y.reshape(-1))


class Trainer:
    """One model, its optimizer and its step in library ``L``; ``forward`` is the model or
    a compiled wrapper of it (``ft.compile(model)``, ``torch.compile(model)``).

    ``step(x, y)`` runs one training step as the PyTorch examples write it and returns the
    loss tensor; the LSTM carries its hidden state, detached, from step to step."""

    def __init__(self, L, name, model, compile=None):
        self.L, self.name, self.model = L, name, model
        self.opt = build_optimizer(L, name, model.parameters())
        self.forward = compile(model) if compile is not None else model
        self.hidden = None

    def step(self, x, y):
        L = self.L
        self.opt.zero_grad(set_to_none=True)
        if self.name == "lstm_lm":
            if self.hidden is None:
                self.hidden = init_hidden(L)
            hidden = tuple(h.detach() for h in self.hidden)
            out, self.hidden = self.forward(x, hidden)
            loss = loss_of(L, self.name, out, y)
            loss.backward()
            L.nn.utils.clip_grad_norm_(self.model.parameters(), LSTM.clip)
        else:
            loss = loss_of(L, self.name, self.forward(x), y)
            loss.backward()
        self.opt.step()
        return loss


def init_hidden(L):
    """The LSTM's zero (h, c), as RNNModel.init_hidden."""
    shape = (LSTM.nlayers, LSTM.batch, LSTM.nhid)
    return L.zeros(*shape), L.zeros(*shape)


# ---------------------------------------------------------------------------
# functional optimizers over {name: array} dicts, for any NumPy-like module ``xp``
# (functrans.numpy, jax.numpy): the same arithmetic as torch.optim's single-tensor updates


def adamw_init(xp, params):
    return {"t": xp.zeros((), np.float32),
            "m": {k: xp.zeros_like(p) for k, p in params.items()},
            "v": {k: xp.zeros_like(p) for k, p in params.items()}}


def adamw_update(xp, params, grads, state, lr=GPT.lr, betas=GPT.betas,
                 weight_decay=GPT.weight_decay, eps=1e-8):
    """torch.optim.AdamW's step: decoupled decay, bias-corrected moments."""
    b1, b2 = betas
    t = state["t"] + 1
    bc1, bc2 = 1 - b1 ** t, 1 - b2 ** t
    new_p, new_m, new_v = {}, {}, {}
    for k, p in params.items():
        g = grads[k]
        m = b1 * state["m"][k] + (1 - b1) * g
        v = b2 * state["v"][k] + (1 - b2) * g * g
        denom = xp.sqrt(v) / xp.sqrt(bc2) + eps
        new_p[k] = p * (1 - lr * weight_decay) - (lr / bc1) * m / denom
        new_m[k], new_v[k] = m, v
    return new_p, {"t": t, "m": new_m, "v": new_v}


def adadelta_init(xp, params):
    return {"sq": {k: xp.zeros_like(p) for k, p in params.items()},
            "acc": {k: xp.zeros_like(p) for k, p in params.items()}}


def adadelta_update(xp, params, grads, state, lr=MNIST.lr, rho=0.9, eps=1e-6):
    """torch.optim.Adadelta's step."""
    new_p, sq, acc = {}, {}, {}
    for k, p in params.items():
        g = grads[k]
        s = rho * state["sq"][k] + (1 - rho) * g * g
        delta = xp.sqrt(state["acc"][k] + eps) / xp.sqrt(s + eps) * g
        acc[k] = rho * state["acc"][k] + (1 - rho) * delta * delta
        new_p[k], sq[k] = p - lr * delta, s
    return new_p, {"sq": sq, "acc": acc}


# the functional optimizers of the models that have an ft.jit / JAX version: (init, update)
OPTIMIZERS = {"gpt": (adamw_init, adamw_update), "mnist_net": (adadelta_init, adadelta_update)}


def cross_entropy(xp, log_probs, y):
    """mean of -log_probs[i, y[i]] over the rows (log_probs already log-softmaxed)."""
    picked = xp.take_along_axis(log_probs, y[:, None], axis=1)
    return -xp.mean(picked)


def layer_norm(xp, x, w, b, eps=1e-5):
    mu = xp.mean(x, axis=-1, keepdims=True)
    var = xp.mean((x - mu) ** 2, axis=-1, keepdims=True)
    return (x - mu) / xp.sqrt(var + eps) * w + b


def gpt_logits(xp, nnf, p, idx):
    """The GPT forward over a dict of torch's parameter names, for xp = jax.numpy (nnf =
    jax.nn): the JAX version of ``_gpt_classes``' model."""
    B, T = idx.shape
    C, H = GPT.n_embd, GPT.n_head
    x = p["wte.weight"][idx] + p["wpe.weight"][:T]
    mask = np.tril(np.ones((T, T), bool))
    for i in range(GPT.n_layer):
        pre = f"h.{i}."
        h = layer_norm(xp, x, p[pre + "ln_1.weight"], p[pre + "ln_1.bias"])
        qkv = h @ p[pre + "attn.c_attn.weight"].T + p[pre + "attn.c_attn.bias"]
        q, k, v = (qkv[..., j * C:(j + 1) * C].reshape(B, T, H, C // H).transpose(0, 2, 1, 3)
                   for j in range(3))
        s = (q @ k.transpose(0, 1, 3, 2)) / math.sqrt(C // H)
        a = nnf.softmax(xp.where(mask, s, -np.inf), axis=-1)
        y = (a @ v).transpose(0, 2, 1, 3).reshape(B, T, C)
        x = x + y @ p[pre + "attn.c_proj.weight"].T + p[pre + "attn.c_proj.bias"]
        h = layer_norm(xp, x, p[pre + "ln_2.weight"], p[pre + "ln_2.bias"])
        h = nnf.gelu(h @ p[pre + "mlp.c_fc.weight"].T + p[pre + "mlp.c_fc.bias"],
                     approximate=False)
        x = x + h @ p[pre + "mlp.c_proj.weight"].T + p[pre + "mlp.c_proj.bias"]
    x = layer_norm(xp, x, p["ln_f.weight"], p["ln_f.bias"])
    return x @ p["lm_head.weight"].T


def gpt_loss(xp, nnf, p, idx, y):
    logits = gpt_logits(xp, nnf, p, idx)
    return cross_entropy(xp, nnf.log_softmax(logits.reshape(-1, GPT.vocab), axis=-1),
                         y.reshape(-1))


def mnist_log_probs(jax, p, x, key, train):
    """The mnist Net forward over torch's parameter names in JAX (jax.numpy and lax):
    dropout from ``key`` when ``train``."""
    jnp, lax = jax.numpy, jax.lax

    def conv(h, k):
        out = lax.conv_general_dilated(h, p[k + ".weight"], (1, 1), "VALID",
                                       dimension_numbers=("NCHW", "OIHW", "NCHW"))
        return out + p[k + ".bias"][None, :, None, None]

    def dropout(key, h, rate):
        keep = jax.random.bernoulli(key, 1 - rate, h.shape)
        return jnp.where(keep, h / (1 - rate), 0)
    k1, k2 = jax.random.split(key)
    h = jax.nn.relu(conv(x, "conv1"))
    h = jax.nn.relu(conv(h, "conv2"))
    h = lax.reduce_window(h, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
    if train:
        h = dropout(k1, h, 0.25)
    h = jax.nn.relu(h.reshape(h.shape[0], -1) @ p["fc1.weight"].T + p["fc1.bias"])
    if train:
        h = dropout(k2, h, 0.5)
    return jax.nn.log_softmax(h @ p["fc2.weight"].T + p["fc2.bias"], axis=1)
