"""`ft.nn.parallel.DistributedDataParallel`: data-parallel training over the default process
group (ft.distributed), with torch's bucketed gradient averaging.

How it works. At construction rank 0's parameters and buffers are broadcast to every
rank, and the parameters are grouped into buckets (reverse registration order, about the
order in which backward produces their gradients; a first bucket of at most 1 MB, then
`bucket_cap_mb`; one dtype per bucket); every rank checks once that all ranks have the
same buckets. A post-accumulate-grad hook on each parameter marks it ready; when a bucket
is complete (and every bucket before it has been launched, so that all ranks start the
same collectives in the same order) a non-blocking all-reduce (MPI Iallreduce, without
the collectives' per-call agreement round) of its flat buffer starts, while the rest of
the backward call goes on. Gradients live in that buffer: after the first synced backward
each parameter's `.grad` is a view of its slot, so accumulation writes straight into it;
a fresh gradient (after zero_grad(set_to_none=True)) is computed into it by the engine's
hot backward program (the hook's `grad_buffer`), and one found elsewhere (an assigned
`.grad`, the first steps) is copied in once. A parameter of at least SOLO_BYTES (256 KB)
is a bucket of its own, all-reduced in place in its gradient's array, so a fresh gradient
is never copied (the copy of a large one costs more than the extra collective). The
first hook of a backward queues a callback at the end of that backward call
(`Variable._execution_engine.queue_callback`), which launches the buckets still
incomplete and one small all-reduce of the used-flags (below) and of each rank's number
of backward calls through the model, waits for all of them (polling, with the collective
timeout) and divides the gradients by the world size in place before `backward()`
returns. The summed call counts tell the ranks when they are out of step (`no_sync()` on
some ranks only) instead of averaging different steps.

Shared memory. With MPI and NumPy arrays (SHARED_MEMORY), when every machine runs as
many ranks, the gradients live instead in one region per dtype of the rank's MPI
shared-memory window over its machine, flags and call count after them. The
end-of-backward callback copies in the gradients not there yet, fences, sums this rank's
share of every region over the machine's windows (and across machines, one MPI all-reduce
of the share among the ranks of the same local rank), averages it and writes it back
into each window, and fences again: on one machine the ranks' own loads and stores, where
MPI's shared-memory all-reduce copies through its buffers (2.7 MB: 0.11 to 0.16 ms
against 0.32 to 0.48 ms for MPI_Allreduce). Nothing is started during the backward: with
one core per rank there is nothing to overlap the reduction with, so the hooks ask for no
early delivery. The buckets above carry the gradients with NCCL, or when the machines
run different numbers of ranks or /dev/shm lacks room.

Unused parameters. A parameter that got no gradient on this rank contributes zeros, so
every rank takes part in every bucket; the flags say on how many ranks each parameter
was used. A parameter used on some rank gets the average (sum / world size) in `.grad`;
one used on no rank keeps its `.grad` as it was (None if never set), as torch's
find_unused_parameters=True. This holds whatever `find_unused_parameters` says: the
end-of-backward callback finds the unused parameters without walking the graph.

Double backward. With `backward(create_graph=True)` the gradients are Tensors of the
recorded graph; the averaging is then recorded too, as the collective primitive (psum,
whose transpose is psum), so that differentiating the averaged gradients again (a
penalty on them) runs the cross-rank sum of the cotangents in the second backward and
gives the derivative of the mean of the per-rank losses. A gradient penalty computed with
`ft.autograd.grad(..., create_graph=True)` inside the step needs nothing special: that
call accumulates nothing, so no hook fires, and the step's `loss.backward()` averages the
gradients of the whole loss (penalty included) like any other.
"""
from __future__ import annotations

import contextlib
import json
import zlib

import numpy as np

from ...backends.mpi import CACHE_LINE
from ...core import Tracer, array_module
from ...distributed import default_communicator
from ...higher_order.collectives import ProcessAxis, psum_p
from ...facade.api import CALLBACKS, queue_callback
from ...facade.creation import tensor, zeros
from ...facade.ops import apply_prim, cat
from ...facade.tensor import wrap
from ..modules.module import Module

__all__ = ["DistributedDataParallel"]

_MB = 1024 * 1024
FIRST_BUCKET_BYTES = 1 * _MB        # torch's dist._DEFAULT_FIRST_BUCKET_BYTES
SOLO_BYTES = 256 * 1024             # a gradient this big is all-reduced in its own array
SHARED_MEMORY = True                # MPI, NumPy: reduce in each machine's shared memory
_SHARED = "DistributedDataParallel's shared-memory gradient reduction"
_CALLS_MODULUS = 1 << 20            # backward calls are counted modulo this (exact sums)


