"""Convolution layers of ``(N, *spatial, C_in)`` inputs, over tessera.core's
convolutions (``conv_general`` and ``conv_transpose{1,2,3}d``)."""

import math
from typing import Tuple, Union

import tessera.core as mx
from tessera.nn.layers.base import Module, _int_tuple


class _Conv(Module):
    def __init__(self, n, in_channels, out_channels, kernel_size, stride, padding, dilation,
                 groups, bias):
        super().__init__()
        cls = type(self).__name__
        if in_channels % groups != 0:
            raise ValueError(f"[{cls}] the number of input channels ({in_channels}) must be "
                             f"divisible by the number of groups ({groups})")
        if out_channels % groups != 0:
            raise ValueError(f"[{cls}] the number of output channels ({out_channels}) must "
                             f"be divisible by the number of groups ({groups})")
        kernel_size = _int_tuple(cls, "kernel_size", kernel_size, n)
        scale = math.sqrt(1 / (in_channels * math.prod(kernel_size)))
        self.weight = mx.random.uniform(low=-scale, high=scale,
                                        shape=(out_channels, *kernel_size,
                                               in_channels // groups))
        if bias:
            self.bias = mx.zeros((out_channels,))
        self.stride = _int_tuple(cls, "stride", stride, n)
        self.padding = _int_tuple(cls, "padding", padding, n)
        self.dilation = _int_tuple(cls, "dilation", dilation, n)
        self.groups = groups

    def _extra_repr(self):
        out = self.weight.shape[0]
        return (f"{self.weight.shape[-1] * self.groups}, {out}, "
                f"kernel_size={tuple(self.weight.shape[1:-1])}, stride={self.stride}, "
                f"padding={self.padding}, dilation={self.dilation}, groups={self.groups}, "
                f"bias={'bias' in self}")

    def __call__(self, x):
        y = mx.conv_general(x, self.weight, self.stride, self.padding, self.dilation, 1,
                            self.groups)
        if "bias" in self:
            y = y + self.bias
        return y


class Conv1d(_Conv):
    """``weight (out, k, in/groups)`` from U(±sqrt(1/(in·k))); ``bias`` zeros."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
                 padding: int = 0, dilation: int = 1, groups: int = 1, bias: bool = True):
        super().__init__(1, in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias)


class Conv2d(_Conv):
    """``weight (out, kh, kw, in/groups)`` from U(±sqrt(1/(in·kh·kw))); ``bias`` zeros."""

    def __init__(self, in_channels: int, out_channels: int,
                 kernel_size: Union[int, Tuple[int, int]], stride=1, padding=0, dilation=1,
                 groups: int = 1, bias: bool = True):
        super().__init__(2, in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias)


class Conv3d(_Conv):
    """``weight (out, kd, kh, kw, in)``; no groups."""

    def __init__(self, in_channels: int, out_channels: int,
                 kernel_size: Union[int, Tuple[int, int, int]], stride=1, padding=0,
                 dilation=1, bias: bool = True):
        super().__init__(3, in_channels, out_channels, kernel_size, stride, padding, dilation,
                         1, bias)


class _ConvTranspose(Module):
    def __init__(self, n, in_channels, out_channels, kernel_size, stride, padding, dilation,
                 output_padding, bias):
        super().__init__()
        cls = type(self).__name__
        kernel_size = _int_tuple(cls, "kernel_size", kernel_size, n)
        scale = math.sqrt(1 / (in_channels * math.prod(kernel_size)))
        self.weight = mx.random.uniform(low=-scale, high=scale,
                                        shape=(out_channels, *kernel_size, in_channels))
        if bias:
            self.bias = mx.zeros((out_channels,))
        self.stride = _int_tuple(cls, "stride", stride, n)
        self.padding = _int_tuple(cls, "padding", padding, n)
        self.dilation = _int_tuple(cls, "dilation", dilation, n)
        self.output_padding = _int_tuple(cls, "output_padding", output_padding, n)

    def _extra_repr(self):
        return (f"{self.weight.shape[-1]}, {self.weight.shape[0]}, "
                f"kernel_size={tuple(self.weight.shape[1:-1])}, stride={self.stride}, "
                f"padding={self.padding}, dilation={self.dilation}, "
                f"output_padding={self.output_padding}, bias={'bias' in self}")

    def __call__(self, x):
        n = self.weight.ndim - 2
        conv = (mx.conv_transpose1d, mx.conv_transpose2d, mx.conv_transpose3d)[n - 1]
        y = conv(x, self.weight, self.stride, self.padding, self.dilation, self.output_padding)
        if "bias" in self:
            y = y + self.bias
        return y


class ConvTranspose1d(_ConvTranspose):
    """``weight (out, k, in)``; output length ``(L-1)s - 2p + d(k-1) + 1 + output_padding``."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
                 padding: int = 0, dilation: int = 1, output_padding: int = 0,
                 bias: bool = True):
        super().__init__(1, in_channels, out_channels, kernel_size, stride, padding, dilation,
                         output_padding, bias)


class ConvTranspose2d(_ConvTranspose):
    """``weight (out, kh, kw, in)``."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, output_padding=0, bias: bool = True):
        super().__init__(2, in_channels, out_channels, kernel_size, stride, padding, dilation,
                         output_padding, bias)


class ConvTranspose3d(_ConvTranspose):
    """``weight (out, kd, kh, kw, in)``."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, output_padding=0, bias: bool = True):
        super().__init__(3, in_channels, out_channels, kernel_size, stride, padding, dilation,
                         output_padding, bias)
