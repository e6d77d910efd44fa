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
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
from flyteidl.core.execution_pb2 import TaskExecution
from flytekitplugins.kfoperators import Elastic, Launcher, MPIJob, PyTorch, Worker
from flytekitplugins.kubejobs.backend import BackendConfig
from flytekitplugins.kubejobs.connector.runtime import runtime

from .drive import (
    Run,
    condition_sequence,
    connector_runtime,
    create,
    execution,
    phase_names,
    poll,
    registered,
    wait_terminal,
)
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


def created_pods(k8s: Any, namespace: str, name: str) -> set[str]:
    """The pods the Job controller created for the JobSet ``name``, from its ``SuccessfulCreate`` events: JobSet
    deletes the child Jobs still active when it finishes (the MPI nodes once the launcher is done), so a pod
    listing after the end may miss pods that ran."""
    from kubernetes import client

    events = client.CoreV1Api(k8s).list_namespaced_event(namespace, field_selector="reason=SuccessfulCreate")
    prefix = "Created pod: "
    messages = [e.message or "" for e in events.items]
    named = {m[len(prefix) :].strip() for m in messages if m.startswith(prefix)}
    return {pod for pod in named if pod.startswith(f"{name}-")} | jobset_pods(k8s, namespace, name)


def assert_links_name_the_real_pods(k8s: Any, run: Run) -> None:
    assert run.last is not None
    linked = {link.uri.rsplit("/", 1)[-1] for link in run.last.log_links}
    real = created_pods(k8s, run.handle.namespace, run.handle.name)
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


@dataclass
class Reads:
    """What the connector's real client did (each call still goes to the real API server)."""

    versions: list[str] = field(default_factory=list)  # resourceVersion of each TrainJob a get() read
    pod_lists: int = 0


@contextmanager
def counted(kubeconfig: str, backend: BackendConfig) -> Iterator[Reads]:
    """The connector's runtime with its reads and pod LISTs counted."""
    with connector_runtime(kubeconfig, backend):
        rt, reads = runtime(), Reads()
        read, list_pods = rt.read, rt.client.list_pods

        async def counted_read(kind: Any, namespace: str, name: str) -> Any:
            obj = await read(kind, namespace, name)
            reads.versions.append(str(((obj or {}).get("metadata") or {}).get("resourceVersion")))
            return obj

        async def counted_list(namespace: str, selector: str) -> Any:
            reads.pod_lists += 1
            return await list_pods(namespace, selector)

        rt.read, rt.client.list_pods = counted_read, counted_list  # type: ignore[method-assign]
        yield reads


def changes(versions: list[str]) -> int:
    return sum(1 for i, v in enumerate(versions) if i == 0 or v != versions[i - 1])


def test_pods_are_listed_once_per_trainjob_state_not_per_get(
    k8s: Any, cluster: dict[str, Any], e2e_runtimes: None, namespace: str
) -> None:
    """A get() lists the TrainJob's pods only when the TrainJob changed since the last list (or that list is
    older than PodLists.max_age): a finished TrainJob polled again costs one GET each, no LIST."""
    started = time.monotonic()
    with counted(cluster["kubeconfig"], trainjob_backend()) as reads:
        run = create(registered(PyTorch(worker=Worker(replicas=2))), execution(namespace, "tj-lists", "succeed"))
        wait_terminal(k8s, [run])
        during = reads.pod_lists
        max_age = runtime().pod_lists.max_age
        for _ in range(10):
            poll(k8s, run)
    elapsed = time.monotonic() - started
    print(json.dumps({"gets": len(reads.versions), "states": changes(reads.versions), "pod_lists": reads.pod_lists}))
    assert during <= changes(reads.versions) + int(elapsed // max_age), (during, reads.versions)
    assert reads.pod_lists == during  # 10 more gets of the finished job: no LIST
    assert len(reads.versions) > reads.pod_lists
    assert_links_name_the_real_pods(k8s, run)


def test_links_follow_a_recreated_pod(k8s: Any, cluster: dict[str, Any], namespace: str) -> None:
    """Upstream torch-distributed retries a failed pod (its Jobs keep the default backoffLimit): a deleted pod
    is replaced by the Job controller under a new name, and the links name the new pod, not the cached one."""
    from kubernetes import client

    core = client.CoreV1Api(k8s)
    with connector_runtime(cluster["kubeconfig"], trainjob_backend(pytorch="torch-distributed")):
        run = create(
            registered(Elastic(nnodes=2, nproc_per_node=1)), execution(namespace, "tj-recreated", "succeed", "40s")
        )
        deadline = time.monotonic() + 60
        while not (run.last is not None and run.last.log_links and run.phase == TaskExecution.RUNNING):
            assert time.monotonic() < deadline, phase_names(run)
            poll(k8s, run)
            time.sleep(0.2)  # polling interval of a condition with a deadline
        first = sorted(jobset_pods(k8s, namespace, run.handle.name))[0]
        core.delete_namespaced_pod(first, namespace, grace_period_seconds=0)
        deadline = time.monotonic() + 90
        while True:
            poll(k8s, run)
            linked = {link.uri.rsplit("/", 1)[-1] for link in run.last.log_links} if run.last else set()
            real = jobset_pods(k8s, namespace, run.handle.name) - {first}
            if real and linked == real:
                break
            assert time.monotonic() < deadline, (first, linked, real, phase_names(run))
            time.sleep(0.5)  # polling interval of a condition with a deadline
    assert first not in linked
