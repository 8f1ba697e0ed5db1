"""ft.lax.cond / switch / while_loop / fori_loop / scan: trace the user's functions into
sub-jaxprs and bind the control flow primitives of functrans/higher_order/control_flow.py.

Values the functions close over (arrays, or tracers of enclosing transformations) become
explicit operands, so that every transformation sees them. Pytrees are flattened here;
the primitives work on flat lists. Weakly typed Python scalars in a carry or a branch
output take the dtype of the value they meet, as in JAX.
"""
from __future__ import annotations

import inspect

import numpy as np

from . import tree_util
from .core import (ClosedJaxpr, Jaxpr, ShapedArray, Var, canonicalize, canonicalize_value,
                   get_aval, to_concrete)
from functrans.primitives import elementwise as ew
from .higher_order.control_flow import ControlFlowTypeError, cond_p, scan_p, while_p
from .tracing import trace_to_jaxpr

__all__ = ["cond", "switch", "while_loop", "fori_loop", "scan"]


def _trace_flat(fun, avals):
    """Trace fun (flat in, flat out) and hoist its constants into leading inputs.

    Returns (closed jaxpr taking consts + avals, consts)."""
    jaxpr, consts = trace_to_jaxpr(fun, list(avals))
    hoisted = Jaxpr([], jaxpr.constvars + jaxpr.invars, jaxpr.eqns, jaxpr.outvars)
    return ClosedJaxpr(hoisted, []), consts


def _flat_fun(fun, in_tree, cast=None):
    """fun over pytrees -> fun over flat leaves (out tree in the store); optional casts."""
    store = {}

    def f(*leaves):
        out = fun(*tree_util.tree_unflatten(in_tree, list(leaves)))
        out_leaves, store["tree"] = tree_util.tree_flatten(out)
        if cast is not None and len(cast) == len(out_leaves):
            out_leaves = _cast_leaves(out_leaves, cast)
        return out_leaves
    return f, store


def _one_leaf(x):
    """The array of a scalar argument given as a pytree of one leaf (an ft.Tensor)."""
    leaves = tree_util.tree_leaves(x)
    return leaves[0] if len(leaves) == 1 else x


def _leaves(tree):
    """Flat leaves, Python scalars kept as they are (their avals are weakly typed), NumPy
    values canonicalized (float64 -> float32 with jax_enable_x64 off, as JAX)."""
    leaves, treedef = tree_util.tree_flatten(tree)
    leaves = [canonicalize_value(x) for x in leaves]
    for x in leaves:
        get_aval(x)         # a clear error for a leaf that is not an array
    return leaves, treedef


def _operands(leaves):
    return [canonicalize(x) for x in leaves]


def _forward_carry(closed, nconsts, carry, outs):
    """A carry the loop body returns unchanged leaves the loop as it came in: outs with
    those entries replaced by the initial values (so they stay unbatched, unknown-free and
    cheap for every transformation downstream, as JAX's read-only carries)."""
    invars = closed.jaxpr.invars
    for j, v in enumerate(closed.jaxpr.outvars[:len(carry)]):
        if v is invars[nconsts + j]:
            outs[j] = carry[j]
    return outs


def _callable(what, *fns):
    """JAX's check that the functions given to a control flow construct are callable."""
    if not all(callable(f) for f in fns):
        raise TypeError(f"lax.{what} argument{'s' if ' and ' in what else ''} should be "
                        "callable.")


def _ty(aval):
    """An aval as JAX's messages write it: float32[3,4]."""
    return f"{aval.dtype.name}[{','.join(map(str, aval.shape))}]"


def _carry_name(fun):
    """The name the user's function gives its carry (its first parameter), for messages."""
    try:
        params = list(inspect.signature(fun).parameters)
    except (TypeError, ValueError):
        params = []
    return params[0] if params else "carry"


_KIND_RANK = {"b": 0, "u": 1, "i": 1, "f": 2, "c": 3}


def _weak_casts(avals_a, avals_b):
    """Dtype fixes so that weakly typed values agree with strongly typed ones.

    Returns (casts for a, casts for b): a list of dtype-or-None each."""
    ca, cb = [], []
    for a, b in zip(avals_a, avals_b):
        fix_a = fix_b = None
        if a.shape == b.shape and a.dtype != b.dtype:
            if a.weak_type and not b.weak_type:
                fix_a = b.dtype
            elif b.weak_type and not a.weak_type and _KIND_RANK[b.dtype.kind] <= \
                    _KIND_RANK[a.dtype.kind]:
                # a weak value of a higher kind (int32 carry + 1.0) keeps its dtype, so the
                # mismatch is reported, as in JAX
                fix_b = a.dtype
        ca.append(fix_a)
        cb.append(fix_b)
    return ca, cb


