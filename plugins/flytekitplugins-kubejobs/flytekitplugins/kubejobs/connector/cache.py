"""Watch-backed cache of the connector's own job objects, one informer per kind and namespace.

An informer lists the objects carrying the connector's ``managed-by`` label, then watches from the
list's resourceVersion; a 410 Gone (history compacted) triggers a re-list, other failures a wait of
the connector's retry policy (``RetryPolicy.backoff``, growing with consecutive failures) and a new watch
from the last resourceVersion seen. The one failure it gives up on is 403 Forbidden (RBAC does not grant the
connector list/watch there: retrying cannot help until an operator changes the grant): the informer stops,
says so in the log, and calls for that namespace read with direct GETs (which report the 403); once idle it is
evicted, so a call after that tries a fresh informer (a grant added meanwhile is picked up).
Memory is bounded: only our objects are kept, slimmed (pod templates dropped, they are never read for
status), at most ``max_objects`` per informer. A name the cache does not hold (not yet seen, over the
bound, or deleted) is read with a direct GET, so a deletion is confirmed by the API server before get()
reports it.

Each informer runs in its own daemon thread, so the cache works from any event loop (the gRPC
server's, or a test's) and reads are plain dictionary lookups. Threads are bounded: informers start only
for namespaces the connector serves, at most ``max_informers`` of them (beyond, callers GET directly), and
one no call has used for ``idle_timeout`` seconds is stopped by a reaper thread. ``close()`` stops them all
at once, cutting every request they are blocked in (the cache connections' sockets are shut down, even for a
request the API server never answers), and waits at most ``timeout``. An evicted informer has its watch
response shut down; one evicted while inside a list ends when that request returns or times out.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

from .errors import ApiError, Forbidden, Gone

if TYPE_CHECKING:
    from ..wire.kinds import JobKind
    from .client import KubeClient, Watched

__all__ = ["Informer", "JobCache", "Lookup", "PodLists", "slim"]

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

    def __init__(
        self,
        client: KubeClient,
        kind: Watched,
        namespace: str,
        selector: str,
        max_objects: int,
        keep: Callable[[Obj], Obj] = slim,
    ):
        self.client, self.kind, self.namespace, self.selector = client, kind, namespace, selector
        self.max_objects = max_objects
        #: What of each object is kept (jobs: ``slim``; compute template ConfigMaps: metadata and data).
        self.keep = keep
        self.synced = threading.Event()
        self.relists = 0
        #: The 403 that stopped this informer (None while it runs, or when it was stopped otherwise).
        self.forbidden: Optional[Forbidden] = None
        #: When a call last used this informer (the cache's clock); the reaper stops it once idle.
        self.last_used = 0.0
        self._objects: dict[str, Obj] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._response: Any = None
        self._thread = threading.Thread(target=self._run, name=f"kubejobs-cache-{kind.plural}-{namespace}", daemon=True)

    def start(self) -> Informer:
        self._thread.start()
        return self

    def request_stop(self) -> None:
        """Tell the thread to end, cutting a blocked watch read short; returns at once."""
        self._stop.set()
        response = self._response
        if response is not None:  # shut the socket down: a close() alone does not wake a blocked read
            with contextlib.suppress(Exception):
                getattr(response, "shutdown", response.close)()

    def join(self, timeout: float) -> None:
        if self._thread.is_alive():
            self._thread.join(timeout)

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    @property
    def watching(self) -> bool:
        """Whether a watch request is open (the thread is reading its stream)."""
        return self._response is not None

    def __len__(self) -> int:
        return len(self._objects)

    def lookup(self, name: str) -> Optional[Lookup]:
        """None until the first list completed, and once stopped (callers then GET directly)."""
        if not self.synced.is_set() or self._stop.is_set():
            return None
        with self._lock:
            obj = self._objects.get(name)
            return Lookup(obj=obj)

    def snapshot(self) -> Optional[list[Obj]]:
        """Every object held (the kept parts), or None until the first list completed and once stopped."""
        if not self.synced.is_set() or self._stop.is_set():
            return None
        with self._lock:
            return list(self._objects.values())

    # -- the thread ------------------------------------------------------------------------------------
    def _put(self, obj: Obj) -> None:
        meta = obj.get("metadata") if isinstance(obj, dict) else None
        name = meta.get("name") if isinstance(meta, dict) else None
        if not isinstance(name, str) or not name:  # not an object we can key: never cached, get() will GET
            log.warning("cache for %s/%s: skipping a malformed object", self.kind.plural, self.namespace)
            return
        if name in self._objects or len(self._objects) < self.max_objects:
            self._objects[name] = self.keep(obj)

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
            except Forbidden as err:
                self.forbidden = err
                self._stop.set()
                log.warning(
                    "cache for %s/%s stopped: %s (RBAC does not let the connector list/watch them there); calls "
                    "for this namespace read with direct GETs",
                    self.kind.plural,
                    self.namespace,
                    err,
                )
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
    """Informers started on first use for each (kind, namespace) the connector serves, bounded in number and
    stopped when idle. ``clock`` (monotonic seconds) is injectable so tests can age informers."""

    def __init__(
        self,
        client: KubeClient,
        selector: str,
        max_objects: int,
        *,
        allowed: Callable[[str], bool] = lambda namespace: True,
        max_informers: int = 64,
        idle_timeout: float = 600.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.client, self.selector, self.max_objects = client, selector, max_objects
        self.allowed, self.max_informers, self.idle_timeout, self.clock = allowed, max_informers, idle_timeout, clock
        self._informers: dict[tuple[str, str, str, str], Informer] = {}
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._reaper: Optional[threading.Thread] = None

    def informer(self, kind: JobKind, namespace: str) -> Optional[Informer]:
        """The namespace's running informer (started now if needed, and marked used); None when the namespace
        is not one the connector serves, when ``max_informers`` run already, or once the cache is closed."""
        if not self.allowed(namespace):
            return None
        key = (kind.group, kind.version, kind.plural, namespace)  # v1 and v2beta1 MPIJobs share a plural
        with self._lock:
            found = self._informers.get(key)
            if found is None:
                if self._closed.is_set() or len(self._informers) >= self.max_informers:
                    return None
                found = Informer(self.client, kind, namespace, self.selector, self.max_objects).start()
                self._informers[key] = found
                if self._reaper is None:
                    self._reaper = threading.Thread(target=self._reap, name="kubejobs-cache-reaper", daemon=True)
                    self._reaper.start()
            found.last_used = self.clock()
            return found

    def lookup(self, kind: JobKind, namespace: str, name: str) -> Optional[Lookup]:
        informer = self.informer(kind, namespace)
        return None if informer is None else informer.lookup(name)

    def informers(self) -> list[Informer]:
        with self._lock:
            return list(self._informers.values())

    def evict_idle(self) -> list[Informer]:
        """Stop the informers no call has used for ``idle_timeout`` seconds; returns them."""
        now = self.clock()
        with self._lock:
            idle = [key for key, inf in self._informers.items() if now - inf.last_used >= self.idle_timeout]
            evicted = [self._informers.pop(key) for key in idle]
        _stop_all(evicted, timeout=1.0)
        for informer in evicted:
            log.info(
                "cache for %s/%s stopped: unused for %.0fs", informer.kind.plural, informer.namespace, self.idle_timeout
            )
        return evicted

    def _reap(self) -> None:
        interval = min(max(self.idle_timeout / 4, 0.01), 60.0)  # an idle informer stops within 1.25 x idle
        while not self._closed.wait(interval):
            try:
                self.evict_idle()
            except Exception:  # the reaper must outlive one bad stop
                log.exception("cache reaper failed")

    def close(self, timeout: float = 1.0) -> None:
        """Stop every informer and the reaper, all at once; waits at most ``timeout`` seconds in total."""
        with self._lock:
            self._closed.set()
            informers = list(self._informers.values())
            self._informers.clear()
            reaper = self._reaper
        deadline = time.monotonic() + timeout
        _stop_all(informers, timeout, cut=self.client.abort_cache_requests)
        if reaper is not None:
            reaper.join(max(0.0, deadline - time.monotonic()))


def _stop_all(informers: list[Informer], timeout: float, cut: Optional[Callable[[], object]] = None) -> None:
    """Signal every informer first (then ``cut`` their requests: a thread inside a list, or waiting for a watch's
    first bytes, has no response to shut down yet), then join them against one deadline (not ``timeout`` each)."""
    for informer in informers:
        informer.request_stop()
    if cut is not None and informers:
        cut()
    deadline = time.monotonic() + timeout
    for informer in informers:
        informer.join(max(0.0, deadline - time.monotonic()))


class PodLists:
    """The pods last listed for each TrainJob (its log links), so a ``get`` lists them only when the job moved.

    A list is reused while the TrainJob's ``resourceVersion`` is the one it was listed at and it is younger
    than ``max_age`` seconds. Any status Trainer writes (``jobsStatus`` counts, conditions) changes the
    resourceVersion, and a pod that fails or is recreated changes its Job's counts, so links follow a new
    pod at the next ``get``; ``max_age`` bounds how stale they can be if a recreation leaves the counts equal.
    At most ``max_entries`` jobs are kept (least recently used go first).

    >>> lists = PodLists(max_entries=2, max_age=30.0)
    >>> lists.put(("ns", "a", "uid-1"), "7", [{"metadata": {"name": "a-node-0-0-x1"}}], now=0.0)
    >>> [p["metadata"]["name"] for p in lists.get(("ns", "a", "uid-1"), "7", now=10.0) or []]
    ['a-node-0-0-x1']
    >>> lists.get(("ns", "a", "uid-1"), "8", now=10.0) is None  # the TrainJob changed: list again
    True
    >>> lists.get(("ns", "a", "uid-1"), "7", now=30.0) is None  # too old: list again
    True
    >>> lists.get(("ns", "a", "uid-2"), "7", now=10.0) is None  # another object under the same name
    True
    >>> [p["metadata"]["name"] for p in lists.last(("ns", "a", "uid-1"))]  # whatever its version and age
    ['a-node-0-0-x1']
    >>> for name in ("b", "c"):
    ...     lists.put(("ns", name, "u"), "1", [], now=0.0)
    >>> len(lists), lists.get(("ns", "a", "uid-1"), "7", now=1.0) is None  # bounded: the oldest went first
    (2, True)
    """

    def __init__(self, max_entries: int = 4096, max_age: float = 30.0):
        from collections import OrderedDict

        if max_entries < 1 or max_age <= 0:
            raise ValueError(f"PodLists needs max_entries >= 1 and max_age > 0, got {max_entries}, {max_age}")
        self.max_entries, self.max_age = max_entries, max_age
        self._lists: OrderedDict[tuple[str, str, str], tuple[str, float, list[dict[str, Any]]]] = OrderedDict()
        self._lock = threading.Lock()  # get() runs on the gRPC server's loop and on callers' threads

    def get(self, key: tuple[str, str, str], resource_version: str, now: float) -> Optional[list[dict[str, Any]]]:
        """The pods listed for ``key`` (namespace, name, uid) at ``resource_version``, if still fresh."""
        with self._lock:
            entry = self._lists.get(key)
            if entry is None or not resource_version or entry[0] != resource_version:
                return None
            if now - entry[1] >= self.max_age:
                return None
            self._lists.move_to_end(key)
            return entry[2]

    def last(self, key: tuple[str, str, str]) -> list[dict[str, Any]]:
        """The pods last listed for ``key``, however old (none if never listed or evicted)."""
        with self._lock:
            entry = self._lists.get(key)
            return entry[2] if entry is not None else []

    def put(self, key: tuple[str, str, str], resource_version: str, pods: list[dict[str, Any]], now: float) -> None:
        with self._lock:
            self._lists[key] = (resource_version, now, pods)
            self._lists.move_to_end(key)
            while len(self._lists) > self.max_entries:
                self._lists.popitem(last=False)

    def __len__(self) -> int:
        return len(self._lists)
