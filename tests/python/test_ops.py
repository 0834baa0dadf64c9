"""Each bound op against NumPy on every device present, on random inputs and on
views (transposed, strided, reversed, broadcast)."""
import math
from typing import Callable, NamedTuple, Tuple

import numpy as np
import pytest

import tessera.core as mx


def views(x):
    """(tessera array, NumPy reference) pairs: the array itself and views of it."""
    a = mx.array(x)
    out = [(a, x)]
    if x.ndim >= 2:
        out.append((a.T, x.T))
        out.append((a[::2, ::-1], x[::2, ::-1]))
    if x.ndim >= 1:
        out.append((a[..., ::-2], x[..., ::-2]))
    return out


def close(got, ref, rtol=1e-5, atol=1e-6):
    got = np.array(got)
    assert got.shape == np.shape(ref)
    np.testing.assert_allclose(got, ref, rtol=rtol, atol=atol, equal_nan=True)


class Op(NamedTuple):
    """An elementwise op: its NumPy reference, where each input is drawn from
    (lo, hi), and the dtype of the inputs."""
    ref: Callable
    domains: Tuple[Tuple[float, float], ...]
    dtype: type = np.float32


def unary(ref, lo, hi):
    return Op(ref, ((lo, hi),))


def binary(ref, a=(0.5, 2), b=(0.5, 2), dtype=np.float32):
    return Op(ref, (a, b), dtype)


def bitwise(ref):
    return binary(ref, (0, 100), (0, 5), np.int32)


ELEMENTWISE = {
    "abs": unary(np.abs, -3, 3), "negative": unary(np.negative, -3, 3),
    "sign": unary(np.sign, -3, 3), "square": unary(np.square, -3, 3),
    "sqrt": unary(np.sqrt, 0.1, 3), "rsqrt": unary(lambda x: 1 / np.sqrt(x), 0.1, 3),
    "reciprocal": unary(np.reciprocal, 0.5, 3), "exp": unary(np.exp, -3, 3),
    "expm1": unary(np.expm1, -1, 1), "log": unary(np.log, 0.1, 3), "log2": unary(np.log2, 0.1, 3),
    "log10": unary(np.log10, 0.1, 3), "log1p": unary(np.log1p, -0.5, 3),
    "sin": unary(np.sin, -3, 3), "cos": unary(np.cos, -3, 3), "tan": unary(np.tan, -1, 1),
    "arcsin": unary(np.arcsin, -0.9, 0.9), "arccos": unary(np.arccos, -0.9, 0.9),
    "arctan": unary(np.arctan, -3, 3), "sinh": unary(np.sinh, -2, 2), "cosh": unary(np.cosh, -2, 2),
    "tanh": unary(np.tanh, -3, 3), "arcsinh": unary(np.arcsinh, -3, 3),
    "arccosh": unary(np.arccosh, 1.1, 3), "arctanh": unary(np.arctanh, -0.9, 0.9),
    "degrees": unary(np.degrees, -3, 3), "radians": unary(np.radians, -90, 90),
    "floor": unary(np.floor, -3, 3), "ceil": unary(np.ceil, -3, 3), "trunc": unary(np.trunc, -3, 3),
    "sigmoid": unary(lambda x: 1 / (1 + np.exp(-x)), -3, 3),
    "erf": unary(np.vectorize(math.erf), -2, 2), "stop_gradient": unary(lambda x: x, -3, 3),
    "positive": unary(np.positive, -3, 3), "isnan": unary(np.isnan, -3, 3),
    "isinf": unary(np.isinf, -3, 3), "isfinite": unary(np.isfinite, -3, 3),
    "isposinf": unary(np.isposinf, -3, 3), "isneginf": unary(np.isneginf, -3, 3),
    "logical_not": unary(np.logical_not, -1, 1),
    "add": binary(np.add), "subtract": binary(np.subtract), "multiply": binary(np.multiply),
    "divide": binary(np.divide), "power": binary(np.power), "maximum": binary(np.maximum),
    "minimum": binary(np.minimum), "logaddexp": binary(np.logaddexp),
    "arctan2": binary(np.arctan2), "equal": binary(np.equal), "not_equal": binary(np.not_equal),
    "greater": binary(np.greater), "greater_equal": binary(np.greater_equal),
    "less": binary(np.less), "less_equal": binary(np.less_equal),
    "remainder": binary(np.remainder), "floor_divide": binary(np.floor_divide),
    "logical_and": binary(np.logical_and), "logical_or": binary(np.logical_or),
    "logical_xor": binary(np.logical_xor),
    "bitwise_and": bitwise(np.bitwise_and), "bitwise_or": bitwise(np.bitwise_or),
    "bitwise_xor": bitwise(np.bitwise_xor), "left_shift": bitwise(np.left_shift),
    "right_shift": bitwise(np.right_shift),
}


