"""The facade's autograd engine with PyTorch's semantics: grad_fn and leaves, backward and
autograd.grad, retain_graph and freed values, version counters, hooks, grad modes,
anomaly detection, gradcheck, and what functrans adds (backward_jaxpr, saved tensor
reports, the program cache). Expected values: float64 NumPy and central differences."""
import gc
import threading
import warnings
import weakref

import numpy as np
import pytest

import functrans as ft
from functrans.facade import engine, grad_mode
from functrans.facade.record import ANOMALY
from conftest import fd_grad

FREED = "Trying to backward through the graph a second time"


@pytest.fixture(autouse=True)
def _modes_restored():
    before = (grad_mode.STATE.enabled, grad_mode.STATE.inference, ANOMALY.enabled)
    yield
    assert (grad_mode.STATE.enabled, grad_mode.STATE.inference, ANOMALY.enabled) == before
    assert not engine.RUN.stack


def t64(a, grad=True):
    return ft.tensor(np.asarray(a, np.float64), requires_grad=grad)


RNG = np.random.default_rng(0)
A = RNG.standard_normal((3, 4))
B = RNG.standard_normal((4, 2))
IDX = np.array([[1], [0], [3]])

CASES = {
    "chain": (lambda x: ((x * 2).sin() * x.exp()).tanh().sum(),
              lambda x: np.tanh(np.sin(2 * x) * np.exp(x)).sum()),
    "matmul": (lambda x: (x @ t64(B, False)).relu().pow(2).mean(),
               lambda x: (np.maximum(x @ B, 0) ** 2).mean()),
    "broadcast": (lambda x: (x * x[0] + x.sum(0, keepdim=True) / 3).abs().sum(),
                  lambda x: np.abs(x * x[0] + x.sum(0, keepdims=True) / 3).sum()),
    "softmax": (lambda x: (x.softmax(1) * t64(A, False)).sum() + x.log_softmax(0)[1, 2],
                lambda x: (np.exp(x) / np.exp(x).sum(1, keepdims=True) * A).sum()
                + (x - np.log(np.exp(x).sum(0, keepdims=True)))[1, 2]),
    "index": (lambda x: (x[1:, ::2] ** 3).sum() + x[[0, 2], [1, 3]].prod() + x[x > 0].sum(),
              lambda x: (x[1:, ::2] ** 3).sum() + x[[0, 2], [1, 3]].prod() + x[A > 0].sum()),
    "shape": (lambda x: (x.t().reshape(2, 6).permute(1, 0).flatten() * ft.arange(12.0)
                         .double()).cumsum(0).sum() + ft.cat([x, x ** 2], 1).var(),
              lambda x: (x.T.reshape(2, 6).T.reshape(-1) * np.arange(12.0)).cumsum(0).sum()
              + np.concatenate([x, x ** 2], 1).var(ddof=1)),
    "reduce": (lambda x: x.max(1).values.sum() + x.amin() + x.norm() + x.std(0).sum()
               + x.logsumexp(1).sum(),
               lambda x: x.max(1).sum() + x.min() + np.linalg.norm(x) + x.std(0, ddof=1).sum()
               + np.log(np.exp(x).sum(1)).sum()),
    "gather_where": (lambda x: x.gather(1, ft.tensor(IDX)).sum() + ft.where(x > 0, x, x * x)
                     .sum() + x.clamp(-0.5, 0.5).sum() + x.masked_fill(x < 0, 2.0).sum(),
                     lambda x: np.take_along_axis(x, IDX, 1).sum() + np.where(x > 0, x, x * x)
                     .sum() + np.clip(x, -0.5, 0.5).sum() + np.where(x < 0, 2.0, x).sum()),
    "divpow": (lambda x: (1 / (x * x + 1)).sum() + (x.abs() + 1).pow(x).sum() + (2 ** x).sum()
               - (1 - x).sqrt().nan_to_num_() if False else
               (1 / (x * x + 1)).sum() + (x.abs() + 1).pow(x).sum() + (2 ** x).sum(),
               lambda x: (1 / (x * x + 1)).sum() + ((np.abs(x) + 1) ** x).sum() + (2 ** x).sum()),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_gradients_match_finite_differences(name):
    f, npf = CASES[name]
    x = t64(A)
    f(x).backward()
    np.testing.assert_allclose(x.grad.numpy(), fd_grad(npf, A), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------
# graph structure

def test_grad_fn_names_leaves_and_next_functions():
    x = ft.tensor([1.0, 2.0], requires_grad=True)
    w = ft.ones(2, 2, requires_grad=True)
    assert x.is_leaf and x.grad_fn is None
    y = x * 2
    assert not y.is_leaf and y.requires_grad and y.grad_fn.name() == "MulBackward0"
    acc, nr = y.grad_fn.next_functions[0]
    assert nr == 0 and acc.name() == "torch::autograd::AccumulateGrad" and acc.variable is x
    assert y.grad_fn.next_functions[1] == (None, 0)
    names = {
        "AddBackward0": x + x, "SubBackward0": x - 1, "RsubBackward1": 1 - x,
        "DivBackward0": x / 2, "NegBackward0": -x, "PowBackward0": x ** 2,
        "PowBackward1": x ** x, "ExpBackward0": x.exp(), "SumBackward0": x.sum(),
        "SumBackward1": w.sum(1), "MeanBackward0": x.mean(), "MeanBackward1": w.mean(0),
        "MmBackward0": w @ w, "MvBackward0": w @ x, "DotBackward0": x.dot(x),
        "ViewBackward0": w.view(4), "PermuteBackward0": w.permute(1, 0),
        "TransposeBackward0": w.transpose(0, 1), "TBackward0": w.t(),
        "UnsqueezeBackward0": x.unsqueeze(0), "SqueezeBackward0": w[:1].squeeze(),
        "ExpandBackward0": x.expand(3, 2), "CatBackward0": ft.cat([x, x]),
        "StackBackward0": ft.stack([x, x]), "SelectBackward0": w[0],
        "SliceBackward0": x[1:], "IndexBackward0": x[ft.tensor([0, 0])],
        "MaxBackward1": x.max(), "MaxBackward0": w.max(1).values,
        "ReluBackward0": x.relu(), "SigmoidBackward0": x.sigmoid(),
        "TanhBackward0": x.tanh(), "SoftmaxBackward0": x.softmax(0),
        "LogSoftmaxBackward0": x.log_softmax(0), "CloneBackward0": x.clone(),
        "ClampBackward1": x.clamp(0, 1), "WhereBackward0": ft.where(x > 1, x, w[0]),
        "GatherBackward0": w.gather(1, ft.tensor([[0], [1]])),
        "MaskedFillBackward0": x.masked_fill(x > 1, 0.0), "SplitBackward0": x.chunk(2)[0],
        "UnbindBackward0": w.unbind(0)[1], "RepeatBackward0": x.repeat(2),
        "Log1PBackward0": x.log1p(), "FracBackward0": x.frac(),
        "ReciprocalBackward0": x.reciprocal(), "SgnBackward0": x.sgn(),
        "RoundBackward1": x.round(decimals=1), "FmodBackward1": x.fmod(x + 1),
        "FmodBackward0": x.fmod(2), "RemainderBackward1": x.remainder(x + 1),
        "SortBackward1": x.sort(stable=True).values, "SortBackward0": x.sort().values,
        "TraceBackward0": w.trace(), "RollBackward0": w.roll(1),
        "ScatterBackward1": w.scatter(0, ft.tensor([[1, 0]]), 2.0),
        "MaskedFillBackward1": x.masked_fill(x > 1, ft.tensor(0.0)),
        "SubBackward0": (x * 1).sub_(1.0), "FillBackward2": (x * 1).fill_(2.0),
        "torch::autograd::CopyBackwards": (x * 1).copy_(x),
    }
    assert w.H.grad_fn.name() == "TransposeBackward0"
    assert [r.grad_fn.name() for r in w] == ["UnbindBackward0"] * 2
    assert [p.grad_fn.name() for p in ft.tensor_split(x, [1])] == ["SliceBackward0"] * 2
    for name, t in names.items():
        assert t.grad_fn.name() == name, (name, t.grad_fn.name())


def test_requires_grad_propagation_and_requires_grad_():
    x = ft.ones(2)
    assert not (x * 2).requires_grad
    x.requires_grad_()
    assert (x * 2).requires_grad and x.requires_grad
    assert not (x > 0).requires_grad and not x.argmax().requires_grad
    y = x * 2
    with pytest.raises(RuntimeError, match="you can only change requires_grad flags of leaf"):
        y.requires_grad_(False)
    with pytest.raises(RuntimeError, match="only Tensors of floating point"):
        ft.tensor([1, 2]).requires_grad_()


# ---------------------------------------------------------------------------
# backward, .grad, retain_graph

def test_grad_accumulates_on_leaves_only():
    x = ft.tensor([1.0, 2.0], requires_grad=True)
    (x * x).sum().backward()
    (x * x).sum().backward()
    assert x.grad.tolist() == [4.0, 8.0]
    x.grad = None
    (3 * x).sum().backward()
    assert x.grad.tolist() == [3.0, 3.0] and x.grad.grad_fn is None
    y = x * 2
    y.sum().backward()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert y.grad is None
    assert "is not a leaf Tensor" in str(w[0].message)


def test_retain_grad():
    x = ft.tensor([1.0, 2.0], requires_grad=True)
    h = x * 3
    h.retain_grad()
    assert h.retains_grad
    (h * h).sum().backward()
    assert h.grad.tolist() == [6.0, 12.0] and x.grad.tolist() == [18.0, 36.0]


def test_backward_twice_frees_saved_values():
    x = ft.tensor([1.0, 2.0], requires_grad=True)
    y = (x.exp() * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match=FREED) as e:
        y.backward()
    assert "Specify retain_graph=True" in str(e.value) and "Backward0" in str(e.value)
    z = (x.exp() * x).sum()
    z.backward(retain_graph=True)
    z.backward()
    e1 = np.exp([1.0, 2.0]) * np.array([2.0, 3.0])
    np.testing.assert_allclose(x.grad.numpy(), 3 * e1, rtol=1e-6)
    s = (x + 1).sum()             # nothing saved: torch allows a second backward
    s.backward()
    s.backward()


def test_saved_values_are_really_released():
    x = ft.tensor(np.ones(1000), requires_grad=True)
    h = x.exp()
    saved = weakref.ref(h._data)
    y = (h.exp() * 2).sum()         # exp's output (h's successor) and h are saved
    del h
    gc.collect()
    assert saved() is not None
    y.backward()
    gc.collect()
    assert saved() is None


def test_non_scalar_backward_needs_gradient():
    x = ft.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * x
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar "
                                           "outputs"):
        y.backward()
    y.backward(gradient=ft.tensor([1.0, 0.1, 0.01]))
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 0.4, 0.06], rtol=1e-6)
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        (x * 2).backward(ft.ones(2))


