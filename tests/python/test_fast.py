"""mx.fast against NumPy written from the reference's formulas: rms_norm,
layer_norm, rope (both layouts, partial dims, offsets, freqs),
scaled_dot_product_attention (MHA, GQA, causal and array masks, sinks),
cross_entropy and gated_delta_update."""
import numpy as np
import pytest

import tessera.core as mx
import tessera.nn as nn


def np_softmax(s):
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_rms_norm_and_layer_norm(rng, device):
    x = rng.standard_normal((3, 4, 16)).astype(np.float32)
    w = rng.standard_normal(16).astype(np.float32)
    b = rng.standard_normal(16).astype(np.float32)
    rms = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(np.array(mx.fast.rms_norm(mx.array(x), mx.array(w), 1e-5)),
                               rms * w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.array(mx.fast.rms_norm(mx.array(x), None, 1e-5)), rms,
                               rtol=1e-5, atol=1e-6)
    mean, var = x.mean(axis=-1, keepdims=True), x.var(axis=-1, keepdims=True)
    ln = (x - mean) / np.sqrt(var + 1e-5)
    got = mx.fast.layer_norm(mx.array(x), mx.array(w), mx.array(b), 1e-5)
    np.testing.assert_allclose(np.array(got), ln * w + b, rtol=1e-5, atol=1e-5)
    got = mx.fast.layer_norm(mx.array(x), None, None, 1e-5)
    np.testing.assert_allclose(np.array(got), ln, rtol=1e-5, atol=1e-5)
    half = mx.fast.rms_norm(mx.array(x).astype(mx.float16), mx.array(w).astype(mx.float16), 1e-5)
    assert half.dtype == mx.float16
    np.testing.assert_allclose(np.array(half.astype(mx.float32)), rms * w, rtol=3e-3, atol=3e-3)
    with pytest.raises(ValueError, match=r"\[rms_norm\]"):
        mx.fast.rms_norm(mx.array(x), mx.array(w[:8]), 1e-5)


def np_rope(x, dims, traditional, base, scale, offset, freqs=None):
    """The reference's rotation, element by element over the feature pairs."""
    t = x.shape[-2]
    half = dims // 2
    inv = 1.0 / freqs if freqs is not None else base ** (-np.arange(half) / half)
    offset = np.asarray(offset, dtype=np.float64)
    pos = np.arange(t)[None, :] + offset.reshape(-1, 1)  # (B or 1, T)
    out = x.astype(np.float64).copy()
    for bi in range(x.shape[0]):
        theta = (pos[bi if pos.shape[0] > 1 else 0] * scale)[:, None] * inv[None, :]
        c, s = np.cos(theta), np.sin(theta)
        for i in range(half):
            a_idx, b_idx = (2 * i, 2 * i + 1) if traditional else (i, i + half)
            x1, x2 = x[bi, ..., a_idx], x[bi, ..., b_idx]
            out[bi, ..., a_idx] = x1 * c[:, i] - x2 * s[:, i]
            out[bi, ..., b_idx] = x1 * s[:, i] + x2 * c[:, i]
    return out


@pytest.mark.parametrize("traditional", [False, True])
def test_rope_matches_the_rotation(rng, traditional, device):
    x = rng.standard_normal((2, 3, 5, 12)).astype(np.float32)
    for dims, offset, scale in [(12, 0, 1.0), (8, 3, 0.5)]:
        got = mx.fast.rope(mx.array(x), dims, traditional=traditional, base=10000.0,
                           scale=scale, offset=offset)
        want = np_rope(x, dims, traditional, 10000.0, scale, offset)
        np.testing.assert_allclose(np.array(got), want, rtol=1e-4, atol=1e-5)
    # One offset per batch element, and explicit frequencies.
    offsets = np.array([2, 7], dtype=np.int32)
    got = mx.fast.rope(mx.array(x), 12, traditional=traditional, base=10000.0, scale=1.0,
                       offset=mx.array(offsets))
    np.testing.assert_allclose(np.array(got), np_rope(x, 12, traditional, 10000.0, 1.0, offsets),
                               rtol=1e-4, atol=1e-5)
    freqs = np.array([1.0, 3.0, 10.0, 30.0], dtype=np.float32)
    got = mx.fast.rope(mx.array(x), 8, traditional=traditional, base=None, scale=1.0,
                       offset=1, freqs=mx.array(freqs))
    np.testing.assert_allclose(np.array(got), np_rope(x, 8, traditional, None, 1.0, 1, freqs),
                               rtol=1e-4, atol=1e-5)
    # Heads share their positions' angles (computed once for all of them on the
    # CPU): the same values as each head alone.
    for offset in [3, mx.array(offsets)]:
        whole = np.array(mx.fast.rope(mx.array(x), 12, traditional=traditional, base=10000.0,
                                      scale=0.5, offset=offset))
        for b in range(2):
            o = offset if isinstance(offset, int) else offset[b:b + 1]
            for h in range(3):
                alone = mx.fast.rope(mx.array(x[b:b + 1, h:h + 1]), 12, traditional=traditional,
                                     base=10000.0, scale=0.5, offset=o)
                np.testing.assert_array_equal(np.array(alone)[0, 0], whole[b, h])


