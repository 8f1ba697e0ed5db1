"""nn.Module and nn.Parameter: registration by attribute assignment, traversal, state dicts,
train/eval, and forward / backward hooks (torch.nn.Module).

Hooks live, as in PyTorch, in ordered dicts keyed by handle id with removable handles.
`__call__` goes straight to `forward` when a module has no hooks. Full backward hooks use one
identity `autograd.Function` over the module's tensor inputs and one over its outputs; their
outputs are fresh tensors that share storage and version counter with the originals but are
not views, so an in-place module (`ReLU(inplace=True)`) works under a backward hook (the
view-identity pitfall of PyTorch's first implementation is avoided by construction).
"""
from __future__ import annotations

import functools
import itertools
from collections import OrderedDict, namedtuple

import numpy as np

from ...tree_util import register_pytree_node
from ...facade import dtypes as D
from ...facade.grad_mode import no_grad
from ...facade.node import HookDict, RemovableHandle
from ...facade.tensor import TENSOR_PYTREE, Tensor, parse_to, traced_hooks
from ...optim.optimizer import _zero_grad
from .hooks import (BackwardHook, _global_backward_hooks, _global_forward_hooks,
                    _global_forward_pre_hooks)

def fire_forward_hooks(module, kind, hooks, args, kwargs, result=None, refuse=None):
    """Call a module's forward pre-hooks (kind "pre"), forward hooks ("post") or, after
    forward raised, its always-called forward hooks ("failed", result None), torch's way:
    a pre-hook may return new args or (args, kwargs), a forward hook a new result. Where a
    replacement cannot be taken (compiled code), `refuse(hook)` is called instead. The one
    loop over forward hooks; returns (args, kwargs) for "pre", else the result."""
    for _, hook, with_kwargs in hooks:
        if kind == "pre":
            r = hook(module, args, kwargs) if with_kwargs else hook(module, args)
            if r is not None:
                if refuse is not None:
                    refuse(hook)
                if with_kwargs:
                    if not (isinstance(r, tuple) and len(r) == 2):
                        raise RuntimeError("forward pre-hook must return None or a tuple of "
                                           f"(new_args, new_kwargs), but got {r}.")
                    args, kwargs = r
                else:
                    args = r if isinstance(r, tuple) else (r,)
        elif kind == "failed":
            try:
                hook(module, args, kwargs, None) if with_kwargs else hook(module, args, None)
            except Exception:
                pass
        else:
            r = (hook(module, args, kwargs, result) if with_kwargs
                 else hook(module, args, result))
            if r is not None:
                if refuse is not None:
                    refuse(hook)
                result = r
    return (args, kwargs) if kind == "pre" else result


# ---------------------------------------------------------------------------
# Parameter

_TENSOR_STATE = tuple(k for k in Tensor.__slots__ if k not in ("__weakref__", "__dict__"))


def _make_subclass(cls, data, requires_grad):
    """A `cls` instance sharing data's storage and version counter, a leaf (torch's
    Tensor._make_subclass)."""
    make = getattr(Tensor, "_make_subclass", None)
    if make is not None:
        return make(cls, data, requires_grad)
    t = data.detach()
    p = object.__new__(cls)
    for k in _TENSOR_STATE:
        setattr(p, k, getattr(t, k))
    p._requires_grad = False
    if requires_grad:
        p.requires_grad_(True)
    return p


class Parameter(Tensor):
    """A leaf tensor that a Module registers as a parameter when assigned as an attribute.

    Parameter(data) shares storage with `data` and requires grad by default."""

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            data = Tensor._make(np.zeros((0,), D.get_default_dtype()))
        elif not isinstance(data, Tensor):
            raise TypeError(f"Parameter data must be a Tensor, got {type(data).__name__}")
        return _make_subclass(cls, data, requires_grad)

    def __init__(self, data=None, requires_grad=True):
        pass

    def __repr__(self):
        return "Parameter containing:\n" + Tensor.__repr__(self)

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        out = type(self)(self.detach().clone(), self.requires_grad)
        memo[id(self)] = out
        return out


register_pytree_node(Parameter, *TENSOR_PYTREE)     # a pytree node as Tensor is