def _cast_leaves(leaves, casts):
    return [x if dt is None else ew.convert_element_type(x, new_dtype=dt, weak_type=False)
            for x, dt in zip(leaves, casts)]


def _avals_str(avals):
    return "(" + ", ".join(a.str_short() for a in avals) + ")"


# ---------------------------------------------------------------------------
# cond and switch

def _branch_index(index):
    index = _one_leaf(index)
    aval = get_aval(index)
    if aval.shape != ():
        raise TypeError(f"switch index must be a scalar, got {aval.str_short()}")
    if aval.dtype.kind not in "iub":
        raise TypeError(f"switch index must be an integer scalar, got {aval.str_short()}")
    index = canonicalize(index)
    if aval.dtype == np.int32:
        return index
    return ew.convert_element_type(index, new_dtype=np.dtype(np.int32), weak_type=False)


def _switch(index, branches, operands, names):
    ops, in_tree = _leaves(tuple(operands))
    avals = [get_aval(x) for x in ops]

    def trace(branch, casts=None):
        f, store = _flat_fun(branch, in_tree, casts)
        closed, consts = _trace_flat(f, avals)
        return closed, consts, store["tree"]
    traced = [trace(br) for br in branches]
    kind = "cond" if names[0] == "false_fun" else "switch"     # JAX's words first
    for name, (_, _, tree) in zip(names[1:], traced[1:]):
        if tree != traced[0][2]:
            raise ControlFlowTypeError(
                f"{kind} branch outputs must have the same pytree structure, but they differ: "
                f"{names[0]} and {name} output must have identical tree structure, got "
                f"{traced[0][2]} and {tree}")
    # weakly typed outputs (Python scalars) take the dtype of the other branches' outputs
    out_avals = [t[0].out_avals for t in traced]
    strong = [next((o.dtype for o in outs if not o.weak_type), None) for outs in zip(*out_avals)]
    for i, outs in enumerate(out_avals):
        casts = [dt if dt is not None and a.weak_type and a.dtype != dt else None
                 for a, dt in zip(outs, strong)]
        if any(c is not None for c in casts):
            traced[i] = trace(branches[i], casts)
    for name, (closed, _, _) in zip(names[1:], traced[1:]):
        a, b = traced[0][0].out_avals, closed.out_avals
        if any(x.shape != y.shape or x.dtype != y.dtype for x, y in zip(a, b)):
            raise ControlFlowTypeError(
                f"{kind} branches must have equal output types but they differ: "
                f"{names[0]} and {name} output must have identical types (shapes and dtypes), "
                f"got {_avals_str(a)} from {names[0]} and {_avals_str(b)} from {name}")
    # every branch takes the constants of all branches (ignoring the others'), then operands
    all_consts = [c for t in traced for c in t[1]]
    const_avals = [get_aval(c) for c in all_consts]
    closed_brs, off = [], 0
    for closed, consts, _ in traced:
        j, n = closed.jaxpr, len(consts)
        invars = ([Var(a) for a in const_avals[:off]] + j.invars[:n]
                  + [Var(a) for a in const_avals[off + n:]] + j.invars[n:])
        closed_brs.append(ClosedJaxpr(Jaxpr([], invars, j.eqns, j.outvars), []))
        off += n
    outs = cond_p.bind(index, *all_consts, *_operands(ops), branches=tuple(closed_brs))
    return tree_util.tree_unflatten(traced[0][2], outs)


def cond(pred, true_fun, false_fun, *operands):
    """true_fun(*operands) if pred else false_fun(*operands), as one primitive.

    Both branches are traced; under vmap with a batched pred both run and select picks."""
    _callable("cond: true_fun and false_fun", true_fun, false_fun)
    if pred is None:
        raise TypeError("cond predicate is None")
    pred = _one_leaf(pred)
    aval = get_aval(pred)
    if aval.shape != ():
        raise TypeError(f"Pred must be a scalar, got {aval.str_short()}; use fnp.where for "
                        "elementwise choices")
    pred = canonicalize(pred)
    if aval.dtype != np.bool_:
        pred = ew.ne(pred, np.zeros((), aval.dtype))
    index = _branch_index(pred)
    return _switch(index, (false_fun, true_fun), operands, ("false_fun", "true_fun"))


