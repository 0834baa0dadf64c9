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


def _install_reprlib_fix():
    """reprlib (pytest's assertion messages, the debugger) takes any class named
    ``array`` for the standard library's array.array and calls bool() on it, which
    raises for an array of several elements: show Tessera's arrays as instances."""
    import array as _stdarray
    import reprlib

    standard = reprlib.Repr.repr_array

    def repr_array(self, x, level):
        if isinstance(x, _stdarray.array):
            return standard(self, x, level)
        return self.repr_instance(x, level)

    reprlib.Repr.repr_array = repr_array


_install_reprlib_fix()

__version__ = core.__version__


def _dtype_from_name(name):
    """Unpickles a Dtype (Dtype.__reduce__ names this function)."""
    return getattr(core, "bool_" if name == "bool" else name)
