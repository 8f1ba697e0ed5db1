"""Train an MLP on the UCI handwritten digits with the PyTorch-style facade.

The loop is what a PyTorch user writes, with `torch` renamed to `ft`: a Sequential model,
CrossEntropyLoss, SGD with momentum, gradient clipping, train/eval modes, no_grad for
evaluation, and a checkpoint saved with ft.save and loaded back with ft.load.
Data: examples/data/digits.npz (1797 8x8 images, CC BY 4.0; see examples/data/README.md).
With the `examples` extra: a progress bar, and figures/train_mlp.png (the training curves).
"""
import os
import tempfile
import time

import numpy as np

import functrans as ft
import functrans.nn as nn
from _extras import figure, log, progress

HERE = os.path.dirname(os.path.abspath(__file__))


def load_digits(seed=0, n_test=360):
    """(x_train, y_train, x_test, y_test) as tensors; pixels scaled to [0, 1]."""
    with np.load(os.path.join(HERE, "data", "digits.npz")) as d:
        x = d["images"].reshape(-1, 64).astype(np.float32) / 16.0
        y = d["labels"].astype(np.int64)
    perm = np.random.default_rng(seed).permutation(len(x))
    test, train = perm[:n_test], perm[n_test:]
    return (ft.tensor(x[train]), ft.tensor(y[train]), ft.tensor(x[test]), ft.tensor(y[test]))


def accuracy(model, x, y):
    model.eval()
    with ft.no_grad():
        pred = model(x).argmax(dim=1)
    model.train()
    return (pred == y).float().mean().item()


def main(epochs=15, batch_size=32):
    ft.manual_seed(0)
    x_train, y_train, x_test, y_test = load_digits()
    model = nn.Sequential(
        nn.Linear(64, 128), nn.ReLU(),
        nn.Dropout(0.1),
        nn.Linear(128, 64), nn.ReLU(),
        nn.Linear(64, 10),
    )
    loss_fn = nn.CrossEntropyLoss()
    optimizer = ft.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    n = len(x_train)
    start = time.perf_counter()
    history = {"loss": [], "train": [], "test": []}
    for epoch in progress(range(1, epochs + 1), total=epochs, desc="epochs"):
        t0 = time.perf_counter()
        perm = ft.randperm(n)
        total = 0.0
        for i in range(0, n, batch_size):
            idx = perm[i:i + batch_size]
            xb, yb = x_train[idx], y_train[idx]
            optimizer.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), max_norm=5.0)
            optimizer.step()
            total += loss.item() * len(idx)
        for k, v in zip(history, (total / n, accuracy(model, x_train, y_train),
                                  accuracy(model, x_test, y_test))):
            history[k].append(v)
        log(f"epoch {epoch:2d}/{epochs}  loss {total / n:.4f}  "
            f"train acc {history['train'][-1]:.3f}  test acc {history['test'][-1]:.3f}  "
            f"({time.perf_counter() - t0:.2f} s)")
    test_acc = accuracy(model, x_test, y_test)

    # checkpoint: ft.save writes PyTorch's format (torch.load reads it); ft.load never executes code
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "mlp.pt")
        ft.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                 "epoch": epochs}, path)
        ckpt = ft.load(path)
    restored = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Dropout(0.1),
                             nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 10))
    restored.load_state_dict(ckpt["model"])
    assert accuracy(restored, x_test, y_test) == test_acc
    print(f"test accuracy {test_acc:.3f} after {epochs} epochs "
          f"in {time.perf_counter() - start:.1f} s (checkpoint reloaded: same accuracy)")
    figure("train_mlp", lambda plt: draw(plt, history), "training curves")
    return test_acc


def draw(plt, history):
    """The training loss and the train/test accuracy per epoch."""
    epochs = range(1, len(history["loss"]) + 1)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.6))
    ax1.plot(epochs, history["loss"], marker="o")
    ax1.set_xlabel("epoch")
    ax1.set_title("training loss (cross-entropy)")
    ax2.plot(epochs, history["train"], marker="o", label="train")
    ax2.plot(epochs, history["test"], marker="o", label="test")
    ax2.set_xlabel("epoch")
    ax2.set_title("accuracy")
    ax2.legend()
    return fig


if __name__ == "__main__":
    acc = main()
    if acc <= 0.95:
        raise SystemExit(f"test accuracy {acc:.3f} is not above 0.95")
