"""A Llama-style decoder-only language model written with tessera.nn.

Pre-norm blocks with RMSNorm, rotary position embeddings (mx.fast.rope through
nn.RoPE), grouped-query attention (mx.fast.scaled_dot_product_attention with
fewer key/value heads than query heads), a SwiGLU MLP, and an output projection
tied to the token embedding (or its own Linear). train_lm.py trains it,
generate.py samples from a checkpoint; both use this file.
"""

import math
from dataclasses import dataclass

import tessera.core as mx
import tessera.nn as nn
from tessera.utils import tree_flatten


@dataclass
class ModelArgs:
    vocab_size: int = 256
    dim: int = 192
    layers: int = 4
    heads: int = 6
    kv_heads: int = 2
    hidden_dim: int = 512
    context: int = 256
    rope_base: float = 10000.0
    norm_eps: float = 1e-5
    tie_embeddings: bool = True


class KVCache:
    """The keys and values of the positions seen so far, at most `size` of them
    (a sliding window: rotary embeddings depend only on relative positions)."""

    def __init__(self, size):
        self.size = size
        self.keys = self.values = None
        self.offset = 0

    def update(self, keys, values):
        """Appends the new positions; returns every key and value to attend to."""
        self.offset += keys.shape[2]
        if self.keys is not None:
            keys = mx.concatenate([self.keys, keys], axis=2)
            values = mx.concatenate([self.values, values], axis=2)
        self.keys, self.values = keys[:, :, -self.size:], values[:, :, -self.size:]
        return keys, values


class Attention(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        if args.dim % args.heads or args.heads % args.kv_heads:
            raise ValueError(f"dim ({args.dim}) must be a multiple of heads ({args.heads}) "
                             f"and heads a multiple of kv_heads ({args.kv_heads})")
        self.heads, self.kv_heads = args.heads, args.kv_heads
        head_dim = args.dim // args.heads
        self.scale = 1 / math.sqrt(head_dim)
        self.wq = nn.Linear(args.dim, args.heads * head_dim, bias=False)
        self.wk = nn.Linear(args.dim, args.kv_heads * head_dim, bias=False)
        self.wv = nn.Linear(args.dim, args.kv_heads * head_dim, bias=False)
        self.wo = nn.Linear(args.heads * head_dim, args.dim, bias=False)
        self.rope = nn.RoPE(head_dim, base=args.rope_base)

    def __call__(self, x, cache=None):
        B, T, _ = x.shape

        def heads(y, n):  # (B, T, n * head_dim) -> (B, n, T, head_dim)
            return mx.transpose(mx.reshape(y, (B, T, n, -1)), (0, 2, 1, 3))

        q = heads(self.wq(x), self.heads)
        k = heads(self.wk(x), self.kv_heads)
        v = heads(self.wv(x), self.kv_heads)
        offset = 0 if cache is None else cache.offset
        q, k = self.rope(q, offset=offset), self.rope(k, offset=offset)
        if cache is not None:
            k, v = cache.update(k, v)
        out = mx.fast.scaled_dot_product_attention(
            q, k, v, scale=self.scale, mask="causal" if T > 1 else None)
        return self.wo(mx.reshape(mx.transpose(out, (0, 2, 1, 3)), (B, T, -1)))


class MLP(nn.Module):
    """SwiGLU: w2(silu(w1 x) * w3 x)."""

    def __init__(self, dim, hidden_dim):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden_dim, bias=False)
        self.w2 = nn.Linear(hidden_dim, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden_dim, bias=False)

    def __call__(self, x):
        return self.w2(nn.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.attention_norm = nn.RMSNorm(args.dim, eps=args.norm_eps)
        self.attention = Attention(args)
        self.mlp_norm = nn.RMSNorm(args.dim, eps=args.norm_eps)
        self.mlp = MLP(args.dim, args.hidden_dim)

    def __call__(self, x, cache=None):
        x = x + self.attention(self.attention_norm(x), cache)
        return x + self.mlp(self.mlp_norm(x))


class Llama(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.args = args
        self.embedding = nn.Embedding(args.vocab_size, args.dim)
        self.layers = [Block(args) for _ in range(args.layers)]
        self.norm = nn.RMSNorm(args.dim, eps=args.norm_eps)
        if not args.tie_embeddings:
            self.output = nn.Linear(args.dim, args.vocab_size, bias=False)
        # The projections into the residual stream start smaller, so that the
        # stream's variance does not grow with the depth.
        scale = 1 / math.sqrt(2 * args.layers)
        for block in self.layers:
            block.attention.wo.weight = block.attention.wo.weight * scale
            block.mlp.w2.weight = block.mlp.w2.weight * scale

    def __call__(self, tokens, caches=None):
        """Logits (B, T, vocab) of the next token after each of tokens (B, T)."""
        h = self.embedding(tokens)
        for i, block in enumerate(self.layers):
            h = block(h, None if caches is None else caches[i])
        h = self.norm(h)
        return self.embedding.as_linear(h) if self.args.tie_embeddings else self.output(h)

    def parameter_count(self):
        return sum(p.size for _, p in tree_flatten(self.parameters()))

    def generate(self, prompt, temperature=0.8, key=None):
        """Yields tokens (ints) sampled after the prompt (a list of ints), one at a
        time, with a key/value cache of the last `context` positions; temperature 0
        picks the most likely token."""
        caches = [KVCache(self.args.context - 1) for _ in self.layers]
        tokens = mx.array([prompt[-self.args.context:]], mx.int32)
        while True:
            logits = self(tokens, caches)[:, -1, :]
            if temperature == 0:
                token = mx.argmax(logits, axis=-1)
            else:
                sub = None
                if key is not None:
                    key, sub = mx.random.split(key)
                token = mx.random.categorical(logits * (1 / temperature), key=sub)
            token = token.astype(mx.int32)
            yield token.item()
            tokens = mx.reshape(token, (1, 1))