class Buffer(Tensor):
    """Marks a tensor as a buffer when assigned to a Module attribute (torch.nn.Buffer)."""

    def __new__(cls, data=None, *, persistent=True):
        if data is None:
            data = Tensor._make(np.zeros((0,), D.get_default_dtype()))
        t = data.detach()
        t._ft_buffer_persistent = persistent
        return t


# ---------------------------------------------------------------------------
# Module

_IncompatibleKeysBase = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])


class _IncompatibleKeys(_IncompatibleKeysBase):
    """What load_state_dict returns: (missing_keys, unexpected_keys)."""

    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


def _addindent(s, n):
    lines = s.split("\n")
    if len(lines) == 1:
        return s
    return lines[0] + "\n" + "\n".join(" " * n + line for line in lines[1:])


def register_module_forward_pre_hook(hook):
    """A forward pre-hook for every module: hook(module, args) -> None or new args."""
    h = RemovableHandle(_global_forward_pre_hooks)
    _global_forward_pre_hooks[h.id] = hook
    return h


def register_module_forward_hook(hook):
    """A forward hook for every module: hook(module, args, output) -> None or new output."""
    h = RemovableHandle(_global_forward_hooks)
    _global_forward_hooks[h.id] = hook
    return h


def register_module_full_backward_hook(hook):
    """A full backward hook for every module: hook(module, grad_input, grad_output)."""
    h = RemovableHandle(_global_backward_hooks)
    _global_backward_hooks[h.id] = hook
    return h


