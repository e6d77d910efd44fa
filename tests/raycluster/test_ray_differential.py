"""Differential tests: the same config through flytekitplugins-ray (installed) and through ours gives an
equivalent custom, compared as Flyte's Ray backend reads it (flyte-backend-behaviour.md §3): groups,
effective min/max, start params, pod specs with resources by quantity, runtime env by value, shutdown/TTL,
autoscaler options. Container order and ``primaryContainerName`` are not read by the backend."""

from __future__ import annotations

import base64
import json
import warnings
from collections.abc import Callable
from typing import Any

import flytekitplugins.ray as official
import flytekitplugins.raycluster as ours
import pytest
import yaml
from flyteidl.plugins import ray_pb2
from flytekit import PodTemplate, Resources, task
from flytekit.configuration import ImageConfig, SerializationSettings
from flytekitplugins.kubejobs.wire.quantity import parse_quantity
from flytekitplugins.raycluster.task import RayFunctionTask
from google.protobuf import json_format
from kubernetes.client import (
    V1Container,
    V1EmptyDirVolumeSource,
    V1EnvVar,
    V1PodSpec,
    V1ResourceRequirements,
    V1Toleration,
    V1Volume,
    V1VolumeMount,
)

SETTINGS = SerializationSettings(
    project="proj", domain="dev", version="v1", image_config=ImageConfig.auto("ghcr.io/example/ray-task:v1")
)


def tune(trials: int) -> float:
    return float(trials)


def custom_of(cfg: Any) -> dict[str, Any]:
    t = task(task_config=cfg)(tune)
    assert t.task_type == "ray"
    out: dict[str, Any] = t.get_custom(SETTINGS)
    return out


def _quantities(side: dict[str, Any]) -> dict[str, Any]:
    return {name: parse_quantity(value) for name, value in side.items()}


def _pod_view(has: bool, pod: Any) -> Any:
    if not has:
        return None
    spec = json_format.MessageToDict(pod.pod_spec)
    containers = {}
    for c in spec.pop("containers", []):
        c = dict(c)
        res = c.pop("resources", {})
        c["resources"] = {side: _quantities(values) for side, values in res.items() if values}
        containers[c.pop("name")] = c
    return {
        "labels": dict(pod.metadata.labels),
        "annotations": dict(pod.metadata.annotations),
        "containers": containers,
        "spec": spec,
    }


def _idl_resources(res: Any) -> dict[str, Any]:
    return {
        side: {e.name: parse_quantity(e.value) for e in getattr(res, side)}
        for side in ("requests", "limits")
        if getattr(res, side)
    }


def backend_view(custom: dict[str, Any]) -> dict[str, Any]:
    """What Flyte's Ray plugin (v1.16.8) takes from a custom."""
    msg = json_format.ParseDict(custom, ray_pb2.RayJob(), ignore_unknown_fields=True)
    cluster = msg.ray_cluster
    head = None
    if cluster.HasField("head_group_spec"):
        h = cluster.head_group_spec
        head = {"start": dict(h.ray_start_params), "pod": _pod_view(h.HasField("k8s_pod"), h.k8s_pod)}
    groups = [
        {
            "name": g.group_name,
            "replicas": g.replicas,
            "min": min(g.min_replicas, g.replicas),
            "max": max(g.max_replicas, g.replicas),
            "start": dict(g.ray_start_params),
            "pod": _pod_view(g.HasField("k8s_pod"), g.k8s_pod),
        }
        for g in cluster.worker_group_spec
    ]
    runtime_env = None
    if msg.runtime_env_yaml:
        runtime_env = yaml.safe_load(msg.runtime_env_yaml)
        # KubeRay < 1.1 reads the base64 JSON: it must say the same.
        assert json.loads(base64.b64decode(msg.runtime_env)) == runtime_env
    autoscaler = None
    if cluster.HasField("autoscaler_options"):
        a = cluster.autoscaler_options
        autoscaler = {
            "mode": a.upscaling_mode,
            "idle": a.idle_timeout_seconds,
            "env": [(e.key, e.value) for e in a.env],
            "image": a.image,
            "resources": _idl_resources(a.resources),
        }
    return {
        "head": head,
        "groups": groups,
        "autoscaling": cluster.enable_autoscaling,
        "autoscaler": autoscaler,
        "runtime_env": runtime_env,
        # The backend uses the task's TTL only together with shutdown; otherwise its platform defaults.
        "shutdown": (True, msg.ttl_seconds_after_finished) if msg.shutdown_after_job_finishes else "platform",
    }


