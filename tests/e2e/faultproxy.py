"""A fault-injecting HTTPS proxy in front of the real kube-apiserver (test-only; the one fake of the e2e tests).

A real API server cannot be told to answer 500, throttle with 429 and Retry-After, drop a connection or
stall a request, so the proxy does it, switched by the test while the connector runs through it. It
terminates TLS on 127.0.0.1 with a certificate of its own CA (the connector's kubeconfig trusts that CA and
carries no credentials) and forwards every request over its own TLS connection to the API server as the
cluster admin, streaming watch responses chunk by chunk. Without a fault switched on it is transparent.

    with FaultProxy(cluster, tmp_path) as proxy:
        proxy.outage(30.0)                        # every request answered 503 for 30 s (mode="drop": closed)
        proxy.fail(2, 429, retry_after=1.0)       # the next 2 requests
        proxy.stall(1, 30.0)                      # the next request held 30 s unanswered, then dropped
        proxy.drop_watches()                      # cut every open watch stream now
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import ssl
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Optional
from urllib.parse import parse_qs, urlsplit

import yaml

from .controlplane import write_kubeconfig
from .pki import CertificateAuthority

_HOP_HEADERS = frozenset({"connection", "keep-alive", "transfer-encoding", "content-length", "host"})


@dataclass
class _Fault:
    """What to do to matching requests: ``count`` of them (None: all until ``until``, a monotonic time)."""

    action: str  # "status" | "drop" | "stall"
    count: Optional[int] = None
    until: Optional[float] = None
    status: int = 503
    retry_after: Optional[float] = None
    seconds: float = 0.0
    methods: Optional[frozenset[str]] = None

    def spent(self, now: float) -> bool:
        return (self.until is not None and now >= self.until) or (self.count is not None and self.count <= 0)

    def applies(self, method: str, now: float) -> bool:
        return not self.spent(now) and (self.methods is None or method in self.methods)


@dataclass
class Stats:
    """What the proxy saw: requests by (method, verb) and the responses it gave (0: dropped/stalled)."""

    requests: Counter[tuple[str, str]] = field(default_factory=Counter)
    responses: Counter[int] = field(default_factory=Counter)
    #: (monotonic time, method, verb, status given) of every request.
    log: list[tuple[float, str, str, int]] = field(default_factory=list)


def verb(method: str, target: str) -> str:
    """``watch``, ``list``, ``get``, ``create``, ``delete`` (the Kubernetes verb of a request)."""
    parts = urlsplit(target)
    query = {k: v[-1].lower() for k, v in parse_qs(parts.query).items()}
    if method == "GET":
        if query.get("watch") in ("true", "1"):
            return "watch"
        # .../namespaces/<ns>/<plural> is a collection, .../<plural>/<name> an object
        segments = parts.path.strip("/").split("/")
        return "list" if len(segments) % 2 == 0 and "namespaces" in segments else "get"
    return {"POST": "create", "DELETE": "delete", "PUT": "update", "PATCH": "patch"}.get(method, method.lower())


class FaultProxy:
    def __init__(self, cluster: dict[str, Any], directory: Path):
        admin = yaml.safe_load(Path(cluster["kubeconfig"]).read_text())
        user = admin["users"][0]["user"]
        upstream = urlsplit(cluster["server"])
        self._upstream = (upstream.hostname or "127.0.0.1", upstream.port or 443)
        self._upstream_tls = ssl.create_default_context(cafile=cluster["ca"])
        self._upstream_tls.load_cert_chain(user["client-certificate"], user["client-key"])
        ca = CertificateAuthority(directory / "fault-proxy-pki", "kubejobs-fault-proxy-ca")
        serving = ca.issue("proxy", "fault-proxy", dns_names=("localhost",), ips=("127.0.0.1",))
        self.ca = ca.pair.cert
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(str(serving.cert), str(serving.key))
        self.stats = Stats()
        self._faults: list[_Fault] = []
        self._lock = threading.Lock()
        self._watches: set[tuple[socket.socket, http.client.HTTPSConnection]] = set()
        self.closing = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        self._server.daemon_threads = True
        self._server.socket = tls.wrap_socket(self._server.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="fault-proxy", daemon=True)

    def __enter__(self) -> FaultProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.closing.set()
        self.clear()
        self.drop_watches()
        self._server.shutdown()
        self._server.server_close()

    def kubeconfig(self, path: Path) -> Path:
        """A kubeconfig for the proxy: its CA, no credentials (the proxy authenticates upstream)."""
        return write_kubeconfig(path, self.url, self.ca, "through-fault-proxy", None)

    # -- faults, switched by the test ------------------------------------------------------------------------
    def _add(self, fault: _Fault) -> None:
        with self._lock:
            self._faults.append(fault)

    def outage(self, seconds: float, mode: str = "503", methods: Optional[set[str]] = None) -> float:
        """Every matching request fails for ``seconds`` from now: answered 503, or (``mode="drop"``) its
        connection closed unanswered. Returns the monotonic time the outage ends."""
        until = time.monotonic() + seconds
        action = "drop" if mode == "drop" else "status"
        self._add(_Fault(action, until=until, methods=frozenset(methods) if methods else None))
        return until

    def fail(
        self, count: int, status: int, retry_after: Optional[float] = None, methods: Optional[set[str]] = None
    ) -> None:
        self._add(_Fault("status", count, status=status, retry_after=retry_after, methods=_set(methods)))

    def stall(self, count: int, seconds: float, methods: Optional[set[str]] = None) -> None:
        self._add(_Fault("stall", count, seconds=seconds, methods=_set(methods)))

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()

    def drop_watches(self) -> int:
        """Cut every watch stream being relayed (both sides); returns how many."""
        with self._lock:
            watches = list(self._watches)
        for client, upstream in watches:
            with contextlib.suppress(OSError):
                client.shutdown(socket.SHUT_RDWR)
            if upstream.sock is not None:
                with contextlib.suppress(OSError):
                    upstream.sock.shutdown(socket.SHUT_RDWR)
        return len(watches)

    def open_watches(self) -> int:
        with self._lock:
            return len(self._watches)

    def take_fault(self, method: str) -> Optional[_Fault]:
        now = time.monotonic()
        with self._lock:
            self._faults = [f for f in self._faults if not f.spent(now)]
            for fault in self._faults:
                if fault.applies(method, now):
                    if fault.count is not None:
                        fault.count -= 1
                    return fault
        return None

    def record(self, method: str, kind: str, status: int) -> None:
        with self._lock:
            self.stats.requests[(method, kind)] += 1
            self.stats.responses[status] += 1
            self.stats.log.append((time.monotonic(), method, kind, status))

    def upstream(self) -> http.client.HTTPSConnection:
        host, port = self._upstream
        return http.client.HTTPSConnection(host, port, context=self._upstream_tls, timeout=600)

    def track(self, entry: tuple[socket.socket, http.client.HTTPSConnection], on: bool) -> None:
        with self._lock:
            (self._watches.add if on else self._watches.discard)(entry)


def _set(methods: Optional[set[str]]) -> Optional[frozenset[str]]:
    return frozenset(methods) if methods else None


def _make_handler(proxy: FaultProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        _conn: Optional[http.client.HTTPSConnection] = None

        def log_message(self, format: str, *args: Any) -> None:  # quiet: the stats say what happened
            pass

        def _drop(self) -> None:
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)

        def _status(self, code: int, retry_after: Optional[float]) -> None:
            reason = http.client.responses.get(code, "Error").replace(" ", "")
            body = json.dumps(
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "status": "Failure",
                    "code": code,
                    "reason": reason,
                    "message": f"injected by the fault proxy: {code}",
                }
            ).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            if retry_after is not None:
                self.send_header("Retry-After", f"{retry_after:g}")
            self.end_headers()
            self.wfile.write(body)

        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            kind = verb(self.command, self.path)
            fault = proxy.take_fault(self.command)
            if fault is not None:
                if fault.action == "status":
                    proxy.record(self.command, kind, fault.status)
                    self._status(fault.status, fault.retry_after)
                    return
                proxy.record(self.command, kind, 0)
                if fault.action == "stall":
                    proxy.closing.wait(fault.seconds)
                self._drop()
                return
            self._forward(kind, body)

        def _forward(self, kind: str, body: Optional[bytes]) -> None:
            if self._conn is None:
                self._conn = proxy.upstream()
            conn = self._conn
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_HEADERS}
            try:
                conn.request(self.command, self.path, body=body, headers=headers)
                response = conn.getresponse()
            except (OSError, http.client.HTTPException):  # the API server is down: the client sees a drop
                self._conn = None
                conn.close()
                proxy.record(self.command, kind, 0)
                self._drop()
                return
            proxy.record(self.command, kind, response.status)
            self.send_response(response.status)
            for key, value in response.getheaders():
                if key.lower() not in _HOP_HEADERS:
                    self.send_header(key, value)
            if response.getheader("Transfer-Encoding", "").lower() != "chunked":
                payload = response.read()
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
                return
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            entry = (self.connection, conn)
            proxy.track(entry, True)
            try:
                while True:
                    chunk = response.read1(65536)
                    if not chunk:
                        break
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
            except (OSError, http.client.HTTPException, ValueError):
                self._conn = None
                conn.close()
                self._drop()
            finally:
                proxy.track(entry, False)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

    return Handler
