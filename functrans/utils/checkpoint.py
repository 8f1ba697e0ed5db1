"""`ft.utils.checkpoint`: torch.utils.checkpoint's activation checkpointing on the facade.

`checkpoint(fn, *args, use_reentrant=...)` runs fn without recording its graph (nothing
inside is saved for backward), and recomputes it with grad mode on when the backward
reaches it: the recomputed outputs are differentiated with the incoming gradients, which
accumulate into whatever fn's recomputation reaches (its parameters' .grad) and flow on to
the checkpointed inputs. The random state is restored for the recomputation
(preserve_rng_state), so dropout draws the same mask.

Both of torch's variants run this way. torch's re-entrant variant (use_reentrant=True)
refuses torch.autograd.grad and backward(inputs=) with torch's error (its recomputation
would accumulate into every leaf); the non-re-entrant one accepts them here by
differentiating the recomputation with respect to the checkpointed inputs only (fn's own
parameters then get nothing, and asking for them raises the unused-input error). torch's
non-re-entrant variant recomputes lazily through saved-tensor hooks, which functrans does
not have: selective checkpointing (context_fn) and determinism checks are refused with an
error naming them. `set_checkpoint_early_stop` is accepted: torch's early stop only ends a
recomputation once the values the backward needs exist, and functrans always recomputes the
whole function, so both settings give the same values (early_stop=False's work).
"""
from __future__ import annotations

import contextlib
import threading
import warnings

from ..facade.api import backward as _backward, grad as _grad, is_checkpoint_valid
from ..facade.creation import default_generator
from ..facade.function import Function
from ..facade.grad_mode import enable_grad, no_grad
from ..facade.grad_mode import STATE as _GS
from ..facade.tensor import Tensor

__all__ = ["checkpoint", "checkpoint_sequential", "set_checkpoint_early_stop"]

_EARLY_STOP = threading.local()


@contextlib.contextmanager
def set_checkpoint_early_stop(enable: bool):
    """torch.utils.checkpoint.set_checkpoint_early_stop: whether a non-re-entrant
    recomputation may stop once the values the backward needs are recomputed. A performance
    setting in torch; functrans's recomputation runs the whole function either way (the
    values do not depend on it), so this only records the setting for the block."""
    prev = getattr(_EARLY_STOP, "enabled", True)
    _EARLY_STOP.enabled = bool(enable)
    try:
        yield
    finally:
        _EARLY_STOP.enabled = prev

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
    """The checkpointed segment as one node (CheckpointFunctionBackward, torch's name)."""

    @staticmethod
    def forward(ctx, run_function, preserve_rng_state, reentrant, *args):
        ctx.run_function = run_function
        ctx.preserve_rng_state = preserve_rng_state
        ctx.reentrant = reentrant
        ctx.had_grad = _GS.enabled
        if preserve_rng_state:      # kept as a tuple: not a tensor the backward reads
            ctx.rng_state = (default_generator.get_state(),)
        ctx.tensor_pos = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        ctx.non_tensors = [None if isinstance(a, Tensor) else a for a in args]
        ctx.save_for_backward(*(args[i] for i in ctx.tensor_pos))
        with no_grad():
            return run_function(*args)

    @staticmethod
    def backward(ctx, *grad_outputs):
        if ctx.reentrant and not is_checkpoint_valid():
            raise RuntimeError(REENTRANT_GRAD_MSG)
        args = list(ctx.non_tensors)
        for i, t in zip(ctx.tensor_pos, ctx.saved_tensors):
            args[i] = t
        # under create_graph (grad mode on in a backward) the recomputation starts from the
        # inputs themselves, so the gradients it returns stay differentiable w.r.t. them
        higher = _GS.enabled and not is_checkpoint_valid()
        inputs = args if higher else _detach_like(args)
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
        wanted = [a for a in inputs if isinstance(a, Tensor) and a.requires_grad]
        if is_checkpoint_valid():
            _backward(roots, grads)
            got = {id(a): a.grad for a in wanted}
        else:
            gs = _grad(roots, wanted, grads, allow_unused=True, create_graph=higher) \
                if wanted else ()
            got = {id(a): g for a, g in zip(wanted, gs)}
        return (None, None, None) + tuple(
            got.get(id(a)) if isinstance(a, Tensor) else None for a in inputs)


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
    if kwargs:      # (non-re-entrant) keyword tensors are inputs too: gradients reach them
        names, n = list(kwargs), len(args)
        inner = function

        def function(*a):
            return inner(*a[:n], **dict(zip(names, a[n:])))
        args = args + tuple(kwargs.values())
    return CheckpointFunction.apply(function, preserve_rng_state, bool(use_reentrant), *args)


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
