"""The NCCL backend at world size 1, where a GPU and NCCL's library are present
(the GPU machine: scripts/gpu-check): the collectives of a group of one run
through NCCL on the GPU stream, and give the NumPy values of one process.
Jobs of several processes need a GPU each (the multi-GPU runs)."""
import numpy as np
import pytest

import tessera.core as mx

dist = mx.distributed

pytestmark = pytest.mark.skipif(not dist.is_available("nccl"),
                                reason="needs a GPU and NCCL's library (libnccl.so.2)")

DTYPES = [mx.bool_, mx.uint8, mx.uint16, mx.uint32, mx.uint64, mx.int8, mx.int16, mx.int32,
          mx.int64, mx.float16, mx.bfloat16, mx.float32, mx.float64, mx.complex64]
SHAPES = [(), (0,), (1,), (7,), (4, 5), (3, 1, 6)]


@pytest.fixture(scope="module")
def group():
    g = dist.init(strict=True, backend="nccl")
    assert (g.rank(), g.size()) == (0, 1)
    return g


def values(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=shape) * 20
    if dtype == mx.complex64:
        return mx.array((x + 1j * rng.normal(size=shape)).astype(np.complex64))
    if dtype == mx.bool_:
        return mx.array(x > 0)
    if dtype in (mx.uint8, mx.uint16, mx.uint32, mx.uint64):
        x = np.abs(x)
    return mx.array(x).astype(dtype)


def test_collectives_of_one_process_give_the_input(group):
    for dtype in DTYPES:
        for shape in SHAPES:
            x = values(shape, dtype)
            want = np.array(x)
            ops = [dist.all_sum, dist.all_gather]
            if dtype != mx.complex64:
                ops += [dist.all_max, dist.all_min]
            if shape:
                ops.append(dist.sum_scatter)
            for op in ops:
                case = f"{op.__name__} {dtype} {shape}"
                y = op(x, group=group)
                got = np.array(y)
                assert y.dtype == x.dtype, case
                assert got.shape == (want.reshape(1) if op is dist.all_gather and not shape
                                     else want).shape, case
                np.testing.assert_array_equal(got.reshape(want.shape), want, err_msg=case)


def test_collectives_run_on_the_gpu_stream_whatever_stream_is_given(group):
    x = mx.arange(12, dtype=mx.float32).reshape(3, 4)
    for s in (mx.cpu, mx.gpu, None):
        y = dist.all_sum(x.T, group=group, stream=s)  # a transposed (strided) input
        np.testing.assert_array_equal(np.array(y), np.arange(12, dtype=np.float32).reshape(3, 4).T)


def test_a_chain_of_collectives_and_kernels(group):
    x = mx.random.normal((1000, 33))
    y = x
    for _ in range(20):
        y = dist.all_sum(y * 1.5, group=group) - 0.5 * y
    np.testing.assert_allclose(np.array(y), np.array(x), rtol=1e-5, atol=1e-5)


def test_gradients_through_nccl_collectives(group):
    x = mx.array([1.0, -2.0, 3.0])
    g = mx.grad(lambda v: (dist.all_sum(v * v, group=group)).sum())(x)
    np.testing.assert_allclose(np.array(g), 2 * np.array(x))
    g = mx.grad(lambda v: (dist.all_gather(v, group=group) ** 3).sum())(x)
    np.testing.assert_allclose(np.array(g), 3 * np.array(x) ** 2)


def test_point_to_point_needs_a_peer(group):
    with pytest.raises(ValueError, match="singleton|another rank"):
        dist.send(mx.ones(2), 0, group=group)
    with pytest.raises(ValueError, match="singleton|another rank"):
        dist.recv((2,), mx.float32, 0, group=group)


def test_split_of_one_process(group):
    sub = group.split(3)
    assert (sub.rank(), sub.size()) == (0, 1)
    np.testing.assert_array_equal(np.array(dist.all_sum(mx.ones(3), group=sub)), np.ones(3))
