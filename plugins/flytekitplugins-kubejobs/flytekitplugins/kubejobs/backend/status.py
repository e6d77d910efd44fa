"""Job object (a PyTorchJob / TFJob / MPIJob / RayJob dict read from the cluster) -> Flyte phase.

``task_phase`` is pure: it reads the object's ``metadata``, ``spec`` and ``status`` and a clock (``now``),
and returns a ``PhaseInfo`` (phase, reason, message, error code and kind, log links, start and finish
times, and for a RayJob its head service endpoint as custom info). It follows Flyte's Go plugins
(``kfoperators/common`` and ``k8s/ray``) except where the package README's "Status mapping" section lists a
deliberate deviation. Malformed objects raise ``ValueError``.

>>> from datetime import datetime, timezone
>>> job = {"kind": "PyTorchJob", "metadata": {"name": "j", "namespace": "ns",
...        "creationTimestamp": "2026-01-01T00:00:00Z"}, "spec": {"pytorchReplicaSpecs": {}},
...        "status": {"startTime": "2026-01-01T00:00:05Z", "conditions": [
...            {"type": "Created", "status": "True", "lastTransitionTime": "2026-01-01T00:00:01Z"},
...            {"type": "Running", "status": "True", "lastTransitionTime": "2026-01-01T00:00:05Z"}]}}
>>> task_phase(job, now=datetime(2026, 1, 1, 0, 1, tzinfo=timezone.utc)).phase
<Phase.RUNNING: 'RUNNING'>
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, cast

from ..wire.kinds import MPIJOB_V2BETA1, TRAINJOB, JobKind, StatusStyle, kind_of
from .kueue import queued_message
from .logs import LogConfig, LogInput, LogLink, TemplateLogPlugin, render_links, task_execution_variables

if TYPE_CHECKING:
    from flyteidl.admin.agent_pb2 import TaskExecutionMetadata
    from flyteidl.core.execution_pb2 import TaskLog

    from .plugins_config import BackendConfig

__all__ = [
    "MAX_LINKED_PODS_PER_ROLE",
    "PERMANENT_RAY_REASONS",
    "ErrorKind",
    "Phase",
    "PhaseInfo",
    "job_finished",
    "pod_selector",
    "task_phase",
]

#: Links are listed per pod; past this many pods of one role the rest are left out (a 2**31-replica
#: garbage spec must not build two billion links; real jobs stay far below it).
MAX_LINKED_PODS_PER_ROLE = 1000

#: RayJob ``status.reason`` values after which another attempt cannot succeed.
PERMANENT_RAY_REASONS = frozenset({"DeadlineExceeded", "SubmissionFailed", "ValidationFailed"})


class Phase(enum.Enum):
    """Flyte task phases a job can be in (``Undefined`` never comes out: unknown states get a real phase)."""

    QUEUED = "QUEUED"
    INITIALIZING = "INITIALIZING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    RETRYABLE_FAILURE = "RETRYABLE_FAILURE"
    PERMANENT_FAILURE = "PERMANENT_FAILURE"

    @property
    def is_terminal(self) -> bool:
        return self in (Phase.SUCCEEDED, Phase.RETRYABLE_FAILURE, Phase.PERMANENT_FAILURE)

    @property
    def is_failure(self) -> bool:
        return self in (Phase.RETRYABLE_FAILURE, Phase.PERMANENT_FAILURE)


class ErrorKind(enum.Enum):
    """``flyteidl.core.ExecutionError.ErrorKind``: whose retry budget a failure counts against."""

    USER = "USER"
    SYSTEM = "SYSTEM"


@dataclass(frozen=True)
class PhaseInfo:
    """Where a job stands. ``code``/``error_kind`` are set for failures only (Flyte ``ExecutionError``)."""

    phase: Phase
    reason: str = ""
    message: str = ""
    code: str = ""
    error_kind: ErrorKind | None = None
    logs: tuple[LogLink, ...] = ()
    start_time: datetime | None = None
    finish_time: datetime | None = None
    #: Facts a user needs beyond the phase (RayJob: the head service and its ports), for ``custom_info``.
    custom_info: Mapping[str, str] = field(default_factory=dict)

    def to_task_logs(self) -> list[TaskLog]:
        """The links as ``flyteidl.core.TaskLog`` messages, in order."""
        from flyteidl.core.execution_pb2 import TaskLog

        return [
            TaskLog(
                name=link.name,
                uri=link.uri,
                message_format=cast("TaskLog.MessageFormat", link.message_format.value),  # the IDL's number
                ShowWhilePending=link.show_while_pending,
                HideOnceFinished=link.hide_once_finished,
            )
            for link in self.logs
        ]


# --- reading the object -------------------------------------------------------------------------------


class _Obj:
    """Typed access to a decoded Kubernetes object; every wrong shape is a ValueError naming the path."""

    def __init__(self, kind: str, obj: Mapping[str, Any]) -> None:
        self.kind = kind
        self.metadata = _mapping(f"{kind}.metadata", obj.get("metadata"))
        self.spec = _mapping(f"{kind}.spec", obj.get("spec"))
        self.status = _mapping(f"{kind}.status", obj.get("status"))
        self.name = _string(f"{kind}.metadata.name", self.metadata.get("name"))
        self.namespace = _string(f"{kind}.metadata.namespace", self.metadata.get("namespace"))
        self.created = _time(f"{kind}.metadata.creationTimestamp", self.metadata.get("creationTimestamp"))


def _mapping(path: str, value: object) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"{path} must be a mapping, got {type(value).__name__}: {value!r:.200}")
    return value


def _string(path: str, value: object) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ValueError(f"{path} must be a string, got {type(value).__name__}: {value!r:.200}")
    return value


def _time(path: str, value: object) -> datetime | None:
    """An RFC 3339 timestamp (the API's spelling) or a datetime; naive values are taken as UTC."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            raise ValueError(
                f"{path} must be an RFC 3339 time like '2026-01-01T00:00:00Z', got {value!r:.200}"
            ) from None
    else:
        raise ValueError(f"{path} must be an RFC 3339 time string, got {type(value).__name__}: {value!r:.200}")
    if moment.tzinfo is None:
        return moment.replace(tzinfo=timezone.utc)
    try:
        return moment.astimezone(timezone.utc)
    except OverflowError:
        raise ValueError(f"{path} is out of range: {value!r:.200}") from None


