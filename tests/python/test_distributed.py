"""mx.distributed over the group of this process alone (no backend), the
sharded layers of nn.layers.distributed over it, and the gradient helpers
average_gradients and clip_grad_norm_sharded: each checked against the
unsharded computation in NumPy."""

import ctypes

import numpy as np
import pytest

import tessera.core as mx
import tessera.nn as nn
from tessera.nn.layers import distributed as dist_layers
from tessera.nn.utils import clip_grad_norm_sharded
from tessera.utils import tree_flatten

dist = mx.distributed


def test_init_gives_the_singleton_group():
    g = dist.init()
    assert isinstance(g, dist.Group)
    assert (g.rank(), g.size()) == (0, 1)
    assert dist.init(strict=False, backend="any").size() == 1
    for backend in ("mpi", "ring", "nccl", "jaccl"):
        assert dist.init(backend=backend).size() == 1  # not started by mpirun
    for backend in ("ring", "jaccl"):
        assert dist.is_available(backend) is False
    # MPI is available where its library loads (Open MPI's, as scripts/install-deps
    # installs), NCCL where its library loads and there is a GPU.
    assert dist.is_available("mpi") is loads("libmpi.so.40")
    assert dist.is_available("nccl") is nccl_loads()
    assert dist.is_available() is (loads("libmpi.so.40") or nccl_loads())


def loads(library):
    try:
        ctypes.CDLL(library)
        return True
    except OSError:
        return False


def nccl_loads():
    import os

    library = os.environ.get("TESSERA_NCCL_LIBRARY", "libnccl.so.2")
    return mx.cuda.is_available() and (loads(library) or loads("libnccl.so.2"))


def test_init_errors():
    with pytest.raises(RuntimeError, match="couldn't initialize any backend"):
        dist.init(strict=True)
    if not nccl_loads():
        with pytest.raises(RuntimeError, match="nccl"):
            dist.init(True, "nccl")
    with pytest.raises(ValueError, match="'foo'"):
        dist.init(backend="foo")
    with pytest.raises(ValueError, match="'foo'"):
        dist.is_available("foo")
    with pytest.raises(TypeError):
        dist.Group()


def test_group_split_raises():
    g = dist.init()
    with pytest.raises(RuntimeError, match="cannot split"):
        g.split(0)
    with pytest.raises(RuntimeError, match="cannot split"):
        g.split(1, key=0)


@pytest.mark.parametrize("name", ["all_sum", "all_max", "all_min", "all_gather", "sum_scatter"])
def test_collectives_are_the_identity(name):
    f = getattr(dist, name)
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5
    for kwargs in ({}, {"group": dist.init()}, {"stream": mx.cpu}):
        y = f(mx.array(x), **kwargs)
        assert y.shape == (2, 3) and y.dtype == mx.float32
        np.testing.assert_array_equal(np.array(y), x)
    # A Python scalar becomes an array, with the usual dtype.
    s = f(3)
    assert s.dtype == mx.int32 and s.item() == 3
    b = f(mx.array([True, False]))
    assert b.dtype == mx.bool_ and b.tolist() == [True, False]


def test_collectives_differentiate_as_identity():
    g = mx.grad(lambda x: (dist.all_sum(x) * x).sum())(mx.array([1.0, -2.0]))
    np.testing.assert_allclose(np.array(g), [2.0, -4.0])


def test_point_to_point_needs_a_peer():
    x = mx.ones((2, 2))
    with pytest.raises(ValueError, match="send to a singleton group"):
        dist.send(x, 0)
    with pytest.raises(ValueError, match="recv from a singleton group"):
        dist.recv((2, 2), mx.float32, 0)
    with pytest.raises(ValueError, match="recv from a singleton group"):
        dist.recv_like(x, 0, group=dist.init())


def _linear(rng, bias=True, i=8, o=6):
    lin = nn.Linear(i, o, bias=bias)
    lin.weight = mx.array(rng.standard_normal((o, i)).astype(np.float32))
    if bias:
        lin.bias = mx.array(rng.standard_normal(o).astype(np.float32))
    return lin


@pytest.mark.parametrize("sharding", ["all-to-sharded", "sharded-to-all"])
@pytest.mark.parametrize("bias", [True, False])
def test_shard_linear_matches_linear(rng, sharding, bias):
    lin = _linear(rng, bias)
    x = rng.standard_normal((3, 8)).astype(np.float32)
    sharded = nn.layers.distributed.shard_linear(lin, sharding)
    cls = nn.AllToShardedLinear if sharding == "all-to-sharded" else nn.ShardedToAllLinear
    assert type(sharded) is cls
    assert ("bias" in sharded) == bias
    want = x @ np.array(lin.weight).T + (np.array(lin.bias) if bias else 0)
    np.testing.assert_allclose(np.array(sharded(mx.array(x))), want, rtol=1e-5, atol=1e-5)
    assert f"input_dims=8, output_dims=6, bias={bias}" in repr(sharded)
    # The gradient of the input flows as through the linear layer.
    gx = mx.grad(lambda v: sharded(v).sum())(mx.array(x))
    np.testing.assert_allclose(np.array(gx), np.tile(np.array(lin.weight).sum(0), (3, 1)),
                               rtol=1e-5, atol=1e-5)


def test_sharded_layers_with_segments_keep_the_weights(rng):
    lin = _linear(rng, i=4, o=6)
    for segments in (3, [0.5]):
        layer = dist_layers.AllToShardedLinear.from_linear(lin, segments=segments)
        np.testing.assert_array_equal(np.array(layer.weight), np.array(lin.weight))
        np.testing.assert_array_equal(np.array(layer.bias), np.array(lin.bias))


