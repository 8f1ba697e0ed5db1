"""`ft.utils.checkpoint`: torch.utils.checkpoint's activation checkpointing on the facade.

The non-re-entrant variant (`use_reentrant=False`) is torch's: fn runs as usual, recording
its own nodes, under saved-tensor hooks whose pack hook keeps a placeholder (a `_Holder`,
numbered in the order values are saved) instead of the value. When the backward (or
`grad_fn._saved_*`) first unpacks one of them, fn runs again on the same inputs with grad
mode on, its saved values are collected in the same order, and each placeholder gives its
value once per backward call (a second unpack in the same backward raises torch's error;
outside a backward every access recomputes). With early stop (the default;
`set_checkpoint_early_stop`, read when `checkpoint` is called) the recomputation ends as
soon as every value is there. Inputs and outputs may be any objects; the random state is
restored for the recomputation (preserve_rng_state), so dropout draws the same mask.

The re-entrant variant (`use_reentrant=True`) runs fn without recording its graph (one
`CheckpointFunctionBackward` node) and recomputes it when the backward reaches the node:
the recomputed outputs are differentiated with the incoming gradients, which accumulate
into whatever fn's recomputation reaches (its parameters' .grad) and flow on to the
checkpointed inputs; it refuses torch.autograd.grad and backward(inputs=) with torch's
error. Selective checkpointing (context_fn) is refused with an error naming it.
"""
from __future__ import annotations

import contextlib
import threading
import warnings

from ..autograd.graph import saved_tensors_hooks
from ..facade.api import CALLBACKS, backward as _backward, is_checkpoint_valid
from ..facade.creation import default_generator
from ..facade.function import Function
from ..facade.grad_mode import enable_grad, no_grad
from ..facade.tensor import Tensor

__all__ = ["checkpoint", "checkpoint_sequential", "set_checkpoint_early_stop"]

_EARLY_STOP = threading.local()


@contextlib.contextmanager
def set_checkpoint_early_stop(enable: bool):
    """torch.utils.checkpoint.set_checkpoint_early_stop: whether the non-re-entrant
    checkpoints made in the block end their recomputation as soon as every value the
    backward needs is recomputed (True, the default) or run the whole function again."""
    prev = getattr(_EARLY_STOP, "enabled", True)
    _EARLY_STOP.enabled = bool(enable)
    try:
        yield
    finally:
        _EARLY_STOP.enabled = prev


UNPACKED_TWICE_MSG = (
    "torch.utils.checkpoint: Unpack is being triggered for a tensor that was already unpacked "
    "once. If you are calling ctx.saved_tensors in backward, make sure to do so only once. "
    "Otherwise please open an issue with details on your use case.")


class _StopRecomputation(Exception):
    """Ends a recomputation early: every value the frame saved is there again."""


class _Holder:
    """What the forward's pack hook keeps in place of a saved value: its frame and its
    position in the order the values were saved."""
    __slots__ = ("frame", "index")

    def __init__(self, frame, index):
        self.frame, self.index = frame, index


class _Frame:
    """One non-re-entrant checkpoint call: the function and its inputs (to run it again),
    how many values its forward saved, and the values the last recomputation gave, for
    the backward call (graph task) it ran in."""

    def __init__(self, fn, args, kwargs, early_stop, rng_state):
        self.fn, self.args, self.kwargs = fn, args, kwargs
        self.early_stop, self.rng_state = early_stop, rng_state
        self.n = 0
        self.task = None           # the backward call the values are for (None: outside)
        self.values = {}           # index -> recomputed Tensor, each given out once
        self.given = set()         # indices given out in self.task

    def pack(self, t):
        h = _Holder(self, self.n)
        self.n += 1
        return h

    def unpack(self, h):
        task = CALLBACKS.stack[-1] if CALLBACKS.stack else None
        if task is None or task is not self.task:
            self._recompute(task)
        elif h.index in self.given:
            raise RuntimeError(UNPACKED_TWICE_MSG)
        v = self.values.pop(h.index, None)
        if v is None:
            raise RuntimeError(
                f"torch.utils.checkpoint: the recomputation of the checkpointed function saved "
                f"{len(self.given) + len(self.values)} values where its forward saved {self.n}: "
                "the function must do the same operations on tensors of the same shapes when "
                "it runs again (no branch on global state or on values that changed)")
        self.given.add(h.index)
        return v

    def _recompute(self, task):
        values = {}

        inputs = {id(a) for a in (*self.args, *self.kwargs.values()) if isinstance(a, Tensor)}

        def pack(t):
            # an input that requires no grad is given back itself (ctx.saved_tensors returns
            # the object saved, as without checkpoint); anything else detached, not a view,
            # and also as what the recomputation saves (a backward inside fn reads it): an
            # output's pack comes before its grad_fn is set, so keeping it would make a cycle
            v = t
            if t.requires_grad or id(t) not in inputs:
                v = t.detach()
                v._base = None
            values[len(values)] = v
            if self.early_stop and len(values) == self.n:
                raise _StopRecomputation
            return v

        def unpack(v):
            return v
        if self.rng_state is not None:
            state = default_generator.get_state()
            default_generator.set_state(self.rng_state)
        try:
            with enable_grad(), saved_tensors_hooks(pack, unpack):
                self.fn(*self.args, **self.kwargs)
        except _StopRecomputation:
            pass
        finally:
            if self.rng_state is not None:
                default_generator.set_state(state)
        self.task, self.values, self.given = task, values, set()


