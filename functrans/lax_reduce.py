"""jax.lax.reduce and jax.lax.reduce_window over a monoid computation (add, mul, max, min;
and/or on booleans), re-exported by ft.lax with JAX's signatures.

The computation is traced once on two scalars: when it is one of those binary primitives,
the reduction is the matching reduce_* primitive, and a window reduction is the window
slices of the padded (and base-dilated) operand combined by it. Max and min windows pick
the first extreme element of each window (argmax over the stacked slices), so the gradient
goes to that one element, as XLA's select-and-scatter gives it (max pooling). Any other
computation raises, saying which ones are supported.
"""
from __future__ import annotations

import itertools

import numpy as np

from functrans.primitives import elementwise as _ew
from functrans.primitives import reductions as _red
from functrans.primitives import shape as _sh
from . import tree_util as _tu
from .core import ShapedArray, canonicalize, get_aval
from .tracing import trace_to_jaxpr

# the binary primitive of a monoid computation -> (its reduction primitive, its kind)
_MONOIDS = {
    _ew.add_p: (_red.reduce_sum, "add"),
    _ew.mul_p: (_red.reduce_prod, "mul"),
    _ew.max_p: (_red.reduce_max, "max"),
    _ew.min_p: (_red.reduce_min, "min"),
}
_BOOL_MONOIDS = {_ew.and_p: (_red.reduce_min, "min"), _ew.or_p: (_red.reduce_max, "max")}
_PAIRWISE = {"add": _ew.add, "mul": _ew.mul, "max": _ew.max, "min": _ew.min}


def _monoid(computation, dtype, tree, name):
    """(reduction, kind) for a computation that is one of the supported binary primitives
    applied to its two arguments, found by tracing it on two scalars of dtype (in the
    operands' structure tree: a tuple of one operand gives it tuples, as JAX does)."""
    if not callable(computation):
        raise TypeError(f"lax.{name}: computation must be callable, got "
                        f"{type(computation).__name__}")
    aval = ShapedArray((), np.dtype(dtype))

    def flat(x, y):
        out = computation(_tu.tree_unflatten(tree, [x]), _tu.tree_unflatten(tree, [y]))
        leaves, out_tree = _tu.tree_flatten(out)
        if out_tree != tree:
            raise TypeError(f"lax.{name}: the computation must return the operands' "
                            f"structure {tree}, got {out_tree}")
        return leaves
    jaxpr, _ = trace_to_jaxpr(flat, [aval, aval])
    table = dict(_MONOIDS, **(_BOOL_MONOIDS if np.dtype(dtype) == np.bool_ else {}))
    eqns = jaxpr.eqns
    if len(eqns) == 1 and eqns[0].primitive in table and \
            set(map(id, eqns[0].invars)) == set(map(id, jaxpr.invars)) and \
            len(jaxpr.invars) == 2 and list(jaxpr.outvars) == list(eqns[0].outvars):
        return table[eqns[0].primitive]
    raise NotImplementedError(
        f"lax.{name}: the computation {getattr(computation, '__name__', computation)!r} is "
        f"not a supported monoid (its trace is {[e.primitive.name for e in eqns]}); "
        f"{name} supports lax.add, lax.mul, lax.max and lax.min (and lax.bitwise_and/or on "
        "booleans) as the computation; write other reductions with lax.scan or "
        "lax.associative_scan")


