"""Sequential container."""

from typing import Callable

from tessera.nn.layers.base import Module


class Sequential(Module):
    """Applies the callables in ``layers`` in order."""

    def __init__(self, *modules: Callable):
        super().__init__()
        self.layers = list(modules)

    def __call__(self, x):
        for m in self.layers:
            x = m(x)
        return x
