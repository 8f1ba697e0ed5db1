"""What cpu_backend="auto" adds to the CPU backend's lowering so that native code never
makes a program slower: the threads of the program's own parallel loops, counted with
BLAS's (`parallel_threads`), and the choice between a program's native and NumPy code by
timing both on its first calls (`MeasuredChoice`). The knobs (the number of timed calls,
the clock) are cpu.CONFIG's."""
from __future__ import annotations

import math
import threading
import time

from . import blas
from ..core import _subjaxprs


# OpenBLAS runs a product on one thread when m*n*k is at most this (interface/gemm.c:
# SMP_THRESHOLD_MIN 65536 x GEMM_MULTITHREAD_THRESHOLD 4), a matrix-vector product when m*n
# is at most GEMV_THREADED_WORK (interface/gemv.c: 2304 x GEMM_MULTITHREAD_THRESHOLD)
GEMM_THREADED_WORK = 1 << 18
GEMV_THREADED_WORK = 9216


def _threaded_blas(eqn) -> bool:
    """Whether an equation calls BLAS or LAPACK (declared blas=True) on work its BLAS may
    spread over threads. A matrix product counts only above OpenBLAS's one-thread sizes,
    per matrix of a batch (NumPy's matmul calls one GEMM per matrix): the classifier head
    of a CNN (32x32 by 32x10) runs on the calling thread and leaves every core to the
    program's loops. Factorizations always count."""
    if not eqn.primitive.blas:
        return False
    if eqn.primitive.name != "dot_general":
        return True
    (lc, _), (lb, _) = eqn.params["dimension_numbers"]
    x, y = (v.aval.shape for v in eqn.invars)
    k = math.prod(x[a] for a in lc)
    batch = math.prod(x[a] for a in lb)
    m = math.prod(x) // max(1, k * batch)
    n = math.prod(y) // max(1, k * batch)
    if m == 1 or n == 1:
        return m * n * k > GEMV_THREADED_WORK
    return m * n * k > GEMM_THREADED_WORK


def calls_blas(jaxpr) -> bool:
    """Whether the program, or one nested in it, calls BLAS or LAPACK on work its BLAS may
    run on several threads (_threaded_blas: matrix products above OpenBLAS's one-thread
    sizes, factorizations)."""
    return any(_threaded_blas(e) or any(calls_blas(j) for j in _subjaxprs(e.params))
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


def trial_clock(jaxpr, cores, clock=None):
    """The clock MeasuredChoice times a program's candidates with: `clock` when one is set
    (CONFIG.clock); else the calling thread's CPU time when every candidate runs on that
    thread alone (`cores` 1: native groups and the NumPy code's blocked groups on one
    thread, and no product its BLAS may spread over threads), else the wall clock. On a
    machine other processes keep busy, the wall clock also counts the time the scheduler
    gave them (measured, the ResNet block's backward program at a load of 4: native 50, 112
    and 92 ms, its NumPy twin 84, 73 and 74 ms, in one choice); CPU time would not be fair
    to a parallel candidate, whose other threads it leaves out."""
    if clock is not None:
        return clock
    if cores <= 1 and (not calls_blas(jaxpr) or blas.threads(cores) <= 1):
        return time.thread_time
    return time.perf_counter


CANDIDATES = 3      # at most: the native program, its NumPy twin, native on one thread


def calls_to_choose(most) -> int:
    """The most calls a MeasuredChoice runs before it keeps one candidate: each
    candidate's untimed first call and at `most` timed ones. A benchmark that times the
    steady state warms a program up past these (bench/workloads_models.py)."""
    return CANDIDATES * (1 + most)


class MeasuredChoice:
    """cpu_backend="auto": a program with native groups, timed on its own calls against
    the other ways to run it until the fastest is kept. `candidates` are (name, build)
    pairs, each build() giving an executable at the candidate's first turn: the native
    program, its NumPy-code twin (the same program lowered with cpu_backend="numpy"), and,
    when a native group runs several OpenMP threads, the native program on one thread (on
    cores that other processes keep busy, a parallel region waits for a thread the
    scheduler has not run yet). Calls go round the candidates; the first call of each is not
    timed (buffers allocated, pages touched), the next `trials` of each are, and the one
    with the fastest call is kept (the first named on a tie) once it is clearly fastest,
    its fastest call at least `margin` faster than every other's; else the calls go on
    round the candidates, up to `most` timed calls of each, and the fastest is kept then.
    The others are dropped (their buffers go back to the byte budget). On a loaded machine
    one call of a 0.3 ms program varies by a third: an LSTM step's gate program, native
    20% faster, was kept as NumPy code in one run of three after 3 calls of each. Native
    code thus stays only where it makes the program faster on this machine, with this BLAS
    and this load. Until the choice, successive calls may differ in their last bits (the
    candidates compute the same operations, the native math within its ulp bounds).
    `choice`: None while timing, then the name kept; `times`: the timed seconds of each."""

    def __init__(self, candidates, trials, clock, most=None, margin=0.0):
        self._names = [name for name, _ in candidates]
        self._builds = dict(candidates)
        self._trials, self._clock = trials, clock
        self._most, self._margin = max(trials, most or trials), margin
        self.times: dict = {name: [] for name in self._names}
        self.choice = None
        self._chosen = None
        self._calls = 0
        self._lock = threading.Lock()
        first = self._builds.pop(self._names[0])()
        self._exes = {self._names[0]: first}
        self.name, self.n_in = first.name, first.n_in

    def __call__(self, *args, dests=None):
        exe = self._chosen
        if exe is not None:
            return exe(*args, dests=dests)
        with self._lock:
            exe = self._chosen
            if exe is None:
                k = self._calls
                self._calls += 1
                which = self._names[k % len(self._names)]
                exe = self._exes.get(which)
                if exe is None:
                    exe = self._exes[which] = self._builds.pop(which)()
        if exe is self._chosen:         # chosen by another thread meanwhile
            return exe(*args, dests=dests)
        t0 = self._clock()
        out = exe(*args, dests=dests)
        dt = self._clock() - t0
        if k >= len(self._names):
            with self._lock:
                if self._chosen is None:
                    self.times[which].append(dt)
                    n = min(map(len, self.times.values()))
                    if n >= self._most or n >= self._trials and self._clear():
                        self._choose()
        return out

    def _clear(self):
        """Whether one candidate's fastest call beats every other's by the margin."""
        best = sorted(min(t) for t in self.times.values())
        return len(best) < 2 or best[0] * (1 + self._margin) <= best[1]

    def _choose(self):
        self.choice = min(self._names, key=lambda n: (min(self.times[n]), self._names.index(n)))
        self._chosen = self._exes[self.choice]
        self._exes, self._builds = {self.choice: self._chosen}, {}

    def _current(self):
        return self._chosen or self._exes[self._names[0]]

    @property
    def nbytes(self):
        """The bytes of the executable that runs (the first candidate until the choice)."""
        return self._current().nbytes

    @property
    def holds_buffers(self):
        return self._current().holds_buffers

    @property
    def source(self):
        return self._current().source

    def __repr__(self):
        state = (f"chose {self.choice}" if self.choice else
                 f"timing {', '.join(self._names)}")
        return f"<MeasuredChoice {self.name}: {state}>"
