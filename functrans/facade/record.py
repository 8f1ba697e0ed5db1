"""Recording facade ops as graph nodes: signatures, primitive steps, composite ops.

An op's *signature* (what it computes, its input shapes/dtypes, which inputs require
grad) maps to one cached `OpInfo` (kept in backends.memory.DERIVED): its primitive steps
and the slots its backward reads, found once from what each step's backward equation
reads (lower.analyze; no whole-op derivation). Recording a node is then a dict lookup, a
few attribute writes and references to the held arrays.

Composite ops (`apply_fn`) are functions written with functrans.numpy; they are traced
into steps once per signature and run eagerly by the runtime, so the intermediate values
they compute are the ones backward reads.
"""
from __future__ import annotations

import functools
import sys
import threading
import traceback
from typing import Any

import numpy as np

from ..backends.memory import DERIVED, EQN_BYTES, approx_bytes
from ..core import (ClosedJaxpr, Jaxpr, JaxprEqn, Literal, ShapedArray, Tracer, Var,
                    keeping_dtypes)
from ..reverse import residual_form
from ..runtime import run as run_program
from ..runtime import straight_line
from ..tracing import trace_to_jaxpr
from functrans.primitives import elementwise as ew
from functrans.primitives import shape as sh
from . import grad_mode
from .lower import analyze
from .plumbing import FREED_MSG
from .node import (_INTERNAL_CODES, SAVED_ACCESS, OpInfo, Step, _seq, call_site, edge_of,
                   held_counter, node_class, user_frame, with_value, without_slot)
from .tensor_info import TensorInfo   # (the base of Tensor, which sits above this module)

GS = grad_mode.STATE
INFERENCE = 1
_new = object.__new__
_getframe = sys._getframe


class VersionCounter:
    """Shared by a tensor, its views and its detached aliases; bumped by in-place ops.

    views: weak references to the views taken while their base did not require grad (None
    if none): an in-place op that gives the base a history makes them require grad too
    (inplace.adopt_views), as torch regenerates every view's history from its base's."""
    __slots__ = ("v", "op", "views")

    def __init__(self):
        self.v = 0
        self.op = None
        self.views = None


def vc_of(t):
    vc = t._vc
    if vc is None:
        vc = t._vc = VersionCounter()
    return vc


class _Anomaly:
    enabled = False
    check_nan = True


ANOMALY = _Anomaly()

class _SavedHooks(threading.local):
    """The saved-tensor hooks in effect on this thread (autograd.graph.saved_tensors_hooks),
    innermost last, and the message of a disable_saved_tensors_hooks block (None: none);
    `wrap` (array -> Tensor, for the pack hooks of saved intermediates) is set by
    tensor.py, which sits above this module."""
    wrap: Any = None

    def __init__(self):
        self.stack = []
        self.disabled = None
        self.writing = None     # the tensor an in-place op is about to write (inplace.py)


SAVED_HOOKS = _SavedHooks()


class _HooksEver:
    """Whether saved-tensor hooks were ever entered, on any thread (set once, never reset:
    autograd.graph.saved_tensors_hooks sets it): until then recording skips reading
    SAVED_HOOKS.stack, a thread-local read per op."""
    on = False


SAVED_HOOKS_EVER = _HooksEver()


class _WriteWatch:
    """`fn(tensor)`, called before any in-place write into a tensor's storage (every
    in-place op asks inplace._fast or inplace._check_inplace first), or None: how
    autograd.graph.allow_mutation_on_saved_tensors clones a saved value before it changes."""
    fn: Any = None


WRITE_WATCH = _WriteWatch()


class Packed:
    """A value saved for backward through a pack hook: what the hook returned and the
    unpack hook that gives the tensor back when backward reads it."""
    __slots__ = ("obj", "unpack", "aval")

    def __init__(self, obj, unpack, aval):
        self.obj, self.unpack, self.aval = obj, unpack, aval


def pack_saved(v, t):
    """v (an array about to be saved; t the Tensor holding it, or None) through the
    innermost pack hook: a Packed, or v when no hook is in effect."""
    pack, unpack = SAVED_HOOKS.stack[-1]
    return pack_with(pack, unpack, v, t)


