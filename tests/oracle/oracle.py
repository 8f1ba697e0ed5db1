"""The oracle harness: the same code run under PyTorch and the facade, or under JAX and the
functional side, from the same NumPy inputs and weights, and the results compared.

A case is a function of a library namespace. For the facade, `fn(lib, *tensors)` runs once
with `lib` = `torch` and once with `lib` = `functrans`; the NumPy inputs become tensors of
each library (floating ones requiring grad). `facade(fn, *inputs)` compares what comes
back, structure by structure: tensors by value (NaN equal to NaN, infinities by sign),
dtype, shape and `grad_fn` name; strings, numbers, None and booleans by equality (floats
approximately); lists, tuples and dicts element by element; an exception by its type and,
where the case gives `error=`, a pattern both messages must match. After the values, each
side runs `backward` on `sum(out * cotangent)` (the same random cotangent) and the inputs'
`.grad` are compared, None-ness included. `train(...)` trains one model per library from
the same weights and compares losses, every parameter's `.grad` and the parameters after
each step.

For the functional side, `functional(fn, *inputs)` calls `fn(np_module, lax_module,
*inputs)` with `(jax.numpy, jax.lax)` and `(functrans.numpy, functrans.lax)`, eagerly and
under each transformation asked for (`grad`, `vmap`, `jit`), and compares values and dtypes.
`x64(flag)` switches both libraries' `jax_enable_x64` for a block.

Differences that stay are rows of the tables in docs/oracle.md, keyed by case id:
`case(case_id, thunk)` runs a case and, for a listed id, expects it to differ (it fails,
asking to remove the row, once it agrees). test_oracle_deviations.py keeps the rows and
the cases in step.
"""
from __future__ import annotations

import contextlib
import math
import pathlib
import re

import numpy as np
import pytest

import functrans as ft
import functrans.numpy as fnp

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "oracle.md"
INSTALL = "pip install -e '.[test,oracle]'"


def need(name):
    """The oracle module `name` (torch, jax), or the test skipped saying how to get it."""
    return pytest.importorskip(name, reason=f"oracle tests need {name}: {INSTALL}")


torch = need("torch")
jax = need("jax")
# The cases are small: torch's intra-op thread pool only spins against the other workers
# of a shared machine (a training case's time drops about fourfold on two busy cores).
torch.set_num_threads(1)
import jax.numpy as jnp  # noqa: E402  (after the skip: jax is an optional extra)

# Tolerances per dtype: differences of algorithm (summation order, a polynomial against a
# library call) but not of formula. float64 cases are the precise ones.
TOL = {"float64": (1e-9, 1e-12), "float32": (2e-5, 1e-6), "float16": (2e-3, 1e-3),
       "complex128": (1e-9, 1e-12), "complex64": (2e-5, 1e-6)}


class Mismatch(AssertionError):
    """The two libraries disagree; the message says where and how."""


class EngineBug(AssertionError):
    """functrans raised an InternalEngineError through public API. That is never a
    result to compare nor a known difference (issue 29): every case fails with it, listed
    in docs/oracle.md or not."""


def engine_bug(e):
    """True when e is (a subclass of) functrans' InternalEngineError, matched by name so
    that the check survives the class moving between modules."""
    return any(c.__name__ == "InternalEngineError" for c in type(e).__mro__)


def refuse_engine_bug(e):
    """Raise EngineBug from e when e is an InternalEngineError; otherwise return."""
    if engine_bug(e):
        raise EngineBug(f"InternalEngineError reached public API: {e}") from e


# ---------------------------------------------------------------------------------------
# deviations: the tables of docs/oracle.md
ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|(.*)\|\s*$")
SECTIONS = ("Intentional deviations", "Known differences (open issues)")


def deviations():
    """{case id: (section, what differs)} from the tables under docs/oracle.md's two
    SECTIONS."""
    rows, section = {}, None
    for line in DOC.read_text().splitlines():
        if line.startswith("## "):
            section = line[3:].strip()
        m = ROW.match(line)
        if m and section in SECTIONS:
            if m.group(1) in rows:
                raise AssertionError(f"docs/oracle.md lists `{m.group(1)}` twice")
            rows[m.group(1)] = (section, m.group(2).strip())
    return rows