def draw(rng, domain, shape, dtype):
    lo, hi = domain
    if np.issubdtype(dtype, np.integer):
        return rng.integers(lo, hi, shape).astype(dtype)
    return rng.uniform(lo, hi, shape).astype(dtype)


@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
def test_elementwise_against_numpy(name, device, rng):
    """Views (transposed, strided, reversed, broadcast), NumPy arrays, lists and
    Python scalars as inputs."""
    op = ELEMENTWISE[name]
    f = getattr(mx, name)
    tol = dict(rtol=2e-5, atol=2e-6) if len(op.domains) == 1 else dict(rtol=1e-5)
    if len(op.domains) == 1:
        x = draw(rng, op.domains[0], (4, 6), op.dtype)
        for a, xv in views(x):
            close(f(a), op.ref(xv.astype(np.float64)), **tol)
        close(f(x.tolist()), op.ref(x.astype(np.float64)), **tol)
        return
    x = draw(rng, op.domains[0], (4, 6), op.dtype)
    yt = draw(rng, op.domains[1], (6, 4), op.dtype)  # y = yt.T, stored transposed
    a, bt = mx.array(x), mx.array(yt)
    close(f(x, yt.T), op.ref(x, yt.T), **tol)
    close(f(a, bt.T), op.ref(x, yt.T), **tol)
    close(f(a.T, bt), op.ref(x.T, yt), **tol)
    close(f(a[::2], bt.T[0]), op.ref(x[::2], yt.T[0]), **tol)  # broadcast row
    s, t = x.flat[0], yt.flat[0]
    close(f(x, t.item()), op.ref(x, t), **tol)  # Python scalars
    close(f(s.item(), yt.T), op.ref(s, yt.T), **tol)


def test_unary_special_values(device):
    x = np.array([np.nan, np.inf, -np.inf, 1.0], np.float32)
    close(mx.nan_to_num(x), np.nan_to_num(x))
    close(mx.nan_to_num(x, nan=1.0, posinf=2.0, neginf=-2.0),
          np.nan_to_num(x, nan=1.0, posinf=2.0, neginf=-2.0))
    close(mx.erfinv(mx.erf(mx.array([0.1, -0.5]))), [0.1, -0.5], rtol=1e-5)
    c = np.array([1 + 2j, -3j], np.complex64)
    close(mx.conj(c), np.conj(c))
    close(mx.conjugate(c), np.conj(c))
    close(mx.real(c), c.real)
    close(mx.imag(c), c.imag)
    i = np.array([1, -2, 7], np.int32)
    close(mx.bitwise_invert(i), ~i)
    close(mx.round(np.array([0.5, 1.5, 2.567]), 0), [0, 2, 3])
    close(mx.round(np.array([2.567, -1.234], np.float32), decimals=2), [2.57, -1.23])


def test_device_fixture_sets_the_default_device(device):
    assert mx.default_device() == device
    assert mx.add(mx.ones(2), 1).tolist() == [2.0, 2.0]


