"""The connector's gRPC server, with TLS as an option (``kubejobs serve``).

``pyflyte serve connector`` (flytekit 1.16) listens in plaintext only. This module builds the same server
from flytekit's own parts: the async, sync and metadata connector servicers of
``flytekit.extend.backend.connector_service``, the ``grpc.health.v1`` health service reporting every
flyteidl agent service as SERVING, and Prometheus metrics on their own HTTP port; it listens with TLS
when a certificate and key are given. Two differences, both deliberate: only the connectors that
installed packages register through flytekit's ``flytekit.plugins`` entry points are served (``pyflyte
serve connector`` also imports flytekit's webhook connector, which makes HTTP requests wherever a task
says), and SIGTERM stops the server gracefully and then the connector's cache threads.

FlytePropeller's connector client (flyteplugins ``webapi/connector``) dials with ``insecure: false`` by
verifying the server's certificate against its system roots for the endpoint's host name, and presents
no client certificate: so this is server-side TLS, and the certificate must name the Service's DNS name.

>>> tls = TlsFiles.from_options(None, None)
>>> tls is None
True
"""

from __future__ import annotations

import asyncio
import logging
import signal
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    import grpc

__all__ = ["TlsFiles", "build_server", "serve", "server_credentials"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TlsFiles:
    """PEM files of the server's certificate (chain) and private key, e.g. a mounted ``kubernetes.io/tls``
    Secret's ``tls.crt`` and ``tls.key``."""

    cert: Path
    key: Path

    @classmethod
    def from_options(cls, cert: Optional[str], key: Optional[str]) -> Optional[TlsFiles]:
        """Both files or neither (plaintext); one without the other is a ValueError."""
        if not cert and not key:
            return None
        if not cert or not key:
            given, missing = ("tls-cert-file", "tls-key-file") if cert else ("tls-key-file", "tls-cert-file")
            raise ValueError(f"--{given} was given without --{missing}: TLS needs both")
        return cls(Path(cert), Path(key))


def server_credentials(tls: TlsFiles) -> grpc.ServerCredentials:
    """gRPC server credentials from the files; a missing, unreadable or non-PEM file is a ValueError naming it."""
    import grpc

    pem: dict[str, bytes] = {}
    for what, path in (("certificate", tls.cert), ("private key", tls.key)):
        try:
            data = path.read_bytes()
        except OSError as e:
            raise ValueError(f"cannot read the TLS {what} {str(path)!r}: {e.strerror or e}") from None
        if b"-----BEGIN " not in data:
            raise ValueError(f"the TLS {what} {str(path)!r} is not a PEM file")
        pem[what] = data
    return grpc.ssl_server_credentials([(pem["private key"], pem["certificate"])])


def build_server(workers: int) -> grpc.aio.Server:
    """A gRPC server with flytekit's connector services and the health service (not yet listening)."""
    import grpc
    from flyteidl.service import agent_pb2
    from flyteidl.service.agent_pb2_grpc import (
        add_AgentMetadataServiceServicer_to_server,
        add_AsyncAgentServiceServicer_to_server,
        add_SyncAgentServiceServicer_to_server,
    )
    from flytekit.extend.backend.connector_service import (
        AsyncConnectorService,
        ConnectorMetadataService,
        SyncConnectorService,
    )
    from grpc_health.v1 import health, health_pb2, health_pb2_grpc

    server = grpc.aio.server(ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kubejobs-grpc"))
    add_AsyncAgentServiceServicer_to_server(AsyncConnectorService(), server)
    add_SyncAgentServiceServicer_to_server(SyncConnectorService(), server)
    add_AgentMetadataServiceServicer_to_server(ConnectorMetadataService(), server)
    health_servicer = health.HealthServicer(
        experimental_non_blocking=True,
        experimental_thread_pool=ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kubejobs-health"),
    )
    for service in agent_pb2.DESCRIPTOR.services_by_name.values():
        health_servicer.set(service.full_name, health_pb2.HealthCheckResponse.SERVING)
    health_servicer.set(health.SERVICE_NAME, health_pb2.HealthCheckResponse.SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    return server


async def serve(
    port: int,
    prometheus_port: int,
    workers: int = 10,
    tls: Optional[TlsFiles] = None,
    host: str = "[::]",
    grace: float = 10.0,
) -> None:
    """Serve until SIGTERM or SIGINT; then stop accepting calls, let running ones finish for ``grace``
    seconds, and stop the connector's runtime (cache threads, API client)."""
    import flytekit  # noqa: F401  (its flytekit.plugins entry points register the installed connectors)
    from prometheus_client import start_http_server

    from .runtime import shutdown

    credentials = server_credentials(tls) if tls is not None else None  # fail before binding anything
    start_http_server(prometheus_port)
    server = build_server(workers)
    address = f"{host}:{port}"
    if credentials is not None:
        server.add_secure_port(address, credentials)
    else:
        server.add_insecure_port(address)
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopping.set)
    await server.start()
    log.info("kubejobs connector serving on %s (%s)", address, "TLS" if credentials is not None else "plaintext")
    try:
        await stopping.wait()
    finally:
        await server.stop(grace)
        shutdown()