_DEVIATIONS = None
CASES: set = set()       # every case id run through case() or registered by a table


def register(*ids):
    """Declare case ids (at import time of a table module) so the doc check can see them."""
    CASES.update(ids)
    return ids


def case(case_id, thunk):
    """Run one case; a case listed in docs/oracle.md must still differ (xfail), others
    must agree."""
    global _DEVIATIONS
    if _DEVIATIONS is None:
        _DEVIATIONS = deviations()
    CASES.add(case_id)
    row = _DEVIATIONS.get(case_id)
    try:
        if row is None:
            return thunk()
        thunk()
    except EngineBug:
        raise
    except Exception as e:
        refuse_engine_bug(e)
        if row is None or not isinstance(e, AssertionError):
            raise
        pytest.xfail(f"docs/oracle.md, {row[0]}: {row[1]} ({str(e)[:200]})")
    raise AssertionError(f"`{case_id}` now agrees with the oracle: remove its row from "
                         f"docs/oracle.md ({row[0]})")


# ---------------------------------------------------------------------------------------
# comparing
def dtype_name(dtype):
    """'float32' for torch.float32, ft.float32, np.float32, a jax dtype."""
    return str(dtype).rsplit(".", 1)[-1].replace("'>", "").replace("<class 'numpy", "")


def as_numpy(x):
    if isinstance(x, (torch.Tensor, ft.Tensor)):
        return np.asarray(x.detach().cpu().numpy(force=True)     # conj bits, ZeroTensors
                          if isinstance(x, torch.Tensor)
                          else x.detach().numpy())
    return np.asarray(x)


