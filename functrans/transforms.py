"""The user-facing differentiation transformations: jvp, linearize, vjp, grad,
value_and_grad, jacfwd, jacrev, hessian.

They flatten pytrees, check arguments, and call the machinery below them: forward mode
and linearization in ad.py, reverse mode's recorded tape and deriver in reverse.py,
vmap in batching.py (for Jacobians).
"""
from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .numpy import raw as fnp
from . import tree_util
from .ad import (JVPTracer, PartialVal, _tangent_aval, backward_pass, is_float, jvp_flat,
                 partial_eval_flat)
from .batching import vmap
from .core import (FunctransError, Tracer, UndefinedPrimal, Zero, canonicalize, full_lower,
                   get_aval)
from .dtypes import float0
from .primitives import elementwise as ew
from .primitives.base import instantiate, zeros
from .executor import vjp_flat
from .reverse import recorded_value
from .runtime import eval_jaxpr as run_jaxpr, gc_paused
from .tracing import flatten_fun, make_jaxpr

Argnums = int | Sequence[int]


def jvp(fun: Callable[..., Any], primals: Sequence[Any], tangents: Sequence[Any],
        has_aux: bool = False) -> tuple[Any, ...]:
    """(fun(*primals), directional derivative along tangents): forward mode."""
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError("primal and tangent arguments to jax.jvp must be tuples or lists; "
                        f"found {type(primals).__name__} and {type(tangents).__name__}.")
    p_leaves, p_tree = tree_util.tree_flatten(tuple(primals))
    t_leaves, t_tree = tree_util.tree_flatten(tuple(tangents))
    p_leaves = [canonicalize(x) for x in p_leaves]
    t_leaves = [_from_float0(t, p) for t, p in zip(t_leaves, p_leaves)]
    if p_tree != t_tree:
        raise TypeError(f"primal and tangent arguments to jax.jvp must have the same tree "
                        f"structure; primals have tree structure {p_tree} whereas tangents "
                        f"have tree structure {t_tree}.")
    for i, (p, t) in enumerate(zip(p_leaves, t_leaves)):
        pa, ta = get_aval(p), get_aval(t)
        if pa.shape != ta.shape:
            raise ValueError(f"jvp called with different primal and tangent shapes at leaf "
                             f"{i}: primal {pa.str_short()}, tangent {ta.str_short()}")
        if is_float(pa) and pa.dtype != ta.dtype:
            raise TypeError(f"primal and tangent arguments to jvp do not match; dtypes must "
                            f"be equal at leaf {i}: primal {pa.str_short()}, tangent "
                            f"{ta.str_short()}")
    f = fun
    aux_store = {}
    if has_aux:
        def f(*args):
            out, aux = _out_and_aux(fun(*args))
            mains = {a._trace.main for a in tree_util.tree_leaves(args)
                     if isinstance(a, JVPTracer)}
            # the aux's primal values, taken while this jvp runs (its tracers must not escape)
            aux_store["aux"] = tree_util.tree_map(
                lambda a: full_lower(a.primal) if isinstance(a, JVPTracer) and
                a._trace.main in mains else a, aux)
            return out
    f_flat, store = flatten_fun(f, p_tree)
    outs, touts = jvp_flat(f_flat, p_leaves, t_leaves)
    out = tree_util.tree_unflatten(store["out_tree"], outs)
    tout = tree_util.tree_unflatten(store["out_tree"], touts)
    if has_aux:
        return out, tout, aux_store["aux"]
    return out, tout


class LinearFunction:
    """The linear map of a linearization: a jaxpr over tangents plus its residuals."""

    def __init__(self, jaxpr, consts, out_pvals):
        self.jaxpr, self.consts = jaxpr, consts
        self.out_pvals = out_pvals     # known (zero) tangent outputs or unknowns

    def __call__(self, *tangents):
        outs = iter(run_jaxpr(self.jaxpr, self.consts, *tangents))
        return [next(outs) if not pv.is_known else pv.const for pv in self.out_pvals]


