"""Initializers: each factory returns ``init_fn(a)``
giving a new array of ``a.shape``."""

import math
from typing import Callable, Literal

import tessera.core as mx


def constant(value: float, dtype=mx.float32) -> Callable:
    """All ``value``."""

    def initializer(a):
        return mx.full(a.shape, value, dtype=dtype)

    return initializer


def normal(mean: float = 0.0, std: float = 1.0, dtype=mx.float32) -> Callable:
    """N(mean, std)."""

    def initializer(a):
        return mx.random.normal(shape=a.shape, scale=std, loc=mean, dtype=dtype)

    return initializer


def uniform(low: float = 0.0, high: float = 1.0, dtype=mx.float32) -> Callable:
    """U[low, high)."""

    def initializer(a):
        return mx.random.uniform(low, high, a.shape, dtype=dtype)

    return initializer


def identity(dtype=mx.float32) -> Callable:
    """The identity matrix; ``a`` must be square 2-D."""

    def initializer(arr):
        if arr.ndim != 2 or arr.shape[0] != arr.shape[1]:
            raise ValueError(f"[identity] the input array must be square 2-D but has "
                             f"shape {arr.shape}")
        return mx.eye(n=arr.shape[0], dtype=dtype)

    return initializer


def _calculate_fan_in_fan_out(x):
    if x.ndim < 2:
        raise ValueError(f"[init] glorot / he initialization needs at least 2 dims, "
                         f"but the array has {x.ndim}")
    fan_in = x.shape[-1]
    fan_out = x.shape[0]
    if x.ndim > 2:
        receptive_field = 1
        for d in x.shape[1:-1]:
            receptive_field *= d
        fan_in = fan_in * receptive_field
        fan_out = fan_out * receptive_field
    return fan_in, fan_out


def glorot_normal(dtype=mx.float32) -> Callable:
    """N(0, gain * sqrt(2 / (fan_in + fan_out)))."""

    def initializer(a, gain: float = 1.0):
        fan_in, fan_out = _calculate_fan_in_fan_out(a)
        std = gain * math.sqrt(2.0 / (fan_in + fan_out))
        return mx.random.normal(shape=a.shape, dtype=dtype) * std

    return initializer


def glorot_uniform(dtype=mx.float32) -> Callable:
    """U(± gain * sqrt(6 / (fan_in + fan_out)))."""

    def initializer(a, gain: float = 1.0):
        fan_in, fan_out = _calculate_fan_in_fan_out(a)
        limit = gain * math.sqrt(6.0 / (fan_in + fan_out))
        return mx.random.uniform(-limit, limit, a.shape, dtype=dtype)

    return initializer


def _fan(a, mode):
    fan_in, fan_out = _calculate_fan_in_fan_out(a)
    if mode == "fan_in":
        return fan_in
    if mode == "fan_out":
        return fan_out
    raise ValueError(f"[he_init] mode must be 'fan_in' or 'fan_out' but is {mode!r}")


def he_normal(dtype=mx.float32) -> Callable:
    """N(0, gain / sqrt(fan))."""

    def initializer(a, mode: Literal["fan_in", "fan_out"] = "fan_in", gain: float = 1.0):
        std = gain / math.sqrt(_fan(a, mode))
        return mx.random.normal(shape=a.shape, dtype=dtype) * std

    return initializer


def he_uniform(dtype=mx.float32) -> Callable:
    """U(± gain * sqrt(3 / fan))."""

    def initializer(a, mode: Literal["fan_in", "fan_out"] = "fan_in", gain: float = 1.0):
        limit = gain * math.sqrt(3.0 / _fan(a, mode))
        return mx.random.uniform(-limit, limit, a.shape, dtype=dtype)

    return initializer


def sparse(sparsity: float, mean: float = 0.0, std: float = 1.0, dtype=mx.float32) -> Callable:
    """2-D only: N(mean, std) values with ``ceil(sparsity * cols)`` random zeros per row."""

    def initializer(a):
        if a.ndim != 2:
            raise ValueError(f"[sparse] only 2-D arrays are supported, got {a.ndim}-D")
        rows, cols = a.shape
        num_zeros = int(math.ceil(sparsity * cols))
        u = mx.random.uniform(shape=a.shape)
        # Rank of each entry within its row (ties have probability zero); the
        # num_zeros lowest ranks of a row are zeroed.
        rank = mx.sum(mx.expand_dims(u, 1) < mx.expand_dims(u, 2), axis=-1)
        values = mx.random.normal(shape=a.shape, scale=std, loc=mean, dtype=dtype)
        return mx.where(rank < num_zeros, mx.zeros_like(values), values)

    return initializer


def orthogonal(gain: float = 1.0, dtype=mx.float32) -> Callable:
    """2-D only: (semi-)orthogonal matrix, the Q of a Gaussian matrix's QR (signs
    so that R has a positive diagonal), times ``gain``."""

    def initializer(a):
        if a.ndim != 2:
            raise ValueError(f"[orthogonal] only 2-D arrays are supported, got {a.ndim}-D")
        rows, cols = a.shape
        n = max(rows, cols)
        rmat = mx.random.normal(shape=(n, n))
        linalg = getattr(mx, "linalg", None)
        if linalg is not None and hasattr(linalg, "qr"):
            q, r = linalg.qr(rmat, stream=mx.cpu)
            q = q * mx.sign(mx.diag(r))
        else:
            q = _gram_schmidt(rmat)
        return (q[:rows, :cols] * gain).astype(dtype)

    return initializer


def _gram_schmidt(m):
    """Q of the QR factorisation of a square matrix (positive diagonal of R),
    by modified Gram-Schmidt on its columns, twice for accuracy."""
    cols = []
    for j in range(m.shape[1]):
        v = m[:, j]
        for _ in range(2):
            for q in cols:
                v = v - mx.sum(q * v) * q
        v = v / mx.sqrt(mx.sum(v * v))
        cols.append(v)
        mx.eval(v)
    return mx.stack(cols, axis=1)
