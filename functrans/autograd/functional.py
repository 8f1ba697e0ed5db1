"""ft.autograd.functional: torch.autograd.functional's jacobian, hessian, vjp, jvp, hvp and
vhp, in torch's structures (a Tensor for Tensor inputs and outputs, tuples where the inputs
or outputs were tuples).

By default they run the transformations (ft.jacrev, ft.vjp, ft.jvp) on detached inputs:
results without history. With create_graph=True they run on the autograd tape, as torch
does (ft.autograd.grad with create_graph=True, one row per output element), so the results
are differentiable with respect to inputs that require grad.
"""
from __future__ import annotations

import functools

from ..core import keeping_dtypes

from ..facade.api import grad as _tape_grad_raw
from ..facade.creation import zeros_like
from ..facade.grad_mode import enable_grad
from ..facade.ops import stack
from ..facade.tensor import Tensor
from ..transforms import grad as _grad
from ..transforms import jacfwd, jacrev
from ..transforms import jvp as _jvp
from ..transforms import vjp as _vjp

__all__ = ["jacobian", "hessian", "vjp", "jvp", "hvp", "vhp"]


def _torch_dtypes(fn):
    """fn runs with torch's dtypes: its JAX-side transformations (jacrev, jvp, ...) keep a
    float64 Tensor float64, as torch.autograd.functional does (no x32 narrowing)."""
    @functools.wraps(fn)
    def run(*args, **kwargs):
        with keeping_dtypes():
            return fn(*args, **kwargs)
    return run


def _as_tuple(x, arg_name, fn_name):
    """(tuple of Tensors, whether x was a tuple), with torch's error for anything else."""
    is_tuple = isinstance(x, tuple)
    xs = x if is_tuple else (x,)
    for i, el in enumerate(xs):
        if not isinstance(el, Tensor):
            if is_tuple:
                raise TypeError(f"The {arg_name} given to {fn_name} must be either a Tensor or a "
                                f"tuple of Tensors but the value at index {i} has type "
                                f"{type(el)}.")
            raise TypeError(f"The {arg_name} given to {fn_name} must be either a Tensor or a "
                            f"tuple of Tensors but the given {arg_name} has type {type(el)}.")
    return xs, is_tuple


def _check_options(fn_name, strict):
    if strict:
        raise NotImplementedError(
            f"torch.autograd.functional.{fn_name}(strict=True) is not supported: functrans does "
            "not detect outputs independent of an input (their derivatives come back as zeros, "
            "as with strict=False)")


def _detached(xs):
    return tuple(x.detach() for x in xs)


def _outputs(out, fn_name):
    return _as_tuple(out, "outputs of the user-provided function", fn_name)


def _single_element(out, fn_name):
    if not isinstance(out, Tensor):
        raise TypeError(f"The function given to {fn_name} should return a single Tensor, but "
                        f"it returned {type(out)}")
    if out.numel() != 1:
        raise RuntimeError(f"The Tensor returned by the function given to {fn_name} should "
                           f"contain a single element")
    return out


def _fill_v(v, like, what, fn_name):
    """v as a tuple matching `like` (the outputs, or the inputs: `what`); None only where
    `like` is one single-element Tensor."""
    if v is None:
        if len(like) != 1 or like[0].numel() != 1:
            subject = ("user-provided function returns" if what == "output"
                       else "input to the user-provided function is")
            raise RuntimeError(f"The vector v can only be None if the {subject} a single Tensor "
                               "with a single element.")
        return (like[0].new_ones(like[0].shape),)
    vs, _ = _as_tuple(v, "v", fn_name)
    if len(vs) != len(like):
        raise RuntimeError(f"v has invalid size: should be {len(like)} but got {len(vs)}.")
    for i, (a, b) in enumerate(zip(vs, like)):
        if tuple(a.shape) != tuple(b.shape):
            raise RuntimeError(f"Mismatch in shape: v[{i}] has a shape of {tuple(a.shape)} and "
                               f"{what}[{i}] has a shape of {tuple(b.shape)}.")
    return tuple(a.detach() for a in vs)


def _unpack(x, is_tuple):
    return x if is_tuple else x[0]


# -- the tape route (create_graph=True) -----------------------------------------------

def _tape_inputs(xs):
    """As torch: an input that requires grad stays connected to its graph (through a view);
    the others become fresh leaves that require grad."""
    return tuple(x.view_as(x) if x.requires_grad else x.detach().requires_grad_(True)
                 for x in xs)


def _tape_vjp(outs, ins, vs):
    """vs^T d(outs)/d(ins) on the tape, keeping the graph; zeros for an unused input."""
    live = [(o, v) for o, v in zip(outs, vs) if o.requires_grad]
    if not live:
        return tuple(zeros_like(x) for x in ins)
    gs = _tape_grad_raw([o for o, _ in live], ins, [v for _, v in live], retain_graph=True,
                        create_graph=True, allow_unused=True)
    return tuple(zeros_like(x) if g is None else g for g, x in zip(gs, ins))


def _tape_jacobian(outs, ins):
    """One row per output element (torch's loop): blocks[o][i] of shape out.shape + in.shape."""
    blocks = []
    for o in outs:
        flat = o.reshape(-1)
        rows = [_tape_vjp((flat[j],), ins, (flat.new_ones(()),)) for j in range(flat.numel())]
        blocks.append(tuple(stack([r[i] for r in rows], 0).reshape(tuple(o.shape) + tuple(x.shape))
                            if rows else zeros_like(x).reshape(tuple(o.shape) + tuple(x.shape))
                            for i, x in enumerate(ins)))
    return blocks


