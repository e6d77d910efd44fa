"""Wire-level pieces of the fake API server: Status bodies, the request handler, faults, kubeconfig."""

from __future__ import annotations

import contextlib
import json
import socket
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Optional, Protocol

__all__ = ["Fault", "Handler", "HTTPServer", "RequestOwner", "kubeconfig_for", "status_body"]


class RequestOwner(Protocol):
    """What the handler calls back: the server object that owns the connections and answers requests.

    A protocol rather than ``FakeApiServer`` itself, so this module does not import ``server`` (which imports
    this one): the fake server has no import cycle.
    """

    def _track(self, conn: socket.socket, add: bool) -> None: ...

    def _dispatch(self, h: Handler, method: str) -> None: ...


@dataclass
class Fault:
    """The next ``remaining`` matching requests fail: with ``status``, or by dropping the connection."""

    remaining: int
    status: int = 500
    retry_after: Optional[float] = None
    methods: Optional[frozenset[str]] = None
    drop: bool = False
    #: With ``drop``: apply the write first, then drop the connection (the response is lost).
    after_commit: bool = False
    watches: bool = True
    #: Hold the request this long before answering normally (a slow API server; 0: no stall).
    stall: float = 0.0
    #: Only requests in these namespaces (None: any request).
    namespaces: Optional[frozenset[str]] = None

    def matches(self, method: str, is_watch: bool, namespace: Optional[str] = None) -> bool:
        wanted = self.methods is None or method in self.methods
        in_scope = self.namespaces is None or namespace in self.namespaces
        return self.remaining > 0 and wanted and in_scope and (self.watches or not is_watch)


def kubeconfig_for(url: str, namespace: str = "default") -> dict[str, Any]:
    """A kubeconfig (as a dict) for a fake API server at ``url`` (also one running in another process)."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "fake", "cluster": {"server": url}}],
        "users": [{"name": "fake", "user": {"token": "fake-token"}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake", "namespace": namespace}}],
        "current-context": "fake",
    }


def status_body(code: int, reason: str, message: str, **details: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = details
    return body


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: HTTPServer
    timeout = 60  # idle keep-alive connections end by themselves

    def log_message(self, format: str, *args: Any) -> None:
        return

    def setup(self) -> None:
        super().setup()
        # Headers and body go out as separate writes: without NODELAY, Nagle + delayed ACK add 40 ms.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.owner._track(self.connection, True)

    def finish(self) -> None:
        self.server.owner._track(self.connection, False)
        with contextlib.suppress(OSError):
            super().finish()

    def do_GET(self) -> None:
        self.server.owner._dispatch(self, "GET")

    def do_POST(self) -> None:
        self.server.owner._dispatch(self, "POST")

    def do_DELETE(self) -> None:
        self.server.owner._dispatch(self, "DELETE")

    def do_PUT(self) -> None:
        self.server.owner._dispatch(self, "PUT")

    def do_PATCH(self) -> None:
        self.server.owner._dispatch(self, "PATCH")

    # -- response helpers ----------------------------------------------------------------------------
    def send_json(self, code: int, body: Any, headers: Optional[dict[str, str]] = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def send_chunk(self, body: Any) -> None:
        data = json.dumps(body).encode() + b"\n"
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()


class HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    owner: RequestOwner
