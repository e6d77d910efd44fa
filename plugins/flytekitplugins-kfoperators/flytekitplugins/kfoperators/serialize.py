"""Job configs -> task customs (flyteidl ``kubeflow`` messages via ``MessageToDict``) and container args.

Pure functions. Replica specs use the per-kind fields (replicas, image, resources, restart_policy), as
flytekit does, and not ``common``: backends from before flyte#5355 read only those fields, and later
ones read them whenever ``common`` is absent, so every Flyte backend reads the same role. Writing both
would double the custom (and its serialization cost) for no reader. Settings the IDL cannot carry go
under the ``kubejobs`` key.

>>> from flytekitplugins.kfoperators import PyTorch, Worker
>>> custom = pytorch_custom(PyTorch(worker=Worker(replicas=2)))
>>> custom["workerReplicas"]
{'replicas': 2}
"""

from __future__ import annotations

from typing import Any, Optional, Union

from flyteidl.plugins.kubeflow import mpi_pb2, pytorch_pb2, tensorflow_pb2
from flytekitplugins.kubejobs.extension import build_extension
from flytekitplugins.kubejobs.idl import fill_replica_spec, run_policy_to_idl
from flytekitplugins.kubejobs.policies import RunPolicy
from flytekitplugins.kubejobs.roles import ReplicaRole
from flytekitplugins.kubejobs.wire.extension import EXTENSION_KEY, EXTENSION_VERSION
from google.protobuf.json_format import MessageToDict

from .task_configs import Elastic, HorovodJob, MPIJob, PyTorch, TfJob

__all__ = [
    "RDZV_BACKEND",
    "MPIRUN_FLAGS",
    "pytorch_custom",
    "elastic_custom",
    "tensorflow_custom",
    "mpi_custom",
    "mpirun_prefix",
    "horovodrun_prefix",
]

#: torch elastic's recommended rendezvous backend: no extra server, the workers meet at the first node.
RDZV_BACKEND = "c10d"

#: The official plugin's mpirun flags (the hostfile comes from the operator's OMPI_MCA_orte_default_hostfile).
MPIRUN_FLAGS = (
    "mpirun",
    "--allow-run-as-root",
    "-bind-to",
    "none",
    "-map-by",
    "slot",
    "-x",
    "LD_LIBRARY_PATH",
    "-x",
    "PATH",
    "-x",
    "NCCL_DEBUG=INFO",
    "-mca",
    "pml",
    "ob1",
    "-mca",
    "btl",
    "^openib",
)


def _finish(message: Any, roles: dict[str, ReplicaRole], run_policy: Optional[RunPolicy]) -> dict[str, Any]:
    if run_policy is not None:
        message.run_policy.CopyFrom(run_policy_to_idl(run_policy))
    custom: dict[str, Any] = MessageToDict(message)
    extension = build_extension(roles, run_policy)
    if extension is not None:
        custom[EXTENSION_KEY] = dict(extension)
    return custom


def pytorch_custom(cfg: PyTorch) -> dict[str, Any]:
    msg = pytorch_pb2.DistributedPyTorchTrainingTask()
    fill_replica_spec(msg.master_replicas, cfg.master, replicas=1)
    fill_replica_spec(msg.worker_replicas, cfg.worker)
    return _finish(msg, {"Master": cfg.master, "Worker": cfg.worker}, cfg.run_policy)


def elastic_custom(cfg: Elastic) -> Optional[dict[str, Any]]:
    """None for a single node (the task is a plain ``python-task``)."""
    if cfg.single_node:
        return None
    low, high = cfg.nodes
    msg = pytorch_pb2.DistributedPyTorchTrainingTask()
    msg.worker_replicas.replicas = high
    msg.elastic_config.CopyFrom(
        pytorch_pb2.ElasticConfig(
            rdzv_backend=RDZV_BACKEND,
            min_replicas=low,
            max_replicas=high,
            nproc_per_node=cfg.nproc_per_node,
            max_restarts=cfg.max_restarts,
        )
    )
    return _finish(msg, {}, cfg.run_policy)


def tensorflow_custom(cfg: TfJob) -> dict[str, Any]:
    msg = tensorflow_pb2.DistributedTensorflowTrainingTask()
    fill_replica_spec(msg.chief_replicas, cfg.chief)
    fill_replica_spec(msg.worker_replicas, cfg.worker)
    fill_replica_spec(msg.ps_replicas, cfg.ps)
    fill_replica_spec(msg.evaluator_replicas, cfg.evaluator)
    roles: dict[str, ReplicaRole] = {
        "Chief": cfg.chief,
        "PS": cfg.ps,
        "Worker": cfg.worker,
        "Evaluator": cfg.evaluator,
    }
    # Roles without replicas are left out of the job by every backend: their extras would be noise.
    return _finish(msg, {k: r for k, r in roles.items() if r.replicas}, cfg.run_policy)


def mpi_custom(cfg: Union[MPIJob, HorovodJob]) -> dict[str, Any]:
    msg = mpi_pb2.DistributedMPITrainingTask(slots=cfg.slots)
    fill_replica_spec(msg.launcher_replicas, cfg.launcher, replicas=1)
    fill_replica_spec(msg.worker_replicas, cfg.worker)
    if cfg.launcher.command:
        msg.launcher_replicas.command.extend(cfg.launcher.command)
    if cfg.worker.command:
        msg.worker_replicas.command.extend(cfg.worker.command)
    custom = _finish(msg, {"Launcher": cfg.launcher, "Worker": cfg.worker}, cfg.run_policy)
    mpi_job = cfg.mpi_operator.to_extension() if cfg.mpi_operator is not None else {}
    if mpi_job:
        custom.setdefault(EXTENSION_KEY, {"version": EXTENSION_VERSION})["mpiJob"] = mpi_job
    return custom


def _processes(cfg: Union[MPIJob, HorovodJob]) -> int:
    return (cfg.worker.replicas or 0) * cfg.slots


def mpirun_prefix(cfg: MPIJob, entrypoint_path: str) -> list[str]:
    """``mpirun ... -np <workers*slots> python <entrypoint>``, to put before pyflyte-execute's args."""
    return [*MPIRUN_FLAGS, "-np", str(_processes(cfg)), "python", entrypoint_path]


def horovodrun_prefix(cfg: HorovodJob) -> list[str]:
    """``horovodrun -np N ...`` with the official plugin's flags; unset options are left out."""
    np = str(_processes(cfg))
    cmd = ["horovodrun", "-np", np]
    if cfg.log_level is not None:
        cmd += ["--log-level", cfg.log_level]
    cmd += ["--network-interface", "eth0", "--min-np", np, "--max-np", np, "--slots-per-host", str(cfg.slots)]
    if cfg.discovery_script_path is not None:
        cmd += ["--host-discovery-script", cfg.discovery_script_path]
    if cfg.elastic_timeout is not None:
        cmd += ["--elastic-timeout", str(cfg.elastic_timeout)]
    if cfg.verbose:
        cmd.append("--verbose")
    return cmd
