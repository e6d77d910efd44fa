"""How the connectors are found and served: the flytekit entry point, and flytekit's own gRPC service.

``pyflyte serve connector`` builds the servicers below (``AsyncConnectorService``) on a grpc.aio server;
here the same servicers run on a loopback port and are called through the generated gRPC stub, so
requests travel as real protobuf over HTTP/2 into the connector and out to the fake API server.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from e2e.connector_kit import connector_service
from fakeapi import FakeApiServer
from flyteidl.admin.agent_pb2 import (
    CreateTaskRequest,
    DeleteTaskRequest,
    GetTaskRequest,
    ListAgentsRequest,
    TaskCategory,
)
from flyteidl.core.execution_pb2 import TaskExecution
from flyteidl.service.agent_pb2_grpc import (
    AgentMetadataServiceStub,
    AsyncAgentServiceStub,
    add_AgentMetadataServiceServicer_to_server,
    add_AsyncAgentServiceServicer_to_server,
)
from flytekitplugins.kubejobs.connector import SUPPORTED


def test_import_flytekit_registers_the_connectors_without_heavy_imports() -> None:
    code = (
        "import json, sys, flytekit\n"
        "from flytekit.extend.backend.base_connector import ConnectorRegistry as R\n"
        "cats = sorted([c.name, c.version] for m in R.list_connectors() if m.name == 'Kubejobs Connector'"
        " for c in m.supported_task_categories)\n"
        "heavy = [m for m in ('kubernetes.client', 'flytekitplugins.kubejobs.backend', 'jsonschema')"
        " if m in sys.modules]\n"
        "print(json.dumps({'categories': cats, 'heavy': heavy}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    report = json.loads(out.strip().splitlines()[-1])
    assert report["categories"] == sorted([t, v] for t, v in SUPPORTED)
    assert report["heavy"] == []


def test_flytekit_grpc_service_creates_polls_and_deletes(server: FakeApiServer, runtime: Any, kit: Any) -> None:
    from flytekit.extend.backend.connector_service import AsyncConnectorService, ConnectorMetadataService

    template = kit.template("ray").to_flyte_idl()
    metadata = kit.metadata("grpc").to_flyte_idl()

    async def scenario() -> None:
        grpc_server = grpc.aio.server()
        add_AsyncAgentServiceServicer_to_server(AsyncConnectorService(), grpc_server)
        add_AgentMetadataServiceServicer_to_server(ConnectorMetadataService(), grpc_server)
        port = grpc_server.add_insecure_port("127.0.0.1:0")
        await grpc_server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                # What propeller's connector plugin asks at start-up to learn the versioned task types.
                listed = await AgentMetadataServiceStub(channel).ListAgents(ListAgentsRequest())
                (ours,) = [a for a in listed.agents if a.name == "Kubejobs Connector"]
                assert {(c.name, c.version) for c in ours.supported_task_categories} == set(SUPPORTED)
                assert not ours.is_sync
                stub = AsyncAgentServiceStub(channel)
                created = await stub.CreateTask(
                    CreateTaskRequest(template=template, output_prefix="s3://b/out", task_execution_metadata=metadata)
                )
                meta = json.loads(created.resource_meta)
                assert (meta["group"], meta["plural"], meta["name"]) == ("ray.io", "rayjobs", "grpc-n0-0")
                category = TaskCategory(name="ray", version=0)
                request = GetTaskRequest(task_category=category, resource_meta=created.resource_meta)
                assert (await stub.GetTask(request)).resource.phase == TaskExecution.QUEUED
                for _ in range(3):
                    server.step()

                async def succeeded() -> bool:
                    return bool((await stub.GetTask(request)).resource.phase == TaskExecution.SUCCEEDED)

                await kit.wait_until(succeeded)
                await stub.DeleteTask(DeleteTaskRequest(task_category=category, resource_meta=created.resource_meta))
                assert server.objects("ray.io", "rayjobs") == []
        finally:
            await grpc_server.stop(None)

    asyncio.run(scenario())


def _unreachable_settings(tmp_path: Any, **overrides: Any) -> Any:
    """Settings whose API server nobody answers at (a closed port): any API call fails as ``ApiUnavailable``."""
    import socket

    from flytekitplugins.kubejobs.backend import BackendConfig
    from flytekitplugins.kubejobs.connector.settings import ConnectorSettings

    with socket.socket() as probe:  # a port nothing listens on: every connection is refused
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    kubeconfig = tmp_path / "kubeconfig.yaml"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": f"https://127.0.0.1:{port}"}}],
                "users": [{"name": "u", "user": {}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    return ConnectorSettings(
        kubeconfig=str(kubeconfig), cache=False, retry_deadline=1.0, backend=BackendConfig(), **overrides
    )


@contextlib.asynccontextmanager
async def _service() -> AsyncIterator[AsyncAgentServiceStub]:
    """flytekit's ``AsyncConnectorService`` on a loopback port, and a stub calling it."""
    async with connector_service() as channel:
        yield AsyncAgentServiceStub(channel)


