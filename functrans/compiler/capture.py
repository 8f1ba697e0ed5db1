"""ft.compile's capture: the compiled-call primitive, hooks inside compiled code (their
primitives are declared in facade/plumbing.py), and the hooks the facade calls when a
Tensor holds traced data.

`compiled_p` runs the known half of the linearization of a captured forward (the forward
plus its residuals, split by partial evaluation of its JVP); its JVP rule hands the saved
residuals to the unknown half (a `jit` call, linear in the tangents), whose transpose is the
backward program. Recorded as one autograd node, its primal half reads the values saved at
forward time (the deriver's available values): nothing is recomputed.

During a capture every input Tensor's data is a tracer of one JaxprTrace; the facade's
`_capture()` branches call the hooks of the active capture (`facade/capture_state.py`:
`current().hooks`, which is `capture_hooks`) to bind primitives instead of running NumPy,
to update tensors functionally in place, to trace backward passes run inside the function
and to turn hooks into identities whose transposes call back to Python.
"""
from __future__ import annotations

import copy
import itertools
import weakref

import numpy as np

from .. import passes, residuals, tree_util
from ..ad import jvp_jaxpr, partial_eval_jaxpr
from ..core import (ClosedJaxpr, FunctransError, Jaxpr, Literal, ShapedArray,
                   Tracer, Var, Zero, eval_jaxpr, short_dtype)
from ..facade import creation, engine
from ..facade.capture_state import active as _active, current as _current
from ..facade.grad_mode import STATE as GS
from ..facade.inplace import _rebase
from ..facade.node import HookDict, add_hook, edge_of
from ..facade.ops import eval_jaxpr_facade, is_tensor
from ..facade.plumbing import (HostRef, module_bwd_hook_p, module_hook_p,
                               tensor_hook_p)
from ..facade.record import make_node, vc_of
from ..facade.tensor import Tensor, bind_broadcast, bind_composite, composite_info, wrap
from ..higher_order.jit import compile_jaxpr, jit_p
from ..nn.modules import module as M
from ..nn.modules.hooks import _flat_tensors
from ..runtime import device_of
from ..tracing import JaxprBuilder
from ..primitives import elementwise as ew
from ..primitives.base import defprim, instantiate, zeros
from ..primitives.misc import stop_gradient_p

class CompileError(FunctransError, RuntimeError):
    """Something in a compiled function cannot be captured (raised under fullgraph=True;
    otherwise recorded as a graph break and the call runs eagerly)."""


class RecompileWarning(UserWarning):
    """A compiled function keeps being recompiled: its guards keep failing."""


class GraphBreakWarning(UserWarning):
    """A compiled function could not be captured and runs eagerly."""


_PLAIN = (bool, int, float, str, type(None), complex)


def _plain(v):
    t = type(v)
    return t in _PLAIN or (t is tuple and all(type(w) in _PLAIN for w in v))


_PLAIN_SET = frozenset(_PLAIN)


def _config(m):
    """The plain attributes of a module (training, p, eps, kernel sizes, ...)."""
    return tuple([(k, v) for k, v in m.__dict__.items() if type(v) in _PLAIN_SET or (
        type(v) is tuple and all(type(w) in _PLAIN_SET for w in v))])


# ---------------------------------------------------------------------------
# the compiled-call primitive: the known half of the forward's linearization


