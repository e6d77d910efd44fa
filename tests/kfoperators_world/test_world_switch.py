"""The documented switch (KUBEJOBS_LOCAL_WORLD / local_world): default in-process, caps, bad values.
No process is started here except where the default in-process run is checked."""

from __future__ import annotations

import doctest
import os

import pytest
from flytekit import task
from flytekitplugins.kfoperators import (
    PS,
    Chief,
    Elastic,
    Evaluator,
    HorovodJob,
    MPIJob,
    PyTorch,
    TfJob,
    Worker,
)
from flytekitplugins.kfoperators.runtime import launch as world_launch
from flytekitplugins.kfoperators.runtime import plan as world_plan
from flytekitplugins.kfoperators.runtime import world
from flytekitplugins.kfoperators.runtime.world import LOCAL_WORLD_ENV, check_local_world, local_world_size, machine_cap


@task(task_config=PyTorch(worker=Worker(replicas=3)))
def where_am_i() -> int:
    return os.getpid()


@pytest.mark.parametrize("module", [world, world_launch, world_plan])
def test_module_examples_run(module: object) -> None:
    assert doctest.testmod(module).failed == 0  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "expected"), [(None, None), ("full", "full"), (" FULL ", "full"), ("one", 1), (3, 3), ("3", 3)]
)
def test_accepted_settings(value: object, expected: object) -> None:
    assert check_local_world("PyTorch.local_world", value) == expected


@pytest.mark.parametrize(
    ("value", "error"), [(0, ValueError), (-2, ValueError), ("abc", ValueError), (True, TypeError), (1.5, TypeError)]
)
def test_refused_settings_name_the_field_and_the_value(value: object, error: type[Exception]) -> None:
    with pytest.raises(error, match=rf"PyTorch\.local_world must be 'full', 'one' or an int >= 1, got {value!r}"):
        check_local_world("PyTorch.local_world", value)


@task(task_config=PyTorch(worker=Worker(replicas=1)))
def master_and_one_worker() -> list[str]:
    return [str(os.getpid()), os.environ["RANK"], os.environ["WORLD_SIZE"]]


def test_by_default_a_local_run_starts_the_jobs_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    # the rule: the real world whenever the machine holds it (2 processes fit any machine: 2 per CPU)
    monkeypatch.delenv(LOCAL_WORLD_ENV, raising=False)
    pid, rank, world_size = master_and_one_worker()
    assert int(pid) != os.getpid() and (rank, world_size) == ("0", "2")


@pytest.mark.parametrize("opt_out", ["one", "ONE", "1"])
def test_the_opt_out_is_one_in_process_call(monkeypatch: pytest.MonkeyPatch, opt_out: str) -> None:
    monkeypatch.setenv(LOCAL_WORLD_ENV, opt_out)
    assert where_am_i() == os.getpid()
    assert master_and_one_worker() == [str(os.getpid()), "0", "1"]


def test_a_job_the_machine_cannot_hold_runs_as_a_world_of_one_and_says_why(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(LOCAL_WORLD_ENV, raising=False)
    processes = machine_cap() + 1

    @task(task_config=PyTorch(worker=Worker(replicas=processes - 1)))
    def big() -> int:
        return os.getpid()

    assert big() == os.getpid()
    err = capfd.readouterr().err
    assert f"kubejobs: PyTorch needs {processes} local processes, this machine holds " in err
    assert "running it as a world of one, in-process" in err and f"{LOCAL_WORLD_ENV}=one" in err


def test_a_world_above_the_cap_is_refused_before_anything_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(LOCAL_WORLD_ENV, "2")
    with pytest.raises(ValueError, match=rf"PyTorch needs 4 local processes but {LOCAL_WORLD_ENV} allows 2"):
        where_am_i()


def test_full_is_capped_at_twice_the_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    assert machine_cap() == 2 * (os.cpu_count() or 1)
    too_many = machine_cap() + 1
    monkeypatch.setenv(LOCAL_WORLD_ENV, "full")

    @task(task_config=PyTorch(worker=Worker(replicas=too_many - 1)))
    def big() -> int:
        return 0

    with pytest.raises(ValueError, match=rf"needs {too_many} local processes but {LOCAL_WORLD_ENV} allows"):
        big()


def test_a_bad_environment_value_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(LOCAL_WORLD_ENV, "everything")
    with pytest.raises(ValueError, match=rf"{LOCAL_WORLD_ENV} must be 'full', 'one' or an int >= 1, got 'everything'"):
        where_am_i()


def test_outside_a_local_execution_the_switch_does_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    # A pod whose image happens to carry the variable never starts a local world.
    monkeypatch.setenv(LOCAL_WORLD_ENV, "full")
    assert local_world_size(PyTorch(worker=Worker(replicas=1))) == 1


@pytest.mark.parametrize(
    ("config", "processes"),
    [
        (PyTorch(worker=Worker(replicas=3)), 4),  # master + 3 workers
        (PyTorch(worker=Worker(replicas=0)), 1),  # a master-only job
        (Elastic(nnodes="2:3", nproc_per_node=2), 6),  # max nodes x processes per node
        (
            TfJob(
                chief=Chief(replicas=1), ps=PS(replicas=1), worker=Worker(replicas=2), evaluator=Evaluator(replicas=1)
            ),
            5,
        ),  # every replica, evaluator included
        (MPIJob(worker=Worker(replicas=2), slots=2), 4),  # mpirun -np workers * slots
        (HorovodJob(worker=Worker(replicas=3)), 3),
    ],
)
def test_world_size_is_the_clusters_process_count(config: object, processes: int) -> None:
    assert world_plan.world_size_of(config) == processes
