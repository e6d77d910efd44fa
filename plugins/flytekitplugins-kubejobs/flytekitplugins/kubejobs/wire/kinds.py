"""THE table of the Kubernetes job kinds this project builds, and the Flyte task types behind them.

Every per-kind fact the backend, the schema rules, the connector, the CLI and RBAC need is here; a new
kind is one entry plus its genuinely new code (its spec builder and its operator's rules).
``tests/kubejobs/core/test_kinds_table.py`` fails when a module keeps its own list of kinds.

>>> KINDS["pytorch"].kind, KINDS["ray"].plural, KINDS["tensorflow"].replica_specs_key
('PyTorchJob', 'rayjobs', 'tfReplicaSpecs')
>>> KINDS["tensorflow"].pod_name("train", "PS", 1)
'train-ps-1'
>>> kind_of("MPIJob").task_type
'mpi'
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = [
    "ENGINE_KINDS",
    "KINDS",
    "MPIJOB_V2BETA1",
    "TRAINJOB",
    "TRAINJOB_TASK_TYPES",
    "JobKind",
    "LinkedRole",
    "Role",
    "StatusStyle",
    "kind_of",
    "kind_for_resource",
]


class StatusStyle(enum.Enum):
    """How an operator reports progress, which picks the status mapping."""

    #: Training Operator: ``status.conditions`` (Created, Running, Succeeded, Failed...) and ``startTime``.
    CONDITIONS = "conditions"
    #: KubeRay: ``status.jobDeploymentStatus`` and ``status.jobStatus``.
    JOB_DEPLOYMENT = "job-deployment"


@dataclass(frozen=True)
class Role:
    """One replica type of a Training Operator job."""

    #: The operator's replica type, the key under the kind's replica-spec map (``"Worker"``).
    name: str
    #: The field of the flyteidl (task_type_version 1) message that carries it (``"worker_replicas"``).
    idl_field: str


@dataclass(frozen=True)
class LinkedRole:
    """A role whose pods get log links, in the order Flyte's Go plugin lists them."""

    role: str
    #: Appended to every link's display name (``"master"`` gives ``Kubernetes Logsmaster``).
    log_name: str = ""
    #: ``"each"``: one link per replica; ``"first-if-present"``: pod 0 when the role is in the spec;
    #: ``"first-if-replicas"``: pod 0 when the role has replicas.
    pods: str = "each"


@dataclass(frozen=True)
class JobKind:
    """One job kind: the Flyte task type, the Kubernetes resource that runs it and how its operator works."""

    task_type: str
    group: str
    version: str
    kind: str
    plural: str
    #: Longest object name the operator accepts (it derives service and pod names from it).
    max_name_length: int
    status: StatusStyle
    #: The container the operator runs and watches (the primary container is renamed to it).
    container: str
    #: The task_type_version values of the customs the backend reads.
    task_type_versions: tuple[int, ...]
    #: The spec key holding the replica specs (``""``: the kind has no replica-spec map).
    replica_specs_key: str = ""
    roles: tuple[Role, ...] = ()
    linked_roles: tuple[LinkedRole, ...] = ()
    #: Sections of the ``kubejobs`` extension key this kind honours (``wire.extension``); others are refused.
    extension_sections: frozenset[str] = frozenset()
    #: The connector lists the kind's pods for its log links (their names end in a random suffix): RBAC grants
    #: ``list`` on ``pods`` in the job namespaces (deploy/rbac.yaml).
    lists_pods: bool = False

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def schema_key(self) -> tuple[str, str, str]:
        """``(group, version, kind)``: how CRD schemas and operator rules are keyed."""
        return (self.group, self.version, self.kind)

    @property
    def rbac_resource(self) -> str:
        """The resource a Role grants (deploy/rbac.yaml)."""
        return self.plural

    @property
    def role_names(self) -> tuple[str, ...]:
        return tuple(r.name for r in self.roles)

    def role(self, name: str) -> Role:
        for role in self.roles:
            if role.name == name:
                return role
        raise KeyError(f"{self.kind} has no role {name!r}; it has {list(self.role_names)}")

    def pod_name(self, job_name: str, role: str, index: int) -> str:
        """The pod the operator creates for replica ``index`` of ``role``: ``<job>-<lower-case role>-<index>``."""
        return f"{job_name}-{role.lower()}-{index}"


def _training_operator(
    task_type: str,
    kind: str,
    plural: str,
    container: str,
    replica_specs_key: str,
    roles: tuple[Role, ...],
    linked_roles: tuple[LinkedRole, ...],
) -> JobKind:
    """A Training Operator v1 kind: shared group, version, name limit, status style and extension."""
    return JobKind(
        task_type,
        "kubeflow.org",
        "v1",
        kind,
        plural,
        63,
        StatusStyle.CONDITIONS,
        container=container,
        task_type_versions=(0, 1),
        replica_specs_key=replica_specs_key,
        roles=roles,
        linked_roles=linked_roles,
        extension_sections=frozenset({"replicaSpecs", "runPolicy", "queue"}),
    )


