"""The connector's watch cache stays bounded whatever callers send, and shuts down at once (real control plane).

Each informer is one thread and one open watch on the API server. Forged ResourceMetas naming many namespaces
must not grow them: namespaces outside the allow-list start none, without an allow-list at most
`cache-max-informers` run (other calls GET directly), idle ones stop, and `shutdown()` ends them all in well
under a second. Threads are counted with `threading.enumerate()`; waits are conditions with a deadline.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path
from typing import Any, Optional

import pytest
from flyteidl.core.execution_pb2 import TaskExecution
from flytekit.extend.backend.base_connector import ConnectorRegistry
from flytekitplugins.kubejobs.backend import BackendConfig
from flytekitplugins.kubejobs.connector import KubeJobMetadata
from flytekitplugins.kubejobs.connector.cache import JobCache
from flytekitplugins.kubejobs.connector.runtime import MANAGED_BY, MANAGED_BY_LABEL, Runtime, configure, shutdown
from flytekitplugins.kubejobs.connector.settings import ConnectorSettings
from flytekitplugins.kubejobs.wire.kinds import KINDS

from .controlplane import wait_for

pytestmark = pytest.mark.slow

FORGED_CALLS = 200


def settings(cluster: dict[str, Any], tmp_path: Path, **overrides: Any) -> ConnectorSettings:
    key = tmp_path / "key"
    key.write_bytes(b"k" * 32)
    values: dict[str, Any] = dict(
        kubeconfig=cluster["kubeconfig"], ownership_key_file=str(key), retry_deadline=20.0, backend=BackendConfig()
    )
    values.update(overrides)
    return ConnectorSettings(**values)


def forged_meta(namespace: str, name: str = "victim-n0-0") -> KubeJobMetadata:
    """A ResourceMeta decoded from bytes a caller wrote, as flytekit's service decodes GetTask's."""
    data = {"group": "kubeflow.org", "version": "v1", "plural": "pytorchjobs", "namespace": namespace, "name": name}
    meta: KubeJobMetadata = KubeJobMetadata.decode(json.dumps(data).encode())
    return meta


def cache_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("kubejobs-cache") and t.is_alive()]


def api_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("kubejobs-api") and t.is_alive()]


def no_threads_left() -> Optional[bool]:
    return True if not cache_threads() and not api_threads() else None


@pytest.fixture(autouse=True)
def _stopped() -> Any:
    yield
    shutdown()


def test_two_hundred_forged_namespaces_start_no_informer(
    cluster: dict[str, Any], namespace: str, tmp_path: Path
) -> None:
    configure(settings(cluster, tmp_path, namespaces=(namespace,)))
    connector = ConnectorRegistry.get_connector("pytorch", 1)
    before = {t.ident for t in threading.enumerate()}

    async def attack() -> None:
        for i in range(FORGED_CALLS):
            with pytest.raises(ValueError, match="is not one of the connector's namespaces"):
                await connector.get(forged_meta(f"team-{i}"))
            with pytest.raises(ValueError, match="is not one of the connector's namespaces"):
                await connector.delete(forged_meta(f"team-{i}"))

    asyncio.run(attack())
    assert {t.ident for t in threading.enumerate()} - before == set()  # not one thread more


def test_without_an_allow_list_informers_are_capped_and_stop_within_a_second(
    cluster: dict[str, Any], tmp_path: Path
) -> None:
    cap = 4
    rt = configure(settings(cluster, tmp_path, namespaces=(), cache_max_informers=cap))
    connector = ConnectorRegistry.get_connector("pytorch", 1)

    async def calls() -> None:
        for i in range(FORGED_CALLS):  # namespaces that do not exist: every job there is "deleted"
            resource = await connector.get(forged_meta(f"absent-{i}"))
            assert resource.phase == TaskExecution.RETRYABLE_FAILED

    asyncio.run(calls())
    assert rt.cache is not None
    informers = rt.cache.informers()
    assert len(informers) == cap
    assert len(cache_threads()) == cap + 1  # the informers and one reaper
    wait_for(
        "every informer blocked reading its watch", lambda: True if all(i.watching for i in informers) else None, 30
    )
    started = time.monotonic()
    shutdown()
    elapsed = time.monotonic() - started
    print(json.dumps({"informers": cap, "shutdown_seconds": round(elapsed, 3)}))
    assert elapsed < 1.0
    assert cache_threads() == []  # none left behind, at once
    wait_for("the API client's worker threads gone", no_threads_left, 5)


def test_an_idle_informer_stops_and_a_later_call_starts_a_fresh_one(
    cluster: dict[str, Any], namespace: str, tmp_path: Path
) -> None:
    rt = configure(settings(cluster, tmp_path, namespaces=(namespace,), cache_idle_timeout=0.2))
    connector = ConnectorRegistry.get_connector("pytorch", 1)
    asyncio.run(connector.get(forged_meta(namespace)))
    assert rt.cache is not None
    (first,) = rt.cache.informers()
    wait_for("the idle informer stopped", lambda: True if not first.running and not rt.cache.informers() else None, 10)  # type: ignore[union-attr]
    assert [t.name for t in cache_threads()] == ["kubejobs-cache-reaper"]
    asyncio.run(connector.get(forged_meta(namespace)))
    (second,) = rt.cache.informers()
    assert second is not first and second.running


def test_eviction_follows_use_not_age(cluster: dict[str, Any], tmp_path: Path) -> None:
    """With a fake clock: only the informer no call used for the idle timeout is stopped."""
    rt = Runtime(settings(cluster, tmp_path, cache=False))
    now = [1000.0]
    selector = f"{MANAGED_BY_LABEL}={MANAGED_BY}"
    cache = JobCache(rt.client, selector, 100, idle_timeout=60.0, clock=lambda: now[0])
    try:
        kind = KINDS["pytorch"]
        used, unused = cache.informer(kind, "ns-used"), cache.informer(kind, "ns-unused")
        assert used is not None and unused is not None
        now[0] += 50
        cache.informer(kind, "ns-used")
        now[0] += 20  # unused: 70 s idle; used: 20 s
        assert cache.evict_idle() == [unused]
        assert not unused.running and used.running
        assert cache.informers() == [used]
    finally:
        cache.close()
        rt.close()
    assert cache_threads() == []


def test_an_informer_refused_by_rbac_stops_and_calls_read_directly(
    cluster: dict[str, Any], k8s: Any, namespace: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The allow-list lets the namespace through, RBAC does not (a ServiceAccount token without any grant):
    the informer's list gets 403 and stops for good instead of retrying forever; get() then reads with a
    direct GET, which reports the 403 itself."""
    import logging

    from flytekitplugins.kubejobs.connector.errors import Forbidden
    from kubernetes import client

    from .controlplane import write_kubeconfig

    core = client.CoreV1Api(k8s)
    account = "no-grant"
    core.create_namespaced_service_account(
        namespace, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name=account))
    )
    issued = core.create_namespaced_service_account_token(
        account,
        namespace,
        client.AuthenticationV1TokenRequest(
            spec=client.V1TokenRequestSpec(audiences=["https://kubernetes.default.svc"], expiration_seconds=600)
        ),
    ).status
    assert issued is not None and issued.token
    kubeconfig = write_kubeconfig(
        tmp_path / "kubeconfig.yaml", cluster["server"], Path(cluster["ca"]), account, None, issued.token
    )
    rt = configure(settings(cluster, tmp_path, kubeconfig=str(kubeconfig), namespaces=(namespace,)))
    connector = ConnectorRegistry.get_connector("pytorch", 1)
    try:
        with caplog.at_level(logging.WARNING, logger="flytekitplugins.kubejobs.connector.cache"):
            assert rt.cache is not None
            informer = rt.cache.informer(KINDS["pytorch"], namespace)
            assert informer is not None
            wait_for("the forbidden informer to stop", lambda: True if not informer.running else None, 30)
            assert informer.forbidden is not None and informer.forbidden.status == 403
            assert rt.cache.informer(KINDS["pytorch"], namespace) is informer  # not restarted by the next call
            with pytest.raises(Forbidden, match="403"):
                asyncio.run(connector.get(forged_meta(namespace)))
        messages = [r.getMessage() for r in caplog.records]
        assert [m for m in messages if f"cache for pytorchjobs/{namespace} stopped: 403" in m], messages
        assert not [m for m in messages if "retrying in" in m], messages  # given up at once, not retried
    finally:
        shutdown()
