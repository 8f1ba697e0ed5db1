"""Conv1d/Conv2d/Conv3d and their transposes ConvTranspose1d/2d (each one recorded op over
the conv_general_dilated primitive), and the 2-D pooling layers."""
from __future__ import annotations

import math

from .. import functional as F
from .. import init
from ..functional._fold import _output_padding
from ._factory import empty
from .module import Module, Parameter


def _one(v, name):
    return (F._single(v, name),)


class Conv2d(Module):
    """2-D convolution (cross-correlation). weight (out, in/groups, kh, kw) ~
    kaiming_uniform_(a=sqrt(5)); bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)). padding_mode
    'reflect', 'replicate' or 'circular' pads with F.pad in that mode first, as torch's."""

    _dims = 2

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        if padding_mode not in ("zeros", "reflect", "replicate", "circular"):
            raise ValueError(f"padding_mode must be one of ['zeros', 'reflect', 'replicate', "
                             f"'circular'], but got padding_mode='{padding_mode}'")
        tup = {1: _one, 2: F._pair, 3: F._triple}[self._dims]
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size = tup(kernel_size, "kernel_size")
        self.stride = tup(stride, "stride")
        self.dilation = tup(dilation, "dilation")
        if isinstance(padding, str):
            if padding not in ("valid", "same"):
                raise ValueError(f"Invalid padding string '{padding}', should be one of "
                                 "{'valid', 'same'}")
            if padding == "same" and any(s != 1 for s in self.stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
            self.padding = padding
        else:
            self.padding = tup(padding, "padding")
        self.groups = groups
        self.padding_mode = padding_mode
        self.weight = Parameter(empty(out_channels, in_channels // groups, *self.kernel_size,
                                      device=device, dtype=dtype))
        if bias:
            self.bias = Parameter(empty(out_channels, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def _mode_padding(self):
        """F.pad's widths for a non-zeros padding_mode (last dim first), from the padding
        (an int per dim, or 'same': the kernel's span split, the extra one after)."""
        widths = []
        pads = self.padding if not isinstance(self.padding, str) else \
            (None,) * len(self.kernel_size)
        for k, d, p in reversed(list(zip(self.kernel_size, self.dilation, pads))):
            if self.padding == "valid":
                p = 0
            if p is None:
                total = d * (k - 1)
                widths += [total // 2, total - total // 2]
            else:
                widths += [p, p]
        return tuple(widths)

    def forward(self, input):
        conv = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[self._dims]
        if self.padding_mode == "zeros":
            return conv(input, self.weight, self.bias, self.stride, self.padding, self.dilation,
                        self.groups)
        return conv(F.pad(input, self._mode_padding(), mode=self.padding_mode), self.weight,
                    self.bias, self.stride, 0, self.dilation, self.groups)

    def extra_repr(self):
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if self.padding != (0,) * self._dims:
            s += f", padding={self.padding}"
        if self.dilation != (1,) * self._dims:
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class Conv1d(Conv2d):
    """1-D convolution: weight (out, in/groups, k) ~ kaiming_uniform_(a=sqrt(5)), bias ~
    U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""

    _dims = 1


class Conv3d(Conv2d):
    """3-D convolution: weight (out, in/groups, kd, kh, kw) ~ kaiming_uniform_(a=sqrt(5)),
    bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""

    _dims = 3


class MaxPool2d(Module):
    """Max over kernel windows; ties go to the first element of the window (as torch)."""

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
                 ceil_mode=False):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def forward(self, input):
        return F.max_pool2d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            ceil_mode=self.ceil_mode, return_indices=self.return_indices)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class AvgPool2d(Module):
    """Mean over kernel windows."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True, divisor_override=None):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.ceil_mode = padding, ceil_mode
        self.count_include_pad, self.divisor_override = count_include_pad, divisor_override

    def forward(self, input):
        return F.avg_pool2d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AdaptiveAvgPool2d(Module):
    """Mean over adaptive windows giving a fixed output size."""

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, input):
        return F.adaptive_avg_pool2d(input, self.output_size)

    def extra_repr(self):
        return f"output_size={self.output_size}"


class ConvTranspose2d(Module):
    """2-D transposed convolution (F.conv_transpose2d: the gradient of conv2d with respect to
    its input). weight (in, out/groups, kh, kw) ~ kaiming_uniform_(a=sqrt(5)) over its fan-in
    as torch computes it (out/groups * kh * kw); bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
    forward(input, output_size=None): output_size picks the output_padding."""

    _dims = 2

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 output_padding=0, groups=1, bias=True, dilation=1, padding_mode="zeros",
                 device=None, dtype=None):
        super().__init__()
        name = type(self).__name__
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {name}')
        tup = (lambda v, n: (F._single(v, n),)) if self._dims == 1 else \
            (lambda v, n: F._pair(v, n))
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size = tup(kernel_size, "kernel_size")
        self.stride, self.padding = tup(stride, "stride"), tup(padding, "padding")
        self.dilation = tup(dilation, "dilation")
        self.output_padding = tup(output_padding, "output_padding")
        self.groups, self.padding_mode, self.transposed = groups, padding_mode, True
        self.weight = Parameter(empty(in_channels, out_channels // groups, *self.kernel_size,
                                      device=device, dtype=dtype))
        if bias:
            self.bias = Parameter(empty(out_channels, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    reset_parameters = Conv2d.reset_parameters

    def forward(self, input, output_size=None):
        op = self.output_padding if output_size is None else _output_padding(
            input, output_size, self.stride, self.padding, self.kernel_size, self.dilation,
            self._dims)
        conv = F.conv_transpose1d if self._dims == 1 else F.conv_transpose2d
        return conv(input, self.weight, self.bias, self.stride, self.padding, op, self.groups,
                    self.dilation)

    def extra_repr(self):
        zero, one = (0,) * self._dims, (1,) * self._dims
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if self.padding != zero:
            s += f", padding={self.padding}"
        if self.dilation != one:
            s += f", dilation={self.dilation}"
        if self.output_padding != zero:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        return s


class ConvTranspose1d(ConvTranspose2d):
    """1-D transposed convolution: weight (in, out/groups, k); F.conv_transpose1d."""

    _dims = 1
