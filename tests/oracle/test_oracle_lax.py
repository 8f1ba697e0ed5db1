"""The `lax:` and `transform:` oracle table: `functrans.lax` against `jax.lax` (every function
the two share, with JAX's positional and keyword signatures, eagerly and under grad, vmap
and jit, x64 off and on), the control flow under the transformations, and the
transformations themselves (grad and friends, vmap's axes, jit's static arguments,
custom rules, checkpoint, eval_shape, tree_util), `functrans.nn`'s functions that `jax.nn`
has and `functrans.random`'s shapes and dtypes (its bit streams differ on purpose,
docs/porting_jax.md). Differences that stay are rows of docs/oracle.md."""
from __future__ import annotations

import collections
import contextlib
import importlib
import io
import re
import inspect
import types

import numpy as np
import pytest

import oracle
from oracle import case, check_error, compare, jax, jnp, register, x64

import functrans as ft
import functrans.numpy as fnp

J = types.SimpleNamespace(name="jax", np=jnp, lax=jax.lax, top=jax, nn=jax.nn,
                          random=jax.random, tu=jax.tree_util)
F = types.SimpleNamespace(name="ft", np=fnp, lax=ft.lax, top=ft, nn=ft.nn, random=ft.random,
                          tu=ft.tree_util)


def both(fn, *, error=None, dtypes=True, rtol=None, atol=None, oracle_jit=False):
    """fn(L) with L the jax namespace and the functrans one; compare the results (pytrees
    of arrays, numbers, shapes, dtypes) or the errors (error: a pattern both match).
    oracle_jit: JAX's side runs as one jitted program (its values and dtypes are its eager
    ones; JAX compiles each eager op separately, which would dominate the table's time)."""
    jfn = (lambda L: jax.jit(lambda: fn(L))()) if oracle_jit else fn
    theirs = oracle._attempt(lambda: oracle._to_numpy_tree(jfn(J)))
    ours = oracle._attempt(lambda: oracle._to_numpy_tree(fn(F)))
    if isinstance(theirs, BaseException) or error is not None:
        return check_error(ours, theirs, error)
    compare(ours, theirs, "value", dtypes=dtypes, rtol=rtol, atol=atol)


def run_functional(fn, *xs, transforms=("value", "grad"), argnums=0):
    """oracle.functional's comparisons (fn(np, lax, *xs) eagerly, and grad of its sum
    w.r.t. argnums), JAX's side jitted; 'jit_vmap': vmap over a batch of two under jit."""
    def value(L):
        return fn(L.np, L.lax, *xs)

    def grad(L):
        return L.top.grad(lambda *a: L.np.sum(fn(L.np, L.lax, *a)), argnums=argnums)(*xs)
    eager = [(t, {"value": value, "grad": grad}[t]) for t in transforms
             if t in ("value", "grad")]
    if len(eager) == 2:
        # JAX's value and grad in one jitted program (one compilation); where JAX raises,
        # each on its own, so that the errors are compared one by one
        theirs = oracle._attempt(lambda: oracle._to_numpy_tree(
            jax.jit(lambda: [value(J), grad(J)])()))
        if not isinstance(theirs, BaseException):
            for (t, f), th in zip(eager, theirs):
                ours = oracle._attempt(lambda: oracle._to_numpy_tree(f(F)))
                if isinstance(ours, BaseException):
                    raise oracle.Mismatch(f"{t}: we raise {type(ours).__name__}: "
                                          f"{str(ours)[:300]}; the oracle returns a value")
                compare(ours, th, t)
            eager = []
    for t, f in eager:
        both(f, oracle_jit=True)
    for t in transforms:
        if t == "jit":
            both(lambda L: L.top.jit(lambda *a: fn(L.np, L.lax, *a))(*xs))
        elif t == "jit_vmap":
            vs = stacked(xs)
            both(lambda L: L.top.jit(L.top.vmap(lambda *a: fn(L.np, L.lax, *a)))(*vs))


def stacked(xs):
    """A batch of two for vmap: the inputs and a shifted copy (integers and booleans kept
    in their range)."""
    out = []
    for x in xs:
        x = np.asarray(x)
        if x.dtype.kind == "f":
            y = np.where(np.isfinite(x), x * np.asarray(0.5, x.dtype), x)
        else:
            y = x[::-1].copy() if x.ndim else x
        out.append(np.stack([x, y.astype(x.dtype)]))
    return out


# ---------------------------------------------------------------------------------------
# inputs (float32 with x64 off, float64 with it on): awkward values where they matter
def real(dt, lo=None, hi=None, shape=(3, 4), seed=0):
    rng = np.random.default_rng(seed)
    x = oracle.special_values(rng, shape, np.float64)
    if lo is not None or hi is not None:
        x = np.clip(x, lo, hi)
    return x.astype(dt)


def unit(dt):           # acos, asin: [-1, 1] with both ends and signed zeros
    return np.array([[-1.0, -0.5, -0.0, 0.0], [0.25, 0.5, 0.9, 1.0], [0.3, -0.3, 0.3, -0.7]],
                    dt)


def positive(dt):       # log, sqrt, rsqrt: 0 and up (0 is where the derivative blows up)
    return np.array([[0.0, 0.5, 1.0, 2.0], [3.0, 1e-3, 1.0, 7.5], [0.1, 4.0, 4.0, 9.0]], dt)


def pair(dt, seed=0):   # two operands with ties between them
    x, y = real(dt, seed=seed), real(dt, seed=seed + 1)
    y[0, :2] = x[0, :2]
    return x, y


def ints(dt=np.int32):
    return np.array([[-7, -3, 0, 5], [2, 9, -1, 4], [3, 3, -8, 6]], dt)


def nonzero(dt):
    return np.array([[2.0, -3.0, 0.5, 4.0], [-1.5, 3.0, 2.0, -2.0], [1.0, 7.0, -0.25, 5.0]],
                    dt)


# ---------------------------------------------------------------------------------------
# the lax functions. Each: (inputs(dtype) -> arrays, extra positional parameters, options);
# the case calls lax.<name>(*arrays, *params) as JAX documents it.
UNARY = {"abs": real, "acos": unit, "asin": unit, "atan": real, "ceil": real, "cos": real,
         "cosh": real, "erf": real, "exp": real, "expm1": real, "floor": real,
         "is_finite": lambda dt: real(dt) * np.array([1, np.inf, np.nan, 1], dt),
         "log": positive, "log1p": lambda dt: positive(dt) - np.asarray(0.5, dt),
         "logistic": real, "neg": real, "rsqrt": positive, "sign": real, "sin": real,
         "sinh": real, "sqrt": positive, "tan": lambda dt: real(dt, -1.4, 1.4), "tanh": real,
         "round": lambda dt: np.array([[0.5, 1.5, 2.5, -0.5], [-1.5, -2.5, 0.49, 3.7],
                                       [-0.0, 0.0, 7.5, -7.5]], dt),
         "stop_gradient": real}
NO_GRAD = {"reduce_window_mul", "reduce_window_dilated", "top_k_indices",
           "is_finite", "eq", "ne", "lt", "le", "gt", "ge", "argmax", "argmin", "iota",
           "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "shift_left",
           "shift_right_logical", "empty", "conj", "real", "imag"}
BINARY = {"add": pair, "sub": pair, "mul": pair, "div": lambda dt: (real(dt), nonzero(dt)),
          "max": pair, "min": pair, "atan2": pair,
          "pow": lambda dt: (positive(dt) + np.asarray(0.5, dt), real(dt, -2, 2)),
          "rem": lambda dt: (real(dt) * np.asarray(5, dt), nonzero(dt)),
          "eq": pair, "ne": pair, "lt": pair, "le": pair, "gt": pair, "ge": pair}

LAX = {}        # name -> (inputs(dt), params, options)
for _n, _inp in UNARY.items():
    LAX[_n] = (lambda dt, _inp=_inp: (_inp(dt),), (), {})
for _n, _inp in BINARY.items():
    LAX[_n] = (lambda dt, _inp=_inp: _inp(dt), (), {})
