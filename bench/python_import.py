"""Importing a 64 MiB float32 NumPy array (4096 x 4096) into tessera.core: the
copying constructor, the zero-copy asarray / from_dlpack (also of a transposed,
strided view), the buffer protocol (a copy), and a NumPy -> Tessera -> NumPy round
trip. Prints milliseconds, the best of 20 runs (each evaluated).

    PYTHONPATH=build/python .venv/bin/python bench/python_import.py
"""
import time

import numpy as np

import tessera.core as mx


def best_ms(f, reps=20):
    mx.eval(f())
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        mx.eval(f())
        best = min(best, time.perf_counter() - t0)
    return best * 1e3


n = np.random.default_rng(0).standard_normal((4096, 4096)).astype(np.float32)
cases = {
    "array(n) (copy)": lambda: mx.array(n),
    "array(memoryview(n)) (copy)": lambda: mx.array(memoryview(n)),
    "asarray(n) (shared)": lambda: mx.asarray(n),
    "from_dlpack(n) (shared)": lambda: mx.from_dlpack(n),
    "from_dlpack(n.T) (shared, strided)": lambda: mx.from_dlpack(n.T),
    "np.from_dlpack(asarray(n)) (shared)": lambda: (np.from_dlpack(mx.asarray(n)), mx.array(0))[1],
}
for name, f in cases.items():
    print(f"{name:40s} {best_ms(f):9.3f} ms")
