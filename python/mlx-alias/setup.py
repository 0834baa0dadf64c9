"""Refuses to build (and so to install) where a real MLX is installed: the
package `mlx` of this distribution would take its place."""

import os
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

# Run by the interpreter that pip installs for, outside pip's isolated build
# environment (whose paths hide the installed packages).
_CHECK = """
import importlib.metadata as md
for name in ("mlx", "mlx-metal", "mlx-cpu", "mlx-cuda"):
    try:
        print(name, md.version(name))
        break
    except md.PackageNotFoundError:
        pass
"""


def _real_mlx():
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    out = subprocess.run([sys.executable, "-c", _CHECK], env=env, capture_output=True,
                         text=True, check=False).stdout.strip()
    return out or None


class _BuildPy(build_py):
    def run(self):
        if os.environ.get("TESSERA_MLX_ALIAS_FORCE") != "1":
            found = _real_mlx()
            if found:
                raise SystemExit(
                    f"tessera-mlx-alias: MLX is installed here ({found}); this package would "
                    f"replace its `mlx`. Use `python -m tessera.run` instead, or another "
                    f"environment.")
        super().run()


setup(cmdclass={"build_py": _BuildPy})
