"""Llama- and Qwen-style decoder-only language models for inference and training,
written against MLX's API: it runs on MLX, and on Tessera once its `mlx` alias is
installed (tessera.mlx_alias.install(), or `python -m tessera.run`), which
generate.py, train_lm.py and bench/llm_decode.py do when Tessera is there.

    args = ModelArgs.from_dict(json.load(open("config.json")))  # or PRESETS["1b"]
    model = load_model("path/to/folder")                    # Hugging Face layout
    tokens, stats = generate(model, mx.array([[1, 2, 3]]), max_tokens=32)

The models are those of Hugging Face's `LlamaForCausalLM`, `MistralForCausalLM`,
`Qwen2ForCausalLM` (biases on the query, key and value projections) and
`Qwen3ForCausalLM` (an RMSNorm of each query and key head), with the same
parameter names, so a folder of config.json and *.safetensors (one file or
shards with model.safetensors.index.json; bf16, or 4-bit as mlx-lm's converter
writes it: config.json's `quantization` and `.scales`/`.biases` tensors) loads
as it is. Pre-norm blocks with nn.RMSNorm (mx.fast.rms_norm), rotary embeddings
with mx.fast.rope (Llama 3's frequency scaling included), grouped-query attention
with mx.fast.scaled_dot_product_attention over a preallocated key/value cache
written in place (`cache[..., off:off + L, :] = k`, as mlx-lm does), a SwiGLU MLP.
"""

import glob
import json
import math
import os
import time
from dataclasses import asdict, dataclass, fields
from functools import partial
from typing import Optional

import mlx.core as mx
import mlx.nn as nn
from mlx.utils import tree_flatten

ARCHITECTURES = {"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM",
                 "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM"}


@dataclass
class ModelArgs:
    """The fields of a Hugging Face config.json that these models read."""
    model_type: str = "llama"
    hidden_size: int = 2048
    num_hidden_layers: int = 16
    num_attention_heads: int = 32
    num_key_value_heads: Optional[int] = None  # None: num_attention_heads
    intermediate_size: int = 8192
    vocab_size: int = 32000
    head_dim: Optional[int] = None  # None: hidden_size // num_attention_heads
    rms_norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    rope_scaling: Optional[dict] = None  # {"rope_type": "llama3" | "linear", ...}
    max_position_embeddings: int = 4096
    tie_word_embeddings: bool = False
    attention_bias: Optional[bool] = None  # None: the model type's (Qwen2: q/k/v biases)
    mlp_bias: bool = False
    quantization: Optional[dict] = None  # {"group_size", "bits"[, "mode"]} as mlx-lm writes it

    def __post_init__(self):
        if self.model_type not in ARCHITECTURES:
            raise ValueError(f"[ModelArgs] model_type '{self.model_type}' is not one of "
                             f"{', '.join(ARCHITECTURES)}")
        if self.num_key_value_heads is None:
            self.num_key_value_heads = self.num_attention_heads
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(f"[ModelArgs] num_attention_heads ({self.num_attention_heads}) "
                             f"must be a multiple of num_key_value_heads "
                             f"({self.num_key_value_heads})")
        if self.head_dim is None:
            if self.hidden_size % self.num_attention_heads:
                raise ValueError(f"[ModelArgs] hidden_size ({self.hidden_size}) must be a "
                                 f"multiple of num_attention_heads ({self.num_attention_heads}) "
                                 f"when head_dim is not given")
            self.head_dim = self.hidden_size // self.num_attention_heads
        if self.attention_bias is None:
            self.attention_bias = self.model_type == "qwen2"

    @classmethod
    def from_dict(cls, config):
        """The arguments of a config.json's dict (other keys are ignored)."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in config.items() if k in names})

    def to_dict(self):
        """A config.json for these arguments, with `architectures` for Hugging Face."""
        config = {"architectures": [ARCHITECTURES[self.model_type]]}
        config.update((k, v) for k, v in asdict(self).items() if v is not None)
        return config


# Random-weight models of real sizes (Llama 3.2 1B, Llama 3.1 8B) and one for checks.
_LLAMA3_ROPE = {"rope_type": "llama3", "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                "original_max_position_embeddings": 8192}
PRESETS = {
    "tiny": ModelArgs(hidden_size=256, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, intermediate_size=512, vocab_size=1000,
                      max_position_embeddings=2048),
    "1b": ModelArgs(hidden_size=2048, num_hidden_layers=16, num_attention_heads=32,
                    num_key_value_heads=8, intermediate_size=8192, vocab_size=128256,
                    rope_theta=500000.0, rope_scaling=dict(_LLAMA3_ROPE, factor=32.0),
                    max_position_embeddings=131072, tie_word_embeddings=True),
    "8b": ModelArgs(hidden_size=4096, num_hidden_layers=32, num_attention_heads=32,
                    num_key_value_heads=8, intermediate_size=14336, vocab_size=128256,
                    rope_theta=500000.0, rope_scaling=dict(_LLAMA3_ROPE, factor=8.0),
                    max_position_embeddings=131072),
}


def rope_frequencies(args: ModelArgs):
    """The per-pair wavelengths (head_dim / 2 floats, `freqs` of mx.fast.rope)
    of Llama 3's scaled rotary embedding, or None for plain `base` rope."""
    scaling = args.rope_scaling or {}
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    if kind in ("default", "linear"):
        return None
    if kind != "llama3":
        raise ValueError(f"[rope] rope_scaling of type '{kind}' is not supported "
                         f"(default, linear, llama3)")
    factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    context = scaling["original_max_position_embeddings"]
    out = []
    for i in range(0, args.head_dim, 2):
        freq = args.rope_theta ** (i / args.head_dim)
        wavelength = 2 * math.pi * freq
        if wavelength > context / low:
            freq *= factor
        elif wavelength > context / high:
            smooth = (context / wavelength - low) / (high - low)
            freq /= (1 - smooth) / factor + smooth
        out.append(freq)
    return out


