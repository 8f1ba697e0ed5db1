"""torch.utils.data's datasets, samplers and DataLoader (its worker processes: _workers.py).

Every random choice (shuffling, random_split, random samplers) draws from a facade
generator (`ft.Generator`, or the global one that `ft.manual_seed` seeds), so a seeded run
repeats exactly. Batches are collated as torch's `default_collate` does.
"""
from __future__ import annotations

import bisect
import collections.abc as abc
import itertools
import math
import warnings

import numpy as np

from ...facade import creation as C
from ...facade import dtypes as D
from ...facade.ops import stack
from ...facade.tensor import Tensor
from . import _workers

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "ConcatDataset", "ChainDataset",
           "Subset", "random_split", "Sampler", "SequentialSampler", "RandomSampler",
           "SubsetRandomSampler", "WeightedRandomSampler", "BatchSampler", "DataLoader",
           "default_collate", "default_convert", "get_worker_info"]


# ---------------------------------------------------------------------------
# datasets

class Dataset:
    """A map-style dataset: subclasses define `__getitem__` (and usually `__len__`)."""

    def __getitem__(self, index):
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A dataset that is an iterable of samples: subclasses define `__iter__`."""

    def __iter__(self):
        raise NotImplementedError("Subclasses of IterableDataset should implement __iter__.")

    def __add__(self, other):
        return ChainDataset([self, other])


class TensorDataset(Dataset):
    """Samples are tuples of the tensors' rows: `(t[i] for t in tensors)`."""

    def __init__(self, *tensors):
        if any(tensors[0].shape[0] != t.shape[0] for t in tensors):
            raise AssertionError("Size mismatch between tensors")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return self.tensors[0].shape[0]


class ConcatDataset(Dataset):
    """The datasets one after another."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if len(self.datasets) == 0:
            raise AssertionError("datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise AssertionError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes = list(itertools.accumulate(len(d) for d in self.datasets))

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        if idx < 0:
            if -idx > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            idx = len(self) + idx
        k = bisect.bisect_right(self.cumulative_sizes, idx)
        return self.datasets[k][idx - (self.cumulative_sizes[k - 1] if k > 0 else 0)]


class ChainDataset(IterableDataset):
    """Iterable datasets chained."""

    def __init__(self, datasets):
        self.datasets = datasets

    def __iter__(self):
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise AssertionError("ChainDataset only supports IterableDataset")
            yield from d

    def __len__(self):
        return sum(len(d) for d in self.datasets)


class Subset(Dataset):
    """The samples of `dataset` at `indices`."""

    def __init__(self, dataset, indices):
        self.dataset, self.indices = dataset, indices

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __len__(self):
        return len(self.indices)


def random_split(dataset, lengths, generator=None):
    """Split into non-overlapping random Subsets of the given lengths, or of fractions of
    len(dataset) summing to 1 (the remainder goes one by one to the first subsets)."""
    n = len(dataset)
    lengths = list(lengths)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        counts = []
        for i, frac in enumerate(lengths):
            if frac < 0 or frac > 1:
                raise ValueError(f"Fraction at index {i} is not between 0 and 1")
            counts.append(int(math.floor(n * frac)))
        for i in range(n - sum(counts)):
            counts[i % len(counts)] += 1
        for i, c in enumerate(counts):
            if c == 0:
                warnings.warn(f"Length of split at index {i} is 0. This might result in an "
                              "empty dataset.", stacklevel=2)
        lengths = counts
    if sum(lengths) != n:
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    perm = C.randperm(sum(lengths), generator=generator).tolist()
    return [Subset(dataset, perm[end - k:end])
            for k, end in zip(lengths, itertools.accumulate(lengths))]


# ---------------------------------------------------------------------------
# samplers

class Sampler:
    """Iterates over dataset indices (or, for a batch sampler, lists of them)."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError


def _check_positive_int(name, value):
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{name} should be a positive integer value, but got {name}={value}")


