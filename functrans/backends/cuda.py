"""CUDA backend: each fusion group becomes ONE generated CUDA kernel, the rest CuPy.

A kernel is rendered from the primitives' expression templates (the `cuda=` field of
each elementwise declaration): one typed local per equation, broadcast inputs read
through index arithmetic on the flat output index, literals inlined with their exact
values, float16 computed in float and rounded after every operation, no fast-math
(and no FMA contraction, so each operation rounds as NumPy's does). Reductions,
dot_general and the other primitives run their `impl(cupy, ...)` (cuBLAS for
contractions). Source generation needs nothing; running needs CuPy and a GPU, imported
lazily on the first compile, and compiled kernels are cached by their source.
"""
from __future__ import annotations

import functools
import math
import threading

import numpy as np

from .. import fusion
from . import JIT_MODULE, Lowered, identifier
from ..core import (ClosedJaxpr, FunctransError, Jaxpr, Literal, Var, cupy_array_module,
                    short_dtype)
from ..core.devices import cupy_module
from ..primitives.elementwise import convert_element_type_p
from ..primitives.shape import broadcast_in_dim_p
from .cuda_special import SPECIAL_TEMPLATES

CTYPES = {
    "bool": "bool", "int8": "signed char", "int16": "short", "int32": "int",
    "int64": "long long", "uint8": "unsigned char", "uint16": "unsigned short",
    "uint32": "unsigned int", "uint64": "unsigned long long", "float16": "__half",
    "float32": "float", "float64": "double",
}

NVCC_OPTIONS = ("-fmad=false",)         # no FMA contraction, no fast-math
NVRTC_OPTIONS = ("--fmad=false",)
THREADS_PER_BLOCK = 256
MAX_BLOCKS = 65535

PRELUDE = r"""// functrans generated code
// NaN propagates (NumPy): a when a is NaN, else b when b is (a > NaN is false); one
// select, which GCC vectorizes in a loop that has another (nested selects it does not)
template <typename T> __device__ __forceinline__ T ft_max(T a, T b) {
  return (a > b || a != a) ? a : b;
}
template <typename T> __device__ __forceinline__ T ft_min(T a, T b) {
  return (a < b || a != a) ? a : b;
}
template <typename T> __device__ __forceinline__ T ft_logaddexp(T a, T b) {
  if (a == b) return a + (T)0.69314718055994530942;          // ties, equal infinities too
  return ft_max(a, b) + log1p(exp(-fabs(a - b)));
}
// logistic(x): 1 / (1 + e) from 0 up, e / (1 + e) below, e = exp(-|x|) (no overflow; the
// negative tail kept); one exp, outside the select (GCC vectorizes no call in a select's
// arm); NaN through e. (A macro of its exp: the CPU's loops with few calls inline it.)
#define FT_LOGISTIC(NAME, EXP)                                                        \
  template <typename T> __device__ __forceinline__ T NAME(T x) {                     \
    const T e = EXP(-fabs(x));                                                        \
    return (x >= 0 ? (T)1 : e) / (1 + e);                                             \
  }
FT_LOGISTIC(ft_logistic, exp)
{special}// shifts as NumPy defines them: zero once the amount reaches the width; a logical right
// shift of a signed value shifts its unsigned bits
#define FT_SHIFTS(T, U)                                                              \
  __device__ __forceinline__ T ft_srl(T x, T y) {                                     \
    return ((U)y >= 8 * sizeof(T)) ? (T)0 : (T)((U)x >> (U)y); }                     \
  __device__ __forceinline__ T ft_shl(T x, T y) {                                     \
    return ((U)y >= 8 * sizeof(T)) ? (T)0 : (T)((U)x << (U)y); }
FT_SHIFTS(signed char, unsigned char) FT_SHIFTS(unsigned char, unsigned char)
FT_SHIFTS(short, unsigned short) FT_SHIFTS(unsigned short, unsigned short)
FT_SHIFTS(int, unsigned int) FT_SHIFTS(unsigned int, unsigned int)
FT_SHIFTS(long long, unsigned long long) FT_SHIFTS(unsigned long long, unsigned long long)
// integer division and remainder as NumPy's: x / 0 = x % 0 = 0, and MIN / -1 wraps to MIN
// (a plain / or % traps on the CPU there and is undefined on the GPU)
template <typename T> __device__ __forceinline__ T ft_idiv(T x, T y) {
  if (y == 0) return (T)0;
  if ((T)-1 < (T)0 && y == (T)-1) return (T)(0ULL - (unsigned long long)x);
  return (T)(x / y);
}
template <typename T> __device__ __forceinline__ T ft_irem(T x, T y) {
  return (y == 0 || ((T)-1 < (T)0 && y == (T)-1)) ? (T)0 : (T)(x % y);
}
template <typename T> __device__ __forceinline__ T ft_ipow(T x, int y) {
  T r = 1;                                                    // x**y for y >= 0
  while (y > 0) { if (y & 1) r *= x; x *= x; y >>= 1; }
  return r;
}
"""


PRELUDE = PRELUDE.replace("{special}", SPECIAL_TEMPLATES)


