"""Convolutions of ``(N, *spatial, C_in)`` inputs. tessera.core has no
convolution op yet, so these gather the windows through ``mx.as_strided`` and
multiply them with the weight."""

import math
from typing import Tuple, Union

import tessera.core as mx
from tessera.nn.layers.base import Module
from tessera.nn.layers.pooling import _tuple, sliding_windows


def conv_general(x, weight, stride, padding, dilation, groups):
    """Channels-last convolution: ``weight (out, *kernel, in/groups)``."""
    n = weight.ndim - 2
    if any(p > 0 for p in padding):
        x = mx.pad(x, [(0, 0)] + [(p, p) for p in padding] + [(0, 0)])
    kernel = tuple(weight.shape[1:-1])
    windows = sliding_windows(x, kernel, stride, dilation)  # (N, *out, *kernel, C_in)
    out_spatial = tuple(windows.shape[1:1 + n])
    c_in = x.shape[-1]
    c_out = weight.shape[0]
    cg_in = c_in // groups
    cg_out = c_out // groups
    rows = x.shape[0]
    for d in out_spatial:
        rows *= d
    outputs = []
    for g in range(groups):
        win = windows[..., g * cg_in:(g + 1) * cg_in] if groups > 1 else windows
        w = weight[g * cg_out:(g + 1) * cg_out] if groups > 1 else weight
        cols = mx.reshape(win, (rows, -1))
        outputs.append(cols @ mx.reshape(w, (w.shape[0], -1)).T)
    y = outputs[0] if groups == 1 else mx.concatenate(outputs, axis=-1)
    return mx.reshape(y, (x.shape[0],) + out_spatial + (c_out,))


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
        kernel_size = _tuple(kernel_size, n, "kernel_size", cls)
        scale = math.sqrt(1 / (in_channels * math.prod(kernel_size)))
        self.weight = mx.random.uniform(low=-scale, high=scale,
                                        shape=(out_channels, *kernel_size,
                                               in_channels // groups))
        if bias:
            self.bias = mx.zeros((out_channels,))
        self.stride = _tuple(stride, n, "stride", cls)
        self.padding = _tuple(padding, n, "padding", cls)
        self.dilation = _tuple(dilation, n, "dilation", cls)
        self.groups = groups

    def _extra_repr(self):
        out = self.weight.shape[0]
        return (f"{self.weight.shape[-1] * self.groups}, {out}, "
                f"kernel_size={tuple(self.weight.shape[1:-1])}, stride={self.stride}, "
                f"padding={self.padding}, dilation={self.dilation}, groups={self.groups}, "
                f"bias={'bias' in self}")

    def __call__(self, x):
        y = conv_general(x, self.weight, self.stride, self.padding, self.dilation, self.groups)
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


def conv_transpose_general(x, weight, stride, padding, dilation, output_padding):
    """Channels-last transposed convolution, ``weight (out, *kernel, in)``:
    ``y[i*s + j*d - p] += x[i] · w[j]``. Computed as a convolution of the input
    with zeros inserted between its elements (``stride - 1`` of them), padded by
    ``d*(k-1) - p`` (plus ``output_padding`` at the end), with the kernel flipped."""
    n = weight.ndim - 2
    kernel = tuple(weight.shape[1:-1])
    for axis in range(n):
        s = stride[axis]
        ax = axis + 1
        if s > 1:
            size = x.shape[ax]
            x = mx.expand_dims(x, ax + 1)
            widths = [(0, 0)] * x.ndim
            widths[ax + 1] = (0, s - 1)
            x = mx.pad(x, widths)
            shape = list(x.shape)
            x = mx.reshape(x, tuple(shape[:ax]) + (size * s,) + tuple(shape[ax + 2:]))
            x = x[(slice(None),) * ax + (slice(0, (size - 1) * s + 1),)]
        low = dilation[axis] * (kernel[axis] - 1) - padding[axis]
        high = low + output_padding[axis]
        if low < 0 or high < 0:
            start = max(0, -low)
            stop = x.shape[ax] - max(0, -high)
            x = x[(slice(None),) * ax + (slice(start, stop),)]
        if low > 0 or high > 0:
            widths = [(0, 0)] * x.ndim
            widths[ax] = (max(0, low), max(0, high))
            x = mx.pad(x, widths)
    flipped = weight[(slice(None),) + (slice(None, None, -1),) * n]
    return conv_general(x, flipped, (1,) * n, (0,) * n, dilation, 1)


class _ConvTranspose(Module):
    def __init__(self, n, in_channels, out_channels, kernel_size, stride, padding, dilation,
                 output_padding, bias):
        super().__init__()
        cls = type(self).__name__
        kernel_size = _tuple(kernel_size, n, "kernel_size", cls)
        scale = math.sqrt(1 / (in_channels * math.prod(kernel_size)))
        self.weight = mx.random.uniform(low=-scale, high=scale,
                                        shape=(out_channels, *kernel_size, in_channels))
        if bias:
            self.bias = mx.zeros((out_channels,))
        self.stride = _tuple(stride, n, "stride", cls)
        self.padding = _tuple(padding, n, "padding", cls)
        self.dilation = _tuple(dilation, n, "dilation", cls)
        self.output_padding = _tuple(output_padding, n, "output_padding", cls)

    def _extra_repr(self):
        return (f"{self.weight.shape[-1]}, {self.weight.shape[0]}, "
                f"kernel_size={tuple(self.weight.shape[1:-1])}, stride={self.stride}, "
                f"padding={self.padding}, dilation={self.dilation}, "
                f"output_padding={self.output_padding}, bias={'bias' in self}")

    def __call__(self, x):
        y = conv_transpose_general(x, self.weight, self.stride, self.padding, self.dilation,
                                   self.output_padding)
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
