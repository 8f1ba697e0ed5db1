"""L-BFGS (torch.optim.LBFGS): quasi-Newton steps from the last `history_size` gradient
differences, with a fixed step or a strong-Wolfe line search, driven by a closure that
re-evaluates the loss. The same iteration as PyTorch's (itself after minFunc), so that a
program switching libraries sees the same iterates and the same state_dict."""
from __future__ import annotations

import math

from ..facade import grad_mode
from ..facade import ops
from .optimizer import Optimizer, _check_lr


def _cubic_minimum(x1, f1, g1, x2, f2, g2, bounds=None):
    """The minimizer of the cubic through (x1, f1) and (x2, f2) with slopes g1 and g2,
    clipped to bounds (default: the interval between x1 and x2); the midpoint of the
    bounds when the cubic has no minimum."""
    lo, hi = bounds if bounds is not None else (min(x1, x2), max(x1, x2))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    disc = d1 * d1 - g1 * g2
    if disc < 0:
        return (lo + hi) / 2.0
    d2 = math.sqrt(disc)
    if x1 <= x2:
        x = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else:
        x = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(x, lo), hi)


def _strong_wolfe(evaluate, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9,
                  max_ls=25):
    """A step t along d satisfying the strong Wolfe conditions (sufficient decrease c1,
    curvature c2), from loss f, flat gradient g and slope gtd = g.d at t = 0.
    evaluate(t) -> (loss, flat gradient) at x + t d. Returns (loss, gradient, t, number of
    evaluations). Phase one grows t until a step brackets an acceptable one; phase two
    (zoom) shrinks the bracket by cubic interpolation."""
    d_norm = d.abs().max().item()
    f_new, g_new = evaluate(t)
    evals, it = 1, 0
    gtd_new = g_new.dot(d).item()
    t_prev, f_prev, g_prev, gtd_prev = 0.0, f, g.clone(), gtd
    done = False
    bracket = None          # [(step, loss, gradient, slope)], two points (or one when done)
    while it < max_ls:
        too_far = f_new > f + c1 * t * gtd or (it > 1 and f_new >= f_prev)
        if not too_far and abs(gtd_new) <= -c2 * gtd:
            bracket, done = [(t, f_new, g_new, gtd_new)], True
            break
        if too_far or gtd_new >= 0:     # a minimum lies between t_prev and t
            bracket = [(t_prev, f_prev, g_prev, gtd_prev), (t, f_new, g_new.clone(), gtd_new)]
            break
        # extrapolate: a cubic step between 1.01 t and 10 t
        t_next = _cubic_minimum(t_prev, f_prev, gtd_prev, t, f_new, gtd_new,
                                bounds=(t + 0.01 * (t - t_prev), t * 10))
        t_prev, f_prev, g_prev, gtd_prev = t, f_new, g_new.clone(), gtd_new
        t = t_next
        f_new, g_new = evaluate(t)
        gtd_new = g_new.dot(d).item()
        evals, it = evals + 1, it + 1
    if it == max_ls:
        bracket = [(0.0, f, g, None), (t, f_new, g_new, None)]

    insufficient = False
    low, high = (0, 1) if bracket[0][1] <= bracket[-1][1] else (1, 0)
    while not done and it < max_ls:
        (a, fa, _, ga), (b, fb, _, gb) = bracket
        if abs(b - a) * d_norm < tolerance_change:
            break
        t = _cubic_minimum(a, fa, ga, b, fb, gb)
        # keep away from the ends: a step within 10% of the bracket's width of an end is
        # moved inward, at once if that end was too close on the previous step as well
        top, bottom = max(a, b), min(a, b)
        eps = 0.1 * (top - bottom)
        if min(top - t, t - bottom) < eps:
            if insufficient or t >= top or t <= bottom:
                t = top - eps if abs(t - top) < abs(t - bottom) else bottom + eps
                insufficient = False
            else:
                insufficient = True
        else:
            insufficient = False
        f_new, g_new = evaluate(t)
        gtd_new = g_new.dot(d).item()
        evals, it = evals + 1, it + 1
        point = (t, f_new, g_new.clone(), gtd_new)
        if f_new > f + c1 * t * gtd or f_new >= bracket[low][1]:
            bracket[high] = point
            low, high = (0, 1) if bracket[0][1] <= bracket[1][1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high][0] - bracket[low][0]) >= 0:
                bracket[high] = bracket[low]
            bracket[low] = point
    t, f_new, g_new, _ = bracket[low]
    return f_new, g_new, t, evals


