"""`ft.autograd.backward` and `ft.autograd.grad`: argument checking, default gradients,
leaf hooks, `.grad` accumulation and end-of-backward callbacks around the engine
(engine.run_backward)."""
from __future__ import annotations

import math
import threading

import numpy as np

from . import engine
from .plumbing import run_node_prehooks, run_tensor_hooks
from .grad_mode import STATE as GS
from .node import SAVED_ACCESS, EdgeTarget, GradientEdge, edge_target
from .record import ANOMALY, SAVED_HOOKS
from .ops import stack
from .tensor import Size, Tensor, wrap

SCALAR_MSG = "grad can be implicitly created only for scalar outputs"
UNUSED_MSG = ("The differentiated Tensor at index {} appears to not have been used in the "
              "graph. Set allow_unused=True if this is the desired behavior.")


def _seq(x, what, single=Tensor):
    if x is None:
        return None
    if isinstance(x, (Tensor, single)):
        return [x]
    if isinstance(x, (list, tuple)):
        return list(x)
    raise TypeError(f"{what} must be a Tensor or a sequence of Tensors, got {type(x).__name__}")


def _check_roots(roots):
    """Roots are Tensors that require grad, or GradientEdges (EdgeTargets: their node's
    output)."""
    for i, t in enumerate(roots):
        if isinstance(t, EdgeTarget):
            continue
        if not isinstance(t, Tensor):
            raise TypeError(f"element {i} of tensors is not a Tensor")
        if not t._requires_grad:
            raise RuntimeError(f"element {i} of tensors does not require grad and does not "
                               "have a grad_fn")


def _edges_as_targets(xs):
    """A sequence of Tensors and GradientEdges with each edge as what the engine takes: its
    leaf, or an EdgeTarget of its node's output."""
    if xs is None or not any(isinstance(x, GradientEdge) for x in xs):
        return xs
    return [edge_target(x) if isinstance(x, GradientEdge) else x for x in xs]


def _shape_dtype(t):
    """(shape, dtype) of a root: a Tensor's, or the node output a GradientEdge names."""
    if isinstance(t, EdgeTarget):
        info = t._grad_fn.info
        a = info.slot_avals[info.out_slots[t._out_nr]]
        return tuple(a.shape), a.dtype
    return t._data.shape, t._data.dtype


def _root_cts(roots, grads, create_graph, what):
    """One cotangent per root: the given gradient (checked) or ones for a scalar root."""
    grads = grads if grads is not None else [None] * len(roots)
    if len(grads) != len(roots):
        raise RuntimeError(f"got {len(roots)} tensors and {len(grads)} gradients ({what} "
                           "must have one entry, a Tensor or None, per output)")
    cts = []
    for i, (t, g) in enumerate(zip(roots, grads)):
        shape, dtype = _shape_dtype(t)
        if g is None:
            if math.prod(shape) != 1:
                raise RuntimeError(SCALAR_MSG)
            if dtype.kind == "c":       # torch: which real part would ones() seed?
                raise RuntimeError("grad can be implicitly created only for real scalar "
                                   f"outputs but got torch.{dtype.name}")
            ct = np.ones(shape, dtype)
            cts.append(wrap(ct) if create_graph else ct)
            continue
        if not isinstance(g, Tensor):
            g = wrap(np.asarray(g, dtype))
        if tuple(g.shape) != tuple(shape):
            raise RuntimeError(
                f"Mismatch in shape: grad_output[{i}] has a shape of "
                f"ft.Size({list(g.shape)}) and output[{i}] has a shape of "
                f"ft.Size({list(shape)}).")
        if g.dtype != dtype:
            if (g.dtype.kind == "c") != (dtype.kind == "c"):
                raise RuntimeError("For complex Tensors, both grad_output and output are "
                                   "required to have the same dtype. Mismatch in dtype: "
                                   f"grad_output[{i}] has a dtype of {g.dtype} and "
                                   f"output[{i}] has a dtype of {dtype}.")
            g = g.to(dtype)
        cts.append(g if create_graph else g._data)
    return cts


