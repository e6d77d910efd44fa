"""Customs written by this project's plugins (flytekitplugins.kfoperators / .raycluster), including the
``kubejobs`` extension key and compute templates, built end to end."""

from __future__ import annotations

import warnings
from collections import OrderedDict
from types import SimpleNamespace
from typing import Any

import pytest
from flytekit import Resources, task
from flytekit.configuration import Image, ImageConfig, SerializationSettings
from flytekit.tools.translator import get_serializable
from flytekitplugins.kfoperators import (
    CleanPodPolicy,
    ComputeTemplate,
    Launcher,
    MPIJob,
    PyTorch,
    RunPolicy,
    SchedulingPolicy,
    Worker,
)
from flytekitplugins.raycluster import ComputeTemplate as RayComputeTemplate
from flytekitplugins.raycluster import HeadNodeConfig, RayJobConfig, WorkerNodeConfig

A100 = ComputeTemplate(
    name="a100",
    cpu=8,
    memory="64Gi",
    gpu=1,
    gpu_resource_name="amd.com/gpu",
    extended_resources={"example.com/fpga": 1},
    node_selector={"gpu": "a100"},
    tolerations=[{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
)
SETTINGS = SerializationSettings(
    project="proj",
    domain="dev",
    version="v1",
    image_config=ImageConfig(default_image=Image(name="default", fqn="registry.example/img", tag="1")),
)

with warnings.catch_warnings():
    warnings.simplefilter("ignore", UserWarning)  # "needs the kubejobs backend" notice

    @task(
        task_config=PyTorch(
            worker=Worker(replicas=4, compute_template=A100, env={"NCCL_DEBUG": "INFO"}),
            run_policy=RunPolicy(
                clean_pod_policy=CleanPodPolicy.ALL,
                backoff_limit=0,
                suspend=True,
                scheduling_policy=SchedulingPolicy(min_available=5, queue="q"),
            ),
            increase_shared_mem=False,
        )
    )
    def own_pytorch() -> None: ...

    @task(task_config=MPIJob(worker=Worker(replicas=2, requests=Resources(cpu="2")), launcher=Launcher(), slots=4))
    def own_mpi() -> None: ...

    @task(
        task_config=RayJobConfig(
            head_node_config=HeadNodeConfig(requests=Resources(cpu="2", mem="4Gi")),
            worker_node_config=[
                WorkerNodeConfig(
                    group_name="gpu",
                    replicas=2,
                    compute_template=RayComputeTemplate(
                        name="g", cpu=8, memory="32Gi", gpu=1, node_selector={"g": "1"}
                    ),
                )
            ],
            shutdown_after_job_finishes=True,
            ttl_seconds_after_finished=300,
        )
    )
    def own_ray() -> None: ...


def _serialize(entity: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return get_serializable(OrderedDict(), SETTINGS, entity).template.to_flyte_idl()


def test_pytorch_with_compute_template_and_run_policy_extension(kit: SimpleNamespace) -> None:
    obj = kit.build(_serialize(own_pytorch))
    worker = obj["spec"]["pytorchReplicaSpecs"]["Worker"]
    pod = worker["template"]["spec"]
    c = kit.container(pod, "pytorch")
    assert worker["replicas"] == 4
    assert kit.quantities(c["resources"]["limits"]) == kit.quantities(
        {"cpu": "8", "memory": "64Gi", "amd.com/gpu": "1", "example.com/fpga": "1"}
    )
    assert pod["nodeSelector"] == {"gpu": "a100"}
    assert {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    assert kit.env_of(c)["NCCL_DEBUG"] == "INFO"
    rp = obj["spec"]["runPolicy"]
    assert rp["cleanPodPolicy"] == "All" and rp["backoffLimit"] == 0 and rp["suspend"] is True
    assert rp["schedulingPolicy"]["minAvailable"] == 5 and rp["schedulingPolicy"]["queue"] == "q"


def test_mpi_slots(kit: SimpleNamespace) -> None:
    obj = kit.build(_serialize(own_mpi))
    assert obj["spec"]["slotsPerWorker"] == 4
    assert obj["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] == 2


def test_ray_compute_template_in_k8s_pod(kit: SimpleNamespace) -> None:
    t = _serialize(own_ray)
    obj = kit.build(t)
    group = obj["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]
    c = kit.container(group["template"]["spec"], "ray-worker")
    assert kit.quantities(c["resources"]["limits"]) == kit.quantities(
        {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "1"}
    )
    assert group["template"]["spec"]["nodeSelector"] == {"g": "1"}
    head = kit.container(obj["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"], "ray-head")
    assert kit.quantities(head["resources"]["requests"]) == kit.quantities({"cpu": "2", "memory": "4Gi"})
    assert (obj["spec"]["shutdownAfterJobFinishes"], obj["spec"]["ttlSecondsAfterFinished"]) == (True, 300)


@pytest.mark.parametrize("entity", [own_pytorch, own_mpi, own_ray])
def test_builds_are_deterministic(kit: SimpleNamespace, entity: Any) -> None:
    t = _serialize(entity)
    assert kit.build(t) == kit.build(t)
