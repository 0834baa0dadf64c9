"""The NumPy side of bench/bench_cpu.cpp: the same ops, same sizes, same output format."""
import json
import sys

import numpy as np

from measure import report, time_median


def filled(shape, start):
    n = int(np.prod(shape))
    return (np.arange(n, dtype=np.int32).reshape(shape).astype(np.float32) * np.float32(1 / 4096)
            + np.float32(start))


def wanted(name):
    return len(sys.argv) < 2 or any(a in name for a in sys.argv[1:])


def main():
    if wanted("overhead_scalar_add_chain"):
        n = 10000

        def chain():
            x = np.float32(0.0) * np.ones((), np.float32)
            one = np.float32(1.0)
            for _ in range(n):
                x = x + one
            return x
        report("overhead_scalar_add_chain", time_median(chain) / n, 1, "op")
    if wanted("add_f32_1e7"):
        a, b = filled((10_000_000,), 1.0), filled((10_000_000,), 2.0)
        report("add_f32_1e7", time_median(lambda: a + b), 3.0 * 4e7, "byte")
    if wanted("sum_f32_1e7"):
        a = filled((10_000_000,), 0.5)
        report("sum_f32_1e7", time_median(lambda: a.sum()), 4e7, "byte")
    if wanted("softmax_rows_f32_4096"):
        a = filled((4096, 4096), -8.0)

        def softmax():
            e = np.exp(a - a.max(axis=1, keepdims=True))
            return e / e.sum(axis=1, keepdims=True)
        report("softmax_rows_f32_4096", time_median(softmax), 2.0 * 4 * 4096 * 4096, "byte")
    if wanted("transpose_copy_f32_4096"):
        a = filled((4096, 4096), 0.0)
        report("transpose_copy_f32_4096", time_median(lambda: np.ascontiguousarray(a.T)),
               2.0 * 4 * 4096 * 4096, "byte")
    if wanted("matmul_f32_2048"):
        a = filled((2048, 2048), 0.0) * np.float32(0.001)
        b = filled((2048, 2048), 1.0) * np.float32(0.001)
        report("matmul_f32_2048", time_median(lambda: a @ b, 5, 1), 2.0 * 2048.0 ** 3, "flop")
    if wanted("mlp_value_and_grad_cpu"):
        # NumPy has no autograd: the peer of the training step is PyTorch, when installed.
        try:
            from peers_mlp import mlp_step
        except ImportError:
            print("peers_cpu: PyTorch is not installed; mlp_value_and_grad_cpu has no peer",
                  file=sys.stderr)
        else:
            print(json.dumps({"name": "mlp_value_and_grad_cpu", "seconds": mlp_step("cpu"),
                              "work": 3 * 4 * 2.0 * 256 * 1024 * 1024, "unit": "flop",
                              "peer": "PyTorch"}), flush=True)

    if wanted("sort_f32_1e7"):
        i = np.arange(10_000_000, dtype=np.uint64)
        a = ((i * np.uint64(2654435761)) % np.uint64(2 ** 32)).astype(np.float32) / np.float32(2 ** 32)
        report("sort_f32_1e7", time_median(lambda: np.sort(a), 5, 1), 4e7, "byte")
    if wanted("cumsum_f32_1e7"):
        a = filled((10_000_000,), 0.5)
        report("cumsum_f32_1e7", time_median(lambda: np.cumsum(a)), 2.0 * 4e7, "byte")
    if wanted("take_f32_1e7_idx_1e6"):
        a = filled((10_000_000,), 0.0)
        idx = np.random.default_rng(0).integers(0, 10_000_000, 1_000_000, dtype=np.int32)
        report("take_f32_1e7_idx_1e6", time_median(lambda: np.take(a, idx, axis=0)),
               1e6 * (4 + 4 + 4), "byte")
    if wanted("solve_f32_1024"):
        a = filled((1024, 1024), 0.0) * np.float32(0.001) + np.eye(1024, dtype=np.float32) * np.float32(16)
        b = filled((1024, 1), 1.0)
        report("solve_f32_1024", time_median(lambda: np.linalg.solve(a, b)), 2.0 / 3.0 * 1024.0 ** 3, "flop")
    if wanted("fft_c64_2p22"):
        n = 1 << 22
        a = (filled((n,), 0.0) + np.complex64(1j) * filled((n,), 1.0)).astype(np.complex64)
        report("fft_c64_2p22", time_median(lambda: np.fft.fft(a)), 5.0 * n * 22, "flop")


if __name__ == "__main__":
    main()
