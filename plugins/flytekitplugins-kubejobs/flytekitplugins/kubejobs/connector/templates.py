"""The compute templates tasks name, read from the labelled ConfigMaps of the connector's own namespace.

One informer (``cache.Informer``: list, then watch from the list's resourceVersion, with the connector's retry
policy) keeps them in memory, started by the first task that names a template; a template created or changed
later reaches the next create through the watch. Until the informer has synced (and with the cache off, or
after it stopped on a 403) each such create lists the ConfigMaps directly. Only the configured namespace is
ever listed or watched: a ConfigMap with the template label anywhere else is not a template. Stored templates
are parsed at every create from what is held (``wire.compute.TemplateSet.from_configmaps``): a malformed one
is kept as invalid with its message, so it fails only the tasks naming it, and never the cache.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Optional

from ..wire.compute import LABEL_SELECTOR, TemplateSet
from .cache import Informer
from .client import CONFIGMAPS

if TYPE_CHECKING:
    from .client import KubeClient

__all__ = ["MAX_TEMPLATES", "TemplateStore", "keep_template"]

Obj = dict[str, Any]
#: Most template ConfigMaps held in memory (the platform's own namespace; beyond it the rest are not seen).
MAX_TEMPLATES = 1000
_KEPT_METADATA = ("name", "namespace", "uid", "resourceVersion", "labels")


def keep_template(obj: Obj) -> Obj:
    """What of a ConfigMap a template is read from: its name, namespace, labels and data.

    >>> keep_template({"metadata": {"name": "a", "managedFields": [{}]}, "data": {"cpu": "1"}})
    {'metadata': {'name': 'a'}, 'data': {'cpu': '1'}}
    """
    meta = obj.get("metadata") or {}
    out: Obj = {"metadata": {k: meta[k] for k in _KEPT_METADATA if k in meta}, "data": obj.get("data") or {}}
    if obj.get("binaryData"):
        out["binaryData"] = obj["binaryData"]  # refused when parsed: a template is text
    return out


class TemplateStore:
    """The templates of one namespace, from a watch cache (``cached``) or a direct list per call."""

    def __init__(self, client: KubeClient, namespace: str, *, cached: bool = True):
        self.client, self.namespace, self.cached = client, namespace, cached
        self._informer: Optional[Informer] = None
        self._lock = threading.Lock()
        self._closed = False

    def _running_informer(self) -> Optional[Informer]:
        """The informer, (re)started when none runs (first use, or stopped by a 403: a later grant is seen)."""
        if not self.cached:
            return None
        with self._lock:
            if self._closed:
                return None
            if self._informer is None or not self._informer.running:
                self._informer = Informer(
                    self.client, CONFIGMAPS, self.namespace, LABEL_SELECTOR, MAX_TEMPLATES, keep=keep_template
                ).start()
            return self._informer

    @property
    def informer(self) -> Optional[Informer]:
        return self._informer

    async def snapshot(self) -> TemplateSet:
        """The templates now: from the synced cache, else from a direct list (errors: the client's ``ApiError``s,
        e.g. ``Forbidden`` when RBAC does not grant the ConfigMaps)."""
        informer = self._running_informer()
        held = informer.snapshot() if informer is not None else None
        if held is None:
            held = await self.client.list_configmaps(self.namespace, LABEL_SELECTOR)
        return TemplateSet.from_configmaps(held, self.namespace)

    def close(self, timeout: float = 1.0) -> None:
        with self._lock:
            self._closed = True
            informer, self._informer = self._informer, None
        if informer is not None:
            informer.request_stop()
            self.client.abort_cache_requests()  # a list in flight is cut too (the job cache is closed first)
            informer.join(timeout)
