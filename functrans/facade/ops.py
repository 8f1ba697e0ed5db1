"""Module-level tensor functions (ft.cat, ft.stack, ft.exp, ...) and the facade execution
of jaxpr equations (`apply_prim`), which create_graph=True uses to run a backward program
as recorded facade ops, so its result is differentiable again."""
from __future__ import annotations

import numpy as np

from ..numpy import raw as fnp
from ..backends.memory import DERIVED
from ..core import ShapedArray, Tracer, Var, array_module, run_eqns
from .tensor_info import result_type
from .grad_mode import STATE as GS
from .grad_mode import no_grad
from . import plumbing
from .node import OpInfo, Step, held_counter
from .record import info_for, make_node
from .lower import analyze
from .hot_ops import EOp, unary
from .tensor import Tensor, apply_fn, static, tensor, traced_hooks, wrap
from . import complexes
from . import methods as M
from . import reductions

# ---------------------------------------------------------------------------
# one primitive applied to tensors (create_graph, and programs run by the facade)

_PRIM_NAMES = {
    "add": "AddBackward0", "sub": "SubBackward0", "mul": "MulBackward0", "div": "DivBackward0",
    "neg": "NegBackward0", "dot_general": "MmBackward0", "broadcast_in_dim": "ExpandBackward0",
    "reduce_sum": "SumBackward1", "reshape": "ViewBackward0", "transpose": "PermuteBackward0",
    "select": "WhereBackward0", "convert_element_type": "ToCopyBackward0",
    "integer_pow": "PowBackward0", "pow": "PowBackward1", "logistic": "SigmoidBackward0",
    "max": "MaximumBackward0", "min": "MinimumBackward0", "squeeze": "SqueezeBackward1",
    "expand_dims": "UnsqueezeBackward0", "slice": "SliceBackward0", "pad": "ConstantPadNdBackward0",
    "concatenate": "CatBackward0", "gather": "GatherBackward0", "scatter_add": "ScatterAddBackward0",
    "scatter": "ScatterBackward0", "reduce_max": "AmaxBackward0", "reduce_min": "AminBackward0",
    "rev": "FlipBackward0", "cumsum": "CumsumBackward0", "reduce_prod": "ProdBackward1",
}


def prim_grad_fn_name(prim):
    n = _PRIM_NAMES.get(prim.name)
    if n is None:
        n = "".join(p.capitalize() for p in prim.name.split("_")) + "Backward0"
    return n


def apply_prim(prim, params, args):
    """Run one primitive on tensors/constants, recording a node when grad mode needs it."""
    if prim is plumbing.tap_p:
        return args[0]
    if prim is plumbing.hook_call_p:
        return plumbing.run_cotangent_hooks(args[0], *plumbing.hook_dicts(params["hooks"]))
    if prim is plumbing.node_hook_p:
        return list(args)
    if prim is plumbing.node_hook_call_p:
        run = plumbing._current_run()
        grads = [plumbing.torch_convention(a) if p else None
                 for a, p in zip(args, params["present"])]
        new = plumbing.node_hook_grads(run.fn_nodes[params["slot"]], params["side"],
                                       params["pos"], grads)
        return [a if g is None else plumbing.torch_convention(g) for a, g in zip(args, new)]
    if prim is plumbing.fn_bwd_p:
        node = plumbing._current_run().fn_nodes[params["fslot"]]
        return list(node.info.extra["run_backward"](node, list(args), params["present"],
                                                    params["in_avals"], params["out_mask"],
                                                    tensors=True))
    arrays = [a._data if isinstance(a, Tensor) else a for a in args]
    traced = any(isinstance(a, Tracer) for a in arrays)
    rec = GS.enabled
    if traced:                          # traced data: bind, not run
        h = traced_hooks()
        rec = rec and h.records
        out = prim.bind(*arrays, **params)
        outs = [wrap(o) for o in (out if prim.multiple_results else [out])]
    else:
        out = prim.impl(array_module(*arrays), *arrays, **params)
        outs = out if prim.multiple_results else [out]
        outs = [wrap(o if type(o) is np.ndarray else np.asarray(o)) for o in outs]
    if rec and any(isinstance(a, Tensor) and a._requires_grad for a in args) and any(
            o._data.dtype.kind in "fc" for o in outs):
        mask = tuple(isinstance(a, Tensor) and a._requires_grad for a in args)
        avals = tuple(ShapedArray(np.shape(a), np.asarray(a).dtype if not hasattr(a, "dtype")
                                  else a.dtype) for a in arrays)
        pkey = _params_key(params)
        key = ("prim", prim, pkey, tuple((a.shape, a.dtype) for a in avals), mask)
        info = DERIVED.get(("op", key)) if pkey is not None else None
        if info is None:
            def build():
                out_avals = prim.abstract_eval(*avals, **params)
                out_avals = out_avals if prim.multiple_results else [out_avals]
                n = len(avals)
                outs_idx = tuple(range(n, n + len(out_avals)))
                return OpInfo(prim_grad_fn_name(prim), [Step(prim, params, range(n), outs_idx)],
                              n, outs_idx, list(avals) + list(out_avals), mask)
            info = info_for(key, build) if pkey is not None else _uncached(build)
        make_node(info, args, [*arrays, *[o._data for o in outs]], outs)
    if traced:
        h.after_op(args, outs)
    return outs if prim.multiple_results else outs[0]


