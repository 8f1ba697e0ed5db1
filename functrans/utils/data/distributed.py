"""`ft.utils.data.distributed.DistributedSampler`: each of `num_replicas` processes reads
its own shard of a dataset, as torch's does (the same padding, drop_last and striding, a
permutation seeded with `seed + epoch` shared by every rank)."""
from __future__ import annotations

import math

from ...distributed import get_rank, get_world_size
from ...facade import creation as C
from .dataset import Sampler

__all__ = ["DistributedSampler"]


class DistributedSampler(Sampler):
    """Indices of this rank's shard: `indices[rank:total_size:num_replicas]`, after padding
    the (shuffled) indices by repeating their start to a multiple of num_replicas, or
    cutting the tail with drop_last. Call `set_epoch(e)` before each epoch to reshuffle."""

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0,
                 drop_last=False):
        if num_replicas is None:
            num_replicas = get_world_size()
        if rank is None:
            rank = get_rank()
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval "
                             f"[0, {num_replicas - 1}]")
        self.dataset, self.num_replicas, self.rank = dataset, num_replicas, rank
        self.epoch, self.drop_last, self.shuffle, self.seed = 0, drop_last, shuffle, seed
        n = len(dataset)
        if drop_last and n % num_replicas != 0:
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas

    def __iter__(self):
        n = len(self.dataset)
        if self.shuffle:
            g = C.Generator().manual_seed(self.seed + self.epoch)
            indices = C.randperm(n, generator=g).tolist()
        else:
            indices = list(range(n))
        if not self.drop_last:
            pad = self.total_size - len(indices)
            if pad <= len(indices):
                indices += indices[:pad]
            else:
                indices += (indices * math.ceil(pad / len(indices)))[:pad]
        else:
            indices = indices[:self.total_size]
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self):
        return self.num_samples

    def set_epoch(self, epoch):
        """The epoch seeds the shuffle (with `seed`): every rank must set the same one."""
        self.epoch = epoch