class Module:
    """Base class of every layer: holds parameters, buffers and submodules by name."""

    training: bool
    _version = 1
    call_super_init = False

    def __init__(self, *args, **kwargs):
        if args or kwargs:
            raise TypeError(f"{type(self).__name__}.__init__() got unexpected arguments")
        d = self.__dict__
        d["training"] = True
        d["_parameters"] = {}
        d["_buffers"] = {}
        d["_non_persistent_buffers_set"] = set()
        d["_modules"] = {}
        d["_forward_pre_hooks"] = HookDict()
        d["_forward_pre_hooks_with_kwargs"] = set()
        d["_forward_hooks"] = HookDict()
        d["_forward_hooks_with_kwargs"] = set()
        d["_forward_hooks_always_called"] = set()
        d["_backward_hooks"] = HookDict()
        d["_backward_pre_hooks"] = HookDict()
        d["_state_dict_hooks"] = HookDict()
        d["_load_state_dict_pre_hooks"] = HookDict()

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required '
                                  '"forward" function')

    # -- registration ------------------------------------------------------------------

    def _check_init(self):
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameters, buffers or modules before "
                                 "Module.__init__() call")

    def register_parameter(self, name: str, param):
        """Add a parameter (or None) under `name`."""
        self._check_init()
        if not isinstance(name, str):
            raise TypeError(f"parameter name should be a string. Got {type(name).__name__}")
        if "." in name:
            raise KeyError('parameter name can\'t contain "."')
        if name == "":
            raise KeyError('parameter name can\'t be empty string ""')
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{_type_name(param)}' object to parameter '{name}' "
                            "(torch.nn.Parameter or None required)")
        if param is not None and param.grad_fn is not None:
            raise ValueError(f"Cannot assign non-leaf Tensor to parameter '{name}'. Model "
                             f"parameters must be created explicitly. To express '{name}' as a "
                             "function of another Tensor, compute the value in the forward() "
                             "method.")
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor, persistent: bool = True):
        """Add a buffer (state that is not a parameter, e.g. running statistics) or None."""
        self._check_init()
        if not isinstance(name, str):
            raise TypeError(f"buffer name should be a string. Got {type(name).__name__}")
        if "." in name:
            raise KeyError('buffer name can\'t contain "."')
        if name == "":
            raise KeyError('buffer name can\'t be empty string ""')
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{_type_name(tensor)}' object to buffer '{name}' "
                            "(torch Tensor or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name: str, module):
        """Add a child module (or None) under `name`."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{_type_name(module)} is not a Module subclass")
        if not isinstance(name, str):
            raise TypeError(f"module name should be a string. Got {type(name).__name__}")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        if "." in name:
            raise KeyError(f'module name can\'t contain ".", got: {name}')
        if name == "":
            raise KeyError('module name can\'t be empty string ""')
        self._modules[name] = module

    register_module = add_module

    def __setattr__(self, name, value):
        d = self.__dict__

        def remove_from(*dicts_or_sets):
            for ds in dicts_or_sets:
                if name in ds:
                    if isinstance(ds, dict):
                        del ds[name]
                    else:
                        ds.discard(name)

        params = d.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            remove_from(d, self._buffers, self._modules, self._non_persistent_buffers_set)
            self.register_parameter(name, value)
            return
        if params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{_type_name(value)}' as parameter '{name}' "
                                "(torch.nn.Parameter or None expected)")
            self.register_parameter(name, value)
            return
        modules = d.get("_modules")
        if isinstance(value, Module):
            if modules is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            remove_from(d, self._parameters, self._buffers, self._non_persistent_buffers_set)
            modules[name] = value
            return
        if modules is not None and name in modules:
            if value is not None:
                raise TypeError(f"cannot assign '{_type_name(value)}' as child module '{name}' "
                                "(torch.nn.Module or None expected)")
            modules[name] = value
            return
        buffers = d.get("_buffers")
        if buffers is not None and isinstance(value, Tensor) and hasattr(
                value, "_ft_buffer_persistent"):
            persistent = value._ft_buffer_persistent
            del value._ft_buffer_persistent
            remove_from(d, self._parameters, self._modules)
            self.register_buffer(name, value, persistent)
            return
        if buffers is not None and name in buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{_type_name(value)}' as buffer '{name}' "
                                "(torch.Tensor or None expected)")
            buffers[name] = value
            return
        object.__setattr__(self, name, value)

    def __getattr__(self, name):
        d = self.__dict__
        if "_parameters" in d:
            p = d["_parameters"]
            if name in p:
                return p[name]
            b = d["_buffers"]
            if name in b:
                return b[name]
            m = d["_modules"]
            if name in m:
                return m[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        if name in self._parameters:
            del self._parameters[name]
        elif name in self._buffers:
            del self._buffers[name]
            self._non_persistent_buffers_set.discard(name)
        elif name in self._modules:
            del self._modules[name]
        else:
            object.__delattr__(self, name)

    def __dir__(self):
        keys = list(object.__dir__(self))
        keys += list(self._parameters) + list(self._buffers) + list(self._modules)
        return sorted(set(k for k in keys if not k[0].isdigit()))

    def get_submodule(self, target: str):
        """The submodule at a dotted path ('' is self)."""
        if target == "":
            return self
        mod = self
        for item in target.split("."):
            if not hasattr(mod, item):
                raise AttributeError(f"{type(mod).__name__} has no attribute `{item}`")
            mod = getattr(mod, item)
            if not isinstance(mod, Module):
                raise AttributeError(f"`{item}` is not an nn.Module")
        return mod

    def get_parameter(self, target: str):
        """The parameter at a dotted path."""
        path, _, name = target.rpartition(".")
        mod = self.get_submodule(path)
        if not hasattr(mod, name):
            raise AttributeError(f"{type(mod).__name__} has no attribute `{name}`")
        p = getattr(mod, name)
        if not isinstance(p, Parameter):
            raise AttributeError(f"`{name}` is not an nn.Parameter")
        return p

    def get_buffer(self, target: str):
        """The buffer at a dotted path."""
        path, _, name = target.rpartition(".")
        mod = self.get_submodule(path)
        if name not in mod._buffers:
            raise AttributeError(f"`{name}` is not a buffer")
        return mod._buffers[name]

    # -- traversal ---------------------------------------------------------------------

    def _named_members(self, get_members, prefix="", recurse=True, remove_duplicate=True):
        memo = set()
        modules = (self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)
                   if recurse else [(prefix, self)])
        for module_prefix, module in modules:
            for k, v in get_members(module):
                if v is None or (remove_duplicate and id(v) in memo):
                    continue
                if remove_duplicate:
                    memo.add(id(v))
                yield (module_prefix + ("." if module_prefix else "") + k, v)

    def parameters(self, recurse: bool = True):
        """Every parameter (each shared one once)."""
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True):
        """(dotted name, parameter) pairs, depth first in registration order."""
        yield from self._named_members(lambda m: m._parameters.items(), prefix, recurse,
                                       remove_duplicate)

    def buffers(self, recurse: bool = True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True):
        yield from self._named_members(lambda m: m._buffers.items(), prefix, recurse,
                                       remove_duplicate)

    def children(self):
        for _, m in self.named_children():
            yield m

    def named_children(self):
        memo = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in memo:
                memo.add(id(m))
                yield name, m

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_modules(self, memo=None, prefix: str = "", remove_duplicate: bool = True):
        """(dotted name, module) for self and every descendant, each shared one once."""
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is None:
                continue
            sub = prefix + ("." if prefix else "") + name
            yield from m.named_modules(memo, sub, remove_duplicate)

    # -- modes and bulk operations -----------------------------------------------------

    def train(self, mode: bool = True):
        """Set training mode on self and every descendant; returns self."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for m in self.children():
            m.train(mode)
        return self

    def eval(self):
        """train(False)."""
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True):
        """Reset the gradients of every parameter: to None (default) or to zeros in place."""
        for p in self.parameters():
            _zero_grad(p, set_to_none)

    def apply(self, fn):
        """fn(m) for every submodule (children first), then fn(self); returns self."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    def _apply(self, fn):
        """Replace every parameter's and buffer's data by fn(data), keeping the Parameter
        objects (so optimizers built before `to()` keep working)."""
        for m in self.children():
            m._apply(fn)
        for key, p in self._parameters.items():
            if p is None:
                continue
            with no_grad():
                new = fn(p)
            if new is not p:
                p.data = new
            if p.grad is not None:
                with no_grad():
                    g = fn(p.grad)
                if g is not p.grad:
                    p.grad = g
        for key, b in self._buffers.items():
            if b is not None:
                self._buffers[key] = fn(b)
        return self

    def to(self, *args, **kwargs):
        """Move / cast parameters and buffers: to(device), to(dtype), to(tensor),
        to(device, dtype). Only floating tensors change dtype, as in PyTorch."""
        device, dtype, _ = parse_to(args, kwargs)
        if dtype is not None and dtype.kind not in "fc":
            raise TypeError("nn.Module.to only accepts floating point or complex dtypes, but "
                            f"got desired dtype={dtype}")

        def convert(t):
            if dtype is not None and t.is_floating_point():
                return t.to(device=device, dtype=dtype) if device is not None else t.to(dtype)
            if device is not None:
                return t.to(device)
            return t
        return self._apply(convert)

    def cpu(self):
        return self._apply(lambda t: t.cpu())

    def cuda(self, device=None):
        return self._apply(lambda t: t.cuda() if device is None else t.to(device))

    def type(self, dst_type):
        return self._apply(lambda t: t.to(dst_type))

    def float(self):
        return self.to(D.float32)

    def double(self):
        return self.to(D.float64)

    def half(self):
        return self.to(D.float16)

    # -- state dicts -------------------------------------------------------------------

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else b.detach()

    def state_dict(self, *args, destination=None, prefix: str = "", keep_vars: bool = False):
        """OrderedDict of dotted name -> tensor for every parameter and persistent buffer.

        Values are detached tensors sharing storage with the module's (keep_vars=True gives
        the Parameters themselves)."""
        if args:
            destination = args[0] if len(args) > 0 else destination
            prefix = args[1] if len(args) > 1 else prefix
            keep_vars = args[2] if len(args) > 2 else keep_vars
        if destination is None:
            destination = OrderedDict()
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, m in self._modules.items():
            if m is not None:
                m.state_dict(destination=destination, prefix=prefix + name + ".",
                             keep_vars=keep_vars)
        for hook in self._state_dict_hooks.values():
            r = hook(self, destination, prefix, {})
            if r is not None:
                destination = r
        return destination

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs, assign=False):
        for hook in self._load_state_dict_pre_hooks.values():
            hook(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                 error_msgs)
        persistent = {k: v for k, v in self._buffers.items()
                      if k not in self._non_persistent_buffers_set}
        local = {**{k: v for k, v in self._parameters.items()}, **persistent}
        local = {k: v for k, v in local.items() if v is not None}
        for name, param in local.items():
            key = prefix + name
            if key not in state_dict:
                if strict:
                    missing_keys.append(key)
                continue
            value = state_dict[key]
            if not isinstance(value, Tensor):
                error_msgs.append(f'While copying the parameter named "{key}", expected '
                                  f"torch.Tensor or Tensor-like object from checkpoint but "
                                  f"received {type(value)}")
                continue
            if tuple(value.shape) != tuple(param.shape):
                error_msgs.append(f"size mismatch for {key}: copying a param with shape "
                                  f"{_size_repr(value.shape)} from checkpoint, the shape in "
                                  f"current model is {_size_repr(param.shape)}.")
                continue
            try:
                if assign:
                    if name in self._parameters:
                        new = value if isinstance(value, Parameter) else Parameter(
                            value, requires_grad=param.requires_grad)
                        self._parameters[name] = new
                    else:
                        self._buffers[name] = value
                else:
                    with no_grad():
                        param.copy_(value)
            except Exception as e:
                error_msgs.append(f'While copying the parameter named "{key}", whose '
                                  f"dimensions in the model are {_size_repr(param.shape)} and "
                                  f"whose dimensions in the checkpoint are "
                                  f"{_size_repr(value.shape)}, an exception occurred : "
                                  f"{e.args}.")
        if strict:
            for key in state_dict:
                if key.startswith(prefix):
                    rest = key[len(prefix):]
                    head = rest.split(".", 1)[0]
                    if head not in self._modules and rest not in local:
                        unexpected_keys.append(key)

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """Copy tensors from `state_dict` into the parameters and buffers (in place).

        With strict=True, missing or unexpected keys raise RuntimeError listing them, as
        PyTorch's; returns (missing_keys, unexpected_keys)."""
        if not isinstance(state_dict, dict):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        missing, unexpected, errors = [], [], []
        state_dict = OrderedDict(state_dict)

        def load(module, prefix=""):
            module._load_from_state_dict(state_dict, prefix, {}, True, missing, unexpected,
                                         errors, assign)
            for name, child in module._modules.items():
                if child is not None:
                    load(child, prefix + name + ".")
        load(self)
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in unexpected)))
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in missing)))
        if errors:
            raise RuntimeError("Error(s) in loading state_dict for {}:\n\t{}".format(
                type(self).__name__, "\n\t".join(errors)))
        return _IncompatibleKeys(missing, unexpected)

    # -- hooks -------------------------------------------------------------------------

    def register_forward_pre_hook(self, hook, *, prepend: bool = False,
                                  with_kwargs: bool = False):
        """hook(module, args) -> None or new args (a tuple, or one value that gets wrapped);
        with_kwargs=True: hook(module, args, kwargs) -> None or (new args, new kwargs)."""
        h = RemovableHandle(self._forward_pre_hooks)
        _insert(self._forward_pre_hooks, h.id, hook, prepend)
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs.add(h.id)
        return h

    def register_forward_hook(self, hook, *, prepend: bool = False, with_kwargs: bool = False,
                              always_call: bool = False):
        """hook(module, args, output) -> None or a new output; with_kwargs=True:
        hook(module, args, kwargs, output). always_call: also run if forward raised."""
        h = RemovableHandle(self._forward_hooks)
        _insert(self._forward_hooks, h.id, hook, prepend)
        if with_kwargs:
            self._forward_hooks_with_kwargs.add(h.id)
        if always_call:
            self._forward_hooks_always_called.add(h.id)
        return h

    def register_full_backward_hook(self, hook, prepend: bool = False):
        """hook(module, grad_input, grad_output) -> None or a replacement grad_input tuple.

        grad_input has one entry per positional tensor argument of forward (None for an
        input that does not require grad), grad_output one per tensor output; the hook runs
        when the gradients w.r.t. the module's inputs have been computed."""
        h = RemovableHandle(self._backward_hooks)
        _insert(self._backward_hooks, h.id, hook, prepend)
        return h

    def register_full_backward_pre_hook(self, hook, prepend: bool = False):
        """hook(module, grad_output) -> None or a replacement grad_output tuple; runs when the
        gradients w.r.t. the module's outputs have been computed."""
        h = RemovableHandle(self._backward_pre_hooks)
        _insert(self._backward_pre_hooks, h.id, hook, prepend)
        return h

    def register_backward_hook(self, hook):
        raise NotImplementedError(
            "Module.register_backward_hook (the non-full variant, deprecated in PyTorch) is not "
            "supported by functrans; use register_full_backward_hook")

    def register_state_dict_pre_hook(self, hook):
        raise NotImplementedError("register_state_dict_pre_hook is not supported by functrans")

    def _register_state_dict_hook(self, hook):
        h = RemovableHandle(self._state_dict_hooks)
        self._state_dict_hooks[h.id] = hook
        return h

    def _register_load_state_dict_pre_hook(self, hook, with_module=False):
        h = RemovableHandle(self._load_state_dict_pre_hooks)
        self._load_state_dict_pre_hooks[h.id] = (
            functools.partial(hook, self) if with_module else hook)
        return h

    # -- calling -----------------------------------------------------------------------

    def __call__(self, *args, **kwargs):
        if not (self._forward_pre_hooks or self._forward_hooks or self._backward_hooks
                or self._backward_pre_hooks or _global_forward_pre_hooks
                or _global_forward_hooks or _global_backward_hooks):
            return self.forward(*args, **kwargs)
        return self._call_with_hooks(args, kwargs)

    def _call_with_hooks(self, args, kwargs):
        """torch's call sequence: forward pre-hooks, backward-hook setup on the inputs,
        forward, forward hooks, backward-hook setup on the outputs. How hooks are attached
        is asked of the tracing seam: eagerly they run now; inside ft.compile they become
        run-time callbacks of the program."""
        h = traced_hooks()
        pre = self._hook_list("pre")
        if pre:
            args, kwargs = h.module_hooks(self, "pre", pre, (args, kwargs), fire_forward_hooks)
        bw = None
        if self._backward_hooks or self._backward_pre_hooks or _global_backward_hooks:
            bw = BackwardHook(self)
            args = h.module_backward_hook(bw, "input", args)
        try:
            result = self.forward(*args, **kwargs)
        except Exception:
            always = [x for x in self._hook_list("post")
                      if x[0] in self._forward_hooks_always_called]
            if always:
                h.module_hooks(self, "failed", always, (args, kwargs, None), fire_forward_hooks)
            raise
        post = self._hook_list("post")
        if post:
            result = h.module_hooks(self, "post", post, (args, kwargs, result),
                                    fire_forward_hooks)
        if bw is not None:
            result = h.module_backward_hook(bw, "output", result)
        return result

    def _hook_list(self, kind):
        """(handle id, hook, takes kwargs) of the forward pre-hooks or forward hooks that
        fire on a call, global ones first."""
        if kind == "pre":
            hooks, kw = (itertools.chain(_global_forward_pre_hooks.items(),
                                         self._forward_pre_hooks.items()),
                         self._forward_pre_hooks_with_kwargs)
        else:
            hooks, kw = (itertools.chain(_global_forward_hooks.items(),
                                         self._forward_hooks.items()),
                         self._forward_hooks_with_kwargs)
        return [(hid, hook, hid in kw) for hid, hook in hooks]

    # -- printing ----------------------------------------------------------------------

    def extra_repr(self) -> str:
        return ""

    def _get_name(self):
        return type(self).__name__

    def __repr__(self):
        extra = self.extra_repr()
        lines = extra.split("\n") if extra else []
        for name, m in self._modules.items():
            lines.append(f"({name}): " + _addindent(repr(m), 2))
        main = self._get_name() + "("
        if lines:
            if len(lines) == 1 and not self._modules:
                main += lines[0]
            else:
                main += "\n  " + "\n  ".join(lines) + "\n"
        return main + ")"


def _insert(hooks: HookDict, key, fn, prepend):
    hooks[key] = fn
    if prepend:
        hooks.move_to_end(key, last=False)


def _type_name(v):
    if isinstance(v, Tensor):
        return "torch." + D.type_name(v.dtype)
    t = type(v)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def _size_repr(shape):
    return f"ft.Size({list(shape)})"

