"""Local execution of PyTorch, TfJob and MPIJob tasks as a world of one (the documented opt-out
``KUBEJOBS_LOCAL_WORLD=one``): in-process, with the operator's environment contract for a world of one, and
os.environ exactly as it was afterwards."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from flytekit import task, workflow
from flytekitplugins.kfoperators import HorovodJob, MPIJob, PyTorch, TfJob, Worker
from flytekitplugins.kfoperators.runtime.environment import (
    LocalWorld,
    mpi_env,
    pytorch_env,
    scoped_environ,
    tensorflow_env,
    world_of_one,
)

from .task_functions import CONTRACT_VARS, read_env

# torch's import-time notice on machines without numpy (third-party noise, not ours).
pytestmark = pytest.mark.filterwarnings("ignore:Failed to initialize NumPy:UserWarning")


@pytest.fixture(autouse=True)
def world_of_one_opt_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are about the world of one: the opt-out, for the test's process and the pyflyte it starts."""
    monkeypatch.setenv("KUBEJOBS_LOCAL_WORLD", "one")


pytorch_env_task = task(task_config=PyTorch(worker=Worker(replicas=3)))(read_env)
tf_env_task = task(task_config=TfJob(worker=Worker(replicas=2)))(read_env)
mpi_env_task = task(task_config=MPIJob(worker=Worker(replicas=2), slots=2))(read_env)
horovod_env_task = task(task_config=HorovodJob(worker=Worker(replicas=2)))(read_env)


@task(task_config=PyTorch(worker=Worker(replicas=2)))
def all_reduce_in_process(value: int) -> list[int]:
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    try:
        tensor = torch.tensor([value])
        dist.all_reduce(tensor)
        return [dist.get_rank(), dist.get_world_size(), int(tensor.item())]
    finally:
        dist.destroy_process_group()


@workflow
def env_workflow(tag: str) -> str:
    return pytorch_env_task(tag=tag)


def test_pytorch_world_of_one_runs_torch_distributed_in_process() -> None:
    import torch  # noqa: F401  (its first import sets KMP_INIT_AT_FORK: not ours to count)

    before = dict(os.environ)
    assert all_reduce_in_process(value=5) == [0, 1, 5]
    assert dict(os.environ) == before


def test_pytorch_contract_for_a_world_of_one() -> None:
    env = json.loads(pytorch_env_task(tag="x"))
    assert (env["RANK"], env["WORLD_SIZE"], env["MASTER_ADDR"]) == ("0", "1", "127.0.0.1")
    assert 0 < int(env["MASTER_PORT"]) < 65536
    assert "TF_CONFIG" not in env and "OMPI_COMM_WORLD_RANK" not in env


def test_contract_also_applies_inside_a_local_workflow() -> None:
    env = json.loads(env_workflow(tag="wf"))
    assert (env["RANK"], env["WORLD_SIZE"]) == ("0", "1")


def test_tensorflow_contract_is_a_tf_config_of_one_worker() -> None:
    env = json.loads(tf_env_task(tag="x"))
    config = json.loads(env["TF_CONFIG"])
    assert config["task"] == {"type": "worker", "index": 0}
    assert list(config["cluster"]) == ["worker"] and len(config["cluster"]["worker"]) == 1
    assert "RANK" not in env


@pytest.mark.parametrize("mpi_task", [mpi_env_task, horovod_env_task], ids=["mpi", "horovod"])
def test_mpi_contract_is_rank_zero_of_one(mpi_task: object) -> None:
    env = json.loads(mpi_task(tag="x"))  # type: ignore[operator]
    assert env["OMPI_COMM_WORLD_RANK"] == "0" and env["OMPI_COMM_WORLD_SIZE"] == "1"
    assert env["OMPI_COMM_WORLD_LOCAL_RANK"] == "0" and env["PMI_SIZE"] == "1"


