"""The fake API server speaks the Kubernetes REST protocol: checked with the official kubernetes client.

Expected behaviour comes from the Kubernetes API conventions (status codes, Status bodies, watch
events, 410 Gone) and from the operators' CRD schemas (statuses the fake operator writes must
fit the CRDs' ``status`` schemas).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import urllib3
from fakeapi import OUTCOMES, FakeApiServer
from fakeapi.operator import stages_for
from kubernetes import client, watch

G, V, NS, P = "kubeflow.org", "v1", "team-a", "pytorchjobs"


def _job(name: str, replicas: Any = 1, labels: dict[str, str] | None = None) -> dict[str, Any]:
    container = {"name": "pytorch", "image": "img:1", "args": ["python", "train.py"]}
    role = {"replicas": replicas, "restartPolicy": "Never", "template": {"spec": {"containers": [container]}}}
    return {
        "apiVersion": f"{G}/{V}",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"pytorchReplicaSpecs": {"Worker": role}, "runPolicy": {}},
        "status": {"conditions": [{"type": "Succeeded", "status": "True"}]},
    }


@pytest.fixture
def server(crd_dir: Path, schemas: Any) -> Iterator[FakeApiServer]:
    with FakeApiServer(crd_dir=crd_dir, schemas=schemas, max_watch_seconds=2) as fake:
        yield fake


@pytest.fixture
def api(server: FakeApiServer) -> Iterator[client.CustomObjectsApi]:
    cfg = client.Configuration(host=server.url)
    cfg.retries = False
    api_client = client.ApiClient(cfg)
    yield client.CustomObjectsApi(api_client)
    api_client.close()


def _error(fn: Any, *args: Any, **kwargs: Any) -> client.ApiException:
    with pytest.raises(client.ApiException) as info:
        fn(*args, **kwargs)
    return info.value


def test_binds_loopback_on_an_ephemeral_port(server: FakeApiServer) -> None:
    host, port = server._httpd.server_address[:2]  # type: ignore[union-attr]
    assert host == "127.0.0.1" and port > 0
    assert server.url == f"http://127.0.0.1:{port}"


def test_create_get_list_delete_follow_the_api_conventions(server: FakeApiServer, api: Any) -> None:
    created = api.create_namespaced_custom_object(G, V, NS, P, _job("job-a", labels={"team": "a"}))
    meta = created["metadata"]
    assert meta["namespace"] == NS and meta["uid"] and meta["creationTimestamp"].endswith("Z")
    assert "status" not in created  # the status subresource: create ignores status
    api.create_namespaced_custom_object(G, V, NS, P, _job("job-b"))
    first = int(meta["resourceVersion"])

    conflict = _error(api.create_namespaced_custom_object, G, V, NS, P, _job("job-a"))
    body = json.loads(conflict.body)
    assert (conflict.status, body["kind"], body["reason"]) == (409, "Status", "AlreadyExists")
    assert body["message"] == 'pytorchjobs.kubeflow.org "job-a" already exists'

    assert api.get_namespaced_custom_object(G, V, NS, P, "job-a")["metadata"]["uid"] == meta["uid"]
    listed = api.list_namespaced_custom_object(G, V, NS, P)
    assert listed["kind"] == "PyTorchJobList"
    assert sorted(i["metadata"]["name"] for i in listed["items"]) == ["job-a", "job-b"]
    assert int(listed["metadata"]["resourceVersion"]) > first
    selected = api.list_namespaced_custom_object(G, V, NS, P, label_selector="team=a")["items"]
    assert [i["metadata"]["name"] for i in selected] == ["job-a"]
    everywhere = api.list_cluster_custom_object(G, V, P)["items"]
    assert len(everywhere) == 2
    assert api.list_namespaced_custom_object(G, V, "other", P)["items"] == []

    api.delete_namespaced_custom_object(G, V, NS, P, "job-a", propagation_policy="Background")
    assert server.store.deletions[-1] == (NS, "job-a", "Background")
    missing = _error(api.get_namespaced_custom_object, G, V, NS, P, "job-a")
    assert (missing.status, json.loads(missing.body)["reason"]) == (404, "NotFound")
    assert _error(api.delete_namespaced_custom_object, G, V, NS, P, "job-a").status == 404


def test_objects_are_validated_against_the_crd_schemas(api: Any) -> None:
    invalid = _error(api.create_namespaced_custom_object, G, V, NS, P, _job("bad", replicas="two"))
    body = json.loads(invalid.body)
    assert (invalid.status, body["reason"]) == (422, "Invalid")
    assert "replicas" in body["message"]
    wrong_kind = dict(_job("wrong"), kind="TFJob")
    assert _error(api.create_namespaced_custom_object, G, V, NS, P, wrong_kind).status == 400
    assert _error(api.create_namespaced_custom_object, G, V, NS, P, _job("Not_A_Name")).status == 422


def test_watch_streams_changes_from_a_resource_version_and_expires_with_410(server: FakeApiServer, api: Any) -> None:
    rv = api.create_namespaced_custom_object(G, V, NS, P, _job("w"))["metadata"]["resourceVersion"]
    assert server.step() == 1
    w = watch.Watch()
    events = list(
        w.stream(
            api.list_namespaced_custom_object,
            G,
            V,
            NS,
            P,
            resource_version=rv,
            timeout_seconds=1,
            allow_watch_bookmarks=True,
        )
    )
    assert [e["type"] for e in events] == ["MODIFIED", "BOOKMARK"]
    assert events[0]["raw_object"]["status"]["conditions"][0]["type"] == "Created"
    # no resourceVersion: the current state as ADDED events first
    fresh = list(w.stream(api.list_namespaced_custom_object, G, V, NS, P, timeout_seconds=1))
    assert [e["type"] for e in fresh] == ["ADDED"]

    server.expire_watches()
    with pytest.raises(client.ApiException) as gone:
        list(w.stream(api.list_namespaced_custom_object, G, V, NS, P, resource_version=rv, timeout_seconds=1))
    assert gone.value.status == 410
    relisted = api.list_namespaced_custom_object(G, V, NS, P)["metadata"]["resourceVersion"]
    api.delete_namespaced_custom_object(G, V, NS, P, "w")
    after = list(w.stream(api.list_namespaced_custom_object, G, V, NS, P, resource_version=relisted, timeout_seconds=1))
    assert [e["type"] for e in after] == ["DELETED"]


def test_watch_history_is_bounded(crd_dir: Path, schemas: Any) -> None:
    with FakeApiServer(crd_dir=crd_dir, schemas=schemas, history=3, max_watch_seconds=1) as small:
        api_client = client.ApiClient(client.Configuration(host=small.url))
        api = client.CustomObjectsApi(api_client)
        for i in range(5):
            api.create_namespaced_custom_object(G, V, NS, P, _job(f"h{i}"))
        with pytest.raises(client.ApiException) as gone:
            list(
                watch.Watch().stream(
                    api.list_namespaced_custom_object, G, V, NS, P, resource_version="1", timeout_seconds=1
                )
            )
        assert gone.value.status == 410
        api_client.close()


def test_injected_faults(server: FakeApiServer, api: Any) -> None:
    server.fail_next(1, status=429, retry_after=1.5)
    throttled = _error(api.list_namespaced_custom_object, G, V, NS, P)
    assert throttled.status == 429 and throttled.headers["Retry-After"] == "1.5"
    server.fail_next(2, status=500, methods={"POST"})
    assert api.list_namespaced_custom_object(G, V, NS, P)["items"] == []  # GETs unaffected
    assert _error(api.create_namespaced_custom_object, G, V, NS, P, _job("f")).status == 500
    assert _error(api.create_namespaced_custom_object, G, V, NS, P, _job("f")).status == 500
    server.drop_next(1)
    with pytest.raises(urllib3.exceptions.ProtocolError):
        api.list_namespaced_custom_object(G, V, NS, P)
    # the write lands, the response is lost
    server.drop_next(1, methods={"POST"}, after_commit=True)
    with pytest.raises(urllib3.exceptions.ProtocolError):
        api.create_namespaced_custom_object(G, V, NS, P, _job("committed"))
    assert [o["metadata"]["name"] for o in server.objects(G, P, NS)] == ["committed"]
    # a namespace RBAC refuses: 403 Forbidden there, other namespaces served
    server.fail_next(2, status=403, namespaces={"locked"})
    assert api.list_namespaced_custom_object(G, V, NS, P)["items"]
    forbidden = _error(api.list_namespaced_custom_object, G, V, "locked", P)
    assert (forbidden.status, json.loads(forbidden.body)["reason"]) == (403, "Forbidden")


@pytest.mark.parametrize("plural", ["pytorchjobs", "tfjobs", "mpijobs", "rayjobs"])
@pytest.mark.parametrize("outcome", OUTCOMES)
def test_operator_statuses_fit_the_crd_status_schema(schemas: Any, plural: str, outcome: Any) -> None:
    group = "ray.io" if plural == "rayjobs" else "kubeflow.org"
    kind = {"pytorchjobs": "PyTorchJob", "tfjobs": "TFJob", "mpijobs": "MPIJob", "rayjobs": "RayJob"}[plural]
    schema = schemas.schema((group, "v1", kind))["properties"]["status"]
    checker = jsonschema.Draft4Validator.FORMAT_CHECKER
    for status in stages_for(group, outcome, "2026-01-01T00:00:00Z", "job-1"):
        jsonschema.Draft4Validator(schema, format_checker=checker).validate(status)


def test_operator_plays_each_outcome(server: FakeApiServer, api: Any) -> None:
    server.set_outcome("bad", "fail")
    server.set_outcome("stuck", "hang")
    for name in ("good", "bad", "stuck"):
        api.create_namespaced_custom_object(G, V, NS, P, _job(name))
    steps = 0
    while server.step():
        steps += 1
        assert steps < 10
    assert server.store.settled()

    def last(name: str) -> str:
        conditions = api.get_namespaced_custom_object(G, V, NS, P, name)["status"]["conditions"]
        return [c["type"] for c in conditions if c["status"] == "True"][-1]

    assert (last("good"), last("bad"), last("stuck")) == ("Succeeded", "Failed", "Running")


def test_serves_the_crd_objects_of_the_crd_files(schemas: Any, server: FakeApiServer) -> None:
    cfg = client.Configuration(host=server.url)
    ext = client.ApiextensionsV1Api(client.ApiClient(cfg))
    crd = ext.read_custom_resource_definition("pytorchjobs.kubeflow.org", _preload_content=False)
    body = json.loads(crd.data)
    version = body["spec"]["versions"][0]
    assert (body["spec"]["group"], body["spec"]["names"]["kind"], version["name"]) == (
        "kubeflow.org",
        "PyTorchJob",
        "v1",
    )
    assert version["schema"]["openAPIV3Schema"] == schemas.schema(("kubeflow.org", "v1", "PyTorchJob"))
    names = {
        c["metadata"]["name"]
        for c in json.loads(ext.list_custom_resource_definition(_preload_content=False).data)["items"]
    }
    assert {"pytorchjobs.kubeflow.org", "tfjobs.kubeflow.org", "mpijobs.kubeflow.org", "rayjobs.ray.io"} <= names
