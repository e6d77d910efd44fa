"""The same configs as cli_example_tasks.py, written with flytekit's official plugins (drop-in API: only the
imports differ)."""

from flytekit import Resources, task
from flytekitplugins.kfmpi import Launcher, MPIJob
from flytekitplugins.kfmpi import Worker as MPIWorker
from flytekitplugins.kfpytorch import Master, PyTorch, Worker
from flytekitplugins.kftensorflow import PS, Chief, TfJob
from flytekitplugins.kftensorflow import Worker as TFWorker
from flytekitplugins.ray import HeadNodeConfig, RayJobConfig, WorkerNodeConfig


@task(
    task_config=PyTorch(master=Master(), worker=Worker(replicas=2, limits=Resources(cpu="2", mem="2Gi"))),
    requests=Resources(cpu="1", mem="1Gi"),
)
def train_pytorch(epochs: int) -> float:
    return float(epochs)


@task(
    task_config=TfJob(
        chief=Chief(replicas=1), ps=PS(replicas=1), worker=TFWorker(replicas=2, limits=Resources(mem="2Gi"))
    )
)
def train_tensorflow(epochs: int) -> float:
    return float(epochs)


@task(
    task_config=MPIJob(
        launcher=Launcher(replicas=1), worker=MPIWorker(replicas=2, limits=Resources(mem="2Gi")), slots=2
    )
)
def train_mpi(epochs: int) -> float:
    return float(epochs)


@task(
    task_config=RayJobConfig(
        head_node_config=HeadNodeConfig(ray_start_params={"log-color": "true"}),
        worker_node_config=[WorkerNodeConfig(group_name="workers", replicas=2, min_replicas=1, max_replicas=4)],
        shutdown_after_job_finishes=True,
        ttl_seconds_after_finished=120,
    )
)
def train_ray(epochs: int) -> float:
    return float(epochs)