def _uncached(build):
    info = build()
    analyze(info)
    return info


def _params_key(params):
    try:
        items = tuple(sorted(params.items()))
        hash(items)
        return items
    except TypeError:
        return None


def run_recorded(closed, args):
    """closed run with every equation recorded as a facade op, so its results are
    differentiable again (create_graph): args are its inputs (Tensors or arrays); the
    outputs are Tensors."""
    j = closed.jaxpr
    env = {}
    for v, c in zip(j.constvars, closed.consts):
        env[v] = wrap(np.asarray(c))
    for v, a in zip(j.invars, args):
        env[v] = a
    run_eqns(j.eqns, env, apply_prim)
    res = []
    for a in j.outvars:
        r = env[a] if type(a) is Var else wrap(np.asarray(a.val))
        res.append(r if isinstance(r, Tensor) else wrap(np.asarray(r)))
    return res


def eval_jaxpr_facade(prog, nodes, vals, root_cts):
    """Run a backward program with every equation recorded as a facade op (create_graph):
    its saved inputs as tensors connected to the graph."""
    saved = [tensor_for_key(nodes, key, val) for key, val in zip(prog.keys, vals)]
    return run_recorded(prog.closed, saved + list(root_cts))


def tensor_for_key(nodes, key, val):
    """The saved value of key as a tensor connected to the graph (its producer as grad_fn)."""
    p, s = key
    n = nodes[p]
    if n.info is None:
        leaf = n.variable
        if leaf is not None and val is leaf._data:
            return leaf
        # a value an unpack hook gave (saved_tensors_hooks) in place of the leaf's: that
        # value, its gradient flowing to the leaf (torch's unpacked SavedVariable keeps the
        # original's edge), not the leaf's own value silently
        t = wrap(val)
        t._requires_grad = True
        t._accum = n
        return t
    info = n.info
    if s in info.out_slots:
        t = wrap(val)
        j = info.out_slots.index(s)
        if info.out_float[j]:
            t._grad_fn = n
            t._out_nr = j
            t._requires_grad = True
        vc = held_counter(n.vers, s)
        if vc is not None:
            t._vc = vc
        return t
    return wrap(val)


# ---------------------------------------------------------------------------
# module-level functions with torch's names

def _cat_fn(*xs, axis, keep):
    return fnp.concatenate([x for x, k in zip(xs, keep) if k], axis=axis)


