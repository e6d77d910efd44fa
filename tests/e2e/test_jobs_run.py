"""Jobs built by the backend run on the real operators to the end that kwok's pod outcome decides.

Each job's tasks are registered with our plugins (flytekit's serialization), built into an object by the
backend, created on the real API server, and reconciled by the real Training Operator (pods, services,
status conditions); kwok plays the pods' lifecycle (annotation `kubejobs-e2e/outcome` on the pod template,
carried there by the task execution's annotations as FlytePropeller sets them). The test records every
status the operator writes and checks that `task_phase` of each one moves through the Flyte phases to the
expected end; the recorded condition sequence is printed for the report.
"""

from __future__ import annotations

import json
import time
import warnings
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Optional

import pytest
from flyteidl.admin.agent_pb2 import TaskExecutionMetadata
from flyteidl.core.tasks_pb2 import TaskTemplate
from flytekit import task
from flytekit.configuration import ImageConfig, SerializationSettings
from flytekit.tools.translator import get_serializable
from flytekitplugins.kfoperators import PS, Chief, Elastic, MPIJob, PyTorch, RunPolicy, TfJob, Worker
from flytekitplugins.kubejobs.backend import BackendConfig, build_object
from flytekitplugins.kubejobs.backend.status import Phase, task_phase
from flytekitplugins.kubejobs.userwarnings import ExtensionKeyWarning
from flytekitplugins.raycluster import HeadNodeConfig, RayJobConfig, WorkerNodeConfig

from .controlplane import OUTCOME, RUN_FOR

pytestmark = pytest.mark.slow

PLURALS = {"PyTorchJob": "pytorchjobs", "TFJob": "tfjobs", "MPIJob": "mpijobs", "RayJob": "rayjobs"}
SETTINGS = SerializationSettings(
    project="proj", domain="dev", version="v1", image_config=ImageConfig.auto(img_name="registry.example/flyte:1.0")
)


def train(epochs: int) -> float:
    return float(epochs)


def task_request(
    config: Any, namespace: str, execution: str, outcome: str
) -> tuple[TaskTemplate, TaskExecutionMetadata]:
    """The task template of a task with ``config`` and the metadata of one execution of it whose pods end as
    ``outcome`` says (no outcome: they stay Running)."""
    template = get_serializable(OrderedDict(), SETTINGS, task(task_config=config)(train)).template.to_flyte_idl()
    annotations = {OUTCOME: outcome, RUN_FOR: "2s"} if outcome else {}
    meta = TaskExecutionMetadata(namespace=namespace, annotations=annotations)
    meta.task_execution_id.node_execution_id.execution_id.name = execution
    meta.task_execution_id.node_execution_id.node_id = "n0"
    return template, meta


def built(config: Any, namespace: str, execution: str, outcome: str) -> dict[str, Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExtensionKeyWarning)
        request = task_request(config, namespace, execution, outcome)
    obj: dict[str, Any] = build_object(*request, BackendConfig())
    return obj


def watch_until_terminal(
    k8s: Any,
    obj: dict[str, Any],
    timeout: float = 120,
    until: Optional[Callable[[dict[str, Any]], bool]] = None,
    create: bool = True,
) -> tuple[list[dict[str, Any]], list[Phase]]:
    """Create ``obj`` (unless ``create`` is false: it exists); every distinct status the operator writes and its
    Flyte phase, until a terminal one (or one for which ``until(status)`` holds)."""
    from kubernetes import client, watch

    api = client.CustomObjectsApi(k8s)
    group, version = obj["apiVersion"].split("/")
    namespace, plural = obj["metadata"]["namespace"], PLURALS[obj["kind"]]
    if create:
        api.create_namespaced_custom_object(group, version, namespace, plural, obj)
    statuses: list[dict[str, Any]] = []
    phases: list[Phase] = []
    deadline = time.monotonic() + timeout
    stream: Any = watch.Watch()  # type: ignore[no-untyped-call]
    for event in stream.stream(
        api.list_namespaced_custom_object,
        group,
        version,
        namespace,
        plural,
        field_selector=f"metadata.name={obj['metadata']['name']}",
        timeout_seconds=int(timeout),
    ):
        current = event["object"]
        status = current.get("status") or {}
        if status and (not statuses or statuses[-1] != status):
            statuses.append(status)
            phase = task_phase(current).phase
            if not phases or phases[-1] != phase:
                phases.append(phase)
            if phase.is_terminal or (until is not None and until(status)):
                stream.stop()
        if time.monotonic() > deadline:
            stream.stop()
    return statuses, phases


def condition_sequence(statuses: list[dict[str, Any]]) -> list[str]:
    """Each condition as it first became True: `Type(Reason)`."""
    seen: list[str] = []
    for status in statuses:
        for c in status.get("conditions", []):
            entry = f"{c['type']}({c.get('reason', '')})"
            if c["status"] == "True" and entry not in seen:
                seen.append(entry)
    return seen


