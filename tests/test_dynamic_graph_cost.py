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
  the runtime's tiers, and through the tiers when they are large.
"""
import gc
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