def test_the_parents_environment_is_restored_exactly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANK", "7")
    monkeypatch.delenv("MASTER_ADDR", raising=False)
    before = dict(os.environ)
    inside = json.loads(pytorch_env_task(tag="x"))
    assert inside["RANK"] == "0"
    assert dict(os.environ) == before
    assert os.environ["RANK"] == "7" and "MASTER_ADDR" not in os.environ


def test_environment_is_restored_when_the_task_fails() -> None:
    before = dict(os.environ)
    with pytest.raises(RuntimeError), scoped_environ(world_of_one("pytorch")):
        assert os.environ["WORLD_SIZE"] == "1"
        raise RuntimeError("boom")
    assert dict(os.environ) == before


def test_world_of_one_sets_only_contract_variables() -> None:
    for kind in ("pytorch", "tensorflow", "mpi"):
        assert set(world_of_one(kind)) <= set(CONTRACT_VARS)


# The per-member functions, for worlds of more than one (the operator's numbering).
WORLD = LocalWorld(
    {
        "Master": ("10.0.0.1:23456",),
        "Worker": ("10.0.0.2:1", "10.0.0.3:2", "10.0.0.4:3"),
        "Chief": ("10.0.1.1:5",),
        "PS": ("10.0.2.1:6", "10.0.2.2:7"),
        "Evaluator": ("10.0.3.1:8",),
    },
    slots=2,
)


def test_pytorch_ranks_put_the_master_first() -> None:
    ranks = [pytorch_env(role, i, WORLD)["RANK"] for role, i in [("Master", 0), ("Worker", 0), ("Worker", 2)]]
    assert ranks == ["0", "1", "3"]
    env = pytorch_env("Worker", 1, WORLD)
    assert (env["MASTER_ADDR"], env["MASTER_PORT"], env["WORLD_SIZE"]) == ("10.0.0.1", "23456", "4")


def test_tf_config_lists_the_cluster_without_evaluators() -> None:
    config = json.loads(tensorflow_env("PS", 1, WORLD)["TF_CONFIG"])
    assert config["cluster"] == {
        "chief": ["10.0.1.1:5"],
        "worker": ["10.0.0.2:1", "10.0.0.3:2", "10.0.0.4:3"],
        "ps": ["10.0.2.1:6", "10.0.2.2:7"],
    }
    assert config["task"] == {"type": "ps", "index": 1}
    assert json.loads(tensorflow_env("Evaluator", 0, WORLD)["TF_CONFIG"])["task"]["type"] == "evaluator"


def test_mpi_ranks_count_slots_per_worker() -> None:
    env = mpi_env("Worker", 2, WORLD, local_rank=1)
    assert (env["OMPI_COMM_WORLD_RANK"], env["OMPI_COMM_WORLD_SIZE"], env["OMPI_COMM_WORLD_LOCAL_SIZE"]) == (
        "5",
        "6",
        "2",
    )


@pytest.mark.parametrize(
    ("call", "needle"),
    [
        (lambda: pytorch_env("Worker", 3, WORLD), "Worker index 3"),
        (lambda: pytorch_env("PS", 0, WORLD), "'PS'"),
        (lambda: mpi_env("Worker", 0, WORLD, local_rank=2), "local_rank 2"),
        (lambda: mpi_env("Launcher", 0, LocalWorld({"Launcher": ("h:1",)})), "'Launcher'"),
    ],
)
def test_members_outside_the_world_are_refused(call: object, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        call()  # type: ignore[operator]


def test_pyflyte_run_without_remote_gets_the_world_of_one() -> None:
    here = Path(__file__).resolve().parent
    pyflyte = Path(sys.executable).parent / "pyflyte"
    result = subprocess.run(
        [str(pyflyte), "run", "cli_tasks.py", "world", "--tag", "cli"],
        cwd=here,
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    line = [ln for ln in result.stdout.splitlines() if ln.startswith("{")][-1]
    assert json.loads(line) == {"tag": "cli", "RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1"}