def test_backward_errors():
    with pytest.raises(RuntimeError, match="element 0 of tensors does not require grad and "
                                           "does not have a grad_fn"):
        ft.ones(2).sum().backward()
    x = ft.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="element 1 of tensors does not require grad"):
        ft.autograd.backward([x.sum(), ft.ones(1).sum()])


def test_backward_inputs_argument():
    x = ft.tensor([1.0, 2.0], requires_grad=True)
    w = ft.tensor([3.0, 4.0], requires_grad=True)
    h = x * w
    (h * h).sum().backward(inputs=[w, h])
    assert x.grad is None and w.grad.tolist() == [6.0, 32.0]
    assert h.grad.tolist() == [6.0, 16.0]


def test_two_losses_on_a_shared_trunk():
    x = ft.tensor([1.0, 2.0], requires_grad=True)
    trunk = x.exp()
    l1, l2 = (trunk * 2).sum(), (trunk ** 2).sum()
    ft.autograd.backward([l1, l2])
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.exp([1, 2.]) + 2 * np.exp([2, 4.]),
                               rtol=1e-6)
    x.grad = None
    t = x.exp()
    ft.autograd.backward([(t * 2).sum(), (t ** 2).sum()], [ft.tensor(1.0), ft.tensor(0.5)])
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.exp([1, 2.]) + np.exp([2, 4.]),
                               rtol=1e-6)