def close(a, b, where, rtol=None, atol=None):
    """a (ours) equals b (the oracle's) within the dtype's tolerance; NaN equals NaN and
    infinities match by sign."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        raise Mismatch(f"{where}: shape {a.shape}, oracle {b.shape}")
    if a.dtype.kind in "biu" or b.dtype.kind in "biu" or a.dtype == bool:
        if not np.array_equal(a, b):
            raise Mismatch(f"{where}: {a!r} != oracle {b!r}")
        return
    r, t = TOL.get(str(b.dtype), TOL["float32"])
    rtol, atol = rtol if rtol is not None else r, atol if atol is not None else t
    if not np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True):
        bad = ~np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=True)
        raise Mismatch(f"{where}: {int(bad.sum())} of {a.size} elements differ, e.g. "
                       f"{a[bad][:4]} against the oracle's {b[bad][:4]}")


def _is_tensor(x):
    return isinstance(x, (torch.Tensor, ft.Tensor, np.ndarray, jax.Array, ft.Array))


def compare(ours, theirs, where="out", *, dtypes=True, grad_fn=True, rtol=None, atol=None):
    """Compare two results structurally (see the module docstring)."""
    if isinstance(theirs, BaseException):
        if not isinstance(ours, BaseException):
            raise Mismatch(f"{where}: the oracle raises {type(theirs).__name__}: "
                           f"{str(theirs)[:300]}; we return {ours!r:.300}")
        return
    if isinstance(ours, BaseException):
        raise Mismatch(f"{where}: we raise {type(ours).__name__}: {str(ours)[:300]}; "
                       f"the oracle returns {theirs!r:.300}")
    if _is_tensor(theirs):
        if not _is_tensor(ours):
            raise Mismatch(f"{where}: we return {type(ours).__name__}, the oracle a tensor")
        if dtypes and dtype_name(ours.dtype) != dtype_name(theirs.dtype):
            raise Mismatch(f"{where}: dtype {dtype_name(ours.dtype)}, oracle "
                           f"{dtype_name(theirs.dtype)}")
        if grad_fn and isinstance(theirs, torch.Tensor):
            a, b = _grad_fn_name(ours), _grad_fn_name(theirs)
            if a != b:
                raise Mismatch(f"{where}: grad_fn {a}, oracle {b}")
        if tuple(ours.shape) != tuple(theirs.shape):
            raise Mismatch(f"{where}: shape {tuple(ours.shape)}, oracle {tuple(theirs.shape)}")
        return close(as_numpy(ours), as_numpy(theirs), where, rtol, atol)
    if isinstance(theirs, dict):
        if not isinstance(ours, dict) or set(ours) != set(theirs):
            raise Mismatch(f"{where}: keys {sorted(ours) if isinstance(ours, dict) else ours}"
                           f", oracle {sorted(theirs)}")
        for k in theirs:
            compare(ours[k], theirs[k], f"{where}[{k!r}]", dtypes=dtypes, grad_fn=grad_fn,
                    rtol=rtol, atol=atol)
        return
    if isinstance(theirs, (list, tuple)):
        if not isinstance(ours, (list, tuple)) or len(ours) != len(theirs):
            raise Mismatch(f"{where}: {ours!r:.200}, oracle {theirs!r:.200}")
        for i, (a, b) in enumerate(zip(ours, theirs)):
            compare(a, b, f"{where}[{i}]", dtypes=dtypes, grad_fn=grad_fn, rtol=rtol,
                    atol=atol)
        return
    if isinstance(theirs, (torch.dtype, np.dtype)) or type(theirs).__name__ == "dtype":
        if dtype_name(ours) != dtype_name(theirs):
            raise Mismatch(f"{where}: dtype {ours}, oracle {theirs}")
        return
    if isinstance(theirs, torch.Size):
        theirs = tuple(theirs)
    if isinstance(theirs, float) and isinstance(ours, (int, float)) and not isinstance(
            ours, bool):
        if not (math.isclose(ours, theirs, rel_tol=1e-9, abs_tol=1e-12)
                or (math.isnan(ours) and math.isnan(theirs))):
            raise Mismatch(f"{where}: {ours!r}, oracle {theirs!r}")
        return
    if isinstance(ours, (tuple, list)) and not isinstance(theirs, (tuple, list)):
        raise Mismatch(f"{where}: {ours!r}, oracle {theirs!r}")
    if ours != theirs or type(ours) is bool and type(theirs) is not bool:
        raise Mismatch(f"{where}: {ours!r:.200}, oracle {theirs!r:.200}")


def _grad_fn_name(t):
    g = getattr(t, "grad_fn", None)
    return None if g is None else g.name()


def check_error(ours, theirs, error, where="error"):
    """Both raised an exception of the same type whose messages match the pattern."""
    if not isinstance(theirs, BaseException):
        raise Mismatch(f"{where}: the oracle did not raise")
    if not isinstance(ours, BaseException):
        raise Mismatch(f"{where}: the oracle raises {type(theirs).__name__}: {theirs}; "
                       "we do not raise")
    if type(ours).__name__ != type(theirs).__name__ and not isinstance(ours, type(theirs)):
        raise Mismatch(f"{where}: we raise {type(ours).__name__}: {ours}; the oracle "
                       f"{type(theirs).__name__}: {theirs}")
    for who, e in (("our", ours), ("the oracle's", theirs)):
        if error and not re.search(error, str(e)):
            raise Mismatch(f"{where}: {who} message {str(e)!r:.300} does not match {error!r}")


# ---------------------------------------------------------------------------------------
# the facade against PyTorch
def _attempt(fn, *a, **k):
    try:
        return fn(*a, **k)
    except Exception as e:  # noqa: BLE001 - the error is the result being compared
        refuse_engine_bug(e)
        return e


def tensors(lib, inputs, requires_grad=True):
    """Each NumPy array of inputs as a tensor of lib (floating ones requiring grad when
    requires_grad); other values as they are."""
    out = []
    for a in inputs:
        if isinstance(a, np.ndarray):
            t = lib.tensor(a.copy())
            if requires_grad and a.dtype.kind in "fc":
                t.requires_grad_(True)
            out.append(t)
        else:
            out.append(a)
    return out


def _flat_tensors(x):
    if isinstance(x, (torch.Tensor, ft.Tensor)):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in _flat_tensors(v)]
    if isinstance(x, dict):
        return [t for v in x.values() for t in _flat_tensors(v)]
    return []


def _side(lib, fn, inputs, backward, seed, requires_grad):
    ts = tensors(lib, inputs, requires_grad)
    out = _attempt(fn, lib, *ts)
    if isinstance(out, BaseException) or not backward:
        return out, None
    diff = [t for t in _flat_tensors(out) if t.requires_grad]
    if not diff:
        return out, None
    rng = np.random.default_rng(seed)
    total = None
    for t in diff:
        cot = lib.tensor(rng.standard_normal(tuple(t.shape)).astype(as_numpy(t).dtype))
        term = (t * cot).sum()
        total = term if total is None else total + term
    err = _attempt(total.backward)
    grads = [t.grad if isinstance(t, (torch.Tensor, ft.Tensor)) and t.requires_grad else None
             for t in ts]
    return out, err if isinstance(err, BaseException) else grads


def facade(fn, *inputs, backward=True, error=None, seed=0, requires_grad=True, dtypes=True,
           grad_fn=True, rtol=None, atol=None):
    """Run fn(lib, *tensors) under torch and functrans and compare values, dtypes, shapes,
    grad_fn names, errors (error: a pattern both messages match) and the inputs' gradients
    of sum(out * cotangent). Returns (ours, theirs)."""
    theirs, tg = _side(torch, fn, inputs, backward, seed, requires_grad)
    ours, og = _side(ft, fn, inputs, backward, seed, requires_grad)
    if isinstance(theirs, BaseException) or error is not None:
        check_error(ours, theirs, error)
        return ours, theirs
    compare(ours, theirs, "value", dtypes=dtypes, grad_fn=grad_fn, rtol=rtol, atol=atol)
    if tg is not None or og is not None:
        if isinstance(tg, BaseException):
            check_error(og, tg, None, "backward")
        else:
            compare(og, tg, "grad", dtypes=dtypes, grad_fn=False, rtol=rtol, atol=atol)
    return ours, theirs


def copy_weights(src, dst):
    """Load a torch module's state into a functrans module of the same structure."""
    state = {k: ft.tensor(v.detach().numpy().copy()) for k, v in src.state_dict().items()}
    dst.load_state_dict(state)


