"""The runtime: runs a closed jaxpr on concrete arrays, and lowers jaxprs for a backend.

One program goes through tiers as it keeps being run: the first run interprets its
equations (the implementations called directly: the jaxpr is already well typed); from
the second run on it is straight-line Python code, shared by every jaxpr of the same
structure (a loop body traced again at every call compiles once); after HOT_RUNS runs on
NumPy arrays it is lowered by the CPU backend (in-place ufuncs, fused and blocked
elementwise groups), and after NATIVE_RUNS runs lowered again with the fusion groups where
native code wins (cpu_backend "auto") as C++ functions; the buffers it then holds count
against the one byte budget of all compiled programs (backends/memory.py). `lower_jaxpr` is the jit
pipeline (optimize, then the backend of the arguments' device) that jit executables and
hot programs share.
"""
from __future__ import annotations

import contextlib
import functools
import gc
import threading
import time
import warnings

import numpy as np

from . import passes
from .backends import JIT_MODULE, cpu, cuda
from .backends.memory import BUDGET, DERIVED, EQN_BYTES
from .core import (ClosedJaxpr, Jaxpr, Literal, _thread_state, array_module, eval_impls,
                   has_tracer, structure_key)
from .core import eval_jaxpr as bind_jaxpr

HOT_RUNS = 8                    # runs on NumPy arrays before a program is lowered
NATIVE_RUNS = 64                # ... and before it is lowered again with native groups

# ---------------------------------------------------------------------------
# running programs


def run(closed: ClosedJaxpr, *args):
    """closed's outputs (a list) on concrete arrays args."""
    jaxpr = closed.jaxpr
    if len(args) != len(jaxpr.invars):
        raise TypeError(f"jaxpr takes {len(jaxpr.invars)} arguments, got {len(args)}")
    return _run(jaxpr, [*closed.consts, *args])


def eval_jaxpr(jaxpr: Jaxpr, consts, *args):
    """`ft.eval_jaxpr`: on concrete arrays outside any transformation the runtime runs it
    (through the tiers); otherwise core.eval_jaxpr binds its equations."""
    if _thread_state.depth == 0 and len(args) == len(jaxpr.invars) and \
            len(consts) == len(jaxpr.constvars):
        vals = [*consts, *args]
        if not has_tracer(vals):
            return _run(jaxpr, vals)
    return bind_jaxpr(jaxpr, consts, *args)


def program(closed: ClosedJaxpr):
    """closed as a function (xp, *args, dests=None) -> outputs on concrete arrays (run
    through the tiers; xp is implied by the arguments). dests: see _run."""
    jaxpr, consts = closed.jaxpr, list(closed.consts)

    def call(xp, *args, dests=None):
        return _run(jaxpr, [*consts, *args], dests)
    call.closed = closed
    return call


def _run(jaxpr: Jaxpr, vals: list, dests=None):
    """Run a jaxpr on vals (its consts, then its arguments) in the tier it has reached.
    dests: None, or per output None or an array the hot tier may write it into (a
    C-contiguous array of its shape and dtype that shares no memory with vals); the
    caller checks which outputs came back in them (`out is dest`)."""
    jaxpr._runs += 1
    if jaxpr._runs == 1:
        return eval_impls(jaxpr, vals)
    xp = array_module(*vals)
    prog = jaxpr._compiled
    if prog is None:
        prog = jaxpr._compiled = _program_of(jaxpr)
    if xp is np:
        prog.runs += 1
        hot = prog.hot
        if hot is None and prog.runs >= HOT_RUNS:
            hot = prog.hot = hot_program(jaxpr)
        elif prog.runs == NATIVE_RUNS and hot:
            hot = prog.hot = native_hot_program(jaxpr) or hot
        if hot:
            return hot(*vals, dests=dests)
    return prog.straight(xp, *vals)


def settled(closed: ClosedJaxpr):
    """closed's program as f(*args, dests=None) on NumPy arrays, once it has reached its
    last tier there (lowered, with native groups where they win: past NATIVE_RUNS runs),
    for a loop to call directly (a scan's step: _run's bookkeeping cost about as much as
    an LSTM step's gate kernel); None before, or where it is not lowered. A jaxpr of a
    structure run before (a scan traced again) finds its program at once."""
    jaxpr = closed.jaxpr
    prog = jaxpr._compiled
    if prog is None:
        prog = jaxpr._compiled = _program_of(jaxpr)
    if prog.runs <= NATIVE_RUNS or not prog.hot:
        return None
    hot, consts = prog.hot, tuple(closed.consts)
    if not consts:
        return hot
    return lambda *args, dests=None: hot(*consts, *args, dests=dests)


SMALL_ELEMENTS = 4096             # small_program: the largest value of a small program