def k8s_pod_template(container: str) -> PodTemplate:
    return PodTemplate(
        labels={"team": "ml"},
        annotations={"note": "x"},
        primary_container_name=container,
        pod_spec=V1PodSpec(
            containers=[
                V1Container(
                    name=container,
                    env=[V1EnvVar(name="A", value="1")],
                    volume_mounts=[V1VolumeMount(name="shm", mount_path="/dev/shm")],
                    resources=V1ResourceRequirements(requests={"cpu": "1"}, limits={"cpu": "2", "memory": "2Gi"}),
                )
            ],
            node_selector={"pool": "ray"},
            tolerations=[V1Toleration(key="spot", operator="Exists", effect="NoSchedule")],
            volumes=[V1Volume(name="shm", empty_dir=V1EmptyDirVolumeSource(medium="Memory"))],
        ),
    )


Builder = Callable[[Any], Any]


def same(build: Builder) -> tuple[Builder, Builder]:
    return build, build


AUTOSCALER = dict(
    idle_timeout_seconds=120,
    env={"RAY_LOG": "debug"},
    image="rayproject/ray:2.60.0",
    requests=Resources(cpu="500m", mem="512Mi"),
    limits=Resources(cpu="1", mem="1Gi"),
)

CASES: dict[str, tuple[Builder, Builder]] = {
    "minimal": same(lambda m: m.RayJobConfig(worker_node_config=[m.WorkerNodeConfig("workers", replicas=1)])),
    "min-max": same(lambda m: m.RayJobConfig([m.WorkerNodeConfig("w", 2, min_replicas=1, max_replicas=4)])),
    "zero-replicas": same(lambda m: m.RayJobConfig([m.WorkerNodeConfig("w", 0, min_replicas=0, max_replicas=5)])),
    "max-only": same(lambda m: m.RayJobConfig([m.WorkerNodeConfig("w", 2, max_replicas=6)])),
    "min-only": same(lambda m: m.RayJobConfig([m.WorkerNodeConfig("w", 3, min_replicas=1)])),
    "start-params": same(
        lambda m: m.RayJobConfig(
            [m.WorkerNodeConfig("w", 1, ray_start_params={"num-cpus": "4"})],
            head_node_config=m.HeadNodeConfig(ray_start_params={"num-cpus": "0", "log-color": "false"}),
        )
    ),
    "start-params-converted": (
        lambda m: m.RayJobConfig(
            [m.WorkerNodeConfig("w", 1, ray_start_params={"num-cpus": "4", "block": "true"})],
        ),
        lambda m: m.RayJobConfig([m.WorkerNodeConfig("w", 1, ray_start_params={"num-cpus": 4, "block": True})]),
    ),
    "empty-head": same(lambda m: m.RayJobConfig([m.WorkerNodeConfig("w", 1)], head_node_config=m.HeadNodeConfig())),
    "runtime-env": same(
        lambda m: m.RayJobConfig(
            [m.WorkerNodeConfig("w", 1)],
            runtime_env={"pip": ["numpy==2.1.0"], "env_vars": {"HF_HOME": "/data/hf", "N": "1"}, "working_dir": "."},
        )
    ),
    "runtime-env-nested": same(
        lambda m: m.RayJobConfig(
            [m.WorkerNodeConfig("w", 1)],
            runtime_env={
                "conda": {"dependencies": ["python=3.11", {"pip": ["yes"]}]},
                "config": {"setup_timeout_seconds": 60},
            },
        )
    ),
    "head-and-worker-resources": same(
        lambda m: m.RayJobConfig(
            [m.WorkerNodeConfig("w", 2, requests=Resources(cpu="2", mem="4Gi", ephemeral_storage="10Gi"))],
            head_node_config=m.HeadNodeConfig(
                requests=Resources(cpu="1", mem="2Gi"), limits=Resources(cpu="2", mem="4Gi")
            ),
        )
    ),
    "gpu-limits-only": same(
        lambda m: m.RayJobConfig([m.WorkerNodeConfig("gpu", 1, limits=Resources(cpu="8", gpu="1", mem="32Gi"))])
    ),
    "numeric-resources": (
        lambda m: m.RayJobConfig([m.WorkerNodeConfig("w", 1, requests=Resources(cpu="2", gpu="1", mem="4Gi"))]),
        lambda m: m.RayJobConfig([m.WorkerNodeConfig("w", 1, requests=Resources(cpu=2, gpu=1, mem="4Gi"))]),
    ),
    "fractional-cpu": (
        lambda m: m.RayJobConfig([m.WorkerNodeConfig("w", 1, requests=Resources(cpu="500m"))]),
        lambda m: m.RayJobConfig([m.WorkerNodeConfig("w", 1, requests=Resources(cpu=0.5))]),
    ),
    "pod-templates": same(
        lambda m: m.RayJobConfig(
            [m.WorkerNodeConfig("w", 2, pod_template=k8s_pod_template("ray-worker"))],
            head_node_config=m.HeadNodeConfig(pod_template=k8s_pod_template("ray-head")),
        )
    ),
    "autoscaling-full": same(
        lambda m: m.RayJobConfig(
            [m.WorkerNodeConfig("w", 1, min_replicas=0, max_replicas=10)],
            enable_autoscaling=True,
            autoscaler_options=m.AutoscalerOptionsConfig(
                upscaling_mode=m.AutoscalerOptionsConfig.UpscalingMode.CONSERVATIVE, **AUTOSCALER
            ),
        )
    ),
    "autoscaler-without-enable": same(
        lambda m: m.RayJobConfig(
            [m.WorkerNodeConfig("w", 1)], autoscaler_options=m.AutoscalerOptionsConfig(idle_timeout_seconds=30)
        )
    ),
    "upscaling-mode-by-name": (
        lambda m: m.RayJobConfig(
            [m.WorkerNodeConfig("w", 1)],
            autoscaler_options=m.AutoscalerOptionsConfig(
                upscaling_mode=m.AutoscalerOptionsConfig.UpscalingMode.AGGRESSIVE
            ),
        ),
        lambda m: m.RayJobConfig(
            [m.WorkerNodeConfig("w", 1)], autoscaler_options=m.AutoscalerOptionsConfig(upscaling_mode="aggressive")
        ),
    ),
    "shutdown-ttl": same(
        lambda m: m.RayJobConfig(
            [m.WorkerNodeConfig("w", 1)], shutdown_after_job_finishes=True, ttl_seconds_after_finished=3600
        )
    ),
    "shutdown-ttl-zero": same(
        lambda m: m.RayJobConfig(
            [m.WorkerNodeConfig("w", 1)], shutdown_after_job_finishes=True, ttl_seconds_after_finished=0
        )
    ),
    "shutdown-no-ttl": same(lambda m: m.RayJobConfig([m.WorkerNodeConfig("w", 1)], shutdown_after_job_finishes=True)),
    "address-no-workers": same(lambda m: m.RayJobConfig([], address="ray://head:10001")),
    "multi-group": same(
        lambda m: m.RayJobConfig(
            [
                m.WorkerNodeConfig("cpu", 4, min_replicas=2, max_replicas=8, requests=Resources(cpu="4", mem="8Gi")),
                m.WorkerNodeConfig("gpu", 1, min_replicas=0, max_replicas=2, limits=Resources(gpu="1", mem="32Gi")),
            ],
            head_node_config=m.HeadNodeConfig(requests=Resources(cpu="2", mem="4Gi")),
            enable_autoscaling=True,
            runtime_env={"env_vars": {"OMP_NUM_THREADS": "1"}},
            shutdown_after_job_finishes=True,
            ttl_seconds_after_finished=60,
        )
    ),
    "issue-example-without-template": same(
        lambda m: m.RayJobConfig(
            head_node_config=m.HeadNodeConfig(requests=Resources(cpu="2", mem="4Gi")),
            worker_node_config=[
                m.WorkerNodeConfig("gpu", replicas=2, min_replicas=0, max_replicas=8, limits=Resources(gpu="1"))
            ],
            enable_autoscaling=True,
            runtime_env={"env_vars": {"HF_HOME": "/data/hf"}},
            shutdown_after_job_finishes=True,
            ttl_seconds_after_finished=600,
        )
    ),
}


