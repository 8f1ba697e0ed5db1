"""Fusion groups as host C++ functions: the body `cuda.render_group` renders from the
primitives' expression templates (the CUDA kernel's text, unchanged), wrapped in an
OpenMP-parallel loop the compiler vectorizes; and the fast call into them from Python.

The generated source puts the kernels in a namespace where unqualified math functions
resolve to `ftm::` (ftmath.h: vectorizable, no fast-math), defines CUDA's few device
spellings for the host (`__device__`, `__half` as _Float16, computed in float), and
exports `extern "C" void NAME(void* const* p, long long n, int nt)` per group.
"""
from __future__ import annotations

import ctypes
import functools
import math
import os
import re
import sysconfig
import threading

import numpy as np

from .. import cuda
from ...primitives.shape import broadcast_in_dim_p
from . import toolchain

HOST_PRELUDE = r"""// functrans generated code: native CPU backend
#include "ftmath.h"
#define __device__
#define __forceinline__ inline __attribute__((always_inline))
typedef _Float16 __half;
static inline float __half2float(__half h) { return (float)h; }
static inline __half __float2half_rn(float f) { return (__half)f; }
static inline __half __double2half(double d) { return (__half)d; }
"""

MAX_ARGS = 512                  # ftcall.cpp's FT_MAX_ARGS
# functions of the templates that cost about what NumPy's loops cost; any other (exp, tanh,
# sin, ...) is ftmath.h's double-precision evaluation or a libm call, which NumPy's SIMD
# loops beat on large arrays (measured: the 30-op chain with 3 tanh on 1M floats, 11 ms
# natively, 4.5 ms in the NumPy backend's blocked code)
CHEAP_CALLS = {"fabs", "floor", "ceil", "round", "rint", "sqrt", "isfinite", "abs", "ft_max",
               "ft_min", "ft_srl", "ft_shl", "ft_idiv", "ft_irem", "ft_ipow"}
