"""`ft.Tensor`: a device array plus, when it requires grad, the node that produced it.

Eager ops run the primitives' implementations directly on the arrays (NumPy/CuPy); only
while grad mode is on and an input requires grad do they record a node (record.py).
The hot paths (elementwise unary and binary ops) are written out by hand (hot_ops.py);
every other op is a composite of primitive steps, traced once per signature from
functrans.numpy (apply_fn).
The read-only properties, conversions and repr live in the base class (tensor_info.py).
"""
from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import Any
import copy
import warnings
import weakref

import numpy as np

from ..backends.memory import DERIVED
from ..core import (Array, FunctransError, ShapedArray, Tracer, _thread_state as _TS, array_module,
                    value_of)
from ..tree_util import register_pytree_node
from functrans.primitives import elementwise as ew
from functrans.primitives import shape as sh
from functrans.primitives.misc import stop_gradient_p
from . import capture_state
from . import dtypes as D
from . import grad_mode
from .node import HookDict, OpInfo, add_hook
from .record import (INFERENCE, SAVED_HOOKS, composite_for, info_for, make_node,
                     refresh_view, vc_of)
from .placement import _check_device, _on, device as _device, put
from .tensor_info import Size, TensorInfo, _host, _ndarray, to_array
from .tensor_info import NUMPY_GRAD_MSG, _Storage, _format  # noqa: F401  (names this module had)

GS = grad_mode.STATE
EVER = grad_mode.EVER
_new = object.__new__
_asarray = np.asarray
_PYSCALARS = (builtins.float, builtins.int, builtins.bool)

LEAF_INPLACE_MSG = "a leaf Variable that requires grad is being used in an in-place operation."
VIEW_LEAF_INPLACE_MSG = ("a view of a leaf Variable that requires grad is being used in an "
                         "in-place operation.")
NONLEAF_GRAD_WARNING = (
    "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad "
    "attribute won't be populated during autograd.backward(). If you indeed want the .grad "
    "field to be populated for a non-leaf Tensor, use .retain_grad() on the non-leaf Tensor. "
    "If you access the non-leaf Tensor by mistake, make sure you access the leaf Tensor "
    "instead. See github.com/pytorch/pytorch/pull/30531 for more informations.")


def wrap(data):
    """A Tensor around an array, no grad (used for results and gradients); an ft.Array
    (a functrans.numpy result) gives its raw array: Tensors hold raw arrays."""
    if type(data) is Array:
        data = value_of(data)
    t = _new(Tensor)
    t._data = data
    t._grad_fn = None
    t._requires_grad = False
    t._vc = None         # version counter (shared by views), created on first need
    if EVER.inference and GS.inference:
        t._flags = INFERENCE
    return t


SAVED_HOOKS.wrap = wrap


def _as_array(x):
    if type(x) is _ndarray:
        return x
    if isinstance(x, Tracer):       # traced data (ft.compile capture) stays traced
        return x
    if type(x) is not _ndarray and not isinstance(x, np.generic) and hasattr(
            x, "__cuda_array_interface__"):
        return x
    return _asarray(x)


