"""tessera.nn: activations, losses, layers against direct NumPy computations;
Module semantics; initializers; value_and_grad."""

import math
import os

import numpy as np
import pytest

import tessera.core as mx
import tessera.nn as nn
import tessera.optimizers as optim
from tessera.utils import tree_flatten, tree_map

RNG = np.random.default_rng(0)


def rand(*shape, low=-3.0, high=3.0):
    return RNG.uniform(low, high, size=shape).astype(np.float32)


def close(got, want, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(np.array(got), np.asarray(want, np.float64), rtol=rtol,
                               atol=atol)


def np_erf(x):
    return np.vectorize(math.erf)(x)


def np_sigmoid(x):
    return 1 / (1 + np.exp(-x))


def np_softplus(x):
    return np.logaddexp(x, 0)


def np_softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


# ---- activations ------------------------------------------------------------

ACTIVATIONS = [
    (nn.relu, nn.ReLU(), lambda x: np.maximum(x, 0)),
    (nn.relu2, nn.ReLU2(), lambda x: np.maximum(x, 0) ** 2),
    (nn.relu6, nn.ReLU6(), lambda x: np.minimum(np.maximum(x, 0), 6)),
    (nn.leaky_relu, nn.LeakyReLU(), lambda x: np.maximum(0.01 * x, x)),
    (lambda x: nn.leaky_relu(x, 0.2), nn.LeakyReLU(0.2), lambda x: np.maximum(0.2 * x, x)),
    (nn.elu, nn.ELU(), lambda x: np.where(x > 0, x, np.exp(x) - 1)),
    (lambda x: nn.elu(x, 0.5), nn.ELU(0.5), lambda x: np.where(x > 0, x, 0.5 * (np.exp(x) - 1))),
    (lambda x: nn.celu(x, 2.0), nn.CELU(2.0),
     lambda x: np.maximum(x, 0) + 2.0 * (np.exp(np.minimum(x, 0) / 2.0) - 1)),
    (nn.selu, nn.SELU(), lambda x: 1.0507 * np.where(x > 0, x, 1.67326 * (np.exp(x) - 1))),
    (nn.sigmoid, nn.Sigmoid(), np_sigmoid),
    (nn.log_sigmoid, nn.LogSigmoid(), lambda x: -np_softplus(-x)),
    (nn.silu, nn.SiLU(), lambda x: x * np_sigmoid(x)),
    (nn.gelu, nn.GELU(), lambda x: x * (1 + np_erf(x / math.sqrt(2))) / 2),
    (nn.gelu_approx, nn.GELU("precise"),
     lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))),
    (nn.gelu_approx, nn.GELU("tanh"),
     lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))),
    (nn.gelu_fast_approx, nn.GELU("fast"), lambda x: x * np_sigmoid(1.702 * x)),
    (nn.mish, nn.Mish(), lambda x: x * np.tanh(np_softplus(x))),
    (nn.softplus, nn.Softplus(), np_softplus),
    (nn.softsign, nn.Softsign(), lambda x: x / (1 + np.abs(x))),
    (nn.softshrink, nn.Softshrink(), lambda x: np.where(np.abs(x) > 0.5, x - np.sign(x) * 0.5, 0)),
    (nn.hard_shrink, nn.HardShrink(), lambda x: np.where(np.abs(x) > 0.5, x, 0)),
    (nn.hard_tanh, nn.HardTanh(), lambda x: np.clip(x, -1, 1)),
    (nn.hardswish, nn.Hardswish(), lambda x: x * np.minimum(np.maximum(x + 3, 0), 6) / 6),
    (nn.step, nn.Step(), lambda x: (x >= 0).astype(np.float64)),
    (nn.tanh, nn.Tanh(), np.tanh),
    (nn.softmax, nn.Softmax(), np_softmax),
    (nn.softmin, nn.Softmin(), lambda x: np_softmax(-x)),
    (nn.log_softmax, nn.LogSoftmax(), lambda x: np.log(np_softmax(x))),
]


@pytest.mark.parametrize("fn,module,ref", ACTIVATIONS)
def test_activation(fn, module, ref, device):
    x = rand(4, 7)
    want = ref(x.astype(np.float64))
    close(fn(mx.array(x)), want, rtol=2e-5, atol=2e-6)
    close(module(mx.array(x)), want, rtol=2e-5, atol=2e-6)
    # A strided view as input.
    view = mx.array(rand(7, 8))[::2, 1::3]
    close(fn(view), ref(np.array(view).astype(np.float64)), rtol=2e-5, atol=2e-6)


def test_glu_prelu_and_gelu_validation(device):
    x = rand(3, 8)
    a, b = x[:, :4], x[:, 4:]
    close(nn.glu(mx.array(x)), a * np_sigmoid(b))
    y = rand(4, 2)
    close(nn.GLU(axis=0)(mx.array(y)), y[:2] * np_sigmoid(y[2:]))
    close(nn.prelu(mx.array(x), mx.array([0.3])), np.maximum(0, x) + 0.3 * np.minimum(0, x))
    p = nn.PReLU()
    assert p.weight.shape == (1,)
    close(p(mx.array(x)), np.maximum(0, x) + 0.25 * np.minimum(0, x))
    with pytest.raises(ValueError):
        nn.GELU("exact")


# ---- losses -----------------------------------------------------------------

def reduce_np(loss, reduction):
    return {"none": loss, "mean": loss.mean(), "sum": loss.sum()}[reduction]


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_cross_entropy(reduction, device):
    logits = rand(5, 6)
    targets = RNG.integers(0, 6, size=5)
    lse = np.log(np.exp(logits.astype(np.float64)).sum(-1))
    score = logits[np.arange(5), targets]
    close(nn.losses.cross_entropy(mx.array(logits), mx.array(targets), reduction=reduction),
          reduce_np(lse - score, reduction))
    # Label smoothing.
    ls = lse - 0.9 * score - 0.1 * logits.mean(-1)
    close(nn.losses.cross_entropy(mx.array(logits), mx.array(targets), label_smoothing=0.1,
                                  reduction=reduction), reduce_np(ls, reduction))
    # Probabilities as targets, and weights.
    probs = np_softmax(rand(5, 6)).astype(np.float32)
    w = rand(5, low=0, high=1)
    want = (lse - (logits * probs).sum(-1)) * w
    close(nn.losses.cross_entropy(mx.array(logits), mx.array(probs), weights=mx.array(w),
                                  reduction=reduction), reduce_np(want, reduction))