def linearize_flat(f_flat, primals):
    n = len(primals)
    t_avals = [_tangent_aval(p) for p in primals]

    def jvp_fun(*args):
        outs, touts = jvp_flat(f_flat, args[:n], args[n:], instantiate_zeros=False)
        return outs + [instantiate(t) for t in touts]
    pvals_in = [PartialVal.known(p) for p in primals] + [PartialVal.unknown(a) for a in t_avals]
    pvals_out, jaxpr, consts = partial_eval_flat(jvp_fun, pvals_in)
    m = len(pvals_out) // 2
    primals_out = [pv.const for pv in pvals_out[:m]]
    if any(not pv.is_known for pv in pvals_out[:m]):
        raise FunctransError("linearize: a primal output depends on the tangents")
    return primals_out, LinearFunction(jaxpr, consts, pvals_out[m:])


def linearize(fun: Callable[..., Any], *primals: Any,
              has_aux: bool = False) -> tuple[Any, ...]:
    """(fun(*primals), f_jvp) where f_jvp evaluates the stored linear jaxpr; with has_aux,
    fun returns (output, aux) and linearize (output, f_jvp, aux), as JAX's."""
    leaves, in_tree = tree_util.tree_flatten(primals)
    leaves = [canonicalize(x) for x in leaves]
    f_flat, store = flatten_fun((lambda *a: tuple(_out_and_aux(fun(*a)))) if has_aux else fun,
                                in_tree)
    outs, lin = linearize_flat(f_flat, leaves)
    out_tree = store["out_tree"]
    n_out = len(outs)
    if has_aux:                 # the aux leaves ride along as outputs without tangents
        out_tree, aux_tree = out_tree.children
        n_out = out_tree.num_leaves

    expected = [_tangent_aval(p) for p in leaves]

    def f_jvp(*tangents):
        t_leaves, t_tree = tree_util.tree_flatten(tangents)
        if t_tree != in_tree:
            raise TypeError(f"linearized function expects tangents with structure {in_tree}, "
                            f"got {t_tree}")
        for t, p, want in zip(t_leaves, leaves, expected):
            got = get_aval(canonicalize(t)).strip_weak()
            if got.shape != want.shape or got.dtype != want.dtype:
                raise ValueError(
                    "linearized function called on tangent values inconsistent with the "
                    f"original primal values:\nGot tangent aval {got.str_short()} for primal "
                    f"aval {get_aval(p).strip_weak().str_short()} but expected "
                    f"{want.str_short()}." + ("" if want.dtype.kind in "fc" else
                                             " (an integer value's tangent is zeros of its "
                                             "dtype here; JAX's is float0)"))
        return tree_util.tree_unflatten(out_tree, lin(*t_leaves)[:n_out])
    f_jvp.jaxpr = lin.jaxpr  # type: ignore[attr-defined]
    out = tree_util.tree_unflatten(out_tree, outs[:n_out])
    if has_aux:
        return out, f_jvp, tree_util.tree_unflatten(aux_tree, outs[n_out:])
    return out, f_jvp


def vjp(fun: Callable[..., Any], *primals: Any,
        has_aux: bool = False) -> tuple[Any, ...]:
    """(fun(*primals), vjp_fn) with vjp_fn(cotangent) -> tuple of input cotangents."""
    return _vjp(fun, primals, has_aux, fun)


def _out_and_aux(result):
    """The (output, aux) pair a has_aux=True function returns; anything else is JAX's
    TypeError (rather than an unpacking error from deep inside the transformation)."""
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        raise TypeError("expected function with aux output to return a two-element tuple, "
                        f"but got type {type(result)} with value {result!r:.200}")
    return result


