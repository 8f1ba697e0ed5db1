"""The byte budgets: the memory compiled programs hold between calls, and the one cache of
what the transformations derive (`DERIVED`, below).

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


DERIVED_LIMIT = 256 << 20      # bytes; set DERIVED.limit to change it
EQN_BYTES = 1 << 10             # what one equation of a kept program costs, all forms counted


class DerivedCache:
    """The one cache of what the library derives from a structure and may derive again:
    reverse-mode programs (ft.vjp's by tape structure, the facade's by graph structure,
    per-equation ones for first sights), op signatures, the runtime's compiled straight-line
    programs, staged rules, and the first-sight marks of structures seen once.

    Keys are tuples whose first item names the kind. Each entry is charged its approximate
    bytes (approx_bytes: keys included, since a graph structure's key grows with the
    graph); past `limit` the least recently used entries go, and an entry's `on_evict`
    callback removes it from the front table that answers its hits (a per-op dict on a hot
    path, which does not reorder this one: a hot entry evicted by a burst of new
    structures is derived again at its next miss). Lookups run without the lock: one
    OrderedDict operation is atomic under the GIL."""

    def __init__(self, limit=DERIVED_LIMIT):
        self.limit = limit
        self.held = 0
        self.evictions = 0
        self._lru: OrderedDict = OrderedDict()     # key -> (value, nbytes, on_evict)
        self._lock = threading.RLock()

    def get(self, key, default=None):
        """The value under key, now the most recently used; default if absent. Raises
        TypeError for an unhashable key (the caller then derives without caching)."""
        hit = self._lru.get(key)
        if hit is None:
            return default
        try:
            self._lru.move_to_end(key)
        except KeyError:                 # evicted by another thread just now
            pass
        return hit[0]

    def put(self, key, value, nbytes=None, on_evict=None):
        """Keep value under key, charged nbytes (approx_bytes(key, value) when None), and
        evict the least recently used entries past the limit. Returns value."""
        if nbytes is None:
            nbytes = approx_bytes(key) + approx_bytes(value)
        with self._lock:
            old = self._lru.pop(key, None)
            if old is not None:
                self.held -= old[1]
            self._lru[key] = (value, nbytes, on_evict)
            self.held += nbytes
            while self.held > self.limit and len(self._lru) > 1:
                _, (_, n, cb) = self._lru.popitem(last=False)
                self.held -= n
                self.evictions += 1
                if cb is not None:
                    cb()
        return value

    def first_sight(self, key, charge=None) -> bool:
        """True the first time key is seen (it is then marked, charged the key's bytes:
        charge(key) when the caller can count them without approx_bytes' walk): the policy
        of running a structure's first reverse pass by cached per-equation programs and
        deriving its whole program when it repeats."""
        if self.get(key) is not None:
            return False
        self.put(key, True, None if charge is None else charge(key))
        return True

    def discard(self, key):
        with self._lock:
            old = self._lru.pop(key, None)
            if old is not None:
                self.held -= old[1]
                if old[2] is not None:
                    old[2]()

    def clear(self, kind=None):
        """Drop every entry (of one kind: keys whose first item is `kind`)."""
        with self._lock:
            for key in [k for k in self._lru if kind is None or k[0] == kind]:
                self.discard(key)

    def __len__(self):
        return len(self._lru)

    def stats(self):
        """{'limit', 'held', 'entries', 'evictions', 'kinds': {kind: entries}}."""
        with self._lock:
            kinds = {}
            for k in self._lru:
                kinds[k[0]] = kinds.get(k[0], 0) + 1
            return {"limit": self.limit, "held": self.held, "entries": len(self._lru),
                    "evictions": self.evictions, "kinds": kinds}


def approx_bytes(obj, depth=0):
    """What obj keeps alive, roughly: containers by their length (nested ones walked a few
    levels), arrays by their bytes, a jaxpr or program by its equations (EQN_BYTES each:
    the equation, its straight-line code and compiled forms), anything else a pointer's
    worth plus 64 bytes."""
    t = type(obj)
    if t is tuple or t is list:
        n = 56 + 8 * len(obj)
        if depth < 3 and obj:
            types = set(map(type, obj))       # (C loops: structure keys hold thousands)
            if types.isdisjoint(_WALKED):
                return n
            if depth == 2 and types <= _SEQS:     # their items are not walked
                return n + 56 * len(obj) + 8 * sum(map(len, obj))
            for o in obj:
                if type(o) in _WALKED:
                    n += approx_bytes(o, depth + 1)
        return n
    if t is dict:
        n = 64 + 100 * len(obj)
        if depth < 3:
            for o in obj.values():
                if type(o) in _WALKED:
                    n += approx_bytes(o, depth + 1)
        return n
    nbytes = getattr(obj, "nbytes", None)
    if type(nbytes) is int:
        return 112 + nbytes
    sizer = getattr(obj, "approx_bytes", None)
    if sizer is not None:
        return sizer()
    eqns = getattr(obj, "eqns", None)
    if eqns is None:
        inner = getattr(obj, "jaxpr", None)
        eqns = getattr(inner, "eqns", None)
        if eqns is not None:
            return EQN_BYTES * (len(eqns) + 1) + sum(
                getattr(c, "nbytes", 8) for c in getattr(obj, "consts", ()))
        return 64
    return EQN_BYTES * (len(eqns) + 1)


_WALKED = (tuple, list, dict)
_SEQS = frozenset((tuple, list))


DERIVED = DerivedCache()


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
