"""Runs an MLX program on Tessera, unmodified: ``mlx`` is Tessera for the run.

    python -m tessera.run script.py [args ...]
    python -m tessera.run -m module [args ...]
    python -m tessera.run -c "code" [args ...]

The program sees the same ``sys.argv`` and ``__name__ == "__main__"`` as when
Python runs it directly (tessera/mlx_alias.py says what the alias does).
"""

import os
import runpy
import sys

from tessera import mlx_alias

_USAGE = __doc__.split("\n\n")[1]


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print("usage:\n" + _USAGE, file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    mlx_alias.install()
    if os.environ.get("TESSERA_LINE_BUFFERED"):
        # Under tessera.launch: whole lines reach mpirun, which tags each with its rank.
        for stream in (sys.stdout, sys.stderr):
            stream.reconfigure(line_buffering=True, write_through=False)
    if argv[0] in ("-m", "-c"):
        if len(argv) < 2:
            print(f"tessera.run: {argv[0]} needs an argument\nusage:\n{_USAGE}", file=sys.stderr)
            return 2
        if argv[0] == "-m":
            sys.argv = argv[1:]  # sys.path[0] is already the working directory
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = ["-c"] + argv[2:]
            exec(compile(argv[1], "<string>", "exec"), {"__name__": "__main__"})
        return 0
    sys.argv = argv
    sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))  # as `python script.py` does
    runpy.run_path(argv[0], run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