def _vjp(fun, primals, has_aux, hint_fun, hint_extra=(), grad_argnums=None,
         holomorphic=False):
    """vjp's work; grad_argnums: primals are grad's arguments at these positions, whose
    leaves must be inexact (complex when holomorphic; checked here, on the one flattening)."""
    leaves, in_tree = tree_util.tree_flatten(primals)
    if grad_argnums is not None:
        k = 0
        for a, sub in zip(grad_argnums, in_tree.children):
            for leaf in leaves[k:k + sub.num_leaves]:
                _check_grad_input(leaf, a, holomorphic)
            k += sub.num_leaves
    leaves = [canonicalize(x) for x in leaves]
    f = fun
    aux_store = {}
    if has_aux:
        def f(*args):
            out, aux = _out_and_aux(fun(*args))
            aux_store["aux"] = aux
            return out
    f_flat, store = flatten_fun(f, in_tree)
    hint = (hint_fun, (hint_extra, in_tree, tuple([get_aval(x) for x in leaves])))
    outs, back = vjp_flat(f_flat, leaves, hint, has_aux)
    out_tree = store["out_tree"]
    out_avals = [get_aval(o) for o in outs]

    def vjp_fn(*cts):
        if len(cts) != 1:
            name = getattr(hint_fun, "__name__", "the function")
            raise TypeError(f"The function returned by `jax.vjp` applied to {name} was called "
                            f"with {len(cts)} arguments, but functions returned by `jax.vjp` "
                            "must be called with a single argument corresponding to the single "
                            f"value returned by {name} (even if that returned value is a tuple "
                            "or other container).")
        ct, = cts
        ct_leaves, ct_tree = tree_util.tree_flatten(ct)
        if ct_tree != out_tree:
            raise TypeError(f"vjp function expects a cotangent with the structure of the "
                            f"output {out_tree}, got {ct_tree}")
        for i, (c, a) in enumerate(zip(ct_leaves, out_avals)):
            ca = get_aval(c)
            if ca.shape != a.shape:
                raise ValueError(f"vjp cotangent leaf {i} has shape {ca.str_short()} but the "
                                 f"primal output has shape {a.str_short()}")
        ct_leaves = [_match_dtype(canonicalize(c), a) for c, a in zip(ct_leaves, out_avals)]
        cts = back(ct_leaves)
        cts = [zeros(get_aval(p).strip_weak()) if c is None else c for c, p in zip(cts, leaves)]
        cts = [full_lower(_match_dtype(c, get_aval(p))) for c, p in zip(cts, leaves)]
        return tree_util.tree_unflatten(in_tree, cts)
    out = tree_util.tree_unflatten(out_tree, outs)
    if has_aux:
        return out, vjp_fn, tree_util.tree_map(recorded_value, aux_store["aux"])
    return out, vjp_fn


def _nonscalar_hint(aval):
    """JAX's advice for grad of a non-scalar output: extract the element of a size-1 output,
    sum, or take the whole Jacobian."""
    if aval is None:
        return ""
    pick = ""
    if aval.size == 1:
        pick = ("output.reshape(()) or output[0]" if aval.ndim == 1 else "output.reshape(())")
        pick = f" If the output has a single element, use {pick} to make it a scalar."
    return (f"{pick} To differentiate the sum of the outputs, use output.sum(); for the "
            "Jacobian of a vector-valued function, use jax.jacobian (ft.jacrev or ft.jacfwd).")


def _match_dtype(ct, aval):
    if get_aval(ct).dtype != aval.dtype and aval.dtype.kind in "fc":
        return ew.convert_element_type(ct, new_dtype=aval.dtype, weak_type=False)
    return ct


def _from_float0(t, p):
    """A tangent as the core takes it: a float0 tangent (JAX's, of an integer or boolean
    primal) becomes zeros of the primal's dtype, functrans's tangent of such a value."""
    if getattr(t, "dtype", None) == float0:
        a = get_aval(p)
        if not is_float(a):
            return np.zeros(np.shape(t), a.dtype)
        raise TypeError(f"a float0 tangent was given for a primal of dtype {a.dtype.name}; "
                        "float0 is the tangent dtype of integer and boolean values only")
    return canonicalize(t)