def test_where_clip_isclose(device, rng):
    x = rng.standard_normal((4, 5)).astype(np.float32)
    y = rng.standard_normal((4, 5)).astype(np.float32)
    close(mx.where(x > 0, x, y), np.where(x > 0, x, y))
    close(mx.where(mx.array(x).T > 0, 1.0, 0.0), np.where(x.T > 0, 1.0, 0.0))
    # A mask broadcast over leading axes against dense values and a constant
    # (attention's causal mask), for elements of 1, 2, 4 and 8 bytes.
    mask = np.tril(np.ones((6, 6), dtype=bool))
    scores = rng.standard_normal((2, 3, 6, 6))
    for dt in (mx.int8, mx.float16, mx.float32, mx.int64):
        s = mx.array(scores * 10).astype(dt)
        low = mx.array(-7).astype(dt)
        want = np.where(mask, np.array(s), np.array(low))
        np.testing.assert_array_equal(np.array(mx.where(mx.array(mask), s, low)), want)
        np.testing.assert_array_equal(np.array(mx.where(~mx.array(mask), -7, s).astype(dt)),
                                      want)
    close(mx.clip(x, -0.5, 0.5), np.clip(x, -0.5, 0.5))
    close(mx.clip(x, None, 0.5), np.minimum(x, 0.5))
    close(mx.clip(x, -0.5, None), np.maximum(x, -0.5))
    close(mx.isclose(x, x + 1e-7), np.isclose(x, x + 1e-7))
    assert mx.allclose(x, x + 1e-9).item()
    assert not mx.allclose(x, x + 1).item()
    assert mx.array_equal(x, x).item()
    assert not mx.array_equal(x, x[:2]).item()
    nan = np.array([np.nan, 1.0])
    assert mx.array_equal(nan, nan, equal_nan=True).item()
    q, r = mx.divmod(np.array([7.0, -7.0]), np.array([2.0, 2.0]))
    close(q, [3, -4])
    close(r, [1, 1])


REDUCTIONS = {
    "sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min, "mean": np.mean,
    "all": np.all, "any": np.any,
    "logsumexp": lambda x, axis=None, keepdims=False: np.log(np.sum(np.exp(x), axis=axis, keepdims=keepdims)),
}


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
@pytest.mark.parametrize("axis", [None, 0, 1, (0, 2), -1])
@pytest.mark.parametrize("keepdims", [False, True])
def test_reductions_against_numpy(name, axis, keepdims, device, rng):
    x = rng.uniform(0.5, 1.5, (3, 4, 5)).astype(np.float32)
    if name in ("all", "any"):
        x = x > 1.0
    ref = REDUCTIONS[name]
    a = mx.array(x)
    close(getattr(mx, name)(a, axis=axis, keepdims=keepdims), ref(x, axis=axis, keepdims=keepdims), rtol=1e-4)
    close(getattr(a.transpose(2, 0, 1), name)(axis, keepdims),
          ref(x.transpose(2, 0, 1), axis=axis, keepdims=keepdims), rtol=1e-4)


@pytest.mark.parametrize("name", ["var", "std"])
def test_moments_against_numpy(name, device, rng):
    x = rng.standard_normal((4, 6)).astype(np.float32)
    for a, xv in views(x):
        for axis in (None, 0, -1):
            for ddof in (0, 1):
                close(getattr(mx, name)(a, axis=axis, ddof=ddof), getattr(np, name)(xv, axis=axis, ddof=ddof), rtol=1e-4)


def test_arg_reductions_and_friends(device, rng):
    x = rng.standard_normal((4, 6)).astype(np.float32)
    for a, xv in views(x):
        close(mx.argmax(a), np.argmax(xv))
        close(mx.argmin(a, axis=0), np.argmin(xv, axis=0))
        close(mx.argmax(a, axis=1, keepdims=True), np.argmax(xv, axis=1)[:, None])
        assert mx.argmax(a).dtype == mx.uint32
        close(mx.count_nonzero(a > 0), np.count_nonzero(xv > 0))
        close(mx.count_nonzero(a > 0, axis=0), np.count_nonzero(xv > 0, axis=0))
        e = np.exp(xv - xv.max(axis=-1, keepdims=True))
        close(mx.softmax(a, axis=-1), e / e.sum(axis=-1, keepdims=True), rtol=1e-5)
        close(mx.trace(a), np.trace(xv), rtol=1e-5)
        close(mx.trace(a, offset=1), np.trace(xv, offset=1), rtol=1e-5)
    assert mx.sum(mx.array([1, 2], dtype=mx.int8)).dtype == mx.int32
    assert mx.mean(mx.array([1, 2])).dtype == mx.float32


