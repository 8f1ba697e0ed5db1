"""vmap: batching as an interpreter that reads the primitives' batching rules.

A named axis (`vmap(f, axis_name="i")`, `pmap`) is a BatchTrace whose main carries an
`AxisFrame` (name, size, process axis or not) instead of a bare size. Collectives over a
name are bound on the trace of that name (`named_trace`) and batched there by their
`named_batch` rule, named_batch(prim, vals, dims, frame, **params); a jaxpr batched by a
rule of a named trace (jit, cond, scan, ...) gets the same name, so collectives inside
staged code reduce over the same axis."""
from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Callable
from typing import Any

from . import staged_rules, tree_util
from .core import (Array, ClosedJaxpr, RuleNotImplementedError, ShapedArray, bind_below, Trace, Tracer,
                   _thread_state, canonicalize, eval_jaxpr, full_lower, get_aval, new_main,
                   to_concrete, value_of, with_origin)
from .primitives.base import broadcast_batched, moveaxis
from .tracing import trace_to_jaxpr

not_mapped = None


class AxisFrame:
    """A named mapped axis: `procs` is None for vmap, else the process axis of pmap
    (a `procs`-sized world of processes, each holding `size` local entries)."""
    __slots__ = ("name", "size", "procs")

    def __init__(self, name, size, procs=None):
        self.name, self.size, self.procs = name, size, procs

    def __repr__(self):
        return f"AxisFrame({self.name!r}, {self.size}, procs={self.procs})"


class _Naming(threading.local):
    frame = None        # the frame of the named trace whose batching rule is running


_naming = _Naming()


def named_trace(name):
    """The innermost live BatchTrace bound to axis `name`, or None."""
    for main in reversed(_thread_state.trace_stack):
        g = main.global_data
        if type(g) is AxisFrame and main.trace_type is BatchTrace and g.name == name:
            return BatchTrace(main)
    return None


def axis_env():
    """The named axes in scope, outermost first: ((name, size, procs), ...). What a
    function traced now may read of them (axis_size) is part of its trace, so caches of
    traces key on it."""
    return tuple((g.name, g.size, g.procs) for g in
                 (main.global_data for main in _thread_state.trace_stack)
                 if type(g) is AxisFrame)


def current_axis_name():
    """The axis name given to jaxprs batched now (None outside a named trace's rule)."""
    f = _naming.frame
    return None if f is None else (f.name, f.procs)


class BatchTracer(Tracer):
    __slots__ = ("val", "batch_dim", "_aval")

    def __init__(self, trace, val, batch_dim):
        self._trace = trace
        self._origin = None
        self.val = val
        self.batch_dim = batch_dim
        self._aval = None

    @property
    def aval(self):
        a = self._aval
        if a is None:
            a = get_aval(self.val)
            if self.batch_dim is not None:
                shape = a.shape
                d = self.batch_dim
                a = ShapedArray(shape[:d] + shape[d + 1:], a.dtype, a.weak_type)
            self._aval = a
        return a

    def full_lower(self):
        if self.batch_dim is None:
            return full_lower(self.val)
        return self

    def to_concrete_value(self):
        return to_concrete(self.val) if self.batch_dim is None else None


class BatchTrace(Trace):
    transformation = "ft.vmap"

    def pure(self, val):
        return BatchTracer(self, val, None)

    lift = pure

    @property
    def axis_size(self):
        g = self.main.global_data
        return g.size if type(g) is AxisFrame else g

    def process_primitive(self, prim, tracers, params):
        vals = [t.val for t in tracers]
        dims = [t.batch_dim for t in tracers]
        g = self.main.global_data
        if type(g) is AxisFrame:
            out, out_dim = _apply_named(prim, vals, dims, params, g)
        else:
            out, out_dim = apply_batch_rule(prim, vals, dims, params)
        if prim.multiple_results:
            return with_origin([BatchTracer(self, o, d) for o, d in zip(out, out_dim,
                                                                         strict=True)], prim)
        return with_origin(BatchTracer(self, out, out_dim), prim)


def apply_batch_rule(prim, vals, dims, params):
    """(out, out_dim) of prim on values batched along dims (None: unbatched). With
    concrete operands the rule runs as its staged form (see staged_rules)."""
    if all(d is None for d in dims):
        out = bind_below(prim, vals, params)
        return out, ([None] * len(out) if prim.multiple_results else None)
    if prim.batch is None:
        raise RuleNotImplementedError(
            f"Batching rule for '{prim.name}' not implemented. Add batch=... to the "
            "primitive's declaration in primitives/.")
    return staged_rules.batch_rule(prim)(vals, dims, **params)


