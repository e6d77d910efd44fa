"""Elastic tasks run locally through torch's elastic launcher: real worker processes. A one-node world's
value, its recoverable failures and its collectives are in tests/kfoperators_world/test_world_runs.py."""

from __future__ import annotations

import os

import pytest
from flytekit import task
from flytekit.exceptions.user import FlyteRecoverableException
from flytekitplugins.kfoperators import Elastic

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:Failed to initialize NumPy:UserWarning"),
]


@task(task_config=Elastic(nproc_per_node=2, monitor_interval=1, rdzv_configs={"timeout": 60, "join_timeout": 60}))
def rank_one_fails(recoverable: bool) -> int:
    rank = int(os.environ["RANK"])
    if rank == 1:
        if recoverable:
            raise FlyteRecoverableException("rank one asks for a retry")
        raise ValueError("rank one broke")
    return rank


@task(task_config=Elastic(nproc_per_node=2, start_method="fork", monitor_interval=1))
def forked_world(tag: str) -> list[str]:
    return [tag, os.environ["RANK"], os.environ["WORLD_SIZE"], os.environ["LOCAL_WORLD_SIZE"]]


@task(task_config=Elastic(nnodes="2:3", start_method="fork", monitor_interval=1))
def multi_node_config(tag: str) -> list[str]:
    return [tag, os.environ["WORLD_SIZE"], os.environ["GROUP_WORLD_SIZE"]]


def _chain(error: BaseException) -> list[BaseException]:
    out = []
    current: BaseException | None = error
    while current is not None and current not in out:
        out.append(current)
        current = current.__cause__ or current.__context__ or getattr(current, "value", None)
    return out


def test_a_worker_failure_names_its_rank() -> None:
    with pytest.raises(Exception) as caught:
        rank_one_fails(recoverable=False)
    text = "\n".join(str(e) for e in _chain(caught.value))
    assert "rank 1" in text and "rank one broke" in text
    assert not any(isinstance(e, FlyteRecoverableException) for e in _chain(caught.value))


def test_fork_start_method_runs_the_bound_function() -> None:
    assert forked_world(tag="forked") == ["forked", "0", "2", "2"]


def test_a_multi_node_config_starts_all_its_nodes_locally_without_waiting_for_others() -> None:
    # upstream waits for the missing nodes until the rendezvous join timeout (900 s by default); the local
    # rule starts the job's nodes (max of nnodes) when the machine holds them: 3 nodes of 1 process
    assert multi_node_config(tag="local") == ["local", "3", "3"]


@task(task_config=Elastic(start_method="fork", monitor_interval=60))
def patient_monitor() -> str:
    return "done"


def test_a_local_run_does_not_wait_for_the_pod_monitor_interval() -> None:
    # torch's agent checks its workers every monitor_interval seconds; locally the 0.1 s of torchrun applies
    import time

    start = time.monotonic()
    assert patient_monitor() == "done"
    assert time.monotonic() - start < 60


def test_the_task_modules_export_the_official_task_module_names() -> None:
    import flytekitplugins.kfmpi.task as official_mpi_task
    import flytekitplugins.kfoperators.task as ours
    import flytekitplugins.kfpytorch.task as official_pytorch_task
    import flytekitplugins.kftensorflow.task as official_tf_task

    for official in (official_pytorch_task, official_tf_task, official_mpi_task):
        configs = {n for n, v in vars(official).items() if isinstance(v, type) and v.__module__ == official.__name__}
        configs -= {"ElasticWorkerResult"}  # an internal result tuple of the official elastic launcher
        missing = sorted(n for n in configs if not hasattr(ours, n))
        assert missing == [], f"{official.__name__} names missing from kfoperators.task: {missing}"
    assert ours.PytorchElasticFunctionTask is ours.ElasticFunctionTask
