"""The host cost of one op from Python: a chain of 10,000 scalar adds
(`x = x + 1.0`), built and then evaluated, on the CPU and on the GPU where there
is one; in PyTorch too when it imports (eager, on CUDA where available, else
the CPU). Prints microseconds per op, the median of several runs, one JSON
line per figure and a table at the end. build/bench/host_path times the same
chain from C++.

    python3 bench/host_path.py [--n 10000] [--reps 9]
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from measure import per_op_us  # noqa: E402


def tessera_chain(mx, device):
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
    p.add_argument("--n", type=int, default=10_000, help="ops in the chain")
    p.add_argument("--reps", type=int, default=9, help="timed runs (the median is reported)")
    args = p.parse_args()
    import tessera.core as mx

    rows = []
    devices = [("cpu", mx.cpu)] + ([("gpu", mx.gpu)] if mx.is_available(mx.gpu) else [])
    for name, device in devices:
        us = per_op_us(tessera_chain(mx, device), args.n, args.reps)
        rows.append(("tessera", name, us))
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
        us = per_op_us(torch_chain(torch, device), args.n, args.reps)
        rows.append((f"PyTorch {torch.__version__}", device, us))
    for who, device, us in rows:
        print(json.dumps({"name": f"scalar_add_chain_{device}", "framework": who,
                          "us_per_op": round(us, 3), "ops": args.n}))
    print()
    print("| framework | device | µs per op |")
    print("|---|---|---|")
    for who, device, us in rows:
        print(f"| {who} | {device} | {us:.2f} |")


if __name__ == "__main__":
    main()
