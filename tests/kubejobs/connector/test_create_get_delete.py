"""Idempotent create, external deletion, and the watch-backed cache (requests per polling round, 410 re-list)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from fakeapi import FakeApiServer
from flyteidl.core.execution_pb2 import TaskExecution
from flytekit.extend.backend.base_connector import ConnectorRegistry
from flytekitplugins.kubejobs.connector import EXECUTION_LABEL, ForeignObjectError

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
        await kit.get_until(connector, meta, lambda r: r.phase == TaskExecution.RUNNING)
        server.delete_externally(G, P, kit.namespace, meta.name)
        last = await kit.get_until(connector, meta, lambda r: r.phase == TaskExecution.RETRYABLE_FAILED)
        assert "ResourceDeletedExternally" in last.message
        assert f"[{kit.namespace}/{meta.name}]" in last.message
        await connector.delete(meta)  # aborting a task whose object is gone succeeds

    asyncio.run(scenario())


def test_an_object_being_deleted_while_running_is_reported(server: FakeApiServer, runtime: Any, kit: Any) -> None:
    connector = _pytorch()

    async def scenario() -> None:
        meta = await connector.create(kit.template("pytorch"), "s3://b/out", None, kit.metadata("doomed"))
        server.step()
        server.store.mark_deleting(server._resource(G, P), kit.namespace, meta.name)
        last = await kit.get_until(connector, meta, lambda r: r.phase == TaskExecution.RETRYABLE_FAILED)
        assert "UnexpectedObjectDeletion" in last.message and "terminated in the background" in last.message

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


def test_a_task_naming_a_pod_template_gets_the_one_the_settings_file_gives(
    server: FakeApiServer, tmp_path: Any, kit: Any
) -> None:
    from flytekit.models.task import TaskTemplate
    from flytekitplugins.kubejobs.connector.runtime import configure, shutdown
    from flytekitplugins.kubejobs.connector.settings import ConnectorSettings

    manifest = {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {"name": "gpu-base"},
        "template": {
            "metadata": {"labels": {"team": "ml"}},
            "spec": {"nodeSelector": {"pool": "gpu"}, "containers": []},
        },
    }
    backend = ConnectorSettings.from_mapping({"pod-templates": [manifest]}).backend
    pb = kit.template("pytorch").to_flyte_idl()
    pb.metadata.pod_template_name = "gpu-base"
    named = TaskTemplate.from_flyte_idl(pb)
    pb.metadata.pod_template_name = "not-configured"
    unknown = TaskTemplate.from_flyte_idl(pb)
    configure(kit.settings(server, tmp_path, cache=False, backend=backend))
    try:
        asyncio.run(_pytorch().create(named, "s3://b/out", None, kit.metadata("based")))
        with pytest.raises(ValueError, match=r"PodTemplate 'not-configured' does not exist"):
            asyncio.run(_pytorch().submit(unknown, "s3://b/out", None, kit.metadata("unbased")))
    finally:
        shutdown()
    (obj,) = server.objects(G, P)
    for role in ("Master", "Worker"):
        pod = obj["spec"]["pytorchReplicaSpecs"][role]["template"]
        assert pod["spec"]["nodeSelector"] == {"pool": "gpu"} and pod["metadata"]["labels"]["team"] == "ml"


def test_the_cache_is_bounded_and_serves_what_it_cannot_hold_by_direct_gets(
    server: FakeApiServer, tmp_path: Any, kit: Any
) -> None:
    from flytekitplugins.kubejobs.connector.runtime import configure, shutdown

    jobs, bound = 6, 3
    rt = configure(kit.settings(server, tmp_path, cache=True, cache_max_objects=bound))
    connector = _pytorch()

    async def scenario() -> None:
        metas = [
            await connector.create(kit.template("pytorch"), "s3://b/out", None, kit.metadata(f"bound{i}"))
            for i in range(jobs)
        ]
        assert rt.cache is not None
        informer = rt.cache.informer(connector.kind, kit.namespace)
        assert informer is not None

        async def full() -> bool:
            return len(informer) == bound and informer.synced.is_set()

        await kit.wait_until(full)
        gets = server.requests[("GET", "GET")]
        phases = [(await connector.get(m)).phase for m in metas]
        assert phases == [TaskExecution.QUEUED] * jobs
        assert server.requests[("GET", "GET")] - gets == jobs - bound  # the jobs over the bound: one GET each
        assert len(informer) == bound

    try:
        asyncio.run(scenario())
    finally:
        shutdown()


def test_a_namespace_outside_the_allow_list_is_refused_before_any_request(
    server: FakeApiServer, tmp_path: Any, kit: Any
) -> None:
    from flytekitplugins.kubejobs.connector.runtime import configure, shutdown

    configure(kit.settings(server, tmp_path, cache=True, namespaces=(kit.namespace,)))
    try:
        outside = kit.metadata("outside", namespace="team-b")
        with pytest.raises(ValueError, match=r"namespace 'team-b' is not one of the connector's namespaces"):
            asyncio.run(_pytorch().submit(kit.template("pytorch"), "s3://b/out", None, outside))
        assert server.request_total() == 0
        asyncio.run(_pytorch().create(kit.template("pytorch"), "s3://b/out", None, kit.metadata("inside")))
    finally:
        shutdown()
    assert [o["metadata"]["namespace"] for o in server.objects(G, P)] == [kit.namespace]


def test_a_rayjobs_head_endpoint_reaches_custom_info(server: FakeApiServer, runtime: Any, kit: Any) -> None:
    connector = ConnectorRegistry.get_connector("ray", 0)
    service = "rj-raycluster-abcde-head-svc"

    async def scenario() -> None:
        meta = await connector.create(kit.template("ray"), "s3://b/out", None, kit.metadata("head"))
        res = server._resource("ray.io", "rayjobs")
        with server.store.changed:  # KubeRay's status once the cluster is up (the fake runs no operator)
            obj = server.store._objects[(res, kit.namespace, meta.name)]
            obj["status"] = {
                "jobDeploymentStatus": "Running",
                "jobStatus": "RUNNING",
                "rayClusterName": "rj-raycluster-abcde",
                "dashboardURL": f"{service}.{kit.namespace}.svc.cluster.local:8265",
                "rayClusterStatus": {
                    "head": {"serviceName": service, "serviceIP": "10.96.0.42"},
                    "endpoints": {"head": "31781", "dashboard": "31849", "redis": "32540"},
                },
            }
            server.store._bump(obj)
            server.store._record(res, kit.namespace, "MODIFIED", obj)
        got = await kit.get_until(connector, meta, lambda r: r.phase == TaskExecution.RUNNING)
        custom = dict(got.custom_info)
        assert (custom["kind"], custom["name"], custom["headServiceName"]) == ("RayJob", meta.name, service)
        assert (custom["clientNodePort"], custom["dashboardNodePort"], custom["gcsNodePort"]) == (
            "31781",
            "31849",
            "32540",
        )
        assert [log.name for log in got.log_links] == ["Ray Dashboard"]

    asyncio.run(scenario())