def _check_grad_input(x, argnum, holomorphic=False, name="grad"):
    aval = get_aval(x)
    if holomorphic and aval.dtype.kind != "c":
        raise TypeError(f"{name} with holomorphic=True requires inputs with complex dtype, "
                        f"but got {aval.dtype.name}.")
    if not is_float(aval):
        raise TypeError(
            f"grad requires real- or complex-valued inputs (input dtype that is a sub-dtype "
            f"of np.inexact), but got {aval.dtype.name} for argument {argnum}. If you want "
            "to use Boolean- or integer-valued inputs, use vjp, or convert the input to float.")


def _check_output(name, aval, holomorphic):
    """JAX's rule for reverse-mode outputs: real, or complex when holomorphic=True."""
    if holomorphic:
        if aval.dtype.kind != "c":
            raise TypeError(f"{name} with holomorphic=True requires outputs with complex "
                            f"dtype, but got {aval.dtype.name}.")
    elif aval.dtype.kind == "c":
        raise TypeError(f"{name} requires real-valued outputs (output dtype that is a "
                        f"sub-dtype of np.floating), but got {aval.dtype.name}. For "
                        "holomorphic differentiation, pass holomorphic=True. For "
                        "differentiation of non-holomorphic functions involving complex "
                        "outputs, use functrans.vjp directly.")
    elif aval.dtype.kind != "f":
        raise TypeError(f"{name} requires real-valued outputs (output dtype that is a "
                        f"sub-dtype of np.floating), but got {aval.dtype.name}")


def value_and_grad(fun: Callable[..., Any], argnums: Argnums = 0, has_aux: bool = False,
                   holomorphic: bool = False, allow_int: bool = False
                   ) -> Callable[..., tuple[Any, Any]]:
    """A function returning (fun(*args), gradient of fun w.r.t. args[argnums]). JAX's
    convention: for real f of complex z = x + iy the gradient is df/dx - i df/dy;
    holomorphic=True: complex f of complex z, the gradient is f'(z). allow_int: integer
    and boolean arguments are allowed, their gradient float0 zeros (as JAX's)."""
    int_argnums = isinstance(argnums, int)
    argnums_t = (argnums,) if isinstance(argnums, int) else tuple(argnums)

    @functools.wraps(fun)
    def vg(*args, **kwargs):
        # the collector paused, as jit traces: the recording's O(n) objects live until its
        # backward and would be rescanned by every collection meanwhile (about 15% of an
        # un-jitted ft.grad of a 1,000-op chain); they die before the pause ends
        with gc_paused():
            return _vg(*args, **kwargs)

    def _vg(*args, **kwargs):
        nargs = len(args)
        for a in argnums_t:
            if not -nargs <= a < nargs:
                raise TypeError(f"differentiating with respect to argnums={argnums} requires "
                                f"at least {max(argnums_t) + 1} positional arguments to be "
                                f"passed by the caller, but got only {nargs} positional "
                                "arguments.")
        diff = tuple([args[a] for a in argnums_t])

        def f_partial(*dargs):
            full = list(args)
            for a, d in zip(argnums_t, dargs):
                full[a] = d
            return fun(*full, **kwargs)
        extra = (argnums_t, len(args))
        checked = None if allow_int else argnums_t
        if has_aux:
            ans, vjp_fn, aux = _vjp(f_partial, diff, True, fun, extra, checked, holomorphic)
        else:
            ans, vjp_fn = _vjp(f_partial, diff, False, fun, extra, checked, holomorphic)
        if type(ans) is np.ndarray or isinstance(ans, (np.generic, Tracer)):
            leaf, out_tree = ans, None
        else:                                   # a registered node around one array (a Tensor)
            out_leaves, out_tree = tree_util.tree_flatten(ans)
            leaf = out_leaves[0] if len(out_leaves) == 1 and not isinstance(
                ans, (tuple, list, dict)) else None
        out_aval = None if leaf is None else get_aval(leaf)
        if out_aval is None or out_aval.shape != ():
            shape = out_aval.shape if out_aval is not None else type(ans).__name__
            raise TypeError(f"Gradient only defined for scalar-output functions. Output had "
                            f"shape: {shape}." + _nonscalar_hint(out_aval))
        _check_output("grad", out_aval, holomorphic)
        ct = np.ones((), out_aval.dtype)
        g = vjp_fn(ct if out_tree is None else out_tree.unflatten([ct]))
        if allow_int:
            g = tree_util.tree_map(lambda gi, x: gi if is_float(get_aval(x)) else
                                   np.zeros(np.shape(x), float0), g, diff)
        g = g[0] if int_argnums else g
        return ((ans, aux), g) if has_aux else (ans, g)
    return vg


