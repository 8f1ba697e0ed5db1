"""ft.autograd.Function with PyTorch's semantics, plus the named error functrans raises where
PyTorch silently returns a wrong second derivative."""
import numpy as np
import pytest

import functrans as ft
from functrans.facade import grad_mode
from functrans.facade.record import ANOMALY

Function = ft.autograd.Function


@pytest.fixture(autouse=True)
def _modes_restored():
    before = (grad_mode.STATE.enabled, ANOMALY.enabled)
    yield
    assert (grad_mode.STATE.enabled, ANOMALY.enabled) == before


def t64(a, grad=True):
    return ft.tensor(np.asarray(a, np.float64), requires_grad=grad)


class Exp(Function):
    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y


class MulConst(Function):
    @staticmethod
    def forward(ctx, x, k):
        ctx.k = k                        # a non-tensor on ctx is fine
        return x * k

    @staticmethod
    def backward(ctx, g):
        return g * ctx.k, None


def test_forward_backward_apply_and_grad_fn():
    x = t64([0.0, 1.0, 2.0])
    y = Exp.apply(x)
    assert y.grad_fn.name() == "ExpBackward" and y.grad_fn.next_functions[0][0].variable is x
    np.testing.assert_allclose(y.detach().numpy(), np.exp([0, 1, 2.0]))
    (y * 2).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.exp([0, 1, 2.0]))
    z = MulConst.apply(x, 3.0)
    x.grad = None
    z.sum().backward()
    assert x.grad.tolist() == [3.0, 3.0, 3.0]


def test_forward_runs_without_recording_and_outputs_are_new_tensors():
    seen = {}

    class Ident(Function):
        @staticmethod
        def forward(ctx, x):
            seen["grad_enabled"] = ft.is_grad_enabled()
            return x

        @staticmethod
        def backward(ctx, g):
            return g
    x = t64([1.0])
    y = Ident.apply(x)
    assert seen["grad_enabled"] is False and y is not x and y.grad_fn.name() == "IdentBackward"


def test_needs_input_grad_and_none_gradients():
    seen = {}

    class F(Function):
        @staticmethod
        def forward(ctx, a, b, n):
            seen["needs"] = ctx.needs_input_grad
            ctx.save_for_backward(a, b)
            return a * b * n

        @staticmethod
        def backward(ctx, g):
            a, b = ctx.saved_tensors
            return (g * b * 2 if ctx.needs_input_grad[0] else None,
                    g * a * 2 if ctx.needs_input_grad[1] else None, None)
    a, b = t64([1.0, 2.0]), t64([3.0, 4.0], grad=False)
    F.apply(a, b, 2).sum().backward()
    assert seen["needs"] == (True, False, False) and a.grad.tolist() == [6.0, 8.0]
    with pytest.raises(RuntimeError, match="returned an incorrect number of gradients "
                                           "\\(expected 3, got 1\\)"):
        class Bad(Function):
            @staticmethod
            def forward(ctx, a, b, n):
                return a * n

            @staticmethod
            def backward(ctx, g):
                return g
        Bad.apply(a, b, 2).sum().backward()


def test_saved_tensors_freed_after_backward():
    x = t64([1.0, 2.0])
    y = Exp.apply(x)
    ctx = y.grad_fn.ctx
    assert len(ctx.saved_tensors) == 1
    y.sum().backward()
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        ctx.saved_tensors
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        y.sum().backward()
    y2 = Exp.apply(x)
    y2.sum().backward(retain_graph=True)
    y2.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 3 * np.exp([1.0, 2.0]))


def test_saved_tensor_modified_in_place_is_detected():
    x = t64([1.0, 2.0])
    h = x * 1
    y = Exp.apply(h)
    y.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_mark_non_differentiable_and_materialize_grads():
    class ArgSort(Function):
        @staticmethod
        def forward(ctx, x):
            idx = x.argsort()
            ctx.mark_non_differentiable(idx)
            ctx.save_for_backward(idx)
            return x[idx], idx

        @staticmethod
        def backward(ctx, g, g_idx):
            (idx,) = ctx.saved_tensors
            assert g_idx.tolist() == [0, 0, 0]       # materialized zeros
            out = ft.zeros_like(g)
            out[idx] = g
            return out
    x = t64([3.0, 1.0, 2.0])
    v, i = ArgSort.apply(x)
    assert v.requires_grad and not i.requires_grad
    (v * ft.tensor([1.0, 10.0, 100.0], dtype=ft.float64)).sum().backward()
    assert x.grad.tolist() == [100.0, 1.0, 10.0]

    class Two(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, g1, g2):
            assert g2 is None
            return g1 * 2
    x.grad = None
    a, b = Two.apply(x)
    a.sum().backward()
    assert x.grad.tolist() == [2.0, 2.0, 2.0]


