"""Spatial resizing of ``(N, *spatial, C)`` inputs.

Each spatial axis is resized by multiplying it with an interpolation matrix
``(out, in)`` built from the sampling positions (one 1 per row for nearest, two
weights per row for linear, four for cubic, a filter widened by the inverse
scale for antialiased downsampling), MLX's weights in MLX's positions.
"""

import math
from typing import Literal, Tuple, Union

import numpy as np

import tessera.core as mx
from tessera.nn.layers.base import Module


def _nearest_matrix(n, scale):
    m = int(scale * n)
    idx = np.arange(m, dtype=np.float64)
    if m > n:
        idx = np.round((idx + 0.5) * (n / m) - 0.5)
    else:
        idx = idx * (n / m)
    idx = np.clip(idx.astype(np.int64), 0, n - 1)
    w = np.zeros((m, n), np.float32)
    w[np.arange(m), idx] = 1
    return w


def _linear_matrix(n, scale, align_corners):
    m = int(scale * n)
    if align_corners:
        pos = np.arange(m, dtype=np.float64) * ((n - 1) / (m - 1) if m > 1 else 0.0)
    else:
        step = 1 / scale
        start = ((m - 1) * step - n + 1) / 2
        pos = np.arange(m, dtype=np.float64) * step - start
    pos = np.clip(pos, 0, n - 1)
    left = np.floor(pos).astype(np.int64)
    right = np.ceil(pos).astype(np.int64)
    frac = pos - left
    w = np.zeros((m, n), np.float64)
    np.add.at(w, (np.arange(m), left), 1 - frac)
    np.add.at(w, (np.arange(m), right), frac)
    return w.astype(np.float32)


def _positions(n, scale, align_corners):
    m = int(scale * n)
    if align_corners:
        return np.arange(m, dtype=np.float64) * ((n - 1) / max(m - 1, 1))
    step = 1 / scale
    start = ((m - 1) * step - n + 1) / 2
    return np.arange(m, dtype=np.float64) * step - start


def _cubic_weight(x, a):
    """Keys' cubic kernel at distance x >= 0 (support 2)."""
    inner = ((a + 2.0) * x - (a + 3.0)) * x * x + 1
    outer = (((x - 5) * x + 8) * x - 4) * a
    return np.where(x <= 1.0, inner, np.where(x <= 2.0, outer, 0.0))


def _cubic_matrix(n, scale, align_corners):
    """Four taps per output (a = -0.75, OpenCV's), border taps clamped."""
    pos = _positions(n, scale, align_corners)
    m = len(pos)
    left = np.floor(pos)
    w = np.zeros((m, n), np.float64)
    for tap in (left - 1, left, left + 1, left + 2):
        weight = _cubic_weight(np.abs(pos - tap), -0.75)
        np.add.at(w, (np.arange(m), np.clip(tap, 0, n - 1).astype(np.int64)), weight)
    return w.astype(np.float32)


def _antialias_matrix(n, scale, radius, kernel):
    """A filter of the given support, widened by 1 / scale when downsampling,
    out-of-range taps dropped and each row normalised to sum 1 (PyTorch's and
    MLX's antialiased interpolation)."""
    pos = _positions(n, scale, False)
    m = len(pos)
    widen = 1.0 / scale if scale < 1 else 1.0
    taps = math.ceil(radius * widen) + 1
    w = np.zeros((m, n), np.float64)
    total = np.zeros(m)
    cols = []
    for k in range(-taps + 1, taps):
        idx = np.floor(pos) + k
        weight = kernel(np.abs(pos - idx) / widen)
        weight = np.where((idx >= 0) & (idx < n), weight, 0.0)
        total += weight
        cols.append((idx, weight))
    total = np.where(total > 0, total, 1.0)
    for idx, weight in cols:
        np.add.at(w, (np.arange(m), np.clip(idx, 0, n - 1).astype(np.int64)), weight / total)
    return w.astype(np.float32)


def _triangle(x):
    return np.maximum(1.0 - x, 0.0)


