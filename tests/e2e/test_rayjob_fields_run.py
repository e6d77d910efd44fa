"""The RayJob settings of ``kubejobs.rayJob`` (RayJobConfig's keyword-only fields) on the real KubeRay v1.6.0
operator: each is checked in what the operator does with it.

The simulated pods serve no dashboard, so KubeRay never sees a Ray job succeed or fail by itself; what it
decides without the dashboard is asserted: its submitter Job (K8sJobMode) and that Job's pods' end, its
retries (backoffLimit), deadlines, deletions after the end, suspension, and which RayCluster a job runs on.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

import pytest
from flytekit import Resources
from flytekitplugins.kubejobs.backend.status import Phase, task_phase
from flytekitplugins.raycluster import DeletionRule, DeletionStrategy, RayJobConfig, WorkerNodeConfig

from .test_jobs_run import built, ray_config, watch_until_terminal

pytestmark = pytest.mark.slow


def _trail(statuses: list[dict[str, Any]]) -> list[tuple[Any, Any]]:
    return [(s.get("jobDeploymentStatus"), s.get("reason")) for s in statuses]


def _watch_for(k8s: Any, list_call: Any, *args: Any, name: str, deleted: bool = False, timeout: int = 120) -> Any:
    """The object ``name`` once it exists (or, with ``deleted``, None once it is gone), from a watch that
    starts where a list left off (so nothing happening in between is missed)."""
    from kubernetes import watch

    listed = list_call(*args)
    if isinstance(listed, dict):
        items, version = listed["items"], listed["metadata"]["resourceVersion"]
        names = {i["metadata"]["name"]: i for i in items}
    else:
        items, version = listed.items, listed.metadata.resource_version
        names = {i.metadata.name: i for i in items}
    if deleted and name not in names:
        return None
    if not deleted and name in names:
        return names[name]
    stream: Any = watch.Watch()  # type: ignore[no-untyped-call]
    for event in stream.stream(
        list_call, *args, field_selector=f"metadata.name={name}", resource_version=version, timeout_seconds=timeout
    ):
        if deleted and event["type"] == "DELETED":
            stream.stop()
            return None
        if not deleted and event["type"] in ("ADDED", "MODIFIED"):
            stream.stop()
            return event["object"]
    raise AssertionError(f"{name} was not {'deleted' if deleted else 'created'} within {timeout}s")


def _rayclusters(k8s: Any, namespace: str) -> list[dict[str, Any]]:
    from kubernetes import client

    listed: Any = client.CustomObjectsApi(k8s).list_namespaced_custom_object("ray.io", "v1", namespace, "rayclusters")
    return list(listed["items"])


def test_submitter_job_carries_entrypoint_resources_and_its_own_resources(k8s: Any, namespace: str) -> None:
    from kubernetes import client

    cfg = ray_config(
        entrypoint_num_cpus=1,
        entrypoint_num_gpus=0.5,
        entrypoint_resources={"custom": 2},
        submitter_requests=Resources(cpu="100m", mem="128Mi"),
        submitter_limits=Resources(cpu="200m", mem="128Mi"),
        submitter_backoff_limit=0,
    )
    obj = built(cfg, namespace, "ray-entry", "")
    client.CustomObjectsApi(k8s).create_namespaced_custom_object("ray.io", "v1", namespace, "rayjobs", obj)
    name = obj["metadata"]["name"]
    job = _watch_for(k8s, client.BatchV1Api(k8s).list_namespaced_job, namespace, name=name, timeout=180)
    container = job.spec.template.spec.containers[0]
    command = " ".join([*(container.command or []), *(container.args or [])])
    print(json.dumps({"submitter": command}))
    # KubeRay passes the entrypoint settings to `ray job submit` (numbers as %f, the JSON Go-quoted), which
    # hands them to Ray's job manager.
    assert "--entrypoint-num-cpus 1.000000" in command and "--entrypoint-num-gpus 0.500000" in command, command
    assert '--entrypoint-resources "{\\"custom\\": 2}"' in command, command
    assert container.resources.requests == {"cpu": "100m", "memory": "128Mi"}, container.resources
    assert container.resources.limits == {"cpu": "200m", "memory": "128Mi"}, container.resources
    assert job.spec.backoff_limit == 0  # submitterConfig.backoffLimit
    head = obj["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    assert head.get("resources") != {"requests": {"cpu": "100m", "memory": "128Mi"}}


def test_http_mode_submits_without_a_submitter_job(k8s: Any, namespace: str) -> None:
    from kubernetes import client

    obj = built(ray_config(submission_mode="HTTPMode", active_deadline_seconds=15), namespace, "ray-http", "")
    statuses, phases = watch_until_terminal(k8s, obj, timeout=180)
    trail = _trail(statuses)
    print(json.dumps({"job": "RayJob", "mode": "HTTPMode", "statuses": trail}))
    # The operator submits to the head's dashboard itself (which a simulated pod does not serve) until the
    # deadline ends the job; at no point is there a submitter Job.
    jobs = client.BatchV1Api(k8s).list_namespaced_job(namespace).items
    assert not jobs, [j.metadata and j.metadata.name for j in jobs]
    assert any(s.get("rayClusterName") for s in statuses), trail
    assert statuses[-1]["jobDeploymentStatus"] == "Failed" and statuses[-1]["reason"] == "DeadlineExceeded", trail
    assert phases[-1] == Phase.PERMANENT_FAILURE, (trail, phases)


def test_backoff_limit_retries_a_failed_submission_on_a_new_cluster(k8s: Any, namespace: str) -> None:
    # One try per submitter Job (KubeRay's default of 2 pod retries adds the Job controller's 10 s + 20 s back-off
    # to each try): the retry under test is the RayJob's own, on a new cluster.
    obj = built(ray_config(backoff_limit=1, submitter_backoff_limit=0), namespace, "ray-retry", "fail")
    statuses, phases = watch_until_terminal(k8s, obj, timeout=300)
    trail = _trail(statuses)
    print(json.dumps({"job": "RayJob", "backoffLimit": 1, "statuses": trail}))
    assert any(deployment == "Retrying" for deployment, _ in trail), trail
    retrying = [task_phase({**obj, "status": s}) for s in statuses if s.get("jobDeploymentStatus") == "Retrying"]
    assert retrying and all(i.phase == Phase.RUNNING and i.reason == "Retrying" for i in retrying), retrying
    assert statuses[-1]["jobDeploymentStatus"] == "Failed", trail
    assert statuses[-1].get("failed") == 2, statuses[-1]  # the first try and the retry
    assert phases[-1] == Phase.PERMANENT_FAILURE, (trail, phases)


def test_deletion_rule_deletes_the_cluster_and_keeps_the_rayjob(k8s: Any, namespace: str) -> None:
    from kubernetes import client

    strategy = DeletionStrategy(rules=[DeletionRule("DeleteCluster", job_deployment_status="Failed", ttl_seconds=0)])
    obj = built(
        ray_config(shutdown_after_job_finishes=False, deletion_strategy=strategy, submitter_backoff_limit=0),
        namespace,
        "ray-delete",
        "fail",
    )
    assert obj["spec"]["shutdownAfterJobFinishes"] is False
    statuses, phases = watch_until_terminal(k8s, obj, timeout=180)
    trail = _trail(statuses)
    print(json.dumps({"job": "RayJob", "deletionRules": "DeleteCluster on Failed", "statuses": trail}))
    assert phases[-1] == Phase.PERMANENT_FAILURE, trail
    cluster = next(s["rayClusterName"] for s in statuses if s.get("rayClusterName"))
    api = client.CustomObjectsApi(k8s)
    gone = _watch_for(
        k8s, api.list_namespaced_custom_object, "ray.io", "v1", namespace, "rayclusters", name=cluster, deleted=True
    )
    assert gone is None
    # The RayJob stays: the connector reads the task's end from it (DeleteSelf is refused for that reason).
    kept: Any = api.get_namespaced_custom_object("ray.io", "v1", namespace, "rayjobs", obj["metadata"]["name"])
    assert task_phase(kept).phase == Phase.PERMANENT_FAILURE


def test_cluster_selector_runs_on_the_existing_cluster_and_creates_none(k8s: Any, namespace: str) -> None:
    from kubernetes import client

    api = client.CustomObjectsApi(k8s)
    # The shared cluster: the RayClusterSpec our backend would build, created by the test as a platform would.
    spec = built(ray_config(), namespace, "ray-shared", "")["spec"]["rayClusterSpec"]
    shared = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "shared-e2e"}, "spec": spec}
    api.create_namespaced_custom_object("ray.io", "v1", namespace, "rayclusters", shared)
    config = RayJobConfig([], cluster_selector="shared-e2e", submitter_backoff_limit=0)  # one submission try
    obj = built(config, namespace, "ray-on-shared", "fail")
    assert "rayClusterSpec" not in obj["spec"]
    statuses, phases = watch_until_terminal(k8s, obj, timeout=240)
    trail = _trail(statuses)
    print(json.dumps({"job": "RayJob", "clusterSelector": "shared-e2e", "statuses": trail}))
    assert {s.get("rayClusterName") for s in statuses if s.get("rayClusterName")} == {"shared-e2e"}, statuses
    assert [c["metadata"]["name"] for c in _rayclusters(k8s, namespace)] == ["shared-e2e"]
    assert statuses[-1]["jobDeploymentStatus"] == "Failed" and statuses[-1]["reason"] == "SubmissionFailed", trail
    assert phases[-1] == Phase.PERMANENT_FAILURE, (trail, phases)
    # The selected cluster outlives the job: KubeRay never deletes a cluster it did not create for it.
    assert [c["metadata"]["name"] for c in _rayclusters(k8s, namespace)] == ["shared-e2e"]


def test_suspended_rayjob_is_queued_and_starts_no_cluster(k8s: Any, namespace: str) -> None:
    obj = built(ray_config(suspend=True), namespace, "ray-suspend", "")
    statuses, phases = watch_until_terminal(
        k8s, obj, timeout=120, until=lambda s: s.get("jobDeploymentStatus") == "Suspended"
    )
    trail = _trail(statuses)
    print(json.dumps({"job": "RayJob", "suspend": True, "statuses": trail}))
    assert statuses[-1]["jobDeploymentStatus"] == "Suspended", trail
    assert set(phases) == {Phase.QUEUED}, (trail, phases)
    assert _rayclusters(k8s, namespace) == []


def test_autoscaler_v2_reaches_the_cluster_kuberay_creates(k8s: Any, namespace: str) -> None:
    from flytekitplugins.raycluster import AutoscalerOptionsConfig
    from kubernetes import client

    options = AutoscalerOptionsConfig(idle_timeout_seconds=30, version="v2", image_pull_policy="IfNotPresent")
    groups = [WorkerNodeConfig("workers", replicas=1, idle_timeout_seconds=120), WorkerNodeConfig("spare", replicas=0)]
    cfg = ray_config(enable_autoscaling=True, autoscaler_options=options, worker_node_config=groups)
    obj = built(cfg, namespace, "ray-v2", "")
    statuses, _ = watch_until_terminal(k8s, obj, timeout=180, until=lambda s: bool(s.get("rayClusterName")))
    cluster = next(s["rayClusterName"] for s in statuses if s.get("rayClusterName"))
    # KubeRay names the cluster in the RayJob's status before it creates it: wait for the object itself.
    api = client.CustomObjectsApi(k8s)
    raycluster = _watch_for(
        k8s, api.list_namespaced_custom_object, "ray.io", "v1", namespace, "rayclusters", name=cluster
    )
    got = raycluster["spec"]["autoscalerOptions"]
    print(json.dumps({"job": "RayJob", "autoscalerOptions": got}))
    assert (got["version"], got["imagePullPolicy"], got["idleTimeoutSeconds"]) == ("v2", "IfNotPresent", 30), got
    assert raycluster["spec"]["enableInTreeAutoscaling"] is True
    # The group's own idle timeout is on its group of the cluster KubeRay made (the v2 autoscaler reads it
    # there); the other group keeps the cluster-wide one.
    idle = {g["groupName"]: g.get("idleTimeoutSeconds") for g in raycluster["spec"]["workerGroupSpecs"]}
    assert idle == {"workers": 120, "spare": None}, idle


def _running_head_pod(k8s: Any, namespace: str, cluster: str, timeout: int = 120) -> Any:
    """The head pod of RayCluster ``cluster`` once kwok has it Running (a watch from where a list left off)."""
    from kubernetes import client, watch

    core = client.CoreV1Api(k8s)
    selector = f"ray.io/cluster={cluster},ray.io/node-type=head"
    listed: Any = core.list_namespaced_pod(namespace, label_selector=selector)
    for pod in listed.items:
        if pod.status.phase == "Running":
            return pod
    stream: Any = watch.Watch()  # type: ignore[no-untyped-call]
    for event in stream.stream(
        core.list_namespaced_pod,
        namespace,
        label_selector=selector,
        resource_version=listed.metadata.resource_version,
        timeout_seconds=timeout,
    ):
        if event["type"] in ("ADDED", "MODIFIED") and event["object"].status.phase == "Running":
            stream.stop()
            return event["object"]
    raise AssertionError(f"no Running head pod of {cluster} within {timeout}s")


def test_sidecar_mode_submits_from_the_head_and_fails_with_its_submitter(k8s: Any, namespace: str) -> None:
    from kubernetes import client

    obj = built(ray_config(submission_mode="SidecarMode"), namespace, "ray-sidecar", "")
    statuses, _ = watch_until_terminal(k8s, obj, timeout=180, until=lambda s: s.get("jobDeploymentStatus") == "Running")
    cluster = next(s["rayClusterName"] for s in statuses if s.get("rayClusterName"))
    head = _running_head_pod(k8s, namespace, cluster)
    # KubeRay adds the submitter to the head pod (no submitter Job) and never restarts that pod.
    names = [c.name for c in head.spec.containers]
    assert names[0] == "ray-head" and "ray-job-submitter" in names, names
    submitter = next(c for c in head.spec.containers if c.name == "ray-job-submitter")
    command = " ".join([*(submitter.command or []), *(submitter.args or [])])
    assert "ray job submit" in command and obj["spec"]["entrypoint"] in command, command
    assert head.spec.restart_policy == "Never"
    assert not client.BatchV1Api(k8s).list_namespaced_job(namespace).items
    # The simulated head runs nothing: the test plays the submitter's end, `ray job submit` exiting 1 now (a
    # finish time long past would trip KubeRay's submitter-finished timeout instead).
    core = client.CoreV1Api(k8s)
    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    ended = {"terminated": {"exitCode": 1, "reason": "Error", "startedAt": now, "finishedAt": now}}
    container_statuses = [
        {
            "name": c.name,
            "image": c.image,
            "imageID": "",
            "ready": c.name != "ray-job-submitter",
            "restartCount": 0,
            "state": ended if c.name == "ray-job-submitter" else {"running": {}},
        }
        for c in head.spec.containers
    ]
    core.patch_namespaced_pod_status(
        head.metadata.name, namespace, {"status": {"containerStatuses": container_statuses}}
    )
    rest, phases = watch_until_terminal(k8s, obj, timeout=120, create=False)
    trail = _trail(statuses + rest)
    print(json.dumps({"job": "RayJob", "mode": "SidecarMode", "statuses": trail}))
    assert rest[-1]["jobDeploymentStatus"] == "Failed" and rest[-1]["reason"] == "SubmissionFailed", trail
    assert "ray-job-submitter terminated with exit code 1" in rest[-1]["message"], rest[-1]
    assert phases[-1] == Phase.PERMANENT_FAILURE, (trail, phases)


def test_interactive_mode_is_queued_until_a_job_id_is_given(k8s: Any, namespace: str) -> None:
    from kubernetes import client

    obj = built(ray_config(submission_mode="InteractiveMode"), namespace, "ray-interactive", "")
    statuses, phases = watch_until_terminal(
        k8s, obj, timeout=180, until=lambda s: s.get("jobDeploymentStatus") == "Waiting"
    )
    waiting = task_phase({**obj, "status": statuses[-1]})
    assert statuses[-1]["jobDeploymentStatus"] == "Waiting", _trail(statuses)
    assert waiting.phase == Phase.QUEUED and "spec.jobId" in waiting.message, waiting
    # KubeRay submits nothing itself: no submitter Job, no submitter container.
    assert not client.BatchV1Api(k8s).list_namespaced_job(namespace).items
    api = client.CustomObjectsApi(k8s)
    name = obj["metadata"]["name"]
    api.patch_namespaced_custom_object("ray.io", "v1", namespace, "rayjobs", name, {"spec": {"jobId": "raysubmit_e2e"}})
    rest, later = watch_until_terminal(
        k8s, obj, timeout=120, create=False, until=lambda s: s.get("jobDeploymentStatus") == "Running"
    )
    trail = _trail(statuses + rest)
    print(json.dumps({"job": "RayJob", "mode": "InteractiveMode", "statuses": trail}))
    assert rest[-1]["jobDeploymentStatus"] == "Running" and rest[-1]["jobId"] == "raysubmit_e2e", trail
    assert later[-1] == Phase.RUNNING, (trail, phases, later)
