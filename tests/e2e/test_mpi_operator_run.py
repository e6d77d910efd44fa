"""MPIJob and HorovodJob configs on the mpi-operator's MPIJob v2beta1 (kubeflow/mpi-operator v0.8.0, built from its
Go module), through the connector with ``plugins.mpi.operator: v2beta1``.

The mpi-operator's CRD has the name of the Training Operator's v1 MPIJob CRD, so these tests run on a control
plane of their own (profile ``mpi-operator``: the core and the mpi-operator, started once per session). The
operator makes the workers' pods and the launcher's batch Job, the Job controller the launcher's pod, kwok plays
the pods' outcome. Each status the operator writes is recorded and the condition sequence printed for the
README's status table.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock
from flyteidl.core.execution_pb2 import TaskExecution
from flytekitplugins.kfoperators import HorovodJob, MPIJob, MPIOperatorOptions, RunPolicy, Worker
from flytekitplugins.kubejobs.backend import BackendConfig, build_object
from flytekitplugins.kubejobs.connector.runtime import Runtime
from flytekitplugins.kubejobs.connector.settings import ConnectorSettings

from .controlplane import MPI_PROFILE, ensure_up
from .drive import Run, condition_sequence, connector_runtime, create, execution, phase_names, registered, wait_terminal

pytestmark = pytest.mark.slow

LINKS = {"kubernetes-enabled": True, "kubernetes-template-uri": "https://k8s.example/{{ .namespace }}/{{ .podName }}"}
BACKEND = {"mpi": {"operator": "v2beta1"}, "logs": LINKS}


@pytest.fixture(scope="session")
def mpi_cluster(e2e_dir: tuple[Path, int]) -> dict[str, Any]:
    """The ``mpi-operator`` control plane, shared by the xdist workers (the operator's health port is fixed,
    so one runs per machine); stopped with the session, as the main one is."""
    directory, watch_pid = e2e_dir
    plane = directory / MPI_PROFILE
    plane.mkdir(exist_ok=True)
    with FileLock(str(plane / "start.lock")):
        state = ensure_up(plane, watch_pid, profile=MPI_PROFILE)
    print(json.dumps({"mpi_operator_control_plane_start_seconds": state["start_seconds"]}))
    return state


@pytest.fixture(scope="session")
def mpi_k8s(mpi_cluster: dict[str, Any]) -> Any:
    from kubernetes import client, config

    configuration = client.Configuration()
    config.load_kube_config(config_file=mpi_cluster["kubeconfig"], client_configuration=configuration)  # type: ignore[no-untyped-call]
    return client.ApiClient(configuration)


@pytest.fixture
def mpi_namespace(mpi_k8s: Any, request: pytest.FixtureRequest) -> Iterator[str]:
    import os

    from kubernetes import client

    name = f"e2e-mpi-{request.node.name.split('[')[-1].strip(']')[:30]}-{os.urandom(3).hex()}".lower()
    labels = {"pod-security.kubernetes.io/enforce": "baseline"}
    core = client.CoreV1Api(mpi_k8s)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name, labels=labels)))
    yield name
    core.delete_namespace(name)


def _pods(k8s: Any, namespace: str, name: str) -> dict[str, str]:
    """The job's pods as the operator labelled them: name -> role (``launcher`` or ``worker``)."""
    from kubernetes import client

    listed: Any = client.CoreV1Api(k8s).list_namespaced_pod(
        namespace, label_selector=f"training.kubeflow.org/job-name={name}"
    )
    return {p.metadata.name: p.metadata.labels["training.kubeflow.org/job-role"] for p in listed.items}


CONFIGS = [
    (
        "mpijob",
        lambda: MPIJob(
            worker=Worker(replicas=2),
            slots=2,
            run_policy=RunPolicy(backoff_limit=0),
            mpi_operator=MPIOperatorOptions(launcher_creation_policy="WaitForWorkersReady"),
        ),
    ),
    ("horovod", lambda: HorovodJob(worker=Worker(replicas=1), run_policy=RunPolicy(backoff_limit=0))),
]


@pytest.mark.parametrize("outcome", ["succeed", "fail"])
@pytest.mark.parametrize(("name", "config"), CONFIGS, ids=[name for name, _ in CONFIGS])
def test_mpijob_v2beta1_reaches_the_phase_its_pods_decide(
    mpi_k8s: Any, mpi_cluster: dict[str, Any], mpi_namespace: str, name: str, config: Any, outcome: str
) -> None:
    from kubernetes import client

    backend = BackendConfig.from_flyte_config(BACKEND)
    template, meta = registered(config()), execution(mpi_namespace, f"v2-{name}-{outcome}", outcome)
    with connector_runtime(mpi_cluster["kubeconfig"], backend):
        run: Run = create(template, meta)
        assert (run.handle.version, run.handle.plural) == ("v2beta1", "mpijobs"), run.handle
        wait_terminal(mpi_k8s, [run])
    sequence = condition_sequence(run.statuses)
    print(json.dumps({"mpijob_v2beta1": name, "outcome": outcome, "conditions": sequence, "phases": phase_names(run)}))
    if outcome == "succeed":
        assert run.phase == TaskExecution.SUCCEEDED, (sequence, phase_names(run))
        assert any(c.startswith("Succeeded=True") for c in sequence), sequence
    else:
        assert run.phase == TaskExecution.RETRYABLE_FAILED, (sequence, phase_names(run))
        assert any(c.startswith("Failed=True") for c in sequence), sequence
    # The API server stored the spec the backend built, field for field, nothing pruned: the backend writes
    # every default of the operator's CRD but runPolicy.suspend (false), left out as for every Kubeflow job
    # (Kueue's admission sets it; docs/architecture.md lists these defaults).
    stored: Any = client.CustomObjectsApi(mpi_k8s).get_namespaced_custom_object(
        "kubeflow.org", "v2beta1", mpi_namespace, "mpijobs", run.handle.name
    )
    built = build_object(template, meta, backend)["spec"]
    assert stored["spec"] == {**built, "runPolicy": {**built["runPolicy"], "suspend": False}}
    # Links: the launcher's pod (its Job names it with a random suffix; one try: backoffLimit 0) and each worker.
    assert run.last is not None
    linked = [link.uri.rsplit("/", 1)[-1] for link in run.last.log_links]
    pods = _pods(mpi_k8s, mpi_namespace, run.handle.name)
    launchers = [pod for pod, role in pods.items() if role == "launcher"]
    workers = sorted(pod for pod, role in pods.items() if role == "worker")
    assert len(launchers) == 1 and linked == launchers + workers, (linked, pods)


def test_auto_picks_the_mpijob_the_cluster_serves(mpi_cluster: dict[str, Any]) -> None:
    backend = BackendConfig.from_flyte_config({"mpi": {"operator": "auto"}})
    rt = Runtime(ConnectorSettings(kubeconfig=mpi_cluster["kubeconfig"], cache=False, backend=backend))
    try:
        assert "mpijobs" in asyncio.run(rt.client.api_resources("kubeflow.org", "v2beta1"))
        assert asyncio.run(rt.client.api_resources("kubeflow.org", "v1")) == frozenset()
        assert asyncio.run(rt.build_config()).mpi.operator == "v2beta1"
    finally:
        rt.close()
