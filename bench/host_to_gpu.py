"""A NumPy array of 1 GiB (float32, pageable memory, as a user has it) made an
array of the framework and summed on the GPU, end to end: how fast host data
reaches the GPU. One framework per process:

    python3 bench/host_to_gpu.py tessera|mlx|torch

Prints JSON lines (bench/measure.py), bytes of the NumPy array per second:
`array` (mx.array(n), a copy; PyTorch: torch.from_numpy(n).cuda()), and for the
MLX API `asarray` (mx.asarray(n)) and, where the framework has it, `from_dlpack`
(mx.from_dlpack(n): NumPy's DLPack export of host memory)."""
import sys

import numpy as np

from measure import report, time_median

N = 1 << 28


def main():
    framework = sys.argv[1] if len(sys.argv) > 1 else "tessera"
    host = np.random.default_rng(0).standard_normal(N, dtype=np.float32)
    if framework == "torch":
        import torch

        def run():
            return torch.from_numpy(host).cuda().sum().item()
        report("host_to_gpu_sum_1GiB_array", time_median(run, 5, 1), host.nbytes, "byte")
        return
    if framework == "tessera":
        import tessera.core as mx
    else:
        import mlx.core as mx
    mx.set_default_device(mx.gpu)
    makers = [("array", mx.array), ("asarray", mx.asarray)]
    if hasattr(mx, "from_dlpack"):
        makers.append(("from_dlpack", mx.from_dlpack))
    for name, make in makers:
        def run():
            return mx.sum(make(host)).item()
        report(f"host_to_gpu_sum_1GiB_{name}", time_median(run, 5, 1), host.nbytes, "byte")


if __name__ == "__main__":
    main()
