"""ft.utils.data against torch.utils.data's documented semantics: datasets, samplers,
DataLoader batching and default collation, random_split, reproducibility under a seed."""
import collections

import numpy as np
import pytest

import functrans as ft
from functrans.utils import data as D


def _ds(n=10):
    return D.TensorDataset(ft.arange(n, dtype=ft.float32).reshape(n, 1), ft.arange(n))


def test_reachable_as_torch_spells_it():
    import functrans.utils.data as data
    assert ft.utils.data is data and data.DataLoader is D.DataLoader


def test_sequential_batches_and_drop_last():
    loader = D.DataLoader(_ds(10), batch_size=4)
    batches = list(loader)
    assert len(loader) == 3 and [b[1].tolist() for b in batches] == [[0, 1, 2, 3], [4, 5, 6, 7],
                                                                      [8, 9]]
    assert tuple(batches[0][0].shape) == (4, 1) and batches[0][1].dtype == ft.int64
    loader = D.DataLoader(_ds(10), batch_size=4, drop_last=True)
    assert len(loader) == 2 and [b[1].tolist() for b in loader] == [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_shuffle_is_a_permutation_reproducible_with_a_seed_or_generator():
    def epoch(**kw):
        return [i for _, y in D.DataLoader(_ds(20), batch_size=3, shuffle=True, **kw)
                for i in y.tolist()]
    ft.manual_seed(3)
    a, b = epoch(), epoch()
    assert sorted(a) == list(range(20)) and a != b          # a new order each epoch
    ft.manual_seed(3)
    assert epoch() == a                                     # ft.manual_seed repeats the run
    g1, g2 = ft.Generator().manual_seed(7), ft.Generator().manual_seed(7)
    assert epoch(generator=g1) == epoch(generator=g2)


def test_default_collate_structures():
    """As torch's default_collate: Tensors and NumPy arrays stack, Python floats give float64
    and ints int64, dicts map key by key, tuples give lists, named tuples keep their type,
    strings stay lists."""
    Point = collections.namedtuple("Point", "x y")
    batch = [{"img": np.full((2, 2), i, np.float32), "label": i, "w": 0.5 * i,
              "pair": (ft.tensor([i, i]), "s%d" % i), "pt": Point(i, 1.0)} for i in range(3)]
    out = D.default_collate(batch)
    assert isinstance(out, dict) and set(out) == {"img", "label", "w", "pair", "pt"}
    assert isinstance(out["img"], ft.Tensor) and tuple(out["img"].shape) == (3, 2, 2)
    assert out["img"].dtype == ft.float32
    assert out["label"].dtype == ft.int64 and out["label"].tolist() == [0, 1, 2]
    assert out["w"].dtype == ft.float64
    assert isinstance(out["pair"], list) and out["pair"][1] == ["s0", "s1", "s2"]
    assert tuple(out["pair"][0].shape) == (3, 2)
    assert isinstance(out["pt"], Point) and out["pt"].y.tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(RuntimeError, match="each element in list of batch should be of equal size"):
        D.default_collate([[1, 2], [1]])


def test_collate_fn_sampler_batch_sampler():
    ds = _ds(6)
    loader = D.DataLoader(ds, batch_size=2, collate_fn=lambda b: [y.item() for _, y in b])
    assert list(loader) == [[0, 1], [2, 3], [4, 5]]
    loader = D.DataLoader(ds, batch_size=2, sampler=[5, 3, 1])
    assert [y.tolist() for _, y in loader] == [[5, 3], [1]]
    loader = D.DataLoader(ds, batch_sampler=[[0, 5], [2]])
    assert [y.tolist() for _, y in loader] == [[0, 5], [2]] and len(loader) == 2
    unbatched = list(D.DataLoader(ds, batch_size=None))
    assert len(unbatched) == 6 and unbatched[2][1].item() == 2


def test_loader_errors():
    ds = _ds(4)
    with pytest.raises(ValueError, match="prefetch_factor option could only be specified in "
                                         "multiprocessing"):
        D.DataLoader(ds, prefetch_factor=2)
    with pytest.raises(ValueError, match="persistent_workers option needs num_workers > 0"):
        D.DataLoader(ds, persistent_workers=True)
    with pytest.raises(ValueError, match="sampler option is mutually exclusive with shuffle"):
        D.DataLoader(ds, sampler=[0, 1], shuffle=True)
    with pytest.raises(ValueError, match="batch_sampler option is mutually exclusive with "
                                         "batch_size, shuffle, sampler, and drop_last"):
        D.DataLoader(ds, batch_sampler=[[0]], batch_size=2)
    with pytest.raises(ValueError, match="batch_size=None option disables auto-batching"):
        D.DataLoader(ds, batch_size=None, drop_last=True)


def test_iterable_dataset():
    class Stream(D.IterableDataset):
        def __iter__(self):
            return iter(range(7))

    assert [b.tolist() for b in D.DataLoader(Stream(), batch_size=3)] == [[0, 1, 2], [3, 4, 5],
                                                                          [6]]
    with pytest.raises(ValueError, match="expected unspecified shuffle option, but got "
                                         "shuffle=True"):
        D.DataLoader(Stream(), shuffle=True)
    assert list(D.ChainDataset([Stream(), Stream()]))[6:9] == [6, 0, 1]


def test_subset_concat_random_split():
    ds = _ds(10)
    sub = D.Subset(ds, [9, 2])
    assert len(sub) == 2 and sub[0][1].item() == 9
    cat = D.ConcatDataset([sub, ds])
    assert len(cat) == 12 and cat[2][1].item() == 0 and cat[-1][1].item() == 9
    assert len(ds + ds) == 20
    parts = D.random_split(range(10), [3, 7], generator=ft.Generator().manual_seed(0))
    assert [len(p) for p in parts] == [3, 7]
    assert sorted(list(parts[0]) + list(parts[1])) == list(range(10))
    again = D.random_split(range(10), [3, 7], generator=ft.Generator().manual_seed(0))
    assert list(again[0]) == list(parts[0])
    # fractions: floor(n * f), the remainder dealt round-robin from the first split
    assert [len(p) for p in D.random_split(range(11), [0.5, 0.3, 0.2])] == [6, 3, 2]
    with pytest.raises(ValueError, match="Sum of input lengths does not equal the length of the "
                                         "input dataset!"):
        D.random_split(range(10), [3, 3])


def test_samplers():
    g = ft.Generator().manual_seed(1)
    assert list(D.SequentialSampler(range(4))) == [0, 1, 2, 3]
    perm = list(D.RandomSampler(range(5), generator=g))
    assert sorted(perm) == list(range(5))
    long = list(D.RandomSampler(range(3), num_samples=7, generator=g))
    assert len(long) == 7 and sorted(long[:3]) == [0, 1, 2] and sorted(long[3:6]) == [0, 1, 2]
    rep = list(D.RandomSampler(range(3), replacement=True, num_samples=50, generator=g))
    assert len(rep) == 50 and set(rep) <= {0, 1, 2}
    assert sorted(D.SubsetRandomSampler([4, 8, 15], generator=g)) == [4, 8, 15]
    w = list(D.WeightedRandomSampler([0.0, 1.0, 0.0, 3.0], 200, generator=g))
    assert set(w) == {1, 3} and 0.6 < w.count(3) / 200 < 0.9
    assert sorted(D.WeightedRandomSampler([1, 1, 1], 3, replacement=False, generator=g)) == \
        [0, 1, 2]
    bs = D.BatchSampler(D.SequentialSampler(range(10)), batch_size=3, drop_last=False)
    assert list(bs)[-1] == [9] and len(bs) == 4
    assert len(D.BatchSampler(range(10), 3, True)) == 3
    with pytest.raises(ValueError, match="num_samples should be a positive integer value, but got "
                                         "num_samples=0"):
        D.RandomSampler(range(3), num_samples=0)
    with pytest.raises(ValueError, match="batch_size should be a positive integer value"):
        D.BatchSampler(range(3), 0, False)
    with pytest.raises(TypeError, match="replacement should be a boolean value"):
        D.RandomSampler(range(3), replacement=1)


def test_custom_map_dataset_with_numpy_samples():
    class Squares(D.Dataset):
        def __len__(self):
            return 5

        def __getitem__(self, i):
            return {"x": np.array([i, i * i], np.float64), "y": i % 2}

    batch = next(iter(D.DataLoader(Squares(), batch_size=5)))
    assert batch["x"].dtype == ft.float64 and batch["x"][:, 1].tolist() == [0, 1, 4, 9, 16]
    assert batch["y"].tolist() == [0, 1, 0, 1, 0]


class _Strided(D.IterableDataset):
    """0..9 split among the workers by get_worker_info(), as torch's documentation shards."""

    def __iter__(self):
        info = D.get_worker_info()
        lo, step = (0, 1) if info is None else (info.id, info.num_workers)
        return iter(range(lo, 10, step))


class _Failing(D.Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        if i == 2:
            raise KeyError("no sample 2")
        return ft.tensor(i)


def _seen_by_worker(i):
    info = D.get_worker_info()
    return (info.id, info.num_workers, info.seed % 1000)


def test_worker_processes_give_the_batches_of_the_main_process():
    # dcgan/main.py's default --workers 2; same batches, same order, same shuffle
    ds = _ds(11)
    for kw in ({"batch_size": 3}, {"batch_size": 2, "drop_last": True}, {"batch_size": None}):
        ft.manual_seed(4)
        main = list(D.DataLoader(ds, shuffle=True, **kw))
        ft.manual_seed(4)
        workers = list(D.DataLoader(ds, shuffle=True, num_workers=3, prefetch_factor=1, **kw))
        assert len(main) == len(workers)
        for (xa, ya), (xb, yb) in zip(main, workers):
            assert ft.equal(xa, xb) and ft.equal(ya, yb)
    # an IterableDataset: every worker iterates its copy, batches round-robin (as torch)
    assert [b.tolist() for b in D.DataLoader(_Strided(), batch_size=2, num_workers=2)] == \
        [[0, 2], [1, 3], [4, 6], [5, 7], [8], [9]]
    assert D.get_worker_info() is None
    info = list(D.DataLoader(list(range(4)), batch_size=None, num_workers=2,
                             collate_fn=lambda i: _seen_by_worker(i)))
    assert [i[:2] for i in info] == [(0, 2), (1, 2), (0, 2), (1, 2)]
    assert info[1][2] == (info[0][2] + 1) % 1000          # seeds base_seed + id
    with pytest.raises(KeyError, match=r"Caught KeyError in DataLoader worker process 0\."
                                       r"(.|\n)*no sample 2"):
        list(D.DataLoader(_Failing(), batch_size=1, num_workers=2))
