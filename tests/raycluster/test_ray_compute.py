"""Compute templates on Ray groups and the one precedence rule (kubejobs compute.resolve_requirements):
pod template container < compute template < explicit requests/limits; node selectors merge; tolerations
are appended. Expected pod shapes follow KubeRay's apiserver (requests = limits = the template's amounts,
the accelerator's own resource name, tolerations appended: ray-sdk-and-kuberay.md §5.1) and the group pod
templates must validate against the KubeRay v1 RayCluster CRD schema."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from flytekit import PodTemplate, Resources
from flytekitplugins.raycluster import ComputeTemplate, HeadNodeConfig, RayJobConfig, WorkerNodeConfig
from flytekitplugins.raycluster.serialize import ray_job_custom

A100 = ComputeTemplate(
    name="a100",
    cpu=8,
    memory="64Gi",
    gpu=1,
    gpu_resource_name="nvidia.com/a100",
    extended_resources={"vpc.amazonaws.com/efa": 1},
    node_selector={"gpu": "a100", "pool": "gpu"},
    tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
)

A100_AMOUNTS = {"cpu": "8", "memory": "64Gi", "nvidia.com/a100": "1", "vpc.amazonaws.com/efa": "1"}


def pod_template() -> PodTemplate:
    spec: Any = {
        "containers": [
            {"name": "sidecar", "image": "busybox"},
            {
                "name": "primary",
                "env": [{"name": "A", "value": "1"}],
                "resources": {
                    "requests": {"cpu": "1", "memory": "1Gi"},
                    "limits": {"memory": "2Gi", "ephemeral-storage": "5Gi"},
                },
            },
        ],
        "nodeSelector": {"pool": "spot", "zone": "a"},
        "tolerations": [{"key": "spot", "operator": "Exists"}],
    }
    return PodTemplate(pod_spec=spec, primary_container_name="primary", labels={"team": "ml"})


def ray_container(group: WorkerNodeConfig | HeadNodeConfig) -> dict[str, Any]:
    assert group.k8s_pod is not None
    container: dict[str, Any] = group.k8s_pod["podSpec"]["containers"][0]
    return container


def test_compute_template_alone_gives_the_group_pod_all_of_it() -> None:
    group = WorkerNodeConfig("gpu", 2, compute_template=A100)
    assert group.k8s_pod is not None
    spec = group.k8s_pod["podSpec"]
    assert spec["containers"] == [
        {"name": "ray-worker", "resources": {"requests": A100_AMOUNTS, "limits": A100_AMOUNTS}}
    ]
    assert spec["nodeSelector"] == {"gpu": "a100", "pool": "gpu"}
    assert spec["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def test_head_uses_the_ray_head_container() -> None:
    head = HeadNodeConfig(compute_template=ComputeTemplate(name="small", cpu=2, memory="4Gi"))
    assert ray_container(head) == {
        "name": "ray-head",
        "resources": {"requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"cpu": "2", "memory": "4Gi"}},
    }


def test_explicit_requests_win_per_resource_and_gpus_use_the_templates_accelerator() -> None:
    group = WorkerNodeConfig("gpu", 1, compute_template=A100, requests=Resources(cpu="4", gpu=2))
    # explicit requests without limits also set the limits, as in flytekitplugins-ray
    expected = {**A100_AMOUNTS, "cpu": "4", "nvidia.com/a100": "2"}
    assert ray_container(group)["resources"] == {"requests": expected, "limits": expected}


def test_explicit_requests_and_limits_each_win_on_their_side() -> None:
    group = WorkerNodeConfig(
        "gpu", 1, compute_template=A100, requests=Resources(mem="32Gi"), limits=Resources(cpu="16")
    )
    resources = ray_container(group)["resources"]
    assert resources["requests"] == {**A100_AMOUNTS, "memory": "32Gi"}
    assert resources["limits"] == {**A100_AMOUNTS, "cpu": "16"}


def test_pod_template_is_the_base_under_the_compute_template() -> None:
    group = WorkerNodeConfig("gpu", 1, pod_template=pod_template(), compute_template=A100)
    assert group.k8s_pod is not None
    spec = group.k8s_pod["podSpec"]
    # the template's primary container becomes the Ray container, first; the sidecar is kept after it
    assert [c["name"] for c in spec["containers"]] == ["ray-worker", "sidecar"]
    worker = spec["containers"][0]
    assert worker["env"] == [{"name": "A", "value": "1"}]
    assert worker["resources"] == {
        "requests": {**A100_AMOUNTS},  # cpu and memory of the template replace the pod template's
        "limits": {"ephemeral-storage": "5Gi", **A100_AMOUNTS},
    }
    assert spec["nodeSelector"] == {"pool": "gpu", "zone": "a", "gpu": "a100"}  # template keys win
    assert spec["tolerations"] == [
        {"key": "spot", "operator": "Exists"},
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
    ]
    assert group.k8s_pod["metadata"] == {"labels": {"team": "ml"}}


def test_all_three_layers() -> None:
    group = WorkerNodeConfig(
        "gpu",
        1,
        pod_template=pod_template(),
        compute_template=ComputeTemplate(name="mid", cpu=4),
        requests=Resources(mem="3Gi"),
        limits=Resources(mem="6Gi"),
    )
    assert ray_container(group)["resources"] == {
        "requests": {"cpu": "4", "memory": "3Gi"},
        "limits": {"memory": "6Gi", "ephemeral-storage": "5Gi", "cpu": "4"},
    }


def test_pod_template_and_requests_without_compute_template_are_merged() -> None:
    group = WorkerNodeConfig("w", 1, pod_template=pod_template(), limits=Resources(mem="4Gi"))
    assert ray_container(group)["resources"] == {
        "requests": {"cpu": "1", "memory": "4Gi"},
        "limits": {"memory": "4Gi", "ephemeral-storage": "5Gi"},
    }


def test_a_request_above_the_merged_limit_is_refused() -> None:
    with pytest.raises(ValueError, match=r"WorkerNodeConfig\('w'\).*cpu request '16' is above its limit '8'"):
        WorkerNodeConfig("w", 1, compute_template=A100, requests=Resources(cpu="16"), limits=Resources(mem="64Gi"))


def test_issue_example_serializes_with_the_accelerator_name() -> None:
    cfg = RayJobConfig(
        head_node_config=HeadNodeConfig(requests=Resources(cpu="2", mem="4Gi")),
        worker_node_config=[WorkerNodeConfig("gpu", replicas=2, min_replicas=0, max_replicas=8, compute_template=A100)],
        enable_autoscaling=True,
        runtime_env={"env_vars": {"HF_HOME": "/data/hf"}},
        shutdown_after_job_finishes=True,
        ttl_seconds_after_finished=600,
    )
    custom = ray_job_custom(cfg)
    group = custom["rayCluster"]["workerGroupSpec"][0]
    assert (group["groupName"], group["replicas"], group.get("minReplicas", 0), group["maxReplicas"]) == (
        "gpu",
        2,
        0,
        8,
    )
    limits = group["k8sPod"]["podSpec"]["containers"][0]["resources"]["limits"]
    assert limits["nvidia.com/a100"] == "1" and "nvidia.com/gpu" not in limits
    assert group["k8sPod"]["podSpec"]["tolerations"][0]["key"] == "nvidia.com/gpu"


@pytest.fixture(scope="module")
def raycluster_schema(schemas: Any) -> dict[str, Any]:
    schema: dict[str, Any] = schemas.schema(("ray.io", "v1", "RayCluster"))
    return schema


@pytest.mark.parametrize(
    "group",
    [
        WorkerNodeConfig("gpu", 1, compute_template=A100),
        WorkerNodeConfig("gpu", 1, pod_template=pod_template(), compute_template=A100, requests=Resources(cpu=2)),
        WorkerNodeConfig("cpu", 1, requests=Resources(cpu=0.5, mem="1Gi"), limits=Resources(cpu=1)),
    ],
    ids=["template", "all-layers", "numeric"],
)
def test_group_pod_specs_validate_against_the_raycluster_crd(
    raycluster_schema: dict[str, Any], group: WorkerNodeConfig
) -> None:
    cluster = raycluster_schema["properties"]["spec"]["properties"]
    pod_spec_schema = cluster["workerGroupSpecs"]["items"]["properties"]["template"]["properties"]["spec"]
    custom = ray_job_custom(RayJobConfig([group]))
    pod_spec = custom["rayCluster"]["workerGroupSpec"][0]["k8sPod"]["podSpec"]
    jsonschema.Draft7Validator(pod_spec_schema).validate(pod_spec)
    # and a wrongly shaped one does not (the check has teeth)
    broken = {**pod_spec, "containers": [{"name": "ray-worker", "resources": {"limits": ["8"]}}]}
    assert not jsonschema.Draft7Validator(pod_spec_schema).is_valid(broken)