def _replicas(path: str, role: object) -> int:
    """A role's replica count as Go reads it: a missing role or missing count is 0."""
    count = _mapping(path, role).get("replicas")
    if count is None:
        return 0
    if isinstance(count, bool) or not isinstance(count, int):
        raise ValueError(f"{path}.replicas must be an int, got {type(count).__name__}: {count!r:.200}")
    return count


def _pods(count: int) -> range:
    return range(max(0, min(count, MAX_LINKED_PODS_PER_ROLE)))


# --- entry point ---------------------------------------------------------------------------------------


def task_phase(
    obj: Mapping[str, Any],
    config: BackendConfig | None = None,
    metadata: TaskExecutionMetadata | None = None,
    now: datetime | None = None,
    *,
    task_config: Mapping[str, str] | None = None,
    pods: Sequence[Mapping[str, Any]] = (),
) -> PhaseInfo:
    """Map a job object read from the cluster to its Flyte phase.

    ``config`` defaults to ``BackendConfig()``; ``metadata`` fills the task-execution template variables
    of log links; ``now`` (default: the current UTC time) drives the operator-stall timeout and the
    links' finish time; ``task_config`` (the task template's ``config``) selects dynamic log links;
    ``pods`` (the pods of a kind whose pod names end in a random suffix, listed with ``pod_selector``) name
    their links.
    Raises ``ValueError`` for an object that is not a supported kind or is malformed.
    """
    if config is None:
        from .plugins_config import BackendConfig

        config = BackendConfig()
    if now is None:
        now = datetime.now(timezone.utc)
    elif now.tzinfo is None:
        now = now.replace(tzinfo=timezone.utc)
    else:
        try:
            now = now.astimezone(timezone.utc)
        except OverflowError:
            raise ValueError(f"now is out of range: {now!r}") from None
    if not isinstance(obj, Mapping):
        raise ValueError(f"a job object must be a mapping, got {type(obj).__name__}")
    if obj.get("kind") == TRAINJOB.kind:
        from .trainjob_status import trainjob_phase

        info = trainjob_phase(obj, config, metadata, now, task_config=task_config, pods=pods)
    else:
        api_version = obj.get("apiVersion")
        try:
            kind = kind_of(obj.get("kind"), api_version if isinstance(api_version, str) else None)  # type: ignore[arg-type]
        except KeyError as e:
            raise ValueError(e.args[0]) from None
        info = _PHASE_MAPPINGS[kind.status](_Obj(kind.kind, obj), kind, config, metadata, now, task_config, pods)
    if info.phase is Phase.QUEUED:  # suspended or not started: say so when Kueue decides when it starts
        info = replace(info, message=queued_message(obj, info.message))
    return info


