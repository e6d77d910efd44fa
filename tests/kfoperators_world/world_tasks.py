"""Tasks the local-world tests run (module level: the world's child processes import them from here),
and a loopback collector through which the members of a world report to the test."""

from __future__ import annotations

import json
import os
import socket
import threading
from typing import Any

from flytekit import task
from flytekit.exceptions.user import FlyteRecoverableException
from flytekitplugins.kfoperators import PS, Chief, Elastic, MPIJob, PyTorch, TfJob, Worker

__all__ = [
    "Collector",
    "all_reduce",
    "decks_of_a_world",
    "elastic_all_reduce",
    "elastic_one_node",
    "make_deck",
    "mpi_exit_handlers",
    "mpi_hello",
    "mpi_rank_one_fails",
    "rank_one_fails",
    "report",
    "tf_members",
]


class Collector:
    """Accepts ``expected`` reports (one JSON line per member), then releases every member at once.

    The listening socket exists before the world starts, so members never race it: no retries, no sleeps.
    """

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.server.getsockname()[1]
        self.reports: list[dict[str, Any]] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        connections = []
        for _ in range(self.expected):
            conn, _ = self.server.accept()
            self.reports.append(json.loads(conn.makefile("r").readline()))
            connections.append(conn)
        for conn in connections:
            conn.sendall(b"go\n")
            conn.close()
        self.server.close()

    def wait(self) -> list[dict[str, Any]]:
        self._thread.join(timeout=60)
        return self.reports


def report(port: int, **payload: Any) -> None:
    """Send ``payload`` (plus this process's pid) to the test's collector and wait until every member has."""
    with socket.create_connection(("127.0.0.1", port)) as conn:
        conn.sendall((json.dumps({**payload, "pid": os.getpid()}) + "\n").encode())
        conn.makefile("r").readline()


@task(task_config=PyTorch(worker=Worker(replicas=1)))
def all_reduce(value: int, port: int) -> list[int]:
    """Each rank contributes value + rank to a gloo all-reduce; the task returns the master's view."""
    import torch
    import torch.distributed as dist

    report(port, rank=os.environ["RANK"])
    dist.init_process_group("gloo")
    try:
        tensor = torch.tensor([value + dist.get_rank()])
        dist.all_reduce(tensor)
        print(f"rank {dist.get_rank()} sum {int(tensor.item())}", flush=True)
        dist.barrier()  # both lines are in the launcher's pipes before the master can end the world
        return [dist.get_rank(), dist.get_world_size(), int(tensor.item())]
    finally:
        dist.destroy_process_group()


@task(task_config=PyTorch(worker=Worker(replicas=1)))
def rank_one_fails(port: int, recoverable: bool) -> int:
    """Rank 1 raises once both ranks are up; rank 0 would wait forever: only the launcher can stop it."""
    rank = os.environ["RANK"]
    report(port, rank=rank)
    if rank == "1":
        if recoverable:
            raise FlyteRecoverableException("rank 1 asks for a retry")
        raise ValueError("rank 1 exploded")
    threading.Event().wait()
    return 0


@task(task_config=TfJob(chief=Chief(replicas=1), ps=PS(replicas=1), worker=Worker(replicas=2)))
def tf_members(port: int) -> str:
    """Every member reports the TF_CONFIG it was given; the chief's own is the task output."""
    report(port, tf_config=json.loads(os.environ["TF_CONFIG"]))
    return os.environ["TF_CONFIG"]


@task(task_config=MPIJob(worker=Worker(replicas=2)))
def mpi_hello() -> str:
    rank, size = os.environ["OMPI_COMM_WORLD_RANK"], os.environ["OMPI_COMM_WORLD_SIZE"]
    print(f"hello from {rank} of {size} pid {os.getpid()}", flush=True)
    return f"hello from {rank} of {size}"


@task(task_config=Elastic(nnodes=2, nproc_per_node=1, rdzv_configs={"timeout": 60, "join_timeout": 60}))
def elastic_all_reduce(value: int) -> list[int]:
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    try:
        tensor = torch.tensor([value + dist.get_rank()])
        dist.all_reduce(tensor)
        print(f"elastic rank {dist.get_rank()} sum {int(tensor.item())}", flush=True)
        dist.barrier()  # both lines are in the node processes' pipes before rank 0's node can end the world
        return [dist.get_rank(), dist.get_world_size(), int(tensor.item()), int(os.environ["GROUP_WORLD_SIZE"])]
    finally:
        dist.destroy_process_group()


@task(task_config=Elastic(nproc_per_node=2))
def elastic_one_node(fail_rank: int) -> list[int]:
    """Two workers of one node; ``fail_rank`` (if any) raises after both are up."""
    import torch.distributed as dist

    dist.init_process_group("gloo")
    try:
        rank = dist.get_rank()
        print(f"worker {rank} of {dist.get_world_size()} threads {os.environ.get('OMP_NUM_THREADS')}", flush=True)
        dist.barrier()
        if rank == fail_rank:
            raise FlyteRecoverableException(f"rank {rank} asks for a retry")
        return [rank, dist.get_world_size()]
    finally:
        dist.destroy_process_group()


@task(task_config=MPIJob(worker=Worker(replicas=2)))
def mpi_exit_handlers(directory: str) -> str:
    """Each rank registers an exit handler that leaves a file behind, as user code may do."""
    import atexit
    from pathlib import Path

    rank = os.environ["OMPI_COMM_WORLD_RANK"]
    atexit.register(lambda: Path(directory, f"exited-{rank}").write_text(rank))
    return rank


@task(task_config=MPIJob(worker=Worker(replicas=2)))
def mpi_rank_one_fails() -> str:
    if os.environ["OMPI_COMM_WORLD_RANK"] == "1":
        raise ValueError("MPI rank 1 exploded")
    return "rank 0 done"


def make_deck() -> str:
    """A member function that makes a flytekit deck named after its rank."""
    import flytekit

    flytekit.Deck(f"rank-{os.environ['RANK']}", "<p>made in a local world</p>")
    return os.environ["RANK"]


@task
def decks_of_a_world() -> list[str]:
    """Runs a 2-process PyTorch world from inside a task, then lists the decks this task now has."""
    import flytekit
    from flytekitplugins.kfoperators.runtime.world import run_local_world

    value = run_local_world(PyTorch(worker=Worker(replicas=1)), make_deck, {})
    return [value, *sorted(d.name for d in flytekit.current_context().decks if d.name.startswith("rank-"))]
