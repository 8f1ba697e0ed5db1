"""Optimizer base class: parameter groups, per-parameter state, zero_grad, state_dict (torch.optim).

Updates run under no_grad as in-place tensor ops, so parameters keep their identity
(and their version counters move, as PyTorch's do).
"""
from __future__ import annotations

import collections
import copy
import math

from ..facade import grad_mode
from ..facade.tensor import Tensor


class _State(collections.defaultdict):
    """`Optimizer.state`: PyTorch's `defaultdict(dict)` keyed by parameter, so a custom
    optimizer's `self.state[p]` starts empty. Removing a parameter it does not hold raises a
    KeyError that names the parameter by shape and dtype (a Tensor key's repr would print
    its values)."""

    def __init__(self, default_factory=dict, *args, **kwargs):
        super().__init__(default_factory, *args, **kwargs)

    def __repr__(self):
        return "defaultdict(" + super().__repr__().partition("(")[2]

    def _missing_key(self, key):
        if isinstance(key, Tensor):
            return KeyError(f"optimizer state has no entry for the {type(key).__name__} of "
                            f"shape {tuple(key.shape)} and dtype {key.dtype}")
        return KeyError(key)

    def __delitem__(self, key):
        if key not in self:
            raise self._missing_key(key)
        super().__delitem__(key)

    def pop(self, key, *default):
        if key not in self and not default:
            raise self._missing_key(key)
        return super().pop(key, *default)


class _RequiredParameter:
    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()


class Optimizer:
    """Holds `param_groups` (a list of dicts: 'params' plus hyperparameters) and `state`
    (a `defaultdict(dict)` keyed by parameter). Subclasses implement `step`."""

    def __init__(self, params, defaults):
        self.defaults = dict(defaults)
        self.state = _State()
        self.param_groups = []
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of "
                            "Tensors or dicts, but got " + type(params).__name__)
        groups = list(params)
        if len(groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for g in groups:
            self.add_param_group(g)

    def __repr__(self):
        lines = [f"{type(self).__name__} ("]
        for i, g in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for k in sorted(g):
                if k != "params":
                    lines.append(f"    {k}: {g[k]}")
        lines.append(")")
        return "\n".join(lines)

    def add_param_group(self, param_group):
        """Add a group of parameters (a dict with 'params' and optional hyperparameters)."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        group = dict(param_group)
        params = group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, "
                            "but the ordering of tensors in sets will change between runs. "
                            "Please use a list instead.")
        params = list(params)
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError("optimizer can only optimize Tensors, but one of the params is "
                                + type(p).__name__)
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        group["params"] = params
        for name, default in self.defaults.items():
            if default is required and name not in group:
                raise ValueError(f"parameter group didn't specify a value of required "
                                 f"optimization parameter {name}")
            group.setdefault(name, default)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if len({id(p) for p in params}) != len(params):
            raise ValueError("optimizer contains a parameter group with duplicate parameters")
        if any(id(p) in seen for p in params):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(group)

    def zero_grad(self, set_to_none: bool = True):
        """Reset the gradients of every parameter: to None (default) or to zeros in place."""
        for group in self.param_groups:
            for p in group["params"]:
                _zero_grad(p, set_to_none)

    def step(self, closure=None):
        raise NotImplementedError

    def _eval_closure(self, closure):
        if closure is None:
            return None
        with grad_mode.enable_grad():
            return closure()

    # -- state dicts -------------------------------------------------------------------

    def state_dict(self):
        """{'state': {index: {name: value}}, 'param_groups': [{..., 'params': [indices]}]}.

        Parameters are replaced by their index in the order of the groups, as in PyTorch;
        the state values are references (ft.save copies them out)."""
        index, groups, start = {}, [], 0
        for g in self.param_groups:
            ids = list(range(start, start + len(g["params"])))
            for i, p in zip(ids, g["params"]):
                index.setdefault(id(p), i)
            start += len(ids)
            packed = {k: v for k, v in g.items() if k != "params"}
            packed["params"] = ids
            groups.append(packed)
        state = {index[id(p)]: dict(s) for p, s in self.state.items() if id(p) in index}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        """Restore hyperparameters and state; tensors are copied and cast to each parameter's
        dtype (except 'step') and device."""
        saved_groups = state_dict["param_groups"]
        if len(saved_groups) != len(self.param_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        for g, sg in zip(self.param_groups, saved_groups):
            if len(g["params"]) != len(sg["params"]):
                raise ValueError("loaded state dict contains a parameter group that doesn't "
                                 "match the size of optimizer's group")
        id_map = {}
        for g, sg in zip(self.param_groups, saved_groups):
            for i, p in zip(sg["params"], g["params"]):
                id_map[i] = p

        def cast(p, key, v):
            if isinstance(v, Tensor):
                with grad_mode.no_grad():
                    if key != "step" and p.is_floating_point() and v.is_floating_point():
                        return v.detach().to(dtype=p.dtype, device=p.device).clone()
                    return v.detach().to(device=p.device).clone()
            if isinstance(v, dict):
                return {k: cast(p, k, x) for k, x in v.items()}
            if isinstance(v, (list, tuple)):        # LBFGS's histories
                return type(v)(cast(p, key, x) for x in v)
            return copy.deepcopy(v)

        self.state = _State()
        for k, v in state_dict["state"].items():
            k = int(k)
            if k in id_map:
                p = id_map[k]
                self.state[p] = cast(p, None, v) if not isinstance(v, dict) else \
                    {name: cast(p, name, x) for name, x in v.items()}
        new_groups = []
        for g, sg in zip(self.param_groups, saved_groups):
            ng = {k: copy.deepcopy(v) for k, v in sg.items() if k != "params"}
            ng["params"] = g["params"]
            new_groups.append(ng)
        self.param_groups = new_groups


def _zero_grad(p, set_to_none):
    g = p.grad
    if g is None:
        return
    if set_to_none:
        p.grad = None
        return
    if g.grad_fn is not None:
        g.detach_()
    else:
        g.requires_grad_(False)
    g.zero_()


def _check_lr(lr):
    if not (isinstance(lr, (int, float)) and lr >= 0.0) or math.isnan(lr):
        raise ValueError(f"Invalid learning rate: {lr}")
