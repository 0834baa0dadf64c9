"""Quantization: mx.quantize / dequantize / quantized_matmul against a NumPy
implementation of the affine formula and of the packing, and of the mxfp4,
mxfp8 and nvfp4 formats (e2m1, e4m3, e8m0 from their definitions), qqmm, and
the quantized layers and nn.quantize."""

import numpy as np
import pytest

import tessera.core as mx
import tessera.nn as nn
from tessera.utils import tree_flatten

RNG = np.random.default_rng(0)
BITS = [2, 3, 4, 5, 6, 8]
GROUPS = [32, 64, 128]


def np_quantize(w, group_size, bits):
    """(packed uint32 words, scales, biases) of w (float32, rows x K), by MLX's
    affine rule: the scale is nudged so that the extreme of larger magnitude
    (and so 0) is represented exactly, and q comes from the unrounded scale."""
    rows, K = w.shape
    f = np.float32
    g = w.reshape(rows, K // group_size, group_size)
    lo, hi = g.min(-1), g.max(-1)
    top = f(2**bits - 1)
    low_edge = np.abs(lo) > np.abs(hi)
    s = np.maximum((hi - lo) / top, f(1e-7)).astype(f)
    s = np.where(low_edge, s, -s)
    edge = np.where(low_edge, lo, hi)
    q0 = np.rint(edge / s)
    with np.errstate(divide="ignore", invalid="ignore"):
        scales = np.where(q0 != 0, edge / q0, s).astype(f)
    biases = np.where(q0 != 0, edge, f(0)).astype(f)
    q = np.clip(np.rint((g - biases[..., None]) / scales[..., None]), 0, top).astype(np.uint64)
    # One bit stream per row, value i at bits [i * bits, (i + 1) * bits).
    q = q.reshape(rows, K)
    stream = ((q[..., None] >> np.arange(bits, dtype=np.uint64)) & 1).reshape(rows, -1, 32)
    words = (stream << np.arange(32, dtype=np.uint64)).sum(-1).astype(np.uint32)
    return words, scales, biases


def np_dequantize(words, scales, biases, group_size, bits):
    rows = words.shape[0]
    stream = ((words[..., None].astype(np.uint64) >> np.arange(32, dtype=np.uint64)) & 1)
    stream = stream.reshape(rows, -1, bits)
    q = (stream << np.arange(bits, dtype=np.uint64)).sum(-1).astype(np.float64)
    K = q.shape[1]
    s = np.repeat(scales.astype(np.float64), group_size, axis=1)
    b = np.repeat(biases.astype(np.float64), group_size, axis=1)
    return s * q + b


@pytest.mark.parametrize("bits", BITS)
@pytest.mark.parametrize("group_size", GROUPS)
def test_quantize_matches_numpy(bits, group_size, device):
    w = RNG.standard_normal((6, 256)).astype(np.float32)
    wq, scales, biases = mx.quantize(mx.array(w), group_size, bits)
    assert wq.dtype == mx.uint32 and wq.shape == (6, 256 * bits // 32)
    assert scales.dtype == mx.float32 and scales.shape == (6, 256 // group_size)
    ref_words, ref_scales, ref_biases = np_quantize(w, group_size, bits)
    np.testing.assert_array_equal(np.array(wq), ref_words)
    np.testing.assert_array_equal(np.array(scales), ref_scales)
    np.testing.assert_array_equal(np.array(biases), ref_biases)
    # Dequantization: the reference formula, within 1.5 scales of w (half a
    # scale, plus what the nudge of the scale moves the far extreme: at most
    # top * |s - s'| <= |s|).
    back = np.array(mx.dequantize(wq, scales, biases, group_size, bits))
    want = np_dequantize(ref_words, ref_scales, ref_biases, group_size, bits)
    np.testing.assert_allclose(back, want, rtol=1e-6, atol=1e-6)
    bound = 1.5 * np.abs(np.repeat(ref_scales, group_size, axis=1))
    assert np.all(np.abs(back - w) <= bound * (1 + 1e-5) + 1e-6)


def test_quantize_hand_packed_words(device):
    # The values MLX 0.32.4 gives: 0..15 has its larger extreme 15 at the top,
    # so the scale is -1 and the bias 15 (q = 15 - w).
    w = np.tile(np.arange(16, dtype=np.float32), 4).reshape(1, 64)
    wq, scales, biases = mx.quantize(mx.array(w), 64, 4)
    assert np.array(wq)[0, :2].tolist() == [0x89ABCDEF, 0x01234567]
    assert np.array(scales).tolist() == [[-1.0]] and np.array(biases).tolist() == [[15.0]]
    w2 = np.tile(np.arange(4, dtype=np.float32), 8).reshape(1, 32)
    assert np.array(mx.quantize(mx.array(w2), 32, 2)[0]).tolist() == [[0x1B1B1B1B] * 2]
    w8 = np.zeros((1, 32), np.float32)
    w8[0, :4] = [1, 2, 3, 255]
    assert np.array(mx.quantize(mx.array(w8), 32, 8)[0])[0, 0] == 0x00FCFDFE
    # The larger extreme at the bottom: scale 0.1 (from -1 / -10), bias -1.
    w3 = np.linspace(-1, 0.5, 32, dtype=np.float32).reshape(1, 32)
    wq, scales, biases = mx.quantize(mx.array(w3), 32, 4)
    assert np.array(wq).tolist() == [[0x33221100, 0x77665544, 0xBBAA9988, 0xFFEEDDCC]]
    assert scales.item() == np.float32(0.1) and biases.item() == -1.0
    # A constant group of zeros: scale -1e-7 (the floor), bias 0, q = 0.
    wq, scales, biases = mx.quantize(mx.zeros((1, 32)), 32, 4)
    assert np.array(wq).tolist() == [[0, 0, 0, 0]]
    assert scales.item() == np.float32(-1e-7) and biases.item() == 0.0


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("bits", BITS)
def test_quantize_half_types_match_the_float32_rule(dtype, bits):
    # 16-bit weights: extremes, scale and q in float32 from the exact values;
    # the stored scale and bias are then rounded to the weights' dtype.
    x = mx.array(RNG.standard_normal((4, 128)).astype(np.float32)).astype(getattr(mx, dtype))
    w = np.array(x.astype(mx.float32))
    wq, scales, biases = mx.quantize(x, 64, bits)
    ref_words, ref_scales, ref_biases = np_quantize(w, 64, bits)
    np.testing.assert_array_equal(np.array(wq), ref_words)
    want_s = mx.array(ref_scales).astype(getattr(mx, dtype)).astype(mx.float32)
    want_b = mx.array(ref_biases).astype(getattr(mx, dtype)).astype(mx.float32)
    np.testing.assert_array_equal(np.array(scales.astype(mx.float32)), np.array(want_s))
    np.testing.assert_array_equal(np.array(biases.astype(mx.float32)), np.array(want_b))


def test_quantize_defaults_and_dtypes(device):
    w = mx.array(RNG.standard_normal((4, 128)).astype(np.float32)).astype(mx.float16)
    wq, scales, biases = mx.quantize(w)  # group_size 64, bits 4
    assert wq.shape == (4, 16) and scales.shape == (4, 2) and scales.dtype == mx.float16
    assert mx.dequantize(wq, scales, biases).dtype == mx.float16
    assert mx.dequantize(wq, scales, biases, dtype=mx.float32).dtype == mx.float32


@pytest.mark.parametrize("transpose", [True, False])
@pytest.mark.parametrize("bits", [3, 4, 8])
def test_quantized_matmul_matches_numpy(transpose, bits, device):
    K, N = 128, 64
    w = RNG.standard_normal((N, K) if transpose else (K, N)).astype(np.float32)
    wq, scales, biases = mx.quantize(mx.array(w), 64, bits)
    W = np_dequantize(*(np.array(a) for a in (wq, scales, biases)), 64, bits)
    for shape in [(5, K), (2, 3, K), (K,), (40, K)]:
        x = RNG.standard_normal(shape).astype(np.float32)
        y = mx.quantized_matmul(mx.array(x), wq, scales, biases, transpose=transpose,
                                group_size=64, bits=bits)
        want = x.astype(np.float64) @ (W.T if transpose else W)
        assert y.shape == want.shape and y.dtype == mx.float32
        np.testing.assert_allclose(np.array(y), want, rtol=1e-4, atol=1e-4)


def test_gather_qmm_chooses_experts_like_numpy(device):
    E, N, K = 4, 16, 64
    w = RNG.standard_normal((E, N, K)).astype(np.float32)
    wq, scales, biases = mx.quantize(mx.array(w), 32, 4)
    W = np.stack([np_dequantize(np.array(wq[e]), np.array(scales[e]), np.array(biases[e]), 32, 4)
                  for e in range(E)])
    # Mixture-of-experts shape: x (B, 1, 1, K), two experts per row.
    x = RNG.standard_normal((3, 1, 1, K)).astype(np.float32)
    idx = np.array([[0, 3], [2, 2], [1, 0]], dtype=np.uint32)
    y = mx.gather_qmm(mx.array(x), wq, scales, biases, rhs_indices=mx.array(idx),
                      transpose=True, group_size=32, bits=4)
    want = np.stack([np.stack([x[b, 0] @ W[e].T for e in idx[b]]) for b in range(3)])
    assert y.shape == want.shape == (3, 2, 1, N)
    np.testing.assert_allclose(np.array(y), want, rtol=1e-4, atol=1e-4)
    lhs = np.array([2, 0], dtype=np.int32)
    y2 = mx.gather_qmm(mx.array(x[:, 0]), wq, scales, biases, lhs_indices=mx.array(lhs),
                       rhs_indices=mx.array(np.array([1, 3], dtype=np.int32)), group_size=32,
                       bits=4)
    want2 = np.stack([x[2, 0] @ W[1].T, x[0, 0] @ W[3].T])
    np.testing.assert_allclose(np.array(y2), want2, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("bits", BITS)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_quantized_matmul_every_dtype_and_row_count(bits, dtype, device):
    """Row counts around the small-M kernels' bounds (8 and 16 rows), every
    group size, both layouts, against NumPy's product with the dequantized
    matrix (scales and biases in dtype)."""
    dt = getattr(mx, dtype)
    # Error bound relative to the largest |y|: x and y are rounded to dtype.
    tol = {"float16": 8e-3, "bfloat16": 6.4e-2, "float32": 1e-5}[dtype]
    for transpose in [True, False]:
        K, N = (1152, 76) if transpose else (256, 384)
        for group_size in GROUPS:
            w = RNG.standard_normal((N, K) if transpose else (K, N)).astype(np.float32)
            wq, scales, biases = mx.quantize(mx.array(w).astype(dt), group_size, bits)
            assert scales.dtype == dt
            W = np_dequantize(np.array(wq), np.array(scales.astype(mx.float32)),
                              np.array(biases.astype(mx.float32)), group_size, bits)
            for M in [1, 2, 3, 7, 8, 15, 16, 17, 64]:
                x = mx.array(RNG.standard_normal((M, K)).astype(np.float32)).astype(dt)
                y = mx.quantized_matmul(x, wq, scales, biases, transpose=transpose,
                                        group_size=group_size, bits=bits)
                assert y.shape == (M, N) and y.dtype == dt
                xd = np.array(x.astype(mx.float32)).astype(np.float64)
                want = xd @ (W.T if transpose else W)
                got = np.array(y.astype(mx.float32)).astype(np.float64)
                err = np.abs(got - want).max()
                assert err <= tol * np.abs(want).max(), (transpose, group_size, M, err)


def test_quantized_matmul_half_precision_x(device):
    w = RNG.standard_normal((32, 64)).astype(np.float32)
    wq, scales, biases = mx.quantize(mx.array(w), 32, 4)
    W = np.array(mx.dequantize(wq, scales, biases, 32, 4)).astype(np.float64)
    x = RNG.standard_normal((3, 64)).astype(np.float32)
    for dt, eps in [(mx.float16, 2**-11), (mx.bfloat16, 2**-8)]:
        xd = np.array(mx.array(x).astype(dt).astype(mx.float32)).astype(np.float64)
        y = mx.quantized_matmul(mx.array(x).astype(dt), wq, scales, biases, group_size=32, bits=4)
        assert y.dtype == mx.float32  # promoted with the float32 scales
        np.testing.assert_allclose(np.array(y), xd @ W.T, rtol=1e-4, atol=1e-4)
        s16, b16 = scales.astype(dt), biases.astype(dt)
        y16 = mx.quantized_matmul(mx.array(x).astype(dt), wq, s16, b16, group_size=32, bits=4)
        assert y16.dtype == dt
        # The product with the 16-bit scales and biases, rounded once to dt.
        W16 = np_dequantize(np.array(wq), np.array(s16.astype(mx.float32)),
                            np.array(b16.astype(mx.float32)), 32, 4)
        want = xd @ W16.T
        got = np.array(y16.astype(mx.float32))
        assert np.all(np.abs(got - want) <= 2 * eps * np.abs(want) + 1e-3 * np.abs(want).max())


def test_quantized_matmul_gradient_matches_finite_differences(device):
    w = RNG.standard_normal((32, 64))
    wq, scales, biases = mx.quantize(mx.array(w), 32, 4)
    x = RNG.standard_normal((3, 64))
    c = RNG.standard_normal((3, 32))

    def loss(x, scales, biases):
        y = mx.quantized_matmul(x, wq, scales, biases, group_size=32, bits=4)
        return mx.sum(y * mx.array(c))

    grads = mx.grad(loss, argnums=(0, 1, 2))(mx.array(x), scales, biases)
    eps = 1e-6
    for i, base in enumerate([mx.array(x), scales, biases]):
        b = np.array(base)
        fd = np.zeros_like(b)
        for idx in np.ndindex(b.shape):
            args = [mx.array(x), scales, biases]
            for sign in (1, -1):
                p = b.copy()
                p[idx] += sign * eps
                args[i] = mx.array(p)
                fd[idx] += sign * loss(*args).item() / (2 * eps)
        np.testing.assert_allclose(np.array(grads[i]), fd, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="gradient with respect to w"):
        mx.grad(lambda w: mx.sum(mx.quantized_matmul(mx.array(x), w, scales, biases,
                                                     group_size=32, bits=4)))(wq)


def exact_weights(batch, rows, cols):
    """Weights whose 3-bit quantization is exact (each group of 32 holds every
    integer in [-3, 4]: scale -1, bias 4, MLX's rule): products with small integers are then
    exact in any order of summation."""
    b, r, c = np.meshgrid(np.arange(batch), np.arange(rows), np.arange(cols), indexing="ij")
    return (((r * 7 + c * 3 + b) % 8) - 3).astype(np.float32)


def test_quantized_matmul_vmap_matches_a_loop(device):
    w = exact_weights(4, 32, 64)
    qs = [mx.quantize(mx.array(wi), 32, 3) for wi in w]
    wq, scales, biases = (mx.stack([q[i] for q in qs]) for i in range(3))
    assert np.all(np.array(scales) == -1) and np.all(np.array(biases) == 4)
    x = mx.array(RNG.integers(-4, 5, (4, 2, 64)).astype(np.float32))
    f = lambda x, w, s, b: mx.quantized_matmul(x, w, s, b, group_size=32, bits=3)
    got = mx.vmap(f)(x, wq, scales, biases)
    want = mx.stack([f(x[i], wq[i], scales[i], biases[i]) for i in range(4)])
    np.testing.assert_array_equal(np.array(got), np.array(want))
    got_x = mx.vmap(f, in_axes=(0, None, None, None))(x, wq[0], scales[0], biases[0])
    want_x = mx.stack([f(x[i], wq[0], scales[0], biases[0]) for i in range(4)])
    np.testing.assert_array_equal(np.array(got_x), np.array(want_x))
    deq = mx.vmap(lambda w, s, b: mx.dequantize(w, s, b, 32, 3))(wq, scales, biases)
    np.testing.assert_array_equal(
        np.array(deq), np.stack([np.array(mx.dequantize(*q, 32, 3)) for q in qs]))
    qv = mx.vmap(lambda w: mx.quantize(w, 32, 3))(mx.array(w))
    for i in range(3):
        np.testing.assert_array_equal(np.array(qv[i]), np.array([np.array(q[i]) for q in qs]))


def test_quantization_errors(device):
    w = mx.array(RNG.standard_normal((4, 64)).astype(np.float32))
    with pytest.raises(ValueError, match=r"\[quantize\] w of shape \(64,\) must have at least 2"):
        mx.quantize(w[0])
    with pytest.raises(ValueError, match="divisible by group_size 64"):
        mx.quantize(w[:, :48])
    with pytest.raises(ValueError, match="group_size 16 is not supported"):
        mx.quantize(w, 16)
    with pytest.raises(ValueError, match="bits 7 is not supported"):
        mx.quantize(w, 64, 7)
    with pytest.raises(ValueError, match="group_size 64 is not supported in mode 'mxfp8'"):
        mx.quantize(w, 64, mode="mxfp8")
    wq, scales, biases = mx.quantize(w)
    with pytest.raises(ValueError, match=r"\[dequantize\] w must be uint32"):
        mx.dequantize(wq.astype(mx.int32), scales, biases)
    with pytest.raises(ValueError, match="needs biases"):
        mx.dequantize(wq, scales)
    with pytest.raises(ValueError, match=r"expected \(4,2\)"):
        mx.dequantize(wq, scales, biases, group_size=32)
    with pytest.raises(ValueError, match=r"\[quantized_matmul\] the last dimension of x"):
        mx.quantized_matmul(mx.zeros((2, 63)), wq, scales, biases)


def test_quantized_linear_is_quantized_matmul_plus_bias(device):
    lin = nn.Linear(64, 16)
    ql = nn.QuantizedLinear.from_linear(lin, group_size=32, bits=8)
    assert isinstance(lin.to_quantized(), nn.QuantizedLinear)
    assert ql.weight.dtype == mx.uint32 and ql.weight.shape == (16, 16)
    assert ql.trainable_parameters() == {}
    ql.unfreeze()
    assert ql.trainable_parameters() == {}
    x = mx.array(RNG.standard_normal((3, 64)).astype(np.float32))
    want = mx.quantized_matmul(x, ql.weight, ql.scales, ql.biases, group_size=32, bits=8) + lin.bias
    np.testing.assert_array_equal(np.array(ql(x)), np.array(want))
    # 8-bit quantization keeps the layer close to the float one.
    np.testing.assert_allclose(np.array(ql(x)), np.array(lin(x)), atol=0.05)
    fresh = nn.QuantizedLinear(64, 8, bias=False)
    assert fresh(x).shape == (3, 8) and "bias" not in fresh
    with pytest.raises(ValueError, match="quantize_input"):
        lin.to_quantized(quantize_input=True)


def test_quantized_embedding_lookup_and_as_linear(device):
    emb = nn.Embedding(10, 64)
    qe = emb.to_quantized(group_size=32, bits=8)
    assert isinstance(qe, nn.QuantizedEmbedding)
    idx = mx.array([[1, 3], [9, 0]])
    got = qe(idx)
    assert got.shape == (2, 2, 64)
    np.testing.assert_allclose(np.array(got), np.array(emb(idx)), atol=0.02)
    table = mx.dequantize(qe.weight, qe.scales, qe.biases, 32, 8)
    np.testing.assert_array_equal(np.array(got), np.array(table)[np.array(idx)])
    x = mx.array(RNG.standard_normal((3, 64)).astype(np.float32))
    np.testing.assert_allclose(np.array(qe.as_linear(x)), np.array(x) @ np.array(table).T,
                               rtol=1e-5, atol=1e-5)


def test_nn_quantize_replaces_layers_with_predicate(device):
    model = nn.Sequential(nn.Embedding(10, 64), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 32))
    nn.quantize(model, group_size=32, bits=4)
    kinds = [type(m).__name__ for m in model.layers]
    assert kinds == ["QuantizedEmbedding", "QuantizedLinear", "ReLU", "QuantizedLinear"]
    assert model.layers[1].bits == 4 and model.layers[1].group_size == 32
    assert tree_flatten(model.trainable_parameters()) == []
    x = mx.array([1, 2])
    assert model(x).shape == (2, 32)

    model = nn.Sequential(nn.Linear(64, 64), nn.Linear(64, 32), nn.Embedding(4, 32))
    # Only the second Linear, with its own parameters from the predicate.
    nn.quantize(model, class_predicate=lambda p, m: {"group_size": 64, "bits": 8}
                if p == "layers.1" else False)
    assert [type(m).__name__ for m in model.layers] == ["Linear", "QuantizedLinear", "Embedding"]
    assert model.layers[1].bits == 8 and model.layers[1].group_size == 64
    with pytest.raises(ValueError, match="unable to quantize"):
        nn.quantize(nn.Sequential(nn.ReLU()), class_predicate=lambda p, m: True)


def fp8_values():
    """The 256 e4m3 values from their fields (NaN for 0x7f and 0xff)."""
    c = np.arange(256)
    e, m = (c >> 3) & 15, c & 7
    v = np.where(e == 0, m / 8 * 2.0 ** -6, (1 + m / 8) * 2.0 ** (e - 7))
    v = np.where((e == 15) & (m == 7), np.nan, v)
    return np.where(c >= 128, -v, v)


def test_from_fp8_decodes_every_code(device):
    codes = mx.array(np.arange(256, dtype=np.uint8))
    want = fp8_values()
    for dtype in (mx.float32, mx.float16, mx.bfloat16):
        got = np.array(mx.from_fp8(codes, dtype=dtype).astype(mx.float32))
        np.testing.assert_array_equal(got, want.astype(np.float32))
    assert mx.from_fp8(codes).dtype == mx.bfloat16
    with pytest.raises(ValueError, match="from_fp8"):
        mx.from_fp8(mx.array([1.0]))


def test_to_fp8_is_the_nearest_code_ties_to_even(rng, device):
    x = np.concatenate([rng.uniform(-500, 500, 3000), rng.uniform(-0.05, 0.05, 1000),
                        [0.0, -0.0, 1.0625, 1.1875, 448.0, 464.0, 1e6, np.inf, -np.inf]])
    x = x.astype(np.float32)
    vals = fp8_values()[:127]  # the non-negative codes 0..0x7e (0x7f is NaN)
    a = np.minimum(np.abs(x.astype(np.float64)), 448.0)  # saturation
    dist = np.abs(a[:, None] - vals[None, :])
    best = dist.min(axis=1, keepdims=True)
    ties = dist == best
    codes = np.arange(len(vals))
    # The even code among the nearest (at most two, consecutive).
    want = np.where(ties & (codes % 2 == 0), codes, 10**6).min(axis=1)
    want = np.where(ties.sum(axis=1) == 1, dist.argmin(axis=1), want)
    want = want | np.where(np.signbit(x), 0x80, 0)
    got = np.array(mx.to_fp8(mx.array(x)))
    assert got.dtype == np.uint8
    np.testing.assert_array_equal(got, want.astype(np.uint8))
    codes = mx.array(np.arange(256, dtype=np.uint8))
    np.testing.assert_array_equal(np.array(mx.to_fp8(mx.from_fp8(codes, dtype=mx.float32))),
                                  np.arange(256))
    with pytest.raises(TypeError):
        mx.to_fp8(x=mx.array([1.0]))


# ---- floating-point modes: mxfp4, mxfp8, nvfp4 ---------------------------------------

E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])
FP_MODES = {"mxfp4": (32, 4), "mxfp8": (32, 8), "nvfp4": (16, 4)}


def e2m1_codes(y):
    """Nearest e2m1 value, ties toward zero (the smaller code), the sign only on a
    non-zero code."""
    a = np.abs(y.astype(np.float64))
    dist = np.abs(a[..., None] - E2M1)
    code = dist.argmin(-1)  # the first, smaller, code of a tie
    return np.where((y < 0) & (code != 0), code | 8, code).astype(np.uint32)


def e4m3_codes(y):
    """Nearest e4m3 value, ties to the even code, saturating at 448, the sign kept."""
    y = y.astype(np.float32)
    vals = fp8_values()[:127]
    a = np.minimum(np.abs(y.astype(np.float64)), 448.0)
    dist = np.abs(a[..., None] - vals)
    best = dist.min(-1, keepdims=True)
    codes = np.arange(127)
    even = np.where((dist == best) & (codes % 2 == 0), codes, 10**6).min(-1)
    code = np.where((dist == best).sum(-1) == 1, dist.argmin(-1), even)
    return (code | np.where(np.signbit(y), 0x80, 0)).astype(np.uint32)


def code_values(codes, bits):
    if bits == 8:
        return fp8_values()[codes].astype(np.float32)
    return np.where(codes & 8, -E2M1[codes & 7], E2M1[codes & 7]).astype(np.float32)


def np_fp_quantize(w, mode, global_scale=None):
    """(words, scales, dequantized float32 values) of w (float32 or float16, rows x K):
    the group scale amax / max_value rounded to w's dtype; e8m0: the smallest power
    of two at least that; e4m3 (nvfp4): its nearest value, w divided by it in w's
    dtype, then by global_scale / (448 * 6)."""
    group, bits = FP_MODES[mode]
    dt = w.dtype
    rows, K = w.shape
    g = w.reshape(rows, K // group, group)
    scale = (np.abs(g).max(-1) / dt.type(448.0 if bits == 8 else 6.0)).astype(dt)
    scale = scale.astype(np.float32)
    factor = np.float32(1) if global_scale is None else np.float32(global_scale) / np.float32(2688)
    if mode == "nvfp4":
        codes = e4m3_codes(scale / factor if global_scale is not None else scale)
        d = fp8_values()[codes].astype(np.float32)
        with np.errstate(divide="ignore", invalid="ignore"):
            y = np.where(d[..., None] == 0, 0, (g / d[..., None].astype(dt)).astype(dt))
        y = y.astype(np.float32)
        if global_scale is not None:
            y = y / factor
        back = d * factor if global_scale is not None else d
    else:
        n = np.zeros(scale.shape, np.int64)
        for idx in np.ndindex(scale.shape):
            if scale[idx] > 0:
                k = -149
                while np.ldexp(np.float32(1), k) < scale[idx]:
                    k += 1
                n[idx] = k
        codes = ((n + 127) & 255).astype(np.uint32)
        y = g.astype(np.float32) / np.ldexp(np.float32(1), n)[..., None].astype(np.float32)
        back = np.where(codes == 0, np.float32(2.0**-127),
                        np.ldexp(np.float32(1), codes.astype(np.int64) - 127)).astype(np.float32)
    q = (e4m3_codes(y) if bits == 8 else e2m1_codes(y)).reshape(rows, K)
    per = 32 // bits
    words = (q.reshape(rows, -1, per).astype(np.uint64)
             << (np.arange(per, dtype=np.uint64) * bits)).sum(-1).astype(np.uint32)
    values = (code_values(q, bits).reshape(rows, K // group, group)
              * back[..., None].astype(np.float32)).reshape(rows, K)
    return words, codes.astype(np.uint8), values.astype(np.float32)


def fp_weights(rows, K, spread=20, dtype=np.float32, seed=0):
    """Rows of magnitudes 2^-spread .. 2^spread, a zero group, and e2m1 midpoints."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((rows, K)) * 2.0 ** rng.integers(-spread, spread + 1, (rows, 1))
    w[0, :16] = [6, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5, -0.25, -0.75, -1.25, -1.75, -2.5,
                 -3.5, -5, -0.0]
    if rows > 1:
        w[1, :16] = 0
    return w.astype(dtype)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("mode", list(FP_MODES))
def test_fp_quantize_matches_numpy(mode, dtype, device):
    spread = 20 if dtype == "float32" else 4
    w = fp_weights(8, 128, spread, getattr(np, dtype), seed=1)
    group, bits = FP_MODES[mode]
    out = mx.quantize(mx.array(w), mode=mode)
    assert len(out) == 2
    wq, scales = out
    assert wq.dtype == mx.uint32 and wq.shape == (8, 128 * bits // 32)
    assert scales.dtype == mx.uint8 and scales.shape == (8, 128 // group)
    words, codes, values = np_fp_quantize(w, mode)
    np.testing.assert_array_equal(np.array(wq), words)
    np.testing.assert_array_equal(np.array(scales), codes)
    back = mx.dequantize(wq, scales, mode=mode, dtype=mx.float32)
    np.testing.assert_array_equal(np.array(back), values)
    default = mx.dequantize(wq, scales, mode=mode)
    assert default.dtype == mx.bfloat16
    np.testing.assert_array_equal(np.array(default.astype(mx.float32)), values)


@pytest.mark.parametrize("global_scale", [0.7, 3.0, 250.0])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_nvfp4_global_scale_matches_numpy(global_scale, dtype, device):
    w = fp_weights(6, 64, 4, getattr(np, dtype), seed=2)
    gs = mx.array(global_scale)
    wq, scales = mx.quantize(mx.array(w), mode="nvfp4", global_scale=gs)
    words, codes, values = np_fp_quantize(w, "nvfp4", global_scale)
    np.testing.assert_array_equal(np.array(wq), words)
    np.testing.assert_array_equal(np.array(scales), codes)
    back = mx.dequantize(wq, scales, mode="nvfp4", global_scale=gs)
    assert back.dtype == mx.float32
    np.testing.assert_array_equal(np.array(back), values)


@pytest.mark.parametrize("transpose", [True, False])
@pytest.mark.parametrize("mode", list(FP_MODES))
def test_fp_quantized_matmul_matches_numpy(mode, transpose, device):
    K, N = 64, 32
    rows, values = (N, K) if transpose else (K, N)
    w = fp_weights(rows, values, 3, seed=3)
    wq, scales = mx.quantize(mx.array(w), mode=mode)
    W = np_fp_quantize(w, mode)[2].astype(np.float64)
    x = np.random.default_rng(4).standard_normal((2, 3, K)).astype(np.float32)
    for dtype in (mx.float32, mx.float16, mx.bfloat16):
        xm = mx.array(x).astype(dtype)
        y = mx.quantized_matmul(xm, wq, scales, transpose=transpose, mode=mode)
        assert y.dtype == dtype and y.shape == (2, 3, N)
        want = np.array(xm.astype(mx.float32)).astype(np.float64) @ (W.T if transpose else W)
        tol = 1e-5 if dtype == mx.float32 else 2e-2
        np.testing.assert_allclose(np.array(y.astype(mx.float32)), want, rtol=tol,
                                   atol=tol * np.abs(want).max())
    with pytest.raises(ValueError, match="biases are only used by mode 'affine'"):
        mx.quantized_matmul(mx.array(x), wq, scales, scales, transpose=transpose, mode=mode)


def test_gather_qmm_fp_modes(device):
    E, N, K = 3, 8, 64
    w = fp_weights(E * N, K, 3, seed=5)
    wq, scales = mx.quantize(mx.array(w.reshape(E, N, K)), mode="mxfp8")
    W = np_fp_quantize(w, "mxfp8")[2].reshape(E, N, K).astype(np.float64)
    x = np.random.default_rng(6).standard_normal((4, 1, K)).astype(np.float32)
    idx = np.array([2, 0, 2, 1], np.uint32)
    y = mx.gather_qmm(mx.array(x), wq, scales, rhs_indices=mx.array(idx), mode="mxfp8")
    want = np.stack([x[i] @ W[idx[i]].T for i in range(4)])
    np.testing.assert_allclose(np.array(y), want, rtol=1e-5, atol=1e-5)


def np_qdq(a, mode, global_scale=None):
    return np_fp_quantize(a, mode, global_scale)[2].astype(np.float64)


@pytest.mark.parametrize("mode", list(FP_MODES))
def test_qqmm_matches_numpy(mode, device):
    x = fp_weights(3, 64, 3, seed=7)
    w = fp_weights(16, 64, 3, seed=8)
    want = np_qdq(x, mode) @ np_qdq(w, mode).T
    y = mx.qqmm(mx.array(x), mx.array(w), mode=mode)
    assert y.dtype == mx.float32 and y.shape == (3, 16)
    np.testing.assert_allclose(np.array(y), want, rtol=1e-5, atol=1e-5)
    wq, scales = mx.quantize(mx.array(w), mode=mode)
    yq = mx.qqmm(mx.array(x), wq, scales, mode=mode)
    np.testing.assert_allclose(np.array(yq), want, rtol=1e-5, atol=1e-5)
    yv = mx.qqmm(mx.array(x[1]), wq, scales, mode=mode)
    assert yv.shape == (16,)
    np.testing.assert_allclose(np.array(yv), want[1], rtol=1e-5, atol=1e-5)
    y16 = mx.qqmm(mx.array(x).astype(mx.float16), wq, scales, mode=mode)
    assert y16.dtype == mx.float16


def test_qqmm_global_scales_match_numpy(device):
    x = fp_weights(2, 32, 3, seed=9)
    w = fp_weights(8, 32, 3, seed=10)
    gx, gw = 0.37, 7.0
    want = np_qdq(x, "nvfp4", gx) @ np_qdq(w, "nvfp4", gw).T
    y = mx.qqmm(mx.array(x), mx.array(w), global_scale_x=mx.array(gx),
                global_scale_w=mx.array(gw))
    np.testing.assert_allclose(np.array(y), want, rtol=1e-5, atol=1e-5)
    wq, scales = mx.quantize(mx.array(w), mode="nvfp4", global_scale=mx.array(gw))
    yq = mx.qqmm(mx.array(x), wq, scales, global_scale_x=mx.array(gx),
                 global_scale_w=mx.array(gw))
    np.testing.assert_allclose(np.array(yq), want, rtol=1e-5, atol=1e-5)


def test_qqmm_gradient_passes_straight_through(device):
    x = fp_weights(2, 32, 3, seed=11)
    w = fp_weights(4, 32, 3, seed=12)
    gx, gw = mx.grad(lambda a, b: mx.qqmm(a, b, mode="mxfp8").sum(), argnums=(0, 1))(
        mx.array(x), mx.array(w))
    X, W = np_qdq(x, "mxfp8"), np_qdq(w, "mxfp8")
    np.testing.assert_allclose(np.array(gx), np.ones((2, 4)) @ W, rtol=1e-6)
    np.testing.assert_allclose(np.array(gw), np.ones((4, 2)) @ X, rtol=1e-6)


def test_gather_qqmm_chooses_experts(device):
    E, N, K = 3, 8, 32
    w = fp_weights(E * N, K, 3, seed=13)
    x = fp_weights(4, K, 3, seed=14)
    wq, scales = mx.quantize(mx.array(w.reshape(E, N, K)), mode="nvfp4")
    idx = np.array([1, 2, 0, 1], np.uint32)
    y = mx.gather_qqmm(mx.array(x.reshape(4, 1, K)), wq, scales, rhs_indices=mx.array(idx))
    W = np_qdq(w, "nvfp4").reshape(E, N, K)
    X = np_qdq(x, "nvfp4")
    want = np.stack([X[i:i + 1] @ W[idx[i]].T for i in range(4)])
    np.testing.assert_allclose(np.array(y), want, rtol=1e-5, atol=1e-5)


def test_fp_quantization_errors(device):
    w = mx.array(RNG.standard_normal((4, 64)).astype(np.float32))
    with pytest.raises(ValueError, match=r"\[quantize\] group_size 64 is not supported in mode "
                                         r"'mxfp4' \(32\)"):
        mx.quantize(w, 64, mode="mxfp4")
    with pytest.raises(ValueError, match=r"bits 8 is not supported in mode 'nvfp4' \(4\)"):
        mx.quantize(w, bits=8, mode="nvfp4")
    with pytest.raises(ValueError, match="global_scale is only used by mode 'nvfp4'"):
        mx.quantize(w, mode="mxfp8", global_scale=mx.array(1.0))
    with pytest.raises(ValueError, match=r"global_scale must be a float32 scalar, got shape \(2,\)"):
        mx.quantize(w, mode="nvfp4", global_scale=mx.array([1.0, 2.0]))
    with pytest.raises(ValueError, match="unknown mode 'fp4'"):
        mx.quantize(w, mode="fp4")
    wq, scales = mx.quantize(w, mode="mxfp4")
    with pytest.raises(ValueError, match=r"\[dequantize\] biases are only used by mode 'affine'"):
        mx.dequantize(wq, scales, scales, mode="mxfp4")
    with pytest.raises(ValueError, match="scales must be uint8 in mode 'mxfp4', got float32"):
        mx.dequantize(wq, scales.astype(mx.float32), mode="mxfp4")
    with pytest.raises(ValueError, match=r"\[qqmm\] mode 'affine' is not supported"):
        mx.qqmm(w, w, mode="affine")
    with pytest.raises(ValueError, match=r"\[qqmm\] x must be float32, float16 or bfloat16"):
        mx.qqmm(w.astype(mx.float64), w)
    with pytest.raises(ValueError, match="needs its scales"):
        mx.qqmm(w, wq, mode="mxfp4")
    with pytest.raises(ValueError, match="scales are only used with a quantized"):
        mx.qqmm(w, w, scales, mode="mxfp4")


def test_qqlinear_quantizes_in_eval_mode(device):
    lin = nn.Linear(64, 16, bias=False)
    ql = lin.to_quantized(quantize_input=True, mode="nvfp4")
    assert isinstance(ql, nn.QQLinear)
    assert ql.group_size == 16 and ql.bits == 4 and ql.training
    assert ql.weight.dtype == mx.float32 and "scales" not in ql
    x = mx.array(RNG.standard_normal((3, 64)).astype(np.float32))
    w = np.array(lin.weight)
    want = np_qdq(np.array(x), "nvfp4") @ np_qdq(w, "nvfp4").T
    np.testing.assert_allclose(np.array(ql(x)), want, rtol=1e-5, atol=1e-5)
    # Training: the weight receives gradients.
    grads = nn.value_and_grad(ql, lambda m: m(x).sum())(ql)[1]
    assert grads["weight"].shape == (16, 64)
    ql.eval()
    assert ql.weight.dtype == mx.uint32 and ql.scales.dtype == mx.uint8
    np.testing.assert_allclose(np.array(ql(x)), want, rtol=1e-5, atol=1e-5)
    ql.train()
    assert "scales" not in ql and ql.weight.shape == (16, 64)
    np.testing.assert_array_equal(np.array(ql.weight.astype(mx.float32)), np_qdq(w, "nvfp4"))
    fresh = nn.QQLinear(32, 8, mode="mxfp8")
    assert fresh(x[:, :32]).shape == (3, 8) and fresh.group_size == 32 and fresh.bits == 8
    with pytest.raises(ValueError, match="bias"):
        nn.QQLinear.from_linear(nn.Linear(64, 8))
    with pytest.raises(ValueError, match="quantize_input needs mode 'nvfp4' or 'mxfp8'"):
        lin.to_quantized(quantize_input=True, mode="affine")


def test_nn_quantize_with_quantize_input(device):
    model = nn.Sequential(nn.Linear(64, 32, bias=False), nn.ReLU(), nn.Linear(32, 16, bias=False))
    nn.quantize(model, mode="mxfp8", quantize_input=True)
    assert [type(m).__name__ for m in model.layers] == ["QQLinear", "ReLU", "QQLinear"]
    assert model(mx.zeros((2, 64))).shape == (2, 16)
