"""How the connectors are found and served: the flytekit entry point, and flytekit's own gRPC service.

``pyflyte serve connector`` builds the servicers below (``AsyncConnectorService``) on a grpc.aio server;
here the same servicers run on a loopback port and are called through the generated gRPC stub, so
requests travel as real protobuf over HTTP/2 into the connector and out to the fake API server.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from typing import Any

import grpc
import pytest
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


@pytest.mark.parametrize(
    ("case", "code", "error"),
    [
        ("namespace-not-allowed", grpc.StatusCode.INVALID_ARGUMENT, "TaskRefused: namespace 'flytesnacks-development'"),
        ("no-container", grpc.StatusCode.INVALID_ARGUMENT, "BuildError: unable to create container"),
        ("api-unreachable", grpc.StatusCode.UNAVAILABLE, "ApiUnavailable: 0 "),
    ],
)
def test_errors_reach_the_grpc_caller_with_their_codes(
    tmp_path: Any, kit: Any, case: str, code: grpc.StatusCode, error: str
) -> None:
    """Through flytekit's own service: a refused task, and an API server nobody answers at (a closed port)."""
    import socket

    from flytekit.extend.backend.connector_service import AsyncConnectorService
    from flytekitplugins.kubejobs.connector.runtime import configure, shutdown

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
    overrides: dict[str, Any] = {"namespaces": ("elsewhere",)} if case == "namespace-not-allowed" else {}
    from flytekitplugins.kubejobs.backend import BackendConfig
    from flytekitplugins.kubejobs.connector.config import ConnectorSettings

    settings = ConnectorSettings(
        kubeconfig=str(kubeconfig), cache=False, retry_deadline=1.0, backend=BackendConfig(), **overrides
    )
    configure(settings)
    template = kit.template("pytorch").to_flyte_idl()
    if case == "no-container":
        template.ClearField("container")
    request = CreateTaskRequest(
        template=template, output_prefix="s3://b/out", task_execution_metadata=kit.metadata("codes").to_flyte_idl()
    )

    async def scenario() -> grpc.aio.AioRpcError:
        grpc_server = grpc.aio.server()
        add_AsyncAgentServiceServicer_to_server(AsyncConnectorService(), grpc_server)
        grpc_port = grpc_server.add_insecure_port("127.0.0.1:0")
        await grpc_server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
                with pytest.raises(grpc.aio.AioRpcError) as info:
                    await AsyncAgentServiceStub(channel).CreateTask(request)
                return info.value
        finally:
            await grpc_server.stop(None)

    try:
        failure = asyncio.run(scenario())
    finally:
        shutdown()
    assert failure.code() == code, (failure.code(), failure.details())
    assert error in failure.details() and "Traceback" not in failure.details()
