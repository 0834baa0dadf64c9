"""One process of an MPI job that tests/python/test_distributed_mpi.py starts
(mpirun -np N python mpi_worker.py MODE). Every rank computes what each other
rank holds (the inputs are functions of the rank), so each checks its results
against NumPy alone. Prints "ok <rank>" at the end; any failed check raises,
which ends the whole job."""

import sys

import numpy as np

import tessera.core as mx
import tessera.nn as nn
import tessera.optimizers as optim
from tessera.nn.layers import distributed as dist_layers
from tessera.utils import tree_flatten

dist = mx.distributed
group = dist.init(strict=True, backend="mpi")
rank, size = group.rank(), group.size()


def value_of(r, shape, dtype):
    """Rank r's input: small integers (exact in every dtype), distinct per rank."""
    n = int(np.prod(shape)) if shape else 1
    v = (np.arange(n) * 7 + 3 * r + 1) % 11 - 4
    if dtype == np.bool_:
        return ((v + r) % 3 == 0).reshape(shape)
    if np.issubdtype(dtype, np.unsignedinteger):
        v = np.abs(v)
    if np.issubdtype(dtype, np.complexfloating):
        return (v + 1j * (v + r)).astype(dtype).reshape(shape)
    return v.astype(dtype).reshape(shape)


def check(got, want, what):
    got = np.array(got)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    np.testing.assert_array_equal(got.astype(want.dtype), want, err_msg=what)


DTYPES = [("float32", np.float32), ("float64", np.float64), ("int32", np.int32),
          ("int64", np.int64), ("uint8", np.uint8), ("int16", np.int16), ("bool_", np.bool_),
          ("float16", np.float16), ("bfloat16", np.float32), ("complex64", np.complex64)]
SHAPES = [(), (0, 3), (5, 7), (2 * size, 3)]


def collectives():
    for name, np_dtype in DTYPES:
        dtype = getattr(mx, name)
        for shape in SHAPES:
            inputs = [value_of(r, shape, np_dtype) for r in range(size)]
            x = mx.array(inputs[rank]).astype(dtype)
            what = f"{name} {shape}"
            stacked = np.stack(inputs)
            if np_dtype == np.bool_:
                check(dist.all_sum(x), stacked.any(0), "all_sum " + what)
            else:
                check(dist.all_sum(x), stacked.sum(0).astype(np_dtype), "all_sum " + what)
            if np_dtype != np.complex64:
                check(dist.all_max(x), stacked.max(0), "all_max " + what)
                check(dist.all_min(x), stacked.min(0), "all_min " + what)
            gathered = np.concatenate([i.reshape((1,) if i.ndim == 0 else i.shape)
                                       for i in inputs])
            check(dist.all_gather(x), gathered, "all_gather " + what)
            if shape and shape[0] % size == 0 and np_dtype != np.bool_:
                rows = shape[0] // size
                want = stacked.sum(0).astype(np_dtype)[rank * rows:(rank + 1) * rows]
                check(dist.sum_scatter(x), want, "sum_scatter " + what)
    try:
        dist.sum_scatter(mx.ones((2 * size + 1, 2)))
        raise AssertionError("sum_scatter of an uneven first axis did not raise")
    except ValueError as e:
        assert "split evenly" in str(e)
    try:
        dist.all_max(mx.array([1 + 2j]))
        raise AssertionError("all_max of complex values did not raise")
    except ValueError:
        pass


def point_to_point():
    # A ring: each rank sends to the next and receives from the one before.
    nxt, prev = (rank + 1) % size, (rank - 1) % size
    x = mx.array(value_of(rank, (4, 3), np.float32))
    sent = dist.send(x, nxt)
    got = dist.recv((4, 3), mx.float32, prev)
    mx.eval(sent, got)
    check(sent, value_of(rank, (4, 3), np.float32), "send returns x")
    check(got, value_of(prev, (4, 3), np.float32), "recv")
    got_like = dist.recv_like(mx.zeros((2,), mx.int64), prev)
    mx.eval(dist.send(mx.array([rank, 10 * rank], mx.int64), nxt), got_like)
    check(got_like, np.array([prev, 10 * prev], np.int64), "recv_like")
    for bad in (rank, size, -1):
        try:
            dist.send(x, bad)
            raise AssertionError(f"send to {bad} did not raise")
        except ValueError as e:
            assert "not another rank" in str(e)


def groups():
    sub = group.split(rank % 2)
    members = [r for r in range(size) if r % 2 == rank % 2]
    assert sub.size() == len(members) and sub.rank() == members.index(rank)
    x = mx.array(float(rank))
    check(dist.all_sum(x, group=sub), np.array(float(sum(members))), "all_sum over a split")
    rev = group.split(0, key=size - 1 - rank)
    assert rev.rank() == size - 1 - rank
    check(dist.all_gather(mx.array([rank]), group=rev), np.arange(size)[::-1], "reversed keys")