LAX.update({
    "integer_pow": (lambda dt: (real(dt),), (3,), {}),
    "convert_element_type": (lambda dt: (real(dt) * np.asarray(3, dt),), (np.int32,), {}),
    "select": (lambda dt: (real(dt) > 0, *pair(dt)), (), {"argnums": 1}),
    "reshape": (lambda dt: (real(dt),), ((2, 6),), {}),
    "transpose": (lambda dt: (real(dt),), ((1, 0),), {}),
    "squeeze": (lambda dt: (real(dt, shape=(3, 1, 4)),), ((1,),), {}),
    "expand_dims": (lambda dt: (real(dt),), ((0, 2),), {}),
    "rev": (lambda dt: (real(dt),), ((0, 1),), {}),
    "broadcast_in_dim": (lambda dt: (real(dt, shape=(3,)),), ((2, 3, 5), (1,)), {}),
    "concatenate": (lambda dt: pair(dt), (), {"call": lambda lax, x, y: lax.concatenate(
        [x, y], 1)}),
    "pad": (lambda dt: (real(dt), np.asarray(-2.0, dt)), ([(1, 2, 1), (-1, 0, 0)],), {}),
    "slice": (lambda dt: (real(dt, shape=(4, 5)),), ((1, 0), (4, 5), (2, 2)), {}),
    "iota": (lambda dt: (), (np.int32, 5), {"transforms": ("value", "jit")}),
    "reduce_sum": (lambda dt: (real(dt),), ((0, 1),), {}),
    "reduce_prod": (lambda dt: (real(dt),), ((1,),), {}),
    "reduce_max": (lambda dt: (real(dt),), ((1,),), {}),
    "reduce_min": (lambda dt: (real(dt),), ((0,),), {}),
    "argmax": (lambda dt: (real(dt),), (1, np.int32), {}),
    "argmin": (lambda dt: (real(dt),), (0, np.int32), {}),
    "cumsum": (lambda dt: (real(dt),), (1, True), {}),
    "dot_general": (lambda dt: (real(dt, shape=(2, 3, 4)), real(dt, shape=(2, 4, 5), seed=3)),
                    ((((2,), (1,)), ((0,), (0,))),), {}),
    "dynamic_slice": (lambda dt: (real(dt, shape=(4, 5)),), ((-3, 2), (2, 3)), {}),
    "slice_in_dim": (lambda dt: (real(dt, shape=(4, 5)),), (1, None, 2, 1), {}),
    "index_in_dim": (lambda dt: (real(dt, shape=(4, 5)),), (-1, 0, False), {}),
    "dynamic_slice_in_dim": (lambda dt: (real(dt, shape=(4, 5)),), (-3, 2, 1), {}),
    "dynamic_index_in_dim": (lambda dt: (real(dt, shape=(4, 5)),), (2, 1, False), {}),
    "dynamic_update_slice_in_dim": (lambda dt: (real(dt, shape=(4, 5)),
                                                real(dt, shape=(4, 2), seed=4)), (3, 1), {}),
    "dynamic_update_index_in_dim": (lambda dt: (real(dt, shape=(4, 5)),
                                                real(dt, shape=(5,), seed=4)), (2, 0), {}),
    "dynamic_update_slice": (lambda dt: (real(dt, shape=(4, 5)), real(dt, shape=(2, 2),
                                                                       seed=4)),
                             ((3, 1),), {}),
    "conv_general_dilated": (lambda dt: (real(dt, shape=(2, 4, 6, 5)),
                                         real(dt, shape=(6, 2, 3, 2), seed=3)),
                             ((2, 1), ((1, 0), (2, 1)), (1, 2), (2, 1), None, 2), {}),
    "conv": (lambda dt: (real(dt, shape=(2, 3, 6, 5)), real(dt, shape=(4, 3, 3, 2), seed=3)),
             ((1, 2), "SAME"), {}),
    "conv_with_general_padding": (lambda dt: (real(dt, shape=(2, 3, 6, 5)),
                                              real(dt, shape=(4, 3, 3, 2), seed=3)),
                                  ((2, 1), ((1, 1), (0, -1)), (1, 1), (2, 1)), {}),
    "conv_transpose": (lambda dt: (real(dt, shape=(2, 5, 6, 3)),
                                   real(dt, shape=(3, 2, 3, 4), seed=3)),
                       ((2, 1), "SAME"), {}),
    "conv_transpose_kernel": (lambda dt: (real(dt, shape=(2, 3, 5, 6)),
                                          real(dt, shape=(3, 4, 3, 2), seed=3)), (), {
        "call": lambda lax, x, w: lax.conv_transpose(
            x, w, (2, 3), ((1, 2), (0, 1)), (1, 2), ("NCHW", "IOHW", "NHCW"),
            transpose_kernel=True)}),
    "conv_batch_group_count": (lambda dt: (real(dt, shape=(4, 5, 6, 3)),
                                           real(dt, shape=(3, 2, 3, 4), seed=3)), (), {
        "call": lambda lax, x, w: lax.conv_general_dilated(
            x, w, (1, 2), "VALID", dimension_numbers=("NHWC", "HWIO", "NCHW"),
            batch_group_count=2)}),
    "gather": (lambda dt: (real(dt), np.array([[2], [0]], np.int32)),
               (None, (1, 4)), {"call": lambda lax, x, i: lax.gather(
                   x, i, lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,),
                                                    start_index_map=(0,)), (1, 4))}),
    "scatter": (lambda dt: (real(dt), np.array([[2], [0]], np.int32), real(dt, shape=(2, 4))),
                (), {"call": lambda lax, x, i, u: lax.scatter(
                    x, i, u, lax.ScatterDimensionNumbers(
                        update_window_dims=(1,), inserted_window_dims=(0,),
                        scatter_dims_to_operand_dims=(0,)))}),
    "acosh": (lambda dt: (positive(dt) + np.asarray(1, dt),), (), {}),
    "asinh": (lambda dt: (real(dt),), (), {}),
    "atanh": (lambda dt: (unit(dt) * np.asarray(0.9, dt),), (), {}),
    "square": (lambda dt: (real(dt),), (), {}),
    "clamp": (lambda dt: (np.asarray(-0.5, dt), real(dt), np.asarray(0.75, dt)), (),
              {"argnums": 1}),
    "full": (lambda dt: (), ((2, 3), 1.5), {"transforms": ("value", "jit")}),
    "full_like": (lambda dt: (real(dt),), (2.0, np.int32), {"transforms": ("value", "jit")}),
    "empty": (lambda dt: (), ((0, 3), np.float32), {"transforms": ("value", "jit")}),
    "dot": (lambda dt: (real(dt), real(dt, shape=(4, 2), seed=5)), (), {}),
    "dot_precision": (lambda dt: (real(dt), real(dt, shape=(4, 2), seed=5)), (), {
        "call": lambda lax, x, y: lax.dot(x, y, precision=lax.Precision.HIGHEST,
                                          preferred_element_type=x.dtype)}),
    "conj": (lambda dt: (real(dt),), (), {"transforms": ("value", "jit")}),
    "real": (lambda dt: (real(dt) + 1j * real(dt, seed=2),), (),
             {"transforms": ("value", "jit")}),
    "imag": (lambda dt: (real(dt) + 1j * real(dt, seed=2),), (),
             {"transforms": ("value", "jit")}),
    "bitwise_and": (lambda dt: (ints(), ints()[::-1].copy()), (), {}),
    "bitwise_or": (lambda dt: (ints() > 0, ints()[::-1] > 0), (), {}),
    "bitwise_xor": (lambda dt: (ints(), ints()[::-1].copy()), (), {}),
    "bitwise_not": (lambda dt: (ints(),), (), {}),
    "shift_left": (lambda dt: (ints(), np.abs(ints()[::-1]) % 5), (), {}),
    "shift_right_logical": (lambda dt: (np.abs(ints()), np.abs(ints()[::-1]) % 5), (), {}),
    # issue 33: special functions, scans, sorts, reductions over a computation, windows
    "erf_inv": (lambda dt: (unit(dt) * np.asarray(0.9, dt),), (), {}),
    "erfc": (lambda dt: (real(dt),), (), {}),
    "lgamma": (lambda dt: (positive(dt) + np.asarray(0.5, dt),), (), {}),
    "digamma": (lambda dt: (positive(dt) + np.asarray(0.5, dt),), (), {}),
    "bessel_i0e": (lambda dt: (real(dt),), (), {}),
    "bessel_i1e": (lambda dt: (real(dt),), (), {}),
    "cumprod": (lambda dt: (real(dt),), (1, False), {}),
    "cummax": (lambda dt: (nonzero(dt),), (0, True), {}),
    "cummin": (lambda dt: (nonzero(dt),), (1,), {}),
    "cumlogsumexp": (lambda dt: (real(dt),), (1, True), {}),
    "sort": (lambda dt: (real(dt),), (0,), {}),
    "sort_multi": (lambda dt: (np.round(real(dt)), real(dt, seed=2)), (), {
        "call": lambda lax, k, v: lax.concatenate(list(lax.sort((k, v), dimension=1)), 0),
        "argnums": (0, 1)}),
    "sort_two_keys": (lambda dt: (np.round(real(dt)), real(dt, seed=2)), (), {
        "call": lambda lax, k, v: lax.sort([k, v], num_keys=2)[1], "argnums": 1}),
    "sort_key_val": (lambda dt: (real(dt), real(dt, seed=2)), (), {
        "call": lambda lax, k, v: lax.concatenate(list(lax.sort_key_val(k, v, 0)), 1),
        "argnums": (0, 1)}),
    "top_k": (lambda dt: (real(dt),), (), {"call": lambda lax, x: lax.top_k(x, 2)[0]}),
    "top_k_indices": (lambda dt: (real(dt),), (), {"call": lambda lax, x: lax.top_k(x, 3)[1]}),
    "top_k_axis": (lambda dt: (real(dt),), (), {
        "call": lambda lax, x: lax.top_k(x, 2, axis=0)[0]}),
    "batch_matmul": (lambda dt: (real(dt, shape=(2, 3, 4)), real(dt, shape=(2, 4, 5), seed=3)),
                     (), {}),
    "reduce": (lambda dt: (real(dt),), (), {
        "call": lambda lax, x: lax.reduce(x, np.asarray(-np.inf, x.dtype), lax.max, (1,))}),
    "reduce_add": (lambda dt: (real(dt),), (), {
        "call": lambda lax, x: lax.reduce(x, np.asarray(0, x.dtype),
                                          lambda a, b: a + b, (0, 1))}),
    "reduce_init": (lambda dt: (real(dt),), (), {
        "call": lambda lax, x: lax.reduce((x,), (np.asarray(2, x.dtype),),
                                          lambda a, b: (lax.add(a[0], b[0]),), (0,))[0]}),
    "reduce_window": (lambda dt: (real(dt, shape=(2, 5, 4)),), (), {
        "call": lambda lax, x: lax.reduce_window(x, -np.inf, lax.max, (1, 2, 2), (1, 2, 1),
                                                 "SAME")}),
    "reduce_window_add": (lambda dt: (real(dt, shape=(2, 5, 4)),), (), {
        "call": lambda lax, x: lax.reduce_window(x, 0.0, lax.add, (1, 3, 2), (1, 1, 2),
                                                 ((0, 0), (1, 2), (0, 1)), (1, 2, 1),
                                                 (1, 1, 2))}),
    "reduce_window_min": (lambda dt: (real(dt),), (), {
        "call": lambda lax, x: lax.reduce_window(x, np.inf, lax.min, (2, 2), (1, 1),
                                                 "VALID")}),
    "reduce_window_dilated": (lambda dt: (real(dt),), (), {     # JAX: no VJP with dilation
        "call": lambda lax, x: lax.reduce_window(x, -np.inf, lax.max, (2, 2), (1, 1),
                                                 "SAME", (2, 1), (1, 2))}),
    "reduce_window_mul": (lambda dt: (nonzero(dt),), (), {
        "call": lambda lax, x: lax.reduce_window(x, 1.0, lax.mul, (2, 2), (1, 2), "VALID"),
        "transforms": ("value", "jit")}),
    "scatter_add": (lambda dt: (real(dt), np.array([[2], [2]], np.int32),
                                real(dt, shape=(2, 4))),
                    (), {"call": lambda lax, x, i, u: lax.scatter_add(
                        x, i, u, lax.ScatterDimensionNumbers(
                            update_window_dims=(1,), inserted_window_dims=(0,),
                            scatter_dims_to_operand_dims=(0,)))}),
})
# integer operands: lax's division rounds toward zero, rem takes the dividend's sign
INT_CASES = {"add": (ints(), ints()[::-1].copy()), "div": (ints(), ints()[::-1] | 1),
             "rem": (ints(), ints()[::-1] | 1), "max": (ints(), ints()[::-1].copy()),
             "abs": (ints(),), "sign": (ints(),), "neg": (ints(),), "integer_pow": (ints(),),
             "reduce_sum": (ints(),), "cumsum": (ints(),), "argmax": (ints(),),
             "convert_element_type": (ints(),)}