def test_creation_against_numpy(device):
    close(mx.arange(5), np.arange(5))
    assert mx.arange(5).dtype == mx.int32 and mx.arange(5.0).dtype == mx.float32
    close(mx.arange(1, 10, 3), np.arange(1, 10, 3))
    close(mx.arange(0, 1, 0.25), np.arange(0, 1, 0.25))
    close(mx.arange(10, 0, -2), np.arange(10, 0, -2))
    assert mx.arange(3, dtype=mx.float16).dtype == mx.float16
    close(mx.linspace(0, 1, 5), np.linspace(0, 1, 5))
    close(mx.linspace(0, 1, 4, endpoint=False), np.linspace(0, 1, 4, endpoint=False))
    assert mx.zeros((2, 3)).dtype == mx.float32 and mx.zeros(3).shape == (3,)
    close(mx.ones([2, 2], dtype=mx.int8), np.ones((2, 2)))
    close(mx.full((2, 3), 7), np.full((2, 3), 7))
    assert mx.full((2,), 7).dtype == mx.int32 and mx.full((2,), 1.5).dtype == mx.float32
    close(mx.full((2, 3), mx.array([1, 2, 3])), np.broadcast_to([1, 2, 3], (2, 3)))
    a = mx.array([[1, 2], [3, 4]], dtype=mx.int16)
    assert mx.zeros_like(a).dtype == mx.int16 and mx.ones_like(a, dtype=mx.float32).dtype == mx.float32
    close(mx.full_like(a, 9), np.full((2, 2), 9))
    close(mx.eye(3), np.eye(3))
    close(mx.eye(3, 4, k=1), np.eye(3, 4, k=1))
    close(mx.identity(2), np.identity(2))
    close(mx.tri(3, 4, k=-1), np.tri(3, 4, k=-1))
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    close(mx.tril(x), np.tril(x))
    close(mx.triu(x, k=1), np.triu(x, k=1))
    close(mx.tril(mx.array(x).T, -1), np.tril(x.T, -1))
    gx, gy = mx.meshgrid(mx.arange(3), mx.arange(2))
    rx, ry = np.meshgrid(np.arange(3), np.arange(2))
    close(gx, rx)
    close(gy, ry)
    gi = mx.meshgrid(mx.arange(3), mx.arange(2), indexing="ij")
    close(gi[0], np.meshgrid(np.arange(3), np.arange(2), indexing="ij")[0])


def test_shape_ops_against_numpy(device, rng):
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    for a, xv in views(x):
        close(mx.reshape(a, (4, -1)), xv.reshape(4, -1))
        close(mx.flatten(a, 1), xv.reshape(xv.shape[0], -1))
        close(mx.expand_dims(a, (0, 2)), np.expand_dims(xv, (0, 2)))
        close(mx.transpose(a), xv.transpose())
        close(mx.transpose(a, [1, 2, 0]), xv.transpose(1, 2, 0))
        close(mx.permute_dims(a, (2, 0, 1)), np.permute_dims(xv, (2, 0, 1)) if hasattr(np, "permute_dims") else xv.transpose(2, 0, 1))
        close(mx.swapaxes(a, 0, -1), np.swapaxes(xv, 0, -1))
        close(mx.moveaxis(a, -1, 0), np.moveaxis(xv, -1, 0))
        close(mx.flip(a), np.flip(xv))
        close(mx.flip(a, axis=1), np.flip(xv, axis=1))
        close(mx.roll(a, 2), np.roll(xv, 2))
        close(mx.roll(a, 1, axis=1), np.roll(xv, 1, axis=1))
        close(mx.roll(a, (1, -1), axis=(0, 2)), np.roll(xv, (1, -1), axis=(0, 2)))
        close(mx.repeat(a, 2, axis=1), np.repeat(xv, 2, axis=1))
        close(mx.repeat(a, 2), np.repeat(xv, 2))
        close(mx.tile(a, (1, 2, 1)), np.tile(xv, (1, 2, 1)))
        close(mx.tile(a, 2), np.tile(xv, 2))
        close(mx.pad(a, 1), np.pad(xv, 1))
        close(mx.pad(a, ((0, 1), (2, 0), (1, 1)), constant_values=3.0),
              np.pad(xv, ((0, 1), (2, 0), (1, 1)), constant_values=3.0))
        close(mx.pad(a, (1, 2), mode="edge"), np.pad(xv, (1, 2), mode="edge"))
        close(mx.concatenate([a, a], axis=1), np.concatenate([xv, xv], axis=1))
        close(mx.concatenate([a, a], axis=None), np.concatenate([xv, xv], axis=None))
        close(mx.concat([a, a]), np.concatenate([xv, xv]))
        close(mx.stack([a, a], axis=-1), np.stack([xv, xv], axis=-1))
        for got, ref in zip(mx.split(a, [1, 2], axis=-1), np.split(xv, [1, 2], axis=-1)):
            close(got, ref)
        for got, ref in zip(mx.unstack(a, axis=1), [xv[:, i] for i in range(xv.shape[1])]):
            close(got, ref)
        close(mx.diagonal(a, 0, 1, 2), np.diagonal(xv, 0, 1, 2))
        close(mx.broadcast_to(a[:1], (3,) + a.shape[1:]), np.broadcast_to(xv[:1], (3,) + xv.shape[1:]))
        close(mx.contiguous(a), xv)
        close(mx.copy(a), xv)
    close(mx.squeeze(mx.zeros((1, 2, 1))), np.zeros(2))
    close(mx.unflatten(mx.arange(6), 0, (2, -1)), np.arange(6).reshape(2, 3))
    assert mx.atleast_1d(mx.array(1)).shape == (1,)
    assert mx.atleast_2d(mx.array([1])).shape == (1, 1)
    assert mx.atleast_3d(mx.array([[1]])).shape == (1, 1, 1)
    assert [t.shape for t in mx.atleast_2d(mx.array(1), mx.array([1, 2]))] == [(1, 1), (1, 2)]
    b = mx.broadcast_arrays(mx.zeros((2, 1)), mx.zeros((3,)))
    assert [t.shape for t in b] == [(2, 3), (2, 3)]
    assert mx.broadcast_shapes((2, 1), (3,), (1, 1, 1)) == (1, 2, 3)
    close(mx.diag(mx.array([1, 2])), np.diag([1, 2]))
    v = mx.view(mx.array([1.0], dtype=mx.float32), mx.uint32)
    assert v.item() == np.array([1.0], np.float32).view(np.uint32)[0]
    close(mx.astype(mx.array([1.7, -1.7]), mx.int32), [1, -1])
    s = mx.as_strided(mx.arange(6), (2, 2), (1, 2), 1)
    close(s, np.lib.stride_tricks.as_strided(np.arange(6)[1:], (2, 2), (8, 16)))
    d = mx.slice(mx.arange(10), mx.array([3]), [0], [4])
    close(d, np.arange(3, 7))
    u = mx.slice_update(mx.zeros(5), mx.ones(2), mx.array([1]), [0])
    close(u, [0, 1, 1, 0, 0])


