"""TFJob and MPIJob building, v0 and v1 (flyte-backend-behaviour.md §1.4-1.5, §10 quirks 2-3)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from flytekitplugins.kubejobs.backend import BuildError

TF = [
    (
        "v1 all roles",
        {
            "workerReplicas": {"replicas": 2},
            "psReplicas": {"replicas": 1},
            "chiefReplicas": {"replicas": 1},
            "evaluatorReplicas": {"replicas": 1},
        },
        1,
        {"Worker": 2, "PS": 1, "Chief": 1, "Evaluator": 1},
    ),
    (
        "v1 zero roles skipped",
        {"workerReplicas": {"replicas": 2}, "psReplicas": {}, "chiefReplicas": {"replicas": 0}},
        1,
        {"Worker": 2},
    ),
    ("v1 common", {"workerReplicas": {"replicas": 9, "common": {"replicas": 3}}}, 1, {"Worker": 3}),
    ("v0 counts", {"workers": 2, "psReplicas": 1, "chiefReplicas": 1}, 0, {"Worker": 2, "PS": 1, "Chief": 1}),
    ("v0 evaluator", {"workers": 1, "evaluatorReplicas": 1}, 0, {"Worker": 1, "Evaluator": 1}),
]


@pytest.mark.parametrize(("custom", "version", "roles"), [c[1:] for c in TF], ids=[c[0] for c in TF])
def test_tf_replica_specs(kit: SimpleNamespace, custom: Any, version: Any, roles: Any) -> None:
    obj = kit.build(kit.template("tensorflow", custom, version))
    assert obj["kind"] == "TFJob"
    specs = obj["spec"]["tfReplicaSpecs"]
    assert {k: v["replicas"] for k, v in specs.items()} == roles
    for spec in specs.values():
        assert [c["name"] for c in spec["template"]["spec"]["containers"]] == ["tensorflow"]
        assert "_F_WN" not in {e["name"] for e in spec["template"]["spec"]["containers"][0]["env"]}
    assert set(obj["spec"]) == {"tfReplicaSpecs", "runPolicy"}


def test_tf_per_role_settings(kit: SimpleNamespace) -> None:
    custom = {
        "workerReplicas": {"replicas": 2, "image": "w:1", "restartPolicy": "RESTART_POLICY_ON_FAILURE"},
        "psReplicas": {"replicas": 1, "resources": {"limits": [{"name": "CPU", "value": "2"}]}},
        "runPolicy": {"cleanPodPolicy": "CLEANPOD_POLICY_RUNNING", "backoffLimit": 3},
    }
    obj = kit.build(kit.template("tensorflow", custom))
    specs = obj["spec"]["tfReplicaSpecs"]
    assert specs["Worker"]["template"]["spec"]["containers"][0]["image"] == "w:1"
    assert specs["Worker"]["restartPolicy"] == "OnFailure"
    assert specs["PS"]["template"]["spec"]["containers"][0]["image"] == "img:1"
    ps_res = specs["PS"]["template"]["spec"]["containers"][0]["resources"]
    assert kit.q(ps_res["requests"]["cpu"]) == kit.q(ps_res["limits"]["cpu"]) == 2
    assert obj["spec"]["runPolicy"] == {"cleanPodPolicy": "Running", "backoffLimit": 3}


@pytest.mark.parametrize(("custom", "version"), [({"psReplicas": {"replicas": 1}}, 1), ({}, 1), ({"psReplicas": 1}, 0)])
def test_tf_needs_workers(kit: SimpleNamespace, custom: dict[str, Any], version: int) -> None:
    with pytest.raises(BuildError, match="number of workers must be greater than 0"):
        kit.build(kit.template("tensorflow", custom, version))


MPI = [
    (
        "v1 slots honoured",
        {"workerReplicas": {"replicas": 2}, "launcherReplicas": {"replicas": 3}, "slots": 4},
        1,
        {"Launcher": 1, "Worker": 2},
        4,
    ),
    ("v1 no slots", {"workerReplicas": {"replicas": 2}}, 1, {"Launcher": 1, "Worker": 2}, 1),
    ("v0 launcher clamped up", {"numWorkers": 3, "slots": 2}, 0, {"Launcher": 1, "Worker": 3}, 2),
    ("v0 no slots is 1", {"numWorkers": 1, "numLauncherReplicas": 1}, 0, {"Launcher": 1, "Worker": 1}, 1),
]


@pytest.mark.parametrize(("custom", "version", "roles", "slots"), [c[1:] for c in MPI], ids=[c[0] for c in MPI])
def test_mpi_replica_specs(kit: SimpleNamespace, custom: Any, version: Any, roles: Any, slots: Any) -> None:
    obj = kit.build(kit.template("mpi", custom, version))
    assert obj["kind"] == "MPIJob"
    specs = obj["spec"]["mpiReplicaSpecs"]
    assert {k: v["replicas"] for k, v in specs.items()} == roles
    assert obj["spec"]["slotsPerWorker"] == slots
    assert set(obj["spec"]) == {"slotsPerWorker", "runPolicy", "mpiReplicaSpecs"}
    for spec in specs.values():
        assert [c["name"] for c in spec["template"]["spec"]["containers"]] == ["mpi"]


def test_deviation_mpi_v1_slots_become_slots_per_worker(kit: SimpleNamespace) -> None:
    # Flyte writes slotsPerWorker 1 whatever the custom says, while flytekit's mpirun line uses -np workers*slots.
    obj = kit.build(kit.template("mpi", {"workerReplicas": {"replicas": 2}, "slots": 3}))
    assert obj["spec"]["slotsPerWorker"] == 3


def test_mpi_v1_commands_go_to_args(kit: SimpleNamespace) -> None:
    mpirun = ["mpirun", "--allow-run-as-root", "-np", "4", "python", "train.py"]
    custom = {"workerReplicas": {"replicas": 2, "command": ["sshd", "-D"]}, "launcherReplicas": {"command": mpirun}}
    obj = kit.build(kit.template("mpi", custom, args=["pyflyte-execute", "x"]))
    launcher = obj["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    worker = obj["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert launcher["args"] == mpirun and "command" not in launcher
    assert worker["args"] == ["sshd", "-D"]


def test_mpi_v1_without_command_keeps_task_args(kit: SimpleNamespace) -> None:
    obj = kit.build(kit.template("mpi", {"workerReplicas": {"replicas": 1}}, args=["mpirun", "-np", "1", "x"]))
    for spec in obj["spec"]["mpiReplicaSpecs"].values():
        assert spec["template"]["spec"]["containers"][0]["args"] == ["mpirun", "-np", "1", "x"]


@pytest.mark.parametrize(("command", "args"), [("sshd -D -e", ["sshd", "-D", "-e"]), (None, []), ("", [])])
def test_mpi_v0_worker_spec_command(kit: SimpleNamespace, command: str | None, args: list[Any]) -> None:
    config = {} if command is None else {"worker_spec_command": command}
    obj = kit.build(kit.template("mpi", {"numWorkers": 2}, 0, args=["mpirun", "x"], config=config))
    worker = obj["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    launcher = obj["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    assert worker.get("args", []) == args and worker.get("command", []) == []
    assert launcher["args"] == ["mpirun", "x"]


@pytest.mark.parametrize(("custom", "version"), [({"launcherReplicas": {"replicas": 1}}, 1), ({"numWorkers": 0}, 0)])
def test_mpi_needs_workers(kit: SimpleNamespace, custom: dict[str, Any], version: int) -> None:
    with pytest.raises(BuildError, match="number of workers must be greater than 0"):
        kit.build(kit.template("mpi", custom, version))


def test_deviation_negative_replicas_are_an_error(kit: SimpleNamespace) -> None:
    # Flyte drops a negative-count role silently (TF/PyTorch) or passes it on; here it names the role.
    with pytest.raises(BuildError, match="Worker replicas must not be negative"):
        kit.build(kit.template("tensorflow", {"workerReplicas": {"replicas": -2}}))
    with pytest.raises(BuildError, match="slots must not be negative"):
        kit.build(kit.template("mpi", {"workerReplicas": {"replicas": 1}, "slots": -1}))
