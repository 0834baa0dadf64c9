"""Prefill and greedy decode of Llama-style language models with random bf16
(or 4-bit) weights: the model of examples/python/lm.py, so the same code
measures Tessera (through its mlx alias) and MLX CUDA, and the same model in
PyTorch, eagerly and with each decode step replayed as a CUDA graph over a
static key/value cache. One framework per process:

    python3 bench/llm_decode.py tessera|mlx MODEL [--quantize] [--batch B]
    python3 bench/llm_decode.py torch MODEL [--graph] [--batch B]

MODEL is a size of lm.PRESETS (1b: Llama 3.2 1B, 8b: Llama 3.1 8B; tiny checks
the script on any device); --quantize makes the weights 4-bit (groups of 64, as
mlx-lm's converter does; MLX API only). Each row of the batch is a prompt of
512 tokens, then 128 tokens are generated, reading each one as it comes with the
next step already queued (mx.async_eval), as mlx-lm does. Prints JSON lines
(bench/measure.py): the prefill (tokens of the batch), the decode (seconds per
step, the batch's tokens), and for the MLX-API frameworks the host time to
build one decode step's graph (not run); the peak memory goes to stderr.
"""
import os
import sys
import time

from measure import report

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples",
                                "python"))
PROMPT, GENERATE = 512, 128


def prompt_tokens(batch, vocab):
    return [[(7 * i + 131 * b) % vocab for i in range(PROMPT)] for b in range(batch)]


def tag(size, quantize, batch):
    return f"llm_{size}_{'q4' if quantize else 'bf16'}_b{batch}"


def run_mlx_api(size, quantize, batch):
    import mlx.core as mx
    import lm

    args = lm.PRESETS[size]
    mx.random.seed(0)
    model = lm.random_model(args, mx.bfloat16, bits=4 if quantize else None)
    prompt = mx.array(prompt_tokens(batch, args.vocab_size), mx.int32)
    lm.generate(model, prompt, GENERATE)  # warm-up
    mx.reset_peak_memory()
    tokens, stats = lm.generate(model, prompt, GENERATE)
    assert all(len(row) == GENERATE for row in tokens)
    name = tag(size, quantize, batch)

    # The host's share of a decode step: building one token's graph, not run.
    # Each graph writes a cache of its own: writing one cache again and again
    # would chain every graph to the last, unevaluated, which no decoding loop
    # does (it evaluates each step). The caches stay unevaluated, holding no memory.
    token = mx.ones((batch, 1), mx.int32)
    mx.eval(token)
    caches = [model.make_cache(batch, PROMPT + 8) for _ in range(20)]
    for cache in caches:
        for c in cache:
            c.offset = PROMPT
    t0 = time.perf_counter()
    for cache in caches:
        model(token, cache)
    report(f"{name}_graph_build", (time.perf_counter() - t0) / len(caches), 1, "token")
    report(f"{name}_prefill{PROMPT}", batch * PROMPT / stats["prompt_tps"], batch * PROMPT, "token")
    report(f"{name}_decode", batch / stats["generation_tps"], batch, "token")
    print(f"{name}: peak memory {stats['peak_memory'] / 2**30:.2f} GiB", file=sys.stderr)


def torch_weights(args, device, dtype):
    """Random weights of lm.Model(args) under Hugging Face's names, as torch tensors."""
    import torch

    g = torch.Generator(device=device).manual_seed(0)

    def normal(*shape, scale):
        return (torch.randn(*shape, generator=g, device=device) * scale).to(dtype)

    dim, hidden, D = args.hidden_size, args.intermediate_size, args.head_dim
    q, kv = args.num_attention_heads * D, args.num_key_value_heads * D
    w = {"model.embed_tokens.weight": normal(args.vocab_size, dim, scale=dim ** -0.5),
         "model.norm.weight": torch.ones(dim, device=device, dtype=dtype)}
    if not args.tie_word_embeddings:
        w["lm_head.weight"] = normal(args.vocab_size, dim, scale=dim ** -0.5)
    for i in range(args.num_hidden_layers):
        p = f"model.layers.{i}."
        for name, o, n in [("self_attn.q_proj", q, dim), ("self_attn.k_proj", kv, dim),
                           ("self_attn.v_proj", kv, dim), ("self_attn.o_proj", dim, q),
                           ("mlp.gate_proj", hidden, dim), ("mlp.up_proj", hidden, dim),
                           ("mlp.down_proj", dim, hidden)]:
            w[p + name + ".weight"] = normal(o, n, scale=n ** -0.5)
        for name in ("input_layernorm", "post_attention_layernorm"):
            w[p + name + ".weight"] = torch.ones(dim, device=device, dtype=dtype)
    return w


