"""Fused elementwise chains of compile: tanh-GELU and a chain of 10 ops over
2^N float32, compiled against uncompiled, in GB/s counting one read and one
write; beside PyTorch (eager, and torch.compile where it works) when torch
imports. On the GPU also the first call of a new fused kernel with an empty
disk cache, and in a new process with the cache warm.

    python bench/compile_fusion.py --device gpu --log2n 28
    python bench/compile_fusion.py --device cpu --log2n 24
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from measure import report, timings  # noqa: E402

import tessera.core as mx  # noqa: E402


def gelu(x):
    return 0.5 * x * (1 + mx.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))


def chain10(x):
    y = x * 1.01 + 0.5
    y = mx.abs(y) - 0.25
    y = mx.maximum(y, 0.0) * y
    y = mx.sqrt(y + 1.0) * 0.5
    return mx.negative(mx.exp(-y))


def timed(f, reps=9, warmup=2, sync=None):
    """(median, best) wall time of reps calls of f after warmup calls; on a
    shared CPU the best is the steadier figure."""
    t = timings(f, reps, warmup, sync)
    return t[len(t) // 2], t[0]


def torch_gelu(torch, x):
    return 0.5 * x * (1 + torch.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))


def torch_chain10(torch, x):
    y = x * 1.01 + 0.5
    y = torch.abs(y) - 0.25
    y = torch.clamp_min(y, 0.0) * y
    y = torch.sqrt(y + 1.0) * 0.5
    return torch.negative(torch.exp(-y))


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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", choices=["cpu", "gpu"], default="gpu")
    ap.add_argument("--log2n", type=int, default=None)
    args = ap.parse_args()
    device = mx.gpu if args.device == "gpu" else mx.cpu
    log2n = args.log2n or (28 if args.device == "gpu" else 24)
    n = 1 << log2n
    mx.set_default_device(device)
    x = mx.random.normal((n,))
    mx.eval(x)
    sync = mx.synchronize
    moved = 2 * 4 * n
    rows = []

    for name, f in [("gelu", gelu), ("chain10", chain10)]:
        for label, g in [("uncompiled", f), ("compiled", mx.compile(f))]:
            t, best = timed(lambda: mx.eval(g(x)), sync=sync)
            report(f"{name}_{label}_{args.device}_2^{log2n}", t, moved / 1e9, "GB")
            rows.append((f"{name} {label}", moved / t / 1e9, moved / best / 1e9))

    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        dev = "cuda" if args.device == "gpu" else "cpu"
        if dev == "cpu":
            torch.set_num_threads(os.cpu_count())
        tx = torch.randn(n, device=dev)
        tsync = torch.cuda.synchronize if dev == "cuda" else None
        for name, f in [("gelu", torch_gelu), ("chain10", torch_chain10)]:
            variants = [("torch eager", lambda x, f=f: f(torch, x))]
            try:
                variants.append(("torch.compile", torch.compile(lambda x, f=f: f(torch, x))))
            except Exception as e:  # noqa: BLE001
                print(f"torch.compile unavailable: {e}", file=sys.stderr)
            for label, g in variants:
                try:
                    t, best = timed(lambda: g(tx), warmup=3, sync=tsync)
                except Exception as e:  # noqa: BLE001
                    print(f"{label} {name} failed: {type(e).__name__}: {e}", file=sys.stderr)
                    continue
                key = label.replace(" ", "_").replace(".", "_")
                report(f"{name}_{key}_{args.device}_2^{log2n}", t, moved / 1e9, "GB")
                rows.append((f"{name} {label}", moved / t / 1e9, moved / best / 1e9))

    print(f"\n| {args.device} 2^{log2n} float32 | GB/s, median | GB/s, best |\n|---|---|---|")
    for label, median, best in rows:
        print(f"| {label} | {median:9.1f} | {best:9.1f} |")

    if args.device == "gpu":
        with tempfile.TemporaryDirectory() as cache:
            k = time.time_ns() % 1000003  # a kernel no cache holds
            cold = first_call_seconds(cache, k)
            warm = first_call_seconds(cache, k)
        report("fused_first_call_empty_disk_cache", cold, 1, "call")
        report("fused_first_call_warm_disk_cache", warm, 1, "call")
        print(f"\nfirst call of a new fused kernel (trace, NVRTC or disk cache, run): "
              f"empty disk cache {cold * 1e3:.1f} ms, warm disk cache {warm * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