class RoPE(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.dims = args.head_dim
        scaling = args.rope_scaling or {}
        linear = scaling.get("rope_type", scaling.get("type")) == "linear"
        self.scale = 1 / scaling["factor"] if linear else 1.0
        freqs = rope_frequencies(args)
        self.base = None if freqs else args.rope_theta
        self._freqs = None if freqs is None else mx.array(freqs, mx.float32)

    def __call__(self, x, offset=0):
        return mx.fast.rope(x, self.dims, traditional=False, base=self.base, scale=self.scale,
                            offset=offset, freqs=self._freqs)


class KVCache:
    """The keys and values of one layer, (B, kv_heads, size, head_dim) arrays
    preallocated for `size` positions and written in place. With `rotating`,
    decoding past `size` positions overwrites the oldest (a sliding window:
    rotary embeddings depend only on relative positions, and a step of one
    query attends to every cached key, so their order does not matter)."""

    def __init__(self, batch, kv_heads, head_dim, size, dtype, rotating=False):
        self.keys = mx.zeros((batch, kv_heads, size, head_dim), dtype)
        self.values = mx.zeros((batch, kv_heads, size, head_dim), dtype)
        self.size, self.rotating, self.offset = size, rotating, 0

    def update(self, keys, values):
        """Stores the new positions (B, kv_heads, L, head_dim); returns the keys
        and values to attend to."""
        off, L = self.offset, keys.shape[2]
        if off + L <= self.size:
            self.keys[..., off:off + L, :] = keys
            self.values[..., off:off + L, :] = values
            self.offset += L
            return self.keys[..., :off + L, :], self.values[..., :off + L, :]
        if not self.rotating or L > 1:
            raise ValueError(f"[KVCache] positions {off} to {off + L} do not fit in a cache "
                             f"of {self.size}{' (a sliding window takes one at a time)' if self.rotating else ''}")
        i = off % self.size
        self.keys[..., i:i + 1, :] = keys
        self.values[..., i:i + 1, :] = values
        self.offset += 1
        return self.keys, self.values

    def state(self):
        return [self.keys, self.values]


class Attention(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        dim, heads, kv_heads, head_dim = (args.hidden_size, args.num_attention_heads,
                                          args.num_key_value_heads, args.head_dim)
        self.heads, self.kv_heads, self.scale = heads, kv_heads, head_dim ** -0.5
        bias = args.attention_bias
        self.q_proj = nn.Linear(dim, heads * head_dim, bias=bias)
        self.k_proj = nn.Linear(dim, kv_heads * head_dim, bias=bias)
        self.v_proj = nn.Linear(dim, kv_heads * head_dim, bias=bias)
        self.o_proj = nn.Linear(heads * head_dim, dim, bias=bias and args.model_type != "qwen2")
        if args.model_type == "qwen3":
            self.q_norm = nn.RMSNorm(head_dim, eps=args.rms_norm_eps)
            self.k_norm = nn.RMSNorm(head_dim, eps=args.rms_norm_eps)
        self.rope = RoPE(args)

    def __call__(self, x, cache=None):
        B, L, _ = x.shape
        q = self.q_proj(x).reshape(B, L, self.heads, -1)
        k = self.k_proj(x).reshape(B, L, self.kv_heads, -1)
        v = self.v_proj(x).reshape(B, L, self.kv_heads, -1).transpose(0, 2, 1, 3)
        if "q_norm" in self:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = q.transpose(0, 2, 1, 3), k.transpose(0, 2, 1, 3)
        offset = 0 if cache is None else cache.offset
        q, k = self.rope(q, offset), self.rope(k, offset)
        if cache is not None:
            k, v = cache.update(k, v)
        out = mx.fast.scaled_dot_product_attention(q, k, v, scale=self.scale,
                                                   mask="causal" if L > 1 else None)
        return self.o_proj(out.transpose(0, 2, 1, 3).reshape(B, L, -1))


@partial(mx.compile, shapeless=True)
def swiglu(gate, x):
    """silu(gate) * x, compiled as mlx-lm's models compile it: one fused kernel."""
    return nn.silu(gate) * x


class MLP(nn.Module):
    """SwiGLU: down_proj(silu(gate_proj(x)) * up_proj(x))."""

    def __init__(self, args: ModelArgs):
        super().__init__()
        dim, hidden, bias = args.hidden_size, args.intermediate_size, args.mlp_bias
        self.gate_proj = nn.Linear(dim, hidden, bias=bias)
        self.down_proj = nn.Linear(hidden, dim, bias=bias)
        self.up_proj = nn.Linear(dim, hidden, bias=bias)

    def __call__(self, x):
        return self.down_proj(swiglu(self.gate_proj(x), self.up_proj(x)))


class Block(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.self_attn = Attention(args)
        self.mlp = MLP(args)
        self.input_layernorm = nn.RMSNorm(args.hidden_size, eps=args.rms_norm_eps)
        self.post_attention_layernorm = nn.RMSNorm(args.hidden_size, eps=args.rms_norm_eps)

    def __call__(self, x, cache=None):
        h = x + self.self_attn(self.input_layernorm(x), cache)
        return h + self.mlp(self.post_attention_layernorm(h))


class Transformer(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.embed_tokens = nn.Embedding(args.vocab_size, args.hidden_size)
        self.layers = [Block(args) for _ in range(args.num_hidden_layers)]
        self.norm = nn.RMSNorm(args.hidden_size, eps=args.rms_norm_eps)

    def __call__(self, tokens, cache=None):
        h = self.embed_tokens(tokens)
        for i, layer in enumerate(self.layers):
            h = layer(h, None if cache is None else cache[i])
        return self.norm(h)


class Model(nn.Module):
    """Logits (B, L, vocab) of the token after each of tokens (B, L)."""

    def __init__(self, args: ModelArgs):
        super().__init__()
        self.args = args
        self.model = Transformer(args)
        if not args.tie_word_embeddings:
            self.lm_head = nn.Linear(args.hidden_size, args.vocab_size, bias=False)

    def __call__(self, tokens, cache=None):
        h = self.model(tokens, cache)
        if self.args.tie_word_embeddings:
            return self.model.embed_tokens.as_linear(h)
        return self.lm_head(h)

    @property
    def layers(self):
        return self.model.layers

    def make_cache(self, batch, size, rotating=False):
        """One KVCache per layer for `size` positions, in the weights' float type."""
        a = self.args
        dtype = self.model.norm.weight.dtype
        return [KVCache(batch, a.num_key_value_heads, a.head_dim, size, dtype, rotating)
                for _ in self.layers]

    def parameter_count(self):
        return sum(p.size for _, p in tree_flatten(self.parameters()))


# --- Hugging Face folders --------------------------------------------------------------------

def quantize(model, group_size=64, bits=4, mode="affine"):
    """Quantizes the model's Linear and Embedding layers whose input size is a
    multiple of group_size, as mlx-lm's converter does, and records it in
    model.args (save_model writes it to config.json)."""
    nn.quantize(model, group_size, bits, mode=mode,
                class_predicate=lambda _, m: (hasattr(m, "to_quantized")
                                              and m.weight.shape[-1] % group_size == 0))
    model.args.quantization = {"group_size": group_size, "bits": bits, "mode": mode}
    return model


def load_weights(folder):
    """Every tensor of the folder's weights: the files model.safetensors.index.json
    names, or else every model*.safetensors (as mlx-lm reads them)."""
    index = os.path.join(folder, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
        files = [os.path.join(folder, name) for name in files]
    else:
        files = sorted(glob.glob(os.path.join(folder, "model*.safetensors")))
    if not files:
        raise ValueError(f"[load_model] no model*.safetensors in {folder}")
    weights = {}
    for file in files:
        weights.update(mx.load(file))
    return weights


def load_config(folder):
    with open(os.path.join(folder, "config.json")) as f:
        return json.load(f)


def load_model(folder, dtype=None):
    """The model of a Hugging Face folder (config.json, *.safetensors), quantized
    where config.json's `quantization` says so, its floats cast to dtype if given."""
    config = load_config(folder)
    model = Model(ModelArgs.from_dict(config))
    weights = {k: v for k, v in load_weights(folder).items() if "rotary_emb.inv_freq" not in k}
    if model.args.tie_word_embeddings:
        weights.pop("lm_head.weight", None)
    q = config.get("quantization")
    if q:
        nn.quantize(model, q["group_size"], q["bits"], mode=q.get("mode", "affine"),
                    class_predicate=lambda p, m: q[p] if p in q else
                    hasattr(m, "to_quantized") and f"{p}.scales" in weights)
    if dtype is not None:
        weights = {k: v.astype(dtype) if mx.issubdtype(v.dtype, mx.floating) else v
                   for k, v in weights.items()}
    model.load_weights(list(weights.items()))
    model.eval()
    mx.eval(model.parameters())
    return model


def save_model(folder, model, shard_bytes=5 << 30, config=None):
    """Writes config.json (the model's arguments, updated with `config`) and its
    weights in shards of at most shard_bytes (one tensor may exceed it): as
    model.safetensors when they fit in one, else as model-0000i-of-0000n.safetensors
    with model.safetensors.index.json."""
    os.makedirs(folder, exist_ok=True)
    weights = dict(tree_flatten(model.parameters()))
    shards, size = [], 0
    for name, w in weights.items():
        if not shards or size + w.nbytes > shard_bytes:
            shards.append({})
            size = 0
        shards[-1][name] = w
        size += w.nbytes
    index = {"metadata": {"total_size": sum(w.nbytes for w in weights.values())},
             "weight_map": {}}
    for i, shard in enumerate(shards):
        name = (f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors" if len(shards) > 1
                else "model.safetensors")
        mx.save_safetensors(os.path.join(folder, name), shard, metadata={"format": "mlx"})
        index["weight_map"].update((k, name) for k in shard)
    if len(shards) > 1:
        with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
            json.dump(index, f, indent=1)
    dtype = str(model.model.norm.weight.dtype).split(".")[-1]
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump({**model.args.to_dict(), "torch_dtype": dtype, **(config or {})}, f, indent=1)


def random_model(args: ModelArgs, dtype=mx.bfloat16, bits=None, group_size=64):
    """A model of random weights in dtype, quantized to `bits` if given."""
    model = Model(args)
    model.set_dtype(dtype)
    if bits:
        quantize(model, group_size, bits)
    model.eval()
    mx.eval(model.parameters())
    return model


# --- Generation ------------------------------------------------------------------------------

def sample(logits, temperature=0.0, top_p=1.0, key=None):
    """The next token (B,) int32 of each row of logits (B, vocab): the likeliest
    with temperature 0; else drawn from softmax(logits / temperature) restricted
    to the top-p set (the likeliest tokens whose probabilities first sum to at
    least top_p under the untempered distribution)."""
    if temperature == 0:
        return mx.argmax(logits, axis=-1).astype(mx.int32)
    logits = logits.astype(mx.float32)
    if top_p >= 1.0:
        return mx.random.categorical(logits * (1 / temperature), key=key).astype(mx.int32)
    order = mx.argsort(-logits, axis=-1)
    ranked = mx.take_along_axis(logits, order, axis=-1)
    probs = mx.softmax(ranked, axis=-1)
    before = mx.cumsum(probs, axis=-1) - probs  # the mass of the likelier tokens
    ranked = mx.where(before < top_p, ranked * (1 / temperature), -float("inf"))
    pick = mx.random.categorical(ranked, key=key)
    return mx.take_along_axis(order, pick[:, None], axis=-1)[:, 0].astype(mx.int32)


def generate_step(model, prompt, max_tokens, cache, temperature=0.0, top_p=1.0, key=None):
    """Yields max_tokens arrays (B,) of the tokens after prompt (B, T): each
    next step is queued (mx.async_eval) before the current token is handed out."""
    def step(tokens, key):
        return sample(model(tokens, cache)[:, -1, :], temperature, top_p, key)

    def split():
        nonlocal key
        if key is None:
            return None
        key, sub = mx.random.split(key)
        return sub

    y = step(prompt, split())
    mx.async_eval(y)
    for n in range(max_tokens):
        if n + 1 < max_tokens:
            next_y = step(y[:, None], split())
            mx.async_eval(next_y)
        yield y
        if n + 1 < max_tokens:
            y = next_y


def generate(model, prompt, max_tokens, temperature=0.0, top_p=1.0, key=None, window=None,
             stop=(), on_token=None):
    """The tokens (B lists of ints) generated after prompt (B, T), at most
    max_tokens each, stopping once every row has produced a token of `stop`
    (kept), and the figures of the run: prompt and generation tokens/s (over
    the batch), peak memory (bytes). on_token(list of B ints) sees each step
    as it comes. The cache holds prompt + max_tokens positions, or with
    `window` a sliding window of the last `window` (the prompt must fit in it)."""
    B, T = prompt.shape
    if max_tokens < 1 or T < 1:
        raise ValueError(f"[generate] needs a prompt and max_tokens of at least 1, got a prompt "
                         f"of {T} tokens and max_tokens {max_tokens}")
    size = T + max_tokens if window is None else min(window, T + max_tokens)
    cache = model.make_cache(B, size, rotating=window is not None)
    tokens, done = [[] for _ in range(B)], [False] * B
    t0 = time.perf_counter()
    for y in generate_step(model, prompt, max_tokens, cache, temperature, top_p, key):
        y = y.tolist()
        if not tokens[0]:
            t1 = time.perf_counter()
        for i, t in enumerate(y):
            if not done[i]:
                tokens[i].append(t)
                done[i] = t in stop
        if on_token:
            on_token(y)
        if all(done):
            break
    t2, steps = time.perf_counter(), max(len(row) for row in tokens)
    stats = {"prompt_tokens": B * T, "prompt_tps": B * T / (t1 - t0),
             "generation_tokens": B * steps,
             "generation_tps": B * (steps - 1) / (t2 - t1) if steps > 1 else 0.0,
             "peak_memory": mx.get_peak_memory()}
    return tokens, stats
