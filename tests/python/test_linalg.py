"""tessera.core.linalg against NumPy, on random inputs and on views."""
import numpy as np
import pytest

import tessera.core as mx

la = mx.linalg


def close(got, ref, rtol=1e-4, atol=1e-4):
    got = np.array(got)
    assert got.shape == np.shape(ref)
    np.testing.assert_allclose(got, ref, rtol=rtol, atol=atol)


def matrices(rng, n=4, batch=()):
    """(tessera array, NumPy) pairs: a well-conditioned matrix and a transposed view."""
    x = (rng.standard_normal(batch + (n, n)) + n * np.eye(n)).astype(np.float32)
    a = mx.array(np.swapaxes(x, -1, -2).copy())
    return [(mx.array(x), x), (mx.swapaxes(a, -1, -2), x)]


def spd(rng, n=4):
    m = rng.standard_normal((n, n))
    return (m @ m.T + n * np.eye(n)).astype(np.float32)


@pytest.mark.parametrize("ord", [None, 1, 2, -1, np.inf, -np.inf, 0, 3.5])
def test_vector_norm(ord, rng, device):
    x = rng.standard_normal((3, 5)).astype(np.float32)
    a = mx.array(x)
    close(la.norm(a, ord, axis=1), np.linalg.norm(x, ord, axis=1))
    close(la.norm(a.T, ord, axis=0, keepdims=True), np.linalg.norm(x.T, ord, axis=0, keepdims=True))
    close(la.norm(a[1], ord), np.linalg.norm(x[1], ord))


@pytest.mark.parametrize("ord", [None, "fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf])
def test_matrix_norm(ord, rng, device):
    x = rng.standard_normal((4, 5)).astype(np.float32)
    close(la.norm(mx.array(x), ord, stream=device), np.linalg.norm(x, ord))
    close(la.norm(mx.array(x).T, ord, axis=(0, 1), stream=device), np.linalg.norm(x.T, ord, axis=(0, 1)))


def test_norm_default_flattens(rng, device):
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    close(la.norm(mx.array(x)), np.linalg.norm(x.ravel()))
    with pytest.raises(ValueError):
        la.norm(mx.array(x), "fro")
    with pytest.raises(TypeError):
        la.norm(mx.array(x), [1])


def test_qr_svd(rng, device):
    for a, x in matrices(rng):
        q, r = la.qr(a, stream=device)
        close(np.array(q) @ np.array(r), x)
        close(np.array(q).T @ np.array(q), np.eye(4))
        assert np.allclose(np.tril(np.array(r), -1), 0)
        u, s, vt = la.svd(a, stream=device)
        close(np.array(u) @ np.diag(np.array(s)) @ np.array(vt), x)
        close(la.svd(a, compute_uv=False, stream=device), np.linalg.svd(x, compute_uv=False))


def test_inverses(rng, device):
    for a, x in matrices(rng, batch=(2,)):
        close(la.inv(a, stream=device), np.linalg.inv(x))
        close(la.pinv(a, stream=device), np.linalg.pinv(x))
        lower = np.tril(x)
        close(la.tri_inv(mx.array(lower), stream=device), np.linalg.inv(lower))
        upper = np.triu(x)
        close(la.tri_inv(mx.array(upper), upper=True, stream=device), np.linalg.inv(upper))


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky(upper, rng, device):
    x = spd(rng)
    c = np.array(la.cholesky(mx.array(x), upper=upper, stream=device))
    want = np.linalg.cholesky(x)
    close(c, want.T if upper else want)
    close(la.cholesky_inv(mx.array(c), upper=upper, stream=device), np.linalg.inv(x))


def test_lu(rng, device):
    for a, x in matrices(rng):
        p, lower, upper = la.lu(a, stream=device)
        p = np.array(p).astype(np.int64)
        close(np.array(lower)[p, :] @ np.array(upper), x)
        lu, piv = la.lu_factor(a, stream=device)
        assert np.array(lu).shape == (4, 4) and np.array(piv).shape == (4,)
        close(np.triu(np.array(lu)), np.array(upper))


def test_solvers(rng, device):
    for a, x in matrices(rng):
        b = rng.standard_normal((4, 2)).astype(np.float32)
        close(la.solve(a, mx.array(b), stream=device), np.linalg.solve(x, b))
        lower = np.tril(x)
        close(la.solve_triangular(mx.array(lower), mx.array(b), stream=device),
              np.linalg.solve(lower, b))
        close(la.solve_triangular(mx.array(lower.T), mx.array(b), upper=True, stream=device),
              np.linalg.solve(lower.T, b))


def test_det_slogdet(rng, device):
    for a, x in matrices(rng, batch=(3,)):
        close(la.det(a, stream=device), np.linalg.det(x), rtol=1e-3)
        sign, logabs = la.slogdet(a, stream=device)
        ws, wl = np.linalg.slogdet(x)
        close(sign, ws)
        close(logabs, wl)


def test_cross(rng, device):
    x = rng.standard_normal((4, 3)).astype(np.float32)
    y = rng.standard_normal((4, 3)).astype(np.float32)
    close(la.cross(mx.array(x), mx.array(y)), np.cross(x, y))
    close(la.cross(mx.array(x).T, mx.array(y).T, axis=0), np.cross(x.T, y.T, axis=0))


def test_eigh_eigvalsh(rng, device):
    x = spd(rng)
    w, v = la.eigh(mx.array(x), stream=device)
    close(w, np.linalg.eigvalsh(x), rtol=1e-3)
    v = np.array(v)
    close(x @ v, v * np.array(w), rtol=1e-3, atol=1e-3)
    close(la.eigvalsh(mx.array(np.tril(x)), UPLO="L", stream=device), np.linalg.eigvalsh(x), rtol=1e-3)
    close(la.eigvalsh(mx.array(np.triu(x)), UPLO="U", stream=device), np.linalg.eigvalsh(x), rtol=1e-3)


def test_eig_eigvals(rng):
    x = rng.standard_normal((4, 4)).astype(np.float32)
    w, v = la.eig(mx.array(x), stream=mx.cpu)
    w, v = np.array(w), np.array(v)
    assert np.iscomplexobj(w)
    np.testing.assert_allclose(x @ v, v * w, rtol=1e-3, atol=1e-3)
    got = np.array(la.eigvals(mx.array(x), stream=mx.cpu))
    want = np.linalg.eigvals(x)
    np.testing.assert_allclose(np.sort_complex(got), np.sort_complex(want), rtol=1e-3, atol=1e-3)


def test_errors(device):
    with pytest.raises(ValueError):
        la.inv(mx.zeros((2, 3)), stream=device)
    with pytest.raises(ValueError):
        la.cross(mx.zeros((4,)), mx.zeros((4,)))


def test_submodules_import_by_name():
    import tessera.core.fft
    import tessera.core.linalg
    import tessera.core.random
    from tessera.core.linalg import norm

    assert tessera.core.linalg is mx.linalg and norm is mx.linalg.norm
    assert tessera.core.fft is mx.fft and tessera.core.random is mx.random
