"""The connector's watch cache survives a kube-apiserver restart and a forced etcd compaction.

These tests run on a control plane of their own (restarting the shared one would fail other tests' calls),
started once for this module. Its kube-apiserver runs without its watch cache (`--watch-cache=false`), so
a watch reaches etcd: a watch from a compacted revision gets 410 Gone, as a watch older than the cache's
window does on a busy cluster. Every task must still reach its true phase, and the cache itself (not only
the GET fallback) must hold that phase.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import shutil
import tempfile
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flyteidl.core.execution_pb2 import TaskExecution
from flytekit.extend.backend.base_connector import ConnectorRegistry
from flytekitplugins.kubejobs.connector.runtime import Runtime, configure, shutdown

from . import connector_kit as kit
from .controlplane import down, ensure_up, restart_apiserver

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def own_cluster() -> Iterator[dict[str, Any]]:
    directory = Path(tempfile.mkdtemp(prefix="kubejobs-e2e-watch-"))
    state = ensure_up(directory, os.getpid(), apiserver_args=("--watch-cache=false",))
    print(json.dumps({"own_control_plane_start_seconds": state["start_seconds"]}))
    ok = False
    try:
        yield state
        ok = True
    finally:
        down(directory)
        if ok:
            shutil.rmtree(directory, ignore_errors=True)
        else:
            print(f"control plane logs kept in {directory / 'logs'}")


@pytest.fixture
def own_namespace(own_cluster: dict[str, Any], request: pytest.FixtureRequest) -> Iterator[str]:
    name = f"e2e-watch-{request.node.name.split('_')[-1][:20]}-{os.urandom(3).hex()}".lower()
    api = admin_api(own_cluster)
    api.call("POST", "/api/v1/namespaces", {"metadata": {"name": name}})
    yield name
    api.call("DELETE", f"/api/v1/namespaces/{name}", ok=(200, 202, 404))


def admin_api(state: dict[str, Any]) -> Any:
    import yaml

    from .controlplane import Api
    from .pki import KeyPair

    user = yaml.safe_load(Path(state["kubeconfig"]).read_text())["users"][0]["user"]
    return Api(state["server"], Path(state["ca"]), KeyPair(Path(user["client-certificate"]), Path(user["client-key"])))


def etcd(state: dict[str, Any], path: str, body: dict[str, Any]) -> dict[str, Any]:
    """One call to etcd's gRPC gateway (JSON over HTTP)."""
    request = urllib.request.Request(state["etcd"] + path, data=json.dumps(body).encode(), method="POST")
    with urllib.request.urlopen(request, timeout=30) as response:
        answer: dict[str, Any] = json.loads(response.read())
        return answer


def compact_etcd(state: dict[str, Any]) -> int:
    """Compact etcd's history up to its current revision; returns that revision."""
    revision = int(etcd(state, "/v3/kv/range", {"key": base64.b64encode(b"/").decode()})["header"]["revision"])
    etcd(state, "/v3/kv/compaction", {"revision": str(revision), "physical": True})
    return revision


def runtime_on(state: dict[str, Any], **overrides: Any) -> Runtime:
    return configure(kit.settings(Path(state["kubeconfig"]), cache=True, **overrides))


def cached_status(rt: Runtime, namespace: str, name: str) -> Any:
    assert rt.cache is not None
    found = rt.cache.lookup(ConnectorRegistry.get_connector("pytorch", 1).kind, namespace, name)
    return ((found.obj or {}).get("status") if found else None) or {}


def finished(status: dict[str, Any]) -> bool:
    return any(c["type"] in ("Succeeded", "Failed") and c["status"] == "True" for c in status.get("conditions", []))


