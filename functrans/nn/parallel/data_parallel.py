"""`nn.DataParallel` and `nn.parallel.data_parallel` on functrans's one device: the module
runs once on the whole batch (what torch does with a single visible device), so programs
that wrap their model for multi-GPU machines run unchanged. Several devices are refused
with the way to get data parallelism here (DistributedDataParallel, one process each)."""
from __future__ import annotations

from ..modules.module import Module


def _check_devices(device_ids, what):
    ids = list(device_ids or [])
    if len(ids) > 1:
        raise RuntimeError(
            f"{what}: functrans runs a module on one device, got device_ids={ids}; for data "
            f"parallelism over several devices use nn.parallel.DistributedDataParallel with "
            f"one process per device (python -m functrans.distributed.run)")


class DataParallel(Module):
    """torch.nn.DataParallel(module, device_ids=None, output_device=None, dim=0) on one
    device: forward calls the wrapped module on the whole input; its parameters appear
    under `module.` in state_dict(), as torch's."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0):
        super().__init__()
        _check_devices(device_ids, "DataParallel")
        self.module = module
        self.device_ids = list(device_ids or [])
        self.output_device = output_device
        self.dim = dim

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)


def data_parallel(module, inputs, device_ids=None, output_device=None, dim=0,
                  module_kwargs=None):
    """torch.nn.parallel.data_parallel on one device: module(*inputs, **module_kwargs)."""
    _check_devices(device_ids, "data_parallel")
    if not isinstance(inputs, tuple):
        inputs = (inputs,) if inputs is not None else ()
    return module(*inputs, **(module_kwargs or {}))