# the collectives: under vmap with axis_name (JAX's way of naming a mapped axis)
COLLECTIVES = {
    "psum": lambda L, x: L.lax.psum(x, "i"),
    "pmean": lambda L, x: L.lax.pmean(x, "i"),
    "pmax": lambda L, x: L.lax.pmax(x, "i"),
    "pmin": lambda L, x: L.lax.pmin(x, "i"),
    "all_gather": lambda L, x: L.lax.all_gather(x, "i"),
    "axis_index": lambda L, x: L.lax.axis_index("i") + L.np.zeros_like(x, dtype=L.np.int32),
    "axis_size": lambda L, x: x * L.lax.axis_size("i"),
    "ppermute": lambda L, x: L.lax.ppermute(x, "i", [(0, 1), (1, 2), (2, 0)]),
    "psum_scatter": lambda L, x: L.lax.psum_scatter(x, "i", tiled=True),
    "psum:kw": lambda L, x: L.lax.psum(x=x, axis_name="i"),
    "all_gather:kw": lambda L, x: L.lax.all_gather(x, axis_name="i", axis=1, tiled=True),
    "ppermute:kw": lambda L, x: L.lax.ppermute(x, axis_name="i", perm=[(0, 2), (2, 1), (1, 0)]),
    "psum:grad": lambda L, x: L.top.grad(lambda v: L.np.sum(L.lax.psum(v * v, "i")))(x),
}


def _lax_call(name, params, opts):
    call = opts.get("call")
    if call is not None:
        return lambda np_, lax, *xs: call(lax, *xs)
    return lambda np_, lax, *xs: getattr(lax, name)(*xs, *params)


def _lax_case(name, variant):
    inputs, params, opts = LAX[name]
    x64_on = variant == "x64"
    dt = np.float64 if x64_on else np.float32
    transforms = opts.get("transforms", ("value", "grad", "jit"))
    if name in NO_GRAD:
        transforms = tuple(t for t in transforms if t != "grad")
    if variant == "inf":
        # infinities and NaN among ordinary values and signed zeros: values and grads, x64
        x64_on = True
        transforms = ("value",) if name in NO_GRAD else ("value", "grad")
        row = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 1.0, -1.0, 0.5, 2.0, -3.0])
        xs = (row,) if name in UNARY else (row, row[::-1].copy())
    elif variant == "int":
        xs = INT_CASES[name]
        transforms = ("value", "jit")
        if name == "integer_pow":
            params = (3,)
        elif name == "convert_element_type":
            params = (np.float32,)
    else:
        xs = inputs(dt)
    if variant == "kw":
        # every parameter by JAX's name, as inspect.signature(jax.lax.<name>) has them
        names = list(inspect.signature(getattr(jax.lax, name)).parameters)

        def call(lax):
            return getattr(lax, name)(**dict(zip(names, list(xs) + list(params))))
        with x64(False):
            # JAX takes the keywords (traced only: eval_shape compiles nothing) and gives
            # the shapes and dtypes; ours by keyword equals ours by position, which the
            # `lax:<name>` case compares with JAX's values
            want = jax.eval_shape(lambda: call(jax.lax))
            ours = oracle._attempt(lambda: call(ft.lax))
            if isinstance(ours, BaseException):
                raise oracle.Mismatch(f"by keyword: we raise {type(ours).__name__}: {ours}")
            compare((np.shape(ours), oracle.dtype_name(np.asarray(ours).dtype)),
                    (want.shape, oracle.dtype_name(want.dtype)), "shape and dtype")
            compare(ours, getattr(ft.lax, name)(*xs, *params), "by keyword against by position")
            return
    fn = _lax_call(name, params, opts)
    if x64_on:                       # float64: the precise comparison of values and grads
        transforms = tuple(t for t in transforms if t != "jit")
    elif xs and "jit" in transforms:
        transforms = tuple(t for t in transforms if t != "jit") + ("jit_vmap",)
    with x64(x64_on):
        run_functional(fn, *xs, transforms=transforms, argnums=opts.get("argnums", 0))


LAX_IDS = ([f"lax:{n}" for n in LAX] + [f"lax:{n}:x64" for n in LAX]
           + [f"lax:{n}:kw" for n in LAX if "call" not in LAX[n][2]]
           + [f"lax:{n}:int" for n in INT_CASES]
           + [f"lax:{n}:inf" for n in list(UNARY) + list(BINARY)]
           + [f"lax:{n}" for n in COLLECTIVES])
register(*LAX_IDS)


@pytest.mark.parametrize("case_id", LAX_IDS)
def test_lax(case_id):
    parts = case_id.split(":")
    name, variant = parts[1], parts[2] if len(parts) > 2 else ""
    if case_id[4:] in COLLECTIVES:
        name = case_id[4:]
        x = real(np.float32, shape=(3, 3))
        fn = COLLECTIVES[name]
        return case(case_id, lambda: both(lambda L: L.top.vmap(
            lambda v: fn(L, v), axis_name="i")(x)))
    case(case_id, lambda: _lax_case(name, variant))


def test_every_shared_lax_function_is_a_case():
    shared = {n for n in dir(ft.lax) if not n.startswith("_") and hasattr(jax.lax, n)
              and callable(getattr(jax.lax, n)) and not isinstance(getattr(jax.lax, n), type)}
    assert shared <= set(LAX) | set(COLLECTIVES) | set(CONV_HELPERS) | {
                                                     "cond", "switch", "while_loop",
                                                     "fori_loop", "scan", "map",
                                                     "associative_scan", "platform_dependent"}


