"""Evaluation from many Python threads at once: threads that share unevaluated
arrays, one compiled function called from all of them, and random graphs
checked against NumPy. Each thread's results must be exact, and every array
evaluated once (Note [Concurrent evaluation] in tessera/core/eval.cpp)."""
import threading

import numpy as np

import tessera.core as mx

THREADS = 4


def run_together(work, n=THREADS):
    """Runs work(i) on n threads released at once; re-raises the first error."""
    barrier = threading.Barrier(n)
    errors = []

    def body(i):
        try:
            barrier.wait()
            work(i)
        except BaseException as e:  # noqa: BLE001 - handed to the main thread
            errors.append(e)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def test_threads_evaluate_one_unevaluated_array():
    for _ in range(600):
        a = mx.ones((16, 16)) @ mx.ones((16, 16))
        got = [None] * THREADS

        def work(i):
            if i % 2:
                mx.eval(a)
            got[i] = a[0, 0].item()

        run_together(work)
        assert got == [16.0] * THREADS


def test_threads_share_a_chain_and_its_branches():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    for _ in range(200):
        base = mx.array(x)
        for _ in range(20):
            base = base * 1.5 - 1.0
        want = x.astype(np.float64)
        for _ in range(20):
            want = want * 1.5 - 1.0
        got = [None] * THREADS

        def work(i):
            # Each thread takes a branch of the shared chain; some evaluate
            # the shared part first, others only through their branch.
            if i % 2:
                mx.eval(base)
            got[i] = np.array(base + i)

        run_together(work)
        for i in range(THREADS):
            np.testing.assert_allclose(got[i], want + i, rtol=1e-5)


def test_threads_call_one_compiled_function():
    f = mx.compile(lambda a, b: (a @ b + 1).sum(axis=0))
    rng = np.random.default_rng(0)
    inputs = [(rng.standard_normal((8, 8)).astype(np.float32),
               rng.standard_normal((8, 8)).astype(np.float32)) for _ in range(THREADS)]
    for _ in range(300):
        got = [None] * THREADS

        def work(i):
            a, b = inputs[i]
            got[i] = np.array(f(mx.array(a), mx.array(b)))

        run_together(work)
        for i, (a, b) in enumerate(inputs):
            np.testing.assert_allclose(got[i], (a @ b + 1).sum(axis=0), rtol=1e-4, atol=1e-4)


def test_threads_async_eval_and_wait():
    for _ in range(400):
        a = mx.exp(mx.arange(64, dtype=mx.float32) / 64)
        b = a * 2
        got = [None] * THREADS

        def work(i):
            mx.async_eval(b) if i % 2 else None
            got[i] = b.sum().item()

        run_together(work)
        want = float(np.exp(np.arange(64) / 64).sum() * 2)
        np.testing.assert_allclose(got, [want] * THREADS, rtol=1e-5)


OPS = [
    (lambda x, y: x + y, np.add),
    (lambda x, y: x * y, np.multiply),
    (lambda x, y: mx.maximum(x, y), np.maximum),
    (lambda x, y: x - y, np.subtract),
    (lambda x, y: mx.tanh(x) + y, lambda x, y: np.tanh(x) + y),
    (lambda x, y: x @ y, np.matmul),
]


def test_threads_random_graphs_match_numpy():
    shared_np = np.random.default_rng(1).standard_normal((6, 6)).astype(np.float32)
    for round_ in range(80):
        shared = mx.array(shared_np) * 0.5  # unevaluated, used by every thread
        got, want = [None] * THREADS, [None] * THREADS

        def work(i):
            rng = np.random.default_rng(100 * round_ + i)
            x, xn = shared, shared_np.astype(np.float64) * 0.5
            for _ in range(12):
                y_np = rng.standard_normal((6, 6)).astype(np.float32) * 0.3
                op, ref = OPS[rng.integers(len(OPS))]
                x, xn = op(x, mx.array(y_np)), ref(xn, y_np.astype(np.float64))
                if rng.random() < 0.2:
                    mx.eval(x)
            got[i], want[i] = np.array(x), xn

        run_together(work)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=2e-4, atol=2e-4)


def test_threads_errors_stay_in_their_thread():
    def work(i):
        a = mx.ones((3,)) + i
        if i % 2:
            try:
                mx.reshape(a, (7,))
            except ValueError:
                pass
            else:
                raise AssertionError("reshape to (7,) did not raise")
        assert a.tolist() == [1.0 + i] * 3

    for _ in range(60):
        run_together(work)
