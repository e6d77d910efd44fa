"""In-memory object store of the fake API server: objects, resourceVersions, watch history, operator.

Thread-safe (one lock plus a condition that wakes watchers). Semantics follow the Kubernetes API:
a single increasing resourceVersion for every write, events kept in a bounded history, a watch from a
resourceVersion older than the history (or older than the last ``compact()``) is *expired* (410 Gone).

>>> store = ObjectStore()
>>> res = Resource("kubeflow.org", "v1", "pytorchjobs", "PyTorchJob")
>>> obj = store.create(res, "ns", {"metadata": {"name": "a"}, "spec": {}})
>>> obj["metadata"]["resourceVersion"], store.get(res, "ns", "a")["metadata"]["name"]
('1', 'a')
"""

from __future__ import annotations

import builtins
import copy
import threading
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Optional

from .operator import Outcome, stages_for

__all__ = ["AlreadyExists", "Event", "Expired", "NotFound", "ObjectStore", "Resource", "match_labels"]

Obj = dict[str, Any]


class NotFound(KeyError):
    """No object of that name."""


class AlreadyExists(KeyError):
    """An object of that name already exists."""


class Expired(Exception):
    """The resourceVersion asked for is older than the kept history (410 Gone)."""


@dataclass(frozen=True)
class Resource:
    group: str
    version: str
    plural: str
    kind: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"


@dataclass
class Event:
    rv: int
    resource: Resource
    namespace: str
    type: str
    object: Obj


@dataclass
class _Job:
    """Operator bookkeeping for one object."""

    outcome: Outcome
    stage: int = -1
    stages: list[Obj] = field(default_factory=list)


def utc_now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def match_labels(obj: Obj, selector: Optional[str]) -> bool:
    """Equality-based label selector (``a=b,c=d``, ``a!=b``, bare ``a`` for existence)."""
    if not selector:
        return True
    labels = obj.get("metadata", {}).get("labels") or {}
    for term in selector.split(","):
        term = term.strip()
        if "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key.strip()) == value.strip():
                return False
        elif "=" in term:
            key, value = term.replace("==", "=").split("=", 1)
            if labels.get(key.strip()) != value.strip():
                return False
        elif term and term not in labels:
            return False
    return True