class _Program:
    """What one compiled call computes and how it is differentiated (the `prog` param of
    compiled_p, compared by identity).

    fwd: inputs -> outputs (user outputs, then new values of mutated inputs).
    known: inputs -> fwd's outputs, known tangent outputs, residuals (the known half of
    partial evaluation of jvp(fwd) for the inputs in `mask`, residuals that are inputs or
    outputs not repeated); unknown: (residuals, tangents of the mask inputs) -> tangent
    outputs, linear in the tangents (a jit call, transposed for the backward)."""

    def __init__(self, name, fwd, mask):
        self.name, self.fwd, self.mask = name, fwd, tuple(mask)
        self.in_avals = fwd.in_avals
        n_in, n_out = len(fwd.in_avals), len(fwd.out_avals)
        self.n_out = n_out
        jclosed, self.out_nz = jvp_jaxpr(fwd, list(self.mask), instantiate=False)
        n_t = sum(self.mask)
        known, unknown, self.out_unknowns, num_res = partial_eval_jaxpr(
            jclosed, [False] * n_in + [True] * n_t)
        known, unknown, num_res = residuals.fold_tangent_scales(known, unknown, num_res)
        known, unknown, num_res = residuals.unbroadcast_residuals(known, unknown, num_res)
        known, self.unknown, num_res = residuals.unview_residuals(known, unknown, num_res)
        kj = known.jaxpr
        n_known = len(kj.outvars) - num_res
        in_pos = {v: i for i, v in enumerate(kj.invars)}
        out_pos = {v: j for j, v in enumerate(kj.outvars[:n_known]) if type(v) is Var}
        extra, extra_pos, self.res_src = [], {}, []
        for a in kj.outvars[n_known:]:
            if type(a) is Literal:
                self.res_src.append(("lit", a.val))
            elif a in in_pos:                       # an input: read from its input slot
                self.res_src.append(("in", in_pos[a]))
            elif a in out_pos:                      # an output: read from its output slot
                self.res_src.append(("out", out_pos[a]))
            else:
                if a not in extra_pos:
                    extra_pos[a] = n_known + len(extra)
                    extra.append(a)
                self.res_src.append(("out", extra_pos[a]))
        self.known = passes.dce(ClosedJaxpr(
            Jaxpr(kj.constvars, kj.invars, kj.eqns, list(kj.outvars[:n_known]) + extra),
            known.consts))
        self.n_known = n_known
        self.out_avals = self.known.out_avals
        self.num_res = len(self.res_src)
        self._extra = None

    def extra_jaxpr(self):
        """inputs -> the outputs after fwd's (for exact tangents of residuals), without the
        module hook callbacks."""
        if self._extra is None:
            kj = self.known.jaxpr
            eqns = [e for e in kj.eqns if e.primitive is not module_hook_p]
            self._extra = passes.dce(ClosedJaxpr(
                Jaxpr(kj.constvars, kj.invars, eqns, kj.outvars[self.n_out:]),
                self.known.consts))
        return self._extra

    def __repr__(self):
        return self.name

    @staticmethod
    def fused_program(closed, fn):
        """The backward program through a compiled node (the engine finds it here)."""
        return _CaptureHooks.fused_program(closed, fn)


def _compiled_impl(xp, *args, prog):
    exe = compile_jaxpr(prog.known, device_of(args), (), prog.name)
    return exe(*args)


def _compiled_abstract(*avals, prog):
    return list(prog.out_avals)


def _compiled_jvp(primals, tangents, *, prog):
    outs = compiled_p.bind(*primals, prog=prog)
    nz = [type(t) is not Zero for t in tangents]
    t_extra_avals = prog.out_avals[prog.n_out:]
    if not any(nz):
        return outs, [Zero(a.strip_weak()) for a in prog.out_avals]
    n_out = prog.n_out
    if all(m or not z for m, z in zip(prog.mask, nz)):
        # the saved residuals serve: they were made for a superset of these tangents
        res = [v if kind == "lit" else primals[v] if kind == "in" else outs[v]
               for kind, v in prog.res_src]
        ts = [instantiate(t) if type(t) is not Zero else zeros(a.strip_weak())
              for t, a, m in zip(tangents, prog.in_avals, prog.mask) if m]
        unk = iter(jit_p.bind(*res, *ts, jaxpr=prog.unknown, name=f"jvp({prog.name})"))
        t_outs, p, k = [], n_out, n_out
        for j, a in enumerate(prog.fwd.out_avals):
            if not prog.out_nz[j]:
                t_outs.append(Zero(a.strip_weak()))
                continue
            if prog.out_unknowns[p]:
                t_outs.append(next(unk))
            else:                                   # a known (constant) tangent output
                t_outs.append(outs[k])
                k += 1
            p += 1
    else:   # tangents for inputs the residuals were not made for: differentiate fwd anew
        _, t_outs = jit_p.jvp(list(primals), list(tangents), jaxpr=prog.fwd, name=prog.name)
    if t_extra_avals:   # exact tangents of the residual outputs (dead code unless twice
        _, t_extra = jit_p.jvp(list(primals), list(tangents),   # differentiated)
                               jaxpr=prog.extra_jaxpr(), name=f"residuals({prog.name})")
    else:
        t_extra = []
    return outs, list(t_outs) + list(t_extra)


def _compiled_batch(vals, dims, *, prog):
    return jit_p.batch(vals, dims, jaxpr=prog.known, name=prog.name)


compiled_p = defprim("compiled", _compiled_impl, _compiled_abstract, multiple_results=True,
                     jvp=_compiled_jvp, batch=_compiled_batch, memo=False)