def _leaf_hooks(t, g, create_graph):
    hooks = t._hooks
    if hooks:
        if not isinstance(g, Tensor):
            g = wrap(g)
        g = run_tensor_hooks(g, hooks)
    return g


class _Callbacks(threading.local):
    """The callbacks queued during each backward call in progress on this thread."""

    def __init__(self):
        self.stack = []


CALLBACKS = _Callbacks()


def queue_callback(fn):
    """Run fn() once the current backward call has finished (every gradient accumulated,
    every post-accumulate hook run), as torch's `Variable._execution_engine.queue_callback`;
    DistributedDataParallel waits for its gradient all-reduces there."""
    if not CALLBACKS.stack:
        raise RuntimeError("Final callbacks can only be installed during backward pass.")
    CALLBACKS.stack[-1].append(fn)


class _final_callbacks:
    """Collect the callbacks queued while a backward call runs; run them (and any they queue)
    in order when it returns normally, drop them when it raises."""

    def __enter__(self):
        self.queue = []
        CALLBACKS.stack.append(self.queue)

    def __exit__(self, exc_type, *exc):
        try:
            if exc_type is None:
                i = 0
                while i < len(self.queue):
                    self.queue[i]()
                    i += 1
        finally:
            CALLBACKS.stack.pop()
        return False


class _CheckpointScope(threading.local):
    """Whether the innermost backward call on this thread accumulates into every leaf
    (.backward() without inputs=): torch.utils.checkpoint's re-entrant variant is valid
    only there, since its recomputed backward accumulates into every leaf it reaches."""

    def __init__(self):
        self.stack = []


CHECKPOINT_SCOPE = _CheckpointScope()


def is_checkpoint_valid():
    """True inside a .backward() without inputs= (torch.autograd._is_checkpoint_valid)."""
    return not CHECKPOINT_SCOPE.stack or CHECKPOINT_SCOPE.stack[-1]


class _checkpoint_scope:
    def __init__(self, valid):
        self.valid = valid

    def __enter__(self):
        CHECKPOINT_SCOPE.stack.append(self.valid)

    def __exit__(self, *exc):
        CHECKPOINT_SCOPE.stack.pop()
        return False


class _saved_hooks_kept:   # noqa: N801
    """The thread's saved-tensor hooks as they were before a backward call, restored after
    it (torch restores its thread-local state): a saved_tensors_hooks entered or exited by
    code running inside the backward (an unpack hook, a tensor hook) does not outlive it."""

    def __enter__(self):
        self.stack = list(SAVED_HOOKS.stack)

    def __exit__(self, *exc):
        SAVED_HOOKS.stack[:] = self.stack
        return False


class _ExecutionEngine:
    """`ft.autograd.Variable._execution_engine` (torch's name for the engine's callbacks)."""
    queue_callback = staticmethod(queue_callback)


Tensor._execution_engine = _ExecutionEngine()


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False,
             grad_variables=None, inputs=None):
    """Accumulate gradients of tensors w.r.t. the graph leaves (or `inputs`) into .grad."""
    roots = _edges_as_targets(_seq(tensors, "tensors", GradientEdge))
    if grad_tensors is None and grad_variables is not None:
        grad_tensors = grad_variables
    grads = _seq(grad_tensors, "grad_tensors") if not isinstance(grad_tensors, Tensor) \
        else [grad_tensors]
    if retain_graph is None:
        retain_graph = create_graph
    _check_roots(roots)
    targets = _edges_as_targets(_seq(inputs, "inputs", GradientEdge))
    if targets is not None:
        if len(targets) == 0:
            raise RuntimeError("`inputs` argument to `backward()` cannot be empty.")
        for t in targets:
            if not t._requires_grad:
                raise RuntimeError("One of the differentiated Tensors does not require grad")
    with _grad_mode(create_graph), _final_callbacks(), _checkpoint_scope(targets is None), \
            _saved_hooks_kept():
        cts = _root_cts(roots, grads, create_graph, "grad_tensors")
        res, targets = engine.run_backward(roots, cts, targets, retain_graph, create_graph,
                                           anomaly=ANOMALY.enabled, deliver=_accumulate)
        for t, g in zip(targets, res):
            if g is not None and not isinstance(t, EdgeTarget):     # (an edge's node
                _accumulate(t, g, create_graph)                      # output: no .grad)


