"""Idempotent create, external deletion, and the watch-backed cache (requests per polling round, 410 re-list)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from flyteidl.core.execution_pb2 import TaskExecution
from flytekit.extend.backend.base_connector import ConnectorRegistry
from flytekitplugins.kubejobs.connector import EXECUTION_LABEL, ForeignObjectError
from flytekitplugins.kubejobs.testing import FakeApiServer

G, P = "kubeflow.org", "pytorchjobs"


def _pytorch() -> Any:
    return ConnectorRegistry.get_connector("pytorch", 1)


def test_a_retried_create_adopts_the_object_it_created(server: FakeApiServer, runtime: Any, kit: Any) -> None:
    connector, meta_in = _pytorch(), kit.metadata("retried")

    async def scenario() -> None:
        first = await connector.create(kit.template("pytorch"), "s3://b/out", None, meta_in)
        again = await connector.create(kit.template("pytorch"), "s3://b/out", None, meta_in)
        assert (again.namespace, again.name) == (first.namespace, first.name)

    asyncio.run(scenario())
    (only,) = server.objects(G, P)
    assert server.responses[409] == 1 and server.requests[("POST", "POST")] == 2
    assert only["metadata"]["labels"][EXECUTION_LABEL]


def test_a_create_whose_response_was_lost_leaves_exactly_one_object(
    server: FakeApiServer, runtime: Any, kit: Any
) -> None:
    server.drop_next(1, methods={"POST"}, after_commit=True)

    async def scenario() -> None:
        meta = await _pytorch().create(kit.template("pytorch"), "s3://b/out", None, kit.metadata("lost"))
        assert meta.name == "lost-n0-0"

    asyncio.run(scenario())
    assert [o["metadata"]["name"] for o in server.objects(G, P)] == ["lost-n0-0"]


def test_a_foreign_object_holding_the_name_fails_clearly(server: FakeApiServer, runtime: Any, kit: Any) -> None:
    async def scenario() -> None:
        await _pytorch().create(kit.template("pytorch"), "s3://b/out", None, kit.metadata("taken"))

    # Someone else's object under the same name (no execution label).
    asyncio.run(scenario())
    (ours,) = server.objects(G, P)
    server.delete_externally(G, P, kit.namespace, "taken-n0-0")
    foreign = {k: v for k, v in ours.items() if k != "status"}
    foreign["metadata"] = {"name": "taken-n0-0", "labels": {"owner": "someone-else"}}
    server.store.create(server._resource(G, P), kit.namespace, foreign)

    with pytest.raises(ForeignObjectError, match=r"taken-n0-0 already exists and was not created by this task"):
        asyncio.run(scenario())
    assert server.objects(G, P)[0]["metadata"]["labels"] == {"owner": "someone-else"}  # left untouched


def test_an_object_deleted_behind_our_back_is_a_retryable_failure(
    server: FakeApiServer, runtime: Any, kit: Any
) -> None:
    connector = _pytorch()

    async def scenario() -> None:
        meta = await connector.create(kit.template("pytorch"), "s3://b/out", None, kit.metadata("gone"))
        server.step()
        server.step()

        async def running() -> bool:
            return bool((await connector.get(meta)).phase == TaskExecution.RUNNING)

        await kit.wait_until(running)
        server.delete_externally(G, P, kit.namespace, meta.name)
        last: list[Any] = []

        async def failed() -> bool:
            last[:] = [await connector.get(meta)]
            return bool(last[0].phase == TaskExecution.RETRYABLE_FAILED)

        await kit.wait_until(failed)
        assert "ResourceDeletedExternally" in last[0].message
        assert f"[{kit.namespace}/{meta.name}]" in last[0].message
        await connector.delete(meta)  # aborting a task whose object is gone succeeds

    asyncio.run(scenario())


def test_an_object_being_deleted_while_running_is_reported(server: FakeApiServer, runtime: Any, kit: Any) -> None:
    connector = _pytorch()

    async def scenario() -> None:
        meta = await connector.create(kit.template("pytorch"), "s3://b/out", None, kit.metadata("doomed"))
        server.step()
        server.store.mark_deleting(server._resource(G, P), kit.namespace, meta.name)
        last: list[Any] = []

        async def failed() -> bool:
            last[:] = [await connector.get(meta)]
            return bool(last[0].phase == TaskExecution.RETRYABLE_FAILED)

        await kit.wait_until(failed)
        assert "UnexpectedObjectDeletion" in last[0].message and "terminated in the background" in last[0].message

    asyncio.run(scenario())


def test_the_cache_serves_a_polling_round_without_api_requests(
    server: FakeApiServer, cached_runtime: Any, kit: Any
) -> None:
    connector, jobs = _pytorch(), 20

    async def scenario() -> None:
        metas = [
            await connector.create(kit.template("pytorch"), "s3://b/out", None, kit.metadata(f"poll{i}"))
            for i in range(jobs)
        ]
        informer = cached_runtime.cache.informer(connector.kind, kit.namespace)

        async def all_cached() -> bool:
            return all((found := informer.lookup(m.name)) is not None and found.obj for m in metas)

        await kit.wait_until(all_cached)
        before = server.request_total()
        phases = [(await connector.get(m)).phase for m in metas]
        assert phases == [TaskExecution.QUEUED] * jobs
        assert server.request_total() == before  # zero requests for a whole round

    asyncio.run(scenario())


def test_the_cache_relists_after_410_gone_and_sees_later_changes(
    server: FakeApiServer, cached_runtime: Any, kit: Any
) -> None:
    connector = _pytorch()

    async def scenario() -> None:
        meta = await connector.create(kit.template("pytorch"), "s3://b/out", None, kit.metadata("expiry"))
        informer = cached_runtime.cache.informer(connector.kind, kit.namespace)

        async def cached() -> bool:
            return (found := informer.lookup(meta.name)) is not None and found.obj is not None

        await kit.wait_until(cached)
        lists_before = informer.relists
        server.expire_watches()  # running watches end with 410; the old resourceVersion is gone
        for _ in range(3):
            server.step()

        async def relisted() -> bool:
            return informer.relists > lists_before

        await kit.wait_until(relisted)
        direct_gets = server.requests[("GET", "GET")]

        async def succeeded() -> bool:
            return bool((await connector.get(meta)).phase == TaskExecution.SUCCEEDED)

        await kit.wait_until(succeeded)
        assert server.requests[("GET", "GET")] == direct_gets  # served by the re-listed cache

    asyncio.run(scenario())


def test_one_malformed_object_fails_only_its_own_task(server: FakeApiServer, runtime: Any, kit: Any) -> None:
    connector = _pytorch()

    async def scenario() -> None:
        good = await connector.create(kit.template("pytorch"), "s3://b/out", None, kit.metadata("good"))
        bad = await connector.create(kit.template("pytorch"), "s3://b/out", None, kit.metadata("bad"))
        # The operator (or someone) writes a status the backend cannot read.
        res = server._resource(G, P)
        with server.store.changed:
            obj = server.store._objects[(res, kit.namespace, bad.name)]
            obj["status"] = {"conditions": "not-a-list"}
            server.store._bump(obj)
            server.store._record(res, kit.namespace, "MODIFIED", obj)
        server.step(only=lambda name: name == good.name)

        async def bad_fails_clearly() -> bool:
            try:
                await connector.get(bad)
            except ValueError as err:
                assert f"PyTorchJob {kit.namespace}/{bad.name} cannot be mapped to a phase" in str(err)
                return True
            return False

        await kit.wait_until(bad_fails_clearly)
        assert (await connector.get(good)).phase == TaskExecution.QUEUED  # the other task is unaffected
        if runtime.cache is not None:
            assert runtime.cache.informer(connector.kind, kit.namespace).lookup(good.name).obj is not None

    asyncio.run(scenario())
