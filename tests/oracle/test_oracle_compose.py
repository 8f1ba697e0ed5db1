"""Layers composed train as PyTorch trains them, across time (issue 29).

Every model here is trained six SGD steps with two batch sizes alternating (so each
structure's first-sight, derived and cached backward programs all run) from the same float64
weights as PyTorch's, comparing the loss, every .grad and every parameter after each step
(oracle.train):

- `compose:A+B`: every ordered pair of the 16 sequence layers of `sequence_layers`
  ((seq, batch, D) -> (seq, batch, D): recurrent ones, attention with and without a causal
  mask, a transformer layer, Conv1d and BatchNorm1d over the sequence, normalization,
  activations) followed by a Linear head; and `compose:Embedding+A`, integer tokens through
  an Embedding into each of them. A recurrent layer with anything after it used to raise
  at step 3.
- `compose:img:A+B`: every ordered pair of the 9 image layers of `image_layers`
  ((batch, C, H, W) -> (batch, C, H', W'): convolutions, pooling, normalization) followed
  by Flatten and a Linear head.
- `compose:A+B+C`, `compose:img:A+B+C`: a fixed sample of 54 triples of both families,
  the recurrent layers drawn three times as often.
- `compose:tbptt:R`: PyTorch's word-language-model (Embedding -> R -> Linear) with the
  hidden state detached and carried from step to step, sequence lengths alternating.
- `compose:interleaved`: seven models of both families (two of the same structure) trained
  a step of each in turn, so that whatever the engine keeps per structure sees structures
  alternate.
- `compose:stress`: 600 distinct small graphs, about three times what the cache of derived
  programs holds under the test's budget, each differentiated three times at growing
  distances by `.backward()` and by `ft.grad`, every gradient compared with PyTorch's.

Dropout2d is not in `ft.nn` yet; it joins the image family when it is.

No case may see functrans' InternalEngineError: oracle.case fails with EngineBug on one,
even for a case listed in docs/oracle.md.
"""
import contextlib
import itertools
import random
from types import SimpleNamespace

import numpy as np
import pytest

import oracle
from functrans.backends import memory

D, SEQ, VOCAB, CLASSES = 8, 5, 11, 7     # features, sequence length, vocabulary, classes
C, SIDE = 4, 8                           # image channels (GroupNorm has 2 groups) and side
BATCHES = (3, 2)                         # alternating batch sizes
STEPS = 6


