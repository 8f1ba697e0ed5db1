"""ft.utils: torch.utils's data loading (`ft.utils.data`), activation checkpointing
(`ft.utils.checkpoint`) and `model_zoo` (whose download functrans refuses, saying how to load a
downloaded file instead)."""
from . import checkpoint, data, model_zoo  # noqa: F401
