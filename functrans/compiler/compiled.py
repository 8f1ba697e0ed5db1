"""`ft.compile`: the facade's jit. PyTorch-style code (Tensors, Modules, autograd) is
captured into a jaxpr, guarded, lowered by the jit pipeline, and each call is recorded in
the autograd graph as ONE node whose backward is a transformation of that jaxpr.

Capture (capture.py): the function runs once with every input Tensor's data
replaced by a tracer of a JaxprTrace (arguments, the parameters and buffers of every module
it can reach, tensors in its closure and globals, random draws); facade ops on traced data
bind primitives instead of running NumPy (the facade's `_capture()` branches), while the
autograd tape keeps recording, so `ft.autograd.grad(..., create_graph=True)` inside the
function traces its backward into the forward jaxpr (gradient penalties). In-place updates
of inputs that do not require grad (BatchNorm's running statistics) become extra outputs
written back after each call.

The node: `compiled_p` runs the known half of the forward's linearization (the forward
plus its residuals, split by partial evaluation of its JVP); its JVP rule hands the saved
residuals to the unknown half (a `jit` call that is linear in the tangents), whose
transpose is the backward program. The node's saved residuals are what the reverse-mode
deriver reads, so nothing is recomputed; the backward program is then optimized and fused
by the jit pipeline.

Guards: shapes, dtypes and requires_grad of the tensor arguments, Python values among the
arguments, the module tree (types, plain attributes such as `training` or `p`, which
parameter/buffer sits where, hooks), grad mode and the default dtype. A failed guard
recompiles and records why; past `recompile_limit` recompiles a warning is issued and new
signatures run eagerly (torch's cache_size_limit). What cannot be captured (`.item()`,
Python control flow on tensor values, data-dependent shapes, custom autograd Functions,
in-place updates of inputs that require grad, ...) is a *graph break*: the call runs
eagerly, with the reason recorded; `fullgraph=True` raises `CompileError` instead.
"""
from __future__ import annotations

import functools
import inspect
import os
import threading
import time
import traceback
import types
import warnings

import numpy as np

from .. import passes, primitives, tree_util
from ..core import (ClosedJaxpr, ConcretizationTypeError, Tracer, _state, keeping_dtypes,
                   new_dynamic_main,
                   short_dtype)
from ..core.config import config
from ..facade import lower
from ..facade import dtypes as D
from ..facade.capture_state import _tls, active as _active
from ..facade.grad_mode import STATE as GS
from ..facade.node import OpInfo, Step
from ..facade.ops import is_tensor
from ..facade.record import make_node, vc_of
from ..facade.tensor import Tensor, wrap
from ..higher_order.jit import compile_jaxpr
from ..nn.modules import module as M
from ..runtime import device_of, lower_jaxpr
from ..tracing import JaxprTrace
from .capture import (CompileError, GraphBreakWarning, RecompileWarning, _PLAIN, _Capture,
                      _Program, _config, _draw, _plain, _refuse, compiled_p)
from .shadow import Shadows

__all__ = ["compile", "compile_stats", "CompileError", "RecompileWarning", "CompiledFunction",
           "CompiledModule", "RECOMPILE_LIMIT"]

RECOMPILE_LIMIT = 8         # torch's cache_size_limit: recompiles before falling back to eager
_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # functrans/
_INTERNAL = (_PKG_DIR, os.path.dirname(os.path.abspath(primitives.__file__)),
             os.path.dirname(os.path.abspath(np.__file__)))


# ---------------------------------------------------------------------------
# statistics

_stats_lock = threading.Lock()


def _new_stats():
    return {"calls": 0, "compiles": 0, "recompiles": 0, "recompile_reasons": [],
            "cache_hits": 0, "graph_breaks": 0, "graph_break_reasons": [], "eager_calls": 0,
            "compile_s": 0.0}


_STATS = _new_stats()


def compile_stats(reset=False):
    """Global ft.compile counters: calls, compiles, recompiles with their reasons, cache hits,
    graph breaks with their reasons, calls run eagerly, seconds spent compiling."""
    with _stats_lock:
        out = {k: list(v) if isinstance(v, list) else v for k, v in _STATS.items()}
        if reset:
            _STATS.clear()
            _STATS.update(_new_stats())
    return out


def _bump(local, key, value=1):
    with _stats_lock:
        for st in (local, _STATS):
            if isinstance(st[key], list):
                st[key].append(value)
                del st[key][:-1000]
            else:
                st[key] += value


# ---------------------------------------------------------------------------
# what a guard looks at: modules and tensors reachable from the function

_NN = []


