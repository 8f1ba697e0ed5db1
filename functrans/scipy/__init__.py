"""functrans.scipy (jax.scipy): `special`, `stats` and `linalg`, written with
functrans.numpy and functrans's primitives, so every function differentiates, vmaps and
jits (docs/porting_jax.md)."""
from . import linalg, special, stats  # noqa: F401
