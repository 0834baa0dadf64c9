"""Scans, sorting and selection against NumPy, on random inputs and on views."""
import numpy as np
import pytest

import tessera.core as mx


def views(x):
    """(tessera array, NumPy reference) pairs: the array itself and views of it."""
    a = mx.array(x)
    out = [(a, x), (a.T, x.T), (a[::2, ::-1], x[::2, ::-1])]
    return out


def close(got, ref, rtol=1e-5, atol=1e-5):
    got = np.array(got)
    assert got.shape == np.shape(ref)
    np.testing.assert_allclose(got, ref, rtol=rtol, atol=atol)


def np_logcumsumexp(x, axis):
    return np.log(np.cumsum(np.exp(x.astype(np.float64)), axis=axis))


SCANS = {
    "cumsum": lambda x, axis: np.cumsum(x, axis=axis),
    "cumprod": lambda x, axis: np.cumprod(x, axis=axis),
    "cummax": lambda x, axis: np.maximum.accumulate(x, axis=axis),
    "cummin": lambda x, axis: np.minimum.accumulate(x, axis=axis),
    "logcumsumexp": np_logcumsumexp,
}


@pytest.mark.parametrize("name", SCANS)
@pytest.mark.parametrize("axis", [0, 1, -1, None])
def test_scan_matches_numpy(name, axis, rng, device):
    x = rng.uniform(0.5, 1.5, size=(5, 6)).astype(np.float32)
    for a, ref in views(x):
        want = SCANS[name](ref.ravel() if axis is None else ref, 0 if axis is None else axis)
        close(getattr(mx, name)(a, axis), want)
        close(getattr(a, name)(axis), want)


@pytest.mark.parametrize("name", SCANS)
def test_scan_reverse_and_exclusive(name, rng, device):
    x = rng.uniform(0.5, 1.5, size=(4, 7)).astype(np.float32)
    f = SCANS[name]
    rev = np.flip(f(np.flip(x, 1), 1), 1)
    close(getattr(mx, name)(mx.array(x), 1, reverse=True), rev)
    # Exclusive: element i excludes input i, so the inclusive scan shifted by one.
    got = np.array(getattr(mx, name)(mx.array(x), axis=1, inclusive=False))
    close(got[:, 1:], f(x, 1)[:, :-1])
    got = np.array(getattr(mx.array(x), name)(1, reverse=True, inclusive=False))
    close(got[:, :-1], rev[:, 1:])


def test_cumsum_dtypes(rng, device):
    x = rng.integers(-5, 5, size=(3, 4)).astype(np.int32)
    got = mx.cumsum(mx.array(x), axis=0, dtype=mx.float32)
    assert got.dtype == mx.float32
    close(got, np.cumsum(x, axis=0).astype(np.float32))
    b = mx.cumsum(mx.array(x > 0), axis=1)
    assert b.dtype == mx.int32
    np.testing.assert_array_equal(np.array(b), np.cumsum(x > 0, axis=1))
    assert mx.cumprod(mx.array(x), dtype=mx.float32).dtype == mx.float32


def test_scan_bad_axis(device):
    with pytest.raises(IndexError, match=r"\[cumsum\] axis 2"):
        mx.cumsum(mx.zeros((2, 3)), axis=2)


@pytest.mark.parametrize("axis", [0, 1, -1, None])
def test_sort_and_argsort(axis, rng, device):
    x = rng.standard_normal((6, 5)).astype(np.float32)
    x[1, 2] = x[3, 2]  # ties: the sort is stable
    for a, ref in views(x):
        np.testing.assert_array_equal(np.array(mx.sort(a, axis)), np.sort(ref, axis=axis))
        i = mx.argsort(a, axis=axis)
        assert i.dtype == mx.uint32
        want = np.argsort(ref, axis=axis, kind="stable")
        np.testing.assert_array_equal(np.array(i), want)


def test_sort_default_axis_and_integers(rng, device):
    x = rng.integers(-100, 100, size=(4, 9)).astype(np.int32)
    np.testing.assert_array_equal(np.array(mx.sort(mx.array(x))), np.sort(x, axis=-1))
    y = np.array([3.0, np.nan, -1.0, 2.0], dtype=np.float32)
    np.testing.assert_array_equal(np.array(mx.sort(mx.array(y))), np.sort(y))


@pytest.mark.parametrize("kth", [0, 2, -1])
@pytest.mark.parametrize("axis", [0, 1, None])
def test_partition_and_argpartition(kth, axis, rng, device):
    x = rng.standard_normal((5, 6)).astype(np.float32)
    for a, ref in views(x):
        flat = ref.ravel() if axis is None else ref
        ax = 0 if axis is None else axis
        n = flat.shape[ax]
        k = kth % n
        p = np.array(mx.partition(a, kth, axis=axis))
        srt = np.sort(flat, axis=ax)
        np.testing.assert_array_equal(np.take(p, k, axis=ax), np.take(srt, k, axis=ax))
        pivot = np.take(srt, [k], axis=ax)
        assert np.all(np.take(p, range(k), axis=ax) <= pivot)
        assert np.all(np.take(p, range(k + 1, n), axis=ax) >= pivot)
        # The same multiset on every line.
        np.testing.assert_array_equal(np.sort(p, axis=ax), srt)
        i = mx.argpartition(a, kth, axis=axis)
        assert i.dtype == mx.uint32
        np.testing.assert_array_equal(np.take_along_axis(flat, np.array(i).astype(np.int64), ax), p)


@pytest.mark.parametrize("axis", [0, -1, None])
def test_topk(axis, rng, device):
    x = rng.standard_normal((6, 7)).astype(np.float32)
    for a, ref in views(x):
        flat = ref.ravel() if axis is None else ref
        ax = 0 if axis is None else axis
        got = np.sort(np.array(mx.topk(a, 3, axis=axis)), axis=ax)
        want = np.take(np.sort(flat, axis=ax), range(flat.shape[ax] - 3, flat.shape[ax]), axis=ax)
        np.testing.assert_array_equal(got, want)


def test_sort_errors(device):
    with pytest.raises(ValueError):
        mx.partition(mx.zeros((3,)), 5)
    with pytest.raises(ValueError):
        mx.topk(mx.zeros((3,)), 4)


@pytest.mark.parametrize("side", ["left", "right"])
def test_searchsorted(side, rng, device):
    seq = np.sort(rng.integers(0, 10, size=12)).astype(np.float32)
    values = rng.uniform(-1, 11, size=(3, 4)).astype(np.float32)
    values[0, :3] = seq[:3]
    got = mx.searchsorted(mx.array(seq), mx.array(values), side=side)
    assert got.dtype == mx.uint32
    np.testing.assert_array_equal(np.array(got), np.searchsorted(seq, values, side=side))
    np.testing.assert_array_equal(np.array(mx.searchsorted(mx.array(seq), mx.array(values).T, side)),
                                  np.searchsorted(seq, values.T, side=side))