# -- the public functions -----------------------------------------------------------------

@_torch_dtypes
def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T J): the vector-Jacobian product at `inputs`."""
    _check_options("vjp", strict)
    xs, in_tuple = _as_tuple(inputs, "inputs", "vjp")
    if create_graph:
        with enable_grad():
            ins = _tape_inputs(xs)
            out = func(*ins)
            outs, _ = _outputs(out, "vjp")
            return out, _unpack(_tape_vjp(outs, ins, _fill_v(v, outs, "output", "vjp")),
                                in_tuple)
    out, pullback = _vjp(func, *_detached(xs))
    outs, out_tuple = _outputs(out, "vjp")
    vs = _fill_v(v, outs, "output", "vjp")
    cts = pullback(vs if out_tuple else vs[0])
    return out, _unpack(tuple(cts), in_tuple)


@_torch_dtypes
def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), J v): the Jacobian-vector product at `inputs`."""
    _check_options("jvp", strict)
    xs, in_tuple = _as_tuple(inputs, "inputs", "jvp")
    vs = _fill_v(v, xs, "input", "jvp")
    if create_graph:
        with enable_grad():
            ins = _tape_inputs(xs)
            out = func(*ins)
            outs, out_tuple = _outputs(out, "jvp")
            jv = tuple(sum((b.reshape(o.numel(), -1) @ t.reshape(-1)).reshape(o.shape)
                           for b, t in zip(blocks, vs))
                       for o, blocks in zip(outs, _tape_jacobian(outs, ins)))
        return out, _unpack(jv, out_tuple)
    out, tangent = _jvp(lambda *a: func(*a), _detached(xs), vs)
    _outputs(out, "jvp")
    return out, tangent


@_torch_dtypes
def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False,
             strategy="reverse-mode"):
    """The Jacobian of `func` at `inputs`: for Tensor input and output, a Tensor of shape
    output.shape + input.shape; a tuple over inputs and/or outputs where those are tuples
    (outputs outer). `vectorize` is accepted (the transformations always batch the rows)."""
    if strategy not in ("forward-mode", "reverse-mode"):
        raise ValueError('Expected strategy to be either "forward-mode" or "reverse-mode". Hint: '
                         'If your function has more outputs than inputs, "forward-mode" tends to '
                         'be more performant. Otherwise, prefer to use "reverse-mode".')
    _check_options("jacobian", strict)
    xs, in_tuple = _as_tuple(inputs, "inputs", "jacobian")
    if create_graph:
        with enable_grad():
            ins = _tape_inputs(xs)
            outs, out_tuple = _outputs(func(*ins), "jacobian")
            jac = _tape_jacobian(outs, ins)
    else:
        transform = jacfwd if strategy == "forward-mode" else jacrev
        _, out_tuple = _outputs(func(*_detached(xs)), "jacobian")
        jac = transform(func, argnums=tuple(range(len(xs))))(*_detached(xs))
        if not out_tuple:
            jac = (jac,)
    rows = tuple(_unpack(tuple(row), in_tuple) for row in jac)
    return rows if out_tuple else rows[0]


@_torch_dtypes
def hessian(func, inputs, create_graph=False, strict=False, vectorize=False,
            outer_jacobian_strategy="reverse-mode"):
    """The Hessian of a scalar `func` at `inputs`: a Tensor of shape input.shape * 2, or, for
    a tuple of inputs, a tuple of tuples (block [i][j] = d2f / dx_i dx_j)."""
    _check_options("hessian", strict)
    xs, in_tuple = _as_tuple(inputs, "inputs", "hessian")

    def scalar(*a):
        return _single_element(func(*a), "hessian").sum()

    if create_graph:
        return jacobian(lambda *a: jacobian(scalar, a if in_tuple else a[0], create_graph=True),
                        inputs, create_graph=True)
    gradient = _grad(scalar, argnums=tuple(range(len(xs))))
    outer = jacfwd if outer_jacobian_strategy == "forward-mode" else jacrev
    h = outer(gradient, argnums=tuple(range(len(xs))))(*_detached(xs))
    if not in_tuple:
        return h[0][0]
    return tuple(tuple(row) for row in h)


def _second_order(name, func, inputs, v, create_graph, strict):
    """hvp and vhp: (func(inputs), v^T H), on the tape when create_graph (H is symmetric, so
    v^T H = H v), else by the transformations over the gradient function."""
    _check_options(name, strict)
    xs, in_tuple = _as_tuple(inputs, "inputs", name)
    vs = _fill_v(v, xs, "input", name)
    if create_graph:
        with enable_grad():
            ins = _tape_inputs(xs)
            out = _single_element(func(*ins), name)
            grads = _tape_vjp((out.sum(),), ins, (out.new_ones(()),))
            return out, _unpack(_tape_vjp(grads, ins, vs), in_tuple)
    out = _single_element(func(*_detached(xs)), name)
    gradient = _grad(lambda *a: func(*a).sum(), argnums=tuple(range(len(xs))))
    if name == "hvp":                                   # forward over reverse
        _, hv = _jvp(gradient, _detached(xs), vs)
    else:                                               # reverse over reverse
        _, pullback = _vjp(gradient, *_detached(xs))
        hv = pullback(vs)
    return out.detach(), _unpack(tuple(hv), in_tuple)


@_torch_dtypes
def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), H v) for a scalar `func` (forward over reverse)."""
    return _second_order("hvp", func, inputs, v, create_graph, strict)


@_torch_dtypes
def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T H) for a scalar `func` (reverse over reverse)."""
    return _second_order("vhp", func, inputs, v, create_graph, strict)
