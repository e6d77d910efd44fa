"""The only module that talks to Kubernetes: a thin async wrapper over the official ``kubernetes`` client.

Blocking client calls run in a bounded thread pool; the cache threads' list and watch requests go through a
connection pool of their own, whose sockets ``abort_cache_requests`` shuts down (a stop cuts even a request
the API server never answers). Every call has a (connect, read) timeout and runs
under the connector's one ``RetryPolicy`` (``retry.py``): transient failures are retried until the
settings' ``retry-deadline``; every failure surfaces as one of the ``ApiError`` types of ``errors.py``.
The kubernetes client's own urllib3 retries are switched off so this policy is the only one.

>>> from urllib3.exceptions import ProtocolError
>>> type(_to_api_error(ProtocolError("Connection aborted."))).__name__
'ApiUnavailable'
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional, TypeVar, Union

from .errors import ApiError, ApiUnavailable, NotFound, api_error
from .retry import RetryPolicy

if TYPE_CHECKING:
    from ..wire.kinds import JobKind
    from .settings import ConnectorSettings

__all__ = ["CONFIGMAPS", "ApiError", "CoreResource", "KubeClient"]

log = logging.getLogger(__name__)
T = TypeVar("T")
Obj = dict[str, Any]


@dataclass(frozen=True)
class CoreResource:
    """A core-group (``/api/v1``) resource the connector reads besides its job kinds."""

    plural: str
    group: str = ""
    version: str = "v1"


#: The ConfigMaps holding compute templates (read, listed and watched in the connector's own namespace only).
CONFIGMAPS = CoreResource("configmaps")
Watched = Union["JobKind", CoreResource]


def _as_obj(value: object) -> Obj:
    if not isinstance(value, dict):
        raise ApiUnavailable(0, "BadResponse", f"expected a JSON object, got {type(value).__name__}")
    return value


def _tracked_connections(api_client: Any) -> weakref.WeakSet[Any]:
    """Every connection ``api_client``'s urllib3 pool opens from now on (weakly: a closed one drops out).

    urllib3 hands a blocked request's connection to no one else, so its socket can only be reached by
    recording the connection when it connects: the pool classes are swapped for subclasses that do.
    """
    from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

    opened: weakref.WeakSet[Any] = weakref.WeakSet()

    def recording(pool_cls: type[HTTPConnectionPool]) -> type[HTTPConnectionPool]:
        base: Any = pool_cls.ConnectionCls

        class Recorded(base):  # type: ignore[misc]
            def connect(self) -> None:
                super().connect()
                opened.add(self)

        return type(pool_cls.__name__, (pool_cls,), {"ConnectionCls": Recorded})

    manager = api_client.rest_client.pool_manager
    manager.pool_classes_by_scheme = {"http": recording(HTTPConnectionPool), "https": recording(HTTPSConnectionPool)}
    return opened


def _to_api_error(exc: BaseException) -> ApiError:
    """Map client exceptions (ApiException, urllib3 errors, OSError) to an ApiError; others are re-raised."""
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    if isinstance(exc, ApiException):
        message, retry_after = "", None
        try:
            message = json.loads(exc.body or "{}").get("message", "")
        except (ValueError, AttributeError):
            message = str(exc.body or "")
        header = (exc.headers or {}).get("Retry-After")
        if header:
            try:
                retry_after = float(str(header))
            except ValueError:
                retry_after = None
        return api_error(int(exc.status or 0), str(exc.reason or ""), message, retry_after)
    if isinstance(exc, (HTTPError, OSError)):
        return ApiUnavailable(0, type(exc).__name__, str(exc))
    raise exc


class KubeClient:
    """Custom-object calls on one cluster. Thread-safe; usable from any event loop."""

    def __init__(self, settings: ConnectorSettings):
        from kubernetes import client

        from .kubeconfig import client_configuration

        self.settings = settings
        cfg = client_configuration(settings.kubeconfig, settings.context)
        cfg.retries = False
        cfg.connection_pool_maxsize = settings.workers + 8  # workers plus the caches' watches
        self._api_client = client.ApiClient(cfg)
        self._api = client.CustomObjectsApi(self._api_client)
        self._cache_api_client = client.ApiClient(cfg)  # the cache threads' list and watch requests only
        self._cache_connections = _tracked_connections(self._cache_api_client)
        self._cache_api = client.CustomObjectsApi(self._cache_api_client)
        self._pool = ThreadPoolExecutor(settings.workers, thread_name_prefix="kubejobs-api")
        self._timeout = (settings.connect_timeout, settings.request_timeout)
        self.retry = RetryPolicy.from_settings(settings)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.abort_cache_requests()
        self._api_client.close()  # type: ignore[no-untyped-call]
        self._cache_api_client.close()  # type: ignore[no-untyped-call]

    def abort_cache_requests(self) -> int:
        """Shut down the socket of every open cache connection: a thread blocked in a list or watch request
        (even one the API server never answers) gets an error at once. Returns how many were shut down.
        A connection still connecting (TCP or TLS handshake) is not reached: ``connect-timeout`` bounds it."""
        cut = 0
        for connection in list(self._cache_connections):
            sock = getattr(connection, "sock", None)
            if sock is None:
                continue
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
                cut += 1
        return cut

    # -- retry policy ----------------------------------------------------------------------------------
    def _delay(
        self, attempt: int, err: ApiError, started: float, policy: Optional[RetryPolicy] = None
    ) -> Optional[float]:
        """Seconds to wait before the next attempt, or None when the call must give up."""
        delay = (policy or self.retry).next_delay(attempt, err, time.monotonic() - started)
        if delay is not None:
            log.info("kubernetes API call failed (%s); retry %d in %.2fs", err, attempt + 1, delay)
        return delay

    async def _call(self, fn: Callable[[], T], policy: Optional[RetryPolicy] = None) -> T:
        loop = asyncio.get_running_loop()
        started = time.monotonic()
        attempt = 0
        while True:
            try:
                return await loop.run_in_executor(self._pool, fn)
            except Exception as exc:
                err = _to_api_error(exc)
            delay = self._delay(attempt, err, started, policy)
            if delay is None:
                raise err
            await asyncio.sleep(delay)
            attempt += 1

    def call_sync(self, fn: Callable[[], T], stop: Optional[threading.Event] = None) -> T:
        """The same retry policy for a blocking caller (the cache threads); ``stop`` cuts waits short."""
        started = time.monotonic()
        attempt = 0
        while True:
            try:
                return fn()
            except Exception as exc:
                err = _to_api_error(exc)
            delay = self._delay(attempt, err, started)
            if delay is None or (stop is not None and stop.wait(delay)):
                raise err
            if stop is None:
                time.sleep(delay)
            attempt += 1

    # -- calls -----------------------------------------------------------------------------------------
    async def _object_call(self, method: str, *args: Any, retry: Optional[RetryPolicy] = None, **kwargs: Any) -> Any:
        """``CustomObjectsApi.<method>(*args)`` with this client's timeout, under ``retry`` (default: the
        settings' policy)."""
        fn = getattr(self._api, method)
        return await self._call(lambda: fn(*args, _request_timeout=self._timeout, **kwargs), retry)

    async def create(self, kind: JobKind, namespace: str, body: Obj) -> Obj:
        created = await self._object_call(
            "create_namespaced_custom_object", kind.group, kind.version, namespace, kind.plural, body
        )
        return _as_obj(created)

    async def get(self, kind: JobKind, namespace: str, name: str, retry: Optional[RetryPolicy] = None) -> Obj:
        found = await self._object_call(
            "get_namespaced_custom_object", kind.group, kind.version, namespace, kind.plural, name, retry=retry
        )
        return _as_obj(found)

    async def delete(
        self, kind: JobKind, namespace: str, name: str, uid: Optional[str] = None, retry: Optional[RetryPolicy] = None
    ) -> None:
        """Delete with background propagation (the operator's pods and services go with the job); with ``uid``,
        only that object (409 Conflict when another object holds the name now)."""
        preconditions = {"body": {"preconditions": {"uid": uid}}} if uid else {}
        await self._object_call(
            "delete_namespaced_custom_object",
            kind.group,
            kind.version,
            namespace,
            kind.plural,
            name,
            propagation_policy="Background",
            retry=retry,
            **preconditions,
        )

    async def api_resources(self, group: str, version: str) -> frozenset[str]:
        """The resources the cluster serves in ``group/version`` (API discovery); empty when it serves none."""
        try:
            found = await self._object_call("get_api_resources", group, version)
        except NotFound:
            return frozenset()
        return frozenset(r.name for r in (found.resources or []))

    async def list_pods(self, namespace: str, selector: str) -> list[Obj]:
        """The pods matching ``selector``, as JSON dicts (a TrainJob's log links name the pods JobSet made,
        whose names end in a random suffix)."""
        from kubernetes import client

        core = client.CoreV1Api(self._api_client)

        def fn() -> Obj:
            response: Any = core.list_namespaced_pod(  # the raw HTTP response (_preload_content=False)
                namespace, label_selector=selector, _request_timeout=self._timeout, _preload_content=False
            )
            return _as_obj(json.loads(response.data))

        body = await self._call(fn)
        return list(body.get("items") or [])

    async def list_configmaps(self, namespace: str, selector: str) -> list[Obj]:
        """The ConfigMaps of ``namespace`` matching ``selector``, as JSON dicts (the compute templates, when the
        cache is off or not synced yet)."""
        from kubernetes import client

        core = client.CoreV1Api(self._api_client)

        def fn() -> Obj:
            response: Any = core.list_namespaced_config_map(
                namespace, label_selector=selector, _request_timeout=self._timeout, _preload_content=False
            )
            return _as_obj(json.loads(response.data))

        body = await self._call(fn)
        return list(body.get("items") or [])

    def _core_list(self, resource: CoreResource, namespace: str, **kwargs: Any) -> Any:
        """``GET /api/v1/namespaces/<ns>/<plural>`` through the cache's client (raw response, not preloaded)."""
        from kubernetes import client

        if resource.plural != CONFIGMAPS.plural:
            raise ValueError(f"the connector reads no core resource {resource.plural!r}")
        return client.CoreV1Api(self._cache_api_client).list_namespaced_config_map(
            namespace, _preload_content=False, **kwargs
        )

    def list_sync(
        self, kind: Watched, namespace: str, selector: str, stop: Optional[threading.Event] = None
    ) -> tuple[list[Obj], str]:
        """All objects matching ``selector`` and the list's resourceVersion."""

        def fn() -> Obj:
            if isinstance(kind, CoreResource):
                raw = self._core_list(kind, namespace, label_selector=selector, _request_timeout=self._timeout)
                return _as_obj(json.loads(raw.data))
            return _as_obj(
                self._cache_api.list_namespaced_custom_object(
                    kind.group,
                    kind.version,
                    namespace,
                    kind.plural,
                    label_selector=selector,
                    _request_timeout=self._timeout,
                )
            )

        body = self.call_sync(fn, stop)
        return list(body.get("items") or []), str(body.get("metadata", {}).get("resourceVersion", ""))

    def open_watch(self, kind: Watched, namespace: str, selector: str, resource_version: str) -> Any:
        """Start a watch (one request of ``watch_timeout`` seconds); returns the raw HTTP response."""
        options: dict[str, Any] = {
            "label_selector": selector,
            "watch": True,
            "resource_version": resource_version,
            "allow_watch_bookmarks": True,
            "timeout_seconds": max(1, int(self.settings.watch_timeout)),
            "_request_timeout": (self.settings.connect_timeout, self.settings.watch_timeout + self._timeout[1]),
        }
        try:
            if isinstance(kind, CoreResource):
                return self._core_list(kind, namespace, **options)
            return self._cache_api.list_namespaced_custom_object(
                kind.group, kind.version, namespace, kind.plural, _preload_content=False, **options
            )
        except Exception as exc:
            raise _to_api_error(exc) from None

    @staticmethod
    def watch_events(response: Any) -> Iterator[Obj]:
        """Decoded ``{"type", "object"}`` events of an open watch; raises ``Gone`` on 410."""
        from kubernetes.watch.watch import iter_resp_lines

        try:
            for line in iter_resp_lines(response):  # type: ignore[no-untyped-call]
                if not line:
                    continue
                event = json.loads(line)
                if event.get("type") == "ERROR":
                    status = event.get("object") or {}
                    code = int(status.get("code") or 0)
                    raise api_error(code, str(status.get("reason", "")), status.get("message", ""))
                yield event
        except ApiError:
            raise
        except Exception as exc:
            raise _to_api_error(exc) from None
        finally:
            response.close()
