"""Full backward hooks of modules (register_full_backward_hook / _pre_hook).

One call of a hooked module wraps its tensor inputs that require grad, and its tensor
outputs, in an identity `autograd.Function`. The Function returns *aliases*: new tensors
sharing storage and version counter with the originals, not views. An in-place module
(`ReLU(inplace=True)`) can therefore modify its input under a hook: the alias's history is
rebased like any non-view tensor's, and any other node that saved the original sees the
version bump. (PyTorch's first implementation returned views from a custom Function, which
made such in-place ops an error.)

Order in backward: the output Function's backward receives grad_output (the gradients of
the module's outputs), runs the backward pre-hooks (which may replace grad_output); the
input Function's backward receives grad_input and runs the full backward hooks
hook(module, grad_input, grad_output), each of which may return a replacement grad_input.
"""
from __future__ import annotations

import itertools
import warnings

from ...core import Tracer
from ...facade.function import Function
from ...facade.grad_mode import is_grad_enabled
from ...facade.node import HookDict
from ...facade.tensor import Tensor

# global hooks of every module (torch.nn.modules.module.register_module_forward_hook and
# friends; registered through module.py, read here by BackwardHook)
_global_forward_pre_hooks: HookDict = HookDict()
_global_forward_hooks: HookDict = HookDict()
_global_backward_hooks: HookDict = HookDict()


class BackwardHookFunction(Function):
    """Identity on tensors whose backward hands the gradients to a BackwardHook (torch's
    name: its outputs' grad_fn is BackwardHookFunctionBackward)."""

    @staticmethod
    def forward(ctx, state, side, *tensors):
        ctx.state = state
        ctx.side = side
        # an output the loss does not use has no gradient: the hooks see None, as torch's
        ctx.set_materialize_grads(False)
        return tuple(tensors)

    @staticmethod
    def backward(ctx, *grads):
        state = ctx.state
        if ctx.side == "output":
            grads = state.on_grad_output(grads)
        else:
            grads = state.on_grad_input(grads)
        return (None, None) + tuple(grads)


def _hook_outputs(outs):
    """The hook Function's outputs are its inputs returned as-is; unlike other Functions'
    they may be modified in place (ReLU(inplace=True) after a hooked Linear): the in-place
    op's node follows the hook's identity node, which hands its gradient on unchanged, so
    the history stays right (torch refuses it, a limit of its view-based hooks)."""
    for o in outs:
        o.__dict__.pop("_fn_view", None)
    return outs


def _flat_tensors(value):
    """(positions, tensors) of the Tensors in a value or a tuple/list of values."""
    if isinstance(value, Tensor):
        return [None], [value]
    if isinstance(value, (tuple, list)):
        pos = [i for i, v in enumerate(value) if isinstance(v, Tensor)]
        return pos, [value[i] for i in pos]
    return [], []


def _has_tracer(args):
    for a in args:
        if isinstance(a, Tracer) or (isinstance(a, Tensor) and isinstance(a._data, Tracer)):
            return True
        if isinstance(a, (tuple, list)) and _has_tracer(a):
            return True
    return False


