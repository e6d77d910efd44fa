"""Training Operator rules that no CRD schema encodes (training-operator v1.9.0 webhooks and controller,
mpi-operator v0.8.0 for MPIJob v2beta1).

The webhooks see the manifest before defaulting, so "explicitly 1" means the field must be written.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..wire.kinds import KINDS, MPIJOB_V2BETA1
from .problems import describe_value
from .rules_common import Path, Report, as_dict, check_metadata, check_one_of, check_pod_template, is_int

__all__ = [
    "CLEAN_POD_POLICIES",
    "KUBEFLOW_RULES",
    "LAUNCHER_CREATION_POLICIES",
    "MANAGED_BY",
    "MPI_IMPLEMENTATIONS",
    "MPI_OPERATOR_MANAGED_BY",
    "REPLICA_RESTART_POLICIES",
]

REPLICA_RESTART_POLICIES = ("Always", "OnFailure", "Never", "ExitCode")
CLEAN_POD_POLICIES = ("None", "Running", "All", "")
MANAGED_BY = ("kubeflow.org/training-operator", "kueue.x-k8s.io/multikueue")
RDZV_BACKENDS = ("c10d", "etcd", "etcd-v2")
NPROC_WORDS = ("auto", "cpu", "gpu")
_PYTORCH, _TF, _MPI, _MPI_V2 = KINDS["pytorch"], KINDS["tensorflow"], KINDS["mpi"], MPIJOB_V2BETA1
#: MPIJob v2beta1 (mpi-operator v0.8.0): when the launcher starts, which MPI the hostfile is written for, and
#: who reconciles the job.
LAUNCHER_CREATION_POLICIES = ("AtStartup", "WaitForWorkersReady")
MPI_IMPLEMENTATIONS = ("OpenMPI", "Intel", "MPICH")
MPI_OPERATOR_MANAGED_BY = ("kubeflow.org/mpi-operator", "kueue.x-k8s.io/multikueue")


def _replica_specs(report: Report, spec: Mapping[str, Any], field: str) -> Mapping[str, Any]:
    specs = spec.get(field)
    if not isinstance(specs, Mapping) or not specs:
        report.add(("spec", field), "required: at least one replica spec")
        return {}
    return specs


def _check_run_policy(report: Report, spec: Mapping[str, Any]) -> None:
    policy = as_dict(spec.get("runPolicy"))
    path = ("spec", "runPolicy")
    check_one_of(report, (*path, "cleanPodPolicy"), policy.get("cleanPodPolicy"), CLEAN_POD_POLICIES)
    check_one_of(report, (*path, "managedBy"), policy.get("managedBy"), MANAGED_BY)
    for field in ("ttlSecondsAfterFinished", "activeDeadlineSeconds", "backoffLimit"):
        value = policy.get(field)
        if is_int(value) and value < 0:
            report.add((*path, field), f"must be >= 0, got {value}")


def _check_replicas(report: Report, path: tuple[Any, ...], rspec: Mapping[str, Any], *, exactly_one: bool) -> None:
    """``exactly_one``: the field must be written and be 1; otherwise, when written, >= 1."""
    replicas = rspec.get("replicas")
    if exactly_one:
        if replicas != 1 or not is_int(replicas):
            shown = "missing" if replicas is None else f"got {describe_value(replicas)}"
            report.add((*path, "replicas"), f"must be set to 1 ({shown})")
    elif is_int(replicas) and replicas < 1:
        report.add((*path, "replicas"), f"must be >= 1 when set, got {replicas}")


def _check_replica_common(report: Report, path: tuple[Any, ...], rspec: object, container: str) -> Mapping[str, Any]:
    rspec = as_dict(rspec)
    check_one_of(report, (*path, "restartPolicy"), rspec.get("restartPolicy"), REPLICA_RESTART_POLICIES)
    check_pod_template(report, (*path, "template"), rspec.get("template"), main_container=container)
    return rspec


def check_pytorchjob(obj: Mapping[str, Any], report: Report) -> None:
    check_metadata(report, obj, dns1035=True, max_length=_PYTORCH.max_name_length)
    spec = as_dict(obj.get("spec"))
    _check_run_policy(report, spec)
    specs = _replica_specs(report, spec, _PYTORCH.replica_specs_key)
    for rtype, raw in specs.items():
        path = ("spec", _PYTORCH.replica_specs_key, rtype)
        if rtype not in _PYTORCH.role_names:
            report.add(
                path, f'unsupported replica type {describe_value(rtype)}: PyTorchJob has only "Master" and "Worker"'
            )
        rspec = _check_replica_common(report, path, raw, _PYTORCH.container)
        _check_replicas(report, path, rspec, exactly_one=rtype == "Master")
    nproc = spec.get("nprocPerNode")
    if isinstance(nproc, str) and nproc not in NPROC_WORDS and not (nproc.isdigit() and int(nproc) > 0):
        report.add(
            ("spec", "nprocPerNode"), f'must be "auto", "cpu", "gpu" or a positive integer, got {describe_value(nproc)}'
        )
    elastic = spec.get("elasticPolicy")
    if isinstance(elastic, Mapping):
        _check_elastic(report, spec, elastic, specs)


def _check_elastic(
    report: Report, spec: Mapping[str, Any], elastic: Mapping[str, Any], specs: Mapping[str, Any]
) -> None:
    path = ("spec", "elasticPolicy")
    if specs and "Worker" not in specs:
        report.add(("spec", _PYTORCH.replica_specs_key, "Worker"), "required when elasticPolicy is set")
    if elastic.get("nProcPerNode") is not None and spec.get("nprocPerNode") is not None:
        report.add((*path, "nProcPerNode"), "deprecated; cannot be set together with spec.nprocPerNode (use only that)")
    check_one_of(report, (*path, "rdzvBackend"), elastic.get("rdzvBackend"), RDZV_BACKENDS)
    low, high = elastic.get("minReplicas"), elastic.get("maxReplicas")
    if is_int(low) and low < 1:
        report.add((*path, "minReplicas"), f"must be >= 1, got {low}")
    if is_int(low) and is_int(high) and low > high:
        report.add((*path, "minReplicas"), f"minReplicas {low} is more than maxReplicas {high}")
    workers = as_dict(specs.get("Worker")).get("replicas")
    if is_int(workers) and ((is_int(low) and workers < low) or (is_int(high) and workers > high)):
        report.add(
            ("spec", _PYTORCH.replica_specs_key, "Worker", "replicas"),
            f"{workers} is outside elasticPolicy [minReplicas, maxReplicas] = [{low}, {high}]",
        )
    for field in ("maxRestarts", "rdzvPort", "nProcPerNode"):
        value = elastic.get(field)
        if is_int(value) and value < (1 if field != "maxRestarts" else 0):
            report.add((*path, field), f"must be >= {1 if field != 'maxRestarts' else 0}, got {value}")


def check_tfjob(obj: Mapping[str, Any], report: Report) -> None:
    check_metadata(report, obj, dns1035=True, max_length=_TF.max_name_length)
    spec = as_dict(obj.get("spec"))
    _check_run_policy(report, spec)
    check_one_of(report, ("spec", "successPolicy"), spec.get("successPolicy"), ("", "AllWorkers"))
    specs = _replica_specs(report, spec, _TF.replica_specs_key)
    chiefs = [t for t in specs if t in ("Chief", "Master")]
    if len(chiefs) > 1:
        report.add(("spec", _TF.replica_specs_key), 'at most one of "Chief" and "Master" (its legacy name) may be set')
    for rtype, raw in specs.items():
        path = ("spec", _TF.replica_specs_key, rtype)
        if rtype not in (*_TF.role_names, "Master"):  # Master: the legacy name of Chief
            report.add(
                path, f'unsupported replica type {describe_value(rtype)}: use "PS", "Worker", "Chief", "Evaluator"'
            )
        rspec = _check_replica_common(report, path, raw, _TF.container)
        replicas = rspec.get("replicas")
        if rtype in ("Chief", "Master") and is_int(replicas) and replicas != 1:
            report.add((*path, "replicas"), f"must be 1 (a TFJob has one chief), got {replicas}")
        elif is_int(replicas) and replicas < 0:
            report.add((*path, "replicas"), f"must be >= 0, got {replicas}")


def _mpi_replica_specs(report: Report, spec: Mapping[str, Any]) -> list[tuple[str, Path, Any]]:
    """``(replica type, path, spec)`` of an MPIJob's replicas (v1 and v2beta1), after reporting a missing
    Launcher and replica types other than Launcher and Worker."""
    specs = _replica_specs(report, spec, _MPI.replica_specs_key)
    if specs and "Launcher" not in specs:
        report.add(("spec", _MPI.replica_specs_key, "Launcher"), "required: an MPIJob needs a Launcher")
    out: list[tuple[str, Path, Any]] = []
    for rtype, raw in specs.items():
        path: Path = ("spec", _MPI.replica_specs_key, rtype)
        if rtype not in _MPI.role_names:
            report.add(
                path, f'unsupported replica type {describe_value(rtype)}: MPIJob has only "Launcher" and "Worker"'
            )
        out.append((rtype, path, raw))
    return out


def check_mpijob_v1(obj: Mapping[str, Any], report: Report) -> None:
    check_metadata(report, obj, dns1035=False, max_length=_MPI.max_name_length)
    spec = as_dict(obj.get("spec"))
    _check_run_policy(report, spec)
    check_one_of(report, ("spec", "cleanPodPolicy"), spec.get("cleanPodPolicy"), CLEAN_POD_POLICIES)
    main = (
        spec.get("mainContainer")
        if isinstance(spec.get("mainContainer"), str) and spec.get("mainContainer")
        else _MPI.container
    )
    for rtype, path, raw in _mpi_replica_specs(report, spec):
        rspec = _check_replica_common(report, path, raw, str(main))
        replicas = rspec.get("replicas")
        if rtype == "Launcher" and replicas is not None and replicas != 1:
            report.add((*path, "replicas"), f"must be 1, got {describe_value(replicas)}")
        elif is_int(replicas) and replicas < 0:
            report.add((*path, "replicas"), f"must be >= 0, got {replicas}")
    slots = spec.get("slotsPerWorker")
    if is_int(slots) and slots < 1:
        report.add(("spec", "slotsPerWorker"), f"must be >= 1, got {slots}")


def check_mpijob_v2beta1(obj: Mapping[str, Any], report: Report) -> None:
    """The mpi-operator's ``ValidateMPIJob`` (after its defaulting): it has no webhook, so a job it refuses
    would only get a warning event and never start."""
    check_metadata(report, obj, dns1035=True, max_length=_MPI_V2.max_name_length)
    spec = as_dict(obj.get("spec"))
    policy = as_dict(spec.get("runPolicy"))
    check_one_of(
        report, ("spec", "runPolicy", "cleanPodPolicy"), policy.get("cleanPodPolicy"), ("None", "Running", "All")
    )
    check_one_of(report, ("spec", "runPolicy", "managedBy"), policy.get("managedBy"), MPI_OPERATOR_MANAGED_BY)
    for field in ("ttlSecondsAfterFinished", "activeDeadlineSeconds", "backoffLimit"):
        value = policy.get(field)
        if is_int(value) and value < 0:
            report.add(("spec", "runPolicy", field), f"must be >= 0, got {value}")
    check_one_of(
        report, ("spec", "launcherCreationPolicy"), spec.get("launcherCreationPolicy"), LAUNCHER_CREATION_POLICIES
    )
    check_one_of(report, ("spec", "mpiImplementation"), spec.get("mpiImplementation"), MPI_IMPLEMENTATIONS)
    if spec.get("sshAuthMountPath") == "":
        report.add(("spec", "sshAuthMountPath"), "must not be empty (the SSH keys are mounted there)")
    workers = as_dict(as_dict(spec.get(_MPI_V2.replica_specs_key)).get("Worker")).get("replicas")
    name = as_dict(obj.get("metadata")).get("name")
    if isinstance(name, str) and is_int(workers) and workers > 0:
        hostname = f"{name}-worker-{workers - 1}"
        if len(hostname) > 63:
            report.add(("metadata", "name"), f"the last worker's hostname {hostname!r} would exceed 63 characters")
    for rtype, path, raw in _mpi_replica_specs(report, spec):
        rspec = as_dict(raw)
        check_one_of(report, (*path, "restartPolicy"), rspec.get("restartPolicy"), ("Never", "OnFailure"))
        check_pod_template(report, (*path, "template"), rspec.get("template"))
        replicas = rspec.get("replicas")
        if rtype == "Launcher" and replicas is not None and replicas != 1:
            report.add((*path, "replicas"), f"must be 1, got {describe_value(replicas)}")
        elif rtype == "Worker" and is_int(replicas) and replicas < 1:
            report.add((*path, "replicas"), f"must be >= 1, got {replicas}")
    slots = spec.get("slotsPerWorker")
    if is_int(slots) and slots < 0:
        report.add(("spec", "slotsPerWorker"), f"must be >= 0, got {slots}")


#: (group, version, kind) -> rule check.
KUBEFLOW_RULES: dict[tuple[str, str, str], Callable[[Mapping[str, Any], Report], None]] = {
    _PYTORCH.schema_key: check_pytorchjob,
    _TF.schema_key: check_tfjob,
    _MPI.schema_key: check_mpijob_v1,
    _MPI_V2.schema_key: check_mpijob_v2beta1,
}