def test_cross_entropy_axis_and_errors(device):
    logits = rand(6, 4)
    targets = RNG.integers(0, 6, size=4)
    lse = np.log(np.exp(logits.astype(np.float64)).sum(0))
    close(nn.losses.cross_entropy(mx.array(logits), mx.array(targets), axis=0),
          lse - logits[targets, np.arange(4)])
    with pytest.raises(ValueError):
        nn.losses.cross_entropy(mx.array(logits), mx.array(targets), label_smoothing=1.0)
    with pytest.raises(ValueError):
        nn.losses.cross_entropy(mx.array(logits), mx.array(targets), reduction="avg")
    with pytest.raises(ValueError):
        nn.losses.cross_entropy(mx.array(logits), mx.array([1, 2]))


def test_binary_cross_entropy(device):
    x = rand(10)
    t = (RNG.uniform(size=10) > 0.5).astype(np.float32)
    close(nn.losses.binary_cross_entropy(mx.array(x), mx.array(t)),
          (np.log1p(np.exp(x)) - x * t).mean())
    p = rand(10, low=0.01, high=0.99)
    want = -(t * np.log(p) + (1 - t) * np.log(1 - p))
    close(nn.losses.binary_cross_entropy(mx.array(p), mx.array(t), with_logits=False,
                                         reduction="none"), want, rtol=1e-5)
    # Logs are clipped at -100.
    edge = nn.losses.binary_cross_entropy(mx.array([0.0, 1.0]), mx.array([1.0, 0.0]),
                                          with_logits=False, reduction="none")
    close(edge, [100.0, 100.0])
    w = rand(10, low=0, high=1)
    close(nn.losses.binary_cross_entropy(mx.array(x), mx.array(t), weights=mx.array(w),
                                         reduction="sum"),
          ((np.log1p(np.exp(x)) - x * t) * w).sum(), rtol=1e-5)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_elementwise_losses(reduction, device):
    p, t = rand(4, 5), rand(4, 5)
    d = p.astype(np.float64) - t
    L = nn.losses
    close(L.l1_loss(mx.array(p), mx.array(t), reduction), reduce_np(np.abs(d), reduction))
    close(L.mse_loss(mx.array(p), mx.array(t), reduction), reduce_np(d * d, reduction))
    ad = np.abs(d)
    close(L.smooth_l1_loss(mx.array(p), mx.array(t), beta=0.7, reduction=reduction),
          reduce_np(np.where(ad < 0.7, 0.5 * d * d / 0.7, ad - 0.35), reduction))
    close(L.huber_loss(mx.array(p), mx.array(t), delta=0.8, reduction=reduction),
          reduce_np(np.where(ad <= 0.8, 0.5 * d * d, 0.8 * (ad - 0.4)), reduction))
    close(L.log_cosh_loss(mx.array(p), mx.array(t), reduction=reduction),
          reduce_np(np.log(np.cosh(d)), reduction), atol=1e-5)
    y = np.sign(rand(4, 5))
    close(L.hinge_loss(mx.array(p), mx.array(y), reduction=reduction),
          reduce_np(np.maximum(1 - p * y, 0), reduction))
    close(L.margin_ranking_loss(mx.array(p), mx.array(t), mx.array(y), margin=0.3,
                                reduction=reduction),
          reduce_np(np.maximum(0, -y * d + 0.3), reduction))
    var = rand(4, 5, low=0.0, high=2.0)
    v = np.maximum(var, 1e-6)
    for full in [False, True]:
        want = 0.5 * (np.log(v) + (t - p) ** 2 / v) + (0.5 * math.log(2 * math.pi) if full else 0)
        close(L.gaussian_nll_loss(mx.array(p), mx.array(t), mx.array(var), full=full,
                                  reduction=reduction), reduce_np(want, reduction), rtol=2e-5)


def test_shape_mismatch_errors(device):
    L = nn.losses
    a, b = mx.array(rand(3)), mx.array(rand(4))
    for fn in [L.l1_loss, L.mse_loss, L.smooth_l1_loss, L.binary_cross_entropy]:
        with pytest.raises(ValueError):
            fn(a, b)
    with pytest.raises(ValueError):
        L.margin_ranking_loss(a, a, b)


def test_nll_kl_cosine_triplet(device):
    L = nn.losses
    logp = np.log(np_softmax(rand(5, 4))).astype(np.float32)
    t = RNG.integers(0, 4, size=5)
    close(L.nll_loss(mx.array(logp), mx.array(t)), -logp[np.arange(5), t])
    close(L.nll_loss(mx.array(logp), mx.array(t), reduction="mean"),
          -logp[np.arange(5), t].mean())
    logq = np.log(np_softmax(rand(5, 4))).astype(np.float32)
    close(L.kl_div_loss(mx.array(logp), mx.array(logq)),
          (np.exp(logq) * (logq - logp)).sum(-1), atol=1e-5)
    x1, x2 = rand(3, 6), rand(3, 6)
    want = (x1 * x2).sum(1) / np.maximum(np.linalg.norm(x1, axis=1) * np.linalg.norm(x2, axis=1),
                                         1e-8)
    close(L.cosine_similarity_loss(mx.array(x1), mx.array(x2)), want)
    a, pos, neg = rand(4, 5), rand(4, 5), rand(4, 5)
    for p in [1, 2]:
        def norm(v):
            return ((np.abs(v) ** p).sum(-1) + 1e-6) ** (1 / p)
        want = np.maximum(norm(a - pos) - norm(a - neg) + 1.0, 0)
        close(L.triplet_loss(mx.array(a), mx.array(pos), mx.array(neg), p=p), want, rtol=2e-5)


# ---- layers -----------------------------------------------------------------

def test_linear_and_identity(device):
    layer = nn.Linear(5, 3)
    assert layer.weight.shape == (3, 5) and layer.bias.shape == (3,)
    w = np.array(layer.weight)
    assert np.all(np.abs(w) <= 1 / math.sqrt(5))
    x = rand(4, 5)
    close(layer(mx.array(x)), x @ w.T + np.array(layer.bias), rtol=1e-5)
    nb = nn.Linear(5, 3, bias=False)
    assert "bias" not in nb.parameters()
    close(nb(mx.array(x)), x @ np.array(nb.weight).T, rtol=1e-5)
    close(nn.Identity(1, k=2)(mx.array(x)), x)


