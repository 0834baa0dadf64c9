"""Greedy decoding of a Llama-style model at batch 1, written the way mlx-lm's
llama.py writes it (nn.Linear, nn.RMSNorm, mx.fast.rope,
mx.fast.scaled_dot_product_attention, a preallocated key/value cache updated by
slice assignment, argmax, mx.async_eval of the next token before reading the
current one), so the same code measures Tessera and MLX CUDA; PyTorch runs the
same model eagerly. Random bf16 weights; one framework per process:

    python3 bench/llama_decode.py tessera [1b|8b] [--quantize]
    python3 bench/llama_decode.py mlx [1b|8b] [--quantize]
    python3 bench/llama_decode.py torch [1b|8b]

Prints JSON lines as bench/bench_gpu.cpp does: the prompt's prefill (tokens)
and the decode (seconds per generated token), and for the MLX-API frameworks the
host time to build one decode step's graph (not run).
"""
import sys
import time

from measure import report

CONFIGS = {  # dim, layers, heads, kv_heads, hidden, vocab
    "1b": (2048, 16, 32, 8, 8192, 128256),
    "8b": (4096, 32, 32, 8, 14336, 128256),
    "tiny": (256, 2, 4, 2, 512, 1000),  # a check of the script itself, on any device
    "1b-ops": (256, 16, 32, 8, 512, 1000),  # the 1b model's ops on small sizes: host time
}
PROMPT, GENERATE = 512, 128




def run_mlx_api(mx, nn, size, quantize):
    dim, layers, heads, kv_heads, hidden, vocab = CONFIGS[size]
    head_dim = dim // heads
    max_len = PROMPT + GENERATE + 8

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.q_proj = nn.Linear(dim, heads * head_dim, bias=False)
            self.k_proj = nn.Linear(dim, kv_heads * head_dim, bias=False)
            self.v_proj = nn.Linear(dim, kv_heads * head_dim, bias=False)
            self.o_proj = nn.Linear(heads * head_dim, dim, bias=False)
            self.rope = nn.RoPE(head_dim, base=500000.0)

        def __call__(self, x, cache):
            B, L, _ = x.shape
            q = self.q_proj(x).reshape(B, L, heads, -1).transpose(0, 2, 1, 3)
            k = self.k_proj(x).reshape(B, L, kv_heads, -1).transpose(0, 2, 1, 3)
            v = self.v_proj(x).reshape(B, L, kv_heads, -1).transpose(0, 2, 1, 3)
            off = cache["offset"]
            q, k = self.rope(q, offset=off), self.rope(k, offset=off)
            cache["k"][..., off:off + L, :] = k
            cache["v"][..., off:off + L, :] = v
            keys, values = cache["k"][..., :off + L, :], cache["v"][..., :off + L, :]
            out = mx.fast.scaled_dot_product_attention(
                q, keys, values, scale=head_dim ** -0.5, mask="causal" if L > 1 else None)
            return self.o_proj(out.transpose(0, 2, 1, 3).reshape(B, L, -1))

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.gate_proj = nn.Linear(dim, hidden, bias=False)
            self.down_proj = nn.Linear(hidden, dim, bias=False)
            self.up_proj = nn.Linear(dim, hidden, bias=False)

        def __call__(self, x):
            return self.down_proj(nn.silu(self.gate_proj(x)) * self.up_proj(x))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.self_attn, self.mlp = Attention(), MLP()
            self.input_layernorm = nn.RMSNorm(dim, eps=1e-5)
            self.post_attention_layernorm = nn.RMSNorm(dim, eps=1e-5)

        def __call__(self, x, cache):
            h = x + self.self_attn(self.input_layernorm(x), cache)
            return h + self.mlp(self.post_attention_layernorm(h))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed_tokens = nn.Embedding(vocab, dim)
            self.layers = [Block() for _ in range(layers)]
            self.norm = nn.RMSNorm(dim, eps=1e-5)
            self.lm_head = nn.Linear(dim, vocab, bias=False)

        def __call__(self, tokens, caches):
            h = self.embed_tokens(tokens)
            for layer, cache in zip(self.layers, caches):
                h = layer(h, cache)
            return self.lm_head(self.norm(h))

    model = Model()
    model.set_dtype(mx.bfloat16)
    if quantize:
        nn.quantize(model, group_size=64, bits=4)
    mx.eval(model.parameters())

    def new_caches():
        return [{"offset": 0,
                 "k": mx.zeros((1, kv_heads, max_len, head_dim), mx.bfloat16),
                 "v": mx.zeros((1, kv_heads, max_len, head_dim), mx.bfloat16)} for _ in range(layers)]

    def step(tokens, caches):
        logits = model(tokens, caches)
        for c in caches:
            c["offset"] += tokens.shape[1]
        return mx.argmax(logits[:, -1, :], axis=-1)

    def generate():
        caches = new_caches()
        prompt = mx.array([[(7 * i) % vocab for i in range(PROMPT)]], mx.int32)
        t0 = time.perf_counter()
        y = step(prompt, caches)
        mx.eval(y)
        prefill = time.perf_counter() - t0
        t0 = time.perf_counter()
        out = []
        for _ in range(GENERATE):
            nxt = step(y.reshape(1, 1), caches)
            mx.async_eval(nxt)
            out.append(y.item())
            y = nxt
        out.append(y.item())
        return prefill, time.perf_counter() - t0

    generate()  # warm-up
    prefill, decode = generate()
    tag = f"llama_{size}{'_q4' if quantize else ''}_bf16"
    # The host's share of a decode step: building one token's graph, not run.
    caches, token = new_caches(), mx.array([[1]], mx.int32)
    mx.eval([c["k"] for c in caches])
    t0 = time.perf_counter()
    for _ in range(20):
        for c in caches:
            c["offset"] = PROMPT
        step(token, caches)
    report(f"{tag}_graph_build", (time.perf_counter() - t0) / 20, 1, "token")
    report(f"{tag}_prefill{PROMPT}", prefill, PROMPT, "token")
    report(f"{tag}_decode", decode / GENERATE, 1, "token")