def _nn():
    """(Module class, the nn.modules.module module), imported on first use."""
    if not _NN:
        _NN.extend([M.Module, M])
    return _NN


def _module_types():
    return _nn()[0]


class _Scope:
    """Where a compiled function finds its modules and tensors: the compiled module, the
    bound method's object, closure cells, globals named in its code (and, one level deep,
    those of functions and attributes of objects it names)."""

    def __init__(self, fn, module):
        self.fn, self.module = fn, module

    def roots(self):
        Module = _module_types()
        mods, tensors = [], []
        seen = set()

        def visit(name, v, depth):
            if id(v) in seen:
                return
            if isinstance(v, Module):
                seen.add(id(v))
                mods.append((name, v))
            elif isinstance(v, Tensor):
                seen.add(id(v))
                tensors.append((name, v))
            elif isinstance(v, CompiledFunction):   # called inline inside this capture
                seen.add(id(v))
                if v._module is not None:
                    visit(name, v._module, depth)
                else:
                    self._visit_function(v._fn, visit, max(depth - 1, 0))
            elif depth > 0 and isinstance(v, (types.FunctionType, types.MethodType)):
                seen.add(id(v))
                self._visit_function(v, visit, depth - 1)
            elif (depth > 0 and not isinstance(v, (type, types.ModuleType, CompiledFunction))
                  and hasattr(v, "__dict__") and not _plain(v)):
                seen.add(id(v))
                for k, w in list(vars(v).items())[:64]:
                    if isinstance(w, (Module, Tensor)):
                        visit(f"{name}.{k}", w, 0)
        if self.module is not None:
            visit("", self.module, 0)
        if self.fn is not None:
            self._visit_function(self.fn, visit, 2)
        return mods, tensors

    @staticmethod
    def _visit_function(fn, visit, depth):
        if isinstance(fn, types.MethodType):
            visit("self", fn.__self__, depth)
            fn = fn.__func__
        if isinstance(fn, functools.partial):
            for a in fn.args:
                visit("partial", a, depth)
            fn = fn.func
        code = getattr(fn, "__code__", None)
        if code is None:
            return
        for name, cell in zip(code.co_freevars, getattr(fn, "__closure__", None) or ()):
            try:
                v = cell.cell_contents
            except ValueError:
                continue
            visit(name, v, depth)
        g = getattr(fn, "__globals__", {})
        for name in _code_names(code):
            if name in g:
                visit(name, g[name], depth)