def test_rope_refuses_bad_arguments(device):
    x = mx.zeros((1, 2, 8))
    with pytest.raises(ValueError, match="dims"):
        mx.fast.rope(x, 7, traditional=False, base=10000.0, scale=1.0, offset=0)
    with pytest.raises(ValueError, match="exactly one"):
        mx.fast.rope(x, 8, traditional=False, base=None, scale=1.0, offset=0)
    with pytest.raises(ValueError, match="3 dimensions"):
        mx.fast.rope(mx.zeros((2, 8)), 8, traditional=False, base=1e4, scale=1.0, offset=0)


def np_attention(q, k, v, scale, mask=None, sinks=None):
    b, n_q, t_q, _ = q.shape
    rep = n_q // k.shape[1]
    k = np.repeat(k, rep, axis=1)
    v = np.repeat(v, rep, axis=1)
    s = scale * q.astype(np.float64) @ np.swapaxes(k, -1, -2)
    if isinstance(mask, str):
        t_kv = k.shape[2]
        keep = np.arange(t_q)[:, None] + (t_kv - t_q) >= np.arange(t_kv)[None, :]
        s = np.where(keep, s, -np.inf)
    elif mask is not None and mask.dtype == np.bool_:
        s = np.where(mask, s, -np.inf)
    elif mask is not None:
        s = s + mask
    if sinks is not None:
        col = np.broadcast_to(sinks.reshape(1, n_q, 1, 1), s.shape[:-1] + (1,))
        return (np_softmax(np.concatenate([s, col], axis=-1))[..., :-1]) @ v
    return np_softmax(s) @ v


@pytest.mark.parametrize("n_kv", [4, 2, 1])
def test_attention_heads_masks_and_sinks(rng, n_kv, device):
    q = rng.standard_normal((2, 4, 3, 8)).astype(np.float32)
    k = rng.standard_normal((2, n_kv, 5, 8)).astype(np.float32)
    v = rng.standard_normal((2, n_kv, 5, 6)).astype(np.float32)
    sdpa = mx.fast.scaled_dot_product_attention
    args = (mx.array(q), mx.array(k), mx.array(v))
    check = lambda got, want: np.testing.assert_allclose(np.array(got), want, rtol=1e-4,
                                                         atol=1e-5)
    check(sdpa(*args, scale=0.3), np_attention(q, k, v, 0.3))
    check(sdpa(*args, scale=0.3, mask="causal"), np_attention(q, k, v, 0.3, "causal"))
    boolean = rng.random((3, 5)) > 0.3
    boolean[:, 0] = True
    check(sdpa(*args, scale=0.3, mask=mx.array(boolean)), np_attention(q, k, v, 0.3, boolean))
    additive = rng.standard_normal((1, 4, 3, 5)).astype(np.float32)
    check(sdpa(*args, scale=0.3, mask=mx.array(additive)), np_attention(q, k, v, 0.3, additive))
    sinks = rng.standard_normal(4).astype(np.float32)
    check(sdpa(*args, scale=0.3, sinks=mx.array(sinks)),
          np_attention(q, k, v, 0.3, sinks=sinks))


def test_attention_refuses_bad_arguments(device):
    q, k = mx.zeros((1, 3, 2, 4)), mx.zeros((1, 2, 2, 4))
    sdpa = mx.fast.scaled_dot_product_attention
    with pytest.raises(ValueError, match="multiple"):
        sdpa(q, k, k, scale=1.0)
    with pytest.raises(ValueError, match="force_fused"):
        sdpa(q, q, q, scale=1.0, force_fused=True)
    with pytest.raises(ValueError, match="causal"):
        sdpa(q, q, q, scale=1.0, mask="upper")


