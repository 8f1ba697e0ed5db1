"""In-place Tensor ops (add_, mul_, x[i] = v, zero_, ...) with torch's autograd semantics.

An in-place op under grad mode computes its result out of place (recorded as usual),
writes it into the tensor's storage, bumps the shared version counter and rebases the
tensor's history onto the new node; on a view, the base's history becomes
CopySlices(base, result). Without recording, the fast paths write with NumPy ufuncs.
"""
from __future__ import annotations

import numpy as np

from ..numpy import raw as fnp
from ..core import Tracer
from . import creation
from . import dtypes as D
from .node import with_value, without_slot
from .record import INFERENCE, SAVED_HOOKS, VIEW_HISTORY, WRITE_WATCH, vc_of
from .hot_ops import binary
from .tensor import (GS, LEAF_INPLACE_MSG, VIEW_LEAF_INPLACE_MSG, _TS, Tensor,
                     _mark_views, apply_fn, traced_hooks, wrap)
from .methods import DIV, MUL, add, addcdiv, addcmul, lerp, sub

T = Tensor
# the grad_fn name of a base rewritten by an in-place op on its view, or by x[i] = v
# (torch's C++-defined node, named with its namespace like AccumulateGrad)
COPY_SLICES = "torch::autograd::CopySlices"


# ---------------------------------------------------------------------------
# in-place ops: compute out of place (recorded as usual), write into the storage,
# bump the version, and rebase the tensor's history onto the new node


NOGRAD_VIEW_MSG = (
    "A view was created in no_grad mode and is being modified inplace with grad mode enabled. "
    "Given that this use case is ambiguous and error-prone, it is forbidden. You can clarify "
    "your code by moving both the view and the inplace either both inside the no_grad block "
    "(if you don't want the inplace to be tracked) or both outside (if you want the inplace "
    "to be tracked).")


MULTI_VIEW_MSG = (
    "Output {k} of {name} is a view and is being modified inplace. This view is the output of "
    "a function that returns multiple views. Such functions do not allow the output views to "
    "be modified inplace. You should replace the inplace operation by an out-of-place one.")


def nograd_view_msg(t):
    """The refusal for an in-place write, with grad mode on, to a view taken with it off
    (no_grad or inference_mode, as _mark_views noted)."""
    if t.__dict__.get("_nograd_view") == "inference":
        return NOGRAD_VIEW_MSG.replace("no_grad mode", "inference mode").replace(
            "with grad mode enabled", "in normal mode").replace("no_grad block",
                                                                "inference_mode block")
    return NOGRAD_VIEW_MSG


def _fn_view_msg(self):
    """The refusal for an in-place write to an output of a custom Function that is a view:
    torch's text for a Function returning several views, or for one."""
    name, k, multi = self.__dict__["_fn_view"]
    if multi:
        return MULTI_VIEW_MSG.format(k=k, name=name)
    return (f"Output {k} of {name} is a view and is being modified inplace. This view was "
            "created inside a custom Function (or because an input was returned as-is) and the "
            "autograd logic to handle view+inplace would override the custom backward "
            "associated with the custom Function, leading to incorrect gradients. This "
            "behavior is forbidden. You can fix this by cloning the output of the custom "
            "Function.")