def test_bilinear(device):
    layer = nn.Bilinear(3, 4, 2)
    assert layer.weight.shape == (2, 4, 3)
    x1, x2 = rand(5, 3), rand(5, 4)
    W, b = np.array(layer.weight).astype(np.float64), np.array(layer.bias)
    want = np.einsum("ni,kji,nj->nk", x1, W, x2) + b
    close(layer(mx.array(x1), mx.array(x2)), want, rtol=1e-5, atol=1e-5)


def test_embedding(device):
    emb = nn.Embedding(10, 4)
    assert emb.weight.shape == (10, 4)
    idx = np.array([[1, 3], [9, 0]])
    W = np.array(emb.weight)
    close(emb(mx.array(idx)), W[idx])
    x = rand(2, 4)
    close(emb.as_linear(mx.array(x)), x @ W.T, rtol=1e-5)


def test_sequential(device):
    l1, l2 = nn.Linear(3, 4), nn.Linear(4, 2)
    seq = nn.Sequential(l1, nn.relu, l2)
    x = rand(6, 3)
    h = np.maximum(x @ np.array(l1.weight).T + np.array(l1.bias), 0)
    close(seq(mx.array(x)), h @ np.array(l2.weight).T + np.array(l2.bias), rtol=1e-5)


def np_layer_norm(x, eps, axes=-1):
    mean = x.mean(axis=axes, keepdims=True)
    var = x.var(axis=axes, keepdims=True)
    return (x - mean) / np.sqrt(var + eps)


def test_layer_norm_rms_norm(device):
    x = rand(3, 4, 6).astype(np.float64)
    ln = nn.LayerNorm(6)
    ln.weight = mx.array(rand(6))
    ln.bias = mx.array(rand(6))
    close(ln(mx.array(x.astype(np.float32))),
          np_layer_norm(x, 1e-5) * np.array(ln.weight) + np.array(ln.bias), rtol=1e-4, atol=1e-5)
    assert set(nn.LayerNorm(6, affine=False).parameters()) == set()
    assert set(nn.LayerNorm(6, bias=False).parameters()) == {"weight"}
    rms = nn.RMSNorm(6, eps=1e-6)
    rms.weight = mx.array(rand(6))
    want = x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * np.array(rms.weight)
    close(rms(mx.array(x.astype(np.float32))), want, rtol=1e-4, atol=1e-5)
    for cls in [nn.LayerNorm, nn.RMSNorm, nn.InstanceNorm]:
        with pytest.raises(ValueError):
            cls(4, eps=0)


@pytest.mark.parametrize("pytorch_compatible", [False, True])
def test_group_norm(pytorch_compatible, device):
    x = rand(2, 3, 5, 6).astype(np.float64)
    gn = nn.GroupNorm(3, 6, pytorch_compatible=pytorch_compatible)
    gn.weight = mx.array(rand(6))
    gn.bias = mx.array(rand(6))
    N, C, G = 2, 6, 3
    flat = x.reshape(N, -1, C)
    out = np.empty_like(flat)
    for g in range(G):
        chans = list(range(g * 2, g * 2 + 2)) if pytorch_compatible else list(range(g, C, G))
        block = flat[:, :, chans]
        mean = block.mean(axis=(1, 2), keepdims=True)
        var = block.var(axis=(1, 2), keepdims=True)
        out[:, :, chans] = (block - mean) / np.sqrt(var + 1e-5)
    want = out.reshape(x.shape) * np.array(gn.weight) + np.array(gn.bias)
    close(gn(mx.array(x.astype(np.float32))), want, rtol=1e-4, atol=1e-4)


def test_instance_norm(device):
    x = rand(2, 4, 5, 3).astype(np.float64)
    inorm = nn.InstanceNorm(3, affine=True)
    inorm.weight = mx.array(rand(3))
    inorm.bias = mx.array(rand(3))
    want = np_layer_norm(x, 1e-5, axes=(1, 2)) * np.array(inorm.weight) + np.array(inorm.bias)
    close(inorm(mx.array(x.astype(np.float32))), want, rtol=1e-4, atol=1e-4)


def test_batch_norm_training_and_eval(device):
    bn = nn.BatchNorm(4, momentum=0.2)
    assert set(bn.parameters()) == {"weight", "bias", "running_mean", "running_var"}
    assert set(bn.trainable_parameters()) == {"weight", "bias"}
    bn.unfreeze()
    assert set(bn.trainable_parameters()) == {"weight", "bias"}
    x = rand(8, 3, 4).astype(np.float64)
    out = bn(mx.array(x.astype(np.float32)))
    flat = x.reshape(-1, 4)
    close(out, (x - flat.mean(0)) / np.sqrt(flat.var(0) + 1e-5), rtol=1e-4, atol=1e-4)
    rm = 0.2 * flat.mean(0)
    rv = 0.8 + 0.2 * flat.var(0, ddof=1)
    close(bn.running_mean, rm, rtol=1e-5)
    close(bn.running_var, rv, rtol=1e-5)
    bn.eval()
    y = rand(5, 4).astype(np.float64)
    close(bn(mx.array(y.astype(np.float32))), (y - rm) / np.sqrt(rv + 1e-5), rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError):
        bn(mx.array(rand(4)))


def test_dropout(device):
    x = mx.ones((200, 50))
    d = nn.Dropout(0.25)
    y = np.array(d(x))
    kept = y != 0
    assert np.allclose(y[kept], 1 / 0.75)
    assert 0.2 < 1 - kept.mean() < 0.3
    d.eval()
    close(d(x), np.ones((200, 50)))
    close(nn.Dropout(0.0)(x), np.ones((200, 50)))
    with pytest.raises(ValueError):
        nn.Dropout(1.0)
    # Whole channels are zeroed together.
    x2 = mx.ones((4, 3, 3, 64))
    y2 = np.array(nn.Dropout2d(0.5)(x2))
    per_channel = y2.reshape(4, 9, 64)
    assert np.all((per_channel == 0).all(1) | (per_channel == 2.0).all(1))
    y3 = np.array(nn.Dropout3d(0.5)(mx.ones((2, 2, 3, 3, 16)))).reshape(2, 18, 16)
    assert np.all((y3 == 0).all(1) | (y3 == 2.0).all(1))
    with pytest.raises(ValueError):
        nn.Dropout2d()(mx.ones((3, 3)))


