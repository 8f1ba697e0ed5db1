"""functrans.scipy.stats (jax.scipy.stats): distributions as modules of functions
(`norm.logpdf(x, loc, scale)`, ...), as JAX's."""
from . import logistic, norm  # noqa: F401
