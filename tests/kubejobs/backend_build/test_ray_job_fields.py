"""The ``kubejobs.rayJob`` section: every RayJob spec field flyteidl's RayJob lacks is copied into the RayJob
or refused with a BuildError naming it; nothing is dropped (wire.extension, backend/ray.py)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from flytekitplugins.kubejobs.backend import BackendConfig, BuildError, build_object
from flytekitplugins.kubejobs.wire.extension import RAY_JOB_KEYS

WORKERS = {"workerGroupSpec": [{"groupName": "w", "replicas": 1, "minReplicas": 1, "maxReplicas": 1}]}


def custom(ray_job: dict[str, Any], cluster: Any = None, **fields: Any) -> dict[str, Any]:
    return {
        "rayCluster": WORKERS if cluster is None else cluster,
        **fields,
        "kubejobs": {"version": 1, "rayJob": ray_job},
    }


def build(kit: SimpleNamespace, ray_job: dict[str, Any], cluster: Any = None, **fields: Any) -> dict[str, Any]:
    obj: dict[str, Any] = kit.build(kit.template("ray", custom(ray_job, cluster, **fields), 0))
    return obj


def refused(kit: SimpleNamespace, ray_job: dict[str, Any], cluster: Any = None, **fields: Any) -> str:
    with pytest.raises(BuildError) as e:
        build(kit, ray_job, cluster, **fields)
    return str(e.value)


COPIED: list[dict[str, Any]] = [
    {"submissionMode": "HTTPMode"},
    {"backoffLimit": 2},
    {"activeDeadlineSeconds": 600, "preRunningDeadlineSeconds": 120},
    {"entrypointNumCpus": 0.5, "entrypointNumGpus": 1, "entrypointResources": '{"custom": 2}'},
    {"submitterConfig": {"backoffLimit": 0}},
    {"suspend": True},
    {"deletionStrategy": {"onSuccess": {"policy": "DeleteCluster"}, "onFailure": {"policy": "DeleteWorkers"}}},
]


@pytest.mark.parametrize("section", COPIED, ids=[next(iter(s)) for s in COPIED])
def test_section_values_are_copied_into_the_rayjob_spec(kit: SimpleNamespace, section: dict[str, Any]) -> None:
    spec = build(kit, section)["spec"]
    for key, value in section.items():
        assert spec[key] == value, key
    assert "rayClusterSpec" in spec and "clusterSelector" not in spec


def test_every_section_key_is_covered_here() -> None:
    covered = {key for s in COPIED for key in s} | {"submitterPodTemplate", "clusterSelector", "rayClusterSpec"}
    assert covered == RAY_JOB_KEYS


def test_deletion_rules_replace_the_platform_shutdown(kit: SimpleNamespace) -> None:
    rules = [
        {"policy": "DeleteWorkers", "condition": {"jobStatus": "SUCCEEDED", "ttlSeconds": 0}},
        {"policy": "DeleteCluster", "condition": {"jobStatus": "SUCCEEDED", "ttlSeconds": 30}},
        {"policy": "DeleteCluster", "condition": {"jobDeploymentStatus": "Failed", "ttlSeconds": 60}},
    ]
    spec = build(kit, {"deletionStrategy": {"deletionRules": rules}})["spec"]
    # The platform default (shutdown after 3600 s) would contradict the rules: KubeRay refuses both at once.
    assert spec["deletionStrategy"] == {"deletionRules": rules}
    assert spec["shutdownAfterJobFinishes"] is False and "ttlSecondsAfterFinished" not in spec
    message = refused(kit, {"deletionStrategy": {"deletionRules": rules}}, shutdownAfterJobFinishes=True)
    assert "deletionRules cannot be used with shutdownAfterJobFinishes" in message


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [
        ({"deletionRules": [{"policy": "DeleteSelf", "condition": {"jobStatus": "FAILED"}}]}, "DeleteSelf is refused"),
        ({"onSuccess": {"policy": "DeleteCluster"}}, "requires both onSuccess and onFailure"),
        ({"deletionRules": [{"policy": "DeleteCluster", "condition": {}}]}, "exactly one of jobStatus"),
        ({"deletionRules": [{"policy": "DeleteCluster", "condition": {"jobStatus": "RUNNING"}}]}, "SUCCEEDED"),
        (
            {
                "deletionRules": [
                    {"policy": "DeleteWorkers", "condition": {"jobStatus": "FAILED", "ttlSeconds": 60}},
                    {"policy": "DeleteCluster", "condition": {"jobStatus": "FAILED", "ttlSeconds": 10}},
                ]
            },
            "the DeleteCluster TTL (10) must be >= the DeleteWorkers TTL (60)",
        ),
        (
            {
                "deletionRules": [
                    {"policy": "DeleteCluster", "condition": {"jobStatus": "FAILED"}},
                    {"policy": "DeleteCluster", "condition": {"jobStatus": "FAILED", "ttlSeconds": 5}},
                ]
            },
            "duplicate rule",
        ),
        ({"deletionRules": [{"policy": "DeleteNone", "condition": {"jobStatus": "FAILED"}, "x": 1}]}, "unknown keys"),
    ],
    ids=["delete-self", "half-legacy", "no-condition", "bad-status", "ttl-order", "duplicate", "unknown-key"],
)
def test_deletion_strategies_kuberay_refuses_are_refused(
    kit: SimpleNamespace, strategy: dict[str, Any], expected: str
) -> None:
    assert expected in refused(kit, {"deletionStrategy": strategy})


def test_delete_workers_is_refused_with_autoscaling(kit: SimpleNamespace) -> None:
    strategy = {"deletionRules": [{"policy": "DeleteWorkers", "condition": {"jobStatus": "FAILED"}}]}
    message = refused(kit, {"deletionStrategy": strategy}, {**WORKERS, "enableAutoscaling": True})
    assert "DeleteWorkers is not allowed with autoscaling" in message


def test_legacy_delete_none_contradicts_the_platform_shutdown_only_when_the_task_asks_for_it(
    kit: SimpleNamespace,
) -> None:
    legacy = {"onSuccess": {"policy": "DeleteNone"}, "onFailure": {"policy": "DeleteCluster"}}
    spec = build(kit, {"deletionStrategy": legacy})["spec"]
    assert spec["shutdownAfterJobFinishes"] is False  # the strategy decides, not the platform's default
    message = refused(kit, {"deletionStrategy": legacy}, shutdownAfterJobFinishes=True)
    assert "DeleteNone contradicts shutdownAfterJobFinishes" in message


def test_submitter_resources_are_the_submitter_pods_own(kit: SimpleNamespace) -> None:
    resources = {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"cpu": "500m", "memory": "256Mi"}}
    template = kit.template(
        "ray",
        custom({"submitterPodTemplate": {"spec": {"containers": [{"resources": resources}]}}}),
        0,
        requests={"cpu": "4", "memory": "8Gi"},
        limits={"cpu": "4", "memory": "8Gi"},
    )
    spec = kit.build(template)["spec"]
    submitter = spec["submitterPodTemplate"]["spec"]["containers"][0]
    assert submitter["resources"] == resources
    head = spec["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    assert head["resources"]["limits"] == {"cpu": "4", "memory": "8Gi"}  # the head keeps the task's
    assert submitter["image"] == head["image"]  # everything else is still the task's pod


@pytest.mark.parametrize(
    "template",
    [
        {"spec": {"containers": [{"resources": {}, "image": "evil"}]}},
        {"spec": {"containers": [{"resources": {}}], "hostNetwork": True}},
        {"metadata": {}, "spec": {"containers": [{"resources": {}}]}},
        {"spec": {"containers": [{"resources": {"limits": {"cpu": "lots"}}}]}},
    ],
    ids=["image", "host-network", "metadata", "bad-quantity"],
)
def test_submitter_pod_template_carries_only_resources(kit: SimpleNamespace, template: dict[str, Any]) -> None:
    message = refused(kit, {"submitterPodTemplate": template})
    assert "submitterPodTemplate" in message


@pytest.mark.parametrize("mode", ["HTTPMode", "InteractiveMode", "SidecarMode"])
def test_modes_without_a_submitter_job_get_no_submitter_template(kit: SimpleNamespace, mode: str) -> None:
    spec = build(kit, {"submissionMode": mode})["spec"]
    assert spec["submissionMode"] == mode and "submitterPodTemplate" not in spec
    for key, value in (
        ("submitterConfig", {"backoffLimit": 1}),
        ("submitterPodTemplate", {"spec": {"containers": [{"resources": {}}]}}),
    ):
        assert "runs no submitter Job" in refused(kit, {"submissionMode": mode, key: value})


def test_cluster_selector_runs_on_the_named_cluster_and_builds_none(kit: SimpleNamespace) -> None:
    spec = build(kit, {"clusterSelector": {"ray.io/cluster": "shared"}}, cluster={})["spec"]
    assert spec["clusterSelector"] == {"ray.io/cluster": "shared"}
    assert "rayClusterSpec" not in spec
    # The platform's shutdown default is not applied: KubeRay never deletes a cluster it did not create.
    assert spec["shutdownAfterJobFinishes"] is False and "ttlSecondsAfterFinished" not in spec
    assert spec["entrypoint"].startswith("pyflyte-execute")


@pytest.mark.parametrize(
    ("cluster", "fields", "named"),
    [
        (WORKERS, {}, "workerGroupSpec"),
        ({"headGroupSpec": {}}, {}, "headGroupSpec"),
        ({"enableAutoscaling": True}, {}, "enableAutoscaling"),
        ({}, {"shutdownAfterJobFinishes": True}, "shutdownAfterJobFinishes"),
    ],
    ids=["workers", "head", "autoscaling", "shutdown"],
)
def test_cluster_selector_with_a_cluster_described_is_refused(
    kit: SimpleNamespace, cluster: Any, fields: dict[str, Any], named: str
) -> None:
    message = refused(kit, {"clusterSelector": {"ray.io/cluster": "shared"}}, cluster, **fields)
    assert named in message and "would be dropped" in message


def _groups(kit: SimpleNamespace, groups: dict[str, Any], cluster: Any, ray_job: Any = None) -> dict[str, Any]:
    ext: dict[str, Any] = {"version": 1, "rayGroups": groups, **({"rayJob": ray_job} if ray_job else {})}
    obj: dict[str, Any] = kit.build(kit.template("ray", {"rayCluster": cluster, "kubejobs": ext}, 0))
    return obj


V2 = {"rayClusterSpec": {"autoscalerOptions": {"version": "v2"}}}


def test_a_worker_group_idle_timeout_is_its_own(kit: SimpleNamespace) -> None:
    cluster = {**WORKERS, "enableAutoscaling": True}
    spec = _groups(kit, {"workers": {"w": {"idleTimeoutSeconds": 45}}}, cluster, V2)["spec"]["rayClusterSpec"]
    assert spec["workerGroupSpecs"][0]["idleTimeoutSeconds"] == 45


@pytest.mark.parametrize(
    ("groups", "autoscaling", "ray_job", "expected"),
    [
        ({"workers": {"w": {"idleTimeoutSeconds": 45}}}, True, None, "needs autoscaler v2"),
        ({"workers": {"w": {"idleTimeoutSeconds": 45}}}, False, V2, "idleTimeoutSeconds needs enableAutoscaling"),
        ({"workers": {"w": {"idleTimeoutSeconds": -1}}}, True, V2, "idleTimeoutSeconds must be an int >= 0"),
        ({"workers": {"w": {"idleTimeoutSeconds": "45"}}}, True, V2, "idleTimeoutSeconds must be an int >= 0"),
        ({"head": {"idleTimeoutSeconds": 45}}, True, V2, "rayGroups.head has unknown keys ['idleTimeoutSeconds']"),
        ({"workers": {"w": {"explicitResources": {"requests": {"cpu": "1"}}}}}, True, V2, "needs a computeTemplate"),
        ({"workers": {"w": {}}}, True, V2, "rayGroups.workers.w is empty"),
    ],
    ids=["no-v2", "no-autoscaling", "negative", "string", "head", "explicit-alone", "empty"],
)
def test_a_worker_group_idle_timeout_kuberay_would_refuse_or_drop_is_refused(
    kit: SimpleNamespace, groups: dict[str, Any], autoscaling: bool, ray_job: Any, expected: str
) -> None:
    with pytest.raises(BuildError) as e:
        _groups(kit, groups, {**WORKERS, "enableAutoscaling": autoscaling}, ray_job)
    assert expected in str(e.value)


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        ({"clusterSelector": {"ray.io/cluster": "shared"}, "suspend": True}, "suspend"),
        ({"clusterSelector": {"ray.io/cluster": "shared"}, "backoffLimit": 1}, "backoffLimit"),
        ({"clusterSelector": {"ray.io/cluster": "shared"}, "submissionMode": "SidecarMode"}, "SidecarMode"),
        ({"clusterSelector": {"app": "x"}}, "ray.io/cluster"),
        ({"clusterSelector": {"ray.io/cluster": "Bad_Name"}}, "DNS-1123"),
        (
            {
                "clusterSelector": {"ray.io/cluster": "c"},
                "deletionStrategy": {
                    "deletionRules": [{"policy": "DeleteCluster", "condition": {"jobStatus": "FAILED"}}]
                },
            },
            "not allowed with clusterSelector",
        ),
    ],
    ids=["suspend", "backoff", "sidecar", "no-name", "bad-name", "delete-cluster"],
)
def test_cluster_selector_combinations_kuberay_refuses(
    kit: SimpleNamespace, section: dict[str, Any], expected: str
) -> None:
    assert expected in refused(kit, section, cluster={})


def test_interactive_mode_refuses_retries(kit: SimpleNamespace) -> None:
    assert "InteractiveMode" in refused(kit, {"submissionMode": "InteractiveMode", "backoffLimit": 1})
    assert build(kit, {"submissionMode": "InteractiveMode", "backoffLimit": 0})["spec"]["backoffLimit"] == 0


def test_suspend_needs_shutdown(kit: SimpleNamespace) -> None:
    rules = {"deletionRules": [{"policy": "DeleteCluster", "condition": {"jobStatus": "FAILED"}}]}
    assert "requires shutdownAfterJobFinishes" in refused(kit, {"suspend": True, "deletionStrategy": rules})


def test_autoscaler_version_and_pull_policy_join_the_idl_options(kit: SimpleNamespace) -> None:
    cluster = {**WORKERS, "enableAutoscaling": True, "autoscalerOptions": {"idleTimeoutSeconds": 30}}
    extra = {"autoscalerOptions": {"version": "v2", "imagePullPolicy": "IfNotPresent"}}
    spec = build(kit, {"rayClusterSpec": extra}, cluster)["spec"]
    options = spec["rayClusterSpec"]["autoscalerOptions"]
    assert options["version"] == "v2" and options["imagePullPolicy"] == "IfNotPresent"
    assert options["idleTimeoutSeconds"] == 30
    assert "need enableAutoscaling" in refused(kit, {"rayClusterSpec": extra})
    assert "unknown keys" in refused(kit, {"rayClusterSpec": {"autoscalerOptions": {"env": []}}}, cluster)
    assert "may hold only autoscalerOptions" in refused(kit, {"rayClusterSpec": {"headGroupSpec": {}}}, cluster)
    assert "v1" in refused(kit, {"rayClusterSpec": {"autoscalerOptions": {"version": "v3"}}}, cluster)


def test_autoscaler_v2_needs_pods_that_are_never_restarted(kit: SimpleNamespace) -> None:
    head = {"k8sPod": {"podSpec": {"restartPolicy": "Always", "containers": []}}}
    cluster = {**WORKERS, "enableAutoscaling": True, "headGroupSpec": head}
    with pytest.raises(BuildError, match="Never"):
        build(kit, {"rayClusterSpec": {"autoscalerOptions": {"version": "v2"}}}, cluster)


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        ({"submissionMode": "FastMode"}, "K8sJobMode"),
        ({"backoffLimit": -1}, "backoffLimit must be an int >= 0"),
        ({"backoffLimit": True}, "backoffLimit must be an int"),
        ({"activeDeadlineSeconds": 0}, "activeDeadlineSeconds must be an int >= 1"),
        ({"preRunningDeadlineSeconds": "10"}, "preRunningDeadlineSeconds must be an int"),
        ({"entrypointNumCpus": -1}, "entrypointNumCpus must be a number >= 0"),
        ({"entrypointNumGpus": "1"}, "entrypointNumGpus must be a number"),
        ({"entrypointResources": "custom=1"}, "JSON object string"),
        ({"entrypointResources": '{"custom": -1}'}, "number >= 0"),
        ({"submitterConfig": {"backoffLimit": 1, "x": 2}}, "unknown keys"),
        ({"suspend": "yes"}, "true or false"),
        ({"jobId": "raysubmit_1"}, "unknown key 'jobId'"),
        ({"rayClusterSpec": {"autoscalerOptions": {"imagePullPolicy": "Sometimes"}}}, "IfNotPresent"),
    ],
)
def test_malformed_values_are_refused_naming_the_key(
    kit: SimpleNamespace, section: dict[str, Any], expected: str
) -> None:
    template = kit.template("ray", custom(section), 0)
    with pytest.raises(BuildError) as e:
        build_object(template, kit.metadata(), BackendConfig())
    assert expected in str(e.value) and "kubejobs.rayJob" in str(e.value)


def test_kuberay_rules_run_even_without_schema_validation(kit: SimpleNamespace) -> None:
    template = kit.template("ray", custom({"submissionMode": "InteractiveMode", "backoffLimit": 3}), 0)
    with pytest.raises(BuildError, match="InteractiveMode"):
        build_object(template, kit.metadata(), BackendConfig(), validate=False)


def test_a_rayjob_on_an_existing_cluster_maps_to_phases(kit: SimpleNamespace) -> None:
    from flytekitplugins.kubejobs.backend import Phase, task_phase

    obj = build(kit, {"clusterSelector": {"ray.io/cluster": "shared"}}, cluster={})
    # No rayClusterSpec to read the head's service type from: the status mapping works without it.
    status = {"jobDeploymentStatus": "Running", "jobStatus": "RUNNING", "rayClusterName": "shared", "jobId": "j1"}
    info = task_phase({**obj, "status": status})
    assert info.phase is Phase.RUNNING and info.custom_info["rayClusterName"] == "shared"
    waiting = task_phase({**obj, "status": {"jobDeploymentStatus": "Waiting", "rayClusterName": "shared"}})
    assert waiting.phase is Phase.QUEUED and waiting.reason == "Waiting"
