"""kl_divergence(p, q) and register_kl: KL(p ‖ q) by the pair of types, for the pairs torch
registers among these distributions."""
from __future__ import annotations


from ..facade import linalg, ops
from ..nn import functional as F
from .discrete import Bernoulli, Categorical
from .distribution import _sum_rightmost
from .independent import Independent
from .normal import MultivariateNormal, Normal, _batch_mahalanobis, _np_broadcast

_KL_REGISTRY: dict = {}


def register_kl(type_p, type_q):
    """Decorator: fn(p, q) computes KL(p ‖ q) for p of type_p and q of type_q."""
    def decorator(fn):
        _KL_REGISTRY[type_p, type_q] = fn
        return fn
    return decorator


def _dispatch(type_p, type_q):
    """The registered rule for the most specific pair of base classes."""
    for i, tp in enumerate(type_p.__mro__):
        for j, tq in enumerate(type_q.__mro__):
            fn = _KL_REGISTRY.get((tp, tq))
            if fn is not None:
                return fn
    return None


def kl_divergence(p, q):
    """KL(p ‖ q) = E_p[log p - log q], over the (broadcast) batch shape."""
    fn = _dispatch(type(p), type(q))
    if fn is None:
        raise NotImplementedError(f"No KL(p || q) is implemented for p type "
                                  f"{type(p).__name__} and q type {type(q).__name__}")
    return fn(p, q)


_INF = float("inf")


@register_kl(Normal, Normal)
def _kl_normal_normal(p, q):
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p, q):
    t1 = p.probs * (F.softplus(-q.logits) - F.softplus(-p.logits))
    t1 = ops.where(p.probs == 0, 0.0, ops.where(q.probs == 0, _INF, t1))
    t2 = (1 - p.probs) * (F.softplus(q.logits) - F.softplus(p.logits))
    t2 = ops.where(p.probs == 1, 0.0, ops.where(q.probs == 1, _INF, t2))
    return t1 + t2


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p, q):
    t = p.probs * (p.logits - q.logits)
    t = ops.where((q.probs == 0).expand_as(t), _INF, t)
    t = ops.where((p.probs == 0).expand_as(t), 0.0, t)
    return t.sum(-1)


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_mvn_mvn(p, q):
    if p.event_shape != q.event_shape:
        raise ValueError("KL-divergence between two Multivariate Normals with different "
                         "event shapes cannot be computed")
    n = p.event_shape[0]
    half_term1 = q._half_log_det() - p._half_log_det()
    batch = _np_broadcast(q._unbroadcasted_scale_tril.shape[:-2],
                          p._unbroadcasted_scale_tril.shape[:-2])
    q_l = q._unbroadcasted_scale_tril.expand(*batch, n, n)
    p_l = p._unbroadcasted_scale_tril.expand(*batch, n, n)
    term2 = (linalg.inv(q_l) @ p_l).pow(2).sum((-2, -1))     # tr(Σq⁻¹ Σp)
    term3 = _batch_mahalanobis(q._unbroadcasted_scale_tril, q.loc - p.loc)
    return half_term1 + 0.5 * (term2 + term3 - n)


@register_kl(Independent, Independent)
def _kl_independent_independent(p, q):
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError("KL between Independents with different reinterpreted "
                                  "batch dims is not implemented")
    return _sum_rightmost(kl_divergence(p.base_dist, q.base_dist), p.reinterpreted_batch_ndims)


