"""The array class: construction, properties, operators, weak scalars, protocols,
NumPy / DLPack round trips and pickling."""
import copy
import pickle

import numpy as np
import pytest

import tessera.core as mx

# Every test on each device present (conftest's device fixture).
pytestmark = pytest.mark.usefixtures("device")


def test_construction_from_scalars_and_lists():
    assert mx.array(True).dtype == mx.bool_
    assert mx.array(3).dtype == mx.int32
    assert mx.array(2**40).dtype == mx.int64
    assert mx.array(1.5).dtype == mx.float32
    assert mx.array(1 + 2j).dtype == mx.complex64
    a = mx.array([[1, 2, 3], [4, 5, 6]])
    assert a.shape == (2, 3) and a.dtype == mx.int32 and a.ndim == 2 and a.size == 6
    assert a.itemsize == 4 and a.nbytes == 24
    assert a.tolist() == [[1, 2, 3], [4, 5, 6]]
    assert mx.array([1, 2.5]).dtype == mx.float32
    assert mx.array([True, 2]).dtype == mx.int32
    assert mx.array([1, 2j]).dtype == mx.complex64
    assert mx.array([1, 2**40]).dtype == mx.int64
    e = mx.array([])
    assert e.shape == (0,) and e.dtype == mx.float32
    assert mx.array([1.5, 2.5], dtype=mx.int32).tolist() == [1, 2]
    assert mx.array(0.1, dtype=mx.float64).item() == 0.1


def test_construction_from_arrays_and_numpy():
    x = mx.array([1.0, 2.0])
    s = mx.array([x, x * 2])
    assert s.shape == (2, 2) and s.tolist() == [[1, 2], [2, 4]]
    n = np.arange(12, dtype=np.float64).reshape(3, 4)
    a = mx.array(n)
    assert a.dtype == mx.float64 and a.shape == (3, 4)
    np.testing.assert_array_equal(np.array(a), n)
    # A strided NumPy view is copied element by element.
    v = mx.array(n[::2, ::-3])
    np.testing.assert_array_equal(np.array(v), n[::2, ::-3])
    assert mx.array(mx.array([1, 2]), dtype=mx.float32).dtype == mx.float32


def test_ragged_list_raises():
    with pytest.raises(ValueError):
        mx.array([[1, 2], [3]])
    with pytest.raises(ValueError):
        mx.array([1, [2]])


@pytest.mark.parametrize("dtype,npdtype", [
    (mx.bool_, np.bool_), (mx.uint8, np.uint8), (mx.uint16, np.uint16), (mx.uint32, np.uint32),
    (mx.uint64, np.uint64), (mx.int8, np.int8), (mx.int16, np.int16), (mx.int32, np.int32),
    (mx.int64, np.int64), (mx.float16, np.float16), (mx.float32, np.float32),
    (mx.float64, np.float64), (mx.complex64, np.complex64)])
def test_numpy_round_trip_every_dtype(dtype, npdtype, rng):
    n = (rng.standard_normal((3, 5)) * 10).astype(npdtype)
    a = mx.array(n)
    assert a.dtype == dtype
    for out in (np.array(a), np.asarray(memoryview(a)) if dtype != mx.bool_ else np.array(a),
                np.from_dlpack(a), a.__array__()):
        assert out.dtype == npdtype
        np.testing.assert_array_equal(out, n)
    np.testing.assert_array_equal(np.array(mx.from_dlpack(n)), n)
    np.testing.assert_array_equal(np.array(pickle.loads(pickle.dumps(a))), n)


def test_numpy_views_of_views(rng):
    n = rng.standard_normal((4, 6)).astype(np.float32)
    a = mx.array(n)
    for view, ref in [(a.T, n.T), (a[::2, 1::2], n[::2, 1::2]), (a[::-1], n[::-1]),
                      (mx.broadcast_to(a[0], (3, 6)), np.broadcast_to(n[0], (3, 6)))]:
        np.testing.assert_array_equal(np.array(view), ref)
        np.testing.assert_array_equal(np.from_dlpack(view) if view.ndim else view, ref)
        np.testing.assert_array_equal(np.asarray(memoryview(view)), ref)


def test_numpy_export_shares_memory():
    a = mx.arange(6, dtype=mx.float32)
    mx.eval(a)
    n1 = np.array(a, copy=False) if np.__version__ < "2" else np.asarray(a)
    n2 = np.asarray(a)
    assert n1.ctypes.data == n2.ctypes.data
    assert np.from_dlpack(a).ctypes.data == n2.ctypes.data


