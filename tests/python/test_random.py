"""tessera.core.random: the values MLX 0.32.4 gives for fixed keys (the same
values tests/cpp/test_random.cpp pins), the global key after seed, and the
distributions' moments and ranges on large samples."""
import numpy as np
import pytest

import tessera.core as mx

K0, K42, KB = 0, 42, 0x123456789ABCDEF0


def key(seed):
    return mx.random.key(seed)


def close(got, want, atol):
    np.testing.assert_allclose(np.array(got).astype(np.float64), want, rtol=0, atol=atol)


def test_key_and_split_match_mlx(device):
    k = key(KB)
    assert k.dtype == mx.uint32 and k.shape == (2,)
    assert np.array(k).tolist() == [0x12345678, 0x9ABCDEF0]
    assert np.array(key(42)).tolist() == [0, 42]
    s = mx.random.split(key(KB), 3)
    assert s.shape == (3, 2)
    assert np.array(s).ravel().tolist() == [0x2D7CCF79, 0x5E5BB7DE, 0x72E48AD1, 0xA683F6A8,
                                            0x8064D3DB, 0xC5B142D5]
    assert np.array(mx.random.split(key(K0))).tolist() == [[4146024105, 967050713],
                                                           [2718843009, 1272950319]]
    assert mx.random.split(key(0), num=0).shape == (0, 2)


def test_bits_match_mlx(device):
    assert np.array(mx.random.bits((5,), key=key(K0))).tolist() == [
        0x9312778B, 0x19850714, 0x64A626EC, 0xE4E8DFBE, 0x98B89669]
    assert np.array(mx.random.bits([2, 3], key=key(K42))).ravel().tolist() == [
        0xBAD56946, 0xDE837C89, 0xDF4F11DF, 0x354BA891, 0x2FC69B62, 0x8CDB9797]
    b = mx.random.bits((5,), 2, key(K0))
    assert b.dtype == mx.uint16
    assert np.array(b).tolist() == [0x4EA9, 0xF71F, 0xFB2C, 0x508E, 0x4081]
    assert np.array(mx.random.bits((7,), width=1, key=key(K42))).tolist() == [
        0x2D, 0xB3, 0xD7, 0x03, 0xF4, 0x83, 0xD0]


def test_samplers_match_mlx(device):
    close(mx.random.uniform(shape=(5,), key=key(K0)),
          [0.574500561, 0.0996860936, 0.393160284, 0.894178391, 0.596566558], 1e-7)
    close(mx.random.uniform(-2.0, 3.0, (4,), key=key(K42)),
          [0.870722055, 2.28318787, -1.70269406, -1.68822193], 1e-6)
    h = mx.random.uniform(shape=(4,), dtype=mx.float16, key=key(KB))
    assert h.dtype == mx.float16
    close(h, [0.379638672, 0.940429688, 0.657714844, 0.437011719], 1e-8)
    close(mx.random.normal((5,), key=key(K0)),
          [0.187844157, -1.28334212, -0.271091551, 1.24905992, 0.244470015], 2e-6)
    close(mx.random.normal((4,), loc=1.5, scale=2.0, key=key(KB)),
          [0.887051105, 4.61542225, 2.31363702, 1.18272889], 4e-6)
    assert np.array(mx.random.randint(-5, 7, (6,), key=key(K0))).tolist() == [1, -4, 3, 5, 2, 0]
    assert np.array(mx.random.randint(-5, 7, [6], mx.int32, key(K42))).tolist() == [3, 5, 5, -3, -3, 1]
    assert np.array(mx.random.bernoulli(0.3, (8,), key(K42))).astype(int).tolist() == [0, 0, 1, 1, 0, 1, 1, 1]
    assert np.array(mx.random.bernoulli(0.3, (8,), key=key(KB))).astype(int).tolist() == [0, 0, 0, 1, 0, 0, 1, 1]
    close(mx.random.truncated_normal(-1.0, 2.0, (4,), key=key(K0)),
          [1.63392067, -0.404372931, 0.458909094, -0.250056416], 2e-6)
    close(mx.random.gumbel((4,), key=key(K42)), [0.589013696, 1.86600649, -1.03759873, -1.02061534], 2e-6)
    close(mx.random.laplace((4,), key=key(KB)), [0.275432825, -2.12609935, -0.37959075, 0.134725213], 2e-6)