class _ForwardHooks:
    """The forward (pre-)hooks of one module call site, fired at run time with Tensors
    rebuilt from a template of the call's arguments (and result)."""

    def __init__(self, module, kind, hooks, template, tree):
        self.module, self.kind, self.hooks = module, kind, hooks
        self.template, self.tree = template, tree

    def fire(self, vals):
        it = iter(vals)
        leaves = [_wrap_value(next(it)) if x is _SLOT else x for x in self.template]
        M.fire_forward_hooks(self.module, self.kind, self.hooks,
                             *tree_util.tree_unflatten(self.tree, leaves), refuse=self.refuse)

    def refuse(self, hook):
        raise CompileError(
            f"the forward {'pre-' if self.kind == 'pre' else ''}hook "
            f"{getattr(hook, '__name__', repr(hook))} of {type(self.module).__name__} returned "
            "a value inside ft.compile; compiled code calls forward hooks with the values they "
            "observe and cannot take a replacement. Apply the change in forward(), or remove "
            "the hook (handle.remove()) before calling the compiled module.")


_SLOT = object()


def _wrap_value(v):
    return wrap(np.asarray(v) if isinstance(v, np.generic) else v)


# ---------------------------------------------------------------------------
# the capture: one run of the user's function on traced tensors

class _Capture:
    """State of one capture: the trace, its inputs and what to restore afterwards."""

    def __init__(self, name):
        self.name = name
        self.builder = JaxprBuilder()
        self.trace = None
        self.in_tracers = []
        self.sources = []          # per input: (kind, x) -- see CompiledFunction._gather
        self.input_of = {}         # id(tensor) -> input index
        self.inputs = []           # tensor (or array) per input
        self.saved = {}            # id(tensor) -> (tensor, snapshot)
        self.current = {}          # id(input tensor) -> its expected traced data
        self.aliased = set()       # ids of tensors sharing storage with another tensor
        self.keep = []             # keeps aliased tensors alive while their ids are used
        self.generators = {}       # id(np Generator) -> a private copy to draw from
        self.hooked = False        # a tensor or backward hook was traced
        self.consts = {}           # id(tensor) -> (weakref, data, version counter, version)
        self.created = {}          # id(tensor) -> tensor, made by creation functions here
        self.modules = []          # (module, its plain attributes before the capture)
        self.hooks = capture_hooks  # what the facade calls on traced data (capture_state)
        self.shadows = None        # inputs' state, private to this thread (shadow.py)

    # -- inputs ----------------------------------------------------------------

    def _new_input(self, aval, origin):
        t = self.trace.new_arg(aval, origin)
        self.in_tracers.append(t)
        return t

    def add_tensor(self, t, source, origin):
        """Make tensor t an input: its data becomes a new traced argument (on this thread
        only: other threads keep seeing its real data)."""
        self.shadows.privatize(t)
        self.saved[id(t)] = (t, _snapshot(t))
        d = t._data
        tr = self._new_input(ShapedArray(d.shape, d.dtype), origin)
        t._data = tr
        self.input_of[id(t)] = len(self.inputs)
        self.inputs.append(t)
        self.sources.append(source)
        self.current[id(t)] = tr
        return tr

    def add_array(self, a, source, origin):
        a = np.asarray(a)
        tr = self._new_input(ShapedArray(a.shape, a.dtype), origin)
        self.inputs.append(a)
        self.sources.append(source)
        return tr

    def restore(self):
        """Undo what running the function did to modules and inputs; only what changed
        is written back, so other threads' updates meanwhile survive."""
        for m, attrs in self.modules:
            d = m.__dict__
            for k in [k for k, v in d.items() if _plain(v) and k not in attrs]:
                del d[k]
            for k, v in attrs.items():
                if d.get(k, _SLOT) is not v:
                    d[k] = v
        for t, snap in self.saved.values():
            _restore(t, snap)
        self.shadows.close()

    def note_const(self, t):
        """A concrete tensor read by a traced op becomes a constant of the program: guard
        its storage and version, so that a later in-place change recompiles."""
        if id(t) not in self.consts:
            vc = vc_of(t)
            self.consts[id(t)] = (weakref.ref(t), t._data, vc, vc.v)
            self.keep.append(t)

    def note_alias(self, *tensors):
        for t in tensors:
            self.aliased.add(id(t))
            self.keep.append(t)