def _check_bool(name, value):
    if not isinstance(value, bool):
        raise TypeError(f"{name} should be a boolean value, but got {name}={value}")


class SequentialSampler(Sampler):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    """A random permutation per epoch (`num_samples` > len: several permutations, the last one
    cut), or with replacement, `num_samples` uniform draws."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        self.data_source, self.replacement = data_source, replacement
        self._num_samples, self.generator = num_samples, generator
        _check_bool("replacement", replacement)
        _check_positive_int("num_samples", self.num_samples)

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n, k = len(self.data_source), self.num_samples
        if self.replacement:
            yield from C.randint(high=n, size=(k,), generator=self.generator).tolist()
            return
        for _ in range(k // n):
            yield from C.randperm(n, generator=self.generator).tolist()
        yield from C.randperm(n, generator=self.generator).tolist()[:k % n]

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices in a random order."""

    def __init__(self, indices, generator=None):
        self.indices, self.generator = indices, generator

    def __iter__(self):
        for i in C.randperm(len(self.indices), generator=self.generator).tolist():
            yield self.indices[i]

    def __len__(self):
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """`num_samples` indices drawn with probabilities proportional to `weights`."""

    def __init__(self, weights, num_samples, replacement=True, generator=None):
        _check_positive_int("num_samples", num_samples)
        _check_bool("replacement", replacement)
        w = np.asarray(weights.numpy() if isinstance(weights, Tensor) else weights, np.float64)
        if w.ndim != 1:
            raise ValueError("weights should be a 1d sequence but given weights have shape "
                             f"{tuple(w.shape)}")
        self.weights = C.tensor(w)
        self.num_samples, self.replacement, self.generator = num_samples, replacement, generator

    def __iter__(self):
        yield from C.multinomial(self.weights, self.num_samples, self.replacement,
                                 generator=self.generator).tolist()

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    """Groups another sampler's indices into lists of `batch_size` (the last one shorter,
    unless drop_last)."""

    def __init__(self, sampler, batch_size, drop_last):
        _check_positive_int("batch_size", batch_size)
        _check_bool("drop_last", drop_last)
        self.sampler, self.batch_size, self.drop_last = sampler, batch_size, drop_last

    def __iter__(self):
        it = iter(self.sampler)
        while True:
            batch = list(itertools.islice(it, self.batch_size))
            if not batch or (self.drop_last and len(batch) < self.batch_size):
                return
            yield batch

    def __len__(self):
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)


# ---------------------------------------------------------------------------
# collation

def _is_numeric_array(a):
    return isinstance(a, np.ndarray) and a.dtype.kind in "biufc"


def default_collate(batch):
    """Stack a list of samples into a batch: Tensors, NumPy arrays and numbers become one
    Tensor with a new leading dimension (Python floats as float64, ints as int64); dicts,
    named tuples and sequences are collated field by field (tuples give lists); strings
    stay a list."""
    elem = batch[0]
    if isinstance(elem, Tensor):
        return stack(list(batch), 0)
    if isinstance(elem, np.ndarray):
        if not _is_numeric_array(elem):
            raise TypeError(_collate_error(elem))
        return stack([C.as_tensor(b) for b in batch], 0)
    if isinstance(elem, np.generic):
        return C.as_tensor(np.asarray(batch))
    if isinstance(elem, float):
        return C.tensor(batch, dtype=D.float64)
    if isinstance(elem, bool):
        return C.tensor(batch)
    if isinstance(elem, int):
        return C.tensor(batch, dtype=D.int64)
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, abc.Mapping):
        try:
            return type(elem)({k: default_collate([d[k] for d in batch]) for k in elem})
        except TypeError:
            return {k: default_collate([d[k] for d in batch]) for k in elem}
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):
        return type(elem)(*(default_collate(list(s)) for s in zip(*batch)))
    if isinstance(elem, abc.Sequence):
        if any(len(s) != len(elem) for s in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        columns = [default_collate(list(s)) for s in zip(*batch)]
        if isinstance(elem, tuple):
            return columns
        try:
            return type(elem)(columns)
        except TypeError:
            return columns
    raise TypeError(_collate_error(elem))


def _collate_error(elem):
    return ("default_collate: batch must contain tensors, numpy arrays, numbers, dicts or "
            f"lists; found {getattr(elem, 'dtype', type(elem))}")


def default_convert(data):
    """Without batching (batch_size=None): NumPy arrays become Tensors, containers recursively."""
    if _is_numeric_array(data):
        return C.as_tensor(data)
    if isinstance(data, abc.Mapping):
        return {k: default_convert(v) for k, v in data.items()}
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, abc.Sequence) and not isinstance(data, (str, bytes)):
        return [default_convert(d) for d in data]
    return data