def gradients():
    x = mx.array(value_of(rank, (2 * size, 3), np.float32))
    w = np.arange(2 * size * 3, dtype=np.float32).reshape(2 * size, 3)
    g = mx.grad(lambda v: (dist.all_sum(v) * mx.array(w)).sum())(x)
    check(g, w, "vjp of all_sum")
    wg = np.arange(size * 2 * size * 3, dtype=np.float32).reshape(size * 2 * size, 3)
    g = mx.grad(lambda v: (dist.all_gather(v) * mx.array(wg)).sum())(x)
    check(g, wg[rank * 2 * size:(rank + 1) * 2 * size], "vjp of all_gather")
    ws = np.arange(6, dtype=np.float32).reshape(2, 3) + rank
    g = mx.grad(lambda v: (dist.sum_scatter(v) * mx.array(ws)).sum())(x)
    check(g, np.concatenate([np.arange(6, dtype=np.float32).reshape(2, 3) + r
                             for r in range(size)]), "vjp of sum_scatter")
    _, t = mx.jvp(lambda v: dist.all_sum(v), [x], [mx.ones_like(x)])
    check(t[0], np.full((2 * size, 3), size, np.float32), "jvp of all_sum")
    batched = mx.vmap(lambda v: dist.all_gather(v))(mx.array(np.ones((3, 2, 4), np.float32)))
    check(batched, np.ones((3, 2 * size, 4), np.float32), "vmap of all_gather")


def data_parallel():
    # Each rank takes its rows of one global batch; averaged gradients make
    # the same steps as one process on the whole batch.
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((8 * size, 5)).astype(np.float32)
    ys = rng.standard_normal((8 * size, 2)).astype(np.float32)

    def train(x, y, average):
        mx.random.seed(1)
        model = nn.Linear(5, 2)
        opt = optim.SGD(learning_rate=0.1)
        loss_grad = nn.value_and_grad(model, lambda a, b: ((model(a) - b) ** 2).mean())
        for _ in range(5):
            _, grads = loss_grad(mx.array(x), mx.array(y))
            if average:
                grads = nn.average_gradients(grads)
            opt.update(model, grads)
        return dict(tree_flatten(model.parameters()))

    rows = slice(rank * 8, (rank + 1) * 8)
    mine = train(xs[rows], ys[rows], True)
    whole = train(xs, ys, False)
    for k in whole:
        np.testing.assert_allclose(np.array(mine[k]), np.array(whole[k]), rtol=1e-5, atol=1e-6,
                                   err_msg=k)


def tensor_parallel():
    mx.random.seed(2)
    a, b = nn.Linear(6, 4 * size), nn.Linear(4 * size, 3)
    x = mx.array(np.random.default_rng(3).standard_normal((2, 6)).astype(np.float32))
    want = np.array(b(a(x)))
    sa = dist_layers.shard_linear(a, "all-to-sharded")
    sb = dist_layers.shard_linear(b, "sharded-to-all")
    np.testing.assert_allclose(np.array(sb(sa(x))), want, rtol=1e-5, atol=1e-5)


def fully_sharded():
    # Each rank keeps its rows of every parameter; forward gathers them, the
    # gradients come back as this rank's rows of their mean over the group.
    def make():
        mx.random.seed(4)
        return nn.Linear(3, 2 * size)

    def xs(r):
        return mx.array(value_of(r, (4, 3), np.float32) / 4)

    def loss(m, x):
        return m(x).square().sum()

    full = make()
    want_out = np.array(full(xs(rank)))
    per_rank = [dict(tree_flatten(nn.value_and_grad(full, lambda x: loss(full, x))(xs(r))[1]))
                for r in range(size)]
    sharded = dist_layers.fully_shard(make())
    np.testing.assert_allclose(np.array(sharded(xs(rank))), want_out, rtol=1e-5, atol=1e-6)
    grads = dict(tree_flatten(nn.value_and_grad(sharded, lambda x: loss(sharded, x))(xs(rank))[1]))
    for path, g in grads.items():
        key = next(k for k in per_rank[0] if path.endswith(k))
        mean = np.mean([np.array(p[key]) for p in per_rank], axis=0)
        rows = mean.shape[0] // size
        np.testing.assert_allclose(np.array(g), mean[rank * rows:(rank + 1) * rows], rtol=1e-5,
                                   atol=1e-6, err_msg=path)
    # The global norm of gradients sharded over the group.
    local = {"w": mx.array(value_of(rank, (3,), np.float32))}
    norm = np.sqrt(sum((value_of(r, (3,), np.float32) ** 2).sum() for r in range(size)))
    clipped, total = nn.utils.clip_grad_norm_sharded(local, max_norm=1.0)
    np.testing.assert_allclose(total.item(), norm, rtol=1e-6)
    np.testing.assert_allclose(np.array(clipped["w"]),
                               value_of(rank, (3,), np.float32) / (norm + 1e-6), rtol=1e-5)


mode = sys.argv[1] if len(sys.argv) > 1 else "all"
if mode == "fail":
    if rank == size - 1:
        raise RuntimeError("rank %d stops on purpose" % rank)
    mx.eval(dist.all_sum(mx.ones((3,))))  # the others wait for it
else:
    collectives()
    point_to_point()
    groups()
    gradients()
    data_parallel()
    tensor_parallel()
    fully_sharded()
sys.stdout.write(f"ok {rank}\n")  # one write: mpirun forwards the ranks' writes as they come
sys.stdout.flush()
