"""jax.errors: the error classes a JAX program catches, under their JAX names (the same
classes `functrans` exports at the top level)."""
from .core import (ConcretizationTypeError, TracerArrayConversionError,  # noqa: F401
                   TracerBoolConversionError, TracerIntegerConversionError,
                   UnexpectedTracerError)
