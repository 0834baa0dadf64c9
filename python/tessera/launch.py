"""Starts a program on several processes, as MLX's ``mlx.launch`` does:
``mpirun`` runs each process, which finds its group with
``mx.distributed.init()``. With ``--backend mpi`` (the default) the group
communicates over MPI; with ``--backend nccl`` over NCCL, one GPU a process
(the i-th process of a host takes its i-th GPU), MPI only starting it.

    python -m tessera.launch -n 4 train.py --lr 0.1      # four processes here
    python -m tessera.launch --hosts a,b -n 2 train.py   # two on each of two hosts
    python -m tessera.launch --hostfile hosts.json train.py

A program ending in ``.py`` runs under this Python through ``tessera.run``, so an
MLX program (``import mlx.core as mx``) runs unchanged; any other command runs
as it is. Each line of output carries its rank (``[1,0]<stdout>:``). When one
process fails the job ends on every host (Note [Communicators] in
tessera/distributed/comm.h). The options are MLX's; those of its other backends
(ring, jaccl) are refused with the reason."""

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections import Counter


def _positive(x):
    n = int(x)
    if n <= 0:
        raise argparse.ArgumentTypeError(f"{x} is not a positive number")
    return n


def _hosts_from_file(path):
    """(hosts, backend, envs) of an MLX hostfile: a JSON list of {"ssh": host, ...},
    or an object with "hosts", "backend" and "envs"."""
    try:
        with open(path) as f:
            data = json.load(f)
        backend, envs = "", []
        if isinstance(data, dict):
            backend, envs, data = data.get("backend", ""), data.get("envs", []), data["hosts"]
        return [h["ssh"] for h in data], backend, list(envs)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ValueError(f"cannot read the hostfile {path}: {e}") from e


def command_line(args, hosts, program):
    """The mpirun command for the parsed options, one host name per process and
    the program's words."""
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        raise RuntimeError("mpirun is not installed (Open MPI: apt-get install openmpi-bin)")
    if program[0].endswith(".py"):
        program = [args.python or sys.executable, "-m", "tessera.run", *program]
    slots = Counter(hosts)
    cmd = [mpirun, "--tag-output"]
    if len(slots) == 1 and next(iter(slots)) in ("127.0.0.1", "localhost"):
        cmd += ["-np", str(sum(slots.values())), "--oversubscribe"]
    else:
        cmd += ["--host", ",".join(f"{h}:{n}" for h, n in slots.items())]
    if args.cwd:
        cmd += ["-wdir", args.cwd]
    for e in [*args.env, "TESSERA_LINE_BUFFERED", "TESSERA_DISTRIBUTED_BACKEND"]:
        cmd += ["-x", e]
    for a in args.mpi_arg:
        cmd += shlex.split(a)
    return cmd + ["--", *program]


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m tessera.launch",
                                     description="Launch a distributed program (MPI)")
    parser.add_argument("--print-python", action="store_true",
                        help="print the path of this Python and exit")
    parser.add_argument("--verbose", action="store_true", help="print the mpirun command")
    parser.add_argument("--hosts", default="127.0.0.1", help="a comma-separated list of hosts")
    parser.add_argument("--repeat-hosts", "-n", type=_positive, default=1,
                        help="processes on each host")
    parser.add_argument("--hostfile", help="an MLX hostfile (JSON)")
    parser.add_argument("--backend", help="the distributed backend (mpi or nccl)")
    parser.add_argument("--env", action="append", default=[],
                        help="VAR=value for every process (repeatable)")
    parser.add_argument("--mpi-arg", action="append", default=[],
                        help="arguments passed to mpirun as they are (repeatable)")
    parser.add_argument("--cwd", help="the working directory of every process")
    parser.add_argument("--python", default=None, help="the Python of the processes")
    args, rest = parser.parse_known_args(argv)
    if args.print_python:
        print(args.python or sys.executable)
        return 0
    if rest and rest[0] == "--":
        rest = rest[1:]
    if not rest:
        parser.error("no program to launch")
    try:
        if args.hostfile:
            hosts, backend, envs = _hosts_from_file(args.hostfile)
            args.backend = args.backend or backend or None
            args.env = envs + args.env
        else:
            hosts = args.hosts.split(",")
            if "" in hosts:
                raise ValueError("a host name cannot be empty")
    except ValueError as e:
        parser.error(str(e))
    backend = args.backend or "mpi"
    if backend not in ("mpi", "nccl"):
        parser.error(f"the {backend} backend is not available in Tessera; use --backend mpi "
                     "or nccl")
    # tessera.run: one write a line; init() takes the backend named here.
    env = dict(os.environ, TESSERA_LINE_BUFFERED="1", TESSERA_DISTRIBUTED_BACKEND=backend)
    if hasattr(os, "geteuid") and os.geteuid() == 0:  # Open MPI asks root to confirm
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    try:
        cmd = command_line(args, [h for h in hosts for _ in range(args.repeat_hosts)], rest)
    except RuntimeError as e:
        parser.error(str(e))
    if args.verbose:
        print("tessera.launch:", " ".join(shlex.quote(c) for c in cmd), file=sys.stderr)
    try:
        return subprocess.run(cmd, env=env).returncode
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