def _single(operands, init_values, name):
    """The one operand and init value of a (non-variadic) reduction."""
    ops, tree = _tu.tree_flatten(operands)
    inits, itree = _tu.tree_flatten(init_values)
    if tree != itree or len(ops) != len(inits):
        raise ValueError(f"lax.{name}: operands and init_values must have the same "
                         f"structure, got {tree} and {itree}")
    if len(ops) != 1:
        raise NotImplementedError(
            f"lax.{name}: variadic reductions ({len(ops)} operands) are not supported; "
            "reduce one operand at a time, or use lax.argmax/argmin for index reductions")
    x = ops[0]
    if type(x) in (bool, int, float, complex):
        x = canonicalize(x)
    init = inits[0]
    dt = get_aval(x).dtype
    init = np.asarray(init, dt) if type(init) in (bool, int, float, complex) else \
        (init if get_aval(init).dtype == dt else _ew.convert_element_type(
            init, new_dtype=dt, weak_type=False))
    if get_aval(init).shape != ():
        raise TypeError(f"lax.{name}: init value must be a scalar, got shape "
                        f"{get_aval(init).shape}")
    return x, init, tree


def reduce(operands, init_values, computation, dimensions, out_sharding=None):
    """The reduction of operands over dimensions by computation, a monoid (lax.add, lax.mul,
    lax.max, lax.min; and/or on booleans) whose identity init_values is (another init value
    is combined once with the result)."""
    x, init, tree = _single(operands, init_values, "reduce")
    dims = tuple(int(d) % max(get_aval(x).ndim, 1) for d in dimensions)
    reducer, kind = _monoid(computation, get_aval(x).dtype, tree, "reduce")
    out = reducer(x, axes=dims)
    out = _PAIRWISE[kind](out, _full(init, get_aval(out).shape))
    return _tu.tree_unflatten(tree, [out])


def _full(v, shape):
    return v if shape == () else _sh.broadcast_in_dim(v, shape=shape, broadcast_dimensions=())