class CudaLoweringError(FunctransError, NotImplementedError):
    """An equation cannot be rendered into a CUDA kernel."""


def ctype(dtype) -> str:
    name = np.dtype(dtype).name
    if name not in CTYPES:
        raise CudaLoweringError(f"no CUDA type for dtype {name} (complex values are not fused)")
    return CTYPES[name]


def compute_type(dtype) -> str:
    """The register type of a value: float16 is computed in float."""
    return "float" if np.dtype(dtype) == np.float16 else ctype(dtype)


def literal_c(value, dtype) -> str:
    """A C expression of exactly this value and type."""
    dt = np.dtype(dtype)
    v = np.asarray(value).astype(dt)[()]
    if dt.kind == "b":
        return "true" if v else "false"
    if dt.kind in "iu":
        iv = int(v)
        suffix = {"int64": "LL", "uint64": "ULL", "uint32": "u"}.get(dt.name, "")
        if dt.name == "int64" and iv == -(1 << 63):
            return "(-9223372036854775807LL - 1)"
        if dt.name == "int32" and iv == -(1 << 31):
            return "(-2147483647 - 1)"
        text = f"{iv}{suffix}"
        return text if dt.itemsize >= 4 else f"(({ctype(dt)}){text})"
    if dt.kind == "f":
        if dt == np.float64:
            if math.isfinite(float(v)):
                return repr(float(v))
            bits = int(np.asarray(v, np.float64).view(np.uint64))
            return f"__longlong_as_double(0x{bits:016x}LL)"
        f32 = np.float32(v)                         # float16 and float32 fit a float
        if math.isfinite(float(f32)):
            return repr(float(f32)) + "f"
        bits = int(np.asarray(f32, np.float32).view(np.uint32))
        return f"__int_as_float(0x{bits:08x})"
    raise CudaLoweringError(f"no CUDA literal for dtype {dt.name}")


def template_for(eqn) -> str:
    """The expression template of an elementwise equation ("{0}" is operand 0)."""
    prim = eqn.primitive
    t = prim.cuda
    if t is None:
        raise CudaLoweringError(f"primitive '{prim.name}' has no CUDA template; add cuda=... "
                                "to its declaration in primitives/")
    if callable(t) and not isinstance(t, (str, dict)):
        t = t(eqn.params)
    if isinstance(t, dict):
        kind = eqn.invars[0].aval.dtype.kind
        for keys, tmpl in t.items():
            if kind in keys:
                t = tmpl
                break
        else:
            raise CudaLoweringError(f"primitive '{prim.name}' has no CUDA template for dtype "
                                    f"kind {kind!r} (its templates cover {list(t)})")
    return t


def can_fuse(eqn) -> bool:
    """CUDA fusion predicate: fusible, real/bool dtypes, a template exists."""
    if not fusion.fusible(eqn):
        return False
    avals = [a.aval for a in eqn.invars] + [v.aval for v in eqn.outvars]
    if any(a.dtype.kind == "c" or a.dtype.name not in CTYPES for a in avals):
        return False
    if eqn.primitive is broadcast_in_dim_p:
        return True
    try:
        template_for(eqn)
    except CudaLoweringError:
        return False
    return True


# ---------------------------------------------------------------------------
# broadcast index arithmetic, rendered for C and for NumPy from the same terms


def expanded_shape(in_shape, broadcast_dimensions, out_rank):
    shape = [1] * out_rank
    for i, d in enumerate(broadcast_dimensions):
        shape[d] = in_shape[i]
    return tuple(shape)


def bcast_index_terms(out_shape, expanded):
    """[(divisor, modulus or None, stride)] such that the flat index into the smaller
    array is sum(((i // divisor) % modulus) * stride) over the output's flat index i."""
    terms = []
    div = 1
    estride = 1
    for d in range(len(out_shape) - 1, -1, -1):
        if expanded[d] != 1:
            terms.append((div, out_shape[d] if d > 0 else None, estride))
        estride *= expanded[d]
        div *= out_shape[d]
    return terms[::-1]


def bcast_index_c(terms, i="i"):
    parts = []
    for div, mod, stride in terms:
        c = i if div == 1 else f"({i} / {div}LL)"
        if mod is not None:
            c = f"({c} % {mod}LL)"
        parts.append(c if stride == 1 else f"{c} * {stride}LL")
    return " + ".join(parts) or "0"


def row_bcast_index_c(terms, cols):
    """bcast_index_c inside a row body (row `r`, its first flat index `base`, `cols`
    elements a row): a term over the row axes is the same for the whole row, one over the
    column axes reads the column `i - base`, which the compiler sees as affine in the
    element loop (a `%` of the flat index kept the row passes scalar: a LayerNorm's
    weight, broadcast along the rows, made its row kernel slower than NumPy)."""
    parts = []
    for div, mod, stride in terms:
        if div >= cols:                 # a row axis (div is a multiple of cols there)
            c = "r" if div == cols else f"(r / {div // cols}LL)"
            if mod is not None:
                c = f"({c} % {mod}LL)"
        else:
            c = "(i - base)" if div == 1 else f"((i - base) / {div}LL)"
            if mod is not None and div * mod < cols:
                c = f"({c} % {mod}LL)"
        parts.append(c if stride == 1 else f"{c} * {stride}LL")
    return " + ".join(parts) or "0"


