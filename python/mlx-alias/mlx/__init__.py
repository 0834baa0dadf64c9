"""``mlx``, served by Tessera: ``import mlx.core as mx`` gives ``tessera.core``,
and so on for every MLX module (tessera/mlx_alias.py)."""

import importlib.metadata as _md
import os as _os
import sys as _sys


def _real_mlx_beside():
    """A real MLX in this environment: its distribution, or its native module
    in this very directory (installed over this package)."""
    here = _os.path.dirname(__file__)
    for f in _os.listdir(here):
        if f.startswith("core.") and f.endswith((".so", ".pyd")):
            return _os.path.join(here, f)
    for name in ("mlx", "mlx-metal", "mlx-cpu", "mlx-cuda"):
        try:
            return f"{name} {_md.version(name)}"
        except _md.PackageNotFoundError:
            pass
    return None


_found = _real_mlx_beside()
if _found is not None:
    raise ImportError(
        f"tessera-mlx-alias: a real MLX is installed in this environment ({_found}); the "
        f"alias does not shadow it. Uninstall one of them (pip uninstall tessera-mlx-alias), "
        f"or run programs with `python -m tessera.run` in an environment without MLX.")

try:
    from tessera import mlx_alias as _alias
except ImportError as e:
    raise ImportError("tessera-mlx-alias: Tessera is not installed (scripts/install-python, or "
                      "`pip install .` at the root of Tessera's repository)") from e

_alias.install(_sys.modules[__name__])
