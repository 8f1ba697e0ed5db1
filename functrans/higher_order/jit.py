"""`ft.jit`: trace once per input signature, optimize, lower to a backend, cache.

A jitted call with concrete arrays looks its signature up (pytree structure, shapes,
dtypes, weak types, static arguments) and runs the executable cached for the
arguments' device (a device change compiles again but does not retrace): a
generated Python function (CPU) or a set of generated CUDA kernels (GPU). Under a
transformation the call binds the `jit` primitive, which carries the traced
ClosedJaxpr; its rules are the jaxpr-level transformations of functrans/ad.py and
functrans/batching.py, so grad, vmap, make_jaxpr and jit compose with it.

The pipeline, shared with `ft.compile`: ClosedJaxpr -> runtime.lower_jaxpr (passes.optimize,
then the backend's `lower`) -> `Lowered.compile()` -> executable, cached by `compile_jaxpr`.
"""
from __future__ import annotations

import functools
import inspect
import threading
import time
import warnings
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import passes, tree_util
from ..ad import (PartialEvalTracer, PartialVal, _EqnRecipe, jvp_jaxpr, partial_eval_jaxpr,
                  transpose_jaxpr)
from ..batching import axis_env, batch_jaxpr, current_axis_name
from ..core import (Array, ClosedJaxpr, FunctransError, Jaxpr, TypeCheckError, Tracer,
                    UndefinedPrimal, Zero, _state, _thread_state, canonicalize_value, get_aval,
                    short_dtype, value_of, wrap_value)
from ..core.config import config
from ..primitives.base import bdim_size, defprim, instantiate, moveaxis
from ..runtime import device_of, gc_paused, lower_jaxpr
from ..tracing import trace_to_jaxpr

# ---------------------------------------------------------------------------
# statistics and retrace reasons

RETRACE_WARN_LIMIT = 10     # warn once a function has been retraced this many times


class RetraceWarning(UserWarning):
    """A jitted function keeps being traced again: its cache is not doing its job."""


_stats_lock = threading.Lock()
_STATS: dict[str, Any] = {"traces": 0, "retraces": 0, "compiles": 0, "compile_s": 0.0,
          "new_callables": 0, "reasons": []}
_codes_seen: dict = {}      # code object -> number of function objects traced with it


_all_states: "weakref.WeakSet" = weakref.WeakSet()     # every function's cache state
_hits_offset = [0]


def _drop_executables():
    """After a change of ft.config.cpu_backend: every jitted function compiles again (its
    traces are kept)."""
    for st in list(_all_states):
        st.fast.clear()
        for entry in st.entries.values():
            entry.exes.clear()


config.on_backend_change(_drop_executables)


def _total_hits():
    return sum(st.hits for st in list(_all_states))


def jit_stats(reset: bool = False) -> dict[str, Any]:
    """Global jit counters: traces, retraces (with reasons), cache hits, compiles."""
    with _stats_lock:
        out = {k: (list(v) if isinstance(v, list) else v) for k, v in _STATS.items()}
        total = _total_hits()
        out["cache_hits"] = total - _hits_offset[0]
        if reset:
            for k in _STATS:
                _STATS[k] = [] if isinstance(_STATS[k], list) else type(_STATS[k])(0)
            _hits_offset[0] = total
    return out


def _count(key, n=1):
    with _stats_lock:
        _STATS[key] += n


class CacheInfo:
    """What `f.cache_info()` returns: hits, misses (traces), retraces and their reasons."""
    __slots__ = ("hits", "misses", "retraces", "size", "reasons")

    def __init__(self, hits, misses, retraces, size, reasons):
        self.hits, self.misses, self.retraces = hits, misses, retraces
        self.size, self.reasons = size, reasons

    def __repr__(self):
        return (f"CacheInfo(hits={self.hits}, misses={self.misses}, retraces={self.retraces}, "
                f"size={self.size})")


def _describe_sig(sig, names):
    parts = []
    for i, s in enumerate(sig):
        shape, dtype, weak = s
        desc = f"{short_dtype(dtype)}[{','.join(map(str, shape))}]" + ("(weak)" if weak else "")
        parts.append(f"{names[i] if i < len(names) else f'leaf {i}'}: {desc}")
    return ", ".join(parts)