def test_linalg_against_numpy(device, rng):
    x = rng.standard_normal((3, 4)).astype(np.float32)
    y = rng.standard_normal((4, 5)).astype(np.float32)
    c = rng.standard_normal((3, 5)).astype(np.float32)
    close(mx.matmul(x, y), x @ y, rtol=1e-4)
    close(mx.matmul(mx.array(x.T).T, y), x @ y, rtol=1e-4)
    b = rng.standard_normal((2, 3, 4)).astype(np.float32)
    close(mx.matmul(b, y), b @ y, rtol=1e-4)
    close(mx.addmm(c, x, y, alpha=2.0, beta=0.5), 2 * (x @ y) + 0.5 * c, rtol=1e-4)
    v = rng.standard_normal(4).astype(np.float32)
    close(mx.inner(v, v), np.inner(v, v), rtol=1e-4)
    close(mx.outer(v, v[:3]), np.outer(v, v[:3]), rtol=1e-5)
    close(mx.tensordot(x, y, axes=1), np.tensordot(x, y, axes=1), rtol=1e-4)
    close(mx.tensordot(b, x, axes=([1, 2], [0, 1])), np.tensordot(b, x, axes=([1, 2], [0, 1])), rtol=1e-4)
    with pytest.raises(ValueError):
        mx.matmul(mx.array([[1, 2]]), mx.array([[1], [2]]))


@pytest.mark.parametrize("npdtype", [np.int8, np.uint8, np.int16, np.uint32, np.int32, np.int64,
                                     np.float16, np.float32, np.float64])
def test_ops_on_every_dtype(npdtype, device, rng):
    x = rng.integers(0, 10, (3, 4)).astype(npdtype)
    y = rng.integers(1, 10, (3, 4)).astype(npdtype)
    a, b = mx.array(x), mx.array(y)
    for f, ref in [(mx.add, np.add), (mx.multiply, np.multiply), (mx.maximum, np.maximum),
                   (mx.minimum, np.minimum), (mx.subtract, np.subtract)]:
        got = f(a.T, b.T)
        assert np.array(got).dtype == ref(x, y).dtype
        np.testing.assert_array_equal(np.array(got), ref(x.T, y.T))
    np.testing.assert_array_equal(np.array(mx.max(a, axis=0)), x.max(axis=0))
    np.testing.assert_allclose(np.array(mx.sum(a[::2], axis=1)), x[::2].sum(axis=1), rtol=1e-3)
    np.testing.assert_array_equal(np.array(mx.abs(a)), np.abs(x))
    np.testing.assert_array_equal(np.array(mx.equal(a, b)), x == y)