# --- Training Operator (PyTorchJob, TFJob, MPIJob) ----------------------------------------------------


def _kubeflow_pods(job: _Obj, kind: JobKind) -> list[tuple[str, str]]:
    """``(pod name, log name)`` of the pods that get links, in Go's order, with the operator's pod names."""
    specs_path = f"{job.kind}.spec.{kind.replica_specs_key}"
    specs = _mapping(specs_path, job.spec.get(kind.replica_specs_key))
    pods: list[tuple[str, str]] = []
    for linked in kind.linked_roles:
        if linked.pods == "first-if-present":
            indexes = range(1 if linked.role in specs else 0)
        else:
            count = _replicas(f"{specs_path}.{linked.role}", specs.get(linked.role))
            indexes = _pods(count) if linked.pods == "each" else range(1 if count > 0 else 0)
        pods += [(kind.pod_name(job.name, linked.role, i), linked.log_name) for i in indexes]
    return pods


def pod_selector(kind: JobKind, name: str) -> str:
    """The label selector of the pods of job ``name`` whose names cannot be derived (``kind.lists_pods``): a
    TrainJob's (JobSet's), an MPIJob v2beta1's launcher (a batch Job's pod)."""
    if kind is MPIJOB_V2BETA1:
        return f"{_MPI_JOB_NAME}={name},{_MPI_JOB_ROLE}=launcher"
    from .trainjob_status import trainjob_pod_selector

    return trainjob_pod_selector(name)


def job_finished(obj: Mapping[str, Any]) -> bool:
    """Whether a job has ended (a TrainJob ``Failed``/``Complete``, a Training Operator kind ``Succeeded``/
    ``Failed``); never raises, on any shape.

    >>> job_finished({"kind": "TrainJob", "status": {"conditions": [{"type": "Complete", "status": "True"}]}})
    True
    >>> job_finished({"kind": "TrainJob", "status": {"conditions": [{"type": "Suspended", "status": "True"}]}})
    False
    """
    from .trainjob_status import _ENDS

    if not isinstance(obj, Mapping):
        return False
    status = obj.get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    ends = _ENDS if obj.get("kind") == TRAINJOB.kind else ("Succeeded", "Failed")
    return isinstance(conditions, list) and any(
        isinstance(c, Mapping) and c.get("type") in ends and c.get("status") == "True" for c in conditions
    )


_MPI_JOB_NAME, _MPI_JOB_ROLE = "training.kubeflow.org/job-name", "training.kubeflow.org/job-role"


def _launcher_pods(job: _Obj, pods: Sequence[Mapping[str, Any]]) -> list[str]:
    """The newest listed launcher pod of an MPIJob v2beta1 (its batch Job replaces a failed one)."""
    found: list[tuple[str, str]] = []
    for i, pod in enumerate(pods):
        meta = _mapping(f"pods[{i}].metadata", _mapping(f"pods[{i}]", pod).get("metadata"))
        labels = _mapping(f"pods[{i}].metadata.labels", meta.get("labels"))
        if labels.get(_MPI_JOB_NAME) == job.name and labels.get(_MPI_JOB_ROLE) == "launcher":
            created = meta.get("creationTimestamp")
            found.append(
                (created if isinstance(created, str) else "", _string(f"pods[{i}].metadata.name", meta.get("name")))
            )
    return [max(found)[1]] if found else []


