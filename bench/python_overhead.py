"""Python per-op overhead: a loop of 10,000 `a + b` on 0-d float32 arrays, built
and evaluated, in tessera.core and in PyTorch eager on the CPU (when installed);
then a function of 200 such ops called 50 times, plain and compiled. Prints
microseconds per op, the median of 5 runs.

    .venv/bin/python bench/python_overhead.py
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from measure import per_op_us  # noqa: E402


def per_op(run, n=10_000, reps=5):
    return per_op_us(run, n, reps)


def main():
    import tessera.core as mx
    a, b = mx.array(1.0), mx.array(2.0)

    def chain(n):
        x = a
        for _ in range(n):
            x = x + b
        mx.eval(x)

    def each(n):
        for _ in range(n):
            mx.eval(a + b)
    print(f"tessera: {per_op(chain):.2f} us/op in one graph, {per_op(each):.2f} us/op evaluated one by one")

    def body(x):
        for _ in range(100):
            x = x * b + a
        return x

    def calls(fn):
        def run(n):
            for _ in range(max(1, n // 200)):
                mx.eval(fn(a))
        return run
    print(f"tessera: a function of 200 ops, {per_op(calls(body)):.2f} us/op plain, "
          f"{per_op(calls(mx.compile(body))):.2f} us/op compiled")
    try:
        import torch
    except ImportError:
        print("PyTorch is not installed")
        return
    ta, tb = torch.tensor(1.0), torch.tensor(2.0)

    def torch_chain(n):
        x = ta
        for _ in range(n):
            x = x + tb
    print(f"PyTorch {torch.__version__}: {per_op(torch_chain):.2f} us/op (eager)")


if __name__ == "__main__":
    main()
