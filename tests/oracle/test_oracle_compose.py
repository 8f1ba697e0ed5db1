"""Layers composed in pairs train as PyTorch trains them: every ordered pair of eleven
common layers (recurrent ones included) followed by a Linear head, six SGD steps with two
batch sizes alternating (so each structure's first-sight, derived and cached backward
programs all run), from the same float64 weights: loss, every .grad and every parameter
after each step (oracle.train). A recurrent layer with anything after it used to raise
at step 3 (issue 29)."""
import numpy as np
import pytest

import oracle

D = 8


def layers(lib):
    """name -> constructor of a (seq, batch, D) -> (seq, batch, D) layer of lib."""
    nn = lib.nn

    class Outputs(nn.Module):          # a recurrent layer's output sequence
        def __init__(self, rnn):
            super().__init__()
            self.rnn = rnn

        def forward(self, x):
            return self.rnn(x)[0]

    class SelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = nn.MultiheadAttention(D, 2, dropout=0.0)

        def forward(self, x):
            return self.attn(x, x, x)[0]

    return {
        "Linear": lambda: nn.Linear(D, D),
        "LSTM": lambda: Outputs(nn.LSTM(D, D)),
        "GRU": lambda: Outputs(nn.GRU(D, D)),
        "RNN": lambda: Outputs(nn.RNN(D, D)),
        "BiLSTM2": lambda: Outputs(nn.LSTM(D, D // 2, num_layers=2, bidirectional=True)),
        "MultiheadAttention": SelfAttention,
        "TransformerEncoderLayer": lambda: nn.TransformerEncoderLayer(
            D, 2, dim_feedforward=16, dropout=0.0),
        "LayerNorm": lambda: nn.LayerNorm(D),
        "GELU": nn.GELU,
        "Tanh": nn.Tanh,
        "ReLU": nn.ReLU,
    }


NAMES = list(layers(oracle.torch))
PAIRS = oracle.register(*[f"compose:{a}+{b}" for a in NAMES for b in NAMES])


@pytest.mark.parametrize("case_id", PAIRS)
def test_pair_trains_as_pytorch(case_id):
    first, second = case_id.split(":")[1].split("+")
    rng = np.random.default_rng(0)
    batches = [(rng.standard_normal((5, b, D)), rng.integers(0, 7, 5 * b)) for b in (3, 2)]

    def build(lib):
        made = layers(lib)
        model = lib.nn.Sequential(made[first](), made[second](), lib.nn.Linear(D, 7)).double()
        loss = lambda m, x, y: lib.nn.functional.cross_entropy(m(x).reshape(-1, 7), y)  # noqa: E731
        return model, lib.optim.SGD(model.parameters(), lr=0.1), loss

    oracle.case(case_id, lambda: oracle.train(build, batches, steps=6))
