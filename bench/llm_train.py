"""Training steps of a Llama-style language model with random data: the model of
examples/python/lm.py (RMSNorm, rope, causal attention through
mx.fast.scaled_dot_product_attention, SwiGLU), trained with AdamW through
nn.value_and_grad and a step compiled as MLX's examples compile it
(mx.compile over the loss, the gradients and optimizer.update, with the model's
and the optimizer's state as inputs and outputs), so the same code measures
Tessera (through its mlx alias) and MLX CUDA; and the same model in PyTorch,
eager and under torch.compile. One framework per process:

    python3 bench/llm_train.py tessera|mlx [MODEL] [--dtype float32|bfloat16]
                               [--batch B] [--seq L] [--steps N] [--eager]
    python3 bench/llm_train.py torch [MODEL] [--dtype ...] [...] [--compile]

MODEL: 124m (d 768, 12 layers of 12 heads, ff 2048, vocab 32000; the default),
small (d 256, 4 layers of 4 heads, ff 768, vocab 2048: for a CPU) or tiny
(checks the script on any device). float32 allows TF32 products in all
three (MLX CUDA's default; torch.backends.cuda.matmul.allow_tf32); bfloat16
makes the weights bfloat16, with the optimizer's state in the weights' dtype
in all three (MLX's and PyTorch's AdamW both keep it so). --eager leaves the
MLX-API step uncompiled (rows named ..._eager); PyTorch runs eagerly unless
--compile (torch.compile of the model), under the same row names, so that
scripts/gpu-peers compares each with Tessera's compiled step. Prints JSON lines
(bench/measure.py): seconds per step and the batch's tokens, the median of the
timed steps, each step's loss read before the next starts (as a training loop
that logs it does). The first and last losses go to stderr: they must fall.
"""
import argparse
import contextlib
import os
import sys
import time

from measure import report, sampled

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples",
                                "python"))

MODELS = {
    "124m": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                 intermediate_size=2048, vocab_size=32000, max_position_embeddings=4096),
    "small": dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                  intermediate_size=768, vocab_size=2048, max_position_embeddings=4096),
    "tiny": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                 intermediate_size=128, vocab_size=256, max_position_embeddings=512),
}
WARMUP = 3


def batches(vocab, batch, seq, count, seed=0):
    """count (inputs, targets) pairs of int32 tokens, lists of lists: a
    pseudo-random walk over the vocabulary, so that the next token is learnable."""
    import random

    rng = random.Random(seed)
    out = []
    for _ in range(count):
        rows = []
        for _ in range(batch):
            t, row = rng.randrange(vocab), []
            for _ in range(seq + 1):
                row.append(t)
                t = (t * 31 + 7 + rng.randrange(3)) % vocab
            rows.append(row)
        out.append(([r[:-1] for r in rows], [r[1:] for r in rows]))
    return out


def timed_steps(step, data, read_loss):
    """Runs every batch through step; the seconds of each step after the
    warm-up ones, and the losses."""
    seconds, losses = [], []
    for i, (x, y) in enumerate(data):
        t0 = time.perf_counter()
        with sampled() if i >= WARMUP else contextlib.nullcontext():
            losses.append(read_loss(step(x, y)))
        if i >= WARMUP:
            seconds.append(time.perf_counter() - t0)
    seconds.sort()
    return seconds, losses