PACK_INPLACE_MSG = (
    "A saved tensor pack hook is modifying its input in place. Tensors provided as input to "
    "pack hook can not be modified by in-place operations as this can lead to unexpected "
    "side-effects. Please open an issue if you need to perform in-place operations on the "
    "input to a pack hook.")


def pack_with(pack, unpack, v, t):
    """v (an array; t the Tensor holding it, or None) packed by `pack`, called as torch
    calls it: with grad mode off, no saved-tensor hooks in effect (what it computes saves
    its values plainly), and refusing a hook that modifies its input in place."""
    stack, enabled = SAVED_HOOKS.stack, GS.enabled
    SAVED_HOOKS.stack, GS.enabled = [], False
    try:
        t = t if t is not None else SAVED_HOOKS.wrap(v)
        vc = t._vc
        if vc is None:
            vc = t._vc = VersionCounter()
        before = vc.v
        obj = pack(t)
        if vc.v != before:
            raise RuntimeError(PACK_INPLACE_MSG)
    finally:
        SAVED_HOOKS.stack, GS.enabled = stack, enabled
    return Packed(obj, unpack, (v.shape, v.dtype))


def unpack_saved(p):
    """The array of a Packed: its unpack hook's Tensor, checked against what was saved."""
    t = p.unpack(p.obj)
    data = getattr(t, "_data", None)
    if data is None:
        raise TypeError("Output of saved tensor unpack_hook expected to be a Tensor but got "
                        f"result of type {type(t).__name__}")
    if (data.shape, data.dtype) != p.aval:
        raise RuntimeError(f"saved tensor unpack_hook returned a tensor of shape "
                           f"{tuple(data.shape)} and dtype {data.dtype}, but the saved one was "
                           f"{tuple(p.aval[0])} {p.aval[1]}")
    return data


def saved_value(n, s):
    """Node n's saved value at slot s, unpacked when a hook packed it."""
    v = n.vals[s]
    return unpack_saved(v) if type(v) is Packed else v


# ---------------------------------------------------------------------------
# saved values by torch's names: grad_fn._saved_self, grad_fn._raw_saved_result, ...

# the names of an op's tensor arguments where they are not ("self",) or ("self", "other")
_ARG_NAMES = {
    "PowBackward1": ("self", "exponent"),
    "MmBackward0": ("self", "mat2"),
    "BmmBackward0": ("self", "mat2"),
    "AddmmBackward0": ("self", "mat1", "mat2"),
    "AddcmulBackward0": ("self", "tensor1", "tensor2"),
    "AddcdivBackward0": ("self", "tensor1", "tensor2"),
    "WhereBackward0": ("condition", "self", "other"),
    "LerpBackward1": ("self", "end", "weight"),
}


def saved_slot(info, name):
    """The slot of node values torch calls `name` (self, other, result, result0, ...), if
    the op's backward reads it (lower.analyze decided what the op keeps); else None."""
    names = _ARG_NAMES.get(info.name) or {1: ("self",), 2: ("self", "other")}.get(info.n_in, ())
    if name in names:
        s = names.index(name)
    elif name == "result" and len(info.out_slots) == 1:
        s = info.out_slots[0]
    elif name.startswith("result") and name[6:].isdigit() and \
            int(name[6:]) < len(info.out_slots) > 1:
        s = info.out_slots[int(name[6:])]
    else:
        return None
    return s if s in info.held_set else None


def _saved_attr(node, name):
    raw = name.startswith("_raw_saved_")
    info = node.info
    s = saved_slot(info, name[11:] if raw else name[7:]) if info is not None and \
        info.kind == "prim" else None
    if s is None:
        raise AttributeError(f"'{type(node).__name__}' object has no attribute '{name}'")
    if node.vals is None:
        raise RuntimeError(FREED_MSG)
    if raw:
        st = object.__new__(SavedTensor)
        st._node, st._slot = node, s
        return st
    return saved_tensor(node, s)


SAVED_ACCESS.get = _saved_attr


