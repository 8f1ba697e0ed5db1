"""`defprim` and the helpers that keep each primitive's declaration to a few lines.

Rule conventions (read by the transformations in functrans/):
  jvp(primals, tangents, **params) -> (primal_out, tangent_out); tangents may be Zero.
  transpose(ct, *args, **params) -> one cotangent per arg (None for non-linear args);
      linear args arrive as UndefinedPrimal(aval).
  batch(args, dims, **params) -> (out, out_dim); dims[i] is an int or None (unbatched).
  cuda: an expression template for elementwise primitives, "{0}" being the first operand.
  cpu: how the CPU backend writes the result into a given buffer: a NumPy ufunc name
      (called with out=), or emitter(eqn) -> None (the backend calls impl) | a ufunc
      name | (emit(ctx, ins, out) -> source lines, inplace(in_index) -> bool); ctx.g(obj,
      hint) names a global, ctx.scalar(value, dtype) a NumPy scalar, ctx.dtype(dt) a dtype.
  fresh: impl always returns a new array (never a view of an operand).
  simplify(eqn, ins, s) -> None | an atom replacing the output | equation(s): algebraic
      identities, tried by passes.simplify before broadcasts of scalars are folded into
      elementwise operands; simplify_late, after (on those operands); s.out is the output
      aval, s.ok(a) whether a may replace it, s.src(a) the equation defining a, s.scalar(a)
      the value of a rank-0 known atom, s.uses the read counts.
  commutative: f(x, y) == f(y, x) (common-subexpression elimination orders operands).
  blas: impl calls BLAS or LAPACK (matrix products, factorizations): the CPU backend
      counts that library's threads in a program that binds it (cpu.parallel_threads).
"""
from __future__ import annotations

import numpy as np

from functrans.core import (DTypeError, FunctransError, Primitive, ShapedArray, ShapeError,
                            UndefinedPrimal, Zero, get_aval)

REGISTRY: dict[str, Primitive] = {}
DECLARED: dict[str, dict] = {}   # name -> the primitive's attributes as defprim left them
_SHAPE_CACHE_SIZE = 2048      # memoized shape-rule results per primitive

FLOAT = "fc"          # inexact dtypes: float and complex
REAL = "f"
NUMERIC = "iufc"
INTEGER = "iu"
NONCOMPLEX = "iuf"    # numeric dtypes but complex: primitives with no complex meaning
BOOL_INT = "biu"
ANY = "biufc"
_KIND_NAMES = {"f": "floating", "c": "complex", "i": "signed integer", "u": "unsigned integer",
               "b": "boolean"}


class self_rule:
    """A rule that binds the primitive it is declared for: defprim passes factory(p)."""

    __slots__ = ("factory",)

    def __init__(self, factory):
        self.factory = factory


def _resolve(rule, p):
    return rule.factory(p) if type(rule) is self_rule else rule


class EagerKernels:
    """Compiled kernels for the eager CPU calls of the unary primitives declared
    `native_eager=True` (NumPy has no fast loop for them). The native backend installs
    `run(prim, x) -> result or None` (backends/cpu.py, on import); until then, and whenever
    it answers None (no compiler, a failed build, cpu_backend="numpy", a small or
    non-float array), the primitive's NumPy implementation runs."""

    run = None
    min_size = 1024         # smaller arrays: NumPy (a kernel call's overhead, ~1 us, and no
                            # compile for a program that only ever sees small arrays)


EAGER_KERNELS = EagerKernels()


def _native_eager(prim_name, numpy_impl):
    """The implementation of a native_eager primitive: the installed kernel for NumPy
    float arrays of EagerKernels.min_size elements or more, else numpy_impl."""
    def impl(xp, x, **params):
        if xp is np and type(x) is np.ndarray and x.size >= EAGER_KERNELS.min_size \
                and EAGER_KERNELS.run is not None and not params:
            out = EAGER_KERNELS.run(REGISTRY[prim_name], x)
            if out is not None:
                return out
        return numpy_impl(xp, x, **params)
    impl.numpy = numpy_impl
    impl.__name__, impl.__doc__ = numpy_impl.__name__, numpy_impl.__doc__
    return impl


