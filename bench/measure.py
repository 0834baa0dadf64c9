"""What the Python sides of the benchmarks share: the median of timed runs and
the JSON line of one result (the format of bench/bench_util.h)."""
import json
import time


def time_median(f, reps=7, warmup=2, sync=None):
    """The median wall time of reps calls of f after warmup calls; sync (when
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
    return t[len(t) // 2]


def report(name, seconds, work, unit):
    print(json.dumps({"name": name, "seconds": seconds, "work": work, "unit": unit}), flush=True)
