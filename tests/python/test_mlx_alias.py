"""The `mlx` alias: `python -m tessera.run` runs a program whose imports name
mlx (a script, a module or code), and the companion package python/mlx-alias
gives the same modules, refusing to stand beside a real MLX."""

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ALIAS_PACKAGE = ROOT / "python" / "mlx-alias"

IMPORTS = textwrap.dedent("""
    import sys
    import mlx
    import mlx.core as mx
    import mlx.nn as nn
    import mlx.optimizers as optim
    import mlx.core.fast, mlx.core.random, mlx.core.linalg, mlx.core.fft
    import mlx.core.distributed, mlx.core.metal, mlx.core.cuda
    import mlx.nn.layers.distributed, mlx.nn.losses, mlx.nn.init, mlx.optimizers.schedulers
    from mlx.utils import tree_flatten, tree_map
    from mlx.nn.layers.distributed import shard_linear, sum_gradients
    import tessera, tessera.core, tessera.nn, tessera.optimizers, tessera.utils
    assert mlx.__version__ == "0.32.4", mlx.__version__
    assert mx is tessera.core and nn is tessera.nn and optim is tessera.optimizers
    assert mlx.core is mx and mlx.nn is nn and mlx.utils is tessera.utils
    assert mx.fast is mlx.core.fast is sys.modules["tessera.core.fast"]
    assert mx.distributed is sys.modules["mlx.core.distributed"]
    assert mlx.nn.layers.distributed is sys.modules["tessera.nn.layers.distributed"]
    assert mlx.nn.losses is tessera.nn.losses
    assert tree_flatten({"a": [mx.ones(2)]})[0][0] == "a.0"
    try:
        import mlx.no_such_module
    except ModuleNotFoundError as e:
        assert e.name == "mlx.no_such_module", e.name
    else:
        raise AssertionError("mlx.no_such_module imported")
    print("imports ok", sys.argv[1:])
""")


def run(*args, env=None, cwd=None):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=60,
                          env=env, cwd=cwd)


def ok(r):
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_run_code():
    assert ok(run("-m", "tessera.run", "-c", IMPORTS, "x", "--y")) == "imports ok ['x', '--y']\n"


def test_run_script_with_arguments(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text(IMPORTS + textwrap.dedent("""
        import os
        assert __name__ == "__main__"
        assert sys.argv[0] == os.path.join(os.path.dirname(__file__), "prog.py")
        assert sys.path[0] == os.path.dirname(os.path.abspath(__file__))
        print(float((mx.ones(3) * 2).sum()))
    """))
    out = ok(run("-m", "tessera.run", str(script), "a", "-b"))
    assert out == "imports ok ['a', '-b']\n6.0\n"


def test_run_module_with_arguments(tmp_path):
    (tmp_path / "prog_module.py").write_text(IMPORTS + "assert __name__ == '__main__'\n")
    out = ok(run("-m", "tessera.run", "-m", "prog_module", "--flag", cwd=tmp_path))
    assert out == "imports ok ['--flag']\n"


def test_run_usage_and_errors(tmp_path):
    r = run("-m", "tessera.run")
    assert r.returncode == 2 and "python -m tessera.run script.py" in r.stderr
    r = run("-m", "tessera.run", "-m")
    assert r.returncode == 2 and "-m needs an argument" in r.stderr
    r = run("-m", "tessera.run", "-m", "no_such_module_here")
    assert r.returncode != 0 and "no_such_module_here" in r.stderr
    # A program's exception and exit status come through.
    r = run("-m", "tessera.run", "-c", "import sys; sys.exit(3)")
    assert r.returncode == 3


def test_install_refuses_an_imported_real_mlx(tmp_path):
    fake = tmp_path / "mlx"
    fake.mkdir()
    (fake / "__init__.py").write_text("")
    code = ("import sys, mlx\nfrom tessera import mlx_alias\n"
            "try:\n    mlx_alias.install()\n"
            "finally:\n    assert not any(type(f).__name__ == '_AliasFinder' for f in sys.meta_path)\n")
    r = run("-c", code, env=dict(os.environ, PYTHONPATH=f"{tmp_path}{os.pathsep}"
                                 f"{os.environ.get('PYTHONPATH', '')}"))
    assert r.returncode != 0 and "a real MLX is already imported" in r.stderr


def _with_path(*paths):
    return dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(p) for p in paths] + [os.environ.get("PYTHONPATH", "")]))


def _real_mlx_version():
    """The version of a real MLX installed in this interpreter's environment, or None."""
    from importlib import metadata
    for name in ("mlx", "mlx-metal", "mlx-cpu", "mlx-cuda"):
        try:
            return f"{name} {metadata.version(name)}"
        except metadata.PackageNotFoundError:
            pass
    return None


def test_companion_package_gives_the_alias():
    r = run("-c", IMPORTS, env=_with_path(ALIAS_PACKAGE))
    real = _real_mlx_version()
    if real is None:
        assert ok(r) == "imports ok []\n"
    else:
        # Beside a real MLX (a machine where MLX is installed as a peer), the
        # companion package refuses instead of shadowing it.
        assert r.returncode != 0 and f"a real MLX is installed in this environment ({real})" in r.stderr


def test_companion_package_refuses_a_real_mlx_beside_it(tmp_path):
    site = tmp_path / "site"
    shutil.copytree(ALIAS_PACKAGE / "mlx", site / "mlx")
    # A real MLX installed over it leaves its native module in the same folder.
    (site / "mlx" / "core.cpython-311-x86_64-linux-gnu.so").write_bytes(b"")
    r = run("-c", "import mlx.core", env=_with_path(site))
    assert r.returncode != 0 and "a real MLX is installed" in r.stderr
    # So does MLX's distribution metadata.
    (site / "mlx" / "core.cpython-311-x86_64-linux-gnu.so").unlink()
    meta = site / "mlx-0.32.4.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: mlx\nVersion: 0.32.4\n")
    r = run("-c", "import mlx.core", env=_with_path(site))
    assert r.returncode != 0 and "mlx 0.32.4" in r.stderr


def test_companion_setup_refuses_to_build_beside_a_real_mlx(tmp_path):
    # setup.py asks the interpreter that pip installs for (sys.executable) for
    # MLX's distribution: here a bare environment holding MLX's metadata.
    venv = tmp_path / "venv"
    assert run("-m", "venv", "--without-pip", str(venv)).returncode == 0
    target = venv / "bin" / "python"
    site = subprocess.run([str(target), "-c", "import site; print(site.getsitepackages()[0])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    meta = Path(site) / "mlx-0.32.4.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: mlx\nVersion: 0.32.4\n")
    build = ("import sys\n"
             f"sys.executable = {str(target)!r}\n"
             f"sys.argv = ['setup.py', '-q', 'build_py', '--build-lib', {str(tmp_path / 'out')!r}]\n"
             "exec(compile(open('setup.py').read(), 'setup.py', 'exec'))\n")
    src = tmp_path / "src"
    shutil.copytree(ALIAS_PACKAGE, src)  # setuptools writes its egg-info there
    r = run("-c", build, cwd=src)
    assert r.returncode != 0 and "MLX is installed here (mlx 0.32.4)" in r.stderr
    shutil.rmtree(meta)
    ok(run("-c", build, cwd=src))
    assert (tmp_path / "out" / "mlx" / "__init__.py").exists()