def grad(fun: Callable[..., Any], argnums: Argnums = 0, has_aux: bool = False,
         holomorphic: bool = False, allow_int: bool = False) -> Callable[..., Any]:
    """The gradient of a scalar-valued fun with respect to args[argnums] (complex inputs,
    holomorphic=True and allow_int: see value_and_grad)."""
    vg = value_and_grad(fun, argnums, has_aux, holomorphic, allow_int)

    @functools.wraps(fun)
    def g(*args, **kwargs):
        if has_aux:
            (_, aux), gr = vg(*args, **kwargs)
            return gr, aux
        return vg(*args, **kwargs)[1]
    return g


def _std_basis(avals):
    """Rows of the identity over the concatenated flattened leaves, one array per leaf."""
    sizes = [a.size for a in avals]
    n = sum(sizes)
    dtype = np.result_type(*[a.dtype for a in avals]) if avals else np.float32
    eye = np.eye(n, dtype=dtype)
    out, off = [], 0
    for a, s in zip(avals, sizes):
        out.append(eye[:, off:off + s].reshape((n,) + a.shape).astype(a.dtype))
        off += s
    return out


def _split_jac(batched, batch_avals, other_avals, batch_is_input):
    """Per (output, input) pair, reshape a batched block to out_shape + in_shape."""
    blocks, off = [], 0
    for a in batch_avals:
        rows = []
        for x, oa in zip(batched, other_avals):
            part = x[off:off + a.size]                       # (size_a,) + oa.shape
            if batch_is_input:   # jacfwd: part is (in_size,) + out_shape
                part = fnp.moveaxis(fnp.reshape(part, (a.size,) + oa.shape), 0, -1)
                rows.append(fnp.reshape(part, oa.shape + a.shape))
            else:                # jacrev: part is (out_size,) + in_shape
                rows.append(fnp.reshape(part, a.shape + oa.shape))
        blocks.append(rows)
        off += a.size
    return blocks


def _jac_setup(fun, argnums, args, has_aux, name, holomorphic):
    int_argnums = isinstance(argnums, int)
    argnums_t = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    diff = tuple(args[a] for a in argnums_t)
    for a, d in zip(argnums_t, diff):
        for leaf in tree_util.tree_leaves(d):
            _check_grad_input(leaf, a, holomorphic, name)
            if name == "jacfwd" and not holomorphic and get_aval(leaf).dtype.kind == "c":
                raise TypeError(
                    "jacfwd requires real-valued inputs (input dtype that is a sub-dtype of "
                    f"np.floating), but got {get_aval(leaf).dtype.name}. For holomorphic "
                    "differentiation, pass holomorphic=True. For differentiation of "
                    "non-holomorphic functions involving complex inputs, use functrans.jvp "
                    "directly.")
    dtree_src = diff[0] if int_argnums else diff
    d_leaves, d_tree = tree_util.tree_flatten(dtree_src)
    d_leaves = [canonicalize(x) for x in d_leaves]
    aux_store = {}

    def f_flat(*leaves):
        dargs = tree_util.tree_unflatten(d_tree, leaves)
        dargs = (dargs,) if int_argnums else dargs
        full = list(args)
        for a, d in zip(argnums_t, dargs):
            full[a] = d
        out = fun(*full)
        if has_aux:
            out, aux_store["aux"] = _out_and_aux(out)
        leaves_out, aux_store["tree"] = tree_util.tree_flatten(out)
        return leaves_out
    return d_leaves, d_tree, f_flat, aux_store


