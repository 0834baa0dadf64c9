"""Streams tied to threads (ThreadLocalStream, new_thread_local_stream,
new_thread_unsafe_stream, clear_streams), and the submodules mx.metal (never
available here: its memory functions forward to mx's; fast.metal_kernel makes
kernels that raise when called) and mx.cuda."""

import threading
import warnings

import numpy as np
import pytest

import tessera.core as mx


def test_thread_local_stream_resolves_per_thread():
    t = mx.new_thread_local_stream(mx.cpu)
    assert isinstance(t, mx.ThreadLocalStream) and t.device == mx.cpu
    assert repr(t).startswith("ThreadLocalStream(Device(cpu, 0), ")
    assert t == t and t != mx.new_thread_local_stream(mx.cpu)
    mine = mx.Stream(t)
    assert mine == mx.Stream(t) and mine != mx.default_stream(mx.cpu)
    seen = {}

    def work(i):
        with mx.stream(t):
            seen[i] = (mx.default_stream(mx.cpu), (mx.ones(3) * i).tolist())

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert seen[0][1] == [0.0] * 3 and seen[1][1] == [1.0] * 3
    streams = {seen[0][0], seen[1][0], mine}
    assert len(streams) == 3  # one stream per thread


def test_thread_local_stream_is_accepted_as_a_stream():
    t = mx.new_thread_local_stream(mx.cpu)
    default = mx.default_stream(mx.cpu)
    with mx.stream(t):
        assert mx.default_stream(mx.cpu) == mx.Stream(t)
        y = mx.arange(4) * 2
    assert mx.default_stream(mx.cpu) == default
    z = mx.add(y, 1, stream=t)
    mx.synchronize(t)
    mx.eval(z)
    np.testing.assert_array_equal(np.array(z), np.arange(4) * 2 + 1)
    with pytest.raises(TypeError):
        mx.ThreadLocalStream()


def test_new_thread_unsafe_stream_is_usable_from_other_threads():
    s = mx.new_thread_unsafe_stream(mx.cpu)
    assert isinstance(s, mx.Stream) and s.device == mx.cpu
    out = []
    th = threading.Thread(target=lambda: out.append(mx.sum(mx.ones(5), stream=s).item()))
    th.start()
    th.join()
    assert out == [5.0]


def test_clear_streams_restores_the_default_stream():
    first = mx.default_stream(mx.cpu)
    s = mx.new_stream(mx.cpu)
    t = mx.new_thread_local_stream(mx.cpu)
    before = mx.Stream(t)
    mx.set_default_stream(s)
    pending = mx.exp(mx.zeros(3))
    mx.async_eval(pending)
    assert mx.clear_streams() is None
    assert mx.default_stream(mx.cpu) == first
    assert mx.Stream(t) != before  # a fresh stream for this thread
    np.testing.assert_array_equal(np.array(pending), np.ones(3))


def test_clear_streams_resets_the_random_key():
    fresh = []
    th = threading.Thread(target=lambda: fresh.append(np.array(mx.random.state[0])))
    th.start()
    th.join()
    mx.random.seed(3)
    assert np.array(mx.random.state[0]).tolist() == [0, 3]
    mx.clear_streams()
    # The key of a thread that has not drawn yet.
    np.testing.assert_array_equal(np.array(mx.random.state[0]), fresh[0])
    assert not np.array_equal(fresh[0], [0, 3])


def test_metal_is_not_available():
    assert mx.metal.is_available() is False
    assert mx.cuda.is_available() == mx.is_available(mx.gpu)
    with pytest.warns(DeprecationWarning, match="mx.metal.device_info"):
        assert mx.metal.device_info() == {}
    with pytest.raises(RuntimeError, match="Metal is not available"):
        mx.metal.start_capture("trace.gputrace")
    with pytest.raises(RuntimeError, match="Metal is not available"):
        mx.metal.stop_capture()


def test_metal_memory_functions_forward():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        keep = mx.zeros((256,))
        mx.eval(keep)
        assert mx.metal.get_active_memory() == mx.get_active_memory() >= 1024
        assert mx.metal.get_peak_memory() == mx.get_peak_memory()
        assert mx.metal.get_cache_memory() == mx.get_cache_memory()
        old = mx.metal.set_cache_limit(1 << 20)
        assert mx.set_cache_limit(old) == 1 << 20
        assert mx.metal.set_wired_limit(limit=0) == mx.set_wired_limit(0)
        mx.metal.clear_cache()
        assert mx.get_cache_memory() == 0
        mx.metal.reset_peak_memory()
    with pytest.warns(DeprecationWarning, match="use mx.get_active_memory"):
        mx.metal.get_active_memory()


