"""API faults between the connector and the real kube-apiserver, injected by our fault proxy (faultproxy.py).

The connector runs with its default retry policy (0.2 s doubling to 10 s) and, in the outage tests, a
`retry-deadline` of 30 s instead of the default 60 s (the same policy, half the waiting); it is called
over gRPC through flytekit's own connector service, as propeller calls it. What a test asserts is read from
the real API server (the object exists once, with our labels) and from the gRPC status propeller receives.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from flyteidl.admin.agent_pb2 import CreateTaskRequest, DeleteTaskRequest, GetTaskRequest, TaskCategory
from flyteidl.core.execution_pb2 import TaskExecution
from flyteidl.service.agent_pb2_grpc import AsyncAgentServiceStub
from flytekit.extend.backend.base_connector import ConnectorRegistry
from flytekitplugins.kubejobs.connector.runtime import Runtime, configure, shutdown

from . import connector_kit as kit
from .faultproxy import FaultProxy

pytestmark = pytest.mark.slow
DEADLINE = 30.0  # the outage tests' retry-deadline (default 60 s): a 10 s outage ends within 20 s, jitter included


@pytest.fixture
def proxy(cluster: dict[str, Any], tmp_path: Path) -> Iterator[FaultProxy]:
    with FaultProxy(cluster, tmp_path) as fault_proxy:
        yield fault_proxy


def through(proxy: FaultProxy, tmp_path: Path, **overrides: Any) -> Runtime:
    return configure(kit.settings(proxy.kubeconfig(tmp_path / "kubeconfig.yaml"), **overrides))


def jobs(k8s: Any, namespace: str) -> list[dict[str, Any]]:
    from kubernetes import client

    listed = client.CustomObjectsApi(k8s).list_namespaced_custom_object("kubeflow.org", "v1", namespace, "pytorchjobs")
    assert isinstance(listed, dict)
    return list(listed["items"])


async def create_over_grpc(namespace: str, execution: str) -> tuple[float, Any, Any]:
    """CreateTask through flytekit's service: (seconds taken, response or None, grpc error or None)."""
    request = CreateTaskRequest(
        template=kit.template_pb(),
        output_prefix="s3://b/out",
        task_execution_metadata=kit.metadata_pb(namespace, execution),
    )
    async with kit.connector_service() as channel:
        started = time.monotonic()
        try:
            response = await AsyncAgentServiceStub(channel).CreateTask(request)
            return time.monotonic() - started, response, None
        except grpc.aio.AioRpcError as err:
            return time.monotonic() - started, None, err