def _kubeflow_phase(
    job: _Obj,
    kind: JobKind,
    config: BackendConfig,
    metadata: TaskExecutionMetadata | None,
    now: datetime,
    task_config: Mapping[str, str] | None,
    pods: Sequence[Mapping[str, Any]] = (),
) -> PhaseInfo:
    execution = task_execution_variables(metadata, job.name)
    namespace = job.namespace or (metadata.namespace if metadata is not None else "")
    linked = _kubeflow_pods(job, kind)
    if kind is MPIJOB_V2BETA1:  # the launcher runs mpirun: its log is the job's output
        linked = [(pod, "launcher") for pod in _launcher_pods(job, pods)] + linked
    inputs = [
        LogInput(pod, namespace, kind.container, log_name, job.created, now, execution) for pod, log_name in linked
    ]
    logs = render_links(config.logs, *inputs, task_config=task_config)
    started = _time(f"{job.kind}.status.startTime", job.status.get("startTime"))
    finished = _time(f"{job.kind}.status.completionTime", job.status.get("completionTime"))

    def info(
        phase: Phase, reason: str = "", message: str = "", code: str = "", kind: ErrorKind | None = None
    ) -> PhaseInfo:
        return PhaseInfo(phase, reason, message, code, kind, logs, started, finished)

    run_policy = _mapping(f"{job.kind}.spec.runPolicy", job.spec.get("runPolicy"))
    suspend = run_policy.get("suspend")
    if suspend is not None and not isinstance(suspend, bool):
        raise ValueError(f"{job.kind}.spec.runPolicy.suspend must be a bool, got {suspend!r:.200}")
    timeout = timedelta(seconds=config.kf_operator.timeout)
    if suspend is not True and started is None and job.created is not None and now - job.created > timeout:
        return info(
            Phase.RETRYABLE_FAILURE,
            "OperatorStalled",
            f"kubeflow operator hasn't updated the {kind.task_type} custom resource since creation time "
            f"{job.created.isoformat().replace('+00:00', 'Z')}",
            "OperatorStalled",
            ErrorKind.SYSTEM,
        )

    condition = _current_condition(job)
    if condition is None:  # no conditions yet
        return info(Phase.QUEUED, "JobCreated")
    ctype, creason, cmessage = condition
    if ctype == "Created":
        return info(Phase.QUEUED, "JobCreated")
    if ctype in ("Running", "Restarting"):
        return info(Phase.RUNNING, creason or ctype, cmessage)
    if ctype == "Succeeded":
        return info(Phase.SUCCEEDED, creason)
    if ctype == "Suspended":
        return info(Phase.QUEUED, "Suspended", cmessage)
    if ctype == "Failed":
        return info(
            Phase.RETRYABLE_FAILURE,
            creason or "Failed",
            f"Job failed:\n\t{creason} - {cmessage}",
            "DownstreamSystemError",
            ErrorKind.USER,
        )
    # No True condition, or a condition type this code does not know (a newer operator): the job exists
    # and has not finished as far as we can tell.
    reason = "found no current condition" if ctype == "" else f"unknown condition type {ctype}"
    return info(Phase.RUNNING if started is not None else Phase.QUEUED, reason, cmessage)


def _current_condition(job: _Obj) -> tuple[str, str, str] | None:
    """The newest True condition as ``(type, reason, message)``; ``("", "", "")`` if none is True.

    Ties in ``lastTransitionTime`` (one-second resolution) go to the later list entry: the operator appends
    conditions as they happen, so Created and Running set in the same second give Running.
    """
    path = f"{job.kind}.status.conditions"
    raw = job.status.get("conditions")
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise ValueError(f"{path} must be a list, got {type(raw).__name__}: {raw!r:.200}")
    if not raw:
        return None
    epoch = datetime.min.replace(tzinfo=timezone.utc)
    parsed = []
    for index, item in enumerate(raw):
        if not isinstance(item, Mapping):
            raise ValueError(f"{path}[{index}] must be a mapping, got {type(item).__name__}: {item!r:.200}")
        entry = item
        ctype = _string(f"{path}[{index}].type", entry.get("type"))
        status = _string(f"{path}[{index}].status", entry.get("status"))
        when = _time(f"{path}[{index}].lastTransitionTime", entry.get("lastTransitionTime")) or epoch
        reason = _string(f"{path}[{index}].reason", entry.get("reason"))
        message = _string(f"{path}[{index}].message", entry.get("message"))
        parsed.append((when, index, ctype, status, reason, message))
    for _when, _index, ctype, status, reason, message in sorted(parsed, key=lambda c: (c[0], c[1]), reverse=True):
        if status == "True":
            return ctype, reason, message
    return "", "", ""


# --- KubeRay (RayJob) ---------------------------------------------------------------------------------