def test_metal_kernel_is_made_but_raises_when_called():
    kernel = mx.fast.metal_kernel(
        name="myexp", input_names=["inp"], output_names=["out"],
        source="uint i = thread_position_in_grid.x; out[i] = metal::exp(inp[i]);")
    assert callable(kernel)
    with pytest.raises(RuntimeError, match=r"\[metal_kernel\].*'myexp'.*Metal is not available"):
        kernel(inputs=[mx.ones(4)], grid=(4, 1, 1), threadgroup=(4, 1, 1),
               output_shapes=[(4,)], output_dtypes=[mx.float32])
    with pytest.raises(TypeError):
        mx.fast.metal_kernel("k", ["a"], ["b"])  # source is required


def test_host_profile_counts_each_primitive_and_the_async_worker():
    # TESSERA_HOST_PROFILE=1 prints, at exit, a line per primitive with its
    # task count (inline ones apart) and each stream worker's idle time.
    import os
    import subprocess
    import sys

    program = (
        "import tessera.core as mx\n"
        "mx.set_default_device(mx.cpu)\n"
        "x = mx.ones((8,))\n"
        "mx.eval(mx.exp(x) + 1)\n"  # inline: Exp and Add on the calling thread
        "y = mx.sin(x)\n"
        "mx.async_eval(y)\n"  # on the stream's worker
        "y.item() if y.size == 1 else y.tolist()\n"
    )
    env = dict(os.environ, TESSERA_HOST_PROFILE="1")
    out = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True,
                         text=True, timeout=120, check=True)
    rows = {}
    for line in out.stderr.splitlines():
        parts = line.split()
        if len(parts) == 7 and parts[1].isdigit():
            rows[parts[0]] = (int(parts[1]), int(parts[2]), float(parts[3]))
    assert "[host profile]" in out.stderr
    assert rows["Exp"][:2] == (1, 1) and rows["Add"][:2] == (1, 1)
    assert rows["Sin"][:2] == (1, 0)  # one task, not inline
    assert all(median >= 0 for _, _, median in rows.values())
    assert "worker idle" in out.stderr
    quiet = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                           timeout=120, check=True)
    assert "[host profile]" not in quiet.stderr


def test_the_scheduling_thread_runs_handed_graphs_where_async_eval_sent_them():
    # TESSERA_SCHEDULING_THREAD=1 (Note [Scheduling thread], core/eval.cpp):
    # async_eval hands its graph to a thread that schedules it. A decoding-like
    # loop (queue step i, read step i - 1) gets every step's own values, a graph
    # handed and read at once still runs on the stream's worker, not inline,
    # and synchronize() waits for what was handed.
    import os
    import subprocess
    import sys

    program = (
        "import tessera.core as mx\n"
        "mx.set_default_device(mx.cpu)\n"
        "y = mx.zeros((64,))\n"
        "ys = []\n"
        "for i in range(300):\n"
        "    y = y * 2.0 - y + 1.0\n"  # y + 1, through three ops
        "    mx.async_eval(y)\n"
        "    ys.append(y)\n"
        "    if i:\n"
        "        assert ys[i - 1].tolist() == [float(i)] * 64, (i, ys[i - 1].tolist()[:3])\n"
        "last = ys[-1][:2] * 0.5\n"
        "mx.async_eval(last)\n"
        "mx.synchronize()\n"
        "print(ys[-1].tolist()[0], last.tolist())\n"
        "s = mx.sin(mx.ones((8,)))\n"
        "mx.async_eval(s)\n"
        "s.tolist()\n"
    )
    env = dict(os.environ, TESSERA_SCHEDULING_THREAD="1", TESSERA_HOST_PROFILE="1")
    out = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True,
                         text=True, timeout=120, check=True)
    first, rest = out.stdout.split(" ", 1)
    assert float(first) == 300.0
    assert rest.strip() == "[150.0, 150.0]"
    rows = {}
    for line in out.stderr.splitlines():
        parts = line.split()
        if len(parts) == 7 and parts[1].isdigit():
            rows[parts[0]] = (int(parts[1]), int(parts[2]))
    assert rows["Sin"] == (1, 0)  # one task, on the worker
    assert rows["Add"][1] == 0 and rows["Add"][0] >= 300
