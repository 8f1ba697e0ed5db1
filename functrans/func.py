"""ft.func (torch.func): run modules as pure functions of their parameters, so that the
functional transformations (ft.grad, ft.vmap, ft.hessian, ft.jit, ...) apply to them.

`functional_call(module, params, args)` swaps the given values in for the module's
parameters and buffers for one call. Given arrays or traced values, the module's layers run
as functrans.numpy code (nn.functional's functional path), which every transformation
understands; given Tensors, it is an ordinary facade call (recorded on concrete data,
traced on the traced data a transformation hands in). `grad`, `grad_and_value`, `vjp`,
`jvp`, `jacrev`, `jacfwd`, `hessian` and `vmap` are ft's transformations under torch.func's
names and argument names (Tensors are pytree nodes, so all of them take Tensors).
See docs/facade.md for exactly which facade code composes with the transformations.
"""
from __future__ import annotations

import contextlib

import functools

from . import transforms as _tr
from . import batching as _batching
from .core import keeping_dtypes
from .facade import ops

__all__ = ["functional_call", "stack_module_state", "grad", "grad_and_value", "vjp", "jvp",
           "jacrev", "jacfwd", "hessian", "vmap"]


def _locate(module, name):
    """(owning submodule, attribute name, 'param' | 'buffer') of a dotted name."""
    path, _, attr = name.rpartition(".")
    try:
        owner = module.get_submodule(path)
    except AttributeError as e:
        raise AttributeError(f"functional_call: {name!r} does not name a parameter or buffer "
                             f"of {type(module).__name__} ({e})") from None
    if attr in owner._parameters:
        return owner, attr, "param"
    if attr in owner._buffers:
        return owner, attr, "buffer"
    raise AttributeError(f"functional_call: {name!r} does not name a parameter or buffer of "
                         f"{type(module).__name__}")


@contextlib.contextmanager
def _swapped(module, values, tie_weights, strict):
    """Temporarily replace parameters/buffers by `values` (dotted name -> value)."""
    named = dict(module.named_parameters(remove_duplicate=False))
    named.update(module.named_buffers(remove_duplicate=False))
    values = dict(values)
    if strict:
        missing = [k for k in named if k not in values]
        unexpected = [k for k in values if k not in named]
        if missing or unexpected:
            msg = []
            if unexpected:
                msg.append("Unexpected key(s): " + ", ".join(repr(k) for k in unexpected) + ".")
            if missing:
                msg.append("Missing key(s): " + ", ".join(repr(k) for k in missing) + ".")
            raise RuntimeError(f"Error(s) in reparametrizing for {type(module).__name__}:\n\t"
                               + "\n\t".join(msg))
    if tie_weights:
        by_id = {}
        for k, v in named.items():
            by_id.setdefault(id(v), []).append(k)
        for k in list(values):
            if k not in named:
                continue
            for alias in by_id[id(named[k])]:
                if alias == k:
                    continue
                if alias in values and values[alias] is not values[k]:
                    raise ValueError(f"functional_call got multiple values for keys {k!r} and "
                                     f"{alias!r}, which are tied. Consider using "
                                     "tie_weights=False")
                values[alias] = values[k]
    saved = []
    try:
        for k, v in values.items():
            owner, attr, kind = _locate(module, k)
            table = owner._parameters if kind == "param" else owner._buffers
            saved.append((table, attr, table[attr]))
            table[attr] = v
        yield
    finally:
        for table, attr, old in reversed(saved):
            table[attr] = old


def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *,
                    tie_weights=True, strict=False):
    """module(*args, **kwargs) with its parameters and buffers replaced by the given values
    (a dict, or a tuple of dicts, from dotted names to Tensors, arrays or traced values);
    names not given keep the module's own tensors. The module is restored afterwards."""
    if isinstance(parameter_and_buffer_dicts, dict):
        values = parameter_and_buffer_dicts
    elif isinstance(parameter_and_buffer_dicts, (tuple, list)):
        values = {}
        for d in parameter_and_buffer_dicts:
            dup = set(values) & set(d)
            if dup:
                raise ValueError(f"{sorted(dup)} appeared in multiple dictionaries; behavior of "
                                 "functional call is ambiguous")
            values.update(d)
    else:
        raise ValueError("Expected parameter_and_buffer_dicts to be a dict, or a list/tuple of "
                         f"dicts, but got {type(parameter_and_buffer_dicts)}")
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)
    kwargs = {} if kwargs is None else kwargs
    with _swapped(module, values, tie_weights, strict):
        return module(*args, **kwargs)


