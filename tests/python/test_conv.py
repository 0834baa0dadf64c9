"""Convolutions of tessera.core against a direct NumPy computation of their
definitions, numpy.convolve, and finite differences."""
import itertools

import numpy as np
import pytest

import tessera.core as mx


def ref_conv(x, w, stride, low, high, kdil, idil, groups, flip):
    """Channels-last cross-correlation by its definition, in float64."""
    x, w = np.asarray(x, np.float64), np.asarray(w, np.float64)
    n = w.ndim - 2
    for ax in range(n):
        if idil[ax] > 1:
            size = x.shape[ax + 1]
            shape = list(x.shape)
            shape[ax + 1] = (size - 1) * idil[ax] + 1
            d = np.zeros(shape)
            d[(slice(None),) * (ax + 1) + (slice(None, None, idil[ax]),)] = x
            x = d
        lo, hi = low[ax], high[ax]
        if lo < 0 or hi < 0:
            x = x[(slice(None),) * (ax + 1) + (slice(max(0, -lo), x.shape[ax + 1] - max(0, -hi)),)]
        widths = [(0, 0)] * x.ndim
        widths[ax + 1] = (max(0, lo), max(0, hi))
        x = np.pad(x, widths)
    if flip:
        w = w[(slice(None),) + (slice(None, None, -1),) * n]
    kernel = w.shape[1:-1]
    out_sp = [(x.shape[a + 1] - ((kernel[a] - 1) * kdil[a] + 1)) // stride[a] + 1 for a in range(n)]
    cg_in, cg_out = x.shape[-1] // groups, w.shape[0] // groups
    y = np.zeros((x.shape[0], *out_sp, w.shape[0]))
    for k in itertools.product(*[range(s) for s in kernel]):
        sl = tuple(slice(k[a] * kdil[a], k[a] * kdil[a] + (out_sp[a] - 1) * stride[a] + 1, stride[a])
                   for a in range(n))
        patch = x[(slice(None),) + sl]  # (N, *out, C_in)
        for g in range(groups):
            wk = w[(slice(g * cg_out, (g + 1) * cg_out),) + k]  # (cg_out, cg_in)
            y[..., g * cg_out:(g + 1) * cg_out] += patch[..., g * cg_in:(g + 1) * cg_in] @ wk.T
    return y


def ref_conv_transpose(x, w, stride, padding, dilation, output_padding):
    """y[i*s + j*d - p] += x[i] · w[j], by its definition (groups = 1)."""
    x, w = np.asarray(x, np.float64), np.asarray(w, np.float64)
    n = w.ndim - 2
    kernel = w.shape[1:-1]
    full = [(x.shape[a + 1] - 1) * stride[a] + dilation[a] * (kernel[a] - 1) + 1 + output_padding[a]
            for a in range(n)]
    y = np.zeros((x.shape[0], *full, w.shape[0]))
    for i in itertools.product(*[range(s) for s in x.shape[1:-1]]):
        for j in itertools.product(*[range(s) for s in kernel]):
            o = tuple(i[a] * stride[a] + j[a] * dilation[a] for a in range(n))
            y[(slice(None),) + o] += x[(slice(None),) + i] @ w[(slice(None),) + j].T
    crop = tuple(slice(padding[a], full[a] - padding[a]) for a in range(n))
    return y[(slice(None),) + crop + (slice(None),)]


def ref_conv_grads(x, w, dy, stride, padding, dilation, groups):
    """The gradients (dx, dw) of sum(conv(x, w) * dy), by the definition of
    ref_conv read backwards (no input dilation, padding >= 0), in float64."""
    x, w, dy = (np.asarray(a, np.float64) for a in (x, w, dy))
    n = w.ndim - 2
    xp = np.pad(x, [(0, 0)] + [(p, p) for p in padding] + [(0, 0)])
    dxp, dw = np.zeros_like(xp), np.zeros_like(w)
    kernel, out_sp = w.shape[1:-1], dy.shape[1:-1]
    cg_in, cg_out = x.shape[-1] // groups, w.shape[0] // groups
    for k in itertools.product(*[range(s) for s in kernel]):
        sl = tuple(slice(k[a] * dilation[a], k[a] * dilation[a] + (out_sp[a] - 1) * stride[a] + 1,
                         stride[a]) for a in range(n))
        patch = xp[(slice(None),) + sl]
        for g in range(groups):
            gi, go = slice(g * cg_in, (g + 1) * cg_in), slice(g * cg_out, (g + 1) * cg_out)
            d = dy[..., go].reshape(-1, cg_out)
            dw[(go,) + k] += d.T @ patch[..., gi].reshape(-1, cg_in)
            dxp[(slice(None),) + sl + (gi,)] += (d @ w[(go,) + k]).reshape(
                patch.shape[:-1] + (cg_in,))
    crop = tuple(slice(p, xp.shape[a + 1] - p) for a, p in enumerate(padding))
    return dxp[(slice(None),) + crop], dw


def rand(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("n,stride,padding,dilation,groups", [
    (1, 1, 0, 1, 1), (1, 2, 1, 2, 1), (1, 1, 2, 1, 2), (2, 1, 0, 1, 1), (2, (2, 1), (1, 2), (1, 2), 1),
    (2, 2, 1, 1, 3), (3, 1, 1, 1, 1), (3, (1, 2, 1), 0, (2, 1, 1), 1)])
def test_convnd_matches_the_definition(n, stride, padding, dilation, groups, device):
    spatial = (9, 8, 7)[:n]
    x = rand((2, *spatial, 6), 1)
    w = rand((6, *(3, 2, 3)[:n], 6 // groups), 2)
    f = (mx.conv1d, mx.conv2d, mx.conv3d)[n - 1]
    got = f(mx.array(x), mx.array(w), stride, padding, dilation, groups)
    t = lambda v: (v,) * n if isinstance(v, int) else v
    want = ref_conv(x, w, t(stride), t(padding), t(padding), t(dilation), (1,) * n, groups, False)
    assert got.shape == want.shape and got.dtype == mx.float32
    np.testing.assert_allclose(np.array(got), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("n,spatial,kernel,stride,padding,dilation,groups", [
    (1, (40,), (3,), 1, 1, 1, 1), (1, (37,), (5,), 2, 2, 2, 2), (2, (12, 11), (3, 3), 1, 1, 1, 1),
    (2, (14, 13), (3, 2), (2, 1), (1, 0), (1, 2), 3), (2, (16, 16), (1, 1), 2, 0, 1, 1),
    (2, (15, 17), (7, 7), 2, 3, 1, 1), (3, (6, 7, 5), (3, 2, 3), 1, 1, (2, 1, 1), 1),
    (3, (7, 6, 6), (3, 3, 3), 2, 1, 1, 1)])
def test_conv_gradients_match_the_definition(n, spatial, kernel, stride, padding, dilation, groups,
                                             device):
    # A kernel smaller than the input: the weight's gradient is a convolution
    # whose kernel is the output (on the GPU, cuDNN's weight gradient).
    x = rand((3, *spatial, 6), 11)
    w = rand((6, *kernel, 6 // groups), 12)
    f = (mx.conv1d, mx.conv2d, mx.conv3d)[n - 1]
    y = f(mx.array(x), mx.array(w), stride, padding, dilation, groups)
    dy = rand(y.shape, 13)
    gx, gw = mx.grad(lambda a, b: (f(a, b, stride, padding, dilation, groups) * mx.array(dy)).sum(),
                     argnums=(0, 1))(mx.array(x), mx.array(w))
    t = lambda v: (v,) * n if isinstance(v, int) else v
    want_x, want_w = ref_conv_grads(x, w, dy, t(stride), t(padding), t(dilation), groups)
    assert gx.dtype == mx.float32 and gw.dtype == mx.float32
    np.testing.assert_allclose(np.array(gx), want_x, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.array(gw), want_w, rtol=1e-4, atol=1e-4)
    for dt, tol in ((mx.bfloat16, 0.05), (mx.float16, 1e-2)):
        gw = mx.grad(lambda b: (f(mx.array(x).astype(dt), b, stride, padding, dilation, groups)
                                * mx.array(dy).astype(dt)).sum())(mx.array(w).astype(dt))
        assert gw.dtype == dt
        scale = np.abs(want_w).max()
        np.testing.assert_allclose(np.array(gw.astype(mx.float32)) / scale, want_w / scale,
                                   atol=tol)


def test_conv_general_asymmetric_padding_input_dilation_and_flip(device):
    x, w = rand((2, 7, 6, 4), 3), rand((5, 3, 2, 4), 4)
    got = mx.conv_general(mx.array(x), mx.array(w), stride=(2, 1), padding=([1, 0], [2, 3]),
                          kernel_dilation=(1, 2), input_dilation=(2, 1), flip=True)
    want = ref_conv(x, w, (2, 1), (1, 0), (2, 3), (1, 2), (2, 1), 1, True)
    assert got.shape == want.shape
    np.testing.assert_allclose(np.array(got), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("n,stride,padding,dilation,output_padding", [
    (1, 1, 0, 1, 0), (1, 2, 1, 1, 1), (1, 3, 2, 2, 0), (2, (2, 1), (1, 0), (1, 2), (1, 0)),
    (3, 2, 1, 1, 0)])
def test_conv_transpose_matches_the_definition(n, stride, padding, dilation, output_padding,
                                               device):
    x = rand((2, *(5, 4, 3)[:n], 3), 5)
    w = rand((4, *(3, 2, 2)[:n], 3), 6)
    f = (mx.conv_transpose1d, mx.conv_transpose2d, mx.conv_transpose3d)[n - 1]
    got = f(mx.array(x), mx.array(w), stride, padding, dilation, output_padding)
    t = lambda v: (v,) * n if isinstance(v, int) else v
    want = ref_conv_transpose(x, w, t(stride), t(padding), t(dilation), t(output_padding))
    assert got.shape == want.shape
    np.testing.assert_allclose(np.array(got), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("la,lv", [(10, 3), (10, 4), (3, 10), (7, 7), (5, 1)])
def test_convolve_matches_numpy(mode, la, lv, device):
    a, v = rand((la,), 7), rand((lv,), 8)
    got = mx.convolve(mx.array(a), mx.array(v), mode)
    np.testing.assert_allclose(np.array(got), np.convolve(a, v, mode), rtol=1e-5, atol=1e-5)


def test_convolve_of_integers_is_exact_and_integer(device):
    a = np.arange(-20, 30, dtype=np.int32) * 1000
    v = np.array([3, -1, 7, 2], np.int32)
    got = mx.convolve(mx.array(a), mx.array(v))
    assert got.dtype == mx.int32
    np.testing.assert_array_equal(np.array(got), np.convolve(a, v))


def test_conv2d_gradients_match_finite_differences(device):
    x = np.random.default_rng(9).standard_normal((1, 5, 4, 2))
    w = np.random.default_rng(10).standard_normal((4, 2, 2, 1))

    def loss(x, w):
        return (mx.conv2d(x, w, stride=1, padding=1, groups=2) ** 2).sum()

    gx, gw = mx.grad(loss, argnums=(0, 1))(mx.array(x), mx.array(w))
    eps = 1e-6
    for arr, g, which in ((x, gx, 0), (w, gw, 1)):
        num = np.zeros_like(arr)
        for idx in np.ndindex(arr.shape):
            hi, lo = arr.copy(), arr.copy()
            hi[idx] += eps
            lo[idx] -= eps
            args_hi = (hi, w) if which == 0 else (x, hi)
            args_lo = (lo, w) if which == 0 else (x, lo)
            num[idx] = (loss(*map(mx.array, args_hi)).item()
                        - loss(*map(mx.array, args_lo)).item()) / (2 * eps)
        np.testing.assert_allclose(np.array(g), num, rtol=1e-6, atol=1e-6)


def test_bad_shapes_are_refused_with_the_op_name(device):
    x = mx.zeros((1, 8, 3))
    with pytest.raises(ValueError, match=r"\[conv1d\].*3 channels"):
        mx.conv1d(x, mx.zeros((4, 3, 2)))
    with pytest.raises(ValueError, match=r"\[conv2d\].*4 dimensions"):
        mx.conv2d(x, mx.zeros((4, 3, 3)))
    with pytest.raises(ValueError, match=r"\[conv1d\].*groups=2"):
        mx.conv1d(x, mx.zeros((4, 3, 1)), groups=2)
    with pytest.raises(ValueError, match=r"\[conv1d\].*larger"):
        mx.conv1d(x, mx.zeros((4, 9, 3)))
    with pytest.raises(ValueError, match=r"\[conv3d\] only groups=1"):
        mx.conv3d(mx.zeros((1, 4, 4, 4, 2)), mx.zeros((2, 1, 1, 1, 1)), groups=2)
    with pytest.raises(ValueError, match=r"\[convolve\] mode"):
        mx.convolve(mx.zeros(4), mx.zeros(2), "wide")


def test_lists_tuples_pairs_and_streams_as_arguments(device):
    x, w = rand((1, 6, 5, 2), 11), rand((3, 2, 2, 2), 12)
    want = ref_conv(x, w, (2, 1), (1, 0), (1, 0), (1, 1), (1, 1), 1, False)
    got = mx.conv2d(mx.array(x), mx.array(w), stride=[2, 1], padding=(1, 0), stream=device)
    np.testing.assert_allclose(np.array(got), want, rtol=1e-4, atol=1e-4)
    got = mx.conv_general(x, w, (2, 1), ([1, 0], [1, 0]), stream=device)
    np.testing.assert_allclose(np.array(got), want, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match=r"\[conv2d\] stride must be an int or 2 ints"):
        mx.conv2d(mx.array(x), mx.array(w), stride=(1, 2, 3))
    with pytest.raises(ValueError, match=r"\[conv_general\] padding_lo must be an int or 2 ints"):
        mx.conv_general(mx.array(x), mx.array(w), padding=([1, 2, 3], [0, 0]))
    with pytest.raises(ValueError, match=r"\[conv1d\].*floating-point"):
        mx.conv1d(mx.zeros((1, 4, 2), mx.int32), mx.zeros((1, 2, 2), mx.int32))


def test_vmap_and_grad_of_a_convolution(device):
    xs, w = rand((3, 2, 8, 4), 13), rand((2, 3, 4), 14)
    got = mx.vmap(lambda x: mx.conv1d(x, mx.array(w), stride=2))(mx.array(xs))
    want = np.stack([ref_conv(x, w, (2,), (0,), (0,), (1,), (1,), 1, False) for x in xs])
    np.testing.assert_allclose(np.array(got), want, rtol=1e-4, atol=1e-4)
    # The input's gradient of sum(conv) is the transposed convolution of ones.
    g = mx.grad(lambda x: mx.conv1d(x, mx.array(w), stride=2).sum())(mx.array(xs[0]))
    ones = np.ones((2, 3, 2))
    want = np.zeros_like(xs[0], dtype=np.float64)
    for o in range(3):
        for k in range(3):
            want[:, 2 * o + k] += ones[:, o] @ w[:, k]
    np.testing.assert_allclose(np.array(g), want, rtol=1e-5, atol=1e-5)