class TorchModel:
    """lm.Model (Llama: no biases, no query/key norms) in PyTorch, with a static
    key/value cache of (B, kv_heads, max_len, head_dim) per layer. step() takes
    the offset as an int (eager: attention over the positions so far) or as a
    one-element tensor (capturable: attention over the whole cache, masked)."""

    def __init__(self, args, weights, batch, max_len):
        import torch
        import lm

        if args.model_type != "llama":
            raise ValueError(f"[llm_decode] the PyTorch model is Llama's, not {args.model_type}")
        self.a, self.w, self.max_len = args, weights, max_len
        t = next(iter(weights.values()))
        D = args.head_dim
        freqs = lm.rope_frequencies(args)
        freqs = (torch.tensor(freqs, dtype=torch.float64) if freqs else
                 args.rope_theta ** (torch.arange(0, D, 2, dtype=torch.float64) / D))
        angle = torch.arange(max_len, dtype=torch.float64)[:, None] / freqs[None, :]
        self.cos, self.sin = (f(angle).to(t.device, torch.float32) for f in (torch.cos, torch.sin))
        self.cache = [(torch.zeros(batch, args.num_key_value_heads, max_len, D, device=t.device,
                                   dtype=t.dtype),
                       torch.zeros(batch, args.num_key_value_heads, max_len, D, device=t.device,
                                   dtype=t.dtype)) for _ in range(args.num_hidden_layers)]
        self.positions = torch.arange(max_len, device=t.device)

    def rope(self, x, pos):  # (B, H, L, D); pos (L,) positions; the halves rotated
        import torch

        c, s = self.cos[pos], self.sin[pos]
        x1, x2 = x.float().chunk(2, dim=-1)
        return torch.cat((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1).to(x.dtype)

    def step(self, tokens, offset):
        """The next tokens (B,) after tokens (B, L) at offset: the logits' argmax."""
        import torch
        import torch.nn.functional as F

        a, w = self.a, self.w
        B, L = tokens.shape
        static = torch.is_tensor(offset)
        pos = offset + self.positions[:L] if static else self.positions[offset:offset + L]
        h = F.embedding(tokens, w["model.embed_tokens.weight"])
        for i, (kc, vc) in enumerate(self.cache):
            p = f"model.layers.{i}."
            x = F.rms_norm(h, (a.hidden_size,), w[p + "input_layernorm.weight"], a.rms_norm_eps)
            q, k, v = (F.linear(x, w[p + f"self_attn.{n}_proj.weight"]).view(B, L, -1, a.head_dim)
                       .transpose(1, 2) for n in "qkv")
            q, k = self.rope(q, pos), self.rope(k, pos)
            if static:  # one position, written at a tensor offset; the rest masked
                kc.index_copy_(2, pos, k)
                vc.index_copy_(2, pos, v)
                mask = (self.positions <= offset)[None, None, None, :]
                out = F.scaled_dot_product_attention(q, kc, vc, attn_mask=mask, enable_gqa=True)
            else:
                kc[:, :, offset:offset + L] = k
                vc[:, :, offset:offset + L] = v
                out = F.scaled_dot_product_attention(q, kc[:, :, :offset + L],
                                                     vc[:, :, :offset + L], is_causal=L > 1,
                                                     enable_gqa=True)
            h = h + F.linear(out.transpose(1, 2).reshape(B, L, -1), w[p + "self_attn.o_proj.weight"])
            x = F.rms_norm(h, (a.hidden_size,), w[p + "post_attention_layernorm.weight"],
                           a.rms_norm_eps)
            h = h + F.linear(F.silu(F.linear(x, w[p + "mlp.gate_proj.weight"]))
                             * F.linear(x, w[p + "mlp.up_proj.weight"]), w[p + "mlp.down_proj.weight"])
        h = F.rms_norm(h[:, -1], (a.hidden_size,), w["model.norm.weight"], a.rms_norm_eps)
        head = w["model.embed_tokens.weight" if a.tie_word_embeddings else "lm_head.weight"]
        return F.linear(h, head).argmax(-1)


def torch_generate(model, prompt, count, graph):
    """The tokens (B lists) generated after prompt (B, T), each read as it
    comes, and the prefill and decode seconds; with `graph` each decode step
    is a CUDA graph's replay."""
    import torch

    sync = torch.cuda.synchronize if prompt.is_cuda else (lambda: None)
    with torch.no_grad():
        if graph:
            token, offset = prompt[:, -1:].clone(), torch.zeros(1, dtype=torch.long,
                                                                device=prompt.device)
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):  # capture warms up on a side stream
                for _ in range(3):
                    model.step(token, offset)
            torch.cuda.current_stream().wait_stream(side)
            cuda_graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(cuda_graph):
                out = model.step(token, offset)
        sync()
        t0 = time.perf_counter()
        y = model.step(prompt, 0)
        rows = [[t] for t in y.tolist()]
        prefill = time.perf_counter() - t0
        t0 = time.perf_counter()
        T = prompt.shape[1]
        for n in range(1, count):
            if graph:
                token.copy_(y[:, None])
                offset.fill_(T + n - 1)
                cuda_graph.replay()
                y = out
            else:
                y = model.step(y[:, None], T + n - 1)
            for row, t in zip(rows, y.tolist()):
                row.append(t)
        return rows, prefill, time.perf_counter() - t0


