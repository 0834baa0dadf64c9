"""tessera.core.fft, einsum, einsum_path, kron and the window functions against
NumPy, on random inputs and on views."""
import numpy as np
import pytest

import tessera.core as mx


def close(got, ref, rtol=1e-4, atol=1e-4):
    got = np.array(got)
    assert got.shape == np.shape(ref)
    np.testing.assert_allclose(got, ref, rtol=rtol, atol=atol)


def views(x):
    a = mx.array(x)
    return [(a, x), (a.T, x.T), (a[::2, ::-1], x[::2, ::-1])]


@pytest.mark.parametrize("name", ["fft", "ifft", "rfft"])
@pytest.mark.parametrize("n", [None, 4, 9])
@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
def test_one_dimensional(name, n, norm, rng, device):
    x = rng.standard_normal((6, 8)).astype(np.float32)
    for a, ref in views(x):
        for axis in (0, -1):
            got = getattr(mx.fft, name)(a, n=n, axis=axis, norm=norm)
            assert got.dtype == mx.complex64
            close(got, getattr(np.fft, name)(ref, n=n, axis=axis, norm=norm))


@pytest.mark.parametrize("n", [None, 6, 10])
def test_irfft(n, rng, device):
    x = (rng.standard_normal((4, 5)) + 1j * rng.standard_normal((4, 5))).astype(np.complex64)
    got = mx.fft.irfft(mx.array(x), n)
    assert got.dtype == mx.float32
    close(got, np.fft.irfft(x, n))
    close(mx.fft.irfft(mx.array(x), n, axis=0, norm="ortho"), np.fft.irfft(x, n, axis=0, norm="ortho"))


@pytest.mark.parametrize("name", ["fft2", "ifft2", "fftn", "ifftn", "rfft2", "rfftn"])
def test_multi_dimensional(name, rng, device):
    x = rng.standard_normal((4, 6, 5)).astype(np.float32)
    f, g = getattr(mx.fft, name), getattr(np.fft, name)
    a = mx.array(x)
    close(f(a), g(x))
    close(f(a, s=(4, 8)), g(x, s=(4, 8), axes=(-2, -1)))
    close(f(a, axes=(0, 2), norm="ortho"), g(x, axes=(0, 2), norm="ortho"))
    close(f(mx.swapaxes(a, 0, 2), s=(3, 4), axes=(1, 0)), g(np.swapaxes(x, 0, 2), s=(3, 4), axes=(1, 0)))


@pytest.mark.parametrize("name", ["irfft2", "irfftn"])
def test_inverse_real_multi_dimensional(name, rng, device):
    x = (rng.standard_normal((4, 6, 5)) + 1j * rng.standard_normal((4, 6, 5))).astype(np.complex64)
    f, g = getattr(mx.fft, name), getattr(np.fft, name)
    close(f(mx.array(x)), g(x))
    close(f(mx.array(x), s=(6, 8)), g(x, s=(6, 8), axes=(-2, -1)))


def test_round_trip_complex(rng, device):
    x = (rng.standard_normal((8, 4)) + 1j * rng.standard_normal((8, 4))).astype(np.complex64)
    close(mx.fft.ifftn(mx.fft.fftn(mx.array(x))), x)


def test_frequencies_and_shifts(rng, device):
    for n in (7, 8):
        close(mx.fft.fftfreq(n, 0.5), np.fft.fftfreq(n, 0.5))
        close(mx.fft.rfftfreq(n), np.fft.rfftfreq(n))
    x = rng.standard_normal((5, 6)).astype(np.float32)
    close(mx.fft.fftshift(mx.array(x)), np.fft.fftshift(x))
    close(mx.fft.ifftshift(mx.array(x)), np.fft.ifftshift(x))
    close(mx.fft.fftshift(mx.array(x).T, axes=0), np.fft.fftshift(x.T, axes=0))
    close(mx.fft.ifftshift(mx.array(x), axes=[1]), np.fft.ifftshift(x, axes=[1]))


def test_fft_errors(device):
    with pytest.raises(ValueError):
        mx.fft.fft(mx.zeros((4,)), norm="bad")
    with pytest.raises(IndexError, match=r"\[fft\] axis 3"):
        mx.fft.fft(mx.zeros((4,)), axis=3)


@pytest.mark.parametrize("subscripts,shapes", [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("ij,jk", [(3, 4), (4, 5)]),
    ("ii->i", [(4, 4)]),
    ("ii", [(4, 4)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("...ij,...jk->...ik", [(2, 3, 4), (4, 5)]),
    ("i,j->ij", [(3,), (4,)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("ijk->kji", [(2, 3, 4)]),
])
def test_einsum(subscripts, shapes, rng, device):
    xs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    close(mx.einsum(subscripts, *[mx.array(x) for x in xs]), np.einsum(subscripts, *xs))
    path, report = mx.einsum_path(subscripts, *[mx.array(x) for x in xs])
    assert isinstance(report, str) and isinstance(path, list)
    assert all(isinstance(step, tuple) for step in path)
    assert sum(len(step) - 1 for step in path) == len(xs) - 1 or len(xs) == 1


def test_einsum_views_and_errors(rng, device):
    x = rng.standard_normal((4, 5)).astype(np.float32)
    close(mx.einsum("ij,kj->ik", mx.array(x).T, mx.array(x).T), np.einsum("ij,kj->ik", x.T, x.T))
    with pytest.raises(ValueError):
        mx.einsum("ij,jk->ik", mx.zeros((2, 3)), mx.zeros((4, 5)))


def test_kron(rng, device):
    a = rng.standard_normal((2, 3)).astype(np.float32)
    b = rng.standard_normal((4, 2)).astype(np.float32)
    close(mx.kron(mx.array(a), mx.array(b)), np.kron(a, b))
    close(mx.kron(mx.array(a).T, mx.array(b)), np.kron(a.T, b))
    close(mx.kron(mx.array([1, 2]), mx.array([[1], [3]])), np.kron([1, 2], [[1], [3]]))


@pytest.mark.parametrize("name", ["hanning", "hamming", "blackman", "bartlett"])
@pytest.mark.parametrize("M", [0, 1, 5, 12])
def test_windows(name, M, device):
    got = getattr(mx, name)(M)
    assert got.dtype == mx.float32
    close(got, getattr(np, name)(M), atol=1e-6)