def test_categorical_and_permutation_match_mlx(device):
    logits = mx.array([0.1, 1.0, -0.5, 2.0])
    assert np.array(mx.random.categorical(logits.reshape(2, 2), key=key(K0))).tolist() == [0, 1]
    assert np.array(mx.random.categorical(logits, shape=(6,), key=key(K42))).tolist() == [3, 3, 3, 1, 1, 3]
    assert np.array(mx.random.categorical(logits, -1, (6,), key=key(KB))).tolist() == [1, 2, 3, 3, 3, 3]
    assert np.array(mx.random.categorical(logits, num_samples=5, key=key(K42))).tolist() == [3, 3, 1, 1, 1]
    l2 = mx.array([[0.1, 1.0, -0.5, 2.0], [0.3, 0.2, 0.1, 0.0]])
    by_column = mx.random.categorical(l2, axis=0, num_samples=3, key=key(K42))
    assert by_column.shape == (4, 3)
    assert np.array(by_column).ravel().tolist() == [0, 0, 0, 1, 0, 1, 1, 0, 0, 0, 0, 0]
    with pytest.raises(ValueError):
        mx.random.categorical(l2, shape=(2,), num_samples=3)
    assert np.array(mx.random.permutation(8, key=key(K0))).tolist() == [4, 6, 1, 2, 0, 7, 3, 5]
    assert np.array(mx.random.permutation(8, key=key(KB))).tolist() == [7, 3, 6, 1, 2, 5, 0, 4]
    close(mx.random.multivariate_normal(mx.zeros((2,)), mx.eye(2), (3,), key=key(K0)),
          np.array([0.187844157, -1.28334212, 0.649418294, 1.24905992, 0.24447001,
                    -0.117449418]).reshape(3, 2), 2e-6)


def test_categorical_of_one_distribution_matches_mlx(device):
    # Logits of one row, as mlx-lm samples (1, vocab): MLX 0.32.4 draws them by
    # the inverse CDF whenever the result has a shape, whatever the axes of size
    # 1 (values from MLX 0.32.4's CPU build); 1-D logits into () by Gumbel-max.
    row = mx.array([[0.5, -1.0, 2.0, 0.0, 1.0, -0.5, 0.25, 1.5]])
    got = [np.array(mx.random.categorical(row, key=mx.random.key(s))).tolist() for s in range(8)]
    assert got == [[2], [2], [2], [7], [2], [4], [3], [7]]
    got = [int(mx.random.categorical(row[0], key=mx.random.key(s)).item()) for s in range(8)]
    assert got == [5, 3, 6, 2, 0, 4, 2, 5]
    one = mx.array([[0.1, 2.0, 0.3]])
    assert np.array(mx.random.categorical(one, num_samples=5, key=mx.random.key(8))).tolist() == \
        [[1, 1, 1, 2, 1]]
    column = one.reshape(1, 3, 1)
    assert np.array(mx.random.categorical(column, axis=1, num_samples=5,
                                          key=mx.random.key(8))).tolist() == [[[1, 1, 1, 2, 1]]]
    assert np.array(mx.random.categorical(column, axis=1, key=mx.random.key(8))).tolist() == [[2]]


def test_global_key_after_seed_matches_mlx(device):
    mx.random.seed(7)
    close(mx.random.uniform(shape=(3,)), [0.0777458325, 0.174454302, 0.83264631], 1e-7)
    close(mx.random.uniform(shape=(3,)), [0.584717035, 0.436813712, 0.706478179], 1e-7)
    mx.random.seed(7)
    close(mx.random.uniform(shape=(3,)), [0.0777458325, 0.174454302, 0.83264631], 1e-7)


def test_same_key_same_numbers_and_global_key_advances(device):
    k = key(3)
    a = np.array(mx.random.normal((10,), key=k))
    np.testing.assert_array_equal(a, np.array(mx.random.normal((10,), key=k)))
    x, y = np.array(mx.random.normal((10,))), np.array(mx.random.normal((10,)))
    assert not np.array_equal(x, y)


N = 200_000