def _diff_keys(old, new, leaf_names, static_names):
    """Human-readable differences between two cache keys."""
    (otree, osig, ostatic), (ntree, nsig, nstatic) = old[:3], new[:3]
    out = []
    if old[3:] != new[3:]:
        out.append(f"the named axes in scope changed: {old[3:][0]} -> {new[3:][0]}"
                   if old[3:] and new[3:] else "the named axes in scope changed")
    if otree != ntree:
        out.append(f"argument structure changed: {otree} -> {ntree}")
    else:
        for i, (a, b) in enumerate(zip(osig, nsig)):
            name = leaf_names[i] if i < len(leaf_names) else f"leaf {i}"
            if a[0] != b[0]:
                out.append(f"{name} changed shape: {a[0]} -> {b[0]}")
            if a[1] != b[1]:
                out.append(f"{name} changed dtype: {short_dtype(a[1])} -> {short_dtype(b[1])}")
            if a[2] != b[2]:
                out.append(f"{name} changed weak type: {a[2]} -> {b[2]} (a Python scalar is "
                           "weakly typed, an array is not)")
    o, n = dict(ostatic), dict(nstatic)
    for i, a in ostatic:
        if i in n and a != n[i]:
            out.append(f"static argument {static_names.get(i, i)} changed value: {a!r} -> "
                       f"{n[i]!r}")
    if o.keys() != n.keys():
        out.append("static arguments changed")
    return out or ["an equal key was evicted from the cache"]


# ---------------------------------------------------------------------------
# compiled executables, cached by jaxpr and device

def compile_jaxpr(closed: ClosedJaxpr, device="cpu", donated=(), name="jitted"):
    """The executable of a ClosedJaxpr for a device: exe(*flat_args) -> list of outputs.
    It is kept on closed, so it lives as long as whoever holds closed (a jitted function's
    cache entry, an ft.compile program, a memoized transformation); the memory its buffers
    hold counts against the byte budget of backends/memory.py."""
    exes = closed._exes
    if exes is None:
        exes = closed._exes = {}
    key = (device, tuple(donated), config.cpu_backend)
    exe = exes.get(key)
    if exe is not None:
        return exe
    t0 = time.perf_counter()
    exe = lower_jaxpr(closed, device, donated, name).compile()
    with _stats_lock:
        _STATS["compiles"] += 1
        _STATS["compile_s"] += time.perf_counter() - t0
    return exes.setdefault(key, exe)


# ---------------------------------------------------------------------------
# the jit primitive and its rules


def _jit_impl(xp, *args, jaxpr, name):
    exe = compile_jaxpr(jaxpr, device_of(args), (), name)
    return exe(*args)


def _jit_abstract_eval(*avals, jaxpr, name):
    want = jaxpr.in_avals
    if len(avals) != len(want) or any(a.shape != b.shape or a.dtype != b.dtype
                                      for a, b in zip(avals, want)):
        raise TypeCheckError(
            f"jit of {name}: called with {[a.str_short() for a in avals]}, its jaxpr takes "
            f"{[a.str_short() for a in want]}")
    return list(jaxpr.out_avals)


class _Memo:
    """A small LRU of jaxpr transformations keyed by (id(jaxpr), args); it keeps the
    jaxpr alive, so the id is not reused while the entry exists."""

    def __init__(self, fn, size=256):
        self.fn, self.size = fn, size
        self.data: OrderedDict = OrderedDict()
        self.lock = threading.Lock()

    def __call__(self, closed, *args):
        key = (id(closed),) + args
        with self.lock:
            hit = self.data.get(key)
            if hit is not None and hit[0] is closed:
                self.data.move_to_end(key)
                return hit[1]
        out = self.fn(closed, *args)
        with self.lock:
            self.data[key] = (closed, out)
            while len(self.data) > self.size:
                self.data.popitem(last=False)
        return out


def _jvp_jaxpr(closed, nonzeros):
    return jvp_jaxpr(closed, list(nonzeros), instantiate=False)


def _pe_jaxpr(closed, unknowns):
    return partial_eval_jaxpr(closed, list(unknowns), instantiate=False)


def _transpose_jaxpr(closed, linear):
    return transpose_jaxpr(closed, list(linear))