def test_enough_cases() -> None:
    assert len(CASES) >= 20


@pytest.mark.parametrize("name", sorted(CASES))
def test_equivalent_custom(name: str) -> None:
    build_official, build_ours = CASES[name]
    theirs = custom_of(build_official(official))
    mine = custom_of(build_ours(ours))
    assert backend_view(mine) == backend_view(theirs)


def test_ttl_without_shutdown_is_dropped_with_a_warning_and_the_backend_sees_the_same() -> None:
    theirs = custom_of(official.RayJobConfig([official.WorkerNodeConfig("w", 1)], ttl_seconds_after_finished=600))
    with pytest.warns(UserWarning, match="ttl_seconds_after_finished=600 is dropped"):
        cfg = ours.RayJobConfig([ours.WorkerNodeConfig("w", 1)], ttl_seconds_after_finished=600)
    mine = custom_of(cfg)
    assert theirs["ttlSecondsAfterFinished"] == 600 and "ttlSecondsAfterFinished" not in mine
    assert backend_view(mine) == backend_view(theirs)


def test_task_identity_and_ray_container_first() -> None:
    cfg = CASES["pod-templates"][1](ours)
    t = task(task_config=cfg)(tune)
    assert isinstance(t, RayFunctionTask)
    assert (t.task_type, t.task_type_version) == ("ray", 0)
    custom = t.get_custom(SETTINGS)
    assert custom is not None
    for spec in [custom["rayCluster"]["headGroupSpec"], *custom["rayCluster"]["workerGroupSpec"]]:
        assert spec["k8sPod"]["podSpec"]["containers"][0]["name"] in ("ray-head", "ray-worker")