def _check_inplace(self, recording):
    if _TS.depth and type(self._data) is np.ndarray:     # ft.compile: checked before writing
        traced_hooks().concrete_update(self, None)
    if WRITE_WATCH.fn is not None:
        WRITE_WATCH.fn(self)
    if recording and self._requires_grad and "_fn_view" in self.__dict__:
        raise RuntimeError(_fn_view_msg(self))
    if recording and self._requires_grad and "_dtype_view" in self.__dict__:
        raise RuntimeError(
            f"functrans: an in-place operation on the output of {self.__dict__['_dtype_view']}"
            " (a view with another dtype than its base) cannot be recorded: its base's history "
            "cannot be rewritten through the change of dtype. Apply the operation to the base "
            "(or to a clone of the view).")
    if GS.enabled and self._base is not None and "_nograd_view" in self.__dict__:
        # a view of a tensor that requires grad, taken under no_grad: it has no history
        # to rebase, and recording nothing would silently cut the base's gradient
        raise RuntimeError(nograd_view_msg(self))
    if recording and self._requires_grad and self._grad_fn is None and self._base is None:
        raise RuntimeError(LEAF_INPLACE_MSG)
    base = self._base
    if recording and base is not None and base._requires_grad and base._grad_fn is None:
        raise RuntimeError(VIEW_LEAF_INPLACE_MSG)
    if self._flags & INFERENCE and not GS.inference:
        raise RuntimeError("Inplace update to inference tensor outside InferenceMode is not "
                           "allowed. You can make a clone to get a normal tensor before doing "
                           "inplace update. See https://github.com/pytorch/rfcs/pull/17 for more "
                           "details.")


def inplace(self, name, compute):
    """Run compute() (an out-of-place op returning a Tensor) and make self hold the result."""
    recording = GS.enabled
    _check_inplace(self, recording)
    if SAVED_HOOKS.stack:            # pack hooks must not see a value about to change
        vc_of(self)
        prev, SAVED_HOOKS.writing = SAVED_HOOKS.writing, self
        try:
            res = compute()
        finally:
            SAVED_HOOKS.writing = prev
    else:
        res = compute()
    if isinstance(self._data, Tracer) or isinstance(res._data, Tracer):   # traced data
        return traced_hooks().inplace(self, name, res)
    node = res._grad_fn
    data = self._data
    if node is not None:
        if "_fn_view" in self.__dict__:     # it does not require grad, but what it receives does
            raise RuntimeError(_fn_view_msg(self))
        if self._base is not None:
            return _inplace_on_view(self, name, res)
        # values the new node saved from self's storage must survive the write
        vals = node.vals
        if vals:
            for s, v in enumerate(vals):
                if v is not None and s < node.info.n_in and v is data:
                    node.vals = with_value(node.vals, s, data.copy())
                    node.vers = without_slot(node.vers, s)
    out = res._data
    if out.shape != data.shape:
        try:
            np.broadcast_to(out, data.shape)
        except ValueError:
            raise RuntimeError(f"output with shape {list(data.shape)} doesn't match the "
                               f"broadcast shape {list(out.shape)}") from None
        raise RuntimeError(f"output with shape {list(data.shape)} doesn't match the broadcast "
                           f"shape {list(out.shape)}")
    _write(data, out)
    self._bump(name)
    if node is not None:
        _rebase(self, res)
        adopt_views(self, self)
    return self


def _protect_saved(node, data):
    """Copy values a new node saved from storage that is about to be overwritten."""
    vals = node.vals
    if vals:
        for s, v in enumerate(vals):
            if v is not None and s < node.info.n_in and isinstance(v, np.ndarray) and \
                    np.may_share_memory(v, data):
                node.vals = with_value(node.vals, s, v.copy())
                node.vers = without_slot(node.vers, s)


def _rebase(t, res):
    """t (whose storage now holds res's values) takes over res's history."""
    node = res._grad_fn
    _set_history(t, node, res._out_nr)
    t._requires_grad = True
    _hold_output_in(t, res)


def _hold_output_in(t, res):
    """res's node may have saved its output (exp_, sigmoid_, ...), whose values now live in
    t's storage: the node holds that storage and t's current version, so a later in-place
    write to t, its base or any view of it is caught at backward (torch's check)."""
    node = res._grad_fn
    s = node.info.out_slots[res._out_nr]
    if node.vals and node.vals[s] is not None:
        vc = vc_of(t)
        node.vals = with_value(node.vals, s, t._data)
        node.vers = without_slot(node.vers, s) + (s, vc, vc.v)


