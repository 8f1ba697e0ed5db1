"""nn.utils.parametrize and nn.utils.parametrizations against PyTorch: the module's new
class, state_dict keys, values and gradients through the parametrized tensor (to the
originals and the inputs), assignment through right_inverse, caching, removal, chains,
weight_norm / spectral_norm / orthogonal, and the errors (oracle.facade, oracle.compare)."""
import numpy as np
import pytest

import oracle
from oracle import compare, ft, torch

R = np.random.RandomState(0)
X = R.randn(4, 3)
W = R.randn(3, 3)
B = R.randn(3)


def _sym(L):
    class Sym(L.nn.Module):
        """A symmetric matrix from its upper triangle."""

        def forward(self, X):
            return X.triu() + X.triu(1).transpose(-1, -2)

        def right_inverse(self, A):
            return A.triu()
    return Sym()


def _scale(L, k):
    class Scale(L.nn.Module):
        def forward(self, X):
            return X * k

        def right_inverse(self, A):
            return A / k
    return Scale()


def _linear(L, w, b):
    m = L.nn.Linear(w.shape[1], w.shape[0]).double()
    with L.no_grad():
        m.weight.copy_(w.detach())
        m.bias.copy_(b.detach())
    return m


def _register(L, x, w, b):
    P = L.nn.utils.parametrize
    m = _linear(L, w, b)
    P.register_parametrization(m, "weight", _sym(L))
    out = m(x)
    out.sum().backward()
    info = (type(m).__name__, list(m.state_dict()), P.is_parametrized(m),
            P.is_parametrized(m, "weight"), P.is_parametrized(m, "bias"),
            P.type_before_parametrizations(m).__name__,
            m.parametrizations.weight.original.grad, m.weight)
    return out, info


def _assign(L, x, w, b):
    """module.weight = value runs right_inverse into `original`, in place."""
    P = L.nn.utils.parametrize
    m = _linear(L, w, b)
    P.register_parametrization(m, "weight", _sym(L))
    original = m.parametrizations.weight.original
    m.weight = w * 2
    return (m.parametrizations.weight.original is original, original.detach(), m(x),
            isinstance(original, L.nn.Parameter))


def _chain(L, x, w, b):
    """Two parametrizations on one tensor: applied in order; right inverses in reverse."""
    P = L.nn.utils.parametrize
    m = _linear(L, w, b)
    P.register_parametrization(m, "weight", _sym(L))
    P.register_parametrization(m, "weight", _scale(L, 3.0))
    out = m(x)
    m.weight = m.weight.detach() * 0 + 1
    return out, list(m.state_dict()), len(m.parametrizations.weight), m.weight.detach(), \
        m.parametrizations.weight.original.detach()


def _cached(L, x, w, b):
    P = L.nn.utils.parametrize
    m = _linear(L, w, b)
    P.register_parametrization(m, "weight", _sym(L))
    with P.cached():
        same = m.weight is m.weight
        out = m(x) + m(x)
    return out, same, m.weight is m.weight


def _remove(L, x, w, b, leave):
    P = L.nn.utils.parametrize
    m = _linear(L, w, b)
    P.register_parametrization(m, "weight", _sym(L))
    original = m.parametrizations.weight.original
    P.remove_parametrizations(m, "weight", leave_parametrized=leave)
    return (type(m).__name__, list(m.state_dict()), m.weight is original,
            m.weight.detach(), hasattr(m, "parametrizations"), m(x))


def _buffer(L, x):
    """A buffer parametrized stays a buffer (original registered as a buffer)."""
    P = L.nn.utils.parametrize
    m = L.nn.BatchNorm1d(3).double()
    P.register_parametrization(m, "running_var", _scale(L, 2.0))
    m.eval()
    return m(x), list(m.state_dict()), [n for n, _ in m.named_buffers()], m.running_var


def _weight_norm(L, x, w, b, dim):
    m = _linear(L, w, b)
    L.nn.utils.parametrizations.weight_norm(m, dim=dim)
    out = m(x)
    out.sum().backward()
    p = m.parametrizations.weight
    return (out, list(m.state_dict()), p.original0.detach(), p.original0.grad,
            p.original1.grad, m.weight.detach())


def _weight_norm_conv(L, x):
    L.manual_seed(0)
    m = L.nn.Conv1d(2, 3, 2).double()
    with L.no_grad():
        m.weight.copy_(L.arange(12, dtype=L.float64).reshape(3, 2, 2).sin())
        m.bias.zero_()
    L.nn.utils.parametrizations.weight_norm(m, dim=1)
    out = m(x.reshape(2, 2, 3))
    return out, [tuple(v.shape) for v in m.state_dict().values()]