def get_worker_info():
    """Inside a DataLoader worker process, its WorkerInfo (id, num_workers, seed, dataset);
    None in the main process."""
    return _workers.current()


# ---------------------------------------------------------------------------
# the loader

class DataLoader:
    """Batches of a dataset: a sampler (sequential, or random with shuffle=True) chooses
    indices, a BatchSampler groups them, collate_fn stacks the samples; in the main process,
    or with num_workers > 0 in forked worker processes (_workers.py), in the same order.
    persistent_workers is accepted, but workers start anew for each epoch (and run
    worker_init_fn again); pin_memory changes nothing (there is no pinned memory)."""

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor=None, persistent_workers=False, pin_memory_device="",
                 in_order=True):
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to "
                             "disable multiprocessing.")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in multiprocessing."
                             "let num_workers > 0 to enable multiprocessing, otherwise set "
                             "prefetch_factor to None.")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        self.multiprocessing_context, self.prefetch_factor = multiprocessing_context, \
            prefetch_factor
        self.persistent_workers = persistent_workers
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        self.dataset, self.num_workers, self.generator = dataset, num_workers, generator
        self.pin_memory, self.timeout, self.worker_init_fn = pin_memory, timeout, worker_init_fn
        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable:
            if shuffle not in (None, False):
                raise ValueError("DataLoader with IterableDataset: expected unspecified shuffle "
                                 f"option, but got shuffle={shuffle}")
            if sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified sampler "
                                 f"option, but got sampler={sampler}")
            if batch_sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified "
                                 f"batch_sampler option, but got batch_sampler={batch_sampler}")
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, "
                                 "shuffle, sampler, and drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually "
                             "exclusive with drop_last")
        if sampler is None and not self._iterable:
            sampler = RandomSampler(dataset, generator=generator) if shuffle \
                else SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None and not self._iterable:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_size, self.drop_last = batch_size, drop_last
        self.sampler, self.batch_sampler = sampler, batch_sampler
        self._auto_collation = batch_sampler is not None or (self._iterable
                                                             and batch_size is not None)
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn

    def _fetch(self, indices):
        """One batch (auto-collation: a list of indices) or one sample, collated."""
        if self._auto_collation:
            return self.collate_fn([self.dataset[i] for i in indices])
        return self.collate_fn(self.dataset[indices])

    def __iter__(self):
        if self.num_workers > 0:
            tasks = None if self._iterable else (
                self.batch_sampler if self._auto_collation else self.sampler)
            yield from _workers.iterate(self, tasks)
            return
        if self._iterable:
            it = iter(self.dataset)
            if not self._auto_collation:
                yield from (self.collate_fn(x) for x in it)
                return
            while True:
                batch = list(itertools.islice(it, self.batch_size))
                if not batch or (self.drop_last and len(batch) < self.batch_size):
                    return
                yield self.collate_fn(batch)
        else:
            for indices in self.batch_sampler if self._auto_collation else self.sampler:
                yield self._fetch(indices)

    def __len__(self):
        if self._iterable:
            n = len(self.dataset)
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        return len(self.batch_sampler if self._auto_collation else self.sampler)
