"""Max and average pooling over the spatial dims of ``(N, *spatial, C)`` inputs,
through strided windows (``mx.as_strided``)."""

from typing import Optional, Tuple, Union

import tessera.core as mx
from tessera.nn.layers.base import Module, _int_tuple


def sliding_windows(x, window_shape, window_strides, window_dilation=None, op="sliding_windows"):
    """View of ``x (N, *spatial, C)`` as ``(N, *out_spatial, *window, C)``; errors name `op`."""
    if x.ndim < 3:
        raise ValueError(f"[{op}] expected an input of at least 3 dims "
                         f"(N, *spatial, C) but got shape {x.shape}")
    spatial_dims = x.shape[1:-1]
    if not (len(spatial_dims) == len(window_shape) == len(window_strides)):
        raise ValueError(f"[{op}] the window {window_shape} and strides "
                         f"{window_strides} do not match the spatial dims {spatial_dims}")
    dilation = window_dilation or (1,) * len(window_shape)
    for name, values in (("window_shape", window_shape), ("window_strides", window_strides),
                         ("window_dilation", dilation)):
        if any(v <= 0 for v in values):
            raise ValueError(f"[{op}] {name} must be positive but is {tuple(values)}")
    x = mx.contiguous(x)
    strides = [1] * x.ndim  # row-major, in elements
    for i in range(x.ndim - 2, -1, -1):
        strides[i] = strides[i + 1] * x.shape[i + 1]
    out = []
    for size, k, s, d in zip(spatial_dims, window_shape, window_strides, dilation):
        span = (k - 1) * d + 1
        if span > size:
            raise ValueError(f"[{op}] the window (span {span}) is larger than the "
                             f"input size {size}")
        out.append((size - span) // s + 1)
    final_shape = (x.shape[0], *out, *window_shape, x.shape[-1])
    final_strides = ([strides[0]] + [st * s for st, s in zip(strides[1:-1], window_strides)]
                     + [st * d for st, d in zip(strides[1:-1], dilation)] + [strides[-1]])
    return mx.as_strided(x, final_shape, final_strides)


class _Pool(Module):
    def __init__(self, pooling_function, kernel_size, stride, padding, padding_value, n):
        super().__init__()
        cls = type(self).__name__
        self._kernel_size = _int_tuple(cls, "kernel_size", kernel_size, n)
        self._stride = _int_tuple(cls, "stride", stride if stride is not None else kernel_size, n)
        self._padding = _int_tuple(cls, "padding", padding, n)
        if any(k <= 0 for k in self._kernel_size):
            raise ValueError(f"[{cls}] kernel_size must be positive but is {self._kernel_size}")
        if any(s <= 0 for s in self._stride):
            raise ValueError(f"[{cls}] stride must be positive but is {self._stride}")
        if any(p < 0 for p in self._padding):
            raise ValueError(f"[{cls}] padding must be non-negative but is {self._padding}")
        self._pooling_function = pooling_function
        self._padding_value = padding_value
        self._axes = tuple(range(-n - 1, -1, 1))

    def _extra_repr(self):
        return (f"kernel_size={self._kernel_size}, stride={self._stride}, "
                f"padding={self._padding}")

    def __call__(self, x):
        n = len(self._kernel_size)
        if x.ndim != n + 2:
            raise ValueError(f"[{type(self).__name__}] expected an input of {n + 2} dims "
                             f"(N, *spatial, C) but got shape {x.shape}")
        if any(p > 0 for p in self._padding):
            pad = [(0, 0)] + [(p, p) for p in self._padding] + [(0, 0)]
            x = mx.pad(x, pad, constant_values=self._padding_value)
        x = sliding_windows(x, self._kernel_size, self._stride, op=type(self).__name__)
        return self._pooling_function(x, self._axes)


def _max(x, axes):
    return mx.max(x, axis=axes)


def _mean(x, axes):
    return mx.mean(x, axis=axes)


class MaxPool1d(_Pool):
    def __init__(self, kernel_size: Union[int, Tuple[int]], stride=None, padding=0):
        super().__init__(_max, kernel_size, stride, padding, -float("inf"), 1)


class MaxPool2d(_Pool):
    def __init__(self, kernel_size: Union[int, Tuple[int, int]], stride=None, padding=0):
        super().__init__(_max, kernel_size, stride, padding, -float("inf"), 2)


class MaxPool3d(_Pool):
    def __init__(self, kernel_size: Union[int, Tuple[int, int, int]], stride=None, padding=0):
        super().__init__(_max, kernel_size, stride, padding, -float("inf"), 3)


class AvgPool1d(_Pool):
    def __init__(self, kernel_size: Union[int, Tuple[int]], stride=None, padding=0):
        super().__init__(_mean, kernel_size, stride, padding, 0, 1)


class AvgPool2d(_Pool):
    def __init__(self, kernel_size: Union[int, Tuple[int, int]], stride=None, padding=0):
        super().__init__(_mean, kernel_size, stride, padding, 0, 2)


class AvgPool3d(_Pool):
    def __init__(self, kernel_size: Union[int, Tuple[int, int, int]], stride=None, padding=0):
        super().__init__(_mean, kernel_size, stride, padding, 0, 3)