def _accumulate(t, g, create_graph=False):
    """t's hooks on g, t.grad += g, then t's post-accumulate hooks (torch's AccumulateGrad
    node); the engine calls it during the backward for leaves with post-accumulate hooks."""
    acc = None
    if t._grad_fn is None:
        g = _leaf_hooks(t, g, create_graph)
        acc = t._accum
        if acc is not None and acc.pre:
            g = run_node_prehooks(acc.pre, g if isinstance(g, Tensor) else wrap(g))
    g = g if isinstance(g, Tensor) else wrap(g)
    engine.accumulate_grad(t, g, create_graph)
    post = t.__dict__.get("_post_hooks") if t._grad_fn is None else None
    if post:
        for fn in list(post.values()):
            if fn(t) is not None:
                raise RuntimeError(f"Tensor post accumulate grad hooks should return None. "
                                   f"(hook '{getattr(fn, '__name__', fn)}' returned a value)")
    if acc is not None and acc.post:
        for fn in list(acc.post.values()):
            fn((), (g,))


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         only_inputs=True, allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """Gradients of outputs w.r.t. inputs, returned (not accumulated), as torch.autograd.grad."""
    if is_grads_batched:
        return _batched_grad(outputs, inputs, grad_outputs, retain_graph, create_graph,
                             allow_unused, materialize_grads)
    outs = _edges_as_targets(_seq(outputs, "outputs", GradientEdge))
    ins = _seq(inputs, "inputs", GradientEdge)
    edges = [isinstance(t, GradientEdge) for t in ins]
    if any(edges):
        ins = [edge_target(t) if e else t for t, e in zip(ins, edges)]
    if not ins:
        raise RuntimeError("`inputs` argument to `grad()` cannot be empty.")
    gos = _seq(grad_outputs, "grad_outputs") if not isinstance(grad_outputs, Tensor) \
        else [grad_outputs]
    if materialize_grads and allow_unused is False:
        raise ValueError("Expected allow_unused to be True or not passed when "
                         "materialize_grads=True, but got: allow_unused=False.")
    if allow_unused is None:
        allow_unused = materialize_grads
    if retain_graph is None:
        retain_graph = create_graph
    _check_roots(outs)
    for t in ins:
        if not isinstance(t, (Tensor, EdgeTarget)):
            raise TypeError("inputs must be Tensors or GradientEdges")
        if not t._requires_grad:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
    with _grad_mode(create_graph), _final_callbacks(), _checkpoint_scope(False), \
            _saved_hooks_kept():
        cts = _root_cts(outs, gos, create_graph, "grad_outputs")
        res, _ = engine.run_backward(outs, cts, ins, retain_graph, create_graph,
                                     anomaly=ANOMALY.enabled)
        result = []
        for i, (t, g) in enumerate(zip(ins, res)):
            if g is None:
                if materialize_grads:
                    if edges[i]:
                        raise RuntimeError("materialize_grads cannot be used when the given "
                                           "input is a GradientEdge")
                    # a leaf requiring grad, as torch's (it may be differentiated again)
                    z = wrap(np.zeros(t._data.shape, t._data.dtype))
                    z._requires_grad = True
                    result.append(z)
                    continue
                if not allow_unused:
                    raise RuntimeError(UNUSED_MSG.format(i))
                result.append(None)
                continue
            if t._grad_fn is None:
                g = _leaf_hooks(t, g, create_graph)
            result.append(g if isinstance(g, Tensor) else wrap(g))
    return tuple(result)


