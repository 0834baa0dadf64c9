"""Spatial resizing of ``(N, *spatial, C)`` inputs.

Each spatial axis is resized by multiplying it with an interpolation matrix
``(out, in)`` built from the sampling positions (one 1 per row for nearest, two
weights per row for linear), which is the gather the core does not have yet.
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


def _resize(x, matrices):
    for axis, w in enumerate(matrices, start=1):
        x = mx.moveaxis(x, axis, -1)
        x = x @ mx.array(w.T).astype(x.dtype)
        x = mx.moveaxis(x, -1, axis)
    return x


def upsample_nearest(x, scale_factor: Tuple):
    """Nearest-neighbour resize by ``scale_factor`` (one factor per spatial dim)."""
    return _resize(x, [_nearest_matrix(n, s) for n, s in zip(x.shape[1:-1], scale_factor)])


def upsample_linear(x, scale_factor: Tuple, align_corners: bool = False):
    """(Multi-)linear resize by ``scale_factor`` (one factor per spatial dim)."""
    return _resize(x, [_linear_matrix(n, s, align_corners)
                       for n, s in zip(x.shape[1:-1], scale_factor)])


class Upsample(Module):
    """Resizes ``(N, *spatial, C)`` by ``scale_factor``; modes ``'nearest'`` and
    ``'linear'`` (``'cubic'`` is not available yet)."""

    def __init__(self, scale_factor: Union[float, Tuple],
                 mode: Literal["nearest", "linear", "cubic"] = "nearest",
                 align_corners: bool = False, antialias: bool = False):
        super().__init__()
        if mode not in ("nearest", "linear", "cubic"):
            raise ValueError(f"[Upsample] got an unsupported upsampling mode {mode!r}")
        if mode == "cubic":
            raise ValueError("[Upsample] mode 'cubic' is not available in this build")
        if antialias:
            if mode == "nearest":
                raise ValueError("[Upsample] antialias is only for 'linear' and 'cubic'")
            if align_corners:
                raise ValueError("[Upsample] antialias cannot be used with align_corners")
            raise ValueError("[Upsample] antialias is not available in this build")
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
        return upsample_linear(x, scale, self.align_corners)