def _apply_named(prim, vals, dims, params, frame):
    """A primitive on a named trace: collectives by their named_batch rule (which sees the
    frame); other rules run unstaged (a staged rule's cache does not know the name), with
    the frame visible to the jaxprs they batch."""
    named = prim.extra.get("named_batch")
    if named is not None:
        return named(prim, vals, dims, frame, **params)
    if all(d is None for d in dims):
        return apply_batch_rule(prim, vals, dims, params)
    if prim.batch is None:
        return apply_batch_rule(prim, vals, dims, params)   # raises the missing-rule error
    prev, _naming.frame = _naming.frame, frame
    try:
        return prim.batch(vals, dims, **params)
    finally:
        _naming.frame = prev


def _move_out(x, from_dim, to_dim, size, i=0, frame=None):
    if to_dim is None:
        if from_dim is not None:
            named = "" if frame is None else f" (axis_name={frame.name})"
            raise ValueError(f"vmap has mapped output{named} but out_axes is None at vmap "
                             f"out_axes for output leaf {i}: the output varies along the "
                             "mapped axis, so it needs an out_axes entry that is an int")
        return x
    if from_dim is None:
        return broadcast_batched(x, size, to_dim % (get_aval(x).ndim + 1))
    return moveaxis(x, from_dim, to_dim)


def vmap_flat(f_flat, in_dims, out_dims_thunk, size, args, frame=None):
    """f_flat batched over `size` entries; `frame`: the AxisFrame naming the axis."""
    with new_main(BatchTrace, size if frame is None else frame) as main:
        trace = BatchTrace(main)
        # a mapped Array enters as its raw array (batch rules run implementations on the
        # values); an unmapped one stays as it is (a constant: returned as is when forwarded)
        tracers = [x if d is None else BatchTracer(trace, value_of(x) if type(x) is Array
                                                   else x, d)
                   for x, d in zip(args, in_dims)]
        outs = f_flat(*tracers)
        tracers_out = [trace.full_raise(o) for o in outs]
        vals = [t.val for t in tracers_out]
        dims = [t.batch_dim for t in tracers_out]
        out_dims = out_dims_thunk()
        outs = [_move_out(v, d, od, size, i, frame)
                for i, (v, d, od) in enumerate(zip(vals, dims, out_dims, strict=True))]
    outs = [full_lower(o) for o in outs]
    forwarded = {id(value_of(x)): x for x, d in zip(args, in_dims)
                 if d is None and type(x) is Array and not x.is_deleted()}
    if forwarded:       # an unmapped Array's raw array came out unchanged: the Array itself
        outs = [forwarded.get(id(o), o) for o in outs]
    return outs


def _broadcast_prefix(prefix, tree, what):
    """in_axes/out_axes given as a prefix pytree of `tree`: one entry per leaf."""
    if prefix is None or isinstance(prefix, int):
        return [prefix] * len(tree_util.tree_leaves(tree))
    out = []
    pleaves, ptree = tree_util.tree_flatten(prefix, is_leaf=lambda x: x is None)
    if ptree == tree_util.tree_structure(tree) or len(pleaves) == len(tree_util.tree_leaves(tree)):
        return [p for p in pleaves]
    if isinstance(prefix, (tuple, list)) and isinstance(tree, (tuple, list)) and len(prefix) == len(tree):
        for p, t in zip(prefix, tree):
            out.extend(_broadcast_prefix(p, t, what))
        return out
    if isinstance(prefix, dict) and isinstance(tree, dict) and set(prefix) == set(tree):
        for k in sorted(tree):
            out.extend(_broadcast_prefix(prefix[k], tree[k], what))
        return out
    structure = tree_util.tree_structure(tree)
    has = "an array" if structure == tree_util.LEAF else f"a {type(tree).__name__}"
    raise ValueError(f"vmap {what} specification must be a tree prefix of the corresponding "
                     f"value; got {what} {prefix!r} for a value of structure {structure}.\n"
                     f"Mismatch details: the specification has a {type(prefix).__name__} "
                     f"where the value has {has}: different types or lengths")


