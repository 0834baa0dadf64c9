"""NumPy-style indexing against NumPy: generated index expressions (hypothesis)
for reading and writing, .at[] updates, masks, and the error kinds."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import tessera.core as mx

SHAPES = st.lists(st.integers(0, 5), min_size=1, max_size=4).map(tuple)


def slices(n):
    bound = st.one_of(st.none(), st.integers(-n - 2, n + 2))
    step = st.one_of(st.none(), st.integers(-3, 3).filter(lambda s: s != 0))
    return st.builds(slice, bound, bound, step)


@st.composite
def int_arrays(draw, n):
    """A NumPy int32 index array for an axis of size n: 0-d, 1-D or a column
    (k, 1), distinct positions, some counted from the end."""
    form = draw(st.sampled_from(["0d", "1d", "column"]))
    k = 1 if form == "0d" else draw(st.integers(0, min(n, 3)))
    pos = draw(st.permutations(range(n)))[:k] if n else []
    vals = [p - n if draw(st.booleans()) else p for p in pos]
    if form == "0d":
        return np.array(vals[0], dtype=np.int32)
    out = np.array(vals, dtype=np.int32)
    return out.reshape(-1, 1) if form == "column" else out


@st.composite
def axis_entry(draw, n, empty):
    """An int, slice, integer array or (not on empty arrays) mask for an axis of size n."""
    kinds = ["slice"] + (["int", "array"] if n else []) + ([] if empty else ["mask"])
    kind = draw(st.sampled_from(kinds))
    if kind == "int":
        return draw(st.integers(-n, n - 1))
    if kind == "array":
        return draw(int_arrays(n))
    if kind == "mask":
        return np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
    return draw(slices(n))


@st.composite
def index_expressions(draw, shape, advanced=False):
    """A tuple of ints, slices, None and at most one Ellipsis valid for shape;
    with advanced=True also NumPy integer arrays and 1-D boolean masks."""
    kinds = ["stop", "int", "slice", "none", "ellipsis"] + (["array", "mask"] if advanced else [])
    entries = []
    axis = 0
    used_ellipsis = False
    while True:
        kind = draw(st.sampled_from(kinds))
        if kind == "stop":
            break
        if kind == "none":
            entries.append(None)
        elif kind == "ellipsis" and advanced:
            # Entries after the Ellipsis index the trailing axes.
            entries.append(Ellipsis)
            t = draw(st.integers(0, len(shape) - axis))
            for n in shape[len(shape) - t:]:
                entries.append(draw(axis_entry(n, 0 in shape)))
            break
        elif kind == "ellipsis":
            if used_ellipsis:
                continue
            used_ellipsis = True
            entries.append(Ellipsis)
        elif axis < len(shape):
            n = shape[axis]
            if kind == "int":
                if n == 0:
                    continue
                entries.append(draw(st.integers(-n, n - 1)))
            elif kind == "array":
                if n == 0:
                    continue
                entries.append(draw(int_arrays(n)))
            elif kind == "mask":
                if 0 in shape:
                    continue  # NumPy's checks of masks on empty arrays are irregular
                entries.append(np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool))
            else:
                entries.append(draw(slices(n)))
            axis += 1
        if len(entries) > 6:
            break
    if used_ellipsis:
        # Ellipsis stands for the axes no other entry took.
        real = sum(1 for e in entries if e is not None and e is not Ellipsis)
        if real > len(shape):
            entries = [e for e in entries if e is not Ellipsis]
    if len(entries) == 1 and draw(st.booleans()):
        return entries[0]
    return tuple(entries)


@st.composite
def array_and_index(draw, advanced=False):
    shape = draw(SHAPES)
    return shape, draw(index_expressions(shape, advanced))


def to_mx_index(idx):
    """The same index with NumPy arrays (ndim > 0 or bool) as tessera arrays."""
    conv = lambda e: mx.array(e) if isinstance(e, np.ndarray) else e
    return tuple(conv(e) for e in idx) if isinstance(idx, tuple) else conv(idx)


@settings(max_examples=400, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(array_and_index(), st.sampled_from(["plain", "transposed", "strided"]))
def test_getitem_matches_numpy(device, case, layout):
    check_getitem(case, layout)


@settings(max_examples=400, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(array_and_index(advanced=True), st.sampled_from(["plain", "transposed", "strided"]))
def test_getitem_with_arrays_and_masks_matches_numpy(device, case, layout):
    check_getitem(case, layout)


def check_getitem(case, layout):
    shape, idx = case
    if layout == "transposed":
        x = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape[::-1])
        x, a = x.T, mx.array(x).T
    else:
        x = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)
        a = mx.array(x)
    if layout == "strided":
        x, a = x[..., ::-1], a[..., ::-1]
    try:
        expected = x[idx]
    except IndexError:
        # An int past a size-0 axis (the generator places ints before an
        # Ellipsis by position): both must refuse it.
        with pytest.raises((IndexError, ValueError)):
            a[to_mx_index(idx)]
        return
    got = a[to_mx_index(idx)]
    assert got.shape == expected.shape
    np.testing.assert_array_equal(np.array(got), expected)


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(array_and_index(), st.booleans())
def test_setitem_matches_numpy(device, case, scalar):
    check_setitem(case, scalar)


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(array_and_index(advanced=True), st.booleans())
def test_setitem_with_arrays_and_masks_matches_numpy(device, case, scalar):
    check_setitem(case, scalar)


def check_setitem(case, scalar):
    shape, idx = case
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    a = mx.array(x)
    try:
        target = x[idx]
    except IndexError:
        with pytest.raises((IndexError, ValueError)):
            a[to_mx_index(idx)] = 1.0
        return
    value = np.float32(-7.5) if scalar else (np.arange(target.size, dtype=np.float32).reshape(target.shape) + 100)
    x[idx] = value
    a[to_mx_index(idx)] = value if scalar else mx.array(value)
    np.testing.assert_array_equal(np.array(a), x)


def test_setitem_broadcast_and_cast(device):
    a = mx.zeros((3, 4), dtype=mx.int32)
    a[1] = mx.array([1.9, 2.9, 3.9, 4.9])
    assert a.dtype == mx.int32 and a.tolist()[1] == [1, 2, 3, 4]
    a[:, 1:3] = 9
    a[...] = a + 1
    b = mx.zeros((2, 3))
    b[0:1] = mx.ones((1, 1, 3))  # extra leading size-1 dims are dropped
    assert b.tolist() == [[1, 1, 1], [0, 0, 0]]
    np.testing.assert_array_equal(np.array(a)[:, 1:3], 10)


def test_setitem_boolean_mask(device):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    a = mx.array(x)
    a[a > 2] = 0
    x[x > 2] = 0
    np.testing.assert_array_equal(np.array(a), x)
    m = mx.array([True, False])
    a[m] = 5
    x[np.array([True, False])] = 5
    np.testing.assert_array_equal(np.array(a), x)
    a[True] = 1
    assert np.array(a).tolist() == [[1, 1, 1], [1, 1, 1]]
    with pytest.raises(ValueError):
        a[mx.array([True, False, True])] = 1


def test_at_updates(device):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    a = mx.array(x)
    np.testing.assert_array_equal(np.array(a.at[1].add(10)), x + np.array([[0], [10], [0]]))
    np.testing.assert_array_equal(np.array(a.at[:, ::2].multiply(2)),
                                  np.where(np.arange(4) % 2 == 0, x * 2, x))
    r = a.at[0, 1:3].subtract(1.0)
    assert r.tolist()[0] == [0, 0, 1, 3]
    assert a.at[2].maximum(100).tolist()[2] == [100] * 4
    assert a.at[2].minimum(9).tolist()[2] == [8, 9, 9, 9]
    assert a.at[1].divide(2).tolist()[1] == [2, 2.5, 3, 3.5]
    np.testing.assert_array_equal(np.array(a), x)  # a itself is untouched
    with pytest.raises(ValueError):
        a.at.add(1)


def test_index_errors(device):
    a = mx.zeros((2, 3))
    with pytest.raises(IndexError):
        a[2]
    with pytest.raises(IndexError):
        a[0, -4]
    with pytest.raises(ValueError):
        a[0, 0, 0]
    with pytest.raises(ValueError):
        a[..., ...]
    with pytest.raises(ValueError):
        mx.array(1)[0]
    with pytest.raises(ValueError):
        a[mx.array([0.5])]
    with pytest.raises(ValueError):
        a[mx.array([0, 1]), mx.array([0, 1, 2])]
    with pytest.raises(ValueError):
        a[[0], [0], [0]]
    with pytest.raises(ValueError):
        a["x"]
    assert mx.array(3)[()].item() == 3
    assert mx.array(3)[...].item() == 3
    assert a[np.int64(1)].shape == (3,)


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_take_matches_numpy(axis, rng, device):
    x = rng.standard_normal((4, 5)).astype(np.float32)
    idx = rng.integers(-3, 3, size=(2, 3)).astype(np.int32)
    for a, ref in [(mx.array(x), x), (mx.array(x.T.copy()).T, x), (mx.array(x)[::-1, ::2], x[::-1, ::2])]:
        np.testing.assert_array_equal(np.array(mx.take(a, mx.array(idx), axis=axis)),
                                      np.take(ref, idx, axis=axis))
        np.testing.assert_array_equal(np.array(mx.take(a, 2, axis)), np.take(ref, 2, axis=axis))
    np.testing.assert_array_equal(np.array(mx.take(mx.array(x), [0, 3, 3])), np.take(x, [0, 3, 3]))


@pytest.mark.parametrize("axis", [None, 0, 1])
def test_take_along_and_put_along_axis(axis, rng, device):
    x = rng.standard_normal((4, 5)).astype(np.float32)
    shape = (12,) if axis is None else ((3, 5) if axis == 0 else (4, 2))
    hi = x.size if axis is None else x.shape[axis]
    idx = rng.integers(0, hi, size=shape).astype(np.int32)
    for a, ref in [(mx.array(x), x), (mx.array(x.T.copy()).T, x)]:
        np.testing.assert_array_equal(np.array(mx.take_along_axis(a, mx.array(idx), axis=axis)),
                                      np.take_along_axis(ref, idx, axis=axis))
    # Distinct positions per line, so the result does not depend on the write order.
    if axis is None:
        pidx = rng.permutation(x.size)[:7].astype(np.int32)
    else:
        n = x.shape[axis]
        pidx = np.argsort(rng.random(x.shape), axis=axis)[(slice(None),) * axis + (slice(0, 2),)]
        pidx = pidx.astype(np.int32)
    values = rng.standard_normal(pidx.shape).astype(np.float32)
    want = x.copy()
    np.put_along_axis(want, pidx, values, axis=axis)
    got = mx.put_along_axis(mx.array(x), mx.array(pidx), mx.array(values), axis=axis)
    np.testing.assert_array_equal(np.array(got), want)
    want = x.copy()
    np.put_along_axis(want, pidx, 3.0, axis=axis)
    np.testing.assert_array_equal(np.array(mx.put_along_axis(mx.array(x), mx.array(pidx), 3.0, axis)), want)


def test_take_errors(device):
    with pytest.raises(IndexError, match=r"\[take\] axis 2"):
        mx.take(mx.zeros((3,)), mx.array([0]), axis=2)
    with pytest.raises(ValueError):
        mx.take(mx.zeros((3,)), mx.array([0.5]))


def test_at_with_integer_arrays_accumulates(rng, device):
    x = rng.standard_normal((4, 3)).astype(np.float32)
    idx = np.array([0, 2, 0, 0], dtype=np.int32)
    v = rng.uniform(0.5, 2, size=(4, 3)).astype(np.float32)
    a = mx.array(x)
    want = x.copy()
    np.add.at(want, idx, v)
    np.testing.assert_allclose(np.array(a.at[mx.array(idx)].add(mx.array(v))), want, rtol=1e-6)
    want = x.copy()
    np.subtract.at(want, idx, v)
    np.testing.assert_allclose(np.array(a.at[mx.array(idx)].subtract(mx.array(v))), want, rtol=1e-6)
    want = x.copy()
    np.multiply.at(want, idx, v)
    np.testing.assert_allclose(np.array(a.at[mx.array(idx)].multiply(mx.array(v))), want, rtol=1e-6)
    want = x.copy()
    np.divide.at(want, idx, v)
    np.testing.assert_allclose(np.array(a.at[mx.array(idx)].divide(mx.array(v))), want, rtol=1e-5)
    want = x.copy()
    np.maximum.at(want, (slice(None), [1, 1, 2]), 0.25)
    np.testing.assert_array_equal(np.array(a.at[:, [1, 1, 2]].maximum(0.25)), want)
    want = x.copy()
    np.minimum.at(want, ([3, 3], 1), -0.5)
    np.testing.assert_array_equal(np.array(a.T.at[1, [3, 3]].minimum(-0.5)), want.T)
    np.testing.assert_array_equal(np.array(a), x)  # a itself is untouched
    counts = mx.zeros((5,), dtype=mx.int32).at[mx.array([1, 1, 4, 1])].add(1)
    assert counts.tolist() == [0, 3, 0, 0, 1]


def test_mask_setitem_one_row_per_true_entry(device):
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    a = mx.array(x)
    mask = np.array([True, False, True, True])
    rows = np.array([[1, 2, 3], [4, 5, 6], [7, 8, 9]], dtype=np.float32)
    a[mx.array(mask)] = mx.array(rows)
    x[mask] = rows
    np.testing.assert_array_equal(np.array(a), x)
    m2 = x > 5
    a[mx.array(m2)] = mx.arange(int(m2.sum())).astype(mx.float32)
    x[m2] = np.arange(m2.sum())
    np.testing.assert_array_equal(np.array(a), x)


def test_getitem_mixed_advanced_placement(rng, device):
    x = rng.standard_normal((3, 4, 5, 6)).astype(np.float32)
    a = mx.array(x)
    i, j = np.array([[0], [2]]), np.array([1, 3, 3])
    for idx in [(i, j), (slice(None), i, j), (i, slice(None), j), (Ellipsis, i, j), (i, 1, j),
                (None, i, None, j), (slice(1, 3), [0, 1], slice(None, None, -2), [5, 0]),
                (x[:, 0, 0, 0] > 0,), (slice(None), x[0, :, :, 0] > 0)]:
        got = a[tuple(mx.array(e) if isinstance(e, np.ndarray) else e for e in idx)]
        np.testing.assert_array_equal(np.array(got), x[idx])
