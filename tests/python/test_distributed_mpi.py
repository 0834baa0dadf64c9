"""mx.distributed over MPI: jobs of 2 and 4 processes on this machine
(mpirun --oversubscribe), each process running mpi_worker.py, which checks
every collective on every dtype and shape edge, a send/recv ring, split groups,
the collectives' gradients, data-parallel training against one process on the
whole batch and tensor-parallel linear layers against the unsharded ones; and a
job one of whose processes fails, which must end at once with its error; and
the launcher, python -m tessera.launch, with MLX's options, running an MLX
program unchanged."""

import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mpi_worker.py")
# As root, Open MPI asks for these two; --oversubscribe: more processes than cores.
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1")

pytestmark = pytest.mark.skipif(shutil.which("mpirun") is None,
                                reason="needs Open MPI (scripts/install-deps installs it)")


def mpirun(n, *args, timeout=240):
    cmd = ["mpirun", "-np", str(n), sys.executable, WORKER, *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=ENV)


@pytest.mark.parametrize("n", [2, 4])
def test_every_operation_on_every_rank(n):
    r = mpirun(n)
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(int(k) for k in re.findall(r"ok (\d+)", r.stdout)) == list(range(n))


def test_a_failing_process_ends_the_job():
    # The last rank raises while the others wait in a collective for it: the
    # job must end (not hang) with a failure status and the error's traceback.
    r = mpirun(2, "fail", timeout=60)
    assert r.returncode != 0
    assert "rank 1 stops on purpose" in r.stderr
    assert "ok 0" not in r.stdout


MLX_PROGRAM = textwrap.dedent("""
    import os
    import mlx.core as mx
    g = mx.distributed.init()
    total = mx.distributed.all_sum(mx.array([g.rank() + 1.0])).item()
    print("rank", g.rank(), "of", g.size(), "sum", total, os.environ.get("TESSERA_TEST_ENV"))
""")


def launch(*args, timeout=120):
    cmd = [sys.executable, "-m", "tessera.launch", *map(str, args)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=ENV)


def test_launch_runs_an_mlx_program_on_every_process(tmp_path):
    program = tmp_path / "program.py"
    program.write_text(MLX_PROGRAM)
    r = launch("-n", 3, "--env", "TESSERA_TEST_ENV=seen", program)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = sorted(line for line in r.stdout.splitlines() if "<stdout>:" in line)
    assert lines == [f"[1,{i}]<stdout>:rank {i} of 3 sum 6.0 seen" for i in range(3)]


def test_launch_reads_an_mlx_hostfile(tmp_path):
    program = tmp_path / "program.py"
    program.write_text(MLX_PROGRAM)
    hostfile = tmp_path / "hosts.json"
    hostfile.write_text('{"backend": "mpi", "envs": ["TESSERA_TEST_ENV=file"], '
                        '"hosts": [{"ssh": "localhost"}, {"ssh": "localhost"}]}')
    r = launch("--hostfile", hostfile, program)
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(line.split(":", 1)[1] for line in r.stdout.splitlines() if "<stdout>:" in line) \
        == [f"rank {i} of 2 sum 3.0 file" for i in range(2)]


def test_launch_refuses_what_it_cannot_run(tmp_path):
    r = launch("--backend", "ring", "x.py")
    assert r.returncode == 2 and "ring backend is not available" in r.stderr
    r = launch("-n", 2)
    assert r.returncode == 2 and "no program" in r.stderr
    r = launch("--hostfile", tmp_path / "missing.json", "x.py")
    assert r.returncode == 2 and "cannot read the hostfile" in r.stderr
    r = launch("-n", 0, "x.py")
    assert r.returncode == 2
    r = launch("--print-python")
    assert r.returncode == 0
    assert os.path.realpath(r.stdout.strip()) == os.path.realpath(sys.executable)


NCCL_PROGRAM = textwrap.dedent("""
    import os
    import mlx.core as mx
    g = mx.distributed.init()
    x = mx.array([g.rank() + 1.0])
    total = mx.distributed.all_sum(x).item()
    nccl = mx.distributed.is_available("nccl")
    print("rank", g.rank(), "of", g.size(), "sum", total, "gpu", os.environ["CUDA_VISIBLE_DEVICES"],
          "nccl" if nccl else "mpi")
""")


def test_launch_for_nccl_gives_each_process_its_gpu(tmp_path):
    # Each process sees the GPU of its rank on the host; init() takes NCCL where
    # it can start (a GPU each), else the job's MPI: the sums are the same.
    program = tmp_path / "program.py"
    program.write_text(NCCL_PROGRAM)
    env = {k: v for k, v in ENV.items() if k != "CUDA_VISIBLE_DEVICES"}
    cmd = [sys.executable, "-m", "tessera.launch", "--backend", "nccl", "-n", "2", str(program)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = sorted(line.split(":", 1)[1] for line in r.stdout.splitlines() if "<stdout>:" in line)
    assert [line.rsplit(" ", 1)[0] for line in lines] == [f"rank {i} of 2 sum 3.0 gpu {i}"
                                                         for i in range(2)]
