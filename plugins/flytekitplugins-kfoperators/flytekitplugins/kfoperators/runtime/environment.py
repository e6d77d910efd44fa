"""The Training Operators' environment contract, computed for local runs.

In a cluster the operator gives every replica the variables its framework reads (PyTorch:
MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE; TensorFlow: TF_CONFIG; MPI: the Open MPI rank variables set by
mpirun). Locally there is no operator: the ``*_env`` functions compute the same variables for member
``(role, index)`` of a :class:`LocalWorld`, so a world of N local processes can reuse them. A world of
one runs the task in-process inside :func:`scoped_environ`, which restores ``os.environ`` exactly.

>>> world = LocalWorld({"Master": ("127.0.0.1:29500",), "Worker": ("127.0.0.1:29501",)})
>>> env = pytorch_env("Worker", 0, world)
>>> env["MASTER_ADDR"], env["MASTER_PORT"], env["RANK"], env["WORLD_SIZE"]
('127.0.0.1', '29500', '1', '2')
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable, Iterator, Mapping
from contextlib import closing, contextmanager
from dataclasses import dataclass
from typing import Optional

__all__ = [
    "LocalWorld",
    "free_port",
    "pytorch_env",
    "tensorflow_env",
    "mpi_env",
    "world_of_one",
    "scoped_environ",
    "restored_environ",
]


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago (the OS picks it)."""
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass(frozen=True)
class LocalWorld:
    """The members of a local job: operator role -> one ``host:port`` per replica; ``slots`` processes per
    MPI worker."""

    members: Mapping[str, tuple[str, ...]]
    slots: int = 1

    @classmethod
    def allocate(cls, replicas: Mapping[str, int], host: str = "127.0.0.1", slots: int = 1) -> LocalWorld:
        """A world with a fresh port for every replica."""
        return cls({role: tuple(f"{host}:{free_port(host)}" for _ in range(n)) for role, n in replicas.items()}, slots)

    def count(self, role: str) -> int:
        return len(self.members.get(role, ()))

    def _check(self, role: str, index: int) -> None:
        if not 0 <= index < self.count(role):
            raise ValueError(f"{role} index {index} is outside this world ({self.count(role)} {role} replicas)")


def pytorch_env(role: str, index: int, world: LocalWorld) -> dict[str, str]:
    """What the PyTorchJob operator sets: the master is rank 0, workers follow (``Worker`` i is rank 1+i)."""
    world._check(role, index)
    masters = world.count("Master")
    if role == "Master":
        rank = index
    elif role == "Worker":
        rank = masters + index
    else:
        raise ValueError(f"a PyTorchJob has Master and Worker replicas, not {role!r}")
    first = world.members["Master"][0] if masters else world.members["Worker"][0]
    host, port = first.rsplit(":", 1)
    return {
        "MASTER_ADDR": host,
        "MASTER_PORT": port,
        "RANK": str(rank),
        "WORLD_SIZE": str(masters + world.count("Worker")),
        "LOCAL_RANK": "0",
        "LOCAL_WORLD_SIZE": "1",
        "PYTHONUNBUFFERED": "1",
    }


_TF_CLUSTER_ROLES = ("Chief", "Worker", "PS")  # the TFJob operator keeps evaluators out of the cluster spec


def tensorflow_env(role: str, index: int, world: LocalWorld) -> dict[str, str]:
    """``TF_CONFIG`` as the TFJob operator writes it."""
    world._check(role, index)
    if role not in (*_TF_CLUSTER_ROLES, "Evaluator"):
        raise ValueError(f"a TFJob has Chief, PS, Worker and Evaluator replicas, not {role!r}")
    cluster = {r.lower(): list(world.members[r]) for r in _TF_CLUSTER_ROLES if world.count(r)}
    config = {"cluster": cluster, "task": {"type": role.lower(), "index": index}, "environment": "cloud"}
    return {"TF_CONFIG": json.dumps(config)}


def mpi_env(role: str, index: int, world: LocalWorld, local_rank: int = 0) -> dict[str, str]:
    """The rank variables mpirun gives process ``local_rank`` on worker ``index`` (Open MPI and PMI names)."""
    world._check(role, index)
    if role != "Worker":
        raise ValueError(f"MPI ranks run on Worker replicas, not {role!r}")
    if not 0 <= local_rank < world.slots:
        raise ValueError(f"local_rank {local_rank} is outside the worker's {world.slots} slots")
    rank, size = index * world.slots + local_rank, world.count("Worker") * world.slots
    return {
        "OMPI_COMM_WORLD_RANK": str(rank),
        "OMPI_COMM_WORLD_SIZE": str(size),
        "OMPI_COMM_WORLD_LOCAL_RANK": str(local_rank),
        "OMPI_COMM_WORLD_LOCAL_SIZE": str(world.slots),
        "OMPI_COMM_WORLD_NODE_RANK": str(index),
        "PMI_RANK": str(rank),
        "PMI_SIZE": str(size),
    }


#: task type -> the env function of that job kind.
ENV_FUNCTIONS: dict[str, Callable[[str, int, LocalWorld], dict[str, str]]] = {
    "pytorch": pytorch_env,
    "tensorflow": tensorflow_env,
    "mpi": mpi_env,
}

#: task type -> the role a single local process plays unless told otherwise.
ROLE_OF_ONE = {"pytorch": "Master", "tensorflow": "Worker", "mpi": "Worker"}


def world_of_one(task_type: str, role: Optional[str] = None) -> dict[str, str]:
    """The environment of the only member of a local world of one for ``task_type``, playing ``role`` (by
    default the PyTorch master, a TF worker, MPI rank 0).

    >>> json.loads(world_of_one("tensorflow", "Chief")["TF_CONFIG"])["task"]
    {'type': 'chief', 'index': 0}
    """
    role = role or ROLE_OF_ONE[task_type]
    return ENV_FUNCTIONS[task_type](role, 0, LocalWorld.allocate({role: 1}))


@contextmanager
def scoped_environ(env: Mapping[str, str]) -> Iterator[None]:
    """Set ``env`` in ``os.environ`` for the block, then put every touched variable back as it was
    (removed if it was absent). Not thread-safe: ``os.environ`` is process-wide."""
    saved = {name: os.environ.get(name) for name in env}
    try:
        os.environ.update(env)
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextmanager
def restored_environ(env: Mapping[str, str] | None = None) -> Iterator[None]:
    """Like :func:`scoped_environ`, and also undo whatever else the block changed in ``os.environ``
    (torch's launcher, for one, sets variables in the calling process)."""
    saved = dict(os.environ)
    try:
        os.environ.update(env or {})
        yield
    finally:
        for name in [n for n in os.environ if n not in saved]:
            del os.environ[name]
        for name, value in saved.items():
            if os.environ.get(name) != value:
                os.environ[name] = value
