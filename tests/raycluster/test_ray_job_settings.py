"""RayJobConfig's keyword-only RayJob settings: checked at construction (KubeRay's rules included), sent under
``kubejobs.rayJob``, warned about once, and built by our backend into the RayJob KubeRay reads."""

from __future__ import annotations

import dataclasses
import json
import warnings
from collections import OrderedDict
from typing import Any

import pytest
from flyteidl.admin.agent_pb2 import TaskExecutionMetadata
from flytekit import PodTemplate, Resources, task
from flytekit.configuration import ImageConfig, SerializationSettings
from flytekit.tools.translator import get_serializable
from flytekitplugins.kubejobs.backend import BackendConfig, build_object
from flytekitplugins.kubejobs.userwarnings import ExtensionKeyWarning
from flytekitplugins.raycluster import (
    AutoscalerOptionsConfig,
    DeletionRule,
    DeletionStrategy,
    HeadNodeConfig,
    RayJobConfig,
    SubmissionMode,
    WorkerNodeConfig,
)
from flytekitplugins.raycluster.serialize import ray_job_custom
from kubernetes.client import V1Container, V1PodSpec

GROUPS = [WorkerNodeConfig("w", replicas=1)]
SETTINGS = SerializationSettings(
    project="p", domain="d", version="v", image_config=ImageConfig.auto(img_name="registry.example/flyte:1")
)


def train() -> None:
    return None


