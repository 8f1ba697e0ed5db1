"""ft.utils.data: torch.utils.data's datasets, samplers and DataLoader (with worker processes)
(`dataset.py`; also under torch's module paths `sampler` and `dataloader`), and
`distributed.DistributedSampler` for data-parallel jobs."""
from .dataset import (Dataset, IterableDataset, TensorDataset, ConcatDataset, ChainDataset,
                      Subset, random_split, Sampler, SequentialSampler, RandomSampler,
                      SubsetRandomSampler, WeightedRandomSampler, BatchSampler, DataLoader,
                      default_collate, default_convert, get_worker_info)
from . import dataloader, distributed, sampler  # noqa: F401  (torch's module paths)

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "ConcatDataset", "ChainDataset",
           "Subset", "random_split", "Sampler", "SequentialSampler", "RandomSampler",
           "SubsetRandomSampler", "WeightedRandomSampler", "BatchSampler", "DataLoader",
           "default_collate", "default_convert", "get_worker_info", "distributed"]
