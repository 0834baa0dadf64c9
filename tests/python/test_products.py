"""vecdot, diff, gather_mm, segmented_mm, block_masked_mm and hadamard_transform
against NumPy, on random inputs and views."""
import numpy as np
import pytest

import tessera.core as mx


def close(got, ref, rtol=1e-4, atol=1e-4):
    got = np.array(got)
    assert got.shape == np.shape(ref)
    np.testing.assert_allclose(got, ref, rtol=rtol, atol=atol)


@pytest.mark.parametrize("shapes,axis", [(((3, 4), (4,)), -1), (((2, 1, 5), (3, 5)), -1),
                                         (((4, 3), (4, 1)), 0)])
def test_vecdot_matches_numpy(shapes, axis, rng, device):
    a = rng.standard_normal(shapes[0]).astype(np.float32)
    b = rng.standard_normal(shapes[1]).astype(np.float32)
    close(mx.vecdot(mx.array(a), mx.array(b), axis=axis), np.sum(a * b, axis=axis))


def test_vecdot_conjugates_the_first_complex_operand(rng, device):
    a = (rng.standard_normal(4) + 1j * rng.standard_normal(4)).astype(np.complex64)
    b = (rng.standard_normal(4) + 1j * rng.standard_normal(4)).astype(np.complex64)
    close(mx.vecdot(mx.array(a), mx.array(b)), np.vdot(a, b))


def test_vecdot_refuses_scalars_as_mlx_does(device):
    with pytest.raises(ValueError, match=r"\[vecdot\] inputs must have at least 1 dimension, "
                       r"got shapes \(\) and \(3,\)"):
        mx.vecdot(mx.array(2.0), mx.ones((3,)))


@pytest.mark.parametrize("n,axis", [(1, -1), (2, -1), (3, 0), (0, 1), (9, -1)])
def test_diff_matches_numpy(n, axis, rng, device):
    x = rng.standard_normal((4, 6)).astype(np.float32)
    close(mx.diff(mx.array(x), n, axis), np.diff(x, n, axis))
    view = mx.array(x)[::2, ::-1]
    close(mx.diff(view, n=n, axis=axis), np.diff(x[::2, ::-1], n, axis))


def test_diff_of_integers_and_booleans_matches_numpy(device):
    i = np.array([3, 1, 4, 1, 5, 9], np.int16)
    got = mx.diff(mx.array(i), 2)
    assert got.dtype == mx.int16
    np.testing.assert_array_equal(np.array(got), np.diff(i, 2))
    b = np.array([True, False, False, True])
    got = mx.diff(mx.array(b))
    assert got.dtype == mx.bool_
    np.testing.assert_array_equal(np.array(got), np.diff(b))


def test_gather_mm_matches_take_then_matmul(rng, device):
    a = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    b = rng.standard_normal((6, 5, 2)).astype(np.float32)
    li, ri = np.array([[5, 0], [2, 2]]), np.array([1, 4])
    got = mx.gather_mm(mx.array(a), mx.array(b), mx.array(li), mx.array(ri), sorted_indices=False)
    want = a.reshape(6, 4, 5)[li] @ b[ri]
    close(got, want)
    close(mx.gather_mm(mx.array(a), mx.array(b), rhs_indices=mx.array(np.arange(6).reshape(2, 3))),
          a @ b.reshape(2, 3, 5, 2))


def test_segmented_mm_matches_a_loop(rng, device):
    a = rng.standard_normal((3, 10)).astype(np.float32)
    b = rng.standard_normal((10, 4)).astype(np.float32)
    seg = np.array([[0, 4], [4, 10], [3, 3], [1, 9]])
    got = mx.segmented_mm(mx.array(a), mx.array(b), mx.array(seg))
    want = np.stack([a[:, s:e] @ b[s:e] for s, e in seg])
    close(got, want)