def switch(index, branches, *operands):
    """branches[index](*operands); index is clamped into [0, len(branches) - 1]."""
    branches = tuple(branches)
    if not all(callable(b) for b in branches):
        raise TypeError("lax.switch: branches argument should be a sequence of callables.")
    if not branches:
        raise ValueError("switch needs at least one branch")
    if len(branches) == 1:
        return branches[0](*operands)
    return _switch(_branch_index(index), branches, operands,
                   tuple(f"branches[{i}]" for i in range(len(branches))))


# ---------------------------------------------------------------------------
# loops

def _node_desc(t, how):
    """A pytree node as JAX's structure messages describe it."""
    kind = "a leaf (an array)" if t.node_type is None else f"a {t.node_type}"
    if how == "length":
        return f"a {t.node_type.__name__} of length {len(t.children)}"
    if how == "children":
        n = len(t.children)
        return f"{kind} with {n} child{'' if n == 1 else 'ren'}"
    if how == "metadata":
        return f"{kind} with pytree metadata {t.aux}"
    return kind


def _tree_diffs(path, tin, tout):
    """[(path, what differs)] between the carry's input and output structures, at the
    outermost nodes that differ (JAX's wording)."""
    if tin == tout:
        return []
    if tin.node_type != tout.node_type or tin.node_type is None:
        how, why = "type", "their Python types differ"
    elif len(tin.children) != len(tout.children):
        how = "length" if tin.node_type in (tuple, list) else "children"
        why = "the lengths do not match" if how == "length" else \
            "the numbers of children do not match"
    elif tin.aux != tout.aux:
        how, why = "metadata", "the pytree node metadata does not match"
    else:
        keys = tin.aux if tin.node_type is dict else range(len(tin.children))
        out = []
        for k, a, b in zip(keys, tin.children, tout.children):
            out += _tree_diffs(f"{path}[{k!r}]", a, b)
        return out
    return [(path, f"is {_node_desc(tin, how)} but the corresponding component of the carry "
                   f"output is {_node_desc(tout, how)}, so {why}")]


def _carry_tree_mismatch(loop, name, tin, tout):
    diffs = _tree_diffs(name, tin, tout)
    lines = [f"input carry {'component ' if p != name else ''}{p} {d}" for p, d in diffs]
    detail = ("The " + lines[0] + ".") if len(lines) == 1 else \
        ";\n".join(f"  * the {ln}" for ln in lines) + "."
    return ControlFlowTypeError(f"{loop} carry input and carry output must have the same "
                                f"pytree structure, but they differ:\n\n{detail}\n\nRevise "
                                "the function so that the carry output has the same pytree "
                                "structure as the carry input.")


def _carry_mismatch(loop, name, carry_tree, in_avals, out_avals):
    """JAX's message for a loop body whose carry output differs from its carry input in
    type: each differing leaf by its path in the carry."""
    carry = tree_util.tree_unflatten(carry_tree, list(range(len(in_avals))))
    paths = [name + tree_util.keystr(k) for k, _ in tree_util.tree_leaves_with_path(carry)]
    diffs = []
    for path, a, b in zip(paths, in_avals, out_avals):
        if a.shape != b.shape or a.dtype != b.dtype:
            why = ", and ".join(f"the {w} do not match" for w, differ in (
                ("dtypes", a.dtype != b.dtype), ("shapes", a.shape != b.shape)) if differ)
            comp = "component " if path != name else ""
            diffs.append((f"input carry {comp}{path} has type {_ty(a)} but the corresponding "
                          f"output carry component has type {_ty(b)}, so {why}"))
    detail = ("The " + diffs[0] + ".") if len(diffs) == 1 else \
        ";\n".join(f"  * the {d}" for d in diffs) + "."
    return ControlFlowTypeError(f"{loop} carry input and carry output must have equal types, "
                                f"but they differ:\n\n{detail}\n\nRevise the function so "
                                "that all output types match the corresponding input types.")


