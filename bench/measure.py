"""What the Python sides of the benchmarks share: the median of timed runs,
the JSON line of one result (the format of bench/bench_util.h), and the
switch of bench/host_sampler.c."""
import contextlib
import ctypes
import json
import os
import time


def timings(f, reps=7, warmup=2, sync=None):
    """The sorted wall times of reps calls of f after warmup calls; sync (when
    given) waits for work that f leaves queued, before and after each call."""
    for _ in range(warmup):
        f()
    if sync:
        sync()
    t = []
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        if sync:
            sync()
        t.append(time.perf_counter() - t0)
    t.sort()
    return t


def time_median(f, reps=7, warmup=2, sync=None):
    """The median of timings(f, reps, warmup, sync)."""
    t = timings(f, reps, warmup, sync)
    return t[len(t) // 2]


def per_op_us(run, n, reps=5):
    """Microseconds per op of run(n), a chain of n ops: the median of reps runs
    after a short run that warms the device and the caches."""
    run(min(n, 100))
    t = timings(lambda: run(n), reps=reps, warmup=0)
    return t[len(t) // 2] / n * 1e6


def report(name, seconds, work, unit):
    print(json.dumps({"name": name, "seconds": seconds, "work": work, "unit": unit}), flush=True)


def run_framework(framework, run_torch, run_mlx_api):
    """Runs one framework's side of a peer benchmark: PyTorch through run_torch(),
    MLX or Tessera (the same MLX-API code) through run_mlx_api(mx)."""
    if framework == "torch":
        run_torch()
    elif framework == "mlx":
        import mlx.core as mx
        run_mlx_api(mx)
    else:
        import tessera.core as mx
        run_mlx_api(mx)


@contextlib.contextmanager
def sampled():
    """Host samples taken only inside the block, when the process runs under
    bench/host_sampler.c with HOST_SAMPLER_MANUAL=1; nothing otherwise."""
    enable = None
    if os.environ.get("HOST_SAMPLER_OUT"):
        enable = getattr(ctypes.CDLL(None), "host_sampler_enable", None)
    if enable:
        enable(1)
    try:
        yield
    finally:
        if enable:
            enable(0)