def test_autograd_grad_semantics():
    x = ft.tensor([1.0, 2.0], requires_grad=True)
    u = ft.tensor(1.0, requires_grad=True)
    y = (x ** 3).sum()
    (g,) = ft.autograd.grad(y, x, retain_graph=True)
    assert g.tolist() == [3.0, 12.0] and x.grad is None
    with pytest.raises(RuntimeError, match="The differentiated Tensor at index 1 appears to "
                                           "not have been used in the graph. Set allow_unused"):
        ft.autograd.grad(y, [x, u], retain_graph=True)
    g2 = ft.autograd.grad(y, [x, u], allow_unused=True, retain_graph=True)
    assert g2[1] is None
    g3 = ft.autograd.grad(y, [x, u], materialize_grads=True, retain_graph=True)
    assert g3[1].tolist() == 0.0
    (g4,) = ft.autograd.grad(x * x, x, grad_outputs=ft.tensor([1.0, -1.0]))
    assert g4.tolist() == [2.0, -4.0]
    with pytest.raises(RuntimeError, match="does not require grad"):
        ft.autograd.grad((x * 2).sum(), ft.ones(2))


def test_only_executed_nodes_are_freed():
    x = ft.tensor([1.0, 2.0], requires_grad=True)
    h = x.exp()                    # saves its output; not executed by grad(y, h)
    y = (h * h).sum()
    (gh,) = ft.autograd.grad(y, h)
    assert gh.tolist() == (2 * h).tolist()
    h.sum().backward()             # exp's saved value is still there
    np.testing.assert_allclose(x.grad.numpy(), np.exp([1.0, 2.0]), rtol=1e-6)
    with pytest.raises(RuntimeError, match=FREED):
        y.backward()               # y's own nodes were executed and freed


def test_autograd_grad_wrt_intermediate_and_leaf():
    x = ft.tensor([1.0, 2.0], requires_grad=True)
    h = x * x
    y = (h * x).sum()              # y = x^3 through h, and directly
    gx, gh = ft.autograd.grad(y, [x, h])
    assert gx.tolist() == [3.0, 12.0] and gh.tolist() == [1.0, 2.0]


def test_double_backward_and_create_graph():
    x = ft.tensor([0.5, 1.5], dtype=ft.float64, requires_grad=True)
    y = (x.sin() * x ** 2).sum()
    (g,) = ft.autograd.grad(y, x, create_graph=True)
    assert g.requires_grad and g.grad_fn is not None
    (h,) = ft.autograd.grad(g.sum(), x)
    a = x.detach().numpy()
    want = -np.sin(a) * a ** 2 + 4 * a * np.cos(a) + 2 * np.sin(a)
    np.testing.assert_allclose(h.numpy(), want, rtol=1e-10)
    x.grad = None
    y = (x ** 3).sum()
    y.backward(create_graph=True)
    assert x.grad.requires_grad
    (x.grad.sum()).backward()     # accumulates d/dx sum(3x^2) = 6x into x.grad (graph kept)
    np.testing.assert_allclose(x.grad.detach().numpy(), 3 * a ** 2 + 6 * a)


def test_third_derivative():
    x = ft.tensor(0.7, dtype=ft.float64, requires_grad=True)
    y = x.exp() * x.sin()
    (g1,) = ft.autograd.grad(y, x, create_graph=True)
    (g2,) = ft.autograd.grad(g1, x, create_graph=True)
    (g3,) = ft.autograd.grad(g2, x)
    a = 0.7
    np.testing.assert_allclose(g3.item(), 2 * np.exp(a) * (np.cos(a) - np.sin(a)), rtol=1e-10)


# ---------------------------------------------------------------------------
# in-place and versions

