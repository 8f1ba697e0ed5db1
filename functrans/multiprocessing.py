"""torch.multiprocessing on the CPU, honestly: Python's own `multiprocessing` (every name it
has), plus torch's `spawn`. What torch adds beyond that is tensors that live in shared memory
when sent to another process (`Tensor.share_memory_`, `Module.share_memory`, Hogwild
training); functrans has no shared-memory tensors, so a Tensor sent through a Queue or as a
Process argument arrives as a pickled copy, and updates made by the child are not seen by
the parent. Use ft.distributed (all_reduce) to combine work across processes."""
from __future__ import annotations

import multiprocessing as _mp
import traceback as _traceback
from multiprocessing import *  # noqa: F401,F403

__all__ = list(_mp.__all__) + ["spawn", "start_processes", "ProcessContext",
                               "ProcessRaisedException", "ProcessExitedException"]


class ProcessRaisedException(Exception):
    """A spawned process raised: the message holds its index and traceback."""


class ProcessExitedException(Exception):
    """A spawned process ended with a nonzero exit code (without a Python exception)."""


def _wrap(fn, i, args, errors):
    try:
        fn(i, *args)
    except KeyboardInterrupt:
        pass
    except Exception:
        errors.put((i, _traceback.format_exc()))
        raise SystemExit(1)


class ProcessContext:
    """The processes start_processes made; join() waits for all and raises the first error."""

    def __init__(self, processes, errors):
        self.processes, self.error_queue = processes, errors

    def pids(self):
        return [p.pid for p in self.processes]

    def join(self, timeout=None):
        """True once every process has ended; raises ProcessRaisedException (with the child's
        traceback) or ProcessExitedException when one failed (the others are terminated)."""
        for p in self.processes:
            p.join(timeout)
        if any(p.is_alive() for p in self.processes):
            return False
        failed = [(i, p) for i, p in enumerate(self.processes) if p.exitcode != 0]
        if not failed:
            return True
        for p in self.processes:
            if p.is_alive():
                p.terminate()
        if not self.error_queue.empty():
            i, tb = self.error_queue.get()
            raise ProcessRaisedException(f"\n\n-- Process {i} terminated with the following "
                                         f"error:\n{tb}")
        i, p = failed[0]
        raise ProcessExitedException(f"process {i} terminated with exit code {p.exitcode}")


def start_processes(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """Run fn(i, *args) for i in range(nprocs), each in its own process."""
    ctx = _mp.get_context(start_method)
    errors = ctx.SimpleQueue()
    procs = [ctx.Process(target=_wrap, args=(fn, i, args, errors), daemon=daemon)
             for i in range(nprocs)]
    for p in procs:
        p.start()
    context = ProcessContext(procs, errors)
    if not join:
        return context
    while not context.join():
        pass
    return None


def spawn(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """torch.multiprocessing.spawn: start_processes with the 'spawn' start method."""
    return start_processes(fn, args, nprocs, join, daemon, start_method)
