"""Tessera: lazy arrays and machine learning on CPUs and NVIDIA GPUs, with MLX's interface.

    import tessera.core as mx
    a = mx.ones((2, 3))
    b = (a @ a.T + 1).sum()
    print(b.item())
"""

import sys

from . import core
from . import _transforms

# The native submodules importable by name too (import tessera.core.linalg).
for _name in ("cuda", "distributed", "fast", "fft", "linalg", "metal", "random"):
    sys.modules[f"{__name__}.core.{_name}"] = getattr(core, _name)

_transforms.install(core)

__version__ = core.__version__


def _dtype_from_name(name):
    """Unpickles a Dtype (Dtype.__reduce__ names this function)."""
    return getattr(core, "bool_" if name == "bool" else name)