def saved_tensor(node, s):
    """Node's saved value at slot s as torch's SavedVariable unpacks it: the leaf itself for
    a leaf input saved as is; else a Tensor of the value (the unpack hook's, for a packed
    one) with the original's place in the graph (its grad_fn and output index) and, when not
    packed, the original's version counter."""
    v = node.vals[s]
    if v is None:
        raise RuntimeError(FREED_MSG)
    info = node.info
    packed = type(v) is Packed
    e = node.edges[s] if s < info.n_in else (node, info.out_slots.index(s))
    if e is not None and e[0].info is None and not packed:
        leaf = e[0].variable
        if leaf is not None:
            return leaf
    t = SAVED_HOOKS.wrap(unpack_saved(v) if packed else v)
    if e is not None and e[0].info is not None:
        t._grad_fn, t._out_nr, t._requires_grad = e[0], e[1], True
    vc = None if packed else held_counter(node.vers, s)
    if vc is not None:
        t._vc = vc
    return t


class SavedTensor:
    """torch.autograd.SavedTensor: a value a node saved for backward
    (grad_fn._raw_saved_self), on which pack/unpack hooks may be registered afterwards."""
    __slots__ = ("_node", "_slot")

    def __init__(self, *args, **kwargs):
        raise RuntimeError("Trying to create a SavedTensor object from Python is forbidden.")

    def register_hooks(self, pack_hook, unpack_hook):
        """pack_hook(tensor) now, unpack_hook(packed) -> Tensor whenever backward (or
        grad_fn._saved_*) reads the value."""
        node, s = self._node, self._slot
        if node.vals is None:
            raise RuntimeError(FREED_MSG)
        if type(node.vals[s]) is Packed:
            raise RuntimeError("SavedTensor hooks have already been set on this saved tensor: "
                               "register_hooks can be called once per saved tensor.")
        if not callable(pack_hook) or not callable(unpack_hook):
            raise TypeError("register_hooks expects two callables: pack_hook(tensor) and "
                            "unpack_hook(packed)")
        t = saved_tensor(node, s)
        v = node.vals[s]
        node.vals = with_value(node.vals, s, pack_with(pack_hook, unpack_hook, v, t))
        # the hooks own a packed value: its version is no longer checked (torch's rule)
        node.vers = without_slot(node.vers, s)
        node.own_packs = True


INFERENCE_SAVE_MSG = ("Inference tensors cannot be saved for backward. To work around you can "
                      "make a clone to get a normal tensor and use it in autograd.")

# ---------------------------------------------------------------------------
# building steps


class StepBuilder:
    """Accumulates primitive steps over slots, computing each new slot's aval."""

    def __init__(self, in_avals):
        self.avals = list(in_avals)
        self.steps = []

    def add(self, prim, params, *refs):
        in_avals = [self.avals[r] if type(r) is int else r.aval for r in refs]
        out = prim.abstract_eval(*in_avals, **params)
        outs = out if prim.multiple_results else [out]
        first = len(self.avals)
        self.avals.extend(outs)
        idx = tuple(range(first, first + len(outs)))
        self.steps.append(Step(prim, params, refs, idx))
        return idx if prim.multiple_results else idx[0]

    def convert(self, r, dtype):
        if self.avals[r].dtype == dtype:
            return r
        return self.add(ew.convert_element_type_p, {"new_dtype": dtype, "weak_type": False}, r)

    def broadcast(self, r, shape):
        a = self.avals[r]
        if a.shape == tuple(shape) or a.shape == ():
            return r
        nd = len(shape)
        dims = tuple(range(nd - a.ndim, nd))
        return self.add(sh.broadcast_in_dim_p, {"shape": tuple(shape),
                                                "broadcast_dimensions": dims}, r)

    def info(self, name, n_in, out_slots, mask):
        return OpInfo(name, self.steps, n_in, out_slots, self.avals, mask)


def aval_of_value(v):
    if type(v) is np.ndarray:
        return ShapedArray(v.shape, v.dtype)
    return ShapedArray(np.shape(v), np.asarray(v).dtype if not hasattr(v, "dtype") else v.dtype)


def info_for(key, build, front=None, fkey=None):
    """The OpInfo of a signature (key), kept in DERIVED as ("op", key): built and analyzed
    the first time. front: the caller's own table answering hits on its hot path
    (front[fkey] = the info), from which DERIVED removes it when it evicts the entry."""
    k = ("op", key)
    info = DERIVED.get(k)
    if info is None:
        with keeping_dtypes():  # torch's dtypes: the rules derived here keep float64
            info = build()
            analyze(info)
        DERIVED.put(k, info, approx_bytes(key) + info.approx_bytes(),
                    None if front is None else functools.partial(front.pop, fkey, None))
    if front is not None:
        front[fkey] = info
    return info