def _batch_jaxpr(closed, size, batched, axis_name):
    return batch_jaxpr(closed, size, list(batched), instantiate=False)


_memo_jvp = _Memo(_jvp_jaxpr)
_memo_pe = _Memo(_pe_jaxpr)
_memo_transpose = _Memo(_transpose_jaxpr)
_memo_batch = _Memo(_batch_jaxpr)


def _jit_jvp(primals, tangents, *, jaxpr, name):
    nonzeros = tuple(type(t) is not Zero for t in tangents)
    jclosed, out_nz = _memo_jvp(jaxpr, nonzeros)
    nz_tangents = [t for t in tangents if type(t) is not Zero]
    outs = jit_p.bind(*primals, *nz_tangents, jaxpr=jclosed, name=f"jvp({name})")
    n = len(jaxpr.out_avals)
    it = iter(outs[n:])
    t_outs = [next(it) if nz else Zero(a.strip_weak())
              for a, nz in zip(jaxpr.out_avals, out_nz, strict=True)]
    return outs[:n], t_outs


def _jit_partial_eval(trace, tracers, *, jaxpr, name):
    """Split the call into a known jit (run now) and an unknown jit (recorded)."""
    unknowns = tuple(not t.pval.is_known for t in tracers)
    known, unknown, out_unknowns, num_res = _memo_pe(jaxpr, unknowns)
    known_vals = [t.pval.const for t in tracers if t.pval.is_known]
    outs = jit_p.bind(*known_vals, jaxpr=known, name=name)
    n_known = len(outs) - num_res
    known_outs, res = outs[:n_known], outs[n_known:]
    res_tracers = [trace.instantiate_const(trace.pure(r)) for r in res]
    unk_in = [t for t in tracers if not t.pval.is_known]
    out_avals = [a for a, uk in zip(jaxpr.out_avals, out_unknowns, strict=True) if uk]
    out_tracers = [PartialEvalTracer(trace, PartialVal.unknown(a), None) for a in out_avals]
    if out_tracers:
        recipe = _EqnRecipe(jit_p, res_tracers + unk_in, {"jaxpr": unknown, "name": name},
                            out_avals, [weakref.ref(t) for t in out_tracers])
        for t in out_tracers:
            t.recipe = recipe
    kit, uit = iter(known_outs), iter(out_tracers)
    return [next(uit) if uk else trace.pure(next(kit)) for uk in out_unknowns]


def _jit_transpose(cts, *args, jaxpr, name):
    linear = tuple(type(a) is UndefinedPrimal for a in args)
    tclosed = _memo_transpose(jaxpr, linear)
    res = [a for a in args if type(a) is not UndefinedPrimal]
    cts = [instantiate(Zero(a.strip_weak())) if type(c) is Zero else c
           for c, a in zip(cts, jaxpr.out_avals, strict=True)]
    outs = iter(jit_p.bind(*res, *cts, jaxpr=tclosed, name=f"transpose({name})"))
    return [next(outs) if lin else None for lin in linear]


def _jit_batch(vals, dims, *, jaxpr, name):
    size = bdim_size(vals, dims)
    vals = [v if d is None else moveaxis(v, d, 0) for v, d in zip(vals, dims)]
    batched = tuple(d is not None for d in dims)
    bclosed, out_batched = _memo_batch(jaxpr, size, batched, current_axis_name())
    outs = jit_p.bind(*vals, jaxpr=bclosed, name=f"vmap({name})")
    return outs, [0 if b else None for b in out_batched]


jit_p = defprim("jit", _jit_impl, _jit_abstract_eval, multiple_results=True, memo=False,
                jvp=_jit_jvp, transpose=_jit_transpose, batch=_jit_batch,
                partial_eval=_jit_partial_eval,
                # the known jit of its linearization returns the call's outputs, then the
                # residuals (reverse._reuse names them so: what reads them finds the values
                # the recording saved, instead of recomputing them from inputs nobody kept)
                known_part_leads=True)
passes.INLINABLE[jit_p] = "jaxpr"


# ---------------------------------------------------------------------------
# the user-facing jitted function


class _Entry:
    __slots__ = ("closed", "out_tree", "exes", "tracer_consts", "unflatten")

    def __init__(self, closed, out_tree, tracer_consts=()):
        self.closed, self.out_tree = closed, out_tree
        self.unflatten = None         # outputs -> pytree of Arrays (made on the first call)
        self.exes = {}
        self.tracer_consts = tracer_consts