def test_pod_template_and_requests_are_merged_where_the_official_plugin_drops_the_template() -> None:
    template = k8s_pod_template("ray-worker")
    with warnings.catch_warnings():
        theirs = custom_of(
            official.RayJobConfig(
                [official.WorkerNodeConfig("w", 1, pod_template=template, requests=Resources(cpu="4"))]
            )
        )
    mine = custom_of(
        ours.RayJobConfig([ours.WorkerNodeConfig("w", 1, pod_template=template, requests=Resources(cpu="4"))])
    )
    their_pod = backend_view(theirs)["groups"][0]["pod"]
    my_pod = backend_view(mine)["groups"][0]["pod"]
    assert "nodeSelector" not in their_pod["spec"]  # the official plugin silently lost the template
    assert my_pod["spec"]["nodeSelector"] == {"pool": "ray"}
    assert my_pod["labels"] == {"team": "ml"}
    worker = my_pod["containers"]["ray-worker"]
    assert worker["volumeMounts"] == [{"name": "shm", "mountPath": "/dev/shm"}]
    # explicit requests (mirrored to limits, as the official plugin does) win over the template's cpu;
    # the template's memory limit stays.
    assert worker["resources"]["requests"] == {"cpu": 4}
    assert worker["resources"]["limits"] == {"cpu": 4, "memory": 2 * 2**30}
