"""Restart, clean-pod and run policies shared by PyTorchJob, TFJob and MPIJob.

One definition for all three job kinds (the official plugins keep three diverging copies).
Enum values are the flyteidl enum numbers, so ``policy.value`` is what goes on the wire.

>>> RunPolicy(clean_pod_policy="all", backoff_limit=3).clean_pod_policy
<CleanPodPolicy.ALL: 2>
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Optional

from .wire.fields import check_optional_bool, check_optional_int, check_optional_str, coerce_enum
from .wire.k8ssyntax import check_dns_label

__all__ = ["RestartPolicy", "CleanPodPolicy", "SchedulingPolicy", "KueueQueue", "RunPolicy"]


class RestartPolicy(enum.Enum):
    """What the operator does when a replica's pod exits (flyteidl ``RestartPolicy``)."""

    NEVER = 0
    FAILURE = 1  # the official plugins' name for the operator's OnFailure
    ALWAYS = 2

    @property
    def k8s_name(self) -> str:
        return _RESTART_K8S[self]

    @classmethod
    def coerce(cls, field: str, value: object) -> RestartPolicy:
        # "on_failure" is the operator's spelling; accept it next to the official "FAILURE".
        if isinstance(value, str) and value.strip().upper().replace("-", "_") in ("ON_FAILURE", "ONFAILURE"):
            return cls.FAILURE
        return coerce_enum(field, cls, value)


_RESTART_K8S = {RestartPolicy.NEVER: "Never", RestartPolicy.FAILURE: "OnFailure", RestartPolicy.ALWAYS: "Always"}


class CleanPodPolicy(enum.Enum):
    """Which pods the operator deletes when the job finishes (flyteidl ``CleanPodPolicy``)."""

    NONE = 0
    RUNNING = 1
    ALL = 2

    @property
    def k8s_name(self) -> str:
        return self.name.capitalize()


@dataclass(frozen=True)
class SchedulingPolicy:
    """Gang scheduling for Volcano or the scheduler-plugins coscheduler (``runPolicy.schedulingPolicy``).

    Not in the IDL: carried under the ``kubejobs`` extension key, honoured by this project's backend.
    """

    min_available: Optional[int] = None
    queue: Optional[str] = None
    priority_class: Optional[str] = None
    schedule_timeout_seconds: Optional[int] = None

    def __post_init__(self) -> None:
        check_optional_int("SchedulingPolicy.min_available", self.min_available, minimum=1)
        check_optional_str("SchedulingPolicy.queue", self.queue)
        check_optional_str("SchedulingPolicy.priority_class", self.priority_class)
        check_optional_int("SchedulingPolicy.schedule_timeout_seconds", self.schedule_timeout_seconds, minimum=1)

    def to_k8s(self) -> dict[str, object]:
        """The operator's ``schedulingPolicy`` object, unset fields left out."""
        fields = {
            "minAvailable": self.min_available,
            "queue": self.queue,
            "priorityClass": self.priority_class,
            "scheduleTimeoutSeconds": self.schedule_timeout_seconds,
        }
        return {k: v for k, v in fields.items() if v is not None}


@dataclass(frozen=True)
class KueueQueue:
    """Kueue admission: the LocalQueue the job waits in and, optionally, its WorkloadPriorityClass.

    The backend writes them as the ``kueue.x-k8s.io/queue-name`` and ``kueue.x-k8s.io/priority-class``
    labels of the job object and creates the job suspended, for Kueue to resume once it admits it. Not in
    the IDL: carried under the ``kubejobs`` extension key (stock Flyte backends run the job unqueued).

    >>> KueueQueue("team-a", priority_class="high").to_k8s()
    {'name': 'team-a', 'priorityClass': 'high'}
    """

    name: str
    priority_class: Optional[str] = None

    def __post_init__(self) -> None:
        check_dns_label("KueueQueue.name", self.name)
        if self.priority_class is not None:
            check_dns_label("KueueQueue.priority_class", self.priority_class)

    def to_k8s(self) -> dict[str, str]:
        """The extension's ``queue`` section."""
        return {"name": self.name, **({"priorityClass": self.priority_class} if self.priority_class else {})}


@dataclass(frozen=True)
class RunPolicy:
    """Job-level policy of a Training Operator job.

    The first four fields are those of the official plugins and the IDL. ``suspend`` and
    ``scheduling_policy`` (and a ``backoff_limit`` of 0, which proto3 cannot express) travel under the
    ``kubejobs`` extension key: stock Flyte backends ignore them, this project's backend honours them.

    >>> RunPolicy(backoff_limit=0).backoff_limit
    0
    """

    clean_pod_policy: Optional[CleanPodPolicy] = None
    ttl_seconds_after_finished: Optional[int] = None
    active_deadline_seconds: Optional[int] = None
    backoff_limit: Optional[int] = None
    suspend: Optional[bool] = None
    scheduling_policy: Optional[SchedulingPolicy] = None
    #: Kueue's LocalQueue (and priority class) of the job; see ``KueueQueue``.
    queue: Optional[KueueQueue] = None

    def __post_init__(self) -> None:
        if self.clean_pod_policy is not None:
            object.__setattr__(
                self,
                "clean_pod_policy",
                coerce_enum("RunPolicy.clean_pod_policy", CleanPodPolicy, self.clean_pod_policy),
            )
        check_optional_int("RunPolicy.ttl_seconds_after_finished", self.ttl_seconds_after_finished)
        check_optional_int("RunPolicy.active_deadline_seconds", self.active_deadline_seconds)
        check_optional_int("RunPolicy.backoff_limit", self.backoff_limit)
        check_optional_bool("RunPolicy.suspend", self.suspend)
        if self.scheduling_policy is not None and not isinstance(self.scheduling_policy, SchedulingPolicy):
            raise TypeError(f"RunPolicy.scheduling_policy must be a SchedulingPolicy, got {self.scheduling_policy!r}")
        if self.queue is not None and not isinstance(self.queue, KueueQueue):
            raise TypeError(f"RunPolicy.queue must be a KueueQueue, got {self.queue!r}")