def _trace_loop(step, carry, carry_tree, extra_avals, what, name="carry"):
    """Trace a loop step whose carry output must match its carry input.

    step(carry_leaves, extra_leaves) -> (carry_out_tree, carry_out_leaves, other_leaves).
    A weakly typed carry (a Python scalar) takes the dtype its step gives it, and a weakly
    typed step output the dtype of its carry. Returns (closed, consts, carry)."""
    casts_out = None
    for attempt in range(2):
        c_avals = [get_aval(x) for x in carry]
        store = {}

        def f(*args, casts=casts_out):
            tree, c_out, rest = step(list(args[:len(c_avals)]), list(args[len(c_avals):]))
            store["tree"] = tree
            if casts is not None and len(casts) == len(c_out):
                c_out = _cast_leaves(c_out, casts)
            return list(c_out) + list(rest)
        closed, consts = _trace_flat(f, c_avals + list(extra_avals))
        if store["tree"] != carry_tree:
            loop = "while_loop body function" if what == "body_fun" else what
            raise _carry_tree_mismatch(loop, name, carry_tree, store["tree"])
        outs = closed.out_avals[:len(c_avals)]
        casts_in, casts_out = _weak_casts(c_avals, outs)
        if attempt or all(c is None for c in casts_in + casts_out):
            break
        carry = _cast_leaves(carry, casts_in)
    if any(a.shape != b.shape or a.dtype != b.dtype for a, b in zip(c_avals, outs)):
        loop = "while_loop body function" if what == "body_fun" else what
        raise _carry_mismatch(loop, name, carry_tree, c_avals, outs)
    return closed, consts, carry


def while_loop(cond_fun, body_fun, init_val, max_iters=None):
    """Repeat val = body_fun(val) while cond_fun(val); returns the final val.

    max_iters=N (a functrans extension) stops after at most N iterations and makes the loop
    reverse-differentiable (as a scan of N steps); without it only forward mode works."""
    if max_iters is not None and (isinstance(max_iters, bool) or
                                  not isinstance(max_iters, (int, np.integer)) or max_iters < 0):
        raise TypeError(f"while_loop max_iters must be None or a non-negative int, got "
                        f"{max_iters!r}")
    _callable("while_loop: body_fun and cond_fun", body_fun, cond_fun)
    carry, tree = _leaves(init_val)

    def step(c, _):
        out, out_tree = tree_util.tree_flatten(body_fun(tree_util.tree_unflatten(tree, c)))
        return out_tree, out, []
    body, body_consts, carry = _trace_loop(step, carry, tree, [], "body_fun",
                                           _carry_name(body_fun))
    c_avals = [get_aval(x) for x in carry]

    def cond_flat(*c):
        out = cond_fun(tree_util.tree_unflatten(tree, list(c)))
        leaves, out_tree = tree_util.tree_flatten(out)
        if len(leaves) != 1:
            raise TypeError(f"cond_fun must return a boolean scalar, but got pytree {out_tree}.")
        return leaves
    cond_closed, cond_consts = _trace_flat(cond_flat, c_avals)
    pred = cond_closed.out_avals
    if pred[0].shape != () or pred[0].dtype != np.bool_:
        raise TypeError(f"cond_fun must return a boolean scalar, but got output type(s) "
                        f"[ShapedArray({_ty(pred[0])})].")
    carry = _operands(carry)
    outs = while_p.bind(*cond_consts, *body_consts, *carry, cond_jaxpr=cond_closed,
                        body_jaxpr=body, cond_nconsts=len(cond_consts),
                        body_nconsts=len(body_consts),
                        max_iters=None if max_iters is None else int(max_iters))
    return tree_util.tree_unflatten(tree, _forward_carry(body, len(body_consts), carry, outs))


