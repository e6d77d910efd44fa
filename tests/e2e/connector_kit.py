"""Driving our connector against the real control plane: tasks as propeller sends them, and condition waits.

A task is a flyteidl TaskTemplate (a PyTorchJob of one master and one worker) and TaskExecutionMetadata whose
annotations tell kwok each pod's outcome and run time (`controlplane.OUTCOME`, `RUN_FOR`), so the real
Training Operator's status decides the phase the connector reports.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, Optional, TypeVar

import grpc
from flyteidl.admin.agent_pb2 import TaskExecutionMetadata as PbMeta
from flyteidl.core import identifier_pb2, tasks_pb2
from flyteidl.core.execution_pb2 import TaskExecution
from flyteidl.plugins.kubeflow import common_pb2, pytorch_pb2
from flytekit.models.task import TaskExecutionMetadata, TaskTemplate
from flytekitplugins.kubejobs.backend import BackendConfig
from flytekitplugins.kubejobs.connector.settings import ConnectorSettings
from google.protobuf.json_format import MessageToDict
from google.protobuf.struct_pb2 import Struct

from .controlplane import OUTCOME, RUN_FOR

T = TypeVar("T")
FINAL = (TaskExecution.SUCCEEDED, TaskExecution.RETRYABLE_FAILED, TaskExecution.FAILED)


def template_pb(workers: int = 1) -> tasks_pb2.TaskTemplate:
    spec = pytorch_pb2.DistributedPyTorchTrainingReplicaSpec
    custom = Struct()
    custom.update(
        MessageToDict(
            pytorch_pb2.DistributedPyTorchTrainingTask(
                worker_replicas=spec(replicas=workers),
                master_replicas=spec(replicas=1),
                run_policy=common_pb2.RunPolicy(backoff_limit=0),
            )
        )
    )
    task_id = identifier_pb2.Identifier(
        resource_type=identifier_pb2.TASK, project="flytesnacks", domain="development", name="wf.train", version="v1"
    )
    return tasks_pb2.TaskTemplate(
        id=task_id,
        type="pytorch",
        task_type_version=1,
        custom=custom,
        metadata=tasks_pb2.TaskMetadata(runtime=tasks_pb2.RuntimeMetadata(type=tasks_pb2.RuntimeMetadata.FLYTE_SDK)),
        container=tasks_pb2.Container(image="registry.example/flyte:1.0", args=["pyflyte-execute", "--inputs", "x"]),
    )


def metadata_pb(namespace: str, execution: str, outcome: str = "succeed", run_for: str = "1s") -> PbMeta:
    pb = PbMeta(namespace=namespace, annotations={OUTCOME: outcome, RUN_FOR: run_for}, k8s_service_account="default")
    tid = pb.task_execution_id
    tid.task_id.CopyFrom(
        identifier_pb2.Identifier(
            resource_type=identifier_pb2.TASK,
            project="flytesnacks",
            domain="development",
            name="wf.train",
            version="v1",
        )
    )
    tid.node_execution_id.node_id = "n0"
    ex = tid.node_execution_id.execution_id
    ex.project, ex.domain, ex.name = "flytesnacks", "development", execution
    return pb


def task(namespace: str, execution: str, outcome: str = "succeed", run_for: str = "1s") -> tuple[Any, Any]:
    """(TaskTemplate, TaskExecutionMetadata) flytekit models, as the connector service decodes them."""
    return (
        TaskTemplate.from_flyte_idl(template_pb()),
        TaskExecutionMetadata.from_flyte_idl(metadata_pb(namespace, execution, outcome, run_for)),
    )


def settings(kubeconfig: Path, **overrides: Any) -> ConnectorSettings:
    """The connector's defaults (retry policy included) except what the test names."""
    values: dict[str, Any] = dict(kubeconfig=str(kubeconfig), connect_timeout=2.0, backend=BackendConfig())
    values.update(overrides)
    return ConnectorSettings(**values)


async def until(what: str, probe: Callable[[], Awaitable[Optional[T]]], timeout: float) -> T:
    """Poll ``probe`` until it returns something other than None (a condition wait with a deadline)."""
    deadline = time.monotonic() + timeout
    while True:
        found = await probe()
        if found is not None:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        await asyncio.sleep(0.1)  # polling interval of a condition with a deadline


async def final_phase(connector: Any, meta: Any, timeout: float = 120) -> Any:
    """get() until a final phase; the last Resource."""

    async def done() -> Optional[Any]:
        resource = await connector.get(meta)
        return resource if resource.phase in FINAL else None

    return await until(f"{meta.name} to finish", done, timeout)


@contextlib.asynccontextmanager
async def connector_service() -> AsyncIterator[grpc.aio.Channel]:
    """flytekit's own connector servicers (what `pyflyte serve connector` serves) on a loopback port."""
    from flyteidl.service.agent_pb2_grpc import add_AsyncAgentServiceServicer_to_server
    from flytekit.extend.backend.connector_service import AsyncConnectorService

    server = grpc.aio.server()
    add_AsyncAgentServiceServicer_to_server(AsyncConnectorService(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            yield channel
    finally:
        await server.stop(None)
