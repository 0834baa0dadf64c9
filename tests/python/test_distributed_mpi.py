"""mx.distributed over MPI: jobs of 2 and 4 processes on this machine
(mpirun --oversubscribe), each process running mpi_worker.py, which checks
every collective on every dtype and shape edge, a send/recv ring, split groups,
the collectives' gradients, data-parallel training against one process on the
whole batch and tensor-parallel linear layers against the unsharded ones; and a
job one of whose processes fails, which must end at once with its error."""

import os
import shutil
import subprocess
import sys

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
    assert sorted(line for line in r.stdout.splitlines() if line.startswith("ok ")) == \
        sorted(f"ok {i}" for i in range(n))


def test_a_failing_process_ends_the_job():
    # The last rank raises while the others wait in a collective for it: the
    # job must end (not hang) with a failure status and the error's traceback.
    r = mpirun(2, "fail", timeout=60)
    assert r.returncode != 0
    assert "rank 1 stops on purpose" in r.stderr
    assert "ok 0" not in r.stdout