def test_leaf_inplace_error_and_no_grad_update():
    w = ft.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in "
                                           "an in-place operation."):
        w.add_(1)
    with pytest.raises(RuntimeError, match="^a view of a leaf Variable that requires grad"):
        w[0] = 3.0                                   # torch writes through the view w[0]
    with pytest.raises(RuntimeError, match="^a leaf Variable that requires grad"):
        w[ft.tensor([0])] = 3.0                      # index_put_ on w itself
    with pytest.raises(RuntimeError, match="^a leaf Variable that requires grad"):
        w[:] = 3.0                                   # all of w: a copy_ into w
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad"):
        w[:1].mul_(2)
    with ft.no_grad():
        w.sub_(0.5)
    assert w.tolist() == [0.5, 0.5] and w._version == 1 and w.is_leaf


def test_view_taken_under_no_grad_cannot_be_modified_with_grad_on():
    """torch refuses it: the write could not be recorded on the base's history."""
    x = ft.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 1
    for base in (x, y):
        with ft.no_grad():
            v = base[1:]
        for write in (lambda: v.mul_(2), lambda: v.zero_(), lambda: v.__setitem__(0, 5.0)):
            with pytest.raises(RuntimeError, match="A view was created in no_grad mode and is "
                                                   "being modified inplace with grad mode "
                                                   "enabled"):
                write()
        with ft.no_grad():
            v.mul_(2)                                 # both under no_grad: allowed
    assert x.tolist() == [1.0, 4.0, 6.0] and y.tolist() == [1.0, 4.0, 6.0]
    c = ft.tensor([1.0, 2.0])                         # a base that does not require grad
    with ft.no_grad():
        w = c[:1]
    w.mul_(3)
    assert c.tolist() == [3.0, 2.0]


def test_outputs_of_multi_view_ops_cannot_be_modified_in_place_under_grad():
    """unbind/split/chunk return several views of one base; torch refuses an in-place op
    on one of them while recording (one node cannot be rebased for one output)."""
    x = ft.ones(3, 4, requires_grad=True)
    y = x * 1
    for view, msg in ((lambda: y.unbind(1)[3], "Output 3 of Unbind is a view"),
                      (lambda: y.split(2, 1)[1], "Output 1 of Split is a view"),
                      (lambda: y.chunk(2, 1)[0], "Output 0 of Split is a view")):
        with pytest.raises(RuntimeError, match=msg + " and is being modified inplace"):
            view().mul_(2)
    with ft.no_grad():
        y.unbind(0)[0].mul_(2)                  # not recorded: allowed
    c = ft.ones(2, 2)
    c.unbind(0)[1].add_(1)                      # nothing requires grad: allowed
    assert y[0].tolist() == [2.0] * 4 and c.tolist() == [[1.0, 1.0], [2.0, 2.0]]


def test_gradient_argument_errors_say_what_and_where():
    x = ft.ones(2, 3, dtype=ft.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"attempting to assign a gradient of size '\[3\]' "
                                           r"to a tensor of size '\[2, 3\]'"):
        x.grad = ft.ones(3, dtype=ft.float64)
    with pytest.raises(RuntimeError, match="attempting to assign a gradient with dtype "
                                           "'float32' to a tensor with grad_dtype 'float64'"):
        x.grad = ft.ones(2, 3)
    with pytest.raises(RuntimeError, match="got 2 tensors and 1 gradients"):
        ft.autograd.backward([x.sum(), x.sum()], [ft.tensor(1.0, dtype=ft.float64)])
    with pytest.raises(RuntimeError, match="`inputs` argument to `backward\\(\\)` cannot be "
                                           "empty"):
        x.sum().backward(inputs=[])

    def halve(g):
        return g[:1]
    x.register_hook(halve)
    with pytest.raises(RuntimeError, match="hook 'halve' has changed the size of value"):
        (x * 2).sum().backward()


def test_output_saved_by_an_inplace_op_on_a_view_is_version_checked():
    """y[0].exp_() saves its result, which lives in y's storage: a later in-place write to
    y or any view of it (they share one version counter) makes backward refuse, as torch;
    sin_ saves its input (a copy), so writes after it are fine."""
    for first, then in ((lambda y: y[:].exp_(), lambda y: y[:].add_(1.5)),
                        (lambda y: y[0].exp_(), lambda y: y.add_(1.5)),
                        (lambda y: y[0].exp_(), lambda y: y[1].add_(1.5))):
        x = ft.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=ft.float64, requires_grad=True)
        y = x * 1
        first(y)
        then(y)
        with pytest.raises(RuntimeError, match="modified by an inplace operation.*which is "
                                               "output 0 of ExpBackward0"):
            y.sum().backward()
    x = ft.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=ft.float64, requires_grad=True)
    y = x * 1
    y[0].sin_()
    y[0].add_(1.5)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [np.cos([1.0, 2.0]), [1.0, 1.0]])


def test_version_mismatch_error_names_node_and_versions():
    x = ft.tensor([1.0, 2.0], requires_grad=True)
    y = x.exp()
    z = y * y
    y.add_(1)
    with pytest.raises(RuntimeError) as e:
        z.sum().backward()
    msg = str(e.value)
    assert ("one of the variables needed for gradient computation has been modified by an "
            "inplace operation") in msg
    assert "output 0 of ExpBackward0" in msg and "is at version 1; expected version 0 instead" in msg
    assert "saved for backward by" in msg and "add_" in msg


