"""TrainJobs from the same PyTorch and MPIJob configs run on the real Kubeflow Trainer v2 and JobSet controllers.

Each task goes through the connector (``create``, then ``get`` until a terminal phase) with the backend's
``plugins.trainjob`` target on; Trainer makes the JobSet, JobSet the Jobs, the Job controller the pods, and
kwok plays the pods' outcome. Every status Trainer writes is recorded, and the condition sequence printed
for the report (README "TrainJob status"). The log links must name the pods JobSet really created.

The runtimes: upstream's ``torch-distributed`` (installed by the control plane from the trainer module) and
the two of ``runtimes.py``, made as a cluster admin would (one failed pod fails their Jobs).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from flyteidl.core.execution_pb2 import TaskExecution
from flytekitplugins.kfoperators import Elastic, Launcher, MPIJob, PyTorch, Worker
from flytekitplugins.kubejobs.backend import BackendConfig

from .drive import Run, condition_sequence, connector_runtime, create, execution, phase_names, registered, wait_terminal
from .runtimes import MPI_RUNTIME, TORCH_RUNTIME

pytestmark = pytest.mark.slow

LINKS = {"kubernetes-enabled": True, "kubernetes-template-uri": "https://k8s.example/{{ .namespace }}/{{ .podName }}"}


def trainjob_backend(pytorch: str = TORCH_RUNTIME) -> BackendConfig:
    return BackendConfig.from_flyte_config(
        {
            "trainjob": {"task-types": ["pytorch", "mpi"], "runtimes": {"pytorch": pytorch, "mpi": MPI_RUNTIME}},
            "logs": LINKS,
        }
    )


def jobset_pods(k8s: Any, namespace: str, name: str) -> set[str]:
    from kubernetes import client

    pods = client.CoreV1Api(k8s).list_namespaced_pod(namespace, label_selector=f"jobset.sigs.k8s.io/jobset-name={name}")
    return {str(p.metadata.name) for p in pods.items if p.metadata is not None}


def run_one(k8s: Any, cluster: dict[str, Any], config: Any, namespace: str, name: str, outcome: str) -> Run:
    with connector_runtime(cluster["kubeconfig"], trainjob_backend()):
        run = create(registered(config), execution(namespace, name, outcome))
        assert run.handle.plural == "trainjobs", run.handle
        wait_terminal(k8s, [run])
    return run


def assert_links_name_the_real_pods(k8s: Any, run: Run) -> None:
    assert run.last is not None
    linked = {link.uri.rsplit("/", 1)[-1] for link in run.last.log_links}
    real = jobset_pods(k8s, run.handle.namespace, run.handle.name)
    assert real and linked == real, (linked, real)


JOBS: list[tuple[str, Callable[[], Any]]] = [
    ("pytorch", lambda: PyTorch(worker=Worker(replicas=1))),
    ("mpijob", lambda: MPIJob(launcher=Launcher(replicas=1), worker=Worker(replicas=2), slots=1)),
]


@pytest.mark.parametrize("outcome", ["succeed", "fail"])
@pytest.mark.parametrize(("name", "config"), JOBS, ids=[name for name, _ in JOBS])
def test_trainjob_reaches_the_phase_its_pods_decide(
    k8s: Any,
    cluster: dict[str, Any],
    e2e_runtimes: None,
    namespace: str,
    name: str,
    config: Callable[[], Any],
    outcome: str,
) -> None:
    run = run_one(k8s, cluster, config(), namespace, f"tj-{name}-{outcome}", outcome)
    sequence = condition_sequence(run.statuses)
    jobs = [s.get("jobsStatus") for s in run.statuses]
    print(json.dumps({"trainjob": name, "outcome": outcome, "conditions": sequence, "phases": phase_names(run)}))
    print(json.dumps({"trainjob": name, "outcome": outcome, "jobsStatus": jobs[-1] if jobs else None}))
    assert run.phases[0] in (TaskExecution.QUEUED, TaskExecution.INITIALIZING, TaskExecution.RUNNING), phase_names(run)
    if outcome == "succeed":
        assert run.phase == TaskExecution.SUCCEEDED, (sequence, phase_names(run))
        assert any(c.startswith("Complete=True") for c in sequence), sequence
    else:
        assert run.phase == TaskExecution.RETRYABLE_FAILED, (sequence, phase_names(run))
        assert any(c.startswith("Failed=True") for c in sequence), sequence
        message = run.last.message if run.last is not None else ""
        assert "TrainJob failed" in message, message
    assert_links_name_the_real_pods(k8s, run)


def test_elastic_config_runs_on_the_upstream_torch_runtime(k8s: Any, cluster: dict[str, Any], namespace: str) -> None:
    """Upstream's torch-distributed runtime, unchanged, runs an Elastic config to success."""
    with connector_runtime(cluster["kubeconfig"], trainjob_backend(pytorch="torch-distributed")):
        run = create(registered(Elastic(nnodes=2, nproc_per_node=1)), execution(namespace, "tj-elastic", "succeed"))
        wait_terminal(k8s, [run])
    print(json.dumps({"trainjob": "elastic", "conditions": condition_sequence(run.statuses)}))
    assert run.phase == TaskExecution.SUCCEEDED, (condition_sequence(run.statuses), phase_names(run))
    assert_links_name_the_real_pods(k8s, run)