class Tensor(TensorInfo):
    """A multi-dimensional array with PyTorch's autograd semantics."""
    __slots__ = ("_data", "_grad_fn", "_requires_grad", "_vc", "__weakref__", "__dict__")
    # rarely set fields: class-level defaults, set per instance (in __dict__) when needed
    _out_nr = 0          # which output of _grad_fn this tensor is
    _grad = None         # .grad
    _base = None         # the tensor whose storage this view shares
    _accum = None        # AccumulateGrad of a leaf that requires grad
    _hooks = None        # hooks of a leaf
    _flags = 0           # INFERENCE
    __array_priority__ = 1000       # __array_ufunc__: numpy_interop.py

    def __new__(cls, *args, **kwargs):
        return _new(cls)

    def __init__(self, *args, dtype=None, device=None, requires_grad=False):
        """torch.Tensor(data) (float tensor) or torch.Tensor(*sizes) (uninitialized)."""
        if len(args) == 1 and not isinstance(args[0], builtins.int):
            data = to_array(args[0], D.to_dtype(dtype) or D.get_default_dtype())
        else:
            data = np.zeros(tuple(args), D.to_dtype(dtype) or D.get_default_dtype())
        self._data = data
        self._grad_fn = None
        self._requires_grad = False
        self._vc = None
        if GS.inference:
            self._flags = INFERENCE
        if requires_grad:
            self.requires_grad_(True)

    _make = staticmethod(wrap)

    def __array_wrap__(self, array, context=None, return_scalar=False):
        """A result computed from this tensor's values by NumPy or functrans.numpy, as a
        Tensor without history (torch's convention)."""
        return wrap(array if type(array) is _ndarray or isinstance(array, Tracer)
                    else _asarray(array))

    # ------------------------------------------------------------------ autograd state
    @property
    def requires_grad(self):
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, flag):
        self.requires_grad_(flag)

    @requires_grad.deleter
    def requires_grad(self):
        raise RuntimeError("requires_grad must be a bool")

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        if self._grad_fn is not None:
            if not requires_grad:
                raise RuntimeError(
                    "you can only change requires_grad flags of leaf variables. If you want to "
                    "use a computed variable in a subgraph that doesn't require differentiation "
                    "use var_no_grad = var.detach().")
            return self
        if requires_grad and self._data.dtype.kind not in "fc":
            raise RuntimeError("only Tensors of floating point and complex dtype can require "
                               "gradients")
        if requires_grad and self._flags & INFERENCE and not GS.inference:
            raise RuntimeError("Setting requires_grad=True on inference tensor outside "
                               "InferenceMode is not allowed.")
        self._requires_grad = builtins.bool(requires_grad)
        return self

    @property
    def grad_fn(self):
        if self._base is not None and self._requires_grad:
            refresh_view(self)              # regenerated if its base changed in place
        return self._grad_fn

    @property
    def is_leaf(self) -> bool:
        return self._grad_fn is None

    @property
    def grad(self):
        if _TS.depth:                               # inside ft.compile its value would freeze
            traced_hooks().grad_access(self)
        if self._grad_fn is not None and self._grad is None and not self.retains_grad:
            warnings.warn(NONLEAF_GRAD_WARNING, UserWarning, stacklevel=2)
        return self._grad

    @grad.setter
    def grad(self, value):
        if _TS.depth:
            traced_hooks().grad_access(self)
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(f"assigned grad expected to be a Tensor or None but got grad "
                                f"of type {type(value).__name__}")
            if value.dtype != self.dtype:
                raise RuntimeError(
                    f"attempting to assign a gradient with dtype '{value.dtype}' to a tensor "
                    f"with grad_dtype '{self.dtype}'. The gradient must match the tensor's "
                    "grad_dtype (defaults to the tensor's dtype): convert it with "
                    f"grad.to({self.dtype})")
            if tuple(value.shape) != tuple(self.shape):
                raise RuntimeError(
                    f"attempting to assign a gradient of size '{list(value.shape)}' to a tensor "
                    f"of size '{list(self.shape)}'. Please ensure that the gradient and the "
                    "tensor are the same size")
        self._grad = value

    @grad.deleter
    def grad(self):
        self._grad = None

    @property
    def retains_grad(self):
        fn = self._grad_fn
        if fn is None or not fn.retains:
            return False
        r = fn.retains.get(self._out_nr)
        return r is not None and r() is self

    def retain_grad(self) -> None:
        """Populate .grad of this non-leaf tensor during backward (accumulating)."""
        if not self._requires_grad:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if isinstance(self._data, Tracer):
            traced_hooks().refuse("retain_grad() on a tensor computed inside the compiled (or "
                                  "transformed) function", "call retain_grad() on a tensor the "
                                  "function returns, outside it")
        fn = self._grad_fn
        if fn is None:
            return
        if fn.retains is None:
            fn.retains = {}
        fn.retains[self._out_nr] = weakref.ref(self)

    @property
    def _version(self):
        vc = self._vc
        return 0 if vc is None else vc.v

    def _bump(self, op=None):
        vc = self._vc or vc_of(self)
        if _TS.depth and type(self._data) is _ndarray:     # ft.compile: a concrete update
            traced_hooks().concrete_update(self, op)
        vc.v += 1
        vc.op = op

    def is_inference(self):
        return builtins.bool(self._flags & INFERENCE)

    @property
    def output_nr(self):
        return self._out_nr

    @property
    def _base_tensor(self):
        return self._base

    @property
    def is_view(self):
        return self._base is not None

    def _is_view(self):
        """True for a view of another tensor's storage (torch's Tensor._is_view())."""
        return self._base is not None

    def register_hook(self, hook: Callable[[Tensor], Tensor | None]) -> Any:
        """hook(grad) -> Tensor or None, called with this tensor's gradient; a returned
        tensor replaces it. Returns a handle with .remove()."""
        if not self._requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if isinstance(self._data, Tracer):           # traced data
            return traced_hooks().register_hook(self, hook)
        fn = self._grad_fn
        if fn is None:
            if self._hooks is None:
                self._hooks = HookDict()
            return add_hook(self._hooks, hook)
        if fn.hooks is None:
            fn.hooks = {}
        d = fn.hooks.get(self._out_nr)
        if d is None:
            d = fn.hooks[self._out_nr] = HookDict()
        return add_hook(d, hook)

    def register_post_accumulate_grad_hook(self, hook):
        """hook(tensor) called after the gradient has been accumulated into a leaf's .grad."""
        if self._grad_fn is not None:
            raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf "
                               "tensors")
        if not self._requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        d = self.__dict__.get("_post_hooks")
        if d is None:
            d = self.__dict__["_post_hooks"] = HookDict()
        return add_hook(d, hook)

    # ------------------------------------------------------------------ aliasing
    def detach(self) -> Tensor:
        """A tensor sharing storage and version counter, cut from the graph."""
        if type(self._data) is not _ndarray and isinstance(self._data, Tracer):
            return traced_hooks().detached_alias(self)                # traced data
        t = wrap(self._data)
        t._vc = vc_of(self)
        t._base = self._base if self._base is not None else None
        t._flags = self._flags
        return t

    def detach_(self):
        if self._base is not None and self._base._requires_grad:
            raise RuntimeError("Can't detach views in-place. Use detach() instead.")
        self._grad_fn = None
        self._out_nr = 0
        self._requires_grad = False
        if type(self._data) is not _ndarray and isinstance(self._data, Tracer):
            self._data = traced_hooks().stop_gradient(self._data)     # traced data
        return self

    @property
    def data(self):
        if type(self._data) is not _ndarray and isinstance(self._data, Tracer):
            return traced_hooks().detached_alias(self)                # traced data
        t = wrap(self._data)
        return t

    @data.setter
    def data(self, value):
        if not isinstance(value, Tensor):
            raise TypeError("data must be a Tensor")
        if self._requires_grad and value._data.dtype.kind not in "fc":
            raise RuntimeError("data set to a tensor that requires gradients must be floating "
                               "point or complex dtype")
        self._data = value._data

    @data.deleter
    def data(self):
        raise RuntimeError("Deleting tensor data is not allowed. Delete tensor instead!")

    @property
    def volatile(self):
        """Removed in torch (always False), with its warning."""
        warnings.warn("volatile was removed (Variable.volatile is always False)", UserWarning,
                      stacklevel=2)
        return False

    def clone(self, memory_format: Any = None) -> Tensor:
        return _fn1("CloneBackward0", _copy, self)

    def contiguous(self, memory_format=None):
        if isinstance(self._data, Tracer) or self.is_contiguous(memory_format):
            return self
        out = self.clone()
        axes = None if memory_format is None else memory_format.axes(out._data.ndim)
        if axes is not None:            # channels_last: same values, the strides of its order
            out._data = np.ascontiguousarray(out._data.transpose(axes)).transpose(
                np.argsort(axes))
        return out

    # ------------------------------------------------------------------ devices and dtypes
    def to(self, *args: Any, **kwargs: Any) -> Tensor:
        device, dtype, copy = parse_to(args, kwargs)
        out = self
        if dtype is not None and dtype != self.dtype:
            out = _convert(out, dtype)
        if device is not None and device.type != out.device.type:
            out = _to_device(out, device)
        if copy and out is self:
            out = self.clone()
        return out

    def cpu(self) -> Tensor:
        return self.to("cpu")

    def cuda(self, device: Any = None) -> Tensor:
        return self.to("cuda")

    def type(self, dtype=None):
        if dtype is None:
            return "torch." + D.type_name(self.dtype)
        return self.to(D.to_dtype(dtype))

    def type_as(self, other):
        return self.to(other.dtype)

    def float(self) -> Tensor:
        return self.to(D.float32)

    def double(self) -> Tensor:
        return self.to(D.float64)

    def half(self):
        return self.to(D.float16)

    def bfloat16(self):
        D.bfloat16.refuse("a tensor with bfloat16()")

    def int(self):
        return self.to(D.int32)

    def long(self):
        return self.to(D.int64)

    def bool(self):
        return self.to(D.bool)

    def short(self):
        return self.to(D.int16)

    def byte(self):
        return self.to(D.uint8)

    def new_tensor(self, data, dtype=None, device=None, requires_grad=False):
        return tensor(data, dtype=dtype or self.dtype, requires_grad=requires_grad)

    def new_zeros(self, *size, dtype=None, device=None, requires_grad=False):
        return _factory(np.zeros, size, dtype or self.dtype, requires_grad)

    def new_ones(self, *size, dtype=None, device=None, requires_grad=False):
        return _factory(np.ones, size, dtype or self.dtype, requires_grad)

    def new_empty(self, *size, dtype=None, device=None, requires_grad=False):
        return _factory(np.zeros, size, dtype or self.dtype, requires_grad)

    def new_full(self, size, fill_value, dtype=None, device=None, requires_grad=False):
        t = wrap(np.full(tuple(size), fill_value, dtype=dtype or self.dtype))
        return t.requires_grad_(requires_grad) if requires_grad else t

    # ------------------------------------------------------------------ copying, pickling
    def __deepcopy__(self, memo):
        if self._grad_fn is not None:
            raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) "
                               "support the deepcopy protocol at the moment.  If you were "
                               "attempting to deepcopy a module, this may be because of a "
                               "torch.nn.utils.weight_norm usage, see "
                               "https://github.com/pytorch/pytorch/pull/103001")
        if id(self) in memo:
            return memo[id(self)]
        new = type(self).__new__(type(self))
        new._data = self._data.copy()
        new._grad_fn = None
        new._requires_grad = self._requires_grad
        new._vc = None
        memo[id(self)] = new
        if self._grad is not None:
            new._grad = copy.deepcopy(self._grad, memo)
        for k, v in self.__dict__.items():
            if k not in ("_accum", "_base", "_hooks", "_grad", "_out_nr"):
                new.__dict__[k] = copy.deepcopy(v, memo)
        return new

    def __reduce_ex__(self, protocol):
        if self._grad_fn is not None:
            raise RuntimeError("Cowardly refusing to serialize non-leaf tensor which requires_"
                               "grad, since autograd does not support crossing process "
                               "boundaries.  If you just want to transfer the data, call "
                               "detach() on the tensor before serializing (e.g., putting it "
                               "on the queue).")
        return (_rebuild_tensor, (type(self), _host(self._data), self._requires_grad))


