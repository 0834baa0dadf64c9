"""x @ w.T on the CPU with float16 / bfloat16 (and float32) weights, 1 and 4
rows of x against 8192 x 2048 and 4096 x 4096 weights, median of 30 calls, in
GB/s of weights; then the decoding step of a Llama-style model of 170M
bfloat16 parameters (d 1024, 8 layers, ff 4096, vocabulary 32000) through
examples/python/lm.py. One framework per process:

    python3 bench/half_gemv_cpu.py tessera|mlx
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples",
                                "python"))
if sys.argv[1] == "tessera":
    from tessera import mlx_alias
    mlx_alias.install()
import mlx.core as mx  # noqa: E402
import lm  # noqa: E402

mx.set_default_device(mx.cpu)
mx.random.seed(0)
for N, K in [(8192, 2048), (4096, 4096)]:
    for dt in (mx.bfloat16, mx.float16, mx.float32):
        w = mx.random.normal((N, K)).astype(dt)
        for M in (1, 4):
            x = mx.random.normal((M, K)).astype(dt)
            mx.eval(w, x)
            ts = []
            for _ in range(30):
                t0 = time.perf_counter()
                mx.eval(x @ w.T)
                ts.append(time.perf_counter() - t0)
            t = sorted(ts)[len(ts) // 2]
            print(f"{sys.argv[1]} {N}x{K} {dt} M={M}: {t * 1e3:.3f} ms "
                  f"({w.nbytes / t / 1e9:.1f} GB/s of weights)")

args = lm.ModelArgs(hidden_size=1024, num_hidden_layers=8, num_attention_heads=16,
                    num_key_value_heads=4, intermediate_size=4096, vocab_size=32000,
                    max_position_embeddings=4096)
model = lm.random_model(args, mx.bfloat16)
prompt = mx.array([[i % 32000 for i in range(32)]], mx.int32)
lm.generate(model, prompt, 8)
_, stats = lm.generate(model, prompt, 48)
print(f"{sys.argv[1]} 170M bf16 decode {1e3 / stats['generation_tps']:.2f} ms/token, "
      f"prefill {stats['prompt_tps']:.0f} tokens/s")
