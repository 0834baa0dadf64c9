"""Dropout layers (identity in eval mode or with p = 0)."""

import tessera.core as mx
from tessera.nn.layers.base import Module


class _Dropout(Module):
    """Keeps each entry of a mask with probability 1 - p and scales what it
    keeps by 1/(1 - p). One entry spans the ``_spatial`` axes before the last
    (whole channels); ``_ranks`` are the input ranks accepted (None: any)."""

    _spatial = 0
    _ranks = None

    def __init__(self, p: float = 0.5):
        super().__init__()
        if p < 0 or p >= 1:
            raise ValueError(f"[{type(self).__name__}] the dropout probability should be in "
                             f"[0, 1) but is {p}")
        self._p_1 = 1 - p

    def _extra_repr(self):
        return f"p={1 - self._p_1}"

    def __call__(self, x):
        if self._ranks is not None and x.ndim not in self._ranks:
            raise ValueError(f"[{type(self).__name__}] expected a {self._ranks[0]}-D or "
                             f"{self._ranks[1]}-D input but got {x.ndim}-D")
        if self._p_1 == 1 or not self.training:
            return x
        mask_shape = list(x.shape)
        for axis in range(2, 2 + self._spatial):
            mask_shape[-axis] = 1
        mask = mx.random.bernoulli(p=self._p_1, shape=mask_shape)
        return (1 / self._p_1) * mask * x


class Dropout(_Dropout):
    """Zeros each element with probability ``p`` and scales the rest by 1/(1-p)."""


class Dropout2d(_Dropout):
    """Zeros whole channels of ``(N, H, W, C)`` or ``(H, W, C)`` inputs."""

    _spatial = 2
    _ranks = (3, 4)


class Dropout3d(_Dropout):
    """Zeros whole channels of ``(N, D, H, W, C)`` or ``(D, H, W, C)`` inputs."""

    _spatial = 3
    _ranks = (4, 5)