def _rebuild_tensor(cls, data, requires_grad):
    t = cls.__new__(cls)
    t._data = data
    t._grad_fn = None
    t._requires_grad = requires_grad
    t._vc = None
    return t


def parse_to(args, kwargs):
    """(device, dtype, copy) from torch's `to` signatures, shared by Tensor.to and
    Module.to: to(device), to(dtype), to(tensor), to(device, dtype), keywords; an int
    is a CUDA index as in torch."""
    kwargs = dict(kwargs)
    dev = kwargs.pop("device", None)
    dtype = kwargs.pop("dtype", None)
    copy = kwargs.pop("copy", False)
    kwargs.pop("non_blocking", None)
    kwargs.pop("memory_format", None)
    if kwargs:
        raise TypeError(f"to() got unexpected keyword arguments {sorted(kwargs)}")
    for a in args:
        if isinstance(a, Tensor):
            dtype, dev = a.dtype, a.device
        elif isinstance(a, builtins.bool):
            copy = a
        elif a is None:
            continue
        elif isinstance(a, builtins.int):
            dev = f"cuda:{a}"
        elif isinstance(a, _device) or (isinstance(a, str) and a.split(":")[0] in ("cpu",
                                                                                   "cuda")):
            dev = a
        else:
            dtype = a
    if isinstance(dtype, D.UnsupportedDtype):
        dtype.refuse("a tensor with to()")
    try:
        dtype = D.to_dtype(dtype)
    except TypeError:
        raise TypeError(f"to() received an invalid combination of arguments: {dtype!r} is "
                        "neither a device nor a dtype") from None
    return (None if dev is None else _device(dev)), dtype, copy