def _weight_norm_compat(L, w, b):
    """A state dict of the hook-based API (weight_g, weight_v) loads into the
    parametrized module."""
    m = _linear(L, w, b)
    L.nn.utils.parametrizations.weight_norm(m)
    g = L.ones(3, 1, dtype=L.float64) * 2
    state = {"weight_g": g, "weight_v": w.detach() + 1, "bias": b.detach()}
    m.load_state_dict(state)
    return m.weight.detach(), list(m.state_dict())


def _spectral_norm(L, x, w, b, u, v, training):
    m = _linear(L, w, b)
    L.nn.utils.parametrizations.spectral_norm(m)
    sn = m.parametrizations.weight[0]
    with L.no_grad():                   # the random start of the power iteration, shared
        sn._u.copy_(u.detach())
        sn._v.copy_(v.detach())
    m.train(training)
    out = m(x)
    out.sum().backward()
    return (out, list(m.state_dict()), sn._u.detach(), m.parametrizations.weight.original.grad,
            m.weight.detach())


def _spectral_norm_conv_transpose(L):
    m = L.nn.ConvTranspose2d(2, 3, 2).double()
    L.nn.utils.parametrizations.spectral_norm(m)
    sn = m.parametrizations.weight[0]
    return sn.dim, tuple(sn._u.shape), tuple(sn._v.shape)


def _text(e):
    """An error's text with each library's name for Size (ft.Size, torch.Size) alike."""
    return str(e).replace("torch.Size", "Size").replace("ft.Size", "Size")


def _errors(L):
    P = L.nn.utils.parametrize
    m = _linear(L, L.tensor(W), L.tensor(B))

    class Shrink(L.nn.Module):
        def forward(self, X):
            return X[:2]

    class NoInverse(L.nn.Module):
        def forward(self, X):
            return X * 2

    out = {}
    for name, fn in (
            ("shape", lambda: P.register_parametrization(m, "weight", Shrink())),
            ("missing", lambda: P.register_parametrization(m, "nope", _sym(L))),
            ("remove", lambda: P.remove_parametrizations(m, "bias")),
            ("spectral_missing", lambda: L.nn.utils.parametrizations.spectral_norm(m, "nope")),
            ("spectral_dim", lambda: L.nn.utils.parametrizations.spectral_norm(
                _linear(L, L.tensor(W), L.tensor(B)), dim=3))):
        try:
            fn()
            out[name] = "ok"
        except Exception as e:  # noqa: BLE001 - the error is the result compared
            out[name] = (type(e).__name__, _text(e).split("Linear(")[0])
    k = _linear(L, L.tensor(W), L.tensor(B))
    P.register_parametrization(k, "weight", NoInverse())
    try:
        k.weight = L.zeros(3, 3, dtype=L.float64)
    except Exception as e:  # noqa: BLE001
        out["assign"] = (type(e).__name__, _text(e))
    P.register_parametrization(k, "weight", Shrink(), unsafe=True)
    out["unsafe_shape"] = tuple(k.weight.shape)
    return out


def _orthogonal(L, x, w, kw, original_grad=True):
    m = L.nn.Linear(w.shape[1], w.shape[0], bias=False).double()
    with L.no_grad():
        m.weight.copy_(w.detach())
    L.nn.utils.parametrizations.orthogonal(m, **kw)
    out = m(x)
    out.sum().backward()
    o = m.parametrizations.weight.original
    q = m.weight.detach()
    eye = L.eye(min(q.shape), dtype=L.float64)
    gram = q.mT @ q if q.shape[0] >= q.shape[1] else q @ q.mT
    # a tall or wide weight with use_trivialization: base is completed with random columns
    # (each library's own generator), which the gradient to `original` sees
    return (out, q, o.detach(), o.grad if original_grad else None,
            bool((gram - eye).abs().max() < 1e-12), list(m.state_dict()))


def _orthogonal_assign(L, w):
    """Assignment through right_inverse: Householder without trivialization (geqrf), and
    with trivialization an orthogonal matrix kept as the base, a general one made
    orthogonal (its QR's Q)."""
    m = L.nn.Linear(4, 4, bias=False).double()
    L.nn.utils.parametrizations.orthogonal(m, orthogonal_map="householder",
                                           use_trivialization=False)
    q = L.linalg.qr(w.detach())[0]
    m.weight = q
    t = L.nn.Linear(4, 4, bias=False).double()
    L.nn.utils.parametrizations.orthogonal(t)
    t.weight = q
    kept = t.weight.detach()
    t.weight = w.detach()
    return (m.weight.detach(), m.parametrizations.weight.original.detach(), kept,
            t.weight.detach(), t.parametrizations.weight[0].base)