def cat(tensors, dim=0, *, out=None):
    """torch.cat: promoted to one dtype; 1-d empty tensors are skipped (torch's legacy rule)
    but still inputs of the op (their gradient is empty, not None); torch's errors."""
    tensors = [t for t in tensors]
    if not tensors:
        raise RuntimeError("torch.cat(): expected a non-empty list of Tensors")
    keep = tuple(not (t.ndim == 1 and t.shape[0] == 0) for t in tensors)
    if not any(keep):
        keep = (True,) + keep[1:]
    dt = result_type(*tensors)
    tensors = [t if t.dtype == dt else t.to(dt) for t in tensors]
    kept = [(i, t) for i, (t, k) in enumerate(zip(tensors, keep)) if k]
    i0, first = kept[0]
    nd = first.ndim
    if nd == 0:
        raise RuntimeError(f"zero-dimensional tensor (at position {i0}) cannot be concatenated")
    if not -nd <= dim < nd:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-nd}, {nd - 1}]"
                         f", but got {dim})")
    dim %= nd
    for i, t in kept[1:]:
        if t.ndim != nd:
            raise RuntimeError(f"Tensors must have same number of dimensions: got {nd} and "
                               f"{t.ndim}")
        for d in range(nd):
            if d != dim and t.shape[d] != first.shape[d]:
                raise RuntimeError(f"Sizes of tensors must match except in dimension {dim}. "
                                   f"Expected size {first.shape[d]} but got size {t.shape[d]} "
                                   f"for tensor number {i} in the list.")
    return apply_fn("CatBackward0", _cat_fn, tuple(tensors), static(axis=dim, keep=keep))


concat = concatenate = cat


def _stack_fn(*xs, axis):
    return fnp.stack(xs, axis=axis)


def stack(tensors, dim=0, *, out=None):
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    for i, t in enumerate(tensors[1:], 1):
        if tuple(t.shape) != tuple(tensors[0].shape):
            raise RuntimeError(f"stack expects each tensor to be equal size, but got "
                               f"{list(tensors[0].shape)} at entry 0 and {list(t.shape)} at "
                               f"entry {i}")
    dt = result_type(*tensors)
    tensors = [t if t.dtype == dt else t.to(dt) for t in tensors]
    nd = tensors[0].ndim + 1
    return apply_fn("StackBackward0", _stack_fn, tuple(tensors), static(axis=dim % nd))


def hstack(tensors):
    ts = [t if t.ndim else t.reshape(1) for t in tensors]
    return cat(ts, 0 if ts[0].ndim == 1 else 1)


def vstack(tensors):
    return cat([t if t.ndim >= 2 else t.reshape(1, -1) for t in tensors], 0)


def _einsum_fn(*ops, eq):
    return fnp.einsum(eq, *ops)


def einsum(equation, *operands):
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    operands = _einsum_broadcast(equation, operands)
    dt = result_type(*operands)
    operands = tuple(t if t.dtype == dt else t.to(dt) for t in operands)
    return apply_fn("EinsumBackward0", _einsum_fn, operands, static(eq=equation.replace(" ", "")))


def _einsum_broadcast(equation, operands):
    """The operands with each subscript of size 1 expanded to the size other operands give
    it (torch broadcasts them), or torch's RuntimeError for sizes that do not broadcast;
    labels before and after an ellipsis address the leading and the trailing dimensions."""
    lhs = equation.replace(" ", "").split("->")[0].split(",")
    seen, dims = {}, []
    for i, (sub, t) in enumerate(zip(lhs, operands)):
        head, _, tail = sub.partition("...")
        nd = t.ndim
        pairs = list(zip(head, range(len(head)))) + list(zip(tail, range(nd - len(tail), nd)))
        dims.append(pairs)
        for c, d in pairs:
            n, s0 = t.shape[d], seen.get(c)
            if s0 is not None and n != s0 and n != 1 and s0 != 1:
                raise RuntimeError(f"einsum(): subscript {c} has size {n} for operand {i} "
                                   f"which does not broadcast with previously seen size {s0}")
            if s0 is None or s0 == 1:
                seen[c] = n
    out = []
    for t, pairs in zip(operands, dims):
        shape = list(t.shape)
        for c, d in pairs:
            shape[d] = seen[c]
        out.append(t if tuple(shape) == tuple(t.shape) else t.expand(*shape))
    return tuple(out)


