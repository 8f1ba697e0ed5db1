"""nn.utils: clip_grad_norm_ (returns the total norm) and clip_grad_value_, as PyTorch."""
import math

import numpy as np
import pytest

import functrans as ft
import functrans.nn as nn


def _params(grads):
    ps = []
    for g in grads:
        p = ft.zeros(*np.shape(g), dtype=ft.float64, requires_grad=True)
        p.grad = ft.tensor(np.asarray(g, np.float64), dtype=ft.float64)
        ps.append(p)
    return ps


def test_clip_grad_norm_scales_and_returns_the_total_norm():
    g1, g2 = np.array([3.0, 4.0]), np.array([[12.0]])
    ps = _params([g1, g2])
    total = nn.utils.clip_grad_norm_(ps, max_norm=1.0)
    assert isinstance(total, ft.Tensor) and total.item() == pytest.approx(13.0)
    coef = 1.0 / (13.0 + 1e-6)
    np.testing.assert_allclose(ps[0].grad.numpy(), g1 * coef, rtol=1e-12)
    np.testing.assert_allclose(ps[1].grad.numpy(), g2 * coef, rtol=1e-12)


def test_clip_grad_norm_below_the_threshold_changes_nothing():
    ps = _params([[0.3, 0.4]])
    total = nn.utils.clip_grad_norm_(ps, 5.0)
    assert total.item() == pytest.approx(0.5)
    np.testing.assert_array_equal(ps[0].grad.numpy(), [0.3, 0.4])


@pytest.mark.parametrize("norm_type, want", [(1.0, 10.0), (math.inf, 4.0), (3.0, 100 ** (1 / 3))])
def test_clip_grad_norm_other_norms(norm_type, want):
    ps = _params([[1.0, -2.0], [3.0, -4.0]]) if norm_type != 3.0 else _params([[1.0, 2.0],
                                                                              [3.0, 4.0]])
    total = nn.utils.clip_grad_norm_(ps, 1.0, norm_type=norm_type)
    assert total.item() == pytest.approx(want)


def test_clip_grad_norm_details():
    p = ft.zeros(2, requires_grad=True)
    assert nn.utils.clip_grad_norm_([p], 1.0).item() == 0.0           # no gradients
    p.grad = ft.tensor([3.0, 4.0])
    assert nn.utils.clip_grad_norm_(p, 1.0).item() == pytest.approx(5.0)   # a single tensor
    assert p.grad.dtype == ft.float32
    p.grad = ft.tensor([float("nan"), 1.0])
    with pytest.raises(RuntimeError, match="is non-finite, so it cannot be clipped"):
        nn.utils.clip_grad_norm_([p], 1.0, error_if_nonfinite=True)


def test_clip_grad_value():
    ps = _params([[-3.0, 0.5, 2.0]])
    assert nn.utils.clip_grad_value_(ps, 1.0) is None
    np.testing.assert_array_equal(ps[0].grad.numpy(), [-1.0, 0.5, 1.0])


def test_parameters_to_vector_and_back():
    m = nn.Linear(3, 2)
    v = nn.utils.parameters_to_vector(m.parameters())
    assert v.shape == (8,)
    nn.utils.vector_to_parameters(ft.arange(8.0), m.parameters())
    assert m.weight.tolist() == [[0, 1, 2], [3, 4, 5]] and m.bias.tolist() == [6, 7]
    assert m.weight.requires_grad and m.weight.is_leaf
