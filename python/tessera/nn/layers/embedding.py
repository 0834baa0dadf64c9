"""Embedding layer."""

import math
from typing import Optional

import tessera.core as mx
from tessera.nn.layers.base import Module


class Embedding(Module):
    """``weight (num_embeddings, dims)`` from N(0, 1/sqrt(dims)); ``__call__(x)`` is
    ``weight[x]``; ``as_linear(x)`` is ``x @ weight.T``."""

    def __init__(self, num_embeddings: int, dims: int):
        super().__init__()
        scale = math.sqrt(1 / dims)
        self.weight = mx.random.normal(shape=(num_embeddings, dims), scale=scale)

    def _extra_repr(self):
        return f"{self.weight.shape[0]}, {self.weight.shape[1]}"

    def __call__(self, x):
        return self.weight[x]

    def as_linear(self, x):
        """Tied output projection ``x @ weight.T``."""
        return x @ self.weight.T

    def to_quantized(self, group_size: Optional[int] = None, bits: Optional[int] = None,
                     mode: str = "affine", quantize_input: bool = False) -> Module:
        """The :class:`QuantizedEmbedding` with this layer's table."""
        from tessera.nn.layers.quantized import QuantizedEmbedding
        if quantize_input:
            raise ValueError("[Embedding.to_quantized] input quantization is not supported")
        return QuantizedEmbedding.from_embedding(self, group_size, bits, mode)