class _Bucket:
    """Parameters averaged by one all-reduce. Small ones share a flat buffer, each gradient
    at its offset (after the first synced backward a parameter's `.grad` is a view of its
    slot, so accumulation writes straight into the buffer). One of at least SOLO_BYTES is
    its own ("solo") bucket, all-reduced in place in its gradient's own array: a fresh
    gradient (after zero_grad(set_to_none=True)) is not copied into a buffer, which cost
    0.2 ms a step for the MLP 784-512-512-10."""
    __slots__ = ("params", "offsets", "size", "dtype", "solo", "buf", "views", "ready",
                 "pending", "req", "stash")

    def __init__(self, params, dtype, solo=False):
        self.params, self.dtype, self.solo = params, dtype, solo
        self.offsets, n = [], 0
        for p in params:
            self.offsets.append(n)
            n += p._data.size
        self.size = n
        self.buf = self.views = None
        self.reset()

    def reset(self):
        self.ready = [False] * len(self.params)
        self.pending = len(self.params)
        self.req = None
        self.stash = {}

    def fill(self, xp):
        """The array to all-reduce. Solo: the gradient itself when it is a plain owned
        contiguous array (engine-made gradients are), else a copy that becomes `.grad`;
        zeros when the parameter got no gradient here. Shared: ready gradients into their
        slots (a copy only for one not yet a view: the first backward calls,
        zero_grad(set_to_none=True) before the backward program is hot, an assigned
        `.grad`), zeros in the slots of the others (their own `.grad` stashed if it is the
        view)."""
        if self.solo:
            p = self.params[0]
            if not self.ready[0]:
                self.buf = xp.zeros(p._data.shape, self.dtype)
            elif _in_place(p._grad._data, self.dtype, xp):
                self.buf = p._grad._data
            else:
                self.buf = xp.array(p._grad._data, self.dtype, order="C")
                p._grad = wrap(self.buf)
            return self.buf
        if self.buf is None or type(self.buf) is not xp.ndarray:
            self.bind(xp.zeros(self.size, self.dtype))
        self.fill_around(0, 0, None)
        return self.buf

    def fill_around(self, lo, hi, segment):
        """The shared buffer's fill, with [lo, hi) this rank's share of the buffer on the
        shared-memory path (empty: everything copied in): the part of a gradient not yet
        in its slot that falls in the share is not copied but returned, as (start, flat
        source) pieces that the share's sum reads in place of the slot (each slot is
        written once: half the copying, with two ranks). A gradient that may overlap the
        window (segment) is copied whole."""
        pieces = []
        for i, p in enumerate(self.params):
            v, g = self.views[i], p._grad
            if not self.ready[i]:
                if g is not None and g._data is v:
                    self.stash[i] = v.copy()
                v[...] = 0
                continue
            if g._data is v:
                continue
            src, off, n = g._data, self.offsets[i], v.size
            a, b = max(off, lo), min(off + n, hi)
            if a >= b or src.dtype != self.dtype or np.may_share_memory(src, segment):
                v[...] = src
            else:
                flat = src.reshape(-1)
                self.buf[off:a] = flat[:a - off]
                self.buf[b:off + n] = flat[b - off:]
                pieces.append((a, flat[a - off:b - off]))
            p._grad = wrap(v)
        return pieces

    def bind(self, buf):
        """Keep the gradients in buf (a shared-memory window's region) from now on."""
        self.buf = buf
        self.views = [buf[off:off + p._data.size].reshape(p._data.shape)
                      for p, off in zip(self.params, self.offsets)]

    def finish(self, size, used):
        """Wait for the all-reduce, average, then settle(used)."""
        buf = self.req.wait()
        self.req = None
        if size > 1 and any(used):
            _average(buf, size)
        self.settle(used)

    def settle(self, used):
        """After the reduction: `.grad` = the average for a parameter used on some rank
        (`used[i]`: on how many), unchanged for one used on none."""
        grads = [self.buf] if self.solo else self.views
        for i, p in enumerate(self.params):
            if self.ready[i]:
                p._grad._bump("DistributedDataParallel")
            elif not used[i]:                        # unused on every rank: .grad untouched
                if i in self.stash:
                    grads[i][...] = self.stash[i]
            elif p._grad is not None and p._grad._data is grads[i]:
                p._grad._bump("DistributedDataParallel")
            else:
                p._grad = wrap(grads[i])
        self.stash = {}