def test_inplace_on_nonleaf_rebases_history():
    x = ft.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    y.mul_(y)                     # y = (3x)^2, saved old y is copied before the write
    assert y.grad_fn.name() == "MulBackward0" and y._version == 1
    y.sum().backward()
    assert x.grad.tolist() == [18.0, 36.0]
    x.grad = None
    z = x * 1
    z[0] = z[1] * 5               # CopySlices
    assert z.grad_fn.name() == "torch::autograd::CopySlices"
    z.sum().backward()
    assert x.grad.tolist() == [0.0, 6.0]


def test_inplace_on_view_updates_base_history():
    x = ft.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    y = x * 1
    y[0].mul_(3)
    (y * ft.tensor([[1.0, 2.0], [3.0, 4.0]])).sum().backward()
    assert x.grad.tolist() == [[3.0, 6.0], [3.0, 4.0]]



def test_view_taken_before_its_base_changed_reads_the_new_history():
    """torch regenerates such a view's grad_fn (AsStridedBackward0 of the base's new
    history): the gradient flows through the in-place op that came after the view."""
    x = ft.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    y = x * 2
    w = y[1]
    y.mul_(10)
    assert w.grad_fn.name() == "AsStridedBackward0" and w.tolist() == [60.0, 80.0]
    (w * w).sum().backward()
    assert x.grad.tolist() == [[0.0, 0.0], [2400.0, 3200.0]]      # d(20x)^2/dx = 800x
    x.grad = None
    y = x * 1
    v = y.view(4)                                  # a sibling of the view written through
    y[0].mul_(3)
    assert v.grad_fn.name() == "AsStridedBackward0" and v.tolist() == [3.0, 6.0, 3.0, 4.0]
    (v * ft.arange(4.0)).sum().backward()
    assert x.grad.tolist() == [[0.0, 3.0], [2.0, 3.0]]


def test_relu_inplace_in_a_chain():
    x = ft.tensor([-1.0, 2.0], requires_grad=True)
    h = x * 2
    h.relu_()
    (h * h).sum().backward()
    assert x.grad.tolist() == [0.0, 16.0]


# ---------------------------------------------------------------------------
# hooks

def test_tensor_hooks_replace_gradient_and_remove():
    x = ft.tensor([1.0, 2.0], requires_grad=True)
    h = x * 3
    seen = []
    handle = h.register_hook(lambda g: seen.append(g.tolist()) or g * 10)
    h.register_hook(lambda g: g + 1)          # runs second, sees the replaced gradient
    (h * h).sum().backward()
    assert seen == [[6.0, 12.0]] and x.grad.tolist() == [183.0, 363.0]
    x.grad = None
    handle.remove()
    h = x * 3
    with h.register_hook(lambda g: g * 0) as handle2:
        assert handle2.id >= 0
        h.sum().backward(retain_graph=True)
    assert x.grad.tolist() == [0.0, 0.0]
    h.sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]


def test_leaf_hook_and_post_accumulate_hook():
    x = ft.tensor([1.0, 2.0], requires_grad=True)
    x.register_hook(lambda g: g * 2)
    calls = []
    x.register_post_accumulate_grad_hook(lambda t: calls.append(t.grad.tolist()))
    (x * x).sum().backward()
    assert x.grad.tolist() == [4.0, 8.0] and calls == [[4.0, 8.0]]
    with pytest.raises(RuntimeError, match="post accumulate grad hooks cannot be registered on "
                                           "non-leaf"):
        (x * 1).register_post_accumulate_grad_hook(lambda t: None)
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        ft.ones(1).register_hook(lambda g: g)


def test_tensor_hook_result_must_keep_dtype_and_shape():
    # every place that runs tensor hooks (non-leaf, leaf, create_graph) checks as torch does
    def run(where, result, create_graph=False):
        x = ft.tensor([1.0, 2.0], requires_grad=True)
        h = x * 3
        (x if where == "leaf" else h).register_hook(result)
        if create_graph:
            ft.autograd.grad((h * h).sum(), x, create_graph=True)
        else:
            (h * h).sum().backward()
        return x.grad
    for where, cg in (("leaf", False), ("nonleaf", False), ("nonleaf", True)):
        with pytest.raises(RuntimeError, match=r"hook '<lambda>' has changed the type of value "
                                               r"\(was float32 got float64\)"):
            run(where, lambda g: g.double(), cg)
        with pytest.raises(RuntimeError, match="hook '<lambda>' has changed the size of value"):
            run(where, lambda g: g[:1], cg)
        with pytest.raises(TypeError, match="but hook '<lambda>' returned 'float'"):
            run(where, lambda g: 1.0, cg)
    assert run("nonleaf", lambda g: g * 2).tolist() == [36.0, 72.0]   # d(9x^2)/dx, doubled


def test_hook_under_create_graph_sees_differentiable_grad():
    x = ft.tensor([1.0, 2.0], dtype=ft.float64, requires_grad=True)
    h = x * x
    got = []
    handle = h.register_hook(lambda g: got.append(g.requires_grad) or g * h)  # grad: ones
    (g,) = ft.autograd.grad(h.sum(), x, create_graph=True)    # g = 2x * h = 2x^3
    assert got == [False] and g.requires_grad
    # the hook stays on h's node: the double backward passes through h and calls it again
    (gg,) = ft.autograd.grad(g.sum(), x, retain_graph=True)
    assert gg.tolist() == [2 * 1 + 4 * 1, 2 * 4 + 4 * 16] and len(got) == 2
    handle.remove()
    (gg,) = ft.autograd.grad(g.sum(), x)
    assert gg.tolist() == [6.0, 24.0]