def elementwise_info(name, prim, params, in_avals, mask, op_dtype):
    """Steps of an elementwise op on operands of possibly different shapes/dtypes."""
    b = StepBuilder(in_avals)
    shape = np.broadcast_shapes(*[a.shape for a in in_avals])
    refs = [b.broadcast(b.convert(i, op_dtype), shape) for i in range(len(in_avals))]
    out = b.add(prim, params, *refs)
    return b.info(name, len(in_avals), (out,), mask)


# ---------------------------------------------------------------------------
# making nodes

_LAST_USER = [None]     # make_node's last user code: its _INTERNAL_CODES entry


def make_node(info, inputs, vals, outs):
    """Attach a node for info to the output tensors.

    inputs: the op's inputs (Tensor, or a constant value) aligned with its input slots;
    vals: every slot value that was computed (None where not computed);
    outs: output tensors aligned with info.out_slots (None for outputs not returned)."""
    plan = info.plan
    if plan is None:
        plan = _hold_plan(info)
    if plan:
        kept = [None] * info.n_slots
        vers = ()               # (flat, a tuple: most ops hold one tensor)
        for s, j in plan:
            v = vals[s]
            if v is None:
                v = _compute_slot(info, vals, s)
            kept[s] = v
            t = inputs[s] if j < 0 else outs[j] if j < 1000 else None
            if t is not None and isinstance(t, TensorInfo):
                if j < 0 and t._flags & INFERENCE:
                    raise RuntimeError(INFERENCE_SAVE_MSG)
                vc = t._vc
                if vc is None:
                    vc = t._vc = VersionCounter()
                vers += (s, vc, vc.v)
        # the user's frame (user_frame, its first step inline): the frame above make_node's
        # caller is functrans code (unary, binary, apply_fn and apply_prim are called only
        # from it), so the search starts one frame above it (each frame looked at costs
        # ~0.2 us; the user's own is usually the first)
        f = _getframe(3)
        code = f.f_code
        hit = _LAST_USER[0]     # the user's code seen last (most ops come from one loop):
        if hit is None or hit[0] is not code:           # a dict lookup fewer per op
            hit = _INTERNAL_CODES.get(id(code))
            if hit is not None and (hit[0] is not code or hit[1]):
                hit = None
            _LAST_USER[0] = hit
        if hit is not None:
            src = hit[2].get(f.f_lasti)           # (call_site, inline)
            if src is None:
                src = call_site(hit, f.f_lasti)
        else:
            src = user_frame(4)
        if SAVED_HOOKS_EVER.on and SAVED_HOOKS.stack:
            writing = SAVED_HOOKS.writing
            wvc = writing._vc if writing is not None else None
            for s, j in plan:
                v = kept[s]
                t = inputs[s] if j < 0 else outs[j] if j < 1000 else None
                if v is None or isinstance(v, Tracer) or j < 0 and not isinstance(
                        t, TensorInfo):
                    continue            # a Python scalar or constant argument: not a tensor
                if j < 0 and wvc is not None and t._vc is wvc:
                    # an input whose storage the in-place op is about to overwrite: the
                    # hook gets a copy of its value before the write (torch's original self)
                    v, t = v.copy(), None
                kept[s] = pack_saved(v, t if isinstance(t, TensorInfo) else None)
                # the hooks own a packed value: its version is not checked (torch's rule)
                vers = without_slot(vers, s)
        # a tuple: once it holds only arrays the cyclic collector stops tracking it, so the
        # recorded graph promotes fewer objects to its oldest generation, whose full
        # collections (~0.1 s each on a large heap) come as often as the promotions fill it
        kept = tuple(kept)
    else:
        kept = ()               # nothing saved (shared: one object fewer per node)
        vers = ()
        src = None
    edges = []
    for t in inputs:
        if isinstance(t, TensorInfo) and t._requires_grad:
            if t._base is not None:
                check_view(t)
            fn = t._grad_fn
            if fn is not None:
                edges.append((fn, t._out_nr))
            else:
                acc = t._accum
                edges.append(acc.edge if acc is not None else edge_of(t))
        else:
            edges.append(None)
    cls = info.node_cls
    if cls is None:
        cls = info.node_cls = node_class(info.name)
    node = _new(cls)
    node.info = info
    node.edges = edges
    node.vals = kept
    node.vers = vers
    node.seq = next(_seq)
    node.src = src
    node.x = None
    node.pos = -1
    node.mark = None
    if ANOMALY.enabled:
        node.stack = _forward_stack()
    if len(outs) == 1:
        t = outs[0]
        if t is not None and info.out_float[0]:
            t._grad_fn = node
            t._requires_grad = True
        return node
    j = 0
    for t, f in zip(outs, info.out_float):
        if f and t is not None:
            t._grad_fn = node
            t._out_nr = j
            t._requires_grad = True
        j += 1
    return node


