"""TrainJob (``trainer.kubeflow.org/v1alpha1``) status -> Flyte phase, in the ``PhaseInfo`` of ``status.py``.

Conditions (Trainer v2.2/v2.3 ``trainjob_controller.go`` and the JobSet plugin): ``Complete`` (JobSet's
``Completed``, reason ``AllJobsCompleted``), ``Failed`` (``DeadlineExceeded``, ``TrainingRuntimeNotSupported``,
or JobSet's ``FailedJobs`` / ``ReachedMaxRestarts`` / failure-policy reasons) and ``Suspended`` (reason
``Suspended``; ``Resumed`` when False). A suspended job is QUEUED with a message, never a failure.
``jobsStatus`` (per replicated job) says whether pods run; ``trainerStatus`` progress goes in the message.

Pod names: JobSet names each Job ``<trainjob>-<replicatedJob>-<jobIndex>`` and the Job controller names an
indexed pod ``<job>-<podIndex>-<5 random characters>``, so only the prefix is predictable. Links are built
from the pods the caller listed (label ``jobset.sigs.k8s.io/jobset-name=<trainjob>``); without them there
are none (a link to a guessed name would be broken).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Optional

from .logs import LogInput, render_links, task_execution_variables
from .status import ErrorKind, Phase, PhaseInfo, _current_condition, _mapping, _Obj, _string, _time

if TYPE_CHECKING:
    from flyteidl.admin.agent_pb2 import TaskExecutionMetadata

    from .plugins_config import BackendConfig

__all__ = ["PERMANENT_TRAINJOB_REASONS", "trainjob_phase", "trainjob_pod_selector"]

#: ``Failed`` reasons after which another attempt of the same spec cannot succeed.
PERMANENT_TRAINJOB_REASONS = frozenset({"DeadlineExceeded", "TrainingRuntimeNotSupported"})
_JOBSET = "jobset.sigs.k8s.io/jobset-name"
_RJOB = "jobset.sigs.k8s.io/replicatedjob-name"
_JOB_INDEX = "jobset.sigs.k8s.io/job-index"
_POD_INDEX = "batch.kubernetes.io/job-completion-index"


def trainjob_pod_selector(name: str) -> str:
    """The label selector of the pods JobSet runs for TrainJob ``name`` (they feed ``trainjob_phase``'s links)."""
    return f"{_JOBSET}={name}"


#: The conditions that end a TrainJob, in the order they are looked up (metav1.Condition keeps one per type).
_ENDS = ("Failed", "Complete")


def _int(path: str, value: object) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{path} must be an int, got {value!r:.200}")
    return value


def _pod_inputs(
    job: _Obj, pods: Sequence[Mapping[str, Any]], namespace: str, now: datetime, execution: Mapping[str, str]
) -> list[LogInput]:
    """One input per (replicated job, job index, pod index): the newest pod of each (a restarted Job makes new ones)."""
    newest: dict[tuple[str, int, int], tuple[datetime, str]] = {}
    epoch = datetime.min.replace(tzinfo=timezone.utc)
    for i, pod in enumerate(pods):
        meta = _mapping(f"pods[{i}].metadata", _mapping(f"pods[{i}]", pod).get("metadata"))
        labels = _mapping(f"pods[{i}].metadata.labels", meta.get("labels"))
        if labels.get(_JOBSET) != job.name:
            continue
        try:
            key = (
                _string(f"pods[{i}] {_RJOB}", labels.get(_RJOB)),
                int(labels.get(_JOB_INDEX, 0)),
                int(labels.get(_POD_INDEX, 0)),
            )
        except (TypeError, ValueError):
            raise ValueError(f"pods[{i}] has non-integer JobSet index labels: {dict(labels)!r:.200}") from None
        created = _time(f"pods[{i}].metadata.creationTimestamp", meta.get("creationTimestamp")) or epoch
        name = _string(f"pods[{i}].metadata.name", meta.get("name"))
        if key not in newest or created >= newest[key][0]:
            newest[key] = (created, name)
    order = {s.get("name"): n for n, s in enumerate(_jobs_status(job))}
    inputs = []
    for (rjob, job_index, pod_index), (_created, name) in sorted(
        newest.items(), key=lambda item: (order.get(item[0][0], len(order)), item[0])
    ):
        suffix = f" {rjob}-{pod_index}" if job_index == 0 else f" {rjob}-{job_index}-{pod_index}"
        inputs.append(LogInput(name, namespace, "node", suffix, job.created, now, execution))
    return inputs


def _jobs_status(job: _Obj) -> list[Mapping[str, Any]]:
    raw = job.status.get("jobsStatus")
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ValueError(f"TrainJob.status.jobsStatus must be a list, got {raw!r:.200}")
    return [_mapping(f"TrainJob.status.jobsStatus[{i}]", s) for i, s in enumerate(raw)]


def _progress(job: _Obj) -> str:
    status = _mapping("TrainJob.status.trainerStatus", job.status.get("trainerStatus"))
    parts = []
    if status.get("progressPercentage") is not None:
        parts.append(f"{_int('trainerStatus.progressPercentage', status['progressPercentage'])}% done")
    if status.get("estimatedRemainingSeconds") is not None:
        parts.append(
            f"about {_int('trainerStatus.estimatedRemainingSeconds', status['estimatedRemainingSeconds'])}s left"
        )
    for i, metric in enumerate(status.get("metrics") or []):
        m = _mapping(f"trainerStatus.metrics[{i}]", metric)
        parts.append(f"{_string('name', m.get('name'))}={_string('value', m.get('value'))}")
    return ", ".join(parts)


def trainjob_phase(
    obj: Mapping[str, Any],
    config: Optional[BackendConfig] = None,
    metadata: Optional[TaskExecutionMetadata] = None,
    now: Optional[datetime] = None,
    *,
    task_config: Optional[Mapping[str, str]] = None,
    pods: Sequence[Mapping[str, Any]] = (),
) -> PhaseInfo:
    """The Flyte phase of a TrainJob read from the cluster; ``pods`` (the job's pods, as listed) give the links.

    Raises ``ValueError`` for a malformed object.
    """
    if config is None:
        from .plugins_config import BackendConfig

        config = BackendConfig()
    now = now or datetime.now(timezone.utc)
    if now.tzinfo is None:
        now = now.replace(tzinfo=timezone.utc)
    if not isinstance(obj, Mapping) or obj.get("kind") != "TrainJob":
        raise ValueError(f"not a TrainJob: {str(obj)[:200]!r}")
    job = _Obj("TrainJob", obj)
    namespace = job.namespace or (metadata.namespace if metadata is not None else "")
    inputs = _pod_inputs(job, pods, namespace, now, task_execution_variables(metadata, job.name))
    logs = render_links(config.logs, *inputs, task_config=task_config)
    conditions = _conditions(job)
    resumed = conditions.get("Suspended", (None, "", "", ""))
    # The controller's own deadline clock starts at creation, or at the last resume.
    started = resumed[0] if resumed[1] == "False" and resumed[0] is not None else job.created

    for ctype in _ENDS:
        when, status, reason, message = conditions.get(ctype, (None, "", "", ""))
        if status != "True":
            continue
        if ctype == "Complete":
            return PhaseInfo(
                Phase.SUCCEEDED, reason or "Complete", message, logs=logs, start_time=started, finish_time=when
            )
        text = f"TrainJob failed:\n\t{reason} - {message}"
        phase = Phase.PERMANENT_FAILURE if reason in PERMANENT_TRAINJOB_REASONS else Phase.RETRYABLE_FAILURE
        return PhaseInfo(phase, reason or "Failed", text, reason or "Failed", ErrorKind.USER, logs, started, when)
    suspended = conditions.get("Suspended", (None, "", "", ""))
    spec_suspend = job.spec.get("suspend")
    if suspended[1] == "True" or spec_suspend is True:
        text = suspended[3] or "TrainJob is suspended"
        return PhaseInfo(
            Phase.QUEUED, "Suspended", f"{text}: waiting to be resumed (e.g. admitted by Kueue)", logs=logs
        )
    jobs = _jobs_status(job)
    active = sum(_int(f"jobsStatus[{i}].active", s.get("active")) for i, s in enumerate(jobs))
    ready = sum(_int(f"jobsStatus[{i}].ready", s.get("ready")) for i, s in enumerate(jobs))
    counts = "; ".join(
        f"{_string('name', s.get('name'))}: {_int('ready', s.get('ready'))} ready, "
        f"{_int('active', s.get('active'))} active, "
        f"{_int('succeeded', s.get('succeeded'))} succeeded, {_int('failed', s.get('failed'))} failed"
        for s in jobs
    )
    progress = _progress(job)
    message = " | ".join(p for p in (progress, counts) if p)
    if not jobs or (active == 0 and ready == 0 and not any(_int("succeeded", s.get("succeeded")) for s in jobs)):
        return PhaseInfo(Phase.QUEUED, "JobCreated", message, logs=logs, start_time=started)
    return PhaseInfo(Phase.RUNNING, "Running", message, logs=logs, start_time=started)


def _conditions(job: _Obj) -> dict[str, tuple[Optional[datetime], str, str, str]]:
    """type -> (lastTransitionTime, status, reason, message); ``_current_condition`` checks the shapes."""
    _current_condition(job)
    out = {}
    for i, c in enumerate(job.status.get("conditions") or []):
        path = f"TrainJob.status.conditions[{i}]"
        out[_string(f"{path}.type", c.get("type"))] = (
            _time(f"{path}.lastTransitionTime", c.get("lastTransitionTime")),
            _string(f"{path}.status", c.get("status")),
            _string(f"{path}.reason", c.get("reason")),
            _string(f"{path}.message", c.get("message")),
        )
    return out
