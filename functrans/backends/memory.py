"""One byte budget for the memory compiled programs hold between calls.

A CPU executable keeps persistent buffers (scratch arrays and the per-thread temporaries
of its blocked groups). Every executable -- a jit signature, an ft.compile program, a hot
program of the runtime -- charges its buffers here. When a charge would pass `BUDGET.limit`
bytes, the least recently used executables free their buffers (they stay compiled and
allocate again at their next call); an executable whose buffers alone exceed the limit,
or that finds no room because the others are running now, allocates them for its call and
frees them after it. An executable that is collected
gives its bytes back (a weakref finalizer).

And the C heap: on glibc, `tune_malloc()` (run at import) keeps freed heap memory for
reuse instead of handing it back to the system after every step (see its docstring).
"""
from __future__ import annotations

import ctypes
import itertools
import os
import threading
import weakref
from collections import OrderedDict

DEFAULT_LIMIT = 256 << 20       # bytes; set BUDGET.limit to change it
HEAP_MMAP_BYTES = 32 << 20      # glibc: blocks below this come from the heap ...
HEAP_TRIM_BYTES = 128 << 20     # ... whose free top is handed back above this
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3       # mallopt's parameters (malloc.h)
_USER_MALLOC_VARS = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_",
                     "MALLOC_MMAP_MAX_")


class ProgramMemory:
    """The byte budget: held bytes, the LRU order of charged executables, evictions."""

    def __init__(self, limit=DEFAULT_LIMIT):
        self.limit = limit
        self.held = 0
        self.evictions = 0
        self._lru: OrderedDict = OrderedDict()      # token -> (weakref to exe, nbytes)
        self._lock = threading.RLock()     # a finalizer may run inside a charge (gc)
        self._tokens = itertools.count(1)

    def charge(self, exe) -> bool:
        """Make room for exe.nbytes (evicting least recently used executables) and record
        them; False, charging nothing, when they exceed the whole limit or the executables
        running now leave no room. The caller holds exe's lock and allocates after a True."""
        n = exe.nbytes
        if n > self.limit:
            return False
        with self._lock:
            self._evict_until(self.limit - n)
            if self.held + n > self.limit:
                return False
            if exe._token is None:
                exe._token = next(self._tokens)
                weakref.finalize(exe, self._forget, exe._token)
            self._lru[exe._token] = (weakref.ref(exe), n)
            self.held += n
        return True

    def touch(self, exe):
        """exe runs (its lock taken): it becomes the most recently used. No budget lock:
        one OrderedDict operation is atomic under the GIL, and an eviction that took the
        token out just now puts it back, since it cannot take exe's lock."""
        try:
            self._lru.move_to_end(exe._token)
        except KeyError:
            pass

    def _forget(self, token):
        with self._lock:
            hit = self._lru.pop(token, None)
            if hit is not None:
                self.held -= hit[1]

    def _evict_until(self, room):
        """Free least recently used buffers until held <= room. An executable running now
        (its lock taken) is skipped: it is in use, so not least recently used."""
        for _ in range(len(self._lru)):
            if self.held <= room:
                return
            token, (ref, n) = self._lru.popitem(last=False)
            exe = ref()
            if exe is None:                 # dying; its finalizer finds nothing to do
                self.held -= n
                continue
            if not exe._lock.acquire(blocking=False):
                self._lru[token] = (ref, n)
                continue
            try:
                exe._free()
            finally:
                exe._lock.release()
            self.held -= n
            self.evictions += 1

    def release_all(self):
        """Free every executable's buffers now (they allocate again when next called)."""
        with self._lock:
            self._evict_until(-1)

    def stats(self):
        """{'limit', 'held', 'programs', 'evictions'}: the budget, the bytes held now, the
        number of executables holding them, and how many times buffers were evicted."""
        with self._lock:
            return {"limit": self.limit, "held": self.held, "programs": len(self._lru),
                    "evictions": self.evictions}


BUDGET = ProgramMemory()


def glibc_version():
    """The C library's version ("glibc 2.36") when it is glibc, else None."""
    try:
        return os.confstr("CS_GNU_LIBC_VERSION") or None
    except (AttributeError, ValueError, OSError):
        return None


def tune_malloc(environ=os.environ) -> str:
    """Set glibc's malloc to keep freed heap memory for reuse: blocks under HEAP_MMAP_BYTES
    from the heap, its free top handed back to the system only above HEAP_TRIM_BYTES.
    glibc's adaptive defaults hand megabytes back and take them again step after step
    when a training step's temporaries and the user's NumPy code alternate, and every
    page taken again is a page fault: the facade MLP step alternating with its NumPy floor
    took 2,250 page faults a pair and 1.7x the time. Not done when
    FUNCTRANS_MALLOC=system, when the user set one of glibc's MALLOC_*_ variables for
    these, or off glibc; returns what was done, for `python -m functrans`."""
    if environ.get("FUNCTRANS_MALLOC", "") == "system":
        return "system (FUNCTRANS_MALLOC=system)"
    mine = [v for v in _USER_MALLOC_VARS if v in environ]
    if mine:
        return f"system ({mine[0]} is set)"
    glibc = glibc_version()
    try:
        mallopt = ctypes.CDLL(None).mallopt if glibc else None
    except (AttributeError, OSError):
        mallopt = None
    if mallopt is None:
        return "system (not glibc)"
    if mallopt(_M_MMAP_THRESHOLD, HEAP_MMAP_BYTES) and mallopt(_M_TRIM_THRESHOLD,
                                                                HEAP_TRIM_BYTES):
        return (f"{glibc}: heap below {HEAP_MMAP_BYTES >> 20} MB blocks, trimmed above "
                f"{HEAP_TRIM_BYTES >> 20} MB")
    return f"system ({glibc}: mallopt refused)"


MALLOC = tune_malloc()
