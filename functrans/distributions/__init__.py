"""torch.distributions: Categorical, Bernoulli, Normal, MultivariateNormal, Independent and
kl_divergence, with torch's parameters, shapes, validation errors and formulas. log_prob,
entropy, cdf and rsample are facade ops, so gradients flow to the parameters (rsample: the
reparameterization loc + scale * eps); samples come from the facade's generator."""
from . import constraints  # noqa: F401
from .discrete import Bernoulli, Categorical  # noqa: F401
from .distribution import Distribution  # noqa: F401
from .independent import Independent  # noqa: F401
from .kl import kl_divergence, register_kl  # noqa: F401
from .normal import MultivariateNormal, Normal  # noqa: F401

__all__ = ["Bernoulli", "Categorical", "Distribution", "Independent", "MultivariateNormal",
           "Normal", "constraints", "kl_divergence", "register_kl"]