def run_torch(size, batch, graph):
    import torch

    import lm

    args = lm.PRESETS[size]
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if graph and device != "cuda":
        raise ValueError("[llm_decode] --graph needs CUDA")
    model = TorchModel(args, torch_weights(args, device, torch.bfloat16), batch,
                       PROMPT + GENERATE + 8)
    prompt = torch.tensor(prompt_tokens(batch, args.vocab_size), device=device)
    torch_generate(model, prompt, GENERATE, graph)  # warm-up
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    _, prefill, decode = torch_generate(model, prompt, GENERATE, graph)
    name = tag(size, False, batch)
    report(f"{name}_prefill{PROMPT}", prefill, batch * PROMPT, "token")
    report(f"{name}_decode", decode / (GENERATE - 1), batch, "token")
    if device == "cuda":
        print(f"{name}: peak memory {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB",
              file=sys.stderr)


def main():
    argv = sys.argv[1:]
    framework = argv[0] if argv else "tessera"
    size = next((a for a in argv[1:] if not a.startswith("-")), "1b")
    batch = int(argv[argv.index("--batch") + 1]) if "--batch" in argv else 1
    quantize = "--quantize" in argv
    if framework == "torch":
        if quantize:
            sys.exit("llm_decode.py: PyTorch has no spelling of MLX's 4-bit quantization")
        # lm.py's arguments and rope frequencies only: through MLX's names.
        try:
            from tessera import mlx_alias
            mlx_alias.install()
        except ImportError:
            pass
        run_torch(size, batch, "--graph" in argv)
        return
    if framework == "tessera":
        from tessera import mlx_alias
        mlx_alias.install()
    elif framework != "mlx":
        sys.exit(f"llm_decode.py: unknown framework {framework} (tessera, mlx, torch)")
    run_mlx_api(size, quantize, batch)


if __name__ == "__main__":
    main()
