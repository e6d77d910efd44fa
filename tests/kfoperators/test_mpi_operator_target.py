"""MPIJob and HorovodJob configs built as the mpi-operator's MPIJob v2beta1 (``plugins.mpi.operator``): the
object passes the v2beta1 CRD schema and the operator's ValidateMPIJob rules, carries every default the
operator would apply, and the settings only v2beta1 has are refused where the target is the v1 MPIJob."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from flyteidl.admin.agent_pb2 import TaskExecutionMetadata
from flytekit import task
from flytekitplugins.kfoperators import (
    HorovodJob,
    MPIJob,
    MPIOperatorOptions,
    RestartPolicy,
    RunPolicy,
    Worker,
)
from flytekitplugins.kubejobs.backend import BackendConfig, BuildError, build_object, task_phase
from flytekitplugins.kubejobs.backend.mpi_operator import MpiOperatorConfig
from flytekitplugins.kubejobs.wire.kinds import KINDS, MPIJOB_V2BETA1, kind_of

from .task_functions import train

Register = Callable[[Any], Any]
V2 = MpiOperatorConfig("v2beta1")


def _meta(execution: str = "exec1") -> TaskExecutionMetadata:
    meta = TaskExecutionMetadata(namespace="proj-dev")
    meta.task_execution_id.node_execution_id.execution_id.name = execution
    meta.task_execution_id.node_execution_id.node_id = "n0"
    return meta


def _build(register: Register, config: Any, crd_dir: Path, **backend: Any) -> dict[str, Any]:
    template = register(task(task_config=config)(train))
    obj: dict[str, Any] = build_object(template, _meta(), BackendConfig(crd_dir=str(crd_dir), **backend))
    return obj


@pytest.mark.usefixtures("fresh_extension_warnings")
def test_an_mpijob_config_becomes_an_mpijob_v2beta1_with_every_default_written(
    register: Register, crd_dir: Path
) -> None:
    options = MPIOperatorOptions(launcher_creation_policy="WaitForWorkersReady", ssh_auth_mount_path="/home/mpi/.ssh")
    cfg = MPIJob(worker=Worker(replicas=3), slots=2, run_policy=RunPolicy(backoff_limit=1), mpi_operator=options)
    obj = _build(register, cfg, crd_dir, mpi=V2)
    spec = obj["spec"]
    assert obj["apiVersion"] == "kubeflow.org/v2beta1" and obj["kind"] == "MPIJob"
    assert {k: spec[k] for k in ("launcherCreationPolicy", "sshAuthMountPath", "mpiImplementation")} == {
        "launcherCreationPolicy": "WaitForWorkersReady",
        "sshAuthMountPath": "/home/mpi/.ssh",
        "mpiImplementation": "OpenMPI",
    }
    assert spec["runLauncherAsWorker"] is False and spec["slotsPerWorker"] == 2
    assert spec["runPolicy"] == {"cleanPodPolicy": "None", "backoffLimit": 1}
    launcher, worker = (spec["mpiReplicaSpecs"][r] for r in ("Launcher", "Worker"))
    assert (launcher["replicas"], worker["replicas"]) == (1, 3)
    assert launcher["template"]["spec"]["containers"][0]["args"][:2] == ["mpirun", "--allow-run-as-root"]
    # The workers serve SSH for the launcher's mpirun: their image's entrypoint, not the task's command.
    main = worker["template"]["spec"]["containers"][0]
    assert main["name"] == "mpi" and "args" not in main and "command" not in main


@pytest.mark.usefixtures("fresh_extension_warnings")
def test_a_worker_command_is_kept_and_horovod_runs_too(register: Register, crd_dir: Path) -> None:
    sshd = ["/usr/sbin/sshd", "-De", "-f", "/home/mpi/.sshd_config"]
    obj = _build(register, HorovodJob(worker=Worker(replicas=1, command=sshd)), crd_dir, mpi=V2)
    worker = obj["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert worker["args"] == sshd
    launcher = obj["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    assert launcher["args"][0] == "horovodrun"


@pytest.mark.usefixtures("fresh_extension_warnings")
def test_what_the_mpi_operator_refuses_is_refused_at_build(register: Register, crd_dir: Path) -> None:
    always = MPIJob(worker=Worker(replicas=1, restart_policy=RestartPolicy.ALWAYS))
    with pytest.raises(BuildError, match=r"Worker restart policy 'Always' cannot run on the mpi-operator"):
        _build(register, always, crd_dir, mpi=V2)
    # ...and the v1 MPIJob takes it, as before
    assert _build(register, always, crd_dir)["apiVersion"] == "kubeflow.org/v1"


@pytest.mark.usefixtures("fresh_extension_warnings")
def test_v2beta1_settings_are_refused_by_a_v1_target(register: Register, crd_dir: Path) -> None:
    cfg = MPIJob(worker=Worker(replicas=1), mpi_operator=MPIOperatorOptions(mpi_implementation="MPICH"))
    with pytest.raises(BuildError) as e:
        _build(register, cfg, crd_dir)
    assert "kubejobs.mpiJob is not supported for MPIJob kubeflow.org/v1" in str(e.value)
    assert "plugins.mpi.operator" in str(e.value)


@pytest.mark.parametrize(
    ("kwargs", "error", "named"),
    [
        ({"launcher_creation_policy": "Later"}, ValueError, "MPIOperatorOptions.launcher_creation_policy"),
        ({"mpi_implementation": "openmpi"}, ValueError, "MPIOperatorOptions.mpi_implementation"),
        ({"ssh_auth_mount_path": ".ssh"}, ValueError, "MPIOperatorOptions.ssh_auth_mount_path"),
        ({"ssh_auth_mount_path": 3}, TypeError, "MPIOperatorOptions.ssh_auth_mount_path"),
        ({"run_launcher_as_worker": "yes"}, TypeError, "MPIOperatorOptions.run_launcher_as_worker"),
    ],
)
def test_bad_options_fail_at_construction_naming_the_field(kwargs: dict[str, Any], error: type, named: str) -> None:
    with pytest.raises(error) as e:
        MPIOperatorOptions(**kwargs)
    assert named in str(e.value)


def test_the_options_field_takes_options_only() -> None:
    with pytest.raises(TypeError, match=r"MPIJob\.mpi_operator must be an MPIOperatorOptions"):
        MPIJob(worker=Worker(replicas=1), mpi_operator={"mpiImplementation": "MPICH"})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        ({"launcherCreationPolicy": "Later"}, "launcherCreationPolicy must be one of"),
        ({"sshAuthMountPath": "relative"}, "sshAuthMountPath must be an absolute path"),
        ({"runLauncherAsWorker": 1}, "runLauncherAsWorker must be true or false"),
        ({"hostfile": "/etc/h"}, "unknown keys ['hostfile']"),
    ],
)
def test_a_forged_mpi_job_section_is_refused_naming_the_key(section: dict[str, Any], expected: str) -> None:
    from flyteidl.core import tasks_pb2
    from google.protobuf.struct_pb2 import Struct

    custom = Struct()
    custom.update({"workerReplicas": {"replicas": 1}, "kubejobs": {"version": 1, "mpiJob": section}})
    template = tasks_pb2.TaskTemplate(type="mpi", task_type_version=1, custom=custom)
    template.container.image = "img:1"
    with pytest.raises(BuildError) as e:
        build_object(template, _meta(), BackendConfig(mpi=V2))
    assert expected in str(e.value) and "kubejobs.mpiJob" in str(e.value)


def test_the_name_leaves_room_for_the_workers_hostnames(register: Register, crd_dir: Path) -> None:
    template = register(task(task_config=MPIJob(worker=Worker(replicas=99)))(train))
    obj = build_object(template, _meta("e" * 80), BackendConfig(crd_dir=str(crd_dir), mpi=V2))
    name = obj["metadata"]["name"]
    assert len(name) <= MPIJOB_V2BETA1.max_name_length and len(f"{name}-worker-98") <= 63


def test_plugins_mpi_is_read_and_checked() -> None:
    assert BackendConfig.from_flyte_config({"mpi": {"operator": "v2beta1"}}).target_kind("mpi") is MPIJOB_V2BETA1
    assert BackendConfig.from_flyte_config({}).target_kind("mpi") is KINDS["mpi"]
    with pytest.raises(ValueError, match=r"plugins.mpi.operator must be one of \['v1', 'v2beta1', 'auto'\]"):
        BackendConfig.from_flyte_config({"mpi": {"operator": "v2"}})
    with pytest.raises(ValueError, match=r"plugins.mpi has unknown keys \['version'\]"):
        BackendConfig.from_flyte_config({"mpi": {"version": "v2beta1"}})
    both = {"mpi": {"operator": "v2beta1"}, "trainjob": {"task-types": ["mpi"], "runtimes": {"mpi": "mpi-rt"}}}
    with pytest.raises(ValueError, match="both claim the mpi task type"):
        BackendConfig.from_flyte_config(both)


def test_auto_takes_the_served_mpijob() -> None:
    auto = MpiOperatorConfig("auto")
    assert auto.resolve(lambda g, v, p: v == "v1").operator == "v1"
    assert auto.resolve(lambda g, v, p: v == "v2beta1").operator == "v2beta1"
    assert auto.resolve(lambda g, v, p: False).operator == "v1"  # neither: v1, whose create names what is missing


def _status(*conditions: tuple[str, str]) -> dict[str, Any]:
    return {"conditions": [{"type": t, "status": "True", "reason": r} for t, r in conditions]}


@pytest.mark.usefixtures("fresh_extension_warnings")
def test_status_and_links_of_an_mpijob_v2beta1(register: Register, crd_dir: Path) -> None:
    from flytekitplugins.kubejobs.backend import Phase

    config = BackendConfig.from_flyte_config(
        {
            "mpi": {"operator": "v2beta1"},
            "logs": {"kubernetes-enabled": True, "kubernetes-template-uri": "k/{{ .podName }}"},
        }
    )
    obj = _build(register, MPIJob(worker=Worker(replicas=2)), crd_dir, mpi=V2)
    name = obj["metadata"]["name"]
    assert kind_of(obj["kind"], obj["apiVersion"]) is MPIJOB_V2BETA1

    def launcher(suffix: str, created: str) -> dict[str, Any]:
        labels = {"training.kubeflow.org/job-name": name, "training.kubeflow.org/job-role": "launcher"}
        return {"metadata": {"name": f"{name}-launcher-{suffix}", "labels": labels, "creationTimestamp": created}}

    pods = [launcher("aaaaa", "2026-12-03T10:00:00Z"), launcher("bbbbb", "2026-12-03T10:01:00Z")]
    running = task_phase(
        {**obj, "status": _status(("Created", "MPIJobCreated"), ("Running", "MPIJobRunning"))}, config, pods=pods
    )
    assert running.phase is Phase.RUNNING
    # the newest launcher pod (its Job replaced the first), then each worker by its fixed name
    assert [link.uri for link in running.logs] == [
        f"k/{name}-launcher-bbbbb",
        f"k/{name}-worker-0",
        f"k/{name}-worker-1",
    ]
    assert running.logs[0].name == "Kubernetes Logslauncher"
    done = task_phase({**obj, "status": _status(("Succeeded", "MPIJobSucceeded"))}, config)
    assert done.phase is Phase.SUCCEEDED and [link.uri for link in done.logs] == [
        f"k/{name}-worker-0",
        f"k/{name}-worker-1",
    ]
    failed = task_phase({**obj, "status": _status(("Failed", "MPIJobFailed"))}, config)
    assert failed.phase is Phase.RETRYABLE_FAILURE and "MPIJobFailed" in failed.message