def built_spec(cfg: RayJobConfig) -> dict[str, Any]:
    """The RayJob spec our backend builds for a task with ``cfg``, as the connector would create it."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExtensionKeyWarning)
        template = get_serializable(OrderedDict(), SETTINGS, task(task_config=cfg)(train)).template.to_flyte_idl()
    meta = TaskExecutionMetadata(namespace="ns")
    meta.task_execution_id.node_execution_id.execution_id.name = "e1"
    meta.task_execution_id.node_execution_id.node_id = "n0"
    spec: dict[str, Any] = build_object(template, meta, BackendConfig())["spec"]
    return spec


def test_official_settings_alone_send_no_extension_key() -> None:
    cfg = RayJobConfig(GROUPS, shutdown_after_job_finishes=True, ttl_seconds_after_finished=60)
    assert cfg.ray_job_extension is None
    assert "kubejobs" not in ray_job_custom(cfg)


def test_each_setting_reaches_the_rayjob_kuberay_reads() -> None:
    cfg = RayJobConfig(
        GROUPS,
        shutdown_after_job_finishes=True,
        submission_mode="httpmode",
        backoff_limit=2,
        active_deadline_seconds=600,
        pre_running_deadline_seconds=120,
        entrypoint_num_cpus=0.5,
        entrypoint_num_gpus=1,
        entrypoint_resources={"custom": 2},
        suspend=True,
    )
    assert cfg.submission_mode is SubmissionMode.HTTP
    spec = built_spec(cfg)
    assert {k: spec[k] for k in ("submissionMode", "backoffLimit", "activeDeadlineSeconds")} == {
        "submissionMode": "HTTPMode",
        "backoffLimit": 2,
        "activeDeadlineSeconds": 600,
    }
    assert spec["preRunningDeadlineSeconds"] == 120 and spec["suspend"] is True
    assert (spec["entrypointNumCpus"], spec["entrypointNumGpus"]) == (0.5, 1)
    assert json.loads(spec["entrypointResources"]) == {"custom": 2}
    assert "submitterPodTemplate" not in spec  # HTTPMode: the operator submits, no submitter pod


def test_submitter_resources_are_apart_from_the_heads() -> None:
    cfg = RayJobConfig(
        GROUPS,
        head_node_config=HeadNodeConfig(requests=Resources(cpu="4", mem="8Gi"), limits=Resources(cpu="4", mem="8Gi")),
        submitter_requests=Resources(cpu="200m", mem="256Mi"),
        submitter_limits=Resources(cpu="500m", mem="256Mi"),
        submitter_backoff_limit=0,
    )
    spec = built_spec(cfg)
    submitter = spec["submitterPodTemplate"]["spec"]["containers"][0]["resources"]
    assert submitter == {"requests": {"cpu": "200m", "memory": "256Mi"}, "limits": {"cpu": "500m", "memory": "256Mi"}}
    head = spec["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["resources"]
    assert head["limits"] == {"cpu": "4", "memory": "8Gi"}
    assert spec["submitterConfig"] == {"backoffLimit": 0}


def test_deletion_rules_travel_in_kuberays_shape() -> None:
    strategy = DeletionStrategy(
        rules=[
            DeletionRule("DeleteWorkers", job_status="SUCCEEDED"),
            DeletionRule("DeleteCluster", job_status="SUCCEEDED", ttl_seconds=30),
            DeletionRule("DeleteCluster", job_deployment_status="Failed", ttl_seconds=300),
        ]
    )
    spec = built_spec(RayJobConfig(GROUPS, deletion_strategy=strategy))
    assert spec["deletionStrategy"]["deletionRules"][1] == {
        "policy": "DeleteCluster",
        "condition": {"jobStatus": "SUCCEEDED", "ttlSeconds": 30},
    }
    assert spec["shutdownAfterJobFinishes"] is False
    legacy = DeletionStrategy(on_success="DeleteCluster", on_failure="DeleteNone")
    assert built_spec(RayJobConfig(GROUPS, deletion_strategy=legacy))["deletionStrategy"] == {
        "onSuccess": {"policy": "DeleteCluster"},
        "onFailure": {"policy": "DeleteNone"},
    }


def test_an_existing_cluster_needs_no_worker_groups() -> None:
    spec = built_spec(RayJobConfig([], cluster_selector="shared-cluster"))
    assert spec["clusterSelector"] == {"ray.io/cluster": "shared-cluster"} and "rayClusterSpec" not in spec
    same = RayJobConfig([], cluster_selector={"ray.io/cluster": "shared-cluster"})
    assert same.ray_job_extension == {"clusterSelector": {"ray.io/cluster": "shared-cluster"}}


def test_autoscaler_version_travels_with_the_idl_options() -> None:
    options = AutoscalerOptionsConfig(idle_timeout_seconds=60, version="v2", image_pull_policy="IfNotPresent")
    spec = built_spec(RayJobConfig(GROUPS, enable_autoscaling=True, autoscaler_options=options))
    got = spec["rayClusterSpec"]["autoscalerOptions"]
    assert (got["version"], got["imagePullPolicy"], got["idleTimeoutSeconds"]) == ("v2", "IfNotPresent", 60)
    # the official plugin's part of the custom is unchanged by the two additions
    plain = ray_job_custom(
        RayJobConfig(
            GROUPS,
            enable_autoscaling=True,
            autoscaler_options=dataclasses.replace(options, version=None, image_pull_policy=None),
        )
    )
    assert {
        k: v
        for k, v in ray_job_custom(RayJobConfig(GROUPS, enable_autoscaling=True, autoscaler_options=options)).items()
        if k != "kubejobs"
    } == plain


def test_a_group_idle_timeout_reaches_its_worker_group_only() -> None:
    groups = [WorkerNodeConfig("cpu", replicas=1, idle_timeout_seconds=120), WorkerNodeConfig("gpu", replicas=1)]
    options = AutoscalerOptionsConfig(idle_timeout_seconds=60, version="v2")
    cfg = RayJobConfig(groups, enable_autoscaling=True, autoscaler_options=options)
    assert ray_job_custom(cfg)["kubejobs"]["rayGroups"] == {"workers": {"cpu": {"idleTimeoutSeconds": 120}}}
    spec = built_spec(cfg)["rayClusterSpec"]
    by_name = {g["groupName"]: g for g in spec["workerGroupSpecs"]}
    assert by_name["cpu"]["idleTimeoutSeconds"] == 120 and "idleTimeoutSeconds" not in by_name["gpu"]
    assert spec["autoscalerOptions"]["idleTimeoutSeconds"] == 60  # the cluster-wide default stays


def _v2_head_env() -> HeadNodeConfig:
    from kubernetes.client import V1EnvVar

    env = [V1EnvVar(name="RAY_ENABLE_AUTOSCALER_V2", value="true")]
    return HeadNodeConfig(
        pod_template=PodTemplate(pod_spec=V1PodSpec(containers=[V1Container(name="ray-head", env=env)]))
    )


def test_a_group_idle_timeout_accepts_kuberays_older_v2_switch() -> None:
    groups = [WorkerNodeConfig("cpu", replicas=1, idle_timeout_seconds=0)]
    cfg = RayJobConfig(groups, head_node_config=_v2_head_env(), enable_autoscaling=True)
    assert built_spec(cfg)["rayClusterSpec"]["workerGroupSpecs"][0]["idleTimeoutSeconds"] == 0


@pytest.mark.parametrize(
    ("kwargs", "error", "named"),
    [
        ({"idle": -1}, ValueError, "WorkerNodeConfig('w').idle_timeout_seconds"),
        ({"idle": 1.5}, TypeError, "WorkerNodeConfig('w').idle_timeout_seconds"),
        ({"idle": 30, "enable_autoscaling": True}, ValueError, "idle_timeout_seconds=30 needs autoscaler v2"),
        (
            {"idle": 30, "autoscaler_options": AutoscalerOptionsConfig(version="v1"), "enable_autoscaling": True},
            ValueError,
            "needs autoscaler v2",
        ),
        ({"idle": 30, "head_node_config": _v2_head_env()}, ValueError, "needs enable_autoscaling=True"),
    ],
    ids=["negative", "float", "no-v2", "v1", "no-autoscaling"],
)
def test_a_group_idle_timeout_without_the_v2_autoscaler_is_refused(
    kwargs: dict[str, Any], error: type, named: str
) -> None:
    with pytest.raises(error) as e:
        idle = kwargs.pop("idle")
        RayJobConfig([WorkerNodeConfig("w", replicas=1, idle_timeout_seconds=idle)], **kwargs)
    assert named in str(e.value)


def _head_restart_always() -> HeadNodeConfig:
    pod = PodTemplate(pod_spec=V1PodSpec(containers=[V1Container(name="ray-head")], restart_policy="Always"))
    return HeadNodeConfig(pod_template=pod)


@pytest.mark.parametrize(
    ("kwargs", "error", "named"),
    [
        ({"submission_mode": "FastMode"}, ValueError, "RayJobConfig.submission_mode"),
        ({"backoff_limit": -1}, ValueError, "RayJobConfig.backoff_limit"),
        ({"backoff_limit": 1.5}, TypeError, "RayJobConfig.backoff_limit"),
        ({"active_deadline_seconds": 0}, ValueError, "RayJobConfig.active_deadline_seconds"),
        ({"pre_running_deadline_seconds": 0}, ValueError, "RayJobConfig.pre_running_deadline_seconds"),
        ({"entrypoint_num_cpus": -0.5}, ValueError, "RayJobConfig.entrypoint_num_cpus"),
        ({"entrypoint_num_gpus": float("inf")}, ValueError, "RayJobConfig.entrypoint_num_gpus"),
        ({"entrypoint_num_cpus": "1"}, TypeError, "RayJobConfig.entrypoint_num_cpus"),
        ({"entrypoint_resources": {"custom": -1}}, ValueError, "RayJobConfig.entrypoint_resources['custom']"),
        ({"entrypoint_resources": {}}, TypeError, "RayJobConfig.entrypoint_resources"),
        ({"submitter_requests": Resources(cpu="lots")}, ValueError, "RayJobConfig.submitter_requests"),
        ({"suspend": 1}, TypeError, "RayJobConfig.suspend"),
        ({"suspend": True}, ValueError, "RayJobConfig.suspend=True is refused by KubeRay"),
        ({"deletion_strategy": {"onSuccess": {}}}, TypeError, "RayJobConfig.deletion_strategy"),
        (
            {"submission_mode": "InteractiveMode", "backoff_limit": 1},
            ValueError,
            "RayJobConfig.backoff_limit=1 is refused by KubeRay",
        ),
        (
            {"submission_mode": "HTTPMode", "submitter_limits": Resources(cpu="1")},
            ValueError,
            "RayJobConfig.submitter_limits needs submission_mode K8sJobMode",
        ),
        (
            {"submission_mode": "SidecarMode", "head_node_config": _head_restart_always()},
            ValueError,
            "RayJobConfig.head_node_config",
        ),
        (
            {"autoscaler_options": AutoscalerOptionsConfig(version="v2")},
            ValueError,
            "need enable_autoscaling=True",
        ),
        (
            {
                "enable_autoscaling": True,
                "deletion_strategy": DeletionStrategy(rules=[DeletionRule("DeleteWorkers", job_status="FAILED")]),
            },
            ValueError,
            "DeleteWorkers is not allowed with autoscaling",
        ),
        (
            {
                "shutdown_after_job_finishes": True,
                "deletion_strategy": DeletionStrategy(rules=[DeletionRule("DeleteCluster", job_status="FAILED")]),
            },
            ValueError,
            "RayJobConfig.shutdown_after_job_finishes=True is refused by KubeRay",
        ),
    ],
    ids=lambda v: str(v)[:40] if not isinstance(v, dict) else "-".join(v),
)
def test_bad_settings_fail_at_construction_naming_the_field(kwargs: dict[str, Any], error: type, named: str) -> None:
    with pytest.raises(error) as e:
        RayJobConfig(GROUPS, **kwargs)
    assert named in str(e.value)


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"worker_node_config": GROUPS}, "worker_node_config"),
        ({"head_node_config": HeadNodeConfig()}, "head_node_config"),
        ({"enable_autoscaling": True}, "enable_autoscaling"),
        ({"shutdown_after_job_finishes": True}, "shutdown_after_job_finishes"),
        ({"backoff_limit": 1}, "backoffLimit"),
        ({"submission_mode": "SidecarMode"}, "SidecarMode"),
        ({"deletion_strategy": DeletionStrategy(on_success="DeleteCluster", on_failure="DeleteNone")}, "DeleteCluster"),
    ],
    ids=lambda v: "-".join(v) if isinstance(v, dict) else v,
)
def test_an_existing_cluster_refuses_what_would_be_dropped(kwargs: dict[str, Any], named: str) -> None:
    with pytest.raises(ValueError) as e:
        RayJobConfig(**{"worker_node_config": [], **kwargs}, cluster_selector="shared")
    assert named in str(e.value) and "clusterselector" in str(e.value).lower().replace("_", "")


@pytest.mark.parametrize("selector", ["Not_A_Name", {"app": "x"}, {"ray.io/cluster": 3}])
def test_a_malformed_selector_is_refused(selector: Any) -> None:
    with pytest.raises((ValueError, TypeError)) as e:
        RayJobConfig([], cluster_selector=selector)
    assert "RayJobConfig.cluster_selector" in str(e.value)


@pytest.mark.parametrize(
    ("make", "named"),
    [
        (lambda: DeletionRule("DeleteSelf", job_status="FAILED"), "DeleteSelf"),
        (lambda: DeletionRule("Delete", job_status="FAILED"), "DeletionRule.policy"),
        (lambda: DeletionRule("DeleteCluster"), "exactly one of job_status"),
        (lambda: DeletionRule("DeleteCluster", job_status="FAILED", job_deployment_status="Failed"), "exactly one"),
        (lambda: DeletionRule("DeleteCluster", job_status="RUNNING"), "DeletionRule.job_status"),
        (lambda: DeletionRule("DeleteCluster", job_status="FAILED", ttl_seconds=-1), "DeletionRule.ttl_seconds"),
        (lambda: DeletionStrategy(on_success="DeleteCluster"), "both on_success and on_failure"),
        (
            lambda: DeletionStrategy([DeletionRule("DeleteCluster", job_status="FAILED")], on_success="DeleteNone"),
            "not both",
        ),
        (lambda: DeletionStrategy(["DeleteCluster"]), "DeletionStrategy.rules[0]"),  # type: ignore[list-item]
        (
            lambda: DeletionStrategy(
                [
                    DeletionRule("DeleteWorkers", job_status="FAILED", ttl_seconds=60),
                    DeletionRule("DeleteCluster", job_status="FAILED", ttl_seconds=10),
                ]
            ),
            None,
        ),
    ],
)
def test_deletion_settings_are_checked(make: Any, named: Any) -> None:
    if named is None:  # the TTL order is a rule of the whole RayJob: checked by RayJobConfig
        with pytest.raises(ValueError, match="must be >= the DeleteWorkers TTL"):
            RayJobConfig(GROUPS, deletion_strategy=make())
        return
    with pytest.raises((ValueError, TypeError)) as e:
        make()
    assert named in str(e.value)


def test_the_config_is_not_changed_by_serialization() -> None:
    resources = {"custom": 1.5}
    cfg = RayJobConfig(GROUPS, entrypoint_resources=resources)
    custom = ray_job_custom(cfg)
    custom["kubejobs"]["rayJob"]["entrypointResources"] = "changed"
    assert cfg.ray_job_extension == {"entrypointResources": '{"custom": 1.5}'}
    resources["custom"] = 9
    assert cfg.entrypoint_resources == {"custom": 1.5}


@pytest.mark.usefixtures("fresh_extension_warnings")
def test_serialization_warns_once_that_stock_backends_ignore_the_settings() -> None:
    cfg = RayJobConfig(GROUPS, submission_mode="HTTPMode", backoff_limit=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            get_serializable(OrderedDict(), SETTINGS, task(task_config=cfg)(train))
    shown = [w for w in caught if issubclass(w.category, ExtensionKeyWarning)]
    assert len(shown) == 1, [str(w.message) for w in caught]
    assert "ray: rayJob.backoffLimit, rayJob.submissionMode travel under the 'kubejobs' key" in str(shown[0].message)
    assert shown[0].filename == __file__  # attributed to the task function, not flytekit