@pytest.mark.parametrize("bs", [32, 64])
def test_block_masked_mm_matches_masked_numpy(bs, rng, device):
    M, K, N = 70, 100, 40
    a = rng.standard_normal((2, M, K)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    t = lambda n: -(-n // bs)
    ml = rng.random((2, t(M), t(K))) > 0.3
    mr = rng.random((t(K), t(N))) > 0.3
    mo = rng.random((2, t(M), t(N))) > 0.3
    expand = lambda m, r, c: np.repeat(np.repeat(m, bs, -2), bs, -1)[..., :r, :c]
    want = ((a * expand(ml, M, K)) @ (b * expand(mr, K, N))) * expand(mo, M, N)
    got = mx.block_masked_mm(mx.array(a), mx.array(b), bs, mx.array(mo), mx.array(ml),
                             mx.array(mr))
    close(got, want, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("n", [1, 4, 16, 128])
def test_hadamard_transform_matches_sylvesters_matrix(n, rng, device):
    h = np.array([[1.0]])
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    x = rng.standard_normal((3, n)).astype(np.float32)
    close(mx.hadamard_transform(mx.array(x)), x @ h.T / np.sqrt(n))
    close(mx.hadamard_transform(mx.array(x), scale=0.25), x @ h.T * 0.25)


# What MLX 0.32.4 gives for lengths m * 2^k with m = 28, 20 (k = 1), 12 (k = 1).
HADAMARD_MLX = {
    (28, 0.5): [-42, -39, -36, -33, -30, -27, -24, -28, -23, -32, -27, -22, -31, -26, -35, -30,
                -25, -34, -43, -38, -33, -63, -72, -67, -62, -57, -52, -61],
    (40, 1.0): [-44, 4, -20, 4, 4, 4, 28, 4, 52, 4, -40, 0, -80, 0, -40, 0, 0, 0, -40, 0, 80, 0,
                120, 0, 80, 0, 40, 0, 80, 0, -408, 8, -400, 8, -392, 8, -384, 8, -376, 8],
}


@pytest.mark.parametrize("n, scale", sorted(HADAMARD_MLX))
def test_hadamard_transform_of_m_times_a_power_of_two_matches_mlx(n, scale, device):
    got = mx.hadamard_transform(mx.arange(float(n)).reshape(1, n), scale=scale)
    close(got, [HADAMARD_MLX[(n, scale)]], rtol=1e-6)


@pytest.mark.parametrize("n", [12, 20, 28, 24, 56, 160])
def test_hadamard_transform_of_m_times_a_power_of_two_is_a_hadamard_matrix(n, device):
    h = np.array(mx.hadamard_transform(mx.eye(n), scale=1.0))
    assert set(np.unique(h).tolist()) == {-1.0, 1.0}
    np.testing.assert_array_equal(h @ h.T, n * np.eye(n))
    x = np.random.default_rng(n).standard_normal((2, n)).astype(np.float32)
    close(mx.hadamard_transform(mx.array(x)), x @ h / np.sqrt(n), rtol=1e-4, atol=1e-5)
    g = mx.grad(lambda a: (mx.hadamard_transform(a) * mx.arange(n)).sum())(mx.array(x))
    close(g, np.broadcast_to(h @ np.arange(n) / np.sqrt(n), x.shape), rtol=1e-4, atol=1e-4)


def test_bad_input_is_refused_with_the_op_name(device):
    with pytest.raises(ValueError, match=r"\[hadamard_transform\].*36"):
        mx.hadamard_transform(mx.zeros((2, 36)))
    with pytest.raises(ValueError, match=r"\[block_masked_mm\] block_size"):
        mx.block_masked_mm(mx.zeros((4, 4)), mx.zeros((4, 4)), 16)
    with pytest.raises(ValueError, match=r"\[gather_mm\] lhs_indices"):
        mx.gather_mm(mx.zeros((2, 3, 3)), mx.zeros((3, 3)), mx.array([0.5]))
    with pytest.raises(ValueError, match=r"\[segmented_mm\] segments"):
        mx.segmented_mm(mx.zeros((2, 3)), mx.zeros((3, 2)), mx.array([0, 1, 2]))
    with pytest.raises(ValueError, match=r"\[diff\]"):
        mx.diff(mx.zeros((2, 3)), -1)
    with pytest.raises(TypeError):
        mx.vecdot(a=mx.zeros(3), b=mx.zeros(3))  # positional-only
