"""Full task lifecycles through the connectors, the real kubernetes client and the fake API server.

The expected phases come from Flyte's Go plugins (reference flyte-backend-behaviour.md §2.2, §3.8):
Training Operator ``Succeeded`` -> SUCCEEDED and ``Failed`` -> a failure carrying the operator's reason;
RayJob ``Complete`` -> SUCCEEDED and ``Failed`` -> a failure naming ``[reason] message``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from fakeapi import FakeApiServer
from fakeapi.operator import KUBEFLOW_FAILURE, RAY_FAILURE
from flyteidl.core.execution_pb2 import TaskExecution
from flytekit.extend.backend.base_connector import ConnectorRegistry
from flytekitplugins.kubejobs.connector import SUPPORTED, KubeJobConnector
from flytekitplugins.kubejobs.wire.kinds import KINDS

FAILURES = (TaskExecution.RETRYABLE_FAILED, TaskExecution.FAILED)


def _expected_phases(task_type: str, outcome: str) -> list[Any]:
    """Phase after each operator stage (fake operator: Created/Initializing, Running, end)."""
    first = TaskExecution.INITIALIZING if task_type == "ray" else TaskExecution.QUEUED
    return [first, TaskExecution.RUNNING, TaskExecution.SUCCEEDED if outcome == "succeed" else FAILURES]


async def _step_through(server: FakeApiServer, connector: Any, meta: Any, kit: Any, expected: list[Any]) -> Any:
    """Advance the operator one stage at a time; after each, poll get() until it reports that stage."""
    last = None
    for phase in expected:
        assert server.step(only=lambda name: name == meta.name) == 1
        wanted = phase if isinstance(phase, tuple) else (phase,)
        last = await kit.get_until(connector, meta, lambda r, wanted=wanted: r.phase in wanted)
    return last


@pytest.mark.parametrize(("task_type", "version"), SUPPORTED)
@pytest.mark.parametrize("outcome", ["succeed", "fail"])
def test_lifecycle_to_the_true_final_phase(
    server: FakeApiServer, runtime: Any, kit: Any, task_type: str, version: int, outcome: Any
) -> None:
    connector = ConnectorRegistry.get_connector(task_type, version)
    assert isinstance(connector, KubeJobConnector)
    kind = KINDS[task_type]
    execution = f"e{task_type[:2]}{version}{outcome[0]}"
    meta_in = kit.metadata(execution)
    server.set_outcome(f"{execution}-n0-0", outcome)

    async def scenario() -> None:
        meta = await connector.create(kit.template(task_type, version), "s3://bucket/out", None, meta_in)
        assert (meta.group, meta.version, meta.plural, meta.namespace) == (
            kind.group,
            kind.version,
            kind.plural,
            kit.namespace,
        )
        (stored,) = server.objects(kind.group, kind.plural, kit.namespace)
        assert stored["metadata"]["name"] == meta.name and stored["kind"] == kind.kind

        first = await connector.get(meta)
        assert first.phase == TaskExecution.QUEUED
        final = await _step_through(server, connector, meta, kit, _expected_phases(task_type, outcome))
        if outcome == "succeed":
            assert final.phase == TaskExecution.SUCCEEDED
            assert final.outputs is None  # file-based outputs: propeller reads <output_prefix>/outputs.pb
        else:
            assert final.phase in FAILURES
            reason, message = RAY_FAILURE if task_type == "ray" else KUBEFLOW_FAILURE
            assert message in final.message and reason in final.message
        if task_type != "ray":  # the Go plugin links every worker pod (Ray has no default log links)
            uris = [link.uri for link in final.log_links]
            assert any(f"{meta.name}-worker-0" in uri for uri in uris)

        await connector.delete(meta)
        assert server.objects(kind.group, kind.plural) == []
        assert server.store.deletions[-1] == (kit.namespace, meta.name, "Background")
        await connector.delete(meta)  # already gone: still a success

    asyncio.run(scenario())


def test_each_task_type_and_version_is_served_by_one_connector_name() -> None:
    for task_type, version in SUPPORTED:
        connector = ConnectorRegistry.get_connector(task_type, version)
        assert connector.name == "Kubejobs Connector"
        assert (connector.task_category.name, connector.task_category.version) == (task_type, version)
    (meta,) = [m for m in ConnectorRegistry.list_connectors() if m.name == "Kubejobs Connector"]
    categories = {(c.name, c.version) for c in meta.supported_task_categories}
    assert categories == set(SUPPORTED)
    assert not meta.is_sync
