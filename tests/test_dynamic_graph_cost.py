"""What keeps a graph that changes at every call cheap (issue 30): each new structure's
first backward runs equation by equation, and what that leaves behind must not grow the
work of Python's cyclic collector, which PyTorch's C++ graph never meets.

- ft.grad's marks of the structures it has seen ("vjp seen" in backends.memory.DERIVED)
  are keys the collector stops tracking: a program of n equations adds O(1) tracked
  objects, not O(n), so full collections do not slow down as dynamic graphs come and go;
- the collector is paused while a backward or an ft.grad runs and enabled again after,
  also when the user's function or a hook raises;
- the one-equation programs of the first-sight schedule run their straight-line code
  directly when their values are small (runtime.small_program), with the same numbers as
  the runtime's tiers, and through the tiers when they are large;
- a recorded op leaves few objects for the collector to track (the forward, unlike a
  backward, runs with it on): a node, its edges and saved values, its held versions as
  one flat tuple, its call site shared with every node recorded on the same line;
- the hot op paths read the thread-local state of inference mode and saved-tensor hooks
  only once either has been entered (record.SAVED_HOOKS_EVER, grad_mode.EVER): a first
  entry after ops were recorded, on another thread too, still takes effect.
"""
import gc
import subprocess
import sys
import textwrap
from functools import partial

import numpy as np
import pytest

import functrans as ft
import functrans.numpy as fnp
from functrans import executor, runtime
from functrans.core import ClosedJaxpr, ShapedArray
from functrans.primitives import elementwise as ew

OPS = (fnp.sin, fnp.tanh, lambda y: y * 1.5, lambda y: y + 0.25)
FACADE_OPS = (ft.sin, ft.tanh, lambda y: y * 1.5, lambda y: y + 0.25)


def chain_loss(x, ops):
    for k in ops:
        x = OPS[k](x)
    return fnp.sum(x)


def chains(n_chains, length, seed):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 4, length).tolist() for _ in range(n_chains)]


def test_seen_structures_do_not_grow_the_collectors_heap():
    x = np.linspace(-1, 1, 8, dtype=np.float32)
    ft.grad(partial(chain_loss, ops=[0, 1]))(x)
    gc.collect()
    before = len(gc.get_objects())
    n_chains, length = 12, 300
    for ops in chains(n_chains, length, seed=30):
        g = ft.grad(partial(chain_loss, ops=ops))(x)
        assert np.all(np.isfinite(g))
    gc.collect()
    grown = len(gc.get_objects()) - before
    # one tracked tuple per equation would be n_chains * length = 3,600 objects
    assert grown < n_chains * 60, grown


def test_a_grad_leaves_the_collector_nothing_to_scan():
    """ft.grad's recording is freed by reference counting (the constants' tracers closed a
    cycle through the trace's main to the tape, which only a collection freed) and the mark
    of its structure is bytes, not tuples: a new 300-op chain's grad leaves 15 new tracked
    objects alive, where it left its tape and ~1,900 more for the collection that the end
    of its pause set off (a scan of all of them, about 4% of the call)."""
    from functrans.reverse import _Tape
    x = np.linspace(-1, 1, 8, dtype=np.float32)
    ft.grad(partial(chain_loss, ops=[0, 1, 2, 3]))(x)     # each equation's program, once
    ops = chains(1, 300, seed=31)[0]
    gc.collect()
    gc.disable()
    try:
        before = {id(o) for o in gc.get_objects()}
        g = ft.grad(partial(chain_loss, ops=ops))(x)
        new = [o for o in gc.get_objects() if id(o) not in before]
    finally:
        gc.enable()
    assert np.all(np.isfinite(g))
    assert not any(type(o) is _Tape for o in new) and len(new) < 60, len(new)


def test_the_collector_is_enabled_again_after_backward_and_grad():
    assert gc.isenabled()
    x = ft.tensor(np.ones(4, np.float32), requires_grad=True)
    ft.tanh(ft.sin(x)).sum().backward()
    assert gc.isenabled()
    ft.grad(lambda v: fnp.sum(fnp.sin(v)))(np.ones(3))
    assert gc.isenabled()

    def raises(v):
        raise ValueError("inside the differentiated function")
    with pytest.raises(ValueError, match="inside the differentiated function"):
        ft.grad(raises)(np.ones(3))
    assert gc.isenabled()

    y = ft.sin(x)
    y.register_hook(lambda g: (_ for _ in ()).throw(RuntimeError("inside a hook")))
    with pytest.raises(RuntimeError, match="inside a hook"):
        y.sum().backward()
    assert gc.isenabled()


def _sin_backward(shape):
    """The joined residual + backward program of one sin equation on f32[shape], and its
    straight-line form (None: run through the tiers)."""
    aval = ShapedArray(shape, np.dtype(np.float32))
    hit = executor.eqn_program(ew.sin_p, {}, None, (True,), (True,), (ew.sin_p, (), (aval,)))
    return hit[0], hit[5]


