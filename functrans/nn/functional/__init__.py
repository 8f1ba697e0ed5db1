"""ft.nn.functional as a package; this step only moves the module (the split follows)."""
from ._losses import *  # noqa: F401,F403
from ._losses import _check_reduction, _is_facade, _legacy_reduction, _pair, _raw  # noqa: F401