def padtype_to_pads(in_shape, window_shape, window_strides, padding):
    """(lo, hi) padding per spatial dim for 'VALID' (none), 'SAME' (output size ceil(n /
    stride), the odd element of padding at the end) or 'SAME_LOWER' (at the start)."""
    kind = padding.upper() if isinstance(padding, str) else padding
    if kind not in ("VALID", "SAME", "SAME_LOWER"):
        raise RuntimeError(f"Unrecognized padding type: expected 'VALID', 'SAME', or "
                           f"'SAME_LOWER', got {padding}.")
    if kind == "VALID":
        return [(0, 0)] * len(in_shape)
    pads = []
    for n, k, s in zip(in_shape, window_shape, window_strides):
        total = max(0, (-(-n // s) - 1) * s + k - n)
        lo = total // 2 if kind == "SAME" else total - total // 2
        pads.append((lo, total - lo))
    return pads


def _dims(v, nd, default, what):
    out = (default,) * nd if v is None else tuple(int(d) for d in v)
    if len(out) != nd:
        raise TypeError(f"lax.reduce_window: {what} must have one entry per operand "
                        f"dimension ({nd}), got {v}")
    return out


def reduce_window(operand, init_value, computation, window_dimensions, window_strides=None,
                  padding="VALID", base_dilation=None, window_dilation=None):
    """The reduction of every window of operand by computation (lax.add, lax.mul, lax.max,
    lax.min): the operand dilated by base_dilation and padded with init_value (padding a
    string 'VALID'/'SAME'/'SAME_LOWER' or (lo, hi) pairs), windows of window_dimensions
    (dilated by window_dilation) every window_strides. Sum and average pooling are lax.add
    with 0, max pooling lax.max with -inf."""
    x, init, tree = _single(operand, init_value, "reduce_window")
    shape = get_aval(x).shape
    nd = len(shape)
    win = _dims(window_dimensions, nd, 1, "window_dimensions")
    strides = _dims(window_strides, nd, 1, "window_strides")
    base = _dims(base_dilation, nd, 1, "base_dilation")
    wdil = _dims(window_dilation, nd, 1, "window_dilation")
    if any(v < 1 for v in win + strides + base + wdil):
        raise ValueError(f"lax.reduce_window: window dimensions, strides and dilations must "
                         f"be positive, got {win}, {strides}, {base}, {wdil}")
    dilated_in = tuple((n - 1) * b + 1 if n else 0 for n, b in zip(shape, base))
    dilated_win = tuple((w - 1) * d + 1 for w, d in zip(win, wdil))
    if isinstance(padding, str):
        pads = padtype_to_pads(dilated_in, dilated_win, strides, padding)
    else:
        pads = [tuple(int(v) for v in p) for p in padding]
        if len(pads) != nd:
            raise TypeError(f"lax.reduce_window: padding must have one (lo, hi) pair per "
                            f"operand dimension ({nd}), got {padding}")
    _, kind = _monoid(computation, get_aval(x).dtype, tree, "reduce_window")
    cfg = tuple((lo, hi, b - 1) for (lo, hi), b in zip(pads, base))
    if any(c != (0, 0, 0) for c in cfg):
        if any(lo < 0 or hi < 0 for lo, hi, _ in cfg):
            raise NotImplementedError("lax.reduce_window: negative padding is not supported")
        x = _sh.pad(x, init, padding_config=cfg)
    padded = get_aval(x).shape
    out_shape = tuple(max(0, (p - w) // s + 1) for p, w, s in zip(padded, dilated_win, strides))
    if 0 in out_shape:              # no windows: an empty result
        return _tu.tree_unflatten(tree, [_full(init, out_shape)])
    slices = []
    for offset in itertools.product(*(range(w) for w in win)):
        start = tuple(o * d for o, d in zip(offset, wdil))
        limit = tuple(st + (m - 1) * s + 1 for st, m, s in zip(start, out_shape, strides))
        slices.append(_sh.slice(x, start_indices=start, limit_indices=limit,
                                strides=None if all(s == 1 for s in strides) else strides))
    if kind in ("add", "mul"):
        out = slices[0]
        for s in slices[1:]:
            out = _PAIRWISE[kind](out, s)
    else:
        out = _pick_extreme(slices, kind)
    out = _PAIRWISE[kind](out, _full(init, out_shape)) if _needs_init(init, kind) else out
    return _tu.tree_unflatten(tree, [out])


def _needs_init(init, kind):
    """Whether init is not known to be kind's identity (then it is combined with the result
    once more: windows that lie inside the operand have not seen it)."""
    try:
        v = np.asarray(init)
    except Exception:  # noqa: BLE001 - a traced init value
        return True
    if v.dtype == object:
        return True
    identity = {"add": 0, "mul": 1}.get(kind)
    if identity is not None:
        return bool(v != identity)
    if v.dtype == np.bool_:
        return bool(v) != (kind == "min")
    if v.dtype.kind == "f":
        return not (np.isinf(v) and (v < 0) == (kind == "max"))
    info = np.iinfo(v.dtype)
    return bool(v != (info.min if kind == "max" else info.max))


def _pick_extreme(slices, kind):
    """The elementwise max (min) of the slices, the value of the first slice holding it:
    argmax over the stacked slices, then that slice's element (a select), so that the
    derivative flows to that one element."""
    if len(slices) == 1:
        return slices[0]
    shape = get_aval(slices[0]).shape
    stacked = _sh.concatenate(*[_sh.reshape(s, new_sizes=(1,) + shape) for s in slices],
                              dimension=0)
    arg = (_red.argmax if kind == "max" else _red.argmin)(
        stacked, axes=(0,), index_dtype=np.dtype(np.int32))
    k = len(slices)
    full = (k,) + shape
    which = _ew.eq(_sh.iota(dtype=np.dtype(np.int32), shape=full, dimension=0),
                   _sh.broadcast_in_dim(arg, shape=full,
                                        broadcast_dimensions=tuple(range(1, len(full)))))
    zero = _sh.broadcast_in_dim(np.zeros((), get_aval(stacked).dtype), shape=full,
                                broadcast_dimensions=())
    return _red.reduce_sum(_ew.select(which, stacked, zero), axes=(0,)) \
        if get_aval(stacked).dtype != np.bool_ else \
        _red.reduce_max(_ew.select(which, stacked, zero), axes=(0,))

