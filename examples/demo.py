"""`make demo`: debug a distributed workflow on a laptop before paying for a cluster.

    pyflyte run examples/demo.py demo

runs, locally and with the real topology of each job (``local_world="full"``):

1. ``make_dataset``: a plain task that generates a small two-moons-like classification set;
2. ``train``: a tiny MLP trained with DistributedDataParallel on CPU (gloo) by a PyTorchJob of one master and
   one worker, i.e. 2 local processes that get MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE as on a cluster;
3. ``evaluate``: a Ray task that fans the scoring of the held-out set out to Ray tasks;
4. ``tf_roles`` / ``mpi_ranks``: a 1-chief/1-ps/2-worker TFJob and a 2-rank MPIJob that report the
   TF_CONFIG and the MPI ranks their processes saw.

The same file registers to a cluster unchanged (``pyflyte run --remote``); ``local_world`` is local only.
"""

from __future__ import annotations

import json
import math
import os
import random
from dataclasses import dataclass

import ray
from flytekit import task, workflow
from flytekitplugins.kfoperators import PS, Chief, MPIJob, PyTorch, TfJob, Worker
from flytekitplugins.raycluster import RayJobConfig, WorkerNodeConfig

HIDDEN = 16


@dataclass
class Dataset:
    x: list[list[float]]
    y: list[int]


@dataclass
class Metrics:
    accuracy: float
    loss: float
    examples: int


@task
def make_dataset(n: int, seed: int) -> Dataset:
    """Two interleaved half-circles with noise: not linearly separable, easy for a small MLP."""
    rng = random.Random(seed)
    x, y = [], []
    for i in range(n):
        label = i % 2
        angle = rng.uniform(0, math.pi)
        cx, cy = (math.cos(angle), math.sin(angle)) if label == 0 else (1 - math.cos(angle), 0.5 - math.sin(angle))
        x.append([cx + rng.gauss(0, 0.1), cy + rng.gauss(0, 0.1)])
        y.append(label)
    return Dataset(x=x, y=y)


@task(task_config=PyTorch(worker=Worker(replicas=1), local_world="full"))
def train(data: Dataset, epochs: int, lr: float) -> list[float]:
    """DDP on CPU: each rank trains on its shard, gradients are averaged over gloo; rank 0 (the master)
    returns the weights, flattened."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    dist.init_process_group("gloo")
    try:
        rank, world = dist.get_rank(), dist.get_world_size()
        torch.manual_seed(0)  # same initial weights everywhere (DDP also broadcasts rank 0's)
        model = torch.nn.Sequential(torch.nn.Linear(2, HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, 2))
        ddp = DistributedDataParallel(model)
        x = torch.tensor(data.x[rank::world])
        y = torch.tensor(data.y[rank::world])
        optimizer = torch.optim.Adam(ddp.parameters(), lr=lr)
        for epoch in range(epochs):
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(ddp(x), y)
            loss.backward()
            optimizer.step()
            if epoch % 50 == 0 or epoch == epochs - 1:
                mean = loss.detach().clone()
                dist.all_reduce(mean)
                print(f"rank {rank}/{world} epoch {epoch}: loss {float(mean) / world:.4f}", flush=True)
        return [float(v) for v in torch.nn.utils.parameters_to_vector(model.parameters()).detach()]
    finally:
        dist.destroy_process_group()


def _forward(weights: list[float], point: list[float]) -> list[float]:
    """The MLP above in plain Python (layout of parameters_to_vector: W1, b1, W2, b2)."""
    w1, rest = weights[: 2 * HIDDEN], weights[2 * HIDDEN :]
    b1, rest = rest[:HIDDEN], rest[HIDDEN:]
    w2, b2 = rest[: 2 * HIDDEN], rest[2 * HIDDEN :]
    hidden = [max(0.0, w1[2 * j] * point[0] + w1[2 * j + 1] * point[1] + b1[j]) for j in range(HIDDEN)]
    return [sum(w2[HIDDEN * k + j] * hidden[j] for j in range(HIDDEN)) + b2[k] for k in range(2)]


@ray.remote
def score_chunk(weights: list[float], x: list[list[float]], y: list[int]) -> tuple[int, float]:
    """(correct predictions, summed cross-entropy) of one chunk."""
    correct, loss = 0, 0.0
    for point, label in zip(x, y, strict=True):
        logits = _forward(weights, point)
        top = max(logits)
        log_norm = top + math.log(sum(math.exp(v - top) for v in logits))
        loss += log_norm - logits[label]
        correct += int(logits.index(top) == label)
    return correct, loss


@task(task_config=RayJobConfig(worker_node_config=[WorkerNodeConfig(group_name="scorers", replicas=2)]))
def evaluate(weights: list[float], data: Dataset, chunks: int) -> Metrics:
    """Scores the held-out set in ``chunks`` Ray tasks (local Ray here, the RayJob's cluster on Flyte)."""
    size = math.ceil(len(data.y) / chunks)
    parts = [
        score_chunk.remote(weights, data.x[i : i + size], data.y[i : i + size]) for i in range(0, len(data.y), size)
    ]
    results = ray.get(parts)
    n = len(data.y)
    return Metrics(accuracy=sum(c for c, _ in results) / n, loss=sum(s for _, s in results) / n, examples=n)


@task(task_config=TfJob(chief=Chief(replicas=1), ps=PS(replicas=1), worker=Worker(replicas=2), local_world="full"))
def tf_roles() -> str:
    """Every TFJob process prints the task TF_CONFIG gives it; the chief's answer is the task's output."""
    config = json.loads(os.environ["TF_CONFIG"])
    me = config["task"]
    print(f"I am {me['type']} {me['index']} in {config['cluster']}", flush=True)
    counts = ", ".join(f"{role}={len(addresses)}" for role, addresses in sorted(config["cluster"].items()))
    return f"{me['type']}:{me['index']} sees cluster {counts}"


@task(task_config=MPIJob(worker=Worker(replicas=2), local_world="full"))
def mpi_ranks() -> str:
    rank, size = os.environ["OMPI_COMM_WORLD_RANK"], os.environ["OMPI_COMM_WORLD_SIZE"]
    print(f"hello from MPI rank {rank} of {size}", flush=True)
    return f"rank {rank} of {size}"


@task
def summary(metrics: Metrics, tf: str, mpi: str) -> str:
    return (
        f"held-out accuracy {metrics.accuracy:.3f}, loss {metrics.loss:.4f} on {metrics.examples} examples; "
        f"TFJob chief: {tf}; MPIJob launcher: {mpi}"
    )


@workflow
def demo(n: int = 400, n_test: int = 200, epochs: int = 150, lr: float = 0.05) -> str:
    train_set = make_dataset(n=n, seed=1)
    test_set = make_dataset(n=n_test, seed=2)
    weights = train(data=train_set, epochs=epochs, lr=lr)
    metrics = evaluate(weights=weights, data=test_set, chunks=4)
    return summary(metrics=metrics, tf=tf_roles(), mpi=mpi_ranks())