def test_the_cache_survives_an_apiserver_restart(own_cluster: dict[str, Any], own_namespace: str) -> None:
    rt = runtime_on(own_cluster)
    connector = ConnectorRegistry.get_connector("pytorch", 1)
    ns = own_namespace

    async def scenario() -> dict[str, Any]:
        before = []
        for outcome in ("succeed", "fail"):  # running across the restart
            template, metadata = kit.task(ns, f"across-{outcome}", outcome=outcome, run_for="40s")
            before.append(await connector.create(template, "s3://b/out", None, metadata))

        async def cached() -> Any:
            return True if all(cached_status(rt, ns, m.name).get("conditions") for m in before) else None

        await kit.until("the cache to hold both jobs' status", cached, 120)
        await asyncio.to_thread(restart_apiserver, own_cluster)
        assert not any(finished(cached_status(rt, ns, m.name)) for m in before), "the jobs ended before the restart"
        template, metadata = kit.task(ns, "after-restart")  # and a job created after it
        after = await connector.create(template, "s3://b/out", None, metadata)

        async def all_final_in_cache() -> Any:
            return True if all(finished(cached_status(rt, ns, m.name)) for m in (*before, after)) else None

        await kit.until("the cache to see every job finish", all_final_in_cache, 180)
        phases = {m.name: (await kit.final_phase(connector, m)).phase for m in (*before, after)}
        assert rt.cache is not None
        informer = rt.cache.informer(connector.kind, ns)
        assert informer is not None
        return {"phases": phases, "relists": informer.relists}

    try:
        result = asyncio.run(scenario())
    finally:
        shutdown()
    print(json.dumps({"apiserver_restart": {"relists": result["relists"]}}))
    phases = result["phases"]
    assert phases["across-succeed-n0-0"] == phases["after-restart-n0-0"] == TaskExecution.SUCCEEDED, phases
    assert phases["across-fail-n0-0"] in (TaskExecution.RETRYABLE_FAILED, TaskExecution.FAILED), phases


def test_the_cache_relists_after_a_forced_etcd_compaction(own_cluster: dict[str, Any], own_namespace: str) -> None:
    # Short watch requests: the informer re-watches from its last resourceVersion soon after the compaction.
    rt = runtime_on(own_cluster, watch_timeout=3.0)
    connector = ConnectorRegistry.get_connector("pytorch", 1)
    ns = own_namespace
    api = admin_api(own_cluster)

    async def scenario() -> tuple[int, int, Any]:
        template, metadata = kit.task(ns, "compacted", run_for="15s")
        meta = await connector.create(template, "s3://b/out", None, metadata)
        assert rt.cache is not None
        informer = rt.cache.informer(connector.kind, ns)
        assert informer is not None

        async def cached() -> Any:
            return True if cached_status(rt, ns, meta.name).get("conditions") else None

        await kit.until("the cache to hold the job's status", cached, 120)
        relists = informer.relists

        async def relisted() -> Any:
            return True if informer.relists > relists else None

        # Writes the informer's label selector does not see move etcd's revision past the informer's, so the
        # compaction removes the revision it watches from. A job event (the operator writing status) that lands
        # between these writes and the informer's next watch moves the informer past the compacted revision:
        # its watch is then valid and no 410 comes. So compact again after such an event, a bounded number of times.
        for round_ in range(5):
            for i in range(3):
                api.call("POST", f"/api/v1/namespaces/{ns}/configmaps", {"metadata": {"name": f"bump-{round_}-{i}"}})
            revision = compact_etcd(own_cluster)
            with contextlib.suppress(AssertionError):  # kit.until's timeout: no 410 this round
                await kit.until("the informer to re-list after 410 Gone", relisted, 15)
                break
        assert informer.relists > relists, "no 410 Gone reached the informer after 5 compactions"

        async def final_in_cache() -> Any:
            return True if finished(cached_status(rt, ns, meta.name)) else None

        await kit.until("the cache to see the job finish", final_in_cache, 120)
        return revision, informer.relists, await kit.final_phase(connector, meta)

    try:
        revision, relists, final = asyncio.run(scenario())
    finally:
        shutdown()
    print(json.dumps({"etcd_compaction": {"revision": revision, "relists": relists}}))
    assert final.phase == TaskExecution.SUCCEEDED, final.message