@pytest.mark.parametrize("sharding", ["all-to-sharded", "sharded-to-all"])
def test_shard_quantized_linear_matches_quantized_linear(rng, sharding):
    q = nn.QuantizedLinear.from_linear(_linear(rng, i=64, o=8), group_size=32, bits=4)
    x = mx.array(rng.standard_normal((2, 64)).astype(np.float32))
    sharded = nn.layers.distributed.shard_linear(q, sharding)
    cls = (nn.QuantizedAllToShardedLinear if sharding == "all-to-sharded"
           else nn.QuantizedShardedToAllLinear)
    assert type(sharded) is cls
    assert (sharded.group_size, sharded.bits, sharded.mode) == (32, 4, "affine")
    np.testing.assert_allclose(np.array(sharded(x)), np.array(q(x)), rtol=1e-5, atol=1e-5)
    assert "input_dims=64, output_dims=8" in repr(sharded)
    # Frozen, as QuantizedLinear: nothing trainable, even after unfreeze.
    sharded.unfreeze()
    assert tree_flatten(sharded.trainable_parameters()) == []


def test_sharded_layer_constructors():
    layer = nn.ShardedToAllLinear(8, 4, bias=False)
    assert layer.weight.shape == (4, 8) and "bias" not in layer
    layer = nn.QuantizedAllToShardedLinear(64, 4, group_size=64, bits=8)
    assert layer.weight.shape == (4, 64 * 8 // 32) and layer.bias.shape == (4,)
    with pytest.raises(ValueError, match="sharding"):
        nn.layers.distributed.shard_linear(nn.Linear(2, 2), "rows")


def test_shard_inplace_keeps_the_parameters_of_one_process(rng):
    model = nn.Sequential(_linear(rng), nn.ReLU(), _linear(rng, i=6, o=2))
    before = [(k, np.array(v)) for k, v in tree_flatten(model.parameters())]
    nn.layers.distributed.shard_inplace(model.layers[0], "all-to-sharded")
    nn.layers.distributed.shard_inplace(model.layers[2], lambda path, w: -1)
    after = tree_flatten(model.parameters())
    assert [k for k, _ in before] == [k for k, _ in after]
    for (_, a), (_, b) in zip(before, after):
        np.testing.assert_array_equal(a, np.array(b))
    with pytest.raises(ValueError, match="int or a tuple"):
        nn.layers.distributed.shard_inplace(model.layers[0], lambda path, w: "x")


def test_fully_shard_of_one_process_is_the_module(rng):
    lin = _linear(rng)
    assert nn.fully_shard(lin) is lin


def test_average_gradients_of_one_process_is_the_identity(rng):
    grads = {"a": mx.array(rng.standard_normal((3, 2)).astype(np.float32)),
             "b": [mx.array([1.0, 2.0])]}
    for size in (32 * 1024**2, 0, 8):
        out = nn.average_gradients(grads, all_reduce_size=size)
        assert out is grads


def test_clip_grad_norm_sharded(rng):
    a = rng.standard_normal((3, 2)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    grads = {"a": mx.array(a), "b": mx.array(b)}
    norm = np.sqrt((a**2).sum() + (b**2).sum())
    clipped, total = clip_grad_norm_sharded(grads, max_norm=0.5)
    np.testing.assert_allclose(total.item(), norm, rtol=1e-5)
    scale = 0.5 / (norm + 1e-6)
    np.testing.assert_allclose(np.array(clipped["a"]), a * scale, rtol=1e-5)
    np.testing.assert_allclose(np.array(clipped["b"]), b * scale, rtol=1e-5)
    same, _ = clip_grad_norm_sharded(grads, max_norm=2 * norm)
    np.testing.assert_allclose(np.array(same["a"]), a, rtol=1e-6)


def test_fully_sharded_module_gathers_and_scatters(rng):
    # Built directly, the wrapper runs its gather (forward) and reduce-scatter
    # (backward) over the group of one process: outputs and gradients are the
    # unwrapped module's, also with a compute dtype.
    lin = _linear(rng, i=4, o=6)
    x = mx.array(rng.standard_normal((3, 4)).astype(np.float32))
    want = np.array(lin(x))
    want_grads = nn.value_and_grad(lin, lambda x: lin(x).square().sum())(x)[1]
    wrapped = nn.FullyShardedModule(lin)
    assert "num_sharded_params=2" in repr(wrapped)
    np.testing.assert_allclose(np.array(wrapped(x)), want, rtol=1e-6)
    grads = nn.value_and_grad(wrapped, lambda x: wrapped(x).square().sum())(x)[1]
    assert [k for k, _ in tree_flatten(grads)] == ["module.weight", "module.bias"]
    for (_, g), (_, w) in zip(tree_flatten(grads), tree_flatten(want_grads)):
        np.testing.assert_allclose(np.array(g), np.array(w), rtol=1e-5)
    half = nn.FullyShardedModule(_linear(rng, i=4, o=6), compute_dtype=mx.float16)
    assert half(x.astype(mx.float16)).dtype == mx.float16
    assert half.module.weight.dtype == mx.float32  # the stored shards keep theirs
    with pytest.raises(ValueError, match="scalar parameter 'w'"):
        m = nn.Module()
        m.w = mx.array(1.0)
        nn.FullyShardedModule(m)