def stack_module_state(models):
    """(params, buffers): each a dict of name -> Tensor stacked over the models (leading
    axis), for ensembling with vmap over functional_call."""
    models = list(models)
    if not models:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    if not (all(m.training for m in models) or not any(m.training for m in models)):
        raise RuntimeError("stack_module_state: Expected all models to have the same training/"
                           "eval mode.")

    def stack(named):
        names = [n for n, _ in named(models[0])]
        out = {}
        for n in names:
            out[n] = ops.stack([dict(named(m))[n].detach() for m in models])
        return out
    params = stack(lambda m: m.named_parameters())
    for v in params.values():
        v.requires_grad_(True)
    return params, stack(lambda m: m.named_buffers())


# ---------------------------------------------------------------------------
# torch.func's names for the transformations: Tensors are pytree nodes, so ft.grad & co
# take and return them; these only translate torch's argument names and conventions


def _only(name, arg, value, supported):
    if value != supported:
        raise NotImplementedError(f"ft.func.{name}: {arg}={value!r} is not supported (only "
                                  f"{supported!r})")


def _keeping(fn):
    """fn run with the arguments' dtypes kept: torch.func keeps float64 where JAX's entry
    points would narrow it to float32 (x32 canonicalization is JAX-side only)."""
    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        with keeping_dtypes():
            return fn(*args, **kwargs)
    return wrapped


def grad(func, argnums=0, has_aux=False):
    """torch.func.grad: ft.grad."""
    return _keeping(_tr.grad(func, argnums=argnums, has_aux=has_aux))


def grad_and_value(func, argnums=0, has_aux=False):
    """torch.func.grad_and_value: (gradient, value) -- torch's order; ft.value_and_grad."""
    vg = _keeping(_tr.value_and_grad(func, argnums=argnums, has_aux=has_aux))

    def wrapped(*args, **kwargs):
        value, g = vg(*args, **kwargs)
        return g, value
    return wrapped


def vjp(func, *primals, has_aux=False):
    """torch.func.vjp: (output, vjp_fn[, aux]); vjp_fn(cotangents) -> tuple (ft.vjp)."""
    with keeping_dtypes():
        res = _tr.vjp(func, *primals, has_aux=has_aux)

    @_keeping
    def vjp_fn(*cts):
        return res[1](cts[0] if len(cts) == 1 else cts)
    return (res[0], vjp_fn) + tuple(res[2:])


def jvp(func, primals, tangents, *, strict=False, has_aux=False):
    """torch.func.jvp: (output, jvp_out[, aux]) (ft.jvp)."""
    _only("jvp", "strict", strict, False)
    with keeping_dtypes():
        return _tr.jvp(func, tuple(primals), tuple(tangents), has_aux=has_aux)


def jacrev(func, argnums=0, *, has_aux=False, chunk_size=None, _preallocate_and_copy=False):
    """torch.func.jacrev: ft.jacrev."""
    _only("jacrev", "chunk_size", chunk_size, None)
    return _keeping(_tr.jacrev(func, argnums=argnums, has_aux=has_aux))


def jacfwd(func, argnums=0, has_aux=False, *, randomness="error"):
    """torch.func.jacfwd: ft.jacfwd."""
    _only("jacfwd", "randomness", randomness, "error")
    return _keeping(_tr.jacfwd(func, argnums=argnums, has_aux=has_aux))


def hessian(func, argnums=0):
    """torch.func.hessian: ft.hessian."""
    return _keeping(_tr.hessian(func, argnums=argnums))


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """torch.func.vmap: ft.vmap with torch's names (in_dims, out_dims). randomness='error'
    (the only mode): dropout in training mode raises under vmap."""
    _only("vmap", "randomness", randomness, "error")
    _only("vmap", "chunk_size", chunk_size, None)
    return _keeping(_batching.vmap(func, in_axes=in_dims, out_axes=out_dims))
