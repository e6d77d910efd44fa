"""``plugins.mpi``: which MPIJob the ``mpi`` task type becomes, and the mpi-operator's MPIJob v2beta1 spec::

    plugins:
      mpi:
        operator: v2beta1     # v1 (the default: the Training Operator's kubeflow.org/v1 MPIJob), v2beta1, or auto

``v2beta1`` is the mpi-operator's ``kubeflow.org/v2beta1`` MPIJob (kubeflow/mpi-operator v0.8): the launcher is a
batch Job that reaches the workers over SSH (``sshAuthMountPath``), which therefore run the image's entrypoint
(an SSH server) unless the worker role has a command. ``auto`` lets the connector decide from what the cluster
serves: v1 when ``mpijobs.kubeflow.org/v1`` is served, v2beta1 when ``v2beta1`` is (one cluster serves one of
them: the two CRDs share a name), v1 otherwise (its create then fails naming the missing resource).

The v2beta1 spec is the v1 one (roles, run policy, slots) plus the fields the operator defaults, written out so
the API server stores the object unchanged, and the ``kubejobs.mpiJob`` extension section.

>>> MpiOperatorConfig.from_section({"operator": "v2beta1"}).kind.api_version
'kubeflow.org/v2beta1'
>>> MpiOperatorConfig(operator="auto").resolve(lambda group, version, plural: version == "v2beta1").operator
'v2beta1'
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..wire.kinds import KINDS, MPIJOB_V2BETA1, JobKind
from .errors import BuildError

__all__ = ["MPI_OPERATORS", "MpiOperatorConfig", "v2beta1_spec"]

MPI_OPERATORS = ("v1", "v2beta1", "auto")
#: What the mpi-operator defaults (``SetDefaults_MPIJob`` and the CRD's defaults), written by the backend.
_DEFAULTS = {
    "runLauncherAsWorker": False,
    "sshAuthMountPath": "/root/.ssh",
    "launcherCreationPolicy": "AtStartup",
    "mpiImplementation": "OpenMPI",
}
#: ``ValidateMPIJob`` accepts these replica restart policies only.
_RESTART_POLICIES = ("Never", "OnFailure")


@dataclass(frozen=True)
class MpiOperatorConfig:
    """The ``mpi`` task type's target: ``v1`` (default), ``v2beta1`` or ``auto`` (decided by ``resolve``)."""

    operator: str = "v1"

    def __post_init__(self) -> None:
        if self.operator not in MPI_OPERATORS:
            raise ValueError(f"plugins.mpi.operator must be one of {list(MPI_OPERATORS)}, got {self.operator!r:.200}")

    @property
    def kind(self) -> JobKind:
        """The kind ``mpi`` tasks are built as (``auto`` unresolved: the v1 MPIJob)."""
        return MPIJOB_V2BETA1 if self.operator == "v2beta1" else KINDS["mpi"]

    def resolve(self, served: Callable[[str, str, str], bool]) -> MpiOperatorConfig:
        """``auto`` decided by ``served(group, version, plural)`` (the cluster's API discovery); else unchanged."""
        if self.operator != "auto":
            return self
        v1, v2 = KINDS["mpi"], MPIJOB_V2BETA1
        if not served(v1.group, v1.version, v1.plural) and served(v2.group, v2.version, v2.plural):
            return dataclasses.replace(self, operator="v2beta1")
        return dataclasses.replace(self, operator="v1")

    @classmethod
    def from_section(cls, section: Mapping[str, Any]) -> MpiOperatorConfig:
        if not isinstance(section, Mapping):
            raise TypeError(f"plugins.mpi must be a mapping, got {section!r:.200}")
        unknown = sorted(set(section) - {"operator"})
        if unknown:
            raise ValueError(f"plugins.mpi has unknown keys {unknown}; known: ['operator']")
        return cls(**({"operator": section["operator"]} if section.get("operator") is not None else {}))


def v2beta1_spec(spec: Mapping[str, Any], mpi_job: Mapping[str, Any], worker_command: bool) -> dict[str, Any]:
    """The MPIJob v2beta1 spec of the v1 MPIJob ``spec`` the builder made, with the ``kubejobs.mpiJob`` settings.

    ``worker_command``: the worker role has a command of its own; without one the worker container gets no
    command and no args (the task's command is the launcher's ``mpirun`` line), so it runs its image's SSH server.
    """
    replica_specs = {role: dict(rspec) for role, rspec in spec[MPIJOB_V2BETA1.replica_specs_key].items()}
    for role, rspec in replica_specs.items():
        restart = rspec.get("restartPolicy")
        if restart not in _RESTART_POLICIES:
            raise BuildError(
                f"{role} restart policy {restart!r} cannot run on the mpi-operator's MPIJob v2beta1: it accepts "
                f"{list(_RESTART_POLICIES)} only"
            )
    if not worker_command:
        worker = replica_specs["Worker"]
        template = {**worker["template"], "spec": dict(worker["template"]["spec"])}
        template["spec"]["containers"] = [
            {k: v for k, v in c.items() if k not in ("command", "args")}
            if c.get("name") == MPIJOB_V2BETA1.container
            else c
            for c in template["spec"]["containers"]
        ]
        replica_specs["Worker"] = {**worker, "template": template}
    return {
        **{key: mpi_job.get(key, default) for key, default in _DEFAULTS.items()},
        "slotsPerWorker": spec["slotsPerWorker"],
        "runPolicy": {"cleanPodPolicy": "None", **spec["runPolicy"]},
        MPIJOB_V2BETA1.replica_specs_key: replica_specs,
    }