def np_attention(q, k, v, mask=None):
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = s + mask
    return np_softmax(s) @ v


def test_multi_head_attention(device):
    B, L, S, D, H = 2, 3, 4, 8, 2
    mha = nn.MultiHeadAttention(D, H, bias=True)
    q, k, v = rand(B, L, D), rand(B, S, D), rand(B, S, D)
    P = {n: (np.array(mha[n].weight).astype(np.float64), np.array(mha[n].bias))
         for n in ["query_proj", "key_proj", "value_proj", "out_proj"]}

    def proj(name, x):
        w, b = P[name]
        return x @ w.T + b

    def heads(x):
        return x.reshape(B, x.shape[1], H, -1).transpose(0, 2, 1, 3)

    mask = np.where(RNG.uniform(size=(L, S)) > 0.3, 0.0, -1e9)
    # A row masked whole is uniform in float32 (-1e9 + s rounds to -1e9), as in
    # MLX, but not in the float64 reference: every query sees key 0.
    mask[:, 0] = 0.0
    o = np_attention(heads(proj("query_proj", q)), heads(proj("key_proj", k)),
                     heads(proj("value_proj", v)), mask)
    want = proj("out_proj", o.transpose(0, 2, 1, 3).reshape(B, L, D))
    got = mha(mx.array(q), mx.array(k), mx.array(v), mask=mx.array(mask.astype(np.float32)))
    close(got, want, rtol=1e-4, atol=1e-4)
    causal = np.array(nn.MultiHeadAttention.create_additive_causal_mask(3))
    assert causal[0, 0] == 0 and causal[2, 1] == 0 and causal[0, 1] == np.finfo(np.float32).min
    with pytest.raises(ValueError):
        nn.MultiHeadAttention(6, 4)


def test_transformer_encoder_runs_and_matches_layers(device):
    enc = nn.TransformerEncoder(2, 8, 2, mlp_dims=16)
    enc.eval()
    x = mx.array(rand(2, 5, 8))
    mask = nn.MultiHeadAttention.create_additive_causal_mask(5)
    y = x
    for layer in enc.layers:
        y = layer(y, mask)
    close(enc(x, mask), np.array(enc.ln(y)), rtol=1e-5, atol=1e-5)
    t = nn.Transformer(dims=8, num_heads=2, num_encoder_layers=1, num_decoder_layers=1,
                       mlp_dims=16)
    out = t(x, mx.array(rand(2, 3, 8)), None, None, None)
    assert out.shape == (2, 3, 8) and np.all(np.isfinite(np.array(out)))


