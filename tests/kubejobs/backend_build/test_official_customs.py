"""Customs written by flytekit's official plugins (task_type_version 1 kubeflow, ray), serialized with
flytekit's own ``get_serializable`` as registration does, then built: the upgrade path. Expected values
come from the plugin configuration and the reference (flyte-backend-behaviour.md)."""

from __future__ import annotations

from collections import OrderedDict
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from flytekit import PodTemplate, Resources, task
from flytekit.configuration import Image, ImageConfig, SerializationSettings
from flytekit.tools.translator import get_serializable
from flytekitplugins.kfmpi import HorovodJob, Launcher, MPIJob
from flytekitplugins.kfmpi import Worker as MPIWorker
from flytekitplugins.kfpytorch import CleanPodPolicy, Master, PyTorch, RestartPolicy, RunPolicy, Worker
from flytekitplugins.kftensorflow import PS, Chief, TfJob
from flytekitplugins.kftensorflow import Worker as TFWorker
from flytekitplugins.ray import HeadNodeConfig, RayJobConfig, WorkerNodeConfig
from kubernetes.client import V1Container, V1PodSpec, V1Toleration


@task(
    shared_memory=True,
    task_config=PyTorch(
        increase_shared_mem=False,
        worker=Worker(
            replicas=3,
            image="train:2",
            limits=Resources(gpu="1", cpu="4", mem="8Gi"),
            restart_policy=RestartPolicy.FAILURE,
        ),
        master=Master(restart_policy=RestartPolicy.ALWAYS),
        run_policy=RunPolicy(clean_pod_policy=CleanPodPolicy.ALL, backoff_limit=2, ttl_seconds_after_finished=60),
    ),
)
def pytorch_task() -> None: ...


@task(task_config=PyTorch(num_workers=2, increase_shared_mem=False), requests=Resources(cpu="2", mem="2Gi"))
def pytorch_plain_task() -> None: ...


@task(task_config=TfJob(worker=TFWorker(replicas=2), ps=PS(replicas=1), chief=Chief(replicas=1, image="chief:1")))
def tf_task() -> None: ...


@task(task_config=MPIJob(launcher=Launcher(replicas=1), worker=MPIWorker(replicas=2), slots=2))
def mpi_task() -> None: ...


@task(task_config=HorovodJob(launcher=Launcher(replicas=1), worker=MPIWorker(replicas=2), slots=1))
def horovod_task() -> None: ...


@task(
    task_config=RayJobConfig(
        head_node_config=HeadNodeConfig(ray_start_params={"num-cpus": "1"}),
        worker_node_config=[
            WorkerNodeConfig(group_name="cpu", replicas=2, min_replicas=1, max_replicas=4),
            WorkerNodeConfig(group_name="gpu", replicas=1, limits=Resources(gpu="1", cpu="8")),
        ],
        runtime_env={"pip": ["numpy"]},
        shutdown_after_job_finishes=True,
        ttl_seconds_after_finished=120,
    )
)
def ray_task() -> None: ...


@task(task_config=RayJobConfig(worker_node_config=[WorkerNodeConfig(group_name="w", replicas=1)]))
def ray_minimal_task() -> None: ...


@task(
    task_config=PyTorch(num_workers=1, increase_shared_mem=False),
    pod_template=PodTemplate(
        primary_container_name="primary",
        labels={"team": "ml"},
        pod_spec=V1PodSpec(
            containers=[V1Container(name="primary")], tolerations=[V1Toleration(key="t", operator="Exists")]
        ),
    ),
)
def pytorch_pod_template_task() -> None: ...


def elastic_task() -> Any:
    """An Elastic (torchrun) task; built lazily because Elastic imports torch."""
    import warnings

    with warnings.catch_warnings():  # torch without numpy says so once, at import
        warnings.filterwarnings("ignore", message="Failed to initialize NumPy", category=UserWarning)
        import torch  # noqa: F401
    from flytekitplugins.kfpytorch import Elastic

    @task(task_config=Elastic(nnodes="2:4", nproc_per_node=8, max_restarts=3, increase_shared_mem=False))
    def train_elastic() -> None: ...

    return train_elastic


SETTINGS = SerializationSettings(
    project="proj",
    domain="dev",
    version="v1",
    image_config=ImageConfig(default_image=Image(name="default", fqn="registry.example/flyte-default", tag="1.0")),
)
IMAGE = "registry.example/flyte-default:1.0"


def serialize(entity: Any) -> Any:
    return get_serializable(OrderedDict(), SETTINGS, entity).template.to_flyte_idl()


def _c(spec: dict[str, Any]) -> Any:
    return spec["template"]["spec"]["containers"][0]


