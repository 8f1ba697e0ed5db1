"""A list (or other non-array) where torch expects a Tensor raises torch's TypeError, for
every ft.nn.functional function and the layers built on them (one check, in the dispatch)."""
import inspect

import numpy as np
import pytest

import functrans as ft
import functrans.nn as nn
import functrans.nn.functional as F

pytestmark = pytest.mark.usefixtures("x64")  # float64 references: conftest.x64

FUNCTIONS = sorted(n for n, f in vars(F).items()
                   if not n.startswith("_") and inspect.isfunction(f))


@pytest.mark.parametrize("name", FUNCTIONS)
def test_every_function_wants_a_tensor_as_its_first_argument(name):
    fn = getattr(F, name)
    first = next(iter(inspect.signature(fn).parameters))
    with pytest.raises(TypeError, match=rf"^{name}\(\): argument '{first}' \(position 1\) "
                                        r"must be Tensor, not list$"):
        fn([1.0, 2.0])


def test_the_issues_example_and_other_positions():
    with pytest.raises(TypeError, match=r"^linear\(\): argument 'input' \(position 1\) must be "
                                        r"Tensor, not list$"):
        nn.Linear(2, 2)([1.0, 2.0])
    with pytest.raises(TypeError, match=r"argument 'target' \(position 2\) must be Tensor, "
                                        r"not list"):
        F.cross_entropy(ft.randn(2, 3), [0, 1])
    with pytest.raises(TypeError, match=r"argument 'weight' \(position 2\) must be Tensor, "
                                        r"not tuple"):
        F.linear(ft.ones(2), (1.0, 2.0))
    with pytest.raises(TypeError, match="must be Tensor, not NoneType"):
        F.relu(None)


@pytest.mark.parametrize("layer, shape", [
    (nn.Linear(2, 2), (2,)), (nn.Conv2d(1, 1, 3), (1, 1, 4, 4)), (nn.LayerNorm(2), (2,)),
    (nn.Embedding(4, 2), (2,)), (nn.ReLU(), (2,)),
    (nn.GELU(), (2,)), (nn.Dropout(0.5), (2,)), (nn.Sequential(nn.Linear(2, 2)), (2,))])
def test_layers_refuse_lists(layer, shape):
    """(BatchNorm is left out: torch's own BatchNorm reads input.dim() first and raises
    AttributeError, as functrans does.)"""
    with pytest.raises(TypeError, match=r"\(\): argument 'input' \(position 1\) must be "
                                        r"Tensor, not list"):
        layer(np.zeros(shape, np.int64 if isinstance(layer, nn.Embedding) else
                       np.float32).tolist())


def test_losses_refuse_lists():
    for loss, target in [(nn.CrossEntropyLoss(), [0, 1]), (nn.MSELoss(), [[0.0] * 3] * 2)]:
        with pytest.raises(TypeError, match=r"argument 'target' \(position 2\) must be Tensor"):
            loss(ft.randn(2, 3), target)


def test_arrays_tracers_and_optional_none_still_pass():
    out = F.linear(np.ones((1, 2)), np.ones((3, 2)))           # the functional path
    np.testing.assert_array_equal(np.asarray(out), [[2.0, 2.0, 2.0]])
    g = ft.grad(lambda w: F.linear(np.ones((1, 2)), w).sum())(np.ones((3, 2)))
    np.testing.assert_array_equal(g, np.ones((3, 2)))
    x = ft.randn(3, 2)
    assert F.batch_norm(x, None, None, training=True).shape == (3, 2)
    assert F.linear(x, ft.ones(4, 2), bias=None).shape == (3, 4)
    assert F.relu(np.float32(-1.0)) == 0.0