def _snapshot(t):
    vc = t._vc
    hooks = t.__dict__.get("_hooks")
    return (t._data, t._grad_fn, t._requires_grad, vc, None if vc is None else (vc.v, vc.op),
            dict(t.__dict__), None if hooks is None else dict(hooks))


def _restore(t, snap):
    """The state slots are private to the capture (shadow.py) and are dropped with it;
    the rarely set fields in __dict__ are put back where the capture changed them (not
    .grad, which a capture refuses to touch: another thread's backward may have set it)."""
    d, hooks = snap[5], snap[6]
    cur = t.__dict__
    for k in [k for k in cur if k not in d and k != "_grad"]:
        del cur[k]
    for k, v in d.items():
        if k != "_grad" and cur.get(k, _SLOT) is not v:
            cur[k] = v
    if hooks is not None:
        h = cur["_hooks"]
        if h != hooks:
            h.clear()
            h.update(hooks)


class _RngProxy:
    """Stands for a NumPy Generator during capture: each draw becomes an input of the
    program, drawn again from the same facade generator at every call, so compiled code
    consumes eager's random stream (dropout masks are fresh at every step)."""

    def __init__(self, cap, facade_gen, np_gen):
        self._cap, self._fgen = cap, facade_gen
        own = cap.generators.get(id(np_gen))        # draws at capture time come from a
        if own is None:                              # copy: the real stream is untouched,
            own = cap.generators[id(np_gen)] = copy.deepcopy(np_gen)   # for all threads
        self._gen = own

    def __getattr__(self, name):
        real = getattr(self._gen, name)
        if not callable(real):
            return real

        def draw(*args, **kwargs):
            for a in itertools.chain(args, kwargs.values()):
                if isinstance(a, Tracer) or isinstance(getattr(a, "_data", None), Tracer):
                    _refuse(f"a random draw ({name}) whose parameters are computed inside the "
                            "compiled function", "draw with constant parameters and scale the "
                            "result")
            val = np.asarray(real(*args, **kwargs))
            call = (self._fgen, name, args, kwargs, val.dtype)
            return self._cap.add_array(val, ("rng", call), f"a random draw ({name})")
        return draw


def _draw(call):
    fgen, name, args, kwargs, dtype = call
    return np.asarray(getattr(creation._rng(fgen), name)(*args, **kwargs), dtype)


def _refuse(what, fix):
    raise CompileError(f"ft.compile cannot capture {what}; {fix}.")