# ... and those ftmath.h evaluates in float arithmetic for float (and float16) operands,
# at about NumPy's cost per element (ns/element, one thread, AVX-512: exp 0.50 vs NumPy's
# 0.52, log 0.44 vs 0.39, tanh in a chain of four 0.27-0.39 vs 0.23-0.33), so that fusing
# wins: the same chain, 2.3-3 ms natively on one thread
FAST_FLOAT_CALLS = {"exp", "expm1", "log", "log1p", "tanh", "ft_logaddexp", "ft_logistic"}
# ... and those NumPy has no loop for: the NumPy implementation of erf evaluates its
# polynomials pass by pass over masked copies (about 20x the native loop's time)
FASTER_THAN_NUMPY = {"erf"}
_CALL = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\(")
INLINED = ("exp", "expm1", "log", "log1p", "tanh", "erf",   # ftmath.h's NAME_inline
           "ft_logistic")                                    # HOST_INLINED's
_INLINED = re.compile(r"\b(" + "|".join(INLINED) + r")\(")
HOST_INLINED = "FT_LOGISTIC(ft_logistic_inline, exp_inline)"  # after cuda.PRELUDE
INLINE_CALLS_MAX = 8     # inline_calls: the most calls of them a loop body inlines
_STREAM_J = re.compile(r"\bi\b|\bft_r\b|\bv(\d+)\b")
STREAMS_MIN_SIZE = 1 << 12
# 4 streams, not 8: each stream's values live across the calls of the out-of-line clones,
# which keep no vector register, and with 8 the spills outweighed the overlap (the 30-op
# chain on 1M floats, one thread, CPU time: 2.7-3.7 ms with 8, 2.4-2.5 with 4; its forward +
# backward 4.4-5.7 and 3.7-3.9 ms; exact GELU, erf's kernels and the LSTM gates the same
# within noise; digamma's 8 inlined streams built in 2.3 s, 4 in 1.1)
STREAMS = 4
# ... and fewer where the streams' arrays would exceed MEMORY_STREAMS sequential streams: an
# LSTM step's gates (8 column blocks read, 7 arrays written, 20 rows) loaded latency-bound
# with 4 streams of rows, 64 streams in all (one thread, its training step: 33 us a call,
# 23 with 1 stream); the 30-op chain's 4 arrays keep 4 streams
MEMORY_STREAMS = 24


def unsupported(jaxpr) -> str | None:
    """Why a fusion group cannot become a native function (None: it can)."""
    for e in jaxpr.eqns:
        for a in list(e.invars) + list(e.outvars):
            dt = a.aval.dtype
            if dt.kind == "c":
                return f"complex dtype {dt.name} not supported natively"
            if dt.name not in cuda.CTYPES:
                return f"dtype {dt.name} not supported natively"
        if e.primitive is broadcast_in_dim_p:
            continue
        if e.primitive.name == "pow" and e.invars[0].aval.dtype.kind in "iu":
            return "integer pow stays on NumPy (its error for negative powers)"
        try:
            cuda.template_for(e)
        except cuda.CudaLoweringError:
            return f"primitive '{e.primitive.name}' has no expression template"
    if len(jaxpr.invars) + len(jaxpr.outvars) > MAX_ARGS:
        return f"more than {MAX_ARGS} arguments"
    return None


def local_type(dtype) -> str:
    """The C type of a local on the host: bools as int (0 or 1; GCC vectorizes a loop that
    mixes bool locals with float ones only so), the rest as on the GPU."""
    return "int" if np.dtype(dtype) == np.bool_ else cuda.compute_type(dtype)


def render_group(jaxpr, name, columns=None, out_columns=None):
    """A fusion group rendered for the host (cuda.render_group with host locals). columns:
    {input position: (W, lo)} for inputs passed as the whole C-contiguous array whose
    columns [lo, lo + cols) of a last axis of W the group reads (shape.slice_column_block:
    an LSTM step's gate blocks, read in place instead of copied out one by one);
    out_columns: {output position: (W, lo)} for outputs written so into a larger array (the
    blocks a concatenation along the last axis would copy together: the LSTM backward's
    gate gradients); such a group loops over rows (render_function), reading and writing
    them at row `ft_r`."""
    columns = dict(columns or {})
    columns.update({("out", k): c for k, c in (out_columns or {}).items()})
    index = {k: f"ft_r * {w}LL + {lo}LL + j" for k, (w, lo) in columns.items()}
    g = cuda.render_group(jaxpr, name, local_type, index)
    g.columns = columns
    return g


def takes_columns(g) -> bool:
    """Whether rendered group g can loop over rows of its output's last axis (so read
    column blocks): rank >= 2, and every broadcast input a vector along that axis."""
    return _row_length(g) > 0


def _calls(e):
    return _CALL.findall(cuda.template_for(e))


def _first_calling_beyond(jaxpr, allowed):
    """The first primitive of the group whose template calls a function outside
    allowed(eqn), or None."""
    for e in jaxpr.eqns:
        if e.primitive is not broadcast_in_dim_p and set(_calls(e)) - allowed(e):
            return e.primitive.name
    return None


def transcendental(jaxpr):
    """The first primitive of the group whose template calls a function beyond
    CHEAP_CALLS (a long chain of arithmetic per element), or None."""
    return _first_calling_beyond(jaxpr, lambda e: CHEAP_CALLS)


def numpy_lacks(jaxpr):
    """The first primitive of the group whose template calls a function NumPy has no loop
    for (FASTER_THAN_NUMPY: erf), or None: such a group runs native whatever its size (the
    NumPy code would run that primitive alone natively anyway, and the rest pass by pass:
    exact GELU's five ops, 3.3x slower so)."""
    for e in jaxpr.eqns:
        if e.primitive is not broadcast_in_dim_p and set(_calls(e)) & FASTER_THAN_NUMPY:
            return e.primitive.name
    return None


_FAST = CHEAP_CALLS | FASTER_THAN_NUMPY
_FAST_FLOAT = _FAST | FAST_FLOAT_CALLS


def costly_math(jaxpr):
    """The first primitive of the group whose template calls a function NumPy computes
    faster on large arrays (beyond CHEAP_CALLS and FASTER_THAN_NUMPY, and for float
    operands FAST_FLOAT_CALLS), or None."""
    def fast(e):
        is_float = e.invars and cuda.compute_type(e.invars[0].aval.dtype) == "float"
        return _FAST_FLOAT if is_float else _FAST
    return _first_calling_beyond(jaxpr, fast)


def interleaved(body, k):
    """The loop body for k streams of elements (indices i, i1, ...), statement by statement:
    a chain of transcendentals is a long dependency chain per element, and interleaved
    copies give the CPU independent work within its reordering window (measured: the 30-op
    chain with 3 tanh on 1M floats, one thread: 8.7 ms in one stream, 4.2 ms in two)."""
    out = []
    for line in body:
        out.append(line)
        for s in range(1, k):
            out.append(_STREAM_J.sub(lambda m: f"{m.group(0)}{s}" if m.group(1) is None
                                     else f"v{m.group(1)}_{s}", line))
    return out


def inline_calls(body):
    """The loop body with its calls of the float transcendentals ftmath.h evaluates in
    float (INLINED) inlined, as NAME_inline, when it has at most INLINE_CALLS_MAX of them,
    else as it is (each a call of the out-of-line clone): inlined, their work overlaps the
    streams' other work; a long group inlining many compiles for seconds."""
    if sum(len(_INLINED.findall(b)) for b in body) > INLINE_CALLS_MAX:
        return body
    return [_INLINED.sub(_inlined, b) for b in body]


def _inlined(m):
    name = m.group(1)
    return f"{name}_inline(" if name.startswith("ft_") else f"ftm::{name}_inline("


def streams(g):
    """How many parts of n a group's loop runs at once (render_function): STREAMS for a
    large group with a transcendental, fewer where its full-size arrays (inputs and
    outputs of the group's size) times STREAMS exceed MEMORY_STREAMS."""
    if g.size < STREAMS_MIN_SIZE or not transcendental(g.jaxpr):
        return 1
    arrays = sum(v.aval.size == g.size for v in g.jaxpr.invars) + len(g.jaxpr.outvars)
    k = STREAMS
    while k > 1 and arrays * k > MEMORY_STREAMS:
        k //= 2
    return k


def render_function(g):
    """A rendered group (cuda.GroupCode) as (a host function over [0, n), its C entry).
    Groups with a transcendental and at least STREAMS_MIN_SIZE elements loop over STREAMS
    parts of n at once, each of q = ceil(n / STREAMS) elements from min(s q, n - q) (parts
    may overlap: both compute and store the same values there). OpenMP hands out chunks
    of 2048 iterations dynamically: on a machine whose cores are shared, a static split
    waits for the slowest thread (measured the same within the shared machine's noise).
    Broadcast inputs constant on blocks of the flat index are loaded once a block
    (broadcast_block); vectors along the last axis are read at the column of a loop over
    rows (last_axis_vectors); so are a group's column blocks (render_group); a body with
    few transcendental calls inlines them (inline_calls); a loop calling tanh (and erf,
    where ftmath.h has its table) is split at those calls (staged_parts)."""
    params = g.params + ["const long long n", "const int nt"]
    lines = [f"static void {g.name}_body({', '.join(params)}) {{"]
    lines += ["  " + h for h in g.hoisted]
    plain = _loop(g, SPLIT)
    tables = (_loop(g, SPLIT + SPLIT_TABLES)
              if any(map(_split_at(SPLIT_TABLES).match, g.body)) else plain)
    if tables == plain:
        lines += plain
    else:
        lines += ["#if FTM_TABLES", *tables, "#else", *plain, "#endif"]
    return "\n".join(lines + ["}"]), entry_point(g.name, g.params)


def _loop(g, split):
    """render_function's loop (the function's lines after its constants), split at the
    calls of the functions `split` names."""
    k = streams(g)
    body = inline_calls(g.body)
    block = broadcast_block(g) if k == 1 and not g.columns else 0
    cols = _row_length(g) if g.columns else 0 if block else last_axis_vectors(g)
    if cols:
        return _rows_loop(g, cols, k, split)
    lines = []
    if block:
        at = {pos for pos, _, _ in g.bcasts}
        chunk = max(1, 2048 // block)
        lines.append(f"  #pragma omp parallel for num_threads(nt) schedule(dynamic, {chunk})")
        lines.append(f"  for (long long i0 = 0; i0 < n; i0 += {block}LL) {{")
        lines += ["    " + line("i0") for _, _, line in g.bcasts]
        lines.append(f"    const long long i1 = i0 + {block}LL < n ? i0 + {block}LL : n;")
        lines.append("    #pragma omp simd")
        lines.append("    for (long long i = i0; i < i1; ++i) {")
        lines += ["      " + b for p, b in enumerate(body) if p not in at]
        return lines + ["    }", "  }"]
    stages = staged_loop(g.body, split) if g.size >= STAGE_BLOCK else None
    if stages:
        return stages
    if k > 1:
        lines.append(f"  const long long q = (n + {k - 1}) / {k};")
        lines += [f"  const long long o{s} = {s} * q < n - q ? {s} * q : n - q;"
                  for s in range(1, k)]
    lines.append("  #pragma omp parallel for simd num_threads(nt) schedule(dynamic, 2048)")
    lines.append(f"  for (long long i = 0; i < {'q' if k > 1 else 'n'}; ++i) {{")
    lines += [f"    const long long i{s} = i + o{s};" for s in range(1, k)]
    lines += ["    " + b for b in interleaved(body, k)]
    return lines + ["  }"]


# The float functions a large loop is split at (ftmath.h's NAME_block; staged_parts): tanh
# always (on AVX-512 its table, which GCC's vectorizer calls only out of line), erf where
# ftmath.h has its table (FTM_TABLES: the generated source has both loops). The block of
# elements each part of a split loop covers (the values crossing the parts in arrays of
# that many on the stack: a few KiB, within L1). Split at exp, log1p and the polynomial erf
# too, loops ran slower (three exp and a log1p on 1M floats 1.7 -> 1.9 ms, exact GELU's
# gradient 0.75 -> 1.0 ms), and at an LSTM step's logistic gates too, 17 -> 18 us
SPLIT, SPLIT_TABLES = ("tanh",), ("erf",)
STAGE_BLOCK = 256


@functools.lru_cache(maxsize=None)
def _split_at(names):
    return re.compile(r"const float (v\d+) = (\(float\)\()?(" + "|".join(names)
                      + r")\((v\d+)\)(?(2)\));")


_DEFINES = re.compile(r"const (\w+) (v\d+) = (.*)$")
_LOCAL = re.compile(r"\bv\d+\b")
_FLOAT_LOAD = re.compile(r"const float v\d+ = (in\d+)\[([^\]]*)\];")


def staged_parts(body, index, length, size, start, split):
    """The parts of a loop body that applies the functions `split` names (tanh, ...) to a
    float local, split at those calls (None when it applies none): (the declarations of
    the arrays that carry values across parts, [a part's lines, or the line calling
    NAME_block]). The loop they make covers a block of `size` elements, the part at the C
    index `index` in the block (`length` of them). A value crossing from one part to a
    later one goes through an array of the block, but for loads (lines reading no local),
    which each part that reads them repeats; a call on a float input reads it in place,
    from the element start(its load's index) (None: not one to read so). Each part
    vectorizes alone, and the function's loop keeps its constants in registers, nothing
    else live across it: the 30-op chain, 3 tanh an element on 1M floats, one thread, 2.2
    ns an element as one loop in 4 streams, 1.8 split so, 1.3 with AVX-512's table tanh
    (which GCC's vectorizer can only call as an out-of-line clone: 2.05 so)."""
    parts, calls = [[]], []
    for line in body:
        m = _split_at(split).match(line)
        if m:
            calls.append((m.group(4), m.group(1), m.group(3)))
            parts.append([])
        else:
            parts[-1].append(line)
    if not calls:
        return None
    defined = {}                                   # local -> (line or None, C type)
    loads = set()                                  # the locals of lines reading no local
    for line in (line for part in parts for line in part):
        d = _DEFINES.match(line)
        if d:
            defined[d.group(2)] = (line, d.group(1))
            if not _LOCAL.search(d.group(3)):
                loads.add(d.group(2))
    defined.update({out: (None, "float") for _, out, _ in calls})
    sources = {}                                   # a call's operand -> the C pointer read
    for src, _, _ in calls:
        m = _FLOAT_LOAD.match(defined[src][0] or "")
        at = start(m.group(2)) if m else None
        sources[src] = f"{m.group(1)} + {at}" if at is not None else f"ft_b{src}"
    arrays = {out for _, out, _ in calls} | {v for v, at in sources.items() if at == f"ft_b{v}"}
    heads = []
    for part in parts:
        own, need = set(), []
        for line in part:
            d = _DEFINES.match(line)
            for v in _LOCAL.findall(d.group(3) if d else line):
                if v not in own and v not in need:
                    need.append(v)
            if d:
                own.add(d.group(2))
        arrays.update(v for v in need if v not in loads)
        heads.append([defined[v][0] for v in need if v in loads]
                     + [f"const {defined[v][1]} {v} = ft_b{v}[{index}];"
                        for v in need if v not in loads])
    steps = []
    for p, part in enumerate(parts):
        stores = [f"ft_b{d.group(2)}[{index}] = {d.group(2)};"
                  for d in map(_DEFINES.match, part) if d and d.group(2) in arrays]
        lines = heads[p] + part
        read = set(_LOCAL.findall(" ".join(stores + [_DEFINES.sub(r"\3", ln) for ln in lines])))
        lines = [ln for ln in lines
                 if not ((d := _DEFINES.match(ln)) and d.group(2) in loads - read)]
        if lines or stores:
            steps.append(inline_calls(lines) + stores)
        if p < len(calls):
            src, dst, fn = calls[p]
            steps.append(f"ftm::{fn}_block({sources[src]}, ft_b{dst}, {length});")
    decls = [f"alignas(64) {defined[v][1]} ft_b{v}[{size}];" for v in sorted(arrays)]
    return decls, steps


def staged_loop(body, split=SPLIT):
    """The loop of a large flat group as staged_parts (None when there are none): the
    elements in blocks of STAGE_BLOCK, the parts' loops and calls in each."""
    b = STAGE_BLOCK
    staged = staged_parts(body, "i - i0", "ft_e - i0", b,
                          lambda at: "i0" if at == "i" else None, split)
    if staged is None:
        return None
    return [f"  #pragma omp parallel for num_threads(nt) schedule(dynamic, {2048 // b})",
            f"  for (long long i0 = 0; i0 < n; i0 += {b}LL) {{",
            f"    const long long ft_e = i0 + {b}LL < n ? i0 + {b}LL : n;",
            *_block_lines(staged, ["    for (long long i = i0; i < ft_e; ++i) {"]), "  }"]


def _block_lines(staged, head):
    """The lines of one block of staged_parts: its arrays, then each part in its simd loop
    (whose first lines are `head`) or each call."""
    decls, steps = staged
    out = ["    " + d for d in decls]
    for step in steps:
        if isinstance(step, str):
            out.append("    " + step)
        else:
            out += ["    #pragma omp simd", *head] + ["      " + line for line in step] + ["    }"]
    return out


def _rows_loop(g, cols, k, split):
    """_loop for last_axis_vectors: rows of `cols` elements (k streams of rows, as the flat
    loop's streams of elements), each broadcast vector read at the column `j` of the inner
    simd loop, a plain load; a row of STAGE_ROWS elements is staged
    (staged_parts) where the body calls tanh, a row a block (an LSTM step's gates, 20 x
    256, one thread: 18.0 us a call with tanh's clone, 16.8-17.0 so, 17.1 with the former
    tanh inlined)."""
    at = {pos: line("j", terms=[(1, None, terms[0][2])]) for pos, terms, line in g.bcasts}
    body = [at.get(p, b) for p, b in enumerate(g.body)]
    lines = [f"  const long long R = n / {cols}LL;"]
    staged = (staged_parts(body, "j", f"{cols}LL", cols, functools.partial(_row_start, cols),
                           split) if cols in STAGE_ROWS else None)
    if staged:
        lines.append(f"  #pragma omp parallel for num_threads(nt) schedule(dynamic, "
                     f"{max(1, 2048 // cols)})")
        lines.append("  for (long long r = 0; r < R; ++r) {")
        if g.columns:
            lines.append("    const long long ft_r = r;")
        head = [f"    for (long long j = 0; j < {cols}LL; ++j) {{",
                f"      const long long i = r * {cols}LL + j;"]
        return lines + _block_lines(staged, head) + ["  }"]
    body = inline_calls(body)
    if k > 1:
        lines.append(f"  const long long q = (R + {k - 1}) / {k};")
        lines += [f"  const long long o{s} = ({s} * q < R - q ? {s} * q : R - q) * {cols}LL;"
                  for s in range(1, k)]
    lines.append(f"  #pragma omp parallel for num_threads(nt) schedule(dynamic, "
                 f"{max(1, 2048 // cols)})")
    lines.append(f"  for (long long r = 0; r < {'q' if k > 1 else 'R'}; ++r) {{")
    if g.columns:                          # the row of each stream, for column blocks
        lines.append("    const long long ft_r = r;")
        lines += [f"    const long long ft_r{s} = r + o{s} / {cols}LL;" for s in range(1, k)]
    lines.append("    #pragma omp simd")
    lines.append(f"    for (long long j = 0; j < {cols}LL; ++j) {{")
    lines.append(f"      const long long i = r * {cols}LL + j;")
    lines += [f"      const long long i{s} = i + o{s};" for s in range(1, k)]
    lines += ["      " + b for b in interleaved(body, k)]
    return lines + ["    }", "  }"]


def _row_start(cols, at):
    """The index at the row's first column of a row loop's load index `at` (None when it
    is not the column plus a term of the row)."""
    if at == "i":
        return f"r * {cols}LL"
    if at == "j":
        return "0"
    return at[:-len(" + j")] if at.endswith(" + j") and "j" not in at[:-len(" + j")] else None


def last_axis_vectors(g) -> int:
    """The output's last axis length when every broadcast input of rendered group g is a
    vector along that axis (a dense layer's bias: flat index (i % cols) * stride) and the
    axis has BLOCK_MIN elements or more, else 0. Read as `(i % cols)` in the flat loop,
    GCC gathers it lane by lane (exact GELU's bias: 32 gathers in the loop); in rows of
    `cols`, the column is the simd loop's own index."""
    cols = _row_length(g)
    return cols if g.bcasts and cols >= BLOCK_MIN else 0


def _row_length(g) -> int:
    """The output's last axis length when it has rank >= 2 and every broadcast input of
    rendered group g is a vector along that axis (read at the column of a row loop), else
    0."""
    shape = g.jaxpr.eqns[-1].outvars[0].aval.shape if g.jaxpr.eqns else ()
    if len(shape) < 2 or not all(len(terms) == 1 and terms[0][:2] == (1, shape[-1])
                                 for _, terms, _ in g.bcasts):
        return 0
    return shape[-1]


BLOCK_MIN, BLOCK_MAX = 64, 4096    # broadcast_block's blocks: long enough for a loop of
                                   # their own, short enough for threads to share the work
STAGE_ROWS = range(BLOCK_MIN, 4 * STAGE_BLOCK + 1)    # the rows _rows_loop stages


def broadcast_block(g) -> int:
    """The length of the aligned blocks of the flat index on which every broadcast input of
    rendered group g reads one value, or 0: no broadcast, or no such block of BLOCK_MIN
    elements or more. The blocks: the largest divisor up to BLOCK_MAX of the gcd of the
    index terms' divisors (a batch norm's per-channel scale over NCHW is constant on each
    H*W plane). Loaded once a block, those values leave the element loop plain loads the
    compiler vectorizes; read through `(i / 1024) % 32` in the loop, GCC (12) kept the
    loop scalar (the batch norm's forward took 1.1 ms on 1M floats)."""
    if not g.bcasts:
        return 0
    whole = math.gcd(*(div for _, terms, _ in g.bcasts for div, _, _ in terms), g.size)
    return next((b for b in range(min(whole, BLOCK_MAX), BLOCK_MIN - 1, -1) if whole % b == 0),
                0)


def entry_point(name, params) -> str:
    """The C entry `NAME(void* const* p, long long n, int nt)` of `ftk::NAME_body(params...,
    n, nt)`: p[k] is the k-th array parameter."""
    casts = []
    for k, p in enumerate(params):
        ptype = p.rsplit(" ", 2)[0].replace(" __restrict__", "")   # "const float*"
        casts.append(f"({ptype})p[{k}]")
    return (f'extern "C" void {name}(void* const* p, long long n, int nt) '
            f'{{ ftk::{name}_body({", ".join(casts + ["n", "nt"])}); }}')


def render_program(groups) -> str:
    """One C++ translation unit for the native groups of a program (cuda.GroupCode, or any
    group with a `function()` giving its (C++ function, C entry))."""
    bodies, entries = [], []
    for g in groups:
        body, entry = g.function() if hasattr(g, "function") else render_function(g)
        bodies.append(body)
        entries.append(entry)
    return "\n".join([HOST_PRELUDE, "namespace ftk {", "using namespace ftm;", cuda.PRELUDE,
                      HOST_INLINED, *bodies, "}  // namespace ftk", *entries, ""])


# ---------------------------------------------------------------------------
# calling a kernel from Python

_caller: list = []
_caller_lock = threading.Lock()


def _ftcall():
    """The ftcall extension (built once per Python and compiler, from ftcall.cpp), or None
    when the Python headers are missing (then ctypes calls the kernels); ToolchainError
    when it cannot be built or loaded."""
    inc = sysconfig.get_paths().get("include")
    if not inc or not os.path.exists(os.path.join(inc, "Python.h")):
        return None
    with open(os.path.join(toolchain.HERE, "ftcall.cpp")) as f:
        src = f.read()
    mod = toolchain.load_extension(toolchain.build(src, "ftcall", include=(inc,)), "ftcall")
    mod.set_ndarray(np.ndarray)
    return mod.call


def _ctypes_call(address, n, nt, *arrays):
    """ftcall.call's contract through ctypes (slower per call)."""
    for a in arrays:
        if type(a) is not np.ndarray or not a.flags.c_contiguous:
            return False
    ptrs = (ctypes.c_void_p * max(1, len(arrays)))(*[a.ctypes.data for a in arrays])
    _kernel_type(address)(ptrs, n, nt)
    return True


@functools.lru_cache(maxsize=None)
def _kernel_type(address):
    return ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_longlong, ctypes.c_int)(address)


def caller():
    """call(address, n, threads, *arrays) -> bool (False: an array was not C-contiguous)."""
    with _caller_lock:
        if not _caller:
            _caller.append(_ftcall() or _ctypes_call)
        return _caller[0]


def retry(fn, *arrays):
    """Call again with every argument made a C-contiguous ndarray (outputs are already)."""
    fn(*[np.ascontiguousarray(a) for a in arrays])


def entry_points(path, names):
    """name -> the address of its C entry point in the library at path (loaded and checked
    by the toolchain: ToolchainError when it cannot be)."""
    lib = toolchain.load(path)
    return {nm: ctypes.cast(getattr(lib, nm), ctypes.c_void_p).value for nm in names}
