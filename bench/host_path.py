"""The host cost of one op from Python: a chain of 10,000 scalar adds
(`x = x + 1.0`), built and then evaluated, on the CPU and on the GPU where there
is one. Written once against the MLX API, so that the same code measures
Tessera and MLX; PyTorch (eager) runs the same chain. One framework per process,
one JSON line per device, seconds per op, the median of several runs
(scripts/gpu-peers host runs the three and prints the ratios).
build/bench/host_path times the same chain from C++.

    python3 bench/host_path.py tessera [--n 10000] [--reps 9] > tessera.jsonl
    python3 bench/host_path.py mlx > mlx.jsonl
    python3 bench/host_path.py torch > torch.jsonl
    python3 bench/compare.py tessera.jsonl mlx.jsonl "MLX CUDA"
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from measure import per_op_us, report, run_framework  # noqa: E402


def mlx_api_chain(mx, device):
    def run(n):
        with mx.stream(device):
            x = mx.array(0.0)
            for _ in range(n):
                x = x + 1.0
            mx.eval(x)
            mx.synchronize()
        assert x.item() == n, (x.item(), n)
    return run


def torch_chain(torch, device):
    def run(n):
        x = torch.tensor(0.0, device=device)
        for _ in range(n):
            x = x + 1.0
        if device == "cuda":
            torch.cuda.synchronize()
        assert x.item() == n, (x.item(), n)
    return run


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("framework", choices=["tessera", "mlx", "torch"], nargs="?", default="tessera")
    p.add_argument("--n", type=int, default=10_000, help="ops in the chain")
    p.add_argument("--reps", type=int, default=9, help="timed runs (the median is reported)")
    args = p.parse_args()

    def report_us(device, us):
        report(f"scalar_add_chain_{device}", us / 1e6, 1, "op")

    def run_torch():
        import torch
        devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
        for device in devices:
            us = per_op_us(torch_chain(torch, device), args.n, args.reps)
            report_us("gpu" if device == "cuda" else "cpu", us)

    def run_mlx_api(mx):
        devices = [("cpu", mx.cpu)] + ([("gpu", mx.gpu)] if mx.is_available(mx.gpu) else [])
        for name, device in devices:
            report_us(name, per_op_us(mlx_api_chain(mx, device), args.n, args.reps))

    run_framework(args.framework, run_torch, run_mlx_api)


if __name__ == "__main__":
    main()
