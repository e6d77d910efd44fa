"""Example tasks for the `kubejobs render` tests, written with this project's plugins (kfoperators,
raycluster). cli_official_tasks.py holds some of them written with flytekit's official plugins."""

from flytekit import PodTemplate, Resources, task
from flytekitplugins.kfoperators import PS, Chief, Elastic, Launcher, Master, MPIJob, PyTorch, TfJob, Worker
from flytekitplugins.raycluster import HeadNodeConfig, RayJobConfig, WorkerNodeConfig
from kubernetes.client import V1Container, V1PodSpec


@task(
    task_config=PyTorch(master=Master(), worker=Worker(replicas=2, limits=Resources(cpu="2", mem="2Gi"))),
    requests=Resources(cpu="1", mem="1Gi"),
)
def train_pytorch(epochs: int) -> float:
    return float(epochs)


@task(task_config=Elastic(nnodes="1:3", nproc_per_node=2))
def train_elastic(epochs: int) -> float:
    return float(epochs)


# One node: flytekit's Elastic runs it as a plain python-task pod, so there is no job object to render.
@task(task_config=Elastic(nnodes=1, nproc_per_node=2))
def train_elastic_one_node(epochs: int) -> float:
    return float(epochs)


@task(
    task_config=TfJob(
        chief=Chief(replicas=1), ps=PS(replicas=1), worker=Worker(replicas=2, limits=Resources(mem="2Gi"))
    )
)
def train_tensorflow(epochs: int) -> float:
    return float(epochs)


@task(
    task_config=MPIJob(launcher=Launcher(replicas=1), worker=Worker(replicas=2, limits=Resources(mem="2Gi")), slots=2)
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


def not_a_task() -> int:
    return 1


# A sidecar whose name Kubernetes refuses (not a DNS-1123 label): the job is accepted, its pods never start.
@task(
    task_config=PyTorch(worker=Worker(replicas=1), increase_shared_mem=False),
    pod_template=PodTemplate(
        primary_container_name="primary",
        pod_spec=V1PodSpec(
            containers=[V1Container(name="primary"), V1Container(name="Log_Shipper", image="fluent/fluent-bit:3.0")]
        ),
    ),
)
def bad_sidecar_name(epochs: int) -> float:
    return float(epochs)


# Compute templates named by string: resolved by `kubejobs render --templates FILE | --from-cluster`.
@task(task_config=PyTorch(worker=Worker(replicas=2, compute_template="a100x8", requests=Resources(cpu="4"))))
def train_named_template(epochs: int) -> float:
    return float(epochs)


@task(
    task_config=RayJobConfig(
        head_node_config=HeadNodeConfig(compute_template="cpu-large"),
        worker_node_config=[WorkerNodeConfig("gpu", replicas=1, compute_template="a100x8")],
    )
)
def ray_named_template() -> None: ...
