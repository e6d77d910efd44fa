"""Kueue: which LocalQueue a job waits in, written where Kueue reads it, and the job created suspended.

A task names its queue in the extension key (``kubejobs.queue``: ``RunPolicy(queue=KueueQueue(...))``); else
the first rule of ``plugins.kueue.queues`` matching the job's namespace and task type does::

    plugins:
      kueue:
        queues:
          - {namespace: team-a, task-type: pytorch, queue: team-a-gpu, priority-class: high}
          - {namespace: team-a, queue: team-a}          # any task type
          - {queue: shared}                             # any namespace
        multikueue: false                               # true: spec.managedBy for MultiKueue dispatch

A queued job gets the ``kueue.x-k8s.io/queue-name`` label (and ``kueue.x-k8s.io/priority-class``) on the
job object itself, and is created suspended (``runPolicy.suspend`` of a kubeflow.org/v1 kind,
``spec.suspend`` of a RayJob or TrainJob) so no pod starts before Kueue admits it; an explicit
``suspend: false`` on a queued job is a ``BuildError``, and so is a queued kubeflow.org/v1 MPIJob (Kueue's
MPIJob integration is the mpi-operator's v2beta1 one: the job would never be resumed). With ``multikueue``,
``managedBy`` is ``kueue.x-k8s.io/multikueue`` (``runPolicy.managedBy`` of the v1 kinds, ``spec.managedBy``
of the others).

>>> cfg = KueueConfig.from_section({"queues": [{"namespace": "a", "queue": "qa"}, {"queue": "shared"}]})
>>> cfg.queue_for("a", "pytorch").name, cfg.queue_for("b", "ray").name
('qa', 'shared')
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional

from ..wire.k8ssyntax import check_dns_label
from ..wire.kinds import KINDS, JobKind, kind_of
from .errors import BuildError

__all__ = [
    "MULTIKUEUE",
    "PRIORITY_LABEL",
    "QUEUE_LABEL",
    "KueueConfig",
    "Queue",
    "QueueRule",
    "apply_queue",
    "queued_message",
    "task_queue",
]

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
#: ``managedBy`` of a job MultiKueue dispatches to a worker cluster (every kind here accepts it).
MULTIKUEUE = "kueue.x-k8s.io/multikueue"


@dataclass(frozen=True)
class Queue:
    """A LocalQueue and an optional WorkloadPriorityClass, read from the extension or ``plugins.kueue`` (the
    backend's side of ``policies.KueueQueue``, checked again: the backend trusts no custom)."""

    name: str
    priority_class: Optional[str] = None


@dataclass(frozen=True)
class QueueRule:
    """``plugins.kueue.queues[]``: ``queue`` for jobs in ``namespace`` of ``task_type`` (None: any)."""

    queue: Queue
    namespace: Optional[str] = None
    task_type: Optional[str] = None

    def matches(self, namespace: str, task_type: str) -> bool:
        return self.namespace in (None, namespace) and self.task_type in (None, task_type)


@dataclass(frozen=True)
class KueueConfig:
    """``plugins.kueue`` (no rules: only tasks that name a queue are queued)."""

    queues: tuple[QueueRule, ...] = ()
    multikueue: bool = False

    def queue_for(self, namespace: str, task_type: str) -> Optional[Queue]:
        """The queue of the first rule matching, or None."""
        return next((r.queue for r in self.queues if r.matches(namespace, task_type)), None)

    @classmethod
    def from_section(cls, section: Mapping[str, Any]) -> KueueConfig:
        p = "plugins.kueue"
        unknown = sorted(set(section) - {"queues", "multikueue"})
        if unknown:
            raise ValueError(f"{p} has unknown keys {unknown}; known: ['multikueue', 'queues']")
        multikueue = section.get("multikueue", False)
        if not isinstance(multikueue, bool):
            raise TypeError(f"{p}.multikueue must be true or false, got {multikueue!r}")
        rules = section.get("queues") or []
        if not isinstance(rules, list):
            raise TypeError(f"{p}.queues must be a list of rules, got {rules!r}")
        parsed = []
        for i, rule in enumerate(rules):
            where = f"{p}.queues[{i}]"
            if not isinstance(rule, Mapping):
                raise TypeError(f"{where} must be a mapping, got {rule!r}")
            known = {"namespace", "task-type", "queue", "priority-class"}
            if set(rule) - known:
                raise ValueError(f"{where} has unknown keys {sorted(set(rule) - known)}; known: {sorted(known)}")
            task_type = rule.get("task-type")
            if task_type is not None and task_type not in KINDS:
                raise ValueError(f"{where}.task-type must be one of {sorted(KINDS)}, got {task_type!r}")
            namespace = rule.get("namespace")
            if namespace is not None:
                check_dns_label(f"{where}.namespace", namespace)
            name = check_dns_label(f"{where}.queue", rule.get("queue"))
            priority = rule.get("priority-class")
            if priority is not None:
                check_dns_label(f"{where}.priority-class", priority)
            queue = Queue(name, priority)
            parsed.append(QueueRule(queue, namespace, task_type))
        return cls(tuple(parsed), multikueue)


def apply_queue(
    obj: dict[str, Any], task_type: str, task_queue: Optional[Mapping[str, str]], config: KueueConfig
) -> None:
    """Queue ``obj`` (a built job) as the task's extension (``task_queue``, checked) or ``config`` says."""
    namespace = obj["metadata"].get("namespace", "")
    queue = (
        Queue(task_queue["name"], task_queue.get("priorityClass"))
        if task_queue is not None
        else config.queue_for(namespace, task_type)
    )
    if queue is None:
        return
    kind = kind_of(obj["kind"], obj["apiVersion"])
    if kind is KINDS["mpi"]:
        raise BuildError(
            f"a kubeflow.org/v1 {kind.kind} cannot be queued in Kueue (LocalQueue {queue.name!r}): Kueue's MPIJob "
            "integration is the mpi-operator's kubeflow.org/v2beta1 MPIJob, so it would stay suspended; run mpi "
            "tasks as TrainJobs (plugins.trainjob) or as MPIJob v2beta1 (plugins.mpi.operator) to queue them"
        )
    labels = obj["metadata"].setdefault("labels", {})
    labels[QUEUE_LABEL] = queue.name
    if queue.priority_class:
        labels[PRIORITY_LABEL] = queue.priority_class
    # The v1 kinds keep suspend and managedBy in runPolicy; RayJob and TrainJob in the spec.
    v1 = bool(kind.replica_specs_key)
    policy = obj["spec"].setdefault("runPolicy", {}) if v1 else obj["spec"]
    where = "runPolicy.suspend" if v1 else "spec.suspend"
    if policy.get("suspend") is False:
        raise BuildError(
            f"{where} is false, but the job is queued in Kueue LocalQueue {queue.name!r}: a queued job is created "
            "suspended and Kueue resumes it when it admits it"
        )
    policy["suspend"] = True
    if config.multikueue:
        policy["managedBy"] = MULTIKUEUE


def task_queue(template: Any, kind: JobKind) -> Optional[dict[str, str]]:
    """The checked ``kubejobs.queue`` section of the task's custom, or None."""
    from .decode import custom_dict
    from .extension import parse_extension

    return parse_extension(custom_dict(template), kind).get("queue")


def queued_message(obj: Mapping[str, Any], message: str) -> str:
    """The QUEUED message of a job Kueue manages (says it waits for admission), else ``message``."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    queue = labels.get(QUEUE_LABEL) if isinstance(labels, Mapping) else None
    if not isinstance(queue, str) or not queue:
        return message
    text = f"waiting for Kueue to admit it (LocalQueue {queue})"
    return f"{text}: {message}" if message else text
