"""``plugins.trainjob.task-types: auto`` decided by the connector from the real API server's discovery.

The e2e control plane serves both engines (the Training Operator's kubeflow.org/v1 kinds and Trainer's
TrainJob), so the rule keeps every task type on its v1 kind; the same discovery answer with the v1 group
taken away (a cluster that runs only Trainer v2) picks TrainJob for exactly the task types with a runtime.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from flytekitplugins.kubejobs.backend import BackendConfig
from flytekitplugins.kubejobs.connector.runtime import Runtime
from flytekitplugins.kubejobs.connector.settings import ConnectorSettings

from .runtimes import MPI_RUNTIME

pytestmark = pytest.mark.slow


def test_auto_keeps_served_v1_kinds_and_would_pick_trainjob_without_them(cluster: dict[str, Any]) -> None:
    backend = BackendConfig.from_flyte_config({"trainjob": {"task-types": "auto", "runtimes": {"mpi": MPI_RUNTIME}}})
    rt = Runtime(ConnectorSettings(kubeconfig=cluster["kubeconfig"], cache=False, backend=backend))
    try:
        trainer = asyncio.run(rt.client.api_resources("trainer.kubeflow.org", "v1alpha1"))
        kubeflow = asyncio.run(rt.client.api_resources("kubeflow.org", "v1"))
        assert {"trainjobs", "clustertrainingruntimes", "trainingruntimes"} <= trainer, trainer
        assert {"pytorchjobs", "tfjobs", "mpijobs"} <= kubeflow, kubeflow
        assert asyncio.run(rt.client.api_resources("not-served.example.com", "v1")) == frozenset()

        resolved = asyncio.run(rt.build_config()).trainjob
        assert (resolved.task_types, resolved.auto) == (frozenset(), False)
        assert asyncio.run(rt.build_config()) is asyncio.run(rt.build_config())  # discovered once, then kept

        served = {("trainer.kubeflow.org", "v1alpha1"): trainer, ("kubeflow.org", "v1"): frozenset()}
        only_trainer = backend.trainjob.resolve(lambda g, v, plural: plural in served.get((g, v), frozenset()))
        assert only_trainer.task_types == {"pytorch", "mpi"}
        no_mpi_runtime = BackendConfig.from_flyte_config({"trainjob": {"task-types": "auto"}}).trainjob
        assert no_mpi_runtime.resolve(lambda g, v, p: p in served.get((g, v), frozenset())).task_types == {"pytorch"}
    finally:
        rt.close()
