"""Matrix products of language-model decode and prefill on the GPU: x (M, K)
times an nn.Linear weight W (N, K) transposed, plain (bf16, fp16, f32) and
quantized (affine, group 64), written once against the MLX API so that the
same code measures Tessera and MLX CUDA, with PyTorch's `x @ W.T` beside them.
One framework per process:

    python3 bench/products_gpu.py tessera > tessera.jsonl
    python3 bench/products_gpu.py mlx     > mlx.jsonl
    python3 bench/products_gpu.py torch   > torch.jsonl
    python3 bench/compare.py tessera.jsonl mlx.jsonl "MLX CUDA"

Further arguments keep only the benchmarks whose name contains one of them.
Small-M products (M <= 16) count the bytes read and written once (weights,
scales and biases, x, the result): they are bound by memory. M = 512 counts
2·M·N·K flops. Each timing runs REPS products over WEIGHTS different weights
in one evaluation, so that launch latency and the L2 cache do not count.
"""
import sys

from measure import report, run_framework, time_median

FRAMEWORK = sys.argv[1] if len(sys.argv) > 1 else "tessera"
FILTERS = sys.argv[2:]
WEIGHTS, REPS = 4, 24
SHAPES = [(14336, 4096), (4096, 14336)]  # (N, K): an 8B-class MLP's up and down projections
SMALL_M = [1, 8, 16]


def wanted(name):
    return not FILTERS or any(f in name for f in FILTERS)


def cases():
    """name, dtype name, M, N, K, bits (0: plain)."""
    for n, k in SHAPES:
        for m in SMALL_M:
            yield f"gemv_bf16_m{m}_{n}x{k}", "bfloat16", m, n, k, 0
        yield f"gemv_fp16_m1_{n}x{k}", "float16", 1, n, k, 0
        yield f"gemv_f32_m1_{n}x{k}", "float32", 1, n, k, 0
        for bits in (4, 8):
            for m in (1, 16):
                yield f"qgemv_{bits}bit_bf16_m{m}_{n}x{k}", "bfloat16", m, n, k, bits
    n, k = SHAPES[0]
    yield f"gemm_bf16_m512_{n}x{k}", "bfloat16", 512, n, k, 0
    yield f"qgemm_4bit_bf16_m512_{n}x{k}", "bfloat16", 512, n, k, 4


def work(m, n, k, itemsize, weight_bytes):
    if m >= 512:
        return 2.0 * m * n * k, "flop"
    return weight_bytes + (m * k + m * n) * itemsize, "byte"


def run_mlx_api(mx):
    def sync():
        mx.synchronize()

    for name, dtype, m, n, k, bits in cases():
        if not wanted(name):
            continue
        dt = getattr(mx, dtype)
        key = mx.random.key(0)
        x = (mx.random.normal((m, k), key=key) * 0.5).astype(dt)
        ws = [(mx.random.normal((n, k), key=mx.random.key(i + 1)) * 0.02).astype(dt)
              for i in range(WEIGHTS)]
        if bits:
            qs = [mx.quantize(w, group_size=64, bits=bits) for w in ws]
            mx.eval(x, qs)
            weight_bytes = sum(a.nbytes for a in qs[0])

            def step():
                mx.eval([mx.quantized_matmul(x, *qs[i % WEIGHTS], transpose=True, group_size=64,
                                             bits=bits) for i in range(REPS)])
        else:
            mx.eval(x, ws)
            weight_bytes = ws[0].nbytes

            def step():
                mx.eval([x @ ws[i % WEIGHTS].T for i in range(REPS)])
        t = time_median(step, 7, 2, sync) / REPS
        report(name, t, *work(m, n, k, x.itemsize, weight_bytes))
        del x, ws


def run_torch():
    import torch

    def sync():
        torch.cuda.synchronize()

    gen = torch.Generator(device="cuda").manual_seed(0)
    for name, dtype, m, n, k, bits in cases():
        if bits or not wanted(name):
            continue  # no PyTorch spelling of MLX's quantization
        dt = getattr(torch, dtype)
        x = (torch.randn((m, k), device="cuda", generator=gen) * 0.5).to(dt)
        ws = [(torch.randn((n, k), device="cuda", generator=gen) * 0.02).to(dt)
              for _ in range(WEIGHTS)]

        def step():
            with torch.no_grad():
                for i in range(REPS):
                    x @ ws[i % WEIGHTS].T
        t = time_median(step, 7, 2, sync) / REPS
        report(name, t, *work(m, n, k, x.element_size(), ws[0].numel() * ws[0].element_size()))
        del x, ws


def main():
    run_framework(FRAMEWORK, run_torch, run_mlx_api)


if __name__ == "__main__":
    main()
