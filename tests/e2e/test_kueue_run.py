"""Kueue (built from its module, running on the control plane) queues the jobs the connector creates.

A ClusterQueue with quota for two jobs and a LocalQueue; four PyTorch tasks naming the LocalQueue
(``RunPolicy(queue=KueueQueue(...))``) go through the connector. The backend creates them suspended with
Kueue's queue label; Kueue admits two (resuming them), the other two wait, reported QUEUED with a message
saying they wait for Kueue, never a failure, and run once quota frees. A TrainJob queued by the backend's
``plugins.kueue`` rule is labelled and suspended, and runs once Kueue resumes it (Kueue v0.17.0 resumes it with a
full update through Go's types: the backend writes the immutable ``spec.trainer`` as they write it back); a
RayJob whose queue has no quota stays QUEUED.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
from flyteidl.core.execution_pb2 import TaskExecution
from flytekitplugins.kfoperators import KueueQueue, PyTorch, RunPolicy, Worker
from flytekitplugins.kubejobs.backend import BackendConfig
from flytekitplugins.raycluster import HeadNodeConfig, RayJobConfig, WorkerNodeConfig

from .controlplane import wait_for
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
from .runtimes import TORCH_RUNTIME

pytestmark = pytest.mark.slow

KUEUE = ("kueue.x-k8s.io", "v1beta2")


def _obj(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "/".join(KUEUE), "kind": kind, "metadata": {"name": name}, "spec": spec}


QUEUED_BY_KUEUE = "waiting for Kueue to admit it"


@pytest.fixture
def queue(k8s: Any, namespace: str) -> Iterator[tuple[str, str]]:
    """(cluster queue, local queue): quota for two jobs of two 1-CPU, 1-GiB pods each (Master and Worker)."""
    from kubernetes import client

    api = client.CustomObjectsApi(k8s)
    suffix = os.urandom(3).hex()
    flavor, cq, lq = f"e2e-flavor-{suffix}", f"e2e-cq-{suffix}", "e2e-lq"
    api.create_cluster_custom_object(*KUEUE, "resourceflavors", _obj("ResourceFlavor", flavor, {}))
    resources = [{"name": "cpu", "nominalQuota": "4"}, {"name": "memory", "nominalQuota": "4Gi"}]
    api.create_cluster_custom_object(
        *KUEUE,
        "clusterqueues",
        _obj(
            "ClusterQueue",
            cq,
            {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                "resourceGroups": [
                    {"coveredResources": ["cpu", "memory"], "flavors": [{"name": flavor, "resources": resources}]}
                ],
            },
        ),
    )
    api.create_namespaced_custom_object(*KUEUE, namespace, "localqueues", _obj("LocalQueue", lq, {"clusterQueue": cq}))
    yield cq, lq
    api.delete_cluster_custom_object(*KUEUE, "clusterqueues", cq)
    api.delete_cluster_custom_object(*KUEUE, "resourceflavors", flavor)


def _time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def test_two_of_four_jobs_run_and_two_wait_in_queued(
    k8s: Any, cluster: dict[str, Any], namespace: str, queue: tuple[str, str]
) -> None:
    _, lq = queue
    config = PyTorch(worker=Worker(replicas=1), run_policy=RunPolicy(backoff_limit=0, queue=KueueQueue(lq)))
    with connector_runtime(cluster["kubeconfig"], BackendConfig()):
        runs = [create(registered(config), execution(namespace, f"kq-{i}", "succeed", "4s")) for i in range(4)]
        wait_terminal(k8s, runs, timeout=180)
    ran = []
    for run in runs:
        status = run.statuses[-1]
        ran.append((_time(status["startTime"]), _time(status["completionTime"])))
        print(
            json.dumps(
                {"job": run.handle.name, "phases": phase_names(run), "conditions": condition_sequence(run.statuses)}
            )
        )
    assert all(r.phase == TaskExecution.SUCCEEDED for r in runs), [phase_names(r) for r in runs]
    # Never more than two ran at once: the quota Kueue enforces.
    overlaps = [sum(1 for s2, e2 in ran if s2 < e and s < e2) for s, e in ran]
    assert max(overlaps) <= 2, ran
    first_done = min(end for _, end in ran)
    waited = [r for r, (start, _) in zip(runs, ran, strict=True) if start >= first_done]
    assert len(waited) >= 2, ran
    for run in waited:  # reported as queued by Kueue while waiting, and no failure on the way
        queued = [m for p, m in zip(run.phases, run.messages, strict=True) if p == TaskExecution.QUEUED]
        assert any(QUEUED_BY_KUEUE in m for m in queued), (phase_names(run), run.messages)
        assert not {TaskExecution.FAILED, TaskExecution.RETRYABLE_FAILED} & set(run.phases), phase_names(run)


def test_trainjob_queued_by_the_backend_rule_runs_when_admitted(
    k8s: Any, cluster: dict[str, Any], namespace: str, queue: tuple[str, str], e2e_runtimes: None
) -> None:
    from kubernetes import client

    _, lq = queue
    backend = BackendConfig.from_flyte_config(
        {
            "trainjob": {"task-types": ["pytorch"], "runtimes": {"pytorch": TORCH_RUNTIME}},
            "kueue": {"queues": [{"namespace": namespace, "task-type": "pytorch", "queue": lq}]},
        }
    )
    with connector_runtime(cluster["kubeconfig"], backend):
        run = create(registered(PyTorch(worker=Worker(replicas=1))), execution(namespace, "kq-tj", "succeed"))
        obj: Any = client.CustomObjectsApi(k8s).get_namespaced_custom_object(
            "trainer.kubeflow.org", "v1alpha1", namespace, "trainjobs", run.handle.name
        )
        assert obj["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == lq, obj["metadata"]
        wait_terminal(k8s, [run], timeout=30)  # the other TrainJobs here finish in 4-10 s
    print(json.dumps({"job": "TrainJob", "phases": phase_names(run), "conditions": condition_sequence(run.statuses)}))
    assert run.phase == TaskExecution.SUCCEEDED, (phase_names(run), condition_sequence(run.statuses))
    assert any("Suspended=True" in c for c in condition_sequence(run.statuses)), condition_sequence(run.statuses)


def test_rayjob_without_quota_stays_queued_never_failed(k8s: Any, cluster: dict[str, Any], namespace: str) -> None:
    from kubernetes import client

    api = client.CustomObjectsApi(k8s)
    lq = "e2e-no-quota"  # a LocalQueue whose ClusterQueue does not exist: Kueue never admits its jobs
    api.create_namespaced_custom_object(
        *KUEUE, namespace, "localqueues", _obj("LocalQueue", lq, {"clusterQueue": f"missing-{namespace}"})
    )
    backend = BackendConfig.from_flyte_config({"kueue": {"queues": [{"task-type": "ray", "queue": lq}]}})
    config = RayJobConfig(
        head_node_config=HeadNodeConfig(),
        worker_node_config=[WorkerNodeConfig(group_name="workers", replicas=1)],
        shutdown_after_job_finishes=True,
    )
    with connector_runtime(cluster["kubeconfig"], backend):
        run = create(registered(config), execution(namespace, "kq-ray", "succeed"))

        def suspended() -> Run | None:
            poll(k8s, run)
            return run if run.statuses and run.statuses[-1].get("jobDeploymentStatus") == "Suspended" else None

        wait_for("the RayJob to be reported Suspended", suspended, 60)
        poll(k8s, run)
    print(json.dumps({"job": "RayJob", "phases": phase_names(run), "statuses": run.statuses}))
    assert run.phases == [TaskExecution.QUEUED], phase_names(run)
    assert run.last is not None and QUEUED_BY_KUEUE in run.last.message and lq in run.last.message, run.last