def training(build, batches, steps=4, *, rtol=None, atol=None):
    """train(...) one step at a time: a generator that yields after each compared step
    (the step's index), so that several trainings can run interleaved (the engine then
    sees their structures alternate)."""
    torch.manual_seed(0)
    tm, topt, tloss = build(torch)
    fm, fopt, floss = build(ft)
    copy_weights(tm, fm)
    names = [n for n, _ in tm.named_parameters()]
    if names != [n for n, _ in fm.named_parameters()]:
        raise Mismatch(f"parameters {[n for n, _ in fm.named_parameters()]}, oracle {names}")
    for step in range(steps):
        batch = batches[step % len(batches)]
        for lib, m, opt, loss_fn, res in ((torch, tm, topt, tloss, "t"),
                                          (ft, fm, fopt, floss, "f")):
            opt.zero_grad()
            loss = loss_fn(m, *tensors(lib, batch, requires_grad=False))
            loss.backward()
            if res == "t":
                tl = loss.detach()
                tgrads = {n: p.grad for n, p in m.named_parameters()}
            else:
                fl = loss.detach()
                fgrads = {n: p.grad for n, p in m.named_parameters()}
            opt.step()
        compare(fl, tl, f"step {step}: loss", grad_fn=False, rtol=rtol, atol=atol)
        compare(fgrads, tgrads, f"step {step}: .grad", grad_fn=False, rtol=rtol, atol=atol)
        compare(dict(fm.named_parameters()), dict(tm.named_parameters()),
                f"step {step}: parameters after the step", grad_fn=False, rtol=rtol,
                atol=atol)
        yield step


def train(build, batches, steps=4, *, rtol=None, atol=None):
    """build(lib) -> (model, optimizer, loss_fn(model, *batch) -> loss). One model per
    library, the functrans one loaded with the torch one's weights; each step feeds both
    the same batch (NumPy arrays) and compares the loss, every parameter's .grad and the
    parameters after the step."""
    for _ in training(build, batches, steps, rtol=rtol, atol=atol):
        pass


