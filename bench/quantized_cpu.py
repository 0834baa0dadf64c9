"""quantized_matmul on the CPU (4-bit, group 64, bf16 x and weights), one and
eight rows of x, best of 10 calls. One framework per process:

    python3 bench/quantized_cpu.py tessera|mlx
"""
import sys, time
if sys.argv[1] == "mlx": import mlx.core as mx
else: import tessera.core as mx
mx.set_default_device(mx.cpu)
mx.random.seed(0)
for N, K in [(4096, 4096), (14336, 4096)]:
    w = mx.random.normal((N, K)).astype(mx.bfloat16)
    wq, s, b = mx.quantize(w, 64, 4)
    for M in (1, 8):
        x = mx.random.normal((M, K)).astype(mx.bfloat16)
        mx.eval(wq, s, b, x)
        f = lambda: mx.quantized_matmul(x, wq, s, b, True, 64, 4)
        for _ in range(3): mx.eval(f())
        ts = []
        for _ in range(10):
            t0 = time.perf_counter(); mx.eval(f()); ts.append(time.perf_counter() - t0)
        gb = (N * K / 2 + N * K / 64 * 4) / 1e9
        print(f"{sys.argv[1]} {N}x{K} M={M}: {min(ts)*1e3:.2f} ms ({gb/min(ts):.1f} GB/s)")
