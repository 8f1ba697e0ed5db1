"""ft.amp / ft.autocast: torch.amp's names, so that mixed-precision programs run.

functrans has no bfloat16 dtype and no autocast op lists, so an enabled autocast region on
the CPU (or on a GPU) refuses with NotImplementedError saying what to do; a disabled one
(`autocast(..., enabled=False)`, the usual `enabled=args.amp`) runs its block unchanged, and
autocast for CUDA without a GPU warns and disables itself, as torch's does.
`GradScaler` is torch's loss scaler: it multiplies the loss, unscales the gradients before
the optimizer step, skips steps whose gradients hold inf or NaN and adapts the scale; a
scaler for CUDA without a GPU disables itself with torch's warning (then every call passes
through)."""
from __future__ import annotations

import functools
import math
import warnings

from . import cuda
from .facade import dtypes as D
from .facade.grad_mode import no_grad
from .facade.tensor import Tensor

__all__ = ["GradScaler", "autocast", "get_autocast_dtype", "is_autocast_available",
           "is_autocast_enabled"]

_DEFAULT_DTYPE = {"cpu": D.bfloat16, "cuda": D.float16}


class autocast:  # noqa: N801  (torch's name)
    """torch.autocast(device_type, dtype=None, enabled=True, cache_enabled=None): a context
    manager and decorator. Enabled regions are refused (see the module docstring)."""

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        if not isinstance(device_type, str):
            raise ValueError(f"Expected `device_type` of type `str`, got: "
                             f"`{type(device_type)}`")
        self.device = device_type
        self.fast_dtype = _DEFAULT_DTYPE.get(device_type, D.float16) if dtype is None else dtype
        self._enabled = bool(enabled)
        if self._enabled and device_type == "cuda" and not cuda.is_available():
            warnings.warn("CUDA is not available or torch_xla is imported. Disabling autocast.",
                          UserWarning, stacklevel=2)
            self._enabled = False

    def __enter__(self):
        if self._enabled:
            raise NotImplementedError(
                f"torch.autocast(device_type={self.device!r}, dtype={self.fast_dtype!r}) is not "
                f"supported by functrans: it has no per-op automatic mixed precision"
                f"{' and no bfloat16 dtype' if self.fast_dtype is D.bfloat16 else ''}. Run the "
                f"block in float32 (autocast(..., enabled=False) runs it unchanged), or cast "
                f"explicitly with .half() where float16 is wanted")
        _STATE.append(self)
        return self

    def __exit__(self, *exc):
        _STATE.pop()
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with autocast(self.device, self.fast_dtype, self._enabled):
                return fn(*args, **kwargs)
        return wrapped


_STATE: list = []


def is_autocast_available(device_type):
    """True for the devices torch.autocast accepts here ('cpu', and 'cuda' with a GPU)."""
    return device_type == "cpu" or (device_type == "cuda" and cuda.is_available())


def is_autocast_enabled(device_type=None):
    """False: functrans never runs an enabled autocast region."""
    return False


def get_autocast_dtype(device_type):
    """The dtype autocast would use on device_type (torch's defaults)."""
    return _DEFAULT_DTYPE.get(device_type, D.float16)


class GradScaler:
    """torch.amp.GradScaler(device="cuda", init_scale=2.**16, growth_factor=2.0,
    backoff_factor=0.5, growth_interval=2000, enabled=True)."""

    def __init__(self, device="cuda", init_scale=2.0 ** 16, growth_factor=2.0,
                 backoff_factor=0.5, growth_interval=2000, enabled=True):
        self._device = device
        self._enabled = bool(enabled)
        if self._enabled and device == "cuda" and not cuda.is_available():
            warnings.warn("torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  "
                          "Disabling.", UserWarning, stacklevel=2)
            self._enabled = False
        if growth_factor <= 1.0:
            raise ValueError("The growth factor must be > 1.0.")
        if backoff_factor >= 1.0:
            raise ValueError("The backoff factor must be < 1.0.")
        self._scale = float(init_scale)
        self._growth_factor, self._backoff_factor = float(growth_factor), float(backoff_factor)
        self._growth_interval = int(growth_interval)
        self._growth_tracker = 0
        self._unscaled: dict = {}           # id(optimizer) -> found inf/NaN

    def is_enabled(self):
        return self._enabled

    def get_scale(self):
        return self._scale if self._enabled else 1.0

    def get_growth_factor(self):
        return self._growth_factor

    def get_backoff_factor(self):
        return self._backoff_factor

    def get_growth_interval(self):
        return self._growth_interval

    def scale(self, outputs):
        """outputs (a tensor, or lists/tuples of them) times the scale."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, Tensor):
            return outputs * self._scale
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        raise ValueError("outputs must be a Tensor or an iterable of Tensors")

    def unscale_(self, optimizer):
        """Divide the optimizer's gradients by the scale in place (once per step) and note
        whether any is inf or NaN."""
        if not self._enabled:
            return
        if id(optimizer) in self._unscaled:
            raise RuntimeError("unscale_() has already been called on this optimizer since "
                               "the last update().")
        inv = 1.0 / self._scale
        found = False
        with no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    p.grad.mul_(inv)
                    if not bool(p.grad.isfinite().all()):
                        found = True
        self._unscaled[id(optimizer)] = found

    def step(self, optimizer, *args, **kwargs):
        """optimizer.step(...) unless the unscaled gradients hold inf or NaN (then skipped);
        returns what step returns (None when skipped)."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is "
                               "enabled.")
        if id(optimizer) not in self._unscaled:
            self.unscale_(optimizer)
        if self._unscaled[id(optimizer)]:
            return None
        return optimizer.step(*args, **kwargs)

    def update(self, new_scale=None):
        """Back off the scale after a step that found inf/NaN; grow it after growth_interval
        clean steps in a row (or set new_scale)."""
        if not self._enabled:
            return
        if new_scale is not None:
            self._scale = float(new_scale.item() if isinstance(new_scale, Tensor)
                                else new_scale)
        elif any(self._unscaled.values()):
            self._scale *= self._backoff_factor
            self._growth_tracker = 0
        else:
            self._growth_tracker += 1
            if self._growth_tracker == self._growth_interval:
                grown = self._scale * self._growth_factor
                if math.isfinite(grown):
                    self._scale = grown
                self._growth_tracker = 0
        self._unscaled.clear()

    def state_dict(self):
        if not self._enabled:
            return {}
        return {"scale": self._scale, "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor,
                "growth_interval": self._growth_interval,
                "_growth_tracker": self._growth_tracker}

    def load_state_dict(self, state_dict):
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved "
                               "from a disabled instance of GradScaler.")
        self._scale = float(state_dict["scale"])
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._growth_tracker = int(state_dict["_growth_tracker"])