def _check_axes_spec(in_axes):
    """in_axes as JAX accepts it: an int, None, or a tuple/list of per-argument prefixes
    whose leaves are ints or None (a dict or another pytree at the top is refused)."""
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    if not (in_axes is None or type(in_axes) in (int, tuple)):
        raise TypeError("vmap in_axes must be an int, None, or a tuple of entries corresponding "
                        "to the positional arguments passed to the function, but got "
                        f"{in_axes}.")
    leaves = tree_util.tree_leaves(in_axes, is_leaf=lambda x: x is None)
    if any(a is not None and type(a) is not int for a in leaves):
        raise TypeError("vmap in_axes must be an int, None, or (nested) container with those "
                        f"types as leaves, but got {in_axes}.")
    return in_axes


def vmap(fun: Callable[..., Any], in_axes: Any = 0, out_axes: Any = 0,
         axis_size: int | None = None, axis_name: Any = None) -> Callable[..., Any]:
    """Vectorize fun over a leading (or chosen) axis of its arguments; `axis_name` names
    the mapped axis for the collectives (ft.lax.psum, ...) inside fun. Keyword arguments
    are mapped along axis 0 (in_axes names positional arguments only), as JAX's."""
    if any(a is not None and type(a) is not int
           for a in tree_util.tree_leaves(out_axes, is_leaf=lambda x: x is None)):
        raise TypeError("vmap out_axes must be an int, None, or (nested) container with those "
                        f"types as leaves, but got {out_axes}.")
    batched = batch_with(fun, _check_axes_spec(in_axes), out_axes, axis_size, axis_name, None)
    name = getattr(fun, "__name__", "fun")
    doc = (f"Vectorized version of {name}. Takes similar arguments as {name} but "
           f"with additional array axes over which {name} is mapped.")
    original = getattr(fun, "__doc__", None)
    if original:
        doc += "\n\nOriginal documentation:\n\n" + original
    batched.__doc__ = doc
    return batched


def _leaf_names(fun, args, kwargs):
    """Each argument leaf's name for error messages, as JAX writes them: `argument x`,
    `argument b[0]`, `kwargs['y']`."""
    try:
        params = list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):
        params = []

    def paths(x, prefix):
        return [prefix + tree_util.keystr(k) for k, _ in tree_util.tree_leaves_with_path(x)]
    names = []
    for i, a in enumerate(args):
        p = params[i] if i < len(params) and params[i].kind in (
            inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD) else None
        names += paths(a, f"argument {p.name}" if p is not None else f"args[{i}]")
    for k in sorted(kwargs):
        names += paths(kwargs[k], f"kwargs[{k!r}]")
    return names


def _inconsistent_sizes(fun, args, kwargs, leaves, dims, axis_size):
    """JAX's message: each size with how many axes had it, the most common first."""
    names = _leaf_names(fun, args, kwargs)
    groups: dict = {}
    for name, x, d in zip(names, leaves, dims):
        if d is not None:
            a = get_aval(x)
            ty = f"{a.dtype.name}[{','.join(map(str, a.shape))}]"
            groups.setdefault(a.shape[d], []).append(f"axis {d} of {name} of type {ty}")
    lines = [] if axis_size is None else [f"the `axis_size` argument was {axis_size}"]
    order = sorted(groups, key=lambda sz: -len(groups[sz]))
    for i, sz in enumerate(order):
        where = groups[sz]
        if len(where) == 1:
            lines.append(f"one axis had size {sz}: {where[0]}")
        else:
            lines.append(f"{'most' if i == 0 else 'some'} axes ({len(where)} of them) had "
                         f"size {sz}, e.g. {where[0]}")
    return ValueError("vmap got inconsistent sizes for array axes to be mapped:\n" +
                      ";\n".join(f"  * {ln}" for ln in lines))


