"""The e2e fixtures: one real control plane per test session, shared by the xdist workers."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock

from .controlplane import ensure_up


@pytest.fixture(scope="session")
def cluster(e2e_dir: tuple[Path, int]) -> dict[str, Any]:
    """The running control plane's state (server, ca, admin kubeconfig, logs), started on first use."""
    directory, watch_pid = e2e_dir
    with FileLock(str(directory / "start.lock")):
        return ensure_up(directory, watch_pid)


@pytest.fixture(scope="session")
def k8s(cluster: dict[str, Any]) -> Any:
    """A kubernetes ApiClient as the cluster admin."""
    from kubernetes import client, config

    configuration = client.Configuration()
    config.load_kube_config(config_file=cluster["kubeconfig"], client_configuration=configuration)  # type: ignore[no-untyped-call]
    return client.ApiClient(configuration)


@pytest.fixture(scope="session")
def e2e_runtimes(k8s: Any) -> None:
    """The ClusterTrainingRuntimes of the TrainJob tests (``runtimes.py``), made once per session."""
    from .runtimes import install

    install(k8s)


@pytest.fixture
def namespace(k8s: Any, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace (Pod Security `baseline` enforced, as a shared cluster would), deleted afterwards."""
    from kubernetes import client

    name = "e2e-" + request.node.name.lower().replace("_", "-").replace("[", "-").replace("]", "")[:40].strip("-")
    name = name.rstrip("-") + "-" + os.urandom(3).hex()
    labels = {"pod-security.kubernetes.io/enforce": "baseline"}
    client.CoreV1Api(k8s).create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name, labels=labels)))
    yield name
    client.CoreV1Api(k8s).delete_namespace(name)