def test_bfloat16_round_trips():
    a = mx.array([1.5, -2.25, 3.0], dtype=mx.bfloat16)
    b = pickle.loads(pickle.dumps(a))
    assert b.dtype == mx.bfloat16 and b.tolist() == [1.5, -2.25, 3.0]
    np.testing.assert_array_equal(np.array(a), np.array([1.5, -2.25, 3.0], np.float32))


def test_item_tolist_and_conversions():
    assert mx.array(3).item() == 3 and isinstance(mx.array(3).item(), int)
    assert mx.array(True).item() is True
    assert isinstance(mx.array(1.5, dtype=mx.float16).item(), float)
    assert mx.array(1 + 2j).item() == 1 + 2j
    assert mx.array(7).tolist() == 7
    assert mx.zeros((2, 0)).tolist() == [[], []]
    assert int(mx.array(4)) == 4 and float(mx.array(2.5)) == 2.5 and bool(mx.array(1))
    assert complex(mx.array(1j)) == 1j
    assert f"{mx.array(2.5):.2f}" == "2.50"
    with pytest.raises(ValueError):
        mx.array([1, 2]).item()
    assert len(mx.zeros((3, 2))) == 3
    with pytest.raises(TypeError):
        len(mx.array(1))
    rows = [r.tolist() for r in mx.array([[1, 2], [3, 4]])]
    assert rows == [[1, 2], [3, 4]]
    assert "dtype=int32" in repr(mx.array([1, 2]))
    a = mx.array([1, 2])
    assert copy.copy(a).tolist() == [1, 2] and copy.deepcopy(a).tolist() == [1, 2]


BINARY = [
    ("+", np.add), ("-", np.subtract), ("*", np.multiply), ("/", np.divide),
    ("//", np.floor_divide), ("%", np.remainder), ("**", np.power),
    ("<", np.less), ("<=", np.less_equal), (">", np.greater), (">=", np.greater_equal),
    ("==", np.equal), ("!=", np.not_equal),
]


@pytest.mark.parametrize("op,ref", BINARY)
def test_operators_against_numpy(op, ref, rng):
    x = rng.uniform(0.5, 3, (3, 4)).astype(np.float32)
    y = rng.uniform(0.5, 3, (4,)).astype(np.float32)
    a, b = mx.array(x), mx.array(y)
    f = eval(f"lambda p, q: p {op} q")
    np.testing.assert_allclose(np.array(f(a, b)), ref(x, y), rtol=1e-5)
    np.testing.assert_allclose(np.array(f(a, 2.0)), ref(x, np.float32(2.0)), rtol=1e-5)
    np.testing.assert_allclose(np.array(f(2.0, a)), ref(np.float32(2.0), x), rtol=1e-5)
    # On a transposed view.
    np.testing.assert_allclose(np.array(f(a.T, b[:3])), ref(x.T, y[:3]), rtol=1e-5)


