"""ft.nn: jax.nn's activation functions (functional, traceable)."""
from .functions import (elu, gelu, leaky_relu, log_sigmoid, log_softmax, logsumexp,  # noqa: F401
                        one_hot, relu, relu6, sigmoid, silu, softmax, softplus, standardize,
                        swish)