# ---------------------------------------------------------------------------
# grad modes

def test_no_grad_enable_grad_set_grad_enabled():
    x = ft.ones(2, requires_grad=True)
    with ft.no_grad():
        assert not ft.is_grad_enabled() and not (x * 2).requires_grad
        with ft.enable_grad():
            assert (x * 2).requires_grad
    assert ft.is_grad_enabled()

    @ft.no_grad()
    def f(t):
        return t * 2
    assert not f(x).requires_grad
    ft.set_grad_enabled(False)
    assert not ft.is_grad_enabled()
    ft.set_grad_enabled(True)
    with ft.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert ft.is_grad_enabled()

    @ft.enable_grad()
    def g(t):
        return t * 2
    with ft.no_grad():
        assert g(x).requires_grad


def test_inference_mode_tensors_cannot_be_saved():
    x = ft.tensor([1.0, 2.0], requires_grad=True)
    with ft.inference_mode():
        c = ft.tensor([3.0, 4.0]) * 2
        assert not (x * 2).requires_grad and c.is_inference()
    (x + c).sum().backward()                  # add saves nothing: allowed, as torch
    with pytest.raises(RuntimeError, match="Inference tensors cannot be saved for backward."):
        x * c

    @ft.inference_mode()
    def f():
        return ft.ones(1)
    assert f().is_inference()


def test_retain_grad_follows_an_inplace_op():
    """After y.mul_(3) the retained .grad is the gradient of y's new value (torch moves
    its retains_grad hook to the new history); on a view too."""
    x = ft.tensor([1.0, -2.0], requires_grad=True)
    y = x * 2
    y.retain_grad()
    y.mul_(3)
    assert y.retains_grad
    (y * y).sum().backward()
    assert y.grad.tolist() == [12.0, -24.0]          # 2 * (6x), not 3 * 2 * (6x)
    z = x * 2
    v = z[1:]
    v.retain_grad()
    z.retain_grad()
    v.mul_(3)                                         # z's history becomes CopySlices
    assert z.retains_grad and v.retains_grad
    ((z * z).sum() + v.sum()).backward()
    assert z.grad.tolist() == [4.0, -23.0] and v.grad.tolist() == [1.0]


def test_grad_mode_decorators_leave_the_callers_mode():
    x = ft.ones(2, requires_grad=True)

    @ft.set_grad_enabled(False)           # decorating must not switch the mode off here
    def f(t):
        assert not ft.is_grad_enabled()
        return t * 2
    assert ft.is_grad_enabled() and (x * 2).requires_grad
    assert not f(x).requires_grad and ft.is_grad_enabled()

    @ft.no_grad                           # without parentheses, as torch allows
    def g(t):
        return t * 2

    @ft.inference_mode
    def h(t):
        return t * 2
    assert not g(x).requires_grad and g.__name__ == "g"
    assert h(x).is_inference() and ft.is_grad_enabled()


def test_set_grad_enabled_takes_a_bool_only():
    for mode in (0, 1.0, ft.tensor(True)):
        with pytest.raises(TypeError, match="argument 'enabled' \\(position 1\\) must be bool"):
            ft.set_grad_enabled(mode)
        assert ft.is_grad_enabled()


def test_inference_mode_false_turns_grad_mode_on():
    with ft.no_grad():
        with ft.inference_mode(False):
            assert ft.is_grad_enabled() and not ft.is_inference_mode_enabled()
        assert not ft.is_grad_enabled()
    with ft.inference_mode():
        with ft.inference_mode(False):
            assert ft.is_grad_enabled() and not ft.is_inference_mode_enabled()
        assert not ft.is_grad_enabled() and ft.is_inference_mode_enabled()


def test_grad_mode_on_a_generator_holds_only_inside_it():
    log = []

    @ft.no_grad()
    def gen():
        try:
            got = yield ft.is_grad_enabled()
            log.append(("sent", got, ft.is_grad_enabled()))
            yield 1
        except KeyError:
            log.append(("thrown", ft.is_grad_enabled()))
            yield 2
        finally:
            log.append(("finally", ft.is_grad_enabled()))

    g = gen()
    assert next(g) is False and ft.is_grad_enabled()     # the caller's mode between yields
    assert g.send("s") == 1 and ft.is_grad_enabled()
    assert g.throw(KeyError("k")) == 2
    g.close()
    assert log == [("sent", "s", False), ("thrown", False), ("finally", False)]

    @ft.enable_grad()
    def empty():
        return "done"
        yield                                            # noqa: unreachable (a generator)
    assert list(empty()) == [] and ft.is_grad_enabled()  # no RuntimeError(StopIteration)
    with ft.no_grad():
        assert next(gen()) is False and not ft.is_grad_enabled()


def test_grad_mode_is_thread_local():
    seen = {}

    def worker():
        seen["other"] = ft.is_grad_enabled()
    with ft.no_grad():
        th = threading.Thread(target=worker)
        th.start()
        th.join()
        assert not ft.is_grad_enabled()
    assert seen["other"] is True