def tensor(data, dtype=None, device=None, requires_grad=False, pin_memory=False):
    """A new leaf tensor copying data (torch.tensor)."""
    _check_device(device)
    t = _on(wrap(to_array(data, D.to_dtype(dtype))), device)
    return t.requires_grad_(True) if requires_grad else t


def _factory(f, size, dtype, requires_grad):
    if len(size) == 1 and isinstance(size[0], (tuple, list, Size)):
        size = tuple(size[0])
    t = wrap(f(tuple(size), dtype=D.to_dtype(dtype)))
    return t.requires_grad_(True) if requires_grad else t


# ---------------------------------------------------------------------------
# everything else: composite ops of primitive steps, traced once per signature

_SCALAR_DTYPES = {builtins.float: np.dtype(np.float64), builtins.int: np.dtype(np.int64),
                  builtins.bool: np.dtype(np.bool_), builtins.complex: np.dtype(np.complex128)}


def apply_fn(name, fn, args, static=(), view=False, save=False):
    """Run fn (a functrans.numpy function of arrays) on tensors/scalars as one facade op
    named `name` (its grad_fn). static: hashable keyword arguments of fn. Python scalars are
    runtime inputs (weakly typed, full precision). save: the node keeps the float
    intermediates its backward reads instead of recomputing them from its inputs (an op
    whose recomputation would repeat a matrix product). Returns a Tensor or a tuple of
    Tensors."""
    arrays = []
    sig = [fn, static]
    rg = False
    cpu = True
    for a in args:
        if isinstance(a, Tensor):
            d = a._data
            arrays.append(d)
            sig.append(d.shape)
            sig.append(d.dtype)
            if a._requires_grad:
                rg = True
            if type(d) is not _ndarray:
                cpu = False
        else:
            dt = _SCALAR_DTYPES.get(type(a))
            if dt is not None:
                arrays.append(dt.type(a))
                sig.append(dt)
                sig.append(None)                 # weak
            else:
                d = _as_array(a)
                arrays.append(d)
                sig.append(d.shape)
                sig.append(d.dtype)
                if type(d) is not _ndarray:
                    cpu = False
    key = ("composite", tuple(sig))
    comp = DERIVED.get(key)
    if comp is None:
        comp = composite_for(key[1], fn, static, _avals_of(args, arrays))
    if not cpu and any(isinstance(d, Tracer) for d in arrays):
        return traced_hooks().apply_composite(name, comp, args, arrays, view)
    info = None
    if rg and GS.enabled and comp.any_float:    # before evaluating: it may add residuals
        info = composite_info(comp, name, args, save=save)
    vals = comp.evaluate(np if cpu else array_module(*arrays), arrays, view)
    outs = []
    for s in comp.out_slots:
        v = vals[s]
        if type(v) is not _ndarray:
            v = _as_array(v)
            vals[s] = v
        elif not view and _aliases(v, arrays):
            v = vals[s] = v.copy()       # only view ops may return storage of their inputs
        outs.append(wrap(v))
    if view and _mark_views(args, outs, name if comp.out_tree is not None else None,
                            name) is False:
        info = None                     # a view of an inference tensor: no history
    if info is not None:
        make_node(info, args, vals, outs)
    if comp.out_tree is None:
        return outs[0]
    return tuple(outs)