def _set_history(t, node, out_nr):
    """t's grad_fn becomes (node, out_nr). A retain_grad() of t moves along: .grad then
    holds the gradient of t's new value, as torch moves its retains_grad hook when an
    in-place op rebases a tensor's history (hooks registered with register_hook stay with
    the old value)."""
    old = t._grad_fn
    if old is not None and old.retains:
        r = old.retains.get(t._out_nr)
        if r is not None and r() is t:
            del old.retains[t._out_nr]
            if node.retains is None:
                node.retains = {}
            node.retains[out_nr] = r
    t._grad_fn = node
    t._out_nr = out_nr


def _view_positions(view, base):
    """Flat positions in base's (C-contiguous) storage of each element of view."""
    bd, vd = base._data, view._data
    if not bd.flags.c_contiguous:
        raise NotImplementedError("functrans: in-place operation on a view of a non-contiguous "
                                  "tensor that requires grad; clone() the base first")
    item = bd.itemsize
    off = (vd.__array_interface__["data"][0] - bd.__array_interface__["data"][0]) // item
    idx = np.arange(bd.size, dtype=np.int64)
    return np.lib.stride_tricks.as_strided(
        idx[off:], vd.shape, tuple(st // item * idx.itemsize for st in vd.strides)).copy()


def _copy_slices_fn(base, value, pos):
    flat = fnp.reshape(base, (-1,))
    return fnp.reshape(fnp.index_update(flat, pos, value), base.shape)


def _as_strided_fn(base, pos):
    return fnp.take(fnp.reshape(base, (-1,)), pos)


def regenerate_view_history(view):
    """Give a view whose base was modified in place after it was taken (through another
    view, or the base itself) a history that reads the base's new one: an
    AsStridedBackward0 node on the base, as torch regenerates it. A retain_grad() moves
    along. Returns False where it cannot (traced data, a base that is not C-contiguous)."""
    base = view._base
    if type(view._data) is not np.ndarray or type(base._data) is not np.ndarray \
            or not base._data.flags.c_contiguous:
        return False
    prev = GS.enabled
    GS.enabled = True                  # the view's history exists whatever the mode now
    try:
        new_view = apply_fn("AsStridedBackward0", _as_strided_fn,
                            (base, wrap(_view_positions(view, base))))
    finally:
        GS.enabled = prev
    _set_history(view, new_view._grad_fn, 0)
    view._requires_grad = True
    view.__dict__["_vfn"] = base._grad_fn
    return True


VIEW_HISTORY.regenerate = regenerate_view_history

_STALE = object()      # a view's `_vfn` that matches no history: check_view refuses it


def adopt_views(base, skip):
    """An in-place op just gave base a history: the views taken while it required no grad
    (its version counter's `views`) now read a tensor that does, so each gets a history
    reading the base's (torch: `x.add_(r)` makes every view of x require grad). Where that
    history cannot be made (a base that is not C-contiguous) the view is marked stale and
    refused when it is used, rather than used as a constant."""
    vc = base._vc
    views = vc.views if vc is not None else None
    if not views:
        return
    vc.views = None
    for r in views:
        w = r()
        if w is None or w is skip or w._requires_grad or w._base is not base:
            continue            # (a view of a detached alias shares the counter, not the base)
        if not regenerate_view_history(w):
            w._requires_grad = True
            w.__dict__["_vfn"] = _STALE


def _inplace_on_view(self, name, res):
    """In-place op on a view under grad: the base's history becomes CopySlices(base, result)
    and the view's becomes a strided read of the new base (torch's semantics)."""
    multi = self.__dict__.get("_multi_view")
    if multi is not None:
        op_name, k = multi
        raise RuntimeError(MULTI_VIEW_MSG.format(k=k, name=op_name.split('Backward')[0]))
    base = self._base
    pos = wrap(_view_positions(self, base))
    op = res
    if res._data.shape != self._data.shape:
        res = res.expand(tuple(self._data.shape))
    new_base = apply_fn(COPY_SLICES, _copy_slices_fn, (base, res, pos))
    _protect_saved(res._grad_fn, base._data)
    _protect_saved(new_base._grad_fn, base._data)
    _write(self._data, res._data)
    self._bump(name)
    if op is res:
        _hold_output_in(self, op)          # exp_ on a view saved the view's new values
    _view_written(self, new_base, pos)
    return self


def _view_written(view, new_base, pos):
    """view's storage (its base's) now holds new values: the base takes new_base's history
    (CopySlices of the base and the values written) and the view becomes a strided read of
    the base's new value, as torch rebases both."""
    base = view._base
    _rebase(base, new_base)
    adopt_views(base, view)
    new_view = apply_fn("AsStridedBackward0", _as_strided_fn, (base, pos))
    old = view._grad_fn
    if old is not None and old.hooks:   # torch's CopySlices bypasses the view's old node,
        old.hooks.pop(view._out_nr, None)   # so hooks registered on the view never fire
    _set_history(view, new_view._grad_fn, 0)
    view._requires_grad = True
    view.__dict__["_vfn"] = base._grad_fn


def function_wrote_view(view, node, out_nr):
    """A custom Function's forward modified `view` in place (mark_dirty) and returned it as
    output `out_nr` of `node`: as for an in-place op on a view, the base's history becomes
    CopySlices(base, that output), so the base's gradient flows through the Function's
    backward (torch's rule; without it the Function's other inputs got no gradient)."""
    base = view._base
    pos = wrap(_view_positions(view, base))
    res = wrap(view._data)
    res._grad_fn, res._out_nr, res._requires_grad = node, out_nr, True
    new_base = apply_fn(COPY_SLICES, _copy_slices_fn, (base, res, pos))
    _view_written(view, new_base, pos)


def _write(dst, src):
    if not np.can_cast(src.dtype, dst.dtype, "same_kind"):
        raise RuntimeError(f"result type {_tname(src.dtype)} can't be cast to the desired output "
                           f"type {_tname(dst.dtype)}")
    if not dst.flags.writeable:
        raise RuntimeError(OVERLAP_MSG)
    np.copyto(dst, src, casting="same_kind")


OVERLAP_MSG = ("unsupported operation: more than one element of the written-to tensor refers "
               "to a single memory location. Please clone() the tensor before performing the "
               "operation.")
def _cname(d):
    """c10's name of a scalar type, as other torch messages spell it (float, double, long
    int, c10::Half, ...)."""
    return {"float32": "float", "float64": "double", "int64": "long int", "int32": "int",
            "int16": "short int", "int8": "signed char", "uint8": "unsigned char",
            "bool": "bool", "float16": "c10::Half", "bfloat16": "c10::BFloat16"}.get(
                d.name, d.name)


def _tname(d):
    """torch's name of a scalar type, as its error messages spell it (Float, Long, ...)."""
    return {"float32": "Float", "float64": "Double", "int64": "Long", "int32": "Int",
            "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool",
            "float16": "Half", "bfloat16": "BFloat16"}.get(d.name, d.name)


def _fast(self, *others):
    """True when an in-place op need not record: grad mode off or nothing requires grad.
    Every in-place op asks first, so it also refuses a read-only destination (an expand()
    view, whose elements share memory) with torch's error, before any fast path writes."""
    d = self._data
    if type(d) is np.ndarray and not d.flags.writeable:
        raise RuntimeError(OVERLAP_MSG)
    if _TS.depth and type(self._data) is np.ndarray:     # ft.compile: checked before writing
        traced_hooks().concrete_update(self, None)
    if WRITE_WATCH.fn is not None:
        WRITE_WATCH.fn(self)
    if not GS.enabled:
        if self._flags & INFERENCE and not GS.inference:
            _check_inplace(self, False)
        return True
    if self._requires_grad:
        return False
    if self._base is not None:
        if self._base._requires_grad:   # its base came to require grad after it was taken
            return False                # (torch's view then does too): record, or refuse
        if "_nograd_view" in self.__dict__:
            _check_inplace(self, False)
    for o in others:
        if isinstance(o, Tensor) and o._requires_grad:
            return False
    if self._flags & INFERENCE and not GS.inference:
        _check_inplace(self, False)
    return True


def native_updates(name, kernel, items):
    """A native update in place of several tensors per item, all items in one kernel call
    (an optimizer's fused step over its parameters, `name` in version errors): items are
    (written, read, args), kernel(list of (*written's arrays, *read's arrays, *args)) ->
    which it made. An item takes part after the checks every in-place op makes first and
    only where none records (grad mode off or nothing requires grad) and every value is
    concrete; each written tensor of an item made has its version bumped once. Returns, per
    item, whether it was made (False: nothing of it written; the caller's ops run instead)."""
    done = [False] * len(items)
    batch, at = [], []
    for k, (written, read, args) in enumerate(items):
        tensors = written + read
        if all(type(t._data) is np.ndarray for t in tensors) and \
                all(_fast(t, *read) for t in written):
            batch.append((*(t._data for t in tensors), *args))
            at.append(k)
    if batch:
        for k, made in zip(at, kernel(batch)):
            if made:
                done[k] = True
                for t in items[k][0]:
                    t._bump(name)
    return done


def _untraced(o):
    """o (a Tensor or a number) holds no traced value, so NumPy may write it in place."""
    return not isinstance(o._data if isinstance(o, Tensor) else o, Tracer)


def _uncastable(d, o):
    """The dtype of d op o (NumPy's promotion) where it does not cast back to d's
    ("same_kind": an in-place op's error), else None. A Python number takes the dtype of
    the array it meets (NEP 50), so into a float or complex array it always casts: answered
    without the promotion (0.8 us of an in-place op's 3, such as an optimizer's step count)."""
    if type(o) in (bool, int, float) and d.dtype.kind in "fc":
        return None
    res = np.dtype(np.result_type(d, o))
    return None if np.can_cast(res, d.dtype, "same_kind") else res


def _ufunc_inplace(ufunc, name, method):
    def f(self, other, **kw):
        if not kw and _fast(self, other) and type(self._data) is np.ndarray and _untraced(other):
            o = other._data if isinstance(other, Tensor) else other
            if _uncastable(self._data, o) is not None:
                _write(self._data, np.asarray(ufunc(self._data, o)))
            ufunc(self._data, o, out=self._data, casting="same_kind")
            self._bump(name)
            return self
        return inplace(self, name, lambda: method(self, other, **kw))
    f.__name__ = name
    return f


T.add_ = _ufunc_inplace(np.add, "add_", add)
T.sub_ = T.subtract_ = _ufunc_inplace(np.subtract, "sub_", sub)
T.mul_ = T.multiply_ = _ufunc_inplace(np.multiply, "mul_", lambda s, o: binary(s, o, MUL))
T.div_ = T.divide_ = T.true_divide_ = _ufunc_inplace(np.true_divide, "div_",
                                                     lambda s, o: binary(s, o, DIV))
T.__iadd__ = T.add_
T.__isub__ = T.sub_
T.__imul__ = T.mul_
T.__itruediv__ = T.div_


def _add_alpha_(self, other, *, alpha=1, _sub=False):
    if _fast(self, other) and type(self._data) is np.ndarray and _untraced(other):
        o = other._data if isinstance(other, Tensor) else other
        if alpha != 1:
            o = np.multiply(o, alpha._data if isinstance(alpha, Tensor) else alpha)
        res = _uncastable(self._data, o)
        if res is not None:
            raise RuntimeError(f"result type {_tname(res)} can't be cast to the "
                               f"desired output type {_tname(self._data.dtype)}")
        np.add(self._data, o, out=self._data, casting="same_kind")
        self._bump("add_")
        return self
    if _sub:                    # recorded as torch's SubBackward0
        return inplace(self, "sub_", lambda: sub(self, other, alpha=-alpha))
    return inplace(self, "add_", lambda: add(self, other, alpha=alpha))


def _sub_alpha_(self, other, *, alpha=1):
    return _add_alpha_(self, other, alpha=-alpha, _sub=True)


T.add_ = _add_alpha_
T.sub_ = T.subtract_ = _sub_alpha_
T.__iadd__ = _add_alpha_
T.__isub__ = _sub_alpha_


def _generic_inplace(name, method):
    def f(self, *args, **kwargs):
        return inplace(self, name + "_", lambda: method(self, *args, **kwargs))
    f.__name__ = name + "_"
    return f


for _n in ["pow", "neg", "abs", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tan", "tanh",
           "sigmoid", "relu", "clamp", "clamp_min", "clamp_max", "masked_fill", "addcmul",
           "addcdiv", "lerp", "floor", "ceil", "round", "trunc", "sign", "reciprocal", "square",
           "log1p", "expm1", "fmod", "remainder", "maximum", "minimum", "atan2", "erf",
           "asin", "acos", "atan", "sinh", "cosh", "frac", "log2", "log10", "exp2", "asinh",
           "acosh", "atanh", "nan_to_num"]:
    setattr(T, _n + "_", _generic_inplace(_n, getattr(T, _n)))
T.clip_ = T.clamp_
T.__ipow__ = T.pow_


def _addc_(name, ufunc, out_of_place):
    """self += value * ufunc(tensor1, tensor2) in place (addcmul_, addcdiv_)."""
    def f(self, tensor1, tensor2, *, value=1):
        if _fast(self, tensor1, tensor2) and type(self._data) is np.ndarray:
            term = ufunc(tensor1._data, tensor2._data)
            if value != 1:
                term *= value
            np.add(self._data, term, out=self._data, casting="same_kind")
            self._bump(name)
            return self
        return inplace(self, name, lambda: out_of_place(self, tensor1, tensor2, value=value))
    f.__name__ = name
    return f


_addcmul_ = _addc_("addcmul_", np.multiply, addcmul)
_addcdiv_ = _addc_("addcdiv_", np.divide, addcdiv)


def _lerp_(self, end, weight):
    if _fast(self, end, weight) and type(self._data) is np.ndarray:
        w = weight._data if isinstance(weight, Tensor) else weight
        self._data += w * (end._data - self._data)
        self._bump("lerp_")
        return self
    return inplace(self, "lerp_", lambda: lerp(self, end, weight))


def _sqrt_(self):
    if _fast(self) and type(self._data) is np.ndarray and self.dtype.kind == "f":
        np.sqrt(self._data, out=self._data)
        self._bump("sqrt_")
        return self
    return inplace(self, "sqrt_", lambda: self.sqrt())


T.addcmul_, T.addcdiv_, T.lerp_, T.sqrt_ = _addcmul_, _addcdiv_, _lerp_, _sqrt_


def _fill_fn(x, v):
    return fnp.broadcast_to(fnp.astype(v, x.dtype), x.shape)


def fill_(self, value):
    if _fast(self, value) and not isinstance(self._data, Tracer) and _untraced(value):
        self._data[...] = value._data if isinstance(value, Tensor) else value
        self._bump("fill_")
        return self
    v = value if isinstance(value, Tensor) else wrap(np.asarray(value, self.dtype))
    return inplace(self, "fill_", lambda: apply_fn("FillBackward2", _fill_fn, (self, v)))


def _zero_fn(x):
    return fnp.broadcast_to(np.zeros((), x.dtype), x.shape)


def zero_(self):
    if _fast(self) and not isinstance(self._data, Tracer):
        self._data[...] = 0
        self._bump("zero_")
        return self
    return inplace(self, "zero_", lambda: apply_fn("ZeroBackward0", _zero_fn, (self,)))


def _copy_fn(x, src):
    return fnp.broadcast_to(fnp.astype(src, x.dtype), x.shape)


def copy_(self, src, non_blocking=False):
    if not isinstance(src, Tensor):
        src = wrap(np.asarray(src))
    if _fast(self, src) and not isinstance(self._data, Tracer) and not isinstance(src._data,
                                                                                   Tracer):
        _write(self._data, np.broadcast_to(src._data, self._data.shape).astype(self.dtype,
                                                                              copy=False))
        self._bump("copy_")
        return self
    return inplace(self, "copy_", lambda: apply_fn("torch::autograd::CopyBackwards", _copy_fn,
                                                     (self, src)))


T.fill_, T.zero_, T.copy_ = fill_, zero_, copy_


def _resize_checks(self, what):
    if self._requires_grad and GS.enabled:
        raise RuntimeError("cannot resize variables that require grad")
    if isinstance(self._data, Tracer):
        traced_hooks().refuse(f"{what} inside the compiled (or transformed) function",
                              "make a new tensor of the size instead")


def resize_(self, *sizes, memory_format=None):
    """torch's resize_: the tensor takes the new shape; its first elements (row-major) keep
    their values, the rest are zeros (torch leaves them uninitialized). A no-op, without a
    version bump, when the shape is the same. Views of the old storage keep the old one."""
    shape = tuple(sizes[0]) if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)) \
        else tuple(sizes)
    _resize_checks(self, "resize_")
    if shape == tuple(self._data.shape):
        return self
    old = self._data.reshape(-1)
    new = np.zeros(shape, self._data.dtype)
    n = min(old.size, new.size)
    new.reshape(-1)[:n] = old[:n]
    self._data = new
    self._bump("resize_")
    return self


