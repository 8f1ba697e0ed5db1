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
    """J[i][o]: (numel of input i, numel of output o), by central differences; a complex
    input has twice the rows: its real parts' then its imaginary parts' (outputs are real
    here: gradcheck checks a complex output's real and imaginary parts apart)."""
    jac = []
    for i in diff_idx:
        x = inputs[i]
        flat = x._data.reshape(-1)
        if not np.shares_memory(flat, x._data):
            raise GradcheckError(f"input {i} is not contiguous; pass contiguous tensors")
        steps = (eps, eps * 1j) if x._data.dtype.kind == "c" else (eps,)
        cols = [np.zeros((len(steps) * x.numel(), o.numel()), np.float64) for o in outputs]
        for r, step in enumerate(steps):
            for k in range(flat.size):
                # func runs in the caller's grad mode, as in torch (what it asserts about
                # requires_grad holds in both passes); the input's storage is perturbed
                orig = flat[k].copy()
                flat[k] = orig + step
                plus = [(o.shape, o.dtype, o._data.astype(np.float64).reshape(-1).copy())
                        for o in _outputs(func, inputs)]
                flat[k] = orig - step
                minus = [(o.shape, o.dtype, o._data.astype(np.float64).reshape(-1).copy())
                         for o in _outputs(func, inputs)]
                flat[k] = orig
                for c, p, m in zip(cols, plus, minus):
                    _same_shape_and_dtype(p, m, eps, k)
                    c[r * flat.size + k] = (p[2] - m[2]) / (2 * eps)
        jac.append(cols)
    return jac


def _same_shape_and_dtype(a, b, eps, k):
    """func's outputs keep their shape and dtype when an input moves by eps (torch's
    AssertionError otherwise: finite differences mean nothing across them)."""
    if a[0] != b[0]:
        raise AssertionError(f"Expected `func` to return outputs with the same shape when "
                             f"inputs are perturbed on index {k} by {eps}, but got: shapes "
                             f"{a[0]} and {b[0]}.")
    if a[1] != b[1]:
        raise AssertionError(f"Expected `func` to return outputs with the same dtype when "
                             f"inputs are perturbed on index {k} by {eps}, but got: dtypes "
                             f"{a[1]!r} and {b[1]!r}.")


def _analytical(outputs, inputs, diff_idx):
    """The engine's Jacobians laid out as _numerical's: torch's gradient of a complex input
    is dL/d(re) + i dL/d(im), so its real parts fill the first rows, its imaginary parts
    the next."""
    diff = [inputs[i] for i in diff_idx]
    rows = [(2 if inputs[i]._data.dtype.kind == "c" else 1) * inputs[i].numel()
            for i in diff_idx]
    jac = [[np.zeros((n, o.numel()), np.float64) for o in outputs] for n in rows]
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
                    g = g._data.reshape(-1)
                    jac[ii][oi][:, m] = np.concatenate([g.real, g.imag]) \
                        if np.iscomplexobj(g) else g.astype(np.float64)
    return jac


NOT_REENTRANT = ("Backward is not reentrant, i.e., running backward with same input and "
                 "grad_output multiple times gives different values, although analytical "
                 "gradient matches numerical gradient.The tolerance for nondeterminism was {}."
                 " Pass nondet_tol=<tol> to gradcheck/gradgradcheck if the backward is "
                 "nondeterministic on purpose.")


def _reentrant(jac1, jac2, nondet_tol, ulp=np.finfo(np.float64).eps):
    """Two backward passes on the same input and grad_output agree within nondet_tol, plus
    a few units of rounding (ulp: the inputs' epsilon): functrans may run a backward it
    sees for the first time equation by equation and then as one optimized program, whose
    sums round differently in the last bits; a nondeterministic backward differs by more."""
    return all(np.all(np.abs(a - b) <= nondet_tol + 16 * ulp * np.maximum(np.abs(a),
                                                                           np.abs(b)))
               for r1, r2 in zip(jac1, jac2) for a, b in zip(r1, r2))


class PrivateAPIWarning(FutureWarning, UserWarning):
    """get_numerical_jacobian / get_analytical_jacobian are deprecated: torch 2.x warns with a
    FutureWarning, older torch with a UserWarning; this is both, so either filter sees it."""


def _private_api(name):
    warnings.warn(f"{name} was part of PyTorch's private API and not meant to be exposed. "
                  "It is deprecated in PyTorch (functrans keeps it for programs that call it);"
                  " use gradcheck, or ft.autograd.functional.jacobian.", PrivateAPIWarning,
                  stacklevel=3)