def _vmapping():
    """True inside a vmap (a batching trace is on the stack)."""
    for main in _TS.trace_stack:
        if main.trace_type.__name__ == "BatchTrace":
            return True
    return False


def traced_hooks():
    """The facade's one seam with tracing: what facade code does with traced data (and
    the few things a capture must see: tensors created, .grad read, concrete updates,
    module hooks, backward passes). ft.compile's capture hooks while a capture runs on this
    thread (capture_state), else plain tracing (`TRACING`)."""
    cap = capture_state.active()
    return TRACING if cap is None else cap.hooks



def bind_broadcast(prim, params, args):
    """An elementwise primitive bound on traced data (NumPy broadcasting made explicit)."""
    shapes = [np.shape(a) for a in args]
    if len(set(shapes)) > 1:
        shape = np.broadcast_shapes(*shapes)
        nd = len(shape)
        args = [a if np.shape(a) in ((), shape) else sh.broadcast_in_dim(
            a, shape=shape, broadcast_dimensions=tuple(range(nd - np.ndim(a), nd)))
            for a in args]
    return prim.bind(*args, **params)


def bind_composite(comp, arrays):
    """A composite op's steps bound on traced arrays: (every slot's value, the outputs
    wrapped as Tensors); as traced, without residual forms (see composite_info)."""
    vals = list(arrays) + [None] * (len(comp.slot_avals) - comp.n_in)
    for st in comp.steps:
        ins = [vals[r] if type(r) is int else r.val for r in st.refs]
        out = st.prim.bind(*ins, **st.params)
        for o, v in zip(st.outs, out if st.prim.multiple_results else [out]):
            vals[o] = v
    return vals, [wrap(vals[s]) for s in comp.out_slots]