class _ViewHistory:
    """The function that regenerates a stale view's history: inplace.py (which sits above
    this module and records ops) sets `regenerate` when it loads."""
    regenerate: Any = None


VIEW_HISTORY = _ViewHistory()


INFERENCE_VIEW_REBASED_MSG = (
    "A view was created in inference mode and its base or another view of its base has been "
    "modified inplace in normal mode. Given that this use case is ambiguous and error-prone, "
    "it is forbidden. You can clarify your code by moving both the view and the inplace either "
    "both inside the inference_mode block (if you don't want the inplace to be tracked) or "
    "both outside (if you want the inplace to be tracked).")


def refresh_view(t):
    """False when t is a view whose base was rebased by an in-place op since it was taken
    and whose history could not be regenerated from the base's new one (an
    AsStridedBackward0 read of the base, as torch does): a base that is not C-contiguous,
    traced data. True otherwise (regenerated, or not stale)."""
    base = t._base
    if base._grad_fn is t.__dict__.get("_vfn", base._grad_fn):
        return True
    if t.__dict__.get("_nograd_view") == "inference":
        raise RuntimeError(INFERENCE_VIEW_REBASED_MSG)
    if "_dtype_view" in t.__dict__:          # view_as_real/complex: not through as_strided
        return False
    regenerate = VIEW_HISTORY.regenerate
    return regenerate is not None and regenerate(t)


def check_view(t):
    """A view with a stale history is regenerated (refresh_view); where that cannot be
    done, refuse to record with it."""
    if not refresh_view(t):
        base = t._base
        op = base._vc.op if base._vc is not None else "an in-place operation"
        raise RuntimeError(
            f"functrans: this tensor is a view of a tensor that was modified in place (by {op}) "
            "after the view was taken, so its recorded history is stale (PyTorch would "
            "regenerate it here only over a C-contiguous base). Take the view again after the "
            "in-place operation.")


def _hold_plan(info):
    """(slot, where) per held slot: where = -1 for an input, j for output j, 1000 else."""
    plan = []
    for s in info.held:
        if s < info.n_in:
            plan.append((s, -1))
        elif s in info.out_slots:
            plan.append((s, info.out_slots.index(s)))
        else:
            plan.append((s, 1000))
    info.plan = tuple(plan)
    return info.plan


def _compute_slot(info, vals, s):
    """Evaluate the steps needed for slot s from the slot values present (lazy intermediates,
    and the residuals of companions a forward evaluated without them)."""
    for step in info.steps + info.companion_steps:
        if all(vals[o] is not None for o in step.outs):
            continue
        ins = [vals[r] if type(r) is int else r.val for r in step.refs]
        if any(isinstance(v, Tracer) for v in ins):      # traced data (ft.compile capture)
            out = step.prim.bind(*ins, **step.params)
        else:
            out = step.prim.impl(_xp(*ins), *ins, **step.params)
        outs = out if step.prim.multiple_results else [out]
        for o, v in zip(step.outs, outs):
            vals[o] = v
        if vals[s] is not None:
            return vals[s]
    return vals[s]


def _xp(*vals):
    for v in vals:
        if type(v) is not np.ndarray and hasattr(v, "__cuda_array_interface__"):
            import cupy
            return cupy
    return np


