"""ft.utils: torch.utils's data loading (`ft.utils.data`) and activation checkpointing
(`ft.utils.checkpoint`)."""
from . import checkpoint, data  # noqa: F401