class PlainTracing:
    """Tensor ops on traced data outside ft.compile (a Tensor handed to a function by ft.grad,
    ft.vmap, ft.jit, ...): every op binds its primitives, the results are Tensors around the
    traced values, and no autograd node is recorded (the transformation differentiates)."""
    records = False
    bind = staticmethod(bind_broadcast)

    @staticmethod
    def refuse(what, fix):
        raise FunctransError(f"a Tensor holding a traced value (inside ft.grad, ft.vmap, ft.jit "
                             f"or another transformation) cannot be used for {what}; {fix}.")

    @staticmethod
    def after_op(args, outs):
        pass

    @staticmethod
    def as_tensor(x):
        return x

    @staticmethod
    def grad_access(t):
        """.grad of a Tensor while tracing: its concrete value, as in eager code."""

    @staticmethod
    def concrete_update(t, op):
        """An in-place update of concrete data while tracing happens then, as in JAX."""

    @staticmethod
    def created(t):
        """A tensor made by a creation function: nothing to note."""

    @staticmethod
    def rng(facade_gen, np_gen):
        """The generator a random draw uses. Inside ft.jit (or make_jaxpr, or a vmap of
        Tensors) a draw would happen once, at trace time, and every call would reuse it:
        refused, saying what to do (ft.compile draws at every call)."""
        if _TS.dynamic_trace.level or _vmapping():
            raise RuntimeError(
                "a random draw from the global generator (ft.rand, randn, randint, dropout, "
                "...) inside ft.jit, make_jaxpr or vmap would be made once when the function "
                "is traced and reused at every call (and shared across a vmapped batch). Use "
                "ft.compile(fn), which draws at every call; or pass the random values in as "
                "arguments; or use ft.random with explicit keys; or call model.eval() for "
                "dropout.")
        return np_gen

    @staticmethod
    def module_hooks(module, kind, hooks, parts, fire):
        """A module's forward (pre-)hooks on one call: they run now."""
        return fire(module, kind, hooks, *parts)

    @staticmethod
    def module_backward_hook(bw, side, value):
        """A module's full backward hooks: set up on its inputs or outputs now."""
        return bw.setup_input_hook(value) if side == "input" else bw.setup_output_hook(value)

    @staticmethod
    def accumulate(t):
        """.grad accumulation while tracing: allowed (the gradients are concrete)."""

    @staticmethod
    def run_program(prog, nodes, hooked, fns, vals, root_cts, create_graph):
        PlainTracing.refuse("a backward pass through autograd history recorded outside the "
                            "transformation", "differentiate with the transformation "
                            "itself (ft.grad, ft.vjp) or call backward outside it")

    @staticmethod
    def stop_gradient(x):
        return stop_gradient_p.bind(x)

    @staticmethod
    def detached_alias(t):
        """detach() / .data: the value with no derivative (as torch.func treats detach)."""
        return wrap(stop_gradient_p.bind(t._data))

    @staticmethod
    def register_hook(t, hook):
        PlainTracing.refuse("register_hook", "use ft.custom_vjp to change a derivative inside "
                            "a transformation")

    @staticmethod
    def apply_composite(name, comp, args, arrays, view):
        _, outs = bind_composite(comp, arrays)
        return outs[0] if comp.out_tree is None else tuple(outs)

    @staticmethod
    def inplace(t, name, res):
        """An in-place op on traced data: the Tensor takes the new value (functionally)."""
        data, out = t._data, res._data
        if not isinstance(data, Tracer):
            PlainTracing.refuse(f"in-place {name} writing a traced value into a Tensor that "
                                "is not an input of the transformation (a module buffer or a "
                                "global)", "pass it as an argument, or use the out-of-place op")
        if np.shape(out) != data.shape:
            raise RuntimeError(f"output with shape {list(data.shape)} doesn't match the "
                               f"broadcast shape {list(np.shape(out))}")
        if out.dtype != data.dtype:
            out = ew.convert_element_type(out, new_dtype=data.dtype, weak_type=False)
        t._data = out
        t._bump(name)
        return t


