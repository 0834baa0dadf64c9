"""Dropout layers (identity in eval mode or with p = 0)."""

import tessera.core as mx
from tessera.nn.layers.base import Module


def _check_p(cls, p):
    if p < 0 or p >= 1:
        raise ValueError(f"[{cls}] the dropout probability should be in [0, 1) but is {p}")


class Dropout(Module):
    """Zeros each element with probability ``p`` and scales the rest by 1/(1-p)."""

    def __init__(self, p: float = 0.5):
        super().__init__()
        _check_p("Dropout", p)
        self._p_1 = 1 - p

    def _extra_repr(self):
        return f"p={1 - self._p_1}"

    def __call__(self, x):
        if self._p_1 == 1 or not self.training:
            return x
        mask = mx.random.bernoulli(self._p_1, x.shape)
        return (mask * x) * (1 / self._p_1)


class Dropout2d(Module):
    """Zeros whole channels of ``(N, H, W, C)`` or ``(H, W, C)`` inputs."""

    def __init__(self, p: float = 0.5):
        super().__init__()
        _check_p("Dropout2d", p)
        self._p_1 = 1 - p

    def _extra_repr(self):
        return f"p={1 - self._p_1}"

    def __call__(self, x):
        if x.ndim not in (3, 4):
            raise ValueError(f"[Dropout2d] expected a 3-D or 4-D input but got {x.ndim}-D")
        if self._p_1 == 1 or not self.training:
            return x
        mask_shape = list(x.shape)
        mask_shape[-2] = mask_shape[-3] = 1
        mask = mx.random.bernoulli(p=self._p_1, shape=mask_shape)
        return (1 / self._p_1) * mask * x


class Dropout3d(Module):
    """Zeros whole channels of ``(N, D, H, W, C)`` or ``(D, H, W, C)`` inputs."""

    def __init__(self, p: float = 0.5):
        super().__init__()
        _check_p("Dropout3d", p)
        self._p_1 = 1 - p

    def _extra_repr(self):
        return f"p={1 - self._p_1}"

    def __call__(self, x):
        if x.ndim not in (4, 5):
            raise ValueError(f"[Dropout3d] expected a 4-D or 5-D input but got {x.ndim}-D")
        if self._p_1 == 1 or not self.training:
            return x
        mask_shape = list(x.shape)
        mask_shape[-2] = mask_shape[-3] = mask_shape[-4] = 1
        mask = mx.random.bernoulli(p=self._p_1, shape=mask_shape)
        return (1 / self._p_1) * mask * x
