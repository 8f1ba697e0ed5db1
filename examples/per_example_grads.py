"""Per-example gradients with ft.vmap(ft.grad(loss)), and DP-SGD built on them.

DP-SGD (Abadi et al., 2016) needs each example's gradient separately: every one is clipped
to L2 norm C, the clipped gradients are averaged, and Gaussian noise of scale sigma * C / B
is added before the step. With vmap the per-example gradients are one batched program
instead of B separate backward passes.
With the `examples` extra: a progress bar, and figures/per_example_grads.png (the
distribution of the per-example gradient norms against the clip norm, and the loss).
"""
import time

import numpy as np

import functrans as ft
import functrans.numpy as fnp
from _extras import figure, log, progress

CLIP_NORM = 1.0          # C
NOISE_MULTIPLIER = 0.5   # sigma
LEARNING_RATE = 0.5
BATCH = 64
EPOCHS = 8


def init_params(rng, sizes=(10, 32, 3)):
    return [(rng.standard_normal((m, n)) / np.sqrt(m), np.zeros(n)) for m, n in
            zip(sizes[:-1], sizes[1:])]


def predict(params, x):
    (w1, b1), (w2, b2) = params
    return fnp.tanh(x @ w1 + b1) @ w2 + b2


def loss(params, x, label):
    """Cross-entropy of ONE example: x has shape (10,), label is an integer class."""
    return -ft.nn.log_softmax(predict(params, x))[label]


per_example_grads = ft.vmap(ft.grad(loss), in_axes=(None, 0, 0))


def dp_gradient(params, x, labels, key):
    """Clip each example's gradient to norm CLIP_NORM, average, add Gaussian noise."""
    grads = per_example_grads(params, x, labels)         # every leaf has a leading batch axis
    leaves, tree = ft.tree_flatten(grads)
    sq = sum(fnp.sum(g.reshape(g.shape[0], -1) ** 2, axis=1) for g in leaves)
    norms = fnp.sqrt(sq)                                  # (B,) per-example global norms
    scale = fnp.minimum(1.0, CLIP_NORM / (norms + 1e-12))
    keys = ft.random.split(key, len(leaves))
    noisy = []
    for g, k in zip(leaves, keys):
        clipped = fnp.mean(g * scale.reshape((-1,) + (1,) * (g.ndim - 1)), axis=0)
        noise = ft.random.normal(k, clipped.shape, dtype=clipped.dtype)
        noisy.append(clipped + NOISE_MULTIPLIER * CLIP_NORM / x.shape[0] * noise)
    return ft.tree_unflatten(tree, noisy), norms


def make_data(rng, n=1024):
    """Three Gaussian blobs in 10 dimensions."""
    centers = rng.standard_normal((3, 10)) * 0.6
    labels = rng.integers(0, 3, n).astype(np.int32)
    return centers[labels] + rng.standard_normal((n, 10)), labels


def accuracy(params, x, labels):
    return float(np.mean(np.argmax(np.asarray(predict(params, x)), axis=1) == labels))


def main():
    rng = np.random.default_rng(0)
    x, labels = make_data(rng)
    params = init_params(rng)

    # per-example gradients are exactly the gradients of each example taken one at a time
    g_vmap = per_example_grads(params, x[:8], labels[:8])
    g_loop = [ft.grad(loss)(params, x[i], labels[i]) for i in range(8)]
    err = max(float(np.max(np.abs(g_vmap[j][k][i] - g_loop[i][j][k])))
              for i in range(8) for j in range(2) for k in range(2))
    print(f"vmap(grad) vs a loop of grad, 8 examples: max difference {err:.2e}")
    t0 = time.perf_counter()
    per_example_grads(params, x[:BATCH], labels[:BATCH])
    t_vmap = time.perf_counter() - t0
    t0 = time.perf_counter()
    for i in range(BATCH):
        ft.grad(loss)(params, x[i], labels[i])
    t_loop = time.perf_counter() - t0
    print(f"{BATCH} per-example gradients: vmap {t_vmap * 1e3:.1f} ms, "
          f"Python loop {t_loop * 1e3:.1f} ms ({t_loop / t_vmap:.0f}x)")

    key = ft.random.PRNGKey(0)
    print(f"DP-SGD: clip norm {CLIP_NORM}, noise multiplier {NOISE_MULTIPLIER}, batch {BATCH}")
    mean_loss = float(np.mean(ft.vmap(loss, in_axes=(None, 0, 0))(params, x, labels)))
    print(f"start:   loss {mean_loss:.4f}  accuracy {accuracy(params, x, labels):.3f}")
    norms_by_epoch, losses = [], [mean_loss]
    for epoch in progress(range(EPOCHS), total=EPOCHS, desc="DP-SGD epochs"):
        order = rng.permutation(len(x))
        clipped = 0
        epoch_norms = []
        for start in range(0, len(x), BATCH):
            idx = order[start:start + BATCH]
            key, sub = ft.random.split(key)
            g, norms = dp_gradient(params, x[idx], labels[idx], sub)
            clipped += int(np.sum(np.asarray(norms) > CLIP_NORM))
            epoch_norms.append(np.asarray(norms))
            params = ft.tree_map(lambda p, d: p - LEARNING_RATE * np.asarray(d), params, g)
        mean_loss = float(np.mean(ft.vmap(loss, in_axes=(None, 0, 0))(params, x, labels)))
        norms_by_epoch.append(np.concatenate(epoch_norms))
        losses.append(mean_loss)
        log(f"epoch {epoch + 1}: loss {mean_loss:.4f}  accuracy {accuracy(params, x, labels):.3f}"
            f"  clipped {clipped / len(x):.0%} of the per-example gradients")
    figure("per_example_grads", lambda plt: draw(plt, norms_by_epoch, losses),
           "per-example gradient norms against the clip norm")


def draw(plt, norms_by_epoch, losses):
    """Left: histograms of the per-example gradient norms (first and last epoch) and the
    clip norm C; right: the mean loss per epoch."""
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.6))
    bins = np.linspace(0, max(float(n.max()) for n in norms_by_epoch), 40)
    for i, label in ((0, "epoch 1"), (len(norms_by_epoch) - 1, f"epoch {len(norms_by_epoch)}")):
        ax1.hist(norms_by_epoch[i], bins=bins, alpha=0.6, label=label)
    ax1.axvline(CLIP_NORM, color="black", linestyle="--", label=f"clip norm C = {CLIP_NORM}")
    ax1.set_xlabel("per-example gradient norm")
    ax1.set_title("before clipping")
    ax1.legend()
    ax2.plot(range(len(losses)), losses, marker="o")
    ax2.set_xlabel("epoch")
    ax2.set_title("mean loss (DP-SGD)")
    return fig


if __name__ == "__main__":
    main()