TRACING = PlainTracing()


def _avals_of(args, arrays):
    avals = []
    for a, d in zip(args, arrays):
        if not isinstance(a, Tensor) and type(a) in _SCALAR_DTYPES:
            avals.append(ShapedArray((), d.dtype, weak_type=True))
        else:
            avals.append(ShapedArray(d.shape, d.dtype))
    return avals


def _aliases(v, arrays):
    """Does the fresh-looking result v share storage with an input?"""
    for a in arrays:
        if v is a:
            return True
    if v.base is None:
        return False
    for a in arrays:
        if type(a) is _ndarray and np.may_share_memory(v, a):
            return True
    return False


def composite_info(comp, name, args, forms=True, save=False):
    """The OpInfo of composite comp recorded as `name` on these arguments (their
    requires-grad mask), made once per mask; made before the forward is evaluated, as it
    may give a step a residual form (Composite.companions). forms=False: without (a
    traced forward, which ft.compile differentiates as a whole: its partial evaluation
    makes the scan's known part itself). save: its float intermediates may be saved
    (OpInfo's save_intermediates)."""
    mask = tuple([isinstance(a, Tensor) and a._requires_grad for a in args])
    key = (name, mask, save) if forms else (name, mask, "traced")
    info = comp.infos.get(key)
    if info is None:
        info = info_for((comp,) + key, lambda: _composite_info(name, comp, mask, forms, save),
                        comp.infos, key)
    return info


def _composite_info(name, comp, mask, forms=True, save=False):
    companions = comp.companions(mask) if forms else ()   # (may add slots to comp)
    return OpInfo(name, comp.steps, comp.n_in, comp.out_slots, comp.slot_avals, mask,
                  save_intermediates=save, companions=companions)


