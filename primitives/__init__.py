"""The vocabulary of the IR: every primitive, declared once with all its rules.

`REGISTRY` maps names to primitives; the registry-driven tests walk it.
"""

from .base import REGISTRY, defprim  # noqa: F401
from . import (elementwise, shape, reductions, indexing, linalg, conv, pool, random,  # noqa: F401
               fft, special)
from .misc import stop_gradient_p  # noqa: F401