class LBFGS(Optimizer):
    """PyTorch's L-BFGS. `step(closure)` runs up to max_iter iterations (max_eval closure
    calls, default max_iter * 5 // 4): the direction d = -H g from the two-loop recursion
    over the stored (y, s) pairs (pairs with y.s <= 1e-10 are skipped), the step lr (the
    very first one min(1, 1/|g|_1) lr), or a strong-Wolfe line search with
    line_search_fn="strong_wolfe". Stops early when max|g| <= tolerance_grad, or when the
    step or the loss changes less than tolerance_change. One parameter group only."""

    def __init__(self, params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7,
                 tolerance_change=1e-9, history_size=100, line_search_fn=None):
        _check_lr(lr)
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        super().__init__(params, dict(lr=lr, max_iter=max_iter, max_eval=max_eval,
                                      tolerance_grad=tolerance_grad,
                                      tolerance_change=tolerance_change,
                                      history_size=history_size, line_search_fn=line_search_fn))
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]
        for p in self._params:
            if p.is_complex():
                raise NotImplementedError("functrans LBFGS does not support complex "
                                          f"parameters (got one of dtype {p.dtype}); optimize "
                                          "its real and imaginary parts as two real tensors")

    def _flat_grad(self):
        return ops.cat([p.grad.reshape(-1) if p.grad is not None else p.new_zeros(p.numel())
                        for p in self._params])

    def _add(self, t, d):
        """p += t * d, d a flat vector over every parameter."""
        offset = 0
        for p in self._params:
            n = p.numel()
            p.add_(d[offset:offset + n].view_as(p), alpha=t)
            offset += n

    def _evaluate_at(self, closure, t, d):
        """(loss, flat gradient) at x + t d, leaving the parameters at x."""
        x = [p.clone() for p in self._params]
        self._add(t, d)
        loss = float(closure())
        g = self._flat_grad()
        for p, v in zip(self._params, x, strict=True):
            p.copy_(v)
        return loss, g

    def step(self, closure):
        """Up to max_iter L-BFGS iterations; returns the closure's loss at the start."""
        group = self.param_groups[0]
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tol_grad, tol_change = group["tolerance_grad"], group["tolerance_change"]
        history_size, line_search = group["history_size"], group["line_search_fn"]
        if line_search is not None and line_search != "strong_wolfe":
            raise RuntimeError("only 'strong_wolfe' is supported")

        def evaluate():
            with grad_mode.enable_grad():
                return closure()

        with grad_mode.no_grad():
            state = self.state[self._params[0]]
            state.setdefault("func_evals", 0)
            state.setdefault("n_iter", 0)
            orig_loss = evaluate()
            loss = float(orig_loss)
            evals = 1
            state["func_evals"] += 1
            g = self._flat_grad()
            if g.abs().max().item() <= tol_grad:
                return orig_loss
            d, t = state.get("d"), state.get("t")
            old_dirs, old_stps = state.get("old_dirs"), state.get("old_stps")
            ro, H_diag = state.get("ro"), state.get("H_diag")
            prev_g, prev_loss = state.get("prev_flat_grad"), state.get("prev_loss")
            n_iter = 0
            while n_iter < max_iter:
                n_iter += 1
                state["n_iter"] += 1
                if state["n_iter"] == 1:
                    d = g.neg()
                    old_dirs, old_stps, ro, H_diag = [], [], [], 1
                else:
                    y, s = g.sub(prev_g), d.mul(t)
                    ys = y.dot(s)
                    if ys > 1e-10:          # keep the pair only where curvature is positive
                        if len(old_dirs) == history_size:
                            old_dirs.pop(0)
                            old_stps.pop(0)
                            ro.pop(0)
                        old_dirs.append(y)
                        old_stps.append(s)
                        ro.append(1.0 / ys)
                        H_diag = ys / y.dot(y)
                    d = self._two_loop(state, g, old_dirs, old_stps, ro, H_diag, history_size)
                if prev_g is None:
                    prev_g = g.clone()
                else:
                    prev_g.copy_(g)
                prev_loss = loss
                t = min(1.0, 1.0 / g.abs().sum().item()) * lr if state["n_iter"] == 1 else lr
                gtd = g.dot(d).item()
                if gtd > -tol_change:       # not a descent direction
                    break
                if line_search is not None:
                    loss, g, t, ls_evals = _strong_wolfe(
                        lambda step: self._evaluate_at(evaluate, step, d), t, d, loss, g, gtd,
                        max_ls=max_eval - evals)
                    self._add(t, d)
                    small_grad = g.abs().max().item() <= tol_grad
                else:
                    self._add(t, d)
                    ls_evals, small_grad = 0, False
                    if n_iter != max_iter:
                        loss = float(evaluate())
                        g = self._flat_grad()
                        small_grad = g.abs().max().item() <= tol_grad
                        ls_evals = 1
                evals += ls_evals
                state["func_evals"] += ls_evals
                if n_iter == max_iter or evals >= max_eval or small_grad:
                    break
                if d.mul(t).abs().max().item() <= tol_change or abs(loss - prev_loss) < tol_change:
                    break
            state.update(d=d, t=t, old_dirs=old_dirs, old_stps=old_stps, ro=ro, H_diag=H_diag,
                         prev_flat_grad=prev_g, prev_loss=prev_loss)
        return orig_loss

    @staticmethod
    def _two_loop(state, g, old_dirs, old_stps, ro, H_diag, history_size):
        """-H g by the two-loop recursion over the stored pairs, with H_diag I as the initial
        inverse Hessian; the first loop's coefficients are kept in state['al']."""
        al = state.setdefault("al", [None] * history_size)
        q = g.neg()
        for i in range(len(old_dirs) - 1, -1, -1):
            al[i] = old_stps[i].dot(q) * ro[i]
            q.add_(old_dirs[i], alpha=-al[i])
        r = q.mul(H_diag)
        for i in range(len(old_dirs)):
            be_i = old_dirs[i].dot(r) * ro[i]
            r.add_(old_stps[i], alpha=al[i] - be_i)
        return r
