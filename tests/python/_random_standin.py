"""A NumPy-backed stand-in for ``tessera.core.random``, installed only while the
native module lacks it, so that layers whose parameters start random can be
tested. Tests that need specific random numbers do not rely on it: they set the
parameters they compare against."""

import numpy as np

import tessera.core as mx


class _RandomStandIn:
    def __init__(self):
        self._rng = np.random.default_rng(0)

    def seed(self, seed):
        self._rng = np.random.default_rng(seed)

    @staticmethod
    def _np_dtype(dtype):
        return {mx.float32: np.float32, mx.float16: np.float16,
                mx.float64: np.float64}.get(dtype, np.float32)

    def uniform(self, low=0.0, high=1.0, shape=(), dtype=mx.float32, key=None, stream=None):
        low = np.array(low, dtype=np.float64)
        high = np.array(high, dtype=np.float64)
        values = self._rng.uniform(size=tuple(shape)) * (high - low) + low
        return mx.array(values.astype(np.float32)).astype(dtype)

    def normal(self, shape=(), dtype=mx.float32, loc=None, scale=None, key=None, stream=None):
        values = self._rng.standard_normal(size=tuple(shape))
        if scale is not None:
            values = values * np.array(scale)
        if loc is not None:
            values = values + np.array(loc)
        return mx.array(values.astype(np.float32)).astype(dtype)

    def bernoulli(self, p=0.5, shape=None, key=None, stream=None):
        p = np.array(p, dtype=np.float64)
        shape = p.shape if shape is None else tuple(shape)
        return mx.array(self._rng.uniform(size=shape) < p)


def install():
    if not hasattr(mx, "random"):
        mx.random = _RandomStandIn()


install()
