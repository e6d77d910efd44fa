"""End to end: what our tasks register as becomes, through this project's backend (`kubejobs.backend`),
a Training Operator job that passes the official CRD schemas and carries every setting the user gave,
including those under the `kubejobs` extension key."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from flyteidl.admin.agent_pb2 import TaskExecutionMetadata
from flytekit import Resources, task
from flytekitplugins.kfoperators import (
    PS,
    ComputeTemplate,
    Elastic,
    Launcher,
    MPIJob,
    PyTorch,
    RunPolicy,
    SchedulingPolicy,
    TfJob,
    Worker,
)
from flytekitplugins.kubejobs.backend import BackendConfig, build_object

from .task_functions import train

Register = Callable[[Any], Any]
SPOT = [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]


def _build(register: Register, config: Any, crd_dir: Path) -> dict[str, Any]:
    template = register(task(task_config=config)(train))
    meta = TaskExecutionMetadata(namespace="proj-dev")
    meta.task_execution_id.node_execution_id.execution_id.name = "exec1"
    meta.task_execution_id.node_execution_id.node_id = "n0"
    obj: dict[str, Any] = build_object(template, meta, BackendConfig(crd_dir=str(crd_dir)))
    json.dumps(obj)  # a plain JSON-able object
    return obj


@pytest.mark.usefixtures("fresh_extension_warnings")
def test_pytorch_job_carries_roles_and_gang_scheduling(register: Register, crd_dir: Path) -> None:
    config = PyTorch(
        worker=Worker(
            replicas=3,
            requests=Resources(cpu="2", gpu="1"),
            limits=Resources(cpu="2", gpu="1"),
            node_selector={"pool": "gpu"},
            tolerations=SPOT,
            restart_policy="on_failure",
        ),
        run_policy=RunPolicy(
            clean_pod_policy="all",
            backoff_limit=0,
            scheduling_policy=SchedulingPolicy(min_available=4, queue="training"),
        ),
    )
    with pytest.warns(UserWarning, match="kubejobs"):
        obj = _build(register, config, crd_dir)
    assert obj["kind"] == "PyTorchJob"
    specs = obj["spec"]["pytorchReplicaSpecs"]
    assert specs["Master"]["replicas"] == 1 and specs["Worker"]["replicas"] == 3
    worker = specs["Worker"]
    assert worker["restartPolicy"] == "OnFailure"
    pod = worker["template"]["spec"]
    assert pod["nodeSelector"]["pool"] == "gpu"
    assert SPOT[0] in pod["tolerations"]
    container = next(c for c in pod["containers"] if c["name"] == "pytorch")
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"
    run_policy = obj["spec"]["runPolicy"]
    assert run_policy["cleanPodPolicy"] == "All" and run_policy["backoffLimit"] == 0
    assert run_policy["schedulingPolicy"] == {"minAvailable": 4, "queue": "training"}


def test_elastic_job_has_the_elastic_policy(register: Register, crd_dir: Path) -> None:
    obj = _build(register, Elastic(nnodes="2:4", nproc_per_node=8, max_restarts=2), crd_dir)
    spec = obj["spec"]
    assert set(spec["pytorchReplicaSpecs"]) == {"Worker"} and spec["pytorchReplicaSpecs"]["Worker"]["replicas"] == 4
    policy = spec["elasticPolicy"]
    assert (policy["minReplicas"], policy["maxReplicas"], policy["nProcPerNode"], policy["maxRestarts"]) == (2, 4, 8, 2)


@pytest.mark.usefixtures("fresh_extension_warnings")
def test_tf_job_keeps_per_role_placement(register: Register, crd_dir: Path) -> None:
    config = TfJob(ps=PS(replicas=2, node_selector={"pool": "on-demand"}), worker=Worker(replicas=2, tolerations=SPOT))
    with pytest.warns(UserWarning, match="kubejobs"):
        obj = _build(register, config, crd_dir)
    specs = obj["spec"]["tfReplicaSpecs"]
    assert set(specs) == {"PS", "Worker"}
    assert specs["PS"]["template"]["spec"]["nodeSelector"]["pool"] == "on-demand"
    assert SPOT[0] in specs["Worker"]["template"]["spec"]["tolerations"]
    assert (
        "nodeSelector" not in specs["Worker"]["template"]["spec"]
        or "pool" not in specs["Worker"]["template"]["spec"]["nodeSelector"]
    )


def test_mpi_job_runs_mpirun_on_the_launcher(register: Register, crd_dir: Path) -> None:
    obj = _build(register, MPIJob(worker=Worker(replicas=2, command="sshd -D"), launcher=Launcher(), slots=2), crd_dir)
    specs = obj["spec"]["mpiReplicaSpecs"]
    assert specs["Launcher"]["replicas"] == 1 and specs["Worker"]["replicas"] == 2
    launcher = next(c for c in specs["Launcher"]["template"]["spec"]["containers"] if c["name"] == "mpi")
    assert launcher["args"][:1] == ["mpirun"] and launcher["args"][launcher["args"].index("-np") + 1] == "4"
    worker = next(c for c in specs["Worker"]["template"]["spec"]["containers"] if c["name"] == "mpi")
    assert worker["args"] == ["sshd", "-D"]


@pytest.mark.usefixtures("fresh_extension_warnings")
def test_a_compute_templates_accelerators_all_reach_the_container(register: Register, crd_dir: Path) -> None:
    mixed = ComputeTemplate(
        name="mixed", cpu=4, gpu=2, gpu_resource_name="amd.com/gpu", extended_resources={"nvidia.com/gpu": 1}
    )
    with pytest.warns(UserWarning, match="kubejobs"):
        obj = _build(register, PyTorch(worker=Worker(replicas=1, compute_template=mixed)), crd_dir)
    resources = obj["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["resources"]
    for side in ("requests", "limits"):
        assert resources[side]["amd.com/gpu"] == "2"
        assert resources[side]["nvidia.com/gpu"] == "1"
        assert resources[side]["cpu"] == "4"


@pytest.mark.usefixtures("fresh_extension_warnings")
def test_role_volumes_mounts_env_and_affinity_reach_the_role_pods(register: Register, crd_dir: Path) -> None:
    volumes = [{"name": "data", "persistentVolumeClaim": {"claimName": "datasets"}}]
    mounts = [{"name": "data", "mountPath": "/data", "readOnly": True}]
    affinity = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "zone"}]}}
    worker = Worker(replicas=2, volumes=volumes, volume_mounts=mounts, env={"HF_HOME": "/data/hf"}, affinity=affinity)
    with pytest.warns(UserWarning, match="volumeMounts"):
        obj = _build(register, PyTorch(worker=worker, increase_shared_mem=False), crd_dir)
    spec = obj["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
    (container,) = spec["containers"]
    assert spec["volumes"] == volumes
    assert container["volumeMounts"] == mounts
    assert {"name": "HF_HOME", "value": "/data/hf"} in container["env"]
    assert spec["affinity"] == affinity
    master = obj["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    assert "volumes" not in master and "volumeMounts" not in master["containers"][0]