# ---- behaviour of MLX 0.32.4 (the values below are what it gives) ----------


def test_integer_floor_divide_floors(device):
    a = mx.array([-7, 7, -8, 7, -128], mx.int32)
    b = mx.array([2, -2, 3, 2, -1], mx.int32)
    close(a // b, np.floor_divide(np.array(a), np.array(b)))
    assert (mx.array(-7) // 2).item() == -4
    q, r = mx.divmod(mx.array([-7, 7, -8]), mx.array([2, -2, 3]))
    assert np.array(q).tolist() == [-4, -4, -3] and np.array(r).tolist() == [1, -1, 1]
    assert np.array(mx.array([-7, 7], mx.int8) // mx.array([2, -2], mx.int8)).tolist() == [-4, -4]


def test_squares_and_float32_cubes_are_correctly_rounded(device):
    # power multiplies for these exponents (docs/differences.md): the square is
    # one rounding of the exact product, the float32 cube rounds the float64 cube.
    a = np.random.default_rng(3).standard_normal(4096).astype(np.float32)
    a[:4] = [0.0, -0.0, np.inf, -np.inf]
    x = mx.array(a)
    np.testing.assert_array_equal(np.array(x ** 2), a * a)
    np.testing.assert_array_equal(np.array(mx.power(x, mx.array(3.0))),
                                  (a.astype(np.float64) ** 3).astype(np.float32))
    assert np.signbit(np.array(x ** 3)[1])  # (-0) ** 3 is -0
    # The same bits from a compiled (fused) program.
    np.testing.assert_array_equal(np.array(mx.compile(lambda t: t ** 3)(x)),
                                  (a.astype(np.float64) ** 3).astype(np.float32))
    d = a.astype(np.float64)
    np.testing.assert_array_equal(np.array(mx.array(d) ** 2), d * d)
    np.testing.assert_allclose(np.array(mx.array(d) ** 3), d ** 3, rtol=1e-15)
    np.testing.assert_allclose(np.array(x ** 2.5)[4:], np.abs(a[4:]) ** 2.5 * np.where(
        a[4:] < 0, np.nan, 1), rtol=1e-6)


def test_integer_power_of_a_negative_exponent_is_zero(device):
    a = mx.array([2, 3, -2, 0, 1, -1], mx.int32)
    b = mx.array([10, 3, 3, 0, -1, -3], mx.int32)
    assert np.array(mx.power(a, b)).tolist() == [1024, 27, -8, 1, 0, 0]
    assert np.array(mx.power(mx.array([3], mx.uint8), mx.array([7], mx.uint8))).tolist() == [139]


def test_linspace_rounds_as_mlx(device):
    # (1 - t) * start + t * stop in float32 with t = i / (num - 1).
    for start, stop, num in [(-3.3, 11.7, 13), (0.1, 0.9, 50), (1e-3, 7.77, 33)]:
        t = np.arange(num, dtype=np.float32) / np.float32(num - 1)
        want = (np.float32(1) - t) * np.float32(start) + t * np.float32(stop)
        np.testing.assert_array_equal(np.array(mx.linspace(start, stop, num)), want)
    # float64 computes in float64; integers truncate the float32 values.
    t = np.arange(50.0) / 49
    np.testing.assert_array_equal(np.array(mx.linspace(0.1, 0.9, 50, dtype=mx.float64)),
                                  (1 - t) * 0.1 + t * 0.9)
    assert np.array(mx.linspace(-2.5, 7.5, 7, dtype=mx.int32)).tolist() == [-2, 0, 0, 2, 4, 5, 7]
    assert mx.linspace(-3.3, 11.7, 13)[1].item() == np.float32(-2.0500001907348633)


def test_complex_inputs_of_isposinf_logaddexp_logcumsumexp_std_var(device):
    inf = np.inf
    z = mx.array([complex(inf, 1), complex(inf, 0), complex(-inf, 0), complex(1, inf)])
    assert np.array(mx.isposinf(z)).tolist() == [False, True, False, False]
    assert np.array(mx.isneginf(z)).tolist() == [False, False, True, False]
    a = np.array([1 + 1j, 2 + 0j, -1 - 3j], np.complex64)
    b = np.array([2 + 0j, 1j, 0.5 + 0.5j], np.complex64)
    got = mx.logaddexp(mx.array(a), mx.array(b))
    assert got.dtype == mx.complex64
    close(got, np.log(np.exp(a.astype(np.complex128)) + np.exp(b)), rtol=1e-5)
    close(got[0], 2.21357 + 0.2527114j, rtol=1e-5)  # MLX's value
    cum = np.log(np.cumsum(np.exp(a.astype(np.complex128))))
    close(mx.logcumsumexp(mx.array(a)), cum, rtol=1e-5)
    close(mx.logcumsumexp(mx.array(a), reverse=True),
          np.log(np.cumsum(np.exp(a[::-1].astype(np.complex128))))[::-1], rtol=1e-5)
    x = np.array([[1 + 1j, 2], [3 - 1j, 5j]], np.complex64)
    s = mx.std(mx.array(x), axis=0)
    assert s.dtype == mx.float32
    close(s, np.std(x, axis=0), rtol=1e-6)  # MLX: [1.41421, 2.69258]
    v = mx.var(mx.array([1 + 1j, 3 - 1j]), ddof=1)
    assert v.dtype == mx.float32 and v.item() == 4.0


def test_fftfreq_refuses_a_zero_spacing():
    for f in (mx.fft.fftfreq, mx.fft.rfftfreq):
        with pytest.raises(ValueError, match="d must be non-zero"):
            f(4, 0.0)


def test_median_against_numpy(device, rng):
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    for axis in (None, 0, 1, (0, 2), -1):
        for keepdims in (False, True):
            close(mx.median(mx.array(x), axis=axis, keepdims=keepdims),
                  np.median(x, axis=axis, keepdims=keepdims), rtol=1e-6)
    close(mx.median(mx.array(x).transpose(2, 0, 1), axis=1), np.median(x.transpose(2, 0, 1), axis=1))
    m = mx.median(mx.array([1, 2, 4, 8]))
    assert m.dtype == mx.float32 and m.item() == 3.0
    assert mx.median(mx.array([3.0, 1.0, 2.0, 4.0], mx.bfloat16)).dtype == mx.bfloat16
    assert np.isnan(mx.median(mx.array([3.0, np.nan, 1.0])).item())
    with pytest.raises(ValueError, match="median"):
        mx.median(mx.zeros((0,)))


def test_median_gradient_is_that_of_the_middle_elements():
    g = mx.grad(lambda x: mx.median(x))(mx.array([3.0, 1.0, 2.0, 4.0]))
    assert np.array(g).tolist() == [0.5, 0.0, 0.5, 0.0]
    g = mx.grad(lambda x: mx.median(x))(mx.array([3.0, 1.0, 2.0]))
    assert np.array(g).tolist() == [0.0, 0.0, 1.0]


def test_minmax_matrix_transpose_and_aliases(device):
    lo, hi = mx.minmax(mx.array([[3, 1], [2, 7]]), axis=0)
    assert np.array(lo).tolist() == [2, 1] and np.array(hi).tolist() == [3, 7]
    a = mx.arange(6).reshape(1, 2, 3)
    close(mx.matrix_transpose(a), np.swapaxes(np.arange(6).reshape(1, 2, 3), -1, -2))
    close(a.mT, np.swapaxes(np.arange(6).reshape(1, 2, 3), -1, -2))
    with pytest.raises(ValueError, match="matrix_transpose"):
        mx.matrix_transpose(mx.arange(3))
    assert mx.empty((2, 3)).shape == (2, 3) and mx.empty((2,), mx.int32).dtype == mx.int32
    e = mx.empty_like(mx.array([1, 2], mx.int8))
    assert e.dtype == mx.int8 and e.shape == (2,)
    close(mx.cumulative_sum(mx.array([[1, 2], [3, 4]])), [1, 3, 6, 10])
    close(mx.cumulative_prod(mx.array([1.0, 2.0, 3.0]), reverse=True), [6.0, 6.0, 3.0])
    close(mx.matrix_norm(mx.array([[1.0, 2.0], [3.0, 4.0]])), np.sqrt(30.0), rtol=1e-6)


def test_get_array_buffer_size_counts_each_buffer_once():
    a = mx.ones((3,))
    b = mx.ones((10,))
    mx.eval(a, b)
    n = mx.get_array_buffer_size(a, [b, a], {"x": a, "y": 1})
    assert n >= 13 * 4 and n == mx.get_array_buffer_size(a) + mx.get_array_buffer_size(b)
    with pytest.raises(ValueError, match="evaluated"):
        mx.get_array_buffer_size(mx.ones((2,)) + 1)


@pytest.mark.parametrize("mode", ["reflect", "symmetric"])
def test_pad_reflect_and_symmetric_against_numpy(mode, device):
    x = np.arange(1, 5, dtype=np.int32)
    for w in (2, 5, (0, 3), (7, 1)):
        close(mx.pad(mx.array(x), w, mode=mode), np.pad(x, w, mode=mode))
    y = np.arange(6, dtype=np.float32).reshape(2, 3)
    close(mx.pad(mx.array(y), ((1, 1), (2, 2)), mode=mode), np.pad(y, ((1, 1), (2, 2)), mode=mode))
    # MLX's value for [1, 2, 3] padded by 5.
    want = {"reflect": [2, 1, 2, 3, 2, 1, 2, 3, 2, 1, 2, 3, 2],
            "symmetric": [2, 3, 3, 2, 1, 1, 2, 3, 3, 2, 1, 1, 2]}[mode]
    assert np.array(mx.pad(mx.array([1, 2, 3]), 5, mode=mode)).tolist() == want
    g = mx.grad(lambda a: (mx.pad(a, 2, mode=mode) * mx.arange(1.0, 9.0)).sum())(mx.array(x, mx.float32))
    # Each source element collects the weights of the positions that copy it.
    idx = np.pad(np.arange(4), 2, mode=mode)
    close(g, np.bincount(idx, weights=np.arange(1.0, 9.0), minlength=4))
    with pytest.raises(ValueError, match="wrap"):
        mx.pad(mx.array(x), 1, mode="wrap")


def test_unique_against_mlx_values(device):
    # MLX 0.32.4's results.
    v, i, inv, c = mx.unique(mx.array([5, 3, 5, 9]), 6, True, True, True)
    assert np.array(v).tolist() == [3, 5, 9, 3, 3, 3] and v.dtype == mx.int32
    assert np.array(i).tolist() == [1, 0, 3, 1, 1, 1] and i.dtype == mx.uint32
    assert np.array(inv).tolist() == [1, 0, 1, 2] and inv.dtype == mx.uint32
    assert np.array(c).tolist() == [1, 2, 1, 0, 0, 0] and c.dtype == mx.int32
    v, i, inv, c = mx.unique(mx.array([5, 3, 5, 9, 7, 7]), 2, True, True, True)
    assert np.array(v).tolist() == [3, 5] and np.array(i).tolist() == [1, 0]
    assert np.array(inv).tolist() == [1, 0, 1, 1, 1, 1] and np.array(c).tolist() == [1, 2]
    v, i, inv, c = mx.unique(mx.array([[2.0, 1], [2, 4]]), 4, True, True, True, fill_value=-1)
    assert np.array(v).tolist() == [1, 2, 4, -1] and np.array(inv).tolist() == [[1, 0], [1, 2]]
    assert np.array(mx.unique(mx.array([2, 1, 2, 3, 1]), 5)).tolist() == [1, 2, 3, 1, 1]
    x = np.random.default_rng(0).integers(0, 20, (7, 9))
    vals, idx, inv, cnt = np.unique(x, return_index=True, return_inverse=True, return_counts=True)
    got = mx.unique(mx.array(x), len(vals), True, True, True)
    for g, w in zip(got, (vals, idx, inv.reshape(x.shape), cnt)):
        np.testing.assert_array_equal(np.array(g), w)
    with pytest.raises(ValueError, match="unique"):
        mx.unique(mx.array([1]), -1)


def test_shape_entries_out_of_range_raise_overflow_error():
    with pytest.raises(OverflowError, match="zeros"):
        mx.zeros((2**40, 2))
    with pytest.raises(OverflowError):
        mx.ones(2**62)
