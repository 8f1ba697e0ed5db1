"""gradcheck / gradgradcheck: analytical Jacobians from the engine against central finite
differences, in float64 (torch.autograd.gradcheck's contract)."""
from __future__ import annotations

import warnings

import numpy as np

from ..core import FunctransError
from .api import grad
from .grad_mode import enable_grad
from .tensor import Tensor, wrap


class GradcheckError(FunctransError, RuntimeError):
    """The analytical and numerical Jacobians disagree (or the check could not run)."""


def _as_tuple(x):
    return x if isinstance(x, tuple) else tuple(x) if isinstance(x, list) else (x,)


def _outputs(func, inputs):
    out = _as_tuple(func(*inputs))
    return [o for o in out if isinstance(o, Tensor)]


def _numerical(func, inputs, diff_idx, outputs, eps):
    """J[i][o]: (numel of input i, numel of output o), by central differences."""
    jac = []
    for i in diff_idx:
        x = inputs[i]
        flat = x._data.reshape(-1)
        if not np.shares_memory(flat, x._data):
            raise GradcheckError(f"input {i} is not contiguous; pass contiguous tensors")
        cols = [np.zeros((x.numel(), o.numel()), np.float64) for o in outputs]
        for k in range(flat.size):
            # func runs in the caller's grad mode, as in torch (what it asserts about
            # requires_grad holds in both passes); the input's storage is perturbed directly
            orig = flat[k].copy()
            flat[k] = orig + eps
            plus = [o._data.astype(np.float64).reshape(-1).copy() for o in
                    _outputs(func, inputs)]
            flat[k] = orig - eps
            minus = [o._data.astype(np.float64).reshape(-1).copy() for o in
                     _outputs(func, inputs)]
            flat[k] = orig
            for c, p, m in zip(cols, plus, minus):
                c[k] = (p - m) / (2 * eps)
        jac.append(cols)
    return jac


def _analytical(outputs, inputs, diff_idx):
    diff = [inputs[i] for i in diff_idx]
    jac = [[np.zeros((inputs[i].numel(), o.numel()), np.float64) for o in outputs]
           for i in diff_idx]
    for oi, o in enumerate(outputs):
        if not o.requires_grad:
            continue
        for m in range(o.numel()):
            e = np.zeros(o.numel(), o.dtype)
            e[m] = 1
            gs = grad([o], diff, [wrap(e.reshape(o._data.shape))], retain_graph=True,
                      allow_unused=True)
            for ii, g in enumerate(gs):
                if g is not None:
                    jac[ii][oi][:, m] = g._data.astype(np.float64).reshape(-1)
    return jac


def _fmt(a):
    return repr(wrap(a))


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True,
              nondet_tol=0.0, check_undefined_grad=True, check_grad_dtypes=False,
              check_batched_grad=False, check_batched_forward_grad=False,
              check_forward_ad=False, check_backward_ad=True, fast_mode=False, masked=None):
    """True if the engine's gradients of func at inputs match finite differences; else raise
    GradcheckError naming the input, with both Jacobians (rows: input elements, columns:
    output elements)."""
    inputs = _as_tuple(inputs)
    diff_idx = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]
    if not diff_idx:
        raise ValueError("gradcheck expects at least one input tensor to require gradient, "
                         "but none of them have requires_grad=True.")
    for i in diff_idx:
        if inputs[i].dtype != np.float64:
            warnings.warn(f"Input #{i} requires gradient and is not a double precision floating "
                          "point or complex. This check will likely fail if all the inputs are "
                          "not of double precision floating point or complex.", UserWarning,
                          stacklevel=2)
    try:
        outputs = _outputs(func, inputs)
        num = _numerical(func, inputs, diff_idx, outputs, eps)
        outputs = _outputs(func, inputs)
        for oi, o in enumerate(outputs):
            if not o.requires_grad and o.dtype.kind in "fc":
                if any(np.any(num[ii][oi] != 0) for ii in range(len(diff_idx))):
                    raise GradcheckError(f"Numerical gradient for function expected to be zero: "
                                         f"output {oi} does not require grad but its "
                                         "numerical gradient is nonzero")
        ana = _analytical(outputs, inputs, diff_idx)
        for ii, i in enumerate(diff_idx):
            for oi in range(len(outputs)):
                n, a = num[ii][oi], ana[ii][oi]
                if not np.allclose(a, n, rtol=rtol, atol=atol):
                    raise GradcheckError(
                        f"Jacobian mismatch for output {oi} with respect to input {i},\n"
                        f"numerical:{_fmt(n)}\nanalytical:{_fmt(a)}\n")
    except GradcheckError:
        if raise_exception:
            raise
        return False
    return True


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3,
                  gen_non_contig_grad_outputs=False, raise_exception=True, nondet_tol=0.0,
                  check_undefined_grad=True, check_grad_dtypes=False, check_batched_grad=False,
                  check_fwd_over_rev=False, check_rev_over_rev=True, fast_mode=False,
                  masked=False):
    """gradcheck of the map (inputs, grad_outputs) -> gradients computed with
    create_graph=True: checks second derivatives."""
    inputs = _as_tuple(inputs)
    diff_idx = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]
    outputs = _outputs(func, inputs)
    if grad_outputs is None:
        rng = np.random.default_rng(0)
        grad_outputs = tuple(wrap(rng.standard_normal(o.shape).astype(o.dtype))
                             .requires_grad_(True) for o in outputs if o.requires_grad)
    grad_outputs = _as_tuple(grad_outputs)
    n = len(inputs)


    def new_func(*args):
        ins, gos = args[:n], args[n:]
        with enable_grad():
            outs = [o for o in _outputs(func, ins) if o.requires_grad]
            diff = [ins[i] for i in diff_idx]
            gs = grad(outs, diff, list(gos), create_graph=True, allow_unused=True)
        return tuple(g for g in gs if g is not None)
    return gradcheck(new_func, inputs + grad_outputs, eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception)
