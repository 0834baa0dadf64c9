"""Rotary, sinusoidal and ALiBi positional encodings."""

import math

import tessera.core as mx
from tessera.nn.layers.base import Module


class RoPE(Module):
    """Rotary positional encoding of the first ``dims`` features."""

    def __init__(self, dims: int, traditional: bool = False, base: float = 10000,
                 scale: float = 1.0):
        super().__init__()
        self.dims = dims
        self.traditional = traditional
        self.base = base
        self.scale = scale

    def _extra_repr(self):
        return f"{self.dims}, traditional={self.traditional}"

    def __call__(self, x, offset: int = 0):
        return mx.fast.rope(x, self.dims, traditional=self.traditional, base=self.base,
                           scale=self.scale, offset=offset)


class SinusoidalPositionalEncoding(Module):
    """Maps positions to ``[sin, cos]`` features of size ``dims``."""

    def __init__(self, dims: int, min_freq: float = 0.0001, max_freq: float = 1,
                 scale=None, cos_first: bool = False, full_turns: bool = False):
        super().__init__()
        one_zero = 1 - mx.arange(0, dims // 2) / (dims // 2 - 1)
        min_freq = math.log(min_freq)
        max_freq = math.log(max_freq)
        self._sigmas = mx.exp(one_zero * (max_freq - min_freq) + min_freq)
        if full_turns:
            self._sigmas = self._sigmas * (2 * math.pi)
        self.scale = scale or (2 / dims) ** 0.5
        self.cos_first = cos_first

    def __call__(self, x):
        y = mx.expand_dims(x, -1) * self._sigmas
        cosy = mx.cos(y)
        siny = mx.sin(y)
        if self.cos_first:
            y = mx.concatenate([cosy, siny], axis=-1)
        else:
            y = mx.concatenate([siny, cosy], axis=-1)
        if self.scale != 1:
            y = y * self.scale
        return y


class ALiBi(Module):
    """Adds ``-|i - j| * slope_h`` biases to attention scores."""

    @staticmethod
    def create_alibi_matrix(q_sequence_length: int, k_sequence_length: int, num_heads: int,
                            offset: int, dtype=mx.float32):
        x1 = mx.arange(offset, q_sequence_length)
        x2 = mx.arange(0, k_sequence_length)
        distance_matrix = -mx.abs(mx.expand_dims(x1[:, None] - x2[None, :], axis=(0, 1)))
        alibi_slope = ALiBi.create_alibi_slope(num_heads=num_heads)
        alibi_mask = (distance_matrix * alibi_slope).astype(dtype)
        return alibi_mask

    @staticmethod
    def create_alibi_slope(num_heads, dtype=mx.float32):
        x = (2**8) ** (1 / num_heads)
        out = mx.power(x, -mx.arange(1, num_heads + 1)).astype(dtype)
        return mx.expand_dims(out, axis=(-1, -2))

    def __call__(self, attention_scores, offset=0, mask=None):
        alibi_mask = ALiBi.create_alibi_matrix(
            q_sequence_length=attention_scores.shape[-2] + offset,
            k_sequence_length=attention_scores.shape[-1],
            num_heads=attention_scores.shape[1],
            offset=offset,
            dtype=attention_scores.dtype)
        if mask is not None:
            alibi_mask = alibi_mask + mask
        return attention_scores + alibi_mask
