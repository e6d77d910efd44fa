"""A fake Kubernetes API server on loopback that speaks the real REST protocol for namespaced custom objects.

Serves ``/apis/{group}/{version}/namespaces/{ns}/{plural}[/{name}]`` (create, get, list, watch, delete),
the cluster-wide ``/apis/{group}/{version}/{plural}`` list/watch and
``/apis/apiextensions.k8s.io/v1/customresourcedefinitions[/{name}]``. Status codes and ``Status`` bodies
follow the API server: 201 on create, 404 NotFound, 409 AlreadyExists, 410 Expired (as a watch ERROR
event), 422 Invalid (CRD schema violations, when a schema directory is given), 429/5xx on request.

Tests drive it through a fault-injection API (``fail_next``, ``drop_next``, ``expire_watches``,
``delete_externally``) and play the operator with ``step()``. It binds 127.0.0.1 only, on an ephemeral port.

>>> with FakeApiServer() as server:
...     server.url.startswith("http://127.0.0.1:")
True
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional
from urllib.parse import parse_qs, urlsplit

from .crds import KINDS, crd_objects
from .operator import Outcome
from .protocol import Fault, Handler, HTTPServer, kubeconfig_for, status_body
from .store import AlreadyExists, Expired, NotFound, ObjectStore, Resource

__all__ = ["Fault", "FakeApiServer", "kubeconfig_for"]

_DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


class FakeApiServer:
    """The fake API server. Use as a context manager, or ``start()``/``stop()``.

    ``crd_dir``: when given, created objects are validated against the CRD schemas there (through
    ``flytekitplugins.kubejobs.schema``; pass an already loaded ``schemas`` SchemaSet to share one) and
    CRD objects are served. ``max_watch_seconds`` caps every watch; ``history`` bounds the watch history.
    """

    def __init__(
        self,
        crd_dir: Optional[Path] = None,
        history: int = 20_000,
        max_watch_seconds: float = 30.0,
        schemas: Any = None,
    ) -> None:
        self.store = ObjectStore(history=history)
        self.max_watch_seconds = max_watch_seconds
        self.requests: Counter[tuple[str, str]] = Counter()
        self.responses: Counter[int] = Counter()
        self._faults: list[Fault] = []
        self._lock = threading.Lock()
        self._conns: set[socket.socket] = set()
        self._stopping = threading.Event()
        self._kinds = {(r.group, r.version, r.plural): r for r in KINDS}
        self._crds = crd_objects(crd_dir) if crd_dir is not None else {}
        self._schemas: Any = schemas
        if crd_dir is not None and schemas is None:
            from flytekitplugins.kubejobs.schema import SchemaSet

            self._schemas = SchemaSet.from_dir(crd_dir)
        self._httpd: Optional[HTTPServer] = None
        self._thread: Optional[threading.Thread] = None

    # -- lifecycle -------------------------------------------------------------------------------------
    def start(self) -> FakeApiServer:
        httpd = HTTPServer(("127.0.0.1", 0), Handler)
        httpd.owner = self
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        with self.store.changed:
            self.store.changed.notify_all()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._close_connections()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeApiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._httpd is not None, "server not started"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def kubeconfig(self, namespace: str = "default") -> dict[str, Any]:
        """A kubeconfig (as a dict, ready for ``yaml.safe_dump``) that points at this server."""
        return kubeconfig_for(self.url, namespace)

    # -- test controls ---------------------------------------------------------------------------------
    def fail_next(
        self,
        n: int,
        status: int = 500,
        retry_after: Optional[float] = None,
        methods: Optional[set[str]] = None,
        namespaces: Optional[set[str]] = None,
    ) -> None:
        """The next ``n`` requests (of ``methods``, in ``namespaces``) answer ``status`` (with ``Retry-After``
        when given). 403 plays RBAC refusing a namespace."""
        fault = Fault(n, status, retry_after, frozenset(methods) if methods else None)
        fault.namespaces = frozenset(namespaces) if namespaces else None
        with self._lock:
            self._faults.append(fault)

    def drop_next(self, n: int, methods: Optional[set[str]] = None, after_commit: bool = False) -> None:
        """The next ``n`` requests get their connection closed without a response."""
        with self._lock:
            self._faults.append(
                Fault(n, methods=frozenset(methods) if methods else None, drop=True, after_commit=after_commit)
            )

    def stall_next(self, n: int, seconds: float, methods: Optional[set[str]] = None) -> None:
        """The next ``n`` requests are answered only after ``seconds`` (a slow or hung API server)."""
        with self._lock:
            self._faults.append(Fault(n, methods=frozenset(methods) if methods else None, stall=seconds))

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()

    def expire_watches(self) -> None:
        """Compact the history: running watches end with 410 Gone and old resourceVersions are expired."""
        self.store.compact()

    def set_outcome(self, name: str, outcome: Outcome) -> None:
        """The operator drives the job named ``name`` (created later) to ``outcome``."""
        self.store.outcomes[name] = outcome

    def step(self, only: Optional[Callable[[str], bool]] = None) -> int:
        """Play the operator one stage on for every live job; returns the number of changed objects."""
        return self.store.step(only)

    def delete_externally(self, group: str, plural: str, namespace: str, name: str) -> None:
        """Delete an object behind the client's back (as ``kubectl delete`` would)."""
        self.store.delete(self._resource(group, plural), namespace, name, "external")

    def objects(self, group: str, plural: str, namespace: Optional[str] = None) -> list[dict[str, Any]]:
        return self.store.list(self._resource(group, plural), namespace)[0]

    def request_total(self) -> int:
        return sum(self.requests.values())

    def _resource(self, group: str, plural: str) -> Resource:
        for (g, _, p), res in self._kinds.items():
            if g == group and p == plural:
                return res
        raise KeyError(f"{plural}.{group}")

    # -- plumbing --------------------------------------------------------------------------------------
    def _track(self, conn: socket.socket, add: bool) -> None:
        with self._lock:
            (self._conns.add if add else self._conns.discard)(conn)

    def _close_connections(self) -> None:
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def _take_fault(self, method: str, is_watch: bool, namespace: Optional[str]) -> Optional[Fault]:
        with self._lock:
            for fault in self._faults:
                if fault.matches(method, is_watch, namespace):
                    fault.remaining -= 1
                    return fault
            self._faults = [f for f in self._faults if f.remaining > 0]
        return None

    def _dispatch(self, h: Handler, method: str) -> None:
        url = urlsplit(h.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length) if length else b""
        is_watch = query.get("watch") in ("true", "1")
        kind = "crd" if url.path.startswith(_CRD_PATH) else ("watch" if is_watch else method)
        if not url.path.startswith("/fake/"):  # control calls are not API traffic
            with self._lock:
                self.requests[(method, kind)] += 1
        parts = url.path.split("/")
        namespace = parts[parts.index("namespaces") + 1] if "namespaces" in parts[:-1] else None
        fault = self._take_fault(method, is_watch, namespace)
        if fault is not None and fault.stall:
            self._stopping.wait(fault.stall)
            fault = None
        if fault is not None and not fault.after_commit:
            if fault.drop:
                h.close_connection = True
                return
            headers = {} if fault.retry_after is None else {"Retry-After": f"{fault.retry_after:g}"}
            reason = {429: "TooManyRequests", 403: "Forbidden"}.get(fault.status, "InternalError")
            self._reply(h, fault.status, status_body(fault.status, reason, "injected fault"), headers)
            return
        try:
            code, body = self._route(h, method, url.path, query, raw, is_watch)
        except (BrokenPipeError, ConnectionResetError):
            h.close_connection = True
            return
        if fault is not None:  # after_commit: the write happened, the client never hears of it
            h.close_connection = True
            return
        if code:
            self._reply(h, code, body)

    def _reply(self, h: Handler, code: int, body: Any, headers: Optional[dict[str, str]] = None) -> None:
        with self._lock:
            self.responses[code] += 1
        try:
            h.send_json(code, body, headers)
        except (BrokenPipeError, ConnectionResetError):
            h.close_connection = True

    def _control(self, method: str, path: str) -> tuple[int, Any]:
        """``/fake/stats`` (GET) and ``/fake/step`` (POST): for a server run in another process."""
        if path == "/fake/step" and method == "POST":
            return 200, {"changed": self.step()}
        if path == "/fake/stats" and method == "GET":
            with self._lock:
                requests = {f"{m} {k}": n for (m, k), n in self.requests.items()}
            return 200, {"requests": requests, "objects": self.store.count(), "created": self.store.created}
        return 404, status_body(404, "NotFound", f"no control endpoint {method} {path}")

    def _route(
        self, h: Handler, method: str, path: str, query: dict[str, str], raw: bytes, is_watch: bool
    ) -> tuple[int, Any]:
        if path.startswith("/fake/"):
            return self._control(method, path)
        if path.startswith(_CRD_PATH):
            return self._crd(method, path[len(_CRD_PATH) :].strip("/"))
        parts = path.strip("/").split("/")
        if len(parts) < 4 or parts[0] != "apis":
            return 404, status_body(404, "NotFound", "the server could not find the requested resource")
        group, version = parts[1], parts[2]
        namespace: Optional[str] = None
        rest = parts[3:]
        if rest[0] == "namespaces" and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
        res = self._kinds.get((group, version, rest[0]))
        if res is None or len(rest) > 2:
            return 404, status_body(404, "NotFound", "the server could not find the requested resource")
        name = rest[1] if len(rest) == 2 else None
        qualified = f"{res.plural}.{res.group}"
        if name is None and method == "GET":
            if is_watch:
                self._watch(h, res, namespace, query)
                return 0, None
            items, rv = self.store.list(res, namespace, query.get("labelSelector"))
            return 200, {
                "apiVersion": res.api_version,
                "kind": f"{res.kind}List",
                "metadata": {"resourceVersion": str(rv)},
                "items": items,
            }
        if namespace is None:
            return 405, status_body(405, "MethodNotAllowed", "namespace required")
        if name is None and method == "POST":
            return self._create(res, namespace, raw)
        if name is not None and method == "GET":
            try:
                return 200, self.store.get(res, namespace, name)
            except NotFound:
                return 404, status_body(404, "NotFound", f'{qualified} "{name}" not found', name=name, kind=res.plural)
        if name is not None and method == "DELETE":
            options = json.loads(raw) if raw else {}
            policy = options.get("propagationPolicy") or query.get("propagationPolicy")
            try:
                return 200, self.store.delete(res, namespace, name, policy)
            except NotFound:
                return 404, status_body(404, "NotFound", f'{qualified} "{name}" not found', name=name, kind=res.plural)
        return 405, status_body(405, "MethodNotAllowed", f"{method} is not supported by the fake API server")

    def _create(self, res: Resource, namespace: str, raw: bytes) -> tuple[int, Any]:
        try:
            body = json.loads(raw)
        except ValueError as err:
            return 400, status_body(400, "BadRequest", f"invalid JSON: {err}")
        if not isinstance(body, dict) or body.get("apiVersion") != res.api_version or body.get("kind") != res.kind:
            got = (body.get("apiVersion"), body.get("kind")) if isinstance(body, dict) else body
            return 400, status_body(400, "BadRequest", f"expected {res.api_version} {res.kind}, got {got}")
        meta = body.get("metadata") or {}
        name = meta.get("name", "")
        if meta.get("namespace", namespace) != namespace:
            return 400, status_body(
                400, "BadRequest", "the namespace of the object does not match the request namespace"
            )
        if not name or len(name) > 253 or not _DNS1123.match(name):
            return 422, status_body(422, "Invalid", f"metadata.name: Invalid value: {name!r}", kind=res.kind)
        if self._schemas is not None:
            from flytekitplugins.kubejobs.schema import ObjectInvalid, validate_object

            try:
                validate_object(body, self._schemas)
            except ObjectInvalid as err:
                return 422, status_body(422, "Invalid", f'{res.kind}.{res.group} "{name}" is invalid: {err}', name=name)
        try:
            return 201, self.store.create(res, namespace, body)
        except AlreadyExists:
            qualified = f"{res.plural}.{res.group}"
            return 409, status_body(409, "AlreadyExists", f'{qualified} "{name}" already exists', name=name)

    def _crd(self, method: str, name: str) -> tuple[int, Any]:
        if method != "GET":
            return 405, status_body(405, "MethodNotAllowed", "read-only")
        if not name:
            items = list(self._crds.values())
            kind = "CustomResourceDefinitionList"
            return 200, {"apiVersion": "apiextensions.k8s.io/v1", "kind": kind, "items": items}
        if name not in self._crds:
            return 404, status_body(404, "NotFound", f'customresourcedefinitions "{name}" not found')
        return 200, self._crds[name]

    def _watch(self, h: Handler, res: Resource, namespace: Optional[str], query: dict[str, str]) -> None:
        store, selector = self.store, query.get("labelSelector")
        seconds = min(float(query.get("timeoutSeconds") or self.max_watch_seconds), self.max_watch_seconds)
        deadline = time.monotonic() + seconds
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        epoch = store.epoch
        rv = int(query.get("resourceVersion") or 0)
        if rv == 0:  # no resourceVersion: synthetic ADDED for the current state, then changes
            items, rv = store.list(res, namespace, selector)
            for item in items:
                h.send_chunk({"type": "ADDED", "object": item})
        expired = False
        while not self._stopping.is_set() and time.monotonic() < deadline:
            try:
                events, rv_now = store.events_since(res, namespace, rv, selector)
            except Expired:
                expired = True
                break
            for event in events:
                h.send_chunk({"type": event.type, "object": event.object})
            rv = rv_now
            with store.changed:
                if store.epoch != epoch:
                    expired = True
                    break
                if store.resource_version <= rv:
                    store.changed.wait(max(0.0, min(deadline - time.monotonic(), 0.5)))
        if expired:
            h.send_chunk({"type": "ERROR", "object": status_body(410, "Expired", f"too old resource version: {rv}")})
        elif query.get("allowWatchBookmarks") in ("true", "1"):
            mark = {"apiVersion": res.api_version, "kind": res.kind, "metadata": {"resourceVersion": str(rv)}}
            h.send_chunk({"type": "BOOKMARK", "object": mark})
        h.wfile.write(b"0\r\n\r\n")
        h.wfile.flush()
