"""x ** 3, x * x * x, x ** 2 and tanh-GELU as nn.gelu_approx writes it (x ** 3),
eager and compiled, on the CPU over 2^24 float32: best of 7 calls in ms. One
framework per process:

    python3 bench/power_forms_cpu.py tessera|mlx
"""
import math
import sys
import time

if sys.argv[1:] == ["mlx"]:
    import mlx.core as mx
else:
    import tessera.core as mx

mx.set_default_device(mx.cpu)
x = mx.random.normal((1 << 24,))
mx.eval(x)


def gelu(x):
    return 0.5 * x * (1 + mx.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def best_ms(f):
    for _ in range(2):
        mx.eval(f(x))
    times = []
    for _ in range(7):
        t0 = time.perf_counter()
        mx.eval(f(x))
        times.append(time.perf_counter() - t0)
    return min(times) * 1e3


for name, f in [("x ** 3", lambda x: x ** 3), ("x * x * x", lambda x: x * x * x),
                ("x ** 2", lambda x: x ** 2), ("gelu_approx eager", gelu),
                ("gelu_approx compiled", mx.compile(gelu))]:
    print(f"{name:22s} {best_ms(f):8.2f} ms")
