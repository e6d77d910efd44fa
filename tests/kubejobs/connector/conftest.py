"""Fixtures for the connector tests: the fake API server on loopback and a connector runtime pointed at it.

Tasks are built as flyteidl messages (the wire format FlytePropeller sends) and turned into flytekit
models with ``from_flyte_idl``, exactly as flytekit's connector service does.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from fakeapi import FakeApiServer
from flyteidl.admin.agent_pb2 import TaskExecutionMetadata as PbMeta
from flyteidl.core import identifier_pb2, tasks_pb2
from flyteidl.plugins import mpi_pb2 as mpi_v0
from flyteidl.plugins import pytorch_pb2 as pytorch_v0
from flyteidl.plugins import ray_pb2
from flyteidl.plugins import tensorflow_pb2 as tf_v0
from flyteidl.plugins.kubeflow import common_pb2, mpi_pb2, pytorch_pb2, tensorflow_pb2
from flytekit.models.task import TaskExecutionMetadata, TaskTemplate
from flytekitplugins.kubejobs.backend import BackendConfig
from flytekitplugins.kubejobs.connector.runtime import Runtime, configure, shutdown
from flytekitplugins.kubejobs.connector.settings import ConnectorSettings
from google.protobuf.json_format import MessageToDict
from google.protobuf.struct_pb2 import Struct

collect_ignore = ["pod_tasks.py"]  # a task module for test_placeholders.py (and pyflyte-execute), not tests

NAMESPACE = "flytesnacks-development"
TEST_CAP_SECONDS = 20.0
POLL_INTERVAL = 0.001  # lets the cache and server threads run between checks


def _custom(task_type: str, version: int) -> Any:
    if task_type == "ray":
        worker = ray_pb2.WorkerGroupSpec(group_name="workers", replicas=1, min_replicas=1, max_replicas=1)
        cluster = ray_pb2.RayCluster(head_group_spec=ray_pb2.HeadGroupSpec(), worker_group_spec=[worker])
        return ray_pb2.RayJob(ray_cluster=cluster, shutdown_after_job_finishes=True)
    if version == 0:
        return {
            "pytorch": pytorch_v0.DistributedPyTorchTrainingTask(workers=2),
            "tensorflow": tf_v0.DistributedTensorflowTrainingTask(workers=2, ps_replicas=1, chief_replicas=1),
            "mpi": mpi_v0.DistributedMPITrainingTask(num_workers=2, num_launcher_replicas=1, slots=1),
        }[task_type]
    policy = common_pb2.RunPolicy(clean_pod_policy=common_pb2.CLEANPOD_POLICY_ALL)
    if task_type == "pytorch":
        return pytorch_pb2.DistributedPyTorchTrainingTask(
            worker_replicas=pytorch_pb2.DistributedPyTorchTrainingReplicaSpec(replicas=2),
            master_replicas=pytorch_pb2.DistributedPyTorchTrainingReplicaSpec(replicas=1),
            run_policy=policy,
        )
    if task_type == "tensorflow":
        spec: Any = tensorflow_pb2.DistributedTensorflowTrainingReplicaSpec
        return tensorflow_pb2.DistributedTensorflowTrainingTask(
            worker_replicas=spec(replicas=2), ps_replicas=spec(replicas=1), run_policy=policy
        )
    spec = mpi_pb2.DistributedMPITrainingReplicaSpec
    return mpi_pb2.DistributedMPITrainingTask(
        worker_replicas=spec(replicas=2), launcher_replicas=spec(replicas=1), slots=1, run_policy=policy
    )


def task_template(task_type: str, version: int | None = None) -> TaskTemplate:
    """A flytekit TaskTemplate model as the connector service decodes it from a CreateTaskRequest."""
    version = (0 if task_type == "ray" else 1) if version is None else version
    custom = Struct()
    custom.update(MessageToDict(_custom(task_type, version)))
    task_id = identifier_pb2.Identifier(
        resource_type=identifier_pb2.TASK,
        project="flytesnacks",
        domain="development",
        name=f"wf.{task_type}",
        version="v1",
    )
    args = ["pyflyte-execute", "--inputs", "s3://bucket/in/inputs.pb", "--output-prefix", "s3://bucket/out"]
    pb = tasks_pb2.TaskTemplate(
        id=task_id,
        type=task_type,
        task_type_version=version,
        custom=custom,
        metadata=tasks_pb2.TaskMetadata(runtime=tasks_pb2.RuntimeMetadata(type=tasks_pb2.RuntimeMetadata.FLYTE_SDK)),
        container=tasks_pb2.Container(image="ghcr.io/flyteorg/flytekit:py3.11-1.16.31", args=args),
    )
    return TaskTemplate.from_flyte_idl(pb)


def execution_metadata(
    execution: str, node: str = "n0", attempt: int = 0, namespace: str = NAMESPACE
) -> TaskExecutionMetadata:
    pb = PbMeta(namespace=namespace, labels={"execution-id": execution}, k8s_service_account="default")
    tid = pb.task_execution_id
    tid.task_id.CopyFrom(
        identifier_pb2.Identifier(
            resource_type=identifier_pb2.TASK, project="flytesnacks", domain="development", name="wf.task", version="v1"
        )
    )
    tid.node_execution_id.node_id = node
    ex = tid.node_execution_id.execution_id
    ex.project, ex.domain, ex.name = "flytesnacks", "development", execution
    tid.retry_attempt = attempt
    return TaskExecutionMetadata.from_flyte_idl(pb)


async def wait_until(predicate: Callable[[], Awaitable[bool]], timeout: float = TEST_CAP_SECONDS) -> None:
    """Poll real state (no fixed sleeps as synchronisation): yields to the loop between checks, bounded."""
    deadline = time.monotonic() + timeout
    while not await predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        await asyncio.sleep(POLL_INTERVAL)  # a poll interval, not a wait for something to happen


async def get_until(
    connector: Any, meta: Any, accept: Callable[[Any], bool], between: Callable[[], object] | None = None
) -> Any:
    """Poll ``connector.get(meta)`` until ``accept(resource)``; ``between`` runs after each other answer."""
    last: list[Any] = []

    async def accepted() -> bool:
        last[:] = [await connector.get(meta)]
        if accept(last[0]):
            return True
        if between is not None:
            between()
        return False

    await wait_until(accepted)
    return last[0]


@pytest.fixture
def server(crd_dir: Path, schemas: Any) -> Iterator[FakeApiServer]:
    with FakeApiServer(crd_dir=crd_dir, schemas=schemas, max_watch_seconds=5) as fake:
        yield fake


def fast_settings(server: FakeApiServer, tmp_path: Path, **overrides: Any) -> ConnectorSettings:
    kubeconfig = tmp_path / "kubeconfig.yaml"
    kubeconfig.write_text(yaml.safe_dump(server.kubeconfig()))
    values: dict[str, Any] = dict(
        kubeconfig=str(kubeconfig),
        connect_timeout=2.0,
        request_timeout=5.0,
        watch_timeout=5.0,
        retry_attempts=30,
        retry_base_delay=0.005,
        retry_max_delay=0.05,
        retry_deadline=15.0,
        workers=16,
        backend=BackendConfig(),
    )
    values.update(overrides)
    return ConnectorSettings(**values)


@pytest.fixture(params=[True, False], ids=["cache", "nocache"])
def runtime(request: pytest.FixtureRequest, server: FakeApiServer, tmp_path: Path) -> Iterator[Runtime]:
    rt = configure(fast_settings(server, tmp_path, cache=request.param))
    yield rt
    shutdown()


@pytest.fixture
def cached_runtime(server: FakeApiServer, tmp_path: Path) -> Iterator[Runtime]:
    rt = configure(fast_settings(server, tmp_path, cache=True, input_prefixes=(str(tmp_path),)))
    yield rt
    shutdown()


class Kit:
    """The helpers above, for test modules (conftest modules are not importable under importlib mode)."""

    namespace = NAMESPACE
    template = staticmethod(task_template)
    metadata = staticmethod(execution_metadata)
    wait_until = staticmethod(wait_until)
    get_until = staticmethod(get_until)
    settings = staticmethod(fast_settings)


@pytest.fixture
def kit() -> type[Kit]:
    return Kit
