"""The ``mlx`` alias: MLX's module names resolve to Tessera's modules.

After ``install()``, ``import mlx.core as mx``, ``import mlx.nn as nn``,
``from mlx.utils import tree_flatten`` and every submodule
(``mlx.core.fast``, ``mlx.nn.layers.distributed``, ...) give the Tessera
module of the same path (``tessera.core``, ``tessera.nn``, ...): the very same
module objects, so a program may mix both names. ``mlx.__version__`` is the MLX
version whose interface Tessera implements.

Two ways in (docs/mlx.md):

* ``python -m tessera.run script.py ...`` (or ``-m module ...``) installs the
  alias for one run (tessera/run.py);
* the companion distribution in python/mlx-alias installs a package ``mlx``
  whose ``__init__`` calls ``install()``.
"""

import importlib
import importlib.abc
import importlib.machinery
import sys
import types

#: The MLX release whose Python interface Tessera implements.
MLX_VERSION = "0.32.4"

_PREFIX = "mlx."


class _AliasFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``mlx.X.Y`` as ``tessera.X.Y`` and loads it as that same module."""

    def find_spec(self, fullname, path=None, target=None):
        if not fullname.startswith(_PREFIX):
            return None
        name = "tessera." + fullname[len(_PREFIX):]
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name is not None and (name == e.name or name.startswith(e.name + ".")):
                return None  # no such Tessera module: "No module named 'mlx.…'"
            raise
        spec = importlib.machinery.ModuleSpec(fullname, self)
        spec._tessera_module = module
        return spec

    def create_module(self, spec):
        module = spec._tessera_module
        _alias_submodules(spec.name, module)
        return module

    def exec_module(self, module):
        pass  # already executed under its Tessera name


def _alias_submodules(alias, module):
    """Registers ``alias.X`` for every imported ``tessera...X`` below module
    (the native submodules of tessera.core are modules without a package
    path, reachable only through sys.modules)."""
    name = module.__name__ + "."
    for key, sub in list(sys.modules.items()):
        if key.startswith(name) and isinstance(sub, types.ModuleType):
            sys.modules.setdefault(alias + "." + key[len(name):], sub)


_finder = _AliasFinder()


def install(package=None):
    """Makes ``mlx`` and its submodules resolve to Tessera's modules.

    ``package`` is the module to serve as ``mlx`` (the companion
    distribution's own package); by default an empty package is made. Returns
    that module. Calling it again does nothing more.
    """
    import tessera  # noqa: F401  (registers tessera.core's native submodules)

    existing = sys.modules.get("mlx")
    if existing is not None and existing is not package and not installed():
        raise ImportError(f"[mlx alias] a real MLX is already imported (from "
                          f"{list(getattr(existing, '__path__', []))}): install the alias "
                          f"before any import of mlx")
    if _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)
    mlx = package or existing
    if mlx is None:
        mlx = types.ModuleType("mlx", "MLX's interface, served by Tessera")
        mlx.__path__ = []
        mlx.__spec__ = importlib.machinery.ModuleSpec("mlx", None, is_package=True)
    mlx.__version__ = MLX_VERSION
    mlx.__tessera_alias__ = True
    sys.modules["mlx"] = mlx
    return mlx


def installed():
    """True when ``mlx`` is Tessera's alias in this process."""
    return getattr(sys.modules.get("mlx"), "__tessera_alias__", False)
