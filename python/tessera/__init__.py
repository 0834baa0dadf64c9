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


def _dtype_from_name(name):
    """Unpickles a Dtype (Dtype.__reduce__ names this function)."""
    return getattr(core, "bool_" if name == "bool" else name)
