"""Where a decode step's time goes: the model of llm_decode.py (random weights,
512-token prompt) on one MLX-API framework, one process:

    python3 bench/llm_profile.py tessera|mlx MODEL [--quantize] [--batch B] [--steps N]
                                 [--pipelined-only]

Prints, per generated token: the host time to build the step's graph, the
time of a step evaluated alone (mx.eval, nothing overlapped), the time of a
step in the pipelined loop of mlx-lm (the next step queued with mx.async_eval
before the current token is read) and the part of it spent waiting to read the
token, and, where PyTorch is installed (its
profiler records every CUDA kernel of the process through CUPTI), the GPU
kernels of one step by name (count and time) and the CUDA API calls that
launched them.
"""
import argparse
import os
import sys
import time

from kernel_profile import print_kernels
from measure import sampled

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples",
                                "python"))
PROMPT = 512


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("framework", choices=["tessera", "mlx"])
    ap.add_argument("model")
    ap.add_argument("--quantize", action="store_true")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--pipelined-only", action="store_true",
                    help="time only the pipelined loop (for TESSERA_HOST_PROFILE=1)")
    a = ap.parse_args()
    if a.framework == "tessera":
        from tessera import mlx_alias
        mlx_alias.install()
    import mlx.core as mx
    import lm

    args = lm.PRESETS[a.model]
    mx.random.seed(0)
    model = lm.random_model(args, mx.bfloat16, bits=4 if a.quantize else None)
    B, n = a.batch, a.steps
    prompt = mx.array([[(7 * i + 131 * b) % args.vocab_size for i in range(PROMPT)]
                       for b in range(B)], mx.int32)
    cache = model.make_cache(B, PROMPT + 4 * n + 8)

    def step(tokens, kv=cache):
        return mx.argmax(model(tokens, kv)[:, -1, :], axis=-1)

    y = step(prompt)
    mx.eval(y)

    def build(count):  # graphs of `count` steps, not run
        # A cache of the same shapes and offsets, thrown away after: writing
        # the cache (`keys[..., i, :] = k`) changes its arrays in place, for
        # every handle, so the real cache cannot be restored.
        kv = model.make_cache(B, cache[0].size)
        for c, d in zip(kv, cache):
            c.offset = d.offset
        t0 = time.perf_counter()
        for _ in range(count):
            step(y[:, None], kv)
            for c, d in zip(kv, cache):
                c.offset = d.offset
        return (time.perf_counter() - t0) / count

    def sync(count):
        nonlocal y
        t0 = time.perf_counter()
        for _ in range(count):
            y = step(y[:, None])
            mx.eval(y)
        return (time.perf_counter() - t0) / count

    read_wait = [0.0]

    def pipelined(count):
        nonlocal y
        read_wait[0] = 0.0
        t0 = time.perf_counter()
        mx.async_eval(y)
        for _ in range(count):
            nxt = step(y[:, None])
            mx.async_eval(nxt)
            t1 = time.perf_counter()
            y.item() if B == 1 else y.tolist()
            read_wait[0] += time.perf_counter() - t1
            y = nxt
        mx.eval(y)
        read_wait[0] /= count
        return (time.perf_counter() - t0) / count

    sync(8), pipelined(8)  # warm-up
    if a.pipelined_only:
        with sampled():
            t = pipelined(n) * 1e3
        print(f"{a.framework} {a.model} pipelined {t:.3f} ms per token, of which reading the "
              f"token {read_wait[0] * 1e3:.3f}")
        return
    ms = {"build": build(n) * 1e3, "sync eval": sync(n) * 1e3, "pipelined": pipelined(n) * 1e3,
          "of which reading the token": read_wait[0] * 1e3}
    print(f"{a.framework} {a.model} {'q4' if a.quantize else 'bf16'} b{B}, ms per token: "
          + ", ".join(f"{k} {v:.3f}" for k, v in ms.items())
          + f" ({1e3 / ms['pipelined'] * B:.0f} tokens/s pipelined)")
    print_kernels(lambda: pipelined(n), n, "token")

if __name__ == "__main__":
    main()