def _forward_stack():
    return traceback.format_list([f for f in traceback.extract_stack()[:-3]
                                  if "/functrans/facade/" not in f.filename])


# ---------------------------------------------------------------------------
# composite ops: a functrans.numpy function traced once per signature

class Composite:
    """A traced op: steps over slots, run eagerly as a runtime program.

    A step whose backward reads values computed inside it (a scan's per-step residuals)
    runs as its residual form (reverse.residual_form) once a requires-grad mask makes its
    inputs differentiated: the form's equations (`forms`) replace the step, compute its
    outputs and the residuals into slots appended after the traced ones, and the OpInfo
    of that mask lists them as `companions`, so the node holds the residuals and the
    derived backward reads them instead of running the loop again. One form per step
    (the first mask's); another mask's backward recomputes, as without forms."""
    __slots__ = ("steps", "n_in", "out_slots", "slot_avals", "run", "out_tree",
                 "any_float", "infos", "prog", "needed", "n_infos", "forms")

    def __init__(self, steps, n_in, out_slots, slot_avals, out_tree):
        self.steps, self.n_in = steps, n_in
        self.out_slots, self.slot_avals = out_slots, slot_avals
        self.out_tree = out_tree
        self.forms = {}          # step index -> (its inputs' nonzero mask, Steps)
        self.run = straight_line(self._jaxpr(range(len(slot_avals)))[0])   # every slot
        self.any_float = any(slot_avals[s].dtype.kind in "fc" for s in out_slots)
        self.infos = {}          # (grad_fn name, requires-grad mask) -> OpInfo
        self.prog, self.needed, self.n_infos = None, (), -1

    def eval_steps(self):
        """The steps as evaluated: each step that has a residual form replaced by it."""
        if not self.forms:
            return self.steps
        out = []
        for i, st in enumerate(self.steps):
            form = self.forms.get(i)
            out.extend(form[1] if form is not None else (st,))
        return out

    def companions(self, mask):
        """((step, its residual form's steps), ...) for the steps whose inputs the
        requires-grad mask makes differentiated (float and depending on an input that
        requires grad), each form made the first time (new slots; the step-by-step runner
        rebuilt); () when none."""
        avals = self.slot_avals
        live = [mask[s] and avals[s].dtype.kind in "fc" for s in range(self.n_in)]
        live += [False] * (len(avals) - self.n_in)
        found = []
        for i, st in enumerate(self.steps):
            lv = tuple(type(r) is int and live[r] for r in st.refs)
            if True in lv:
                for o in st.outs:
                    live[o] = avals[o].dtype.kind in "fc"
            if not st.prim.extra.get("known_outputs_first") or True not in lv:
                continue
            form = self.forms.get(i)
            if form is None:
                form = self._add_form(i, st, lv)
            if form is not None and form[0] == lv:
                found.append((st, form[1]))
        return tuple(found)

    def _add_form(self, i, st, lv):
        avals = list(self.slot_avals)
        in_avals = [avals[r] if type(r) is int else r.aval for r in st.refs]
        known = residual_form(st.prim, st.params, in_avals, lv)
        if known is None:
            return None
        j = known.jaxpr
        slot = dict(zip(j.invars, st.refs))
        slot.update(zip(j.outvars[:len(st.outs)], st.outs))
        steps = []
        for e in j.eqns:
            for v in e.outvars:
                if v not in slot:
                    slot[v] = len(avals)
                    avals.append(v.aval)
            steps.append(Step(e.primitive, e.params,
                              [slot[a] if type(a) is Var else a for a in e.invars],
                              [slot[v] for v in e.outvars]))
        self.slot_avals = tuple(avals)
        form = self.forms[i] = (lv, tuple(steps))
        self.run = straight_line(self._jaxpr(range(len(avals)))[0])
        self.n_infos = -1
        return form

    def evaluate(self, xp, arrays, view):
        """Every slot's value. On NumPy arrays the runtime runs the program of the outputs
        and of the slots backward programs hold (so, once hot, it is lowered and computes
        them in place where it can); the other intermediates are None, computed on demand
        by _compute_slot. View ops, one-step ops and CuPy keep the step-by-step runner of
        every slot (views must share storage)."""
        if xp is np and not view and len(self.steps) > 1:
            if len(self.infos) != self.n_infos:
                self._narrow()
            vals = list(arrays) + [None] * (len(self.slot_avals) - self.n_in)
            for s, v in zip(self.needed, run_program(self.prog, *arrays)):
                vals[s] = v
            return vals
        return self.run(xp, *arrays)

    def _narrow(self):
        """The program of the slots evaluate returns, for the backward programs known now."""
        needed = set(self.out_slots)
        for info in self.infos.values():
            needed.update(s for s, _ in (info.plan or _hold_plan(info)) if s >= self.n_in)
        self.needed = tuple(sorted(needed))
        self.prog = ClosedJaxpr(*self._jaxpr(self.needed, lift_arrays=True))
        self.n_infos = len(self.infos)

    def _jaxpr(self, outs, lift_arrays=False):
        """(the steps as a jaxpr from the input slots to the slots `outs`, consts);
        lift_arrays: array constants become constvars (the jit's lowering wants them so)."""
        var = [Var(a) for a in self.slot_avals]
        constvars, consts = [], []

        def atom(r):
            if type(r) is int:
                return var[r]
            if lift_arrays and np.ndim(r.val):
                constvars.append(Var(r.aval))
                consts.append(r.val)
                return constvars[-1]
            return r
        eqns = [JaxprEqn(st.prim, [atom(r) for r in st.refs], st.params,
                         [var[o] for o in st.outs]) for st in self.eval_steps()]
        return Jaxpr(constvars, var[:self.n_in], eqns, [var[s] for s in outs]), consts


