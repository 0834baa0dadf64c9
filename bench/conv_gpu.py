"""2-D convolutions of ResNet-50's layer shapes at batch 64 on the GPU, forward
and forward with backward (the loss and the gradients of input and weight, as
PyTorch's autograd computes them), written once
against the MLX API (channels last: x (N, H, W, C), w (O, kH, kW, C)) so that
the same code measures Tessera and MLX CUDA, with PyTorch in channels-last
memory (cuDNN) beside them. One framework per process:

    python3 bench/conv_gpu.py tessera > tessera.jsonl
    python3 bench/conv_gpu.py mlx     > mlx.jsonl
    python3 bench/conv_gpu.py torch   > torch.jsonl
    python3 bench/compare.py tessera.jsonl torch.jsonl PyTorch

Further arguments keep only the benchmarks whose name contains one of them.
A forward pass counts 2·N·Ho·Wo·O·kH·kW·C flops, forward with backward three
times that. float32 allows TF32 in all three (MLX's default, and PyTorch's
with cudnn.allow_tf32).
"""
import sys

from measure import report, run_framework, time_median

FRAMEWORK = sys.argv[1] if len(sys.argv) > 1 else "tessera"
FILTERS = sys.argv[2:]
BATCH = 64

# name, (H, C, O, k, stride): the distinct convolutions of ResNet-50's stages.
CASES = [
    ("conv1_7x7s2", (224, 3, 64, 7, 2)),
    ("res2_1x1", (56, 64, 256, 1, 1)),
    ("res2_3x3", (56, 64, 64, 3, 1)),
    ("res3_3x3s2", (56, 128, 128, 3, 2)),
    ("res3_3x3", (28, 128, 128, 3, 1)),
    ("res4_3x3", (14, 256, 256, 3, 1)),
    ("res4_1x1", (14, 256, 1024, 1, 1)),
    ("res5_3x3", (7, 512, 512, 3, 1)),
]
DTYPES = ["bfloat16", "float32"]


def wanted(name):
    return not FILTERS or any(f in name for f in FILTERS)


def out_size(h, k, stride):
    return (h + 2 * (k // 2) - k) // stride + 1


def flops(h, c, o, k, stride):
    ho = out_size(h, k, stride)
    return 2.0 * BATCH * ho * ho * o * k * k * c


def cases():
    """(name, dtype, (H, C, O, k, stride), padding, flops) of each case whose
    forward pass or forward with backward is wanted."""
    for dtype in DTYPES:
        for case, shape in CASES:
            name = f"conv2d_{case}_{dtype}"
            if wanted(name) or wanted(name + "_fwd_bwd"):
                yield name, dtype, shape, shape[3] // 2, flops(*shape)


def measure(name, forward, forward_backward, f, sync):
    """Reports the timings of the wanted ones of the two runs."""
    if wanted(name):
        report(name, time_median(forward, 10, 3, sync), f, "flop")
    if wanted(name + "_fwd_bwd"):
        report(name + "_fwd_bwd", time_median(forward_backward, 5, 2, sync), 3 * f, "flop")


def run_mlx_api(mx):
    def sync():
        mx.synchronize()

    for name, dtype, (h, c, o, k, stride), pad, f in cases():
        t = getattr(mx, dtype)
        x = (mx.random.normal((BATCH, h, h, c), key=mx.random.key(1)) * 0.5).astype(t)
        w = (mx.random.normal((o, k, k, c), key=mx.random.key(2)) * 0.05).astype(t)
        mx.eval(x, w)
        loss = lambda x, w: mx.conv2d(x, w, stride=stride, padding=pad).astype(mx.float32).sum()
        # The loss too, as PyTorch's autograd computes it: a gradient alone
        # leaves out the forward convolution in a lazy framework.
        g = mx.value_and_grad(loss, argnums=(0, 1))
        measure(name, lambda: mx.eval(mx.conv2d(x, w, stride=stride, padding=pad)),
                lambda: mx.eval(g(x, w)), f, sync)
        del x, w


def run_torch():
    import torch
    import torch.nn.functional as F

    torch.backends.cudnn.allow_tf32 = True
    torch.backends.cudnn.benchmark = True

    def sync():
        torch.cuda.synchronize()

    gen = torch.Generator(device="cuda").manual_seed(0)
    for name, dtype, (h, c, o, k, stride), pad, f in cases():
        t = getattr(torch, dtype)
        x = (torch.randn((BATCH, c, h, h), device="cuda", generator=gen) * 0.5).to(t)
        w = (torch.randn((o, c, k, k), device="cuda", generator=gen) * 0.05).to(t)
        x = x.contiguous(memory_format=torch.channels_last)
        w = w.contiguous(memory_format=torch.channels_last)
        xg, wg = x.detach().requires_grad_(), w.detach().requires_grad_()

        def forward():
            with torch.no_grad():
                F.conv2d(x, w, stride=stride, padding=pad)

        def forward_backward():
            torch.autograd.grad(F.conv2d(xg, wg, stride=stride, padding=pad).float().sum(), (xg, wg))
        measure(name, forward, forward_backward, f, sync)
        del x, w, xg, wg


def main():
    run_framework(FRAMEWORK, run_torch, run_mlx_api)


if __name__ == "__main__":
    main()
