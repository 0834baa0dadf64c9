"""Stand-ins, written with existing ops, for core ops that tessera.core does not
have yet (each is used only when the core op is missing)."""

import math

import tessera.core as mx


def layer_norm(x, weight, bias, eps):
    fast = getattr(mx, "fast", None)
    if fast is not None and hasattr(fast, "layer_norm"):
        return fast.layer_norm(x, weight, bias, eps)
    mean = mx.mean(x, axis=-1, keepdims=True)
    var = mx.var(x, axis=-1, keepdims=True)
    y = (x - mean) * mx.rsqrt(var + eps)
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y


def rms_norm(x, weight, eps):
    fast = getattr(mx, "fast", None)
    if fast is not None and hasattr(fast, "rms_norm"):
        return fast.rms_norm(x, weight, eps)
    y = x * mx.rsqrt(mx.mean(mx.square(x), axis=-1, keepdims=True) + eps)
    return y if weight is None else y * weight


def scaled_dot_product_attention(q, k, v, *, scale, mask=None):
    """``softmax(scale * q @ k^T + mask) @ v`` with GQA/MQA head broadcasting."""
    fast = getattr(mx, "fast", None)
    if fast is not None and hasattr(fast, "scaled_dot_product_attention"):
        return fast.scaled_dot_product_attention(q, k, v, scale=scale, mask=mask)
    n_q, n_kv = q.shape[-3], k.shape[-3]
    if n_q != n_kv:
        rep = n_q // n_kv
        k = mx.repeat(k, rep, axis=-3)
        v = mx.repeat(v, rep, axis=-3)
    scores = (q * scale) @ mx.swapaxes(k, -1, -2)
    if isinstance(mask, str):
        if mask != "causal":
            raise ValueError(f"[scaled_dot_product_attention] unknown mask {mask!r}")
        t_q, t_k = q.shape[-2], k.shape[-2]
        keep = mx.expand_dims(mx.arange(t_q), -1) + (t_k - t_q) >= mx.arange(t_k)
        scores = mx.where(keep, scores, mx.finfo(scores.dtype).min)
    elif mask is not None:
        if mask.dtype == mx.bool_:
            scores = mx.where(mask, scores, mx.finfo(scores.dtype).min)
        else:
            scores = scores + mask
    return mx.softmax(scores.astype(mx.float32), axis=-1).astype(q.dtype) @ v


def rope(x, dims, *, traditional, base, scale, offset):
    fast = getattr(mx, "fast", None)
    if fast is not None and hasattr(fast, "rope"):
        return fast.rope(x, dims, traditional=traditional, base=base, scale=scale,
                         offset=offset)
    t = x.shape[-2]
    half = dims // 2
    positions = (mx.arange(t).astype(mx.float32) + offset) * scale
    freqs = mx.exp(-mx.arange(half).astype(mx.float32) * (math.log(base) / half))
    theta = mx.expand_dims(positions, -1) * freqs
    cos, sin = mx.cos(theta).astype(x.dtype), mx.sin(theta).astype(x.dtype)
    rot, rest = x[..., :dims], x[..., dims:]
    if traditional:
        pairs = mx.reshape(rot, tuple(rot.shape[:-1]) + (half, 2))
        x1, x2 = pairs[..., 0], pairs[..., 1]
        y1 = x1 * cos - x2 * sin
        y2 = x1 * sin + x2 * cos
        out = mx.reshape(mx.stack([y1, y2], axis=-1), rot.shape)
    else:
        x1, x2 = rot[..., :half], rot[..., half:]
        out = mx.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1)
    if dims < x.shape[-1]:
        out = mx.concatenate([out, rest], axis=-1)
    return out