def small_program(closed: ClosedJaxpr):
    """closed as f(xp, *args) -> outputs, its shared straight-line code called directly
    (no tiers), when every value it reads or computes has at most SMALL_ELEMENTS elements;
    else None. The first-sight reverse pass runs one such program per equation: on small
    arrays the tiers' bookkeeping (run, _run, the lowered program's lock and budget) costs
    about twice what the equation does, and a lowered program saves nothing there."""
    jaxpr = closed.jaxpr
    for v in jaxpr.invars + [o for e in jaxpr.eqns for o in e.outvars]:
        if getattr(v.aval, "size", SMALL_ELEMENTS + 1) > SMALL_ELEMENTS:
            return None
    prog = jaxpr._compiled
    if prog is None:
        prog = jaxpr._compiled = _program_of(jaxpr)
    straight = prog.straight
    consts = tuple(closed.consts)
    if consts:
        return lambda xp, *args: straight(xp, *consts, *args)
    return straight


class _Program:
    """The compiled forms of one jaxpr structure, shared by equal jaxprs."""
    __slots__ = ("straight", "hot", "runs")

    def __init__(self, straight):
        self.straight, self.hot, self.runs = straight, None, 0


def _program_of(jaxpr: Jaxpr) -> _Program:
    """The compiled forms of jaxpr's structure, kept in the one cache of derived things
    (backends/memory.DERIVED), shared by equal jaxprs."""
    key = ("program", structure_key(jaxpr))
    try:
        prog = DERIVED.get(key)
    except TypeError:                   # an unhashable param: not shared
        return _Program(straight_line(jaxpr))
    if prog is None:
        prog = DERIVED.put(key, _Program(straight_line(jaxpr)),
                           EQN_BYTES * (len(jaxpr.eqns) + 1))
    return prog


# ---------------------------------------------------------------------------
# the straight-line tier


_DIRECT: dict = {}      # primitive -> the name of the NumPy function it calls, or None


def direct_ufunc(prim):
    """The name of the function its implementation calls on the array module, when the
    implementation is exactly `lambda xp, a, b: xp.<cpu>(a, b)` (its `cpu` ufunc on its
    arguments in order: the same bytecode, names and constants), else None. Code that
    would call the implementation calls `xp.<cpu>` instead, one Python call fewer per
    equation (what an equation on small arrays costs is mostly calls)."""
    try:
        return _DIRECT[prim]
    except KeyError:
        pass
    name, impl = prim.cpu, prim.impl
    code = getattr(impl, "__code__", None)
    if type(name) is not str or code is None or code.co_argcount < 2 or \
            code.co_kwonlyargcount or getattr(impl, "__defaults__", None) or \
            getattr(impl, "__closure__", None):
        _DIRECT[prim] = None
        return None
    args = ", ".join(f"a{i}" for i in range(code.co_argcount - 1))
    ref = eval(f"lambda xp, {args}: xp.{name}({args})").__code__      # noqa: S307
    same = (code.co_code == ref.co_code and code.co_names == ref.co_names
            and code.co_consts == ref.co_consts and code.co_flags == ref.co_flags)
    _DIRECT[prim] = name if same else None
    return _DIRECT[prim]


def straight_line(jaxpr: Jaxpr):
    """jaxpr (consts as leading arguments) as Python source with one line per equation,
    each calling impl(xp, ...) bound to its params (or xp.<ufunc>(...) where the
    implementation is just that: direct_ufunc): a function (xp, *vals) -> outputs.
    Literals and the bound implementations live in the function's globals."""
    names: dict = {}
    glob: dict = {}

    def name(a):
        if type(a) is Literal:
            key = f"k{len(glob)}"
            glob[key] = a.val
            return key
        return names.setdefault(a, f"v{len(names)}")
    args = [name(v) for v in jaxpr.constvars + jaxpr.invars]
    lines = [f"def run(xp, {', '.join(args)}):" if args else "def run(xp):"]
    for i, eqn in enumerate(jaxpr.eqns):
        prim = eqn.primitive
        direct = None if eqn.params or prim.multiple_results else direct_ufunc(prim)
        if direct is not None and len(eqn.invars) == prim.impl.__code__.co_argcount - 1:
            ins = ", ".join(name(a) for a in eqn.invars)
            lines.append(f"    {name(eqn.outvars[0])} = xp.{direct}({ins})")
            continue
        fn = f"f{i}"
        glob[fn] = functools.partial(eqn.primitive.impl, **eqn.params) if eqn.params \
            else eqn.primitive.impl
        ins = ", ".join(["xp"] + [name(a) for a in eqn.invars])
        outs = ", ".join(name(v) for v in eqn.outvars)
        if eqn.primitive.multiple_results and not eqn.outvars:
            lines.append(f"    {fn}({ins})")
            continue
        if eqn.primitive.multiple_results:
            outs += ","
        lines.append(f"    {outs} = {fn}({ins})")
    lines.append(f"    return [{', '.join(name(a) for a in jaxpr.outvars)}]")
    glob["__name__"] = JIT_MODULE
    exec(compile("\n".join(lines), f"<jaxpr {id(jaxpr):x}>", "exec"), glob)
    return glob["run"]


