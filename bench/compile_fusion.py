"""Fused elementwise chains of compile: tanh-GELU and a chain of 10 ops over
2^N float32, uncompiled and compiled, in bytes moved counting one read and one
write. Written once against the MLX API, so that the same code measures Tessera
and MLX; PyTorch runs eager and torch.compile under the same names. One
framework per process (scripts/gpu-peers fusion runs the three on the GPU):

    python3 bench/compile_fusion.py tessera --device gpu --log2n 28 > tessera.jsonl
    python3 bench/compile_fusion.py mlx     --device gpu --log2n 28 > mlx.jsonl
    python3 bench/compile_fusion.py torch   --device gpu --log2n 28 > torch.jsonl
    python3 bench/compare.py tessera.jsonl mlx.jsonl "MLX CUDA"

Tessera on the GPU also reports the first call of a new fused kernel with an
empty disk cache, and in a new process with the cache warm.
"""
import argparse
import functools
import os
import subprocess
import sys
import tempfile
import time
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from measure import report, run_framework, time_median  # noqa: E402


def gelu(mx, x):
    return 0.5 * x * (1 + mx.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))


def chain10(mx, x):
    y = x * 1.01 + 0.5
    y = mx.abs(y) - 0.25
    y = mx.maximum(y, 0.0) * y
    y = mx.sqrt(y + 1.0) * 0.5
    return mx.negative(mx.exp(-y))


COLD = """
import sys, time
import tessera.core as mx
x = mx.ones((1 << 20,))
mx.eval(x)
f = mx.compile(lambda x: mx.log1p(mx.abs(x * {k} + 0.125)) * 3.0 - x)
t0 = time.perf_counter()
mx.eval(f(x))
mx.synchronize()
print(time.perf_counter() - t0)
"""


def first_call_seconds(cache, k):
    env = dict(os.environ, XDG_CACHE_HOME=cache)
    out = subprocess.run([sys.executable, "-c", COLD.format(k=k)], env=env, check=True,
                         capture_output=True, text=True)
    return float(out.stdout.strip().splitlines()[-1])


def run_mlx_api(mx, args, log2n):
    n = 1 << log2n
    mx.set_default_device(mx.gpu if args.device == "gpu" else mx.cpu)
    x = mx.random.normal((n,))
    mx.eval(x)
    for name, f in [("gelu", gelu), ("chain10", chain10)]:
        f = functools.partial(f, mx)
        for label, g in [("uncompiled", f), ("compiled", mx.compile(f))]:
            t = time_median(lambda: mx.eval(g(x)), 9, 2, mx.synchronize)
            report(f"{name}_{label}_{args.device}_2^{log2n}", t, 2 * 4 * n, "byte")
    if args.device == "gpu" and mx.__name__.startswith("tessera"):
        with tempfile.TemporaryDirectory() as cache:
            k = time.time_ns() % 1000003  # a kernel no cache holds
            cold = first_call_seconds(cache, k)
            warm = first_call_seconds(cache, k)
        report("fused_first_call_empty_disk_cache", cold, 1, "call")
        report("fused_first_call_warm_disk_cache", warm, 1, "call")


def run_torch(args, log2n):
    import torch
    n = 1 << log2n
    dev = "cuda" if args.device == "gpu" else "cpu"
    if dev == "cpu":
        torch.set_num_threads(os.cpu_count())
    x = torch.randn(n, device=dev)
    sync = torch.cuda.synchronize if dev == "cuda" else None
    # The few MLX names the chains use, in PyTorch's spelling.
    api = types.SimpleNamespace(tanh=torch.tanh, abs=torch.abs, maximum=torch.clamp_min,
                                sqrt=torch.sqrt, negative=torch.negative, exp=torch.exp)
    for name, f in [("gelu", gelu), ("chain10", chain10)]:
        eager = functools.partial(f, api)
        for label, g in [("uncompiled", eager), ("compiled", torch.compile(eager))]:
            try:
                t = time_median(lambda: g(x), 9, 3, sync)
            except Exception as e:  # noqa: BLE001  (torch.compile needs a working compiler)
                print(f"torch {label} {name} failed: {type(e).__name__}: {e}", file=sys.stderr)
                continue
            report(f"{name}_{label}_{args.device}_2^{log2n}", t, 2 * 4 * n, "byte")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("framework", choices=["tessera", "mlx", "torch"], nargs="?", default="tessera")
    ap.add_argument("--device", choices=["cpu", "gpu"], default="gpu")
    ap.add_argument("--log2n", type=int, default=None)
    args = ap.parse_args()
    log2n = args.log2n or (28 if args.device == "gpu" else 24)
    run_framework(args.framework, lambda: run_torch(args, log2n),
                  lambda mx: run_mlx_api(mx, args, log2n))


if __name__ == "__main__":
    main()
