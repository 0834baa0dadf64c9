"""The fast ops (attention, norms, rope) on the GPU, written once against the MLX
API so that the same code measures Tessera and MLX CUDA, with PyTorch's usual
spelling of each op beside them. One framework per process:

    python3 bench/fast_gpu.py tessera > tessera.jsonl
    python3 bench/fast_gpu.py mlx     > mlx.jsonl
    python3 bench/fast_gpu.py torch   > torch.jsonl
    python3 bench/compare.py tessera.jsonl mlx.jsonl "MLX CUDA"

Further arguments keep only the benchmarks whose name contains one of them.
Lines are those of bench/bench_gpu.cpp: name, seconds (median), work, unit.
Attention counts 4·B·H·Tq·Tkv·D flops forward (half of it when causal) and
3.5 times that for forward and backward; norms and rope count the bytes read
and written once (forward and backward: x, y, the cotangent and dx; backward
alone: x, the cotangent and dx); decode
counts the bytes of k and v.
"""
import sys

from measure import report, run_framework, time_median

FRAMEWORK = sys.argv[1] if len(sys.argv) > 1 else "tessera"
FILTERS = sys.argv[2:]


def wanted(name):
    return not FILTERS or any(f in name for f in FILTERS)


def median_time(run, sync, reps=10, warmup=3):
    return time_median(run, reps, warmup, sync)


def attention_flops(b, h, tq, tkv, d, causal):
    f = 4.0 * b * h * tq * tkv * d
    return f / 2 if causal else f


CASES_ATTN = [  # name, (B, Hq, Hkv, Tq, Tkv, D), causal
    ("sdpa_causal_bf16_4x32x4096x128", (4, 32, 32, 4096, 4096, 128), True),
    ("sdpa_bf16_4x32x4096x128", (4, 32, 32, 4096, 4096, 128), False),
    ("sdpa_causal_gqa_bf16_1x32x8x4096x128", (1, 32, 8, 4096, 4096, 128), True),
    ("sdpa_causal_bf16_8x16x2048x64", (8, 16, 16, 2048, 2048, 64), True),
]
CASES_DECODE = [  # name, (B, Hq, Hkv, Tq, Tkv, D)
    ("sdpa_decode_bf16_1x32x8x32768x128", (1, 32, 8, 1, 32768, 128)),
    ("sdpa_decode_bf16_4x32x8x8192x128", (4, 32, 8, 1, 8192, 128)),
]
NORM_SHAPE = (8192, 8192)
ROPE_SHAPE = (4, 32, 4096, 128)


