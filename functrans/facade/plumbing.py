"""The facade's plumbing for backward programs: error texts, the run context that host
callbacks read while a program runs, and the primitives a lowered graph uses.

`facade_tap` is an identity whose transpose calls the tensor hooks (`hook_call`, a host
callback) and hands the cotangent to the deriver (`capture_cotangent`: retain_grad,
`inputs=` that are not leaves). An `autograd.Function` is `autograd_function`, whose
linearization is a linear primitive whose transpose calls the user's backward.
ft.compile's hooks are declared here too, beside `facade_tap`: `tensor_hook` (the tensor
hooks of captured code), `module_backward_hook` and `module_hook_call` (module hooks);
every loop over tensor hooks is `run_tensor_hooks`.
This module sits below the Tensor class: the callbacks get `wrap` from the run context and a
Function's backward from its node (`info.extra["run_backward"]`).
"""
from __future__ import annotations

import threading

import numpy as np

from ..ad import capture_cotangent
from ..core import FunctransError, ShapedArray, Zero
from ..primitives.base import aval_of, defprim, instantiate
from .node import held_versions
from .tensor_info import TensorInfo

# ---------------------------------------------------------------------------
# error texts (PyTorch's words, API.md)

FREED_MSG = (
    "Trying to backward through the graph a second time (or directly access saved tensors "
    "after they have already been freed). Saved intermediate values of the graph are freed "
    "when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to "
    "backward through the graph a second time or if you need to access saved tensors after "
    "calling backward.")


class InternalEngineError(FunctransError):
    """A bug in the facade's engine (never the user's fault): the message says what in the
    user's graph the engine did not expect, that it is functrans's bug, and the other
    schedule to run it by meanwhile."""

    def __init__(self, what, workaround="program"):
        super().__init__(
            f"functrans's backward engine did not expect this graph: {what}. This is a bug in "
            "functrans, not in your program: please report it with the code that built the "
            "graph. Meanwhile the other schedule of the same backward may run it: wrap the "
            f"backward in `with functrans.executor.schedule({workaround!r}):`.")


def describe_value(aval):
    return f"[ft.{aval.dtype.name} [{', '.join(map(str, aval.shape))}]]"


def _check_version(n, s):
    for slot, vc, ver in held_versions(n.vers):
        if slot == s and vc.v != ver:
            aval = n.info.slot_avals[s]
            if s < n.info.n_in:
                e = n.edges[s]
                if e is None or e[0].info is None:
                    what = describe_value(aval)
                else:
                    what = f"{describe_value(aval)}, which is output {e[1]} of {e[0].info.name},"
            else:
                what = (f"{describe_value(aval)}, which is output "
                        f"{n.info.out_slots.index(s)} of {n.info.name},")
            by = f" (last modified in place by {vc.op})" if getattr(vc, "op", None) else ""
            raise RuntimeError(
                "one of the variables needed for gradient computation has been modified by "
                f"an inplace operation: {what} is at version {vc.v}; expected version {ver} "
                f"instead.{by} The value was saved for backward by {n.info.name}. Hint: "
                "enable anomaly detection to find the operation that failed to compute its "
                "gradient, with ft.autograd.set_detect_anomaly(True).")


# ---------------------------------------------------------------------------
# runtime context read by the callback primitives while a program runs

class _Run(threading.local):
    def __init__(self):
        self.stack = []


RUN = _Run()


class RunContext:
    __slots__ = ("hooks", "fn_nodes", "create_graph", "anomaly", "wrap")

    def __init__(self, hooks, fn_nodes, create_graph, wrap=None):
        self.hooks = hooks            # hook slot -> list of hook dicts (called in order)
        self.fn_nodes = fn_nodes      # function slot -> Node of an autograd.Function, or an
        #                               op's Node with grad_fn hooks (node_hook's `slot`)
        self.create_graph = create_graph
        self.anomaly = False
        self.wrap = wrap              # array -> Tensor for the hooks (tensor.wrap, given by
        #                               the engine: this module sits below the Tensor class)


def _current_run():
    if not RUN.stack:
        raise InternalEngineError("a hook or autograd.Function callback ran outside a backward "
                                  "pass")
    return RUN.stack[-1]


# ---------------------------------------------------------------------------
# the facade's plumbing primitives (identity taps and callbacks; no derivative formulas)

def _same(x, **params):
    return x


def _tap_jvp(primals, tangents, **params):
    out = tap_p.bind(primals[0], **params)
    t = tangents[0]
    return out, t if type(t) is Zero else tap_p.bind(t, **params)


def _tap_transpose(ct, x, *, key, hook):
    if hook >= 0:
        ct = hook_call_p.bind(ct, hooks=hook)
    capture_cotangent(key, ct)
    return [ct]