# ---------------------------------------------------------------------------
# anomaly detection and gradcheck

def test_detect_anomaly_names_node_with_forward_traceback():
    x = ft.tensor([0.0, 1.0], requires_grad=True)
    with ft.autograd.detect_anomaly():
        y = x.sqrt()                  # the line the error must point to
        z = y * 0
        with pytest.raises(RuntimeError) as e, np.errstate(all="ignore"):
            z.sum().backward()
    msg = str(e.value)
    assert "Function 'SqrtBackward0' returned nan values in its 0th output." in msg
    assert "y = x.sqrt()" in msg and "test_facade_autograd.py" in msg
    ft.autograd.set_detect_anomaly(True)
    try:
        assert ft.autograd.is_anomaly_enabled()
    finally:
        ft.autograd.set_detect_anomaly(False)


def test_anomaly_warnings_as_torch():
    """detect_anomaly warns that it is on; a backward error in anomaly mode is preceded by a
    warning naming the node and its forward traceback (stderr when warnings are errors);
    the same warnings as torch's."""
    torch = pytest.importorskip("torch")
    seen = {}
    for lib in (ft, torch):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            with pytest.raises(RuntimeError, match="modified by an inplace operation"):
                with lib.autograd.detect_anomaly():
                    a = lib.randn(5, requires_grad=True)
                    d1 = a + 1
                    d2 = d1 ** 2
                    d1 += 1
                    lib.autograd.grad(d2.sum(), a)
        seen[lib] = [str(m.message).split(".")[0] for m in w]
        assert "d2 = d1 ** 2" in str(w[1].message)
    assert seen[ft] == seen[torch] == ["Anomaly Detection has been enabled",
                                       "Error detected in PowBackward0"]


def test_anomaly_mode_gives_same_gradients_as_fused_program():
    def run():
        x = ft.tensor(A, requires_grad=True, dtype=ft.float64)
        h = (x @ t64(B, False)).tanh()
        h.retain_grad()
        h.register_hook(lambda g: g * 2)
        loss = (h * h).sum() + x.softmax(1).max()
        loss.backward()
        return x.grad.numpy(), h.grad.numpy()
    a, ha = run()
    with ft.autograd.detect_anomaly():
        b, hb = run()
    np.testing.assert_allclose(a, b, rtol=1e-12)
    np.testing.assert_allclose(ha, hb, rtol=1e-12)


def test_gradcheck_passes_and_catches_a_wrong_gradient():
    x = t64([0.3, -0.7, 1.1])
    assert ft.autograd.gradcheck(lambda t: (t.sin() * t).cumsum(0), (x,))
    assert ft.autograd.gradgradcheck(lambda t: (t.exp() * t ** 2).sum(), (x,))

    class Wrong(ft.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            return a * b

        @staticmethod
        def backward(ctx, g):
            a, b = ctx.saved_tensors
            return g * b, g * a * 2           # wrong for b
    b = t64([1.0, 2.0, 3.0])
    with pytest.raises(ft.autograd.GradcheckError) as e:
        ft.autograd.gradcheck(Wrong.apply, (x, b))
    msg = str(e.value)
    assert "with respect to input 1" in msg and "numerical:" in msg and "analytical:" in msg
    assert not ft.autograd.gradcheck(Wrong.apply, (x, b), raise_exception=False)
    with pytest.raises(ft.autograd.GradcheckError, match="Numerical gradient for function "
                                                         "expected to be zero"):
        ft.autograd.gradcheck(lambda t: (t >= 0).double(), (t64([0.0, 1.0]),))  # a step at 0
    with pytest.raises(ValueError, match="but none of them have requires_grad=True"):
        ft.autograd.gradcheck(lambda t: t.sin(), (x.detach(),))


# ---------------------------------------------------------------------------
# what functrans adds

def test_backward_program_reads_saved_values_and_never_recomputes_forward():
    x = ft.tensor(A, requires_grad=True)
    y = (x.sin().exp() @ ft.tensor(B)).tanh().sum()
    bj = ft.autograd.backward_jaxpr(y)
    prims = [e.primitive.name for e in bj.eqns]
    assert "cos" in prims                       # derivative side of sin
    for forward_op in ("sin", "exp", "tanh"):
        assert forward_op not in prims, str(bj)
    assert isinstance(bj, ft.ClosedJaxpr) and str(bj).startswith("{ lambda")
    assert any("output 0 of TanhBackward0" in d for d in bj.inputs)
    y.backward()
    xa = A
    s = np.sin(xa)
    h = np.exp(s) @ B
    gh = 1 - np.tanh(h) ** 2
    want = (gh @ B.T) * np.exp(s) * np.cos(xa)
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-5)


def test_backward_program_is_cached_by_structure():
    w = ft.randn(4, 3, requires_grad=True)

    def step(seed):
        x = ft.randn(5, 4)
        return ((x @ w).relu() ** 2).mean()
    engine.clear_cache()
    before = dict(engine.CACHE_STATS)
    step(0).backward()                   # first seen: interpreted node by node, no program
    assert engine.CACHE_STATS == before
    step(0).backward()                   # seen again: its program is derived
    assert engine.CACHE_STATS["misses"] == before["misses"] + 1
    for s in range(5):
        step(s).backward()
    assert engine.CACHE_STATS["misses"] == before["misses"] + 1
    assert engine.CACHE_STATS["hits"] == before["hits"] + 5


