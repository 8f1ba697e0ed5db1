"""What cpu_backend="auto" adds to the CPU backend's lowering so that native code never
makes a program slower: the threads of the program's own parallel loops, counted with
BLAS's (`parallel_threads`), and the choice between a program's native and NumPy code by
timing both on its first calls (`MeasuredChoice`). The knobs (the number of timed calls,
the clock) are cpu.CONFIG's."""
from __future__ import annotations

import threading

from . import blas
from ..core import _subjaxprs


def calls_blas(jaxpr) -> bool:
    """Whether the program, or one nested in it, binds a primitive whose impl calls BLAS or
    LAPACK (declared blas=True: matrix products, factorizations)."""
    return any(e.primitive.blas or any(calls_blas(j) for j in _subjaxprs(e.params))
               for e in jaxpr.eqns)


def parallel_threads(jaxpr, cores) -> tuple[int, str | None]:
    """The threads of a program's own parallel loops (native groups' OpenMP regions and
    blocked groups' pool) on `cores` cores, and why fewer (None: all of them). OpenMP and
    BLAS are counted as one pool: in a program that calls a BLAS running b threads, the
    loops get cores - (b - 1), at least one. A multithreaded OpenBLAS keeps its
    workers spinning for a while after each call, so an OpenMP region started then waits
    for cores they hold (measured: the jitted WGAN-GP step with every group native, 2 cores,
    OpenBLAS on 2 threads: 200 ms a step with 2 OpenMP threads a group, 1.2 ms with one,
    NumPy code 1.2 ms; in a product-chain-product program on 1024x1024 floats, 131 ms and
    118 ms). Limiting BLAS to one thread instead measured no faster on the WGAN-GP step
    (its products are small) and slows large products."""
    if cores <= 1 or not calls_blas(jaxpr):
        return cores, None
    b = blas.threads(cores)
    if b <= 1:
        return cores, None
    n = max(1, cores - (b - 1))
    return n, (None if n == cores else f"the program calls BLAS, which runs {b} threads")


class MeasuredChoice:
    """cpu_backend="auto": a program with native groups and its NumPy-code twin (the same
    program lowered with cpu_backend="numpy", built at its first turn), timed on the
    program's own calls until one is kept: calls alternate between the two; the first call
    of each is not timed (buffers allocated, pages touched), the next `trials`
    of each are, and the native executable is kept when its fastest call beats the NumPy
    code's fastest, else the NumPy code. The other is dropped (its buffers go back to the
    byte budget). Native code thus stays only where it makes the program faster on this
    machine, with this BLAS and this load; until the choice, successive calls may differ in
    their last bits (both compute the same operations, the native math within its ulp
    bounds). `choice`: None while timing, then "native" or "numpy"; `times`: the timed
    seconds of each."""

    def __init__(self, native, build_numpy, trials, clock):
        self._exes = {"native": native, "numpy": None}
        self._build_numpy, self._trials, self._clock = build_numpy, trials, clock
        self.times: dict = {"native": [], "numpy": []}
        self.choice = None
        self._chosen = None
        self._calls = 0
        self._lock = threading.Lock()
        self.name, self.n_in = native.name, native.n_in

    def __call__(self, *args, dests=None):
        exe = self._chosen
        if exe is not None:
            return exe(*args, dests=dests)
        with self._lock:
            if self._chosen is not None:
                return self._chosen(*args, dests=dests)
            k = self._calls
            self._calls += 1
            which = ("native", "numpy")[k % 2]
            if self._exes[which] is None:
                self._exes[which] = self._build_numpy()
            exe = self._exes[which]
        t0 = self._clock()
        out = exe(*args, dests=dests)
        dt = self._clock() - t0
        if k >= 2:
            with self._lock:
                if self._chosen is None:
                    self.times[which].append(dt)
                    if min(map(len, self.times.values())) >= self._trials:
                        self._choose()
        return out

    def _choose(self):
        native, numpy = min(self.times["native"]), min(self.times["numpy"])
        self.choice = "native" if native < numpy else "numpy"
        self._chosen = self._exes[self.choice]
        self._exes = {self.choice: self._chosen}

    def _current(self):
        return self._chosen or self._exes["native"]

    @property
    def nbytes(self):
        """The bytes of the executable that runs (the native one until the choice)."""
        return self._current().nbytes

    @property
    def holds_buffers(self):
        return self._current().holds_buffers

    @property
    def source(self):
        return self._current().source

    def __repr__(self):
        state = f"chose {self.choice}" if self.choice else "timing native against NumPy code"
        return f"<MeasuredChoice {self.name}: {state}>"