def test_operators_on_other_operands_and_subclasses():
    # Arrays and Python scalars take a direct path; everything else goes through
    # the bound methods, with the same results and errors.
    a = mx.array([1.0, 2.0])
    assert (a + [10, 20]).tolist() == [11.0, 22.0]
    assert (a - np.float32(1)).tolist() == [0.0, 1.0]
    assert (7 - a).tolist() == [6.0, 5.0] and (a * True).tolist() == [1.0, 2.0]
    with pytest.raises(ValueError, match=r"\[add\].*cannot be broadcast"):
        a + mx.array([1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match=r"cannot convert an object of type str"):
        a + "x"
    with pytest.raises(TypeError):
        a + None

    class Plain(mx.array):
        pass

    class Reflected(mx.array):
        def __radd__(self, other):
            return "reflected"

    p = Plain([1.0, 2.0])
    assert (p + a).tolist() == [2.0, 4.0] and (a * p).tolist() == [1.0, 4.0]
    assert (3.0 / p).tolist() == [3.0, 1.5] and (p // 2).tolist() == [0.0, 1.0]
    # A subclass that overrides the reflected method is asked first.
    assert a + Reflected([1.0]) == "reflected"


def test_integer_and_bitwise_operators(rng):
    x = rng.integers(-20, 20, (3, 4)).astype(np.int32)
    y = rng.integers(1, 5, (3, 4)).astype(np.int32)
    a, b = mx.array(x), mx.array(y)
    # Integer floor_divide floors, as NumPy's and MLX's do.
    np.testing.assert_array_equal(np.array(a // b), x // y)
    np.testing.assert_array_equal(np.array(a % b), x % y)
    np.testing.assert_array_equal(np.array(a & b), x & y)
    np.testing.assert_array_equal(np.array(a | b), x | y)
    np.testing.assert_array_equal(np.array(a ^ b), x ^ y)
    np.testing.assert_array_equal(np.array(a << 2), x << 2)
    np.testing.assert_array_equal(np.array(a >> 1), x >> 1)
    np.testing.assert_array_equal(np.array(~a), ~x)
    np.testing.assert_array_equal(np.array(-a), -x)
    np.testing.assert_array_equal(np.array(abs(a)), np.abs(x))
    q, r = divmod(a, b)
    np.testing.assert_array_equal(np.array(q), x // y)
    np.testing.assert_array_equal(np.array(r), x % y)
    assert (~mx.array([True, False])).tolist() == [False, True]
    with pytest.raises(ValueError):
        mx.array([1.5]) & 1
    with pytest.raises(ValueError):
        ~mx.array([1.5])
    with pytest.raises(ValueError):
        -mx.array([True])


def test_matmul_operator(rng):
    x = rng.standard_normal((3, 4)).astype(np.float32)
    y = rng.standard_normal((4, 2)).astype(np.float32)
    np.testing.assert_allclose(np.array(mx.array(x) @ mx.array(y)), x @ y, rtol=1e-5)
    a = mx.array(x)
    a @= mx.array(y)
    assert a.shape == (3, 2)
    with pytest.raises(ValueError):
        mx.array(x) @ 2.0


def test_inplace_operators_rebind_the_same_object():
    a = mx.array([1, 2, 3])
    alias = a
    derived = a + 0
    a += 1
    assert alias is a and alias.tolist() == [2, 3, 4]
    assert derived.tolist() == [1, 2, 3]
    a *= 2
    a -= 1
    a //= 2
    a %= 3
    a **= 2
    assert a.dtype == mx.int32
    a += 1.5
    assert a.dtype == mx.float32
    i = mx.array([1, 2])
    with pytest.raises(ValueError):
        i /= 2
    f = mx.array([1.0, 2.0])
    f /= 2
    assert f.tolist() == [0.5, 1.0]
    b = mx.array([3, 5])
    b &= 1
    b |= 2
    b ^= 1
    b <<= 1
    b >>= 1
    assert b.tolist() == [(((3 & 1) | 2) ^ 1), (((5 & 1) | 2) ^ 1)]


@pytest.mark.parametrize("dtype,scalar,expected", [
    (mx.int8, 3, mx.int8), (mx.uint8, 3, mx.uint8), (mx.float16, 2.0, mx.float16),
    (mx.bfloat16, 2.0, mx.bfloat16), (mx.int32, 1.5, mx.float32), (mx.bool_, 1, mx.int32),
    (mx.bool_, True, mx.bool_), (mx.int16, True, mx.int16), (mx.float64, 1.5, mx.float64),
    (mx.int64, 2**40, mx.int64), (mx.float32, 1j, mx.complex64), (mx.uint32, 1.0, mx.float32),
])
def test_weak_scalar_promotion(dtype, scalar, expected):
    a = mx.array([1, 0], dtype=dtype)
    assert (a + scalar).dtype == expected
    assert (scalar + a).dtype == expected
    assert mx.multiply(a, scalar).dtype == expected
    assert mx.maximum(scalar, a).dtype == expected


def test_weak_scalar_overflow_and_two_scalars():
    with pytest.raises(ValueError):
        mx.array([1], dtype=mx.int8) + 300
    with pytest.raises(ValueError):
        mx.array([1], dtype=mx.uint8) + (-1)
    assert mx.add(1, 2).dtype == mx.int32
    assert mx.add(1, 2.0).dtype == mx.float32
    assert mx.add(True, False).dtype == mx.bool_
    assert mx.add(2**40, 1).dtype == mx.int64


def test_comparison_with_other_objects():
    a = mx.array([1, 2])
    assert (a == "x") is False
    assert (a != None) is True  # noqa: E711
    with pytest.raises(ValueError):
        a < "x"
    with pytest.raises(ValueError):
        a + "x"


def test_properties_and_methods(rng):
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    a = mx.array(x)
    np.testing.assert_array_equal(np.array(a.T), x.T)
    np.testing.assert_array_equal(np.array(a.reshape(6, 4)), x.reshape(6, 4))
    np.testing.assert_array_equal(np.array(a.reshape((4, 6))), x.reshape(4, 6))
    np.testing.assert_array_equal(np.array(a.transpose(2, 0, 1)), x.transpose(2, 0, 1))
    np.testing.assert_array_equal(np.array(a.transpose([1, 0, 2])), x.transpose(1, 0, 2))
    np.testing.assert_array_equal(np.array(a.transpose()), x.transpose())
    np.testing.assert_array_equal(np.array(a.flatten()), x.flatten())
    np.testing.assert_array_equal(np.array(a.swapaxes(0, 2)), x.swapaxes(0, 2))
    np.testing.assert_array_equal(np.array(a.moveaxis(0, 2)), np.moveaxis(x, 0, 2))
    np.testing.assert_allclose(np.array(a.sum(axis=1)), x.sum(axis=1), rtol=1e-5)
    np.testing.assert_allclose(np.array(a.mean(axis=(0, 2), keepdims=True)),
                               x.mean(axis=(0, 2), keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(np.array(a.var(ddof=1)), x.var(ddof=1), rtol=1e-4)
    np.testing.assert_array_equal(np.array(a.argmax(axis=2)), x.argmax(axis=2))
    np.testing.assert_array_equal(np.array(a.argmin()), x.argmin())
    np.testing.assert_allclose(np.array(a.exp()), np.exp(x), rtol=1e-5)
    np.testing.assert_allclose(np.array(a.abs().sqrt()), np.sqrt(np.abs(x)), rtol=1e-5)
    np.testing.assert_array_equal(np.array(a.round(1)), np.round(x, 1))
    np.testing.assert_array_equal(np.array(a.astype(mx.int32)), x.astype(np.int32))
    parts = a.split(2, axis=2)
    assert [p.shape for p in parts] == [(2, 3, 2), (2, 3, 2)]
    m = mx.array(x[0])
    np.testing.assert_array_equal(np.array(m.diagonal()), np.diagonal(x[0]))
    np.testing.assert_array_equal(np.array(m.diag(1)), np.diag(x[0], 1))
    c = mx.array([1 + 2j])
    assert c.real.tolist() == [1.0] and c.imag.tolist() == [2.0] and c.conj().tolist() == [1 - 2j]
    assert a.view(mx.int32).dtype == mx.int32
    assert a.squeeze().shape == (2, 3, 4)
    assert mx.zeros((1, 3, 1)).squeeze(0).shape == (3, 1)


def test_array_namespace_and_weakref():
    import weakref

    a = mx.array([1])
    assert a.__array_namespace__() is mx
    assert weakref.ref(a)() is a
    assert a.__dlpack_device__() == (1, 0)


class DLPackOnly:
    """A producer with nothing but the DLPack protocol."""

    def __init__(self, x):
        self.x = x

    def __dlpack__(self, **kwargs):
        return self.x.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.x.__dlpack_device__()


def test_dlpack_round_trips(rng):
    n = rng.standard_normal((3, 4)).astype(np.float32)
    a = mx.from_dlpack(DLPackOnly(n[:, ::2]))
    np.testing.assert_array_equal(np.array(a), n[:, ::2])
    b = mx.from_dlpack(mx.array(n).T)  # tessera to tessera
    np.testing.assert_array_equal(np.array(b), n.T)
    c = mx.array(DLPackOnly(n))
    np.testing.assert_array_equal(np.array(c), n)
    np.testing.assert_array_equal(np.from_dlpack(DLPackOnly(mx.array(n)[1:, ::-1])), n[1:, ::-1])
    with pytest.raises(ValueError):
        mx.from_dlpack([1, 2])
    with pytest.raises(ValueError):
        mx.asarray([1.0, 2.0], copy=False)  # a copy is unavoidable
    shared = mx.asarray(n, copy=False)  # shares NumPy's memory
    assert np.from_dlpack(shared).ctypes.data == n.ctypes.data
    assert mx.asarray(n, copy=True).shape == (3, 4)
    assert mx.asarray([1, 2], dtype=mx.int8).dtype == mx.int8


def test_reprlib_shows_arrays_as_instances():
    # reprlib took a class named `array` for array.array (bool() of the whole array).
    import array
    import reprlib

    assert reprlib.repr(mx.ones((3, 6))).startswith("array([[1, 1")  # the repr, shortened
    assert reprlib.repr(array.array("i", [1, 2])) == "array('i', [1, 2])"


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "int64"])
def test_scalar_operand_chains_match_numpy(device, dtype):
    # Python scalars become cached constants (more distinct values than the
    # cache holds), on both sides of the operators and through the module
    # functions; every intermediate result matches NumPy's in the same dtype.
    t, nt = getattr(mx, dtype), np.dtype(dtype)
    start = np.arange(1, 9).astype(nt)
    x, ref = mx.array(start), start.copy()
    if dtype.startswith("float"):
        for k in range(100):
            c = nt.type(k * 0.25)
            x = mx.minimum(x * 0.5 + k * 0.25, 50.0)
            ref = np.minimum(ref * nt.type(0.5) + c, nt.type(50.0))
            if k % 10 == 9:
                x, ref = 1.0 - x / 4.0, nt.type(1.0) - ref / nt.type(4.0)
    else:
        for k in range(100):
            x = (x * 3 + k) % 97 - k // 3
            ref = (ref * nt.type(3) + nt.type(k)) % nt.type(97) - nt.type(k // 3)
            if k % 10 == 9:
                x, ref = mx.maximum(2 - x, True), np.maximum(nt.type(2) - ref, nt.type(1))
    assert x.dtype == t
    tol = 2e-3 if dtype == "float16" else 1e-6
    np.testing.assert_allclose(np.array(x).astype(np.float64), ref.astype(np.float64), rtol=tol)
    # Mixed: an integer array with a float scalar becomes float32 (the weak
    # scalar rule), a bool array with an int scalar int32.
    i = mx.array(np.arange(5, dtype=np.int32))
    f = i * 0.5 + 1
    assert f.dtype == mx.float32
    np.testing.assert_array_equal(np.array(f), np.arange(5, dtype=np.float32) * 0.5 + 1)
    b = mx.array([True, False]) + 3
    assert b.dtype == mx.int32
    assert b.tolist() == [4, 3]
    # The constants were not changed by the ops that read them.
    assert (mx.array(0.0) + 0.5).item() == 0.5 and (mx.array(0) + 3).item() == 3


def test_kv_cache_slice_update_writes_in_place(device, rng):
    # A preallocated key cache updated step by step, as a decoder does: each
    # update writes into the cache's buffer (its last handle donates it), so
    # memory does not grow by a cache per step.
    B, H, T, D, L = 1, 4, 512, 128, 4
    ref = np.zeros((B, H, T, D), np.float32)
    cache = mx.array(ref)
    steps = [rng.standard_normal((B, H, L, D)).astype(np.float32) for _ in range(T // L)]
    # The first step gives the cache its buffer on the device that runs it.
    cache[..., 0:L, :] = mx.array(steps[0])
    ref[..., 0:L, :] = steps[0]
    mx.eval(cache)
    base = mx.get_active_memory()
    mx.reset_peak_memory()
    for n, k in enumerate(steps[1:], start=1):
        off = n * L
        cache[..., off:off + L, :] = mx.array(k)
        ref[..., off:off + L, :] = k
        mx.eval(cache)
    grown = mx.get_peak_memory() - base
    assert grown < cache.nbytes // 2, (grown, cache.nbytes)
    np.testing.assert_array_equal(np.array(cache), ref)


def test_iteration_walks_the_first_axis():
    x = np.arange(24, dtype=np.float32).reshape(4, 3, 2)
    a = mx.array(x)
    it = iter(a)
    assert isinstance(it, mx.ArrayIterator) and iter(it) is it
    rows = list(it)
    assert len(rows) == 4
    for row, expected in zip(rows, x):
        np.testing.assert_array_equal(np.array(row), expected)
    np.testing.assert_array_equal(np.array(list(mx.ArrayIterator(a))[2]), x[2])
    with pytest.raises(TypeError):
        iter(mx.array(1.0))
    # The iterator holds the array: the rows outlive the name.
    it = iter(mx.array(x))
    next(it)
    np.testing.assert_array_equal(np.array(next(it)), x[1])


def test_names_that_annotations_and_modules_use():
    import itertools

    import tessera.optimizers as optim
    import tessera.utils as utils
    from tessera.nn import Module

    assert isinstance(mx.ArrayLike, type)
    assert optim.Module is Module
    assert utils.zip_longest is itertools.zip_longest
