"""The only module that talks to Kubernetes: a thin async wrapper over the official ``kubernetes`` client.

Blocking client calls run in a bounded thread pool. Every call has a timeout; 429, 5xx and connection
errors are retried with capped exponential backoff and full jitter, waiting at least what a
``Retry-After`` header asks; other errors become ``ApiError`` at once. The kubernetes client's own
urllib3 retries are switched off so this policy is the only one.

>>> backoff_delay(3, None, base=0.2, cap=10.0, jitter=1.0)
1.6
>>> backoff_delay(0, 2.5, base=0.2, cap=10.0, jitter=0.5)
2.5
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Optional, TypeVar

if TYPE_CHECKING:
    from ..wire.kinds import JobKind
    from .config import ConnectorSettings

__all__ = ["ApiError", "KubeClient", "WatchExpired", "backoff_delay", "is_retryable"]

log = logging.getLogger(__name__)
T = TypeVar("T")
Obj = dict[str, Any]

_RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})


class ApiError(Exception):
    """A failed API call: ``status`` is the HTTP code (0 for a connection error or timeout)."""

    def __init__(self, status: int, reason: str, message: str = "", retry_after: Optional[float] = None):
        super().__init__(f"{status} {reason}: {message}" if message else f"{status} {reason}")
        self.status, self.reason, self.message, self.retry_after = status, reason, message, retry_after


class WatchExpired(Exception):
    """The watch's resourceVersion is gone (410): the caller must re-list."""


def is_retryable(err: ApiError) -> bool:
    return err.status == 0 or err.status in _RETRYABLE_STATUS


def backoff_delay(
    attempt: int, retry_after: Optional[float], *, base: float, cap: float, jitter: Optional[float] = None
) -> float:
    """Seconds to wait before retry ``attempt`` (0-based): ``min(cap, base * 2**attempt)`` scaled by a
    jitter in [0.5, 1], never less than ``Retry-After`` (itself capped at ``cap``)."""
    factor = random.uniform(0.5, 1.0) if jitter is None else jitter
    delay: float = min(cap, base * 2.0**attempt) * factor
    if retry_after is not None:
        delay = max(delay, min(retry_after, cap))
    return float(round(delay, 6))


def _as_obj(value: object) -> Obj:
    if not isinstance(value, dict):
        raise ApiError(0, "BadResponse", f"expected a JSON object, got {type(value).__name__}")
    return value