def _leaf_sig(x):
    t = type(x)
    if t is np.ndarray:
        return (x.shape, x.dtype, False)
    a = get_aval(x)
    return (a.shape, a.dtype, a.weak_type)


def _norm_argnums(nums, what):
    if nums is None:
        return ()
    if isinstance(nums, int):
        nums = (nums,)
    nums = tuple(nums)
    if any(not isinstance(n, int) for n in nums):
        raise TypeError(f"jit {what} must be an int or a tuple of ints, got {nums!r}")
    return nums


def _norm_argnames(names):
    if names is None:
        return ()
    names = (names,) if isinstance(names, str) else tuple(names)
    for n in names:
        if not isinstance(n, str):
            raise TypeError(f"argument is not a string: {n}")
    return names


_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
_KEYWORD = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


def _resolve_static(sig, static_argnums, static_argnames):
    """(argnums, argnames) as JAX resolves them: the form not given is inferred through the
    signature's positional-or-keyword parameters; both are checked against it."""
    nums = _norm_argnums(static_argnums, "static_argnums")
    names = _norm_argnames(static_argnames)
    if sig is None:
        return nums, names
    params = list(sig.parameters.values())
    both = [i for i, p in enumerate(params) if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]
    if static_argnames is None:
        names = tuple(params[i].name for i in both if i in nums or i - len(params) in nums)
    elif static_argnums is None:
        nums = tuple(i for i in both if params[i].name in names)
    kinds = {p.kind for p in params}
    n_pos = sum(p.kind in _POSITIONAL for p in params)
    if (inspect.Parameter.VAR_POSITIONAL not in kinds and nums
            and (-min(nums) > n_pos or max(nums) >= n_pos)):
        raise ValueError(f"Jitted function has static_argnums={nums}, "
                         f"but only accepts {n_pos} positional arguments.")
    pos_only = {p.name for p in params if p.kind is inspect.Parameter.POSITIONAL_ONLY}
    if pos_only & set(names):
        raise ValueError(f"Jitted function has invalid argnames {pos_only & set(names)} "
                         "in static_argnames. These are positional-only")
    valid = {p.name for p in params if p.kind in _KEYWORD}
    if inspect.Parameter.VAR_KEYWORD not in kinds and set(names) - valid:
        raise ValueError(f"Jitted function has invalid argnames {set(names) - valid} "
                         "in static_argnames. Function does not take these args.")
    return nums, names


class NonHashableStaticArgument(TypeError, ValueError):
    """A static argument that cannot key the cache: JAX raises ValueError, earlier
    functrans TypeError; both catch it."""


_fun_caches: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_ndarray = np.ndarray


class _JitSwitch(threading.local):
    disabled = False


_JIT = _JitSwitch()


class disable_jit:  # noqa: N801  (jax's name)
    """`with ft.disable_jit():` jitted functions called in the block (in this thread) run
    their Python eagerly, op by op, as JAX's disable_jit: print() and a debugger see
    concrete values, and the jit cache is neither read nor filled. `disable_jit(False)`
    turns jit back on inside an outer block."""

    def __init__(self, disable: bool = True):
        self.disable = bool(disable)

    def __enter__(self):
        self.prev, _JIT.disabled = _JIT.disabled, self.disable
        return self

    def __exit__(self, *exc):
        _JIT.disabled = self.prev
        return False