tap_p = defprim("facade_tap", lambda xp, x, **p: x, _same, jvp=_tap_jvp,
                transpose=_tap_transpose, memo=False)


def run_tensor_hooks(g, *hook_dicts):
    """Run tensor hooks on the gradient g, dict after dict, in order (torch's semantics: a
    hook returning a Tensor of g's dtype and shape replaces the gradient, None keeps it);
    the one loop every caller of tensor hooks uses."""
    for hooks in hook_dicts:
        for fn in list(hooks.values()):
            r = fn(g)
            if r is not None:
                g = _check_hook_result(r, g, fn)
    return g


def run_node_prehooks(hooks, g):
    """A single-input node's pre-hooks on its gradient g: each is called with (g,) and may
    return a tuple holding a replacement (checked as a tensor hook's result) or None."""
    for fn in list(hooks.values()):
        r = fn((g,))
        if r is not None:
            if not isinstance(r, (tuple, list)) or len(r) != 1:
                raise RuntimeError(f"hook '{getattr(fn, '__name__', fn)}' returned "
                                   f"{type(r).__name__}: a pre-hook returns a tuple of one "
                                   "gradient per output (here 1) or None")
            if r[0] is not None:
                g = _check_hook_result(r[0], g, fn)
    return g


def torch_convention(g):
    """PyTorch's gradient of a complex value <-> the core's (JAX's) cotangent: conjugates.
    For real L of z = x + iy torch's .grad is dL/dx + i dL/dy, JAX's grad dL/dx - i dL/dy;
    every rule in between is the same linear map, so only what a user sees or gives converts:
    root gradients, leaf and retained gradients, tensor hooks, autograd.Function backward.
    g: an array or a Tensor (its conj is then a recorded op); real values pass unchanged."""
    if g is None:
        return g
    data = getattr(g, "_data", g)
    if getattr(data, "dtype", None) is None or data.dtype.kind != "c":
        return g
    return g.conj()


def run_cotangent_hooks(ct, *hook_dicts):
    """Tensor hooks on a cotangent (a Tensor) inside a backward: they see and return
    PyTorch's gradient."""
    return torch_convention(run_tensor_hooks(torch_convention(ct), *hook_dicts))


def hook_dicts(hooks):
    """The hook dicts a `hook_call` runs: the engine's programs are shared by every graph
    of one structure and name a slot of the run context's hooks (an int); a compiled
    program belongs to its call site and carries the tensor's hooks (a HostRef)."""
    return _current_run().hooks[hooks] if type(hooks) is int else (hooks.obj,)


def _hook_call_impl(xp, ct, *, hooks):
    wrap = _current_run().wrap if type(hooks) is int else hooks.wrap
    return run_cotangent_hooks(wrap(ct), *hook_dicts(hooks))._data


def _check_hook_result(r, g, fn):
    """A tensor hook's replacement gradient r for g: a Tensor of g's dtype and shape (the
    errors name the hook by its __name__, as torch's)."""
    name = getattr(fn, "__name__", type(fn).__name__)
    if not isinstance(r, TensorInfo):       # (Tensor is TensorInfo's only subclass)
        raise TypeError(f"expected Tensor, but hook '{name}' returned '{type(r).__name__}' "
                        "(a tensor hook must return None or a Tensor)")
    if r.dtype != g.dtype:
        raise RuntimeError(f"hook '{name}' has changed the type of value (was {g.dtype} got "
                           f"{r.dtype})")
    if tuple(r.shape) != tuple(g.shape):
        raise RuntimeError(f"hook '{name}' has changed the size of value: expected shape "
                           f"{tuple(g.shape)}, got {tuple(r.shape)}")
    return r


hook_call_p = defprim("hook_call", _hook_call_impl, _same, effectful=True, memo=False)


# ft.compile's hooks. `tensor_hook` is `facade_tap` for captured code: the same identity
# whose transpose runs the tensor's hooks through `hook_call`, but the hooks travel in its
# params (a HostRef) and no cotangent is captured.


class HostRef:
    """A host object carried in a primitive's params (hashed and compared by identity), with
    `wrap` (array -> Tensor) for the hooks it runs: this module sits below the Tensor class."""
    __slots__ = ("obj", "label", "wrap", "__weakref__")

    def __init__(self, obj, label, wrap=None):
        self.obj, self.label, self.wrap = obj, label, wrap

    def __repr__(self):
        return self.label


def _tensor_hook_jvp(primals, tangents, *, ref):
    t = tangents[0]
    return primals[0], t if type(t) is Zero else tensor_hook_lin_p.bind(t, ref=ref)


def _tensor_hook_lin_jvp(primals, tangents, *, ref):
    t = tangents[0]
    return (tensor_hook_lin_p.bind(primals[0], ref=ref),
            t if type(t) is Zero else tensor_hook_lin_p.bind(t, ref=ref))