def _assemble(blocks_by_out, out_tree, in_tree):
    return tree_util.tree_unflatten(
        out_tree, [tree_util.tree_unflatten(in_tree, row) for row in blocks_by_out])


def jacfwd(fun: Callable[..., Any], argnums: Argnums = 0, has_aux: bool = False,
           holomorphic: bool = False) -> Callable[..., Any]:
    """Jacobian by forward mode: one jvp per input direction, batched with vmap; real inputs,
    or complex inputs and outputs with holomorphic=True (then the Jacobian is f'(z))."""

    @functools.wraps(fun)
    def jacfun(*args):
        d_leaves, d_tree, f_flat, store = _jac_setup(fun, argnums, args, has_aux, "jacfwd",
                                                     holomorphic)
        in_avals = [get_aval(x) for x in d_leaves]
        outs = f_flat(*d_leaves)
        aux = store.get("aux")              # the eager run's (the jvps below store tracers)
        out_avals = [get_aval(o) for o in outs]
        if holomorphic:
            for a in out_avals:
                _check_output("jacfwd", a, True)

        def push(*tangents):
            return jvp_flat(f_flat, d_leaves, list(tangents))[1]
        jac_cols = vmap(push)(*_std_basis(in_avals))
        blocks = _split_jac(jac_cols, in_avals, out_avals, batch_is_input=True)
        by_out = [[blocks[i][o] for i in range(len(in_avals))] for o in range(len(out_avals))]
        jac = _assemble(by_out, store["tree"], d_tree)
        return (jac, aux) if has_aux else jac
    return jacfun


def jacrev(fun: Callable[..., Any], argnums: Argnums = 0, has_aux: bool = False,
           holomorphic: bool = False) -> Callable[..., Any]:
    """Jacobian by reverse mode: one vjp per output direction, batched with vmap; real
    outputs (of real or complex inputs), or complex ones with holomorphic=True."""

    @functools.wraps(fun)
    def jacfun(*args):
        d_leaves, d_tree, f_flat, store = _jac_setup(fun, argnums, args, has_aux, "jacrev",
                                                     holomorphic)
        in_avals = [get_aval(x) for x in d_leaves]
        f = (lambda *leaves: (f_flat(*leaves), store["aux"])) if has_aux else f_flat
        outs, pull, *aux = _vjp(f, tuple(d_leaves), has_aux, fun, ("jacrev", argnums))
        out_avals = [get_aval(o) for o in outs]
        for a in out_avals:
            if holomorphic or a.dtype.kind == "c":
                _check_output("jacrev", a, holomorphic)
        jac_rows = vmap(lambda *cts: pull(list(cts)))(*_std_basis(out_avals))
        blocks = _split_jac(list(jac_rows), out_avals, in_avals, batch_is_input=False)
        jac = _assemble(blocks, store["tree"], d_tree)
        return (jac, aux[0]) if has_aux else jac
    return jacfun


def hessian(fun: Callable[..., Any], argnums: Argnums = 0, has_aux: bool = False,
            holomorphic: bool = False) -> Callable[..., Any]:
    """Hessian = jacfwd(jacrev(fun))."""
    return jacfwd(jacrev(fun, argnums, has_aux, holomorphic), argnums, has_aux, holomorphic)