class JitFunction:
    """A function traced once per input signature and run as a compiled program."""

    def __init__(self, fun, static_argnums=None, donate_argnums=(), static_argnames=None):
        if not callable(fun):
            raise TypeError(f"Expected a callable value, got {fun}")
        if inspect.isgeneratorfunction(fun):
            raise TypeError(f"Expected a function, got a generator function: {fun}")
        functools.update_wrapper(self, fun)
        self.fun = fun
        try:
            sig = inspect.signature(fun)
        except (TypeError, ValueError):
            sig = None
        self.static_argnums, self.static_argnames = _resolve_static(
            sig, static_argnums, static_argnames)
        self.donate_argnums = _norm_argnums(donate_argnums, "donate_argnums")
        clash = set(self.static_argnums) & set(self.donate_argnums)
        if clash:
            raise ValueError(f"jit: arguments {sorted(clash)} cannot be both static and donated")
        self._name = getattr(fun, "__name__", type(fun).__name__)
        self._params = list(sig.parameters) if sig is not None else []
        shared = None
        try:
            shared = _fun_caches.setdefault(fun, {})
        except TypeError:
            pass
        key = (self.static_argnums, self.static_argnames, self.donate_argnums)
        if shared is not None:
            self._state = shared.setdefault(key, _CacheState())
        else:
            self._state = _CacheState()
        self._lock = threading.Lock()

    # -- bookkeeping ------------------------------------------------------

    @property
    def retraces(self):
        """The reason of every trace after the first, in order."""
        return list(self._state.reasons[1:])

    @property
    def trace_reasons(self):
        """The reason of every trace, the first one included."""
        return list(self._state.reasons)

    def cache_info(self):
        s = self._state
        return CacheInfo(s.hits, s.traces, max(0, s.traces - 1), len(s.entries),
                         list(s.reasons))

    def clear_cache(self):
        self._state.entries.clear()
        self._state.fast.clear()

    def __repr__(self):
        return f"<jitted {self._name}>"

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return functools.partial(self, obj)

    # -- calling ----------------------------------------------------------

    def _split(self, args, kwargs):
        """(dynamic leaves, treedef, static tuple) of a call; static keyword arguments
        enter the static tuple under their names and leave `kwargs`."""
        static_kw = ()
        if self.static_argnames and kwargs:
            static_kw = tuple((k, kwargs.pop(k)) for k in sorted(kwargs)
                              if k in self.static_argnames)
            for k, s in static_kw:
                self._check_hashable(k, s)
        if self.static_argnums:
            static_idx = self._static_positions(len(args))
            static = tuple((i, args[i]) for i in sorted(static_idx))
            for i, s in static:
                self._check_hashable(i, s)
            dyn = tuple(a for i, a in enumerate(args) if i not in static_idx)
        else:
            static, dyn = (), args
        leaves, tree = tree_util.tree_flatten((dyn, kwargs) if kwargs else dyn)
        leaves = [canonicalize_value(x) for x in leaves]     # x32, as JAX (no-op under x64)
        return leaves, tree, static + static_kw

    def _static_positions(self, n):
        """The static positions among n positional arguments (as JAX: a static position
        past them is ignored, its argument was passed by keyword or took its default)."""
        return {i % n for i in self.static_argnums if -n <= i < n}

    def _check_hashable(self, i, s):
        try:
            hash(s)
        except TypeError:
            where = f"index {i}" if isinstance(i, int) else f"name {i!r}"
            raise NonHashableStaticArgument(
                "Non-hashable static arguments are not supported, as this can lead to "
                f"unexpected cache-misses. Static argument ({where}) of type {type(s)} for "
                f"function {self._name} is non-hashable. (jit of {self._name}: static "
                f"argument {self._argname(i)} is not hashable; use a tuple instead of a "
                "list)") from None

    def _argname(self, i):
        if isinstance(i, str):
            return f"'{i}'"
        return f"'{self._params[i]}'" if i < len(self._params) else str(i)

    def _leaf_names(self, args, kwargs):
        """Names of the dynamic leaves ("argument 'x'", "argument 'p' leaf 2")."""
        static_idx = self._static_positions(len(args))
        names = []
        for i, a in enumerate(args):
            if i in static_idx:
                continue
            n = len(tree_util.tree_leaves(a))
            base = f"argument {self._argname(i)}"
            names += [base] if n == 1 else [f"{base} leaf {k}" for k in range(n)]
        for k in sorted(kwargs or {}):
            n = len(tree_util.tree_leaves(kwargs[k]))
            names += [f"keyword {k!r}"] if n == 1 else [f"keyword {k!r} leaf {j}"
                                                        for j in range(n)]
        return names

    def __call__(self, *args, **kwargs):
        if _JIT.disabled:
            return self.fun(*args, **kwargs)
        st = self._state
        if not kwargs and _thread_state.depth == 0:
            # fast path: every argument a NumPy array or an Array, a signature seen before
            sig = []
            raw = None
            for a in args:
                t = type(a)
                if t is _ndarray:
                    sig.append((a.shape, a.dtype))
                elif t is Array:
                    v = a._value
                    if v is None or type(v) is not _ndarray:
                        break                  # deleted (the slow path raises) or CuPy
                    if raw is None:
                        raw = list(args)
                    raw[len(sig)] = v
                    sig.append((v.shape, v.dtype, a.weak_type))
                else:
                    break
            else:
                hit = st.fast.get(tuple(sig))
                if hit is not None:
                    st.hits += 1
                    out = hit[1](hit[0](*(args if raw is None else raw)))
                    if self.donate_argnums and raw is not None:
                        self._delete_donated(args)
                    return out
        leaves, tree, static = self._split(args, kwargs)
        if _state().depth or any(isinstance(x, Tracer) for x in leaves):
            return self._bind(args, kwargs, leaves, tree, static)
        try:
            sig = tuple(_leaf_sig(x) for x in leaves)
        except TypeError as e:
            raise TypeError(f"jit of {self._name}: {e} Mark non-array arguments static "
                            "with static_argnums.") from None
        key = (tree, sig, static)
        entry = st.entries.get(key)
        device = device_of(leaves)
        if entry is not None:
            st.hits += 1
        exe = None if entry is None else entry.exes.get(device)
        if exe is None:
            with gc_paused():
                if entry is None:
                    entry = self._trace(args, kwargs, leaves, tree, static, key, sig)
                donated = self._donated_leaves(args, kwargs)
                exe = entry.exes[device] = compile_jaxpr(entry.closed, device, donated,
                                                         self._name)
        unflatten = entry.unflatten
        if unflatten is None:
            unflatten = entry.unflatten = _unflattener(
                entry.out_tree, [v.aval.weak_type for v in entry.closed.jaxpr.outvars])
        if (not kwargs and not static and device == "cpu" and len(leaves) == len(args)
                and all((type(a) is _ndarray or type(a) is Array and
                         type(a._value) is _ndarray) and a is x     # (x32 converted none)
                        for a, x in zip(args, leaves))):
            st.fast[tuple((a.shape, a.dtype) if type(a) is _ndarray else
                          (a.shape, a.dtype, a.weak_type) for a in args)] = (exe, unflatten)
        out = unflatten(exe(*[value_of(x) if type(x) is Array else x for x in leaves]))
        if self.donate_argnums:
            self._delete_donated(args, kwargs)
        return out

    def _delete_donated(self, args, kwargs=None):
        """Donated Array arguments are deleted after the call, as JAX's: their buffers may
        hold the outputs now, so reading them raises (NumPy arrays are left alone). A
        donated argument passed by keyword is deleted too (its buffer is not reused)."""
        n = len(args)
        static_idx = self._static_positions(n)
        donated = [args[i] for i in self.donate_argnums if -n <= i < n and i % n not in static_idx]
        for k, v in (kwargs or {}).items():
            if k in self._params and self._params.index(k) in self.donate_argnums:
                donated.append(v)
        for a in donated:
            for leaf in tree_util.tree_leaves(a):
                if type(leaf) is Array:
                    leaf.delete()

    def _donated_leaves(self, args, kwargs):
        if not self.donate_argnums:
            return ()
        n = len(args)
        donate = {i % n for i in self.donate_argnums if -n <= i < n}
        static_idx = self._static_positions(n)
        flags = []
        for i, a in enumerate(args):
            if i in static_idx:
                continue
            flags += [i in donate] * len(tree_util.tree_leaves(a))
        for k in sorted(kwargs or {}):
            flags += [False] * len(tree_util.tree_leaves(kwargs[k]))
        return tuple(flags)

    def _make_flat(self, args, kwargs, tree, static):
        """f on flat dynamic leaves, returning flat outputs; out_tree in the store."""
        static_d = dict(static)
        store = {}

        def f_flat(*leaves):
            dyn = tree_util.tree_unflatten(tree, leaves)
            dyn_args, kw = dyn if kwargs else (dyn, {})
            it = iter(dyn_args)
            full = [static_d[i] if i in static_d else next(it) for i in range(len(args))]
            out = self.fun(*full, **kw, **{k: v for k, v in static if isinstance(k, str)})
            out_leaves, store["tree"] = tree_util.tree_flatten(out)
            return out_leaves
        return f_flat, store

    def _trace_jaxpr(self, args, kwargs, leaves, tree, static):
        in_avals = [get_aval(x) for x in leaves]
        f_flat, store = self._make_flat(args, kwargs, tree, static)
        jaxpr, consts = trace_to_jaxpr(f_flat, in_avals, label=f"ft.jit of `{self._name}`")
        return jaxpr, consts, store["tree"]

    def _record_trace(self, key, args, kwargs, sig, note=None):
        """Count a trace and explain it."""
        st = self._state
        if note is not None and st.reasons:
            reason = f"retrace of {self._name}: {note}"
        elif not st.entries and not st.reasons:
            code = getattr(self.fun, "__code__", None)
            seen = _codes_seen.get(code, 0) if code is not None else 0
            if code is not None:
                _codes_seen[code] = seen + 1
            if seen:
                reason = (f"new callable: {self._name} is a new function object with the same "
                          f"code as {seen} traced before (a lambda or closure created anew on "
                          "each call); create the jitted function once and reuse it")
                _count("new_callables")
                if seen + 1 == RETRACE_WARN_LIMIT:
                    warnings.warn(f"jit: {reason}", RetraceWarning, stacklevel=4)
            else:
                names = self._leaf_names(args, kwargs) if args or kwargs else []
                reason = f"first trace of {self._name}({_describe_sig(sig, names)})"
        else:
            old = st.last_key
            names = self._leaf_names(args, kwargs)
            static_names = {i: self._argname(i)
                            for i in self.static_argnums + self.static_argnames}
            if old is None:
                reason = "retraced after the cache was cleared"
            else:
                reason = "; ".join(_diff_keys(old, key, names, static_names))
            reason = f"retrace of {self._name}: {reason}"
        st.reasons.append(reason)
        st.traces += 1
        _count("traces")
        if st.traces > 1 or reason.startswith("new callable"):
            with _stats_lock:
                _STATS["retraces"] += 1
                _STATS["reasons"].append(reason)
                del _STATS["reasons"][:-1000]
        if st.traces - 1 == RETRACE_WARN_LIMIT:
            warnings.warn(
                f"jit: {self._name} has been traced {st.traces} times; last reason: {reason}. "
                "Each retrace re-optimizes and recompiles. Keep shapes and dtypes stable "
                "(pad batches or drop the last partial one), pass Python scalars as arrays, "
                "or mark configuration arguments static.", RetraceWarning, stacklevel=4)
        st.last_key = key

    def _trace(self, args, kwargs, leaves, tree, static, key, sig):
        jaxpr, consts, out_tree = self._trace_jaxpr(args, kwargs, leaves, tree, static)
        self._record_trace(key, args, kwargs, sig)
        entry = _Entry(ClosedJaxpr(jaxpr, consts), out_tree)
        self._state.entries[key] = entry
        return entry

    def _bind(self, args, kwargs, leaves, tree, static):
        """Under a transformation: bind the jit primitive (closing over outer tracers
        turns them into explicit arguments)."""
        sig = tuple((get_aval(x).shape, get_aval(x).dtype, get_aval(x).weak_type)
                    for x in leaves)
        key = (tree, sig, static, axis_env())     # axis_size reads the named axes
        st = self._state
        entry = st.entries.get(key)
        if entry is None:
            jaxpr, consts, out_tree = self._trace_jaxpr(args, kwargs, leaves, tree, static)
            closes = any(isinstance(c, Tracer) for c in consts)
            self._record_trace(key, args, kwargs, sig, note=(
                "it closes over values traced by an enclosing transformation, so it is "
                "traced anew on each call; pass them as arguments instead") if closes else None)
            if closes:
                # closure conversion: tracer constants become leading arguments
                is_t = [isinstance(c, Tracer) for c in consts]
                tvars = [v for v, t in zip(jaxpr.constvars, is_t) if t]
                jaxpr = Jaxpr([v for v, t in zip(jaxpr.constvars, is_t) if not t],
                              tvars + jaxpr.invars, jaxpr.eqns, jaxpr.outvars)
                closed = ClosedJaxpr(jaxpr, [c for c, t in zip(consts, is_t) if not t])
                entry = _Entry(closed, out_tree, [c for c, t in zip(consts, is_t) if t])
            else:
                entry = _Entry(ClosedJaxpr(jaxpr, consts), out_tree)
                st.entries[key] = entry
        else:
            st.hits += 1
        outs = jit_p.bind(*entry.tracer_consts, *leaves, jaxpr=entry.closed, name=self._name)
        return tree_util.tree_unflatten(entry.out_tree, outs)

    def lower(self, *args, backend=None, **kwargs):
        """Trace (or reuse the trace) for these arguments and lower for a backend."""
        leaves, tree, static = self._split(args, kwargs)
        if any(isinstance(x, Tracer) for x in leaves):
            raise FunctransError("lower() needs concrete (or ShapeDtypeStruct) arguments")
        sig = tuple(_leaf_sig(x) for x in leaves)
        key = (tree, sig, static)
        entry = self._state.entries.get(key)
        if entry is None:
            entry = self._trace(args, kwargs, leaves, tree, static, key, sig)
        return lower_jaxpr(entry.closed, backend or device_of(leaves),
                           self._donated_leaves(args, kwargs), self._name)