def run_torch(size):
    import torch
    import torch.nn.functional as F
    dim, layers, heads, kv_heads, hidden, vocab = CONFIGS[size]
    head_dim = dim // heads
    max_len = PROMPT + GENERATE + 8
    dev, bf16 = "cuda", torch.bfloat16
    torch.manual_seed(0)

    def lin(i, o):
        return (torch.randn(o, i, device=dev) * i ** -0.5).to(bf16)

    W = [dict(q=lin(dim, heads * head_dim), k=lin(dim, kv_heads * head_dim), v=lin(dim, kv_heads * head_dim),
              o=lin(heads * head_dim, dim), g=lin(dim, hidden), u=lin(dim, hidden), d=lin(hidden, dim),
              n1=torch.ones(dim, device=dev, dtype=bf16), n2=torch.ones(dim, device=dev, dtype=bf16))
         for _ in range(layers)]
    emb, head = (torch.randn(vocab, dim, device=dev) * 0.02).to(bf16), lin(dim, vocab)
    norm = torch.ones(dim, device=dev, dtype=bf16)
    inv = 1.0 / (500000.0 ** (torch.arange(0, head_dim, 2, device=dev, dtype=torch.float32) / head_dim))
    ang = torch.arange(max_len, device=dev, dtype=torch.float32)[:, None] * inv[None, :]
    cos, sin = ang.cos().to(bf16), ang.sin().to(bf16)

    def rope(x, off):
        L = x.shape[2]
        c, s = cos[off:off + L], sin[off:off + L]
        x1, x2 = x[..., :head_dim // 2], x[..., head_dim // 2:]
        return torch.cat((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1)

    @torch.no_grad()
    def step(tokens, caches, off):
        h = emb[tokens]
        B, L, _ = h.shape
        for w, (kc, vc) in zip(W, caches):
            x = F.rms_norm(h, (dim,), w["n1"], 1e-5)
            q = (x @ w["q"].T).view(B, L, heads, -1).transpose(1, 2)
            k = (x @ w["k"].T).view(B, L, kv_heads, -1).transpose(1, 2)
            v = (x @ w["v"].T).view(B, L, kv_heads, -1).transpose(1, 2)
            q, k = rope(q, off), rope(k, off)
            kc[:, :, off:off + L] = k
            vc[:, :, off:off + L] = v
            a = F.scaled_dot_product_attention(q, kc[:, :, :off + L], vc[:, :, :off + L],
                                               is_causal=L > 1, enable_gqa=True)
            h = h + a.transpose(1, 2).reshape(B, L, -1) @ w["o"].T
            x = F.rms_norm(h, (dim,), w["n2"], 1e-5)
            h = h + (F.silu(x @ w["g"].T) * (x @ w["u"].T)) @ w["d"].T
        return (F.rms_norm(h[:, -1], (dim,), norm, 1e-5) @ head.T).argmax(-1)

    def generate():
        caches = [(torch.zeros(1, kv_heads, max_len, head_dim, device=dev, dtype=bf16),
                   torch.zeros(1, kv_heads, max_len, head_dim, device=dev, dtype=bf16)) for _ in range(layers)]
        prompt = torch.tensor([[(7 * i) % vocab for i in range(PROMPT)]], device=dev)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        y = step(prompt, caches, 0)
        torch.cuda.synchronize()
        prefill = time.perf_counter() - t0
        t0 = time.perf_counter()
        off = PROMPT
        out = []
        for _ in range(GENERATE):
            y = step(y.view(1, 1), caches, off)
            off += 1
            out.append(y.item())
        return prefill, time.perf_counter() - t0

    generate()
    prefill, decode = generate()
    report(f"llama_{size}_bf16_prefill{PROMPT}", prefill, PROMPT, "token")
    report(f"llama_{size}_bf16_decode", decode / GENERATE, 1, "token")


def main():
    framework = sys.argv[1] if len(sys.argv) > 1 else "tessera"
    size = next((a for a in sys.argv[2:] if a in CONFIGS), "1b")
    quantize = "--quantize" in sys.argv
    if framework == "torch":
        run_torch(size)
        return
    if framework == "mlx":
        import mlx.core as mx
        import mlx.nn as nn
    else:
        import tessera.core as mx
        import tessera.nn as nn
    run_mlx_api(mx, nn, size, quantize)


if __name__ == "__main__":
    main()
