"""torch.utils.data.sampler's module path: the samplers (defined in dataset.py)."""
from .dataset import (BatchSampler, RandomSampler, Sampler, SequentialSampler,  # noqa: F401
                      SubsetRandomSampler, WeightedRandomSampler)

__all__ = ["BatchSampler", "RandomSampler", "Sampler", "SequentialSampler",
           "SubsetRandomSampler", "WeightedRandomSampler"]
