"""Multi-head attention and the Transformer stacks."""

import math
from typing import Any, Callable, Optional

import tessera.core as mx
from tessera.nn.layers.activations import relu
from tessera.nn.layers.base import Module
from tessera.nn.layers.dropout import Dropout
from tessera.nn.layers.linear import Linear
from tessera.nn.layers.normalization import LayerNorm


class MultiHeadAttention(Module):
    """Multi-head attention with query/key/value/output projections."""

    def __init__(self, dims: int, num_heads: int, query_input_dims: Optional[int] = None,
                 key_input_dims: Optional[int] = None, value_input_dims: Optional[int] = None,
                 value_dims: Optional[int] = None, value_output_dims: Optional[int] = None,
                 bias: bool = False):
        super().__init__()
        if dims % num_heads != 0:
            raise ValueError(f"[MultiHeadAttention] the input feature dimensions should be "
                             f"divisible by the number of heads ({dims} % {num_heads}) != 0")
        query_input_dims = query_input_dims or dims
        key_input_dims = key_input_dims or dims
        value_input_dims = value_input_dims or key_input_dims
        value_dims = value_dims or dims
        value_output_dims = value_output_dims or dims

        self.num_heads = num_heads
        self.query_proj = Linear(query_input_dims, dims, bias=bias)
        self.key_proj = Linear(key_input_dims, dims, bias=bias)
        self.value_proj = Linear(value_input_dims, value_dims, bias=bias)
        self.out_proj = Linear(value_dims, value_output_dims, bias=bias)

    def __call__(self, queries, keys, values, mask=None):
        queries = self.query_proj(queries)
        keys = self.key_proj(keys)
        values = self.value_proj(values)

        num_heads = self.num_heads
        B, L, D = queries.shape
        _, S, _ = keys.shape
        queries = mx.transpose(mx.reshape(queries, (B, L, num_heads, -1)), (0, 2, 1, 3))
        keys = mx.transpose(mx.reshape(keys, (B, S, num_heads, -1)), (0, 2, 1, 3))
        values = mx.transpose(mx.reshape(values, (B, S, num_heads, -1)), (0, 2, 1, 3))

        scale = math.sqrt(1 / queries.shape[-1])
        output = mx.fast.scaled_dot_product_attention(queries, keys, values, scale=scale,
                                                      mask=mask)
        output = mx.reshape(mx.transpose(output, (0, 2, 1, 3)), (B, L, -1))
        return self.out_proj(output)

    @staticmethod
    def create_additive_causal_mask(N: int, dtype=mx.float32):
        indices = mx.arange(N)
        mask = mx.expand_dims(indices, 1) < mx.expand_dims(indices, 0)
        return mx.where(mask, mx.finfo(dtype).min, 0).astype(dtype)


class TransformerEncoderLayer(Module):
    def __init__(self, dims: int, num_heads: int, mlp_dims: Optional[int] = None,
                 dropout: float = 0.0, activation: Callable[[Any], Any] = relu,
                 norm_first: bool = True):
        super().__init__()
        mlp_dims = mlp_dims or dims * 4
        self.attention = MultiHeadAttention(dims, num_heads)
        self.ln1 = LayerNorm(dims)
        self.ln2 = LayerNorm(dims)
        _init_feed_forward(self, dims, mlp_dims, dropout, 2, activation, norm_first)

    def __call__(self, x, mask):
        if self.norm_first:
            y = self.ln1(x)
            x = x + self.dropout1(self.attention(y, y, y, mask))
            return x + _feed_forward(self, self.ln2(x), self.dropout2)
        x = self.ln1(x + self.dropout1(self.attention(x, x, x, mask)))
        return self.ln2(x + _feed_forward(self, x, self.dropout2))


