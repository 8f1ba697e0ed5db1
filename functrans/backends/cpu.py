"""CPU backend: an optimized jaxpr becomes ONE generated Python function calling NumPy.

Values live in buffers chosen by `passes.plan_buffers`: elementwise primitives write
into them with `out=`, temporaries reuse persistent scratch buffers, outputs get
fresh ones (or a donated argument's). Non-elementwise primitives call their
`impl(np, ...)`. A large fusion group runs in cache-sized blocks spread over a thread
pool (NumPy ufuncs release the GIL), so a memory-bound chain reads its inputs once
per block instead of once per op. `lower()` returns the source; nothing is
interpreted per equation at run time.
"""
from __future__ import annotations

import collections
import functools
import itertools
import math
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .. import fusion, passes
from . import JIT_MODULE, Lowered, identifier
from . import cpu_kernels
from .cpu_auto import MeasuredChoice, parallel_threads, trial_clock
from .cpu_columns import ColumnBlocks
from .cpu_destinations import ProductDestinations
from .memory import BUDGET
from .native import kernels as native_kernels, rows as native_rows, toolchain
from ..core import ClosedJaxpr, Jaxpr, Literal, Var, short_dtype
from ..core.config import config
from ..primitives.shape import broadcast_in_dim_p, slice_p


class CpuConfig:
    """Tuning knobs (module-level `CONFIG`); read at lowering time."""

    def __init__(self):
        self.block_bytes = 256 * 1024       # bytes of one block of the widest dtype
        self.block_min_size = 1 << 17       # smaller fusion groups run unblocked ...
        self.block_min_work = 1 << 22       # ... and so do groups of fewer elements x ops
        self.parallel_min_size = 1 << 17    # smaller groups use one thread
        self.native_min_ops = 8             # cpu_backend="auto": smaller groups stay NumPy,
        self.native_min_work = 1 << 18      # ... unless they have 2 ops or more and
                                            # elements x ops reach this (one pass instead
                                            # of one per op: exact GELU's backward, 6 ops
                                            # on 512K floats, 0.39 ms against 0.92)
        self.native_max_ops = 500           # ... larger ones too (compile time),
        self.native_math_max_size = 256     # ... and larger ones with a transcendental
        self.native_parallel_min_size = 1 << 15     # smaller native groups use one thread
        self.native_rows_min_size = 1 << 14     # "auto": smaller row groups stay NumPy (a
                                                # compile saves little there); larger ones
                                                # run native whatever their ops
        self.native_trials = 3              # "auto": timed calls of each executable before
                                            # the fastest is kept (MeasuredChoice) ...
        self.native_trials_most = 12        # ... or up to these while none is clearly
        self.native_margin = 0.25           # fastest: its fastest call this much faster
                                            # than every other's
        self.clock = None                   # ... and the clock that times them (None:
                                            # cpu_auto.trial_clock's, CPU or wall time)
        try:
            self.threads = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            self.threads = os.cpu_count() or 1


CONFIG = CpuConfig()


# ---------------------------------------------------------------------------
# the thread pool and the blocked-loop driver (run time)

_pool = None
_pool_lock = threading.Lock()


def _get_pool(n):
    global _pool
    with _pool_lock:
        if _pool is None or _pool._max_workers < n:
            _pool = ThreadPoolExecutor(max_workers=n, thread_name_prefix="functrans-cpu")
        return _pool