# x -> x in the forward; its tangent goes through tensor_hook_linear, whose transpose calls
# the hooks registered on the tensor (a host callback in the backward program)
tensor_hook_p = defprim("tensor_hook", lambda xp, x, **p: x, _same, jvp=_tensor_hook_jvp,
                        memo=False)
tensor_hook_lin_p = defprim(
    "tensor_hook_linear", lambda xp, x, **p: x, _same, jvp=_tensor_hook_lin_jvp,
    transpose=lambda ct, x, *, ref: [hook_call_p.bind(instantiate(ct), hooks=ref)],
    memo=False)


def _bhook_abstract(*avals, **params):
    return list(avals)


def _bhook_jvp(primals, tangents, *, ref, side):
    outs = module_bwd_hook_p.bind(*primals, ref=ref, side=side)
    if all(type(t) is Zero for t in tangents):
        return outs, list(tangents)
    ts = module_bwd_hook_lin_p.bind(*[instantiate(t) for t in tangents], ref=ref, side=side)
    return outs, list(ts)


def _bhook_transpose(cts, *args, ref, side):
    cts = [instantiate(c) if type(c) is Zero else c for c in cts]
    return list(module_bwd_hook_call_p.bind(*cts, ref=ref, side=side))


def _bhook_run(xp, *cts, ref, side):
    state = ref.obj
    grads = [ref.wrap(c) for c in cts]
    if side == "output":
        new = state.on_grad_output(grads)
    else:
        new = state.on_grad_input(grads)
        state.grad_outputs = None            # one backward pass consumed it
    res = []
    for g, c in zip(new, cts):
        if g is None:
            res.append(np.zeros_like(c))
            continue
        a = g._data if isinstance(g, TensorInfo) else np.asarray(g)
        if a.shape != c.shape:
            raise RuntimeError(f"backward hook of {type(state.module).__name__} returned a "
                               f"gradient of shape {tuple(a.shape)} where {tuple(c.shape)} "
                               "was expected")
        res.append(a.astype(c.dtype, copy=False))
    return res


# a module with full backward hooks: identities over its inputs and outputs that require
# grad; their transposes run BackwardHook.on_grad_output / on_grad_input (host callbacks)
module_bwd_hook_p = defprim("module_backward_hook", lambda xp, *xs, **p: list(xs),
                            _bhook_abstract, multiple_results=True, jvp=_bhook_jvp, memo=False)
module_bwd_hook_lin_p = defprim("module_backward_hook_linear", lambda xp, *xs, **p: list(xs),
                                _bhook_abstract, multiple_results=True,
                                transpose=_bhook_transpose, memo=False)
module_bwd_hook_call_p = defprim("module_backward_hook_call", _bhook_run, _bhook_abstract,
                                 multiple_results=True, effectful=True, memo=False)

_TOKEN = ShapedArray((), np.bool_)


def _fhook_jvp(primals, tangents, *, ref):
    return module_hook_p.bind(*primals, ref=ref), Zero(_TOKEN)


def _fhook_run(xp, *vals, ref):
    ref.obj.fire(vals)
    return np.zeros((), np.bool_)


# forward pre-hooks and forward hooks of modules: called at run time with the tensors'
# values (an effectful callback returning a token nobody reads)
module_hook_p = defprim("module_hook_call", _fhook_run, lambda *a, **p: _TOKEN,
                        effectful=True, jvp=_fhook_jvp, memo=False)


def _fn_call_abstract(*avals, fslot, out_avals, **p):
    return list(out_avals)


def _fn_call_impl(xp, *args, **params):
    raise InternalEngineError("the forward of an autograd.Function was about to be recomputed "
                              "by a backward program")


def _fn_call_jvp(primals, tangents, *, fslot, out_avals, in_mask, out_mask, materialize):
    outs = fn_call_p.bind(*primals, fslot=fslot, out_avals=out_avals, in_mask=in_mask,
                          out_mask=out_mask, materialize=materialize)
    ts = [t for t, m in zip(tangents, in_mask) if m]
    zero_outs = [Zero(a.strip_weak()) for a in out_avals]
    if all(type(t) is Zero for t in ts):
        return outs, zero_outs
    ts = [instantiate(t) for t in ts]
    diff_avals = tuple(a for a, m in zip(out_avals, out_mask) if m)
    in_avals = tuple(a for a, m in zip([aval_of(p) for p in primals], in_mask) if m)
    t_outs = iter(fn_lin_p.bind(*ts, fslot=fslot, out_avals=diff_avals, in_avals=in_avals,
                                materialize=materialize, out_mask=out_mask))
    return outs, [next(t_outs) if m else z for m, z in zip(out_mask, zero_outs)]


fn_call_p = defprim("autograd_function", _fn_call_impl, _fn_call_abstract,
                    multiple_results=True, jvp=_fn_call_jvp, memo=False)