def test_rnn_gru_lstm(device):
    x = rand(2, 3, 4).astype(np.float64)
    rnn = nn.RNN(4, 5)
    Wxh, Whh, b = (np.array(rnn[n]).astype(np.float64) for n in ["Wxh", "Whh", "bias"])
    h = np.zeros((2, 5))
    outs = []
    for t in range(3):
        h = np.tanh(x[:, t] @ Wxh.T + b + h @ Whh.T)
        outs.append(h)
    close(rnn(mx.array(x.astype(np.float32))), np.stack(outs, 1), rtol=1e-4, atol=1e-5)

    gru = nn.GRU(4, 5)
    Wx, Wh, bb, bhn = (np.array(gru[n]).astype(np.float64) for n in ["Wx", "Wh", "b", "bhn"])
    h = np.zeros((2, 5))
    outs = []
    for t in range(3):
        xp = x[:, t] @ Wx.T + bb
        hp = h @ Wh.T
        r = np_sigmoid(xp[:, :5] + hp[:, :5])
        z = np_sigmoid(xp[:, 5:10] + hp[:, 5:10])
        n = np.tanh(xp[:, 10:] + r * (hp[:, 10:] + bhn))
        h = (1 - z) * n + z * h
        outs.append(h)
    close(gru(mx.array(x.astype(np.float32))), np.stack(outs, 1), rtol=1e-4, atol=1e-5)

    lstm = nn.LSTM(4, 5)
    Wx, Wh, bb = (np.array(lstm[n]).astype(np.float64) for n in ["Wx", "Wh", "bias"])
    h = np.zeros((2, 5))
    c = np.zeros((2, 5))
    hs, cs = [], []
    for t in range(3):
        g = x[:, t] @ Wx.T + bb + h @ Wh.T
        i, f, gg, o = (g[:, j * 5:(j + 1) * 5] for j in range(4))
        c = np_sigmoid(f) * c + np_sigmoid(i) * np.tanh(gg)
        h = np_sigmoid(o) * np.tanh(c)
        hs.append(h)
        cs.append(c)
    got_h, got_c = lstm(mx.array(x.astype(np.float32)))
    close(got_h, np.stack(hs, 1), rtol=1e-4, atol=1e-5)
    close(got_c, np.stack(cs, 1), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("traditional", [False, True])
def test_rope(traditional, device):
    x = rand(1, 2, 5, 8).astype(np.float64)
    dims, base, scale, offset = 6, 10000.0, 0.5, 2
    rope = nn.RoPE(dims, traditional=traditional, base=base, scale=scale)
    pos = (np.arange(5) + offset) * scale
    freqs = base ** (-np.arange(dims // 2) / (dims // 2))
    th = pos[:, None] * freqs
    cos, sin = np.cos(th), np.sin(th)
    want = x.copy()
    if traditional:
        x1, x2 = x[..., 0:dims:2], x[..., 1:dims:2]
        want[..., 0:dims:2] = x1 * cos - x2 * sin
        want[..., 1:dims:2] = x1 * sin + x2 * cos
    else:
        x1, x2 = x[..., :dims // 2], x[..., dims // 2:dims]
        want[..., :dims // 2] = x1 * cos - x2 * sin
        want[..., dims // 2:dims] = x1 * sin + x2 * cos
    close(rope(mx.array(x.astype(np.float32)), offset=offset), want, rtol=1e-4, atol=1e-5)


def test_sinusoidal_and_alibi(device):
    pe = nn.SinusoidalPositionalEncoding(8, min_freq=0.01, max_freq=1.0)
    pos = np.array([0.0, 1.0, 5.0], np.float32)
    sig = np.exp(np.linspace(0, 1, 4)[::-1] * (math.log(1.0) - math.log(0.01)) + math.log(0.01))
    y = pos[:, None] * sig
    close(pe(mx.array(pos)), np.concatenate([np.sin(y), np.cos(y)], -1) * math.sqrt(2 / 8),
          rtol=1e-5, atol=1e-6)
    scores = rand(1, 2, 3, 3)
    slopes = np.array([(2 ** 8) ** (-(h + 1) / 2) for h in range(2)])
    dist = -np.abs(np.arange(3)[:, None] - np.arange(3)[None, :])
    close(nn.ALiBi()(mx.array(scores)), scores + slopes[:, None, None] * dist, rtol=1e-5)


# ---- initializers -----------------------------------------------------------

def test_init_functions(device):
    a = mx.zeros((64, 32))
    close(nn.init.constant(0.5)(a), np.full((64, 32), 0.5))
    close(nn.init.identity()(mx.zeros((3, 3))), np.eye(3))
    with pytest.raises(ValueError):
        nn.init.identity()(a)
    u = np.array(nn.init.uniform(-2.0, 1.0)(a))
    assert u.shape == (64, 32) and u.min() >= -2 and u.max() < 1 and abs(u.mean() + 0.5) < 0.1
    n = np.array(nn.init.normal(1.0, 0.5)(a))
    assert abs(n.mean() - 1.0) < 0.05 and abs(n.std() - 0.5) < 0.05
    fan_in, fan_out = 32, 64
    g = np.array(nn.init.glorot_uniform()(a, gain=2.0))
    assert np.abs(g).max() <= 2.0 * math.sqrt(6 / (fan_in + fan_out))
    assert abs(g.std() - 2.0 * math.sqrt(6 / (fan_in + fan_out)) / math.sqrt(3)) < 0.02
    g = np.array(nn.init.glorot_normal()(a))
    assert abs(g.std() - math.sqrt(2 / (fan_in + fan_out))) < 0.02
    h = np.array(nn.init.he_normal()(a, mode="fan_out"))
    assert abs(h.std() - 1 / math.sqrt(fan_out)) < 0.02
    h = np.array(nn.init.he_uniform()(a))
    assert np.abs(h).max() <= math.sqrt(3 / fan_in)
    with pytest.raises(ValueError):
        nn.init.he_normal()(mx.zeros((4,)))
    assert nn.init.constant(1.0, dtype=mx.float16)(a).dtype == mx.float16
    assert nn.init.normal(dtype=mx.float16)(a).dtype == mx.float16


# ---- Module semantics -------------------------------------------------------

class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = [nn.Linear(3, 4), nn.Linear(4, 2)]
        self.norm = nn.LayerNorm(2)
        self.scale = 2.0
        self._hidden = mx.ones((2,))
        self.extra = {"table": mx.zeros((2, 2))}

    def __call__(self, x):
        for layer in self.layers:
            x = nn.relu(layer(x))
        return self.norm(x) * self.scale


def test_module_storage_and_trees(device):
    m = MLP()
    assert isinstance(m, dict) and m.training
    assert "scale" not in m and m.scale == 2.0
    flat = dict(tree_flatten(m.parameters()))
    assert set(flat) == {"layers.0.weight", "layers.0.bias", "layers.1.weight",
                         "layers.1.bias", "norm.weight", "norm.bias", "extra.table"}
    children = m.children()
    assert isinstance(children["layers"], list) and children["layers"][0] is m.layers[0]
    assert children["norm"] is m.norm
    leaves = m.leaf_modules()
    assert leaves["layers"][1] is m.layers[1]
    assert len(m.modules()) == 4
    names = [k for k, _ in m.named_modules()]
    assert set(names) == {"", "layers.0", "layers.1", "norm"}
    assert "Linear(input_dims=3, output_dims=4, bias=True)" in repr(m)


def test_module_update_and_strict(device):
    m = MLP()
    w = mx.ones((4, 3))
    m.update({"layers": [{"weight": w}]})
    assert m.layers[0].weight is w
    with pytest.raises(ValueError):
        m.update({"nope": mx.ones(2)})
    with pytest.raises(ValueError):
        m.update({"layers": [{}, {}, {}]})
    with pytest.raises(ValueError):
        m.update({"norm": {"weight": 3}})
    m.update({"nope": mx.ones(2)}, strict=False)
    new = nn.Linear(4, 2)
    m.update_modules({"layers": [{}, new]})
    assert m.layers[1] is new
    with pytest.raises(ValueError):
        m.update_modules({"missing": new})
    m.apply(lambda p: p.astype(mx.float16))
    assert m.norm.weight.dtype == mx.float16
    seen = []
    m.apply_to_modules(lambda path, mod: seen.append(path))
    assert set(seen) == {"", "layers.0", "layers.1", "norm"}


def test_module_freeze_unfreeze(device):
    m = MLP()
    m.freeze()
    assert tree_flatten(m.trainable_parameters()) == []
    assert m.trainable_parameters()["layers"] == [{}, {}]
    m.unfreeze()
    assert len(tree_flatten(m.trainable_parameters())) == 7
    m.freeze(keys=["bias"])
    flat = dict(tree_flatten(m.trainable_parameters()))
    assert "layers.0.bias" not in flat and "layers.0.weight" in flat and "norm.bias" not in flat
    m.unfreeze(keys="bias")
    m.layers[0].freeze(recurse=False)
    flat = dict(tree_flatten(m.trainable_parameters()))
    assert "layers.0.weight" not in flat and "layers.1.weight" in flat
    m.freeze(recurse=False, keys="extra")
    assert "extra.table" not in dict(tree_flatten(m.trainable_parameters()))
    with pytest.raises(KeyError):
        m.freeze(keys="missing", strict=True)
    # Frozen entries still appear in parameters().
    assert len(tree_flatten(m.parameters())) == 7


def test_module_train_eval_and_set_dtype(device):
    m = MLP()
    m.eval()
    assert not m.training and not m.layers[0].training
    m.train()
    assert m.norm.training
    m.extra["ids"] = mx.array([1, 2])
    m.set_dtype(mx.float16)
    assert m.layers[0].weight.dtype == mx.float16 and m.extra["ids"].dtype == mx.int32
    m.set_dtype(mx.float32, predicate=None)
    assert m.extra["ids"].dtype == mx.float32


@pytest.mark.parametrize("ext", ["npz", "safetensors"])
def test_save_load_weights_round_trip(tmp_path, ext, device):
    m = MLP()
    path = str(tmp_path / f"w.{ext}")
    m.save_weights(path)
    other = MLP()
    other.load_weights(path)
    for (k1, a), (k2, b) in zip(tree_flatten(m.parameters()), tree_flatten(other.parameters())):
        assert k1 == k2
        np.testing.assert_array_equal(np.array(a), np.array(b))
    x = mx.array(rand(2, 3))
    close(other(x), np.array(m(x)))


def test_save_load_bfloat16_safetensors(tmp_path, device):
    m = nn.Linear(3, 2)
    m.set_dtype(mx.bfloat16)
    path = str(tmp_path / "w.safetensors")
    m.save_weights(path)
    other = nn.Linear(3, 2)
    other.load_weights(path)
    assert other.weight.dtype == mx.bfloat16
    np.testing.assert_array_equal(np.array(other.weight.astype(mx.float32)),
                                  np.array(m.weight.astype(mx.float32)))


def test_load_weights_strict_and_errors(tmp_path, device):
    m = nn.Linear(3, 2)
    with pytest.raises(ValueError):
        m.load_weights([("weight", mx.zeros((2, 3)))])
    with pytest.raises(ValueError):
        m.load_weights([("weight", mx.zeros((2, 3))), ("bias", mx.zeros((2,))),
                        ("other", mx.zeros((1,)))])
    with pytest.raises(ValueError):
        m.load_weights([("weight", mx.zeros((3, 3))), ("bias", mx.zeros((2,)))])
    m.load_weights([("weight", mx.zeros((2, 3)))], strict=False)
    close(m.weight, np.zeros((2, 3)))
    with pytest.raises(ValueError):
        m.save_weights(str(tmp_path / "w.pt"))
    with pytest.raises(ValueError):
        m.load_weights(str(tmp_path / "w.pt"))


def test_value_and_grad_matches_numpy(device):
    model = nn.Linear(3, 1)
    model.freeze(keys="bias")
    x, y = rand(8, 3), rand(8, 1)

    def loss_fn(x, y):
        return nn.losses.mse_loss(model(x), y)

    loss, grads = nn.value_and_grad(model, loss_fn)(mx.array(x), mx.array(y))
    W, b = np.array(model.weight).astype(np.float64), np.array(model.bias).astype(np.float64)
    r = x @ W.T + b - y
    close(loss, (r ** 2).mean(), rtol=1e-5)
    assert set(grads) == {"weight"}
    close(grads["weight"], 2 * (r * x).mean(0, keepdims=True), rtol=1e-4, atol=1e-6)


def test_training_loop_reduces_loss(device):
    model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3))
    x = mx.array(rand(32, 4))
    y = mx.array(RNG.integers(0, 3, size=32))
    opt = optim.Adam(0.05)

    def loss_fn(x, y):
        return nn.losses.cross_entropy(model(x), y, reduction="mean")

    step = nn.value_and_grad(model, loss_fn)
    first = None
    for _ in range(60):
        loss, grads = step(x, y)
        opt.update(model, grads)
        mx.eval(model.parameters(), opt.state)
        first = first if first is not None else loss.item()
    assert loss.item() < 0.5 * first


def test_checkpoint_gives_same_gradients(device):
    model = nn.Linear(3, 2)
    x = mx.array(rand(4, 3))

    def loss_plain(x):
        return model(x).sum()

    ckpt = nn.checkpoint(model)

    def loss_ckpt(x):
        return ckpt(x).sum()

    _, g1 = nn.value_and_grad(model, loss_plain)(x)
    _, g2 = nn.value_and_grad(model, loss_ckpt)(x)
    for (_, a), (_, b) in zip(tree_flatten(g1), tree_flatten(g2)):
        close(a, np.array(b))


# ---- pooling and convolution (through strided windows) ------------------------

def np_pool(x, k, s, p, fn, pad_value):
    n = len(k)
    x = np.pad(x, [(0, 0)] + [(q, q) for q in p] + [(0, 0)], constant_values=pad_value)
    out_sizes = [(x.shape[1 + i] - k[i]) // s[i] + 1 for i in range(n)]
    out = np.empty((x.shape[0], *out_sizes, x.shape[-1]))
    for idx in np.ndindex(*out_sizes):
        sl = tuple(slice(i * st, i * st + kk) for i, st, kk in zip(idx, s, k))
        window = x[(slice(None),) + sl + (slice(None),)]
        out[(slice(None),) + idx + (slice(None),)] = fn(window, axis=tuple(range(1, 1 + n)))
    return out


@pytest.mark.parametrize("cls,n,fn,pad_value", [
    (nn.MaxPool1d, 1, np.max, -np.inf), (nn.AvgPool1d, 1, np.mean, 0.0),
    (nn.MaxPool2d, 2, np.max, -np.inf), (nn.AvgPool2d, 2, np.mean, 0.0),
    (nn.MaxPool3d, 3, np.max, -np.inf), (nn.AvgPool3d, 3, np.mean, 0.0),
])
def test_pooling(cls, n, fn, pad_value, device):
    shape = (2,) + (7, 6, 5)[:n] + (3,)
    x = rand(*shape)
    for k, s, p in [(2, None, 0), (3, 2, 1), (2, 1, 0)]:
        kk = (k,) * n
        ss = kk if s is None else (s,) * n
        pp = (p,) * n
        close(cls(k, stride=s, padding=p)(mx.array(x)), np_pool(x, kk, ss, pp, fn, pad_value),
              rtol=1e-5, atol=1e-6)
    # A transposed view as input.
    view = mx.swapaxes(mx.array(np.ascontiguousarray(np.swapaxes(x, 0, 1))), 0, 1)
    close(cls(2)(view), np_pool(x, (2,) * n, (2,) * n, (0,) * n, fn, pad_value), rtol=1e-5)
    with pytest.raises(ValueError):
        cls(0)
    with pytest.raises(ValueError):
        cls(2, padding=-1)


def np_conv(x, w, stride, padding, dilation, groups):
    n = w.ndim - 2
    x = np.pad(x, [(0, 0)] + [(q, q) for q in padding] + [(0, 0)])
    k = w.shape[1:-1]
    span = [(k[i] - 1) * dilation[i] + 1 for i in range(n)]
    out_sizes = [(x.shape[1 + i] - span[i]) // stride[i] + 1 for i in range(n)]
    cg_in, cg_out = x.shape[-1] // groups, w.shape[0] // groups
    out = np.zeros((x.shape[0], *out_sizes, w.shape[0]))
    for idx in np.ndindex(*out_sizes):
        sl = tuple(slice(i * st, i * st + sp, d)
                   for i, st, sp, d in zip(idx, stride, span, dilation))
        window = x[(slice(None),) + sl + (slice(None),)]  # (N, *k, C_in)
        for g in range(groups):
            wg = w[g * cg_out:(g + 1) * cg_out]
            xg = window[..., g * cg_in:(g + 1) * cg_in]
            out[(slice(None),) + idx + (slice(g * cg_out, (g + 1) * cg_out),)] = np.tensordot(
                xg, wg, axes=(list(range(1, n + 2)), list(range(1, n + 2))))
    return out


@pytest.mark.parametrize("cls,n,kw", [
    (nn.Conv1d, 1, {}),
    (nn.Conv1d, 1, {"stride": 2, "padding": 1, "dilation": 2, "groups": 2}),
    (nn.Conv2d, 2, {}),
    (nn.Conv2d, 2, {"stride": (2, 1), "padding": (1, 2), "dilation": (1, 2), "groups": 2}),
    (nn.Conv3d, 3, {"stride": 2, "padding": 1}),
])
def test_convolution(cls, n, kw, device):
    c_in, c_out = 4, 6
    shape = (2,) + (9, 8, 7)[:n] + (c_in,)
    x = rand(*shape)
    conv = cls(c_in, c_out, 3, **kw)
    groups = kw.get("groups", 1)
    assert conv.weight.shape == (c_out,) + (3,) * n + (c_in // groups,)
    assert np.abs(np.array(conv.weight)).max() <= math.sqrt(1 / (c_in * 3 ** n))
    conv.bias = mx.array(rand(c_out))

    def as_tuple(v):
        return (v,) * n if isinstance(v, int) else tuple(v)

    want = np_conv(x.astype(np.float64), np.array(conv.weight).astype(np.float64),
                   as_tuple(kw.get("stride", 1)), as_tuple(kw.get("padding", 0)),
                   as_tuple(kw.get("dilation", 1)), groups) + np.array(conv.bias)
    close(conv(mx.array(x)), want, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError):
        nn.Conv1d(3, 4, 3, groups=2)


def test_convolution_gradient_matches_finite_differences(device):
    conv = nn.Conv1d(2, 3, 3, padding=1)
    x = mx.array(rand(1, 5, 2))

    def loss_fn(x):
        return mx.sum(mx.square(conv(x)))

    _, grads = nn.value_and_grad(conv, loss_fn)(x)
    w = np.array(conv.weight).astype(np.float64)
    eps = 1e-3
    for idx in [(0, 0, 0), (2, 1, 1), (1, 2, 0)]:
        wp, wm = w.copy(), w.copy()
        wp[idx] += eps
        wm[idx] -= eps
        xn = np.array(x).astype(np.float64)

        def f(wv):
            y = np_conv(xn, wv, (1,), (1,), (1,), 1) + np.array(conv.bias)
            return (y ** 2).sum()

        fd = (f(wp) - f(wm)) / (2 * eps)
        assert np.array(grads["weight"])[idx] == pytest.approx(fd, rel=1e-3, abs=1e-3)


# ---- upsampling ---------------------------------------------------------------

def test_upsample_nearest(device):
    x = rand(2, 3, 4, 2)
    got = nn.Upsample(scale_factor=2)(mx.array(x))
    close(got, x.repeat(2, axis=1).repeat(2, axis=2))
    got = nn.Upsample(scale_factor=(1.5, 0.5))(mx.array(x))
    rows = np.round((np.arange(4) + 0.5) * (3 / 4) - 0.5).astype(int)
    cols = (np.arange(2) * 2).astype(int)
    close(got, x[:, rows][:, :, cols])


@pytest.mark.parametrize("align_corners", [False, True])
def test_upsample_linear(align_corners, device):
    x = rand(1, 4, 3)
    got = nn.Upsample(scale_factor=2, mode="linear", align_corners=align_corners)(mx.array(x))
    m, n = 8, 4
    if align_corners:
        pos = np.arange(m) * (n - 1) / (m - 1)
    else:
        pos = np.clip((np.arange(m) + 0.5) / 2 - 0.5, 0, n - 1)
    want = np.stack([np.interp(pos, np.arange(n), x[0, :, c]) for c in range(3)], -1)[None]
    close(got, want, rtol=1e-5, atol=1e-6)
    # Two spatial dims: the resize is separable.
    x2 = rand(1, 3, 4, 2)
    got2 = nn.Upsample(scale_factor=(2, 1), mode="linear", align_corners=True)(mx.array(x2))
    pos = np.arange(6) * 2 / 5
    want2 = np.stack([[np.interp(pos, np.arange(3), x2[0, :, j, c]) for c in range(2)]
                      for j in range(4)])  # (W, C, H')
    close(got2, np.transpose(want2, (2, 0, 1))[None], rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError):
        nn.Upsample(2, mode="bicubic")
    with pytest.raises(ValueError):
        nn.Upsample(2, mode="nearest", antialias=True)


# What MLX 0.32.4 gives for x = i^2 / 7, i = 0..7, shape (1, 8, 1).
UPSAMPLE_MLX = [
    (dict(scale_factor=2.0, mode="cubic"),
     [-0.015067, 0.017299, 0.06529, 0.229911, 0.404018, 0.743304, 1.033482, 1.542411, 1.948661,
      2.627232, 3.149554, 3.997768, 4.63616, 5.729352, 6.634487, 7.19587]),
    (dict(scale_factor=1.5, mode="cubic", align_corners=True),
     [0.0, 0.04583, 0.236557, 0.500268, 0.89986, 1.482988, 2.024686, 2.831491, 3.749702,
      4.600943, 5.962431, 7.0]),
    (dict(scale_factor=0.5, mode="cubic", antialias=True), [0.058577, 0.88417, 2.965251, 5.970712]),
    (dict(scale_factor=0.5, mode="linear", antialias=True), [0.142857, 1.0, 3.0, 5.714286]),
    (dict(scale_factor=2.0, mode="cubic", antialias=True),
     [-0.012605, 0.017727, 0.081788, 0.223214, 0.4375, 0.723214, 1.080357, 1.508929, 2.008929,
      2.580357, 3.223214, 3.9375, 4.723214, 5.661941, 6.681961, 7.163865]),
]


@pytest.mark.parametrize("kwargs, want", UPSAMPLE_MLX, ids=lambda v: str(v)[:40])
def test_upsample_cubic_and_antialias_match_mlx(kwargs, want):
    x = (np.arange(8.0) ** 2 / 7).reshape(1, 8, 1).astype(np.float32)
    close(nn.Upsample(**kwargs)(mx.array(x)).reshape(-1), want, rtol=1e-5, atol=2e-6)


def test_upsample_cubic_is_separable_and_differentiable():
    x = rand(1, 4, 5, 2)
    up = nn.Upsample(scale_factor=(2, 0.5), mode="cubic", antialias=True)
    rows = nn.Upsample(scale_factor=(2, 1), mode="cubic", antialias=True)
    cols = nn.Upsample(scale_factor=(1, 0.5), mode="cubic", antialias=True)
    close(up(mx.array(x)), cols(rows(mx.array(x))), rtol=1e-5, atol=1e-6)
    # Linear in x: the gradient of sum(up(x) * c) is up's transpose applied to c.
    c = mx.array(rand(1, 8, 2, 2))
    g = mx.grad(lambda a: (up(a) * c).sum())(mx.array(x))
    e = np.eye(x.size).reshape(-1, *x.shape)
    cols_ = np.array([np.sum(np.array(up(mx.array(v.astype(np.float32)))) * np.array(c)) for v in e])
    close(g.reshape(-1), cols_, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="align_corners"):
        nn.Upsample(2, mode="cubic", align_corners=True, antialias=True)


def test_average_gradients_single_process_is_identity(device):
    grads = {"w": mx.array(rand(2, 2)), "l": [mx.array(rand(3))]}
    out = nn.average_gradients(grads)
    for (k1, a), (k2, b) in zip(tree_flatten(out), tree_flatten(grads)):
        assert k1 == k2
        np.testing.assert_array_equal(np.array(a), np.array(b))


def np_conv_transpose(x, w, stride, padding, dilation, output_padding):
    """y[i*s + j*d - p] += x[i] . w[j], by scattering every input position."""
    n = w.ndim - 2
    k = w.shape[1:-1]
    in_sizes = x.shape[1:-1]
    out_sizes = [(in_sizes[a] - 1) * stride[a] - 2 * padding[a] + dilation[a] * (k[a] - 1) + 1
                 + output_padding[a] for a in range(n)]
    y = np.zeros((x.shape[0], *out_sizes, w.shape[0]))
    for i in np.ndindex(*in_sizes):
        for j in np.ndindex(*k):
            o = [i[a] * stride[a] + j[a] * dilation[a] - padding[a] for a in range(n)]
            if all(0 <= o[a] < out_sizes[a] for a in range(n)):
                xi = x[(slice(None),) + i]  # (N, C_in)
                wj = w[(slice(None),) + j]  # (C_out, C_in)
                y[(slice(None),) + tuple(o)] += xi @ wj.T
    return y


@pytest.mark.parametrize("cls,n,kw", [
    (nn.ConvTranspose1d, 1, {}),
    (nn.ConvTranspose1d, 1, {"stride": 2, "padding": 1, "dilation": 2, "output_padding": 1}),
    (nn.ConvTranspose1d, 1, {"stride": 3, "padding": 4}),
    (nn.ConvTranspose2d, 2, {"stride": (2, 1), "padding": (1, 0), "output_padding": (1, 0)}),
    (nn.ConvTranspose3d, 3, {"stride": 2}),
])
def test_conv_transpose(cls, n, kw, device):
    c_in, c_out = 3, 2
    x = rand(*((2,) + (5, 4, 3)[:n] + (c_in,)))
    conv = cls(c_in, c_out, 3, **kw)
    assert conv.weight.shape == (c_out,) + (3,) * n + (c_in,)
    conv.bias = mx.array(rand(c_out))

    def as_tuple(v):
        return (v,) * n if isinstance(v, int) else tuple(v)

    want = np_conv_transpose(x.astype(np.float64), np.array(conv.weight).astype(np.float64),
                             as_tuple(kw.get("stride", 1)), as_tuple(kw.get("padding", 0)),
                             as_tuple(kw.get("dilation", 1)),
                             as_tuple(kw.get("output_padding", 0))) + np.array(conv.bias)
    close(conv(mx.array(x)), want, rtol=1e-4, atol=1e-4)


def test_init_sparse_and_orthogonal(device):
    a = mx.zeros((20, 10))
    s = np.array(nn.init.sparse(0.25, mean=0.0, std=1.0)(a))
    assert s.shape == (20, 10)
    assert np.all((s == 0).sum(1) == math.ceil(0.25 * 10))
    assert np.all(s[s != 0] != 0) and np.abs(s).max() > 0
    with pytest.raises(ValueError):
        nn.init.sparse(0.5)(mx.zeros((2, 2, 2)))
    for shape in [(6, 6), (8, 4), (3, 7)]:
        q = np.array(nn.init.orthogonal(gain=2.0)(mx.zeros(shape))).astype(np.float64)
        assert q.shape == shape
        r, c = shape
        gram = q.T @ q if r >= c else q @ q.T
        np.testing.assert_allclose(gram, 4.0 * np.eye(min(r, c)), atol=1e-4)
    with pytest.raises(ValueError):
        nn.init.orthogonal()(mx.zeros((3,)))
