"""torch.autograd.graph: the graph's nodes and edges, hooks on the values saved for
backward, and hooks over several tensors' gradients."""
from __future__ import annotations

import collections
import threading

from ..facade.api import CALLBACKS, queue_callback
from ..facade.node import Node, edge_of
from ..facade.record import SAVED_HOOKS, vc_of

__all__ = ["Node", "GradientEdge", "get_gradient_edge", "saved_tensors_hooks", "save_on_cpu",
           "disable_saved_tensors_hooks", "register_multi_grad_hook", "increment_version"]

GradientEdge = collections.namedtuple("GradientEdge", "node output_nr")
GradientEdge.__doc__ = "A node of the graph and which of its outputs (torch's GradientEdge)."


def get_gradient_edge(tensor) -> GradientEdge:
    """The edge a gradient flows along into tensor: its grad_fn and output index, or its
    AccumulateGrad node for a leaf that requires grad."""
    if not tensor.requires_grad:
        raise RuntimeError("It is not possible to get the gradient edge for a Tensor that "
                           "does not require gradients")
    if tensor.grad_fn is not None:
        return GradientEdge(tensor.grad_fn, tensor._out_nr)
    node, nr = edge_of(tensor)
    return GradientEdge(node, nr)


class saved_tensors_hooks:  # noqa: N801  (torch's name)
    """Within the block, every value an op saves for backward goes through pack_hook
    (pack_hook(tensor) -> anything) when it is saved, and comes back through
    unpack_hook(packed) -> Tensor when backward reads it; custom Functions'
    save_for_backward too. Hooks in effect when a value is saved are the ones used."""

    def __init__(self, pack_hook, unpack_hook):
        self.pack_hook, self.unpack_hook = pack_hook, unpack_hook

    def __enter__(self):
        if SAVED_HOOKS.disabled is not None:
            raise RuntimeError(SAVED_HOOKS.disabled)
        SAVED_HOOKS.stack.append((self.pack_hook, self.unpack_hook))
        return self

    def __exit__(self, *exc):
        SAVED_HOOKS.stack.pop()
        return False


class save_on_cpu(saved_tensors_hooks):  # noqa: N801
    """Saved values are kept in host memory (a copy of a CuPy array moves to the host and
    back at backward; NumPy arrays are host memory already and are kept as they are)."""

    def __init__(self, pin_memory=False, device_type="cuda"):
        def pack(t):
            return (t.device, t.cpu())

        def unpack(packed):
            device, t = packed
            return t.to(device)
        super().__init__(pack, unpack)


class disable_saved_tensors_hooks:  # noqa: N801
    """Within the block, entering saved_tensors_hooks raises RuntimeError(error_message)."""

    def __init__(self, error_message):
        self.error_message = error_message

    def __enter__(self):
        self.prev = SAVED_HOOKS.disabled
        SAVED_HOOKS.disabled = self.error_message
        return self

    def __exit__(self, *exc):
        SAVED_HOOKS.disabled = self.prev
        return False


def increment_version(tensor):
    """Bump tensor's version counter, as an in-place op would (so backward refuses a saved
    value modified behind autograd's back)."""
    vc_of(tensor).v += 1


class _MultiHandle:
    def __init__(self, handles):
        self.handles = handles

    def remove(self):
        for h in self.handles:
            h.remove()


def register_multi_grad_hook(tensors, fn, *, mode="all"):
    """fn over the gradients of several tensors in one backward. mode="all": once the
    backward is done, fn(grads), one entry per tensor (None for those it did not reach);
    mode="any": fn(grad) with the first of them computed. Returns a handle (remove())."""
    if mode not in ("all", "any"):
        raise ValueError(f"Expects mode to be one of ('all', 'any') but got {mode}")
    tensors = tuple(tensors)
    lock = threading.Lock()
    state = {"grads": None, "fired": False, "owner": None}

    def hook_for(i):
        def hook(g):
            run = CALLBACKS.stack[-1] if CALLBACKS.stack else None
            with lock:
                if state["owner"] is not run:           # a new backward pass
                    state["owner"], state["fired"] = run, False
                    state["grads"] = [None] * len(tensors)
                    if mode == "all" and run is not None:
                        queue_callback(finish)
                first = not state["fired"]
                state["fired"] = True
                state["grads"][i] = g
            if mode == "any" and first:
                fn(g)
        return hook

    def finish():
        with lock:
            grads, state["grads"], state["owner"] = state["grads"], None, None
        if grads is not None:
            fn(grads)
    handles = [t.register_hook(hook_for(i)) for i, t in enumerate(tensors)
               if t.requires_grad]
    return _MultiHandle(handles)