@pytest.mark.parametrize(
    ("case", "error"),
    [
        ("namespace-not-allowed", "TaskRefused: namespace 'flytesnacks-development'"),
        ("no-container", "BuildError: unable to create container"),
    ],
)
def test_a_refused_task_is_created_as_a_permanent_failure_without_any_api_call(
    tmp_path: Any, kit: Any, case: str, error: str
) -> None:
    """Propeller 1.16 retries every CreateTask error; a refusal must instead reach it as GetTask ``FAILED``.
    The API server is unreachable: any API call on the way would fail the test with ``UNAVAILABLE``."""
    from flytekitplugins.kubejobs.connector.runtime import configure, shutdown

    overrides: dict[str, Any] = {"namespaces": ("elsewhere",)} if case == "namespace-not-allowed" else {}
    configure(_unreachable_settings(tmp_path, **overrides))
    template = kit.template("pytorch").to_flyte_idl()
    if case == "no-container":
        template.ClearField("container")
    request = CreateTaskRequest(
        template=template, output_prefix="s3://b/out", task_execution_metadata=kit.metadata("codes").to_flyte_idl()
    )
    category = TaskCategory(name="pytorch", version=1)

    async def scenario() -> tuple[bytes, Any]:
        async with _service() as stub:
            created = await stub.CreateTask(request)
            got = await stub.GetTask(GetTaskRequest(task_category=category, resource_meta=created.resource_meta))
            await stub.DeleteTask(DeleteTaskRequest(task_category=category, resource_meta=created.resource_meta))
            return created.resource_meta, got.resource

    try:
        resource_meta, resource = asyncio.run(scenario())
    finally:
        shutdown()
    meta = json.loads(resource_meta)
    assert error in meta["refused"] and (meta["namespace"], meta["name"]) == ("", "")
    assert resource.phase == TaskExecution.FAILED  # permanent: propeller does not re-attempt it
    assert resource.message.startswith("[TaskRefused] ") and error in resource.message, resource.message
    assert dict(resource.custom_info) == {"refused": True}


def test_a_forged_refused_resource_meta_only_fails_its_own_task(tmp_path: Any, kit: Any) -> None:
    """An attacker's ``refused`` metadata naming a foreign namespace, with a huge multi-line message: GetTask
    answers a bounded one-line failure, DeleteTask does nothing; neither makes an API call."""
    from flytekitplugins.kubejobs.connector.connector import MAX_REFUSAL_CHARS
    from flytekitplugins.kubejobs.connector.runtime import configure, shutdown

    configure(_unreachable_settings(tmp_path, namespaces=("team-a",)))
    forged = json.dumps(
        {
            "group": "kubeflow.org",
            "version": "v1",
            "plural": "pytorchjobs",
            "namespace": "kube-system",
            "name": "victim",
            "refused": "SUCCEEDED\n[fake] all good " + "x" * 100_000,
        }
    ).encode()
    category = TaskCategory(name="pytorch", version=1)

    async def scenario() -> Any:
        async with _service() as stub:
            await stub.DeleteTask(DeleteTaskRequest(task_category=category, resource_meta=forged))
            return (await stub.GetTask(GetTaskRequest(task_category=category, resource_meta=forged))).resource

    try:
        resource = asyncio.run(scenario())
    finally:
        shutdown()
    assert resource.phase == TaskExecution.FAILED
    assert "\n" not in resource.message and len(resource.message) <= len("[TaskRefused] ") + MAX_REFUSAL_CHARS


def test_an_unreachable_api_server_stays_a_retryable_unavailable_error(tmp_path: Any, kit: Any) -> None:
    """A transient fault is an error propeller retries (the attempt, and a gRPC retryPolicy on UNAVAILABLE)."""
    from flytekitplugins.kubejobs.connector.runtime import configure, shutdown

    configure(_unreachable_settings(tmp_path))
    request = CreateTaskRequest(
        template=kit.template("pytorch").to_flyte_idl(),
        output_prefix="s3://b/out",
        task_execution_metadata=kit.metadata("codes").to_flyte_idl(),
    )

    async def scenario() -> grpc.aio.AioRpcError:
        async with _service() as stub:
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await stub.CreateTask(request)
            return info.value

    try:
        failure = asyncio.run(scenario())
    finally:
        shutdown()
    assert failure.code() == grpc.StatusCode.UNAVAILABLE, (failure.code(), failure.details())
    assert "ApiUnavailable: 0 " in failure.details() and "Traceback" not in failure.details()