def _to_api_error(exc: BaseException) -> ApiError:
    """Map client exceptions (ApiException, urllib3 errors, OSError) to ApiError; others are re-raised."""
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
        return ApiError(int(exc.status or 0), str(exc.reason or ""), message, retry_after)
    if isinstance(exc, (HTTPError, OSError)):
        return ApiError(0, type(exc).__name__, str(exc))
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
        self._pool = ThreadPoolExecutor(settings.workers, thread_name_prefix="kubejobs-api")
        self._timeout = (settings.connect_timeout, settings.request_timeout)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._api_client.close()  # type: ignore[no-untyped-call]

    # -- retry policy ----------------------------------------------------------------------------------
    def _delay(self, attempt: int, err: ApiError, started: float) -> Optional[float]:
        """Seconds to wait before the next attempt, or None when the call must give up."""
        s = self.settings
        if not is_retryable(err) or attempt + 1 >= s.retry_attempts:
            return None
        delay = backoff_delay(attempt, err.retry_after, base=s.retry_base_delay, cap=s.retry_max_delay)
        if time.monotonic() - started + delay > s.retry_deadline:
            return None
        log.info("kubernetes API call failed (%s); retry %d in %.2fs", err, attempt + 1, delay)
        return delay

    async def _call(self, fn: Callable[[], T]) -> T:
        loop = asyncio.get_running_loop()
        started = time.monotonic()
        for attempt in range(self.settings.retry_attempts):
            try:
                return await loop.run_in_executor(self._pool, fn)
            except Exception as exc:
                err = _to_api_error(exc)
            delay = self._delay(attempt, err, started)
            if delay is None:
                raise err
            await asyncio.sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    def call_sync(self, fn: Callable[[], T], stop: Optional[threading.Event] = None) -> T:
        """The same retry policy for a blocking caller (the cache threads); ``stop`` cuts waits short."""
        started = time.monotonic()
        for attempt in range(self.settings.retry_attempts):
            try:
                return fn()
            except Exception as exc:
                err = _to_api_error(exc)
            delay = self._delay(attempt, err, started)
            if delay is None or (stop is not None and stop.wait(delay)):
                raise err
            if stop is None:
                time.sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    # -- calls -----------------------------------------------------------------------------------------
    async def _object_call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """``CustomObjectsApi.<method>(*args)`` with this client's timeout and retry policy."""
        fn = getattr(self._api, method)
        return await self._call(lambda: fn(*args, _request_timeout=self._timeout, **kwargs))

    async def create(self, kind: JobKind, namespace: str, body: Obj) -> Obj:
        created = await self._object_call(
            "create_namespaced_custom_object", kind.group, kind.version, namespace, kind.plural, body
        )
        return _as_obj(created)

    async def get(self, kind: JobKind, namespace: str, name: str) -> Obj:
        found = await self._object_call(
            "get_namespaced_custom_object", kind.group, kind.version, namespace, kind.plural, name
        )
        return _as_obj(found)

    async def delete(self, kind: JobKind, namespace: str, name: str) -> None:
        """Delete with background propagation (the operator's pods and services go with the job)."""
        await self._object_call(
            "delete_namespaced_custom_object",
            kind.group,
            kind.version,
            namespace,
            kind.plural,
            name,
            propagation_policy="Background",
        )

    async def api_resources(self, group: str, version: str) -> frozenset[str]:
        """The resources the cluster serves in ``group/version`` (API discovery); empty when it serves none."""
        try:
            found = await self._object_call("get_api_resources", group, version)
        except ApiError as err:
            if err.status == 404:
                return frozenset()
            raise
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

    def list_sync(
        self, kind: JobKind, namespace: str, selector: str, stop: Optional[threading.Event] = None
    ) -> tuple[list[Obj], str]:
        """All objects matching ``selector`` and the list's resourceVersion."""

        def fn() -> Obj:
            return _as_obj(
                self._api.list_namespaced_custom_object(
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

    def open_watch(self, kind: JobKind, namespace: str, selector: str, resource_version: str) -> Any:
        """Start a watch (one request of ``watch_timeout`` seconds); returns the raw HTTP response."""
        try:
            return self._api.list_namespaced_custom_object(
                kind.group,
                kind.version,
                namespace,
                kind.plural,
                label_selector=selector,
                watch=True,
                resource_version=resource_version,
                allow_watch_bookmarks=True,
                timeout_seconds=max(1, int(self.settings.watch_timeout)),
                _preload_content=False,
                _request_timeout=(self.settings.connect_timeout, self.settings.watch_timeout + self._timeout[1]),
            )
        except Exception as exc:
            raise _to_api_error(exc) from None

    @staticmethod
    def watch_events(response: Any) -> Iterator[Obj]:
        """Decoded ``{"type", "object"}`` events of an open watch; raises WatchExpired on 410."""
        from kubernetes.watch.watch import iter_resp_lines

        try:
            for line in iter_resp_lines(response):  # type: ignore[no-untyped-call]
                if not line:
                    continue
                event = json.loads(line)
                if event.get("type") == "ERROR":
                    status = event.get("object") or {}
                    if status.get("code") == 410:
                        raise WatchExpired(status.get("message", ""))
                    raise ApiError(
                        int(status.get("code") or 0), str(status.get("reason", "")), status.get("message", "")
                    )
                yield event
        except (WatchExpired, ApiError):
            raise
        except Exception as exc:
            raise _to_api_error(exc) from None
        finally:
            response.close()
