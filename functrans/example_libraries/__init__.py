"""functrans.example_libraries (jax.example_libraries): `optimizers` and `stax`, the small
optimizer and neural-network libraries JAX programs import, written from their documented
behaviour on functrans.numpy and functrans.lax."""
from . import optimizers, stax  # noqa: F401