def run_blocked(fn, n, block, args, temps):
    """fn(lo, hi, *args, *temps_k) over [0, n) in blocks; temps holds one temp set per
    thread, and their number is the number of threads used."""
    nb = -(-n // block)
    nt = min(len(temps), nb)
    if nt <= 1:
        tk = temps[0]
        for lo in range(0, n, block):
            hi = lo + block
            if hi > n:
                fn(lo, n, *args, *[t[:n - lo] for t in tk])
            else:
                fn(lo, hi, *args, *tk)
        return
    counter = itertools.count()         # blocks are handed out one by one (next() is
                                        # atomic under the GIL): a busy core takes fewer

    def work(k):
        tk = temps[k]
        while True:
            b = next(counter)
            if b >= nb:
                return
            lo = b * block
            hi = lo + block
            if hi > n:
                fn(lo, n, *args, *[t[:n - lo] for t in tk])
            else:
                fn(lo, hi, *args, *tk)
    futures = [_get_pool(nt - 1).submit(work, k) for k in range(1, nt)]
    try:
        work(0)
    finally:
        errors = []
        for f in futures:
            if f.cancel():                  # never started (a busy machine): nothing to wait
                continue
            try:
                f.result()
            except BaseException as e:      # noqa: BLE001 (re-raised below)
                errors.append(e)
    if errors:
        raise errors[0]


# ---------------------------------------------------------------------------
# how each primitive is emitted

def _out_emitter(eqn):
    """(emit(ctx, ins, out) -> lines, inplace(in_index) -> bool) when the equation can
    write into a given buffer with out=, else None: read off the primitive's declared
    `cpu` (a ufunc name, or an emitter of the equation; see primitives/base.py)."""
    rule = eqn.primitive.cpu
    if rule is None or len(eqn.outvars) != 1:
        return None
    if type(rule) is not str:
        rule = rule(eqn)
        if type(rule) is not str:
            return rule
    return _ufunc_emitter(rule)


def _ufunc_emitter(uf):
    def emit(ctx, ins, out):
        return [f"{ctx.g(getattr(np, uf), uf)}({', '.join(ins)}, out={out})"]
    return emit, _any_input


def _any_input(i):
    return True


def _expanded(in_shape, bd, out_rank):
    shape = [1] * out_rank
    for i, d in enumerate(bd):
        shape[d] = in_shape[i]
    return tuple(shape)


def _bcast(x, shape, expanded):
    return np.broadcast_to(np.reshape(x, expanded), shape)


def _aliased(x, others):
    """Whether a donated array may share memory with another argument or a constant (then
    the program works on a copy of it, as if it were not donated)."""
    for o in others:
        if isinstance(o, np.ndarray) and np.may_share_memory(x, o):
            return True
    return False


def can_fuse(eqn):
    """CPU fusion predicate: elementwise/broadcast equations (any dtype)."""
    return fusion.fusible(eqn)


def can_fuse_rows(eqn):
    """The predicate with native row groups: also reductions over trailing axes and
    reshapes of per-row values that the host row renderer takes (native_rows)."""
    return fusion.fusible(eqn) or native_rows.can_fuse(eqn)


# ---------------------------------------------------------------------------
# code generation


class _Ctx:
    """Names the globals of the generated module (NumPy functions, constants)."""

    def __init__(self):
        self.globals = {"_np": np, "_empty": np.empty, "_asarray": np.asarray,
                        "_array": np.array, "_run_blocked": run_blocked, "_bcast": _bcast,
                        "_retry": native_kernels.retry}
        self._ids: dict = {}
        self._taken: set = set()

    def g(self, obj, hint="g"):
        """A global name bound to obj (reused for the same object)."""
        key = ("obj", id(obj))
        name = self._ids.get(key)
        if name is None:
            name = self._fresh(hint)
            self.globals[name] = obj
            self._ids[key] = name
        return name

    def _fresh(self, hint):
        """_hint, or _hint_2, _hint_3, ... when taken."""
        hint = identifier(hint)
        name, k = f"_{hint}", 1
        while name in self.globals or name in self._taken:
            k += 1
            name = f"_{hint}_{k}"
        self._taken.add(name)
        return name

    def scalar(self, value, dtype):
        """A NumPy scalar of a dtype, as a global (operand of a ufunc)."""
        val = np.asarray(value).astype(dtype)
        key = ("scalar", val.dtype.str, val.tobytes())
        name = self._ids.get(key)
        if name is None:
            name = self._fresh(f"{short_dtype(dtype)}_{_num_name(val)}")
            self.globals[name] = val[()]
            self._ids[key] = name
        return name

    def literal(self, lit, as_scalar):
        if as_scalar:
            return self.scalar(lit.val, lit.aval.dtype)
        val = np.asarray(lit.val, lit.aval.dtype)
        key = ("lit", val.dtype.str, val.tobytes())
        name = self._ids.get(key)
        if name is None:
            name = self._fresh(f"{short_dtype(val.dtype)}_{_num_name(val)}_arr")
            self.globals[name] = val
            self._ids[key] = name
        return name

    def impl(self, eqn):
        """A global bound to the primitive's impl with np and the params applied."""
        fn = functools.partial(eqn.primitive.impl, np, **eqn.params)
        name = self._fresh(f"p_{eqn.primitive.name}")
        self.globals[name] = fn
        return name

    def dtype(self, dt):
        return self.g(np.dtype(dt), short_dtype(dt))


def _num_name(val):
    """A readable identifier part for a scalar value: 2.0 -> '2', 0.5 -> '0p5', -1 -> 'm1'."""
    v = np.asarray(val)
    if v.dtype.kind == "b":
        return str(bool(v))
    if v.dtype.kind in "iu":
        text = str(int(v))
    elif v.dtype.kind == "f":
        text = f"{float(v):.4g}"
    else:
        text = "c"
    return "".join({"-": "m", ".": "p", "+": ""}.get(c, c) for c in text)


def _kind(eqn, blocked):
    if eqn.primitive is fusion.fused_p:
        return "out" if id(eqn) in blocked else "fresh"
    if eqn.primitive is broadcast_in_dim_p:
        return "view"
    if _out_emitter(eqn) is not None:
        return "out"
    return "fresh" if eqn.primitive.fresh else "view"


def _block_inplace(eqn, i, o):
    """May output o of a blocked group overwrite its input i (same block, same place)?"""
    inner = eqn.params["jaxpr"]
    x, y = inner.invars[i], inner.outvars[o]
    if x.aval.shape != y.aval.shape or x.aval.dtype != y.aval.dtype:
        return False
    writer = next(k for k, e in enumerate(inner.eqns) if y in e.outvars)
    for k, e in enumerate(inner.eqns):
        for ii, a in enumerate(e.invars):
            if a is not x:
                continue
            if k > writer:
                return False
            if k == writer:
                em = _out_emitter(e)
                if em is None or not em[1](ii):
                    return False
            if e.primitive is broadcast_in_dim_p:
                return False
    return True


class _Lowering(ColumnBlocks, ProductDestinations):
    def __init__(self, closed: ClosedJaxpr, donated, name, alias_outputs=False, native=None,
                 destinations=False):
        self.native = native          # None, or (mode, the reason it is unavailable or None)
        self.native_groups: list = []     # cuda.GroupCode / RowFunction of each native group
        self.report: list = []            # (group name, backend, why) of each fusion group
        self.closed = closed
        self.alias_outputs = alias_outputs
        self.destinations = destinations
        self.name = name
        self.ctx = _Ctx()
        self.donated = tuple(donated) + (False,) * (len(closed.jaxpr.invars) - len(donated))
        self.lines: list = []
        self.block_sources: list = []
        self.names: dict = {}
        self.counter = 0
        self.scratch: list = []       # (slot, shape, dtype) of persistent buffers
        self.temps: list = []         # (global name, threads, [(block shape, dtype)]) of the
                                      # per-thread temporaries of blocked groups
        self.info = {"blocked_groups": 0, "unblocked_groups": 0, "native_groups": 0}
        self.natives: list = []       # (global name, C entry point, n, threads) per group
        self.row_functions: dict = {}     # id(fused eqn) -> native_rows.RowFunction
        self.columns: dict = {}       # slice var -> (operand's name, W, lo): a column block
                                      # its native readers read in place (emit_slice)
        self.row_loops: dict = {}     # id(fused eqn) -> whether it can loop over rows
        self.out_columns: dict = {}   # id(fused eqn) -> {output: (concat var, W, lo)} and
        self.skip: set = set()        # ... the concatenations they fill (plan_out_columns)
        self.dest_of_product: dict = {}   # id(product) -> where it writes (cpu_destinations)
        self.dest_copies: dict = {}   # id(reshape or concatenation) -> operands written
        self.library = None           # the compiled .so of the native groups,
        self.addresses: dict = {}     # ... its entry points (C name -> address)
        self.call = None              # ... and kernels.caller()
        self.threads, self.threads_why = parallel_threads(closed.jaxpr, CONFIG.threads)

    # -- naming -----------------------------------------------------------

    def fresh(self, prefix="v"):
        self.counter += 1
        return f"{prefix}{self.counter}"

    def atom(self, a, as_scalar=True):
        if type(a) is Literal:
            return self.ctx.literal(a, as_scalar)
        return self.names[a]

    # -- the program ------------------------------------------------------

    def run(self):
        rows = self.native is not None and not self.native[1]   # native code available
        # native groups read column blocks in place: work whose result is only cut into
        # slices for them is done on the slices, in the groups (split_at_slices)
        closed = fusion.split_at_slices(self.closed) if rows else self.closed
        # "auto": reductions too small for a native row group change nothing (today's fusion)
        min_size = CONFIG.native_rows_min_size if rows and self.native[0] == "auto" else 0
        rows = rows and native_rows.has_row_reductions(closed, min_size)
        if rows:
            fusedj = fusion.fuse(native_rows.split_total_reductions(closed, min_size),
                                 can_fuse=can_fuse_rows, rows=True)
        else:
            fusedj = fusion.fuse(closed, can_fuse=can_fuse)
        prog_eqns, top, blocked, self.native_ids = [], [], set(), set()
        pending = [(e, rows) for e in fusedj.jaxpr.eqns[::-1]]
        while pending:
            e, maybe_row = pending.pop()
            if maybe_row and e.primitive is fusion.fused_p and \
                    fusion.row_group_space(e.params["jaxpr"]) is not None:
                why = self.row_reason(e)
                if why is not None:         # its elementwise parts fuse as without rows
                    self.report.append((e.params["name"], "numpy", why))
                    pending.extend((u, False) for u in self.unrow(e)[::-1])
                    continue
            top.append(e)
            if e.primitive is fusion.fused_p:
                size = e.outvars[0].aval.size
                ops = sum(m.primitive is not broadcast_in_dim_p
                          for m in e.params["jaxpr"].eqns)
                why = self.native_reason(e, ops)
                if why is None:
                    blocked.add(id(e))
                    self.native_ids.add(id(e))
                    prog_eqns.append(e)
                    self.info["native_groups"] += 1
                elif size >= CONFIG.block_min_size and size * ops >= CONFIG.block_min_work:
                    blocked.add(id(e))
                    prog_eqns.append(e)
                    self.info["blocked_groups"] += 1
                else:
                    prog_eqns.extend(e.params["jaxpr"].eqns)
                    self.info["unblocked_groups"] += 1
                if why is not None:
                    self.report.append((e.params["name"], "numpy", why))
            else:
                prog_eqns.append(e)
        j = fusedj.jaxpr
        fusedj = ClosedJaxpr(Jaxpr(j.constvars, j.invars, top, j.outvars), fusedj.consts)
        self.fusedj = fusedj
        prog = Jaxpr(j.constvars, j.invars, prog_eqns, j.outvars)
        self.prog = prog
        plan = passes.plan_buffers(
            prog, lambda e: _kind(e, blocked),
            inplace=lambda e, i, o: (False if id(e) in self.native_ids
                                     else _block_inplace(e, i, o) if id(e) in blocked
                                     else _out_emitter(e)[1](i)),
            donated=self.donated)
        self.plan = plan
        args = []
        for i, v in enumerate(j.invars):
            nm = f"a{i}"
            args.append(nm)
            self.names[v] = nm
        for i, v in enumerate(j.constvars):
            self.names[v] = self.ctx.g(self.closed.consts[i], f"k{i}")
        slot_name = {}
        for k, (shape, dt) in enumerate(plan.slots):
            donor = plan.donor[k]
            slot_name[k] = args[donor] if donor is not None else f"s{k}"
        body = []
        donors = {d for d in plan.donor if d is not None}
        consts = [self.names[v] for v, c in zip(j.constvars, self.closed.consts)
                  if isinstance(c, np.ndarray)]
        for i, v in enumerate(j.invars):
            if v.aval.shape == ():
                body.append(f"a{i} = _asarray(a{i}, {self.ctx.dtype(v.aval.dtype)})")
            elif self.donated[i]:
                body.append(f"if not (type(a{i}) is _ndarray and a{i}.flags.c_contiguous and "
                            f"a{i}.flags.writeable): a{i} = _array(a{i}, order='C')")
                self.ctx.globals["_ndarray"] = np.ndarray
                others = [a for k, a in enumerate(args) if k != i] + consts
                if i in donors and others:  # never write into a buffer still read as another
                    body.append(f"elif {self.ctx.g(_aliased, 'aliased')}(a{i}, "
                                f"({', '.join(others)},)): a{i} = _array(a{i})")
        readers: dict = {}
        for e in prog.eqns:
            for a in e.invars:
                if type(a) is Var:
                    readers.setdefault(a, []).append(e)
        outs_set = {a for a in j.outvars if type(a) is Var}
        # a broadcast read only by elementwise out= calls stays its small operand (ufuncs
        # broadcast against their out= buffer); products, sums and concatenations into
        # out= read their operands' whole shapes
        ufunc_only = {v for v, es in readers.items() if v not in outs_set and all(
            id(r) not in blocked and _kind(r, blocked) == "out"
            and r.primitive.elementwise for r in es)}
        allocated, dest_of = set(), self.dest_slots(j.outvars, plan)
        if self.native_ids:
            self.plan_out_columns(prog.eqns, plan, readers, outs_set)
        self.plan_product_destinations(prog.eqns, readers, outs_set, dest_of, plan)

        def buffer(o):
            """The name of o's buffer, allocated here if it is the first value in it."""
            s = plan.slot_of.get(o)
            nm = self.names[o] = slot_name[s]
            if plan.donor[s] is None and s not in allocated:
                allocated.add(s)
                shape, dt = plan.slots[s]
                if plan.escapes[s]:
                    new = f"_empty({shape!r}, {self.ctx.dtype(dt)})"
                    i = dest_of.get(s)
                    if i is not None:
                        new += f" if dests is None or dests[{i}] is None else dests[{i}]"
                    body.append(f"{nm} = {new}")
                else:
                    self.scratch.append((s, shape, dt))
            return nm
        for idx, e in enumerate(prog.eqns):
            k = _kind(e, blocked)
            if id(e) in self.skip:          # its blocks were written in place
                buffer(e.outvars[0])
            elif id(e) in self.dest_copies:     # products wrote into its array
                body += self.emit_destination_copy(e)
            elif id(e) in self.dest_of_product:
                emit, _ = _out_emitter(e)
                body += emit(self.ctx, [self.atom(a) for a in e.invars],
                             self.product_destination(e, body))
            elif k == "out":
                into = self.out_columns.get(id(e), {})
                outs = [buffer(into[i][0]) if i in into else buffer(o)
                        for i, o in enumerate(e.outvars)]
                if id(e) in self.native_ids:
                    body += self.emit_native(e, outs)
                elif id(e) in blocked:
                    body += self.emit_blocked(e, outs)
                else:
                    emit, _ = _out_emitter(e)
                    body += emit(self.ctx, [self.atom(a) for a in e.invars], outs[0])
            elif e.primitive is broadcast_in_dim_p and id(e) not in blocked:
                o = e.outvars[0]
                nm = self.names[o] = self.fresh()
                x = self.atom(e.invars[0], as_scalar=False)
                exp = _expanded(e.invars[0].aval.shape, e.params["broadcast_dimensions"],
                                o.aval.ndim)
                if o in ufunc_only:         # ufuncs broadcast against their out= buffer
                    body.append(f"{nm} = {x}.reshape({exp!r})")
                else:
                    body.append(f"{nm} = _bcast({x}, {tuple(o.aval.shape)!r}, {exp!r})")
            elif e.primitive is slice_p and e.invars[0].aval.ndim and type(e.invars[0]) is Var:
                body += self.emit_slice(e, readers, outs_set)
            else:
                fn = self.ctx.impl(e)
                ins = ", ".join(self.atom(a, as_scalar=False) for a in e.invars)
                outs = [self.fresh() for _ in e.outvars]
                for o, nm in zip(e.outvars, outs):
                    self.names[o] = nm
                if e.primitive.multiple_results and not outs:    # called for its effect
                    body.append(f"{fn}({ins})")
                elif e.primitive.multiple_results:
                    body.append(f"{', '.join(outs)}{',' if len(outs) == 1 else ''} = {fn}({ins})")
                else:
                    body.append(f"{outs[0]} = {fn}({ins})")
        rets = []
        for a, copy in zip(j.outvars, plan.copy_out):
            if type(a) is Literal:
                rets.append(f"_array({self.ctx.literal(a, False)})")
            elif copy and not self.alias_outputs:
                rets.append(f"_array({self.names[a]})")
            else:
                rets.append(self.names[a])
        body.append(f"return [{', '.join(rets)}]")
        scratch_args = [f"s{s}=None" for s, _, _ in self.scratch]
        if self.destinations:
            scratch_args.append("*, dests=None")
        fname = identifier(self.name) or "jitted"
        head = f"def {fname}({', '.join(args + scratch_args)}):"
        src = "\n".join([head] + ["    " + ln for ln in body])
        self.source = "\n\n".join(self.block_sources + [src])
        self.fname = fname
        return self

    def dest_slots(self, outvars, plan):
        """slot -> output index, for the outputs a caller may give arrays to write into
        (destinations): those written whole into a buffer allocated per call, once each."""
        if not self.destinations:
            return {}
        res, seen = {}, collections.Counter(a for a in outvars if type(a) is Var)
        for i, (a, copy) in enumerate(zip(outvars, plan.copy_out)):
            if type(a) is Var and not copy and seen[a] == 1 and a in plan.slot_of:
                s = plan.slot_of[a]
                if plan.escapes[s] and plan.donor[s] is None:
                    res[s] = i
        return res

    # -- native fusion groups ---------------------------------------------

    def row_reason(self, e):
        """None if row group e runs native (its function rendered), else why it does not."""
        size = math.prod(fusion.row_group_space(e.params["jaxpr"])[0])
        if self.native[0] == "auto" and size < CONFIG.native_rows_min_size:
            return (f"row group of {size} elements, below the native threshold of "
                    f"{CONFIG.native_rows_min_size} (cpu_backend='native' forces it)")
        fn, why = native_rows.row_function(e.params["jaxpr"],
                                           self.ctx._fresh(e.params["name"])[1:])
        if why is None:
            self.row_functions[id(e)] = fn
        return why

    def unrow(self, e):
        """A row group's equations fused as a backend without row groups fuses them."""
        inner = e.params["jaxpr"]
        sub = Jaxpr([], inner.invars, inner.eqns, inner.outvars)
        return fusion.fuse(ClosedJaxpr(sub, []), can_fuse=can_fuse).jaxpr.eqns

    def native_reason(self, e, ops):
        """None if fusion group e runs native, else why it runs NumPy code."""
        if id(e) in self.row_functions:
            return None
        if self.native is None:
            return "cpu_backend='numpy'"
        mode, unavailable = self.native
        if unavailable:
            return unavailable
        inner = e.params["jaxpr"]
        why = native_kernels.unsupported(inner)
        if why or mode != "auto":
            return why
        size = e.outvars[0].aval.size
        if (ops < CONFIG.native_min_ops and (ops < 2 or size * ops < CONFIG.native_min_work)
                and not native_kernels.numpy_lacks(inner)):
            return (f"{ops} op(s) on {size} elements, below the native thresholds of "
                    f"{CONFIG.native_min_ops} ops or {CONFIG.native_min_work} elements x ops "
                    "(cpu_backend='native' forces it)")
        if ops > CONFIG.native_max_ops:
            return (f"{ops} ops, above the native limit of {CONFIG.native_max_ops} "
                    "(compile time; cpu_backend='native' forces it)")
        costly = native_kernels.costly_math(inner)
        if costly and size > CONFIG.native_math_max_size:
            return (f"{costly}: NumPy's loop is faster than the native one on {size} "
                    "elements (cpu_backend='native' forces it)")
        return None

    def emit_native(self, e, outs):
        inner = e.params["jaxpr"]
        g = self.row_functions.get(id(e))
        columns = {k: self.columns[a][1:] for k, a in enumerate(e.invars)
                   if type(a) is Var and a in self.columns}
        into = {k: c[1:] for k, c in self.out_columns.get(id(e), {}).items()}
        if g is None:
            g = native_kernels.render_group(inner, self.ctx._fresh(e.params["name"])[1:],
                                            columns, into)
            n, what = g.size, f"{g.size} elements"
            if columns:
                what += f" ({len(columns)} read as column blocks)"
            if into:
                what += f" ({len(into)} written as column blocks)"
        else:
            n, what = g.rows, f"{g.rows} rows of {g.cols}"
        self.native_groups.append(g)
        threads = self.threads if g.size >= CONFIG.native_parallel_min_size else 1
        fn = self.ctx._fresh(f"N_{g.name}")
        self.ctx.globals[fn] = None             # bound to the kernel by build()
        self.natives.append((fn, g.name, n, threads))
        args = ", ".join([self.columns[a][0] if k in columns else self.atom(a, as_scalar=False)
                          for k, a in enumerate(e.invars)] + list(outs))
        ops = sum(m.primitive is not broadcast_in_dim_p for m in inner.eqns)
        why = f" ({self.threads_why})" if self.threads_why and g.size >= \
            CONFIG.native_parallel_min_size else ""
        self.report.append((e.params["name"], "native",
                            f"C++ function {g.name}: {ops} ops on {what}, {threads} thread(s)"
                            f"{why}"))
        return [f"# {e.params['name']}: native C++ {g.name}, {ops} ops on {what}, "
                f"{threads} thread(s)",
                f"{fn}({args}) or _retry({fn}, {args})"]

    # -- blocked fusion groups --------------------------------------------

    def emit_blocked(self, e, outs):
        inner = e.params["jaxpr"]
        shape = e.outvars[0].aval.shape
        bcasts = [m for m in inner.eqns if m.primitive is broadcast_in_dim_p]
        flat = all(m.invars[0].aval.shape == () for m in bcasts)
        itemsize = max([v.aval.dtype.itemsize for m in inner.eqns for v in m.outvars] + [1])
        elems = max(1, CONFIG.block_bytes // itemsize)
        if flat:
            n, block_shape = math.prod(shape), None
            block = elems
        else:
            row = math.prod(shape[1:])
            n = shape[0]
            block = max(1, elems // max(row, 1))
        size = e.outvars[0].aval.size
        threads = self.threads if size >= CONFIG.parallel_min_size else 1
        threads = max(1, min(threads, -(-n // block)))
        block = min(block, n)
        block_shape = (block,) if flat else (block,) + tuple(shape[1:])

        # inner buffer plan: temporaries per block; group outputs are external
        def ikind(m):
            if m.primitive is broadcast_in_dim_p:
                return "view"
            if _out_emitter(m) is not None:
                return "out"
            return "fresh" if m.primitive.fresh else "view"
        iplan = passes.plan_buffers(inner, ikind, inplace=lambda m, i, o: _out_emitter(m)[1](i),
                                    outputs_external=True)
        fn_name = self.ctx._fresh(e.params["name"])[1:]
        self.ctx._taken.add(fn_name)
        params, call_args, lines = [], [], []
        local = {}
        nloc = [0]

        def loc():
            nloc[0] += 1
            return f"x{nloc[0]}"
        for i, v in enumerate(inner.invars):
            outer = e.invars[i]
            src = self.atom(outer, as_scalar=False)
            if v.aval.shape == shape:
                params.append(f"i{i}")
                call_args.append(f"{src}.reshape(-1)" if flat else src)
                nm = loc()
                lines.append(f"{nm} = i{i}[lo:hi]")
                local[v] = nm
            elif v.aval.shape == ():
                params.append(f"i{i}")
                call_args.append(src)
                local[v] = f"i{i}"
            # other shapes are read only by broadcast members, which get their own
            # pre-expanded argument below
        out_index = {v: k for k, v in enumerate(inner.outvars)}
        for m in inner.eqns:
            ov = m.outvars[0]
            ext = out_index.get(ov)
            if m.primitive is broadcast_in_dim_p:
                x = m.invars[0]
                if x.aval.shape == ():
                    val = local[x] if type(x) is Var else self.ctx.literal(x, False)
                else:
                    exp = _expanded(x.aval.shape, m.params["broadcast_dimensions"], len(shape))
                    pre = f"e{len(params)}"
                    params.append(pre)
                    call_args.append(f"{self.atom(e.invars[inner.invars.index(x)], False)}"
                                     f".reshape({exp!r})")
                    if exp[0] != 1 and shape[0] != 1:
                        val = loc()
                        lines.append(f"{val} = {pre}[lo:hi]")
                    else:
                        val = pre
                local[ov] = val
                if ext is not None:
                    lines.append(f"{self.ctx.g(np.copyto, 'copyto')}(o{ext}[lo:hi], {val})")
                continue
            ins = [local[a] if type(a) is Var else self.ctx.literal(a, True) for a in m.invars]
            em = _out_emitter(m)
            if em is not None:
                if ext is not None:
                    dst = loc()
                    lines.append(f"{dst} = o{ext}[lo:hi]")
                else:
                    dst = f"t{iplan.slot_of[ov]}"
                lines += em[0](self.ctx, ins, dst)
                local[ov] = dst
            else:
                fn = self.ctx.impl(m)
                ins = [local[a] if type(a) is Var else self.ctx.literal(a, False)
                       for a in m.invars]
                val = loc()
                lines.append(f"{val} = {fn}({', '.join(ins)})")
                local[ov] = val
                if ext is not None:
                    lines.append(f"{self.ctx.g(np.copyto, 'copyto')}(o{ext}[lo:hi], {val})")
        for k, nm in enumerate(outs):      # parameters: inputs, broadcasts, outputs, temps
            params.append(f"o{k}")
            call_args.append(f"{nm}.reshape(-1)" if flat else nm)
        params += [f"t{s}" for s in range(len(iplan.slots))]
        src = "\n".join([f"def {fn_name}(lo, hi, {', '.join(params)}):"]
                        + ["    " + ln for ln in lines])
        self.block_sources.append(src)
        tname = self.ctx._fresh(f"T_{fn_name}")
        self.temps.append((tname, threads, [(block_shape, dt) for (_, dt) in iplan.slots]))
        desc = (f"# {e.params['name']}: {len(inner.eqns)} ops on {size} elements, "
                f"{'flat' if flat else 'rows'} blocks of {block} "
                f"{'elements' if flat else 'rows'}, {threads} thread(s)")
        return [desc, f"_run_blocked({fn_name}, {n}, {block}, ({', '.join(call_args)}"
                      f"{',' if len(call_args) == 1 else ''}), {tname})"]

    # -- the executable ---------------------------------------------------

    def build(self, max_threads=None):
        """The executable; max_threads: at most so many threads a native group (its
        lowered thread count otherwise; the source's comments keep that one)."""
        g = dict(self.ctx.globals)
        for fn, cname, n, threads in self.natives:      # loaded by lower()
            if max_threads is not None:
                threads = min(threads, max_threads)
            g[fn] = functools.partial(self.call, self.addresses[cname], n, threads)
        g["__name__"] = JIT_MODULE
        code = compile(self.source, f"<functrans.jit {self.name}>", "exec")
        exec(code, g)
        return CpuExecutable(g[self.fname], g, len(self.closed.jaxpr.invars),
                             [(shape, dt) for _, shape, dt in self.scratch], self.temps,
                             self.source, self.name)


class CpuExecutable:
    """The compiled program: exe(*flat_args) -> list of outputs. Its persistent buffers
    (scratch arrays, bound as the generated function's defaults, and the per-thread
    temporaries of blocked groups, globals of its module) are shared, so calls from several
    user threads take turns (NumPy releases the GIL inside each call anyway). nbytes: what
    they hold, charged to the byte budget of backends/memory.py, which may free them
    between calls (the next call allocates them again)."""

    def __init__(self, fn, globs, n_in, scratch, temps, source, name):
        self.fn, self.n_in, self.scratch, self.temps = fn, n_in, scratch, temps
        self.source, self.name = source, name
        self._globals = globs
        self.nbytes = (sum(math.prod(shape) * np.dtype(dt).itemsize for shape, dt in scratch)
                       + sum(threads * math.prod(shape) * np.dtype(dt).itemsize
                             for _, threads, slots in temps for shape, dt in slots))
        self._lock = threading.Lock()
        self._token = None              # the budget's handle, once charged
        self._held = False              # buffers allocated and charged
        self._free()
        with self._lock:
            self._hold()

    def __call__(self, *args, dests=None):
        """dests (a program lowered with destinations=True): per output, None or a
        C-contiguous array of its shape and dtype, sharing no memory with the arguments, to
        write it into where the plan allows (the output returned is then that array)."""
        if len(args) != self.n_in:
            raise TypeError(f"{self.name} takes {self.n_in} flat arguments, got {len(args)}")
        kw = {} if dests is None else {"dests": dests}
        with self._lock:
            if self._held:
                if self.nbytes:
                    BUDGET.touch(self)
            elif not self._hold():          # larger than the whole budget: buffers per call
                self._allocate()
                try:
                    return self.fn(*args, **kw)
                finally:
                    self._free()
            return self.fn(*args, **kw)

    def _hold(self):
        """Charge the budget and allocate the buffers (False: they exceed the budget)."""
        if self.nbytes and not BUDGET.charge(self):
            return False
        self._allocate()
        self._held = True
        return True

    def _allocate(self):
        self.fn.__defaults__ = tuple(np.empty(shape, dt) for shape, dt in self.scratch) \
            or None
        for tname, threads, slots in self.temps:
            self._globals[tname] = [[np.empty(shape, dt) for shape, dt in slots]
                                    for _ in range(threads)]

    def _free(self):
        """Drop the buffers (the budget calls this with the lock taken)."""
        self._held = False
        if self.scratch:
            self.fn.__defaults__ = tuple(None for _ in self.scratch)
        for tname, _, _ in self.temps:
            self._globals[tname] = None

    @property
    def holds_buffers(self):
        """Whether the buffers are allocated now."""
        return self._held

    def __repr__(self):
        return f"<CpuExecutable {self.name}>"


cpu_kernels.install(CONFIG)


def native_setting():
    """(cpu_backend mode, why native code is unavailable or None), or None for 'numpy'."""
    mode = config.cpu_backend
    if mode == "numpy":
        return None
    return mode, toolchain.unavailable()


def lower(closed: ClosedJaxpr, donated=(), name="jitted", alias_outputs=False, native=True,
          destinations=False):
    """Lower an optimized ClosedJaxpr to generated NumPy code, its fusion groups to native
    C++ functions where `ft.config.cpu_backend` and the toolchain allow (native=False: NumPy
    only): a Lowered. alias_outputs: outputs may be inputs (or one another) instead of
    copies, for internal programs whose results nobody writes to. destinations: the
    executable takes `dests`, arrays its outputs may be written into (CpuExecutable)."""
    setting = native_setting() if native else None
    lw = _Lowering(closed, donated, name, alias_outputs, setting, destinations).run()
    native_info = None
    if lw.native_groups:
        src = native_kernels.render_program(lw.native_groups)
        try:       # any failure was reported (one warning) and turned native code off
            lw.library = toolchain.build(src, name)
            lw.addresses = native_kernels.entry_points(lw.library,
                                                       [c for _, c, _, _ in lw.natives])
            lw.call = native_kernels.caller()
        except toolchain.ToolchainError as e:
            why = f"native code failed: {str(e).splitlines()[0]}"
            lw = _Lowering(closed, donated, name, alias_outputs, (setting[0], why),
                           destinations).run()
        else:
            native_info = {"source": src, "library": lw.library}
    info = dict(lw.info, scratch_buffers=len(lw.scratch), plan=repr(lw.plan), groups=lw.report)
    build = lw.build
    if native_info is not None and setting[0] == "auto":
        candidates = [("native", lw.build), ("numpy", lambda: _Lowering(
            closed, donated, name, alias_outputs, None, destinations).run().build())]
        if any(threads > 1 for _, _, _, threads in lw.natives):
            candidates.append(("native, 1 thread", lambda: lw.build(max_threads=1)))

        def build():
            return MeasuredChoice(candidates, CONFIG.native_trials, trial_clock(
                closed.jaxpr, CONFIG.threads, CONFIG.clock), CONFIG.native_trials_most,
                CONFIG.native_margin)
    return Lowered(lw.fusedj, lw.source, build, "cpu", name, plan=lw.plan, info=info,
                   native=native_info)
