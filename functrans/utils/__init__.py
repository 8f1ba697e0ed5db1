"""ft.utils: torch.utils's data loading (`ft.utils.data`)."""
from . import data  # noqa: F401