def test_double_backward_through_function_with_differentiable_backward():
    x = t64([0.5, 1.5])
    y = Exp.apply(x * x)                 # exp(x^2)
    (g,) = ft.autograd.grad(y.sum(), x, create_graph=True)
    (h,) = ft.autograd.grad(g.sum(), x)
    a = np.array([0.5, 1.5])
    np.testing.assert_allclose(g.detach().numpy(), 2 * a * np.exp(a * a))
    np.testing.assert_allclose(h.numpy(), (2 + 4 * a * a) * np.exp(a * a))
    assert ft.autograd.gradcheck(Exp.apply, (x,))
    assert ft.autograd.gradgradcheck(Exp.apply, (x,))


def test_ctx_stored_tensor_read_under_create_graph_is_a_named_error():
    class Stash(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.y = x.exp()              # an intermediate stored on ctx, not saved
            return ctx.y * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2 * ctx.y
    x = t64([1.0, 2.0])
    (g,) = ft.autograd.grad(Stash.apply(x).sum(), x)       # first order is right
    np.testing.assert_allclose(g.numpy(), 2 * np.exp([1.0, 2.0]))
    with pytest.raises(ft.autograd.CtxTensorError, match="ctx.y"):
        ft.autograd.grad(Stash.apply(x).sum(), x, create_graph=True)

    class StoreOutput(Function):          # an output stored on ctx is allowed
        @staticmethod
        def forward(ctx, x):
            ctx.y = x.exp()
            return ctx.y

        @staticmethod
        def backward(ctx, g):
            return g * ctx.y
    (g,) = ft.autograd.grad(StoreOutput.apply(x).sum(), x, create_graph=True)
    (h,) = ft.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(h.numpy(), np.exp([1.0, 2.0]))

    class StoreInput(Function):           # an input stored on ctx is allowed
        @staticmethod
        def forward(ctx, x):
            ctx.x = x
            return x * x

        @staticmethod
        def backward(ctx, g):
            return 2 * ctx.x * g
    (g,) = ft.autograd.grad(StoreInput.apply(x).sum(), x, create_graph=True)
    (h,) = ft.autograd.grad(g.sum(), x)
    assert h.tolist() == [2.0, 2.0]


def test_once_differentiable():
    class Sq(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        @ft.autograd.once_differentiable
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g
    x = t64([1.0, 3.0])
    Sq.apply(x).sum().backward()
    assert x.grad.tolist() == [2.0, 6.0]
    (g,) = ft.autograd.grad(Sq.apply(x).sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="trying to differentiate twice a function that was "
                                           "marked with @once_differentiable"):
        g.sum().backward()


def test_function_in_a_cached_training_loop():
    w = t64([0.5, -0.5])
    for step in range(4):
        x = ft.tensor([float(step), 1.0], dtype=ft.float64)
        loss = (Exp.apply(w * x) * 2).sum()
        w.grad = None
        loss.backward()
        np.testing.assert_allclose(w.grad.numpy(), 2 * x.numpy() * np.exp(w.detach().numpy()
                                                                           * x.numpy()))


def test_setup_context_style_as_torch():
    """torch's second way to write a Function: forward without ctx, setup_context saves;
    inputs carry forward's defaults; classmethods work; vjp is backward's other name."""
    class Pow(Function):
        @staticmethod
        def forward(x, y=3):
            return x ** y

        @staticmethod
        def setup_context(ctx, inputs, output):
            x, y = inputs
            ctx.save_for_backward(x)
            ctx.y = y

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * ctx.y * x ** (ctx.y - 1), None

    class PowCls(Function):
        @classmethod
        def forward(cls, x, y=3):
            return x ** y

        @classmethod
        def setup_context(cls, ctx, inputs, output):
            ctx.save_for_backward(inputs[0])
            ctx.y = inputs[1]

        @classmethod
        def vjp(cls, ctx, g):
            (x,) = ctx.saved_tensors
            return g * ctx.y * x ** (ctx.y - 1), None

    x = t64([2.0])
    for f in (Pow, PowCls):
        y = f.apply(x)
        (gx,) = ft.autograd.grad(y, x)
        np.testing.assert_allclose(y.detach().numpy(), [8.0])
        np.testing.assert_allclose(gx.numpy(), [12.0])
    (gx,) = ft.autograd.grad(Pow.apply(x, 2), x)
    np.testing.assert_allclose(gx.numpy(), [4.0])
    assert Pow.generate_vmap_rule is False and hasattr(Pow, "vmap")
    assert Exp._setup_context_style is False and Pow._setup_context_style is True


class _Half(Function):
    """backward returns None: the gradient is undefined, not zero."""
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return None


def test_none_from_backward_stays_none():
    x = t64([1.0])
    _Half.apply(x).backward()
    assert x.grad is None
    _Half.apply(x ** 2).sum().backward()
    assert x.grad is None
    assert ft.autograd.grad(_Half.apply(x), x, allow_unused=True)[0] is None
    with pytest.raises(RuntimeError, match="appears to not have been used"):
        ft.autograd.grad(_Half.apply(x), x)
    (_Half.apply(x) + x).sum().backward()          # another path is defined: a gradient
    np.testing.assert_allclose(x.grad.numpy(), [1.0])


def test_non_differentiable_outputs_get_none_when_asked():
    seen = []

    class F(Function):
        @staticmethod
        def forward(ctx, x):
            a, b = x.clone(), x.clone()
            ctx.mark_non_differentiable(b)
            ctx._materialize_non_diff_grads = False
            return a, b

        @staticmethod
        def backward(ctx, g0, g1):
            seen.append(g1)
            return g0

    x = t64(1.0)
    F.apply(x)[0].backward()
    assert seen == [None] and x.grad.item() == 1.0


def test_grad_materialize_grads():
    x, a = t64(0.5), t64(1.0)
    (d,) = ft.autograd.grad(x * a, x, create_graph=True)
    assert ft.autograd.grad(d, x, create_graph=True, allow_unused=True)[0] is None
    (z,) = ft.autograd.grad(d, x, create_graph=True, materialize_grads=True)
    assert z.item() == 0 and z.requires_grad
    assert ft.autograd.grad(z, x, materialize_grads=True)[0].item() == 0
    with pytest.raises(ValueError, match="Expected allow_unused to be True"):
        ft.autograd.grad(x * a, x, allow_unused=False, materialize_grads=True)


def test_grad_fn_of_a_function_reads_its_ctx():
    """torch's grad_fn of a custom Function is its ctx: saved_tensors, needs_input_grad and
    the attributes forward set are read through it."""
    x = t64([1.0, 2.0])
    y = MulConst.apply(x, 3.0)
    assert y.grad_fn.k == 3.0 and y.grad_fn.needs_input_grad == (True, False)
    z = Exp.apply(x)
    np.testing.assert_allclose(z.grad_fn.saved_tensors[0].detach().numpy(), np.exp([1, 2]))
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        z.grad_fn.nothing
    with pytest.raises(AttributeError):
        (x * 2).grad_fn.saved_tensors             # a built-in op's node has no ctx


def test_apply_binds_keyword_arguments_to_forward():
    x = t64([1.0, 2.0])
    y = MulConst.apply(x, k=3.0)
    y.sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]
    with pytest.raises(TypeError, match="MulConst.apply: .*unexpected keyword"):
        MulConst.apply(x, 3.0, scale=2)


def test_outputs_aliasing_inputs_refuse_in_place_ops_while_recording():
    class Ident(Function):
        @staticmethod
        def forward(ctx, a):
            return a                               # an input returned as-is

        @staticmethod
        def backward(ctx, g):
            return g

    class View(Function):
        @staticmethod
        def forward(ctx, a):
            return a.view(-1)

        @staticmethod
        def backward(ctx, g):
            return g.view(2, 2)

    x = t64([[1.0, 2.0], [3.0, 4.0]])
    for f, k in ((Ident, 0), (View, 0)):
        y = f.apply(x * 1)
        with pytest.raises(RuntimeError, match=f"Output {k} of {f.__name__} is a view and is "
                                               "being modified inplace. This view was created "
                                               "inside a custom Function"):
            y.mul_(2)
    with ft.no_grad():
        Ident.apply(x * 1).mul_(2)                  # not recorded: allowed
    y = Ident.apply(x * 1).clone()
    y.mul_(2)                                       # the fix the message names
    assert y.requires_grad


def test_function_errors_as_torch():
    class Dirty(Function):
        @staticmethod
        def forward(ctx, a):
            a.mul_(2)
            ctx.mark_dirty(a)
            return a * 1                             # the dirty input is not an output

        @staticmethod
        def backward(ctx, g):
            return g

    with pytest.raises(RuntimeError, match="Some elements marked as dirty during the forward "
                                           "method were not returned as output"):
        Dirty.apply(t64([1.0]) * 1)

    class Number(Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, g):
            return 3.0

    with pytest.raises(RuntimeError, match=r"expected Variable or None \(got float\)"):
        Number.apply(t64([1.0])).sum().backward()