def resize_as_(self, other, memory_format=None):
    return resize_(self, tuple(other.shape))


def set_(self, source=None, storage_offset=0, size=None, stride=None):
    """torch's set_(source): this tensor takes source's values, shape and storage (writes to
    one show in the other); set_() with no source makes it empty. Not recorded: allowed on a
    leaf that requires grad only under no_grad, as torch."""
    if self._requires_grad and GS.enabled:
        if self._grad_fn is None:
            raise RuntimeError(LEAF_INPLACE_MSG)
        raise RuntimeError("functrans: set_() on a tensor with history cannot be recorded; "
                           "use the source tensor itself, or call set_ under no_grad() on a "
                           "leaf")
    if source is None:
        data = np.zeros((0,), self._data.dtype)
    elif not isinstance(source, Tensor):
        raise TypeError("set_(): only a Tensor source is supported (functrans has no separate "
                        "Storage objects): pass the tensor whose storage to share")
    else:
        if source._data.dtype != self._data.dtype:
            raise RuntimeError(f"Expected object of scalar type {D.scalar_name(self.dtype)} but "
                               f"got scalar type {D.scalar_name(source.dtype)} for argument "
                               "'source'")
        data = source._data
        if size is not None:
            data = np.lib.stride_tricks.as_strided(
                data.reshape(-1)[storage_offset:], tuple(size),
                tuple(s * data.itemsize for s in (stride or _row_major(size))))
    self._data = data
    self._bump("set_")
    return self