def linear_transpose(fun: Callable[..., Any], *primals: Any, reduce_axes=()) -> Callable:
    """The transpose of a linear fun, as jax.linear_transpose: primals give the input
    shapes and dtypes (their values are not used); the returned function takes the output
    cotangents and returns one cotangent per primal, as a tuple. fun is traced once; an
    operation that is not linear in the inputs makes the transpose raise."""
    leaves, in_tree = tree_util.tree_flatten(primals)
    avals = [get_aval(canonicalize(x)).strip_weak() for x in leaves]
    f_flat, store = flatten_fun(fun, in_tree)
    closed = make_jaxpr(lambda *xs: f_flat(*xs))(*[np.zeros(a.shape, a.dtype) for a in avals])
    out_tree = store["out_tree"]
    out_avals = closed.out_avals
    in_inexact = [a.dtype.kind in "fc" for a in avals]
    out_inexact = [a.dtype.kind in "fc" for a in out_avals]
    if not ((all(in_inexact) and all(out_inexact)) or
            (not any(in_inexact) and not any(out_inexact))):
        raise TypeError("linear_transpose only supports [float or complex] -> [float or "
                        "complex], and integer -> integer functions, but got "
                        f"{[a.str_short() for a in avals]} -> "
                        f"{[a.str_short() for a in out_avals]}.")

    def transposed(*cts):
        ct = cts[0] if len(cts) == 1 else cts
        ct_leaves, ct_tree = tree_util.tree_flatten(ct)
        if ct_tree != out_tree:
            raise TypeError(f"linear_transpose: cotangent tree does not match function "
                            f"output, expected {out_tree} but got {ct_tree}")
        for c, a in zip(ct_leaves, out_avals):
            ca = get_aval(canonicalize(c))
            if ca.shape != a.shape or ca.dtype != a.strip_weak().dtype:
                raise TypeError(f"linear_transpose: cotangent type does not match function "
                                f"output, expected {a.strip_weak().str_short()} but got "
                                f"{ca.str_short()}")
        try:
            res = backward_pass(closed.jaxpr, closed.consts,
                                [UndefinedPrimal(a) for a in avals],
                                [canonicalize(c) for c in ct_leaves])
        except NotImplementedError as e:
            raise NotImplementedError(
                f"linear_transpose: {getattr(fun, '__name__', 'fun')} is not linear in its "
                f"inputs ({e.args[0].split('.')[0] if e.args else e})") from None
        res = [np.zeros(a.shape, a.dtype) if type(r) is Zero else r
               for r, a in zip(res, avals)]
        return tree_util.tree_unflatten(in_tree, res)
    return transposed


def named_call(fun: Callable[..., Any], *, name: str | None = None) -> Callable[..., Any]:
    """fun, under a name (jax.named_call): the same function here, since functrans
    programs carry no name stack."""
    @functools.wraps(fun)
    def call(*args, **kwargs):
        return fun(*args, **kwargs)
    if name is not None:
        call.__name__ = call.__qualname__ = name
    return call


@contextlib.contextmanager
def named_scope(name: str):
    """jax.named_scope: a name for the operations of a block; functrans programs carry
    no name stack, so the block runs unchanged."""
    if not isinstance(name, str):
        raise TypeError("named_scope name argument must be a string.")
    yield


_PRECISIONS = ("default", "high", "highest", "fastest", "bfloat16", "tensorfloat32", "float32",
               "bfloat16_3x", "tensorfloat32_3x", "ANY_F8_ANY_F8_F32", "F16_F16_F32",
               "F32_F32_F32", "F64_F64_F64", "BF16_BF16_F32")


@contextlib.contextmanager
def default_matmul_precision(precision: str):
    """jax.default_matmul_precision: matrix products on the CPU use the operands'
    precision whatever is asked, so the block runs unchanged (the name is checked)."""
    if precision not in _PRECISIONS:
        raise ValueError(f"jax_default_matmul_precision got an unknown value "
                         f"{precision!r}; expected one of {list(_PRECISIONS)}")
    yield
