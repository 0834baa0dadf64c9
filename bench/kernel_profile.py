"""The GPU kernels of a piece of work, by name, through PyTorch's profiler
(CUPTI records every CUDA kernel of the process, whichever library launched
it), and the CUDA API calls that launched them:

    from kernel_profile import print_kernels
    print_kernels(lambda: step(x, y), count=2, unit="step")

Prints nothing but a line saying so where PyTorch is not installed."""
import collections
import sys


def print_kernels(work, count, unit, top=25, file=sys.stdout):
    """Runs work() once under the profiler; count: how many units it holds."""
    try:
        import torch
        from torch.profiler import ProfilerActivity, profile
    except ImportError:
        print("(no PyTorch here: no kernel profile)", file=file)
        return
    torch.cuda.init()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        work()
    kernels, api = collections.defaultdict(list), collections.defaultdict(list)
    for e in prof.events():
        dt = getattr(e, "device_type", None)
        if dt is not None and "CUDA" in str(dt):
            kernels[e.name].append(e.time_range.elapsed_us())
        elif e.name.startswith(("cuda", "cu")):
            api[e.name].append(e.time_range.elapsed_us())
    total = sum(sum(v) for v in kernels.values())
    n = sum(len(v) for v in kernels.values())
    print(f"GPU: {n / count:.1f} kernels per {unit}, {total / count:.1f} us of kernel time per "
          f"{unit}", file=file)
    print(f"{'kernel':<60} {'per ' + unit:>9} {'us each':>8} {'us/' + unit:>9}", file=file)
    for name, v in sorted(kernels.items(), key=lambda kv: -sum(kv[1]))[:top]:
        print(f"{name[:60]:<60} {len(v) / count:9.1f} {sum(v) / len(v):8.2f} "
              f"{sum(v) / count:9.1f}", file=file)
    print(f"{'CUDA API':<60} {'per ' + unit:>9} {'us each':>8} {'us/' + unit:>9}", file=file)
    for name, v in sorted(api.items(), key=lambda kv: -sum(kv[1]))[:10]:
        print(f"{name[:60]:<60} {len(v) / count:9.1f} {sum(v) / len(v):8.2f} "
              f"{sum(v) / count:9.1f}", file=file)
