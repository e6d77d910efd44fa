"""Watch-backed cache of the connector's own job objects, one informer per kind and namespace.

An informer lists the objects carrying the connector's ``managed-by`` label, then watches from the
list's resourceVersion; a 410 Gone (history compacted) triggers a re-list, other failures a wait of
the connector's retry policy (``RetryPolicy.backoff``, growing with consecutive failures; an informer
never gives up) and a new watch from the last resourceVersion seen. Memory is bounded: only our objects are
kept, slimmed (pod templates dropped, they are never read for status), at most ``max_objects`` per
informer. A name the cache does not hold (not yet seen, over the bound, or deleted) is read with a
direct GET, so a deletion is confirmed by the API server before get() reports it.

Each informer runs in its own daemon thread, so the cache works from any event loop (the gRPC
server's, or a test's) and reads are plain dictionary lookups.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

from .errors import ApiError, Gone

if TYPE_CHECKING:
    from ..wire.kinds import JobKind
    from .client import KubeClient

__all__ = ["Informer", "JobCache", "Lookup", "slim"]

log = logging.getLogger(__name__)
Obj = dict[str, Any]
_DROPPED_SPEC_KEYS = frozenset({"template", "submitterPodTemplate", "runtimeEnvYAML"})
_KEPT_METADATA = ("name", "namespace", "uid", "resourceVersion", "creationTimestamp", "deletionTimestamp", "labels")


def _strip(value: Any, depth: int) -> Any:
    if depth > 6:
        return value
    if isinstance(value, dict):
        return {k: _strip(v, depth + 1) for k, v in value.items() if k not in _DROPPED_SPEC_KEYS}
    if isinstance(value, list):
        return [_strip(v, depth + 1) for v in value]
    return value


def slim(obj: Obj) -> Obj:
    """The parts of a job object that status mapping reads: metadata, spec without pod templates, status.

    >>> slim({"metadata": {"name": "a", "managedFields": []}, "spec": {"w": {"replicas": 2, "template": {}}}})
    {'apiVersion': None, 'kind': None, 'metadata': {'name': 'a'}, 'spec': {'w': {'replicas': 2}}}
    """
    meta = obj.get("metadata") or {}
    out: Obj = {
        "apiVersion": obj.get("apiVersion"),
        "kind": obj.get("kind"),
        "metadata": {k: meta[k] for k in _KEPT_METADATA if k in meta},
        "spec": _strip(obj.get("spec") or {}, 0),
    }
    if "status" in obj:
        out["status"] = obj["status"]
    return out


@dataclass(frozen=True)
class Lookup:
    """What a synced cache knows of one name: ``obj`` when cached, None when it does not hold it."""

    obj: Optional[Obj] = None


class Informer:
    """List + watch of one kind in one namespace, kept in memory by a daemon thread."""

    def __init__(self, client: KubeClient, kind: JobKind, namespace: str, selector: str, max_objects: int):
        self.client, self.kind, self.namespace, self.selector = client, kind, namespace, selector
        self.max_objects = max_objects
        self.synced = threading.Event()
        self.relists = 0
        self._objects: dict[str, Obj] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._response: Any = None
        self._thread = threading.Thread(target=self._run, name=f"kubejobs-cache-{kind.plural}-{namespace}", daemon=True)

    def start(self) -> Informer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        response = self._response
        if response is not None:  # unblock the thread blocked reading the watch stream
            with contextlib.suppress(Exception):
                getattr(response, "shutdown", response.close)()
        self._thread.join(timeout=5)

    def __len__(self) -> int:
        return len(self._objects)

    def lookup(self, name: str) -> Optional[Lookup]:
        """None until the first list completed (callers then GET directly)."""
        if not self.synced.is_set():
            return None
        with self._lock:
            obj = self._objects.get(name)
            return Lookup(obj=obj)

    # -- the thread ------------------------------------------------------------------------------------
    def _put(self, obj: Obj) -> None:
        meta = obj.get("metadata") if isinstance(obj, dict) else None
        name = meta.get("name") if isinstance(meta, dict) else None
        if not isinstance(name, str) or not name:  # not an object we can key: never cached, get() will GET
            log.warning("cache for %s/%s: skipping a malformed object", self.kind.plural, self.namespace)
            return
        if name in self._objects or len(self._objects) < self.max_objects:
            self._objects[name] = slim(obj)

    def _forget(self, name: str) -> None:
        self._objects.pop(name, None)

    def _relist(self) -> str:
        items, rv = self.client.list_sync(self.kind, self.namespace, self.selector, self._stop)
        with self._lock:
            names = {(i.get("metadata") or {}).get("name") for i in items if isinstance(i, dict)}
            gone = set(self._objects) - names
            for name in gone:
                self._forget(name)
            for item in items:
                self._put(item)
        self.synced.set()
        return rv

    def _run(self) -> None:
        rv: Optional[str] = None
        failures = 0
        while not self._stop.is_set():
            try:
                if rv is None:
                    rv = self._relist()
                    self.relists += 1
                rv = self._watch(rv)
                failures = 0
            except Gone:
                rv = None  # history compacted: re-list
            except ApiError as err:
                if self._stop.is_set():
                    break
                delay = self.client.retry.backoff(failures, err.retry_after)
                failures += 1
                log.warning("cache for %s/%s: %s; retrying in %.2fs", self.kind.plural, self.namespace, err, delay)
                self._stop.wait(delay)
            except Exception:  # one bad event must not stop the cache: start over from a list
                if self._stop.is_set():
                    break
                log.exception("cache for %s/%s failed; re-listing", self.kind.plural, self.namespace)
                rv = None
                self._stop.wait(self.client.retry.backoff(0))

    def _watch(self, rv: str) -> str:
        response = self.client.open_watch(self.kind, self.namespace, self.selector, rv)
        self._response = response
        try:
            if self._stop.is_set():  # stop() ran before the response was published: it could not close it
                getattr(response, "shutdown", response.close)()
                return rv
            for event in self.client.watch_events(response):
                obj = event.get("object") or {}
                meta = obj.get("metadata") or {}
                rv = str(meta.get("resourceVersion") or rv)
                kind, name = event.get("type"), meta.get("name", "")
                if kind == "BOOKMARK" or not name:
                    continue
                with self._lock:
                    if kind == "DELETED":
                        self._forget(name)
                    else:
                        self._put(obj)
                if self._stop.is_set():
                    break
        finally:
            self._response = None
        return rv


class JobCache:
    """Informers created on first use for each (kind, namespace)."""

    def __init__(self, client: KubeClient, selector: str, max_objects: int):
        self.client, self.selector, self.max_objects = client, selector, max_objects
        self._informers: dict[tuple[str, str], Informer] = {}
        self._lock = threading.Lock()
        self._closed = False

    def informer(self, kind: JobKind, namespace: str) -> Informer:
        key = (kind.plural, namespace)
        with self._lock:
            found = self._informers.get(key)
            if found is None:
                if self._closed:
                    raise RuntimeError("the job cache is closed")
                found = Informer(self.client, kind, namespace, self.selector, self.max_objects).start()
                self._informers[key] = found
            return found

    def lookup(self, kind: JobKind, namespace: str, name: str) -> Optional[Lookup]:
        return self.informer(kind, namespace).lookup(name)

    def informers(self) -> list[Informer]:
        with self._lock:
            return list(self._informers.values())

    def close(self) -> None:
        with self._lock:
            self._closed = True
            informers = list(self._informers.values())
        for informer in informers:
            informer.stop()