def run_mlx_api(mx):
    """Tessera and MLX: the same program."""
    def sync():
        mx.synchronize()

    def normal(shape, dtype, key):
        return (mx.random.normal(shape, key=mx.random.key(key)) * 0.5).astype(dtype)

    bf16 = mx.bfloat16
    for name, (b, hq, hkv, tq, tkv, d), causal in CASES_ATTN:
        if not (wanted(name) or wanted(name + "_fwd_bwd")):
            continue
        q, k, v = normal((b, hq, tq, d), bf16, 1), normal((b, hkv, tkv, d), bf16, 2), normal((b, hkv, tkv, d), bf16, 3)
        mask = "causal" if causal else None
        scale = d ** -0.5
        mx.eval(q, k, v)
        flops = attention_flops(b, hq, tq, tkv, d, causal)
        if wanted(name):
            t = median_time(lambda: mx.eval(mx.fast.scaled_dot_product_attention(q, k, v, scale=scale, mask=mask)), sync)
            report(name, t, flops, "flop")
        if wanted(name + "_fwd_bwd"):
            loss = lambda q, k, v: mx.fast.scaled_dot_product_attention(q, k, v, scale=scale, mask=mask).astype(mx.float32).sum()
            g = mx.grad(loss, argnums=(0, 1, 2))
            t = median_time(lambda: mx.eval(g(q, k, v)), sync, reps=5)
            report(name + "_fwd_bwd", t, 3.5 * flops, "flop")
        del q, k, v
    for name, (b, hq, hkv, tq, tkv, d) in CASES_DECODE:
        if not wanted(name):
            continue
        q, k, v = normal((b, hq, tq, d), bf16, 1), normal((b, hkv, tkv, d), bf16, 2), normal((b, hkv, tkv, d), bf16, 3)
        mx.eval(q, k, v)
        t = median_time(lambda: mx.eval(mx.fast.scaled_dot_product_attention(q, k, v, scale=d ** -0.5)), sync, reps=30)
        report(name, t, 2 * b * hkv * tkv * d * 2, "byte")
        del q, k, v
    rows, cols = NORM_SHAPE
    x, w, bias = normal(NORM_SHAPE, bf16, 4), normal((cols,), bf16, 5), normal((cols,), bf16, 6)
    cot = normal(NORM_SHAPE, bf16, 8)
    mx.eval(x, w, bias, cot)
    nbytes = rows * cols * 2
    if wanted("rms_norm_bf16_fwd"):
        t = median_time(lambda: mx.eval(mx.fast.rms_norm(x, w, 1e-5)), sync)
        report("rms_norm_bf16_fwd", t, 2 * nbytes, "byte")
    if wanted("rms_norm_bf16_fwd_bwd"):
        f = lambda x, w: mx.fast.rms_norm(x, w, 1e-5)
        t = median_time(lambda: mx.eval(mx.vjp(f, [x, w], [cot])), sync)
        report("rms_norm_bf16_fwd_bwd", t, 5 * nbytes, "byte")
    if wanted("rms_norm_bf16_bwd"):
        f = lambda x, w: mx.fast.rms_norm(x, w, 1e-5)
        t = median_time(lambda: mx.eval(mx.vjp(f, [x, w], [cot])[1]), sync)
        report("rms_norm_bf16_bwd", t, 3 * nbytes, "byte")
    if wanted("layer_norm_bf16_fwd"):
        t = median_time(lambda: mx.eval(mx.fast.layer_norm(x, w, bias, 1e-5)), sync)
        report("layer_norm_bf16_fwd", t, 2 * nbytes, "byte")
    if wanted("layer_norm_bf16_fwd_bwd"):
        f = lambda x, w, b: mx.fast.layer_norm(x, w, b, 1e-5)
        t = median_time(lambda: mx.eval(mx.vjp(f, [x, w, bias], [cot])), sync)
        report("layer_norm_bf16_fwd_bwd", t, 5 * nbytes, "byte")
    if wanted("layer_norm_bf16_bwd"):
        f = lambda x, w, b: mx.fast.layer_norm(x, w, b, 1e-5)
        t = median_time(lambda: mx.eval(mx.vjp(f, [x, w, bias], [cot])[1]), sync)
        report("layer_norm_bf16_bwd", t, 3 * nbytes, "byte")
    del x
    if wanted("rope_bf16"):
        y = normal(ROPE_SHAPE, bf16, 7)
        mx.eval(y)
        t = median_time(lambda: mx.eval(mx.fast.rope(y, 128, traditional=False, base=10000.0, scale=1.0, offset=0)), sync)
        n = 1
        for s in ROPE_SHAPE:
            n *= s
        report("rope_bf16", t, 2 * n * 2, "byte")