def _fn_lin_abstract(*avals, out_avals, **p):
    return list(out_avals)


def _fn_lin_transpose(cts, *args, fslot, out_avals, in_avals, materialize, out_mask):
    present = tuple(type(c) is not Zero for c in cts)
    if materialize:
        cts = [instantiate(c) for c in cts]
        present = (True,) * len(cts)
    outs = fn_bwd_p.bind(*[c for c, p in zip(cts, present) if p], fslot=fslot, present=present,
                         in_avals=in_avals, out_mask=out_mask)
    return list(outs)


fn_lin_p = defprim("autograd_function_linear", _fn_call_impl, _fn_lin_abstract,
                   multiple_results=True, transpose=_fn_lin_transpose, memo=False)


def _fn_bwd_abstract(*avals, in_avals, **p):
    return list(in_avals)


def _fn_bwd_impl(xp, *cts, fslot, present, in_avals, out_mask):
    node = _current_run().fn_nodes[fslot]
    return node.info.extra["run_backward"](node, cts, present, in_avals, out_mask,
                                           tensors=False)


fn_bwd_p = defprim("autograd_function_backward", _fn_bwd_impl, _fn_bwd_abstract,
                   multiple_results=True, effectful=True, memo=False)


# ---------------------------------------------------------------------------
# hooks on an op's grad_fn node (Node.register_prehook / register_hook): the node becomes a
# boundary where its cotangents are materialized, as the taps do for tensor hooks. An
# identity over its outputs ("pre") and one over its differentiated inputs ("post"); their
# transposes run the pre-hooks on the outputs' gradients before the node's backward, and
# the post-hooks on the gradients this node gives its inputs, after it.

def run_node_hooks(hooks, grads, call):
    """Run a node's pre- or post-hooks in order, `call(fn, grads)`; a hook returning a
    sequence of the same length replaces the gradients, None keeps them. The one loop over
    grad_fn hooks (Function nodes and op nodes)."""
    for fn in list(hooks.values()):
        r = call(fn, grads)
        if r is not None:
            if not isinstance(r, (tuple, list)) or len(r) != len(grads):
                raise RuntimeError(f"hook '{getattr(fn, '__name__', fn)}' has returned an "
                                   f"incorrect number of values (got "
                                   f"{len(r) if isinstance(r, (tuple, list)) else 1}, but "
                                   f"expected {len(grads)})")
            grads = [g if g is None or o is None else _check_hook_result(g, o, fn)
                     for g, o in zip(r, grads)]
    return grads


def node_hook_grads(node, side, pos, grads):
    """Node's pre- (side "pre": grads of its outputs, None where none came) or post-hooks
    (side "post": the gradients it gives its inputs at positions pos, None where none) on
    PyTorch-convention Tensors; returns the gradients, replaced where a hook did. The
    pre-hooks' result is kept on the node for its post-hooks' grad_outputs."""
    x = node.x
    if side == "pre":
        grads = run_node_hooks(x.pre, list(grads), lambda fn, g: fn(tuple(g))) if x.pre \
            else list(grads)
        x.gout = tuple(grads) if x.post else None
        return grads
    full = [None] * node.info.n_in
    for i, g in zip(pos, grads):
        full[i] = g
    gout, x.gout = x.gout or (), None
    if x.post:
        full = run_node_hooks(x.post, full, lambda fn, g: fn(tuple(g), gout))
    return [full[i] for i in pos]


def _nhook_jvp(primals, tangents, **params):
    outs = node_hook_p.bind(*primals, **params)
    if all(type(t) is Zero for t in tangents):
        return outs, list(tangents)
    return outs, list(node_hook_p.bind(*[instantiate(t) for t in tangents], **params))


def _nhook_transpose(cts, *args, **params):
    present = tuple(type(c) is not Zero for c in cts)
    return list(node_hook_call_p.bind(*[instantiate(c) for c in cts], present=present,
                                      **params))


def _nhook_call_impl(xp, *cts, slot, side, pos, present):
    run = _current_run()
    wrap = run.wrap
    grads = [torch_convention(wrap(c)) if p else None for c, p in zip(cts, present)]
    new = node_hook_grads(run.fn_nodes[slot], side, pos, grads)
    return [c if g is None else torch_convention(g)._data for c, g in zip(cts, new)]


# params: slot (the node in the run context's fn_nodes), side ("pre" | "post"), pos (the
# node's input positions of a "post" identity's values)
node_hook_p = defprim("facade_node_hook", lambda xp, *xs, **p: list(xs), _bhook_abstract,
                      multiple_results=True, jvp=_nhook_jvp, transpose=_nhook_transpose,
                      memo=False)
node_hook_call_p = defprim("node_hook_call", _nhook_call_impl, _bhook_abstract,
                           multiple_results=True, effectful=True, memo=False)
