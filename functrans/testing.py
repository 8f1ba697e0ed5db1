"""torch.testing: `assert_close` (with torch's per-dtype default tolerances and its messages),
`make_tensor` (random tensors for tests, from the facade's global generator) and the
deprecated `assert_allclose`."""
from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence

import numpy as np

from .facade import creation as C
from .facade.dtypes import get_default_dtype, to_dtype
from .facade.tensor import Size, Tensor

__all__ = ["assert_close", "make_tensor", "assert_allclose"]

# torch's defaults (rtol, atol) by dtype; integers and bools must be equal
_TOLERANCES = {"float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5), "float32": (1.3e-6, 1e-5),
               "float64": (1e-7, 1e-7), "complex64": (1.3e-6, 1e-5),
               "complex128": (1e-7, 1e-7)}


def _name(d):
    return f"torch.{np.dtype(d).name}"


def _tolerances(dtype, rtol, atol):
    if (rtol is None) != (atol is None):
        raise ValueError(f"Both 'rtol' and 'atol' must be either specified or omitted, but got "
                         f"no {'rtol' if rtol is None else 'atol'}.")
    if rtol is not None:
        return rtol, atol
    return _TOLERANCES.get(np.dtype(dtype).name, (0.0, 0.0))


def _where(i, shape):
    return str(tuple(int(k) for k in np.unravel_index(i, shape))) if shape else "()"


def _compare_arrays(actual, expected, rtol, atol, equal_nan, what):
    a64 = actual.astype(np.complex128 if actual.dtype.kind == "c" else np.float64)
    e64 = expected.astype(a64.dtype)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        diff = np.abs(a64 - e64)
        ok = diff <= atol + rtol * np.abs(e64)
        ok |= a64 == e64                              # infinities of the same sign
        if equal_nan:
            ok |= np.isnan(a64) & np.isnan(e64)
        if ok.all():
            return None
        rel = diff / np.abs(e64)
    close = rtol or atol
    n, bad = actual.size, int((~ok).sum())
    ia = int(np.nanargmax(diff)) if not np.isnan(diff).all() else 0
    ir = int(np.nanargmax(np.where(np.isinf(rel), np.inf, rel))) if not np.isnan(rel).all() \
        else 0
    integral = actual.dtype.kind in "iub"

    def num(v):
        v = float(v)
        return str(int(v)) if integral and math.isfinite(v) and v == int(v) else repr(v)
    msg = (f"{what} are not {'close' if close else 'equal'}!\n\n"
           f"Mismatched elements: {bad} / {n} ({100 * bad / n:.1f}%)\n"
           f"Greatest absolute difference: {num(diff.reshape(-1)[ia])} at index "
           f"{_where(ia, actual.shape)}" + (f" (up to {atol} allowed)" if close else "") + "\n"
           f"Greatest relative difference: {float(rel.reshape(-1)[ir])!r} at index "
           f"{_where(ir, actual.shape)}" + (f" (up to {rtol} allowed)" if close else ""))
    return msg


def _compare(actual, expected, rtol, atol, equal_nan, check_dtype, path):
    if isinstance(actual, Tensor) or isinstance(expected, Tensor):
        if not (isinstance(actual, Tensor) and isinstance(expected, Tensor)):
            raise AssertionError(f"Expected both inputs to be Tensors, but got "
                                 f"{type(actual).__name__} and {type(expected).__name__}." + path)
        if actual.shape != expected.shape:
            raise AssertionError(f"The values for attribute 'shape' do not match: "
                                 f"{Size(actual.shape)!r} != {Size(expected.shape)!r}.".replace(
                                     "ft.Size", "torch.Size") + path)
        if check_dtype and actual.dtype != expected.dtype:
            raise AssertionError(f"The values for attribute 'dtype' do not match: "
                                 f"{_name(actual.dtype)} != {_name(expected.dtype)}." + path)
        a = actual.detach().cpu().numpy()
        e = expected.detach().cpu().numpy()
        r, t = _tolerances(np.promote_types(a.dtype, e.dtype) if not check_dtype else a.dtype,
                           rtol, atol)
        msg = _compare_arrays(a, e, r, t, equal_nan, "Tensor-likes")
        if msg:
            raise AssertionError(msg + path)
        return
    if isinstance(actual, (bool, int, float, complex, np.number)) and \
            isinstance(expected, (bool, int, float, complex, np.number)):
        if check_dtype and type(actual) is not type(expected):
            raise AssertionError(f"The values for attribute 'dtype' do not match: "
                                 f"{type(actual)} != {type(expected)}." + path)
        kind = np.result_type(type(actual), type(expected))
        r, t = (rtol, atol) if rtol is not None else (
            _TOLERANCES["float64"] if kind.kind in "fc" else (0.0, 0.0))
        a, e = complex(actual) if kind.kind == "c" else float(actual), \
            complex(expected) if kind.kind == "c" else float(expected)
        diff = abs(a - e)
        if diff <= t + r * abs(e) or a == e or (equal_nan and a != a and e != e):
            return
        word = "close" if (r or t) else "equal"
        raise AssertionError(f"Scalars are not {word}!\n\nExpected {expected} but got {actual}.\n"
                             f"Absolute difference: {diff}" + (f" (up to {t} allowed)" if r or t
                                                                else "") +
                             f"\nRelative difference: {diff / abs(e) if e else math.inf}" +
                             (f" (up to {r} allowed)" if r or t else "") + path)
    if isinstance(actual, Mapping) and isinstance(expected, Mapping):
        if set(actual) != set(expected):
            raise AssertionError(f"The keys of the mappings do not match:\n"
                                 f"{sorted(map(str, actual))} != {sorted(map(str, expected))}"
                                 + path)
        for k in actual:
            _compare(actual[k], expected[k], rtol, atol, equal_nan, check_dtype,
                     _item_path(path, repr(k)))
        return
    if isinstance(actual, Sequence) and isinstance(expected, Sequence) and not isinstance(
            actual, str) and not isinstance(expected, str):
        if len(actual) != len(expected):
            raise AssertionError(f"The length of the sequences mismatch: {len(actual)} != "
                                 f"{len(expected)}" + path)
        for i, (a, e) in enumerate(zip(actual, expected)):
            _compare(a, e, rtol, atol, equal_nan, check_dtype, _item_path(path, str(i)))
        return
    if isinstance(actual, np.ndarray) or isinstance(expected, np.ndarray):
        raise TypeError("assert_close: NumPy arrays are compared as torch does only after "
                        "ft.from_numpy(...); pass Tensors (or use numpy.testing)")
    if actual is None and expected is None:
        return
    raise TypeError(f"No comparison pair was able to handle inputs of type {type(actual)} and "
                    f"{type(expected)}.")