def scan(f, init, xs=None, length=None, reverse=False, unroll=1):
    """carry, ys = scan(f, init, xs): loop carry, y = f(carry, x) over the leading axis of
    xs, stacking the ys. `unroll` (a bool or a non-negative int, as JAX checks) does not
    change the result and is otherwise ignored."""
    _callable("scan: f", f)
    if not isinstance(unroll, (bool, int, np.integer)) or unroll < 0:
        raise ValueError(f"`unroll` must be a `bool` or a non-negative `int`, got {unroll!r}.")
    carry, carry_tree = _leaves(init)
    x_leaves, x_tree = _leaves(xs)
    lengths = set()
    for x in x_leaves:
        a = get_aval(x)
        if a.ndim == 0:
            raise ValueError(f"scan got value with no leading axis to scan over: "
                             f"{a.str_short()}")
        lengths.add(a.shape[0])
    # JAX's messages, then the types of xs' leaves
    shapes = ", ".join(get_aval(x).str_short() for x in x_leaves)
    sizes = [get_aval(x).shape[0] for x in x_leaves]
    if len(lengths) > 1:
        raise ValueError(f"scan got values with different leading axis sizes: "
                         f"{', '.join(map(str, sizes))} (xs of types ({shapes}); every leaf "
                         "of xs needs the same leading axis size)")
    if length is not None:
        if lengths and int(length) not in lengths:
            raise ValueError(f"scan got `length` argument of {length} which disagrees with "
                             f"leading axis sizes {sizes}.")
        lengths.add(int(length))
    if not lengths:
        raise ValueError("scan got no values to scan over and `length` not provided")
    length = lengths.pop()
    x_avals = [ShapedArray(get_aval(x).shape[1:], get_aval(x).dtype) for x in x_leaves]
    store = {}

    def step(c, x):
        out = f(tree_util.tree_unflatten(carry_tree, c), tree_util.tree_unflatten(x_tree, x))
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            try:
                got = _ty(get_aval(out))
            except Exception:  # noqa: BLE001 - not an array: name its type
                got = type(out).__name__
            raise TypeError(f"scan body output must be a pair, got {got}.")
        c_out, c_tree = tree_util.tree_flatten(out[0])
        ys, store["y_tree"] = tree_util.tree_flatten(out[1])
        return c_tree, c_out, ys
    closed, consts, carry = _trace_loop(step, carry, carry_tree, x_avals, "scan body function",
                                        _carry_name(f))
    carry = _operands(carry)
    outs = scan_p.bind(*consts, *carry, *_operands(x_leaves), jaxpr=closed,
                       length=length, reverse=bool(reverse), num_consts=len(consts),
                       num_carry=len(carry))
    outs = _forward_carry(closed, len(consts), carry, list(outs))
    return (tree_util.tree_unflatten(carry_tree, outs[:len(carry)]),
            tree_util.tree_unflatten(store["y_tree"], outs[len(carry):]))


def fori_loop(lower, upper, body_fun, init_val, *, unroll=None):
    """Loop val = body_fun(i, val) for i in [lower, upper).

    With concrete bounds this is a scan (reverse-differentiable); with traced bounds a
    while_loop (forward mode only). The bounds are numbers of one dtype (a Python number
    takes the other's), integers or, as JAX allows, floats counting by 1."""
    _callable("fori_loop: body_fun", body_fun)
    lo, hi = to_concrete(lower), to_concrete(upper)
    typed = [get_aval(b) for b in (lower, upper) if type(b) not in (int, float)]
    typed = [a for a in typed if not a.weak_type] or typed      # a weak bound takes the other's
    if len(typed) == 2 and typed[0].dtype != typed[1].dtype:
        raise TypeError(f"lax.fori_loop: arguments to fori_loop must have equal types, got "
                        f"{_ty(typed[0])} and {_ty(typed[1])}")
    if typed:
        dtype = typed[0].dtype
    else:
        dtype = get_aval(canonicalize(float(lower) if float in (type(lower), type(upper))
                                      else int(lower))).dtype
    if dtype.kind not in "iuf" or any(a.shape != () for a in typed):
        raise TypeError(f"fori_loop bounds must be scalar numbers, got "
                        f"{get_aval(lower).str_short()} and {get_aval(upper).str_short()}")
    if lo is not None and hi is not None:
        n = max(int(hi) - int(lo), 0)       # JAX's trip count: int(upper) - int(lower)

        def step(carry, _):
            i, val = carry
            return (i + np.asarray(1, dtype), body_fun(i, val)), None
        (_, out), _ = scan(step, (np.asarray(lo, dtype), init_val), None, length=n)
        return out
    if unroll is not None and unroll is not False and unroll != 1:
        raise ValueError("Can only use `unroll` in `fori_loop` if the loop bounds are "
                         "statically known.")

    def cond_fn(carry):
        return carry[0] < carry[1]

    def body_fn(carry):
        i, u, val = carry
        return i + np.asarray(1, dtype), u, body_fun(i, val)
    def as_dtype(b):
        b = canonicalize(b)
        return b if get_aval(b).dtype == dtype else ew.convert_element_type(
            b, new_dtype=dtype, weak_type=False)
    return while_loop(cond_fn, body_fn, (as_dtype(lower), as_dtype(upper), init_val))[2]