def interleaved(trainings):
    """Run several training generators (training(...)) round-robin, one step of each in
    turn, until all are done; a failure names the training (its index) and the step."""
    live = list(enumerate(trainings))
    while live:
        for entry in list(live):
            i, gen = entry
            try:
                next(gen)
            except StopIteration:
                live.remove(entry)
            except Mismatch as e:
                raise Mismatch(f"training {i}: {e}") from e


# ---------------------------------------------------------------------------------------
# the functional side against JAX
LIBS = {"jax": (jnp, jax.lax, jax), "ft": (fnp, ft.lax, ft)}


@contextlib.contextmanager
def x64(flag=True):
    """jax_enable_x64 set to flag in both libraries for the block."""
    saved = (jax.config.read("jax_enable_x64"), ft.config.read("jax_enable_x64"))
    jax.config.update("jax_enable_x64", flag)
    ft.config.update("jax_enable_x64", flag)
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", saved[0])
        ft.config.update("jax_enable_x64", saved[1])


def _jax_side(which, fn, inputs, transform, argnums):
    np_mod, lax_mod, top = LIBS[which]
    f = lambda *a: fn(np_mod, lax_mod, *a)  # noqa: E731
    if transform == "grad":
        f = top.grad(lambda *a: np_mod.sum(fn(np_mod, lax_mod, *a)), argnums=argnums)
    elif transform == "vmap":
        f = top.vmap(f)
    elif transform == "jit":
        f = top.jit(f)
    return _attempt(lambda: _to_numpy_tree(f(*inputs)))


def _to_numpy_tree(x):
    if isinstance(x, (list, tuple)):
        return type(x)(_to_numpy_tree(v) for v in x) if not hasattr(x, "_fields") else \
            tuple(_to_numpy_tree(v) for v in x)
    if isinstance(x, dict):
        return {k: _to_numpy_tree(v) for k, v in x.items()}
    if isinstance(x, (jax.Array, np.generic)) or hasattr(x, "__array__") and not np.isscalar(x):
        return np.asarray(x)     # a NumPy scalar (an eager rank-0 result) is a rank-0 array
    return x


def functional(fn, *inputs, transforms=("value",), argnums=0, error=None, dtypes=True,
               rtol=None, atol=None):
    """Run fn(np_module, lax_module, *inputs) with jax's and functrans' modules, eagerly
    ('value') and under each of transforms ('grad' of its sum w.r.t. argnums, 'vmap' over
    axis 0, 'jit'); compare values and dtypes, or the errors (error: a pattern)."""
    for transform in transforms:
        theirs = _jax_side("jax", fn, inputs, transform, argnums)
        ours = _jax_side("ft", fn, inputs, transform, argnums)
        if isinstance(theirs, BaseException) or error is not None:
            check_error(ours, theirs, error, transform)
            continue
        compare(ours, theirs, transform, dtypes=dtypes, rtol=rtol, atol=atol)


# ---------------------------------------------------------------------------------------
# inputs
SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, np.inf, -np.inf])


def special_values(rng, shape, dtype=np.float64, kinds=("normal", "ties", "zeros")):
    """Random values of shape with the awkward ones mixed in: ties (repeated values),
    zeros of both signs, kinks at 0 and +-1, and (with 'inf' in kinds) infinities."""
    x = rng.standard_normal(shape)
    n = x.size
    flat = x.reshape(-1)
    if n and "ties" in kinds:
        flat[rng.integers(0, n, max(1, n // 3))] = flat[0]
    if n and "zeros" in kinds:
        flat[rng.integers(0, n, max(1, n // 4))] = rng.choice(SPECIAL[:7], max(1, n // 4))
    if n and "inf" in kinds:
        flat[rng.integers(0, n, max(1, n // 5))] = rng.choice(SPECIAL[7:], max(1, n // 5))
    return flat.reshape(shape).astype(dtype)
