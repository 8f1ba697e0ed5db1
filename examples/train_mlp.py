"""Train an MLP on the UCI handwritten digits with the PyTorch-style facade.

The loop is what a PyTorch user writes, with `torch` renamed to `ft`: a Sequential model,
CrossEntropyLoss, SGD with momentum, gradient clipping, train/eval modes, no_grad for
evaluation, and a checkpoint saved with ft.save and loaded back with ft.load.
Data: examples/data/digits.npz (1797 8x8 images, CC BY 4.0; see examples/data/README.md).
"""
import os
import tempfile
import time

import numpy as np

import functrans as ft
import functrans.nn as nn

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
    for epoch in range(1, epochs + 1):
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
        print(f"epoch {epoch:2d}/{epochs}  loss {total / n:.4f}  "
              f"train acc {accuracy(model, x_train, y_train):.3f}  "
              f"test acc {accuracy(model, x_test, y_test):.3f}  "
              f"({time.perf_counter() - t0:.2f} s)")
    test_acc = accuracy(model, x_test, y_test)

    # checkpoint: ft.save writes an .npz (no pickle); ft.load never executes code
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
    return test_acc


if __name__ == "__main__":
    acc = main()
    if acc <= 0.95:
        raise SystemExit(f"test accuracy {acc:.3f} is not above 0.95")