@pytest.mark.parametrize(("seconds", "mode"), [(5, "drop"), (10, "503")], ids=["5s-dropped", "10s-503"])
def test_a_create_rides_out_an_outage_shorter_than_the_deadline(
    proxy: FaultProxy, tmp_path: Path, k8s: Any, namespace: str, seconds: int, mode: str
) -> None:
    through(proxy, tmp_path, cache=False, retry_deadline=DEADLINE)
    try:
        proxy.outage(seconds, mode=mode)
        took, response, error = asyncio.run(create_over_grpc(namespace, f"outage{seconds}"))
    finally:
        shutdown()
    print(json.dumps({"outage_seconds": seconds, "mode": mode, "create_seconds": round(took, 1)}))
    assert error is None, error
    assert seconds <= took < DEADLINE, took  # it waited the outage out, within the deadline
    assert json.loads(response.resource_meta)["name"] == f"outage{seconds}-n0-0"
    (job,) = jobs(k8s, namespace)  # created exactly once on the real server
    assert job["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "flytekitplugins-kubejobs"
    assert proxy.stats.responses[503 if mode == "503" else 0] >= 3


def test_a_longer_outage_fails_as_unavailable_at_the_deadline_not_earlier(
    proxy: FaultProxy, tmp_path: Path, k8s: Any, namespace: str
) -> None:
    through(proxy, tmp_path, cache=False, retry_deadline=DEADLINE)
    try:
        proxy.outage(DEADLINE + 10, mode="503")
        took, _, error = asyncio.run(create_over_grpc(namespace, "outage-long"))
    finally:
        proxy.clear()
        shutdown()
    print(json.dumps({"outage_seconds": DEADLINE + 10, "create_seconds": round(took, 1)}))
    assert error is not None
    assert error.code() == grpc.StatusCode.UNAVAILABLE, (error.code(), error.details())
    assert "ApiUnavailable: 503" in error.details()
    assert DEADLINE <= took < DEADLINE + 5, took
    assert jobs(k8s, namespace) == []  # nothing was created behind the error


@pytest.mark.parametrize(
    ("status", "retry_after", "at_least"), [(429, 2.0, 4.0), (500, None, 0.0)], ids=["429-retry-after", "500"]
)
def test_throttling_and_server_errors_are_retried_and_retry_after_is_honoured(
    proxy: FaultProxy, tmp_path: Path, k8s: Any, namespace: str, status: int, retry_after: Any, at_least: float
) -> None:
    rt = through(proxy, tmp_path, cache=False)
    connector = ConnectorRegistry.get_connector("pytorch", 1)
    template, metadata = kit.task(namespace, f"thr{status}", run_for="1s")

    async def scenario() -> tuple[float, Any]:
        proxy.fail(2, status, retry_after=retry_after, methods={"POST"})
        started = time.monotonic()
        meta = await connector.create(template, "s3://b/out", None, metadata)
        took = time.monotonic() - started
        proxy.fail(2, status, retry_after=retry_after, methods={"GET"})
        final = await kit.final_phase(connector, meta)
        proxy.fail(2, status, retry_after=retry_after, methods={"DELETE"})
        await connector.delete(meta)
        return took, final

    try:
        took, final = asyncio.run(scenario())
    finally:
        shutdown()
    assert rt.settings.retry_base_delay < 0.5  # so only Retry-After can explain the waits below
    assert took >= at_least, took  # two 429s, each wait at least the 2 s Retry-After asks
    assert final.phase == TaskExecution.SUCCEEDED, final.message
    assert proxy.stats.requests[("POST", "create")] == 3 and proxy.stats.responses[status] == 6
    assert [j for j in jobs(k8s, namespace) if not j["metadata"].get("deletionTimestamp")] == []


def test_a_stalled_request_is_cut_by_the_request_timeout_and_retried(
    proxy: FaultProxy, tmp_path: Path, k8s: Any, namespace: str
) -> None:
    through(proxy, tmp_path, cache=False, request_timeout=2.0)
    connector = ConnectorRegistry.get_connector("pytorch", 1)
    template, metadata = kit.task(namespace, "stalled")
    proxy.stall(1, 120.0, methods={"POST"})  # the API server "never" answers this POST
    started = time.monotonic()
    try:
        asyncio.run(connector.create(template, "s3://b/out", None, metadata))
    finally:
        shutdown()
    took = time.monotonic() - started
    assert 2.0 <= took < 10.0, took  # cut at the 2 s read timeout, not waited out
    assert proxy.stats.requests[("POST", "create")] == 2
    assert len(jobs(k8s, namespace)) == 1


def test_the_cache_resumes_its_watch_after_dropped_connections(
    proxy: FaultProxy, tmp_path: Path, k8s: Any, namespace: str
) -> None:
    rt = through(proxy, tmp_path, cache=True)
    connector = ConnectorRegistry.get_connector("pytorch", 1)
    template, metadata = kit.task(namespace, "dropped", run_for="8s")

    async def scenario() -> Any:
        meta = await connector.create(template, "s3://b/out", None, metadata)
        assert rt.cache is not None
        informer = rt.cache.informer(connector.kind, namespace)
        assert informer is not None

        async def watching() -> Any:
            return True if informer.synced.is_set() and proxy.open_watches() else None

        for _ in range(3):  # cut the watch three times while the job runs; each time a new one must come
            await kit.until("an open watch", watching, 30)
            watches_before = proxy.stats.requests[("GET", "watch")]
            assert proxy.drop_watches() >= 1

            async def rewatched(before: int = watches_before) -> Any:
                return True if proxy.stats.requests[("GET", "watch")] > before else None

            await kit.until("the watch to reconnect", rewatched, 30)

        async def cached_final() -> Any:
            found = informer.lookup(meta.name)
            conditions = ((found.obj or {}).get("status") or {}).get("conditions") or [] if found else []
            return True if any(c["type"] == "Succeeded" and c["status"] == "True" for c in conditions) else None

        await kit.until("the cache to see the job succeed", cached_final, 120)
        final = await kit.final_phase(connector, meta)
        return informer, final

    try:
        informer, final = asyncio.run(scenario())
        relists = informer.relists
    finally:
        shutdown()
    assert final.phase == TaskExecution.SUCCEEDED
    assert relists == 1  # every reconnect resumed from its resourceVersion: no re-list
    assert proxy.stats.requests[("GET", "watch")] >= 4


@pytest.mark.parametrize("refusal", ["namespace-not-allowed", "build-error"])
def test_a_refused_task_reaches_propeller_as_a_permanent_failure(
    proxy: FaultProxy, tmp_path: Path, k8s: Any, namespace: str, refusal: str
) -> None:
    """Propeller 1.16 re-attempts a task on any CreateTask error: a refusal is CreateTask OK, then GetTask
    FAILED (permanent) with the refusal's message, and nothing reaches the API server."""
    overrides: dict[str, Any] = {"cache": False}
    if refusal == "namespace-not-allowed":
        overrides["namespaces"] = ("somewhere-else",)
    through(proxy, tmp_path, **overrides)
    template = kit.template_pb()
    if refusal == "build-error":
        template.ClearField("container")  # the backend's BuildError: nothing to run
    request = CreateTaskRequest(
        template=template, output_prefix="s3://b/out", task_execution_metadata=kit.metadata_pb(namespace, "refused")
    )
    category = TaskCategory(name="pytorch", version=1)

    async def scenario() -> Any:
        async with kit.connector_service() as channel:
            stub = AsyncAgentServiceStub(channel)
            created = await stub.CreateTask(request)
            meta = created.resource_meta
            resource = (await stub.GetTask(GetTaskRequest(task_category=category, resource_meta=meta))).resource
            await stub.DeleteTask(DeleteTaskRequest(task_category=category, resource_meta=meta))
            return resource

    try:
        resource = asyncio.run(scenario())
    finally:
        shutdown()
    expected = "TaskRefused: namespace" if refusal == "namespace-not-allowed" else "BuildError: "
    assert resource.phase == TaskExecution.FAILED and expected in resource.message, resource.message
    assert dict(resource.custom_info) == {"refused": True}
    assert jobs(k8s, namespace) == []
    assert sum(proxy.stats.requests.values()) == 0  # refused before any API request, get and delete included


def test_the_connectors_own_rbac_refusal_stays_a_permission_denied_error(
    proxy: FaultProxy, tmp_path: Path, k8s: Any, namespace: str
) -> None:
    """A 403 on the POST is the connector's grant, an operator's fix: an error (propeller re-attempts within
    the task's retries), PERMISSION_DENIED, not retried by the connector itself."""
    through(proxy, tmp_path, cache=False)
    proxy.fail(1, 403, methods={"POST"})
    request = CreateTaskRequest(
        template=kit.template_pb(),
        output_prefix="s3://b/out",
        task_execution_metadata=kit.metadata_pb(namespace, "rbac"),
    )

    async def scenario() -> grpc.aio.AioRpcError:
        async with kit.connector_service() as channel:
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await AsyncAgentServiceStub(channel).CreateTask(request)
            return info.value

    try:
        error = asyncio.run(scenario())
    finally:
        shutdown()
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED, (error.code(), error.details())
    assert "Traceback" not in error.details()  # the error's message, not flytekit's INTERNAL traceback
    assert jobs(k8s, namespace) == []
    assert proxy.stats.requests[("POST", "create")] == 1  # a refusal is not retried


def test_close_ends_a_cache_thread_stuck_in_a_request_the_api_server_never_answers(
    proxy: FaultProxy, tmp_path: Path, namespace: str
) -> None:
    """The informer's first list is held unanswered (its read timeout is 60 s): close() cuts it within 1 s."""
    import threading

    from flytekitplugins.kubejobs.wire.kinds import KINDS

    rt = through(proxy, tmp_path, cache=True, request_timeout=60.0)
    proxy.stall(1, 120.0, methods={"GET"})
    assert rt.cache is not None
    informer = rt.cache.informer(KINDS["pytorch"], namespace)
    assert informer is not None

    async def listing() -> Any:
        return True if proxy.stats.requests[("GET", "list")] >= 1 else None

    asyncio.run(kit.until("the informer's list to reach the proxy", listing, 30))
    started = time.monotonic()
    shutdown()
    took = time.monotonic() - started
    stuck = [t.name for t in threading.enumerate() if t.name.startswith("kubejobs-cache")]
    assert took < 1.5 and stuck == [] and not informer.running, (took, stuck)
    assert not informer.synced.is_set()  # it was inside the stalled list, not past it
