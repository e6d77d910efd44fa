"""A RayJob's head service endpoint (service, pod, client/dashboard/GCS ports, dashboard URL) in ``custom_info``
and links, from the status KubeRay 1.6 writes: the RayCluster's status copied into ``status.rayClusterStatus``
(``head``, ``endpoints``) plus ``status.dashboardURL``. Every status is checked against the RayJob CRD schema."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest
from flytekitplugins.kubejobs.backend.plugins_config import BackendConfig
from flytekitplugins.kubejobs.backend.status import Phase, task_phase

CLUSTER = "rj-raycluster-abcde"
SERVICE = f"{CLUSTER}-head-svc"
DASHBOARD_URL = f"{SERVICE}.ns.svc.cluster.local:8265"

#: What KubeRay copies from a ready RayCluster: the head service's named ports and the head pod/service.
READY_CLUSTER: dict[str, Any] = {
    "state": "ready",
    "desiredWorkerReplicas": 1,
    "readyWorkerReplicas": 1,
    "endpoints": {"client": "10001", "dashboard": "8265", "gcs-server": "6379", "metrics": "8080", "serve": "8000"},
    "head": {
        "podIP": "10.0.0.7",
        "podName": f"{CLUSTER}-head-x7k2p",
        "serviceIP": "10.96.0.42",
        "serviceName": SERVICE,
    },
}
#: Before the head pod is scheduled: the service exists, the pod has no IP yet. The port names are the ones
#: the backend gives the head container (as Flyte's Go plugin), which KubeRay's service then carries.
CREATING_CLUSTER: dict[str, Any] = {
    "endpoints": {"head": "10001", "dashboard": "8265", "redis": "6379", "metrics": "8080"},
    "head": {"serviceIP": "10.96.0.42", "serviceName": SERVICE},
}
HEAD_FACTS = {"headServiceName": SERVICE, "clientPort": "10001", "dashboardPort": "8265", "gcsPort": "6379"}


@pytest.mark.parametrize(
    ("deployment", "job_status", "cluster", "cluster_status", "dashboard", "phase", "expected"),
    [
        pytest.param(None, None, None, None, None, Phase.QUEUED, {}, id="before-the-cluster-exists"),
        pytest.param(
            "Initializing",
            None,
            CLUSTER,
            CREATING_CLUSTER,
            None,
            Phase.INITIALIZING,
            {"rayClusterName": CLUSTER, **HEAD_FACTS, "headServiceIP": "10.96.0.42"},
            id="Initializing",
        ),
        pytest.param(
            "Running",
            "RUNNING",
            CLUSTER,
            READY_CLUSTER,
            DASHBOARD_URL,
            Phase.RUNNING,
            {
                "rayJobID": "rj-xyz12",
                "rayClusterName": CLUSTER,
                **HEAD_FACTS,
                "headServiceIP": "10.96.0.42",
                "headPodName": f"{CLUSTER}-head-x7k2p",
                "headPodIP": "10.0.0.7",
                "dashboardURL": DASHBOARD_URL,
            },
            id="Running-with-endpoints",
        ),
        # Ended: the cluster is deleted (or going), so no dashboard URL; the head's names stay for the record.
        pytest.param(
            "Complete",
            "SUCCEEDED",
            CLUSTER,
            READY_CLUSTER,
            DASHBOARD_URL,
            Phase.SUCCEEDED,
            {
                "rayJobID": "rj-xyz12",
                "rayClusterName": CLUSTER,
                **HEAD_FACTS,
                "headServiceIP": "10.96.0.42",
                "headPodName": f"{CLUSTER}-head-x7k2p",
                "headPodIP": "10.0.0.7",
            },
            id="Complete",
        ),
        pytest.param(
            "Failed",
            "FAILED",
            CLUSTER,
            READY_CLUSTER,
            DASHBOARD_URL,
            Phase.RETRYABLE_FAILURE,
            {
                "rayJobID": "rj-xyz12",
                "rayClusterName": CLUSTER,
                **HEAD_FACTS,
                "headServiceIP": "10.96.0.42",
                "headPodName": f"{CLUSTER}-head-x7k2p",
                "headPodIP": "10.0.0.7",
            },
            id="Failed",
        ),
    ],
)
def test_head_endpoint_in_custom_info(
    ray_job: Callable[..., dict[str, Any]],
    now: datetime,
    deployment: str | None,
    job_status: str | None,
    cluster: str | None,
    cluster_status: dict[str, Any] | None,
    dashboard: str | None,
    phase: Phase,
    expected: dict[str, str],
) -> None:
    job_id = "rj-xyz12" if job_status else None
    job = ray_job(
        deployment, job_status, cluster=cluster, cluster_status=cluster_status, dashboard=dashboard, job_id=job_id
    )
    info = task_phase(job, now=now)
    assert info.phase is phase
    assert dict(info.custom_info) == expected


DYNAMIC = {
    "logs": {
        "dynamic-log-links": {
            "vscode": {
                "displayName": "VS Code",
                "templateUris": ["https://ide/{{ .namespace }}/{{ .taskConfig.port }}"],
            }
        }
    }
}


@pytest.mark.parametrize(
    ("deployment", "cluster"),
    [(None, None), ("Initializing", None), ("Initializing", CLUSTER), ("Running", CLUSTER), ("Complete", CLUSTER)],
)
def test_dynamic_links_from_the_first_phase(
    ray_job: Callable[..., dict[str, Any]], now: datetime, deployment: str | None, cluster: str | None
) -> None:
    # As Flyte's Go plugin: the links of plugins.ray.logs, dynamic ones included, need no cluster name.
    config = BackendConfig.from_flyte_config({"ray": DYNAMIC})
    job = ray_job(deployment, None, cluster=cluster, dashboard=None, job_id=None)
    info = task_phase(job, config, now=now, task_config={"link_type": "vscode", "port": "8080"})
    assert [(link.name, link.uri) for link in info.logs] == [("VS Code", "https://ide/ns/8080")]


def test_templates_can_name_the_head_service(ray_job: Callable[..., dict[str, Any]], now: datetime) -> None:
    template = {"displayName": "Ray Head", "templateUris": ["https://proxy/{{ .rayHeadServiceName }}/{{ .namespace }}"]}
    config = BackendConfig.from_flyte_config({"ray": {"logs": {"templates": [template]}}})
    running = task_phase(ray_job(cluster_status=READY_CLUSTER, dashboard=None), config, now=now)
    assert [link.uri for link in running.logs] == [f"https://proxy/{SERVICE}/ns"]
    # Before KubeRay reports the service the placeholder stays as written, as every empty variable does.
    queued = task_phase(ray_job(None, None, cluster=None, dashboard=None), config, now=now)
    assert [link.uri for link in queued.logs] == ["https://proxy/{{ .rayHeadServiceName }}/ns"]


def test_node_port_service_reports_node_ports(ray_job: Callable[..., dict[str, Any]], now: datetime) -> None:
    # The backend's default head service is a NodePort (Flyte's serviceType); KubeRay then reports the node
    # ports in endpoints, which are named as such so nobody dials 31781 on the service IP.
    job = ray_job(
        cluster_status={**READY_CLUSTER, "endpoints": {"head": "31781", "dashboard": "31849", "redis": "32540"}}
    )
    job["spec"]["rayClusterSpec"]["headGroupSpec"]["serviceType"] = "NodePort"
    info = dict(task_phase(job, now=now).custom_info)
    ports = {key: value for key, value in info.items() if key.endswith("Port")}
    assert ports == {"clientNodePort": "31781", "dashboardNodePort": "31849", "gcsNodePort": "32540"}
    assert info["dashboardURL"] == DASHBOARD_URL  # KubeRay's URL carries the service port, not the node port


def test_malformed_head_status_names_the_field(ray_job: Callable[..., dict[str, Any]], now: datetime) -> None:
    job = ray_job(cluster_status=READY_CLUSTER)
    job["status"]["rayClusterStatus"] = {"head": {"serviceName": 7}}
    with pytest.raises(ValueError, match=r"RayJob\.status\.rayClusterStatus\.head\.serviceName must be a string"):
        task_phase(job, now=now)