def _checkpoint_without_reentrant(fn, args, kwargs, preserve_rng_state):
    """torch's non-re-entrant checkpoint (the module docstring): fn(*args, **kwargs) with
    its saved values replaced by placeholders that recompute them when unpacked."""
    frame = _Frame(fn, args, kwargs, getattr(_EARLY_STOP, "enabled", True),
                   default_generator.get_state() if preserve_rng_state else None)
    with saved_tensors_hooks(frame.pack, frame.unpack):
        return fn(*args, **kwargs)


REENTRANT_GRAD_MSG = (
    "When use_reentrant=True, torch.utils.checkpoint is incompatible with .grad() or passing "
    "an `inputs` parameter to .backward(). To resolve this error, you can either set "
    "use_reentrant=False, or call .backward() without passing the `inputs` argument.")
USE_REENTRANT_WARNING = (
    "torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly. Pass "
    "use_reentrant=True or use_reentrant=False; functrans runs both by recomputing in the "
    "backward (see ft.utils.checkpoint's docstring).")


def _noop_context_fn():
    return None


def _detach_like(args):
    """Fresh leaves for the recomputation: each tensor input detached, requiring grad as the
    original did."""
    out = []
    for a in args:
        if isinstance(a, Tensor):
            d = a.detach()
            d.requires_grad_(a.requires_grad)
            out.append(d)
        else:
            out.append(a)
    return out


class CheckpointFunction(Function):
    """The re-entrant checkpointed segment as one node (CheckpointFunctionBackward, torch's
    name): fn runs without recording, and again in the backward, whose gradients a nested
    backward of the recomputation gives (so they reach fn's parameters too)."""

    @staticmethod
    def forward(ctx, run_function, preserve_rng_state, *args):
        ctx.run_function = run_function
        ctx.preserve_rng_state = preserve_rng_state
        if preserve_rng_state:      # kept as a tuple: not a tensor the backward reads
            ctx.rng_state = (default_generator.get_state(),)
        ctx.tensor_pos = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        ctx.non_tensors = [None if isinstance(a, Tensor) else a for a in args]
        ctx.save_for_backward(*(args[i] for i in ctx.tensor_pos))
        with no_grad():
            return run_function(*args)

    @staticmethod
    def backward(ctx, *grad_outputs):
        if not is_checkpoint_valid():
            raise RuntimeError(REENTRANT_GRAD_MSG)
        args = list(ctx.non_tensors)
        for i, t in zip(ctx.tensor_pos, ctx.saved_tensors):
            args[i] = t
        inputs = _detach_like(args)
        if ctx.preserve_rng_state:
            state = default_generator.get_state()
            default_generator.set_state(ctx.rng_state[0])
        try:
            with enable_grad():
                outputs = ctx.run_function(*inputs)
        finally:
            if ctx.preserve_rng_state:
                default_generator.set_state(state)
        if isinstance(outputs, Tensor):
            outputs = (outputs,)
        roots, grads = [], []
        for o, g in zip(outputs, grad_outputs):
            if isinstance(o, Tensor) and o.requires_grad and g is not None:
                roots.append(o)
                grads.append(g)
        if not roots:
            raise RuntimeError("none of output has requires_grad=True, this checkpoint() is "
                               "not necessary")
        _backward(roots, grads)
        return (None, None) + tuple(a.grad if isinstance(a, Tensor) else None for a in inputs)


def checkpoint(function, *args, use_reentrant=None, context_fn=_noop_context_fn,
               determinism_check="default", debug=False, preserve_rng_state=True, **kwargs):
    """torch.utils.checkpoint.checkpoint: fn(*args, **kwargs) without keeping its
    intermediate values; recomputed in the backward."""
    if use_reentrant is None:
        warnings.warn(USE_REENTRANT_WARNING, stacklevel=2)
        use_reentrant = True
    if use_reentrant:
        if context_fn is not _noop_context_fn or debug:
            raise ValueError("Passing `context_fn` or `debug` is only supported when "
                             "use_reentrant=False.")
        if kwargs:
            raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
    elif context_fn is not _noop_context_fn:
        raise NotImplementedError("torch.utils.checkpoint: context_fn (selective "
                                  "checkpointing) is not supported by functrans; checkpoint "
                                  "the segment whole")
    if determinism_check not in ("default", "none"):
        raise ValueError(f"determinism_check should be one of ['default', 'none'], but got "
                         f"{determinism_check}")
    if not use_reentrant:
        return _checkpoint_without_reentrant(function, args, kwargs, preserve_rng_state)
    return CheckpointFunction.apply(function, preserve_rng_state, *args)


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):  # noqa: A002
    """torch.utils.checkpoint.checkpoint_sequential: the modules (or functions) in `segments`
    chunks, each checkpointed but the last, which runs as usual."""
    if use_reentrant is None:
        warnings.warn(USE_REENTRANT_WARNING, stacklevel=2)
        use_reentrant = True
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
    if hasattr(functions, "children") and not isinstance(functions, (list, tuple)):
        functions = list(functions.children())
    functions = list(functions)

    def run(start, end):
        def forward(x):
            for j in range(start, end + 1):
                x = functions[j](x)
            return x
        return forward

    segment_size = len(functions) // segments
    end = -1
    for start in range(0, segment_size * (segments - 1), segment_size):
        end = start + segment_size - 1
        input = checkpoint(run(start, end), input, use_reentrant=use_reentrant,  # noqa: A001
                           preserve_rng_state=preserve)
    return run(end + 1, len(functions) - 1)(input)