def _cubic_pil(x):
    return _cubic_weight(x, -0.5)


def _check_antialias(align_corners, antialias):
    if antialias and align_corners:
        raise ValueError("[Upsample] antialias=True with align_corners=True is not supported")


def _resize(x, matrices):
    for axis, w in enumerate(matrices, start=1):
        x = mx.moveaxis(x, axis, -1)
        x = x @ mx.array(w.T).astype(x.dtype)
        x = mx.moveaxis(x, -1, axis)
    return x


def upsample_nearest(x, scale_factor: Tuple):
    """Nearest-neighbour resize by ``scale_factor`` (one factor per spatial dim)."""
    return _resize(x, [_nearest_matrix(n, s) for n, s in zip(x.shape[1:-1], scale_factor)])


def _separable(x, scale_factor, align_corners, antialias, matrix, support, window):
    """Resizes each spatial dim by its factor through one interpolation matrix:
    ``matrix(n, s, align_corners)``, or with ``antialias`` the filter ``window``
    of half-width ``support`` widened for downsampling."""
    _check_antialias(align_corners, antialias)
    sizes = zip(x.shape[1:-1], scale_factor)
    if antialias:
        return _resize(x, [_antialias_matrix(n, s, support, window) for n, s in sizes])
    return _resize(x, [matrix(n, s, align_corners) for n, s in sizes])


def upsample_linear(x, scale_factor: Tuple, align_corners: bool = False,
                    antialias: bool = False):
    """(Multi-)linear resize by ``scale_factor`` (one factor per spatial dim)."""
    return _separable(x, scale_factor, align_corners, antialias, _linear_matrix, 1.0, _triangle)


def upsample_cubic(x, scale_factor: Tuple, align_corners: bool = False,
                   antialias: bool = False):
    """(Multi-)cubic resize by ``scale_factor``: Keys' kernel with a = -0.75,
    or a = -0.5 and a filter widened for downsampling with ``antialias``."""
    return _separable(x, scale_factor, align_corners, antialias, _cubic_matrix, 2.0, _cubic_pil)


class Upsample(Module):
    """Resizes ``(N, *spatial, C)`` by ``scale_factor``; modes ``'nearest'``,
    ``'linear'`` and ``'cubic'``, the last two optionally antialiased."""

    def __init__(self, scale_factor: Union[float, Tuple],
                 mode: Literal["nearest", "linear", "cubic"] = "nearest",
                 align_corners: bool = False, antialias: bool = False):
        super().__init__()
        if mode not in ("nearest", "linear", "cubic"):
            raise ValueError(f"[Upsample] got an unsupported upsampling mode {mode!r}")
        if antialias:
            if mode == "nearest":
                raise ValueError("[Upsample] antialias is only for 'linear' and 'cubic'")
            _check_antialias(align_corners, antialias)
        self.scale_factor = (tuple(map(float, scale_factor))
                             if isinstance(scale_factor, (list, tuple)) else float(scale_factor))
        self.mode = mode
        self.align_corners = align_corners
        self.antialias = antialias

    def _extra_repr(self):
        return (f"scale_factor={self.scale_factor}, mode={self.mode!r}, "
                f"align_corners={self.align_corners}")

    def __call__(self, x):
        dims = x.ndim - 2
        if dims <= 0:
            raise ValueError(f"[Upsample] the input should have at least 1 spatial dimension "
                             f"(ndim >= 3) but has shape {x.shape}")
        scale = self.scale_factor
        if isinstance(scale, tuple):
            if len(scale) != dims:
                raise ValueError(f"[Upsample] {len(scale)} scale factors for {dims} spatial "
                                 f"dimensions")
        else:
            scale = (scale,) * dims
        if self.mode == "nearest":
            return upsample_nearest(x, scale)
        if self.mode == "cubic":
            return upsample_cubic(x, scale, self.align_corners, self.antialias)
        return upsample_linear(x, scale, self.align_corners, self.antialias)