class _CaptureHooks:
    """What the facade calls when a Tensor holds traced data (its `_capture()` branches)."""

    @staticmethod
    def refuse(what, fix):
        _refuse(what, fix)

    records = True              # facade ops on traced data record autograd nodes
    bind = staticmethod(bind_broadcast)

    @staticmethod
    def as_tensor(x):
        """A value of the capture's own trace coming out of ft.func.grad & co: a Tensor
        without history, as eager returns (other tracers stay raw, as under ft.jit)."""
        cap = _active()
        if cap is None or x._trace.main is not cap.trace.main:
            return x
        return wrap(stop_gradient_p.bind(x))

    @staticmethod
    def grad_access(t):
        _refuse(".grad inside the compiled function (a compiled program cannot read or set "
                "the gradients of earlier backward passes)", "read or set .grad outside it")

    @staticmethod
    def accumulate(t):
        _refuse(".backward() (gradient accumulation into .grad) inside the compiled function",
                "return the loss and call .backward() on it outside, or use "
                "ft.autograd.grad(..., create_graph=True)")

    @staticmethod
    def concrete_update(t, op):
        """An in-place update of concrete data during capture would happen once, at compile
        time: allowed only on tensors the function created (ft.zeros(...) then filled)."""
        if _current().created.get(id(t)) is not t:
            _refuse(f"an in-place update{f' ({op})' if op else ''} of a "
                    f"{short_dtype(t.dtype)}{list(t.shape)} tensor that is not an input of "
                    "the compiled function (it would happen once, at compile time)",
                    "make it a buffer of a module or an argument, or update it outside")

    @staticmethod
    def stop_gradient(x):
        return stop_gradient_p.bind(x)

    @staticmethod
    def created(t):
        """A tensor made by a creation function inside the capture: it may be filled in
        place (ft.zeros(3); t[0] = 1)."""
        _current().created[id(t)] = t

    @staticmethod
    def rng(facade_gen, np_gen):
        """What stands for a random generator inside the capture (draws become inputs)."""
        return _RngProxy(_current(), facade_gen, np_gen)

    @staticmethod
    def after_op(args, outs):
        """After a traced op: concrete tensors it read become guarded constants; a tensor
        that requires grad cannot be one (it would be frozen); and an output the tape did
        not record although an input requires grad (no_grad, a non-differentiable op) must
        not be differentiated by the compiled node either (stop_gradient)."""
        rg = False
        for a in args:
            if isinstance(a, Tensor) and not isinstance(a._data, Tracer):
                _current().note_const(a)
            if isinstance(a, Tensor) and a._requires_grad:
                rg = True
                if not isinstance(a._data, Tracer):
                    _refuse("a tensor that requires grad but is not reachable by the guards "
                            f"(a {short_dtype(a.dtype)}{list(a.shape)} "
                            f"{'parameter' if a._grad_fn is None else 'tensor'} that would be "
                            "frozen into the program)", "compile the module itself, pass it "
                            "(or the tensor) as an argument, or reach it through a global or "
                            "closure variable of the compiled function")
        if not rg:
            return
        for t in outs:
            if (t is not None and not t._requires_grad and isinstance(t._data, Tracer)
                    and t._data.dtype.kind in "fc"):
                t._data = stop_gradient_p.bind(t._data)

    @staticmethod
    def apply_composite(name, comp, args, arrays, view):
        """apply_fn on traced data: bind the composite's steps, record, mark views."""
        vals, outs = bind_composite(comp, arrays)
        if view and isinstance(args[0], Tensor):
            base = args[0]
            b = base._base if base._base is not None else base
            vc = vc_of(base)
            for o in outs:
                o._base = b
                o._vc = vc
                if b._requires_grad:
                    o.__dict__["_vfn"] = b._grad_fn
            _current().note_alias(base, b, *outs)
        rg = any(isinstance(a, Tensor) and a._requires_grad for a in args)
        if rg and GS.enabled and comp.any_float:
            make_node(composite_info(comp, name, args, forms=False), args, vals, outs)
        _CaptureHooks.after_op(args, outs)
        return outs[0] if comp.out_tree is None else tuple(outs)

    @staticmethod
    def detached_alias(t):
        """detach() / .data of traced data: no gradient, and storage shared with t (so an
        in-place op on either is refused)."""
        a = wrap(stop_gradient_p.bind(t._data))
        a._vc = vc_of(t)
        a._flags = t._flags
        _current().note_alias(t, a)
        return a

    @staticmethod
    def register_hook(t, hook):
        """tensor.register_hook inside compiled code: an identity in the jaxpr whose
        transpose calls the hooks at backward time (uses of t after this line see it)."""
        cap = _current()
        cap.hooked = True
        taps = cap.__dict__.setdefault("taps", {})
        hd = taps.get(id(t))
        if hd is None:
            hd = taps[id(t)] = HookDict()
            cap.keep.append(t)
            ref = HostRef(hd, f"hooks of {t._data.aval.str_short()}", wrap)
            t._data = tensor_hook_p.bind(t._data, ref=ref)
            if id(t) in cap.current:
                cap.current[id(t)] = t._data
        return add_hook(hd, hook)

    @staticmethod
    def inplace(t, name, res):
        """An in-place op on traced data: the tensor takes the new value (functionally)."""
        cap = _current()
        data, out = t._data, res._data
        if not isinstance(data, Tracer):
            _refuse(f"in-place {name} writing a value computed inside the compiled function "
                    "into a tensor that is not an input of it (a global or a module attribute "
                    "that is not a parameter or buffer)", "register it as a buffer or pass "
                    "it as an argument")
        if id(t) in cap.aliased or t._base is not None:
            _refuse(f"in-place {name} on a tensor that shares storage with another one (a "
                    "view, detach() or .data)", "use the out-of-place op")
        k = cap.input_of.get(id(t))
        if k is not None and (cap.saved[id(t)][1][2] or res._requires_grad):
            _refuse(f"in-place {name} on an argument, parameter or buffer that requires grad",
                    "update it outside the compiled function (optimizers do), or use the "
                    "out-of-place op")
        if out.shape != data.shape:
            raise RuntimeError(f"output with shape {list(data.shape)} doesn't match the "
                               f"broadcast shape {list(out.shape)}")
        if out.dtype != data.dtype:
            if not np.can_cast(out.dtype, data.dtype, "same_kind"):
                raise RuntimeError(f"result type {out.dtype} can't be cast to the desired "
                                   f"output type {data.dtype}")
            out = ew.convert_element_type(out, new_dtype=data.dtype, weak_type=False)
        t._data = out
        t._bump(name)
        if k is not None:
            cap.current[id(t)] = out
        if res._grad_fn is not None:
            _rebase(t, res)
        return t

    @staticmethod
    def run_program(prog, nodes, hooked, fns, vals, root_cts, create_graph):
        """A backward pass inside the compiled function (ft.autograd.grad in a gradient
        penalty): the program is traced into the forward jaxpr."""
        cap = _current()
        if hooked or fns or cap.hooked:
            _refuse("a backward pass inside the compiled function through tensor hooks, "
                    "module backward hooks or custom autograd Functions",
                    "remove the hooks for the compiled call")
        run = engine.RunContext([], [], create_graph)
        engine.RUN.stack.append(run)
        try:
            if create_graph:
                return eval_jaxpr_facade(prog, nodes, vals, root_cts)
            outs = eval_jaxpr(prog.closed.jaxpr, prog.closed.consts, *vals, *root_cts)
        finally:
            engine.RUN.stack.pop()
        # without create_graph the gradients have no history: constants for the outer AD
        return [stop_gradient_p.bind(o) if isinstance(o, Tracer) else o for o in outs]

    @staticmethod
    def fused_program(closed, fn):
        """A backward program through a compiled node, run by the jit pipeline on the CPU."""
        def run(xp, *args):
            if xp is not np:
                return fn(xp, *args)
            return compile_jaxpr(closed, "cpu", (), "backward")(*args)   # cached on closed
        run.source = getattr(fn, "source", None)
        run.closed = closed
        return run

    @staticmethod
    def module_hooks(module, kind, hooks, parts, fire):
        """A module's forward (pre-)hooks during capture: a run-time callback of the
        program that fires them with the values they observe (always-called hooks of a
        forward that failed fire in the eager run that follows the graph break)."""
        if kind != "failed":
            _emit_forward_hooks(module, kind, hooks, parts)
        return parts[:2] if kind == "pre" else parts[2]

    @staticmethod
    def module_backward_hook(bw, side, value):
        """Full backward hooks during capture: identities whose transposes call them."""
        return _wrap_backward_hook(bw, side, value)


