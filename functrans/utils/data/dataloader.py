"""torch.utils.data.dataloader's module path: DataLoader and its collate helpers (defined in
dataset.py)."""
from .dataset import DataLoader, default_collate, default_convert, get_worker_info  # noqa: F401

__all__ = ["DataLoader", "default_collate", "default_convert", "get_worker_info"]
