"""Row groups as host C++ functions: the body `cuda.row_body` renders from the primitives'
expression templates (the CUDA row kernel's lines), walked by one thread a row, OpenMP
over blocks of rows, each pass over a row's elements a loop the compiler vectorizes.

A reduction accumulates into LANES partial values (element j of the row into lane
j % LANES), combined at the end of the row by a fixed tree: the compiler vectorizes this
without reassociating anything (no fast-math), and the result is deterministic. The
summation order differs from NumPy's pairwise sum, so sums agree within the usual
rounding of a float sum (a few ulp times log of the row length), not bit for bit.
"""
from __future__ import annotations

import re

from .. import cuda, identifier
from ... import fusion
from ...core import ClosedJaxpr, Jaxpr, JaxprEqn, ShapedArray, Var
from . import kernels

LANES = 16          # partial values of a reduction: one AVX-512 register of float32
# calls cheaper to make again than to store and load (the template's other calls are kept)
RECOMPUTED_CALLS = {"fabs", "abs", "ft_max", "ft_min", "floor", "ceil", "round", "rint",
                    "isfinite"}
_CALL = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\(")
ROW_CACHE_BYTES = 32 * 1024     # a thread's row buffers (about half an L1 cache)


class HostRowLoops(cuda.RowLoops):
    """cuda.RowLoops on one host thread a row (tid = 0, nthr = 1). A full-shape bool
    input is read from an int copy of its row: GCC (12) vectorizes no loop that loads
    bytes and computes floats (a causal softmax's mask: its backward ran scalar)."""

    row_cache_bytes = ROW_CACHE_BYTES
    widen_bools = True

    def widen_pass(self, buf, src):
        # read as unsigned char: the conversion of a bool does not vectorize
        return [f"alignas(64) int {buf}[cols];  // the row of a bool input, as int",
                "#pragma omp simd", f"for (long long j = 0; j < cols; ++j) {{ {buf}[j] = "
                f"((const unsigned char*){src})[base + j]; }}"]

    def keep(self, eqn):
        """Values of a function call (exp, log, sqrt, ...) are kept, not recomputed."""
        return any(fn not in RECOMPUTED_CALLS for fn in _CALL.findall(cuda.template_for(eqn)))

    def elem_pass(self, body):
        return (["#pragma omp simd", "for (long long j = 0; j < cols; ++j) {",
                 "  const long long i = base + j;"] + ["  " + b for b in body] + ["}"])

    def row_stores(self, stores):
        return stores

    def reduce_pass(self, reds, body):
        j0 = f"j_{reds[0].acc}"
        accumulate = [f"{r.acc}[l] = {r.op.format(f'{r.acc}[l]', r.operand)};" for r in reds]
        lines = [f"{r.ct} {r.acc}[{LANES}];" for r in reds]
        lines.append(f"for (int l = 0; l < {LANES}; ++l) {{ "
                     + " ".join(f"{r.acc}[l] = {r.init};" for r in reds) + " }")
        lines += [f"long long {j0} = 0;",
                  f"for (; {j0} + {LANES} <= cols; {j0} += {LANES}) {{",
                  "  #pragma omp simd",
                  f"  for (int l = 0; l < {LANES}; ++l) {{",
                  f"    const long long i = base + {j0} + l;"]
        lines += ["    " + b for b in body + accumulate] + ["  }", "}"]
        lines += [f"for (int l = 0; l < cols - {j0}; ++l) {{   // the row's last elements",
                  f"  const long long i = base + {j0} + l;"]
        lines += ["  " + b for b in body + accumulate] + ["}"]
        lines += [f"for (int w = {LANES // 2}; w > 0; w /= 2) {{   // a fixed tree: deterministic",
                  "  for (int l = 0; l < w; ++l) { "
                  + " ".join(f"{r.acc}[l] = {r.op.format(f'{r.acc}[l]', f'{r.acc}[l + w]')};"
                             for r in reds) + " }", "}"]
        return lines + [r.result(f"{r.acc}[0]") for r in reds]


HOST_LOOPS = HostRowLoops()


class RowFunction:
    """A row group rendered for the host: name, size (elements), rows, and its C++ text;
    a body with few transcendental calls inlines them (kernels.inline_calls: a
    cross-entropy's forward 0.32 -> 0.27 ms on 1024 rows of 256, one thread)."""

    def __init__(self, jaxpr, name):
        self.name = identifier(name)
        b = cuda.row_body(jaxpr, HOST_LOOPS, kernels.local_type)
        self.rows, self.cols, self.size = b.rows, b.cols, b.rows * b.cols
        lines = [f"static void {self.name}_body({', '.join(b.params + ['const int nt'])}) {{"]
        lines += ["  " + h for h in b.hoisted]
        lines.append("  #pragma omp parallel for num_threads(nt) schedule(static)")
        lines.append("  for (long long r = 0; r < rows; ++r) {")
        lines += ["    " + x for x in kernels.inline_calls(b.lines)]
        lines += ["  }", "}"]
        self.body = "\n".join(lines)
        self.entry = kernels.entry_point(self.name, b.params[:-1])

    def function(self):
        """(the C++ function, its C entry point), as kernels.render_function."""
        return self.body, self.entry


def can_fuse(eqn) -> bool:
    """A reduction over trailing axes or a reshape of per-row values, of a dtype the host
    renders (integer or float; cuda.can_fuse_rows's check)."""
    return fusion.row_space(eqn) is not None and cuda.can_fuse_rows(eqn)


def row_function(jaxpr, name):
    """(RowFunction, None) for a row group the host renders, else (None, why not)."""
    why = unsupported(jaxpr)
    if why is not None:
        return None, why
    try:
        return RowFunction(jaxpr, name), None
    except cuda.CudaLoweringError as e:
        return None, str(e)


def unsupported(jaxpr) -> str | None:
    """Why a row group cannot become a native function (None: it can)."""
    elementwise = [e for e in jaxpr.eqns if e.primitive not in fusion.ROW_REDUCTIONS
                   and e.primitive not in fusion.ROW_ALIASES]
    for e in jaxpr.eqns:
        for a in list(e.invars) + list(e.outvars):
            if e.primitive in fusion.ROW_REDUCTIONS and a.aval.dtype.kind not in "iuf":
                return f"{e.primitive.name} of {a.aval.dtype.name} not supported natively"
    return kernels.unsupported(Jaxpr([], jaxpr.invars, elementwise, jaxpr.outvars))


def split_total_reductions(closed, min_size=0):
    """A sum (max, min) of a computed value of rank >= 2 (and min_size elements) over its
    trailing axes and some leading ones (every axis: a total; (0, 2, 3) of an NCHW value: a
    batch norm's per-channel sum) as one over the trailing axes, which a row group fuses,
    then one over the leading axes of the per-row values: the value (the product in
    sum(softmax(x) * w), in a batch norm's sum(dy * xhat)) is then never written out. The
    sum's order changes, within its rounding."""
    j = closed.jaxpr
    fused = {v for e in j.eqns if fusion.fusible(e) for v in e.outvars}
    eqns = []
    for e in j.eqns:
        x = e.invars[0]
        k = _row_split(e)
        if k is None or x not in fused or x.aval.size < min_size:
            eqns.append(e)
            continue
        out = e.outvars[0].aval
        per_row = Var(ShapedArray(x.aval.shape[:k], out.dtype, out.weak_type))
        eqns.append(JaxprEqn(e.primitive, [x], {"axes": tuple(range(k, x.aval.ndim))},
                             [per_row]))
        eqns.append(JaxprEqn(e.primitive, [per_row],
                             {"axes": tuple(a for a in e.params["axes"] if a < k)},
                             list(e.outvars)))
    if len(eqns) == len(j.eqns):
        return closed
    return ClosedJaxpr(Jaxpr(j.constvars, j.invars, eqns, j.outvars), closed.consts)


def _row_split(e):
    """k where a reduction over axes k.. (the rows' trailing axes) then over the remaining
    leading ones computes e, a reduction over the last axis and some leading ones of a value
    of rank >= 2 and more than one row (a total one splits at k = 1); else None."""
    if e.primitive not in fusion.ROW_REDUCTIONS or len(e.params) != 1:
        return None
    shape = e.invars[0].aval.shape
    axes = set(e.params["axes"])
    if len(shape) < 2 or shape[0] <= 1 or len(shape) - 1 not in axes:
        return None
    k = len(shape) - 1
    while k - 1 in axes:
        k -= 1
    k = max(k, 1)
    if not axes - set(range(k, len(shape))):
        return None         # a row reduction already, or none of the leading axes reduced
    return k


def has_row_reductions(closed, min_size=0) -> bool:
    """Whether a program holds a reduction a row group may take (over trailing axes, or over
    the trailing axes and leading ones, split) of at least min_size elements."""
    return any(e.primitive in fusion.ROW_REDUCTIONS and e.invars[0].aval.size >= min_size
               and (fusion.row_space(e) is not None or _row_split(e) is not None)
               for e in closed.jaxpr.eqns)