def test_nn_layers_use_fast(rng, device):
    x = rng.standard_normal((2, 5, 16)).astype(np.float32)
    norm = nn.RMSNorm(16, eps=1e-6)
    np.testing.assert_allclose(np.array(norm(mx.array(x))),
                               np.array(mx.fast.rms_norm(mx.array(x), norm.weight, 1e-6)))
    r = nn.RoPE(16, traditional=True, base=100.0)
    y = rng.standard_normal((1, 2, 5, 16)).astype(np.float32)
    np.testing.assert_allclose(np.array(r(mx.array(y))), np_rope(y, 16, True, 100.0, 1.0, 0),
                               rtol=1e-4, atol=1e-5)


def test_fast_is_the_native_submodule_with_keyword_only_options(rng, device):
    import tessera.core.fast as fast
    assert fast is mx.fast
    x = rng.standard_normal((1, 2, 3, 8)).astype(np.float32)
    want = np_rope(x, 8, False, 10000.0, 1.0, 2.5)
    got = fast.rope(mx.array(x), 8, traditional=False, base=10000.0, scale=1.0, offset=2.5,
                    stream=device)
    np.testing.assert_allclose(np.array(got), want, rtol=1e-4, atol=1e-5)
    with pytest.raises(TypeError):
        fast.rope(mx.array(x), 8, False, 10000.0, 1.0, 0)
    with pytest.raises(ValueError, match=r"\[rope\] freqs must be real of shape \(4,\)"):
        fast.rope(mx.array(x), 8, traditional=False, base=None, scale=1.0, offset=0,
                  freqs=mx.ones((3,)))
    with pytest.raises(ValueError, match=r"\[scaled_dot_product_attention\] sinks"):
        fast.scaled_dot_product_attention(mx.array(x), mx.array(x), mx.array(x), scale=1.0,
                                          sinks=mx.zeros((3,)))


def np_cross_entropy(logits, targets):
    l = logits.astype(np.float64)
    m = l.max(axis=-1, keepdims=True)
    lse = (m + np.log(np.exp(l - m).sum(axis=-1, keepdims=True)))[..., 0]
    return lse - np.take_along_axis(l, targets[..., None].astype(np.int64), -1)[..., 0]


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("shape", [(5,), (4, 7), (2, 3, 11)])
def test_cross_entropy_matches_float64_numpy(dtype, shape, rng, device):
    logits = (4 * rng.standard_normal(shape)).astype(np.float32)
    targets = rng.integers(0, shape[-1], shape[:-1]).astype(np.int32)
    a = mx.array(logits).astype(getattr(mx, dtype))
    got = mx.fast.cross_entropy(a, mx.array(targets))
    assert got.dtype == mx.float32 and got.shape == shape[:-1]
    rounded = np.array(a.astype(mx.float32))
    tol = 1e-5 if dtype in ("float32", "float64") else 1e-4
    np.testing.assert_allclose(np.array(got), np_cross_entropy(rounded, targets), rtol=tol,
                               atol=tol)
    for tdt in (mx.uint8, mx.int64, mx.int16):
        other = mx.fast.cross_entropy(a, mx.array(targets).astype(tdt))
        np.testing.assert_allclose(np.array(other), np.array(got))