def test_saved_tensors_report():
    x = ft.randn(8, 16, requires_grad=True)
    h = x.tanh()                                  # REPORT-LINE
    y = (h * 2).sum()
    rep = ft.autograd.saved_tensors_report(y)
    assert len(rep) == 2             # tanh's output, and the 2 that d(h*2)/dh needs
    e, s = rep.entries
    assert e["node"] == "TanhBackward0" and e["shape"] == (8, 16) and e["dtype"] == "float32"
    assert e["bytes"] == 8 * 16 * 4 and s["node"] == "MulBackward0" and s["shape"] == ()
    assert rep.total_bytes == 512 + 4
    assert "REPORT-LINE" in e["source"] and "test_facade_autograd.py" in e["source"]
    assert "516 B in total" in str(rep)
    y.backward()
    assert ft.autograd.saved_tensors_report(y).total_bytes == 0


def test_saved_tensors_report_sources_of_each_entry_path():
    """The source line of a saved value is the user's, whichever way the op was reached:
    a module function (ft.sin), a method, an operator, a composite op (make_node looks
    from the frame above its caller's)."""
    x = ft.randn(4, requires_grad=True)
    w = ft.randn(4)
    a = ft.sin(x)                                 # SRC-FUNCTION
    b = a.tanh()                                  # SRC-METHOD
    c = b * w                                     # SRC-OPERATOR
    d = ft.nn.functional.softmax(c, dim=0)        # SRC-COMPOSITE
    rep = ft.autograd.saved_tensors_report(d.sum())
    sources = {e["node"]: e["source"] for e in rep.entries}
    for node, mark in [("SinBackward0", "SRC-FUNCTION"), ("TanhBackward0", "SRC-METHOD"),
                       ("MulBackward0", "SRC-OPERATOR"), ("SoftmaxBackward0", "SRC-COMPOSITE")]:
        assert mark in sources[node] and "test_facade_autograd.py" in sources[node], node


def test_error_texts_in_api_md():
    x = ft.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar "
                                           "outputs"):
        (x * 1).backward()
    with pytest.raises(RuntimeError, match="Can't call numpy\\(\\) on Tensor that requires "
                                           "grad. Use tensor.detach\\(\\).numpy\\(\\) instead."):
        x.numpy()


def test_first_backward_interpreted_and_repeated_backward_agree():
    """A graph structure seen once runs node by node; when it repeats, its program is
    derived. Same gradients, hooks, retained gradients and freeing either way."""
    engine.clear_cache()
    misses = engine.CACHE_STATS["misses"]
    seen, counts = [], []

    def run():
        x = ft.tensor(np.array([0.3, -0.7, 1.1]), requires_grad=True)
        w = ft.tensor(np.array([[0.5, -1.0, 2.0]] * 3), requires_grad=True)
        h = (w @ x).tanh()
        h.retain_grad()
        h.register_hook(lambda g: seen.append(g.numpy().copy()) or g * 2)
        loss = (h * x.sin()).sum() + (x ** 2).max()
        loss.backward()
        counts.append(engine.CACHE_STATS["misses"] - misses)
        with pytest.raises(RuntimeError, match="second time"):
            loss.backward()
        return x.grad.numpy(), w.grad.numpy(), h.grad.numpy()
    first = run()
    second = run()
    assert counts[0] == 0 and counts[1] >= 1      # interpreted, then derived
    for a, b in zip(first, second):
        np.testing.assert_allclose(a, b, rtol=1e-13)
    np.testing.assert_allclose(seen[0], seen[1], rtol=1e-13)


def test_rank0_gradients_are_arrays_on_the_cpu_in_both_tiers():
    """The node-by-node tier once handed back NumPy scalars (which read as a CUDA device)."""
    for _ in range(2):                      # first seen (interpreted), then derived
        x = ft.tensor(2.0, requires_grad=True)
        (x * x).backward()
        assert type(x.grad._data) is np.ndarray and x.grad.device.type == "cpu"
        assert float(x.grad) == 4.0


def test_hooks_on_op_nodes():
    """Hooks on an op's grad_fn run in both schedules, and a graph without them keeps its
    program: the hooked node is a boundary of its own structure (torch's values:
    tests/oracle, autograd:hooks:op_node)."""
    seen = []
    for _ in range(3):                      # first sight, then the derived program
        x = ft.tensor([1.0, 2.0], requires_grad=True)
        y = x * 2
        y.grad_fn.register_prehook(lambda go: (go[0] * 10,))
        y.grad_fn.register_hook(lambda gi, go: seen.append((gi[0].tolist(), go[0].tolist())))
        (y * y).sum().backward()
        assert x.grad.tolist() == [80.0, 160.0]
        x = ft.tensor([1.0, 2.0], requires_grad=True)
        (x * 2 * x * 2).sum().backward()     # the same ops without hooks
        assert x.grad.tolist() == [8.0, 16.0]
    assert seen == [([80.0, 160.0], [40.0, 80.0])] * 3
    y.grad_fn.metadata["k"] = 1
    assert y.grad_fn.metadata == {"k": 1}


def test_autograd_grad_refuses_empty_inputs():
    x = ft.tensor([1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=r"`inputs` argument to `grad\(\)` cannot be empty"):
        ft.autograd.grad(2 * x, [], grad_outputs=ft.tensor([1.0]))
