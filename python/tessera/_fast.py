"""tessera.core.fast (reference submodules.md §4): rms_norm, layer_norm, rope and
scaled_dot_product_attention with the reference's semantics, composed of core
ops (no fused kernels: docs/differences.md). Normalisations, rotations and the
attention softmax compute in float32 and return the input's dtype."""

import contextlib
import sys
import types

from . import core as mx


def _on(stream):
    return mx.stream(stream) if stream is not None else contextlib.nullcontext()


def _check_weight(op, w, x, what):
    if w is not None and (w.ndim != 1 or w.shape[0] != x.shape[-1]):
        raise ValueError(f"[{op}] {what} must be 1-D of size {x.shape[-1]} (the last axis "
                         f"of x), got shape {tuple(w.shape)}")


def rms_norm(x, weight, eps, *, stream=None):
    """x * rsqrt(mean(x**2, axis=-1) + eps) * weight."""
    _check_weight("rms_norm", weight, x, "weight")
    with _on(stream):
        xf = x.astype(mx.float32)
        y = (xf * mx.rsqrt(mx.mean(mx.square(xf), axis=-1, keepdims=True) + eps)).astype(x.dtype)
        return y if weight is None else y * weight


def layer_norm(x, weight, bias, eps, *, stream=None):
    """(x - mean) * rsqrt(var + eps) * weight + bias over the last axis."""
    _check_weight("layer_norm", weight, x, "weight")
    _check_weight("layer_norm", bias, x, "bias")
    with _on(stream):
        xf = x.astype(mx.float32)
        mean = mx.mean(xf, axis=-1, keepdims=True)
        var = mx.var(xf, axis=-1, keepdims=True)
        y = ((xf - mean) * mx.rsqrt(var + eps)).astype(x.dtype)
        if weight is not None:
            y = y * weight
        if bias is not None:
            y = y + bias
        return y


def rope(a, dims, *, traditional, base, scale, offset, freqs=None, stream=None):
    """Rotary position embedding of the first `dims` features of a (B, *, T, D)."""
    if a.ndim < 3:
        raise ValueError(f"[rope] expected an input of at least 3 dimensions (B, *, T, D), "
                         f"got shape {tuple(a.shape)}")
    if not mx.issubdtype(a.dtype, mx.floating):
        raise ValueError(f"[rope] expected a floating input, got {a.dtype}")
    if dims <= 0 or dims % 2 or dims > a.shape[-1]:
        raise ValueError(f"[rope] dims must be even, positive and at most {a.shape[-1]}, "
                         f"got {dims}")
    if (base is None) == (freqs is None):
        raise ValueError("[rope] exactly one of base and freqs must be given")
    half = dims // 2
    with _on(stream):
        if freqs is not None:
            if tuple(freqs.shape) != (half,):
                raise ValueError(f"[rope] freqs must have shape ({half},), got "
                                 f"{tuple(freqs.shape)}")
            inv = 1.0 / freqs.astype(mx.float32)
        else:
            inv = mx.power(mx.array(float(base), mx.float32),
                           -mx.arange(half).astype(mx.float32) / half)
        positions = mx.arange(a.shape[-2]).astype(mx.float32)
        if isinstance(offset, mx.array):
            off = offset.astype(mx.float32)
            if off.ndim == 1:
                if off.shape[0] != a.shape[0]:
                    raise ValueError(f"[rope] an offset array has one entry per batch element "
                                     f"({a.shape[0]}), got shape {tuple(offset.shape)}")
                off = mx.reshape(off, (a.shape[0],) + (1,) * (a.ndim - 2))
            elif off.ndim != 0:
                raise ValueError(f"[rope] offset must be a scalar or 1-D, got shape "
                                 f"{tuple(offset.shape)}")
            positions = positions + off
        else:
            positions = positions + float(offset)
        theta = mx.expand_dims(positions * scale, -1) * inv
        cos, sin = mx.cos(theta), mx.sin(theta)
        rot = a[..., :dims].astype(mx.float32)
        if traditional:
            pairs = mx.reshape(rot, tuple(rot.shape[:-1]) + (half, 2))
            x1, x2 = pairs[..., 0], pairs[..., 1]
            out = mx.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1)
            out = mx.reshape(out, tuple(out.shape[:-2]) + (dims,))
        else:
            x1, x2 = rot[..., :half], rot[..., half:]
            out = mx.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1)
        out = out.astype(a.dtype)
        if dims < a.shape[-1]:
            out = mx.concatenate([out, a[..., dims:]], axis=-1)
        return out