def composite_for(key, fn, static, in_avals):
    """The Composite of fn on these avals, kept in DERIVED as ("composite", key)."""
    key = ("composite", key)
    c = DERIVED.get(key)
    if c is None:
        c = _trace_composite(fn, static, in_avals)
        DERIVED.put(key, c, approx_bytes(key) + 2 * EQN_BYTES * (len(c.steps) + 1))
    return c


def _trace_composite(fn, static, in_avals):
    kwargs = dict(static)
    store = {}

    def f_flat(*args):
        out = fn(*args, **kwargs)
        if isinstance(out, (tuple, list)):
            store["tree"] = len(out)
            return list(out)
        store["tree"] = None
        return [out]
    with keeping_dtypes():      # torch's dtypes: no x32 narrowing of the op's constants
        jaxpr, consts = trace_to_jaxpr(f_flat, list(in_avals))
    n_in = len(in_avals)
    slot_of = {}
    for i, v in enumerate(jaxpr.invars):
        slot_of[v] = i
    avals = list(in_avals)
    for v, c in zip(jaxpr.constvars, consts):
        slot_of[v] = Literal(c, ShapedArray(np.shape(c), np.asarray(c).dtype))
    steps = []

    def ref(a):
        if type(a) is Literal:
            return a
        return slot_of[a]
    for e in jaxpr.eqns:
        refs = [ref(a) for a in e.invars]
        first = len(avals)
        for v in e.outvars:
            slot_of[v] = len(avals)
            avals.append(v.aval)
        steps.append(Step(e.primitive, e.params, refs, range(first, len(avals))))
    out_slots = []
    for a in jaxpr.outvars:
        r = ref(a)
        if type(r) is int and r >= n_in and r not in out_slots:
            out_slots.append(r)
            continue
        # an output that is an input, a constant or a repeated output: copy it
        src_aval = avals[r] if type(r) is int else r.aval
        slot = len(avals)
        avals.append(src_aval)
        steps.append(Step(ew.convert_element_type_p,
                          {"new_dtype": src_aval.dtype, "weak_type": src_aval.weak_type},
                          [r], [slot]))
        out_slots.append(slot)
    return Composite(tuple(steps), n_in, tuple(out_slots), tuple(avals), store["tree"])


def scalar_aval(v):
    """The aval of a Python scalar argument of a composite op: weakly typed, at full
    precision (float64 / int64), so float64 tensors lose nothing and float32 ones round
    once, as torch does."""
    dt = {float: np.float64, int: np.int64, bool: np.bool_, complex: np.complex128}[type(v)]
    return ShapedArray((), dt, weak_type=True)
