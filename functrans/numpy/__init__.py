"""functrans.numpy as a package; this step only moves the module (the split follows)."""
from ._promotion import *  # noqa: F401,F403
from ._promotion import _canon_axis, _promote_float  # noqa: F401