class ObjectStore:
    """Objects keyed by (resource, namespace, name), with a bounded event history for watches."""

    def __init__(self, history: int = 20_000) -> None:
        self._lock = threading.RLock()
        self.changed = threading.Condition(self._lock)
        self._objects: dict[tuple[Resource, str, str], Obj] = {}
        self._jobs: dict[tuple[Resource, str, str], _Job] = {}
        self._history: deque[Event] = deque(maxlen=history)
        self._rv = 0
        self._compacted = 0  # watches from a resourceVersion below this are expired
        self.epoch = 0  # bumped by compact(): running watches end with 410
        self.default_outcome: Outcome = "succeed"
        self.outcomes: dict[str, Outcome] = {}
        self.deletions: list[tuple[str, str, Optional[str]]] = []  # (namespace, name, propagationPolicy)
        self.created = 0  # objects ever created

    # -- reads ------------------------------------------------------------------------------------------
    @property
    def resource_version(self) -> int:
        return self._rv

    def get(self, res: Resource, namespace: str, name: str) -> Obj:
        with self._lock:
            try:
                return copy.deepcopy(self._objects[(res, namespace, name)])
            except KeyError:
                raise NotFound(name) from None

    def list(
        self, res: Resource, namespace: Optional[str], selector: Optional[str] = None
    ) -> tuple[builtins.list[Obj], int]:
        with self._lock:
            items = [
                copy.deepcopy(o)
                for (r, ns, _), o in self._objects.items()
                if r == res and (namespace is None or ns == namespace) and match_labels(o, selector)
            ]
            return items, self._rv

    def count(self, res: Optional[Resource] = None) -> int:
        with self._lock:
            return sum(1 for (r, _, _) in self._objects if res is None or r == res)

    def events_since(
        self, res: Resource, namespace: Optional[str], rv: int, selector: Optional[str]
    ) -> tuple[builtins.list[Event], int]:
        """Events after ``rv`` for this resource (and namespace); raises Expired when history is gone."""
        with self._lock:
            evicted = len(self._history) == self._history.maxlen and rv < self._history[0].rv - 1
            if rv < self._compacted or evicted:
                raise Expired(rv)
            out = [
                e
                for e in self._history
                if e.rv > rv
                and e.resource == res
                and (namespace is None or e.namespace == namespace)
                and match_labels(e.object, selector)
            ]
            return out, self._rv

    # -- writes -----------------------------------------------------------------------------------------
    def _record(self, res: Resource, namespace: str, kind: str, obj: Obj) -> None:
        self._history.append(Event(self._rv, res, namespace, kind, copy.deepcopy(obj)))
        self.changed.notify_all()

    def _bump(self, obj: Obj) -> None:
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)

    def create(self, res: Resource, namespace: str, body: Obj) -> Obj:
        with self._lock:
            obj = copy.deepcopy(body)
            meta = obj.setdefault("metadata", {})
            name = meta.get("name", "")
            key = (res, namespace, name)
            if key in self._objects:
                raise AlreadyExists(name)
            obj.pop("status", None)  # the status subresource: create ignores status
            obj["apiVersion"], obj["kind"] = res.api_version, res.kind
            meta.update(namespace=namespace, uid=str(uuid.uuid4()), creationTimestamp=utc_now(), generation=1)
            self._bump(obj)
            self._objects[key] = obj
            self.created += 1
            outcome = self.outcomes.get(name, self.default_outcome)
            self._jobs[key] = _Job(outcome, stages=stages_for(res.group, outcome, utc_now(), name))
            self._record(res, namespace, "ADDED", obj)
            return copy.deepcopy(obj)

    def delete(self, res: Resource, namespace: str, name: str, propagation: Optional[str] = None) -> Obj:
        with self._lock:
            key = (res, namespace, name)
            obj = self._objects.pop(key, None)
            if obj is None:
                raise NotFound(name)
            self._jobs.pop(key, None)
            self._bump(obj)
            self.deletions.append((namespace, name, propagation))
            self._record(res, namespace, "DELETED", obj)
            return copy.deepcopy(obj)

    def mark_deleting(self, res: Resource, namespace: str, name: str) -> None:
        """Set deletionTimestamp as a finalizer-held deletion does (the object stays until released)."""
        with self._lock:
            obj = self._objects[(res, namespace, name)]
            obj["metadata"]["deletionTimestamp"] = utc_now()
            self._bump(obj)
            self._record(res, namespace, "MODIFIED", obj)

    def compact(self) -> None:
        """Forget all history (etcd compaction): every watch now needs a re-list."""
        with self._lock:
            # The revision moves on (as etcd's does with other writes), so every resourceVersion a client
            # holds is now below the compaction point: a watch running now and one that reconnects a moment
            # later both get 410, never a watch that silently continues (that race made a test flaky).
            self._rv += 1
            self._compacted = self._rv
            self._history.clear()
            self.epoch += 1
            self.changed.notify_all()

    def step(self, only: Optional[Callable[[str], bool]] = None) -> int:
        """Play the operator: move every live job (whose name passes ``only``) one stage on.

        Returns how many objects changed.
        """
        changed = 0
        with self._lock:
            for key, job in self._jobs.items():
                obj = self._objects[key]
                if job.stage + 1 >= len(job.stages) or obj["metadata"].get("deletionTimestamp"):
                    continue
                if only is not None and not only(key[2]):
                    continue
                job.stage += 1
                obj["status"] = copy.deepcopy(job.stages[job.stage])
                self._bump(obj)
                self._record(key[0], key[1], "MODIFIED", obj)
                changed += 1
        return changed

    def settled(self) -> bool:
        """True when every job has reached its last stage."""
        with self._lock:
            return all(job.stage + 1 >= len(job.stages) for job in self._jobs.values())