def _batched_grad(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused,
                  materialize_grads):
    """grad(..., is_grads_batched=True): the first dimension of each grad_output is a batch
    of vectors; the result stacks their vector-Jacobian products. The backward runs once
    per batch element (the graph kept until the last), so hooks and custom Functions see
    unbatched gradients."""
    outs = _seq(outputs, "outputs")
    gos = [grad_outputs] if isinstance(grad_outputs, Tensor) else \
        _seq(grad_outputs, "grad_outputs")
    if len(gos) != len(outs) or any(g is None for g in gos):
        raise RuntimeError("is_grads_batched=True needs a batched grad_output for every output")
    for i, (g, o) in enumerate(zip(gos, outs)):
        if g.ndim == 0 or tuple(g.shape[1:]) != tuple(o.shape):
            raise RuntimeError(
                "If `is_grads_batched=True`, we interpret the first dimension of each "
                "grad_output as the batch dimension. The sizes of the remaining dimensions are "
                "expected to match the shape of corresponding output, but a mismatch was "
                f"detected: grad_output[{i}] has a shape of {Size(g.shape[1:])!r} and "
                f"output[{i}] has a shape of {Size(o.shape)!r}. If you only want some tensors "
                "in `grad_output` to be considered batched, consider using vmap.")
    n = gos[0].shape[0]
    if any(g.shape[0] != n for g in gos):
        raise RuntimeError("is_grads_batched=True: every grad_output needs the same batch size")
    if retain_graph is None:
        retain_graph = create_graph
    gos = [g if g.dtype == o.dtype else g.to(o.dtype) for g, o in zip(gos, outs)]  # as torch
    rows = [grad(outs, inputs, [g[b] for g in gos], retain_graph=retain_graph or b < n - 1,
                 create_graph=create_graph, allow_unused=allow_unused,
                 materialize_grads=materialize_grads) for b in range(n)]
    return tuple(None if row[0] is None else stack(list(row)) for row in zip(*rows))


class _grad_mode:
    """Backward runs with grad mode on only under create_graph (as torch)."""

    def __init__(self, create_graph):
        self.mode = bool(create_graph)

    def __enter__(self):
        self.prev = GS.enabled
        GS.enabled = self.mode

    def __exit__(self, *exc):
        GS.enabled = self.prev
        return False


def _tensor_backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulate d(self)/d(leaves) into the leaves' .grad (torch.Tensor.backward)."""
    backward([self], None if gradient is None else [gradient], retain_graph, create_graph,
             inputs=inputs)


_tensor_backward.__name__, _tensor_backward.__qualname__ = "backward", "Tensor.backward"
Tensor.backward = _tensor_backward


def _call_node(node, grads):
    """grad_fn(*grads): autograd.grad from the node's outputs (GradientEdges, given these
    gradients) to its inputs' edges, keeping its saved values, differentiable when grad
    mode is on (torch's Node.__call__ runs the node's backward in the caller's mode)."""
    info = node.info
    n_out = len(info.out_slots)
    if len(grads) != n_out:
        raise TypeError(f"{type(node).__name__}: expected {n_out} arguments, got "
                        f"{len(grads)} instead")
    edges = [e for e in node.edges if e is not None]
    if len(set((id(p), j) for p, j in edges)) != len(edges):
        raise NotImplementedError(
            f"calling {type(node).__name__} directly, whose inputs include one value twice: "
            "functrans differentiates values, not argument positions, so it cannot split that "
            "value's gradient between them; use ft.autograd.grad on the op's output instead")
    outs = [GradientEdge(node, j) for j in range(n_out) if info.out_float[j]]
    gos = [g for g, f in zip(grads, info.out_float) if f]
    res = iter(grad(outs, [GradientEdge(*e) for e in edges], gos, retain_graph=True,
                    create_graph=GS.enabled, allow_unused=True)) if edges else iter(())
    out = tuple(next(res) if e is not None else None for e in node.edges)
    return out[0] if len(out) == 1 else out


SAVED_ACCESS.call = _call_node