def defprim(name, impl, shape, *, jvp=None, jvp_out=None, linear=False, transpose=None,
            batch=None, cuda=None, cpu=None, fresh=False, simplify=None, simplify_late=None,
            commutative=False, differentiable=True, multiple_results=False,
            elementwise=False, memo=True, primitive_class=Primitive, native_eager=False,
            blas=False, **extra):
    """Declare a primitive with all its rules in one call and register it; nothing is
    added to it afterwards (a registry test checks against DECLARED).

    jvp: a full rule, or a tuple of per-argument functions f(t, *primals, **params)
    jvp_out: per-argument functions f(t, ans, *primals, **params) that reuse the output
    linear: the primitive is linear in all its array arguments (its JVP applies itself)
    differentiable=False: zero tangents (comparisons, integer ops, floor, ...)
    jvp, batch: self_rule(factory) for a rule that binds this primitive itself
    cpu, fresh, simplify, simplify_late, commutative: see the module docstring
    memo=False: the shape rule is not memoized (for primitives whose params hold programs
        and whose rule just reads them: a cache would only keep the programs alive)
    primitive_class: a Primitive subclass whose bind does more (the collectives')
    native_eager: a unary elementwise primitive that NumPy computes slowly (erf: a
        polynomial over each branch, ~30 passes): its eager calls on large float arrays
        run the native kernel of its `cuda=` template when one is installed
        (EagerKernels); `impl.numpy` is the NumPy implementation
    """
    cache: dict = {}
    if native_eager:
        impl = _native_eager(name, impl)

    def abstract_eval(*avals, **params):
        # shape rules are pure functions of avals and params: successful results are
        # memoized (they run on every eager op; params that are not hashable skip this)
        key = out = None
        if memo:
            key = (avals, tuple(params.items())) if params else avals
            try:
                out = cache.get(key)
            except TypeError:
                key = None
        if out is not None:
            return list(out) if multiple_results else out
        try:
            out = shape(*avals, **params)
        except FunctransError as e:
            msg = str(e)
            if not msg.startswith(name):
                msg = f"{name}: {msg}"
            raise type(e)(msg) from None
        if key is not None:
            if len(cache) >= _SHAPE_CACHE_SIZE:
                cache.clear()
            cache[key] = tuple(out) if multiple_results else out
        return list(out) if multiple_results else out

    p = primitive_class(name, impl=impl, abstract_eval=abstract_eval, multiple_results=multiple_results,
                  transpose=transpose, batch=batch, cuda=cuda, differentiable=differentiable,
                  elementwise=elementwise, **extra)
    p.cpu, p.fresh, p.commutative, p.blas = cpu, fresh, commutative, blas
    p.simplify, p.simplify_late = simplify, simplify_late
    if not differentiable:
        p.jvp = _zero_jvp(p)
    elif linear:
        p.jvp = _linear_jvp(p)
    elif jvp_out is not None:
        p.jvp = _per_arg_jvp(p, jvp_out, with_out=True)
    elif isinstance(jvp, tuple):
        p.jvp = _per_arg_jvp(p, jvp, with_out=False)
    else:
        p.jvp = _resolve(jvp, p)
    p.batch = _resolve(batch, p)
    if batch is None and elementwise:
        p.batch = _elementwise_batch(p)
    REGISTRY[name] = p
    DECLARED[name] = dict(vars(p))
    return p


def keep_operand(eqn, ins, s):
    """A simplify rule: the operand itself when the output has its shape and dtype."""
    return ins[0] if s.ok(ins[0]) else None


# ---------------------------------------------------------------------------
# shape and dtype rules