def sequence_layers(lib):
    """name -> constructor of a (seq, batch, D) -> (seq, batch, D) layer of lib."""
    nn = lib.nn

    class Outputs(nn.Module):          # a recurrent layer's output sequence
        def __init__(self, rnn, batch_first=False):
            super().__init__()
            self.rnn, self.batch_first = rnn, batch_first

        def forward(self, x):
            if self.batch_first:
                return self.rnn(x.transpose(0, 1))[0].transpose(0, 1)
            return self.rnn(x)[0]

    class SelfAttention(nn.Module):
        def __init__(self, causal=False):
            super().__init__()
            self.attn, self.causal = nn.MultiheadAttention(D, 2, dropout=0.0), causal

        def forward(self, x):
            n = x.shape[0]
            mask = lib.ones(n, n, dtype=lib.bool).triu(1) if self.causal else None
            return self.attn(x, x, x, attn_mask=mask)[0]

    class Decoder(nn.Module):          # causal self-attention, then attention to x itself
        def __init__(self):
            super().__init__()
            self.layer = nn.TransformerDecoderLayer(D, 2, dim_feedforward=16, dropout=0.0)

        def forward(self, x):
            mask = nn.Transformer.generate_square_subsequent_mask(x.shape[0], dtype=x.dtype)
            return self.layer(x, x, tgt_mask=mask, tgt_is_causal=True)

    class OverSequence(nn.Module):     # a (batch, D, seq) layer applied to (seq, batch, D)
        def __init__(self, layer):
            super().__init__()
            self.layer = layer

        def forward(self, x):
            return self.layer(x.permute(1, 2, 0)).permute(2, 0, 1)

    return {
        "Linear": lambda: nn.Linear(D, D),
        "LSTM": lambda: Outputs(nn.LSTM(D, D)),
        "GRU": lambda: Outputs(nn.GRU(D, D)),
        "RNN": lambda: Outputs(nn.RNN(D, D)),
        "BiLSTM2": lambda: Outputs(nn.LSTM(D, D // 2, num_layers=2, bidirectional=True)),
        "MultiheadAttention": SelfAttention,
        "TransformerEncoderLayer": lambda: nn.TransformerEncoderLayer(
            D, 2, dim_feedforward=16, dropout=0.0),
        "TransformerDecoderLayer": Decoder,
        "LayerNorm": lambda: nn.LayerNorm(D),
        "GELU": nn.GELU,
        "Tanh": nn.Tanh,
        "ReLU": nn.ReLU,
        "Conv1d": lambda: OverSequence(nn.Conv1d(D, D, 3, padding=1)),
        "BatchNorm1d": lambda: OverSequence(nn.BatchNorm1d(D)),
        "Dropout": lambda: nn.Dropout(0.0),
        "CausalAttention": lambda: SelfAttention(causal=True),
        "LSTMProj": lambda: Outputs(nn.LSTM(D, 12, batch_first=True, proj_size=D),
                                    batch_first=True),
    }


def image_layers(lib):
    """name -> constructor of a (batch, C, H, W) -> (batch, C, H', W') layer of lib; any
    three of them in a row leave at least 1 x 1 of an 8 x 8 image."""
    nn = lib.nn
    return {
        "Conv2d": lambda: nn.Conv2d(C, C, 3, padding=1),
        "Conv2dStrided": lambda: nn.Conv2d(C, C, 3, stride=2, padding=1, groups=2),
        "MaxPool2d": lambda: nn.MaxPool2d(2),
        "AvgPool2d": lambda: nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False),
        "AdaptiveAvgPool2d": lambda: nn.AdaptiveAvgPool2d((4, 5)),  # uneven, overlapping bins
        "BatchNorm2d": lambda: nn.BatchNorm2d(C),
        "GroupNorm": lambda: nn.GroupNorm(2, C),
        "ReLU": nn.ReLU,
        "Dropout": lambda: nn.Dropout(0.0),
    }


SEQ_NAMES = list(sequence_layers(oracle.torch))
IMG_NAMES = list(image_layers(oracle.torch))
RECURRENT = {"LSTM", "GRU", "RNN", "BiLSTM2", "LSTMProj"}


def parse(case_id):
    """'compose:A+B' -> ('seq', [A, B]); 'compose:img:A+B' -> ('img', [A, B])."""
    parts = case_id.split(":")
    return ("img" if parts[1] == "img" else "seq"), parts[-1].split("+")


def sample_triples(count=54, seed=29):
    """A fixed sample of distinct triples: 40 of the sequence family (a leading Embedding
    allowed), 14 of the image family; recurrent layers weigh three times the others."""
    rng = random.Random(seed)
    seq_weights = [3 if n in RECURRENT else 1 for n in SEQ_NAMES]
    out = []
    while len(out) < count:
        if len(out) < 40:
            first = ["Embedding"] if rng.random() < 0.2 else rng.choices(SEQ_NAMES, seq_weights)
            triple = first + rng.choices(SEQ_NAMES, seq_weights, k=3 - len(first))
            case_id = "compose:" + "+".join(triple)
        else:
            case_id = "compose:img:" + "+".join(rng.choices(IMG_NAMES, k=3))
        if case_id not in out:
            out.append(case_id)
    return out


PAIRS = oracle.register(*[f"compose:{a}+{b}" for a in SEQ_NAMES for b in SEQ_NAMES],
                        *[f"compose:Embedding+{b}" for b in SEQ_NAMES])
IMAGE_PAIRS = oracle.register(*[f"compose:img:{a}+{b}" for a in IMG_NAMES for b in IMG_NAMES])
TRIPLES = oracle.register(*sample_triples())


def setup(case_id, seed=0):
    """(build, batches) of oracle.train for a 'compose:...' id of either family."""
    family, names = parse(case_id)
    rng = np.random.default_rng(seed)
    nn_t = oracle.torch.nn
    if family == "img":
        batches = [(rng.standard_normal((b, C, SIDE, SIDE)), rng.integers(0, CLASSES, b))
                   for b in BATCHES]
        made = image_layers(oracle.torch)
        with oracle.torch.no_grad():      # the head's width: the layers' output size
            probe = nn_t.Sequential(*[made[n]() for n in names]).eval()
            width = probe(oracle.torch.zeros(1, C, SIDE, SIDE)).numel()

        def build(lib):
            made = image_layers(lib)
            model = lib.nn.Sequential(*[made[n]() for n in names], lib.nn.Flatten(),
                                      lib.nn.Linear(width, CLASSES)).double()
            loss = lambda m, x, y: lib.nn.functional.cross_entropy(m(x), y)  # noqa: E731
            return model, lib.optim.SGD(model.parameters(), lr=0.1), loss
        return build, batches

    tokens = names[0] == "Embedding"
    batches = [((rng.integers(0, VOCAB, (SEQ, b)) if tokens else
                 rng.standard_normal((SEQ, b, D))), rng.integers(0, CLASSES, SEQ * b))
               for b in BATCHES]

    def build(lib):
        made = sequence_layers(lib)
        made["Embedding"] = lambda: lib.nn.Embedding(VOCAB, D)
        model = lib.nn.Sequential(*[made[n]() for n in names],
                                  lib.nn.Linear(D, CLASSES)).double()
        loss = lambda m, x, y: lib.nn.functional.cross_entropy(  # noqa: E731
            m(x).reshape(-1, CLASSES), y)
        return model, lib.optim.SGD(model.parameters(), lr=0.1), loss
    return build, batches


@pytest.mark.parametrize("case_id", PAIRS)
def test_pair_trains_as_pytorch(case_id):
    build, batches = setup(case_id)
    oracle.case(case_id, lambda: oracle.train(build, batches, steps=STEPS))


@pytest.mark.parametrize("case_id", IMAGE_PAIRS)
def test_image_pair_trains_as_pytorch(case_id):
    build, batches = setup(case_id)
    oracle.case(case_id, lambda: oracle.train(build, batches, steps=STEPS))


@pytest.mark.parametrize("case_id", TRIPLES)
def test_triple_trains_as_pytorch(case_id):
    build, batches = setup(case_id)
    oracle.case(case_id, lambda: oracle.train(build, batches, steps=STEPS))


RECURRENT_KINDS = {"LSTM": ("LSTM", {}), "GRU": ("GRU", {}), "RNN": ("RNN", {}),
                   "BiLSTM2": ("LSTM", dict(num_layers=2, bidirectional=True))}


@pytest.mark.parametrize("case_id", oracle.register(
    *[f"compose:tbptt:{k}" for k in RECURRENT_KINDS]))
def test_hidden_state_carried_across_steps(case_id):
    """PyTorch's word-language-model: Embedding -> recurrent layer -> Linear, the hidden
    state of each step detached and fed to the next (truncated backpropagation through
    time), the sequence length alternating between 5 and 3 (a short last chunk)."""
    kind = case_id.rsplit(":", 1)[1]
    rng = np.random.default_rng(0)
    batches = [(rng.integers(0, VOCAB, (n, 3)), rng.integers(0, CLASSES, n * 3))
               for n in (SEQ, 3)]

    def build(lib):
        nn = lib.nn

        class LanguageModel(nn.Module):
            def __init__(self):
                super().__init__()
                cls, kw = RECURRENT_KINDS[kind]
                self.embed = nn.Embedding(VOCAB, D)
                self.rnn = getattr(nn, cls)(D, D, **kw)
                self.decode = nn.Linear(2 * D if kw else D, CLASSES)
                self.hidden = None

            def forward(self, x):
                out, h = self.rnn(self.embed(x), self.hidden)
                self.hidden = tuple(t.detach() for t in h) if isinstance(h, tuple) \
                    else h.detach()
                return self.decode(out)

        model = LanguageModel().double()
        loss = lambda m, x, y: lib.nn.functional.cross_entropy(  # noqa: E731
            m(x).reshape(-1, CLASSES), y)
        return model, lib.optim.SGD(model.parameters(), lr=0.1), loss

    oracle.case(case_id, lambda: oracle.train(build, batches, steps=STEPS))


INTERLEAVED = ("compose:Embedding+LSTM", "compose:GRU+MultiheadAttention",
               "compose:img:Conv2d+MaxPool2d", "compose:Conv1d+BatchNorm1d",
               "compose:BiLSTM2+TransformerEncoderLayer",
               "compose:img:BatchNorm2d+AdaptiveAvgPool2d",
               "compose:Embedding+LSTM")   # the same structure again, other data


@pytest.mark.parametrize("case_id", oracle.register("compose:interleaved"))
def test_structures_trained_in_turn(case_id):
    """One step of each model in turn, six rounds: the engine sees seven structures (two of
    them the same) alternate, each between two batch sizes."""
    def run():
        trainings = [oracle.training(*setup(spec, seed=i), steps=STEPS)
                     for i, spec in enumerate(INTERLEAVED)]
        oracle.interleaved(trainings)
    oracle.case(case_id, run)


# ---------------------------------------------------------------------------------------
# more structures than the backward caches hold
UNARY = {
    "tanh": lambda ops, y, w: ops.tanh(y),
    "sin": lambda ops, y, w: ops.sin(y),
    "sigmoid": lambda ops, y, w: ops.sigmoid(y),
    "softplus": lambda ops, y, w: ops.softplus(y),
    "square": lambda ops, y, w: y * y,
    "scale": lambda ops, y, w: y * w,           # the weight every structure shares
    "shift": lambda ops, y, w: y + ops.sum(w),
    "relu": lambda ops, y, w: ops.relu(y) + 0.5 * y,
}
STRESS_SHAPES = ((2, 4), (3, 4))


def namespaces():
    """The ops of UNARY in torch, the facade and the functional side (functrans.numpy)."""
    def facade(lib):
        return SimpleNamespace(tanh=lib.tanh, sin=lib.sin, sigmoid=lib.sigmoid,
                               softplus=lib.nn.functional.softplus, relu=lib.relu,
                               sum=lambda a: a.sum())
    ft = oracle.ft
    return (facade(oracle.torch), facade(ft),
            SimpleNamespace(tanh=oracle.fnp.tanh, sin=oracle.fnp.sin, sigmoid=ft.nn.sigmoid,
                            softplus=ft.nn.softplus, relu=ft.nn.relu, sum=oracle.fnp.sum))


def stress_structures(count=600):
    """count distinct (ops, shape) graphs: three ops of UNARY (512 sequences) at each of two
    input shapes, in a fixed order that mixes the shapes."""
    every = [(ops, shape) for ops in itertools.product(UNARY, repeat=3)
             for shape in STRESS_SHAPES]
    random.Random(600).shuffle(every)
    return every[:count]


def stress_loss(ops, chain, x, w):
    for op in chain:
        x = UNARY[op](ops, x, w)
    return ops.sum(x * x)


STRESS_REVISITS = (0, 30, 200)   # each structure is run at these steps after its first
STRESS_BUDGET = 8 << 20          # bytes of derived programs kept: about 200 structures


def stress_schedule(count):
    """Structure indices in running order: structure j at steps j, j + 30 and j + 200. The
    first run of a structure goes node by node, the second derives its program, the third
    finds the program kept or (most of the time, under STRESS_BUDGET) evicted."""
    order = []
    for step in range(count + max(STRESS_REVISITS)):
        order += [step - d for d in STRESS_REVISITS if 0 <= step - d < count]
    return order


@contextlib.contextmanager
def derived_budget(limit):
    """The byte budget of functrans' one cache of derived programs set to limit for the
    block; yields the cache."""
    cache = memory.DERIVED
    saved, cache.limit = cache.limit, limit
    try:
        yield cache
    finally:
        cache.limit = saved


@pytest.mark.usefixtures("x64")     # ft.grad of float64 inputs, compared with torch in float64
@pytest.mark.parametrize("case_id", oracle.register("compose:stress"))
def test_more_structures_than_caches_hold(case_id):
    """600 distinct graphs, about three times what an 8 MiB budget of derived programs
    holds, each run three times (stress_schedule) through `.backward()` (a weight shared by
    all of them accumulating its .grad) and through `ft.grad`: every gradient equals
    PyTorch's."""
    structures = stress_structures()
    rng = np.random.default_rng(0)
    inputs = {shape: rng.standard_normal(shape) for shape in STRESS_SHAPES}
    w0 = rng.standard_normal(4)
    torch, ft = oracle.torch, oracle.ft
    t_ops, f_ops, fn_ops = namespaces()

    def run():
        tw, fw = torch.tensor(w0, requires_grad=True), ft.tensor(w0, requires_grad=True)
        tw_total = None                  # torch's w.grad: None until a graph uses w
        with derived_budget(STRESS_BUDGET) as cache:
            evictions = cache.stats()["evictions"]
            for n, k in enumerate(stress_schedule(len(structures))):
                chain, shape = structures[k]
                where = f"run {n}, structure {k} ({'+'.join(chain)} on {shape})"
                tx = torch.tensor(inputs[shape], requires_grad=True)
                tgx, tgw = torch.autograd.grad(stress_loss(t_ops, chain, tx, tw), (tx, tw),
                                               allow_unused=True, materialize_grads=True)
                if {"scale", "shift"} & set(chain):
                    tw_total = tgw if tw_total is None else tw_total + tgw
                fx = ft.tensor(inputs[shape], requires_grad=True)
                stress_loss(f_ops, chain, fx, fw).backward()
                oracle.compare((fx.grad, fw.grad), (tgx, tw_total), f"{where}: .backward()",
                               grad_fn=False)
                grads = ft.grad(lambda x, w: stress_loss(fn_ops, chain, x, w),
                                argnums=(0, 1))(inputs[shape], w0)
                oracle.compare(grads, (tgx, tgw), f"{where}: ft.grad", grad_fn=False)
            assert cache.stats()["evictions"] > evictions + len(structures), \
                "the stress test no longer overflows the derived-program cache"
    oracle.case(case_id, run)


# ---------------------------------------------------------------------------------------
def test_internal_engine_errors_fail_every_case():
    """An InternalEngineError is never a result: oracle.case fails with EngineBug on one,
    also for a case docs/oracle.md lists as differing, and oracle.facade does not compare it
    as an error."""
    class InternalEngineError(oracle.ft.FunctransError):   # matched by name, as the real one
        pass

    def crash(*_):
        raise InternalEngineError("backward program reads (7, 0), which no node saved")

    listed = next(iter(oracle.deviations()))
    for case_id in ("compose:Linear+Linear", listed):
        with pytest.raises(oracle.EngineBug, match="reached public API"):
            oracle.case(case_id, crash)
    with pytest.raises(oracle.EngineBug):
        oracle.facade(lambda lib, x: crash() if lib is oracle.ft else x.relu(), np.ones(2))