def broadcast_tensors(*tensors):
    shape = np.broadcast_shapes(*[tuple(t.shape) for t in tensors])
    return tuple(t.expand(shape) for t in tensors)


def broadcast_to(input, size):  # noqa: A002
    return input.expand(tuple(size))


def meshgrid(*tensors, indexing="ij"):
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    n = len(tensors)
    shape = tuple(t.numel() for t in tensors)
    if indexing == "xy" and n >= 2:
        shape = (shape[1], shape[0]) + shape[2:]
    outs = []
    for i, t in enumerate(tensors):
        view = [1] * n
        pos = i
        if indexing == "xy" and n >= 2 and i < 2:
            pos = 1 - i
        view[pos] = -1
        outs.append(t.reshape(view).expand(shape))
    return tuple(outs)


def where(condition, input=None, other=None):  # noqa: A002
    if input is None and other is None:
        return condition.nonzero(as_tuple=True)
    return M.where_(condition, input, other)


def is_tensor(obj):
    return isinstance(obj, Tensor)


def numel(input):  # noqa: A002
    return input.numel()


def is_floating_point(input):  # noqa: A002
    return input.is_floating_point()


def clone(input, memory_format=None):  # noqa: A002
    return input.clone()


OUT_GRAD_MSG = ("{}(): functions with out=... arguments don't support automatic "
                "differentiation, but one of the arguments requires grad.")


def write_out(name, fn, args, kwargs, out):
    """torch's out=: the result written into `out` (a tensor, or a tuple for ops returning
    several), resized if its shape differs; refused when recording and an argument or out
    requires grad (such a write cannot be differentiated)."""
    outs = tuple(out) if isinstance(out, (tuple, list)) else (out,)
    if GS.enabled and any(isinstance(t, Tensor) and t._requires_grad
                          for t in (*args, *kwargs.values(), *outs)):
        raise RuntimeError(OUT_GRAD_MSG.format(name))
    with no_grad():
        r = fn(*args, **kwargs)
        for o, v in zip(outs, r if isinstance(r, tuple) else (r,)):
            if tuple(o.shape) != tuple(v.shape):
                o.resize_(tuple(v.shape))
            o.copy_(v)
    return out


def _method_fn(name):
    meth = []                   # Tensor's own method, looked up on first use

    def f(input, *args, out=None, **kwargs):  # noqa: A002
        if out is not None:
            return write_out(name, f, (input, *args), kwargs, out)
        if type(input) is Tensor:   # the common case: no bound-method object per call
            if not meth:
                meth.append(getattr(Tensor, name))
            return meth[0](input, *args, **kwargs)
        if not isinstance(input, Tensor):
            input = tensor(input)
        return getattr(input, name)(*args, **kwargs)
    f.__name__ = name
    f.__doc__ = f"torch.{name}: Tensor.{name} as a function."
    return f


def _unary_method_fn(name):
    """_method_fn of a method of self alone (the elementwise unary ops: ft.sin(x)): a
    signature without *args/**kwargs, whose packing and unpacking cost a call's worth per
    op on small tensors; where the method is the elementwise op's own (methods.py), its
    `unary` is called directly (the same frames above make_node as for x.sin())."""
    general = _method_fn(name)
    meth = []

    def f(input, *, out=None):  # noqa: A002
        if out is None and type(input) is Tensor:
            if not meth:
                m = getattr(Tensor, name)
                meth.append(getattr(m, "eop", None) or m)
            m = meth[0]
            return unary(input, m) if type(m) is EOp else m(input)
        return general(input, out=out)
    f.__name__ = name
    f.__doc__ = general.__doc__
    return f