def _ray_phase(
    job: _Obj,
    kind: JobKind,
    config: BackendConfig,
    metadata: TaskExecutionMetadata | None,
    now: datetime,
    task_config: Mapping[str, str] | None,
    pods: Sequence[Mapping[str, Any]] = (),
) -> PhaseInfo:
    status = job.status
    path = f"{job.kind}.status"
    deployment = _string(f"{path}.jobDeploymentStatus", status.get("jobDeploymentStatus"))
    job_status = _string(f"{path}.jobStatus", status.get("jobStatus"))
    reason = _string(f"{path}.reason", status.get("reason"))
    message = _string(f"{path}.message", status.get("message"))
    cluster = _string(f"{path}.rayClusterName", status.get("rayClusterName"))
    dashboard = _string(f"{path}.dashboardURL", status.get("dashboardURL"))
    started = _time(f"{path}.startTime", status.get("startTime"))
    finished = _time(f"{path}.endTime", status.get("endTime"))

    head = _ray_head(job, dashboard if deployment in _RAY_CLUSTER_UP else "")
    extra = {"rayJobID": _string(f"{path}.jobId", status.get("jobId")), "rayClusterName": cluster}
    extra |= {"rayHeadServiceName": head.get("headServiceName", ""), "rayDashboardURL": head.get("dashboardURL", "")}
    log_input = LogInput(
        pod_name=f"{cluster}-head" if cluster else "",
        namespace=job.namespace or (metadata.namespace if metadata is not None else ""),
        container_name=kind.container if cluster else "",
        start_time=job.created,
        finish_time=now,
        execution=task_execution_variables(metadata, job.name),
        extra=extra,
    )
    ray_logs = config.ray.logs if config.ray.logs is not None else LogConfig.empty()
    logs = render_links(ray_logs, log_input, task_config=task_config)
    if "dashboardURL" in head:
        template = config.ray.dashboard_url_template or _DEFAULT_RAY_DASHBOARD
        plugin = TemplateLogPlugin.from_flyte_config(template, field_name="plugins.ray.dashboardURLTemplate")
        dashboard_only = LogConfig(kubernetes_enabled=False, kubernetes_template_uri="", templates=(plugin,))
        logs += render_links(dashboard_only, log_input)
    custom = {"rayJobID": extra["rayJobID"], "rayClusterName": cluster, **head}
    custom_info = {key: value for key, value in custom.items() if value}

    def info(phase: Phase, why: str = "", text: str = "", code: str = "", kind: ErrorKind | None = None) -> PhaseInfo:
        return PhaseInfo(phase, why, text, code, kind, logs, started, finished, custom_info)

    failure = f"Failed to run Ray job {job.name} with error: [{reason}] {message}"
    suspend = job.spec.get("suspend")
    if suspend is not None and not isinstance(suspend, bool):
        raise ValueError(f"{job.kind}.spec.suspend must be a bool, got {suspend!r:.200}")
    # KubeRay may write Initializing once before it acts on spec.suspend (seen on v1.6 under Kueue): a job
    # created suspended waits to be resumed, it is not starting.
    if suspend and deployment in ("", "Initializing"):
        return info(Phase.QUEUED, "Suspended", message)
    if deployment == "":
        return info(Phase.QUEUED, "Scheduling")
    if deployment == "Initializing":
        return info(Phase.INITIALIZING, "cluster is creating")
    if deployment == "Running":
        return info(Phase.RUNNING, job_status)
    if deployment == "Complete":
        if job_status == "FAILED":  # older KubeRay ended failed jobs as Complete
            text = f"Failed to run Ray job {job.name} with error: [{reason or 'AppFailed'}] {message}"
            return info(Phase.RETRYABLE_FAILURE, "AppFailed", text, "TaskFailedWithError", ErrorKind.USER)
        if job_status == "STOPPED":  # `ray job stop`: no outputs, and a retry would not be wanted
            text = f"Ray job {job.name} was stopped before it finished" + (f": {message}" if message else "")
            return info(Phase.PERMANENT_FAILURE, "Stopped", text, "RayJobStopped", ErrorKind.USER)
        return info(Phase.SUCCEEDED, job_status)
    if deployment in ("Suspending", "Suspended"):
        return info(Phase.QUEUED, deployment, message)
    if deployment == "Failed":
        if reason in PERMANENT_RAY_REASONS:
            return info(Phase.PERMANENT_FAILURE, reason, failure, "TaskFailedWithError", ErrorKind.USER)
        error_kind = ErrorKind.USER if reason == "AppFailed" else ErrorKind.SYSTEM
        return info(Phase.RETRYABLE_FAILURE, reason or "Failed", failure, "TaskFailedWithError", error_kind)
    if deployment == "ValidationFailed":
        text = f"Ray job {job.name} failed validation: {message}"
        return info(Phase.PERMANENT_FAILURE, "ValidationFailed", text, "ValidationFailed", ErrorKind.USER)
    if deployment == "Retrying":  # backoffLimit: KubeRay is replacing the cluster for another try
        return info(Phase.RUNNING, "Retrying", message)
    if deployment == "Waiting":  # InteractiveMode: waiting for a job id to be submitted
        waiting = "the cluster is up; waiting for a Ray job to be submitted and its id set in spec.jobId"
        return info(Phase.QUEUED, "Waiting", message or f"InteractiveMode: {waiting}")
    return info(
        Phase.RUNNING if started is not None else Phase.QUEUED,
        f"unknown job deployment status: {deployment}",
        message,
    )


