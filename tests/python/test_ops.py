"""Each bound op against NumPy, on random inputs and on views (transposed,
strided, reversed, broadcast)."""
import math

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


UNARY = {
    "abs": (np.abs, (-3, 3)), "negative": (np.negative, (-3, 3)), "sign": (np.sign, (-3, 3)),
    "square": (np.square, (-3, 3)), "sqrt": (np.sqrt, (0.1, 3)), "rsqrt": (lambda x: 1 / np.sqrt(x), (0.1, 3)),
    "reciprocal": (np.reciprocal, (0.5, 3)), "exp": (np.exp, (-3, 3)), "expm1": (np.expm1, (-1, 1)),
    "log": (np.log, (0.1, 3)), "log2": (np.log2, (0.1, 3)), "log10": (np.log10, (0.1, 3)),
    "log1p": (np.log1p, (-0.5, 3)), "sin": (np.sin, (-3, 3)), "cos": (np.cos, (-3, 3)),
    "tan": (np.tan, (-1, 1)), "arcsin": (np.arcsin, (-0.9, 0.9)), "arccos": (np.arccos, (-0.9, 0.9)),
    "arctan": (np.arctan, (-3, 3)), "sinh": (np.sinh, (-2, 2)), "cosh": (np.cosh, (-2, 2)),
    "tanh": (np.tanh, (-3, 3)), "arcsinh": (np.arcsinh, (-3, 3)), "arccosh": (np.arccosh, (1.1, 3)),
    "arctanh": (np.arctanh, (-0.9, 0.9)), "degrees": (np.degrees, (-3, 3)),
    "radians": (np.radians, (-90, 90)), "floor": (np.floor, (-3, 3)), "ceil": (np.ceil, (-3, 3)),
    "trunc": (np.trunc, (-3, 3)), "sigmoid": (lambda x: 1 / (1 + np.exp(-x)), (-3, 3)),
    "erf": (np.vectorize(math.erf), (-2, 2)), "stop_gradient": (lambda x: x, (-3, 3)),
    "positive": (np.positive, (-3, 3)), "isnan": (np.isnan, (-3, 3)), "isinf": (np.isinf, (-3, 3)),
    "isfinite": (np.isfinite, (-3, 3)), "isposinf": (np.isposinf, (-3, 3)),
    "isneginf": (np.isneginf, (-3, 3)), "logical_not": (np.logical_not, (-1, 1)),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_against_numpy(name, rng):
    ref, (lo, hi) = UNARY[name]
    x = rng.uniform(lo, hi, (4, 6)).astype(np.float32)
    for a, xv in views(x):
        close(getattr(mx, name)(a), ref(xv.astype(np.float64)), rtol=2e-5, atol=2e-6)
    # Python scalars and lists are accepted as inputs.
    close(getattr(mx, name)(x.tolist()), ref(x.astype(np.float64)), rtol=2e-5, atol=2e-6)


def test_unary_special_values():
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


BINARY = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide,
    "power": np.power, "maximum": np.maximum, "minimum": np.minimum, "logaddexp": np.logaddexp,
    "arctan2": np.arctan2, "equal": np.equal, "not_equal": np.not_equal, "greater": np.greater,
    "greater_equal": np.greater_equal, "less": np.less, "less_equal": np.less_equal,
    "remainder": np.remainder, "floor_divide": np.floor_divide,
    "logical_and": np.logical_and, "logical_or": np.logical_or, "logical_xor": np.logical_xor,
}


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_against_numpy(name, rng):
    ref = BINARY[name]
    x = rng.uniform(0.5, 2, (4, 6)).astype(np.float32)
    y = rng.uniform(0.5, 2, (6, 4)).astype(np.float32)
    f = getattr(mx, name)
    close(f(x, y.T), ref(x, y.T), rtol=1e-5)
    close(f(mx.array(y).T, mx.array(x)), ref(y.T, x), rtol=1e-5)
    close(f(mx.array(x)[::2], mx.array(x)[0]), ref(x[::2], x[0]), rtol=1e-5)  # broadcast row
    close(f(x, 1.5), ref(x, np.float32(1.5)), rtol=1e-5)
    close(f(1.5, x), ref(np.float32(1.5), x), rtol=1e-5)


@pytest.mark.parametrize("name", ["bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift"])
def test_bitwise_against_numpy(name, rng):
    x = rng.integers(0, 100, (3, 5)).astype(np.int32)
    y = rng.integers(0, 5, (3, 5)).astype(np.int32)
    close(getattr(mx, name)(x, y), getattr(np, name)(x, y))
    close(getattr(mx, name)(mx.array(x).T, mx.array(y).T), getattr(np, name)(x.T, y.T))


def test_where_clip_isclose(rng):
    x = rng.standard_normal((4, 5)).astype(np.float32)
    y = rng.standard_normal((4, 5)).astype(np.float32)
    close(mx.where(x > 0, x, y), np.where(x > 0, x, y))
    close(mx.where(mx.array(x).T > 0, 1.0, 0.0), np.where(x.T > 0, 1.0, 0.0))
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
def test_reductions_against_numpy(name, axis, keepdims, rng):
    x = rng.uniform(0.5, 1.5, (3, 4, 5)).astype(np.float32)
    if name in ("all", "any"):
        x = x > 1.0
    ref = REDUCTIONS[name]
    a = mx.array(x)
    close(getattr(mx, name)(a, axis=axis, keepdims=keepdims), ref(x, axis=axis, keepdims=keepdims), rtol=1e-4)
    close(getattr(a.transpose(2, 0, 1), name)(axis, keepdims),
          ref(x.transpose(2, 0, 1), axis=axis, keepdims=keepdims), rtol=1e-4)


@pytest.mark.parametrize("name", ["var", "std"])
def test_moments_against_numpy(name, rng):
    x = rng.standard_normal((4, 6)).astype(np.float32)
    for a, xv in views(x):
        for axis in (None, 0, -1):
            for ddof in (0, 1):
                close(getattr(mx, name)(a, axis=axis, ddof=ddof), getattr(np, name)(xv, axis=axis, ddof=ddof), rtol=1e-4)


def test_arg_reductions_and_friends(rng):
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


def test_creation_against_numpy():
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


def test_shape_ops_against_numpy(rng):
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


def test_linalg_against_numpy(rng):
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
def test_ops_on_every_dtype(npdtype, rng):
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
