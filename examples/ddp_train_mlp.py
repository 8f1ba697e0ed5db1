"""Data-parallel training of an MLP on the UCI handwritten digits: each process trains on
its shard of every epoch (DistributedSampler) and DistributedDataParallel averages the
gradients during backward, so every process holds the same model throughout.

    python -m functrans.distributed.run -n 2 examples/ddp_train_mlp.py

Run as a plain script it is a world of one process. Rank 0 prints the progress; at the end
every rank checks that its parameters equal rank 0's. (docs/distributed.md)
Data: examples/data/digits.npz (1797 8x8 images, CC BY 4.0; see examples/data/README.md).
"""
import time

import functrans as ft
import functrans.distributed as dist
import functrans.nn as nn
from functrans.nn.parallel import DistributedDataParallel as DDP
from functrans.utils.data import DataLoader, TensorDataset
from functrans.utils.data.distributed import DistributedSampler
from train_mlp import load_digits


def load_datasets():
    """(train, test) TensorDatasets of train_mlp.py's split, the same on every rank."""
    x_train, y_train, x_test, y_test = load_digits()
    return TensorDataset(x_train, y_train), TensorDataset(x_test, y_test)


def accuracy(model, data):
    x, y = data.tensors
    with ft.no_grad():
        return (model(x).argmax(dim=1) == y).float().mean().item()


def main(epochs=3, batch_size=64):
    dist.init_process_group(backend="mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    ft.manual_seed(rank)          # different initial weights: DDP broadcasts rank 0's
    train, test = load_datasets()
    sampler = DistributedSampler(train, shuffle=True, seed=0)
    loader = DataLoader(train, batch_size=batch_size, sampler=sampler)
    model = DDP(nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(),
                              nn.Linear(64, 10)))
    optimizer = ft.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    if rank == 0:
        print(f"{world} process(es), {len(sampler)} of {len(train)} training samples each")
    for epoch in range(1, epochs + 1):
        sampler.set_epoch(epoch)  # a new shuffle, the same on every rank
        t0, total = time.perf_counter(), ft.zeros(())
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()       # gradients averaged over the processes here
            optimizer.step()
            total += loss.detach() * len(yb)
        dist.all_reduce(total)    # the epoch's loss over every process's samples
        if rank == 0:
            print(f"epoch {epoch}/{epochs}  loss {total.item() / (len(sampler) * world):.4f}  "
                  f"test acc {accuracy(model, test):.3f}  ({time.perf_counter() - t0:.2f} s)")
    params = ft.cat([p.detach().reshape(-1) for p in model.parameters()])
    reference = params.clone()
    dist.broadcast(reference, src=0)
    assert ft.equal(params, reference), "the replicas drifted apart"
    acc = accuracy(model, test)
    if rank == 0:
        print(f"test accuracy {acc:.3f}; every rank holds the same parameters")
    dist.destroy_process_group()
    return acc


if __name__ == "__main__":
    main()