def _check_kinds(name_or_pos, aval, kinds):
    if aval.dtype.kind not in kinds:
        want = " or ".join(sorted({_KIND_NAMES[k] for k in kinds}))
        raise DTypeError(f"{name_or_pos} must have a {want} dtype, got {aval.str_short()}")


def real_dtype(dtype):
    """The real dtype of a complex dtype's parts (complex64 -> float32); others unchanged."""
    dtype = np.dtype(dtype)
    return np.dtype(dtype.char.lower()) if dtype.kind == "c" else dtype


def complex_dtype(dtype):
    """The complex dtype whose parts have this real dtype (float32 -> complex64)."""
    return np.result_type(dtype, np.complex64)


def unary(kinds=FLOAT, out_dtype=None, real_out=False):
    """Shape rule of an elementwise unary primitive; real_out: a complex operand gives the
    real dtype of its parts (abs, real, imag)."""
    def rule(x, **params):
        _check_kinds("operand", x, kinds)
        if out_dtype is not None:
            return ShapedArray(x.shape, out_dtype)
        if real_out and x.dtype.kind == "c":
            return ShapedArray(x.shape, real_dtype(x.dtype), x.weak_type)
        return x
    return rule


def naryop(kinds=NUMERIC, out_dtype=None, nargs=2):
    """Shape rule of an elementwise n-ary primitive: equal shapes and dtypes, or rank 0."""
    def rule(*avals, **params):
        if len(avals) != nargs:
            raise ShapeError(f"takes {nargs} operands, got {len(avals)}")
        for i, a in enumerate(avals):
            _check_kinds(f"operand {i}", a, kinds)
        dt = avals[0].dtype
        if any(a.dtype != dt for a in avals):
            raise DTypeError(
                "operands must have the same dtype, got "
                f"{', '.join(a.str_short() for a in avals)}; convert one with "
                "convert_element_type (functrans.numpy functions promote automatically)")
        shapes = {a.shape for a in avals if a.ndim}
        if len(shapes) > 1:
            raise ShapeError(
                "operands must have equal shapes (or rank 0), got "
                f"{', '.join(a.str_short() for a in avals)}; broadcast explicitly with "
                "broadcast_in_dim, or use functrans.numpy, which broadcasts as NumPy does")
        shape = shapes.pop() if shapes else ()
        weak = all(a.weak_type for a in avals)
        return ShapedArray(shape, dt if out_dtype is None else out_dtype,
                           weak and out_dtype is None)
    return rule




# ---------------------------------------------------------------------------
# JVP helpers

def bind(name, *args, **params):
    """Bind a primitive declared in a module built on this one (elementwise, shape,
    reductions): the helpers below run after every declaration registered, so they look
    the primitive up instead of importing its module (which imports this one)."""
    return REGISTRY[name].bind(*args, **params)


def _add_tangents(a, b):
    return bind("add", a, b)


def aval_of(x):
    return x.aval if isinstance(x, (Zero, UndefinedPrimal)) else get_aval(x)


def tangent_aval(aval):
    return aval.strip_weak()


def _zero_of(p, ans):
    if p.multiple_results:
        return [Zero(tangent_aval(aval_of(a))) for a in ans]
    return Zero(tangent_aval(aval_of(ans)))


def _zero_jvp(p):
    def rule(primals, tangents, **params):
        ans = p.bind(*primals, **params)
        return ans, _zero_of(p, ans)
    return rule


def _linear_jvp(p):
    def rule(primals, tangents, **params):
        ans = p.bind(*primals, **params)
        if all(type(t) is Zero for t in tangents):
            return ans, _zero_of(p, ans)
        ts = [instantiate(t) for t in tangents]
        return ans, p.bind(*ts, **params)
    return rule