FUNCTION_NAMES = [
    "add", "sub", "subtract", "mul", "multiply", "div", "divide", "true_divide", "pow", "neg",
    "negative", "abs", "absolute", "exp", "exp2", "log", "log2", "log10", "log1p", "expm1",
    "sin", "cos", "tan", "asin", "acos", "atan", "arcsin", "arccos", "arctan", "sinh", "cosh",
    "asinh", "acosh", "atanh", "arcsinh", "arccosh", "arctanh",
    "tanh", "sigmoid", "relu", "sqrt", "rsqrt", "square", "reciprocal", "sign", "sgn", "floor",
    "ceil", "round", "trunc", "frac", "erf", "erfc", "erfinv", "lgamma", "digamma",
    "clamp", "clip", "clamp_min", "clamp_max", "nan_to_num",
    "maximum", "minimum", "atan2", "arctan2", "fmod", "remainder", "floor_divide", "lerp",
    "addcmul", "addcdiv", "matmul", "mm", "bmm", "mv", "dot", "outer", "ger", "inner",
    "sum", "mean", "prod", "var", "std", "max", "min", "amax", "amin", "argmax", "argmin",
    "logsumexp", "norm", "cumsum", "cumprod", "all", "any", "count_nonzero", "equal",
    "allclose", "isclose", "isnan", "isinf", "isfinite", "logical_not", "logical_and",
    "logical_or", "logical_xor", "eq", "ne", "lt", "le", "gt", "ge", "greater", "less",
    "greater_equal", "less_equal", "not_equal", "reshape", "flatten", "unflatten", "permute",
    "transpose", "swapaxes", "swapdims", "t", "movedim", "moveaxis", "squeeze", "unsqueeze",
    "narrow", "select", "unbind", "split", "chunk", "tensor_split", "split_with_sizes",
    "unsafe_split", "unsafe_split_with_sizes", "unsafe_chunk", "flip", "fliplr", "flipud",
    "roll", "repeat_interleave", "tril", "triu", "diagonal", "trace", "gather", "index_select",
    "take_along_dim", "scatter", "scatter_add", "masked_fill", "sort", "argsort", "topk",
    "nonzero", "softmax", "log_softmax", "conj", "conj_physical", "resolve_conj", "angle",
    "is_inference", "diag", "diag_embed", "diagflat", "bitwise_and", "bitwise_or",
    "bitwise_xor", "bitwise_not",
    "median", "nanmedian", "signbit", "split_with_sizes", "unsafe_split",
    "unsafe_split_with_sizes", "unsafe_chunk",
    # torch's module-level in-place functions (torch.relu_(x) is x.relu_())
    "abs_", "acos_", "acosh_", "asin_", "asinh_", "atan_", "atanh_", "ceil_", "clamp_", "cos_",
    "cosh_", "exp_", "fill_", "floor_", "log_", "neg_", "relu_", "round_", "rsqrt_",
    "sigmoid_", "sin_", "sinh_", "sqrt_", "tan_", "tanh_", "trunc_", "zero_",
]
FUNCTIONS = {n: _unary_method_fn(n) if n in M.UNARY_METHODS else _method_fn(n)
             for n in FUNCTION_NAMES}
_tensor_pow = FUNCTIONS["pow"]


def pow(input, exponent):  # noqa: A001,A002
    """torch.pow: a number base with a tensor exponent is exponent.__rpow__(base)
    (PowBackward2, and integral for an integer base and exponent)."""
    if not isinstance(input, Tensor) and isinstance(exponent, Tensor):
        return exponent.__rpow__(input)
    return _tensor_pow(input, exponent)


FUNCTIONS["pow"] = pow
FUNCTIONS.update(isin=M.isin, complex=complexes.complex, polar=complexes.polar,
                 view_as_real=complexes.view_as_real, view_as_complex=complexes.view_as_complex)
FUNCTION_NAMES += ["isin", "complex", "polar", "view_as_real", "view_as_complex"]
FUNCTIONS.update(var_mean=reductions.var_mean, std_mean=reductions.std_mean)
FUNCTION_NAMES += ["var_mean", "std_mean"]


def _part_fn(name):
    def f(input):  # noqa: A002
        return getattr(input if isinstance(input, Tensor) else tensor(input), name)
    f.__name__ = name
    f.__doc__ = f"torch.{name}: Tensor.{name} (a property) as a function."
    return f


FUNCTIONS.update(real=_part_fn("real"), imag=_part_fn("imag"))
