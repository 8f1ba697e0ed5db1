"""torch.nn's padding layers (nn.modules.padding): Reflection-, Replication-, Circular-,
Constant- and ZeroPad for 1 to 3 trailing dimensions, each F.pad with its mode. `padding` is
an int (the same width on every side) or a tuple (left, right, top, bottom, front, back)."""
from __future__ import annotations

from .. import functional as F
from .module import Module


def _widths(padding, n, name):
    if isinstance(padding, int):
        return (padding,) * (2 * n)
    padding = tuple(int(p) for p in padding)
    if len(padding) != 2 * n:
        raise ValueError(f"{name}: padding must be an int or a tuple of {2 * n} ints, got "
                         f"{len(padding)} values")
    return padding


class _PadNd(Module):
    mode, n = "constant", 1

    def __init__(self, padding):
        super().__init__()
        self.padding = _widths(padding, self.n, type(self).__name__)

    def forward(self, input):  # noqa: A002
        return F.pad(input, self.padding, self.mode)

    def extra_repr(self):
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    def __init__(self, padding, value):
        super().__init__(padding)
        self.value = value

    def forward(self, input):  # noqa: A002
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self):
        return f"padding={self.padding}, value={self.value}"


class _ZeroPadNd(_ConstantPadNd):
    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


def _family(base, mode, stem):
    return [type(f"{stem}{n}d", (base,), {"mode": mode, "n": n, "__module__": __name__,
                                          "__doc__": f"F.pad(input, padding, {mode!r}) over "
                                                     f"the last {n} dimension(s)."})
            for n in (1, 2, 3)]


ReflectionPad1d, ReflectionPad2d, ReflectionPad3d = _family(_PadNd, "reflect", "ReflectionPad")
ReplicationPad1d, ReplicationPad2d, ReplicationPad3d = _family(_PadNd, "replicate",
                                                               "ReplicationPad")
CircularPad1d, CircularPad2d, CircularPad3d = _family(_PadNd, "circular", "CircularPad")
ConstantPad1d, ConstantPad2d, ConstantPad3d = _family(_ConstantPadNd, "constant", "ConstantPad")
ZeroPad1d, ZeroPad2d, ZeroPad3d = _family(_ZeroPadNd, "constant", "ZeroPad")