def _per_arg_jvp(p, fns, with_out):
    def rule(primals, tangents, **params):
        ans = p.bind(*primals, **params)
        out_t = None
        for fn, t in zip(fns, tangents):
            if fn is None or type(t) is Zero:
                continue
            c = fn(t, ans, *primals, **params) if with_out else fn(t, *primals, **params)
            out_t = c if out_t is None else _add_tangents(out_t, c)
        if out_t is None:
            return ans, _zero_of(p, ans)
        shape = aval_of(ans).shape
        if aval_of(out_t).shape != shape:   # a rank-0 operand's tangent, as in select(p, t, y)
            out_t = bind("broadcast_in_dim", out_t, shape=shape, broadcast_dimensions=())
        return ans, out_t
    return rule


def instantiate(t):
    """Turn a symbolic Zero into an array of zeros (leaves arrays alone)."""
    if type(t) is Zero:
        return zeros(t.aval)
    return t


def zeros(aval):
    zero = np.zeros((), aval.dtype)
    if not aval.shape:
        return zero
    return bind("broadcast_in_dim", zero, shape=aval.shape, broadcast_dimensions=())


def full_like_aval(value, aval):
    val = np.asarray(value, aval.dtype)
    if not aval.shape:
        return val
    return bind("broadcast_in_dim", val, shape=aval.shape, broadcast_dimensions=())


# ---------------------------------------------------------------------------
# transpose helpers

def ct_for(x, ct):
    """ct if x is a linear input, else None; sums over broadcasting of a rank-0 input."""
    if type(x) is not UndefinedPrimal:
        return None
    if type(ct) is Zero:
        return Zero(x.aval)
    if x.aval.ndim == 0 and aval_of(ct).ndim:
        ct = bind("reduce_sum", ct, axes=tuple(range(aval_of(ct).ndim)))
    return ct


# ---------------------------------------------------------------------------
# batching helpers

def moveaxis(x, src, dst):
    nd = aval_of(x).ndim
    src, dst = src % nd, dst % nd
    if src == dst:
        return x
    perm = [i for i in range(nd) if i != src]
    perm.insert(dst, src)
    return bind("transpose", x, permutation=tuple(perm))


def bdim_size(vals, dims):
    for v, d in zip(vals, dims):
        if d is not None:
            return aval_of(v).shape[d]
    raise ValueError("no batched argument")


def broadcast_batched(x, size, axis=0):
    """Add a batch axis of `size` at `axis` to an unbatched value."""
    aval = aval_of(x)
    shape = list(aval.shape)
    shape.insert(axis, size)
    dims = tuple(i for i in range(len(shape)) if i != axis)
    return bind("broadcast_in_dim", x, shape=tuple(shape), broadcast_dimensions=dims)


def _elementwise_batch(p):
    def rule(vals, dims, **params):
        size = bdim_size(vals, dims)
        ranks = [aval_of(v).ndim - (d is not None) for v, d in zip(vals, dims)]
        out_rank = max(ranks)
        bd = {d for v, d, r in zip(vals, dims, ranks) if d is not None and r == out_rank}
        # fast path: every full-rank operand batched on the same axis, the rest rank 0
        if len(bd) == 1 and all((d is None and r == 0) or (d is not None and r == out_rank)
                                for d, r in zip(dims, ranks)):
            return p.bind(*vals, **params), bd.pop()
        shape = next(aval_of(v).shape if d is None else
                     tuple(s for i, s in enumerate(aval_of(v).shape) if i != d)
                     for v, d, r in zip(vals, dims, ranks) if r == out_rank)
        new = []
        for v, d, r in zip(vals, dims, ranks):
            if d is None:
                new.append(v if r == 0 else broadcast_batched(v, size))
            else:
                v = moveaxis(v, d, 0)
                if r < out_rank:
                    v = bind("broadcast_in_dim", v, shape=(size,) + shape,
                             broadcast_dimensions=(0,))
                new.append(v)
        return p.bind(*new, **params), 0
    return rule
