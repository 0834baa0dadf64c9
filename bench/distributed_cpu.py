"""all_sum and all_gather over MPI on this machine's CPU, beside MLX's CPU build
with its MPI backend: one job per framework, the same program.

    mpirun -np 2 python bench/distributed_cpu.py tessera
    mpirun -np 2 /path/to/mlx-venv/bin/python bench/distributed_cpu.py mlx

(as root, export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1).
Rank 0 prints one JSON line per case: the median seconds of one call, evaluated,
over 20 calls, float32."""

import json
import sys
import time

framework = sys.argv[1] if len(sys.argv) > 1 else "tessera"
if framework == "tessera":
    import tessera.core as mx
else:
    import mlx.core as mx

group = mx.distributed.init(backend="mpi")
rank = group.rank()
for n in (1, 1 << 10, 1 << 20, 1 << 24):
    x = mx.ones((n,), dtype=mx.float32) * (rank + 1)
    mx.eval(x)
    for name, op in (("all_sum", mx.distributed.all_sum), ("all_gather", mx.distributed.all_gather)):
        if name == "all_gather" and n > 1 << 20:
            continue
        times = []
        for i in range(25):
            t = time.perf_counter()
            mx.eval(op(x, group=group))
            times.append(time.perf_counter() - t)
        times = sorted(times[5:])
        if rank == 0:
            print(json.dumps({"framework": framework, "name": f"{name}_{n}", "size": group.size(),
                              "seconds": times[len(times) // 2]}), flush=True)
