"""One byte budget for the memory compiled programs hold between calls.

A CPU executable keeps persistent buffers (scratch arrays and the per-thread temporaries
of its blocked groups). Every executable -- a jit signature, an ft.compile program, a hot
program of the runtime -- charges its buffers here. When a charge would pass `BUDGET.limit`
bytes, the least recently used executables free their buffers (they stay compiled and
allocate again at their next call); an executable whose buffers alone exceed the limit,
or that finds no room because the others are running now, allocates them for its call and
frees them after it. An executable that is collected
gives its bytes back (a weakref finalizer).
"""
from __future__ import annotations

import itertools
import threading
import weakref
from collections import OrderedDict

DEFAULT_LIMIT = 256 << 20       # bytes; set BUDGET.limit to change it


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
