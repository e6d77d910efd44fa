"""The connector's process-wide state: settings, backend configuration, API client and job cache.

Built on first use (from ``$KUBEJOBS_CONNECTOR_CONFIG``), so registering the connectors at
``import flytekit`` costs nothing; ``configure()`` replaces it (tests, embedding), ``shutdown()``
stops the cache threads and the client's thread pool.
"""

from __future__ import annotations

import re
import threading
from typing import TYPE_CHECKING, Any, Optional

from .errors import NotFound, TaskRefused

if TYPE_CHECKING:
    from ..backend import BackendConfig
    from ..wire.kinds import JobKind
    from .cache import JobCache
    from .client import KubeClient
    from .ownership import Ownership
    from .settings import ConnectorSettings

__all__ = ["MANAGED_BY", "MANAGED_BY_LABEL", "Runtime", "configure", "runtime", "shutdown"]

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "flytekitplugins-kubejobs"
Obj = dict[str, Any]
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\Z")


class Runtime:
    """Everything a connector call needs, shared by the connectors of the four task types."""

    def __init__(self, settings: ConnectorSettings, client: Optional[KubeClient] = None):
        from .cache import JobCache, PodLists
        from .client import KubeClient
        from .ownership import Ownership

        self.settings = settings
        self.backend: BackendConfig = settings.backend_config
        self.ownership: Ownership = Ownership.from_file(settings.ownership_key_file)
        self.client = client or KubeClient(settings)
        from .templates import TemplateStore

        #: The compute templates tasks may name (labelled ConfigMaps of the connector's own namespace).
        self.templates = TemplateStore(self.client, str(settings.templates_namespace), cached=settings.cache)
        self._build_config: Optional[BackendConfig] = None
        #: TrainJob pods per job, for the log links (listed again only when the TrainJob changed).
        self.pod_lists = PodLists()
        self.cache: Optional[JobCache] = (
            JobCache(
                self.client,
                f"{MANAGED_BY_LABEL}={MANAGED_BY}",
                settings.cache_max_objects,
                allowed=self.serves,
                max_informers=settings.cache_max_informers,
                idle_timeout=settings.cache_idle_timeout,
            )
            if settings.cache
            else None
        )

    def serves(self, namespace: str) -> bool:
        """Whether ``namespace`` is one the connector may touch (the ``namespaces`` allow-list; empty: any)."""
        allowed = self.settings.namespaces
        return not allowed or namespace in allowed

    def check_namespace(self, namespace: object) -> str:
        """``namespace`` if the connector serves it; else ``TaskRefused``, before any request is made."""
        if not isinstance(namespace, str) or not _DNS_LABEL.match(namespace):
            raise TaskRefused(f"namespace {namespace!r} is not a Kubernetes namespace name")
        if not self.serves(namespace):
            raise TaskRefused(
                f"namespace {namespace!r} is not one of the connector's namespaces {list(self.settings.namespaces)}"
            )
        return namespace

    async def build_config(self) -> BackendConfig:
        """The configuration objects are built with: ``backend`` with ``auto`` targets (``plugins.trainjob``
        ``task-types``, ``plugins.mpi`` ``operator``) decided by API discovery on first use, then kept for the
        process (restart the connector after installing or removing an operator). An MPIJob v2beta1 the
        cluster serves wins over a TrainJob for ``mpi`` tasks (the platform installed that operator for them)."""
        if self._build_config is None:
            trainjob, mpi = self.backend.trainjob, self.backend.mpi
            if trainjob.auto or mpi.operator == "auto":
                from dataclasses import replace

                from ..wire.kinds import ENGINE_KINDS, KINDS

                versions = {(k.group, k.version) for k in (*KINDS.values(), *ENGINE_KINDS)}
                listed = {gv: await self.client.api_resources(*gv) for gv in sorted(versions)}

                def served(group: str, version: str, plural: str) -> bool:
                    return plural in listed[(group, version)]

                mpi = mpi.resolve(served)
                trainjob = trainjob.resolve(served)
                if mpi.operator == "v2beta1" and "mpi" in trainjob.task_types:
                    trainjob = replace(trainjob, task_types=trainjob.task_types - {"mpi"})
                self._build_config = replace(self.backend, trainjob=trainjob, mpi=mpi)
            else:
                self._build_config = self.backend
        return self._build_config

    def watch(self, kind: JobKind, namespace: str) -> None:
        """Start the cache for this kind and namespace (no-op without a cache or past its bounds)."""
        if self.cache is not None:
            self.cache.informer(kind, namespace)

    async def read(self, kind: JobKind, namespace: str, name: str) -> Optional[Obj]:
        """The object from the cache, else from a direct GET (also for names the cache saw deleted: the API
        server confirms it, so a job re-created under that name is never reported gone); None when it
        does not exist."""
        if self.cache is not None:
            found = self.cache.lookup(kind, namespace, name)
            if found is not None and found.obj is not None:
                return found.obj
        try:
            return await self.client.get(kind, namespace, name)
        except NotFound:
            return None

    async def config_for(self, template: Any) -> BackendConfig:
        """``build_config()``, with the stored compute templates when the task names any (read only then, so a
        task naming none needs no ConfigMap access)."""
        config = await self.build_config()
        from ..backend.computetemplates import named_templates

        if not named_templates(template):
            return config
        from dataclasses import replace

        return replace(config, compute_templates=await self.templates.snapshot())

    def close(self) -> None:
        if self.cache is not None:
            self.cache.close()
        self.templates.close()
        self.client.close()


_lock = threading.Lock()
_current: Optional[Runtime] = None


def runtime() -> Runtime:
    """The current runtime, built from the environment's configuration on first use."""
    global _current
    from . import grpc_codes

    grpc_codes.install()  # every connector call comes here: our errors keep their gRPC codes in flytekit's service
    with _lock:
        if _current is None:
            from .settings import ConnectorSettings

            _current = Runtime(ConnectorSettings.from_env())
        return _current


def configure(settings: ConnectorSettings) -> Runtime:
    """Replace the runtime with one built from ``settings`` (the previous one is shut down)."""
    global _current
    fresh = Runtime(settings)
    with _lock:
        old, _current = _current, fresh
    if old is not None:
        old.close()
    return fresh


def shutdown() -> None:
    """Stop the cache threads and the client; the next call builds a fresh runtime."""
    global _current
    with _lock:
        old, _current = _current, None
    if old is not None:
        old.close()
