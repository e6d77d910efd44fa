"""Job config -> local world: which processes a cluster would run and the environment each one gets.

The environments follow what the Kubeflow Training Operator (v1) and Flyte's backend put into the pods,
with service names replaced by ``127.0.0.1`` and free local ports. The PyTorch and TensorFlow variables
come from :mod:`.environment` (the same functions the world of one uses):

- PyTorch: ``master-0`` and ``worker-i`` with ``MASTER_ADDR``, ``MASTER_PORT``, ``WORLD_SIZE``, ``RANK``
  (master 0, worker i -> i + 1); workers also get Flyte's ``_F_WN`` (their pod name).
- Elastic: ``worker-i`` nodes with ``PET_RDZV_ENDPOINT``, ``PET_RDZV_BACKEND``, ``PET_NNODES`` ("min:max"),
  ``PET_NPROC_PER_NODE``, ``PET_MAX_RESTARTS``; each node runs the elastic launcher for its processes.
- TfJob: one process per chief / ps / worker / evaluator replica, each with ``TF_CONFIG`` (cluster spec
  without the evaluator, as the operator builds it; task type and index; ``"environment": "cloud"``).
- MPIJob / HorovodJob: ``workers * slots`` ranks started by one ``mpirun``.

Configs are read by their public field names, so the official plugins' configs plan the same world:

>>> plan = tf_plan(chief=1, ps=1, worker=2, evaluator=0)
>>> [m.name for m in plan.members], plan.output_from
(['chief-0', 'ps-0', 'worker-0', 'worker-1'], 'chief-0')
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

from .environment import LocalWorld, free_port, pytorch_env, tensorflow_env

__all__ = [
    "KINDS",
    "Member",
    "WorldPlan",
    "elastic_plan",
    "kind_of",
    "mpi_plan",
    "nnodes_of",
    "plan_for",
    "output_role",
    "pytorch_plan",
    "tf_plan",
    "world_size_of",
]

LOCALHOST = "127.0.0.1"


@dataclass(frozen=True)
class Member:
    """One process of the world: its role, index within the role and the environment the operator
    would give its pod (added on top of the parent's environment). ``runs_until_stopped``: a role that never
    exits by itself (a TF parameter server), stopped as soon as the task's output is back."""

    role: str
    index: int
    env: Mapping[str, str]
    runs_until_stopped: bool = False

    @property
    def name(self) -> str:
        return f"{self.role}-{self.index}"


@dataclass(frozen=True)
class WorldPlan:
    """What to start. ``output_from`` names the member whose return value is the task's output; ``None``
    means "the one member that returned a value" (the others raise ``IgnoreOutputs``, as elastic nodes do).
    With ``mpirun``, one ``mpirun -np <len(members)>`` process starts every member; ``common_env`` is given
    to it (mpirun passes its environment on to the ranks).

    As the operator decides (a PyTorchJob succeeds with its master, a TFJob with its chief), the world is done
    once ``output_from`` has returned its value: the other members get a short grace to end by themselves (so
    their last lines reach the user), then are stopped, and a member failing after that point (e.g. losing the
    store rank 0 hosted) is ignored. Under mpirun, mpirun's exit status decides, as the launcher's does for an
    MPIJob.

    ``ranks_label_lines``: the ranks the members start (MPI ranks, elastic workers) label their own lines
    ``[rank-N]``; the launcher shows one prefix for them (``[rank-N]`` under mpirun, ``[worker-0/rank-N]``
    for a rank of an elastic node) instead of adding its own in front of theirs."""

    kind: str
    members: tuple[Member, ...]
    output_from: Optional[str]
    mpirun: bool = False
    common_env: Mapping[str, str] = field(default_factory=dict)
    ranks_label_lines: bool = False

    @property
    def size(self) -> int:
        return len(self.members)


#: Config class name -> kind. Matching by name lets the official plugins' configs (drop-in API) plan too.
KINDS = {"PyTorch": "pytorch", "Elastic": "elastic", "TfJob": "tensorflow", "MPIJob": "mpi", "HorovodJob": "mpi"}


def _threads_env(world: int) -> dict[str, str]:
    # N local processes share this machine's cores; like torchrun, keep each one's thread pool small
    # unless the user chose a value.
    if "OMP_NUM_THREADS" in os.environ:
        return {}
    return {"OMP_NUM_THREADS": str(max(1, (os.cpu_count() or 1) // max(1, world)))}


def _common_env(world: int) -> dict[str, str]:
    return {"PYTHONUNBUFFERED": "1", **_threads_env(world)}


def pytorch_plan(workers: int) -> WorldPlan:
    world = LocalWorld.allocate({"Master": 1, "Worker": workers}, LOCALHOST)
    members = [Member("master", 0, pytorch_env("Master", 0, world))]
    # Flyte's backend also names each worker pod in _F_WN (used for error attribution).
    members += [
        Member("worker", i, {**pytorch_env("Worker", i, world), "_F_WN": f"local-worker-{i}"}) for i in range(workers)
    ]
    return WorldPlan("PyTorch", tuple(members), output_from="master-0", common_env=_common_env(len(members)))


def elastic_plan(min_nodes: int, max_nodes: int, nproc_per_node: int, max_restarts: int) -> WorldPlan:
    port = free_port(LOCALHOST)
    env = {
        "PET_RDZV_ENDPOINT": f"{LOCALHOST}:{port}",
        "PET_RDZV_BACKEND": "c10d",
        "PET_NNODES": f"{min_nodes}:{max_nodes}",
        "PET_NPROC_PER_NODE": str(nproc_per_node),
        "PET_MAX_RESTARTS": str(max_restarts),
    }
    members = tuple(Member("worker", i, {**env, "_F_WN": f"local-worker-{i}"}) for i in range(max_nodes))
    # Rank 0 may land on any node (rendezvous order): the node that holds it returns the output.
    env = _common_env(max_nodes * nproc_per_node)
    return WorldPlan("Elastic", members, output_from=None, common_env=env, ranks_label_lines=True)


def tf_plan(chief: int, ps: int, worker: int, evaluator: int) -> WorldPlan:
    counts = {"Chief": chief, "PS": ps, "Worker": worker, "Evaluator": evaluator}
    world = LocalWorld.allocate({role: n for role, n in counts.items() if n > 0}, LOCALHOST)
    members = tuple(
        Member(role.lower(), i, tensorflow_env(role, i, world), runs_until_stopped=role == "PS")
        for role, n in counts.items()
        for i in range(n)
    )
    output_from = "chief-0" if chief > 0 else "worker-0"
    # Like a TFJob, the job is done when the chief (else worker 0) is: parameter servers never exit.
    return WorldPlan("TfJob", members, output_from=output_from, common_env=_common_env(len(members)))


def mpi_plan(ranks: int, kind: str = "MPIJob") -> WorldPlan:
    members = tuple(Member("rank", i, {}) for i in range(ranks))
    env = _common_env(ranks)
    return WorldPlan(kind, members, output_from="rank-0", mpirun=True, common_env=env, ranks_label_lines=True)


def kind_of(config: object) -> Optional[str]:
    return KINDS.get(type(config).__name__)


def _replicas(config: object, role: str, deprecated: Optional[str] = None) -> int:
    if deprecated is not None and getattr(config, deprecated, None):
        return int(getattr(config, deprecated))
    return int(getattr(getattr(config, role, None), "replicas", None) or 0)


def nnodes_of(config: Any) -> tuple[int, int]:
    """``(min_nodes, max_nodes)`` of an Elastic config's ``nnodes`` (an int, ``"N"`` or ``"min:max"``)."""
    nnodes = config.nnodes
    if isinstance(nnodes, int):
        return nnodes, nnodes
    low, _, high = str(nnodes).partition(":")
    return int(low), int(high or low)


def world_size_of(config: Any) -> int:
    """How many processes a cluster would run user code in (elastic: nodes x processes per node)."""
    kind = kind_of(config)
    if kind == "pytorch":
        return 1 + _replicas(config, "worker", "num_workers")
    if kind == "elastic":
        return nnodes_of(config)[1] * int(config.nproc_per_node)
    if kind == "tensorflow":
        return sum(_tf_counts(config).values())
    if kind == "mpi":
        return _replicas(config, "worker", "num_workers") * max(1, int(getattr(config, "slots", 1) or 1))
    raise TypeError(f"no local world for a {type(config).__name__} task config")


def _tf_counts(config: Any) -> dict[str, int]:
    return {
        "chief": _replicas(config, "chief", "num_chief_replicas"),
        "ps": _replicas(config, "ps", "num_ps_replicas"),
        "worker": _replicas(config, "worker", "num_workers"),
        "evaluator": _replicas(config, "evaluator", "num_evaluator_replicas"),
    }


def output_role(config: Any) -> str:
    """The operator role of the process a cluster takes the task output from, which is also what a world of one
    plays: the PyTorch master, the TF chief (worker 0 in a TFJob without one), MPI rank 0's worker."""
    kind = kind_of(config)
    if kind in ("pytorch", "elastic"):
        return "Master"
    if kind == "tensorflow":
        return "Chief" if _tf_counts(config)["chief"] > 0 else "Worker"
    if kind == "mpi":
        return "Worker"
    raise TypeError(f"no local world for a {type(config).__name__} task config")


def plan_for(config: Any) -> WorldPlan:
    """The local world for ``config`` (PyTorch, Elastic, TfJob, MPIJob or HorovodJob)."""
    kind = kind_of(config)
    if kind == "pytorch":
        return pytorch_plan(_replicas(config, "worker", "num_workers"))
    if kind == "elastic":
        low, high = nnodes_of(config)
        return elastic_plan(low, high, int(config.nproc_per_node), int(config.max_restarts))
    if kind == "tensorflow":
        return tf_plan(**_tf_counts(config))
    if kind == "mpi":
        return mpi_plan(world_size_of(config), type(config).__name__)
    raise TypeError(f"no local world for a {type(config).__name__} task config")