def _mark_views(args, outs, multi=None, name=None):
    """The outputs of a view op that alias its first argument's storage become views of its
    base, sharing the version counter. An identity view (x[:], x.view(x.shape), a no-op
    squeeze) may come back as the input's own array: a view too, as in torch.
    multi: the op's name when it returns several views (unbind, split): an in-place op on
    one of them, or on a view of one (named after the op `name` that took it), cannot be
    recorded (inplace._inplace_on_view refuses it, as torch)."""
    base = args[0]
    if base._flags & INFERENCE:
        # a view of an inference tensor is an inference tensor without history that does
        # not require grad, not tracked as a view (torch: it has no version counter)
        for o in outs:
            o._grad_fn, o._requires_grad, o._flags = None, False, INFERENCE
        return False
    b = base._base if base._base is not None else base
    vc = vc_of(base)
    bd = base._data
    for k, o in enumerate(outs):
        d = o._data
        if type(d) is _ndarray and (d is bd or d.base is not None
                                    and np.may_share_memory(d, bd)):
            o._base = b
            o._vc = vc
            o._flags = base._flags
            if b._requires_grad:
                o.__dict__["_vfn"] = b._grad_fn
                if not GS.enabled:           # an in-place write with grad on is refused
                    o.__dict__["_nograd_view"] = True
                    if GS.inference:         # torch: it requires grad as its base, a leaf
                        o.__dict__["_nograd_view"] = "inference"
                        o._requires_grad = True
                if multi is not None:
                    o.__dict__["_multi_view"] = (multi, k)
                elif "_multi_view" in base.__dict__:     # a view of such a view
                    o.__dict__["_multi_view"] = (name, k)
            else:
                if vc.views is None:
                    vc.views = []
                vc.views.append(weakref.ref(o))
                if multi is not None:        # refused too if what it receives requires grad
                    o.__dict__["_multi_view"] = (multi, k)


def _fn1(name, fn, x, **static):
    return apply_fn(name, fn, (x,), tuple(sorted(static.items())))


_ATOMS = (builtins.int, builtins.float, builtins.bool, str, type(None), np.dtype)


def _freeze(v):
    """Make an argument hashable (lists become tuples, slices tuples)."""
    t = type(v)
    if t in _ATOMS:
        return v
    if t is list or t is tuple:
        if t is tuple and all(type(w) in _ATOMS for w in v):
            return v
        return tuple(_freeze(w) for w in v)
    if t is slice:
        return ("__slice__", v.start, v.stop, v.step)
    return v


def static(**kw):
    """The static (hashable) keyword arguments of a composite op, in call order."""
    return tuple([(k, _freeze(v)) for k, v in kw.items()])


def _copy(x):
    return ew.convert_element_type(x, new_dtype=np.dtype(x.dtype), weak_type=False)


def _to_device(t, device):
    """A copy of t on device (not differentiable yet: refuse while recording)."""
    if t._requires_grad and GS.enabled:
        raise NotImplementedError(
            "functrans: moving a tensor that requires grad to another device is not "
            "differentiable yet; move parameters and inputs (e.g. module.to(device)) before "
            "computing with them, or detach().")
    out = wrap(put(t._data, device))
    if t._requires_grad and t._grad_fn is None:
        out._requires_grad = True
    return out


def _convert(t, dtype):
    dtype = D.to_dtype(dtype)
    return _fn1("ToCopyBackward0", _astype, t, dtype=dtype)


def _astype(x, dtype):
    return ew.convert_element_type(x, new_dtype=dtype, weak_type=False)



# ---------------------------------------------------------------------------
# Tensor as a pytree node: every transformation takes and returns Tensors

def _tensor_children(t):
    return (t._data,), None


def _tensor_from(aux, children):
    """A Tensor (no history) around the leaf. A leaf that is itself a Tensor or a container
    (a Jacobian's block per input) is returned as is: the Tensor node dissolves into it."""
    x = children[0]
    if type(x) is Array:               # a jitted function's output: Tensors hold raw arrays
        x = value_of(x)
    if isinstance(x, Tracer):
        x = traced_hooks().as_tensor(x)   # ft.compile: its own values come out detached
        return x if isinstance(x, Tensor) else wrap(x)
    if type(x) is _ndarray or isinstance(x, (np.generic, *_PYSCALARS, complex)) or hasattr(
            x, "__cuda_array_interface__"):
        return wrap(_asarray(x) if not hasattr(x, "__cuda_array_interface__") else x)
    return x


TENSOR_PYTREE = (_tensor_children, _tensor_from)
register_pytree_node(Tensor, *TENSOR_PYTREE)