def _row_major(size):
    st, acc = [], 1
    for n in reversed(tuple(size)):
        st.append(acc)
        acc *= n
    return tuple(reversed(st))


T.resize_, T.resize_as_, T.set_ = resize_, resize_as_, set_


def as_strided(self, size, stride, storage_offset=None):
    """torch's as_strided: a view of the storage under this tensor (its base's, for a view)
    with the given sizes, strides and offset, in elements; its gradient reaches the storage's
    elements it reads (AsStridedBackward0, as torch). The storage must be C-contiguous."""
    base = self._base if self._base is not None else self
    bd = base._data
    if type(bd) is not np.ndarray or not bd.flags.c_contiguous:
        raise NotImplementedError("functrans: as_strided needs a tensor whose storage is a "
                                  "C-contiguous array (not traced data, not a transposed or "
                                  "sliced storage); clone() it first")
    item = bd.itemsize
    if storage_offset is None:                      # this tensor's own offset (torch's)
        storage_offset = (self._data.__array_interface__["data"][0]
                          - bd.__array_interface__["data"][0]) // item
    size, stride = tuple(size), tuple(stride)
    end = storage_offset + sum((n - 1) * st for n, st in zip(size, stride) if n > 0)
    if storage_offset < 0 or (all(size) and end >= bd.size):
        raise RuntimeError(f"setStorage: sizes {list(size)}, strides {list(stride)}, storage "
                           f"offset {storage_offset} require more elements than the storage's "
                           f"{bd.size}")
    flat = bd.reshape(-1)
    idx = np.arange(bd.size, dtype=np.int64)
    pos = np.lib.stride_tricks.as_strided(idx[storage_offset:], size,
                                          tuple(st * idx.itemsize for st in stride)).copy()
    out = apply_fn("AsStridedBackward0", _as_strided_fn, (base, wrap(pos)))
    out._data = np.lib.stride_tricks.as_strided(flat[storage_offset:], size,
                                                tuple(st * item for st in stride))
    _mark_views((base,), [out])
    return out


