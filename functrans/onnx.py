"""ft.onnx: the names of torch.onnx that programs touch, so that `import torch.onnx` survives
the rename. functrans does not write ONNX files: `export` raises NotImplementedError saying
how to get one from PyTorch, and `is_in_onnx_export()` is always False."""
from __future__ import annotations

__all__ = ["export", "is_in_onnx_export"]


def is_in_onnx_export() -> bool:
    """False: functrans never runs a model inside an ONNX export."""
    return False


def export(model, args=(), f=None, **kwargs):
    """Not supported: functrans has no ONNX exporter. Raises NotImplementedError."""
    what = type(model).__name__
    raise NotImplementedError(
        f"ft.onnx.export({what}, ...): functrans cannot export to ONNX. Save the weights with "
        f"ft.save(model.state_dict(), path), load them into the same model written with torch "
        f"(the state_dict keys are the same) and call torch.onnx.export there; to inspect the "
        f"program functrans runs, print ft.make_jaxpr of the forward function instead.")