class BackwardHook:
    """The state of one hooked call: which inputs/outputs went through the identities, and
    the grad_output captured in backward."""

    def __init__(self, module):
        self.module = module
        self.hooks = list(itertools.chain(_global_backward_hooks.values(),
                                          module._backward_hooks.values()))
        self.pre_hooks = list(module._backward_pre_hooks.values())
        self.n_inputs = 0
        self.input_slots = []        # index in grad_input of each wrapped input
        self.input_wrapped = False
        self.n_outputs = 0
        self.output_slots = []       # index in grad_output of each wrapped output
        self.grad_outputs = None

    # -- forward -----------------------------------------------------------------------

    def _refuse_traced(self, values):
        if _has_tracer(values):
            raise RuntimeError(
                f"{type(self.module).__name__} has full backward hooks, which cannot run when "
                "the module is called on traced values (inside ft.grad / ft.vmap / ft.jit, e.g. "
                "through ft.func.functional_call). Remove them for this call (handle.remove()).")

    def setup_input_hook(self, args):
        """Wrap the tensor inputs that require grad; returns the new args."""
        self._refuse_traced(args)
        tensors = [(i, a) for i, a in enumerate(args) if isinstance(a, Tensor)]
        self.n_inputs = len(tensors)
        if not is_grad_enabled():
            return args
        wrap = [(k, i, a) for k, (i, a) in enumerate(tensors) if a.requires_grad]
        if not wrap:
            return args
        outs = _hook_outputs(BackwardHookFunction.apply(self, "input", *[a for _, _, a in wrap]))
        args = list(args)
        for (k, i, _), new in zip(wrap, outs):
            args[i] = new
        self.input_slots = [k for k, _, _ in wrap]
        self.input_wrapped = True
        return tuple(args)

    def setup_output_hook(self, result):
        """Wrap the tensor outputs (a Tensor or a tuple/list of them) that require grad."""
        self._refuse_traced(result if isinstance(result, (tuple, list)) else (result,))
        pos, tensors = _flat_tensors(result)
        self.n_outputs = len(tensors)
        if not is_grad_enabled():
            return result
        wrap = [(k, t) for k, t in enumerate(tensors) if t.requires_grad]
        if not wrap:
            return result
        outs = _hook_outputs(BackwardHookFunction.apply(self, "output", *[t for _, t in wrap]))
        self.output_slots = [k for k, _ in wrap]
        new = list(tensors)
        for (k, _), o in zip(wrap, outs):
            new[k] = o
        if pos == [None]:
            return new[0]
        out = list(result)
        for p, t in zip(pos, new):
            out[p] = t
        return type(result)(out) if isinstance(result, tuple) else out

    # -- backward ----------------------------------------------------------------------

    def on_grad_output(self, grads):
        """Capture grad_output, run the backward pre-hooks; returns the (replaced) grads."""
        full = [None] * self.n_outputs
        for k, g in zip(self.output_slots, grads):
            full[k] = g
        full = tuple(full)
        for hook in self.pre_hooks:
            r = hook(self.module, full)
            if r is None:
                continue
            r = tuple(r) if isinstance(r, (tuple, list)) else (r,)
            if len(r) != len(full):
                raise RuntimeError(f"Backward pre hook returned an invalid number of "
                                   f"grad_output, got {len(r)}, but expected {len(full)}")
            full = r
        self.grad_outputs = full
        if not self.input_wrapped:
            # no input requires grad: the hooks run now, with grad_input all None (as torch)
            if self.hooks:
                warnings.warn("Full backward hook is firing when gradients are computed with "
                              "respect to module outputs since no inputs require gradients. "
                              "See Module.register_full_backward_hook's documentation for "
                              "more details.", UserWarning, stacklevel=2)
            none = (None,) * self.n_inputs
            for hook in self.hooks:
                r = hook(self.module, none, full)
                if r is not None and not all(g is None for g in (
                        r if isinstance(r, (tuple, list)) else (r,))):
                    raise RuntimeError("Backward hook for Modules where no input requires "
                                       "gradient should always return None or None for all "
                                       "gradients.")
        return [full[k] for k in self.output_slots]

    def on_grad_input(self, grads):
        """Run the full backward hooks with grad_input; returns the (replaced) grads."""
        if self.grad_outputs is None:
            # the gradient reached the inputs without passing through the outputs
            return list(grads)
        full = [None] * self.n_inputs
        for k, g in zip(self.input_slots, grads):
            full[k] = g
        full = tuple(full)
        for hook in self.hooks:
            r = hook(self.module, full, self.grad_outputs)
            if r is None:
                continue
            r = tuple(r) if isinstance(r, (tuple, list)) else (r,)
            if len(r) != len(full):
                raise RuntimeError(f"Backward hook returned an invalid number of grad_input, "
                                   f"got {len(r)}, but expected {len(full)}")
            full = r
        return [full[k] for k in self.input_slots]