@functools.lru_cache(maxsize=1024)
def _code_names(code):
    names = list(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            names.extend(_code_names(c))
    return tuple(dict.fromkeys(names))


def _hooks_sig(m):
    if not (m._forward_pre_hooks or m._forward_hooks or m._backward_hooks
            or m._backward_pre_hooks):
        return ()
    return (tuple(m._forward_pre_hooks), tuple(m._forward_hooks), tuple(m._backward_hooks),
            tuple(m._backward_pre_hooks))


def _walk(roots):
    """Every module below the roots, each once, and its dotted name."""
    mods, names = [], []
    seen = set()
    stack = list(reversed(roots))
    while stack:
        name, m = stack.pop()
        if id(m) in seen:
            continue
        seen.add(id(m))
        mods.append(m)
        names.append(name)
        subs = [(f"{name}.{k}" if name else k, s) for k, s in m._modules.items()
                if s is not None]
        stack.extend(reversed(subs))
    return mods, names


# ---------------------------------------------------------------------------
# reasons


def _describe_break(exc):
    """A readable reason for a failed capture: what failed, where in the user's code."""
    tb = traceback.extract_tb(exc.__traceback__)
    user_idx = [i for i, f in enumerate(tb)
                if not os.path.abspath(f.filename).startswith(_INTERNAL)]
    where, callee = "", None
    if user_idx:
        i = user_idx[-1]
        f = tb[i]
        where = f" (at {os.path.basename(f.filename)}:{f.lineno}: {(f.line or '').strip()})"
        if i + 1 < len(tb):
            callee = tb[i + 1].name
    msg = str(exc).strip().split("\n")[0]
    if isinstance(exc, ConcretizationTypeError):
        op = f"`{callee}`" if callee else "an operation"
        return (f"{op} needs the value of a tensor computed inside the compiled function "
                "(.item(), .tolist(), .numpy(), bool(), Python control flow on a tensor or a "
                f"data-dependent shape){where}")
    if isinstance(exc, CompileError):
        return msg.replace("ft.compile cannot capture ", "").rstrip(".") + where
    return f"{type(exc).__name__}{f' in `{callee}`' if callee else ''}: {msg}{where}"


def _diff(old, new):
    """Why the new key differs from the old one (a list of readable reasons)."""
    out = []
    if old["tree"] != new["tree"]:
        out.append("the structure of the arguments changed")
    else:
        for name, a, b in zip(new["leaf_names"], old["args"], new["args"]):
            if a == b:
                continue
            if a[0] == "T" and b[0] == "T":
                if a[1] != b[1]:
                    out.append(f"{name} changed shape: {a[1]} -> {b[1]}")
                if a[2] != b[2]:
                    out.append(f"{name} changed dtype: {short_dtype(a[2])} -> "
                               f"{short_dtype(b[2])}")
                if a[3] != b[3]:
                    out.append(f"{name} changed requires_grad: {a[3]} -> {b[3]}")
                if a[4] != b[4]:
                    out.append(f"{name} moved to another device")
                if a[5:] != b[5:]:
                    how = "the same tensor as" if b[5] >= 0 else "a different tensor from"
                    out.append(f"{name} is now {how} another input")
            elif a[0] == "A" and b[0] == "A":
                out.append(f"{name} (a NumPy array) changed shape or dtype: {a[1:]} -> {b[1:]}")
            elif a[0] == "V" and b[0] == "V":
                out.append(f"{name} changed value: {a[2]!r} -> {b[2]!r} (Python values are "
                           "specialized; pass a tensor to avoid recompiling)")
            else:
                out.append(f"{name} changed type")
    if old["mods"] != new["mods"]:
        if len(old["mods"]) != len(new["mods"]) or any(
                a[0] != b[0] for a, b in zip(old["mods"], new["mods"])):
            out.append("the module tree changed (modules added, removed or replaced)")
        else:
            switched = {True: [], False: []}
            for name, a, b in zip(new["mod_names"], old["mods"], new["mods"]):
                label = f"module {name or '<root>'} ({a[0].__name__})"
                da, db = dict(a[1]), dict(b[1])
                if da.get("training") != db.get("training"):
                    switched[bool(db.get("training"))].append(name or "<root>")
                for k in sorted(set(da) | set(db)):
                    if k != "training" and da.get(k) != db.get(k):
                        out.append(f"{label} attribute {k!r} changed: {da.get(k)!r} -> "
                                   f"{db.get(k)!r}")
                if a[2] != b[2]:
                    out.append(f"{label}: the parameters or buffers it holds changed")
                if a[3] != b[3]:
                    out.append(f"{label}: hooks were added or removed")
            for mode, names in switched.items():
                if names:
                    more = f" and {len(names) - 3} more" if len(names) > 3 else ""
                    out.insert(0, f"module{'s' if len(names) > 1 else ''} "
                               f"{', '.join(names[:3])}{more} switched to "
                               f"{'train' if mode else 'eval'} mode")
    if old["state_sig"] != new["state_sig"]:
        if len(old["state_sig"]) != len(new["state_sig"]):
            out.append("the set of parameters and buffers changed")
        else:
            for name, a, b in zip(new["state_names"], old["state_sig"], new["state_sig"]):
                if a[0] != b[0] or a[1] != b[1]:
                    out.append(f"{name} changed shape or dtype: {short_dtype(a[1])}{list(a[0])}"
                               f" -> {short_dtype(b[1])}{list(b[0])}")
                if a[2] != b[2]:
                    out.append(f"{name} changed requires_grad: {a[2]} -> {b[2]}")
    if old["env"] != new["env"]:
        (g0, i0, d0, h0), (g1, i1, d1, h1) = old["env"], new["env"]
        if g0 != g1:
            out.append(f"grad mode changed: {'enabled' if g0 else 'disabled'} -> "
                       f"{'enabled' if g1 else 'disabled'}")
        if i0 != i1:
            out.append("inference mode changed")
        if d0 != d1:
            out.append(f"the default dtype changed: {d0} -> {d1}")
        if h0 != h1:
            out.append("global module hooks were added or removed")
    return out or ["an equal key was evicted"]


# ---------------------------------------------------------------------------
# compiled entries: one captured program per guard key


class _Entry:
    """One captured program and how to run it."""

    def __init__(self):
        self.fwd = None            # ClosedJaxpr: inputs -> user outputs + mutated inputs
        self.sources = []          # per input, how to find it at call time
        self.out_tree = None
        self.out_spec = []         # per output leaf: ("t", j) | ("in", k) | ("c", value) | ("a", j)
        self.out_rg = []           # per traced tensor output: does it require grad
        self.mutated = []          # (input index, version delta)
        self.mask = ()             # inputs that require grad
        self.record = False        # record an autograd node when called
        self.prog = None
        self.info = None
        self.exes = {}
        self.eager = None          # a graph-break reason: this key runs eagerly
        self.consts = []           # (weakref, data, version counter, version) of constants
        self.n_user = 0
        self.name = "compiled"
        self.stats = _new_stats()  # the owner's counters (compile time of lazy parts)

    def exe(self, which, device):
        key = (which, device, config.cpu_backend)     # a backend switch compiles anew
        exe = self.exes.get(key)
        if exe is None:
            closed = self.fwd if which == "fwd" else self.prog.known
            t0 = time.perf_counter()
            exe = self.exes[key] = compile_jaxpr(closed, device, (), self.name)
            _bump(self.stats, "compile_s", time.perf_counter() - t0)
        return exe

    def program(self):
        """The differentiation plan and the autograd OpInfo (built at the first recorded
        call)."""
        if self.prog is None:
            t0 = time.perf_counter()
            self.prog = _Program(self.name, self.fwd, self.mask)
            n_in = len(self.fwd.in_avals)
            outs = range(n_in, n_in + len(self.prog.out_avals))
            info = OpInfo("CompiledFunctionBackward",
                          [Step(compiled_p, {"prog": self.prog}, range(n_in), outs)], n_in,
                          tuple(range(n_in, n_in + self.prog.n_out)),
                          list(self.fwd.in_avals) + list(self.prog.out_avals), self.mask,
                          save_intermediates=True)       # its residuals
            lower.analyze(info)
            self.info = info
            _bump(self.stats, "compile_s", time.perf_counter() - t0)
        return self.prog


def _own(a, arrays, ids):
    """A result must not share storage with an input (copy when it does)."""
    if type(a) is not np.ndarray:
        return np.asarray(a) if isinstance(a, np.generic) else a
    if id(a) in ids or (a.base is not None and any(
            type(x) is np.ndarray and np.may_share_memory(a, x) for x in arrays)):
        return a.copy()
    return a


# ---------------------------------------------------------------------------
# the user-facing objects


class CompiledFunction:
    """A facade function or module captured once per guard key and run as a compiled
    program; every call is one autograd node (grad_fn CompiledFunctionBackward)."""

    def __init__(self, fn, module=None, dynamic=False, fullgraph=False,
                 recompile_limit=None, name=None):
        if not callable(fn):
            raise TypeError(f"ft.compile expects a function or an nn.Module, got "
                            f"{type(fn).__name__}")
        self._fn = fn
        self._module = module
        self.dynamic = bool(dynamic)
        self.fullgraph = bool(fullgraph)
        self.recompile_limit = RECOMPILE_LIMIT if recompile_limit is None else recompile_limit
        self.__name__ = name or getattr(fn, "__name__", type(fn).__name__)
        self.__qualname__ = self.__name__
        self.__doc__ = getattr(fn, "__doc__", None)
        self.__wrapped__ = fn
        self._scope = _Scope(None if module is not None else fn, module)
        self._entries = {}
        self._flat_trees = {}
        self._last = None
        self._warned = False
        self._broke = False
        self.stats = _new_stats()
        try:
            target = module.forward if module is not None else fn
            self._params = list(inspect.signature(target).parameters)
        except (TypeError, ValueError):
            self._params = []

    # -- bookkeeping ---------------------------------------------------------------

    @property
    def recompile_reasons(self):
        """Why each recompile happened, in order."""
        return list(self.stats["recompile_reasons"])

    @property
    def graph_breaks(self):
        """Why each graph break (a signature run eagerly) happened."""
        return list(self.stats["graph_break_reasons"])

    def compile_stats(self):
        """This object's counters (the same fields as ft.compile_stats())."""
        with _stats_lock:
            return {k: list(v) if isinstance(v, list) else v for k, v in self.stats.items()}

    def reset(self):
        """Forget every compiled program (the next call compiles again)."""
        self._entries.clear()
        self._last = None

    def lower(self, *args, **kwargs):
        """The forward program for these arguments, as the jit pipeline lowers it (print
        it to see the traced jaxpr, the optimized jaxpr and the generated code)."""
        entry, key, ctx, _ = self._lookup(args, kwargs, run=False)
        if entry.eager is not None:
            raise CompileError(f"{self.__name__} is not compiled for these arguments (graph "
                               f"break: {entry.eager})")
        return lower_jaxpr(entry.fwd, "cpu", (), self.__name__)

    def lower_backward(self, *args, **kwargs):
        """(known, unknown): the jaxpr run at forward time (forward + residuals) and the
        linear jaxpr whose transpose is the backward, for these arguments."""
        entry, key, ctx, _ = self._lookup(args, kwargs, run=False)
        if entry.eager is not None or not entry.mask or not any(entry.mask):
            raise CompileError("no differentiable compiled program for these arguments")
        prog = entry.program()
        return prog.known, prog.unknown

    def __repr__(self):
        return f"<ft.compile'd {self.__name__}>"

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return functools.partial(self, obj)

    # -- calling ------------------------------------------------------------------

    def _call_python(self, args, kwargs):
        if self._module is not None:
            return self._module(*args, **kwargs)
        return self._fn(*args, **kwargs)

    def __call__(self, *args, **kwargs):
        if _active() is not None or _state().depth:
            return self._call_python(args, kwargs)      # inside another capture/transform
        self.stats["calls"] += 1           # (hot counters: no lock; a lost count is harmless)
        _STATS["calls"] += 1
        entry, key, ctx, result = self._lookup(args, kwargs, run=True)
        if result is not None:
            return result[0]
        if entry.eager is not None:
            _bump(self.stats, "eager_calls")
            return self._call_python(args, kwargs)
        return self._run(entry, ctx)

    def _guard(self, args, kwargs):
        """(key, ctx): everything a compiled program depends on, and what the call needs."""
        Module, M = _nn()
        if not kwargs and all(type(a) is Tensor for a in args):
            leaves = list(args)            # the common case: a few tensors
            tree = self._flat_trees.get(len(args))
            if tree is None:
                tree = self._flat_trees[len(args)] = tree_util.tree_flatten(
                    (args, {}), is_leaf=is_tensor)[1]       # Tensors stay leaves here
            tree_key = len(args)           # (cheaper to hash than the treedef)
        else:
            leaves, tree = tree_util.tree_flatten((args, kwargs), is_leaf=is_tensor)
            tree_key = tree
        sig, arg_mods = [], []
        first = {}
        for i, x in enumerate(leaves):
            t = type(x)
            if t is Tensor or isinstance(x, Tensor):
                d = x._data
                j = first.setdefault(id(x), i)
                sig.append(("T", d.shape, d.dtype, x._requires_grad, type(d),
                            -1 if j == i else j))
            elif t is np.ndarray:
                sig.append(("A", x.shape, x.dtype))
            elif isinstance(x, Module):
                arg_mods.append((f"argument {i}", x))
                sig.append(("M", type(x)))
            elif t in _PLAIN or _plain(x):
                sig.append(("V", t, x))
            else:
                try:
                    hash(x)
                    sig.append(("V", t, x))
                except TypeError:
                    sig.append(("O", t, id(x)))
        mod_roots, scope_tensors = self._scope.roots()
        mods, mod_names = _walk(mod_roots + arg_mods)
        state, state_names, mod_sig = [], [], []
        for m, mname in zip(mods, mod_names):
            slots = []
            for kind, table in (("p", m._parameters), ("b", m._buffers)):
                for k, p in table.items():
                    if p is None:
                        continue
                    j = first.get(id(p))
                    if j is None:
                        j = first[id(p)] = len(leaves) + len(state)
                        state.append(p)
                        state_names.append(f"{mname}.{k}" if mname else k)
                    slots.append((kind, k, j))
            mod_sig.append((type(m), _config(m), tuple(slots), _hooks_sig(m)))
        for name, t in scope_tensors:
            if id(t) not in first:
                first[id(t)] = len(leaves) + len(state)
                state.append(t)
                state_names.append(name)
        state_sig = tuple((p._data.shape, p._data.dtype, p._requires_grad, type(p._data))
                          for p in state)
        env = (GS.enabled, GS.inference, D.get_default_dtype(),
               (tuple(M._global_forward_pre_hooks), tuple(M._global_forward_hooks),
                tuple(M._global_backward_hooks)))
        key = (tree_key, tuple(sig), tuple(mod_sig), state_sig, env)
        ctx = {"leaves": leaves, "state": state, "state_sig": state_sig, "tree": tree,
               "args": tuple(sig),
               "mods": tuple(mod_sig), "mod_names": mod_names, "state_names": state_names,
               "env": env, "kwargs": kwargs, "call_args": args, "mod_objs": mods}
        return key, ctx

    def _lookup(self, args, kwargs, run):
        """The entry for this call's guards (compiling on a miss). When compiling broke
        and `run`, the eager result is returned too, as (value,)."""
        key, ctx = self._guard(args, kwargs)
        entry = self._entries.get(key)
        stale = None
        if entry is not None and entry.consts:
            stale = _stale_constant(entry)
            if stale is not None:
                del self._entries[key]
                entry = None
        if entry is not None:
            if run:
                self.stats["cache_hits"] += 1
                _STATS["cache_hits"] += 1
            self._last = ctx
            return entry, key, ctx, None
        reason = self._reason(ctx)
        if stale is not None:
            reason = stale if reason is None or reason.startswith("an equal key") else \
                f"{reason}; {stale}"
        n_compiled = sum(1 for e in self._entries.values() if e.eager is None)
        if n_compiled > self.recompile_limit and not (self.dynamic and _shape_only(reason)):
            entry = _Entry()
            entry.eager = (f"recompile limit ({self.recompile_limit}) reached; last reason: "
                           f"{reason}")
            _bump(self.stats, "graph_breaks")
            _bump(self.stats, "graph_break_reasons", entry.eager)
            if not self._warned:
                self._warned = True
                warnings.warn(
                    f"ft.compile: {self.__name__} has been recompiled {n_compiled - 1} times "
                    f"(recompile_limit={self.recompile_limit}); new signatures now run "
                    f"eagerly. Last reason: {reason}. Keep input shapes fixed: drop the last "
                    "short batch (drop_last=True) or pad it, and keep modules in one mode.",
                    RecompileWarning, stacklevel=3)
            self._entries[key] = entry
            self._last = ctx
            return entry, key, ctx, None
        entry, result = self._compile(key, ctx, reason, run)
        self._last = ctx
        return entry, key, ctx, result

    def _reason(self, ctx):
        names = self._leaf_names(ctx["call_args"], ctx["kwargs"])
        ctx["leaf_names"] = names
        if self._last is None:
            return None
        return "; ".join(_diff(self._last, ctx))

    def _leaf_names(self, args, kwargs):
        names = []
        for i, a in enumerate(args):
            base = (f"argument '{self._params[i]}'" if i < len(self._params)
                    else f"argument {i}")
            n = len(tree_util.tree_leaves(a, is_leaf=is_tensor))
            names += [base] if n == 1 else [f"{base} leaf {k}" for k in range(n)]
        for k in sorted(kwargs or {}):
            n = len(tree_util.tree_leaves(kwargs[k], is_leaf=is_tensor))
            names += [f"keyword {k!r}"] if n == 1 else [f"keyword {k!r} leaf {j}"
                                                        for j in range(n)]
        return names

    def _compile(self, key, ctx, reason, run):
        t0 = time.perf_counter()
        try:
            entry = self._capture(ctx)
        except Exception as e:      # a graph break, or the user's own error
            why = _describe_break(e)
            if self.fullgraph:
                raise CompileError(f"ft.compile(fullgraph=True) of {self.__name__}: {why}") \
                    from e
            result = self._call_python(ctx["call_args"], ctx["kwargs"]) if run else None
            # eager succeeded: the failure was a limit of capture, not the user's error
            entry = _Entry()
            entry.eager = why
            self._entries[key] = entry
            _bump(self.stats, "graph_breaks")
            _bump(self.stats, "graph_break_reasons", why)
            if not self._broke:
                self._broke = True
                warnings.warn(f"ft.compile: graph break in {self.__name__}: {why}; this "
                              "signature runs eagerly (see .graph_breaks)", GraphBreakWarning,
                              stacklevel=4)
            if run:
                _bump(self.stats, "eager_calls")
                return entry, (result,)
            return entry, None
        dt = time.perf_counter() - t0
        self._entries[key] = entry
        _bump(self.stats, "compiles")
        _bump(self.stats, "compile_s", dt)
        if reason is not None:
            _bump(self.stats, "recompiles")
            _bump(self.stats, "recompile_reasons", f"{self.__name__}: {reason}")
        return entry, None

    # -- capture ------------------------------------------------------------------

    def _capture(self, ctx):
        cap = _Capture(self.__name__)
        leaves, state = list(ctx["leaves"]), ctx["state"]
        stack = _tls.__dict__.setdefault("stack", [])
        entry = _Entry()
        entry.name = self.__name__
        entry.stats = self.stats
        cap.modules = [(m, dict(_config(m))) for m in ctx["mod_objs"]]
        # torch's dtypes: the x32 narrowing of JAX-side calls never touches the capture
        with keeping_dtypes(), new_dynamic_main(JaxprTrace, cap.builder) as main:
            cap.trace = JaxprTrace(main)
            stack.append(cap)
            cap.shadows = Shadows()
            try:
                names = ctx["leaf_names"]
                for i, x in enumerate(leaves):
                    what = f"the {names[i]}" if i < len(names) else "an argument"
                    if isinstance(x, Tensor):
                        if id(x) not in cap.input_of:
                            cap.add_tensor(x, ("leaf", i), what)
                    elif type(x) is np.ndarray:
                        leaves[i] = cap.add_array(x, ("leaf", i), what)
                for k, (t, name) in enumerate(zip(state, ctx["state_names"])):
                    if id(t) not in cap.input_of:
                        cap.add_tensor(t, ("state", k), f"{name}")
                args, kwargs = tree_util.tree_unflatten(ctx["tree"], leaves)
                out = self._call_python(args, kwargs)
                self._finish(cap, entry, out, ctx)
            finally:
                stack.pop()
                cap.restore()
        return entry

    def _finish(self, cap, entry, out, ctx):
        """Outputs, mutations, checks; then the forward jaxpr."""
        Module = _module_types()
        out_leaves, entry.out_tree = tree_util.tree_flatten(out, is_leaf=is_tensor)
        out_tracers = []
        for x in out_leaves:
            if isinstance(x, Tensor):
                k = cap.input_of.get(id(x))
                if k is not None and x._vc is cap.saved[id(x)][1][3] and (
                        x._vc is None or x._vc.v == cap.saved[id(x)][1][4][0]) and (
                        x._data is cap.current.get(id(x))):
                    entry.out_spec.append(("in", k))        # an input returned as is
                    continue
                entry.out_spec.append(("t", len(out_tracers)))
                entry.out_rg.append(x._requires_grad)
                out_tracers.append(cap.trace.full_raise(x._data))
            elif isinstance(x, Tracer):
                entry.out_spec.append(("a", len(out_tracers)))
                entry.out_rg.append(False)
                out_tracers.append(cap.trace.full_raise(x))
            elif isinstance(x, Module) or _plain(x) or isinstance(x, np.ndarray):
                entry.out_spec.append(("c", x))         # a constant of the trace
            else:
                _refuse(f"returning a {type(x).__name__} (it could hold values of the trace)",
                        "return tensors, arrays, Python numbers and strings, in tuples, "
                        "lists, dicts or namedtuples")
        entry.n_user = len(out_tracers)
        # inputs modified in place: new values become outputs, written back after a call
        for k, t in enumerate(cap.inputs):
            if not isinstance(t, Tensor):
                continue
            snap = cap.saved[id(t)][1]
            v0 = snap[4][0] if snap[4] is not None else 0
            v1 = t._vc.v if t._vc is not None else 0
            if t._data is cap.current[id(t)] and v0 == v1:
                if t._requires_grad != snap[2]:
                    _refuse("requires_grad_() on an argument, parameter or buffer",
                            "set requires_grad outside the compiled function")
                continue
            if snap[2]:
                _refuse("an in-place change of an argument, parameter or buffer that requires "
                        "grad", "update it outside the compiled function")
            if t._data is not cap.current[id(t)] and v0 == v1:
                _refuse("assigning .data of an argument, parameter or buffer",
                        "use an in-place op such as copy_()")
            for j, u in enumerate(cap.inputs):
                if j != k and isinstance(u, Tensor) and np.may_share_memory(
                        snap[0], cap.saved[id(u)][1][0]):
                    _refuse("an in-place change of an input that shares storage with another "
                            "input", "pass tensors that do not overlap")
            entry.mutated.append((k, v1 - v0))
            out_tracers.append(cap.trace.full_raise(t._data))
        # module state that would escape: traced tensors stored on modules, plain attributes
        for (m, attrs), name in zip(cap.modules, ctx["mod_names"]):
            now = dict(_config(m))
            if now != attrs:
                k = next(k for k in set(now) | set(attrs) if now.get(k) != attrs.get(k))
                _refuse(f"changing attribute {k!r} of module {name or type(m).__name__} inside "
                        "the compiled function (the change would happen once, at compile "
                        "time)", "change it outside")
        for m in ctx["mod_objs"]:
            for k, v in m.__dict__.items():
                if isinstance(v, Tensor) and isinstance(v._data, Tracer):
                    _refuse(f"storing a tensor computed inside the compiled function on module "
                            f"attribute {type(m).__name__}.{k}", "return it instead")
            for table in (m._parameters, m._buffers):
                for k, v in table.items():
                    if v is not None and id(v) not in cap.input_of:
                        _refuse(f"replacing parameter or buffer {type(m).__name__}.{k} inside "
                                "the compiled function", "do it outside")
        jaxpr, consts = cap.builder.build(cap.in_tracers, out_tracers)
        entry.fwd = passes.dce(ClosedJaxpr(jaxpr, consts))
        entry.sources = list(cap.sources)
        entry.consts = [(ref, data, vc, v) for ref, data, vc, v in cap.consts.values()
                        if id(ref()) not in cap.input_of]
        entry.mask = tuple(isinstance(t, Tensor) and cap.saved[id(t)][1][2]
                           for t in cap.inputs)
        entry.record = (GS.enabled and any(entry.mask) and any(entry.out_rg))
        entry.n_in = len(cap.inputs)

    # -- running ------------------------------------------------------------------

    def _gather(self, entry, ctx):
        leaves, state = ctx["leaves"], ctx["state"]
        objs, arrays = [], []
        for kind, x in entry.sources:
            if kind == "leaf":
                o = leaves[x]
            elif kind == "state":
                o = state[x]
            else:
                o = _draw(x)
            objs.append(o)
            arrays.append(o._data if isinstance(o, Tensor) else o)
        return objs, arrays

    def _run(self, entry, ctx):
        objs, arrays = self._gather(entry, ctx)
        device = device_of(arrays)
        ids = {id(a) for a in arrays}
        n_user = entry.n_user
        if entry.record:
            entry.program()
            outs = entry.exe("known", device)(*arrays)
            vals = list(arrays)
            for a in outs:
                vals.append(_own(a, arrays, ids))
            user = [wrap(v) for v in vals[len(arrays):len(arrays) + n_user]]
            make_node(entry.info, objs, vals,
                      user + [None] * (entry.prog.n_out - n_user))
            for t, rg in zip(user, entry.out_rg):
                if not rg:
                    t._grad_fn = None
                    t._requires_grad = False
            new_vals = vals[len(arrays) + n_user:len(arrays) + entry.prog.n_out]
        else:
            outs = entry.exe("fwd", device)(*arrays)
            user = [wrap(_own(a, arrays, ids)) for a in outs[:n_user]]
            new_vals = outs[n_user:]
        for (k, delta), v in zip(entry.mutated, new_vals):
            t = objs[k]
            np.copyto(t._data, v) if type(t._data) is np.ndarray else t._data.__setitem__(
                Ellipsis, v)
            vc = vc_of(t)
            vc.v += delta
            vc.op = f"{self.__name__} (compiled)"
        res = []
        for kind, x in entry.out_spec:
            if kind == "t" or kind == "a":
                res.append(user[x] if kind == "t" else user[x]._data)
            elif kind == "in":
                res.append(objs[x])
            else:
                res.append(x)
        return tree_util.tree_unflatten(entry.out_tree, res)


def _stale_constant(entry):
    """Why a tensor the program captured as a constant no longer holds that value."""
    for ref, data, vc, v in entry.consts:
        t = ref()
        if t is not None and (t._data is not data or vc.v != v):
            return (f"a {short_dtype(data.dtype)}{list(data.shape)} tensor the function reads "
                    "(captured as a constant: not an argument, parameter or buffer) was "
                    "modified")
    return None


def _shape_only(reason):
    return reason is not None and all("changed shape" in r for r in reason.split("; "))


class CompiledModule(CompiledFunction):
    """ft.compile(module): calls the module (hooks included) through a compiled program;
    every other attribute is the module's (parameters(), train(), state_dict(), ...)."""

    def __init__(self, module, **kw):
        super().__init__(module, module=module, name=type(module).__name__, **kw)
        object.__setattr__(self, "_orig_mod", module)

    def __getattr__(self, name):
        mod = self.__dict__.get("_module")
        if mod is None:
            raise AttributeError(name)
        return getattr(mod, name)

    def __repr__(self):
        return f"CompiledModule({self._module!r})"


def compile(fn_or_module=None, dynamic=False, *, fullgraph=False, recompile_limit=None):
    """Capture a facade function or nn.Module into a jaxpr, optimize and lower it like
    ft.jit, and run each call as one autograd node whose backward is the transformed
    jaxpr. Recompiles (counted, with reasons) when a guard fails: shapes, dtypes and
    requires_grad of tensor arguments, Python values among the arguments, the modules'
    training mode, plain attributes, parameter layout and hooks, grad mode.

    dynamic: programs are always specialized to shapes; dynamic=True only stops shape
    changes from counting toward `recompile_limit` (default ft.compile's RECOMPILE_LIMIT,
    8, as torch's cache_size_limit). fullgraph=True raises CompileError where a graph break
    would otherwise run the call eagerly."""
    if fn_or_module is None:
        return lambda f: compile(f, dynamic, fullgraph=fullgraph,
                                 recompile_limit=recompile_limit)
    Module = _module_types()
    kw = dict(dynamic=dynamic, fullgraph=fullgraph, recompile_limit=recompile_limit)
    if isinstance(fn_or_module, Module):
        return CompiledModule(fn_or_module, **kw)
    if isinstance(fn_or_module, CompiledFunction):
        return fn_or_module
    return CompiledFunction(fn_or_module, **kw)