def bcast_index_numpy(terms, i):
    """The same index arithmetic on an int64 NumPy array of flat output indices."""
    out = np.zeros_like(i)
    for div, mod, stride in terms:
        c = i // div
        if mod is not None:
            c = c % mod
        out = out + c * stride
    return out


# ---------------------------------------------------------------------------
# rendering a fusion group


class Kernel:
    """A rendered kernel: its name, source, and how to call it."""

    def __init__(self, name, source, inputs, outputs, size, jaxpr=None, rows=None):
        self.name, self.source = name, source
        self.inputs = inputs            # outer atoms, in parameter order
        self.outputs = outputs          # outer vars, in parameter order
        self.size = size
        self.jaxpr = jaxpr              # the group it was rendered from
        self.rows = rows                # a row kernel: its number of rows (a block each)
        # threads a block: a row kernel's fit its rows (at least a warp, at most the cap)
        self.block = THREADS_PER_BLOCK if rows is None else \
            min(THREADS_PER_BLOCK, max(32, 1 << max(0, size // rows - 1).bit_length()))

    def __repr__(self):
        return f"<Kernel {self.name}: {len(self.inputs)} in, {len(self.outputs)} out>"


def _load(ptr, index, dtype):
    if np.dtype(dtype) == np.float16:
        return f"__half2float({ptr}[{index}])"
    return f"{ptr}[{index}]"


def _store(ptr, index, dtype, value):
    if np.dtype(dtype) == np.float16:
        return f"{ptr}[{index}] = __float2half_rn({value});"
    return f"{ptr}[{index}] = {value};"


def eqn_expr(e, args) -> str:
    """The C expression of an elementwise equation over its operands' expressions, in its
    output's compute type; a float16 result is rounded to float16 after the operation."""
    odt = e.outvars[0].aval.dtype
    ct = compute_type(odt)
    if odt == np.float16 and e.primitive is convert_element_type_p and \
            e.invars[0].aval.dtype == np.float64:
        return f"__half2float(__double2half({args[0]}))"     # via float would round twice
    expr = template_for(e).format(*args, out_t=ct)
    if odt == np.float16:
        return f"__half2float(__float2half_rn(({ct})({expr})))"
    return f"({ct})({expr})"


def hoist_literal(a, cache, hoisted, fresh, local_type=compute_type) -> str:
    """The name of a const local holding Literal `a`, declared once in `hoisted`."""
    key = (a.aval.dtype.str, np.asarray(a.val).tobytes())
    if key not in cache:
        cache[key] = fresh("c")
        hoisted.append(f"const {local_type(a.aval.dtype)} {cache[key]} = "
                       f"{literal_c(a.val, a.aval.dtype)};")
    return cache[key]


class GroupCode:
    """A fusion group rendered once, for any wrapper: typed parameters, the hoisted
    constants, and the per-element body (loads, one typed local per equation, stores) of
    the flat output index `i`. bcasts: per broadcast of a non-scalar input, (its line's
    position in body, its bcast_index_terms, line(i): the line loading it at flat index
    `i`), so that a host loop over blocks it is constant on can load it once a block."""

    def __init__(self, name, params, hoisted, body, uses_half, size, jaxpr, bcasts=()):
        self.name, self.params, self.hoisted, self.body = name, params, hoisted, body
        self.uses_half, self.size, self.jaxpr = uses_half, size, jaxpr
        self.bcasts = list(bcasts)


def render_group(jaxpr, name, local_type=compute_type, index=None) -> GroupCode:
    """Render a fusion group's jaxpr (elementwise and broadcast equations of one output
    shape) from the primitives' expression templates: the body of the loop over the flat
    output index, shared by the CUDA kernel and the native CPU function. local_type(dtype):
    the C type of the locals (the host's vectorizer wants bools held as int); index: {input
    position, or ("out", k): the C index of its loads, of output k's stores} when not `i`."""
    shape = tuple(jaxpr.eqns[-1].outvars[0].aval.shape)
    size = math.prod(shape)
    name = identifier(name)
    params, hoisted, body, stores, bcasts = [], [], [], [], []
    local: dict = {}
    n = [0]
    uses_half = False

    def fresh(prefix="v"):
        n[0] += 1
        return f"{prefix}{n[0]}"

    lit_cache: dict = {}

    def operand(a):
        if type(a) is Literal:
            return hoist_literal(a, lit_cache, hoisted, fresh, local_type)
        return local[a]

    for k, v in enumerate(jaxpr.invars):
        dt = v.aval.dtype
        uses_half |= dt == np.float16
        params.append(f"const {ctype(dt)}* __restrict__ in{k}")
        if v.aval.shape == shape:
            nm = fresh()
            body.append(f"const {local_type(dt)} {nm} = "
                        f"{_load(f'in{k}', (index or {}).get(k, 'i'), dt)};")
            local[v] = nm
        elif v.aval.shape == ():
            nm = fresh("s")
            hoisted.append(f"const {local_type(dt)} {nm} = {_load(f'in{k}', '0', dt)};")
            local[v] = nm
        # other shapes are read by broadcast equations, at their own index
    ptr_of = {v: f"in{k}" for k, v in enumerate(jaxpr.invars)}
    for e in jaxpr.eqns:
        ov = e.outvars[0]
        odt = ov.aval.dtype
        uses_half |= odt == np.float16
        nm = fresh()
        ct = local_type(odt)
        if e.primitive is broadcast_in_dim_p:
            x = e.invars[0]
            if x.aval.shape == ():
                body.append(f"const {ct} {nm} = {operand(x)};")
            else:
                exp = expanded_shape(x.aval.shape, e.params["broadcast_dimensions"], len(shape))
                terms = bcast_index_terms(shape, exp)
                note = f"  // broadcast {x.aval.str_short()} -> {ov.aval.str_short()}"

                def line(i, ct=ct, nm=nm, ptr=ptr_of[x], dt=x.aval.dtype, terms=terms,
                         note=note):
                    return f"const {ct} {nm} = {_load(ptr, bcast_index_c(terms, i), dt)};{note}"
                bcasts.append((len(body), terms, line))
                body.append(line("i"))
            local[ov] = nm
            continue
        expr = eqn_expr(e, [operand(a) for a in e.invars])
        body.append(f"const {ct} {nm} = {expr};  // {e.primitive.name}")
        local[ov] = nm
    for k, v in enumerate(jaxpr.outvars):
        dt = v.aval.dtype
        params.append(f"{ctype(dt)}* __restrict__ out{k}")
        stores.append(_store(f"out{k}", (index or {}).get(("out", k), "i"), dt, operand(v)))
    return GroupCode(name, params, hoisted, body + stores, uses_half, size, jaxpr, bcasts)


def render_kernel(jaxpr, name) -> Kernel:
    """A fusion group as one CUDA kernel with a grid-stride loop over the flat output
    index (the CUDA wrapper of `render_group`)."""
    g = render_group(jaxpr, name)
    lines = [f'extern "C" __global__ void {g.name}({", ".join(g.params + ["const long long n"])}) {{']
    lines += ["  " + h for h in g.hoisted]
    lines.append("  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;"
                 " i += (long long)blockDim.x * gridDim.x) {")
    lines += ["    " + b for b in g.body]
    lines += ["  }", "}"]
    head = PRELUDE + ("#include <cuda_fp16.h>\n" if g.uses_half else "")
    return Kernel(g.name, head + "\n".join(lines) + "\n", list(jaxpr.invars),
                  list(jaxpr.outvars), g.size, jaxpr)


# ---------------------------------------------------------------------------
# row groups: reductions over trailing axes with the elementwise work around them, a block
# per row. The body is written over the row index `r`, this thread's index `tid` and the
# number of threads `nthr`, so that it also runs as a host loop (one iteration per row,
# tid = 0, nthr = 1, __shared__ and __syncthreads empty).

REDUCE_OPS = {"reduce_sum": "({0} + {1})", "reduce_max": "ft_max({0}, {1})",
              "reduce_min": "ft_min({0}, {1})"}


def can_fuse_rows(eqn) -> bool:
    """CUDA predicate of row groups: can_fuse, or a reduction over trailing axes or a
    reshape of per-row values, of real dtypes (fusion.row_space)."""
    if can_fuse(eqn):
        return True
    if fusion.row_space(eqn) is None:
        return False
    return all(a.aval.dtype.name in CTYPES and a.aval.dtype.kind != "b"
               for a in list(eqn.invars) + list(eqn.outvars))


def _reduce_init(prim, dtype) -> str:
    """The identity of a reduction: 0, or the bottom (max) / top (min) of the dtype."""
    dt = np.dtype(dtype)
    if prim.name == "reduce_sum":
        return literal_c(0, dt)
    lo, hi = (-np.inf, np.inf) if dt.kind == "f" else (np.iinfo(dt).min, np.iinfo(dt).max)
    return literal_c(hi if prim.name == "reduce_min" else lo, dt)


class RowBody:
    """A row group rendered over (r, tid, nthr): its parameters, the lines before the row
    loop and the lines of one row."""

    def __init__(self, params, hoisted, lines, rows, cols):
        self.params, self.hoisted, self.lines = params, hoisted, lines
        self.rows, self.cols = rows, cols


class RowReduction:
    """One reduction of a row pass: accumulator `acc` of C type `ct` starting at `init`,
    combined by `op` ("{0}", "{1}": two partial values) with `operand` per element; its
    row value goes to the const local `out` (`half`: rounded to float16 first)."""

    def __init__(self, ct, acc, init, op, operand, out, half, prim):
        self.ct, self.acc, self.init, self.op, self.operand = ct, acc, init, op, operand
        self.out, self.half, self.prim = out, half, prim

    def result(self, value) -> str:
        """The line defining `out` from the combined accumulator `value`."""
        if self.half:
            value = f"__half2float(__float2half_rn({value}))"
        return f"const {self.ct} {self.out} = {value};  // {self.prim}"


class RowLoops:
    """How a row body walks one row: the block's threads take strided shares of the
    elements; a reduction then combines their partial values in a shared-memory tree of a
    fixed order (deterministic for a given block size). The host's form is in
    native/rows.py."""

    row_cache_bytes = 0     # per-row buffers of values computed once, read in later passes
    widen_bools = False     # full-shape bool inputs copied into an int row buffer per row
                            # (rows of at most row_cache_bytes as int)

    def widen_pass(self, buf, src):
        """Lines copying row `src` (a bool input's pointer) into int row buffer `buf`."""
        return []

    def keep(self, eqn) -> bool:
        """Whether a value this equation defines is worth a row buffer (row_cache_bytes)."""
        return False

    def elem_pass(self, body):
        """Lines running `body` (element lines over the flat index `i`) on each element."""
        return (["for (long long j = tid; j < cols; j += nthr) {",
                 "  const long long i = base + j;"] + ["  " + b for b in body] + ["}"])

    def row_stores(self, stores):
        """Lines storing the per-row outputs (once a row)."""
        return ["if (tid == 0) {"] + ["  " + st for st in stores] + ["}"]

    def reduce_pass(self, reds, body):
        """Lines running `body` on each element, accumulating each RowReduction's operand,
        then defining each one's `out` for the whole row."""
        lines = [f"{r.ct} {r.acc} = {r.init};" for r in reds]
        lines += self.elem_pass(body + [f"{r.acc} = {r.op.format(r.acc, r.operand)};"
                                        for r in reds])
        for r in reds:
            sh = f"sh_{r.acc}"
            lines += [f"__shared__ {r.ct} {sh}[{THREADS_PER_BLOCK}];",
                      f"{sh}[tid] = {r.acc};", "__syncthreads();",
                      "for (unsigned s = 1; s < nthr; s *= 2) {   // a fixed tree: deterministic",
                      f"  if (tid % (2 * s) == 0 && tid + s < nthr) {sh}[tid] = "
                      f"{r.op.format(f'{sh}[tid]', f'{sh}[tid + s]')};",
                      "  __syncthreads();", "}", r.result(f"{sh}[0]"),
                      "__syncthreads();   // all have read it before the next row writes it"]
        return lines


def row_body(jaxpr, loops=RowLoops(), local_type=compute_type) -> RowBody:
    """Render a row group: per row, one pass over the row's elements per reduction depth
    (`loops` says how a pass walks the row and combines partial values), the per-row values
    after each, and a last pass for the full-shape outputs. Full-shape values are recomputed
    in each pass that reads them, except those `loops.keep` within `loops.row_cache_bytes`:
    a row buffer holds them from the first pass on. local_type(dtype): the C type of the
    locals."""
    full, k = fusion.row_group_space(jaxpr)
    rows, cols = math.prod(full[:k]), math.prod(full[k:])
    params, hoisted = [], []
    name: dict = {}             # var -> C name (rows, scalars, literals, aliases)
    elem: dict = {}             # full-shape var -> (C name, definition line or None)
    deps: dict = {}             # full-shape var -> full-shape vars its definition reads
    depth: dict = {}            # var -> passes over the row before it is known
    order: dict = {}            # full-shape var -> position (definitions in program order)
    row_lines: dict = {}        # depth -> lines defining per-row values
    reductions: dict = {}       # depth -> [(eqn, accumulator name)]
    n = [0]

    def fresh(prefix):
        n[0] += 1
        return f"{prefix}{n[0]}"

    lit_cache: dict = {}

    def ref(a):
        if type(a) is Literal:
            return hoist_literal(a, lit_cache, hoisted, fresh, local_type)
        return elem[a][0] if a in elem else name[a]

    def dep(a):
        return depth.get(a, 0) if type(a) is Var else 0

    keepable: set = set()       # full-shape vars whose equation loops.keep

    def define_elem(v, ct, expr, reads, pos):
        nm = fresh("e")
        elem[v] = (nm, f"const {ct} {nm} = {expr};")
        deps[v] = [a for a in reads if type(a) is Var and a in elem]
        order[v] = pos

    ptr_of = {}
    widened = []                # (int row buffer, input pointer) of full-shape bool inputs
    for i, v in enumerate(jaxpr.invars):
        dt, ct = v.aval.dtype, local_type(v.aval.dtype)
        params.append(f"const {ctype(dt)}* __restrict__ in{i}")
        ptr_of[v] = f"in{i}"
        if v.aval.shape == full and loops.widen_bools and dt == np.bool_ \
                and 4 * cols <= loops.row_cache_bytes:      # (on the stack)
            widened.append((fresh("wb"), f"in{i}"))
            define_elem(v, ct, f"{widened[-1][0]}[i - base]", [], i - len(jaxpr.invars))
        elif v.aval.shape == full:      # (inputs ordered before the equations, by position:
            # the text, and so the native cache's key, must not follow set order)
            define_elem(v, ct, _load(f"in{i}", "i", dt), [], i - len(jaxpr.invars))
        elif v.aval.shape == ():
            name[v] = fresh("s")
            hoisted.append(f"const {ct} {name[v]} = {_load(f'in{i}', '0', dt)};")
        elif fusion.rowlike(v.aval.shape, (full, k)):
            name[v] = fresh("r")
            row_lines.setdefault(0, []).append(f"const {ct} {name[v]} = "
                                               f"{_load(f'in{i}', 'r', dt)};")
        # other shapes: read by broadcasts along other axes, at their own index
    for pos, e in enumerate(jaxpr.eqns):
        ov = e.outvars[0]
        ct = local_type(ov.aval.dtype)
        d = max((dep(a) for a in e.invars), default=0)
        if e.primitive in fusion.ROW_REDUCTIONS:
            acc = fresh("a")
            reductions.setdefault(d + 1, []).append((e, acc))
            name[ov], depth[ov] = fresh("r"), d + 1
        elif e.primitive in fusion.ROW_ALIASES or (
                e.primitive is broadcast_in_dim_p and
                (e.invars[0].aval.shape == () or fusion.row_space(e)[1] is not None)):
            x = e.invars[0]                 # the same per-row value (or scalar)
            name[ov], depth[ov] = ref(x), dep(x)
        elif e.primitive is broadcast_in_dim_p:
            x = e.invars[0]
            if x not in ptr_of:
                raise CudaLoweringError(f"row group: broadcast {x.aval.str_short()} -> "
                                        f"{ov.aval.str_short()} of a value computed in the "
                                        "group (only group inputs are broadcast this way)")
            exp = expanded_shape(x.aval.shape, e.params["broadcast_dimensions"], len(full))
            terms = bcast_index_terms(full, exp)
            idx = row_bcast_index_c(terms, cols)
            if all(div >= cols for div, _, _ in terms):
                # one value a row (a batch norm's per-channel scale over NCHW rows): loaded
                # once a row, as the row's own values are; read in the element loop, it
                # kept GCC (12) from vectorizing a pass with a select under OpenMP (the
                # batch norm's backward passes ran scalar, 3x slower)
                name[ov] = fresh("r")
                row_lines.setdefault(0, []).append(
                    f"const {ct} {name[ov]} = {_load(ptr_of[x], idx, x.aval.dtype)};")
            else:
                define_elem(ov, ct, _load(ptr_of[x], idx, x.aval.dtype), [], pos)
        elif ov.aval.shape == full:
            define_elem(ov, ct, eqn_expr(e, [ref(a) for a in e.invars]), e.invars, pos)
            depth[ov] = d
            if loops.keep(e):
                keepable.add(ov)
        else:
            name[ov], depth[ov] = fresh("r"), d
            row_lines.setdefault(d, []).append(
                f"const {ct} {name[ov]} = {eqn_expr(e, [ref(a) for a in e.invars])};"
                f"  // {e.primitive.name}")

    def closure(targets, stop=()):
        """The full-shape values that targets read (not past those in stop)."""
        need, stack = set(), [t for t in targets if type(t) is Var and t in elem]
        while stack:
            v = stack.pop()
            if v not in need:
                need.add(v)
                if v not in stop:
                    stack.extend(deps[v])
        return need

    elem_outs = [(i, v) for i, v in enumerate(jaxpr.outvars) if v.aval.shape == full]
    pass_targets = [[e.invars[0] for e, _ in reductions[d]] for d in sorted(reductions)]
    pass_targets.append([v for _, v in elem_outs])
    kept: dict = {}             # var -> its row buffer
    stored: set = set()         # kept vars whose buffer a pass has filled
    budget = loops.row_cache_bytes
    needs = [closure(t) for t in pass_targets]
    for p, need in enumerate(needs[:-1]):
        later = set().union(*needs[p + 1:])
        for v in sorted(need & later & keepable, key=order.get):
            nbytes = cols * np.dtype(v.aval.dtype).itemsize
            if v not in kept and nbytes <= budget:
                kept[v] = fresh("rb")
                budget -= nbytes

    def needed(targets):
        """The lines defining the full-shape values that targets read, in order: a kept
        value is read from its row buffer once a pass has filled it."""
        out = []
        filled = set(stored)
        for v in sorted(closure(targets, filled), key=order.get):
            nm, line = elem[v]
            if v in filled:
                out.append(f"const {local_type(v.aval.dtype)} {nm} = {kept[v]}[i - base];")
                continue
            out.append(line)
            if v in kept:
                out.append(f"{kept[v]}[i - base] = {nm};")
                stored.add(v)
        return out

    lines = [f"const long long base = r * {cols}LL;"] + row_lines.get(0, [])
    for buf, src in widened:
        lines += loops.widen_pass(buf, src)
    lines += [f"alignas(64) {local_type(v.aval.dtype)} {b}[{cols}];  // row buffer"
              for v, b in kept.items()]
    for d in sorted(reductions):
        group = reductions[d]
        reds = []
        for e, acc in group:
            ov = e.outvars[0]
            reds.append(RowReduction(
                compute_type(ov.aval.dtype), acc, _reduce_init(e.primitive, ov.aval.dtype),
                REDUCE_OPS[e.primitive.name], ref(e.invars[0]), name[ov],
                ov.aval.dtype == np.float16, e.primitive.name))
        lines += loops.reduce_pass(reds, needed([e.invars[0] for e, _ in group]))
        lines += row_lines.get(d, [])
    stores = []
    for i, v in enumerate(jaxpr.outvars):
        dt = v.aval.dtype
        params.append(f"{ctype(dt)}* __restrict__ out{i}")
    if elem_outs:
        lines += loops.elem_pass(needed([v for _, v in elem_outs])
                                 + [_store(f"out{i}", "i", v.aval.dtype, ref(v))
                                    for i, v in elem_outs])
    for i, v in enumerate(jaxpr.outvars):
        if v.aval.shape != full:
            stores.append(_store(f"out{i}", "r", v.aval.dtype, ref(v)))
    if stores:
        lines += loops.row_stores(stores)
    params.append("const long long rows")
    hoisted.append(f"const long long cols = {cols}LL;")
    return RowBody(params, hoisted, lines, rows, cols)


def render_row_kernel(jaxpr, name) -> Kernel:
    """A row group as one CUDA kernel: a block per row (grid-stride over the rows), launched
    with any number of threads up to THREADS_PER_BLOCK."""
    name = identifier(name)
    b = row_body(jaxpr)
    lines = [f'extern "C" __global__ void {name}({", ".join(b.params)}) {{']
    lines += ["  " + h for h in b.hoisted]
    lines.append("  const unsigned tid = threadIdx.x, nthr = blockDim.x;")
    lines.append("  for (long long r = blockIdx.x; r < rows; r += gridDim.x) {")
    lines += ["    " + x for x in b.lines]
    lines += ["  }", "}"]
    uses_half = any(v.aval.dtype == np.float16 for e in jaxpr.eqns
                    for v in list(e.invars) + list(e.outvars))
    head = PRELUDE + ("#include <cuda_fp16.h>\n" if uses_half else "")
    return Kernel(name, head + "\n".join(lines) + "\n", list(jaxpr.invars),
                  list(jaxpr.outvars), b.rows * b.cols, jaxpr, rows=b.rows)


def render_group_kernel(jaxpr, name) -> Kernel:
    """A fusion group's CUDA kernel: a row kernel when it holds reductions (or broadcasts
    of per-row values), else the flat grid-stride kernel."""
    if fusion.row_group_space(jaxpr) is not None:
        return render_row_kernel(jaxpr, name)
    return render_kernel(jaxpr, name)


def single_eqn_jaxpr(eqn):
    """A one-equation fusion group (for an elementwise equation outside any group)."""
    ins, seen = [], set()
    for a in eqn.invars:
        if type(a) is Var and a not in seen:
            seen.add(a)
            ins.append(a)
    return Jaxpr([], ins, [eqn], list(eqn.outvars))


# ---------------------------------------------------------------------------
# the program: generated Python driving the kernels and CuPy

_kernel_cache: dict = {}
_kernel_lock = threading.Lock()


def get_kernel(source, name):
    """The compiled cupy.RawKernel for this source (cached by source)."""
    cp = cupy_module()
    with _kernel_lock:
        k = _kernel_cache.get(source)
        if k is None:
            k = _kernel_cache[source] = cp.RawKernel(source, name, options=NVRTC_OPTIONS)
        return k


class _Program:
    def __init__(self, closed, name):
        self.closed, self.name = closed, name
        self.globals: dict = {}
        self.kernels: dict = {}         # name -> Kernel
        self.lines: list = []
        self.names: dict = {}
        self.n = 0

    def g(self, obj, hint):
        self.n += 1
        nm = f"_{hint}{self.n}"
        self.globals[nm] = obj
        return nm

    def fresh(self):
        self.n += 1
        return f"v{self.n}"

    def atom(self, a):
        if type(a) is Literal:
            return self.g(np.asarray(a.val, a.aval.dtype)[()], f"c_{short_dtype(a.aval.dtype)}")
        return self.names[a]

    def run(self):
        fusedj = fusion.fuse(self.closed, can_fuse=can_fuse_rows, rows=True)
        self.fusedj = fusedj
        j = fusedj.jaxpr
        args = [f"a{i}" for i in range(len(j.invars))]
        body = []
        for i, v in enumerate(j.invars):
            self.names[v] = f"a{i}"
            dt = self.g(np.dtype(v.aval.dtype), short_dtype(v.aval.dtype))
            body.append(f"a{i} = _to_device(a{i}, {dt})")
        for i, v in enumerate(j.constvars):
            self.names[v] = f"k{i}"
        for e in j.eqns:
            if e.primitive is fusion.fused_p or can_fuse(e):
                inner = e.params["jaxpr"] if e.primitive is fusion.fused_p else single_eqn_jaxpr(e)
                kname = e.params["name"] if e.primitive is fusion.fused_p else \
                    f"ew_{e.primitive.name}"
                kern = render_group_kernel(inner, kname)
                base = kern.name
                k = 1
                while kern.name in self.kernels and self.kernels[kern.name].source != kern.source:
                    k += 1
                    kern.name = f"{base}_{k}"
                    kern.source = kern.source.replace(f"void {base}(", f"void {kern.name}(")
                self.kernels[kern.name] = kern
                outs = []
                for o in e.outvars:
                    nm = self.names[o] = self.fresh()
                    dt = self.g(np.dtype(o.aval.dtype), short_dtype(o.aval.dtype))
                    body.append(f"{nm} = _cp_empty({tuple(o.aval.shape)!r}, {dt})")
                    outs.append(nm)
                kg = self.g(kern, f"K_{kern.name}")
                ins = [self.names[a] for a in kern.inputs]
                if kern.rows is None:
                    grid = max(1, min(MAX_BLOCKS, -(-kern.size // THREADS_PER_BLOCK)))
                else:
                    grid = max(1, min(MAX_BLOCKS, kern.rows))
                nsz = self.g(np.int64(kern.size if kern.rows is None else kern.rows), "n")
                body.append(f"_launch({kg}, {grid}, ({', '.join(ins + outs + [nsz])},))"
                            f"  # {kern.name}")
                continue
            fn = self.g(functools.partial(e.primitive.impl, _CUPY, **e.params),
                        f"p_{e.primitive.name}")
            ins = ", ".join(self.atom(a) for a in e.invars)
            outs = [self.fresh() for _ in e.outvars]
            for o, nm in zip(e.outvars, outs):
                self.names[o] = nm
            if e.primitive.multiple_results:
                body.append(f"{', '.join(outs)}, = {fn}({ins})")
            else:
                body.append(f"{outs[0]} = {fn}({ins})")
        rets = []
        for a in j.outvars:
            if type(a) is Literal:
                rets.append(f"_cp_array({self.atom(a)})")
            elif a in j.invars or a in j.constvars:
                rets.append(f"_cp_copy({self.names[a]})")
            else:
                rets.append(self.names[a])
        body.append(f"return [{', '.join(rets)}]")
        fname = identifier(self.name) or "jitted"
        self.fname = fname
        consts = [f"k{i}=_K{i}" for i in range(len(j.constvars))]
        self.source = "\n".join([f"def {fname}({', '.join(args + consts)}):"]
                                + ["    " + b for b in body])
        return self

    def build(self):
        cp = cupy_module()
        _CUPY.set(cupy_array_module(cp))
        g = dict(self.globals)
        g.update(_to_device=functools.partial(_to_device, cp), _cp_empty=cp.empty,
                 _cp_array=cp.array, _cp_copy=cp.copy, _launch=_launch)
        for k, v in list(g.items()):
            if isinstance(v, Kernel):
                g[k] = _Launchable(v)
        for i, c in enumerate(self.fusedj.consts):
            g[f"_K{i}"] = cp.asarray(c)
        g["__name__"] = JIT_MODULE
        exec(compile(self.source, f"<functrans.jit cuda {self.name}>", "exec"), g)
        return CudaExecutable(g[self.fname], len(self.fusedj.jaxpr.invars), self.name)


class _LazyCupy:
    """Stands for the cupy array module in impl partials until the program is built
    (source generation must not import CuPy)."""

    def __init__(self):
        self.mod = None

    def set(self, mod):
        self.mod = mod

    def __getattr__(self, name):
        if self.mod is None:
            self.mod = cupy_array_module(cupy_module())
        return getattr(self.mod, name)


_CUPY = _LazyCupy()


class _Launchable:
    def __init__(self, kern):
        self.kern = kern
        self.fn = None

    def __call__(self, grid, args):
        if self.fn is None:
            self.fn = get_kernel(self.kern.source, self.kern.name)
        self.fn((grid,), (self.kern.block,), args)


def _launch(k, grid, args):
    k(grid, args)


def _to_device(cp, x, dtype):
    if type(x) is cp.ndarray:
        return x if x.flags.c_contiguous else cp.ascontiguousarray(x)
    return cp.asarray(np.asarray(x, dtype))


class CudaExecutable:
    """exe(*flat_args) -> list of CuPy arrays."""

    def __init__(self, fn, n_in, name):
        self.fn, self.n_in, self.name = fn, n_in, name

    def __call__(self, *args):
        if len(args) != self.n_in:
            raise TypeError(f"{self.name} takes {self.n_in} flat arguments, got {len(args)}")
        return self.fn(*args)


def lower(closed: ClosedJaxpr, donated=(), name="jitted"):
    """Lower an optimized ClosedJaxpr to CUDA kernels plus a CuPy driver: a Lowered.
    Needs no GPU; `compile()` does."""
    prog = _Program(closed, name).run()
    return Lowered(prog.fusedj, prog.source, prog.build, "cuda", name,
                   kernels={k: v.source for k, v in prog.kernels.items()},
                   info={"kernels": len(prog.kernels)})