def test_distribution_moments(device):
    k = key(11)
    u = np.array(mx.random.uniform(-1, 3, (N,), key=k)).astype(np.float64)
    assert u.min() >= -1 and u.max() < 3
    assert abs(u.mean() - 1) < 0.02 and abs(u.var() - 16 / 12) < 0.02
    n = np.array(mx.random.normal((N,), loc=2.0, scale=0.5, key=k)).astype(np.float64)
    assert abs(n.mean() - 2) < 0.01 and abs(n.std() - 0.5) < 0.01
    r = np.array(mx.random.randint(0, 10, (N,), key=k))
    assert r.dtype == np.int32 and r.min() == 0 and r.max() == 9
    np.testing.assert_allclose(np.bincount(r) / N, 0.1, atol=0.005)
    b = np.array(mx.random.bernoulli(mx.array([0.2, 0.7]), (N // 2, 2), key=k))
    np.testing.assert_allclose(b.mean(axis=0), [0.2, 0.7], atol=0.01)
    t = np.array(mx.random.truncated_normal(-0.5, 1.0, (N,), key=k))
    assert t.min() > -0.5 and t.max() < 1.0
    g = np.array(mx.random.gumbel((N,), key=k)).astype(np.float64)
    assert abs(g.mean() - np.euler_gamma) < 0.02 and abs(g.var() - np.pi ** 2 / 6) < 0.05
    lp = np.array(mx.random.laplace((N,), loc=1.0, scale=2.0, key=k)).astype(np.float64)
    assert abs(np.median(lp) - 1) < 0.03 and abs(lp.var() - 8) < 0.2
    logits = np.log(np.array([0.1, 0.2, 0.7], dtype=np.float32))
    c = np.array(mx.random.categorical(mx.array(logits), num_samples=N, key=k))
    np.testing.assert_allclose(np.bincount(c, minlength=3) / N, [0.1, 0.2, 0.7], atol=0.01)
    cov = np.array([[2.0, 0.6], [0.6, 1.0]], dtype=np.float32)
    m = np.array(mx.random.multivariate_normal(mx.array([1.0, -1.0]), mx.array(cov), (N,), key=k,
                                               stream=device)).astype(np.float64)
    np.testing.assert_allclose(m.mean(axis=0), [1, -1], atol=0.02)
    np.testing.assert_allclose(np.cov(m.T), cov, atol=0.03)


def test_permutation_of_an_array_and_shapes(device):
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    p = np.array(mx.random.permutation(mx.array(x), key=key(1)))
    np.testing.assert_array_equal(np.sort(p[:, 0]), x[:, 0])
    np.testing.assert_array_equal(p - p[:, :1], x - x[:, :1])  # whole rows move
    q = np.array(mx.random.permutation(mx.array(x).T, axis=1, key=key(1)))
    np.testing.assert_array_equal(np.sort(q, axis=1), x.T)
    assert mx.random.bernoulli(mx.full((2, 3), 0.5)).shape == (2, 3)
    assert mx.random.truncated_normal(mx.zeros((3, 1)), mx.ones((4,))).shape == (3, 4)
    assert mx.random.uniform(mx.zeros((3, 1)), 1, (2, 3, 4)).shape == (2, 3, 4)


def test_errors(device):
    with pytest.raises(ValueError):
        mx.random.uniform(shape=(3,), dtype=mx.int32)
    with pytest.raises(ValueError):
        mx.random.normal((3,), dtype=mx.int32)


def test_normal_is_mlx_numbers_to_the_bit():
    # MLX 0.32.4's float32 values for these keys (its erfinv polynomial).
    want = [-0.8265804648399353, -0.3162474036216736, -0.11543699353933334, 0.8520151972770691,
            0.40538841485977173, 0.921729326248169]
    got = mx.random.normal((6,), key=mx.random.key(3))
    np.testing.assert_array_equal(np.array(got), np.array(want, np.float32))
    # truncated_normal maps its bounds through erf, which MLX approximates
    # (1.5e-7 absolute error) and Tessera does not: its values agree to a few ulp.
    want = [-0.9305711984634399, -0.5432368516921997, -0.5326308608055115, 0.484438955783844,
            -0.48680365085601807, -0.8567453622817993]
    got = mx.random.truncated_normal(-1.0, 2.0, (6,), key=mx.random.key(4))
    np.testing.assert_allclose(np.array(got), np.array(want, np.float32), rtol=1e-6)
    want = [-0.828125, -0.31640625, -0.115234375, 0.8515625, 0.40625, 0.921875]
    got = mx.random.normal((6,), dtype=mx.bfloat16, key=mx.random.key(3))
    np.testing.assert_array_equal(np.array(got.astype(mx.float32)), np.array(want, np.float32))