def _item_path(path, key):
    if not path:
        return f"\n\nThe failure occurred for item [{key}]"
    return path + f"[{key}]"


def assert_close(actual, expected, *, allow_subclasses=True, rtol=None, atol=None,
                 equal_nan=False, check_device=True, check_dtype=True, check_layout=True,
                 check_stride=False, msg=None):
    """Raise AssertionError unless actual and expected are close: |a - e| <= atol + rtol * |e|
    elementwise, with torch's defaults per dtype (float32: rtol 1.3e-6, atol 1e-5; float64:
    1e-7, 1e-7; integers and bools: equal); also the same shape and (check_dtype) dtype.
    Tensors, Python numbers, and sequences or mappings of them (compared item by item)."""
    try:
        _compare(actual, expected, rtol, atol, equal_nan, check_dtype, "")
    except AssertionError as e:
        if msg is None:
            raise
        raise AssertionError(msg(str(e)) if callable(msg) else msg) from None


def assert_allclose(actual, expected, rtol=None, atol=None, equal_nan=True, msg=""):
    """torch.testing.assert_allclose (deprecated in torch): assert_close without the dtype
    check, NaNs equal."""
    warnings.warn("`torch.testing.assert_allclose()` is deprecated. Use "
                  "`torch.testing.assert_close()` instead.", FutureWarning, stacklevel=2)
    if not isinstance(actual, Tensor):
        actual = C.tensor(actual)
    if not isinstance(expected, Tensor):
        expected = C.tensor(expected, dtype=actual.dtype)
    assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=equal_nan,
                 check_dtype=False, msg=msg or None)


def make_tensor(*shape, dtype, device=None, low=None, high=None, requires_grad=False,
                noncontiguous=False, exclude_zero=False, memory_format=None):
    """A tensor of the given shape and dtype with values drawn uniformly from [low, high)
    (default [-9, 9] for floats, [-9, 10) for signed integers, [0, 10) for unsigned, and
    random bools), from the facade's global generator (ft.manual_seed makes it repeatable).
    exclude_zero replaces zeros by the dtype's smallest positive step (1 for integers)."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    shape = tuple(int(s) for s in shape)
    d = np.dtype(to_dtype(dtype) if dtype is not None else get_default_dtype())
    if low is not None and high is not None and low > high:
        raise ValueError(f"`low` must be less than or equal to `high`, but got {low} > {high}")
    if d.kind == "b":
        data = C.randint(0, 2, shape).numpy().astype(bool)
    elif d.kind in "iu":
        lo = max(int(math.ceil(low)) if low is not None else (0 if d.kind == "u" else -9),
                 np.iinfo(d).min)
        hi = min(int(math.ceil(high)) if high is not None else 10, int(np.iinfo(d).max) + 1)
        data = C.randint(lo, max(hi, lo + 1), shape).numpy().astype(d)
    elif d.kind in "fc":
        lo = -9.0 if low is None else float(low)
        hi = 9.0 if high is None else float(high)
        parts = [lo + (hi - lo) * C.rand(*shape, dtype=np.float64).numpy()
                 for _ in range(2 if d.kind == "c" else 1)]
        data = (parts[0] if d.kind == "f" else parts[0] + 1j * parts[1]).astype(d)
    else:
        raise TypeError(f"make_tensor: the dtype {_name(d)} is not supported")
    if exclude_zero:
        step = 1 if d.kind in "iub" else np.finfo(d).tiny
        data = np.where(data == 0, np.asarray(step, d), data)
    t = C.tensor(data, dtype=d)
    return t.requires_grad_(True) if requires_grad else t