def test_cross_entropy_large_logits_and_views(rng, device):
    logits = rng.standard_normal((6, 9)).astype(np.float32) * 30 + 1000
    targets = rng.integers(0, 9, 6).astype(np.int32)
    got = mx.fast.cross_entropy(mx.array(logits), mx.array(targets))
    np.testing.assert_allclose(np.array(got), np_cross_entropy(logits, targets), rtol=1e-5,
                               atol=1e-3)
    t = rng.standard_normal((9, 6)).astype(np.float32)
    np.testing.assert_allclose(np.array(mx.fast.cross_entropy(mx.array(t).T, mx.array(targets))),
                               np_cross_entropy(t.T, targets), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(
        np.array(mx.fast.cross_entropy(mx.array(logits)[::2], mx.array(targets)[::2])),
        np_cross_entropy(logits[::2], targets[::2]), rtol=1e-5, atol=1e-3)
    got = mx.fast.cross_entropy(mx.array(t.T.astype(np.float64)), mx.array(targets), stream=mx.cpu)
    assert got.dtype == mx.float32
    np.testing.assert_allclose(np.array(got), np_cross_entropy(t.T, targets), rtol=1e-6, atol=1e-6)


def test_cross_entropy_gradient_is_softmax_minus_one_hot(rng, device):
    logits = rng.standard_normal((4, 6)).astype(np.float32)
    targets = np.array([0, 5, 2, 2], np.int32)
    w = rng.standard_normal(4).astype(np.float32)

    def loss(l):
        return mx.sum(mx.fast.cross_entropy(l, mx.array(targets)) * mx.array(w))

    g = np.array(mx.grad(loss)(mx.array(logits)))
    want = (np_softmax(logits.astype(np.float64)) - np.eye(6)[targets]) * w[:, None]
    np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-6)
    eps = 1e-3
    for i, j in [(0, 0), (1, 5), (3, 1)]:
        e = np.zeros_like(logits)
        e[i, j] = eps
        fd = (loss(mx.array(logits + e)).item() - loss(mx.array(logits - e)).item()) / (2 * eps)
        assert abs(g[i, j] - fd) < 1e-2, (i, j, g[i, j], fd)
    got = mx.vmap(lambda l, t: mx.fast.cross_entropy(l, t))(mx.array(logits), mx.array(targets))
    np.testing.assert_allclose(np.array(got), np_cross_entropy(logits, targets), rtol=1e-5,
                               atol=1e-6)


def test_cross_entropy_refuses_bad_arguments(device):
    logits = mx.zeros((3, 5))
    with pytest.raises(ValueError,
                       match=r"\[cross_entropy\] targets must be integer class indices, got float32"):
        mx.fast.cross_entropy(logits, mx.zeros((3,)))
    with pytest.raises(ValueError, match=r"\[cross_entropy\] targets must be integer"):
        mx.fast.cross_entropy(logits, mx.zeros((3,), mx.bool_))
    with pytest.raises(ValueError, match=r"\[cross_entropy\] targets of shape \(2,\) must have "
                       r"the shape of logits \(3,5\) without its last axis, \(3,\)"):
        mx.fast.cross_entropy(logits, mx.zeros((2,), mx.int32))
    with pytest.raises(ValueError, match=r"\[cross_entropy\] targets of shape \(1,3\)"):
        mx.fast.cross_entropy(logits, mx.zeros((1, 3), mx.int32))
    with pytest.raises(ValueError, match=r"\[cross_entropy\] logits must have at least 1"):
        mx.fast.cross_entropy(mx.array(1.0), mx.array(0))
    with pytest.raises(ValueError, match=r"\[cross_entropy\] logits must have a floating dtype"):
        mx.fast.cross_entropy(mx.zeros((3, 5), mx.int32), mx.zeros((3,), mx.int32))
    with pytest.raises(TypeError):
        mx.fast.cross_entropy(logits, mx.zeros((3,), mx.int32), mx.cpu)
    assert mx.fast.cross_entropy(mx.zeros((5,)), mx.array(2)).shape == ()


