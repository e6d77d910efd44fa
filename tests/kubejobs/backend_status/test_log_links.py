"""Log links (flyte-backend-behaviour.md §2.3, §3.8, §5). Expected URIs are written out from the reference's
templates; times are NOW-30s (creation, 1796039970) and NOW (finish, 1796040000)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, Optional

import pytest
from flyteidl.admin.agent_pb2 import TaskExecutionMetadata
from flyteidl.core.execution_pb2 import TaskLog
from flyteidl.core.identifier_pb2 import (
    Identifier,
    NodeExecutionIdentifier,
    ResourceType,
    TaskExecutionIdentifier,
    WorkflowExecutionIdentifier,
)
from flytekitplugins.kubejobs.backend.logs import LogConfig
from flytekitplugins.kubejobs.backend.plugins_config import BackendConfig
from flytekitplugins.kubejobs.backend.status import MAX_LINKED_PODS_PER_ROLE, task_phase

K8S = "http://localhost:30082/#!/log/ns/{pod}/pod?namespace=ns"
RUNNING = [("Created", "True", -20, "JobCreated", ""), ("Running", "True", -10, "JobRunning", "")]


def links(info: Any) -> list[tuple[str, str]]:
    return [(link.name, link.uri) for link in info.logs]


def k8s(*pods: str, names: Optional[list[str]] = None) -> list[tuple[str, str]]:
    names = names or ["Kubernetes Logs"] * len(pods)
    return [(name, K8S.format(pod=pod)) for name, pod in zip(names, pods, strict=True)]


def metadata() -> TaskExecutionMetadata:
    return TaskExecutionMetadata(
        namespace="flytesnacks-development",
        task_execution_id=TaskExecutionIdentifier(
            task_id=Identifier(
                resource_type=ResourceType.TASK,
                project="flytesnacks",
                domain="development",
                name="wf.train",
                version="v7",
            ),
            node_execution_id=NodeExecutionIdentifier(
                node_id="n0",
                execution_id=WorkflowExecutionIdentifier(project="flytesnacks", domain="development", name="abc123"),
            ),
            retry_attempt=2,
        ),
    )


def with_logs(section: dict[str, Any]) -> BackendConfig:
    return BackendConfig.from_flyte_config({"logs": section})


# --- pods per kind (default config: the Kubernetes dashboard on localhost:30082) ------------------------


def test_pytorch_master_then_workers(kubeflow_job: Callable[..., dict[str, Any]], now: datetime) -> None:
    info = task_phase(kubeflow_job("PyTorchJob", replicas={"Master": 1, "Worker": 2}, conditions=RUNNING), now=now)
    assert links(info) == [
        ("Kubernetes Logsmaster", "http://localhost:30082/#!/log/ns/job-master-0/pod?namespace=ns"),
        ("Kubernetes Logs", "http://localhost:30082/#!/log/ns/job-worker-0/pod?namespace=ns"),
        ("Kubernetes Logs", "http://localhost:30082/#!/log/ns/job-worker-1/pod?namespace=ns"),
    ]


def test_pytorch_master_only_job(kubeflow_job: Callable[..., dict[str, Any]], now: datetime) -> None:
    info = task_phase(kubeflow_job("PyTorchJob", replicas={"Master": 1}, conditions=RUNNING), now=now)
    assert links(info) == k8s("job-master-0", names=["Kubernetes Logsmaster"])


def test_elastic_pytorch_has_worker_links_only(kubeflow_job: Callable[..., dict[str, Any]], now: datetime) -> None:
    info = task_phase(kubeflow_job("PyTorchJob", replicas={"Worker": 3}, conditions=RUNNING), now=now)
    assert links(info) == k8s("job-worker-0", "job-worker-1", "job-worker-2")


def test_mpi_links_workers_not_the_launcher(kubeflow_job: Callable[..., dict[str, Any]], now: datetime) -> None:
    info = task_phase(kubeflow_job("MPIJob", replicas={"Launcher": 1, "Worker": 2}, conditions=RUNNING), now=now)
    assert links(info) == k8s("job-worker-0", "job-worker-1")


def test_tf_links_use_the_operators_pod_names(kubeflow_job: Callable[..., dict[str, Any]], now: datetime) -> None:
    # Deviation: Go links job-psReplica-N, job-chiefReplica-0 and job-evaluatorReplica-0, which never exist.
    replicas = {"Chief": 1, "Worker": 2, "PS": 2, "Evaluator": 2}
    info = task_phase(kubeflow_job("TFJob", replicas=replicas, conditions=RUNNING), now=now)
    assert links(info) == k8s(
        "job-worker-0", "job-worker-1", "job-ps-0", "job-ps-1", "job-chief-0", "job-evaluator-0", "job-evaluator-1"
    )


def test_tf_ps_chief_evaluator_links_carry_container_and_times(
    kubeflow_job: Callable[..., dict[str, Any]], now: datetime
) -> None:
    # Deviation: Go gives those three roles no container name and no times.
    config = with_logs(
        {
            "kubernetes-enabled": False,
            "templates": [
                {"displayName": "L", "templateUris": ["{{ .podName }}/{{ .containerName }}/{{ .podUnixStartTime }}"]}
            ],
        }
    )
    info = task_phase(
        kubeflow_job("TFJob", replicas={"Worker": 1, "PS": 1, "Chief": 1}, conditions=RUNNING), config, now=now
    )
    assert [link.uri for link in info.logs] == [
        "job-worker-0/tensorflow/1796039970",
        "job-ps-0/tensorflow/1796039970",
        "job-chief-0/tensorflow/1796039970",
    ]


def test_missing_or_zero_roles_get_no_links(kubeflow_job: Callable[..., dict[str, Any]], now: datetime) -> None:
    info = task_phase(kubeflow_job("TFJob", replicas={"Worker": 1, "PS": 0}, conditions=RUNNING), now=now)
    assert links(info) == k8s("job-worker-0")
    job = kubeflow_job("TFJob", replicas={"Worker": 1}, conditions=RUNNING)
    del job["spec"]["tfReplicaSpecs"]["Worker"]["replicas"]  # Go reads a nil count as 0
    assert task_phase(job, now=now).logs == ()


def test_links_are_listed_for_at_most_max_pods_per_role(
    kubeflow_job: Callable[..., dict[str, Any]], now: datetime
) -> None:
    job = kubeflow_job("MPIJob", replicas={"Launcher": 1, "Worker": 2**31 - 1}, conditions=RUNNING)
    info = task_phase(job, now=now)
    assert len(info.logs) == MAX_LINKED_PODS_PER_ROLE
    assert info.logs[-1].uri == K8S.format(pod=f"job-worker-{MAX_LINKED_PODS_PER_ROLE - 1}")


def test_links_are_present_in_every_phase(kubeflow_job: Callable[..., dict[str, Any]], now: datetime) -> None:
    stalled = task_phase(kubeflow_job("PyTorchJob", conditions=None, start=None, created=-600), now=now)
    assert links(stalled) == k8s("job-worker-0")


# --- providers ----------------------------------------------------------------------------------------


def test_kubernetes_url_builds_the_dashboard_template(
    kubeflow_job: Callable[..., dict[str, Any]], now: datetime
) -> None:
    # Deviation: propeller keeps its localhost template when only kubernetes-url is set.
    info = task_phase(kubeflow_job("MPIJob"), with_logs({"kubernetes-url": "https://k8s.example.com"}), now=now)
    assert links(info) == [("Kubernetes Logs", "https://k8s.example.com/#!/log/ns/job-worker-0/pod?namespace=ns")]


def test_kubernetes_template_uri_wins_over_url(kubeflow_job: Callable[..., dict[str, Any]], now: datetime) -> None:
    config = with_logs({"kubernetes-url": "https://ignored", "kubernetes-template-uri": "https://k/{{ .podName }}"})
    assert links(task_phase(kubeflow_job("MPIJob"), config, now=now)) == [("Kubernetes Logs", "https://k/job-worker-0")]


def test_cloudwatch_default_template_leaves_empty_container_id_literal(
    kubeflow_job: Callable[..., dict[str, Any]], now: datetime
) -> None:
    config = with_logs(
        {
            "kubernetes-enabled": False,
            "cloudwatch-enabled": True,
            "cloudwatch-region": "us-east-1",
            "cloudwatch-log-group": "/flyte/pods",
        }
    )
    info = task_phase(kubeflow_job("PyTorchJob", replicas={"Worker": 1}), config, now=now)
    assert links(info) == [
        (
            "Cloudwatch Logs",
            "https://console.aws.amazon.com/cloudwatch/home?region=us-east-1#logEventViewer:group=/flyte/pods;"
            "stream=var.log.containers.job-worker-0_ns_pytorch-{{ .containerId }}.log",
        )
    ]


def test_stackdriver_default_template(kubeflow_job: Callable[..., dict[str, Any]], now: datetime) -> None:
    config = with_logs(
        {
            "kubernetes-enabled": False,
            "stackdriver-enabled": True,
            "gcp-project": "my-proj",
            "stackdriver-logresourcename": "k8s_container",
        }
    )
    info = task_phase(kubeflow_job("MPIJob"), config, now=now)
    assert links(info) == [
        (
            "Stackdriver Logs",
            "https://console.cloud.google.com/logs/viewer?project=my-proj&angularJsUrl=%2Flogs%2Fviewer%3Fproject"
            "%3Dmy-proj&resource=k8s_container&advancedFilter=resource.labels.pod_name%3Djob-worker-0",
        )
    ]


def test_provider_order_per_pod(kubeflow_job: Callable[..., dict[str, Any]], now: datetime) -> None:
    config = with_logs(
        {
            "kubernetes-template-uri": "k/{{ .podName }}",
            "cloudwatch-enabled": True,
            "cloudwatch-template-uri": "c/{{ .podName }}",
            "stackdriver-enabled": True,
            "stackdriver-template-uri": "s/{{ .podName }}",
            "templates": [{"displayName": "Grafana", "templateUris": ["g1/{{ .podName }}", "g2/{{ .podName }}"]}],
        }
    )
    info = task_phase(kubeflow_job("PyTorchJob", replicas={"Master": 1, "Worker": 1}), config, now=now)
    assert links(info) == [
        ("Kubernetes Logsmaster", "k/job-master-0"),
        ("Cloudwatch Logsmaster", "c/job-master-0"),
        ("Stackdriver Logsmaster", "s/job-master-0"),
        ("Grafanamaster", "g1/job-master-0"),
        ("Grafanamaster", "g2/job-master-0"),
        ("Kubernetes Logs", "k/job-worker-0"),
        ("Cloudwatch Logs", "c/job-worker-0"),
        ("Stackdriver Logs", "s/job-worker-0"),
        ("Grafana", "g1/job-worker-0"),
        ("Grafana", "g2/job-worker-0"),
    ]


ALL_VARS = (
    "https://logs/{{ .podName }}/{{ .namespace }}/{{ .containerName }}/{{ .logName }}"
    "?from={{ .podUnixStartTime }}&to={{ .podUnixFinishTime }}"
    "&s={{ .podRFC3339StartTime }}&e={{ .podRFC3339FinishTime }}"
    "&node={{ .nodeID }}&gen={{ .generatedName }}&try={{ .taskRetryAttempt }}"
    "&task={{ .taskID }}&v={{ .taskVersion }}&tp={{ .taskProject }}&td={{ .taskDomain }}"
    "&x={{ .executionName }}&xp={{ .executionProject }}&xd={{ .executionDomain }}"
    "&uid={{ .podUID }}&host={{ .hostname }}&cid={{ .containerID }}&nn={{ .nodeName }}"
)


def test_every_template_variable(kubeflow_job: Callable[..., dict[str, Any]], now: datetime) -> None:
    config = with_logs({"kubernetes-enabled": False, "templates": [{"displayName": "All", "templateUris": [ALL_VARS]}]})
    job = kubeflow_job("PyTorchJob", name="abc123-n0-2", replicas={"Master": 1})
    assert [link.uri for link in task_phase(job, config, metadata(), now).logs] == [
        "https://logs/abc123-n0-2-master-0/ns/pytorch/master?from=1796039970&to=1796040000"
        "&s=2026-11-30T11:59:30Z&e=2026-11-30T12:00:00Z&node=n0&gen=abc123-n0-2&try=2"
        "&task=wf.train&v=v7&tp=flytesnacks&td=development&x=abc123&xp=flytesnacks&xd=development"
        "&uid={{ .podUID }}&host={{ .hostname }}&cid={{ .containerID }}&nn={{ .nodeName }}"
    ]


def test_task_variables_stay_literal_without_metadata(
    kubeflow_job: Callable[..., dict[str, Any]], now: datetime
) -> None:
    config = with_logs({"kubernetes-template-uri": "x/{{ .taskID }}/{{ .executionName }}/{{ .podName }}"})
    assert [link.uri for link in task_phase(kubeflow_job("MPIJob"), config, now=now).logs] == [
        "x/{{ .taskID }}/{{ .executionName }}/job-worker-0"
    ]


def test_variables_are_case_insensitive_and_accept_dollar(
    kubeflow_job: Callable[..., dict[str, Any]], now: datetime
) -> None:
    config = with_logs({"kubernetes-template-uri": "{{.PODNAME}}|{{   $namespace }}|{{ .PodName}}|{{ podName }}"})
    assert [link.uri for link in task_phase(kubeflow_job("MPIJob"), config, now=now).logs] == [
        "job-worker-0|ns|job-worker-0|{{ podName }}"
    ]


def test_display_names_are_templated_and_message_format_kept(
    kubeflow_job: Callable[..., dict[str, Any]], now: datetime
) -> None:
    config = with_logs(
        {
            "kubernetes-enabled": False,
            "templates": [
                {
                    "displayName": "Pod {{ .podName }} ",
                    "templateUris": ["u"],
                    "messageFormat": "CSV",
                    "showWhilePending": True,
                    "hideOnceFinished": True,
                }
            ],
        }
    )
    info = task_phase(kubeflow_job("PyTorchJob", replicas={"Master": 1}), config, now=now)
    assert info.to_task_logs() == [
        TaskLog(
            name="Pod job-master-0 master",
            uri="u",
            message_format=TaskLog.MessageFormat.CSV,
            ShowWhilePending=True,
            HideOnceFinished=True,
        )
    ]


def test_to_task_logs_default_links_are_json(kubeflow_job: Callable[..., dict[str, Any]], now: datetime) -> None:
    info = task_phase(kubeflow_job("MPIJob"), now=now)
    assert info.to_task_logs() == [
        TaskLog(
            name="Kubernetes Logs",
            uri="http://localhost:30082/#!/log/ns/job-worker-0/pod?namespace=ns",
            message_format=TaskLog.MessageFormat.JSON,
        )
    ]


def test_dynamic_links_fire_when_link_type_names_them(
    kubeflow_job: Callable[..., dict[str, Any]], now: datetime
) -> None:
    config = with_logs(
        {
            "kubernetes-template-uri": "k/{{ .podName }}",
            "dynamic-log-links": {
                "vscode": {
                    "displayName": "VS Code",
                    "templateUris": ["https://ide/{{ .podName }}:{{ .taskConfig.port }}"],
                },
                "wandb": {"displayName": "W&B", "templateUris": ["https://wandb/{{ .taskConfig.run_id }}"]},
            },
        }
    )
    job = kubeflow_job("PyTorchJob", replicas={"Worker": 2})
    info = task_phase(job, config, now=now, task_config={"link_type": "vscode", "port": "8080"})
    assert links(info) == [
        ("Kubernetes Logs", "k/job-worker-0"),
        ("VS Code", "https://ide/job-worker-0:8080"),
        ("Kubernetes Logs", "k/job-worker-1"),
        ("VS Code", "https://ide/job-worker-1:8080"),
    ]
    assert links(task_phase(job, config, now=now)) == [
        ("Kubernetes Logs", "k/job-worker-0"),
        ("Kubernetes Logs", "k/job-worker-1"),
    ]
    missing_key = task_phase(job, config, now=now, task_config={"link_type": "wandb,vscode"})
    assert [link.uri for link in missing_key.logs if link.name != "Kubernetes Logs"] == [
        "https://ide/job-worker-0:{{ .taskConfig.port }}",
        "https://wandb/{{ .taskConfig.run_id }}",
        "https://ide/job-worker-1:{{ .taskConfig.port }}",
        "https://wandb/{{ .taskConfig.run_id }}",
    ]


def test_namespace_falls_back_to_the_execution_metadata(
    kubeflow_job: Callable[..., dict[str, Any]], now: datetime
) -> None:
    job = kubeflow_job("MPIJob")
    del job["metadata"]["namespace"]
    assert [link.uri for link in task_phase(job, metadata=metadata(), now=now).logs] == [
        "http://localhost:30082/#!/log/flytesnacks-development/job-worker-0/pod?namespace=flytesnacks-development"
    ]


# --- Ray ------------------------------------------------------------------------------------------------


RAY_TEMPLATE = {
    "displayName": "Ray Logs",
    "templateUris": [
        "https://logs/{{ .namespace }}/{{ .podName }}/{{ .containerName }}?job={{ .rayJobID }}&c={{ .rayClusterName }}"
    ],
}
DASHBOARD = {
    "displayName": "Ray Dashboard",
    "templateUris": ["https://dash.example.com/{{ .namespace }}/{{ .rayClusterName }}"],
}


def test_ray_default_links_are_the_dashboard_only(ray_job: Callable[..., dict[str, Any]], now: datetime) -> None:
    # plugins.ray.logs defaults to no links (as in Go); the dashboard KubeRay reports is linked without config.
    assert links(task_phase(ray_job(), now=now)) == [
        ("Ray Dashboard", "http://rj-raycluster-abcde-head-svc.ns.svc.cluster.local:8265")
    ]
    assert task_phase(ray_job(dashboard=None), now=now).logs == ()


def test_ray_logs_config_links_the_head_pod(ray_job: Callable[..., dict[str, Any]], now: datetime) -> None:
    # plugins.ray.logs starts from the Go zero value: the Kubernetes provider stays off unless enabled there.
    config = BackendConfig.from_flyte_config({"ray": {"logs": {"templates": [RAY_TEMPLATE]}}})
    assert links(task_phase(ray_job(dashboard=None), config, now=now)) == [
        ("Ray Logs", "https://logs/ns/rj-raycluster-abcde-head/ray-head?job=rj-xyz12&c=rj-raycluster-abcde")
    ]


def test_ray_variables_stay_literal_before_the_cluster_exists(
    ray_job: Callable[..., dict[str, Any]], now: datetime
) -> None:
    config = BackendConfig.from_flyte_config({"ray": {"logs": {"templates": [RAY_TEMPLATE]}}})
    info = task_phase(ray_job("", "", cluster=None, job_id=None, dashboard=None), config, now=now)
    assert links(info) == [
        ("Ray Logs", "https://logs/ns/{{ .podName }}/{{ .containerName }}?job={{ .rayJobID }}&c={{ .rayClusterName }}")
    ]


def test_ray_global_logs_section_is_not_used(ray_job: Callable[..., dict[str, Any]], now: datetime) -> None:
    config = with_logs({"kubernetes-template-uri": "k/{{ .podName }}"})
    assert task_phase(ray_job(dashboard=None), config, now=now).logs == ()


@pytest.mark.parametrize(
    ("deployment", "job_status", "dashboard", "linked"),
    [
        ("Running", "RUNNING", "rj-head-svc.ns.svc.cluster.local:8265", True),
        # Deviation from Go (which needs jobStatus RUNNING): the dashboard is linked while the cluster is up,
        # so a job still pending on a ready cluster, or an interactive one waiting, shows it too.
        ("Initializing", None, "rj-head-svc.ns.svc.cluster.local:8265", True),
        ("Running", "PENDING", "rj-head-svc.ns.svc.cluster.local:8265", True),
        ("Waiting", None, "rj-head-svc.ns.svc.cluster.local:8265", True),
        # KubeRay keeps dashboardURL after the job ends, when the cluster is (being) deleted: no dead link.
        ("Complete", "SUCCEEDED", "rj-head-svc.ns.svc.cluster.local:8265", False),
        ("Failed", "FAILED", "rj-head-svc.ns.svc.cluster.local:8265", False),
        ("Retrying", None, "rj-head-svc.ns.svc.cluster.local:8265", False),
        ("Running", "RUNNING", None, False),
        # A status patched by hand cannot put a scheme or a path into the link.
        ("Running", "RUNNING", "javascript:alert(1)//x:1", False),
        ("Running", "RUNNING", "evil.example.com/phish?x=:8265", False),
    ],
)
def test_ray_dashboard_link_while_the_cluster_is_up(
    ray_job: Callable[..., dict[str, Any]],
    now: datetime,
    deployment: str,
    job_status: str | None,
    dashboard: str | None,
    linked: bool,
) -> None:
    config = BackendConfig.from_flyte_config({"ray": {"dashboardURLTemplate": DASHBOARD}})
    info = task_phase(ray_job(deployment, job_status, dashboard=dashboard), config, now=now)
    expected = [("Ray Dashboard", "https://dash.example.com/ns/rj-raycluster-abcde")] if linked else []
    assert links(info) == expected
    assert info.custom_info.get("dashboardURL") == (dashboard if linked else None)


def test_ray_dashboard_follows_the_log_links(ray_job: Callable[..., dict[str, Any]], now: datetime) -> None:
    config = BackendConfig.from_flyte_config(
        {"ray": {"logs": {"templates": [RAY_TEMPLATE]}, "dashboardURLTemplate": DASHBOARD}}
    )
    assert [name for name, _ in links(task_phase(ray_job(), config, now=now))] == ["Ray Logs", "Ray Dashboard"]


def test_log_config_for_ray_can_enable_kubernetes(ray_job: Callable[..., dict[str, Any]], now: datetime) -> None:
    config = BackendConfig.from_flyte_config(
        {"ray": {"logs": {"kubernetes-enabled": True, "kubernetes-template-uri": "k/{{ .podName }}"}}}
    )
    info = task_phase(ray_job(dashboard=None), config, now=now)
    assert links(info) == [("Kubernetes Logs", "k/rj-raycluster-abcde-head")]


def test_empty_log_config_renders_nothing(kubeflow_job: Callable[..., dict[str, Any]], now: datetime) -> None:
    from dataclasses import replace

    config = replace(BackendConfig(), logs=LogConfig.empty())
    assert task_phase(kubeflow_job("PyTorchJob", replicas={"Master": 1, "Worker": 4}), config, now=now).logs == ()
