"""``plugins.trainjob``: which task types become Kubeflow Trainer v2 TrainJobs, for which Trainer release,
and which (Cluster)TrainingRuntime each one references::

    plugins:
      trainjob:
        task-types: [pytorch, mpi]      # the others stay kubeflow.org/v1 kinds (the default: none); or: auto
        version: v2.3.0                 # the Trainer release the cluster runs
        runtimes:
          pytorch: torch-distributed    # PyTorch, and Elastic unless `elastic` is given
          mpi: {name: mpi-distributed, kind: TrainingRuntime}

``task-types: auto`` lets the connector decide per task type from the API groups the cluster serves
(``TrainJobConfig.resolve``): a task type whose ``kubeflow.org/v1`` kind is served stays on it (clusters
running the Training Operator keep working as before); one whose v1 kind is not served but TrainJob is
(``trainjobs.trainer.kubeflow.org/v1alpha1``) and that has a runtime configured becomes a TrainJob; any other
stays on the v1 kind, whose create then fails naming the missing resource.

Only releases that take ``spec.runtimePatches`` are supported (v2.2.x, v2.3.x): v2.0 and v2.1 had
``podSpecOverrides`` / ``podTemplateOverrides`` instead, which v2.2 removed (kubeflow/trainer#3309).

>>> TrainJobConfig.from_section({"version": "v2.2.1"}).release.minor
2
>>> TrainJobConfig(version="v2.1.0")
Traceback (most recent call last):
...
ValueError: plugins.trainjob.version 'v2.1.0' is not supported: Trainer v2.0 and v2.1 take podSpecOverrides/...
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

from ..wire.kinds import KINDS, TRAINJOB, TRAINJOB_TASK_TYPES

__all__ = [
    "DEFAULT_MANAGER",
    "DEFAULT_TRAINER_VERSION",
    "RUNTIME_KINDS",
    "TRAINJOB_TASK_TYPES",
    "RuntimeRef",
    "TrainerRelease",
    "TrainJobConfig",
]

TRAINER_GROUP = "trainer.kubeflow.org"
RUNTIME_KINDS = ("ClusterTrainingRuntime", "TrainingRuntime")
DEFAULT_TRAINER_VERSION = "v2.3.0"
#: ``runtimePatches[].manager`` of the entry this backend writes (a domain-prefixed path, as the webhook wants).
DEFAULT_MANAGER = "kubejobs.flyte.org/backend"

_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


@dataclass(frozen=True)
class TrainerRelease:
    """What differs between the supported Trainer minor releases (read from their ``trainjob_types.go``)."""

    minor: int
    #: ``trainer.command[]`` / ``trainer.args[]`` item ``maxLength``.
    max_arg_length: int
    #: ``PodSpecPatch.terminationGracePeriodSeconds`` exists (added in v2.3).
    patches_termination_grace: bool


_RELEASES = {
    2: TrainerRelease(2, max_arg_length=65536, patches_termination_grace=False),
    3: TrainerRelease(3, max_arg_length=1048576, patches_termination_grace=True),
}


def _release(name: str, version: object) -> TrainerRelease:
    if not isinstance(version, str):
        raise TypeError(f"{name} must be a version string like 'v2.3.0', got {version!r}")
    match = _VERSION.match(version.strip())
    if match is None:
        raise ValueError(f"{name} must be a version like 'v2.3.0', got {version!r}")
    major, minor = int(match.group(1)), int(match.group(2))
    supported = ", ".join(f"v2.{m}.x" for m in sorted(_RELEASES))
    if major == 2 and minor in (0, 1):
        raise ValueError(
            f"{name} {version!r} is not supported: Trainer v2.0 and v2.1 take podSpecOverrides/podTemplateOverrides, "
            "which v2.2 replaced with runtimePatches (kubeflow/trainer#3309); this backend writes runtimePatches "
            f"and supports {supported}"
        )
    if major != 2 or minor not in _RELEASES:
        raise ValueError(f"{name} {version!r} is not a Trainer release this backend was checked against ({supported})")
    return _RELEASES[minor]


@dataclass(frozen=True)
class RuntimeRef:
    """``spec.runtimeRef``: a ClusterTrainingRuntime (cluster-wide) or a TrainingRuntime (in the job's namespace)."""

    name: str
    kind: str = "ClusterTrainingRuntime"

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or len(self.name) > 253 or not _DNS1123_SUBDOMAIN.match(self.name):
            raise ValueError(f"RuntimeRef.name must be a runtime's name (a DNS-1123 subdomain), got {self.name!r}")
        if self.kind not in RUNTIME_KINDS:
            raise ValueError(f"RuntimeRef.kind must be one of {list(RUNTIME_KINDS)}, got {self.kind!r}")

    @classmethod
    def parse(cls, name: str, value: object) -> RuntimeRef:
        """From a runtime name or a ``{name, kind}`` mapping."""
        if isinstance(value, str):
            return cls(value)
        if not isinstance(value, Mapping):
            raise TypeError(f"{name} must be a runtime name or {{name, kind}}, got {value!r}")
        unknown = sorted(set(value) - {"name", "kind"})
        if unknown:
            raise ValueError(f"{name} has unknown keys {unknown}; known: ['kind', 'name']")
        try:
            return cls(value.get("name"), value.get("kind", "ClusterTrainingRuntime"))  # type: ignore[arg-type]
        except ValueError as e:
            raise ValueError(f"{name}: {e}") from None

    def to_wire(self) -> dict[str, str]:
        return {"name": self.name, "apiGroup": TRAINER_GROUP, "kind": self.kind}


@dataclass(frozen=True)
class TrainJobConfig:
    """The TrainJob target. ``task_types`` empty (the default) keeps every task on the v1 kinds."""

    task_types: frozenset[str] = frozenset()
    #: ``task-types: auto``: ``task_types`` is decided by ``resolve`` from what the cluster serves.
    auto: bool = False
    version: str = DEFAULT_TRAINER_VERSION
    pytorch: Optional[RuntimeRef] = field(default_factory=lambda: RuntimeRef("torch-distributed"))
    #: Elastic tasks; None: ``pytorch``'s runtime.
    elastic: Optional[RuntimeRef] = None
    #: No default: upstream ships no plain MPI runtime (deepspeed-/mlx-distributed run their own image on the nodes).
    mpi: Optional[RuntimeRef] = None
    manager: str = DEFAULT_MANAGER

    def __post_init__(self) -> None:
        types = frozenset(self.task_types)
        for task_type in types:
            if task_type not in TRAINJOB_TASK_TYPES:
                why = (
                    "TensorFlow has no Trainer v2 runtime upstream (kubeflow/trainer#2699)"
                    if task_type == "tensorflow"
                    else f"TrainJobs run {list(TRAINJOB_TASK_TYPES)}"
                )
                raise ValueError(f"TrainJobConfig.task_types cannot include {task_type!r}: {why}")
        object.__setattr__(self, "task_types", types)
        if not isinstance(self.auto, bool):
            raise TypeError(f"TrainJobConfig.auto must be true or false, got {self.auto!r}")
        if self.auto and types:
            raise ValueError("TrainJobConfig: give task_types or auto, not both")
        _release("plugins.trainjob.version", self.version)
        for attr in ("pytorch", "elastic", "mpi"):
            value = getattr(self, attr)
            if value is not None and not isinstance(value, RuntimeRef):
                raise TypeError(f"TrainJobConfig.{attr} must be a RuntimeRef or None, got {value!r}")
        segments = self.manager.split("/", 1) if isinstance(self.manager, str) else []
        if len(segments) != 2 or not segments[1] or not _DNS1123_SUBDOMAIN.match(segments[0]):
            raise ValueError(
                f"TrainJobConfig.manager must be a domain-prefixed path like 'acme.io/foo', got {self.manager!r}"
            )

    def runtime_for(self, task_type: str) -> Optional[RuntimeRef]:
        """The runtime a task type's TrainJobs reference (Elastic's falls back to ``pytorch``'s at build)."""
        return {"pytorch": self.pytorch, "mpi": self.mpi}.get(task_type)

    def resolve(self, served: Callable[[str, str, str], bool]) -> TrainJobConfig:
        """This configuration with ``auto`` decided: ``served(group, version, plural)`` says whether the
        cluster serves a resource (the connector asks API discovery once). Without ``auto``: unchanged.

        >>> cfg = TrainJobConfig(auto=True, mpi=RuntimeRef("mpi-distributed"))
        >>> sorted(cfg.resolve(lambda g, v, p: g == "trainer.kubeflow.org").task_types)
        ['mpi', 'pytorch']
        >>> sorted(cfg.resolve(lambda g, v, p: True).task_types)
        []
        """
        if not self.auto:
            return self
        trainjob = served(TRAINJOB.group, TRAINJOB.version, TRAINJOB.plural)
        chosen = frozenset(
            t
            for t in TRAINJOB_TASK_TYPES
            if trainjob
            and self.runtime_for(t) is not None
            and not served(KINDS[t].group, KINDS[t].version, KINDS[t].plural)
        )
        return dataclasses.replace(self, task_types=chosen, auto=False)

    @property
    def release(self) -> TrainerRelease:
        return _release("plugins.trainjob.version", self.version)

    @classmethod
    def from_section(cls, section: Mapping[str, Any]) -> TrainJobConfig:
        p = "plugins.trainjob."
        if not isinstance(section, Mapping):
            raise TypeError(f"plugins.trainjob must be a mapping, got {section!r}")
        unknown = sorted(set(section) - {"task-types", "version", "runtimes", "manager"})
        if unknown:
            raise ValueError(
                f"plugins.trainjob has unknown keys {unknown}; known: ['manager', 'runtimes', 'task-types', 'version']"
            )
        kw: dict[str, Any] = {}
        types = section.get("task-types")
        if types == "auto":
            kw["auto"] = True
        elif types is not None:
            if not isinstance(types, list) or not all(isinstance(t, str) for t in types):
                raise TypeError(f"{p}task-types must be a list of task types or 'auto', got {types!r}")
            kw["task_types"] = frozenset(types)
        if section.get("version") is not None:
            kw["version"] = section["version"]
        if section.get("manager") is not None:
            kw["manager"] = section["manager"]
        runtimes = section.get("runtimes") or {}
        if not isinstance(runtimes, Mapping):
            raise TypeError(f"{p}runtimes must be a mapping, got {runtimes!r}")
        unknown = sorted(set(runtimes) - {"pytorch", "elastic", "mpi"})
        if unknown:
            raise ValueError(f"{p}runtimes has unknown keys {unknown}; known: ['elastic', 'mpi', 'pytorch']")
        for key, value in runtimes.items():
            kw[key] = None if value is None else RuntimeRef.parse(f"{p}runtimes.{key}", value)
        try:
            return cls(**kw)
        except ValueError as e:
            raise ValueError(str(e).replace("TrainJobConfig.", p)) from None
