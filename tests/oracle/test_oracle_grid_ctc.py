"""F.affine_grid, F.grid_sample and F.ctc_loss / nn.CTCLoss against PyTorch: values,
grad_fn names, gradients in the input, the grid and theta, and in the log-probabilities
(impossible alignments: inf and NaN gradients, or 0 with zero_infinity), and the errors."""
import warnings

import numpy as np
import pytest

import oracle

R = np.random.RandomState(0)
X = R.randn(2, 3, 5, 6)
GRID = R.uniform(-1.3, 1.3, (2, 4, 3, 2))
THETA = R.randn(2, 2, 3) * 0.8
LOGITS = R.randn(8, 3, 5)
TARGETS = np.array([[1, 2, 2, 0], [3, 1, 4, 4], [2, 0, 0, 0]])


def _sample(mode, pad, ac):
    return lambda L, x, g: L.nn.functional.grid_sample(x, g, mode=mode, padding_mode=pad,
                                                       align_corners=ac)


def _ctc(reduction="mean", zero_infinity=False, blank=0, lengths=(8, 6, 7), tl=(3, 4, 1)):
    def fn(L, logits):
        lp = logits.log_softmax(2)
        return L.nn.functional.ctc_loss(lp, L.tensor(TARGETS), L.tensor(lengths),
                                        L.tensor(tl), blank=blank, reduction=reduction,
                                        zero_infinity=zero_infinity)
    return fn


def _ctc_concat(L, logits):
    """1-D concatenated targets, lists of lengths, an impossible sample (3 frames cannot
    hold 1 1 1, which needs 5), blank last."""
    lp = logits[:3].log_softmax(2)
    return [L.nn.functional.ctc_loss(lp, L.tensor([1, 1, 1, 2, 2, 3]), [3, 3, 3], [3, 2, 1],
                                     blank=4, reduction="none", zero_infinity=z)
            for z in (False, True)]


def _ctc_module(L, logits):
    loss = L.nn.CTCLoss(blank=1, zero_infinity=True)
    return loss(logits.log_softmax(2), L.tensor(np.where(TARGETS == 1, 0, TARGETS)),
                L.tensor([8, 8, 8]),
                L.tensor([3, 4, 1])), repr(loss)


def _ctc_unbatched(L, logits):
    return L.nn.functional.ctc_loss(logits[:, 0].log_softmax(1), L.tensor([1, 2]), [8], [2])


def _default_align(L, x, g, theta):
    """align_corners=None: False, with torch's UserWarning, for both functions."""
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = (L.nn.functional.grid_sample(x, g),
               L.nn.functional.affine_grid(theta, (2, 3, 4, 5)))
    return out, [str(m.message)[:60] for m in w]


CASES = {
    **{f"grid_sample:{mode}_{pad}_{'corners' if ac else 'centers'}": (_sample(mode, pad, ac),
                                                                       X, GRID)
       for mode in ("bilinear", "nearest") for pad in ("zeros", "border", "reflection")
       for ac in (True, False)},
    "grid_sample:float32": (lambda L, x, g: L.nn.functional.grid_sample(
        x.float(), g.float(), align_corners=False), X, GRID),
    "grid_sample:default_align_corners": (_default_align, X, GRID, THETA),
    **{f"affine_grid:{'corners' if ac else 'centers'}": (
        lambda L, t, ac=ac: L.nn.functional.affine_grid(t, (2, 3, 4, 5), align_corners=ac),
        THETA) for ac in (True, False)},
    "affine_grid:3d": (lambda L, t: L.nn.functional.affine_grid(t, (2, 1, 2, 3, 4),
                                                                align_corners=False),
                       R.randn(2, 3, 4)),
    "affine_grid:spatial_transformer": (lambda L, x, t: L.nn.functional.grid_sample(
        x, L.nn.functional.affine_grid(t, (2, 3, 4, 4), align_corners=False),
        align_corners=False), X, THETA),
    "ctc_loss:mean": (_ctc(), LOGITS),
    "ctc_loss:sum": (_ctc("sum"), LOGITS),
    "ctc_loss:none": (_ctc("none"), LOGITS),
    "ctc_loss:none_zero_infinity": (_ctc("none", True), LOGITS),
    "ctc_loss:blank_last": (_ctc("mean", blank=4, tl=(3, 2, 1)), LOGITS),
    "ctc_loss:empty_target": (_ctc("none", tl=(3, 0, 1)), LOGITS),
    "ctc_loss:concatenated_impossible": (_ctc_concat, LOGITS),
    "ctc_loss:module": (_ctc_module, LOGITS),
    "ctc_loss:unbatched": (_ctc_unbatched, LOGITS),
}
ERRORS = {
    "grid_sample:error_mode": (lambda L, x, g: L.nn.functional.grid_sample(
        x, g, mode="foo", align_corners=False), X, GRID),
    "grid_sample:error_padding": (lambda L, x, g: L.nn.functional.grid_sample(
        x, g, padding_mode="foo", align_corners=False), X, GRID),
    "grid_sample:error_last_dim": (lambda L, x, g: L.nn.functional.grid_sample(
        x, g[..., :1], align_corners=False), X, GRID),
    "grid_sample:error_batch": (lambda L, x, g: L.nn.functional.grid_sample(
        x[:1], g, align_corners=False), X, GRID),
    "affine_grid:error_shape": (lambda L, t: L.nn.functional.affine_grid(
        t, (2, 3, 4, 4, 4), align_corners=False), THETA),
    "ctc_loss:error_blank": (_ctc(blank=5), LOGITS),
    "ctc_loss:error_input_lengths": (_ctc(lengths=(9, 6, 7)), LOGITS),
    "ctc_loss:error_target_lengths": (_ctc(tl=(5, 1, 1)), LOGITS),
}
oracle.register(*CASES, *ERRORS)


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_grid_ctc(case_id):
    fn, *inputs = CASES[case_id]
    tol = {"rtol": 2e-5, "atol": 1e-6} if case_id.endswith("float32") else {}
    oracle.case(case_id, lambda: oracle.facade(fn, *inputs, **tol))


@pytest.mark.parametrize("case_id", sorted(ERRORS))
def test_grid_ctc_errors(case_id):
    fn, *inputs = ERRORS[case_id]
    oracle.case(case_id, lambda: oracle.facade(fn, *inputs, error=""))