def test_pytorch(kit: SimpleNamespace) -> None:
    t = serialize(pytorch_task)
    assert (t.type, t.task_type_version) == ("pytorch", 1)
    obj = kit.build(t)
    specs = obj["spec"]["pytorchReplicaSpecs"]
    assert (specs["Master"]["replicas"], specs["Master"]["restartPolicy"]) == (1, "Always")
    assert (specs["Worker"]["replicas"], specs["Worker"]["restartPolicy"]) == (3, "OnFailure")
    assert _c(specs["Worker"])["image"] == "train:2" and _c(specs["Master"])["image"] == IMAGE
    assert kit.quantities(_c(specs["Worker"])["resources"]["limits"]) == kit.quantities(
        {"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": "1"}
    )
    assert obj["spec"]["runPolicy"] == {"cleanPodPolicy": "All", "backoffLimit": 2, "ttlSecondsAfterFinished": 60}
    for spec in specs.values():  # @task(shared_memory=True) arrives as extended resources
        assert any(v.get("emptyDir", {}).get("medium") == "Memory" for v in spec["template"]["spec"]["volumes"])
        assert _c(spec)["args"][0] == "pyflyte-execute"


def test_pytorch_task_resources_reach_every_role(kit: SimpleNamespace) -> None:
    obj = kit.build(serialize(pytorch_plain_task))
    for spec in obj["spec"]["pytorchReplicaSpecs"].values():
        assert kit.quantities(_c(spec)["resources"]["requests"]) == kit.quantities({"cpu": "2", "memory": "2Gi"})
    assert obj["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 2


def test_pytorch_pod_template(kit: SimpleNamespace) -> None:
    obj = kit.build(serialize(pytorch_pod_template_task))
    worker = obj["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]
    assert [c["name"] for c in worker["spec"]["containers"]] == ["pytorch"]
    assert worker["spec"]["containers"][0]["image"] == IMAGE
    assert {"key": "t", "operator": "Exists"} in worker["spec"]["tolerations"]
    assert worker["metadata"]["labels"]["team"] == "ml"


def test_tensorflow(kit: SimpleNamespace) -> None:
    obj = kit.build(serialize(tf_task))
    specs = obj["spec"]["tfReplicaSpecs"]
    assert {k: v["replicas"] for k, v in specs.items()} == {"Worker": 2, "PS": 1, "Chief": 1}
    assert _c(specs["Chief"])["image"] == "chief:1" and _c(specs["PS"])["image"] == IMAGE


@pytest.mark.parametrize(("entity", "first_arg", "slots"), [(mpi_task, "mpirun", 2), (horovod_task, "horovodrun", 1)])
def test_mpi_and_horovod(kit: SimpleNamespace, entity: Any, first_arg: str, slots: int) -> None:
    t = serialize(entity)
    assert (t.type, t.task_type_version) == ("mpi", 1)
    obj = kit.build(t)
    specs = obj["spec"]["mpiReplicaSpecs"]
    assert {k: v["replicas"] for k, v in specs.items()} == {"Launcher": 1, "Worker": 2}
    assert obj["spec"]["slotsPerWorker"] == slots  # deviation: Flyte writes 1
    assert _c(specs["Launcher"])["args"][0] == first_arg


def test_ray(kit: SimpleNamespace) -> None:
    t = serialize(ray_task)
    assert t.type == "ray"
    obj = kit.build(t, template_vars={"input": "s3://in/inputs.pb"})
    spec = obj["spec"]
    assert (spec["shutdownAfterJobFinishes"], spec["ttlSecondsAfterFinished"]) == (True, 120)
    assert yaml.safe_load(spec["runtimeEnvYAML"]) == {"pip": ["numpy"]}
    assert spec["entrypoint"].startswith("pyflyte-execute --inputs s3://in/inputs.pb ")
    cluster = spec["rayClusterSpec"]
    assert cluster["headGroupSpec"]["rayStartParams"]["num-cpus"] == "1"
    groups = {g["groupName"]: g for g in cluster["workerGroupSpecs"]}
    assert [(g["replicas"], g["minReplicas"], g["maxReplicas"]) for g in groups.values()] == [(2, 1, 4), (1, 1, 1)]
    gpu = kit.container(groups["gpu"]["template"]["spec"], "ray-worker")
    assert kit.quantities(gpu["resources"]["limits"]) == kit.quantities(
        {"cpu": "8", "memory": "1024Mi", "nvidia.com/gpu": "1"}
    )
    cpu = kit.container(groups["cpu"]["template"]["spec"], "ray-worker")
    assert kit.quantities(cpu["resources"]["limits"]) == kit.quantities({"cpu": "1000m", "memory": "1024Mi"})


def test_ray_minimal_uses_platform_shutdown(kit: SimpleNamespace) -> None:
    obj = kit.build(serialize(ray_minimal_task))
    assert (obj["spec"]["shutdownAfterJobFinishes"], obj["spec"]["ttlSecondsAfterFinished"]) == (True, 3600)
    assert "headGroupSpec" in obj["spec"]["rayClusterSpec"]


def test_elastic(kit: SimpleNamespace) -> None:
    t = serialize(elastic_task())
    assert (t.type, t.task_type_version) == ("pytorch", 1)
    obj = kit.build(t)
    spec = obj["spec"]
    assert set(spec["pytorchReplicaSpecs"]) == {"Worker"}
    assert spec["pytorchReplicaSpecs"]["Worker"]["replicas"] == 4
    assert spec["elasticPolicy"] == {
        "rdzvBackend": "c10d",
        "minReplicas": 2,
        "maxReplicas": 4,
        "nProcPerNode": 8,
        "maxRestarts": 3,
    }