def finish(name, seconds, losses, tokens):
    report(name, seconds[len(seconds) // 2], tokens, "token")
    print(f"{name}: loss {losses[0]:.3f} -> {losses[-1]:.3f}", file=sys.stderr)


def profile_steps(run, data, count=2):
    """The GPU kernels of `count` more steps (to stderr: the JSON lines stay clean)."""
    from kernel_profile import print_kernels

    def work():
        for x, y in data[:count]:
            run(x, y)

    print_kernels(work, count, "step", top=30, file=sys.stderr)


def run_mlx_api(a):
    import mlx.core as mx
    import mlx.nn as nn
    import mlx.optimizers as optim
    from functools import partial

    import lm

    args = lm.ModelArgs(**MODELS[a.model])
    mx.random.seed(0)
    model = lm.Model(args)
    dtype = getattr(mx, a.dtype)
    model.set_dtype(dtype)
    mx.eval(model.parameters())
    optimizer = optim.AdamW(learning_rate=3e-4, weight_decay=0.01)

    def loss_fn(model, x, y):
        logits = model(x)
        return nn.losses.cross_entropy(logits.astype(mx.float32), y, reduction="mean")

    loss_and_grad = nn.value_and_grad(model, loss_fn)

    def step(x, y):
        loss, grads = loss_and_grad(model, x, y)
        optimizer.update(model, grads)
        return loss

    if not a.eager:
        state = [model.state, optimizer.state]
        step = partial(mx.compile, inputs=state, outputs=state)(step)

    def run(x, y):
        loss = step(mx.array(x, mx.int32), mx.array(y, mx.int32))
        mx.eval(loss, model.parameters(), optimizer.state)
        return loss

    data = batches(args.vocab_size, a.batch, a.seq, WARMUP + a.steps)
    seconds, losses = timed_steps(run, data, lambda loss: loss.item())
    tag = "_eager" if a.eager else ""
    finish(f"llm_train_{a.model}_{a.dtype}{tag}", seconds, losses, a.batch * a.seq)
    if a.profile:
        profile_steps(run, data)


def run_torch(a):
    import torch
    import torch.nn.functional as F

    import lm

    args = lm.ModelArgs(**MODELS[a.model])
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    dtype = getattr(torch, a.dtype)
    D, H = args.head_dim, args.num_attention_heads

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            d, f = args.hidden_size, args.intermediate_size
            lin = lambda i, o: torch.nn.Linear(i, o, bias=False)  # noqa: E731
            self.q, self.k, self.v, self.o = lin(d, d), lin(d, d), lin(d, d), lin(d, d)
            self.gate, self.up, self.down = lin(d, f), lin(d, f), lin(f, d)
            self.n1, self.n2 = torch.nn.RMSNorm(d, args.rms_norm_eps), torch.nn.RMSNorm(
                d, args.rms_norm_eps)

        def forward(self, h, cos, sin):
            B, L, _ = h.shape
            x = self.n1(h)
            q, k, v = (p(x).view(B, L, H, D).transpose(1, 2) for p in (self.q, self.k, self.v))
            q, k = rope(q, cos, sin), rope(k, cos, sin)
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            h = h + self.o(out.transpose(1, 2).reshape(B, L, -1))
            x = self.n2(h)
            return h + self.down(F.silu(self.gate(x)) * self.up(x))

    def rope(x, cos, sin):  # the halves rotated, as mx.fast.rope with traditional=False
        x1, x2 = x.float().chunk(2, dim=-1)
        return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).to(x.dtype)

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(args.vocab_size, args.hidden_size)
            self.layers = torch.nn.ModuleList(Block() for _ in range(args.num_hidden_layers))
            self.norm = torch.nn.RMSNorm(args.hidden_size, args.rms_norm_eps)
            self.head = torch.nn.Linear(args.hidden_size, args.vocab_size, bias=False)
            inv = args.rope_theta ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
            angle = torch.arange(a.seq, dtype=torch.float64)[:, None] * inv[None, :]
            self.register_buffer("cos", torch.cos(angle).float(), persistent=False)
            self.register_buffer("sin", torch.sin(angle).float(), persistent=False)

        def forward(self, tokens):
            h = self.embed(tokens)
            for layer in self.layers:
                h = layer(h, self.cos, self.sin)
            return self.head(self.norm(h))

    torch.manual_seed(0)
    model = Model().to(device=device, dtype=dtype)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)

    def make_step(forward):
        def step(x, y):
            x = torch.tensor(x, dtype=torch.long, device=device)
            y = torch.tensor(y, dtype=torch.long, device=device)
            logits = forward(x)
            loss = F.cross_entropy(logits.float().view(-1, args.vocab_size), y.view(-1))
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            return loss
        return step

    data = batches(args.vocab_size, a.batch, a.seq, WARMUP + a.steps)
    step = make_step(torch.compile(model) if a.compile else model)
    sync()
    seconds, losses = timed_steps(step, data, lambda loss: loss.item())
    finish(f"llm_train_{a.model}_{a.dtype}", seconds, losses, a.batch * a.seq)
    if a.profile:
        profile_steps(lambda x, y: step(x, y).item(), data)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("framework", choices=["tessera", "mlx", "torch"])
    ap.add_argument("model", nargs="?", default="124m", choices=sorted(MODELS))
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--eager", action="store_true", help="MLX API: the step uncompiled")
    ap.add_argument("--compile", action="store_true", help="PyTorch: torch.compile the model")
    ap.add_argument("--profile", action="store_true",
                    help="after the timed steps, the GPU kernels of two more (PyTorch's profiler)")
    a = ap.parse_args()
    if a.framework == "torch":
        try:  # lm.py's arguments only: through MLX's names
            from tessera import mlx_alias
            mlx_alias.install()
        except ImportError:
            pass
        run_torch(a)
        return
    if a.framework == "tessera":
        from tessera import mlx_alias
        mlx_alias.install()
    run_mlx_api(a)


if __name__ == "__main__":
    main()