capture_hooks = _CaptureHooks()


def _emit_forward_hooks(module, kind, hooks, parts):
    leaves, tree = tree_util.tree_flatten(parts, is_leaf=is_tensor)
    template, vals = [], []
    for x in leaves:
        if isinstance(x, Tensor):
            template.append(_SLOT)
            vals.append(x._data)
        else:
            template.append(x)
    state = _ForwardHooks(module, kind, hooks, template, tree)
    label = f"{type(module).__name__}.{'forward_pre_hooks' if kind == 'pre' else 'forward_hooks'}"
    module_hook_p.bind(*vals, ref=HostRef(state, label))


def _wrap_backward_hook(bw, side, value):
    """BackwardHook.setup_input_hook / setup_output_hook on traced tensors."""
    cap = _current()
    if side == "input":
        tensors = [(i, a) for i, a in enumerate(value) if isinstance(a, Tensor)]
        pos = [i for i, _ in tensors]
        bw.n_inputs = len(tensors)
    else:
        pos, ts = _flat_tensors(value)
        tensors = list(zip(pos, ts))
        bw.n_outputs = len(tensors)
    if not GS.enabled:
        return value
    wrapped = [(k, i, a) for k, (i, a) in enumerate(tensors) if a._requires_grad]
    if not wrapped:
        return value
    cap.hooked = True
    outs = module_bwd_hook_p.bind(*[a._data for _, _, a in wrapped],
                                  ref=HostRef(bw, f"{type(bw.module).__name__} backward hooks", wrap),
                                  side=side)
    new = {}
    for (k, i, a), d in zip(wrapped, outs):
        t = wrap(d)
        t._requires_grad = True
        if a._grad_fn is not None:
            t._grad_fn = a._grad_fn
            t._out_nr = a._out_nr
        else:
            t._accum = edge_of(a)[0]
        new[i] = t
    if side == "input":
        bw.input_slots = [k for k, _, _ in wrapped]
        bw.input_wrapped = True
        return tuple(new.get(i, a) for i, a in enumerate(value))
    bw.output_slots = [k for k, _, _ in wrapped]
    if pos == [None]:
        return new[None]
    out = list(value)
    for i, t in new.items():
        out[i] = t
    return type(value)(out) if isinstance(value, tuple) else out