#: Flyte task type -> its job kind: THE table.
KINDS: dict[str, JobKind] = {
    k.task_type: k
    for k in (
        _training_operator(
            "pytorch",
            "PyTorchJob",
            "pytorchjobs",
            "pytorch",
            "pytorchReplicaSpecs",
            (Role("Master", "master_replicas"), Role("Worker", "worker_replicas")),
            # elastic jobs have no Master, so its link depends on the spec holding one
            (LinkedRole("Master", "master", "first-if-present"), LinkedRole("Worker")),
        ),
        _training_operator(
            "tensorflow",
            "TFJob",
            "tfjobs",
            "tensorflow",
            "tfReplicaSpecs",
            (
                Role("Chief", "chief_replicas"),
                Role("Worker", "worker_replicas"),
                Role("PS", "ps_replicas"),
                Role("Evaluator", "evaluator_replicas"),
            ),
            # Go links `-psReplica-N`, `-chiefReplica-0`, `-evaluatorReplica-0`, pods that never exist; the
            # links here use the operator's pod names.
            (
                LinkedRole("Worker"),
                LinkedRole("PS"),
                LinkedRole("Chief", pods="first-if-replicas"),
                LinkedRole("Evaluator"),
            ),
        ),
        _training_operator(
            "mpi",
            "MPIJob",
            "mpijobs",
            "mpi",
            "mpiReplicaSpecs",
            (Role("Launcher", "launcher_replicas"), Role("Worker", "worker_replicas")),
            (LinkedRole("Worker"),),
        ),
        # KubeRay appends "-raycluster-xxxxx" and pod suffixes; its webhook caps RayJob names at 47.
        JobKind(
            "ray",
            "ray.io",
            "v1",
            "RayJob",
            "rayjobs",
            47,
            StatusStyle.JOB_DEPLOYMENT,
            container="ray-head",
            task_type_versions=(0,),
            extension_sections=frozenset({"queue", "rayGroups", "rayJob"}),
        ),
    )
}


#: Kubeflow Trainer v2's TrainJob: a second target of the ``pytorch`` and ``mpi`` task types (the backend's
#: ``plugins.trainjob`` setting), not a task type's entry of KINDS. Its name limit leaves room for JobSet's pod
#: names (``<name>-launcher-0-99999-xxxxx`` within 63); ``node`` is the trainer container of every runtime.
TRAINJOB = JobKind(
    "",
    "trainer.kubeflow.org",
    "v1alpha1",
    "TrainJob",
    "trainjobs",
    40,
    StatusStyle.CONDITIONS,
    container="node",
    task_type_versions=(0, 1),
    lists_pods=True,
)
#: The task types a TrainJob can run (TensorFlow has no Trainer v2 runtime upstream; Ray is KubeRay's).
TRAINJOB_TASK_TYPES = ("pytorch", "mpi")

#: The mpi-operator's MPIJob (``kubeflow.org/v2beta1``): the second target of the ``mpi`` task type (the backend's
#: ``plugins.mpi.operator`` setting). Same group, kind and plural as the Training Operator's v1 MPIJob (one
#: cluster serves one of them). Its name limit keeps ``<name>-worker-<index>`` a DNS-1035 label (the operator
#: refuses the job otherwise); the launcher is a batch Job whose pod name ends in a random suffix.
MPIJOB_V2BETA1 = JobKind(
    "mpi",
    "kubeflow.org",
    "v2beta1",
    "MPIJob",
    "mpijobs",
    50,
    StatusStyle.CONDITIONS,
    container="mpi",
    task_type_versions=(0, 1),
    replica_specs_key="mpiReplicaSpecs",
    roles=(Role("Launcher", "launcher_replicas"), Role("Worker", "worker_replicas")),
    linked_roles=(LinkedRole("Worker"),),
    extension_sections=frozenset({"replicaSpecs", "runPolicy", "queue", "mpiJob"}),
    lists_pods=True,
)
#: The kinds that are an alternative target of a task type (the connector creates, reads and watches them too).
ENGINE_KINDS: tuple[JobKind, ...] = (TRAINJOB, MPIJOB_V2BETA1)


def kind_of(kind: str, api_version: str | None = None) -> JobKind:
    """The entry whose Kubernetes kind is ``kind`` (and apiVersion ``api_version`` when given: two entries are
    MPIJobs), KINDS first; ``KeyError`` naming the known kinds otherwise.

    >>> kind_of("MPIJob", "kubeflow.org/v2beta1").version
    'v2beta1'
    """
    known = (*KINDS.values(), *ENGINE_KINDS)
    for entry in known:
        if entry.kind == kind and api_version in (None, entry.api_version):
            return entry
    names = sorted({f"{k.api_version} {k.kind}" for k in known})
    raise KeyError(f"kind must be one of {names}, got {api_version!r:.100} {kind!r:.200}")


def kind_for_resource(group: str, plural: str, version: str | None = None) -> JobKind:
    """The entry served as ``<plural>.<group>`` (of ``version`` when given); ``KeyError`` otherwise."""
    for entry in (*KINDS.values(), *ENGINE_KINDS):
        if entry.group == group and entry.plural == plural and version in (None, entry.version):
            return entry
    raise KeyError(f"unknown resource {plural}.{group}")
