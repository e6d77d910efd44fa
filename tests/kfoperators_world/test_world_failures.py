"""A failing member stops the world and is named; nothing outlives the task (success, failure, Ctrl-C)."""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from flytekit.exceptions.user import FlyteRecoverableException
from flytekitplugins.kfoperators.runtime.world import LocalWorldError, RecoverableLocalWorldError

from .conftest import alive
from .world_tasks import Collector, mpi_rank_one_fails, rank_one_fails

pytestmark = [
    pytest.mark.slow,
    pytest.mark.usefixtures("full_world"),
    pytest.mark.filterwarnings("ignore:Failed to initialize NumPy:UserWarning"),
]


def test_rank_one_failure_names_its_role_and_index_and_stops_rank_zero() -> None:
    collector = Collector(expected=2)
    with pytest.raises(LocalWorldError) as caught:
        rank_one_fails(port=collector.port, recoverable=False)
    error = caught.value
    # PyTorchJob: rank 1 is the first worker
    assert (error.role, error.index) == ("worker", 0)
    assert "worker 0 (worker-0, RANK=1) failed: ValueError: rank 1 exploded" in str(error)
    assert "ValueError: rank 1 exploded" in error.stderr_tail
    assert isinstance(error.__cause__, ValueError)
    assert not isinstance(error, FlyteRecoverableException)
    # rank 0 was waiting forever: the launcher stopped it
    assert not [r["pid"] for r in collector.wait() if alive(r["pid"])]


def test_a_recoverable_exception_stays_retryable() -> None:
    collector = Collector(expected=2)
    with pytest.raises(FlyteRecoverableException) as caught:
        rank_one_fails(port=collector.port, recoverable=True)
    assert isinstance(caught.value, RecoverableLocalWorldError)
    assert (caught.value.role, caught.value.index) == ("worker", 0)
    assert "rank 1 asks for a retry" in str(caught.value)
    assert not [r["pid"] for r in collector.wait() if alive(r["pid"])]


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="needs OpenMPI (make system-deps)")
def test_an_mpi_rank_failure_names_the_rank() -> None:
    # Rank 0 may finish first: its output would be valid on a cluster only if the job succeeded, so a rank
    # that fails before mpirun ends fails the task.
    with pytest.raises(LocalWorldError) as caught:
        mpi_rank_one_fails()
    assert (caught.value.role, caught.value.index) == ("rank", 1)
    assert "MPI rank 1 exploded" in str(caught.value) and "ValueError: MPI rank 1 exploded" in caught.value.stderr_tail


SCRIPT = """
import os, sys, threading
from flytekit import task
from flytekitplugins.kfoperators import Elastic, MPIJob, PyTorch, Worker

@task(task_config={config})
def wait_forever() -> int:
    print("READY", os.getpid(), flush=True)
    threading.Event().wait()
    return 0

if __name__ == "__main__":
    wait_forever()
"""

CONFIGS = {
    "pytorch": "PyTorch(worker=Worker(replicas=1))",
    "elastic": "Elastic(nproc_per_node=2)",
    "mpi": "MPIJob(worker=Worker(replicas=2))",
}


@pytest.mark.parametrize("kind", sorted(CONFIGS))
def test_ctrl_c_ends_every_process_of_the_world(kind: str, tmp_path: Path) -> None:
    if kind == "mpi" and shutil.which("mpirun") is None:
        pytest.skip("needs OpenMPI (make system-deps)")
    script = tmp_path / "interrupted.py"
    script.write_text(SCRIPT.format(config=CONFIGS[kind]))
    env = {**os.environ, "KUBEJOBS_LOCAL_WORLD": "full"}
    parent = subprocess.Popen(
        [sys.executable, str(script)], env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    assert parent.stdout is not None
    pids = []
    for line in parent.stdout:  # blocks until each member says it is up
        if "READY" in line:
            pids.append(int(line.split()[-1]))
            if len(pids) == 2:
                break
    parent.send_signal(signal.SIGINT)  # what Ctrl-C sends to the foreground process
    parent.stdout.close()
    assert parent.wait(timeout=60) != 0
    assert len(pids) == 2 and not [p for p in pids if alive(p)]


def _wait_for_exit(pid: int, timeout: float) -> bool:
    """Block until ``pid`` (not our child) has ended, or ``timeout`` passes: a pidfd becomes readable when
    its process terminates, so this waits on the event itself."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        readable, _, _ = select.select([fd], [], [], timeout)
        return bool(readable) or not alive(pid)
    finally:
        os.close(fd)


def test_a_killed_launcher_leaves_no_orphans(tmp_path: Path) -> None:
    # SIGKILL gives the launcher no chance to clean up: each member notices its parent is gone.
    script = tmp_path / "killed.py"
    script.write_text(SCRIPT.format(config=CONFIGS["pytorch"]))
    env = {**os.environ, "KUBEJOBS_LOCAL_WORLD": "full"}
    parent = subprocess.Popen(
        [sys.executable, str(script)], env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    assert parent.stdout is not None
    pids = []
    for line in parent.stdout:
        if "READY" in line:
            pids.append(int(line.split()[-1]))
            if len(pids) == 2:
                break
    parent.kill()
    parent.wait()
    parent.stdout.close()
    assert all(_wait_for_exit(pid, timeout=30) for pid in pids)