#: ``jobDeploymentStatus`` values in which the RayJob's cluster is up (KubeRay sets ``dashboardURL`` once it
#: is ready and keeps it after the job ends, when the cluster may already be deleted).
_RAY_CLUSTER_UP = frozenset({"Initializing", "Running", "Waiting"})

#: The dashboard link when ``plugins.ray.dashboardURLTemplate`` is not set: the in-cluster address KubeRay
#: reports (reachable from inside the cluster, or through a proxy a platform puts in front of it).
_DEFAULT_RAY_DASHBOARD = {"displayName": "Ray Dashboard", "templateUris": ["http://{{ .rayDashboardURL }}"]}

#: custom_info key -> ``status.rayClusterStatus.head`` field.
_RAY_HEAD_FIELDS = {
    "headServiceName": "serviceName",
    "headServiceIP": "serviceIP",
    "headPodName": "podName",
    "headPodIP": "podIP",
}

#: custom_info key stem -> ``status.rayClusterStatus.endpoints`` names, first found wins. KubeRay names the head
#: service's ports after the head container's: its defaults (``client``, ``gcs-server``) when the container
#: has none, else the container's, which ``backend/ray.py`` names as Flyte's Go plugin does (``head``, ``redis``).
_RAY_ENDPOINTS = {"client": ("client", "head"), "dashboard": ("dashboard",), "gcs": ("gcs-server", "redis")}

#: Head service types whose ports get a node port; KubeRay then reports the node port, not the target port.
_NODE_PORT_SERVICES = frozenset({"NodePort", "LoadBalancer"})

#: What KubeRay writes in ``dashboardURL``: ``<service>.<namespace>.svc.<domain>:<port>``, no scheme. Anything
#: else (a status patched by hand) is left out, so a link never carries a scheme or path from the status.
_HOST_PORT = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?:[0-9]{1,5}")


def _ray_head(job: _Obj, dashboard: str) -> dict[str, str]:
    """The head service and pod, their ports and the dashboard address, from what KubeRay copies into the
    RayJob (``status.rayClusterStatus.head``/``.endpoints``, ``status.dashboardURL``); empty values left out.
    Ports are ``<stem>NodePort`` for a NodePort or LoadBalancer head service, else ``<stem>Port``."""
    path, status = f"{job.kind}.status", job.status
    head_spec_path = f"{job.kind}.spec.rayClusterSpec.headGroupSpec"
    cluster_spec = _mapping(f"{job.kind}.spec.rayClusterSpec", job.spec.get("rayClusterSpec"))
    head_spec = _mapping(head_spec_path, cluster_spec.get("headGroupSpec"))
    service_type = _string(f"{head_spec_path}.serviceType", head_spec.get("serviceType"))
    suffix = "NodePort" if service_type in _NODE_PORT_SERVICES else "Port"
    cluster_path = f"{path}.rayClusterStatus"
    cluster_status = _mapping(cluster_path, status.get("rayClusterStatus"))
    head = _mapping(f"{cluster_path}.head", cluster_status.get("head"))
    endpoints = _mapping(f"{cluster_path}.endpoints", cluster_status.get("endpoints"))
    out = {
        key: _string(f"{cluster_path}.head.{field_name}", head.get(field_name))
        for key, field_name in _RAY_HEAD_FIELDS.items()
    }
    for stem, port_names in _RAY_ENDPOINTS.items():
        ports = (_string(f"{cluster_path}.endpoints.{name}", endpoints.get(name)) for name in port_names)
        out[stem + suffix] = next((port for port in ports if port), "")
    if _HOST_PORT.fullmatch(dashboard):
        out["dashboardURL"] = dashboard
    return {key: value for key, value in out.items() if value}


#: One mapping per ``StatusStyle`` (the kinds table says which a kind uses).
_PHASE_MAPPINGS = {StatusStyle.CONDITIONS: _kubeflow_phase, StatusStyle.JOB_DEPLOYMENT: _ray_phase}
