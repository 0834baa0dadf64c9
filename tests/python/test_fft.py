"""tessera.core.fft (with stft and istft), einsum, einsum_path, kron and the
window functions against NumPy, on random inputs and on views."""
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


def np_stft(x, n_fft, hop=None, window=None, center=True, pad_mode="reflect", norm="backward",
            onesided=None):
    """Frame the last axis, window each frame, take its DFT; (..., n_freq, n_frames)."""
    hop = hop or n_fft // 4
    w = np.ones(n_fft) if window is None else np.asarray(window)
    left = (n_fft - len(w)) // 2
    w = np.pad(w, (left, n_fft - len(w) - left))
    if onesided is None:
        onesided = not np.iscomplexobj(x)
    if center:
        x = np.pad(x, [(0, 0)] * (x.ndim - 1) + [(n_fft // 2, n_fft // 2)], mode=pad_mode)
    n_frames = 1 + (x.shape[-1] - n_fft) // hop
    frames = np.stack([x[..., f * hop:f * hop + n_fft] * w for f in range(n_frames)], axis=-2)
    spec = np.fft.rfft(frames.real, norm=norm) if onesided else np.fft.fft(frames, norm=norm)
    return np.swapaxes(spec, -1, -2)


def np_istft(spec, n_fft, hop, window, center, norm, length):
    """Inverse DFT of each frame, windowed, overlap-added, divided by the envelope."""
    frames = np.fft.irfft(np.swapaxes(spec, -1, -2), n=n_fft, norm=norm)
    w = np.zeros(n_fft, np.result_type(window, np.float32))
    left = (n_fft - len(window)) // 2
    w[left:left + len(window)] = window
    n_frames = frames.shape[-2]
    full = (n_frames - 1) * hop + n_fft
    y = np.zeros(frames.shape[:-2] + (full,), w.dtype)
    env = np.zeros(full, w.dtype)
    for f in range(n_frames):
        y[..., f * hop:f * hop + n_fft] += frames[..., f, :] * w
        env[f * hop:f * hop + n_fft] += w * w
    y = y / np.maximum(env, 1e-8)
    start = n_fft // 2 if center else 0
    stop = start + length if length is not None else full - start
    y = y[..., start:stop]
    return np.pad(y, [(0, 0)] * (y.ndim - 1) + [(0, stop - start - y.shape[-1])])


@pytest.mark.parametrize("n_fft,hop,win", [(8, None, None), (9, 2, 5), (16, 5, 16), (32, 3, 20)])
@pytest.mark.parametrize("pad_mode", ["reflect", "constant", "edge"])
@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
def test_stft_matches_numpy(n_fft, hop, win, pad_mode, norm, rng, device):
    x = rng.standard_normal((2, 37)).astype(np.float32)
    w = None if win is None else np.hanning(win + 2)[1:-1].astype(np.float32)
    got = mx.fft.stft(mx.array(x), n_fft=n_fft, hop_length=hop,
                      window=None if w is None else mx.array(w), pad_mode=pad_mode, norm=norm)
    assert got.dtype == mx.complex64
    close(got, np_stft(x, n_fft, hop, w, pad_mode=pad_mode, norm=norm))
    close(mx.fft.stft(mx.array(x), n_fft=n_fft, hop_length=hop, win_length=win, center=False,
                      norm=norm, onesided=False),
          np_stft(x, n_fft, hop, None if win is None else np.ones(win), center=False, norm=norm,
                  onesided=False))


def test_stft_defaults_and_views(rng, device):
    x = rng.standard_normal(4200).astype(np.float32)
    got = mx.fft.stft(mx.array(x))  # n_fft 2048, hop 512, reflect, onesided
    assert got.shape == (1025, 9)
    close(got, np_stft(x, 2048), rtol=1e-3, atol=1e-3)
    z = (rng.standard_normal((3, 30)) + 1j * rng.standard_normal((3, 30))).astype(np.complex64)
    close(mx.fft.stft(mx.array(z), n_fft=8), np_stft(z, 8))  # complex: both sides
    close(mx.fft.stft(mx.array(z), n_fft=8, onesided=True), np_stft(z, 8, onesided=True))
    y = rng.standard_normal((30, 3)).astype(np.float32)
    close(mx.fft.stft(mx.array(y).T, n_fft=8, hop_length=3), np_stft(y.T, 8, 3))
    close(mx.fft.stft(mx.array(x[:40]).astype(mx.float16), n_fft=8),
          np_stft(x[:40].astype(np.float16).astype(np.float32), 8), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("center", [True, False])
@pytest.mark.parametrize("length", [None, 10, 40])
@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
def test_istft_matches_numpy(center, length, norm, rng, device):
    spec = (rng.standard_normal((2, 5, 7)) + 1j * rng.standard_normal((2, 5, 7))).astype(
        np.complex64)
    w = np.array([0.25, 0.5, 1.0, 0.5, 0.25, 0.125], np.float32)
    got = mx.fft.istft(mx.array(spec), n_fft=8, hop_length=3, window=mx.array(w), center=center,
                       norm=norm, length=length)
    assert got.dtype == mx.float32
    close(got, np_istft(spec, 8, 3, w, center, norm, length))
    wc = (w * (1 - 0.5j)).astype(np.complex64)  # a complex window gives complex64
    got = mx.fft.istft(mx.array(spec), n_fft=8, hop_length=3, window=mx.array(wc), center=center,
                       norm=norm, length=length)
    assert got.dtype == mx.complex64
    close(got, np_istft(spec, 8, 3, wc, center, norm, length))


@pytest.mark.parametrize("n_fft,hop,onesided", [(8, None, None), (9, 3, True), (8, 2, False)])
def test_istft_inverts_stft(n_fft, hop, onesided, rng, device):
    x = rng.standard_normal((3, 50)).astype(np.float32)
    w = mx.array(np.hanning(n_fft + 2)[1:-1].astype(np.float32))
    spec = mx.fft.stft(mx.array(x), n_fft=n_fft, hop_length=hop, window=w, onesided=onesided)
    got = mx.fft.istft(spec, n_fft=n_fft, hop_length=hop, window=w, onesided=onesided, length=50)
    close(got, x)
    # The default n_fft of a onesided spectrum is even; the default length
    # covers every full frame (here all 50 samples).
    close(mx.fft.istft(mx.fft.stft(mx.array(x), n_fft=8)), x)
    close(mx.fft.istft(mx.fft.stft(mx.array(x), n_fft=8, hop_length=4), hop_length=4), x[:, :48])


def test_stft_and_istft_gradients_match_finite_differences(rng, device):
    x = rng.standard_normal((2, 20)).astype(np.float32)

    def f(a):
        w = mx.array(np.hanning(8))
        return mx.sum(mx.abs(mx.fft.stft(a, n_fft=8, hop_length=3, window=w)))

    g = np.array(mx.grad(f)(mx.array(x)))
    eps = 1e-2
    for i, j in [(0, 0), (0, 7), (1, 13), (1, 19)]:
        e = np.zeros_like(x)
        e[i, j] = eps
        fd = (f(mx.array(x + e)).item() - f(mx.array(x - e)).item()) / (2 * eps)
        assert abs(g[i, j] - fd) < 1e-2 * max(1.0, abs(fd)), (i, j, g[i, j], fd)
    # istft is linear: its vjp is the adjoint of the map.
    spec = mx.fft.stft(mx.array(x), n_fft=8)
    c = rng.standard_normal((2, 20)).astype(np.float32)
    gs = mx.grad(lambda s: mx.sum(mx.fft.istft(s, length=20) * mx.array(c)))(spec)
    assert gs.shape == spec.shape and gs.dtype == mx.complex64


def test_stft_and_istft_vmap_match_a_loop(rng, device):
    x = rng.integers(-4, 4, (3, 2, 12)).astype(np.float32)
    got = mx.vmap(lambda a: mx.fft.stft(a, n_fft=4, hop_length=2), in_axes=1)(mx.array(x))
    want = np.stack([np_stft(x[:, i], 4, 2) for i in range(2)])
    close(got, want)
    spec = mx.fft.stft(mx.array(x), n_fft=4)
    close(mx.vmap(lambda s: mx.fft.istft(s, length=12))(spec), x)


def test_stft_and_istft_errors(device):
    x = mx.zeros((20,))
    with pytest.raises(ValueError, match=r"\[stft\] n_fft must be positive, got 0"):
        mx.fft.stft(x, n_fft=0)
    with pytest.raises(ValueError, match=r"\[stft\] hop_length must be positive, got 0"):
        mx.fft.stft(x, n_fft=3)
    with pytest.raises(ValueError, match=r"\[stft\] the window length 9 must not exceed n_fft 8"):
        mx.fft.stft(x, n_fft=8, window=mx.ones(9))
    with pytest.raises(ValueError, match=r"\[stft\] the window must be one-dimensional"):
        mx.fft.stft(x, n_fft=8, window=mx.ones((2, 4)))
    with pytest.raises(ValueError, match=r"\[stft\] pad_mode must be .* got 'wrap'"):
        mx.fft.stft(x, n_fft=8, pad_mode="wrap")
    with pytest.raises(ValueError, match=r"\[stft\] the input of length 20 is shorter than n_fft"):
        mx.fft.stft(x, n_fft=21, center=False)
    with pytest.raises(ValueError, match=r"\[stft\]"):
        mx.fft.stft(mx.array(1.0), n_fft=4)
    with pytest.raises(ValueError):
        mx.fft.stft(x, n_fft=8, norm="bad")
    with pytest.raises(ValueError, match=r"\[istft\] the input must have at least two"):
        mx.fft.istft(mx.zeros((5,), mx.complex64))
    with pytest.raises(ValueError, match=r"\[istft\] n_fft must be positive, got 0"):
        mx.fft.istft(mx.zeros((1, 3), mx.complex64))
    with pytest.raises(ValueError, match=r"\[istft\] hop_length must be positive"):
        mx.fft.istft(mx.zeros((5, 3), mx.complex64), hop_length=0)
    with pytest.raises(ValueError, match=r"\[istft\] the window length 9 must not exceed n_fft 8"):
        mx.fft.istft(mx.zeros((5, 3), mx.complex64), window=mx.ones(9))


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