def _init_feed_forward(layer, dims, mlp_dims, dropout, dropouts, activation, norm_first):
    """The members of a transformer layer after its attention and norms: the
    feed-forward block, dropout1 .. dropout<dropouts>, the activation and the
    norm_first flag."""
    layer.linear1 = Linear(dims, mlp_dims)
    layer.linear2 = Linear(mlp_dims, dims)
    for i in range(1, dropouts + 1):
        setattr(layer, f"dropout{i}", Dropout(dropout))
    layer.activation = activation
    layer.norm_first = norm_first


def _feed_forward(layer, x, dropout):
    """The feed-forward block of a transformer layer."""
    return layer.linear2(dropout(layer.activation(layer.linear1(x))))


def _checkpointed(layer, enabled):
    if not enabled:
        return layer
    from tessera.nn.utils import checkpoint
    return checkpoint(layer)


class _LayerStack(Module):
    """``num_layers`` layers of type ``_layer_type`` (each checkpointed with
    ``checkpoint``), then a LayerNorm; a call passes its arguments to every layer."""

    def __init__(self, num_layers: int, dims: int, num_heads: int,
                 mlp_dims: Optional[int] = None, dropout: float = 0.0,
                 activation=relu, norm_first: bool = True, checkpoint: bool = False):
        super().__init__()
        self.layers = [
            self._layer_type(dims, num_heads, mlp_dims, dropout, activation, norm_first)
            for _ in range(num_layers)
        ]
        self.ln = LayerNorm(dims)
        self.checkpoint = checkpoint

    def __call__(self, x, *args):
        for layer in self.layers:
            x = _checkpointed(layer, self.checkpoint)(x, *args)
        return self.ln(x)


class TransformerEncoder(_LayerStack):
    _layer_type = TransformerEncoderLayer


class TransformerDecoderLayer(Module):
    def __init__(self, dims: int, num_heads: int, mlp_dims: Optional[int] = None,
                 dropout: float = 0.0, activation: Callable[[Any], Any] = relu,
                 norm_first: bool = True):
        super().__init__()
        mlp_dims = mlp_dims or dims * 4
        self.self_attention = MultiHeadAttention(dims, num_heads)
        self.cross_attention = MultiHeadAttention(dims, num_heads)
        self.ln1 = LayerNorm(dims)
        self.ln2 = LayerNorm(dims)
        self.ln3 = LayerNorm(dims)
        _init_feed_forward(self, dims, mlp_dims, dropout, 3, activation, norm_first)

    def __call__(self, x, memory, x_mask, memory_mask):
        if self.norm_first:
            y = self.ln1(x)
            x = x + self.dropout1(self.self_attention(y, y, y, x_mask))
            y = self.ln2(x)
            x = x + self.dropout2(self.cross_attention(y, memory, memory, memory_mask))
            return x + _feed_forward(self, self.ln3(x), self.dropout3)
        x = self.ln1(x + self.dropout1(self.self_attention(x, x, x, x_mask)))
        x = self.ln2(x + self.dropout2(self.cross_attention(x, memory, memory, memory_mask)))
        return self.ln3(x + _feed_forward(self, x, self.dropout3))


class TransformerDecoder(_LayerStack):
    _layer_type = TransformerDecoderLayer


class Transformer(Module):
    def __init__(self, dims: int = 512, num_heads: int = 8, num_encoder_layers: int = 6,
                 num_decoder_layers: int = 6, mlp_dims: Optional[int] = None,
                 dropout: float = 0.0, activation=relu, custom_encoder=None,
                 custom_decoder=None, norm_first: bool = True, checkpoint: bool = False):
        super().__init__()
        self.encoder = custom_encoder or TransformerEncoder(
            num_encoder_layers, dims, num_heads, mlp_dims, dropout, activation, norm_first,
            checkpoint)
        self.decoder = custom_decoder or TransformerDecoder(
            num_decoder_layers, dims, num_heads, mlp_dims, dropout, activation, norm_first,
            checkpoint)

    def __call__(self, src, tgt, src_mask, tgt_mask, memory_mask):
        memory = self.encoder(src, src_mask)
        return self.decoder(tgt, memory, tgt_mask, memory_mask)