# ---------------------------------------------------------------------------------------
# the convolutions' helpers (static values) and errors, eagerly
_X4, _W4 = np.ones((2, 4, 5, 5), np.float32), np.ones((6, 2, 3, 3), np.float32)
CONV_HELPERS = {
    "conv_dimension_numbers": lambda L: tuple(L.lax.conv_dimension_numbers(
        (2, 5, 6, 3), (3, 2, 3, 4), ("NHWC", "HWIO", "NCWH"))),
    "ConvDimensionNumbers": lambda L: tuple(L.lax.ConvDimensionNumbers(
        lhs_spec=(0, 2, 1), rhs_spec=(1, 0, 2), out_spec=(0, 1, 2))),
    "padtype_to_pads": lambda L: [tuple(L.lax.padtype_to_pads((7, 6, 5), (3, 2, 4), (2, 1, 3),
                                                              p))
                                  for p in ("SAME", "VALID", "same_lower")],
}
CONV_ERRORS = {     # name -> (fn, a pattern both errors match)
    "groups": (lambda L: L.lax.conv_general_dilated(_X4, _W4, (1, 1), "SAME"),
               r"4 // 1 != 2"),
    "out_groups": (lambda L: L.lax.conv_general_dilated(
        _X4, np.ones((5, 2, 3, 3), np.float32), (1, 1), "SAME", feature_group_count=2),
        r"5 is not a multiple of 2"),
    "batch_groups": (lambda L: L.lax.conv_general_dilated(
        _X4, np.ones((6, 4, 3, 3), np.float32), (1, 1), "SAME", batch_group_count=4),
        r"batch_group_count must divide lhs batch dimension size"),
    "ndim": (lambda L: L.lax.conv_general_dilated(_X4, np.ones((6, 4, 3), np.float32), (1, 1),
                                                  "SAME"), r"ndim to be equal, got 4 and 3"),
    "strides": (lambda L: L.lax.conv_general_dilated(_X4, _W4, (1,), "SAME",
                                                     feature_group_count=2),
                r"window_strides must have the same number of dimensions"),
    "dtypes": (lambda L: L.lax.conv_general_dilated(_X4, _W4.astype(np.int32), (1, 1), "SAME",
                                                    feature_group_count=2),
               r"same dtypes, got float32"),
    "padding_type": (lambda L: L.lax.conv(_X4, np.ones((6, 4, 3, 3), np.float32), (1, 1),
                                          "FOO"), r"Unrecognized padding type"),
    "padding_pairs": (lambda L: L.lax.conv(_X4, np.ones((6, 4, 3, 3), np.float32), (1, 1),
                                           (1, 1)), r"sequence of \(low, high\) pairs"),
    "string_dilated": (lambda L: L.lax.conv_general_dilated(
        _X4, np.ones((6, 4, 3, 3), np.float32), (1, 1), "SAME", lhs_dilation=(2, 1)),
        r"String padding is not implemented for transposed convolution"),
    "spec_chars": (lambda L: L.lax.conv_dimension_numbers(
        (2, 4, 5, 5), (6, 4, 3, 3), ("NCHW", "OIHW", "NCHX")),
        r"must each have the same set of spatial characters"),
    "spec_len": (lambda L: L.lax.conv_dimension_numbers(
        (2, 4, 5, 5), (6, 4, 3, 3), ("NCHW", "OIHW", "NCH")),
        r"dimension_numbers\[2\] must have len equal to the ndim"),
}
CONV_IDS = ([f"lax:conv:{n}" for n in CONV_HELPERS]
            + [f"lax:conv:error:{n}" for n in CONV_ERRORS])
register(*CONV_IDS)


@pytest.mark.parametrize("case_id", CONV_IDS)
def test_lax_conv_helpers(case_id):
    name = case_id.split(":")[-1]
    if name in CONV_HELPERS:
        return case(case_id, lambda: both(CONV_HELPERS[name]))
    fn, pattern = CONV_ERRORS[name]
    case(case_id, lambda: both(fn, error=pattern))


# ---------------------------------------------------------------------------------------
# dtypes: Python scalars (weak types) and NumPy inputs, x64 off and on
DTYPE_CASES = {
    "weak_scalar": lambda L: L.lax.add(np.ones(3, np.float32), 2.0),
    "weak_both": lambda L: L.lax.mul(2.0, 3.0),
    "weak_int": lambda L: L.lax.add(np.ones(3, np.int32), 2),
    "weak_mixed_error": lambda L: L.lax.add(np.ones(3, np.float32), 2),
    "dtype_mismatch_error": lambda L: L.lax.add(np.ones(3, np.float32), np.ones(3, np.float16)),
    "iota_default_int": lambda L: L.lax.iota(int, 3),
    "convert_float64": lambda L: L.lax.convert_element_type(np.ones(2, np.float32),
                                                            np.float64),
    "numpy_float64": lambda L: L.lax.sin(np.ones(2, np.float64)),
    "convert_bool": lambda L: L.lax.convert_element_type(np.array([0.0, -0.0, 0.5, np.nan],
                                                                  np.float32), bool),
    "argmax_nan": lambda L: L.lax.argmax(np.array([1.0, np.nan, 3.0], np.float32), 0,
                                         np.int32),
}
DTYPE_CASES.update({
    # shape errors: JAX raises TypeError from every lax shape rule
    "shape_error_add": lambda L: L.lax.add(np.ones(3, np.float32), np.ones(4, np.float32)),
    "shape_error_transpose": lambda L: L.lax.transpose(np.ones((2, 3), np.float32), (0, 0)),
    "shape_error_reshape": lambda L: L.lax.reshape(np.ones(6, np.float32), (4,)),
})
# a result computed from Python scalars only is weakly typed in JAX: float16 + it is float16
WEAK_CASES = {
    "weak_result": lambda L: L.np.add(np.ones(2, np.float16), L.lax.mul(2.0, 3.0)),
    "weak_result_jit": lambda L: L.top.jit(lambda h: L.np.add(h, L.lax.mul(2.0, 3.0)))(
        np.ones(2, np.float16)),
}
DTYPE_ERRORS = {"weak_mixed_error": "dtype", "dtype_mismatch_error": "dtype",
                "shape_error_add": "shape", "shape_error_transpose": "permutation",
                "shape_error_reshape": r"reshape"}
DTYPE_IDS = ([f"lax:dtype:{n}:{m}" for n in DTYPE_CASES for m in ("x32", "x64")]
             + [f"lax:dtype:{n}" for n in WEAK_CASES])
register(*DTYPE_IDS)


@pytest.mark.parametrize("case_id", DTYPE_IDS)
def test_lax_dtypes(case_id):
    if case_id.count(":") == 2:
        return case(case_id, lambda: both(WEAK_CASES[case_id.split(":")[2]]))
    _, _, name, mode = case_id.split(":")
    fn = DTYPE_CASES[name]

    def run():
        with x64(mode == "x64"):
            both(fn, error=DTYPE_ERRORS.get(name))
            both(lambda L: L.top.jit(lambda: fn(L))())
    case(case_id, run)


# ---------------------------------------------------------------------------------------
# control flow under grad, vmap (batched predicates), jit and nested
def _f(L, x):
    return L.np.sin(x) * 2.0


def _g(L, x):
    return L.np.cos(x) - x


X = np.array([0.3, -1.2, 2.0], np.float32)
P = np.array([True, False, True])
IDX = np.array([-1, 1, 5], np.int32)     # out of range: clamped, as JAX


def _cond(L, p, x):
    return L.lax.cond(p, lambda v: _f(L, v), lambda v: _g(L, v), x)


def _switch(L, i, x):
    return L.lax.switch(i, [lambda v: _f(L, v), lambda v: _g(L, v), lambda v: v * v], x)


def _while(L, x):
    return L.lax.while_loop(lambda c: c[0] < 5.0, lambda c: (c[0] + c[1], c[1] * 1.5), (x, 1.0))


def _fori(L, x):
    return L.lax.fori_loop(0, 4, lambda i, c: c * L.np.sin(c) + i, x)


def _scan(L, x, **kw):
    def body(c, v):
        return c * v + 1.0, L.np.tanh(c) * v
    return L.lax.scan(body, x[0], x, **kw)


