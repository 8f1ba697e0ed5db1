"""DataLoader's worker processes (num_workers > 0), as torch's on Linux: each worker is a
forked process holding its own copy of the dataset, seeded with base_seed + its id (Python's
`random`, NumPy's global generator and the facade's), running worker_init_fn(id) first. For a map-style
dataset the main process hands out the batches' index lists round-robin, at most
prefetch_factor per worker ahead, and yields the collated batches in sampler order; for an
IterableDataset every worker iterates its own copy (shard it with get_worker_info()) and the
batches come round-robin from the workers still running. An exception in a worker is raised
in the main process with the worker's traceback; a worker that dies is named."""
from __future__ import annotations

import itertools
import multiprocessing
import queue
import random
import traceback

import numpy as np

from ...facade import creation as C


class WorkerInfo:
    """What get_worker_info() returns inside a worker: id, num_workers, seed, dataset."""

    def __init__(self, id, num_workers, seed, dataset):  # noqa: A002
        self.id, self.num_workers, self.seed, self.dataset = id, num_workers, seed, dataset

    def __repr__(self):
        return (f"WorkerInfo(id={self.id}, num_workers={self.num_workers}, seed={self.seed}, "
                f"dataset={self.dataset!r})")


_INFO: list = [None]


class _Exhausted:
    """An iterable worker's answer once its copy of the dataset is used up."""


def current():
    """The WorkerInfo of this process (None in the main process)."""
    return _INFO[0]


def _error(wid):
    return f"Caught {{}} in DataLoader worker process {wid}.\nOriginal " + \
        traceback.format_exc()


def _loop(loader, index_q, result_q, wid, nworkers, seed):
    _INFO[0] = WorkerInfo(wid, nworkers, seed, loader.dataset)
    random.seed(seed)
    np.random.seed(seed % 2 ** 32)
    C.manual_seed(seed)
    it = None
    try:
        if loader.worker_init_fn is not None:
            loader.worker_init_fn(wid)
        if loader._iterable:
            it = iter(loader.dataset)
    except Exception as e:
        result_q.put((None, None, (type(e), _error(wid).format(type(e).__name__))))
        return
    while True:
        task = index_q.get()
        if task is None:
            return
        tid, indices = task
        try:
            if it is None:
                out = loader._fetch(indices)
            else:
                out = _next_batch(loader, it)
            result_q.put((tid, out, None))
        except Exception as e:
            result_q.put((tid, None, (type(e), _error(wid).format(type(e).__name__))))


def _next_batch(loader, it):
    if not loader._auto_collation:
        for x in it:
            return loader.collate_fn(x)
        return _Exhausted()
    batch = list(itertools.islice(it, loader.batch_size))
    if not batch or (loader.drop_last and len(batch) < loader.batch_size):
        return _Exhausted()
    return loader.collate_fn(batch)


def _raise(err):
    cls, text = err
    try:
        e = cls(text)
    except Exception:
        e = RuntimeError(text)
    raise e


def iterate(loader, tasks):
    """Batches of loader from its worker processes; tasks: the index lists in order (None for
    an IterableDataset, whose workers make their own)."""
    ctx = loader.multiprocessing_context or "fork"
    ctx = multiprocessing.get_context(ctx) if isinstance(ctx, str) else ctx
    n = loader.num_workers
    if tasks is not None:       # the sampler draws first, as without workers: same order
        source = iter(tasks)
        first = next(source, _Exhausted)
        tasks = source if first is _Exhausted else itertools.chain([first], source)
    base = int(C.randint(0, 2 ** 62, (1,), generator=loader.generator).item())
    index_qs = [ctx.Queue() for _ in range(n)]
    result_q = ctx.Queue()
    procs = [ctx.Process(target=_loop, args=(loader, index_qs[w], result_q, w, n, base + w),
                         daemon=True) for w in range(n)]
    for p in procs:
        p.start()
    try:
        yield from _schedule(loader, tasks, index_qs, result_q, procs)
    finally:
        for q in index_qs:
            q.put(None)
        for p in procs:
            p.join(timeout=5)
            if p.is_alive():
                p.terminate()


def _schedule(loader, tasks, index_qs, result_q, procs):
    n = len(procs)
    live = list(range(n))
    source = iter(tasks) if tasks is not None else itertools.count()
    ahead = n * (loader.prefetch_factor or 2)
    sent, owner, done = 0, {}, {}
    turn = itertools.cycle(range(n))
    exhausted = False
    next_tid = 0

    def send():
        nonlocal sent, exhausted
        if not live:
            exhausted = True
            return
        item = next(source, None) if tasks is not None else sent
        if item is None:
            exhausted = True
            return
        w = next(turn)
        while w not in live:
            w = next(turn)
        index_qs[w].put((sent, item if tasks is not None else None))
        owner[sent] = w
        sent += 1

    while True:
        while not exhausted and sent - next_tid < ahead:
            send()
        if next_tid >= sent:
            return
        while next_tid not in done:
            tid, out, err = _get(loader, result_q, procs)
            if err is not None:
                _raise(err)
            done[tid] = out
        out = done.pop(next_tid)
        w = owner.pop(next_tid)
        next_tid += 1
        if isinstance(out, _Exhausted):
            if w in live:
                live.remove(w)
            continue
        yield out


def _get(loader, result_q, procs):
    waited = 0.0
    while True:
        try:
            return result_q.get(timeout=1.0)
        except queue.Empty:
            waited += 1.0
            dead = [p for p in procs if p.exitcode not in (None, 0)]
            if dead:
                pids = ", ".join(str(p.pid) for p in dead)
                raise RuntimeError(f"DataLoader worker (pid(s) {pids}) exited unexpectedly"
                                   ) from None
            if loader.timeout and waited >= loader.timeout:
                raise RuntimeError(f"DataLoader timed out after {loader.timeout} seconds")
