"""The PyTorch side of bench/bench_gpu.cpp: same ops, sizes and output format."""
import sys

import torch

import measure
from measure import report
from peers_mlp import mlp_step


def time_median(f, reps=7, warmup=2):
    return measure.time_median(f, reps, warmup, torch.cuda.synchronize)


def filled(shape, dtype=torch.float32):
    n = 1
    for s in shape:
        n *= s
    a = (torch.arange(n, device="cuda", dtype=torch.int32) % 1021).float() / 1021.0
    return a.reshape(shape).to(dtype)


def wanted(name):
    return len(sys.argv) < 2 or any(a in name for a in sys.argv[1:])


def main():
    torch.backends.cuda.matmul.allow_tf32 = False
    n28, f32 = 1 << 28, 4.0
    if wanted("copy_f32_2^28"):
        a = filled((n28,))
        report("copy_f32_2^28", time_median(lambda: a.clone()), 2 * f32 * n28, "byte")
    if wanted("add_f32_2^28"):
        a, b = filled((n28,)), filled((n28,))
        report("add_f32_2^28", time_median(lambda: a + b), 3 * f32 * n28, "byte")
    if wanted("multiply_f32_2^28"):
        a, b = filled((n28,)), filled((n28,))
        report("multiply_f32_2^28", time_median(lambda: a * b), 3 * f32 * n28, "byte")
    R, C = 8192, 32768
    if wanted("broadcast_add_8192x32768"):
        a, b = filled((R, C)), filled((C,))
        report("broadcast_add_8192x32768", time_median(lambda: a + b), f32 * (2.0 * R * C + C), "byte")
    if wanted("transpose_copy_8192x32768"):
        a = filled((R, C))
        report("transpose_copy_8192x32768", time_median(lambda: a.t().contiguous()), 2 * f32 * R * C, "byte")
    if wanted("sum_all_f32_2^28"):
        a = filled((n28,))
        report("sum_all_f32_2^28", time_median(lambda: a.sum()), f32 * n28, "byte")
    if wanted("sum_rows_8192x32768"):
        a = filled((R, C))
        report("sum_rows_8192x32768", time_median(lambda: a.sum(1)), f32 * R * C, "byte")
    if wanted("sum_cols_8192x32768"):
        a = filled((R, C))
        report("sum_cols_8192x32768", time_median(lambda: a.sum(0)), f32 * R * C, "byte")
    if wanted("softmax_rows_8192x32768"):
        a = filled((R, C))
        report("softmax_rows_8192x32768", time_median(lambda: torch.softmax(a, -1)), 2 * f32 * R * C, "byte")
    if wanted("matmul_bf16_8192"):
        a, b = filled((8192, 8192), torch.bfloat16), filled((8192, 8192), torch.bfloat16)
        report("matmul_bf16_8192", time_median(lambda: a @ b, 5, 2), 2.0 * 8192 ** 3, "flop")
    if wanted("matmul_f32_4096"):
        a, b = filled((4096, 4096)), filled((4096, 4096))
        report("matmul_f32_4096", time_median(lambda: a @ b, 5, 2), 2.0 * 4096 ** 3, "flop")
    bf = 2.0
    for name, norm in (("rms_norm_bf16_8192x8192", "rms"), ("layer_norm_bf16_8192x8192", "layer")):
        if not wanted(name):
            continue
        # Bytes: x read and y written once (the backward pass: x and the
        # cotangent read, dx written); weight and bias are negligible.
        x = (filled((8192, 8192), torch.bfloat16) - 0.5).requires_grad_()
        w = filled((8192,), torch.bfloat16).requires_grad_()
        b = filled((8192,), torch.bfloat16).requires_grad_()

        def fwd():
            if norm == "rms":
                return torch.nn.functional.rms_norm(x, (8192,), w, 1e-5)
            return torch.nn.functional.layer_norm(x, (8192,), w, b, 1e-5)
        with torch.no_grad():
            report(name, time_median(fwd), 2 * bf * 8192 * 8192, "byte")
        y = fwd()
        g = filled((8192, 8192), torch.bfloat16)
        params = (x, w) if norm == "rms" else (x, w, b)
        report(name + "_bwd",
               time_median(lambda: torch.autograd.grad(y, params, g, retain_graph=True)),
               3 * bf * 8192 * 8192, "byte")
    for shape in ((1, 32, 4096, 128), (4, 32, 4096, 128)):
        name = "rope_bf16_" + "x".join(map(str, shape))
        if not wanted(name):
            continue
        # The usual rotation of halves with cos and sin tables made beforehand.
        x = filled(shape, torch.bfloat16)
        t, half = shape[2], shape[3] // 2
        inv = 10000.0 ** (-torch.arange(half, device="cuda", dtype=torch.float32) / half)
        angle = torch.outer(torch.arange(t, device="cuda", dtype=torch.float32), inv)
        cos = torch.cat((angle.cos(), angle.cos()), -1).to(torch.bfloat16)
        sin = torch.cat((angle.sin(), angle.sin()), -1).to(torch.bfloat16)

        def rope():
            x1, x2 = x[..., :half], x[..., half:]
            return x * cos + torch.cat((-x2, x1), -1) * sin
        n = shape[0] * shape[1] * shape[2] * shape[3]
        report(name, time_median(rope), 2 * bf * n, "byte")
    if wanted("host_to_gpu_op_1GiB"):
        # PyTorch at its best: the host tensor pinned by hand, a non-blocking copy.
        n = 1 << 28
        h = torch.ones(n, dtype=torch.float32).pin_memory()

        def op():
            return h.to("cuda", non_blocking=True) * 2.0
        report("host_to_gpu_op_1GiB", time_median(op, 5, 1), f32 * n, "byte")
    if wanted("chunks16"):
        # The same chunks, pinned by hand, copied and multiplied one after another.
        chunks, rows, cols = 16, 4096, 4096
        w = filled((cols, 2048))
        host = [torch.full((rows, cols), i / chunks).pin_memory() for i in range(chunks)]
        dev = [h.to("cuda") for h in host]

        def up():
            return [h.to("cuda", non_blocking=True).sum() for h in host]

        def comp():
            return [d @ w for d in dev]

        def both():
            return [h.to("cuda", non_blocking=True) @ w for h in host]
        report("chunks16_upload_only", time_median(up, 5, 1), f32 * rows * cols * chunks, "byte")
        report("chunks16_compute_only", time_median(comp, 5, 1), 2.0 * rows * cols * 2048 * chunks, "flop")
        report("chunks16_upload_and_compute", time_median(both, 5, 1), f32 * rows * cols * chunks, "byte")
    if wanted("dispatch_chain_10000"):
        n = 10000
        one = filled((1,))

        def chain():
            x = one
            for _ in range(n):
                x = x + one
            return x
        report("dispatch_chain_10000", time_median(chain) / n, 1, "op")

    B, N, T, D = 4, 32, 4096, 128
    fwd_flop = 4.0 * B * N * T * T * D / 2
    sdpa = torch.nn.functional.scaled_dot_product_attention
    if wanted("sdpa_causal_bf16_4x32x4096x128_fwd"):
        q, k, v = (filled((B, N, T, D), torch.bfloat16) for _ in range(3))
        report("sdpa_causal_bf16_4x32x4096x128_fwd",
               time_median(lambda: sdpa(q, k, v, is_causal=True), 10, 3), fwd_flop, "flop")
    if wanted("sdpa_causal_bf16_4x32x4096x128_fwd_bwd"):
        q, k, v = (filled((B, N, T, D), torch.bfloat16).requires_grad_() for _ in range(3))
        d_o = filled((B, N, T, D), torch.bfloat16)

        def step():
            return torch.autograd.grad(sdpa(q, k, v, is_causal=True), (q, k, v), d_o)
        report("sdpa_causal_bf16_4x32x4096x128_fwd_bwd", time_median(step, 10, 3), 3.5 * fwd_flop, "flop")
    if wanted("sdpa_decode_bf16_32q_8kv_32k"):
        t_kv = 32768
        q = filled((1, 32, 1, D), torch.bfloat16)
        k, v = (filled((1, 8, t_kv, D), torch.bfloat16) for _ in range(2))
        report("sdpa_decode_bf16_32q_8kv_32k",
               time_median(lambda: sdpa(q, k, v, enable_gqa=True), 20, 3), 2.0 * 8 * t_kv * D * 2, "byte")

    for name, dev in (("mlp_value_and_grad_gpu", "cuda"), ("mlp_value_and_grad_cpu", "cpu")):
        if wanted(name):
            report(name, mlp_step(dev), 3 * 4 * 2.0 * 256 * 1024 * 1024, "flop")


if __name__ == "__main__":
    main()
