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