CONTROL = {
    "cond": lambda L: _cond(L, True, X),
    "cond:int_pred": lambda L: _cond(L, np.int32(0), X),
    "cond:grad": lambda L: L.top.grad(lambda x: L.np.sum(_cond(L, False, x)))(X),
    "cond:jit": lambda L: L.top.jit(lambda p, x: _cond(L, p, x))(False, X),
    "cond:vmap": lambda L: L.top.vmap(lambda p, x: _cond(L, p, x))(P, X),
    "cond:vmap_grad": lambda L: L.top.vmap(L.top.grad(lambda p, x: _cond(L, p, x),
                                                      argnums=1))(P, X),
    "cond:grad_vmap": lambda L: L.top.grad(lambda x: L.np.sum(L.top.vmap(
        lambda p, v: _cond(L, p, v))(P, x)))(X),
    "cond:nested": lambda L: L.top.vmap(L.top.grad(lambda p, x: L.lax.cond(
        p, lambda v: _cond(L, v > 0, v), lambda v: v ** 3, x), argnums=1))(P, X),
    "cond:operands": lambda L: L.lax.cond(True, lambda a, b: a + b, lambda a, b: a - b,
                                          X, np.float32(2)),
    "switch": lambda L: [_switch(L, i, X) for i in (-1, 0, 1, 2, 7)],
    "switch:grad": lambda L: L.top.grad(lambda x: L.np.sum(_switch(L, 1, x)))(X),
    "switch:jit": lambda L: L.top.jit(lambda i, x: _switch(L, i, x))(np.int32(9), X),
    "switch:vmap": lambda L: L.top.vmap(lambda i, x: _switch(L, i, x))(IDX, X),
    "switch:vmap_grad": lambda L: L.top.vmap(L.top.grad(lambda i, x: _switch(L, i, x),
                                                        argnums=1))(IDX, X),
    "while_loop": lambda L: _while(L, np.float32(0.5)),
    "while_loop:jit": lambda L: L.top.jit(lambda x: _while(L, x))(np.float32(0.5)),
    "while_loop:vmap": lambda L: L.top.vmap(lambda x: _while(L, x))(X),
    "while_loop:jvp": lambda L: L.top.jvp(lambda x: _while(L, x)[0], (np.float32(0.5),),
                                          (np.float32(1.0),)),
    "while_loop:grad_error": lambda L: L.top.grad(lambda x: _while(L, x)[0])(
        np.float32(0.5)),
    "fori_loop": lambda L: _fori(L, X),
    "fori_loop:grad": lambda L: L.top.grad(lambda x: L.np.sum(_fori(L, x)))(X),
    "fori_loop:vmap": lambda L: L.top.vmap(lambda x: _fori(L, x))(X),
    "fori_loop:jit_grad": lambda L: L.top.jit(L.top.grad(lambda x: L.np.sum(_fori(L, x))))(X),
    "fori_loop:dynamic": lambda L: L.top.jit(lambda n, x: L.lax.fori_loop(
        0, n, lambda i, c: c + i * c, x))(np.int32(3), X),
    "fori_loop:dynamic_grad_error": lambda L: L.top.grad(lambda x: L.np.sum(L.top.jit(
        lambda n, v: L.lax.fori_loop(0, n, lambda i, c: c * 1.5, v))(np.int32(3), x)))(X),
    "scan": lambda L: _scan(L, X),
    "scan:reverse": lambda L: _scan(L, X, reverse=True),
    "scan:unroll": lambda L: _scan(L, X, unroll=2),
    "scan:length": lambda L: L.lax.scan(lambda c, _: (c * 2.0, c), np.float32(1.5), None,
                                        length=4),
    "scan:grad": lambda L: L.top.grad(lambda x: L.np.sum(_scan(L, x, reverse=True)[1])
                                      + _scan(L, x)[0])(X),
    "scan:vmap": lambda L: L.top.vmap(lambda x: _scan(L, x))(np.stack([X, X * 2])),
    "scan:jit": lambda L: L.top.jit(lambda x: _scan(L, x, unroll=3))(X),
    "scan:pytree": lambda L: L.lax.scan(
        lambda c, v: ({"a": c["a"] + v["x"], "b": c["b"] * 2}, (v["x"] * c["a"], c["b"])),
        {"a": np.float32(0), "b": np.int32(1)}, {"x": X}),
    "scan:nested_grad": lambda L: L.top.grad(lambda x: L.lax.scan(
        lambda c, v: (L.lax.scan(lambda d, w: (d * w + c, None), c, x)[0] + v, None),
        np.float32(0.1), x)[0])(X),
    "map": lambda L: L.lax.map(lambda v: _f(L, v), np.stack([X, X])),
    "map:batch_size": lambda L: L.lax.map(lambda v: _f(L, v), np.stack([X] * 5),
                                          batch_size=2),
    "map:grad": lambda L: L.top.grad(lambda x: L.np.sum(L.lax.map(
        lambda v: _f(L, v) * v, x)))(np.stack([X, -X])),
    "select:vmap": lambda L: L.top.vmap(lambda p, a, b: L.lax.select(p, a, b))(
        P, X, -X),
    "select:vmap_scalar_pred": lambda L: L.top.vmap(
        lambda p, a: L.lax.select(p, a, L.np.zeros_like(a)), in_axes=(0, None))(
            P, X),
    "dynamic_slice:vmap_start": lambda L: L.top.vmap(
        lambda i, x: L.lax.dynamic_slice(x, (i, 1), (2, 2)), in_axes=(0, None))(
            np.array([-1, 0, 3, 9], np.int32), np.arange(20.0, dtype=np.float32).reshape(4, 5)),
    "dynamic_slice:jit_grad": lambda L: L.top.jit(L.top.grad(
        lambda x, i: L.np.sum(L.lax.dynamic_slice(x, (i,), (2,)) ** 2)))(X, np.int32(2)),
    "dynamic_update_slice:vmap_grad": lambda L: L.top.vmap(L.top.grad(
        lambda u, x: L.np.sum(L.lax.dynamic_update_slice(x, u * u, (1,)) * x),
        argnums=(0, 1)), in_axes=(0, None))(np.stack([X[:2], X[1:]]), X),
    "fori_loop:unroll": lambda L: L.lax.fori_loop(0, 5, lambda i, c: c * 0.5 + i, X, unroll=2),
    "cond:error_branch_types": lambda L: L.lax.cond(True, lambda v: v, lambda v: v[:2], X),
    "cond:error_pred_shape": lambda L: L.lax.cond(P, lambda v: v, lambda v: -v, X),
    "scan:error_carry_type": lambda L: L.lax.scan(lambda c, v: (c + 1.0, v),
                                                  np.int32(0), X),
    "scan:error_xs_lengths": lambda L: L.lax.scan(lambda c, v: (c, v), 0.0, (X, X[:2])),
    "cond:error_branch_trees": lambda L: L.lax.cond(True, lambda v: (v, v), lambda v: v, X),
    "scan:error_length": lambda L: L.lax.scan(lambda c, v: (c, v), 0.0, X, length=5),
    "while_loop:error_body_type": lambda L: L.lax.while_loop(
        lambda c: c < 3, lambda c: c + 1.0, np.int32(0)),
    "switch:error_branch_types": lambda L: L.lax.switch(
        0, [lambda v: v, lambda v: v.astype(L.np.int32)], X),
    "scan:vmap_cond_grad": lambda L: L.top.vmap(L.top.grad(lambda x: L.lax.scan(
        lambda c, v: (L.lax.cond(v > 0, lambda a: a * v, lambda a: a + L.np.sin(v), c), c),
        np.float32(1.0), x)[0]))(np.stack([X, -X, X[::-1]])),
    "while_loop:vmap_jvp": lambda L: L.top.vmap(lambda x: L.top.jvp(
        lambda v: _while(L, v)[0], (x,), (np.float32(1.0),)))(np.array([0.5, 4.0, -3.0],
                                                                        np.float32)),
    "fori_loop:vmap_grad": lambda L: L.top.vmap(L.top.grad(lambda x: L.np.sum(_fori(L, x))))(
        np.stack([X, X * 0.5])),
    "cond:jit_vmap_grad": lambda L: L.top.jit(L.top.vmap(L.top.grad(
        lambda p, x: L.np.sum(_cond(L, p, x)), argnums=1)))(P, np.stack([X, -X, X * 2])),
    "switch:scan_vmap": lambda L: L.top.vmap(lambda i, x: L.lax.scan(
        lambda c, v: (_switch(L, i, c + v), c), np.float32(0.0), x))(IDX, np.stack([X] * 3)),
    "map:vmap": lambda L: L.top.vmap(lambda x: L.lax.map(lambda v: _f(L, v), x))(
        np.stack([np.stack([X, X])] * 2)),
    "scan:kw": lambda L: L.lax.scan(f=lambda c, v: (c + v, c * v), init=np.float32(1.0),
                                    xs=X, length=3, reverse=True, unroll=1),
    "while_loop:kw": lambda L: L.lax.while_loop(cond_fun=lambda c: c < 10.0,
                                                body_fun=lambda c: c * 2.0,
                                                init_val=np.float32(1.0)),
    "fori_loop:kw": lambda L: L.lax.fori_loop(lower=0, upper=3, body_fun=lambda i, c: c + i,
                                              init_val=np.int32(0)),
    "map:kw": lambda L: L.lax.map(f=lambda v: v * 2, xs=X, batch_size=2),
    "switch:kw": lambda L: L.lax.switch(index=1, branches=[lambda: X, lambda: -X]),
    "cond:kw_funs": lambda L: L.lax.cond(False, true_fun=lambda: X, false_fun=lambda: -X),
    "select:grad": lambda L: L.top.grad(lambda a, b: L.np.sum(L.lax.select(P, a * a, b)),
                                        argnums=(0, 1))(X, X),
    "cond:vmap_grad_untaken_branch": lambda L: L.top.grad(lambda x: L.np.sum(L.top.vmap(
        lambda v: L.lax.cond(v < 1e-6, lambda: 0.0, lambda: L.np.sqrt(v)))(x)))(
        np.array([0.0, 4.0, 0.0], np.float32)),
    "switch:vmap_jacrev": lambda L: L.top.jacrev(lambda v: L.top.vmap(lambda p, a: L.lax.switch(
        p, [lambda u: u * 2, lambda u: L.np.log(u), lambda u: u ** 3], a))(
        np.array([0, 1, 2, 5, -1]), v))(np.array([0.0, 1.0, 2.0, 0.0, 4.0], np.float32)),
    "linear_transpose": lambda L: L.top.linear_transpose(
        lambda x, y: (2 * x + y.sum(), x @ W3), np.ones(3, np.float32), np.ones(2, np.float32))(
        (np.array([1.0, -2.0, 0.5], np.float32), np.array([0.25, 1.0, 3.0], np.float32))),
    "named_call:jit_grad": lambda L: L.top.jit(L.top.grad(L.top.named_call(
        lambda x: L.np.sum(L.np.sin(x) * x), name="f")))(X),
    "platform_dependent:jit": lambda L: L.top.jit(lambda x: L.lax.platform_dependent(
        x, cpu=lambda v: v * 3, default=lambda v: v))(X),
    "associative_scan:add": lambda L: [L.lax.associative_scan(L.np.add, np.arange(
        1.0, n + 1, dtype=np.float32)) for n in (1, 2, 5, 8, 13)],
    "associative_scan:reverse_axis": lambda L: L.lax.associative_scan(
        L.np.maximum, np.stack([X, -X, X[::-1]]), reverse=True, axis=1),
    "associative_scan:pytree_recurrence": lambda L: L.lax.associative_scan(
        lambda a, b: (a[0] * b[0], a[1] * b[0] + b[1]), (np.stack([X] * 7), np.stack([-X] * 7))),
    "associative_scan:grad_vmap_jit": lambda L: L.top.jit(L.top.vmap(L.top.grad(
        lambda x: L.np.sum(L.lax.associative_scan(L.np.multiply, x) ** 2))))(
        np.stack([X, X * 0.5, -X])),
    "linearize:int_tangent_error": lambda L: L.top.linearize(
        lambda x: x * 2, np.int32(3))[1](np.float32(1.0)),
    "jit:masked_array_error": lambda L: L.top.jit(lambda x: x * 2)(
        np.ma.masked_array([1.0, 2.0], mask=[0, 1])),
    "associative_scan:error_sizes": lambda L: L.lax.associative_scan(
        lambda a, b: a, (X, X[:2])),
}
CONTROL_ERRORS = {
    "cond:error_branch_types": r"^cond branches must have equal output types but they differ",
    "cond:error_branch_trees": r"^cond branch outputs must have the same pytree structure, "
                               r"but they differ",
    "cond:error_pred_shape": r"[Pp]red must be a scalar",
    "scan:error_carry_type": r"^scan body function carry input and carry output must have "
                             r"equal types, but they differ",
    "scan:error_length": r"^scan got `length` argument of 5 which disagrees with leading "
                         r"axis sizes \[3\]",
    "scan:error_xs_lengths": r"^scan got values with different leading axis sizes: 3, 2",
    "while_loop:error_body_type": r"^while_loop body function carry input and carry output "
                                  r"must have equal types, but they differ",
    "switch:error_branch_types": r"^switch branches must have equal output types but they "
                                 r"differ",
    "while_loop:grad_error": "Reverse-mode differentiation does not work",
    "fori_loop:dynamic_grad_error": "Reverse-mode differentiation does not work",
    "linearize:int_tangent_error": r"^linearized function called on tangent values "
                                             r"inconsistent with the original primal values:\n"
                                             r"Got tangent aval f(loat)?32\[\] for primal aval "
                                             r"i(nt)?32\[\]",
    "jit:masked_array_error": r"^numpy masked arrays are not supported as direct inputs "
                                    r"to (JAX|functrans) functions\. Use arr\.filled\(\)",
    "associative_scan:error_sizes": r"^Array inputs to associative_scan must have the same "
                                    r"first dimension\. \(saw: \[\(3,\), \(2,\)\]\)"}