JOBS: list[tuple[str, Callable[[], Any]]] = [
    ("pytorch", lambda: PyTorch(worker=Worker(replicas=2), run_policy=RunPolicy(backoff_limit=0))),
    ("elastic", lambda: Elastic(nnodes=2, nproc_per_node=1)),
    ("tfjob", lambda: TfJob(chief=Chief(replicas=1), ps=PS(replicas=1), worker=Worker(replicas=2))),
    ("mpijob", lambda: MPIJob(worker=Worker(replicas=2), slots=1)),
]


@pytest.mark.parametrize("outcome", ["succeed", "fail"])
@pytest.mark.parametrize(("name", "config"), JOBS, ids=[name for name, _ in JOBS])
def test_job_reaches_the_phase_its_pods_decide(
    k8s: Any, namespace: str, name: str, config: Callable[[], Any], outcome: str
) -> None:
    obj = built(config(), namespace, f"{name}-{outcome}", outcome)
    statuses, phases = watch_until_terminal(k8s, obj)
    sequence = condition_sequence(statuses)
    print(json.dumps({"job": obj["kind"], "config": name, "outcome": outcome, "conditions": sequence}))
    expected: Optional[Phase] = Phase.SUCCEEDED if outcome == "succeed" else None
    assert phases, "the operator wrote no status"
    final = phases[-1]
    assert final.is_terminal, f"{obj['kind']} did not finish: conditions {sequence}, phases {phases}"
    if expected is not None:
        assert final == expected, (sequence, phases)
    else:
        assert final.is_failure, (sequence, phases)
    assert phases[0] in (Phase.QUEUED, Phase.INITIALIZING, Phase.RUNNING), phases


def ray_config(**settings: Any) -> RayJobConfig:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExtensionKeyWarning)  # the settings need this backend: that is the point
        defaults: dict[str, Any] = {
            "head_node_config": HeadNodeConfig(),
            "worker_node_config": [WorkerNodeConfig(group_name="workers", replicas=1)],
            "shutdown_after_job_finishes": True,
        }
        return RayJobConfig(**{**defaults, **settings})


def test_rayjob_whose_submission_fails_is_a_permanent_failure(k8s: Any, namespace: str) -> None:
    # KubeRay reads a Ray job's own result from the head's dashboard, which a simulated pod does not serve;
    # what the operator decides without it is the submitter Job's failure (its pods fail here). One pod try
    # (KubeRay's default, 2 retries, is run over gRPC in test_served_connector.py).
    obj = built(ray_config(submitter_backoff_limit=0), namespace, "ray-fail", "fail")
    statuses, phases = watch_until_terminal(k8s, obj, timeout=180)
    trail = [(s.get("jobDeploymentStatus"), s.get("reason")) for s in statuses]
    print(json.dumps({"job": "RayJob", "outcome": "fail", "statuses": trail}))
    assert statuses[-1]["jobDeploymentStatus"] == "Failed" and statuses[-1]["reason"] == "SubmissionFailed", trail
    assert phases[-1] == Phase.PERMANENT_FAILURE, (trail, phases)
    assert Phase.INITIALIZING in phases, (trail, phases)
    # The head endpoint KubeRay reports once the cluster is up reaches custom_info as KubeRay wrote it.
    cluster = next(s["rayClusterName"] for s in statuses if s.get("rayClusterName"))
    seen = [dict(task_phase({**obj, "status": s}).custom_info) for s in statuses]
    up = next((info for info in seen if "dashboardURL" in info), None)
    assert up is not None, (trail, seen)
    assert up["headServiceName"] == f"{cluster}-head-svc", up
    # The backend's head service is a NodePort (Flyte's default serviceType): KubeRay reports node ports.
    node_ports = [up["clientNodePort"], up["dashboardNodePort"], up["gcsNodePort"]]
    assert all(30000 <= int(port) <= 32767 for port in node_ports) and len(set(node_ports)) == 3, up
    assert up["dashboardURL"] == f"{cluster}-head-svc.{namespace}.svc.cluster.local:8265", up
    assert "dashboardURL" not in seen[-1] and seen[-1]["headServiceName"] == up["headServiceName"], seen[-1]


def test_rayjob_past_its_active_deadline_is_a_permanent_failure(k8s: Any, namespace: str) -> None:
    # The other outcome KubeRay decides without the dashboard: activeDeadlineSeconds (a RayJob field the IDL
    # cannot carry: RayJobConfig sends it under kubejobs.rayJob) ends a RayJob whose pods keep running.
    obj = built(ray_config(active_deadline_seconds=5), namespace, "ray-deadline", "")
    assert obj["spec"]["activeDeadlineSeconds"] == 5
    statuses, phases = watch_until_terminal(k8s, obj, timeout=180)
    trail = [(s.get("jobDeploymentStatus"), s.get("reason")) for s in statuses]
    print(json.dumps({"job": "RayJob", "outcome": "deadline", "statuses": trail}))
    assert statuses[-1]["jobDeploymentStatus"] == "Failed" and statuses[-1]["reason"] == "DeadlineExceeded", trail
    assert phases[-1] == Phase.PERMANENT_FAILURE, (trail, phases)
    assert "[DeadlineExceeded]" in task_phase({**obj, "status": statuses[-1]}).message, trail