def np_gated_delta(q, k, v, g, beta, state=None, mask=None):
    """The recurrence, step by step in float64, one head at a time."""
    B, T, Hk, Dk = q.shape
    Hv, Dv = v.shape[2:]
    S = np.zeros((B, Hv, Dv, Dk)) if state is None else state.astype(np.float64)
    y = np.zeros((B, T, Hv, Dv))
    for b in range(B):
        for t in range(T):
            if mask is not None and not mask[b, t]:
                continue
            for h in range(Hv):
                kh, qh = k[b, t, h // (Hv // Hk)], q[b, t, h // (Hv // Hk)]
                decay = g[b, t, h] if g.ndim == 3 else g[b, t, h][None, :]
                S[b, h] = S[b, h] * decay
                delta = (v[b, t, h] - S[b, h] @ kh) * beta[b, t, h]
                S[b, h] = S[b, h] + np.outer(delta, kh)
                y[b, t, h] = S[b, h] @ qh
    return y, S


@pytest.mark.parametrize("heads", [(2, 2), (1, 3)])
@pytest.mark.parametrize("gate", ["head", "vector"])
def test_gated_delta_update_matches_the_recurrence(heads, gate, rng, device):
    B, T, Dk, Dv = 2, 4, 8, 5
    Hk, Hv = heads
    q, k = (0.5 * rng.standard_normal((B, T, Hk, Dk)) for _ in range(2))
    v = rng.standard_normal((B, T, Hv, Dv))
    g = rng.uniform(0.5, 1, (B, T, Hv) if gate == "head" else (B, T, Hv, Dk))
    beta = rng.uniform(0, 1, (B, T, Hv))
    state = rng.standard_normal((B, Hv, Dv, Dk))
    mask = np.array([[True, False, True, True], [False, True, True, False]])
    f32 = [a.astype(np.float32) for a in (q, k, v, g, beta, state)]
    arrays = [mx.array(a) for a in f32]
    y, s = mx.fast.gated_delta_update(*arrays[:5])
    assert y.dtype == mx.float32 and s.dtype == mx.float32
    assert y.shape == (B, T, Hv, Dv) and s.shape == (B, Hv, Dv, Dk)
    want_y, want_s = np_gated_delta(*f32[:5])
    np.testing.assert_allclose(np.array(y), want_y, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.array(s), want_s, rtol=1e-4, atol=1e-4)
    y, s = mx.fast.gated_delta_update(*arrays, mx.array(mask))
    want_y, want_s = np_gated_delta(*f32, mask)
    np.testing.assert_allclose(np.array(y), want_y, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.array(s), want_s, rtol=1e-4, atol=1e-4)


def test_gated_delta_update_dtypes_gradient_and_errors(rng, device):
    B, T, H, Dk, Dv = 1, 3, 2, 4, 3
    q, k = (rng.standard_normal((B, T, H, Dk)).astype(np.float32) for _ in range(2))
    v = rng.standard_normal((B, T, H, Dv)).astype(np.float32)
    g = rng.uniform(0.5, 1, (B, T, H)).astype(np.float32)
    beta = rng.uniform(0, 1, (B, T, H)).astype(np.float32)
    half = [mx.array(a).astype(mx.bfloat16) for a in (q, k, v)]
    y, s = mx.fast.gated_delta_update(*half, mx.array(g), mx.array(beta),
                                      mx.zeros((B, H, Dv, Dk), mx.bfloat16))
    assert y.dtype == mx.bfloat16 and s.dtype == mx.float32  # the state computes in float32
    want_y, _ = np_gated_delta(*(np.array(a.astype(mx.float32)) for a in half), g, beta)
    np.testing.assert_allclose(np.array(y.astype(mx.float32)), want_y, rtol=2e-2, atol=2e-2)

    # d sum(y) / d v by central differences.
    def loss(v_):
        return mx.sum(mx.fast.gated_delta_update(mx.array(q), mx.array(k), v_, mx.array(g),
                                                 mx.array(beta))[0])
    grad = np.array(mx.grad(loss)(mx.array(v)))
    eps = 1e-2
    for idx in [(0, 0, 0, 0), (0, 2, 1, 2)]:
        e = np.zeros_like(v)
        e[idx] = eps
        fd = (loss(mx.array(v + e)).item() - loss(mx.array(v - e)).item()) / (2 * eps)
        assert abs(grad[idx] - fd) < 1e-2 * max(1, abs(fd)), (idx, grad[idx], fd)

    a = [mx.array(x) for x in (q, k, v, g, beta)]
    with pytest.raises(ValueError, match=r"\[gated_delta_update\] q and k must have one shape"):
        mx.fast.gated_delta_update(a[0][0], *a[1:])
    with pytest.raises(ValueError, match=r"\[gated_delta_update\] v must be \(B, T, Hv, Dv\)"):
        mx.fast.gated_delta_update(a[0], a[1], mx.zeros((B, T, 3, Dv)), a[3], a[4])
    with pytest.raises(ValueError, match=r"\[gated_delta_update\] gamma must have shape "
                       r"\(1,3,2\) or \(1,3,2,4\), got \(1,3,1\)"):
        mx.fast.gated_delta_update(*a[:3], a[3][..., :1], a[4])
    with pytest.raises(ValueError, match=r"\[gated_delta_update\] initial_state must have shape "
                       r"\(1,2,3,4\)"):
        mx.fast.gated_delta_update(*a, mx.zeros((B, H, Dk, Dv)))
    with pytest.raises(ValueError, match=r"\[gated_delta_update\] mask must be bool of shape "
                       r"\(1,3\), got float32"):
        mx.fast.gated_delta_update(*a, None, mx.ones((B, T)))
    with pytest.raises(ValueError, match=r"\[gated_delta_update\] k must have a floating dtype"):
        mx.fast.gated_delta_update(a[0], a[1].astype(mx.int32), *a[2:])