CONTROL_IDS = [f"lax:{n}" if ":" in n else f"lax:{n}:value" for n in CONTROL]
register(*CONTROL_IDS)


@pytest.mark.parametrize("case_id", CONTROL_IDS)
def test_control_flow(case_id):
    name = case_id[4:].removesuffix(":value")
    case(case_id, lambda: both(CONTROL[name], error=CONTROL_ERRORS.get(name)))


# ---------------------------------------------------------------------------------------
# the transformations
Pt = collections.namedtuple("Pt", "a b")
W = np.array([[0.5, -1.0, 2.0], [1.5, 0.0, -0.5]])
V = np.array([0.2, -0.7, 1.3])


def _loss(L, p):
    return L.np.sum(L.np.tanh(W @ p["w"]) * p["b"]) + L.np.sum(p["c"][0] ** 2)


W3 = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.5], [0.3, 0.8, -1.2]], np.float32)


def _policy_f(L):
    name = importlib.import_module(L.top.__name__ + ".ad_checkpoint").checkpoint_name
    return lambda x, w: L.np.sum(L.np.cos(name(L.np.sin(x @ w), "h") @ w))


def _saved(L, f, *args):
    """print_saved_residuals' lines, sorted, without JAX's source locations."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        importlib.import_module(L.top.__name__ + ".ad_checkpoint").print_saved_residuals(
            f, *args)
    return sorted(re.sub(r" from \S+:\d+(:\d+)? \(.*\)$", "", line)
                  for line in out.getvalue().splitlines())


def _sq(L):
    return lambda x: L.np.sum(L.np.sin(x) * x)


def _custom_jvp(L):
    @L.top.custom_jvp
    def f(x, y):
        return L.np.sin(x) * y

    @f.defjvp
    def f_jvp(primals, tangents):
        x, y = primals
        tx, ty = tangents
        return f(x, y), 2.0 * L.np.cos(x) * y * tx + L.np.sin(x) * ty   # 2x on purpose
    return f


def _custom_jvp_nondiff(L):
    from functools import partial

    @partial(L.top.custom_jvp, nondiff_argnums=(0,))
    def f(n, x):
        return x ** n

    @f.defjvp
    def f_jvp(n, primals, tangents):
        (x,), (t,) = primals, tangents
        return x ** n, 10.0 * n * x ** (n - 1) * t
    return f


def _custom_vjp(L, nondiff=False):
    from functools import partial
    if nondiff:
        @partial(L.top.custom_vjp, nondiff_argnums=(0,))
        def f(k, x):
            return L.np.exp(x) * k

        def fwd(k, x):
            return f(k, x), L.np.exp(x)

        def bwd(k, res, g):
            return (g * res * k * 3.0,)
    else:
        @L.top.custom_vjp
        def f(x, y):
            return L.np.exp(x) * y

        def fwd(x, y):
            return f(x, y), (L.np.exp(x), y)

        def bwd(res, g):
            e, y = res
            return g * e * y * 3.0, g * e
    f.defvjp(fwd, bwd)
    return f


TRANSFORMS = {
    "grad:argnums_int": lambda L: L.top.grad(lambda a, b: L.np.sum(a * L.np.sin(b)),
                                             argnums=1)(V, V * 2),
    "grad:argnums_tuple": lambda L: L.top.grad(lambda a, b: L.np.sum(a * L.np.sin(b)),
                                               argnums=(0, 1))(V, V * 2),
    "grad:has_aux": lambda L: L.top.grad(lambda a: (L.np.sum(a ** 2), {"m": a.mean()}),
                                         has_aux=True)(V),
    "grad:dict": lambda L: L.top.grad(lambda p: _loss(L, p))(
        {"w": V, "b": np.array([1.0, -2.0]), "c": (np.array(3.0), np.array(1.0))}),
    "grad:namedtuple": lambda L: L.top.grad(lambda p: L.np.sum(p.a * p.b ** 2))(
        Pt(V, V[::-1].copy())),
    "grad:float32": lambda L: L.top.grad(_sq(L))(V.astype(np.float32)),
    "value_and_grad": lambda L: L.top.value_and_grad(_sq(L))(V),
    "value_and_grad:has_aux": lambda L: L.top.value_and_grad(
        lambda a, b: (L.np.sum(a * b), a * 2), argnums=(0, 1), has_aux=True)(V, V + 1),
    "vjp": lambda L: (lambda out, f: (out, f((np.ones(2), np.array(2.0)))))(
        *L.top.vjp(lambda x: (W @ L.np.sin(x), L.np.sum(x)), V)),
    "jvp": lambda L: L.top.jvp(lambda x, y: (x * y, L.np.sin(x)), (V, V + 1), (V * 0 + 1, V)),
    "linearize": lambda L: (lambda out, f: (out, f(V * 3)))(
        *L.top.linearize(lambda x: L.np.tanh(x) * x, V)),
    "jacfwd": lambda L: L.top.jacfwd(lambda x: W @ L.np.sin(x))(V),
    "jacrev": lambda L: L.top.jacrev(lambda x: W @ L.np.sin(x))(V),
    "jacrev:argnums": lambda L: L.top.jacrev(lambda x, M: M @ x, argnums=(0, 1))(V, W),
    "jacfwd:pytree": lambda L: L.top.jacfwd(lambda p: {"y": p["a"] * p["b"]})(
        {"a": V, "b": np.array(2.0)}),
    "hessian": lambda L: L.top.hessian(lambda x: L.np.sum(L.np.sin(x) * x[::-1]))(V),
    "vmap:in_axes": lambda L: L.top.vmap(lambda a, b: a @ b, in_axes=(1, None))(W, V[:2]),
    "vmap:in_axes_negative": lambda L: L.top.vmap(lambda a: a * 2, in_axes=-1)(W),
    "vmap:in_axes_pytree": lambda L: L.top.vmap(lambda p: p["x"] * p["y"],
                                                in_axes=({"x": 0, "y": None},))(
        {"x": W, "y": np.array(3.0)}),
    "vmap:out_axes": lambda L: L.top.vmap(lambda a: (a, a * 2), out_axes=(1, -1))(W),
    "vmap:out_axes_none": lambda L: L.top.vmap(lambda a: (a, 5.0), out_axes=(0, None))(V),
    "vmap:axis_size": lambda L: L.top.vmap(lambda a: a + 1, in_axes=None, axis_size=3)(V),
    "vmap:nested": lambda L: L.top.vmap(L.top.vmap(lambda a, b: a * b, (0, None)),
                                        (None, 0))(V, W),
    "jit:static_argnums": lambda L: L.top.jit(lambda x, n: x ** n, static_argnums=1)(V, 3),
    "jit:static_argnames": lambda L: L.top.jit(lambda x, n: x * n, static_argnames="n")(
        V, n=4),
    "jit:pytree": lambda L: L.top.jit(lambda p: {"s": p["a"] + p["b"][0]})(
        {"a": V, "b": (V, None)}),
    "custom_jvp": lambda L: (_custom_jvp(L)(V, V), L.top.grad(
        lambda x, y: L.np.sum(_custom_jvp(L)(x, y)), argnums=(0, 1))(V, V)),
    "custom_jvp:nondiff_argnums": lambda L: L.top.grad(
        lambda x: L.np.sum(_custom_jvp_nondiff(L)(3, x)))(V),
    "custom_jvp:vmap": lambda L: L.top.vmap(L.top.grad(
        lambda x: _custom_jvp(L)(x, 2.0)))(V),
    "custom_vjp": lambda L: L.top.grad(lambda x, y: L.np.sum(_custom_vjp(L)(x, y)),
                                       argnums=(0, 1))(V, V),
    "custom_vjp:nondiff_argnums": lambda L: L.top.grad(
        lambda x: L.np.sum(_custom_vjp(L, True)(2.0, x)))(V),
    "custom_vjp:jit_vmap": lambda L: L.top.jit(L.top.vmap(L.top.grad(
        lambda x: _custom_vjp(L)(x, 1.5))))(V),
    "checkpoint": lambda L: L.top.value_and_grad(L.top.checkpoint(
        lambda x: L.np.sum(L.np.sin(L.np.sin(x)) * x)))(V),
    "remat": lambda L: L.top.grad(lambda x: L.np.sum(L.top.remat(
        lambda v: L.np.exp(v) * v)(x) ** 2))(V),
    "checkpoint:policy_dots": lambda L: L.top.value_and_grad(L.top.checkpoint(
        _policy_f(L), policy=L.top.checkpoint_policies.dots_saveable), argnums=(0, 1))(W3, W3.T),
    "checkpoint:policy_names_jit_vmap": lambda L: L.top.jit(L.top.vmap(L.top.grad(
        L.top.checkpoint(_policy_f(L), policy=L.top.checkpoint_policies.save_only_these_names(
            "h"))), in_axes=(0, None)))(np.stack([W3, -W3]), W3.T),
    "checkpoint:policy_both_hvp": lambda L: L.top.jvp(L.top.grad(L.top.checkpoint(
        _policy_f(L), policy=L.top.checkpoint_policies.save_from_both_policies(
            L.top.checkpoint_policies.dots_with_no_batch_dims_saveable,
            L.top.checkpoint_policies.save_anything_except_these_names("h")))),
        (W3, W3.T), (W3.T, W3)),
    "checkpoint:saved_residuals": lambda L: sorted(
        _saved(L, L.top.checkpoint(_policy_f(L), policy=policy), W3, W3.T)
        for policy in (None, L.top.checkpoint_policies.nothing_saveable,
                       L.top.checkpoint_policies.everything_saveable,
                       L.top.checkpoint_policies.dots_saveable,
                       L.top.checkpoint_policies.save_only_these_names("h"))),
    "stop_gradient": lambda L: L.top.grad(lambda x: L.np.sum(
        L.lax.stop_gradient(x * x) * x))(V),
    "stop_gradient:pytree": lambda L: L.top.grad(lambda x: L.np.sum(
        L.lax.stop_gradient({"a": x, "b": (x,)})["b"][0] * x))(V),
    "eval_shape": lambda L: (lambda o: [(s.shape, str(s.dtype)) for s in o])(
        L.top.eval_shape(lambda x, y: (x @ y, L.np.sum(x, 0).astype(L.np.int32)),
                         L.top.ShapeDtypeStruct((2, 3), np.float32), np.ones((3, 4),
                                                                             np.float32))),
    "tree_util:tree_map": lambda L: L.tu.tree_map(lambda a, b: a * b,
                                                  {"x": V, "y": (V, None)},
                                                  {"x": 2.0, "y": (3.0, None)}),
    "tree_util:flatten": lambda L: (lambda lv, td: (lv, td.num_leaves, L.tu.tree_unflatten(
        td, [v * 2 for v in lv])))(*L.tu.tree_flatten(
            {"b": [V, (1.0, None)], "a": Pt(2.0, {"z": V})})),
    "tree_util:leaves_none": lambda L: L.tu.tree_leaves([None, (None,), {"a": None, "b": 1}]),
    "tree_util:structure": lambda L: L.tu.tree_structure((1, [2, None], {"k": 3})).num_leaves,
    "compose:grad_of_vmap": lambda L: L.top.grad(lambda w: L.np.sum(L.top.vmap(
        lambda x: L.np.tanh(w @ x))(np.ones((4, 1)) * V)))(W),
    "compose:vmap_of_grad": lambda L: L.top.vmap(L.top.grad(_sq(L)))(W),
    "compose:jit_grad_vmap": lambda L: L.top.jit(L.top.grad(lambda w: L.np.sum(L.top.vmap(
        lambda x: L.np.sin(w * x))(W))))(V),
    "compose:hvp": lambda L: L.top.jvp(L.top.grad(_sq(L)), (V,), (V[::-1].copy(),)),
    "compose:jacfwd_jacrev": lambda L: L.top.jacfwd(L.top.jacrev(
        lambda x: L.np.sum(L.np.exp(x) * x[0])))(V),
    "compose:vmap_jvp_grad": lambda L: L.top.vmap(lambda t: L.top.jvp(
        L.top.grad(_sq(L)), (V,), (t,))[1])(W @ np.ones((3, 3))),
    "error:grad_nonscalar": lambda L: L.top.grad(lambda x: x * 2)(V),
    "error:grad_integer": lambda L: L.top.grad(lambda x: L.np.sum(x * 2))(np.arange(3)),
    "error:vmap_sizes": lambda L: L.top.vmap(lambda a, b: a + b)(V, W),
    "vmap:out_axes_dict": lambda L: L.top.vmap(lambda a: {"x": a, "y": (a * 2, a.sum())},
                                               out_axes={"x": 1, "y": (0, None)})(W),
    "vmap:in_axes_none_leaf": lambda L: L.top.vmap(lambda p: p["x"] + p["y"],
                                                   in_axes=({"x": 1, "y": None},))(
        {"x": W, "y": V[:2]}),
    "jacrev:has_aux": lambda L: L.top.jacrev(lambda x: (L.np.sin(x) * x, {"n": x.sum()}),
                                             has_aux=True)(V),
    "jacfwd:has_aux_argnums": lambda L: L.top.jacfwd(lambda x, y: (x * y, y), argnums=1,
                                                     has_aux=True)(V, V + 1),
    "hessian:pytree": lambda L: L.top.hessian(lambda p: L.np.sum(p["a"] ** 2 * p["b"]))(
        {"a": V, "b": np.array(2.0)}),
    "grad:of_jit": lambda L: L.top.grad(L.top.jit(lambda x, n: L.np.sum(x ** n),
                                                   static_argnums=1))(V, 3),
    "value_and_grad:int_output_error": lambda L: L.top.grad(
        lambda x: L.np.sum(x).astype(L.np.int32))(V),
    "error:vmap_in_axes_rank": lambda L: L.top.vmap(lambda a: a, in_axes=2)(V),
    "error:vmap_in_axes_tree": lambda L: L.top.vmap(lambda a, b: a + b, in_axes=(0,))(V, V),
    "error:jit_static_unhashable": lambda L: L.top.jit(lambda x, n: x * len(n),
                                                      static_argnums=1)(V, [1, 2]),
    "error:jvp_tangent_dtype": lambda L: L.top.jvp(L.np.sin, (V,), (V.astype(np.float32),)),
    "error:vjp_cotangent_shape": lambda L: L.top.vjp(L.np.sin, V)[1](np.ones(2)),
    "error:has_aux_not_pair": lambda L: L.top.grad(lambda x: L.np.sum(x), has_aux=True)(V),
}
TRANSFORM_ERRORS = {
    "value_and_grad:int_output_error": r"[Gg]rad requires real-valued outputs",
    "error:vmap_in_axes_rank": r"vmap was requested to map its argument along axis 2, which "
                               r"implies that its rank should be at least 3, but is only 1",
    "error:vmap_in_axes_tree": r"vmap in_axes",
    "error:jit_static_unhashable": r"[Nn]on-hashable static arguments",
    # the same sentence, naming each library's jvp
    "error:jvp_tangent_dtype": r"^primal and tangent arguments to (jax\.)?jvp do not match; "
                               r"dtypes must be equal",
    "error:vjp_cotangent_shape": r"[Ss]hape",
    "error:grad_nonscalar": r"Gradient only defined for scalar-output functions",
    "error:grad_integer": r"grad requires real- or complex-valued inputs",
    "error:vmap_sizes": r"vmap got inconsistent sizes for array axes to be mapped",
    "error:has_aux_not_pair": r"with aux output to return a two-element tuple",
}

# jax.nn functions that functrans.nn has
NN_X = np.array([[-3.0, -1.0, -0.0, 0.0, 1e-3], [0.5, 1.0, 5.9, 6.0, 8.0],
                 [-np.inf, 2.0, 2.0, -20.0, 30.0]])
NN = {
    "relu": lambda L, x: L.nn.relu(x),
    "relu6": lambda L, x: L.nn.relu6(x),
    "gelu:approximate": lambda L, x: L.nn.gelu(x, approximate=True),
    "gelu:exact": lambda L, x: L.nn.gelu(x, approximate=False),
    "softplus": lambda L, x: L.nn.softplus(x),
    "sigmoid": lambda L, x: L.nn.sigmoid(x),
    "log_sigmoid": lambda L, x: L.nn.log_sigmoid(x),
    "silu": lambda L, x: L.nn.silu(x),
    "swish": lambda L, x: L.nn.swish(x),
    "elu": lambda L, x: L.nn.elu(x, 0.7),
    "leaky_relu": lambda L, x: L.nn.leaky_relu(x, negative_slope=0.2),
    "softmax": lambda L, x: L.nn.softmax(x, axis=-1),
    "softmax:axis0": lambda L, x: L.nn.softmax(x, axis=0),
    "log_softmax": lambda L, x: L.nn.log_softmax(x),
    "logsumexp": lambda L, x: L.nn.logsumexp(x, axis=1),
    "logsumexp:keepdims": lambda L, x: L.nn.logsumexp(x, axis=0, keepdims=True),
    "standardize": lambda L, x: L.nn.standardize(x * 0.1, axis=-1),
    "one_hot": lambda L, x: L.nn.one_hot(np.array([0, 2, -1, 3]), 3),
    "one_hot:dtype": lambda L, x: L.nn.one_hot(np.array([[1], [0]]), 4, dtype=np.int32,
                                               axis=0),
    "celu": lambda L, x: L.nn.celu(x, 0.5),
    "selu": lambda L, x: L.nn.selu(x),
    "glu": lambda L, x: L.nn.glu(x[..., :4]),
    "glu:axis": lambda L, x: L.nn.glu(x[:2], axis=0),
    "hard_tanh": lambda L, x: L.nn.hard_tanh(x),
    "hard_sigmoid": lambda L, x: L.nn.hard_sigmoid(x),
    "hard_silu": lambda L, x: L.nn.hard_silu(x),
    "hard_swish": lambda L, x: L.nn.hard_swish(x),
    "soft_sign": lambda L, x: L.nn.soft_sign(x),
    "squareplus": lambda L, x: L.nn.squareplus(x, b=2.0),
    "mish": lambda L, x: L.nn.mish(x),
    "sparse_plus": lambda L, x: L.nn.sparse_plus(x),
    "sparse_sigmoid": lambda L, x: L.nn.sparse_sigmoid(x),
    "softmax:where": lambda L, x: L.nn.softmax(x, where=NN_WHERE),
    "log_softmax:where": lambda L, x: L.nn.log_softmax(x, axis=0, where=NN_WHERE),
    "dot_product_attention": lambda L, x: L.nn.dot_product_attention(
        *_attention_inputs(L, x)),
    "dot_product_attention:masks": lambda L, x: L.nn.dot_product_attention(
        *_attention_inputs(L, x), bias=_ATT_BIAS.astype(x.dtype), mask=_ATT_MASK, scale=0.3,
        is_causal=True, local_window_size=(2, 0)),
    "dot_product_attention:lengths": lambda L, x: L.nn.dot_product_attention(
        *_attention_inputs(L, x), query_seq_lengths=np.array([2, 3], np.int32),
        key_value_seq_lengths=np.array([4, 1], np.int32)),
}
NN_WHERE = NN_X > -2
NN_WHERE[2] = False                     # a row with nothing: softmax 0, log_softmax -inf
_ATT = np.random.default_rng(3).standard_normal((2, 6, 2, 5))
_ATT_BIAS = np.random.default_rng(4).standard_normal((2, 4, 3, 6))
_ATT_MASK = np.random.default_rng(5).standard_normal((2, 1, 3, 6)) > -0.5


def _attention_inputs(L, x):
    """query (2, 3, 4, 5) from tanh(x) (finite, differentiable in x), key and value (2, 6,
    2, 5): grouped heads, two query heads per key head."""
    q = L.np.tanh(L.np.concatenate([x] * 8, axis=0)).reshape(2, 3, 4, 5)
    return q, _ATT.astype(x.dtype), (_ATT[::-1] * 0.5).astype(x.dtype)


def _nn_case(name, mode):
    fn = NN[name]
    no_grad = name.startswith("one_hot")
    if (name.startswith("dot_product_attention") or name.endswith(":where")) \
            and mode == "x32":
        mode = "x32-novmap"             # their other operands have x's whole shape: no vmap
    dt, flag = (np.float64, True) if mode == "x64" else (np.float32, False)
    with x64(flag):
        x = NN_X.astype(dt)
        # (the softmax runs in float32 in both, its gradient summed over the keys)
        tol = (2e-5, 2e-5) if name.startswith("dot_product_attention") else (None, None)
        both(lambda L: fn(L, x), oracle_jit=True, rtol=tol[0], atol=tol[1])
        if mode == "x32":            # vmap under jit; float64 is for values and grads
            both(lambda L: L.top.jit(L.top.vmap(lambda v: fn(L, v)))(x))
        if not no_grad:
            # away from the infinity (whose gradient is NaN-prone in both); not at -5 either,
            # where float32 1 + tanh(...) cancels to rounding noise in gelu's gradient
            xf = np.nan_to_num(x, neginf=-2.0)
            both(lambda L: L.top.grad(lambda v: L.np.sum(fn(L, v) * np.arange(
                fn(L, v).size, dtype=v.dtype).reshape(fn(L, v).shape)))(xf), oracle_jit=True,
                 rtol=tol[0], atol=tol[1])


def _shapes(tree):
    """(shape, dtype name) of every array in tree: random values are compared this way."""
    return jax.tree_util.tree_map(lambda a: (tuple(np.shape(a)), str(np.asarray(a).dtype)),
                                  oracle._to_numpy_tree(tree))


RANDOM = {
    "PRNGKey": lambda L: L.random.PRNGKey(0),
    "key": lambda L: L.random.PRNGKey(1),
    "split": lambda L: L.random.split(L.random.PRNGKey(0), 3),
    "fold_in": lambda L: L.random.fold_in(L.random.PRNGKey(0), 7),
    "uniform": lambda L: L.random.uniform(L.random.PRNGKey(0), (2, 3)),
    "uniform:dtype": lambda L: L.random.uniform(L.random.PRNGKey(0), (2,), np.float16, -1, 1),
    "normal": lambda L: L.random.normal(L.random.PRNGKey(0), (4,)),
    "randint": lambda L: L.random.randint(L.random.PRNGKey(0), (3,), 0, 10),
    "bernoulli": lambda L: L.random.bernoulli(L.random.PRNGKey(0), 0.3, (5,)),
    "categorical": lambda L: L.random.categorical(L.random.PRNGKey(0), np.zeros((2, 4)),
                                                  axis=-1),
    "permutation": lambda L: L.random.permutation(L.random.PRNGKey(0), 6),
    "choice": lambda L: L.random.choice(L.random.PRNGKey(0), 5, (3,), replace=False),
    "gumbel": lambda L: L.random.gumbel(L.random.PRNGKey(0), (2, 2)),
    "vmap_split": lambda L: L.top.vmap(lambda k: L.random.normal(k, (2,)))(
        L.random.split(L.random.PRNGKey(0), 4)),
}

_JAX_RANDOM: dict = {}


def _jax_random(mode):
    """Every RANDOM function's (shape, dtype) under JAX, from one jitted program per x64
    mode (a compilation per function would dominate the table's time)."""
    if mode not in _JAX_RANDOM:
        names = list(RANDOM) if mode == "x32" else list(RANDOM_X64)
        outs = jax.jit(lambda: [RANDOM[n](J) for n in names])()
        _JAX_RANDOM[mode] = dict(zip(names, (_shapes(o) for o in outs)))
    return _JAX_RANDOM[mode]


RANDOM_X64 = ("uniform", "normal", "randint", "categorical", "gumbel")
TRANSFORM_IDS = ([f"transform:{n}" for n in TRANSFORMS]
                 + [f"transform:nn:{n}:{m}" for n in NN for m in ("x32", "x64")]
                 + [f"transform:random:{n}:x32" for n in RANDOM]
                 + [f"transform:random:{n}:x64" for n in RANDOM_X64])
register(*TRANSFORM_IDS)


@pytest.mark.parametrize("case_id", TRANSFORM_IDS)
def test_transform(case_id):
    rest = case_id.split(":", 1)[1]
    if rest.startswith("nn:"):
        name, mode = rest[3:].rsplit(":", 1)
        return case(case_id, lambda: _nn_case(name, mode))
    if rest.startswith("random:"):
        name, mode = rest[7:].rsplit(":", 1)

        def run():
            with x64(mode == "x64"):
                compare(_shapes(RANDOM[name](F)), _jax_random(mode)[name],
                        "shapes and dtypes")
        return case(case_id, run)

    def run():
        with x64(True):      # float64 inputs, compared to 1e-9
            both(TRANSFORMS[rest], error=TRANSFORM_ERRORS.get(rest))
    case(case_id, run)


# ---------------------------------------------------------------------------------------
# hypothesis: elementwise functions on random small shapes whose values mix the awkward
# ones (signed zeros, ties, kinks at 0 and +-1, infinities, NaN) in float64
from hypothesis import given, strategies as st  # noqa: E402

AWKWARD = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -3.5, 1e-300, 1e300, np.inf, -np.inf,
           np.nan]
ELEMENTWISE = sorted(n for n in list(UNARY) + list(BINARY))


@st.composite
def _elementwise_inputs(draw):
    name = draw(st.sampled_from(ELEMENTWISE))
    shape = draw(st.sampled_from([(), (3,), (2, 3)]))
    n = int(np.prod(shape))
    vals = st.one_of(st.sampled_from(AWKWARD),
                     st.floats(-10, 10, allow_nan=False, allow_infinity=False))
    arrays = [np.array(draw(st.lists(vals, min_size=n, max_size=n)),
                       np.float64).reshape(shape) for _ in range(1 if name in UNARY else 2)]
    return name, arrays


HYP_IDS = register("lax:hypothesis:elementwise")


@pytest.mark.parametrize("case_id", HYP_IDS)
def test_elementwise_hypothesis(case_id):
    @given(_elementwise_inputs())
    def check(inp):
        name, xs = inp
        params = (3,) if name == "integer_pow" else ()
        transforms = ("value",) if name in NO_GRAD else ("value", "grad")
        with x64(True):
            run_functional(lambda np_, lax, *a: getattr(lax, name)(*a, *params), *xs,
                           transforms=transforms)
    case(case_id, check)