def _grad_out_one(grad_out, name):
    if grad_out != 1.0:
        raise ValueError(f"Expected grad_out to be 1.0. {name} no longer supports values of "
                         "grad_out != 1.0.")


def get_numerical_jacobian(fn, inputs, target=None, eps=1e-3, grad_out=1.0):
    """torch's deprecated helper: the finite-difference Jacobians of fn(inputs) (fn takes
    the inputs as one tuple; its first output) w.r.t. each target (default: the inputs
    that require grad), each (numel of target, numel of output)."""
    _private_api("get_numerical_jacobian")
    _grad_out_one(grad_out, "get_numerical_jacobian")
    inputs = _as_tuple(inputs)
    targets = _as_tuple(target) if target is not None else tuple(
        x for x in inputs if isinstance(x, Tensor) and x.requires_grad)

    def first(*ins):
        return _outputs(fn, (ins,))[0]
    outputs = [first(*inputs)]
    idx = [next(k for k, x in enumerate(inputs) if x is t) for t in targets]
    return tuple(wrap(cols[0]) for cols in _numerical(first, inputs, idx, outputs, eps))


def get_analytical_jacobian(inputs, output, nondet_tol=0.0, grad_out=1.0):
    """torch's deprecated helper: (Jacobians of output w.r.t. the inputs that require grad,
    reentrant, sizes ok, types ok); the backward runs twice to judge reentrancy."""
    _private_api("get_analytical_jacobian")
    _grad_out_one(grad_out, "get_analytical_jacobian")
    if output.is_complex():
        raise ValueError("Expected output to be non-complex. get_analytical_jacobian no longer "
                         "supports functions that return complex outputs.")
    inputs = _as_tuple(inputs)
    idx = [k for k, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]
    j1 = _analytical([output], inputs, idx)
    j2 = _analytical([output], inputs, idx)
    return (tuple(wrap(r[0]) for r in j1), _reentrant(j1, j2, nondet_tol), True, True)


def _fmt(a):
    return repr(wrap(a))


def _part_of_outputs(func, part):
    """func with each complex output replaced by its real or imaginary part."""
    def f(*args):
        return tuple(getattr(o, part) if isinstance(o, Tensor) and o._data.dtype.kind == "c"
                     else o for o in _as_tuple(func(*args)))
    return f


def _check(func, inputs, diff_idx, eps, atol, rtol, nondet_tol, prefix):
    """Compare the engine's Jacobians of func (real outputs) with finite differences."""
    outputs = _outputs(func, inputs)
    num = _numerical(func, inputs, diff_idx, outputs, eps)
    outputs = _outputs(func, inputs)
    for oi, o in enumerate(outputs):
        if not o.requires_grad and o.dtype.kind in "fc":
            if any(np.any(num[ii][oi] != 0) for ii in range(len(diff_idx))):
                raise GradcheckError(f"{prefix}Numerical gradient for function expected to be "
                                     f"zero: output {oi} does not require grad but its "
                                     "numerical gradient is nonzero")
    ana = _analytical(outputs, inputs, diff_idx)
    for ii, i in enumerate(diff_idx):
        for oi in range(len(outputs)):
            n, a = num[ii][oi], ana[ii][oi]
            if not np.allclose(a, n, rtol=rtol, atol=atol):
                raise GradcheckError(
                    f"{prefix}Jacobian mismatch for output {oi} with respect to input {i},\n"
                    f"numerical:{_fmt(n)}\nanalytical:{_fmt(a)}\n")
    ulp = max(np.finfo(inputs[i]._data.dtype).eps for i in diff_idx)
    if not _reentrant(ana, _analytical(outputs, inputs, diff_idx), nondet_tol, ulp):
        raise GradcheckError(NOT_REENTRANT.format(nondet_tol))


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
        if inputs[i].dtype not in (np.float64, np.complex128):
            warnings.warn(f"Input #{i} requires gradient and is not a double precision floating "
                          "point or complex. This check will likely fail if all the inputs are "
                          "not of double precision floating point or complex.", UserWarning,
                          stacklevel=2)
    try:
        if any(o._data.dtype.kind == "c" for o in _outputs(func, inputs)):
            # as torch: the imaginary parts of the complex outputs first, then the real parts
            for part, prefix in (("imag", "While considering the imaginary part of complex "
                                          "outputs only, "), ("real", "")):
                _check(_part_of_outputs(func, part), inputs, diff_idx, eps, atol, rtol,
                       nondet_tol, prefix)
        else:
            _check(func, inputs, diff_idx, eps, atol, rtol, nondet_tol, "")
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
                     raise_exception=raise_exception, nondet_tol=nondet_tol)