def test_small_equation_programs_run_straight_line_code_with_the_same_numbers():
    prog, small = _sin_backward((8,))
    assert isinstance(prog, ClosedJaxpr) and small is not None
    x = np.linspace(-2, 2, 8, dtype=np.float32)
    c = np.linspace(0.5, 1.5, 8, dtype=np.float32)
    np.testing.assert_array_equal(small(np, x, c)[0], runtime.run(prog, x, c)[0])
    np.testing.assert_allclose(small(np, x, c)[0], c * np.cos(x), rtol=1e-6)


def test_large_equation_programs_stay_with_the_runtimes_tiers():
    prog, small = _sin_backward((runtime.SMALL_ELEMENTS + 1,))
    assert small is None


def test_first_sight_and_program_agree_on_changing_chains():
    x = np.linspace(-1, 1, 8, dtype=np.float32)
    for ops in chains(3, 50, seed=31):
        with executor.schedule("first-sight"):
            g1 = ft.grad(partial(chain_loss, ops=ops))(x)
            t = ft.tensor(x, requires_grad=True)
            y = t
            for k in ops:
                y = FACADE_OPS[k](y)
            y.sum().backward()
            f1 = t.grad.numpy()
        with executor.schedule("program"):
            g2 = ft.grad(partial(chain_loss, ops=ops))(x)
        np.testing.assert_allclose(g1, g2, rtol=1e-6)
        np.testing.assert_allclose(f1, g2, rtol=1e-6)


def _facade_chain(ops, a, b):
    y = ft.tensor(np.linspace(-1, 1, 8, dtype=np.float32), requires_grad=True)
    for k in ops:
        y = (ft.sin, ft.tanh, lambda v: v * a, lambda v: v + b)[k](y)
    return y


def test_a_recorded_op_leaves_few_objects_for_the_collector():
    a = ft.tensor(np.full(8, 0.5, np.float32))
    b = ft.tensor(np.full(8, 1e-3, np.float32))
    ops = chains(1, 400, seed=32)[0]
    _facade_chain(ops, a, b)
    gc.collect()
    gc.disable()
    try:
        before = len(gc.get_objects())
        y = _facade_chain(ops, a, b)
        per_op = (len(gc.get_objects()) - before) / len(ops)
    finally:
        gc.enable()
    # a node, its edges list, one edge, its saved values and held versions (3 of 4 ops
    # hold a tensor) and a version counter for about half: 5.0 (6.6 with a tuple per
    # held version and per node's call site)
    assert per_op < 5.3, per_op
    y.sum().backward()
    nodes = [y.grad_fn]
    while len(nodes) < 40:
        nodes.append(nodes[-1].next_functions[0][0])
    sites = {id(n.src) for n in nodes if n.src is not None}
    assert len(sites) <= 4, sites           # four lines in _facade_chain: four call sites


def test_first_entries_of_inference_mode_and_saved_tensor_hooks_take_effect():
    # a fresh process: neither was entered before the ops recorded here (in this one, other
    # tests may have set the once-set flags already)
    code = textwrap.dedent("""
        import threading
        import numpy as np
        import functrans as ft
        from functrans.facade import grad_mode, record
        x = ft.tensor(np.ones(4, np.float32), requires_grad=True)
        (x.sin() * 2.0).sum().backward()
        assert not grad_mode.EVER.inference and not record.SAVED_HOOKS_EVER.on
        packed = []
        def in_thread():
            with ft.autograd.graph.saved_tensors_hooks(lambda t: packed.append(1) or t,
                                                       lambda t: t):
                x.sin().sum().backward()
        th = threading.Thread(target=in_thread)
        th.start()
        th.join()
        assert packed, "the pack hook was not called"
        with ft.inference_mode():
            y = x * 2.0
            z = ft.sin(y)
        assert y.is_inference() and z.is_inference()
        assert not (x * 2.0).is_inference()
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


def _no_tape(monkeypatch):
    from functrans.facade import engine

    def refuse(*args, **kwargs):
        raise AssertionError("a graph tape was built")
    monkeypatch.setattr(engine, "graph_tape", refuse)


def _graphs(lib, x, a):
    """(name, roots, inputs) of small graphs of one-step ops: chains, a value used twice, a
    constant operand, an intermediate target, two roots, a leaf as a root."""
    t = x.tanh()
    u = t.sin() * t + a
    yield "chain", [(u * a).sum()], [x]
    v = x.sin()
    w = (v * v).exp()
    yield "intermediate", [w.sum()], [x, v]
    p = x * 2.0
    q = x.tanh()
    yield "two roots", [p.sum(), q.sum()], [x]
    yield "leaf root", [x.sum(), x], [x]


def test_a_first_backward_of_one_step_ops_runs_on_the_graph_without_a_tape(monkeypatch):
    """The first backward of a graph whose nodes are one primitive with one output runs
    node by node on the recorded graph (interpret.run_direct): no graph tape is built, and
    the gradients are torch's (autograd.grad of intermediates and several roots too)."""
    torch = pytest.importorskip("torch")
    _no_tape(monkeypatch)
    xv = np.linspace(-1, 1, 8).astype(np.float32)
    av = np.linspace(0.5, 1.5, 8).astype(np.float32)
    res = {}
    for lib in (ft, torch):
        x = lib.tensor(xv, requires_grad=True)
        with executor.schedule("first-sight"):
            res[lib] = []
            for name, roots, inputs in _graphs(lib, x, lib.tensor(av)):
                cts = [lib.ones_like(r) for r in roots]
                gs = lib.autograd.grad(roots, inputs, cts, retain_graph=True)
                res[lib].append((name, [g.detach().numpy() for g in gs]))
    for (name, got), (_, want) in zip(res[ft], res[torch]):
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-6, err_msg=name)


