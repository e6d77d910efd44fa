"""Where the Kubernetes configuration comes from, resolved the way kubectl and the official client do:
an explicit kubeconfig file, else ``$KUBECONFIG`` (a ``:``-separated list, merged), else
``~/.kube/config`` when it exists, else the pod's service account (in-cluster). A ``context`` picks a
context of the kubeconfig; with no kubeconfig found it is an error, never silently ignored.

Each caller gets a configuration of its own: nothing here touches the client's process-wide default, and a
token the client refreshes is not written back to the user's kubeconfig file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:
    from kubernetes.client import Configuration

__all__ = ["KubeconfigError", "client_configuration", "kubeconfig_source"]


class KubeconfigError(ValueError):
    """No usable Kubernetes configuration: the message says what was tried."""


def kubeconfig_source(kubeconfig: Optional[str] = None) -> Optional[str]:
    """The kubeconfig file list to load (explicit, ``$KUBECONFIG`` or ``~/.kube/config``), or None for
    in-cluster. ``$KUBECONFIG`` and the home directory are read at each call."""
    if kubeconfig:
        return kubeconfig
    env = os.environ.get("KUBECONFIG")
    if env:
        return env
    default = Path("~/.kube/config").expanduser()
    return str(default) if default.is_file() else None


def client_configuration(kubeconfig: Optional[str] = None, context: Optional[str] = None) -> Configuration:
    """A new client configuration for the cluster the settings (or the environment) name."""
    from kubernetes import client
    from kubernetes import config as kube_config

    config: Any = kube_config  # untyped functions
    cfg = client.Configuration()
    source = kubeconfig_source(kubeconfig)
    if source is not None:
        try:
            config.load_kube_config(config_file=source, context=context, client_configuration=cfg, persist_config=False)
        except (config.ConfigException, OSError) as e:
            where = f"{source!r} (context {context!r})" if context else repr(source)
            raise KubeconfigError(f"no usable kubeconfig in {where}: {e}") from e
        return cfg
    if context:
        raise KubeconfigError(
            f"context {context!r} was given but no kubeconfig was found ($KUBECONFIG, ~/.kube/config)"
        )
    try:
        config.load_incluster_config(client_configuration=cfg)
    except config.ConfigException as e:
        raise KubeconfigError(
            f"no kubeconfig ($KUBECONFIG unset, no ~/.kube/config) and not in a cluster (in-cluster config: {e})"
        ) from e
    return cfg