T.as_strided = as_strided


def _inplace_view(name, view):
    """torch's in-place view ops (transpose_, t_, squeeze_, unsqueeze_, as_strided_): the
    tensor takes the view's shape and strides over its own storage; recorded like any
    in-place op (its history continues through the view's node) and its version bumps."""
    def f(self, *args, **kwargs):
        _check_inplace(self, GS.enabled)
        out = view(self, *args, **kwargs)
        self._data = out._data
        if out._grad_fn is not None:
            self._grad_fn, self._out_nr = out._grad_fn, out._out_nr
        self._bump(name)
        return self
    f.__name__ = name
    f.__doc__ = f"In-place {name[:-1]}: this tensor becomes its {name[:-1]} view."
    return f


for _n in ("transpose", "t", "squeeze", "unsqueeze", "as_strided", "swapdims", "swapaxes"):
    if hasattr(T, _n):
        setattr(T, _n + "_", _inplace_view(_n + "_", getattr(T, _n)))


def _random_inplace(name, sample):
    def f(self, *args, generator=None, **kwargs):
        if GS.enabled and self._requires_grad and self._grad_fn is None:
            raise RuntimeError(LEAF_INPLACE_MSG)
        vals = sample(generator or creation._rng(), self._data.shape, *args, **kwargs)
        _check_inplace(self, False)
        if type(self._data) is np.ndarray and not self._data.flags.writeable:
            raise RuntimeError(OVERLAP_MSG)
        if self._grad_fn is not None and GS.enabled:
            v = wrap(np.asarray(vals, self.dtype))
            return inplace(self, name, lambda: apply_fn("FillBackward0", _copy_fn, (self, v)))
        self._data[...] = vals
        self._bump(name)
        return self
    f.__name__ = name
    return f


T.uniform_ = _random_inplace("uniform_", lambda g, shape, a=0.0, b=1.0: g.uniform(a, b, shape))
T.normal_ = _random_inplace("normal_", lambda g, shape, mean=0.0, std=1.0:
                            g.normal(mean, std, shape))
T.bernoulli_ = _random_inplace("bernoulli_", lambda g, shape, p=0.5: g.random(shape) < p)
T.exponential_ = _random_inplace("exponential_", lambda g, shape, lambd=1.0:
                                 g.exponential(1.0 / lambd, shape))
T.random_ = _random_inplace("random_", lambda g, shape, low=0, high=2 ** 24:
                            g.integers(low, high, shape) if high is not None else
                            g.integers(0, low, shape))
