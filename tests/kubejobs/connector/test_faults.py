"""Faults the real API server behind the fault proxy cannot replay cheaply, on the fake API server.

200 concurrent tasks with faults injected (counted exactly in the fake's object store), DELETEs dropped after
commit, the secondary attempts cap, and a namespace refused by RBAC. 500s, 429 with Retry-After, dropped and
stalled connections, outages and watch drops run against the real server in tests/e2e/test_api_faults.py.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest
from fakeapi import FakeApiServer
from flyteidl.core.execution_pb2 import TaskExecution
from flytekit.extend.backend.base_connector import ConnectorRegistry
from flytekitplugins.kubejobs.connector.errors import ApiUnavailable, Forbidden
from flytekitplugins.kubejobs.wire.kinds import KINDS

TERMINAL = {
    "succeed": (TaskExecution.SUCCEEDED,),
    "fail": (TaskExecution.RETRYABLE_FAILED, TaskExecution.FAILED),
}


async def _until_terminal(connector: Any, meta: Any, server: FakeApiServer, kit: Any) -> Any:
    """Poll get() until a final phase, moving the fake operator one stage on after each other answer."""
    final = (TaskExecution.SUCCEEDED, TaskExecution.RETRYABLE_FAILED, TaskExecution.FAILED)
    return await kit.get_until(
        connector, meta, lambda r: r.phase in final, lambda: server.step(only=lambda name: name == meta.name)
    )


def test_retry_attempts_when_set_cap_the_retries_before_the_deadline(
    server: FakeApiServer, tmp_path: Any, kit: Any
) -> None:
    from flytekitplugins.kubejobs.connector.runtime import configure, shutdown

    configure(kit.settings(server, tmp_path, cache=False, retry_attempts=3))
    try:
        server.fail_next(100, status=503)
        connector = ConnectorRegistry.get_connector("mpi", 1)
        with pytest.raises(ApiUnavailable) as info:
            asyncio.run(connector.create(kit.template("mpi"), "s3://b/out", None, kit.metadata("down")))
        assert info.value.status == 503
        assert server.requests[("POST", "POST")] == 3  # retry_attempts, no more
        server.clear_faults()
        assert server.objects("kubeflow.org", "mpijobs") == []
    finally:
        shutdown()


def test_two_hundred_concurrent_tasks_with_faults(server: FakeApiServer, cached_runtime: Any, kit: Any) -> None:
    rng = random.Random(7)
    kinds = [("pytorch", 1), ("tensorflow", 1), ("mpi", 1), ("ray", 0), ("pytorch", 0)]
    tasks = []
    for i in range(200):
        task_type, version = kinds[i % len(kinds)]
        outcome = rng.choice(["succeed", "fail"])
        execution = f"c{i:03d}"
        server.set_outcome(f"{execution}-n0-0", outcome)
        tasks.append((task_type, version, outcome, execution))

    async def one(task_type: str, version: int, outcome: str, execution: str) -> None:
        connector = ConnectorRegistry.get_connector(task_type, version)
        meta = await connector.create(kit.template(task_type, version), "s3://b/out", None, kit.metadata(execution))
        final = await _until_terminal(connector, meta, server, kit)
        assert final.phase in TERMINAL[outcome], (execution, outcome, final.phase, final.message)
        await connector.delete(meta)

    async def faults() -> None:
        for round_ in range(12):  # bounded fault schedule, spread over the run as objects get created

            async def progressed(round_: int = round_) -> bool:
                return server.store.created >= round_ * 15

            await kit.wait_until(progressed)
            [
                lambda: server.fail_next(5, status=500),
                lambda: server.fail_next(5, status=429, retry_after=0.01),
                lambda: server.drop_next(3),
                lambda: server.drop_next(2, methods={"POST"}, after_commit=True),
            ][round_ % 4]()
        server.expire_watches()  # and one watch expiry while tasks are in flight

    async def scenario() -> None:
        results = await asyncio.gather(faults(), *(one(*t) for t in tasks), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        assert not errors, errors[:3]

    asyncio.run(scenario())
    for kind in {KINDS[t] for t, _ in kinds}:
        assert server.objects(kind.group, kind.plural) == []  # zero leaked objects
    assert server.store.created == 200  # one object per task: no duplicates
    assert len(server.store.deletions) == 200


def test_aborted_tasks_leave_no_job_behind(server: FakeApiServer, runtime: Any, kit: Any) -> None:
    async def scenario() -> None:
        metas = []
        for i, task_type in enumerate(["pytorch", "tensorflow", "mpi", "ray"] * 3):
            connector = ConnectorRegistry.get_connector(task_type, 0 if task_type == "ray" else 1)
            metas.append(
                (connector, await connector.create(kit.template(task_type), "s3://b/o", None, kit.metadata(f"a{i}")))
            )
        server.step()
        server.fail_next(4, status=500, methods={"DELETE"})
        server.drop_next(2, methods={"DELETE"}, after_commit=True)
        await asyncio.gather(*(connector.delete(meta) for connector, meta in metas))

    asyncio.run(scenario())
    assert server.store.count() == 0


def test_a_namespace_the_api_refuses_fails_its_own_tasks_only(
    server: FakeApiServer, cached_runtime: Any, kit: Any
) -> None:
    server.fail_next(10**6, status=403, namespaces={"forbidden"})  # RBAC refuses every request there
    connector = ConnectorRegistry.get_connector("pytorch", 1)

    async def scenario() -> None:
        with pytest.raises(Forbidden) as info:
            await connector.create(
                kit.template("pytorch"), "s3://b/out", None, kit.metadata("no", namespace="forbidden")
            )
        assert info.value.status == 403  # not retried: a refusal is no transient fault
        assert server.requests[("POST", "POST")] == 1
        meta = await connector.create(kit.template("pytorch"), "s3://b/out", None, kit.metadata("yes"))
        final = await _until_terminal(connector, meta, server, kit)
        assert final.phase == TaskExecution.SUCCEEDED
        (informer,) = [i for i in cached_runtime.cache.informers() if i.namespace == "forbidden"]
        assert not informer.synced.is_set()  # its cache keeps failing, alone

    asyncio.run(scenario())
    assert [o["metadata"]["name"] for o in server.objects("kubeflow.org", "pytorchjobs")] == ["yes-n0-0"]