def _orthogonal_errors(L):
    out = {}
    for name, fn in (
            ("vector", lambda: L.nn.utils.parametrizations.orthogonal(L.nn.Linear(3, 3),
                                                                      "bias")),
            ("map", lambda: L.nn.utils.parametrizations.orthogonal(L.nn.Linear(3, 3),
                                                                   orthogonal_map="qr")),
            ("assign_exp", lambda: setattr(L.nn.utils.parametrizations.orthogonal(
                L.nn.Linear(3, 3), use_trivialization=False), "weight", L.eye(3)))):
        try:
            fn()
            out[name] = "ok"
        except Exception as e:  # noqa: BLE001 - the error is the result compared
            out[name] = (type(e).__name__, _text(e))
    return out


SQ = R.randn(4, 4)
TALL = R.randn(5, 3)
CASES = {
    "linalg:matrix_exp": lambda: oracle.facade(lambda L, a: L.linalg.matrix_exp(a), SQ),
    "linalg:matrix_exp_scaled_batch": lambda: oracle.facade(lambda L, a: L.matrix_exp(a),
                                                            R.randn(2, 3, 3) * 20),
    "linalg:householder_product": lambda: oracle.facade(
        lambda L, a, t: L.linalg.householder_product(a, t), TALL, R.randn(3)),
    "linalg:householder_product_short_tau": lambda: oracle.facade(
        lambda L, a, t: L.linalg.householder_product(a, t), TALL, R.randn(2)),
    "linalg:geqrf": lambda: oracle.facade(lambda L, a: tuple(L.geqrf(a)), R.randn(2, 5, 3),
                                          requires_grad=False),
    "linalg:mH": lambda: oracle.facade(lambda L, a: a.mH, R.randn(2, 3, 4) + 1j),
    **{f"parametrizations:orthogonal_{name}": (
        lambda w=w, kw=kw, g=g: oracle.facade(lambda L, x, w: _orthogonal(L, x, w, kw, g),
                                              R.randn(2, w.shape[1]), w))
       for name, w, kw, g in (
           ("square", SQ, {}, True), ("cayley", SQ, {"orthogonal_map": "cayley"}, True),
           ("householder", SQ, {"orthogonal_map": "householder"}, True),
           ("tall", TALL, {}, False), ("wide", TALL.T.copy(), {}, False),
           ("tall_no_trivialization", TALL, {"use_trivialization": False}, True),
           ("wide_no_trivialization", TALL.T.copy(), {"use_trivialization": False}, True),
           ("tall_cayley", TALL, {"orthogonal_map": "cayley"}, False))},
    "parametrizations:orthogonal_assign": lambda: oracle.facade(_orthogonal_assign, SQ,
                                                                requires_grad=False),
    "parametrizations:orthogonal_errors": lambda: compare(_orthogonal_errors(ft),
                                                          _orthogonal_errors(torch), "errors"),
    "parametrize:register": lambda: oracle.facade(_register, X, W, B),
    "parametrize:assign": lambda: oracle.facade(_assign, X, W, B),
    "parametrize:chain": lambda: oracle.facade(_chain, X, W, B),
    "parametrize:cached": lambda: oracle.facade(_cached, X, W, B),
    "parametrize:remove_leave": lambda: oracle.facade(lambda L, *a: _remove(L, *a, True),
                                                      X, W, B),
    "parametrize:remove_original": lambda: oracle.facade(lambda L, *a: _remove(L, *a, False),
                                                         X, W, B),
    "parametrize:buffer": lambda: oracle.facade(_buffer, X),
    "parametrize:errors": lambda: compare(_errors(ft), _errors(torch), "errors"),
    "parametrizations:weight_norm_dim0": lambda: oracle.facade(
        lambda L, *a: _weight_norm(L, *a, 0), X, W, B),
    "parametrizations:weight_norm_dim_none": lambda: oracle.facade(
        lambda L, *a: _weight_norm(L, *a, None), X, W, B),
    "parametrizations:weight_norm_conv": lambda: oracle.facade(_weight_norm_conv,
                                                               R.randn(12)),
    "parametrizations:weight_norm_compat": lambda: oracle.facade(_weight_norm_compat, W, B,
                                                                 requires_grad=False),
    "parametrizations:spectral_norm_train": lambda: oracle.facade(
        lambda L, *a: _spectral_norm(L, *a, True), X, W, B, R.randn(3), R.randn(3)),
    "parametrizations:spectral_norm_eval": lambda: oracle.facade(
        lambda L, *a: _spectral_norm(L, *a, False), X, W, B, R.randn(3), R.randn(3)),
    "parametrizations:spectral_norm_conv_transpose": lambda: compare(
        _spectral_norm_conv_transpose(ft), _spectral_norm_conv_transpose(torch), "sn"),
}
oracle.register(*CASES)


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_parametrize(case_id):
    oracle.case(case_id, CASES[case_id])
