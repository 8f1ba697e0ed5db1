"""A JAX program run on functrans: a character-level GRU language model written as in JAX
(parameters from nn.initializers, the recurrence as lax.scan, Adam from
example_libraries.optimizers, a jitted update), with only its imports renamed from
`jax` to `functrans`. The data are NumPy's int64 token arrays; as in JAX they become int32
(and NumPy float64 would become float32) at the entry points, so the model trains in
float32 and its losses match JAX's (docs/porting_jax.md, "Running JAX programs").

    python examples/jax_gru_language_model.py [steps]
"""
import sys
import time

import numpy as np

import functrans as jax
import functrans.numpy as jnp
from functrans import lax, random
from functrans.example_libraries import optimizers
from functrans.nn import initializers

VOCAB, EMBED, HIDDEN, SEQ, BATCH = 16, 8, 32, 20, 8


def init_params(key):
    ks = random.split(key, 8)
    glorot, orth = initializers.glorot_normal(), initializers.orthogonal()
    p = {"embed": random.normal(ks[0], (VOCAB, EMBED)) * 0.1}
    for i, g in enumerate("zrh"):
        p["W" + g] = glorot(ks[1 + i], (EMBED, HIDDEN))
        p["U" + g] = orth(ks[4 + i], (HIDDEN, HIDDEN))
        p["b" + g] = initializers.zeros(None, (HIDDEN,))
    p["Wout"] = initializers.lecun_normal()(ks[7], (HIDDEN, VOCAB))
    p["bout"] = initializers.zeros(None, (VOCAB,))
    return p


def gru_cell(p, h, x):
    z = jax.nn.sigmoid(x @ p["Wz"] + h @ p["Uz"] + p["bz"])
    r = jax.nn.sigmoid(x @ p["Wr"] + h @ p["Ur"] + p["br"])
    c = jnp.tanh(x @ p["Wh"] + (r * h) @ p["Uh"] + p["bh"])
    h = (1 - z) * h + z * c
    return h, h


def loss(p, batch):
    inputs, targets = batch                      # (BATCH, SEQ) token ids
    xs = jnp.swapaxes(p["embed"][inputs], 0, 1)  # (SEQ, BATCH, EMBED)
    h0 = jnp.zeros((inputs.shape[0], HIDDEN))
    _, hs = lax.scan(lambda h, x: gru_cell(p, h, x), h0, xs)
    logits = hs @ p["Wout"] + p["bout"]          # (SEQ, BATCH, VOCAB)
    logp = jax.nn.log_softmax(logits)
    onehot = jax.nn.one_hot(jnp.swapaxes(targets, 0, 1), VOCAB)
    return -jnp.mean(jnp.sum(logp * onehot, axis=-1))


def data(num_batches, seed=0):
    rng = np.random.RandomState(seed)
    pattern = rng.randint(0, VOCAB, size=7)
    for _ in range(num_batches):
        starts = rng.randint(0, 7, size=BATCH)
        seqs = pattern[(starts[:, None] + np.arange(SEQ + 1)) % 7]
        flip = rng.rand(BATCH, SEQ + 1) < 0.1
        seqs = np.where(flip, rng.randint(0, VOCAB, size=seqs.shape), seqs)   # int64
        yield seqs[:, :-1], seqs[:, 1:]


def train(params, steps=60, step_size=0.01):
    opt_init, opt_update, get_params = optimizers.adam(step_size)

    @jax.jit
    def update(i, opt_state, batch):
        value, grads = jax.value_and_grad(loss)(get_params(opt_state), batch)
        return opt_update(i, grads, opt_state), value

    opt_state = opt_init(params)
    losses = []
    for i, batch in enumerate(data(steps)):
        opt_state, value = update(i, opt_state, batch)
        losses.append(float(value))
    return get_params(opt_state), losses


if __name__ == "__main__":
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 60
    t0 = time.time()
    params, losses = train(init_params(random.PRNGKey(0)), steps)
    for i in range(0, steps, 10):
        print(f"step {i}: loss {losses[i]:.4f}")
    dtypes = sorted({str(v.dtype) for v in params.values()})
    print(f"final loss {losses[-1]:.4f}; params {dtypes}; {time.time() - t0:.1f} s")
    assert dtypes == ["float32"] and losses[-1] < 0.6 * losses[0], (dtypes, losses)