def test_run_on_the_graph_keeps_torchs_checks(monkeypatch):
    """Freed values and values modified in place since they were saved are refused, by
    torch's messages, on the schedule that runs on the graph."""
    _no_tape(monkeypatch)
    with executor.schedule("first-sight"):
        x = ft.tensor(np.linspace(-1, 1, 4), requires_grad=True)
        y = x.tanh().sin()
        y.sum().backward()
        with pytest.raises(RuntimeError, match="backward through the graph a second time"):
            y.sum().backward()
        t = x.tanh()
        z = t.exp()
        with ft.no_grad():
            z.mul_(2)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            z.sum().backward()


def test_graphs_beyond_one_step_ops_still_build_the_tape(monkeypatch):
    """A two-step op (mean), a hook or a retained gradient: the tape's schedule."""
    from functrans.facade import engine
    built = []
    real = engine.graph_tape

    def counting(*args, **kwargs):
        built.append(1)
        return real(*args, **kwargs)
    monkeypatch.setattr(engine, "graph_tape", counting)
    with executor.schedule("first-sight"):
        x = ft.tensor(np.linspace(-1, 1, 4), requires_grad=True)
        x.tanh().mean().backward()
        y = x.sin()
        y.register_hook(lambda g: g * 2)
        y.sum().backward()
        z = x.exp()
        z.retain_grad()
        z.sum().backward()
    assert len(built) == 3
    np.testing.assert_allclose(z.grad.numpy(), np.ones(4))


def test_saved_values_leave_the_collectors_generations():
    """A node's saved values are a tuple of arrays, which the cyclic collector stops
    tracking at its first pass: a recorded graph promotes fewer objects to the oldest
    generation, whose full collections come as often as promotions fill it (5.0 tracked
    objects per op with a list of saved values)."""
    a = ft.tensor(np.full(8, 0.5, np.float32))
    b = ft.tensor(np.full(8, 1e-3, np.float32))
    ops = chains(1, 400, seed=32)[0]
    _facade_chain(ops, a, b)
    gc.collect()
    before = len(gc.get_objects())
    y = _facade_chain(ops, a, b)
    gc.collect()
    per_op = (len(gc.get_objects()) - before) / len(ops)
    assert per_op < 4.5, per_op
    y.sum().backward()                  # (the values are still read)



def test_a_first_backwards_mark_is_charged_without_walking_its_structure(monkeypatch):
    """The "backward seen" mark of a new structure is charged what approx_bytes gives its
    key, counted from the structure's length: walking its thousands of ints one by one
    (set(map(type, ...))) was a third of a microsecond per node of a first backward."""
    from functrans.backends import memory
    from functrans.facade import engine
    walked = []
    checking = False
    real = memory.approx_bytes

    def watching(obj, depth=0):
        if type(obj) is tuple and len(obj) > 1000 and not checking:
            walked.append(len(obj))
        return real(obj, depth)
    monkeypatch.setattr(memory, "approx_bytes", watching)
    a = ft.tensor(np.full(8, 0.5, np.float32))
    b = ft.tensor(np.full(8, 1e-3, np.float32))
    x = ft.tensor(np.linspace(-1, 1, 8, dtype=np.float32), requires_grad=True)
    y = x
    for k in chains(1, 600, seed=33)[0]:
        y = (ft.sin, ft.tanh, lambda v: v * a, lambda v: v + b)[k](y)
    key = None
    real_put = memory.DERIVED.put

    def put(k, value, nbytes=None, on_evict=None):
        nonlocal key, checking
        if k[0] == "backward seen":
            key = k
            checking = True             # (the walk it replaces, for the expected charge)
            assert nbytes == real(k)
            checking = False
        return real_put(k, value, nbytes, on_evict)
    monkeypatch.setattr(memory.DERIVED, "put", put)
    y.sum().backward()
    assert key is not None and len(key[1][1]) > 1000 and not walked
    assert x.grad is not None and engine.CACHE_STATS["misses"] >= 0
