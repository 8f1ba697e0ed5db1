"""torch.autograd.graph: the graph's nodes and edges, hooks on the values saved for
backward, and hooks over several tensors' gradients."""
from __future__ import annotations

import collections
import threading
import weakref

from ..facade.api import CALLBACKS, queue_callback
from ..facade.node import GradientEdge, Node, edge_of
from ..facade.grad_mode import no_grad
from ..facade.record import SAVED_HOOKS, SAVED_HOOKS_EVER, WRITE_WATCH, vc_of

__all__ = ["Node", "GradientEdge", "get_gradient_edge", "saved_tensors_hooks", "save_on_cpu",
           "disable_saved_tensors_hooks", "register_multi_grad_hook", "increment_version",
           "allow_mutation_on_saved_tensors"]



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
        SAVED_HOOKS_EVER.on = True
        SAVED_HOOKS.stack.append((self.pack_hook, self.unpack_hook))
        return self

    def __exit__(self, *exc):
        if SAVED_HOOKS.stack:       # (an exit without its enter, as torch: no error)
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
    runs = {}       # id(backward call) -> [that call, fired, grads]: one state per backward
    #                 call, so nested backwards, or backwards on several threads, share none

    def hook_for(i):
        def hook(g):
            run = CALLBACKS.stack[-1] if CALLBACKS.stack else None
            with lock:
                st = runs.get(id(run))
                if st is None or st[0] is not run:              # a new backward pass
                    st = runs[id(run)] = [run, False, [None] * len(tensors)]
                    if run is not None:
                        queue_callback(lambda: finish(run))
                first = not st[1]
                st[1] = True
                st[2][i] = g
            if mode == "any" and first:
                fn(g)
        return hook

    def finish(run):
        with lock:
            st = runs.pop(id(run), None)
        if mode == "all" and st is not None:
            fn(st[2])
    handles = [t.register_hook(hook_for(i)) for i, t in enumerate(tensors)
               if t.requires_grad]
    return _MultiHandle(handles)




OUTSIDE_MUTATION_CONTEXT = ("Trying to backward outside of the 'allow_mutation_on_saved_tensors' "
                            "context in which the graph was originally recorded.")


class _SavedHandle:
    """What the graph holds for a value saved inside allow_mutation_on_saved_tensors: the
    context's tables are keyed by it weakly, so they forget a value once its graph is gone."""
    __slots__ = ("__weakref__",)


class _MutationContext:
    """The state of one allow_mutation_on_saved_tensors block (torch's names, which tests
    read): `original` and `cloned` map a saved value's handle to the tensor saved and to
    its copy taken before the first in-place write; `tid_to_weakhandle` maps (tensor,
    version) to its handle, `sid_to_tid` a storage (its version counter, shared by views)
    to the (tensor, version) pairs saved from it."""

    def __init__(self):
        self.original = weakref.WeakKeyDictionary()
        self.cloned = weakref.WeakKeyDictionary()
        self.tid_to_weakhandle = weakref.WeakValueDictionary()
        self.sid_to_tid = collections.defaultdict(set)
        self.active = True

    def pack(self, t):
        vc = vc_of(t)
        tid = (id(t), vc.v)
        handle = self.tid_to_weakhandle.get(tid)
        if handle is None:
            handle = self.tid_to_weakhandle[tid] = _SavedHandle()
        self.sid_to_tid[id(vc)].add(tid)
        self.original[handle] = t
        return handle

    def unpack(self, handle):
        if handle in self.cloned:
            return self.cloned[handle]
        if not self.active or handle not in self.original:
            raise AssertionError(OUTSIDE_MUTATION_CONTEXT)
        return self.original[handle]

    def before_write(self, t):
        """t's storage is about to change: copy each value saved from it, once."""
        vc = t._vc
        tids = self.sid_to_tid.get(id(vc)) if vc is not None else None
        if not tids:
            return
        for tid in tids:
            handle = self.tid_to_weakhandle.get(tid)
            if handle is None or handle in self.cloned or handle not in self.original:
                continue
            with no_grad():
                self.cloned[handle] = self.original[handle].detach().clone()
            del self.original[handle]

    def clear(self):
        self.active = False
        self.original.clear()
        self.cloned.clear()
        self.tid_to_weakhandle.clear()
        self.sid_to_tid.clear()


class allow_mutation_on_saved_tensors:  # noqa: N801  (torch's name)
    """Within the block, a tensor saved for backward may be modified in place: the value
    saved is copied just before the first write into its storage (through the tensor or any
    view of it), and the backward reads the copy. The backward must run inside the same
    block (else AssertionError); blocks do not nest. Yields the context (its `cloned` table
    holds the copies alive)."""

    _current = None

    def __enter__(self):
        if allow_mutation_on_saved_tensors._current is not None:
            raise RuntimeError("allow_mutation_on_saved_tensors contexts cannot be nested")
        self.ctx = _MutationContext()
        self.hooks = saved_tensors_hooks(self.ctx.pack, self.ctx.unpack)
        self.hooks.__enter__()
        self.prev_watch = WRITE_WATCH.fn
        WRITE_WATCH.fn = self.ctx.before_write
        allow_mutation_on_saved_tensors._current = self.ctx
        return self.ctx

    def __exit__(self, *exc):
        allow_mutation_on_saved_tensors._current = None
        WRITE_WATCH.fn = self.prev_watch
        self.hooks.__exit__(*exc)
        self.ctx.clear()
        return False