def batch_with(fun, in_axes, out_axes, axis_size, axis_name, procs):
    """vmap's body; pmap passes `procs`, the number of processes its axis spans."""
    @functools.wraps(fun)
    def batched(*args, **kwargs):
        axes_spec = tuple(in_axes) if isinstance(in_axes, list) else in_axes
        if isinstance(axes_spec, tuple) and len(axes_spec) != len(args):
            note = "" if not kwargs else (
                f" Note that the function was called with keyword arguments {sorted(kwargs)}, "
                "which the entries of a tuple in_axes never correspond to: keyword arguments "
                "are always mapped along their leading axis (axis 0)")
            raise ValueError(f"vmap in_axes must be an int, None, or a tuple of entries "
                             f"corresponding to the positional arguments passed to the "
                             f"function, but got len(in_axes)={len(axes_spec)}, "
                             f"len(args)={len(args)}.{note}")
        dims = _broadcast_prefix(axes_spec, tuple(args), "in_axes")
        if kwargs:
            dims = dims + [0] * len(tree_util.tree_leaves(kwargs))
            leaves, in_tree = tree_util.tree_flatten((tuple(args), kwargs))
        else:
            leaves, in_tree = tree_util.tree_flatten(tuple(args))
        leaves = [canonicalize(x) for x in leaves]
        sizes = set()
        norm_dims = []
        for x, d in zip(leaves, dims):
            if d is None:
                norm_dims.append(None)
                continue
            nd = get_aval(x).ndim
            if not -nd <= d < nd:
                raise ValueError(f"vmap was requested to map its argument along axis {d}, "
                                 f"which implies that its rank should be at least {d + 1}, "
                                 f"but is only {nd} (its shape is {get_aval(x).shape})")
            d %= nd
            norm_dims.append(d)
            sizes.add(get_aval(x).shape[d])
        if axis_size is not None:
            sizes.add(axis_size)
        if len(sizes) > 1:
            raise _inconsistent_sizes(fun, args, kwargs, leaves, norm_dims, axis_size)
        if not sizes:
            if not leaves:
                raise ValueError("vmap wrapped function must be passed at least one argument "
                                 "containing an array or axis_size must be specified, got "
                                 f"empty *args={tuple(args)} and **kwargs={kwargs}")
            raise ValueError("vmap must have at least one non-None value in in_axes, or be "
                             "given axis_size")
        size = sizes.pop()
        store = {}

        def f_flat(*ls):
            if kwargs:
                a, kw = tree_util.tree_unflatten(in_tree, ls)
                out = fun(*a, **kw)
            else:
                out = fun(*tree_util.tree_unflatten(in_tree, ls))
            out_leaves, store["tree"] = tree_util.tree_flatten(out)
            store["out"] = out
            return out_leaves

        def out_dims():
            return _broadcast_prefix(out_axes, store["out"], "out_axes")
        frame = None if axis_name is None else AxisFrame(axis_name, size, procs)
        outs = vmap_flat(f_flat, norm_dims, out_dims, size, leaves, frame)
        return tree_util.tree_unflatten(store["tree"], outs)
    return batched


def batch_jaxpr(closed, axis_size, in_batched, instantiate):
    """The jaxpr with its batched inputs/outputs carrying a leading axis of axis_size.

    Returns (closed_batched, out_batched); `instantiate` (bool or list) forces outputs to
    be batched. Called from a named trace's rule, the new trace has the same name."""
    n_out = len(closed.out_avals)
    frame = _naming.frame
    data = axis_size if frame is None else AxisFrame(frame.name, axis_size, frame.procs)
    inst = instantiate if isinstance(instantiate, (list, tuple)) else [instantiate] * n_out
    avals = [a.update(shape=(axis_size,) + a.shape) if b else a
             for a, b in zip(closed.in_avals, in_batched, strict=True)]
    store = {}

    def f(*args):
        prev, _naming.frame = _naming.frame, None   # set again by the named trace's rules
        try:
            return _batched_eval(args)
        finally:
            _naming.frame = prev

    def _batched_eval(args):
        with new_main(BatchTrace, data) as main:
            trace = BatchTrace(main)
            tracers = [BatchTracer(trace, x, 0) if b else x for x, b in zip(args, in_batched)]
            outs = [trace.full_raise(o) for o in eval_jaxpr(closed.jaxpr, closed.consts, *tracers)]
            res, ob = [], []
            for o, i in zip(outs, inst):
                if o.batch_dim is None and not i:
                    res.append(o.val)
                    ob.append(False)
                else:
                    res.append(_move_out(o.val, o.batch_dim, 0, axis_size))
                    ob.append(True)
            store["ob"] = ob
        return [full_lower(r) for r in res]
    jaxpr, consts = trace_to_jaxpr(f, avals)
    return ClosedJaxpr(jaxpr, consts), store["ob"]
