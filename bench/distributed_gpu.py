"""all_sum through NCCL on one GPU (world size 1), beside PyTorch's
torch.distributed all_reduce (NCCL backend, one process): the per-call cost of
the collective, and its rate for large arrays. One framework per process:

    python3 bench/distributed_gpu.py tessera|torch

Prints JSON lines (bench/measure.py): the median time of one all_sum of n
float32 values, evaluated and synchronized (a chain of 50 calls, timed whole,
divided by 50), for n from 1 to 2^26; work is the bytes summed. Tessera's
all_sum writes a new array (NCCL from input to output buffer), PyTorch's
all_reduce works in place."""
import os
import sys

from measure import report, time_median

SIZES = [1, 1 << 10, 1 << 16, 1 << 20, 1 << 24, 1 << 26]
CHAIN = 50


def run_tessera():
    import tessera.core as mx

    group = mx.distributed.init(strict=True, backend="nccl")
    for n in SIZES:
        x = mx.ones((n,), dtype=mx.float32)
        mx.eval(x)

        def chain():
            y = x
            for _ in range(CHAIN):
                y = mx.distributed.all_sum(y, group=group)
            mx.eval(y)
            mx.synchronize()

        report(f"nccl_all_sum_{n}", time_median(chain) / CHAIN, 4 * n, "B")


def run_torch():
    import torch
    import torch.distributed as td

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    td.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda:0"))
    for n in SIZES:
        x = torch.ones(n, dtype=torch.float32, device="cuda")

        def chain():
            for _ in range(CHAIN):
                td.all_reduce(x)
            torch.cuda.synchronize()

        report(f"nccl_all_sum_{n}", time_median(chain) / CHAIN, 4 * n, "B")
    td.destroy_process_group()


if __name__ == "__main__":
    framework = sys.argv[1] if len(sys.argv) > 1 else "tessera"
    {"tessera": run_tessera, "torch": run_torch}[framework]()
