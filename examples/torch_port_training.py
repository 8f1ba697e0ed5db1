"""A PyTorch training script ported by renaming the import: `import functrans as torch`.

Everything below is written as for PyTorch: random_split into train and test sets,
DataLoaders (shuffled batches, reproducible after torch.manual_seed), an MLP, RMSprop with a
per-batch schedule (LinearLR warm-up, then CosineAnnealingLR, joined by SequentialLR), the
device chosen with torch.cuda.is_available(), and evaluation under no_grad.
Data: examples/data/digits.npz (UCI digits, CC BY 4.0; see examples/data/README.md).
"""
import os
import time

import numpy as np

import functrans as torch
import functrans.nn as nn
from functrans.optim.lr_scheduler import CosineAnnealingLR, LinearLR, SequentialLR
from functrans.utils.data import DataLoader, TensorDataset, random_split

HERE = os.path.dirname(os.path.abspath(__file__))


def make_loaders(batch_size=64):
    with np.load(os.path.join(HERE, "data", "digits.npz")) as d:
        x = torch.tensor(d["images"].reshape(-1, 64).astype(np.float32) / 16.0)
        y = torch.tensor(d["labels"].astype(np.int64))
    train, test = random_split(TensorDataset(x, y), [0.8, 0.2],
                               generator=torch.Generator().manual_seed(0))
    return (DataLoader(train, batch_size=batch_size, shuffle=True, drop_last=True),
            DataLoader(test, batch_size=256))


def evaluate(model, loader, device):
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for xb, yb in loader:
            pred = model(xb.to(device)).argmax(dim=1)
            correct += (pred == yb.to(device)).sum().item()
            total += len(yb)
    model.train()
    return correct / total


def main(epochs=5):
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    train_loader, test_loader = make_loaders()
    model = nn.Sequential(nn.Linear(64, 96), nn.ReLU(), nn.Linear(96, 10)).to(device)
    loss_fn = nn.CrossEntropyLoss()
    optimizer = torch.optim.RMSprop(model.parameters(), lr=1e-2, alpha=0.9)
    steps = epochs * len(train_loader)
    warmup = len(train_loader)
    scheduler = SequentialLR(optimizer, milestones=[warmup], schedulers=[
        LinearLR(optimizer, start_factor=0.1, total_iters=warmup),
        CosineAnnealingLR(optimizer, T_max=steps - warmup)])
    start = time.perf_counter()
    for epoch in range(epochs):
        running = 0.0
        for xb, yb in train_loader:
            xb, yb = xb.to(device), yb.to(device)
            optimizer.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            optimizer.step()
            scheduler.step()                     # per batch, after optimizer.step()
            running += loss.item()
        print(f"epoch {epoch + 1}/{epochs}  loss {running / len(train_loader):.4f}  "
              f"lr {scheduler.get_last_lr()[0]:.2e}  "
              f"test acc {evaluate(model, test_loader, device):.3f}")
    acc = evaluate(model, test_loader, device)
    print(f"test accuracy {acc:.3f} on {device} in {time.perf_counter() - start:.1f} s")
    return acc


if __name__ == "__main__":
    acc = main()
    if acc <= 0.93:
        raise SystemExit(f"test accuracy {acc:.3f} is not above 0.93")