_new = object.__new__


def _unflattener(out_tree, weak):
    """outputs list -> the output pytree of Arrays (weak[i]: output i is weakly typed),
    without a tree walk in the common cases."""
    if out_tree.node_type is None:
        w0 = weak[0]

        def one(outs):
            o = outs[0]
            if type(o) is np.ndarray:
                a = _new(Array)
                a._value, a.weak_type = o, w0
                return a
            return wrap_value(o, w0)
        return one
    if not any(weak):
        if out_tree.node_type is tuple and all(c.node_type is None for c in out_tree.children):
            return lambda outs: tuple([wrap_value(o) for o in outs])
        return lambda outs: tree_util.tree_unflatten(out_tree, [wrap_value(o) for o in outs])
    return lambda outs: tree_util.tree_unflatten(
        out_tree, [wrap_value(o, w) for o, w in zip(outs, weak)])


class _CacheState:
    __slots__ = ("entries", "fast", "hits", "traces", "reasons", "last_key", "__weakref__")

    def __init__(self):
        _all_states.add(self)
        self.entries: dict = {}
        self.fast: dict = {}          # (shape, dtype) per NumPy argument -> (exe, unflatten)
        self.hits = 0
        self.traces = 0
        self.reasons: list = []
        self.last_key = None


def jit(fun: Callable[..., Any] | None = None,
        static_argnums: int | Sequence[int] | None = None,
        donate_argnums: int | Sequence[int] = (),
        static_argnames: str | Sequence[str] | None = None,
        donate_argnames: str | Sequence[str] | None = None,
        keep_unused: bool = False, inline: bool = False
        ) -> JitFunction | Callable[[Callable[..., Any]], JitFunction]:
    """Trace `fun` once per input signature, optimize the jaxpr, lower it to generated
    NumPy code (CPU) or fused CUDA kernels (GPU) and cache the result.

    static_argnums / static_argnames: positions / names of hashable, non-array arguments
    baked into the trace (a new value retraces); given one, the other is inferred from the
    signature, as JAX does. donate_argnums / donate_argnames: positions / names of
    arguments whose buffers the program may overwrite (the caller must not use those
    arrays afterwards); names become positions through the signature (an argument passed
    by keyword is not donated). keep_unused and inline are accepted as JAX's: the program's
    values do not depend on them."""
    donate_argnums = _donated_positions(fun, donate_argnums, donate_argnames)
    if fun is None:
        return lambda f: JitFunction(f, static_argnums,
                                     _donated_positions(f, donate_argnums, donate_argnames),
                                     static_argnames)
    return JitFunction(fun, static_argnums, donate_argnums, static_argnames)


def _donated_positions(fun, donate_argnums, donate_argnames):
    """donate_argnums with the positions of donate_argnames added (from fun's signature)."""
    if not donate_argnames or fun is None:
        return donate_argnums
    names = (donate_argnames,) if isinstance(donate_argnames, str) else tuple(donate_argnames)
    try:
        params = list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):
        return donate_argnums
    nums = list(_norm_argnums(donate_argnums, "donate_argnums"))
    for i, p in enumerate(params):
        if p.name in names and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) \
                and i not in nums:
            nums.append(i)
    return tuple(nums)
