"""Tessera: lazy arrays and machine learning on CPUs and NVIDIA GPUs, with MLX's interface.

    import tessera.core as mx
    a = mx.ones((2, 3))
    b = (a @ a.T + 1).sum()
    print(b.item())
"""

from . import core
from . import _transforms

_transforms.install(core)

__version__ = core.__version__