def scaled_dot_product_attention(q, k, v, *, scale, mask=None, sinks=None, force_fused=False,
                                 stream=None):
    """softmax(scale * q @ k.T + mask) @ v over heads (B, N, T, D); N_q a multiple of
    N_kv (grouped-query attention without repeating k and v); softmax in float32."""
    op = "scaled_dot_product_attention"
    if force_fused:
        raise ValueError(f"[{op}] there is no fused kernel: force_fused=True cannot be met")
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        raise ValueError(f"[{op}] q, k and v must be (B, N, T, D), got shapes "
                         f"{tuple(q.shape)}, {tuple(k.shape)} and {tuple(v.shape)}")
    b, n_q, t_q, d = q.shape
    n_kv, t_kv = k.shape[1], k.shape[2]
    if n_q % n_kv or v.shape[1] != n_kv or v.shape[2] != t_kv or k.shape[3] != d:
        raise ValueError(f"[{op}] shapes q {tuple(q.shape)}, k {tuple(k.shape)} and v "
                         f"{tuple(v.shape)} do not match (N_q must be a multiple of N_kv)")
    rep = n_q // n_kv
    with _on(stream):
        qg = mx.reshape(q.astype(mx.float32) * scale, (b, n_kv, rep, t_q, d))
        kg = mx.expand_dims(k.astype(mx.float32), 2)
        scores = qg @ mx.swapaxes(kg, -1, -2)  # (B, N_kv, rep, T_q, T_kv)
        lowest = mx.finfo(mx.float32).min
        full = (b, n_q, t_q, t_kv)
        if isinstance(mask, str):
            if mask != "causal":
                raise ValueError(f"[{op}] mask must be 'causal', an array or None, "
                                 f"got {mask!r}")
            keep = mx.expand_dims(mx.arange(t_q), -1) + (t_kv - t_q) >= mx.arange(t_kv)
            scores = mx.where(keep, scores, lowest)
        elif mask is not None:
            if mask.ndim > 4:
                raise ValueError(f"[{op}] a mask has at most 4 dimensions, got shape "
                                 f"{tuple(mask.shape)}")
            m = mx.reshape(mx.broadcast_to(mask, full), (b, n_kv, rep, t_q, t_kv))
            if mask.dtype == mx.bool_:
                scores = mx.where(m, scores, lowest)
            else:
                result = mx.result_type(q.dtype, mask.dtype)
                if result != q.dtype:
                    raise ValueError(f"[{op}] an additive mask of dtype {mask.dtype} does not "
                                     f"promote to the inputs' dtype {q.dtype}")
                scores = scores + m.astype(mx.float32)
        if sinks is not None:
            if tuple(sinks.shape) != (n_q,):
                raise ValueError(f"[{op}] sinks must have shape ({n_q},), got "
                                 f"{tuple(sinks.shape)}")
            column = mx.broadcast_to(
                mx.reshape(sinks.astype(mx.float32), (1, n_kv, rep, 1, 1)),
                (b, n_kv, rep, t_q, 1))
            probs = mx.softmax(mx.concatenate([scores, column], axis=-1), axis=-1)[..., :t_kv]
        else:
            probs = mx.softmax(scores, axis=-1)
        out = probs.astype(v.dtype) @ mx.expand_dims(v, 2)
        return mx.reshape(out, (b, n_q, t_q, v.shape[3]))


def install(module):
    fast = types.ModuleType(f"{module.__name__}.fast", __doc__)
    for name in ("rms_norm", "layer_norm", "rope", "scaled_dot_product_attention"):
        setattr(fast, name, globals()[name])
    module.fast = fast
    sys.modules[fast.__name__] = fast