def _in_place(a, dtype, xp):
    """Whether an all-reduce may run in the array a itself: owned, contiguous, writable."""
    return (type(a) is xp.ndarray and a.dtype == dtype and a.base is None
            and a.flags.c_contiguous and getattr(a.flags, "writeable", True))


def _buckets(params, cap_bytes):
    """Reverse parameter order, one dtype per bucket, the first one small (as torch); a
    gradient of SOLO_BYTES or more alone, where it comes (the small ones around it wait
    in the bucket open for their dtype: fewer collectives, and little data to delay)."""
    out, open_ = [], {}
    for p in reversed(params):
        dt = p._data.dtype
        if p._data.nbytes >= SOLO_BYTES:
            out.append(_Bucket([p], dt, solo=True))
            continue
        cur = open_.setdefault(dt, [[], 0])
        cur[0].append(p)
        cur[1] += p._data.nbytes
        limit = min(FIRST_BUCKET_BYTES, cap_bytes) if not any(
            not b.solo for b in out) else cap_bytes
        if cur[1] >= limit:
            out.append(_Bucket(cur[0], dt))
            del open_[dt]
    out += [_Bucket(ps, dt) for dt, (ps, _) in open_.items()]
    return out


class DistributedDataParallel(Module):
    """Replicates `module` on every process of the default group and averages the
    gradients of its parameters across them during backward (torch's
    DistributedDataParallel; see this module's docstring for the design)."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0,
                 broadcast_buffers=True, process_group=None, bucket_cap_mb=25,
                 find_unused_parameters=False, check_reduction=False,
                 gradient_as_bucket_view=False, static_graph=False):
        super().__init__()
        if process_group is not None:
            raise NotImplementedError("DistributedDataParallel: only the default process "
                                      "group is supported; pass process_group=None")
        self._comm = default_communicator()
        self.module = module
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.require_backward_grad_sync = True
        self.bucket_cap_mb = bucket_cap_mb
        params = [p for p in module.parameters() if p.requires_grad]
        self._sync_module_states(module.named_parameters())
        self._sync_module_states(module.named_buffers())
        self._bucket_list = _buckets(params, max(int(bucket_cap_mb * _MB), 1))
        self._verify_layout()
        self._window = self._metas = None
        if SHARED_MEMORY and self._comm.size > 1 and all(
                array_module(p._data) is np for p in params):
            self._share(params)
        self._queue = None            # the callback queue of the backward averaging now
        self._launched = 0            # buckets launched in this backward, in order
        self._tested = 0              # of which found complete by _progress
        self._calls = 0               # backward calls that reached the model so far
        self._counted = None          # the callback queue of the last call counted
        for bucket in self._bucket_list:
            for i, p in enumerate(bucket.params):
                p.register_post_accumulate_grad_hook(self._hook(bucket, i))

    # -- construction and forward ------------------------------------------------------
    def _sync_module_states(self, named):
        """Every rank gets rank 0's values (in place), one broadcast per tensor."""
        comm = self._comm
        for name, t in named:
            try:
                t._data[...] = comm.broadcast(t._data, root=0)
            except RuntimeError as e:
                raise RuntimeError(f"DistributedDataParallel: broadcasting {name!r} "
                                   f"({tuple(t.shape)}, {t.dtype}) from rank 0 failed: "
                                   f"{e}") from e

    def _verify_layout(self):
        """Check once that every rank has the same buckets (parameter shapes, dtypes,
        order; torch's _verify_param_shape_across_processes), so that the per-step
        all-reduces can skip the collectives' agreement round."""
        layout = json.dumps([[str(b.dtype), [list(p.shape) for p in b.params]]
                             for b in self._bucket_list]).encode()
        mine = np.array([len(self._bucket_list), sum(b.size for b in self._bucket_list),
                         zlib.crc32(layout)], np.int64)
        table = self._comm.allgather(mine)
        table = table.get() if hasattr(table, "get") else table     # CuPy with NCCL
        if (table != mine).any():
            listing = "; ".join(f"rank {r}: {int(t[0])} buckets, {int(t[1])} gradient "
                                f"elements" for r, t in enumerate(table))
            raise RuntimeError(
                f"DistributedDataParallel: the ranks' gradient buckets differ ({listing}); "
                f"every rank must wrap the same model (parameter shapes, dtypes and order) "
                f"with the same bucket_cap_mb")

    def _share(self, params):
        """One bucket per dtype, its buffer a region of an MPI shared-memory window over
        the machine's ranks (with the used-flags and call count after the regions), when
        the communicator offers one; else the message buckets stay."""
        buckets = [_Bucket([p for p in reversed(params) if p._data.dtype == dt], dt)
                   for dt in dict.fromkeys(p._data.dtype for p in reversed(params))]
        offsets, n = [], 0
        for b in buckets:
            offsets.append(n)
            n += -(-b.size * b.dtype.itemsize // CACHE_LINE) * CACHE_LINE
        meta = (len(params) + 1) * 8
        window = getattr(self._comm, "shared_window", lambda nbytes: None)(n + meta)
        if window is None:
            return
        mine = window.segment(window.rank)
        for b, off in zip(buckets, offsets):
            b.bind(mine[off:off + b.size * b.dtype.itemsize].view(b.dtype))
        self._bucket_list, self._offsets, self._window = buckets, offsets, window
        self._metas = [window.segment(r)[n:n + meta].view(np.float64)
                       for r in range(window.size)]

    def forward(self, *args, **kwargs):
        if self.broadcast_buffers and self._comm.size > 1:
            self._sync_module_states(self.module.named_buffers())
        return self.module(*args, **kwargs)

    @contextlib.contextmanager
    def no_sync(self):
        """Backward calls made inside accumulate local gradients without averaging; the
        first backward after the context averages the accumulated sums. (torch decides at
        the forward; here the backward decides, so that the forward has no side effect and
        `ft.compile(ddp)` captures it whole: run forward and backward inside.)"""
        old = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old

    # -- the reduction ---------------------------------------------------------------------
    def _hook(self, bucket, i):
        def ready(p):
            queue = CALLBACKS.stack[-1]
            if self._counted is not queue:
                self._counted = queue
                self._calls += 1
            if not self.require_backward_grad_sync:
                return
            if self._queue is not queue:                   # the first hook of a backward
                self._queue, self._launched, self._tested = queue, 0, 0
                for b in self._bucket_list:
                    if b.req is not None:
                        raise RuntimeError(
                            "DistributedDataParallel: an earlier backward raised after "
                            "starting its gradient all-reduces; the ranks are out of step, "
                            "end the job")
                    b.reset()
                queue_callback(self._finish)
            if not bucket.ready[i]:
                bucket.ready[i] = True
                bucket.pending -= 1
                if self._window is not None:                # reduced at the end
                    return
                if bucket.pending == 0 and _concrete(p._grad):
                    self._launch_ready()
                elif self._launched:
                    self._progress()
        ready.deliver_early = self._window is None    # shared memory: nothing to start
        # a fresh gradient is computed straight into its slot (the engine's hot programs)
        ready.grad_buffer = lambda p: None if bucket.views is None else bucket.views[i]
        return ready

    def _progress(self):
        """Test the oldest bucket in flight: MPI moves a non-blocking collective's data
        only inside MPI calls (MPICH's shared memory), so later hooks let it go on."""
        bl = self._bucket_list
        while self._tested < self._launched and bl[self._tested].req.test():
            self._tested += 1

    def _launch_ready(self):
        """Launch, in bucket order, every complete bucket whose predecessors are launched."""
        bl = self._bucket_list
        while self._launched < len(bl) and bl[self._launched].pending == 0:
            self._launch(bl[self._launched])

    def _launch(self, bucket):
        buf = bucket.fill(array_module(bucket.params[0]._data))
        bucket.req = self._comm.iallreduce(buf, "sum", out=buf, agree=False)
        self._launched += 1

    def _finish(self):
        """At the end of backward: launch what is left and one all-reduce of the used-flags
        (a parameter used on how many ranks) and of the backward-call counts, wait, write
        the averages."""
        self._queue = None
        graph = any(p._grad is not None and not _concrete(p._grad)
                    for b in self._bucket_list for i, p in enumerate(b.params) if b.ready[i])
        if graph:
            for bucket in self._bucket_list:
                _average_recorded(bucket, self._comm.size)
            return
        if self._window is not None:
            return self._reduce_shared()
        bl = self._bucket_list
        while self._launched < len(bl):
            self._launch(bl[self._launched])
        xp = array_module(bl[0].params[0]._data)
        calls = self._calls % _CALLS_MODULUS
        meta = xp.asarray(self._flags(calls), xp.float64)
        req = self._comm.iallreduce(meta, "sum", out=meta, agree=False)
        meta = req.wait()
        meta = meta.get() if hasattr(meta, "get") else meta            # CuPy with NCCL
        if meta[-1] != calls * self._comm.size:
            for bucket in bl:
                bucket.req.wait()
                bucket.req = None
            self._out_of_step(meta[-1], calls)
        for bucket, used in self._by_bucket(meta):
            bucket.finish(self._comm.size, used)

    def _reduce_shared(self):
        """The shared-memory reduction: every gradient into this rank's window regions (a
        fresh one's part in this rank's share read in place by the sum instead), the
        flags and call count after them; a fence; each rank sums its share of every region
        over its machine's windows (then across the machines), averages it and writes it
        back into all; a fence. (On one machine MPI moves nothing here: the ranks' own
        loads and stores, once each.)"""
        bl, window, size = self._bucket_list, self._window, self._comm.size
        if any(array_module(b.params[0]._data) is not np for b in bl):
            raise RuntimeError(
                "DistributedDataParallel: the parameters left the CPU after the model was "
                "wrapped; move the module to its device before wrapping it")
        mine = window.segment(window.rank)
        pieces = [b.fill_around(*window.share(b.size, b.dtype), mine) for b in bl]
        calls = self._calls % _CALLS_MODULUS
        self._metas[window.rank][:] = self._flags(calls)
        window.fence(_SHARED)
        meta = self._metas[0].copy()
        for m in self._metas[1:]:
            meta += m
        window.across(meta)                             # several machines: their sum
        if meta[-1] != calls * size:
            for bucket, own in zip(bl, pieces):         # .grad: this rank's gradients
                for a, src in own:
                    bucket.buf[a:a + src.size] = src
            self._out_of_step(meta[-1], calls)
        for bucket, off, own in zip(bl, self._offsets, pieces):
            window.allreduce_share(off, bucket.dtype, bucket.size,
                                   lambda share: _average(share, size), own)
        window.fence(_SHARED)
        for bucket, used in self._by_bucket(meta):
            bucket.settle(used)

    def _flags(self, calls):
        """Each parameter's used-flag (1.0 when it got a gradient in this backward), then
        the backward-call count: what the ranks sum at the end of a backward."""
        return [float(u) for b in self._bucket_list for u in b.ready] + [calls]

    def _by_bucket(self, meta):
        """(bucket, its parameters' summed flags) for the summed flags in meta."""
        k = 0
        for bucket in self._bucket_list:
            n = len(bucket.params)
            yield bucket, meta[k:k + n]
            k += n

    def _out_of_step(self, total, calls):
        size = self._comm.size
        raise RuntimeError(
            f"DistributedDataParallel: rank {self._comm.rank} of {size} averaged its "
            f"gradients with ranks that made a different number of backward calls through "
            f"the model (their counts summed to {total:g}, expected {size} x {calls}): "
            f"every rank must make the same backward calls, with `no_sync()` on all ranks "
            f"or on none")

    def __getstate__(self):
        raise TypeError("DistributedDataParallel cannot be pickled; save "
                        "`ddp.module.state_dict()` instead")


def _average(grads, size):
    """grads /= size in place; as a product by the reciprocal where that is exact (a power
    of two: the same numbers, a multiplication instead of a division, half the time)."""
    if size & (size - 1):
        grads /= size
    else:
        grads *= grads.dtype.type(1.0 / size)


def _concrete(g):
    """A gradient that is a plain array, not part of a recorded graph or a trace."""
    return g is not None and not g._requires_grad and not isinstance(g._data, Tracer)


def _average_recorded(bucket, size):
    """The averaging of the bucket's gradients (graph Tensors), recorded as the collective
    primitive psum over the processes (its transpose is psum, so any order of derivatives
    runs the cross-rank sum); used-flags ride along as constants."""
    parts = []
    for i, p in enumerate(bucket.params):
        g = p._grad if bucket.ready[i] else None
        parts.append(g.reshape(-1) if g is not None else zeros(p._data.size,
                                                               dtype=p._data.dtype))
    parts.append(tensor([1.0 if u else 0.0 for u in bucket.ready], dtype=bucket.dtype))
    total = apply_prim(psum_p, {"axes": (ProcessAxis("DistributedDataParallel"),)},
                       [cat(parts)])
    flags = total[bucket.size:].detach().numpy()
    for i, (p, off) in enumerate(zip(bucket.params, bucket.offsets)):
        if flags[i] != 0:
            p._grad = (total[off:off + p._data.size] / size).reshape(p._data.shape)