# ---------------------------------------------------------------------------
# the hot (lowered) tier


def hot_program(jaxpr: Jaxpr):
    """jaxpr (consts as leading arguments) lowered by the CPU backend, its outputs allowed
    to alias its inputs: exe(*vals, dests=None) -> outputs (dests: _run); False (stay
    straight-line code) for effects, a failed lowering or buffers larger than the whole
    byte budget. An effect
    declared hot_safe (its operands are never scratch buffers a callback could keep) is
    lowered like any other equation."""
    if not jaxpr.eqns or any(e.primitive.effectful and not e.primitive.extra.get("hot_safe")
                             for e in jaxpr.eqns):
        return False                    # callbacks run as written
    flat = Jaxpr([], list(jaxpr.constvars) + list(jaxpr.invars), jaxpr.eqns, jaxpr.outvars)
    try:
        exe = lower_jaxpr(ClosedJaxpr(flat, []), "cpu", (), "program",
                          alias_outputs=True, native=False, destinations=True).compile()
    except Exception as e:      # a lowering bug must not break un-jitted code: say so, go on
        warnings.warn(f"functrans: the CPU lowering of a hot program failed ({type(e).__name__}: "
                      f"{e}); it keeps running as straight-line code. Please report this.",
                      RuntimeWarning, stacklevel=2)
        return False
    if exe.nbytes > BUDGET.limit:
        return False
    return exe


def native_hot_program(jaxpr: Jaxpr):
    """jaxpr lowered as hot_program does, its fusion groups native where the cpu_backend
    policy ("auto": those where native code wins) and the toolchain allow; None when no
    group became native code (the NumPy-code program stays). A program gets here after
    NATIVE_RUNS runs: a loop's step, which then pays its compile (about 0.1-0.5 s, none
    when the toolchain's disk cache has the library) once, not a function called a few
    times."""
    setting = cpu.native_setting()
    if setting is None or setting[1]:           # cpu_backend="numpy", or no toolchain
        return None
    flat = Jaxpr([], list(jaxpr.constvars) + list(jaxpr.invars), jaxpr.eqns, jaxpr.outvars)
    try:
        low = lower_jaxpr(ClosedJaxpr(flat, []), "cpu", (), "program", alias_outputs=True,
                          native=True, destinations=True)
        if low.native is None:
            return None
        exe = low.compile()
    except Exception as e:      # as hot_program: say so, keep the program running
        warnings.warn(f"functrans: the native lowering of a hot program failed "
                      f"({type(e).__name__}: {e}); it keeps running NumPy code. Please "
                      "report this.", RuntimeWarning, stacklevel=2)
        return None
    return exe if exe.nbytes <= BUDGET.limit else None


# ---------------------------------------------------------------------------
# lowering for a backend


def lower_jaxpr(closed: ClosedJaxpr, backend="cpu", donated=(), name="jitted", optimize=True,
                alias_outputs=False, native=True, destinations=False):
    """Optimize a ClosedJaxpr and lower it for a backend ("cpu" or "cuda"): a Lowered.
    native=False keeps CPU fusion groups on NumPy code (the first hot tier of un-jitted
    programs: no compiler run for a program run only a few times)."""
    t0 = time.perf_counter()
    optimized = passes.optimize(closed) if optimize else closed
    t1 = time.perf_counter()
    if backend == "cpu":
        lowered = cpu.lower(optimized, donated=donated, name=name, alias_outputs=alias_outputs,
                            native=native, destinations=destinations)
    elif backend == "cuda":
        lowered = cuda.lower(optimized, donated=donated, name=name)
    else:
        raise ValueError(f"unknown backend {backend!r}; use 'cpu' or 'cuda'")
    lowered.jaxpr = closed
    lowered.timings = {"optimize_s": t1 - t0, "lower_s": time.perf_counter() - t1}
    return lowered


def device_of(vals):
    """The backend for these arrays: "cuda" if one is a CuPy array, else "cpu"."""
    for v in vals:
        if type(v).__module__.startswith("cupy"):
            return "cuda"
    return "cpu"


# ---------------------------------------------------------------------------
# compiling without the cyclic garbage collector

_GC = {"pauses": 0, "was_enabled": False}
_GC_LOCK = threading.Lock()


@contextlib.contextmanager
def gc_paused():
    """Trace and compile with the cyclic collector paused: building a program of n
    equations allocates O(n) long-lived objects, and the collections they trigger rescan
    the growing program (about 40% of a 10,000-equation jit(grad) compile). What is
    garbage meanwhile is collected when the outermost pause ends."""
    with _GC_LOCK:
        if _GC["pauses"] == 0:
            _GC["was_enabled"] = gc.isenabled()
            gc.disable()
        _GC["pauses"] += 1
    try:
        yield
    finally:
        with _GC_LOCK:
            _GC["pauses"] -= 1
            if _GC["pauses"] == 0 and _GC["was_enabled"]:
                gc.enable()