def run_torch():
    import torch
    import torch.nn.functional as F

    def sync():
        torch.cuda.synchronize()

    gen = torch.Generator(device="cuda").manual_seed(0)

    def normal(shape, dtype):
        return (torch.randn(shape, device="cuda", generator=gen) * 0.5).to(dtype)

    bf16 = torch.bfloat16
    for name, (b, hq, hkv, tq, tkv, d), causal in CASES_ATTN:
        if not (wanted(name) or wanted(name + "_fwd_bwd")):
            continue
        q, k, v = normal((b, hq, tq, d), bf16), normal((b, hkv, tkv, d), bf16), normal((b, hkv, tkv, d), bf16)
        flops = attention_flops(b, hq, tq, tkv, d, causal)
        gqa = hq != hkv
        if wanted(name):
            with torch.no_grad():
                t = median_time(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa), sync)
            report(name, t, flops, "flop")
        if wanted(name + "_fwd_bwd"):
            qg, kg, vg = (a.detach().requires_grad_() for a in (q, k, v))

            def step():
                out = F.scaled_dot_product_attention(qg, kg, vg, is_causal=causal, enable_gqa=gqa)
                gq, gk, gv = torch.autograd.grad(out.float().sum(), (qg, kg, vg))
            t = median_time(step, sync, reps=5)
            report(name + "_fwd_bwd", t, 3.5 * flops, "flop")
    for name, (b, hq, hkv, tq, tkv, d) in CASES_DECODE:
        if not wanted(name):
            continue
        q, k, v = normal((b, hq, tq, d), bf16), normal((b, hkv, tkv, d), bf16), normal((b, hkv, tkv, d), bf16)
        with torch.no_grad():
            t = median_time(lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True), sync, reps=30)
        report(name, t, 2 * b * hkv * tkv * d * 2, "byte")
    rows, cols = NORM_SHAPE
    x, w, bias = normal(NORM_SHAPE, bf16), normal((cols,), bf16), normal((cols,), bf16)
    nbytes = rows * cols * 2
    if wanted("rms_norm_bf16_fwd"):
        with torch.no_grad():
            t = median_time(lambda: F.rms_norm(x, (cols,), w, 1e-5), sync)
        report("rms_norm_bf16_fwd", t, 2 * nbytes, "byte")
    cot = normal(NORM_SHAPE, bf16)
    if wanted("rms_norm_bf16_fwd_bwd"):
        xg, wg = x.detach().requires_grad_(), w.detach().requires_grad_()

        def step():
            torch.autograd.grad(F.rms_norm(xg, (cols,), wg, 1e-5), (xg, wg), cot)
        t = median_time(step, sync)
        report("rms_norm_bf16_fwd_bwd", t, 5 * nbytes, "byte")
    if wanted("rms_norm_bf16_bwd"):
        xg, wg = x.detach().requires_grad_(), w.detach().requires_grad_()
        y = F.rms_norm(xg, (cols,), wg, 1e-5)
        t = median_time(lambda: torch.autograd.grad(y, (xg, wg), cot, retain_graph=True), sync)
        report("rms_norm_bf16_bwd", t, 3 * nbytes, "byte")
        del y
    if wanted("layer_norm_bf16_fwd"):
        with torch.no_grad():
            t = median_time(lambda: F.layer_norm(x, (cols,), w, bias, 1e-5), sync)
        report("layer_norm_bf16_fwd", t, 2 * nbytes, "byte")
    if wanted("layer_norm_bf16_fwd_bwd"):
        xg, wg, bg = x.detach().requires_grad_(), w.detach().requires_grad_(), bias.detach().requires_grad_()

        def step():
            torch.autograd.grad(F.layer_norm(xg, (cols,), wg, bg, 1e-5), (xg, wg, bg), cot)
        t = median_time(step, sync)
        report("layer_norm_bf16_fwd_bwd", t, 5 * nbytes, "byte")
    if wanted("layer_norm_bf16_bwd"):
        xg, wg, bg = x.detach().requires_grad_(), w.detach().requires_grad_(), bias.detach().requires_grad_()
        y = F.layer_norm(xg, (cols,), wg, bg, 1e-5)
        t = median_time(lambda: torch.autograd.grad(y, (xg, wg, bg), cot, retain_graph=True), sync)
        report("layer_norm_bf16_bwd", t, 3 * nbytes, "byte")
        del y
    if wanted("rope_bf16"):
        y = normal(ROPE_SHAPE, bf16)
        b, h, t_, d = ROPE_SHAPE
        inv = 1.0 / (10000.0 ** (torch.arange(0, d, 2, device="cuda", dtype=torch.float32) / d))
        ang = torch.arange(t_, device="cuda", dtype=torch.float32)[:, None] * inv[None, :]
        cos, sin = ang.cos().to(bf16), ang.sin().to(bf16)

        def rope():
            y1, y2 = y[..., : d // 2], y[..., d // 2:]
            return torch.cat((y1 * cos - y2 * sin, y1 * sin + y2 * cos), dim=-1)
        with torch.no_grad():
            t = median_time(rope, sync)
        report("rope_bf16", t, 2 * y.numel() * 2, "byte")


def main():
    run_framework(FRAMEWORK, run_torch, run_mlx_api)


if __name__ == "__main__":
    main()
